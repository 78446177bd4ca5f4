#!/bin/bash
# ferry_scatter(v) and ferry_gather(v) run by the daemons: real daemons,
# real client processes (tests/progs/ft_sg.c checks every byte against what
# it computes itself): roots first, last and in the middle; blocks of 0, 1,
# 100 bytes and 4 KiB (256 KiB on fewer ranks); ordinary buffers and
# ferry_alloc memory; FERRY_IN_PLACE at the root; non-blocking forms;
# uneven counts with zeros and gaps that must stay; the groups of a split
# and groups of one rank; one rank, one node, several nodes with uneven
# ranks per node, a node of the cluster without ranks of the job; a root
# named differently, counts that disagree and a gather against a scatter
# fail instead of hanging (a scatter's root and kind on every rank: the
# root sends nothing before every node named it).
. "$(dirname "$0")/lib.sh"

# sg JOB SIZE WHERE... [-- ft_sg options]: lib.sh's spread_job.
sg() { spread_job ft_sg "$@"; }
run_sg() { sg "$@"; wait_job "$1"; }

# --- one node ------------------------------------------------------------------
start_daemon one || exit 1
expect "one rank: scatter and gather with itself" run_sg solo 1 one
expect "one node, 3 ranks" run_sg o3 3 one one one
stop_daemon one >/dev/null

# --- four nodes: 7 ranks 2, 2, 2, 1 per node; a job on 3 of them ----------------
start_cluster c 4 || exit 1
where7="c_n0 c_n1 c_n2 c_n3 c_n0 c_n1 c_n2"
# shellcheck disable=SC2086
expect "4 nodes, 7 ranks (2,2,2,1)" run_sg s7 7 $where7
# every algorithm of a switched network forced (the automatic choice
# above), each counted in ferryctl stats: the orthogonal two-phase (2 rows
# of 2 nodes) and the binomial tree pass blocks on through other nodes
rooted() {      # rooted DIR ALG: scatters and gathers DIR's ferryd ran with ALG
	"$BUILD/ferryctl" --runtime-dir "$TMP/$1" stats | awk -v k="rooted_$2" '$1 == "coll" && $2 ~ /^rooted_/ {
		for (i = 2; i < NF; i++) if ($i == k) print $(i + 1) }'
}
for s in orth tree direct; do
	before=$(rooted c_n0 "$s")
	# shellcheck disable=SC2086
	expect "4 nodes, 7 ranks, $s forced" run_sg "st$s" 7 $where7 -- --strategy "$s" --job-only
	expect "... node 0 ran them as $s ($before -> $(rooted c_n0 "$s"))" test "$(rooted c_n0 "$s")" -gt "$before"
done
# shellcheck disable=SC2086
expect "4 nodes, 7 ranks, tree, 256 KiB blocks (in pieces, passed on whole)" \
	run_sg bigt 7 $where7 -- --blocks 262144 --strategy tree --job-only
# opt needs a physical torus: forced on this switched cluster, the
# operation fails on every rank, saying so (ft_sg exits 1 at the error)
# shellcheck disable=SC2086
sg optsw 7 $where7 -- --strategy opt --job-only
rcs=""
for p in $JOB_optsw; do wait "$p"; rcs="$rcs $?"; done
expect "opt forced on a switched network: every rank fails [exit codes$rcs]" test "$rcs" = " 1 1 1 1 1 1 1"
expect "... saying that opt needs a physical torus" \
	bash -c "[ \$(grep -l 'opt needs a physical torus' '$TMP'/optsw.*.log | wc -l) = 7 ]"
# shellcheck disable=SC2086
expect "4 nodes, 7 ranks, 256 KiB blocks (in pieces)" run_sg big 7 $where7 -- --blocks 262144
expect "a job on 3 of the 4 nodes (c_n2 has none), 5 ranks" run_sg three 5 c_n3 c_n0 c_n1 c_n3 c_n0
# rank 1 shares c_n1 with rank 5 (ferryd sees the disagreement itself);
# rank 3 is alone on c_n3 (the nodes disagree)
for m in root root2 groot count gcount kind; do
	for x in 1 3; do
		# shellcheck disable=SC2086
		expect "4 nodes, 7 ranks: $m disagreeing on rank $x fails (ft_sg says where)" \
			run_sg "x$m$x" 7 $where7 -- --mismatch "$m" --mismatch-rank "$x"
	done
done
expect "ferryctl stats: the operations counted, no collective state left" \
	wait_for "! '$BUILD/ferryctl' --runtime-dir '$TMP/c_n0' stats | grep -q '^coll job'"
expect "the daemons exit cleanly" stop_cluster c 4
finish
