/* daemon/fwd.h - forwarding: the routing table, one aggregation buffer per
 * peer, and taking received frames apart (TRAM thesis §3.3.2, §4.2).
 *
 * An item for another node goes into the aggregation buffer of the peer on
 * its route (the next hop, from a table computed once from route.c).  A
 * buffer leaves as a frame when it holds aggregation.buffer_bytes, when
 * aggregation.flush_us has passed since its first item, on ferry_flush, or at
 * the end of a step.  Items whose footprint exceeds half a buffer (pieces of
 * large items) skip aggregation: the buffer is sent first, so that order per
 * sender and receiver holds, and the item goes in a frame of its own.
 *
 * A received frame is taken apart item by item: items for this node go to
 * their endpoints' RX rings (sess.c), daemon control items to cluster.c,
 * the rest into the buffers of their next hops.  Each item is copied once per
 * hop: from the received frame into the next buffer or ring.
 *
 * Backpressure: a peer whose frames not yet acknowledged reach
 * limits.link_bytes takes no more items; items entering that link's dimension (from a local
 * endpoint, or turning from another dimension) stop already at half of it.
 * Reserving the second half for items that continue along a ring keeps a
 * torus ring from filling up completely, which would deadlock it (the
 * "bubble" rule of Puente et al., adaptive bubble routers, 1999).
 */
#ifndef FERRY_FWD_H
#define FERRY_FWD_H

#include "conf.h"
#include "peer.h"

#include <stdint.h>

enum fwd_flush { FWD_FLUSH_FULL, FWD_FLUSH_TIMER, FWD_FLUSH_EXPLICIT };

int fwd_init(const struct conf *c, uint32_t self);
void fwd_fini(void);

/* The peer an item for node goes to next (node != self). */
struct peer *fwd_next_peer(uint32_t node);

/* Queues an item for it->node (!= self).  from_dim is the dimension of the
 * link it arrived on, -1 if it starts here; force ignores the queue limit
 * (small daemon control items).  Returns 0, or -EAGAIN if the next hop takes
 * no more now (the caller keeps the item and retries). */
int fwd_item(const struct wire_item *it, const void *payload, int from_dim, int force);

/* The common case of fwd_item for an item that starts here: room for it in
 * the aggregation buffer of its next hop.  Returns where its
 * wire_item_footprint(len) bytes go, already counted in the buffer (the
 * caller writes them at once), or NULL: then call fwd_item, which also
 * handles new and full buffers, large items and backpressure. */
uint8_t *fwd_reserve(uint32_t node, uint32_t len);

/* 1 if an item starting here for node would be refused now. */
int fwd_blocked(uint32_t node);

/* 1 while p's queue is above the level at which blocked senders resume. */
int fwd_peer_full(const struct peer *p);

/* Sends every partly filled buffer now. */
void fwd_flush_all(int reason);
void fwd_flush_peer(struct peer *p, int reason);

/* Takes a received DATA body apart.  Items that cannot go on now are kept in
 * from->stalled.  Returns 0, or -EPROTO if the body is malformed (then
 * nothing of it was used). */
int fwd_rx(struct peer *from, const uint8_t *body, uint32_t len);

/* Loop hook: finishes stalled frames, flushes expired buffers. */
int fwd_poll(void);

/* Counters for ferryctl stats. */
struct fwd_stats {
	uint64_t items_routed;          /* items this node put on a link, all sources */
	uint64_t items_local_in;        /* items that arrived here for local endpoints */
};
extern struct fwd_stats fwd_stats;

#endif
