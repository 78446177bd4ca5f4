#!/bin/bash
# tests/bench/report.sh OUT - turns the CSVs of a benchmark run (whichever
# families ran: tests/bench/run.sh) into plots (gnuplot, PNG) and summary.md.
# Medians over runs, with min and max; ratios are computed run by run (run r
# of ferry against run r of the comparator, in the same layout) and then
# summarised the same way.  Every figure says its conditions: the core
# layout (pinned or shared, lib.sh), frame integrity, burst or sustained.
set -u
OUT=$1
RDIR=$(cd "$(dirname "$0")" && pwd)
cd "$OUT" || exit 1
# apps.md again, now that families.csv has the apps family's conditions
[ -f apps.csv ] && bash "$RDIR/apps_report.sh" .

# stats FILE FILTER-AWK VALUE-COLUMN: "median min max n" of the matching rows.
stats() {
	[ -f "$1" ] || { echo "nan nan nan 0"; return; }
	awk -F, -v col="$3" "NR > 1 && ($2) && \$col != \"nan\" && \$col != \"\" { print \$col }" "$1" | sort -g | awk '
		{ v[NR] = $1 } END {
			if (NR == 0) { print "nan nan nan 0"; exit }
			m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
			print m, v[1], v[NR], NR }'
}
med() { stats "$@" | cut -d' ' -f1; }
fmt() { awk -v x="$1" -v d="${2:-2}" 'BEGIN { if (x == "nan" || x == "") print "n/a"; else printf "%.*f", d, x }'; }
mill() { awk -v x="$1" 'BEGIN { if (x == "nan" || x == "") print "n/a"; else printf "%.2f M", x / 1e6 }'; }
range() {       # range "median min max n" FORMATTER [DIGITS [UNIT]]: "m[UNIT] [min..max]"
	set -- $1 "$2" "${3:-2}" "${4:-}"
	echo "$($5 "$1" "$6")$7 [$($5 "$2" "$6")..$($5 "$3" "$6")]"
}
verdict() { awk -v x="$1" -v op="$2" -v t="$3" 'BEGIN {
	if (x == "nan" || x == "") { print "n/a"; exit }
	print ((op == ">=" && x >= t) || (op == "<=" && x <= t)) ? "met" : "not met" }'; }

# ratio_runs FILE KEYCOLS VALCOL FILTER-A FILTER-B: per run (rows matched on
# KEYCOLS, e.g. "5,6,7,8,15"), A's value over B's; "median min max n".
ratio_runs() {
	[ -f "$1" ] || { echo "nan nan nan 0"; return; }
	awk -F, -v keys="$2" -v col="$3" "
		function key(   k, i, n, c) { n = split(keys, c, \",\"); k = \"\"; for (i = 1; i <= n; i++) k = k \",\" \$c[i]; return k }
		NR > 1 && ($4) { a[key()] = \$col }
		NR > 1 && ($5) { b[key()] = \$col }
		END { for (k in a) if ((k in b) && a[k] != \"nan\" && b[k] != \"nan\" && b[k] > 0) print a[k] / b[k] }" "$1" |
		sort -g | awk '{ v[NR] = $1 } END {
			if (NR == 0) { print "nan nan nan 0"; exit }
			m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
			print m, v[1], v[NR], NR }'
}
# a2a_ratio VARIANT-A VARIANT-B K LAYOUT: items/s of A over B, K sweep.
a2a_ratio() {
	ratio_runs alltoall.csv 5,6,7,8,15 11 \
		"\$1 == \"K\" && \$2 == \"$1\" && \$7 == $3 && \$15 == \"$4\"" \
		"\$1 == \"K\" && \$2 == \"$2\" && \$7 == $3 && \$15 == \"$4\""
}
xfmt() { awk -v x="$1" -v d="${2:-2}" 'BEGIN { if (x == "nan" || x == "") print "n/a"; else printf "%.*f×", d, x }'; }

LAYOUTS="pinned shared"
INTEG="integrity off (no cluster key)"
kind() { if [ "$1" -gt 1024 ]; then echo sustained; else echo burst; fi; }

# Best ferry grid per K and layout (by median), for the targets.
best_variant() {   # best_variant K LAYOUT
	local best="" bm=0 v s
	for v in ferry-d8 ferry-g42 ferry-g222 ferry-batch-d8 ferry-batch-g222; do
		s=$(med alltoall.csv "\$1 == \"K\" && \$2 == \"$v\" && \$7 == $1 && \$15 == \"$2\"" 11)
		if [ "$s" != nan ] && awk -v a="$s" -v b="$bm" 'BEGIN { exit !(a > b) }'; then best=$v; bm=$s; fi
	done
	echo "${best:-ferry-g222}"
}

# --- data files and plots ---
KS="" VARIANTS=""
if [ -f alltoall.csv ]; then
	KS=$(awk -F, 'NR > 1 && $1 == "K" { print $7 }' alltoall.csv | sort -un)
	VARIANTS=$(awk -F, 'NR > 1 && $1 == "K" { print $2 }' alltoall.csv | awk '!seen[$0]++')
	MS=$(awk -F, 'NR > 1 && $1 == "m" { print $6 }' alltoall.csv | sort -un)
else
	MS=""
fi
plot_lines() {  # plot_lines PREFIX USING [FILTER-CASE]: the plot command over plot-PREFIX-*.dat
	local first=1 f v
	printf 'plot '
	for f in plot-"$1"-*.dat; do
		[ -s "$f" ] || continue
		v=${f#plot-"$1"-}; v=${v%.dat}
		# shellcheck disable=SC2254 # (a pattern: ferry-*)
		case $v in ${3:-*}) ;; *) continue ;; esac
		[ $first = 1 ] || printf ', '
		first=0
		printf '"%s" using %s with %s title "%s"' "$f" "$2" "${4:-yerrorlines}" "$v"
	done
	echo
}
rm -f plot-*.dat
for lay in $LAYOUTS; do
	for v in $VARIANTS; do
		for K in $KS; do
			f="\$1 == \"K\" && \$2 == \"$v\" && \$7 == $K && \$15 == \"$lay\""
			s=$(stats alltoall.csv "$f" 11)
			[ "${s##* }" = 0 ] && continue
			echo "$K $s $(med alltoall.csv "$f" 13)"
		done >"plot-K$lay-$v.dat"
	done
done
for v in $(awk -F, 'NR > 1 && $1 == "m" { print $2 }' alltoall.csv 2>/dev/null | awk '!seen[$0]++'); do
	for M in $MS; do echo "$M $(stats alltoall.csv "\$1 == \"m\" && \$2 == \"$v\" && \$6 == $M" 12)"; done >"plot-m-$v.dat"
done
# The collectives (coll.sh): microseconds per operation, "median min max n".
CBLOCKS="" CVARIANTS="" MBLOCKS="" MDELTAS="" MVARIANTS="" OBLOCKS="" OVARIANTS=""
if [ -f coll.csv ]; then
	CBLOCKS=$(awk -F, 'NR > 1 && $1 == "alltoall" { print $8 }' coll.csv | sort -un)
	CVARIANTS=$(awk -F, 'NR > 1 && $1 == "alltoall" { print $2 }' coll.csv | awk '!seen[$0]++')
	MBLOCKS=$(awk -F, 'NR > 1 && $1 == "many" { print $8 }' coll.csv | sort -un)
	MDELTAS=$(awk -F, 'NR > 1 && $1 == "many" { print $9 }' coll.csv | sort -un)
	MVARIANTS=$(awk -F, 'NR > 1 && $1 == "many" { print $2 }' coll.csv | awk '!seen[$0]++')
fi
if [ -f overlap.csv ]; then
	OBLOCKS=$(awk -F, 'NR > 1 { print $6 }' overlap.csv | sort -un)
	OVARIANTS=$(awk -F, 'NR > 1 { print $1 }' overlap.csv | awk '!seen[$0]++')
fi
cstats() {      # cstats PART VARIANT BLOCK DELTA LAYOUT
	stats coll.csv "\$1 == \"$1\" && \$2 == \"$2\" && \$8 == $3 && \$9 == $4 && \$14 == \"$5\"" 12 |
		awk '{ for (i = 1; i <= 3; i++) $i = ($i == "nan") ? "nan" : $i * 1e6; print }'
}
ostats() { stats overlap.csv "\$1 == \"$1\" && \$6 == $2 && \$16 == \"$3\"" "$4"; }   # VARIANT BLOCK LAYOUT COLUMN
bytes() { awk -v b="$1" 'BEGIN { if (b >= 1048576 && b % 1048576 == 0) printf "%d MiB", b / 1048576;
	else if (b >= 1024 && b % 1024 == 0) printf "%d KiB", b / 1024; else printf "%d B", b }'; }
# cratio PART BLOCK DELTA LAYOUT VARIANT-A VARIANT-B: A's time over B's, run by run.
cratio() {
	ratio_runs coll.csv 1,8,9,10,14 12 "\$1 == \"$1\" && \$2 == \"$5\" && \$8 == $2 && \$9 == $3 && \$14 == \"$4\"" \
		"\$1 == \"$1\" && \$2 == \"$6\" && \$8 == $2 && \$9 == $3 && \$14 == \"$4\""
}
for lay in $LAYOUTS; do
	for v in $CVARIANTS; do
		for b in $CBLOCKS; do
			st=$(cstats alltoall "$v" "$b" 0 "$lay")
			[ "${st##* }" = 0 ] || echo "$b $st"
		done >"plot-ca2a$lay-$v.dat"
	done
	for b in $MBLOCKS; do
		for v in $MVARIANTS; do
			for d in $MDELTAS; do
				st=$(cstats many "$v" "$b" "$d" "$lay")
				[ "${st##* }" = 0 ] || echo "$d $st"
			done >"plot-cmany$lay$b-$v.dat"
		done
	done
	if [ -n "$OBLOCKS" ]; then
		for b in $OBLOCKS; do
			printf '"%s"' "$(bytes "$b")"
			for v in $OVARIANTS; do printf ' %s' "$(ostats "$v" "$b" "$lay" 15 | cut -d' ' -f1-3)"; done
			echo
		done >"plot-overlap-$lay.dat"
	fi
done
if command -v gnuplot >/dev/null; then
	{
		echo 'set terminal pngcairo size 1400,600 font ",10"'
		if [ -n "$KS" ]; then
			echo 'set output "alltoall-K.png"'
			echo 'set multiplot layout 1,2 title "Fine-grained all-to-all, 16-byte items, 8 nodes x 2 processes, integrity off: items delivered per second (median; bars: min..max). K <= 1024: burst; K = 16384: sustained"'
			echo 'set xlabel "items per destination (K)"; set ylabel "items delivered per second"'
			echo 'set logscale xy; set key bottom right font ",9"; set grid; set yrange [1e4:3e8]'
			for lay in $LAYOUTS; do
				case $lay in
				pinned) echo 'set title "pinned: every ferryd on CPU 1, every application process (ferry and MPI) on CPU 0"' ;;
				shared) echo 'set title "shared: everything on both cores"' ;;
				esac
				plot_lines "K$lay" 1:2:3:4
			done
			echo 'unset multiplot'
			echo 'set terminal pngcairo size 900,560 font ",10"'
			echo 'set output "aggregation-K.png"'
			echo 'set title "Aggregation: mean items per network frame (median), 8 nodes x 2 processes, 16-byte items, shared"'
			echo 'set ylabel "items per frame"; unset logscale y; set logscale x; set autoscale y; set key top left'
			plot_lines Kshared 1:6 'ferry-*' linespoints
		fi
		echo 'set terminal pngcairo size 900,560 font ",10"'
		if [ -n "$MS" ]; then
			echo 'set output "alltoall-m.png"'
			echo 'set title "Fine-grained all-to-all, K = 256, 8 nodes x 2 processes, shared, integrity off: payload bytes per second"'
			echo 'set xlabel "item size (bytes)"; set ylabel "payload bytes per second"; set logscale xy; set autoscale y'
			plot_lines m 1:2:3:4
		fi
		if [ -f latency.csv ]; then
			awk -F, 'NR > 1 { print $1 }' latency.csv | awk '!seen[$0]++' | while read -r v; do
				echo "\"$v\" $(stats latency.csv "\$1 == \"$v\" && \$4 == \"pinned\"" 3 | cut -d' ' -f1-3) $(stats latency.csv "\$1 == \"$v\" && \$4 == \"shared\"" 3 | cut -d' ' -f1-3)"
			done >plot-latency.dat
			echo 'set output "latency.png"'
			echo 'set title "8-byte ping-pong, one-way latency, integrity off (median; bars: min..max)"'
			echo 'unset logscale; set ylabel "microseconds"; set xlabel ""; set key outside below; set grid y; set offsets 0, 0, graph 0.1, 0'
			echo 'set style data histograms; set style histogram errorbars gap 1 lw 1; set style fill solid 0.6; set xtics rotate by -20; set yrange [0:*]'
			echo 'plot "plot-latency.dat" using 2:3:4:xtic(1) title "pinned (ferryd on CPU 1, processes on CPU 0)", "" using 5:6:7 title "shared (both cores)"'
			echo 'set style data points; set xtics norotate; set offsets 0, 0, 0, 0'
		fi
		if [ -f bandwidth.csv ]; then
			for lay in $LAYOUTS; do
				for S in $(awk -F, 'NR > 1 && $1 == "ferry-two-nodes" { print $2 }' bandwidth.csv | sort -un); do
					echo "$S $(stats bandwidth.csv "\$1 == \"ferry-two-nodes\" && \$2 == $S && \$5 == \"$lay\"" 4)"
				done >"plot-bw-$lay.dat"
			done
			echo 'set output "bandwidth.png"'
			echo 'set title "Large items between two nodes, integrity off (median; bars: min..max)"'
			echo 'unset logscale; set logscale x; set xlabel "item size (bytes)"; set ylabel "GB/s"; set key outside below; set yrange [0:*]'
			echo "rawp = $(med bandwidth.csv '$1 == "raw-tcp-loopback" && $5 == "pinned"' 4)"
			echo "raws = $(med bandwidth.csv '$1 == "raw-tcp-loopback" && $5 == "shared"' 4)"
			echo 'plot "plot-bw-pinned.dat" using 1:2:3:4 with yerrorlines title "ferry, pinned", "plot-bw-shared.dat" using 1:2:3:4 with yerrorlines title "ferry, shared", rawp with lines dt 2 title "raw TCP stream, pinned (both processes on CPU 0)", raws with lines dt 3 title "raw TCP stream, shared"'
		fi
		if [ -n "$CBLOCKS" ]; then
			echo 'set terminal pngcairo size 1400,600 font ",10" noenhanced'
			echo 'set output "coll-alltoall.png"'
			echo 'set multiplot layout 1,2 title "All-to-all, 8 nodes x 2 ranks, integrity off: time per operation (median; bars: min..max)\nferry-S: strategy S forced (auto: the automatic choice), ferry_alloc buffers; -staged: ordinary buffers; mpi-tcp: MPI_Alltoall over TCP, mpi-shm: over shared memory"'
			echo 'unset logscale; set logscale xy; set style data points; set offsets 0, 0, 0, 0; set xtics norotate'
			echo 'set xlabel "block (bytes per pair of ranks)"; set ylabel "microseconds per all-to-all"; set key top left font ",9"; set grid; set xrange [*:*]; set yrange [*:*]'
			for lay in $LAYOUTS; do
				case $lay in
				pinned) echo 'set title "pinned: every ferryd on CPU 1, every application process (ferry and MPI) on CPU 0"' ;;
				shared) echo 'set title "shared: everything on both cores"' ;;
				esac
				plot_lines "ca2a$lay" 1:2:3:4
			done
			echo 'unset multiplot'
		fi
		if [ -n "$MBLOCKS" ]; then
			echo "set terminal pngcairo size 1400,$((330 * $(echo "$LAYOUTS" | wc -w) + 60)) font \",10\" noenhanced"
			echo 'set output "coll-many.png"'
			echo "set multiplot layout $(echo "$LAYOUTS" | wc -w),$(echo "$MBLOCKS" | wc -w) title \"Many-to-many (rank i to i+1 .. i+delta), 8 nodes x 2 ranks, integrity off: ferry_alltoallv (ferry_alloc buffers) and MPI_Alltoallv (TCP), time per operation (median; bars: min..max)\""
			echo 'unset logscale; set logscale x 2; set xlabel "delta (destinations per rank)"; set ylabel "microseconds per operation"; set key top left font ",8"; set grid; set yrange [0:*]'
			for lay in $LAYOUTS; do
				for b in $MBLOCKS; do
					echo "set title \"$lay, $b-byte blocks\""
					plot_lines "cmany$lay$b" 1:2:3:4
				done
			done
			echo 'unset multiplot'
		fi
		if [ -n "$OBLOCKS" ]; then
			echo 'set terminal pngcairo size 1400,560 font ",10" noenhanced'
			echo 'set output "coll-overlap.png"'
			echo 'set multiplot layout 1,2 title "Overlap of the all-to-all with computation (OSU method: 100 (1 - (t_total - t_compute) / t_comm), raw), 4 nodes x 1 rank, integrity off (median; bars: min..max)"'
			echo 'unset logscale; set xlabel "block (bytes per pair of ranks)"; set ylabel "overlap (%)"; set key bottom left font ",9"; set grid y; set xrange [*:*]; set yrange [*:110]'
			echo 'set style data histograms; set style histogram errorbars gap 1 lw 1; set style fill solid 0.6'
			for lay in $LAYOUTS; do
				case $lay in
				pinned) echo 'set title "pinned: the 4 ranks on CPU 0, every ferryd on CPU 1"' ;;
				shared) echo 'set title "shared: everything on both cores"' ;;
				esac
				i=2 line=""
				for v in $OVARIANTS; do
					case $v in
					ferry-alloc) t="ferry_ialltoall, ferry_alloc buffers" ;;
					ferry-staged) t="ferry_ialltoall, ordinary (staged) buffers" ;;
					mpi-tcp) t="MPI_Ialltoall (TCP)" ;;
					*) t=$v ;;
					esac
					if [ $i = 2 ]; then line="\"plot-overlap-$lay.dat\" using 2:3:4:xtic(1) title \"$t\""
					else line="$line, \"\" using $i:$((i + 1)):$((i + 2)) title \"$t\""; fi
					i=$((i + 3))
				done
				echo "plot $line, 90 with lines dt 2 lc rgb \"black\" title \"90 %\""
			done
			echo 'unset multiplot; set style data points'
		fi
	} >plots.gp
	sed -i 's/^rawp = nan$/rawp = NaN/; s/^raws = nan$/raws = NaN/' plots.gp
	gnuplot plots.gp 2>gnuplot.log || echo "# gnuplot failed: see $OUT/gnuplot.log" >&2
fi

# --- summary ---
HEAD_V=ferry-g222       # the headline grid (2x2x2), as the issue asks
{
	echo "# ferry benchmarks, $(date -u '+%Y-%m-%d %H:%M UTC')"
	echo
	echo "Machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), Linux $(uname -r)."
	echo "Local clusters: one ferryd per simulated node on loopback TCP; Open MPI $(mpirun --version 2>/dev/null | head -1 | awk '{ print $NF }') with the same number of processes on the same machine."
	echo
	echo "**Conditions** (every figure below says which):"
	echo
	echo "- *pinned*: every ferryd on CPU 1 (\`taskset -a -p 2 PID\` once started), every application process on"
	echo "  CPU 0 (\`taskset -c 0\`): ferry's clients and the comparators' processes alike (Open MPI ranks, raw TCP"
	echo "  and raw ring processes; their second core is left to the kernel). Spinning processes that share"
	echo "  CPU 0 yield while they spin (libferry, raw_ring, raw_tcp; Open MPI with \`mpi_yield_when_idle\`)."
	echo "- *shared*: every process may run on both cores."
	echo "- *integrity off*: no cluster key, so frames between daemons carry no tag; the security family"
	echo "  measures what integrity and encryption cost."
	echo "- *burst*: K ≤ 1024 items per destination; *sustained*: K = 16384 (16 processes: 3.9 M items)."
	echo "- Medians of the runs, [min..max]; ratios taken run by run, in the same layout."
	if [ -f tcp_congestion.txt ]; then
		read -r _ LINKCC _ SYSCC <tcp_congestion.txt
		echo "- *TCP*: ferry's links ran congestion control $LINKCC (\`transport.tcp_congestion = \"$LINKCC\"\` in the"
		echo "  benchmark's configuration; unset, ferryd keeps the system's), and so did the raw TCP comparators"
		echo "  (RAW_TCP_CC); the system's default is $SYSCC, which Open MPI's sockets run (its hand-packed all-to-all"
		echo "  took the same time under cubic and bbr when this was checked, 2026-11-26)."
	fi
	echo
	if [ -f families.csv ]; then
		echo "## Families"
		echo
		echo "| family | make target | mode | wall time | budget (full mode) | status | CPU time: the family's processes, other processes | load average before, after |"
		echo "|---|---|---|---|---|---|---|---|"
		awk -F, 'NR > 1 { b = ($2 == "full") ? ($3 <= 600 ? "within 10 min" : "**over 10 min: shrink it**") : "(quick)";
			printf "| %s | `make bench-%s` | %s | %d min %02d s | %s | %s | %s s, %s s | %s, %s |\n", $1, $1, $2, $3 / 60, $3 % 60, b, $4, $8, $9, $6, $7 }' families.csv
		echo
		echo "(CPU time of other processes: what other work on the machine took from the $(nproc) cores × wall time"
		echo "while the family ran; from /proc/stat, less the family's own.)"
		echo
	fi

	echo "## Headline figures"
	echo
	echo "| figure | conditions | ferry | comparator (same run, same layout) | ferry / comparator |"
	echo "|---|---|---|---|---|"
	if [ -f alltoall.csv ]; then
		for K in $(echo "$KS" | awk '$1 >= 1024'); do
			for lay in $LAYOUTS; do
			for HV in $HEAD_V ferry-batch-${HEAD_V#ferry-}; do
				f=$(stats alltoall.csv "\$1 == \"K\" && \$2 == \"$HV\" && \$7 == $K && \$15 == \"$lay\"" 11)
				[ "${f##* }" = 0 ] && continue
				hn=""
				[ "$HV" = "$HEAD_V" ] || hn=", FERRY_BATCH"
				for c in mpi-isend mpi-alltoallv-1024; do
					cs=$(stats alltoall.csv "\$1 == \"K\" && \$2 == \"$c\" && \$7 == $K && \$15 == \"$lay\"" 11)
					[ "${cs##* }" = 0 ] && continue
					case $c in
					mpi-isend) cn="per-item MPI_Isend (TCP)" ;;
					*) cn="hand-packed MPI_Alltoallv, 1024 items per destination per round (TCP)" ;;
					esac
					echo "| all-to-all, 16 B items, 8 nodes × 2, 2×2×2 grid, K=$K (items/s) | $lay, $INTEG, $(kind "$K")$hn | $(range "$f" mill) | $cn: $(range "$cs" mill) | $(range "$(a2a_ratio "$HV" "$c" "$K" "$lay")" fmt 2 ×) |"
				done
			done
			done
		done
	fi
	if [ -f gups.csv ]; then
		for lay in $LAYOUTS; do
			for gv in ferry-d4 ferry-batch-d4; do
			f=$(stats gups.csv "\$1 == \"$gv\" && \$9 == \"$lay\"" 8)
			[ "${f##* }" = 0 ] && continue
			c=$(stats gups.csv "\$1 == \"mpi-alltoallv-1024\" && \$9 == \"$lay\"" 8)
			r=$(ratio_runs gups.csv 6,9 8 "\$1 == \"$gv\" && \$9 == \"$lay\"" "\$1 == \"mpi-alltoallv-1024\" && \$9 == \"$lay\"")
			n=$(awk -F, 'NR == 2 { print $4 }' gups.csv)
			echo "| RandomAccess-style updates (fb_gups), 4 nodes × 2, 2^$n words per rank, 4× the table (GUPS) | $lay, $INTEG, sustained$([ $gv = ferry-d4 ] || echo ", FERRY_BATCH") | $(range "$f" fmt 4) | updates bucketed by hand (about 1024 per destination per round), MPI_Alltoallv (TCP): $(range "$c" fmt 4) | $(range "$r" fmt 2 ×) |"
			done
		done
	fi
	if [ -f latency.csv ]; then
		for lay in $LAYOUTS; do
			for p in "ferry-same-node:raw-shm-ring:both ranks on one node:raw shared-memory ring ping-pong" \
				"ferry-two-node:raw-tcp-loopback:two nodes:raw TCP loopback ping-pong"; do
				IFS=: read -r a b what cn <<<"$p"
				f=$(stats latency.csv "\$1 == \"$a\" && \$4 == \"$lay\"" 3)
				[ "${f##* }" = 0 ] && continue
				c=$(stats latency.csv "\$1 == \"$b\" && \$4 == \"$lay\"" 3)
				r=$(ratio_runs latency.csv 2,4 3 "\$1 == \"$a\" && \$4 == \"$lay\"" "\$1 == \"$b\" && \$4 == \"$lay\"")
				echo "| ping-pong, 8-byte item, one way, $what (µs) | $lay, $INTEG | $(range "$f" fmt 2) | $cn: $(range "$c" fmt 2) | $(range "$r" fmt 1 ×) |"
			done
		done
	fi
	# The fast path's medians; where no run of a role took it, all runs'
	# (and the figure says so).
	hc() { awk -F, -v r="$1" '$1 == r { print ($2 == "nan" || $2 == "") ? $3 "*" : $2 }' "$2"; }
	for hcb in "" _batch; do
		[ -f "hop_cost$hcb.csv" ] && [ "$(wc -l <"hop_cost$hcb.csv")" -gt 1 ] || continue
		src=$(hc source "hop_cost$hcb.csv") dst=$(hc destination "hop_cost$hcb.csv")
		fwd=$(hc forward "hop_cost$hcb.csv")
		x=$(awk -v a="${src%\*}" -v b="${dst%\*}" 'BEGIN { print (a == "" || b == "") ? "nan" : a + b }')
		if [ -z "$hcb" ]; then sd=$x; else sdb=$x; fi
		slow=""
		case "$src$dst" in *"*"*) slow=" (*: no run took the fast path, every run had items waiting in daemon memory: the median of all runs)" ;; esac
		echo "| daemon instructions per 16-byte item per hop, source + destination (callgrind) | TCP loopback, $INTEG, one daemon under valgrind, 50 000 then 250 000 items, runs on the fast path$([ -n "$hcb" ] && echo ", FERRY_BATCH") | $(fmt "$x" 0) ($src + $dst; an intermediate hop: $fwd)$slow | goal: ≤ 120 | $(awk -v x="$x" 'BEGIN { if (x == "nan") print "n/a"; else printf "%.1f× the goal", x / 120 }') |"
	done
	echo

	echo "## Targets"
	echo
	echo "| figure | conditions | target | measured | verdict |"
	echo "|---|---|---|---|---|"
	if [ -f alltoall.csv ]; then
		for K in $(echo "$KS" | awk '$1 >= 256'); do
			for lay in $LAYOUTS; do
				bv=$(best_variant "$K" "$lay")
				for c in mpi-isend:10:"per-item MPI_Isend (TCP)" mpi-alltoallv-1024:1:"hand-packed MPI_Alltoallv R=1024 (TCP)"; do
					IFS=: read -r cv t cn <<<"$c"
					r=$(a2a_ratio "$bv" "$cv" "$K" "$lay")
					[ "${r##* }" = 0 ] && continue
					echo "| all-to-all, 16 B, 8 nodes, K=$K: ferry ($bv, the best grid) / $cn | $lay, $INTEG, $(kind "$K") | ≥ $t× | $(range "$r" fmt 2 ×) | $(verdict "${r%% *}" ">=" "$t") |"
				done
			done
		done
	fi
	if [ -f rate.csv ]; then
		for lay in $LAYOUTS; do
			for sv in ferry_send ferry_send-batch ferry_send-direct ferry_send-direct-batch; do
			for w in "ns:wall time" "cpu-ns:the sending thread's CPU time"; do
			s=$(stats rate.csv "\$1 == \"$sv-${w%%:*}-per-item\" && \$5 == \"$lay\"" 3)
			[ "${s##* }" = 0 ] && continue
			case $sv in *direct*) to="into the direct ring of a rank on the same node" ;; *) to="to ferryd" ;; esac
			echo "| ferry_send of a 16-byte item $to (${w#*:}) | $lay$(case $sv in *batch) echo ", FERRY_BATCH" ;; esac) | ≤ 15 ns | $(range "$s" fmt 1) ns | $(verdict "${s%% *}" "<=" 15) |"
			done
			done
		done
		for lay in $LAYOUTS; do
			s=$(stats rate.csv "\$1 == \"daemon-cpu-ns-per-item-per-hop\" && \$5 == \"$lay\"" 3)
			[ "${s##* }" = 0 ] && continue
			ss=$(med rate.csv "\$1 == \"daemon-cpu-ns-per-item-send-side\" && \$5 == \"$lay\"" 3)
			rs=$(med rate.csv "\$1 == \"daemon-cpu-ns-per-item-receive-side\" && \$5 == \"$lay\"" 3)
			echo "| daemon CPU time per item per hop (sending side + receiving side, as an intermediate node does both; schedstat) | $lay, $INTEG, one stream of 16-byte items | ≤ 50 ns | $(range "$s" fmt 0) ns ($(fmt "$ss" 0) + $(fmt "$rs" 0)) | $(verdict "${s%% *}" "<=" 50) |"
		done
	fi
	if [ -n "${sd:-}" ]; then
		echo "| daemon instructions per item per hop, source + destination (callgrind) | TCP loopback, $INTEG | ≤ 120 | $(fmt "$sd" 0) | $(verdict "$sd" "<=" 120) |"
	fi
	if [ -n "${sdb:-}" ]; then
		echo "| daemon instructions per item per hop, source + destination (callgrind) | TCP loopback, $INTEG, FERRY_BATCH | ≤ 120 | $(fmt "$sdb" 0) | $(verdict "$sdb" "<=" 120) |"
	fi
	if [ -f latency.csv ]; then
		for lay in $LAYOUTS; do
			r=$(ratio_runs latency.csv 2,4 3 "\$1 == \"ferry-same-node\" && \$4 == \"$lay\"" "\$1 == \"raw-shm-ring\" && \$4 == \"$lay\"")
			[ "${r##* }" = 0 ] && continue
			echo "| same-node ping-pong through the daemon / raw shared-memory ring ping-pong | $lay, $INTEG | ≤ 3× | $(range "$r" fmt 1 ×) | $(verdict "${r%% *}" "<=" 3) |"
		done
		for lay in $LAYOUTS; do
			two=$(med latency.csv "\$1 == \"ferry-two-node\" && \$4 == \"$lay\"" 3)
			tcp=$(med latency.csv "\$1 == \"raw-tcp-loopback\" && \$4 == \"$lay\"" 3)
			[ "$two" = nan ] && continue
			d=$(awk -v a="$two" -v b="$tcp" 'BEGIN { print (a == "nan" || b == "nan") ? "nan" : a - b }')
			echo "| two-node ping-pong − raw TCP loopback ping-pong | $lay, $INTEG | ≤ 5 µs | $(fmt "$d") µs ($(fmt "$two") µs vs $(fmt "$tcp") µs) | $(verdict "$d" "<=" 5) |"
		done
	fi
	if [ -f bandwidth.csv ]; then
		for lay in $LAYOUTS; do
			raw=$(med bandwidth.csv "\$1 == \"raw-tcp-loopback\" && \$5 == \"$lay\"" 4)
			bestbw=0 bests=0
			for S in $(awk -F, 'NR > 1 && $1 == "ferry-two-nodes" { print $2 }' bandwidth.csv | sort -un); do
				g=$(med bandwidth.csv "\$1 == \"ferry-two-nodes\" && \$2 == $S && \$5 == \"$lay\"" 4)
				if awk -v a="$g" -v b="$bestbw" 'BEGIN { exit !(a != "nan" && a > b) }'; then bestbw=$g; bests=$S; fi
			done
			[ "$bests" = 0 ] && continue
			r=$(awk -v a="$bestbw" -v b="$raw" 'BEGIN { print (b == "nan" || b == 0) ? "nan" : a / b }')
			echo "| large items between two nodes / raw TCP loopback streaming (the links' congestion control) | $lay, $INTEG | ≥ 80 % | $(awk -v x="$r" 'BEGIN { if (x == "nan") print "n/a"; else printf "%.0f %%", 100 * x }') ($(fmt "$bestbw") GB/s with $bests-byte items vs $(fmt "$raw") GB/s) | $(verdict "$r" ">=" 0.8) |"
		done
	fi

	# The collectives' targets (issue 12): the all-to-all of small blocks
	# against MPI_Alltoall in the same run, and the overlap.
	if [ -n "$CBLOCKS" ]; then
		for lay in $LAYOUTS; do
			for fv in ferry-auto ferry-auto-staged; do
				m="" worst=""
				for b in $(echo "$CBLOCKS" | awk '$1 >= 8 && $1 <= 256'); do
					r=$(cratio alltoall "$b" 0 "$lay" mpi-tcp "$fv")
					[ "${r##* }" = 0 ] && continue
					m="$m${m:+; }$b B: $(range "$r" fmt 2 ×)"
					worst=$(awk -v a="$worst" -v b="${r%% *}" 'BEGIN { print (a == "" || b == "nan" || a == "nan" || b + 0 < a + 0) ? b : a }')
				done
				[ -n "$m" ] || continue
				case $fv in
				ferry-auto) bn="ferry_alloc buffers (in place, no copy)" ;;
				*) bn="ordinary buffers (staged: copied into shared memory and back)" ;;
				esac
				echo "| all-to-all of 8- to 256-byte blocks, 8 nodes × 2 ranks: MPI_Alltoall time (TCP, 16 processes) / ferry_alltoall time (automatic choice), each block size | $lay, $bn, $INTEG, same run | ≥ 2× at each size | $m | $(verdict "$worst" ">=" 2) |"
			done
		done
	fi
	if [ -n "$OBLOCKS" ]; then
		for b in $OBLOCKS; do
			fp=$(ostats ferry-alloc "$b" pinned 15) fs=$(ostats ferry-alloc "$b" shared 15)
			mp=$(ostats mpi-tcp "$b" pinned 15) ms=$(ostats mpi-tcp "$b" shared 15)
			echo "| overlap of the all-to-all with computation, $(bytes "$b") blocks, 4 nodes × 1 rank (OSU's method, raw; ferry_ialltoall vs MPI_Ialltoall) | ferry_alloc buffers, $INTEG; pinned: the 4 ranks on CPU 0, the daemons on CPU 1 | ≥ 90 % pinned (the daemons have their own core) | ferry: pinned **$(range "$fp" fmt 0 " %")**, shared $(range "$fs" fmt 0 " %"); MPI_Ialltoall (TCP): pinned $(range "$mp" fmt 0 " %"), shared $(range "$ms" fmt 0 " %") | $(verdict "${fp%% *}" ">=" 90) |"
		done
	fi

	if [ -f alltoall.csv ]; then
		echo
		echo "## Fine-grained all-to-all, 16-byte items, 8 nodes × 2 processes (items/s)"
		echo
		echo "Integrity off. K=16384 is the sustained run (3.9 M items), the others bursts. ferry-d8/g42/g222"
		echo "route over 1-D (direct), 4×2 and 2×2×2 virtual grids; noagg has aggregation off; mpi-isend sends"
		echo "each item with \`MPI_Isend\`; mpi-alltoallv-R packs R items per destination by hand and calls"
		echo "\`MPI_Alltoallv\` each round (TCP); mpi-shm over Open MPI's shared memory, the single-host bound."
		echo
		printf '| variant | conditions |'; for K in $KS; do printf ' K=%s |' "$K"; done; echo
		printf '|---|---|'; for K in $KS; do printf '%s' '---|'; done; echo
		for lay in $LAYOUTS; do
			for v in $VARIANTS; do
				[ -s "plot-K$lay-$v.dat" ] || continue
				printf '| %s | %s |' "$v" "$lay"
				for K in $KS; do
					s=$(stats alltoall.csv "\$1 == \"K\" && \$2 == \"$v\" && \$7 == $K && \$15 == \"$lay\"" 11)
					if [ "${s##* }" = 0 ]; then printf ' – |'; else printf ' %s |' "$(range "$s" mill)"; fi
				done
				echo
			done
		done
		echo
		echo "Mean items per network frame (ferry, shared):"
		echo
		printf '| variant |'; for K in $KS; do printf ' K=%s |' "$K"; done; echo
		printf '|---|'; for K in $KS; do printf '%s' '---|'; done; echo
		for v in $VARIANTS; do
			case $v in ferry-*) ;; *) continue ;; esac
			printf '| %s |' "$v"
			for K in $KS; do
				printf ' %s |' "$(fmt "$(med alltoall.csv "\$1 == \"K\" && \$2 == \"$v\" && \$7 == $K && \$15 == \"shared\"" 13)" 1)"
			done
			echo
		done
	fi
	if [ -n "$MS" ]; then
		echo
		echo "## Item size sweep, K = 256, 8 nodes × 2 processes (items/s; shared, integrity off, burst)"
		echo
		printf '| variant |'; for M in $MS; do printf ' %s B |' "$M"; done; echo
		printf '|---|'; for M in $MS; do printf '%s' '---|'; done; echo
		for v in $(awk -F, 'NR > 1 && $1 == "m" { print $2 }' alltoall.csv | awk '!seen[$0]++'); do
			printf '| %s |' "$v"
			for M in $MS; do
				printf ' %s |' "$(mill "$(med alltoall.csv "\$1 == \"m\" && \$2 == \"$v\" && \$6 == $M" 11)")"
			done
			echo
		done
		echo
		echo "## 4 nodes, 16-byte items, K = 256 (items/s; shared, integrity off, burst)"
		echo
		echo "| variant | 1 process per node | 2 processes per node |"
		echo "|---|---|---|"
		for v in $(awk -F, 'NR > 1 && $1 == "N4" { print $2 }' alltoall.csv | awk '!seen[$0]++'); do
			a=$(med alltoall.csv "\$1 == \"N4\" && \$2 == \"$v\" && \$4 == 1" 11)
			b=$(med alltoall.csv "\$1 == \"N4\" && \$2 == \"$v\" && \$4 == 2" 11)
			echo "| $v | $(mill "$a") | $(mill "$b") |"
		done
	fi
	if [ -f gups.csv ]; then
		echo
		echo "## RandomAccess-style updates (GUPS: 1e9 updates per second over all ranks)"
		echo
		echo "fb_gups: 8 ranks on 4 nodes (direct), $(awk -F, 'NR == 2 { printf "2^%d words per rank, %d updates in all (4× the table)", $4, $5 }' gups.csv),"
		echo "each update an 8-byte item to the owner of its word, XORed in on arrival, every rank checking it applied"
		echo "exactly what was sent to it (xorshift values, not HPCC's generator). Comparator: the same updates"
		echo "bucketed by hand (about 1024 per destination per round) and exchanged with MPI_Alltoallv (mb_gups)."
		echo "Integrity off."
		echo
		echo "| variant | conditions | GUPS | seconds |"
		echo "|---|---|---|---|"
		for lay in $LAYOUTS; do
			for v in ferry-d4 mpi-alltoallv-1024; do
				s=$(stats gups.csv "\$1 == \"$v\" && \$9 == \"$lay\"" 8)
				[ "${s##* }" = 0 ] && continue
				echo "| $v | $lay | $(range "$s" fmt 4) | $(range "$(stats gups.csv "\$1 == \"$v\" && \$9 == \"$lay\"" 7)" fmt 3) |"
			done
		done
	fi
	if [ -f latency.csv ]; then
		echo
		echo "## Latency, 8-byte ping-pong, one way (µs; integrity off)"
		echo
		echo "| variant | conditions | median | min | max |"
		echo "|---|---|---|---|---|"
		for lay in $LAYOUTS; do
			awk -F, 'NR > 1 { print $1 }' latency.csv | awk '!seen[$0]++' | while read -r v; do
				s=$(stats latency.csv "\$1 == \"$v\" && \$4 == \"$lay\"" 3); set -- $s
				[ "$4" = 0 ] && continue
				echo "| $v | $lay | $(fmt "$1") | $(fmt "$2") | $(fmt "$3") |"
			done
		done
	fi
	if [ -f rate.csv ]; then
		echo
		echo "## Message rate and hardware limits (integrity off)"
		echo
		echo "| figure | conditions | median | min | max | unit |"
		echo "|---|---|---|---|---|---|"
		awk -F, 'NR > 1 { print $1 "," $4 "," $5 }' rate.csv | awk '!seen[$0]++' | while IFS=, read -r v u lay; do
			s=$(stats rate.csv "\$1 == \"$v\" && \$5 == \"$lay\"" 3); set -- $s
			echo "| $v | $lay | $(fmt "$1" 1) | $(fmt "$2" 1) | $(fmt "$3" 1) | $u |"
		done
	fi
	if [ -f hop_cost.csv ] && [ "$(wc -l <hop_cost.csv)" -gt 1 ]; then
		echo
		echo "## Daemon instructions per item per hop (callgrind)"
		echo
		echo "tests/bench/hop_cost.sh: one daemon under \`valgrind --tool=callgrind\`, 16-byte items from rank 0 to"
		echo "rank 1, 50 000 then 250 000 of them, the difference divided by 200 000; TCP on loopback, $INTEG."
		echo "local: one node, TX ring to RX ring; source, forward, destination: the nodes of a 1×3 mesh."
		echo "One hop to a neighbour costs source + destination; each node in between adds forward."
		echo "A run is *fast* when no item waited in the daemon's memory. In *slow* runs the destination's"
		echo "RX ring filled once and every later item was parked in daemon memory and moved later (about"
		echo "twice the instructions); that happens only under valgrind (hop_cost.sh says more)."
		echo
		echo "| role | instructions per item, fast runs (median) | all runs (median) | runs |"
		echo "|---|---|---|---|"
		awk -F, 'NR > 1 { printf "| %s | %s | %s | %s |\n", $1, $2, $3, $4 }' hop_cost.csv
	fi
	if [ -f bandwidth.csv ]; then
		echo
		echo "## Bandwidth (GB/s; integrity off)"
		echo
		echo "| variant | conditions | item bytes | median | min | max |"
		echo "|---|---|---|---|---|---|"
		awk -F, 'NR > 1 { print $1 "," $2 "," $5 }' bandwidth.csv | awk '!seen[$0]++' | sort -t, -k3,3 -s | while IFS=, read -r v S lay; do
			s=$(stats bandwidth.csv "\$1 == \"$v\" && \$2 == $S && \$5 == \"$lay\"" 4); set -- $s
			echo "| $v | $lay | $S | $(fmt "$1") | $(fmt "$2") | $(fmt "$3") |"
		done
	fi
	if [ -n "$CBLOCKS" ]; then
		echo
		echo "## Collectives: all-to-all, 8 nodes × 2 ranks (µs per operation)"
		echo
		echo "\`make bench-coll\` (tests/bench/coll.sh, fb_coll.c, mb_coll.c). Each figure is the mean time of one"
		echo "all-to-all over $(awk -F, 'NR > 1 && $1 == "alltoall" && $11 != "nan" { print $11 }' coll.csv | sort -n | sed -n '1p;$p' | paste -sd- | sed 's/-/ to /') back-to-back operations after"
		echo "a warm-up (about a tenth of a second of them), the slowest rank's; medians of the runs [min..max]. Every"
		echo "point checked its first and its last operation's bytes. ferry-S: strategy S forced with"
		echo "\`ferry_coll_strategy\` (auto: the automatic choice, the strategy in the last row), ferry_alloc"
		echo "buffers, which the daemons read and write in place; ferry-auto-staged: ordinary buffers, copied"
		echo "into shared memory when an operation is posted and out of it when it ends. mpi-tcp:"
		echo "\`MPI_Alltoall\` with 16 processes over TCP (btl tcp,self), mpi-shm: over Open MPI's shared memory"
		echo "(vader), the single-host bound. The daemons' virtual topology is \"direct\" (every node linked to"
		echo "every other); $INTEG."
		echo
		printf '| variant | conditions |'; for b in $CBLOCKS; do printf ' %s |' "$(bytes "$b")"; done; echo
		printf '|---|---|'; for b in $CBLOCKS; do printf '%s' '---|'; done; echo
		for lay in $LAYOUTS; do
			for v in $CVARIANTS; do
				[ -s "plot-ca2a$lay-$v.dat" ] || continue
				printf '| %s | %s |' "$v" "$lay"
				for b in $CBLOCKS; do
					st=$(cstats alltoall "$v" "$b" 0 "$lay")
					if [ "${st##* }" = 0 ]; then printf ' – |'; else printf ' %s |' "$(range "$st" fmt 0)"; fi
				done
				echo
			done
			printf '| MPI_Alltoall (TCP) / ferry-auto, run by run | %s |' "$lay"
			for b in $CBLOCKS; do printf ' %s |' "$(range "$(cratio alltoall "$b" 0 "$lay" mpi-tcp ferry-auto)" fmt 2 ×)"; done
			echo
		done
		printf '| the automatic choice (ferryctl plan) | |'
		for b in $CBLOCKS; do printf ' %s |' "$(awk -F, -v b="$b" 'NR > 1 && $1 == "alltoall" && $3 == "auto" && $8 == b { print $13; exit }' coll.csv)"; done
		echo
	fi
	if [ -n "$MBLOCKS" ]; then
		echo
		echo "## Collectives: many-to-many, 8 nodes × 2 ranks (µs per operation)"
		echo
		echo "Rank i sends a block to each of ranks i+1 .. i+delta (mod 16) with \`ferry_alltoallv\` (zero counts"
		echo "elsewhere; ferry_alloc buffers) or \`MPI_Alltoallv\` (TCP); timed as above; $INTEG. The automatic"
		echo "choice of an all-to-allv is the one for small blocks ($(awk -F, 'NR > 1 && $1 == "many" && $3 == "auto" { print $13; exit }' coll.csv) here)."
		echo
		printf '| variant | conditions | block |'; for d in $MDELTAS; do printf ' delta %s |' "$d"; done; echo
		printf '|---|---|---|'; for d in $MDELTAS; do printf '%s' '---|'; done; echo
		for lay in $LAYOUTS; do
			for b in $MBLOCKS; do
				for v in $MVARIANTS; do
					[ -s "plot-cmany$lay$b-$v.dat" ] || continue
					printf '| %s | %s | %s |' "$v" "$lay" "$(bytes "$b")"
					for d in $MDELTAS; do
						st=$(cstats many "$v" "$b" "$d" "$lay")
						if [ "${st##* }" = 0 ]; then printf ' – |'; else printf ' %s |' "$(range "$st" fmt 0)"; fi
					done
					echo
				done
				printf '| MPI_Alltoallv (TCP) / ferry-auto, run by run | %s | %s |' "$lay" "$(bytes "$b")"
				for d in $MDELTAS; do printf ' %s |' "$(range "$(cratio many "$b" "$d" "$lay" mpi-tcp ferry-auto)" fmt 2 ×)"; done
				echo
			done
		done
	fi
	if [ -n "$OBLOCKS" ]; then
		echo
		echo "## Collectives: overlap of the all-to-all with computation, 4 nodes × 1 rank"
		echo
		echo "OSU's method (osu_ialltoall), in fb_coll.c and mb_coll.c: t_comm is the mean time of"
		echo "\`ferry_ialltoall\` + \`ferry_wait\` (\`MPI_Ialltoall\` + \`MPI_Wait\`) with nothing between; a compute"
		echo "loop (pure CPU, no ferry or MPI call) is set to last t_comm while every rank runs it (anew in every"
		echo "round, from that round's t_comm: a loop shorter than t_comm caps the overlap at t_compute / t_comm),"
		echo "and t_compute is its mean time alone; t_total is the mean time of post, compute loop, wait. Each is"
		echo "the job's time over the same number of iterations, from the first rank's start after a barrier to"
		echo "the last rank's end, on the host's clock (pinned, the 4 ranks share CPU 0: one rank's clock says"
		echo "more about when the kernel ran it than about what the loop costs, and a rank the kernel runs last"
		echo "after the barrier may find the others' work done before its clock starts; OSU's formula, which"
		echo "takes the loop's time inside the overlapped run, is left out for that reason), in 6 rounds of"
		echo "the three (the VM's speed drifts). overlap = 100 (1 − (t_total − t_compute) /"
		echo "t_comm), raw: negative where the"
		echo "overlapped run took longer than computing and then communicating. post and wait: the mean time"
		echo "in the call that posts and in the wait, per iteration of the overlapped run. Pinned: the 4 ranks on"
		echo "CPU 0, the daemons on CPU 1; $INTEG. Medians of the runs [min..max]."
		echo
		echo "| variant | conditions | block | t_comm (µs) | t_compute (µs) | t_total (µs) | post (µs) | wait (µs) | overlap |"
		echo "|---|---|---|---|---|---|---|---|---|"
		for lay in $LAYOUTS; do
			for v in $OVARIANTS; do
				for b in $OBLOCKS; do
					st=$(ostats "$v" "$b" "$lay" 15)
					[ "${st##* }" = 0 ] && continue
					us() { ostats "$v" "$b" "$lay" "$1" | awk '{ print ($1 == "nan") ? "n/a" : sprintf("%.0f", $1 * 1e6) }'; }
					echo "| $v | $lay | $(bytes "$b") | $(us 9) | $(us 10) | $(us 11) | $(us 13) | $(us 14) | $(range "$st" fmt 0 " %") |"
				done
			done
		done
	fi
	echo
	echo "Plots: $(ls ./*.png 2>/dev/null | sed 's|^\./||' | tr '\n' ' ')"
	echo
	cat <<'WHY'
## Why the targets that are not met are not (profiled on this kind of machine)

These VMs have 2 cores and no hardware performance counters (`perf stat` says
"not supported"), so the profiles are instruction counts from callgrind
(above) and CPU time from `/proc/PID/schedstat`.

- **Hand-packed MPI_Alltoallv at large K.** The MPI program packs 1024 items
  per destination into one buffer and hands the kernel a few large messages:
  each item is touched about once, for a few nanoseconds.  Through ferry each
  item is handled by the sending process (`ferry_send`), the sending daemon
  (ring read, route, copy into the aggregation buffer), the receiving daemon
  (take the frame apart, copy into the RX ring) and the receiving process:
  several hundred instructions per item (the callgrind table above), where
  the goal is 120 per hop.  With 8 daemons and 16 processes on 2 cores every
  one of them comes out of the same CPU budget; pinned, the daemons have one
  core between 8 of them and the 16 processes the other.  ferry is ahead
  while the data per destination is small (the case TRAM addresses) and far
  ahead of per-item sends everywhere.
- **Daemon CPU per item per hop.** Instructions (above) plus cache-line
  transfers between the client's core and the daemon's: every ring record is
  written on one core and read on the other.  The TRAM thesis measured
  ~300 ns per routing step.
- **Latency.** Shared, a ping-pong through ferry needs 3 (same node) or 4
  (two nodes) busy processes on 2 cores where the raw comparators need 2, so
  hops wait for the scheduler; pinned, the two ranks share CPU 0 and the
  comparators' two processes do too, so every hop is a switch on CPU 0.
- **Bandwidth.** With integrity off a large item is copied 4 times
  (client -> TX ring, TX ring -> kernel, kernel -> RX ring, RX ring ->
  the receiver's buffer) against raw TCP's 2, by 4 processes against 2.
  Pinned, the daemons' core does the kernel's two copies, as raw TCP's one
  core does, and the clients' copies run beside them on the other core;
  shared, all four copies come out of the same two cores that raw TCP's
  two copies have to themselves.  With integrity on, each piece is copied
  into a frame and out of one besides.
- **Collectives sharing the cores (8 nodes × 2, small blocks).** 8 daemons
  and 16 ranks on 2 cores: a message waits for its daemon's turn among the
  daemons spinning on its CPU (a turn takes about 5.4 µs, a third of it the
  context switch of `sched_yield`).  An 8-byte allreduce used about 219 µs
  of the daemons' CPU and 90 µs of the ranks' per operation, against 2 ×
  150 µs of wall time (2026-11-28).  The work itself is about 210 µs of
  CPU per operation (the ranks' 5.6 µs each, measured; about 15 µs per
  daemon for its 3 sends, 3 reads and 2 wake-ups, estimated from what
  those system calls cost here), 105 µs on 2 cores: Open MPI's 210–230 µs
  halved with no scheduling cost at all.  Daemons that sleep at once (`spin_us =
  0`) are 1.7× slower; renicing them changes nothing.  With the daemons on
  a core of their own the same operations are 3.2–5.2× Open MPI's.
WHY
	if [ -f knobs.csv ]; then
		echo
		echo "## Aggregation knobs (items/s; all-to-all 8 nodes × 2, 2×2×2 grid, 16 B; pinned, integrity off)"
		echo
		echo "Medians [min..max] per aggregation.buffer_bytes and aggregation.flush_us (defaults 16384 and 200);"
		echo "items per network frame in parentheses."
		echo
		ks=$(awk -F, 'NR > 1 { print $3 }' knobs.csv | sort -un)
		echo "| buffer_bytes | flush_us |$(for K in $ks; do printf ' K=%s |' "$K"; done)"
		echo "|---|---|$(for K in $ks; do printf -- '---|'; done)"
		for bb in $(awk -F, 'NR > 1 { print $1 }' knobs.csv | sort -un); do
			for fu in $(awk -F, 'NR > 1 { print $2 }' knobs.csv | sort -un); do
				row="| $bb | $fu |"
				for K in $ks; do
					st=$(stats knobs.csv "\$1 == $bb && \$2 == $fu && \$3 == $K" 7)
					ipf=$(med knobs.csv "\$1 == $bb && \$2 == $fu && \$3 == $K" 8)
					row="$row $(range "$st" mill) ($(fmt "$ipf" 0)) |"
				done
				echo "$row"
			done
		done
	fi
	# the families that write their own section
	for f in security sg red redtc costs apps mpi; do
		if [ -f "$f.md" ]; then
			echo
			cat "$f.md"
		fi
	done
} >summary.md
echo "# summary: $OUT/summary.md" >&2
