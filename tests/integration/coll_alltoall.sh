#!/bin/bash
# ferry_alltoall / ferry_ialltoall run by the daemons: real daemons, real
# client processes (ft_coll), every byte each rank receives checked against
# its sender's pattern.  Every strategy forced (direct, mesh, grid3d,
# hypercube) and the automatic choice; one node and several, uneven ranks
# per node, a node of the cluster without ranks of the job; blocks of 0, 1,
# 8, 100 bytes, 4 KiB and 256 KiB; ordinary buffers (staged) and
# ferry_alloc memory (in place), FERRY_IN_PLACE; the non-blocking form;
# two jobs at once; block sizes that disagree and a rank that dies fail on
# every rank instead of hanging.  (The full product of node counts, layouts
# and sizes: make check-coll.)
. "$(dirname "$0")/lib.sh"

# a2a JOB SIZE ITERS NODE_OF... -- ft_coll options: lib.sh's coll_job.
a2a() { coll_job "$@"; }
run_a2a() { a2a "$@"; wait_job "$1"; }

# --- one node ------------------------------------------------------------------
start_daemon one || exit 1
expect "one rank: all-to-all with itself" run_a2a solo 1 3 one -- --alltoall 8
for b in 0 1 8 100 4096; do
	expect "one node, 3 ranks, ${b}-byte blocks" run_a2a "o$b" 3 3 one one one -- --alltoall "$b"
done
expect "one node, ferry_alloc buffers, in place" run_a2a oai 3 3 one one one -- --alltoall 100 --alloc --in-place
expect "one node, FERRY_IN_PLACE from ordinary memory, non-blocking" \
	run_a2a oin 3 3 one one one -- --alltoall 100 --in-place --nonblocking
stop_daemon one >/dev/null

# --- five nodes, 7 ranks: 2, 2, 1, 1, 1 per node -------------------------------
start_cluster c 5 || exit 1
where7="c_n0 c_n1 c_n2 c_n3 c_n4 c_n0 c_n1"
for s in direct mesh grid3d hypercube; do
	for b in 1 8 100; do
		# shellcheck disable=SC2086
		expect "5 nodes, 7 ranks (2,2,1,1,1), $s, ${b}-byte blocks" \
			run_a2a "$s$b" 7 2 $where7 -- --alltoall "$b" --strategy "$s"
	done
done
# shellcheck disable=SC2086
expect "5 nodes, 7 ranks, automatic choice, 4 KiB blocks in ferry_alloc memory" \
	run_a2a auto4k 7 2 $where7 -- --alltoall 4096 --alloc
# shellcheck disable=SC2086
expect "5 nodes, 7 ranks, automatic choice, 256 KiB blocks (1.75 MiB per rank)" \
	run_a2a auto256k 7 1 $where7 -- --alltoall 262144
# shellcheck disable=SC2086
expect "5 nodes, 7 ranks, mesh, 0-byte blocks" run_a2a m0 7 2 $where7 -- --alltoall 0 --strategy mesh
# shellcheck disable=SC2086
expect "5 nodes, 7 ranks, grid3d, in place, non-blocking" \
	run_a2a gin 7 3 $where7 -- --alltoall 64 --strategy grid3d --in-place --nonblocking
# all-to-allv: uneven counts with zeros, displacements in reverse order
# with gaps that must stay as they were
for s in direct mesh grid3d hypercube; do
	# shellcheck disable=SC2086
	expect "5 nodes, 7 ranks, all-to-allv with uneven counts, $s" \
		run_a2a "v$s" 7 2 $where7 -- --alltoallv --strategy "$s"
done
# shellcheck disable=SC2086
expect "5 nodes, 7 ranks, many-to-many (each rank to its next 2), automatic choice, non-blocking" \
	run_a2a vmany 7 2 $where7 -- --alltoallv --many 2 --nonblocking
# shellcheck disable=SC2086
expect "5 nodes, 7 ranks, all-to-allv in place, in ferry_alloc memory" \
	run_a2a vin 7 2 $where7 -- --alltoallv --in-place --alloc --strategy mesh
expect "a job on 2 of the 5 nodes (the others have no rank of it), hypercube" \
	run_a2a two 4 3 c_n1 c_n3 c_n3 c_n1 -- --alltoall 32 --strategy hypercube
a2a ja 5 5 c_n0 c_n1 c_n2 c_n3 c_n4 -- --alltoall 16 --strategy mesh
a2a jb 5 5 c_n4 c_n3 c_n2 c_n1 c_n0 -- --alltoall 24 --strategy direct --nonblocking
expect "two jobs' all-to-alls at once" wait_job ja
expect "... the other one too" wait_job jb
a2a st 3 2 c_n0 c_n2 c_n4 -- --alltoall 8 --strategy hypercube --linger 3000
expect "... a job that lingers after 2 all-to-alls" wait_for "grep -q ok: '$TMP/st.0.log'"
expect "ferryctl stats: 2 all-to-alls by the hypercube" \
	bash -c "'$BUILD/ferryctl' --runtime-dir '$TMP/c_n0' stats | grep -qE '^coll job st uid [0-9]+ nodes 3 groups 0 ops_run 2 ops_failed 0 pending 0 last alltoall alg hypercube last_us [0-9]+ link_waits [0-9]+ hold_waits 0 holds_sent 0 early_max [0-9]+ groups_polled [0-9]+ alpha_us [0-9.]+ beta_ns_per_byte [0-9.]+ (measured|default) fitted [0-9]+ direct 0 mesh 0 grid3d 0 hypercube 2 rooted_direct 0 rooted_opt 0 rooted_sdf 0 rooted_orth 0 rooted_tree 0$'"
# α and β: every link measured its own at start (probes) and from traffic,
# and the job's nodes agreed on one pair at GO (the same on each)
costs=$(for n in 0 2 4; do "$BUILD/ferryctl" --runtime-dir "$TMP/c_n$n" stats |
	sed -n 's/^coll job st .* \(alpha_us [0-9.]* beta_ns_per_byte [0-9.]* [a-z]*\) .*/\1/p'; done | sort -u)
expect "the job's nodes agree on one measured alpha and beta ($costs)" \
	bash -c "[ \"\$(echo '$costs' | wc -l)\" = 1 ] && echo '$costs' | grep -qE '^alpha_us [0-9.]*[1-9][0-9.]* beta_ns_per_byte [0-9.]*[1-9][0-9.]* measured$'"
# (links no job used have only their probes, which a loaded machine may
# have to send again: peer.c PROBE_RETRY_NS; 10 s at most)
# measured: node 0 has links, and none lacks α or β (its peer lines in $peers)
measured() {
	peers=$("$BUILD/ferryctl" --runtime-dir "$TMP/c_n0" stats | grep '^peer')
	[ -n "$peers" ] && ! echo "$peers" | grep -qE 'alpha_us 0.0 |beta_ns_per_byte 0.000 '
}
wait_for measured
expect "every link of node 0 measured its alpha and beta" measured
if ! measured; then echo "$peers" | sed 's/^/#   /'; fi
wait_job st >/dev/null

# --- failures --------------------------------------------------------------------
# rank 3 passes 9-byte blocks, the others 8: every rank's first all-to-all
# fails with EINVAL (sizes that disagree), none hangs
mm=""
for r in 0 1 2 3; do
	FERRY_RUNTIME_DIR=$TMP/c_n$r bg "mm.$r.log" prog ft_coll --job mm --rank "$r" --size 4 --barriers 1 \
		--alltoall 8 --strategy direct $([ "$r" = 3 ] && echo --mismatch)
	mm="$mm $LASTPID"
done
for p in $mm; do timeout 30 bash -c "while kill -0 $p 2>/dev/null; do sleep 0.1; done"; done
fails=$(grep -l "alltoall 1: .*Invalid argument\|alltoall 1: .*invalid" "$TMP"/mm.*.log 2>/dev/null | wc -l)
expect "block sizes that disagree: the all-to-all fails on all 4 ranks ($fails), none hangs" test "$fails" = 4
wait $mm 2>/dev/null
# ranks 0 and 1 force direct, 2 and 3 mesh: the nodes' plans differ, and
# every rank's all-to-all fails with EINVAL naming both strategies (not a
# protocol error), none hangs
ms=""
for r in 0 1 2 3; do
	FERRY_RUNTIME_DIR=$TMP/c_n$r bg "ms.$r.log" prog ft_coll --job ms --rank "$r" --size 4 --barriers 1 \
		--alltoall 8 --strategy "$([ "$r" -ge 2 ] && echo mesh || echo direct)"
	ms="$ms $LASTPID"
done
for p in $ms; do timeout 30 bash -c "while kill -0 $p 2>/dev/null; do sleep 0.1; done"; done
fails=$(grep -l "alltoall 1: invalid argument.*all-to-all strategies differ: \(mesh\|direct\) on .*\(mesh\|direct\) on node" \
	"$TMP"/ms.*.log 2>/dev/null | wc -l)
expect "strategies forced differently on the nodes: the all-to-all fails with EINVAL on all 4 ranks ($fails), none hangs" \
	test "$fails" = 4
wait $ms 2>/dev/null
# rank 1 splits where the others run an all-to-all of 8-byte blocks (the
# split's exchange has that shape): a rank of another node posted another
# kind of operation, which only the pieces' kind tells (WIRE_VERSION 10)
mm=""
for r in 0 1 2; do
	FERRY_RUNTIME_DIR=$TMP/c_n$r bg "sk.$r.log" prog ft_coll --job sk --rank "$r" --size 3 --split-instead 1
	mm="$mm $LASTPID"
done
for p in $mm; do timeout 30 bash -c "while kill -0 $p 2>/dev/null; do sleep 0.1; done"; done
fails=$(grep -l "mismatch: .*different operations" "$TMP"/sk.*.log 2>/dev/null | wc -l)
expect "a split on one node, an all-to-all of 8-byte blocks on the others: it fails on all 3 ranks ($fails), saying so" \
	test "$fails" = 3
wait $mm 2>/dev/null
# rank 2 dies instead of its third all-to-all: the others fail with EPIPE naming it
a2a dies 4 10 c_n0 c_n1 c_n2 c_n3 -- --alltoall 64 --die-before 3 --die-rank 2
for r in 0 1 3; do
	expect "a rank died: rank $r's all-to-all 3 fails with EPIPE naming rank 2" \
		bash -c "timeout 20 bash -c 'while ! grep -q alltoall \"$TMP/dies.$r.log\"; do sleep 0.05; done'; \
			 grep -qE 'rank $r alltoall 3: .*rank 2 .*left' '$TMP/dies.$r.log'"
done
wait_job dies >/dev/null
expect "after that, a new job's all-to-all on the same daemons" run_a2a after 5 2 c_n0 c_n1 c_n2 c_n3 c_n4 -- --alltoall 8
expect "the daemons exit cleanly" stop_cluster c 5

# Collective memory is its user's (limits.user_memory_bytes).  Blocks that
# go straight from a send buffer to a receive buffer take none of it (the
# daemons read and write ferry_alloc memory in place: test_exec), but a
# 2x2 mesh passes half of every node's blocks through another node, which
# holds them meanwhile: with 8 MiB blocks that is beyond a 4 MiB share, and
# the all-to-all fails on every rank, and gives it all back.
start_cluster lim 4 "limits: { user_memory_bytes = 4194304; };" || exit 1
expect "1 MiB blocks within a 4 MiB share: fine" run_a2a small 2 1 lim_n0 lim_n1 -- --alltoall 1048576 --alloc
a2a big 4 1 lim_n0 lim_n1 lim_n2 lim_n3 -- --alltoall 8388608 --alloc --strategy mesh
wait_job big >/dev/null 2>&1
said=0
for r in 0 1 2 3; do
	# Where and how the memory ran out depends on timing: a stream taken
	# whole (EDQUOT, "... daemon memory than its user may have"), early
	# pieces (ENOBUFS, "... holds N bytes of daemon memory"), pieces that
	# came before the job started on a slow node (ENOBUFS, the job fails);
	# the node that ran out names the limit, the others' text names that
	# node and is cut to the error's length.
	grep -qE "alltoall 1: .*(daemon memory|memory for jobs)" "$TMP/big.$r.log" && said=$((said + 1))
done
expect "8 MiB blocks through a 2x2 mesh, beyond a 4 MiB share: the all-to-all fails on every rank, saying why ($said of 4)" \
	test "$said" = 4
expect "... one of them naming the user's memory limit" \
	grep -qE "limits.user_memory_bytes|more than its user's memory" "$TMP"/big.[0-3].log
expect "... and the daemons hold no collective memory afterwards" \
	wait_for "[ \"\$(stat lim_n0 memory_coll_bytes)\" = 0 ] && [ \"\$(stat lim_n1 memory_coll_bytes)\" = 0 ] &&
		  [ \"\$(stat lim_n2 memory_coll_bytes)\" = 0 ] && [ \"\$(stat lim_n3 memory_coll_bytes)\" = 0 ]"
expect "lim: daemons exit cleanly" stop_cluster lim 4

# The pieces travel as the job's items, under the links' limits: with
# limits.link_bytes at its least (1 MiB), 1 MiB blocks between two nodes
# (4 MiB from each node to the other) wait for room instead of piling up,
# and arrive whole.
start_cluster fc 2 "limits: { link_bytes = 1048576; };" || exit 1
a2a flow 4 2 fc_n0 fc_n1 fc_n0 fc_n1 -- --alltoall 1048576 --alloc --linger 3000
waits=0
for _ in $(seq 100); do
	waits=$("$BUILD/ferryctl" --runtime-dir "$TMP/fc_n0" stats 2>/dev/null |
		sed -n 's/^coll job flow .* link_waits \([0-9]*\) .*$/\1/p')
	[ "${waits:-0}" -gt 0 ] && break
	sleep 0.1
done
expect "1 MiB blocks over a link of 1 MiB: every byte arrives" wait_job flow
expect "... and pieces waited for room on the link (link_waits $waits)" test "${waits:-0}" -gt 0
expect "fc: daemons exit cleanly" stop_cluster fc 2
finish
