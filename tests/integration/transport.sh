#!/bin/bash
# transport.kind on a machine where RDMA links cannot be set up (these test
# machines have no RDMA device, or no RDMA in the kernel; the verbs links
# themselves are tested for real by `make check-rdma`): "auto" falls back to
# TCP and says why, "verbs" refuses to start and says why, "tcp" does not try.
. "$(dirname "$0")/lib.sh"

if [ -n "$(ls /sys/class/infiniband 2>/dev/null)" ]; then
	echo "ok - $TEST: # SKIP this machine has an RDMA device"
	finish
fi

expect "auto: two daemons link up" start_cluster au 2 'transport: { kind = "auto"; };'
expect "... over TCP, as status says" bash -c "'$BUILD/ferryctl' --runtime-dir '$TMP/au_n0' status | grep -q 'transport tcp'"
expect "... and stats too" test "$(stat au_n0 transport)" = tcp
expect "... and the log says why not verbs" \
	grep -q 'transport.kind = "auto": RDMA links cannot be set up (see above); using TCP' "$TMP/au_n0.log"
expect "... naming the reason" grep -qE 'verbs: (no RDMA device|rdma_create_event_channel|node 0.s address)' "$TMP/au_n0.log"
expect "... and a job runs across them" run_cluster_job au a2a 2 1 --items 200 --sync
expect "auto: daemons exit cleanly" stop_cluster au 2

cluster_conf vb 2 'transport: { kind = "verbs"; };'
"${FERRYD[@]}" --config "$TMP/vb.conf" --node 0 --runtime-dir "$TMP" >"$TMP/vb.log" 2>&1 &
PIDS+=("$!")
wait "$!"
rc=$?
expect "verbs: ferryd refuses to start (exit status 1)" test "$rc" = 1
expect "... and says why" grep -q 'transport.kind = "verbs", but RDMA links cannot be set up' "$TMP/vb.log"

expect "tcp: no attempt at verbs" start_cluster tc 2 'transport: { kind = "tcp"; };'
expect "... nothing about RDMA in the log" bash -c "! grep -qi 'verbs\|rdma' '$TMP/tc_n0.log'"
expect "tcp: daemons exit cleanly" stop_cluster tc 2
finish
