/* tests/bench/fb_pingpong.c - latency: rank 0 and rank 1 bounce an 8-byte
 * item N times (ferry_flush after every send, so no aggregation buffer holds
 * it).  Rank 0 prints "oneway_us X" (round trip / 2, mean over N after a
 * warm-up).  Job, rank and size come from the environment (size 2). */
#include "../progs/common.h"

#include <getopt.h>

int main(int argc, char **argv)
{
	long n = 20000, warm = 1000;
	struct ferry_item it;
	uint64_t v = 0;
	ferry_t *f;
	double t0 = 0;

	if (argc > 1)
		n = atol(argv[1]);
	if (ferry_open(&f, NULL) < 0) {
		fprintf(stderr, "ferry_open: %s\n", ferry_last_error());
		return 1;
	}
	for (long i = 0; i < n + warm; i++) {
		if (i == warm)
			t0 = now_s();
		if (ferry_rank(f) == 0) {
			ferry_send(f, 1, 0, &v, sizeof(v));
			ferry_flush(f);
		}
		if (ferry_recv(f, &it, 1, 10000) != 1) {
			fprintf(stderr, "ping-pong stalled at %ld\n", i);
			return 1;
		}
		memcpy(&v, it.data, sizeof(v));
		v++;
		if (ferry_rank(f) == 1) {
			ferry_send(f, 0, 0, &v, sizeof(v));
			ferry_flush(f);
		}
	}
	if (ferry_rank(f) == 0)
		printf("oneway_us %.3f\n", (now_s() - t0) / (double)n / 2 * 1e6);
	ferry_close(f);
	return 0;
}
