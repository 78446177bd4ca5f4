#!/bin/bash
# tests/bench/red_report.sh OUT - the red family's (red.sh) figures: red.md,
# a table per core layout of the medians over runs (microseconds per
# operation) of ferry and Open MPI (TCP) per operation and size, with the
# ratio MPI / ferry taken run by run, and the issue's figure: allreduce and
# allgather of at most 4 KiB over 8 nodes x 2 ranks at least 2x faster than
# Open MPI over TCP; and the plot red.png (time against size, ferry and
# Open MPI in both layouts, a panel per operation).  report.sh appends
# red.md to the summary.
set -u
OUT=$1
. "$(dirname "$0")/report_lib.sh"
cd "$OUT" || exit 1
[ -f red.csv ] || exit 0

# med IMPL OP BYTES LAYOUT: the median seconds per operation, or nan
med() {
	awk -F, -v i="$1" -v o="$2" -v b="$3" -v l="$4" 'NR > 1 && $1 == i && $2 == o && $3 == b && $7 == l { print $6 }' \
		red.csv | median
}
# ratio OP BYTES LAYOUT: "median [min..max]" of MPI / ferry, run by run
ratio() {
	awk -F, -v o="$1" -v b="$2" -v l="$3" 'NR > 1 && $2 == o && $3 == b && $7 == l {
		if ($1 == "ferry") f[$4] = $6; else m[$4] = $6 }
		END { for (r in f) if (r in m && f[r] > 0) print m[r] / f[r] }' red.csv | spread |
		awk '$1 == "nan" { print "nan"; next } { printf "%.2f [%.2f..%.2f]\n", $1, $2, $3 }'
}
us() { awk -v x="$1" 'BEGIN { if (x == "nan") print "–"; else printf "%.0f", x * 1e6 }'; }

OPS=$(awk -F, 'NR > 1 { print $2 }' red.csv | awk '!seen[$0]++')
BYTES=$(awk -F, 'NR > 1 { print $3 }' red.csv | sort -un)
RUNS=$(awk -F, 'NR > 1 { print $4 }' red.csv | sort -un | wc -l)
# plot data: per op, "bytes ferry-pinned mpi-pinned ferry-shared mpi-shared" (µs)
for op in $OPS; do
	for b in $BYTES; do
		echo "$b $(for lay in pinned shared; do for i in ferry mpi-tcp; do
			med "$i" "$op" "$b" "$lay" | awk '{ print $1 == "nan" ? "NaN" : $1 * 1e6 }'; done; done | paste -sd' ')"
	done >"plot-red-$op.dat"
done
if command -v gnuplot >/dev/null; then
	{
		echo 'set terminal pngcairo size 1500,900 font ",10" noenhanced'
		echo 'set output "red.png"'
		echo "set multiplot layout 2,3 title \"Reductions, broadcast, allgather on loopback (the CPUs decide): 8 nodes x 2 ranks, ferry's automatic choice against Open MPI (16 processes, TCP), integrity off; median of $RUNS runs\npinned: ferryd on CPU 1, processes on CPU 0; shared: both cores\""
		echo 'set xlabel "bytes per rank (allgather: the block; rsb: the whole vector)"; set ylabel "µs per operation"; set logscale xy; set grid; set key top left font ",9"'
		for op in $OPS; do
			echo "set title \"$([ "$op" = rsb ] && echo reduce_scatter_block || echo "$op")\""
			echo "plot \"plot-red-$op.dat\" using 1:2 with linespoints lw 1.5 lc rgb \"#d62728\" title \"ferry, pinned\", \"\" using 1:3 with linespoints lw 1.5 lc rgb \"black\" title \"Open MPI, pinned\", \"\" using 1:4 with linespoints dt 2 lc rgb \"#d62728\" title \"ferry, shared\", \"\" using 1:5 with linespoints dt 2 lc rgb \"black\" title \"Open MPI, shared\""
		done
		echo 'unset multiplot'
	} >red.gp
	gnuplot red.gp 2>red-gnuplot.log || echo "# gnuplot failed: see $OUT/red-gnuplot.log" >&2
fi
{
	echo "### Reductions, broadcast, allgather (make bench-red)"
	echo
	echo "8 nodes x 2 ranks on loopback (the daemons linked every node to every other), ferry's automatic"
	echo "choice against Open MPI with 16 processes over TCP (btl tcp,self); int32 sums, root 0, ordinary"
	echo "buffers, integrity off; microseconds per operation, medians of $RUNS runs, and MPI / ferry run by"
	echo "run, median [min..max]. rsb: reduce_scatter_block (the bytes are the whole vector). Plot: red.png."
	for lay in pinned shared; do
		echo
		echo "| $lay | $(for b in $BYTES; do printf '%s B | ' "$b"; done)"
		echo "|---|$(for b in $BYTES; do printf -- '---|'; done)"
		for op in $OPS; do
			echo "| $op ferry / MPI | $(for b in $BYTES; do printf '%s / %s | ' "$(us "$(med ferry "$op" "$b" "$lay")")" \
				"$(us "$(med mpi-tcp "$op" "$b" "$lay")")"; done)"
			echo "| … MPI / ferry | $(for b in $BYTES; do printf '%s | ' "$(ratio "$op" "$b" "$lay")"; done)"
		done
	done
	echo
	echo "| figure | conditions | target | measured | verdict |"
	echo "|---|---|---|---|---|"
	for lay in pinned shared; do
		for op in allreduce allgather; do
			worst=99; cells=""
			for b in $BYTES; do
				[ "$b" -gt 0 ] && [ "$b" -le 4096 ] || continue
				r=$(ratio "$op" "$b" "$lay" | awk '{ print $1 }')
				cells="$cells${cells:+; }$b B: ${r}×"
				worst=$(awk -v a="$worst" -v r="$r" 'BEGIN { if (r == "nan") r = 0; print ((r + 0 < a + 0) ? r : a) }')
			done
			verdict=$(awk -v w="$worst" 'BEGIN { print ((w + 0 >= 2) ? "met" : "not met") }')
			echo "| $op of ≤ 4 KiB per rank, 8 nodes × 2: MPI (TCP) / ferry | $lay, ordinary buffers, integrity off | ≥ 2× at each size | $cells | $verdict |"
		done
	done
} >red.md
