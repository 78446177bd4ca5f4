/* tests/apps/app.h - what the applications of tests/apps share, ferry and
 * MPI versions alike (no libferry, no MPI here): HPCC's random stream, the
 * way a table is spread over the ranks, the bale kernels' random indices
 * and table values, and the result line.
 *
 * Every app prints, from rank 0, one line
 *
 *   app=<gups|histo|ig|permute> variant=<...> procs=<P> rate=<per second> verified=<yes|no>
 *
 * (tests/apps/run.sh adds cores= and nodes= and puts the fields in the
 * order of the issue), then lines starting with "#" with details.  An app
 * whose result is wrong prints verified=no and exits 1.
 */
#ifndef FERRY_APP_H
#define FERRY_APP_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A number for option name (0 or more); exits 2 on anything else. */
static inline long app_arg(const char *name, const char *v)
{
	char *end;
	long x = strtol(v, &end, 0);

	if (!*v || *end || x < 0) {
		fprintf(stderr, "bad value for %s: %s\n", name, v);
		exit(2);
	}
	return x;
}

/* --- HPCC RandomAccess: the stream and the table (HPCC 1.5 RandomAccess/) --- */

#define HPCC_POLY   0x0000000000000007ull
#define HPCC_PERIOD 1317624576693539401ll

/* The next value of the stream: a shift in GF(2)[x] modulo POLY. */
static inline uint64_t hpcc_next(uint64_t ran)
{
	return (ran << 1) ^ ((int64_t)ran < 0 ? HPCC_POLY : 0);
}

/* HPCC_starts(n): the n-th value of the stream (the value before the first
 * hpcc_next of a rank that starts at update n), by repeated squaring of
 * x^n in GF(2)[x] modulo POLY, as HPCC computes it. */
static inline uint64_t hpcc_starts(int64_t n)
{
	uint64_t m2[64], temp, ran;
	int i, j;

	while (n < 0)
		n += HPCC_PERIOD;
	while (n > HPCC_PERIOD)
		n -= HPCC_PERIOD;
	if (n == 0)
		return 0x1;
	temp = 0x1;
	for (i = 0; i < 64; i++) {
		m2[i] = temp;
		temp = hpcc_next(temp);
		temp = hpcc_next(temp);
	}
	for (i = 62; i >= 0; i--)
		if ((n >> i) & 1)
			break;
	ran = 0x2;
	while (i > 0) {
		temp = 0;
		for (j = 0; j < 64; j++)
			if ((ran >> j) & 1)
				temp ^= m2[j];
		ran = temp;
		i -= 1;
		if ((n >> i) & 1)
			ran = hpcc_next(ran);
	}
	return ran;
}

/* HPCC's distribution of a table of 2^log2 words over P ranks: blocks of
 * min + 1 words for the first rem ranks (below top), blocks of min after,
 * so that any P works (a power of two gets equal blocks). */
struct hpcc_table {
	uint64_t size, mask;        /* 2^log2 words in all */
	uint64_t min, rem, top;     /* as HPCC's MinLocalTableSize, Remainder, Top */
	uint64_t local, start;      /* this rank's words, its first global index */
	int shift;                  /* log2(min) when every block is 2^shift words, else -1 */
};

static inline void hpcc_table_init(struct hpcc_table *t, unsigned log2, uint32_t P, uint32_t me)
{
	t->size = 1ull << log2;
	t->mask = t->size - 1;
	t->min = t->size / P;
	t->rem = t->size - t->min * P;
	t->top = (t->min + 1) * t->rem;
	t->local = t->min + (me < t->rem);
	t->start = me < t->rem ? (t->min + 1) * me : t->min * me + t->rem;
	t->shift = -1;
	if (!t->rem && !(t->min & (t->min - 1)))
		t->shift = __builtin_ctzll(t->min);
}

/* The rank that owns the word a stream value names. */
static inline uint32_t hpcc_owner(const struct hpcc_table *t, uint64_t ran)
{
	uint64_t g = ran & t->mask;

	/* a power of two of ranks (HPCC's own fast case): a shift, not a
	 * 64-bit division per update */
	if (t->shift >= 0)
		return (uint32_t)(g >> t->shift);
	return (uint32_t)(g < t->top ? g / (t->min + 1) : (g - t->rem) / t->min);
}

/* --- the bale kernels: a table of n words per rank, global index g on rank
 * g / n at g % n --- */

/* The value every index-gather table holds at global index g: anything
 * that a misplaced or stale reply cannot fake. */
static inline uint64_t bale_value(uint64_t g)
{
	uint64_t x = g * 0x9e3779b97f4a7c15ull + 0x632be59bd9b4e019ull;

	x ^= x >> 31;
	x *= 0xbf58476d1ce4e5b9ull;
	return x ^ (x >> 29);
}

/* A rank's random stream (xorshift64*, seeded per rank and purpose), so
 * that a verifier can make any rank's stream again. */
static inline uint64_t bale_seed(uint32_t rank, uint32_t purpose)
{
	return 0x9e3779b97f4a7c15ull * (rank + 1) ^ (0xd1b54a32d192ed03ull * (purpose + 1));
}

static inline uint64_t bale_rnd(uint64_t *s)
{
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * 0x2545f4914f6cdd1dull;
}

/* A uniform index below n (n < 2^32: the bias of a 64-bit modulo is below
 * 2^-32). */
static inline uint64_t bale_index(uint64_t *s, uint64_t n)
{
	return bale_rnd(s) % n;
}

enum { BALE_HISTO = 1, BALE_IG = 2, BALE_DARTS = 3 };

/* The result line (rank 0). */
static inline void app_result(const char *app, const char *variant, uint32_t P, double rate, int ok)
{
	printf("app=%s variant=%s procs=%u rate=%.6g verified=%s\n", app, variant, P, rate, ok ? "yes" : "no");
	fflush(stdout);
}

#endif
