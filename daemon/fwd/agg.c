/* daemon/fwd/agg.c - see agg.h. */
#include "agg.h"
#include "../core/log.h"
#include "../core/loop.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

/* This module's state for one routing peer. */
struct agg_peer {
	struct agg_hop hop;             /* first: agg_hops[] points at it */
	struct peer *p;
	uint64_t since_ns;              /* when its first item came */
	uint64_t flush_full, flush_timer, flush_explicit;
	uint64_t dropped_lost;          /* transit data dropped: its link was lost */
};

uint64_t agg_items_routed;
struct agg_hop **agg_hops;
uint32_t agg_dropping;
uint32_t agg_alone;

/* A large item being dropped whole (agg.h): the rest of it is dropped too,
 * whatever room there is by the time it comes. */
struct dropping {
	uint32_t job, src, dst;         /* job 0: a free entry */
	uint8_t gen;
};
#define AGG_DROPPING_MAX 1024           /* items at once; then the oldest is forgotten */

static struct {
	const struct conf *conf;
	uint32_t self;
	struct agg_peer *peers;         /* peer_count() entries, by peer index */
	struct agg_peer **next;         /* nnodes entries: the peer on the route;
					 * agg_hops is the same array */
	uint32_t alone;                 /* items with a bigger footprint skip aggregation */
	uint32_t fill_max;              /* agg_reserve fills a frame up to this length:
					 * room for an empty item is left (agg_item) */
	uint64_t limit;                 /* limits.link_bytes */
	struct loop_timer flush_timer;
	struct dropping dropping[AGG_DROPPING_MAX];
	uint32_t dropping_next;         /* (how many are in use: agg_dropping) */
} agg;

/* 1 if it is a later fragment of an item being dropped (and, if it is the
 * last, the item is done with). */
static int dropping_rest(const struct wire_item *it)
{
	for (uint32_t i = 0; i < AGG_DROPPING_MAX; i++) {
		struct dropping *d = &agg.dropping[i];

		if (d->job != it->job || d->gen != it->gen || d->src != it->src || d->dst != it->dst || !d->job)
			continue;
		if (!(it->flags & WIRE_ITEM_MORE)) {
			d->job = 0;
			agg_dropping--;
		}
		return 1;
	}
	return 0;
}

/* A fragment of it was dropped, and more follow: drop them too. */
static void dropping_add(const struct wire_item *it)
{
	struct dropping *d = &agg.dropping[agg.dropping_next++ % AGG_DROPPING_MAX];

	if (!d->job)
		agg_dropping++;
	*d = (struct dropping){ .job = it->job, .src = it->src, .dst = it->dst, .gen = it->gen };
}

int agg_routable(uint32_t node)
{
	return node < agg.conf->nnodes && agg.next[node] != NULL;
}

/* Everything for the peer that is not acknowledged yet: written or not.
 * Bounding this, not only what is unsent, bounds the frames a link holds for
 * retransmission too; link_bytes in flight is far above any bandwidth-delay
 * product a cluster network has. */
static uint64_t queued(const struct agg_peer *a)
{
	return peer_backlog(a->p) + (a->hop.buf ? a->hop.buf->len : 0);
}

int agg_link_full(uint32_t node)
{
	return queued(agg.next[node]) > agg.limit / 4;
}

static void flush(struct agg_peer *a, int reason)
{
	struct frame *f = a->hop.buf;

	if (!f)
		return;
	a->hop.buf = NULL;
	agg_items_routed += f->nitems;
	f->urgent = reason == AGG_FLUSH_EXPLICIT || reason == AGG_FLUSH_COLL;   /* the next node passes it on at once too */
	f->ack_lazy = reason == AGG_FLUSH_COLL;
	switch (reason) {
	case AGG_FLUSH_FULL: a->flush_full++; break;
	case AGG_FLUSH_TIMER: a->flush_timer++; break;
	default: a->flush_explicit++; break;
	}
	peer_send(a->p, f);
}

void agg_flush_all(int reason)
{
	for (uint32_t i = 0; i < peer_count(); i++)
		flush(&agg.peers[i], reason);
}

void agg_flush_serials(const uint32_t *put_serial, int reason)
{
	for (uint32_t i = 0; i < peer_count(); i++)
		if (agg.peers[i].hop.buf && agg.peers[i].hop.serial == put_serial[i])
			flush(&agg.peers[i], reason);
}

void agg_flush_hop(struct agg_hop *h, int reason)
{
	flush(&agg.peers[h->idx], reason);
}

void agg_flush_toward(uint32_t node, int reason)
{
	flush(agg.next[node], reason);
}

static void on_flush_timer(struct loop_timer *t)
{
	uint64_t now = loop_now_ns(), period = (uint64_t)agg.conf->flush_us * 1000u, next = 0;

	for (uint32_t i = 0; i < peer_count(); i++) {
		struct agg_peer *a = &agg.peers[i];

		if (!a->hop.buf)
			continue;
		if (now - a->since_ns >= period)
			flush(a, AGG_FLUSH_TIMER);
		else if (!next || a->since_ns + period < next)
			next = a->since_ns + period;
	}
	if (next)
		loop_timer_arm(t, next - now, on_flush_timer, NULL);
}

/* A payload: at payload, or (iov set) in niov parts at iov. */
struct payload {
	const void *p;
	const struct iovec *iov;
	int niov;
};

/* wire_encode_item with the payload pl. */
static size_t encode(uint8_t *buf, const struct wire_item *it, const struct payload *pl)
{
	size_t fp;

	if (!pl->iov)
		return wire_encode_item(buf, it, pl->p);
	fp = wire_item_footprint(it->len);
	memcpy(buf, it, sizeof(*it));
	if (fp > sizeof(*it)) {
		memset(buf + fp - 8, 0, 8);     /* the padding; the parts overwrite the rest */
		buf += sizeof(*it);
		for (int i = 0; i < pl->niov; i++) {
			memcpy(buf, pl->iov[i].iov_base, pl->iov[i].iov_len);
			buf += pl->iov[i].iov_len;
		}
	}
	return fp;
}

/* An item too big to share a frame: one of its own, after what is buffered;
 * with a lender x, its payload (and padding) lent rather than copied (see
 * agg_item_lent).  Returns 0 (copied), 1 (lent) or -EAGAIN. */
static int alone(struct agg_peer *a, const struct wire_item *it, const struct payload *pl, struct frame_lender *x)
{
	size_t fp = wire_item_footprint(it->len);
	struct frame *f;

	flush(a, AGG_FLUSH_FULL);       /* keep order: what came first leaves first */
	f = frame_alloc(x ? (uint32_t)sizeof(*it) : (uint32_t)fp);
	if (!f)
		return -EAGAIN;
	f->nitems = wire_item_count(it);
	if (x) {
		memcpy(f->data + f->len, it, sizeof(*it));
		f->len += (uint32_t)sizeof(*it);
		frame_lend(f, pl->p, (uint32_t)(fp - sizeof(*it)), x);
	} else {
		f->len += (uint32_t)encode(f->data + f->len, it, pl);
	}
	peer_send(a->p, f);
	agg_items_routed += f->nitems;
	return x != NULL;
}

/* Room for fp bytes in a's buffer (flushed first if they do not fit, opened
 * if there is none): the slot, counted as one item; NULL if no buffer could
 * be had. */
static uint8_t *open_slot(struct agg_peer *a, size_t fp)
{
	struct frame *f;
	uint8_t *slot;

	if (a->hop.buf && frame_room(a->hop.buf) < fp)
		flush(a, AGG_FLUSH_FULL);
	if (!a->hop.buf) {
		uint64_t backlog = peer_backlog(a->p);

		a->hop.buf = frame_alloc(agg.conf->buffer_bytes);
		if (!a->hop.buf)
			return NULL;
		if (++a->hop.serial == 0)
			a->hop.serial = 1;      /* 0 means "none" (agg_flush_serials) */
		/* How far agg_reserve may fill it: not (nearly) full, and not
		 * past half the link's limit (what agg_item asks of an item
		 * that starts here).  Exact enough for good: while a buffer
		 * is open nothing else is queued for the peer (only flush and
		 * large items, which flush first, call peer_send), so the
		 * backlog only shrinks. */
		a->hop.fill_to = agg.fill_max;
		if (backlog + a->hop.fill_to > agg.limit / 2)
			a->hop.fill_to = backlog < agg.limit / 2 ? (uint32_t)(agg.limit / 2 - backlog) : 0;
		a->since_ns = loop_now_ns();
		if (!agg.flush_timer.armed)
			loop_timer_arm(&agg.flush_timer, (uint64_t)agg.conf->flush_us * 1000u, on_flush_timer, NULL);
	}
	f = a->hop.buf;
	slot = f->data + f->len;
	f->len += (uint32_t)fp;
	f->nitems++;
	return slot;
}

static int item(const struct wire_item *it, const struct payload *pl, int from_dim, int klass, struct frame_lender *x)
{
	struct agg_peer *a = agg.next[it->node];
	size_t fp = wire_item_footprint(it->len);
	uint64_t limit = from_dim >= 0 && from_dim == a->p->dim ? agg.limit : agg.limit / 2;
	uint8_t *slot;

	if (klass == AGG_CONTROL)
		limit = agg.limit + AGG_CONTROL_RESERVE;
	if (__builtin_expect(agg_dropping != 0, 0) && klass == AGG_DATA && WIRE_ITEM_FRAG(it->flags) &&
	    dropping_rest(it)) {
		a->dropped_lost++;
		return 0;
	}
	if (klass != AGG_LOCAL && queued(a) >= limit) {
		if (klass == AGG_DATA && from_dim >= 0 && a->p->lost) {
			/* The link has been down for a while (agg.h): its jobs
			 * fail, and this item holds back none behind it.  An
			 * item is dropped whole, from this fragment to its
			 * last, so that no fragment of it passes once there is
			 * room again. */
			if ((it->flags & (WIRE_ITEM_MORE | WIRE_ITEM_BATCH)) == WIRE_ITEM_MORE)
				dropping_add(it);       /* (a dense batch has MORE's bit too) */
			a->dropped_lost++;
			log_rl_warn("peer %u: link lost and full; items passing through to node %u are dropped",
				    a->p->node, it->node);
			return 0;
		}
		return -EAGAIN;
	}
	if (fp > agg.alone)
		return alone(a, it, pl, x);
	slot = open_slot(a, fp);
	if (!slot)
		return -EAGAIN;
	encode(slot, it, pl);
	a->hop.buf->nitems += wire_item_count(it) - 1;
	if (a->hop.buf->len - sizeof(struct wire_frame_hdr) + sizeof(struct wire_item) > agg.conf->buffer_bytes)
		flush(a, AGG_FLUSH_FULL);       /* not even an empty item fits any more */
	return 0;
}

int agg_item(const struct wire_item *it, const void *payload, int from_dim, int klass)
{
	struct payload pl = { .p = payload };
	int ret = item(it, &pl, from_dim, klass, NULL);

	return ret < 0 ? ret : 0;
}

int agg_item_v(const struct wire_item *it, const struct iovec *iov, int niov, int klass)
{
	struct payload pl = { .iov = iov, .niov = niov };
	uint64_t sum = 0;
	int ret;

	/* The parts fill the item exactly: fewer bytes would send what the
	 * frame's memory held before (another job's, maybe), more would
	 * overrun it. */
	for (int i = 0; i < niov; i++)
		sum += iov[i].iov_len;
	if (sum != it->len)
		return -EINVAL;
	ret = item(it, &pl, -1, klass, NULL);

	return ret < 0 ? ret : 0;
}

int agg_item_lent(const struct wire_item *it, const void *payload, struct frame_lender *x)
{
	struct payload pl = { .p = payload };

	return item(it, &pl, -1, AGG_DATA, x);
}

uint8_t *agg_slot(uint32_t node, uint32_t len)
{
	struct agg_peer *a = agg.next[node];
	size_t fp = wire_item_footprint(len);

	if (queued(a) >= agg.limit / 2 || fp > agg.alone)
		return NULL;
	return open_slot(a, fp);
}


void agg_write_peer_stats(FILE *out, const struct peer *p)
{
	const struct agg_peer *a = &agg.peers[p->idx];

	fprintf(out, " flush_full %llu flush_timer %llu flush_explicit %llu dropped_lost %llu",
		(unsigned long long)a->flush_full, (unsigned long long)a->flush_timer,
		(unsigned long long)a->flush_explicit, (unsigned long long)a->dropped_lost);
}

int agg_init(const struct conf *c, uint32_t self)
{
	agg.conf = c;
	agg.self = self;
	agg.limit = c->link_bytes;
	agg.alone = agg_alone = c->buffer_bytes / 2;
	agg.fill_max = (uint32_t)(sizeof(struct wire_frame_hdr) + c->buffer_bytes - sizeof(struct wire_item));
	agg.next = calloc(c->nnodes, sizeof(*agg.next));
	agg_hops = (struct agg_hop **)agg.next;
	agg.peers = calloc(peer_count() ? peer_count() : 1, sizeof(*agg.peers));
	if (!agg.next || !agg.peers)
		return -ENOMEM;
	for (uint32_t i = 0; i < peer_count(); i++) {
		agg.peers[i].p = peer_at(i);
		agg.peers[i].hop.idx = i;
	}
	for (uint32_t n = 0; n < c->nnodes; n++) {
		uint32_t hop;

		if (n == self || route_next_hop(&c->route, self, n, &hop) < 0)
			continue;
		agg.next[n] = &agg.peers[peer_by_node(hop)->idx];
	}
	return 0;
}

void agg_fini(void)
{
	loop_timer_cancel(&agg.flush_timer);
	for (uint32_t i = 0; agg.peers && i < peer_count(); i++)
		if (agg.peers[i].hop.buf)
			frame_free(agg.peers[i].hop.buf);
	free(agg.peers);
	free(agg.next);
	agg.peers = NULL;
	agg.next = NULL;
	agg_hops = NULL;
}
