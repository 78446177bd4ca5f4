/* tests/unit/test_rs.c - plan/rs: node-level reduce-scatter (short, long,
 * every hybrid factorization) and scan/exscan schedules, checked
 * (sched_check) and run by the simulator (sched_run) over real buffers on
 * 1..9, 12, 16 and 17 nodes, 1 to 3 ranks per node, contiguous and
 * round-robin (non-contiguous) placements, counts 0, 1, 7, 1000 and uneven
 * counts with zeros: every result equal to a reference computed here,
 * every byte of the receive buffers written exactly once (exscan: rank 0's
 * never), floating-point results bit for bit the same whatever order the
 * simulator runs the steps in, a scan's equal to the sequential
 * left-to-right combination with inexact inputs; the message counts of
 * the algorithms; disagreeing plans fail on a word; the cost model and the
 * chooser. */
#define UNIT "test_rs"
#include "check.h"

#include "../../daemon/plan/rs.h"
#include "../../daemon/plan/sched.h"
#include "../../proto/coll.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define MAXN 17
#define MAXR (3 * MAXN)

/* A group: nodes, ranks per node, placed contiguously (node n has the
 * next per[n] ranks) or round the nodes that have room. */
struct group {
	uint32_t nodes, ranks;
	uint32_t first[MAXN + 1], at[MAXR];
	struct a2a_layout lay;
};

static void group_init(struct group *g, uint32_t nodes, const uint32_t *per, int round)
{
	uint32_t fill[MAXN] = { 0 };

	g->nodes = nodes;
	g->ranks = 0;
	g->first[0] = 0;
	for (uint32_t n = 0; n < nodes; n++) {
		g->first[n + 1] = g->first[n] + per[n];
		g->ranks += per[n];
	}
	for (uint32_t r = 0, n = 0; r < g->ranks; n = round ? (n + 1) % nodes : n)
		if (fill[n] < per[n])
			g->at[g->first[n] + fill[n]++] = r++;
		else if (!round)
			n++;
	g->lay = (struct a2a_layout){ g->ranks, g->first, g->at };
}

/* Simulator buffers: every rank's send buffer of slen[r] bytes, receive
 * buffer of rlen[r] bytes filled with 0xee. */
struct bufs {
	struct sched_mem mem[MAXN];
	uint8_t *send[MAXR], *recv[MAXR];
	uint64_t woff[MAXR], wtotal;    /* where each rank's write counters start */
};

static void bufs_init(struct bufs *b, const struct group *g, const uint64_t *slen, const uint64_t *rlen)
{
	b->wtotal = 0;
	for (uint32_t n = 0; n < g->nodes; n++) {
		uint32_t k0 = g->first[n], nk = g->first[n + 1] - k0;
		struct sched_mem *m = &b->mem[n];

		m->send = calloc(nk + 1, sizeof(void *));
		m->recv = calloc(nk + 1, sizeof(void *));
		m->send_len = calloc(nk + 1, 8);
		m->recv_len = calloc(nk + 1, 8);
		for (uint32_t k = 0; k < nk; k++) {
			uint32_t r = g->at[k0 + k];

			m->send[k] = b->send[r] = calloc(slen[r] + 1, 1);
			m->recv[k] = b->recv[r] = malloc(rlen[r] + 1);
			memset(b->recv[r], 0xee, rlen[r]);
			m->send_len[k] = slen[r];
			m->recv_len[k] = rlen[r];
			b->woff[r] = b->wtotal;
			b->wtotal += rlen[r];
		}
	}
}

static void bufs_free(struct bufs *b, const struct group *g)
{
	for (uint32_t r = 0; r < g->ranks; r++) {
		free(b->send[r]);
		free(b->recv[r]);
	}
	for (uint32_t n = 0; n < g->nodes; n++) {
		free(b->mem[n].send);
		free(b->mem[n].recv);
		free(b->mem[n].send_len);
		free(b->mem[n].recv_len);
	}
}

/* Checks s and runs it over b (seed); returns the write counters (freed by
 * the caller) or NULL on a failure, which it reports. */
static uint32_t *check_run(const struct sched *s, struct bufs *b, uint64_t seed, struct sched_run_stats *st)
{
	uint32_t *writes = calloc(b->wtotal + 1, 4);
	char why[256] = "";
	int ret = sched_check(s, why, sizeof(why));

	if (ret)
		fprintf(stderr, "  sched_check: %s\n", why);
	else if ((ret = sched_run(s, b->mem, seed, writes, st, why, sizeof(why))) != 0)
		fprintf(stderr, "  sched_run: %s\n", why);
	CHECK_EQ(ret, 0);
	if (ret) {
		free(writes);
		return NULL;
	}
	return writes;
}

/* ---- element values and the reference ---- */

/* The (type, op) pairs the cases rotate through: exact in every order
 * (integers wrap; floats hold small integers). */
static const unsigned cases[][2] = {
	{ COLL_INT32, COLL_SUM }, { COLL_DOUBLE, COLL_SUM }, { COLL_UINT8, COLL_PROD }, { COLL_INT64, COLL_BXOR },
	{ COLL_FLOAT, COLL_MAX }, { COLL_INT16, COLL_MIN }, { COLL_UINT32, COLL_LOR }, { COLL_FLOAT, COLL_SUM },
};
#define NCASES (sizeof(cases) / sizeof(cases[0]))

/* Rank r's element j, as an integer small enough for every type. */
static int64_t val(uint32_t r, uint64_t j)
{
	return (int64_t)((r * 7 + j * 3) % 23) - 9;
}

static void put(unsigned type, void *dst, int64_t v)
{
	switch (type) {
	case COLL_FLOAT: { float f = (float)v; memcpy(dst, &f, 4); return; }
	case COLL_DOUBLE: { double d = (double)v; memcpy(dst, &d, 8); return; }
	default: memcpy(dst, &v, coll_type_size(type));        /* little-endian: the low bytes */
	}
}

static int64_t get(unsigned type, const void *src)
{
	int64_t v = 0;

	switch (type) {
	case COLL_FLOAT: { float f; memcpy(&f, src, 4); return (int64_t)f; }
	case COLL_DOUBLE: { double d; memcpy(&d, src, 8); return (int64_t)d; }
	case COLL_INT16: { int16_t x; memcpy(&x, src, 2); return x; }
	default: memcpy(&v, src, coll_type_size(type)); return v;
	}
}

/* x op y for the cases' ops, in 64-bit arithmetic; the caller truncates
 * to the type (put). */
static int64_t ref_op(unsigned op, int64_t x, int64_t y)
{
	switch (op) {
	case COLL_SUM: return (int64_t)((uint64_t)x + (uint64_t)y);
	case COLL_PROD: return (int64_t)(uint8_t)((uint64_t)x * (uint64_t)y);
	case COLL_BXOR: return x ^ y;
	case COLL_MAX: return x > y ? x : y;
	case COLL_MIN: return x < y ? x : y;
	case COLL_LOR: return (x != 0) || (y != 0);
	default: return 0;
	}
}

/* The reference: element j of the combination of ranks [0, upto), as the
 * type holds it. */
static void ref_elem(unsigned type, unsigned op, uint32_t upto, uint64_t j, void *out)
{
	int64_t acc = val(0, j);
	uint8_t tmp[8];

	put(type, tmp, acc);
	acc = get(type, tmp);
	for (uint32_t r = 1; r < upto; r++) {
		put(type, tmp, ref_op(op, acc, get(type, (put(type, tmp, val(r, j)), tmp))));
		acc = get(type, tmp);
	}
	put(type, out, acc);
}

/* Rank r's inexact element j: a double or float that is no small
 * integer, so that the order of a sum shows in its bits. */
static double inexact_val(uint32_t r, uint64_t j)
{
	return 1.0 / (r + 3) + (double)j / 10;
}

/* Fills rank r's send vector of count elements: val(), or inexact_val()
 * (type COLL_FLOAT or COLL_DOUBLE). */
static void fill(unsigned type, int inexact, uint8_t *buf, uint32_t r, uint64_t count)
{
	for (uint64_t j = 0; j < count; j++) {
		float f = (float)inexact_val(r, j);
		double d = inexact_val(r, j);

		if (!inexact)
			put(type, buf + j * coll_type_size(type), val(r, j));
		else if (type == COLL_FLOAT)
			memcpy(buf + j * 4, &f, 4);
		else
			memcpy(buf + j * 8, &d, 8);
	}
}

/* ---- reduce-scatter ---- */

/* One reduce-scatter run of plan p over g with counts cnt: built, checked,
 * run over fresh buffers (inexact: doubles 1/(r+3) + j/10, else fill()).
 * Returns the write counters (NULL: a failure, reported), the buffers in
 * b (bufs_free), each rank's piece offset in displ. */
static uint32_t *rs_exec(const struct rs_plan *p, const struct group *g, const uint64_t *cnt, unsigned type,
			 unsigned op, int inexact, uint64_t seed, struct bufs *b, uint64_t *displ,
			 struct sched_run_stats *st)
{
	uint64_t es = coll_type_size(type), N = 0, slen[MAXR], rlen[MAXR];
	struct rs_args a = { cnt, type, op };
	struct sched s;
	uint32_t *writes;

	for (uint32_t r = 0; r < g->ranks; r++) {
		displ[r] = N;
		N += cnt[r];
		rlen[r] = cnt[r] * es;
	}
	for (uint32_t r = 0; r < g->ranks; r++)
		slen[r] = N * es;
	CHECK_EQ(sched_init(&s, g->nodes), 0);
	CHECK_EQ(rs_sched(p, &g->lay, &a, &s), 0);
	bufs_init(b, g, slen, rlen);
	for (uint32_t r = 0; r < g->ranks; r++)
		fill(type, inexact, b->send[r], r, N);
	writes = check_run(&s, b, seed, st);
	sched_free(&s);
	return writes;
}

/* Runs plan p over g with counts cnt (type, op); checks the results
 * against the reference and that every byte was written once.  Returns 0
 * when all was right. */
static int rs_one(const struct rs_plan *p, const struct group *g, const uint64_t *cnt, unsigned type, unsigned op,
		  uint64_t seed, struct sched_run_stats *st)
{
	uint64_t es = coll_type_size(type), displ[MAXR];
	struct sched_run_stats st0;
	struct bufs b;
	uint32_t *writes = rs_exec(p, g, cnt, type, op, 0, seed, &b, displ, st ? st : &st0);
	int bad = 0;

	for (uint32_t r = 0; writes && r < g->ranks && !bad; r++)
		for (uint64_t j = 0; j < cnt[r] && !bad; j++) {
			uint8_t want[8];

			ref_elem(type, op, g->ranks, displ[r] + j, want);
			bad = memcmp(want, b.recv[r] + j * es, es) != 0;
			for (uint64_t x = 0; x < es; x++)
				bad |= writes[b.woff[r] + j * es + x] != 1;
			if (bad)
				fprintf(stderr, "  nodes %u dims %u (%u %s) type %u op %u: rank %u element %llu\n",
					p->nodes, p->ndims, p->dim[0], rs_alg_name(p->alg[0]), type, op, r,
					(unsigned long long)j);
		}
	CHECK(!bad && writes);
	free(writes);
	bufs_free(&b, g);
	return bad || !writes;
}

/* Every plan over nodes: short, long, then every factorization into 3 and
 * 2 dimensions with every assignment of algorithms. */
static uint32_t all_plans(uint32_t nodes, struct rs_plan *out)
{
	uint32_t k = 0;

	CHECK_EQ(rs_plan_init(&out[k++], RS_SHORT, nodes), 0);
	CHECK_EQ(rs_plan_init(&out[k++], RS_LONG, nodes), 0);
	for (uint32_t a = 2; a * 4 <= nodes; a++)     /* 3 dimensions */
		for (uint32_t b = 2; a * b * 2 <= nodes; b++) {
			uint32_t dim[3] = { a, b, nodes / (a * b) };

			if (nodes % (a * b))
				continue;
			for (uint32_t m = 0; m < 8; m++) {
				enum rs_alg alg[3] = { m & 1, (m >> 1) & 1, (m >> 2) & 1 };

				CHECK_EQ(rs_plan_dims(&out[k++], nodes, 3, dim, alg), 0);
			}
		}
	for (uint32_t a = 2; a < nodes; a++)        /* 2 dimensions: a x nodes/a */
		if (nodes % a == 0)
			for (uint32_t m = 0; m < 4; m++) {
				uint32_t dim[2] = { a, nodes / a };
				enum rs_alg alg[2] = { m & 1, m >> 1 };

				CHECK_EQ(rs_plan_dims(&out[k++], nodes, 2, dim, alg), 0);
			}
	return k;
}

static const uint32_t sizes[] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 16, 17 };
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))

/* Ranks per node of layout variant v: 1 each, 2 each, uneven 1..3. */
static void per_node(uint32_t nodes, int v, uint32_t *per)
{
	for (uint32_t n = 0; n < nodes; n++)
		per[n] = v == 0 ? 1 : v == 1 ? 2 : 1 + (n * 2 + 1) % 3;
}

/* Counts of variant c: equal 0, 1, 7, 1000, or uneven with zeros. */
static void counts(uint32_t ranks, int c, uint64_t *cnt)
{
	static const uint64_t eq[] = { 0, 1, 7, 1000 };

	for (uint32_t r = 0; r < ranks; r++)
		cnt[r] = c < 4 ? eq[c] : (r % 3 == 1 ? 0 : (r * 5 + 2) % 9);
}

TEST(reduce_scatter_every_plan_layout_count)
{
	static struct rs_plan plans[200];
	uint64_t seed = 1, cnt[MAXR];
	uint32_t per[MAXN], nc = 0;

	for (size_t z = 0; z < NSIZES; z++) {
		uint32_t P = sizes[z], np = all_plans(P, plans);

		for (uint32_t i = 0; i < np; i++)
			for (int v = 0; v < 3; v++)
				for (int round = 0; round < 2; round++) {
					struct group g;

					per_node(P, v, per);
					group_init(&g, P, per, round);
					for (int c = 0; c < 5; c++, nc++) {
						/* 1000 elements: not every plan, to stay fast */
						if (c == 3 && (i % 5 || v == 1))
							continue;
						counts(g.ranks, c, cnt);
						rs_one(&plans[i], &g, cnt, cases[nc % NCASES][0], cases[nc % NCASES][1],
						       seed++, NULL);
					}
				}
	}
}

/* Inexact floating-point inputs: the same bits whatever order the
 * simulator runs the steps in (three seeds), every plan. */
TEST(reduce_scatter_float_reproducible)
{
	static struct rs_plan plans[200];
	uint32_t per[MAXN];

	for (size_t z = 0; z < NSIZES; z++) {
		uint32_t P = sizes[z], np = all_plans(P, plans);
		uint64_t cnt[MAXR], displ[MAXR];
		struct group g;

		per_node(P, 2, per);
		group_init(&g, P, per, 1);
		counts(g.ranks, 4, cnt);
		for (uint32_t i = 0; i < np; i++) {
			uint8_t *bits[MAXR] = { 0 };

			for (uint64_t seed = 1; seed <= 3; seed++) {
				struct sched_run_stats st;
				struct bufs b;
				uint32_t *w;

				w = rs_exec(&plans[i], &g, cnt, COLL_DOUBLE, COLL_SUM, 1, seed, &b, displ, &st);

				for (uint32_t r = 0; w && r < g.ranks; r++) {
					if (seed == 1)
						bits[r] = b.recv[r], b.recv[r] = NULL;
					else
						CHECK(memcmp(bits[r], b.recv[r], cnt[r] * 8) == 0);
				}
				free(w);
				bufs_free(&b, &g);
			}
			for (uint32_t r = 0; r < g.ranks; r++)
				free(bits[r]);
		}
	}
}

/* The steps of node n: data SENDs (msg below 2^30), words (bit 31). */
static uint32_t count_sends(const struct sched_node *n, int word)
{
	uint32_t k = 0;

	for (uint32_t i = 0; i < n->nsteps; i++)
		k += n->steps[i].kind == SCHED_SEND && !!(n->steps[i].msg >> 31) == word;
	return k;
}

/* The theory's messages: long d - 1 sends per member of each phase group;
 * short 2 (d - 1) per group, the root ceil(log2 d) of them; one word per
 * phase per node.  Per node for one dimension, in total for every plan. */
TEST(message_counts)
{
	static struct rs_plan plans[200];
	uint32_t per[MAXN];

	for (size_t z = 0; z < NSIZES; z++) {
		uint32_t P = sizes[z], np = all_plans(P, plans), L = 0;
		uint64_t cnt[MAXR];
		struct group g;

		while ((1u << L) < P)
			L++;
		per_node(P, 2, per);
		group_init(&g, P, per, 1);
		counts(g.ranks, 2, cnt);
		for (uint32_t i = 0; i < np; i++) {
			const struct rs_plan *p = &plans[i];
			struct rs_args a = { cnt, COLL_INT32, COLL_SUM };
			uint64_t want = 0, total = 0;
			struct sched s;

			for (uint32_t d = 0; d < p->ndims; d++)
				want += (uint64_t)P / p->dim[d] * (p->alg[d] == RS_LONG ? p->dim[d] * (p->dim[d] - 1)
											 : 2 * (p->dim[d] - 1));
			CHECK_EQ(sched_init(&s, P), 0);
			CHECK_EQ(rs_sched(p, &g.lay, &a, &s), 0);
			for (uint32_t n = 0; n < P; n++) {
				uint32_t data = count_sends(&s.node[n], 0);

				total += data;
				CHECK_EQ(count_sends(&s.node[n], 1), p->ndims);
				if (p->ndims == 1 && p->alg[0] == RS_LONG)
					CHECK_EQ(data, P - 1);
				if (p->ndims == 1 && p->alg[0] == RS_SHORT && n == 0)
					CHECK_EQ(data, L);
			}
			CHECK_EQ(total, want);
			sched_free(&s);
		}
	}
}

/* 1 if some node sends, without waiting for anything, a message its
 * receiver does not expect (the executor then fails the operation). */
static int unexpected_at_once(const struct sched *s)
{
	for (uint32_t n = 0; n < s->nodes; n++)
		for (uint32_t i = 0; i < s->node[n].nsteps; i++) {
			const struct sched_step *st = &s->node[n].steps[i];
			const struct sched_node *to = &s->node[st->peer];
			int expected = 0;

			if (st->kind != SCHED_SEND || st->ndep)
				continue;
			for (uint32_t k = 0; k < to->nsteps; k++) {
				const struct sched_step *t = &to->steps[k];

				expected |= (t->kind == SCHED_RECV || t->kind == SCHED_RECV_REDUCE) && t->peer == n &&
					    t->msg == st->msg;
			}
			if (!expected)
				return 1;
		}
	return 0;
}

/* Nodes that run different plans: some node gets a message it does not
 * expect at once, whichever nodes run which (one node against the rest,
 * the first half against the second), for every pair of plans. */
TEST(disagreement_fails)
{
	static struct rs_plan plans[200];
	static const uint32_t sz[] = { 2, 4, 6, 8, 12 };
	uint32_t per[MAXN];

	for (size_t z = 0; z < sizeof(sz) / sizeof(sz[0]); z++) {
		uint32_t P = sz[z], np = all_plans(P, plans);
		uint64_t cnt[MAXR];
		struct group g;

		per_node(P, 0, per);
		group_init(&g, P, per, 0);
		counts(g.ranks, 1, cnt);
		for (uint32_t x = 0; x < np; x++)
			for (uint32_t y = 0; y < np; y++)
				for (uint32_t split = 0; split <= P && x != y; split++) {
					struct rs_args a = { cnt, COLL_INT32, COLL_SUM };
					struct sched s;

					CHECK_EQ(sched_init(&s, P), 0);
					for (uint32_t n = 0; n < P; n++) {
						int mine = split == P ? n < P / 2 : n == split;
						const struct rs_plan *pn = mine ? &plans[x] : &plans[y];

						s.node[n].nslots = 1;
						CHECK_EQ(rs_sched_node(pn, &g.lay, n, &a, &s.node[n]), 0);
					}
					CHECK(unexpected_at_once(&s));
					sched_free(&s);
				}
	}
}

/* ---- scan and exscan ---- */

/* One scan (exscan) over g: results against the reference, writes once
 * (exscan: rank 0 never), the chain's messages. */
static void scan_one(const struct group *g, uint64_t count, unsigned type, unsigned op, int excl, uint32_t chunks,
		     uint64_t seed)
{
	struct rs_scan_args a = { count, type, op, excl, chunks };
	uint64_t es = coll_type_size(type), len[MAXR];
	struct sched_run_stats st;
	struct sched s;
	struct bufs b;
	uint32_t *w;
	int bad = 0;

	for (uint32_t r = 0; r < g->ranks; r++)
		len[r] = count * es;
	CHECK_EQ(sched_init(&s, g->nodes), 0);
	CHECK_EQ(rs_scan_sched(&a, &g->lay, g->nodes, &s), 0);
	bufs_init(&b, g, len, len);
	for (uint32_t r = 0; r < g->ranks; r++)
		fill(type, 0, b.send[r], r, count);
	w = check_run(&s, &b, seed, &st);
	for (uint32_t r = 0; w && r < g->ranks && !bad; r++)
		for (uint64_t j = 0; j < count * es && !bad; j++) {
			static uint8_t want[8];
			int none = excl && r == 0;

			if (j % es == 0)
				ref_elem(type, op, excl ? r : r + 1, j / es, want);
			bad = b.recv[r][j] != (none ? 0xee : want[j % es]) || w[b.woff[r] + j] != !none;
			if (bad)
				fprintf(stderr, "  scan nodes %u excl %d chunks %u type %u op %u: rank %u byte %llu\n",
					g->nodes, excl, chunks, type, op, r, (unsigned long long)j);
		}
	CHECK(!bad && w);
	if (w)
		CHECK_EQ(st.messages, (uint64_t)(rs_scan_runs(&g->lay, g->nodes) - 1) * chunks);
	free(w);
	bufs_free(&b, g);
	sched_free(&s);
}

TEST(scan_every_layout_count)
{
	static const uint64_t cn[] = { 0, 1, 7, 1000 };
	uint32_t per[MAXN], nc = 0;
	uint64_t seed = 1;

	for (size_t z = 0; z < NSIZES; z++)
		for (int v = 0; v < 3; v++)
			for (int round = 0; round < 2; round++) {
				struct group g;

				per_node(sizes[z], v, per);
				group_init(&g, sizes[z], per, round);
				for (size_t c = 0; c < 4; c++)
					for (int excl = 0; excl < 2; excl++)
						for (uint32_t k = 1; k <= 3 && k <= (cn[c] ? cn[c] : 1); k += 2, nc++) {
							const unsigned *tc = cases[nc % NCASES];

							scan_one(&g, cn[c], tc[0], tc[1], excl, k, seed++);
						}
			}
}

/* Inexact floats and doubles: every rank's result the bits of the
 * sequential left-to-right loop, whatever the layout and chunks. */
TEST(scan_float_left_to_right)
{
	uint32_t per[MAXN];
	uint64_t seed = 7;

	for (size_t z = 0; z < NSIZES; z++)
		for (int round = 0; round < 2; round++)
			for (int excl = 0; excl < 2; excl++)
				for (unsigned type = COLL_FLOAT; type <= COLL_DOUBLE; type++) {
					struct rs_scan_args a = { 50, type, COLL_SUM, excl, 4 };
					uint64_t es = coll_type_size(type), len[MAXR];
					struct sched_run_stats st;
					struct group g;
					struct sched s;
					struct bufs b;
					uint32_t *w;

					per_node(sizes[z], 2, per);
					group_init(&g, sizes[z], per, round);
					for (uint32_t r = 0; r < g.ranks; r++)
						len[r] = 50 * es;
					CHECK_EQ(sched_init(&s, g.nodes), 0);
					CHECK_EQ(rs_scan_sched(&a, &g.lay, g.nodes, &s), 0);
					bufs_init(&b, &g, len, len);
					for (uint32_t r = 0; r < g.ranks; r++)
						fill(type, 1, b.send[r], r, 50);
					w = check_run(&s, &b, seed++, &st);
					for (uint64_t j = 0; w && j < 50; j++) {
						float f = (float)inexact_val(0, j);
						double d = inexact_val(0, j);

						for (uint32_t r = excl; r < g.ranks; r++) {
							CHECK(type == COLL_FLOAT ? !memcmp(&f, b.recv[r] + j * 4, 4)
										 : !memcmp(&d, b.recv[r] + j * 8, 8));
							f += (float)inexact_val(r + 1 - excl, j);
							d += inexact_val(r + 1 - excl, j);
						}
					}
					free(w);
					bufs_free(&b, &g);
					sched_free(&s);
				}
}

/* ---- the cost model and the chooser ---- */

TEST(cost_model)
{
	/* seed 002's formulas: alpha 1 us, beta 1 ns/B, gamma 0.5 ns/B */
	CHECK(rs_dim_predict_us(RS_LONG, 4, 4000, 1, 1, 0.5) == 3 + 0.75 * 4000 * 1.5 / 1000);
	CHECK(rs_dim_predict_us(RS_SHORT, 4, 4000, 1, 1, 0.5) == 2 * (1 + 4 + 2) + 2 + 0.75 * 4);
	CHECK(rs_dim_predict_us(RS_SHORT, 1, 4000, 1, 1, 0.5) == 0);
	CHECK_EQ(rs_dim_choose(16, 8, 10, 1, 1), RS_SHORT);
	CHECK_EQ(rs_dim_choose(16, 1e8, 10, 1, 1), RS_LONG);
	CHECK(rs_scan_predict_us(1, 4, 1000, 1, 1, 1) == 0);
	CHECK(rs_scan_predict_us(5, 1, 1000, 1, 1, 0) == 4 * 2);
	CHECK_EQ(rs_scan_chunks(2, 1000000, 8, 10, 1, 0), 1);
	CHECK(rs_scan_chunks(16, 1000000, 8, 10, 1, 0) > 1);
	CHECK_EQ(rs_scan_chunks(16, 3, 8, 0, 1, 0), 3);
}

/* The chooser: no plan of all_plans faster than its pick (in this model
 * splitting a phase never adds messages on the path and carries fewer
 * bytes later: hybrids win often); long phases for huge vectors; a forced
 * hybrid has two dimensions or more where nodes are not prime. */
TEST(chooser)
{
	static struct rs_plan plans[200];
	static const uint64_t bytes[] = { 8, 4096, 1 << 16, 1 << 20, 1 << 26 };
	struct rs_plan p;
	int hybrid_seen = 0;

	for (size_t z = 0; z < NSIZES; z++) {
		uint32_t P = sizes[z], np = all_plans(P, plans);

		for (size_t k = 0; k < sizeof(bytes) / sizeof(bytes[0]); k++) {
			double t;

			CHECK_EQ(rs_choose(-1, P, bytes[k], &(struct cost){ 20, 0.5, 0.2, NULL }, &p), 0);
			t = rs_predict_us(&p, bytes[k], 20, 0.5, 0.2);
			for (uint32_t i = 0; i < np; i++)
				CHECK(t <= rs_predict_us(&plans[i], bytes[k], 20, 0.5, 0.2));
			hybrid_seen |= p.ndims > 1;
			CHECK_EQ(rs_choose(RS_HYBRID, P, bytes[k], &(struct cost){ 20, 0.5, 0.2, NULL }, &p), 0);
			CHECK(p.ndims >= 2 || P == 1 || P == 2 || P == 3 || P == 5 || P == 7 || P == 17);
		}
	}
	CHECK(hybrid_seen);
	/* tiny vectors: a phase of 2 or 3 nodes is one exchange round the ring
	 * (long) against a reduction and a scatter (short) */
	CHECK_EQ(rs_dim_choose(2, 8, 20, 0.5, 0.2), RS_LONG);
	CHECK_EQ(rs_dim_choose(3, 8, 20, 0.5, 0.2), RS_LONG);
	CHECK_EQ(rs_dim_choose(8, 8, 20, 0.5, 0.2), RS_SHORT);
	CHECK_EQ(rs_choose(-1, 16, 8, &(struct cost){ 20, 0.5, 0.2, NULL }, &p), 0);
	CHECK(p.ndims >= 2);
	CHECK_EQ(rs_choose(-1, 16, 1ull << 32, &(struct cost){ 20, 0.5, 0.2, NULL }, &p), 0);
	for (uint32_t i = 0; i < p.ndims; i++)
		CHECK_EQ(p.alg[i], RS_LONG);
	CHECK_EQ(rs_choose(RS_LONG, 16, 8, &(struct cost){ 20, 0.5, 0.2, NULL }, &p), 0);
	CHECK(p.ndims == 1 && p.alg[0] == RS_LONG);
	CHECK_EQ(rs_choose(5, 16, 8, &(struct cost){ 20, 0.5, 0.2, NULL }, &p), -EINVAL);
	CHECK_EQ(rs_plan_dims(&p, 12, 2, (uint32_t[]){ 3, 5 }, (enum rs_alg[]){ RS_SHORT, RS_LONG }), -EINVAL);
	CHECK_EQ(rs_alg_by_name("hybrid"), RS_HYBRID);
	CHECK(strcmp(rs_alg_name(RS_LONG), "long") == 0);
}

/* Bad arguments: a node without ranks, a bad op for the type. */
TEST(bad_arguments)
{
	uint32_t per[3] = { 1, 0, 2 };
	uint64_t cnt[3] = { 1, 1, 1 };
	struct rs_args a = { cnt, COLL_INT32, COLL_SUM };
	struct rs_scan_args sa = { 4, COLL_DOUBLE, COLL_BXOR, 0, 1 };
	struct rs_plan p;
	struct group g;
	struct sched s;

	group_init(&g, 3, per, 0);
	CHECK_EQ(rs_plan_init(&p, RS_LONG, 3), 0);
	CHECK_EQ(sched_init(&s, 3), 0);
	CHECK_EQ(rs_sched_node(&p, &g.lay, 1, &a, &s.node[1]), -EINVAL);
	a.type = COLL_FLOAT;
	a.op = COLL_BAND;
	per[1] = 1;
	group_init(&g, 3, per, 0);
	CHECK_EQ(rs_sched_node(&p, &g.lay, 0, &a, &s.node[0]), -EINVAL);
	CHECK_EQ(rs_scan_sched_node(&sa, &g.lay, 3, 0, &s.node[0]), -EINVAL);
	sa.op = COLL_SUM;
	sa.chunks = 0;
	CHECK_EQ(rs_scan_sched_node(&sa, &g.lay, 3, 0, &s.node[0]), -EINVAL);
	sched_free(&s);
}

int main(void)
{
	RUN(reduce_scatter_every_plan_layout_count);
	RUN(reduce_scatter_float_reproducible);
	RUN(message_counts);
	RUN(disagreement_fails);
	RUN(scan_every_layout_count);
	RUN(scan_float_left_to_right);
	RUN(cost_model);
	RUN(chooser);
	RUN(bad_arguments);
	return check_done();
}
