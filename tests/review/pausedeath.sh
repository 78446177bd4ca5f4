#!/bin/bash
. "$(dirname "$0")/../tests/integration/lib.sh"
cluster_conf st 2 "limits: { ring_bytes = 262144; pending_bytes = 262144; link_bytes = 1048576; user_memory_bytes = 1048576; };" || exit 1
start_daemon st_n0 --config "$TMP/st.conf" --node 0 || exit 1
start_daemon st_n1 --config "$TMP/st.conf" --node 1 || exit 1
cluster_up st 2 || exit 1
chmod 755 $TMP
AS() { setpriv --reuid=$1 --regid=$1 --clear-groups "${@:2}"; }
HOG=/tmp/review/x/hog
for r in 1 2 3 4; do FERRY_RUNTIME_DIR=$TMP/st_n1 AS 2000 $HOG recv hogjob $r 5 60 > $TMP/hr$r.log 2>&1 & PIDS+=($!); done
FERRY_RUNTIME_DIR=$TMP/st_n0 AS 2000 $HOG send hogjob 0 5 60 > $TMP/hs.log 2>&1 & PIDS+=($!)
sleep 5
"$BUILD/ferryctl" --runtime-dir $TMP/st_n1 status | grep '^  peer'
p1=$(dpid st_n1); c0=$(awk '{print $14+$15}' /proc/$p1/stat)
kill -9 $(dpid st_n0)
sleep 30
c1=$(awk '{print $14+$15}' /proc/$p1/stat)
echo "n1 cpu ticks in 30 s after n0 died: $((c1-c0))"
"$BUILD/ferryctl" --runtime-dir $TMP/st_n1 status | grep '^  peer'
grep -E 'lost|unreachable|link down' $TMP/st_n1.log
