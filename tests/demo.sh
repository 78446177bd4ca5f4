#!/bin/bash
# tests/demo.sh BUILD_DIR - what `make demo` runs: a throwaway ferryd, several
# processes exchanging small items all-to-all through it, what happened, and
# everything stopped again (also on Ctrl-C or failure).
set -u
BUILD=$(cd "${1:-build}" && pwd)
P=${DEMO_PROCS:-4}
K=${DEMO_ITEMS:-50000}
DIR=$(mktemp -d /tmp/ferry-demo.XXXXXX)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
	wait 2>/dev/null
	rm -rf "$DIR"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

echo "== starting ferryd (runtime directory $DIR)"
"$BUILD/ferryd" --runtime-dir "$DIR" --log-level notice 2>"$DIR/ferryd.log" &
dpid=$!
pids+=("$dpid")
for _ in $(seq 100); do "$BUILD/ferryctl" --runtime-dir "$DIR" status >/dev/null 2>&1 && break; sleep 0.05; done

echo "== $P processes, each sending $K items of 16..64 bytes to every other one, in random order"
export FERRY_RUNTIME_DIR=$DIR
t0=$(date +%s.%N)
for r in $(seq 0 $((P - 1))); do
	"$BUILD/tests/ft_alltoall" --job demo --rank "$r" --size "$P" --items "$K" --len 16 --len-max 64 &
	pids+=("$!")
done
rc=0
for p in "${pids[@]:1}"; do wait "$p" || rc=1; done
t1=$(date +%s.%N)
total=$((P * (P - 1) * K))
echo "== every process checked that each item arrived exactly once, intact and in order"
awk -v n="$total" -v a="$t0" -v b="$t1" \
	'BEGIN { printf "== %d items in %.2f s: %.2f million items/s through one daemon\n", n, b - a, n / (b - a) / 1e6 }'
echo "== ferryctl stats (excerpt)"
"$BUILD/ferryctl" --runtime-dir "$DIR" stats | grep -E '^(items_in|items_delivered|items_queued|items_dropped|stalls|loop_wakeups) '
kill -TERM "$dpid"
wait "$dpid" || rc=1
pids=()
echo "== ferryd stopped"
[ $rc -eq 0 ] && echo "demo OK" || { echo "demo FAILED"; cat "$DIR/ferryd.log"; }
exit $rc
