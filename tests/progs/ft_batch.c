/* tests/progs/ft_batch.c - FERRY_BATCH's promise that a batched item leaves
 * the process when the program runs out of other things to do, on a real
 * daemon (ferry.h FERRY_BATCH).  One process per rank of a 2-rank job:
 *
 *   ft_batch --job J --rank R --mode M [--rounds N]
 *
 * MODE:
 *   recv     N rounds of ping-pong, one 16-byte item each way: each side
 *            sends, then waits in ferry_recv(..., 10000) for the answer
 *   poll     the same, waiting in ferry_poll(FERRY_POLLIN, 10000)
 *   fd       the same, waiting in poll(2) on ferry_fd() after a
 *            ferry_recv(..., 0) that found nothing
 *   flush    rank 0 sends one item, calls ferry_flush, then sleeps 3 s
 *            without calling libferry; rank 1 must have it within 2 s
 *   zero     each rank sends N zero-length items to the other and N to
 *            itself, on channels 0..N-1 in turn, then ferry_done and
 *            ferry_step_wait; each must receive 2N, in order per sender
 *   full     rank 0 fills its TX ring with batches while rank 1 takes
 *            nothing for 1 s, then waits in ferry_poll(FERRY_POLLIN) with
 *            batches still open (the ring has no room for them); rank 1
 *            then answers only once it has every item, which can happen
 *            only if ferry_poll woke on ring room and pushed the rest
 *
 * Every round-trip must complete within 10 s.  Prints "rank R ok: MODE ..."
 * or "rank R FAIL: ..." and exits 1.
 */
#include "common.h"

#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <string.h>
#include <unistd.h>

static int rank;

#define FAIL(...) do { \
	printf("rank %d FAIL: ", rank); printf(__VA_ARGS__); printf(" (%s)\n", ferry_last_error()); \
	fflush(stdout); exit(1); \
} while (0)

/* Waits (as the mode says) for one item; returns its first 4 bytes. */
static uint32_t wait_one(ferry_t *f, const char *mode)
{
	struct ferry_item it;
	uint32_t v = 0;
	int n;

	if (strcmp(mode, "poll") == 0) {
		n = ferry_poll(f, FERRY_POLLIN, 10000);
		if (n != FERRY_POLLIN)
			FAIL("ferry_poll returned %d, not FERRY_POLLIN, within 10 s", n);
		n = ferry_recv(f, &it, 1, 0);
	} else if (strcmp(mode, "fd") == 0) {
		n = ferry_recv(f, &it, 1, 0);
		if (n == 0) {
			struct pollfd p = { .fd = ferry_fd(f), .events = POLLIN };

			if (poll(&p, 1, 10000) != 1)
				FAIL("ferry_fd() did not become readable within 10 s");
			n = ferry_recv(f, &it, 1, 0);
		}
	} else {
		n = ferry_recv(f, &it, 1, 10000);
	}
	if (n != 1)
		FAIL("no item within 10 s (ferry_recv: %d)", n);
	if (it.len >= 4)
		memcpy(&v, it.data, 4);
	return v;
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "job", required_argument, NULL, 'j' }, { "rank", required_argument, NULL, 'r' },
		{ "mode", required_argument, NULL, 'm' }, { "rounds", required_argument, NULL, 'n' },
		{ NULL, 0, NULL, 0 },
	};
	struct ferry_opts o = { .size = 2, .timeout_ms = 30000, .flags = FERRY_BATCH };
	const char *mode = "recv";
	long rounds = 100;
	ferry_t *f;
	int opt, ret, peer;

	while ((opt = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (opt) {
		case 'j': o.job = optarg; break;
		case 'r': o.rank = rank = (int)arg_long("--rank", optarg); break;
		case 'm': mode = optarg; break;
		case 'n': rounds = arg_long("--rounds", optarg); break;
		default: return 2;
		}
	}
	peer = 1 - rank;
	if ((ret = ferry_open(&f, &o)) < 0)
		FAIL("ferry_open: %s", ferry_strerror(ret));

	if (!strcmp(mode, "recv") || !strcmp(mode, "poll") || !strcmp(mode, "fd")) {
		uint8_t item[16] = { 0 };
		double t0 = now_s();

		for (uint32_t i = 0; i < (uint32_t)rounds; i++) {
			if (rank == 1 && wait_one(f, mode) != i)
				FAIL("round %u: another item came", i);
			memcpy(item, &i, 4);
			if ((ret = ferry_send(f, (uint32_t)peer, 0, item, sizeof(item))) < 0)
				FAIL("ferry_send: %s", ferry_strerror(ret));
			if (rank == 0 && wait_one(f, mode) != i)
				FAIL("round %u: another answer came", i);
		}
		printf("rank %d ok: %s: %ld round trips in %.3f s\n", rank, mode, rounds, now_s() - t0);
	} else if (!strcmp(mode, "flush")) {
		uint8_t item[16] = { 7 };

		if (rank == 0) {
			if ((ret = ferry_send(f, 1, 0, item, sizeof(item))) < 0 || (ret = ferry_flush(f)) < 0)
				FAIL("send and flush: %s", ferry_strerror(ret));
			sleep(3);
			printf("rank 0 ok: flush: sent, flushed, slept\n");
		} else {
			struct ferry_item it;
			double t0 = now_s();

			if ((ret = ferry_recv(f, &it, 1, 2000)) != 1)
				FAIL("the flushed item did not come within 2 s (%d)", ret);
			printf("rank 1 ok: flush: the item came after %.3f s\n", now_s() - t0);
		}
	} else if (!strcmp(mode, "zero")) {
		uint32_t next[2] = { 0, 0 };
		long got = 0;

		for (long i = 0; i < rounds; i++)
			for (int d = 0; d < 2; d++)
				while ((ret = ferry_send(f, (uint32_t)d, (uint32_t)(i & 0xffff), NULL, 0)) == -EAGAIN)
					ferry_poll(f, FERRY_POLLOUT, 1000);
		if (ret < 0)
			FAIL("ferry_send: %s", ferry_strerror(ret));
		if ((ret = ferry_done(f)) < 0 || (ret = ferry_step_wait(f, 30000)) < 0)
			FAIL("step: %s", ferry_strerror(ret));
		for (;;) {
			struct ferry_item it[64];
			int n = ferry_recv(f, it, 64, 0);

			if (n < 0)
				FAIL("ferry_recv: %s", ferry_strerror(n));
			if (n == 0)
				break;
			for (int k = 0; k < n; k++) {
				if (it[k].len != 0 || it[k].src > 1 || it[k].channel != (next[it[k].src] & 0xffff))
					FAIL("item %ld: len %u from %u on channel %u, expected an empty one on %u", got,
					     it[k].len, it[k].src, it[k].channel, next[it[k].src & 1] & 0xffff);
				next[it[k].src]++;
				got++;
			}
		}
		if (got != 2 * rounds)
			FAIL("received %ld empty items, expected %ld", got, 2 * rounds);
		printf("rank %d ok: zero: %ld empty items, in order\n", rank, got);
	} else if (!strcmp(mode, "full")) {
		uint8_t item[16] = { 0 };
		uint32_t sent = 0;

		if (rank == 0) {
			/* Until a batch finds no room: the rest stays open. */
			while ((ret = ferry_send(f, 1, 0, item, sizeof(item))) == 0) {
				sent++;
				memcpy(item, &sent, 4);
			}
			if (ret != -EAGAIN)
				FAIL("ferry_send: %s", ferry_strerror(ret));
			/* The refused item is sent once there is room; then
			 * the count, which rank 1 answers. */
			while ((ret = ferry_send(f, 1, 0, item, sizeof(item))) == -EAGAIN)
				if ((ret = ferry_poll(f, FERRY_POLLOUT, 10000)) <= 0)
					FAIL("no room within 10 s (%d)", ret);
			if (ret < 0)
				FAIL("ferry_send: %s", ferry_strerror(ret));
			sent++;
			memcpy(item, &sent, 4);
			if ((ret = ferry_send(f, 1, 1, item, sizeof(item))) < 0)
				FAIL("ferry_send: %s", ferry_strerror(ret));
			if (ferry_poll(f, FERRY_POLLIN, 20000) != FERRY_POLLIN)
				FAIL("no answer within 20 s: the last batches did not leave");
			printf("rank 0 ok: full: %u items, answered\n", sent);
		} else {
			uint32_t got = 0, total = 0;

			sleep(1);
			while (!total || got < total) {
				struct ferry_item it[64];
				int n = ferry_recv(f, it, 64, 20000);

				if (n <= 0)
					FAIL("%u items, then nothing within 20 s (%d)", got, n);
				for (int k = 0; k < n; k++) {
					uint32_t v;

					memcpy(&v, it[k].data, 4);
					if (it[k].channel == 1)
						total = v;
					else if (v != got++)
						FAIL("item %u carried %u", got - 1, v);
				}
			}
			if (got != total)
				FAIL("received %u items, expected %u", got, total);
			if ((ret = ferry_send(f, 0, 0, item, sizeof(item))) < 0 || (ret = ferry_flush(f)) < 0)
				FAIL("answer: %s", ferry_strerror(ret));
			printf("rank 1 ok: full: %u items in order\n", got);
		}
	} else {
		FAIL("unknown mode %s", mode);
	}
	ferry_close(f);
	return 0;
}
