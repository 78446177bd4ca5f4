#!/bin/bash
. "$(dirname "$0")/../tests/integration/lib.sh"
start_cluster rj 2 || exit 1
S=/tmp/review/x/stepper
# rank 1 on n1: 1 step, then lingers 6 s and exits
FERRY_RUNTIME_DIR=$TMP/rj_n1 $S x 1 2 2 6000 3000 > $TMP/b.log 2>&1 & PIDS+=($!)
# rank 0 on n0: 1 step, exits at once
FERRY_RUNTIME_DIR=$TMP/rj_n0 $S x 0 2 1 0 3000 > $TMP/a1.log 2>&1 & PIDS+=($!); a1=$!
wait $a1; sleep 1
# rank 0 restarted: 1 step with a 15 s wait
FERRY_RUNTIME_DIR=$TMP/rj_n0 $S x 0 2 1 0 15000 > $TMP/a2.log 2>&1 & PIDS+=($!); a2=$!
start=$(date +%s); wait $a2; echo "a2 took $(( $(date +%s) - start )) s"
echo "== b"; cat $TMP/b.log; echo "== a1"; cat $TMP/a1.log; echo "== a2"; cat $TMP/a2.log
grep -h 'job x' $TMP/rj_n0.log $TMP/rj_n1.log
