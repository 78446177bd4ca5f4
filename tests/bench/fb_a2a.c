/* tests/bench/fb_a2a.c - fine-grained all-to-all through ferry (the TRAM
 * benchmark, thesis §4.6): every rank sends K items of M bytes to every other
 * rank, destinations in random order, and the step ends with ferry_done /
 * ferry_step_wait.  The ranks start together (an empty step first).
 *
 *   fb_a2a --items K --len M [--spin] [--batch]   (job, rank, size from FERRY_JOB/RANK/SIZE)
 *
 * --batch opens with FERRY_BATCH (libferry hands items over a batch per
 * destination rank at a time).
 *
 * A rank that can neither send nor receive sleeps in ferry_poll; --spin
 * makes it try again at once instead (how programs were written before
 * ferry_poll, for comparison).
 *
 * Prints "elapsed_s X received N"; exits 1 if this rank did not receive
 * exactly (P-1)*K items.
 */
#include "../progs/common.h"

#include <errno.h>
#include <getopt.h>

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "items", required_argument, NULL, 'k' }, { "len", required_argument, NULL, 'm' },
		{ "spin", no_argument, NULL, 's' }, { "batch", no_argument, NULL, 'b' },
		{ NULL, 0, NULL, 0 },
	};
	long K = 64, M = 16;
	uint8_t buf[4096] = { 0 };
	struct ferry_item it[256];
	uint32_t *order, me, P;
	uint64_t total, sent = 0, got = 0, got_sending, rs;
	double t0, t1, ts;
	struct ferry_opts fo = { 0 };
	ferry_t *f;
	int opt, ret, refused, spin = 0;

	while ((opt = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (opt) {
		case 'k': K = arg_long("--items", optarg); break;
		case 'm': M = arg_long("--len", optarg); break;
		case 's': spin = 1; break;
		case 'b': fo.flags |= FERRY_BATCH; break;
		default: return 2;
		}
	}
	if (M < 1 || M > (long)sizeof(buf))
		return 2;
	ret = ferry_open(&f, &fo);
	if (ret < 0) {
		fprintf(stderr, "ferry_open: %s\n", ferry_last_error());
		return 1;
	}
	me = (uint32_t)ferry_rank(f);
	P = (uint32_t)ferry_size(f);
	total = (uint64_t)K * (P - 1);
	order = malloc((total ? total : 1) * sizeof(*order));
	for (uint64_t i = 0, k = 0; i < P; i++)
		for (long j = 0; i != me && j < K; j++)
			order[k++] = (uint32_t)i;
	rs = 0x9e3779b97f4a7c15ull * (me + 1);
	for (uint64_t i = total; i > 1; i--) {
		uint64_t j = rnd(&rs) % i;
		uint32_t t = order[i - 1];

		order[i - 1] = order[j];
		order[j] = t;
	}
	/* Start together: an empty step is a barrier. */
	if ((ret = ferry_done(f)) < 0 || (ret = ferry_step_wait(f, 60000)) < 0) {
		fprintf(stderr, "barrier: %s\n", ferry_last_error());
		return 1;
	}
	t0 = now_s();
	while (sent < total) {
		memcpy(buf, &sent, sizeof(sent) < (size_t)M ? sizeof(sent) : (size_t)M);
		ret = ferry_send(f, order[sent], 0, buf, (size_t)M);
		if (ret == 0) {
			sent++;
			if ((sent & 1023) != 0)
				continue;
		} else if (ret != -EAGAIN) {
			fprintf(stderr, "ferry_send: %s\n", ferry_last_error());
			return 1;
		}
		/* Every 1024 items, or when the ring is full: receive; when
		 * neither sending nor receiving can go on, sleep until one can
		 * (README, "Sending and receiving"). */
		refused = ret == -EAGAIN;
		ret = ferry_recv(f, it, 256, 0);
		if (ret < 0) {
			fprintf(stderr, "ferry_recv: %s\n", ferry_last_error());
			return 1;
		}
		got += (uint64_t)ret;
		if (ret == 0 && refused && !spin && (ret = ferry_poll(f, FERRY_POLLIN | FERRY_POLLOUT, -1)) < 0) {
			fprintf(stderr, "ferry_poll: %s\n", ferry_last_error());
			return 1;
		}
	}
	ts = now_s();
	got_sending = got;
	if ((ret = ferry_done(f)) < 0 || (ret = ferry_step_wait(f, 120000)) < 0) {
		fprintf(stderr, "step: %s\n", ferry_last_error());
		return 1;
	}
	while ((ret = ferry_recv(f, it, 256, 0)) > 0)
		got += (uint64_t)ret;
	t1 = now_s();
	printf("elapsed_s %.6f received %llu sending_s %.6f got_while_sending %llu\n", t1 - t0, (unsigned long long)got,
	       ts - t0, (unsigned long long)got_sending);
	ferry_close(f);
	free(order);
	if (got != total) {
		fprintf(stderr, "rank %u received %llu items, expected %llu\n", me, (unsigned long long)got,
			(unsigned long long)total);
		return 1;
	}
	return 0;
}
