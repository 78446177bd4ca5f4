#!/bin/bash
# TCP connections between daemons are broken mid-stream, again and again:
# frames in flight are sent again after the reconnection and duplicates are
# discarded, so every item still arrives exactly once and in order.
. "$(dirname "$0")/lib.sh"

start_cluster lf 4 "topology: { virtual = [2, 2]; };" || exit 1
# 4 nodes x 2 processes, items 16..200 B, 3 synchronised steps; long enough
# that the links are broken while frames are in flight.
start_cluster_job lf jlf 4 2 --items 15000 --len 16 --len-max 200 --steps 3 --sync
breaks=0
for i in $(seq 40); do
	for k in 0 1 2 3; do
		# node k breaks its link to one of its peers (2x2 grid: k^1 and k^2)
		peer=$(( i % 2 ? k ^ 1 : k ^ 2 ))
		"$BUILD/ferryctl" --runtime-dir "$TMP/lf_n$k" debug kill-link "$peer" >/dev/null 2>&1 && breaks=$((breaks + 1))
	done
	sleep 0.02
	running=0
	for p in $JOB_jlf; do kill -0 "$p" 2>/dev/null && running=1; done
	[ $running = 0 ] && break
done
expect "the job finished with every item exactly once and in order ($breaks links broken)" wait_job jlf
expect "links were broken while it ran" test "$breaks" -ge 4
reconnects=$(peer_sum lf 4 disconnects)
expect "daemons saw the links go down ($reconnects times)" test "$reconnects" -ge 4
expect "... and every link is up again" cluster_up lf 4
resent=$(peer_sum lf 4 retransmits)
dups=$(peer_sum lf 4 duplicates)
echo "# frames sent again after reconnections: $resent, duplicates discarded: $dups"
expect "frames were sent again after reconnections ($resent)" test "$resent" -gt 0
expect "nothing was dropped" test "$(cstat lf 4 items_dropped)" = 0

# A daemon killed and started again: its peers notice the new instance,
# reconnect, and the cluster carries new jobs.
{ kill -KILL "$(dpid lf_n3)"; wait "$(dpid lf_n3)"; } 2>/dev/null
start_daemon lf_n3 --config "$TMP/lf.conf" --node 3 || exit 1
expect "after node 3 restarted, every link is up again" cluster_up lf 4
expect "its peers noticed it is a new instance" \
	wait_for "grep -q 'peer 3 restarted' '$TMP/lf_n1.log' && grep -q 'peer 3 restarted' '$TMP/lf_n2.log'"
expect "a new job across all 4 nodes runs, every item exactly once" \
	run_cluster_job lf jafter 4 1 --items 2000 --steps 2 --sync
expect "daemons exit cleanly" stop_cluster lf 4
finish
