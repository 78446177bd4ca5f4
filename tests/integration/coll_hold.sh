#!/bin/bash
# Backpressure for collective pieces that come before their operation
# starts here (daemon/coll/coll.c, "Holding back"): a node whose ranks post
# late tells the nodes sending it pieces to hold them back, instead of
# keeping more than 64 MiB of them per job (COLL_EARLY_MAX) and failing the
# job, as it did before.  Real daemons, real clients, every byte checked.
. "$(dirname "$0")/lib.sh"

# coll_stat NODE JOB FIELD: FIELD of JOB's "coll job" line in NODE's stats.
coll_stat() {
	"$BUILD/ferryctl" --runtime-dir "$TMP/$1" stats 2>/dev/null |
		sed -n "s/^coll job $2 .* $3 \([0-9]*\) .*$/\1/p"
}

# wait_ok JOB N: until N ranks of JOB said "ok" (60 s at most).
wait_ok() {
	local i
	for i in $(seq 600); do
		[ "$(cat "$TMP/$1".*.log 2>/dev/null | grep -c ' ok: ')" -ge "$2" ] && return 0
		sleep 0.1
	done
	return 1
}

start_cluster h 3 || exit 1

# An all-to-all of 40 MiB blocks, rank 2 posting it 3 s after rank 0 and
# 1.5 s after rank 1: nodes 0 and 1 have 80 MiB for node 2 before its rank
# posts.
coll_job a2a 3 1 h_n0 h_n1 h_n2 -- --alltoall $((40 << 20)) --alloc --strategy direct --skew-ms 1500 \
	--linger 4000
wait_ok a2a 3
held=$(coll_stat h_n2 a2a holds_sent)
emax=$(coll_stat h_n2 a2a early_max)
waits=$(( $(coll_stat h_n0 a2a hold_waits) + $(coll_stat h_n1 a2a hold_waits) ))
expect "80 MiB of 40 MiB blocks for a node whose rank posts 3 s late: every byte arrives" wait_job a2a
expect "... that node told the others to hold back (holds_sent $held)" test "${held:-0}" -ge 1
expect "... once its early pieces took 8 MiB (early_max $emax), never the 64 MiB that failed the job" \
	test "${emax:-0}" -ge $((8 << 20)) -a "${emax:-0}" -lt $((64 << 20))
expect "... and the others' pieces waited ($waits hold_waits)" test "$waits" -gt 0

# Four gathers of 12 MiB blocks to rank 2, posted at once by every rank,
# the root's 2 s after the others': 96 MiB for operations node 2 has not
# started, held back from the first; when its rank posts, each operation
# that starts lets its pieces go on.
spread_job ft_sg lg 3 h_n0 h_n1 h_n2 -- --late 4,$((12 << 20)),2000 --linger 4000
wait_ok lg 3
held=$(coll_stat h_n2 lg holds_sent)
emax=$(coll_stat h_n2 lg early_max)
expect "4 gathers of 12 MiB blocks to a root posting 2 s late: every byte arrives" wait_job lg
expect "... its node held the others back (holds_sent $held, early_max $emax)" \
	test "${held:-0}" -ge 1 -a "${emax:-0}" -lt $((64 << 20))

expect "... and the daemons hold no collective memory afterwards" \
	wait_for "[ \"\$(stat h_n0 memory_coll_bytes)\" = 0 ] && [ \"\$(stat h_n1 memory_coll_bytes)\" = 0 ] &&
		  [ \"\$(stat h_n2 memory_coll_bytes)\" = 0 ]"
expect "the daemons exit cleanly" stop_cluster h 3
finish
