#!/bin/bash
# One job's receiver that does not consume holds back only that job (hardening
# finding 7, fwd/flow.h): its daemon parks what still arrives for it and tells
# the sender's daemon to stop sending to that rank (XOFF), instead of pausing
# the link that every job and user on it shares.  Another job across the same
# link runs to completion meanwhile; nothing of the held job is lost, and its
# sender feels the backpressure as -EAGAIN.
. "$(dirname "$0")/lib.sh"

cluster_conf sr 2 "limits: { ring_bytes = 262144; pending_bytes = 262144; link_bytes = 1048576; };" || exit 1
start_daemon sr_n0 --config "$TMP/sr.conf" --node 0 || exit 1
start_daemon sr_n1 --config "$TMP/sr.conf" --node 1 || exit 1
cluster_up sr 2 || exit 1

N=100000        # 100000 x 200 B = 20 MB, far beyond every queue and buffer
FERRY_RUNTIME_DIR=$TMP/sr_n1 bg arecv.log prog ft_stream --job held --rank 1 --items $N --len 200 \
	--hold-until "$TMP/go"
arecv=$LASTPID
FERRY_RUNTIME_DIR=$TMP/sr_n0 bg asend.log prog ft_stream --job held --rank 0 --items $N --len 200
asend=$LASTPID
expect "the held receiver's daemon told the sender's daemon to wait (XOFF)" \
	wait_for '[ "$(stat sr_n1 flow_xoff_sent)" -ge 1 ] && [ "$(stat sr_n0 flow_xoff_received)" -ge 1 ]'
expect "... and the sender's daemon stopped taking its items (sender stalled)" \
	wait_for '"$BUILD/ferryctl" --runtime-dir "$TMP/sr_n0" status | grep -q "sender stalled"'

expect "another job across the same link completes while the receiver holds" \
	run_cluster_job sr other 2 2 --items 20000 --len 16 --len-max 64 --steps 3 --sync
expect "... (the held receiver has not consumed yet)" test ! -e "$TMP/go"
expect "... and the held receiver is still waiting" kill -0 "$arecv"
expect "the link into the held receiver's daemon was never paused (stalls $(peerstat sr_n1 0 stalls))" \
	test "$(peerstat sr_n1 0 stalls)" = 0

touch "$TMP/go"
expect "the held receiver gets all $N items, in order, intact" wait "$arecv"
expect "the held job's sender finishes" wait "$asend"
eagain=$(sed -n 's/.*eagain \([0-9]*\).*/\1/p' "$TMP/asend.log")
expect "... having felt the backpressure as -EAGAIN ($eagain times)" test "${eagain:-0}" -gt 0
expect "the receiver's daemon let the sender go on (XON) once it drained" \
	test "$(stat sr_n1 flow_xon_sent)" -ge 1
expect "nothing was dropped" test "$(stat sr_n1 items_dropped)$(stat sr_n0 items_dropped)" = 00
expect "daemons exit cleanly" stop_cluster sr 2
finish
