# tests/launch/lib.sh - sourced by the launch tests (make check-launch):
# "nodes" as a cluster's nodes are, for real launchers to start ferry jobs on.
#
# Node K is a network namespace on a switch (lib.sh's netns_cluster,
# "switched"), a UTS namespace with the hostname nodeKK, and a mount
# namespace in which /run is a tmpfs of its own holding /run/ferry (that
# node's ferryd's runtime directory, bound from $TMP/NAME_nK) and /etc/hosts
# is the cluster's ($TMP/hosts).  A process that enters them sees what a
# process on a real node sees: ferry_open finds its node's daemon at the
# default /run/ferry, with no FERRY_RUNTIME_DIR that would be wrong on the
# other nodes.  ferryd finds its node number by its hostname (host_pattern).
# A "login" namespace on the same switch (hostname ctl) holds what is not
# on a node: slurmctld, srun, mpirun's first process.
#
# Each set of namespaces is held by a "sleep infinity" (in PIDS, so lib.sh's
# cleanup ends it, and with it the namespaces; whatever else still runs in
# them, a launcher's daemons and tasks, lib.sh's cleanup kills).
. "$(dirname "${BASH_SOURCE[0]}")/../integration/lib.sh"

LOGIN_ADDR=10.77.3.254

# launch_skip REASON: every check of this test is skipped, for REASON.
launch_skip() { echo "ok - $TEST: # SKIP $1"; finish; }

# node_name K: nodeKK, as host_pattern "node%02d" makes it.
node_name() { printf 'node%02d' "$1"; }

# hold LABEL HOSTNAME NETNS RUNDIR: a process in NETNS with a new UTS and
# mount namespace set up as above (RUNDIR bound to /run/ferry, if given);
# its pid in HOLD_LABEL.
hold() {
	local label=$1 host=$2 ns=$3 run=$4 pid
	rm -f "$TMP/$label.ready"
	# (nsenter, not ip netns exec, which would mount a /sys of its own
	# without the cgroup file systems that slurmd insists on seeing)
	nsenter --net="/run/netns/$ns" unshare --uts --mount --propagation private sh -c '
		set -e
		hostname "$1"
		mount --bind "$2" /etc/hosts
		mount -t tmpfs -o mode=755,size=16m ferry-node-run /run
		if [ -n "$3" ]; then mkdir /run/ferry && mount --bind "$3" /run/ferry; fi
		touch "$4"
		exec sleep infinity' hold "$host" "$TMP/hosts" "$run" "$TMP/$label.ready" >"$TMP/$label.hold.log" 2>&1 &
	pid=$!
	PIDS+=("$pid")
	eval "HOLD_$label=$pid"
	wait_for "[ -e '$TMP/$label.ready' ]" || { echo "# namespaces of $label:"; sed 's/^/#   /' "$TMP/$label.hold.log"; return 1; }
}

# on LABEL COMMAND...: runs it in the namespaces of node K (LABEL nK) or of
# the login namespace (LABEL login).
on() { local label=$1 pid; shift; eval "pid=\$HOLD_$label"; nsenter -t "$pid" -n -u -m -- "$@"; }

# launch_cluster NAME N: N nodes and the login namespace, $TMP/hosts, the
# ferry configuration $TMP/NAME.conf (host_pattern "node%02d"), and a ferryd
# on every node (runtime directory $TMP/NAME_nK, which is the node's
# /run/ferry); returns once every link is up.
launch_cluster() {
	local name=$1 n=$2 k hub
	netns_cluster "$name" switched "$n" || return 1
	hub=$(netns_name "$name" hub)
	ip netns add "$(netns_name "$name" login)" || return 1
	NETNS_LIST+=("$(netns_name "$name" login)")
	ip -n "$(netns_name "$name" login)" link set lo up
	ip link add sw netns "$(netns_name "$name" login)" type veth peer name plogin netns "$hub" || return 1
	ip -n "$hub" link set plogin master br0 up
	ip -n "$(netns_name "$name" login)" link set sw up
	ip -n "$(netns_name "$name" login)" addr add "$LOGIN_ADDR/16" dev sw
	{
		echo "127.0.0.1 localhost"
		echo "$LOGIN_ADDR ctl"
		for k in $(seq 0 $((n - 1))); do echo "$(netns_addr "$k") $(node_name "$k")"; done
	} >"$TMP/hosts"
	cat >"$TMP/$name.conf" <<-CONF
	cluster: { name = "$name"; host_pattern = "node%02d"; count = $n; port = 7470; };
	topology: { physical = "switched"; virtual = "direct"; };
	CONF
	hold login ctl "$(netns_name "$name" login)" "" || return 1
	for k in $(seq 0 $((n - 1))); do
		mkdir -p "$TMP/${name}_n$k"
		hold "n$k" "$(node_name "$k")" "$(netns_name "$name" "$k")" "$TMP/${name}_n$k" || return 1
		IN_NODE="nsenter -t $(eval "echo \$HOLD_n$k") -n -u -m --" start_daemon "${name}_n$k" \
			--config "$TMP/$name.conf" || return 1
	done
	cluster_up "$name" "$n"
}

# daemons_idle NAME N: no endpoint, job, queued item or shared-memory region
# is left on any of the N daemons.
daemons_idle() {
	local name=$1 n=$2 k key
	for k in $(seq 0 $((n - 1))); do
		for key in endpoints jobs memory_queued_bytes memory_table_bytes memory_region_bytes memory_coll_bytes \
			   direct_regions; do
			[ "$(stat "${name}_n$k" "$key")" = 0 ] || return 1
		done
	done
}

# daemon_fds NAME N: the open files of the N daemons, one line.
daemon_fds() {
	local k
	for k in $(seq 0 $(($2 - 1))); do printf '%s ' "$(nfds "$(dpid "${1}_n$k")")"; done
}

# --- Slurm ------------------------------------------------------------------

# slurm_ok: Slurm's daemons, client commands and munge are installed
# (packaging/deps.sh launch).
slurm_ok() {
	local c
	for c in slurmctld slurmd srun sbatch scancel squeue sinfo munged munge; do
		command -v "$c" >/dev/null || return 1
	done
}

# slurm_cluster NAME N: a Slurm cluster on launch_cluster NAME N's nodes,
# with its own munge key and munged ($TMP/munge), configuration, state, spool
# and logs ($TMP/slurm); slurmctld in the login namespace, a slurmd on each
# node.  Nothing of a system-wide Slurm or munge is read or touched: the
# commands find this one through SLURM_CONF ($TMP/slurm/slurm.conf, exported
# here), the daemons through -f, munge through AuthInfo's socket.  Each node
# has 4 CPUs for Slurm (whatever the machine has: config_overrides), so
# two jobs of 2 tasks per node fit at once.  Returns once every node is idle.
slurm_cluster() {
	local name=$1 n=$2 k s=$TMP/slurm
	mkdir -p "$TMP/munge" "$s/state"
	for k in $(seq 0 $((n - 1))); do mkdir -p "$s/spool-$(node_name "$k")"; done
	chmod 700 "$TMP/munge"
	head -c 1024 /dev/urandom >"$TMP/munge/key"
	chmod 600 "$TMP/munge/key"
	bg munged.log munged -F --force --key-file="$TMP/munge/key" --socket="$TMP/munge/socket" \
		--pid-file="$TMP/munge/pid" --seed-file="$TMP/munge/seed" --log-file="$TMP/munge/log"
	wait_for "[ -S '$TMP/munge/socket' ]" || { echo "# munged did not start:"; sed 's/^/#   /' "$TMP/munged.log"; return 1; }
	cat >"$s/slurm.conf" <<-CONF
	ClusterName=$name
	SlurmctldHost=ctl
	SlurmUser=root
	SlurmdUser=root
	AuthType=auth/munge
	CredType=cred/munge
	AuthInfo=socket=$TMP/munge/socket
	StateSaveLocation=$s/state
	SlurmdSpoolDir=$s/spool-%n
	SlurmctldPidFile=$s/slurmctld.pid
	SlurmdPidFile=$s/slurmd-%n.pid
	SlurmctldLogFile=$s/slurmctld.log
	SlurmdLogFile=$s/slurmd-%n.log
	SlurmctldDebug=info
	SlurmdDebug=info
	ProctrackType=proctrack/pgid
	TaskPlugin=task/none
	SwitchType=switch/none
	MpiDefault=none
	SelectType=select/cons_tres
	SelectTypeParameters=CR_CPU
	SchedulerType=sched/backfill
	JobAcctGatherType=jobacct_gather/none
	AccountingStorageType=accounting_storage/none
	JobCompType=jobcomp/none
	SlurmdParameters=config_overrides
	ReturnToService=2
	KillWait=2
	MessageTimeout=20
	InactiveLimit=0
	NodeName=node[00-$(printf '%02d' $((n - 1)))] CPUs=4 RealMemory=1000 State=UNKNOWN
	PartitionName=$name Nodes=ALL Default=YES MaxTime=10 State=UP
	CONF
	# slurmd initialises a cgroup plugin even when nothing uses cgroups
	# (proctrack/pgid, task/none); v1 is what the machine mounts.
	if [ -d /sys/fs/cgroup/freezer ]; then echo "CgroupPlugin=cgroup/v1"; else echo "CgroupPlugin=autodetect"; fi \
		>"$s/cgroup.conf"
	# The nodes share /tmp, where srun --mpi=pmix would have every node make
	# the same directory (File exists); their /run is their own.
	echo "PMIxCliTmpDirBase=/run" >"$s/mpi.conf"
	export SLURM_CONF=$s/slurm.conf
	on login true || return 1
	# (nsenter itself, not the function on, so that the pid the cleanup
	# signals is the daemon's: it shuts down as it would on a node)
	bg slurmctld.out nsenter -t "$HOLD_login" -n -u -m -- slurmctld -D -i -f "$SLURM_CONF"
	for k in $(seq 0 $((n - 1))); do
		bg "slurmd$k.out" nsenter -t "$(eval "echo \$HOLD_n$k")" -n -u -m -- slurmd -D -f "$SLURM_CONF"
	done
	if ! wait_for_long "[ \"\$(on login sinfo -h -o '%T %D' 2>/dev/null)\" = 'idle $n' ]" 60; then
		echo "# slurm did not come up:"
		on login sinfo 2>&1 | sed 's/^/#   /'
		tail -n 20 "$s/slurmctld.log" "$TMP/slurmctld.out" "$s"/slurmd-*.log 2>/dev/null | sed 's/^/#   /'
		return 1
	fi
}

# wait_for_long CONDITION SECONDS: wait_for, for longer (sleeping 0.2 s).
wait_for_long() {
	local i
	for ((i = 0; i < $2 * 5; i++)); do eval "$1" && return 0; sleep 0.2; done
	return 1
}

# --- checks of a launched ft_launch job -------------------------------------

# placed LOG P PPN: the output LOG of a job of P ft_launch ranks, PPN on each
# node in rank order (Slurm's block distribution, mpirun's --host N:PPN):
# every rank ran on its node (hostname, ferry's node number and its index
# among the node's ranks say the same) and passed every check.
placed() {
	local log=$1 p=$2 ppn=$3 r k
	for ((r = 0; r < p; r++)); do
		k=$((r / ppn))
		grep -qx "rank $r size $p node $k host $(node_name "$k") local $((r % ppn))/$ppn" "$log" &&
			grep -qx "rank $r ok" "$log" || { echo "# rank $r:"; grep -a "rank $r[ :]" "$log" | sed 's/^/#   /'; return 1; }
	done
	[ "$(grep -c ' ok$' "$log")" = "$p" ]
}

# jobs_here CLUSTER K: the ferry jobs on node K, "NAME:ATTACHED/SIZE" each,
# sorted, one line.
jobs_here() {
	"$BUILD/ferryctl" --runtime-dir "$TMP/${1}_n$2" status 2>/dev/null |
		sed -n 's/^job \([^ ]*\) uid [0-9]*: \([0-9]*\) of \([0-9]*\) ranks attached here.*/\1:\2\/\3/p' | sort | tr '\n' ' '
}

# all_jobs_here CLUSTER N "JOBS": every one of the N nodes has exactly the
# ferry jobs JOBS (as jobs_here prints them).
all_jobs_here() {
	local k
	for ((k = 0; k < $2; k++)); do [ "$(jobs_here "$1" "$k")" = "$3" ] || return 1; done
}

# --- Open MPI ---------------------------------------------------------------

# mpi_agent N: writes $TMP/agent, mpirun's launch agent (plm_rsh_agent) for
# the N nodes: "AGENT HOST COMMAND..." runs COMMAND on node HOST (nodeKK),
# in its namespaces, as ssh would run it there.
mpi_agent() {
	local k
	{
		echo '#!/bin/bash'
		echo 'h=$1; shift'
		echo 'case $h in'
		for ((k = 0; k < $1; k++)); do echo "$(node_name "$k")) pid=$(eval "echo \$HOLD_n$k") ;;"; done
		echo '*) echo "agent: no node $h" >&2; exit 1 ;;'
		echo 'esac'
		echo 'exec nsenter -t "$pid" -n -u -m -- bash -c "$*"'
	} >"$TMP/agent"
	chmod +x "$TMP/agent"
}

# Open MPI as the tests run it: as root (its refusal off), over the nodes'
# switch ("sw"), its session directories in each node's own /run (the
# nodes share /tmp, and orteds sharing one remove it under each other's
# feet), nothing bound to cores.
MPI_ENV=(env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 TMPDIR=/run
	OMPI_MCA_oob_tcp_if_include=sw OMPI_MCA_btl_tcp_if_include=sw OMPI_MCA_hwloc_base_binding_policy=none)
