#!/bin/bash
# ferry_poll and the empty ferry_recv, on a real daemon: a receiver asleep in
# ferry_poll wakes when items come, a sender whose ring is full sleeps until
# the daemon makes room (tests/progs/ft_poll.c says what it checks), a
# sleeper learns that the daemon went away; an empty ferry_recv(..., 0)
# makes no system call when the daemon has a core of its own (daemon.cpus),
# and yields (one sched_yield) when it shares ours.
. "$(dirname "$0")/lib.sh"

# Small rings and queues: the sender's ring fills quickly.
cat >"$TMP/poll.conf" <<CONF
limits: { ring_bytes = 262144; pending_bytes = 262144; memory_bytes = 1048576; };
CONF
start_daemon n0 --config "$TMP/poll.conf" || exit 1
export FERRY_RUNTIME_DIR=$TMP/n0

prog ft_poll --job pp >"$TMP/pp.log" 2>&1
rc=$?
sed 's/^/# /' "$TMP/pp.log"
expect "ft_poll: every check passed" test $rc = 0
expect "... the sender slept on a full ring and was woken" grep -q "^ok sender: woken when room appeared" "$TMP/pp.log"
expect "... the receiver was woken by an item" grep -q "^ok receiver: woken by the first item" "$TMP/pp.log"
expect "nothing dropped" test "$(stat n0 items_dropped)" = 0

# ferry_fd() armed by an empty ferry_recv(..., 0), then a ferry_step_wait
# that slept (it sets and clears the same RX flag): the next empty
# ferry_recv(..., 0) must leave the fd armed, or an event loop waiting on it
# never hears of the next item.
prog ft_poll --job fw --fdwake >"$TMP/fw.log" 2>&1
rc=$?
sed 's/^/# /' "$TMP/fw.log"
expect "ferry_fd() wakes for an item after a ferry_step_wait that slept" test $rc = 0

# ... and across a ferry_poll(FERRY_POLLOUT, 0) that asks whether there is
# room to send, as an event loop that also sends does.
prog ft_poll --job fp --fdwake-poll >"$TMP/fp.log" 2>&1
rc=$?
sed 's/^/# /' "$TMP/fp.log"
expect "ferry_fd() wakes for an item after a ferry_poll(FERRY_POLLOUT, 0)" test $rc = 0

# The end of a step as README "Sending and receiving" recommends (ft_steps
# --end): taking items until none is left, ferry_step_wait(f, 0), then
# asleep until the step ends, in ferry_poll or on ferry_fd(), which the
# step's end must wake (review: ferry_step_wait(f, 0) left ferry_fd()
# disarmed, and a sleeper on it slept through the end).  Rank 1 starts
# each run 0.3 s late and sleeps 0.2 s after each step: rank 0 sleeps for
# the end of every step.
for e in poll fd; do
	bg se$e.1.log prog ft_steps --job se$e --rank 1 --size 2 --steps 5 --items 20 --start-ms 300 --gap-ms 200
	p1=$LASTPID
	prog ft_steps --job se$e --rank 0 --size 2 --steps 5 --items 20 --end $e >"$TMP/se$e.0.log" 2>&1
	r0=$?
	wait "$p1"
	r1=$?
	sed 's/^/# /' "$TMP/se$e".*.log
	expect "a rank that ends its steps taking items and sleeping in $([ $e = poll ] && echo ferry_poll || echo 'poll(2) on ferry_fd()') wakes for each end" \
		test $r0 = 0 -a $r1 = 0
done

# A sleeper whose daemon goes away: ferry_poll returns -ECONNRESET.
bg sleeper.log prog ft_poll --job sl --sleeper
sp=$LASTPID
wait_for "grep -q sleeping $TMP/sleeper.log"
kill -KILL "$(dpid n0)"
wait "$sp"
expect "a sleeper learns that the daemon went away: $(grep poll: "$TMP/sleeper.log")" \
	grep -q "^poll: -104 " "$TMP/sleeper.log"

# System calls of 100000 empty ferry_recv(..., 0), counted by strace: with the
# daemon on CPU 1 (daemon.cpus) and the program on CPU 0, (nearly) none: the
# library sees that the daemon has a core of its own; sharing CPU 1, one
# sched_yield each, and a look at the socket (a read and a poll) at most
# every 64 calls.
if runs_on 0 1 && command -v strace >/dev/null; then
	printf 'daemon: { cpus = "1"; };\n' >"$TMP/cpu1.conf"
	start_daemon n1 --config "$TMP/cpu1.conf" || exit 1
	export FERRY_RUNTIME_DIR=$TMP/n1
	strace -f -c -o "$TMP/own.strace" taskset -c 0 "$BUILD/tests/ft_poll" --job e1 --empty 100000 >/dev/null
	calls=$(awk '$NF == "total" { print $(NF-2) }' "$TMP/own.strace")
	expect "daemon on a core of its own: 100000 empty receives made $calls system calls (open and close included)" \
		test "${calls:-999999}" -lt 1000
	strace -f -c -o "$TMP/shared.strace" taskset -c 1 "$BUILD/tests/ft_poll" --job e2 --empty 100000 >/dev/null
	yields=$(awk '$NF == "sched_yield" { print $(NF-1) }' "$TMP/shared.strace")
	reads=$(awk '$NF == "read" { print $(NF-1) }' "$TMP/shared.strace")
	expect "daemon sharing the core: $yields sched_yield and ${reads:-0} reads for 100000 empty receives" \
		test "${yields:-0}" -ge 90000 -a "${reads:-0}" -lt 2000
	# The same daemon socket-activated, as packaging/ferryd.socket starts
	# it: the listening socket is the activator's (systemd's, pid 1), so the
	# client's SO_PEERCRED names the activator, not ferryd (ft_activate
	# stays the listener's owner as systemd does).  The activator may run
	# on every CPU; ferryd still has CPU 1 to itself, and the library must
	# still see that.
	mkdir -p "$TMP/sa"
	bg sa.log taskset -c 0,1 "$BUILD/tests/ft_activate" "$TMP/sa/ferryd.sock" \
		"${FERRYD[@]}" --runtime-dir "$TMP/sa" --config "$TMP/cpu1.conf"
	sa=$LASTPID
	wait_for '[ -S "$TMP/sa/ferryd.sock" ]'
	export FERRY_RUNTIME_DIR=$TMP/sa
	strace -f -c -o "$TMP/sa.strace" taskset -c 0 "$BUILD/tests/ft_poll" --job e3 --empty 100000 >/dev/null
	calls=$(awk '$NF == "total" { print $(NF-2) }' "$TMP/sa.strace")
	expect "socket-activated daemon on a core of its own: 100000 empty receives made $calls system calls" \
		test "${calls:-999999}" -lt 1000
	sapid=$("$BUILD/ferryctl" --runtime-dir "$TMP/sa" status | sed -n 's/.*, pid \([0-9]*\),.*/\1/p')
	[ -n "$sapid" ] && kill -TERM "$sapid"
	wait "$sa"
else
	echo "ok - $TEST: # SKIP counting system calls needs 2 CPUs (0 and 1) and strace"
fi
finish
