/* tests/apps/ferry_gups.c - HPC Challenge RandomAccess (MPIRandomAccess,
 * "GUPS") over ferry, under HPCC's rules.
 *
 *   ferry_gups [--log2 n] [--cap C] [--ack A] [--one]
 *       (job, rank and size from FERRY_JOB, FERRY_RANK, FERRY_SIZE)
 *
 * The rules, as HPCC 1.5 (Debian's hpcc) applies them:
 * - a table of 2^n 64-bit words in all (n = 20 unless said), spread over
 *   the ranks as HPCC spreads it (hpcc_table_init: any number of ranks),
 *   word g starting as g;
 * - 4 x 2^n updates in all, each rank making 4 x its share from HPCC's
 *   stream, starting at HPCC_starts(4 x its first word's index): value v
 *   XORs itself into word v mod 2^n (owned by hpcc_owner);
 * - at most C updates pending per process (C = 1024 unless said).  Pending
 *   means handed to ferry and not yet applied at the owner (README,
 *   "Applications"): the owner acknowledges what it applied, and a rank
 *   with C updates unacknowledged makes no more until acknowledgements
 *   come.  A rank's updates of its own words held to be applied
 *   LOCAL_AHEAD at a time (below) count as pending too, until applied.
 *   The high-water mark over all ranks is reported (pending_max);
 * - verification as HPCC's: the same updates again (untimed), after which
 *   every word must hold its first value again; the run is valid when at
 *   most 1 % of the words differ;
 * - GUPS as hpcc reports it: 1e-9 x updates / seconds, the seconds from a
 *   barrier before the first update to the end of the last (here: until
 *   every rank has had all its updates acknowledged).
 *
 * How it uses ferry (an example of the API): updates are 8-byte items on
 * channel 0, acknowledgements cumulative counts on channel 1, sent back to
 * a source once A updates from it were applied (A = C / (2 (P - 1)), at
 * least 1, unless said) and whenever the owner has nothing else to do.
 * The table is in huge pages where the kernel gives them (madvise), and a
 * rank's updates of its own words are applied LOCAL_AHEAD at a time, their
 * words prefetched (below); updates that come are applied a batch at a
 * time the same way.  The sending loop receives while it sends and sleeps
 * in ferry_poll only when it can neither send nor receive; a rank at its
 * cap applies its own held updates if it has any, else flushes (its
 * updates must not wait in aggregation buffers for the flush timer while
 * it waits for their acknowledgements).  A rank done with its own updates
 * keeps applying others' until every rank is (ferry_ibarrier, tested
 * while it serves).  The items go in FERRY_BATCH's batches (--one: one by
 * one; batches count as pending from ferry_send on, like any item).
 *
 * Prints the result line (app.h) and "# gups ..." with the details.
 * Exits 1 if the verification fails or an item is wrong.
 */
#include "fapp.h"

#include <sys/mman.h>

/* The table, in huge pages where the kernel gives them (transparent huge
 * pages, "madvise" on Debian): README "Applications", RandomAccess. */
static void *table_alloc(size_t bytes)
{
	size_t huge = 2u << 20, n = (bytes + huge - 1) & ~(huge - 1);
	void *p = aligned_alloc(huge, n ? n : huge);

	if (p)
		(void)madvise(p, n, MADV_HUGEPAGE);
	return p;
}

#define CH_UPDATE 0u
#define CH_ACK    1u
/* A rank's updates of its own words wait (as pending: they count against
 * the cap) in groups of LOCAL_AHEAD, their words prefetched, as take()
 * does for the updates that come: applied one by one, each was a cache
 * and TLB miss that stalled the update loop (a third of the loop's time
 * with 8 ranks on one core).  At the cap they are applied first: waiting
 * for acknowledgements (and flushing to get them) while room can be had
 * at once made 5 times as many frames (20 M updates/s instead of 32 M). */
#define LOCAL_AHEAD 16

struct gups {
	struct fapp a;
	struct hpcc_table t;
	uint64_t *table;
	uint64_t cap, ack_every;
	uint64_t *sent, *acked;         /* per destination: handed to ferry, acknowledged */
	uint64_t *applied, *acked_to;   /* per source: applied here, acknowledged to it */
	uint64_t pending, pending_max;  /* updates of this rank not acknowledged */
	uint64_t local[LOCAL_AHEAD];    /* this rank's own updates, their words asked for */
	int nlocal;
	int unflushed;                  /* sent since the last ferry_flush */
	int refused;                    /* an acknowledgement is waiting for room */
};

static int take(void *app, const struct ferry_item *it, int n)
{
	struct gups *g = app;

	/* The table is far larger than the caches: ask for every word this
	 * batch updates before updating the first (HPCC's rules leave the
	 * update loop to the implementer). */
	for (int i = 0; i < n; i++) {
		uint64_t v, x;

		if (it[i].channel != CH_UPDATE || it[i].len != sizeof(v))
			continue;
		memcpy(&v, it[i].data, sizeof(v));
		x = (v & g->t.mask) - g->t.start;
		if (x < g->t.local)
			__builtin_prefetch(&g->table[x], 1);
	}
	for (int i = 0; i < n; i++) {
		uint64_t v;

		if (it[i].len != sizeof(v) || it[i].src >= g->a.P || it[i].src == g->a.me) {
			fprintf(stderr, "rank %u: item of %u bytes from %u\n", g->a.me, it[i].len, it[i].src);
			return -1;
		}
		memcpy(&v, it[i].data, sizeof(v));
		if (it[i].channel == CH_UPDATE) {
			if (hpcc_owner(&g->t, v) != g->a.me) {
				fprintf(stderr, "rank %u: update for rank %u\n", g->a.me, hpcc_owner(&g->t, v));
				return -1;
			}
			g->table[(v & g->t.mask) - g->t.start] ^= v;
			g->applied[it[i].src]++;
		} else if (it[i].channel == CH_ACK) {
			/* cumulative, in order: never back, never past what was sent */
			if (v < g->acked[it[i].src] || v > g->sent[it[i].src]) {
				fprintf(stderr, "rank %u: acknowledgement of %llu from %u (sent %llu)\n", g->a.me,
					(unsigned long long)v, it[i].src, (unsigned long long)g->sent[it[i].src]);
				return -1;
			}
			g->pending -= v - g->acked[it[i].src];
			g->acked[it[i].src] = v;
		} else {
			fprintf(stderr, "rank %u: item on channel %u\n", g->a.me, it[i].channel);
			return -1;
		}
	}
	return 0;
}

static void local_apply(struct gups *g)
{
	for (int i = 0; i < g->nlocal; i++)
		g->table[(g->local[i] & g->t.mask) - g->t.start] ^= g->local[i];
	g->pending -= (uint64_t)g->nlocal;
	g->nlocal = 0;
}

static void note_pending(struct gups *g)
{
	if (++g->pending > g->pending_max)
		g->pending_max = g->pending;
}

/* Acknowledges to each source what was applied from it: to those owed at
 * least ack_every, or (all) to every one owed anything, then flushes.  A
 * refused acknowledgement waits for the next call (they are cumulative). */
static void acks(struct gups *g, int all)
{
	int any = 0;

	g->refused = 0;
	for (uint32_t s = 0; s < g->a.P; s++) {
		uint64_t owed = g->applied[s] - g->acked_to[s];
		int ret;

		if (!owed || (!all && owed < g->ack_every))
			continue;
		ret = ferry_send(g->a.f, s, CH_ACK, &g->applied[s], sizeof(g->applied[s]));
		if (ret == -EAGAIN) {
			g->refused = 1;
			break;
		}
		if (ret < 0)
			fapp_die("ferry_send", ret);
		g->acked_to[s] = g->applied[s];
		any = 1;
	}
	if (any && all)
		fapp_flush(&g->a);      /* (what it leaves in the process, progress's ferry_poll hands over) */
}

static int idle(void *app)
{
	struct gups *g = app;

	acks(g, 1);
	return g->refused;
}

/* Receives, and sends every acknowledgement owed; the caller cannot go on
 * (at its cap, or waiting for acknowledgements: refused = 0; an update
 * refused: refused = 1).  Sleeps when nothing came, until something comes
 * or (if something waits for room) there is room. */
static void progress(struct gups *g, int refused)
{
	int n;

	local_apply(g);
	n = fapp_recv(&g->a, take, g, 0, 0);

	acks(g, 1);
	if (n == 0 && g->unflushed) {
		/* our updates must not wait in aggregation buffers for the
		 * flush timer while we wait for their acknowledgements */
		fapp_flush(&g->a);
		g->unflushed = 0;
		return;         /* look again before sleeping */
	}
	if (n == 0) {
		int ret = ferry_poll(g->a.f, FERRY_POLLIN | (refused || g->refused ? FERRY_POLLOUT : 0), -1);

		if (ret < 0)
			fapp_die("ferry_poll", ret);
	}
}

/* HPCC's update loop for this rank's 4 x local updates, under the cap;
 * returns once all of them are applied at their owners and every rank is
 * done too. */
static void run(struct gups *g)
{
	uint64_t todo = 4 * g->t.local, made = 0, ran = hpcc_starts((int64_t)(4 * g->t.start));
	uint32_t dst = 0;
	int have = 0;

	while (made < todo || have) {
		int ret;

		if (!have) {
			ran = hpcc_next(ran);
			made++;
			dst = hpcc_owner(&g->t, ran);
			if (dst == g->a.me) {
				uint64_t *w = &g->table[(ran & g->t.mask) - g->t.start];

				if (g->nlocal == LOCAL_AHEAD)
					local_apply(g);
				if (g->pending >= g->cap) {
					*w ^= ran;      /* no room to wait */
					continue;
				}
				__builtin_prefetch(w, 1);
				g->local[g->nlocal++] = ran;
				note_pending(g);
				continue;
			}
			have = 1;
		}
		if (g->pending >= g->cap) {
			if (g->nlocal)
				local_apply(g);         /* room without waiting */
			else
				progress(g, 0);
			continue;
		}
		ret = ferry_send(g->a.f, dst, CH_UPDATE, &ran, sizeof(ran));
		if (ret == -EAGAIN) {
			progress(g, 1);
			continue;
		}
		if (ret < 0)
			fapp_die("ferry_send", ret);
		have = 0;
		g->unflushed = 1;
		g->sent[dst]++;
		note_pending(g);
		/* now and then, while sending freely: apply what came, and
		 * acknowledge to the sources owed at least ack_every */
		if (!(made & 255)) {
			fapp_recv(&g->a, take, g, 0, 0);
			acks(g, 0);
		}
	}
	/* Every update made: wait for their acknowledgements, applying others'
	 * meanwhile, then for every other rank to be there too. */
	local_apply(g);
	fapp_flush(&g->a);
	g->unflushed = 0;
	while (g->pending)
		progress(g, 0);
	fapp_serve_until_all(&g->a, take, idle, g);
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "log2", required_argument, NULL, 'n' }, { "cap", required_argument, NULL, 'c' },
		{ "ack", required_argument, NULL, 'a' }, { "one", no_argument, NULL, '1' }, { NULL, 0, NULL, 0 },
	};
	struct gups g = { .cap = 1024 };
	long log2n = 20, ack = 0;
	unsigned flags = FERRY_BATCH;
	uint64_t errors = 0, updates;
	double t0, secs;
	int opt, ok;

	while ((opt = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (opt) {
		case 'n': log2n = app_arg("--log2", optarg); break;
		case 'c': g.cap = (uint64_t)app_arg("--cap", optarg); break;
		case 'a': ack = app_arg("--ack", optarg); break;
		case '1': flags = 0; break;
		default: return 2;
		}
	}
	if (log2n < 1 || log2n > 40 || g.cap < 1)
		return 2;
	fapp_open(&g.a, flags);
	if ((1ull << log2n) < g.a.P) {
		fprintf(stderr, "a table of 2^%ld words for %u ranks\n", log2n, g.a.P);
		return 2;
	}
	hpcc_table_init(&g.t, (unsigned)log2n, g.a.P, g.a.me);
	g.ack_every = ack ? (uint64_t)ack : g.a.P > 1 ? g.cap / (2 * (g.a.P - 1)) : 1;
	if (!g.ack_every)
		g.ack_every = 1;
	g.table = table_alloc(g.t.local * sizeof(*g.table));
	g.sent = calloc(g.a.P, sizeof(uint64_t));
	g.acked = calloc(g.a.P, sizeof(uint64_t));
	g.applied = calloc(g.a.P, sizeof(uint64_t));
	g.acked_to = calloc(g.a.P, sizeof(uint64_t));
	if (!g.table || !g.sent || !g.acked || !g.applied || !g.acked_to) {
		fprintf(stderr, "out of memory\n");
		return 1;
	}
	for (uint64_t i = 0; i < g.t.local; i++)
		g.table[i] = g.t.start + i;

	fapp_barrier(&g.a);
	t0 = now_s();
	run(&g);
	secs = fapp_max_double(&g.a, now_s() - t0);

	/* HPCC's verification: the same updates again undo the first ones. */
	run(&g);
	for (uint64_t i = 0; i < g.t.local; i++)
		errors += g.table[i] != g.t.start + i;
	errors = fapp_reduce_u64(&g.a, errors, FERRY_SUM);
	g.pending_max = fapp_reduce_u64(&g.a, g.pending_max, FERRY_MAX);
	updates = 4 * g.t.size;
	ok = (double)errors <= 0.01 * (double)g.t.size && g.pending_max <= g.cap;
	if (g.a.me == 0) {
		app_result("gups", "ferry", g.a.P, (double)updates / secs, ok);
		printf("# gups gup_s=%.6f table=2^%ld updates=%llu seconds=%.6f errors=%llu pending_cap=%llu "
		       "pending_max=%llu ack_every=%llu batch=%s\n", 1e-9 * (double)updates / secs, log2n,
		       (unsigned long long)updates, secs, (unsigned long long)errors, (unsigned long long)g.cap,
		       (unsigned long long)g.pending_max, (unsigned long long)g.ack_every,
		       flags & FERRY_BATCH ? "yes" : "no");
	}
	fapp_close(&g.a);
	free(g.acked_to);
	free(g.applied);
	free(g.acked);
	free(g.sent);
	free(g.table);
	return ok ? 0 : 1;
}
