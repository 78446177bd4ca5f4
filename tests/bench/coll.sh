#!/bin/bash
# tests/bench/coll.sh BUILD OUT [quick] - the collectives family (make
# bench-coll): the all-to-alls the daemons run (ferry_alltoall,
# ferry_alltoallv, ferry_ialltoall) against Open MPI's, after Kalé, Kumar
# and Varadarajan's Figs. 6-11, in both core layouts (lib.sh), taking turns
# run by run.  Writes OUT/coll.csv and OUT/overlap.csv.
#
#   alltoall  8 nodes x 2 ranks, blocks of 1 B to 64 KiB (76 and 476 B
#             among them, the paper's): every strategy forced (direct, mesh,
#             grid3d, hypercube) and the automatic choice, ferry_alloc
#             buffers (the daemon reads and writes them in place), and the
#             automatic choice with ordinary buffers (staged: copied into
#             shared memory and back); against MPI_Alltoall with 16
#             processes over TCP (btl tcp,self) and over Open MPI's shared
#             memory (vader, the single-host bound).
#   many      the many-to-many of §4.1 on the same cluster: rank i sends a
#             block to ranks i+1 .. i+delta (mod P) with ferry_alltoallv, zero
#             counts elsewhere, delta = 1, 2, 4, 8, blocks of 8 and 256 B, every
#             strategy and the automatic choice (ferry_alloc buffers), against
#             MPI_Alltoallv (TCP) the same way.
#   overlap   4 nodes x 1 rank: ferry_ialltoall overlapped with a compute
#             loop, measured as OSU's osu_ialltoall does (fb_coll.c), with
#             ferry_alloc and with staged buffers, against MPI_Ialltoall
#             (TCP).  Pinned, the 4 ranks share CPU 0 and the daemons CPU 1.
#
# Times per operation are means over back-to-back operations after a
# warm-up (fb_coll.c; about TARGET seconds of them per point), the slowest
# rank's; every point checks its first and its last operation's bytes.
# The daemons form one virtual dimension ("direct": every node linked to
# every other, as on the paper's switched network), so that the strategy
# alone decides the route; no cluster key (integrity off).
. "$(dirname "$0")/lib.sh" "$@"

STRATEGIES="auto direct mesh grid3d hypercube"
LAYOUTS="pinned shared"
if [ -n "$QUICK" ]; then
	BLOCKS="8 76 256 4096"; MANY_BLOCKS="8"; DELTAS="1 8"; OVL_BLOCKS="16384 262144"
	TARGET=0.05; WARMUP=2
else
	BLOCKS="1 8 64 76 256 476 1024 4096 16384 65536"; MANY_BLOCKS="8 256"; DELTAS="1 2 4 8"
	OVL_BLOCKS="1024 16384 65536 262144 1048576"; TARGET=0.1; WARMUP=3
fi
TIMING=(--target-s "$TARGET" --warmup "$WARMUP")

COLL=$OUT/coll.csv
echo "part,variant,strategy,buffers,nodes,ppn,procs,block,delta,run,iters,seconds_per_op,auto_chose,layout" >"$COLL"
OVL=$OUT/overlap.csv
echo "variant,buffers,nodes,ppn,procs,block,run,iters,comm_s,compute_s,total_s,compute_in_s,post_s,wait_s,overlap_pct,layout" >"$OVL"

# points N FILE...: the "point" lines of N ranks' outputs (fb_coll's every
# rank, or mb_coll's rank 0, N = 1), one line per point that all N printed:
# "op strategy buf block delta" then "field value" pairs: iters and
# per_op_s the largest (the slowest rank), the overlap's times the ranks'
# means (as OSU reports them).
points() {
	local n=$1
	shift
	awk -v n="$n" '$1 == "point" {
		k = $3 " " $5 " " $7 " " $9 " " $11
		if (!(k in c)) order[++nk] = k
		c[k]++
		for (i = 12; i < NF; i += 2) {
			f = $i; v = $(i + 1) + 0
			if (!((k, f) in m)) { fl[k] = fl[k] " " f; m[k, f] = (f == "iters" || f == "per_op_s") ? v : 0 }
			if (f == "iters" || f == "per_op_s") { if (v > m[k, f]) m[k, f] = v }
			else m[k, f] += v / n
		}
	} END {
		for (j = 1; j <= nk; j++) {
			k = order[j]
			if (c[k] != n) continue
			printf "%s", k; nf = split(fl[k], fs, " ")
			for (i = 1; i <= nf; i++) printf " %s %.9g", fs[i], m[k, fs[i]]
			print ""
		}
	}' "$@"
}
# field POINTS KEY FIELD: a point's value, or nan when that point is missing.
field() { awk -v k="$2" -v f="$3" '{ key = $1 " " $2 " " $3 " " $4 " " $5 }
	key == k { for (i = 6; i < NF; i += 2) if ($i == f) { print $(i + 1); found = 1 } }
	END { if (!found) print "nan" }' "$1"; }

# chose N PPN BLOCK: the strategy the automatic choice takes (ferryctl plan
# runs the daemon's own choice, a2a_choose; an all-to-allv chooses as for
# blocks of 0 bytes).
chose() { "$BUILD/ferryctl" plan alltoall --nodes "$1" --ppn "$2" --bytes "$3" --format json | jq -r .chosen; }

# ferry_coll PART STRATEGY BUF PPN RUN BLOCKS DELTAS: fb_coll as one job on
# the current cluster (lib.sh's ferry_job), a row per block and delta.
ferry_coll() {
	local part=$1 s=$2 buf=$3 ppn=$4 run=$5 blocks=$6 deltas=$7 P t op=$1 b d v a
	P=$((CLN * ppn))
	local -a args=(--blocks "$(list "$blocks")" --strategy "$s")
	[ "$buf" = alloc ] && args+=(--alloc)
	[ "$part" = many ] && args+=(--deltas "$(list "$deltas")")
	t=$(ferry_job fb_coll "$ppn" "$op" "${args[@]}" "${TIMING[@]}")
	if [ "$t" = nan ]; then : >"$TMP/points"; else points "$P" $(seq -f "$TMP/job.%g" 0 $((P - 1))) >"$TMP/points"; fi
	v=ferry-$s
	[ "$buf" = alloc ] || v=$v-$buf
	for b in $blocks; do
		for d in $deltas; do
			a=""
			[ "$s" = auto ] && a=$(chose "$CLN" "$ppn" "$([ "$part" = many ] && echo 0 || echo "$b")")
			echo "$part,$v,$s,$buf,$CLN,$ppn,$P,$b,$d,$run,$(field "$TMP/points" "$op $s $buf $b $d" iters),$(field "$TMP/points" "$op $s $buf $b $d" per_op_s),$a,$LAYOUT" >>"$COLL"
		done
	done
}

# mpi_coll PART TRANSPORT-NAME NODES PPN RUN BLOCKS DELTAS: mb_coll with
# NODES x PPN processes (lib.sh's mpi), a row per block and delta.
mpi_coll() {
	local part=$1 tn=$2 n=$3 ppn=$4 run=$5 blocks=$6 deltas=$7 tr b d
	local -a args=(--blocks "$(list "$blocks")")
	case $tn in tcp) tr=$MPI_TCP ;; shm) tr=$MPI_SHM ;; esac
	[ "$part" = many ] && args+=(--deltas "$(list "$deltas")")
	mpi mb_coll $((n * ppn)) "$tr" "$part" "${args[@]}" "${TIMING[@]}" >"$TMP/mpi.out" ||
		log "mb_coll $part failed ($tn, $LAYOUT): $(head -3 "$TMP/mpi.err")"
	points 1 "$TMP/mpi.out" >"$TMP/points"
	for b in $blocks; do
		for d in $deltas; do
			echo "$part,mpi-$tn,mpi,user,$n,$ppn,$((n * ppn)),$b,$d,$run,$(field "$TMP/points" "$part mpi user $b $d" iters),$(field "$TMP/points" "$part mpi user $b $d" per_op_s),,$LAYOUT" >>"$COLL"
		done
	done
}

# overlap_rows VARIANT BUF N PPN RUN KEY-PREFIX: the overlap rows of the
# points in $TMP/points: overlap_pct = 100 (1 - (total - compute) / comm),
# raw: negative where overlapping took longer than computing and then
# communicating.  (OSU's osu_ialltoall puts the compute loop's time inside
# the overlapped run for compute: compute_in_s, one rank's clock, which
# where ranks share a core says when the kernel ran it more than what the
# loop costs.)
overlap_rows() {
	local v=$1 buf=$2 n=$3 ppn=$4 run=$5 key=$6 b f x
	for b in $OVL_BLOCKS; do
		x=""
		for f in iters comm_s compute_s total_s compute_in_s post_s wait_s; do
			x="$x $(field "$TMP/points" "$key $b 0" $f)"
		done
		awk -v v="$v" -v buf="$buf" -v n="$n" -v ppn="$ppn" -v b="$b" -v run="$run" -v x="$x" -v lay="$LAYOUT" 'BEGIN {
			split(x, a, " "); comm = a[2]; comp = a[3]; tot = a[4]
			ok = comm != "nan" && comp != "nan" && tot != "nan" && comm > 0
			printf "%s,%s,%d,%d,%d,%d,%d,%s,%s,%s,%s,%s,%s,%s,%s,%s\n", v, buf, n, ppn, n * ppn, b, run,
				a[1], comm, comp, tot, a[5], a[6], a[7],
				ok ? sprintf("%.1f", 100 * (1 - (tot - comp) / comm)) : "nan", lay }' >>"$OVL"
	done
}

# --- all-to-all and many-to-many, 8 nodes x 2 ranks -------------------------------------
log "collectives: all-to-all (blocks $(list "$BLOCKS")) and many-to-many (delta $(list "$DELTAS")), 8 nodes x 2 ranks, pinned and shared"
cluster cd8 8 'topology: { virtual = "direct"; };'
for run in $(seq "$RUNS"); do
	for lay in $LAYOUTS; do
		layout "$lay"
		for s in $STRATEGIES; do
			ferry_coll alltoall "$s" alloc 2 "$run" "$BLOCKS" 0
		done
		ferry_coll alltoall auto staged 2 "$run" "$BLOCKS" 0
		mpi_coll alltoall tcp 8 2 "$run" "$BLOCKS" 0
		mpi_coll alltoall shm 8 2 "$run" "$BLOCKS" 0
		for s in $STRATEGIES; do
			ferry_coll many "$s" alloc 2 "$run" "$MANY_BLOCKS" "$DELTAS"
		done
		mpi_coll many tcp 8 2 "$run" "$MANY_BLOCKS" "$DELTAS"
	done
done

# --- overlap, 4 nodes x 1 rank -----------------------------------------------------------
log "collectives: overlap of ferry_ialltoall with computation, 4 nodes x 1 rank (blocks $(list "$OVL_BLOCKS")), pinned and shared"
cluster cd4 4 'topology: { virtual = "direct"; };'
for run in $(seq "$RUNS"); do
	for lay in $LAYOUTS; do
		layout "$lay"
		for buf in alloc staged; do
			a=()
			[ $buf = alloc ] && a=(--alloc)
			t=$(ferry_job fb_coll 1 overlap --blocks "$(list "$OVL_BLOCKS")" "${a[@]}" "${TIMING[@]}")
			if [ "$t" = nan ]; then : >"$TMP/points"; else points 4 "$TMP"/job.[0-3] >"$TMP/points"; fi
			overlap_rows "ferry-$buf" "$buf" 4 1 "$run" "overlap auto $buf"
		done
		mpi mb_coll 4 "$MPI_TCP" overlap --blocks "$(list "$OVL_BLOCKS")" "${TIMING[@]}" >"$TMP/mpi.out" ||
			log "mb_coll overlap failed ($LAYOUT): $(head -3 "$TMP/mpi.err")"
		points 1 "$TMP/mpi.out" >"$TMP/points"
		overlap_rows mpi-tcp user 4 1 "$run" "overlap mpi user"
	done
done
end_cluster
