/* tests/bench/fb_coll.c - ferry's all-to-all collectives timed (the coll
 * family, tests/bench/coll.sh; Kalé, Kumar, Varadarajan, Figs. 6-11).
 *
 *   fb_coll alltoall --blocks B[,B...] [--strategy S] [--alloc] [TIMING]
 *       ferry_alltoall of B-byte blocks, for each B in turn.
 *   fb_coll many --blocks B[,B...] --deltas D[,D...] [--strategy S] [--alloc] [TIMING]
 *       many-to-many (§4.1): rank i sends B bytes to each of ranks
 *       i+1 .. i+D (mod P) with ferry_alltoallv, zero counts elsewhere.
 *   fb_coll overlap --blocks B[,B...] [--strategy S] [--alloc] [TIMING]
 *       ferry_ialltoall overlapped with computation, measured as OSU's
 *       osu_ialltoall does (below).
 *
 * (job, rank, size from FERRY_JOB/RANK/SIZE).  --strategy forces the
 * all-to-all algorithm (direct, mesh, grid3d, hypercube; auto, the default:
 * the automatic choice).  --alloc puts both buffers in ferry_alloc memory,
 * which the daemon reads and writes in place; without it they are ordinary
 * buffers, which libferry copies into its staging region when an operation
 * is posted and out of it when it ends ("staged").
 *
 * TIMING: --warmup W (3) operations first, each checked byte by byte (the
 * first operation of every point is); then --target-s T (0.2): the number of
 * timed operations is T over the warm-up's mean time per operation, between
 * --min-iters (5) and --max-iters (2000), the same on every rank (each rank's
 * estimate goes to every rank with an all-to-all of 8-byte blocks; the
 * largest wins).  The timed operations run back to back after a barrier;
 * before each one this rank writes the operation's number into the first
 * byte of every block it sends, and after the last one it checks every byte
 * it received against what the last operation's senders wrote: a point is
 * never reported for wrong data.
 *
 * Output, one line per point, every rank (coll.sh takes the slowest rank's
 * time, or for overlap the ranks' means, as OSU does):
 *   point op alltoall|many strategy S buf alloc|staged block B delta D iters N per_op_s X
 *       per_op_s: this rank's mean time per operation over the N timed ones
 *       (from the barrier's end to the last operation's end, divided by N).
 *   point op overlap strategy S buf alloc|staged block B delta 0 iters N comm_s C
 *         compute_s T total_s A compute_in_s I post_s P wait_s W
 *       comm_s: mean time of ferry_ialltoall + ferry_wait, nothing between;
 *       compute_s: mean time of the compute loop alone (pure CPU, no ferry
 *       call), calibrated to last about comm_s (the largest rank's) while
 *       every rank runs it; total_s: mean time of ferry_ialltoall, the
 *       compute loop, ferry_wait.  These three are the job's time, not one
 *       rank's (ranks may share a core): from the first rank's start after
 *       a barrier to the last one's end, on the host's one clock,
 *       N iterations each, in rounds that take turns (OVERLAP_ROUNDS, after
 *       a first t_comm alone that calibrates the loop and is not counted).
 *       compute_in_s, post_s, wait_s: this rank's mean
 *       time in each part of an overlapped iteration.  Overlap (coll.sh):
 *       100 (1 - (total_s - compute_s) / comm_s).
 * and at the end "elapsed_s X" (the whole run).  Exits 1 on any error or
 * wrong byte, saying which.
 */
#include "../progs/common.h"
#include "overlap.h"

#include <getopt.h>

#define MAXLIST 32

static ferry_t *f;
static uint32_t me, P;
static long warmup = 3, min_iters = 5, max_iters = 2000;
static double target_s = 0.2;

static void fail(const char *what, int ret)
{
	fprintf(stderr, "rank %u %s: %s: %s\n", me, what, ferry_strerror(ret), ferry_last_error());
	exit(1);
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

/* The byte rank src sends rank dst at offset i of its block in operation
 * seq; byte 0 carries the operation's own number (the stamp). */
static uint8_t byte_of(uint32_t src, uint32_t dst, uint32_t seq, uint32_t stamp, size_t i)
{
	return pattern_byte(src, dst, i == 0 ? stamp : seq, (uint32_t)i);
}

/* Does this rank send to (or, with from, receive from) rank r in a
 * many-to-many of delta (delta 0: everyone, the all-to-all)? */
static int talks(uint32_t r, long delta, int from)
{
	uint32_t d = from ? (me + P - r) % P : (r + P - me) % P;

	return delta == 0 || (d >= 1 && d <= (uint32_t)delta);
}

/* Writes this rank's blocks (block r at r x block) for operation seq. */
static void fill(uint8_t *sbuf, size_t block, long delta, uint32_t seq)
{
	for (uint32_t d = 0; d < P; d++)
		for (size_t i = 0; talks(d, delta, 0) && i < block; i++)
			sbuf[d * block + i] = byte_of(me, d, seq, seq, i);
}

static void stamp(uint8_t *sbuf, size_t block, long delta, uint32_t seq, uint32_t k)
{
	for (uint32_t d = 0; block && d < P; d++)
		if (talks(d, delta, 0))
			sbuf[d * block] = byte_of(me, d, seq, k, 0);
}

/* Every received block as its sender wrote it for operation seq (stamp k);
 * where nothing was to come, 0xee as memset before the first operation. */
static void check(const uint8_t *rbuf, size_t block, long delta, uint32_t seq, uint32_t k, const char *what)
{
	for (uint32_t s = 0; s < P; s++)
		for (size_t i = 0; i < block; i++) {
			uint8_t want = talks(s, delta, 1) ? byte_of(s, me, seq, k, i) : 0xee;

			if (rbuf[s * block + i] != want) {
				fprintf(stderr, "rank %u %s, block %zu, delta %ld: byte %zu from rank %u is 0x%02x, not 0x%02x\n",
					me, what, block, delta, i, s, rbuf[s * block + i], want);
				exit(1);
			}
		}
}

/* The same number on every rank: the largest of the ranks' x (an
 * all-to-all of 8-byte blocks, ordinary buffers). */
static double agree_max(double x)
{
	double *in = malloc(sizeof(double) * P), *out = malloc(sizeof(double) * P), m = x;
	int ret;

	for (uint32_t r = 0; r < P; r++)
		in[r] = x;
	if ((ret = ferry_alltoall(f, in, out, sizeof(double))) < 0)
		fail("all-to-all of the estimates", ret);
	for (uint32_t r = 0; r < P; r++)
		m = out[r] > m ? out[r] : m;
	free(in);
	free(out);
	return m;
}

static long iters_for(double per_op)
{
	double n = per_op > 0 ? target_s / per_op + 1 : (double)max_iters;

	return n < (double)min_iters ? min_iters : n > (double)max_iters ? max_iters : (long)n;
}

/* Counts and displacements of a many-to-many: block r at r x block. */
static void vectors(size_t block, long delta, size_t *sc, size_t *sd, size_t *rc, size_t *rd)
{
	for (uint32_t r = 0; r < P; r++) {
		sc[r] = talks(r, delta, 0) ? block : 0;
		rc[r] = talks(r, delta, 1) ? block : 0;
		sd[r] = rd[r] = r * block;
	}
}

/* One blocking operation: the all-to-all (delta 0) or the many-to-many. */
static int op(uint8_t *sbuf, uint8_t *rbuf, size_t block, long delta, const size_t *v)
{
	if (delta == 0)
		return ferry_alltoall(f, sbuf, rbuf, block);
	return ferry_alltoallv(f, sbuf, v, v + P, rbuf, v + 2 * P, v + 3 * P);
}

static uint32_t seq_next = 1;

/* One point of the alltoall or many mode. */
static void timed_point(const char *mode, const char *strategy, const char *buf, uint8_t *sbuf, uint8_t *rbuf,
			size_t block, long delta)
{
	size_t *v = calloc(4 * (size_t)P, sizeof(*v));
	double t0, t1, warm = 0;
	uint32_t seq = seq_next;
	long n;
	int ret;

	vectors(block, delta, v, v + P, v + 2 * P, v + 3 * P);
	/* warm-up: every operation checked; the first is not timed */
	for (long w = 0; w < warmup; w++, seq_next++) {
		seq = seq_next;
		fill(sbuf, block, delta, seq);
		memset(rbuf, 0xee, block * P);
		t0 = now_s();
		if ((ret = op(sbuf, rbuf, block, delta, v)) < 0)
			fail("warm-up operation", ret);
		if (w > 0)
			warm += now_s() - t0;
		check(rbuf, block, delta, seq, seq, "warm-up");
	}
	n = iters_for(agree_max(warmup > 1 ? warm / (double)(warmup - 1) : 0));
	seq = seq_next++;
	fill(sbuf, block, delta, seq);
	memset(rbuf, 0xee, block * P);
	if ((ret = ferry_barrier(f)) < 0)
		fail("barrier", ret);
	t0 = now_s();
	for (long k = 0; k < n; k++) {
		stamp(sbuf, block, delta, seq, (uint32_t)(seq + k));
		if ((ret = op(sbuf, rbuf, block, delta, v)) < 0)
			fail(delta ? "ferry_alltoallv" : "ferry_alltoall", ret);
	}
	t1 = now_s();
	check(rbuf, block, delta, seq, (uint32_t)(seq + n - 1), "last timed operation");
	seq_next += (uint32_t)n;
	printf("point op %s strategy %s buf %s block %zu delta %ld iters %ld per_op_s %.9f\n", mode, strategy, buf,
	       block, delta, n, (t1 - t0) / (double)n);
	fflush(stdout);
	free(v);
}

/* --- overlap ------------------------------------------------------------- */

static volatile double sink;

/* Pure CPU work, no memory traffic and no call into ferry: n dependent
 * multiply-adds. */
static void compute(long n)
{
	double x = sink;

	for (long i = 0; i < n; i++)
		x = x * 0.999999999 + 1e-9;
	sink = x;
}

static void barrier(void)
{
	int ret = ferry_barrier(f);

	if (ret < 0)
		fail("barrier", ret);
}

/* The job's time for a part every rank ran from t0 to t1 (its own clock,
 * which is every rank's on one host: CLOCK_MONOTONIC): from the first
 * rank's start to the last one's end.  Not each rank's own t1 - t0: where
 * the ranks share a core, the kernel runs them one after the other after a
 * barrier, and a rank that starts last may find the others' work done
 * before its clock started (a compute part of 2 ms measured at less than
 * half its time).  The same on every rank. */
static double job_span(double t0, double t1)
{
	return agree_max(t1) + agree_max(-t0);
}

/* The compute loop's length whose run on every rank at once lasts about t
 * seconds of the job's time (job_span: the ranks may share a core, pinned,
 * all of them run on CPU 0).  The same on every rank. */
static long calibrate(double t)
{
	double el, t0 = now_s(), span = t * 10 > 0.05 ? t * 10 : 0.05;
	long n = 1000, calls = 0, reps = (long)(span / t) + 1;

	/* the scale, on this rank alone */
	do {
		compute(n);
		calls++;
	} while ((el = now_s() - t0) < 0.005);
	n = (long)agree_max((double)n * t / (el / (double)calls)) + 1;
	for (int round = 0; round < 2; round++) {
		barrier();
		t0 = now_s();
		for (long r = 0; r < reps; r++)
			compute(n);
		el = job_span(t0, now_s()) / (double)reps;
		barrier();
		n = (long)((double)n * t / el) + 1;
	}
	return n;
}

/* m iterations of the phase: 0 ferry_ialltoall + ferry_wait (t_comm), 1 the
 * compute loop alone (t_compute), 2 post, compute, wait (t_total); the job's
 * time (job_span), after a barrier. */
static double ovl_phase(struct ovl *o, int phase, long m)
{
	double t0, t1, a;
	ferry_req_t *req;
	int ret;

	barrier();
	t0 = now_s();
	for (long k = 0; k < m; k++) {
		if (phase == 1) {
			compute(o->c);
			continue;
		}
		stamp(o->sbuf, o->block, 0, o->seq, o->k++);
		a = now_s();
		if ((ret = ferry_ialltoall(f, o->sbuf, o->rbuf, o->block, &req)) < 0)
			fail("ferry_ialltoall", ret);
		t1 = now_s();
		if (phase == 2) {
			o->post += t1 - a;
			compute(o->c);
			a = now_s();
			o->in += a - t1;
		}
		if ((ret = ferry_wait(&req)) < 0)
			fail("ferry_wait", ret);
		if (phase == 2)
			o->wait += now_s() - a;
	}
	t1 = job_span(t0, now_s());
	barrier();
	if (phase != 1)
		check(o->rbuf, o->block, 0, o->seq, o->k - 1,
		      phase ? "last timed operation (overlapped)" : "last timed operation (communication alone)");
	return t1;
}

/* One overlap point (OSU's osu_ialltoall).  Each phase is the job's time
 * (job_span), from the first rank's start to the last rank's end: where
 * ranks share a core, what one rank's clock sees depends on when the kernel
 * ran it.  t_comm first alone, to calibrate the compute loop; then
 * OVERLAP_ROUNDS rounds of the three phases. */
static void overlap_point(const char *strategy, const char *buf, uint8_t *sbuf, uint8_t *rbuf, size_t block)
{
	struct ovl o = { .sbuf = sbuf, .rbuf = rbuf, .block = block };
	double t0, warm = 0, last = 0;
	ferry_req_t *req;
	long n, m;
	int ret;

	for (long w = 0; w < warmup; w++) {
		o.seq = seq_next++;
		fill(sbuf, block, 0, o.seq);
		memset(rbuf, 0xee, block * P);
		t0 = now_s();
		if ((ret = ferry_ialltoall(f, sbuf, rbuf, block, &req)) < 0 || (ret = ferry_wait(&req)) < 0)
			fail("warm-up ferry_ialltoall", ret);
		if (w > 0)
			warm += now_s() - t0;
		check(rbuf, block, 0, o.seq, o.seq, "warm-up");
	}
	n = iters_for(agree_max(warmup > 1 ? warm / (double)(warmup - 1) : 0));
	m = (n + OVERLAP_ROUNDS - 1) / OVERLAP_ROUNDS;
	n = m * OVERLAP_ROUNDS;
	/* the stamps count on from seq_next; the blocks stay as the last
	 * warm-up filled them */
	o.k = seq_next;
	/* the compute loop lasts about t_comm (the slowest rank's) */
	o.c = calibrate(agree_max(ovl_phase(&o, 0, m) / (double)m));
	for (int r = 0; r < OVERLAP_ROUNDS; r++)
		ovl_round(&o, r, m, &last);
	seq_next = o.k;
	printf("point op overlap strategy %s buf %s block %zu delta 0 iters %ld comm_s %.9f compute_s %.9f "
	       "total_s %.9f compute_in_s %.9f post_s %.9f wait_s %.9f\n",
	       strategy, buf, block, n, o.comm / (double)n, o.comp / (double)n, o.total / (double)n,
	       o.in / (double)n, o.post / (double)n, o.wait / (double)n);
	fflush(stdout);
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "blocks", required_argument, NULL, 'b' }, { "deltas", required_argument, NULL, 'd' },
		{ "strategy", required_argument, NULL, 's' }, { "alloc", no_argument, NULL, 'a' },
		{ "warmup", required_argument, NULL, 'w' }, { "target-s", required_argument, NULL, 't' },
		{ "min-iters", required_argument, NULL, 'm' }, { "max-iters", required_argument, NULL, 'M' },
		{ NULL, 0, NULL, 0 },
	};
	long blocks[MAXLIST], deltas[MAXLIST] = { 0 }, maxb = 0;
	int nb = 0, nd = 1, opt, ret, use_alloc = 0;
	const char *mode, *strategy = "auto", *buf;
	uint8_t *sbuf, *rbuf;
	double t0;
	char *end;

	if (argc < 2 || (strcmp(argv[1], "alltoall") && strcmp(argv[1], "many") && strcmp(argv[1], "overlap"))) {
		fprintf(stderr, "usage: fb_coll alltoall|many|overlap --blocks B[,B...] [options]\n");
		return 2;
	}
	mode = argv[1];
	optind = 2;
	while ((opt = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (opt) {
		case 'b': nb = parse_list("--blocks", optarg, blocks); break;
		case 'd': nd = parse_list("--deltas", optarg, deltas); break;
		case 's': strategy = optarg; break;
		case 'a': use_alloc = 1; break;
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
	if (nb == 0 || warmup < 1 || min_iters < 1 || max_iters < min_iters)
		return 2;
	for (int i = 0; i < nb; i++) {
		if (blocks[i] < 1 || blocks[i] > (1L << 24))
			return 2;
		maxb = blocks[i] > maxb ? blocks[i] : maxb;
	}
	t0 = now_s();
	ret = ferry_open(&f, NULL);
	if (ret < 0) {
		fprintf(stderr, "ferry_open: %s\n", ferry_last_error());
		return 1;
	}
	me = (uint32_t)ferry_rank(f);
	P = (uint32_t)ferry_size(f);
	for (int i = 0; i < nd; i++)
		if (deltas[i] < 0 || deltas[i] >= (long)P || (strcmp(mode, "many") == 0 && deltas[i] == 0)) {
			fprintf(stderr, "--deltas: between 1 and %u\n", P - 1);
			return 2;
		}
	if (strcmp(strategy, "auto") != 0 && (ret = ferry_coll_strategy(f, "alltoall", strategy)) < 0)
		fail("ferry_coll_strategy", ret);
	buf = use_alloc ? "alloc" : "staged";
	if (use_alloc) {
		if ((ret = ferry_alloc(f, (size_t)maxb * P, (void **)&sbuf)) < 0 ||
		    (ret = ferry_alloc(f, (size_t)maxb * P, (void **)&rbuf)) < 0)
			fail("ferry_alloc", ret);
	} else if (!(sbuf = malloc((size_t)maxb * P)) || !(rbuf = malloc((size_t)maxb * P))) {
		fprintf(stderr, "out of memory\n");
		return 1;
	}
	for (int i = 0; i < nb; i++)
		for (int j = 0; j < nd; j++) {
			if (strcmp(mode, "overlap") == 0)
				overlap_point(strategy, buf, sbuf, rbuf, (size_t)blocks[i]);
			else
				timed_point(mode, strategy, buf, sbuf, rbuf, (size_t)blocks[i], deltas[j]);
		}
	if (use_alloc) {
		ferry_free(f, sbuf);
		ferry_free(f, rbuf);
	} else {
		free(sbuf);
		free(rbuf);
	}
	printf("elapsed_s %.6f\n", now_s() - t0);
	if ((ret = ferry_close(f)) < 0)
		fail("ferry_close", ret);
	return 0;
}
