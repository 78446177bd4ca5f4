# tests/integration/lib.sh - sourced by every integration test.
#
# Provides a private temporary directory, daemons started on it, and cleanup
# of every process and file the test made, also when it fails or is killed.
# Results are reported as TAP-like lines ("ok - ..." / "not ok - ...") that
# tests/run.sh counts.
#
# Environment: BUILD (build directory with ferryd, ferryctl, tests/).

set -u
BUILD=${BUILD:?BUILD must name the build directory}
BUILD=$(cd "$BUILD" && pwd)
TEST=$(basename "$0" .sh)
FAILED=0
PIDS=()
DAEMONS=()

TMP=$(mktemp -d /tmp/ferry-test.XXXXXX)
chmod 755 "$TMP"

cleanup() {
	local p
	for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null; done
	for p in "${PIDS[@]}"; do
		for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
		kill -KILL "$p" 2>/dev/null
	done
	wait 2>/dev/null
	if [ "${KEEP_TMP:-0}" = 1 ]; then echo "# kept $TMP"; else rm -rf "$TMP"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

t_ok()   { echo "ok - $TEST: $1"; }
t_fail() {
	echo "not ok - $TEST: $1"
	FAILED=1
	local f
	shift
	for f in "$@"; do [ -f "$f" ] && tail -n 30 "$f" | sed "s|^|#   $(basename "$f"): |"; done
	return 0
}
# expect DESCRIPTION COMMAND...: passes if the command succeeds.
expect() { local d=$1; shift; if "$@"; then t_ok "$d"; else t_fail "$d"; fi; }

# Runs a test program from the build directory.
prog() { local p=$1; shift; "$BUILD/tests/$p" "$@"; }

# start_daemon NAME [ferryd options...]: runtime dir $TMP/NAME, log $TMP/NAME.log.
# Sets DPID_<NAME>.  Waits until the socket answers.
start_daemon() {
	local name=$1; shift
	mkdir -p "$TMP/$name"
	chmod 755 "$TMP/$name"
	"$BUILD/ferryd" --runtime-dir "$TMP/$name" "$@" >"$TMP/$name.log" 2>&1 &
	local pid=$!
	PIDS+=("$pid")
	DAEMONS+=("$name")
	eval "DPID_$name=$pid"
	for _ in $(seq 100); do
		if "$BUILD/ferryctl" --runtime-dir "$TMP/$name" status >/dev/null 2>&1; then return 0; fi
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.05
	done
	echo "# ferryd $name did not start:"; sed 's/^/#   /' "$TMP/$name.log"
	return 1
}

dpid() { eval "echo \$DPID_$1"; }

# stop_daemon NAME: SIGTERM, wait; fails if it does not exit 0 or logged a
# sanitizer report.
stop_daemon() {
	local name=$1 pid rc
	pid=$(dpid "$name")
	kill -TERM "$pid" 2>/dev/null
	wait "$pid"; rc=$?
	if [ $rc -ne 0 ]; then echo "# ferryd $name exited with $rc"; return 1; fi
	if grep -qE "AddressSanitizer|LeakSanitizer|runtime error:" "$TMP/$name.log"; then
		echo "# ferryd $name: sanitizer report in its log"; return 1
	fi
	return 0
}

# stat NAME KEY: one counter from ferryctl stats.
stat() { "$BUILD/ferryctl" --runtime-dir "$TMP/$1" stats | awk -v k="$2" '$1 == k { print $2 }'; }

# Number of open file descriptors of a process.
nfds() { ls "/proc/$1/fd" | wc -l; }

# Waits up to ~10 s for a shell condition to become true.
wait_for() {
	for _ in $(seq 200); do eval "$1" && return 0; sleep 0.05; done
	return 1
}

# bg LOGNAME COMMAND...: runs it in the background, output to $TMP/LOGNAME;
# its pid goes to PIDS (for cleanup) and LASTPID.
# "prog NAME" is resolved here so that $! is the program itself, not a subshell
# running the prog function (signals sent to it must reach the program).
bg() {
	local log=$1; shift
	if [ "$1" = prog ]; then shift; set -- "$BUILD/tests/$1" "${@:2}"; fi
	"$@" >"$TMP/$log" 2>&1 &
	LASTPID=$!
	PIDS+=("$LASTPID")
}

finish() { exit "$FAILED"; }

# start_job JOB P [ft_alltoall options...]: P ranks of ft_alltoall in the
# background (FERRY_RUNTIME_DIR selects the daemon).  wait_job JOB passes if
# every rank exits 0, and shows their output otherwise.
start_job() {
	local job=$1 p=$2 r pids=""
	shift 2
	for r in $(seq 0 $((p - 1))); do
		bg "$job.$r.log" prog ft_alltoall --job "$job" --rank "$r" --size "$p" "$@"
		pids="$pids $LASTPID"
	done
	eval "JOB_$job=\"$pids\""
}
wait_job() {
	local job=$1 pid rc=0 f
	for pid in $(eval "echo \$JOB_$job"); do wait "$pid" || rc=1; done
	if [ $rc -ne 0 ]; then
		for f in "$TMP/$job".*.log; do sed "s|^|#   $(basename "$f"): |" "$f"; done
	fi
	return $rc
}
run_job() { start_job "$@"; wait_job "$1"; }
