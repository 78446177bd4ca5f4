#!/bin/bash
# A fast sender and a slow receiver: nothing is lost, the daemon's queue stays
# within its bound, and the sender sees backpressure (-EAGAIN, or waits).
. "$(dirname "$0")/lib.sh"

cat > "$TMP/bp.conf" <<CONF
limits: { ring_bytes = 262144; pending_bytes = 262144; memory_bytes = 1048576; };
CONF
start_daemon n0 --config "$TMP/bp.conf" || exit 1
export FERRY_RUNTIME_DIR=$TMP/n0
# ferryd's backpressure: without this, two ranks on one node would use
# their direct ring (direct.sh tests backpressure there).
export FERRY_DIRECT=0

N=60000   # 60000 x 64 B = 3.8 MB, several times ring + queue
bg recv.log prog ft_stream --job bp --rank 1 --items $N --len 64 --recv-delay-us 1000
r=$LASTPID
bg send.log prog ft_stream --job bp --rank 0 --items $N --len 64
s=$LASTPID
wait $s; src=$?
wait $r; rrc=$?
expect "receiver got all $N items, in order, intact" test $rrc = 0
expect "sender finished" test $src = 0
eagain=$(sed -n 's/.*eagain \([0-9]*\).*/\1/p' "$TMP/send.log")
expect "sender saw -EAGAIN (backpressure): $eagain times" test "${eagain:-0}" -gt 0
expect "daemon stopped draining the sender at least once" test "$(stat n0 stalls)" -gt 0
peak=$(stat n0 memory_queued_peak_bytes)
expect "queued memory peaked at $peak bytes, within limits.memory_bytes" test "$peak" -le 1048576 -a "$peak" -gt 0
expect "nothing dropped" test "$(stat n0 items_dropped)" = 0
[ $rrc = 0 ] || t_fail "receiver output" "$TMP/recv.log"

bg recv2.log prog ft_stream --job bpb --rank 1 --items $N --len 64 --recv-delay-us 1000
r=$LASTPID
bg send2.log prog ft_stream --job bpb --rank 0 --items $N --len 64 --blocking
s=$LASTPID
wait $s; src=$?
wait $r; rrc=$?
expect "with FERRY_BLOCKING the sender waits instead: all $N items arrive" test $rrc = 0 -a $src = 0
expect "... without a single -EAGAIN" grep -q "eagain 0$" "$TMP/send2.log"
expect "daemon exits cleanly" stop_daemon n0
finish
