#!/bin/bash
# ferryd's sandbox as every test runs it (lib.sh): when the tests run as
# root, a user of its own without capabilities or groups; no_new_privs; its
# own seccomp filter (daemon/core/sandbox.c), which kills the daemon for a
# call that is not on its list.  `ferryctl debug forbidden-call` makes such a
# call (execve of a path that does not exist, harmless where it is allowed):
# with the filter on the daemon dies of SIGSYS; turned off, or only logging,
# the call is made and fails, and the daemon says so.
. "$(dirname "$0")/lib.sh"

# status PID FIELD: a field of /proc/PID/status.
status() { awk -v k="$2:" '$1 == k { $1 = ""; sub(/^ /, ""); print }' "/proc/$1/status"; }
# kernel_logged PID CODE: the kernel logged a seccomp action with that code
# for execve (syscall 59 on x86_64) of that process.  Where the kernel's log
# cannot be read (or auditd takes these messages), prints nothing and fails.
kernel_logged() { dmesg 2>/dev/null | grep 'type=1326' | grep " pid=$1 " | grep -q "syscall=59 .*code=$2"; }
dmesg_ok() { dmesg >/dev/null 2>&1 && [ "$(uname -m)" = x86_64 ]; }

start_cluster sb 2 || exit 1
p=$(dpid sb_n0)
expect "the daemon runs under its seccomp filter (Seccomp: 2 in /proc)" test "$(status "$p" Seccomp)" = 2
expect "... with no_new_privs" test "$(status "$p" NoNewPrivs)" = 1
expect "... and its log says what a forbidden call does" \
	grep -qE 'seccomp: [0-9]+ system calls allowed; any other kills the daemon' "$TMP/sb_n0.log"
if [ "$(id -u)" = 0 ]; then
	expect "... as user $FERRYD_UID, not root" test "$(status "$p" Uid | tr -s '\t ' ' ')" = \
		"$FERRYD_UID $FERRYD_UID $FERRYD_UID $FERRYD_UID"
	expect "... without a capability, not even in its bounding set" \
		test "$(status "$p" CapPrm)$(status "$p" CapEff)$(status "$p" CapBnd)" = "$(printf '0%.0s' $(seq 48))"
	expect "... and without supplementary groups" test -z "$(status "$p" Groups)"
else
	echo "ok - $TEST: the daemon's user and capabilities # SKIP the tests do not run as root"
fi
expect "a job runs across two sandboxed daemons, every item once and in order" \
	run_cluster_job sb j 2 2 --items 500 --sync

"$BUILD/ferryctl" --runtime-dir "$TMP/sb_n0" debug forbidden-call >"$TMP/probe.out" 2>&1
wait "$p"
rc=$?
expect "a call outside the list (execve) kills the daemon with SIGSYS (exit status $rc)" test "$rc" = $((128 + 31))
expect "... before the call was made" not grep -q 'not refused' "$TMP/probe.out"
expect "... while its peer lives on, and sees the link go" wait_for "kill -0 $(dpid sb_n1) && ! link_up sb_n1 0"
if dmesg_ok; then
	expect "... and the kernel logged the kill, naming execve" kernel_logged "$p" 0x80000000
else
	echo "ok - $TEST: the kernel's log of the kill # SKIP dmesg cannot be read here, or not x86_64"
fi
start_daemon sb_n0 --config "$TMP/sb.conf" --node 0 || exit 1
back() { cluster_up sb 2 && run_cluster_job sb k 2 1 --items 200 --sync; }
expect "the node started again (what the unit's Restart= does) links up and runs a job" back
expect "both daemons exit cleanly" stop_cluster sb 2

# The probe can tell a daemon without the filter: the call is made, fails.
start_daemon off --seccomp off || exit 1
"$BUILD/ferryctl" --runtime-dir "$TMP/off" debug forbidden-call >"$TMP/off.out" 2>&1
expect "with --seccomp off the same call is made, and fails harmlessly" \
	grep -q 'execve was not refused (No such file or directory): the system call filter is off' "$TMP/off.out"
expect "... the daemon lives on, with no filter (Seccomp: 0)" test "$(status "$(dpid off)" Seccomp)" = 0
expect "... and warned at start that it has none" grep -q 'no system call filter' "$TMP/off.log"
expect "... and exits cleanly" stop_daemon off

# "log": forbidden calls are made, and the kernel logs them (to find what a
# new RDMA provider or name service needs).
printf 'daemon: { seccomp = "log"; };\n' >"$TMP/log.conf"
start_daemon lg --config "$TMP/log.conf" || exit 1
"$BUILD/ferryctl" --runtime-dir "$TMP/lg" debug forbidden-call >"$TMP/lg.out" 2>&1
expect "with daemon.seccomp = \"log\" the call is made" \
	grep -q 'execve was not refused (No such file or directory): the system call filter is log' "$TMP/lg.out"
expect "... under a filter (Seccomp: 2)" test "$(status "$(dpid lg)" Seccomp)" = 2
if dmesg_ok; then
	expect "... which the kernel logged" kernel_logged "$(dpid lg)" 0x7ffc0000
else
	echo "ok - $TEST: the kernel's log of a logged call # SKIP dmesg cannot be read here, or not x86_64"
fi
expect "... and the daemon exits cleanly" stop_daemon lg
finish
