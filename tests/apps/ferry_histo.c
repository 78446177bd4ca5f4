/* tests/apps/ferry_histo.c - bale's histogram kernel (histo) over ferry.
 *
 *   ferry_histo [--n N] [--table T] [--one]
 *       (job, rank and size from FERRY_JOB, FERRY_RANK, FERRY_SIZE)
 *
 * A table of T 64-bit counters per rank (T = 1000 unless said; global
 * index g on rank g / T); every rank increments N random counters of the
 * whole table (N = 1 M unless said): an 8-byte item with the local index
 * to the owner, who adds one.  One step: every rank sends its N items,
 * applying what arrives while it sends, then ferry_done and the rest as it
 * comes until ferry_step_wait says the step ended (fapp_step: every item
 * of the step delivered and applied).  The items go in
 * FERRY_BATCH's batches (--one: one by one).
 *
 * Verification, exact: every rank makes every rank's stream again
 * (bale_seed), counts what falls into its own counters and compares.
 * Rate: all ranks' N x P updates over the slowest rank's time from a
 * barrier to the end of the step.  Prints the result line (app.h).
 */
#include "fapp.h"

struct histo {
	struct fapp a;
	uint64_t T, *count;
	uint64_t bad;
};

static int take(void *app, const struct ferry_item *it, int n)
{
	struct histo *h = app;

	for (int i = 0; i < n; i++) {
		uint64_t x;

		if (it[i].len != sizeof(x) || it[i].channel != 0) {
			fprintf(stderr, "rank %u: item of %u bytes on channel %u\n", h->a.me, it[i].len, it[i].channel);
			return -1;
		}
		memcpy(&x, it[i].data, sizeof(x));
		if (x >= h->T) {
			fprintf(stderr, "rank %u: counter %llu of %llu\n", h->a.me, (unsigned long long)x,
				(unsigned long long)h->T);
			return -1;
		}
		h->count[x]++;
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct fapp_args o;
	struct histo h = { 0 };
	uint64_t N, s, *want, wrong = 0;
	double t0, secs;
	int ok;

	fapp_args(argc, argv, &o);
	N = o.n;
	h.T = o.table;
	fapp_open(&h.a, o.flags);
	h.count = calloc(h.T, sizeof(uint64_t));
	want = calloc(h.T, sizeof(uint64_t));
	if (!h.count || !want) {
		fprintf(stderr, "out of memory\n");
		return 1;
	}

	fapp_barrier(&h.a);
	t0 = now_s();
	s = bale_seed(h.a.me, BALE_HISTO);
	for (uint64_t i = 0; i < N; i++) {
		uint64_t g = bale_index(&s, h.T * h.a.P), x = g % h.T;
		uint32_t dst = (uint32_t)(g / h.T);

		if (dst == h.a.me) {
			h.count[x]++;
			continue;
		}
		/* receives (applying) while ferry refuses */
		fapp_send(&h.a, dst, 0, &x, sizeof(x), take, &h);
		/* and now and then while it does not */
		if (!(i & 1023))
			fapp_recv(&h.a, take, &h, 0, 0);
	}
	fapp_step(&h.a, take, &h);
	secs = fapp_max_double(&h.a, now_s() - t0);

	for (uint32_t r = 0; r < h.a.P; r++) {
		s = bale_seed(r, BALE_HISTO);
		for (uint64_t i = 0; i < N; i++) {
			uint64_t g = bale_index(&s, h.T * h.a.P);

			if (g / h.T == h.a.me)
				want[g % h.T]++;
		}
	}
	for (uint64_t x = 0; x < h.T; x++)
		wrong += h.count[x] != want[x];
	wrong = fapp_reduce_u64(&h.a, wrong, FERRY_SUM);
	ok = wrong == 0;
	if (h.a.me == 0) {
		app_result("histo", "ferry", h.a.P, (double)N * h.a.P / secs, ok);
		printf("# histo n=%llu table=%llu seconds=%.6f wrong_counters=%llu batch=%s\n", (unsigned long long)N,
		       (unsigned long long)h.T, secs, (unsigned long long)wrong, o.flags ? "yes" : "no");
	}
	fapp_close(&h.a);
	free(want);
	free(h.count);
	return ok ? 0 : 1;
}
