#!/bin/bash
# tests/integration/mpi_order.sh - valid MPI programs whose ranks call
# operations in orders MPI allows (tests/mpi/fm_order.c): non-blocking
# collectives on one communicator while the other ranks are in a barrier
# and a dup on another first (ferry's 64 requests per job must leave room
# for every communicator's next operation), point-to-point waits (MPI_Wait,
# MPI_Recv) of a rank whose non-blocking collectives wait in libferry-mpi's
# queue while its peer waits for them.  Results equal MPI's alone; an
# alarm ends a hang.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/../mpi/lib.sh"
mpi_cluster 2
P="$BUILD/tests/fm_order"
expect "the program runs through ferry without hanging (2 nodes x 2 ranks)" \
	mpi_run fy c_n0 c_n0 c_n1 c_n1 -- -- "$P" "$TMP/fy"
expect "MPI alone runs it" mpi_run off c_n0 c_n0 c_n1 c_n1 -- FERRY_MPI=off -- "$P" "$TMP/off"
expect "results equal MPI's alone" mpi_same fy off 4
expect "the 70 allreduces and 140 barriers of every rank ran on ferry" \
	test "$(grep -c '^ferry-mpi [0-3]: MPI_I\(allreduce\|barrier\) comm 0: ferry$' "$TMP/fy.log")" = $((4 * 210))
expect "so did the barrier on the dup and the dup of the dup" \
	test "$(grep -c '^ferry-mpi [0-3]: MPI_Comm_dup comm [0-9]*: new communicator [0-9]* on ferry' "$TMP/fy.log")" = 8
[ $FAILED = 0 ] || sed 's/^/#   fy: /' "$TMP/fy.log" | grep -v ': ferry$' | tail -n 30
expect "daemons stop cleanly" stop_cluster c 2
finish
