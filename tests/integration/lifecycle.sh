#!/bin/bash
# ferryd's life: systemd notifications, socket activation, one daemon per
# socket, logs with syslog levels, and SIGTERM delivering queued items before
# exiting.
. "$(dirname "$0")/lib.sh"

# --- sd_notify, against a stand-in for systemd's notification socket ---
bg notify.log prog ft_notify "$TMP/notify.sock"
wait_for '[ -S "$TMP/notify.sock" ]'
daemon_owns "$TMP/notify.sock"          # systemd's is writable by every service
NOTIFY_SOCKET=$TMP/notify.sock WATCHDOG_USEC=200000 start_daemon n0 || exit 1
export FERRY_RUNTIME_DIR=$TMP/n0
expect "READY=1 once the socket listens" wait_for 'grep -q "^READY=1" "$TMP/notify.log"'
expect "STATUS= with a one-line summary" wait_for 'grep -q "^STATUS=node 0/1: 0 clients, 0 jobs" "$TMP/notify.log"'
expect "WATCHDOG=1 at half the unit's WatchdogSec" wait_for '[ "$(grep -c "^WATCHDOG=1" "$TMP/notify.log")" -ge 3 ]'
nodirect run_job busy 2 --items 5000 >/dev/null      # (through ferryd, which counts them)
expect "STATUS= follows the traffic" wait_for 'grep -q "^STATUS=node 0/1: 0 clients, 0 jobs, 20000 items delivered" "$TMP/notify.log"'

# --- logs carry syslog levels ---
expect "every log line starts with a <N> level prefix" bash -c "! grep -vqE '^<[0-7]>ferryd: ' '$TMP/n0.log'"

# --- one daemon per socket ---
"${FERRYD[@]}" --runtime-dir "$TMP/n0" >"$TMP/second.log" 2>&1
expect "a second ferryd on the same socket refuses to start" \
	bash -c "[ $? -ne 0 ] && grep -q 'another ferryd is listening' '$TMP/second.log'"

# --- SIGTERM: items queued for a slow receiver are delivered before exit ---
printf 'limits: { ring_bytes = 262144; };\n' >"$TMP/small.conf"
start_daemon n1 --config "$TMP/small.conf" || exit 1
export FERRY_RUNTIME_DIR=$TMP/n1
bg drain-recv.log prog ft_stream --job d --rank 1 --items 40000 --len 128 --recv-delay-us 3000
r=$LASTPID
prog ft_stream --job d --rank 0 --items 40000 --len 128 >"$TMP/drain-send.log" 2>&1
expect "sender handed over all items and left" test $? = 0
queued=$(stat n1 items_queued)
kill -TERM "$(dpid n1)"
wait $r
expect "receiver got all 40000 items although ferryd was stopped (queued: $queued)" test $? = 0
expect "ferryd exited 0 after draining" stop_daemon n1
expect "... and said so" grep -q "drained; exiting" "$TMP/n1.log"

kill -TERM "$(dpid n0)"
expect "STOPPING=1 on SIGTERM" wait_for 'grep -q "^STOPPING=1" "$TMP/notify.log"'
expect "ferryd n0 exited 0" stop_daemon n0
expect "the socket file is removed at exit" test ! -e "$TMP/n0/ferryd.sock"

# --- socket activation (systemd-socket-activate passes the listening fd) ---
if command -v systemd-socket-activate >/dev/null; then
	mkdir -p "$TMP/sa"
	bg sa.log systemd-socket-activate -l "$TMP/sa/ferryd.sock" "${FERRYD[@]}" --runtime-dir "$TMP/sa"
	sa=$LASTPID
	wait_for '[ -S "$TMP/sa/ferryd.sock" ]'
	expect "socket activation: the first client starts ferryd, which serves it" \
		bash -c "FERRY_TIMEOUT_MS=10000 FERRY_RUNTIME_DIR='$TMP/sa' '$BUILD/tests/ft_alltoall' --job sa --rank 0 --size 1 >/dev/null"
	expect "... ferryd logged that it was ready" grep -q "ready on" "$TMP/sa.log"
	# The daemon is a child of systemd-socket-activate, which does not pass
	# signals on: stop it by the pid it reports itself.
	sapid=$("$BUILD/ferryctl" --runtime-dir "$TMP/sa" status | sed -n 's/.*, pid \([0-9]*\),.*/\1/p')
	[ -n "$sapid" ] && kill -TERM "$sapid"
	# (The activator may have exec'd ferryd itself, and be gone already.)
	kill -TERM $sa 2>/dev/null; wait $sa
	expect "... and it stopped with the activator" not pgrep -f "ferryd --runtime-dir $TMP/sa"
else
	echo "ok - $TEST: socket activation # SKIP systemd-socket-activate not installed"
fi
finish
