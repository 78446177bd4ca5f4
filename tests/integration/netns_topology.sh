#!/bin/bash
# Physical tori and meshes, one network namespace per node and veth links only
# between neighbours: items reach every node hop by hop, re-aggregated at
# each intermediate node, over the links that exist and no others.
. "$(dirname "$0")/lib.sh"

if ! netns_ok; then
	echo "ok - $TEST: # SKIP needs root and network namespaces"
	exit 0
fi

# topo NAME KIND DIMS PPN ITEMS LINKS-OF-NODE-0
topo() {
	local name=$1 kind=$2 dims=$3 ppn=$4 items=$5 links=$6 n=1 d
	for d in $dims; do n=$((n * d)); done
	# shellcheck disable=SC2086
	netns_cluster "$name" "$kind" $dims || { t_fail "$name: namespaces"; return; }
	start_netns_cluster "$name" "$n" || { t_fail "$name: links up"; return; }
	expect "$name: node 0 has $links links (its neighbours), all up" \
		bash -c "[ \$('$BUILD/ferryctl' --runtime-dir '$TMP/${name}_n0' status | grep -c ': up ') = $links ]"
	expect "$name: from node 0's namespace its neighbour node 1 can be reached" \
		ip netns exec "$(netns_name "$name" 0)" bash -c "exec 3<>/dev/tcp/$(netns_addr 1)/7470"
	expect "$name: ... but the last node, not a neighbour, cannot" \
		not ip netns exec "$(netns_name "$name" 0)" bash -c "exec 3<>/dev/tcp/$(netns_addr $((n - 1)))/7470" 2>/dev/null
	expect "$name: $n nodes x $ppn processes, all-to-all, 3 steps, every item exactly once and in order" \
		run_cluster_job "$name" "j$name" "$n" "$ppn" --items "$items" --len 16 --len-max 64 --steps 3 --sync
	expect "$name: items were forwarded at intermediate nodes" test "$(peer_sum "$name" "$n" items_forwarded)" -gt 0
	expect "$name: daemons exit cleanly" stop_cluster "$name" "$n"
}

topo t33 torus "3 3" 2 200 4
topo m24 mesh "2 4" 1 300 2
# A longer mesh: routes of up to 4 hops through 3 intermediate nodes.
topo m15 mesh "1 5" 1 200 1
finish
