#!/bin/bash
# tests/bench/run.sh BUILD OUT [quick] - ferry's benchmark suite (make bench).
#
# Runs on local clusters (one ferryd per simulated node, on loopback) and
# writes into OUT: one CSV per benchmark, PNG plots (gnuplot) and summary.md
# with the headline ratios (and, from security.sh, what frame integrity and
# encryption cost).  Every configuration runs RUNS times (5; 1 with
# quick) and the variants of one comparison take turns, so that a ratio
# compares runs made close together; the summary gives medians with min and
# max, and ratios are taken run by run, then summarised the same way.
set -u
BUILD=$(cd "$1" && pwd)
OUT=$2
QUICK=${3:-}
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
RUNS=5
[ -n "$QUICK" ] && RUNS=1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
MPIRUN="mpirun --oversubscribe --bind-to none --mca pml ob1 --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo"
MPI_TCP="--mca btl tcp,self"
MPI_SHM="--mca btl vader,self --mca btl_vader_single_copy_mechanism none"

# The test library's cluster helpers, cleanup included.
. "$ROOT/tests/integration/lib.sh"
B=$BUILD/bench

log() { echo "# $*" >&2; }
val() { sed -n "s/.*$1 \([0-9.e+-]*\).*/\1/p" | head -n 1; }

# --- ferry clusters ---------------------------------------------------------
CL=""
CLN=0
# cluster NAME N TOPOLOGY-LINE [AGGREGATION-LINE]: (re)starts a cluster.
cluster() {
	local name=$1 n=$2
	shift 2
	[ -n "$CL" ] && stop_cluster "$CL" "$CLN" >/dev/null
	start_cluster "$name" "$n" "$@" 'logging: { level = "warning"; };' ||
		{ log "cluster $name did not start"; exit 1; }
	CL=$name
	CLN=$n
}
cluster_stats() {       # items_sent frames_sent summed over the cluster's peers
	echo "$(peer_sum "$CL" "$CLN" items_sent) $(peer_sum "$CL" "$CLN" frames_sent)"
}

# ferry_a2a PPN K M: runs fb_a2a on the current cluster; prints
# "seconds items items_per_frame frames_per_item_hop".
JOBN=0
ferry_a2a() {
	local ppn=$1 K=$2 M=$3 P r pids="" worst=0 e s0 s1 rc=0
	P=$((CLN * ppn))
	JOBN=$RANDOM$RANDOM     # (called in $(...): a counter would not survive)
	s0=$(cluster_stats)
	for r in $(seq 0 $((P - 1))); do
		FERRY_JOB=b$JOBN FERRY_RANK=$r FERRY_SIZE=$P FERRY_RUNTIME_DIR=$TMP/${CL}_n$((r / ppn)) \
			"$B/fb_a2a" --items "$K" --len "$M" >"$TMP/a2a.$r" 2>&1 &
		pids="$pids $!"
	done
	for p in $pids; do wait "$p" || rc=1; done
	[ $rc = 0 ] || { log "fb_a2a failed: $(cat "$TMP"/a2a.* | grep -v elapsed | head -3)"; echo "nan 0 nan nan"; return; }
	for r in $(seq 0 $((P - 1))); do
		e=$(val elapsed_s <"$TMP/a2a.$r")
		worst=$(awk -v a="$worst" -v b="$e" 'BEGIN { print (b > a ? b : a) }')
	done
	s1=$(cluster_stats)
	awk -v t="$worst" -v n=$((P * (P - 1) * K)) -v s0="$s0" -v s1="$s1" 'BEGIN {
		split(s0, a, " "); split(s1, b, " ");
		it = b[1] - a[1]; fr = b[2] - a[2];
		printf "%s %d %s %s\n", t, n, (fr > 0 ? it / fr : "nan"), (it > 0 ? fr / it : "nan") }'
}

# mpi_a2a NP TRANSPORT MODE K M [R]: prints "seconds items".
mpi_a2a() {
	local np=$1 tr=$2 mode=$3 K=$4 M=$5 R=${6:-0} e
	# shellcheck disable=SC2086
	e=$($MPIRUN -np "$np" $tr "$B/mb_a2a" "$mode" --items "$K" --len "$M" --pack "$R" 2>"$TMP/mpi.err" | val elapsed_s)
	[ -n "$e" ] || { log "mpi $mode failed: $(head -3 "$TMP/mpi.err")"; e=nan; }
	echo "$e $((np * (np - 1) * K))"
}

# --- 1. streaming fine-grained all-to-all ---------------------------------
A2A=$OUT/alltoall.csv
echo "sweep,variant,nodes,ppn,procs,m,K,run,items,seconds,items_per_s,payload_bytes_per_s,items_per_frame,frames_per_item_hop" >"$A2A"
row() {         # row SWEEP VARIANT N PPN M K RUN "seconds items [ipf fpih]"
	set -- "$@"
	local res=$8
	awk -v sw="$1" -v v="$2" -v n="$3" -v ppn="$4" -v m="$5" -v k="$6" -v run="$7" -v r="$res" 'BEGIN {
		split(r, a, " "); t = a[1]; it = a[2];
		ips = (t == "nan" || t <= 0) ? "nan" : it / t;
		bps = (ips == "nan") ? "nan" : ips * m;
		printf "%s,%s,%d,%d,%d,%d,%d,%d,%d,%s,%s,%s,%s,%s\n", sw, v, n, ppn, n * ppn, m, k, run, it, t, ips, bps,
			(a[3] == "" ? "" : a[3]), (a[4] == "" ? "" : a[4]) }' >>"$A2A"
}

if [ -n "$QUICK" ]; then KS="16 256"; MS="16"; else KS="1 16 64 256 1024"; MS="8 16 32 64 256"; fi

# Sweep K (the TRAM plot): 8 nodes x 2 processes, 16-byte items.
log "all-to-all: sweep of K over 8 nodes x 2 processes, 16-byte items"
for grid in "d8:\"direct\"" "g42:[4, 2]" "g222:[2, 2, 2]" "noagg:[2, 2, 2]"; do
	name=${grid%%:*}
	agg=""
	[ "$name" = noagg ] && agg='aggregation: { buffer_bytes = 0; };'
	cluster "$name" 8 "topology: { virtual = ${grid#*:}; };" "$agg"
	for run in $(seq "$RUNS"); do
		for K in $KS; do
			row K "ferry-$name" 8 2 16 "$K" "$run" "$(ferry_a2a 2 "$K" 16)"
		done
	done
done
for run in $(seq "$RUNS"); do
	for K in $KS; do
		row K mpi-isend 8 2 16 "$K" "$run" "$(mpi_a2a 16 "$MPI_TCP" isend "$K" 16)"
		[ -z "$QUICK" ] && row K mpi-alltoallv-64 8 2 16 "$K" "$run" "$(mpi_a2a 16 "$MPI_TCP" alltoallv "$K" 16 64)"
		row K mpi-alltoallv-1024 8 2 16 "$K" "$run" "$(mpi_a2a 16 "$MPI_TCP" alltoallv "$K" 16 1024)"
		[ -z "$QUICK" ] && row K mpi-shm-alltoallv-1024 8 2 16 "$K" "$run" "$(mpi_a2a 16 "$MPI_SHM" alltoallv "$K" 16 1024)"
	done
done

# Sweep m: 8 nodes x 2 processes, K = 256.
if [ -z "$QUICK" ]; then
	log "all-to-all: sweep of the item size, K = 256"
	cluster g222 8 "topology: { virtual = [2, 2, 2]; };"
	for run in $(seq "$RUNS"); do
		for M in $MS; do
			row m ferry-g222 8 2 "$M" 256 "$run" "$(ferry_a2a 2 256 "$M")"
			row m mpi-isend 8 2 "$M" 256 "$run" "$(mpi_a2a 16 "$MPI_TCP" isend 256 "$M")"
			row m mpi-alltoallv-1024 8 2 "$M" 256 "$run" "$(mpi_a2a 16 "$MPI_TCP" alltoallv 256 "$M" 1024)"
		done
	done
	# 4 nodes, 1 and 2 processes per node.
	log "all-to-all: 4 nodes"
	for grid in "d4:\"direct\"" "g22:[2, 2]"; do
		cluster "${grid%%:*}" 4 "topology: { virtual = ${grid#*:}; };"
		for run in $(seq "$RUNS"); do
			for ppn in 1 2; do
				row N4 "ferry-${grid%%:*}" 4 "$ppn" 16 256 "$run" "$(ferry_a2a "$ppn" 256 16)"
			done
		done
	done
	for run in $(seq "$RUNS"); do
		for ppn in 1 2; do
			row N4 mpi-isend 4 "$ppn" 16 256 "$run" "$(mpi_a2a $((4 * ppn)) "$MPI_TCP" isend 256 16)"
			row N4 mpi-alltoallv-1024 4 "$ppn" 16 256 "$run" "$(mpi_a2a $((4 * ppn)) "$MPI_TCP" alltoallv 256 16 1024)"
		done
	done
fi

# --- 2. latency -------------------------------------------------------------
LAT=$OUT/latency.csv
echo "variant,run,oneway_us" >"$LAT"
log "latency: 8-byte ping-pong"
cluster lat 2 'topology: { virtual = "direct"; };' 'daemon: { spin_us = 1000; };'
N=20000
[ -n "$QUICK" ] && N=5000
for run in $(seq "$RUNS"); do
	JOBN=$((JOBN + 1))
	for pair in "same:0:0" "two:0:1"; do
		IFS=: read -r v n0 n1 <<<"$pair"
		FERRY_SPIN_US=1000000 FERRY_JOB=l$JOBN$v FERRY_RANK=1 FERRY_SIZE=2 FERRY_RUNTIME_DIR=$TMP/lat_n$n1 \
			"$B/fb_pingpong" $N >/dev/null 2>&1 &
		peer=$!
		l=$(FERRY_SPIN_US=1000000 FERRY_JOB=l$JOBN$v FERRY_RANK=0 FERRY_SIZE=2 FERRY_RUNTIME_DIR=$TMP/lat_n$n0 \
			"$B/fb_pingpong" $N | val oneway_us)
		wait $peer     # (a bare wait would wait for the daemons too)
		echo "ferry-$v-node,$run,${l:-nan}" >>"$LAT"
	done
	echo "raw-shm-ring,$run,$("$B/raw_ring" pingpong $((N * 10)) | val oneway_us)" >>"$LAT"
	echo "raw-tcp-loopback,$run,$("$B/raw_tcp" pingpong $N | val oneway_us)" >>"$LAT"
	# shellcheck disable=SC2086
	echo "mpi-tcp,$run,$($MPIRUN -np 2 $MPI_TCP "$B/mb_pingpong" $N 2>/dev/null | val oneway_us)" >>"$LAT"
	# shellcheck disable=SC2086
	echo "mpi-shm,$run,$($MPIRUN -np 2 $MPI_SHM "$B/mb_pingpong" $N 2>/dev/null | val oneway_us)" >>"$LAT"
done

# --- 3. message rate and enqueue cost ----------------------------------------
RATE=$OUT/rate.csv
echo "variant,run,value,unit" >"$RATE"
log "message rate: 16-byte items from one process"
cluster rate 2 'topology: { virtual = "direct"; };' 'limits: { ring_bytes = 67108864; };'
NI=2000000
[ -n "$QUICK" ] && NI=500000
# CPU time a daemon has used, in ns (/proc/PID/schedstat: ns resolution).
cpu_ns() { cut -d' ' -f1 "/proc/$(dpid "$1")/schedstat"; }
for run in $(seq "$RUNS"); do
	for pair in "same:0:0" "two:0:1"; do
		IFS=: read -r v n0 n1 <<<"$pair"
		JOBN=$((JOBN + 1))
		c0=$(cpu_ns rate_n0) c1=$(cpu_ns rate_n1)
		FERRY_JOB=r$JOBN FERRY_RANK=1 FERRY_SIZE=2 FERRY_RUNTIME_DIR=$TMP/rate_n$n1 \
			"$B/fb_rate" --items $NI >"$TMP/rate.recv" 2>&1 &
		peer=$!
		out=$(FERRY_JOB=r$JOBN FERRY_RANK=0 FERRY_SIZE=2 FERRY_RUNTIME_DIR=$TMP/rate_n$n0 "$B/fb_rate" --items $NI)
		wait $peer
		[ $v = same ] && echo "ferry_send-ns-per-item,$run,$(val send_ns_per_item <<<"$out"),ns" >>"$RATE"
		[ $v = same ] && echo "ferry_send-items-per-s,$run,$(val send_items_per_s <<<"$out"),items/s" >>"$RATE"
		echo "ferry-$v-node-delivered-items-per-s,$run,$(val recv_items_per_s <"$TMP/rate.recv"),items/s" >>"$RATE"
		if [ $v = two ]; then
			# Daemon CPU per item: the sender's daemon routes, aggregates and
			# writes; the receiver's reads, takes frames apart and delivers.
			# A daemon at an intermediate hop does both halves.
			s=$(( ($(cpu_ns rate_n0) - c0) / NI )) r=$(( ($(cpu_ns rate_n1) - c1) / NI ))
			echo "daemon-cpu-ns-per-item-send-side,$run,$s,ns" >>"$RATE"
			echo "daemon-cpu-ns-per-item-receive-side,$run,$r,ns" >>"$RATE"
			echo "daemon-cpu-ns-per-item-per-hop,$run,$((s + r)),ns" >>"$RATE"
		fi
	done
	echo "raw-shm-ring-records-per-s,$run,$("$B/raw_ring" rate $((NI * 5)) | val records_per_s),records/s" >>"$RATE"
	mc=$("$B/raw_ring" memcpy)
	echo "memcpy-16k-gb-per-s,$run,$(val gbytes_per_s_16k <<<"$mc"),GB/s" >>"$RATE"
	echo "memcpy-1m-gb-per-s,$run,$(val gbytes_per_s_1m <<<"$mc"),GB/s" >>"$RATE"
done

# --- 4. bandwidth -------------------------------------------------------------
BW=$OUT/bandwidth.csv
echo "variant,item_bytes,run,gbytes_per_s" >"$BW"
log "bandwidth: large items between two nodes"
cluster bw 2 'topology: { virtual = "direct"; };'
MB=512
[ -n "$QUICK" ] && MB=128
for run in $(seq "$RUNS"); do
	for S in 65536 262144 1048576 4194304; do
		JOBN=$((JOBN + 1))
		FERRY_JOB=w$JOBN FERRY_RANK=0 FERRY_SIZE=2 FERRY_RUNTIME_DIR=$TMP/bw_n0 "$B/fb_bw" $S $MB >/dev/null 2>&1 &
		peer=$!
		g=$(FERRY_JOB=w$JOBN FERRY_RANK=1 FERRY_SIZE=2 FERRY_RUNTIME_DIR=$TMP/bw_n1 "$B/fb_bw" $S $MB | val gbytes_per_s)
		wait $peer
		echo "ferry-two-nodes,$S,$run,${g:-nan}" >>"$BW"
	done
	echo "raw-tcp-loopback,1048576,$run,$("$B/raw_tcp" stream $((MB * 2)) | val gbytes_per_s)" >>"$BW"
done
stop_cluster "$CL" "$CLN" >/dev/null
CL=""

# --- 5. frame integrity and encryption ---------------------------------------
"$HERE/security.sh" "$BUILD" "$OUT" $QUICK || log "the security benchmarks failed"

log "writing plots and summary"
"$HERE/report.sh" "$OUT"
