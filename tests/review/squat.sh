#!/bin/bash
. "$(dirname "$0")/../tests/integration/lib.sh"
start_cluster sq 2 || exit 1
port=$((CPORT_sq + 1))
python3 /tmp/review/x/squat.py 127.0.0.1 $port 40 40 & PIDS+=($!)
sleep 1
"$BUILD/ferryctl" --runtime-dir $TMP/sq_n0 debug kill-link 1
for t in 1 2 4 8 16; do sleep $t; echo "after +$t s:"; "$BUILD/ferryctl" --runtime-dir $TMP/sq_n0 status | grep '^  peer'; done
grep -c 'authenticating already' $TMP/sq_n1.log
grep -E 'lost|unreachable|refused' $TMP/sq_n0.log $TMP/sq_n1.log | head -5
