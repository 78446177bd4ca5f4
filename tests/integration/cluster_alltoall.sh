#!/bin/bash
# All-to-all across local clusters of real daemons on loopback TCP, over
# several virtual grids and node counts: every item exactly once, intact, in
# per-(sender, receiver) order; steps end only when everything arrived.
. "$(dirname "$0")/lib.sh"

# grid NAME N VIRTUAL PPN ITEMS LINKS: one cluster, one job with --sync steps;
# node 0 must have LINKS links (the peers of the virtual grid, not N-1).
grid() {
	local name=$1 n=$2 virt=$3 ppn=$4 items=$5 links=$6
	start_cluster "$name" "$n" "topology: { virtual = $virt; };" || { t_fail "$name: cluster up"; return; }
	expect "$name: node 0 has $links links, all up" \
		bash -c "'$BUILD/ferryctl' --runtime-dir '$TMP/${name}_n0' status | grep -q '^links: $links peers' &&
			 [ \$('$BUILD/ferryctl' --runtime-dir '$TMP/${name}_n0' status | grep -c ': up ') = $links ]"
	expect "$name: $n daemons x $ppn processes, 3 steps, every item exactly once and in order" \
		run_cluster_job "$name" "j$name" "$n" "$ppn" --items "$items" --len 16 --len-max 64 --steps 3 --sync
	local sent recv frames
	sent=$(peer_sum "$name" "$n" items_sent)
	frames=$(peer_sum "$name" "$n" frames_sent)
	expect "$name: items were combined into frames ($sent items in $frames frames)" \
		test "$frames" -gt 0 -a "$sent" -gt $((2 * frames))
	expect "$name: no retransmissions, duplicates or drops" \
		test "$(peer_sum "$name" "$n" retransmits)$(peer_sum "$name" "$n" duplicates)$(cstat "$name" "$n" items_dropped)" = 000
	expect "$name: daemons exit cleanly" stop_cluster "$name" "$n"
}

grid g222 8 "[2, 2, 2]" 2 300 3
grid g42 8 "[4, 2]" 2 300 4
grid d8 8 '"direct"' 2 300 7
grid a6 6 '"auto"' 1 500 5
grid a7 7 "[2, 4]" 1 500 4
grid a12 12 "[3, 4]" 1 200 5

# Large items across nodes: pieces reassembled, order kept around them.
start_cluster big 4 "topology: { virtual = [2, 2]; };" || exit 1
expect "items of 16 B to 300 KB between 4 nodes, 2 steps" \
	run_cluster_job big jbig 4 1 --items 12 --len 16 --len-max 300000 --steps 2 --sync
# The largest items (4 MiB, 64 pieces each) two hops away; the mixed sizes
# above already check order around large items.
FERRY_RUNTIME_DIR=$TMP/big_n3 bg max1.log prog ft_stream --job jmax --rank 1 --items 12 --len 4194304
m1=$LASTPID
FERRY_RUNTIME_DIR=$TMP/big_n0 prog ft_stream --job jmax --rank 0 --items 12 --len 4194304 >"$TMP/max0.log" 2>&1
m0=$?
wait $m1
expect "twelve 4 MiB items from node 0 to node 3 (two hops), intact and in order" test $m0 = 0 -a $? = 0
expect "big: daemons exit cleanly" stop_cluster big 4

# No aggregation: one item per frame, still correct.
# (frames counted: no link-start probes among them)
start_cluster noagg 4 "topology: { virtual = [2, 2]; };" "aggregation: { buffer_bytes = 0; };" \
	"transport: { probe = false; };" || exit 1
expect "buffer_bytes = 0: all-to-all between 4 nodes still correct" \
	run_cluster_job noagg jnoagg 4 1 --items 200 --steps 2 --sync
ipf=$(awk -v s="$(peer_sum noagg 4 items_sent)" -v f="$(peer_sum noagg 4 frames_sent)" 'BEGIN { print (f ? s / f : 0) }')
expect "buffer_bytes = 0: exactly one item per frame ($ipf)" test "$ipf" = 1
expect "noagg: daemons exit cleanly" stop_cluster noagg 4
finish
