/* daemon/fwd/rx.h - taking received frames apart (TRAM thesis §3.3.2).
 *
 * A DATA frame from a peer is taken apart item by item: items for this node
 * go to their endpoints' RX rings (local/endpoint.h), daemon control items
 * to the control queue (ctlq.h), the rest into the aggregation buffers of
 * their next hops (agg.h).  Each item is copied once per hop: from the
 * received frame into the next buffer or ring.
 *
 * A frame is checked whole before any of it is used: a malformed frame
 * closes the link and must not have half happened.  Items that cannot go on
 * now (a full queue downstream) stay in a copy of the rest of the frame,
 * reading from that peer pauses (peer_events.rx returns 1), and rx_poll
 * finishes them later.
 *
 * Ownership: the kept rest of a frame is this module's until its last item
 * went on.
 *
 * Receiving in place (net/link.h "Receiving"): a frame that is one large
 * piece for a rank here whose RX ring has room is read by the transport
 * straight into the ring (rx_steer reserves the record, rx_steered commits
 * it or gives the room back); the checks are those of the whole frame, on
 * its headers, and nothing is visible to the client until all of it is in.
 */
#ifndef FERRY_FWD_RX_H
#define FERRY_FWD_RX_H

#include "../core/conf.h"
#include "../net/peer.h"

#include <stdint.h>
#include <stdio.h>

int rx_init(const struct conf *c, uint32_t self);
void rx_fini(void);

/* The peer layer's rx event (struct peer_events): a DATA body from p;
 * urgent (WIRE_FRAME_URGENT): the buffers its passing items go into leave
 * at once, marked urgent in turn.  Returns 0 (every item went on), 1 (some
 * are kept: p takes no more until they went on), or -EPROTO (malformed;
 * nothing of it was used). */
int rx_frame(struct peer *p, const uint8_t *body, uint32_t len, int urgent);

/* The peer layer's steer and steered events (receiving in place): a piece
 * for a rank here goes straight into its RX ring.  See rx.c. */
uint8_t *rx_steer(struct peer *p, const uint8_t *body, uint32_t len, int *later);
void rx_steered(struct peer *p, int ok);
extern uint64_t rx_pieces_steered;

/* Loop hook: passes on the items kept back.  Returns 1 if any went on. */
int rx_poll(void);

/* Items that arrived here for local endpoints. */
extern uint64_t rx_items_local;
/* Steps completed here by an item of the next one, ahead of the home's STEP
 * (proto/wire.h "The step of an item"). */
extern uint64_t rx_steps_early;

/* The receive counters of peer p, as " name value" pairs. */
void rx_write_peer_stats(FILE *out, const struct peer *p);

#endif
