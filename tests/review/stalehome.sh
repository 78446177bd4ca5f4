#!/bin/bash
. "$(dirname "$0")/../tests/integration/lib.sh"
start_cluster sh 2 || exit 1
X=/tmp/review/x
J=${J:-s0}
# rank 0 joins on n0 and waits for rank 1 (which never comes)
FERRY_RUNTIME_DIR=$TMP/sh_n0 $X/sink $J 0 2 3 > $TMP/a.log 2>&1 & PIDS+=($!)
sleep 1
# node 0 crashes and restarts
kill -9 $(dpid sh_n0); sleep 0.3
start_daemon sh_n0 --config "$TMP/sh.conf" --node 0 || exit 1
cluster_up sh 2
sleep 3
"$BUILD/ferryctl" --runtime-dir $TMP/sh_n1 status | grep '^home'
# now both ranks start properly
FERRY_RUNTIME_DIR=$TMP/sh_n0 $X/sink $J 0 2 2 > $TMP/b0.log 2>&1 & PIDS+=($!); b0=$!
FERRY_RUNTIME_DIR=$TMP/sh_n1 $X/sink $J 1 2 2 > $TMP/b1.log 2>&1 & PIDS+=($!); b1=$!
wait $b0 $b1; cat $TMP/b0.log $TMP/b1.log
