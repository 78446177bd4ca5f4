/* proto/direct.h - the direct rings between the endpoints of one job on one
 * node (README, "Direct rings").
 *
 * Items from one process to another of its job on the same node need not go
 * through ferryd: that is three processes (and, where they share cores, three
 * scheduler turns) for what one ring between the two can do.  When every
 * rank of a job has joined, ferryd makes one memfd region per job and node
 * with a ring from every local endpoint to every local endpoint (itself
 * included), and hands it to the endpoints that asked for it (CTL_JOIN_DIRECT)
 * with CTL_DIRECT, before READY.  From then on a client writes every item
 * for such a rank into their ring, never into its TX ring: one way per pair
 * of ranks, so their order is the order sent.
 *
 * Layout: a header page, then n * n rings; the ring from slot i to slot j is
 * at proto_direct_ring_off(n, size, i, j), each ring_bytes(size) rounded up
 * to a page.  The rings are proto/ring.h's, with the RX ring's records
 * (kind ITEM, DENSE: proto/ring.h "Dense batches", and STEP as below; src
 * the producer's rank; PAD).  Each
 * reader offers its writers to run membarrier before it sleeps, as ferryd
 * does for TX rings, when it gets the region, which may be after a writer
 * began: proto/ring.h "Late offers".  Each side wakes the
 * other through the eventfd ferryd gave it for that slot (that endpoint's
 * efd_client).  The header holds one byte per slot, gone[slot]: ferryd sets
 * it when that endpoint ends and wakes the others, so that a sender stops
 * waiting for room that will never come (its items for that rank are
 * dropped, as ferryd drops items for a rank that left, and the job's steps
 * fail).  The region is zero when made: every ring empty, nobody gone.
 *
 * Trust: the region is shared by processes of one job, hence of one user;
 * ferryd only writes gone[] (never reads the region), and each client checks
 * what it reads as it checks its RX ring: a peer that writes garbage breaks
 * its own job, never the daemon or another user's.
 *
 * Steps need no counting for these items: a rank's DONE record goes into
 * its TX ring after its direct items are in their rings, that is, delivered.
 * But a receiver reads its RX ring and its direct rings side by side, and
 * must still hand out every item of a step before any of the next, as the
 * RX ring alone does (STEP record between them): so at ferry_done a rank
 * writes a STEP record (dst: the step, len 0, src: its rank) into each of
 * its direct rings, after its items of the step and before its DONE, and
 * the receiver does not read a ring past such a marker before the step has
 * completed and every other ring reached its marker (client/recv.c, "Steps
 * and direct rings").
 */
#ifndef FERRY_PROTO_DIRECT_H
#define FERRY_PROTO_DIRECT_H

#include "ring.h"

#include <stdint.h>

#define PROTO_DIRECT_MAX   64u          /* local endpoints of a job with direct rings */
#define PROTO_DIRECT_PAGE  4096u
#define PROTO_DIRECT_GONE  0u           /* offset of gone[PROTO_DIRECT_MAX] in the header page */

/* Bytes one ring of size data bytes takes in the region. */
static inline uint64_t proto_direct_ring_stride(uint64_t size)
{
	return (ring_bytes(size) + PROTO_DIRECT_PAGE - 1) & ~(uint64_t)(PROTO_DIRECT_PAGE - 1);
}

/* Offset of the ring from slot from to slot to. */
static inline uint64_t proto_direct_ring_off(uint32_t n, uint64_t size, uint32_t from, uint32_t to)
{
	return PROTO_DIRECT_PAGE + ((uint64_t)from * n + to) * proto_direct_ring_stride(size);
}

/* Bytes of the whole region. */
static inline uint64_t proto_direct_region_bytes(uint32_t n, uint64_t size)
{
	return PROTO_DIRECT_PAGE + (uint64_t)n * n * proto_direct_ring_stride(size);
}

#endif
