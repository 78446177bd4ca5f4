/* tests/mpi/fm_wait.c OUT - waiting, as libferry-mpi does it: a rank that
 * waits for a late rank in MPI_Waitall over a ferry request and an MPI one,
 * in MPI_Wait, and in a blocking MPI_Barrier sleeps (its CPU time is
 * measured: with FM_EXPECT_SLEEP=1 it must be under a quarter of the wall
 * time); 100 non-blocking allreduces outstanding on one communicator (more
 * than ferry's 64 pending requests per handle); 300 non-blocking calls of
 * rank 0 made while the others sleep, which must all return at once (with
 * FM_EXPECT_SLEEP=1: within 0.5 s, the others sleep 1 s); 300 scans whose
 * rank 0 runs ahead of the others; a communicator freed before the one
 * duplicated from it; requests waited for by PMPI_Waitall, PMPI_Wait and
 * PMPI_Test directly (as a tool or Fortran would).  Results are checked here and their hashes written
 * to OUT.RANK (fm.h).
 */
#include "fm.h"

#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

static double cpu_s(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + (double)ru.ru_stime.tv_sec +
	       ru.ru_stime.tv_usec / 1e6;
}

static double wall_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* How long the late ranks sleep: 1 s, 0.1 s with FM_QUICK=1 (mpich.sh:
 * MPICH alone spins, and the waits' CPU is not checked there). */
static useconds_t late_us = 1000000;

/* Rank 0 waits with wait() while the last rank sleeps late_us first. */
static void late(const char *what, void (*wait)(void))
{
	const char *e = getenv("FM_EXPECT_SLEEP");
	double c0, w0, c, w;

	MPI_Barrier(MPI_COMM_WORLD);
	if (fm_rank == fm_size - 1)
		usleep(late_us);
	c0 = cpu_s();
	w0 = wall_s();
	wait();
	c = cpu_s() - c0;
	w = wall_s() - w0;
	if (fm_rank == 0) {
		fprintf(stderr, "fm_wait: %s: %.3f s CPU in %.3f s\n", what, c, w);
		if (e && *e == '1' && (w < 0.5 || c > w / 4))
			fm_fail("a wait for a late rank used the CPU (or did not wait)");
	}
	fprintf(fm_out, "%s done\n", what);
}

static void waitall_mixed(void)
{
	MPI_Request r[3];
	int in = -1, out = fm_rank;

	MPI_Ibarrier(MPI_COMM_WORLD, &r[0]);
	MPI_Irecv(&in, 1, MPI_INT, (fm_rank + fm_size - 1) % fm_size, 3, MPI_COMM_WORLD, &r[1]);
	MPI_Isend(&out, 1, MPI_INT, (fm_rank + 1) % fm_size, 3, MPI_COMM_WORLD, &r[2]);
	MPI_Waitall(3, r, MPI_STATUSES_IGNORE);
	if (in != (fm_rank + fm_size - 1) % fm_size)
		fm_fail("point-to-point in a mixed MPI_Waitall");
}

static void wait_one(void)
{
	MPI_Request r;
	int v = fm_rank + 1, s = 0;

	MPI_Iallreduce(&v, &s, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &r);
	MPI_Wait(&r, MPI_STATUS_IGNORE);
	if (s != fm_size * (fm_size + 1) / 2)
		fm_fail("MPI_Iallreduce");
}

static void barrier(void)
{
	MPI_Barrier(MPI_COMM_WORLD);
}

int main(int argc, char **argv)
{
	enum { N = 100 };
	MPI_Request r[N];
	MPI_Comm a, b;
	int v[N], s[N];

	fm_init(&argc, &argv);
	if (getenv("FM_QUICK") && *getenv("FM_QUICK") == '1')
		late_us = 100000;
	late("waitall over a ferry and MPI requests", waitall_mixed);
	late("wait", wait_one);
	late("barrier", barrier);

	for (int i = 0; i < N; i++) {
		v[i] = fm_rank * i;
		MPI_Iallreduce(&v[i], &s[i], 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &r[i]);
	}
	MPI_Waitall(N, r, MPI_STATUSES_IGNORE);
	for (int i = 0; i < N; i++)
		if (s[i] != i * fm_size * (fm_size - 1) / 2)
			fm_fail("100 outstanding MPI_Iallreduce");
	fm_emit("100 outstanding", s, sizeof(s));

	/* 300 non-blocking operations of three kinds on one communicator,
	 * posted before any is waited for, by rank 0 while the others sleep
	 * 1 s: MPI's non-blocking calls return without waiting, so rank 0
	 * is through all 300 calls long before the others post (ferry takes
	 * 64 requests per handle: the rest wait in libferry-mpi's queue) */
	{
		enum { M = 300 };
		static int x[M], y[M], g[M][8];
		const char *e = getenv("FM_EXPECT_SLEEP");
		MPI_Request q[M];
		double t0, t;

		if (fm_size > 8)
			fm_fail("at most 8 ranks");
		MPI_Barrier(MPI_COMM_WORLD);
		if (fm_rank != 0)
			usleep(late_us);
		t0 = wall_s();
		for (int i = 0; i < M; i++) {
			x[i] = fm_rank * 1000 + i;
			y[i] = fm_rank == i % fm_size ? i : -1;
			switch (i % 3) {
			case 0:
				MPI_Iallreduce(MPI_IN_PLACE, &x[i], 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &q[i]);
				break;
			case 1:
				MPI_Ibcast(&y[i], 1, MPI_INT, i % fm_size, MPI_COMM_WORLD, &q[i]);
				break;
			default:
				MPI_Iallgather(&x[i], 1, MPI_INT, g[i], 1, MPI_INT, MPI_COMM_WORLD, &q[i]);
				break;
			}
		}
		t = wall_s() - t0;
		if (fm_rank == 0) {
			fprintf(stderr, "fm_wait: 300 non-blocking calls before the others: %.3f s\n", t);
			if (e && *e == '1' && t > 0.5)
				fm_fail("the non-blocking calls waited for the other ranks");
		}
		MPI_Waitall(M, q, MPI_STATUSES_IGNORE);
		for (int i = 0; i < M; i++)
			if ((i % 3 == 0 && x[i] != 1000 * fm_size * (fm_size - 1) / 2 + fm_size * i) ||
			    (i % 3 == 1 && y[i] != i) || (i % 3 == 2 && (g[i][0] != i || g[i][fm_size - 1] != (fm_size - 1) * 1000 + i)))
				fm_fail("300 non-blocking operations posted before any wait");
		fm_emit("300 posted", g, sizeof(g));
	}

	/* The even ranks (one a node in mpi_wait.sh): rank 0, which needs
	 * nobody for a scan, runs 300 of them while the others sleep; ferryd
	 * fails a group whose pieces come more than 192 operations ahead of
	 * a node, which libferry-mpi's barrier every 32 prevents. */
	MPI_Comm_split(MPI_COMM_WORLD, fm_rank % 2, fm_rank, &a);
	if (fm_rank % 2 == 0) {
		enum { SCANS = 300 };
		int ar, one = 1, got = 0;

		MPI_Comm_rank(a, &ar);
		if (ar > 0)
			usleep(late_us / 2);
		for (int i = 0; i < SCANS; i++) {
			MPI_Scan(&one, &got, 1, MPI_INT, MPI_SUM, a);
			if (got != ar + 1)
				fm_fail("300 scans, rank 0 ahead");
		}
		fm_emit("300 scans", &got, sizeof(got));
	}
	MPI_Comm_free(&a);

	/* b is made from a, and outlives it */
	MPI_Comm_split(MPI_COMM_WORLD, 0, fm_size - fm_rank, &a);
	MPI_Comm_dup(a, &b);
	MPI_Comm_free(&a);
	{
		int rb, x, y;

		MPI_Comm_rank(b, &rb);
		x = rb;
		MPI_Allreduce(&x, &y, 1, MPI_INT, MPI_MAX, b);
		if (rb != fm_size - 1 - fm_rank || y != fm_size - 1)
			fm_fail("a communicator duplicated from a freed one");
		fm_emit("after free", &y, sizeof(y));
	}
	MPI_Comm_free(&b);

	/* requests waited for through PMPI_* directly, as a tool below
	 * libferry-mpi or Fortran's MPI_WAIT in Open MPI would: the MPI
	 * library's own progress must end them (more than 64: some must also
	 * be posted from libferry-mpi's queue meanwhile); an alarm ends a
	 * hang */
	{
		enum { K = 100 };
		MPI_Request q[K], one;
		int x[K], y = fm_rank == 1 ? 42 : -1, flag = 0;

		alarm(30);
		for (int i = 0; i < K; i++) {
			x[i] = i + fm_rank;
			MPI_Iallreduce(MPI_IN_PLACE, &x[i], 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &q[i]);
		}
		PMPI_Waitall(K, q, MPI_STATUSES_IGNORE);
		for (int i = 0; i < K; i++)
			if (x[i] != fm_size * i + fm_size * (fm_size - 1) / 2)
				fm_fail("100 allreduces waited for by PMPI_Waitall");
		MPI_Ibarrier(MPI_COMM_WORLD, &one);
		PMPI_Wait(&one, MPI_STATUS_IGNORE);
		MPI_Ibcast(&y, 1, MPI_INT, 1, MPI_COMM_WORLD, &one);
		while (!flag)
			PMPI_Test(&one, &flag, MPI_STATUS_IGNORE);
		if (y != 42)
			fm_fail("a bcast tested by PMPI_Test");
		alarm(0);
		fm_emit("waited for by PMPI", x, sizeof(x));
	}
	fm_fini();
	return 0;
}
