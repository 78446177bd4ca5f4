/* tests/apps/mpi_bale.c - the MPI versions of the bale kernels of
 * tests/apps/ (ferry_histo, ferry_ig, ferry_permute), written the way an
 * MPI user writes them: the items of a round are bucketed by destination,
 * then exchanged either
 *
 *   alltoallv  packed by hand, one MPI_Alltoallv per round (the counts
 *              first, with MPI_Alltoall), or
 *   isend      one MPI_Isend per item (and one MPI_Irecv per item expected,
 *              the counts known from the same MPI_Alltoall), then a
 *              MPI_Waitall.
 *
 *   mpi_bale histo|ig|permute alltoallv|isend [--n N] [--table T] [--chunk C]
 *
 * Same tables, streams, items and verification as the ferry versions
 * (app.h); a round makes up to C items per destination on average (C x P
 * in all; C = 1024 unless said).  permute: bale's dart throwing, as in
 * ferry_permute.c.  Rank 0 prints the result line (app.h), variant
 * mpi-alltoallv or mpi-isend.  Exits 1 if the result is wrong.
 */
#include "app.h"

#include <mpi.h>

static int me, P, mode_isend;
static long chunk = 1024;
static int *scnt, *rcnt, *sdsp, *rdsp;

/* Exchanges a round: sbuf holds scnt[d] items of sz bytes for each rank d
 * at sdsp[d]; *rbuf gets rcnt[s] from each rank s at rdsp[s] (grown as
 * needed).  Returns the number of items received. */
static size_t exchange(const void *sbuf, size_t sz, void **rbuf, size_t *rcap)
{
	size_t rtot = 0, stot = 0;

	MPI_Alltoall(scnt, 1, MPI_INT, rcnt, 1, MPI_INT, MPI_COMM_WORLD);
	for (int s = 0; s < P; s++) {
		rdsp[s] = (int)rtot;
		rtot += (size_t)rcnt[s];
		stot += (size_t)scnt[s];
	}
	if (rtot > *rcap) {
		*rcap = rtot;
		if (!(*rbuf = realloc(*rbuf, rtot * sz)))
			MPI_Abort(MPI_COMM_WORLD, 1);
	}
	if (!mode_isend) {
		int *sc = malloc(4 * (size_t)P * sizeof(int)), *sd = sc + P, *rc = sd + P, *rd = rc + P;

		if (!sc)
			MPI_Abort(MPI_COMM_WORLD, 1);
		for (int r = 0; r < P; r++) {
			sc[r] = scnt[r] * (int)sz;
			sd[r] = sdsp[r] * (int)sz;
			rc[r] = rcnt[r] * (int)sz;
			rd[r] = rdsp[r] * (int)sz;
		}
		MPI_Alltoallv(sbuf, sc, sd, MPI_BYTE, *rbuf, rc, rd, MPI_BYTE, MPI_COMM_WORLD);
		free(sc);
		return rtot;
	}
	MPI_Request *req = malloc((rtot + stot + 1) * sizeof(*req));
	size_t k = 0;

	if (!req)
		MPI_Abort(MPI_COMM_WORLD, 1);
	for (int s = 0; s < P; s++)
		for (int j = 0; j < rcnt[s]; j++)
			MPI_Irecv((char *)*rbuf + (size_t)(rdsp[s] + j) * sz, (int)sz, MPI_BYTE, s, 0, MPI_COMM_WORLD,
				  &req[k++]);
	for (int d = 0; d < P; d++)
		for (int j = 0; j < scnt[d]; j++)
			MPI_Isend((const char *)sbuf + (size_t)(sdsp[d] + j) * sz, (int)sz, MPI_BYTE, d, 0, MPI_COMM_WORLD,
				  &req[k++]);
	MPI_Waitall((int)k, req, MPI_STATUSES_IGNORE);
	free(req);
	return rtot;
}

/* Buckets n items of sz bytes (dst[i] the destination of item i at
 * items + i x sz) into sbuf by destination, setting scnt and sdsp. */
static void bucket(const void *items, const int *dst, size_t n, size_t sz, void *sbuf)
{
	memset(scnt, 0, (size_t)P * sizeof(int));
	for (size_t i = 0; i < n; i++)
		scnt[dst[i]]++;
	for (int d = 0, off = 0; d < P; d++) {
		sdsp[d] = off;
		off += scnt[d];
	}
	int *fill = malloc((size_t)P * sizeof(int));

	if (!fill)
		MPI_Abort(MPI_COMM_WORLD, 1);
	memcpy(fill, sdsp, (size_t)P * sizeof(int));
	for (size_t i = 0; i < n; i++)
		memcpy((char *)sbuf + (size_t)fill[dst[i]]++ * sz, (const char *)items + i * sz, sz);
	free(fill);
}

static uint64_t sum_u64(uint64_t x)
{
	uint64_t r;

	MPI_Allreduce(&x, &r, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
	return r;
}

static double max_double(double x)
{
	double r;

	MPI_Allreduce(&x, &r, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
	return r;
}

/* bale histo: N increments of random counters of a table of T per rank. */
static int histo(uint64_t N, uint64_t T, double *secs_p)
{
	size_t round = (size_t)chunk * (size_t)P, rcap = 0;
	uint64_t *count = calloc(T, sizeof(uint64_t)), *want = calloc(T, sizeof(uint64_t));
	uint64_t *items = malloc(round * sizeof(uint64_t)), *sbuf = malloc(round * sizeof(uint64_t)), wrong = 0;
	int *dst = malloc(round * sizeof(int));
	void *rbuf = NULL;
	uint64_t s = bale_seed((uint32_t)me, BALE_HISTO);
	double t0;

	if (!count || !want || !items || !sbuf || !dst)
		MPI_Abort(MPI_COMM_WORLD, 1);
	MPI_Barrier(MPI_COMM_WORLD);
	t0 = MPI_Wtime();
	for (uint64_t done = 0; done < N;) {
		size_t n = N - done < round ? (size_t)(N - done) : round, k = 0, r;

		for (size_t i = 0; i < n; i++) {
			uint64_t g = bale_index(&s, T * (uint64_t)P);

			if ((int)(g / T) == me) {
				count[g % T]++;
				continue;
			}
			items[k] = g % T;
			dst[k++] = (int)(g / T);
		}
		bucket(items, dst, k, sizeof(uint64_t), sbuf);
		r = exchange(sbuf, sizeof(uint64_t), &rbuf, &rcap);
		for (size_t i = 0; i < r; i++) {
			uint64_t x = ((uint64_t *)rbuf)[i];

			if (x >= T)
				MPI_Abort(MPI_COMM_WORLD, 1);
			count[x]++;
		}
		done += n;
	}
	*secs_p = max_double(MPI_Wtime() - t0);
	for (int q = 0; q < P; q++) {
		uint64_t sq = bale_seed((uint32_t)q, BALE_HISTO);

		for (uint64_t i = 0; i < N; i++) {
			uint64_t g = bale_index(&sq, T * (uint64_t)P);

			if ((int)(g / T) == me)
				want[g % T]++;
		}
	}
	for (uint64_t x = 0; x < T; x++)
		wrong += count[x] != want[x];
	free(rbuf);
	free(dst);
	free(sbuf);
	free(items);
	free(want);
	free(count);
	return sum_u64(wrong) == 0;
}

struct req {
	uint32_t x, i;
};
struct rep {
	uint32_t i, zero;
	uint64_t v;
};

/* bale ig: N random words of a table of T per rank, requested and answered
 * round by round. */
static int ig(uint64_t N, uint64_t T, double *secs_p)
{
	size_t round = (size_t)chunk * (size_t)P, rcap = 0, acap = 0;
	uint64_t *table = malloc(T * sizeof(uint64_t)), *tgt = calloc(N ? N : 1, sizeof(uint64_t));
	uint64_t *want = malloc((N ? N : 1) * sizeof(uint64_t)), s = bale_seed((uint32_t)me, BALE_IG), wrong = 0;
	struct req *items = malloc(round * sizeof(*items)), *sbuf = malloc(round * sizeof(*sbuf));
	struct rep *ans = NULL;
	int *dst = malloc(round * sizeof(int));
	void *rbuf = NULL, *back = NULL;
	size_t bcap = 0;
	double t0;

	if (!table || !tgt || !want || !items || !sbuf || !dst)
		MPI_Abort(MPI_COMM_WORLD, 1);
	for (uint64_t x = 0; x < T; x++)
		table[x] = bale_value((uint64_t)me * T + x);
	for (uint64_t i = 0; i < N; i++)
		want[i] = bale_index(&s, T * (uint64_t)P);
	MPI_Barrier(MPI_COMM_WORLD);
	t0 = MPI_Wtime();
	for (uint64_t done = 0; done < N;) {
		size_t n = N - done < round ? (size_t)(N - done) : round, k = 0, r, b;

		for (size_t j = 0; j < n; j++) {
			uint64_t i = done + j;

			if ((int)(want[i] / T) == me) {
				tgt[i] = table[want[i] % T];
				continue;
			}
			items[k] = (struct req){ (uint32_t)(want[i] % T), (uint32_t)i };
			dst[k++] = (int)(want[i] / T);
		}
		bucket(items, dst, k, sizeof(*items), sbuf);
		r = exchange(sbuf, sizeof(*sbuf), &rbuf, &rcap);
		if (r > acap) {
			acap = r;
			if (!(ans = realloc(ans, acap * sizeof(*ans))))
				MPI_Abort(MPI_COMM_WORLD, 1);
		}
		for (size_t j = 0; j < r; j++) {
			struct req q = ((struct req *)rbuf)[j];

			if (q.x >= T)
				MPI_Abort(MPI_COMM_WORLD, 1);
			ans[j] = (struct rep){ .i = q.i, .v = table[q.x] };
		}
		/* the answers go back where the requests came from */
		for (int p = 0; p < P; p++) {
			scnt[p] = rcnt[p];
			sdsp[p] = rdsp[p];
		}
		b = exchange(ans, sizeof(*ans), &back, &bcap);
		for (size_t j = 0; j < b; j++) {
			struct rep a = ((struct rep *)back)[j];

			if (a.i >= N)
				MPI_Abort(MPI_COMM_WORLD, 1);
			tgt[a.i] = a.v;
		}
		done += n;
	}
	*secs_p = max_double(MPI_Wtime() - t0);
	for (uint64_t i = 0; i < N; i++)
		wrong += tgt[i] != bale_value(want[i]);
	free(back);
	free(rbuf);
	free(ans);
	free(dst);
	free(sbuf);
	free(items);
	free(want);
	free(tgt);
	free(table);
	return sum_u64(wrong) == 0;
}

struct dart {
	uint32_t slot, elem;
};

/* bale randperm by dart throwing, as ferry_permute.c: rounds of throws and
 * rejections, then the occupied slots in order (MPI_Exscan) sent to the
 * positions' ranks; verified by sending every element home. */
static int permute(uint64_t N, double *secs_p)
{
	uint64_t M = 2 * N, s = bale_seed((uint32_t)me, BALE_DARTS), nleft = N, hits = 0, first = 0, bad = 0, k;
	uint32_t *slot = malloc(M * sizeof(uint32_t)), *perm = malloc(N * sizeof(uint32_t));
	uint32_t *left = malloc(N * sizeof(uint32_t));
	struct dart *darts = malloc(M * sizeof(*darts)), *sbuf = malloc(M * sizeof(*sbuf)), *rej = NULL;
	int *dst = malloc(M * sizeof(int)), *rdst = NULL;
	uint8_t *seen = calloc(N, 1);
	void *rbuf = NULL;
	size_t rcap = 0, r, caprej = 0;
	double t0;

	if (!slot || !perm || !left || !darts || !sbuf || !dst || !seen)
		MPI_Abort(MPI_COMM_WORLD, 1);
	for (uint64_t i = 0; i < M; i++)
		slot[i] = UINT32_MAX;
	for (uint64_t i = 0; i < N; i++) {
		perm[i] = UINT32_MAX;
		left[i] = (uint32_t)((uint64_t)me * N + i);
	}
	MPI_Barrier(MPI_COMM_WORLD);
	t0 = MPI_Wtime();
	for (;;) {
		uint64_t all, nrej = 0;

		for (uint64_t i = 0; i < nleft; i++) {
			uint64_t t = bale_index(&s, M * (uint64_t)P);

			darts[i] = (struct dart){ (uint32_t)(t % M), left[i] };
			dst[i] = (int)(t / M);
		}
		bucket(darts, dst, nleft, sizeof(*darts), sbuf);
		r = exchange(sbuf, sizeof(*sbuf), &rbuf, &rcap);
		/* the owner keeps a dart if its slot is free, else rejects it */
		for (int q = 0; q < P; q++)
			for (int j = 0; j < rcnt[q]; j++) {
				struct dart d = ((struct dart *)rbuf)[rdsp[q] + j];

				if (d.slot >= M)
					MPI_Abort(MPI_COMM_WORLD, 1);
				if (slot[d.slot] == UINT32_MAX) {
					slot[d.slot] = d.elem;
					continue;
				}
				if (nrej == caprej) {
					caprej = caprej ? 2 * caprej : 4096;
					rej = realloc(rej, caprej * sizeof(*rej));
					rdst = realloc(rdst, caprej * sizeof(*rdst));
					if (!rej || !rdst)
						MPI_Abort(MPI_COMM_WORLD, 1);
				}
				rej[nrej] = d;
				rdst[nrej++] = q;
			}
		(void)r;
		if (nrej > M && !(sbuf = realloc(sbuf, nrej * sizeof(*sbuf))))
			MPI_Abort(MPI_COMM_WORLD, 1);
		bucket(rej, rdst, nrej, sizeof(*rej), sbuf);
		r = exchange(sbuf, sizeof(*sbuf), &rbuf, &rcap);
		nleft = 0;
		for (size_t j = 0; j < r; j++)
			left[nleft++] = ((struct dart *)rbuf)[j].elem;
		MPI_Allreduce(&nleft, &all, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
		if (!all)
			break;
	}
	for (uint64_t i = 0; i < M; i++)
		hits += slot[i] != UINT32_MAX;
	MPI_Exscan(&hits, &first, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
	if (me == 0)
		first = 0;
	k = 0;
	for (uint64_t i = 0; i < M; i++) {
		if (slot[i] == UINT32_MAX)
			continue;
		darts[k] = (struct dart){ (uint32_t)((first + k) % N), slot[i] };
		dst[k] = (int)((first + k) / N);
		k++;
	}
	bucket(darts, dst, k, sizeof(*darts), sbuf);
	r = exchange(sbuf, sizeof(*sbuf), &rbuf, &rcap);
	for (size_t j = 0; j < r; j++) {
		struct dart d = ((struct dart *)rbuf)[j];

		if (d.slot >= N)
			MPI_Abort(MPI_COMM_WORLD, 1);
		bad += perm[d.slot] != UINT32_MAX;
		perm[d.slot] = d.elem;
	}
	*secs_p = max_double(MPI_Wtime() - t0);
	for (uint64_t i = 0; i < N; i++) {
		bad += perm[i] == UINT32_MAX;
		darts[i] = (struct dart){ 0, perm[i] == UINT32_MAX ? 0 : perm[i] };
		dst[i] = (int)(darts[i].elem / N);
	}
	bucket(darts, dst, N, sizeof(*darts), sbuf);
	r = exchange(sbuf, sizeof(*sbuf), &rbuf, &rcap);
	for (size_t j = 0; j < r; j++) {
		uint32_t e = ((struct dart *)rbuf)[j].elem;

		if (e / N != (uint64_t)me)
			MPI_Abort(MPI_COMM_WORLD, 1);
		bad += seen[e % N]++ != 0;
	}
	for (uint64_t i = 0; i < N; i++)
		bad += seen[i] != 1;
	free(rbuf);
	free(rdst);
	free(rej);
	free(seen);
	free(dst);
	free(sbuf);
	free(darts);
	free(left);
	free(perm);
	free(slot);
	return sum_u64(bad) == 0;
}

int main(int argc, char **argv)
{
	uint64_t N = 1 << 20, T = 1000;
	const char *app, *variant;
	double secs = 0;
	int ok = 0;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &me);
	MPI_Comm_size(MPI_COMM_WORLD, &P);
	if (argc < 3) {
		fprintf(stderr, "usage: mpi_bale histo|ig|permute alltoallv|isend [--n N] [--table T] [--chunk C]\n");
		MPI_Abort(MPI_COMM_WORLD, 2);
	}
	app = argv[1];
	mode_isend = !strcmp(argv[2], "isend");
	variant = mode_isend ? "mpi-isend" : "mpi-alltoallv";
	for (int i = 3; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--n"))
			N = (uint64_t)app_arg("--n", argv[i + 1]);
		else if (!strcmp(argv[i], "--table"))
			T = (uint64_t)app_arg("--table", argv[i + 1]);
		else if (!strcmp(argv[i], "--chunk"))
			chunk = app_arg("--chunk", argv[i + 1]);
	}
	if (!T || !chunk || T > UINT32_MAX || N > UINT32_MAX)
		MPI_Abort(MPI_COMM_WORLD, 2);
	scnt = calloc(4 * (size_t)P, sizeof(int));
	if (!scnt)
		MPI_Abort(MPI_COMM_WORLD, 1);
	rcnt = scnt + P;
	sdsp = rcnt + P;
	rdsp = sdsp + P;
	if (!strcmp(app, "histo")) {
		ok = histo(N, T, &secs);
	} else if (!strcmp(app, "ig")) {
		ok = ig(N, T, &secs);
	} else if (!strcmp(app, "permute")) {
		if (N * (uint64_t)P * 2 >= UINT32_MAX)
			MPI_Abort(MPI_COMM_WORLD, 2);
		ok = permute(N, &secs);
	} else {
		fprintf(stderr, "mpi_bale: unknown app %s\n", app);
		MPI_Abort(MPI_COMM_WORLD, 2);
	}
	if (me == 0) {
		app_result(app, variant, (uint32_t)P, (double)N * P / secs, ok);
		printf("# %s n=%llu table=%llu seconds=%.6f chunk=%ld\n", app, (unsigned long long)N,
		       (unsigned long long)T, secs, chunk);
	}
	free(scnt);
	MPI_Finalize();
	return ok ? 0 : 1;
}
