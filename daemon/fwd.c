/* daemon/fwd.c - see fwd.h. */
#include "fwd.h"
#include "cluster.h"
#include "log.h"
#include "loop.h"
#include "sess.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct fwd_stats fwd_stats;

static struct {
	const struct conf *conf;
	uint32_t self;
	struct peer **next;             /* nnodes entries: the peer on the route */
	uint32_t alone;                 /* items with a bigger footprint skip aggregation */
	uint64_t limit;                 /* limits.link_bytes */
	struct loop_timer flush_timer;
} W;

struct peer *fwd_next_peer(uint32_t node)
{
	return W.next[node];
}

/* Everything for p that is not acknowledged yet: written or not.  Bounding
 * this, not only what is unsent, bounds the frames a link holds for
 * retransmission too; link_bytes in flight is far above any bandwidth-delay
 * product a cluster network has. */
static uint64_t queued(const struct peer *p)
{
	return p->q.bytes + (p->agg ? p->agg->len : 0);
}

int fwd_peer_full(const struct peer *p)
{
	return queued(p) > W.limit / 4;
}

int fwd_blocked(uint32_t node)
{
	return queued(W.next[node]) >= W.limit / 2;
}

void fwd_flush_peer(struct peer *p, int reason)
{
	struct frame *f = p->agg;

	if (!f)
		return;
	p->agg = NULL;
	switch (reason) {
	case FWD_FLUSH_FULL: p->st.flush_full++; break;
	case FWD_FLUSH_TIMER: p->st.flush_timer++; break;
	default: p->st.flush_explicit++; break;
	}
	peer_enqueue(p, f);
}

void fwd_flush_all(int reason)
{
	for (uint32_t i = 0; i < peer_count(); i++)
		fwd_flush_peer(peer_at(i), reason);
}

static void on_flush_timer(struct loop_timer *t)
{
	uint64_t now = loop_now_ns(), period = (uint64_t)W.conf->flush_us * 1000u, next = 0;

	for (uint32_t i = 0; i < peer_count(); i++) {
		struct peer *p = peer_at(i);

		if (!p->agg)
			continue;
		if (now - p->agg_since_ns >= period)
			fwd_flush_peer(p, FWD_FLUSH_TIMER);
		else if (!next || p->agg_since_ns + period < next)
			next = p->agg_since_ns + period;
	}
	if (next)
		loop_timer_arm(t, next - now, on_flush_timer, NULL);
}

int fwd_item(const struct wire_item *it, const void *payload, int from_dim, int force)
{
	struct peer *p = W.next[it->node];
	size_t fp = wire_item_footprint(it->len);
	uint64_t limit = from_dim >= 0 && from_dim == p->dim ? W.limit : W.limit / 2;
	struct frame *f;

	if (!force && queued(p) >= limit)
		return -EAGAIN;
	if (fp > W.alone) {
		fwd_flush_peer(p, FWD_FLUSH_FULL);      /* keep order: what came first leaves first */
		f = frame_alloc((uint32_t)fp);
		if (!f)
			return -EAGAIN;
		f->len += (uint32_t)wire_encode_item(f->data + f->len, it, payload);
		f->nitems = 1;
		peer_enqueue(p, f);
		fwd_stats.items_routed++;
		return 0;
	}
	if (p->agg && frame_room(p->agg) < fp)
		fwd_flush_peer(p, FWD_FLUSH_FULL);
	if (!p->agg) {
		p->agg = frame_alloc(W.conf->buffer_bytes);
		if (!p->agg)
			return -EAGAIN;
		p->agg_since_ns = loop_now_ns();
		if (!W.flush_timer.armed)
			loop_timer_arm(&W.flush_timer, (uint64_t)W.conf->flush_us * 1000u, on_flush_timer, NULL);
	}
	f = p->agg;
	f->len += (uint32_t)wire_encode_item(f->data + f->len, it, payload);
	f->nitems++;
	fwd_stats.items_routed++;
	if (f->len - sizeof(struct wire_frame_hdr) + sizeof(struct wire_item) > W.conf->buffer_bytes)
		fwd_flush_peer(p, FWD_FLUSH_FULL);      /* not even an empty item fits any more */
	return 0;
}

uint8_t *fwd_reserve(uint32_t node, uint32_t len)
{
	struct peer *p = W.next[node];
	struct frame *f = p->agg;
	size_t fp = wire_item_footprint(len);
	uint8_t *slot;

	/* The item that leaves the buffer (nearly) full goes the general way,
	 * which sends the buffer at once. */
	if (!f || fp > W.alone || queued(p) >= W.limit / 2 ||
	    f->len + fp + sizeof(struct wire_item) - sizeof(struct wire_frame_hdr) > W.conf->buffer_bytes)
		return NULL;
	slot = f->data + f->len;
	f->len += (uint32_t)fp;
	f->nitems++;
	fwd_stats.items_routed++;
	return slot;
}

/* Passes on the items of body from offset off.  Returns the offset of the
 * first item that could not go on now, len when all went. */
static uint32_t pass_on(struct peer *from, const uint8_t *body, uint32_t len, uint32_t off)
{
	for (;;) {
		size_t next = off;
		struct wire_item it;
		const void *payload;
		int ret = wire_next_item(body, len, &next, &it, &payload);

		if (ret <= 0)
			return len;     /* validated before: the end */
		if (it.job == 0 && it.node == W.self) {
			cluster_ctl_item(&it, payload);
		} else if (it.node == W.self) {
			if (sess_deliver_item(&it, payload) < 0)
				return off;
			from->st.items_delivered++;
			fwd_stats.items_local_in++;
		} else {
			if (fwd_item(&it, payload, from->dim, it.job == 0) < 0)
				return off;
			from->st.items_forwarded++;
		}
		off = (uint32_t)next;
	}
}

int fwd_rx(struct peer *from, const uint8_t *body, uint32_t len)
{
	size_t off = 0;
	uint32_t n = 0, done;
	struct wire_item it;
	const void *payload;
	int ret;

	/* Check the whole frame before using any of it: a malformed frame
	 * closes the link, and must not have half happened. */
	while ((ret = wire_next_item(body, len, &off, &it, &payload)) == 1) {
		if (it.node >= W.conf->nnodes || (it.node != W.self && !W.next[it.node]))
			return -EPROTO;
		n++;
	}
	if (ret < 0)
		return -EPROTO;
	from->st.items_recv += n;
	done = pass_on(from, body, len, 0);
	if (done == len)
		return 0;
	/* Keep the rest; reading from this peer pauses until it has gone on. */
	from->stalled = frame_alloc(len - done);
	if (!from->stalled)
		return -EPROTO; /* cannot happen with a sane malloc; dropping the link resends the frame */
	memcpy(from->stalled->data + sizeof(struct wire_frame_hdr), body + done, len - done);
	from->stalled->len = (uint32_t)(sizeof(struct wire_frame_hdr) + len - done);
	from->stalled_off = 0;
	from->st.stalls++;
	return 0;
}

int fwd_poll(void)
{
	int work = 0;

	for (uint32_t i = 0; i < peer_count(); i++) {
		struct peer *p = peer_at(i);
		uint32_t len, done;
		const uint8_t *body;

		if (!p->stalled)
			continue;
		body = p->stalled->data + sizeof(struct wire_frame_hdr);
		len = p->stalled->len - (uint32_t)sizeof(struct wire_frame_hdr);
		done = pass_on(p, body, len, p->stalled_off);
		if (done != p->stalled_off)
			work = 1;
		if (done < len) {
			p->stalled_off = done;
			continue;
		}
		frame_free(p->stalled);
		p->stalled = NULL;
		peer_resume_rx(p);
	}
	return work;
}

int fwd_init(const struct conf *c, uint32_t self)
{
	W.conf = c;
	W.self = self;
	W.limit = c->link_bytes;
	W.alone = c->buffer_bytes / 2;
	W.next = calloc(c->nnodes, sizeof(*W.next));
	if (!W.next)
		return -ENOMEM;
	for (uint32_t n = 0; n < c->nnodes; n++) {
		uint32_t hop;

		if (n == self || route_next_hop(&c->route, self, n, &hop) < 0)
			continue;
		W.next[n] = peer_by_node(hop);
	}
	return 0;
}

void fwd_fini(void)
{
	loop_timer_cancel(&W.flush_timer);
	free(W.next);
	W.next = NULL;
}
