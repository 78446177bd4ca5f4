/* client/mpi/fmpi.h - libferry-mpi's modules: the MPI profiling-interface
 * library that runs an unchanged MPI program's collectives in ferryd
 * (README, "MPI programs").  Not installed: the library has no header of
 * its own, a program calls MPI.
 *
 *   init.c   MPI_Init*, MPI_Finalize, the communicators ferry serves
 *            (world, MPI_Comm_dup, MPI_Comm_split), the log, waiting
 *   coll.c   the collectives, blocking and non-blocking
 *   req.c    requests: the generalized request that is the program's
 *            handle, MPI_Wait/MPI_Test and their families
 *
 * Every rank makes the same choice for every operation: a communicator is
 * on ferry or not from its creation on (agreed with PMPI_Allreduce), and a
 * call on a ferry communicator passes through only for a reason MPI
 * requires every rank to share (a reduction's datatype and op).
 */
#ifndef FERRY_MPI_FMPI_H
#define FERRY_MPI_FMPI_H

#include "../ferry.h"

#include <stddef.h>     /* before mpi.h, which uses ptrdiff_t */
#include <mpi.h>

/* A communicator whose collectives ferry runs.  Owned by init.c: made when
 * the communicator is (world at MPI_Init), freed when it is freed (or at
 * MPI_Finalize) and no group's handle made from it is left open. */
struct fcomm {
	ferry_t *f;             /* the job's handle (world) or a group's */
	MPI_Comm comm;
	int id;                 /* 0: MPI_COMM_WORLD, then in order of creation */
	int rank, size;
	int freed;              /* MPI_Comm_free'd; closed once its groups are */
	int pending;            /* requests of ours posted and not ended */
	unsigned long posted;   /* operations posted on f */
	ferry_req_t *sync[2];   /* fmpi_posted's barriers, older first */
	struct fcomm *next;     /* every fcomm, newest first */
};

/* A buffer argument of a data-movement collective as ferry sees it.  A
 * datatype whose elements are not contiguous bytes is packed (PMPI_Pack)
 * into a copy ferry reads and unpacked from it when the operation ended:
 * MPI requires only the type signatures of the ranks to match, so the
 * datatype is no reason all ranks share to pass through. */
struct fchunk {
	char *user;
	int count;
};
struct side {
	char *p;                /* what ferry reads or writes (NULL: none) */
	size_t bytes;           /* one block, bytes */
	size_t *cnt, *dsp;      /* v-forms: bytes per rank (malloc'd) */
	void *tmp;              /* packed copy, or NULL */
	size_t tmp_bytes;
	MPI_Datatype type;
	int unpack;             /* copy tmp back into the chunks at the end */
	int nch;
	struct fchunk *ch;      /* where the packed bytes come from and go */
};

/* A non-blocking collective ferry runs.  The program's MPI_Request is a
 * generalized request (PMPI_Grequest_start) that req.c completes when
 * ferry's request ended; its free function frees this. */
struct freq {
	MPI_Request mreq;
	ferry_req_t *fr;        /* NULL once ended */
	struct fcomm *c;
	const char *name;
	int err;                /* ferry's result once ended */
	int ended;
	int detached;           /* MPI_Request_free'd by the program */
	struct side s[2];
	struct freq *next;
};

/* --- init.c --- */
extern int fmpi_log_on;
/* One line on stderr, in one write (fmt without the newline). */
void fmpi_say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* A line of FERRY_MPI_LOG=1 about call name on c (NULL: no communicator). */
void fmpi_log(const struct fcomm *c, const char *name, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* 1 if the job runs on ferry (MPI_Init agreed), else every call passes. */
int fmpi_on(void);
/* The fcomm of comm, or NULL: its collectives pass through. */
struct fcomm *fmpi_comm(MPI_Comm comm);
/* Waits, without spinning for long, until done(arg) says 1 (or < 0),
 * driving MPI's progress meanwhile: a rank asleep in a ferry operation
 * must still answer the other ranks' point-to-point traffic. */
int fmpi_wait(int (*done)(void *), void *arg);
/* Counts an operation posted on c (fmpi_posted in init.c says why). */
void fmpi_posted(struct fcomm *c);
/* ferry_test as a condition for fmpi_wait (arg: ferry_req_t **). */
int fmpi_req_done(void *arg);
/* Fails a call: the communicator's error handler, as MPI would. */
int fmpi_fail(struct fcomm *c, const char *name, int err);

/* --- req.c --- */
/* Makes the program's request for r (ferry's request posted on c); 0 or an
 * MPI error.  On failure r is the caller's. */
int fmpi_req_start(struct fcomm *c, const char *name, ferry_req_t *r, struct side s[2], MPI_Request *req_p);
/* Ends one request of c that is still running (so that another can be
 * posted, or c closed); 1 if one ended, 0 if none is left. */
int fmpi_req_reap_one(struct fcomm *c);
/* Ends every request (MPI_Finalize). */
void fmpi_req_fini(void);

/* --- coll.c --- */
void side_free(struct side *s);
void side_finish(struct side *s);

#endif
