/* tests/unit/test_sched.c - schedules as data (daemon/plan/sched.c), the
 * reduction kernels (reduce.c) and the all-to-all's schedules
 * (a2a_sched.c): every step kind built by hand and run by the simulator,
 * sched_check refusing what is malformed, every kernel against a reference
 * computed here, and every all-to-all strategy delivering every byte exactly
 * once for many node counts, layouts and sizes, with the message counts of
 * seed 000 §2.2-2.4. */
#define UNIT "sched"
#include "check.h"
#include "../../daemon/plan/sched.h"
#include "../../daemon/plan/reduce.h"
#include "../../daemon/plan/a2a.h"
#include "../../daemon/plan/barrier.h"
#include "../../proto/coll.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* ---- a small harness: buffers for every node and slot ---- */

struct mem {
	uint32_t nodes, slots;
	struct sched_mem *m;            /* [nodes] */
};

static void mem_init(struct mem *mm, uint32_t nodes, uint32_t slots, uint64_t len)
{
	mm->nodes = nodes;
	mm->slots = slots;
	mm->m = calloc(nodes, sizeof(*mm->m));
	for (uint32_t i = 0; i < nodes; i++) {
		struct sched_mem *m = &mm->m[i];

		m->send = calloc(slots + 1, sizeof(*m->send));
		m->recv = calloc(slots + 1, sizeof(*m->recv));
		m->send_len = calloc(slots + 1, sizeof(*m->send_len));
		m->recv_len = calloc(slots + 1, sizeof(*m->recv_len));
		for (uint32_t k = 0; k < slots; k++) {
			m->send[k] = malloc(len + 1);
			m->recv[k] = malloc(len + 1);
			m->send_len[k] = m->recv_len[k] = len;
			memset(m->recv[k], 0xee, len);
			for (uint64_t b = 0; b < len; b++)
				m->send[k][b] = (uint8_t)(i * 37 + k * 11 + b);
		}
	}
}

static void mem_free(struct mem *mm)
{
	for (uint32_t i = 0; i < mm->nodes; i++) {
		struct sched_mem *m = &mm->m[i];

		for (uint32_t k = 0; k < mm->slots; k++) {
			free(m->send[k]);
			free(m->recv[k]);
		}
		free(m->send);
		free(m->recv);
		free(m->send_len);
		free(m->recv_len);
	}
	free(mm->m);
}

static char why[256];

static int run(const struct sched *s, const struct mem *mm, uint64_t seed, struct sched_run_stats *st)
{
	int ret;

	why[0] = 0;
	ret = sched_run(s, mm->m, seed, NULL, st, why, sizeof(why));
	if (ret)
		fprintf(stderr, "  sched_run: %d: %s\n", ret, why);
	return ret;
}

static int check(const struct sched *s)
{
	why[0] = 0;
	return sched_check(s, why, sizeof(why));
}

/* ---- every step kind by hand ---- */

TEST(send_recv_gathers_and_scatters)
{
	struct sched s;
	struct mem mm;
	struct sched_run_stats st;

	CHECK_EQ(sched_init(&s, 2), 0);
	mem_init(&mm, 2, 2, 64);
	/* node 0 sends bytes 0..9 of slot 1 then 20..24 of slot 0 as one
	 * message; node 1 receives them into slot 0 at 40 and slot 1 at 0 */
	struct sched_node *a = &s.node[0], *b = &s.node[1];
	a->nslots = b->nslots = 2;
	sched_step(a, SCHED_SEND, 1, 7, 0);
	sched_ref(a, sched_seg(a, SCHED_BUF_SEND, 1, 0, 10, 0));
	sched_ref(a, sched_seg(a, SCHED_BUF_SEND, 0, 20, 5, 0));
	sched_step(b, SCHED_RECV, 0, 7, 0);
	sched_ref(b, sched_seg(b, SCHED_BUF_RECV, 0, 40, 10, 0));
	sched_ref(b, sched_seg(b, SCHED_BUF_RECV, 1, 0, 5, 0));
	CHECK_EQ(sched_err(&s), 0);
	CHECK_EQ(check(&s), 0);
	CHECK_EQ(run(&s, &mm, 1, &st), 0);
	CHECK(memcmp(mm.m[1].recv[0] + 40, mm.m[0].send[1], 10) == 0);
	CHECK(memcmp(mm.m[1].recv[1], mm.m[0].send[0] + 20, 5) == 0);
	CHECK_EQ(mm.m[1].recv[0][39], 0xee);
	CHECK_EQ(mm.m[1].recv[0][50], 0xee);
	CHECK_EQ(mm.m[1].recv[1][5], 0xee);
	CHECK_EQ(st.messages, 1);
	CHECK_EQ(st.bytes_sent, 15);
	CHECK_EQ(st.sends_max, 1);
	mem_free(&mm);
	sched_free(&s);
}

/* 0 -> 1 -> 2 -> 3 along a route, the middle nodes forwarding; a second
 * message from 0 to 3 straight; node 3 receives both. */
TEST(forward_passes_messages_on)
{
	struct sched s;
	struct mem mm;
	struct sched_run_stats st;

	CHECK_EQ(sched_init(&s, 4), 0);
	mem_init(&mm, 4, 1, 32);
	for (uint32_t i = 0; i < 4; i++)
		s.node[i].nslots = 1;
	struct sched_node *n0 = &s.node[0], *n1 = &s.node[1], *n2 = &s.node[2], *n3 = &s.node[3];
	sched_step(n0, SCHED_SEND, 1, 0, 5);
	sched_ref(n0, sched_seg(n0, SCHED_BUF_SEND, 0, 0, 8, 0));
	sched_ref(n0, sched_seg(n0, SCHED_BUF_SEND, 0, 8, 0, 0));      /* an empty part travels too */
	sched_step(n0, SCHED_SEND, 3, 0, 1);
	sched_ref(n0, sched_seg(n0, SCHED_BUF_SEND, 0, 16, 4, 0));
	sched_step(n1, SCHED_FORWARD, 2, 3, 0);
	sched_step_forward(n1, 0, 0);
	sched_step(n2, SCHED_FORWARD, 3, 9, 0);
	sched_step_forward(n2, 1, 3);
	sched_step(n3, SCHED_RECV, 2, 9, 0);
	sched_ref(n3, sched_seg(n3, SCHED_BUF_RECV, 0, 0, 8, 0));
	sched_ref(n3, sched_seg(n3, SCHED_BUF_RECV, 0, 8, 0, 0));
	sched_step(n3, SCHED_RECV, 0, 0, 0);
	sched_ref(n3, sched_seg(n3, SCHED_BUF_RECV, 0, 20, 4, 0));
	CHECK_EQ(check(&s), 0);
	for (uint64_t seed = 0; seed < 8; seed++) {
		memset(mm.m[3].recv[0], 0xee, 32);
		CHECK_EQ(run(&s, &mm, seed, &st), 0);
		CHECK(memcmp(mm.m[3].recv[0], mm.m[0].send[0], 8) == 0);
		CHECK(memcmp(mm.m[3].recv[0] + 20, mm.m[0].send[0] + 16, 4) == 0);
		CHECK_EQ(mm.m[3].recv[0][8], 0xee);
	}
	CHECK_EQ(st.messages, 4);       /* 0->1, 1->2, 2->3, 0->3 */
	CHECK_EQ(st.bytes_sent, 8 * 3 + 4);
	/* the message's two parts reach node 3 as two parts */
	n3->segs[n3->refs[1]].len = 1;
	CHECK_EQ(check(&s), -EINVAL);
	CHECK(strstr(why, "part 1") != NULL);
	mem_free(&mm);
	sched_free(&s);
}

/* An allreduce of int32 sums over 3 nodes of 2 ranks: each node reduces its
 * ranks into scratch (COPY, REDUCE), sends it to node 0 which receives and
 * reduces (RECV_REDUCE), then sends the result back, and every node copies
 * it out to its ranks. */
TEST(reductions_local_and_received)
{
	struct sched s;
	struct mem mm;
	struct sched_run_stats st;
	const uint32_t N = 3, R = 2, CNT = 5;
	const uint64_t LEN = CNT * 4;

	CHECK_EQ(sched_init(&s, N), 0);
	mem_init(&mm, N, R, LEN);
	for (uint32_t i = 0; i < N; i++) {
		struct sched_node *n = &s.node[i];
		uint32_t sc = sched_scratch(n, LEN), acc = sched_seg(n, SCHED_BUF_SCRATCH, sc, 0, LEN, 0);
		uint32_t cp, red, last;

		n->nslots = R;
		cp = sched_step(n, SCHED_COPY, 0, 0, 0);
		sched_ref(n, acc);
		sched_ref(n, sched_seg(n, SCHED_BUF_SEND, 0, 0, LEN, 0));
		red = sched_step(n, SCHED_REDUCE, 0, 0, 0);
		sched_step_reduce(n, COLL_INT32, COLL_SUM);
		sched_ref(n, acc);
		sched_ref(n, sched_seg(n, SCHED_BUF_SEND, 1, 0, LEN, 0));
		sched_dep(n, cp);
		last = red;
		if (i == 0) {
			for (uint32_t f = 1; f < N; f++) {
				last = sched_step(n, SCHED_RECV_REDUCE, f, 0, 0);
				sched_step_reduce(n, COLL_INT32, COLL_SUM);
				sched_ref(n, acc);
				sched_dep(n, f == 1 ? red : last - 1);
			}
			uint32_t sends[8];
			for (uint32_t t = 1; t < N; t++) {
				sends[t] = sched_step(n, SCHED_SEND, t, 1, 0);
				sched_ref(n, acc);
				sched_dep(n, last);
			}
			(void)sends;
		} else {
			sched_step(n, SCHED_SEND, 0, 0, 0);
			sched_ref(n, acc);
			sched_dep(n, red);
			last = sched_step(n, SCHED_RECV, 0, 1, 0);
			sched_ref(n, acc);
			/* written after the send read it */
			sched_dep(n, last - 1);
		}
		for (uint32_t k = 0; k < R; k++) {
			sched_step(n, SCHED_COPY, 0, 0, 0);
			sched_ref(n, sched_seg(n, SCHED_BUF_RECV, k, 0, LEN, 0));
			sched_ref(n, acc);
			sched_dep(n, last);
		}
	}
	CHECK_EQ(sched_err(&s), 0);
	CHECK_EQ(check(&s), 0);
	/* (integer sums give the same result in any order: the order the
	 * dependencies fix shows in the floating-point test below) */
	for (uint64_t seed = 0; seed < 16; seed++) {
		CHECK_EQ(run(&s, &mm, seed, &st), 0);
		for (uint32_t e = 0; e < CNT; e++) {
			uint32_t want = 0, got;

			for (uint32_t i = 0; i < N; i++)
				for (uint32_t k = 0; k < R; k++) {
					uint32_t v;

					memcpy(&v, mm.m[i].send[k] + 4 * e, 4);
					want += v;
				}
			for (uint32_t i = 0; i < N; i++)
				for (uint32_t k = 0; k < R; k++) {
					memcpy(&got, mm.m[i].recv[k] + 4 * e, 4);
					CHECK_EQ(got, want);
				}
		}
	}
	mem_free(&mm);
	sched_free(&s);
}

/* A sized scratch segment takes the length its part has, and is sent on. */
TEST(sized_segments_carry_unknown_lengths)
{
	struct sched s;
	struct mem mm;
	struct sched_run_stats st;

	CHECK_EQ(sched_init(&s, 3), 0);
	mem_init(&mm, 3, 1, 40);
	for (uint32_t i = 0; i < 3; i++)
		s.node[i].nslots = 1;
	struct sched_node *a = &s.node[0], *b = &s.node[1], *c = &s.node[2];
	sched_step(a, SCHED_SEND, 1, 0, 0);
	sched_ref(a, sched_seg(a, SCHED_BUF_SEND, 0, 3, 13, 0));
	uint32_t g = sched_seg(b, SCHED_BUF_SCRATCH, sched_scratch(b, 0), 0, 0, SCHED_SEG_SIZED);
	uint32_t r = sched_step(b, SCHED_RECV, 0, 0, 0);
	sched_ref(b, g);
	sched_step(b, SCHED_SEND, 2, 0, 0);
	sched_ref(b, g);
	sched_dep(b, r);
	sched_step(c, SCHED_RECV, 1, 0, 0);
	sched_ref(c, sched_seg(c, SCHED_BUF_RECV, 0, 1, 13, 0));
	CHECK_EQ(check(&s), 0);
	CHECK_EQ(run(&s, &mm, 3, &st), 0);
	CHECK(memcmp(mm.m[2].recv[0] + 1, mm.m[0].send[0] + 3, 13) == 0);
	/* the final receiver expecting another length: the run fails, saying so */
	c->segs[0].len = 12;
	CHECK_EQ(check(&s), 0);         /* unknowable statically */
	CHECK_EQ(sched_run(&s, mm.m, 3, NULL, &st, why, sizeof(why)), -EINVAL);
	CHECK(strstr(why, "13 bytes came for 12") != NULL);
	/* sending the sized segment before it came: refused by the run */
	c->segs[0].len = 13;
	b->ndeps = 0;
	b->steps[1].ndep = 0;
	CHECK_EQ(check(&s), -EINVAL);   /* the race is seen statically */
	mem_free(&mm);
	sched_free(&s);
}

/* ---- what sched_check refuses ---- */

/* A fresh 2-node schedule: node 0 sends 8 bytes to node 1. */
static void two(struct sched *s)
{
	sched_init(s, 2);
	s->node[0].nslots = s->node[1].nslots = 1;
	sched_step(&s->node[0], SCHED_SEND, 1, 0, 0);
	sched_ref(&s->node[0], sched_seg(&s->node[0], SCHED_BUF_SEND, 0, 0, 8, 0));
	sched_step(&s->node[1], SCHED_RECV, 0, 0, 0);
	sched_ref(&s->node[1], sched_seg(&s->node[1], SCHED_BUF_RECV, 0, 0, 8, 0));
}

TEST(check_refuses_malformed_schedules)
{
	struct sched s;

	two(&s);
	CHECK_EQ(check(&s), 0);
	sched_free(&s);

	/* a message nobody sends (the receiver waits for 1, 0 goes) */
	two(&s);
	s.node[1].steps[0].msg = 1;
	CHECK_EQ(check(&s), -EINVAL);
	CHECK(strstr(why, "waits for message 1 from node 0, never sent") != NULL);
	sched_free(&s);
	/* a message nobody takes */
	two(&s);
	s.node[1].steps[0].kind = SCHED_COPY;
	s.node[1].steps[0].nref = 0;
	CHECK_EQ(check(&s), -EINVAL);
	CHECK(strstr(why, "a copy or reduce has 2 segments") != NULL);
	s.node[1].nsteps = 0;
	CHECK_EQ(check(&s), -EINVAL);
	CHECK(strstr(why, "message 0 from node 0 to node 1 never taken") != NULL);
	sched_free(&s);

	/* sent twice */
	two(&s);
	sched_step(&s.node[0], SCHED_SEND, 1, 0, 0);
	CHECK_EQ(check(&s), -EINVAL);
	CHECK(strstr(why, "sent twice") != NULL);
	sched_free(&s);

	/* lengths that disagree */
	two(&s);
	s.node[1].segs[0].len = 9;
	CHECK_EQ(check(&s), -EINVAL);
	CHECK(strstr(why, "8 bytes sent into 9") != NULL);
	sched_free(&s);

	/* parts that disagree */
	two(&s);
	sched_ref(&s.node[1], sched_seg(&s.node[1], SCHED_BUF_RECV, 0, 8, 8, 0));
	CHECK_EQ(check(&s), -EINVAL);
	CHECK(strstr(why, "1 parts sent, 2 taken") != NULL);
	sched_free(&s);

	/* a cycle: each node's send waits for its receive of the other's */
	CHECK_EQ(sched_init(&s, 2), 0);
	for (uint32_t i = 0; i < 2; i++) {
		struct sched_node *n = &s.node[i];

		n->nslots = 1;
		sched_step(n, SCHED_RECV, 1 - i, 0, 0);
		sched_ref(n, sched_seg(n, SCHED_BUF_RECV, 0, 0, 4, 0));
		sched_step(n, SCHED_SEND, 1 - i, 0, 0);
		sched_ref(n, sched_seg(n, SCHED_BUF_SEND, 0, 0, 4, 0));
		sched_dep(n, 0);
	}
	CHECK_EQ(check(&s), -EINVAL);
	CHECK(strstr(why, "cycle") != NULL);
	/* without the dependencies it runs */
	s.node[0].steps[1].ndep = s.node[1].steps[1].ndep = 0;
	CHECK_EQ(check(&s), 0);
	sched_free(&s);

	/* taken twice */
	two(&s);
	sched_step(&s.node[1], SCHED_RECV, 0, 0, 0);
	sched_ref(&s.node[1], sched_seg(&s.node[1], SCHED_BUF_RECV, 0, 8, 8, 0));
	CHECK_EQ(check(&s), -EINVAL);
	CHECK(strstr(why, "taken twice") != NULL);
	sched_free(&s);

	/* forwarded in a circle: nodes 1 and 2 pass message 5 to each other */
	CHECK_EQ(sched_init(&s, 3), 0);
	sched_step(&s.node[1], SCHED_FORWARD, 2, 5, 0);
	sched_step_forward(&s.node[1], 2, 5);
	sched_step(&s.node[2], SCHED_FORWARD, 1, 5, 0);
	sched_step_forward(&s.node[2], 1, 5);
	CHECK_EQ(check(&s), -EINVAL);
	CHECK(strstr(why, "forwarded from nowhere") != NULL);
	sched_free(&s);

	/* depending on a later step */
	two(&s);
	s.node[0].deps = malloc(sizeof(uint32_t));
	s.node[0].cap_deps = 1;
	s.node[0].deps[0] = 0;
	s.node[0].ndeps = 1;
	s.node[0].steps[0].ndep = 1;
	CHECK_EQ(check(&s), -EINVAL);
	CHECK(strstr(why, "later step") != NULL);
	sched_free(&s);

	/* receiving into a send buffer */
	two(&s);
	s.node[1].segs[0].buf = SCHED_BUF_SEND;
	CHECK_EQ(check(&s), -EINVAL);
	CHECK(strstr(why, "writes a send buffer") != NULL);
	sched_free(&s);

	/* a peer out of range, or itself */
	two(&s);
	s.node[0].steps[0].peer = 2;
	CHECK_EQ(check(&s), -EINVAL);
	CHECK(strstr(why, "bad peer 2") != NULL);
	s.node[0].steps[0].peer = 0;
	CHECK_EQ(check(&s), -EINVAL);
	CHECK(strstr(why, "bad peer 0") != NULL);
	sched_free(&s);

	/* a float with a bit operation */
	two(&s);
	s.node[1].steps[0].kind = SCHED_RECV_REDUCE;
	s.node[1].steps[0].type = COLL_FLOAT;
	s.node[1].steps[0].op = COLL_BXOR;
	CHECK_EQ(check(&s), -EINVAL);
	s.node[1].steps[0].op = COLL_SUM;
	CHECK_EQ(check(&s), 0);
	s.node[1].segs[0].len = 6;      /* not whole floats */
	s.node[0].segs[0].len = 6;
	CHECK_EQ(check(&s), -EINVAL);
	sched_free(&s);

	/* two writes of the same bytes with no order between them */
	two(&s);
	sched_step(&s.node[1], SCHED_COPY, 0, 0, 0);
	sched_ref(&s.node[1], sched_seg(&s.node[1], SCHED_BUF_RECV, 0, 4, 4, 0));
	sched_ref(&s.node[1], sched_seg(&s.node[1], SCHED_BUF_SEND, 0, 0, 4, 0));
	CHECK_EQ(check(&s), -EINVAL);
	CHECK(strstr(why, "no dependency orders them") != NULL);
	sched_dep(&s.node[1], 0);
	CHECK_EQ(check(&s), 0);
	/* ... but bytes next to each other do not touch */
	s.node[1].ndeps = 0;
	s.node[1].steps[1].ndep = 0;
	s.node[1].segs[1].off = 8;
	CHECK_EQ(check(&s), 0);
	sched_free(&s);

	/* a segment beyond its scratch buffer; a sized one in a copy */
	two(&s);
	{
		struct sched_node *b = &s.node[1];
		uint32_t sc = sched_scratch(b, 4);

		sched_step(b, SCHED_COPY, 0, 0, 0);
		sched_ref(b, sched_seg(b, SCHED_BUF_SCRATCH, sc, 2, 4, 0));
		sched_ref(b, sched_seg(b, SCHED_BUF_SEND, 0, 0, 4, 0));
		CHECK_EQ(check(&s), -EINVAL);
		CHECK(strstr(why, "beyond its scratch") != NULL);
		b->segs[1].off = 0;
		CHECK_EQ(check(&s), 0);
		b->segs[1].flags = SCHED_SEG_SIZED;
		CHECK_EQ(check(&s), -EINVAL);
	}
	sched_free(&s);

	/* builder misuse is kept and reported */
	CHECK_EQ(sched_init(&s, 1), 0);
	sched_ref(&s.node[0], 0);
	CHECK_EQ(sched_err(&s), -EINVAL);
	sched_free(&s);
	CHECK_EQ(sched_init(&s, 0), -EINVAL);
}

/* Scratch is read only after a step it depends on wrote all of it; a step
 * names no bytes twice that it writes; a sized segment takes no more than
 * its bound. */
TEST(check_refuses_reading_unwritten_scratch)
{
	struct sched s;
	struct mem mm;
	struct sched_run_stats st;

	/* node 0 sends scratch nobody wrote */
	two(&s);
	struct sched_node *a = &s.node[0];
	uint32_t sc = sched_scratch(a, 8);

	a->segs[0] = (struct sched_seg){ .buf = SCHED_BUF_SCRATCH, .index = sc, .off = 0, .len = 8 };
	CHECK_EQ(check(&s), -EINVAL);
	CHECK(strstr(why, "reads scratch 0 at 0 before") != NULL);
	/* written after the send (a dependency the wrong way round): still refused */
	sched_step(a, SCHED_COPY, 0, 0, 0);
	sched_ref(a, 0);
	sched_ref(a, sched_seg(a, SCHED_BUF_SEND, 0, 0, 8, 0));
	sched_dep(a, 0);
	CHECK_EQ(check(&s), -EINVAL);
	CHECK(strstr(why, "before") != NULL);
	sched_free(&s);

	/* written before, half of it (the send depends on one of the two
	 * copies): refused at the first byte not written; depending on both,
	 * fine, and it runs */
	CHECK_EQ(sched_init(&s, 2), 0);
	mem_init(&mm, 2, 1, 16);
	a = &s.node[0];
	struct sched_node *b = &s.node[1];
	a->nslots = b->nslots = 1;
	sc = sched_scratch(a, 8);
	uint32_t c1 = sched_step(a, SCHED_COPY, 0, 0, 0);
	sched_ref(a, sched_seg(a, SCHED_BUF_SCRATCH, sc, 0, 4, 0));
	sched_ref(a, sched_seg(a, SCHED_BUF_SEND, 0, 8, 4, 0));
	uint32_t c2 = sched_step(a, SCHED_COPY, 0, 0, 0);
	sched_ref(a, sched_seg(a, SCHED_BUF_SCRATCH, sc, 4, 4, 0));
	sched_ref(a, sched_seg(a, SCHED_BUF_SEND, 0, 0, 4, 0));
	sched_step(a, SCHED_SEND, 1, 0, 0);
	sched_ref(a, sched_seg(a, SCHED_BUF_SCRATCH, sc, 0, 8, 0));
	sched_dep(a, c1);
	sched_step(b, SCHED_RECV, 0, 0, 0);
	sched_ref(b, sched_seg(b, SCHED_BUF_RECV, 0, 0, 8, 0));
	CHECK_EQ(check(&s), -EINVAL);
	/* (the send and the unordered copy touch the same bytes: either
	 * reason is right) */
	CHECK(strstr(why, "reads scratch 0 at 4 before") != NULL || strstr(why, "steps 1 and 2") != NULL);
	a->steps[2].ndep = 0;
	a->ndeps = a->steps[2].dep;
	sched_dep(a, c1);
	sched_dep(a, c2);
	CHECK_EQ(check(&s), 0);
	CHECK_EQ(run(&s, &mm, 1, &st), 0);
	CHECK(memcmp(mm.m[1].recv[0], mm.m[0].send[0] + 8, 4) == 0);
	CHECK(memcmp(mm.m[1].recv[0] + 4, mm.m[0].send[0], 4) == 0);
	sched_free(&s);
	mem_free(&mm);

	/* a sized segment sent that never came */
	two(&s);
	a = &s.node[0];
	a->segs[0] = (struct sched_seg){ .buf = SCHED_BUF_SCRATCH, .flags = SCHED_SEG_SIZED,
					 .index = sched_scratch(a, 0) };
	CHECK_EQ(check(&s), -EINVAL);
	CHECK(strstr(why, "reads scratch") != NULL);
	sched_free(&s);

	/* one RECV delivering two parts into the same bytes */
	two(&s);
	sched_ref(&s.node[1], 0);
	CHECK_EQ(check(&s), -EINVAL);
	CHECK(strstr(why, "names the same bytes twice") != NULL);
	sched_free(&s);
	/* a reduce over overlapping ranges; over the very same range, fine */
	two(&s);
	struct sched_node *b2 = &s.node[1];
	sched_step(b2, SCHED_REDUCE, 0, 0, 0);
	sched_step_reduce(b2, COLL_INT32, COLL_SUM);
	sched_ref(b2, sched_seg(b2, SCHED_BUF_RECV, 0, 0, 8, 0));
	sched_ref(b2, sched_seg(b2, SCHED_BUF_RECV, 0, 4, 8, 0));
	sched_dep(b2, 0);
	CHECK_EQ(check(&s), -EINVAL);
	CHECK(strstr(why, "names the same bytes twice") != NULL);
	b2->segs[2].off = 0;
	CHECK_EQ(check(&s), 0);
	sched_free(&s);
}

/* A sized segment's len, when not 0, is the most its part may be. */
TEST(sized_segments_have_a_bound)
{
	struct sched s;
	struct mem mm;
	struct sched_run_stats st;

	CHECK_EQ(sched_init(&s, 2), 0);
	mem_init(&mm, 2, 1, 16);
	struct sched_node *a = &s.node[0], *b = &s.node[1];
	a->nslots = b->nslots = 1;
	sched_step(a, SCHED_SEND, 1, 0, 0);
	sched_ref(a, sched_seg(a, SCHED_BUF_SEND, 0, 0, 10, 0));
	sched_step(b, SCHED_RECV, 0, 0, 0);
	sched_ref(b, sched_seg(b, SCHED_BUF_SCRATCH, sched_scratch(b, 0), 0, 9, SCHED_SEG_SIZED));
	CHECK_EQ(check(&s), 0);
	CHECK_EQ(sched_run(&s, mm.m, 0, NULL, &st, why, sizeof(why)), -EINVAL);
	CHECK(strstr(why, "10 bytes came for at most 9") != NULL);
	b->segs[0].len = 10;
	CHECK_EQ(run(&s, &mm, 0, &st), 0);
	b->segs[0].len = 0;             /* no bound */
	CHECK_EQ(run(&s, &mm, 0, &st), 0);
	mem_free(&mm);
	sched_free(&s);
}

/* ---- the reduction kernels ---- */

/* The reference: one element, computed in 64-bit or double arithmetic. */
static void ref_op(unsigned t, unsigned op, uint8_t *d, const uint8_t *s)
{
	size_t sz = coll_type_size(t);
	int sgn = t == COLL_INT8 || t == COLL_INT16 || t == COLL_INT32 || t == COLL_INT64;

	if (t == COLL_FLOAT || t == COLL_DOUBLE) {
		double a, b, r;
		float fa, fb;

		if (t == COLL_FLOAT) {
			memcpy(&fa, d, 4);
			memcpy(&fb, s, 4);
			a = fa;
			b = fb;
		} else {
			memcpy(&a, d, 8);
			memcpy(&b, s, 8);
		}
		r = op == COLL_SUM ? a + b : op == COLL_PROD ? a * b : op == COLL_MIN ? (b < a ? b : a) : (b > a ? b : a);
		if (t == COLL_FLOAT) {
			fa = (float)(op == COLL_SUM ? fa + fb : op == COLL_PROD ? fa * fb : r);
			memcpy(d, &fa, 4);
		} else {
			memcpy(d, &r, 8);
		}
		return;
	}
	uint64_t ua = 0, ub = 0, r = 0, mask = sz == 8 ? ~0ull : (1ull << (8 * sz)) - 1;
	memcpy(&ua, d, sz);             /* little-endian */
	memcpy(&ub, s, sz);
	int64_t sa = (int64_t)(ua << (64 - 8 * sz)) >> (64 - 8 * sz);
	int64_t sb = (int64_t)(ub << (64 - 8 * sz)) >> (64 - 8 * sz);
	switch (op) {
	case COLL_SUM: r = ua + ub; break;
	case COLL_PROD: r = ua * ub; break;
	case COLL_MIN: r = sgn ? (uint64_t)(sb < sa ? sb : sa) : (ub < ua ? ub : ua); break;
	case COLL_MAX: r = sgn ? (uint64_t)(sb > sa ? sb : sa) : (ub > ua ? ub : ua); break;
	case COLL_BAND: r = ua & ub; break;
	case COLL_BOR: r = ua | ub; break;
	case COLL_BXOR: r = ua ^ ub; break;
	case COLL_LAND: r = ua && ub; break;
	case COLL_LOR: r = ua || ub; break;
	case COLL_LXOR: r = !ua != !ub; break;
	}
	r &= mask;
	memcpy(d, &r, sz);
}

TEST(reduce_kernels_match_a_reference)
{
	enum { N = 37 };                /* not a multiple of any vector width */
	uint8_t src[N * 8 + 3], dst[N * 8 + 3], want[N * 8 + 3];
	int tried = 0, refused = 0;

	for (unsigned t = 0; t < COLL_TYPES; t++)
		for (unsigned op = 0; op < COLL_OPS; op++) {
			size_t sz = coll_type_size(t);

			for (size_t i = 0; i < sizeof(src); i++) {
				src[i] = (uint8_t)(i * 73 + t * 5 + 1);
				dst[i] = (uint8_t)(i * 29 + op * 3 + 7);
				if (i % 7 == 0)
					src[i] = 0;     /* zeros for the logical operations */
			}
			if (t == COLL_FLOAT || t == COLL_DOUBLE)
				for (size_t e = 0; e < N; e++) {
					/* ordinary numbers, some equal */
					double a = (double)(e % 5) - 2.5, b = (double)(e % 3) - 1.0;
					float fa = (float)a, fb = (float)b;

					if (t == COLL_FLOAT) {
						memcpy(dst + 1 + e * 4, &fa, 4);
						memcpy(src + 2 + e * 4, &fb, 4);
					} else {
						memcpy(dst + 1 + e * 8, &a, 8);
						memcpy(src + 2 + e * 8, &b, 8);
					}
				}
			memcpy(want, dst, sizeof(dst));
			/* unaligned on purpose: dst at 1, src at 2 */
			int ret = reduce_apply(t, op, dst + 1, src + 2, N);

			if (!coll_op_ok(t, op)) {
				CHECK_EQ(ret, -EINVAL);
				CHECK(memcmp(dst, want, sizeof(dst)) == 0);
				refused++;
				continue;
			}
			CHECK_EQ(ret, 0);
			for (size_t e = 0; e < N; e++)
				ref_op(t, op, want + 1 + e * sz, src + 2 + e * sz);
			if (memcmp(dst, want, sizeof(dst)) != 0)
				fprintf(stderr, "  type %u op %u differs\n", t, op);
			CHECK(memcmp(dst, want, sizeof(dst)) == 0);
			tried++;
		}
	CHECK_EQ(tried, 9 * 10 + 2 * 4);
	CHECK_EQ(refused, 2 * 6);
	CHECK_EQ(reduce_apply(COLL_TYPES, COLL_SUM, dst, src, 1), -EINVAL);
	CHECK_EQ(reduce_apply(COLL_INT32, COLL_OPS, dst, src, 1), -EINVAL);
	/* wrap-around, signed comparisons */
	int32_t x[2] = { INT32_MAX, -5 }, y[2] = { 1, 3 };
	CHECK_EQ(reduce_apply(COLL_INT32, COLL_SUM, x, y, 1), 0);
	CHECK_EQ(x[0], INT32_MIN);
	CHECK_EQ(reduce_apply(COLL_INT32, COLL_MIN, x + 1, y + 1, 1), 0);
	CHECK_EQ(x[1], -5);
	/* 16-bit products beyond int (promoted operands: fuzz_coll's
	 * regressions/reduce-prod-u16-overflow) */
	uint16_t p16[2] = { 0xffff, 42141 }, q16[2] = { 0xffff, 56330 };
	int16_t s16[1] = { INT16_MIN }, t16[1] = { INT16_MIN };
	CHECK_EQ(reduce_apply(COLL_UINT16, COLL_PROD, p16, q16, 2), 0);
	CHECK_EQ(p16[0], 1);
	CHECK_EQ(p16[1], (uint16_t)(42141u * 56330u));
	CHECK_EQ(reduce_apply(COLL_INT16, COLL_PROD, s16, t16, 1), 0);
	CHECK_EQ(s16[0], 0);
	/* dst may be src */
	uint16_t z[3] = { 3, 4, 5 };
	CHECK_EQ(reduce_apply(COLL_UINT16, COLL_PROD, z, z, 3), 0);
	CHECK_EQ(z[2], 25);
}

/* ---- all-to-all schedules ---- */

/* A layout: node n has ppn[n] ranks; ranks are numbered round-robin over
 * the nodes (so rank_at is not the identity) when rr is set. */
struct a2a_case {
	uint32_t nodes, ranks;
	uint32_t *node_first, *rank_at, *node_of, *slot_of;
	uint64_t *scount, *sdispl, *rcount, *rdispl;    /* [rank * ranks + peer] */
	uint64_t *slen, *rlen;                          /* [rank] */
	struct a2a_rank_args *args;
};

static uint8_t pat(uint32_t src, uint32_t dst, uint64_t i)
{
	return (uint8_t)(src * 131 + dst * 31 + i * 7 + 1);
}

/* count(a, b): bytes rank a sends rank b.  mode 0: block; 1: uneven
 * (zeros among them); 2: only to a + 1 .. a + degree (many-to-many). */
static uint64_t count_of(int mode, uint64_t block, uint32_t a, uint32_t b, uint32_t ranks, uint32_t degree)
{
	if (mode == 0)
		return block;
	if (mode == 1)
		return (a * 7 + b * 3) % 11 == 0 ? 0 : (a * 5 + b * 13) % 29 + 1;
	return (b + ranks - a) % ranks >= 1 && (b + ranks - a) % ranks <= degree ? block : 0;
}

static void case_init(struct a2a_case *c, uint32_t nodes, const uint32_t *ppn, int rr, int mode, uint64_t block,
		      uint32_t degree)
{
	uint32_t R = 0;

	memset(c, 0, sizeof(*c));
	for (uint32_t n = 0; n < nodes; n++)
		R += ppn[n];
	c->nodes = nodes;
	c->ranks = R;
	c->node_first = calloc(nodes + 1, sizeof(uint32_t));
	c->rank_at = calloc(R + 1, sizeof(uint32_t));
	c->node_of = calloc(R + 1, sizeof(uint32_t));
	c->slot_of = calloc(R + 1, sizeof(uint32_t));
	/* rank numbers: rr deals them out one per node in turn */
	uint32_t *fill = calloc(nodes, sizeof(uint32_t)), next = 0;
	for (uint32_t n = 0; n < nodes; n++)
		c->node_first[n + 1] = c->node_first[n] + ppn[n];
	if (rr) {
		for (uint32_t round = 0; next < R; round++)
			for (uint32_t n = 0; n < nodes; n++)
				if (round < ppn[n]) {
					c->rank_at[c->node_first[n] + fill[n]++] = next++;
				}
	} else {
		for (uint32_t i = 0; i < R; i++)
			c->rank_at[i] = i;
	}
	free(fill);
	for (uint32_t n = 0; n < nodes; n++)
		for (uint32_t k = 0; k < ppn[n]; k++) {
			c->node_of[c->rank_at[c->node_first[n] + k]] = n;
			c->slot_of[c->rank_at[c->node_first[n] + k]] = k;
		}
	size_t RR = (size_t)R * R + 1;
	c->scount = calloc(RR, 8);
	c->sdispl = calloc(RR, 8);
	c->rcount = calloc(RR, 8);
	c->rdispl = calloc(RR, 8);
	c->slen = calloc(R + 1, 8);
	c->rlen = calloc(R + 1, 8);
	c->args = calloc(R + 1, sizeof(*c->args));
	for (uint32_t a = 0; a < R; a++)
		for (uint32_t b = 0; b < R; b++) {
			uint64_t n = count_of(mode, block, a, b, R, degree);

			c->scount[(size_t)a * R + b] = n;
			c->rcount[(size_t)b * R + a] = n;
		}
	/* displacements: blocks in reverse rank order with a gap of 3 bytes,
	 * so that a write off its block shows */
	for (uint32_t a = 0; a < R; a++) {
		uint64_t so = 3, ro = 3;

		for (uint32_t b = R; b-- > 0;) {
			c->sdispl[(size_t)a * R + b] = so;
			so += c->scount[(size_t)a * R + b] + 3;
			c->rdispl[(size_t)a * R + b] = ro;
			ro += c->rcount[(size_t)a * R + b] + 3;
		}
		c->slen[a] = so;
		c->rlen[a] = ro;
		c->args[a] = (struct a2a_rank_args){ c->scount + (size_t)a * R, c->sdispl + (size_t)a * R,
						     c->rcount + (size_t)a * R, c->rdispl + (size_t)a * R };
	}
}

static void case_free(struct a2a_case *c)
{
	free(c->node_first);
	free(c->rank_at);
	free(c->node_of);
	free(c->slot_of);
	free(c->scount);
	free(c->sdispl);
	free(c->rcount);
	free(c->rdispl);
	free(c->slen);
	free(c->rlen);
	free(c->args);
}

/* Builds and runs strategy st over the case; checks every receive buffer
 * against what the pattern says and every byte written exactly once (the
 * gaps never).  Returns the run's figures in *rs; 0 if all held. */
static int a2a_run(enum a2a_strategy strat, struct a2a_case *c, uint64_t seed, struct sched_run_stats *rs)
{
	struct a2a_plan p;
	struct sched s;
	struct sched_mem *mem = calloc(c->nodes, sizeof(*mem));
	struct a2a_layout lay = { c->ranks, c->node_first, c->rank_at };
	uint64_t wtotal = 0;
	int bad = 0, ret;

	CHECK_EQ(a2a_plan_init(&p, strat, c->nodes), 0);
	CHECK_EQ(sched_init(&s, c->nodes), 0);
	ret = a2a_sched(&p, &lay, c->args, &s);
	CHECK_EQ(ret, 0);
	for (uint32_t n = 0; n < c->nodes; n++) {
		uint32_t k = c->node_first[n + 1] - c->node_first[n];

		mem[n].send = calloc(k + 1, sizeof(void *));
		mem[n].recv = calloc(k + 1, sizeof(void *));
		mem[n].send_len = calloc(k + 1, 8);
		mem[n].recv_len = calloc(k + 1, 8);
		for (uint32_t slot = 0; slot < k; slot++) {
			uint32_t a = c->rank_at[c->node_first[n] + slot];

			mem[n].send_len[slot] = c->slen[a];
			mem[n].recv_len[slot] = c->rlen[a];
			mem[n].send[slot] = malloc(c->slen[a]);
			mem[n].recv[slot] = malloc(c->rlen[a]);
			memset(mem[n].send[slot], 0x5a, c->slen[a]);
			memset(mem[n].recv[slot], 0xee, c->rlen[a]);
			for (uint32_t b = 0; b < c->ranks; b++)
				for (uint64_t i = 0; i < c->scount[(size_t)a * c->ranks + b]; i++)
					mem[n].send[slot][c->sdispl[(size_t)a * c->ranks + b] + i] = pat(a, b, i);
			wtotal += c->rlen[a];
		}
	}
	uint32_t *writes = calloc(wtotal + 1, sizeof(uint32_t));
	if (!ret) {
		why[0] = 0;
		ret = sched_run(&s, mem, seed, writes, rs, why, sizeof(why));
		if (ret)
			fprintf(stderr, "  %s P=%u: %s\n", a2a_strategy_name(strat), c->nodes, why);
		CHECK_EQ(ret, 0);
	}
	/* every byte: the pattern inside blocks, written once; 0xee in gaps,
	 * never written */
	uint64_t w = 0;
	for (uint32_t n = 0; n < c->nodes && !ret; n++)
		for (uint32_t slot = 0; slot < c->node_first[n + 1] - c->node_first[n]; slot++) {
			uint32_t b = c->rank_at[c->node_first[n] + slot];
			uint8_t *want = malloc(c->rlen[b]);
			uint8_t *once = calloc(c->rlen[b], 1);

			memset(want, 0xee, c->rlen[b]);
			for (uint32_t a = 0; a < c->ranks; a++)
				for (uint64_t i = 0; i < c->rcount[(size_t)b * c->ranks + a]; i++) {
					want[c->rdispl[(size_t)b * c->ranks + a] + i] = pat(a, b, i);
					once[c->rdispl[(size_t)b * c->ranks + a] + i] = 1;
				}
			if (memcmp(want, mem[n].recv[slot], c->rlen[b]) != 0)
				bad++;
			for (uint64_t i = 0; i < c->rlen[b]; i++)
				if (writes[w + i] != once[i])
					bad++;
			w += c->rlen[b];
			free(want);
			free(once);
		}
	if (bad)
		fprintf(stderr, "  %s P=%u ranks=%u: %d bytes wrong\n", a2a_strategy_name(strat), c->nodes, c->ranks,
			bad);
	for (uint32_t n = 0; n < c->nodes; n++) {
		for (uint32_t slot = 0; slot < c->node_first[n + 1] - c->node_first[n]; slot++) {
			free(mem[n].send[slot]);
			free(mem[n].recv[slot]);
		}
		free(mem[n].send);
		free(mem[n].recv);
		free(mem[n].send_len);
		free(mem[n].recv_len);
	}
	free(mem);
	free(writes);
	sched_free(&s);
	return ret || bad;
}

static const uint32_t node_counts[] = { 1, 2, 3, 4, 5, 7, 8, 9, 12, 16, 17 };

TEST(a2a_every_strategy_delivers_every_byte_once)
{
	uint32_t ppn[32];
	int runs = 0, failed = 0;

	for (size_t ni = 0; ni < sizeof(node_counts) / sizeof(node_counts[0]); ni++) {
		uint32_t P = node_counts[ni];

		/* layouts: 1, 2, 3 ranks per node; uneven (0 to 3, one node
		 * without ranks when P > 1); round-robin rank numbers */
		for (int layout = 0; layout < 5; layout++) {
			for (uint32_t n = 0; n < P; n++)
				ppn[n] = layout < 3 ? (uint32_t)layout + 1 : (n * 7 + 3) % 4;
			if (layout >= 3 && P > 1)
				ppn[0] = 2;     /* at least two ranks somewhere */
			for (int mode = 0; mode < 3; mode++) {
				static const uint64_t blocks[] = { 0, 1, 8, 100 };
				struct a2a_case c;

				for (size_t bi = 0; bi < (mode == 1 ? 1 : 4); bi++) {
					/* keep the product small: big blocks on few layouts */
					if (bi >= 2 && layout != 1 && layout != 3)
						continue;
					uint32_t R = 0;
					for (uint32_t n = 0; n < P; n++)
						R += ppn[n];
					case_init(&c, P, ppn, layout == 4, mode, blocks[bi], R > 2 ? 2 : 1);
					for (int st = 0; st < A2A_STRATEGIES; st++) {
						struct sched_run_stats rs;

						runs++;
						failed += a2a_run(st, &c, (uint64_t)runs, &rs);
					}
					case_free(&c);
				}
			}
		}
	}
	CHECK_EQ(failed, 0);
	CHECK(runs > 500);
	printf("# %d all-to-all schedules run\n", runs);
}

/* The messages per node the paper counts, from the simulator's run (dummy
 * messages included): perfect squares, cubes and powers of two, and the
 * direct strategy's P - 1. */
TEST(a2a_message_counts_match_the_paper)
{
	uint32_t ppn[64];
	struct a2a_case c;
	struct sched_run_stats rs;

	for (uint32_t P = 1; P <= 64; P++) {
		for (uint32_t n = 0; n < P; n++)
			ppn[n] = 1;
		case_init(&c, P, ppn, 0, 0, 4, 0);
		CHECK_EQ(a2a_run(A2A_DIRECT, &c, P, &rs), 0);
		CHECK_EQ(rs.sends_max, P - 1);
		uint32_t q = 1, k = 1;

		while ((q + 1) * (q + 1) <= P)
			q++;
		while ((k + 1) * (k + 1) * (k + 1) <= P)
			k++;
		if (q * q == P) {
			CHECK_EQ(a2a_run(A2A_MESH, &c, P, &rs), 0);
			CHECK_EQ(rs.sends_max, 2 * (q - 1));
			CHECK_EQ(rs.recvs_max, 2 * (q - 1));
		}
		if (k * k * k == P) {
			CHECK_EQ(a2a_run(A2A_GRID3D, &c, P, &rs), 0);
			CHECK_EQ(rs.sends_max, 3 * (k - 1));
		}
		if ((P & (P - 1)) == 0) {
			uint32_t lg = 0;

			while ((1u << lg) < P)
				lg++;
			CHECK_EQ(a2a_run(A2A_HYPERCUBE, &c, P, &rs), 0);
			CHECK_EQ(rs.sends_max, lg);
		}
		/* and every strategy agrees with a2a_stats (the planner's own
		 * count that ferryctl plan prints) */
		for (int st = 0; st < A2A_STRATEGIES; st++) {
			struct a2a_plan p;
			struct a2a_stats as;

			CHECK_EQ(a2a_run(st, &c, P + 100, &rs), 0);
			CHECK_EQ(a2a_plan_init(&p, st, P), 0);
			if (P > 1) {
				CHECK_EQ(a2a_stats(&p, P - 1, 4, &as), 0);
				CHECK_EQ(rs.sends_max, as.sends_max);
				CHECK_EQ(rs.recvs_max, as.recvs_max);
				CHECK_EQ(rs.bytes_sent_max, as.bytes_sent_max);
			}
		}
		case_free(&c);
	}
}

/* The node count and layout alone fix the messages and parts: the same
 * schedule shape whatever the sizes, so a node planning with its own
 * counts agrees with the others. */
TEST(a2a_shape_does_not_depend_on_sizes)
{
	uint32_t ppn[9] = { 2, 1, 3, 2, 1, 2, 3, 1, 2 };

	for (int st = 1; st < A2A_STRATEGIES; st++) {
		struct a2a_case c0, c1;
		struct a2a_plan p;
		struct sched s0, s1;

		case_init(&c0, 9, ppn, 1, 0, 8, 0);
		case_init(&c1, 9, ppn, 1, 1, 0, 0);
		CHECK_EQ(a2a_plan_init(&p, st, 9), 0);
		CHECK_EQ(sched_init(&s0, 9), 0);
		CHECK_EQ(sched_init(&s1, 9), 0);
		struct a2a_layout l0 = { c0.ranks, c0.node_first, c0.rank_at };
		CHECK_EQ(a2a_sched(&p, &l0, c0.args, &s0), 0);
		CHECK_EQ(a2a_sched(&p, &l0, c1.args, &s1), 0);
		/* the same messages, with the same parts, peers and numbers;
		 * only the local copies (of non-empty blocks) differ */
		for (uint32_t n = 0; n < 9; n++) {
			const struct sched_node *a = &s0.node[n], *b = &s1.node[n];
			uint32_t i = 0, j = 0;

			for (;;) {
				while (i < a->nsteps && a->steps[i].kind == SCHED_COPY)
					i++;
				while (j < b->nsteps && b->steps[j].kind == SCHED_COPY)
					j++;
				if (i == a->nsteps || j == b->nsteps)
					break;
				CHECK_EQ(a->steps[i].kind, b->steps[j].kind);
				CHECK_EQ(a->steps[i].peer, b->steps[j].peer);
				CHECK_EQ(a->steps[i].msg, b->steps[j].msg);
				CHECK_EQ(a->steps[i].nref, b->steps[j].nref);
				i++;
				j++;
			}
			CHECK_EQ(i, a->nsteps);
			CHECK_EQ(j, b->nsteps);
		}
		CHECK_EQ(check(&s0), 0);
		CHECK_EQ(check(&s1), 0);
		sched_free(&s0);
		sched_free(&s1);
		case_free(&c0);
		case_free(&c1);
	}
}

/* Arguments a node can see are wrong refuse to plan. */
TEST(a2a_refuses_bad_arguments)
{
	uint32_t ppn[2] = { 2, 1 };
	struct a2a_case c;
	struct a2a_plan p;
	struct sched s;

	case_init(&c, 2, ppn, 0, 0, 8, 0);
	struct a2a_layout lay = { c.ranks, c.node_first, c.rank_at };
	CHECK_EQ(a2a_plan_init(&p, A2A_MESH, 2), 0);
	/* rank 0 sends rank 1 (same node) 8 bytes, rank 1 expects 9 */
	c.rcount[1 * 3 + 0] = 9;
	CHECK_EQ(sched_init(&s, 2), 0);
	CHECK_EQ(a2a_sched(&p, &lay, c.args, &s), -EINVAL);
	sched_free(&s);
	c.rcount[1 * 3 + 0] = 8;
	/* a layout beyond its ranks */
	c.node_first[2] = 4;
	CHECK_EQ(sched_init(&s, 2), 0);
	CHECK_EQ(a2a_sched(&p, &lay, c.args, &s), -EINVAL);
	sched_free(&s);
	c.node_first[2] = 3;
	c.rank_at[2] = 3;
	CHECK_EQ(sched_init(&s, 2), 0);
	CHECK_EQ(a2a_sched(&p, &lay, c.args, &s), -EINVAL);
	sched_free(&s);
	case_free(&c);
}

/* The barrier: ceil(log2 G) messages per node, valid, and no node's last
 * receive can happen before every node sent its first message (each node's
 * last step depends, through messages, on every node's first). */
TEST(barrier_schedules)
{
	for (uint32_t G = 1; G <= 70; G++) {
		struct sched s;
		struct mem mm;
		struct sched_run_stats st;
		uint32_t rounds = 0;

		while ((1ull << rounds) < G)
			rounds++;
		CHECK_EQ(sched_init(&s, G), 0);
		for (uint32_t n = 0; n < G; n++)
			CHECK_EQ(barrier_sched_node(G, n, &s.node[n]), 0);
		CHECK_EQ(check(&s), 0);
		mem_init(&mm, G, 0, 0);
		CHECK_EQ(run(&s, &mm, G, &st), 0);
		CHECK_EQ(st.sends_max, rounds);
		CHECK_EQ(st.recvs_max, rounds);
		CHECK_EQ(st.bytes_sent, 0);
		/* Reachability through dependencies and messages: node n's
		 * first send reaches node m's last receive, for every n, m. */
		for (uint32_t n = 0; n < G && G > 1; n++) {
			/* heard[m]: node m has (transitively) heard from n by
			 * the end of round r */
			uint8_t *heard = calloc(G, 1);

			heard[n] = 1;
			for (uint32_t r = 0; r < rounds; r++) {
				uint8_t *next = calloc(G, 1);

				for (uint32_t m = 0; m < G; m++)
					next[m] = heard[m] || heard[(m + G - (1u << r) % G) % G];
				free(heard);
				heard = next;
			}
			for (uint32_t m = 0; m < G; m++)
				CHECK(heard[m]);
			free(heard);
		}
		mem_free(&mm);
		sched_free(&s);
	}
	struct sched_node n = { 0 };
	CHECK_EQ(barrier_sched_node(3, 3, &n), -EINVAL);
	CHECK_EQ(barrier_sched_node(0, 0, &n), -EINVAL);
}

/* What a node knows when its barrier ends, through the schedule's own
 * dependencies and messages (not through rounds: the executor runs a step
 * once its dependencies are done, and a receive whose message came early
 * is done early): node n's last step must come after every node entered,
 * that is, after a chain of dependencies and messages from every node's
 * first step.  K(step) = its node, the K of the steps it depends on, and
 * for a receive the K of the matching send.  (Found by tests/apps: on 8
 * nodes a barrier ended on some nodes before a late rank entered, the sends
 * of round r + 1 waiting for the receive of round r only.) */
TEST(barrier_ends_after_every_node_entered)
{
	for (uint32_t G = 2; G <= 70; G++) {
		struct sched s;
		uint8_t **K = calloc(G, sizeof(*K));
		int changed = 1;

		CHECK_EQ(sched_init(&s, G), 0);
		for (uint32_t n = 0; n < G; n++) {
			CHECK_EQ(barrier_sched_node(G, n, &s.node[n]), 0);
			K[n] = calloc((size_t)s.node[n].nsteps * G, 1);
		}
		while (changed) {
			changed = 0;
			for (uint32_t n = 0; n < G; n++) {
				const struct sched_node *sn = &s.node[n];

				for (uint32_t i = 0; i < sn->nsteps; i++) {
					const struct sched_step *st = &sn->steps[i];
					uint8_t *k = &K[n][(size_t)i * G];
					uint8_t want[128] = { 0 };

					want[n] = 1;
					for (uint32_t d = 0; d < st->ndep; d++)
						for (uint32_t m = 0; m < G; m++)
							want[m] |= K[n][(size_t)sn->deps[st->dep + d] * G + m];
					if (st->kind == SCHED_RECV) {
						const struct sched_node *from = &s.node[st->peer];

						for (uint32_t j = 0; j < from->nsteps; j++)
							if (from->steps[j].kind == SCHED_SEND && from->steps[j].peer == n &&
							    from->steps[j].msg == st->msg)
								for (uint32_t m = 0; m < G; m++)
									want[m] |= K[st->peer][(size_t)j * G + m];
					}
					for (uint32_t m = 0; m < G; m++)
						if (want[m] && !k[m]) {
							k[m] = 1;
							changed = 1;
						}
				}
			}
		}
		for (uint32_t n = 0; n < G; n++) {
			uint32_t known = 0;

			for (uint32_t m = 0; m < G; m++) {
				uint8_t any = 0;

				for (uint32_t i = 0; i < s.node[n].nsteps; i++)
					any |= K[n][(size_t)i * G + m];
				known += any;
			}
			if (known != G)
				fprintf(stderr, "# G=%u: node %u ends knowing %u of %u nodes entered\n", G, n, known, G);
			CHECK_EQ(known, G);
			free(K[n]);
		}
		free(K);
		sched_free(&s);
	}
}

int main(void)
{
	RUN(send_recv_gathers_and_scatters);
	RUN(forward_passes_messages_on);
	RUN(reductions_local_and_received);
	RUN(sized_segments_carry_unknown_lengths);
	RUN(check_refuses_malformed_schedules);
	RUN(check_refuses_reading_unwritten_scratch);
	RUN(sized_segments_have_a_bound);
	RUN(reduce_kernels_match_a_reference);
	RUN(a2a_every_strategy_delivers_every_byte_once);
	RUN(a2a_message_counts_match_the_paper);
	RUN(a2a_shape_does_not_depend_on_sizes);
	RUN(a2a_refuses_bad_arguments);
	RUN(barrier_schedules);
	RUN(barrier_ends_after_every_node_entered);
	return check_done();
}
