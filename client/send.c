/* client/send.c - libferry's sending side: items, FLUSH and DONE records
 * into the TX ring.  See internal.h.
 */
#include "internal.h"
#include "../proto/clock.h"
#include "../proto/ring.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* Every fragment of the largest item has an index (proto/ring.h). */
static_assert(FERRY_MAX_ITEM / PROTO_FRAG_BYTES <= PROTO_REC_FRAG_MAX + 1, "fragment indexes");

/* What a sender waiting for room in a direct ring keeps at most of what
 * arrives meanwhile (wait_room_armed). */
#define STASH_WAIT_BYTES (16u << 20)

/* Whether the rank at the other end of d has left (proto/direct.h): what
 * is for it is dropped, as ferryd drops what comes for a rank that left. */
static int direct_gone(const struct ferry *f, const struct dring *d)
{
	return atomic_load_explicit(&f->dr->gone[d->slot], memory_order_acquire) != 0;
}

static int wait_room_armed(struct ferry *f, struct dring *d, uint32_t len);

/* Waits for room for a record of len bytes in d's ring (NULL: the TX
 * ring), or until d's rank has left; its waits may take the eventfd count
 * that was to make ferry_fd() readable, so an armed fd is armed again
 * after (poll_rearm). */
static int wait_room(struct ferry *f, struct dring *d, uint32_t len)
{
	int was_armed = f->armed, ret;

	f->armed = 0;
	ret = wait_room_armed(f, d, len);
	if (was_armed && !f->dead)
		poll_rearm(f);
	return ret;
}

/* (A direct ring's reader wakes us as ferryd does, through our efd_client,
 * which conn_wait watches; so does ferryd when that reader's rank left.)
 *
 * Waiting for a direct ring, we keep what arrives meanwhile (in the stash,
 * as ferry_step_wait does): the reader we wait for may itself wait for
 * room toward us (two ranks that send each other more than a ring holds,
 * with FERRY_BLOCKING), or be ourselves (a large item to oneself).
 * Through ferryd, its queues took the place of that (limits.pending_bytes,
 * 16 MiB by default, where a direct ring holds 256 KiB).  While the
 * application still holds items of the last ferry_recv, only from the
 * direct rings that call did not read (the others' room cannot go back
 * under those items), and only those wake us. */
static int wait_room_armed(struct ferry *f, struct dring *d, uint32_t len)
{
	struct ring *r = d ? &d->r : &f->tx;
	uint64_t spin_until = proto_now_ns() + f->spin_us * 1000ull;
	unsigned polls = 0;

	/* Our own ring, full, and its room held by items the application
	 * has not released: nothing can ever make room. */
	if (d && d->slot == f->dr->slot && f->outstanding && (f->dr->touched & (1ull << d->slot)))
		return conn_seterr(-EDEADLK, "ferry_send to this rank would wait for ever: its ring is full "
				   "and the items of the last ferry_recv, which hold its room, are not released "
				   "(call ferry_release first)");
	for (;;) {
		/* Up to STASH_WAIT_BYTES kept (ferryd's queues stop at
		 * limits.pending_bytes too): beyond, we wait for room only,
		 * and a fast sender toward us waits as well. */
		int ret, rx_armed = 0, keep = d && f->stash_bytes < STASH_WAIT_BYTES;

		if (f->dead)    /* (rx_sleep_some can end the handle) */
			return f->dead;
		if (keep && (ret = f->outstanding ? rx_stash_direct(f) : rx_stash(f)) < 0)
			return ret;
		if (ring_producer_sleep(r, len))        /* also refreshes the tail */
			return 0;
		if (d && direct_gone(f, d)) {
			ring_producer_awake(r);
			return 0;
		}
		if (proto_now_ns() < spin_until) {
			ring_producer_awake(r);
			spin_turn(f, &polls);   /* (the reader may need our CPU) */
			continue;
		}
		if (keep) {
			if (f->outstanding ? rx_sleep_some(f, f->dr->touched, 0) : rx_sleep(f)) {
				ring_producer_awake(r);         /* items came: keep them first */
				continue;
			}
			rx_armed = 1;
		}
		if (!rx_armed)
			answer_withdrawals(f);  /* (as rx_sleep_some would) */
		ret = conn_wait(f, -1);
		ring_producer_awake(r);
		if (rx_armed)
			rx_awake(f);
		if (ret < 0)
			return ret;
	}
}

/* Reserves room for a record of len payload bytes in d's ring (NULL: the
 * TX ring), waiting for it if block.  Returns 0 with *rec_p set, 1 if the
 * record is to be dropped (d's rank left), -EAGAIN (f->want_room and
 * f->want_dr say for what), or the error that ended the session. */
static int reserve(struct ferry *f, struct dring *d, uint32_t len, int block, struct proto_rec **rec_p)
{
	struct ring *r = d ? &d->r : &f->tx;
	int ret;

	if (f->dead)
		return f->dead;
	while ((ret = ring_reserve(r, len, rec_p)) != 0) {
		if (ret == -EPROTO)
			return f->dead = d ? conn_seterr(-EPROTO, "rank %u published an impossible tail in its direct ring",
							 d->rank)
					   : conn_seterr(-EPROTO, "ferryd published an impossible TX tail");
		if (d && direct_gone(f, d))
			return 1;
		if (!block) {
			f->want_room = len;     /* what FERRY_POLLOUT waits for */
			f->want_dr = d;
			return -EAGAIN;
		}
		/* Only now is a check for a vanished daemon worth its syscall. */
		if ((ret = conn_check(f)) < 0 || (ret = wait_room(f, d, len)) < 0)
			return ret;
	}
	return 0;
}

/* Makes what was reserved in d's ring (NULL: TX) visible, waking its reader. */
static inline void publish(struct ferry *f, struct dring *d)
{
	if (!d) {
		if (ring_publish(&f->tx))
			conn_wake(f->efd_daemon);
	} else if (ring_publish(&d->r)) {
		conn_wake(d->efd);
	}
}

/* A record's header, ours, and its len payload bytes from buf, at rec. */
static inline void rec_write(const struct ferry *f, struct proto_rec *rec, uint8_t kind, uint8_t flags, uint32_t dst,
			     uint16_t channel, const void *buf, uint32_t len)
{
	rec->len = len;
	rec->kind = kind;
	rec->flags = flags;
	rec->channel = channel;
	rec->dst = dst;
	rec->src = f->rank;
	if (len)
		memcpy(rec + 1, buf, len);
}

/* A record into the ring toward dst (its direct ring for an item to a
 * local rank that has one, else the TX ring: direct_to). */
static int put_rec(struct ferry *f, struct dring *d, uint8_t kind, uint8_t flags, uint32_t dst, uint16_t channel,
		   const void *buf, uint32_t len, int block)
{
	struct proto_rec *rec;
	int ret = reserve(f, d, len, block, &rec);

	if (ret != 0)
		return ret == 1 ? 0 : ret;
	rec_write(f, rec, kind, flags, dst, channel, buf, len);
	publish(f, d);
	return 0;
}

/* --- FERRY_BATCH ---
 *
 * Ownership: f->batch[r].buf belongs to the handle (batch_free); a batch is
 * open (its rank in f->batch_open) exactly while fill > 0.  What leaves the
 * buffer leaves from its front, as one record (the whole batch, or the
 * records before a run that goes dense: batch_redense), and what stays is
 * after it, so that the order of one rank's items is the order of its
 * records in the ring.
 *
 * Dense first.  A batch opens dense (proto/ring.h "Dense batches": 8 bytes
 * a record where item records take 24 for 8-byte items) with its first
 * item's length and channel, and stays so while its items have them.  An
 * item of another shape ends it: a dense batch of BATCH_DENSE_KEEP items or
 * more leaves (one DENSE record) and a new one opens with that item; a
 * shorter one is turned into item records in place, where they fit, and
 * the batch goes on as records (a BATCH record: proto/ring.h "Batches")
 * until it is full, leaves, or ends in BATCH_DENSE_KEEP records of one
 * shape: then the records before those leave (a BATCH record) and the
 * batch goes on dense with them (batch_redense; where the ring has no room
 * for that now, it goes on as records).  So a stream of one shape goes
 * dense throughout, runs of one shape go dense where they are long (a lone
 * item of another shape, as an acknowledgement among updates, costs a
 * record or two, not the rest of the batch), and a stream of mixed
 * lengths pays a dense header once per batch.  Either way the items of
 * one rank leave in the order sent. */

static_assert(FERRY_BATCH_ITEM <= PROTO_BATCH_ITEM_MAX, "a batched item fits a batch");
static_assert(FERRY_BATCH_ITEM <= PROTO_DENSE_ITEM_MAX && FERRY_BATCH_ITEM < 512, "a batched item fits a dense batch");

/* The key of a dense batch of items of len bytes on channel (len <=
 * FERRY_BATCH_ITEM): never 0. */
#define BATCH_DENSE_KEY(len, channel) ((uint32_t)(len) | (uint32_t)(channel) << 9 | 1u << 31)
#define BATCH_DENSE_KEEP 8u

static void batch_close(struct ferry *f, uint32_t dst)
{
	struct batch *b = &f->batch[dst];
	uint32_t last = f->batch_open[--f->nbatch_open];

	f->batch_open[b->open_idx] = last;
	f->batch[last].open_idx = b->open_idx;
	b->fill = 0;
	b->key = 0;
}

/* The payload bytes a ring reserves for bytes of item records toward a
 * rank: in its direct ring d the records as they are (a reservation of
 * bytes - 16 payload bytes is bytes in one piece), in the TX ring one BATCH
 * record holding them. */
static inline uint32_t records_len(const struct dring *d, uint32_t bytes)
{
	return d ? bytes - (uint32_t)sizeof(struct proto_rec) : bytes;
}

/* Writes bytes of item records from recs at rec, reserved as records_len
 * says in the ring toward dst (d: its direct ring, or NULL), and publishes
 * them. */
static void records_write(struct ferry *f, struct dring *d, uint32_t dst, struct proto_rec *rec, const uint8_t *recs,
			  uint32_t bytes)
{
	if (d)
		memcpy(rec, recs, bytes);
	else
		rec_write(f, rec, PROTO_REC_BATCH, 0, dst, 0, recs, bytes);
	publish(f, d);
}

/* Hands rank dst's batch to the daemon (if it holds anything), or, for a
 * rank with a direct ring, straight into that ring: a dense batch as its
 * DENSE record (its count written into its header now), item records as
 * they are (they are already as the receiver reads them: proto/ring.h
 * "Batches"), a reservation of fill - 16 payload bytes being fill bytes in
 * one piece. */
static int batch_push(struct ferry *f, uint32_t dst, int block)
{
	struct batch *b = &f->batch[dst];
	struct dring *d;
	struct proto_rec *rec;
	int ret;

	if (!b->fill)
		return 0;
	d = direct_to(f, dst);
	if (b->key) {
		uint64_t h = (b->key & 0x1ff) | (uint64_t)((b->key >> 9) & 0xffff) << 16 | (uint64_t)b->count << 32;

		memcpy(b->buf, &h, sizeof(h));
		ret = put_rec(f, d, PROTO_REC_DENSE, 0, dst, 0, b->buf, b->fill, block);
	} else if ((ret = reserve(f, d, records_len(d, b->fill), block, &rec)) == 0) {
		records_write(f, d, dst, rec, b->buf, b->fill);
	}
	if (ret >= 0) {
		batch_close(f, dst);
		ret = 0;
	}
	return ret;
}

/* The rest of the large item (f->large) into the ring, piece by piece. */
static int large_push(struct ferry *f, int block)
{
	while (f->large_left) {
		uint32_t done = f->large_at, piece = f->large_left < PROTO_FRAG_BYTES ? f->large_left : PROTO_FRAG_BYTES;
		uint8_t frag = (uint8_t)((done / PROTO_FRAG_BYTES) << 1);      /* PROTO_REC_FRAG */
		const uint8_t *p = f->large + (done - f->large_base);
		int ret = put_rec(f, direct_to(f, f->large_dst), PROTO_REC_ITEM,
				  frag | (piece < f->large_left ? PROTO_REC_MORE : 0), f->large_dst, f->large_channel,
				  p, piece, block);

		if (ret < 0)
			return ret;
		f->large_at += piece;
		f->large_left -= piece;
	}
	free(f->large);
	f->large = NULL;
	return 0;
}

int out_flush(struct ferry *f, int block)
{
	int ret;

	f->recv_unflushed = 0;
	if (f->large_left && (ret = large_push(f, block)) < 0)
		return ret;
	while (f->nbatch_open)
		if ((ret = batch_push(f, f->batch_open[f->nbatch_open - 1], block)) < 0)
			return ret;
	if (f->done_held) {
		/* The end of the step into every direct ring, after this
		 * step's items there and before DONE (recv.c, "Steps and
		 * direct rings"): once the step completes, every marker is
		 * in its ring. */
		while (f->dr && f->dr->mark_next < f->dr->n) {
			if ((ret = put_rec(f, &f->dr->out[f->dr->mark_next], PROTO_REC_STEP, 0, f->step, 0, NULL, 0,
					   block)) < 0)
				return ret;
			f->dr->mark_next++;
		}
		if ((ret = put_rec(f, NULL, PROTO_REC_DONE, 0, 0, 0, NULL, 0, block)) < 0)
			return ret;
		f->done_held = 0;
		if (f->dr)
			f->dr->mark_next = 0;
	}
	return 0;
}

int out_arm(struct ferry *f)
{
	int ret;

	if (!out_pending(f))
		return 0;
	ret = out_flush(f, 0);
	if (ret == 0) {
		out_disarm(f);
		return 1;       /* they left: what the caller waits for may follow */
	}
	if (ret != -EAGAIN)
		return ret;
	out_disarm(f);  /* (a ring armed before may not be the one that refuses now) */
	if (ring_producer_sleep(want_ring(f), f->want_room))
		return 1;
	f->tx_armed = 1;
	f->armed_out = want_ring(f);
	return 0;
}

void out_disarm(struct ferry *f)
{
	if (f->tx_armed) {
		ring_producer_awake(f->armed_out);
		f->tx_armed = 0;
	}
}

void batch_free(struct ferry *f)
{
	free(f->large);
	f->large = NULL;
	f->large_left = 0;
	for (uint32_t r = 0; f->batch && r < f->size; r++)
		free(f->batch[r].buf);
	free(f->batch);
	free(f->batch_open);
	f->batch = NULL;
	f->batch_open = NULL;
}

/* Writes the record of an item (fp bytes: its footprint) for rank dst at
 * p, in a batch: what ferry_send's fast path and batch_add both do. */
static inline void batch_write(struct ferry *f, uint8_t *p, uint32_t fp, uint32_t dst, uint32_t channel,
			       const void *buf, size_t len)
{
	uint64_t w0 = len | (uint64_t)PROTO_REC_ITEM << 32 | (uint64_t)channel << 48;
	uint64_t w1 = dst | f->src_word, zero = 0;

	/* The padding zeroed first (the receiver sees it: no stale bytes of
	 * ours): the header or the payload overwrites all of that word but
	 * the padding. */
	memcpy(p + fp - 8, &zero, 8);
	memcpy(p, &w0, 8);
	memcpy(p + 8, &w1, 8);
	proto_copy(p + sizeof(struct proto_rec), buf, len);
}

/* Writes an item of len bytes into a dense batch at p (its stride: the
 * padding zeroed, as in batch_write). */
static inline void dense_write(uint8_t *p, const void *buf, size_t len)
{
	uint64_t zero = 0;

	if (len & 7)
		memcpy(p + (len & ~(size_t)7), &zero, 8);
	proto_copy(p, buf, len);
}

/* Rank dst's dense batch b, of fewer items than BATCH_DENSE_KEEP, as item
 * records in place, if they and a record of fp bytes fit: from the last
 * item to the first, since each moves up (item i from 8 + i x S to 16 +
 * i x (16 + S)), its header written after it moved.  Returns 1 if done. */
static int dense_to_records(struct ferry *f, struct batch *b, uint32_t dst, uint32_t fp)
{
	uint32_t len = b->key & 0x1ff, stride = (len + 7) & ~7u, rfp = (uint32_t)sizeof(struct proto_rec) + stride;
	uint64_t w0 = len | (uint64_t)PROTO_REC_ITEM << 32 | (uint64_t)((b->key >> 9) & 0xffff) << 48;
	uint64_t w1 = dst | f->src_word;

	if (b->count * rfp + fp > f->batch_cap)
		return 0;
	for (uint32_t i = b->count; i-- > 0;) {
		uint8_t *r = b->buf + i * rfp;

		memmove(r + sizeof(struct proto_rec), b->buf + sizeof(struct proto_dense) + i * stride, stride);
		memcpy(r, &w0, 8);
		memcpy(r + 8, &w1, 8);
	}
	b->fill = b->count * rfp;
	b->run_key = b->key;
	b->run = b->count;
	b->key = 0;
	return 1;
}

/* How many items of stride bytes a dense batch takes.  (More than
 * BATCH_DENSE_KEEP wherever batch_redense runs: its records, 16 + stride
 * bytes each, and one before them fit in batch_cap.) */
static inline uint32_t dense_room(const struct ferry *f, uint32_t stride)
{
	uint32_t room = stride ? (f->batch_cap - (uint32_t)sizeof(struct proto_dense)) / stride : PROTO_DENSE_COUNT_MAX;

	return room < PROTO_DENSE_COUNT_MAX ? room : PROTO_DENSE_COUNT_MAX;
}

/* Opens rank dst's batch b (empty) dense, for items of key's shape. */
static void dense_open(struct ferry *f, struct batch *b, uint32_t dst, uint32_t key)
{
	uint32_t stride = ((key & 0x1ff) + 7) & ~7u;

	b->open_idx = f->nbatch_open;
	f->batch_open[f->nbatch_open++] = dst;
	b->key = key;
	b->count = 0;
	b->room = dense_room(f, stride);
	b->fill = sizeof(struct proto_dense);
}

/* Rank dst's batch of records, which ends in BATCH_DENSE_KEEP records of
 * one shape (b->run_key): the records before them leave now, as a BATCH
 * record (in the direct ring: as they are), if the ring has room for them
 * without waiting, and those BATCH_DENSE_KEEP become a dense batch, each
 * payload moved down to its place (item i from P + i x (16 + S) + 16 to
 * 8 + i x S, P >= 16: always down, so in increasing i).  Nothing changes
 * where there is no room (the batch goes on as records; another try after
 * BATCH_DENSE_KEEP more of the shape): this is only a saving, and the item
 * that made the run is already the caller's success. */
__attribute__((noinline))
static void batch_redense(struct ferry *f, uint32_t dst)
{
	struct batch *b = &f->batch[dst];
	struct dring *d = direct_to(f, dst);
	uint32_t key = b->run_key, len = key & 0x1ff, stride = (len + 7) & ~7u;
	uint32_t rfp = (uint32_t)sizeof(struct proto_rec) + stride, part = b->fill - BATCH_DENSE_KEEP * rfp;
	struct proto_rec *rec;

	b->run = 0;
	if (f->dead || ring_reserve(d ? &d->r : &f->tx, records_len(d, part), &rec))
		return;
	records_write(f, d, dst, rec, b->buf, part);
	for (uint32_t i = 0; i < BATCH_DENSE_KEEP; i++)
		memmove(b->buf + sizeof(struct proto_dense) + i * stride,
			b->buf + part + i * rfp + sizeof(struct proto_rec), stride);
	/* (the batch stays open: its place in batch_open is kept) */
	b->key = key;
	b->count = BATCH_DENSE_KEEP;
	b->room = dense_room(f, stride) - BATCH_DENSE_KEEP;
	b->fill = (uint32_t)sizeof(struct proto_dense) + BATCH_DENSE_KEEP * stride;
}

/* A record of key's shape was written at the end of rank dst's batch of
 * records b: counts the run it ends, and goes dense at BATCH_DENSE_KEEP. */
static inline void records_note(struct ferry *f, struct batch *b, uint32_t dst, uint32_t key)
{
	if (b->run_key != key) {
		b->run_key = key;
		b->run = 1;
	} else if (__builtin_expect(++b->run >= BATCH_DENSE_KEEP, 0)) {
		batch_redense(f, dst);
	}
}

/* A small item into rank dst's batch: the batch goes first if it is full,
 * or a dense one of another shape (see above). */
static int batch_add(struct ferry *f, uint32_t dst, uint16_t channel, const void *buf, uint32_t len)
{
	struct batch *b = &f->batch[dst];
	uint32_t fp = (uint32_t)ring_footprint(len), key = BATCH_DENSE_KEY(len, channel), stride = (len + 7) & ~7u;
	int ret;

	if (!b->buf && !(b->buf = malloc(f->batch_cap)))
		return conn_seterr(-ENOMEM, "out of memory for a batch");
	if (b->fill && b->key && b->key != key && b->count < BATCH_DENSE_KEEP)
		dense_to_records(f, b, dst, fp);
	if (b->fill && (b->key ? b->key != key || !b->room : b->fill + fp > f->batch_cap) &&
	    (ret = batch_push(f, dst, f->flags & FERRY_BLOCKING)) < 0)
		return ret;
	if (!b->fill)
		dense_open(f, b, dst, key);
	if (b->key) {
		dense_write(b->buf + b->fill, buf, len);
		b->fill += stride;
		b->room--;
		b->count++;
	} else {
		batch_write(f, b->buf + b->fill, fp, dst, channel, buf, len);
		b->fill += fp;
		records_note(f, b, dst, key);
	}
	return 0;
}

static int send_slow(ferry_t *f, uint32_t dst, uint32_t channel, const void *buf, size_t len);

/* Whether an item may go into rank dst's open batch without send_slow: at
 * most FERRY_BATCH_ITEM - 1 bytes, a valid channel and rank, and nothing
 * (a finished step, a dead handle, a large item's rest) that goes first. */
static inline int batch_fits(const struct ferry *f, uint32_t dst, uint32_t channel, size_t len)
{
	static_assert(FERRY_BATCH_ITEM == 1u << 8 && FERRY_MAX_CHANNEL == 0xffff, "one test checks both");
	return ((len >> 8) | (channel >> 16)) == 0 && dst < f->size && !(f->step_done | f->dead | f->large_left);
}

/* FERRY_BATCH's way when the item does not go into an open dense batch of
 * its shape: into an open batch of item records with room, else
 * send_slow (a batch to open, to change or to hand over, items of
 * FERRY_BATCH_ITEM bytes exactly, errors). */
__attribute__((noinline))
static int send_batched_records(ferry_t *f, uint32_t dst, uint32_t channel, const void *buf, size_t len)
{
	struct batch *b;
	uint32_t fp;

	if (__builtin_expect(batch_fits(f, dst, channel, len), 1)) {
		b = &f->batch[dst];
		fp = (uint32_t)ring_footprint((uint32_t)len);
		if (b->key == 0 && b->fill != 0 && b->fill + fp <= f->batch_cap) {
			batch_write(f, b->buf + b->fill, fp, dst, channel, buf, len);
			b->fill += fp;
			records_note(f, b, dst, BATCH_DENSE_KEY(len, channel));
			return 0;
		}
	}
	return send_slow(f, dst, channel, buf, len);
}

/* FERRY_BATCH's fast path: the item into its rank's open dense batch of
 * its shape with room, in this process's memory (no cache line shared with
 * the daemon).  Everything else takes send_batched_records, out of line:
 * inlined, its paths made this one save and restore six registers at every
 * call (a fifth of ferry_send's instructions). */
static inline int send_batched(ferry_t *f, uint32_t dst, uint32_t channel, const void *buf, size_t len)
{
	struct batch *b;
	uint32_t fill;

	if (__builtin_expect(batch_fits(f, dst, channel, len), 1)) {
		b = &f->batch[dst];
		fill = b->fill;
		if (__builtin_expect(b->key == BATCH_DENSE_KEY(len, channel) && b->room != 0, 1)) {
			/* (key != 0: open.  The batch's counts first: after
			 * them nothing is live across the copy's call of
			 * memcpy for items above 64 bytes, and nothing is
			 * saved.) */
			uint8_t *p = b->buf + fill;

			b->fill = fill + (((uint32_t)len + 7) & ~7u);
			b->room--;
			b->count++;
			dense_write(p, buf, len);
			return 0;
		}
	}
	return send_batched_records(f, dst, channel, buf, len);
}

/* A small item for a local rank, straight into its direct ring (no
 * daemon on the way: proto/direct.h).  Published without a fence while
 * its reader offers to run membarrier for us (proto/ring.h "Late offers"). */
__attribute__((noinline))
static int send_direct(ferry_t *f, struct dring *d, uint32_t dst, uint32_t channel, const void *buf, size_t len)
{
	struct proto_rec *rec = ring_reserve_fast(&d->r, (uint32_t)len);

	if (__builtin_expect(rec != NULL, 1)) {
		uint64_t w0 = len | (uint64_t)PROTO_REC_ITEM << 32 | (uint64_t)channel << 48;
		uint64_t w1 = dst | f->src_word;

		memcpy(rec, &w0, 8);
		memcpy((uint8_t *)rec + 8, &w1, 8);
		proto_copy((uint8_t *)(rec + 1), buf, len);
		if (ring_publish(&d->r))
			conn_wake(d->efd);
		return 0;
	}
	return send_slow(f, dst, channel, buf, len);
}

/* Without FERRY_BATCH: the item straight into the TX ring. */
__attribute__((noinline))
static int send_ring(ferry_t *f, uint32_t dst, uint32_t channel, const void *buf, size_t len)
{
	struct proto_rec *rec;

	/* Fast path, the reason ferry exists: a small item, room in the ring.
	 * Everything unusual (errors, a full ring, the end of the ring, large
	 * items) takes the general way, kept out of line so that this path
	 * saves no registers it does not use. */
	static_assert(PROTO_FRAG_BYTES == 1u << 16 && FERRY_MAX_CHANNEL == 0xffff, "one shift checks both");
	/* (An item of exactly PROTO_FRAG_BYTES takes the general way.) */
	if (__builtin_expect(((len | channel) >> 16) == 0 && dst < f->size &&
			     !(f->step_done | f->dead | f->large_left), 1)) {
		/* (A rank on this node with a direct ring: its ring, not ours.) */
		if (__builtin_expect(f->direct_of && f->direct_of[dst], 0))
			return send_direct(f, &f->dr->out[f->direct_of[dst] - 1], dst, channel, buf, len);
		if ((rec = ring_reserve_fast(&f->tx, (uint32_t)len)) != NULL) {
			/* The header as two words: len, kind, flags 0, channel; dst, us. */
			uint64_t w0 = len | (uint64_t)PROTO_REC_ITEM << 32 | (uint64_t)channel << 48;
			uint64_t w1 = dst | f->src_word;

			memcpy(rec, &w0, 8);
			memcpy((uint8_t *)rec + 8, &w1, 8);
			proto_copy((uint8_t *)(rec + 1), buf, len);
			if (__builtin_expect(ring_publish(&f->tx), 0))
				conn_wake(f->efd_daemon);
			return 0;
		}
	}
	return send_slow(f, dst, channel, buf, len);
}

/* The two ways in, each with nothing to save: calls in tail position. */
FERRY_API int ferry_send(ferry_t *f, uint32_t dst, uint32_t channel, const void *buf, size_t len)
{
	NOT_ON_GROUP(f);
	if (f->batch)
		return send_batched(f, dst, channel, buf, len);
	return send_ring(f, dst, channel, buf, len);
}

__attribute__((noinline))
static int send_slow(ferry_t *f, uint32_t dst, uint32_t channel, const void *buf, size_t len)
{
	const uint8_t *p = buf;
	int ret;

	if (f->step_done)
		return conn_seterr(-EBUSY, "step %u ended with ferry_done: call ferry_step_wait before sending again",
				   f->step);
	if (dst >= f->size)
		return conn_seterr(-EINVAL, "rank %u is outside the job (size %u)", dst, f->size);
	if (channel > FERRY_MAX_CHANNEL)
		return conn_seterr(-EINVAL, "channel %u is above %u", channel, FERRY_MAX_CHANNEL);
	if (len > FERRY_MAX_ITEM)
		return conn_seterr(-EMSGSIZE, "item of %zu bytes is above FERRY_MAX_ITEM (%u)", len, FERRY_MAX_ITEM);
	if (f->dead)
		return f->dead;
	/* The rest of a large item goes first; nothing passes it. */
	if (f->large_left && (ret = large_push(f, f->flags & FERRY_BLOCKING)) < 0) {
		if (ret == -EAGAIN)
			f->want_room = f->large_left < PROTO_FRAG_BYTES ? f->large_left : PROTO_FRAG_BYTES;
		return ret;
	}
	if (f->batch) {
		if (len <= FERRY_BATCH_ITEM)
			return batch_add(f, dst, (uint16_t)channel, buf, (uint32_t)len);
		/* Too big for a batch: after what the batch holds. */
		if ((ret = batch_push(f, dst, f->flags & FERRY_BLOCKING)) < 0)
			return ret;
	}
	if (len <= PROTO_FRAG_BYTES)
		return put_rec(f, direct_to(f, dst), PROTO_REC_ITEM, 0, dst, (uint16_t)channel, buf, (uint32_t)len,
			       f->flags & FERRY_BLOCKING);
	/* A large item: once its first piece is in, the rest must follow
	 * before anything else (the receiver reassembles the pieces of one
	 * sender in order).  With FERRY_BLOCKING they go in now; else what
	 * does not fit yet is copied and goes in as the daemon makes room
	 * (out_flush): waiting here, not receiving, could wait for ever on a
	 * daemon that waits for us to take items (our own, even). */
	if (!(f->flags & FERRY_BLOCKING)) {
		void *rest = malloc(len - PROTO_FRAG_BYTES);

		if (!rest)
			return conn_seterr(-ENOMEM, "out of memory for a large item");
		ret = put_rec(f, direct_to(f, dst), PROTO_REC_ITEM, PROTO_REC_MORE, dst, (uint16_t)channel, p,
			      PROTO_FRAG_BYTES, 0);
		if (ret < 0) {
			free(rest);
			return ret;
		}
		memcpy(rest, p + PROTO_FRAG_BYTES, len - PROTO_FRAG_BYTES);
		f->large = rest;
		f->large_base = f->large_at = PROTO_FRAG_BYTES;
		f->large_left = (uint32_t)(len - PROTO_FRAG_BYTES);
		f->large_dst = dst;
		f->large_channel = (uint16_t)channel;
		ret = large_push(f, 0);
		return ret == -EAGAIN ? 0 : ret;
	}
	ret = put_rec(f, direct_to(f, dst), PROTO_REC_ITEM, PROTO_REC_MORE, dst, (uint16_t)channel, p,
		      PROTO_FRAG_BYTES, 1);
	if (ret < 0)
		return ret;
	for (size_t off = PROTO_FRAG_BYTES; off < len; off += PROTO_FRAG_BYTES) {
		uint32_t piece = (uint32_t)(len - off < PROTO_FRAG_BYTES ? len - off : PROTO_FRAG_BYTES);
		uint8_t frag = (uint8_t)((off / PROTO_FRAG_BYTES) << 1);     /* PROTO_REC_FRAG */

		ret = put_rec(f, direct_to(f, dst), PROTO_REC_ITEM, frag | (off + piece < len ? PROTO_REC_MORE : 0),
			      dst, (uint16_t)channel, p + off, piece, 1);
		if (ret < 0)
			return ret;
	}
	return 0;
}

FERRY_API int ferry_flush(ferry_t *f)
{
	int ret;

	NOT_ON_GROUP(f);
	if (out_pending(f) && (ret = out_flush(f, f->flags & FERRY_BLOCKING)) < 0)
		return ret;
	/* Nothing went into the TX ring since the last FLUSH (items for
	 * ranks with direct rings are where they go already): no FLUSH, and
	 * no daemon woken for nothing (a same-node ping-pong would wake it
	 * at every turn). */
	if (f->dead)
		return f->dead;
	if (f->tx.head == f->flushed_head)
		return 0;
	ret = put_rec(f, NULL, PROTO_REC_FLUSH, 0, 0, 0, NULL, 0, f->flags & FERRY_BLOCKING);
	if (ret == 0)
		f->flushed_head = f->tx.head;
	return ret;
}

FERRY_API int ferry_done(ferry_t *f)
{
	int ret;

	NOT_ON_GROUP(f);
	if (f->step_done)
		return conn_seterr(-EALREADY, "ferry_done was already called in step %u", f->step);
	if (f->dead)
		return f->dead;
	/* The DONE record goes in after everything this rank sent in the
	 * step (the daemon counts its items up to it): now if there is room,
	 * else from ferry_step_wait (or ferry_recv, ferry_poll), which
	 * receive while they wait.  Waiting here, not receiving, could wait
	 * for ever on a daemon that waits for us to take items. */
	f->step_done = 1;
	f->done_held = 1;
	ret = out_flush(f, 0);
	return ret == -EAGAIN ? 0 : ret;
}

/* ferry_close: hands over what the process holds and a FLUSH, as room
 * comes, then waits until the daemon has taken every TX record; all within
 * timeout_ms (< 0: no limit).  Items that arrive meanwhile are dropped
 * (rx_discard): a closing endpoint takes no more, and the daemon may need
 * room in our RX ring (for our own items, even) before it can take ours. */
int tx_drain(struct ferry *f, int timeout_ms)
{
	uint64_t deadline = timeout_ms < 0 ? 0 : proto_now_ms() + (uint64_t)timeout_ms;
	int sent = 0;

	for (;;) {
		int ret, wait, empty = 0;

		if (!sent) {
			ret = out_flush(f, 0);
			if (ret == 0)
				ret = put_rec(f, NULL, PROTO_REC_FLUSH, 0, 0, 0, NULL, 0, 0);
			if (ret == 0)
				sent = 1;
			else if (ret != -EAGAIN)
				return ret;
		}
		rx_discard(f);
		/* Sleep until the daemon takes records (room, or all taken). */
		if (sent ? (empty = ring_producer_sleep_empty(&f->tx))
			 : ring_producer_sleep(want_ring(f), f->want_room)) {
			if (!empty)
				continue;
			/* (Taken: proto/ring.h "Taken"; the tail may lag.) */
			if (f->tx.tail != f->tx.head &&
			    atomic_load_explicit(&f->tx.sh->taken, memory_order_relaxed) != f->tx.head)
				return conn_seterr(-EPROTO, "ferryd published an impossible TX tail");
			return 0;
		}
		answer_withdrawals(f);
		wait = conn_wait_ms(deadline, timeout_ms < 0);
		ret = wait == 0 ? -ETIMEDOUT : conn_wait(f, wait);
		ring_producer_awake(sent ? &f->tx : want_ring(f));
		if (ret == -ETIMEDOUT && !sent && f->want_dr)
			return conn_seterr(-ETIMEDOUT, "rank %u (on this node) took no more items within %d ms",
					   f->want_dr->rank, timeout_ms);
		if (ret == -ETIMEDOUT)
			return conn_seterr(-ETIMEDOUT, "ferryd did not take the last items within %d ms", timeout_ms);
		if (ret < 0)
			return ret;
	}
}
