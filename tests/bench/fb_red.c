/* tests/bench/fb_red.c - allreduce, allgather, bcast, reduce and
 * reduce_scatter_block timed (the red family, tests/bench/red.sh).  Built
 * twice: as fb_red with ferry (the daemons run them) and, through mb_red.c,
 * which defines BENCH_MPI and includes this file, as mb_red with Open MPI, so
 * that both are timed by the same code.
 *
 *   fb_red OP[,OP...] --bytes B[,B...] [--strategy S] [--barrier] [TIMING]
 *
 * OP: allreduce, allgather, bcast, reduce, rsb (reduce_scatter_block:
 * B rounded to a multiple of P int32, at least P; the point says B).
 * (ferry: job, rank, size from FERRY_JOB/RANK/SIZE.)  B is the bytes per
 * rank: the vector of int32 (summed) for the reductions (rsb: the whole
 * vector, B/P to each rank), the block for allgather, the message for
 * bcast; root 0.  --strategy forces ferry's algorithm (single, orth, hier;
 * short, long, hybrid for rsb); mb_red takes none.  Buffers are ordinary
 * memory (ferry stages them).
 *
 * TIMING, as OSU's osu_allreduce and friends: --warmup W (3) operations,
 * the first checked (with --warmup-max-s S, no more once they took S
 * seconds on the slowest rank, a MAX allreduce after each: one or two of
 * a long operation); then N back-to-back operations timed on every rank,
 * N from --target-s T (0.2) over the warm-up's time, within --min-iters
 * (5) and --max-iters (2000), the largest rank's (a MAX allreduce of the
 * estimates); the last operation is checked too.  With --barrier, as
 * osu_bcast and fb_sg time them: every operation, warm-ups too, follows a
 * barrier and is timed alone (its latency, where back-to-back operations
 * overlap: a root that returns early starts the next one), and N comes
 * from the warm-up's time per iteration, its barriers included.
 *
 * Output, rank 0: "point op OP strategy S bytes B iters N per_op_s X"
 * (the slowest rank's mean time per operation: a MAX allreduce of the
 * ranks' means), and every rank "elapsed_s X".  Exits 1 on an error or a
 * wrong result, saying which.
 */
#include "impl.h"

#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAXLIST 32

enum { OP_ALLREDUCE, OP_ALLGATHER, OP_BCAST, OP_REDUCE, OP_RSB, OPS };
static const char *const op_names[OPS] = { "allreduce", "allgather", "bcast", "reduce", "rsb" };

static long warmup = 3, min_iters = 5, max_iters = 2000;
static double target_s = 0.2, warmup_max_s = 0;
static int barrier_each;        /* --barrier */

#ifdef BENCH_MPI
static double max_of(double x)
{
	double m = 0;
	int ret = MPI_Allreduce(&x, &m, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);

	if (ret != MPI_SUCCESS)
		fail("MPI_Allreduce", ret);
	return m;
}

static void run(int op, const int32_t *s, int32_t *r, size_t n)
{
	int c = (int)n, ret;

	switch (op) {
	case OP_ALLREDUCE: ret = MPI_Allreduce(s, r, c, MPI_INT32_T, MPI_SUM, MPI_COMM_WORLD); break;
	case OP_ALLGATHER: ret = MPI_Allgather(s, c, MPI_INT32_T, r, c, MPI_INT32_T, MPI_COMM_WORLD); break;
	case OP_BCAST: ret = MPI_Bcast(r, c, MPI_INT32_T, 0, MPI_COMM_WORLD); break;
	case OP_REDUCE: ret = MPI_Reduce(s, r, c, MPI_INT32_T, MPI_SUM, 0, MPI_COMM_WORLD); break;
	default: ret = MPI_Reduce_scatter_block(s, r, c / (int)P, MPI_INT32_T, MPI_SUM, MPI_COMM_WORLD); break;
	}
	if (ret != MPI_SUCCESS)
		fail(op_names[op], ret);
}
#else
static double max_of(double x)
{
	double m = 0;
	int ret = ferry_allreduce(f, &x, &m, 1, FERRY_DOUBLE, FERRY_MAX);

	if (ret < 0)
		fail("ferry_allreduce", ret);
	return m;
}

static void run(int op, const int32_t *s, int32_t *r, size_t n)
{
	int ret;

	switch (op) {
	case OP_ALLREDUCE: ret = ferry_allreduce(f, s, r, n, FERRY_INT32, FERRY_SUM); break;
	case OP_ALLGATHER: ret = ferry_allgather(f, s, r, n * 4); break;
	case OP_BCAST: ret = ferry_bcast(f, me == 0 ? (void *)(uintptr_t)s : r, n * 4, 0); break;
	case OP_REDUCE: ret = ferry_reduce(f, s, r, n, FERRY_INT32, FERRY_SUM, 0); break;
	default: ret = ferry_reduce_scatter_block(f, s, r, n / P, FERRY_INT32, FERRY_SUM); break;
	}
	if (ret < 0)
		fail(op_names[op], ret);
}
#endif

static int32_t *sbuf, *rbuf;

/* Rank r's element i of operation seq (small: sums stay in range). */
static int32_t elem(uint32_t r, size_t i, uint32_t seq)
{
	return (int32_t)((r * 7 + i * 3 + seq) % 1000);
}

static void fill(int op, size_t n, uint32_t seq)
{
	for (size_t i = 0; i < n; i++)
		sbuf[i] = elem(me, i, seq);
	if (op == OP_BCAST && me == 0)
		memcpy(rbuf, sbuf, n * 4);      /* (MPI broadcasts the root's recv buffer) */
}

/* What rank me must have after operation seq of n elements. */
static void check(int op, size_t n, uint32_t seq)
{
	size_t m = op == OP_ALLGATHER ? n * P : op == OP_RSB ? n / P : n;

	if (op == OP_REDUCE && me != 0)
		return;
	for (size_t i = 0; i < m; i++) {
		int64_t want = 0;

		if (op == OP_ALLGATHER) {
			want = elem((uint32_t)(i / n), i % n, seq);
		} else if (op == OP_BCAST) {
			want = elem(0, i, seq);
		} else {
			size_t j = op == OP_RSB ? me * (n / P) + i : i;

			for (uint32_t r = 0; r < P; r++)
				want += elem(r, j, seq);
		}
		if (rbuf[i] != (int32_t)want) {
			fprintf(stderr, "rank %u %s of %zu elements (seq %u): element %zu is %d, not %lld\n", me,
				op_names[op], n, seq, i, rbuf[i], (long long)want);
			exit(1);
		}
	}
}

static void point(int op, const char *strategy, size_t bytes, uint32_t *seq)
{
	size_t n = bytes / 4;
	double t0, tw, warm = 0, mean, sum = 0;
	long iters, w;

	if (op == OP_RSB)       /* (a multiple of P elements, at least P) */
		n = n < P ? P : n - n % P;
	tw = now_s();
	for (w = 0; w < warmup;) {
		fill(op, n, *seq);
		if (barrier_each)
			barrier();
		t0 = now_s();
		run(op, sbuf, rbuf, n);
		warm += now_s() - t0;
		if (w++ == 0)
			check(op, n, *seq);
		(*seq)++;
		if (warmup_max_s > 0 && max_of(warm) >= warmup_max_s)
			break;
	}
	if (barrier_each)
		warm = now_s() - tw;
	iters = (long)(target_s / (max_of(warm) / (double)(w ? w : 1) + 1e-9));
	iters = iters < min_iters ? min_iters : iters > max_iters ? max_iters : iters;
	fill(op, n, *seq);
	t0 = now_s();
	for (long k = 0; k < iters; k++) {
		if (barrier_each) {
			barrier();
			t0 = now_s();
		}
		run(op, sbuf, rbuf, n);
		if (barrier_each)
			sum += now_s() - t0;
	}
	mean = max_of((barrier_each ? sum : now_s() - t0) / (double)iters);
	check(op, n, *seq);
	(*seq)++;
	if (me == 0)
		printf("point op %s strategy %s bytes %zu iters %ld per_op_s %.9f\n", op_names[op], strategy, bytes,
		       iters, mean);
	fflush(stdout);
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "bytes", required_argument, NULL, 'b' }, { "strategy", required_argument, NULL, 's' },
		{ "warmup", required_argument, NULL, 'w' }, { "target-s", required_argument, NULL, 't' },
		{ "min-iters", required_argument, NULL, 'm' }, { "max-iters", required_argument, NULL, 'M' },
		{ "warmup-max-s", required_argument, NULL, 'W' }, { "barrier", no_argument, NULL, 'B' },
		{ NULL, 0, NULL, 0 },
	};
	long bytes[MAXLIST], maxb = 4;
	int nb = 0, ops[OPS], nops = 0, opt;
	const char *strategy = "auto";
	uint32_t seq = 1;
	double t0 = 0;
	char *list;

	do_open(&argc, &argv);
	t0 = now_s();
	if (argc < 2) {
		fprintf(stderr, "usage: %s OP[,OP...] --bytes B[,B...] [--strategy S] [--barrier] [TIMING]\n", argv[0]);
		return 2;
	}
	list = argv[1];
	for (char *tok = strtok(list, ","); tok; tok = strtok(NULL, ",")) {
		int k = 0;

		while (k < OPS && strcmp(tok, op_names[k]) != 0)
			k++;
		if (k == OPS || nops == OPS) {
			fprintf(stderr, "unknown operation %s\n", tok);
			return 2;
		}
		ops[nops++] = k;
	}
	optind = 2;
	while ((opt = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (opt) {
		case 'b':
			for (char *tok = strtok(optarg, ","); tok && nb < MAXLIST; tok = strtok(NULL, ","))
				bytes[nb++] = arg_long("--bytes", tok);
			break;
		case 's': strategy = optarg; break;
		case 'w': warmup = arg_long("--warmup", optarg); break;
		case 't': target_s = atof(optarg); break;
		case 'W': warmup_max_s = atof(optarg); break;
		case 'B': barrier_each = 1; break;
		case 'm': min_iters = arg_long("--min-iters", optarg); break;
		case 'M': max_iters = arg_long("--max-iters", optarg); break;
		default: return 2;
		}
	}
	for (int i = 0; i < nb; i++)
		maxb = bytes[i] > maxb ? bytes[i] : maxb;
	sbuf = calloc((size_t)maxb / 4 * P + 16, 4);
	rbuf = calloc((size_t)maxb / 4 * P + 16, 4);
	if (!sbuf || !rbuf) {
		fprintf(stderr, "out of memory\n");
		return 1;
	}
#ifndef BENCH_MPI
	if (strcmp(strategy, "auto") != 0)
		for (int k = 0; k < nops; k++) {
			static const char *const name[OPS] = { "allreduce", "allgather", "bcast", "reduce",
							       "reduce_scatter_block" };
			int ret = ferry_coll_strategy(f, name[ops[k]], strategy);

			if (ret < 0)
				fail("ferry_coll_strategy", ret);
		}
#endif
	for (int k = 0; k < nops; k++)
		for (int i = 0; i < nb; i++)
			point(ops[k], strategy, (size_t)bytes[i], &seq);
	printf("elapsed_s %.6f\n", now_s() - t0);
	free(sbuf);
	free(rbuf);
	do_close();
	return 0;
}
