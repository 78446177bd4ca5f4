#!/bin/bash
# tests/integration/mpi_coll.sh - an unchanged MPI program (tests/mpi/fm_coll.c:
# every collective libferry-mpi intercepts, every predefined reduction type
# and op, in place and not, blocking and non-blocking under every wait and
# test function, on MPI_COMM_WORLD, a split and a dup communicator, with
# point-to-point traffic between and among them) under mpirun with
# LD_PRELOAD=libferry-mpi.so, 6 ranks on a 3-node ferry cluster (1, 2 and 3
# ranks per node), gets the results of the same program run by MPI alone
# (FERRY_MPI=off), and its collectives ran in the daemons.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/../mpi/lib.sh"
mpi_cluster 3
NODES="c_n0 c_n1 c_n1 c_n2 c_n2 c_n2"
samples() {
	local k
	for k in 0 1 2; do "$BUILD/ferryctl" --runtime-dir "$TMP/c_n$k" stats; done |
		awk '$1 == "coll" { for (i = 2; i < NF; i++) if ($i == "cost_samples") s += $(i + 1) } END { print s + 0 }'
}

s0=$(samples)
t0=$(date +%s%N)
expect "the program runs through ferry (6 ranks, 3 nodes)" mpi_run fy $NODES -- -- "$BUILD/tests/fm_coll" "$TMP/fy"
t1=$(date +%s%N)
s1=$(samples)
expect "MPI alone runs it (FERRY_MPI=off)" mpi_run off $NODES -- FERRY_MPI=off -- "$BUILD/tests/fm_coll" "$TMP/off"
t2=$(date +%s%N)
s2=$(samples)
echo "# through ferry $(((t1 - t0) / 1000000)) ms, MPI alone $(((t2 - t1) / 1000000)) ms;" \
	"$(grep -c ': ferry$' "$TMP/fy.log") operations on ferry"
expect "every rank's results are MPI's" mpi_same fy off 6

# what the log says, per operation
on_ferry() {
	local what rest
	for what in MPI_Barrier MPI_Bcast MPI_Gather MPI_Gatherv MPI_Scatter MPI_Scatterv MPI_Allgather \
		MPI_Allgatherv MPI_Alltoall MPI_Alltoallv MPI_Reduce MPI_Allreduce MPI_Scan MPI_Exscan \
		MPI_Reduce_scatter MPI_Reduce_scatter_block; do
		rest=${what#MPI_}
		for c in 0 1 2; do
			grep -q "^ferry-mpi [0-9]*: $what comm $c: ferry$" "$TMP/fy.log" &&
				grep -q "^ferry-mpi [0-9]*: MPI_I${rest,} comm $c: ferry$" "$TMP/fy.log" ||
				{ echo "# $what or its non-blocking form on comm $c did not run on ferry"; return 1; }
		done
	done
}
expect "every operation ran on ferry, blocking and not, on world, split and dup" on_ferry
# ranks that pass through a collective of a ferry communicator do so for a
# reason every rank shares; none here (every type and op is ferry's)
passed() { grep '^ferry-mpi [0-9]: .*: MPI (' "$TMP/fy.log" | grep -v ': MPI (datatype not one ferry reduces: MPI_OFFSET)$'; }
expect "nothing passed through but MPI_OFFSET's reductions" not passed
expect "the communicators came from ferry_split" grep -q 'MPI_Comm_dup comm 1: new communicator 2 on ferry' "$TMP/fy.log"
expect "the daemons ran them (cost_samples $s0 -> $s1)" test "$s1" -gt $((s0 + 1000))
expect "FERRY_MPI=off: everything passes through" \
	grep -q 'MPI_Init: everything passes through (FERRY_MPI=off)' "$TMP/off.log"
expect "FERRY_MPI=off: the daemons ran nothing ($s1 -> $s2)" test "$s2" = "$s1"
[ $FAILED = 0 ] || sed 's/^/#   fy: /' "$TMP/fy.log" | grep -v ': ferry$' | tail -n 20
expect "daemons stop cleanly" stop_cluster c 3
finish
