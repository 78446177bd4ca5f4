#!/bin/bash
# Groups (ferry_split) and locality queries (ferry_node_of,
# ferry_local_ranks) on real daemons with real client processes
# (tests/progs/ft_group.c checks every result against what it computes
# itself): a split in reverse key order whose groups span nodes, a group
# per node, a group of one rank, a rank in no group, a nested split,
# operations on the job and two groups at once, items on a group's handle
# refused, the job's handle not closed under open groups; every strategy
# forced; a rank that leaves its group makes the group's next operation
# fail on its other ranks (and only that group's); a rank that lies in a
# split cannot make the nodes disagree.
. "$(dirname "$0")/lib.sh"

# grp JOB SIZE WHERE... [-- ft_group options]: lib.sh's spread_job.
grp() { spread_job ft_group "$@"; }
run_grp() { grp "$@"; wait_job "$1"; }

# --- one node ------------------------------------------------------------------
start_daemon one || exit 1
expect "one rank: every split of one rank, its groups of one" run_grp g1 1 one
expect "one node, 3 ranks: the groups all local" run_grp g3 3 one one one
stop_daemon one >/dev/null

# --- four nodes, 7 ranks: 2, 2, 2, 1 per node, ranks round-robin -------------------
start_cluster c 4 || exit 1
where7="c_n0 c_n1 c_n2 c_n3 c_n0 c_n1 c_n2"
for s in direct mesh grid3d hypercube; do
	# shellcheck disable=SC2086
	expect "4 nodes, 7 ranks, $s: splits, nesting, overlap and misuse as ft_group checks" \
		run_grp "s$s" 7 $where7 -- --strategy "$s"
done
# shellcheck disable=SC2086
expect "4 nodes, 7 ranks, automatic choice, 3 rounds" run_grp auto 7 $where7 -- --rounds 3
expect "a job on 2 of the 4 nodes, 4 ranks" run_grp two 4 c_n1 c_n3 c_n3 c_n1

# A rank that tells different ranks different colors and keys (review F4):
# ferryd sends one {color, key} of each rank to all (its first block), so
# every node makes the same groups, and they work.  Nodes whose first
# local rank is odd (c_n1, c_n2) would have heard otherwise from rank 0.
pids=""
r=0
for d in c_n0 c_n1 c_n1 c_n2 c_n2 c_n3; do
	FERRY_RUNTIME_DIR=$TMP/$d bg "lie.$r.log" prog ft_splitlie --job lie --rank $r --size 6
	pids="$pids $LASTPID"
	r=$((r + 1))
done
JOB_lie=$pids
expect "a rank lies in a split (different colors to different ranks): one answer everywhere, the groups work" \
	wait_job lie

# A rank leaves its group (closes the handle): the others of the group fail
# their next group barrier with EPIPE naming it; the other group's barrier,
# and everything after, works.
# shellcheck disable=SC2086
grp lv 7 $where7 -- --leave 2
for r in 0 1 2 3 4 5 6; do wait "$(echo $JOB_lv | cut -d' ' -f$((r + 1)))"; echo $? >"$TMP/lv.$r.rc"; done
same=1
for r in 0 4 6; do
	grep -q "rank $r group barrier: EPIPE: .*(job rank 2, on node 2) left it after" "$TMP/lv.$r.log" &&
		[ "$(cat "$TMP/lv.$r.rc")" = 3 ] || same=0
done
expect "a rank leaves its group: the group's other ranks' next barrier fails with EPIPE naming it" test $same = 1
other=1
for r in 1 3 5; do grep -q "rank $r ok" "$TMP/lv.$r.log" || other=0; done
expect "... the other group's ranks are not disturbed" test $other = 1
expect "... and the leaver closes cleanly" grep -q "rank 2 ok" "$TMP/lv.2.log"
[ $same = 1 ] && [ $other = 1 ] || for f in "$TMP"/lv.*.log; do sed "s|^|#   $(basename "$f"): |" "$f"; done

# Idle groups cost the loop nothing (review of issue 12: a user's thousands
# of idle groups slowed every other job's collectives): while job idle
# keeps 300 groups open on c_n0 and c_n1, 200 barriers of another job make
# ferryd look at almost none of them (groups_polled counts the groups each
# turn of the loop looked at; before, every turn looked at all 300).
polled() {
	"$BUILD/ferryctl" --runtime-dir "$TMP/c_n0" stats | sed -n 's/^coll job idle .* groups_polled \([0-9]*\) .*$/\1/p'
}
grp idle 2 c_n0 c_n1 -- --hold 300 --hold-until "$TMP/idle.go"
expect "a job holds 300 idle groups" \
	wait_for "grep -q 'holds 300' '$TMP/idle.0.log' && grep -q 'holds 300' '$TMP/idle.1.log'"
expect "... ferryctl stats shows them" \
	bash -c "'$BUILD/ferryctl' --runtime-dir '$TMP/c_n0' stats | grep -q '^coll job idle .* groups 300 '"
p0=$(polled)
coll_job bar 2 200 c_n0 c_n1
expect "another job runs 200 barriers meanwhile" wait_job bar
p1=$(polled)
expect "... and ferryd looked at the idle groups at most 50 times in all (groups_polled $p0 -> $p1)" \
	test -n "$p0" -a -n "$p1" -a $((p1 - p0)) -le 50
touch "$TMP/idle.go"
expect "the idle groups close, and their job ends cleanly" wait_job idle

expect "ferryctl stats: the groups went with their jobs (no collective state left)" \
	wait_for "! '$BUILD/ferryctl' --runtime-dir '$TMP/c_n0' stats | grep -q '^coll job'"
expect "the daemons exit cleanly" stop_cluster c 4
finish
