#!/bin/bash
# tests/bench/rate.sh BUILD OUT [quick] - the message-rate family (make
# bench-rate): how fast one process hands 16-byte items to ferryd
# (ferry_send) and how fast the daemons deliver them, on one node and
# between two, with the daemons' CPU time per item (/proc/PID/schedstat),
# pinned and shared taking turns run by run (lib.sh); beside them what the
# machine does without ferry (a raw shared-memory ring, memcpy; shared); and
# the daemon's instructions per item per hop, counted by callgrind
# (hop_cost.sh: TCP on loopback, no cluster key, so frames carry no tag).
# Each also with FERRY_BATCH (ferry_send-batch-*, ferry-batch-*,
# hop_cost_batch.csv).  Writes OUT/rate.csv, OUT/hop_cost.csv and
# OUT/hop_cost_batch.csv.  No cluster key: integrity off.
# Two ranks on one node would use their direct ring (README, "Direct
# rings"), which ferryd never sees: the "same" runs keep measuring the way
# through ferryd (FERRY_DIRECT=0), and the "direct" runs measure the direct
# ring (ferry_send-direct-*, ferry-direct-same-node-*).
. "$(dirname "$0")/lib.sh" "$@"

RATE=$OUT/rate.csv
echo "variant,run,value,unit,layout" >"$RATE"
rrow() { echo "$1,$2,${3:-nan},$4,$LAYOUT" >>"$RATE"; }
log "message rate: 16-byte items from one process, pinned and shared"
cluster rate 2 'topology: { virtual = "direct"; };' 'limits: { ring_bytes = 67108864; };'
NI=2000000
[ -n "$QUICK" ] && NI=500000
# CPU time a daemon has used, in ns (/proc/PID/schedstat: ns resolution).
cpu_ns() { cut -d' ' -f1 "/proc/$(dpid "$1")/schedstat"; }
JOBN=0
for run in $(seq "$RUNS"); do
	for lay in pinned shared; do
		layout "$lay"
		for pair in "same:0:0:" "two:0:1:" "same:0:0:batch" "two:0:1:batch" "direct:0:0:" "direct:0:0:batch"; do
			IFS=: read -r v n0 n1 b <<<"$pair"
			JOBN=$((JOBN + 1))
			c0=$(cpu_ns rate_n0) c1=$(cpu_ns rate_n1)
			dir=0
			[ $v = direct ] && dir=1
			FERRY_DIRECT=$dir FERRY_JOB=r$JOBN FERRY_RANK=1 FERRY_SIZE=2 FERRY_RUNTIME_DIR=$TMP/rate_n$n1 \
				"${APP[@]}" "$B/fb_rate" --items $NI ${b:+--batch} >"$TMP/rate.recv" 2>&1 &
			peer=$!
			out=$(FERRY_DIRECT=$dir FERRY_JOB=r$JOBN FERRY_RANK=0 FERRY_SIZE=2 FERRY_RUNTIME_DIR=$TMP/rate_n$n0 \
				"${APP[@]}" "$B/fb_rate" --items $NI ${b:+--batch})
			wait $peer
			b=${b:+-batch}          # FERRY_BATCH: the variants' names say so
			if [ $v != two ]; then
				d=${v/same/}
				d=${d:+-direct}
				rrow "ferry_send$d$b-ns-per-item" "$run" "$(val send_ns_per_item <<<"$out")" ns
				rrow "ferry_send$d$b-cpu-ns-per-item" "$run" "$(val send_cpu_ns_per_item <<<"$out")" ns
				rrow "ferry_send$d$b-items-per-s" "$run" "$(val send_items_per_s <<<"$out")" items/s
			fi
			[ $v = direct ] && v=direct-same
			rrow "ferry$b-$v-node-delivered-items-per-s" "$run" "$(val recv_items_per_s <"$TMP/rate.recv")" items/s
			if [ $v = two ] && [ -z "$b" ]; then
				# Daemon CPU per item: the sender's daemon routes,
				# aggregates and writes; the receiver's reads, takes
				# frames apart and delivers.  A daemon at an
				# intermediate hop does both halves.
				s=$(( ($(cpu_ns rate_n0) - c0) / NI )) r=$(( ($(cpu_ns rate_n1) - c1) / NI ))
				rrow daemon-cpu-ns-per-item-send-side "$run" $s ns
				rrow daemon-cpu-ns-per-item-receive-side "$run" $r ns
				rrow daemon-cpu-ns-per-item-per-hop "$run" $((s + r)) ns
			fi
		done
	done
	layout shared
	rrow raw-shm-ring-records-per-s "$run" "$("$B/raw_ring" rate $((NI * 5)) | val records_per_s)" records/s
	mc=$("$B/raw_ring" memcpy)
	rrow memcpy-16k-gb-per-s "$run" "$(val gbytes_per_s_16k <<<"$mc")" GB/s
	rrow memcpy-1m-gb-per-s "$run" "$(val gbytes_per_s_1m <<<"$mc")" GB/s
done
end_cluster

# Instructions per item per hop: the same from run to run while the
# receiver keeps up; about twice as many at the destination when it does
# not and items wait in daemon memory (hop_cost.sh), hence several runs,
# quick too, and the fast path's median apart from all runs'.
log "daemon instructions per item per hop (callgrind)"
if [ -n "$QUICK" ]; then hc=(50000 250000 3); else hc=(50000 250000 5); fi
# hop_cost.csv: items sent one by one; hop_cost_batch.csv: with
# FERRY_BATCH (README, "Batches").
for hcb in "" _batch; do
	echo "role,fast_path_instructions_per_item,all_runs_instructions_per_item,runs" >"$OUT/hop_cost$hcb.csv"
	if BATCH=${hcb:+1} bash "$HERE/hop_cost.sh" "$BUILD" "${hc[@]}" >"$OUT/hop_cost$hcb.txt" 2>"$TMP/hop_cost.err"; then
		awk 'NR > 2 { r = $4; for (i = 5; i <= NF; i++) r = r " " $i; print $1 "," $2 "," $3 "," r }' \
			"$OUT/hop_cost$hcb.txt" >>"$OUT/hop_cost$hcb.csv"
	else
		log "hop_cost.sh${hcb:+ (batch)} failed: $(head -3 "$TMP/hop_cost.err")"
	fi
done
