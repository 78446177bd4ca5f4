#!/bin/bash
# make check-coll: the full product of the collectives' integration tests,
# beyond what make check runs (tests/integration/coll_*.sh): every strategy
# forced and auto (all-to-all and all-to-allv), on 1 to 9, 12, 16 and 17 nodes (a prime
# above 10), with 1, 2 and 3 ranks per node and an uneven layout, blocks of
# 0, 1, 8, 100 bytes and 4 KiB, and 256 KiB on at most 4 nodes; barriers on
# every layout.  One cluster per node count; every rank checks every byte
# it receives (tests/progs/ft_coll.c); on every layout ft_group's splits,
# nested groups, overlap and misuse (tests/progs/ft_group.c), and bcast ..
# exscan with every algorithm forced and auto (tests/progs/ft_red.c), and of
# 1 M elements on 4 and 9 nodes.  Prints
# "ok - ..." per case and the lib.sh summary.
. "$(dirname "$0")/../integration/lib.sh"
TEST=coll_full

# layout N PPN: the daemons of the ranks of a job with PPN ranks per node on
# N nodes (PPN "u": uneven, 1 to 3 by node), rank r on node r mod N.
layout() {
	local n=$1 ppn=$2 k r=0 total=0 i
	local -a per=()
	for k in $(seq 0 $((n - 1))); do
		if [ "$ppn" = u ]; then per+=($((k % 3 + 1))); else per+=("$ppn"); fi
		total=$((total + per[k]))
	done
	# deal ranks round-robin over nodes that still have room
	local -a left=("${per[@]}")
	while [ $r -lt $total ]; do
		for k in $(seq 0 $((n - 1))); do
			if [ "${left[$k]}" -gt 0 ]; then
				echo "f_n$k"
				left[k]=$((left[k] - 1))
				r=$((r + 1))
			fi
		done
	done
}
run_case() {   # run_case JOB ITERS WHERE... -- ft_coll options: lib.sh's coll_job, waited for
	local job=$1 n=$2 size=0 x
	shift 2
	for x in "$@"; do [ "$x" = -- ] && break; size=$((size + 1)); done
	coll_job "$job" "$size" "$n" "$@"
	wait_job "$job"
}

run_group() {  # run_group JOB WHERE...: ft_group's ranks on those daemons, waited for
	local job=$1 size r pids=""
	shift
	size=$#
	for r in $(seq 0 $((size - 1))); do
		FERRY_RUNTIME_DIR=$TMP/${@:$((r + 1)):1} bg "$job.$r.log" prog ft_group --job "$job" --rank "$r" \
			--size "$size" --rounds 1
		pids="$pids $LASTPID"
	done
	eval "JOB_$job=\"$pids\""
	wait_job "$job"
}

id=0
for n in 1 2 3 4 5 6 7 8 9 12 16 17; do
	# (memory for the 1 M-element reductions: README "Large reductions")
	start_cluster f "$n" "limits: { memory_bytes = 1073741824; user_memory_bytes = 1073741824; };" ||
		{ t_fail "$n nodes: cluster up"; continue; }
	for ppn in 1 2 3 u; do
		[ "$n" -ge 12 ] && [ "$ppn" = 3 ] && continue   # 36+ processes on 2 cores: the uneven layout covers it
		# shellcheck disable=SC2207
		where=($(layout "$n" "$ppn"))
		id=$((id + 1))
		expect "$n nodes, $ppn per node (${#where[@]} ranks): 3 barriers" \
			run_case "b$id" 3 "${where[@]}" --
		for s in auto direct mesh grid3d hypercube; do
			opt=(); [ "$s" != auto ] && opt=(--strategy "$s")
			for b in 0 1 8 100 4096; do
				id=$((id + 1))
				expect "$n nodes, $ppn per node, $s, ${b}-byte blocks" \
					run_case "a$id" 1 "${where[@]}" -- --alltoall "$b" "${opt[@]}"
			done
			id=$((id + 1))
			expect "$n nodes, $ppn per node, $s, all-to-allv with uneven counts" \
				run_case "v$id" 1 "${where[@]}" -- --alltoallv "${opt[@]}"
			if [ "$n" -le 4 ]; then
				id=$((id + 1))
				expect "$n nodes, $ppn per node, $s, 256 KiB blocks in ferry_alloc memory" \
					run_case "a$id" 1 "${where[@]}" -- --alltoall 262144 --alloc "${opt[@]}"
			fi
		done
		# groups: ft_group's splits (parity in reverse order, per node,
		# of one, without rank 0, nested), overlap and misuse, auto
		id=$((id + 1))
		expect "$n nodes, $ppn per node: groups (ft_group)" run_group "g$id" "${where[@]}"
		# bcast .. exscan (ft_red): every algorithm forced and auto,
		# counts 0, 1, 7 and 1000, split groups with auto
		for s in auto single orth hier short long hybrid; do
			opt=(--counts 0,1,7,1000); [ "$s" != auto ] && opt+=(--strategy "$s")
			[ "$s" = auto ] && opt+=(--split)
			id=$((id + 1))
			spread_job ft_red "r$id" "${#where[@]}" "${where[@]}" -- "${opt[@]}"
			expect "$n nodes, $ppn per node, $s: bcast .. exscan (ft_red)" wait_job "r$id"
		done
		# 1 M elements (bytes for bcast and allgather; per rank for
		# reduce_scatter_block), automatic, on the uneven layout of 4
		# and 9 nodes (the time and memory that take: README "Large
		# reductions"; on 9 nodes' 18 ranks a reduce_scatter of 1 M
		# per rank is a vector of 18 M, whose three copies exceed an
		# operation's 256 MiB: those two there at 1 M in all)
		if [ "$ppn" = u ] && [ "$n" = 4 ]; then
			id=$((id + 1))
			spread_job ft_red "r$id" "${#where[@]}" "${where[@]}" -- --counts 1048576
			expect "$n nodes, $ppn per node: bcast .. exscan of 1 M elements (ft_red)" wait_job "r$id"
		elif [ "$ppn" = u ] && [ "$n" = 9 ]; then
			id=$((id + 1))
			spread_job ft_red "r$id" "${#where[@]}" "${where[@]}" -- --counts 1048576 \
				--ops bcast,reduce,allreduce,allgather,allgatherv,scan,exscan
			expect "$n nodes, $ppn per node: bcast .. allgatherv, scans of 1 M elements (ft_red)" wait_job "r$id"
			id=$((id + 1))
			spread_job ft_red "r$id" "${#where[@]}" "${where[@]}" -- --counts 58254 --ops rsb,rs
			expect "$n nodes, $ppn per node: reduce_scatter(_block) of 1 M elements in all (ft_red)" \
				wait_job "r$id"
		fi
	done
	expect "$n nodes: the daemons exit cleanly" stop_cluster f "$n"
done
finish
