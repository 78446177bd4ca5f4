#!/bin/bash
# tests/bench/mpi.sh BUILD OUT [quick] - the mpi family (make bench-mpi):
# the collective benchmarks of the earlier families as the plain Open MPI
# programs they already are (mb_red: allreduce, allgather, bcast, reduce,
# reduce_scatter_block; mb_coll: alltoall; mb_sg: scatter and gather),
# each run twice in the same run: by Open MPI alone ("mpi": TCP, as the
# other families compare) and with LD_PRELOAD=libferry-mpi.so on the ferry
# cluster ("mpi+ferry": the daemons run the collectives; README "MPI
# programs"), and fb_red, the same reductions on ferry's own API ("ferry"),
# to show what the interception costs.  16 processes, 8 nodes x 2 ranks,
# in both core layouts (lib.sh), taking turns run by run.  Writes
# OUT/mpi.csv; mpi_report.sh turns it into mpi.md.
. "$(dirname "$0")/lib.sh" "$@"

[ -e "$BUILD/libferry-mpi.so" ] || { log "no $BUILD/libferry-mpi.so (make builds it where mpicc is)"; exit 1; }
OPS="allreduce,allgather,bcast,reduce,rsb"
if [ -n "$QUICK" ]; then
	BYTES="8 4096"; BLOCKS="64 4096"; TARGET=0.05
else
	BYTES="8 512 4096 65536 1048576"; BLOCKS="64 4096 65536"; TARGET=0.1
fi
LAYOUTS="pinned shared"
TIMING=(--target-s "$TARGET" --warmup 3)      # (mb_red also takes --warmup-max-s)
PPN=2

CSV=$OUT/mpi.csv
echo "impl,bench,op,bytes,run,iters,seconds_per_op,layout" >"$CSV"

# rows IMPL BENCH RUN FILE: the "point" lines of FILE as CSV rows (the
# programs name their fields: bytes or block, iters, per_op_s).
rows() {
	awk -v impl="$1" -v bench="$2" -v run="$3" -v lay="$LAYOUT" '$1 == "point" {
		for (i = 2; i < NF; i++) {
			if ($i == "op") op = $(i + 1)
			if ($i == "bytes" || $i == "block") b = $(i + 1)
			if ($i == "iters") n = $(i + 1)
			if ($i == "per_op_s") t = $(i + 1)
		}
		printf "%s,%s,%s,%s,%s,%s,%s,%s\n", impl, bench, op, b, run, n, t, lay }' "$4" >>"$CSV"
}

# mpi_ferry PROGRAM ARGS...: an Open MPI job of CLN x PPN ranks in LAYOUT,
# preloaded with libferry-mpi, rank r on node r / PPN (a wrapper sets its
# FERRY_RUNTIME_DIR); prints its output (stderr in $TMP/mpi.err).
cat >"$TMP/where" <<EOF
#!/bin/sh
FERRY_RUNTIME_DIR=$TMP/\${BENCH_CL}_n\$((OMPI_COMM_WORLD_RANK / $PPN)) exec "\$@"
EOF
chmod +x "$TMP/where"
mpi_ferry() {
	local prog=$1
	shift
	# shellcheck disable=SC2086
	$MPIRUN -np $((CLN * PPN)) $MPI_TCP $MPI_LAYOUT -x LD_PRELOAD="$BUILD/libferry-mpi.so" -x BENCH_CL="$CL" \
		"${APP[@]}" "$TMP/where" "$B/$prog" "$@" 2>"$TMP/mpi.err"
}

# both BENCH PROGRAM RUN ARGS...: the program by Open MPI alone, then
# preloaded, one row set each.
both() {
	local bench=$1 prog=$2 run=$3
	shift 3
	mpi "$prog" $((CLN * PPN)) "$MPI_TCP" "$@" "${TIMING[@]}" >"$TMP/mpi.out" ||
		log "$prog failed ($LAYOUT): $(head -3 "$TMP/mpi.err")"
	rows mpi "$bench" "$run" "$TMP/mpi.out"
	mpi_ferry "$prog" "$@" "${TIMING[@]}" >"$TMP/mpi.out" ||
		log "$prog with libferry-mpi failed ($LAYOUT): $(head -3 "$TMP/mpi.err")"
	rows mpi+ferry "$bench" "$run" "$TMP/mpi.out"
}

log "MPI programs with and without libferry-mpi: $OPS (bytes $(list $BYTES)), alltoall, scatter, gather" \
	"(blocks $(list $BLOCKS)), 8 nodes x $PPN ranks, pinned and shared, Open MPI over TCP"
cluster cm8 8 'topology: { virtual = "direct"; };' \
	'limits: { memory_bytes = 1073741824; user_memory_bytes = 1073741824; };'
for run in $(seq "$RUNS"); do
	for lay in $LAYOUTS; do
		layout "$lay"
		both red mb_red "$run" "$OPS" --bytes "$(list $BYTES)" --warmup-max-s 0.5
		t=$(ferry_job fb_red "$PPN" "$OPS" --bytes "$(list $BYTES)" --warmup-max-s 0.5 "${TIMING[@]}")
		[ "$t" = nan ] || rows ferry red "$run" "$TMP/job.0"
		both coll mb_coll "$run" alltoall --blocks "$(list $BLOCKS)"
		for op in scatter gather; do
			both sg mb_sg "$run" "$op" --blocks "$(list $BLOCKS)"
		done
	done
done
end_cluster
bash "$HERE/mpi_report.sh" "$OUT"
