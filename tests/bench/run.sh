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
#   knobs     the all-to-all over aggregation.buffer_bytes x flush_us (knobs.sh)
#   coll      the collectives the daemons run: all-to-all per strategy and
#             block size, many-to-many, overlap of ferry_ialltoall with
#             computation, against Open MPI's                  (coll.sh)
#   sg        scatter and gather on namespace tori with shaped links: OPT,
#             SDF, naive, Open MPI's, and the α–β simulation    (sg.sh)
#   red       allreduce, allgather, bcast, reduce, reduce_scatter_block
#             against Open MPI's, on loopback                  (red.sh)
#   redtc     the same over tc-shaped links (a switched namespace cluster,
#             9 and 8 nodes): every algorithm forced (single, orth, hier;
#             short, long, hybrid) and the automatic choice, against Open
#             MPI's and the cost model's predictions           (redtc.sh)
#   costs     the runtime functions' predictions against measured times,
#             per layout                                       (costs.sh)
#   apps      the applications of make apps: HPCC RandomAccess against
#             Debian's hpcc (TCP, shared memory), bale's histogram,
#             index-gather and permutation against MPI_Alltoallv and
#             MPI_Isend versions                               (apps.sh)
#   mpi       the MPI programs of red, coll and sg unchanged, by Open MPI
#             alone and with LD_PRELOAD=libferry-mpi.so        (mpi.sh)
#
# Each family runs on local clusters (one ferryd per simulated node, on
# loopback; sg and redtc in network namespaces, as root), every configuration RUNS times (5; 1 with quick), the variants
# of one comparison taking turns so that a ratio compares runs made close
# together, in the core layouts of lib.sh ("pinned", "shared").  A family
# should take at most 10 minutes in full mode on a 2-core machine
# (FAMILY_BUDGET_S); OUT/families.csv has their wall times, and the summary
# says when one went over: shrink it then (fewer runs or points).  The
# machine may be shared with other work, which slows the timings down and
# makes them vary: families.csv also has the CPU time the family's own
# processes used and the CPU time the rest of the machine's processes used
# meanwhile (user + system time in /proc/stat, less the family's), and the
# load average before and after.
set -u
BUILD=${1:?usage: run.sh BUILD OUT quick|full [FAMILY...]}
OUT=${2:?usage: run.sh BUILD OUT quick|full [FAMILY...]}
MODE=${3:?usage: run.sh BUILD OUT quick|full [FAMILY...]}
shift 3
HERE=$(cd "$(dirname "$0")" && pwd)
ALL="a2a latency rate bw security knobs coll sg red redtc costs apps mpi"
FAMILIES=${*:-$ALL}
case $MODE in quick) Q=quick ;; full) Q="" ;; *) echo "run.sh: mode is quick or full" >&2; exit 2 ;; esac
mkdir -p "$OUT"
[ -f "$OUT/families.csv" ] ||
	echo "family,mode,seconds,status,finished,load_before,load_after,cpu_s,other_cpu_s" >"$OUT/families.csv"
HZ=$(getconf CLK_TCK)
# CPU seconds used by every process of the machine, and by the children this
# shell has waited for (a family and everything it started).
machine_cpu() { awk -v hz="$HZ" '/^cpu / { printf "%.2f\n", ($2 + $3 + $4) / hz }' /proc/stat; }
own_cpu() { awk -v hz="$HZ" '{ printf "%.2f\n", ($16 + $17) / hz }' "/proc/$$/stat"; }
rc=0
for fam in $FAMILIES; do
	case " $ALL " in *" $fam "*) ;; *) echo "run.sh: unknown family $fam (known: $ALL)" >&2; exit 2 ;; esac
	echo "# family $fam ($MODE)" >&2
	l0=$(cut -d' ' -f1 /proc/loadavg)
	m0=$(machine_cpu) o0=$(own_cpu)
	t0=$(date +%s.%N)
	bash "$HERE/$fam.sh" "$BUILD" "$OUT" $Q
	st=$?
	t1=$(date +%s.%N)
	m1=$(machine_cpu) o1=$(own_cpu)
	cpu=$(awk -v a="$o0" -v b="$o1" 'BEGIN { printf "%.0f", b - a }')
	other=$(awk -v a="$m0" -v b="$m1" -v c="$cpu" 'BEGIN { x = b - a - c; printf "%.0f", x < 0 ? 0 : x }')
	[ $st = 0 ] || rc=1
	# One row per family: a family run again replaces its row.
	grep -v "^$fam," "$OUT/families.csv" >"$OUT/families.csv.new"
	echo "$fam,$MODE,$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.0f", b - a }'),$([ $st = 0 ] && echo ok || echo "failed ($st)"),$(date -u '+%Y-%m-%d %H:%M UTC'),$l0,$(cut -d' ' -f1 /proc/loadavg),$cpu,$other" \
		>>"$OUT/families.csv.new"
	mv "$OUT/families.csv.new" "$OUT/families.csv"
	echo "# family $fam: $(tail -n 1 "$OUT/families.csv" | cut -d, -f3) s" >&2
done
echo "# writing plots and summary" >&2
"$HERE/report.sh" "$OUT"
exit $rc
