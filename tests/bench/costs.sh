#!/bin/bash
# tests/bench/costs.sh BUILD OUT [quick] - the runtime functions' predictions
# against measured times (make bench-costs; issue 14; seed 004 §4, Figs.
# 17-21): how far the time the cost module predicts for an operation is
# from the time it takes, per group layout (nodes x ranks per node).
#
# Per layout, on a fresh local cluster (loopback, virtual direct topology,
# layout "pinned": the daemons on a core of their own):
#   calibration  fb_red runs allreduce, allgather, bcast and reduce with
#                each of single, orth and hier forced, and
#                reduce_scatter_block with short, long and hybrid, at
#                CAL_BYTES: the daemons measure every operation and fit
#                their functions (daemon/plan/cost.h), on-line;
#   measurement  the same at MEAS_BYTES, sizes the calibration did not
#                run, as a job whose home (hence whose functions) is known:
#                its table is read (ferryctl costs) just before the job
#                starts and fixes its functions (GO), and ferryctl plan
#                --costs predicts each point from it.
# The deviation of a point is |predicted - measured| / measured, the
# measured time fb_red's (OSU's method: back-to-back operations, the
# slowest rank's mean).  Writes OUT/costs.csv and OUT/costs.md: per layout
# the deviations' min / mean / max (the paper's figures), and the issue's
# figure, the median over layouts and sizes (target <= 20 %).
. "$(dirname "$0")/lib.sh" "$@"

ORTH_OPS="allreduce,allgather,bcast,reduce"
if [ -n "$QUICK" ]; then
	LAYOUTS="4x1"; CAL_BYTES="8 4096 65536"; MEAS_BYTES="512 16384"; TARGET=0.05
else
	LAYOUTS="4x1 8x1 8x2 9x1"; CAL_BYTES="8 256 4096 65536 262144"; MEAS_BYTES="64 1024 16384 131072"
	TARGET=0.1
fi
TIMING=(--target-s "$TARGET" --warmup 3)
list() { echo "$*" | tr ' ' ,; }
# plan name of fb_red's operations
plan_op() { [ "$1" = rsb ] && echo reduce_scatter_block || echo "$1"; }

CSV=$OUT/costs.csv
echo "layout,nodes,ppn,op,alg,bytes,measured_us,predicted_us,fitted,deviation" >"$CSV"

# runs PPN BYTES: fb_red over every algorithm forced (each op family its own)
runs() {
	local ppn=$1 bytes=$2 s
	for s in single orth hier; do
		t=$(ferry_job fb_red "$ppn" "$ORTH_OPS" --bytes "$bytes" --strategy "$s" "${TIMING[@]}")
		[ "$t" = nan ] && return 1
		cat "$TMP/job.0" >>"$TMP/points"
	done
	for s in short long hybrid; do
		t=$(ferry_job fb_red "$ppn" rsb --bytes "$bytes" --strategy "$s" "${TIMING[@]}")
		[ "$t" = nan ] && return 1
		cat "$TMP/job.0" >>"$TMP/points"
	done
}

log "costs: runtime functions against measured times, layouts $LAYOUTS, calibrated at $(list $CAL_BYTES) B, measured at $(list $MEAS_BYTES) B"
layout pinned
for lay in $LAYOUTS; do
	nodes=${lay%x*} ppn=${lay#*x}
	cluster "cf$nodes" "$nodes" 'topology: { virtual = "direct"; };'
	layout pinned
	: >"$TMP/points"
	runs "$ppn" "$(list $CAL_BYTES)" || { log "costs $lay: the calibration failed"; continue; }
	# the measurement job's name, its home, and the home's table now
	BENCH_JOB=""
	for k in $(seq 200); do
		[ "$(job_home "$(id -u)" "m$k" "$nodes")" = 0 ] && { BENCH_JOB=m$k; break; }
	done
	"$BUILD/ferryctl" --runtime-dir "$TMP/${CL}_n0" costs >"$TMP/costs.$lay" ||
		{ log "costs $lay: ferryctl costs failed"; continue; }
	: >"$TMP/points"
	export BENCH_JOB
	# (one job per algorithm: each fixes its functions at its GO, all from
	# the same table, which only the operations of the job before changed)
	runs "$ppn" "$(list $MEAS_BYTES)" || { log "costs $lay: the measurement failed"; unset BENCH_JOB; continue; }
	unset BENCH_JOB
	# the α and β the job agreed on: the mean over its nodes of each
	# one's links' (daemon/net/peer.c peer_cost, cluster/home.c)
	ab=$(for k in $(seq 0 $((nodes - 1))); do
		"$BUILD/ferryctl" --runtime-dir "$TMP/${CL}_n$k" stats | awk '
			{ for (i = 1; i < NF; i++) if ($i == "alpha_us") { a += $(i + 1); na++ }
			  else if ($i == "beta_ns_per_byte" && $(i + 1) > 0) { b += $(i + 1); nb++ } }
			END { if (na && nb) print a / na, b / nb }'
	done | awk '{ a += $1; b += $2; n++ } END { if (n) printf "%.3f %.4f\n", a / n, b / n }')
	a=${ab% *} b=${ab#* }
	awk '$1 == "point" { print $3, $5, $7, $11 }' "$TMP/points" | while read -r op alg bytes s; do
		json=$("$BUILD/ferryctl" plan "$(plan_op "$op")" --nodes "$nodes" --ppn "$ppn" --bytes "$bytes" \
			${a:+--alpha-us "$a"} ${b:+--beta-ns-per-byte "$b"} --costs "$TMP/costs.$lay" --format json) || continue
		pred=$(python3 -c 'import json, sys; d = json.load(sys.stdin)
s = [x for x in d["strategies"] if x["name"] == sys.argv[1]][0]
print(s["predicted_us"], "1" if s.get("fitted") else "0")' "$alg" <<<"$json") || continue
		awk -v l="$lay" -v n="$nodes" -v p="$ppn" -v o="$op" -v al="$alg" -v by="$bytes" -v s="$s" -v pr="$pred" 'BEGIN {
			split(pr, q, " "); m = s * 1e6; d = (q[1] - m) / m; if (d < 0) d = -d
			printf "%s,%s,%s,%s,%s,%s,%.1f,%.1f,%s,%.4f\n", l, n, p, o, al, by, m, q[1], q[2], d }' >>"$CSV"
	done
done
end_cluster

# --- report -----------------------------------------------------------------------
{
	echo "### Runtime functions: predicted against measured (make bench-costs)"
	echo
	echo "Per layout (nodes × ranks per node; loopback, pinned: the daemons on a core of their own, integrity"
	echo "off), the daemons first ran every algorithm of allreduce, allgather, bcast, reduce (single, orth,"
	echo "hier) and reduce_scatter_block (short, long, hybrid) forced at $(list $CAL_BYTES) bytes, fitting their"
	echo "runtime functions on-line (τ, t_c per family and algorithm, seed 004 §4); then the same ran at"
	echo "$(list $MEAS_BYTES) bytes, sizes not calibrated, and \`ferryctl plan --costs\` predicted each from the table"
	echo "of the job's home as it was when the job started. Deviation: |predicted − measured| / measured,"
	echo "measured as OSU does (back-to-back operations, the slowest rank's mean). \`fitted\`: points the"
	echo "prediction took from a runtime function (the rest from the links' α and β alone)."
	echo
	echo "| layout | points | fitted | deviation min | mean | median | max |"
	echo "|---|---|---|---|---|---|---|"
	for lay in $LAYOUTS; do
		awk -F, -v l="$lay" 'NR > 1 && $1 == l { print $10, $9 }' "$CSV" | sort -g | awk -v l="$lay" '
			{ v[NR] = $1; s += $1; f += $2 }
			END { if (!NR) { printf "| %s | 0 | | | | | |\n", l; exit }
			      printf "| %s | %d | %d | %.0f %% | %.0f %% | %.0f %% | %.0f %% |\n", l, NR, f, v[1] * 100,
				s / NR * 100, (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) * 100, v[NR] * 100 }'
	done
	echo
	echo "Per operation and algorithm (all layouts): median deviation."
	echo
	echo "| op | algorithm | points | median deviation |"
	echo "|---|---|---|---|"
	awk -F, 'NR > 1 { print $4 "," $5 }' "$CSV" | awk '!seen[$0]++' | while IFS=, read -r op alg; do
		awk -F, -v o="$op" -v a="$alg" 'NR > 1 && $4 == o && $5 == a { print $10 }' "$CSV" | sort -g |
			awk -v o="$op" -v a="$alg" '{ v[NR] = $1 } END { if (NR) printf "| %s | %s | %d | %.0f %% |\n", o, a, NR,
				(NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) * 100 }'
	done
	echo
	med=$(awk -F, 'NR > 1 { print $10 }' "$CSV" | sort -g |
		awk '{ v[NR] = $1 } END { if (!NR) print "nan"; else printf "%.3f\n", NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }')
	echo "| figure | conditions | target | measured | verdict |"
	echo "|---|---|---|---|---|"
	echo "| runtime-function deviation, median over layouts and sizes | loopback, pinned, sizes not calibrated | ≤ 20 % | $(awk -v m="$med" 'BEGIN { if (m == "nan") print "–"; else printf "%.0f %%", m * 100 }') | $(awk -v m="$med" 'BEGIN { print (m != "nan" && m + 0 <= 0.2) ? "met" : "not met" }') |"
} >"$OUT/costs.md"
cat "$OUT/costs.md" >&2
