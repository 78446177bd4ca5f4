#!/bin/bash
# A peer that breaks the link protocol (garbage, a wrong key, malformed or
# out-of-sequence frames) loses its link; the daemon logs why and keeps
# serving everyone else.
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
check garbage    "malformed frame header|malformed HELLO|unexpected frame"
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
expect "daemon 1 exits cleanly" stop_daemon pf_n1
expect "daemon 2 exits cleanly" stop_daemon pf_n2
finish
