#!/bin/bash
# A node that restarts while a job is being set up (found by the review,
# tests/review/stalehome.sh, and by the soak): the job's home drops the ranks
# the lost node had (its ranks will never say LEAVE), so the job can be
# started again; and when the home itself restarts, the other nodes say
# their ranks' JOIN again to its new instance, which knew nothing of them.
. "$(dirname "$0")/lib.sh"

start_cluster rs 2 || exit 1
# Job names whose home is node 1, and node 0.
for i in $(seq 100); do [ "$(job_home "$(id -u)" "a$i" 2)" = 1 ] && { A="a$i"; break; }; done
for i in $(seq 100); do [ "$(job_home "$(id -u)" "b$i" 2)" = 0 ] && { B="b$i"; break; }; done
homes() { "$BUILD/ferryctl" --runtime-dir "$TMP/$1" status | grep "^home of job $2 "; }
# Node 0's daemon dies (SIGKILL) and starts again; its links come back.
restart_n0() {
	kill -KILL "$(dpid rs_n0)"
	wait "$(dpid rs_n0)" 2>/dev/null
	start_daemon rs_n0 --config "$TMP/rs.conf" --node 0 && cluster_up rs 2
}

# --- a rank's node restarts: its home forgets the rank --------------------
FERRY_RUNTIME_DIR=$TMP/rs_n0 bg a0.log prog ft_open --job "$A" --rank 0 --size 2 --timeout 30000
expect "rank 0 of $A joined on node 0 (home node 1 has it)" wait_for 'homes rs_n1 "$A" | grep -q "1 of 2 ranks"'
restart_n0 || exit 1
expect "node 0 restarted: the home dropped the rank it had (its job record is gone)" \
	wait_for '! homes rs_n1 "$A" >/dev/null'
FERRY_RUNTIME_DIR=$TMP/rs_n0 bg a0b.log prog ft_open --job "$A" --rank 0 --size 2 --timeout 20000
p0=$LASTPID
FERRY_RUNTIME_DIR=$TMP/rs_n1 bg a1b.log prog ft_open --job "$A" --rank 1 --size 2 --timeout 20000
p1=$LASTPID
expect "... and the job starts again with both ranks" wait "$p0" "$p1"
expect "... (rank 0 took its place again, not refused as attached elsewhere)" grep -q "open ok" "$TMP/a0b.log"

# --- the home restarts while a job is being set up ----------------------
FERRY_RUNTIME_DIR=$TMP/rs_n1 bg b1.log prog ft_open --job "$B" --rank 1 --size 2 --timeout 30000
q1=$LASTPID
expect "rank 1 of $B joined on node 1 (home node 0 has it)" wait_for 'homes rs_n0 "$B" | grep -q "1 of 2 ranks"'
restart_n0 || exit 1
expect "the home restarted: node 1 said its rank's JOIN again to the new instance" \
	wait_for 'homes rs_n0 "$B" | grep -q "1 of 2 ranks"'
FERRY_RUNTIME_DIR=$TMP/rs_n0 bg b0.log prog ft_open --job "$B" --rank 0 --size 2 --timeout 20000
q0=$LASTPID
expect "... and the job starts once rank 0 joins (the waiting rank 1 too)" wait "$q0" "$q1"
expect "daemons exit cleanly" stop_cluster rs 2
finish
