#!/bin/bash
# tests/bench/redtc_report.sh OUT - the redtc family's (redtc.sh) figures:
# redtc.md (the conditions; per node count and operation a table of
# medians over runs, ms per operation, with Open MPI's time over each
# algorithm's run by run, the algorithm the automatic choice ran, and the
# cost model's prediction with the deviation from it; orth and hier against
# single, min/mean/max over the sizes where the links decide, as the
# paper's Figures 8-16; reduce_scatter_block's crossover; the predictions'
# deviations, as its Figures 17-21) and the plots redtc-OP.png (time
# against size per algorithm, one panel per node count; dashed: the model).
# report.sh appends redtc.md to the summary.
set -u
OUT=$1
. "$(dirname "$0")/report_lib.sh"
cd "$OUT" || exit 1
[ -f redtc.csv ] || exit 0

# redtc-med.txt, one line per nodes, op, strategy and bytes (fields):
#   1-4 nodes op strategy bytes, 5-8 med_s min_s max_s runs, 9 alg,
#   10 pred_us 11 rpred_us, 12-14 mpi_over med min max, 15 dev 16 dev_rate,
#   17 plan_chose
# medians over runs; alg the algorithm seen most often (auto; "?": never
# seen: the plan's choice with the job's α and β is in plan_chose);
# mpi_over: Open MPI's time over this one's, run by run; dev, dev_rate:
# measured / predicted - 1 (job's α and β; β from the rate), run by run.
awk -F, 'function sorted(s,   n, a, i, j, x) {        # "v v v" sorted
		n = split(s, a, " ")
		for (i = 2; i <= n; i++) { x = a[i]; for (j = i - 1; j > 0 && a[j] + 0 > x + 0; j--) a[j + 1] = a[j]; a[j + 1] = x }
		s = ""; for (i = 1; i <= n; i++) s = s " " a[i]
		return s }
	function med(s,   n, a) {
		n = split(sorted(s), a, " ")
		return !n ? "nan" : n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2 }
	function lo(s,   a) { return split(sorted(s), a, " ") ? a[1] : "nan" }
	function hi(s,   a, n) { n = split(sorted(s), a, " "); return n ? a[n] : "nan" }
	NR > 1 && $9 != "nan" {
		k = $1 " " $2 " " $4 " " $6
		if (!(k in t)) order[++nk] = k
		t[k] = t[k] " " $9; runs[k]++
		run[k, $7] = $9
		algs[k, $5]++
		if ($14 != "nan") { p[k] = p[k] " " $14; dv[k] = dv[k] " " ($9 * 1e6 / $14 - 1) }
		if ($15 != "nan") { rp[k] = rp[k] " " $15; rdv[k] = rdv[k] " " ($9 * 1e6 / $15 - 1) }
		chose[k] = $13
		if ($3 == "mpi") mpi[$1 " " $2 " " $6, $7] = $9
		allrun[$7] = 1 }
	END {
		for (i = 1; i <= nk; i++) {
			k = order[i]; split(k, f, " "); best = "-"; bn = 0
			for (ka in algs) { split(ka, g, SUBSEP); if (g[1] == k && algs[ka] > bn) { bn = algs[ka]; best = g[2] } }
			r = ""
			for (x in allrun) if (((k, x) in run) && ((f[1] " " f[2] " " f[4], x) in mpi) && run[k, x] > 0)
				r = r " " mpi[f[1] " " f[2] " " f[4], x] / run[k, x]
			print k, med(t[k]), lo(t[k]), hi(t[k]), runs[k], best, med(p[k]), med(rp[k]), med(r), lo(r), hi(r),
				med(dv[k]), med(rdv[k]), chose[k]
		} }' redtc.csv >redtc-med.txt

# get NODES OP STRATEGY BYTES FIELD: a field of redtc-med.txt (nan if none)
get() {
	awk -v n="$1" -v o="$2" -v s="$3" -v b="$4" -v f="$5" '$1 == n && $2 == o && $3 == s && $4 == b { print $f; found = 1; exit }
		END { if (!found) print "nan" }' redtc-med.txt
}
ms() { awk -v x="$1" 'BEGIN { if (x == "nan") print "–"; else if (x < 0.001) printf "%.3f", x * 1000; else printf "%.3g", x * 1000 }'; }
x2() { awk -v x="$1" 'BEGIN { if (x == "nan") print "–"; else printf "%.2f", x }'; }
pct() { awk -v x="$1" 'BEGIN { if (x == "nan") print "–"; else printf "%+.0f %%", x * 100 }'; }
bytes() { awk -v b="$1" 'BEGIN { if (b >= 1048576) printf "%g MiB", b / 1048576; else if (b >= 1024) printf "%g KiB", b / 1024; else printf "%d B", b }'; }

NODES=$(awk -F, 'NR > 1 { print $1 }' redtc.csv | awk '!s[$0]++')
BYTES=$(awk -F, 'NR > 1 { print $6 }' redtc.csv | sort -un)
RUNS=$(awk -F, 'NR > 1 { print $7 }' redtc.csv | sort -un | wc -l)
SHAPING=$(awk -F, 'NR > 1 { print $16; exit }' redtc.csv)
RATE_BETA=$(rate_beta_ns "$(echo "$SHAPING" | sed -n 's/.*rate \([^ ;]*\).*/\1/p')")
# the strategies that ran for an op, in this order
strats() {
	local s
	for s in single orth hier short long hybrid auto; do
		awk -F, -v o="$1" -v s="$s" 'NR > 1 && $2 == o && $4 == s { f = 1; exit } END { exit !f }' redtc.csv && echo "$s"
	done
}
OPS=$(for op in bcast allgather allreduce reduce rsb; do
	awk -F, -v o="$op" 'NR > 1 && $2 == o { f = 1; exit } END { exit !f }' redtc.csv && echo "$op"; done)
opname() { case $1 in rsb) echo "reduce_scatter_block" ;; *) echo "$1" ;; esac; }
mpiname() { case $1 in rsb) echo "MPI_Reduce_scatter_block" ;; *) echo "MPI_${1^}" ;; esac; }
# link-bound sizes: where the links decide (see redtc.sh), from 4 KiB on
LINKB=4096

# improvement N OP A B: "min mean max" over the sizes >= LINKB of
# 100 (1 - t_A / t_B) (medians over runs), as the paper's figures plot it
improvement() {
	local b
	for b in $BYTES; do
		[ "$b" -ge "$LINKB" ] || continue
		echo "$(get "$1" "$2" "$3" "$b" 5) $(get "$1" "$2" "$4" "$b" 5)"
	done | awk '$1 != "nan" && $2 != "nan" && $2 > 0 { x = 100 * (1 - $1 / $2); s += x; n++
			if (n == 1 || x < lo) lo = x; if (n == 1 || x > hi) hi = x }
		END { if (!n) print "–"; else printf "%+.0f / %+.0f / %+.0f %%\n", lo, s / n, hi }'
}

# plot data: per node count and op, "bytes <ms per strategy...> mpi <model ms per forced strategy...>"
for n in $NODES; do
	for op in $OPS; do
		ss=$(strats "$op")
		for b in $BYTES; do
			echo "$b $(for s in $ss mpi; do get "$n" "$op" "$s" "$b" 5 | awk '{ print $1 == "nan" ? "NaN" : $1 * 1000 }'; done |
				paste -sd' ') $(for s in $ss; do [ "$s" = auto ] && continue
					get "$n" "$op" "$s" "$b" 11 | awk '{ print $1 == "nan" ? "NaN" : $1 / 1000 }'; done | paste -sd' ')"
		done >"plot-redtc-$op-$n.dat"
	done
done
# auto_alg NODES OP BYTES: the algorithm the automatic choice ran (the
# plan's with the job's α and β; "*": the polls did not see it run)
auto_alg() {
	echo "$(get "$1" "$2" auto "$3" 17)$([ "$(get "$1" "$2" auto "$3" 9)" = "?" ] && echo "*")"
}
# crossover N FIELD: the smallest size from which long is faster than short
# at every size (reduce_scatter_block; FIELD 5 measured, 11 the model), "–"
# if none
crossover() {
	local b from="–"
	for b in $BYTES; do
		if awk -v s="$(get "$1" rsb short "$b" "$2")" -v l="$(get "$1" rsb long "$b" "$2")" \
			'BEGIN { exit !(s != "nan" && l != "nan" && l + 0 < s + 0) }'; then
			[ "$from" = "–" ] && from=$(bytes "$b")
		else
			from="–"
		fi
	done
	echo "$from"
}
# base OP: the algorithm the plots' lower panels divide by (the single-phase
# one; reduce_scatter_block: long, the bucket algorithm)
base() { if [ "$1" = rsb ]; then echo long; else echo single; fi; }
colour() {
	case $1 in
	single | short) echo "#1f77b4" ;;
	orth | long) echo "#d62728" ;;
	hier | hybrid) echo "#2ca02c" ;;
	*) echo "#ff7f0e" ;;
	esac
}
if command -v gnuplot >/dev/null; then
	{
		for op in $OPS; do
			ss=$(strats "$op")
			ns=$(echo "$ss" | wc -w)
			echo 'set terminal pngcairo size 1400,1000 font ",10" noenhanced'
			echo "set output \"redtc-$op.png\""
			echo "set multiplot layout 2,$(echo "$NODES" | wc -w) title \"$(opname "$op") over shaped links (ports: $SHAPING), one rank per node, shared layout; median of $RUNS runs\ntop: time per operation, dashed: the cost model (ferryctl plan) with the shaped rate's β and the links' median α; bottom: time over $(base "$op")'s\""
			echo 'set xlabel "bytes per rank (allgather: the block; reduce_scatter_block: the whole vector)"; set grid; set key top left font ",9"; set xrange [4:2e6]; set logscale xy'
			for panel in time ratio; do
				for n in $NODES; do
					if [ $panel = time ]; then
						echo "set title \"$n nodes: time\"; set ylabel \"ms per operation\"; set autoscale y; set ytics auto"
					else
						echo "set title \"$n nodes: time over $(base "$op")'s (below 1: faster)\"; set ylabel \"t / t_$(base "$op")\"; set yrange [0.2:5]; set ytics (0.25, 0.5, 0.75, 1, 1.5, 2, 3, 4)"
					fi
					bc=$((2 + $(echo "$ss" | grep -nx "$(base "$op")" | cut -d: -f1) - 1))
					plot="plot \"plot-redtc-$op-$n.dat\""
					c=2 sep=" "
					for s in $ss mpi; do
						if [ $panel = time ]; then y="$c"; else y="(\$$c / \$$bc)"; fi
						if [ "$s" = mpi ]; then
							plot="$plot${sep}using 1:$y with linespoints lw 2 lc rgb \"black\" title \"$(mpiname "$op") (Open MPI, TCP)\""
						else
							plot="$plot${sep}using 1:$y with linespoints lw 1.5 lc rgb \"$(colour "$s")\" title \"ferry $s$([ "$s" = auto ] && echo " (automatic choice)")\""
						fi
						c=$((c + 1)) sep=", \"\" "
					done
					m=$c
					for s in $ss; do
						[ "$s" = auto ] && continue
						[ $panel = time ] && plot="$plot, \"\" using 1:$m with lines dt 2 lc rgb \"$(colour "$s")\" title \"$s, model\""
						m=$((m + 1))
					done
					echo "$plot"
				done
			done
			echo 'unset multiplot'
		done
	} >redtc.gp
	gnuplot redtc.gp 2>redtc-gnuplot.log || echo "# gnuplot failed: see $OUT/redtc-gnuplot.log" >&2
fi

link_alpha() {  # link_alpha N: the links' median α after the warm-up, µs
	awk '{ for (i = 3; i < NF; i++) if ($i == "alpha_us") print $(i + 1) }' "redtc-links-$1-start.txt" 2>/dev/null | median
}
job_range() {   # job_range COL: "min–max" of the jobs' α (10) or β (11)
	awk -F, -v c="$1" 'NR > 1 && $3 == "ferry" && $c != "nan" { v = $c + 0; if (!n++ || v < lo) lo = v; if (v > hi) hi = v }
		END { if (!n) print "–"; else printf "%.3g–%.3g\n", lo, hi }' redtc.csv
}
{
	echo "## Reductions over shaped links (issue 14)"
	echo
	echo "\`make bench-redtc\` (tests/bench/redtc.sh, fb_red.c, mb_red.c): one network namespace per node, each with one"
	echo "veth port to a bridge (a switch), both ends of every port shaped ($SHAPING), so each node"
	echo "sends and receives at that rate at once: the links decide here, where the loopback \`red\` family measures the"
	echo "CPUs. One ferryd and one rank per node, everything on both cores (shared layout), no cluster key (integrity"
	echo "off), int32 sums, root 0, ordinary buffers; virtual topology \"direct\". Open MPI runs with the same"
	echo "processes in the same namespaces over the same ports (TCP). Milliseconds per operation (OSU's method,"
	echo "fb_red --barrier: a barrier, then the operation timed alone; the slowest rank's mean), medians of $RUNS run(s); MPI/x: Open MPI's time over x's,"
	echo "run by run (above 1: ferry's x is faster). Bytes per rank; allgather: the block; reduce_scatter_block:"
	seen=$(awk -F, 'NR > 1 && $4 == "auto" && $5 != "?" { n++ } END { print n + 0 }' redtc.csv)
	echo "the whole vector. *auto*: the automatic choice, the algorithm it ran in parentheses: \`ferryctl plan\`'s"
	echo "choice with the α and β the job agreed on (the daemons' own function and inputs). Node 0's \`ferryctl stats\`,"
	echo "polled every 0.1 s, names the algorithm of the last operation that ended (often the barrier between two):"
	echo "it named the point's at $seen of the $(awk -F, 'NR > 1 && $4 == "auto" { n++ } END { print n + 0 }' redtc.csv) automatic points,"
	echo "the plan's choice $(awk -F, 'NR > 1 && $4 == "auto" && $5 != "?" && $5 == $13 { n++ } END { print n + 0 }' redtc.csv) times of $seen;"
	echo "the points it did not name are marked \`*\`.$(awk -F, 'NR > 1 && $4 == "auto" && $5 != "?" && $5 != $13 {
		printf " Not the plan'"'"'s: %s nodes %s %s B run %s ran %s, plan %s.", $1, $2, $6, $7, $5, $13 }' redtc.csv)"
	echo
	echo "Predictions: \`ferryctl plan OP --nodes N --ppn 1 --bytes B\`'s predicted_us for the algorithm that ran"
	echo "(the daemons' cost model), with β from the shaped rate ($RATE_BETA ns/byte) and α the median of what the"
	echo "links measured after a warm-up ($(for n in $NODES; do printf '%s nodes: %s µs; ' "$n" "$(link_alpha "$n")"; done | sed 's/; $//'));"
	echo "in the tables: [predicted ms, deviation of the measured time]. redtc.csv also has the prediction with the"
	echo "job's own α and β (predicted_us): as their nodes' links measured them when the job started (the mean of the"
	echo "links' minima, the inputs of the automatic choice): α $(job_range 10) µs, β $(job_range 11) ns/byte over"
	echo "the jobs (see \"The links' cost as the daemons measured it\" below)."
	for n in $NODES; do
		for op in $OPS; do
			ss=$(strats "$op")
			echo
			echo "**$n nodes, $(opname "$op")** (ms; [model ms, deviation]; MPI/x)"
			echo
			echo "| bytes |$(for s in $ss; do printf ' %s |' "$s"; done) $(mpiname "$op") |$(for s in $ss; do printf ' MPI/%s |' "$s"; done)"
			echo "|---|$(for s in $ss mpi $ss; do printf -- '---|'; done)"
			for b in $BYTES; do
				row="| $(bytes "$b") |"
				for s in $ss; do
					t=$(get "$n" "$op" "$s" "$b" 5)
					a=$(get "$n" "$op" "$s" "$b" 9)
					[ "$s" = auto ] && a=$(auto_alg "$n" "$op" "$b")
					row="$row $(ms "$t")$([ "$s" = auto ] && echo " ($a)") [$(awk -v x="$(get "$n" "$op" "$s" "$b" 11)" \
						'BEGIN { if (x == "nan") print "–"; else printf "%.3g", x / 1000 }'), $(pct "$(get "$n" "$op" "$s" "$b" 16)")] |"
				done
				row="$row $(ms "$(get "$n" "$op" mpi "$b" 5)") |"
				for s in $ss; do row="$row $(x2 "$(get "$n" "$op" "$s" "$b" 12)") |"; done
				echo "$row"
			done
		done
	done
	echo
	echo "**Orthogonal and hierarchical against single-phase** (as the paper's Figures 8–16 plot it: the improvement"
	echo "100 (1 − t / t_single), min / mean / max over the sizes from $(bytes $LINKB), medians over runs; positive: faster"
	echo "than single-phase). 9 nodes: orth's grid and hier's factorization are the same 3x3 (ferryctl plan gives them"
	echo "the same schedule shape and prediction)."
	echo
	echo "| operation |$(for n in $NODES; do printf ' %s nodes: orth | hier | MPI |' "$n"; done)"
	echo "|---|$(for n in $NODES; do printf -- '---|---|---|'; done)"
	for op in $OPS; do
		[ "$op" = rsb ] && continue
		echo "| $(opname "$op") |$(for n in $NODES; do printf ' %s | %s | %s |' "$(improvement "$n" "$op" orth single)" \
			"$(improvement "$n" "$op" hier single)" "$(improvement "$n" "$op" mpi single)"; done)"
	done
	if echo "$OPS" | grep -qx rsb; then
		echo
		echo "**reduce_scatter_block: short, long, hybrid** (the poster's crossover): the fastest at each size, measured"
		echo "(medians) and predicted (the model: the shaped rate's β, the links' median α)."
		echo
		echo "| bytes |$(for n in $NODES; do printf ' %s nodes: measured | model |' "$n"; done)"
		echo "|---|$(for n in $NODES; do printf -- '---|---|'; done)"
		for b in $BYTES; do
			row="| $(bytes "$b") |"
			for n in $NODES; do
				for col in 5 11; do
					row="$row $(for s in short long hybrid; do echo "$s $(get "$n" rsb "$s" "$b" "$col")"; done |
						awk '$2 != "nan" { if (!n++ || $2 < m) { m = $2; b = $1 } } END { print n ? b : "–" }') |"
				done
			done
			echo "$row"
		done
		echo
		for n in $NODES; do
			echo "- $n nodes, short against long: long is faster from $(crossover "$n" 5) on, measured; from $(crossover "$n" 11) on, predicted."
		done
	fi
	echo
	echo "**The automatic choice against the fastest forced algorithm** at each size (medians): what auto ran,"
	echo "and its time over the fastest forced one's (1.00: it ran the fastest, or one as fast)."
	echo
	echo "| nodes | operation |$(for b in $BYTES; do printf ' %s |' "$(bytes "$b")"; done)"
	echo "|---|---|$(for b in $BYTES; do printf -- '---|'; done)"
	for n in $NODES; do
		for op in $OPS; do
			row="| $n | $(opname "$op") |"
			for b in $BYTES; do
				best=$(for s in $(strats "$op"); do [ "$s" = auto ] || echo "$s $(get "$n" "$op" "$s" "$b" 5)"; done |
					awk '$2 != "nan" { if (!k++ || $2 < m) { m = $2; w = $1 } } END { print k ? w " " m : "– nan" }')
				a=$(auto_alg "$n" "$op" "$b")
				row="$row $a, $(x2 "$(awk -v t="$(get "$n" "$op" auto "$b" 5)" -v m="${best#* }" 'BEGIN { print (t == "nan" || m == "nan" || m <= 0) ? "nan" : t / m }')")× (${best%% *}) |"
			done
			echo "$row"
		done
	done
	echo
	echo "**Deviation of the predictions** (measured / predicted − 1, medians over runs, then min / median / max over"
	echo "the sizes from $(bytes $LINKB) and over all sizes), per operation and algorithm forced; β from the shaped rate,"
	echo "and, last column, the job's own β (what the automatic choice used). Over every forced algorithm and size from"
	echo "$(bytes $LINKB), the median of |deviation| is $(awk -v m="$LINKB" '$3 != "auto" && $3 != "mpi" && $4 >= m && $16 != "nan" { print ($16 < 0 ? -$16 : $16) }' redtc-med.txt |
		median | awk '{ printf "%.0f %%", $1 * 100 }') with the rate's β, $(awk -v m="$LINKB" '$3 != "auto" && $3 != "mpi" && $4 >= m && $15 != "nan" { print ($15 < 0 ? -$15 : $15) }' \
		redtc-med.txt | median | awk '{ printf "%.0f %%", $1 * 100 }') with the job's:"
	echo
	echo "| nodes | operation | algorithm | from $(bytes $LINKB), rate's β | all sizes, rate's β | from $(bytes $LINKB), the job's β |"
	echo "|---|---|---|---|---|---|"
	for n in $NODES; do
		for op in $OPS; do
			for s in $(strats "$op"); do
				[ "$s" = auto ] && continue
				row="| $n | $(opname "$op") | $s |"
				for spec in "$LINKB 16" "0 16" "$LINKB 15"; do
					set -- $spec
					row="$row $(awk -v n="$n" -v o="$op" -v s="$s" -v m="$1" -v c="$2" '$1 == n && $2 == o && $3 == s && $4 >= m && $c != "nan" { print $c }' \
						redtc-med.txt | spread | awk '$1 == "nan" { print "–"; next } { printf "%+.0f / %+.0f / %+.0f %%\n", $2 * 100, $1 * 100, $3 * 100 }') |"
				done
				echo "$row"
			done
		done
	done
	echo
	echo "**The links' cost as the daemons measured it** (\`ferryctl stats\`, every link of every node: min / median /"
	echo "max), after the warm-up and at the end of the cluster's runs, against the shaped rate's $RATE_BETA ns/byte:"
	echo
	for n in $NODES; do
		for f in "redtc-links-$n-start.txt:after the warm-up" "redtc-links-$n.txt:at the end"; do
			[ -f "${f%%:*}" ] || continue
			echo "- $n nodes, ${f#*:}: α $(awk '{ for (i = 1; i < NF; i++) if ($i == "alpha_us") print $(i + 1) }' "${f%%:*}" |
				spread | awk '{ printf "%s / %s / %s µs", $2, $1, $3 }'), β $(awk '{ for (i = 1; i < NF; i++) if ($i == "beta_ns_per_byte") print $(i + 1) }' \
				"${f%%:*}" | spread | awk '{ printf "%s / %s / %s ns/byte", $2, $1, $3 }')"
		done
	done
} >redtc.md
