#!/bin/bash
# Descriptors a client hands ferryd whose close() blocks (daemon/core/closer.h;
# review finding: one such descriptor stalled ferryd for every user): a TCP
# socket lingering for an hour with data its peer never reads, sent with a
# garbage byte (ferryd reads it and ends the session), and left unread in a
# connection ferryd refuses.  ferryd keeps answering and serving others,
# closes them in a thread of that user's, refuses that user's connections
# while 32 of them wait, and is back to normal once they can close.
. "$(dirname "$0")/lib.sh"

as_two_users 64131 64132
A=$USER_A B=$USER_B
cat >"$TMP/h.conf" <<CONF
limits: { user_unjoined = 2; };
CONF
start_daemon n0 --config "$TMP/h.conf" || exit 1
export FERRY_RUNTIME_DIR=$TMP/n0
pid=$(dpid n0)

# answers: ferryctl status answers within 5 s.
answers() { timeout 5 "$BUILD/ferryctl" --runtime-dir "$TMP/n0" status >/dev/null 2>&1; }
# closing N: ferryctl stats says that N descriptors wait to be closed (up to 10 s).
closing() { wait_for "[ \"\$(stat n0 fds_closing)\" = $1 ]"; }
# a job of user B, 2 ranks, through n0
b_job() {
	local r pids="" rc=0
	for r in 0 1; do
		asbg "$1.$r.log" "$B" n0 ft_alltoall --job "$1" --rank $r --size 2 --items 2000 --len 16
		pids="$pids $LASTPID"
	done
	for r in $pids; do wait "$r" || rc=1; done
	return $rc
}

# as_a_pipe: user A hands over a pipe (ft_linger pipe)
as_a_pipe() { as "$A" n0 ft_linger "$TMP/n0" pipe 0 >"$TMP/pipe.log" 2>&1; }

# --- sent, read by ferryd ----------------------------------------------------
asbg sent.log "$A" n0 ft_linger "$TMP/n0" sent 4
s1=$LASTPID
expect "a client sent ferryd a socket whose close blocks (lingering, unread data), with a garbage byte" \
	wait_for "grep -q 'handed over' $TMP/sent.log"
expect "... ferryd ended that session and closes the socket in a thread: 1 descriptor waits" closing 1
expect "... meanwhile ferryd answers at once" answers
expect "... and runs another user's job" b_job bj1
expect "... the user's next connection is taken (1 waiting is under the limit of 32)" \
	grep -q "then: open" "$TMP/sent.log"
wait $s1
expect "once the socket can close (its listener gone), nothing waits" closing 0
expect "... and the log says why that session ended" grep -q "uid $A).*descriptor" "$TMP/n0.log"

# --- in a connection ferryd refuses, unread ---------------------------------
asbg refused.log "$A" n0 ft_linger "$TMP/n0" refused 4 2 "$TMP/go"
s2=$LASTPID
wait_for "grep -q 'conns open' $TMP/refused.log &&
	$BUILD/ferryctl --runtime-dir $TMP/n0 status | grep -q 'user $A: 0 endpoints, 2 connections without an endpoint'"
# Stopped, ferryd cannot refuse the connection before the socket is in it.
kill -STOP "$pid"
touch "$TMP/go"
ok=0
wait_for "grep -q 'handed over' $TMP/refused.log" && ok=1
kill -CONT "$pid"
expect "a client over its connection limit sent the socket before ferryd took the connection" test $ok = 1
expect "... ferryd refused it, the socket unread in it, and closes it in a thread" closing 1
expect "... it says so (limits.user_unjoined)" grep -q "uid $A refused: .*limits.user_unjoined" "$TMP/n0.log"
expect "... meanwhile ferryd answers at once" answers
wait $s2
expect "once the socket can close, nothing waits" closing 0

# --- 32 of them: the user is refused until they close -----------------------
asbg many.log "$A" n0 ft_linger "$TMP/n0" sent 8 32
s3=$LASTPID
expect "a client sent 32 such sockets, one a connection" wait_for "grep -q 'handed over' $TMP/many.log"
expect "... 32 descriptors wait" closing 32
expect "... and that user's next connection is refused" grep -q "then: refused" "$TMP/many.log"
expect "... saying why" grep -q "still being closed" "$TMP/n0.log"
if [ "$A" != "$B" ]; then
	expect "... while another user's job runs" b_job bj2
else
	echo "ok - $TEST: ... while another user's job runs # SKIP needs two users (root)"
fi
expect "... and ferryd answers" answers
expect "... each socket in a thread of that user's (threads started: fewer than the descriptors)" \
	test "$(stat n0 closing_threads_started)" -lt "$(stat n0 fds_handed_to_threads)"
wait $s3
expect "once they can close, nothing waits" closing 0
expect "... and the user connects again" as_a_pipe
expect "a descriptor whose close does not block goes the same way, and closes at once" closing 0
expect "no descriptor was kept open for want of a thread" test "$(stat n0 fds_kept_open)" = 0

# --- a daemon stopped while a close blocks ------------------------------------
asbg last.log "$A" n0 ft_linger "$TMP/n0" sent 60
s4=$LASTPID
expect "a last one waits" wait_for "grep -q 'handed over' $TMP/last.log"
expect "... in its thread" closing 1
kill -TERM "$pid"
t0=$(date +%s%N)
rc=0
wait "$pid" || rc=$?
t1=$(date +%s%N)
expect "ferryd exits cleanly while a close still blocks in its thread (SIGTERM: exit status 0, in $(( (t1 - t0) / 1000000 )) ms)" test "$rc" = 0 -a $(( (t1 - t0) / 1000000000 )) -lt 10
expect "... no sanitizer report" not grep -qE "AddressSanitizer|LeakSanitizer|runtime error:" "$TMP/n0.log"
kill "$s4" 2>/dev/null
wait "$s4" 2>/dev/null
finish
