/* tests/bench/raw_ring.c - what shared memory itself does, the comparator for
 * the client-daemon path: ferry's own ring code between two processes,
 * without a daemon.
 *
 *   raw_ring pingpong N    8-byte records bounced through two rings, both
 *                          sides spinning; "oneway_us X"
 *   raw_ring rate N        N 16-byte records one way; "records_per_s X"
 *   raw_ring memcpy        memcpy bandwidth; "gbytes_per_s_16k X" and "..._1m X"
 *
 * Both processes spin while they wait; when their affinity allows one CPU
 * only (the "pinned" layout of make bench, where the application processes
 * share CPU 0) they yield the CPU while they spin, as libferry's spinning
 * loops do, so that the other one can run.
 */
#include "../../proto/ring.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static int one_cpu;     /* our affinity allows one CPU: yield while spinning */

static void put(struct ring *r, const void *p, uint32_t len)
{
	struct proto_rec *rec;

	while (!(rec = ring_reserve_fast(r, len)) && ring_reserve(r, len, &rec) != 0)
		if (one_cpu)
			sched_yield();
	*rec = (struct proto_rec){ .len = len, .kind = PROTO_REC_ITEM };
	memcpy(rec + 1, p, len);
	ring_publish(r);
}

/* Takes one record; gives the room back every `batch` records (1 for the
 * ping-pong, more for the rate: what a real consumer does). */
static void get(struct ring *r, void *p, long i, long batch)
{
	struct proto_rec rec;
	const void *pl;

	while (ring_peek(r, &rec, &pl) != 1)
		if (one_cpu)
			sched_yield();
	memcpy(p, pl, rec.len);
	ring_consume(r, &rec);
	if (i % batch == batch - 1)
		ring_release(r);
}

int main(int argc, char **argv)
{
	uint64_t size = 1 << 20;
	uint8_t *mem = mmap(NULL, 2 * ring_bytes(size), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	struct ring a, b;
	long n = argc > 2 ? atol(argv[2]) : 1000000;
	pid_t child;
	cpu_set_t cpus;

	if (argc < 2)
		return 2;
	one_cpu = sched_getaffinity(0, sizeof(cpus), &cpus) == 0 && CPU_COUNT(&cpus) == 1;
	if (!strcmp(argv[1], "memcpy")) {
		size_t sizes[2] = { 16 << 10, 1 << 20 };

		for (int k = 0; k < 2; k++) {
			char *s = calloc(1, sizes[k]), *d = calloc(1, sizes[k]);
			long reps = (long)((8ull << 30) / sizes[k]);
			double t0 = now();

			for (long i = 0; i < reps; i++) {
				memcpy(d, s, sizes[k]);
				__asm__ volatile("" : : "r"(d) : "memory");
			}
			printf("gbytes_per_s_%s %.2f\n", k ? "1m" : "16k", (double)reps * (double)sizes[k] / (now() - t0) / 1e9);
		}
		return 0;
	}
	ring_attach(&a, mem, size, 1);
	ring_attach(&b, mem + ring_bytes(size), size, 1);
	/* Nobody sleeps here: the parent publishes into a without a fence,
	 * the best case, offered by a's consumer as ferryd offers it.  (The
	 * child publishes into b with a fence.) */
	ring_consumer_offer_fenceless(&a);
	child = fork();
	if (child == 0) {
		uint8_t v[16];

		ring_attach(&a, mem, size, 0);
		ring_attach(&b, mem + ring_bytes(size), size, 0);
		if (!strcmp(argv[1], "pingpong")) {
			for (long i = 0; i < n + 1000; i++) {
				get(&a, v, i, 1);
				put(&b, v, 8);
			}
		} else {
			for (long i = 0; i < n; i++)
				get(&a, v, i, 256);
			ring_release(&a);
			put(&b, v, 8);
		}
		return 0;
	}
	ring_producer_set_fenceless(&a, 1);
	if (!strcmp(argv[1], "pingpong")) {
		uint8_t v[8] = { 0 };
		double t0 = 0;

		for (long i = 0; i < n + 1000; i++) {
			if (i == 1000)
				t0 = now();
			put(&a, v, 8);
			get(&b, v, i, 1);
		}
		printf("oneway_us %.3f\n", (now() - t0) / (double)n / 2 * 1e6);
	} else {
		uint8_t v[16] = { 0 };
		double t0 = now();

		for (long i = 0; i < n; i++)
			put(&a, v, 16);
		get(&b, v, 0, 1);
		printf("records_per_s %.0f\n", (double)n / (now() - t0));
	}
	waitpid(child, NULL, 0);
	return 0;
}
