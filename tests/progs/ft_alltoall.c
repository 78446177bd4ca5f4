/* tests/progs/ft_alltoall.c - every rank sends items to every rank, itself
 * included, in random order and checks what it receives: each item exactly
 * once, payload intact, per-sender order preserved.  Runs several steps if
 * asked.
 *
 *   ft_alltoall [--job J --rank R --size P] [--items K] [--len L] [--len-max M]
 *               [--steps S] [--sync] [--seed X] [--quiet] [--batch] [--blocking]
 *               [--lazy-ms MS] [--runs N] [--channels C] [--recv-max M]
 *
 * --batch opens with FERRY_BATCH; --blocking with FERRY_BLOCKING (every
 * item of a step is then sent before anything is received).
 * Without --rank/--size the rank and size come from the environment.
 * K items go to every rank (itself too) per step; lengths are L, or uniform in
 * [L, M] when --len-max is given (M above 64 KiB exercises large items).
 * With --sync each step ends with ferry_done and ferry_step_wait, after which
 * every item of the step must be there without waiting (checked with
 * ferry_recv(..., 0)) and none of the next.
 * With --sync and --lazy-ms, the rank takes nothing during a step (unless a
 * send is refused) and sleeps MS ms between ferry_done and ferry_step_wait:
 * by then the items of the step, the next step's from faster ranks and the
 * step's end all wait in its rings together.
 * --runs N: the items for one rank come in runs of 1 to 2N items of one
 * length (and one channel: with --channels C, one of C, which is the step
 * plus S x 0..C-1 for S steps), the next run's length drawn again in [L, M]:
 * the streams FERRY_BATCH packs dense (proto/ring.h "Dense batches"),
 * interrupted by other shapes.  --recv-max M: ferry_recv takes at most M
 * items a call (1..64; a dense record then comes out over several calls).
 * Prints one line "rank R ok: sent N received N items in T s (X items/s)".
 */
#include "common.h"

#include <errno.h>
#include <getopt.h>
#include <unistd.h>

struct opts {
	const char *job;
	int rank, size;
	long items, len, len_max, steps;
	uint64_t seed;
	int quiet, sync;
	long lazy_ms;
	long runs, channels, recv_max;
	uint32_t *run_left, *run_len, *run_ch;  /* --runs: by destination */
};

/* The length and channel of the next item for dst (--runs). */
static void next_shape(const struct opts *o, uint32_t dst, uint64_t *rs, uint32_t *len, uint32_t *variant)
{
	if (!o->runs) {
		*len = (uint32_t)o->len;
		if (o->len_max > o->len)
			*len += (uint32_t)(rnd(rs) % (uint64_t)(o->len_max - o->len + 1));
		*variant = 0;
		return;
	}
	if (!o->run_left[dst]) {
		o->run_left[dst] = 1 + (uint32_t)(rnd(rs) % (uint64_t)(2 * o->runs));
		o->run_len[dst] = (uint32_t)o->len;
		if (o->len_max > o->len)
			o->run_len[dst] += (uint32_t)(rnd(rs) % (uint64_t)(o->len_max - o->len + 1));
		o->run_ch[dst] = (uint32_t)(rnd(rs) % (uint64_t)o->channels);
	}
	o->run_left[dst]--;
	*len = o->run_len[dst];
	*variant = o->run_ch[dst];
}

/* Without step synchronisation (ferry_done/ferry_step_wait) a fast rank may
 * start the next step while we are still in this one: items carry their step
 * in the channel and are counted per step (got[step]). */
static int run_step(ferry_t *f, const struct opts *o, long step, uint32_t *next_seq_in,
		    uint32_t *next_seq_out, uint8_t *buf, uint64_t *rs, uint64_t *got_by_step,
		    uint64_t *sent_p, uint64_t *recv_p)
{
	uint32_t me = (uint32_t)ferry_rank(f), P = (uint32_t)ferry_size(f);
	uint64_t total_out = (uint64_t)o->items * P, total_in = total_out;
	uint32_t *order = malloc(total_out * sizeof(*order));
	uint64_t sent = 0, eagain = 0;
	struct ferry_item items[64];
	int ret = 0, waited = 0, flushed = 0, max = (int)o->recv_max;

	if (!order && total_out)
		return -ENOMEM;
	/* Destinations in random order (Fisher-Yates over K copies of each). */
	for (uint64_t i = 0, k = 0; i < P; i++)
		for (long j = 0; j < o->items; j++)
			order[k++] = (uint32_t)i;
	for (uint64_t i = total_out; i > 1; i--) {
		uint64_t j = rnd(rs) % i;
		uint32_t t = order[i - 1];

		order[i - 1] = order[j];
		order[j] = t;
	}
	while (sent < total_out || got_by_step[step] < total_in) {
		int n, refused = 0;

		while (sent < total_out) {
			uint32_t dst = order[sent], len, variant;

			next_shape(o, dst, rs, &len, &variant);
			fill_item(buf, me, dst, next_seq_out[dst], len);
			ret = ferry_send(f, dst, (uint32_t)((step + variant * o->steps) & 0xffff), buf, len);
			if (ret == -EAGAIN && o->runs)
				o->run_left[dst]++;     /* (the same shape again next time) */
			if (ret == -EAGAIN) {
				eagain++;
				refused = 1;
				break;
			}
			if (ret < 0) {
				fprintf(stderr, "rank %u: ferry_send: %s (%s)\n", me, ferry_strerror(ret),
					ferry_last_error());
				goto out;
			}
			next_seq_out[dst]++;
			sent++;
			/* Interleave receiving so that nobody's RX ring stays full. */
			if ((sent & 255) == 0)
				break;
		}
		if (sent == total_out && o->sync && !waited) {
			ret = ferry_done(f);
			if (ret == 0 && o->lazy_ms > 0)
				usleep((useconds_t)o->lazy_ms * 1000);
			if (ret == 0)
				ret = ferry_step_wait(f, 30000);
			if (ret < 0) {
				fprintf(stderr, "rank %u: step %ld: %s (%s)\n", me, step, ferry_strerror(ret),
					ferry_last_error());
				goto out;
			}
			waited = 1;
		} else if (sent == total_out && !flushed) {
			ferry_flush(f);
			flushed = 1;
		}
		if (o->lazy_ms > 0 && o->sync && !waited && !refused)
			continue;
		/* Without --sync, all of this step's items may have come while
		 * we were still sending (the others' items of a step can come
		 * before we start it, and all of them before we end sending):
		 * nothing is left to wait for.  (Waiting here made a slow rank
		 * time out with every item received.) */
		if (sent == total_out && !o->sync && got_by_step[step] >= total_in)
			break;
		n = ferry_recv(f, items, max, sent < total_out || o->sync ? 0 : 10000);
		if (n < 0) {
			fprintf(stderr, "rank %u: ferry_recv: %s (%s)\n", me, ferry_strerror(n), ferry_last_error());
			ret = n;
			goto out;
		}
		if (n == 0 && waited && got_by_step[step] < total_in) {
			fprintf(stderr, "rank %u: step %ld completed with %llu of %llu items here\n", me, step,
				(unsigned long long)got_by_step[step], (unsigned long long)total_in);
			ret = -EPROTO;
			goto out;
		}
		if (n == 0 && sent == total_out && !o->sync) {
			fprintf(stderr, "rank %u: step %ld: timed out with %llu of %llu items received\n", me,
				step, (unsigned long long)got_by_step[step], (unsigned long long)total_in);
			ret = -ETIMEDOUT;
			goto out;
		}
		/* Neither sending nor receiving can go on: sleep until one can
		 * (README, "Sending and receiving"). */
		if (n == 0 && refused && (ret = ferry_poll(f, FERRY_POLLIN | FERRY_POLLOUT, 30000)) <= 0) {
			fprintf(stderr, "rank %u: ferry_poll: %s\n", me, ret ? ferry_last_error() : "nothing for 30 s");
			ret = ret ? ret : -ETIMEDOUT;
			goto out;
		}
		for (int i = 0; i < n; i++) {
			uint32_t seq = UINT32_MAX, ch = items[i].channel % (uint32_t)o->steps;
			const char *bad = check_item(&items[i], me, &seq);

			/* With --sync an item of the next step may only follow the
			 * last one of this step (one recv batch can hold both). */
			if (!bad && (items[i].channel / (uint32_t)o->steps >= (uint32_t)o->channels || ch < step ||
				     (o->sync && ch != step && (ch != step + 1 || got_by_step[step] != total_in))))
				bad = "item of another step (channel)";
			else if (!bad && got_by_step[ch] == total_in)
				bad = "more items than were sent in that step";
			if (!bad && seq != next_seq_in[items[i].src])
				bad = "out of order, duplicated or lost";
			if (bad) {
				fprintf(stderr, "rank %u: step %ld: item from rank %u (len %u, seq %u, expected %u): %s\n",
					me, step, items[i].src, items[i].len, seq, next_seq_in[items[i].src], bad);
				ret = -EPROTO;
				goto out;
			}
			next_seq_in[items[i].src]++;
			got_by_step[ch]++;
			(*recv_p)++;
		}
	}
	/* In sync mode the step is not over for this rank until it waited. */
	if (o->sync && !waited) {
		ret = ferry_done(f);
		if (ret == 0)
			ret = ferry_step_wait(f, 30000);
		if (ret < 0)
			fprintf(stderr, "rank %u: step %ld: %s (%s)\n", me, step, ferry_strerror(ret), ferry_last_error());
	}
out:
	free(order);
	*sent_p += sent;
	(void)eagain;
	return ret;
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "job", required_argument, NULL, 'j' }, { "rank", required_argument, NULL, 'r' },
		{ "size", required_argument, NULL, 'p' }, { "items", required_argument, NULL, 'k' },
		{ "len", required_argument, NULL, 'l' }, { "len-max", required_argument, NULL, 'm' },
		{ "steps", required_argument, NULL, 's' }, { "seed", required_argument, NULL, 'x' },
		{ "quiet", no_argument, NULL, 'q' }, { "sync", no_argument, NULL, 'y' },
		{ "batch", no_argument, NULL, 'B' }, { "blocking", no_argument, NULL, 'L' },
		{ "lazy-ms", required_argument, NULL, 'z' }, { "runs", required_argument, NULL, 'R' },
		{ "channels", required_argument, NULL, 'C' }, { "recv-max", required_argument, NULL, 'M' },
		{ NULL, 0, NULL, 0 },
	};
	struct opts o = { .items = 100, .len = 32, .steps = 1, .seed = 1, .channels = 1, .recv_max = 64 };
	struct ferry_opts fo = { 0 };
	uint64_t sent = 0, got = 0, rs;
	uint32_t *seq_in, *seq_out;
	uint64_t *got_by_step;
	uint8_t *buf;
	ferry_t *f;
	double t0;
	int opt, ret;

	while ((opt = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (opt) {
		case 'j': o.job = optarg; break;
		case 'r': o.rank = (int)arg_long("--rank", optarg); break;
		case 'p': o.size = (int)arg_long("--size", optarg); break;
		case 'k': o.items = arg_long("--items", optarg); break;
		case 'l': o.len = arg_long("--len", optarg); break;
		case 'm': o.len_max = arg_long("--len-max", optarg); break;
		case 's': o.steps = arg_long("--steps", optarg); break;
		case 'x': o.seed = (uint64_t)arg_long("--seed", optarg); break;
		case 'q': o.quiet = 1; break;
		case 'y': o.sync = 1; break;
		case 'B': fo.flags |= FERRY_BATCH; break;
		case 'L': fo.flags |= FERRY_BLOCKING; break;
		case 'z': o.lazy_ms = arg_long("--lazy-ms", optarg); break;
		case 'R': o.runs = arg_long("--runs", optarg); break;
		case 'C': o.channels = arg_long("--channels", optarg); break;
		case 'M': o.recv_max = arg_long("--recv-max", optarg); break;
		default: return 2;
		}
	}
	if (o.steps < 1 || o.steps > 65536) {
		fprintf(stderr, "--steps must be 1 to 65536\n");
		return 2;
	}
	if (o.channels < 1 || o.steps * o.channels > 65536 || o.recv_max < 1 || o.recv_max > 64 || o.runs < 0) {
		fprintf(stderr, "--channels x --steps must be 1 to 65536, --recv-max 1 to 64, --runs positive\n");
		return 2;
	}
	if (o.len < (long)sizeof(struct item_hdr) || o.len_max > (long)FERRY_MAX_ITEM) {
		fprintf(stderr, "--len must be at least %zu, --len-max at most %u\n", sizeof(struct item_hdr),
			FERRY_MAX_ITEM);
		return 2;
	}
	fo.job = o.job;
	fo.rank = o.rank;
	fo.size = o.size;
	ret = ferry_open(&f, &fo);
	if (ret < 0) {
		fprintf(stderr, "ferry_open: %s: %s\n", ferry_strerror(ret), ferry_last_error());
		return 1;
	}
	seq_in = calloc((size_t)ferry_size(f), sizeof(*seq_in));
	seq_out = calloc((size_t)ferry_size(f), sizeof(*seq_out));
	got_by_step = calloc((size_t)o.steps, sizeof(*got_by_step));
	o.run_left = calloc((size_t)ferry_size(f), sizeof(uint32_t));
	o.run_len = calloc((size_t)ferry_size(f), sizeof(uint32_t));
	o.run_ch = calloc((size_t)ferry_size(f), sizeof(uint32_t));
	buf = malloc((size_t)(o.len_max > o.len ? o.len_max : o.len));
	rs = o.seed * 0x9e3779b97f4a7c15ull + (uint64_t)ferry_rank(f) + 1;
	t0 = now_s();
	for (long s = 0; s < o.steps && ret == 0; s++)
		ret = run_step(f, &o, s, seq_in, seq_out, buf, &rs, got_by_step, &sent, &got);
	if (ret == 0) {
		double t = now_s() - t0;

		if (!o.quiet)
			printf("rank %d ok: sent %llu received %llu items in %.3f s (%.0f items/s)\n",
			       ferry_rank(f), (unsigned long long)sent, (unsigned long long)got, t,
			       t > 0 ? (double)got / t : 0.0);
	}
	{
		int c = ferry_close(f);

		if (c < 0 && ret == 0) {
			fprintf(stderr, "ferry_close: %s: %s\n", ferry_strerror(c), ferry_last_error());
			ret = c;
		}
	}
	free(seq_in);
	free(seq_out);
	free(got_by_step);
	free(o.run_left);
	free(o.run_len);
	free(o.run_ch);
	free(buf);
	return ret == 0 ? 0 : 1;
}
