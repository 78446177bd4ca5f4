#!/bin/bash
# daemon.cpus, core specialisation: a daemon told to run on CPU 1 runs there
# only, and says so (its log, ferryctl status, --check-config); one started on
# CPU 1 already (as the unit's CPUAffinity= starts it) makes no
# sched_setaffinity call; CPUs it may not use are refused.  The client's side, a process on CPU 0 that
# finds the daemon off its cores and makes no system call for an empty
# receive, where it would yield: poll.sh.
. "$(dirname "$0")/lib.sh"

allowed() { sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' "/proc/$1/status"; }
if ! runs_on 0 1; then
	echo "ok - $TEST: # SKIP needs 2 CPUs"
	finish
fi

cat >"$TMP/cpu1.conf" <<'CONF'
daemon: {
  cpus = "1";
};
CONF

start_daemon n0 --config "$TMP/cpu1.conf" || exit 1
export FERRY_RUNTIME_DIR=$TMP/n0
expect "pinned: /proc/PID/status says Cpus_allowed_list: $(allowed "$(dpid n0)")" test "$(allowed "$(dpid n0)")" = 1
expect "... and it logs it once, as a notice" test "$(grep -c '^<5>ferryd: pinned to CPUs 1$' "$TMP/n0.log")" = 1
expect "ferryctl status shows the CPUs it runs on" \
	bash -c "'$BUILD/ferryctl' status | grep -q '^ferryd node 0 of 1 .*, on CPUs 1$'"
expect "a job on the pinned daemon: every item once, in order" run_job j 2 --items 2000
expect "pinned daemon exits cleanly" stop_daemon n0

# Unpinned, status shows every CPU the daemon may run on.
start_daemon n1 || exit 1
expect "unpinned: status shows the CPUs it was started on ($(allowed "$(dpid n1)"))" bash -c \
	"'$BUILD/ferryctl' --runtime-dir '$TMP/n1' status | grep -q '^ferryd node 0 of 1 .*, on CPUs $(allowed "$(dpid n1)")$'"
expect "... and logs nothing about pinning" not grep -q pinned "$TMP/n1.log"
expect "unpinned daemon exits cleanly" stop_daemon n1

# Pinned before it starts (CPUAffinity=1 under the unit; taskset here), it
# makes no call: under a filter without sched_setaffinity (ft_deny kills the
# process on that call) it runs.
SAVED=("${FERRYD[@]}")
FERRYD=(taskset -c 1 "$BUILD/tests/ft_deny" sched_setaffinity "${SAVED[@]}")
start_daemon unit --config "$TMP/cpu1.conf"
expect "started on CPU 1 already, under a filter without sched_setaffinity: it runs (no call)" \
	kill -0 "$(dpid unit)"
expect "... on CPU 1" test "$(allowed "$(dpid unit)")" = 1
expect "... and says it found itself pinned" \
	grep -q '^<5>ferryd: pinned to CPUs 1 (already, by whoever started ferryd)$' "$TMP/unit.log"
expect "... and exits cleanly" stop_daemon unit
# (ft_deny does deny: started on every CPU under that filter, daemon.cpus
# needs the call, and the daemon is killed making it.)
mkdir -p "$TMP/killed" && daemon_owns "$TMP/killed"
timeout 20 "$BUILD/tests/ft_deny" sched_setaffinity "${SAVED[@]}" --config "$TMP/cpu1.conf" \
	--runtime-dir "$TMP/killed" >"$TMP/killed.log" 2>&1
rc=$?
expect "... where the call is needed, that filter kills it (exit $rc: SIGSYS): the check above could fail" \
	test $rc = $((128 + 31))
FERRYD=("${SAVED[@]}")

# A daemon that may not run on CPU 1 refuses to start, and says why.
taskset -c 0 "${FERRYD[@]}" --config "$TMP/cpu1.conf" --runtime-dir "$TMP/killed" >/dev/null 2>"$TMP/cpu0.err"
rc=$?
expect "started on CPU 0 only, it refuses daemon.cpus = \"1\" (exit $rc): $(cat "$TMP/cpu0.err")" bash -c \
	"[ $rc = 1 ] && grep -qx \"$TMP/cpu1.conf:2: 'daemon.cpus' names CPU 1, where ferryd may not run: it may run on 0 (.*)\" '$TMP/cpu0.err'"

# --check-config prints it, and refuses CPUs this machine does not have.
expect "--check-config prints it on the daemon: line" bash -c \
	"'$BUILD/ferryd' --check-config '$TMP/cpu1.conf' | grep -qx 'daemon: runtime_dir /run/ferry, spin_us 50, cpus 1'"
expect "... and says when it is unset" bash -c \
	"'$BUILD/ferryd' --check-config '$(dirname "$0")/../../conf/ferry.conf' | grep -q '^daemon: .*, cpus unset (not pinned)$'"
n=$(getconf _NPROCESSORS_CONF)
printf 'daemon: {\n  cpus = "0-%s";\n};\n' "$n" >"$TMP/beyond.conf"
out=$("$BUILD/ferryd" --check-config "$TMP/beyond.conf" 2>&1)
expect "a CPU beyond the machine's is refused: $out" \
	test "$out" = "$TMP/beyond.conf:2: 'daemon.cpus' names CPU $n, but this machine has CPUs 0 to $((n - 1))"
finish
