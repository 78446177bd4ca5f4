#!/bin/bash
# A client killed with SIGKILL mid-stream: the others keep going, and the
# daemon's open files and memory return to where they were before.
. "$(dirname "$0")/lib.sh"

start_daemon n0 || exit 1
export FERRY_RUNTIME_DIR=$TMP/n0
pid=$(dpid n0)
# The baseline once start_daemon's probe has gone (lib.sh, sessions): sampled
# while the daemon still held it, it was one too high and never came back.
wait_for '[ "$(sessions n0)" = 0 ]' || t_fail "start_daemon's ferryctl session was not closed"
fds0=$(nfds "$pid")

start_job survivors 4 --items 20000 --len 16 --len-max 64 --steps 2
# The victims go through ferryd (its queues for a receiver that dies are
# the point); the survivors use their direct rings.
FERRY_DIRECT=0 bg victim0.log prog ft_stream --job victim --rank 0 --forever
v0=$LASTPID
FERRY_DIRECT=0 bg victim1.log prog ft_stream --job victim --rank 1 --forever --recv-delay-us 100
v1=$LASTPID
# ... and a pair on direct rings, killed the same way.
bg dvictim0.log prog ft_stream --job dvictim --rank 0 --forever
d0=$LASTPID
bg dvictim1.log prog ft_stream --job dvictim --rank 1 --forever --recv-delay-us 100
d1=$LASTPID

expect "victims are streaming" wait_for '[ "$(stat n0 endpoints)" -ge 2 ] && [ "$(stat n0 items_delivered)" -gt 1000 ]'
# (Waiting with stderr redirected keeps bash's "Killed" notice out of the log.)
{ kill -KILL "$v1"; wait "$v1"; } 2>/dev/null   # the receiver dies first: its queued items go nowhere
sleep 0.3
{ kill -KILL "$v0"; wait "$v0"; } 2>/dev/null   # then the sender, with items in its ring
{ kill -KILL "$d1"; wait "$d1"; } 2>/dev/null
{ kill -KILL "$d0"; wait "$d0"; } 2>/dev/null

expect "the other job's 4 ranks finish with every item exactly once, in order" wait_job survivors
expect "all endpoints gone" wait_for '[ "$(stat n0 endpoints)" = 0 ]'
expect "open files back to the baseline ($fds0)" wait_for '[ "$(nfds $pid)" = "$fds0" ]'
expect "no queued-item memory left" test "$(stat n0 memory_queued_bytes)" = 0
expect "no shared-memory regions left" test "$(stat n0 memory_region_bytes)" = 0
expect "no jobs left" test "$(stat n0 jobs)" = 0
expect "no direct ring regions left (of $(stat n0 direct_jobs))" \
	test "$(stat n0 direct_regions)" = 0 -a "$(stat n0 direct_jobs)" -ge 2
expect "the daemon still serves a new job" run_job after 3 --items 1000
expect "daemon exits cleanly" stop_daemon n0
finish
