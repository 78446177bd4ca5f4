#!/bin/bash
# A FLUSH sends what its endpoint needs sent, not every buffer of the node:
# on node 0, a chatty process flushes after every item it sends to node 1,
# while another streams items to node 2 without flushing.  The second
# stream's buffer leaves only when it flushes itself (at ferry_close), so its
# items travel together however often the first one flushes (before, every
# flush sent every buffer: one chatty process defeated aggregation for the
# whole node).  The flush timer is set far out of the way.  And a flush is
# carried on by the nodes its items pass.
. "$(dirname "$0")/lib.sh"

# (frames counted: no link-start probes among them)
start_cluster f 3 'topology: { virtual = "direct"; };' 'aggregation: { flush_us = 10000000; };' \
	'transport: { probe = false; };' || exit 1
FERRY_RUNTIME_DIR=$TMP/f_n2 bg bulk1.log prog ft_stream --job bulk --rank 1 --items 200 --len 16
b1=$LASTPID
FERRY_RUNTIME_DIR=$TMP/f_n1 bg chat1.log prog ft_stream --job chat --rank 1 --items 100 --len 16
c1=$LASTPID
FERRY_RUNTIME_DIR=$TMP/f_n0 bg bulk0.log prog ft_stream --job bulk --rank 0 --items 200 --len 16 --send-delay-us 10000
b0=$LASTPID
FERRY_RUNTIME_DIR=$TMP/f_n0 bg chat0.log prog ft_stream --job chat --rank 0 --items 100 --len 16 \
	--send-delay-us 10000 --flush-each
c0=$LASTPID
rc=0
for p in $c0 $c1 $b0 $b1; do wait "$p" || rc=1; done
expect "both streams arrived whole and in order" test $rc = 0
to1=$(peerstat f_n0 1 flush_explicit) to2=$(peerstat f_n0 2 flush_explicit)
frames2=$(peerstat f_n0 2 frames_sent)
expect "the chatty stream's flushes sent its own buffer (toward node 1) $to1 times" test "${to1:-0}" -ge 100
# Toward node 2 explicit flushes also send the job's control messages
# (JOIN, TABLE, the end of the job), a handful.
expect "... and the other stream's buffer (toward node 2) only at its own flush and with control messages: $to2 explicit flushes" \
	test "${to2:-99}" -le 8
expect "... so its 200 items left in $frames2 frames" test "${frames2:-99}" -le 8
[ $rc = 0 ] || for l in chat0 chat1 bulk0 bulk1; do t_fail "$l" "$TMP/$l.log"; done
stop_cluster f 3 >/dev/null

# A flush reaches the end of the route: on a line 0 - 1 - 2, items from node
# 0 to node 2 pass node 1, whose flush timer is as far out of the way.  Each
# is flushed at node 0, and the frame carrying it says so
# (WIRE_FRAME_URGENT): node 1 sends it on at once, and it arrives within the
# receiver's 3 s, not after node 1's 10 s timer.
start_cluster l 3 'topology: { physical = "mesh"; dims = [ 3 ]; };' 'aggregation: { flush_us = 10000000; };' \
	'transport: { probe = false; };' ||
	exit 1
FERRY_RUNTIME_DIR=$TMP/l_n2 bg line1.log prog ft_stream --job line --rank 1 --items 40 --len 16 --recv-timeout 3000
l1=$LASTPID
FERRY_RUNTIME_DIR=$TMP/l_n0 bg line0.log prog ft_stream --job line --rank 0 --items 40 --len 16 \
	--send-delay-us 100000 --flush-each
l0=$LASTPID
wait $l0; r0=$?
wait $l1; r1=$?
expect "flushed items passing a node arrive without waiting for its flush timer" test $r0 = 0 -a $r1 = 0
expect "... node 1 passed them on explicitly ($(peerstat l_n1 2 flush_explicit) frames toward node 2)" \
	test "$(peerstat l_n1 2 flush_explicit)" -ge 40
expect "... not on its timer" test "$(peerstat l_n1 2 flush_timer)" = 0
[ $r1 = 0 ] || t_fail "receiver" "$TMP/line1.log"
finish
