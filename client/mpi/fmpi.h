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
#include <stdint.h>
#include <mpi.h>

/* A communicator whose collectives ferry runs.  Owned by init.c: made when
 * the communicator is (world at MPI_Init); its handle is closed when MPI
 * frees the communicator (or at MPI_Finalize) and no group's handle made
 * from it is left open; the struct is freed then, or, while requests of
 * ours still point to it (refs: a non-blocking operation's, from
 * fmpi_start until MPI frees the request), when the last of them is
 * freed (fmpi_unref).  MPI_Comm_free with operations pending is valid MPI. */
struct fcomm {
	ferry_t *f;             /* the job's handle (world) or a group's */
	MPI_Comm comm;          /* not a handle any more once gone */
	int refs;               /* requests of ours that point here */
	int gone;               /* MPI freed comm */
	int closed;             /* f closed, out of the list: refs free it */
	MPI_Errhandler eh;      /* comm's error handler when it went, while refs */
	int id;                 /* 0: MPI_COMM_WORLD, then in order of creation */
	int rank, size;
	int freed;              /* MPI_Comm_free'd; closed once its groups are */
	int pending;            /* operations of ours not ended (queued or posted) */
	int nposted;            /* ... of them posted: ferry's requests they hold */
	unsigned long posted;   /* operations posted on f */
	/* The operations called and not yet posted, oldest first (req.c):
	 * ferry takes FERRY_COLL_MAX_PENDING requests per handle, and a
	 * non-blocking call must not wait for room, so what does not fit
	 * waits here, its arguments captured, and is posted as requests end,
	 * in the order of the calls (the same on every rank). */
	struct freq *qhead, *qtail;
	int sync_due;           /* a barrier of ours is the next post */
	ferry_req_t *sync[2];   /* those barriers, older first (req.c) */
	unsigned standins;      /* stand-ins owed before the queue's head */
	ferry_req_t *standin[4];/* stand-ins posted, not yet ended */
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

/* Which of ferry's calls an operation posts. */
enum fkind {
	K_BARRIER, K_BCAST, K_GATHER, K_SCATTER, K_ALLGATHER, K_ALLTOALL, K_GATHERV, K_SCATTERV,
	K_ALLGATHERV, K_ALLTOALLV, K_REDUCE, K_ALLREDUCE, K_SCAN, K_EXSCAN, K_RSB, K_RS,
};

/* The arguments of ferry's call, captured when the program called (the
 * arrays belong to the operation's sides), so that the post can be made
 * later, from the communicator's queue. */
struct fargs {
	enum fkind kind;
	const void *sb;         /* FERRY_IN_PLACE where MPI_IN_PLACE */
	void *rb;
	size_t n;               /* bytes (block, sendbytes, recvbytes) or elements */
	const size_t *scnt, *sdsp, *rcnt, *rdsp;
	enum ferry_type ft;
	enum ferry_op fo;
	uint32_t root;
};

enum fstate { Q_QUEUED, Q_POSTED, Q_ENDED };

/* An operation ferry runs.  A non-blocking one's MPI_Request is a
 * generalized request (PMPI_Grequest_start) that req.c completes when
 * ferry's request ended; its free function frees this.  A blocking one's
 * is on the caller's stack (mreq MPI_REQUEST_NULL). */
struct freq {
	MPI_Request mreq;
	ferry_req_t *fr;        /* while posted */
	struct fcomm *c;
	const char *name;
	struct fargs a;
	enum fstate state;
	int err;                /* ferry's result once ended */
	int cls;                /* ... as an MPI error class (fmpi_class) */
	int raised;             /* ... raised by req.c, not through MPI */
	char why[192];          /* ... and what ferry said */
	int detached;           /* MPI_Request_free'd by the program */
	unsigned standins;      /* stand-ins owed right after this one */
	struct side s[2];
	struct freq *next, *prev; /* every operation of ours, oldest first */
	struct freq *hnext;     /* its bucket of the table by mreq (req.c) */
	int hashed;             /* ... in it (non-blocking, not detached) */
	struct freq *qnext;     /* c's queue */
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
/* Every fcomm, newest first (freed ones whose groups are open too). */
struct fcomm *fmpi_comms(void);
/* Waits, without spinning for long, until done(arg) says something but 0,
 * and returns that, driving ferry's operations (fmpi_progress) and MPI's
 * progress meanwhile: a rank asleep in a ferry operation must still answer
 * the other ranks' point-to-point traffic.  Nothing else ends it. */
int fmpi_wait(int (*done)(void *), void *arg);
/* Fails a call with MPI error class cls (why: NULL for MPI's text of it):
 * a line on stderr, then the communicator's error handler, as MPI would;
 * returns cls. */
int fmpi_error(struct fcomm *c, const char *name, int cls, const char *why);
/* MPI's error class for ferry's error err with its text (init.c: the
 * table). */
int fmpi_class(int err, const char *text);
/* Raises cls through c's error handler: its communicator's, or, once MPI
 * freed that, the handler it had (init.c says how). */
void fmpi_raise(struct fcomm *c, int cls);
/* Drops a reference a request of ours held on c (freeing c if it was the
 * last and c is closed). */
void fmpi_unref(struct fcomm *c);

/* --- req.c --- */
/* Runs q (a blocking call's, on the caller's stack, its sides and
 * arguments filled in) after what c's queue holds: 0 or ferry's error. */
int fmpi_run(struct freq *q);
/* Makes the program's request for q (malloc'd, filled in likewise) and
 * queues q: MPI_SUCCESS, or an MPI error and q is still the caller's. */
int fmpi_start(struct freq *q, MPI_Request *req_p);
/* Takes the news of ferry's requests that ended and posts what the queues
 * can: how many things happened.  Every progress point calls it (fmpi_wait,
 * the wait and test functions, the calls that post). */
int fmpi_progress(void);
/* 1 when nothing of c is queued, posted or due (it may be closed). */
int fmpi_idle(void *c);
/* Owes a stand-in on c in the place of an operation this rank could not
 * post (coll.c says why): a barrier of ours, posted in order. */
void fmpi_standin(struct fcomm *c);
/* Counts an operation posted on c: every 32nd, a barrier of ours is due. */
void fmpi_counted(struct fcomm *c);
/* 1 if c may take one more of ferry's requests now (req.c: room, the rule
 * that keeps communicators from waiting for each other). */
int fmpi_room(const struct fcomm *c);
/* How many communicators a rank may have on ferry at once (req.c). */
#define FMPI_MAX_COMMS 32
#define FMPI_STR_(x) #x
#define FMPI_STR(x) FMPI_STR_(x)
/* Ends every request (MPI_Finalize). */
void fmpi_req_fini(void);
/* Has the MPI library drive our progress too (on), or stops it; 1 if it
 * does (req.c: MPICH's poll functions, Open MPI's progress callbacks). */
int fmpi_hook(int on);

/* --- coll.c --- */
/* Posts q with ferry's call (its request in q->fr): 0 or -errno. */
int fmpi_post(struct freq *q);
void side_free(struct side *s);
void side_finish(struct side *s);

#endif
