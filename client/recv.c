/* client/recv.c - libferry's receiving side: items out of the RX ring,
 * large items reassembled from their pieces, and the end of a step, during
 * which arriving items wait in the stash.  See internal.h.
 */
#include "internal.h"
#include "../proto/clock.h"
#include "../proto/ring.h"

#include <errno.h>
#include <linux/membarrier.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

/* How often an empty ferry_recv(..., 0) that finds nothing new asks the
 * socket after all (the daemon may have gone away, or a stale eventfd count
 * keeps ferry_fd() readable): once a millisecond has passed and there were
 * that many calls (a yield can take longer than a millisecond where many
 * processes share the cores), or at most every RECV_CHECK_MAX_NS (a program
 * that polls now and then learns of a dead daemon within that). */
#define RECV_CHECK_NS      1000000u
#define RECV_CHECK_CALLS   64u
/* FERRY_BATCH: ferry_recv pushes batches at least every this many calls. */
#define RECV_BATCH_CALLS   16u
#define RECV_CHECK_MAX_NS  50000000u

/* A large item being put back together from its fragments.  Items of one
 * source arrive in the order it sent them, and the fragments of one item one
 * after the other, so one entry per source is enough.  A FAIL saying that a
 * source left leaves its entry alone: the rest of what it sent can still
 * come after the FAIL (FAIL comes from the job's home, the items straight
 * from the source's node, and either may be faster), and completes the item.
 * If its daemon could not send the rest (items_lost there), the entry stays
 * until ferry_close: no other process can take that rank in a job that has
 * started (its home refuses it).
 *
 * Fragments can be lost on the way (a lost link drops the data passing
 * through toward it, whole items at a time, fwd/agg.h; a restarted daemon
 * what it had queued; their jobs fail), so nothing may be glued across a
 * gap: every fragment carries its index in its item (PROTO_REC_FRAG).  A new
 * item's start (index 0: a whole item, or a first fragment) while a partial
 * one of that source waits means the partial one's rest was lost: it is
 * dropped.  A later fragment that is not the next one the partial item
 * needs (or with none waiting) is part of an item whose start or middle was
 * lost: the partial one is dropped and the fragment skipped, and so are the
 * rest of that item's, which do not follow on either. */
struct reasm {
	struct reasm *next;
	uint32_t src;
	uint16_t channel;
	uint32_t next_frag;             /* the index the next fragment must have */
	uint8_t *buf;
	size_t len, cap;
};

/* Gives the room of what was read from d's ring (NULL: the RX ring) back,
 * waking its writer if it waits for room. */
static void release_ring(struct ferry *f, struct dring *d)
{
	if (!d) {
		if (ring_release(&f->rx))
			conn_wake(f->efd_daemon);
	} else if (ring_release(&d->r)) {
		conn_wake(d->efd);
	}
}

/* Gives back the room of everything read so far, in every ring. */
static void release_rings(struct ferry *f)
{
	if (f->region)
		release_ring(f, NULL);
	if (f->dr) {
		for (uint64_t t = f->dr->touched; t; t &= t - 1)
			release_ring(f, &f->dr->in[__builtin_ctzll(t)]);
		f->dr->touched = 0;
	}
}

/* Spare buffers.  A large item is reassembled in a buffer of its own, held
 * until the next ferry_release; freed then, the next item's buffer was a
 * new one, and above glibc's mmap threshold (128 KiB at first) a new
 * mapping whose every page faulted in, zeroed: at 256 KiB items a sixth of
 * the receiver's time (perf, make bench-bw).  So ferry_release keeps them,
 * up to RX_SPARE_BYTES, and an item that starts takes the newest.  The
 * bound is in bytes only: a receiver that fell behind takes many items in
 * one ferry_recv (64 of 256 KiB at every call in lent_pieces.sh, pausing 50
 * ms on 32 MiB rings), and a bound of 16 buffers freed the rest at every
 * release, to fault them in again at the next batch.  Ownership: a spare belongs to the handle
 * (rx_free frees it); once taken, to its reassembly, then to the held list. */
static void spare_put(struct ferry *f, void *buf, size_t cap)
{
	int keep = cap && f->spare_bytes + cap <= RX_SPARE_BYTES;

	if (keep && f->nspare == f->capspare) {
		size_t n = f->capspare ? f->capspare * 2 : 16;
		struct rxbuf *s = realloc(f->spare, n * sizeof(*s));

		if (s) {
			f->spare = s;
			f->capspare = n;
		} else {
			keep = 0;
		}
	}
	if (keep) {
		f->spare[f->nspare++] = (struct rxbuf){ buf, cap };
		f->spare_bytes += cap;
	} else {
		free(buf);
	}
}

FERRY_API void ferry_release(ferry_t *f)
{
	if (f->root)
		return;         /* a group's handle holds no items */
	for (size_t i = 0; i < f->nheld; i++)
		spare_put(f, f->held[i].buf, f->held[i].cap);
	f->nheld = 0;
	f->outstanding = 0;
	release_rings(f);
}

/* Whether one of the n items points into ring r. */
static int ring_items_in(const struct ferry_item *items, int n, const struct ring *r)
{
	for (int i = 0; i < n; i++)
		if ((const uint8_t *)items[i].data >= r->data && (const uint8_t *)items[i].data < r->data + r->size)
			return 1;
	return 0;
}

/* Steps and direct rings.  Through ferryd, a receiver's RX ring holds
 * every item of step s before the STEP record of s, and the items of s+1
 * after it, so items come out step by step.  Direct rings are read side by
 * side with it, so each sender marks the end of its part of step s in each
 * of its direct rings (a STEP record, dst s, written at ferry_done before
 * its DONE: send.c), and the receiver reads a ring past the items of step s
 * (at: the last marker read from it) only once the step has completed here
 * and every ring has given all of it:
 *
 *   low = the smallest at over the direct rings;
 *   direct ring j is open while at_j == low and at_j <= completed;
 *   the RX ring is open while completed <= low.
 *
 * No deadlock: when the RX ring is closed (it said step completed > low),
 * every direct ring at low holds its marker low + 1 (the step completed,
 * so every local rank's DONE, hence its markers, came first) and is open;
 * when a direct ring is closed, either one at low is open, or the RX ring
 * is (completed < at_j) and brings the STEP record.  A job that fails
 * never completes the step: the rings of ranks that did not end it stay
 * open, as their items keep coming; a program that uses no steps writes no
 * markers, and every ring stays open. */
static uint32_t direct_low(const struct direct *dr)
{
	uint32_t low = UINT32_MAX;

	for (uint32_t j = 0; dr && j < dr->n; j++)
		if (dr->in[j].at < low)
			low = dr->in[j].at;
	return low;
}

static int dring_open(const struct ferry *f, const struct dring *d, uint32_t low)
{
	return d->at == low && d->at <= f->completed;
}

int rx_readable(const struct ferry *f)
{
	uint32_t low = direct_low(f->dr);

	if (f->completed <= low && ring_readable(&f->rx))
		return 1;
	for (uint32_t j = 0; f->dr && j < f->dr->n; j++)
		if (dring_open(f, &f->dr->in[j], low) && ring_readable(&f->dr->in[j].r))
			return 1;
	return 0;
}

/* Withdraws our offer to the writers of our direct rings, for good: each
 * fences from its next publish, or answers when it next sleeps
 * (answer_withdrawals).  Until each has, we keep running membarrier. */
static void direct_withdraw(struct direct *dr)
{
	for (uint32_t j = 0; j < dr->n; j++)
		ring_consumer_withdraw_fenceless(&dr->in[j].r, 1);
	dr->fences = 0;
}

/* The fence of rx_sleep_some where a writer may publish without one: our
 * offer's half (proto/ring.h "Late offers"), judged as ring_judge says
 * (each item read from a direct ring was a publish).
 *
 * The kernel said it has the command when we offered; if it fails anyway
 * (a seccomp filter the program installed since), a writer's publish may
 * stay unseen while we sleep, with no way to tell: we withdraw the offer
 * and the handle ends with the reason rather than miss items. */
static int direct_membarrier(struct ferry *f)
{
	struct direct *dr = f->dr;
	uint64_t t = proto_now_ns();
	int err;

	if (syscall(SYS_membarrier, MEMBARRIER_CMD_GLOBAL_EXPEDITED, 0, 0) < 0) {
		err = errno;
		direct_withdraw(dr);
		return f->dead = conn_seterr(-err, "membarrier, which the direct rings need once offered: %s",
					     strerror(err));
	}
	if (ring_judge(&dr->judge, proto_now_ns() - t, dr->items_in) && dr->fences)
		direct_withdraw(dr);
	return 0;
}

void answer_withdrawals(struct ferry *f)
{
	ring_producer_answer(&f->tx);
	for (uint32_t j = 0; f->dr && j < f->dr->n; j++)
		ring_producer_answer(&f->dr->out[j].r);
}

int rx_sleep(struct ferry *f)
{
	return rx_sleep_some(f, 0, 1);
}

int rx_sleep_some(struct ferry *f, uint64_t skip, int with_rx)
{
	uint32_t low;
	int came = 0, fenceless = 0;

	if (!f->dr) {
		ring_producer_answer(&f->tx);   /* (answer_withdrawals) */
		return with_rx ? ring_consumer_sleep(&f->rx) : 0;
	}
	/* Every flag, one fence, then every head (proto/ring.h "Wake-ups":
	 * the fence serves each ring's handshake).  Only the rings that
	 * count: what a closed ring gets is not to be read yet, and a
	 * writer running a step ahead would otherwise wake us at every
	 * item (and keep ferry_fd() readable for nothing).  A closed ring
	 * opens only through a record in an open one, which wakes us
	 * ("Steps and direct rings": while the RX ring is closed, a direct
	 * ring at low is open). */
	answer_withdrawals(f);
	low = direct_low(f->dr);
	if (with_rx && f->completed <= low)
		ring_consumer_arm(&f->rx);
	for (uint32_t j = 0; j < f->dr->n; j++)
		if (!(skip & (1ull << j)) && dring_open(f, &f->dr->in[j], low)) {
			ring_consumer_arm(&f->dr->in[j].r);
			/* (A writer that is gone publishes nothing more, and
			 * what it did is visible: it ended, and ferryd saw
			 * that before it marked the slot.) */
			fenceless |= ring_consumer_fenceless(&f->dr->in[j].r) &&
				     !atomic_load_explicit(&f->dr->gone[j], memory_order_acquire);
		}
	if (!fenceless) {
		atomic_thread_fence(memory_order_seq_cst);
	} else if (direct_membarrier(f) < 0) {
		rx_awake(f);
		return 1;       /* the handle is dead: the caller finds out */
	}
	if (with_rx && f->completed <= low)
		came = ring_consumer_check(&f->rx);
	for (uint32_t j = 0; j < f->dr->n; j++)
		if (!(skip & (1ull << j)) && dring_open(f, &f->dr->in[j], low))
			came |= ring_consumer_check(&f->dr->in[j].r);
	if (came)
		rx_awake(f);
	return came;
}

void rx_awake(struct ferry *f)
{
	ring_consumer_awake(&f->rx);
	for (uint32_t j = 0; f->dr && j < f->dr->n; j++)
		ring_consumer_awake(&f->dr->in[j].r);
}

static int collect(struct ferry *f, struct ferry_item *items, int max);

void rx_discard(struct ferry *f)
{
	struct ferry_item it[64];

	ferry_release(f);
	while (collect(f, it, 64) > 0)
		ferry_release(f);
}

void rx_free(struct ferry *f)
{
	while (f->reasm) {
		struct reasm *r = f->reasm;

		f->reasm = r->next;
		free(r->buf);
		free(r);
	}
	free(f->held);
	while (f->nspare)
		free(f->spare[--f->nspare].buf);
	free(f->spare);
	f->spare = NULL;
	f->capspare = 0;
	f->spare_bytes = 0;
	for (size_t i = f->stash_head; i < f->stash_len; i++)
		if (i + 1 == f->stash_len || f->stash[i + 1].c != f->stash[i].c)
			free(f->stash[i].c);    /* (each chunk's items lie together) */
	free(f->stash);
	f->stash = NULL;
	f->stash_head = f->stash_len = f->stash_cap = 0;
	f->stash_chunk = NULL;
	f->stash_bytes = 0;
}

static struct reasm **find_reasm(struct ferry *f, uint32_t src)
{
	struct reasm **pp = &f->reasm;

	while (*pp && (*pp)->src != src)
		pp = &(*pp)->next;
	return pp;
}

/* Drops the partial item of src (its rest was lost on the way). */
static void drop_reasm(struct ferry *f, uint32_t src)
{
	struct reasm **pp = find_reasm(f, src), *r = *pp;

	*pp = r->next;
	free(r->buf);
	free(r);
}

/* Keeps buf until the next ferry_release frees it (or keeps it as a spare:
 * cap, its size, not 0).  Returns 0 or -ENOMEM, without a message: one
 * caller still succeeds with the items it has. */
static int hold(struct ferry *f, void *buf, size_t cap)
{
	if (f->nheld == f->capheld) {
		size_t n = f->capheld ? f->capheld * 2 : 8;
		struct rxbuf *h = realloc(f->held, n * sizeof(*h));

		if (!h)
			return -ENOMEM;
		f->held = h;
		f->capheld = n;
	}
	f->held[f->nheld++] = (struct rxbuf){ buf, cap };
	return 0;
}

/* Adds a fragment; on the last one, moves the whole item to items[*n]. */
static int reassemble(struct ferry *f, const struct proto_rec *rec, const void *payload,
		      struct ferry_item *items, int *n)
{
	struct reasm **pp = find_reasm(f, rec->src), *r = *pp;
	uint32_t frag = PROTO_REC_FRAG(rec->flags);

	if (r && frag != 0 && frag != r->next_frag) {
		drop_reasm(f, rec->src);        /* a gap: see struct reasm */
		return 0;
	}
	if (!r && frag != 0)
		return 0;                       /* part of an item whose start was lost */
	if (r && frag == 0) {
		r->len = 0;                     /* a new item: the partial one lost its rest */
		r->channel = rec->channel;
	} else if (!r) {
		r = calloc(1, sizeof(*r));
		if (!r)
			return conn_seterr(-ENOMEM, "out of memory reassembling an item");
		r->src = rec->src;
		r->channel = rec->channel;
		if (f->nspare) {
			/* the newest spare (Spare buffers) */
			--f->nspare;
			r->buf = f->spare[f->nspare].buf;
			r->cap = f->spare[f->nspare].cap;
			f->spare_bytes -= r->cap;
		}
		r->next = f->reasm;
		f->reasm = r;
		pp = &f->reasm;
	}
	if (r->channel != rec->channel || r->len + rec->len > FERRY_MAX_ITEM)
		return conn_seterr(-EPROTO, "ferryd delivered inconsistent pieces of an item from rank %u", rec->src);
	if (r->len + rec->len > r->cap) {
		size_t cap = r->cap ? r->cap * 2 : 4 * PROTO_FRAG_BYTES;
		uint8_t *b;

		while (cap < r->len + rec->len)
			cap *= 2;
		b = realloc(r->buf, cap);
		if (!b)
			return conn_seterr(-ENOMEM, "out of memory reassembling an item");
		r->buf = b;
		r->cap = cap;
	}
	if (rec->len)   /* (r->buf is still NULL after empty pieces) */
		memcpy(r->buf + r->len, payload, rec->len);
	r->len += rec->len;
	r->next_frag = frag + 1;
	if (rec->flags & PROTO_REC_MORE)
		return 0;
	if (hold(f, r->buf, r->cap) < 0)
		return conn_seterr(-ENOMEM, "out of memory");
	items[*n] = (struct ferry_item){ .data = r->buf, .len = (uint32_t)r->len, .src = r->src,
					 .channel = r->channel };
	(*n)++;
	*pp = r->next;
	free(r);
	return 0;
}

/* The stash.  Items that arrive while the library waits (ferry_step_wait,
 * a blocking ferry_send) are copied out of the rings, so that the rings
 * keep moving, into chunks of 64 KiB one after the other (an item larger
 * than half a chunk gets one of its own), and handed out oldest first by
 * the next ferry_recv calls.  Ownership: a chunk belongs to the stash
 * until its last item is handed out; then to the held list, which frees
 * it at the next ferry_release, when none of its items may be used any
 * more.  Items of a chunk lie together in the stash, since only the
 * newest chunk (stash_chunk) takes new ones: a chunk whose last item is
 * handed out while it is the newest stops taking them.  (A malloc per
 * item, as before, was a tenth of the clients' time in the burst
 * all-to-all of make bench.) */
#define STASH_CHUNK_BYTES (64u << 10)

/* Moves items out of the stash (oldest first) into items[]. */
static int from_stash(struct ferry *f, struct ferry_item *items, int max)
{
	int n = 0;

	while (n < max && f->stash_head < f->stash_len) {
		struct stashed *e = &f->stash[f->stash_head];
		int last = f->stash_head + 1 == f->stash_len || e[1].c != e->c;

		/* On failure the item stays in the stash for the next call. */
		if (last && hold(f, e->c, 0) < 0)
			return n ? n : conn_seterr(-ENOMEM, "out of memory");
		if (last && e->c == f->stash_chunk)
			f->stash_chunk = NULL;
		f->stash_head++;
		f->stash_bytes -= e->it.len;
		items[n++] = e->it;
	}
	if (f->stash_head == f->stash_len)
		f->stash_head = f->stash_len = 0;
	return n;
}

/* Dense records.  A DENSE record (proto/ring.h "Dense batches") is handed
 * out item by item, as struct ferry_item pointing into the record.  A call
 * whose items[] fills up first stops inside it, and the ring's cursor
 * (f->rx_dense_at, d->dense_at) says how many of its items were handed
 * out: the record stays at the ring's tail, so that its room is not given
 * back (ferry_release gives back only what lies before the tail) until its
 * last item was handed out; the ferry_release after that gives it back.
 * Its header is read again at every call (one word) and checked against
 * the record and the cursor: a writer that changed it meanwhile breaks
 * its ring, nothing else.
 *
 * Takes items of the DENSE record whose payload (len bytes, inside the
 * ring) is at payload, from *at on, into items[0..max-1] (max >= 1), and
 * moves *at on (0: the record is all out).  Returns how many, or -1 if the
 * record is not valid. */
static inline int dense_take(const uint8_t *payload, uint32_t len, uint32_t src, uint32_t *at,
			     struct ferry_item *items, int max)
{
	uint64_t h = ring_word(payload);
	uint32_t k = proto_dense_check(h, len), i = *at, stride = proto_dense_stride(h), il = proto_dense_len(h);
	uint16_t ch = proto_dense_channel(h);
	const uint8_t *p;
	int m;

	if (!k || i >= k)
		return -1;
	m = k - i < (uint32_t)max ? (int)(k - i) : max;
	p = payload + sizeof(struct proto_dense) + (size_t)i * stride;
	for (int j = 0; j < m; j++, p += stride)
		items[j] = (struct ferry_item){ .data = p, .len = il, .src = src, .channel = ch };
	*at = i + (uint32_t)m == k ? 0 : i + (uint32_t)m;
	return m;
}

/* The common case of collect_ring, kept tight: whole items and dense
 * records, while no large item is being put together.  Reads the record
 * header as two words and checks what ring_peek checks and the source rank
 * (lo <= src < hi); stops at anything else, which collect_ring's general
 * way then takes.  *at is r's cursor (Dense records).  Returns the number
 * of items. */
static int collect_fast(struct ferry *f, struct ring *r, uint32_t *at, uint32_t lo, uint32_t hi,
			struct ferry_item *items, int max)
{
	const uint8_t *data = r->data;
	uint64_t size = r->size, tail = r->tail, head = r->head;
	uint32_t cur = *at;     /* (a register: set only on entry, a take that sets it ends the loop) */
	int n = 0;

	if (f->reasm)
		return 0;
	while (n < max) {
		uint64_t pos = tail & (size - 1), avail = head - tail, w0, w1, fp;
		uint32_t len, src;

		if (avail == 0 && ring_refresh_head(r, tail) == 0)
			avail = (head = r->head) - tail;
		if (avail < sizeof(struct proto_rec) || size - pos < sizeof(struct proto_rec))
			break;
		w0 = ring_word(data + pos);
		w1 = ring_word(data + pos + 8);
		len = (uint32_t)w0;
		src = (uint32_t)(w1 >> 32);
		fp = ring_footprint(len);
		if (((w0 >> 32) & 0xffff) == PROTO_REC_DENSE) {
			/* No flags, channel 0 (the items' is in the payload),
			 * of a rank it may come from, inside. */
			int m;

			if ((w0 >> 48) || len > PROTO_BATCH_MAX || fp > avail || fp > size - pos || src - lo >= hi - lo ||
			    (m = dense_take(data + pos + sizeof(struct proto_rec), len, src, at, items + n, max - n)) < 0)
				break;
			n += m;
			if (*at)
				break;          /* items[] is full */
			cur = 0;                /* (the record it pointed into is taken) */
			tail += fp;
			continue;
		}
		/* An item, no flags (whole), of a rank it may come from, inside
		 * (and no cursor: it points into a DENSE record at the tail). */
		if (cur || ((w0 >> 32) & 0xffff) != PROTO_REC_ITEM || len > PROTO_FRAG_BYTES || fp > avail ||
		    fp > size - pos || src - lo >= hi - lo)
			break;
		items[n].data = data + pos + sizeof(struct proto_rec);
		items[n].len = len;
		items[n].src = src;
		items[n].channel = (uint16_t)(w0 >> 48);
		n++;
		tail += fp;
	}
	r->tail = tail;
	return n;
}

/* Takes items out of the RX ring (d NULL), or out of the direct ring d,
 * which holds items of d's rank and its step markers, into items[n..max-1]
 * (items[0..n-1] are this call's so far, from any ring); returns the new
 * count.  Stops after a record that may close the ring ("Steps and direct
 * rings"), setting *gate. */
static int collect_ring(struct ferry *f, struct dring *d, struct ferry_item *items, int n, int max, int *gate)
{
	struct ring *r = d ? &d->r : &f->rx;
	uint32_t lo = d ? d->rank : 0, hi = d ? d->rank + 1 : f->size, *at = d ? &d->dense_at : &f->rx_dense_at;
	int n0 = n;

	n += collect_fast(f, r, at, lo, hi, items + n, max - n);

	while (n < max) {
		struct proto_rec rec;
		const void *payload;
		int ret = ring_peek_fast(r, &rec, &payload);

		if (ret == 0)
			ret = ring_peek(r, &rec, &payload);     /* empty, a PAD, not an item... */
		if (ret == 0)
			break;
		if (ret < 0)
			return f->dead = d ? conn_seterr(-EPROTO, "rank %u wrote an invalid record into its direct ring",
							 d->rank)
					   : conn_seterr(-EPROTO, "ferryd wrote an invalid record into the RX ring");
		if (rec.kind == PROTO_REC_DENSE) {
			/* (Dense records: consumed once all is out.) */
			int m;

			if (rec.src - lo >= hi - lo || rec.channel || rec.len > PROTO_BATCH_MAX ||
			    (m = dense_take(payload, rec.len, rec.src, at, items + n, max - n)) < 0)
				return f->dead = d ? conn_seterr(-EPROTO, "rank %u wrote an invalid dense batch into its "
								 "direct ring", d->rank)
						   : conn_seterr(-EPROTO, "ferryd wrote an invalid dense batch into the "
								 "RX ring");
			/* New whole items: a partial one of that rank lost its rest. */
			if (f->reasm && *find_reasm(f, rec.src))
				drop_reasm(f, rec.src);
			n += m;
			if (*at)
				break;          /* items[] is full */
			ring_consume(r, &rec);
			continue;
		}
		if (*at)        /* the record its cursor points into is no longer DENSE */
			return f->dead = d ? conn_seterr(-EPROTO, "rank %u changed a dense batch in its direct ring "
							 "while it was being read", d->rank)
					   : conn_seterr(-EPROTO, "the dense batch at the RX tail changed while it "
							 "was being read");
		ring_consume(r, &rec);
		if (d && rec.kind == PROTO_REC_STEP && rec.src == d->rank && rec.dst == d->at + 1 && rec.len == 0) {
			d->at = rec.dst;        /* the end of its step: "Steps and direct rings" */
			*gate = 1;
			break;
		}
		if (d && (rec.kind != PROTO_REC_ITEM || rec.src != d->rank))
			return f->dead = conn_seterr(-EPROTO, "rank %u wrote an unexpected record (kind %u, from %u, "
						     "step %u after %u) into its direct ring", d->rank, rec.kind, rec.src,
						     rec.dst, d->at);
		if (rec.kind == PROTO_REC_STEP) {
			if (rec.dst != f->completed + 1)
				return f->dead = conn_seterr(-EPROTO, "ferryd completed step %u after step %u",
							     rec.dst, f->completed);
			f->completed = rec.dst;
			if (f->dr) {
				*gate = 1;      /* the next step's items wait (see above) */
				break;
			}
			continue;
		}
		if (rec.kind == PROTO_REC_FAIL) {
			/* Items keep coming (from the ranks that are still
			 * there, and what a rank that left sent before it
			 * did: struct reasm); steps that have not completed
			 * by now never will. */
			if (!f->failed) {
				size_t len = rec.len < sizeof(f->fail_text) - 1 ? rec.len : sizeof(f->fail_text) - 1;

				f->failed = -(rec.channel ? rec.channel : EPIPE);
				memcpy(f->fail_text, payload, len);
				f->fail_text[len] = '\0';
			}
			continue;
		}
		if (rec.kind != PROTO_REC_ITEM || rec.src >= f->size)
			return f->dead = conn_seterr(-EPROTO, "ferryd wrote an unexpected record (kind %u) into the RX ring",
						     rec.kind);
		if (!(rec.flags & PROTO_REC_FLAGS_ALL)) {
			if (f->reasm && *find_reasm(f, rec.src))
				drop_reasm(f, rec.src);         /* a new item: its rest was lost */
			items[n++] = (struct ferry_item){ .data = payload, .len = rec.len, .src = rec.src,
							  .channel = rec.channel };
			continue;
		}
		ret = reassemble(f, &rec, payload, items, &n);
		if (ret == -EPROTO && d)        /* (the message would blame ferryd) */
			return f->dead = conn_seterr(-EPROTO, "rank %u wrote inconsistent pieces of an item into its "
						     "direct ring", d->rank);
		if (ret < 0)
			return ret;
		/* The piece is copied out: while no item of this call points
		 * into this ring, its room goes back at once, so that the
		 * writer can write the next pieces (a large item need not
		 * fit the ring whole, and is not written twice, into the
		 * daemon's queue and then here).  All of this call's items
		 * count, also those an earlier pass took from this ring
		 * (reassembled ones point into the library's memory). */
		if (!ring_items_in(items, n, r))
			release_ring(f, d);
	}
	if (d && d->r.fenceless)        /* publishes our offer saved (direct_membarrier) */
		f->dr->items_in += (uint64_t)(n - n0);
	return n;
}

/* Takes up to max items: the RX ring first, then the direct rings toward
 * us, starting with a different one each call so that none waits behind a
 * busy one for ever; each only while it is open ("Steps and direct
 * rings"), again as long as a step marker may have opened another. */
static int collect(struct ferry *f, struct ferry_item *items, int max)
{
	struct direct *dr = f->dr;
	int n = 0, gate = 1;

	if (!dr)
		return collect_ring(f, NULL, items, 0, max, &gate);
	while (gate && n < max) {
		uint32_t low = direct_low(dr);

		gate = 0;
		if (f->completed <= low && (n = collect_ring(f, NULL, items, n, max, &gate)) < 0)
			return n;
		for (uint32_t k = 0; k < dr->n && n < max; k++) {
			uint32_t j = dr->next_in + k < dr->n ? dr->next_in + k : dr->next_in + k - dr->n;
			struct dring *d = &dr->in[j];

			if (!dring_open(f, d, low) || !ring_readable(&d->r))
				continue;
			dr->touched |= 1ull << j;
			if ((n = collect_ring(f, d, items, n, max, &gate)) < 0)
				return n;
		}
	}
	dr->next_in = dr->next_in + 1 < dr->n ? dr->next_in + 1 : 0;
	return n;
}

static int recv_items(struct ferry *f, struct ferry_item *items, int max, int timeout_ms);

FERRY_API int ferry_recv(ferry_t *f, struct ferry_item *items, int max, int timeout_ms)
{
	int n;

	NOT_ON_GROUP(f);
	n = recv_items(f, items, max, timeout_ms);
	if (n > 0)
		f->outstanding = 1;     /* (ferry_release clears it) */
	return n;
}

/* For a call that finds ferry_fd() armed (by an empty ferry_recv): the
 * application may have slept on it; reset it, and see whether it was the
 * daemon going away that woke it. */
static void fd_reset(struct ferry *f)
{
	uint64_t v;
	ssize_t r = read(f->efd_client, &v, sizeof(v));

	(void)r;
	rx_awake(f);
	out_disarm(f);
	f->armed = 0;
	coll_fd_recheck(f);
	conn_check(f);        /* items still in the ring come first */
}

static int recv_items(struct ferry *f, struct ferry_item *items, int max, int timeout_ms)
{
	uint64_t deadline = 0, spin_until = 0;
	unsigned polls = 0;

	if (max <= 0)
		return conn_seterr(-EINVAL, "max must be positive");
	ferry_release(f);
	if (out_pending(f) && ++f->recv_unflushed >= RECV_BATCH_CALLS) {
		/* A program that always finds something to receive still
		 * sends what it batched, now and then (ferry.h FERRY_BATCH). */
		int ret = out_flush(f, 0);

		if (ret < 0 && ret != -EAGAIN)
			return ret;
	}
	if (f->stash_len > f->stash_head) {
		if (f->armed)
			fd_reset(f);    /* (else a count left in it keeps ferry_fd() readable) */
		return from_stash(f, items, max);
	}
	/* (Not when room for held output may have woken us: the slow way
	 * resets the eventfd.) */
	if (f->armed && timeout_ms == 0 && !f->dead && !f->tx_armed && !rx_readable(f)) {
		/* Nothing came since the last call found nothing: say so without
		 * a system call (but a yield where the daemon needs our cores),
		 * the common case of a program that polls while it sends.  Now and then ask the socket whether the daemon went
		 * away, and reset the eventfd: a wake-up that raced with an
		 * earlier call's reset can leave it readable with nothing to
		 * read, and a program sleeping on ferry_fd() would spin. */
		uint64_t now = proto_now_ns(), since = now - f->checked_ns;
		int ret;

		/* Nothing to receive: what is batched leaves (and if the
		 * ring has no room, room makes ferry_fd() readable).  If
		 * room came just now, out_arm cleared the flag again and the
		 * output is still held: the slow way sends it. */
		if (out_pending(f) && (ret = out_arm(f)) < 0)
			return ret;
		if ((!out_pending(f) || f->tx_armed) &&
		    (since < RECV_CHECK_NS || (++f->empty_calls < RECV_CHECK_CALLS && since < RECV_CHECK_MAX_NS))) {
			/* A program that tries again at once would keep
			 * the CPU from a daemon that shares our cores: the
			 * sustained all-to-all of make bench ran 10x
			 * slower that way (README, Performance). */
			if (f->shares_cores)
				sched_yield();
			return 0;
		}
		f->checked_ns = now;
		f->empty_calls = 0;
	}
	if (f->armed)
		fd_reset(f);
	if (timeout_ms > 0)
		deadline = proto_now_ms() + (uint64_t)timeout_ms;
	if (timeout_ms != 0 && f->spin_us)
		spin_until = proto_now_ns() + f->spin_us * 1000ull;
	for (;;) {
		int n = collect(f, items, max), ret, wait;

		if (n != 0)
			return n;
		if (f->dead)
			return f->dead;
		/* Pieces of a large item may have been copied out of the ring
		 * without completing an item: give their room back before
		 * waiting, or the daemon could never deliver the rest. */
		release_rings(f);
		if (out_pending(f)) {
			/* Nothing to receive: what is batched leaves now; if
			 * the ring has no room for it, room wakes us too. */
			ret = out_arm(f);
			if (ret < 0)
				return ret;
			if (ret == 1)
				continue;
		}
		if (spin_until && proto_now_ns() < spin_until) {
			/* Poll, letting the daemon (or anyone) have the CPU
			 * now and then (spin_turn).  Only when the daemon has
			 * cores of its own (poll.c) unless FERRY_SPIN_US says
			 * otherwise: where it shares ours, every spin delays
			 * the very daemon that is to deliver the items. */
			spin_turn(f, &polls);
			continue;
		}
		if (rx_sleep(f))
			continue;
		if (timeout_ms == 0) {
			f->armed = 1;   /* ferry_fd() now becomes readable on arrival */
			return 0;
		}
		wait = conn_wait_ms(deadline, timeout_ms < 0);
		ret = conn_wait(f, wait);
		rx_awake(f);
		out_disarm(f);
		if (ret == -ETIMEDOUT)
			return 0;
		if (ret < 0)
			return ret;
	}
}

/* Appends a copy of it to the stash. */
static int stash_push(struct ferry *f, const struct ferry_item *it)
{
	size_t fp = ((size_t)it->len + 7) & ~(size_t)7;
	struct stash_chunk *c = f->stash_chunk;

	if (f->stash_len == f->stash_cap) {
		size_t cap = f->stash_cap ? 2 * f->stash_cap : 64;
		struct stashed *s = realloc(f->stash, cap * sizeof(*s));

		if (!s)
			return conn_seterr(-ENOMEM, "out of memory keeping items during ferry_step_wait");
		f->stash = s;
		f->stash_cap = cap;
	}
	if (!c || c->cap - c->used < fp) {
		/* A new chunk; the last one takes no more, whether it is
		 * full or this item is one for a chunk of its own. */
		size_t cap = fp > STASH_CHUNK_BYTES / 2 ? fp : STASH_CHUNK_BYTES;

		c = malloc(sizeof(*c) + cap);
		if (!c)
			return conn_seterr(-ENOMEM, "out of memory keeping items during ferry_step_wait");
		c->used = 0;
		c->cap = cap;
		f->stash_chunk = cap == STASH_CHUNK_BYTES ? c : NULL;
	}
	if (it->len)    /* (a peer's item of empty pieces has no data) */
		memcpy(c->data + c->used, it->data, it->len);
	f->stash[f->stash_len] = (struct stashed){ .it = *it, .c = c };
	f->stash[f->stash_len++].it.data = c->data + c->used;
	c->used += fp;
	f->stash_bytes += it->len;
	return 0;
}

/* Copies what the rings hold into the stash, so that the daemon and the
 * ranks with direct rings can keep delivering (and the step complete)
 * while the application waits. */
/* Appends copies of the n items to the stash; returns 0 or -ENOMEM. */
static int stash_all(struct ferry *f, const struct ferry_item *it, int n)
{
	for (int i = 0; i < n; i++) {
		int ret = stash_push(f, &it[i]);

		if (ret < 0)
			return ret;
	}
	return 0;
}

int rx_stash(struct ferry *f)
{
	struct ferry_item it[64];
	int n, ret;

	do {
		n = collect(f, it, 64);
		if (n < 0)
			return n;
		if ((ret = stash_all(f, it, n)) < 0)
			return ret;
		ferry_release(f);
	} while (n == 64);
	return 0;
}

int rx_stash_direct(struct ferry *f)
{
	struct direct *dr = f->dr;
	struct ferry_item it[64];

	for (uint32_t j = 0; dr && j < dr->n; j++) {
		struct dring *d = &dr->in[j];
		int n, gate, ret;

		if (dr->touched & (1ull << j))
			continue;       /* the application's items may lie there */
		do {
			gate = 0;
			if (!dring_open(f, d, direct_low(dr)) || !ring_readable(&d->r))
				break;
			n = collect_ring(f, d, it, 0, 64, &gate);
			if (n < 0)
				return n;
			if ((ret = stash_all(f, it, n)) < 0)
				return ret;
			release_ring(f, d);
		} while (n == 64 || gate);
	}
	return 0;
}

FERRY_API int ferry_step_wait(ferry_t *f, int timeout_ms)
{
	uint64_t deadline = timeout_ms > 0 ? proto_now_ms() + (uint64_t)timeout_ms : 0;
	int was_armed;

	NOT_ON_GROUP(f);
	if (!f->step_done)
		return conn_seterr(-EINVAL, "ferry_step_wait without ferry_done in step %u", f->step);
	ferry_release(f);
	was_armed = f->armed;
	if (f->armed) {
		/* ferry_recv left the RX flag set for ferry_fd(); the sleep
		 * below sets and clears it, so the next ferry_recv must arm
		 * it again rather than trust it (its no-system-call path). */
		rx_awake(f);
		f->armed = 0;
	}
	for (;;) {
		int ret, wait, out = 0;

		ret = rx_stash(f);
		if (ret < 0)
			return ret;
		/* What ferry_done left (its DONE at least) goes in first,
		 * as the ring makes room (and room wakes us, out_arm). */
		if (out_pending(f) && (out = out_arm(f)) < 0)
			return out;
		if (out == 1)
			continue;
		if (f->completed >= f->step) {
			f->step++;
			f->step_done = 0;
			return 0;
		}
		if (f->dead)
			return f->dead;
		if (f->failed)
			return conn_seterr(f->failed, "step %u cannot complete: %s", f->step, f->fail_text);
		if (rx_sleep(f))
			continue;
		wait = conn_wait_ms(deadline, timeout_ms < 0);
		if (timeout_ms >= 0 && wait == 0) {
			rx_awake(f);
			out_disarm(f);
			if (was_armed && !f->dead)
				poll_rearm(f);  /* as ferry_poll: ferry_fd() stays armed */
			return conn_seterr(-ETIMEDOUT, "step %u: not complete within %d ms", f->step, timeout_ms);
		}
		ret = conn_wait(f, wait);
		rx_awake(f);
		out_disarm(f);
		if (ret < 0 && ret != -ETIMEDOUT)
			return ret;
	}
}
