/* tests/apps/ferry_permute.c - bale's random permutation (randperm, the
 * dart-throwing algorithm) over ferry: steps and collectives together.
 *
 *   ferry_permute [--n N] [--one]   (fapp_args)
 *       (job, rank and size from FERRY_JOB, FERRY_RANK, FERRY_SIZE)
 *
 * A permutation of the N x P elements (N per rank; N = 1 M unless said),
 * made at random and left spread N per rank, perm[p] on rank p / N:
 *
 * 1. every rank throws each of its elements, as an 8-byte item, at a random
 *    slot of a target of 2 N slots per rank; the slot's owner keeps it if
 *    the slot is free and rejects it otherwise.  Rounds of two steps: the
 *    throws (the owners deciding as the darts arrive), then the rejected
 *    darts sent back; ferry_allreduce says when no dart is left;
 * 2. the occupied slots, in order, are the permutation: ferry_exscan of the
 *    counts gives each rank the position of its first one, and one more
 *    step sends each element to the rank that holds its position.
 *
 * Verification (untimed, through ferry too): every position of every rank
 * got exactly one element, and each element, sent to the rank it came
 * from, arrives exactly once.  Rate: N x P elements over the slowest rank's
 * time from a barrier to the end of 2.  The items go in FERRY_BATCH's
 * batches (--one: one by one).  Prints the result line (app.h).
 */
#include "fapp.h"

#define FREE UINT32_MAX

struct dart {
	uint32_t slot;  /* local slot at the owner (throws), or position (2.) */
	uint32_t elem;  /* global element id */
};

struct perm {
	struct fapp a;
	uint64_t N;
	uint32_t *slot;         /* 2 N target slots: an element or FREE */
	uint32_t *perm;         /* N positions: an element or FREE */
	uint32_t *left;         /* elements still to throw (rejected) */
	uint64_t nleft;
	struct dart *rej;       /* rejected darts to send back: their sources in src */
	uint32_t *rsrc;
	uint64_t nrej, caprej;
	uint64_t bad;           /* positions filled twice, elements seen twice */
	uint8_t *seen;
};

enum { THROW, REJECT, PLACE, CHECK };

static int take(void *app, const struct ferry_item *it, int n)
{
	struct perm *p = app;

	for (int k = 0; k < n; k++) {
		struct dart d;

		/* The channel says which phase an item is of: a rank that has
		 * already begun the next step may send its items while this
		 * one still takes the end of the last. */
		if (it[k].len != sizeof(d) || it[k].channel > CHECK) {
			fprintf(stderr, "rank %u: item of %u bytes on channel %u\n", p->a.me, it[k].len, it[k].channel);
			return -1;
		}
		memcpy(&d, it[k].data, sizeof(d));
		switch (it[k].channel) {
		case THROW:
			if (d.slot >= 2 * p->N || d.elem / p->N != it[k].src)
				goto bad;
			if (p->slot[d.slot] == FREE) {
				p->slot[d.slot] = d.elem;
			} else {
				if (p->nrej == p->caprej) {
					p->caprej = p->caprej ? 2 * p->caprej : 4096;
					p->rej = realloc(p->rej, p->caprej * sizeof(*p->rej));
					p->rsrc = realloc(p->rsrc, p->caprej * sizeof(*p->rsrc));
					if (!p->rej || !p->rsrc) {
						fprintf(stderr, "out of memory\n");
						exit(1);
					}
				}
				p->rej[p->nrej] = d;
				p->rsrc[p->nrej++] = it[k].src;
			}
			break;
		case REJECT:
			if (d.elem / p->N != p->a.me || p->nleft >= p->N)
				goto bad;
			p->left[p->nleft++] = d.elem;
			break;
		case PLACE:
			if (d.slot >= p->N)
				goto bad;
			p->bad += p->perm[d.slot] != FREE;
			p->perm[d.slot] = d.elem;
			break;
		case CHECK:
			if (d.elem / p->N != p->a.me)
				goto bad;
			p->bad += p->seen[d.elem % p->N]++ != 0;
			break;
		}
		continue;
bad:
		fprintf(stderr, "rank %u: dart (%u, %u) from %u on channel %u\n", p->a.me, d.slot, d.elem, it[k].src,
			it[k].channel);
		return -1;
	}
	return 0;
}

/* One step of phase ph: item i of n goes to dst[i] (or is applied here
 * when that is this rank) as darts[i]; what arrives meanwhile and until
 * the step ends is taken. */
static void step(struct perm *p, int ph, uint64_t n, const struct dart *darts, const uint32_t *dst)
{
	for (uint64_t i = 0; i < n; i++) {
		if (dst[i] == p->a.me) {
			struct ferry_item self = { .data = &darts[i], .len = sizeof(darts[i]), .src = p->a.me,
						   .channel = (uint16_t)ph };

			if (take(p, &self, 1) < 0)
				exit(1);
			continue;
		}
		fapp_send(&p->a, dst[i], (uint32_t)ph, &darts[i], sizeof(darts[i]), take, p);
		if (!(i & 1023))
			fapp_recv(&p->a, take, p, 0, 0);
	}
	fapp_step(&p->a, take, p);
}

int main(int argc, char **argv)
{
	struct fapp_args o;
	struct perm p = { 0 };
	uint64_t s, rounds = 0, hits = 0, first = 0, k = 0, wrong;
	struct dart *darts;
	uint32_t *dst;
	double t0, secs;
	int ok, ret;

	fapp_args(argc, argv, &o);
	p.N = o.n;
	fapp_open(&p.a, o.flags);
	if (!p.N || p.N * p.a.P * 2 >= FREE)
		return 2;
	p.slot = malloc(2 * p.N * sizeof(uint32_t));
	p.perm = malloc(p.N * sizeof(uint32_t));
	p.left = malloc(p.N * sizeof(uint32_t));
	p.seen = calloc(p.N, 1);
	darts = malloc(2 * p.N * sizeof(*darts));
	dst = malloc(2 * p.N * sizeof(*dst));
	if (!p.slot || !p.perm || !p.left || !p.seen || !darts || !dst) {
		fprintf(stderr, "out of memory\n");
		return 1;
	}
	for (uint64_t i = 0; i < 2 * p.N; i++)
		p.slot[i] = FREE;
	for (uint64_t i = 0; i < p.N; i++) {
		p.perm[i] = FREE;
		p.left[i] = (uint32_t)(p.a.me * p.N + i);
	}
	p.nleft = p.N;
	s = bale_seed(p.a.me, BALE_DARTS);

	fapp_barrier(&p.a);
	t0 = now_s();
	/* 1. darts, until every one has stuck */
	for (;;) {
		uint64_t n = p.nleft;

		for (uint64_t i = 0; i < n; i++) {
			uint64_t t = bale_index(&s, 2 * p.N * p.a.P);

			darts[i] = (struct dart){ (uint32_t)(t % (2 * p.N)), p.left[i] };
			dst[i] = (uint32_t)(t / (2 * p.N));
		}
		p.nleft = 0;
		p.nrej = 0;
		step(&p, THROW, n, darts, dst);
		step(&p, REJECT, p.nrej, p.rej, p.rsrc);
		rounds++;
		if (fapp_reduce_u64(&p.a, p.nleft, FERRY_SUM) == 0)
			break;
	}
	/* 2. the occupied slots in order: positions first .. first + hits - 1 */
	for (uint64_t i = 0; i < 2 * p.N; i++)
		hits += p.slot[i] != FREE;
	if ((ret = ferry_exscan(p.a.f, &hits, &first, 1, FERRY_UINT64, FERRY_SUM)) < 0)
		fapp_die("ferry_exscan", ret);
	if (p.a.me == 0)
		first = 0;
	for (uint64_t i = 0; i < 2 * p.N; i++) {
		if (p.slot[i] == FREE)
			continue;
		darts[k] = (struct dart){ (uint32_t)((first + k) % p.N), p.slot[i] };
		dst[k] = (uint32_t)((first + k) / p.N);
		k++;
	}
	step(&p, PLACE, hits, darts, dst);
	secs = fapp_max_double(&p.a, now_s() - t0);

	/* verification: every position filled once, every element once */
	for (uint64_t i = 0; i < p.N; i++) {
		p.bad += p.perm[i] == FREE;
		darts[i] = (struct dart){ 0, p.perm[i] == FREE ? 0 : p.perm[i] };
		dst[i] = (uint32_t)(darts[i].elem / p.N);
	}
	step(&p, CHECK, p.N, darts, dst);
	for (uint64_t i = 0; i < p.N; i++)
		p.bad += p.seen[i] != 1;
	wrong = fapp_reduce_u64(&p.a, p.bad, FERRY_SUM);
	ok = wrong == 0;
	if (p.a.me == 0) {
		app_result("permute", "ferry", p.a.P, (double)p.N * p.a.P / secs, ok);
		printf("# permute n=%llu seconds=%.6f rounds=%llu wrong=%llu batch=%s\n", (unsigned long long)p.N, secs,
		       (unsigned long long)rounds, (unsigned long long)wrong, o.flags ? "yes" : "no");
	}
	fapp_close(&p.a);
	free(dst);
	free(darts);
	free(p.rsrc);
	free(p.rej);
	free(p.seen);
	free(p.left);
	free(p.perm);
	free(p.slot);
	return ok ? 0 : 1;
}
