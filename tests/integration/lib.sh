# tests/integration/lib.sh - sourced by every integration test.
#
# Provides a private temporary directory, daemons started on it, and cleanup
# of every process and file the test made, also when it fails or is killed.
# Results are reported as TAP-like lines ("ok - ..." / "not ok - ...") that
# tests/run.sh counts.
#
# Environment: BUILD (build directory with ferryd, ferryctl, tests/).

set -u
BUILD=${BUILD:?BUILD must name the build directory}
BUILD=$(cd "$BUILD" && pwd)
TEST=$(basename "$0" .sh)
FAILED=0
PIDS=()
DAEMONS=()

TMP=$(mktemp -d /tmp/ferry-test.XXXXXX)
chmod 755 "$TMP"

# Daemons run as the unit runs them (packaging/ferryd.service): as a user of
# their own when the tests run as root (uid and gid FERRYD_UID, 64100 unless
# set: no passwd entry is needed, as with DynamicUser=), with no
# supplementary groups, no capabilities, not even in the bounding set, and
# no_new_privs; and with their own seccomp filter on (the default).
# "${FERRYD[@]}" ARGS... runs one; the binary is copied to $TMP/bin, since
# the build tree may not be readable by that user.  Files a daemon must
# read (keys) or write (its runtime directory) are given to it with
# daemon_owns.  Not root: the daemons run as the user running the tests.
mkdir -p "$TMP/bin"
cp "$BUILD/ferryd" "$TMP/bin/ferryd"
chmod -R a+rX "$TMP/bin"
if [ "$(id -u)" = 0 ]; then
	FERRYD_UID=${FERRYD_UID:-64100}
	FERRYD=(setpriv --reuid="$FERRYD_UID" --regid="$FERRYD_UID" --clear-groups --bounding-set=-all
		--inh-caps=-all --no-new-privs "$TMP/bin/ferryd")
else
	FERRYD_UID=$(id -u)
	FERRYD=("$TMP/bin/ferryd")
fi
daemon_owns() { [ "$(id -u)" != 0 ] || chown "$FERRYD_UID:$FERRYD_UID" "$@"; }

NETNS_LIST=()

cleanup() {
	local p ns
	for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null; done
	for p in "${PIDS[@]}"; do
		for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
		kill -KILL "$p" 2>/dev/null
	done
	wait 2>/dev/null
	# What is still running in a namespace of the test was started there by
	# something the test started (a launcher's daemons and tasks: slurmstepd,
	# orted); nothing else is in them.
	for ns in "${NETNS_LIST[@]}"; do
		p=$(ip netns pids "$ns" 2>/dev/null)
		[ -n "$p" ] || continue
		kill -KILL $p 2>/dev/null
		for _ in $(seq 50); do [ -z "$(ip netns pids "$ns" 2>/dev/null)" ] && break; sleep 0.1; done
	done
	for ns in "${NETNS_LIST[@]}"; do ip netns delete "$ns" 2>/dev/null; done
	if [ "${KEEP_TMP:-0}" = 1 ]; then echo "# kept $TMP"; else rm -rf "$TMP"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

t_ok()   { echo "ok - $TEST: $1"; }
t_fail() {
	echo "not ok - $TEST: $1"
	FAILED=1
	local f
	shift
	for f in "$@"; do [ -f "$f" ] && tail -n 30 "$f" | sed "s|^|#   $(basename "$f"): |"; done
	return 0
}
# expect DESCRIPTION COMMAND...: passes if the command succeeds.
expect() { local d=$1; shift; if "$@"; then t_ok "$d"; else t_fail "$d"; fi; }

# not COMMAND...: succeeds if the command fails (for expect).
not() { ! "$@"; }

# Runs a test program from the build directory.
prog() { local p=$1; shift; "$BUILD/tests/$p" "$@"; }

# start_daemon NAME [ferryd options...]: runtime dir $TMP/NAME, log $TMP/NAME.log.
# Sets DPID_<NAME>.  Waits until the socket answers.
start_daemon() {
	local name=$1; shift
	mkdir -p "$TMP/$name"
	chmod 755 "$TMP/$name"
	daemon_owns "$TMP/$name"
	# NETNS=name runs it inside that network namespace; IN_NODE="COMMAND
	# ARGS" runs it through that command (a node's namespaces, launch tests).
	${NETNS:+ip netns exec "$NETNS"} ${IN_NODE:-} "${FERRYD[@]}" --runtime-dir "$TMP/$name" --state-dir "$TMP/$name" "$@" >"$TMP/$name.log" 2>&1 &
	local pid=$!
	PIDS+=("$pid")
	DAEMONS+=("$name")
	eval "DPID_$name=$pid"
	for _ in $(seq 100); do
		if "$BUILD/ferryctl" --runtime-dir "$TMP/$name" status >/dev/null 2>&1; then return 0; fi
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.05
	done
	echo "# ferryd $name did not start:"; sed 's/^/#   /' "$TMP/$name.log"
	return 1
}

dpid() { eval "echo \$DPID_$1"; }

# sigsys NAME: says that the daemon was killed by its seccomp filter, and
# which call it made, as the kernel logged it (audit type 1326, syscall=N).
sigsys() {
	echo "# ferryd $1 was killed by SIGSYS: a system call outside daemon/core/sandbox.def; the kernel says:"
	dmesg 2>/dev/null | grep 'type=1326' | tail -n 3 | sed 's/^/#   /'
}

# stop_daemon NAME: SIGTERM, wait; fails if it does not exit 0 or logged a
# sanitizer report.
stop_daemon() {
	local name=$1 pid rc
	pid=$(dpid "$name")
	kill -TERM "$pid" 2>/dev/null
	wait "$pid"; rc=$?
	if [ $rc -eq $((128 + 31)) ]; then sigsys "$name"; return 1; fi
	if [ $rc -ne 0 ]; then echo "# ferryd $name exited with $rc"; return 1; fi
	if grep -qE "AddressSanitizer|LeakSanitizer|runtime error:" "$TMP/$name.log"; then
		echo "# ferryd $name: sanitizer report in its log"; return 1
	fi
	return 0
}

# stat NAME KEY: one counter from ferryctl stats.
stat() { "$BUILD/ferryctl" --runtime-dir "$TMP/$1" stats | awk -v k="$2" '$1 == k { print $2 }'; }

# runs_on N...: this test runs on CPUs N... (among others), so the daemons
# it starts do too: ferryd takes no CPU outside those it was started on.
runs_on() {
	local cpu item found
	for cpu in "$@"; do
		found=1
		for item in $(sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' "/proc/$$/status" | tr ',' ' '); do
			[ "$cpu" -ge "${item%-*}" ] && [ "$cpu" -le "${item#*-}" ] && found=0
		done
		[ $found = 0 ] || return 1
	done
}

# Number of open file descriptors of a process.
nfds() { ls "/proc/$1/fd" | wc -l; }

# sessions NAME: control connections (clients, ferryctl) the daemon NAME has
# open, as the kernel sees them: the accepted ends of its socket.  A tool's
# session stays open until the daemon reads the tool's end closing, which on
# a busy machine can be after the tool has exited and the next command runs
# (start_daemon's probe, a stat call): wait for 0 before taking a baseline.
sessions() { ss -Hx src "$TMP/$1/ferryd.sock" 2>/dev/null | wc -l; }

# Waits up to ~10 s for a shell condition to become true.
wait_for() {
	for _ in $(seq 200); do eval "$1" && return 0; sleep 0.05; done
	return 1
}

# bg LOGNAME COMMAND...: runs it in the background, output to $TMP/LOGNAME;
# its pid goes to PIDS (for cleanup) and LASTPID.
# "prog NAME" is resolved here so that $! is the program itself, not a subshell
# running the prog function (signals sent to it must reach the program).
bg() {
	local log=$1; shift
	if [ "$1" = prog ]; then shift; set -- "$BUILD/tests/$1" "${@:2}"; fi
	"$@" >"$TMP/$log" 2>&1 &
	LASTPID=$!
	PIDS+=("$LASTPID")
}

finish() { exit "$FAILED"; }

# start_job JOB P [ft_alltoall options...]: P ranks of ft_alltoall in the
# background (FERRY_RUNTIME_DIR selects the daemon).  wait_job JOB passes if
# every rank exits 0, and shows their output otherwise.
start_job() {
	local job=$1 p=$2 r pids=""
	shift 2
	for r in $(seq 0 $((p - 1))); do
		bg "$job.$r.log" prog ft_alltoall --job "$job" --rank "$r" --size "$p" "$@"
		pids="$pids $LASTPID"
	done
	eval "JOB_$job=\"$pids\""
}
wait_job() {
	local job=$1 pid rc=0 f
	for pid in $(eval "echo \$JOB_$job"); do wait "$pid" || rc=1; done
	if [ $rc -ne 0 ]; then
		for f in "$TMP/$job".*.log; do sed "s|^|#   $(basename "$f"): |" "$f"; done
	fi
	return $rc
}
run_job() { start_job "$@"; wait_job "$1"; }
# nodirect COMMAND...: runs it with FERRY_DIRECT=0 in its clients'
# environment, so that ranks on one node talk through ferryd, not through
# direct rings (for tests of ferryd's own path).
nodirect() { local FERRY_DIRECT=0; export FERRY_DIRECT; "$@"; }

# --- local clusters -------------------------------------------------------

# free_ports N: prints a base port such that base..base+N-1 are free on loopback.
# Ports come from below the kernel's ephemeral range, where no outgoing
# connection can be holding one, and must be unused in every TCP state.
free_ports() {
	local n=$1 base p busy lo span
	lo=$(cut -f1 /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo 32768)
	span=$(( (lo - 10000 - n) / 100 ))
	for _ in $(seq 50); do
		base=$((10000 + (RANDOM % span) * 100))
		busy=0
		for p in $(seq "$base" $((base + n - 1))); do
			if ss -Htan "( sport = :$p )" 2>/dev/null | grep -q .; then busy=1; break; fi
		done
		[ $busy = 0 ] && { echo "$base"; return 0; }
	done
	return 1
}

# start_cluster NAME N [CONFIG LINE...]: N daemons on 127.0.0.1 forming one
# cluster; the configuration is $TMP/NAME.conf (extra lines appended: the
# topology, aggregation...).  Daemon K is named NAME_nK (runtime directory
# $TMP/NAME_nK, log $TMP/NAME_nK.log).  Returns once every link is up.
start_cluster() {
	local name=$1 n=$2 k
	shift 2
	cluster_conf "$name" "$n" "$@" || return 1
	for k in $(seq 0 $((n - 1))); do
		start_daemon "${name}_n$k" --config "$TMP/$name.conf" --node "$k" || return 1
	done
	cluster_up "$name" "$n"
}

# cluster_conf NAME N [CONFIG LINE...]: writes $TMP/NAME.conf for N nodes on
# 127.0.0.1 at free ports (node K at port CPORT_NAME + K).
cluster_conf() {
	local name=$1 n=$2 base k
	shift 2
	base=$(free_ports "$n") || { echo "# no free ports"; return 1; }
	eval "CPORT_$name=$base"
	{
		echo "cluster: { name = \"$name\"; nodes = ("
		for k in $(seq 0 $((n - 1))); do
			echo "  { host = \"127.0.0.1\"; port = $((base + k)); }$([ "$k" -lt $((n - 1)) ] && echo ,)"
		done
		echo "); };"
		printf '%s\n' "$@"
	} >"$TMP/$name.conf"
}

# proxied_cluster NAME ATTACKS [CONFIG LINE...]: two daemons on 127.0.0.1,
# node 1 at its port and node 0 reaching it through tests/progs/ft_mitm with
# ATTACKS (its log $TMP/NAME.mitm, its pid in MITM_NAME); returns once the
# link is up.
proxied_cluster() {
	local name=$1 attacks=$2 base k
	shift 2
	base=$(free_ports 3) || { echo "# no free ports"; return 1; }
	for k in 0 1; do
		{
			echo "cluster: { name = \"$name\"; nodes = ("
			echo "  { host = \"127.0.0.1\"; port = $base; },"
			# node 0 reaches node 1 at the proxy's port
			echo "  { host = \"127.0.0.1\"; port = $([ $k = 0 ] && echo $((base + 2)) || echo $((base + 1))); }"
			echo "); };"
			printf '%s\n' "$@"
		} >"$TMP/$name.$k.conf"
	done
	start_daemon "${name}_n1" --config "$TMP/$name.1.conf" --node 1 || return 1
	bg "$name.mitm" prog ft_mitm $((base + 2)) $((base + 1)) "$attacks"
	eval "MITM_$name=$LASTPID"
	start_daemon "${name}_n0" --config "$TMP/$name.0.conf" --node 0 || return 1
	wait_for "link_up ${name}_n0 1 && link_up ${name}_n1 0"
}

# cluster_up NAME N: waits until every daemon reports all its links up.
cluster_up() {
	local name=$1 n=$2 k
	for k in $(seq 0 $((n - 1))); do
		if ! wait_for "links_up ${name}_n$k"; then
			echo "# links of ${name}_n$k did not come up:"
			"$BUILD/ferryctl" --runtime-dir "$TMP/${name}_n$k" status | sed 's/^/#   /'
			return 1
		fi
	done
}
links_up() {
	local st
	st=$("$BUILD/ferryctl" --runtime-dir "$TMP/$1" status 2>/dev/null) || return 1
	! grep -E '^  peer ' <<<"$st" | grep -qv ': up '
}
# link_ccs CLUSTER: the congestion controls of the established connections
# to node 1's peer port (node 0 connects to it), both ends, as the kernel
# reports them, sorted, one line.  (The name is the word before wscale: ss
# may print "ts sack" first.)
link_ccs() {
	local p
	eval "p=\$((CPORT_$1 + 1))"
	ss -tinH state established "( sport = :$p or dport = :$p )" |
		grep -oE '[a-z0-9_]+ wscale:' | cut -d' ' -f1 | sort | tr '\n' ' '
}
# link_up DAEMON PEER: the link from that daemon to node PEER is up.
link_up() {
	"$BUILD/ferryctl" --runtime-dir "$TMP/$1" status 2>/dev/null | grep -qE "^  peer $2 .*: up "
}

# stop_cluster NAME N: stops every daemon; fails if one did not exit cleanly.
stop_cluster() {
	local name=$1 n=$2 k rc=0
	for k in $(seq 0 $((n - 1))); do stop_daemon "${name}_n$k" || rc=1; done
	return $rc
}

# cstat NAME N KEY: the sum of a counter over the cluster's daemons.
cstat() {
	local name=$1 n=$2 key=$3 k sum=0 v
	for k in $(seq 0 $((n - 1))); do
		v=$(stat "${name}_n$k" "$key")
		sum=$((sum + ${v:-0}))
	done
	echo "$sum"
}

# peerstat DAEMON NODE FIELD: a counter of DAEMON's "peer NODE" stats line.
peerstat() {
	"$BUILD/ferryctl" --runtime-dir "$TMP/$1" stats |
		awk -v p="$2" -v f="$3" '$1 == "peer" && $2 == p { for (i = 3; i < NF; i += 2) if ($i == f) print $(i + 1) }'
}

# peer_sum NAME N FIELD: the sum of a per-peer counter over all daemons.
peer_sum() {
	local name=$1 n=$2 field=$3 k
	for k in $(seq 0 $((n - 1))); do
		"$BUILD/ferryctl" --runtime-dir "$TMP/${name}_n$k" stats
	done | awk -v f="$field" '$1 == "peer" { for (i = 3; i < NF; i += 2) if ($i == f) s += $(i + 1) } END { print s + 0 }'
}

# start_cluster_job CLUSTER JOB NODES PPN [ft_alltoall options...]: PPN ranks
# on each of NODES daemons (rank r on node r / PPN), in the background.
start_cluster_job() {
	local cl=$1 job=$2 nodes=$3 ppn=$4 r pids=""
	shift 4
	for r in $(seq 0 $((nodes * ppn - 1))); do
		FERRY_RUNTIME_DIR=$TMP/${cl}_n$((r / ppn)) bg "$job.$r.log" \
			prog ft_alltoall --job "$job" --rank "$r" --size $((nodes * ppn)) "$@"
		pids="$pids $LASTPID"
	done
	eval "JOB_$job=\"$pids\""
}
run_cluster_job() { start_cluster_job "$@"; wait_job "$2"; }

# coll_job JOB SIZE ITERS NODE_OF... [-- ft_coll options]: SIZE ranks of
# ft_coll (collectives), rank r on the daemon whose runtime directory is
# $TMP/NODE_OF[r], each running ITERS operations, in the background;
# wait_job JOB checks that they all exited 0.
coll_job() {
	local job=$1 size=$2 n=$3 r
	shift 3
	local -a where=()
	for r in $(seq 0 $((size - 1))); do where+=("$1"); shift; done
	[ "${1:-}" = -- ] && shift
	spread_job ft_coll "$job" "$size" "${where[@]}" -- --barriers "$n" "$@"
}

# spread_job PROG JOB SIZE WHERE... [-- OPTIONS]: SIZE ranks of PROG (a
# tests/progs program taking --job, --rank, --size), rank r on the daemon of
# $TMP/WHERE[r], in the background; wait_job JOB passes when they all exit 0.
spread_job() {
	local prog=$1 job=$2 size=$3 r pids=""
	shift 3
	local -a where=()
	for r in $(seq 0 $((size - 1))); do where+=("$1"); shift; done
	[ "${1:-}" = -- ] && shift
	for r in $(seq 0 $((size - 1))); do
		FERRY_RUNTIME_DIR=$TMP/${where[$r]} bg "$job.$r.log" prog "$prog" --job "$job" --rank "$r" \
			--size "$size" "$@"
		pids="$pids $LASTPID"
	done
	eval "JOB_$job=\"$pids\""
}

# job_home UID NAME N: the home node ferryd picks for job (UID, NAME) in a
# cluster of N nodes (FNV-1a over the uid's 4 bytes and the name, as in
# daemon/cluster/cluster.c), so that a test can choose a job whose home is up.
job_home() {
	local uid=$1 name=$2 n=$3 h=2166136261 i c
	for i in 0 1 2 3; do
		h=$(( ((h ^ ((uid >> (8 * i)) & 255)) * 16777619) & 0xffffffff ))
	done
	for ((i = 0; i < ${#name}; i++)); do
		printf -v c '%d' "'${name:i:1}"
		h=$(( ((h ^ c) * 16777619) & 0xffffffff ))
	done
	echo $((h % n))
}

# as_two_users A B: test programs run as two users, A and B, when the tests
# run as root (setpriv), else both as the user running them.  Sets USER_A
# and USER_B, and defines as UID DAEMON PROG ARGS... (runs a test program of
# $BUILD/tests against that daemon as that user) and asbg LOG UID DAEMON PROG
# ARGS... (the same in the background, output in $TMP/LOG, pid in LASTPID).
as_two_users() {
	if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null; then
		USER_A=$1 USER_B=$2
		mkdir -p "$TMP/bin"
		cp "$BUILD"/tests/ft_* "$TMP/bin/"
		cp -P "$BUILD"/libferry.so* "$TMP/bin/"
		chmod -R a+rX "$TMP/bin"
		as() {
			local uid=$1 node=$2 p=$3; shift 3
			${AS_EXEC:-} setpriv --reuid="$uid" --regid="$uid" --clear-groups \
				env LD_LIBRARY_PATH="$TMP/bin" FERRY_RUNTIME_DIR="$TMP/$node" "$TMP/bin/$p" "$@"
		}
	else
		USER_A=$(id -u) USER_B=$(id -u)
		as() { local node=$2 p=$3; shift 3; ${AS_EXEC:-} env FERRY_RUNTIME_DIR="$TMP/$node" "$BUILD/tests/$p" "$@"; }
	fi
	# The background shell becomes the program (exec), so that LASTPID,
	# which the cleanup kills, is the program's pid, not that of a shell
	# the program would outlive.
	asbg() { local log=$1; shift; (AS_EXEC=exec; as "$@") >"$TMP/$log" 2>&1 & LASTPID=$!; PIDS+=("$LASTPID"); }
}

# --- network namespaces -----------------------------------------------------

# netns_ok: root and ip netns are available.
netns_ok() {
	[ "$(id -u)" = 0 ] && ip netns add "ferry-probe-$$" 2>/dev/null && ip netns delete "ferry-probe-$$"
}

# netns_node NAME K: the namespace of node K; its address is 10.77.K/256.K%256+1.
netns_name() { echo "fy$$-$1-$2"; }
netns_addr() { echo "10.77.$(($1 / 250)).$(($1 % 250 + 1))"; }

# netns_cluster NAME KIND DIMS: one namespace per node of a KIND (torus or
# mesh) with dimensions DIMS ("3 3"), veth links only between neighbours,
# each with a route to the neighbour's address and nothing else, and the
# cluster configuration $TMP/NAME.conf.  A frame sent to a non-neighbour has
# no route: it cannot arrive.
# KIND switched (DIMS: the node count): every node's one link, its veth
# "sw" (holding its address, 10.77.0.0/16), goes to a bridge in a namespace
# of its own (netns_name NAME hub; the bridge's end of node K's link is
# "pK"), so every node reaches every other over its own link and the
# bridge: a switch with a port per node.  The configuration says physical
# "switched", virtual "direct" (every node a routing peer of every other).
netns_cluster() {
	local name=$1 kind=$2 n=1 d k m ns c i hub
	shift 2
	local dims=("$@")
	for d in "${dims[@]}"; do n=$((n * d)); done
	for k in $(seq 0 $((n - 1))); do
		ns=$(netns_name "$name" "$k")
		ip netns add "$ns" || return 1
		NETNS_LIST+=("$ns")
		ip -n "$ns" link set lo up
		[ "$kind" = switched ] || ip -n "$ns" addr add "$(netns_addr "$k")/32" dev lo
	done
	if [ "$kind" = switched ]; then
		hub=$(netns_name "$name" hub)
		ip netns add "$hub" || return 1
		NETNS_LIST+=("$hub")
		ip -n "$hub" link add br0 type bridge && ip -n "$hub" link set br0 up || return 1
		for k in $(seq 0 $((n - 1))); do
			ns=$(netns_name "$name" "$k")
			ip link add sw netns "$ns" type veth peer name "p$k" netns "$hub" || return 1
			ip -n "$hub" link set "p$k" master br0 up
			ip -n "$ns" link set sw up
			ip -n "$ns" addr add "$(netns_addr "$k")/16" dev sw
		done
	fi
	# neighbours: +1 along each dimension (wrapping on a torus)
	for k in $(seq 0 $((n - 1))); do
		[ "$kind" = switched ] && break
		local stride=1
		for ((i = ${#dims[@]} - 1; i >= 0; i--)); do
			c=$(( k / stride % dims[i] ))
			if [ $((c + 1)) -lt "${dims[i]}" ]; then
				m=$((k + stride))
			elif [ "$kind" = torus ] && [ "${dims[i]}" -gt 2 ]; then
				m=$((k - c * stride))
			else
				m=-1
			fi
			if [ "$m" -ge 0 ] && [ "$m" != "$k" ]; then
				netns_link "$name" "$k" "$m" || return 1
			fi
			stride=$((stride * dims[i]))
		done
	done
	{
		echo "cluster: { name = \"$name\"; port = 7470; nodes = ("
		for k in $(seq 0 $((n - 1))); do
			echo "  { host = \"$(netns_addr "$k")\"; }$([ "$k" -lt $((n - 1)) ] && echo ,)"
		done
		echo "); };"
		if [ "$kind" = switched ]; then
			echo 'topology: { physical = "switched"; virtual = "direct"; };'
		else
			echo "topology: { physical = \"$kind\"; dims = [ $(echo "${dims[@]}" | sed 's/ /, /g') ]; };"
		fi
	} >"$TMP/$name.conf"
}

netns_link() {
	local name=$1 a=$2 b=$3 na nb
	na=$(netns_name "$name" "$a")
	nb=$(netns_name "$name" "$b")
	ip link add "f${a}_$b" netns "$na" type veth peer name "f${b}_$a" netns "$nb" || return 1
	ip -n "$na" link set "f${a}_$b" up
	ip -n "$nb" link set "f${b}_$a" up
	ip -n "$na" route add "$(netns_addr "$b")/32" dev "f${a}_$b" src "$(netns_addr "$a")"
	ip -n "$nb" route add "$(netns_addr "$a")/32" dev "f${b}_$a" src "$(netns_addr "$b")"
}

# netns_cut NAME A B / netns_mend NAME A B: the link between neighbours A
# and B of a namespace cluster down (no route either way, and both daemons'
# connections broken, as a vanished link would be noticed after the TCP
# keepalive) or back (waits until both ends are linked up again).
netns_cut() {
	local name=$1 a=$2 b=$3
	ip -n "$(netns_name "$name" "$a")" link set "f${a}_$b" down
	ip -n "$(netns_name "$name" "$b")" link set "f${b}_$a" down
	"$BUILD/ferryctl" --runtime-dir "$TMP/${name}_n$a" debug kill-link "$b" >/dev/null
	"$BUILD/ferryctl" --runtime-dir "$TMP/${name}_n$b" debug kill-link "$a" >/dev/null
}
netns_mend() {
	local name=$1 a=$2 b=$3
	ip -n "$(netns_name "$name" "$a")" link set "f${a}_$b" up
	ip -n "$(netns_name "$name" "$b")" link set "f${b}_$a" up
	ip -n "$(netns_name "$name" "$a")" route replace "$(netns_addr "$b")/32" dev "f${a}_$b" src "$(netns_addr "$a")"
	ip -n "$(netns_name "$name" "$b")" route replace "$(netns_addr "$a")/32" dev "f${b}_$a" src "$(netns_addr "$b")"
	wait_for "link_up ${name}_n$a $b && link_up ${name}_n$b $a"
}

# start_netns_cluster NAME N: a daemon per node in its namespace.
start_netns_cluster() {
	local name=$1 n=$2 k
	for k in $(seq 0 $((n - 1))); do
		NETNS=$(netns_name "$name" "$k") start_daemon "${name}_n$k" --config "$TMP/$name.conf" --node "$k" ||
			return 1
	done
	cluster_up "$name" "$n"
}
