/* daemon/fwd/tx.c - see tx.h. */
#include "tx.h"
#include "agg.h"
#include "flow.h"
#include "../core/log.h"
#include "../local/endpoint.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* Records a TX ring may hand over per poll round, so that one busy sender
 * cannot starve the others. */
#define DRAIN_BUDGET 512

struct tx_stats tx_stats;
int tx_keep_loans;

static struct {
	const struct conf *conf;
	uint32_t self;
} drainer;

/* The gen byte of the items j's ranks here send now: the job's generation
 * and the parity of its step here (proto/wire.h "The step of an item"). */
static inline uint8_t wire_gen(const struct job *j)
{
	return (uint8_t)(j->gen | (j->step & 1 ? WIRE_GEN_STEP : 0));
}

/* 1 if j lost a node (cluster/cluster.h: failed with EHOSTDOWN).  Then an
 * item whose destination takes no more now is dropped and counted
 * (failed_job_item) rather than holding its sender for ever: the job's steps
 * fail anyway, and its destination may be gone for good (behind the lost
 * node, whose XOFF will never be lifted and whose link queue does not
 * drain).  A job that failed because a rank left is not so: its other ranks
 * are there, and items to them wait as usual. */
static inline int lost_node(const struct job *j)
{
	return __builtin_expect(j->failed == EHOSTDOWN, 0);
}

/* See lost_node.  (A DENSE record's payload is ours, checked.) */
static int failed_job_item(struct job *j, const struct ep *s, const struct proto_rec *rec, const void *payload)
{
	uint32_t k = proto_rec_items(rec, payload);

	ep_drop(j, k);
	j->sent += k;
	log_rl_warn("job %s (failed: %s): item from rank %u to rank %u dropped", j->name, j->fail_text, s->rank,
		    rec->dst);
	return 0;
}

/* Pieces of at least this many bytes go out from the TX ring itself where
 * frames may lend bytes (net/frame.h "Lent bytes"); smaller ones are copied,
 * which costs less than the loan. */
#define LEND_MIN (16u * 1024)
static_assert(PROTO_BATCH_ITEM_MAX < LEND_MIN, "a batch's items (copies, drain_batch) are never lent");

/* A loan of a piece's bytes, while its frame holds them; or, once its
 * endpoint took it back (take_back), the copy the frame sends instead. */
struct tx_lend {
	struct frame_lender x;          /* first: the frame's lender */
	struct ep_lender *l;            /* the loan: its ring's lender and id (never the endpoint: */
	uint64_t id;                    /* ... it may close while the loan stays, tx.h) */
	uint8_t *copy;                  /* taken back: the bytes, ours; NULL while a loan */
	struct tx_lend *prev, *next;    /* lends.out, while a loan */
};

/* Every loan out, for take_back. */
static struct {
	struct tx_lend *out;
} lends;

static void unlink_lend(struct tx_lend *t)
{
	if (t->prev)
		t->prev->next = t->next;
	else
		lends.out = t->next;
	if (t->next)
		t->next->prev = t->prev;
	tx_stats.loans_out--;
}

static void lend_put(struct frame_lender *x)
{
	struct tx_lend *t = (struct tx_lend *)x;

	if (!t->copy) {
		unlink_lend(t);
		ep_loan_end(t->l, t->id);
	} else {
		frame_mem_bytes -= t->x.f->len - t->x.f->own;
		tx_stats.taken_back_bytes -= t->x.f->len - t->x.f->own;
		free(t->copy);
	}
	free(t);
}

/* ep_close's hook (local/endpoint.h "Loans"): the frames that send from
 * ep's TX ring get copies of those bytes, and its loans end.  A loan whose
 * copy cannot be had stays (the endpoint's region then waits for it). */
static void take_back(struct ep *ep)
{
	for (struct tx_lend *t = lends.out, *next; t; t = next) {
		struct frame *f = t->x.f;
		uint32_t n = f->len - f->own;

		next = t->next;
		if (t->l != ep->lender || tx_keep_loans || !(t->copy = malloc(n)))
			continue;
		frame_mem_bytes += n;
		tx_stats.taken_back_bytes += n;
		memcpy(t->copy, f->lent, n);
		frame_relend(f, t->copy);
		unlink_lend(t);
		ep_loan_end(t->l, t->id);
		tx_stats.pieces_taken_back++;
	}
}

/* agg_item for a piece at s's TX tail, lent if it goes alone; copied if it
 * does not, or if there is no memory for the loan. */
static int agg_piece(struct ep *s, const struct wire_item *it, const void *payload)
{
	struct tx_lend *t = malloc(sizeof(*t));
	int ret;

	if (!t || ep_loan(s, &t->l, &t->id) < 0) {
		free(t);
		return agg_item(it, payload, -1, AGG_DATA);
	}
	t->x.put = lend_put;
	t->copy = NULL;
	ret = agg_item_lent(it, payload, &t->x);
	if (ret <= 0) {
		ep_loan_cancel(t->l, t->id);
		free(t);
		return ret;
	}
	t->prev = NULL;
	t->next = lends.out;
	if (lends.out)
		lends.out->prev = t;
	lends.out = t;
	tx_stats.pieces_lent++;
	tx_stats.loans_out++;
	return 0;
}

/* An item of rank s->rank: to a local endpoint, or toward its node; or a
 * DENSE record's items, whole (its payload ours, checked: drain_dense).
 * Returns 0 (taken, delivered or dropped) or -EAGAIN (try again later). */
static int route_item(struct ep *s, struct proto_rec *rec, const void *payload)
{
	struct job *j = s->job;
	uint32_t node = j->ranks[rec->dst].node;
	struct ep *d = j->ranks[rec->dst].ep;
	uint32_t k = rec->kind == PROTO_REC_DENSE ? proto_rec_items(rec, payload) : 1;

	rec->src = s->rank;
	if (d) {
		if (ep_deliver(d, rec, payload) < 0) {
			if (lost_node(j))
				return failed_job_item(j, s, rec, payload);
			s->blocked_on = d;
			return -EAGAIN;
		}
	} else if (__builtin_expect(j->stale, 0) && node != JOB_NO_NODE && node != drainer.self) {
		/* Its home is gone and so is its id (local/job.h): what it
		 * sends could land in another job that gets the id. */
		return failed_job_item(j, s, rec, payload);
	} else if (__builtin_expect(j->nxoff != 0, 0) && node != JOB_NO_NODE && node != drainer.self &&
		   job_xoff(j, rec->dst)) {
		if (lost_node(j))
			return failed_job_item(j, s, rec, payload);
		s->blocked_rank = rec->dst;     /* its node said XOFF (flow.h) */
		return -EAGAIN;
	} else if (node != JOB_NO_NODE && node != drainer.self) {
		/* The flags are the same bits in both layouts (wire.h). */
		struct agg_hop *hop = agg_hops[node];
		uint8_t *slot = rec->kind == PROTO_REC_ITEM ? agg_reserve_hop(hop, rec->len) : NULL;

		if (slot) {
			uint64_t w[2];

			__builtin_memcpy(w, rec, sizeof(w));
			wire_put_rec_item(slot, w[0], wire_gen(j), node, j->id, w[1], payload);
		} else {
			struct wire_item it = {
				.len = rec->len, .flags = rec->flags, .channel = rec->channel, .node = node,
				.job = j->id, .gen = wire_gen(j), .dst = rec->dst, .src = rec->src,
			};
			int ret;

			if (rec->kind == PROTO_REC_DENSE) {
				/* one element, as it is (wire.h WIRE_ITEM_DENSE) */
				it.flags = WIRE_ITEM_DENSE;
				it.channel = (uint16_t)k;
			}
			/* (route_item runs on the record at the TX tail: drain's
			 * general path, never on a batch's items; a DENSE
			 * record is a copy, and small.) */
			ret = rec->len >= LEND_MIN && wire_item_footprint(rec->len) > agg_alone && peer_takes_lent() ?
				      agg_piece(s, &it, payload) : agg_item(&it, payload, -1, AGG_DATA);

			if (ret < 0) {
				if (lost_node(j))
					return failed_job_item(j, s, rec, payload);
				s->blocked_node = node;
				return -EAGAIN;
			}
		}
		if (s->put_serial)
			s->put_serial[hop->idx] = hop->serial;  /* for FLUSH and DONE */
	} else {
		/* The rank left: the item is accounted as arrived, so that
		 * steps can still end. */
		ep_drop(j, k);
		log_rl_warn("job %s: rank %u left; item from rank %u dropped", j->name, rec->dst, s->rank);
	}
	j->sent += k;
	return 0;
}

/* A DENSE record (proto/ring.h "Dense batches") that drain_fast did not
 * take: its header read once and checked, the items copied behind it into
 * memory of our own, and the whole passed on as one record (route_item:
 * to a rank here, into its RX ring or its queue; toward another node, one
 * element).  Taken whole or not at all.  Adds the items and their bytes.
 * Returns 0, -EAGAIN (try again later) or -EPROTO (the session failed). */
static int drain_dense(struct ep *s, struct proto_rec *rec, const uint8_t *payload, uint64_t *items_p,
		       uint64_t *bytes_p)
{
	static uint8_t scratch[PROTO_BATCH_MAX] __attribute__((aligned(8)));
	uint64_t h;
	uint32_t k;

	if (rec->len < sizeof(struct proto_dense) || rec->len > PROTO_BATCH_MAX || rec->channel ||
	    rec->dst >= s->job->size || !(k = proto_dense_check(h = proto_dense_word(payload), rec->len))) {
		ep_fail(s, "malformed dense batch in TX ring");
		return -EPROTO;
	}
	if (!s->ready) {
		ep_fail(s, "batch before READY");
		return -EPROTO;
	}
	memcpy(scratch, &h, sizeof(h));
	memcpy(scratch + sizeof(h), payload + sizeof(h), rec->len - sizeof(h));
	if (route_item(s, rec, scratch) < 0)
		return -EAGAIN;
	*items_p += k;
	*bytes_p += (uint64_t)k * proto_dense_len(h);
	return 0;
}

/* A BATCH record (proto/ring.h "Batches") that drain_fast did not take.
 * The whole batch is copied and checked first, in memory of our own (the
 * client may change its ring meanwhile): it is taken whole or refused
 * whole, and nothing of a malformed one goes anywhere.  Then, for a rank
 * here, into its RX ring in one piece; for a rank on another node, into a
 * frame in one piece (a buffer opened or flushed for it if need be); else
 * (a queue for the rank, XOFF, a job in trouble, no room before the end of
 * the RX ring) one record at a time through route_item, from s->batch_off
 * on (a batch taken in part is copied and checked again when its turn
 * comes back; what was taken stays taken).  Adds the items taken and their
 * bytes.  Returns 0 (all taken: s->batch_off is 0 again), -EAGAIN (try
 * again later) or -EPROTO (the session failed). */
static int drain_batch(struct ep *s, const struct proto_rec *b, const uint8_t *recs, uint64_t *items_p,
		       uint64_t *bytes_p)
{
	static uint8_t scratch[PROTO_BATCH_MAX] __attribute__((aligned(8)));
	struct job *j = s->job;
	uint64_t w1 = b->dst | (uint64_t)s->rank << 32;
	uint32_t k, node, taken;
	struct ep *d;

	if (b->len == 0 || b->len > PROTO_BATCH_MAX || (b->len & 7) || b->channel || b->dst >= j->size) {
		ep_fail(s, "malformed batch in TX ring");
		return -EPROTO;
	}
	if (!s->ready) {
		ep_fail(s, "batch before READY");
		return -EPROTO;
	}
	memcpy(scratch, recs, b->len);
	if (!(k = proto_batch_check(scratch, b->len, w1))) {
		ep_fail(s, "malformed batch in TX ring");
		return -EPROTO;
	}
	/* Where we stopped must still be where a record starts (drain
	 * checked that the tail has not moved). */
	if (s->batch_off && !proto_batch_at(scratch, b->len, s->batch_off, &taken)) {
		ep_fail(s, "TX ring changed under a batch being taken");
		return -EPROTO;
	}
	d = j->ranks[b->dst].ep;
	node = j->ranks[b->dst].node;
	if (s->batch_off == 0 && d && !d->pending.count) {
		struct proto_rec *slot = ring_reserve_fast(&d->rx, b->len - (uint32_t)sizeof(struct proto_rec));

		if (slot) {
			ep_put_batch(d, slot, scratch, b->len, k);
			goto taken;
		}
	}
	if (s->batch_off == 0 && !d && !j->stale && !lost_node(j) && wire_item_footprint(b->len) <= agg_alone &&
	    !(j->nxoff && job_xoff(j, b->dst)) && node != JOB_NO_NODE && node != drainer.self) {
		uint8_t *slot = agg_slot(node, b->len);
		struct agg_hop *hop = agg_hops[node];

		if (!slot) {
			s->blocked_node = node;
			return -EAGAIN;
		}
		/* (scratch is checked: k records) */
		memcpy(slot + sizeof(struct wire_item), scratch, b->len);
		wire_put_batch_header(slot, b->len, k, wire_gen(j), node, j->id, w1);
		hop->buf->nitems += k - 1;
		if (s->put_serial)
			s->put_serial[hop->idx] = hop->serial;
		goto taken;
	}
	while (s->batch_off < b->len) {
		uint32_t off = s->batch_off, len;
		struct proto_rec rec;
		uint64_t r0;

		memcpy(&r0, scratch + off, 8);
		len = (uint32_t)r0;
		rec = (struct proto_rec){ .len = len, .kind = PROTO_REC_ITEM, .channel = (uint16_t)(r0 >> 48),
					  .dst = b->dst, .src = s->rank };
		if (route_item(s, &rec, scratch + off + sizeof(struct proto_rec)) < 0)
			return -EAGAIN;
		s->batch_off = off + (uint32_t)ring_footprint(len);
		s->batch_tail = s->tx.tail;
		(*items_p)++;
		*bytes_p += len;
	}
	s->batch_off = 0;
	return 0;
taken:
	j->sent += k;
	*items_p += k;
	*bytes_p += b->len - k * sizeof(struct proto_rec);
	return 0;
}

/* drain_fast: room for an element of len payload bytes in the buffer
 * toward node (*hop_p), or NULL when the general path must take it (the
 * node is this one or none, FLUSH bookkeeping is missing, or the buffer
 * is full or absent). */
static inline uint8_t *reserve_toward(uint32_t node, uint32_t self, const uint32_t *put, uint32_t len,
				      struct agg_hop **hop_p)
{
	if (node == self || node == JOB_NO_NODE || !put)
		return NULL;
	*hop_p = agg_hops[node];
	return agg_reserve_hop(*hop_p, len);
}

/* The per-item loop of the common case, kept tight (each instruction here
 * runs once per item; make bench-rate counts them): item records for ranks
 * here whose RX ring has room and nothing queued, and for ranks on other
 * nodes whose frame buffer toward them has room, in a job with nothing
 * unusual going on (drain checks that).  Works on copies of the
 * ring's counters, the record header as two words, and writes the wire
 * header as three.  Stops at the first record it does not handle, which
 * drain's general path then takes, or after budget records.  Returns the
 * number of records taken; adds their payload bytes to *bytes_p. */
static uint32_t drain_fast(struct ep *s, struct job *j, uint32_t budget, uint64_t *items_p, uint64_t *bytes_p)
{
	struct ring *r = &s->tx;
	const uint8_t *data = r->data;
	const struct job_rank *ranks = j->ranks;
	uint64_t size = r->size, tail = r->tail, head = r->head, bytes = 0, items = 0;
	uint64_t src = (uint64_t)s->rank << 32;
	uint32_t nranks = j->size, self = drainer.self, job = j->id, n = 0, *put = s->put_serial;
	uint8_t gen = wire_gen(j);

	while (n < budget) {
		uint64_t pos = tail & (size - 1), avail = head - tail, w0, w1, fp;
		uint32_t len, dst, node;
		struct agg_hop *hop;
		struct ep *d;
		uint8_t *slot;

		if (avail == 0 && ring_refresh_head(r, tail) == 0)
			avail = (head = r->head) - tail;
		if (avail < sizeof(struct proto_rec) || size - pos < sizeof(struct proto_rec))
			break;
		w0 = ring_word(data + pos);     /* the client may write it meanwhile */
		w1 = ring_word(data + pos + 8);
		len = (uint32_t)w0;
		dst = (uint32_t)w1;
		fp = ring_footprint(len);
		if (__builtin_expect(((w0 >> 32) & 0xffff) == PROTO_REC_BATCH, 0)) {
			/* A batch for a rank on another node: its records go
			 * into the frame as they are, and are checked there,
			 * where the client cannot change them.  The general
			 * path takes the rest (drain_batch), and fails the
			 * session for a batch that is not valid. */
			uint32_t k;

			if (fp > avail || fp > size - pos || dst >= nranks || len > PROTO_BATCH_MAX ||
			    (w0 >> 48) || s->batch_off || ranks[dst].ep)
				break;
			node = ranks[dst].node;
			if (!(slot = reserve_toward(node, self, put, len, &hop)))
				break;
			if (!(k = wire_put_batch(slot, data + pos + sizeof(struct proto_rec), len, gen, node, job,
						 dst | src))) {
				agg_unreserve_hop(hop, len);
				break;
			}
			hop->buf->nitems += k - 1;
			put[hop->idx] = hop->serial;
			tx_stats.batches_in++;
			tail += fp;
			bytes += len - k * sizeof(struct proto_rec);
			items += k;
			n++;
			continue;
		}
		if (__builtin_expect(((w0 >> 32) & 0xffff) == PROTO_REC_DENSE, 0)) {
			/* A dense batch (proto/ring.h "Dense batches"): its
			 * header read once and checked (O(1)), the items
			 * copied behind it as they are, for a rank here or on
			 * another node.  The general path takes the rest, and
			 * fails the session for one that is not valid. */
			uint64_t h;
			uint32_t k;

			if (fp > avail || fp > size - pos || dst >= nranks || len > PROTO_BATCH_MAX ||
			    len < sizeof(struct proto_dense) || (w0 >> 48) || s->batch_off)
				break;
			h = ring_word(data + pos + sizeof(struct proto_rec));
			if (!(k = proto_dense_check(h, len)))
				break;
			if ((d = ranks[dst].ep) != NULL) {
				struct proto_rec *rs;

				if (d->pending.count || !(rs = ring_reserve_fast(&d->rx, len)))
					break;
				ep_put_dense(d, rs, w0, dst | src, h, data + pos + sizeof(struct proto_rec) + 8, len, k);
			} else {
				node = ranks[dst].node;
				if (!(slot = reserve_toward(node, self, put, len, &hop)))
					break;
				wire_put_dense(slot, h, data + pos + sizeof(struct proto_rec) + 8, len, k, gen, node, job,
					       dst | src);
				hop->buf->nitems += k - 1;
				put[hop->idx] = hop->serial;
			}
			tx_stats.batches_in++;
			tx_stats.dense_in++;
			tail += fp;
			bytes += (uint64_t)k * proto_dense_len(h);
			items += k;
			n++;
			continue;
		}
		/* What ring_peek checks, and a rank of the job. */
		if (((w0 >> 32) & 0xff) != PROTO_REC_ITEM || ((w0 >> 40) & 0xff & ~(uint64_t)PROTO_REC_FLAGS_ALL) ||
		    len > PROTO_FRAG_BYTES || fp > avail || fp > size - pos || dst >= nranks)
			break;
		if ((d = ranks[dst].ep) != NULL) {
			/* A rank here: the record as it is, but for our rank
			 * as its source (ep_deliver's fast path). */
			struct proto_rec *rs;

			if (d->pending.count || !(rs = ring_reserve_fast(&d->rx, len)))
				break;
			ep_put_words(d, rs, w0, dst | src, data + pos + sizeof(struct proto_rec), len);
			goto next;
		}
		node = ranks[dst].node;
		if (!(slot = reserve_toward(node, self, put, len, &hop)))
			break;
		put[hop->idx] = hop->serial;
		wire_put_rec_item(slot, w0, gen, node, job, dst | src, data + pos + sizeof(struct proto_rec));
next:
		tail += fp;
		bytes += len;
		items++;
		n++;
	}
	r->tail = tail;
	j->sent += items;
	*items_p += items;
	*bytes_p += bytes;
	return n;
}

/* FLUSH and DONE: what s has put into buffers leaves now (agg_flush_serials). */
static void flush_for(struct ep *s)
{
	if (s->put_serial)
		agg_flush_serials(s->put_serial, AGG_FLUSH_EXPLICIT);
	else if (s->put_serial_failed)
		agg_flush_all(AGG_FLUSH_EXPLICIT);
}

/* Takes records out of s's TX ring and passes them on.  Returns 1 if it did
 * anything. */
static int drain(struct ep *s)
{
	struct job *j = s->job;
	uint64_t items = 0, bytes = 0, records = 0;     /* counted per call, not per item */
	int work = 0, fast;

	if (lost_node(j)) {
		/* What it waited for may never come (failed_job_item). */
		s->blocked_on = NULL;
		s->blocked_node = JOB_NO_NODE;
		s->blocked_rank = EP_NO_RANK;
	}
	if (s->blocked_on) {
		if (ep_pending_high(s->blocked_on, drainer.conf))
			return 0;
		s->blocked_on = NULL;
	}
	if (s->blocked_node != JOB_NO_NODE) {
		if (agg_link_full(s->blocked_node))
			return 0;
		s->blocked_node = JOB_NO_NODE;
	}
	if (s->blocked_rank != EP_NO_RANK) {
		if (job_xoff(j, s->blocked_rank))
			return 0;
		s->blocked_rank = EP_NO_RANK;
	}
	if (!s->put_serial && !s->put_serial_failed && peer_count()) {
		s->put_serial = calloc(peer_count(), sizeof(*s->put_serial));
		s->put_serial_failed = !s->put_serial;
	}
	/* (Not while a batch is half taken: its rest comes first.) */
	fast = s->ready && !j->stale && !j->nxoff && !lost_node(j) && !s->batch_off;
	for (uint32_t i = 0; i < DRAIN_BUDGET && !s->failed; i++) {
		struct proto_rec rec;
		const void *payload;
		int ret, after_done = s->done_step == j->step;

		if (fast && !after_done) {
			uint32_t k = drain_fast(s, j, DRAIN_BUDGET - i, &items, &bytes);

			records += k;
			work |= k != 0;
			if ((i += k) == DRAIN_BUDGET)
				break;
		}
		ret = ring_peek_fast(&s->tx, &rec, &payload);
		if (!ret)
			ret = ring_peek(&s->tx, &rec, &payload);
		if (ret == 0)
			break;
		if (ret < 0) {
			ep_fail(s, "garbage in TX ring");
			return 1;
		}
		if (after_done && (rec.kind == PROTO_REC_ITEM || rec.kind == PROTO_REC_BATCH ||
				   rec.kind == PROTO_REC_DENSE)) {
			/* An item after the rank's DONE, before the step
			 * completed here (its client cannot have seen the STEP
			 * record: ep_step_complete moves the job on as it
			 * writes it).  Every item must leave marked with the
			 * step it belongs to (wire_gen), and the counts of two
			 * steps never mix (cluster/steps.h); our library
			 * refuses such a send (-EBUSY).  A FLUSH, as
			 * ferry_close writes, is fine. */
			ep_fail(s, "item after DONE, before the step completed");
			return 1;
		}
		if (__builtin_expect(s->batch_off != 0, 0) &&
		    (rec.kind != PROTO_REC_BATCH || s->tx.tail != s->batch_tail)) {
			/* The client rewrote the batch we were taking. */
			ep_fail(s, "TX ring changed under a batch being taken");
			return 1;
		}
		switch (rec.kind) {
		case PROTO_REC_ITEM:
			if (rec.dst >= j->size) {
				ep_fail(s, "item for a rank outside the job");
				return 1;
			}
			if (!s->ready) {
				ep_fail(s, "item before READY");
				return 1;
			}
			if (route_item(s, &rec, payload) < 0) {
				tx_stats.stalls++;
				goto out;
			}
			items++;
			bytes += rec.len;
			break;
		case PROTO_REC_BATCH:
		case PROTO_REC_DENSE:
			ret = rec.kind == PROTO_REC_BATCH ? drain_batch(s, &rec, payload, &items, &bytes)
							  : drain_dense(s, &rec, payload, &items, &bytes);
			if (ret == -EPROTO)
				return 1;
			if (ret < 0) {
				tx_stats.stalls++;
				goto out;
			}
			tx_stats.batches_in++;
			tx_stats.dense_in += rec.kind == PROTO_REC_DENSE;
			break;
		case PROTO_REC_FLUSH:
			tx_stats.flushes++;
			flush_for(s);
			break;
		case PROTO_REC_DONE:
			/* The end of this rank's step: its items so far are
			 * counted in j->sent; send what is buffered. */
			if (s->done_step != j->step) {
				s->done_step = j->step;
				j->done++;
			}
			flush_for(s);
			break;
		default:
			ep_fail(s, "record kind not allowed in a TX ring");
			return 1;
		}
		ring_consume(&s->tx, &rec);
		records++;
		work = 1;
	}
out:
	s->items_sent += items;
	tx_stats.items_in += items;
	tx_stats.bytes_in += bytes;
	ep_taken(s, records);
	ep_tx_release(s);
	return work;
}

int tx_poll(void)
{
	int work = 0;

	for (struct ep *s = ep_first(); s; s = s->next) {
		if (s->failed)
			continue;
		/* (Also when the queue is empty but XOFF is still on: a
		 * delivery can drain the queue itself, ep_deliver_slow.) */
		if (s->pending.count || s->xoff) {
			work |= ep_flush_pending(s);
			flow_check(s);
		}
		work |= drain(s);
	}
	return work;
}

int tx_init(const struct conf *c, uint32_t self)
{
	drainer.conf = c;
	drainer.self = self;
	ep_set_close_hook(take_back);
	return 0;
}
