/* proto/ring.c - single-producer/single-consumer ring; see ring.h. */
#include "ring.h"

#include <string.h>

/* Producer: how far ring_reserve_fast may go from here: to the end of the
 * current lap (a record never wraps), or to tail + size if that is nearer. */
static void set_fast_end(struct ring *r)
{
	uint64_t lap_end = (r->head | (r->size - 1)) + 1;

	r->fast_end = r->tail + r->size < lap_end ? r->tail + r->size : lap_end;
}

int ring_size_ok(uint64_t size)
{
	return size >= PROTO_RING_MIN && size <= PROTO_RING_MAX && (size & (size - 1)) == 0;
}

void ring_attach_new(struct ring *r, void *mem, uint64_t size)
{
	assert(ring_size_ok(size));
	r->sh = mem;
	r->data = (uint8_t *)mem + sizeof(struct proto_ring_shared);
	r->size = size;
	r->head = r->tail = r->published = r->published_taken = 0;
	r->fenceless = 0;
	set_fast_end(r);
}

void ring_attach(struct ring *r, void *mem, uint64_t size, int init)
{
	assert(ring_size_ok(size));
	r->sh = mem;
	r->data = (uint8_t *)mem + sizeof(struct proto_ring_shared);
	r->size = size;
	if (init) {
		memset(mem, 0, sizeof(struct proto_ring_shared));
		r->head = r->tail = r->published = r->published_taken = 0;
		r->fenceless = 0;
		set_fast_end(r);
		return;
	}
	/* Attach to a ring someone already uses: both counters start where the
	 * shared header says.  Only the creator's fresh rings are attached here in
	 * practice, but keep the view consistent anyway. */
	r->head = atomic_load_explicit(&r->sh->head, memory_order_acquire);
	r->tail = r->published = atomic_load_explicit(&r->sh->tail, memory_order_acquire);
	r->published_taken = atomic_load_explicit(&r->sh->taken, memory_order_acquire);
	r->fenceless = 0;
	set_fast_end(r);
}

/* Producer: refresh the cached tail from shared memory.  The consumer may only
 * move it forward, up to what we published. */
static int refresh_tail(struct ring *r)
{
	uint64_t t = atomic_load_explicit(&r->sh->tail, memory_order_acquire);

	if (t - r->tail > r->head - r->tail || (t & 7))
		return -EPROTO;
	r->tail = t;
	set_fast_end(r);
	return 0;
}

/* Bytes needed for a record of len, including a PAD in front if it must wrap. */
static uint64_t need_bytes(const struct ring *r, uint32_t len)
{
	uint64_t need = ring_footprint(len);
	uint64_t contig = r->size - (r->head & (r->size - 1));

	return contig < need ? contig + need : need;
}

int ring_reserve(struct ring *r, uint32_t len, struct proto_rec **rec_p)
{
	uint64_t need, pos, contig;
	int ret;

	assert(len <= PROTO_FRAG_BYTES);
	need = need_bytes(r, len);
	if (r->head + need - r->tail > r->size) {
		ret = refresh_tail(r);
		if (ret < 0)
			return ret;
		if (r->head + need - r->tail > r->size)
			return -EAGAIN;
	}
	pos = r->head & (r->size - 1);
	contig = r->size - pos;
	if (contig < ring_footprint(len)) {
		struct proto_rec pad = { .len = (uint32_t)contig, .kind = PROTO_REC_PAD };

		memcpy(r->data + pos, &pad, 8);     /* only the first 8 bytes are defined */
		r->head += contig;
		pos = 0;
	}
	*rec_p = (struct proto_rec *)(r->data + pos);
	r->head += ring_footprint(len);
	set_fast_end(r);
	return 0;
}

void ring_producer_fence_always(struct ring *r)
{
	r->fenceless = 0;
	/* Release: a consumer that reads this with acquire sees every head
	 * stored before it, fenced or not. */
	atomic_store_explicit(&r->sh->producer_fences, 1, memory_order_release);
}

void ring_producer_set_fenceless(struct ring *r, int fenceless)
{
	if (fenceless && atomic_load_explicit(&r->sh->consumer_fences, memory_order_relaxed))
		r->fenceless = RING_FENCELESS;
	else
		ring_producer_fence_always(r);
}

void ring_producer_answer(struct ring *r)
{
	if (r->fenceless &&
	    ring_offer_gone(r, atomic_load_explicit(&r->sh->consumer_fences, memory_order_relaxed)))
		ring_producer_fence_always(r);
}

void ring_producer_await_offer(struct ring *r, int fenceless)
{
	if (fenceless)
		r->fenceless = RING_FENCELESS_LATE;
	else
		ring_producer_fence_always(r);
}

/* The sleeper's half of the handshake (ring.h, "Wake-ups"): the flag, a
 * seq_cst fence, then the tail again; ring_release is the waker's half. */
static void producer_arm(struct ring *r)
{
	atomic_store_explicit(&r->sh->producer_waiting, 1, memory_order_relaxed);
	atomic_thread_fence(memory_order_seq_cst);
}

int ring_producer_sleep(struct ring *r, uint32_t len)
{
	producer_arm(r);
	if (refresh_tail(r) < 0 || r->head + need_bytes(r, len) - r->tail <= r->size) {
		/* Room appeared (or the ring is broken: let the caller find out by
		 * reserving again rather than sleeping forever). */
		atomic_store_explicit(&r->sh->producer_waiting, 0, memory_order_relaxed);
		return 1;
	}
	return 0;
}

int ring_has_room(struct ring *r, uint32_t len)
{
	if (r->head + need_bytes(r, len) - r->tail <= r->size)
		return 1;
	if (refresh_tail(r) < 0)
		return -EPROTO;
	return r->head + need_bytes(r, len) - r->tail <= r->size;
}

int ring_producer_sleep_empty(struct ring *r)
{
	producer_arm(r);
	if (refresh_tail(r) < 0 || r->tail == r->head ||
	    atomic_load_explicit(&r->sh->taken, memory_order_relaxed) == r->head) {
		atomic_store_explicit(&r->sh->producer_waiting, 0, memory_order_relaxed);
		return 1;
	}
	return 0;
}

void ring_producer_awake(struct ring *r)
{
	atomic_store_explicit(&r->sh->producer_waiting, 0, memory_order_relaxed);
}

int ring_peek(struct ring *r, struct proto_rec *rec_p, const void **payload_p)
{
	for (;;) {
		struct proto_rec rec;
		uint64_t pos, contig, avail;

		if (r->tail == r->head) {
			uint64_t h = atomic_load_explicit(&r->sh->head, memory_order_acquire);

			if (h == r->tail)
				return 0;
			/* Unsigned difference: a head behind the tail looks huge.
			 * And no producer writes past the room we gave back
			 * (published): a peer that kept moving its head over
			 * PAD records would otherwise keep this loop going. */
			if (h - r->tail > r->size || h - r->published > r->size || (h & 7))
				return -EPROTO;
			r->head = h;
		}
		pos = r->tail & (r->size - 1);
		contig = r->size - pos;
		avail = r->head - r->tail;
		/* One copy of the whole header where it fits before the end (a
		 * PAD may have only its first 8 bytes there). */
		if (contig >= sizeof(rec))
			memcpy(&rec, r->data + pos, sizeof(rec));
		else
			memcpy(&rec, r->data + pos, 8);
		if (rec.kind == PROTO_REC_PAD) {
			if (rec.len != contig || rec.flags || contig > avail)
				return -EPROTO;
			r->tail += contig;
			continue;
		}
		if (contig < sizeof(rec))
			return -EPROTO;
		if (rec.kind < PROTO_REC_ITEM || rec.kind > PROTO_REC_KIND_MAX ||
		    (rec.flags & ~PROTO_REC_FLAGS_ALL) ||
		    (rec.flags && rec.kind != PROTO_REC_ITEM) ||
		    rec.len > PROTO_FRAG_BYTES ||
		    ring_footprint(rec.len) > contig || ring_footprint(rec.len) > avail)
			return -EPROTO;
		*rec_p = rec;
		*payload_p = r->data + pos + sizeof(rec);
		return 1;
	}
}

void ring_consume(struct ring *r, const struct proto_rec *rec)
{
	r->tail += ring_footprint(rec->len);
}

int ring_release(struct ring *r)
{
	return ring_release_to(r, r->tail);
}

int ring_release_to(struct ring *r, uint64_t to)
{
	int stored = 0;

	assert(to - r->published <= r->tail - r->published);
	/* taken says more than the tail only while room is held back (to <
	 * tail): only then is it stored, so that a ring without loans (every
	 * RX ring, most TX rings) costs one store, as before. */
	if (to != r->tail && r->tail != r->published_taken) {
		r->published_taken = r->tail;
		atomic_store_explicit(&r->sh->taken, r->tail, memory_order_seq_cst);
		stored = 1;
	}
	if (to != r->published) {
		r->published = to;
		atomic_store_explicit(&r->sh->tail, to, memory_order_seq_cst);
		stored = 1;
	}
	/* The waker's half of the handshake with ring_producer_sleep (and,
	 * for taken, ring_producer_sleep_empty): each store above and this
	 * load seq_cst, so that the store precedes the load in S.  A call
	 * that stored nothing wakes nobody: nothing changed for the
	 * producer. */
	return stored && atomic_load_explicit(&r->sh->producer_waiting, memory_order_seq_cst) != 0;
}

int ring_consumer_sleep(struct ring *r)
{
	/* The sleeper's half of the handshake with ring_publish (ring.h,
	 * "Wake-ups"): the flag, a seq_cst fence, then the head again. */
	atomic_store_explicit(&r->sh->consumer_sleeping, 1, memory_order_relaxed);
	atomic_thread_fence(memory_order_seq_cst);
	if (atomic_load_explicit(&r->sh->head, memory_order_relaxed) != r->tail) {
		atomic_store_explicit(&r->sh->consumer_sleeping, 0, memory_order_relaxed);
		return 1;
	}
	return 0;
}

/* ring_consumer_arm, membarrier, ring_consumer_check: the caller's
 * membarrier is the fence between the two, on this CPU and (what the
 * fenceless publish leaves out) on the producer's (ring.h). */
void ring_consumer_arm(struct ring *r)
{
	atomic_store_explicit(&r->sh->consumer_sleeping, 1, memory_order_seq_cst);
}

int ring_consumer_check(struct ring *r)
{
	if (atomic_load_explicit(&r->sh->head, memory_order_seq_cst) != r->tail) {
		atomic_store_explicit(&r->sh->consumer_sleeping, 0, memory_order_relaxed);
		return 1;
	}
	return 0;
}

void ring_consumer_awake(struct ring *r)
{
	atomic_store_explicit(&r->sh->consumer_sleeping, 0, memory_order_relaxed);
}

void ring_consumer_offer_fenceless(struct ring *r)
{
	r->fenceless = 1;
	/* Relaxed: the producer attaches later, through the control socket. */
	atomic_store_explicit(&r->sh->consumer_fences, 1, memory_order_relaxed);
}

void ring_consumer_withdraw_fenceless(struct ring *r, int late)
{
	/* Relaxed: the producer may read the old value for a while whatever
	 * the order; until it answers we look again now and then (ring.h). */
	atomic_store_explicit(&r->sh->consumer_fences, late ? RING_FENCES_WITHDRAWN : 0, memory_order_relaxed);
}

int ring_consumer_fenceless(struct ring *r)
{
	/* Acquire, pairing with the producer's release: the heads it stored
	 * without a fence before answering are visible to our next look. */
	if (r->fenceless && atomic_load_explicit(&r->sh->producer_fences, memory_order_acquire))
		r->fenceless = 0;
	return r->fenceless;
}
