/* daemon/local/recq.h - a FIFO of ring records held in daemon memory: items waiting
 * for room in an endpoint's RX ring.  Chunked, so a long queue costs one
 * allocation per 128 KiB, not one per item.  Each queue counts the memory it
 * holds (mem), so that its owner can charge it to whoever pays (the
 * endpoint's user, against limits.user_memory_bytes and memory_bytes: see
 * endpoint.c); all queues together are counted in recq_mem_bytes.
 *
 * Ownership: a queue owns copies of its records; recq_pop and recq_clear free
 * them.
 */
#ifndef FERRY_LOCAL_RECQ_H
#define FERRY_LOCAL_RECQ_H

#include "../../proto/ring.h"

#include <stdint.h>

struct recq_chunk;

struct recq {
	struct recq_chunk *first, *last;
	uint64_t bytes;         /* footprint of the queued records */
	uint64_t count;         /* queued records */
	uint64_t items;         /* ... the items they hold (proto_rec_items) */
	uint64_t mem;           /* bytes of the chunks it holds */
};

extern uint64_t recq_mem_bytes;         /* allocated by all queues */
extern uint64_t recq_mem_peak;          /* the most recq_mem_bytes has been */

/* Bytes that pushing a record of len payload bytes would allocate: 0 if it
 * fits in the queue's last chunk. */
uint64_t recq_push_cost(const struct recq *q, uint32_t len);

/* Appends a copy of rec and its payload, allocating recq_push_cost bytes.
 * Returns 0 or -ENOMEM. */
int recq_push(struct recq *q, const struct proto_rec *rec, const void *payload);

/* Returns the oldest record (1) or 0 if empty; pointers valid until recq_pop. */
int recq_peek(const struct recq *q, const struct proto_rec **rec_p, const void **payload_p);
void recq_pop(struct recq *q);

/* Frees everything queued. */
void recq_clear(struct recq *q);

#endif
