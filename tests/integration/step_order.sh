#!/bin/bash
# The order of steps (proto/wire.h "The step of an item"): a rank gets every
# item of step s before any of step s+1, also when the items of s+1 reach its
# node before the home's word that s completed.  Here the home's link to one
# node is 40 ms slower one way than the other links (tests/progs/ft_mitm with
# a delay), so every step the ranks of a third node are well into the next
# step, and their items at the slow node, long before the home's STEP gets
# there.  Each such item completes the step at that node itself.  And an
# item a client writes after its DONE, before the step completed, as no
# library would, ends its session: it would leave marked with a step it is not
# of.
. "$(dirname "$0")/lib.sh"

# home_of NAME N: the node that is home of our job NAME in a cluster of N
# nodes (daemon/cluster/cluster.c cluster_home: FNV-1a over uid and name).
home_of() {
	local name=$1 n=$2 uid h=2166136261 i c
	uid=$(id -u)
	for i in 0 1 2 3; do h=$((((h ^ ((uid >> (8 * i)) & 255)) * 16777619) & 0xffffffff)); done
	for ((i = 0; i < ${#name}; i++)); do
		printf -v c '%d' "'${name:i:1}"
		h=$((((h ^ c) * 16777619) & 0xffffffff))
	done
	echo $((h % n))
}

# --- an item after DONE ---------------------------------------------------
start_daemon ad || exit 1
FERRY_RUNTIME_DIR=$TMP/ad bg ad1.log prog ft_steps --job jad --rank 1 --size 2 --steps 1 --items 0 \
	--start-ms 1000
r1=$LASTPID
bg ad0.log prog ft_raw "$TMP/ad" after-done jad 0 2
r0=$LASTPID
expect "a rank that writes an item behind its DONE, in a step still open, loses its session" wait "$r0"
expect "... it had written them" grep -q published "$TMP/ad0.log"
expect "... the log says why" grep -q "item after DONE, before the step completed" "$TMP/ad.log"
expect "... the item went nowhere ($(stat ad items_delivered) delivered)" test "$(stat ad items_delivered)" = 0
wait "$r1"
expect "... and the other rank's step fails naming it" grep -q "rank 0 (on node 0) left job jad" "$TMP/ad1.log"
expect "daemon exits cleanly" stop_daemon ad

# --- a slow link from the home --------------------------------------------
# Nodes 0, 1 and 2 on loopback; node 0 (R) reaches node 1 (H, the job's
# home) through ft_mitm, which holds every frame from H to R for 40 ms.
# Node 2 (S) is linked straight to both.
base=$(free_ports 4) || { t_fail "free ports"; finish; }
for k in 0 1 2; do
	{
		echo "cluster: { name = \"so\"; nodes = ("
		echo "  { host = \"127.0.0.1\"; port = $base; },"
		echo "  { host = \"127.0.0.1\"; port = $([ $k = 0 ] && echo $((base + 3)) || echo $((base + 1))); },"
		echo "  { host = \"127.0.0.1\"; port = $((base + 2)); }"
		echo "); };"
	} >"$TMP/so.$k.conf"
done
bg so.mitm prog ft_mitm $((base + 3)) $((base + 1)) none 40
MITM=$LASTPID
for k in 2 1 0; do start_daemon "so_n$k" --config "$TMP/so.$k.conf" --node $k || exit 1; done
cluster_up so 3 || { t_fail "links up"; finish; }
job=""
for i in $(seq 100); do
	[ "$(home_of "jso$i" 3)" = 1 ] && { job=jso$i; break; }
done
STEPS=12
# 2 ranks a node, rank r on node r % 3.  Ranks 0 and 3, on R, share direct
# rings, and take nothing during a step and sleep 150 ms before they wait for
# its end (--lazy-ms): by then S's items of the next step are in their RX
# rings (and the home's STEP too), and the other's items of the step still
# in the direct ring, so that one handed out too early shows.
for r in 0 1 2 3 4 5; do
	FERRY_RUNTIME_DIR=$TMP/so_n$((r % 3)) bg "$job.$r.log" prog ft_alltoall --job "$job" --rank $r --size 6 \
		--items 300 --len 16 --len-max 64 --steps $STEPS --sync $([ $((r % 3)) = 0 ] && echo --lazy-ms 150)
	pids="${pids:-} $LASTPID"
done
ok=1
for p in $pids; do wait "$p" || ok=0; done
[ $ok = 1 ] || for r in 0 1 2 3 4 5; do sed "s|^|#   $job.$r: |" "$TMP/$job.$r.log"; done
expect "6 ranks on 3 nodes, $STEPS steps, the home's link to node 0 slow: every item once, in order, every step right" \
	test $ok = 1
expect "... the job's home is node 1 (its log says so)" grep -q "job $job .*all 6 ranks joined" "$TMP/so_n1.log"
early=$(stat so_n0 steps_early)
expect "... node 0 completed steps on items of the next one, ahead of the home's STEP ($early of $((STEPS - 1)))" \
	test "${early:-0}" -ge $((STEPS / 2))
expect "... nothing was dropped" \
	test "$(stat so_n0 items_dropped)$(stat so_n1 items_dropped)$(stat so_n2 items_dropped)" = 000
for k in 0 1 2; do expect "daemon $k exits cleanly" stop_daemon "so_n$k"; done
kill -TERM "$MITM" 2>/dev/null
expect "the proxy exits cleanly" wait "$MITM"
expect "... without a sanitizer report" not grep -qE 'runtime error|Sanitizer' "$TMP/so.mitm"
finish
