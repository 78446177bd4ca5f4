/* tests/bench/fb_rate.c - how fast one process hands 16-byte items to ferryd.
 *
 *   fb_rate [--job J --rank R --size 2] [--items N] [--len L] [--batch]
 *
 * --batch: both ranks open with FERRY_BATCH.
 * Rank 0 sends N items to rank 1 and prints "send_ns_per_item X" (the time
 * ferry_send takes while the ring has room: the benchmark configuration gives
 * it a ring large enough for all of them), "send_cpu_ns_per_item X" (the
 * CPU time of the sending thread over the same loop: the call's own cost,
 * without the time slices of other processes on its core) and
 * "send_items_per_s X".  Rank 1
 * receives them and prints "recv_items_per_s X" (from its first to its last
 * item): the rate at which the daemons routed and delivered them.
 */
#include "../progs/common.h"

#include <errno.h>
#include <getopt.h>

/* CPU time this thread has used: what ferry_send itself costs, whoever
 * else runs on the core meanwhile (the receiver, in the pinned layout). */
static double cpu_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "job", required_argument, NULL, 'j' }, { "rank", required_argument, NULL, 'r' },
		{ "size", required_argument, NULL, 'p' }, { "items", required_argument, NULL, 'n' },
		{ "len", required_argument, NULL, 'l' }, { "batch", no_argument, NULL, 'b' }, { NULL, 0, NULL, 0 },
	};
	struct ferry_opts fo = { 0 };   /* rank and size from the environment unless given */
	long n = 1000000, len = 16, eagain = 0;
	uint8_t buf[256] = { 0 };
	ferry_t *f;
	int opt, ret;

	while ((opt = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (opt) {
		case 'j': fo.job = optarg; break;
		case 'r': fo.rank = (int)arg_long("--rank", optarg); fo.size = fo.size ? fo.size : 2; break;
		case 'p': fo.size = (int)arg_long("--size", optarg); break;
		case 'n': n = arg_long("--items", optarg); break;
		case 'l': len = arg_long("--len", optarg); break;
		case 'b': fo.flags |= FERRY_BATCH; break;
		default: return 2;
		}
	}
	ret = ferry_open(&f, &fo);
	if (ret < 0) {
		fprintf(stderr, "ferry_open: %s\n", ferry_last_error());
		return 1;
	}
	if (ferry_rank(f) == 0) {
		double t0 = now_s(), c0 = cpu_s(), t, c;

		for (long i = 0; i < n;) {
			ret = ferry_send(f, 1, 0, buf, (size_t)len);
			if (ret == 0) {
				i++;
				continue;
			}
			if (ret != -EAGAIN) {
				fprintf(stderr, "ferry_send: %s\n", ferry_last_error());
				return 1;
			}
			eagain++;
			/* Sleep until the daemon makes room (README, "Sending
			 * and receiving"). */
			if ((ret = ferry_poll(f, FERRY_POLLOUT, -1)) < 0) {
				fprintf(stderr, "ferry_poll: %s\n", ferry_last_error());
				return 1;
			}
		}
		t = now_s() - t0;
		c = cpu_s() - c0;
		ferry_flush(f);
		printf("send_ns_per_item %.2f\nsend_cpu_ns_per_item %.2f\nsend_items_per_s %.0f\neagain %ld\n",
		       t * 1e9 / (double)n, c * 1e9 / (double)n, (double)n / t, eagain);
	} else {
		struct ferry_item it[256];
		double t0 = 0, t1 = 0;

		for (long got = 0; got < n;) {
			int k = ferry_recv(f, it, 256, 20000);

			if (k <= 0) {
				fprintf(stderr, "ferry_recv: %s after %ld items\n", k ? ferry_last_error() : "timeout", got);
				return 1;
			}
			if (got == 0)
				t0 = now_s();
			got += k;
			t1 = now_s();
		}
		printf("recv_items_per_s %.0f\n", (double)(n - 1) / (t1 - t0));
	}
	ferry_close(f);
	return 0;
}
