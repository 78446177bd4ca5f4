/* tests/bench/fb_bw.c - bandwidth of large items: rank 0 sends MB megabytes
 * in items of S bytes to rank 1, which prints "gbytes_per_s X" (first to last
 * byte).  Job, rank and size from the environment (size 2).
 *
 *   fb_bw S MB
 */
#include "../progs/common.h"

#include <errno.h>

int main(int argc, char **argv)
{
	long S = argc > 1 ? atol(argv[1]) : 1 << 20, MB = argc > 2 ? atol(argv[2]) : 256;
	long n = (MB << 20) / S;
	uint8_t *buf = calloc(1, (size_t)S);
	ferry_t *f;

	if (ferry_open(&f, NULL) < 0) {
		fprintf(stderr, "ferry_open: %s\n", ferry_last_error());
		return 1;
	}
	if (ferry_rank(f) == 0) {
		for (long i = 0; i < n;) {
			int ret = ferry_send(f, 1, 0, buf, (size_t)S);

			if (ret == 0)
				i++;
			else if (ret != -EAGAIN || ferry_poll(f, FERRY_POLLOUT, -1) < 0)
				return 1;
		}
		ferry_flush(f);
	} else {
		struct ferry_item it[16];
		double t0 = 0;

		for (long got = 0; got < n;) {
			int k = ferry_recv(f, it, 16, 20000);

			if (k <= 0)
				return 1;
			if (got == 0)
				t0 = now_s();
			got += k;
		}
		/* The first item's time is its arrival: count the bytes after it. */
		printf("gbytes_per_s %.3f\n", (double)(n - 1) * (double)S / (now_s() - t0) / 1e9);
	}
	ferry_close(f);
	free(buf);
	return 0;
}
