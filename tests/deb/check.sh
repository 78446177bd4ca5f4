#!/bin/bash
# tests/deb/check.sh - make check-deb: builds the Debian packages (make deb)
# and checks them: lintian reports no error and no warning (pedantic and
# informational tags are shown, not counted), the configuration is a
# conffile and no key is shipped, the units are there and upgrades do not
# restart the daemon, libferry0's symbols are ferry.h's functions, the
# changelog's version is the Makefile's, and each binary has its manual
# page.  Prints TAP-style "ok - deb: ..." lines; exits non-zero on a failure.
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT" || exit 1
DEBS=build/deb
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fails=0
ok()   { echo "ok - deb: $*"; }
fail() { echo "not ok - deb: $*"; fails=$((fails + 1)); }
check() { local what=$1; shift; if "$@"; then ok "$what"; else fail "$what"; fi; }

start=$(date +%s)
if ! nice -n 19 make --no-print-directory -s deb >"$TMP/make.log" 2>&1; then
	fail "make deb"
	tail -30 "$TMP/make.log" | sed 's/^/#   /'
	exit 1
fi
ok "make deb built $(ls $DEBS/*.deb | grep -vc dbgsym) packages in $(($(date +%s) - start)) s"

ver=$(sed -n 's/^VERSION *:= *//p' Makefile)
cver=$(dpkg-parsechangelog -l packaging/debian/changelog -S Version)
check "the changelog's version ($cver) is the Makefile's ($ver)" test "${cver%%-*}" = "$ver"

for p in ferryd libferry0 libferry-dev; do
	f=$(ls $DEBS/${p}_"$cver"_*.deb 2>/dev/null | head -n 1)
	[ -n "$f" ] || { fail "no $p package"; continue; }
	mkdir -p "$TMP/$p"
	dpkg-deb -c "$f" | awk '{ print $6 }' | sed 's|^\./|/|' >"$TMP/$p/files"
	dpkg-deb -e "$f" "$TMP/$p/DEBIAN"
done

# lintian: errors and warnings fail, the rest is shown.
lintian --allow-root -I --pedantic --tag-display-limit 0 $DEBS/*.changes >"$TMP/lintian" 2>&1
lrc=$?
sed 's/^/#   /' "$TMP/lintian"
ew=$(grep -cE '^[EW]: ' "$TMP/lintian")
# (lintian exits 2 when it could not run, 1 for tags it fails on: both
# fail here, beside the count, which a lintian that never ran makes 0)
check "lintian ran and found no errors or warnings ($ew, status $lrc)" bash -c "[ $ew -eq 0 ] && [ $lrc -eq 0 ]" 

f=$TMP/ferryd
check "ferryd: /etc/ferry/ferry.conf is a conffile" grep -qx /etc/ferry/ferry.conf "$f/DEBIAN/conffiles"
check "ferryd: needrestart is told not to restart ferryd (a conffile)" bash -c "grep -qx /etc/needrestart/conf.d/ferryd.conf \
	'$f/DEBIAN/conffiles' && grep -qx /etc/needrestart/conf.d/ferryd.conf '$f/files'"
check "ferryd: purging takes the state directory away, removing keeps it" bash -c "grep -q 'rm -rf /var/lib/private/ferry' \
	'$f/DEBIAN/postrm' && grep -q '\"\$1\" = purge' '$f/DEBIAN/postrm'"
check "libferry0: breaks every ferryd but its own version (libferry and ferryd speak one control version)" \
	bash -c "dpkg-deb -f $DEBS/libferry0_*.deb Breaks | grep -q 'ferryd (<< ' && dpkg-deb -f $DEBS/libferry0_*.deb Breaks | grep -q 'ferryd (>> '"
check "ferryd: no cluster key shipped" bash -c "! grep -q 'cluster.key\$' '$f/files'"
check "ferryd: ferryd, ferryctl, the service and the socket" bash -c "grep -qx /usr/sbin/ferryd '$f/files' &&
	grep -qx /usr/bin/ferryctl '$f/files' && grep -qx /lib/systemd/system/ferryd.service '$f/files' &&
	grep -qx /lib/systemd/system/ferryd.socket '$f/files'"
check "ferryd: the units are enabled and started on installation" bash -c "grep -q \"deb-systemd-helper enable 'ferryd.service'\" '$f/DEBIAN/postinst' &&
	grep -q \"deb-systemd-invoke start 'ferryd.service' 'ferryd.socket'\" '$f/DEBIAN/postinst'"
# Stops only where the script was called to remove (the "if" line above
# each stop says so); --no-restart-after-upgrade alone stops the units in
# preinst on upgrade.
stops_only_on_remove() {
	awk '/deb-systemd-invoke stop/ && prev !~ /"\$1" = remove/ { bad = 1 } { prev = $0 } END { exit bad }' "$@"
}
check "ferryd: an upgrade neither stops nor restarts the daemon" bash -c "$(declare -f stops_only_on_remove);
	! grep -q restart '$f/DEBIAN/postinst' && ! grep -qs 'deb-systemd-invoke stop' '$f/DEBIAN/preinst' &&
	stops_only_on_remove '$f/DEBIAN/prerm'"
check "ferryd: no system user is made (the unit has DynamicUser=yes)" bash -c "! grep -qs adduser '$f/DEBIAN/postinst' &&
	dpkg-deb --fsys-tarfile $DEBS/ferryd_${cver}_*.deb | tar -xO ./lib/systemd/system/ferryd.service | grep -qx DynamicUser=yes"
check "ferryd: manual pages ferryd(8), ferryctl(8), ferry.conf(5), ferry(7)" bash -c "
	for m in man8/ferryd.8 man8/ferryctl.8 man5/ferry.conf.5 man7/ferry.7; do
		grep -qx /usr/share/man/\$m.gz '$f/files' || exit 1; done"

f=$TMP/libferry0
check "libferry0: libferry.so.0 and a symbols file" bash -c "grep -q '/libferry.so.0\$' '$f/files' && [ -s '$f/DEBIAN/symbols' ]"
funcs=$(sed -n 's/^[a-z].*[ *]\(ferry_[a-z0-9_]*\)(.*/\1/p' client/ferry.h | sort -u)
syms=$(sed -n 's/^ \(ferry_[a-z0-9_]*\)@FERRY_0 .*/\1/p' "$f/DEBIAN/symbols" | sort -u)
check "libferry0: its symbols are the $(echo "$funcs" | wc -l) functions of ferry.h" test "$funcs" = "$syms"

f=$TMP/libferry-dev
check "libferry-dev: ferry.h, libferry.a, libferry.so, ferry.pc" bash -c "grep -qx /usr/include/ferry.h '$f/files' &&
	grep -q '/libferry.a\$' '$f/files' && grep -q '/libferry.so\$' '$f/files' && grep -q '/pkgconfig/ferry.pc\$' '$f/files'"
check "libferry-dev: a manual page for every function" bash -c "
	for fn in $(echo $funcs); do grep -qx /usr/share/man/man3/\$fn.3.gz '$f/files' || { echo \"# no page \$fn\"; exit 1; }; done"
[ "$fails" -eq 0 ]
