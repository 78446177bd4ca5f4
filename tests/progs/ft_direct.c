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
 * hoard (3 ranks): rank 0 (FERRY_BLOCKING) sends rank 1 a hundred 60 KB
 * items, which rank 1 takes only after 3 s; meanwhile rank 2 sends rank 0
 * 60 KB items for 2.5 s (retrying on -EAGAIN), then one 4-byte item with
 * their count.  What rank 0 keeps while it waits stops at 16 MiB: its peak
 * resident memory (VmHWM) must stay below 48 MB (rank 2 sends far more),
 * and every item of rank 2 must arrive, in order.
 * nomembar: rank 1 takes one item from rank 0, then forbids itself
 * membarrier (a seccomp filter: EPERM) and waits 0.3 s for another.  Where
 * it offered its writers to publish without a fence (proto/ring.h "Late
 * offers"), that wait must fail at once with an error naming membarrier
 * rather than sleep on items it might not see; with
 * FERRY_DIRECT_FENCELESS=0 it must time out quietly and then get rank 0's
 * second item, sent after 1 s.
 * Prints "ok ..." lines, or "FAIL ..." and exits 1.
 */
#include "common.h"

#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <seccomp.h>
#include <stdlib.h>
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

/* This process's peak resident memory, in KiB (VmHWM). */
static long vm_hwm_kib(void)
{
	char line[256];
	long kib = -1;
	FILE *s = fopen("/proc/self/status", "r");

	while (s && fgets(line, sizeof(line), s))
		if (sscanf(line, "VmHWM: %ld kB", &kib) == 1)
			break;
	if (s)
		fclose(s);
	return kib;
}

static void hoard(ferry_t *f, int rank)
{
	static uint8_t big[60000];
	struct ferry_item it[16];
	int n, ret;

	if (rank == 0) {
		uint32_t want = 0, total = UINT32_MAX;
		long hwm;

		for (uint32_t i = 0; i < 100; i++)
			if ((ret = ferry_send(f, 1, 0, big, sizeof(big))) != 0)
				FAIL("rank 0: ferry_send %u: %s", i, ferry_strerror(ret));
		hwm = vm_hwm_kib();
		while (want != total) {
			n = ferry_recv(f, it, 16, 10000);
			if (n <= 0)
				FAIL("rank 0: ferry_recv returned %d after %u items of rank 2", n, want);
			for (int k = 0; k < n; k++) {
				uint32_t v;

				memcpy(&v, it[k].data, sizeof(v));
				if (it[k].len == sizeof(v))
					total = v;
				else if (it[k].len != sizeof(big) || v != want++)
					FAIL("rank 0: item %u of rank 2 has length %u, number %u", want - 1, it[k].len, v);
			}
			if (total != UINT32_MAX && want != total)
				FAIL("rank 0: rank 2 sent %u items, %u came before its count", total, want);
		}
		if (hwm < 0 || hwm > 48 * 1024)
			FAIL("rank 0: peak resident memory %ld KiB while it waited, above 48 MB", hwm);
		printf("ok rank 0: peak %ld KiB while it waited; all %u items of rank 2, in order\n", hwm, total);
		return;
	}
	if (rank == 1) {
		sleep(3);
		for (uint32_t got = 0; got < 100; got += (uint32_t)n)
			if ((n = ferry_recv(f, it, 16, 10000)) <= 0)
				FAIL("rank 1: ferry_recv returned %d after %u items", n, got);
		printf("ok rank 1: 100 items\n");
		return;
	}
	{
		double end = now_s() + 2.5;
		uint32_t sent = 0;

		while (now_s() < end) {
			memcpy(big, &sent, sizeof(sent));
			ret = ferry_send(f, 0, 0, big, sizeof(big));
			if (ret == 0)
				sent++;
			else if (ret == -EAGAIN)
				usleep(100);
			else
				FAIL("rank 2: ferry_send: %s", ferry_strerror(ret));
		}
		while ((ret = ferry_send(f, 0, 0, &sent, sizeof(sent))) == -EAGAIN)
			usleep(1000);
		if (ret != 0)
			FAIL("rank 2: ferry_send of the count: %s", ferry_strerror(ret));
		printf("ok rank 2: sent %u items (%u MB)\n", sent, sent * 60 / 1000);
	}
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

static void nomembar(ferry_t *f, int rank)
{
	const char *fl = getenv("FERRY_DIRECT_FENCELESS");
	int fenceless = !(fl && strcmp(fl, "0") == 0);
	struct ferry_item it;
	scmp_filter_ctx ctx;
	int n, ret;

	if (rank == 0) {
		if ((ret = ferry_send(f, 1, 0, "a", 1)) != 0)
			FAIL("rank 0: ferry_send: %s", ferry_strerror(ret));
		sleep(1);
		if ((ret = ferry_send(f, 1, 0, "b", 1)) != 0)
			FAIL("rank 0: ferry_send: %s", ferry_strerror(ret));
		return;
	}
	if ((n = ferry_recv(f, &it, 1, 10000)) != 1 || it.len != 1 || *(const char *)it.data != 'a')
		FAIL("rank 1: the first item: %d", n);
	ferry_release(f);
	ctx = seccomp_init(SCMP_ACT_ALLOW);
	if (!ctx || seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(membarrier), 0) != 0 ||
	    seccomp_load(ctx) != 0)
		FAIL("rank 1: no seccomp filter");
	seccomp_release(ctx);
	n = ferry_recv(f, &it, 1, 300);
	if (fenceless) {
		if (n >= 0 || !strstr(ferry_last_error(), "membarrier"))
			FAIL("rank 1: a wait without membarrier returned %d, not an error naming it", n);
		printf("ok rank 1: %s\n", ferry_last_error());
		exit(0);        /* (the handle is dead: nothing to close) */
	}
	if (n != 0)
		FAIL("rank 1: a wait with nothing sent returned %d", n);
	if ((n = ferry_recv(f, &it, 1, 10000)) != 1 || *(const char *)it.data != 'b')
		FAIL("rank 1: the second item: %d", n);
	printf("ok rank 1: no offer, no membarrier needed\n");
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
	o.size = strcmp(mode, "selflock") == 0 ? 1 : strcmp(mode, "hoard") == 0 ? 3 : 2;
	if (o.rank == 0)
		o.flags = FERRY_BLOCKING;
	if ((ret = ferry_open(&f, &o)) < 0)
		FAIL("ferry_open: %s", ferry_strerror(ret));
	if (strcmp(mode, "fdstash") == 0)
		fdstash(f, o.rank);
	else if (strcmp(mode, "selflock") == 0)
		selflock(f);
	else if (strcmp(mode, "hoard") == 0)
		hoard(f, o.rank);
	else if (strcmp(mode, "nomembar") == 0)
		nomembar(f, o.rank);
	else
		FAIL("unknown mode %s", mode);
	if ((ret = ferry_close(f)) != 0)
		FAIL("ferry_close: %s", ferry_strerror(ret));
	return 0;
}
