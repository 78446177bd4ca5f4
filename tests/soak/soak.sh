#!/bin/bash
# tests/soak/soak.sh - `make soak`: a cluster under sustained abuse for
# SOAK_SECONDS (default 600), checking the invariant of the hardening issue:
# every item is delivered exactly once, or its step fails on every rank with
# an error naming the cause.
#
# Four keyed daemons in a 2x2 grid on loopback.  Alongside:
#   - an all-to-all job of 8 ranks over all four nodes, run again and again
#     (ft_alltoall --sync: every item checked exactly once, intact, in order;
#     several steps a run);
#   - links broken at random (ferryctl debug kill-link), at least 100 times;
#   - pairs of ranks running steps (ft_steps), one of which is SIGKILLed at
#     random and the pair started again, at least 1000 times: the survivor
#     must fail with EPIPE naming the rank;
#   - once, halfway, a daemon killed and started again (the all-to-all runs
#     of that moment must fail with EHOSTDOWN naming it, or complete);
#   - hostile local clients (tests/progs/ft_raw) and hostile peers
#     (ft_peer) throughout.
# At the end it prints what it did, the outcome of every run, and the file
# descriptors and memory of each daemon at the start and at the end, and
# exits non-zero if the invariant was broken or a daemon died on its own.
#
# Environment: BUILD (build directory), SOAK_SECONDS.
. "$(dirname "$0")/../integration/lib.sh"

SECS=${SOAK_SECONDS:-600}
N=4
"$BUILD/ferryctl" keygen >"$TMP/c.key"
chmod 600 "$TMP/c.key"
daemon_owns "$TMP/c.key"
start_cluster soak $N "topology: { physical = \"switched\"; virtual = [ 2, 2 ]; };" \
	"security: { key_file = \"$TMP/c.key\"; };" || exit 1
end=$(($(date +%s) + SECS))
left() { [ "$(date +%s)" -lt "$end" ]; }
rss() { awk '/^VmRSS/ { print $2 }' "/proc/$(dpid "$1")/status" 2>/dev/null; }
snapshot() {
	local k
	for k in $(seq 0 $((N - 1))); do
		echo "daemon $k: $(nfds "$(dpid soak_n$k)") fds, $(rss soak_n$k) kB resident"
	done
}
echo "# soak: $SECS s, $N daemons"
snapshot | sed 's/^/# at the start: /' | tee "$TMP/start.txt"

# --- the all-to-all job, again and again ----------------------------------
alltoall_loop() {
	local run=0 ok=0 cause=0 bad=0 r pids rc line
	while left; do
		run=$((run + 1)) pids=""
		for r in $(seq 0 7); do
			FERRY_RUNTIME_DIR=$TMP/soak_n$((r / 2)) "$BUILD/tests/ft_alltoall" --job "a2a$run" --rank "$r" \
				--size 8 --items 2000 --len 16 --len-max 300 --steps 4 --sync --quiet \
				>"$TMP/a2a.$r.log" 2>&1 &
			pids="$pids $!"
		done
		rc=0
		for r in $pids; do wait "$r" || rc=1; done
		if [ $rc = 0 ]; then
			ok=$((ok + 1))
		elif ! grep -vqE "^rank [0-9]+ ok|step [0-9]+: (a rank of the job left|a node or link the job needs was lost)|ferry_open|connection to ferryd was lost" \
			"$TMP"/a2a.*.log; then
			cause=$((cause + 1))     # failed steps, each naming its cause
		else
			bad=$((bad + 1))
			for r in $(seq 0 7); do
				line=$(grep -v "^rank [0-9]* ok" "$TMP/a2a.$r.log" | head -3)
				[ -n "$line" ] && echo "# all-to-all run $run rank $r: $line" >>"$TMP/violations.txt"
			done
		fi
	done
	echo "$run $ok $cause $bad" >"$TMP/a2a.result"
}

# --- pairs of ranks, one killed at random ---------------------------------
# (Two of these loops run, named by $1.)
victims_loop() {
	local id=$1 n=0 epipe=0 other=0 unstarted=0 a b w rc na nb job
	while left; do
		n=$((n + 1)) job="v$id.$n"
		na=$((RANDOM % N)) nb=$((RANDOM % N))
		FERRY_RUNTIME_DIR=$TMP/soak_n$na "$BUILD/tests/ft_steps" --job "$job" --rank 0 --size 2 --items 3 \
			>"$TMP/v$id.0.log" 2>&1 &
		a=$!
		FERRY_RUNTIME_DIR=$TMP/soak_n$nb "$BUILD/tests/ft_steps" --job "$job" --rank 1 --size 2 --items 3 \
			>"$TMP/v$id.1.log" 2>&1 &
		b=$!
		for _ in $(seq 100); do grep -q running "$TMP/v$id.1.log" && break; sleep 0.05; done
		sleep "0.$((RANDOM % 2))$((RANDOM % 10))"
		kill -KILL "$b" 2>/dev/null
		wait "$b" 2>/dev/null
		(sleep 20; kill -KILL "$a" 2>/dev/null) & w=$!
		wait "$a" 2>/dev/null; rc=$?
		kill "$w" 2>/dev/null; wait "$w" 2>/dev/null
		if [ $rc = 3 ] && grep -q "a rank of the job left.*rank 1" "$TMP/v$id.0.log"; then
			epipe=$((epipe + 1))
		elif grep -qE "ferry_open|a node or link the job needs was lost|connection to ferryd was lost" \
			"$TMP/v$id.0.log"; then
			:       # a daemon went meanwhile: not this pair's doing
		elif ! grep -q running "$TMP/v$id.0.log"; then
			# Its ferry_open was still waiting when the watchdog
			# ended it: the job never started (a daemon restarted
			# while it was being set up), so no step or item is
			# at stake; counted apart.
			unstarted=$((unstarted + 1))
			echo "# victim pair $job (nodes $na, $nb): never started within 20 s" >>"$TMP/unstarted.txt"
		else
			other=$((other + 1))
			echo "# victim pair $job (nodes $na, $nb), rank 0 exited $rc: $(head -3 "$TMP/v$id.0.log" | tr '\n' ' ')" \
				>>"$TMP/violations.txt"
		fi
	done
	echo "$n $epipe $other $unstarted" >"$TMP/victims$id.result"
}

# --- broken links ---------------------------------------------------------
links_loop() {
	local n=0 k p
	while left; do
		k=$((RANDOM % N))
		p=$(( (k ^ (1 << (RANDOM % 2))) ))      # a grid neighbour
		"$BUILD/ferryctl" --runtime-dir "$TMP/soak_n$k" debug kill-link "$p" >/dev/null 2>&1 && n=$((n + 1))
		sleep "$(awk -v s="$SECS" 'BEGIN { printf "%.2f", s / 250 }')"
	done
	echo "$n" >"$TMP/links.result"
}

# --- hostile clients and peers --------------------------------------------
hostile_loop() {
	local n=0 mode port
	while left; do
		for mode in ctl-garbage bad-first ring-garbage head-garbage self-tail; do
			"$BUILD/tests/ft_raw" "$TMP/soak_n$((RANDOM % N))" "$mode" "raw$n" 0 1 >/dev/null 2>&1
			n=$((n + 1))
		done
		port=$((CPORT_soak + 1))        # node 1, whose grid neighbour node 0 is claimed
		for mode in garbage wrong-key hello-only; do
			"$BUILD/tests/ft_peer" 127.0.0.1 "$port" "$mode" 0 1 soak "$TMP/evil.key" >/dev/null 2>&1 &
			n=$((n + 1))
		done
		sleep 1
	done
	wait
	echo "$n" >"$TMP/hostile.result"
}
"$BUILD/ferryctl" keygen >"$TMP/evil.key"

alltoall_loop & L1=$!
victims_loop 1 & L2=$!
victims_loop 2 & L5=$!
links_loop & L3=$!
hostile_loop & L4=$!

# Halfway: one daemon killed and started again.
sleep $((SECS / 2))
victim=$((RANDOM % N))
echo "# $(date +%T): SIGKILL to daemon $victim, then started again"
kill -KILL "$(dpid soak_n$victim)"
wait "$(dpid soak_n$victim)" 2>/dev/null
start_daemon "soak_n$victim" --config "$TMP/soak.conf" --node "$victim" >/dev/null || echo "# it did not start again"
restarted_fds=$(nfds "$(dpid soak_n$victim)")

wait $L1 $L2 $L3 $L4 $L5
read -r a2a_runs a2a_ok a2a_cause a2a_bad <"$TMP/a2a.result"
read -r v1 e1 o1 u1 <"$TMP/victims1.result"
read -r v2 e2 o2 u2 <"$TMP/victims2.result"
v_pairs=$((v1 + v2)) v_epipe=$((e1 + e2)) v_other=$((o1 + o2)) v_unstarted=$((u1 + u2))
links=$(cat "$TMP/links.result")
hostile=$(cat "$TMP/hostile.result")
sleep 2         # let the last sessions end

echo "# === what the soak did in $SECS s"
echo "# all-to-all runs (8 ranks, 4 nodes, 4 steps each): $a2a_runs: $a2a_ok complete, every item exactly once;"
echo "#   $a2a_cause failed with a step error naming its cause; $a2a_bad broke the invariant"
echo "# rank pairs with one rank SIGKILLed: $v_pairs: $v_epipe survivors failed with EPIPE naming the rank;"
echo "#   $v_other did otherwise; $v_unstarted never started (set up while a daemon restarted)"
echo "# links broken: $links; hostile clients and peers: $hostile; daemons restarted: 1 (node $victim)"
lost=$(cstat soak $N items_lost) dropped=$(cstat soak $N items_dropped) killed=$(cstat soak $N sessions_killed)
echo "# items lost (left in the TX rings of killed clients, counted): $lost; dropped for ranks gone: $dropped"
echo "# sessions ended for breaking the protocol: $killed"
sed 's/^/# /' "$TMP/start.txt"
snapshot | sed 's/^/# at the end: /'
echo "# (daemon $victim restarted with $restarted_fds fds)"
[ -f "$TMP/violations.txt" ] && head -40 "$TMP/violations.txt"

expect "no all-to-all run broke the invariant" test "$a2a_bad" = 0
expect "at least one all-to-all run completed" test "$a2a_ok" -gt 0
expect "every killed rank's partner failed with EPIPE naming it ($v_other did not)" test "$v_other" = 0
# The issue's figures are for the default 10 minutes; a shorter soak scales them.
want_links=$((100 * SECS / 600)) want_kills=$((1000 * SECS / 600))
expect "links were broken at least $want_links times ($links)" test "$links" -ge "$want_links"
expect "ranks were SIGKILLed at least $want_kills times ($v_pairs)" test "$v_pairs" -ge "$want_kills"
for k in $(seq 0 $((N - 1))); do
	expect "daemon $k is alive and exits cleanly" stop_daemon "soak_n$k"
done
finish
