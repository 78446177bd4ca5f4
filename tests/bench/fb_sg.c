/* tests/bench/fb_sg.c - scatter and gather timed (the sg family,
 * tests/bench/sg.sh; Mao, Chen, Watson, Figs. 4-5).  Built twice: as
 * fb_sg with ferry (ferry_scatter, ferry_gather, one rank per node: the
 * daemons run them) and, through mb_sg.c, which defines BENCH_MPI and includes
 * this file, as mb_sg with Open MPI (MPI_Scatter, MPI_Gather), so that both
 * are timed by the same code.
 *
 *   fb_sg scatter|gather --blocks B[,B...] [--strategy S] [--root R] [TIMING]
 *
 * (ferry: job, rank, size from FERRY_JOB/RANK/SIZE.)  --strategy forces
 * ferry's algorithm (direct, opt, sdf, orth, tree; auto, the default, the
 * automatic choice); mb_sg takes none.  Buffers are ordinary memory (ferry
 * stages them).
 *
 * TIMING, as OSU's osu_scatter/osu_gather: --warmup W (3) operations first,
 * each checked byte by byte; then N timed iterations, each a barrier, then
 * the operation timed alone on every rank.  N is --target-s T (0.2) over the
 * warm-up's mean time per iteration, between --min-iters (5) and
 * --max-iters (1000), the largest rank's estimate (a gather of the
 * estimates to the root and a scatter of its choice back, so that the
 * benchmark needs nothing but the operations it measures and a barrier).
 * The last timed operation is checked byte by byte too.
 *
 * Output, rank 0 (its own times and the others' gathered):
 *   point op scatter|gather strategy S root R block B iters N per_op_s X mean_s Y
 *       per_op_s: the slowest rank's mean time per operation (the time
 *       until the last block has arrived: a scatter's last receiver, a
 *       gather's root); mean_s: the ranks' mean, as OSU reports it.
 * and every rank "elapsed_s X" at the end.  Exits 1 on an error or a wrong
 * byte, saying which.
 */
#include "impl.h"

#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAXLIST 32

static long warmup = 3, min_iters = 5, max_iters = 1000;
static double target_s = 0.2;

#ifdef BENCH_MPI
static uint8_t pattern_byte(uint32_t src, uint32_t dst, uint32_t seq, uint32_t i)
{
	return (uint8_t)(src * 131u + dst * 31u + seq * 7u + i * 13u + (i >> 8));
}

static void op(int gather, const void *s, void *r, size_t block, uint32_t root)
{
	int ret = gather ? MPI_Gather(s, (int)block, MPI_BYTE, r, (int)block, MPI_BYTE, (int)root, MPI_COMM_WORLD)
			 : MPI_Scatter(s, (int)block, MPI_BYTE, r, (int)block, MPI_BYTE, (int)root, MPI_COMM_WORLD);

	if (ret != MPI_SUCCESS)
		fail(gather ? "MPI_Gather" : "MPI_Scatter", ret);
}
#else
static void op(int gather, const void *s, void *r, size_t block, uint32_t root)
{
	int ret = gather ? ferry_gather(f, s, r, block, root) : ferry_scatter(f, s, r, block, root);

	if (ret < 0)
		fail(gather ? "ferry_gather" : "ferry_scatter", ret);
}
#endif

static int parse_list(const char *name, char *s, long *v)
{
	int n = 0;

	for (char *tok = strtok(s, ","); tok; tok = strtok(NULL, ",")) {
		if (n == MAXLIST) {
			fprintf(stderr, "%s: at most %d values\n", name, MAXLIST);
			exit(2);
		}
		v[n++] = arg_long(name, tok);
	}
	return n;
}

/* The root's buffer holds P blocks (block r for rank r), the others' one. */
static uint8_t *sbuf, *rbuf;

/* Writes what operation seq sends: a scatter's root every rank's block, a
 * gather's every rank its own. */
static void fill(int gather, size_t block, uint32_t root, uint32_t seq)
{
	if (gather) {
		for (size_t i = 0; i < block; i++)
			sbuf[i] = pattern_byte(me, root, seq, (uint32_t)i);
	} else if (me == root) {
		for (uint32_t r = 0; r < P; r++)
			for (size_t i = 0; i < block; i++)
				sbuf[r * block + i] = pattern_byte(root, r, seq, (uint32_t)i);
	}
}

static void check(int gather, size_t block, uint32_t root, uint32_t seq)
{
	uint32_t n = gather ? (me == root ? P : 0) : 1;

	for (uint32_t k = 0; k < n; k++)
		for (size_t i = 0; i < block; i++) {
			uint8_t want = gather ? pattern_byte(k, root, seq, (uint32_t)i)
					      : pattern_byte(root, me, seq, (uint32_t)i);

			if (rbuf[k * block + i] != want) {
				fprintf(stderr, "rank %u: %s %u, block %u byte %zu is %u, not %u\n", me,
					gather ? "gather" : "scatter", seq, k, i, rbuf[k * block + i], want);
				exit(1);
			}
		}
}

/* One checked operation. */
static void checked(int gather, size_t block, uint32_t root, uint32_t seq)
{
	fill(gather, block, root, seq);
	memset(rbuf, 0xee, gather && me == root ? P * block : block);
	op(gather, sbuf, rbuf, block, root);
	check(gather, block, root, seq);
}

/* The largest of every rank's v, on every rank, through the operations
 * under test (8-byte blocks: a gather to the root, a scatter back). */
static double agree_max(double v, uint32_t root)
{
	double *all = calloc(P, sizeof(double)), m = v;

	if (!all) {
		fprintf(stderr, "out of memory\n");
		exit(1);
	}
	op(1, &v, all, sizeof(double), root);
	for (uint32_t r = 0; me == root && r < P; r++)
		m = all[r] > m ? all[r] : m;
	for (uint32_t r = 0; me == root && r < P; r++)
		all[r] = m;
	op(0, all, &m, sizeof(double), root);
	free(all);
	return m;
}

static void point(int gather, const char *strategy, size_t block, uint32_t root)
{
	double t, mine = 0, est, *all, worst = 0, sum = 0;
	long n;
	uint32_t seq = 1;

	t = now_s();
	for (long w = 0; w < warmup; w++, seq++) {
		barrier();
		checked(gather, block, root, seq);
	}
	est = (now_s() - t) / (double)warmup;
	n = (long)(target_s / agree_max(est, root));
	n = n < min_iters ? min_iters : n > max_iters ? max_iters : n;
	fill(gather, block, root, seq);
	for (long k = 0; k < n; k++) {
		barrier();
		t = now_s();
		op(gather, sbuf, rbuf, block, root);
		mine += now_s() - t;
	}
	check(gather, block, root, seq);
	mine /= (double)n;
	/* rank 0 reports: every rank's mean to it */
	if (!(all = calloc(P, sizeof(double)))) {
		fprintf(stderr, "out of memory\n");
		exit(1);
	}
	op(1, &mine, all, sizeof(double), 0);
	for (uint32_t r = 0; me == 0 && r < P; r++) {
		worst = all[r] > worst ? all[r] : worst;
		sum += all[r];
	}
	if (me == 0)
		printf("point op %s strategy %s root %u block %zu iters %ld per_op_s %.9g mean_s %.9g\n",
		       gather ? "gather" : "scatter", strategy, root, block, n, worst, sum / P);
	fflush(stdout);
	free(all);
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "blocks", required_argument, NULL, 'b' }, { "strategy", required_argument, NULL, 's' },
		{ "root", required_argument, NULL, 'r' }, { "warmup", required_argument, NULL, 'w' },
		{ "target-s", required_argument, NULL, 't' }, { "min-iters", required_argument, NULL, 'm' },
		{ "max-iters", required_argument, NULL, 'M' }, { NULL, 0, NULL, 0 },
	};
	long blocks[MAXLIST], maxb = 0, root = 0;
	int nb = 0, opt, gather;
	const char *strategy = "auto";
	double t0;
	char *end;

	if (argc < 2 || (strcmp(argv[1], "scatter") && strcmp(argv[1], "gather"))) {
		fprintf(stderr, "usage: %s_sg scatter|gather --blocks B[,B...] [options]\n", impl);
		return 2;
	}
	gather = argv[1][0] == 'g';
	optind = 2;
	while ((opt = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (opt) {
		case 'b': nb = parse_list("--blocks", optarg, blocks); break;
		case 's': strategy = optarg; break;
		case 'r': root = arg_long("--root", optarg); break;
		case 'w': warmup = arg_long("--warmup", optarg); break;
		case 't':
			target_s = strtod(optarg, &end);
			if (*end || target_s <= 0)
				return 2;
			break;
		case 'm': min_iters = arg_long("--min-iters", optarg); break;
		case 'M': max_iters = arg_long("--max-iters", optarg); break;
		default: return 2;
		}
	}
	if (nb == 0 || warmup < 1 || min_iters < 1 || max_iters < min_iters || root < 0)
		return 2;
	for (int i = 0; i < nb; i++) {
		if (blocks[i] < 1 || blocks[i] > (1L << 24))
			return 2;
		maxb = blocks[i] > maxb ? blocks[i] : maxb;
	}
	t0 = now_s();
	do_open(&argc, &argv);
	if ((uint32_t)root >= P) {
		fprintf(stderr, "--root: below %u\n", P);
		return 2;
	}
#ifdef BENCH_MPI
	if (strcmp(strategy, "auto") != 0) {
		fprintf(stderr, "mb_sg: no --strategy (Open MPI chooses)\n");
		return 2;
	}
	strategy = "mpi";
#else
	{
		int ret;

		if (strcmp(strategy, "auto") != 0 &&
		    ((ret = ferry_coll_strategy(f, "scatter", strategy)) < 0 ||
		     (ret = ferry_coll_strategy(f, "gather", strategy)) < 0))
			fail("ferry_coll_strategy", ret);
	}
#endif
	/* the root's buffers hold P blocks, the others' one; 8-byte ones for
	 * agree_max and the report */
	maxb = maxb < 8 ? 8 : maxb;
	if (!(sbuf = malloc((size_t)maxb * P)) || !(rbuf = malloc((size_t)maxb * P))) {
		fprintf(stderr, "out of memory\n");
		return 1;
	}
	for (int i = 0; i < nb; i++)
		point(gather, strategy, (size_t)blocks[i], (uint32_t)root);
	free(sbuf);
	free(rbuf);
	printf("elapsed_s %.6f\n", now_s() - t0);
	do_close();
	return 0;
}
