#!/bin/bash
# A peer that breaks the link protocol (garbage, a wrong key, malformed or
# out-of-sequence frames) loses its link; the daemon logs why and keeps
# serving everyone else.  Collective pieces for a job from a node that has
# none of its ranks are dropped; one of an operation no node can have
# reached fails the job at once instead of living as long as it.
. "$(dirname "$0")/lib.sh"

# Three nodes, all peers of each other; node 0 is played by ft_peer.
cluster_conf pf 3 'topology: { virtual = "direct"; };' || exit 1
start_daemon pf_n1 --config "$TMP/pf.conf" --node 1 || exit 1
start_daemon pf_n2 --config "$TMP/pf.conf" --node 2 || exit 1
port1=$((CPORT_pf + 1))
pid=$(dpid pf_n1)

check() {   # check MODE LOG-REGEX
	expect "$1: the daemon closes the link" prog ft_peer 127.0.0.1 "$port1" "$1" 0 1 pf
	expect "$1: the daemon says why" grep -qE "$2" "$TMP/pf_n1.log"
	expect "$1: the daemon still runs" kill -0 "$pid"
}
check garbage    "malformed frame header|malformed HELLO|unexpected frame|speaks wire protocol version"
check wrong-key  "connection claiming to be node 0 failed authentication: it holds a different cluster key"
check bad-header "malformed frame header"
check bad-item   "peer 0: malformed frame 1"
check bad-seq    "peer 0: frame 5 out of sequence \(expected 1\)"
check bad-ack    "peer 0 acknowledges frame 1000, but only [0-9]+ went out"
check bad-node   "peer 0: malformed frame 1"
# A malformed batch passing through must be refused by the node it passes
# (node 1), not by the destination (node 2): refused there, the frame node 1
# built around it would come again for ever, and the link 1-2 with it.
check bad-batch  "peer 0: malformed frame 1"
expect "bad-batch: node 2 never saw it (refused nothing)" not grep -q "malformed frame" "$TMP/pf_n2.log"
# The same for a dense batch (proto/ring.h "Dense batches"): a count that is
# not its header's, passing through; one for this node whose header does
# not fit its length.
check bad-dense  "peer 0: malformed frame 1"
expect "bad-dense: node 2 never saw it (refused nothing)" not grep -q "malformed frame" "$TMP/pf_n2.log"
check bad-dense-here "peer 0: malformed frame 1"
expect "a peer that behaves keeps its link" prog ft_peer 127.0.0.1 "$port1" good 0 1 pf
expect "nodes 1 and 2 kept their own link up" link_up pf_n2 1

# A job on nodes 1 and 2 (one whose home is not the fake node 0) still runs.
for i in $(seq 100); do job="after$i"; [ "$(job_home "$(id -u)" "$job" 3)" != 0 ] && break; done
FERRY_RUNTIME_DIR=$TMP/pf_n1 bg a0.log prog ft_alltoall --job "$job" --rank 0 --size 2 --items 3000 --steps 2 --sync
a0=$LASTPID
FERRY_RUNTIME_DIR=$TMP/pf_n2 bg a1.log prog ft_alltoall --job "$job" --rank 1 --size 2 --items 3000 --steps 2 --sync
wait $LASTPID; r1=$?
wait $a0; r0=$?
expect "the daemons still carry a job between them, every item exactly once" test $r0 = 0 -a $r1 = 0
[ $r0 = 0 ] && [ $r1 = 0 ] || t_fail "job output" "$TMP/a0.log" "$TMP/a1.log"
# Collective pieces from the fake peer (review of issue 12).  A job of
# barriers on nodes 1 and 2 (rank 1 enters each 10 ms after rank 0).
coll_ids() {    # coll_ids JOB: "id generation" of JOB as node 1 says
	"$BUILD/ferryctl" --runtime-dir "$TMP/pf_n1" status |
		sed -n "s/^job $1 uid .*, ready, id \([0-9]*\) generation \([0-9]*\),.*/\1 \2/p"
}
for i in $(seq 100); do cs="cs$i"; [ "$(job_home "$(id -u)" "$cs" 3)" != 0 ] && break; done
coll_job "$cs" 2 300 pf_n1 pf_n2 -- --skew-ms 10
expect "a job of barriers runs on nodes 1 and 2" wait_for "[ -n \"\$(coll_ids $cs)\" ]"
read -r id gen <<<"$(coll_ids "$cs")"
expect "a piece for a group not made, from a node with no rank of the job: dropped, the link kept" \
	env FT_PEER_JOB="$id" FT_PEER_GEN="$gen" "$BUILD/tests/ft_peer" 127.0.0.1 "$port1" coll-stranger 0 1 pf
expect "... node 1 says so" grep -q "collective piece for group deadbeef from node 0, which has no rank" \
	"$TMP/pf_n1.log"
expect "... and the job's barriers all pass (it was not failed)" wait_job "$cs"
for i in $(seq 100); do cf="cf$i"; [ "$(job_home "$(id -u)" "$cf" 3)" != 0 ] && break; done
coll_job "$cf" 2 300 pf_n1 pf_n2 -- --skew-ms 10
expect "another job of barriers runs" wait_for "[ -n \"\$(coll_ids $cf)\" ]"
read -r id gen <<<"$(coll_ids "$cf")"
expect "a piece of an operation far ahead (claiming to be node 2's): the link kept" \
	env FT_PEER_JOB="$id" FT_PEER_GEN="$gen" FT_PEER_SRC=2 FT_PEER_FROM=1 FT_PEER_SEQ=2 "$BUILD/tests/ft_peer" 127.0.0.1 \
	"$port1" coll-far 0 1 pf
rcs=""
for p in $(eval echo "\$JOB_$cf"); do wait "$p"; rcs="$rcs $?"; done
expect "... the job fails at once on both nodes (no operation kept for it) [exit codes$rcs]" test "$rcs" = " 3 3"
[ "$rcs" = " 3 3" ] || for f in "$TMP/$cf".*.log; do sed "s/^/#   /" "$f" | tail -5; done
expect "... saying why" grep -q "sent a piece of collective operation 4294967280, while node 1 started only" \
	"$TMP/$cf.0.log"
expect "daemon 1 exits cleanly" stop_daemon pf_n1
expect "daemon 2 exits cleanly" stop_daemon pf_n2
finish
