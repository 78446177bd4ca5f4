#!/bin/bash
# ferry_open and ferry_send report clear errors; defaults come from the
# environment of common launchers.
. "$(dirname "$0")/lib.sh"

# expect_open DESC ERRNAME MESSAGE-REGEX [env VAR=...] ft_open args...
expect_err() {
	local desc=$1 err=$2 re=$3; shift 3
	"$@" >"$TMP/out" 2>&1
	if grep -q "error .*($err)" "$TMP/out" && grep -qE "$re" "$TMP/out"; then t_ok "$desc"
	else t_fail "$desc" "$TMP/out"; fi
}
O=$BUILD/tests/ft_open

FERRY_RUNTIME_DIR=$TMP/none expect_err "no daemon: ENOENT, says so" ENOENT "is ferryd running" \
	env FERRY_RUNTIME_DIR="$TMP/none" "$O" --job j --rank 0 --size 1

# A socket file left behind by a daemon that was killed.
start_daemon dead || exit 1
{ kill -KILL "$(dpid dead)"; wait "$(dpid dead)"; } 2>/dev/null
expect_err "stale socket, nobody listening: ECONNREFUSED" ECONNREFUSED "not running" \
	env FERRY_RUNTIME_DIR="$TMP/dead" "$O" --job j --rank 0 --size 1
expect "a new daemon takes over the stale socket" start_daemon dead

printf 'limits: { max_clients = 2; user_clients = 2; };\n' >"$TMP/two.conf"
start_daemon n0 --config "$TMP/two.conf" || exit 1
export FERRY_RUNTIME_DIR=$TMP/n0

expect_err "rank outside the job: EINVAL" EINVAL "rank 5 of size 2" "$O" --job j --rank 5 --size 2
expect_err "job name with a space: EINVAL" EINVAL "job name" "$O" --job "a b" --rank 0 --size 1
expect_err "no job name anywhere: EINVAL" EINVAL "FERRY_JOB" env -u FERRY_JOB "$O" --rank 0 --size 1
expect_err "nobody else joins: ETIMEDOUT after the timeout" ETIMEDOUT "not all 2 ranks joined within 300 ms" \
	"$O" --job lonely --rank 0 --size 2 --timeout 300

# The holders wait for their missing rank until the test kills them (a
# timeout of their own could end them in the middle of these checks).
bg holder.log "$O" --job held --rank 0 --size 2 --timeout -1
wait_for '[ "$(stat n0 endpoints)" = 1 ]'
expect_err "rank already attached: EADDRINUSE" EADDRINUSE "rank 0 is already attached" \
	"$O" --job held --rank 0 --size 2 --timeout 300
expect_err "same job, other size: EINVAL" EINVAL "has 2 ranks, this process asked for 3" \
	"$O" --job held --rank 1 --size 3 --timeout 300
bg holder2.log "$O" --job other --rank 0 --size 2 --timeout -1
wait_for '[ "$(stat n0 endpoints)" = 2 ]'
expect_err "limits.max_clients reached: EUSERS" EUSERS "too many clients" \
	"$O" --job third --rank 0 --size 1 --timeout 300
kill "${PIDS[@]: -2}" 2>/dev/null; wait "${PIDS[@]: -2}" 2>/dev/null
wait_for '[ "$(stat n0 endpoints)" = 0 ]'

expect_err "send to a rank outside the job: EINVAL" EINVAL "outside the job" \
	"$O" --job s1 --rank 0 --size 1 --send-to 1
expect_err "send above FERRY_MAX_ITEM: EMSGSIZE" EMSGSIZE "above FERRY_MAX_ITEM" \
	"$O" --job s2 --rank 0 --size 1 --send-to 0 --send-len 4194305
expect_err "channel above 65535: EINVAL" EINVAL "channel" \
	"$O" --job s3 --rank 0 --size 1 --send-to 0 --channel 65536
expect "a 4 MiB item (the maximum) is accepted" \
	bash -c "'$O' --job s4 --rank 0 --size 1 --send-to 0 --send-len 4194304 >/dev/null"

expect "rank and size from FERRY_JOB/FERRY_RANK/FERRY_SIZE" \
	bash -c "FERRY_JOB=e1 FERRY_RANK=0 FERRY_SIZE=1 '$O' | grep -q 'open ok rank 0 size 1'"
expect "from Slurm (SLURM_PROCID, SLURM_NTASKS, SLURM_JOB_ID)" \
	bash -c "env -u FERRY_JOB SLURM_JOB_ID=77 SLURM_STEP_ID=0 SLURM_PROCID=0 SLURM_NTASKS=1 '$O' | grep -q 'open ok rank 0 size 1'"
expect "from Open MPI (OMPI_COMM_WORLD_RANK/SIZE, PMIX_NAMESPACE)" \
	bash -c "env -u FERRY_JOB PMIX_NAMESPACE=prterun-x-1@1 OMPI_COMM_WORLD_RANK=0 OMPI_COMM_WORLD_SIZE=1 '$O' | grep -q 'open ok rank 0 size 1'"
expect_err "FERRY_RANK not a number: EINVAL" EINVAL "not a number" env FERRY_JOB=e2 FERRY_RANK=x FERRY_SIZE=1 "$O"

# The daemon dies while a client waits for items: the client learns it.
bg waiter.log prog ft_stream --job w --rank 1 --items 10
w=$LASTPID
bg waiter0.log "$O" --job w --rank 0 --size 2 --hold 3000
wait_for '[ "$(stat n0 endpoints)" = 2 ]'
{ kill -KILL "$(dpid n0)"; wait "$(dpid n0)"; } 2>/dev/null
wait $w
expect "a client waiting in ferry_recv gets ECONNRESET when ferryd dies" \
	grep -q "connection to ferryd was lost" "$TMP/waiter.log"
finish
