#!/bin/bash
# tests/bench/redtc.sh BUILD OUT [quick] - the reductions over tc-shaped
# links (make bench-redtc; issue 14): where the links, not the 2 CPUs, are
# the bottleneck, so that the algorithms' phase structure shows.  The
# daemons' bcast, allgather, allreduce and reduce with every algorithm
# forced (single, orth, hier) and the automatic choice, reduce_scatter_block
# with short, long, hybrid forced and automatic, and Open MPI's MPI_* with
# the same processes over the same links, 8 B to 1 MiB (fb_red.c, mb_red.c;
# bytes as there: the vector per rank, allgather's block, rsb's whole
# vector), timed as OSU does and fb_red --barrier: a barrier, then one
# operation timed alone (its latency, which the cost model predicts;
# back-to-back operations would overlap), the slowest rank's mean.  Writes OUT/redtc.csv and OUT/redtc-links-N.txt (what the daemons
# measured of their links); redtc_report.sh turns them into redtc.md and the
# plots OUT/redtc-*.png.  The loopback runs beside these: red.sh.
#
# The cluster: one network namespace per node, each with one veth port to a
# bridge in a namespace of its own (tests/integration/lib.sh's netns_cluster
# "switched": every node reaches every other through its port, as on a
# switch; virtual topology "direct", every node a peer of every other), a
# ferryd per namespace, one rank per node (rank r on node r).  Both ends of
# every port are shaped (lib.sh's netns_shape): the node's side (what it
# sends) and the bridge's (what it receives), each to REDTC_RATE (100mbit),
# so a node sends and receives at that rate at once, whatever the number of
# peers: the one-port, full-duplex model of the α–β cost functions.  Where
# the kernel has netem each side adds REDTC_DELAY (500us: 1 ms one way);
# without netem (these VMs) tbf shapes the rate alone.  9 nodes (a 3x3 grid:
# orth's grid and hier's factorization are both 3x3 there) and 8 (orth 2x4,
# hier 2x2x2: the three algorithms differ).  Everything shares both cores
# (layout "shared"); no cluster key (integrity off).
#
# Why 100 Mbit/s: a 4 KiB message takes 330 µs on the wire, several times
# what an operation costs in the CPUs here (a 9-node allreduce of 8 bytes
# takes 0.2-0.6 ms), so from 4 KiB on the links decide; a slower link would
# make the 1 MiB points (a 9-node allgather of 1 MiB blocks moves 8 MiB
# through every port: 0.7 s) too long for the family's 10 minutes.
#
# The job's α and β (what its nodes' links measured when it started, which
# its automatic choices used) are read from node 0's `ferryctl stats` while
# the job runs, polled every 0.1 s, with the algorithm of the last
# operation that ended ("last KIND alg ALG": the automatic choice as it
# ran, where the poll caught the point's operation rather than a barrier;
# plan_chose is ferryctl plan's choice with the job's α and β).  Each
# point's predicted_us is ferryctl plan's (the daemons' cost model) for the
# algorithm that ran, with the job's α and β; predicted_rate_us the same
# with β from the shaped rate instead (8000 / Mbit/s ns per byte) and α the
# median of the links' after the warm-up (redtc-links-N-start.txt).  The
# poll costs a process every 0.1 s in every ferry job, none in Open MPI's.
. "$(dirname "$0")/lib.sh" "$@"

RATE=${REDTC_RATE:-100mbit}
DELAY=${REDTC_DELAY:-500us}
ORTH_OPS="bcast allgather allreduce reduce"
if [ -n "$QUICK" ]; then
	NODES="9"; BYTES="8 4096 65536"; TC_RUNS=1; TARGET=0.1
	STRATS="single orth auto"; RS_STRATS="short long"
else
	NODES=${REDTC_NODES:-9 8}; BYTES="8 64 512 4096 32768 262144 1048576"; TC_RUNS=${REDTC_RUNS:-2}; TARGET=0.2
	STRATS="single orth hier auto"; RS_STRATS="short long hybrid"
fi
TIMING=(--barrier --target-s "$TARGET" --warmup 3 --warmup-max-s "$TARGET" --min-iters 2)
# (largest first: the job's first operations, which set it up, are the
# untimed warm-up of its longest point)
SIZES=$(list $(echo "$BYTES" | tr ' ' '\n' | sort -rn))
CSV=$OUT/redtc.csv
echo "nodes,op,impl,strategy,alg,bytes,run,iters,per_op_s,alpha_us,beta_ns_per_byte,cost,plan_chose,predicted_us,predicted_rate_us,shaping,layout" \
	>"$CSV"
if ! netns_ok; then
	# (make bench runs as any user: this family, like sg, needs root)
	log "redtc: skipped: it needs root and ip netns (network namespaces, tc)"
	echo "## Reductions over shaped links (issue 14): skipped, not run as root (make bench-redtc needs root and ip netns)" \
		>"$OUT/redtc.md"
	rm -f "$CSV"
	exit 0
fi
RATE_BETA=$(rate_beta_ns "$RATE")

# switched N: the shaped switched cluster rtN of N nodes, a ferryd in each
# (the current cluster CL), its links measured; sets SHAPING.
switched() {
	local n=$1 name=rt$1 k
	netns_cluster "$name" switched "$n" || { log "redtc: cannot make the $n namespaces"; exit 1; }
	printf '%s\n' 'logging: { level = "warning"; };' "transport: { tcp_congestion = \"$BENCH_CC\"; };" \
		>>"$TMP/$name.conf"
	for k in $(seq 0 $((n - 1))); do
		netns_shape "$(netns_name "$name" "$k")" sw "$RATE" "$DELAY" &&
			netns_shape "$(netns_name "$name" hub)" "p$k" "$RATE" "$DELAY" ||
			{ log "redtc: cannot shape node $k's port"; exit 1; }
	done
	start_netns_cluster "$name" "$n" || { log "redtc: the $n daemons did not start"; exit 1; }
	CL=$name CLN=$n
	netns_agent "$name" "$n" netns_addr
	# The links' start probes (8 links' bursts at once through one port)
	# leave β unknown on some, or measure the port's queue: a direct
	# allgather of 256 KiB blocks gives every link large frames to measure
	# (minima: the quietest moment counts), then at most 10 s for every
	# link of every node to know its α and β (a link that does not probes
	# again, into the measurements).
	ferry_job fb_red 1 allgather --bytes 262144 --strategy single --warmup 1 --min-iters 1 --target-s 0 >/dev/null
	for _ in $(seq 100); do
		links "$n" >"$OUT/redtc-links-$n-start.txt"
		awk '{ for (i = 3; i < NF; i++) if (($i == "alpha_us" || $i == "beta_ns_per_byte") && $(i + 1) == 0) u++ }
			END { exit u > 0 }' "$OUT/redtc-links-$n-start.txt" && break
		sleep 0.1
	done
	# the model's α for predicted_rate_us: the links' median (a few keep
	# the α the start's probes measured through the busy port: see above)
	LINK_ALPHA=$(awk '{ for (i = 3; i < NF; i++) if ($i == "alpha_us") print $(i + 1) }' "$OUT/redtc-links-$n-start.txt" | median)
}

# links N: every link's line of ferryctl stats on each of the N nodes,
# "node K peer M ... alpha_us A beta_ns_per_byte B ..."
links() {
	local k
	for k in $(seq 0 $(($1 - 1))); do
		"$BUILD/ferryctl" --runtime-dir "$TMP/${CL}_n$k" stats | sed -n "s/^peer /node $k peer /p"
	done
}

# poll_job FILE: until killed, every 0.1 s, a line "POINTS COLL-JOB-LINE":
# how many points rank 0 of the running fb_red has printed, and node 0's
# "coll job" line of ferryctl stats (the job's α, β, its last operation
# and that operation's algorithm).
poll_job() {
	while :; do
		echo "$(grep -c '^point' "$TMP/job.0" 2>/dev/null) $("$BUILD/ferryctl" --runtime-dir "$TMP/${CL}_n0" stats 2>/dev/null |
			grep '^coll job')"
		sleep 0.1
	done >"$1"
}

# rows IMPL STRATEGY RUN OUTPUT POLL: the points of OUTPUT (fb_red's or
# mb_red's) as rows of redtc.csv; POLL poll_job's record of the job (ferry).
rows() {
	local impl=$1 s=$2 run=$3 i=0 op b iters t kind nb alg a be cost pred chose rpred
	while read -r op b iters t; do
		kind=$op nb=$b
		if [ "$op" = rsb ]; then
			# (fb_red runs a multiple of P int32, at least P)
			kind=reduce_scatter_block
			nb=$(awk -v b="$b" -v p="$CLN" 'BEGIN { n = int(b / 4); n = n < p ? p : n - n % p; print 4 * n }')
		fi
		alg=- a=nan be=nan cost=- chose=- pred=nan rpred=nan
		if [ "$impl" = ferry ]; then
			# the algorithm seen most often while this point ran (forced:
			# the strategy), and the job's α and β
			read -r alg a be cost < <(awk -v i="$i" -v k="$kind" -v s="$s" '$2 == "coll" && $3 == "job" {
				for (f = 4; f < NF; f++) {
					if ($f == "alpha_us") a = $(f + 1)
					if ($f == "beta_ns_per_byte") { b = $(f + 1); c = $(f + 2) }
					if ($f == "last") lk = $(f + 1)
					if ($f == "alg") la = $(f + 1)
				}
				if ($1 == i && lk == k) n[la]++ }
				END { best = "?"; for (x in n) if (best == "?" || n[x] > n[best]) best = x
					print s == "auto" ? best : s, a == "" ? "nan" : a, b == "" ? "nan" : b, c == "" ? "-" : c }' "$5")
			if [ "$a" != nan ] && [ "$be" != nan ]; then
				read -r pred chose < <(predict "$kind" "$nb" "$a" "$be" "$alg")
				read -r rpred _ < <(predict "$kind" "$nb" "$LINK_ALPHA" "$RATE_BETA" \
					"$([ "$alg" = "?" ] && echo "$chose" || echo "$alg")")
				[ "$alg" = "?" ] && read -r pred _ < <(predict "$kind" "$nb" "$a" "$be" "$chose")
			fi
		fi
		echo "$CLN,$op,$impl,$s,$alg,$b,$run,$iters,$t,$a,$be,$cost,$chose,$pred,$rpred,$SHAPING,shared" >>"$CSV"
		i=$((i + 1))
	done < <(awk '$1 == "point" { print $3, $7, $9, $11 }' "$4")
}

# predict KIND BYTES ALPHA BETA ALG: "predicted_us chosen": ferryctl plan's
# prediction for ALG (nan if it has none) and the algorithm it chooses.
predict() {
	"$BUILD/ferryctl" plan "$1" --nodes "$CLN" --ppn 1 --bytes "$2" --alpha-us "$3" --beta-ns-per-byte "$4" \
		--format json | jq -r --arg a "$5" '[(.strategies[] | select(.name == $a) | .predicted_us) // "nan", .chosen]
			| map(tostring) | join(" ")'
}

# ferry_red STRATEGY OPS RUN: fb_red, one job over OPS with STRATEGY forced
ferry_red() {
	local s=$1 ops=$2 run=$3 poller t
	rm -f "$TMP/job.0"
	poll_job "$TMP/poll" &
	poller=$!
	PIDS+=("$poller")
	t=$(ferry_job fb_red 1 "$(list $ops)" --bytes "$SIZES" --strategy "$s" "${TIMING[@]}")
	kill "$poller"
	wait "$poller" 2>/dev/null
	[ "$t" = nan ] || rows ferry "$s" "$run" "$TMP/job.0" "$TMP/poll"
}

# mpi_red RUN: mb_red over every operation, the same processes in the same
# namespaces
mpi_red() {
	netns_mpirun "$CL" "$CLN" netns_addr sw "$B/mb_red" "$(list $ORTH_OPS rsb)" --bytes "$SIZES" \
		"${TIMING[@]}" >"$TMP/mpi.out" || log "mb_red failed: $(grep -v setpgid "$TMP/mpi.err" | head -3)"
	rows mpi mpi "$1" "$TMP/mpi.out" /dev/null
}

for n in $NODES; do
	t0=$SECONDS
	switched "$n"
	log "redtc: $n nodes x 1 rank, switched, ports: $SHAPING; bytes $(list $BYTES)"
	for run in $(seq "$TC_RUNS"); do
		for s in $STRATS; do
			log "redtc: $n nodes, $s, run $run"
			ferry_red "$s" "$ORTH_OPS$([ "$s" = auto ] && echo " rsb")" "$run"
		done
		for s in $RS_STRATS; do
			log "redtc: $n nodes, reduce_scatter_block $s, run $run"
			ferry_red "$s" rsb "$run"
		done
		log "redtc: $n nodes, Open MPI, run $run"
		mpi_red "$run"
	done
	# what the daemons measured of their links at the end (the cost
	# model's α and β per link)
	links "$n" >"$OUT/redtc-links-$n.txt"
	netns_end
	log "redtc: $n nodes took $((SECONDS - t0)) s"
done
bash "$HERE/redtc_report.sh" "$OUT"
