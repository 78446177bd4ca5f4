#!/bin/bash
# Steps fail instead of hanging (hardening finding 9): when a rank leaves a
# job that is running, its other ranks' ferry_step_wait returns -EPIPE naming
# the rank, within about 2 s; when a node the job needs is lost (its daemon
# killed and not back within 2 s, or restarted and so without its state),
# -EHOSTDOWN naming the node.  A job whose ranks all finish still ends well.
. "$(dirname "$0")/lib.sh"

# job_fails JOB RANK... : waits for those ranks (ft_steps) and checks that
# each exited 3 (its step failed) and printed the errno name and text.
steps_job() {  # steps_job JOB P NODE_OF_RANK... (daemon names; one per rank)
	local job=$1 p=$2 r
	shift 2
	for r in $(seq 0 $((p - 1))); do
		FERRY_RUNTIME_DIR=$TMP/$1 bg "$job.$r.log" prog ft_steps --job "$job" --rank "$r" --size "$p"
		eval "SPID_${job}_$r=$LASTPID"
		shift
	done
}
spid() { eval "echo \$SPID_$1_$2"; }
# failed_with JOB RANK PATTERN: the rank's step_wait failed (exit 3) and its
# message matches PATTERN.
failed_with() {
	local pid rc
	pid=$(spid "$1" "$2")
	wait "$pid" 2>/dev/null; rc=$?
	if [ $rc != 3 ] || ! grep -qE "$3" "$TMP/$1.$2.log"; then
		echo "# rank $2 of $1 exited $rc:"; sed 's/^/#   /' "$TMP/$1.$2.log"
		return 1
	fi
}
# elapsed_since T0: seconds since T0 (date +%s.%N), for the record.
elapsed_since() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }
steps_of() { grep -c . "$TMP/$1.$2.log" 2>/dev/null; }
running() { wait_for "[ \"\$(stat $1 endpoints)\" -ge $2 ]"; }

# --- a rank that dies in the middle of a job ------------------------------
start_daemon one || exit 1
steps_job dies 3 one one one
expect "three ranks run steps" running one 3
sleep 0.5
t0=$(date +%s.%N)
kill -KILL "$(spid dies 2)"
expect "rank 2 SIGKILLed: rank 0's step fails with EPIPE naming rank 2" \
	failed_with dies 0 "rank 0 step [0-9]+: a rank of the job left.*rank 2 \(on node 0\) left job dies"
expect "... and rank 1's" \
	failed_with dies 1 "rank 1 step [0-9]+: a rank of the job left.*rank 2 \(on node 0\) left job dies"
d=$(elapsed_since "$t0")
expect "... within 2 s of its exit (plus 1 s of slack for a loaded machine: $d s)" \
	awk -v d="$d" 'BEGIN { exit !(d <= 3.0) }'

# A job whose ranks all finish ends well: the first to leave does not fail
# the others' last step.
for r in 0 1 2; do
	FERRY_RUNTIME_DIR=$TMP/one bg "fin.$r.log" prog ft_steps --job fin --rank "$r" --size 3 --steps 50
	eval "fin$r=$LASTPID"
done
expect "a job whose ranks all finish their steps ends well" wait "$fin0" "$fin1" "$fin2"
expect "... every rank ran all 50 steps" grep -q "ok: 50 steps" "$TMP/fin.0.log"
stop_daemon one >/dev/null

# --- a node that is lost ------------------------------------------------
start_cluster nl 3 'topology: { virtual = "direct"; };' || exit 1
steps_job lost 6 nl_n0 nl_n0 nl_n1 nl_n1 nl_n2 nl_n2
expect "six ranks on three nodes run steps" running nl_n0 2
sleep 0.5
t0=$(date +%s.%N)
kill -KILL "$(dpid nl_n2)"
for r in 0 1 2 3; do
	expect "node 2's daemon SIGKILLed: rank $r's step fails with EHOSTDOWN naming node 2" \
		failed_with lost $r "a node or link the job needs was lost.*the link between nodes [01] and 2 has been down"
done
d=$(elapsed_since "$t0")
expect "... within 2 s of the link noticing (plus 1 s of slack: $d s)" awk -v d="$d" 'BEGIN { exit !(d <= 3.0) }'
# Its own ranks lost their daemon.
for r in 4 5; do wait "$(spid lost $r)"; done
expect "the surviving daemons are alive" kill -0 "$(dpid nl_n0)" "$(dpid nl_n1)"

# A daemon that restarts within the 2 s: its peers see a new instance.
start_daemon nl_n2 --config "$TMP/nl.conf" --node 2 || exit 1
cluster_up nl 3 || exit 1
steps_job again 3 nl_n0 nl_n1 nl_n2
expect "three ranks on three nodes run steps" running nl_n2 1
sleep 0.5
kill -KILL "$(dpid nl_n2)"
start_daemon nl_n2 --config "$TMP/nl.conf" --node 2 || exit 1
for r in 0 1; do
	expect "node 2's daemon restarted: rank $r's step fails with EHOSTDOWN naming node 2" \
		failed_with again $r "a node or link the job needs was lost.*node 2 restarted"
done
wait "$(spid again 2)"
cluster_up nl 3 || exit 1

# --- a rank that left a started job comes back (the review's rejoin.sh) ---
# Rank 0 (node 0) runs one step and leaves; rank 1 (node 1) fails its second
# step and stays in the job.  Rank 0 opening the job again is refused at once
# by the job's home (node 2): the job has started without it, and its steps
# would wait for a job the others gave up on.
for i in $(seq 100); do [ "$(job_home "$(id -u)" "rj$i" 3)" = 2 ] && { RJ="rj$i"; break; }; done
FERRY_RUNTIME_DIR=$TMP/nl_n1 bg "$RJ.1.log" prog ft_steps --job "$RJ" --rank 1 --size 2 --steps 2 --linger 30000
rj1=$LASTPID
FERRY_RUNTIME_DIR=$TMP/nl_n0 bg "$RJ.0.log" prog ft_steps --job "$RJ" --rank 0 --size 2 --steps 1
expect "rank 0 of a 2-rank job runs one step and leaves" wait "$LASTPID"
expect "... rank 1's second step fails with EPIPE naming rank 0" \
	wait_for 'grep -qE "rank 1 step 2: a rank of the job left.*rank 0 \(on node 0\) left job $RJ" "$TMP/$RJ.1.log"'
t0=$(date +%s.%N)
FERRY_RUNTIME_DIR=$TMP/nl_n0 prog ft_open --job "$RJ" --rank 0 --size 2 --timeout 15000 >"$TMP/rejoin.log" 2>&1
rc=$?
d=$(elapsed_since "$t0")
expect "rank 0 opening the started job again is refused: EBUSY ($(cat "$TMP/rejoin.log"))" \
	grep -q "open error .*(EBUSY): .*job $RJ has started without rank 0" "$TMP/rejoin.log"
expect "... at once, not after its 15 s timeout (exit $rc after $d s)" \
	awk -v d="$d" -v rc="$rc" 'BEGIN { exit !(rc == 1 && d <= 3.0) }'
expect "... while rank 1 is still in the job" kill -0 "$rj1"
kill -TERM "$rj1"
wait "$rj1" 2>/dev/null
expect "... the job ends when rank 1 leaves (its home forgets it)" \
	wait_for '! "$BUILD/ferryctl" --runtime-dir "$TMP/nl_n2" status | grep -q "^home of job $RJ "'
# Once its last rank has left, the job is over and its name free again.
for r in 0 1; do
	FERRY_RUNTIME_DIR=$TMP/nl_n$r bg "$RJ.again.$r.log" prog ft_steps --job "$RJ" --rank "$r" --size 2 --steps 3
	eval "rja$r=$LASTPID"
done
expect "... and once rank 1 has left, the name starts a new job" wait "$rja0" "$rja1"
expect "daemons exit cleanly" stop_cluster nl 3
finish
