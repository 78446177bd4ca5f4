#!/bin/bash
# All-to-all between 1, 2 and 8 processes on one node through one ferryd:
# every item exactly once, payload intact, per-(sender, receiver) order kept,
# over several steps; and large items that travel in pieces.
. "$(dirname "$0")/lib.sh"

# ferryd's own local delivery: clients that asked would use direct rings
# between them instead (direct.sh runs the same jobs that way).
export FERRY_DIRECT=0
start_daemon n0 || exit 1
export FERRY_RUNTIME_DIR=$TMP/n0

expect "1 process (sends only to itself)" run_job one 1 --items 100 --steps 2
expect "2 processes, 3 steps of 20000 items each way" run_job two 2 --items 20000 --len 16 --steps 3
expect "8 processes, 3 steps, 2000 items per pair, 16-200 bytes" run_job eight 8 --items 2000 --len 16 --len-max 200 --steps 3
expect "3 processes, items of 16 B to 300 KB (pieces reassembled)" run_job large 3 --items 30 --len 16 --len-max 300000 --steps 2
start_job ja 2 --items 5000
start_job jb 2 --items 5000
expect "two jobs at once, with the same rank numbers, do not mix" wait_job ja
expect "... and the second job too" wait_job jb

delivered=$(stat n0 items_delivered)
expect "daemon counted every item it delivered ($delivered)" test "$delivered" -ge $((100*2 + 4*20000*3 + 64*2000*3 + 9*30*2))
expect "nothing dropped" test "$(stat n0 items_dropped)" = 0
expect "daemon exits cleanly on SIGTERM" stop_daemon n0

# Small rings, large items and items to oneself: every rank's TX ring fills
# while its own RX ring is full.  A ferry_send that waited for room for the
# rest of a large item, or a ferry_done that waited for room for its DONE,
# without receiving, waited for ever (about one run in four): the daemon
# waited for it to take its own items.  Now the rest goes in as room comes,
# from calls that receive while they wait.
echo 'limits: { ring_bytes = 262144; pending_bytes = 262144; };' >"$TMP/small.conf"
chmod 644 "$TMP/small.conf"
start_daemon n1 --config "$TMP/small.conf" || exit 1
export FERRY_RUNTIME_DIR=$TMP/n1
for i in 1 2 3 4 5 6; do
	expect "small rings, 3 processes, 16 B to 200 KB items to each other and themselves, 2 steps (run $i)" \
		run_job small$i 3 --items 40 --len 16 --len-max 200000 --steps 2 --sync
done
for i in 1 2 3; do
	expect "... the same with FERRY_BATCH (run $i)" \
		run_job smallb$i 3 --items 40 --len 16 --len-max 200000 --steps 2 --sync --batch
done
expect "daemon n1 exits cleanly" stop_daemon n1
finish
