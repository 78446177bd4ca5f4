#!/bin/bash
# tests/integration/mpich.sh - libferry-mpich, the library built against
# MPICH (Debian's, beside Open MPI): mpi_coll.sh's and mpi_pass.sh's
# programs (fm_coll's quick form), built with mpicc.mpich, under MPICH's
# own mpiexec.mpich (hydra) with libferry-mpich.so preloaded, on a 2-node
# ferry cluster, get the results of MPI alone (FERRY_MPI=off), their collectives
# ran in the daemons, and what must pass through does; mpi_wait.sh's
# program (FM_QUICK: late ranks 0.1 s late), whose requests waited for by
# PMPI_* directly end only through MPIX_Grequest_start's poll functions,
# and mpi_order.sh's (without its blocking MPI_Recv, which MPICH gives no
# hook to post during: README, "MPI programs") likewise; mpi_err.sh's
# program gets its errors as under Open MPI (MPI_Waitany's among them,
# where MPICH's tests poll our requests).  mpicc and mpirun stay Open MPI's.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/../mpi/lib.sh"
MPI_IMPL=mpich
mpi_ready

expect "mpicc and mpirun are still Open MPI's (installing MPICH did not switch them)" \
	bash -c "mpirun --version 2>&1 | grep -q 'Open MPI' && mpicc -showme:version 2>&1 | grep -q 'Open MPI'"
start_cluster c 2 || { t_fail "cluster up"; finish; }
# fm_coll in its quick form, on 2 ranks (one a node): MPICH alone spins,
# and 3 ranks on these 2 cores took 6-16 s where 2 take 0.1 s; fm_pass on
# 4 (two a node)
export FM_QUICK=1 FM_NO_RECV=1
for p in coll pass wait order; do
	P="$BUILD/tests/mpich/fm_$p"
	if [ $p = pass ]; then nodes="c_n0 c_n0 c_n1 c_n1"; else nodes="c_n0 c_n1"; fi
	n=$(echo $nodes | wc -w)
	t0=$(date +%s%N)
	expect "fm_$p runs through ferry under mpiexec.mpich ($n ranks, 2 nodes)" mpi_run "$p" $nodes -- -- "$P" "$TMP/$p"
	t1=$(date +%s%N)
	expect "... and with MPI alone (FERRY_MPI=off)" mpi_run "$p.off" $nodes -- FERRY_MPI=off -- "$P" "$TMP/$p.off"
	echo "# fm_$p: through ferry $(((t1 - t0) / 1000000)) ms, MPI alone $((($(date +%s%N) - t1) / 1000000)) ms"
	expect "... with MPI's results on every rank" mpi_same "$p" "$p.off" $n
	expect "... and its collectives ran on ferry" \
		test "$(grep -c '^ferry-mpi [0-9]: MPI_[A-Za-z_]* comm [0-9]*: ferry$' "$TMP/$p.log")" -gt 4
	[ $FAILED = 0 ] || sed "s/^/#   $p: /" "$TMP/$p.log" | grep -v ': ferry$' | tail -n 20
done
echo "# $(grep -c ': ferry$' "$TMP/coll.log") operations of fm_coll on ferry under MPICH"
expect "fm_err's errors are as they must be (3 ranks, 2 nodes; through ferry only)" \
	mpi_run err c_n0 c_n0 c_n1 -- -- "$BUILD/tests/mpich/fm_err" "$TMP/err"
[ $FAILED = 0 ] || sed "s/^/#   err: /" "$TMP/err.log" | grep -v ': ferry$' | tail -n 20
expect "a user-defined op passes through on every rank" \
	test "$(grep -c '^ferry-mpi [0-9]: MPI_Allreduce comm 0: MPI (op not a predefined one ferry has for MPI_INT)$' \
		"$TMP/pass.log")" = 4
expect "the communicators from MPI_Comm_split and MPI_Comm_dup ran on ferry" \
	grep -q '^ferry-mpi 0: MPI_Comm_dup comm [0-9]*: new communicator [0-9]* on ferry' "$TMP/coll.log"
expect "daemons stop cleanly" stop_cluster c 2
finish
