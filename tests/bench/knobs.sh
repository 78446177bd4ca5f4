#!/bin/bash
# tests/bench/knobs.sh BUILD OUT [quick] - the aggregation knobs family (make
# bench-knobs): the fine-grained all-to-all (8 nodes x 2 processes, 2x2x2
# grid, 16-byte items) over a grid of aggregation.buffer_bytes and
# aggregation.flush_us, at a small burst (K=64), a burst (K=1024) and the
# sustained run (K=16384), pinned, so that the defaults in conf/ferry.conf
# and conf.c come from data (README, Performance, "Aggregation defaults").
# Writes OUT/knobs.csv.  No cluster key: integrity off.
. "$(dirname "$0")/lib.sh" "$@"

KN=$OUT/knobs.csv
echo "buffer_bytes,flush_us,K,run,seconds,items,items_per_s,items_per_frame,layout" >"$KN"
BBS="4096 16384 65536"
FUS="50 200 1000"
KS="64 1024 16384"
R=3
[ -n "$QUICK" ] && { BBS="16384 65536"; FUS="200"; KS="1024"; R=1; }
log "aggregation knobs: buffer_bytes x flush_us, all-to-all 8 x 2, pinned"
LAYOUT=pinned
for bb in $BBS; do
	for fu in $FUS; do
		cluster "kn${bb}_$fu" 8 'topology: { virtual = [2, 2, 2]; };' \
			"aggregation: { buffer_bytes = $bb; flush_us = $fu; };"
		for run in $(seq "$R"); do
			for K in $KS; do
				read -r t n ipf _ <<<"$(ferry_a2a 2 "$K" 16)"
				awk -v bb="$bb" -v fu="$fu" -v K="$K" -v run="$run" -v t="$t" -v n="$n" -v ipf="$ipf" \
					-v lay="$LAYOUT" 'BEGIN { printf "%s,%s,%s,%s,%s,%s,%s,%s,%s\n", bb, fu, K, run, t, n,
						(t == "nan" || t <= 0) ? "nan" : n / t, ipf, lay }' >>"$KN"
			done
		done
	done
done
end_cluster
