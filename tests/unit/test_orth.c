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
#include "../../proto/coll.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define MAXN 20
#define MAXR 64

/* A layout: per[n] ranks on node n, ranks dealt round the nodes that have
 * room. */
struct lay {
	uint32_t nodes, first[MAXN + 1], at[MAXR];
	struct a2a_layout l;
};

static void lay_init(struct lay *L, uint32_t nodes, const uint32_t *per)
{
	uint32_t fill[MAXN] = { 0 }, ranks = 0;

	L->nodes = nodes;
	L->first[0] = 0;
	for (uint32_t n = 0; n < nodes; n++) {
		L->first[n + 1] = L->first[n] + per[n];
		ranks += per[n];
	}
	for (uint32_t r = 0, n = 0; r < ranks; n = (n + 1) % nodes)
		if (fill[n] < per[n])
			L->at[L->first[n] + fill[n]++] = r++;
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
			put(a->type, s + i * ts, val(r, i), (double)val(r, i));
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
	if (!ret)
		CHECK_EQ(verify(L, tc, &b), 0);
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

/* Every algorithm (single, orth, the two factorizations) for one kind. */
static void sweep(enum orth_kind kind, int v)
{
	uint64_t seed = 1;
	unsigned pair = 0;

	for (size_t z = 0; z < sizeof(node_counts) / sizeof(node_counts[0]); z++)
		for (int lv = 0; lv < 5; lv++) {
			uint32_t P = node_counts[z];
			struct lay L;
			struct orth_dims d;

			layout(&L, P, lv);
			for (int alg = 0; alg < 4; alg++) {
				struct tcase tc = { .a = { .kind = kind, .alg = alg < 2 ? alg : ORTH_HIER, .dims = &d },
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

int main(void)
{
	RUN(bcast_every_layout_and_algorithm);
	RUN(reduce_every_layout_and_algorithm);
	RUN(allreduce_every_layout_and_algorithm);
	RUN(allgather_every_layout_and_algorithm);
	RUN(allgatherv_every_layout_and_algorithm);
	return check_done();
}
