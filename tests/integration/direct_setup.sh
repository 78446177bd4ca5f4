#!/bin/bash
# The daemon's half of the same-node direct rings (proto/direct.h,
# daemon/local/direct.c), with clients that speak the protocol by hand
# (ft_raw's direct-* and plain-* modes): the ranks of a job that ask get one
# CTL_DIRECT each before READY (the region, sealed, of the right size; its
# memfd and the slots' eventfds, their own among them), a slot each in rank
# order; a rank that did not ask gets none and has no slot; above
# direct.max_ranks nobody gets one; when a rank with a slot ends (it exits,
# or is killed) the others find gone[slot] set in the region's header and
# are woken through their eventfd; the region is unmapped with the job.
. "$(dirname "$0")/lib.sh"

RING=262144
# proto_direct_region_bytes(n, RING): a header page, then n * n rings, each
# its 192-byte header and data rounded up to a page.
region() { echo $((4096 + $1 * $1 * ((RING + 192 + 4095) / 4096 * 4096))); }
# field LOG NAME: the value of NAME=... on the direct line of an ft_raw log.
field() { sed -n "s/^direct .*\<$2=\([^ ]*\).*/\1/p" "$TMP/$1"; }
# line LOG REGEX: the log has a line matching it.
line() { grep -qE "$2" "$TMP/$1"; }
status() { "$BUILD/ferryctl" --runtime-dir "$TMP/$1" status; }

start_daemon n0 || exit 1

# --- two ranks that ask; one exits once it is ready ---
bg dj0.log prog ft_raw "$TMP/n0" direct-watch dj 0 2
w0=$LASTPID
bg dj1.log prog ft_raw "$TMP/n0" direct-ready dj 1 2
w1=$LASTPID
wait $w1
expect "a rank that asked: one DIRECT before READY" line dj1.log '^ready directs=1$'
wait $w0
expect "the other rank too" line dj0.log '^ready directs=1$'
for l in dj0.log dj1.log; do
	expect "$l: n=2, ranks 0,1 by slot" line $l '^direct n=2 slot=[01] ranks=0,1 '
	expect "$l: the memfd and 2 eventfds (3 fds)" \
		test "$(field $l fds)" = 3 -a "$(field $l eventfds)" = 2
	expect "$l: its own slot's eventfd is its endpoint's" test "$(field $l own-efd)" = same
	expect "$l: region of $(region 2) bytes (message and fstat), rings of $RING" \
		test "$(field $l region)" = "$(region 2)" -a "$(field $l size)" = "$(region 2)" -a "$(field $l ring)" = $RING
	expect "$l: sealed against shrinking, growing and more seals" test "$(field $l seals)" = shrink,grow,seal
done
expect "slots in rank order: rank 0 has slot 0, rank 1 slot 1" \
	test "$(field dj0.log slot)" = 0 -a "$(field dj1.log slot)" = 1
expect "rank 1 exited: rank 0 was woken and sees gone[1] (and not gone[0])" line dj0.log '^woken gone=0,1$'
expect "the job counts as given direct rings" test "$(stat n0 direct_jobs)" = 1
expect "the region's header is unmapped when the job ends" wait_for '[ "$(stat n0 direct_regions)" = 0 ]'

# --- three ranks, one of which does not ask; one of those that did is killed ---
bg dk0.log prog ft_raw "$TMP/n0" direct-watch dk 0 3
k0=$LASTPID
bg dk1.log prog ft_raw "$TMP/n0" plain-hold dk 1 3
k1=$LASTPID
bg dk2.log prog ft_raw "$TMP/n0" direct-hold dk 2 3
k2=$LASTPID
expect "all three are ready" wait_for 'line dk0.log "^ready" && line dk1.log "^ready" && line dk2.log "^ready"'
expect "the rank that did not ask gets no DIRECT" line dk1.log '^ready directs=0$'
expect "those that asked get 2 slots, for ranks 0 and 2 only" \
	bash -c "grep -q '^direct n=2 slot=0 ranks=0,2 fds=3 ' '$TMP/dk0.log' && grep -q '^direct n=2 slot=1 ranks=0,2 fds=3 ' '$TMP/dk2.log'"
expect "ferryctl status shows the job's slots and ring size" \
	bash -c "'$BUILD/ferryctl' --runtime-dir '$TMP/n0' status | grep -q '^  direct rings: 2 slots of $RING bytes each (region $(region 2) bytes); ranks by slot: 0 2\$'"
expect "nobody is woken while every rank stays" not line dk0.log '^woken'
{ kill -KILL $k2; wait $k2; } 2>/dev/null      # (no "Killed" from the shell)
expect "rank 2 killed: rank 0 is woken and sees gone[1]" wait_for 'line dk0.log "^woken gone=0,1$"'
# (Rank 0 exits once it has looked: its slot may be gone already too.)
expect "ferryctl status shows slot 1 (rank 2) gone" \
	wait_for 'status n0 | grep -qE "ranks by slot: 0( \(gone\))? 2 \(gone\)$"'
wait $k0
expect "rank 0 exited: its slot is gone too, the job stays for rank 1" \
	wait_for 'status n0 | grep -q "ranks by slot: 0 (gone) 2 (gone)$"'
kill -TERM $k1
expect "two jobs given direct rings, none failed, none mapped once they ended" \
	wait_for '[ "$(stat n0 direct_jobs)" = 2 ] && [ "$(stat n0 direct_failed)" = 0 ] && [ "$(stat n0 direct_regions)" = 0 ]'

# --- above direct.max_ranks: nobody gets direct rings ---
cat >"$TMP/one.conf" <<EOF
direct: { max_ranks = 1; };
EOF
start_daemon n1 --config "$TMP/one.conf" || exit 1
bg dm0.log prog ft_raw "$TMP/n1" direct-ready dm 0 2
m0=$LASTPID
bg dm1.log prog ft_raw "$TMP/n1" direct-ready dm 1 2
m1=$LASTPID
wait $m0 $m1
expect "max_ranks = 1, two ranks ask: neither gets a DIRECT, both get READY" \
	bash -c "grep -q '^ready directs=0$' '$TMP/dm0.log' && grep -q '^ready directs=0$' '$TMP/dm1.log'"
expect "... and the log says why" grep -q "2 ranks here asked for direct rings, more than direct.max_ranks = 1" "$TMP/n1.log"
expect "... and no job counts as given direct rings" test "$(stat n1 direct_jobs)" = 0

expect "daemon n0 exits cleanly" stop_daemon n0
expect "daemon n1 exits cleanly" stop_daemon n1
finish
