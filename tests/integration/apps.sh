#!/bin/bash
# The applications of tests/apps/ (README "Applications"), small, for their
# correctness only: HPCC RandomAccess under HPCC's rules (its verification,
# the cap on pending updates, a small cap too, one by one and batched),
# bale's histogram, index-gather and random permutation over ferry on 2
# nodes x 2 ranks, each verifying its own result; then their MPI versions
# (hand-packed MPI_Alltoallv and per-item MPI_Isend) where Open MPI is
# installed (SKIP otherwise).  make apps runs the full sizes and the
# comparators (tests/apps/run.sh).
. "$(dirname "$0")/lib.sh"

# app_job JOB PROG PPN ARGS...: PPN ranks of tests/apps' PROG on each node
# of cluster $CL ($CLN nodes), in the background; wait_job JOB checks that
# they all exited 0.
CL=a CLN=2
app_job() {
	local job=$1 prog=$2 ppn=$3 r pids=""
	shift 3
	for r in $(seq 0 $((CLN * ppn - 1))); do
		FERRY_JOB=$job FERRY_RANK=$r FERRY_SIZE=$((CLN * ppn)) FERRY_RUNTIME_DIR=$TMP/${CL}_n$((r / ppn)) \
			bg "$job.$r.log" timeout 120 "$BUILD/apps/$prog" "$@"
		pids="$pids $LASTPID"
	done
	eval "JOB_$job=\"$pids\""
}
# verified JOB APP: rank 0's result line says the app verified its result.
verified() { grep -q "^app=$2 .* verified=yes$" "$TMP/$1.0.log"; }
# field JOB NAME: a NAME=value of rank 0's "#" line.
field() { sed -n "s/^# .* $2=\([0-9]*\).*/\1/p" "$TMP/$1.0.log"; }
# run_app JOB APP PROG ARGS...: runs it and checks its verdict.
run_app() {
	local job=$1 app=$2
	shift 2
	app_job "$job" "$@"
	wait_job "$job" && verified "$job" "$app"
}

start_cluster a 2 'topology: { virtual = "direct"; };' || exit 1

expect "gups: 2^14 words, 4 x as many updates, HPCC's verification passes" \
	run_app g1 gups ferry_gups 2 --log2 14
expect "gups: no more than 1024 updates were pending per process, and some were" \
	test "$(field g1 pending_max)" -le 1024 -a "$(field g1 pending_max)" -gt 0
expect "gups one by one, at most 16 pending: verified" run_app g2 gups ferry_gups 2 --log2 14 --cap 16 --one
expect "gups: the cap of 16 held" test "$(field g2 pending_max)" -le 16 -a "$(field g2 pending_max)" -gt 0
expect "gups: 6 ranks, HPCC's uneven table (2 ranks with a word more)" run_app g3 gups ferry_gups 3 --log2 13 --cap 64
expect "histo: every counter exact" run_app h1 histo ferry_histo 2 --n 20000
expect "histo one by one" run_app h2 histo ferry_histo 2 --n 20000 --one --table 77
expect "ig: every word gathered is the one asked for" run_app i1 ig ferry_ig 2 --n 20000
expect "ig one by one" run_app i2 ig ferry_ig 2 --n 20000 --one --table 77
expect "permute: a permutation (every position once, every element once)" run_app p1 permute ferry_permute 2 --n 20000
expect "permute one by one" run_app p2 permute ferry_permute 2 --n 5000 --one

stop_cluster a 2 >/dev/null

# Six nodes: the end of the two-way exchanges (ferry_ibarrier) on more than
# four nodes, where a barrier that ended early left ranks waiting for
# answers for ever (daemon/plan/barrier.c)
start_cluster b 6 'topology: { virtual = "direct"; };' || exit 1
CL=b CLN=6
expect "ig on 6 nodes x 1: every rank gets every answer" run_app i6 ig ferry_ig 1 --n 20000
expect "gups on 6 nodes x 1: verified" run_app g6 gups ferry_gups 1 --log2 14
stop_cluster b 6 >/dev/null

if ! command -v mpirun >/dev/null || [ ! -x "$BUILD/apps/mpi_bale" ]; then
	echo "ok - $TEST: # SKIP the MPI versions: no Open MPI (packaging/deps.sh bench installs it)"
	finish
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# mpi_ok APP MODE N: 4 ranks over shared memory; rank 0 says verified.
mpi_ok() {
	timeout 120 mpirun --oversubscribe --bind-to none --mca btl vader,self --mca btl_vader_single_copy_mechanism none \
		-np 4 "$BUILD/apps/mpi_bale" "$1" "$2" --n "$3" --chunk 64 >"$TMP/mpi.$1.$2" 2>&1 &&
		grep -q "^app=$1 variant=mpi-$2 .* verified=yes$" "$TMP/mpi.$1.$2"
}
for app in histo ig permute; do
	expect "$app in MPI, hand-packed MPI_Alltoallv: verified" mpi_ok "$app" alltoallv 20000
	expect "$app in MPI, per-item MPI_Isend: verified" mpi_ok "$app" isend 2000
done
finish
