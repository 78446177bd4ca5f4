/* tests/bench/fb_gups.c - a RandomAccess-style stream of updates through
 * ferry: every rank owns a table of 2^n 64-bit words and sends a stream of
 * random 64-bit values, each as an 8-byte item to the rank that owns the word
 * it names; the owner XORs it into that word on arrival.
 *
 *   fb_gups [--log2 n] [--factor F] [--spin] [--batch]
 *       (job, rank, size from FERRY_JOB/RANK/SIZE)
 *
 * Table: 2^n words per rank (n = 20 unless said: 8 MiB), word i of rank r
 * starts as r * 2^n + i.  Each rank makes F * 2^n updates (F = 4 unless
 * said: in all, F times the whole table, as HPCC asks).  A value v names word
 * g = v % (P * 2^n) of the whole table: rank g / 2^n, index g % 2^n.
 * Updates for this rank's own words are applied at once, without ferry.
 *
 * Not HPCC's generator: the values come from a 64-bit xorshift seeded per
 * rank (tests/progs/common.h), which is enough to spread them evenly; the
 * real HPCC RandomAccess (its LFSR stream, its verification pass and its 1 %
 * error rule) is another program.
 *
 * The loop is the one the README recommends ("Sending and receiving"): send
 * until ferry refuses (-EAGAIN), take what came with ferry_recv(..., 0), and
 * sleep in ferry_poll only when refused and nothing came (--spin: try again
 * at once instead, for comparison; --batch: FERRY_BATCH).  Then each rank sends every other rank,
 * on channel 1, how many updates it sent it; ferry_done / ferry_step_wait end
 * the step, and every rank checks that it applied exactly that many from each.
 *
 * Prints "elapsed_s X updates N applied A"; rank 0 also prints "gups X": all
 * ranks' updates divided by the slowest rank's elapsed time, in 1e9 per
 * second (the ranks send their times to rank 0 in a step after the timed
 * one).  Exits 1 if a count differs or an item is not for this rank.
 */
#include "../progs/common.h"

#include <errno.h>
#include <getopt.h>

#define CH_UPDATE 0u
#define CH_COUNT  1u
#define CH_TIME   2u

struct gups {
	ferry_t *f;
	uint32_t me, P;
	uint64_t *table, words, mask;   /* this rank's words: 2^n */
	uint64_t *got, *expect;         /* per source rank: updates applied, announced */
	int *announced;
	uint64_t applied;
	double worst;                   /* rank 0: the slowest time heard of */
};

/* Applies (or records) the items ferry_recv returned; -1 on a foreign item. */
static int take(struct gups *g, const struct ferry_item *it, int n)
{
	for (int i = 0; i < n; i++) {
		uint64_t v, w;

		if (it[i].len != sizeof(v) || it[i].src >= g->P) {
			fprintf(stderr, "rank %u: item of %u bytes from %u\n", g->me, it[i].len, it[i].src);
			return -1;
		}
		memcpy(&v, it[i].data, sizeof(v));
		if (it[i].channel == CH_COUNT) {
			g->expect[it[i].src] = v;
			g->announced[it[i].src] = 1;
			continue;
		}
		if (it[i].channel == CH_TIME) {  /* may come before we drained the timed step */
			double e;

			memcpy(&e, it[i].data, sizeof(e));
			if (e > g->worst)
				g->worst = e;
			continue;
		}
		if (it[i].channel != CH_UPDATE) {
			fprintf(stderr, "rank %u: item on channel %u\n", g->me, it[i].channel);
			return -1;
		}
		w = v % (g->P * g->words);
		if (w / g->words != g->me) {
			fprintf(stderr, "rank %u: update for rank %llu\n", g->me, (unsigned long long)(w / g->words));
			return -1;
		}
		g->table[w & g->mask] ^= v;
		g->got[it[i].src]++;
		g->applied++;
	}
	ferry_release(g->f);
	return 0;
}

/* Receives what came; sleeps in ferry_poll if nothing came and the last send
 * was refused.  Returns 0, or -1 with the error printed. */
static int progress(struct gups *g, int refused, int spin)
{
	struct ferry_item it[256];
	int n = ferry_recv(g->f, it, 256, 0);

	if (n < 0) {
		fprintf(stderr, "ferry_recv: %s\n", ferry_last_error());
		return -1;
	}
	if (take(g, it, n) < 0)
		return -1;
	if (n == 0 && refused && !spin && ferry_poll(g->f, FERRY_POLLIN | FERRY_POLLOUT, -1) < 0) {
		fprintf(stderr, "ferry_poll: %s\n", ferry_last_error());
		return -1;
	}
	return 0;
}

/* Sends one item, receiving (and sleeping when neither can go on) while
 * ferry refuses it. */
static int send_one(struct gups *g, uint32_t dst, uint32_t ch, const void *p, size_t len, int spin)
{
	int ret;

	while ((ret = ferry_send(g->f, dst, ch, p, len)) == -EAGAIN)
		if (progress(g, 1, spin) < 0)
			return -1;
	if (ret < 0) {
		fprintf(stderr, "ferry_send: %s\n", ferry_last_error());
		return -1;
	}
	return 0;
}

static int step(struct gups *g, const char *what)
{
	if (ferry_done(g->f) < 0 || ferry_step_wait(g->f, 120000) < 0) {
		fprintf(stderr, "rank %u: %s: %s\n", g->me, what, ferry_last_error());
		return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "log2", required_argument, NULL, 'n' }, { "factor", required_argument, NULL, 'F' },
		{ "spin", no_argument, NULL, 's' }, { "batch", no_argument, NULL, 'b' }, { NULL, 0, NULL, 0 },
	};
	struct ferry_opts fo = { 0 };
	long log2n = 20, factor = 4;
	int opt, ret = 0, spin = 0, pending = 0;
	struct gups g = { 0 };
	uint64_t todo, done = 0, rs, v = 0, w, *sent;
	uint32_t dst = 0;
	double t0, t1;
	struct ferry_item it[256];
	int n;

	while ((opt = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (opt) {
		case 'n': log2n = arg_long("--log2", optarg); break;
		case 'F': factor = arg_long("--factor", optarg); break;
		case 's': spin = 1; break;
		case 'b': fo.flags |= FERRY_BATCH; break;
		default: return 2;
		}
	}
	if (log2n < 1 || log2n > 32 || factor < 1)
		return 2;
	if (ferry_open(&g.f, &fo) < 0) {
		fprintf(stderr, "ferry_open: %s\n", ferry_last_error());
		return 1;
	}
	g.me = (uint32_t)ferry_rank(g.f);
	g.P = (uint32_t)ferry_size(g.f);
	g.words = 1ull << log2n;
	g.mask = g.words - 1;
	g.table = malloc(g.words * sizeof(*g.table));
	g.got = calloc(g.P, sizeof(*g.got));
	g.expect = calloc(g.P, sizeof(*g.expect));
	g.announced = calloc(g.P, sizeof(*g.announced));
	sent = calloc(g.P, sizeof(*sent));
	if (!g.table || !g.got || !g.expect || !g.announced || !sent)
		return 1;
	for (uint64_t i = 0; i < g.words; i++)
		g.table[i] = (uint64_t)g.me * g.words + i;
	todo = (uint64_t)factor * g.words;
	rs = 0x9e3779b97f4a7c15ull * (g.me + 1);

	/* Start together: an empty step is a barrier. */
	if (step(&g, "barrier") < 0)
		return 1;
	t0 = now_s();
	for (;;) {
		int sret = 0;

		/* Send until refused; own words are updated at once. */
		while (done < todo) {
			if (!pending) {
				v = rnd(&rs);
				w = v % (g.P * g.words);
				dst = (uint32_t)(w / g.words);
				if (dst == g.me) {
					g.table[w & g.mask] ^= v;
					sent[dst]++;
					done++;
					continue;
				}
				pending = 1;
			}
			sret = ferry_send(g.f, dst, CH_UPDATE, &v, sizeof(v));
			if (sret != 0)
				break;
			pending = 0;
			sent[dst]++;
			done++;
		}
		if (sret < 0 && sret != -EAGAIN) {
			fprintf(stderr, "ferry_send: %s\n", ferry_last_error());
			return 1;
		}
		if (done == todo)
			break;
		/* Refused: v stays pending; receive, and sleep in
		 * ferry_poll when nothing came. */
		if (progress(&g, 1, spin) < 0)
			return 1;
	}
	/* How many each rank should have applied from us. */
	for (uint32_t d = 0; d < g.P; d++)
		if (d != g.me && send_one(&g, d, CH_COUNT, &sent[d], sizeof(sent[d]), spin) < 0)
			return 1;
	if (step(&g, "step") < 0)
		return 1;
	while ((n = ferry_recv(g.f, it, 256, 0)) > 0)
		if (take(&g, it, n) < 0)
			return 1;
	t1 = now_s();
	if (n < 0) {
		fprintf(stderr, "ferry_recv: %s\n", ferry_last_error());
		return 1;
	}
	printf("elapsed_s %.6f updates %llu applied %llu\n", t1 - t0, (unsigned long long)todo,
	       (unsigned long long)(g.applied + sent[g.me]));
	for (uint32_t s = 0; s < g.P; s++) {
		if (s == g.me)
			continue;
		if (!g.announced[s] || g.got[s] != g.expect[s]) {
			fprintf(stderr, "rank %u: applied %llu updates from rank %u, which sent %llu%s\n", g.me,
				(unsigned long long)g.got[s], s, (unsigned long long)g.expect[s],
				g.announced[s] ? "" : " (its count never came)");
			ret = 1;
		}
	}

	/* Untimed: rank 0 learns the slowest rank's time. */
	if (t1 - t0 > g.worst)
		g.worst = t1 - t0;
	if (g.me != 0 && send_one(&g, 0, CH_TIME, &g.worst, sizeof(g.worst), spin) < 0)
		return 1;
	if (step(&g, "times") < 0)
		return 1;
	while ((n = ferry_recv(g.f, it, 256, 0)) > 0)
		if (take(&g, it, n) < 0)
			return 1;
	if (g.me == 0)
		printf("gups %.6f worst_elapsed_s %.6f\n", (double)todo * g.P / g.worst / 1e9, g.worst);
	ferry_close(g.f);
	free(sent);
	free(g.announced);
	free(g.expect);
	free(g.got);
	free(g.table);
	return ret;
}
