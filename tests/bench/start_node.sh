# tests/bench/start_node.sh - sourced by the callgrind counts (hop_cost.sh,
# histo_cost.sh) after tests/integration/lib.sh.
#
# start_node NAME CONF NODE VALGRIND(0/1): like start_daemon, optionally
# under callgrind (output $TMP/NAME.cg).  Valgrind does not know the
# seccomp() call: no filter there.
start_node() {
	local name=$1 conf=$2 node=$3 vg=$4 pid
	mkdir -p "$TMP/$name"
	if [ "$vg" = 1 ]; then
		valgrind --tool=callgrind --callgrind-out-file="$TMP/$name.cg" \
			"$BUILD/ferryd" --runtime-dir "$TMP/$name" --state-dir "$TMP/$name" --config "$conf" --node "$node" --seccomp off \
			>"$TMP/$name.log" 2>&1 &
	else
		"$BUILD/ferryd" --runtime-dir "$TMP/$name" --state-dir "$TMP/$name" --config "$conf" --node "$node" >"$TMP/$name.log" 2>&1 &
	fi
	pid=$!
	PIDS+=("$pid")
	eval "DPID_$name=$pid"
	for _ in $(seq 600); do
		"$BUILD/ferryctl" --runtime-dir "$TMP/$name" status >/dev/null 2>&1 && return 0
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.05
	done
	echo "$(basename "$0" .sh): ferryd $name did not start" >&2
	sed 's/^/#   /' "$TMP/$name.log" >&2
	return 1
}
