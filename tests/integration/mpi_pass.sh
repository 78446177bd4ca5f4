#!/bin/bash
# tests/integration/mpi_pass.sh - what libferry-mpi leaves to MPI, and when
# a whole job passes through (tests/mpi/fm_pass.c checks every result it
# computes): reductions with a derived datatype, a user-defined op,
# MPI_MAXLOC and MPI_LONG_DOUBLE, and collectives on communicators not made
# from a ferry one, pass through on every rank (the log says why), while a
# broadcast whose root sends a derived vector and whose other ranks take
# ints runs on ferry on every rank (so does one of a type that swaps its
# two ints, packed: its bytes are not in signature order); results equal
# MPI's alone.  A node
# without ferryd makes the whole job pass through at MPI_Init (no timeout),
# and so does MPI_THREAD_MULTIPLE, and FERRY_MPI off in any usual spelling
# (or one not understood: with a warning).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/../mpi/lib.sh"
mpi_cluster 2
P="$BUILD/tests/fm_pass"
expect "the program runs through ferry (2 nodes x 2 ranks)" mpi_run fy c_n0 c_n0 c_n1 c_n1 -- -- "$P" "$TMP/fy"
expect "MPI alone runs it" mpi_run off c_n0 c_n0 c_n1 c_n1 -- FERRY_MPI=off -- "$P" "$TMP/off"
expect "results equal MPI's alone" mpi_same fy off 4

# every rank logs each call; 4 lines of a reason = every rank took MPI
says() { [ "$(grep -c "^ferry-mpi [0-9]: $1\$" "$TMP/fy.log")" = 4 ] || { echo "# not 4 times: $1"; return 1; }; }
expect "a user-defined op passes through" says 'MPI_Allreduce comm 0: MPI (op not a predefined one ferry has for MPI_INT)'
expect "a derived datatype's reduction passes through" \
	says 'MPI_Allreduce comm 0: MPI (datatype not one ferry reduces: a derived datatype)'
expect "MPI_MAXLOC passes through" says 'MPI_Allreduce comm 0: MPI (datatype not one ferry reduces: MPI_2INT)'
expect "MPI_LONG_DOUBLE's reduction passes through" says 'MPI_Allreduce comm 0: MPI (datatype not one ferry reduces: MPI_LONG_DOUBLE)'
expect "a bcast of a vector to ints, and one of a type that swaps its ints, run on ferry on every rank" \
	test "$(grep -c '^ferry-mpi [0-9]: MPI_Bcast comm 0: ferry$' "$TMP/fy.log")" = 8
expect "MPI_Comm_split_type's (4 ranks) and MPI_Comm_create's (rank 0) communicators pass through" \
	test "$(grep -c '^ferry-mpi [0-9]: MPI_Allreduce: MPI (communicator not on ferry)$' "$TMP/fy.log")" = 5
expect "an intercommunicator's bcast passes through" \
	test "$(grep -c '^ferry-mpi [0-9]: MPI_Bcast: MPI (communicator not on ferry)$' "$TMP/fy.log")" = 4

# node 1's ranks find no daemon: the whole job passes through at once
mkdir -p "$TMP/nod"
t0=$(date +%s)
expect "without ferryd on one node the program runs" mpi_run nod c_n0 c_n0 nod nod -- -- "$P" "$TMP/nod"
expect "... in MPI alone, within seconds ($(($(date +%s) - t0)) s)" test $(($(date +%s) - t0)) -lt 20
expect "... with MPI's results" mpi_same nod off 4
expect "... the ranks without ferryd say why" \
	test "$(grep -c "MPI_Init: everything passes through (no ferryd at $TMP/nod/ferryd.sock" "$TMP/nod.log")" = 2
expect "... and the others that another rank cannot" \
	test "$(grep -c 'MPI_Init: everything passes through (another rank cannot use ferry)' "$TMP/nod.log")" = 2
expect "... and no call ran on ferry" not grep -q ': ferry$' "$TMP/nod.log"

expect "MPI_THREAD_MULTIPLE: the program runs" mpi_run mt c_n0 c_n0 c_n1 c_n1 -- FM_THREAD_MULTIPLE=1 -- "$P" "$TMP/mt"
if grep -q 'provided less' "$TMP/mt.0" 2>/dev/null; then
	echo "ok - $TEST: MPI_THREAD_MULTIPLE passes through # SKIP this MPI does not provide MPI_THREAD_MULTIPLE"
else
	expect "MPI_THREAD_MULTIPLE: everything passes through" \
		test "$(grep -c 'MPI_Init: everything passes through (MPI_THREAD_MULTIPLE)' "$TMP/mt.log")" = 4
fi
# FERRY_MPI's spellings, one rank each: off in any usual spelling and case,
# on likewise (and empty), anything else off with one warning
spelled() {
	local v=$1 want=$2 out=sp$3
	mpi_run "$out" c_n0 -- "FERRY_MPI=$v" -- "$P" "$TMP/$out" || return 1
	case $want in
	on) grep -q '^ferry-mpi 0: MPI_Init comm 0: on ferry' "$TMP/$out.log" ;;
	off) grep -q "^ferry-mpi 0: MPI_Init: everything passes through (FERRY_MPI=$v)\$" "$TMP/$out.log" &&
		! grep -q 'is neither on' "$TMP/$out.log" ;;
	warn) [ "$(grep -c "^ferry-mpi 0: FERRY_MPI=$v is neither on .* everything passes through to MPI\$" \
		"$TMP/$out.log")" = 1 ] && grep -q "^ferry-mpi 0: MPI_Init: everything passes through (FERRY_MPI=$v)\$" \
		"$TMP/$out.log" ;;
	esac
}
i=0
for v in No FALSE Disable oFF; do
	i=$((i + 1))
	expect "FERRY_MPI=$v passes everything through" spelled "$v" off $i
done
for v in YES True ""; do
	i=$((i + 1))
	expect "FERRY_MPI=$v runs on ferry" spelled "$v" on $i
done
expect "FERRY_MPI=maybe passes everything through, with one warning" spelled maybe warn 9
[ $FAILED = 0 ] || sed 's/^/#   fy: /' "$TMP/fy.log" | tail -n 30
expect "daemons stop cleanly" stop_cluster c 2
finish
