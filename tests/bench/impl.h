/* tests/bench/impl.h - what fb_sg.c and fb_red.c need of the library they
 * are built with: ferry (fb_*) or, with BENCH_MPI defined (mb_sg.c,
 * mb_red.c), Open MPI, so that one program times both the same way.
 * Defines me, P (rank and size), impl ("ferry" or "mpi"), do_open,
 * do_close, fail (an error: exit), barrier, and for MPI now_s and arg_long
 * (ferry's come from tests/progs/common.h); with ferry, f is the job's
 * handle. */
#ifndef FERRY_BENCH_IMPL_H
#define FERRY_BENCH_IMPL_H

#ifdef BENCH_MPI
#include <mpi.h>
#else
#include "../progs/common.h"
#endif
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static uint32_t me, P;

#ifdef BENCH_MPI
static const char *const impl = "mpi";

static double now_s(void)
{
	return MPI_Wtime();
}

static void fail(const char *what, int err)
{
	char s[MPI_MAX_ERROR_STRING];
	int len = 0;

	MPI_Error_string(err, s, &len);
	fprintf(stderr, "rank %u %s: %s\n", me, what, s);
	MPI_Abort(MPI_COMM_WORLD, 1);
}

static long arg_long(const char *name, const char *v)
{
	char *end;
	long x = strtol(v, &end, 0);

	if (!*v || *end) {
		fprintf(stderr, "bad value for %s: %s\n", name, v);
		exit(2);
	}
	return x;
}

static void do_open(int *argc, char ***argv)
{
	int r, s;

	MPI_Init(argc, argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &r);
	MPI_Comm_size(MPI_COMM_WORLD, &s);
	me = (uint32_t)r;
	P = (uint32_t)s;
}

static void do_close(void)
{
	MPI_Finalize();
}

static void barrier(void)
{
	int ret = MPI_Barrier(MPI_COMM_WORLD);

	if (ret != MPI_SUCCESS)
		fail("MPI_Barrier", ret);
}
#else
static const char *const impl = "ferry";
static ferry_t *f;

static void fail(const char *what, int ret)
{
	fprintf(stderr, "rank %u %s: %s: %s\n", me, what, ferry_strerror(ret), ferry_last_error());
	exit(1);
}

static void do_open(int *argc, char ***argv)
{
	int ret = ferry_open(&f, NULL);

	(void)argc;
	(void)argv;
	if (ret < 0) {
		fprintf(stderr, "ferry_open: %s\n", ferry_last_error());
		exit(1);
	}
	me = (uint32_t)ferry_rank(f);
	P = (uint32_t)ferry_size(f);
}

static void do_close(void)
{
	int ret = ferry_close(f);

	if (ret < 0)
		fail("ferry_close", ret);
}

static void barrier(void)
{
	int ret = ferry_barrier(f);

	if (ret < 0)
		fail("ferry_barrier", ret);
}
#endif

#endif
