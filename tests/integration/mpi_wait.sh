#!/bin/bash
# tests/integration/mpi_wait.sh - waiting through libferry-mpi
# (tests/mpi/fm_wait.c): a rank waiting 1 s for a late rank in MPI_Waitall
# over a ferry request and point-to-point ones, in MPI_Wait and in
# MPI_Barrier sleeps (CPU under a quarter of the wait; Open MPI alone
# spins, shown for comparison); 100 non-blocking allreduces outstanding on
# one communicator (ferry allows 64 per handle); 300 non-blocking calls of
# rank 0 while the others sleep 1 s, which return at once (the operations
# ferry cannot take yet wait in libferry-mpi's queue); 300 scans whose rank 0
# runs ahead of the others (ferryd fails a group 192 operations ahead); a
# communicator that outlives the one it was duplicated from; requests
# waited for by PMPI_Waitall, PMPI_Wait and PMPI_Test directly (a tool,
# Fortran), which MPI's own progress ends through libferry-mpi's hook.
# Results equal MPI's alone.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/../mpi/lib.sh"
mpi_cluster 2
P="$BUILD/tests/fm_wait"
expect "the program runs through ferry, waits sleeping (2 nodes x 2 ranks)" \
	mpi_run fy c_n0 c_n0 c_n1 c_n1 -- FM_EXPECT_SLEEP=1 -- "$P" "$TMP/fy"
grep '^fm_wait:' "$TMP/fy.log" | sed 's/^/# through ferry: /'
expect "MPI alone runs it" mpi_run off c_n0 c_n0 c_n1 c_n1 -- FERRY_MPI=off -- "$P" "$TMP/off"
grep '^fm_wait:' "$TMP/off.log" | sed 's/^/# MPI alone: /'
expect "results equal MPI's alone" mpi_same fy off 4
expect "the 100 allreduces ran on ferry" \
	test "$(grep -c '^ferry-mpi 0: MPI_Iallreduce comm 0: ferry$' "$TMP/fy.log")" -ge 100
# rank 0's non-blocking calls on world: wait's allreduce, the 100, the 300
# (100 of each kind), the 100 allreduces and the bcast waited for by PMPI_*
n_i() { grep -c "^ferry-mpi 0: MPI_I$1 comm 0: ferry\$" "$TMP/fy.log"; }
expect "the 300 non-blocking calls made before the others ran on ferry (every call counted)" \
	test "$(n_i allreduce) $(n_i bcast) $(n_i allgather)" = "301 101 100"
expect "the 300 scans ran on ferry" test "$(grep -c '^ferry-mpi 0: MPI_Scan comm 1: ferry$' "$TMP/fy.log")" = 300
expect "the progress hook is in (no rank says it is missing)" not grep -q 'no progress hook' "$TMP/fy.log"
expect "the communicator made from a freed one ran on ferry" \
	grep -q '^ferry-mpi 0: MPI_Allreduce comm 3: ferry$' "$TMP/fy.log"
[ $FAILED = 0 ] || sed 's/^/#   fy: /' "$TMP/fy.log" | grep -v ': ferry$' | tail -n 30
expect "daemons stop cleanly" stop_cluster c 2
finish
