/* tests/progs/ft_direct.c - direct rings (README, "Direct rings") where a
 * FERRY_BLOCKING sender waits for room, on a real daemon:
 *
 *   ft_direct --job J --rank R --mode fdstash    two processes (ranks 0, 1)
 *   ft_direct --job J --mode selflock            one process (a 1-rank job)
 *
 * fdstash: rank 0 (FERRY_BLOCKING) arms ferry_fd() with an empty
 * ferry_recv(..., 0), then sends rank 1 thirty 60 KB items, more than its
 * ring holds; rank 1 takes nothing for 0.6 s but sends rank 0 one item
 * ("hello") after 0.3 s, which rank 0 keeps while it waits for room, then
 * takes one item every 20 ms (so that no wake-up is left over), and stays
 * 3 s after the last.  Once
 * its sends are done, rank 0's ferry_fd() must be readable (within 2 s)
 * and ferry_recv(..., 0) must return "hello".  Rank 1 must get all thirty
 * items, in order.
 * selflock: rank 0 (FERRY_BLOCKING) sends itself an item and receives it
 * (holding it), then fills its own ring: the send that finds no room must
 * fail with -EDEADLK at once rather than wait for ever; after
 * ferry_release, a 1.5 MB item to itself goes through, whole.
 * Prints "ok ..." lines, or "FAIL ..." and exits 1.
 */
#include "common.h"

#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <string.h>
#include <unistd.h>

#define FAIL(...) do { \
	printf("FAIL: "); printf(__VA_ARGS__); printf(" (%s)\n", ferry_last_error()); exit(1); \
} while (0)

static void fdstash(ferry_t *f, int rank)
{
	static uint8_t big[60000];
	struct ferry_item it[8];
	int n, ret;

	if (rank == 0) {
		struct pollfd p = { .fd = ferry_fd(f), .events = POLLIN };

		if ((n = ferry_recv(f, it, 8, 0)) != 0)
			FAIL("rank 0: ferry_recv found %d items before anything was sent", n);
		for (uint32_t i = 0; i < 30; i++) {
			memcpy(big, &i, sizeof(i));
			if ((ret = ferry_send(f, 1, 0, big, sizeof(big))) != 0)
				FAIL("rank 0: ferry_send %u: %s", i, ferry_strerror(ret));
		}
		if (poll(&p, 1, 2000) != 1)
			FAIL("rank 0: ferry_fd() not readable with an item kept while ferry_send waited");
		n = ferry_recv(f, it, 8, 0);
		if (n != 1 || it[0].len != 5 || memcmp(it[0].data, "hello", 5) != 0)
			FAIL("rank 0: ferry_recv returned %d items, not the one \"hello\"", n);
		printf("ok rank 0: ferry_fd() readable for the item kept while ferry_send waited\n");
		return;
	}
	usleep(300000);
	if ((ret = ferry_send(f, 0, 0, "hello", 5)) != 0)
		FAIL("rank 1: ferry_send: %s", ferry_strerror(ret));
	usleep(300000);
	for (uint32_t want = 0; want < 30;) {
		usleep(20000);
		n = ferry_recv(f, it, 1, 10000);
		if (n <= 0)
			FAIL("rank 1: ferry_recv returned %d after %u items", n, want);
		for (int k = 0; k < n; k++, want++) {
			uint32_t v;

			memcpy(&v, it[k].data, sizeof(v));
			if (it[k].len != sizeof(big) || v != want)
				FAIL("rank 1: item %u has length %u, number %u", want, it[k].len, v);
		}
	}
	printf("ok rank 1: all 30 items, in order\n");
	/* Stay: our leaving would wake rank 0 (ferryd marks our slot gone)
	 * and hide a missing wake-up. */
	sleep(3);
}

static void selflock(ferry_t *f)
{
	static uint8_t big[1500000];
	struct ferry_item it;
	int ret, n, sent = 0;

	if ((ret = ferry_send(f, 0, 0, "ping", 4)) != 0 || ferry_recv(f, &it, 1, 5000) != 1)
		FAIL("first item to itself: %s", ferry_strerror(ret));
	/* Holding it: fill the ring, then one more. */
	while ((ret = ferry_send(f, 0, 1, big, 60000)) == 0)
		if (++sent > 100)
			FAIL("100 items of 60 KB fit a ring of 256 KiB");
	if (ret != -EDEADLK)
		FAIL("ferry_send with its own ring full and its room held returned %d, not -EDEADLK", ret);
	printf("ok -EDEADLK after %d items, at once\n", sent);
	ferry_release(f);
	for (int i = 0; i < sent; i++)
		if ((n = ferry_recv(f, &it, 1, 5000)) != 1 || it.len != 60000)
			FAIL("item %d of the ring back: %d", i, n);
	ferry_release(f);
	memset(big, 7, sizeof(big));
	if ((ret = ferry_send(f, 0, 2, big, sizeof(big))) != 0)
		FAIL("a 1.5 MB item to itself: %s", ferry_strerror(ret));
	if ((n = ferry_recv(f, &it, 1, 5000)) != 1 || it.len != sizeof(big) ||
	    ((const uint8_t *)it.data)[sizeof(big) - 1] != 7)
		FAIL("the 1.5 MB item back: %d items, %u bytes", n, n == 1 ? it.len : 0);
	printf("ok a 1.5 MB item to itself with FERRY_BLOCKING, once released\n");
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "job", required_argument, NULL, 'j' }, { "rank", required_argument, NULL, 'r' },
		{ "mode", required_argument, NULL, 'm' }, { NULL, 0, NULL, 0 },
	};
	struct ferry_opts o = { .timeout_ms = 30000 };
	const char *mode = "";
	ferry_t *f;
	int opt, ret;

	while ((opt = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (opt) {
		case 'j': o.job = optarg; break;
		case 'r': o.rank = atoi(optarg); break;
		case 'm': mode = optarg; break;
		default: return 2;
		}
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	o.size = strcmp(mode, "selflock") == 0 ? 1 : 2;
	if (o.rank == 0)
		o.flags = FERRY_BLOCKING;
	if ((ret = ferry_open(&f, &o)) < 0)
		FAIL("ferry_open: %s", ferry_strerror(ret));
	if (strcmp(mode, "fdstash") == 0)
		fdstash(f, o.rank);
	else if (strcmp(mode, "selflock") == 0)
		selflock(f);
	else
		FAIL("unknown mode %s", mode);
	if ((ret = ferry_close(f)) != 0)
		FAIL("ferry_close: %s", ferry_strerror(ret));
	return 0;
}
