#!/bin/bash
# Pieces of large items sent straight from the sender's TX ring (frames with
# lent bytes, net/frame.h; loans, local/endpoint.h) and read straight into
# the receiver's RX ring (receiving in place, net/link.h) where frames carry
# no tag: they arrive whole and in order, also when the link breaks again
# and again (what goes out again is lent too, so the ring's room comes back
# only once the peer has them); a sender that exits while its pieces are
# still unacknowledged leaves them in good hands: ferry_close returns once
# they are taken, the daemon copies them and lets the region go (or, with no
# memory for copies, keeps the region mapped and the endpoint counted
# against its user until the peer acknowledges them), and they arrive
# intact; a daemon stopped meanwhile exits cleanly.  Lent frames are
# acknowledged at once, so small rings do not wait for the ack timer.  With
# frame integrity on, nothing is lent or received in place.  And a client that rewrites what
# it lent disturbs only its own items.
. "$(dirname "$0")/lib.sh"

MB=1048576
# stream CLUSTER JOB N LEN [ARG...]: N items of LEN bytes from rank 0 on node
# 0 to rank 1 on node 1 (ft_stream: rank 1, with the ARGs, checks order and
# payloads; output in $TMP/JOB.R.log); rc0 is rank 0's exit status.
stream() {
	local r0 r1
	FERRY_RUNTIME_DIR=$TMP/$1_n1 bg "$2.1.log" prog ft_stream --job "$2" --rank 1 --items "$3" --len "$4" "${@:5}"
	r1=$LASTPID
	FERRY_RUNTIME_DIR=$TMP/$1_n0 bg "$2.0.log" prog ft_stream --job "$2" --rank 0 --items "$3" --len "$4"
	r0=$LASTPID
	wait "$r0"; rc0=$?
	wait "$r1"
}

# A node with a single endpoint per user: the kept one counts.
start_cluster ln 2 'limits: { user_clients = 1; };' || exit 1

stream ln a 40 $MB
expect "40 items of 1 MiB from n0 to n1: sent" test $rc0 = 0
expect "... and received in order, payloads checked ($(cat "$TMP/a.1.log"))" \
	grep -q '^rank 1 ok: received 40$' "$TMP/a.1.log"
expect "... their 640 pieces went out from the TX ring ($(stat ln_n0 pieces_lent) lent)" \
	test "$(stat ln_n0 pieces_lent)" = 640
expect "... and $(stat ln_n1 pieces_steered) of them were read straight into the RX ring" \
	test "$(stat ln_n1 pieces_steered)" -gt 0
expect "... every loan ended" wait_for '[ "$(stat ln_n0 loans_out)" = 0 ]'
expect "... and no region is left mapped" wait_for '[ "$(stat ln_n0 memory_region_bytes)" = 0 ]'
# The receiver reassembles each in a buffer that ferry_release keeps for the
# next (client/recv.c "Spare buffers"): once the first items made them, the
# second half of 400 items of 256 KiB faults in (almost) no page.  It keeps
# as many as its largest batch held, so a batch larger than all of the
# first half's makes the new buffers it needs, 64 pages each (the bound
# allows them: a receiver lagging more in the second half took 322 faults).
# glibc's mmap threshold is fixed (GLIBC_TUNABLES), so that every buffer is
# a mapping of its own, as the first ones are: glibc otherwise raises it at
# the first large free and serves the next ones from its heap, which hid a
# receiver that kept no buffer at all.
# spare_faults JOB WHAT: checks JOB's rank 1 (WHAT: how it received).
spare_faults() {
	local flt most first
	read -r flt most first <<<"$(sed -n 's/^rank 1 minflt .* second_half \([0-9]*\) most \([0-9]*\) first_half \([0-9]*\)$/\1 \2 \3/p' "$TMP/$1.1.log")"
	local lim=$((200 + 64 * (${most:-0} > ${first:-0} ? ${most:-0} - ${first:-0} : 0)))
	expect "400 items of 256 KiB received in order ($2), the second half with ${flt:-?} page faults (fewer than one per item and 64 per buffer its batches of up to ${most:-?} items needed beyond the first half's ${first:-?}: $lim)" \
		test $rc0 = 0 -a "${flt:-99999}" -lt "$lim" -a "$(grep -c '^rank 1 ok: received 400$' "$TMP/$1.1.log")" = 1
}
GLIBC_TUNABLES=glibc.malloc.mmap_threshold=131072 stream ln s 400 262144
spare_faults s "at once"

# unacked JOB: n1's daemon stopped, so that nothing is acknowledged, rank 0
# of JOB on n0 sends 12 pieces' worth (less than its 1 MiB TX ring) and
# closes; exited is 0 if it has exited within 10 s.  Rank 1 waits on n1
# (r0, r1: their pids).  Whoever calls it continues n1.
unacked() {
	FERRY_RUNTIME_DIR=$TMP/ln_n1 bg "$1.1.log" prog ft_stream --job "$1" --rank 1 --items 12 --len 65536 \
		--recv-timeout 30000
	r1=$LASTPID
	FERRY_RUNTIME_DIR=$TMP/ln_n0 bg "$1.0.log" prog ft_stream --job "$1" --rank 0 --items 12 --len 65536 \
		--hold-until "$TMP/$1.go"
	r0=$LASTPID
	wait_for "grep -q 'rank 0 open' '$TMP/$1.0.log'" ||
		{ echo "# rank 0 did not open"; cat "$TMP/$1".*.log; exit 1; }
	kill -STOP "$(dpid ln_n1)"
	touch "$TMP/$1.go"
	wait_for "! kill -0 $r0 2>/dev/null"
	exited=$?
}

# after_exit JOB: rank 0's state on n0 once it has exited with its pieces
# unacknowledged (unacked JOB), then n1 continued: lent, out, region, eps,
# back (pieces taken back), refused (1 if another endpoint of the user was
# refused then, its message in $TMP/JOB.open).
after_exit() {
	local lent0 back0
	lent0=$(stat ln_n0 pieces_lent)
	back0=$(stat ln_n0 pieces_taken_back)
	unacked "$1"
	lent=$(($(stat ln_n0 pieces_lent) - lent0))
	back=$(($(stat ln_n0 pieces_taken_back) - back0))
	out=$(stat ln_n0 loans_out)
	region=$(stat ln_n0 memory_region_bytes)
	eps=$(stat ln_n0 endpoints)
	FERRY_RUNTIME_DIR=$TMP/ln_n0 "$BUILD/tests/ft_open" --job "$1-open" --size 1 >"$TMP/$1.open" 2>&1
	refused=$?
	kill -CONT "$(dpid ln_n1)"
	wait "$r0"
	rc0=$?
	wait "$r1"
}

after_exit b
expect "peer stopped: the sender's ferry_close returned all the same" test $exited = 0
expect "... successfully ($(cat "$TMP/b.0.log" | tr '\n' ' '))" test $rc0 = 0
expect "... its 12 pieces lent ($lent), and taken back when it closed ($back): copied" \
	test "$lent" = 12 -a "$back" = 12
expect "... so nothing was left out ($out loans), no region mapped ($region bytes, $eps endpoints)" \
	test "$out" = 0 -a "$region" = 0 -a "$eps" = 0
expect "... and its user could open another endpoint at once ($(cat "$TMP/b.open"))" test $refused = 0
expect "peer continued: all 12 received in order, payloads checked ($(cat "$TMP/b.1.log"))" \
	grep -q '^rank 1 ok: received 12$' "$TMP/b.1.log"

# Where there is no memory for the copies (as ferryctl debug keep-loans
# makes it), the loans stay: the region stays mapped, the endpoint counted.
expect "keep-loans: fault injection on" \
	bash -c "'$BUILD/ferryctl' --runtime-dir '$TMP/ln_n0' debug keep-loans >/dev/null"
after_exit c
expect "no copies: the sender's ferry_close returned all the same ($(cat "$TMP/c.0.log" | tr '\n' ' '))" \
	test $exited = 0 -a $rc0 = 0
expect "... its 12 pieces lent ($lent), none taken back ($back)" test "$lent" = 12 -a "$back" = 0
expect "... still out once it had exited ($out)" test "$out" = 12
expect "... its endpoint gone ($eps) but its region still mapped ($region bytes)" \
	test "$eps" = 0 -a "$region" -gt 0
expect "... and still its user's: another endpoint was refused ($(cat "$TMP/c.open"))" \
	test $refused = 1 -a "$(grep -c '(EDQUOT): .*limits.user_clients = 1' "$TMP/c.open")" = 1
expect "peer continued: all 12 received in order, payloads checked ($(cat "$TMP/c.1.log"))" \
	grep -q '^rank 1 ok: received 12$' "$TMP/c.1.log"
expect "... the loans ended" wait_for '[ "$(stat ln_n0 loans_out)" = 0 ]'
expect "... and the region is unmapped" wait_for '[ "$(stat ln_n0 memory_region_bytes)" = 0 ]'
expect "... and the user may open an endpoint again" \
	bash -c "FERRY_RUNTIME_DIR='$TMP/ln_n0' '$BUILD/tests/ft_open' --job d --size 1 >/dev/null"

# The daemon told to stop while a closed endpoint's loans are out: it exits
# cleanly (the kept region unmapped, its frames freed; the sanitizer build
# checks both).
unacked e
out=$(stat ln_n0 loans_out)
stop_daemon ln_n0
stopped=$?
kill -CONT "$(dpid ln_n1)"
expect "stopped with loans out ($out): n0 exits cleanly" test "$out" -gt 0 -a $stopped = 0
kill "$r1" 2>/dev/null
wait "$r1" 2>/dev/null
expect "... and n1 too" stop_daemon ln_n1

# Taken back and then sent: with rings and a link window larger than the
# kernel's socket buffers, most of the pieces are still queued in ferryd
# when the sender exits, so they go out from the copies taken at its close.
start_cluster tb 2 'limits: { ring_bytes = 16777216; link_bytes = 33554432; };' || exit 1
N=160
FERRY_RUNTIME_DIR=$TMP/tb_n1 bg t.1.log prog ft_stream --job t --rank 1 --items $N --len 65536 --recv-timeout 30000
r1=$LASTPID
FERRY_RUNTIME_DIR=$TMP/tb_n0 bg t.0.log prog ft_stream --job t --rank 0 --items $N --len 65536 --hold-until "$TMP/t.go"
r0=$LASTPID
wait_for "grep -q 'rank 0 open' '$TMP/t.0.log'" || { echo "# rank 0 did not open"; cat "$TMP"/t.*.log; exit 1; }
kill -STOP "$(dpid tb_n1)"
touch "$TMP/t.go"
wait_for "! kill -0 $r0 2>/dev/null"
exited=$?
back=$(stat tb_n0 pieces_taken_back)
copies=$(stat tb_n0 taken_back_bytes)
eval "p1=\$((CPORT_tb + 1))"
inkernel=$(ss -tnH state established "( dport = :$p1 )" | awk '{ s += $2 } END { print s + 0 }')
kill -CONT "$(dpid tb_n1)"
wait "$r0"
wait "$r1"
expect "sender exited with its $N pieces unacknowledged ($exited), all taken back ($back, $copies bytes)" \
	test $exited = 0 -a "$back" = $N -a "$copies" = $((N * 65536))
expect "... most of them not yet in the kernel then ($inkernel of $((N * 65560)) bytes were)" \
	test "$inkernel" -lt $((N * 65560 / 2))
expect "... and all $N arrived intact, in order, sent from the copies ($(cat "$TMP/t.1.log"))" \
	grep -q "^rank 1 ok: received $N\$" "$TMP/t.1.log"
expect "... the copies are freed once acknowledged" \
	wait_for '[ "$(stat tb_n0 taken_back_bytes)" = 0 ]'
expect "daemons exit cleanly" stop_cluster tb 2

# Lent pieces are what goes out again after a reconnection: the link broken
# up to 15 times under a stream of 1 MiB items, every payload still intact.
# The breaks come while the sender still sends (a fixed schedule of them
# once came after a fast stream had ended: nothing was left to send again).
start_cluster ln 2 || exit 1
FERRY_RUNTIME_DIR=$TMP/ln_n1 bg r.1.log prog ft_stream --job r --rank 1 --items 300 --len $MB --recv-timeout 30000
r1=$LASTPID
FERRY_RUNTIME_DIR=$TMP/ln_n0 bg r.0.log prog ft_stream --job r --rank 0 --items 300 --len $MB \
	--hold-until "$TMP/r.go"
r0=$LASTPID
wait_for "grep -q 'rank 0 open' '$TMP/r.0.log'" || { echo "# rank 0 did not open"; cat "$TMP"/r.*.log; }
touch "$TMP/r.go"
kills=0
while [ $kills -lt 15 ] && kill -0 "$r0" 2>/dev/null; do
	"$BUILD/ferryctl" --runtime-dir "$TMP/ln_n0" debug kill-link 1 >/dev/null 2>&1 && kills=$((kills + 1))
	sleep 0.03
done
wait "$r0"
wait "$r1"
expect "links broken ($kills times) under a stream of lent pieces: all 300 items intact, in order ($(cat "$TMP/r.1.log"))" \
	grep -q '^rank 1 ok: received 300$' "$TMP/r.1.log"
re=$(grep -o 'retransmits [0-9]*' <<<"$("$BUILD/ferryctl" --runtime-dir "$TMP/ln_n0" stats)")
expect "... some sent again from the TX ring ($re, $(stat ln_n0 pieces_lent) lent, $(stat ln_n1 pieces_steered) received in place)" \
	test "${re#retransmits }" -gt 0 -a "$(stat ln_n1 pieces_steered)" -gt 0
expect "daemons exit cleanly" stop_cluster ln 2

# A client that keeps rewriting the bytes it lent, beside an honest job on
# the same link: only its own items change; the link and the honest job are
# not disturbed.
start_cluster ln 2 || exit 1
FERRY_RUNTIME_DIR=$TMP/ln_n1 bg s.1.log prog ft_stream --job s --rank 1 --hold-until "$TMP/never"
sink=$LASTPID
lent0=$(stat ln_n0 pieces_lent)
FERRY_RUNTIME_DIR=$TMP/ln_n1 bg h.1.log prog ft_stream --job h --rank 1 --items 300 --len 200000
h1=$LASTPID
FERRY_RUNTIME_DIR=$TMP/ln_n0 bg h.0.log prog ft_stream --job h --rank 0 --items 300 --len 200000
h0=$LASTPID
expect "scribbler: runs its 2 s without losing its session" \
	bash -c "'$BUILD/tests/ft_raw' '$TMP/ln_n0' scribble s 0 2 >'$TMP/s.0.log'"
wait $h0
wait $h1
# (The honest job's items are 3 pieces of 64 KiB, lent, and one of 3392 bytes.)
slent=$(($(stat ln_n0 pieces_lent) - lent0 - 900))
expect "... it sent 64 KiB items ($(cat "$TMP/s.0.log")), and $slent of them were lent" test "$slent" -ge 10
expect "... the honest job beside it got its 300 items whole, in order ($(cat "$TMP/h.1.log"))" \
	grep -q '^rank 1 ok: received 300$' "$TMP/h.1.log"
expect "... over a link that never went down" \
	test "$(grep -o 'disconnects [0-9]*' <<<"$("$BUILD/ferryctl" --runtime-dir "$TMP/ln_n0" stats)")" = "disconnects 0"
kill "$sink" 2>/dev/null
wait "$sink" 2>/dev/null
expect "daemons exit cleanly" stop_cluster ln 2

# A frame with lent bytes holds room in its sender's TX ring until the peer
# acknowledges it, so it asks for its acknowledgement at once
# (WIRE_FRAME_ACK_SOON), also where it is received in place: with rings of
# 256 KiB (three pieces), a receiver that waited for 256 KiB more, or the
# ack timer, before acknowledging stalled the stream at every turn of the
# ring (0.15 GB/s; in this test 525 of 537 ACKs were late without the flag,
# 3-7 with it where pieces received in place did not heed it, none since).
start_cluster sr 2 'limits: { ring_bytes = 262144; };' || exit 1
stream sr q 100 $MB
expect "rings of 256 KiB: 100 items of 1 MiB received in order ($(cat "$TMP/q.1.log"))" \
	test $rc0 = 0 -a "$(grep -c '^rank 1 ok: received 100$' "$TMP/q.1.log")" = 1
# (How many go in place depends on timing: none, at times, in the
# sanitizer build, whose receiver finds its ring full or a piece not yet
# whole in the socket.)
expect "... their 1600 pieces lent ($(stat sr_n0 pieces_lent)), $(stat sr_n1 pieces_steered) received in place" \
	test "$(stat sr_n0 pieces_lent)" = 1600
late=$(peerstat sr_n1 0 acks_late)
expect "... acknowledged as they came: $(peerstat sr_n1 0 acks_sent) ACKs, $late of them only when the delay ran out" \
	test "$(peerstat sr_n1 0 acks_sent)" -ge 100 -a "${late:-99}" -le 2
expect "... daemons exit cleanly" stop_cluster sr 2

# Frames split anywhere (tests/progs/ft_mitm dribble: node 0 reaches node 1
# through a proxy that relays in pieces of 1 byte to 40 KB, each its own
# segment): large items' pieces received in place whose heads and rests
# come in several reads, and frames of small items beside them, arrive
# whole and in order, over a link that never breaks.
proxied_cluster dr dribble || { echo "# the link through the proxy did not come up"; exit 1; }
mitm=$MITM_dr
FERRY_RUNTIME_DIR=$TMP/dr_n1 bg db.1.log prog ft_stream --job db --rank 1 --items 40 --len $MB --recv-timeout 60000
b1=$LASTPID
FERRY_RUNTIME_DIR=$TMP/dr_n1 bg ds.1.log prog ft_stream --job ds --rank 1 --items 20000 --len 100 --recv-timeout 60000
s1=$LASTPID
FERRY_RUNTIME_DIR=$TMP/dr_n0 bg db.0.log prog ft_stream --job db --rank 0 --items 40 --len $MB
b0=$LASTPID
FERRY_RUNTIME_DIR=$TMP/dr_n0 bg ds.0.log prog ft_stream --job ds --rank 0 --items 20000 --len 100
s0=$LASTPID
wait $b0 $s0 $b1 $s1
expect "split anywhere: 40 items of 1 MiB received in order, payloads checked ($(cat "$TMP/db.1.log"))" \
	grep -q '^rank 1 ok: received 40$' "$TMP/db.1.log"
expect "... and beside them 20000 items of 100 bytes ($(cat "$TMP/ds.1.log"))" \
	grep -q '^rank 1 ok: received 20000$' "$TMP/ds.1.log"
expect "... the 640 pieces lent ($(stat dr_n0 pieces_lent)); $(stat dr_n1 pieces_steered) received in place (whole in the socket when offered: few here)" \
	test "$(stat dr_n0 pieces_lent)" = 640
expect "... over a link that never went down" \
	test "$(peerstat dr_n0 1 disconnects)" = 0 -a "$(peerstat dr_n1 0 disconnects)" = 0
expect "... daemons exit cleanly" stop_daemon dr_n0
expect "... (node 1 too)" stop_daemon dr_n1
kill "$mitm" 2>/dev/null
wait "$mitm" 2>/dev/null
s=$(tail -1 "$TMP/dr.mitm")
expect "... and the frames were split: $s" \
	bash -c "[[ '$s' =~ ^relayed\ ([0-9]+)\ .*dribbled\ ([0-9]+)\ segments ]] && (( BASH_REMATCH[2] > 2 * BASH_REMATCH[1] ))"

# A receiver that pauses 50 ms after each ferry_recv, with RX rings of 32
# MiB, finds 64 items (the most one call returns here) at every call, and
# keeps the buffers of all of them (16 at most, as before, freed 48 at every
# call and faulted them in again: 6240 faults in the second half).
start_cluster sp 2 'limits: { ring_bytes = 33554432; };' || exit 1
GLIBC_TUNABLES=glibc.malloc.mmap_threshold=131072 stream sp sd 400 262144 --recv-delay-us 50000
spare_faults sd "pausing 50 ms after each batch, 32 MiB rings"
expect "... daemons exit cleanly" stop_cluster sp 2

# With frame integrity, frames are tagged over bytes of the daemon's own,
# and checked whole before any of it is used: nothing is lent, nothing is
# received in place.
"$BUILD/ferryctl" keygen >"$TMP/key"
chmod 600 "$TMP/key"
daemon_owns "$TMP/key"
start_cluster ki 2 "security: { key_file = \"$TMP/key\"; };" || exit 1
stream ki k 8 $MB
expect "integrity on: 8 items of 1 MiB received in order ($(cat "$TMP/k.1.log"))" \
	grep -q '^rank 1 ok: received 8$' "$TMP/k.1.log"
expect "... none of their pieces lent" test "$(stat ki_n0 pieces_lent)" = 0
expect "... nor received in place" test "$(stat ki_n1 pieces_steered)" = 0
expect "integrity on: daemons exit cleanly" stop_cluster ki 2
finish
