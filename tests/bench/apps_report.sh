#!/bin/bash
# tests/bench/apps_report.sh OUT - the apps family's (apps.sh) figures:
# apps.md, the "Applications" table of the summary (medians over runs of the
# rates per app, configuration and variant; the issue's figures with their
# verdicts, ratios taken run by run), and apps.png (the rates, a panel per
# app).  report.sh appends apps.md to the summary.
set -u
OUT=$1
. "$(dirname "$0")/report_lib.sh"
cd "$OUT" || exit 1
[ -f apps.csv ] || exit 0

# med APP VARIANT CORES PROCS NODES: the median rate, or nan
med() {
	awk -F, -v a="$1" -v v="$2" -v c="$3" -v p="$4" -v n="$5" \
		'NR > 1 && $1 == a && $2 == v && $3 == c && $5 == p && $4 == n && $6 != "nan" { print $6 }' apps.csv | median
}
# ratio APP VA CA VB CB PROCS NODES: "median [min..max]" of A / B run by run
ratio() {
	awk -F, -v a="$1" -v va="$2" -v ca="$3" -v vb="$4" -v cb="$5" -v p="$6" -v n="$7" '
		NR > 1 && $1 == a && $5 == p && $4 == n && $6 != "nan" {
			if ($2 == va && $3 == ca) x[$8] = $6; if ($2 == vb && $3 == cb) y[$8] = $6 }
		END { for (r in x) if (r in y && y[r] > 0) print x[r] / y[r] }' apps.csv | spread
}
fm() { awk -v x="$1" 'BEGIN { if (x == "nan" || x == "") print "–"; else if (x >= 1e6) printf "%.2f M", x / 1e6; else printf "%.0f k", x / 1e3 }'; }
# shellcheck disable=SC2086 # (split into median, min, max)
rfmt() { set -- $1; [ "$1" = nan ] && { echo "n/a"; return; }; printf '%.2f× [%.2f..%.2f]' "$1" "$2" "$3"; }
# shellcheck disable=SC2086
verdict() { set -- $1; awk -v x="$1" -v t="$2" 'BEGIN { if (x == "nan") print "n/a"; else print (x >= t ? "met" : "not met") }'; }

CONFIGS=$(awk -F, 'NR > 1 { print $1 ":" $4 ":" $5 }' apps.csv | awk '!seen[$0]++')
# runs of an app (the bale apps may run more often than gups: run.sh)
runs_of() { awk -F, -v a="$1" 'NR > 1 && $1 == a { print $8 }' apps.csv | sort -un | wc -l; }
RUNS=$(runs_of gups)
BRUNS=$(runs_of histo)
[ "$RUNS" = "$BRUNS" ] && RUNS_TEXT="$RUNS run(s)" || RUNS_TEXT="$RUNS run(s) of gups and hpcc, $BRUNS of the bale apps"
COLS="ferry:own ferry:shared mpi-alltoallv:shared mpi-isend:shared hpcc-tcp:shared hpcc-shm:shared"
unverified=$(awk -F, 'NR > 1 && $7 != "yes"' apps.csv | wc -l)

# plot data, a file per app: "config value-per-column" (NaN where none)
for app in gups histo ig permute; do
	for c in $CONFIGS; do
		IFS=: read -r a n p <<<"$c"
		[ "$a" = "$app" ] || continue
		printf '%sx%s' "$n" $((p / n))
		for col in $COLS; do
			v=$(med "$app" "${col%%:*}" "${col#*:}" "$p" "$n")
			printf ' %s' "$([ "$v" = nan ] && echo NaN || echo "$v")"
		done
		echo
	done >"plot-apps-$app.dat"
done
if command -v gnuplot >/dev/null; then
	{
		echo 'set terminal pngcairo size 1400,900 font ",10" noenhanced'
		echo 'set output "apps.png"'
		echo "set multiplot layout 2,2 title \"Applications on local clusters (loopback TCP between ferryd's; 2-core VM): items or updates per second, median of $RUNS_TEXT\nferry own: ferryd on CPU 1, processes on CPU 0; ferry shared, MPI and hpcc: both cores\""
		echo 'set style data histogram; set style histogram cluster gap 1; set style fill solid border -1'
		echo 'set logscale y; set grid ytics; set ylabel "per second"; set xlabel "nodes x processes per node"; set key horizontal below font ",8"; set yrange [1e4:*]'
		for app in gups histo ig permute; do
			[ -s "plot-apps-$app.dat" ] || continue
			echo "set title \"$app\""
			# the columns this app has (gups: no MPI versions; the rest:
			# no hpcc)
			plot="" i=2
			for col in $COLS; do
				if awk -v c="$i" '$c != "NaN" { f = 1 } END { exit !f }' "plot-apps-$app.dat"; then
					t=${col%%:*}
					[ "$t" = ferry ] && t="ferry, $([ "${col#*:}" = own ] && echo "daemons on a core of their own" || echo "shared cores")"
					plot="$plot${plot:+, }\"plot-apps-$app.dat\" using $i:xtic(1) title \"$t\""
				fi
				i=$((i + 1))
			done
			echo "plot $plot"
		done
		echo 'unset multiplot'
	} >apps.gp
	gnuplot apps.gp 2>apps-gnuplot.log || echo "# gnuplot failed: see $OUT/apps-gnuplot.log" >&2
fi

{
	echo "### Applications (make bench-apps; make apps)"
	echo
	echo "tests/apps/ on local clusters (one ferryd per node on loopback TCP, links direct; integrity off),"
	echo "the ferry apps in both core layouts (own: the daemons on CPU 1, the processes on CPU 0; shared:"
	echo "everything on both cores), the comparators shared. gups: HPCC RandomAccess under HPCC's rules"
	echo "(at most 1024 updates pending per process), updates/s; hpcc-tcp and hpcc-shm: Debian's hpcc,"
	echo "same processes and table, MPIRandomAccess_GUPs x 1e9 (btl tcp,self; vader,self: the"
	echo "single-host bound). histo, ig (request + reply per item), permute (randperm by darts): items"
	echo "per second against mpi_bale over TCP (hand-packed MPI_Alltoallv, rounds of 1024 items per"
	echo "destination; per-item MPI_Isend, with 1/16 of the items). Medians of $RUNS_TEXT; plot: apps.png."
	echo "$([ "$unverified" -gt 0 ] && echo "**$unverified run(s) failed or were not verified** (apps.csv).")"
	# the conditions, when run.sh ran the family (families.csv): other work
	# on the machine moves these figures by up to 2x
	if [ -f families.csv ] && grep -q '^apps,' families.csv; then
		IFS=, read -r _ mode secs _ fin l0 l1 cpu other <<<"$(grep '^apps,' families.csv | tail -n 1)"
		echo
		echo "Conditions: $mode run of $secs s finished $fin; load average $l0 before, $l1 after; the family's"
		echo "processes used $cpu CPU seconds, the rest of the machine $other meanwhile (of 2 x $secs)."
	fi
	echo
	echo "| app | nodes × procs | ferry own | ferry shared | MPI_Alltoallv | MPI_Isend | hpcc TCP | hpcc shm |"
	echo "|---|---|---|---|---|---|---|---|"
	for c in $CONFIGS; do
		IFS=: read -r a n p <<<"$c"
		row="| $a | $n × $((p / n)) |"
		for col in $COLS; do row="$row $(fm "$(med "$a" "${col%%:*}" "${col#*:}" "$p" "$n")") |"; done
		echo "$row"
	done
	echo
	echo "| figure | target | measured (run by run) | verdict |"
	echo "|---|---|---|---|"
	for c in $CONFIGS; do
		IFS=: read -r a n p <<<"$c"
		case $a in
		gups)
			for t in "own hpcc-tcp 20" "own hpcc-shm 10" "shared hpcc-tcp 5"; do
				set -- $t
				r=$(ratio gups ferry "$1" "$2" shared "$p" "$n")
				echo "| gups $n × $((p / n)), ferry ($1) / $2 | ≥ $3× | $(rfmt "$r") | $(verdict "${r%% *} $3") |"
			done ;;
		histo | ig)
			for lay in own shared; do
				r=$(ratio "$a" ferry "$lay" mpi-alltoallv shared "$p" "$n")
				echo "| $a $n × $((p / n)), ferry ($lay) / MPI_Alltoallv | ≥ 1× | $(rfmt "$r") | $(verdict "${r%% *} 1") |"
			done ;;
		esac
	done
} >apps.md
