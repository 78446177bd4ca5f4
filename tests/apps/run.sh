#!/bin/bash
# tests/apps/run.sh BUILD OUT [quick] - the applications (make apps,
# APPS_QUICK=1 for the subset; the apps family of make bench runs it too):
# every app of tests/apps/ on local clusters (one ferryd per simulated
# node, on loopback TCP), beside its comparators in the same invocation:
#
#   gups     ferry_gups (HPCC RandomAccess under HPCC's rules) and Debian's
#            hpcc with the same processes and table size: its
#            MPIRandomAccess_GUPs over TCP (btl tcp,self) and over shared
#            memory (btl vader,self: the single-host bound)
#   histo    ferry_histo, mpi_bale histo (hand-packed MPI_Alltoallv, per-item
#   ig       MPI_Isend), the same for ig and permute; the MPI versions over
#   permute  TCP
#
# Every ferry app runs in both core layouts: cores=own (every ferryd on a
# core of its own, CPU 1; the app's processes on CPU 0: tests/bench/lib.sh's
# "pinned") and cores=shared (everything on both cores).  MPI and hpcc runs
# are always shared.  Prints one line per measurement,
#
#   app=<gups|histo|ig|permute> variant=<ferry|mpi-alltoallv|mpi-isend|hpcc-tcp|hpcc-shm>
#   cores=<shared|own> nodes=<N> procs=<P> rate=<items or updates per second> verified=<yes|no>
#
# (one line), and writes OUT/apps.csv (the same, with the run and the
# details the apps print) and OUT/hpcc-*.txt (hpcc's output files).  A
# failed or unverified run prints verified=no (rate nan if it failed) and
# makes the script exit 1.  Table sizes and items: below (full: 2.5-3
# minutes on a 2-core VM; quick: half a minute; APPS_WIDE=1, make
# bench-apps's: 4 and 8 nodes with 1 and 2 processes each, about 5).
. "$(dirname "$0")/../bench/lib.sh" "$@"
B=$BUILD/apps           # ferry_ranks and mpi run the apps' programs
JOB_TIMEOUT=300         # no run takes a tenth of it: one that does is hung
# Runs: APPS_RUNS of RandomAccess and hpcc (minutes each), BALE_RUNS of the
# bale apps (APPS_RUNS unless said), whose timed parts last tens of
# milliseconds at these sizes: three runs of histo over 4 x 1 in a row gave
# ferry 106-114 M items/s and MPI_Alltoallv 84-123 M here, so make
# bench-apps takes the median of 3 (the ratios run by run: ferry and MPI of
# one run ran one after the other).
APPS_RUNS=${APPS_RUNS:-1}
export FAPP_DEBUG=1     # the apps say when a rank waited a second for nothing (fapp.h)
BALE_RUNS=${BALE_RUNS:-$APPS_RUNS}

# nodes:processes per node
if [ -n "$QUICK" ]; then
	GUPS_LOG2=20 BALE_N=262144 GUPS_LAYOUTS="4:2" LAYOUTS="4:2"
elif [ -n "${APPS_WIDE:-}" ]; then
	# make bench-apps: 4 and 8 nodes, 1 and 2 processes per node
	GUPS_LOG2=23 BALE_N=1048576 GUPS_LAYOUTS="4:2 8:1" LAYOUTS="4:1 4:2 8:1 8:2"
else
	# the issue's size: 8 processes, a table of 2^23 words
	GUPS_LOG2=23 BALE_N=1048576 GUPS_LAYOUTS="4:2" LAYOUTS="4:2 8:2"
fi
ISEND_DIV=16

CSV=$OUT/apps.csv
[ -f "$CSV" ] || echo "app,variant,cores,nodes,procs,rate,verified,run,detail" >"$CSV"
RC=0

# result APP VARIANT CORES NODES PROCS RUN FILE: the line for the run whose
# output is FILE (its "app=" line and the "#" line after it).
result() {
	local app=$1 variant=$2 cores=$3 nodes=$4 procs=$5 run=$6 f=$7 rate verified detail
	rate=$(sed -n 's/^app=.* rate=\([^ ]*\) .*/\1/p' "$f" | head -n 1)
	verified=$(sed -n 's/^app=.* verified=\([a-z]*\).*/\1/p' "$f" | head -n 1)
	detail=$(grep -m 1 '^# ' "$f" | sed 's/^# [a-z]* //; s/,/;/g')
	[ -n "$rate" ] || rate=nan
	[ "$verified" = yes ] || { verified=no; RC=1; }
	echo "app=$app variant=$variant cores=$cores nodes=$nodes procs=$procs rate=$rate verified=$verified"
	echo "$app,$variant,$cores,$nodes,$procs,$rate,$verified,$run,$detail" >>"$CSV"
}

# ferry_app APP NODES PPN RUN ARGS...: the ferry version in both layouts.
ferry_app() {
	local app=$1 nodes=$2 ppn=$3 run=$4 lay cores
	shift 4
	for lay in pinned shared; do
		layout "$lay"
		cores=$([ $lay = pinned ] && echo own || echo shared)
		ferry_ranks "ferry_$app" "$ppn" "$@" ||
			log "ferry_$app failed ($cores): $(grep -hv '^app=\|^#' "$TMP"/job.* | head -3)"
		# (FAPP_DEBUG: a rank that waited a second for nothing, which
		# the rate shows too)
		grep -q "a second without" "$TMP"/job.* &&
			log "ferry_$app ($cores): $(grep -h "a second without" "$TMP"/job.* | head -2 | tr '\n' ' ')"
		result "$app" ferry "$cores" "$nodes" $((nodes * ppn)) "$run" "$TMP/job.0"
	done
}

# mpi_app APP MODE NODES PPN RUN ARGS...: mpi_bale over TCP, shared (lib.sh's
# mpi, with a timeout).
mpi_app() {
	local app=$1 mode=$2 nodes=$3 ppn=$4 run=$5
	shift 5
	layout shared
	# shellcheck disable=SC2086
	timeout "$JOB_TIMEOUT" $MPIRUN -np $((nodes * ppn)) $MPI_TCP "${APP[@]}" "$B/mpi_bale" "$app" "$mode" "$@" \
		>"$TMP/mpi.out" 2>"$TMP/mpi.err" ||
		log "mpi_bale $app $mode failed: $(head -3 "$TMP/mpi.err")"
	result "$app" "mpi-$mode" shared "$nodes" $((nodes * ppn)) "$run" "$TMP/mpi.out"
}

# hpcc_run NP TRANSPORT LOG2 OUTFILE: Debian's hpcc with NP processes, its
# MPIRandomAccess table 2^LOG2 words; hpccoutf.txt to OUTFILE.  hpcc sizes
# that table from HPL's largest N and smallest grid (the largest power of
# two up to N^2 x 8 bytes / (P x Q) x NP / 8 words), and runs every
# benchmark: with a 1 x 1 grid among its grids and N = ceil(sqrt(2^LOG2 /
# NP)) the table is 2^LOG2 words and HPL stays small.  hpcc cuts the
# updates to what it expects to finish within its time bound (60 s here):
# MPIRandomAccess_ExeUpdates says how many it made, and its GUP/s are those.
hpcc_run() {
	local np=$1 tr=$2 log2=$3 out=$4 n p=1 q d dir=$TMP/hpcc
	n=$(awk -v t="$log2" -v np="$np" 'BEGIN { x = sqrt(2 ^ t / np); n = int(x); if (n < x) n++; print n }')
	# the other grid: P x Q = NP, P the largest divisor up to sqrt(NP)
	for d in $(seq 1 "$np"); do
		[ $((d * d)) -le "$np" ] && [ $((np % d)) = 0 ] && p=$d
	done
	q=$((np / p))
	rm -rf "$dir"
	mkdir -p "$dir"
	{
		printf 'HPLinpack benchmark input file\nInnovative Computing Laboratory, University of Tennessee\n'
		printf 'HPL.out      output file name (if any)\n8            device out (6=stdout,7=stderr,file)\n'
		printf '1            # of problems sizes (N)\n%s          Ns\n1            # of NBs\n80           NBs\n' "$n"
		printf '0            PMAP process mapping (0=Row-,1=Column-major)\n'
		printf '2            # of process grids (P x Q)\n1 %s          Ps\n1 %s          Qs\n' "$p" "$q"
		printf '16.0         threshold\n1            # of panel fact\n2            PFACTs\n'
		printf '1            # of recursive stopping criterium\n4            NBMINs\n1            # of panels in recursion\n'
		printf '2            NDIVs\n1            # of recursive panel fact.\n1            RFACTs\n1            # of broadcast\n'
		printf '1            BCASTs\n1            # of lookahead depth\n1            DEPTHs\n2            SWAP\n'
		printf '64           swapping threshold\n0            L1 in (0=transposed,1=no-transposed) form\n'
		printf '0            U  in (0=transposed,1=no-transposed) form\n1            Equilibration (0=no,1=yes)\n'
		printf '8            memory alignment in double (> 0)\n'
		printf '##### This line (no. 32) is ignored (it serves as a separator). ######\n'
		printf '0                      \t\tNumber of additional problem sizes for PTRANS\n1200 10000 30000        \tvalues of N\n'
		printf '0                       \tnumber of additional blocking sizes for PTRANS\n40 9 8 13 13 20 16 32 64       \tvalues of NB\n'
	} >"$dir/hpccinf.txt"
	# shellcheck disable=SC2086
	(cd "$dir" && timeout 900 $MPIRUN -np "$np" $tr hpcc >"$dir/stdout" 2>"$TMP/mpi.err")
	cp "$dir/hpccoutf.txt" "$out" 2>/dev/null
}

# hpcc_app NODES PPN TRANSPORT-NAME RUN: the gups line of an hpcc run.
hpcc_app() {
	local nodes=$1 ppn=$2 trn=$3 run=$4 np f tr g n e x ok
	np=$((nodes * ppn))
	f=$OUT/hpcc-$trn-$nodes-$ppn-$GUPS_LOG2-$run.txt
	tr=$([ "$trn" = tcp ] && echo "$MPI_TCP" || echo "$MPI_SHM")
	layout shared
	hpcc_run "$np" "$tr" "$GUPS_LOG2" "$f" || log "hpcc ($trn) failed: $(head -3 "$TMP/mpi.err")"
	g=$(sed -n 's/^MPIRandomAccess_GUPs=//p' "$f" 2>/dev/null)
	n=$(sed -n 's/^MPIRandomAccess_N=//p' "$f" 2>/dev/null)
	e=$(sed -n 's/^MPIRandomAccess_Errors=//p' "$f" 2>/dev/null)
	x=$(sed -n 's/^MPIRandomAccess_ExeUpdates=//p' "$f" 2>/dev/null)
	ok=no
	if [ -n "$g" ] && [ "$n" = $((1 << GUPS_LOG2)) ] && awk -v e="$e" -v n="$n" 'BEGIN { exit !(e <= 0.01 * n) }'; then
		ok=yes
	elif [ -n "$n" ] && [ "$n" != $((1 << GUPS_LOG2)) ]; then
		log "hpcc ($trn): a table of $n words, not 2^$GUPS_LOG2"
	fi
	{
		echo "app=gups variant=hpcc-$trn procs=$np rate=$(awk -v g="${g:-nan}" 'BEGIN { print g == "nan" ? "nan" : g * 1e9 }') verified=$ok"
		echo "# gups gup_s=${g:-nan} table=$n updates=$x errors=$e (hpcc's MPIRandomAccess; the LCG variant: $(sed -n 's/^MPIRandomAccess_LCG_GUPs=//p' "$f" 2>/dev/null) GUP/s)"
	} >"$TMP/hpcc.line"
	result gups "hpcc-$trn" shared "$nodes" "$np" "$run" "$TMP/hpcc.line"
}

log "applications ($([ -n "$QUICK" ] && echo quick || echo full)): gups 2^$GUPS_LOG2 words on $GUPS_LAYOUTS ($APPS_RUNS run(s)), bale N=$BALE_N per rank on $LAYOUTS ($BALE_RUNS run(s)) (nodes:processes per node)"
for run in $(seq $((APPS_RUNS > BALE_RUNS ? APPS_RUNS : BALE_RUNS))); do
	[ "$run" -le "$APPS_RUNS" ] && for l in $GUPS_LAYOUTS; do
		IFS=: read -r nodes ppn <<<"$l"
		cluster apps "$nodes" 'topology: { virtual = "direct"; };'
		ferry_app gups "$nodes" "$ppn" "$run" --log2 "$GUPS_LOG2"
		if command -v hpcc >/dev/null; then
			hpcc_app "$nodes" "$ppn" tcp "$run"
			hpcc_app "$nodes" "$ppn" shm "$run"
		else
			log "no hpcc (packaging/deps.sh bench installs it): no hpcc lines"
			RC=1
		fi
	done
	[ "$run" -le "$BALE_RUNS" ] && for l in $LAYOUTS; do
		IFS=: read -r nodes ppn <<<"$l"
		cluster apps "$nodes" 'topology: { virtual = "direct"; };'
		for app in histo ig permute; do
			ferry_app "$app" "$nodes" "$ppn" "$run" --n "$BALE_N"
			mpi_app "$app" alltoallv "$nodes" "$ppn" "$run" --n "$BALE_N"
			# per-item sends take 50-100 times as long: fewer items
			mpi_app "$app" isend "$nodes" "$ppn" "$run" --n $((BALE_N / ISEND_DIV))
		done
	done
done
end_cluster
exit $RC
