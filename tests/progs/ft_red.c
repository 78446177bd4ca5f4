/* tests/progs/ft_red.c - broadcast, the reductions, allgather(v) and the
 * scans run by the daemons, every result checked against a reference this
 * program computes itself (its own arithmetic, not the daemon's kernels).
 *
 *   ft_red --job J --rank R --size P [--counts C[,C...]] [--strategy S]
 *          [--ops LIST] [--pairs all|some]
 *
 * For each count C (elements; bytes for bcast and allgather; default
 * 0,1,7,1000) and each operation of LIST (default all: bcast, reduce,
 * allreduce, allgather, allgatherv, rsb (reduce_scatter_block), rs
 * (reduce_scatter with uneven counts, zeros among them), scan, exscan),
 * with ordinary buffers (staged), ferry_alloc memory (in place) and
 * FERRY_IN_PLACE, blocking and non-blocking (two posted before either is
 * waited for); roots 0, P-1 and P/2.  The reductions run over type and
 * operation pairs: --pairs all every pair DESIGN.md allows (at count 7
 * only; the other counts some), some: sum of int32, max of double, bxor
 * of uint8, prod of float, land of int16.  Inputs are small integers
 * (products of 1s and 2s), so floating-point results are exact whatever
 * the order; the bit-for-bit agreement of inexact ones across ranks is
 * checked too (allreduce of thirds: every rank's result must be the
 * same bits, which the ranks compare with an allgather).  --strategy
 * forces every operation's algorithm (ferry_coll_strategy).
 *
 * --linger MS: waits that long before ferry_close (for ferryctl stats).
 * --split: then the same on the groups of ferry_split(rank % 2) (counts
 * up to 7).  --die-rank R --die-after N: rank R exits at once (no
 * ferry_close) once N operations succeeded; the others' next operations
 * must fail (exit 1 saying why), not hang.
 *
 * --mismatch WHAT: rank M (--mismatch-rank, default 1) passes another
 * type (type), operation (op), count (count) or root (root: a reduce)
 * than the others in one allreduce (a reduce for root), forces another
 * algorithm (strategy: orth where the others force single), or passes
 * other reduce_scatter counts with the same total (rscounts); prints
 * "rank R mismatch: ERRNAME: message" within 20 s and exits 0 if its
 * operation failed, 1 if not (the test knows which ranks must fail).
 *
 * Prints "rank R ok: N operations" and exits 0, or says what was wrong
 * and exits 1.
 */
#include "common.h"

#include <errno.h>
#include <getopt.h>
#include <string.h>
#include <unistd.h>

static uint32_t me, P, die_rank = UINT32_MAX;
static long ops, die_after = -1;
static ferry_t *F;

#define FAIL(...)                                                                     \
	do {                                                                          \
		fprintf(stderr, "rank %u: ", me);                                     \
		fprintf(stderr, __VA_ARGS__);                                         \
		fprintf(stderr, "\n");                                                \
		exit(1);                                                              \
	} while (0)

static void ok(const char *what, int ret)
{
	if (ret < 0)
		FAIL("%s: %s: %s", what, ferry_strerror(ret), ferry_last_error());
	if (++ops == die_after && me == die_rank) {
		printf("rank %u dies after %ld operations\n", me, ops);
		fflush(stdout);
		_exit(0);
	}
}

/* --- this program's own arithmetic --- */

static const size_t tsize[] = { 1, 1, 1, 2, 2, 4, 4, 8, 8, 4, 8 };

static int is_float(int t)
{
	return t == FERRY_FLOAT || t == FERRY_DOUBLE;
}

static int pair_ok(int t, int op)
{
	return op <= FERRY_MAX || !is_float(t);
}

/* Element i of a buffer of type t as a double / an integer (exact for the
 * small values used) and back. */
static long double get(int t, const void *p, size_t i)
{
	const uint8_t *b = (const uint8_t *)p + i * tsize[t];

	switch (t) {
	case FERRY_INT8: { int8_t v; memcpy(&v, b, 1); return v; }
	case FERRY_INT16: { int16_t v; memcpy(&v, b, 2); return v; }
	case FERRY_UINT16: { uint16_t v; memcpy(&v, b, 2); return v; }
	case FERRY_INT32: { int32_t v; memcpy(&v, b, 4); return v; }
	case FERRY_UINT32: { uint32_t v; memcpy(&v, b, 4); return v; }
	case FERRY_INT64: { int64_t v; memcpy(&v, b, 8); return v; }
	case FERRY_UINT64: { uint64_t v; memcpy(&v, b, 8); return v; }
	case FERRY_FLOAT: { float v; memcpy(&v, b, 4); return v; }
	case FERRY_DOUBLE: { double v; memcpy(&v, b, 8); return v; }
	default: return b[0];
	}
}

/* The low bits of an integer element (its two's complement, wrapped). */
static uint64_t bits(int t, const void *p, size_t i)
{
	uint64_t v = 0;

	memcpy(&v, (const uint8_t *)p + i * tsize[t], tsize[t]);
	return v;
}

static void put_bits(int t, void *p, size_t i, uint64_t v)
{
	memcpy((uint8_t *)p + i * tsize[t], &v, tsize[t]);
}

static void put(int t, void *p, size_t i, long double v)
{
	if (t == FERRY_FLOAT) {
		float f = (float)v;

		memcpy((uint8_t *)p + i * 4, &f, 4);
	} else if (t == FERRY_DOUBLE) {
		double d = (double)v;

		memcpy((uint8_t *)p + i * 8, &d, 8);
	} else {
		put_bits(t, p, i, (uint64_t)(int64_t)v);
	}
}

/* Rank r's input element i of operation seq: small (1..13; 1 or 2 for a
 * product, so that every product is exact in a float). */
static long double input(int op, uint32_t r, size_t i, uint32_t seq)
{
	if (op == FERRY_PROD)
		return 1 + (r + i + seq) % 2;
	return 1 + (r * 7 + i * 3 + seq * 5) % 13;
}

/* acc[i] = acc[i] op x[i], this program's way: integers in 64-bit
 * unsigned arithmetic cut to the type, floats in long double (exact for
 * these inputs), min and max by value. */
static void combine(int t, int op, void *acc, const void *x, size_t i)
{
	if (is_float(t) || op == FERRY_MIN || op == FERRY_MAX) {
		long double a = get(t, acc, i), b = get(t, x, i);

		put(t, acc, i, op == FERRY_SUM ? a + b : op == FERRY_PROD ? a * b : op == FERRY_MIN ? (b < a ? b : a)
										  : (b > a ? b : a));
		return;
	}
	uint64_t a = bits(t, acc, i), b = bits(t, x, i), mask = tsize[t] == 8 ? ~0ull : (1ull << 8 * tsize[t]) - 1;
	uint64_t v;

	switch (op) {
	case FERRY_SUM: v = a + b; break;
	case FERRY_PROD: v = a * b; break;
	case FERRY_BAND: v = a & b; break;
	case FERRY_BOR: v = a | b; break;
	case FERRY_BXOR: v = a ^ b; break;
	case FERRY_LAND: v = (a & mask) && (b & mask); break;
	case FERRY_LOR: v = (a & mask) || (b & mask); break;
	default: v = !(a & mask) != !(b & mask); break;        /* lxor */
	}
	put_bits(t, acc, i, v);
}

/* Fills buf (n elements) with rank r's input of seq. */
static void fill(int t, int op, void *buf, size_t n, uint32_t r, uint32_t seq)
{
	for (size_t i = 0; i < n; i++)
		put(t, buf, i, input(op, r, i, seq));
}

/* ref = the reduction of ranks lo..hi-1's inputs (n elements each, from
 * element off of their vectors), combined in rank order. */
static void reference(int t, int op, void *ref, size_t n, size_t off, uint32_t lo, uint32_t hi, uint32_t seq)
{
	uint8_t x[8], acc[8];

	for (size_t i = 0; i < n; i++) {
		put(t, acc, 0, input(op, lo, off + i, seq));
		for (uint32_t r = lo + 1; r < hi; r++) {
			put(t, x, 0, input(op, r, off + i, seq));
			combine(t, op, acc, x, 0);
		}
		memcpy((uint8_t *)ref + i * tsize[t], acc, tsize[t]);
	}
}

/* --- the operations --- */

enum { K_REDUCE, K_ALLREDUCE, K_SCAN, K_EXSCAN, K_RSB, K_RS, K_REDUCTIONS };
static const char *const kname[] = { "reduce", "allreduce", "scan", "exscan", "rsb", "rs" };

/* reduce_scatter's counts for n: uneven, zeros among them. */
static size_t rs_count(uint32_t r, size_t n)
{
	return r % 3 == 1 ? 0 : n + r % 4;
}

/* The input elements of a reduction kind for count n (a rank's vector) and
 * the output elements of rank r, and where in the full reduction they
 * start. */
static void red_shape(int k, size_t n, uint32_t r, size_t *in_p, size_t *out_p, size_t *from_p)
{
	size_t before = 0, total = 0;

	for (uint32_t q = 0; q < P; q++) {
		total += rs_count(q, n);
		before += q < r ? rs_count(q, n) : 0;
	}
	*in_p = k == K_RSB ? n * P : k == K_RS ? total : n;
	*out_p = k == K_RS ? rs_count(r, n) : n;
	*from_p = k == K_RSB ? r * n : k == K_RS ? before : 0;
}

static int red_post(int k, int t, int op, const void *s, void *rb, size_t n, uint32_t root, ferry_req_t **req)
{
	size_t counts[1024];

	switch (k) {
	case K_REDUCE: return ferry_ireduce(F, s, rb, n, t, op, root, req);
	case K_ALLREDUCE: return ferry_iallreduce(F, s, rb, n, t, op, req);
	case K_SCAN: return ferry_iscan(F, s, rb, n, t, op, req);
	case K_EXSCAN: return ferry_iexscan(F, s, rb, n, t, op, req);
	case K_RSB: return ferry_ireduce_scatter_block(F, s, rb, n, t, op, req);
	default:
		for (uint32_t q = 0; q < P && q < 1024; q++)
			counts[q] = rs_count(q, n);
		return ferry_ireduce_scatter(F, s, rb, counts, t, op, req);
	}
}

/* One reduction of kind k over (t, op), n, in mode (0 staged, 1
 * ferry_alloc, 2 FERRY_IN_PLACE, 3 two posted before either is waited for):
 * every rank checks what it got. */
static void red_one(int k, int t, int op, size_t n, int mode, uint32_t root, uint32_t *seq)
{
	int alloc = mode == 1, in_place = mode == 2 && (k != K_REDUCE || me == root), reps = mode == 3 ? 2 : 1;
	size_t in, out, from, es = tsize[t];
	uint8_t *s[2], *r[2], *ref;
	ferry_req_t *req[2];
	char what[96];

	red_shape(k, n, me, &in, &out, &from);
	ref = mem_get(F, out * es, 0);
	for (int j = 0; j < reps; j++) {
		s[j] = mem_get(F, in * es, alloc);
		r[j] = mem_get(F, (in > out ? in : out) * es, alloc);
		memset(r[j], 0xee, (in > out ? in : out) * es);
		fill(t, op, in_place ? r[j] : s[j], in, me, *seq + (uint32_t)j);
	}
	for (int j = 0; j < reps; j++) {
		snprintf(what, sizeof(what), "%s of %zu (type %d op %d, mode %d, root %u)", kname[k], n, t, op, mode,
			 root);
		ok(what, red_post(k, t, op, in_place ? FERRY_IN_PLACE : s[j], r[j], n, root, &req[j]));
	}
	for (int j = 0; j < reps; j++) {
		uint32_t sq = *seq + (uint32_t)j, lo = 0, hi = P;

		ok("ferry_wait", ferry_wait(&req[j]));
		if (k == K_REDUCE && me != root)
			continue;
		if (k == K_SCAN || k == K_EXSCAN)
			hi = k == K_SCAN ? me + 1 : me;
		if (hi == lo) {         /* exscan's rank 0: untouched */
			for (size_t i = 0; i < out * es; i++)
				if (r[j][i] != (in_place ? r[j][i] : 0xee))
					FAIL("%s: rank 0's receive buffer was written", what);
			continue;
		}
		reference(t, op, ref, out, from, lo, hi, sq);
		if (memcmp(r[j], ref, out * es) != 0)
			FAIL("%s (seq %u): result differs from the reference (first element %Lg, expected %Lg)", what,
			     sq, out ? get(t, r[j], 0) : 0.0L, out ? get(t, ref, 0) : 0.0L);
	}
	for (int j = 0; j < reps; j++) {
		mem_put(F, s[j], alloc);
		mem_put(F, r[j], alloc);
	}
	mem_put(F, ref, 0);
	*seq += (uint32_t)reps;
}

/* bcast of n bytes from root, every mode but in place (there is none). */
static void bcast_one(size_t n, int mode, uint32_t root, uint32_t *seq)
{
	int alloc = mode == 1;
	uint8_t *b = mem_get(F, n, alloc);
	char what[64];

	for (size_t i = 0; i < n; i++)
		b[i] = me == root ? pattern_byte(root, 0, *seq, (uint32_t)i) : 0xee;
	snprintf(what, sizeof(what), "bcast of %zu (mode %d, root %u)", n, mode, root);
	ok(what, ferry_bcast(F, b, n, root));
	for (size_t i = 0; i < n; i++)
		if (b[i] != pattern_byte(root, 0, *seq, (uint32_t)i))
			FAIL("%s: byte %zu is %u", what, i, b[i]);
	mem_put(F, b, alloc);
	(*seq)++;
}

/* allgather (v: allgatherv with uneven counts, reverse order, gaps) of
 * blocks of n bytes. */
static void allgather_one(int v, size_t n, int mode, uint32_t *seq)
{
	int alloc = mode == 1, in_place = mode == 2;
	size_t cnt[1024], dis[1024], ext = 0, off = 0;
	uint8_t *s, *r;
	char what[64];

	if (P > 1024)
		FAIL("too many ranks");
	for (uint32_t q = P; q-- > 0;) {
		cnt[q] = v ? (q % 3 == 1 ? 0 : n + q % 5) : n;
		dis[q] = v ? off + 8 : q * n;
		off = dis[q] + cnt[q];
	}
	for (uint32_t q = 0; q < P; q++)
		ext = dis[q] + cnt[q] > ext ? dis[q] + cnt[q] : ext;
	s = mem_get(F, cnt[me], alloc);
	r = mem_get(F, ext, alloc);
	memset(r, 0xee, ext);
	for (size_t i = 0; i < cnt[me]; i++)
		(in_place ? r + dis[me] : s)[i] = pattern_byte(me, 1, *seq, (uint32_t)i);
	snprintf(what, sizeof(what), "allgather%s of %zu (mode %d)", v ? "v" : "", n, mode);
	ok(what, v ? ferry_allgatherv(F, in_place ? FERRY_IN_PLACE : s, cnt[me], r, cnt, dis)
		   : ferry_allgather(F, in_place ? FERRY_IN_PLACE : s, r, n));
	for (size_t i = 0; i < ext; i++) {
		int want = 0xee;

		for (uint32_t q = 0; q < P; q++)
			if (i >= dis[q] && i < dis[q] + cnt[q])
				want = pattern_byte(q, 1, *seq, (uint32_t)(i - dis[q]));
		if (r[i] != want)
			FAIL("%s: byte %zu is %u, not %u", what, i, r[i], want);
	}
	mem_put(F, s, alloc);
	mem_put(F, r, alloc);
	(*seq)++;
}

/* Floating-point results agree bit for bit: an allreduce of thirds (not
 * exact), whose result every rank sends to every other. */
static void same_bits(int t, uint32_t *seq)
{
	size_t n = 64, es = tsize[t];
	uint8_t *s = mem_get(F, n * es, 0), *r = mem_get(F, n * es, 0), *all = mem_get(F, n * es * P, 0);

	for (size_t i = 0; i < n; i++)
		put(t, s, i, (long double)(1 + me + i) / 3.0L);
	ok("allreduce of thirds", ferry_allreduce(F, s, r, n, t, FERRY_SUM));
	ok("allgather of the results", ferry_allgather(F, r, all, n * es));
	for (uint32_t q = 0; q < P; q++)
		if (memcmp(all + q * n * es, r, n * es) != 0)
			FAIL("allreduce of type %d: rank %u's result differs from mine in its bits", t, q);
	free(s);
	free(r);
	free(all);
	*seq += 2;
}

/* --mismatch: see the top of the file. */
static int mismatch(const char *how, uint32_t mrank)
{
	int32_t in[128] = { 0 }, out[128];
	int odd = me == mrank, ret;
	double t0 = now_s();

	if (!strcmp(how, "type"))
		ret = ferry_allreduce(F, in, out, 8, odd ? FERRY_UINT32 : FERRY_INT32, FERRY_SUM);
	else if (!strcmp(how, "op"))
		ret = ferry_allreduce(F, in, out, 8, FERRY_INT32, odd ? FERRY_MAX : FERRY_SUM);
	else if (!strcmp(how, "count"))
		ret = ferry_allreduce(F, in, out, odd ? 9 : 8, FERRY_INT32, FERRY_SUM);
	else if (!strcmp(how, "root"))
		ret = ferry_reduce(F, in, out, 8, FERRY_INT32, FERRY_SUM, odd ? mrank : 0);
	else if (!strcmp(how, "strategy"))
		ret = ferry_coll_strategy(F, "allreduce", odd ? "orth" : "single") ?:
		      ferry_allreduce(F, in, out, 8, FERRY_INT32, FERRY_SUM);
	else if (!strcmp(how, "rscounts")) {
		size_t c[64];

		for (uint32_t r = 0; r < P && r < 64; r++)
			c[r] = 1 + r % 2;
		if (odd && P > 1) {
			c[0] = 2;       /* (the same total) */
			c[1] = 1;
		}
		ret = P > 64 ? -E2BIG : ferry_reduce_scatter(F, in, out, c, FERRY_INT32, FERRY_SUM);
	} else
		return 2;
	printf("rank %u mismatch: %s: %s (%.1f s)\n", me, ret < 0 ? ferry_strerror(ret) : "none",
	       ret < 0 ? ferry_last_error() : "it succeeded", now_s() - t0);
	fflush(stdout);
	ferry_close(F);
	return ret < 0 && now_s() - t0 < 20 ? 0 : 1;
}

static int want_op(const char *list, const char *name)
{
	size_t l = strlen(name);

	for (const char *p = list; p && *p;) {
		if (!strncmp(p, name, l) && (p[l] == ',' || !p[l]))
			return 1;
		p = strchr(p, ',');
		p = p ? p + 1 : NULL;
	}
	return !strcmp(list, "all");
}

static void battery(const long *counts, int nc, const char *list, int all_pairs, uint32_t *seqp);

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "job", required_argument, NULL, 'j' }, { "rank", required_argument, NULL, 'r' },
		{ "size", required_argument, NULL, 'p' }, { "counts", required_argument, NULL, 'c' },
		{ "strategy", required_argument, NULL, 'S' }, { "ops", required_argument, NULL, 'o' },
		{ "pairs", required_argument, NULL, 'a' }, { "mismatch", required_argument, NULL, 'X' },
		{ "mismatch-rank", required_argument, NULL, 'M' }, { "split", no_argument, NULL, 's' },
		{ "die-rank", required_argument, NULL, 'd' }, { "die-after", required_argument, NULL, 'D' },
		{ "linger", required_argument, NULL, 'l' },
		{ NULL, 0, NULL, 0 },
	};
	struct ferry_opts fo = { 0 };
	long counts[16] = { 0, 1, 7, 1000 };
	int nc = 4, opt, ret, all_pairs = 0, split = 0;
	long linger = 0;
	const char *strategy = NULL, *list = "all", *mis = NULL;
	uint32_t mrank = 1;
	uint32_t seq = 1;

	while ((opt = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (opt) {
		case 'j': fo.job = optarg; break;
		case 'r': fo.rank = (int)arg_long("--rank", optarg); break;
		case 'p': fo.size = (int)arg_long("--size", optarg); break;
		case 'S': strategy = optarg; break;
		case 'o': list = optarg; break;
		case 'a': all_pairs = !strcmp(optarg, "all"); break;
		case 'X': mis = optarg; break;
		case 'M': mrank = (uint32_t)arg_long("--mismatch-rank", optarg); break;
		case 's': split = 1; break;
		case 'd': die_rank = (uint32_t)arg_long("--die-rank", optarg); break;
		case 'D': die_after = arg_long("--die-after", optarg); break;
		case 'l': linger = arg_long("--linger", optarg); break;
		case 'c': nc = arg_longs("--counts", optarg, counts, 16); break;
		default: return 2;
		}
	}
	me = (uint32_t)fo.rank;
	P = (uint32_t)fo.size;
	if ((ret = ferry_open(&F, &fo)) < 0) {
		fprintf(stderr, "ferry_open: %s: %s\n", ferry_strerror(ret), ferry_last_error());
		return 1;
	}
	if (mis)
		return mismatch(mis, mrank);
	if (strategy) {
		/* every operation whose algorithms include it */
		static const char *const all[] = { "bcast", "reduce", "allreduce", "allgather", "allgatherv",
						   "reduce_scatter_block", "reduce_scatter", "scan", "exscan" };
		int set = 0;

		for (size_t k = 0; k < sizeof(all) / sizeof(all[0]); k++)
			set += ferry_coll_strategy(F, all[k], strategy) == 0;
		if (!set)
			FAIL("no operation has an algorithm %s", strategy);
	}
	/* misuse, refused before anything is posted */
	if ((ret = ferry_allreduce(F, NULL, NULL, 1, FERRY_DOUBLE, FERRY_BAND)) != -EINVAL)
		FAIL("band of doubles: %d, not -EINVAL", ret);
	if ((ret = ferry_bcast(F, NULL, 0, P)) != -EINVAL)
		FAIL("a root out of range: %d, not -EINVAL", ret);
	if (P > 1 && (ret = ferry_reduce(F, FERRY_IN_PLACE, NULL, 1, FERRY_INT32, FERRY_SUM, me == 0 ? 1 : 0)) != -EINVAL)
		FAIL("FERRY_IN_PLACE at a rank that is not the root: %d, not -EINVAL", ret);
	battery(counts, nc, list, all_pairs, &seq);
	if (split) {
		ferry_t *job = F, *sub = NULL;

		ok("ferry_split", ferry_split(job, (int)(me % 2), (int)(P - me), &sub));
		F = sub;
		me = (uint32_t)ferry_rank(sub);
		P = (uint32_t)ferry_size(sub);
		for (int c = 0; c < nc; c++)
			counts[c] = counts[c] > 7 ? 7 : counts[c];
		battery(counts, nc, list, 0, &seq);
		ok("ferry_close (group)", ferry_close(sub));
		F = job;
		me = (uint32_t)fo.rank;
		P = (uint32_t)fo.size;
	}
	printf("rank %u ok: %ld operations\n", me, ops);
	fflush(stdout);
	if (linger)
		usleep((useconds_t)linger * 1000);
	ok("ferry_close", ferry_close(F));
	return 0;
}

static void battery(const long *counts, int nc, const char *list, int all_pairs, uint32_t *seqp)
{
	static const int some[][2] = { { FERRY_INT32, FERRY_SUM }, { FERRY_DOUBLE, FERRY_MAX },
				       { FERRY_UINT8, FERRY_BXOR }, { FERRY_FLOAT, FERRY_PROD },
				       { FERRY_INT16, FERRY_LAND } };
	uint32_t seq = *seqp;

	for (int c = 0; c < nc; c++) {
		size_t n = (size_t)counts[c];
		uint32_t roots[3] = { 0, P - 1, P / 2 };

		for (int mode = 0; mode < 4; mode++) {
			for (int k = 0; k < K_REDUCTIONS; k++) {
				if (!want_op(list, kname[k]))
					continue;
				for (int t = 0; t <= FERRY_DOUBLE; t++)
					for (int op = 0; op <= FERRY_LXOR; op++) {
						int in_some = 0;

						for (size_t q = 0; q < sizeof(some) / sizeof(some[0]); q++)
							in_some |= some[q][0] == t && some[q][1] == op;
						if (!pair_ok(t, op) || !(in_some || (all_pairs && n == 7 && mode == 0)))
							continue;
						red_one(k, t, op, n, mode, roots[(t + op + mode) % 3], &seq);
					}
			}
			if (mode < 2 && want_op(list, "bcast"))
				for (int q = 0; q < 3; q++)
					bcast_one(n, mode, roots[q], &seq);
			if (mode < 3 && want_op(list, "allgather"))
				allgather_one(0, n, mode, &seq);
			if (mode < 3 && want_op(list, "allgatherv"))
				allgather_one(1, n, mode, &seq);
		}
	}
	if (want_op(list, "allreduce")) {
		same_bits(FERRY_FLOAT, &seq);
		same_bits(FERRY_DOUBLE, &seq);
	}
	*seqp = seq;
}
