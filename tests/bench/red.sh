#!/bin/bash
# tests/bench/red.sh BUILD OUT [quick] - the reductions family (make
# bench-red): allreduce, allgather, bcast, reduce and reduce_scatter_block
# run by the daemons (fb_red.c, the automatic choice) against Open MPI's
# (mb_red.c: the same code on MPI_Allreduce ...) with 16 processes over TCP,
# 8 nodes x 2 ranks, in both core layouts (lib.sh), taking turns run by
# run.  Writes OUT/red.csv; red_report.sh turns it into red.md.
#
# Loopback links: the 2 CPUs, not the links, are the bottleneck here, so
# the phase structure of the orthogonal algorithms hardly shows: redtc.sh
# runs them over tc-shaped links, every algorithm forced.  Ordinary
# buffers (staged by libferry); int32 sums; root 0; no cluster key
# (integrity off).
. "$(dirname "$0")/lib.sh" "$@"

OPS="allreduce,allgather,bcast,reduce,rsb"
if [ -n "$QUICK" ]; then
	BYTES="8 4096"; TARGET=0.05
else
	BYTES="8 64 512 4096 32768 262144 1048576 4194304"; TARGET=0.1
fi
LAYOUTS="pinned shared"
TIMING=(--target-s "$TARGET" --warmup 3 --warmup-max-s 0.5)

CSV=$OUT/red.csv
echo "impl,op,bytes,run,iters,seconds_per_op,layout" >"$CSV"

# rows IMPL RUN FILE: the "point" lines of FILE as CSV rows.
rows() {
	awk -v impl="$1" -v run="$2" -v lay="$LAYOUT" '$1 == "point" {
		printf "%s,%s,%s,%s,%s,%s,%s\n", impl, $3, $7, run, $9, $11, lay }' "$3" >>"$CSV"
}

log "reductions: $OPS (bytes $(list $BYTES)), 8 nodes x 2 ranks, pinned and shared, against Open MPI (TCP)"
# (the daemons' memory for 4 MiB per rank: an allgather's node holds 64 MiB
# of results, a reduction about three vectors; README "Large reductions")
cluster cr8 8 'topology: { virtual = "direct"; };' \
	'limits: { memory_bytes = 1073741824; user_memory_bytes = 1073741824; };'
# The runtime functions (README "Runtime functions") learn on-line, and an
# algorithm never run is tried by the next jobs: every algorithm runs once
# first, as on a cluster that has run these operations before.
for lay in $LAYOUTS; do
	layout "$lay"
	for s in single orth hier; do
		ferry_job fb_red 2 allreduce,allgather,bcast,reduce --bytes "$(list $BYTES)" --strategy "$s" \
			--target-s 0.02 --warmup 3 --warmup-max-s 0.2 >/dev/null
	done
	for s in short long hybrid; do
		ferry_job fb_red 2 rsb --bytes "$(list $BYTES)" --strategy "$s" --target-s 0.02 --warmup 3 \
			--warmup-max-s 0.2 >/dev/null
	done
done
for run in $(seq "$RUNS"); do
	for lay in $LAYOUTS; do
		layout "$lay"
		t=$(ferry_job fb_red 2 "$OPS" --bytes "$(list $BYTES)" "${TIMING[@]}")
		[ "$t" = nan ] || rows ferry "$run" "$TMP/job.0"
		mpi mb_red 16 "$MPI_TCP" "$OPS" --bytes "$(list $BYTES)" "${TIMING[@]}" >"$TMP/mpi.out" ||
			log "mb_red failed ($LAYOUT): $(head -3 "$TMP/mpi.err")"
		rows mpi-tcp "$run" "$TMP/mpi.out"
	done
done
end_cluster
bash "$HERE/red_report.sh" "$OUT"
