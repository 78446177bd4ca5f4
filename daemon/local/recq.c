/* daemon/local/recq.c - see recq.h. */
#include "recq.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

/* Every chunk can hold the largest record, so an empty chunk (the one kept
 * for reuse) always takes the next push and never sits empty in front of a
 * newer chunk. */
#define RECQ_CHUNK (128u * 1024)
static_assert(RECQ_CHUNK >= sizeof(struct proto_rec) + PROTO_FRAG_BYTES, "a chunk holds any record");

struct recq_chunk {
	struct recq_chunk *next;
	uint32_t head, tail, cap;       /* read at head, write at tail */
	uint8_t data[];
};

uint64_t recq_mem_bytes;
uint64_t recq_mem_peak;

uint64_t recq_push_cost(const struct recq *q, uint32_t len)
{
	const struct recq_chunk *c = q->last;

	if (c && c->cap - c->tail >= ring_footprint(len))
		return 0;
	return sizeof(*c) + RECQ_CHUNK;
}

int recq_push(struct recq *q, const struct proto_rec *rec, const void *payload)
{
	uint32_t fp = (uint32_t)ring_footprint(rec->len);
	struct recq_chunk *c = q->last;

	assert(fp <= RECQ_CHUNK);
	if (!c || c->cap - c->tail < fp) {
		c = malloc(sizeof(*c) + RECQ_CHUNK);
		if (!c)
			return -ENOMEM;
		c->next = NULL;
		c->head = c->tail = 0;
		c->cap = RECQ_CHUNK;
		if (q->last)
			q->last->next = c;
		else
			q->first = c;
		q->last = c;
		q->mem += sizeof(*c) + RECQ_CHUNK;
		recq_mem_bytes += sizeof(*c) + RECQ_CHUNK;
		if (recq_mem_bytes > recq_mem_peak)
			recq_mem_peak = recq_mem_bytes;
	}
	memcpy(c->data + c->tail, rec, sizeof(*rec));
	if (rec->len)
		memcpy(c->data + c->tail + sizeof(*rec), payload, rec->len);
	c->tail += fp;
	q->bytes += fp;
	q->count++;
	q->items += proto_rec_items(rec, payload);
	return 0;
}

int recq_peek(const struct recq *q, const struct proto_rec **rec_p, const void **payload_p)
{
	const struct recq_chunk *c = q->first;

	if (!c || c->head == c->tail)
		return 0;
	*rec_p = (const struct proto_rec *)(c->data + c->head);
	*payload_p = c->data + c->head + sizeof(struct proto_rec);
	return 1;
}

static void free_chunk(struct recq *q, struct recq_chunk *c)
{
	q->mem -= sizeof(*c) + c->cap;
	recq_mem_bytes -= sizeof(*c) + c->cap;
	free(c);
}

void recq_pop(struct recq *q)
{
	struct recq_chunk *c = q->first;
	const struct proto_rec *rec = (const struct proto_rec *)(c->data + c->head);
	uint32_t fp = (uint32_t)ring_footprint(rec->len);

	q->items -= proto_rec_items(rec, c->data + c->head + sizeof(*rec));
	c->head += fp;
	q->bytes -= fp;
	q->count--;
	if (c->head == c->tail) {
		/* Keep the last chunk for reuse. */
		if (c->next) {
			q->first = c->next;
			if (!q->first)
				q->last = NULL;
			free_chunk(q, c);
		} else {
			c->head = c->tail = 0;
		}
	}
}

void recq_clear(struct recq *q)
{
	struct recq_chunk *c = q->first;

	while (c) {
		struct recq_chunk *next = c->next;

		free_chunk(q, c);
		c = next;
	}
	memset(q, 0, sizeof(*q));
}
