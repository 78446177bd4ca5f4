#!/bin/bash
# tests/bench/run.sh BUILD OUT quick|full [FAMILY...] - ferry's benchmark
# suite (make bench, make bench-FAMILY).  Runs the families in turn into OUT
# (all of them unless named), times each, then writes the plots and
# summary.md from every CSV in OUT (report.sh).
#
#   a2a       fine-grained all-to-all (bursts and sustained) and the
#             RandomAccess-style updates, against Open MPI      (a2a.sh)
#   latency   8-byte ping-pong against raw rings, raw TCP, MPI (latency.sh)
#   rate      message rate, ferry_send, daemon CPU per item, and the
#             daemon's instructions per item per hop (callgrind) (rate.sh)
#   bw        large items against a raw TCP stream             (bw.sh)
#   security  what frame integrity and encryption cost         (security.sh)
#
# Each family runs on local clusters (one ferryd per simulated node, on
# loopback), every configuration RUNS times (5; 1 with quick), the variants
# of one comparison taking turns so that a ratio compares runs made close
# together, in the core layouts of lib.sh ("pinned", "shared").  A family
# should take at most 10 minutes in full mode on a 2-core machine
# (FAMILY_BUDGET_S); OUT/families.csv has their wall times, and the summary
# says when one went over: shrink it then (fewer runs or points).  They also
# have the load average before and after each family: the machine may be
# shared with other work, which slows the timings down and makes them vary.
set -u
BUILD=${1:?usage: run.sh BUILD OUT quick|full [FAMILY...]}
OUT=${2:?usage: run.sh BUILD OUT quick|full [FAMILY...]}
MODE=${3:?usage: run.sh BUILD OUT quick|full [FAMILY...]}
shift 3
HERE=$(cd "$(dirname "$0")" && pwd)
ALL="a2a latency rate bw security"
FAMILIES=${*:-$ALL}
case $MODE in quick) Q=quick ;; full) Q="" ;; *) echo "run.sh: mode is quick or full" >&2; exit 2 ;; esac
mkdir -p "$OUT"
[ -f "$OUT/families.csv" ] || echo "family,mode,seconds,status,finished,load_before,load_after" >"$OUT/families.csv"
rc=0
for fam in $FAMILIES; do
	case " $ALL " in *" $fam "*) ;; *) echo "run.sh: unknown family $fam (known: $ALL)" >&2; exit 2 ;; esac
	echo "# family $fam ($MODE)" >&2
	l0=$(cut -d' ' -f1 /proc/loadavg)
	t0=$(date +%s.%N)
	bash "$HERE/$fam.sh" "$BUILD" "$OUT" $Q
	st=$?
	t1=$(date +%s.%N)
	[ $st = 0 ] || rc=1
	# One row per family: a family run again replaces its row.
	grep -v "^$fam," "$OUT/families.csv" >"$OUT/families.csv.new"
	echo "$fam,$MODE,$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.0f", b - a }'),$([ $st = 0 ] && echo ok || echo "failed ($st)"),$(date -u '+%Y-%m-%d %H:%M UTC'),$l0,$(cut -d' ' -f1 /proc/loadavg)" \
		>>"$OUT/families.csv.new"
	mv "$OUT/families.csv.new" "$OUT/families.csv"
	echo "# family $fam: $(tail -n 1 "$OUT/families.csv" | cut -d, -f3) s" >&2
done
echo "# writing plots and summary" >&2
"$HERE/report.sh" "$OUT"
exit $rc
