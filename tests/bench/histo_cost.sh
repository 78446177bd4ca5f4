#!/bin/bash
# tests/bench/histo_cost.sh BUILD [N1 N2] - instructions per item of bale's
# histogram (tests/apps/ferry_histo: 8-byte items, FERRY_BATCH) counted by
# callgrind, and the bytes per item on the wire.  Instruction counts do
# not depend on how busy the machine is, unlike timings.
#
# A local cluster of 4 daemons (loopback TCP, a 2x2 virtual grid, no
# cluster key), one rank on each.  Each role runs the app twice, with N1
# and then N2 updates per rank, and prints (I(N2) - I(N1)) / (N2 - N1):
# start-up, handshakes and shutdown cancel out.
#
#   ferryd   node 0's daemon under callgrind: per update its rank sends
#            (it also forwards and delivers as many, on average)
#   client   rank 0 under callgrind (ferry_send, the batches, ferry_recv
#            and the app's own loop): per update it sends (and receives)
#
# wire: bytes_sent / items_sent summed over every peer line of every
# daemon (frame headers, item headers, payloads) in the N2 run of the
# client role.  The daemon under valgrind publishes to its clients with a
# fence (valgrind has no membarrier); --seccomp off, valgrind does not
# know seccomp().
set -u
BUILD=${1:?usage: histo_cost.sh BUILD [N1 N2]}
N1=${2:-100000}
N2=${3:-400000}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
export BUILD
. "$ROOT/tests/integration/lib.sh"

command -v valgrind >/dev/null || { echo "histo_cost: valgrind is not installed" >&2; exit 1; }
[ -x "$BUILD/apps/ferry_histo" ] || { echo "histo_cost: make $BUILD/apps/ferry_histo first" >&2; exit 1; }

. "$ROOT/tests/bench/start_node.sh"

# run ROLE N: one run; prints the callgrind total and the wire's bytes and
# items.
RUNNO=0
run() {
	local role=$1 n=$2 name k r pids="" total bytes items
	RUNNO=$((RUNNO + 1))
	name=hc$RUNNO
	cluster_conf "$name" 4 'topology: { virtual = [2, 2]; };' 'logging: { level = "warning"; };' || return 1
	for k in 0 1 2 3; do
		start_node "${name}_n$k" "$TMP/$name.conf" "$k" "$([ "$role" = ferryd ] && [ "$k" = 0 ] && echo 1 || echo 0)" ||
			return 1
	done
	cluster_up "$name" 4 || return 1
	for r in 0 1 2 3; do
		if [ "$role" = client ] && [ "$r" = 0 ]; then
			FERRY_JOB=h FERRY_RANK=$r FERRY_SIZE=4 FERRY_RUNTIME_DIR=$TMP/${name}_n$r \
				valgrind --tool=callgrind --callgrind-out-file="$TMP/$name.client.cg" \
				"$BUILD/apps/ferry_histo" --n "$n" >"$TMP/$name.r$r" 2>&1 &
		else
			FERRY_JOB=h FERRY_RANK=$r FERRY_SIZE=4 FERRY_RUNTIME_DIR=$TMP/${name}_n$r \
				"$BUILD/apps/ferry_histo" --n "$n" >"$TMP/$name.r$r" 2>&1 &
		fi
		pids="$pids $!"
	done
	for r in $pids; do wait "$r" || { echo "histo_cost: a rank failed" >&2; cat "$TMP/$name".r* >&2; return 1; }; done
	grep -q 'verified=yes' "$TMP/$name.r0" || { echo "histo_cost: not verified" >&2; return 1; }
	bytes=$(peer_sum "$name" 4 bytes_sent)
	items=$(peer_sum "$name" 4 items_sent)
	for k in 0 1 2 3; do
		kill -TERM "$(dpid "${name}_n$k")" 2>/dev/null
		wait "$(dpid "${name}_n$k")" 2>/dev/null
	done
	if [ "$role" = ferryd ]; then
		total=$(sed -n 's/^totals: *\([0-9]*\).*/\1/p' "$TMP/${name}_n0.cg")
	else
		total=$(sed -n 's/^totals: *\([0-9]*\).*/\1/p' "$TMP/$name.client.cg")
	fi
	[ -n "$total" ] || { echo "histo_cost: no callgrind totals" >&2; return 1; }
	echo "$total $bytes $items"
}

echo "# instructions per 8-byte update (callgrind), ferry_histo, 4 nodes x 1 rank, N = $N1 and $N2 per rank"
for role in ferryd client; do
	read -r a _ _ <<<"$(run "$role" "$N1")" || exit 1
	read -r b bytes items <<<"$(run "$role" "$N2")" || exit 1
	[ -n "$a" ] && [ -n "$b" ] || exit 1
	awk -v r="$role" -v a="$a" -v b="$b" -v n1="$N1" -v n2="$N2" \
		'BEGIN { printf "%-8s %8.1f instructions per update\n", r, (b - a) / (n2 - n1) }'
done
awk -v b="$bytes" -v i="$items" 'BEGIN { printf "wire     %8.2f bytes per item (%d bytes, %d items, N2 run)\n", b / i, b, i }'
finish
