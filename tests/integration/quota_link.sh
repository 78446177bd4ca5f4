#!/bin/bash
# One user's receivers that do not read, with that user at its memory limit,
# must not pause the link that every user shares (the review's stall.sh):
# the receivers' daemon tells the senders' daemon to stop (XOFF) first, and
# what still arrives for them is parked against the node's memory, not held
# to their user's limit (user_take_parked).  Another user's job across the
# same link completes meanwhile; nothing of the held jobs is lost.
. "$(dirname "$0")/lib.sh"

# Two users when the tests run as root, each with 1 MiB of memory per node;
# otherwise both are the user running the tests (the link must not pause
# either way).
as_two_users 64111 64112
HOG=$USER_A VICTIM=$USER_B

cluster_conf ql 2 "limits: { ring_bytes = 262144; pending_bytes = 262144; link_bytes = 1048576;
	user_memory_bytes = 1048576; };" || exit 1
start_daemon ql_n0 --config "$TMP/ql.conf" --node 0 || exit 1
start_daemon ql_n1 --config "$TMP/ql.conf" --node 1 || exit 1
cluster_up ql 2 || exit 1

# The hog: 4 receivers on node 1 that do not read (their queues, 256 KiB
# each, reach the user's 1 MiB), each fed from node 0.
HELD=4 N=20000  # 20000 x 200 B = 4 MB per receiver, far beyond rings and queues
recvs="" sends=""
for i in $(seq $HELD); do
	asbg "hog$i.1.log" $HOG ql_n1 ft_stream --job "hog$i" --rank 1 --items $N --len 200 --hold-until "$TMP/go"
	recvs="$recvs $LASTPID"
	asbg "hog$i.0.log" $HOG ql_n0 ft_stream --job "hog$i" --rank 0 --items $N --len 200 --start-after "$TMP/send"
	sends="$sends $LASTPID"
done
# All set up before they send: a user at its limit can join no more jobs.
expect "$HELD jobs of the held receivers' user are ready" \
	wait_for '[ "$("$BUILD/ferryctl" --runtime-dir "$TMP/ql_n1" status | grep -c "^job hog.*, ready,")" = $HELD ]'
touch "$TMP/send"
usermem() {
	"$BUILD/ferryctl" --runtime-dir "$TMP/ql_n1" status |
		awk -v u="$HOG:" '$1 == "user" && $2 == u { for (i = 3; i < NF; i++) if ($i == "memory") { print $(i + 1); exit } }'
}
expect "each held receiver's senders were told to wait (XOFF)" \
	wait_for '[ "$(stat ql_n1 flow_xoff_sent)" -ge $HELD ]'
expect "... and what came on was parked beyond the user's 1 MiB (it holds $(usermem) bytes on node 1)" \
	wait_for '[ "$(usermem)" -gt 1048576 ]'

# The victim: another user's stream across the same link, node 0 to 1.
asbg victim.1.log $VICTIM ql_n1 ft_stream --job victim --rank 1 --items 20000 --len 64
vr=$LASTPID
asbg victim.0.log $VICTIM ql_n0 ft_stream --job victim --rank 0 --items 20000 --len 64
vs=$LASTPID
expect "another user's job across the same link completes (all 20000 items, in order)" wait "$vr"
expect "... its sender too" wait "$vs"
expect "the link into node 1 was never paused (stalls $(peerstat ql_n1 0 stalls))" \
	test "$(peerstat ql_n1 0 stalls)" = 0
expect "... while the held receivers still have not read (their user at $(usermem) bytes)" \
	test ! -e "$TMP/go" -a "$(usermem)" -ge 1048576

touch "$TMP/go"
all_ok() { local p rc=0; for p in "$@"; do wait "$p" || rc=1; done; return $rc; }
# shellcheck disable=SC2086
expect "the held receivers, reading at last, get all $N items each, in order, intact" all_ok $recvs
# shellcheck disable=SC2086
expect "... and their senders finish" all_ok $sends
expect "nothing was dropped" test "$(stat ql_n1 items_dropped)$(stat ql_n0 items_dropped)" = 00
expect "daemons exit cleanly" stop_cluster ql 2
finish
