/* tests/unit/test_recv.c - libferry's receiving side on an RX ring written
 * here as ferryd writes it: large items put back together from their
 * fragments, what a FAIL about a rank that left does to a partial item of
 * that rank (nothing), and fragments lost on the way (nothing is glued
 * across the gap) (client/recv.c, struct reasm); dense records handed out
 * item by item, over several calls (recv.c "Dense records"). */
#define UNIT "recv"
#include "check.h"
#include "../../client/conn.c"
#include "../../client/recv.c"
#include "../../client/send.c"      /* FERRY_BATCH: ferry_recv pushes batches */
#include "../../client/poll.c"
#include "../../client/coll.c"      /* conn.c hands COLL_DONE to it */
#include "../../client/mem.c"

#include <stdlib.h>

#define RING_SIZE (1u << 20)
#define FRAG(i) ((uint8_t)((i) << 1))   /* PROTO_REC_FRAG */

static struct ferry f;
static struct ring prod;        /* the daemon's side of f.rx */

static void setup(void)
{
	static void *mem;

	rx_free(&f);
	free(mem);
	mem = calloc(1, ring_bytes(RING_SIZE));
	ring_attach(&prod, mem, RING_SIZE, 1);
	memset(&f, 0, sizeof(f));
	ring_attach(&f.rx, mem, RING_SIZE, 0);
	f.size = 3;
	f.sock = f.efd_client = f.efd_daemon = f.epfd = -1;
}

/* A record as ferryd writes it: len bytes of payload, each byte fill. */
static void put(uint8_t kind, uint32_t src, uint8_t flags, uint16_t channel, uint32_t len, uint8_t fill)
{
	struct proto_rec *slot;

	if (ring_reserve(&prod, len, &slot) != 0)
		abort();
	*slot = (struct proto_rec){ .len = len, .kind = kind, .flags = flags, .channel = channel, .src = src };
	memset(slot + 1, fill, len);
	ring_publish(&prod);
}

static void put_fail(uint32_t rank, const char *text)
{
	struct proto_rec *slot;
	uint32_t len = (uint32_t)strlen(text);

	if (ring_reserve(&prod, len, &slot) != 0)
		abort();
	*slot = (struct proto_rec){ .len = len, .kind = PROTO_REC_FAIL, .channel = EPIPE, .dst = 1, .src = rank };
	memcpy(slot + 1, text, len);
	ring_publish(&prod);
}

/* Takes every item there is; returns how many, their lengths in lens. */
static int take_all(uint32_t *lens, uint32_t *srcs, int max)
{
	struct ferry_item it[16];
	int n = 0, got;

	while ((got = ferry_recv(&f, it, 16, 0)) > 0)
		for (int i = 0; i < got && n < max; i++, n++) {
			lens[n] = it[i].len;
			srcs[n] = it[i].src;
		}
	return got < 0 ? got : n;
}

TEST(large_items_come_back_whole)
{
	uint32_t lens[8], srcs[8];

	setup();
	put(PROTO_REC_ITEM, 1, PROTO_REC_MORE, 7, PROTO_FRAG_BYTES, 0xa1);
	put(PROTO_REC_ITEM, 2, 0, 7, 10, 0xb2);         /* another source between the pieces */
	put(PROTO_REC_ITEM, 1, PROTO_REC_MORE | FRAG(1), 7, PROTO_FRAG_BYTES, 0xa1);
	put(PROTO_REC_ITEM, 1, FRAG(2), 7, 100, 0xa1);
	CHECK_EQ(take_all(lens, srcs, 8), 2);
	CHECK(lens[0] == 10 && srcs[0] == 2);
	CHECK(lens[1] == 2 * PROTO_FRAG_BYTES + 100 && srcs[1] == 1);
	ferry_release(&f);
}

/* Rank 1 left after sending a large item; the FAIL that says so comes
 * between its fragments (it took another route than the item): the item
 * still comes out whole, then what rank 1 sent after it, and another
 * rank's. */
TEST(a_departed_ranks_item_completes_after_the_fail)
{
	uint32_t lens[8], srcs[8];

	setup();
	put(PROTO_REC_ITEM, 1, PROTO_REC_MORE, 0, PROTO_FRAG_BYTES, 0xa1);
	put(PROTO_REC_ITEM, 1, PROTO_REC_MORE | FRAG(1), 0, PROTO_FRAG_BYTES, 0xa1);
	put_fail(1, "rank 1 left");
	put(PROTO_REC_ITEM, 1, PROTO_REC_MORE | FRAG(2), 0, PROTO_FRAG_BYTES, 0xa1);
	put(PROTO_REC_ITEM, 1, FRAG(3), 0, 77, 0xa1);         /* the end of the item */
	put(PROTO_REC_ITEM, 1, 0, 0, 5, 0xc3);          /* a small item it sent after it */
	put(PROTO_REC_ITEM, 0, 0, 0, 9, 0xd4);
	CHECK_EQ(take_all(lens, srcs, 8), 3);
	CHECK(lens[0] == 3 * PROTO_FRAG_BYTES + 77 && srcs[0] == 1);
	CHECK(lens[1] == 5 && srcs[1] == 1);
	CHECK(lens[2] == 9 && srcs[2] == 0);
	CHECK_EQ(f.failed, -EPIPE);
	CHECK_EQ(f.reasm, NULL);                        /* nothing left behind */
	ferry_release(&f);
}

/* A FAIL about a rank none of whose items was under way: its next large item
 * (all of it after the FAIL) comes out whole. */
TEST(a_whole_item_after_the_fail_comes_out)
{
	uint32_t lens[8], srcs[8];

	setup();
	put_fail(2, "rank 2 left");
	put(PROTO_REC_ITEM, 2, PROTO_REC_MORE, 0, PROTO_FRAG_BYTES, 0xa1);
	put(PROTO_REC_ITEM, 2, FRAG(1), 0, 3, 0xa1);
	CHECK_EQ(take_all(lens, srcs, 8), 1);
	CHECK(lens[0] == PROTO_FRAG_BYTES + 3 && srcs[0] == 2);
	ferry_release(&f);
}

/* Fragments lost on the way (a restarted node dropped what it had queued,
 * a lost link what passed through toward it): nothing is glued across the
 * gap, whatever it covers; what comes whole after it comes out. */
TEST(nothing_is_glued_across_lost_fragments)
{
	uint32_t lens[8], srcs[8];

	setup();
	/* The middle of an item lost: the rest does not follow on. */
	put(PROTO_REC_ITEM, 1, PROTO_REC_MORE, 0, PROTO_FRAG_BYTES, 0x11);
	put(PROTO_REC_ITEM, 1, PROTO_REC_MORE | FRAG(1), 0, PROTO_FRAG_BYTES, 0x11);
	put(PROTO_REC_ITEM, 1, PROTO_REC_MORE | FRAG(3), 0, PROTO_FRAG_BYTES, 0x11);
	put(PROTO_REC_ITEM, 1, FRAG(4), 0, 50, 0x11);
	put(PROTO_REC_ITEM, 1, 0, 0, 6, 0x33);          /* whole */
	CHECK_EQ(take_all(lens, srcs, 8), 1);
	CHECK(lens[0] == 6 && srcs[0] == 1);
	CHECK_EQ(f.reasm, NULL);

	/* An item's rest and the next one's start lost: the first's start and
	 * the second's rest (which would line up with it) are not one item. */
	put(PROTO_REC_ITEM, 1, PROTO_REC_MORE, 0, PROTO_FRAG_BYTES, 0x11);
	put(PROTO_REC_ITEM, 1, PROTO_REC_MORE | FRAG(2), 0, PROTO_FRAG_BYTES, 0x22);
	put(PROTO_REC_ITEM, 1, FRAG(3), 0, 50, 0x22);
	CHECK_EQ(take_all(lens, srcs, 8), 0);
	CHECK_EQ(f.reasm, NULL);

	/* A start, then a new start (the first one's rest lost): the second
	 * item comes out whole, the first not at all. */
	put(PROTO_REC_ITEM, 2, PROTO_REC_MORE, 0, PROTO_FRAG_BYTES, 0x44);
	put(PROTO_REC_ITEM, 2, PROTO_REC_MORE, 0, PROTO_FRAG_BYTES, 0x55);
	put(PROTO_REC_ITEM, 2, FRAG(1), 0, 9, 0x55);
	CHECK_EQ(take_all(lens, srcs, 8), 1);
	CHECK(lens[0] == PROTO_FRAG_BYTES + 9 && srcs[0] == 2);

	/* A start then a whole item: the whole one comes out. */
	put(PROTO_REC_ITEM, 0, PROTO_REC_MORE, 0, PROTO_FRAG_BYTES, 0x66);
	put(PROTO_REC_ITEM, 0, 0, 0, 4, 0x77);
	CHECK_EQ(take_all(lens, srcs, 8), 1);
	CHECK(lens[0] == 4 && srcs[0] == 0);
	CHECK_EQ(f.reasm, NULL);
	ferry_release(&f);
}

/* A DENSE record as ferryd writes it: count items of len bytes on channel
 * from src, item i's bytes all i (proto/ring.h "Dense batches"). */
static void put_dense(uint32_t src, uint16_t channel, uint32_t len, uint32_t count)
{
	uint32_t stride = (len + 7) & ~7u, plen = 8 + count * stride;
	uint64_t h = len | (uint64_t)channel << 16 | (uint64_t)count << 32;
	struct proto_rec *slot;

	if (ring_reserve(&prod, plen, &slot) != 0)
		abort();
	*slot = (struct proto_rec){ .len = plen, .kind = PROTO_REC_DENSE, .src = src };
	memcpy(slot + 1, &h, 8);
	for (uint32_t i = 0; i < count; i++)
		memset((uint8_t *)(slot + 1) + 8 + i * stride, (int)i, stride);
	ring_publish(&prod);
}

TEST(dense_records_come_out_item_by_item)
{
	struct ferry_item it[64];
	uint32_t next = 0;
	uint64_t start;
	int n;

	setup();
	f.region = f.rx.data;           /* (ferry_release gives RX room back only with one) */
	put_dense(2, 9, 13, 10);        /* stride 16 */
	put(PROTO_REC_ITEM, 1, 0, 4, 8, 0x77);
	put_dense(1, 3, 0, 100);        /* stride 0 */
	start = f.rx.tail;
	/* Three at a time: the record stays at the tail, its room not given
	 * back, until its last item is out and released. */
	for (int call = 0; call < 3; call++) {
		n = ferry_recv(&f, it, 3, 0);
		CHECK_EQ(n, 3);
		for (int i = 0; i < n; i++, next++) {
			CHECK_EQ(it[i].len, 13);
			CHECK_EQ(it[i].src, 2);
			CHECK_EQ(it[i].channel, 9);
			CHECK_EQ(((const uint8_t *)it[i].data)[0], next);
			CHECK_EQ(((const uint8_t *)it[i].data)[12], next);
			CHECK_EQ((uintptr_t)it[i].data % 8, 0);
		}
		CHECK_EQ(f.rx.tail, start);
		CHECK_EQ(atomic_load(&f.rx.sh->tail), start);
	}
	/* The last of it, the item after it, and 62 of the empty ones. */
	n = ferry_recv(&f, it, 64, 0);
	CHECK_EQ(n, 64);
	CHECK_EQ(((const uint8_t *)it[0].data)[0], 9);
	CHECK_EQ(it[1].len, 8);
	CHECK_EQ(it[1].src, 1);
	CHECK_EQ(it[1].channel, 4);
	CHECK_EQ(it[2].len, 0);
	CHECK_EQ(it[2].src, 1);
	CHECK_EQ(it[2].channel, 3);
	CHECK(f.rx.tail != start);      /* past the first dense record */
	ferry_release(&f);
	CHECK_EQ(atomic_load(&f.rx.sh->tail), f.rx.tail);
	n = ferry_recv(&f, it, 64, 0);
	CHECK_EQ(n, 38);                /* the rest of the 100 */
	CHECK_EQ(ferry_recv(&f, it, 64, 0), 0);
	CHECK_EQ(f.rx.tail, f.rx.head);
}

TEST(a_dense_record_that_lies_breaks_the_ring)
{
	struct ferry_item it[4];
	struct proto_rec *slot;
	uint64_t h = 8 | (uint64_t)5 << 32;    /* 5 items of 8 bytes in room for 4 */

	setup();
	if (ring_reserve(&prod, 8 + 4 * 8, &slot) != 0)
		abort();
	*slot = (struct proto_rec){ .len = 8 + 4 * 8, .kind = PROTO_REC_DENSE, .src = 1 };
	memcpy(slot + 1, &h, 8);
	ring_publish(&prod);
	CHECK_EQ(ferry_recv(&f, it, 4, 0), -EPROTO);
}

/* A writer that turns the DENSE record at the tail, half handed out, into
 * an item record (a peer's direct ring: review finding) breaks the ring:
 * the cursor belongs to that record, and the next DENSE record must not
 * start at it. */
TEST(a_dense_record_changed_while_read_breaks_the_ring)
{
	struct ferry_item it[4];
	struct proto_rec *slot;

	setup();
	put_dense(1, 0, 8, 10);
	put_dense(1, 0, 8, 10);
	slot = (struct proto_rec *)(void *)(f.rx.data + (f.rx.tail & (f.rx.size - 1)));
	CHECK_EQ(ferry_recv(&f, it, 4, 0), 4);
	/* Now an item of 8 + 10 x 8 bytes where the dense record was. */
	slot->kind = PROTO_REC_ITEM;
	CHECK_EQ(ferry_recv(&f, it, 4, 0), -EPROTO);
}

int main(void)
{
	RUN(large_items_come_back_whole);
	RUN(a_departed_ranks_item_completes_after_the_fail);
	RUN(a_whole_item_after_the_fail_comes_out);
	RUN(nothing_is_glued_across_lost_fragments);
	RUN(dense_records_come_out_item_by_item);
	RUN(a_dense_record_that_lies_breaks_the_ring);
	RUN(a_dense_record_changed_while_read_breaks_the_ring);
	setup();                /* frees what the last one had */
	return check_done();
}
