#!/bin/bash
# Barriers run by the daemons (ferry_barrier, ferry_ibarrier): real daemons,
# real client processes.  No rank leaves barrier k before every rank entered
# it (each rank writes its enter and leave times, CLOCK_REALTIME, and ranks
# enter at staggered times); one rank, one node, several nodes with uneven
# ranks per node, a node of the cluster without ranks of the job; the
# non-blocking form makes progress without the caller; ferry_close refuses
# while a request is outstanding; a rank that dies fails the others'
# barrier (EPIPE, naming it) instead of leaving them waiting; ranks that
# finish and close do not fail the others' last barrier.
. "$(dirname "$0")/lib.sh"

# barrier_job JOB SIZE BARRIERS NODE_OF... [-- ft_coll options]: lib.sh's
# coll_job, each rank appending its enter and leave times to $TMP/JOB.times.
barrier_job() {
	local job=$1 x dashes=0
	for x in "$@"; do [ "$x" = -- ] && dashes=1; done
	rm -f "$TMP/$job.times"
	if [ $dashes = 1 ]; then
		coll_job "$@" --times "$TMP/$job.times"
	else
		coll_job "$@" -- --times "$TMP/$job.times"
	fi
}
# ordered JOB N: for each of the N barriers, the latest enter is before the
# earliest leave (and every rank wrote every barrier).
ordered() {
	local job=$1 n=$2 size=$3
	awk -v n="$n" -v size="$size" '
		{ c[$1]++; if ($2 > e[$1]) e[$1] = $2; if (!($1 in l) || $3 < l[$1]) l[$1] = $3 }
		END { for (k = 1; k <= n; k++) if (c[k] != size || l[k] < e[k]) { print "# barrier " k ": " c[k] " ranks, latest enter " e[k] ", earliest leave " l[k]; exit 1 } }
	' "$TMP/$job.times"
}

# --- one daemon --------------------------------------------------------------
start_daemon one || exit 1
barrier_job solo 1 5 one
expect "one rank: 5 barriers return at once" wait_job solo
expect "... and say so" grep -q "rank 0 ok: 5 barriers" "$TMP/solo.0.log"
barrier_job three 3 10 one one one -- --skew-ms 20
expect "three ranks on one node: 10 barriers, entered 20 ms apart" wait_job three
expect "... no rank left a barrier before every rank entered it" ordered three 10 3
barrier_job nb 3 5 one one one -- --skew-ms 30 --nonblocking
expect "ferry_ibarrier and ferry_test: 5 barriers" wait_job nb
expect "... rank 0, first in, saw them pending while the others had not entered" \
	awk '/ok:/ { exit !($6 > 0) }' "$TMP/nb.0.log"
expect "... ordered as well" ordered nb 5 3
barrier_job nbfd 3 5 one one one -- --skew-ms 30 --nonblocking --fd
expect "ferry_test and poll on ferry_fd(): 5 barriers, entered 30 ms apart" wait_job nbfd
expect "... ordered" ordered nbfd 5 3
# rank 0 waits about 60 ms per barrier for the last rank: a fd left readable
# for nothing would have it test thousands of times
expect "... rank 0, first in, was woken a few times per barrier, not spinning on a readable fd" \
	awk '/ok:/ { exit !($6 > 0 && $6 <= 25) }' "$TMP/nbfd.0.log"
barrier_job fdpair 3 4 one one one -- --skew-ms 40 --nonblocking --fd --pair
expect "two requests, the finished one tested after the pending one: ferry_fd() still wakes for the other" \
	wait_job fdpair
expect "... rank 0 was woken a few times per round, not spinning on a readable fd" \
	awk '/ok:/ { exit !($6 > 0 && $6 <= 20) }' "$TMP/fdpair.0.log"
barrier_job busy 2 2 one one -- --close-busy
expect "ferry_close with a request outstanding says -EBUSY and closes nothing" wait_job busy
# a rank that posts 100 barriers without waiting gets 64 in, then -EAGAIN;
# they all complete once the other rank posts as many
FERRY_RUNTIME_DIR=$TMP/one bg flood.0.log prog ft_coll --job flood --rank 0 --size 2 --flood 100 --barriers 0
f0=$LASTPID
FERRY_RUNTIME_DIR=$TMP/one bg flood.1.log prog ft_coll --job flood --rank 1 --size 2 --barriers 64 --skew-ms 1
f1=$LASTPID
wait "$f0"; rc0=$?
wait "$f1"; rc1=$?
expect "100 ibarriers without waiting: 64 taken, then -EAGAIN; all 64 complete" \
	bash -c "[ $rc0 = 0 ] && grep -q 'flood: 64 taken, then' '$TMP/flood.0.log' && ! grep -q 'none refused' '$TMP/flood.0.log'"
expect "... both ranks ended well" bash -c "[ $rc1 = 0 ] && grep -q 'rank 1 ok: 64 barriers' '$TMP/flood.1.log'"
expect "... and ferryd answers a query at once" bash -c "timeout 5 '$BUILD/ferryctl' --runtime-dir '$TMP/one' status >/dev/null"
stop_daemon one >/dev/null

# The done and post pages (proto/done.h, proto/post.h): with ferryd on a
# core of its own (CPU 1) and the ranks on CPU 0, a rank posts its barriers
# and learns that they ended through shared memory; rank 0's system calls,
# counted by strace, are yields, and (nearly) no send on the socket (a post
# there cost one), read of it (a COLL_DONE cost two or three) nor poll.
if runs_on 0 1 && command -v strace >/dev/null; then
	printf 'daemon: { cpus = "1"; };\n' >"$TMP/cpu1.conf"
	start_daemon pinned --config "$TMP/cpu1.conf" || exit 1
	FERRY_RUNTIME_DIR=$TMP/pinned bg quiet.1.log taskset -c 0 "$BUILD/tests/ft_coll" --job quiet --rank 1 --size 2 \
		--barriers 2000
	q1=$LASTPID
	# (LeakSanitizer cannot run under ptrace: the sanitizer build
	# checks leaks without strace elsewhere)
	ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" FERRY_RUNTIME_DIR=$TMP/pinned \
		strace -f -c -o "$TMP/quiet.strace" taskset -c 0 "$BUILD/tests/ft_coll" \
		--job quiet --rank 0 --size 2 --barriers 2000 >"$TMP/quiet.0.log" 2>&1
	rc0=$?
	wait "$q1"; rc1=$?
	looks=$(awk '$NF ~ /^(read|recvmsg|recvfrom|poll|ppoll|epoll_wait)$/ { n += $(NF-1) } END { print n + 0 }' \
		"$TMP/quiet.strace")
	sends=$(awk '$NF ~ /^(sendto|sendmsg|write)$/ { n += $(NF-1) } END { print n + 0 }' "$TMP/quiet.strace")
	expect "ferryd on a core of its own: 2000 barriers, rank 0 read or polled its socket $looks times, sent $sends" \
		bash -c "[ $rc0 = 0 ] && [ $rc1 = 0 ] && [ $looks -lt 200 ] && [ $sends -lt 200 ]"
	[ $rc0 = 0 ] && [ $rc1 = 0 ] || tail -n 3 "$TMP/quiet.0.log" "$TMP/quiet.1.log" | sed 's/^/#   /'
	stop_daemon pinned >/dev/null
else
	echo "ok - $TEST: # SKIP counting the done page's system calls needs 2 CPUs (0 and 1) and strace"
fi

# A daemon that sleeps whenever it is idle (spin_us = 0): a post on the post
# page (proto/post.h) wakes it through the endpoint's eventfd, and none is
# left waiting.  A lost wake-up would hold its barrier until ferryd's next
# timer (its status file, every second): the slowest barrier, from the last
# rank's enter to the last rank's leave, must take well under that.  (The
# watchdog ends the ranks after 90 s if they hang outright.)
printf 'daemon: { spin_us = 0; };\n' >"$TMP/sleepy.conf"
start_daemon sleepy --config "$TMP/sleepy.conf" || exit 1
barrier_job sleepy 3 3000 sleepy sleepy sleepy
barrier_job sleepynb 2 3000 sleepy sleepy -- --nonblocking
(trap 'kill $s 2>/dev/null; exit 0' TERM; sleep 90 & s=$!; wait $s; kill $JOB_sleepy $JOB_sleepynb 2>/dev/null) &
watchdog=$!
expect "a daemon that sleeps when idle: 3 ranks, 3000 barriers posted on the post page" wait_job sleepy
expect "... and 2 ranks, 3000 ibarriers" wait_job sleepynb
kill $watchdog 2>/dev/null
wait $watchdog 2>/dev/null
# slowest JOB: the longest barrier of JOB's times, last enter to last leave, in ms
slowest() {
	awk '{ if ($2 > e[$1]) e[$1] = $2; if ($3 > l[$1]) l[$1] = $3 }
	     END { for (k in e) if (l[k] - e[k] > m) m = l[k] - e[k]; printf "%.1f\n", m / 1e6 }' "$TMP/$1.times"
}
expect "... the slowest barrier took $(slowest sleepy) ms, the slowest ibarrier $(slowest sleepynb) ms (< 400)" \
	bash -c "[ \$(printf '%.0f' $(slowest sleepy)) -lt 400 ] && [ \$(printf '%.0f' $(slowest sleepynb)) -lt 400 ]"
expect "... and it slept meanwhile (loop_wakeups $(stat sleepy loop_wakeups))" test "$(stat sleepy loop_wakeups)" -gt 100
stop_daemon sleepy >/dev/null

# --- clusters ----------------------------------------------------------------
start_cluster c 5 || exit 1
# 7 ranks over 5 nodes: 2, 2, 1, 1, 1 ranks per node
barrier_job five 7 20 c_n0 c_n1 c_n2 c_n3 c_n4 c_n0 c_n1 -- --skew-ms 5
expect "5 nodes, 7 ranks (2, 2, 1, 1, 1 per node): 20 barriers" wait_job five
expect "... ordered" ordered five 20 7
# a job on nodes 1 and 3 only: the others have no rank of it
barrier_job two 4 30 c_n1 c_n3 c_n3 c_n1
expect "a job on 2 of the 5 nodes: 30 barriers" wait_job two
expect "... ordered" ordered two 30 4
# two jobs at once do not see each other's barriers
barrier_job ja 3 40 c_n0 c_n2 c_n4
barrier_job jb 3 40 c_n4 c_n2 c_n0 -- --nonblocking
expect "two jobs at once, 40 barriers each" wait_job ja
expect "... the other one too" wait_job jb
expect "... both ordered" bash -c "$(declare -f ordered); TMP=$TMP; ordered ja 40 3 && ordered jb 40 3"
# ranks that close right after their last barrier, ten times: none fails
# another's (a LEAVE says which operations its node started: coll.h)
quick=0
for i in $(seq 10); do
	barrier_job "q$i" 3 1 c_n0 c_n1 c_n2
	wait_job "q$i" && quick=$((quick + 1))
done
expect "ten jobs whose ranks close right after one barrier: every rank's barrier succeeded ($quick of 10)" \
	test "$quick" = 10
# ferryctl stats: the job's collectives while a rank lingers
barrier_job st 2 3 c_n0 c_n2 -- --linger 3000
expect "... a job that lingers after 3 barriers" wait_for "grep -q ok: '$TMP/st.0.log' && grep -q ok: '$TMP/st.1.log'"
expect "ferryctl stats: the job's collectives (3 run, none failed, the last a barrier)" \
	bash -c "'$BUILD/ferryctl' --runtime-dir '$TMP/c_n0' stats | grep -qE '^coll job st uid [0-9]+ nodes 2 groups 0 ops_run 3 ops_failed 0 pending 0 last barrier'"
wait_job st >/dev/null

# --- failure -----------------------------------------------------------------
# rank 2 (node 2) dies instead of entering barrier 3: the others' barrier 3
# fails with EPIPE naming it, within a few seconds, and never hangs
barrier_job dies 4 10 c_n0 c_n1 c_n2 c_n3 -- --die-before 3 --die-rank 2
t0=$(date +%s.%N)
for r in 0 1 3; do
	expect "a rank died before barrier 3: rank $r's barrier 3 fails with EPIPE naming rank 2" \
		bash -c "wait_pid() { while kill -0 \$1 2>/dev/null; do sleep 0.05; done; }; \
			 timeout 20 bash -c 'while ! grep -q \"barrier\" \"$TMP/dies.$r.log\"; do sleep 0.05; done'; \
			 grep -qE 'rank $r barrier 3: .*rank 2 .*left' '$TMP/dies.$r.log'"
done
d=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
expect "... within 2 s of its exit, plus slack for a loaded machine ($d s)" awk -v d="$d" 'BEGIN { exit !(d <= 6.0) }'
wait_job dies >/dev/null
# the daemons are healthy: a new job runs its barriers
# A rank that leaves right after the job is ready, while the others enter
# their first barrier: the barrier fails for them, ten times out of ten (it
# never completes without a rank: the layout is the one at the start)
raced=0
for i in $(seq 10); do
	barrier_job "r$i" 3 1 c_n0 c_n1 c_n2 -- --die-before 1 --die-rank 0
	wait_job "r$i" >/dev/null 2>&1
	grep -q "rank 1 barrier 1: " "$TMP/r$i.1.log" && grep -q "rank 2 barrier 1: " "$TMP/r$i.2.log" &&
		raced=$((raced + 1))
done
expect "a rank that leaves at once: the others' first barrier fails, 10 times out of 10 ($raced)" test "$raced" = 10
# Every rank of a node leaves (one after posting a barrier): the node's
# collective state for the job goes within the grace time, and so does the
# job, which no longer counts against its user
FERRY_RUNTIME_DIR=$TMP/c_n1 bg gone.1.log prog ft_coll --job gone --rank 1 --size 2 --die-before 1
g1=$LASTPID
FERRY_RUNTIME_DIR=$TMP/c_n0 bg gone.0.log prog ft_coll --job gone --rank 0 --size 2 --post-and-die 1
g0=$LASTPID
wait "$g0" "$g1" 2>/dev/null
wait_secs() { local end=$((SECONDS + $2)); while [ $SECONDS -lt "$end" ]; do eval "$1" && return 0; sleep 0.2; done; return 1; }
expect "ranks gone: within 10 s (+ slack) node 0 keeps nothing of the job's collectives" \
	wait_secs "! '$BUILD/ferryctl' --runtime-dir '$TMP/c_n0' stats | grep -q '^coll job gone '" 20
expect "... nor the job" wait_secs "[ \"\$(stat c_n0 jobs)\" = 0 ]" 5
barrier_job after 5 5 c_n0 c_n1 c_n2 c_n3 c_n4
expect "after that, a new job on the same daemons runs its barriers" wait_job after
expect "the daemons exit cleanly" stop_cluster c 5
finish
