#!/bin/bash
# tests/run.sh BUILD_DIR... - ferry's test suite.
#
# First the static checks (tests/static/: the layering of the code, on its
# includes and on what the first build's objects link), once.
# Then, for each build directory (the plain build, then the ASan+UBSan one):
# every unit test binary, then every integration test.  Then a short run of every
# fuzz harness (built with clang's sanitizers).  Each "ok - ..." line counts
# as a pass, each "ok - ... # SKIP why" line (TAP's directive, any case) as
# skipped, not passed, and each "not ok - ..." line as a failure; a program
# that exits non-zero without a "not ok" line counts as one failure.  The
# last line is "N passed, N failed", with ", N skipped" added when anything
# was skipped (.ci/run and make check-rdma read and write the same line).
#
# Environment: TESTS="pattern|pattern..." runs only integration tests whose
# name matches (and no static checks or fuzzing);
# FUZZ_CHECK_SECONDS (default 10) per fuzz harness, 0 to skip;
# LAUNCH=1 runs the launch tests (tests/launch/: jobs started by a real
# Slurm and Open MPI, make check-launch) on each build directory instead,
# and nothing else.
set -u
cd "$(dirname "$0")/.." || exit 1
ROOT=$PWD
export LSAN_OPTIONS="suppressions=$ROOT/tests/lsan.supp"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
export ASAN_OPTIONS="detect_leaks=1"
PASSED=0
FAILED=0
SKIPPED=0
SKIP_RE='^ok - .*#[[:space:]]*[Ss][Kk][Ii][Pp]'

# run LABEL COMMAND...: runs it, shows its output, counts its results.
run() {
	local label=$1 out rc p f s
	shift
	out=$(mktemp)
	timeout 900 "$@" >"$out" 2>&1
	rc=$?
	sed "s/^\(ok\|not ok\) - /\1 - [$label] /" "$out"
	s=$(grep -c "$SKIP_RE" "$out")
	p=$(($(grep -c '^ok - ' "$out") - s))
	f=$(grep -c '^not ok - ' "$out")
	grep '^not ok - ' "$out" | sed "s/^not ok - /[$label] /" >>"$ROOT/build/failures.txt"
	grep "$SKIP_RE" "$out" | sed "s/^ok - /[$label] /" >>"$ROOT/build/skipped.txt"
	if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
		echo "not ok - [$label] $* exited with status $rc"
		echo "[$label] $* exited with status $rc" >>"$ROOT/build/failures.txt"
		f=1
	fi
	PASSED=$((PASSED + p))
	FAILED=$((FAILED + f))
	SKIPPED=$((SKIPPED + s))
	rm -f "$out"
}

# selected NAME: the integration test NAME is to run (TESTS is a list of
# glob patterns separated by "|"; a "|" in a variable is no alternation in a
# case pattern, hence the loop).
selected() {
	local p
	[ -z "${TESTS:-}" ] && return 0
	IFS='|' read -ra pats <<<"$TESTS"
	for p in "${pats[@]}"; do
		# shellcheck disable=SC2254
		case "$1" in $p) return 0 ;; esac
	done
	return 1
}

mkdir -p build
: >build/failures.txt
: >build/skipped.txt
start=$(date +%s)
if [ "${LAUNCH:-0}" = 1 ]; then
	for b in "$@"; do
		label=$(basename "$b")
		[ "$b" = build ] && label=plain
		echo "# === $b: launch tests"
		for t in tests/launch/*.sh; do
			[ "$t" = tests/launch/lib.sh ] && continue
			run "$label" env BUILD="$b" bash "$t"
		done
	done
	# and nothing else: no build directories left for the loop below,
	# no fuzzing
	set --
	FUZZ_CHECK_SECONDS=0
elif [ -z "${TESTS:-}" ]; then
	echo "# === static checks"
	for t in tests/static/*.sh; do
		run static env BUILD="$1" bash "$t"
	done
fi
for b in "$@"; do
	label=$(basename "$b")
	[ "$b" = build ] && label=plain
	echo "# === $b: unit tests"
	for t in "$b"/unit/test_*; do
		[ -x "$t" ] && run "$label" "$t"
	done
	echo "# === $b: integration tests"
	for t in tests/integration/*.sh; do
		selected "$(basename "$t" .sh)" || continue
		run "$label" env BUILD="$b" bash "$t"
	done
done

secs=${FUZZ_CHECK_SECONDS:-10}
if [ "$secs" -gt 0 ] && [ -z "${TESTS:-}" ]; then
	echo "# === fuzz harnesses, $secs s each"
	for f in build/fuzz/fuzz_*; do
		[ -x "$f" ] || continue
		name=$(basename "$f")
		# Inputs that once crashed a harness run first, every time.
		seeds=""
		[ -d "tests/fuzz/regressions/$name" ] && seeds="tests/fuzz/regressions/$name"
		[ "$name" = fuzz_conf ] && seeds="$seeds conf"
		mkdir -p "build/corpus/$name"
		if "$f" -max_total_time="$secs" -artifact_prefix=build/fuzz/ "build/corpus/$name" $seeds \
			>"build/fuzz/$name.log" 2>&1; then
			echo "ok - [fuzz] $name: $(grep -o 'Done [0-9]* runs' "build/fuzz/$name.log") without a crash, leak or hang"
			PASSED=$((PASSED + 1))
		else
			echo "not ok - [fuzz] $name: see build/fuzz/$name.log"
			grep -A20 'ERROR' "build/fuzz/$name.log" | head -30 | sed 's/^/#   /'
			echo "[fuzz] $name" >>build/failures.txt
			FAILED=$((FAILED + 1))
		fi
	done
fi

echo "# took $(($(date +%s) - start)) s"
if [ "$SKIPPED" -gt 0 ]; then
	echo "# skipped:"
	sed 's/^/#   /' build/skipped.txt
fi
if [ "$FAILED" -gt 0 ]; then
	echo "# failed:"
	sed 's/^/#   /' build/failures.txt
fi
echo "$PASSED passed, $FAILED failed$([ "$SKIPPED" -gt 0 ] && echo ", $SKIPPED skipped")"
[ "$FAILED" -eq 0 ]
