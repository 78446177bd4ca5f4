/* daemon/frame.c - see frame.h. */
#include "frame.h"

#include <stdlib.h>
#include <string.h>

#define FREE_BYTES (4u << 20)   /* standard frames kept for reuse, in bytes */

uint64_t frame_mem_bytes;

static struct {
	uint32_t std_cap;       /* data bytes of a standard frame */
	struct frame *free;
	uint32_t nfree;
} F;

void frame_init(uint32_t body_bytes)
{
	/* With buffer_bytes = 0 (no aggregation) small items still come from
	 * the free list. */
	F.std_cap = (uint32_t)sizeof(struct wire_frame_hdr) + (body_bytes > 4096 ? body_bytes : 4096);
}

void frame_fini(void)
{
	while (F.free) {
		struct frame *f = F.free;

		F.free = f->next;
		frame_mem_bytes -= sizeof(*f) + f->cap;
		free(f);
	}
	F.nfree = 0;
}

struct frame *frame_alloc(uint32_t body)
{
	uint32_t cap = (uint32_t)sizeof(struct wire_frame_hdr) + body;
	struct frame *f;

	if (cap <= F.std_cap && F.free) {
		f = F.free;
		F.free = f->next;
		F.nfree--;
	} else {
		if (cap < F.std_cap)
			cap = F.std_cap;
		f = malloc(sizeof(*f) + cap);
		if (!f)
			return NULL;
		f->cap = cap;
		frame_mem_bytes += sizeof(*f) + cap;
	}
	f->next = NULL;
	f->seq = 0;
	f->len = sizeof(struct wire_frame_hdr);
	f->nitems = 0;
	memset(f->data, 0, sizeof(struct wire_frame_hdr));
	return f;
}

void frame_free(struct frame *f)
{
	if (f->cap == F.std_cap && (uint64_t)(F.nfree + 1) * F.std_cap <= FREE_BYTES) {
		f->next = F.free;
		F.free = f;
		F.nfree++;
		return;
	}
	frame_mem_bytes -= sizeof(*f) + f->cap;
	free(f);
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
