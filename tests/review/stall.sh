#!/bin/bash
# One user's non-consuming receivers + a remote sender: does the shared link pause for another user?
. "$(dirname "$0")/../tests/integration/lib.sh"
cluster_conf st 2 "limits: { ring_bytes = 262144; pending_bytes = 262144; link_bytes = 1048576; user_memory_bytes = 1048576; };" || exit 1
start_daemon st_n0 --config "$TMP/st.conf" --node 0 || exit 1
start_daemon st_n1 --config "$TMP/st.conf" --node 1 || exit 1
cluster_up st 2 || exit 1
chmod 755 $TMP
AS() { setpriv --reuid=$1 --regid=$1 --clear-groups "${@:2}"; }
HOG=/tmp/review/x/hog
for r in 1 2 3 4; do FERRY_RUNTIME_DIR=$TMP/st_n1 AS 2000 $HOG recv hogjob $r 5 60 > $TMP/hr$r.log 2>&1 & PIDS+=($!); done
FERRY_RUNTIME_DIR=$TMP/st_n0 AS 2000 $HOG send hogjob 0 5 40 > $TMP/hs.log 2>&1 & PIDS+=($!)
sleep 8
echo "--- n1 stats after hog"; "$BUILD/ferryctl" --runtime-dir $TMP/st_n1 stats | grep -E 'flow_|parked|memory_waits|^peer'
# victim: another user, 2-rank stream across the same link
FERRY_RUNTIME_DIR=$TMP/st_n1 AS 1000 timeout 25 $BUILD/tests/ft_stream --job victim --rank 1 --items 2000 --len 16 > $TMP/vr.log 2>&1 & vr=$!
FERRY_RUNTIME_DIR=$TMP/st_n0 AS 1000 timeout 25 $BUILD/tests/ft_stream --job victim --rank 0 --items 2000 --len 16 > $TMP/vs.log 2>&1 & vs=$!
wait $vr; echo "victim receiver rc=$?"; wait $vs; echo "victim sender rc=$?"
cat $TMP/vr.log $TMP/vs.log
echo "--- n1 status"; "$BUILD/ferryctl" --runtime-dir $TMP/st_n1 status | head -30
echo "--- n1 stats"; "$BUILD/ferryctl" --runtime-dir $TMP/st_n1 stats | grep -E 'flow_|parked|memory_waits|^peer'
tail -3 $TMP/hs.log
grep -v '^$' $TMP/st_n1.log | tail -15
