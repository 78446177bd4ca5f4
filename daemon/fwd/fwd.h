/* daemon/fwd/fwd.h - the forwarding layer: routing table and aggregation
 * buffers (agg.h), taking received frames apart (rx.h), draining the TX
 * rings of local endpoints (tx.h), daemon control items (ctlq.h).  This file
 * starts and stops them together, and is what main wires up; the layers
 * above use the headers of the parts they need.
 */
#ifndef FERRY_FWD_FWD_H
#define FERRY_FWD_FWD_H

#include "../core/conf.h"
#include "../net/peer.h"

#include <stdint.h>
#include <stdio.h>

/* What the peer layer calls when a frame arrives (peer_init). */
extern const struct peer_events fwd_peer_events;

/* What the layer above (cluster) hears from this one. */
struct fwd_events {
	/* A routing peer is lost (net/peer.h, peer_events.lost: restarted_as
	 * 0, the link to it is down; else its new incarnation). */
	void (*node_lost)(uint32_t node, uint64_t restarted_as, const char *why);
	/* The link to that peer is up again after it was lost (peer_events.found). */
	void (*node_found)(uint32_t node);
};

/* Registers the layer above's events (ev stays valid until fwd_fini). */
void fwd_set_events(const struct fwd_events *ev);

/* After peer_init and ep_init.  Returns 0 or -ENOMEM. */
int fwd_init(const struct conf *c, uint32_t self);
void fwd_fini(void);

/* Loop hook: TX rings, then frames kept back.  Returns 1 if it did anything. */
int fwd_poll(void);

/* One "peer N name value ..." line per peer for ferryctl stats: the peer
 * layer's counters and this layer's. */
void fwd_write_peer_stats(FILE *out);

#endif
