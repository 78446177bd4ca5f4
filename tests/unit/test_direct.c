/* tests/unit/test_direct.c - a job's direct rings (daemon/local/direct.c):
 * the region is sealed, of the layout's size, zero, and not populated by
 * ferryd; an endpoint that ends is marked gone and wakes the others, once;
 * a region that cannot be made leaves nothing behind. */
#define UNIT "direct"
#include "check.h"
#include "../../daemon/local/direct.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#define RING (256u * 1024)

/* Endpoints are only identities here. */
static struct ep *const A = (struct ep *)0x1000, *const B = (struct ep *)0x2000, *const C = (struct ep *)0x3000;

/* What an eventfd holds, read (0: nothing was written). */
static uint64_t take(int efd)
{
	uint64_t v = 0;

	if (read(efd, &v, sizeof(v)) < 0)
		return 0;
	return v;
}

/* Pages of the n bytes at p that are in memory. */
static size_t resident(void *p, size_t n)
{
	size_t pages = n / 4096, in = 0;
	unsigned char *vec = malloc(pages);

	if (!vec || mincore(p, n, vec) < 0) {
		free(vec);
		return (size_t)-1;
	}
	for (size_t i = 0; i < pages; i++)
		in += vec[i] & 1;
	free(vec);
	return in;
}

TEST(region_and_gone)
{
	struct direct_slot slots[3] = {
		{ .rank = 4, .ep = A }, { .rank = 7, .ep = B }, { .rank = 9, .ep = C },
	};
	uint64_t bytes = proto_direct_region_bytes(3, RING);
	struct direct *d = NULL;
	struct stat st;
	uint8_t *all;
	int memfd = -1;

	for (int i = 0; i < 3; i++)
		slots[i].efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	CHECK_EQ(direct_create("t", 3, RING, slots, &d, &memfd), 0);
	if (!d)
		return;
	CHECK_EQ(direct_count(), 1);
	CHECK_EQ(direct_stats.jobs, 1);
	CHECK_EQ(d->n, 3);
	CHECK_EQ(d->ring_size, RING);
	CHECK_EQ(d->region_bytes, bytes);
	CHECK(d->slot[1].rank == 7 && d->slot[1].ep == B && d->slot[1].efd == slots[1].efd);
	CHECK_EQ(fstat(memfd, &st), 0);
	CHECK_EQ(st.st_size, bytes);
	CHECK_EQ(fcntl(memfd, F_GET_SEALS), F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL);
	CHECK(ftruncate(memfd, 4096) < 0 && errno == EPERM);

	/* A client's view: zero, and no page allocated yet (ferryd maps the
	 * header without touching it, and never maps the rings). */
	all = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
	CHECK(all != MAP_FAILED);
	if (all == MAP_FAILED)
		return;
	CHECK_EQ(resident(all, bytes), 0);
	CHECK_EQ(all[PROTO_DIRECT_GONE] | all[PROTO_DIRECT_GONE + 1] | all[PROTO_DIRECT_GONE + 2], 0);

	/* B ends: gone[1], and A and C are woken, B's eventfd is left alone. */
	direct_end(d, B);
	CHECK_EQ(all[PROTO_DIRECT_GONE + 1], 1);
	CHECK_EQ(all[PROTO_DIRECT_GONE] | all[PROTO_DIRECT_GONE + 2], 0);
	CHECK_EQ(take(slots[0].efd), 1);
	CHECK_EQ(take(slots[1].efd), 0);
	CHECK_EQ(take(slots[2].efd), 1);
	CHECK(d->slot[1].ep == NULL && d->slot[1].efd == -1);
	/* Once only; an endpoint without a slot, or a job without a region,
	 * changes nothing. */
	direct_end(d, B);
	direct_end(d, (struct ep *)0x4000);
	direct_end(NULL, A);
	CHECK_EQ(take(slots[0].efd) | take(slots[2].efd), 0);
	/* C ends: only A is left to wake; then A, with nobody left. */
	direct_end(d, C);
	CHECK_EQ(take(slots[0].efd), 1);
	CHECK_EQ(take(slots[1].efd), 0);
	direct_end(d, A);
	CHECK_EQ(all[PROTO_DIRECT_GONE] & all[PROTO_DIRECT_GONE + 1] & all[PROTO_DIRECT_GONE + 2], 1);
	CHECK_EQ(take(slots[0].efd) | take(slots[1].efd) | take(slots[2].efd), 0);
	/* Only the header page was written. */
	CHECK_EQ(resident(all, bytes), 1);

	direct_free(d);
	CHECK_EQ(direct_count(), 0);
	direct_free(NULL);
	/* The clients' region lives on without ferryd's mapping. */
	CHECK_EQ(all[PROTO_DIRECT_GONE + 2], 1);
	munmap(all, bytes);
	close(memfd);
	for (int i = 0; i < 3; i++)
		close(slots[i].efd);
}

/* No file descriptor left: the error comes back, is counted, and nothing
 * stays mapped. */
TEST(failure_leaves_nothing)
{
	struct direct_slot slot = { .rank = 0, .ep = A, .efd = -1 };
	struct direct *d = NULL;
	struct rlimit old, none;
	int memfd = -1, lowest = dup(0), ret;

	CHECK(lowest >= 0);
	close(lowest);
	CHECK_EQ(getrlimit(RLIMIT_NOFILE, &old), 0);
	none = old;
	none.rlim_cur = (rlim_t)lowest;         /* no new descriptor fits */
	CHECK_EQ(setrlimit(RLIMIT_NOFILE, &none), 0);
	ret = direct_create("t", 1, RING, &slot, &d, &memfd);
	CHECK_EQ(setrlimit(RLIMIT_NOFILE, &old), 0);
	CHECK_EQ(ret, -EMFILE);
	CHECK(d == NULL && memfd == -1);
	CHECK_EQ(direct_stats.failed, 1);
	CHECK_EQ(direct_count(), 0);
}

int main(void)
{
	RUN(region_and_gone);
	RUN(failure_leaves_nothing);
	return check_done();
}
