#!/bin/bash
# tests/bench/sg.sh BUILD OUT [quick] - scatter and gather on a physical
# torus (make bench-sg; issue 13; Mao, Chen, Watson, Figs. 4-5): the
# daemons' OPT regions against the SDF heuristic and the naive way (the
# root's node sends every block along the default route: ferry's "direct"),
# and Open MPI's MPI_Scatter / MPI_Gather with the same processes over the
# same links, on the 4x4 and 3x3x3 tori, blocks of 64 B to 1 MiB.  Writes
# OUT/sg.csv, OUT/sg_sim.csv, OUT/sg.md and the plots OUT/sg-*.png.
#
# The cluster: one network namespace per node, veth links between torus
# neighbours only (tests/integration/lib.sh's netns_cluster), one ferryd per
# namespace, one rank per node (rank r on node r, root 0).  On 2 cores the
# CPUs, not the links, would decide, so every veth is shaped on both ends
# until the links are the bottleneck: a rate of SG_RATE (100mbit) and, where
# the kernel has netem, a delay of SG_DELAY (1ms) per hop; a kernel without
# netem (CONFIG_NET_SCH_NETEM unset, as on these Firecracker VMs) gets the
# rate alone through tbf, and the per-hop latency is then what the daemons
# and TCP add (sg.md says which ran).
#
# Open MPI runs in the same namespaces: every namespace also gets an
# address on a veth of its own (m0, 10.78.0.0/16) and, with IP forwarding
# on, a route to every other node's along the path ferry's frames take
# (ferryctl route: dimension-ordered) through the shaped links (the kernel forwards: a routed network, packet by packet,
# where ferry's daemons store and forward each piece); mpirun runs in node
# 0's namespace and starts an orted in every other one through a launch
# agent that enters the node's namespace instead of ssh.  Its ranks yield
# when idle (mpi_yield_when_idle: 16 or 27 spinning processes on 2 cores
# would measure the scheduler).  Everything shares both cores (layout
# "shared").
#
# Times are OSU's (fb_sg.c): per iteration a barrier, then the operation
# timed alone; per_op_s is the slowest rank's mean.  The simulation's
# naive forwards whole blocks hop by hop (store and forward), while ferry's
# direct is forwarded by the daemons' data path in pieces of at most 64 KiB,
# pipelined along the path: for larger blocks the simulation overstates it
# (by up to the path's length, in hop times).  The α–β simulation
# (ferryctl plan scatter|gather --simulate: daemon/plan/sg_sim.c) predicts
# the three ferry algorithms at the paper's sizes (8x8, 4x8x8) and at these
# tori with this run's links: α the delay (0 without netem) plus the α the
# daemons measured on their links, β 8 / rate.
. "$(dirname "$0")/lib.sh" "$@"

RATE=${SG_RATE:-100mbit}
DELAY=${SG_DELAY:-1ms}
VARIANTS="opt sdf direct mpi"
if [ -n "$QUICK" ]; then
	TORI="4x4"; BLOCKS="64 65536"; SG_RUNS=1; TARGET=0.1; WARMUP=1
else
	TORI="4x4 3x3x3"; BLOCKS="64 1024 16384 65536 262144 1048576"; SG_RUNS=${SG_RUNS:-2}; TARGET=0.3; WARMUP=2
fi
TIMING=(--target-s "$TARGET" --warmup "$WARMUP" --min-iters 3)
CSV=$OUT/sg.csv
SIM=$OUT/sg_sim.csv
echo "torus,op,variant,block,run,iters,per_op_s,mean_s,shaping,layout" >"$CSV"
echo "torus,op,algo,block,alpha_us,beta_ns_per_byte,makespan_s,rounds,bound" >"$SIM"
if ! netns_ok; then
	# (make bench runs as any user: this family alone needs root)
	log "sg: skipped: it needs root and ip netns (network namespaces, tc, routes)"
	echo "## Scatter and gather on a torus (issue 13): skipped, not run as root (make bench-sg needs root and ip netns)" \
		>"$OUT/sg.md"
	rm -f "$CSV" "$SIM"
	exit 0
fi
delay_us=$(awk -v d="$DELAY" 'BEGIN { n = d + 0; print d ~ /us$/ ? n : n * 1000 }')

# simulate DIMS OP BLOCK ALPHA_US BETA_NS: rows of sg_sim.csv
simulate() {
	"$BUILD/ferryctl" plan "$2" --dims "$1" --torus --simulate --block "$3" --alpha-us "$4" \
		--beta-ns-per-byte "$5" --format json |
		jq -r --arg t "$1" --arg op "$2" --arg b "$3" --arg a "$4" --arg be "$5" \
			'.bound as $bound | .algorithms[] | [$t, $op, .name, $b, $a, $be, .makespan_us / 1e6, .rounds, $bound]
			 | map(tostring) | join(",")' >>"$SIM"
}
# the paper's tori under its clusters' rough link (100 Mbit/s, 50 µs)
for t in 8x8 4x8x8; do
	for op in scatter gather; do
		for b in $BLOCKS; do simulate "$t" "$op" "$b" 50 80; done
	done
done

# next_hop DIMS A B: the neighbour of node A on the path ferry's default
# route takes to B (ferryctl route: dimension-ordered, as the naive
# variant's frames go), so that Open MPI's packets take the same links.
next_hop() {
	"$BUILD/ferryctl" route --dims "$1" --torus --from "$2" --to "$3" | awk 'NR == 1 { print $4; exit }'
}
mpi_addr() { echo "10.78.$(($1 / 250)).$(($1 % 250 + 1))"; }

# torus NAME DIMS: the shaped namespace torus with a ferryd per node and the
# routes Open MPI needs; sets N and SHAPING.
torus() {
	local name=$1 dims=$2 k a b m ns dev
	local -a dl
	IFS=x read -ra dl <<<"$dims"
	N=1
	for k in "${dl[@]}"; do N=$((N * k)); done
	netns_cluster "$name" torus "${dl[@]}" || { log "sg: cannot make the $dims torus"; exit 1; }
	printf '%s\n' 'logging: { level = "warning"; };' "transport: { tcp_congestion = \"$BENCH_CC\"; };" \
		>>"$TMP/$name.conf"
	SHAPING=""
	for k in $(seq 0 $((N - 1))); do
		ns=$(netns_name "$name" "$k")
		for dev in $(ip -n "$ns" -o link show type veth | awk -F': ' '{ print $2 }' | cut -d@ -f1); do
			netns_shape "$ns" "$dev" "$RATE" "$DELAY" || { log "sg: cannot shape $dev"; exit 1; }
		done
		# Open MPI's own address and the forwarding to everyone else's
		ip netns exec "$ns" sysctl -qw net.ipv4.ip_forward=1 net.ipv4.conf.all.rp_filter=0 \
			net.ipv4.conf.default.rp_filter=0
		ip -n "$ns" link add m0 type veth peer name m1 && ip -n "$ns" link set m0 up &&
			ip -n "$ns" link set m1 up && ip -n "$ns" addr add "$(mpi_addr "$k")/16" dev m0 ||
			{ log "sg: cannot give node $k its MPI address"; exit 1; }
	done
	for a in $(seq 0 $((N - 1))); do
		for b in $(seq 0 $((N - 1))); do
			[ "$a" = "$b" ] && continue
			m=$(next_hop "$dims" "$a" "$b")
			echo "route add $(mpi_addr "$b")/32 via $(netns_addr "$m") dev f${a}_$m onlink src $(mpi_addr "$a")"
		done | ip -n "$(netns_name "$name" "$a")" -batch - || { log "sg: routes of node $a"; exit 1; }
	done
	start_netns_cluster "$name" "$N" || { log "sg: the $dims cluster did not start"; exit 1; }
	CL=$name CLN=$N
	netns_agent "$name" "$N" mpi_addr
}

# ferry_sg OP STRATEGY RUN: fb_sg as one job, rank r on node r; rows of sg.csv
ferry_sg() {
	local op=$1 s=$2 run=$3 r pids="" rc=0 job=sg$RANDOM$RANDOM
	for r in $(seq 0 $((N - 1))); do
		FERRY_JOB=$job FERRY_RANK=$r FERRY_SIZE=$N FERRY_RUNTIME_DIR=$TMP/${CL}_n$r \
			"$B/fb_sg" "$op" --blocks "$(echo "$BLOCKS" | tr ' ' ,)" --strategy "$s" "${TIMING[@]}" \
			>"$TMP/sg.$r" 2>&1 &
		pids="$pids $!"
	done
	for p in $pids; do wait "$p" || rc=1; done
	[ $rc = 0 ] || log "fb_sg $op $s failed: $(grep -hv elapsed "$TMP"/sg.* | head -3)"
	rows "$op" "$s" "$run" "$TMP/sg.0"
}
# mpi_sg OP RUN
mpi_sg() {
	netns_mpirun "$CL" "$N" mpi_addr m0 "$B/mb_sg" "$1" --blocks "$(echo "$BLOCKS" | tr ' ' ,)" "${TIMING[@]}" \
		>"$TMP/mpi.out" || log "mb_sg $1 failed: $(grep -v setpgid "$TMP/mpi.err" | head -3)"
	rows "$1" mpi "$2" "$TMP/mpi.out"
}
# rows OP VARIANT RUN FILE: a row per block from FILE's point lines (nan where missing)
rows() {
	local b line
	for b in $BLOCKS; do
		line=$(awk -v op="$1" -v b="$b" '$1 == "point" && $3 == op && $9 == b { print $11 "," $13 "," $15 }' "$4")
		echo "$T,$1,$2,$b,$3,${line:-nan,nan,nan},$SHAPING,shared" >>"$CSV"
	done
}

for T in $TORI; do
	torus "sg$(echo "$T" | tr -d x)" "$T"
	log "sg: $T torus, $N nodes, links: $SHAPING"
	for run in $(seq "$SG_RUNS"); do
		for op in scatter gather; do
			for v in $VARIANTS; do
				log "sg: $T $op $v run $run"
				if [ "$v" = mpi ]; then mpi_sg "$op" "$run"; else ferry_sg "$op" "$v" "$run"; fi
			done
		done
	done
	# what the daemons measured of their links (the cost model's α and β);
	# the simulation's α: the delay tc adds plus the mean α node 0's links
	# measured (a message's cost beyond its bytes: TCP, the daemons)
	"$BUILD/ferryctl" --runtime-dir "$TMP/${CL}_n0" stats | grep '^peer' >"$OUT/sg-links-$T.txt"
	alpha=$(awk -v d="$([ "${SHAPING%% *}" = netem ] && echo "$delay_us" || echo 0)" '{
		for (i = 1; i < NF; i++) if ($i == "alpha_us") { s += $(i + 1); n++ } }
		END { printf "%.1f\n", d + (n ? s / n : 0) }' "$OUT/sg-links-$T.txt")
	for op in scatter gather; do
		for b in $BLOCKS; do simulate "$T" "$op" "$b" "$alpha" "$(rate_beta_ns "$RATE")"; done
	done
	netns_end
done
bash "$HERE/sg_report.sh" "$OUT"
