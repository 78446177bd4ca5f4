/* tests/progs/ft_memseal.c - a rank that tries to take the pages of its
 * ferry_alloc memory back from under ferryd (review finding: MADV_REMOVE on
 * a region ferryd had mapped, then a collective on it, and ferryd's first
 * touch allocated the pages again, charged to ferryd's memory cgroup).
 *
 *   ft_memseal --job J --mib N
 *
 * A job of one rank: ferry_alloc of N MiB, then madvise(MADV_REMOVE) over
 * all of it (the client's own writable mapping: the kernel would punch a
 * hole in the memfd), then how many of its pages are still in memory
 * (mincore), then a one-rank ferry_alltoall from its first half into its
 * second, every byte checked; around the all-to-all, the machine's shared
 * memory (Shmem in /proc/meminfo), which grows by what the collective had
 * to allocate.  Prints
 *     madv_remove: E resident P of Q
 *     alltoall: ok shmem grew K KiB
 * (E: "done" or the errno's name) and exits 0 if MADV_REMOVE failed with
 * EPERM, every page stayed and the all-to-all moved every byte; 1 if not,
 * 2 on setup errors.
 */
#include "common.h"

#include <errno.h>
#include <getopt.h>
#include <sys/mman.h>
#include <unistd.h>

/* Shmem of /proc/meminfo, in KiB, or -1. */
static long shmem_kib(void)
{
	FILE *f = fopen("/proc/meminfo", "r");
	char line[256];
	long kib = -1;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "Shmem: %ld kB", &kib) == 1)
			break;
	fclose(f);
	return kib;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "job", required_argument, NULL, 'j' }, { "mib", required_argument, NULL, 'm' }, { 0 }
	};
	struct ferry_opts fo = { .rank = 0, .size = 1 };
	size_t bytes = 64u << 20, half, page = (size_t)sysconf(_SC_PAGESIZE), resident = 0, bad = 0;
	unsigned char *vec;
	uint8_t *p;
	ferry_t *f;
	long before, after;
	int c, ret, r, e;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'j': fo.job = optarg; break;
		case 'm': bytes = (size_t)strtoul(optarg, NULL, 0) << 20; break;
		default: return 2;
		}
	}
	half = bytes / 2;
	if ((ret = ferry_open(&f, &fo)) < 0) {
		fprintf(stderr, "ferry_open: %s: %s\n", ferry_strerror(ret), ferry_last_error());
		return 2;
	}
	if ((ret = ferry_alloc(f, bytes, (void **)&p)) < 0) {
		fprintf(stderr, "ferry_alloc: %s: %s\n", ferry_strerror(ret), ferry_last_error());
		return 2;
	}
	/* The region is registered once ferryd has read the MEM message; a
	 * barrier is answered after it (one socket, read in order). */
	if ((ret = ferry_barrier(f)) < 0) {
		fprintf(stderr, "ferry_barrier: %s: %s\n", ferry_strerror(ret), ferry_last_error());
		return 2;
	}
	errno = 0;
	r = madvise(p, bytes, MADV_REMOVE);
	e = errno;
	vec = malloc(bytes / page);
	if (!vec || mincore(p, bytes, vec) < 0) {
		perror("mincore");
		return 2;
	}
	for (size_t i = 0; i < bytes / page; i++)
		resident += vec[i] & 1;
	printf("madv_remove: %s resident %zu of %zu\n", r == 0 ? "done" : e == EPERM ? "EPERM" : strerror(e),
	       resident, bytes / page);
	fflush(stdout);

	for (size_t i = 0; i < half; i++)
		p[i] = (uint8_t)(i * 7 + (i >> 12));
	before = shmem_kib();
	if ((ret = ferry_alltoall(f, p, p + half, half)) < 0) {
		fprintf(stderr, "ferry_alltoall: %s: %s\n", ferry_strerror(ret), ferry_last_error());
		return 1;
	}
	after = shmem_kib();
	for (size_t i = 0; i < half; i++)
		bad += p[half + i] != (uint8_t)(i * 7 + (i >> 12));
	printf("alltoall: %s shmem grew %ld KiB\n", bad ? "wrong bytes" : "ok", after - before);
	ferry_free(f, p);
	free(vec);
	ferry_close(f);
	return r < 0 && e == EPERM && resident == bytes / page && !bad ? 0 : 1;
}
