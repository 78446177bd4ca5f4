#!/bin/bash
# tests/bench/sg_report.sh OUT - the sg family's (sg.sh) figures: sg.md (a
# table per torus and operation: medians over runs, ratios run by run
# against OPT, and the α–β simulation beside them) and the plots
# sg-scatter.png, sg-gather.png (time against block size, log-log, one
# panel per torus, like the paper's Figures 4-5).  report.sh appends sg.md
# to the summary.
set -u
OUT=$1
cd "$OUT" || exit 1
[ -f sg.csv ] || exit 0

# med FILTER COL: the median of column COL of sg.csv's matching rows, or nan
med() {
	awk -F, -v col="$2" "NR > 1 && ($1) && \$col != \"nan\" { print \$col }" sg.csv | sort -g |
		awk '{ v[NR] = $1 } END { if (!NR) print "nan"; else print NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
# ratio T OP V B: median over runs of V's time / opt's time in the same run
ratio() {
	awk -F, -v t="$1" -v op="$2" -v v="$3" -v b="$4" 'NR > 1 && $1 == t && $2 == op && $4 == b && $7 != "nan" {
		if ($3 == "opt") o[$5] = $7; if ($3 == v) x[$5] = $7 }
		END { for (r in x) if (r in o) print x[r] / o[r] }' sg.csv | sort -g |
		awk '{ v[NR] = $1 } END { if (!NR) print "nan"; else printf "%.2f\n", NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
ms() { awk -v x="$1" 'BEGIN { if (x == "nan") print "–"; else printf "%.3g", x * 1000 }'; }
sim() { awk -F, -v t="$1" -v op="$2" -v a="$3" -v b="$4" 'NR > 1 && $1 == t && $2 == op && $3 == a && $4 == b { print $7; exit }' sg_sim.csv; }
simr() { awk -F, -v t="$1" -v op="$2" -v a="$3" 'NR > 1 && $1 == t && $2 == op && $3 == a { print $8; exit }' sg_sim.csv; }
bytes() { awk -v b="$1" 'BEGIN { if (b >= 1048576) printf "%g MiB", b / 1048576; else if (b >= 1024) printf "%g KiB", b / 1024; else printf "%d B", b }'; }

TORI=$(awk -F, 'NR > 1 { print $1 }' sg.csv | awk '!seen[$0]++')
BLOCKS=$(awk -F, 'NR > 1 { print $4 }' sg.csv | sort -un)
SHAPING=$(awk -F, 'NR > 1 { print $9; exit }' sg.csv)
RUNS=$(awk -F, 'NR > 1 { print $5 }' sg.csv | sort -un | wc -l)

# plot data: per torus and op, "block opt sdf direct mpi sim-opt sim-sdf sim-naive" (ms)
for t in $TORI; do
	for op in scatter gather; do
		for b in $BLOCKS; do
			echo "$b $(for v in opt sdf direct mpi; do
				med "\$1 == \"$t\" && \$2 == \"$op\" && \$3 == \"$v\" && \$4 == $b" 7 | awk '{ print $1 == "nan" ? "NaN" : $1 * 1000 }'
			done | paste -sd' ') $(for a in opt sdf naive; do
				sim "$t" "$op" "$a" "$b" | awk '{ print $1 * 1000 }'; done | paste -sd' ')"
		done >"plot-sg-$op-$t.dat"
	done
done
if command -v gnuplot >/dev/null; then
	{
		for op in scatter gather; do
			echo 'set terminal pngcairo size 1400,600 font ",10"'
			echo "set output \"sg-$op.png\""
			echo "set multiplot layout 1,$(echo "$TORI" | wc -w) title \"$op, one rank per node, root 0, links $SHAPING: time per operation (the slowest rank's, median of $RUNS runs); dashed: the α–β simulation of ferry's algorithms\""
			echo 'set termoption noenhanced'
			echo 'set xlabel "block (bytes)"; set ylabel "ms per operation"; set logscale xy; set grid; set key top left font ",9"'
			for t in $TORI; do
				f="plot-sg-$op-$t.dat"
				echo "set title \"$t torus\""
				echo "plot \"$f\" using 1:2 with linespoints title \"OPT (ferry, planned regions)\", \"\" using 1:3 with linespoints title \"SDF (ferry)\", \"\" using 1:4 with linespoints title \"naive (ferry direct)\", \"\" using 1:5 with linespoints title \"MPI_${op^} (Open MPI, TCP, routed)\", \"\" using 1:6 with lines dt 2 lc 1 title \"OPT simulated\", \"\" using 1:7 with lines dt 2 lc 2 title \"SDF simulated\", \"\" using 1:8 with lines dt 2 lc 3 title \"naive simulated\""
			done
			echo 'unset multiplot'
		done
	} >sg.gp
	gnuplot sg.gp 2>sg-gnuplot.log || echo "# gnuplot failed: see $OUT/sg-gnuplot.log" >&2
fi

{
	echo "## Scatter and gather on a torus (issue 13)"
	echo
	echo "\`make bench-sg\` (tests/bench/sg.sh, fb_sg.c, mb_sg.c): one network namespace per node, veth links"
	echo "between torus neighbours only, shaped on both ends ($SHAPING), one ferryd and one rank per node,"
	echo "root 0, everything on both cores (shared layout). Open MPI runs in the same namespaces over the same"
	echo "links, its packets forwarded by the kernel along the routes ferry's frames take (ferryctl route). Milliseconds per operation"
	echo "(OSU's method: a barrier, then the operation timed alone; the slowest rank's mean; median of $RUNS"
	echo "run(s)); ×: the time over OPT's in the same run (median). \`sim\`: the α–β simulation of ferry's three"
	echo "algorithms with this run's links (ferryctl plan … --simulate; α = the netem delay, if any, plus the α"
	echo "the daemons measured on their links: $(awk -F, 'NR > 1 { print $1 " " $5 " µs" }' sg_sim.csv | awk '$1 !~ /^(8x8|4x8x8)$/ && !s[$1]++' | paste -sd, | sed 's/,/, /g'); β = 8 / rate), in hop times below the table."
	echo "(the simulation's naive moves whole blocks hop by hop; ferry's direct is forwarded by the daemons' data"
	echo "path in pieces of at most 64 KiB, pipelined, so for larger blocks the simulation overstates it)"
	for t in $TORI; do
		for op in scatter gather; do
			echo
			echo "**$t, $op** (simulated hop times: OPT $(simr "$t" "$op" opt), SDF $(simr "$t" "$op" sdf), naive $(simr "$t" "$op" naive); bound $(awk -F, -v t="$t" -v op="$op" 'NR > 1 && $1 == t && $2 == op { print $9; exit }' sg_sim.csv))"
			echo
			echo "| block | OPT | SDF | naive (direct) | MPI | SDF × | naive × | MPI × | sim OPT | sim SDF | sim naive |"
			echo "|---|---|---|---|---|---|---|---|---|---|---|"
			for b in $BLOCKS; do
				row="| $(bytes "$b") |"
				for v in opt sdf direct mpi; do
					row="$row $(ms "$(med "\$1 == \"$t\" && \$2 == \"$op\" && \$3 == \"$v\" && \$4 == $b" 7)") |"
				done
				for v in sdf direct mpi; do row="$row $(ratio "$t" "$op" "$v" "$b") |"; done
				for a in opt sdf naive; do row="$row $(ms "$(sim "$t" "$op" "$a" "$b")") |"; done
				echo "$row"
			done
		done
	done
	echo
	echo "The paper's tori under the same simulation (α = 50 µs, β = 80 ns/B, i.e. 100 Mbit/s), in hop times:"
	for t in 8x8 4x8x8; do
		echo "$t: OPT $(simr "$t" scatter opt), SDF $(simr "$t" scatter sdf), naive $(simr "$t" scatter naive) (scatter; gather OPT $(simr "$t" gather opt), SDF $(simr "$t" gather sdf), naive $(simr "$t" gather naive));"
	done
	echo "at 64 KiB that is $(for t in 8x8 4x8x8; do for a in opt sdf naive; do ms "$(sim "$t" scatter "$a" 65536)"; echo -n " "; done; echo -n "/ "; done | sed 's/ \/ $//') ms (8x8 OPT SDF naive / 4x8x8 …)."
} >sg.md
