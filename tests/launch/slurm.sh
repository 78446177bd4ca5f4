#!/bin/bash
# ferry jobs started by a real Slurm (Debian's slurm-wlm and munge) on four
# "nodes" (tests/launch/lib.sh): a slurmd beside each node's ferryd,
# slurmctld and the commands in the login namespace, all with their own
# state.  The tasks find everything by themselves: their node's ferryd at
# /run/ferry, the job, rank and size in Slurm's variables.
. "$(dirname "$0")/lib.sh"

netns_ok || launch_skip "needs root and ip netns"
slurm_ok || launch_skip "Slurm or munge not installed (packaging/deps.sh launch)"
# What srun hands every task is the caller's environment: nothing of ferry's.
unset FERRY_RUNTIME_DIR FERRY_JOB FERRY_RANK FERRY_SIZE
P=$BUILD/tests/ft_launch
CL=sl
launch_cluster $CL 4 || { t_fail "four nodes with a ferryd each"; finish; }
slurm_cluster $CL 4 || { t_fail "slurmctld and four slurmds up, every node idle"; finish; }
t_ok "slurmctld and four slurmds up (munge, own state), every node idle"
for k in 0 1 2 3; do wait_for "[ \"\$(sessions ${CL}_n$k)\" = 0 ]"; done
fds0=$(daemon_fds $CL 4)

# localids LOG: in every rank's eyes, Slurm's SLURM_LOCALID is ferry's
# index of the rank among its node's ranks (ferry_local_ranks).
localids() {
	local r l
	for r in $(seq 0 7); do
		l=$(sed -n "s|^rank $r size .* local \([0-9]*\)/.*|\1|p" "$1")
		grep -q "^rank $r launcher .* SLURM_LOCALID=$l " "$1" || { echo "# rank $r: SLURM_LOCALID is not $l"; return 1; }
	done
}

# srun_to LOG ARGS...: srun in the login namespace, output to $TMP/LOG
# (waited for with wait, which a signal to the test interrupts: its cleanup
# is not held up behind the job); srun_ok LOG ARGS...: that, and the 8
# ranks of ft_launch, 2 per node, passed (placed).
srun_to() {
	local log=$1
	shift
	on login timeout 120 srun "$@" >"$TMP/$log" 2>&1 &
	PIDS+=("$!")
	wait $!
}
srun_ok() {
	srun_to "$@" && placed "$TMP/$1" 8 2 && localids "$TMP/$1" && return 0
	sed 's/^/#   /' "$TMP/$1"
	return 1
}

expect "srun -N4 -n8 --ntasks-per-node=2: every rank on its node, 3 steps of all-to-all, allreduce, alltoall, barrier" \
	srun_ok a.log -N4 -n8 --ntasks-per-node=2 "$P" --steps 3

# Two steps of one allocation, one after the other: each is a ferry job of
# its own (slurm-ID.0, then slurm-ID.1), the first gone when the second runs.
on login timeout 120 salloc -N4 -n8 --ntasks-per-node=2 bash -c "
	echo \$SLURM_JOB_ID >'$TMP/alloc.id'
	srun '$P' --hold-file '$TMP/go0' >'$TMP/s0.log' 2>&1 &&
	srun '$P' --hold-file '$TMP/go1' >'$TMP/s1.log' 2>&1" >"$TMP/salloc.log" 2>&1 &
salloc=$!
PIDS+=("$salloc")
wait_for_long "[ -s '$TMP/alloc.id' ]" 30
id=$(cat "$TMP/alloc.id" 2>/dev/null)
expect "step 0 of allocation $id: ferry job slurm-$id.0 with 2 of its 8 ranks on every node, nothing else" \
	wait_for_long "all_jobs_here $CL 4 'slurm-$id.0:2/8 '" 30
touch "$TMP/go0"
expect "step 1: ferry job slurm-$id.1, 2 of 8 ranks on every node; step 0's job is gone" \
	wait_for_long "all_jobs_here $CL 4 'slurm-$id.1:2/8 '" 30
touch "$TMP/go1"
wait "$salloc"
expect "both steps passed their checks, each of 8 ranks" placed "$TMP/s0.log" 8 2
expect "(step 1)" placed "$TMP/s1.log" 8 2

# Two srun jobs at once (4 CPUs per node: both fit): two ferry jobs.
srun_to c0.log -N4 -n8 --ntasks-per-node=2 --job-name=c0 "$P" --hold-file "$TMP/goc" &
c0=$!
srun_to c1.log -N4 -n8 --ntasks-per-node=2 --job-name=c1 "$P" --hold-file "$TMP/goc" &
c1=$!
PIDS+=("$c0" "$c1")
wait_for_long '[ "$(on login squeue -h -o %j -t R | sort | tr "\n" " ")" = "c0 c1 " ]' 30
j0=$(on login squeue -h -n c0 -o %A) j1=$(on login squeue -h -n c1 -o %A)
both=$(printf '%s\n' "slurm-$j0.0:2/8" "slurm-$j1.0:2/8" | sort | tr '\n' ' ')
expect "two srun jobs at once ($j0, $j1): two ferry jobs, 2 of 8 ranks of each on every node" \
	wait_for_long "all_jobs_here $CL 4 '$both'" 30
touch "$TMP/goc"
wait "$c0"; r0=$?
wait "$c1"; r1=$?
expect "both jobs passed their checks" test "$r0$r1" = 00
expect "(job $j0)" placed "$TMP/c0.log" 8 2
expect "(job $j1)" placed "$TMP/c1.log" 8 2

# A heterogeneous job: one step across both components, job-wide ranks.
het() {
	srun_to het.log -N2 -n4 --ntasks-per-node=2 "$P" : -N2 -n4 --ntasks-per-node=2 "$P" &&
		[ "$(grep -c '^rank [0-7] size 8 ' "$TMP/het.log")" = 8 ] && [ "$(grep -c ' ok$' "$TMP/het.log")" = 8 ] &&
		return 0
	sed 's/^/#   /' "$TMP/het.log"
	return 1
}
expect "heterogeneous job (srun -N2 -n4 : -N2 -n4): one ferry job of 8 ranks" het

# srun --mpi=pmix: PMIx's variables beside Slurm's.
expect "srun --mpi=pmix: the same job, with PMIx's variables set" \
	srun_ok pmix.log --mpi=pmix -N4 -n8 --ntasks-per-node=2 "$P"

# sbatch: srun in the script makes step 0; the script itself, started
# without srun, is no rank of anything and says so at once.
cat >"$TMP/batch.sh" <<EOF
#!/bin/bash
'$P' >'$TMP/batch.direct' 2>&1
echo "direct exit \$?" >>'$TMP/batch.direct'
srun '$P' >'$TMP/batch.srun' 2>&1
echo "srun exit \$?" >>'$TMP/batch.srun'
EOF
chmod +x "$TMP/batch.sh"
bj=$(on login sbatch --parsable -N4 -n8 --ntasks-per-node=2 -o "$TMP/batch.out" "$TMP/batch.sh")
wait_for_long "grep -qs 'srun exit' '$TMP/batch.srun'" 60
expect "sbatch $bj: srun in the batch script runs the job" grep -q 'srun exit 0' "$TMP/batch.srun"
expect "(its 8 ranks)" placed "$TMP/batch.srun" 8 2
expect "the batch script itself (no job step) is refused at once: 'start the ranks with srun'" \
	grep -q 'without a job step.*srun' "$TMP/batch.direct"
expect "(exit 1)" grep -q 'direct exit 1' "$TMP/batch.direct"

# mpirun in a batch script: Open MPI starts its orteds with srun (a step
# of their own, whose SLURM_PROCID and SLURM_NTASKS count orteds), and
# they start the ranks: Open MPI's variables must win over Slurm's.
if command -v mpirun >/dev/null; then
	cat >"$TMP/mpi.sh" <<-EOF
	#!/bin/bash
	${MPI_ENV[*]} mpirun -np 8 '$P' >'$TMP/mpi.log' 2>&1
	echo "mpirun exit \$?" >>'$TMP/mpi.log'
	EOF
	chmod +x "$TMP/mpi.sh"
	mj=$(on login sbatch --parsable -N4 -n8 --ntasks-per-node=2 -o "$TMP/mpi.out" "$TMP/mpi.sh")
	wait_for_long "grep -qs 'mpirun exit' '$TMP/mpi.log'" 90
	expect "sbatch $mj running mpirun -np 8: ranks from Open MPI's variables, not the orteds' srun step" \
		grep -q 'mpirun exit 0' "$TMP/mpi.log"
	expect "(every rank on its node, every check passed)" placed "$TMP/mpi.log" 8 2 || sed 's/^/#   /' "$TMP/mpi.log"
	expect "(the ranks saw the orteds' step: rank 7 has its orted's SLURM_PROCID 2 of 3 and SLURM_LOCALID 0)" \
		grep -q "^rank 7 launcher SLURM_JOB_ID=$mj SLURM_STEP_ID=0 SLURM_PROCID=2 SLURM_LOCALID=0 " "$TMP/mpi.log"
else
	echo "ok - $TEST: mpirun in a batch script # SKIP Open MPI not installed (packaging/deps.sh launch)"
fi

# scancel in the middle of an all-to-all: the daemons drop the job and
# come back to where they were.
expect "every daemon idle, open files at the baseline ($fds0) before the cancel" \
	wait_for_long "daemons_idle $CL 4 && [ \"\$(daemon_fds $CL 4)\" = '$fds0' ]" 20
srun_to cancel.log -N4 -n8 --ntasks-per-node=2 --job-name=victim "$BUILD/tests/ft_alltoall" --items 200 \
	--steps 60000 --sync --quiet &
victim=$!
PIDS+=("$victim")
expect "the job to cancel is moving items" wait_for_long "[ \$(cstat $CL 4 items_in) -gt 20000 ]" 60
vj=$(on login squeue -h -n victim -o %A)
on login scancel "$vj"
wait "$victim"
expect "scancel $vj ended the job (its srun says so)" grep -q "CANCELLED\|Terminated\|Killed" "$TMP/cancel.log"
expect "every daemon alive, no endpoint, job, queued item or shared memory left" \
	wait_for_long "daemons_idle $CL 4" 30
expect "the daemons' open files back at the baseline ($(daemon_fds $CL 4))" \
	wait_for_long "[ \"\$(daemon_fds $CL 4)\" = '$fds0' ]" 20
expect "the next srun job runs on the same daemons" srun_ok after.log -N4 -n8 --ntasks-per-node=2 "$P"
expect "ferryd exits cleanly on every node" stop_cluster $CL 4
finish
