#!/bin/bash
# ferry_bcast, ferry_reduce, ferry_allreduce, ferry_allgather(v),
# ferry_reduce_scatter(_block), ferry_scan and ferry_exscan (and their
# non-blocking forms) run by the daemons: real daemons, real client
# processes (ft_red), every result checked against a reference the client
# computes itself.  Every algorithm forced and the automatic choice; one
# rank, one node, several nodes with uneven ranks per node and ranks not in
# node order, a node of the cluster without ranks of the job; counts 0, 1,
# 7 and 1000 (elements; bytes for bcast and allgather), every type and
# operation pair at 7, staged and ferry_alloc buffers, FERRY_IN_PLACE,
# roots first, last and middle; split groups; bitwise-identical
# floating-point results on every rank; types, operations, counts and roots
# that disagree, and a rank that dies, fail on every rank instead of
# hanging.
. "$(dirname "$0")/lib.sh"

# red JOB SIZE NODE_OF... -- ft_red options
red() { spread_job ft_red "$@"; }
run_red() { red "$@"; wait_job "$1"; }

# last_alg NODE JOB: the algorithm JOB's last operation ran on NODE.
last_alg() {
	"$BUILD/ferryctl" --runtime-dir "$TMP/$1" stats 2>/dev/null | sed -n "s/^coll job $2 .* alg \([a-z0-9]*\) .*$/\1/p"
}

# --- one node ------------------------------------------------------------------
start_daemon one || exit 1
expect "one rank: every operation with itself" run_red solo 1 one -- --counts 0,1,7
expect "one node, 3 ranks" run_red o3 3 one one one -- --counts 0,1,7,1000
stop_daemon one >/dev/null

# --- five nodes ------------------------------------------------------------------
# (memory for the 1 M-element case: README "Large reductions")
start_cluster c 5 "limits: { memory_bytes = 1073741824; user_memory_bytes = 1073741824; };" || exit 1
where7="c_n0 c_n1 c_n2 c_n3 c_n4 c_n0 c_n1"
expect "5 nodes, 7 ranks (2,2,1,1,1), automatic choice, counts 0, 1, 7, 1000, with split groups" \
	run_red auto 7 $where7 -- --split
for s in single orth hier short long hybrid; do
	expect "5 nodes, 7 ranks, $s forced" run_red "f$s" 7 $where7 -- --strategy "$s" --counts 0,1,7,100
done
# a hybrid forced on 5 nodes (prime: one dimension) runs short or long,
# and the runtime functions time it as what it ran
pts=$("$BUILD/ferryctl" --runtime-dir "$TMP/c_n0" costs)
expect "the reduce_scatters on 5 nodes were timed as short or long ($(grep -c '^point reduce_scatter [a-z]* 5 ' <<<"$pts") points)" \
	grep -q "^point reduce_scatter \(short\|long\) 5 " <<<"$pts"
expect "... and none as hybrid, which cannot run on 5 nodes" not grep -q "^point reduce_scatter hybrid 5 " <<<"$pts"
expect "1 M elements: allreduce, 5 nodes, 7 ranks, automatic" \
	run_red big 7 $where7 -- --counts 1048576 --ops allreduce
expect "every type and operation pair at 7 elements, 5 ranks on 4 of 5 nodes, not in node order" \
	run_red pairs 5 c_n2 c_n0 c_n1 c_n2 c_n4 -- --pairs all --counts 7
# forced means run: what the job's last operation ran (an allgather after
# the allreduces: ft_red's check that their bits agree), while the ranks
# linger
red al 4 c_n0 c_n1 c_n2 c_n3 -- --strategy hier --ops allreduce --counts 7 --linger 3000
expect "hier forced is what ran (ferryctl stats)" wait_for '[ "$(last_alg c_n0 al)" = hier ]'
wait_job al >/dev/null

# disagreements in an allreduce: every rank fails (each waits for a result
# that comes through the node that finds it), none hangs
for how in type op count; do
	red "m$how" 4 c_n0 c_n1 c_n1 c_n2 -- --mismatch "$how" --mismatch-rank 2
	wait_job "m$how" >/dev/null 2>&1
	fails=$(grep -l "mismatch: .*[A-Za-z]" "$TMP"/m"$how".*.log 2>/dev/null | xargs grep -L "mismatch: none" 2>/dev/null | wc -l)
	expect "a rank passing another $how: the allreduce fails on all 4 ranks ($fails), none hangs" test "$fails" = 4
done
# a reduce whose rank 2 names itself the root: the roots' nodes fail; a
# rank whose part went up and was right may have finished (as in a
# gather: its next operation fails, the job having failed), none hangs
red mroot 4 c_n0 c_n1 c_n1 c_n2 -- --mismatch root --mismatch-rank 2
wait_job mroot >/dev/null 2>&1
for r in 0 1 2; do
	expect "a rank naming another root: rank $r (on a node of a root) fails ($(grep -ho "mismatch: [^(]*" "$TMP/mroot.$r.log" | cut -c1-120))" \
		bash -c "grep -q 'mismatch: ' '$TMP/mroot.$r.log' && ! grep -q 'mismatch: none' '$TMP/mroot.$r.log'"
done
expect "... and rank 3 ended within 20 s, either way" grep -q "mismatch: " "$TMP/mroot.3.log"
# a rank forcing another algorithm: -EINVAL on every rank (the plan tag
# in every piece), not the -EPROTO of a message no schedule expects
red mstrat 4 c_n0 c_n1 c_n1 c_n2 -- --mismatch strategy --mismatch-rank 3
wait_job mstrat >/dev/null 2>&1
fails=$(grep -l "mismatch: invalid argument.*plans differ\|mismatch: invalid argument" "$TMP"/mstrat.*.log 2>/dev/null | wc -l)
expect "a rank alone on its node forcing orth where the others force single: -EINVAL on all 4 ranks ($fails), saying the plans differ" \
	bash -c "[ $fails = 4 ] && grep -q 'plans differ' $TMP/mstrat.*.log"
# reduce_scatter counts that differ with the same total: the node of the
# rank that passed them fails, saying so, nobody hangs
red mrsc 4 c_n0 c_n1 c_n1 c_n2 -- --mismatch rscounts --mismatch-rank 3
wait_job mrsc >/dev/null 2>&1
expect "reduce_scatter counts that differ on one node (same total): rank 3 fails, saying the plans differ" \
	grep -q "mismatch: invalid argument.*plans differ" "$TMP/mrsc.3.log"
expect "... and every rank ended within 20 s" test "$(cat "$TMP"/mrsc.*.log | grep -c "mismatch: ")" = 4
expect "... the one that named another type says so" grep -q "different types or operations" "$TMP"/mtype.*.log
# rank 2 dies after 40 operations: the others fail naming it
red dies 4 c_n0 c_n1 c_n2 c_n3 -- --die-rank 2 --die-after 40 --counts 7
wait_job dies >/dev/null 2>&1
expect "a rank died after 40 operations" grep -q "rank 2 dies after 40" "$TMP/dies.2.log"
for r in 0 1 3; do
	expect "... rank $r's next operation failed, naming rank 2 ($(grep -h "rank $r:" "$TMP/dies.$r.log" | head -1 | cut -c1-100))" \
		grep -qE "rank 2 .*left|left.*rank 2" "$TMP/dies.$r.log"
done
expect "after that, a new job on the same daemons" run_red after 5 c_n0 c_n1 c_n2 c_n3 c_n4 -- --counts 7
expect "... and the daemons hold no collective memory afterwards" \
	wait_for "[ \"\$(stat c_n0 memory_coll_bytes)\" = 0 ] && [ \"\$(stat c_n2 memory_coll_bytes)\" = 0 ]"
expect "the daemons exit cleanly" stop_cluster c 5
finish
