/* tests/apps/ferry_ig.c - bale's index-gather kernel (ig) over ferry: the
 * two-way pattern, a request and a reply per item.
 *
 *   ferry_ig [--n N] [--table T] [--one]
 *       (job, rank and size from FERRY_JOB, FERRY_RANK, FERRY_SIZE)
 *
 * A table of T 64-bit words per rank (T = 1000 unless said; global index
 * g on rank g / T, holding bale_value(g)); every rank wants N random words
 * of the whole table (N = 1 M unless said) in tgt[0..N-1].  A request is an
 * 8-byte item (the word's local index, the slot i in the requester's tgt)
 * to the owner on channel 0; the owner answers with a 16-byte item (i and
 * the word) on channel 1.  Everything happens at once: a rank sends its
 * requests while it receives the answers to them and answers others'
 * requests; an answer refused for want of room waits in a queue of the
 * owner's (it must release the requests it holds before it can wait for
 * room).  A rank that has all its answers keeps answering until every rank
 * has (ferry_ibarrier).  The items go in FERRY_BATCH's batches (--one: one
 * by one).
 *
 * Verification, exact: tgt[i] must be bale_value of the index asked for.
 * Rate: all ranks' N x P requests (each with its answer) over the slowest
 * rank's time from a barrier to the last answer.  Prints the result line,
 * and "# ig ..." with the details (answers_waited_max: the most answers a
 * rank had queued at once, not yet handed to ferry).
 */
#include "fapp.h"

#define CH_REQ 0u
#define CH_REP 1u

struct req {
	uint32_t x;     /* local index at the owner */
	uint32_t i;     /* slot in the requester's tgt */
};
struct rep {
	uint32_t i;
	uint32_t zero;
	uint64_t v;
};

struct answer {
	uint32_t dst;
	struct rep r;
};

struct ig {
	struct fapp a;
	uint64_t T, N, *table, *tgt, got;
	struct answer *q;       /* answers not yet handed to ferry: q[head..tail) */
	size_t head, tail, cap;
	size_t waited_max;      /* the most answers queued at once */
};

/* Answers wait in q[head..tail), which moves down to the start when it
 * reaches the end with half of the array free before it: the array holds
 * the answers waiting, not every one that ever waited.  (Reset only when
 * empty, a queue that never emptied grew for the whole run: 2-4 M entries,
 * 48-96 MB per rank at N = 8 M, whose pages the rank faulted in.) */
static void queue(struct ig *g, uint32_t dst, struct rep r)
{
	if (g->head == g->tail)
		g->head = g->tail = 0;
	if (g->tail == g->cap && g->head != 0 && g->head >= g->cap / 2) {
		memmove(g->q, g->q + g->head, (g->tail - g->head) * sizeof(*g->q));
		g->tail -= g->head;
		g->head = 0;
	}
	if (g->tail == g->cap) {
		g->cap = g->cap ? 2 * g->cap : 4096;
		if (!(g->q = realloc(g->q, g->cap * sizeof(*g->q)))) {
			fprintf(stderr, "out of memory\n");
			exit(1);
		}
	}
	g->q[g->tail++] = (struct answer){ dst, r };
	if (g->tail - g->head > g->waited_max)
		g->waited_max = g->tail - g->head;
}

/* Hands queued answers to ferry until it refuses; 1 if some are left. */
static int answer(struct ig *g)
{
	while (g->head != g->tail) {
		struct answer *e = &g->q[g->head];
		int ret = ferry_send(g->a.f, e->dst, CH_REP, &e->r, sizeof(e->r));

		if (ret == -EAGAIN)
			return 1;
		if (ret < 0)
			fapp_die("ferry_send", ret);
		g->head++;
	}
	return 0;
}

static int take(void *app, const struct ferry_item *it, int n)
{
	struct ig *g = app;

	for (int k = 0; k < n; k++) {
		if (it[k].channel == CH_REQ && it[k].len == sizeof(struct req)) {
			struct req q;

			memcpy(&q, it[k].data, sizeof(q));
			if (q.x >= g->T)
				goto bad;
			queue(g, it[k].src, (struct rep){ .i = q.i, .v = g->table[q.x] });
		} else if (it[k].channel == CH_REP && it[k].len == sizeof(struct rep)) {
			struct rep r;

			memcpy(&r, it[k].data, sizeof(r));
			if (r.i >= g->N)
				goto bad;
			g->tgt[r.i] = r.v;
			g->got++;
		} else {
			goto bad;
		}
		continue;
bad:
		fprintf(stderr, "rank %u: bad item of %u bytes from %u on channel %u\n", g->a.me, it[k].len, it[k].src,
			it[k].channel);
		return -1;
	}
	return 0;
}

/* Receives, answers, and sleeps when neither can go on (refused: something
 * of ours, a request or an answer, waits for room). */
static void progress(struct ig *g, int refused)
{
	int n = fapp_recv(&g->a, take, g, 0, 0), left = answer(g), ret;

	if (n == 0 && (refused || left)) {
		fapp_flush(&g->a);
		if ((ret = ferry_poll(g->a.f, FERRY_POLLIN | FERRY_POLLOUT, -1)) < 0)
			fapp_die("ferry_poll", ret);
	} else if (n == 0) {
		/* waiting for answers: ours must not wait for the flush
		 * timer in an aggregation buffer, nor our requests (and
		 * what the flush could not hand over waits for room) */
		unsigned ev = FERRY_POLLIN | (fapp_flush(&g->a) ? FERRY_POLLOUT : 0);

		if ((ret = ferry_poll(g->a.f, ev, -1)) < 0)
			fapp_die("ferry_poll", ret);
	}
}

/* Every 256 requests: takes what came (one ferry_recv's worth), and
 * answers before making more requests while more than ANSWERS_AHEAD
 * answers are queued and ferry refuses them, so that the owner's answers
 * do not wait behind its own new requests, nor pile up (4 x 1 with the
 * daemons on their own core: 47-48 M requests/s before, 49 M with it;
 * sharing the cores, no change beyond the noise).  Taking everything that
 * came instead of one call's worth (others' requests and the answers to
 * ours come twice as fast as we send requests, and the rest waits in the
 * daemon's queue) was much worse: 8 x 1 sharing the cores, 33-35 M against
 * 50-57 M, 2 runs each. */
#define ANSWERS_AHEAD 1024
static void keep_up(struct ig *g)
{
	fapp_recv(&g->a, take, g, 0, 0);
	/* progress(g, 1) sleeps, when nothing came, for room or items: not
	 * for items alone, as progress(g, 0) does when nothing is owed (right
	 * at the end, where our requests wait for answers; here it could wait
	 * for ever for ranks already done with theirs). */
	while (answer(g) && g->tail - g->head > ANSWERS_AHEAD)
		progress(g, 1);
}

/* Sends the answers owed (fapp_serve_until_all flushes them); 1 while some
 * wait for room. */
static int idle(void *app)
{
	return answer(app);
}

int main(int argc, char **argv)
{
	struct fapp_args o;
	struct ig g = { 0 };
	uint64_t N, s, *want, wrong = 0, waited;
	double t0, secs;
	int ok;

	fapp_args(argc, argv, &o);
	N = o.n;
	g.T = o.table;
	if (!g.T || g.T > UINT32_MAX || N > UINT32_MAX)
		return 2;
	g.N = N;
	fapp_open(&g.a, o.flags);
	g.table = malloc(g.T * sizeof(uint64_t));
	g.tgt = calloc(N ? N : 1, sizeof(uint64_t));
	want = malloc((N ? N : 1) * sizeof(uint64_t));
	if (!g.table || !g.tgt || !want) {
		fprintf(stderr, "out of memory\n");
		return 1;
	}
	for (uint64_t x = 0; x < g.T; x++)
		g.table[x] = bale_value(g.a.me * g.T + x);
	s = bale_seed(g.a.me, BALE_IG);
	for (uint64_t i = 0; i < N; i++)
		want[i] = bale_index(&s, g.T * g.a.P);

	fapp_barrier(&g.a);
	t0 = now_s();
	for (uint64_t i = 0; i < N; i++) {
		uint32_t dst = (uint32_t)(want[i] / g.T);
		struct req q = { .x = (uint32_t)(want[i] % g.T), .i = (uint32_t)i };
		int ret;

		if (!(i & 255))
			keep_up(&g);
		if (dst == g.a.me) {
			g.tgt[i] = g.table[q.x];
			g.got++;
			continue;
		}
		while ((ret = ferry_send(g.a.f, dst, CH_REQ, &q, sizeof(q))) == -EAGAIN)
			progress(&g, 1);
		if (ret < 0)
			fapp_die("ferry_send", ret);
	}
	while (g.got < N)
		progress(&g, 0);
	fapp_serve_until_all(&g.a, take, idle, &g);
	secs = fapp_max_double(&g.a, now_s() - t0);

	for (uint64_t i = 0; i < N; i++)
		wrong += g.tgt[i] != bale_value(want[i]);
	wrong = fapp_reduce_u64(&g.a, wrong, FERRY_SUM);
	waited = fapp_reduce_u64(&g.a, g.waited_max, FERRY_MAX);
	ok = wrong == 0 && g.head == g.tail && g.got == N;
	if (g.a.me == 0) {
		app_result("ig", "ferry", g.a.P, (double)N * g.a.P / secs, ok);
		printf("# ig n=%llu table=%llu seconds=%.6f wrong=%llu batch=%s answers_waited_max=%llu\n",
		       (unsigned long long)N, (unsigned long long)g.T, secs, (unsigned long long)wrong,
		       o.flags ? "yes" : "no", (unsigned long long)waited);
	}
	fapp_close(&g.a);
	free(g.q);
	free(want);
	free(g.tgt);
	free(g.table);
	return ok ? 0 : 1;
}
