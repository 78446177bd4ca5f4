/* daemon/fwd/rx.c - see rx.h. */
#include "rx.h"
#include "agg.h"
#include "ctlq.h"
#include "flow.h"
#include "../core/log.h"
#include "../local/endpoint.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* This module's state for one routing peer. */
struct rx_peer {
	struct frame *spare;            /* room for the rest of the next frame, should it stall */
	struct frame *stalled;          /* rest of a taken frame not yet passed on */
	uint32_t stalled_off;           /* offset of the next item in stalled's body */
	uint32_t stalled_inner;         /* ... and if it is a batch, of its next record */
	int stalled_urgent;             /* ... which was WIRE_FRAME_URGENT */
	uint64_t items_recv;            /* items in frames taken from this peer */
	uint64_t items_forwarded;       /* ... of which went on to another peer */
	uint64_t coll_forwarded;        /* ... of those, collectives' pieces (WIRE_DST_COLL) */
	uint64_t items_delivered;       /* ... of which were for this node */
	uint64_t stalls;                /* times reading paused for backpressure */
};

uint64_t rx_items_local;

static struct {
	uint32_t self;
	uint32_t nnodes;
	uint8_t *valid;                 /* nnodes entries: items for that node may come */
	struct rx_peer *peers;          /* by peer index */
	/* pass_on of an urgent frame: the hops it touched (touch) */
	struct agg_hop **touched;       /* peer_count() entries */
	uint32_t ntouched;
	uint32_t *mark;                 /* by peer index */
	uint32_t mark_now;              /* one more per urgent pass_on */
} taker;

uint64_t rx_steps_early;

/* 1 if an item whose gen byte is gen is of j's step here (proto/wire.h "The
 * step of an item"); else it is of the next one. */
static inline int step_here(const struct job *j, uint8_t gen)
{
	return !(gen & WIRE_GEN_STEP) == !(j->step & 1);
}

/* An item of j's next step came, so its step completed: STEP records first,
 * then the item (ahead of the home's STEP, which is then ignored).  Not for
 * a job that failed here: its steps are over. */
static void step_came(struct job *j)
{
	if (j->failed)
		return;
	ep_step_complete(j);
	rx_steps_early++;
}

/* deliver's and deliver_dense's general way: rec (k items) for d, which
 * may be NULL (the rank is not here: dropped), into its ring or queue, or
 * parked. */
__attribute__((noinline))
static int deliver_rec(struct job *j, struct ep *d, const struct proto_rec *rec, const void *payload, uint32_t k)
{
	if (!d) {
		if (j)
			ep_drop(j, k);
		else
			ep_stats.items_dropped += k;
		log_rl_warn("item for job %u rank %u, which is not attached here; dropped",
			    j ? j->id : 0, rec->dst);
		return 0;
	}
	if (ep_deliver_slow(d, rec, payload, 0) == 0)
		return 0;
	/* Its queue is full: hold back that rank's senders, not the link. */
	return flow_park(d, rec, payload);
}

/* An item for a rank here, of job j (NULL: not here), whose size and rank
 * table the caller keeps at hand (jsize 0 for none).  w0 and w2 are the
 * first and last words of its wire header (len, flags, gen, channel; dst,
 * src).  Returns 0 (delivered, queued, or dropped for a rank that is not
 * here) or -EAGAIN: its queue is full, try again later. */
static inline __attribute__((always_inline)) int deliver(struct job *j, uint32_t jsize, const struct job_rank *jranks, uint64_t w0, uint64_t w2,
			  const void *payload)
{
	uint32_t len = (uint32_t)w0, dst = (uint32_t)w2, src = (uint32_t)(w2 >> 32);
	struct ep *d = dst < jsize && src < jsize ? jranks[dst].ep : NULL;
	struct proto_rec rec, *slot;

	if (__builtin_expect(d && !d->pending.count, 1) && (slot = ring_reserve_fast(&d->rx, len)) != NULL) {
		ep_put_words(d, slot, wire_rec_word0(w0), w2, payload, len);
		return 0;
	}
	rec = (struct proto_rec){
		.len = len,
		.kind = PROTO_REC_ITEM,
		.flags = (uint8_t)(w0 >> 32),   /* the same bits (wire.h) */
		.channel = (uint16_t)(w0 >> 48),
		.dst = dst,
		.src = src,
	};
	return deliver_rec(j, d, &rec, payload, 1);
}

/* A dense batch for a rank here (wire.h WIRE_ITEM_DENSE; checked by
 * rx_frame): one DENSE record into the RX ring, its payload as it came, in
 * one copy; else, whole, through its queue as deliver does.  Returns 0 or
 * -EAGAIN. */
static int deliver_dense(struct job *j, uint32_t jsize, const struct job_rank *jranks, uint64_t w0, uint64_t w2,
			 const uint8_t *payload)
{
	uint32_t len = (uint32_t)w0, dst = (uint32_t)w2, src = (uint32_t)(w2 >> 32), k = (uint32_t)(w0 >> 48);
	struct ep *d = dst < jsize && src < jsize ? jranks[dst].ep : NULL;
	struct proto_rec rec = { .len = len, .kind = PROTO_REC_DENSE, .dst = dst, .src = src }, *slot;

	if (d && !d->pending.count && (slot = ring_reserve_fast(&d->rx, len)) != NULL) {
		memcpy(slot, &rec, sizeof(rec));
		memcpy(slot + 1, payload, len);
		ep_ringed(d, k);
		return 0;
	}
	return deliver_rec(j, d, &rec, payload, k);
}

/* A batch for a rank here (wire.h WIRE_ITEM_BATCH; validated whole by
 * rx_frame): its records go into the RX ring as they are, in one copy,
 * when nothing is queued for the rank and they fit before the end of the
 * ring; else one at a time as deliver takes them, from record *inner on
 * (an offset in recs), which is kept between calls when one could not go
 * now.  Returns 0 (all taken) or -EAGAIN. */
static int deliver_batch(struct job *j, uint32_t jsize, const struct job_rank *jranks, uint64_t w0, uint64_t w2,
			 const uint8_t *recs, uint32_t *inner)
{
	uint32_t len = (uint32_t)w0, dst = (uint32_t)w2, src = (uint32_t)(w2 >> 32);
	struct ep *d = dst < jsize && src < jsize ? jranks[dst].ep : NULL;
	struct proto_rec *slot;

	/* A record of len - 16 payload bytes takes exactly len bytes. */
	if (*inner == 0 && d && !d->pending.count &&
	    (slot = ring_reserve_fast(&d->rx, len - (uint32_t)sizeof(struct proto_rec))) != NULL) {
		ep_put_batch(d, slot, recs, len, (uint32_t)(w0 >> 48));
		return 0;
	}
	while (*inner < len) {
		const uint8_t *p = recs + *inner;
		uint64_t r0, r1;

		__builtin_memcpy(&r0, p, 8);
		__builtin_memcpy(&r1, p + 8, 8);
		/* As a wire header's first word: the record's kind byte
		 * cleared, its flags (0) where the wire has them. */
		if (deliver(j, jsize, jranks, r0 & 0xffff0000ffffffffull, r1, p + sizeof(struct proto_rec)) < 0)
			return -EAGAIN;
		*inner += (uint32_t)ring_footprint((uint32_t)r0);
	}
	*inner = 0;
	return 0;
}

/* The next hops an urgent frame's items went on to (pass_on), to be
 * flushed after it: exactly those, never more (a frame must not make the
 * node send buffers it put nothing into).  taker.touched lists them, each
 * once: taker.mark[hop index] == taker.mark_now marks the ones listed. */
static void touch(struct agg_hop *h)
{
	if (taker.mark[h->idx] == taker.mark_now)
		return;
	taker.mark[h->idx] = taker.mark_now;
	taker.touched[taker.ntouched++] = h;
}

static void flush_touched(int urgent)
{
	for (uint32_t i = 0; i < taker.ntouched; i++)
		agg_flush_hop(taker.touched[i], urgent == PEER_URGENT_LAZY ? AGG_FLUSH_COLL : AGG_FLUSH_EXPLICIT);
	taker.ntouched = 0;
}

/* Passes on the items of body from offset off.  Returns the offset of the
 * first item that could not go on now, len when all went.  The body was
 * validated whole (rx_frame), so items are read without checks, the header
 * as three words; the job is looked up once per run of items of one job.
 * urgent: the frame was (PEER_URGENT, PEER_URGENT_LAZY): the buffers its items went
 * into leave at once too, so that a FLUSH or DONE reaches the end of the
 * route without waiting for a flush timer at every hop. */
static uint32_t pass_on(struct peer *from, struct rx_peer *r, const uint8_t *body, uint32_t len, uint32_t off,
			int urgent)
{
	uint64_t delivered = 0, forwarded = 0, coll_forwarded = 0, jkey = 0;
	uint32_t self = taker.self, jsize = 0;
	const struct job_rank *jranks = NULL;
	struct job *j = NULL;

	if (urgent && ++taker.mark_now == 0) {
		/* The marks wrapped: none may look current. */
		memset(taker.mark, 0, peer_count() * sizeof(*taker.mark));
		taker.mark_now = 1;
	}
	/* (The header's words: proto/wire.h, before wire_put_rec_item.) */
	while (off < len) {
		const uint8_t *p = body + off;
		const void *payload = p + sizeof(struct wire_item);
		uint64_t w0, w1, w2;
		uint32_t node, job;
		uint8_t *slot;

		__builtin_memcpy(&w0, p, 8);
		__builtin_memcpy(&w1, p + 8, 8);
		__builtin_memcpy(&w2, p + 16, 8);
		node = (uint32_t)w1;
		job = (uint32_t)(w1 >> 32);
		if (node == self && job != 0 && __builtin_expect((uint32_t)w2 == WIRE_DST_COLL, 0)) {
			/* A piece of the job's collectives: the engine's, from
			 * the queue the loop empties (not from here, inside a
			 * transport's receive path), as control items are. */
			if (ctlq_push(WIRE_CTL_COLL, (uint32_t)(w2 >> 32), payload, (uint32_t)w0) < 0)
				break;
		} else if (node == self && job != 0) {
			/* Key: job id, generation and step parity, never 0 for
			 * a job. */
			uint64_t key = w1 >> 32 << 8 | ((w0 >> 40) & 0xff);

			if (key != jkey) {
				j = job_by_id(job, (uint8_t)((w0 >> 40) & WIRE_GEN_MASK));
				jkey = key;
				jsize = j ? j->size : 0;
				jranks = j ? j->ranks : NULL;
				if (j && !step_here(j, (uint8_t)(w0 >> 40)))
					step_came(j);
			}
			if (__builtin_expect((w0 >> 32) & WIRE_ITEM_BATCH, 0)) {
				if (((w0 >> 32) & 0xff) == WIRE_ITEM_DENSE ?
					    deliver_dense(j, jsize, jranks, w0, w2, payload) < 0 :
					    deliver_batch(j, jsize, jranks, w0, w2, payload, &r->stalled_inner) < 0)
					break;
				delivered += w0 >> 48;
			} else {
				if (deliver(j, jsize, jranks, w0, w2, payload) < 0)
					break;
				delivered++;
			}
		} else if (node == self) {
			if (ctlq_push((uint32_t)w2, (uint32_t)(w2 >> 32), payload, (uint32_t)w0) < 0)
				break;
		} else if (job != 0 && agg_dropping == 0 && (slot = agg_reserve(node, (uint32_t)w0)) != NULL) {
			/* Passing through, and room in the frame toward its
			 * next hop: the item goes on as it came, header and
			 * all, in one copy. */
			proto_copy(slot, p, wire_item_footprint((uint32_t)w0));
			if (__builtin_expect((w0 >> 32) & WIRE_ITEM_BATCH, 0)) {
				agg_hops[node]->buf->nitems += (uint32_t)(w0 >> 48) - 1;
				forwarded += (w0 >> 48) - 1;
			}
			forwarded++;
			coll_forwarded += (uint32_t)w2 == WIRE_DST_COLL;
			if (urgent)
				touch(agg_hops[node]);
		} else {
			struct wire_item it;

			wire_item_at(p, &it);
			if (agg_item(&it, payload, from->dim, job == 0 ? AGG_CONTROL : AGG_DATA) < 0)
				break;
			forwarded += wire_item_count(&it);
			coll_forwarded += it.dst == WIRE_DST_COLL && job != 0;
			if (urgent)
				touch(agg_hops[node]);
		}
		off += (uint32_t)wire_item_footprint((uint32_t)w0);
	}
	r->items_delivered += delivered;
	r->items_forwarded += forwarded;
	r->coll_forwarded += coll_forwarded;
	rx_items_local += delivered;
	if (taker.ntouched)
		flush_touched(urgent);
	return off;
}

int rx_frame(struct peer *p, const uint8_t *body, uint32_t len, int urgent)
{
	struct rx_peer *r = &taker.peers[p->idx];
	uint32_t off = 0, n = 0, done;
	uint64_t before;

	/* Check the whole frame before using any of it: a malformed frame
	 * closes the link, and must not have half happened.  What
	 * wire_next_item checks, and the destination node, with the header
	 * read as words (once per item per hop: kept tight). */
	while (off < len) {
		uint64_t w0, w1, fp;
		uint32_t ilen, node;

		if (len - off < sizeof(struct wire_item))
			return -EPROTO;
		__builtin_memcpy(&w0, body + off, 8);
		__builtin_memcpy(&w1, body + off + 8, 8);
		ilen = (uint32_t)w0;
		node = (uint32_t)w1;
		fp = wire_item_footprint(ilen);
		/* (Every bit of the flags byte has a meaning: wire.h.) */
		if (ilen > PROTO_FRAG_BYTES || fp > len - off || node >= taker.nnodes || !taker.valid[node])
			return -EPROTO;
		if (__builtin_expect((w0 >> 32) & WIRE_ITEM_BATCH, 0)) {
			/* A batch: checked whole here too when it only passes
			 * through, since what a node passes on, the next must
			 * take (a frame refused there would come again for
			 * ever, and with it everything it carries). */
			uint64_t w2;

			__builtin_memcpy(&w2, body + off + 16, 8);
			if (!wire_batch_ok(w0, w1, w2, body + off + sizeof(struct wire_item)))
				return -EPROTO;
			n += (uint32_t)(w0 >> 48) - 1;
		}
		off += (uint32_t)fp;
		n++;
	}
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
	r->stalled_inner = 0;
	before = ep_stats.items_delivered;
	done = pass_on(p, r, body, len, 0, urgent);
	/* What this frame brought is visible to its receivers now, not at the
	 * end of the loop's turn: a turn that reads many frames off a link
	 * would otherwise fill an RX ring with records its client cannot see
	 * yet, and queue the rest (twice the work per item). */
	if (ep_stats.items_delivered != before)        /* records written into rings */
		ep_publish();
	if (done == len)
		return 0;
	/* Keep the rest; reading from this peer pauses until it has gone on. */
	r->stalled = r->spare;
	r->spare = NULL;
	memcpy(r->stalled->data + sizeof(struct wire_frame_hdr), body + done, len - done);
	r->stalled->len = (uint32_t)(sizeof(struct wire_frame_hdr) + len - done);
	r->stalled_off = 0;
	r->stalled_urgent = urgent;
	r->stalls++;
	return 1;
}

/* Receiving in place (net/link.h "Receiving"): a frame that is one piece
 * of at least STEER_MIN bytes for a rank here whose RX ring has room now,
 * nothing queued for it, is read straight into that ring.  The checks are
 * rx_frame's and pass_on's for such a frame; what was reserved is undone if
 * the bytes do not come.  Both calls come within one transport event, so
 * nothing else touches the ring in between. */
#define STEER_MIN (16u * 1024)

static struct {
	struct ep *d;                   /* NULL: nothing steered */
	struct rx_peer *r;
	uint64_t head;                  /* d's RX head before the reservation */
} steering;

uint64_t rx_pieces_steered;

uint8_t *rx_steer(struct peer *p, const uint8_t *body, uint32_t len, int *later)
{
	uint64_t w0, w1, w2;
	uint32_t ilen, node, job, dst, src;
	const struct job_rank *jranks;
	struct proto_rec *slot;
	struct job *j;
	struct ep *d;

	__builtin_memcpy(&w0, body, 8);
	__builtin_memcpy(&w1, body + 8, 8);
	__builtin_memcpy(&w2, body + 16, 8);
	ilen = (uint32_t)w0;
	node = (uint32_t)w1;
	job = (uint32_t)(w1 >> 32);
	dst = (uint32_t)w2;
	src = (uint32_t)(w2 >> 32);
	/* One item, the whole body; a piece for a rank of a job here. */
	*later = 0;
	if (ilen < STEER_MIN || ilen > PROTO_FRAG_BYTES || wire_item_footprint(ilen) != len || node != taker.self ||
	    job == 0 || ((w0 >> 32) & WIRE_ITEM_BATCH))
		return NULL;
	/* From here on, a piece for a rank here: if not now, later. */
	*later = 1;
	if (taker.peers[p->idx].stalled)
		return NULL;
	j = job_by_id(job, (uint8_t)((w0 >> 40) & WIRE_GEN_MASK));
	/* (An item of the next step goes the usual way, step_came: not
	 * before the frame is checked.) */
	if (!j || dst >= j->size || src >= j->size || !step_here(j, (uint8_t)(w0 >> 40))) {
		*later = 0;     /* (a collective's piece, WIRE_DST_COLL, among them) */
		return NULL;
	}
	jranks = j->ranks;
	d = jranks[dst].ep;
	if (!d || d->pending.count)
		return NULL;
	steering.head = d->rx.head;
	slot = ring_reserve_fast(&d->rx, ilen);
	if (!slot)
		return NULL;
	__builtin_memcpy(slot, &(uint64_t){ wire_rec_word0(w0) }, 8);
	__builtin_memcpy((uint8_t *)slot + 8, &w2, 8);
	steering.d = d;
	steering.r = &taker.peers[p->idx];
	return (uint8_t *)(slot + 1);
}

void rx_steered(struct peer *p, int ok)
{
	struct ep *d = steering.d;

	(void)p;
	assert(d);
	steering.d = NULL;
	if (!ok) {
		d->rx.head = steering.head;
		return;
	}
	/* What ep_put_words and rx_frame account. */
	ep_ringed(d, 1);
	steering.r->items_recv++;
	steering.r->items_delivered++;
	rx_items_local++;
	rx_pieces_steered++;
	ep_publish();
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
		done = pass_on(peer_at(i), r, body, len, r->stalled_off, r->stalled_urgent);
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

	fprintf(out, " items_recv %llu items_per_frame_recv %.2f items_forwarded %llu coll_forwarded %llu items_delivered %llu stalls %llu",
		(unsigned long long)r->items_recv,
		p->st.frames_recv ? (double)r->items_recv / (double)p->st.frames_recv : 0.0,
		(unsigned long long)r->items_forwarded, (unsigned long long)r->coll_forwarded,
		(unsigned long long)r->items_delivered,
		(unsigned long long)r->stalls);
}

int rx_init(const struct conf *c, uint32_t self)
{
	taker.self = self;
	taker.nnodes = c->nnodes;
	taker.valid = calloc(c->nnodes, 1);
	taker.peers = calloc(peer_count() ? peer_count() : 1, sizeof(*taker.peers));
	taker.touched = calloc(peer_count() ? peer_count() : 1, sizeof(*taker.touched));
	taker.mark = calloc(peer_count() ? peer_count() : 1, sizeof(*taker.mark));
	taker.ntouched = taker.mark_now = 0;
	if (!taker.valid || !taker.peers || !taker.touched || !taker.mark)
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
	free(taker.touched);
	free(taker.mark);
	taker.peers = NULL;
	taker.valid = NULL;
	taker.touched = NULL;
	taker.mark = NULL;
}
