/* daemon/fwd/rx.c - see rx.h. */
#include "rx.h"
#include "agg.h"
#include "ctlq.h"
#include "flow.h"
#include "../core/log.h"
#include "../local/endpoint.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* This module's state for one routing peer. */
struct rx_peer {
	struct frame *spare;            /* room for the rest of the next frame, should it stall */
	struct frame *stalled;          /* rest of a taken frame not yet passed on */
	uint32_t stalled_off;           /* offset of the next item in stalled's body */
	uint64_t items_recv;            /* items in frames taken from this peer */
	uint64_t items_forwarded;       /* ... of which went on to another peer */
	uint64_t items_delivered;       /* ... of which were for this node */
	uint64_t stalls;                /* times reading paused for backpressure */
};

uint64_t rx_items_local;

static struct {
	uint32_t self;
	uint32_t nnodes;
	uint8_t *valid;                 /* nnodes entries: items for that node may come */
	struct rx_peer *peers;          /* by peer index */
} taker;

/* An item for a rank here.  Returns 0 (delivered, queued, or dropped for a
 * rank that is not here) or -EAGAIN: its queue is full, try again later. */
static int deliver(const struct wire_item *it, const void *payload)
{
	struct job *j = job_by_id(it->job, it->gen);
	struct ep *d = j && it->dst < j->size ? j->ranks[it->dst].ep : NULL;
	struct proto_rec rec = {
		.len = it->len,
		.kind = PROTO_REC_ITEM,
		.flags = it->flags,             /* the same bits (wire.h) */
		.channel = it->channel,
		.dst = it->dst,
		.src = it->src,
	};

	if (!d || it->src >= j->size) {
		if (j)
			ep_drop(j, 1);
		else
			ep_stats.items_dropped++;
		log_rl_warn("item for job %u rank %u, which is not attached here; dropped", it->job, it->dst);
		return 0;
	}
	if (__builtin_expect(ep_deliver(d, &rec, payload) == 0, 1))
		return 0;
	/* Its queue is full: hold back that rank's senders, not the link. */
	return flow_park(d, &rec, payload);
}

/* Passes on the items of body from offset off.  Returns the offset of the
 * first item that could not go on now, len when all went. */
static uint32_t pass_on(struct peer *from, struct rx_peer *r, const uint8_t *body, uint32_t len, uint32_t off)
{
	for (;;) {
		size_t next = off;
		struct wire_item it;
		const void *payload;
		int ret = wire_next_item(body, len, &next, &it, &payload);

		if (ret <= 0)
			return len;     /* validated before: the end */
		if (it.job == 0 && it.node == taker.self) {
			if (ctlq_push(it.dst, it.src, payload, it.len) < 0)
				return off;
		} else if (it.node == taker.self) {
			if (deliver(&it, payload) < 0)
				return off;
			r->items_delivered++;
			rx_items_local++;
		} else {
			if (agg_item(&it, payload, from->dim, it.job == 0 ? AGG_CONTROL : AGG_DATA) < 0)
				return off;
			r->items_forwarded++;
		}
		off = (uint32_t)next;
	}
}

int rx_frame(struct peer *p, const uint8_t *body, uint32_t len)
{
	struct rx_peer *r = &taker.peers[p->idx];
	size_t off = 0;
	uint32_t n = 0, done;
	struct wire_item it;
	const void *payload;
	int ret;

	/* Check the whole frame before using any of it: a malformed frame
	 * closes the link, and must not have half happened. */
	while ((ret = wire_next_item(body, len, &off, &it, &payload)) == 1) {
		if (it.node >= taker.nnodes || !taker.valid[it.node])
			return -EPROTO;
		n++;
	}
	if (ret < 0)
		return -EPROTO;
	/* Room to keep the rest, should some items not go on now, before any
	 * goes on: a frame that cannot be taken must be refused whole (the
	 * link drops and the frame comes again), since one half passed on
	 * and the other refused would pass the first half on twice. */
	if (!r->spare || frame_room(r->spare) < len) {
		if (r->spare)
			frame_free(r->spare);
		r->spare = frame_alloc(len);
		if (!r->spare) {
			log_rl_warn("peer %u: out of memory for a frame of %u bytes; the link starts over", p->node,
				    len);
			return -EPROTO;
		}
	}
	r->items_recv += n;
	done = pass_on(p, r, body, len, 0);
	if (done == len)
		return 0;
	/* Keep the rest; reading from this peer pauses until it has gone on. */
	r->stalled = r->spare;
	r->spare = NULL;
	memcpy(r->stalled->data + sizeof(struct wire_frame_hdr), body + done, len - done);
	r->stalled->len = (uint32_t)(sizeof(struct wire_frame_hdr) + len - done);
	r->stalled_off = 0;
	r->stalls++;
	return 1;
}

int rx_poll(void)
{
	int work = 0;

	for (uint32_t i = 0; i < peer_count(); i++) {
		struct rx_peer *r = &taker.peers[i];
		uint32_t len, done;
		const uint8_t *body;

		if (!r->stalled)
			continue;
		body = r->stalled->data + sizeof(struct wire_frame_hdr);
		len = r->stalled->len - (uint32_t)sizeof(struct wire_frame_hdr);
		done = pass_on(peer_at(i), r, body, len, r->stalled_off);
		if (done != r->stalled_off)
			work = 1;
		if (done < len) {
			r->stalled_off = done;
			continue;
		}
		frame_free(r->stalled);
		r->stalled = NULL;
		peer_resume_rx(peer_at(i));
	}
	return work;
}

void rx_write_peer_stats(FILE *out, const struct peer *p)
{
	const struct rx_peer *r = &taker.peers[p->idx];

	fprintf(out, " items_recv %llu items_per_frame_recv %.2f items_forwarded %llu items_delivered %llu stalls %llu",
		(unsigned long long)r->items_recv,
		p->st.frames_recv ? (double)r->items_recv / (double)p->st.frames_recv : 0.0,
		(unsigned long long)r->items_forwarded, (unsigned long long)r->items_delivered,
		(unsigned long long)r->stalls);
}

int rx_init(const struct conf *c, uint32_t self)
{
	taker.self = self;
	taker.nnodes = c->nnodes;
	taker.valid = calloc(c->nnodes, 1);
	taker.peers = calloc(peer_count() ? peer_count() : 1, sizeof(*taker.peers));
	if (!taker.valid || !taker.peers)
		return -ENOMEM;
	for (uint32_t n = 0; n < c->nnodes; n++)
		taker.valid[n] = n == self || agg_routable(n);
	return 0;
}

void rx_fini(void)
{
	for (uint32_t i = 0; taker.peers && i < peer_count(); i++) {
		if (taker.peers[i].stalled)
			frame_free(taker.peers[i].stalled);
		if (taker.peers[i].spare)
			frame_free(taker.peers[i].spare);
	}
	free(taker.peers);
	free(taker.valid);
	taker.peers = NULL;
	taker.valid = NULL;
}
