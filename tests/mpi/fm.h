/* tests/mpi/fm.h - what the MPI test programs share: plain MPI programs
 * (no ferry API) that libferry-mpi intercepts when preloaded
 * (tests/integration/mpi_*.sh).  Each rank writes what it computed, one
 * line per operation with a hash of its result, to OUT.RANK, so that a run
 * through ferry is compared with a run of MPI alone (FERRY_MPI=off).
 */
#ifndef FERRY_TESTS_FM_H
#define FERRY_TESTS_FM_H

#include <stddef.h>
#include <mpi.h>

/* MPICH's MPI_STATUSES_IGNORE is (MPI_Status *)1, which GCC 12 takes for
 * an array of no room in the wait and test functions' calls */
#if defined(MPICH) && defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wstringop-overflow"
#endif
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static FILE *fm_out;
static int fm_rank, fm_size;

static __attribute__((unused)) void fm_init(int *argc, char ***argv)
{
	char path[4096];

	MPI_Init(argc, argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &fm_rank);
	MPI_Comm_size(MPI_COMM_WORLD, &fm_size);
	if (*argc < 2) {
		fprintf(stderr, "usage: %s OUT (each rank writes OUT.RANK)\n", (*argv)[0]);
		MPI_Abort(MPI_COMM_WORLD, 2);
	}
	snprintf(path, sizeof(path), "%s.%d", (*argv)[1], fm_rank);
	if (!(fm_out = fopen(path, "w"))) {
		perror(path);
		MPI_Abort(MPI_COMM_WORLD, 2);
	}
}

static __attribute__((unused)) void fm_fini(void)
{
	fclose(fm_out);
	MPI_Finalize();
}

/* FNV-1a over the bytes */
static __attribute__((unused)) uint64_t fm_hash(const void *p, size_t n)
{
	const unsigned char *b = p;
	uint64_t h = 1469598103934665603ull;

	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 1099511628211ull;
	return h;
}

/* One result line: what it is, and the hash of n bytes at p. */
static __attribute__((unused)) void fm_emit(const char *what, const void *p, size_t n)
{
	fprintf(fm_out, "%s %016llx\n", what, (unsigned long long)fm_hash(p, n));
}

static __attribute__((unused)) void fm_fail(const char *what)
{
	fprintf(stderr, "rank %d: %s\n", fm_rank, what);
	MPI_Abort(MPI_COMM_WORLD, 1);
}

static __attribute__((unused)) void *fm_alloc(size_t n)
{
	void *p = malloc(n ? n : 1);

	if (!p)
		fm_fail("out of memory");
	return p;
}

#endif
