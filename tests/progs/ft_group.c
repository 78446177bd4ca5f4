/* tests/progs/ft_group.c - groups (ferry_split) and locality queries,
 * checked from the outside.
 *
 *   ft_group --job J --rank R --size P [--strategy NAME] [--leave L]
 *            [--rounds N]
 *
 * Every rank runs the same scenario, checking every result against what it
 * computes itself from the split's arguments (never from the library's
 * answer):
 *   layout   ferry_node_of for every rank against the node ids the ranks
 *            report themselves (an all-to-all of 4-byte blocks), and
 *            ferry_local_ranks against them;
 *   parity   color rank % 2, key P - rank (reverse order): the size, the
 *            rank, and all-to-alls of 0, 1, 100 and 4096-byte blocks whose
 *            bytes name the sender's and receiver's job ranks, N rounds;
 *   node     a group per node (color: the node id): its size is the local
 *            ranks' count, all of them local;
 *   single   color rank: a group of one rank, an all-to-all with itself;
 *   none     rank 0 passes color -1 (no group), the others form one;
 *   nested   the parity group split again by its own ranks' parity: an
 *            all-to-all of job ranks says who is in it;
 *   overlap  a non-blocking all-to-all on the job and one on the parity
 *            group, and a barrier on the node group, at once, waited for
 *            in reverse order;
 *   misuse   items on a group's handle say -EOPNOTSUPP; closing the job's
 *            handle with groups open says -EBUSY.
 * --strategy forces the all-to-all's algorithm on every handle.  With
 * --leave L, rank L closes its parity group's handle and the others then
 * post a barrier on theirs, which must fail: they print "rank R group
 * barrier: ERRNAME: message" and exit 3.
 *
 * --hold N --hold-until PATH: instead of all that, N splits whose groups
 * stay open and idle until PATH exists, then closed (hold_groups).
 *
 * Prints "rank R ok" and exits 0; "rank R FAIL: what" and exits 1.
 */
#include "common.h"

#include <errno.h>
#include <getopt.h>
#include <unistd.h>

static int me_job;

/* --hold N --hold-until PATH: N splits (color 0) whose groups stay open,
 * idle, until PATH exists (at most 120 s); then they are closed.  Prints
 * "rank R holds N groups" once they are made. */
static int hold_groups(ferry_t *f, long n, const char *path)
{
	ferry_t **subs = calloc((size_t)n, sizeof(*subs));
	int ret = -ENOMEM;

	for (long i = 0; i < n; i++)
		if (!subs || (ret = ferry_split(f, 0, 0, &subs[i])) < 0 || !subs[i]) {
			fprintf(stderr, "rank %d: split %ld: %s: %s\n", me_job, i, ferry_strerror(ret),
				ferry_last_error());
			return 1;
		}
	printf("rank %d holds %ld groups\n", me_job, n);
	fflush(stdout);
	for (int t = 0; t < 2400 && path && access(path, F_OK) != 0; t++)
		usleep(50 * 1000);
	for (long i = 0; i < n; i++)
		if ((ret = ferry_close(subs[i])) < 0) {
			fprintf(stderr, "rank %d: closing group %ld: %s\n", me_job, i, ferry_strerror(ret));
			return 1;
		}
	free(subs);
	if ((ret = ferry_barrier(f)) < 0 || (ret = ferry_close(f)) < 0) {
		fprintf(stderr, "rank %d: after the groups: %s\n", me_job, ferry_strerror(ret));
		return 1;
	}
	printf("rank %d ok\n", me_job);
	return 0;
}

#define FAIL(...)                                                                       \
	do {                                                                            \
		printf("rank %d FAIL: ", me_job);                                       \
		printf(__VA_ARGS__);                                                    \
		printf(" (%s)\n", ferry_last_error());                                  \
		exit(1);                                                                \
	} while (0)

static const char *strategy;

/* The job ranks of the group of `color` out of parent (pjob[i]: the job rank
 * of the parent's rank i, n of them; colors and keys by parent rank),
 * ordered by (key, parent rank): into out, returns how many. */
static uint32_t expect_members(const uint32_t *pjob, uint32_t n, const int *colors, const int *keys, int color,
			       uint32_t *out)
{
	uint32_t k = 0;

	for (uint32_t i = 0; i < n; i++) {
		if (colors[i] != color)
			continue;
		/* insertion by (key, parent rank) */
		uint32_t at = k;

		while (at > 0) {
			uint32_t prev = out[at - 1], pi = 0;

			while (pjob[pi] != prev)
				pi++;
			if (keys[pi] < keys[i] || (keys[pi] == keys[i] && pi < i))
				break;
			out[at] = out[at - 1];
			at--;
		}
		out[at] = pjob[i];
		k++;
	}
	return k;
}

static uint8_t byte_of(uint32_t src_job, uint32_t dst_job, uint32_t round, size_t i)
{
	return (uint8_t)(src_job * 37u + dst_job * 11u + round * 5u + (uint32_t)i * 3u + 1u);
}

/* An all-to-all of block bytes on g, whose job ranks by group rank are
 * members (n of them; this rank is g's rank gr), checked byte by byte. */
static void a2a_check(ferry_t *g, const uint32_t *members, uint32_t n, uint32_t gr, size_t block, uint32_t round,
		      const char *what)
{
	uint8_t *s = calloc(1, block * n + 1), *r = malloc(block * n + 1);
	int ret;

	if (!s || !r)
		FAIL("out of memory");
	for (uint32_t d = 0; d < n; d++)
		for (size_t i = 0; i < block; i++)
			s[d * block + i] = byte_of(members[gr], members[d], round, i);
	memset(r, 0xee, block * n + 1);
	if ((ret = ferry_alltoall(g, s, r, block)) < 0)
		FAIL("%s: all-to-all of %zu bytes: %s", what, block, ferry_strerror(ret));
	for (uint32_t src = 0; src < n; src++)
		for (size_t i = 0; i < block; i++)
			if (r[src * block + i] != byte_of(members[src], members[gr], round, i))
				FAIL("%s: all-to-all of %zu bytes: byte %zu from group rank %u (job rank %u) is wrong",
				     what, block, i, src, members[src]);
	free(s);
	free(r);
}

/* ferry_split(parent, color, key) and the checks every split gets: NULL
 * for color < 0, else the size and rank that members (the expected group,
 * n ranks) say. */
static ferry_t *split_check(ferry_t *parent, int color, int key, const uint32_t *members, uint32_t n,
			    const char *what)
{
	ferry_t *g = NULL;
	int ret = ferry_split(parent, color, key, &g);

	if (ret < 0)
		FAIL("%s: ferry_split: %s", what, ferry_strerror(ret));
	if (color < 0) {
		if (g)
			FAIL("%s: color < 0 gave a handle", what);
		return NULL;
	}
	if (!g)
		FAIL("%s: no handle", what);
	if (ferry_size(g) != (int)n)
		FAIL("%s: size %d, expected %u", what, ferry_size(g), n);
	if ((uint32_t)ferry_rank(g) >= n || members[ferry_rank(g)] != (uint32_t)me_job)
		FAIL("%s: rank %d is not where the (key, rank) order puts job rank %d", what, ferry_rank(g), me_job);
	if (strategy && (ret = ferry_coll_strategy(g, "alltoall", strategy)) < 0)
		FAIL("%s: ferry_coll_strategy", what);
	return g;
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "job", required_argument, NULL, 'j' }, { "rank", required_argument, NULL, 'r' },
		{ "size", required_argument, NULL, 'p' }, { "strategy", required_argument, NULL, 'S' },
		{ "leave", required_argument, NULL, 'L' }, { "rounds", required_argument, NULL, 'n' },
		{ "hold", required_argument, NULL, 'H' }, { "hold-until", required_argument, NULL, 'U' },
		{ NULL, 0, NULL, 0 },
	};
	struct ferry_opts fo = { 0 };
	long leave = -1, rounds = 2, hold = 0;
	const char *hold_until = NULL;
	int opt, ret;
	ferry_t *f, *par, *node, *one, *none, *nest;

	while ((opt = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (opt) {
		case 'j': fo.job = optarg; break;
		case 'r': fo.rank = (int)arg_long("--rank", optarg); break;
		case 'p': fo.size = (int)arg_long("--size", optarg); break;
		case 'S': strategy = optarg; break;
		case 'L': leave = arg_long("--leave", optarg); break;
		case 'n': rounds = arg_long("--rounds", optarg); break;
		case 'H': hold = arg_long("--hold", optarg); break;
		case 'U': hold_until = optarg; break;
		default: return 2;
		}
	}
	me_job = fo.rank;
	if ((ret = ferry_open(&f, &fo)) < 0) {
		fprintf(stderr, "ferry_open: %s: %s\n", ferry_strerror(ret), ferry_last_error());
		return 1;
	}
	if (strategy && ferry_coll_strategy(f, "alltoall", strategy) < 0)
		FAIL("ferry_coll_strategy");
	printf("rank %d running\n", me_job);
	fflush(stdout);
	if (hold > 0)
		return hold_groups(f, hold, hold_until);

	uint32_t P = (uint32_t)fo.size, me = (uint32_t)fo.rank;
	uint32_t *all = malloc(P * sizeof(*all)), *exp = malloc(P * sizeof(*exp)), *node_of = malloc(P * 4);
	uint32_t *send = malloc(P * 4);
	int *colors = malloc(P * sizeof(int)), *keys = malloc(P * sizeof(int));

	for (uint32_t r = 0; r < P; r++)
		all[r] = r;

	/* layout: every rank says where it is */
	ret = ferry_node_of(f, me);
	if (ret < 0)
		FAIL("ferry_node_of(own rank): %s", ferry_strerror(ret));
	for (uint32_t r = 0; r < P; r++)
		send[r] = (uint32_t)ret;
	if ((ret = ferry_alltoall(f, send, node_of, 4)) < 0)
		FAIL("layout all-to-all: %s", ferry_strerror(ret));
	uint32_t nlocal = 0;

	for (uint32_t r = 0; r < P; r++) {
		if ((ret = ferry_node_of(f, r)) < 0 || (uint32_t)ret != node_of[r])
			FAIL("ferry_node_of(%u) = %d, but the rank says node %u", r, ret, node_of[r]);
		nlocal += node_of[r] == node_of[me];
	}
	if (ferry_node_of(f, P) != -EINVAL)
		FAIL("ferry_node_of(size) is not -EINVAL");
	{
		uint32_t *loc = malloc(P * 4);
		int n = ferry_local_ranks(f, loc, (int)P);

		if (n != (int)nlocal)
			FAIL("ferry_local_ranks says %d ranks here, the ranks say %u", n, nlocal);
		for (int i = 0; i < n; i++)
			if (node_of[loc[i]] != node_of[me] || (i > 0 && loc[i] <= loc[i - 1]))
				FAIL("ferry_local_ranks: rank %u is not here, or out of order", loc[i]);
		if (ferry_local_ranks(f, NULL, 0) != (int)nlocal || ferry_local_ranks(f, loc, 1) != (int)nlocal)
			FAIL("ferry_local_ranks with less room does not count them all");
		free(loc);
	}

	/* parity, in reverse rank order */
	for (uint32_t r = 0; r < P; r++) {
		colors[r] = (int)(r % 2);
		keys[r] = (int)(P - r);
	}
	uint32_t npar = expect_members(all, P, colors, keys, colors[me], exp);
	uint32_t *par_m = malloc(npar * 4);

	memcpy(par_m, exp, npar * 4);
	par = split_check(f, colors[me], keys[me], par_m, npar, "parity");
	for (long k = 0; k < rounds; k++) {
		static const size_t blocks[] = { 0, 1, 100, 4096 };

		for (size_t b = 0; b < sizeof(blocks) / sizeof(blocks[0]); b++)
			a2a_check(par, par_m, npar, (uint32_t)ferry_rank(par), blocks[b], (uint32_t)k, "parity");
		if ((ret = ferry_barrier(par)) < 0)
			FAIL("parity barrier: %s", ferry_strerror(ret));
	}
	if ((ret = ferry_node_of(par, (uint32_t)ferry_rank(par))) != (int)node_of[me])
		FAIL("ferry_node_of on the group: %d, expected %u", ret, node_of[me]);

	/* a group per node */
	for (uint32_t r = 0; r < P; r++) {
		colors[r] = (int)node_of[r];
		keys[r] = 0;
	}
	uint32_t nnode = expect_members(all, P, colors, keys, colors[me], exp);
	uint32_t *node_m = malloc(nnode * 4);

	memcpy(node_m, exp, nnode * 4);
	node = split_check(f, colors[me], 0, node_m, nnode, "node");
	if (nnode != nlocal || ferry_local_ranks(node, NULL, 0) != (int)nnode)
		FAIL("node group: %u ranks, %u local, ferry_local_ranks says %d", nnode, nlocal,
		     ferry_local_ranks(node, NULL, 0));
	a2a_check(node, node_m, nnode, (uint32_t)ferry_rank(node), 100, 9, "node");

	/* a group of one */
	one = split_check(f, (int)me, 0, &me, 1, "single");
	a2a_check(one, &me, 1, 0, 8, 3, "single");
	if ((ret = ferry_barrier(one)) < 0)
		FAIL("single barrier: %s", ferry_strerror(ret));

	/* rank 0 in no group */
	for (uint32_t r = 0; r < P; r++) {
		colors[r] = r == 0 ? -1 : 5;
		keys[r] = 1;
	}
	uint32_t nnone = expect_members(all, P, colors, keys, 5, exp);
	uint32_t *none_m = malloc((nnone + 1) * 4);

	memcpy(none_m, exp, nnone * 4);
	none = split_check(f, colors[me], 1, none_m, nnone, "none");
	if (none)
		a2a_check(none, none_m, nnone, (uint32_t)ferry_rank(none), 1, 4, "none");

	/* nested: the parity group by its ranks' parity */
	uint32_t pr = (uint32_t)ferry_rank(par);
	int *pc = malloc(npar * sizeof(int)), *pk = malloc(npar * sizeof(int));

	for (uint32_t i = 0; i < npar; i++) {
		pc[i] = (int)(i % 2);
		pk[i] = 0;
	}
	uint32_t nnest = expect_members(par_m, npar, pc, pk, pc[pr], exp);
	uint32_t *nest_m = malloc(nnest * 4);

	memcpy(nest_m, exp, nnest * 4);
	nest = split_check(par, pc[pr], 0, nest_m, nnest, "nested");
	{
		uint32_t *js = malloc(nnest * 4), *jr = malloc(nnest * 4);

		for (uint32_t i = 0; i < nnest; i++)
			js[i] = me;
		if ((ret = ferry_alltoall(nest, js, jr, 4)) < 0)
			FAIL("nested all-to-all: %s", ferry_strerror(ret));
		for (uint32_t i = 0; i < nnest; i++)
			if (jr[i] != nest_m[i])
				FAIL("nested: group rank %u is job rank %u, expected %u", i, jr[i], nest_m[i]);
		free(js);
		free(jr);
	}

	/* overlap: the job's, the parity group's and the node group's at once */
	{
		size_t B = 64;
		uint8_t *js = malloc(B * P), *jr = malloc(B * P), *gs = malloc(B * npar), *gr = malloc(B * npar);
		ferry_req_t *req[3];

		for (uint32_t d = 0; d < P; d++)
			for (size_t i = 0; i < B; i++)
				js[d * B + i] = byte_of(me, d, 77, i);
		for (uint32_t d = 0; d < npar; d++)
			for (size_t i = 0; i < B; i++)
				gs[d * B + i] = byte_of(me, par_m[d], 78, i);
		if ((ret = ferry_ialltoall(f, js, jr, B, &req[0])) < 0 ||
		    (ret = ferry_ialltoall(par, gs, gr, B, &req[1])) < 0 || (ret = ferry_ibarrier(node, &req[2])) < 0)
			FAIL("overlap: posting: %s", ferry_strerror(ret));
		for (int i = 2; i >= 0; i--)
			if ((ret = ferry_wait(&req[i])) < 0)
				FAIL("overlap: request %d: %s", i, ferry_strerror(ret));
		for (uint32_t s = 0; s < P; s++)
			for (size_t i = 0; i < B; i++)
				if (jr[s * B + i] != byte_of(s, me, 77, i))
					FAIL("overlap: the job's all-to-all, byte %zu from %u", i, s);
		for (uint32_t s = 0; s < npar; s++)
			for (size_t i = 0; i < B; i++)
				if (gr[s * B + i] != byte_of(par_m[s], me, 78, i))
					FAIL("overlap: the group's all-to-all, byte %zu from group rank %u", i, s);
		free(js);
		free(jr);
		free(gs);
		free(gr);
	}

	/* misuse */
	{
		char c = 0;

		if ((ret = ferry_send(par, 0, 0, &c, 1)) != -EOPNOTSUPP)
			FAIL("ferry_send on a group's handle: %d, not -EOPNOTSUPP", ret);
		if ((ret = ferry_recv(par, NULL, 0, 0)) != -EOPNOTSUPP)
			FAIL("ferry_recv on a group's handle: %d, not -EOPNOTSUPP", ret);
		if ((ret = ferry_close(f)) != -EBUSY)
			FAIL("ferry_close of the job's handle with groups open: %d, not -EBUSY", ret);
	}

	if (leave >= 0) {
		/* everyone is done with the job's collectives before this */
		if ((ret = ferry_barrier(f)) < 0)
			FAIL("barrier before the leave: %s", ferry_strerror(ret));
		if (me == (uint32_t)leave) {
			if ((ret = ferry_close(par)) < 0)
				FAIL("leaving: %s", ferry_strerror(ret));
			par = NULL;
		} else if (par && (ret = ferry_barrier(par)) < 0) {
			printf("rank %d group barrier: %s: %s\n", me_job, ret == -EPIPE ? "EPIPE" : ferry_strerror(ret),
			       ferry_last_error());
			fflush(stdout);
			exit(3);
		}
	}
	ferry_t *subs[] = { nest, par, node, one, none };

	for (size_t i = 0; i < sizeof(subs) / sizeof(subs[0]); i++)
		if (subs[i] && (ret = ferry_close(subs[i])) < 0)
			FAIL("ferry_close of group handle %zu: %s", i, ferry_strerror(ret));
	if ((ret = ferry_close(f)) < 0)
		FAIL("ferry_close: %s", ferry_strerror(ret));
	free(all);
	free(exp);
	free(node_of);
	free(send);
	free(colors);
	free(keys);
	free(par_m);
	free(node_m);
	free(none_m);
	free(pc);
	free(pk);
	free(nest_m);
	printf("rank %d ok\n", me_job);
	return 0;
}
