#!/bin/bash
# Memory a client shares with ferryd for collectives stays the client's
# (daemon/local/mem.c, hold_pages; review finding: a client that left holes
# in a region, or punched them after sharing it, had ferryd allocate those
# pages at its first touch, charged to ferryd's memory cgroup: ferryd's
# RssShmem grew from 2 to 264 MB with a 256 MiB ferry_alloc, MADV_REMOVE and
# a one-rank all-to-all).  A region with a page missing is refused, saying
# where, and ferryd maps nothing of it; a region taken is sealed by ferryd
# (F_SEAL_FUTURE_WRITE), after which neither fallocate(PUNCH_HOLE) nor
# madvise(MADV_REMOVE) takes a page from it; ferry_alloc and the
# collectives work as before.  Hostile clients: tests/progs/ft_raw (mem-*:
# the protocol by hand) and tests/progs/ft_memseal (libferry).
. "$(dirname "$0")/lib.sh"

start_daemon n0 || exit 1
export FERRY_RUNTIME_DIR=$TMP/n0
pid=$(dpid n0)
# rss_shmem: ferryd's RssShmem (KiB): the shared pages it has mapped.
rss_shmem() { awk '$1 == "RssShmem:" { print $2 }' "/proc/$pid/status"; }
# raw LOG MODE JOB: ft_raw MODE as the only rank of JOB, its output in $TMP/LOG.
raw() { prog ft_raw "$TMP/n0" "$2" "$3" 0 1 >"$TMP/$1" 2>&1; }

# --- holes: refused -------------------------------------------------------------
r0=$(rss_shmem)
expect "a client shares 256 MiB of which no page exists: ferryd refuses it and closes the session" raw holes.log \
	mem-holes rh
expect "... saying where the first hole is" grep -q "refused: memory region 1: a hole at byte 0 of 268435456" \
	"$TMP/holes.log"
raw half.log mem-half rhalf
expect "one whose second half does not exist: refused too" grep -q "a hole at byte 134217728 of 268435456" \
	"$TMP/half.log"
expect "... the log says so" grep -q "a hole at byte 134217728" "$TMP/n0.log"
r1=$(rss_shmem)
expect "... and ferryd's RssShmem did not grow ($r0 KiB, then $r1 KiB)" test "$r1" -le $((r0 + 1024))
expect "... nor does it keep them mapped" test "$(grep -c 'memfd:ft_raw' "/proc/$pid/maps")" = 0

# --- pages taken back after sharing: refused by the kernel ----------------------
raw punch.log mem-punch rp
rc=$?
expect "a client shares 64 MiB, all there: ferryd takes it and seals it" grep -q "^sealed" "$TMP/punch.log"
expect "... then fallocate(PUNCH_HOLE) and MADV_REMOVE on it fail with EPERM, no page gone, the session open" \
	test $rc = 0
grep -q "^punch" "$TMP/punch.log" && sed 's/^/#   /' "$TMP/punch.log" | grep punch

# The review's case, through libferry: ferry_alloc 256 MiB, MADV_REMOVE,
# a one-rank all-to-all from its first half into its second.
bg memseal.log prog ft_memseal --job ms --mib 256
wait "$LASTPID"
rc=$?
expect "ferry_alloc 256 MiB, MADV_REMOVE over it: EPERM, every page stays" grep -q "madv_remove: EPERM resident 65536 of 65536" \
	"$TMP/memseal.log"
expect "... and an all-to-all on its halves moves every byte" test $rc = 0
grew=$(sed -n 's/.*shmem grew \(-*[0-9]*\) KiB/\1/p' "$TMP/memseal.log")
# Shmem is the machine's: other work may add some; the review's case added
# the 128 MiB ferryd wrote.
expect "... allocating no shared memory (the machine's Shmem grew ${grew:-?} KiB)" test "${grew:-999999}" -lt 65536

# --- ferry_alloc and the collectives as before ---------------------------------
coll_job a2a 3 3 n0 n0 n0 -- --alltoall 4096 --alloc
expect "3 ranks, all-to-alls in ferry_alloc memory" wait_job a2a
coll_job a2s 3 3 n0 n0 n0 -- --alltoall 100 --nonblocking
expect "3 ranks, all-to-alls from ordinary memory (staged)" wait_job a2s
expect "ferryd stops cleanly (no sanitizer report, no call outside its filter)" stop_daemon n0
finish
