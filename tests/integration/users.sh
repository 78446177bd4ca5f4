#!/bin/bash
# Two Unix users cannot see, join or reach each other's jobs: jobs are keyed
# by the uid ferryd reads from SO_PEERCRED.
. "$(dirname "$0")/lib.sh"

if [ "$(id -u)" != 0 ] || ! command -v setpriv >/dev/null; then
	echo "ok - $TEST: # SKIP needs root and setpriv to switch users"
	exit 0
fi
U1=64101 U2=64102

# The build tree may not be readable by other users: copy what they run.
mkdir -p "$TMP/bin"
cp "$BUILD/tests/ft_open" "$BUILD/tests/ft_alltoall" "$BUILD/ferryctl" "$TMP/bin/"
cp -P "$BUILD"/libferry.so* "$TMP/bin/"
chmod -R a+rX "$TMP/bin"

start_daemon n0 || exit 1
as() {
	local uid=$1; shift
	setpriv --reuid="$uid" --regid="$uid" --clear-groups \
		env LD_LIBRARY_PATH="$TMP/bin" FERRY_RUNTIME_DIR="$TMP/n0" "$TMP/bin/$@"
}

# Same job name, one rank each: they must not form one job.
as $U1 ft_open --job shared --rank 0 --size 2 --timeout 1500 >"$TMP/u1.out" 2>&1 &
p1=$!
as $U2 ft_open --job shared --rank 1 --size 2 --timeout 1500 >"$TMP/u2.out" 2>&1 &
p2=$!
wait $p1 $p2
expect "user 1's rank 0 waits in vain for rank 1 of user 2" grep -q ETIMEDOUT "$TMP/u1.out"
expect "user 2's rank 1 waits in vain for rank 0 of user 1" grep -q ETIMEDOUT "$TMP/u2.out"

# Same job, same rank, different users: no clash, since they are two jobs.
# User 1's rank waits until it is killed below, after the checks that need
# it attached.
as $U1 ft_open --job solo --rank 0 --size 2 --timeout -1 >"$TMP/s1.out" 2>&1 &
p1=$!
wait_for '[ "$("$BUILD/ferryctl" --runtime-dir "$TMP/n0" stats | awk "/^endpoints/{print \$2}")" = 1 ]'
as $U2 ft_open --job solo --rank 0 --size 2 --timeout 500 >"$TMP/s2.out" 2>&1
expect "user 2 may take rank 0 of its own 'solo' while user 1 holds rank 0 of theirs" \
	bash -c "! grep -q EADDRINUSE '$TMP/s2.out' && grep -q ETIMEDOUT '$TMP/s2.out'"

# What each user sees of the other's job while it is attached.
as $U2 ferryctl status >"$TMP/st2.out" 2>&1
"$BUILD/ferryctl" --runtime-dir "$TMP/n0" status >"$TMP/st0.out" 2>&1
expect "user 2's ferryctl status does not show user 1's job" bash -c "! grep -q 'uid $U1' '$TMP/st2.out'"
expect "root's ferryctl status shows it" grep -q "job solo uid $U1" "$TMP/st0.out"
expect "user 2's status shows what user 2 holds against its limits" grep -q "^  user $U2: 0 endpoints, 1 connections" "$TMP/st2.out"
expect "... and nothing of what user 1 holds" bash -c "! grep -q 'user $U1' '$TMP/st2.out'"
expect "root's status shows every user's" grep -q "^  user $U1: 1 endpoints" "$TMP/st0.out"
as $U2 ferryctl stats >"$TMP/stats2.out" 2>&1
expect "user 2's ferryctl stats shows node-wide counters, no job, rank or pid" \
	bash -c "grep -q '^endpoints 1$' '$TMP/stats2.out' && ! grep -qiE 'solo|pid|rank|uid' '$TMP/stats2.out'"
kill "$p1"
wait $p1

# Positive control: the same user's ranks do form a job and exchange items.
as $U1 ft_alltoall --job together --rank 0 --size 2 --items 2000 >"$TMP/t0.out" 2>&1 &
p1=$!
as $U1 ft_alltoall --job together --rank 1 --size 2 --items 2000 >"$TMP/t1.out" 2>&1
r1=$?
wait $p1
expect "two processes of one user exchange items" test $r1 = 0 -a $? = 0
expect "daemon exits cleanly" stop_daemon n0
finish
