# shellcheck shell=bash disable=SC2034
# tests/bench/lib.sh - sourced by the benchmark families (a2a.sh,
# latency.sh, rate.sh, bw.sh, security.sh, knobs.sh, coll.sh, sg.sh, red.sh,
# redtc.sh), each run as FAMILY.sh BUILD OUT [quick].  Sets BUILD, OUT,
# QUICK, RUNS (5; 1 with quick), B (the benchmark binaries); provides the
# local clusters (tests/integration/lib.sh, which also cleans up every
# daemon and file when the family exits), the core layouts, the all-to-all
# runners, and for the namespace clusters (sg.sh, redtc.sh) shaped links and
# Open MPI jobs in the nodes' namespaces.
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
. "$HERE/report_lib.sh"
B=$BUILD/bench

log() { echo "# $*" >&2; }
val() { sed -n "s/.*$1 \([0-9.e+-]*\).*/\1/p" | head -n 1; }
list() { echo "$*" | tr ' ' ,; }        # list 8 64 512: 8,64,512

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

# ferry_ranks PROGRAM PPN ARGS...: runs PROGRAM ($B/PROGRAM) as one job of
# PPN ranks per node of the current cluster, in LAYOUT (rank r on node
# r / PPN, output in $TMP/job.r); fails if a rank did.  The job's name is
# BENCH_JOB if set, else made up; JOB_TIMEOUT (seconds), if set, ends a
# rank that runs longer (a hung run must not hang the family).
ferry_ranks() {
	local prog=$1 ppn=$2 P r p pids="" rc=0 job
	shift 2
	P=$((CLN * ppn))
	job=${BENCH_JOB:-b$RANDOM$RANDOM}       # (called in $(...): a counter would not survive)
	rm -f "$TMP"/job.*      # a larger job's would stay, and what reads job.* read them as this one's
	for r in $(seq 0 $((P - 1))); do
		FERRY_JOB=$job FERRY_RANK=$r FERRY_SIZE=$P FERRY_RUNTIME_DIR=$TMP/${CL}_n$((r / ppn)) \
			"${APP[@]}" ${JOB_TIMEOUT:+timeout "$JOB_TIMEOUT"} "$B/$prog" "$@" >"$TMP/job.$r" 2>&1 &
		pids="$pids $!"
	done
	for p in $pids; do wait "$p" || rc=1; done
	return $rc
}

# ferry_job PROGRAM PPN ARGS...: ferry_ranks, then prints the slowest rank's
# elapsed_s, or nan if a rank failed.
ferry_job() {
	local prog=$1 ppn=$2 P r worst=0 e
	P=$((CLN * ppn))
	if ! ferry_ranks "$@"; then
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

# --- namespace clusters (sg.sh, redtc.sh) ------------------------------------
# tests/integration/lib.sh's netns_cluster makes the namespaces and links,
# start_netns_cluster a ferryd in each; these shape the links, run Open MPI
# in the same namespaces and take the cluster down.

# netns_shape NS DEV RATE DELAY: shapes what DEV (in namespace NS) sends to
# RATE ("100mbit"), with DELAY ("1ms") added by netem where the kernel has
# it, else by tbf with no delay (CONFIG_NET_SCH_NETEM unset, as on these
# Firecracker VMs); sets SHAPING to what it did.  Fails if neither works.
netns_shape() {
	if tc -n "$1" qdisc add dev "$2" root netem delay "$4" rate "$3" limit 100000 2>/dev/null; then
		SHAPING="netem rate $3 delay $4"
	elif tc -n "$1" qdisc add dev "$2" root tbf rate "$3" burst 32kb latency 400ms; then
		SHAPING="tbf rate $3; no delay (no netem in this kernel)"
	else
		return 1
	fi
}

# netns_agent NAME N ADDR: writes $TMP/agent, mpirun's launch agent for the
# namespace cluster NAME of N nodes, node k at address "$(ADDR k)":
# "AGENT HOST COMMAND..." runs COMMAND in HOST's namespace, with a temporary
# directory of its own: every "node" has the same hostname and /tmp, and
# orteds sharing Open MPI's session directory remove it under each other's
# feet at exit (mkdir failures in the next job).
netns_agent() {
	local name=$1 n=$2 addr=$3 k
	{
		echo '#!/bin/bash'
		echo 'h=$1; shift'
		echo 'case $h in'
		for k in $(seq 0 $((n - 1))); do
			echo "$("$addr" "$k")) k=$k ns=$(netns_name "$name" "$k") ;;"
		done
		echo '*) echo "agent: no node $h" >&2; exit 1 ;;'
		echo 'esac'
		echo "mkdir -p \"$TMP/mpitmp/\$k\""
		echo "exec ip netns exec \"\$ns\" env TMPDIR=\"$TMP/mpitmp/\$k\" bash -c \"\$*\""
	} >"$TMP/agent"
	chmod +x "$TMP/agent"
}

# netns_mpirun NAME N ADDR DEV PROGRAM ARGS...: an Open MPI job of N ranks,
# rank k in node k's namespace (mpirun in node 0's, an orted in every other
# one through netns_agent's agent), over TCP on the interface DEV, which
# holds "$(ADDR k)" in node k's namespace; its ranks yield when idle (many
# spinning processes on 2 cores would measure the scheduler).  Prints the
# job's output; its errors go to $TMP/mpi.err.
netns_mpirun() {
	local name=$1 n=$2 addr=$3 dev=$4 hosts k
	shift 4
	hosts=$(for k in $(seq 0 $((n - 1))); do printf '%s:1,' "$("$addr" "$k")"; done)
	mkdir -p "$TMP/mpitmp/0"
	# (timeout: a hung mpirun must not outlive the family; its orteds die
	# with it)
	timeout 600 ip netns exec "$(netns_name "$name" 0)" env TMPDIR="$TMP/mpitmp/0" mpirun -np "$n" \
		--host "${hosts%,}" --bind-to none --mca plm_rsh_agent "$TMP/agent" --mca routed direct \
		--mca reachable weighted --mca oob_tcp_if_include "$dev" --mca btl_tcp_if_include "$dev" \
		--mca btl tcp,self --mca pml ob1 --mca mpi_yield_when_idle 1 "$@" 2>"$TMP/mpi.err"
}

# netns_end: stops the current cluster (CL) and deletes its namespaces.
netns_end() {
	local ns
	stop_cluster "$CL" "$CLN" >/dev/null
	for ns in "${NETNS_LIST[@]}"; do ip netns delete "$ns"; done
	NETNS_LIST=()
	CL="" CLN=0
}
