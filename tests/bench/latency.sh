#!/bin/bash
# tests/bench/latency.sh BUILD OUT [quick] - the latency family (make
# bench-latency): 8-byte ping-pong through ferry (both ranks on one node, or
# on two nodes) against the same ping-pong through a raw shared-memory ring,
# raw TCP on loopback and Open MPI (TCP and shared memory), pinned and shared
# taking turns run by run (lib.sh).  Writes OUT/latency.csv.  No cluster
# key: integrity off.
. "$(dirname "$0")/lib.sh" "$@"

LAT=$OUT/latency.csv
echo "variant,run,oneway_us,layout" >"$LAT"
lrow() { echo "$1,$2,${3:-nan},$LAYOUT" >>"$LAT"; }
log "latency: 8-byte ping-pong, pinned and shared"
# Daemons and clients spin (yielding) before they sleep: a ping-pong
# measures the path, not the wake-up.
cluster lat 2 'topology: { virtual = "direct"; };' 'daemon: { spin_us = 1000; };'
N=20000
[ -n "$QUICK" ] && N=5000
JOBN=0
for run in $(seq "$RUNS"); do
	for lay in pinned shared; do
		layout "$lay"
		for pair in "same:0:0" "two:0:1"; do
			IFS=: read -r v n0 n1 <<<"$pair"
			JOBN=$((JOBN + 1))
			FERRY_SPIN_US=1000000 FERRY_JOB=l$JOBN FERRY_RANK=1 FERRY_SIZE=2 FERRY_RUNTIME_DIR=$TMP/lat_n$n1 \
				"${APP[@]}" "$B/fb_pingpong" $N >/dev/null 2>&1 &
			peer=$!
			l=$(FERRY_SPIN_US=1000000 FERRY_JOB=l$JOBN FERRY_RANK=0 FERRY_SIZE=2 FERRY_RUNTIME_DIR=$TMP/lat_n$n0 \
				"${APP[@]}" "$B/fb_pingpong" $N | val oneway_us)
			wait $peer     # (a bare wait would wait for the daemons too)
			lrow "ferry-$v-node" "$run" "$l"
		done
		lrow raw-shm-ring "$run" "$("${APP[@]}" "$B/raw_ring" pingpong $((N * 10)) | val oneway_us)"
		lrow raw-tcp-loopback "$run" "$("${APP[@]}" "$B/raw_tcp" pingpong $N | val oneway_us)"
		lrow mpi-tcp "$run" "$(mpi mb_pingpong 2 "$MPI_TCP" $N | val oneway_us)"
		lrow mpi-shm "$run" "$(mpi mb_pingpong 2 "$MPI_SHM" $N | val oneway_us)"
	done
done
end_cluster
