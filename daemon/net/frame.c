/* daemon/net/frame.c - see frame.h. */
#include "frame.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#define FREE_BYTES (4u << 20)   /* frames of a class kept for reuse, in bytes, at least */

uint64_t frame_mem_bytes;

/* Two size classes are reused: standard frames and frames for one maximal
 * piece of a large item (those come and go by the dozen per large item). */
struct frame_pool {
	uint32_t cap;           /* data bytes of a frame of this class */
	struct frame *free;
	uint32_t nfree;
	uint64_t keep;          /* bytes of free frames kept for reuse */
};

static struct {
	struct frame_pool pool[2];      /* standard, maximal piece */
} pools;

static struct frame_pool *pool_for(uint32_t cap)
{
	for (int i = 0; i < 2; i++)
		if (cap <= pools.pool[i].cap)
			return &pools.pool[i];
	return NULL;
}

void frame_init(uint32_t body_bytes, uint64_t link_bytes)
{
	uint32_t piece = (uint32_t)(sizeof(struct wire_frame_hdr) + wire_item_footprint(PROTO_FRAG_BYTES));

	/* With buffer_bytes = 0 (no aggregation) small items still come from
	 * the free list. */
	pools.pool[0].cap = (uint32_t)sizeof(struct wire_frame_hdr) + (body_bytes > 4096 ? body_bytes : 4096) +
			    WIRE_TAG_BYTES;
	pools.pool[1].cap = piece + WIRE_TAG_BYTES > pools.pool[0].cap ? piece + WIRE_TAG_BYTES : pools.pool[0].cap;
	/* Pieces of large items: as many as a link may hold unacknowledged
	 * (limits.link_bytes, and the one that takes it past), so that a stream of large items reuses the same
	 * frames, and on verbs their registrations, instead of freeing the
	 * ones beyond 4 MiB as they are acknowledged and registering new ones
	 * (ibv_reg_mr pins and maps: far dearer than the copy). */
	pools.pool[0].keep = FREE_BYTES;
	pools.pool[1].keep = link_bytes + pools.pool[1].cap > FREE_BYTES ? link_bytes + pools.pool[1].cap : FREE_BYTES;
}

static void release_memory(struct frame *f)
{
	assert(!f->holds);
	if (f->reg)
		f->reg->release(f);
	frame_mem_bytes -= sizeof(*f) + f->cap;
	free(f);
}

void frame_fini(void)
{
	for (int i = 0; i < 2; i++) {
		while (pools.pool[i].free) {
			struct frame *f = pools.pool[i].free;

			pools.pool[i].free = f->next;
			release_memory(f);
		}
		pools.pool[i].nfree = 0;
	}
}

struct frame *frame_alloc(uint32_t body)
{
	uint32_t cap = (uint32_t)sizeof(struct wire_frame_hdr) + body + WIRE_TAG_BYTES;
	struct frame_pool *pool = pool_for(cap);
	struct frame *f;

	if (pool && pool->free) {
		f = pool->free;
		pool->free = f->next;
		pool->nfree--;
	} else {
		if (pool)
			cap = pool->cap;
		f = malloc(sizeof(*f) + cap);
		if (!f)
			return NULL;
		f->cap = cap;
		f->holds = 0;
		f->orphan = 0;
		f->reg = NULL;
		f->lkey = 0;
		frame_mem_bytes += sizeof(*f) + cap;
	}
	f->next = NULL;
	f->seq = 0;
	f->urgent = 0;
	f->ack_lazy = 0;
	f->sent_ns = 0;
	f->written = 0;
	f->resent = 0;
	f->probe = 0;
	f->len = sizeof(struct wire_frame_hdr);
	f->own = 0;
	f->lent = NULL;
	f->lender = NULL;
	f->nitems = 0;
	memset(f->data, 0, sizeof(struct wire_frame_hdr));
	return f;
}

void frame_free(struct frame *f)
{
	struct frame_pool *pool = pool_for(f->cap);

	if (f->holds) {
		/* A device still reads it: the last frame_unhold frees it. */
		f->orphan = 1;
		f->next = NULL;
		return;
	}
	if (f->lender) {
		struct frame_lender *x = f->lender;

		f->lender = NULL;
		f->lent = NULL;
		x->put(x);
	}
	if (pool && pool->cap == f->cap && (uint64_t)(pool->nfree + 1) * (sizeof(*f) + pool->cap) <= pool->keep) {
		f->next = pool->free;
		pool->free = f;
		pool->nfree++;
		return;
	}
	release_memory(f);
}

void frame_lend(struct frame *f, const uint8_t *p, uint32_t n, struct frame_lender *x)
{
	assert(!f->lent && p && x);
	f->own = f->len;
	f->len += n;
	f->lent = p;
	f->lender = x;
	x->f = f;
}

void frame_relend(struct frame *f, const uint8_t *p)
{
	assert(f->lent && p);
	f->lent = p;
}

void frame_hold(struct frame *f)
{
	f->holds++;
}

void frame_unhold(struct frame *f)
{
	assert(f->holds);
	if (--f->holds == 0 && f->orphan) {
		f->orphan = 0;
		frame_free(f);
	}
}

void frameq_push(struct frameq *q, struct frame *f)
{
	f->next = NULL;
	if (q->tail)
		q->tail->next = f;
	else
		q->head = f;
	q->tail = f;
	q->bytes += f->len;
	q->count++;
}

struct frame *frameq_pop(struct frameq *q)
{
	struct frame *f = q->head;

	if (!f)
		return NULL;
	q->head = f->next;
	if (!q->head)
		q->tail = NULL;
	q->bytes -= f->len;
	q->count--;
	f->next = NULL;
	return f;
}

void frameq_clear(struct frameq *q)
{
	struct frame *f;

	while ((f = frameq_pop(q)))
		frame_free(f);
}
