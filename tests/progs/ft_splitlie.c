/* tests/progs/ft_splitlie.c - a split where one rank tells the others
 * different things (review F4): rank 0 sends rank r the color r % 2 (and
 * the key r) instead of one {color, key} for all.  ferryd takes a rank's
 * {color, key} once, from its first block (the one for rank 0), and sends
 * that to every rank, so every node makes the same groups whatever a client
 * writes: rank 0 is in color 0 everywhere, with key 0.
 *
 *   ft_splitlie --job J --rank R --size P
 *
 * Every rank splits by color R % 2, key R; rank 0 lies as above (through
 * libferry's own code, compiled in: client/coll.c, whose exchange is
 * static).  Then on each group a barrier and an all-to-all of 8-byte blocks
 * naming sender and receiver by job rank, checked against the members
 * every rank computes itself: {r : r % 2 == R % 2}, in rank order.
 * Prints "rank R ok" and exits 0; "rank R FAIL: what" and exits 1. */
#include "../../client/coll.c"

#include <getopt.h>
#include <stdio.h>

static int me;

#define FAIL(...)                                                       \
	do {                                                            \
		printf("rank %d FAIL: ", me);                           \
		printf(__VA_ARGS__);                                    \
		printf(" (%s)\n", ferry_last_error());                  \
		exit(1);                                                \
	} while (0)

/* Rank 0's split: block r says color r % 2, key r. */
static int split_lying(ferry_t *f, ferry_t **sub_p)
{
	int32_t (*mine)[2] = malloc(8 * (size_t)f->size), (*t)[2] = malloc(8 * (size_t)f->size);
	ferry_req_t *req;
	uint32_t seq;
	int ret;

	if (!mine || !t)
		return -ENOMEM;
	for (uint32_t r = 0; r < f->size; r++) {
		mine[r][0] = (int32_t)(r % 2);
		mine[r][1] = (int32_t)r;
	}
	ret = post_alltoall(f, CTL_COLL_SPLIT, mine, t, 8, &req);
	seq = f->coll_seq;
	if (ret == 0 && (ret = ferry_wait(&req)) == 0)
		ret = split_make(f, (const int32_t (*)[2])t, mine[0][0], seq, sub_p);
	free(mine);
	free(t);
	return ret;
}

int main(int argc, char **argv)
{
	static const struct option lo[] = { { "job", 1, 0, 'j' }, { "rank", 1, 0, 'r' }, { "size", 1, 0, 's' },
					    { 0, 0, 0, 0 } };
	struct ferry_opts o = { .job = "splitlie" };
	ferry_t *f, *sub = NULL;
	ferry_req_t *req;
	uint32_t *sb, *rb, n = 0, k = 0;
	int c, ret;

	while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		if (c == 'j')
			o.job = optarg;
		else if (c == 'r')
			o.rank = atoi(optarg);
		else if (c == 's')
			o.size = atoi(optarg);
		else
			return 2;
	}
	me = o.rank;
	if ((ret = ferry_open(&f, &o)) < 0)
		FAIL("ferry_open: %s", ferry_strerror(ret));
	ret = me == 0 ? split_lying(f, &sub) : ferry_split(f, me % 2, me, &sub);
	if (ret < 0 || !sub)
		FAIL("split: %s", ferry_strerror(ret));
	for (int r = 0; r < o.size; r++)
		n += r % 2 == me % 2;
	if ((uint32_t)ferry_size(sub) != n || ferry_rank(sub) != me / 2)
		FAIL("group of %d ranks, rank %d in it; expected %u, %d", ferry_size(sub), ferry_rank(sub), n, me / 2);
	if ((ret = ferry_barrier(sub)) < 0)
		FAIL("barrier on the group: %s", ferry_strerror(ret));
	sb = calloc(2 * n, sizeof(*sb));
	rb = calloc(2 * n, sizeof(*rb));
	for (int r = me % 2; r < o.size; r += 2, k++) {
		sb[2 * k] = (uint32_t)me;
		sb[2 * k + 1] = (uint32_t)r;
	}
	if ((ret = ferry_ialltoall(sub, sb, rb, 8, &req)) < 0 || (ret = ferry_wait(&req)) < 0)
		FAIL("all-to-all on the group: %s", ferry_strerror(ret));
	k = 0;
	for (int r = me % 2; r < o.size; r += 2, k++)
		if (rb[2 * k] != (uint32_t)r || rb[2 * k + 1] != (uint32_t)me)
			FAIL("block %u of the group's all-to-all: from %u for %u, not from %d for %d", k, rb[2 * k],
			     rb[2 * k + 1], r, me);
	free(sb);
	free(rb);
	if ((ret = ferry_close(sub)) < 0 || (ret = ferry_close(f)) < 0)
		FAIL("close: %s", ferry_strerror(ret));
	printf("rank %d ok\n", me);
	return 0;
}
