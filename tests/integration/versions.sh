#!/bin/bash
# Daemons and clients of different protocol versions refuse each other with
# an error that names both versions: a client of another control version
# (CTL_VERSION, which also covers the rings' and the done page's layouts)
# gets an ERROR saying so and the daemon logs it; libferry and ferryctl
# facing a daemon of another control version say so; a daemon of another
# wire version (WIRE_VERSION) is refused and both ends log both versions.
. "$(dirname "$0")/lib.sh"

ctl=$(sed -n 's/^#define CTL_VERSION *\([0-9]*\).*/\1/p' "$(dirname "$0")/../../proto/ctl.h")
wire=$(sed -n 's/^#define WIRE_VERSION *\([0-9]*\).*/\1/p' "$(dirname "$0")/../../proto/wire.h")

# A client of control version ctl + 1.
start_daemon v0 || exit 1
out=$(prog ft_raw "$TMP/v0" ctl-version 2>&1)
expect "a client of another control version is refused, naming both versions" \
	grep -q "speaks control protocol version $((ctl + 1)), ferryd (ferry [0-9.]*) version $ctl" <<<"$out"
expect "the daemon logs it" grep -q "control protocol version $((ctl + 1)), ferryd (ferry [0-9.]*) version $ctl" "$TMP/v0.log"
expect "the daemon still serves clients" bash -c "FERRY_RUNTIME_DIR=$TMP/v0 $BUILD/tests/ft_open --job after --rank 0 --size 1 >/dev/null"
expect "the daemon stops cleanly" stop_daemon v0

# libferry and ferryctl facing a daemon of control version ctl + 1.
mkdir -p "$TMP/fake"
fake() {
	bg fake.log prog ft_raw "$TMP/fake" fake-daemon
	wait_for "grep -q listening \"$TMP/fake.log\""
}
fake
out=$(FERRY_RUNTIME_DIR=$TMP/fake prog ft_open --job v --rank 0 --size 1 --timeout 3000 2>&1)
echo "# $out"
expect "libferry names both versions (EPROTO)" \
	grep -q "EPROTO.*ferryd speaks control protocol version $((ctl + 1)), this libferry (ferry [0-9.]*) version $ctl" <<<"$out"
wait "$LASTPID" 2>/dev/null
fake
out=$("$BUILD/ferryctl" --runtime-dir "$TMP/fake" status 2>&1)
expect "ferryctl names both versions" \
	grep -q "ferryd speaks control protocol version $((ctl + 1)), this ferryctl (ferry [0-9.]*) version $ctl" <<<"$out"
wait "$LASTPID" 2>/dev/null

# A daemon of wire version wire + 1 connecting (played by ft_peer): the
# real one logs both versions and answers with a bare header of its own
# version, from which the other end can log the same, then closes.
cluster_conf vw 2 || exit 1
start_daemon vw_n1 --config "$TMP/vw.conf" --node 1 || exit 1
out=$(prog ft_peer 127.0.0.1 $((CPORT_vw + 1)) version 0 1 vw 2>&1)
rc=$?
expect "a daemon of another wire version: the connection is closed" test "$rc" = 0
expect "... after a frame header of this daemon's version ($wire)" grep -qx "notice version $wire" <<<"$out"
expect "... and the daemon logs both versions" \
	grep -q "speaks wire protocol version $((wire + 1)), this ferryd (ferry [0-9.]*) version $wire" "$TMP/vw_n1.log"
expect "the daemon stops cleanly" stop_daemon vw_n1
finish
