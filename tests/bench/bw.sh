#!/bin/bash
# tests/bench/bw.sh BUILD OUT [quick] - the bandwidth family (make bench-bw):
# large items between two nodes through ferry against a raw TCP stream on
# loopback, pinned and shared taking turns run by run (lib.sh).  Writes
# OUT/bandwidth.csv.  No cluster key: integrity off.  raw-tcp-loopback runs
# the congestion control of ferry's links, raw-tcp-system-cc the system's.
. "$(dirname "$0")/lib.sh" "$@"

BW=$OUT/bandwidth.csv
echo "variant,item_bytes,run,gbytes_per_s,layout" >"$BW"
log "bandwidth: large items between two nodes, pinned and shared"
MB=512
[ -n "$QUICK" ] && MB=128
JOBN=0
for run in $(seq "$RUNS"); do
	for lay in pinned shared; do
		# A fresh cluster per layout, pinned from its start as a
		# deployment pins it (daemon.cpus): daemons moved from both
		# cores to one while their TCP link lived on ran large items
		# at half the speed (1.5 GB/s against 3 on the same layout),
		# often for several runs; a fresh link does not (2026-11-26).
		LAYOUT=$lay
		cluster bw 2 'topology: { virtual = "direct"; };'
		for S in 65536 262144 1048576 4194304; do
			JOBN=$((JOBN + 1))
			FERRY_JOB=w$JOBN FERRY_RANK=0 FERRY_SIZE=2 FERRY_RUNTIME_DIR=$TMP/bw_n0 \
				"${APP[@]}" "$B/fb_bw" $S $MB >/dev/null 2>&1 &
			peer=$!
			g=$(FERRY_JOB=w$JOBN FERRY_RANK=1 FERRY_SIZE=2 FERRY_RUNTIME_DIR=$TMP/bw_n1 \
				"${APP[@]}" "$B/fb_bw" $S $MB | val gbytes_per_s)
			wait $peer
			echo "ferry-two-nodes,$S,$run,${g:-nan},$LAYOUT" >>"$BW"
		done
		# The comparator runs the links' congestion control (lib.sh); the
		# system's default beside it, for information.
		echo "raw-tcp-loopback,1048576,$run,$("${APP[@]}" "$B/raw_tcp" stream $((MB * 2)) | val gbytes_per_s),$LAYOUT" >>"$BW"
		echo "raw-tcp-system-cc,1048576,$run,$(RAW_TCP_CC="" "${APP[@]}" "$B/raw_tcp" stream $((MB * 2)) | val gbytes_per_s),$LAYOUT" >>"$BW"
	done
done
end_cluster
