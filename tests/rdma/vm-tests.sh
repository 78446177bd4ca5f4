#!/bin/bash
# /tests/vm-tests.sh - runs inside the soft-RoCE VM (tests/rdma/init.sh).
# Two ferry daemons, each on its own rxe device and address (rxe0 on
# 10.0.0.1, rxe1 on 10.0.0.2), linked by an RC queue pair: every item exactly
# once and in order, a queue pair broken mid-stream and recovered, large
# items, a port going down and up, a silent partition, the device removed
# and added again, a wrong cluster key refused, a keyed link with every
# frame authenticated and one with frames encrypted (large items, queue
# pairs broken mid-stream); then four daemons (rxe0-3) in a 2x2 grid, where items travel two hops.  Prints TAP lines; exits
# non-zero if any test failed.  Timings here are emulated (TCG) and only a
# sanity check.
set -u
export PATH=/usr/bin:/usr/sbin:/bin:/sbin FERRY_TIMEOUT_MS=60000
T=/tmp/ferry
mkdir -p "$T"
FAILED=0
DUID=64100
ulimit -l unlimited
# (An array, not a function: a function in the background is a subshell, and
# $! would not be the daemon.)
AS_DAEMON=(setpriv --reuid=$DUID --regid=$DUID --clear-groups --bounding-set=-all --inh-caps=-all --no-new-privs)
ok() { echo "ok - $1"; }
no() {
	local d=$1 f
	shift
	echo "not ok - $d"
	FAILED=1
	logs "$@"
}
logs() { local f; for f in "$@"; do [ -f "$f" ] && tail -n 25 "$f" | sed "s|^|#   $(basename "$f"): |"; done; }
# What the daemons and the kernel think of the links, for a failed test.
diag() {       # diag [DAEMON...]: n0 and n1 unless named
	local n dev d=(n0 n1)
	[ $# -gt 0 ] && d=("$@")
	for n in "${d[@]}"; do ferryctl --runtime-dir "$T/$n" status 2>&1 | sed "s|^|#   $n status: |"; done
	{ rdma link; ip -br addr; ip rule; ip route show table all | grep 'table 10[0-3]'; ip neigh
	  ip -d link show veth1p; for dev in rxe0 rxe1 rxe2 rxe3; do kdiag "$dev"; done; dmesg | tail -n 15; } 2>&1 | sed 's|^|#   |'
	for n in "${d[@]}"; do logs "$T/$n.log"; done
}
# kdiag DEV: the device's packet counters and GIDs.
kdiag() {
	local h=/sys/class/infiniband/$1/ports/1 m g
	for m in sent_pkts rcvd_pkts rcvd_seq_err duplicate_request link_downed send_err; do
		printf '%s %s %s\n' "$1" "$m" "$(cat "$h/hw_counters/$m" 2>/dev/null)"
	done
	for g in 0 1 2 3; do
		printf '%s gid %s %s %s\n' "$1" "$g" "$(cat "$h/gids/$g" 2>/dev/null)" "$(cat "$h/gid_attrs/ndevs/$g" 2>/dev/null)"
	done
}
expect() { local d=$1; shift; if "$@"; then ok "$d"; else no "$d"; return 1; fi; }
wait_for() { local i; for i in $(seq 600); do eval "$1" && return 0; sleep 0.1; done; return 1; }

# conf NAME [LINE...]: a 2-node configuration over verbs.
conf() {
	local name=$1
	shift
	{
		echo 'cluster: { name = "vm"; nodes = ( { host = "10.0.0.1"; port = 7471; }, { host = "10.0.0.2"; port = 7472; } ); };'
		echo 'transport: { kind = "verbs"; };'
		echo 'logging: { level = "debug"; };'
		printf '%s\n' "$@"
	} >"$T/$name.conf"
}
start() {       # start DAEMON NODE CONF
	mkdir -p "$T/$1"
	chown $DUID:$DUID "$T/$1"
	"${AS_DAEMON[@]}" ferryd --config "$T/$3.conf" --node "$2" --runtime-dir "$T/$1" >>"$T/$1.log" 2>&1 &
	eval "PID_$1=$!"
	wait_for "ferryctl --runtime-dir $T/$1 status >/dev/null 2>&1"
}
stop() {        # stop DAEMON: SIGTERM; succeeds if it exits 0
	local pid rc
	pid=$(eval "echo \$PID_$1")
	kill -TERM "$pid"
	wait "$pid"
	rc=$?
	[ $rc = $((128 + 31)) ] && sigsys
	return $rc
}
# A daemon killed by its seccomp filter: which call (the kernel's log).
sigsys() { echo "# a daemon was killed by SIGSYS:"; dmesg | grep 'type=1326' | tail -n 5 | sed 's/^/#   /'; }
up() { ferryctl --runtime-dir "$T/$1" status 2>/dev/null | grep -q ": up via verbs"; }
stat() { ferryctl --runtime-dir "$T/$1" stats | awk -v k="$2" '$1 == k { print $2 }'; }
peerstat() { ferryctl --runtime-dir "$T/$1" stats | awk -v f="$2" '$1 == "peer" { for (i = 3; i < NF; i += 2) if ($i == f) s += $(i + 1) } END { print s + 0 }'; }

# job NAME ARGS...: 4 ranks, 2 on each of daemons n0 and n1 (JOB_DAEMONS:
# other daemons, 2 ranks on each); passes if all pass.
job() {
	local name=$1 r pids="" rc=0 d=(${JOB_DAEMONS:-n0 n1})
	shift
	for r in $(seq 0 $((2 * ${#d[@]} - 1))); do
		FERRY_RUNTIME_DIR=$T/${d[r / 2]} ft_alltoall --job "$name" --rank $r --size $((2 * ${#d[@]})) "$@" \
			>"$T/$name.$r" 2>&1 &
		pids="$pids $!"
	done
	for r in $pids; do wait "$r" || rc=1; done
	[ $rc = 0 ] || cat "$T/$name".* | grep -v " ok:" | sed 's/^/#   /'
	return $rc
}

conf plain
start n0 0 plain
start n1 1 plain
expect "two daemons link up over an RC queue pair" wait_for "up n0 && up n1"
expect "ferryctl status shows the transport, device, QP number and credits" \
	bash -c "ferryctl --runtime-dir $T/n0 status | grep -qE 'via verbs .* dev rxe0 qp 0x[0-9a-f]+, credits [0-9]+'"
expect "both daemons logged that they use verbs" \
	bash -c "grep -q 'verbs: RDMA device rxe0' $T/n0.log && grep -q 'verbs: RDMA device rxe1' $T/n1.log"
st=/proc/$PID_n0/status
expect "... as user $DUID, under their seccomp filter, without capabilities" \
	bash -c "grep -qE '^Uid:[[:space:]]+$DUID[[:space:]]+$DUID[[:space:]]+$DUID[[:space:]]+$DUID\$' $st &&
		grep -qE '^Seccomp:[[:space:]]+2\$' $st && grep -qE '^CapEff:[[:space:]]+0+\$' $st &&
		grep -q 'any other kills the daemon' $T/n0.log" || sed 's/^/#   /' "$st"

t0=$(cut -d' ' -f1 /proc/uptime)
expect "all-to-all over verbs, 2 daemons x 2 processes, 3 steps: every item exactly once, in order" \
	job a2a --items 500 --len 16 --len-max 200 --steps 3 --sync
t1=$(cut -d' ' -f1 /proc/uptime)
echo "# sanity only (emulated CPU): $((4 * 3 * 500 * 3)) items in $(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }') s"
expect "frames went out as SENDs and completed" test "$(stat n0 verbs_posted_sends)" -gt 0 -a "$(stat n0 verbs_completions)" -gt 0
expect "no error completions on a healthy link" test "$(stat n0 verbs_error_completions)" = 0

# A queue pair broken mid-stream (moved to the error state), several times.
FERRY_RUNTIME_DIR=$T/n0 ft_stream --job qp --rank 0 --items 400000 --len 200 >"$T/qp.0" 2>&1 &
s=$!
FERRY_RUNTIME_DIR=$T/n1 ft_stream --job qp --rank 1 --items 400000 --len 200 >"$T/qp.1" 2>&1 &
r=$!
wait_for "[ \"\$(stat n1 items_delivered)\" -gt 1000 ]"
breaks=0
for i in 1 2 3 4 5 6; do
	kill -0 $r 2>/dev/null || break
	ferryctl --runtime-dir "$T/n$((i % 2))" debug kill-link $(((i + 1) % 2)) >>"$T/qp.kill" 2>&1 && breaks=$((breaks + 1))
	sleep 1
done
wait $s; src=$?
wait $r; rrc=$?
expect "a stream survives $breaks broken queue pairs: every item exactly once, in order" \
	test $src = 0 -a $rrc = 0 -a $breaks -gt 0
[ $rrc = 0 -a $breaks -gt 0 ] || no "stream output (sender $src, receiver $rrc)" "$T/qp.kill" "$T/qp.0" "$T/qp.1" "$T/n0.log" "$T/n1.log"
expect "the daemons saw the links fail" test "$(peerstat n0 disconnects)" -gt 0
expect "... and frames were sent again after reconnecting" test "$(peerstat n0 retransmits)$(peerstat n1 retransmits)" != 00
expect "... and the link is up again" wait_for "up n0 && up n1"

FERRY_RUNTIME_DIR=$T/n1 ft_stream --job big --rank 1 --items 6 --len 4194304 >"$T/big.1" 2>&1 &
r=$!
FERRY_RUNTIME_DIR=$T/n0 ft_stream --job big --rank 0 --items 6 --len 4194304 >"$T/big.0" 2>&1
s=$?
wait $r
expect "4 MiB items (in 64 KiB pieces, each a SEND) arrive intact" test $s = 0 -a $? = 0

# The port of rxe1 goes down (the "cable" to the switch is pulled: its
# netdev loses the carrier) and comes back (init.sh says why not otherwise).
ip link set veth1p down
expect "a port going down is logged" wait_for "grep -q 'port 1 is down' $T/n1.log"
expect "... the link fails over to reconnection attempts" wait_for "! up n0 && ! up n1"
ip link set veth1p up
expect "... and when the port is up again, so is the link" wait_for "up n0 && up n1" || diag
expect "... and it carries a job again" job after --items 200 --steps 2 --sync

# A silent partition: the switch stops forwarding between the two (both
# ports isolated; setting a port's STP state does not hold with STP off),
# with no port event and no disconnect on either side.  Only the keepalive
# SENDs of the idle link can notice it.
d0=$(peerstat n0 disconnects)
isolate() { ip link set veth0p type bridge_slave isolated "$1" && ip link set veth1p type bridge_slave isolated "$1"; }
isolate on
expect "an idle link across a silent partition is noticed (keepalive)" \
	wait_for "[ \$(peerstat n0 disconnects) -gt $d0 ] && ! up n0" || diag
isolate off
expect "... and it comes back when the partition ends" wait_for "up n0 && up n1" || diag
expect "... and carries a job" job healed --items 200 --sync

# The device goes away and comes back (rdma link delete/add: what a hot
# unplug or a driver reload does).  rxe cannot force its users off, so the
# removal completes only once ferryd has let go of everything on the device.
rdma link delete rxe1 &
del=$!
expect "a removed device is logged, and the daemon keeps running" \
	wait_for "grep -q 'the RDMA device was removed' $T/n1.log && kill -0 $PID_n1"
if expect "... which lets go of it: the removal completes" wait_for "! kill -0 $del 2>/dev/null"; then
	rdma link add rxe1 type rxe netdev veth1
	expect "... when it is back, the daemon sets it up again and the link comes up" \
		wait_for "up n0 && up n1" || diag
	expect "... and carries a job" job replugged --items 200 --sync
fi
expect "daemon 0 exits cleanly" stop n0
expect "daemon 1 exits cleanly" stop n1

# Daemons with different cluster keys: the handshake on the queue pair fails.
ferryctl keygen >"$T/a.key"
ferryctl keygen >"$T/b.key"
chmod 600 "$T/a.key" "$T/b.key"
chown $DUID:$DUID "$T/a.key" "$T/b.key"
conf ka "security: { key_file = \"$T/a.key\"; };"
conf kb "security: { key_file = \"$T/b.key\"; };"
start n0 0 ka
start n1 1 kb
expect "a daemon with another cluster key is refused (and says so)" \
	wait_for "grep -q 'failed authentication: it holds a different cluster key' $T/n1.log"
expect "... and no link comes up" bash -c "! ferryctl --runtime-dir $T/n0 status | grep -q ': up '"
stop n1
start n1 1 ka
expect "with the same key the link comes up" wait_for "up n0 && up n1"
expect "... every frame authenticated (security.integrity is on with a key)" \
	bash -c "ferryctl --runtime-dir $T/n0 status | grep -q 'frames authenticated'"
expect "... and carries a job too" job keyed --items 200 --sync
FERRY_RUNTIME_DIR=$T/n1 ft_stream --job kbig --rank 1 --items 3 --len 4194304 >"$T/kbig.1" 2>&1 &
r=$!
FERRY_RUNTIME_DIR=$T/n0 ft_stream --job kbig --rank 0 --items 3 --len 4194304 >"$T/kbig.0" 2>&1
s=$?
wait $r
expect "... and 4 MiB items (64 KiB pieces, each SEND with its tag)" test $s = 0 -a $? = 0
expect "... no frame failed its check" test "$(peerstat n0 integrity_failures)$(peerstat n1 integrity_failures)" = 00
stop n0
stop n1

# Encryption: frames are sealed into the link's own registered buffers.
conf ke "security: { key_file = \"$T/a.key\"; encrypt = true; };"
start n0 0 ke
start n1 1 ka
expect "a daemon that encrypts and one that does not refuse each other, and say why" \
	wait_for "grep -q 'every daemon of a cluster needs the same' $T/n1.log"
expect "... and no link comes up" bash -c "! ferryctl --runtime-dir $T/n0 status | grep -q ': up '"
stop n1
start n1 1 ke
expect "two daemons with security.encrypt link up" wait_for "up n0 && up n1"
expect "... status says frames are encrypted" bash -c "ferryctl --runtime-dir $T/n0 status | grep -q 'frames encrypted'"
expect "all-to-all with encrypted frames: every item exactly once, in order" \
	job enc --items 300 --len 16 --len-max 200 --steps 2 --sync
FERRY_RUNTIME_DIR=$T/n0 ft_stream --job eqp --rank 0 --items 100000 --len 200 >"$T/eqp.0" 2>&1 &
s=$!
FERRY_RUNTIME_DIR=$T/n1 ft_stream --job eqp --rank 1 --items 100000 --len 200 >"$T/eqp.1" 2>&1 &
r=$!
wait_for "[ \"\$(stat n1 items_delivered)\" -gt 1000 ]"
breaks=0
for i in 1 2 3; do
	kill -0 $r 2>/dev/null || break
	ferryctl --runtime-dir "$T/n$((i % 2))" debug kill-link $(((i + 1) % 2)) >>"$T/eqp.kill" 2>&1 && breaks=$((breaks + 1))
	sleep 1
done
wait $s; src=$?
wait $r; rrc=$?
expect "an encrypted stream survives $breaks broken queue pairs (frames sealed again under each new link's keys)" \
	test $src = 0 -a $rrc = 0 -a $breaks -gt 0
[ $rrc = 0 -a $breaks -gt 0 ] || no "encrypted stream output" "$T/eqp.kill" "$T/eqp.0" "$T/eqp.1" "$T/n0.log" "$T/n1.log"
FERRY_RUNTIME_DIR=$T/n1 ft_stream --job ebig --rank 1 --items 3 --len 4194304 >"$T/ebig.1" 2>&1 &
r=$!
FERRY_RUNTIME_DIR=$T/n0 ft_stream --job ebig --rank 0 --items 3 --len 4194304 >"$T/ebig.0" 2>&1
s=$?
wait $r
expect "... and 4 MiB items arrive intact" test $s = 0 -a $? = 0
expect "... no frame failed its check" test "$(peerstat n0 integrity_failures)$(peerstat n1 integrity_failures)" = 00
stop n0
stop n1

# Four daemons in a 2x2 virtual grid, each on its own device: items to the
# node diagonally across travel two hops over two queue pairs, taken apart
# and aggregated again at the node in between.
nodes=""
for k in 0 1 2 3; do nodes="${nodes:+$nodes, }{ host = \"10.0.0.$((k + 1))\"; port = $((7471 + k)); }"; done
{
	echo "cluster: { name = \"vm4\"; nodes = ( $nodes ); };"
	echo 'topology: { physical = "switched"; virtual = [ 2, 2 ]; };'
	echo 'transport: { kind = "verbs"; };'
	echo 'logging: { level = "debug"; };'
} >"$T/grid.conf"
for k in 0 1 2 3; do start m$k $k grid; done
# all_up DAEMON: it has 2 peers, and both links are up over verbs.
all_up() {
	local st
	st=$(ferryctl --runtime-dir "$T/$1" status 2>/dev/null | grep -E '^  peer ') &&
		[ "$(grep -c ': up via verbs' <<<"$st")" = 2 ] && ! grep -qv ': up via verbs' <<<"$st"
}
expect "4 daemons in a 2x2 grid link up, each with its 2 grid peers" \
	wait_for "all_up m0 && all_up m1 && all_up m2 && all_up m3" || diag m0 m1 m2 m3
JOB_DAEMONS="m0 m1 m2 m3" expect "all-to-all over 2 hops, 4 daemons x 2 processes: every item exactly once, in order" \
	job grid --items 300 --len 16 --len-max 200 --steps 2 --sync
fwd=0
for k in 0 1 2 3; do fwd=$((fwd + $(peerstat m$k items_forwarded))); done
expect "... items were forwarded by the daemons in between ($fwd)" test "$fwd" -gt 0
for k in 0 1 2 3; do expect "daemon m$k exits cleanly" stop m$k; done
if dmesg | grep -q 'type=1326'; then
	no "no daemon made a call outside its seccomp list"; sigsys
else
	ok "no daemon made a call outside its seccomp list"
fi
# ... which the kernel would have logged: a call the filter forbids.
start n0 0 plain
ferryctl --runtime-dir "$T/n0" debug forbidden-call >"$T/probe.out" 2>&1
wait "$PID_n0"
rc=$?
expect "a forbidden call (execve) kills a daemon here too (exit status $rc)" test $rc = $((128 + 31))
expect "... and the kernel logs it, as it would have any call missing from the list" \
	bash -c "dmesg | grep 'type=1326' | grep -q ' pid=$PID_n0 .*syscall=59 '"
exit $FAILED
