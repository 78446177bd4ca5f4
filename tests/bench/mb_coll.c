/* tests/bench/mb_coll.c - the coll family's comparator: fb_coll's
 * measurements with Open MPI's collectives, timed the same way
 * (tests/bench/fb_coll.c says how).
 *
 *   mb_coll alltoall --blocks B[,B...] [TIMING]             MPI_Alltoall
 *   mb_coll many --blocks B[,B...] --deltas D[,D...] [TIMING]
 *       MPI_Alltoallv, rank i to ranks i+1 .. i+D (mod P), zero counts elsewhere
 *   mb_coll overlap --blocks B[,B...] [TIMING]              MPI_Ialltoall + MPI_Wait
 *
 * TIMING as fb_coll's: --warmup W (3), --target-s T (0.2), --min-iters (5),
 * --max-iters (2000); the iteration count is the same on every rank
 * (MPI_Allreduce of the warm-up estimates, the largest).  Every warm-up
 * operation and the last timed one are checked byte by byte against the
 * same pattern fb_coll uses.  Rank 0 prints fb_coll's "point" lines with
 * "strategy mpi buf user": per_op_s is the slowest rank's; the overlap
 * fields are the ranks' means (as OSU's osu_ialltoall reports them).  The
 * compute loop of the overlap is fb_coll's, pure CPU without MPI calls.
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "overlap.h"

#define MAXLIST 32

static int me, P;
static long warmup = 3, min_iters = 5, max_iters = 2000;
static double target_s = 0.2;

static void fail(const char *what, int err)
{
	char s[MPI_MAX_ERROR_STRING];
	int len = 0;

	MPI_Error_string(err, s, &len);
	fprintf(stderr, "rank %d %s: %s\n", me, what, s);
	MPI_Abort(MPI_COMM_WORLD, 1);
}

static long arg_long(const char *name, const char *v)
{
	char *end;
	long x = strtol(v, &end, 0);

	if (!*v || *end) {
		fprintf(stderr, "bad value for %s: %s\n", name, v);
		exit(2);
	}
	return x;
}

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

/* tests/progs/common.h's pattern_byte, the same bytes as fb_coll's. */
static uint8_t pattern_byte(uint32_t src, uint32_t dst, uint32_t seq, uint32_t i)
{
	return (uint8_t)(src * 131u + dst * 31u + seq * 7u + i * 13u + (i >> 8));
}

static uint8_t byte_of(uint32_t src, uint32_t dst, uint32_t seq, uint32_t stamp, size_t i)
{
	return pattern_byte(src, dst, i == 0 ? stamp : seq, (uint32_t)i);
}

static int talks(int r, long delta, int from)
{
	int d = from ? (me + P - r) % P : (r + P - me) % P;

	return delta == 0 || (d >= 1 && d <= delta);
}

static void fill(uint8_t *sbuf, size_t block, long delta, uint32_t seq)
{
	for (int d = 0; d < P; d++)
		for (size_t i = 0; talks(d, delta, 0) && i < block; i++)
			sbuf[d * block + i] = byte_of((uint32_t)me, (uint32_t)d, seq, seq, i);
}

static void stamp(uint8_t *sbuf, size_t block, long delta, uint32_t seq, uint32_t k)
{
	for (int d = 0; block && d < P; d++)
		if (talks(d, delta, 0))
			sbuf[d * block] = byte_of((uint32_t)me, (uint32_t)d, seq, k, 0);
}

static void check(const uint8_t *rbuf, size_t block, long delta, uint32_t seq, uint32_t k, const char *what)
{
	for (int s = 0; s < P; s++)
		for (size_t i = 0; i < block; i++) {
			uint8_t want = talks(s, delta, 1) ? byte_of((uint32_t)s, (uint32_t)me, seq, k, i) : 0xee;

			if (rbuf[s * block + i] != want) {
				fprintf(stderr, "rank %d %s, block %zu, delta %ld: byte %zu from rank %d is 0x%02x, not 0x%02x\n",
					me, what, block, delta, i, s, rbuf[s * block + i], want);
				MPI_Abort(MPI_COMM_WORLD, 1);
			}
		}
}

static double reduce_max(double x)
{
	double m;
	int err = MPI_Allreduce(&x, &m, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);

	if (err != MPI_SUCCESS)
		fail("MPI_Allreduce", err);
	return m;
}

/* The host's clock, which every rank of this one-host run shares (fb_coll's
 * now_s; MPI_Wtime need not be global). */
static double host_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* fb_coll's job_span: from the first rank's t0 to the last rank's t1. */
static double job_span(double t0, double t1)
{
	return reduce_max(t1) + reduce_max(-t0);
}

/* The ranks' mean of x, at rank 0. */
static double mean0(double x)
{
	double s = 0;
	int err = MPI_Reduce(&x, &s, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);

	if (err != MPI_SUCCESS)
		fail("MPI_Reduce", err);
	return s / P;
}

static long iters_for(double per_op)
{
	double n = per_op > 0 ? target_s / per_op + 1 : (double)max_iters;

	return n < (double)min_iters ? min_iters : n > (double)max_iters ? max_iters : (long)n;
}

static int op(uint8_t *sbuf, uint8_t *rbuf, size_t block, long delta, const int *v)
{
	if (delta == 0)
		return MPI_Alltoall(sbuf, (int)block, MPI_BYTE, rbuf, (int)block, MPI_BYTE, MPI_COMM_WORLD);
	return MPI_Alltoallv(sbuf, v, v + P, MPI_BYTE, rbuf, v + 2 * P, v + 3 * P, MPI_BYTE, MPI_COMM_WORLD);
}

static uint32_t seq_next = 1;

static void timed_point(const char *mode, uint8_t *sbuf, uint8_t *rbuf, size_t block, long delta)
{
	int *v = calloc(4 * (size_t)P, sizeof(*v)), err;
	double t0, t1, warm = 0;
	uint32_t seq;
	long n;

	for (int r = 0; r < P; r++) {
		v[r] = talks(r, delta, 0) ? (int)block : 0;
		v[2 * P + r] = talks(r, delta, 1) ? (int)block : 0;
		v[P + r] = v[3 * P + r] = (int)(r * block);
	}
	for (long w = 0; w < warmup; w++, seq_next++) {
		seq = seq_next;
		fill(sbuf, block, delta, seq);
		memset(rbuf, 0xee, block * P);
		t0 = MPI_Wtime();
		if ((err = op(sbuf, rbuf, block, delta, v)) != MPI_SUCCESS)
			fail("warm-up operation", err);
		if (w > 0)
			warm += MPI_Wtime() - t0;
		check(rbuf, block, delta, seq, seq, "warm-up");
	}
	n = iters_for(reduce_max(warmup > 1 ? warm / (double)(warmup - 1) : 0));
	seq = seq_next++;
	fill(sbuf, block, delta, seq);
	memset(rbuf, 0xee, block * P);
	MPI_Barrier(MPI_COMM_WORLD);
	t0 = MPI_Wtime();
	for (long k = 0; k < n; k++) {
		stamp(sbuf, block, delta, seq, (uint32_t)(seq + k));
		if ((err = op(sbuf, rbuf, block, delta, v)) != MPI_SUCCESS)
			fail(delta ? "MPI_Alltoallv" : "MPI_Alltoall", err);
	}
	t1 = MPI_Wtime();
	check(rbuf, block, delta, seq, (uint32_t)(seq + n - 1), "last timed operation");
	seq_next += (uint32_t)n;
	t1 = reduce_max((t1 - t0) / (double)n);
	if (me == 0) {
		printf("point op %s strategy mpi buf user block %zu delta %ld iters %ld per_op_s %.9f\n", mode, block,
		       delta, n, t1);
		fflush(stdout);
	}
	free(v);
}

static volatile double sink;

/* fb_coll's compute loop. */
static void compute(long n)
{
	double x = sink;

	for (long i = 0; i < n; i++)
		x = x * 0.999999999 + 1e-9;
	sink = x;
}

/* fb_coll's calibration: the loop's length whose run on every rank at once
 * lasts about t of the job's time (job_span), the same on every rank. */
static long calibrate(double t)
{
	double el, t0 = MPI_Wtime(), span = t * 10 > 0.05 ? t * 10 : 0.05;
	long n = 1000, calls = 0, reps = (long)(span / t) + 1;

	do {
		compute(n);
		calls++;
	} while ((el = MPI_Wtime() - t0) < 0.005);
	n = (long)reduce_max((double)n * t / (el / (double)calls)) + 1;
	for (int round = 0; round < 2; round++) {
		MPI_Barrier(MPI_COMM_WORLD);
		t0 = host_s();
		for (long r = 0; r < reps; r++)
			compute(n);
		el = job_span(t0, host_s()) / (double)reps;
		MPI_Barrier(MPI_COMM_WORLD);
		n = (long)((double)n * t / el) + 1;
	}
	return n;
}

/* fb_coll's ovl_phase with MPI_Ialltoall. */
static double ovl_phase(struct ovl *o, int phase, long m)
{
	double t0, t1, a;
	MPI_Request req;
	int err;

	MPI_Barrier(MPI_COMM_WORLD);
	t0 = host_s();
	for (long k = 0; k < m; k++) {
		if (phase == 1) {
			compute(o->c);
			continue;
		}
		stamp(o->sbuf, o->block, 0, o->seq, o->k++);
		a = MPI_Wtime();
		if ((err = MPI_Ialltoall(o->sbuf, (int)o->block, MPI_BYTE, o->rbuf, (int)o->block, MPI_BYTE,
					 MPI_COMM_WORLD, &req)) != MPI_SUCCESS)
			fail("MPI_Ialltoall", err);
		t1 = MPI_Wtime();
		if (phase == 2) {
			o->post += t1 - a;
			compute(o->c);
			a = MPI_Wtime();
			o->in += a - t1;
		}
		if ((err = MPI_Wait(&req, MPI_STATUS_IGNORE)) != MPI_SUCCESS)
			fail("MPI_Wait", err);
		if (phase == 2)
			o->wait += MPI_Wtime() - a;
	}
	t1 = job_span(t0, host_s());
	MPI_Barrier(MPI_COMM_WORLD);
	if (phase != 1)
		check(o->rbuf, o->block, 0, o->seq, o->k - 1,
		      phase ? "last timed operation (overlapped)" : "last timed operation (communication alone)");
	return t1;
}

/* fb_coll's overlap_point with MPI_Ialltoall. */
static void overlap_point(uint8_t *sbuf, uint8_t *rbuf, size_t block)
{
	struct ovl o = { .sbuf = sbuf, .rbuf = rbuf, .block = block };
	double t0, warm = 0, last = 0;
	MPI_Request req;
	long n, m;
	int err;

	for (long w = 0; w < warmup; w++) {
		o.seq = seq_next++;
		fill(sbuf, block, 0, o.seq);
		memset(rbuf, 0xee, block * P);
		t0 = MPI_Wtime();
		if ((err = MPI_Ialltoall(sbuf, (int)block, MPI_BYTE, rbuf, (int)block, MPI_BYTE, MPI_COMM_WORLD, &req)) !=
			    MPI_SUCCESS ||
		    (err = MPI_Wait(&req, MPI_STATUS_IGNORE)) != MPI_SUCCESS)
			fail("warm-up MPI_Ialltoall", err);
		if (w > 0)
			warm += MPI_Wtime() - t0;
		check(rbuf, block, 0, o.seq, o.seq, "warm-up");
	}
	n = iters_for(reduce_max(warmup > 1 ? warm / (double)(warmup - 1) : 0));
	m = (n + OVERLAP_ROUNDS - 1) / OVERLAP_ROUNDS;
	n = m * OVERLAP_ROUNDS;
	o.k = seq_next;
	o.c = calibrate(reduce_max(ovl_phase(&o, 0, m) / (double)m));
	for (int r = 0; r < OVERLAP_ROUNDS; r++)
		ovl_round(&o, r, m, &last);
	seq_next = o.k;
	o.comm = mean0(o.comm / (double)n);
	o.comp = mean0(o.comp / (double)n);
	o.total = mean0(o.total / (double)n);
	o.in = mean0(o.in / (double)n);
	o.post = mean0(o.post / (double)n);
	o.wait = mean0(o.wait / (double)n);
	if (me == 0) {
		printf("point op overlap strategy mpi buf user block %zu delta 0 iters %ld comm_s %.9f compute_s %.9f "
		       "total_s %.9f compute_in_s %.9f post_s %.9f wait_s %.9f\n",
		       block, n, o.comm, o.comp, o.total, o.in, o.post, o.wait);
		fflush(stdout);
	}
}

int main(int argc, char **argv)
{
	long blocks[MAXLIST], deltas[MAXLIST] = { 0 }, maxb = 0;
	int nb = 0, nd = 1;
	const char *mode;
	uint8_t *sbuf, *rbuf;
	double t0;
	char *end;

	MPI_Init(&argc, &argv);
	t0 = MPI_Wtime();
	MPI_Comm_rank(MPI_COMM_WORLD, &me);
	MPI_Comm_size(MPI_COMM_WORLD, &P);
	MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
	if (argc < 2 || (strcmp(argv[1], "alltoall") && strcmp(argv[1], "many") && strcmp(argv[1], "overlap"))) {
		fprintf(stderr, "usage: mb_coll alltoall|many|overlap --blocks B[,B...] [options]\n");
		MPI_Abort(MPI_COMM_WORLD, 2);
	}
	mode = argv[1];
	for (int i = 2; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--blocks"))
			nb = parse_list("--blocks", argv[i + 1], blocks);
		else if (!strcmp(argv[i], "--deltas"))
			nd = parse_list("--deltas", argv[i + 1], deltas);
		else if (!strcmp(argv[i], "--warmup"))
			warmup = arg_long("--warmup", argv[i + 1]);
		else if (!strcmp(argv[i], "--target-s") && (target_s = strtod(argv[i + 1], &end)) > 0 && !*end)
			;
		else if (!strcmp(argv[i], "--min-iters"))
			min_iters = arg_long("--min-iters", argv[i + 1]);
		else if (!strcmp(argv[i], "--max-iters"))
			max_iters = arg_long("--max-iters", argv[i + 1]);
		else {
			fprintf(stderr, "mb_coll: bad option %s %s\n", argv[i], argv[i + 1]);
			MPI_Abort(MPI_COMM_WORLD, 2);
		}
	}
	if (nb == 0 || warmup < 1 || min_iters < 1 || max_iters < min_iters)
		MPI_Abort(MPI_COMM_WORLD, 2);
	for (int i = 0; i < nb; i++) {
		if (blocks[i] < 1 || blocks[i] > (1L << 24))
			MPI_Abort(MPI_COMM_WORLD, 2);
		maxb = blocks[i] > maxb ? blocks[i] : maxb;
	}
	for (int i = 0; i < nd; i++)
		if (deltas[i] < 0 || deltas[i] >= P || (!strcmp(mode, "many") && deltas[i] == 0))
			MPI_Abort(MPI_COMM_WORLD, 2);
	sbuf = malloc((size_t)maxb * P);
	rbuf = malloc((size_t)maxb * P);
	if (!sbuf || !rbuf)
		MPI_Abort(MPI_COMM_WORLD, 1);
	for (int i = 0; i < nb; i++)
		for (int j = 0; j < nd; j++) {
			if (!strcmp(mode, "overlap"))
				overlap_point(sbuf, rbuf, (size_t)blocks[i]);
			else
				timed_point(mode, sbuf, rbuf, (size_t)blocks[i], deltas[j]);
		}
	free(sbuf);
	free(rbuf);
	t0 = reduce_max(MPI_Wtime() - t0);
	if (me == 0)
		printf("elapsed_s %.6f\n", t0);
	MPI_Finalize();
	return 0;
}
