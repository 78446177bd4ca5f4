/* tests/progs/ft_batch.c - FERRY_BATCH's promise that a batched item leaves
 * the process when the program runs out of other things to do, on a real
 * daemon (ferry.h FERRY_BATCH).  One process per rank of a 2-rank job:
 *
 *   ft_batch --job J --rank R --mode M [--rounds N] [--run K]
 *
 * MODE:
 *   recv     N rounds of ping-pong, one 16-byte item each way: each side
 *            sends, then waits in ferry_recv(..., 10000) for the answer
 *   poll     the same, waiting in ferry_poll(FERRY_POLLIN, 10000)
 *   fd       the same, waiting in poll(2) on ferry_fd() after a
 *            ferry_recv(..., 0) that found nothing (and again while it
 *            finds nothing); then, with nothing more to come, ferry_fd()
 *            must go quiet (a poll of 200 ms times out) within 2 s
 *   flush    rank 0 sends one item, calls ferry_flush, then sleeps 3 s
 *            without calling libferry; rank 1 must have it within 2 s
 *   zero     each rank sends N zero-length items to the other and N to
 *            itself, on channels 0..N-1 in turn (receiving when refused),
 *            then ferry_done and ferry_step_wait; each must receive 2N, in
 *            order per sender.  With --run K, the channel changes every K
 *            items to a rank (runs of K empty items: dense batches of
 *            stride 0, proto/ring.h "Dense batches")
 *   acks     as zero, with 8-byte items (each its number in the stream to
 *            its rank): every K-th (--run K) on channel 1, the others on
 *            channel 0, as acknowledgements among updates (tests/apps/
 *            ferry_gups): the runs between go dense again after the lone
 *            item (client/send.c "Dense first")
 *   shapes   each rank sends N items, to itself and the other in turn,
 *            in runs of one shape (length 0..256 and channel 0..2, now and
 *            then a 70000-byte item), short runs (1 or 2) among long ones
 *            (8..47), from a generator per sender and receiver that the
 *            receiver runs too: each item once, in order, its shape, its
 *            bytes (its number first) and, before ferry_step_wait (which
 *            copies items out), its padding up to 8 zero.  With
 *            --run K (K > 1), rank 1 takes nothing for K ms first (full TX
 *            rings: client/send.c batch_redense finds no room)
 *   donepoll rank 0 sends 16-byte items numbered from 0 until its TX ring
 *            stays full for 0.3 s (rank 1 takes nothing for 3 s), calls
 *            ferry_done (which cannot hand its DONE over yet), then
 *            ferry_poll(FERRY_POLLIN, 1000): it must wait about a second,
 *            not spin (CPU time below 0.3 s), then ferry_step_wait.
 *            Rank 1 then takes everything.  Each prints "count N".
 *   closefull rank 0 sends to itself, without receiving, until its TX
 *            ring stays full for 0.3 s (batches and a large item's rest
 *            held too), then ferry_close: it must return 0 within 5 s (it
 *            drops what comes to it meanwhile; the daemon waits for that
 *            room before it takes the rest).  Rank 1 only opens and closes.
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
#include <time.h>
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
		/* As ferry.h says to: ferry_fd() is readable when items *may*
		 * have come (a writer that found us armed can write the eventfd
		 * after we found its item without sleeping: the next wait then
		 * wakes for nothing), so ferry_recv until it returns 0, then
		 * wait on the fd, again until the item is there. */
		double until = now_s() + 10;

		while ((n = ferry_recv(f, &it, 1, 0)) == 0) {
			struct pollfd p = { .fd = ferry_fd(f), .events = POLLIN };
			int left = (int)((until - now_s()) * 1000);

			if (left <= 0 || poll(&p, 1, left) != 1)
				FAIL("ferry_fd() did not become readable for an item within 10 s");
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

/* With nothing more to come, a program that calls ferry_recv until it
 * returns 0 and then sleeps on ferry_fd() must come to sleep: a count left in
 * the eventfd by a late wake-up may wake it for nothing a few times (libferry
 * resets it within a millisecond and RECV_CHECK_CALLS calls), not for ever. */
static void fd_goes_quiet(ferry_t *f)
{
	struct ferry_item it;
	double t0 = now_s();
	long wakes = 0;

	for (;;) {
		struct pollfd p = { .fd = ferry_fd(f), .events = POLLIN };
		int n = ferry_recv(f, &it, 1, 0);

		if (n != 0)
			FAIL("ferry_recv found %d items where none was sent", n);
		if (poll(&p, 1, 200) == 0)
			break;
		if (now_s() - t0 > 2)
			FAIL("ferry_fd() stays readable with nothing to receive (%ld wake-ups in 2 s)", wakes);
		wakes++;
	}
}

/* Sends 16-byte items numbered from 0 to dst (with large, every 100th is
 * an item of 200 KB instead, whose rest may stay held) until -EAGAIN has
 * lasted 0.3 s: the TX ring is full and stays so.  Returns how many went. */
static uint32_t send_until_stuck(ferry_t *f, uint32_t dst, int large)
{
	static uint8_t big[200000];
	uint8_t item[16] = { 0 };
	uint32_t count = 0;
	double stuck = 0;

	while (!stuck || now_s() - stuck < 0.3) {
		int ret;

		memcpy(item, &count, 4);
		if (large && count % 100 == 99)
			ret = ferry_send(f, dst, 0, big, sizeof(big));
		else
			ret = ferry_send(f, dst, 0, item, sizeof(item));
		if (ret == 0) {
			count++;
			stuck = 0;
		} else if (ret == -EAGAIN) {
			if (!stuck)
				stuck = now_s();
			usleep(1000);
		} else {
			FAIL("ferry_send: %s", ferry_strerror(ret));
		}
	}
	return count;
}

/* mode shapes: a stream's shapes, the same at the sender and the receiver */
struct shapes {
	uint64_t s;
	uint32_t left, len, ch;
};

static void shapes_init(struct shapes *g, uint32_t src, uint32_t dst)
{
	g->s = 0x9e3779b97f4a7c15ull * (src + 1) ^ 0xd1b54a32d192ed03ull * (dst + 7);
	g->left = 0;
}

static void shapes_next(struct shapes *g, uint32_t *len, uint32_t *ch)
{
	static const uint32_t lens[] = { 0, 1, 5, 7, 8, 9, 13, 16, 17, 24, 40, 100, 248, 255, 256 };

	if (!g->left) {
		uint64_t r = rnd(&g->s);

		g->left = r % 8 < 3 ? 1 + (uint32_t)(r >> 8) % 2 : 8 + (uint32_t)(r >> 8) % 40;
		g->len = lens[(r >> 16) % (sizeof(lens) / sizeof(lens[0]))];
		g->ch = (uint32_t)(r >> 24) % 3;
		if ((r >> 32) % 97 == 0) {
			g->len = 70000;
			g->left = 1;
		}
	}
	g->left--;
	*len = g->len;
	*ch = g->ch;
}

static uint8_t shapes_byte(uint32_t src, uint32_t seq, uint32_t i)
{
	return (uint8_t)(src * 131u + seq * 7u + (seq >> 8) * 3u + i * 13u + 1);
}

/* modes zero, acks and shapes: a stream of N items to the other rank and
 * to this one in turn (item i to rank i & 1), sent until ferry refuses,
 * received meanwhile, then ferry_done and ferry_step_wait; send makes item
 * i (0, or ferry_send's refusal: the same i again), check looks at each
 * item received (seq: its number from its sender; done: after
 * ferry_step_wait, which copied it out of the ring). */
struct stream {
	int (*send)(ferry_t *f, struct stream *st, long i);
	void (*check)(struct stream *st, const struct ferry_item *it, uint32_t seq, int done);
	uint32_t run, next[2];
	double lazy_until;              /* rank 1 takes nothing until then */
	struct shapes out[2], in[2];    /* (shapes) */
};

/* Returns how many items came, after checking it is N. */
static long stream_run(ferry_t *f, struct stream *st, long rounds)
{
	long got = 0;
	int done = 0, ret;

	for (long i = 0; i < rounds || !done;) {
		struct ferry_item it[64];
		int n;

		while (now_s() < st->lazy_until)
			usleep(1000);
		ret = 0;
		while (i < rounds && (ret = st->send(f, st, i)) == 0)
			i++;
		if (ret < 0 && ret != -EAGAIN)
			FAIL("ferry_send: %s", ferry_strerror(ret));
		if (i == rounds && !done) {
			if ((ret = ferry_done(f)) < 0 || (ret = ferry_step_wait(f, 30000)) < 0)
				FAIL("step: %s", ferry_strerror(ret));
			done = 1;
		}
		while ((n = ferry_recv(f, it, 64, done ? 0 : 10)) > 0) {
			for (int k = 0; k < n; k++) {
				if (it[k].src > 1)
					FAIL("item %ld from rank %u", got, it[k].src);
				st->check(st, &it[k], st->next[it[k].src]++, done);
				got++;
			}
			if (!done)
				break;
		}
		if (n < 0)
			FAIL("ferry_recv: %s", ferry_strerror(n));
	}
	if (got != rounds)
		FAIL("received %ld items, expected %ld", got, rounds);
	return got;
}

/* zero: empty items on channels 0..N-1 in turn, changing every --run */
static int zero_send(ferry_t *f, struct stream *st, long i)
{
	return ferry_send(f, (uint32_t)(i & 1), (uint32_t)((i / 2 / st->run) & 0xffff), NULL, 0);
}

static void zero_check(struct stream *st, const struct ferry_item *it, uint32_t seq, int done)
{
	(void)done;
	if (it->len != 0 || it->channel != ((seq / st->run) & 0xffff))
		FAIL("item %u from %u: len %u on channel %u, expected an empty one on %u", seq, it->src, it->len,
		     it->channel, (seq / st->run) & 0xffff);
}

/* acks: 8-byte items, their number, every --run-th on channel 1 */
static int acks_send(ferry_t *f, struct stream *st, long i)
{
	uint64_t seq = (uint64_t)i / 2;

	return ferry_send(f, (uint32_t)(i & 1), seq % st->run == st->run - 1, &seq, sizeof(seq));
}

static void acks_check(struct stream *st, const struct ferry_item *it, uint32_t seq, int done)
{
	uint64_t v = 0;

	(void)done;
	if (it->len == sizeof(v))
		memcpy(&v, it->data, sizeof(v));
	if (it->len != sizeof(v) || v != seq || it->channel != (seq % st->run == st->run - 1))
		FAIL("item %u from %u: %u bytes (%llu) on channel %u", seq, it->src, it->len, (unsigned long long)v,
		     it->channel);
}

static int shapes_send(ferry_t *f, struct stream *st, long i)
{
	static uint8_t buf[70000];
	uint32_t d = (uint32_t)(i & 1), seq = (uint32_t)(i / 2), len, ch;
	struct shapes keep = st->out[d];
	int ret;

	shapes_next(&st->out[d], &len, &ch);
	for (uint32_t b = 0; b < len; b++)
		buf[b] = shapes_byte((uint32_t)rank, seq, b);
	if (len >= 4)
		memcpy(buf, &seq, 4);
	if ((ret = ferry_send(f, d, ch, buf, len)) != 0)
		st->out[d] = keep;      /* the same item again */
	return ret;
}

static void shapes_check(struct stream *st, const struct ferry_item *it, uint32_t seq, int done)
{
	uint32_t s = it->src, len, ch;
	const uint8_t *p = it->data;

	shapes_next(&st->in[s], &len, &ch);
	if (it->len != len || it->channel != ch)
		FAIL("item %u from %u: %u bytes on channel %u, expected %u on %u", seq, s, it->len, it->channel, len,
		     ch);
	for (uint32_t b = 0; b < len; b++) {
		uint8_t want = len >= 4 && b < 4 ? (uint8_t)(seq >> (8 * b)) : shapes_byte(s, seq, b);

		if (p[b] != want)
			FAIL("item %u from %u (%u bytes, channel %u): byte %u is %u, not %u", seq, s, len, ch, b, p[b],
			     want);
	}
	for (uint32_t b = len; !done && len <= 256 && (b & 7); b++)  /* (not the stash's copies) */
		if (p[b])
			FAIL("item %u from %u (%u bytes, channel %u): padding byte %u is %u", seq, s, len, ch, b, p[b]);
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "job", required_argument, NULL, 'j' }, { "rank", required_argument, NULL, 'r' },
		{ "mode", required_argument, NULL, 'm' }, { "rounds", required_argument, NULL, 'n' },
		{ "run", required_argument, NULL, 'k' },
		{ NULL, 0, NULL, 0 },
	};
	struct ferry_opts o = { .size = 2, .timeout_ms = 30000, .flags = FERRY_BATCH };
	const char *mode = "recv";
	long rounds = 100, run = 1;
	ferry_t *f;
	int opt, ret, peer;

	while ((opt = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (opt) {
		case 'j': o.job = optarg; break;
		case 'r': o.rank = rank = (int)arg_long("--rank", optarg); break;
		case 'm': mode = optarg; break;
		case 'n': rounds = arg_long("--rounds", optarg); break;
		case 'k': run = arg_long("--run", optarg); break;
		default: return 2;
		}
	}
	if (run < 1)
		FAIL("--run must be positive");
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
		double t1 = now_s();

		if (!strcmp(mode, "fd"))
			fd_goes_quiet(f);
		printf("rank %d ok: %s: %ld round trips in %.3f s\n", rank, mode, rounds, t1 - t0);
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
	} else if (!strcmp(mode, "zero") || !strcmp(mode, "acks") || !strcmp(mode, "shapes")) {
		struct stream st = { .run = (uint32_t)run };

		if (!strcmp(mode, "zero")) {
			st.send = zero_send;
			st.check = zero_check;
		} else if (!strcmp(mode, "acks")) {
			st.send = acks_send;
			st.check = acks_check;
		} else {
			st.send = shapes_send;
			st.check = shapes_check;
			st.lazy_until = rank == 1 && run > 1 ? now_s() + (double)run / 1000 : 0;
			for (uint32_t d = 0; d < 2; d++) {
				shapes_init(&st.out[d], (uint32_t)rank, d);
				shapes_init(&st.in[d], d, (uint32_t)rank);
			}
		}
		printf("rank %d ok: %s: %ld items, in order, intact\n", rank, mode, stream_run(f, &st, rounds));
	} else if (!strcmp(mode, "donepoll")) {
		uint32_t count = 0;

		if (rank == 0) {
			double t0, c0;

			count = send_until_stuck(f, 1, 0);
			if ((ret = ferry_done(f)) < 0)
				FAIL("ferry_done: %s", ferry_strerror(ret));
			t0 = now_s();
			c0 = (double)clock() / CLOCKS_PER_SEC;
			ret = ferry_poll(f, FERRY_POLLIN, 1000);
			t0 = now_s() - t0;
			c0 = (double)clock() / CLOCKS_PER_SEC - c0;
			if (ret != 0)
				FAIL("ferry_poll returned %d: nothing was to come", ret);
			if (t0 < 0.9 || t0 > 3 || c0 > 0.3)
				FAIL("ferry_poll(FERRY_POLLIN, 1000) took %.2f s, %.2f s of CPU", t0, c0);
			if ((ret = ferry_step_wait(f, 30000)) < 0)
				FAIL("ferry_step_wait: %s", ferry_strerror(ret));
			printf("rank 0 ok: donepoll: ferry_poll waited %.2f s using %.3f s of CPU\n", t0, c0);
		} else {
			struct ferry_item it[64];
			int n;

			sleep(3);
			if ((ret = ferry_done(f)) < 0 || (ret = ferry_step_wait(f, 30000)) < 0)
				FAIL("step: %s", ferry_strerror(ret));
			while ((n = ferry_recv(f, it, 64, 0)) > 0)
				for (int k = 0; k < n; k++) {
					uint32_t v;

					memcpy(&v, it[k].data, 4);
					if (v != count++)
						FAIL("item %u carried %u", count - 1, v);
				}
			printf("rank 1 ok: donepoll: received all, in order\n");
		}
		printf("count %u\n", count);
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
	} else if (!strcmp(mode, "closefull")) {
		if (rank == 0) {
			long sent = send_until_stuck(f, 0, 1);
			double t0 = now_s();

			ret = ferry_close(f);
			t0 = now_s() - t0;
			if (ret < 0 || t0 > 5)
				FAIL("ferry_close: %s after %.2f s (%ld items sent)", ferry_strerror(ret), t0, sent);
			printf("rank 0 ok: closefull: %ld items to itself, ferry_close took %.2f s\n", sent, t0);
			return 0;
		}
		printf("rank 1 ok: closefull\n");
	} else {
		FAIL("unknown mode %s", mode);
	}
	ferry_close(f);
	return 0;
}
