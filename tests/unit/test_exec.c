/* tests/unit/test_exec.c - the collective executor (daemon/coll/exec.c):
 * one executor per node, the pieces they send carried between them by a
 * network in this test (per-link FIFOs of bounded room, links served in a
 * random order, so -EAGAIN and interleaving happen), running the
 * all-to-all schedules of every strategy, a forwarding chain and a
 * reduction; then what a hostile peer sends: pieces the schedule does not
 * expect, out of order, malformed heads, sizes that disagree, too much
 * memory. */
#define UNIT "exec"
#include "check.h"
#include "../../daemon/coll/exec.h"
#include "../../daemon/plan/a2a.h"
#include "../../proto/ctl.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* ---- the network ---- */

struct piece {
	struct piece *next;
	uint32_t to;
	struct wire_coll_piece h;
	uint32_t len;
	uint8_t data[];
};

struct net {
	uint32_t nodes;
	struct piece **head, **tail;    /* [from * nodes + to] */
	uint32_t *queued;               /* pieces on each link */
	uint32_t room;                  /* pieces a link holds */
	uint64_t pieces, eagain;
	uint64_t mem_peak;              /* (a2a_exec) the most one node's executor held */
	uint64_t rnd;
};

struct ctx {
	struct net *net;
	uint32_t self;
};

static uint64_t rnd(struct net *n)
{
	n->rnd ^= n->rnd >> 12;
	n->rnd ^= n->rnd << 25;
	n->rnd ^= n->rnd >> 27;
	return n->rnd * 0x2545F4914F6CDD1Dull;
}

static int net_send(void *vctx, uint32_t peer, const struct wire_coll_piece *h, const struct iovec *iov, int niov,
		    uint32_t len)
{
	struct ctx *c = vctx;
	struct net *n = c->net;
	size_t l = (size_t)c->self * n->nodes + peer;
	struct piece *p;

	if (peer >= n->nodes || peer == c->self)
		return -EINVAL;
	if (n->queued[l] >= n->room) {
		n->eagain++;
		return -EAGAIN;
	}
	p = malloc(sizeof(*p) + len + 1);
	p->next = NULL;
	p->to = peer;
	p->h = *h;
	p->len = len;
	coll_iov_copy(p->data, iov, niov);
	if (n->tail[l])
		n->tail[l]->next = p;
	else
		n->head[l] = p;
	n->tail[l] = p;
	n->queued[l]++;
	n->pieces++;
	return 0;
}

static const struct coll_exec_ops net_ops = { .send = net_send };

static void net_init(struct net *n, uint32_t nodes, uint32_t room, uint64_t seed)
{
	memset(n, 0, sizeof(*n));
	n->nodes = nodes;
	n->room = room;
	n->rnd = seed * 2 + 1;
	n->head = calloc((size_t)nodes * nodes, sizeof(*n->head));
	n->tail = calloc((size_t)nodes * nodes, sizeof(*n->tail));
	n->queued = calloc((size_t)nodes * nodes, sizeof(*n->queued));
}

static void net_free(struct net *n)
{
	for (size_t l = 0; l < (size_t)n->nodes * n->nodes; l++)
		while (n->head[l]) {
			struct piece *p = n->head[l];

			n->head[l] = p->next;
			free(p);
		}
	free(n->head);
	free(n->tail);
	free(n->queued);
}

/* Runs executors x[nodes] to the end: nodes run and links deliver in a
 * random order.  Returns 0 when all are done, else the first error. */
static int net_run(struct net *n, struct coll_exec **x)
{
	uint32_t N = n->nodes;
	int *done = calloc(N, sizeof(int));
	int ret = 0;

	for (uint64_t round = 0; round < 1000000; round++) {
		uint32_t all = 1;

		for (uint32_t i = 0; i < N; i++) {
			int r = done[i] ? 1 : coll_exec_run(x[i]);

			if (r < 0) {
				fprintf(stderr, "  node %u: %s\n", i, coll_exec_error(x[i]));
				ret = r;
				goto out;
			}
			done[i] = r;
			all &= (uint32_t)r;
		}
		/* deliver a random number of pieces from random links */
		uint32_t moved = 0;
		for (uint32_t k = 0; k < 2 * N; k++) {
			size_t l = rnd(n) % ((size_t)N * N);
			struct piece *p = n->head[l];

			if (!p)
				continue;
			n->head[l] = p->next;
			if (!p->next)
				n->tail[l] = NULL;
			n->queued[l]--;
			int r = coll_exec_deliver(x[p->to], &p->h, p->data, p->len);

			free(p);
			moved++;
			if (r < 0) {
				fprintf(stderr, "  node %zu deliver: %s\n", l % N, coll_exec_error(x[l % N]));
				ret = r;
				goto out;
			}
		}
		if (all && !moved) {
			int empty = 1;

			for (size_t l = 0; l < (size_t)N * N; l++)
				empty &= !n->head[l];
			if (empty)
				goto out;
		}
	}
	ret = -ETIMEDOUT;
out:
	free(done);
	return ret;
}

/* ---- all-to-all through the executors ---- */

static uint8_t pat(uint32_t a, uint32_t b, uint64_t i)
{
	return (uint8_t)(a * 29 + b * 101 + i * 13 + 5);
}

/* P nodes, ppn[n] ranks each, block bytes (uneven: rank pair counts vary
 * when block is 0 and uneven is set); piece_max stream bytes per piece;
 * links hold room pieces.  Returns the number of wrong bytes, or -1 when a
 * run failed. */
static long a2a_exec(enum a2a_strategy strat, uint32_t P, const uint32_t *ppn, uint64_t block, int uneven,
		     uint32_t piece_max, uint32_t room, uint64_t seed, struct net *stats)
{
	struct a2a_plan p;
	struct sched s;
	uint32_t R = 0, *first = calloc(P + 1, 4), *rank_at;
	long bad = 0;

	for (uint32_t i = 0; i < P; i++) {
		first[i + 1] = first[i] + ppn[i];
		R += ppn[i];
	}
	rank_at = calloc(R + 1, 4);
	for (uint32_t r = 0; r < R; r++)
		rank_at[r] = r;
	uint64_t *cnt = calloc((size_t)R * R + 1, 8), *rcnt = calloc((size_t)R * R + 1, 8);
	uint64_t *sd = calloc((size_t)R * R + 1, 8), *rd = calloc((size_t)R * R + 1, 8);
	uint64_t *slen = calloc(R + 1, 8), *rlen = calloc(R + 1, 8);
	struct a2a_rank_args *args = calloc(R + 1, sizeof(*args));
	for (uint32_t a = 0; a < R; a++)
		for (uint32_t b = 0; b < R; b++) {
			uint64_t c = uneven ? (a * 3 + b * 7) % 5 * 17 : block;

			cnt[(size_t)a * R + b] = c;
			rcnt[(size_t)b * R + a] = c;
		}
	for (uint32_t a = 0; a < R; a++) {
		for (uint32_t b = 0; b < R; b++) {
			sd[(size_t)a * R + b] = slen[a];
			slen[a] += cnt[(size_t)a * R + b];
			rd[(size_t)a * R + b] = rlen[a];
			rlen[a] += rcnt[(size_t)a * R + b];
		}
		args[a] = (struct a2a_rank_args){ cnt + (size_t)a * R, sd + (size_t)a * R, rcnt + (size_t)a * R,
						  rd + (size_t)a * R };
	}
	struct a2a_layout lay = { R, first, rank_at };
	CHECK_EQ(a2a_plan_init(&p, strat, P), 0);
	CHECK_EQ(sched_init(&s, P), 0);
	CHECK_EQ(a2a_sched(&p, &lay, args, &s), 0);

	struct sched_mem *mem = calloc(P, sizeof(*mem));
	struct coll_exec **x = calloc(P, sizeof(*x));
	struct ctx *ctx = calloc(P, sizeof(*ctx));
	struct net net;
	net_init(&net, P, room, seed);
	for (uint32_t i = 0; i < P; i++) {
		struct coll_exec_cfg cfg = { .self = i, .op = 7, .group = 0, .piece_max = piece_max,
					     .mem_max = 1u << 26 };
		char err[200];

		mem[i].send = calloc(ppn[i] + 1, sizeof(void *));
		mem[i].recv = calloc(ppn[i] + 1, sizeof(void *));
		mem[i].send_len = calloc(ppn[i] + 1, 8);
		mem[i].recv_len = calloc(ppn[i] + 1, 8);
		for (uint32_t k = 0; k < ppn[i]; k++) {
			uint32_t a = first[i] + k;

			mem[i].send_len[k] = slen[a];
			mem[i].recv_len[k] = rlen[a];
			mem[i].send[k] = slen[a] ? malloc(slen[a]) : NULL;
			mem[i].recv[k] = rlen[a] ? malloc(rlen[a]) : NULL;
			if (rlen[a])
				memset(mem[i].recv[k], 0xee, rlen[a]);
			for (uint32_t b = 0; b < R; b++)
				for (uint64_t j = 0; j < cnt[(size_t)a * R + b]; j++)
					mem[i].send[k][sd[(size_t)a * R + b] + j] = pat(a, b, j);
		}
		ctx[i] = (struct ctx){ &net, i };
		CHECK_EQ(coll_exec_new(&s.node[i], &mem[i], &cfg, &net_ops, &ctx[i], &x[i], err, sizeof(err)), 0);
	}
	int ret = net_run(&net, x);
	if (ret)
		bad = -1;
	for (uint32_t i = 0; i < P && !ret; i++)
		for (uint32_t k = 0; k < ppn[i]; k++) {
			uint32_t b = first[i] + k;

			for (uint32_t a = 0; a < R; a++)
				for (uint64_t j = 0; j < rcnt[(size_t)b * R + a]; j++)
					bad += mem[i].recv[k][rd[(size_t)b * R + a] + j] != pat(a, b, j);
		}
	for (uint32_t i = 0; i < P; i++) {
		/* every stream given back once it went */
		if (!ret)
			CHECK_EQ(coll_exec_mem(x[i]), 0);
		if (stats && coll_exec_mem_peak(x[i]) > stats->mem_peak)
			stats->mem_peak = coll_exec_mem_peak(x[i]);
		coll_exec_free(x[i]);
		for (uint32_t k = 0; k < ppn[i]; k++) {
			free(mem[i].send[k]);
			free(mem[i].recv[k]);
		}
		free(mem[i].send);
		free(mem[i].recv);
		free(mem[i].send_len);
		free(mem[i].recv_len);
	}
	if (stats) {
		stats->pieces += net.pieces;
		stats->eagain += net.eagain;
	}
	net_free(&net);
	free(mem);
	free(x);
	free(ctx);
	sched_free(&s);
	free(first);
	free(rank_at);
	free(cnt);
	free(rcnt);
	free(sd);
	free(rd);
	free(slen);
	free(rlen);
	free(args);
	return bad;
}

TEST(alltoall_runs_on_executors)
{
	static const uint32_t Ps[] = { 1, 2, 3, 5, 8, 9, 12, 17 };
	uint32_t ppn[17];
	struct net st = { 0 };
	int runs = 0;

	for (size_t pi = 0; pi < sizeof(Ps) / sizeof(Ps[0]); pi++)
		for (int layout = 0; layout < 3; layout++)
			for (int strat = 0; strat < A2A_STRATEGIES; strat++) {
				uint32_t P = Ps[pi];

				for (uint32_t i = 0; i < P; i++)
					ppn[i] = layout == 0 ? 1 : layout == 1 ? 2 : (i * 5 + 1) % 3;
				/* small pieces and little room: many pieces,
				 * -EAGAIN; then a large block */
				CHECK_EQ(a2a_exec(strat, P, ppn, 8, 0, 16, 2, (uint64_t)runs, &st), 0);
				CHECK_EQ(a2a_exec(strat, P, ppn, 0, 1, 40, 3, (uint64_t)runs + 1, &st), 0);
				CHECK_EQ(a2a_exec(strat, P, ppn, 0, 0, 100, 1, (uint64_t)runs + 2, &st), 0);
				runs += 3;
			}
	/* larger blocks, real piece sizes, on few nodes */
	for (int strat = 0; strat < A2A_STRATEGIES; strat++) {
		uint32_t two[4] = { 2, 1, 2, 3 };

		CHECK_EQ(a2a_exec(strat, 4, two, 70000, 0, WIRE_COLL_PIECE_MAX, 4, 99, &st), 0);
		runs++;
	}
	CHECK(st.eagain > 0);           /* the room limit was met, and waited out */
	CHECK(runs > 200);
	printf("# %d all-to-alls run on executors, %llu pieces, %llu -EAGAIN\n", runs, (unsigned long long)st.pieces,
	       (unsigned long long)st.eagain);
}

/* Blocks that go straight from a send buffer to a receive buffer (direct)
 * are read and written in place: the executors hold their messages' heads
 * only, however large the blocks; a mesh passes blocks on through scratch. */
TEST(direct_blocks_are_sent_and_received_in_place)
{
	uint32_t one[4] = { 1, 1, 1, 1 }, two[4] = { 2, 1, 2, 3 };
	struct net st = { 0 }, mesh = { 0 };

	CHECK_EQ(a2a_exec(A2A_DIRECT, 4, one, 1 << 20, 0, WIRE_COLL_PIECE_MAX, 4, 5, &st), 0);
	CHECK_EQ(a2a_exec(A2A_DIRECT, 4, two, 300000, 0, WIRE_COLL_PIECE_MAX, 2, 6, &st), 0);
	printf("# direct: %llu bytes held at most on a node\n", (unsigned long long)st.mem_peak);
	CHECK(st.mem_peak < 4096);
	CHECK_EQ(a2a_exec(A2A_MESH, 4, one, 1 << 20, 0, WIRE_COLL_PIECE_MAX, 4, 7, &mesh), 0);
	CHECK(mesh.mem_peak >= 1 << 20);
}

/* ---- a chain of FORWARDs and a reduction ---- */

TEST(forward_and_reduce_on_executors)
{
	/* nodes 0 -> 1 -> 2 -> 3 forward node 0's 5 int64 values; node 3
	 * adds them into its own (RECV_REDUCE), the other way round node 3
	 * sends its result straight back to node 0 */
	struct sched s;
	struct sched_mem mem[4];
	int64_t sv[4][5], rv[4][5];
	uint8_t *sp[4], *rp[4];
	uint64_t sl[4], rl[4];
	struct coll_exec *x[4];
	struct ctx ctx[4];
	struct net net;

	CHECK_EQ(sched_init(&s, 4), 0);
	for (uint32_t i = 0; i < 4; i++) {
		s.node[i].nslots = 1;
		for (int e = 0; e < 5; e++) {
			sv[i][e] = (int64_t)(i + 1) * 1000 + e;
			rv[i][e] = -1;
		}
		sp[i] = (uint8_t *)sv[i];
		rp[i] = (uint8_t *)rv[i];
		sl[i] = rl[i] = sizeof(sv[i]);
		mem[i] = (struct sched_mem){ &sp[i], &rp[i], &sl[i], &rl[i] };
	}
	struct sched_node *n0 = &s.node[0], *n1 = &s.node[1], *n2 = &s.node[2], *n3 = &s.node[3];
	sched_step(n0, SCHED_SEND, 1, 0, 0);
	sched_ref(n0, sched_seg(n0, SCHED_BUF_SEND, 0, 0, 40, 0));
	sched_step(n0, SCHED_RECV, 3, 1, 0);
	sched_ref(n0, sched_seg(n0, SCHED_BUF_RECV, 0, 0, 40, 0));
	sched_step(n1, SCHED_FORWARD, 2, 0, 0);
	sched_step_forward(n1, 0, 0);
	sched_step(n2, SCHED_FORWARD, 3, 0, 0);
	sched_step_forward(n2, 1, 0);
	uint32_t acc = sched_seg(n3, SCHED_BUF_RECV, 0, 0, 40, 0);
	uint32_t c = sched_step(n3, SCHED_COPY, 0, 0, 0);
	sched_ref(n3, acc);
	sched_ref(n3, sched_seg(n3, SCHED_BUF_SEND, 0, 0, 40, 0));
	uint32_t r = sched_step(n3, SCHED_RECV_REDUCE, 2, 0, 0);
	sched_step_reduce(n3, COLL_INT64, COLL_SUM);
	sched_ref(n3, acc);
	sched_dep(n3, c);
	sched_step(n3, SCHED_SEND, 0, 1, 0);
	sched_ref(n3, acc);
	sched_dep(n3, r);
	CHECK_EQ(sched_err(&s), 0);
	CHECK_EQ(sched_check(&s, NULL, 0), 0);
	/* run 0 builds its tables; runs 1 and 2 start from templates built
	 * once (as the operations of a plan a group keeps: coll.c), with other
	 * values each time */
	struct coll_exec_tmpl *t[4];
	char err[200];

	for (uint32_t i = 0; i < 4; i++)
		CHECK_EQ(coll_exec_tmpl_new(&s.node[i], &t[i]), 0);
	for (int run = 0; run < 3; run++) {
		for (uint32_t i = 0; i < 4; i++)
			for (int e = 0; e < 5; e++) {
				sv[i][e] = (int64_t)(i + 1) * 1000 + e + run * 100;
				rv[i][e] = -1;
			}
		net_init(&net, 4, 1, 5 + (uint64_t)run);
		for (uint32_t i = 0; i < 4; i++) {
			struct coll_exec_cfg cfg = { .self = i, .piece_max = 7, .mem_max = 4096,
						     .tmpl = run ? t[i] : NULL };

			ctx[i] = (struct ctx){ &net, i };
			CHECK_EQ(coll_exec_new(&s.node[i], &mem[i], &cfg, &net_ops, &ctx[i], &x[i], NULL, 0), 0);
		}
		CHECK_EQ(net_run(&net, x), 0);
		for (int e = 0; e < 5; e++) {
			CHECK_EQ(rv[3][e], 5000 + 2 * e + 2 * run * 100);
			CHECK_EQ(rv[0][e], 5000 + 2 * e + 2 * run * 100);
		}
		for (uint32_t i = 0; i < 4; i++) {
			CHECK(coll_exec_mem_peak(x[i]) > 0 || i == 2 || i == 1);
			coll_exec_free(x[i]);
		}
		net_free(&net);
	}
	/* a template of another node's steps is refused */
	{
		struct coll_exec_cfg cfg = { .self = 0, .piece_max = 7, .mem_max = 4096, .tmpl = t[3] };

		CHECK_EQ(coll_exec_new(&s.node[0], &mem[0], &cfg, &net_ops, &ctx[0], &x[0], err, sizeof(err)), -EINVAL);
		CHECK(strstr(err, "template") != NULL);
	}
	for (uint32_t i = 0; i < 4; i++) {
		CHECK(coll_exec_tmpl_bytes(t[i]) > 0);
		coll_exec_tmpl_free(t[i]);
	}
	sched_free(&s);
}

TEST(large_local_steps_go_in_slices_of_the_budget)
{
	/* one node: a COPY of 1 MiB then a REDUCE of 1 MiB of int32 onto it,
	 * run with 64 KiB a call: several calls, each within its budget
	 * (give or take an element), and the result whole */
	enum { N = 1 << 20 };
	struct sched s;
	struct sched_mem mem;
	uint8_t *src = malloc(N), *dst = malloc(N), *sp = src, *rp = dst;
	uint64_t sl = N, rl = N, budget;
	struct coll_exec *x;
	struct coll_exec_cfg cfg = { .self = 0, .piece_max = 64, .mem_max = 4096 };
	int calls = 0, r;

	for (uint32_t i = 0; i < N; i++)
		src[i] = (uint8_t)(i * 7 + 1);
	memset(dst, 0, N);
	mem = (struct sched_mem){ &sp, &rp, &sl, &rl };
	CHECK_EQ(sched_init(&s, 1), 0);
	s.node[0].nslots = 1;
	uint32_t c = sched_step(&s.node[0], SCHED_COPY, 0, 0, 0);
	sched_ref(&s.node[0], sched_seg(&s.node[0], SCHED_BUF_RECV, 0, 0, N, 0));
	sched_ref(&s.node[0], sched_seg(&s.node[0], SCHED_BUF_SEND, 0, 0, N, 0));
	sched_step(&s.node[0], SCHED_REDUCE, 0, 0, 0);
	sched_step_reduce(&s.node[0], COLL_INT32, COLL_SUM);
	sched_ref(&s.node[0], sched_seg(&s.node[0], SCHED_BUF_RECV, 0, 0, N, 0));
	sched_ref(&s.node[0], sched_seg(&s.node[0], SCHED_BUF_SEND, 0, 0, N, 0));
	sched_dep(&s.node[0], c);
	CHECK_EQ(sched_err(&s), 0);
	CHECK_EQ(coll_exec_new(&s.node[0], &mem, &cfg, &net_ops, NULL, &x, NULL, 0), 0);
	do {
		budget = 64 << 10;
		r = coll_exec_run_budget(x, &budget);
		calls++;
		CHECK_EQ(budget, 0);
		CHECK(r == 1 || coll_exec_busy(x));
	} while (r == 0 && calls < 100);
	CHECK_EQ(r, 1);
	CHECK_EQ(calls, 2 * N / (64 << 10));
	for (uint32_t i = 0; i < N; i += 4) {
		int32_t a, b;

		memcpy(&a, src + i, 4);
		memcpy(&b, dst + i, 4);
		CHECK_EQ((uint32_t)b, 2u * (uint32_t)a);
		if ((uint32_t)b != 2u * (uint32_t)a)
			break;
	}
	coll_exec_free(x);
	sched_free(&s);
	free(src);
	free(dst);
}

/* A message kept whole (not placed: node 1's send buffer is its receive
 * buffer) is received in slices of the budget, not in one copy that holds
 * the loop (review of issue 12, finding 5), as a RECV and as a
 * RECV_REDUCE, and lands whole. */
TEST(a_message_kept_whole_is_received_in_slices_of_the_budget)
{
	enum { BIG = 8 << 20, SLICE = 1 << 20 };

	for (int reduce = 0; reduce < 2; reduce++) {
		struct sched s;
		struct net net;
		struct coll_exec *x[2];
		uint8_t *s0 = malloc(BIG), *b1 = malloc(BIG), *r0 = NULL;
		uint64_t l0 = BIG, l0r = 0, l1 = BIG, budget;
		struct sched_mem m0 = { &s0, &r0, &l0, &l0r }, m1 = { &b1, &b1, &l1, &l1 };
		struct coll_exec_cfg c0 = { .self = 0, .job = 1, .op = 1, .piece_max = WIRE_COLL_PIECE_MAX,
					    .mem_max = 64 << 20 }, c1 = c0;
		int calls = 0, r;

		CHECK_EQ(sched_init(&s, 2), 0);
		s.node[0].nslots = s.node[1].nslots = 1;
		sched_step(&s.node[0], SCHED_SEND, 1, 0, 0);
		sched_ref(&s.node[0], sched_seg(&s.node[0], SCHED_BUF_SEND, 0, 0, BIG, 0));
		sched_step(&s.node[1], reduce ? SCHED_RECV_REDUCE : SCHED_RECV, 0, 0, 0);
		if (reduce)
			sched_step_reduce(&s.node[1], COLL_INT32, COLL_SUM);
		sched_ref(&s.node[1], sched_seg(&s.node[1], SCHED_BUF_RECV, 0, 0, BIG, 0));
		CHECK_EQ(sched_err(&s), 0);
		for (uint32_t i = 0; i < BIG; i++)
			s0[i] = (uint8_t)(i * 7 + 1);
		memset(b1, reduce ? 1 : 0, BIG);
		c1.self = 1;
		net_init(&net, 2, 1 << 20, 1);
		struct ctx cx0 = { &net, 0 }, cx1 = { &net, 1 };
		CHECK_EQ(coll_exec_new(&s.node[0], &m0, &c0, &net_ops, &cx0, &x[0], NULL, 0), 0);
		CHECK_EQ(coll_exec_new(&s.node[1], &m1, &c1, &net_ops, &cx1, &x[1], NULL, 0), 0);
		CHECK_EQ(coll_exec_run(x[0]), 1);
		for (struct piece *p; (p = net.head[1]); free(p)) {    /* every piece to node 1 */
			net.head[1] = p->next;
			CHECK_EQ(coll_exec_deliver(x[1], &p->h, p->data, p->len), 0);
		}
		net.tail[1] = NULL;
		CHECK(coll_exec_mem(x[1]) >= BIG);                    /* kept whole */
		do {
			budget = SLICE;
			r = coll_exec_run_budget(x[1], &budget);
			calls++;
			CHECK(budget == 0 || r == 1);
		} while (r == 0 && calls < 100);
		CHECK_EQ(r, 1);
		printf("# %s of %d MiB kept whole: %d calls of a %d MiB budget\n", reduce ? "RECV_REDUCE" : "RECV",
		       BIG >> 20, calls, SLICE >> 20);
		CHECK(calls >= BIG / SLICE);
		for (uint32_t i = 0; i < BIG; i += 4) {
			int32_t a, b;

			memcpy(&a, s0 + i, 4);
			memcpy(&b, b1 + i, 4);
			if (reduce ? (uint32_t)b != (uint32_t)a + 0x01010101u : a != b) {
				CHECK(0);
				break;
			}
		}
		CHECK_EQ(coll_exec_mem(x[1]), 0);
		coll_exec_free(x[0]);
		coll_exec_free(x[1]);
		net_free(&net);
		sched_free(&s);
		free(s0);
		free(b1);
	}
}

/* A SEND that is not read in place (its segment is in the receive buffer,
 * which steps may write) is copied into its stream in slices of the
 * budget, and what arrives is whole. */
TEST(a_send_not_in_place_is_copied_in_slices_of_the_budget)
{
	enum { BIG = 8 << 20, SLICE = 1 << 20 };
	struct sched s;
	struct net net;
	struct coll_exec *x[2];
	uint8_t *r0 = malloc(BIG), *r1 = malloc(BIG), *s0 = NULL, *s1 = NULL;
	uint64_t l0 = BIG, z = 0, l1 = BIG, budget;
	struct sched_mem m0 = { &s0, &r0, &z, &l0 }, m1 = { &s1, &r1, &z, &l1 };
	struct coll_exec_cfg c0 = { .self = 0, .job = 1, .op = 1, .piece_max = WIRE_COLL_PIECE_MAX,
				    .mem_max = 64 << 20 }, c1 = c0;
	int calls = 0, r;

	CHECK_EQ(sched_init(&s, 2), 0);
	s.node[0].nslots = s.node[1].nslots = 1;
	sched_step(&s.node[0], SCHED_SEND, 1, 0, 0);
	sched_ref(&s.node[0], sched_seg(&s.node[0], SCHED_BUF_RECV, 0, 0, BIG, 0));
	sched_step(&s.node[1], SCHED_RECV, 0, 0, 0);
	sched_ref(&s.node[1], sched_seg(&s.node[1], SCHED_BUF_RECV, 0, 0, BIG, 0));
	CHECK_EQ(sched_err(&s), 0);
	for (uint32_t i = 0; i < BIG; i++)
		r0[i] = (uint8_t)(i * 13 + 5);
	memset(r1, 0, BIG);
	c1.self = 1;
	net_init(&net, 2, 1 << 20, 1);
	struct ctx cx0 = { &net, 0 }, cx1 = { &net, 1 };
	CHECK_EQ(coll_exec_new(&s.node[0], &m0, &c0, &net_ops, &cx0, &x[0], NULL, 0), 0);
	CHECK_EQ(coll_exec_new(&s.node[1], &m1, &c1, &net_ops, &cx1, &x[1], NULL, 0), 0);
	do {
		budget = SLICE;
		r = coll_exec_run_budget(x[0], &budget);
		calls++;
		CHECK(budget == 0 || r == 1);
	} while (r == 0 && !net.pieces && calls < 100);
	printf("# a SEND of %d MiB not in place: copied in %d calls of a %d MiB budget\n", BIG >> 20, calls,
	       SLICE >> 20);
	CHECK(calls >= BIG / SLICE);
	CHECK_EQ(net_run(&net, x), 0);
	CHECK_EQ(memcmp(r0, r1, BIG), 0);
	coll_exec_free(x[0]);
	coll_exec_free(x[1]);
	net_free(&net);
	sched_free(&s);
	free(r0);
	free(r1);
}

/* Steps done in slices of tiny budgets (1-7 bytes a call), pieces coming
 * between the calls: node 0 sends node 1 four parts (one empty) from its
 * receive buffer (a SEND not in place), node 1 keeps them in sized scratch
 * and sends them on to node 2 (copied in slices), which takes them into a
 * buffer that is also its send buffer (held whole: a RECV in slices); node
 * 0 also sends node 2 int32s (three parts, one empty) that node 2 adds to
 * its own (a RECV_REDUCE in slices: whole elements only).  400 runs, each
 * its own piece size and order; every byte checked.  (From the review of
 * the slicing.) */
TEST(tiny_budgets_over_several_segments)
{
	static const uint64_t L[4] = { 5, 0, 7, 13 }, so[4] = { 0, 5, 10, 20 };

	for (uint64_t seed = 1; seed < 400 && !check_failed_now; seed++) {
		struct sched s;
		struct net net;
		struct coll_exec *x[3];
		uint8_t *r0 = malloc(64), *r1 = malloc(1), *b2 = malloc(64), *s0 = NULL, *s1 = NULL;
		uint64_t l0 = 64, z = 0, l1 = 1, l2 = 64, dp = 0;
		struct sched_mem m0 = { &s0, &r0, &z, &l0 }, m1 = { &s1, &r1, &z, &l1 }, m2 = { &b2, &b2, &l2, &l2 };
		struct coll_exec_cfg c0 = { .self = 0, .job = 1, .op = 1, .piece_max = 1 + seed % 5,
					    .mem_max = 1 << 20 }, c1 = c0, c2 = c0;
		struct ctx cx0 = { &net, 0 }, cx1 = { &net, 1 }, cx2 = { &net, 2 };
		int done[3] = { 0 }, rounds = 0;
		uint32_t sg[4], rv;
		char why[200];

		CHECK_EQ(sched_init(&s, 3), 0);
		struct sched_node *n0 = &s.node[0], *n1 = &s.node[1], *n2 = &s.node[2];

		n0->nslots = n1->nslots = n2->nslots = 1;
		sched_step(n0, SCHED_SEND, 1, 0, 0);
		for (int i = 0; i < 4; i++)
			sched_ref(n0, sched_seg(n0, SCHED_BUF_RECV, 0, so[i], L[i], 0));
		sched_step(n0, SCHED_SEND, 2, 1, 1);
		sched_ref(n0, sched_seg(n0, SCHED_BUF_RECV, 0, 40, 8, 0));
		sched_ref(n0, sched_seg(n0, SCHED_BUF_RECV, 0, 48, 0, 0));
		sched_ref(n0, sched_seg(n0, SCHED_BUF_RECV, 0, 48, 12, 0));
		for (int i = 0; i < 4; i++)
			sg[i] = sched_seg(n1, SCHED_BUF_SCRATCH, sched_scratch(n1, 0), 0, 0, SCHED_SEG_SIZED);
		rv = sched_step(n1, SCHED_RECV, 0, 0, 0);
		for (int i = 0; i < 4; i++)
			sched_ref(n1, sg[i]);
		sched_step(n1, SCHED_SEND, 2, 2, 0);
		for (int i = 0; i < 4; i++)
			sched_ref(n1, sg[i]);
		sched_dep(n1, rv);
		sched_step(n2, SCHED_RECV, 1, 2, 0);
		sched_ref(n2, sched_seg(n2, SCHED_BUF_RECV, 0, 0, 5, 0));
		sched_ref(n2, sched_seg(n2, SCHED_BUF_RECV, 0, 5, 0, 0));
		sched_ref(n2, sched_seg(n2, SCHED_BUF_RECV, 0, 5, 7, 0));
		sched_ref(n2, sched_seg(n2, SCHED_BUF_RECV, 0, 12, 13, 0));
		sched_step(n2, SCHED_RECV_REDUCE, 0, 1, 0);
		sched_step_reduce(n2, COLL_INT32, COLL_SUM);
		sched_ref(n2, sched_seg(n2, SCHED_BUF_RECV, 0, 32, 8, 0));
		sched_ref(n2, sched_seg(n2, SCHED_BUF_RECV, 0, 40, 0, 0));
		sched_ref(n2, sched_seg(n2, SCHED_BUF_RECV, 0, 40, 12, 0));
		CHECK_EQ(sched_err(&s), 0);
		CHECK_EQ(sched_check(&s, why, sizeof(why)), 0);
		for (int i = 0; i < 64; i++) {
			r0[i] = (uint8_t)(i * 7 + 3);
			b2[i] = 0x11;
		}
		c1.self = 1;
		c2.self = 2;
		net_init(&net, 3, 1 << 20, seed);
		CHECK_EQ(coll_exec_new(n0, &m0, &c0, &net_ops, &cx0, &x[0], NULL, 0), 0);
		CHECK_EQ(coll_exec_new(n1, &m1, &c1, &net_ops, &cx1, &x[1], NULL, 0), 0);
		CHECK_EQ(coll_exec_new(n2, &m2, &c2, &net_ops, &cx2, &x[2], NULL, 0), 0);
		while (!(done[0] && done[1] && done[2]) && rounds++ < 100000 && !check_failed_now) {
			size_t l = rnd(&net) % 9;
			struct piece *p = net.head[l];

			for (int i = 0; i < 3; i++) {
				uint64_t b = 1 + rnd(&net) % 7;
				int r = done[i] ? 1 : coll_exec_run_budget(x[i], &b);

				if (r < 0)
					fprintf(stderr, "  seed %llu node %d: %s\n", (unsigned long long)seed, i,
						coll_exec_error(x[i]));
				CHECK(r >= 0);
				done[i] = r;
			}
			if (p) {        /* one piece from a random link */
				net.head[l] = p->next;
				if (!p->next)
					net.tail[l] = NULL;
				net.queued[l]--;
				CHECK_EQ(coll_exec_deliver(x[p->to], &p->h, p->data, p->len), 0);
				free(p);
			}
		}
		CHECK(done[0] && done[1] && done[2]);
		for (int i = 0; i < 4; i++) {
			CHECK(!L[i] || memcmp(b2 + dp, r0 + so[i], L[i]) == 0);
			dp += L[i];
		}
		for (int i = 0; i < 5; i++) {
			int32_t a, b;

			memcpy(&a, r0 + 40 + 4 * i, 4);
			memcpy(&b, b2 + 32 + 4 * i, 4);
			CHECK_EQ((uint32_t)b, (uint32_t)a + 0x11111111u);
		}
		CHECK_EQ(b2[25], 0x11);
		CHECK_EQ(coll_exec_mem(x[0]) + coll_exec_mem(x[1]) + coll_exec_mem(x[2]), 0);
		if (check_failed_now)
			fprintf(stderr, "  seed %llu\n", (unsigned long long)seed);
		for (int i = 0; i < 3; i++)
			coll_exec_free(x[i]);
		net_free(&net);
		sched_free(&s);
		free(r0);
		free(r1);
		free(b2);
	}
}

/* One piece in flight, for the test below. */
static struct {
	struct wire_coll_piece h;
	uint8_t d[64];
	uint32_t len;
} held;

static int hold_send(void *ctx, uint32_t peer, const struct wire_coll_piece *h, const struct iovec *iov, int niov,
		     uint32_t len)
{
	(void)ctx;
	(void)peer;
	if (len > sizeof(held.d))
		return -EINVAL;
	held.h = *h;
	coll_iov_copy(held.d, iov, niov);
	held.len = len;
	return 0;
}

/* Two nodes of one rank each; node 0 sends node 1 (message 0) the first
 * len bytes of its send buffer.  Node 1's steps are the caller's. */
static void two_nodes_one_block(struct sched *s, uint64_t len)
{
	CHECK_EQ(sched_init(s, 2), 0);
	s->node[0].nslots = s->node[1].nslots = 1;
	sched_step(&s->node[0], SCHED_SEND, 1, 0, 0);
	sched_ref(&s->node[0], sched_seg(&s->node[0], SCHED_BUF_SEND, 0, 0, len, 0));
}

TEST(a_step_begun_goes_on_at_its_own_offset)
{
	/* node 1: a big COPY (A) that the budget cuts, then a piece comes
	 * whose RECV (B) makes a small COPY (C) ready: C must run from its
	 * start, and A go on where it stopped */
	enum { BIG = 8 << 20, SMALL = 16 };
	static const struct coll_exec_ops ops = { .send = hold_send };
	struct sched s;
	struct coll_exec *x0, *x1;
	uint8_t *s0 = malloc(SMALL), *s1 = malloc(BIG), *r1 = malloc(BIG + SMALL), *r0 = NULL;
	uint64_t l0 = SMALL, l0r = 0, l1s = BIG, l1r = BIG + SMALL, budget;
	struct sched_mem m0 = { &s0, &r0, &l0, &l0r }, m1 = { &s1, &r1, &l1s, &l1r };
	struct coll_exec_cfg c0 = { .self = 0, .job = 1, .op = 1, .piece_max = 64, .mem_max = 1 << 20 }, c1 = c0;

	two_nodes_one_block(&s, SMALL);
	struct sched_node *n1 = &s.node[1];
	uint32_t sc = sched_scratch(n1, SMALL);
	uint32_t scr = sched_seg(n1, SCHED_BUF_SCRATCH, sc, 0, SMALL, 0);

	sched_step(n1, SCHED_COPY, 0, 0, 0);
	sched_ref(n1, sched_seg(n1, SCHED_BUF_RECV, 0, 0, BIG, 0));
	sched_ref(n1, sched_seg(n1, SCHED_BUF_SEND, 0, 0, BIG, 0));
	uint32_t b = sched_step(n1, SCHED_RECV, 0, 0, 0);
	sched_ref(n1, scr);
	sched_step(n1, SCHED_COPY, 0, 0, 0);
	sched_ref(n1, sched_seg(n1, SCHED_BUF_RECV, 0, BIG, SMALL, 0));
	sched_ref(n1, scr);
	sched_dep(n1, b);
	CHECK_EQ(sched_err(&s), 0);
	memset(s0, 0xab, SMALL);
	memset(s1, 1, BIG);
	memset(r1, 0, BIG + SMALL);
	c1.self = 1;
	CHECK_EQ(coll_exec_new(&s.node[0], &m0, &c0, &ops, NULL, &x0, NULL, 0), 0);
	CHECK_EQ(coll_exec_new(&s.node[1], &m1, &c1, &ops, NULL, &x1, NULL, 0), 0);
	budget = 4 << 20;
	CHECK_EQ(coll_exec_run_budget(x1, &budget), 0);         /* A: half of it */
	CHECK(coll_exec_busy(x1));
	CHECK_EQ(coll_exec_run(x0), 1);                         /* the piece */
	CHECK_EQ(coll_exec_deliver(x1, &held.h, held.d, held.len), 0);
	for (int turn = 0; turn < 4 && coll_exec_busy(x1); turn++) {
		budget = 4 << 20;
		CHECK(coll_exec_run_budget(x1, &budget) >= 0);
	}
	budget = 4 << 20;
	CHECK_EQ(coll_exec_run_budget(x1, &budget), 1);
	CHECK_EQ(r1[BIG], 0xab);
	CHECK_EQ(r1[BIG + SMALL - 1], 0xab);
	CHECK_EQ(r1[0], 1);
	CHECK_EQ(r1[BIG - 1], 1);
	coll_exec_free(x0);
	coll_exec_free(x1);
	sched_free(&s);
	free(s0);
	free(s1);
	free(r1);
}

/* ---- a hostile peer ---- */

/* Node 1 of a 2-node schedule: takes message 3 from node 0 (two parts of
 * 4 and 6 bytes into its receive buffer), sends nothing. */
/* A RECV whose step waits for another step when its piece comes is not
 * placed: its bytes go where that step writes too (a COPY the budget cut
 * in two), and must land after it.  And nothing is placed or read in place
 * where a rank's send buffer is its receive buffer. */
TEST(placing_waits_for_the_steps_before_and_for_apart_buffers)
{
	enum { BIG = 8 << 20, SMALL = 16 };
	static const struct coll_exec_ops ops = { .send = hold_send };
	struct sched s;
	struct coll_exec *x0, *x1;
	uint8_t *s0 = malloc(SMALL), *s1 = malloc(BIG), *r1 = malloc(BIG), *r0 = NULL;
	uint64_t l0 = SMALL, l0r = 0, l1s = BIG, l1r = BIG, budget;
	struct sched_mem m0 = { &s0, &r0, &l0, &l0r }, m1 = { &s1, &r1, &l1s, &l1r };
	struct coll_exec_cfg c0 = { .self = 0, .job = 1, .op = 1, .piece_max = 64, .mem_max = 1 << 20 }, c1 = c0;

	two_nodes_one_block(&s, SMALL);
	struct sched_node *n1 = &s.node[1];
	uint32_t a = sched_step(n1, SCHED_COPY, 0, 0, 0);

	sched_ref(n1, sched_seg(n1, SCHED_BUF_RECV, 0, 0, BIG, 0));
	sched_ref(n1, sched_seg(n1, SCHED_BUF_SEND, 0, 0, BIG, 0));
	sched_step(n1, SCHED_RECV, 0, 0, 0);
	sched_ref(n1, sched_seg(n1, SCHED_BUF_RECV, 0, BIG - SMALL, SMALL, 0));
	sched_dep(n1, a);
	CHECK_EQ(sched_err(&s), 0);
	memset(s0, 0xab, SMALL);
	memset(s1, 1, BIG);
	memset(r1, 0, BIG);
	c1.self = 1;
	CHECK_EQ(coll_exec_new(&s.node[0], &m0, &c0, &ops, NULL, &x0, NULL, 0), 0);
	CHECK_EQ(coll_exec_new(&s.node[1], &m1, &c1, &ops, NULL, &x1, NULL, 0), 0);
	budget = 4 << 20;
	CHECK_EQ(coll_exec_run_budget(x1, &budget), 0);         /* the COPY: its first half */
	CHECK_EQ(r1[BIG - 1], 0);
	CHECK_EQ(coll_exec_run(x0), 1);                         /* the piece */
	CHECK_EQ(coll_exec_deliver(x1, &held.h, held.d, held.len), 0);
	CHECK_EQ(r1[BIG - 1], 0);                               /* kept, not placed */
	CHECK(coll_exec_mem(x1) >= SMALL);
	for (int turn = 0; turn < 8 && coll_exec_run(x1) == 0; turn++)
		;
	CHECK_EQ(coll_exec_run(x1), 1);
	CHECK_EQ(r1[BIG - SMALL], 0xab);                        /* after the COPY's second half */
	CHECK_EQ(r1[BIG - 1], 0xab);
	CHECK_EQ(r1[BIG - SMALL - 1], 1);
	coll_exec_free(x0);
	coll_exec_free(x1);
	sched_free(&s);

	/* node 1 takes the block, its send buffer its receive buffer: the
	 * block is kept whole until its step runs (not placed); with buffers
	 * apart, written at once */
	two_nodes_one_block(&s, SMALL);
	n1 = &s.node[1];
	sched_step(n1, SCHED_RECV, 0, 0, 0);
	sched_ref(n1, sched_seg(n1, SCHED_BUF_RECV, 0, 0, SMALL, 0));
	CHECK_EQ(sched_err(&s), 0);
	for (int alias = 0; alias < 2; alias++) {
		uint8_t *buf = malloc(SMALL);
		uint64_t len = SMALL;
		struct sched_mem m = { alias ? &buf : &s1, &buf, alias ? &len : &l1s, &len };

		memset(buf, 0, SMALL);
		CHECK_EQ(coll_exec_new(&s.node[0], &m0, &c0, &ops, NULL, &x0, NULL, 0), 0);
		CHECK_EQ(coll_exec_new(&s.node[1], &m, &c1, &ops, NULL, &x1, NULL, 0), 0);
		CHECK_EQ(coll_exec_run(x0), 1);
		CHECK_EQ(coll_exec_deliver(x1, &held.h, held.d, held.len), 0);
		/* placed: written at once, only the head held */
		CHECK_EQ(buf[0], alias ? 0 : 0xab);
		CHECK_EQ(coll_exec_mem_peak(x1), wire_coll_head_bytes(1) + (alias ? SMALL : 0));
		CHECK_EQ(coll_exec_run(x1), 1);
		CHECK_EQ(buf[SMALL - 1], 0xab);
		coll_exec_free(x0);
		coll_exec_free(x1);
		free(buf);
	}
	sched_free(&s);
	free(s0);
	free(s1);
	free(r1);
}

struct victim {
	struct sched s;
	struct sched_mem mem;
	uint8_t buf[16], *bp;           /* the receive buffer */
	uint8_t sbuf[16], *sp;          /* the send buffer (apart: else nothing is placed) */
	uint64_t blen;
	struct coll_exec *x;
};

static void victim_init(struct victim *v, uint64_t mem_max)
{
	static const struct coll_exec_ops none = { .send = net_send };
	struct coll_exec_cfg cfg = { .self = 1, .piece_max = 64, .mem_max = mem_max };

	CHECK_EQ(sched_init(&v->s, 2), 0);
	struct sched_node *n = &v->s.node[1];
	n->nslots = 1;
	sched_step(n, SCHED_RECV, 0, 3, 0);
	sched_ref(n, sched_seg(n, SCHED_BUF_RECV, 0, 0, 4, 0));
	sched_ref(n, sched_seg(n, SCHED_BUF_RECV, 0, 8, 6, 0));
	memset(v->buf, 0xee, sizeof(v->buf));
	v->bp = v->buf;
	v->sp = v->sbuf;
	v->blen = sizeof(v->buf);
	v->mem = (struct sched_mem){ &v->sp, &v->bp, &v->blen, &v->blen };
	CHECK_EQ(coll_exec_new(n, &v->mem, &cfg, &none, NULL, &v->x, NULL, 0), 0);
}

static void victim_free(struct victim *v)
{
	coll_exec_free(v->x);
	sched_free(&v->s);
}

/* A message stream of parts of the given lengths (data: 0x11, 0x22, ...). */
static size_t stream(uint8_t *out, uint32_t nparts, const uint64_t *lens)
{
	struct wire_coll_msg h = { .nparts = nparts };
	size_t off = wire_coll_head_bytes(nparts);

	memcpy(out, &h, sizeof(h));
	for (uint32_t i = 0; i < nparts; i++) {
		memcpy(out + 8 + 8 * i, &lens[i], 8);
		memset(out + off, 0x11 * (int)(i + 1), lens[i]);
		off += lens[i];
	}
	return off;
}

static struct wire_coll_piece piece(uint32_t from, uint32_t msg, uint64_t off, uint64_t total)
{
	return (struct wire_coll_piece){ .op = 1, .from = from, .msg = msg, .offset = off, .total = total,
					 .kind = CTL_COLL_ALLTOALL };
}

/* What wire_coll_piece_decode says of h followed by 8 stream bytes. */
static int64_t decoded(struct wire_coll_piece h)
{
	uint8_t raw[sizeof(h) + 8] = { 0 };
	struct wire_coll_piece d;

	wire_coll_piece_encode(raw, &h);
	return wire_coll_piece_decode(raw, sizeof(raw), &d);
}

TEST(hostile_pieces_fail_the_operation_only)
{
	struct victim v;
	uint8_t st[128];
	uint64_t good[2] = { 4, 6 };
	size_t len = stream(st, 2, good);
	struct wire_coll_piece h;

	/* the good message, in two pieces: delivered */
	victim_init(&v, 1 << 20);
	CHECK_EQ(coll_exec_run(v.x), 0);
	h = piece(0, 3, 0, len);
	CHECK_EQ(coll_exec_deliver(v.x, &h, st, 10), 0);
	CHECK_EQ(coll_exec_run(v.x), 0);
	h = piece(0, 3, 10, len);
	CHECK_EQ(coll_exec_deliver(v.x, &h, st + 10, (uint32_t)len - 10), 0);
	CHECK_EQ(coll_exec_run(v.x), 1);
	CHECK_EQ(v.buf[0], 0x11);
	CHECK_EQ(v.buf[3], 0x11);
	CHECK_EQ(v.buf[4], 0xee);
	CHECK_EQ(v.buf[8], 0x22);
	CHECK_EQ(v.buf[13], 0x22);
	CHECK_EQ(v.buf[14], 0xee);
	CHECK_EQ(coll_exec_mem(v.x), 0);
	/* ... and again: not expected any more */
	h = piece(0, 3, 0, len);
	CHECK_EQ(coll_exec_deliver(v.x, &h, st, (uint32_t)len), -EPROTO);
	CHECK(strstr(coll_exec_error(v.x), "again") != NULL);
	victim_free(&v);

	/* a message the schedule does not have; from a node it does not expect */
	victim_init(&v, 1 << 20);
	h = piece(0, 4, 0, len);
	CHECK_EQ(coll_exec_deliver(v.x, &h, st, (uint32_t)len), -EPROTO);
	CHECK_EQ(coll_exec_run(v.x), -EPROTO);  /* failed stays failed */
	victim_free(&v);
	victim_init(&v, 1 << 20);
	h = piece(5, 3, 0, len);
	CHECK_EQ(coll_exec_deliver(v.x, &h, st, (uint32_t)len), -EPROTO);
	victim_free(&v);

	/* a piece that skips ahead, one that changes the total */
	victim_init(&v, 1 << 20);
	h = piece(0, 3, 4, len);
	CHECK_EQ(coll_exec_deliver(v.x, &h, st + 4, 4), -EPROTO);
	victim_free(&v);
	victim_init(&v, 1 << 20);
	h = piece(0, 3, 0, len);
	CHECK_EQ(coll_exec_deliver(v.x, &h, st, 4), 0);
	h = piece(0, 3, 4, len + 1);
	CHECK_EQ(coll_exec_deliver(v.x, &h, st + 4, 4), -EPROTO);
	victim_free(&v);

	/* heads that lie: 3 parts; parts longer than the message; parts
	 * shorter */
	uint64_t three[3] = { 4, 6, 0 };
	victim_init(&v, 1 << 20);
	len = stream(st, 3, three);
	h = piece(0, 3, 0, len);
	CHECK_EQ(coll_exec_deliver(v.x, &h, st, (uint32_t)len), 0);
	CHECK_EQ(coll_exec_run(v.x), -EPROTO);
	CHECK(strstr(coll_exec_error(v.x), "3 parts") != NULL);
	victim_free(&v);
	uint64_t huge[2] = { 4, 6 };
	len = stream(st, 2, huge);
	huge[1] = UINT64_MAX - 2;       /* overflows a sum of lengths */
	memcpy(st + 16, &huge[1], 8);
	victim_init(&v, 1 << 20);
	h = piece(0, 3, 0, len);
	/* (of the size the step expects: its parts go to their places as
	 * they come, and the head is checked as soon as it is whole) */
	CHECK_EQ(coll_exec_deliver(v.x, &h, st, (uint32_t)len), -EPROTO);
	CHECK_EQ(coll_exec_run(v.x), -EPROTO);
	CHECK(strstr(coll_exec_error(v.x), "parts longer than it") != NULL);
	victim_free(&v);
	/* parts of the right total but other sizes (swapped) */
	uint64_t swapped[2] = { 6, 4 };
	len = stream(st, 2, swapped);
	victim_init(&v, 1 << 20);
	h = piece(0, 3, 0, len);
	CHECK_EQ(coll_exec_deliver(v.x, &h, st, (uint32_t)len), -EINVAL);
	CHECK(strstr(coll_exec_error(v.x), "6 bytes for a block of 4") != NULL);
	for (int i = 0; i < 16; i++)
		CHECK_EQ(v.buf[i], 0xee);       /* nothing written before the head was checked */
	victim_free(&v);
	len = stream(st, 2, good);
	victim_init(&v, 1 << 20);
	h = piece(0, 3, 0, len + 3);    /* 3 bytes no part owns */
	CHECK_EQ(coll_exec_deliver(v.x, &h, st, (uint32_t)len + 3), 0);
	CHECK_EQ(coll_exec_run(v.x), -EPROTO);
	victim_free(&v);

	/* a part of another size than the block: the ranks disagree */
	uint64_t other[2] = { 4, 7 };
	len = stream(st, 2, other);
	victim_init(&v, 1 << 20);
	h = piece(0, 3, 0, len);
	CHECK_EQ(coll_exec_deliver(v.x, &h, st, (uint32_t)len), 0);
	CHECK_EQ(coll_exec_run(v.x), -EINVAL);
	CHECK(strstr(coll_exec_error(v.x), "7 bytes for a block of 6") != NULL);
	CHECK_EQ(v.buf[14], 0xee);      /* nothing beyond the block */
	victim_free(&v);

	/* a total beyond the memory the operation may hold */
	victim_init(&v, 64);
	h = piece(0, 3, 0, 1u << 30);
	CHECK_EQ(coll_exec_deliver(v.x, &h, st, 16), -ENOMEM);
	victim_free(&v);

	/* the decoder: a header alone, a piece beyond its total, too long */
	uint8_t raw[sizeof(struct wire_coll_piece) + 8];
	struct wire_coll_piece d;
	h = piece(0, 3, 0, 8);
	wire_coll_piece_encode(raw, &h);
	CHECK_EQ(wire_coll_piece_decode(raw, sizeof(raw), &d), 8);
	CHECK_EQ(wire_coll_piece_decode(raw, sizeof(h), &d), -EPROTO);
	CHECK_EQ(decoded(piece(0, 3, 4, 8)), -EPROTO);
	CHECK_EQ(decoded(piece(0, 3, 0, 4)), -EPROTO);
	/* the kind: a message's names one, a BREAK's none; the root is the
	 * engine's to check (any value decodes) */
	h = piece(0, 3, 0, 8);
	h.kind = 0;
	CHECK_EQ(decoded(h), -EPROTO);
	h.kind = WIRE_COLL_KIND_MAX + 1;
	CHECK_EQ(decoded(h), -EPROTO);
	h.kind = 11 | 5u << 8 | 3u << 16;       /* a reduction's kind, type and op */
	CHECK_EQ(decoded(h), 8);
	h.kind |= 1u << WIRE_COLL_KIND_BITS;
	CHECK_EQ(decoded(h), -EPROTO);
	h = piece(0, 3, 0, 8);
	h.root = UINT32_MAX;
	CHECK_EQ(decoded(h), 8);
	h = piece(0, WIRE_COLL_MSG_BREAK, 0, 8);
	CHECK_EQ(decoded(h), -EPROTO);
	h.kind = 0;
	CHECK_EQ(decoded(h), 8);
	h = piece(0, WIRE_COLL_MSG_HOLD, 0, 8);
	CHECK_EQ(decoded(h), -EPROTO);
	h.kind = 0;
	CHECK_EQ(decoded(h), 8);
}

/* The engine's own pieces (coll.c decodes them, never the executor): a
 * BREAK's errno and text, a HOLD's on/off, each whole in one piece. */
TEST(break_and_hold_streams_are_decoded_strictly)
{
	struct wire_coll_piece h = { .msg = WIRE_COLL_MSG_HOLD, .op = 3, .total = 8 };
	struct wire_coll_hold hb = { .on = 1 };
	struct wire_coll_break bb = { .err = EPIPE, .text_len = 3 };
	uint8_t st[sizeof(bb) + 3];
	char why[256];
	int on = -1, err = 0;

	CHECK_EQ(wire_coll_hold_decode(&h, (const uint8_t *)&hb, sizeof(hb), &on), 0);
	CHECK_EQ(on, 1);
	hb.on = 0;
	CHECK_EQ(wire_coll_hold_decode(&h, (const uint8_t *)&hb, sizeof(hb), &on), 0);
	CHECK_EQ(on, 0);
	hb.on = 2;              /* neither */
	CHECK_EQ(wire_coll_hold_decode(&h, (const uint8_t *)&hb, sizeof(hb), &on), -EPROTO);
	hb = (struct wire_coll_hold){ .on = 1, .reserved = 1 };
	CHECK_EQ(wire_coll_hold_decode(&h, (const uint8_t *)&hb, sizeof(hb), &on), -EPROTO);
	hb.reserved = 0;
	h.offset = 1;           /* not whole */
	CHECK_EQ(wire_coll_hold_decode(&h, (const uint8_t *)&hb, sizeof(hb), &on), -EPROTO);
	h.offset = 0;
	h.total = 9;
	CHECK_EQ(wire_coll_hold_decode(&h, (const uint8_t *)&hb, sizeof(hb), &on), -EPROTO);
	h.total = 8;
	h.msg = WIRE_COLL_MSG_BREAK;
	CHECK_EQ(wire_coll_hold_decode(&h, (const uint8_t *)&hb, sizeof(hb), &on), -EPROTO);

	memcpy(st, &bb, sizeof(bb));
	memcpy(st + sizeof(bb), "a\nb", 3);
	h.total = sizeof(st);
	CHECK_EQ(wire_coll_break_decode(&h, st, sizeof(st), &err, why, sizeof(why)), 0);
	CHECK_EQ(err, EPIPE);
	CHECK(!strcmp(why, "a?b"));     /* control characters replaced */
	h.msg = WIRE_COLL_MSG_HOLD;
	CHECK_EQ(wire_coll_break_decode(&h, st, sizeof(st), &err, why, sizeof(why)), -EPROTO);
	h.msg = WIRE_COLL_MSG_BREAK;
	bb.text_len = 4;        /* beyond its stream */
	memcpy(st, &bb, sizeof(bb));
	CHECK_EQ(wire_coll_break_decode(&h, st, sizeof(st), &err, why, sizeof(why)), -EPROTO);
	bb = (struct wire_coll_break){ .err = 0, .text_len = 3 };
	memcpy(st, &bb, sizeof(bb));
	CHECK_EQ(wire_coll_break_decode(&h, st, sizeof(st), &err, why, sizeof(why)), -EPROTO);
}

TEST(segments_beyond_buffers_are_refused)
{
	struct victim v;
	struct coll_exec *x = NULL;
	struct coll_exec_cfg cfg = { .self = 1, .piece_max = 64, .mem_max = 1 << 20 };
	char err[200];

	victim_init(&v, 1 << 20);
	v.blen = 13;                    /* the second block ends at 14 */
	CHECK_EQ(coll_exec_new(&v.s.node[1], &v.mem, &cfg, &net_ops, NULL, &x, err, sizeof(err)), -EINVAL);
	CHECK(strstr(err, "beyond the receive buffer") != NULL);
	cfg.piece_max = 0;
	v.blen = 16;
	CHECK_EQ(coll_exec_new(&v.s.node[1], &v.mem, &cfg, &net_ops, NULL, &x, err, sizeof(err)), -EINVAL);
	victim_free(&v);
}

/* Floating-point reductions go in the order the dependencies fix, whatever
 * order the messages arrive in: node 0 holds 1e100 and adds node 1's 1.0,
 * then node 2's -1e100: 0 every time (the other order would give 1). */
TEST(float_reductions_follow_the_schedule_order)
{
	double v[3] = { 1e100, 1.0, -1e100 };

	CHECK((v[0] + v[1]) + v[2] != (v[0] + v[2]) + v[1]);   /* the order shows */
	for (uint64_t seed = 0; seed < 40; seed++) {
		struct sched s;
		double mine[3], out = -7;
		uint8_t *sp[3], *rp = (uint8_t *)&out;
		uint64_t l8 = 8;
		struct sched_mem mem[3];
		struct coll_exec *x[3];
		struct ctx ctx[3];
		struct net net;

		CHECK_EQ(sched_init(&s, 3), 0);
		for (uint32_t i = 0; i < 3; i++) {
			mine[i] = v[i];
			sp[i] = (uint8_t *)&mine[i];
			mem[i] = (struct sched_mem){ &sp[i], &rp, &l8, &l8 };
			s.node[i].nslots = 1;
			if (i) {
				sched_step(&s.node[i], SCHED_SEND, 0, 0, 0);
				sched_ref(&s.node[i], sched_seg(&s.node[i], SCHED_BUF_SEND, 0, 0, 8, 0));
			}
		}
		struct sched_node *n = &s.node[0];
		uint32_t acc = sched_seg(n, SCHED_BUF_RECV, 0, 0, 8, 0);
		uint32_t c = sched_step(n, SCHED_COPY, 0, 0, 0);
		sched_ref(n, acc);
		sched_ref(n, sched_seg(n, SCHED_BUF_SEND, 0, 0, 8, 0));
		uint32_t r1 = sched_step(n, SCHED_RECV_REDUCE, 1, 0, 0);
		sched_step_reduce(n, COLL_DOUBLE, COLL_SUM);
		sched_ref(n, acc);
		sched_dep(n, c);
		sched_step(n, SCHED_RECV_REDUCE, 2, 0, 0);
		sched_step_reduce(n, COLL_DOUBLE, COLL_SUM);
		sched_ref(n, acc);
		sched_dep(n, r1);
		CHECK_EQ(sched_check(&s, NULL, 0), 0);
		net_init(&net, 3, 1, seed);
		for (uint32_t i = 0; i < 3; i++) {
			struct coll_exec_cfg cfg = { .self = i, .piece_max = 5, .mem_max = 4096 };

			ctx[i] = (struct ctx){ &net, i };
			CHECK_EQ(coll_exec_new(&s.node[i], &mem[i], &cfg, &net_ops, &ctx[i], &x[i], NULL, 0), 0);
		}
		CHECK_EQ(net_run(&net, x), 0);
		CHECK(out == 0.0);
		for (uint32_t i = 0; i < 3; i++)
			coll_exec_free(x[i]);
		net_free(&net);
		sched_free(&s);
	}
}

/* Counts that disagree between nodes (rank 0 sends rank 1 nothing, rank 1
 * expects 5 bytes) fail the operation on the receiving node, with every
 * strategy, the direct one too: nothing waits for a message that never
 * comes. */
TEST(counts_that_disagree_fail_instead_of_hanging)
{
	for (int strat = 0; strat < A2A_STRATEGIES; strat++) {
		uint32_t first[3] = { 0, 1, 2 }, rank_at[2] = { 0, 1 };
		uint64_t s0[2] = { 0, 0 }, r0[2] = { 0, 0 }, d[2] = { 0, 0 };
		uint64_t s1[2] = { 0, 0 }, r1[2] = { 5, 0 };
		struct a2a_rank_args a0 = { s0, d, r0, d }, a1 = { s1, d, r1, d };
		struct a2a_layout lay = { 2, first, rank_at };
		struct a2a_plan p;
		struct sched s;
		uint8_t sb[8], rb[8], *sp0 = sb, *rp0 = rb, *sp1 = sb, *rp1 = rb;
		uint64_t l8 = 8;
		struct sched_mem mem[2] = { { &sp0, &rp0, &l8, &l8 }, { &sp1, &rp1, &l8, &l8 } };
		struct coll_exec *x[2];
		struct ctx ctx[2];
		struct net net;

		CHECK_EQ(a2a_plan_init(&p, strat, 2), 0);
		CHECK_EQ(sched_init(&s, 2), 0);
		CHECK_EQ(a2a_sched_node(&p, &lay, 0, &a0, &s.node[0]), 0);
		CHECK_EQ(a2a_sched_node(&p, &lay, 1, &a1, &s.node[1]), 0);
		net_init(&net, 2, 4, 1);
		for (uint32_t i = 0; i < 2; i++) {
			struct coll_exec_cfg cfg = { .self = i, .piece_max = 64, .mem_max = 4096 };

			ctx[i] = (struct ctx){ &net, i };
			CHECK_EQ(coll_exec_new(&s.node[i], &mem[i], &cfg, &net_ops, &ctx[i], &x[i], NULL, 0), 0);
		}
		CHECK_EQ(net_run(&net, x), -EINVAL);
		CHECK(strstr(coll_exec_error(x[1]), "0 bytes for a block of 5") != NULL);
		coll_exec_free(x[0]);
		coll_exec_free(x[1]);
		net_free(&net);
		sched_free(&s);
	}
}

int main(void)
{
	RUN(alltoall_runs_on_executors);
	RUN(direct_blocks_are_sent_and_received_in_place);
	RUN(placing_waits_for_the_steps_before_and_for_apart_buffers);
	RUN(forward_and_reduce_on_executors);
	RUN(large_local_steps_go_in_slices_of_the_budget);
	RUN(a_message_kept_whole_is_received_in_slices_of_the_budget);
	RUN(a_send_not_in_place_is_copied_in_slices_of_the_budget);
	RUN(tiny_budgets_over_several_segments);
	RUN(a_step_begun_goes_on_at_its_own_offset);
	RUN(hostile_pieces_fail_the_operation_only);
	RUN(break_and_hold_streams_are_decoded_strictly);
	RUN(segments_beyond_buffers_are_refused);
	RUN(float_reductions_follow_the_schedule_order);
	RUN(counts_that_disagree_fail_instead_of_hanging);
	return check_done();
}
