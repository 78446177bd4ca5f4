/* tests/bench/mb_a2a.c - the same fine-grained all-to-all with Open MPI, the
 * way an application would do it without ferry.
 *
 *   mb_a2a isend --items K --len M
 *       one MPI_Isend per item, destinations in random order; at most W sends
 *       and W pre-posted receives (MPI_ANY_SOURCE) outstanding, progressed
 *       with MPI_Testsome: correct and deadlock-free for any K.
 *   mb_a2a alltoallv --items K --len M --pack R
 *       the application aggregates by hand: R items per destination per
 *       round packed into one buffer, one MPI_Alltoallv per round.
 *
 * Rank 0 prints "elapsed_s X" (the slowest rank, after a barrier start).
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define W 64

static uint64_t rnd(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static void isend_all(int me, int P, long K, long M)
{
	long total = K * (P - 1), sent = 0, got = 0, posted = 0;
	int *order = malloc((size_t)(total ? total : 1) * sizeof(*order));
	char *sbuf = calloc(W, (size_t)M), *rbuf = calloc(W, (size_t)M);
	MPI_Request sreq[W], rreq[W];
	int idx[W], n, free_s[W], nfree = W;
	uint64_t rs = 0x9e3779b97f4a7c15ull * (uint64_t)(me + 1);

	for (int i = 0, k = 0; i < P; i++)
		for (long j = 0; i != me && j < K; j++)
			order[k++] = i;
	for (long i = total; i > 1; i--) {
		long j = (long)(rnd(&rs) % (uint64_t)i);
		int t = order[i - 1];

		order[i - 1] = order[j];
		order[j] = t;
	}
	for (int i = 0; i < W; i++) {
		sreq[i] = MPI_REQUEST_NULL;
		free_s[i] = i;
		if (posted < total) {
			MPI_Irecv(rbuf + (size_t)i * M, (int)M, MPI_BYTE, MPI_ANY_SOURCE, 0, MPI_COMM_WORLD, &rreq[i]);
			posted++;
		} else {
			rreq[i] = MPI_REQUEST_NULL;
		}
	}
	while (sent < total || got < total) {
		while (sent < total && nfree > 0) {
			int s = free_s[--nfree];

			memcpy(sbuf + (size_t)s * M, &sent, M < 8 ? (size_t)M : 8);
			MPI_Isend(sbuf + (size_t)s * M, (int)M, MPI_BYTE, order[sent], 0, MPI_COMM_WORLD, &sreq[s]);
			sent++;
		}
		MPI_Testsome(W, sreq, &n, idx, MPI_STATUSES_IGNORE);
		for (int i = 0; n != MPI_UNDEFINED && i < n; i++)
			free_s[nfree++] = idx[i];
		MPI_Testsome(W, rreq, &n, idx, MPI_STATUSES_IGNORE);
		for (int i = 0; n != MPI_UNDEFINED && i < n; i++) {
			got++;
			/* Keep receives posted while more items are due. */
			if (posted < total) {
				MPI_Irecv(rbuf + (size_t)idx[i] * M, (int)M, MPI_BYTE, MPI_ANY_SOURCE, 0, MPI_COMM_WORLD,
					  &rreq[idx[i]]);
				posted++;
			}
		}
	}
	MPI_Waitall(W, sreq, MPI_STATUSES_IGNORE);
	free(order);
	free(sbuf);
	free(rbuf);
}

static void alltoallv_all(int me, int P, long K, long M, long R)
{
	long rounds = (K + R - 1) / R;
	char *sbuf = malloc((size_t)(R * M * P)), *rbuf = malloc((size_t)(R * M * P));
	int *cnt = malloc(sizeof(int) * (size_t)P), *displ = malloc(sizeof(int) * (size_t)P);
	volatile char sink = 0;

	for (long r = 0; r < rounds; r++) {
		long n = r == rounds - 1 ? K - r * R : R;     /* items per destination this round */

		for (int d = 0; d < P; d++) {
			cnt[d] = d == me ? 0 : (int)(n * M);
			displ[d] = (int)((long)d * R * M);
			/* pack: the application writes each item into its slot */
			for (long i = 0; d != me && i < n; i++)
				memcpy(sbuf + displ[d] + i * M, &i, M < 8 ? (size_t)M : 8);
		}
		MPI_Alltoallv(sbuf, cnt, displ, MPI_BYTE, rbuf, cnt, displ, MPI_BYTE, MPI_COMM_WORLD);
		/* unpack: read every item once */
		for (int d = 0; d < P; d++)
			for (long i = 0; d != me && i < n; i++)
				sink ^= rbuf[displ[d] + i * M];
	}
	(void)sink;
	free(sbuf);
	free(rbuf);
	free(cnt);
	free(displ);
}

int main(int argc, char **argv)
{
	long K = 64, M = 16, R = 64;
	int me, P;
	double t0, el, max;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &me);
	MPI_Comm_size(MPI_COMM_WORLD, &P);
	for (int i = 2; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--items"))
			K = atol(argv[i + 1]);
		else if (!strcmp(argv[i], "--len"))
			M = atol(argv[i + 1]);
		else if (!strcmp(argv[i], "--pack"))
			R = atol(argv[i + 1]);
	}
	MPI_Barrier(MPI_COMM_WORLD);
	t0 = MPI_Wtime();
	if (argc > 1 && !strcmp(argv[1], "alltoallv"))
		alltoallv_all(me, P, K, M, R);
	else
		isend_all(me, P, K, M);
	el = MPI_Wtime() - t0;
	MPI_Reduce(&el, &max, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
	if (me == 0)
		printf("elapsed_s %.6f\n", max);
	MPI_Finalize();
	return 0;
}
