#!/bin/bash
# The same-node direct path (proto/direct.h, README "Direct rings"):
# items between ranks of one job on one node go through a ring between the
# two processes, not through ferryd, with every guarantee of the daemon's
# path: each item exactly once, in order per sender, payload intact, steps,
# large items, FERRY_BATCH, zero-length items, sending to oneself.  ferryd
# must see none of those items (items_delivered stays where it was), and
# must see them all again where the direct path is off (direct.max_ranks,
# $FERRY_DIRECT=0 on one rank).  A rank that leaves must not leave a sender
# waiting for room in its ring for ever.
. "$(dirname "$0")/lib.sh"

start_daemon n0 || exit 1
export FERRY_RUNTIME_DIR=$TMP/n0

expect "1 process: items to itself through its own direct ring, 3 steps" \
	run_job one 1 --items 5000 --steps 3 --sync
expect "2 processes, 3 steps of 20000 items each way" run_job two 2 --items 20000 --len 16 --steps 3 --sync
expect "8 processes, 3 steps, 2000 items per pair, 16-200 bytes" \
	run_job eight 8 --items 2000 --len 16 --len-max 200 --steps 3 --sync
expect "3 processes, items of 16 B to 300 KB (pieces through direct rings, reassembled)" \
	run_job large 3 --items 30 --len 16 --len-max 300000 --steps 2 --sync
expect "4 processes with FERRY_BATCH, 16-256 B and some large" \
	run_job batch 4 --items 3000 --len 16 --len-max 256 --steps 2 --sync --batch
expect "... FERRY_BATCH with large items too" \
	run_job batchl 3 --items 20 --len 16 --len-max 200000 --steps 2 --sync --batch
expect "4 processes without steps (a fast rank runs ahead)" run_job free 4 --items 5000 --len 32 --steps 3
start_job ja 2 --items 5000 --steps 2 --sync
start_job jb 2 --items 5000 --steps 2 --sync
expect "two jobs at once, same rank numbers: each job its own rings" wait_job ja
expect "... and the second job too" wait_job jb
expect "ferryd delivered none of those items itself (items_delivered $(stat n0 items_delivered))" \
	test "$(stat n0 items_delivered)" = 0
expect "ferryd handed out direct rings to these jobs (direct_jobs $(stat n0 direct_jobs))" \
	test "$(stat n0 direct_jobs)" = 9

# One rank that does not ask: its pairs go through ferryd, the others' not.
before=$(stat n0 items_delivered)
FERRY_DIRECT=0 bg mixed.0.log prog ft_alltoall --job mixed --rank 0 --size 3 --items 1000 --steps 2 --sync
JOB_mixed=$LASTPID
for r in 1 2; do
	bg mixed.$r.log prog ft_alltoall --job mixed --rank $r --size 3 --items 1000 --steps 2 --sync
	JOB_mixed="$JOB_mixed $LASTPID"
done
expect "rank 0 with FERRY_DIRECT=0 among two that ask: all-to-all intact" wait_job mixed
got=$(($(stat n0 items_delivered) - before))
# Through ferryd: rank 0 to 0, 1, 2 and 1, 2 to 0 (5 pairs of 1000 per step).
expect "... ferryd delivered exactly the pairs with rank 0 ($got = 10000)" test "$got" = 10000
expect "daemon n0 exits cleanly" stop_daemon n0

# direct.max_ranks = 2: a job with 3 ranks here goes through ferryd.
echo 'direct: { max_ranks = 2; };' >"$TMP/two.conf"
chmod 644 "$TMP/two.conf"
start_daemon n1 --config "$TMP/two.conf" || exit 1
export FERRY_RUNTIME_DIR=$TMP/n1
expect "3 ranks with direct.max_ranks = 2" run_job three 3 --items 1000 --steps 2 --sync
expect "... all through ferryd ($(stat n1 items_delivered) = 18000)" test "$(stat n1 items_delivered)" = 18000
expect "2 ranks with direct.max_ranks = 2" run_job pair 2 --items 1000 --steps 2 --sync
expect "... none through ferryd" test "$(stat n1 items_delivered)" = 18000
expect "daemon n1 exits cleanly" stop_daemon n1

# Small rings, large items and items to oneself, with FERRY_BATCH too
# (as local_alltoall.sh runs them through ferryd): a piece reassembled
# while an earlier item of the same call still pointed into the ring gave
# that ring's room back under it, and the writer overwrote the item.
echo 'direct: { ring_bytes = 262144; };' >"$TMP/small.conf"
chmod 644 "$TMP/small.conf"
start_daemon n4 --config "$TMP/small.conf" || exit 1
export FERRY_RUNTIME_DIR=$TMP/n4
# (It failed about one run in twenty: 100 short runs, a tenth of a second
# each, all must pass.)
bad=0
for i in $(seq 100); do
	run_job small$i 3 --items 40 --len 16 --len-max 200000 --steps 2 --sync >"$TMP/small.out" 2>&1 ||
		{ bad=$((bad + 1)); sed 's/^/#   /' "$TMP/small.out" | head -n 6; }
done
expect "small direct rings, 3 processes, 16 B to 200 KB items to each other and themselves, 2 steps: 100 runs, $bad failed" \
	test $bad = 0
# FERRY_BLOCKING sends every item of a step before receiving: a direct ring
# holds far less than ferryd's queues did, so a sender waiting for room
# keeps what arrives meanwhile (one rank with 1.5 MB items to itself, three
# that send each other more than a ring holds, with items of the last
# ferry_recv still held); before, they waited for each other for ever.
# run_limited JOB P ARGS...: run_job, but the ranks are killed after 60 s
# (a run that waits for ever fails instead of holding the suite).
run_limited() {
	local job=$1 dog rc
	start_job "$@"
	( exec 2>/dev/null; sleep 60; kill $(eval "echo \$JOB_$job") ) &
	dog=$!
	wait_job "$job"; rc=$?
	pkill -P $dog sleep 2>/dev/null; kill $dog 2>/dev/null; wait $dog 2>/dev/null
	return $rc
}
expect "FERRY_BLOCKING, 1 rank, items up to 1.5 MB to itself" \
	run_limited blk1 1 --items 5 --len 16 --len-max 1500000 --steps 2 --sync --blocking
for i in 1 2 3; do
	expect "FERRY_BLOCKING, 3 ranks, items up to 1.5 MB to each other (run $i)" \
		run_limited blk3_$i 3 --items 3 --len 16 --len-max 1500000 --steps 2 --sync --blocking
done
# The waits of FERRY_BLOCKING (ft_direct): an item kept while ferry_send
# waited for room makes ferry_fd() readable (the wait had taken the
# eventfd's count); a send to oneself that can never get room says
# -EDEADLK instead of waiting for ever.
FERRY_SPIN_US=0 bg fds.1.log timeout 60 "$BUILD/tests/ft_direct" --job fds --rank 1 --mode fdstash
f1=$LASTPID
FERRY_SPIN_US=0 timeout 60 "$BUILD/tests/ft_direct" --job fds --rank 0 --mode fdstash >"$TMP/fds.0.log" 2>&1
r0=$?
wait $f1; r1=$?
expect "ferry_fd() readable for an item kept while a blocking ferry_send waited, and every item delivered" \
	test $r0 = 0 -a $r1 = 0
[ $r0 = 0 ] && [ $r1 = 0 ] || sed 's/^/#   /' "$TMP"/fds.*.log
expect "a blocking send to oneself, ring full, room held by unreleased items: -EDEADLK, then works once released" \
	timeout 60 "$BUILD/tests/ft_direct" --job self --mode selflock
# A reader that offered its writers to publish without a fence and then
# cannot run membarrier (a seccomp filter since) must not sleep on items it
# might not see: its wait fails, naming membarrier.  Without the offer
# (FERRY_DIRECT_FENCELESS=0) the same wait times out as usual.
for fl in 1 0; do
	FERRY_DIRECT_FENCELESS=$fl FERRY_SPIN_US=0 bg nomb.0.log timeout 60 "$BUILD/tests/ft_direct" --job nomb$fl --rank 0 --mode nomembar
	m0=$LASTPID
	FERRY_DIRECT_FENCELESS=$fl FERRY_SPIN_US=0 timeout 60 "$BUILD/tests/ft_direct" --job nomb$fl --rank 1 --mode nomembar >"$TMP/nomb.1.log" 2>&1
	r1=$?
	wait $m0; r0=$?
	if [ $fl = 1 ]; then
		expect "a reader whose membarrier fails after its offer: the wait ends with an error naming it ($(sed -n 's/^ok rank 1: //p' "$TMP/nomb.1.log"))" \
			test $r0 = 0 -a $r1 = 0
	else
		expect "... without the offer (FERRY_DIRECT_FENCELESS=0) the wait times out and the next item comes" \
			test $r0 = 0 -a $r1 = 0
	fi
	[ $r0 = 0 ] && [ $r1 = 0 ] || sed 's/^/#   /' "$TMP"/nomb.*.log
done
# ... and what a waiting sender keeps stops at 16 MiB (it kept all a fast
# sender sent it: 1.1 GB in 2.5 s here before).
for r in 1 2; do
	bg hoard.$r.log timeout 60 "$BUILD/tests/ft_direct" --job hoard --rank $r --mode hoard
	eval "h$r=\$LASTPID"
done
timeout 60 "$BUILD/tests/ft_direct" --job hoard --rank 0 --mode hoard >"$TMP/hoard.0.log" 2>&1
r0=$?
wait $h1; r1=$?
wait $h2; r2=$?
expect "a blocking sender waiting for a slow rank keeps at most 16 MiB of a fast one's items ($(sed -n 's/^ok rank 0: peak \([0-9]*\) KiB.*/\1 KiB peak/p' "$TMP/hoard.0.log")), and gets them all" \
	test $r0 = 0 -a $r1 = 0 -a $r2 = 0
[ $r0 = 0 ] && [ $r1 = 0 ] && [ $r2 = 0 ] || sed 's/^/#   /' "$TMP"/hoard.*.log
for i in 1 2; do
	expect "... the same with FERRY_BATCH (run $i)" \
		run_job smallb$i 3 --items 40 --len 16 --len-max 200000 --steps 2 --sync --batch
done
expect "daemon n4 exits cleanly" stop_daemon n4

# A slow receiver: the direct ring fills and the sender sees backpressure
# (-EAGAIN, or a wait with FERRY_BLOCKING); nothing is lost, all in order,
# and ferryd is not involved.
start_daemon n3 || exit 1
export FERRY_RUNTIME_DIR=$TMP/n3
N=30000   # 30000 x 64 B: several times a 256 KiB ring
for mode in "" --blocking; do
	bg slow.1.log prog ft_stream --job slow$mode --rank 1 --items $N --len 64 --recv-delay-us 1000
	r=$LASTPID
	bg slow.0.log prog ft_stream --job slow$mode --rank 0 --items $N --len 64 $mode
	s=$LASTPID
	wait $s; src=$?
	wait $r; rrc=$?
	expect "slow receiver${mode:+ ($mode)}: all $N items, in order, intact" test $src = 0 -a $rrc = 0
	if [ -z "$mode" ]; then
		eagain=$(sed -n 's/.*eagain \([0-9]*\).*/\1/p' "$TMP/slow.0.log")
		expect "... the sender saw -EAGAIN $eagain times" test "${eagain:-0}" -gt 0
	fi
done
expect "... none of it through ferryd" test "$(stat n3 items_delivered)" = 0
expect "daemon n3 exits cleanly" stop_daemon n3

# A receiver that leaves while its sender waits for room in its ring: the
# sender is woken (ferryd sets gone[] and writes its eventfd), drops what
# is for it, and finishes; without that it would wait for ever.
start_daemon n2 || exit 1
export FERRY_RUNTIME_DIR=$TMP/n2
for mode in "" --blocking; do
	bg hold.1.log prog ft_stream --job hold$mode --rank 1 --items 100000 --len 1024 --hold-until "$TMP/never"
	r1=$LASTPID
	bg hold.0.log prog ft_stream --job hold$mode --rank 0 --items 100000 --len 1024 $mode
	r0=$LASTPID
	# 100 MB cannot fit a 256 KiB ring: rank 0 is stuck until rank 1 goes.
	sleep 1
	expect "sender${mode:+ ($mode)} still waiting while the receiver takes nothing" kill -0 $r0
	kill -KILL $r1; wait $r1 2>/dev/null
	ok=1
	for _ in $(seq 100); do kill -0 $r0 2>/dev/null || break; sleep 0.1; done
	if kill -0 $r0 2>/dev/null; then kill -KILL $r0; ok=0; fi
	wait $r0; rc=$?
	expect "... finishes within 10 s once the receiver was killed (rc $rc)" test $ok = 1 -a $rc = 0
	grep -q "rank 0 ok" "$TMP/hold.0.log" || sed 's/^/#   /' "$TMP/hold.0.log"
done

# Steps fail as they do through ferryd when a rank dies mid-job.
for r in 0 1 2; do
	extra=""
	[ $r = 2 ] && extra="--die-at 3"
	bg die.$r.log prog ft_steps --job die --rank $r --size 3 --steps 6 --items 50 $extra
	eval "die$r=$LASTPID"
done
wait $die2
for r in 0 1; do
	wait "$(eval echo \$die$r)"; rc=$?
	expect "rank $r: step 3 fails with EPIPE once rank 2 died (rc $rc)" \
		grep -q "rank $r step 3: a rank of the job left" "$TMP/die.$r.log"
	grep -q "rank $r step 3: a rank of the job left" "$TMP/die.$r.log" || sed 's/^/#   /' "$TMP/die.$r.log"
done
expect "daemon n2 exits cleanly" stop_daemon n2
finish
