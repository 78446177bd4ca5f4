#!/bin/bash
. "$(dirname "$0")/../tests/integration/lib.sh"
start_cluster bx 3 'topology: { physical = "switched"; virtual = "direct"; };' || exit 1
X=/tmp/review/x
for name in $(cat $X/names2.txt | tr ' ' '\n' | head -${RUNS:-20}); do
  FERRY_RUNTIME_DIR=$TMP/bx_n1 $X/big recv $name ${LEN:-1048576} > $TMP/r.$name.log 2>&1 & PIDS+=($!); rp=$!
  FERRY_RUNTIME_DIR=$TMP/bx_n0 $X/big send $name ${LEN:-1048576} ${SLEEP_US:-} > $TMP/s.$name.log 2>&1 & PIDS+=($!); sp=$!
  wait $rp; wait $sp
  echo "$name: $(cat $TMP/r.$name.log $TMP/s.$name.log | tr '\n' ' ')"
done
echo "items_lost: n0 $(stat bx_n0 items_lost)"
