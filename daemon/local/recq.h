/* daemon/local/recq.h - a FIFO of ring records held in daemon memory: items waiting
 * for room in an endpoint's RX ring.  Chunked, so a long queue costs one
 * allocation per 128 KiB, not one per item.  All queues together are accounted
 * in recq_mem_bytes, which the backpressure logic compares to
 * limits.memory_bytes.
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
};

extern uint64_t recq_mem_bytes;         /* allocated by all queues */
extern uint64_t recq_mem_peak;          /* the most recq_mem_bytes has been */

/* Appends a copy of rec and its payload.  Returns 0, -ENOBUFS if that would
 * take recq_mem_bytes above mem_limit, or -ENOMEM. */
int recq_push(struct recq *q, const struct proto_rec *rec, const void *payload, uint64_t mem_limit);

/* Returns the oldest record (1) or 0 if empty; pointers valid until recq_pop. */
int recq_peek(const struct recq *q, const struct proto_rec **rec_p, const void **payload_p);
void recq_pop(struct recq *q);

/* Frees everything queued. */
void recq_clear(struct recq *q);

#endif
