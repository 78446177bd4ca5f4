#!/bin/bash
# tests/bench/hop_cost.sh BUILD [N1 N2 [REPEAT]] - daemon instructions per item
# per hop (with BATCH=1 in the environment: the sender opens with
# FERRY_BATCH), counted by callgrind (instruction counts do not depend on how busy
# the machine is, unlike timings).
#
# One daemon runs under `valgrind --tool=callgrind`; ft_stream sends N1, then
# N2 items of 16 bytes from rank 0 to rank 1; the daemon's total instruction
# count for the two runs, differenced and divided by N2 - N1, is the cost of
# one item in that role (start-up, handshakes and shutdown cancel out):
#
#   local        one node, both ranks on it: TX ring -> RX ring (through
#                ferryd: FERRY_DIRECT=0, or the ranks would use their
#                direct ring and ferryd would count nothing)
#   source       node 0 of a 1x3 mesh, items to node 2: TX ring -> frame
#   forward      node 1, in the middle: frame -> re-aggregated frame
#   destination  node 2: frame -> RX ring
#
# source + destination is one network hop of an item sent from one node to
# its neighbour; forward is one intermediate hop.  Each figure is the median
# of REPEAT (default 3) differences.  Conditions: TCP links on loopback,
# no cluster key (frames carry no tag), the daemon under valgrind (so its
# clients publish with a fence: valgrind does not implement membarrier).
#
# The counts are the same from run to run while the destination delivers
# straight into the receiver's RX ring.  In some runs (on an idle machine
# too, and with the receiver spinning) that ring fills once and from then on
# every item is parked in the daemon's memory and moved later
# (ep_deliver_slow, recq, ep_flush_pending): about twice the instructions
# per item, items_queued = N - 32768 exactly.  Without valgrind no item
# waits in the same stream, so it is how the daemon runs under valgrind, not
# the path a real stream takes.  Every run says whether items waited (the
# daemon's items_queued); each role prints the median of the runs where none
# did (the fast path), "fast" or "slow" for each run, and the median of all.
set -u
BUILD=${1:?usage: hop_cost.sh BUILD [N1 N2 [REPEAT]]}
N1=${2:-50000}
N2=${3:-250000}
REPEAT=${4:-3}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
export BUILD
. "$ROOT/tests/integration/lib.sh"

command -v valgrind >/dev/null || { echo "hop_cost: valgrind is not installed" >&2; exit 1; }

. "$ROOT/tests/bench/start_node.sh"

# instructions ROLE N: runs N items with the daemon of ROLE under callgrind,
# prints its total instruction count.
RUNNO=0
instructions() {
	local role=$1 n=$2 nodes vgnode src dst k name conf total queued
	RUNNO=$((RUNNO + 1))
	case $role in
	local) nodes=1; vgnode=0; src=0; dst=0 ;;
	source) nodes=3; vgnode=0; src=0; dst=2 ;;
	forward) nodes=3; vgnode=1; src=0; dst=2 ;;
	destination) nodes=3; vgnode=2; src=0; dst=2 ;;
	esac
	name=h$RUNNO
	cluster_conf "$name" "$nodes" 'topology: { physical = "mesh"; dims = [ '"$nodes"' ]; };' \
		'logging: { level = "warning"; };' || return 1
	conf=$TMP/$name.conf
	for k in $(seq 0 $((nodes - 1))); do
		start_node "${name}_n$k" "$conf" "$k" "$([ "$k" = "$vgnode" ] && echo 1 || echo 0)" || return 1
	done
	cluster_up "$name" "$nodes" || return 1
	FERRY_DIRECT=0 FERRY_RUNTIME_DIR=$TMP/${name}_n$dst "$BUILD/tests/ft_stream" --job s --rank 1 --items "$n" --len 16 \
		>"$TMP/$name.r1" 2>&1 &
	local r1=$!
	FERRY_DIRECT=0 FERRY_RUNTIME_DIR=$TMP/${name}_n$src "$BUILD/tests/ft_stream" --job s --rank 0 --items "$n" --len 16 \
		--blocking ${BATCH:+--batch} >"$TMP/$name.r0" 2>&1 || { echo "hop_cost: sender failed" >&2; cat "$TMP/$name.r0" >&2; return 1; }
	wait "$r1" || { echo "hop_cost: receiver failed" >&2; cat "$TMP/$name.r1" >&2; return 1; }
	queued=$(stat "${name}_n$vgnode" items_queued)
	for k in $(seq 0 $((nodes - 1))); do
		kill -TERM "$(dpid "${name}_n$k")" 2>/dev/null
		wait "$(dpid "${name}_n$k")" 2>/dev/null
	done
	total=$(sed -n 's/^totals: *\([0-9]*\).*/\1/p' "$TMP/${name}_n$vgnode.cg")
	[ -n "$total" ] || { echo "hop_cost: no callgrind totals" >&2; return 1; }
	echo "$total ${queued:-0}"
}

median() { sort -n | awk '{ v[NR] = $1 } END { print NR ? v[int((NR + 1) / 2)] : "nan" }'; }

echo "# daemon instructions per item (callgrind), 16-byte items, N = $N1 and $N2, median of $REPEAT"
printf '%-12s %10s %10s  %s\n' role fast_path all_runs "runs (instr/item:fast|slow)"
for role in local source forward destination; do
	per=() fast=() runs=()
	for _ in $(seq "$REPEAT"); do
		read -r a qa <<<"$(instructions "$role" "$N1")" || exit 1
		read -r b qb <<<"$(instructions "$role" "$N2")" || exit 1
		[ -n "$a" ] && [ -n "$b" ] || exit 1
		x=$(awk -v a="$a" -v b="$b" -v n1="$N1" -v n2="$N2" 'BEGIN { printf "%.1f", (b - a) / (n2 - n1) }')
		per+=("$x")
		if [ "$qa" = 0 ] && [ "$qb" = 0 ]; then fast+=("$x"); runs+=("$x:fast"); else runs+=("$x:slow"); fi
	done
	printf '%-12s %10s %10s  %s\n' "$role" "$( [ ${#fast[@]} -gt 0 ] && printf '%s\n' "${fast[@]}" | median || echo nan)" \
		"$(printf '%s\n' "${per[@]}" | median)" "${runs[*]}"
done
