/* tests/progs/ft_launch.c - a ferry job as a launcher starts it (srun,
 * mpirun): everything from the environment, then checks of what the job
 * looks like and of each way of moving data.
 *
 *   ft_launch [--items K] [--steps S] [--hold-file PATH]
 *
 * ferry_open with FERRY_BLOCKING and nothing else: job name, rank and size
 * from the launcher's variables, the daemon at the default runtime
 * directory (or FERRY_RUNTIME_DIR).  Prints "rank R size P node N host H local L/C"
 * (N: ferry_node_of this rank; L: this rank's index among the ranks on its
 * node, C how many there are, from ferry_local_ranks; the job's name is in
 * ferryctl status) and "rank R launcher VAR=VALUE..." (the launchers'
 * variables it found, "-" for unset ones), then runs S steps (default 2) in
 * which every rank sends K items (default 50) to every rank, itself
 * included, ends the step (ferry_done, ferry_step_wait) and checks that
 * exactly those items arrived, intact and in order per sender; then an
 * allreduce (the sum of rank + 1 over the job), an all-to-all of one 8-byte
 * block per pair of ranks, each naming its sender and receiver, and a
 * barrier.  With --hold-file it then waits (sleeping) until PATH exists,
 * before ferry_close: a test can look at the daemons while the job is
 * there.  Prints "rank R ok" and exits 0, or says what was wrong and exits 1.
 */
#include "common.h"

#include <errno.h>
#include <getopt.h>
#include <unistd.h>

static const char *env_or(const char *name)
{
	const char *v = getenv(name);

	return v ? v : "-";
}

static int fail(int rank, const char *what, int err)
{
	fprintf(stderr, "rank %d: %s: %s: %s\n", rank, what, ferry_strerror(err), ferry_last_error());
	return 1;
}

/* One step: K items to every rank, then the step's end; every item of the
 * step must then be there, seq in order per sender. */
static int step(ferry_t *f, long s, long k, uint32_t *seq_out, uint32_t *seq_in, uint8_t *buf, uint32_t len)
{
	uint32_t me = (uint32_t)ferry_rank(f), p = (uint32_t)ferry_size(f);
	uint64_t want = (uint64_t)k * p, got = 0;
	struct ferry_item it[64];
	int n = 0, ret;

	for (long i = 0; i < k; i++)
		for (uint32_t d = 0; d < p; d++) {
			fill_item(buf, me, d, seq_out[d]++, len);
			if ((ret = ferry_send(f, d, (uint32_t)s, buf, len)) < 0)
				return fail((int)me, "ferry_send", ret);
		}
	if ((ret = ferry_done(f)) < 0 || (ret = ferry_step_wait(f, 60000)) < 0)
		return fail((int)me, "ending the step", ret);
	/* Faster ranks' items of the next step may follow this step's in the
	 * ring: take this step's count, no more. */
	while (got < want && (n = ferry_recv(f, it, want - got < 64 ? (int)(want - got) : 64, 0)) > 0) {
		for (int i = 0; i < n; i++) {
			uint32_t seq;
			const char *bad = check_item(&it[i], me, &seq);

			if (!bad && it[i].channel != s)
				bad = "item of another step";
			if (!bad && seq != seq_in[it[i].src])
				bad = "out of order";
			if (bad) {
				fprintf(stderr, "rank %u: item from %u: %s\n", me, it[i].src, bad);
				return 1;
			}
			seq_in[it[i].src]++;
		}
		got += (uint64_t)n;
		ferry_release(f);
	}
	if (n < 0)
		return fail((int)me, "ferry_recv", n);
	if (got != want) {
		fprintf(stderr, "rank %u: %llu items in the step, expected %llu\n", me, (unsigned long long)got,
			(unsigned long long)want);
		return 1;
	}
	return 0;
}

static int collectives(ferry_t *f)
{
	int me = ferry_rank(f), p = ferry_size(f), ret;
	uint64_t one = (uint64_t)me + 1, sum = 0;
	uint64_t *out = malloc((size_t)p * 8), *in = calloc((size_t)p, 8);

	if (!out || !in)
		return 1;
	if ((ret = ferry_allreduce(f, &one, &sum, 1, FERRY_UINT64, FERRY_SUM)) < 0)
		return fail(me, "ferry_allreduce", ret);
	if (sum != (uint64_t)p * (uint64_t)(p + 1) / 2) {
		fprintf(stderr, "rank %d: allreduce gave %llu, not %d\n", me, (unsigned long long)sum, p * (p + 1) / 2);
		return 1;
	}
	for (int d = 0; d < p; d++)
		out[d] = (uint64_t)me << 32 | (uint32_t)d;
	if ((ret = ferry_alltoall(f, out, in, 8)) < 0)
		return fail(me, "ferry_alltoall", ret);
	for (int s = 0; s < p; s++)
		if (in[s] != ((uint64_t)s << 32 | (uint32_t)me)) {
			fprintf(stderr, "rank %d: all-to-all block from %d is %016llx\n", me, s,
				(unsigned long long)in[s]);
			return 1;
		}
	if ((ret = ferry_barrier(f)) < 0)
		return fail(me, "ferry_barrier", ret);
	free(out);
	free(in);
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "items", required_argument, NULL, 'k' }, { "steps", required_argument, NULL, 's' },
		{ "hold-file", required_argument, NULL, 'h' }, { NULL, 0, NULL, 0 },
	};
	long k = 50, steps = 2;
	const char *hold = NULL;
	char host[256] = "";
	uint32_t local[64], *seq_out, *seq_in;
	uint8_t buf[64];
	int opt, ret, nlocal, me, idx = -1;
	/* Job, rank and size from the environment (size 0); blocking sends:
	 * a step's items fit in the rings many times over. */
	struct ferry_opts fo = { .flags = FERRY_BLOCKING };
	ferry_t *f;

	while ((opt = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (opt) {
		case 'k': k = arg_long("--items", optarg); break;
		case 's': steps = arg_long("--steps", optarg); break;
		case 'h': hold = optarg; break;
		default: return 2;
		}
	}
	ret = ferry_open(&f, &fo);
	if (ret < 0)
		return fail(-1, "ferry_open", ret);
	me = ferry_rank(f);
	gethostname(host, sizeof(host) - 1);
	nlocal = ferry_local_ranks(f, local, 64);
	for (int i = 0; i < nlocal && i < 64; i++)
		if (local[i] == (uint32_t)me)
			idx = i;
	printf("rank %d size %d node %d host %s local %d/%d\n", me, ferry_size(f),
	       ferry_node_of(f, (uint32_t)me), host, idx, nlocal);
	printf("rank %d launcher SLURM_JOB_ID=%s SLURM_STEP_ID=%s SLURM_PROCID=%s SLURM_LOCALID=%s PMIX_NAMESPACE=%s\n",
	       me, env_or("SLURM_JOB_ID"), env_or("SLURM_STEP_ID"), env_or("SLURM_PROCID"), env_or("SLURM_LOCALID"),
	       env_or("PMIX_NAMESPACE"));
	fflush(stdout);
	seq_out = calloc((size_t)ferry_size(f), sizeof(*seq_out));
	seq_in = calloc((size_t)ferry_size(f), sizeof(*seq_in));
	ret = !seq_out || !seq_in;
	for (long s = 0; s < steps && !ret; s++)
		ret = step(f, s, k, seq_out, seq_in, buf, sizeof(buf));
	if (!ret)
		ret = collectives(f);
	for (int t = 0; !ret && hold && access(hold, F_OK) != 0; t++) {
		if (t == 6000) {
			fprintf(stderr, "rank %d: %s did not appear within 120 s\n", me, hold);
			ret = 1;
		}
		usleep(20000);
	}
	if ((opt = ferry_close(f)) < 0 && !ret)
		ret = fail(me, "ferry_close", opt);
	if (!ret)
		printf("rank %d ok\n", me);
	free(seq_out);
	free(seq_in);
	return ret ? 1 : 0;
}
