#!/bin/bash
# A link that is down is not a node that is lost (hardening, the review's
# linkflap finding).  On a 3x3 torus of network namespaces the link between
# nodes 0 and 1 is cut (its veth down, both TCP connections broken, and no
# route to reconnect over) for longer than the 2 s after which a link counts
# as lost:
# - a job whose routes never use that link goes on and completes every step,
#   though one of its nodes is at an end of the link;
# - a job whose ranks talk over it fails with EHOSTDOWN naming the link, and
#   its ranks agree on the step that failed (the home decides, and its FAIL
#   follows its STEPs);
# - a job with a node cut off from its home fails on every rank too;
# and once the link is back, a job over it runs.
. "$(dirname "$0")/lib.sh"

if ! netns_ok; then
	echo "ok - $TEST: # SKIP needs root and network namespaces"
	exit 0
fi

CL=ll
netns_cluster "$CL" torus 3 3 || { t_fail "namespaces"; finish; }
start_netns_cluster "$CL" 9 || { t_fail "links up"; finish; }

# crosses SRC DST: the route from SRC to DST takes the link between 0 and 1.
crosses() {
	"$BUILD/ferryctl" route --dims 3x3 --torus --from "$1" --to "$2" | grep -qE '(^| )0 \(0,0\) -> 1 \(0,1\)|(^| )1 \(0,1\) -> 0 \(0,0\)'
}
# pick_job PREFIX HOME-TEST NODE...: the first name PREFIXk whose home (for
# this uid) passes HOME-TEST (a command given the home, then the nodes).
pick_job() {
	local prefix=$1 test=$2 k name h
	shift 2
	for k in $(seq 0 999); do
		name=$prefix$k
		h=$(job_home "$(id -u)" "$name" 9)
		if "$test" "$h" "$@"; then echo "$name"; return 0; fi
	done
	return 1
}
# clear_of HOME NODE...: no route between HOME and a NODE crosses the link.
clear_of() {
	local h=$1 n
	shift
	for n in "$@"; do
		if crosses "$h" "$n" || crosses "$n" "$h"; then return 1; fi
	done
}
home_is_1() { [ "$1" = 1 ]; }

# steps_job JOB STEPS NODE... : one ft_steps rank per NODE (rank k on the k-th),
# a step every 100 ms.
steps_job() {
	local job=$1 steps=$2 r=0 n p
	shift 2
	p=$#
	for n in "$@"; do
		FERRY_RUNTIME_DIR=$TMP/${CL}_n$n bg "$job.$r.log" \
			prog ft_steps --job "$job" --rank "$r" --size "$p" --steps "$steps" --items 20 --gap-ms 100
		eval "SPID_${job}_$r=$LASTPID"
		r=$((r + 1))
	done
}
spid() { eval "echo \$SPID_$1_$2"; }
running() { grep -q running "$TMP/$1.$2.log" 2>/dev/null; }
# failed_link JOB RANK: waits for the rank; it must have exited 3 with
# EHOSTDOWN naming the link.  FSTEP is the step that failed.
failed_link() {
	local rc
	wait "$(spid "$1" "$2")" 2>/dev/null; rc=$?
	FSTEP=$(sed -nE "s/^rank $2 step ([0-9]+):.*/\1/p" "$TMP/$1.$2.log")
	if [ $rc != 3 ] || ! grep -qE "^rank $2 step [0-9]+: a node or link the job needs was lost.*link between nodes (0 and 1|1 and 0) has been down" "$TMP/$1.$2.log"; then
		echo "# rank $2 of $1 exited $rc:"; sed 's/^/#   /' "$TMP/$1.$2.log"
		return 1
	fi
}

X=$(pick_job x clear_of 1 2) || { t_fail "no name for job x"; finish; }
Y=$(pick_job y clear_of 0 1) || { t_fail "no name for job y"; finish; }
Z=$(pick_job z home_is_1) || { t_fail "no name for job z"; finish; }
echo "# jobs: $X on nodes 1, 2 (home $(job_home "$(id -u)" "$X" 9)); $Y on 0, 1 (home" \
	"$(job_home "$(id -u)" "$Y" 9)); $Z on 0, 4 (home 1)"
steps_job "$X" 100 1 2          # about 10 s
steps_job "$Y" 100000 0 1
steps_job "$Z" 100000 0 4
expect "three jobs run steps" wait_for "running $X 0 && running $X 1 && running $Y 0 && running $Y 1 && running $Z 0 && running $Z 1"
sleep 1

# Cut the link: no route between the two namespaces, then both connections
# broken (a vanished machine would be noticed after the TCP keepalive).
netns_cut "$CL" 0 1
t0=$(date +%s.%N)

expect "the link 0-1 cut: rank 0 of $Y (node 0) fails with EHOSTDOWN naming the link" failed_link "$Y" 0
s0=$FSTEP
expect "... and rank 1 (node 1)" failed_link "$Y" 1
s1=$FSTEP
d=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
expect "... within 2 s (plus 2 s of slack for a loaded machine: $d s)" awk -v d="$d" 'BEGIN { exit !(d <= 4.0) }'
expect "... at the same step (rank 0: ${s0:-?}, rank 1: ${s1:-?})" test "${s0:-a}" = "${s1:-b}"
expect "both ranks of $Z (node 0 cut off from its home, node 4) fail too" \
	bash -c "w() { while kill -0 \$1 2>/dev/null; do sleep 0.1; done; }; w $(spid "$Z" 0); w $(spid "$Z" 1); \
		grep -q 'was lost' '$TMP/$Z.0.log' && grep -q 'was lost' '$TMP/$Z.1.log'"
expect "$X (nodes 1, 2, routes clear of the link) is still running" \
	kill -0 "$(spid "$X" 0)" "$(spid "$X" 1)"

# Back: the veths up and their routes again; the links reconnect.
expect "the link comes back" netns_mend "$CL" 0 1

ok=1
for r in 0 1; do
	wait "$(spid "$X" "$r")" || ok=0
	grep -q "ok: 100 steps" "$TMP/$X.$r.log" || ok=0
done
[ $ok = 1 ] || sed 's/^/#   /' "$TMP/$X".*.log
expect "$X completed all 100 steps on both ranks, through the cut" test $ok = 1
expect "a new job over the link runs, every item exactly once" \
	run_cluster_job "$CL" after 2 1 --items 500 --len 16 --steps 2 --sync
expect "daemons exit cleanly" stop_cluster "$CL" 9
finish
