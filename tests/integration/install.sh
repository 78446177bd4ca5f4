#!/bin/bash
# `make install` into a DESTDIR, then an application built against the
# installed tree with pkg-config, linked shared and static, talks to ferryd.
. "$(dirname "$0")/lib.sh"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
DEST=$TMP/root

make -s -C "$ROOT" install BUILD="$BUILD" DESTDIR="$DEST" PREFIX=/opt/ferry SYSCONFDIR=/etc >"$TMP/install.log" 2>&1
expect "make install DESTDIR=... PREFIX=/opt/ferry succeeds" test $? = 0
for f in opt/ferry/sbin/ferryd opt/ferry/bin/ferryctl opt/ferry/lib/libferry.so.0 opt/ferry/lib/libferry.a opt/ferry/include/ferry.h \
	opt/ferry/lib/pkgconfig/ferry.pc opt/ferry/lib/systemd/system/ferryd.service opt/ferry/lib/systemd/system/ferryd.socket \
	etc/ferry/ferry.conf opt/ferry/share/man/man8/ferryd.8 opt/ferry/share/man/man8/ferryctl.8 \
	opt/ferry/share/man/man5/ferry.conf.5 opt/ferry/share/man/man7/ferry.7 opt/ferry/share/man/man3/ferry.3 \
	opt/ferry/share/man/man3/ferry_recv.3; do
	expect "installed $f" test -e "$DEST/$f"
done
UNITS=$DEST/opt/ferry/lib/systemd/system
expect "the unit runs the installed ferryd" grep -q '^ExecStart=/opt/ferry/sbin/ferryd$' "$UNITS/ferryd.service"
expect "... and loads the cluster key from the installed configuration as a credential" \
	grep -q '^LoadCredential=cluster.key:/etc/ferry/cluster.key$' "$UNITS/ferryd.service"

# The unit's SystemCallFilter= and ferryd's own filter come from one list
# (daemon/core/sandbox.def): every call the built ferryd allows itself is
# in the installed unit's list (or systemd would kill it first).
unit_calls=$(sed -n 's/^SystemCallFilter=//p' "$UNITS/ferryd.service" | tr ' ' '\n' | sort -u)
own_calls=$("$BUILD/ferryd" --syscalls | awk 'NF == 1 { print $1 }' | sort -u)
missing=$(comm -23 <(echo "$own_calls") <(echo "$unit_calls"))
expect "the unit's SystemCallFilter= allows the $(echo "$own_calls" | wc -l) calls ferryd's own filter allows" \
	test -n "$own_calls" -a -z "$missing"
[ -z "$missing" ] || echo "# missing from the unit:" $missing
# ... and the start-up ones, sched_setaffinity for daemon.cpus among them.
expect "the unit's SystemCallFilter= allows sched_setaffinity (daemon.cpus works under the unit)" \
	grep -qx sched_setaffinity <(echo "$unit_calls")

if command -v systemd-analyze >/dev/null; then
	# verify wants the program where the unit says it is.
	mkdir -p "$TMP/units"
	sed "s|^ExecStart=|ExecStart=$DEST|" "$UNITS/ferryd.service" >"$TMP/units/ferryd.service"
	cp "$UNITS/ferryd.socket" "$TMP/units/"
	systemd-analyze verify --man=no "$TMP/units/ferryd.service" "$TMP/units/ferryd.socket" >"$TMP/verify.log" 2>&1
	expect "systemd-analyze verify takes both units without a word (every setting and call name known)" \
		test $? = 0 -a ! -s "$TMP/verify.log"
	sed 's/^/#   /' "$TMP/verify.log"
	systemd-analyze security --offline=yes "$UNITS/ferryd.service" >"$TMP/security.log" 2>&1
	score=$(sed -n 's/.*Overall exposure level for ferryd.service: \([0-9.]*\) .*/\1/p' "$TMP/security.log")
	if awk -v s="$score" 'BEGIN { exit !(s != "" && s <= 2.0) }'; then
		t_ok "systemd-analyze security --offline=yes scores the installed unit $score (at most 2.0)"
	else
		t_fail "systemd-analyze security --offline=yes scores the installed unit ${score:-?} (at most 2.0)" "$TMP/security.log"
	fi
else
	echo "ok - $TEST: systemd-analyze verify and security on the installed unit # SKIP systemd-analyze not installed"
fi
expect "soname is libferry.so.0" bash -c "objdump -p '$DEST/opt/ferry/lib/libferry.so.0' | grep -q 'SONAME *libferry.so.0'"
exported=$(nm -D --defined-only "$DEST/opt/ferry/lib/libferry.so.0" | awk '$2 == "T" { print $3 }' | sed 's/@.*//' | sort -u)
expect "the shared library exports only ferry_* functions" bash -c "! grep -qv '^ferry_' <<<'$exported'"
expect "the static archive defines no global symbol outside ferry_*" \
	bash -c "! nm -g --defined-only '$DEST/opt/ferry/lib/libferry.a' | awk 'NF == 3 { print \$3 }' | grep -qv '^ferry_'"

# libferry-mpi and libferry-mpich, where make built them (mpicc,
# mpicc.mpich there), each linked to its MPI
for m in mpi:libmpi.so mpich:libmpich.so; do
	lib=libferry-${m%%:*}
	[ -e "$BUILD/$lib.so" ] || continue
	M=$DEST/opt/ferry/lib/$lib.so.0
	expect "installed $lib.so.0, soname $lib.so.0, linked to ${m#*:}" \
		bash -c "objdump -p '$M' | grep -q 'SONAME *$lib.so.0' && objdump -p '$M' | grep -q 'NEEDED *${m#*:}'"
	expect "$lib exports only MPI_* functions" \
		bash -c "! nm -D --defined-only '$M' | awk '\$2 == \"T\" { print \$3 }' | grep -qv '^MPI_'"
	expect "$lib finds the installed libferry next to it" \
		bash -c "ldd '$M' | grep -q '$DEST/opt/ferry/lib/libferry.so.0'"
done

# ... and only then: a build configured without MPI (HAVE_MPI=, as
# debian/rules builds) installs no libferry-mpi, whatever $BUILD holds
make -s -C "$ROOT" install BUILD="$BUILD" DESTDIR="$TMP/nompi" PREFIX=/opt/ferry SYSCONFDIR=/etc HAVE_MPI= HAVE_MPICH= \
	>"$TMP/install-nompi.log" 2>&1
expect "make install HAVE_MPI= succeeds" test $? = 0
expect "... and installs no libferry-mpi (the build has no MPI)" \
	test -z "$(find "$TMP/nompi" -name 'libferry-mpi*' -o -name 'libferry-mpich*')"

cat >"$TMP/app.c" <<'C'
#include <ferry.h>
#include <stdio.h>
#include <string.h>
int main(void)
{
	struct ferry_item it[4];
	ferry_t *f;
	int n;

	if (ferry_open(&f, &(struct ferry_opts){ .job = "app", .rank = 0, .size = 1 }) < 0) {
		fprintf(stderr, "%s\n", ferry_last_error());
		return 1;
	}
	ferry_send(f, 0, 3, "installed", 9);
	n = ferry_recv(f, it, 4, 5000);
	if (n != 1 || it[0].len != 9 || memcmp(it[0].data, "installed", 9) || it[0].channel != 3)
		return 1;
	puts("app ok");
	return ferry_close(f) < 0;
}
C
san=""
case "$BUILD" in *san*) san="-fsanitize=address,undefined" ;; esac
export PKG_CONFIG_PATH=$DEST/opt/ferry/lib/pkgconfig PKG_CONFIG_SYSROOT_DIR=$DEST
expect "pkg-config knows ferry" pkg-config --exists ferry
cc $san $(pkg-config --cflags ferry) -o "$TMP/app-shared" "$TMP/app.c" $(pkg-config --libs ferry) \
	-Wl,-rpath,"$DEST/opt/ferry/lib" 2>"$TMP/cc1.log"
rc=$?; cat "$TMP/cc1.log"
expect "an application builds against the installed header and shared library" test $rc = 0
cc $san $(pkg-config --cflags ferry) -o "$TMP/app-static" "$TMP/app.c" "$DEST/opt/ferry/lib/libferry.a" 2>"$TMP/cc2.log"
expect "... and against the static archive" test $? = 0

start_daemon n0 || exit 1
export FERRY_RUNTIME_DIR=$TMP/n0
expect "the shared-linked application exchanges an item" bash -c "'$TMP/app-shared' | grep -q 'app ok'"
expect "the static-linked application too" bash -c "'$TMP/app-static' | grep -q 'app ok'"
expect "it really used the installed libferry.so" \
	bash -c "ldd '$TMP/app-shared' | grep -q '$DEST/opt/ferry/lib/libferry.so.0'"
expect "daemon exits cleanly" stop_daemon n0
finish
