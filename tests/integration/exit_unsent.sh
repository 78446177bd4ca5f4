#!/bin/bash
# A client that exits without ferry_close (or is killed) with items still in
# its TX ring (hardening finding 10): the daemon keeps taking them for up to
# 1 s after the exit, as far as the destination has room; what cannot go on
# by then is counted as lost (ferryctl stats items_lost) and logged, never
# vanishes unaccounted.
. "$(dirname "$0")/lib.sh"

cat >"$TMP/small.conf" <<'CONF'
limits: { ring_bytes = 262144; pending_bytes = 262144; memory_bytes = 1048576; };
CONF
start_daemon n0 --config "$TMP/small.conf" || exit 1
# What ferryd takes from a TX ring: ranks on one node use it only without
# direct rings (with them, the items are in the receiver's ring already).
export FERRY_DIRECT=0
export FERRY_RUNTIME_DIR=$TMP/n0

# The receiver consumes: everything the sender left behind still arrives.
bg r1.log prog ft_stream --job a --rank 1 --items 1000000000 --len 32 --until-quiet
r=$LASTPID
prog ft_stream --job a --rank 0 --items 100000000 --len 32 --abandon 0 >"$TMP/s1.log" 2>&1
n=$(sed -n 's/rank 0 abandoned after \([0-9]*\) items/\1/p' "$TMP/s1.log")
wait "$r"
got=$(sed -n 's/rank 1 got \([0-9]*\)/\1/p' "$TMP/r1.log")
expect "a sender that exits with a full TX ring (${n:-?} items sent; far more than one drain round)" \
	test "${n:-0}" -gt 2000
same_or_show() { [ "${1:-x}" = "$2" ] || { sed 's/^/#   r1: /' "$TMP/r1.log"; false; }; }
expect "... its receiver gets every one of them ($got)" same_or_show "$got" "$n"
expect "... nothing counted as lost" test "$(stat n0 items_lost)" = 0

# The receiver holds: what cannot go on within 1 s is counted as lost.
bg r2.log prog ft_stream --job b --rank 1 --items 1000000000 --len 32 --until-quiet --hold-until "$TMP/go"
r=$LASTPID
# (It exits once its receiver's ring, its queue in the daemon and its own TX
# ring are full, the daemon taking no more for 300 ms.)
prog ft_stream --job b --rank 0 --items 100000000 --len 32 --abandon stuck >"$TMP/s2.log" 2>&1
n=$(sed -n 's/rank 0 abandoned after \([0-9]*\) items/\1/p' "$TMP/s2.log")
expect "a sender that exits while its receiver takes nothing: the rest is counted lost after 1 s" \
	wait_for '[ "$(stat n0 items_lost)" -gt 0 ]'
lost=$(stat n0 items_lost)
expect "... and logged" grep -q "exited with $lost items in its TX ring that could not go on" "$TMP/n0.log"
touch "$TMP/go"
wait "$r"
got=$(sed -n 's/rank 1 got \([0-9]*\)/\1/p' "$TMP/r2.log")
expect "every item is accounted for: received $got + lost $lost = sent $n" test $((got + lost)) = "$n"
expect "daemon exits cleanly" stop_daemon n0
finish
