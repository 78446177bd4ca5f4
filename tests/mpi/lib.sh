# tests/mpi/lib.sh - sourced by tests/integration/mpi_*.sh and mpich.sh
# after lib.sh: MPI programs (tests/mpi/) under Open MPI's mpirun (or
# MPICH's mpiexec.mpich) on one host, with a
# local ferry cluster whose "nodes" are daemons with runtime directories of
# their own.
#
# mpi_ready: says SKIP and finishes the test where Open MPI or
# libferry-mpi is missing (packaging/deps.sh installs Open MPI; make builds
# libferry-mpi when mpicc is there); mpi_cluster N: that, then N nodes.
# mpi_run OUT NODE_OF... [-- ENV=VALUE...] -- PROG ARGS: one rank per
# NODE_OF (rank r on the daemon of $TMP/NODE_OF[r]), the program preloaded
# with libferry-mpi; FERRY_MPI_LOG=1, the ranks' stderr in $TMP/OUT.log,
# rank after rank (mpirun's own copy, where it splices the ranks' lines
# together when they come fast, and its messages in $TMP/OUT.mpirun).
# Each rank finds its daemon through FERRY_RUNTIME_DIR, set by a wrapper
# from OMPI_COMM_WORLD_RANK (mpirun gives every rank one environment).
#
# With MPI_IMPL=mpich (set by the test after sourcing this): MPICH's
# mpiexec.mpich (hydra), libferry-mpich.so and the programs built with
# mpicc.mpich ($BUILD/tests/mpich/); the wrapper takes the rank from
# PMI_RANK, preloads the library itself (not into mpiexec) and writes the
# rank's stderr where mpirun --output-filename would.
MPI_IMPL=openmpi

mpi_ready() {
	local why=""
	if [ "$MPI_IMPL" = mpich ]; then
		if ! command -v mpiexec.mpich >/dev/null 2>&1; then
			why="no mpiexec.mpich (packaging/deps.sh installs MPICH)"
		elif [ ! -e "$BUILD/libferry-mpich.so" ]; then
			why="libferry-mpich not built in $BUILD (there was no mpicc.mpich)"
		fi
	elif ! command -v mpirun >/dev/null 2>&1; then
		why="no mpirun (packaging/deps.sh installs Open MPI)"
	elif [ ! -e "$BUILD/libferry-mpi.so" ]; then
		why="libferry-mpi not built in $BUILD (there was no mpicc)"
	fi
	if [ -n "$why" ]; then
		echo "ok - $TEST: # SKIP $why"
		finish
	fi
}

# mpi_cluster N: mpi_ready, then a local ferry cluster of N nodes (c_n0...),
# or the test fails and finishes.
mpi_cluster() {
	mpi_ready
	start_cluster c "$1" || { t_fail "cluster up"; finish; }
}

mpi_run() {
	local out=$1 n=0 where="" w pre asan
	shift
	local -a env=()
	while [ $# -gt 0 ] && [ "$1" != -- ]; do where="$where $1"; n=$((n + 1)); shift; done
	shift
	while [ $# -gt 0 ] && [ "$1" != -- ]; do env+=(-x "$1"); shift; done
	shift
	# a sanitizer build's library needs the ASan runtime first; Open MPI
	# leaks (its components' memory, unloaded at MPI_Finalize, is a leak
	# of an unknown module that no suppression can name)
	pre=$BUILD/libferry-mpi.so
	[ "$MPI_IMPL" != mpich ] || pre=$BUILD/libferry-mpich.so
	asan=$(ldd "$pre" | awk '$1 ~ /^libasan/ { print $3 }')
	[ -z "$asan" ] || { pre=$asan:$pre; env+=(-x ASAN_OPTIONS=detect_leaks=0); }
	w=$TMP/where.$out
	{
		echo '#!/bin/sh'
		echo "set -- $where \"\$@\""
		if [ "$MPI_IMPL" = mpich ]; then
			echo 'r=$PMI_RANK'
		else
			echo 'r=$OMPI_COMM_WORLD_RANK'
		fi
		echo 'i=0; for d in "$@"; do [ $i = "$r" ] && dir=$d; i=$((i + 1)); done'
		echo "shift $n"
		if [ "$MPI_IMPL" = mpich ]; then
			echo "mkdir -p $TMP/$out.ranks/1/rank.\$r"
			echo "LD_PRELOAD=$pre FERRY_RUNTIME_DIR=$TMP/\$dir exec \"\$@\" 2>$TMP/$out.ranks/1/rank.\$r/stderr"
		else
			echo "FERRY_RUNTIME_DIR=$TMP/\$dir exec \"\$@\""
		fi
	} >"$w"
	chmod +x "$w"
	# mpirun kills the job's other ranks when one fails; timeout ends a
	# hang (and cleanup the daemons)
	if [ "$MPI_IMPL" = mpich ]; then
		# hydra hands every rank mpiexec's environment
		local -a vars=(FERRY_MPI_LOG=1)
		while [ ${#env[@]} -gt 0 ]; do vars+=("${env[1]}"); env=("${env[@]:2}"); done
		TMPDIR=$TMP timeout -k 5 90 env "${vars[@]}" mpiexec.mpich -n "$n" "$w" "$@" >"$TMP/$out.mpirun" 2>&1
	else
		# (Open MPI's session files under $TMP too, which cleanup removes)
		TMPDIR=$TMP timeout -k 5 90 mpirun --allow-run-as-root --oversubscribe -np "$n" \
			--output-filename "$TMP/$out.ranks" -x LD_PRELOAD="$pre" -x FERRY_MPI_LOG=1 "${env[@]}" \
			"$w" "$@" >"$TMP/$out.mpirun" 2>&1
	fi
	local rc=$? r
	for r in $(seq 0 $((n - 1))); do cat "$TMP/$out.ranks/1/rank.$r/stderr" 2>/dev/null; done >"$TMP/$out.log"
	[ $rc = 0 ] || tail -n 20 "$TMP/$out.mpirun" | sed 's/^/mpirun: /' >>"$TMP/$out.log"
	return $rc
}

# mpi_same A B N: the N ranks' result files of runs A and B are the same.
mpi_same() {
	local a=$1 b=$2 n=$3 r
	for r in $(seq 0 $((n - 1))); do
		[ -s "$TMP/$a.$r" ] || { echo "# $a.$r is empty or missing"; return 1; }
		if ! cmp -s "$TMP/$a.$r" "$TMP/$b.$r"; then
			echo "# rank $r: $a and $b differ:"
			diff "$TMP/$a.$r" "$TMP/$b.$r" | head -n 10 | sed 's/^/#   /'
			return 1
		fi
	done
}
