#!/bin/bash
# ferry jobs started by Open MPI's mpirun (Debian's openmpi-bin, PMIx
# underneath) on four "nodes" (tests/launch/lib.sh): mpirun on node 0, an
# orted on every other node through a launch agent that enters the node's
# namespaces as ssh would log in there.  The ranks find their node's ferryd
# at /run/ferry and the job, rank and size in Open MPI's and PMIx's
# variables.
. "$(dirname "$0")/lib.sh"

netns_ok || launch_skip "needs root and ip netns"
command -v mpirun >/dev/null || launch_skip "Open MPI not installed (packaging/deps.sh launch)"
unset FERRY_RUNTIME_DIR FERRY_JOB FERRY_RANK FERRY_SIZE
P=$BUILD/tests/ft_launch
CL=mp
launch_cluster $CL 4 || { t_fail "four nodes with a ferryd each"; finish; }
mpi_agent 4
for k in 0 1 2 3; do wait_for "[ \"\$(sessions ${CL}_n$k)\" = 0 ]"; done
fds0=$(daemon_fds $CL 4)

# mpirun_to LOG ARGS...: mpirun -np 8, 2 ranks per node, from node 0.
mpirun_to() {
	local log=$1; shift
	on n0 timeout 120 "${MPI_ENV[@]}" mpirun -np 8 --host node00:2,node01:2,node02:2,node03:2 \
		--mca plm_rsh_agent "$TMP/agent" "$@" >"$TMP/$log" 2>&1 &
	PIDS+=("$!")
	wait $!
}

# ns LOG: the PMIx namespace every rank of the job in LOG saw (one name),
# or nothing.
ns() {
	local v
	v=$(sed -n 's/^rank [0-9]* launcher .*PMIX_NAMESPACE=\([^ ]*\)$/\1/p' "$TMP/$1" | sort -u)
	[ "$(echo "$v" | wc -l)" = 1 ] && [ "$v" != - ] && echo "$v"
}

# Two mpiruns at once, each holding its ranks once they passed their checks
# until the test has looked at the daemons.
mpirun_to a.log "$P" --hold-file "$TMP/go" &
m0=$!
mpirun_to b.log "$P" --hold-file "$TMP/go" &
m1=$!
PIDS+=("$m0" "$m1")
wait_for_long "[ \$(cat '$TMP/a.log' '$TMP/b.log' | grep -c ' launcher ') = 16 ]" 60
na=$(ns a.log) nb=$(ns b.log)
both=$(printf '%s\n' "$na:2/8" "$nb:2/8" | sort | tr '\n' ' ')
expect "two mpirun -np 8 at once: two ferry jobs named by their PMIx namespaces ($na, $nb), 2 of 8 ranks of each on every node" \
	wait_for_long "all_jobs_here $CL 4 '$both'" 30
expect "(two namespaces)" test -n "$na" -a -n "$nb" -a "$na" != "$nb"
touch "$TMP/go"
wait "$m0"; r0=$?
wait "$m1"; r1=$?
expect "both mpiruns exit 0" test "$r0$r1" = 00
expect "every rank on its node, 2 steps of all-to-all, allreduce, alltoall, barrier" placed "$TMP/a.log" 8 2 ||
	sed 's/^/#   /' "$TMP/a.log"
expect "(the other job)" placed "$TMP/b.log" 8 2 || sed 's/^/#   /' "$TMP/b.log"
expect "every daemon idle, open files at the baseline ($fds0)" \
	wait_for_long "daemons_idle $CL 4 && [ \"\$(daemon_fds $CL 4)\" = '$fds0' ]" 20
expect "ferryd exits cleanly on every node" stop_cluster $CL 4
finish
