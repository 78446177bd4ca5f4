/* tests/unit/test_recq.c - the daemon's record queue. */
#define UNIT "recq"
#include "check.h"
#include "../../daemon/local/recq.c"

static void push(struct recq *q, uint32_t len, uint32_t tag, int expect)
{
	static uint8_t payload[PROTO_FRAG_BYTES];
	struct proto_rec rec = { .len = len, .kind = PROTO_REC_ITEM, .dst = tag };

	memset(payload, (int)(tag & 0xff), len);
	CHECK_EQ(recq_push(q, &rec, payload), expect);
}

static uint32_t pop(struct recq *q, uint32_t *len_p)
{
	const struct proto_rec *rec;
	const void *p;

	if (!recq_peek(q, &rec, &p))
		return UINT32_MAX;
	*len_p = rec->len;
	for (uint32_t i = 0; i < rec->len; i++)
		if (((const uint8_t *)p)[i] != (rec->dst & 0xff))
			return UINT32_MAX - 1;
	uint32_t tag = rec->dst;
	recq_pop(q);
	return tag;
}

TEST(fifo_across_chunks)
{
	struct recq q = { 0 };
	uint32_t len;

	for (uint32_t i = 0; i < 1000; i++)
		push(&q, i * 97 % 2000, i, 0);
	CHECK_EQ(q.count, 1000);
	for (uint32_t i = 0; i < 1000; i++) {
		CHECK_EQ(pop(&q, &len), i);
		CHECK_EQ(len, i * 97 % 2000);
	}
	CHECK_EQ(q.count, 0);
	CHECK_EQ(q.bytes, 0);
	recq_clear(&q);
	CHECK_EQ(recq_mem_bytes, 0);
}

/* Regression: a queue emptied down to its kept chunk must take maximal
 * records, or a new chunk lands behind an empty one and the queue looks
 * empty while it holds items. */
TEST(maximal_records_after_the_queue_emptied)
{
	struct recq q = { 0 };
	uint32_t len;

	push(&q, 100, 1, 0);
	CHECK_EQ(pop(&q, &len), 1);
	push(&q, PROTO_FRAG_BYTES, 2, 0);
	push(&q, PROTO_FRAG_BYTES, 3, 0);
	push(&q, PROTO_FRAG_BYTES, 4, 0);
	CHECK_EQ(pop(&q, &len), 2);
	CHECK_EQ(len, PROTO_FRAG_BYTES);
	CHECK_EQ(pop(&q, &len), 3);
	CHECK_EQ(pop(&q, &len), 4);
	CHECK_EQ(pop(&q, &len), UINT32_MAX);
	recq_clear(&q);
}

/* What a push will allocate is known before it happens (the owner charges
 * it to a user first), and every chunk freed is given back in q.mem. */
TEST(memory_is_counted_per_queue)
{
	struct recq q = { 0 }, r = { 0 };
	struct proto_rec rec = { .len = 1000, .kind = PROTO_REC_ITEM };
	static uint8_t payload[1000];
	uint64_t chunk = RECQ_CHUNK + sizeof(struct recq_chunk);
	uint32_t per_chunk = RECQ_CHUNK / ring_footprint(1000), len;

	CHECK_EQ(recq_push_cost(&q, 1000), chunk);
	for (uint32_t i = 0; i < 3 * per_chunk; i++) {
		uint64_t cost = recq_push_cost(&q, 1000), before = q.mem;

		CHECK_EQ(cost, i % per_chunk ? 0 : chunk);
		CHECK_EQ(recq_push(&q, &rec, payload), 0);
		CHECK_EQ(q.mem - before, cost);
	}
	CHECK_EQ(q.mem, 3 * chunk);
	CHECK_EQ(recq_push_cost(&q, 1000), chunk);
	push(&r, 10, 1, 0);
	CHECK_EQ(recq_mem_bytes, 4 * chunk);
	CHECK(recq_mem_peak >= recq_mem_bytes);
	for (uint32_t i = 0; i < per_chunk; i++)
		CHECK_EQ(pop(&q, &len), 0);
	CHECK_EQ(q.mem, 2 * chunk);             /* the first chunk went */
	recq_clear(&q);
	CHECK_EQ(q.mem, 0);
	CHECK_EQ(recq_mem_bytes, chunk);
	recq_clear(&r);
	CHECK_EQ(recq_mem_bytes, 0);
}

int main(void)
{
	RUN(fifo_across_chunks);
	RUN(maximal_records_after_the_queue_emptied);
	RUN(memory_is_counted_per_queue);
	return check_done();
}
