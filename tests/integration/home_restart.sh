#!/bin/bash
# A job's home restarts while the job runs elsewhere (the review's
# genreuse.sh): the home's next instance hands the job's id out again, and
# no item of the old job may reach the job that now has it.  Generations
# start at random, so the new job's generation differs but for 1 time in
# 256; and whatever the generation, the old job's nodes fail it (EHOSTDOWN)
# and make it give up the id: its items are dropped where they start.
. "$(dirname "$0")/lib.sh"

# Two users when the tests run as root, as in the review (one user's items
# reached another's job); otherwise both are the user running the tests.
as_two_users 64121 64122
OLD=$USER_A NEW=$USER_B

start_cluster hr 3 'topology: { physical = "switched"; virtual = "direct"; };' || exit 1
# Both jobs have their ranks on nodes 0 and 1 and their home on node 2.
for i in $(seq 100); do [ "$(job_home $OLD "old$i" 3)" = 2 ] && { J1="old$i"; break; }; done
for i in $(seq 100); do [ "$(job_home $NEW "new$i" 3)" = 2 ] && { J2="new$i"; break; }; done
# job_id LOG NAME: "id generation" the home logged for the job.
job_id() { sed -n "s/.*job $2 (uid [0-9]*): all 2 ranks joined on 2 nodes; id \([0-9]*\) generation \([0-9]*\)$/\1 \2/p" "$1"; }

# The old job: rank 0 on node 0 sends for ever (5000 items a second, and on
# after the job failed); rank 1 on node 1 takes 1000, then waits for a step
# that cannot complete (the sender never says done) until the job fails.
asbg old.0.log $OLD hr_n0 ft_stream --job "$J1" --rank 0 --len 64 --forever --send-delay-us 200
old0=$LASTPID
asbg old.1.log $OLD hr_n1 ft_stream --job "$J1" --rank 1 --items 1000 --end-step
old1=$LASTPID
expect "the old job $J1 (home node 2) runs across nodes 0 and 1" \
	wait_for '[ -n "$(job_id "$TMP/hr_n2.log" "$J1")" ] &&
		"$BUILD/ferryctl" --runtime-dir "$TMP/hr_n1" status | grep -qE "^job $J1 .*arrived [0-9]{4,}"'
id1=$(job_id "$TMP/hr_n2.log" "$J1")
cp "$TMP/hr_n2.log" "$TMP/hr_n2.first.log"

# Its home restarts (within the 2 s a lost node is given: a new instance).
kill -KILL "$(dpid hr_n2)"
wait "$(dpid hr_n2)" 2>/dev/null
start_daemon hr_n2 --config "$TMP/hr.conf" --node 2 || exit 1
cluster_up hr 3 || exit 1
wait "$old1"
rc=$?
old_failed() {
	[ $rc = 3 ] && grep -qE "^rank 1 step: a node or link the job needs was lost.*(node 2 restarted|link between nodes [01] and 2 has been down|its home node restarted)" \
		"$TMP/old.1.log"
}
expect "the old job's rank 1: its step fails with EHOSTDOWN naming node 2 (exit $rc)" old_failed
expect "... and its sender's node drops what it still sends at the source (dropped $(stat hr_n0 items_dropped))" \
	wait_for '[ "$(stat hr_n0 items_dropped)" -gt 0 ]'

# The new job, of another user, at the home's new instance: it gets the old
# job's id (the first index again), with whatever generation.
asbg new.1.log $NEW hr_n1 ft_stream --job "$J2" --rank 1 --items 1000000000 --len 64 --until-quiet
new1=$LASTPID
asbg new.0.log $NEW hr_n0 ft_stream --job "$J2" --rank 0 --items 20000 --len 64
new0=$LASTPID
expect "the new job $J2 sends its 20000 items" wait "$new0"
expect "... and its receiver takes them, every one in order and intact, and no other" wait "$new1"
expect "... (it got $(sed -n 's/^rank 1 got //p' "$TMP/new.1.log"), then nothing for 3 s)" \
	grep -qx "rank 1 got 20000" "$TMP/new.1.log"
id2=$(job_id "$TMP/hr_n2.log" "$J2")
expect "... with the id the old job had (old: id/generation ${id1:-?}, new: ${id2:-?})" \
	test -n "$id1" -a "${id1% *}" = "${id2% *}"
expect "the old job's sender was still sending meanwhile" kill -0 "$old0"
expect "daemons exit cleanly" stop_cluster hr 3
finish
