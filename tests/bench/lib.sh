# shellcheck shell=bash disable=SC2034
# tests/bench/lib.sh - sourced by the benchmark families (a2a.sh,
# latency.sh, rate.sh, bw.sh, security.sh, knobs.sh, coll.sh), each run as
# FAMILY.sh BUILD OUT [quick].  Sets BUILD, OUT, QUICK, RUNS (5; 1 with
# quick), B (the benchmark binaries); provides the local clusters
# (tests/integration/lib.sh, which also cleans up every daemon and file when
# the family exits), the core layouts, and the all-to-all runners.
set -u
BUILD=$(cd "${1:?usage: FAMILY.sh BUILD OUT [quick]}" && pwd)
OUT=${2:?usage: FAMILY.sh BUILD OUT [quick]}
QUICK=${3:-}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
RUNS=5
[ -n "$QUICK" ] && RUNS=1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
MPIRUN="mpirun --oversubscribe --bind-to none --mca pml ob1 --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo"
MPI_TCP="--mca btl tcp,self"
MPI_SHM="--mca btl vader,self --mca btl_vader_single_copy_mechanism none"

. "$ROOT/tests/integration/lib.sh"
B=$BUILD/bench

log() { echo "# $*" >&2; }
val() { sed -n "s/.*$1 \([0-9.e+-]*\).*/\1/p" | head -n 1; }

# --- core layouts -------------------------------------------------------------
# Every figure says which layout it was measured in (the CSVs have a layout
# column):
#   pinned  every ferryd on CPU 1 (taskset -a -p 2 PID, after it started),
#           every application process on CPU 0 (started under taskset -c 0):
#           the daemons have a core of their own, as with daemon.cpus on a
#           real node.  The comparators' processes (Open MPI ranks, raw TCP and
#           raw ring processes) are application processes: CPU 0 too, the
#           second core left to the kernel (Open MPI has no daemon to put
#           there).  Programs that spin for lack of work yield the CPU while
#           they have one core between them: libferry does; raw_ring and
#           raw_tcp do when their affinity holds one CPU; Open MPI ranks get
#           mpi_yield_when_idle.
#   shared  every process may run on every core, the kernel decides.
LAYOUT=shared
APP=()          # "${APP[@]}" PROGRAM...: an application process in LAYOUT
MPI_LAYOUT=""   # extra mpirun options in LAYOUT
NCPU=$(nproc)
[ "$NCPU" -ge 2 ] || { log "the layouts need 2 cores, this machine has $NCPU"; exit 1; }
ALL_CPUS=0-$((NCPU - 1))

# layout NAME: applies a layout to the current cluster's daemons and to the
# processes started from now on.
layout() {
	local k dcpus
	LAYOUT=$1
	case $1 in
	pinned) APP=(taskset -c 0); MPI_LAYOUT="--mca mpi_yield_when_idle 1"; dcpus=1 ;;
	shared) APP=(taskset -c "$ALL_CPUS"); MPI_LAYOUT=""; dcpus=$ALL_CPUS ;;
	*) log "layout: unknown layout $1"; exit 1 ;;
	esac
	for k in $(seq 0 $((CLN - 1))); do
		taskset -a -c -p "$dcpus" "$(dpid "${CL}_n$k")" >/dev/null ||
			{ log "layout $1: cannot set the affinity of ${CL}_n$k"; exit 1; }
	done
}

# --- ferry clusters -------------------------------------------------------------
CL=""
CLN=0
# cluster NAME N [CONFIG LINE...]: (re)starts the current cluster, in LAYOUT.
# No cluster key: frames between daemons carry no tag (integrity off),
# except in security.sh, which compares the settings.  The links run
# congestion control BENCH_CC (cubic unless set; "" for the system's): under
# BBR, the default of these VMs, loopback TCP streams run at half the speed
# (README "TCP links"), and the comparators run the same (RAW_TCP_CC).
BENCH_CC=${BENCH_CC-cubic}
cluster() {
	local name=$1 n=$2
	shift 2
	[ -n "$CL" ] && stop_cluster "$CL" "$CLN" >/dev/null
	CL=""
	CLN=0
	start_cluster "$name" "$n" "$@" 'logging: { level = "warning"; };' "transport: { tcp_congestion = \"$BENCH_CC\"; };" ||
		{ log "cluster $name did not start"; exit 1; }
	CL=$name
	CLN=$n
	layout "$LAYOUT"
	# The raw TCP comparators run the congestion control ferry's links run
	# (as the kernel reports it: BENCH_CC, or the system's if refused).
	RAW_TCP_CC=$(link_ccs "$name" | cut -d' ' -f1)
	[ -n "$RAW_TCP_CC" ] || { log "cluster $name: cannot tell its links' congestion control"; exit 1; }
	export RAW_TCP_CC
	echo "links $RAW_TCP_CC system $(sysctl -n net.ipv4.tcp_congestion_control)" >"$OUT/tcp_congestion.txt"
}
end_cluster() {
	[ -n "$CL" ] && stop_cluster "$CL" "$CLN" >/dev/null
	CL=""
	CLN=0
}
cluster_stats() {       # items_sent frames_sent summed over the cluster's peers
	echo "$(peer_sum "$CL" "$CLN" items_sent) $(peer_sum "$CL" "$CLN" frames_sent)"
}

# ferry_job PROGRAM PPN ARGS...: runs PROGRAM as one job of PPN ranks per node
# of the current cluster, in LAYOUT (rank r on node r / PPN, output in
# $TMP/job.r); prints the slowest rank's elapsed_s, or nan if a rank failed.
# The job's name is BENCH_JOB if set, else made up.
ferry_job() {
	local prog=$1 ppn=$2 P r pids="" worst=0 e rc=0 job
	shift 2
	P=$((CLN * ppn))
	job=${BENCH_JOB:-b$RANDOM$RANDOM}       # (called in $(...): a counter would not survive)
	for r in $(seq 0 $((P - 1))); do
		FERRY_JOB=$job FERRY_RANK=$r FERRY_SIZE=$P FERRY_RUNTIME_DIR=$TMP/${CL}_n$((r / ppn)) \
			"${APP[@]}" "$B/$prog" "$@" >"$TMP/job.$r" 2>&1 &
		pids="$pids $!"
	done
	for p in $pids; do wait "$p" || rc=1; done
	if [ $rc != 0 ]; then
		log "$prog failed ($LAYOUT): $(cat "$TMP"/job.* | grep -v elapsed | head -3)"
		echo nan
		return
	fi
	for r in $(seq 0 $((P - 1))); do
		e=$(val elapsed_s <"$TMP/job.$r")
		worst=$(awk -v a="$worst" -v b="${e:-nan}" 'BEGIN { print (a == "nan" || b == "nan") ? "nan" : (b > a ? b : a) }')
	done
	echo "$worst"
}

# ferry_a2a PPN K M [FB_A2A OPTIONS...]: fb_a2a on the current cluster
# (--batch: FERRY_BATCH); prints "seconds items items_per_frame
# frames_per_item_hop".
ferry_a2a() {
	local ppn=$1 K=$2 M=$3 P s0 s1 t
	shift 3
	P=$((CLN * ppn))
	s0=$(cluster_stats)
	t=$(ferry_job fb_a2a "$ppn" --items "$K" --len "$M" "$@")
	s1=$(cluster_stats)
	awk -v t="$t" -v n=$((P * (P - 1) * K)) -v s0="$s0" -v s1="$s1" 'BEGIN {
		split(s0, a, " "); split(s1, b, " ");
		it = b[1] - a[1]; fr = b[2] - a[2];
		printf "%s %d %s %s\n", t, n, (fr > 0 ? it / fr : "nan"), (it > 0 ? fr / it : "nan") }'
}

# mpi PROGRAM NP TRANSPORT ARGS...: an Open MPI job in LAYOUT; prints its
# output (stderr in $TMP/mpi.err).
mpi() {
	local prog=$1 np=$2 tr=$3
	shift 3
	# shellcheck disable=SC2086
	$MPIRUN -np "$np" $tr $MPI_LAYOUT "${APP[@]}" "$B/$prog" "$@" 2>"$TMP/mpi.err"
}

# mpi_a2a NP TRANSPORT MODE K M [R]: prints "seconds items".
mpi_a2a() {
	local np=$1 tr=$2 mode=$3 K=$4 M=$5 R=${6:-0} e
	e=$(mpi mb_a2a "$np" "$tr" "$mode" --items "$K" --len "$M" --pack "$R" | val elapsed_s)
	[ -n "$e" ] || { log "mpi $mode failed ($LAYOUT): $(head -3 "$TMP/mpi.err")"; e=nan; }
	echo "$e $((np * (np - 1) * K))"
}
