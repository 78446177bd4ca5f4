#!/bin/bash
# tests/bench/mpi_report.sh OUT - the mpi family's (mpi.sh) figures: mpi.md,
# a table per core layout of the medians over runs (microseconds per
# operation) of each MPI benchmark by Open MPI alone and with libferry-mpi
# preloaded (and the reductions on ferry's own API), with the ratio
# MPI alone / MPI with libferry-mpi taken run by run.  report.sh appends
# mpi.md to the summary.
set -u
OUT=$1
. "$(dirname "$0")/report_lib.sh"
cd "$OUT" || exit 1
[ -f mpi.csv ] || exit 0

# med IMPL BENCH OP BYTES LAYOUT: the median seconds per operation, or nan
med() {
	awk -F, -v i="$1" -v s="$2" -v o="$3" -v b="$4" -v l="$5" \
		'NR > 1 && $1 == i && $2 == s && $3 == o && $4 == b && $8 == l { print $7 }' mpi.csv | median
}
# ratio BENCH OP BYTES LAYOUT: "median [min..max]" of MPI alone / with libferry-mpi, run by run
ratio() {
	awk -F, -v s="$1" -v o="$2" -v b="$3" -v l="$4" 'NR > 1 && $2 == s && $3 == o && $4 == b && $8 == l {
		if ($1 == "mpi+ferry") f[$5] = $7; else if ($1 == "mpi") m[$5] = $7 }
		END { for (r in f) if (r in m && f[r] > 0) print m[r] / f[r] }' mpi.csv | spread |
		awk '$1 == "nan" { print "–"; next } { printf "%.2f [%.2f..%.2f]\n", $1, $2, $3 }'
}
us() { awk -v x="$1" 'BEGIN { if (x == "nan" || x == "") print "–"; else printf "%.0f", x * 1e6 }'; }

RUNS=$(awk -F, 'NR > 1 { print $5 }' mpi.csv | sort -un | wc -l)
{
	echo "### MPI programs with libferry-mpi (make bench-mpi)"
	echo
	echo "The Open MPI benchmark programs of the red, coll and sg families (mb_red, mb_coll, mb_sg), 16"
	echo "processes, 8 nodes x 2 ranks on loopback, run by Open MPI alone over TCP (btl tcp,self) and, in"
	echo "the same run, unchanged with LD_PRELOAD=libferry-mpi.so (the daemons run the collectives;"
	echo "README \"MPI programs\"); the reductions also on ferry's API (fb_red). Microseconds per operation,"
	echo "medians of $RUNS runs: MPI alone / with libferry-mpi / ferry's API, and MPI alone divided by"
	echo "MPI with libferry-mpi run by run, median [min..max] (above 1: faster with ferry). Bytes: per"
	echo "rank for the reductions (rsb: the whole vector), the block for alltoall, scatter and gather."
	for lay in pinned shared; do
		echo
		echo "| $lay | bytes | MPI / +ferry / ferry API (µs) | MPI / +ferry |"
		echo "|---|---|---|---|"
		awk -F, -v l="$lay" 'NR > 1 && $8 == l { print $2 "," $3 "," $4 }' mpi.csv | awk '!seen[$0]++' |
			sort -t, -k1,1 -k2,2 -k3,3n | while IFS=, read -r bench op b; do
				echo "| $op ($bench) | $b | $(us "$(med mpi "$bench" "$op" "$b" "$lay")") / $(us "$(med mpi+ferry "$bench" "$op" "$b" "$lay")") / $(us "$(med ferry "$bench" "$op" "$b" "$lay")") | $(ratio "$bench" "$op" "$b" "$lay") |"
			done
	done
} >mpi.md
