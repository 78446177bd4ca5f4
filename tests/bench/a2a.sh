#!/bin/bash
# tests/bench/a2a.sh BUILD OUT [quick] - the all-to-all family (make
# bench-a2a): fine-grained all-to-all and a RandomAccess-style update stream,
# ferry against Open MPI, in both core layouts (lib.sh).  Writes
# OUT/alltoall.csv and OUT/gups.csv.
#
#   sweep K  8 nodes x 2 processes, 16-byte items, K items per destination:
#            bursts (K <= 1024) and the sustained run (K = 16384: 3.9 M
#            items), over 1-D (direct), 4x2 and 2x2x2 virtual grids and with
#            aggregation off (bursts only), against per-item MPI_Isend and
#            hand-packed MPI_Alltoallv (64 or 1024 items per destination per
#            round) over TCP, and the latter over Open MPI's shared memory;
#            pinned and shared, taking turns run by run.  On the direct
#            and the 2x2x2 grid also with FERRY_BATCH (ferry-batch-*).
#   sweep m  the item size, K = 256 (shared; not in quick).
#   sweep N4 4 nodes, 1 and 2 processes per node, K = 256 (shared; not in
#            quick).
#   gups     fb_gups, 4 nodes x 2 processes, 2^20 words per rank, 4 x the
#            table in updates, against mb_gups (MPI_Alltoallv of buckets of
#            about 1024 per destination) over TCP; pinned and shared; ferry
#            with and without FERRY_BATCH.
# No cluster key: frames carry no tag (integrity off; security.sh says what
# it costs).
. "$(dirname "$0")/lib.sh" "$@"

A2A=$OUT/alltoall.csv
echo "sweep,variant,nodes,ppn,procs,m,K,run,items,seconds,items_per_s,payload_bytes_per_s,items_per_frame,frames_per_item_hop,layout" >"$A2A"
row() {         # row SWEEP VARIANT N PPN M K RUN "seconds items [ipf fpih]"
	awk -v sw="$1" -v v="$2" -v n="$3" -v ppn="$4" -v m="$5" -v k="$6" -v run="$7" -v r="$8" -v lay="$LAYOUT" 'BEGIN {
		split(r, a, " "); t = a[1]; it = a[2];
		ips = (t == "nan" || t <= 0) ? "nan" : it / t;
		bps = (ips == "nan") ? "nan" : ips * m;
		printf "%s,%s,%d,%d,%d,%d,%d,%d,%d,%s,%s,%s,%s,%s,%s\n", sw, v, n, ppn, n * ppn, m, k, run, it, t, ips, bps,
			(a[3] == "" ? "" : a[3]), (a[4] == "" ? "" : a[4]), lay }' >>"$A2A"
}

LAYOUTS="pinned shared"
if [ -n "$QUICK" ]; then BURSTS="16 1024"; SUSTAINED=16384; MS=""; LOG2=18
else BURSTS="1 16 64 256 1024"; SUSTAINED=16384; MS="8 16 32 64 256"; LOG2=20; fi

# --- sweep of K -------------------------------------------------------------------
log "all-to-all: sweep of K over 8 nodes x 2 processes, 16-byte items, pinned and shared"
for grid in "d8:\"direct\"" "g42:[4, 2]" "g222:[2, 2, 2]" "noagg:[2, 2, 2]"; do
	name=${grid%%:*}
	agg=""
	ks="$BURSTS $SUSTAINED"
	[ -n "$QUICK" ] && [ "$name" != g222 ] && continue
	if [ "$name" = noagg ]; then agg='aggregation: { buffer_bytes = 0; };'; ks=$BURSTS; fi
	cluster "$name" 8 "topology: { virtual = ${grid#*:}; };" "$agg"
	for run in $(seq "$RUNS"); do
		for lay in $LAYOUTS; do
			layout "$lay"
			for K in $ks; do
				row K "ferry-$name" 8 2 16 "$K" "$run" "$(ferry_a2a 2 "$K" 16)"
				# FERRY_BATCH (README, "Batches"), on the
				# direct and the 2x2x2 grid
				case $name in d8|g222)
					row K "ferry-batch-$name" 8 2 16 "$K" "$run" "$(ferry_a2a 2 "$K" 16 --batch)" ;;
				esac
			done
		done
	done
done
end_cluster
for run in $(seq "$RUNS"); do
	for lay in $LAYOUTS; do
		layout "$lay"
		for K in $BURSTS $SUSTAINED; do
			# (quick: per-item sends of the sustained run would take
			# 15 of its 60 seconds)
			[ -z "$QUICK" ] || [ "$K" != "$SUSTAINED" ] &&
				row K mpi-isend 8 2 16 "$K" "$run" "$(mpi_a2a 16 "$MPI_TCP" isend "$K" 16)"
			[ -z "$QUICK" ] && row K mpi-alltoallv-64 8 2 16 "$K" "$run" "$(mpi_a2a 16 "$MPI_TCP" alltoallv "$K" 16 64)"
			row K mpi-alltoallv-1024 8 2 16 "$K" "$run" "$(mpi_a2a 16 "$MPI_TCP" alltoallv "$K" 16 1024)"
			[ -z "$QUICK" ] && row K mpi-shm-alltoallv-1024 8 2 16 "$K" "$run" "$(mpi_a2a 16 "$MPI_SHM" alltoallv "$K" 16 1024)"
		done
	done
done

# --- sweep of the item size, and 4 nodes: shared --------------------------------------
layout shared
if [ -n "$MS" ]; then
	log "all-to-all: sweep of the item size, K = 256 (shared)"
	cluster g222 8 "topology: { virtual = [2, 2, 2]; };"
	for run in $(seq "$RUNS"); do
		for M in $MS; do
			row m ferry-g222 8 2 "$M" 256 "$run" "$(ferry_a2a 2 256 "$M")"
			row m mpi-isend 8 2 "$M" 256 "$run" "$(mpi_a2a 16 "$MPI_TCP" isend 256 "$M")"
			row m mpi-alltoallv-1024 8 2 "$M" 256 "$run" "$(mpi_a2a 16 "$MPI_TCP" alltoallv 256 "$M" 1024)"
		done
	done
	log "all-to-all: 4 nodes (shared)"
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

# --- RandomAccess-style updates ---------------------------------------------------------
GUPS=$OUT/gups.csv
echo "variant,nodes,ppn,log2_words_per_rank,updates,run,seconds,gups,layout" >"$GUPS"
UPD=$((8 * 4 * (1 << LOG2)))
grow() {        # grow VARIANT RUN SECONDS
	awk -v v="$1" -v run="$2" -v t="$3" -v n="$UPD" -v l="$LOG2" -v lay="$LAYOUT" 'BEGIN {
		printf "%s,4,2,%d,%d,%d,%s,%s,%s\n", v, l, n, run, t, (t == "nan" || t <= 0) ? "nan" : n / t / 1e9, lay }' >>"$GUPS"
}
log "RandomAccess-style updates: 4 nodes x 2 processes, 2^$LOG2 words per rank, pinned and shared"
cluster gd4 4 'topology: { virtual = "direct"; };'
for run in $(seq "$RUNS"); do
	for lay in $LAYOUTS; do
		layout "$lay"
		grow ferry-d4 "$run" "$(ferry_job fb_gups 2 --log2 "$LOG2")"
		grow ferry-batch-d4 "$run" "$(ferry_job fb_gups 2 --log2 "$LOG2" --batch)"
		e=$(mpi mb_gups 8 "$MPI_TCP" --log2 "$LOG2" | val elapsed_s)
		[ -n "$e" ] || { log "mb_gups failed ($LAYOUT): $(head -3 "$TMP/mpi.err")"; e=nan; }
		grow mpi-alltoallv-1024 "$run" "$e"
	done
done
end_cluster
