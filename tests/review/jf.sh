#!/bin/bash
. "$(dirname "$0")/../tests/integration/lib.sh"
start_cluster jf 2 || exit 1
pid=$(dpid jf_n1)
t0=$(awk '{print $14+$15}' /proc/$pid/stat)
/tmp/review/x/joinflood $TMP/jf_n0 10 ${SIZE:-1048576} &
jp=$!
sleep 3
# latency of an honest ferryctl status on n0 while flooding
for i in 1 2 3; do s=$(date +%s%N); "$BUILD/ferryctl" --runtime-dir $TMP/jf_n0 status >/dev/null; echo "status took $(( ($(date +%s%N)-s)/1000000 )) ms"; done
wait $jp
p0=$(dpid jf_n0); echo "n0 cpu ticks $(awk '{print $14+$15}' /proc/$p0/stat), n1 cpu ticks $(( $(awk '{print $14+$15}' /proc/$pid/stat) - t0 ))"
grep -c . $TMP/jf_n0.log; tail -3 $TMP/jf_n1.log
