#!/bin/bash
. "$(dirname "$0")/../tests/integration/lib.sh"
start_cluster lf 3 'topology: { physical = "switched"; virtual = "direct"; };' || exit 1
S=/tmp/review/x/stepper
J=${J:-joba}   # home node 2
# rank 0 on n1, rank 1 on n2: step 1 now, step 2 after the flap
GAP_MS=5000 FERRY_RUNTIME_DIR=$TMP/lf_n1 $S $J 0 2 2 0 8000 > $TMP/r0.log 2>&1 & PIDS+=($!); r0=$!
GAP_MS=5000 FERRY_RUNTIME_DIR=$TMP/lf_n2 $S $J 1 2 2 0 8000 > $TMP/r1.log 2>&1 & PIDS+=($!); r1=$!
sleep 1
"$BUILD/ferryctl" --runtime-dir $TMP/lf_n1 status | grep "job $J"
python3 /tmp/review/x/squat.py 127.0.0.1 $((CPORT_lf + 1)) 40 6 & PIDS+=($!)
sleep 0.5
"$BUILD/ferryctl" --runtime-dir $TMP/lf_n0 debug kill-link 1
sleep 3.5
"$BUILD/ferryctl" --runtime-dir $TMP/lf_n2 status | grep -E "peer|job $J"
# rank 1 comes back? no: start a second rank-1 step partner is not possible; use the running rank 0's step 2 wait
wait $r0 $r1
echo "== r0"; cat $TMP/r0.log; echo "== r1"; cat $TMP/r1.log
grep -h 'job\|lost\|unreachable' $TMP/lf_n1.log $TMP/lf_n2.log | grep -v joined | head
