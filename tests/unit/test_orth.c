/* tests/unit/test_orth.c - plan/orth: broadcast, reduce, allreduce and
 * allgather(v) schedules, node by node, checked (sched_check) and run by the
 * simulator (sched_run) over real buffers against references computed here:
 * 1 to 9, 12, 16 and 17 nodes, 1 to 3 ranks per node and uneven layouts
 * (ranks dealt round the nodes, so a node's ranks are not contiguous; a
 * node without ranks), every algorithm (single, orth, two factorizations
 * with holes), sizes 0, 1, 7 and 1000, roots first, middle and last.
 * Reductions use integer types (wrapping) and small integers in float and
 * double, so that every sum is exact; allreduce with inexact floats must
 * give the same bits on every rank.  Then the message counts of seed 004
 * §2, nodes that disagree (algorithm, root, factorization: a failure,
 * never a hang; sizes: a part of the wrong length), refusals and the cost
 * model. */
#define UNIT "test_orth"
#include "check.h"

#include "../../daemon/plan/orth.h"
#include "../../daemon/plan/sched.h"
#include "../../daemon/plan/sg_sched.h"
#include "../../proto/coll.h"
#include "plan_util.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define MAXN PLAN_MAX_NODES
#define MAXR 64

/* A layout: per[n] ranks on node n, ranks dealt round the nodes that have
 * room. */
struct lay {
	uint32_t nodes, first[MAXN + 1], at[MAXR];
	struct a2a_layout l;
};

static void lay_init(struct lay *L, uint32_t nodes, const uint32_t *per)
{
	uint32_t ranks = plan_deal(nodes, per, L->first, L->at);

	L->nodes = nodes;
	L->l = (struct a2a_layout){ ranks, L->first, L->at };
}

static uint8_t pat(uint32_t rank, uint64_t i)
{
	return (uint8_t)(rank * 37 + i * 5 + 3);
}

/* ---- reductions: small integers, a reference of our own ---- */

static int is_signed(unsigned t)
{
	return t == COLL_INT8 || t == COLL_INT16 || t == COLL_INT32 || t == COLL_INT64;
}

/* Element i of rank r: small, some zero, some negative. */
static int64_t val(uint32_t r, uint64_t i)
{
	return (int64_t)((r * 7 + i * 3) % 11) - 4;
}

static void put(unsigned t, uint8_t *p, int64_t v, double f)
{
	size_t sz = coll_type_size(t);

	if (t == COLL_FLOAT) {
		float x = (float)f;

		memcpy(p, &x, 4);
	} else if (t == COLL_DOUBLE) {
		memcpy(p, &f, 8);
	} else {
		memcpy(p, &v, sz);      /* little-endian: the low bytes */
	}
}

/* x truncated to the type's width, sign-extended for signed types. */
static int64_t canon(unsigned t, uint64_t x)
{
	unsigned bits = 8 * (unsigned)coll_type_size(t);

	if (bits < 64) {
		x &= (1ull << bits) - 1;
		if (is_signed(t) && (x >> (bits - 1)))
			x |= ~0ull << bits;
	}
	return (int64_t)x;
}

static int64_t ref_int(unsigned t, unsigned op, int64_t a, int64_t b)
{
	uint64_t x = (uint64_t)a, y = (uint64_t)b;
	int less = is_signed(t) ? a < b : x < y;

	switch (op) {
	case COLL_SUM: return canon(t, x + y);
	case COLL_PROD: return canon(t, x * y);
	case COLL_MIN: return less ? a : b;
	case COLL_MAX: return less ? b : a;
	case COLL_BAND: return canon(t, x & y);
	case COLL_BOR: return canon(t, x | y);
	case COLL_BXOR: return canon(t, x ^ y);
	case COLL_LAND: return a && b;
	case COLL_LOR: return a || b;
	default: return !a != !b;
	}
}

static double ref_float(unsigned op, double a, double b)
{
	return op == COLL_SUM ? a + b : op == COLL_MIN ? (a < b ? a : b) : (a > b ? a : b);
}

/* The expected result element i over ranks 0..ranks-1, in the type. */
static void ref_elem(unsigned t, unsigned op, uint32_t ranks, uint64_t i, uint8_t *out)
{
	int64_t a = canon(t, (uint64_t)val(0, i));
	double f = (double)val(0, i);

	for (uint32_t r = 1; r < ranks; r++) {
		a = ref_int(t, op, a, canon(t, (uint64_t)val(r, i)));
		f = ref_float(op, f, (double)val(r, i));
	}
	put(t, out, a, f);
}

/* Element i of rank r where the order of a sum shows in its last bits, and
 * min meets -0 against +0 (reduce.h: the first operand wins). */
static double inexact(unsigned op, uint32_t r, uint64_t i)
{
	if (op == COLL_MIN)
		return (r + i) % 2 ? -0.0 : 0.0;
	return 0.1 * (r + 1) + (double)i / 3.0 + 1e-9 * (double)(r * i);
}

static const unsigned red_pairs[][2] = {
	{ COLL_UINT32, COLL_SUM }, { COLL_INT8, COLL_MIN }, { COLL_INT64, COLL_PROD }, { COLL_FLOAT, COLL_SUM },
	{ COLL_DOUBLE, COLL_MAX }, { COLL_UINT16, COLL_BXOR }, { COLL_INT32, COLL_LAND }, { COLL_DOUBLE, COLL_SUM },
	{ COLL_BYTE, COLL_MAX }, { COLL_UINT64, COLL_BOR }, { COLL_INT16, COLL_LXOR }, { COLL_FLOAT, COLL_MIN },
};
#define NPAIRS (sizeof(red_pairs) / sizeof(red_pairs[0]))

/* ---- one run ---- */

struct tcase {
	struct orth_args a;
	int v;                  /* allgatherv: uneven counts, each rank its own displacements */
	int inexact;            /* floats whose sum depends on the order; signed zeros for min */
	uint64_t size;          /* bytes, count or block */
};

/* Buffers of one run: every rank's, by node and slot, and the expected
 * receive buffers by rank. */
struct bufs {
	struct sched_mem mem[MAXN];
	uint8_t *want[MAXR], *mask[MAXR];       /* expected bytes; 1 where written */
	uint64_t cnt[MAXR], *displ[MAXR];
	uint32_t *writes;
};

static int rooted(enum orth_kind k)
{
	return k == ORTH_BCAST || k == ORTH_REDUCE;
}

/* Allgatherv's counts and rank q's displacements: ranks rotated by q, in
 * reverse, with 4-byte gaps.  Returns q's receive buffer length. */
static uint64_t ag_layout(struct bufs *b, const struct tcase *tc, uint32_t ranks, uint32_t q)
{
	uint64_t ext = 0;

	for (uint32_t j = ranks; j-- > 0;) {
		uint32_t r = tc->v ? (j + q) % ranks : ranks - 1 - j;

		b->cnt[r] = tc->v ? (r * 3 + tc->size) % 7 : tc->size;
		b->displ[q][r] = ext;
		ext += b->cnt[r] + (tc->v ? 4 : 0);
	}
	return ext;
}

/* The send and receive lengths of rank r, its send bytes and expected
 * receive bytes (want: 0xee where nothing may be written). */
static void rank_bufs(struct bufs *b, const struct tcase *tc, uint32_t ranks, uint32_t r, uint8_t **send_p,
		      uint64_t *sl_p, uint64_t *rl_p)
{
	const struct orth_args *a = &tc->a;
	uint64_t ts = a->kind == ORTH_REDUCE || a->kind == ORTH_ALLREDUCE ? coll_type_size(a->type) : 1;
	uint64_t n = tc->size * ts, sl = n, rl = n;
	uint8_t *s;

	if (a->kind == ORTH_BCAST) {
		sl = r == a->root ? n : 0;
		rl = r == a->root ? 0 : n;
	} else if (a->kind == ORTH_REDUCE) {
		rl = r == a->root ? n : 0;
	} else if (a->kind == ORTH_ALLGATHER) {
		rl = ag_layout(b, tc, ranks, r);
		sl = b->cnt[r];
	}
	s = malloc(sl + 1);
	b->want[r] = malloc(rl + 1);
	b->mask[r] = malloc(rl + 1);
	memset(b->want[r], 0xee, rl);
	memset(b->mask[r], a->kind != ORTH_ALLGATHER, rl);
	for (uint64_t i = 0; i < sl; i++)
		s[i] = pat(r, i);
	if (a->kind == ORTH_REDUCE || a->kind == ORTH_ALLREDUCE)
		for (uint64_t i = 0; i < tc->size; i++) {
			put(a->type, s + i * ts, val(r, i), tc->inexact ? inexact(a->op, r, i) : (double)val(r, i));
			if (rl)
				ref_elem(a->type, a->op, ranks, i, b->want[r] + i * ts);
		}
	if (a->kind == ORTH_BCAST)
		for (uint64_t i = 0; i < rl; i++)
			b->want[r][i] = pat(a->root, i);
	*send_p = s;
	*sl_p = sl;
	*rl_p = rl;
}

static uint64_t bufs_init(struct bufs *b, const struct lay *L, const struct tcase *tc)
{
	uint64_t total = 0;

	memset(b, 0, sizeof(*b));
	for (uint32_t r = 0; r < L->l.ranks; r++)
		b->displ[r] = calloc(L->l.ranks + 1, 8);
	/* every rank's counts first: an allgather's want needs them all */
	for (uint32_t r = 0; tc->a.kind == ORTH_ALLGATHER && r < L->l.ranks; r++)
		ag_layout(b, tc, L->l.ranks, r);
	for (uint32_t n = 0; n < L->nodes; n++) {
		uint32_t k = L->first[n + 1] - L->first[n];
		struct sched_mem *m = &b->mem[n];

		m->send = calloc(k + 1, sizeof(void *));
		m->recv = calloc(k + 1, sizeof(void *));
		m->send_len = calloc(k + 1, 8);
		m->recv_len = calloc(k + 1, 8);
		for (uint32_t slot = 0; slot < k; slot++) {
			uint32_t r = L->at[L->first[n] + slot];

			rank_bufs(b, tc, L->l.ranks, r, &m->send[slot], &m->send_len[slot], &m->recv_len[slot]);
			m->recv[slot] = malloc(m->recv_len[slot] + 1);
			memset(m->recv[slot], 0xee, m->recv_len[slot]);
			total += m->recv_len[slot];
		}
	}
	if (tc->a.kind == ORTH_ALLGATHER)
		for (uint32_t q = 0; q < L->l.ranks; q++)
			for (uint32_t r = 0; r < L->l.ranks; r++)
				for (uint64_t i = 0; i < b->cnt[r]; i++) {
					b->want[q][b->displ[q][r] + i] = pat(r, i);
					b->mask[q][b->displ[q][r] + i] = 1;
				}
	b->writes = calloc(total + 1, 4);
	return total;
}

static void bufs_free(struct bufs *b, const struct lay *L)
{
	for (uint32_t n = 0; n < L->nodes; n++) {
		for (uint32_t slot = 0; slot < L->first[n + 1] - L->first[n]; slot++) {
			free(b->mem[n].send[slot]);
			free(b->mem[n].recv[slot]);
		}
		free(b->mem[n].send);
		free(b->mem[n].recv);
		free(b->mem[n].send_len);
		free(b->mem[n].recv_len);
	}
	for (uint32_t r = 0; r < L->l.ranks; r++) {
		free(b->want[r]);
		free(b->mask[r]);
		free(b->displ[r]);
	}
	free(b->writes);
}

static void describe(const struct lay *L, const struct tcase *tc)
{
	static const char *const kinds[] = { "bcast", "reduce", "allreduce", "allgather" };

	fprintf(stderr, "  %s%s %s nodes %u ranks %u root %u size %llu type %u op %u\n", kinds[tc->a.kind],
		tc->v ? "v" : "", orth_alg_name(tc->a.alg), L->nodes, L->l.ranks, tc->a.root,
		(unsigned long long)tc->size, tc->a.type, tc->a.op);
}

/* Every receive byte as expected; each written exactly once (data
 * movement) or at least once (reductions accumulate in place), gaps never. */
static int verify(const struct lay *L, const struct tcase *tc, const struct bufs *b)
{
	int reduction = tc->a.kind == ORTH_REDUCE || tc->a.kind == ORTH_ALLREDUCE;

	for (uint32_t n = 0, w = 0; n < L->nodes; n++)
		for (uint32_t slot = 0; slot < L->first[n + 1] - L->first[n]; slot++) {
			uint32_t r = L->at[L->first[n] + slot];

			for (uint64_t i = 0; i < b->mem[n].recv_len[slot]; i++, w++) {
				uint8_t got = b->mem[n].recv[slot][i], want = b->want[r][i];
				int ok_w = !b->mask[r][i] ? b->writes[w] == 0 : reduction ? b->writes[w] >= 1
											 : b->writes[w] == 1;

				if (got != want || !ok_w) {
					describe(L, tc);
					fprintf(stderr, "  rank %u byte %llu: %u (want %u), written %u times\n", r,
						(unsigned long long)i, got, want, b->writes[w]);
					return -1;
				}
			}
		}
	return 0;
}

/* Every rank's result the same bits as the first rank's. */
static int same_bits(const struct lay *L, const struct bufs *b)
{
	const uint8_t *first = NULL;
	uint64_t len = 0;

	for (uint32_t n = 0; n < L->nodes; n++)
		for (uint32_t slot = 0; slot < L->first[n + 1] - L->first[n]; slot++) {
			if (!first) {
				first = b->mem[n].recv[slot];
				len = b->mem[n].recv_len[slot];
			}
			if (b->mem[n].recv_len[slot] != len || memcmp(b->mem[n].recv[slot], first, len))
				return -1;
		}
	return 0;
}

static void one(const struct lay *L, const struct tcase *tc, uint64_t seed)
{
	struct bufs b;
	struct sched s;
	struct sched_run_stats st;
	struct orth_args a = tc->a;
	char why[256] = "";
	int ret;

	bufs_init(&b, L, tc);
	if (tc->v)
		a.counts = b.cnt;
	CHECK_EQ(sched_init(&s, L->nodes), 0);
	ret = orth_sched(&a, &L->l, L->nodes, tc->v ? (const uint64_t *const *)b.displ : NULL, &s);
	if (ret)
		describe(L, tc);
	CHECK_EQ(ret, 0);
	if (!ret && (ret = sched_run(&s, b.mem, seed, b.writes, &st, why, sizeof(why)))) {
		describe(L, tc);
		fprintf(stderr, "  sched_run: %s\n", why);
	}
	CHECK_EQ(ret, 0);
	if (!ret && !tc->inexact)
		CHECK_EQ(verify(L, tc, &b), 0);
	if (!ret && tc->inexact && same_bits(L, &b)) {
		describe(L, tc);
		CHECK(0);
	}
	sched_free(&s);
	bufs_free(&b, L);
}

/* ---- the sweep ---- */

static const uint32_t node_counts[] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 16, 17 };
static const uint64_t sizes[] = { 0, 1, 7, 1000 };

/* Layout number v of P nodes: 1, 2 or 3 ranks each, uneven, or uneven
 * with a node without ranks. */
static void layout(struct lay *L, uint32_t P, int v)
{
	uint32_t per[MAXN];

	for (uint32_t n = 0; n < P; n++)
		per[n] = v < 3 ? (uint32_t)v + 1 : 1 + (n * 5 + P) % 3;
	if (v == 4 && P > 2)
		per[P / 2] = 0;
	lay_init(L, P, per);
}

/* The factorizations tried: 2 x 3 x ceil(P/6) and ceil(P/4) x 2 x 2
 * (holes for most P, a short last slab at each level). */
static void hier_dims(uint32_t P, int which, struct orth_dims *d)
{
	*d = which ? (struct orth_dims){ 3, { (P + 3) / 4, 2, 2 } } : (struct orth_dims){ 3, { 2, 3, (P + 5) / 6 } };
}

/* Every algorithm (single, orth over sg_grid's and over a 2 x ceil(P/2)
 * layout, the two factorizations) for one kind. */
static void sweep(enum orth_kind kind, int v)
{
	uint64_t seed = 1;
	unsigned pair = 0;

	for (size_t z = 0; z < sizeof(node_counts) / sizeof(node_counts[0]); z++)
		for (int lv = 0; lv < 5; lv++) {
			uint32_t P = node_counts[z];
			struct lay L;
			struct orth_dims d, two = { 2, { 2, (P + 1) / 2 } };

			layout(&L, P, lv);
			for (int alg = 0; alg < 5; alg++) {
				struct tcase tc = { .a = { .kind = kind, .alg = alg < 2 || alg == 4 ? alg % 4 : ORTH_HIER,
							   .dims = &d, .grid = alg == 4 && P >= 2 ? &two : NULL },
						    .v = v };
				uint32_t R = L.l.ranks, roots[3] = { 0, R / 2, R - 1 };

				hier_dims(P, alg == 3, &d);
				for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
					for (int ri = 0; ri < (rooted(kind) ? 3 : 1); ri++) {
						tc.size = tc.a.bytes = tc.a.count = tc.a.block = sizes[i];
						tc.a.root = roots[ri];
						tc.a.type = red_pairs[pair % NPAIRS][0];
						tc.a.op = red_pairs[pair++ % NPAIRS][1];
						one(&L, &tc, seed++);
					}
			}
		}
}

TEST(bcast_every_layout_and_algorithm)
{
	sweep(ORTH_BCAST, 0);
}

TEST(reduce_every_layout_and_algorithm)
{
	sweep(ORTH_REDUCE, 0);
}

TEST(allreduce_every_layout_and_algorithm)
{
	sweep(ORTH_ALLREDUCE, 0);
}

TEST(allgather_every_layout_and_algorithm)
{
	sweep(ORTH_ALLGATHER, 0);
}

TEST(allgatherv_every_layout_and_algorithm)
{
	sweep(ORTH_ALLGATHER, 1);
}

/* Inexact float and double sums, and min over signed zeros: every rank of
 * an allreduce gets the same bits, whatever the algorithm and layout (the
 * simulator runs the steps in a random order: messages arrive in any
 * order). */
TEST(allreduce_same_bits_everywhere)
{
	static const unsigned pairs[][2] = { { COLL_FLOAT, COLL_SUM }, { COLL_DOUBLE, COLL_SUM },
					     { COLL_DOUBLE, COLL_MIN } };
	uint64_t seed = 7;

	for (size_t z = 0; z < sizeof(node_counts) / sizeof(node_counts[0]); z++)
		for (int lv = 0; lv < 5; lv++)
			for (int alg = 0; alg < 4; alg++)
				for (size_t p = 0; p < 3; p++) {
					struct lay L;
					struct orth_dims d;
					struct tcase tc = { .a = { .kind = ORTH_ALLREDUCE, .alg = alg < 2 ? alg : ORTH_HIER,
								   .dims = &d, .type = pairs[p][0], .op = pairs[p][1] },
							    .inexact = 1, .size = 37 };

					tc.a.count = tc.size;
					layout(&L, node_counts[z], lv);
					hier_dims(node_counts[z], alg == 3, &d);
					one(&L, &tc, seed++);
				}
}

/* Data messages node n sends (SEND) or takes (RECV, RECV_REDUCE). */
static uint32_t data_msgs(const struct sched_node *sn, int sends)
{
	uint32_t k = 0;

	for (uint32_t i = 0; i < sn->nsteps; i++) {
		const struct sched_step *st = &sn->steps[i];
		int net = sends ? st->kind == SCHED_SEND : st->kind == SCHED_RECV || st->kind == SCHED_RECV_REDUCE;

		k += net && (st->msg & 3) == 0;
	}
	return k;
}

static uint32_t log2_ceil(uint32_t P)
{
	uint32_t L = 0;

	while ((1u << L) < P)
		L++;
	return L;
}

/* Builds kind by alg (dims for ORTH_HIER) with root rank root on L. */
static void build(struct sched *s, const struct lay *L, enum orth_kind kind, enum orth_alg alg,
		  const struct orth_dims *d, uint32_t root)
{
	struct orth_args a = { .kind = kind, .alg = alg, .dims = d, .root = root, .bytes = 8, .count = 2,
			       .type = COLL_INT32, .op = COLL_SUM, .block = 4 };

	CHECK_EQ(sched_init(s, L->nodes), 0);
	CHECK_EQ(orth_sched(&a, &L->l, L->nodes, NULL, s), 0);
}

/* Seed 004 §2.1 for the trees: the root sends (reduce: takes) r - 1 leader
 * messages and one per other node of its row; every other leader one per
 * other node of its row; the rest none; everybody else takes (sends) one.
 * The binomial tree: the root ceil(log2 P). */
static void tree_counts(const struct lay *L, enum orth_kind kind)
{
	uint32_t P = L->nodes, r, c, rows_of;
	int down = kind == ORTH_BCAST;

	sg_grid(P, &r, &c);
	for (uint32_t R = 0; R < P; R++)
		for (int alg = ORTH_SINGLE; alg <= ORTH_GRID; alg++) {
			struct sched s;

			build(&s, L, kind, alg, NULL, L->at[L->first[R]]);
			for (uint32_t n = 0; n < P; n++) {
				uint32_t row = n / c, rowlen = row == r - 1 ? P - row * c : c;
				uint32_t out = data_msgs(&s.node[n], down), in = data_msgs(&s.node[n], !down);

				rows_of = R / c == r - 1 ? P - (R / c) * c : c;
				if (n == R)
					CHECK_EQ(out, alg == ORTH_SINGLE ? log2_ceil(P) : r - 1 + rows_of - 1);
				else if (alg == ORTH_GRID && n == sg_orth_leader(P, c, R, row))
					CHECK_EQ(out, rowlen - 1);
				else if (alg == ORTH_GRID)
					CHECK_EQ(out, 0);
				CHECK_EQ(in, n != R);
			}
			sched_free(&s);
		}
}

/* The exchanges on full grids: every node sends and takes c - 1, then
 * r - 1 messages (§2.1, multi-accumulation and multi-broadcast); the
 * direct allgather P - 1; the single allreduce's root ceil(log2 P) each
 * way. */
static void xchg_counts(const struct lay *L)
{
	uint32_t P = L->nodes, r, c;
	struct sched s;

	sg_grid(P, &r, &c);
	for (int kind = ORTH_ALLREDUCE; kind <= ORTH_ALLGATHER; kind++) {
		build(&s, L, kind, ORTH_GRID, NULL, 0);
		for (uint32_t n = 0; r * c == P && n < P; n++) {
			CHECK_EQ(data_msgs(&s.node[n], 1), r - 1 + c - 1);
			CHECK_EQ(data_msgs(&s.node[n], 0), r - 1 + c - 1);
		}
		sched_free(&s);
	}
	build(&s, L, ORTH_ALLGATHER, ORTH_SINGLE, NULL, 0);
	for (uint32_t n = 0; n < P; n++)
		CHECK_EQ(data_msgs(&s.node[n], 1), P - 1);
	sched_free(&s);
	build(&s, L, ORTH_ALLREDUCE, ORTH_SINGLE, NULL, 0);
	CHECK_EQ(data_msgs(&s.node[0], 1), log2_ceil(P));
	CHECK_EQ(data_msgs(&s.node[0], 0), log2_ceil(P));
	sched_free(&s);
}

/* §3.7: the layout orth_layout gives is the fastest 2-D one by the model,
 * every r x c with c = ceil(P / r) and no empty row tried; ties to
 * sg_grid's. */
TEST(layout_is_the_models_best)
{
	static const uint64_t bytes[] = { 8, 4096, 1u << 20 };

	for (uint32_t P = 1; P <= 40; P++)
		for (int kind = 0; kind < ORTH_KINDS; kind++)
			for (size_t b = 0; b < sizeof(bytes) / sizeof(bytes[0]); b++) {
				struct orth_dims g;
				double t, best;
				uint32_t r0, c0;

				orth_layout(kind, P, 2, bytes[b], 20, 0.5, &g);
				CHECK(g.k == 2 && (uint64_t)g.d[0] * g.d[1] >= P);
				t = orth_predict_us(kind, ORTH_GRID, &g, P, 2, bytes[b], 20, 0.5);
				sg_grid(P, &r0, &c0);
				best = orth_predict_us(kind, ORTH_GRID, NULL, P, 2, bytes[b], 20, 0.5);
				CHECK(t <= best);
				if (t == best)
					CHECK(g.d[0] == r0 && g.d[1] == c0);
				for (uint32_t r = 2; P >= 4 && r <= P / 2; r++) {
					struct orth_dims d = { 2, { r, (P + r - 1) / r } };

					if ((uint64_t)(r - 1) * d.d[1] >= P)
						continue;
					CHECK(t <= orth_predict_us(kind, ORTH_GRID, &d, P, 2, bytes[b], 20, 0.5));
				}
			}
}

TEST(message_counts)
{
	static const uint32_t Ps[] = { 1, 2, 3, 4, 5, 6, 7, 9, 12, 16, 17 };
	static const struct orth_dims d223 = { 3, { 2, 2, 3 } };
	uint32_t per[MAXN];
	struct lay L;
	struct sched s;

	for (size_t z = 0; z < sizeof(Ps) / sizeof(Ps[0]); z++) {
		for (uint32_t n = 0; n < Ps[z]; n++)
			per[n] = 1 + n % 2;
		lay_init(&L, Ps[z], per);
		tree_counts(&L, ORTH_BCAST);
		tree_counts(&L, ORTH_REDUCE);
		xchg_counts(&L);
	}
	/* §2.2: 12 nodes as 2 x 2 x 3, root on node 0: 1 + 1 + 2 messages;
	 * every node of the allgather as many */
	lay_init(&L, 12, per);
	build(&s, &L, ORTH_BCAST, ORTH_HIER, &d223, 0);
	CHECK_EQ(data_msgs(&s.node[0], 1), 4);
	sched_free(&s);
	build(&s, &L, ORTH_ALLGATHER, ORTH_HIER, &d223, 0);
	for (uint32_t n = 0; n < 12; n++)
		CHECK_EQ(data_msgs(&s.node[n], 1), 4);
	sched_free(&s);
}

/* ---- disagreement ---- */

/* A node's belief: an algorithm (single, orth, the two factorizations) and
 * a root. */
struct belief {
	int alg;
	uint32_t root;
};

static void beliefs_one(const struct lay *L, enum orth_kind kind, const struct belief *b, uint32_t *bad)
{
	uint32_t P = L->nodes;
	struct orth_dims d[MAXN];
	struct sched s;
	int agree = 1, ret = 0, out, delivered;

	for (uint32_t n = 1; n < P; n++)
		agree &= b[n].alg == b[0].alg && (!rooted(kind) || b[n].root == b[0].root);
	CHECK_EQ(sched_init(&s, P), 0);
	for (uint32_t n = 0; n < P && !ret; n++) {
		struct orth_args a = { .kind = kind, .alg = b[n].alg < 2 ? b[n].alg : ORTH_HIER, .dims = &d[n],
				       .root = b[n].root, .bytes = 4, .count = 1, .type = COLL_INT32, .op = COLL_SUM,
				       .block = 2 };

		hier_dims(P, b[n].alg == 3, &d[n]);
		s.node[n].nslots = L->first[n + 1] - L->first[n];
		ret = orth_sched_node(&a, &L->l, P, n, &s.node[n]);
	}
	CHECK_EQ(ret, 0);
	out = plan_run_beliefs(&s, &delivered);
	if (agree ? out != 0 : out != 1) {
		if ((*bad)++ < 5) {
			fprintf(stderr, "  kind %d nodes %u beliefs", kind, P);
			for (uint32_t n = 0; n < P; n++)
				fprintf(stderr, " %s/%u", orth_alg_name(b[n].alg < 2 ? b[n].alg : ORTH_HIER) , b[n].root);
			fprintf(stderr, ": %s\n", out < 0 ? "hangs" : out ? "fails" : "completes");
		}
	}
	sched_free(&s);
}

/* Every assignment of beliefs for 1 to 3 nodes (1 to 4 without a root),
 * samples up to 9 nodes of uneven ranks: agreeing nodes finish, others
 * fail somewhere, never all waiting. */
TEST(disagreement_fails_never_hangs)
{
	uint32_t bad = 0;
	uint64_t x = 88172645463325252ull;
	struct belief b[MAXN];

	for (int kind = 0; kind < ORTH_KINDS; kind++)
		for (uint32_t P = 1; P <= 9; P++) {
			uint32_t per[MAXN], choices = 4 * (rooted(kind) ? P : 1), combos = 1;
			struct lay L;

			for (uint32_t n = 0; n < P; n++) {
				per[n] = P <= 4 ? 1 : 1 + n % 2;
				combos *= choices;
			}
			lay_init(&L, P, per);
			if (combos <= 4096)
				for (uint32_t cmb = 0; cmb < combos; cmb++) {
					for (uint32_t n = 0, y = cmb; n < P; n++, y /= choices)
						b[n] = (struct belief){ (int)(y % 4), (y / 4) % P };
					beliefs_one(&L, kind, b, &bad);
				}
			for (int t = 0; combos > 4096 && t < 300; t++) {
				/* mostly two beliefs, so that near-agreement is tried */
				struct belief two[2];

				for (int i = 0; i < 2; i++)
					two[i] = (struct belief){ (int)(plan_rnd(&x) % 4), (uint32_t)(plan_rnd(&x) % L.l.ranks) };
				for (uint32_t n = 0; n < P; n++)
					b[n] = two[t % 3 ? plan_rnd(&x) % 2 : 0];
				if (t % 3 == 0)
					b[plan_rnd(&x) % P] = two[1];
				beliefs_one(&L, kind, b, &bad);
			}
		}
	CHECK_EQ(bad, 0);
}

/* A node whose ranks pass other sizes: the same messages, one of them with
 * a part of a length its receiver does not expect. */
TEST(different_sizes_fail_on_a_part)
{
	static const uint32_t per[4] = { 1, 2, 1, 1 };
	uint64_t cnt[5] = { 1, 2, 3, 4, 5 }, other[5] = { 1, 2, 9, 4, 5 };
	struct lay L;
	char why[256] = "";
	int delivered;

	lay_init(&L, 4, per);
	for (int kind = 0; kind < ORTH_KINDS; kind++)
		for (int alg = ORTH_SINGLE; alg <= ORTH_GRID; alg++) {
			struct sched s;

			CHECK_EQ(sched_init(&s, 4), 0);
			for (uint32_t n = 0; n < 4; n++) {
				struct orth_args a = { .kind = kind, .alg = alg, .root = 1, .bytes = n == 2 ? 5 : 4,
						       .count = n == 2 ? 3 : 2, .type = COLL_INT32, .op = COLL_SUM,
						       .counts = n == 2 ? other : cnt };

				s.node[n].nslots = per[n];
				CHECK_EQ(orth_sched_node(&a, &L.l, 4, n, &s.node[n]), 0);
			}
			CHECK_EQ(plan_run_beliefs(&s, &delivered), 0);
			CHECK_EQ(sched_check(&s, why, sizeof(why)), -EINVAL);
			CHECK(strstr(why, "bytes sent into") != NULL);
			sched_free(&s);
		}
}

TEST(refusals)
{
	static const uint32_t per[3] = { 1, 2, 0 };
	struct orth_dims small = { 2, { 1, 1 } }, zero = { 2, { 2, 0 } }, none = { 0, { 0 } };
	struct lay L;
	struct sched s;
	struct orth_args ok = { .kind = ORTH_REDUCE, .alg = ORTH_GRID, .root = 2, .count = 1, .type = COLL_FLOAT,
				.op = COLL_SUM };

	lay_init(&L, 3, per);
	CHECK_EQ(sched_init(&s, 3), 0);
	s.node[1].nslots = 2;
	struct orth_args a = ok;
	CHECK_EQ(orth_sched_node(&a, &L.l, 3, 1, &s.node[1]), 0);
	a.root = 3;             /* no such rank */
	CHECK_EQ(orth_sched_node(&a, &L.l, 3, 1, &s.node[1]), -EINVAL);
	a = ok;
	a.op = COLL_BAND;       /* not for floats */
	CHECK_EQ(orth_sched_node(&a, &L.l, 3, 1, &s.node[1]), -EINVAL);
	a = ok;
	a.alg = ORTH_ALGS;
	CHECK_EQ(orth_sched_node(&a, &L.l, 3, 1, &s.node[1]), -EINVAL);
	a = ok;
	a.kind = ORTH_KINDS;
	CHECK_EQ(orth_sched_node(&a, &L.l, 3, 1, &s.node[1]), -EINVAL);
	a = ok;
	a.alg = ORTH_HIER;      /* no dimensions, too few, a zero, none */
	CHECK_EQ(orth_sched_node(&a, &L.l, 3, 1, &s.node[1]), -EINVAL);
	a.dims = &small;
	CHECK_EQ(orth_sched_node(&a, &L.l, 3, 1, &s.node[1]), -EINVAL);
	a.dims = &zero;
	CHECK_EQ(orth_sched_node(&a, &L.l, 3, 1, &s.node[1]), -EINVAL);
	a.dims = &none;
	CHECK_EQ(orth_sched_node(&a, &L.l, 3, 1, &s.node[1]), -EINVAL);
	a = ok;
	a.count = UINT64_MAX / 2;       /* bytes overflow */
	CHECK_EQ(orth_sched_node(&a, &L.l, 3, 1, &s.node[1]), -EINVAL);
	a = ok;                 /* node out of range */
	CHECK_EQ(orth_sched_node(&a, &L.l, 3, 3, &s.node[1]), -EINVAL);
	/* a node without ranks plans nothing: two nodes take part */
	CHECK_EQ(orth_sched_node(&ok, &L.l, 3, 2, &s.node[2]), 0);
	CHECK_EQ(s.node[2].nsteps, 0);
	sched_free(&s);
}

TEST(names_cost_model_and_chooser)
{
	static const struct orth_dims cube6 = { 6, { 2, 2, 2, 2, 2, 2 } };
	static const struct orth_dims d44 = { 2, { 4, 4 } };

	CHECK_EQ(orth_alg_by_name("orth"), ORTH_GRID);
	CHECK_EQ(orth_alg_by_name("hier"), ORTH_HIER);
	CHECK_EQ(orth_alg_by_name("x"), -1);
	CHECK(orth_alg_name(ORTH_ALGS) == NULL);

	/* alpha 10 us, 1000 bytes at 1 ns/B: alpha + m beta = 11 */
	CHECK(orth_predict_us(ORTH_BCAST, ORTH_GRID, NULL, 1, 1, 1000, 10, 1) == 0);
	CHECK(orth_predict_us(ORTH_BCAST, ORTH_GRID, NULL, 16, 1, 1000, 10, 1) == 6 * 11.0);      /* 4 x 4 */
	CHECK(orth_predict_us(ORTH_BCAST, ORTH_SINGLE, NULL, 16, 1, 1000, 10, 1) == 4 * 11.0);
	CHECK(orth_predict_us(ORTH_REDUCE, ORTH_SINGLE, NULL, 17, 1, 1000, 10, 1) == 5 * 11.0);
	CHECK(orth_predict_us(ORTH_ALLREDUCE, ORTH_SINGLE, NULL, 16, 1, 1000, 10, 1) == 8 * 11.0);
	CHECK(orth_predict_us(ORTH_BCAST, ORTH_HIER, &d44, 16, 1, 1000, 10, 1) == 6 * 11.0);
	/* allgather 4 x 4, two ranks of 500 bytes: rows 3 x (10 + 1), columns
	 * 3 x (10 + 4); direct 15 x 11 */
	CHECK(orth_predict_us(ORTH_ALLGATHER, ORTH_GRID, NULL, 16, 2, 500, 10, 1) == 33 + 42);
	CHECK(orth_predict_us(ORTH_ALLGATHER, ORTH_SINGLE, NULL, 16, 2, 500, 10, 1) == 15 * 11.0);
	/* 7 nodes, 2 x 4 with a hole: rows 3, columns 2 (node 4 stands in
	 * for column 3: nodes 0 and 3) */
	CHECK(orth_predict_us(ORTH_ALLREDUCE, ORTH_GRID, NULL, 7, 1, 1000, 10, 1) == 5 * 11.0);
	CHECK(orth_predict_us(ORTH_BCAST, ORTH_HIER, NULL, 7, 1, 1000, 10, 1) > 1e300);

	/* the chooser: a tree broadcasts in fewer steps than the grid; ties
	 * go to the simpler; an allgather on many nodes is orthogonal at
	 * any size; the hypercube exchange beats reduce-then-broadcast */
	CHECK_EQ(orth_choose(ORTH_BCAST, 16, 1, 8, &(struct cost){ 5, 0.1, 0, NULL }, NULL, NULL), ORTH_SINGLE);
	CHECK_EQ(orth_choose(ORTH_BCAST, 4, 1, 8, &(struct cost){ 5, 0.1, 0, NULL }, NULL, NULL), ORTH_SINGLE);
	CHECK_EQ(orth_choose(ORTH_ALLGATHER, 64, 1, 8, &(struct cost){ 5, 0.1, 0, NULL }, NULL, NULL), ORTH_GRID);
	CHECK_EQ(orth_choose(ORTH_ALLGATHER, 64, 1, 1u << 20, &(struct cost){ 5, 0.1, 0, NULL }, NULL, NULL), ORTH_GRID);
	CHECK_EQ(orth_choose(ORTH_ALLGATHER, 2, 1, 8, &(struct cost){ 5, 0.1, 0, NULL }, NULL, NULL), ORTH_SINGLE);
	CHECK_EQ(orth_choose(ORTH_ALLREDUCE, 64, 1, 8, &(struct cost){ 5, 0.1, 0, NULL }, NULL, NULL), ORTH_SINGLE);
	CHECK_EQ(orth_choose(ORTH_ALLREDUCE, 64, 1, 8, &(struct cost){ 5, 0.1, 0, NULL }, &cube6, NULL), ORTH_HIER);
}

/* The daemons' grid for ORTH_HIER: the prime factors, largest first. */
TEST(hier_dims_are_the_prime_factors)
{
	static const struct { uint32_t P, k, d[4]; } cases[] = {
		{ 1, 1, { 1 } }, { 7, 1, { 7 } }, { 12, 3, { 3, 2, 2 } }, { 16, 4, { 2, 2, 2, 2 } },
		{ 30, 3, { 5, 3, 2 } }, { 49, 2, { 7, 7 } },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct orth_dims d;

		orth_hier_dims(cases[i].P, &d);
		CHECK_EQ(d.k, cases[i].k);
		for (uint32_t j = 0; j < d.k && j < 4; j++)
			CHECK_EQ(d.d[j], cases[i].d[j]);
	}
}

int main(void)
{
	RUN(bcast_every_layout_and_algorithm);
	RUN(reduce_every_layout_and_algorithm);
	RUN(allreduce_every_layout_and_algorithm);
	RUN(allgather_every_layout_and_algorithm);
	RUN(allgatherv_every_layout_and_algorithm);
	RUN(allreduce_same_bits_everywhere);
	RUN(layout_is_the_models_best);
	RUN(message_counts);
	RUN(disagreement_fails_never_hangs);
	RUN(different_sizes_fail_on_a_part);
	RUN(refusals);
	RUN(names_cost_model_and_chooser);
	RUN(hier_dims_are_the_prime_factors);
	return check_done();
}
