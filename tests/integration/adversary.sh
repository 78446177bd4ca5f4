#!/bin/bash
# The adversary suite: a hostile local client and a hostile host on the
# cluster network try the attacks of the hardening review (issue 10) while
# an honest job runs beside them.  Each attack must end with the daemons
# alive, the honest job complete with every item exactly once, and the
# attacker's own session or connection, and nothing else, gone.
. "$(dirname "$0")/lib.sh"

# Two keyed nodes; node 0 connects to node 1.
"$BUILD/ferryctl" keygen >"$TMP/c.key"
chmod 600 "$TMP/c.key"
daemon_owns "$TMP/c.key"
cluster_conf adv 2 "security: { key_file = \"$TMP/c.key\"; };" || exit 1
start_daemon adv_n0 --config "$TMP/adv.conf" --node 0 || exit 1
start_daemon adv_n1 --config "$TMP/adv.conf" --node 1 || exit 1
cluster_up adv 2 || exit 1
port1=$((CPORT_adv + 1))

# An honest job across both nodes, long enough to run through the attacks.
honest() {
	local r
	for r in 0 1 2 3; do
		FERRY_RUNTIME_DIR="$TMP/adv_n$((r % 2))" bg "honest$1.$r.log" prog ft_alltoall --job "honest$1" \
			--rank "$r" --size 4 --items 20000 --len 16 --len-max 100 --steps 4 --sync
		eval "HPIDS$1=\"\${HPIDS$1:-} $LASTPID\""
	done
}
honest_done() {
	local p rc=0 f
	for p in $(eval "echo \$HPIDS$1"); do wait "$p" || rc=1; done
	if [ $rc != 0 ]; then for f in "$TMP/honest$1".*.log; do sed "s|^|#   $(basename "$f"): |" "$f"; done; fi
	return $rc
}
alive() { kill -0 "$(dpid adv_n0)" && kill -0 "$(dpid adv_n1)"; }

# --- the network: someone without the key, claiming to be node 0 ---------
connects0=$(peerstat adv_n1 0 connects)
honest 1
"$BUILD/ferryctl" keygen >"$TMP/evil.key"
for i in 1 2 3; do
	prog ft_peer 127.0.0.1 "$port1" wrong-key 0 1 adv "$TMP/evil.key" >/dev/null 2>&1
done
expect "finding 3: a forged AUTH claiming node 0 is refused" \
	grep -q "connection claiming to be node 0 failed authentication" "$TMP/adv_n1.log"
prog ft_peer 127.0.0.1 "$port1" hello-only 0 1 adv "$TMP/evil.key" >/dev/null 2>&1 &
hang=$!
expect "finding 3: a HELLO that never authenticates is closed by the handshake timeout" wait "$hang"
expect "finding 3: node 0's authenticated link was never replaced" \
	not grep -q "replaced" "$TMP/adv_n1.log"
expect "finding 3: ... nor taken down (connects $connects0 -> $(peerstat adv_n1 0 connects))" \
	test "$(peerstat adv_n1 0 connects)" = "$connects0"
expect "the honest job across both nodes got every item exactly once" honest_done 1
expect "both daemons are alive" alive

# Idle connections that never say HELLO cannot keep a node's peer out (the
# review's squatter): they are closed after 1 s, so a link broken meanwhile
# comes back.
squat=()
for i in $(seq 24); do
	exec {fd}<>"/dev/tcp/127.0.0.1/$port1" 2>/dev/null && squat+=("$fd")
done
"$BUILD/ferryctl" --runtime-dir "$TMP/adv_n0" debug kill-link 1 >/dev/null
expect "24 idle connections to its peer port: the link that broke comes back up (${#squat[@]} opened)" \
	wait_for 'link_up adv_n0 1 && link_up adv_n1 0'
expect "... they were closed for not saying HELLO in time" \
	grep -q "handshake did not complete\|connections are authenticating already" "$TMP/adv_n1.log"
for fd in "${squat[@]}"; do exec {fd}>&-; done

# A local user of node 0 keeps 8 idle connections from node 0's own address
# (127.0.0.1 here) open to node 1's peer port, renewing each before its
# 1 s is up, so that every place node 0's address has is always taken: node
# 0's daemon still gets in (it takes the oldest of those), and the link that
# broke comes back well before it would count as lost (2 s).
(
	fds=()
	for _ in $(seq 500); do         # 10 s at most
		exec {fd}<>"/dev/tcp/127.0.0.1/$port1" 2>/dev/null && fds+=("$fd")
		if [ ${#fds[@]} -gt 40 ]; then
			eval "exec ${fds[0]}>&-"
			fds=("${fds[@]:1}")
		fi
		sleep 0.02
	done
) &
squatter=$!
PIDS+=("$squatter")
sleep 1.5
t0=$(date +%s.%N)
"$BUILD/ferryctl" --runtime-dir "$TMP/adv_n0" debug kill-link 1 >/dev/null
expect "a local user renewing 8 connections from node 0's address: node 0's link comes back" \
	wait_for 'link_up adv_n0 1 && link_up adv_n1 0'
d=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
expect "... in $d s, not lost (< 2 s)" awk -v d="$d" 'BEGIN { exit !(d < 2.0) }'
expect "... by taking the place of one of them" grep -q "makes room for a connection from a node of the cluster" \
	"$TMP/adv_n1.log"
kill "$squatter" 2>/dev/null
wait "$squatter" 2>/dev/null

# --- a local user: self-sends, an impossible RX tail, and gone ------------
honest 2
for i in 1 2 3; do
	FERRY_RUNTIME_DIR="$TMP/adv_n0" prog ft_raw "$TMP/adv_n0" self-tail "selftail$i" 0 1
done
expect "finding 1: a client that breaks its RX ring while sending to itself and exits: daemon alive" alive
expect "finding 1: ... the daemon says why" grep -q "impossible RX tail" "$TMP/adv_n0.log"
expect "finding 1: ... its sessions were ended (killed: $(stat adv_n0 sessions_killed))" \
	test "$(stat adv_n0 sessions_killed)" -ge 3
expect "finding 1: ... and its job is gone" \
	bash -c "! '$BUILD/ferryctl' --runtime-dir '$TMP/adv_n0' status | grep -q selftail"
expect "the honest job got every item exactly once" honest_done 2

expect "daemon 0 exits cleanly (no sanitizer report)" stop_daemon adv_n0
expect "daemon 1 exits cleanly (no sanitizer report)" stop_daemon adv_n1
finish
