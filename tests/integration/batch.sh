#!/bin/bash
# FERRY_BATCH (ferry.h; README "Batches"): libferry hands small items over a
# batch per destination rank at a time, the daemons route a batch once and
# carry it whole, the destination writes it into the RX ring in one copy.
# Every guarantee holds as without it: each item exactly once, in order per
# sender, steps, backpressure; a batched item leaves the process when the
# program runs out of other things to do; a client that writes a malformed
# batch loses its session, nobody else does.
. "$(dirname "$0")/lib.sh"

# --- one node --------------------------------------------------------------
echo 'limits: { ring_bytes = 262144; pending_bytes = 262144; };' >"$TMP/small.conf"
chmod 644 "$TMP/small.conf"
start_daemon n0 --config "$TMP/small.conf" || exit 1
export FERRY_RUNTIME_DIR=$TMP/n0

b0=$(stat n0 batches_in)
expect "one node, 4 ranks (to themselves too), 16..300 B items (some too big to batch), 3 steps" \
	nodirect run_job b4 4 --items 3000 --len 16 --len-max 300 --steps 3 --sync --batch
# (nodirect: through ferryd, which counts the BATCH records; with direct
# rings they would not reach it.)
# 4 x 4 x 3000 x 3 items, most of them small enough to batch: if they were
# sent one by one (FERRY_BATCH ignored) there would be no BATCH record.
b1=$(stat n0 batches_in)
expect "... and they travelled in batches ($((b1 - b0)) BATCH records)" test $((b1 - b0)) -ge 100
expect "a job without FERRY_BATCH sends no batch" run_job nob 2 --items 2000 --len 16 --steps 2 --sync
expect "... (batches_in unchanged: $(stat n0 batches_in))" test "$(stat n0 batches_in)" = "$b1"
expect "one node, items of 16 B to 200 KB around batches (pieces keep their place), 2 steps" \
	run_job bbig 3 --items 40 --len 16 --len-max 200000 --steps 2 --sync --batch
expect "a job of one rank sends to itself" run_job bone 1 --items 5000 --len 16 --steps 2 --sync --batch
expect "a batched and an unbatched rank in one job" \
	bash -c "'$BUILD/tests/ft_alltoall' --job bmix --rank 0 --size 2 --items 4000 --len 16 --sync --batch --quiet &
		 '$BUILD/tests/ft_alltoall' --job bmix --rank 1 --size 2 --items 4000 --len 16 --sync --quiet; r=\$?;
		 wait \$!; [ \$? = 0 ] && [ \$r = 0 ]"

# pair NAME MODE [ARGS]: both ranks of ft_batch.
pair() {
	local job=$1 r0
	shift
	bg "$job.1.log" prog ft_batch --job "$job" --rank 1 "$@"
	local p1=$LASTPID
	prog ft_batch --job "$job" --rank 0 "$@" >"$TMP/$job.0.log" 2>&1
	r0=$?
	wait "$p1"
	local r1=$?
	[ $r0 = 0 ] && [ $r1 = 0 ] || { sed 's/^/#   /' "$TMP/$job".*.log; return 1; }
}
expect "ping-pong: an item waiting in a batch leaves when ferry_recv finds nothing (200 round trips)" \
	pair pp --mode recv --rounds 200
expect "ping-pong: ... when the program waits in ferry_poll" pair ppp --mode poll --rounds 200
expect "ping-pong: ... when ferry_recv(..., 0) found nothing and the program sleeps on ferry_fd()" \
	pair ppf --mode fd --rounds 200
expect "ferry_flush sends it to a receiver while the sender sleeps outside libferry" pair pfl --mode flush
expect "zero-length items, batched, to another rank and to itself: each once, in order" \
	pair pz --mode zero --rounds 20000
expect "a sender whose TX ring is full waits in ferry_poll with batches open; room lets them go" \
	pair pfull --mode full
expect "ferry_close with a full TX ring of items to oneself, batches and a large item held: returns" \
	pair pclose --mode closefull
expect "ferry_done that cannot hand its DONE over yet: ferry_poll waits its second without spinning" \
	pair pdone --mode donepoll
expect "... and ferry_step_wait hands it over: rank 1 got all $(sed -n 's/^count //p' "$TMP/pdone.0.log") items" \
	test "$(sed -n 's/^count //p' "$TMP/pdone.0.log")" = "$(sed -n 's/^count //p' "$TMP/pdone.1.log")"

# A sender of batches against a slow receiver: the daemon parks, XOFFs, and
# delivers record by record from a half-taken batch; nothing lost, in order.
bg slow1.log prog ft_stream --job bslow --rank 1 --items 200000 --len 16 --recv-delay-us 200
s1=$LASTPID
prog ft_stream --job bslow --rank 0 --items 200000 --len 16 --batch >"$TMP/slow0.log" 2>&1
s0=$?
wait $s1
expect "a slow receiver: 200000 batched items, all in order (backpressure, no loss)" test $s0 = 0 -a $? = 0

# Malformed batches: the client loses its session, the daemon says why.
bg bystanders.log prog ft_alltoall --job by --rank 0 --size 1 --items 30000 --len 16 --steps 2 --sync --batch
by=$LASTPID
killed=$(stat n0 sessions_killed)
for mode in batch-spoof batch-overrun batch-smuggle dense-count dense-len dense-empty dense-channel dense-short; do
	expect "$mode, to itself: the daemon closes that client's connection" prog ft_raw "$TMP/n0" "$mode" "r$mode" 0 1
	killed=$((killed + 1))
done
expect "each was counted as misbehaving" test "$(stat n0 sessions_killed)" = $killed
expect "the log says why (malformed batch in TX ring)" grep -q "malformed batch in TX ring" "$TMP/n0.log"
expect "the log says why (malformed dense batch in TX ring)" grep -q "malformed dense batch in TX ring" "$TMP/n0.log"
# A client that rewrites a dense batch's header while the daemon may be
# reading it: each record is taken whole as checked, or refused.
d0=$(stat n0 dense_in)
expect "dense-flip: a client flipping dense headers for 2 s" prog ft_raw "$TMP/n0" dense-flip rflip 0 1
expect "... the daemon still runs, and took dense records ($(($(stat n0 dense_in) - d0)))" \
	test "$(stat n0 dense_in)" -gt "$d0"
wait $by
expect "the bystander job went on, every item once and in order" test $? = 0
# --- dense batches (proto/ring.h "Dense batches") ---------------------------
# Items of one length and channel to one rank travel as one DENSE record;
# another shape ends it (and it leaves, or becomes item records).  Every
# guarantee as above: each item once, intact, in order per sender, steps.
# batch_bytes N COMMAND...: with FERRY_BATCH_BYTES=N in its clients' environment.
batch_bytes() { local FERRY_BATCH_BYTES=$1; export FERRY_BATCH_BYTES; shift; "$@"; }
d0=$(stat n0 dense_in)
expect "dense: 4 ranks (to themselves too), runs of 16-byte items interrupted by 17..40 B and other channels, 3 steps, 3 items a ferry_recv" \
	nodirect run_job dmix 4 --items 3000 --len 16 --len-max 40 --runs 40 --channels 3 --steps 3 --sync --batch --recv-max 3
d1=$(stat n0 dense_in)
expect "... and the runs travelled dense ($((d1 - d0)) DENSE records)" test $((d1 - d0)) -ge 100
expect "dense: the same between ranks with direct rings (no ferryd on the way)" \
	run_job ddir 4 --items 3000 --len 16 --len-max 40 --runs 40 --channels 3 --steps 3 --sync --batch --recv-max 3
expect "... (ferryd saw no DENSE record of theirs)" test "$(stat n0 dense_in)" = "$d1"
expect "dense: one length throughout, one item a ferry_recv (a dense record handed out one item a call), 2 steps" \
	nodirect run_job done1 2 --items 4000 --len 16 --steps 2 --sync --batch --recv-max 1
expect "dense: batches exactly full (FERRY_BATCH_BYTES=520: 8 + 32 x 16 bytes), to itself and the other" \
	batch_bytes 520 nodirect run_job dcap 2 --items 6400 --len 16 --steps 2 --sync --batch
expect "dense: a rank that takes nothing during its steps (RX rings full: the daemon queues dense records whole)" \
	nodirect run_job dlazy 3 --items 4000 --len 16 --len-max 20 --runs 200 --steps 3 --sync --lazy-ms 300 --batch --recv-max 7
expect "... (items waited in the daemon's queue: $(stat n0 items_queued))" test "$(stat n0 items_queued)" -gt 0
expect "dense: zero-length items in runs of 100 (stride 0), to another rank and to itself" \
	pair pzd --mode zero --rounds 40000 --run 100
d2=$(stat n0 dense_in)
expect "dense: ... the same through ferryd" nodirect pair pzdn --mode zero --rounds 40000 --run 100
expect "... (as DENSE records: $(($(stat n0 dense_in) - d2)))" test $(($(stat n0 dense_in) - d2)) -ge 100

# A lone item of another shape every 50 (an acknowledgement among
# updates): the runs between go dense again (client/send.c "Dense first").
# Each rank sends 40000 items to the other and 40000 to itself: 800 runs of
# 49 in each of the 4 streams, so at least 2400 DENSE records (were there
# none after a lone item, its batch would go on as records until full, and
# a batch of 4096 bytes takes 170 records: about 1 run in 4 dense).
d3=$(stat n0 dense_in)
expect "dense: 8-byte items, every 50th on another channel, to another rank and to itself, in order" \
	nodirect pair pack --mode acks --rounds 80000 --run 50
expect "... the runs after each lone item went dense ($(($(stat n0 dense_in) - d3)) DENSE records)" \
	test $(($(stat n0 dense_in) - d3)) -ge 2400
expect "dense: ... the same with direct rings" pair packd --mode acks --rounds 80000 --run 50
# Runs of one shape (0..256 bytes, 3 channels) among short runs of others,
# now and then a large item: batches turn into records and dense again
# (client/send.c batch_redense), in TX rings and direct rings, with room
# and (rank 1 taking nothing for 1.5 s) without.  Each item once, in
# order, intact, and the padding after it up to 8 bytes zero as libferry
# wrote it (proto/ring.h "Dense batches": nothing stale reaches a receiver).
for bb in 512 4096; do
	for lazy in 1 1500; do
		expect "shapes: FERRY_BATCH_BYTES=$bb, rank 1 lazy $lazy ms, direct rings" \
			batch_bytes $bb pair shd$bb$lazy --mode shapes --rounds 100000 --run $lazy
		expect "shapes: ... through ferryd" \
			batch_bytes $bb nodirect pair shn$bb$lazy --mode shapes --rounds 100000 --run $lazy
	done
done
expect "daemon exits cleanly" stop_daemon n0

# --- a cluster ---------------------------------------------------------------
start_cluster bc 8 "topology: { virtual = [2, 2, 2]; };" || exit 1
expect "8 nodes (2x2x2) x 2 ranks, batched, 16..64 B, 3 steps: every item exactly once and in order" \
	run_cluster_job bc jbc 8 2 --items 2000 --len 16 --len-max 64 --steps 3 --sync --batch
expect "... in batches ($(cstat bc 8 batches_in) BATCH records)" test "$(cstat bc 8 batches_in)" -ge 1000
sent=$(peer_sum bc 8 items_sent)
frames=$(peer_sum bc 8 frames_sent)
# Every item for a rank on another node crosses at least one link.
expect "batched items were counted as items ($sent in $frames frames)" test "$sent" -ge $((16 * 14 * 2000 * 3))
expect "no retransmissions, duplicates or drops" \
	test "$(peer_sum bc 8 retransmits)$(peer_sum bc 8 duplicates)$(cstat bc 8 items_dropped)" = 000

d0=$(cstat bc 8 dense_in)
expect "8 nodes x 2 ranks, runs of 16 B items interrupted by 17..24 B and another channel, 3 steps, 5 items a ferry_recv" \
	run_cluster_job bc jdc 8 2 --items 2000 --len 16 --len-max 24 --runs 40 --channels 2 --steps 3 --sync --batch --recv-max 5
expect "... dense across the grid ($(($(cstat bc 8 dense_in) - d0)) DENSE records), no drops" \
	test $(($(cstat bc 8 dense_in) - d0)) -ge 1000 -a "$(cstat bc 8 items_dropped)" = 0

# A stream two hops away (node 0 to node 7: through two other nodes), whose
# receiver is slow: batches pass through whole, and wait.
FERRY_RUNTIME_DIR=$TMP/bc_n7 bg far1.log prog ft_stream --job bfar --rank 1 --items 100000 --len 16 --recv-delay-us 100
f1=$LASTPID
FERRY_RUNTIME_DIR=$TMP/bc_n0 prog ft_stream --job bfar --rank 0 --items 100000 --len 16 --batch >"$TMP/far0.log" 2>&1
f0=$?
wait $f1
expect "100000 batched items three hops away to a slow receiver, all in order" test $f0 = 0 -a $? = 0

# A malformed batch for a rank on another node: caught before it leaves.
for mode in batch-spoof:"malformed batch" dense-count:"malformed dense batch"; do
	FERRY_RUNTIME_DIR=$TMP/bc_n1 bg "remote-${mode%%:*}.log" prog ft_stream --job "r${mode%%:*}" --rank 1 --forever \
		--until-quiet
	rb=$LASTPID
	expect "${mode%%:*}, to another node: the daemon closes that client's connection" \
		prog ft_raw "$TMP/bc_n0" "${mode%%:*}" "r${mode%%:*}" 0 2
	expect "... and says why" grep -q "${mode#*:} in TX ring" "$TMP/bc_n0.log"
	wait $rb
	expect "... and nothing of it reached rank 1 on node 1 (not even the valid items before the bad one)" \
		grep -q "rank 1 got 0" "$TMP/remote-${mode%%:*}.log"
done
expect "daemons exit cleanly" stop_cluster bc 8

# A line of 4 nodes (a physical mesh: every hop a link, every node on the
# way re-aggregates), 2 ranks each: dense batches pass through 2 nodes.
start_cluster ml 4 'topology: { physical = "mesh"; dims = [ 4 ]; };' || exit 1
expect "a 4-node line x 2 ranks, dense runs and other shapes, 2 steps, 4 items a ferry_recv" \
	run_cluster_job ml jml 4 2 --items 3000 --len 16 --len-max 32 --runs 60 --channels 2 --steps 2 --sync --batch --recv-max 4
expect "... items forwarded by the middle nodes ($(peer_sum ml 4 items_forwarded)), dense ($(cstat ml 4 dense_in))" \
	test "$(peer_sum ml 4 items_forwarded)" -gt 0 -a "$(cstat ml 4 dense_in)" -gt 0
FERRY_RUNTIME_DIR=$TMP/ml_n3 bg mlslow1.log prog ft_stream --job mlslow --rank 1 --items 100000 --len 16 --recv-delay-us 100
f1=$LASTPID
FERRY_RUNTIME_DIR=$TMP/ml_n0 prog ft_stream --job mlslow --rank 0 --items 100000 --len 16 --batch >"$TMP/mlslow0.log" 2>&1
f0=$?
wait $f1
expect "100000 dense 16-byte items three hops along the line to a slow receiver (parked, XOFF), all in order" \
	test $f0 = 0 -a $? = 0
expect "daemons exit cleanly" stop_cluster ml 4
finish
