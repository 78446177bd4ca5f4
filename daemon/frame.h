/* daemon/frame.h - frame buffers: one network frame between two daemons, a
 * struct wire_frame_hdr followed by its body, in one allocation.  Frames of
 * the standard size (aggregation.buffer_bytes) come from a free list, so the
 * data path allocates nothing per frame once warm; larger ones (a piece of a
 * large item) are allocated for the occasion.  All frame memory is counted in
 * frame_mem_bytes.
 */
#ifndef FERRY_FRAME_H
#define FERRY_FRAME_H

#include "../proto/wire.h"

#include <stdint.h>

struct frame {
	struct frame *next;
	uint64_t seq;           /* per-link sequence number once queued */
	uint32_t len;           /* bytes used in data, header included */
	uint32_t cap;           /* bytes available in data */
	uint32_t nitems;        /* items in the body (statistics) */
	uint32_t lkey;          /* a transport's registration key (verbs), with reg */
	void *reg;              /* the transport's registration, or NULL */
	uint8_t data[];         /* wire_frame_hdr, then the body */
};

/* A transport that sends from registered memory (verbs) registers frames when
 * it first sends them (setting reg and lkey) and sets this hook, which
 * releases a registration when the frame's memory is freed.  Frames in the
 * reuse pools keep theirs. */
extern void (*frame_unregister)(struct frame *f);

extern uint64_t frame_mem_bytes;

/* Sets the standard body size (aggregation.buffer_bytes, at least 4 KiB).
 * Frames of that size and frames for one maximal piece of a large item are
 * kept for reuse. */
void frame_init(uint32_t body_bytes);
void frame_fini(void);

/* A frame with room for at least body bytes of body (a standard frame if that
 * is enough), its header zeroed and len covering just the header.  NULL when
 * out of memory. */
struct frame *frame_alloc(uint32_t body);
void frame_free(struct frame *f);

/* Bytes of body room left. */
static inline uint32_t frame_room(const struct frame *f)
{
	return f->cap - f->len;
}

/* Singly linked FIFO of frames with a byte count. */
struct frameq {
	struct frame *head, *tail;
	uint64_t bytes;         /* sum of len */
	uint32_t count;
};

void frameq_push(struct frameq *q, struct frame *f);
struct frame *frameq_pop(struct frameq *q);
void frameq_clear(struct frameq *q);

#endif
