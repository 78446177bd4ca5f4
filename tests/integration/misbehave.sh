#!/bin/bash
# Clients that break the protocol lose their session; the daemon logs why and
# keeps serving everyone else.
. "$(dirname "$0")/lib.sh"

start_daemon n0 || exit 1
export FERRY_RUNTIME_DIR=$TMP/n0
pid=$(dpid n0)

# A well-behaved job runs through all of it.
start_job bystanders 3 --items 30000 --len 16 --steps 2

killed=0
for mode in ctl-garbage bad-first join-twice ring-garbage head-garbage; do
	expect "$mode: the daemon closes that client's connection" prog ft_raw "$TMP/n0" "$mode" "raw-$mode" 0 1
	killed=$((killed + 1))
	expect "$mode: the daemon is still running" kill -0 "$pid"
done
expect "every one of them was counted as misbehaving ($killed)" test "$(stat n0 sessions_killed)" = $killed
expect "the log says why (garbage in TX ring)" grep -q "garbage in TX ring" "$TMP/n0.log"
expect "the log says why (malformed control message)" grep -q "malformed control message" "$TMP/n0.log"
expect "the log says why (first message is not HELLO)" grep -q "first message is not HELLO" "$TMP/n0.log"

# A receiver that publishes an impossible RX tail while a sender streams to it.
bg tailsend.log prog ft_stream --job tg --rank 0 --items 50000 --len 64
s=$LASTPID
expect "tail-garbage: the daemon closes that client's connection" prog ft_raw "$TMP/n0" tail-garbage tg 1 2
expect "tail-garbage: the log says why" grep -q "impossible RX tail" "$TMP/n0.log"
wait $s
expect "tail-garbage: the sender finishes (items for the gone rank are dropped, counted)" \
	test $? = 0 -a "$(stat n0 items_dropped)" -gt 0


# The post page (proto/post.h), once the log's rate limit (10 lines of
# dropped sessions in 5 s) has let the lines above through.
sleep 5
for mode in post-long post-ahead post-other post-short; do
	expect "$mode: the daemon closes that client's connection" prog ft_raw "$TMP/n0" "$mode" "raw-$mode" 0 1
	killed=$((killed + 1))
	expect "$mode: the daemon is still running" kill -0 "$pid"
done
expect "... each counted as misbehaving" test "$(stat n0 sessions_killed)" -ge $killed
expect "the log says why (a post longer than a slot)" grep -q "post page longer than a slot" "$TMP/n0.log"
expect "the log says why (posted past the slots)" grep -q "post page than it has slots" "$TMP/n0.log"
expect "the log says why (a post that is no collective)" grep -q "not one whole collective operation" "$TMP/n0.log"
expect "the log says why (a post shorter than a header)" grep -q "shorter than a message header" "$TMP/n0.log"

# A client that keeps its post page full of operations that fail at once
# (a group it is not in), and never reads its socket: ferryd takes at most
# a page of them in a turn of its loop, and none once the session closed;
# everyone else is served meanwhile.
bg flood.log prog ft_raw "$TMP/n0" post-flood raw-flood 0 1
fl=$LASTPID
sleep 0.5
expect "post-flood: ferryd answers a query meanwhile" \
	bash -c "timeout 2 '$BUILD/ferryctl' --runtime-dir '$TMP/n0' status >/dev/null"
wait $fl
expect "post-flood: the flood ran its 2 s ($(cat "$TMP/flood.log"))" grep -q "^posted [0-9]* taken [0-9]*$" "$TMP/flood.log"
expect "post-flood: the daemon is still running" kill -0 "$pid"

expect "the bystander job got every item exactly once, in order" wait_job bystanders

# A post that says it comes after 5 control messages its client never sent
# waits for them, and the daemon sleeps meanwhile (the socket would wake it).
ticks() { awk '{ print $14 + $15 }' "/proc/$pid/stat"; }
t0=$(ticks)
later=$(prog ft_raw "$TMP/n0" post-later raw-later 0 1)
t1=$(ticks)
expect "post-later: the post stays untaken ($(echo $later))" test "$later" = "$(printf 'posted\ntaken 0')"
expect "... and the daemon does not spin for it: $((t1 - t0)) ticks of CPU in 2 s" test $((t1 - t0)) -lt 40
expect "memory and regions of the dropped sessions are freed" \
	wait_for '[ "$(stat n0 memory_region_bytes)" = 0 ] && [ "$(stat n0 memory_queued_bytes)" = 0 ]'
expect "daemon exits cleanly" stop_daemon n0
finish
