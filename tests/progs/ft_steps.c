/* tests/progs/ft_steps.c - a job that runs steps until told to stop, to see
 * how steps end when a rank or a node goes away.
 *
 *   ft_steps --job J --rank R --size P [--steps S] [--items K] [--die-at S2]
 *            [--gap-ms MS] [--linger MS] [--start-ms MS]
 *
 * Every step: K items of 32 bytes to every rank, ferry_done, then
 * ferry_step_wait (for ever), receiving what arrives.  With --die-at, this
 * rank exits at once (no ferry_done, no ferry_close) when step S2 begins.
 * With --gap-ms, it sleeps MS milliseconds after each step (so that a job of
 * S steps lasts about S x MS ms, whatever the machine's speed).
 * With --start-ms, it sleeps MS milliseconds once the job is ready, before
 * its first step.
 * With --linger, it stays in the job MS ms after its last step (completed
 * or failed) before ferry_close, keeping the job alive meanwhile.
 * With --end poll or --end fd, it ends each step as README "Sending and
 * receiving" recommends: after ferry_done it takes items with
 * ferry_recv(..., 0) until none is left, asks ferry_step_wait(f, 0), and
 * sleeps in ferry_poll(FERRY_POLLIN) (poll) or on ferry_fd() (fd); a sleep
 * of 5 s that nothing ends is a failure (exit 1): the step's end must wake
 * it.
 * Prints "rank R running" once the job is ready, "rank R ok: S steps" and
 * exits 0 when all steps completed, or
 * "rank R step N: ERRNAME: message" and exits 3 when ferry_step_wait failed
 * (what the test looks for), 1 on any other error.
 */
#include "common.h"

#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <string.h>
#include <unistd.h>

/* --end poll|fd: see above.  Returns ferry_step_wait's 0 or error. */
static int end_step(ferry_t *f, int rank, long s, const char *end)
{
	struct ferry_item it[64];
	int ret;

	for (;;) {
		while ((ret = ferry_recv(f, it, 64, 0)) > 0)
			;
		if (ret < 0)
			return ret;
		if ((ret = ferry_step_wait(f, 0)) != -ETIMEDOUT)
			return ret;
		if (!strcmp(end, "poll")) {
			ret = ferry_poll(f, FERRY_POLLIN, 5000);
		} else {
			struct pollfd p = { .fd = ferry_fd(f), .events = POLLIN };

			ret = poll(&p, 1, 5000);
		}
		if (ret < 0)
			return ret;
		if (ret == 0) {
			fprintf(stderr, "rank %d step %ld: asleep (%s) for 5 s through the step's end\n", rank, s, end);
			exit(1);
		}
	}
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "job", required_argument, NULL, 'j' }, { "rank", required_argument, NULL, 'r' },
		{ "size", required_argument, NULL, 'p' }, { "steps", required_argument, NULL, 's' },
		{ "items", required_argument, NULL, 'k' }, { "die-at", required_argument, NULL, 'd' },
		{ "gap-ms", required_argument, NULL, 'g' }, { "linger", required_argument, NULL, 'L' },
		{ "start-ms", required_argument, NULL, 'S' }, { "end", required_argument, NULL, 'e' },
		{ NULL, 0, NULL, 0 },
	};
	struct ferry_opts fo = { 0 };
	long steps = 1000000, items = 10, die_at = -1, gap_ms = 0, linger = 0, start_ms = 0;
	const char *end = "wait";
	uint8_t buf[32] = { 0 };
	int opt, ret;
	ferry_t *f;

	while ((opt = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (opt) {
		case 'j': fo.job = optarg; break;
		case 'r': fo.rank = (int)arg_long("--rank", optarg); break;
		case 'p': fo.size = (int)arg_long("--size", optarg); break;
		case 's': steps = arg_long("--steps", optarg); break;
		case 'k': items = arg_long("--items", optarg); break;
		case 'd': die_at = arg_long("--die-at", optarg); break;
		case 'g': gap_ms = arg_long("--gap-ms", optarg); break;
		case 'L': linger = arg_long("--linger", optarg); break;
		case 'S': start_ms = arg_long("--start-ms", optarg); break;
		case 'e': end = optarg; break;
		default: return 2;
		}
	}
	ret = ferry_open(&f, &fo);
	if (ret < 0) {
		fprintf(stderr, "ferry_open: %s: %s\n", ferry_strerror(ret), ferry_last_error());
		return 1;
	}
	printf("rank %d running\n", fo.rank);
	fflush(stdout);
	if (start_ms > 0)
		usleep((useconds_t)start_ms * 1000);
	for (long s = 1; s <= steps; s++) {
		struct ferry_item it[64];

		if (s == die_at) {
			printf("rank %d dies at step %ld\n", fo.rank, s);
			fflush(stdout);
			_exit(0);
		}
		for (int dst = 0; dst < fo.size; dst++)
			for (long k = 0; k < items; k++) {
				ret = ferry_send(f, (uint32_t)dst, 0, buf, sizeof(buf));
				if (ret == -EAGAIN) {
					ferry_recv(f, it, 64, 0);
					k--;
					continue;
				}
				if (ret < 0) {
					fprintf(stderr, "rank %d step %ld: ferry_send: %s: %s\n", fo.rank, s,
						ferry_strerror(ret), ferry_last_error());
					return 1;
				}
			}
		ret = ferry_done(f);
		if (ret == 0)
			ret = strcmp(end, "wait") ? end_step(f, fo.rank, s, end) : ferry_step_wait(f, -1);
		if (ret < 0) {
			printf("rank %d step %ld: %s: %s\n", fo.rank, s, ferry_strerror(ret), ferry_last_error());
			fflush(stdout);
			if (linger > 0)
				usleep((useconds_t)linger * 1000);
			ferry_close(f);
			return 3;
		}
		while (ferry_recv(f, it, 64, 0) > 0)
			;
		if (gap_ms > 0)
			usleep((useconds_t)gap_ms * 1000);
	}
	if (linger > 0)
		usleep((useconds_t)linger * 1000);
	ferry_close(f);
	printf("rank %d ok: %ld steps\n", fo.rank, steps);
	return 0;
}
