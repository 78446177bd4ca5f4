#!/bin/bash
# tests/integration/mpi_err.sh - errors through libferry-mpi
# (tests/mpi/fm_err.c checks each one, on communicators whose handler
# returns; MPI_COMM_WORLD's is fatal): an argument only one rank finds
# wrong fails that rank's call at once and the other ranks' operation too,
# instead of leaving them waiting, and the communicator stays broken,
# blocking and not; errors of non-blocking operations raised on their
# communicator; MPI's classes: MPI_ERR_COUNT, MPI_ERR_ARG, MPI_ERR_TRUNCATE
# (in a status of MPI_ERR_IN_STATUS) and MPI_ERR_ROOT.  Through ferry only:
# MPI alone would leave the other ranks waiting.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/../mpi/lib.sh"
mpi_cluster 2
P="$BUILD/tests/fm_err"
t0=$(date +%s)
expect "the program runs through ferry (2 nodes x 2 ranks) and every error is as it must be" \
	mpi_run fy c_n0 c_n0 c_n1 c_n1 -- -- "$P" "$TMP/fy"
grep '^fm_err 0:' "$TMP/fy.log" | sed 's/^/# /'
expect "... within seconds ($(($(date +%s) - t0)) s): no rank waited for one that erred" \
	test $(($(date +%s) - t0)) -lt 20
expect "rank 1 said MPI_ERR_COUNT, ranks 0, 2 and 3 ferry's failure" \
	test "$(cat "$TMP"/fy.[0-3] | grep -c "^gather, rank 1's count negative: MPI_ERR")" = 4 -a \
	"$(grep -c "^gather, rank 1's count negative: MPI_ERR_COUNT " "$TMP/fy.1")" = 1
expect "the non-blocking gather too, its error raised on its communicator" \
	test "$(cat "$TMP"/fy.[0-3] | grep -c "^igather, rank 1's count negative: MPI_ERR_\(COUNT\|ARG\) (handler 1 call")" = 4
expect "a gather rank 1 sends too much to: MPI_ERR_TRUNCATE in MPI_Waitall's status on every rank" \
	test "$(cat "$TMP"/fy.[0-3] | grep -c "^statuses: MPI_ERR_TRUNCATE MPI_SUCCESS MPI_SUCCESS$")" = 4
expect "different roots: MPI_ERR_ROOT on every rank" \
	test "$(cat "$TMP"/fy.[0-3] | grep -c "^bcast, rank 2 names another root: MPI_ERR_ROOT ")" = 4
[ $FAILED = 0 ] || sed 's/^/#   fy: /' "$TMP/fy.log" | grep -v ': ferry$' | tail -n 30
expect "daemons stop cleanly" stop_cluster c 2
finish
