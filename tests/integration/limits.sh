#!/bin/bash
# Local resource limits (limits.* in the configuration): connections that
# never join time out, and are capped per user and for the node; endpoints,
# jobs and memory are capped per user, so that one user's flood or slow
# receiver leaves room for the others (and loses nothing); a tool that never
# reads its replies is cut off; the accept loop neither spins nor stops
# serving when the daemon runs out of file descriptors.
. "$(dirname "$0")/lib.sh"

U1=64111 U2=64112
users_ok=0
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null; then
	users_ok=1
	# The build tree may not be readable by other users: copy what they run.
	mkdir -p "$TMP/bin"
	cp "$BUILD/tests/ft_open" "$BUILD/tests/ft_alltoall" "$BUILD/tests/ft_stream" "$BUILD/tests/ft_conns" \
		"$BUILD/ferryctl" "$TMP/bin/"
	cp -P "$BUILD"/libferry.so* "$TMP/bin/"
	chmod -R a+rX "$TMP/bin"
fi
# as UID DAEMON PROG ARGS...: runs a test program as that user against that daemon.
as() {
	local uid=$1 d=$2; shift 2
	setpriv --reuid="$uid" --regid="$uid" --clear-groups \
		env LD_LIBRARY_PATH="$TMP/bin" FERRY_RUNTIME_DIR="$TMP/$d" "$TMP/bin/$@"
}
skip() { echo "ok - $TEST: $1 # SKIP needs root and setpriv to switch users"; }
# cpu_ticks PID: user + system time of a process, in clock ticks.
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
# user_mem DAEMON UID: bytes of daemon memory that uid holds (ferryctl status as root).
user_mem() {
	"$BUILD/ferryctl" --runtime-dir "$TMP/$1" status | awk -v u="$2:" '$1 == "user" && $2 == u {
		for (i = 3; i < NF; i++) if ($i == "memory") { print $(i + 1); exit } }'
}

# --- connections that never join -----------------------------------------

cat >"$TMP/to.conf" <<CONF
limits: { join_timeout_ms = 800; admin_idle_ms = 3000; };
CONF
start_daemon to --config "$TMP/to.conf" || exit 1
prog ft_conns "$TMP/to" 3 silent 10000 >"$TMP/silent.out"
expect "connections that never say HELLO are closed after limits.join_timeout_ms" \
	grep -q "summary: opened 3 closed 3 .*first_ms \(7[5-9][0-9]\|[89][0-9][0-9]\|[0-9]\{4\}\) " "$TMP/silent.out"
expect "... not much later (within 3 s)" \
	grep -qE "summary: .* last_ms ([0-9]{1,3}|[12][0-9]{3})$" "$TMP/silent.out"
expect "... and are told why (ETIMEDOUT, the limit and its value)" \
	bash -c "[ \$(grep -c 'error 110 .*no JOIN within 800 ms of connecting (limits.join_timeout_ms = 800)' '$TMP/silent.out') = 3 ]"
prog ft_conns "$TMP/to" 2 hello 10000 >"$TMP/hello.out"
expect "connections that say HELLO and never JOIN are closed too" \
	grep -qE "summary: opened 2 closed 2 errors 2 .*first_ms (7[5-9][0-9]|[89][0-9]{2}|[0-9]{4}) " "$TMP/hello.out"
prog ft_conns "$TMP/to" 2 admin 10000 >"$TMP/admin.out"
expect "an idle tool's connection is closed after limits.admin_idle_ms" \
	grep -qE "summary: opened 2 closed 2 .*first_ms (29[0-9]{2}|[3-9][0-9]{3}|[0-9]{5}) " "$TMP/admin.out"
expect "the daemon counted them as timed out (7)" test "$(stat to sessions_timed_out)" = 7
expect "a tool that asks in time is answered" bash -c "'$BUILD/ferryctl' --runtime-dir '$TMP/to' status | grep -q '^ferryd node 0'"

# A tool that sends queries and never reads a reply: the daemon answers one
# query at a time and holds at most one reply (1 MiB) for it, then cuts it off.
bg noread.out prog ft_conns "$TMP/to" 1 noread 10000
nr=$LASTPID
wait_for 'grep -qs "^opened" "$TMP/noread.out"'
wait_for '[ "$(stat to memory_reply_bytes)" -gt 0 ]'
held=$(stat to memory_reply_bytes)
expect "a tool that never reads: the daemon holds at most one reply for it ($held bytes)" \
	test "${held:-0}" -gt 0 -a "${held:-0}" -le $((1048576 + 8))
expect "... and still answers others meanwhile" bash -c "'$BUILD/ferryctl' --runtime-dir '$TMP/to' stats | grep -q '^sessions '"
wait $nr
expect "... and cuts it off after limits.admin_idle_ms" grep -q "summary: opened 1 closed 1 " "$TMP/noread.out"
expect "... saying why in the log" grep -q "does not read its replies (limits.admin_idle_ms)" "$TMP/to.log"
expect "... and frees what it held" test "$(stat to memory_reply_bytes)" = 0
expect "daemon to exits cleanly" stop_daemon to

# --- caps on connections without an endpoint -------------------------------

cat >"$TMP/caps.conf" <<CONF
limits: { max_unjoined = 6; user_unjoined = 3; join_timeout_ms = 8000; };
CONF
start_daemon caps --config "$TMP/caps.conf" || exit 1
bg flood0.out prog ft_conns "$TMP/caps" 30 silent 5000
f0=$LASTPID
wait_for 'grep -qs "^opened" "$TMP/flood0.out"'
wait_for '[ "$(grep -c "^conn .*closed" "$TMP/flood0.out")" = 27 ]'
expect "one user's connections over limits.user_unjoined are refused at once (EDQUOT, the limit named)" \
	bash -c "[ \$(grep -cE 'error 122 after [0-9]{1,3} ms: uid 0 has 3 connections without an endpoint \\(limits.user_unjoined = 3\\)' '$TMP/flood0.out') = 27 ]"
expect "the log shows the flood rate-limited (at most 10 lines)" \
	test "$(grep -c 'connection of pid .* refused' "$TMP/caps.log")" -le 10
if [ $users_ok = 1 ]; then
	as $U1 caps ft_conns "$TMP/caps" 5 silent 5000 >"$TMP/flood1.out" &
	f1=$!
	wait_for 'grep -qs "^opened" "$TMP/flood1.out"'
	wait_for '[ "$(grep -c "^conn .*closed" "$TMP/flood1.out")" = 2 ]'
	expect "another user still gets limits.user_unjoined connections (3 of 5)" \
		bash -c "[ \$(grep -c 'error 122 .*uid $U1 has 3 connections' '$TMP/flood1.out') = 2 ]"
	as $U2 caps ft_open --job late --rank 0 --size 1 --timeout 2000 >"$TMP/late.out" 2>&1
	expect "with limits.max_unjoined reached, a third user's client gets a clear error (EUSERS)" \
		grep -q "open error .*(EUSERS): ferryd: too many connections without an endpoint (limits.max_unjoined = 6)" \
		"$TMP/late.out"
	wait $f1
else
	skip "another user still gets limits.user_unjoined connections"
	skip "with limits.max_unjoined reached, a third user's client gets a clear error"
fi
wait $f0
expect "once they are gone, a client gets in" \
	bash -c "FERRY_RUNTIME_DIR='$TMP/caps' '$BUILD/tests/ft_open' --job after --rank 0 --size 1 | grep -q 'open ok'"
expect "the refusals were counted" test "$(stat caps sessions_refused)" -ge 27
expect "daemon caps exits cleanly" stop_daemon caps

# --- endpoints, jobs and rank tables per user -------------------------------

cat >"$TMP/ep.conf" <<CONF
limits: { max_clients = 8; user_clients = 4; user_jobs = 2; ring_bytes = 262144;
          memory_bytes = 16777216; pending_bytes = 4194304; user_memory_bytes = 1048576; };
CONF
start_daemon ep --config "$TMP/ep.conf" || exit 1
export FERRY_RUNTIME_DIR=$TMP/ep
O=$BUILD/tests/ft_open
bg a0.out "$O" --job a --rank 0 --size 2 --hold 6000
held="$LASTPID"
bg a1.out "$O" --job a --rank 1 --size 2 --hold 6000
held="$held $LASTPID"
bg b0.out "$O" --job b --rank 0 --size 2 --timeout 6000 --hold 6000
held="$held $LASTPID"
wait_for '[ "$(stat ep endpoints)" = 3 ]'
"$O" --job c --rank 0 --size 1 --timeout 1000 >"$TMP/c.out" 2>&1
expect "a third job of one user is refused (EDQUOT, limits.user_jobs named)" \
	grep -q "open error .*(EDQUOT): ferryd: job c: cannot join: uid 0 has 2 jobs on this node (limits.user_jobs = 2)" \
	"$TMP/c.out"
bg b1.out "$O" --job b --rank 1 --size 2 --hold 6000
held="$held $LASTPID"
wait_for '[ "$(stat ep endpoints)" = 4 ]'
"$O" --job a --rank 1 --size 2 --timeout 1000 >"$TMP/e5.out" 2>&1
expect "a fifth endpoint of one user is refused (EDQUOT, limits.user_clients named)" \
	grep -q "open error .*(EDQUOT): ferryd: job a: cannot join: uid 0 has 4 endpoints (limits.user_clients = 4)" \
	"$TMP/e5.out"
if [ $users_ok = 1 ]; then
	as $U1 ep ft_alltoall --job other --rank 0 --size 2 --items 2000 >"$TMP/o0.out" 2>&1 &
	o0=$!
	as $U1 ep ft_alltoall --job other --rank 1 --size 2 --items 2000 >"$TMP/o1.out" 2>&1
	r1=$?
	wait $o0
	expect "meanwhile another user's job runs (every item once, in order)" test $r1 = 0 -a $? = 0
else
	skip "meanwhile another user's job runs"
fi
wait $held
wait_for '[ "$(stat ep endpoints)" = 0 ]'
"$O" --job huge --rank 0 --size 1048576 --timeout 1000 >"$TMP/huge.out" 2>&1
expect "a JOIN whose rank table exceeds limits.user_memory_bytes is refused (EDQUOT), not served" \
	grep -q "open error .*(EDQUOT): .*job huge: cannot join: its rank table needs 167[0-9][0-9][0-9][0-9][0-9] bytes.*(limits.user_memory_bytes = 1048576)" \
	"$TMP/huge.out"
expect "... and nothing of it stays (no job, no table)" \
	test "$(stat ep jobs)" = 0 -a "$(stat ep memory_table_bytes)" = 0
expect "JOINs refused by a limit are counted (3)" test "$(stat ep joins_refused)" = 3
unset FERRY_RUNTIME_DIR

# --- memory per user: one user's slow receiver, another user's job -----------
# (ferryd's queues: these same-node pairs must go through it, not through
# direct rings, whose memory is the clients'.)
export FERRY_DIRECT=0

if [ $users_ok = 1 ]; then
	# U1's receiver reads nothing until go1 exists: its RX ring (256 KiB)
	# fills, then its queue up to U1's 1 MiB, then U1's sender waits.
	as $U1 ep ft_stream --job slow --rank 1 --items 6000 --len 1000 --wait-file "$TMP/go1" >"$TMP/slow1.out" 2>&1 &
	sr=$!
	as $U1 ep ft_stream --job slow --rank 0 --items 6000 --len 1000 >"$TMP/slow0.out" 2>&1 &
	ss=$!
	wait_for '[ "$(user_mem ep $U1)" -ge $((1048576 - 2 * 131096)) ] 2>/dev/null'
	sleep 1
	m1=$(user_mem ep $U1)
	expect "a user's queued items stop at limits.user_memory_bytes ($m1 of 1048576 bytes)" \
		test "${m1:-0}" -le 1048576 -a "${m1:-0}" -ge $((1048576 - 2 * 131096))
	expect "... below limits.pending_bytes of the endpoint: it is the user's limit that holds" \
		test "$(stat ep memory_queued_bytes)" -lt 4194304
	expect "... and the daemon counted the waits" test "$(stat ep memory_waits)" -gt 0
	# Root's job needs queue memory too: its receiver starts late as well.
	FERRY_RUNTIME_DIR=$TMP/ep bg fast1.out prog ft_stream --job fast --rank 1 --items 3000 --len 1000 --wait-file "$TMP/go2"
	fr=$LASTPID
	FERRY_RUNTIME_DIR=$TMP/ep bg fast0.out prog ft_stream --job fast --rank 0 --items 3000 --len 1000
	fs=$LASTPID
	wait_for '[ "$(user_mem ep 0)" -ge 262192 ] 2>/dev/null'
	expect "another user gets queue memory while the first is at its limit" \
		test "$(stat ep memory_queued_bytes)" -gt 1048576
	touch "$TMP/go2"
	wait $fs; rs=$?
	wait $fr; rr=$?
	expect "... and that user's job completes: every item once, in order" test $rs = 0 -a $rr = 0
	expect "... while the first user's receiver has still not read" kill -0 $sr
	expect "... and its sender still waits" kill -0 $ss
	touch "$TMP/go1"
	wait $ss; rs=$?
	wait $sr; rr=$?
	expect "the waiting user's job completes once its receiver reads: every item once, in order" \
		test $rs = 0 -a $rr = 0
	eagain=$(sed -n 's/.*eagain \([0-9]*\).*/\1/p' "$TMP/slow0.out")
	expect "... its sender saw backpressure (-EAGAIN $eagain times)" test "${eagain:-0}" -gt 0
	expect "... nothing was dropped" test "$(stat ep items_dropped)" = 0
	expect "... and all queue memory is given back" \
		wait_for '[ "$(stat ep memory_queued_bytes)" = 0 ] && [ "$(stat ep users)" = 1 ]'
else
	skip "a user's queued items stop at limits.user_memory_bytes"
	skip "another user's job runs while the first is at its limit"
fi
expect "daemon ep exits cleanly" stop_daemon ep

# --- no file descriptors left ----------------------------------------------

if ! command -v prlimit >/dev/null; then
	echo "ok - $TEST: the accept loop without file descriptors # SKIP needs prlimit (util-linux)"
	finish
fi
cat >"$TMP/fd.conf" <<CONF
limits: { join_timeout_ms = 30000; };
CONF
start_daemon fd --config "$TMP/fd.conf" || exit 1
pid=$(dpid fd)
# The baseline with no session open: start_daemon's probe holds one until
# the daemon reads it closing, and a baseline counting it left the waiting
# client one descriptor short, for good, whenever the daemon had read it.
wait_for '[ "$(sessions fd)" = 0 ]'
n=$(nfds "$pid")
# Room for 6 descriptors more than it has now: enough for the waiting
# client (its connection and its endpoint's 4), not for the 20 held
# connections, the rest of which wait in the listening socket's backlog
# while accept fails with EMFILE.
# As the daemon's user: root in a container may lack CAP_SYS_RESOURCE,
# which changing another user's process's limits needs.
as_daemon=()
[ "$(id -u)" = 0 ] && as_daemon=(setpriv --reuid="$FERRYD_UID" --regid="$FERRYD_UID" --clear-groups)
if ! "${as_daemon[@]}" prlimit --pid "$pid" --nofile=$((n + 6)):$((n + 6)); then
	echo "not ok - $TEST: prlimit on the daemon failed"
	FAILED=1
fi
bg held.out prog ft_conns "$TMP/fd" 20 silent 5000
wait_for 'grep -qs "^opened" "$TMP/held.out"'
FERRY_RUNTIME_DIR=$TMP/fd bg legit.out prog ft_open --job legit --rank 0 --size 1 --timeout 20000
sleep 0.5
t0=$(cpu_ticks "$pid")
sleep 3
t1=$(cpu_ticks "$pid")
expect "out of file descriptors, the daemon does not spin ($((t1 - t0)) ticks of CPU in 3 s)" \
	test $((t1 - t0)) -lt 30
expect "... it says why, rate-limited" grep -q "accept: Too many open files; not accepting clients for" "$TMP/fd.log"
expect "... and the daemon still runs" kill -0 "$pid"
wait_for 'grep -qs "^summary" "$TMP/held.out"'
expect "once connections close, the waiting client gets in" wait_for 'grep -qs "open ok" "$TMP/legit.out"'
expect "the daemon counted its pauses" test "$(stat fd accept_paused)" -gt 0
expect "daemon fd exits cleanly" stop_daemon fd

# A JOIN whose endpoint finds no descriptors: room for its socket and its
# region's memfd, not for the eventfds.  It waits, not refused, while a
# tool still gets in, and gets in once there are; past limits.join_timeout_ms it is
# refused with EMFILE.  Only the soft limit is lowered, so that it can go up
# again without CAP_SYS_RESOURCE.
cat >"$TMP/fw.conf" <<CONF
limits: { join_timeout_ms = 4000; };
CONF
start_daemon fw --config "$TMP/fw.conf" || exit 1
pid=$(dpid fw)
hard=$(awk '/^Max open files/ { print $5 }' "/proc/$pid/limits")
# starve: the soft limit leaves room for 2 descriptors more than the daemon
# holds now, with no session open (a tool's goes when the daemon reads it).
starve() {
	wait_for '[ "$(sessions fw)" = 0 ]'
	n=$(nfds "$pid")
	"${as_daemon[@]}" prlimit --pid "$pid" --nofile=$((n + 2)):"$hard"
}
unstarve() { "${as_daemon[@]}" prlimit --pid "$pid" --nofile=$((n + 64)):"$hard"; }
starve
FERRY_RUNTIME_DIR=$TMP/fw bg starved.out prog ft_open --job starved --rank 0 --size 1 --timeout 20000
st=$LASTPID
wait_for 'grep -q "job starved: no file descriptors for its endpoint" "$TMP/fw.log"'
sleep 0.5
t0=$(cpu_ticks "$pid")
sleep 2
t1=$(cpu_ticks "$pid")
expect "a JOIN that finds no file descriptors waits, not refused" \
	eval 'kill -0 $st && ! grep -q "open" "$TMP/starved.out"'
expect "... without spinning ($((t1 - t0)) ticks of CPU in 2 s)" test $((t1 - t0)) -lt 20
expect "... while a tool still gets in (and sees it counted: joins_waited_fds)" \
	test "$(stat fw joins_waited_fds)" = 1
unstarve
expect "... and gets in once there are" wait_for 'grep -qs "open ok" "$TMP/starved.out"'
expect "... counted once (joins_waited_fds)" test "$(stat fw joins_waited_fds)" = 1
wait_for '[ "$(stat fw endpoints)" = 0 ]'
starve
FERRY_RUNTIME_DIR=$TMP/fw prog ft_open --job late --rank 0 --size 1 --timeout 20000 >"$TMP/late_fd.out" 2>&1
expect "a JOIN that waits for file descriptors past limits.join_timeout_ms fails with EMFILE" \
	grep -q "open error -24 .*no file descriptors for its endpoint within 4000 ms" "$TMP/late_fd.out"
unstarve
FERRY_RUNTIME_DIR=$TMP/fw prog ft_open --job after --rank 0 --size 1 --timeout 20000 >"$TMP/after.out" 2>&1
expect "... and the daemon serves the next one" grep -q "open ok" "$TMP/after.out"
expect "daemon fw exits cleanly" stop_daemon fw
finish
