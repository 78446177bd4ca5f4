#!/bin/bash
. "$(dirname "$0")/../tests/integration/lib.sh"
start_cluster gr 3 'topology: { physical = "switched"; virtual = "direct"; };' || exit 1
chmod 755 $TMP
AS() { setpriv --reuid=$1 --regid=$1 --clear-groups "${@:2}"; }
X=/tmp/review/x
# J1: user 2000, job "joba" (home node 2): rank 1 on n1 receives, rank 0 on n0 sends for 40 s
FERRY_RUNTIME_DIR=$TMP/gr_n1 AS 2000 $X/sink joba 1 2 40 > $TMP/j1r1.log 2>&1 & PIDS+=($!)
FERRY_RUNTIME_DIR=$TMP/gr_n0 DELAY_MS=12000 AS 2000 $X/hog send joba 0 2 10 16 > $TMP/j1r0.log 2>&1 & PIDS+=($!)
sleep 2
"$BUILD/ferryctl" --runtime-dir $TMP/gr_n1 status | grep '^job'
# node 2 (J1's home) restarts
kill -9 $(dpid gr_n2); sleep 0.5
start_daemon gr_n2 --config "$TMP/gr.conf" --node 2 || exit 1
sleep 3
# some other job on n1 (user 3000) whose control traffic moves job_by_id's cache off J1
GAP_MS=200 FERRY_RUNTIME_DIR=$TMP/gr_n1 AS 3000 $X/stepper other 0 2 40 0 5000 > $TMP/o0.log 2>&1 & PIDS+=($!)
GAP_MS=200 FERRY_RUNTIME_DIR=$TMP/gr_n1 AS 3000 $X/stepper other 1 2 40 0 5000 > $TMP/o1.log 2>&1 & PIDS+=($!)
sleep 1
# J2: user 1000, job "victim2" (home node 2): both ranks on n1; rank 1 receives
FERRY_RUNTIME_DIR=$TMP/gr_n1 AS 1000 $X/sink victim2 1 2 12 > $TMP/j2r1.log 2>&1 & PIDS+=($!); j2=$!
FERRY_RUNTIME_DIR=$TMP/gr_n1 AS 1000 $X/sink victim2 0 2 8 > $TMP/j2r0.log 2>&1 & PIDS+=($!)
sleep 3
"$BUILD/ferryctl" --runtime-dir $TMP/gr_n1 status | grep -A1 '^job'
wait $j2
echo "== user 1000's job victim2, rank 1 (nobody of user 1000 sends to it):"; cat $TMP/j2r1.log
