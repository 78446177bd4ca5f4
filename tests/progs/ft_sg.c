/* tests/progs/ft_sg.c - scatter, scatterv, gather and gatherv run by the
 * daemons, every byte checked against what the test computes itself.
 *
 *   ft_sg --job J --rank R --size P [--blocks B[,B...]] [--strategy S] [--mismatch ...]
 *
 * For roots 0, P-1 and P/2, and each block size B (default 0,1,100,4096):
 * scatter and gather of ordinary buffers (staged), of ferry_alloc memory
 * (in place), with FERRY_IN_PLACE at the root, non-blocking (two posted
 * before either is waited for); scatterv and gatherv with uneven counts
 * (zeros among them) and displacements in reverse rank order with gaps,
 * which must stay as they were in the root's receive buffer.  Then the
 * same on the groups of a split (rank % 2) and on a group of one rank.
 * Buffers a rank does not use are NULL.  --strategy forces scatter's and
 * gather's algorithm (direct, opt, sdf) on the job's handle (the groups
 * choose for themselves); --job-only runs the job's battery alone (no
 * split, no barrier: no other collective).
 *
 * --mismatch: rank M (--mismatch-rank, default 1) names itself the root
 * in a scatter (root) or a gather (groot), or rank 2 (root2: the others
 * name 0; with 3 ranks or more), expects one byte more in a scatterv than
 * the root sends it (count), sends one more in a gatherv (gcount), or
 * gathers where the others scatter (kind).  Every rank must end within
 * 20 s; with root, root2 and kind every rank with -EINVAL or -EPROTO (a
 * message its node's schedule does not have: the nodes' schedules differ),
 * nothing having been
 * delivered anywhere; with groot, count and gcount at least the root (0)
 * or rank M (whichever receives what disagrees), the others may have
 * finished (their blocks were right: sg_sched.h).  The ranks linger 2 s
 * after the operation, so that a failure is told as it happened, not as a
 * rank that left.  Prints "rank R mismatch: ..." and exits 0 if so.  Otherwise prints "rank R ok: N operations" and exits 0; 1
 * on the first error.
 *
 * --late N,B,MS: only N gathers of B-byte blocks (ferry_alloc memory) to
 * the last rank, each rank posting all N at once (ferry_igather), the
 * root MS ms after the others: their blocks reach the root's node before
 * it started the operations, N (P - 1) B bytes of them, which it holds
 * back once they are too many (daemon/coll/coll.c, "Holding back").
 * --linger MS waits that long before ferry_close (for the test to read
 * ferryctl stats).
 */
#include "common.h"

#include <errno.h>
#include <getopt.h>
#include <string.h>
#include <unistd.h>

static uint32_t me, P, mis_rank = 1;
static long ops;

#define FAIL(...)                                                                     \
	do {                                                                          \
		fprintf(stderr, "rank %u: ", me);                                     \
		fprintf(stderr, __VA_ARGS__);                                         \
		fprintf(stderr, "\n");                                                \
		exit(1);                                                              \
	} while (0)

static uint8_t byte_of(uint32_t from, uint32_t to, uint32_t seq, size_t i)
{
	return (uint8_t)(from * 31 + to * 7 + seq * 13 + i * 3 + 1);
}

/* Bytes of rank r's block in a v operation: uneven, zeros among them. */
static size_t vcount(uint32_t r, size_t b)
{
	return r % 3 == 1 ? 0 : b + (r * 7) % 13;
}

static void check(const char *what, const uint8_t *p, size_t len, uint32_t from, uint32_t to, uint32_t seq)
{
	for (size_t i = 0; i < len; i++)
		if (p[i] != byte_of(from, to, seq, i))
			FAIL("%s (seq %u): byte %zu of the block from rank %u to rank %u is %u, not %u", what, seq, i,
			     from, to, p[i], byte_of(from, to, seq, i));
}

static void ok(const char *what, int ret)
{
	if (ret < 0)
		FAIL("%s: %s: %s", what, ferry_strerror(ret), ferry_last_error());
	ops++;
}

/* Scatter and gather of block bytes from root on f (rank r of n), modes:
 * 0 staged, 1 ferry_alloc, 2 FERRY_IN_PLACE at the root, 3 non-blocking. */
static void fixed(ferry_t *f, uint32_t r, uint32_t n, uint32_t root, size_t block, int mode, uint32_t seq)
{
	int alloc = mode == 1, in_place = mode == 2, isroot = r == root;
	uint8_t *all = isroot ? mem_get(f, block * n, alloc) : NULL, *own = mem_get(f, block, alloc);
	ferry_req_t *req[2];

	/* scatter */
	if (isroot)
		for (uint32_t d = 0; d < n; d++)
			for (size_t i = 0; i < block; i++)
				all[d * block + i] = byte_of(root, d, seq, i);
	memset(own, 0xee, block);
	if (mode == 3) {
		ok("ferry_iscatter", ferry_iscatter(f, all, own, block, root, &req[0]));
	} else {
		ok("ferry_scatter", ferry_scatter(f, all, isroot && in_place ? FERRY_IN_PLACE : own, block, root));
	}
	/* gather (non-blocking: posted before the scatter is waited for) */
	if (mode != 3) {
		if (isroot && in_place)
			check("scatter in place: the root's own block", all + r * block, block, root, r, seq);
		else
			check("scatter", own, block, root, r, seq);
	}
	if (mode == 3) {
		/* the gather posted before the scatter is waited for */
		uint8_t *own2 = mem_get(f, block, 0), *all2 = isroot ? mem_get(f, block * n, 0) : NULL;

		for (size_t i = 0; i < block; i++)
			own2[i] = byte_of(r, root, seq + 1, i);
		if (isroot)
			memset(all2, 0xee, block * n);
		ok("ferry_igather", ferry_igather(f, own2, all2, block, root, &req[1]));
		ok("ferry_wait (igather)", ferry_wait(&req[1]));
		ok("ferry_wait (iscatter)", ferry_wait(&req[0]));
		check("iscatter", own, block, root, r, seq);
		if (isroot)
			for (uint32_t s = 0; s < n; s++)
				check("igather", all2 + s * block, block, s, root, seq + 1);
		free(own2);
		free(all2);
	} else {
		for (size_t i = 0; i < block; i++)
			own[i] = byte_of(r, root, seq + 1, i);
		if (isroot) {
			memset(all, 0xee, block * n);
			if (in_place)
				memcpy(all + r * block, own, block);
		}
		ok("ferry_gather", ferry_gather(f, isroot && in_place ? FERRY_IN_PLACE : own, all, block, root));
		if (isroot)
			for (uint32_t s = 0; s < n; s++)
				check("gather", all + s * block, block, s, root, seq + 1);
	}
	if (all)
		mem_put(f, all, alloc);
	mem_put(f, own, alloc);
}

/* --late: see the top of the file. */
static void late(ferry_t *f, long n, size_t block, long ms)
{
	uint32_t root = P - 1;
	uint8_t *own[64], *all[64] = { NULL };
	ferry_req_t *req[64];

	if (n < 1 || n > 64)
		FAIL("--late: 1 to 64 operations");
	for (long k = 0; k < n; k++) {
		own[k] = mem_get(f, block, 1);
		for (size_t i = 0; i < block; i++)
			own[k][i] = byte_of(me, root, (uint32_t)k, i);
		if (me == root) {
			all[k] = mem_get(f, block * P, 1);
			memset(all[k], 0xee, block * P);
		}
	}
	if (me == root)
		usleep((useconds_t)ms * 1000);
	for (long k = 0; k < n; k++)
		ok("ferry_igather", ferry_igather(f, own[k], all[k], block, root, &req[k]));
	for (long k = 0; k < n; k++)
		ok("ferry_wait (igather)", ferry_wait(&req[k]));
	for (long k = 0; k < n; k++) {
		for (uint32_t s = 0; me == root && s < P; s++)
			check("late igather", all[k] + s * block, block, s, root, (uint32_t)k);
		if (all[k])
			mem_put(f, all[k], 1);
		mem_put(f, own[k], 1);
	}
}

/* Scatterv and gatherv: counts vcount, displacements in reverse rank order
 * with an 8-byte gap before each block (0xee, which must stay). */
static void vary(ferry_t *f, uint32_t r, uint32_t n, uint32_t root, size_t b, int alloc, uint32_t seq)
{
	size_t *cnt = calloc(n, sizeof(size_t)), *dis = calloc(n, sizeof(size_t)), ext = 0;
	int isroot = r == root;
	uint8_t *all, *own;

	for (uint32_t k = n; k-- > 0;) {
		ext += 8;
		cnt[k] = vcount(k, b);
		dis[k] = ext;
		ext += cnt[k];
	}
	all = isroot ? mem_get(f, ext, alloc) : NULL;
	own = mem_get(f, cnt[r], alloc);
	if (isroot) {
		memset(all, 0xee, ext);
		for (uint32_t d = 0; d < n; d++)
			for (size_t i = 0; i < cnt[d]; i++)
				all[dis[d] + i] = byte_of(root, d, seq, i);
	}
	memset(own, 0xee, cnt[r]);
	ok("ferry_scatterv", ferry_scatterv(f, all, isroot ? cnt : NULL, isroot ? dis : NULL, own, cnt[r], root));
	check("scatterv", own, cnt[r], root, r, seq);
	for (size_t i = 0; i < cnt[r]; i++)
		own[i] = byte_of(r, root, seq + 1, i);
	if (isroot)
		memset(all, 0xee, ext);
	ok("ferry_gatherv", ferry_gatherv(f, own, cnt[r], all, isroot ? cnt : NULL, isroot ? dis : NULL, root));
	if (isroot)
		for (uint32_t s = 0; s < n; s++) {
			check("gatherv", all + dis[s], cnt[s], s, root, seq + 1);
			for (size_t i = 0; i < 8; i++)
				if (all[dis[s] - 8 + i] != 0xee)
					FAIL("gatherv wrote into the gap before rank %u's block", s);
		}
	if (all)
		mem_put(f, all, alloc);
	mem_put(f, own, alloc);
	free(cnt);
	free(dis);
}

static void battery(ferry_t *f, const long *blocks, int nb, uint32_t *seq)
{
	uint32_t r = (uint32_t)ferry_rank(f), n = (uint32_t)ferry_size(f);
	uint32_t roots[3] = { 0, n - 1, n / 2 };

	for (int k = 0; k < 3; k++) {
		if (k && (roots[k] == roots[0] || roots[k] == roots[k - 1]))
			continue;
		for (int i = 0; i < nb; i++) {
			for (int mode = 0; mode < 4; mode++) {
				fixed(f, r, n, roots[k], (size_t)blocks[i], mode, *seq);
				*seq += 2;
			}
			for (int alloc = 0; alloc < 2; alloc++) {
				vary(f, r, n, roots[k], (size_t)blocks[i], alloc, *seq);
				*seq += 2;
			}
		}
	}
}

static int mismatch(ferry_t *f, const char *how)
{
	uint8_t all[64 * 16] = { 0 }, own[16] = { 0 };
	size_t cnt[64], dis[64];
	uint32_t root = 0;
	double t0 = now_s();
	int ret, bad;

	if (P > 64)
		return 2;
	for (uint32_t k = 0; k < P; k++) {
		cnt[k] = 8;
		dis[k] = 16 * k;
	}
	if (!strcmp(how, "root"))
		ret = ferry_scatter(f, all, own, 8, me == mis_rank ? me : root);
	else if (!strcmp(how, "root2"))
		ret = ferry_scatter(f, all, own, 8, me == mis_rank ? 2 : root);
	else if (!strcmp(how, "groot"))
		ret = ferry_gather(f, own, all, 8, me == mis_rank ? me : root);
	else if (!strcmp(how, "count"))
		ret = ferry_scatterv(f, all, cnt, dis, own, me == mis_rank ? 9 : 8, root);
	else if (!strcmp(how, "gcount"))
		ret = ferry_gatherv(f, own, me == mis_rank ? 9 : 8, all, cnt, dis, root);
	else if (!strcmp(how, "kind"))
		ret = me == mis_rank ? ferry_gather(f, own, all, 8, root) : ferry_scatter(f, all, own, 8, root);
	else
		return 2;
	usleep(2000 * 1000);
	printf("rank %u mismatch: %s: %s (%.1f s)\n", me, ret < 0 ? ferry_strerror(ret) : "none",
	       ret < 0 ? ferry_last_error() : "it succeeded", now_s() - t0);
	fflush(stdout);
	ferry_close(f);         /* (the job failed: it says so) */
	if (now_s() - t0 >= 20)
		return 1;
	/* -EINVAL where a daemon saw its ranks disagree or a size differ,
	 * -EPROTO where a node got a message its schedule does not have
	 * (the nodes' schedules differ: exec.c) */
	bad = ret == -EINVAL || ret == -EPROTO;
	if (!strcmp(how, "root") || !strcmp(how, "root2") || !strcmp(how, "kind") ||
	    (!strcmp(how, "count") ? me == mis_rank : me == root))
		return bad ? 0 : 1;
	return bad || ret == 0 ? 0 : 1;
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "job", required_argument, NULL, 'j' }, { "rank", required_argument, NULL, 'r' },
		{ "size", required_argument, NULL, 'p' }, { "blocks", required_argument, NULL, 'b' },
		{ "mismatch", required_argument, NULL, 'X' }, { "mismatch-rank", required_argument, NULL, 'M' },
		{ "strategy", required_argument, NULL, 'S' }, { "job-only", no_argument, NULL, 'J' },
		{ "late", required_argument, NULL, 'L' }, { "linger", required_argument, NULL, 'l' },
		{ NULL, 0, NULL, 0 },
	};
	struct ferry_opts fo = { 0 };
	long blocks[16] = { 0, 1, 100, 4096 };
	int nb = 4, opt, ret, job_only = 0;
	long late_n = 0, late_b = 0, late_ms = 0, linger = 0;
	const char *mis = NULL, *strategy = NULL;
	uint32_t seq = 1;
	ferry_t *f, *sub = NULL, *one = NULL;

	while ((opt = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (opt) {
		case 'j': fo.job = optarg; break;
		case 'r': fo.rank = (int)arg_long("--rank", optarg); break;
		case 'p': fo.size = (int)arg_long("--size", optarg); break;
		case 'X': mis = optarg; break;
		case 'S': strategy = optarg; break;
		case 'J': job_only = 1; break;
		case 'M': mis_rank = (uint32_t)arg_long("--mismatch-rank", optarg); break;
		case 'l': linger = arg_long("--linger", optarg); break;
		case 'L':
			if (sscanf(optarg, "%ld,%ld,%ld", &late_n, &late_b, &late_ms) != 3 || late_b < 0 || late_ms < 0)
				FAIL("--late N,B,MS");
			break;
		case 'b': nb = arg_longs("--blocks", optarg, blocks, 16); break;
		default: return 2;
		}
	}
	me = (uint32_t)fo.rank;
	P = (uint32_t)fo.size;
	if ((ret = ferry_open(&f, &fo)) < 0) {
		fprintf(stderr, "ferry_open: %s: %s\n", ferry_strerror(ret), ferry_last_error());
		return 1;
	}
	if (mis)
		return mismatch(f, mis);
	if (late_n) {
		late(f, late_n, (size_t)late_b, late_ms);
		printf("rank %u ok: %ld operations\n", me, ops);
		fflush(stdout);
		if (linger)
			usleep((useconds_t)linger * 1000);
		ok("ferry_close", ferry_close(f));
		return 0;
	}
	if (strategy && ((ret = ferry_coll_strategy(f, "scatter", strategy)) < 0 ||
			 (ret = ferry_coll_strategy(f, "gatherv", strategy)) < 0))
		FAIL("ferry_coll_strategy(%s): %s: %s", strategy, ferry_strerror(ret), ferry_last_error());
	/* misuse, refused before anything is posted */
	if ((ret = ferry_scatter(f, NULL, NULL, 8, P)) != -EINVAL)
		FAIL("a root out of range: %d, not -EINVAL", ret);
	if (P > 1 && (ret = ferry_gather(f, FERRY_IN_PLACE, NULL, 8, me == 0 ? 1 : 0)) != -EINVAL)
		FAIL("FERRY_IN_PLACE at a rank that is not the root: %d, not -EINVAL", ret);
	battery(f, blocks, nb, &seq);
	if (job_only) {
		printf("rank %u ok: %ld operations\n", me, ops);
		fflush(stdout);
		ok("ferry_close", ferry_close(f));
		return 0;
	}
	ok("ferry_split", ferry_split(f, (int)(me % 2), (int)(P - me), &sub));
	battery(sub, blocks, nb < 3 ? nb : 3, &seq);
	ok("ferry_split (one rank each)", ferry_split(f, (int)me, 0, &one));
	battery(one, blocks, nb < 3 ? nb : 3, &seq);
	ok("ferry_close (group)", ferry_close(sub));
	ok("ferry_close (group of one)", ferry_close(one));
	ok("ferry_barrier", ferry_barrier(f));
	printf("rank %u ok: %ld operations\n", me, ops);
	fflush(stdout);
	ok("ferry_close", ferry_close(f));
	return 0;
}
