/* tests/progs/ft_stream.c - one-way stream from rank 0 to rank 1 of a 2-rank
 * job, to exercise backpressure.
 *
 *   ft_stream --job J --rank R [--items N] [--len L] [--recv-delay-us D]
 *             [--blocking] [--forever] [--hold-until FILE] [--abandon M]
 *             [--until-quiet] [--end-step] [--start-after FILE]
 *             [--send-delay-us D] [--recv-timeout MS] [--flush-each] [--batch]
 *
 * Rank 0 sends N items (or forever); with -EAGAIN it waits 50 us and retries,
 * counting how often.  Rank 1 receives N items, checking order and payload,
 * sleeping D us after every batch; with --hold-until it receives nothing
 * until FILE exists (at most 120 s: a receiver that does not consume;
 * --wait-file is the same).  Rank 0 with --hold-until prints "rank 0 open"
 * once ferry_open has returned and sends nothing until FILE exists (at most
 * 120 s); --start-after FILE is the same without the line.  With
 * --send-delay-us rank 0 waits D us after each item it sent; --flush-each:
 * it calls ferry_flush after each.  --batch: opens with FERRY_BATCH.
 * --abandon M: rank 0 exits (no ferry_close) at its first -EAGAIN after M
 * items, its TX ring full, printing "rank 0 abandoned after N items"; M = -2
 * (--abandon stuck): once -EAGAIN has lasted 300 ms, the daemon taking no
 * more.  --until-quiet: rank
 * 1 receives until nothing came for 3 s and prints "rank 1 got N".
 * Otherwise rank 1 fails when nothing came for MS ms (--recv-timeout,
 * default 10000).
 * --end-step: rank 1, once it has received N items (N may be 0; not with
 * --until-quiet), says ferry_done and waits for the step (ferry_step_wait,
 * 30 s at most), which keeps what arrives meanwhile; prints "rank 1 step:
 * ok" or "rank 1 step: ERRTEXT: message" and exits 3 if it failed.
 * Prints "rank 0 ok: sent N, eagain E" or
 * "rank 1 ok: received N" and "rank 1 minflt F second_half H most M
 * first_half M1" (the page faults it took while receiving, and in the
 * second half of the items: getrusage; the most items one ferry_recv
 * returned, and in the first half).
 */
#include "common.h"

#include <errno.h>
#include <getopt.h>
#include <sys/resource.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	struct rusage ru0, ruh = { 0 }, ru1;
	int most = 0, most_first = 0;   /* the most items one ferry_recv returned (in the first half) */
	static const struct option lo[] = {
		{ "job", required_argument, NULL, 'j' }, { "rank", required_argument, NULL, 'r' },
		{ "items", required_argument, NULL, 'n' }, { "len", required_argument, NULL, 'l' },
		{ "recv-delay-us", required_argument, NULL, 'd' }, { "blocking", no_argument, NULL, 'b' },
		{ "forever", no_argument, NULL, 'f' }, { "hold-until", required_argument, NULL, 'H' },
		{ "abandon", required_argument, NULL, 'A' }, { "until-quiet", no_argument, NULL, 'Q' },
		{ "wait-file", required_argument, NULL, 'H' }, { "end-step", no_argument, NULL, 'E' },
		{ "start-after", required_argument, NULL, 'S' }, { "send-delay-us", required_argument, NULL, 'D' },
		{ "recv-timeout", required_argument, NULL, 'T' }, { "flush-each", no_argument, NULL, 'F' },
		{ "batch", no_argument, NULL, 'B' },
		{ NULL, 0, NULL, 0 },
	};
	struct ferry_opts fo = { .size = 2 };
	long items = 100000, len = 64, delay = 0, send_delay = 0;
	int forever = 0, quiet = 0, end_step = 0, recv_timeout = 10000, flush_each = 0, opt, ret;
	long abandon = -1;
	const char *hold = NULL, *start_after = NULL;
	uint8_t *buf;
	ferry_t *f;

	while ((opt = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (opt) {
		case 'j': fo.job = optarg; break;
		case 'r': fo.rank = (int)arg_long("--rank", optarg); break;
		case 'n': items = arg_long("--items", optarg); break;
		case 'l': len = arg_long("--len", optarg); break;
		case 'd': delay = arg_long("--recv-delay-us", optarg); break;
		case 'b': fo.flags |= FERRY_BLOCKING; break;
		case 'f': forever = 1; break;
		case 'H': hold = optarg; break;
		case 'A': abandon = strcmp(optarg, "stuck") == 0 ? -2 : arg_long("--abandon", optarg); break;
		case 'Q': quiet = 1; break;
		case 'E': end_step = 1; break;
		case 'S': start_after = optarg; break;
		case 'D': send_delay = arg_long("--send-delay-us", optarg); break;
		case 'T': recv_timeout = (int)arg_long("--recv-timeout", optarg); break;
		case 'F': flush_each = 1; break;
		case 'B': fo.flags |= FERRY_BATCH; break;
		default: return 2;
		}
	}
	if (len < (long)sizeof(struct item_hdr) || len > (long)FERRY_MAX_ITEM)
		return 2;
	ret = ferry_open(&f, &fo);
	if (ret < 0) {
		fprintf(stderr, "ferry_open: %s: %s\n", ferry_strerror(ret), ferry_last_error());
		return 1;
	}
	buf = malloc((size_t)len);
	if (fo.rank == 0) {
		uint64_t eagain = 0;
		double stuck_since = 0;

		const char *wait_for = start_after ? start_after : hold;

		if (hold) {
			printf("rank 0 open\n");
			fflush(stdout);
		}
		for (int i = 0; wait_for && access(wait_for, F_OK) != 0 && i < 12000; i++)
			usleep(10000);

		for (long i = 0; forever || i < items;) {
			fill_item(buf, 0, 1, (uint32_t)i, (uint32_t)len);
			ret = ferry_send(f, 1, 0, buf, (size_t)len);
			if (ret != -EAGAIN)
				stuck_since = 0;
			else if (!stuck_since)
				stuck_since = now_s();
			if (ret == -EAGAIN && ((abandon >= 0 && i >= abandon) ||
					       (abandon == -2 && now_s() - stuck_since > 0.3))) {
				printf("rank 0 abandoned after %ld items\n", i);
				fflush(stdout);
				_exit(0);
			}
			if (ret == -EAGAIN) {
				eagain++;
				usleep(50);
				continue;
			}
			if (ret < 0) {
				fprintf(stderr, "rank 0: ferry_send: %s: %s\n", ferry_strerror(ret), ferry_last_error());
				return 1;
			}
			i++;
			if (flush_each && (ret = ferry_flush(f)) < 0) {
				fprintf(stderr, "rank 0: ferry_flush: %s: %s\n", ferry_strerror(ret), ferry_last_error());
				return 1;
			}
			if (send_delay)
				usleep((useconds_t)send_delay);
		}
		ret = ferry_close(f);
		if (ret < 0) {
			fprintf(stderr, "rank 0: ferry_close: %s: %s\n", ferry_strerror(ret), ferry_last_error());
			return 1;
		}
		printf("rank 0 ok: sent %ld, eagain %llu\n", items, (unsigned long long)eagain);
		free(buf);
		return 0;
	}
	for (int i = 0; hold && access(hold, F_OK) != 0 && i < 12000; i++)
		usleep(10000);
	getrusage(RUSAGE_SELF, &ru0);
	for (long got = 0; forever || got < items;) {
		struct ferry_item it[64];
		int n = ferry_recv(f, it, 64, quiet ? 3000 : recv_timeout);

		if (n == 0 && quiet) {
			printf("rank 1 got %ld\n", got);
			ferry_close(f);
			free(buf);
			return 0;
		}
		if (n <= 0) {
			fprintf(stderr, "rank 1: ferry_recv: %s after %ld items (%s)\n",
				n == 0 ? "timed out" : ferry_strerror(n), got, n == 0 ? "" : ferry_last_error());
			return 1;
		}
		if (n > most)
			most = n;
		for (int i = 0; i < n; i++) {
			uint32_t seq = UINT32_MAX;
			const char *bad = check_item(&it[i], 1, &seq);

			if (!bad && seq != (uint32_t)got)
				bad = "out of order, duplicated or lost";
			if (bad) {
				fprintf(stderr, "rank 1: item %ld (seq %u): %s\n", got, seq, bad);
				return 1;
			}
			got++;
			if (got == items / 2) {
				getrusage(RUSAGE_SELF, &ruh);
				most_first = most;
			}
		}
		if (delay)
			usleep((useconds_t)delay);
	}
	if (end_step) {
		ret = ferry_done(f);
		if (ret == 0)
			ret = ferry_step_wait(f, 30000);
		if (ret < 0) {
			printf("rank 1 step: %s: %s\n", ferry_strerror(ret), ferry_last_error());
			fflush(stdout);
			ferry_close(f);
			free(buf);
			return 3;
		}
		printf("rank 1 step: ok\n");
	}
	ferry_close(f);
	getrusage(RUSAGE_SELF, &ru1);
	printf("rank 1 ok: received %ld\n", items);
	printf("rank 1 minflt %ld second_half %ld most %d first_half %d\n", ru1.ru_minflt - ru0.ru_minflt,
	       ru1.ru_minflt - ruh.ru_minflt, most, most_first);
	free(buf);
	return 0;
}
