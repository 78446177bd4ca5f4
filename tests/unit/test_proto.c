/* tests/unit/test_proto.c - control-message and frame codecs: round trips,
 * partial input, and rejection of malformed input. */
#define UNIT "proto"
#include "check.h"
#include "../../proto/coll.h"
#include "../../proto/ctl.c"
#include "../../proto/job.c"
#include "../../proto/wire.c"
#include "../../proto/ring.c"

#include <stdlib.h>

TEST(ctl_round_trips)
{
	uint8_t buf[512];
	struct ctl_msg m;
	struct ctl_attached_wire a = { .region_bytes = 1 << 21, .tx_size = 1 << 20, .rx_off = 1 << 20,
				       .rx_size = 1 << 20, .node = 3, .session = 9 };
	ssize_t n;

	n = ctl_encode_hello(buf, sizeof(buf), CTL_ROLE_ENDPOINT);
	CHECK_EQ(ctl_decode(buf, (size_t)n, &m), n);
	CHECK_EQ(m.type, CTL_HELLO);
	CHECK_EQ(m.u.hello.role, CTL_ROLE_ENDPOINT);

	n = ctl_encode_join(buf, sizeof(buf), "sort-42", 3, 8);
	CHECK_EQ(ctl_decode(buf, (size_t)n, &m), n);
	CHECK_EQ(m.type, CTL_JOIN);
	CHECK(strcmp(m.u.join.name, "sort-42") == 0);
	CHECK_EQ(m.u.join.rank, 3);
	CHECK_EQ(m.u.join.size, 8);

	n = ctl_encode_attached(buf, sizeof(buf), &a);
	CHECK_EQ(ctl_decode(buf, (size_t)n, &m), n);
	CHECK(memcmp(&m.u.attached, &a, sizeof(a)) == 0);

	n = ctl_encode_error(buf, sizeof(buf), EADDRINUSE, "rank 3 is taken");
	CHECK_EQ(ctl_decode(buf, (size_t)n, &m), n);
	CHECK_EQ(m.u.error.err, EADDRINUSE);
	CHECK(strcmp(m.u.error.text, "rank 3 is taken") == 0);

	n = ctl_encode_text(buf, sizeof(buf), "hello", 5);
	CHECK_EQ(ctl_decode(buf, (size_t)n, &m), n);
	CHECK_EQ(m.u.text.len, 5);
	CHECK(memcmp(m.u.text.text, "hello", 5) == 0);

	CHECK_EQ(ctl_encode_hello(buf, 10, CTL_ROLE_ADMIN), -ENOSPC);
	CHECK_EQ(ctl_encode_join(buf, sizeof(buf), "has space", 0, 1), -EINVAL);
}

TEST(ctl_partial_messages_wait_for_more)
{
	uint8_t buf[512];
	struct ctl_msg m;
	ssize_t n = ctl_encode_join(buf, sizeof(buf), "job", 0, 2);

	for (ssize_t i = 0; i < n; i++)
		CHECK_EQ(ctl_decode(buf, (size_t)i, &m), 0);
	/* Two messages back to back: the first is decoded alone. */
	ctl_encode_ready(buf + n, sizeof(buf) - (size_t)n, 2, 1);
	CHECK_EQ(ctl_decode(buf, sizeof(buf), &m), n);
}

TEST(ctl_rejects_malformed)
{
	uint8_t buf[512];
	struct ctl_msg m;
	struct ctl_hdr *h = (struct ctl_hdr *)buf;
	struct ctl_join_wire *j = (struct ctl_join_wire *)(buf + sizeof(*h));
	ssize_t n;

	n = ctl_encode_hello(buf, sizeof(buf), CTL_ROLE_ENDPOINT);
	h->version = CTL_VERSION + 1;
	CHECK_EQ(ctl_decode(buf, (size_t)n, &m), -EPROTO);
	n = ctl_encode_hello(buf, sizeof(buf), 7);       /* unknown role */
	CHECK_EQ(ctl_decode(buf, (size_t)n, &m), -EPROTO);
	n = ctl_encode_hello(buf, sizeof(buf), CTL_ROLE_ENDPOINT);
	h->flags = 1;
	CHECK_EQ(ctl_decode(buf, (size_t)n, &m), -EPROTO);
	h->flags = 0;
	h->type = 99;
	CHECK_EQ(ctl_decode(buf, (size_t)n, &m), -EPROTO);
	h->type = CTL_HELLO;
	h->len = CTL_MAX_BODY + 1;
	CHECK_EQ(ctl_decode(buf, sizeof(buf), &m), -EPROTO);

	n = ctl_encode_join(buf, sizeof(buf), "job", 1, 2);
	j->rank = 2;                                      /* rank >= size */
	CHECK_EQ(ctl_decode(buf, (size_t)n, &m), -EPROTO);
	j->rank = 0;
	j->size = 0;
	CHECK_EQ(ctl_decode(buf, (size_t)n, &m), -EPROTO);
	j->size = 2;
	j->name_len = 4;                                  /* longer than the body */
	CHECK_EQ(ctl_decode(buf, (size_t)n, &m), -EPROTO);
	j->name_len = 3;
	buf[sizeof(*h) + sizeof(*j) + 1] = '\n';          /* control character in the name */
	CHECK_EQ(ctl_decode(buf, (size_t)n, &m), -EPROTO);

	n = ctl_encode_error(buf, sizeof(buf), EINVAL, "x");
	((struct ctl_error_wire *)(buf + sizeof(*h)))->err = -3;
	CHECK_EQ(ctl_decode(buf, (size_t)n, &m), -EPROTO);
	n = ctl_encode_query(buf, sizeof(buf), 42, 0);
	CHECK_EQ(ctl_decode(buf, (size_t)n, &m), -EPROTO);
}

/* COLL and COLL_DONE: what a rank posts, what ferryd answers. */
TEST(ctl_collectives)
{
	uint8_t buf[512];
	struct ctl_msg m;
	struct ctl_coll_wire c = { .kind = CTL_COLL_BARRIER, .seq = 7 };
	ssize_t n = ctl_encode_coll(buf, sizeof(buf), &c);

	CHECK(n > 0);
	CHECK_EQ(ctl_decode(buf, (size_t)n, &m), n);
	CHECK_EQ(m.type, CTL_COLL);
	CHECK_EQ(m.u.coll.kind, CTL_COLL_BARRIER);
	CHECK_EQ(m.u.coll.seq, 7);
	/* refused on both sides: no kind, seq 0, flags, a barrier with
	 * arguments, a buffer in no region, one past the end of memory, an
	 * unknown strategy */
	struct ctl_coll_wire bad[8] = { { .kind = 0, .seq = 1 }, { .kind = CTL_COLL_BARRIER, .seq = 0 },
					{ .kind = CTL_COLL_BARRIER, .seq = 1, .flags = 1 },
					{ .kind = CTL_COLL_BARRIER, .seq = 1, .count = 5 },
					{ .kind = CTL_COLL_ALLTOALL, .seq = 1, .send = { .mem = 0, .len = 8 } },
					{ .kind = CTL_COLL_ALLTOALL, .seq = 1,
					  .recv = { .mem = 1, .off = UINT64_MAX, .len = 2 } },
					{ .kind = CTL_COLL_ALLTOALL, .seq = 1, .strategy = 5 },
					{ .kind = CTL_COLL_KIND_MAX + 1, .seq = 1 } };
	for (int i = 0; i < 8; i++) {
		CHECK_EQ(ctl_encode_coll(buf, sizeof(buf), &bad[i]), -EINVAL);
		/* forged: the decoder refuses it too */
		n = ctl_encode_coll(buf, sizeof(buf), &c);
		memcpy(buf + sizeof(struct ctl_hdr), &bad[i], sizeof(bad[i]));
		CHECK_EQ(ctl_decode(buf, (size_t)n, &m), -EPROTO);
	}
	n = ctl_encode_coll_done(buf, sizeof(buf), 0x5eed, 7, 0, "ignored");
	CHECK(n > 0);
	CHECK_EQ(ctl_decode(buf, (size_t)n, &m), n);
	CHECK_EQ(m.u.coll_done.seq, 7);
	CHECK_EQ(m.u.coll_done.group, 0x5eed);
	CHECK_EQ(m.u.coll_done.err, 0);
	CHECK_EQ(m.u.coll_done.text[0], 0);
	n = ctl_encode_coll_done(buf, sizeof(buf), 0, 8, EPIPE, "rank 3 left");
	CHECK_EQ(ctl_decode(buf, (size_t)n, &m), n);
	CHECK_EQ(m.u.coll_done.err, EPIPE);
	CHECK(strcmp(m.u.coll_done.text, "rank 3 left") == 0);
	/* an all-to-all of 8-byte blocks between buffers of regions 1 and 2 */
	struct ctl_coll_wire a = { .kind = CTL_COLL_ALLTOALL, .seq = 2, .strategy = 2, .count = 8,
				   .send = { .mem = 1, .off = 64, .len = 32 }, .recv = { .mem = 2, .len = 32 } };
	n = ctl_encode_coll(buf, sizeof(buf), &a);
	CHECK_EQ(ctl_decode(buf, (size_t)n, &m), n);
	CHECK(m.u.coll.send.mem == 1 && m.u.coll.send.off == 64 && m.u.coll.recv.mem == 2 && m.u.coll.count == 8);
	/* the reductions: a type and op that go together in flags, nothing
	 * else there (FERRY_IN_PLACE is libferry's); the others none */
	{
		uint32_t sum_i32 = COLL_INT32 << CTL_COLL_TYPE_SHIFT | COLL_SUM << CTL_COLL_OP_SHIFT;
		uint32_t band_dbl = COLL_DOUBLE << CTL_COLL_TYPE_SHIFT | COLL_BAND << CTL_COLL_OP_SHIFT;
		struct ctl_coll_wire r = { .kind = CTL_COLL_ALLREDUCE, .seq = 3, .count = 4, .flags = sum_i32,
					   .send = { .mem = 1, .len = 16 }, .recv = { .mem = 1, .off = 16, .len = 16 } };
		struct ctl_coll_wire rbad[] = {
			{ .kind = CTL_COLL_ALLREDUCE, .seq = 1, .flags = band_dbl },            /* no such pair */
			{ .kind = CTL_COLL_ALLREDUCE, .seq = 1, .flags = sum_i32 | CTL_COLL_IN_PLACE },
			{ .kind = CTL_COLL_ALLREDUCE, .seq = 1, .flags = sum_i32 | 1u << 24 },
			{ .kind = CTL_COLL_ALLREDUCE, .seq = 1, .flags = 11u << CTL_COLL_TYPE_SHIFT },
			{ .kind = CTL_COLL_ALLGATHER, .seq = 1, .flags = sum_i32 },             /* moves bytes */
			{ .kind = CTL_COLL_BCAST, .seq = 1, .flags = CTL_COLL_IN_PLACE },
			{ .kind = CTL_COLL_ALLREDUCE, .seq = 1, .flags = sum_i32, .root = 1 },  /* no root */
			{ .kind = CTL_COLL_REDUCE_SCATTER, .seq = 1, .flags = sum_i32 },        /* no counts */
			{ .kind = CTL_COLL_SCAN, .seq = 1, .flags = sum_i32, .strategy = 2 },   /* one algorithm */
		};

		n = ctl_encode_coll(buf, sizeof(buf), &r);
		CHECK_EQ(ctl_decode(buf, (size_t)n, &m), n);
		CHECK(CTL_COLL_TYPE(m.u.coll.flags) == COLL_INT32 && CTL_COLL_OP(m.u.coll.flags) == COLL_SUM);
		r.kind = CTL_COLL_REDUCE;
		r.root = 3;
		CHECK(ctl_encode_coll(buf, sizeof(buf), &r) > 0);
		for (size_t i = 0; i < sizeof(rbad) / sizeof(rbad[0]); i++)
			CHECK_EQ(ctl_encode_coll(buf, sizeof(buf), &rbad[i]), -EINVAL);
		CHECK(ctl_coll_algs(CTL_COLL_SCAN) == ctl_scan_algs && ctl_coll_algs(CTL_COLL_BARRIER) == NULL);
		CHECK(strcmp(ctl_coll_kind_name(CTL_COLL_REDUCE_SCATTER_BLOCK), "reduce_scatter_block") == 0);
		CHECK_EQ(ctl_coll_kind_by_name("exscan"), CTL_COLL_EXSCAN);
		CHECK_EQ(ctl_coll_kind_by_name("nonesuch"), 0);
	}
	/* MEM and MEM_FREE */
	n = ctl_encode_mem(buf, sizeof(buf), CTL_MEM, 3, 4096);
	CHECK_EQ(ctl_decode(buf, (size_t)n, &m), n);
	CHECK(m.type == CTL_MEM && m.u.mem.id == 3 && m.u.mem.bytes == 4096);
	CHECK_EQ(ctl_encode_mem(buf, sizeof(buf), CTL_MEM, 0, 4096), -EINVAL);
	CHECK_EQ(ctl_encode_mem(buf, sizeof(buf), CTL_MEM_FREE, 3, 1), -EINVAL);
	n = ctl_encode_mem(buf, sizeof(buf), CTL_MEM_FREE, 3, 0);
	CHECK_EQ(ctl_decode(buf, (size_t)n, &m), n);
	buf[sizeof(struct ctl_hdr) + 8] = 1;     /* FREE with bytes */
	CHECK_EQ(ctl_decode(buf, (size_t)n, &m), -EPROTO);
	CHECK_EQ(ctl_encode_coll_done(buf, sizeof(buf), 0, 1, -1, ""), -EINVAL);
	/* group 0 seq 0: the answer to a LAYOUT */
	n = ctl_encode_coll_done(buf, sizeof(buf), 0, 0, 0, "");
	CHECK_EQ(ctl_decode(buf, (size_t)n, &m), n);
	CHECK(m.type == CTL_COLL_DONE && m.u.coll_done.seq == 0 && m.u.coll_done.group == 0);
	/* LAYOUT: a buffer in a region, not empty */
	{
		struct ctl_buf lb = { .mem = 2, .off = 8, .len = 16 }, none = { 0 }, empty = { .mem = 2 };

		n = ctl_encode_layout(buf, sizeof(buf), &lb);
		CHECK_EQ(ctl_decode(buf, (size_t)n, &m), n);
		CHECK(m.type == CTL_LAYOUT && m.u.layout.mem == 2 && m.u.layout.off == 8 && m.u.layout.len == 16);
		CHECK_EQ(ctl_encode_layout(buf, sizeof(buf), &none), -EINVAL);
		CHECK_EQ(ctl_encode_layout(buf, sizeof(buf), &empty), -EINVAL);
		memcpy(buf + sizeof(struct ctl_hdr), &empty, sizeof(empty));  /* forged */
		CHECK_EQ(ctl_decode(buf, (size_t)n, &m), -EPROTO);
	}
	/* GROUP_FREE: an id, nothing else */
	n = ctl_encode_group_free(buf, sizeof(buf), 0xabcd);
	CHECK_EQ(ctl_decode(buf, (size_t)n, &m), n);
	CHECK(m.type == CTL_GROUP_FREE && m.u.group.id == 0xabcd);
	CHECK_EQ(ctl_encode_group_free(buf, sizeof(buf), 0), -EINVAL);
	buf[sizeof(struct ctl_hdr) + 4] = 1;     /* reserved */
	CHECK_EQ(ctl_decode(buf, (size_t)n, &m), -EPROTO);
	/* SPLIT: an all-to-all of 8-byte blocks, no other count */
	{
		struct ctl_coll_wire sp = { .kind = CTL_COLL_SPLIT, .seq = 3, .count = 8,
					    .send = { .mem = 1, .len = 32 }, .recv = { .mem = 1, .off = 32, .len = 32 } };

		n = ctl_encode_coll(buf, sizeof(buf), &sp);
		CHECK_EQ(ctl_decode(buf, (size_t)n, &m), n);
		CHECK(m.u.coll.kind == CTL_COLL_SPLIT && m.u.coll.count == 8);
		sp.count = 16;
		CHECK_EQ(ctl_encode_coll(buf, sizeof(buf), &sp), -EINVAL);
	}
	/* group ids: never 0, and they differ with each of their inputs */
	CHECK(coll_group_id(0, 1, 0) != 0);
	CHECK(coll_group_id(0, 1, 0) != coll_group_id(0, 2, 0));
	CHECK(coll_group_id(0, 1, 0) != coll_group_id(0, 1, 1));
	CHECK(coll_group_id(0, 1, 0) != coll_group_id(1, 1, 0));
	CHECK_EQ(coll_group_id(7, 3, 5), coll_group_id(7, 3, 5));
	/* text with success, or a length that is not the body's: refused */
	n = ctl_encode_coll_done(buf, sizeof(buf), 0, 8, EPIPE, "x");
	struct ctl_coll_done_wire d;
	memcpy(&d, buf + sizeof(struct ctl_hdr), sizeof(d));
	d.err = 0;
	memcpy(buf + sizeof(struct ctl_hdr), &d, sizeof(d));
	CHECK_EQ(ctl_decode(buf, (size_t)n, &m), -EPROTO);
	d.err = EPIPE;
	d.text_len = 2;
	memcpy(buf + sizeof(struct ctl_hdr), &d, sizeof(d));
	CHECK_EQ(ctl_decode(buf, (size_t)n, &m), -EPROTO);
}

TEST(job_names)
{
	CHECK(proto_name_ok("a", 1));
	CHECK(proto_name_ok("prterun-host-123@1", 18));
	CHECK(!proto_name_ok("", 0));
	CHECK(!proto_name_ok("a b", 3));
	CHECK(!proto_name_ok("\xc3\xa9", 2));
	char long_name[PROTO_NAME_MAX + 2];
	memset(long_name, 'x', sizeof(long_name));
	CHECK(proto_name_ok(long_name, PROTO_NAME_MAX));
	CHECK(!proto_name_ok(long_name, PROTO_NAME_MAX + 1));
}

TEST(frame_header_round_trip_and_checks)
{
	uint8_t buf[24];
	struct wire_frame_hdr h = { .version = WIRE_VERSION, .kind = WIRE_DATA, .len = 4096,
				    .seq = 0x1122334455667788ull, .ack = 77 }, d;

	wire_encode_hdr(buf, &h);
	CHECK_EQ(buf[8], 0x88);                /* little-endian on the wire */
	CHECK_EQ(wire_decode_hdr(buf, &d), 0);
	CHECK(memcmp(&h, &d, sizeof(h)) == 0);

	struct wire_frame_hdr bad[] = {
		{ .version = WIRE_VERSION + 1, .kind = WIRE_DATA, .seq = 1 },
		{ .version = WIRE_VERSION, .kind = 0 },
		{ .version = WIRE_VERSION, .kind = 9 },
		{ .version = WIRE_VERSION, .kind = WIRE_DATA, .flags = WIRE_FRAME_MAC, .len = 15, .seq = 1 }, /* no room for the tag */
		{ .version = WIRE_VERSION, .kind = WIRE_DATA, .flags = WIRE_FRAME_SEALED, .len = 64, .seq = 1 }, /* sealed needs MAC */
		{ .version = WIRE_VERSION, .kind = WIRE_DATA, .flags = 32, .len = 64, .seq = 1 },      /* no such flag */
		{ .version = WIRE_VERSION, .kind = WIRE_ACK, .flags = WIRE_FRAME_URGENT },     /* only DATA is urgent */
		{ .version = WIRE_VERSION, .kind = WIRE_ACK, .flags = WIRE_FRAME_ACK_SOON },   /* ... or asks for an ack */
		{ .version = WIRE_VERSION, .kind = WIRE_ACK, .flags = WIRE_FRAME_ACK_LAZY },   /* ... or says how */
		{ .version = WIRE_VERSION, .kind = WIRE_DATA, .len = WIRE_BODY_MAX + 1, .seq = 1 },
		{ .version = WIRE_VERSION, .kind = WIRE_DATA, .flags = WIRE_FRAME_MAC, .len = WIRE_BODY_MAX + 17, .seq = 1 },
		{ .version = WIRE_VERSION, .kind = WIRE_ACK, .flags = WIRE_FRAME_MAC, .len = 24 }, /* a tag, no body */
		{ .version = WIRE_VERSION, .kind = WIRE_HELLO, .flags = WIRE_FRAME_MAC, .len = 160 }, /* never sealed */
		{ .version = WIRE_VERSION, .kind = WIRE_DATA, .seq = 0 },     /* DATA needs a seq */
		{ .version = WIRE_VERSION, .kind = WIRE_ACK, .len = 8 },       /* ACK has no body */
		{ .version = WIRE_VERSION, .kind = WIRE_HELLO, .seq = 5 },     /* HELLO has no seq */
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		wire_encode_hdr(buf, &bad[i]);
		CHECK_EQ(wire_decode_hdr(buf, &d), -EPROTO);
	}

	/* Sealed frames: the tag is counted in len, on top of the largest body. */
	struct wire_frame_hdr good[] = {
		{ .version = WIRE_VERSION, .kind = WIRE_DATA, .flags = WIRE_FRAME_MAC, .len = WIRE_BODY_MAX + 16, .seq = 1 },
		{ .version = WIRE_VERSION, .kind = WIRE_DATA, .flags = WIRE_FRAME_MAC | WIRE_FRAME_SEALED, .len = 16, .seq = 2 },
		{ .version = WIRE_VERSION, .kind = WIRE_ACK, .flags = WIRE_FRAME_MAC, .len = 16, .ack = 3 },
		{ .version = WIRE_VERSION, .kind = WIRE_DATA, .flags = WIRE_FRAME_URGENT | WIRE_FRAME_ACK_SOON, .len = 64, .seq = 4 },
		{ .version = WIRE_VERSION, .kind = WIRE_DATA, .flags = WIRE_FRAME_URGENT | WIRE_FRAME_ACK_LAZY, .len = 64, .seq = 5 },
	};
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		wire_encode_hdr(buf, &good[i]);
		CHECK_EQ(wire_decode_hdr(buf, &d), 0);
		CHECK(memcmp(&good[i], &d, sizeof(d)) == 0);
	}
}

TEST(frame_items_round_trip_and_truncation)
{
	uint8_t body[4096], payload[300];
	size_t len = 0, off = 0;
	struct wire_item it;
	const void *p;
	int n = 0;

	for (uint32_t i = 0; i < 10; i++) {
		struct wire_item w = { .len = i * 29, .channel = (uint16_t)i, .node = i, .job = 7, .gen = (uint8_t)(250 + i),
				       .dst = i + 1, .src = i + 2, .flags = i == 3 ? WIRE_ITEM_MORE : 0 };

		memset(payload, (int)i, sizeof(payload));
		len += wire_encode_item(body + len, &w, payload);
	}
	CHECK_EQ(len % 8, 0);
	while (wire_next_item(body, len, &off, &it, &p) == 1) {
		CHECK_EQ(it.len, (uint32_t)n * 29);
		CHECK_EQ(it.dst, (uint32_t)n + 1);
		CHECK_EQ(it.gen, (uint8_t)(250 + n));
		CHECK_EQ(it.flags, n == 3 ? WIRE_ITEM_MORE : 0);
		CHECK(it.len == 0 || ((const uint8_t *)p)[it.len - 1] == n);
		n++;
	}
	CHECK_EQ(n, 10);
	CHECK_EQ(off, len);
	/* Every truncation of the body is an error, never a read past it. */
	for (size_t cut = 1; cut < len; cut++) {
		size_t o = 0;
		int r;

		while ((r = wire_next_item(body, len - cut, &o, &it, &p)) == 1)
			;
		if (r == 0)
			CHECK(o == len - cut);       /* ended exactly on an item boundary */
		else
			CHECK_EQ(r, -EPROTO);
	}
	((struct wire_item *)body)->flags = WIRE_ITEM_BATCH;    /* an empty batch: none such */
	off = 0;
	CHECK_EQ(wire_next_item(body, len, &off, &it, &p), -EPROTO);
}

/* n item records for dst, src as a client writes a batch: lengths 0, 5,
 * 16, 21, ... (i * 5 + (i & 1) * 11 bytes), payload bytes i, padding zero.
 * Returns the bytes written. */
static uint32_t make_batch(uint8_t *buf, uint32_t n, uint32_t dst, uint32_t src)
{
	uint32_t off = 0;

	for (uint32_t i = 0; i < n; i++) {
		struct proto_rec r = { .len = i * 5 + (i & 1) * 11, .kind = PROTO_REC_ITEM, .channel = (uint16_t)i,
				       .dst = dst, .src = src };

		memcpy(buf + off, &r, sizeof(r));
		memset(buf + off + sizeof(r), 0, ring_footprint(r.len) - sizeof(r));
		memset(buf + off + sizeof(r), (int)i, r.len);
		off += (uint32_t)ring_footprint(r.len);
	}
	return off;
}

/* A batch element of count items as the tests below put them: generation
 * 7, node 3, job 0x1001, from rank 9 to rank 4. */
static void check_batch_elem(const struct wire_item *it, uint8_t flags, uint16_t count)
{
	CHECK_EQ(it->flags, flags);
	CHECK_EQ(it->channel, count);
	CHECK_EQ(it->node, 3);
	CHECK_EQ(it->job, 0x1001);
	CHECK_EQ(it->gen, 7);
	CHECK_EQ(it->dst, 4);
	CHECK_EQ(it->src, 9);
	CHECK_EQ(wire_item_count(it), count);
}

TEST(batches_checked_and_carried)
{
	static uint8_t recs[PROTO_BATCH_MAX + 64], frame[PROTO_BATCH_MAX + 256];
	uint64_t w1 = 4 | (uint64_t)9 << 32;
	uint32_t len = make_batch(recs, 20, 4, 9), k;
	struct wire_item it;
	const void *p;
	size_t off = 0;

	CHECK_EQ(proto_batch_check(recs, len, w1), 20);
	/* Another rank's records, another sender's, a length past the end,
	 * a flag, another kind, an empty or unaligned batch: not a batch. */
	CHECK_EQ(proto_batch_check(recs, len, w1 + 1), 0);
	CHECK_EQ(proto_batch_check(recs, len, w1 + ((uint64_t)1 << 32)), 0);
	CHECK_EQ(proto_batch_check(recs, len - 8, w1), 0);
	CHECK_EQ(proto_batch_check(recs, 0, w1), 0);
	recs[16 + 5] = 1;               /* the second record's flags (the first is empty) */
	CHECK_EQ(proto_batch_check(recs, len, w1), 0);
	recs[16 + 5] = 0;
	recs[16 + 16] = 0xff;           /* its payload: anything goes */
	CHECK_EQ(proto_batch_check(recs, len, w1), 20);
	((struct proto_rec *)recs)->flags = PROTO_REC_MORE;
	CHECK_EQ(proto_batch_check(recs, len, w1), 0);
	((struct proto_rec *)recs)->flags = 0;
	((struct proto_rec *)recs)->kind = PROTO_REC_FLUSH;
	CHECK_EQ(proto_batch_check(recs, len, w1), 0);
	((struct proto_rec *)recs)->kind = PROTO_REC_ITEM;
	((struct proto_rec *)recs)->len = PROTO_BATCH_ITEM_MAX + 1;
	CHECK_EQ(proto_batch_check(recs, len, w1), 0);
	((struct proto_rec *)recs)->len = 0;
	CHECK_EQ(proto_batch_check(recs, len, w1), 20);
	/* The largest batch is taken, one byte more is not. */
	{
		struct proto_rec big = { .len = PROTO_BATCH_MAX - 16, .kind = PROTO_REC_ITEM, .dst = 4, .src = 9 };

		memcpy(recs, &big, sizeof(big));
		CHECK_EQ(proto_batch_check(recs, PROTO_BATCH_MAX, w1), 0);       /* above PROTO_BATCH_ITEM_MAX */
		big.len = PROTO_BATCH_ITEM_MAX;
		memcpy(recs, &big, sizeof(big));
		CHECK_EQ(proto_batch_check(recs, (uint32_t)ring_footprint(big.len), w1), 1);
		CHECK_EQ(proto_batch_check(recs, PROTO_BATCH_MAX + 8, w1), 0);
	}

	/* Into a frame and out again, as the daemons carry it. */
	len = make_batch(recs, 20, 4, 9);
	k = (uint32_t)wire_put_batch(frame, recs, len, 7, 3, 0x1001, w1);
	CHECK_EQ(k, 20);
	CHECK_EQ(wire_next_item(frame, wire_item_footprint(len), &off, &it, &p), 1);
	check_batch_elem(&it, WIRE_ITEM_BATCH, 20);
	CHECK(memcmp(p, recs, len) == 0);
	CHECK_EQ(off, wire_item_footprint(len));
	/* A count that is not the records', a batch of job 0, a batch with
	 * another flag, a record changed on the way: refused. */
	((struct wire_item *)frame)->channel = 19;
	off = 0;
	CHECK_EQ(wire_next_item(frame, wire_item_footprint(len), &off, &it, &p), -EPROTO);
	((struct wire_item *)frame)->channel = 20;
	((struct wire_item *)frame)->job = 0;
	off = 0;
	CHECK_EQ(wire_next_item(frame, wire_item_footprint(len), &off, &it, &p), -EPROTO);
	((struct wire_item *)frame)->job = 0x1001;
	((struct wire_item *)frame)->flags = WIRE_ITEM_BATCH | 2;
	off = 0;
	CHECK_EQ(wire_next_item(frame, wire_item_footprint(len), &off, &it, &p), -EPROTO);
	((struct wire_item *)frame)->flags = WIRE_ITEM_DENSE;   /* records are no dense batch */
	off = 0;
	CHECK_EQ(wire_next_item(frame, wire_item_footprint(len), &off, &it, &p), -EPROTO);
	((struct wire_item *)frame)->flags = WIRE_ITEM_BATCH;
	((struct proto_rec *)(frame + sizeof(struct wire_item)))->src = 8;
	off = 0;
	CHECK_EQ(wire_next_item(frame, wire_item_footprint(len), &off, &it, &p), -EPROTO);
	/* Records that are not a batch never make a frame element. */
	CHECK_EQ(wire_put_batch(frame, recs, len, 7, 3, 0x1001, w1 + 1), 0);
	CHECK_EQ(wire_put_batch(frame, recs, PROTO_BATCH_MAX + 8, 7, 3, 0x1001, w1), 0);
	/* The count must be the records': fewer or more, refused. */
	{
		uint64_t w[3];

		wire_put_batch(frame, recs, len, 7, 3, 0x1001, w1);
		memcpy(w, frame, sizeof(w));
		CHECK(wire_batch_ok(w[0], w[1], w[2], frame + sizeof(struct wire_item)));
		CHECK(!wire_batch_ok(w[0] + ((uint64_t)1 << 48), w[1], w[2], frame + sizeof(struct wire_item)));
		CHECK(!wire_batch_ok(w[0] - ((uint64_t)1 << 48), w[1], w[2], frame + sizeof(struct wire_item)));
		CHECK(!wire_batch_ok(w[0] | ((uint64_t)400 << 48), w[1], w[2], frame + sizeof(struct wire_item)));
		/* An item that is not a batch is none of its business. */
		CHECK(wire_batch_ok(16, 3 | (uint64_t)0x1001 << 32, w1, frame));
	}
}

/* A dense header word: count items of len bytes on channel. */
static uint64_t dense_word(uint32_t len, uint16_t channel, uint32_t count)
{
	return len | (uint64_t)channel << 16 | (uint64_t)count << 32;
}

TEST(dense_batches_checked_and_carried)
{
	static uint8_t pay[PROTO_BATCH_MAX], frame[PROTO_BATCH_MAX + 256];
	uint64_t w1 = 4 | (uint64_t)9 << 32, h, w[3];
	struct proto_dense d;
	struct proto_rec rec = { .kind = PROTO_REC_DENSE };
	struct wire_item it;
	const void *p;
	size_t off = 0;

	/* The header as the words say it is. */
	h = dense_word(13, 7, 5);
	memcpy(&d, &h, 8);
	CHECK_EQ(d.len, 13);
	CHECK_EQ(d.channel, 7);
	CHECK_EQ(d.count, 5);
	CHECK_EQ(proto_dense_stride(h), 16);
	/* len is exactly 8 + count x stride: 8-byte items at 8, 13 at 16, 0 at 0. */
	CHECK_EQ(proto_dense_check(dense_word(8, 0, 511), 8 + 511 * 8), 511);
	CHECK_EQ(proto_dense_check(dense_word(13, 3, 5), 8 + 5 * 16), 5);
	CHECK_EQ(proto_dense_check(dense_word(0, 3, PROTO_DENSE_COUNT_MAX), 8), PROTO_DENSE_COUNT_MAX);
	CHECK_EQ(proto_dense_check(dense_word(1, 0, 1), 16), 1);
	/* Inconsistent: a length short or long by a stride or a byte, no
	 * items, too many, an item too long, a count that overflows. */
	CHECK_EQ(proto_dense_check(dense_word(8, 0, 4), 8 + 3 * 8), 0);
	CHECK_EQ(proto_dense_check(dense_word(8, 0, 4), 8 + 5 * 8), 0);
	CHECK_EQ(proto_dense_check(dense_word(13, 0, 4), 8 + 4 * 13), 0);
	CHECK_EQ(proto_dense_check(dense_word(8, 0, 0), 8), 0);
	CHECK_EQ(proto_dense_check(dense_word(0, 0, 0), 8), 0);
	CHECK_EQ(proto_dense_check(dense_word(0, 0, PROTO_DENSE_COUNT_MAX + 1), 8), 0);
	CHECK_EQ(proto_dense_check(dense_word(0, 0, 1), 16), 0);
	CHECK_EQ(proto_dense_check(dense_word(PROTO_DENSE_ITEM_MAX + 1, 0, 1), 8 + PROTO_DENSE_ITEM_MAX + 8), 0);
	CHECK_EQ(proto_dense_check(dense_word(PROTO_DENSE_ITEM_MAX, 0, 1), 8 + PROTO_DENSE_ITEM_MAX), 1);
	CHECK_EQ(proto_dense_check(dense_word(8, 0, 0x80000001u), 16), 0);
	/* Consistent but longer than PROTO_BATCH_MAX (a peer's: what one node
	 * refuses, every node and libferry refuse alike; review finding). */
	CHECK_EQ(proto_dense_check(dense_word(PROTO_DENSE_ITEM_MAX, 0, 16), 8 + 16 * PROTO_DENSE_ITEM_MAX), 0);
	CHECK_EQ(proto_dense_check(dense_word(120, 0, PROTO_DENSE_COUNT_MAX), 8 + PROTO_DENSE_COUNT_MAX * 120), 0);
	CHECK_EQ(proto_dense_check(dense_word(2048, 0, 2), 8 + 2 * 2048), 0);
	CHECK_EQ(proto_dense_check(dense_word(2040, 0, 2), 8 + 2 * 2040), 2);
	/* Items a record holds. */
	h = dense_word(8, 2, 17);
	memcpy(pay, &h, 8);
	rec.len = 8 + 17 * 8;
	CHECK_EQ(proto_rec_items(&rec, pay), 17);
	rec.kind = PROTO_REC_ITEM;
	CHECK_EQ(proto_rec_items(&rec, pay), 1);
	rec.kind = PROTO_REC_STEP;
	CHECK_EQ(proto_rec_items(&rec, pay), 0);

	/* Into a frame and out again, as the daemons carry it: the header
	 * written as checked, the items copied. */
	for (uint32_t i = 0; i < 17 * 8; i++)
		pay[8 + i] = (uint8_t)i;
	CHECK_EQ(wire_put_dense(frame, h, pay + 8, 8 + 17 * 8, 17, 7, 3, 0x1001, w1), wire_item_footprint(8 + 17 * 8));
	CHECK_EQ(wire_next_item(frame, wire_item_footprint(8 + 17 * 8), &off, &it, &p), 1);
	check_batch_elem(&it, WIRE_ITEM_DENSE, 17);
	CHECK_EQ(it.len, 8 + 17 * 8);
	CHECK(memcmp(p, pay, 8 + 17 * 8) == 0);
	memcpy(w, frame, sizeof(w));
	CHECK(wire_batch_ok(w[0], w[1], w[2], frame + sizeof(struct wire_item)));
	/* A count that is not the header's, job 0, a header changed on the
	 * way: refused. */
	CHECK(!wire_batch_ok(w[0] + ((uint64_t)1 << 48), w[1], w[2], frame + sizeof(struct wire_item)));
	CHECK(!wire_batch_ok(w[0] - ((uint64_t)1 << 48), w[1], w[2], frame + sizeof(struct wire_item)));
	CHECK(!wire_batch_ok(w[0], w[1] & 0xffffffffu, w[2], frame + sizeof(struct wire_item)));
	h = dense_word(16, 2, 17);
	memcpy(frame + sizeof(struct wire_item), &h, 8);
	off = 0;
	CHECK_EQ(wire_next_item(frame, wire_item_footprint(8 + 17 * 8), &off, &it, &p), -EPROTO);
	/* Shorter than its header. */
	CHECK(!wire_batch_ok(4 | (uint64_t)WIRE_ITEM_DENSE << 32 | (uint64_t)1 << 48, w[1], w[2],
			     frame + sizeof(struct wire_item)));
	/* Zero-length items: the header alone. */
	h = dense_word(0, 9, 300);
	CHECK_EQ(wire_put_dense(frame, h, pay, 8, 300, 0, 3, 0x1001, w1), wire_item_footprint(8));
	off = 0;
	CHECK_EQ(wire_next_item(frame, wire_item_footprint(8), &off, &it, &p), 1);
	CHECK_EQ(wire_item_count(&it), 300);
}

static struct wire_hello good_hello(void)
{
	struct wire_hello h = { .magic = WIRE_MAGIC, .version = WIRE_VERSION, .from = 1, .to = 2,
				.incarnation = 77, .peer_incarnation = 5, .ack = 9, .cluster_len = 4 };

	memcpy(h.cluster, "lqcd", 4);
	memset(h.nonce, 0xab, sizeof(h.nonce));
	return h;
}

TEST(hello_round_trip_and_checks)
{
	struct wire_hello h = good_hello(), d;
	uint8_t buf[sizeof(h)];

	wire_encode_hello(buf, &h);
	CHECK_EQ(wire_decode_hello(buf, sizeof(buf), &d), 0);
	CHECK(memcmp(&h, &d, sizeof(h)) == 0);
	CHECK_EQ(wire_decode_hello(buf, sizeof(buf) - 1, &d), -EPROTO);

	struct wire_hello bad[10];
	for (int i = 0; i < 10; i++)
		bad[i] = good_hello();
	bad[0].magic = 0x12345678;
	bad[1].version = WIRE_VERSION + 1;
	bad[2].flags = 0x80;
	bad[3].incarnation = 0;
	bad[4].cluster_len = 0;
	bad[5].cluster_len = 64;
	bad[6].reserved[3] = 1;
	bad[7].cluster[10] = 'x';               /* bytes after the name must be zero */
	bad[8].flags = WIRE_HELLO_ENCRYPT;      /* encryption without integrity */
	bad[9].flags = WIRE_HELLO_INSECURE | WIRE_HELLO_INTEGRITY;      /* integrity without a key */
	for (int i = 0; i < 10; i++) {
		wire_encode_hello(buf, &bad[i]);
		CHECK_EQ(wire_decode_hello(buf, sizeof(buf), &d), -EPROTO);
	}
	h = good_hello();
	h.cluster[1] = ' ';
	wire_encode_hello(buf, &h);
	CHECK_EQ(wire_decode_hello(buf, sizeof(buf), &d), -EPROTO);
}

TEST(control_items_round_trip)
{
	uint8_t buf[70000];
	struct wire_ctl c;
	struct wire_ctl_rank r = { .uid = 1000, .size = 8, .rank = 3, .incarnation = 0xabcdef0123ull, .name_len = 4 };
	struct wire_ctl_table t = { .uid = 1000, .job = 4097, .size = 20000, .first = 16000, .count = 4000,
				    .name_len = 5, .gen = 101 };
	struct wire_ctl_report rep = { .job = 4097, .step = 2, .done = 3, .sent = 1ull << 40, .ringed = 12345,
				       .gen = 102 };
	struct wire_ctl_step st = { .job = 4097, .step = 3, .gen = WIRE_GEN_MASK };
	static uint32_t nodes[WIRE_TABLE_MAX];
	ssize_t n;

	n = wire_ctl_encode_rank(buf, sizeof(buf), &r, "sort");
	CHECK_EQ(wire_ctl_decode(WIRE_CTL_JOIN, buf, (size_t)n, &c), 0);
	CHECK(c.u.rank.uid == 1000 && c.u.rank.rank == 3 && strcmp(c.name, "sort") == 0);
	CHECK(c.u.rank.incarnation == 0xabcdef0123ull);
	CHECK_EQ(wire_ctl_decode(WIRE_CTL_REJECT, buf, (size_t)n, &c), -EPROTO);   /* err must be > 0 */
	r.err = EADDRINUSE;
	n = wire_ctl_encode_rank(buf, sizeof(buf), &r, "sort");
	CHECK_EQ(wire_ctl_decode(WIRE_CTL_REJECT, buf, (size_t)n, &c), -EPROTO);   /* and no incarnation */
	r.incarnation = 0;
	n = wire_ctl_encode_rank(buf, sizeof(buf), &r, "sort");
	CHECK_EQ(wire_ctl_decode(WIRE_CTL_REJECT, buf, (size_t)n, &c), 0);
	CHECK_EQ(wire_ctl_decode(WIRE_CTL_JOIN, buf, (size_t)n, &c), -EPROTO);     /* JOIN has err 0 */
	r.err = 0;
	n = wire_ctl_encode_rank(buf, sizeof(buf), &r, "sort");
	CHECK_EQ(wire_ctl_decode(WIRE_CTL_LEAVE, buf, (size_t)n, &c), -EPROTO);    /* and an incarnation */
	r.incarnation = 1;
	/* LEAVE says how many collectives its node started; the others carry 0 */
	r.coll_started = 41;
	n = wire_ctl_encode_rank(buf, sizeof(buf), &r, "sort");
	CHECK_EQ(wire_ctl_decode(WIRE_CTL_LEAVE, buf, (size_t)n, &c), 0);
	CHECK_EQ(c.u.rank.coll_started, 41);
	CHECK_EQ(wire_ctl_decode(WIRE_CTL_JOIN, buf, (size_t)n, &c), -EPROTO);
	r.coll_started = 0;
	r.size = PROTO_MAX_RANKS + 1;           /* a job larger than any can be */
	n = wire_ctl_encode_rank(buf, sizeof(buf), &r, "sort");
	CHECK_EQ(wire_ctl_decode(WIRE_CTL_JOIN, buf, (size_t)n, &c), -EPROTO);

	for (uint32_t i = 0; i < t.count; i++)
		nodes[i] = i * 7;
	n = wire_ctl_encode_table(buf, sizeof(buf), &t, "sortx", nodes);
	CHECK(n > 0 && n <= (ssize_t)PROTO_FRAG_BYTES);
	CHECK_EQ(wire_ctl_decode(WIRE_CTL_TABLE, buf, (size_t)n, &c), 0);
	CHECK_EQ(c.u.table.count, 4000);
	CHECK_EQ(c.u.table.gen, 101);
	CHECK_EQ(wire_ctl_table_node(&c, 3999), 3999 * 7);
	CHECK_EQ(wire_ctl_decode(WIRE_CTL_TABLE, buf, (size_t)n - 4, &c), -EPROTO);
	t.first = 17000;                        /* first + count > size */
	n = wire_ctl_encode_table(buf, sizeof(buf), &t, "sortx", nodes);
	CHECK_EQ(wire_ctl_decode(WIRE_CTL_TABLE, buf, (size_t)n, &c), -EPROTO);
	t.first = 0;
	t.count = WIRE_TABLE_MAX;
	t.size = WIRE_TABLE_MAX;
	n = wire_ctl_encode_table(buf, sizeof(buf), &t, "sortx", nodes);
	CHECK(n <= (ssize_t)PROTO_FRAG_BYTES);  /* the largest table part fits one item */

	n = wire_ctl_encode_report(buf, sizeof(buf), &rep);
	CHECK_EQ(wire_ctl_decode(WIRE_CTL_REPORT, buf, (size_t)n, &c), 0);
	CHECK(c.u.report.sent == 1ull << 40 && c.u.report.ringed == 12345 && c.u.report.done == 3);
	CHECK_EQ(c.u.report.gen, 102);

	n = wire_ctl_encode_step(buf, sizeof(buf), &st);
	CHECK_EQ(wire_ctl_decode(WIRE_CTL_STEP, buf, (size_t)n, &c), 0);
	CHECK_EQ(c.u.step.step, 3);
	CHECK_EQ(c.u.step.gen, WIRE_GEN_MASK);
	st.gen = WIRE_GEN_MASK + 1;             /* generations are 7 bits (the 8th is an item's step) */
	n = wire_ctl_encode_step(buf, sizeof(buf), &st);
	CHECK_EQ(wire_ctl_decode(WIRE_CTL_STEP, buf, (size_t)n, &c), -EPROTO);
	st.gen = WIRE_GEN_MASK;
	CHECK_EQ(wire_ctl_decode(WIRE_CTL_GO, buf, (size_t)n, &c), -EPROTO);       /* GO has step 0 */
	st.step = 0;
	n = wire_ctl_encode_step(buf, sizeof(buf), &st);
	CHECK_EQ(wire_ctl_decode(WIRE_CTL_HAVE, buf, (size_t)n, &c), 0);
	CHECK_EQ(wire_ctl_decode(99, buf, (size_t)n, &c), -EPROTO);
	CHECK_EQ(wire_ctl_decode(WIRE_CTL_GO, buf, (size_t)n, &c), -EPROTO);       /* GO has a tail */
	st.reserved = 1;
	n = wire_ctl_encode_step(buf, sizeof(buf), &st);
	CHECK_EQ(wire_ctl_decode(WIRE_CTL_HAVE, buf, (size_t)n, &c), -EPROTO);     /* reserved: 0 */
	st.reserved = 0;
	{
		/* GO's tail: a forced algorithm per family, each one there is
		 * (or 0, and 0 past the families); functions of algorithms there
		 * are, in increasing order, not both coefficients 0. */
		struct wire_ctl_go_tail gt = { .force = { 2, 5, 1, 3, 3, 3, 1, 3, 1 }, .nfn = 3 };
		struct wire_go_fn fns[3] = { { CTL_FAM_ALLTOALL, 3, 0, 120000, 400 },
					     { CTL_FAM_ALLREDUCE, 0, 0, 35000, 0 },
					     { CTL_FAM_ALLREDUCE, 2, 0, 0, 90 } }, f;
		uint8_t go[sizeof(st) + sizeof(gt) + sizeof(fns)];

		n = wire_ctl_encode_go(go, sizeof(go), &st, &gt, fns);
		CHECK_EQ(n, 24 + 16 + 36);
		CHECK_EQ(wire_ctl_decode(WIRE_CTL_GO, go, (size_t)n, &c), 0);
		CHECK(memcmp(c.go.force, gt.force, sizeof(gt.force)) == 0 && c.go.nfn == 3);
		wire_ctl_go_fn(&c, 2, &f);
		CHECK(f.fam == CTL_FAM_ALLREDUCE && f.alg == 2 && f.tau_ns == 0 && f.tc_ps == 90);
		CHECK_EQ(wire_ctl_decode(WIRE_CTL_HAVE, go, (size_t)n, &c), -EPROTO);
		CHECK_EQ(wire_ctl_decode(WIRE_CTL_GO, go, (size_t)n - 1, &c), -EPROTO);
		CHECK_EQ(wire_ctl_decode(WIRE_CTL_GO, go, 24, &c), -EPROTO);      /* a version-14 GO */
		CHECK_EQ(wire_ctl_encode_go(go, (size_t)n - 1, &st, &gt, fns), -ENOSPC);
#define GO_REJECTS(what)                                                               \
	do {                                                                           \
		n = wire_ctl_encode_go(go, sizeof(go), &st, &gt, fns);                  \
		CHECK_EQ(wire_ctl_decode(WIRE_CTL_GO, go, (size_t)n, &c), -EPROTO);    \
		what;                                                                  \
	} while (0)
		gt.force[CTL_FAM_SCATTER] = CTL_ROOTED_ALGS + 1;
		GO_REJECTS(gt.force[CTL_FAM_SCATTER] = 0);
		gt.force[CTL_FAM_ALLTOALL] = CTL_A2A_ALGS + 1;
		GO_REJECTS(gt.force[CTL_FAM_ALLTOALL] = 0);
		gt.force[CTL_FAM_SCAN] = 2;
		GO_REJECTS(gt.force[CTL_FAM_SCAN] = 0);
		gt.force[CTL_FAMS] = 1;
		GO_REJECTS(gt.force[CTL_FAMS] = 0);
		fns[1].alg = CTL_ORTH_ALGS;
		GO_REJECTS(fns[1].alg = 0);
		fns[0].fam = CTL_FAMS;
		GO_REJECTS(fns[0].fam = CTL_FAM_ALLTOALL);
		fns[2].alg = 0;                         /* twice the same */
		GO_REJECTS(fns[2].alg = 2);
		fns[0].fam = CTL_FAM_ALLREDUCE;         /* out of order */
		fns[0].alg = 1;
		GO_REJECTS((fns[0].fam = CTL_FAM_ALLTOALL, fns[0].alg = 3));
		fns[1].tau_ns = 0;                      /* neither */
		GO_REJECTS(fns[1].tau_ns = 35000);
		fns[1].reserved = 1;
		GO_REJECTS(fns[1].reserved = 0);
		gt.nfn = WIRE_GO_FNS_MAX + 1;
		CHECK_EQ(wire_ctl_encode_go(go, sizeof(go), &st, &gt, fns), -ENOSPC);
		gt.nfn = 0;
		n = wire_ctl_encode_go(go, sizeof(go), &st, &gt, fns);
		CHECK_EQ(wire_ctl_decode(WIRE_CTL_GO, go, (size_t)n, &c), 0);
#undef GO_REJECTS
	}

	/* XOFF and XON: the step field is a rank. */
	st.step = PROTO_MAX_RANKS - 1;
	n = wire_ctl_encode_step(buf, sizeof(buf), &st);
	CHECK_EQ(wire_ctl_decode(WIRE_CTL_XOFF, buf, (size_t)n, &c), 0);
	st.step = PROTO_MAX_RANKS;
	n = wire_ctl_encode_step(buf, sizeof(buf), &st);
	CHECK_EQ(wire_ctl_decode(WIRE_CTL_XON, buf, (size_t)n, &c), -EPROTO);

	/* FAIL: the text comes back NUL-terminated; it must be printable. */
	{
		struct wire_ctl_fail f = { .job = 4097, .gen = 9, .step = 4, .rank = 2, .node = UINT32_MAX,
					   .err = EPIPE, .coll_ok = 12, .text_len = 11 };

		n = wire_ctl_encode_fail(buf, sizeof(buf), &f, "rank 2 left");
		CHECK_EQ(wire_ctl_decode(WIRE_CTL_FAIL, buf, (size_t)n, &c), 0);
		CHECK(c.u.fail.rank == 2 && c.u.fail.err == EPIPE && c.u.fail.node == UINT32_MAX);
		CHECK_EQ(c.u.fail.coll_ok, 12);
		CHECK_EQ(strcmp(c.text, "rank 2 left"), 0);
		buf[sizeof(f) + 3] = '\n';
		CHECK_EQ(wire_ctl_decode(WIRE_CTL_FAIL, buf, (size_t)n, &c), -EPROTO);
		CHECK_EQ(wire_ctl_decode(WIRE_CTL_FAIL, buf, (size_t)n - 1, &c), -EPROTO);    /* text_len off */
		f.err = 0;
		n = wire_ctl_encode_fail(buf, sizeof(buf), &f, "rank 2 left");
		CHECK_EQ(wire_ctl_decode(WIRE_CTL_FAIL, buf, (size_t)n, &c), -EPROTO);
	}
	/* LOST: a link down or back (no incarnation) or a node restarted (one). */
	{
		struct wire_ctl_lost l = { .node = 7, .text_len = 4 };

		n = wire_ctl_encode_lost(buf, sizeof(buf), &l, "gone");
		CHECK_EQ(wire_ctl_decode(WIRE_CTL_LOST, buf, (size_t)n, &c), 0);
		CHECK(c.u.lost.node == 7 && c.u.lost.kind == WIRE_LOST_LINK && strcmp(c.text, "gone") == 0);
		CHECK_EQ(wire_ctl_decode(WIRE_CTL_FAIL, buf, (size_t)n, &c), -EPROTO);
		l.kind = WIRE_LOST_RESTART;     /* a restart names the new incarnation */
		n = wire_ctl_encode_lost(buf, sizeof(buf), &l, "gone");
		CHECK_EQ(wire_ctl_decode(WIRE_CTL_LOST, buf, (size_t)n, &c), -EPROTO);
		l.incarnation = 0x1122334455667788ull;
		n = wire_ctl_encode_lost(buf, sizeof(buf), &l, "gone");
		CHECK_EQ(wire_ctl_decode(WIRE_CTL_LOST, buf, (size_t)n, &c), 0);
		CHECK(c.u.lost.kind == WIRE_LOST_RESTART && c.u.lost.incarnation == 0x1122334455667788ull);
		l.kind = WIRE_LOST_LINK_BACK;   /* and a link back none */
		n = wire_ctl_encode_lost(buf, sizeof(buf), &l, "gone");
		CHECK_EQ(wire_ctl_decode(WIRE_CTL_LOST, buf, (size_t)n, &c), -EPROTO);
		l.kind = 3;
		n = wire_ctl_encode_lost(buf, sizeof(buf), &l, "gone");
		CHECK_EQ(wire_ctl_decode(WIRE_CTL_LOST, buf, (size_t)n, &c), -EPROTO);
		l.kind = WIRE_LOST_RESTART;
		l.node = WIRE_MAX_NODES;
		n = wire_ctl_encode_lost(buf, sizeof(buf), &l, "gone");
		CHECK_EQ(wire_ctl_decode(WIRE_CTL_LOST, buf, (size_t)n, &c), -EPROTO);
		l.node = 7;
		n = wire_ctl_encode_lost(buf, sizeof(buf), &l, "gone");
		CHECK_EQ(wire_ctl_decode(WIRE_CTL_LOST, buf, (size_t)n - 1, &c), -EPROTO);   /* text_len off */
		buf[20] = 1;                    /* reserved */
		CHECK_EQ(wire_ctl_decode(WIRE_CTL_LOST, buf, (size_t)n, &c), -EPROTO);
	}
}

int main(void)
{
	RUN(ctl_round_trips);
	RUN(ctl_partial_messages_wait_for_more);
	RUN(ctl_rejects_malformed);
	RUN(ctl_collectives);
	RUN(job_names);
	RUN(frame_header_round_trip_and_checks);
	RUN(frame_items_round_trip_and_truncation);
	RUN(batches_checked_and_carried);
	RUN(dense_batches_checked_and_carried);
	RUN(hello_round_trip_and_checks);
	RUN(control_items_round_trip);
	return check_done();
}
