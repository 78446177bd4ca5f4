#!/bin/bash
# tests/demo.sh BUILD_DIR - what `make demo` runs: a local cluster of 8 ferryd
# daemons on loopback (virtual grid 2x2x2), 2 processes per node, a
# fine-grained all-to-all (small items, every process to every other, in
# random order), checked item by item; then throughput and aggregation
# figures from ferryctl stats, and everything stopped (also on Ctrl-C or
# failure).
set -u
BUILD=$(cd "${1:-build}" && pwd)
N=8
PPN=2
K=${DEMO_ITEMS:-20000}
DIR=$(mktemp -d /tmp/ferry-demo.XXXXXX)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
	wait 2>/dev/null
	rm -rf "$DIR"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Ports below the kernel's ephemeral range (no outgoing connection holds one),
# unused in every TCP state.
lo=$(cut -f1 /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo 32768)
for _ in $(seq 50); do
	base=$((10000 + (RANDOM % ((lo - 10100) / 100)) * 100))
	ss -Htan "( sport >= :$base and sport < :$((base + N)) )" | grep -q . || break
done
{
	echo 'cluster: { name = "demo"; nodes = ('
	for k in $(seq 0 $((N - 1))); do
		echo "  { host = \"127.0.0.1\"; port = $((base + k)); }$([ "$k" -lt $((N - 1)) ] && echo ,)"
	done
	echo '); };'
	echo 'topology: { virtual = [ 2, 2, 2 ]; };'
	echo 'logging: { level = "notice"; };'
} >"$DIR/demo.conf"

echo "== ferry demo: $N ferryd daemons on 127.0.0.1:$base-$((base + N - 1)), virtual grid 2x2x2"
"$BUILD/ferryd" --check-config "$DIR/demo.conf" | grep -E '^(node 0 |links per node)' | sed 's/^/   /'
for k in $(seq 0 $((N - 1))); do
	mkdir -p "$DIR/n$k"
	"$BUILD/ferryd" --config "$DIR/demo.conf" --node "$k" --runtime-dir "$DIR/n$k" --state-dir "$DIR/n$k" 2>"$DIR/n$k.log" &
	pids+=("$!")
done
up=0
for _ in $(seq 200); do
	up=0
	for k in $(seq 0 $((N - 1))); do
		up=$((up + $("$BUILD/ferryctl" --runtime-dir "$DIR/n$k" status 2>/dev/null | grep -c ': up ')))
	done
	[ $up = $((N * 3)) ] && break
	sleep 0.05
done
echo "== links up: $up (each node talks to 3 peers, not 7; an item needs up to 3 hops)"

P=$((N * PPN))
echo "== $P processes ($PPN per node): each sends $K items of 16-64 bytes to each of the $P (itself too),"
echo "   destinations in random order, ending with ferry_done / ferry_step_wait"
t0=$(date +%s.%N)
jobpids=()
for r in $(seq 0 $((P - 1))); do
	FERRY_RUNTIME_DIR=$DIR/n$((r / PPN)) "$BUILD/tests/ft_alltoall" --job demo --rank "$r" --size "$P" \
		--items "$K" --len 16 --len-max 64 --sync >"$DIR/rank$r.out" &
	jobpids+=("$!")
done
rc=0
for p in "${jobpids[@]}"; do wait "$p" || rc=1; done
t1=$(date +%s.%N)
total=$((P * P * K))
if [ $rc = 0 ]; then
	echo "== every process checked every item it received: each arrived exactly once, intact, in order"
fi
# The exchange: from ferry_open's return (all ranks joined) to the end of the
# step, the slowest rank's; then the whole run, process start-up included.
worst=$(sed -n 's/.* items in \([0-9.]*\) s .*/\1/p' "$DIR"/rank*.out | sort -g | tail -n 1)
awk -v n="$total" -v a="$t0" -v b="$t1" -v w="${worst:-0}" 'BEGIN {
	if (w > 0)
		printf "== the exchange took %.3f s (slowest rank): %.1f million items/s across the cluster\n", w, n / w / 1e6
	printf "   the whole run %.2f s with starting 16 processes and joining the job: %.1f million items/s\n", b - a, n / (b - a) / 1e6 }'
for k in $(seq 0 $((N - 1))); do "$BUILD/ferryctl" --runtime-dir "$DIR/n$k" stats; done | awk '
	$1 == "peer" { for (i = 3; i < NF; i += 2) s[$i] += $(i + 1) }
	END {
		printf "== aggregation (ferryctl stats, all daemons): %d frames carried %d items, %.1f items per frame\n",
			s["frames_sent"], s["items_sent"], s["frames_sent"] ? s["items_sent"] / s["frames_sent"] : 0
		printf "   frames left because full %d, flush timer %d, explicit flush or end of step %d\n",
			s["flush_full"], s["flush_timer"], s["flush_explicit"]
		printf "   items re-aggregated at intermediate nodes: %d\n", s["items_forwarded"]
	}'
for p in "${pids[@]}"; do kill -TERM "$p"; wait "$p" || rc=1; done
pids=()
echo "== all daemons stopped"
if [ $rc = 0 ]; then echo "demo OK"; else echo "demo FAILED"; tail -n 5 "$DIR"/*.log; fi
exit $rc
