/* daemon/fwd/agg.h - aggregation: the routing table (node -> next-hop peer)
 * and one aggregation buffer per peer (TRAM thesis §3.3.2, §4.2).
 *
 * An item for another node goes into the aggregation buffer of the peer on
 * its route (the next hop, from a table computed once from plan/route.c).  A
 * buffer leaves as a frame when it holds aggregation.buffer_bytes, when
 * aggregation.flush_us has passed since its first item, on ferry_flush, or at
 * the end of a step.  Items whose footprint exceeds half a buffer (pieces of
 * large items) skip aggregation: the buffer is sent first, so that order per
 * sender and receiver holds, and the item goes in a frame of its own.
 *
 * Backpressure: a peer whose frames not yet acknowledged reach
 * limits.link_bytes takes no more items; items entering that link's
 * dimension (from a local endpoint, or turning from another dimension) stop
 * already at half of it.  Reserving the second half for items that continue
 * along a ring keeps a torus ring from filling up completely, which would
 * deadlock it (the "bubble" rule of Puente et al., adaptive bubble routers,
 * 1999).
 *
 * A link that is lost (down for PEER_LOST_NS, net/peer.h) holds what was
 * queued for it, but once that reaches the limit, data passing through
 * toward it is dropped and counted (dropped_lost) instead of held: held, it
 * would pause the link it came in on, and with it every other job's items
 * and the control items behind it, for as long as the lost link stays down.
 * The jobs whose routes cross a lost link fail (cluster/cluster.h), so
 * nothing of a job that goes on is dropped.  A large item is dropped whole
 * from the fragment where dropping began: its later fragments are dropped
 * too, even once there is room again, so that after a gap the next thing a
 * receiver gets from that sender starts an item (libferry drops the partial
 * one then, client/recv.c, and checks fragment indexes besides).  Control items passing through
 * still wait (their reserve), and items that start here hold their sender
 * (the forwarding of a failed job's items drops them, fwd/tx.c).
 *
 * Ownership: a buffer belongs to this module until it is full or flushed;
 * then it is handed to the peer layer (peer_send), which frees it once the
 * peer acknowledges it.
 */
#ifndef FERRY_FWD_AGG_H
#define FERRY_FWD_AGG_H

#include "../core/conf.h"
#include "../net/peer.h"

#include <stdint.h>
#include <stdio.h>

/* Why a buffer leaves: full, its timer, a flush (urgent: the next node
 * passes it on at once too, and acknowledges it at once), or collectives'
 * pieces (urgent, but acknowledged lazily: WIRE_FRAME_ACK_LAZY). */
enum agg_flush { AGG_FLUSH_FULL, AGG_FLUSH_TIMER, AGG_FLUSH_EXPLICIT, AGG_FLUSH_COLL };

/* Sets up the routing table and the buffers for the peers of node self. */
int agg_init(const struct conf *c, uint32_t self);
void agg_fini(void);

/* 1 if items for node can be routed from here (node != self, in the cluster,
 * reachable). */
int agg_routable(uint32_t node);

/* How an item counts against the limit of its next hop. */
enum agg_class {
	AGG_DATA,       /* application items: limits.link_bytes (see above) */
	AGG_CONTROL,    /* control items (job 0) passing through: a reserve of
			 * AGG_CONTROL_RESERVE above the data limit, so that they
			 * pass a link that data filled, but no more: what a peer
			 * sends through us stays bounded */
	AGG_LOCAL,      /* control items this node starts: never refused (they
			 * are few, a handful per job and step, and losing one
			 * would hang a job) */
};
#define AGG_CONTROL_RESERVE (1u << 20)

/* Queues an item for it->node (!= self).  from_dim is the dimension of the
 * link it arrived on, -1 if it starts here; klass is an enum agg_class.
 * Returns 0, or -EAGAIN if the next hop takes no more now (the caller keeps
 * the item and retries). */
int agg_item(const struct wire_item *it, const void *payload, int from_dim, int klass);

/* agg_item for an item that starts here whose payload is in niov parts at
 * iov (it->len bytes in all), gathered into the frame. */
struct iovec;
int agg_item_v(const struct wire_item *it, const struct iovec *iov, int niov, int klass);

/* agg_item for an application item that starts here and whose payload, with
 * its padding to 8, may be lent by x (net/frame.h "Lent bytes"; only where
 * peer_takes_lent()) rather than copied: if it goes in a frame of its own,
 * the frame sends from payload and puts x when it lets go.  Returns 1 (lent:
 * x is the frame's now), 0 (copied: x was not used) or -EAGAIN. */
int agg_item_lent(const struct wire_item *it, const void *payload, struct frame_lender *x);

/* Per next hop, what the per-item path needs to add an item to the frame
 * being filled: kept by agg.c, read here only (agg_reserve). */
struct agg_hop {
	struct frame *buf;              /* frame being filled, not yet sequenced; or NULL */
	uint32_t fill_to;               /* agg_reserve may fill buf up to this length */
	uint32_t idx;                   /* the peer's index */
	uint32_t serial;                /* buf's: one more for every buffer opened, from 1 */
};
extern struct agg_hop **agg_hops;       /* by destination node: its next hop's */
extern uint32_t agg_alone;              /* items with a bigger footprint go alone */
extern uint32_t agg_dropping;           /* large items being dropped whole (agg_item): while
					 * there are any, passing items take agg_item */

/* The common case of agg_item for an item that starts here: room for it in
 * the buffer of h, its next hop's (agg_hops[node]).  Returns where its wire_item_footprint(len)
 * bytes go, already counted in the buffer (the caller writes them at once),
 * or NULL: then call agg_item, which also handles new and full buffers,
 * large items and backpressure.  Inline: it runs once per item. */
static inline uint8_t *agg_reserve_hop(struct agg_hop *h, uint32_t len)
{
	struct frame *f = h->buf;
	uint32_t fp = (uint32_t)wire_item_footprint(len);
	uint8_t *slot;

	if (!f || fp > agg_alone || f->len + fp > h->fill_to)
		return NULL;
	slot = f->data + f->len;
	f->len += fp;
	f->nitems++;
	return slot;
}

/* Room for an element of len payload bytes from an endpoint here (as
 * agg_item(.., -1, AGG_DATA) finds it, flushing the buffer toward node if
 * it is full and opening one): the slot (counted as one item), or NULL if
 * the link toward node is full (try again later). */
uint8_t *agg_slot(uint32_t node, uint32_t len);

/* Gives back the last agg_reserve_hop(h, len) or agg_slot(node, len), which
 * nothing may follow. */
static inline void agg_unreserve_hop(struct agg_hop *h, uint32_t len)
{
	h->buf->len -= (uint32_t)wire_item_footprint(len);
	h->buf->nitems--;
}

static inline uint8_t *agg_reserve(uint32_t node, uint32_t len)
{
	return agg_reserve_hop(agg_hops[node], len);
}

/* 1 while the link toward node is above the level at which senders that
 * were refused resume. */
int agg_link_full(uint32_t node);

/* Sends every partly filled buffer now; or the one toward node. */
void agg_flush_all(int reason);

/* Flushes the buffers an endpoint put items into and that have not left
 * since: put_serial has peer_count() entries, by peer index, each the
 * serial of the buffer toward that peer that last took one of its items
 * (0: none), which the caller records as it puts items (agg_hop).  So a
 * FLUSH or DONE sends what that endpoint needs sent, and leaves the other
 * buffers to fill: one chatty process does not defeat aggregation for the
 * whole node. */
void agg_flush_serials(const uint32_t *put_serial, int reason);
void agg_flush_toward(uint32_t node, int reason);
void agg_flush_hop(struct agg_hop *h, int reason);

/* Items this node sent on in frames, all sources (counted as a frame leaves). */
extern uint64_t agg_items_routed;

/* The buffer counters of peer p, as " name value" pairs. */
void agg_write_peer_stats(FILE *out, const struct peer *p);

#endif
