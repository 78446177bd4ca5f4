/* tests/bench/mb_gups.c - the comparator of fb_gups: the same updates with
 * Open MPI, bucketed by hand the way MPI RandomAccess codes do it.
 *
 *   mb_gups [--log2 n] [--factor F] [--chunk C]
 *
 * Same table (2^n words per rank, word i of rank r starting as r * 2^n + i),
 * same generator and seeds (a 64-bit xorshift per rank, not HPCC's), same
 * F * 2^n updates per rank, value v naming word v % (P * 2^n).  Each round a
 * rank makes C * P values (C = 1024 unless said: about C per destination),
 * applies its own at once, packs the others by owner and exchanges them with
 * MPI_Alltoall (counts) and MPI_Alltoallv; the owners XOR them in.
 *
 * Rank 0 prints "elapsed_s X gups Y" (the slowest rank, after a barrier
 * start; gups: all ranks' updates / that time / 1e9).  Exits 1 if the updates
 * applied over all ranks are not all those made.
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rnd(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

int main(int argc, char **argv)
{
	long log2n = 20, factor = 4, chunk = 1024;
	int me, P;
	uint64_t words, mask, *table, todo, done = 0, rs, applied = 0, all_applied = 0, all_todo = 0;
	uint64_t *vals, *sbuf, *rbuf;
	int *scnt, *rcnt, *sdsp, *rdsp, *fill;
	double t0, e, worst;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &me);
	MPI_Comm_size(MPI_COMM_WORLD, &P);
	for (int i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--log2"))
			log2n = atol(argv[i + 1]);
		else if (!strcmp(argv[i], "--factor"))
			factor = atol(argv[i + 1]);
		else if (!strcmp(argv[i], "--chunk"))
			chunk = atol(argv[i + 1]);
	}
	words = 1ull << log2n;
	mask = words - 1;
	todo = (uint64_t)factor * words;
	table = malloc(words * sizeof(*table));
	vals = malloc((size_t)chunk * (size_t)P * sizeof(*vals));
	sbuf = malloc((size_t)chunk * (size_t)P * sizeof(*sbuf));
	/* A rank may get more than C * P values in a round: size as it comes. */
	size_t rcap = (size_t)chunk * (size_t)P * 2;
	rbuf = malloc(rcap * sizeof(*rbuf));
	scnt = calloc((size_t)P, sizeof(int));
	rcnt = calloc((size_t)P, sizeof(int));
	sdsp = calloc((size_t)P, sizeof(int));
	rdsp = calloc((size_t)P, sizeof(int));
	fill = calloc((size_t)P, sizeof(int));
	if (!table || !vals || !sbuf || !rbuf || !scnt || !rcnt || !sdsp || !rdsp || !fill)
		MPI_Abort(MPI_COMM_WORLD, 1);
	for (uint64_t i = 0; i < words; i++)
		table[i] = (uint64_t)me * words + i;
	rs = 0x9e3779b97f4a7c15ull * (uint64_t)(me + 1);

	MPI_Barrier(MPI_COMM_WORLD);
	t0 = MPI_Wtime();
	/* Every rank makes the same number of updates, so every rank runs the
	 * same number of rounds and the collectives match. */
	while (done < todo) {
		uint64_t n = todo - done < (uint64_t)chunk * (uint64_t)P ? todo - done : (uint64_t)chunk * (uint64_t)P;
		size_t rtot = 0;

		memset(scnt, 0, (size_t)P * sizeof(int));
		for (uint64_t i = 0; i < n; i++) {
			uint64_t v = rnd(&rs), w = v % ((uint64_t)P * words);

			vals[i] = v;
			scnt[w / words]++;
		}
		for (int d = 0, off = 0; d < P; d++) {
			sdsp[d] = off;
			fill[d] = off;
			off += scnt[d];
		}
		for (uint64_t i = 0; i < n; i++) {
			uint64_t w = vals[i] % ((uint64_t)P * words);

			sbuf[fill[w / words]++] = vals[i];
		}
		/* Our own: at once. */
		for (int k = sdsp[me]; k < sdsp[me] + scnt[me]; k++)
			table[(sbuf[k] % ((uint64_t)P * words)) & mask] ^= sbuf[k];
		applied += (uint64_t)scnt[me];
		scnt[me] = 0;
		MPI_Alltoall(scnt, 1, MPI_INT, rcnt, 1, MPI_INT, MPI_COMM_WORLD);
		for (int s = 0; s < P; s++) {
			rdsp[s] = (int)rtot;
			rtot += (size_t)rcnt[s];
		}
		if (rtot > rcap) {
			rcap = rtot;
			rbuf = realloc(rbuf, rcap * sizeof(*rbuf));
			if (!rbuf)
				MPI_Abort(MPI_COMM_WORLD, 1);
		}
		MPI_Alltoallv(sbuf, scnt, sdsp, MPI_UINT64_T, rbuf, rcnt, rdsp, MPI_UINT64_T, MPI_COMM_WORLD);
		for (size_t k = 0; k < rtot; k++)
			table[(rbuf[k] % ((uint64_t)P * words)) & mask] ^= rbuf[k];
		applied += rtot;
		done += n;
	}
	e = MPI_Wtime() - t0;
	MPI_Reduce(&e, &worst, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
	MPI_Reduce(&applied, &all_applied, 1, MPI_UINT64_T, MPI_SUM, 0, MPI_COMM_WORLD);
	MPI_Reduce(&todo, &all_todo, 1, MPI_UINT64_T, MPI_SUM, 0, MPI_COMM_WORLD);
	if (me == 0) {
		printf("elapsed_s %.6f gups %.6f\n", worst, (double)all_todo / worst / 1e9);
		if (all_applied != all_todo) {
			fprintf(stderr, "mb_gups: %llu updates applied, %llu made\n", (unsigned long long)all_applied,
				(unsigned long long)all_todo);
			MPI_Abort(MPI_COMM_WORLD, 1);
		}
	}
	MPI_Finalize();
	return 0;
}
