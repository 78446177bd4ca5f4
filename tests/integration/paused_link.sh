#!/bin/bash
# A TCP link whose reading is paused for backpressure still notices its peer's
# death (the review's pausedeath.sh; link_tcp.c watches EPOLLRDHUP while
# paused): the jobs across it fail within the 2 s a lost node is given,
# instead of waiting for ever on a link that will never be read again.
. "$(dirname "$0")/lib.sh"

# The node's memory (1 MiB) is less than what 6 held receivers' queues want
# (256 KiB each), so items that come on after it is full cannot be parked:
# the link into node 1 pauses.
cluster_conf pl 2 "limits: { ring_bytes = 262144; pending_bytes = 262144; link_bytes = 1048576;
	memory_bytes = 1048576; user_memory_bytes = 1048576; };" || exit 1
start_daemon pl_n0 --config "$TMP/pl.conf" --node 0 || exit 1
start_daemon pl_n1 --config "$TMP/pl.conf" --node 1 || exit 1
cluster_up pl 2 || exit 1

HELD=6
recvs=""
for i in $(seq $HELD); do
	FERRY_RUNTIME_DIR=$TMP/pl_n1 bg "held$i.1.log" prog ft_stream --job "held$i" --rank 1 --items 0 --end-step \
		--hold-until "$TMP/go"
	recvs="$recvs $LASTPID"
	FERRY_RUNTIME_DIR=$TMP/pl_n0 bg "held$i.0.log" prog ft_stream --job "held$i" --rank 0 --items 1000000 --len 200 \
		--start-after "$TMP/send"
done
# Every job is set up before the link pauses (a paused link takes no JOIN
# or TABLE either).
expect "$HELD jobs across the link are ready" \
	wait_for '[ "$("$BUILD/ferryctl" --runtime-dir "$TMP/pl_n1" status | grep -c "^job held.*, ready,")" = $HELD ]'
touch "$TMP/send"
expect "$HELD receivers that do not read: the link into node 1 pauses (its stalls counter)" \
	wait_for '[ "$(peerstat pl_n1 0 stalls)" -ge 1 ]'
# It stays paused: nothing frees memory while nobody reads.
recv0=$(peerstat pl_n1 0 frames_recv)
sleep 1
expect "... and stays paused (frames received: $recv0, then $(peerstat pl_n1 0 frames_recv) 1 s later)" \
	test "$(peerstat pl_n1 0 frames_recv)" = "$recv0"

t0=$(date +%s.%N)
kill -KILL "$(dpid pl_n0)"
wait "$(dpid pl_n0)" 2>/dev/null
# Usually the paused link's watch sees the connection close (EPOLLRDHUP);
# when node 1 happens to be writing to node 0 just then (an ACK), the write
# fails first: either way the link goes down at once.
expect "node 0's daemon SIGKILLed: the paused link sees the connection close" \
	wait_for 'grep -q "peer 0: link down: " "$TMP/pl_n1.log"'
grep "peer 0: link down: " "$TMP/pl_n1.log" | head -n 1 | sed 's/^/#   /'
expect "... and node 1 fails the jobs that need node 0" \
	wait_for '[ "$(grep -c "link between nodes 1 and 0 has been down for 2 s.*its steps fail" "$TMP/pl_n1.log")" -ge $HELD ]'
d=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
expect "... within the 2 s a lost node is given (plus 1.5 s of slack for a loaded machine: $d s)" \
	awk -v d="$d" 'BEGIN { exit !(d <= 3.5) }'

# The receivers take what they hold, then learn that their step failed.
touch "$TMP/go"
step_failed() {
	local p rc=0
	for p in $recvs; do
		wait "$p"
		[ $? = 3 ] || rc=1      # ft_stream --end-step: the step failed
	done
	return $rc
}
expect "each held receiver's step fails" step_failed
expect "... with EHOSTDOWN naming node 0 (all $HELD)" \
	test "$(cat "$TMP"/held*.1.log | grep -c "rank 1 step: a node or link the job needs was lost.*link between nodes 1 and 0 has been down")" = $HELD
expect "daemon 1 exits cleanly" stop_daemon pl_n1
finish
