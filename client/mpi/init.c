/* client/mpi/init.c - libferry-mpi's start and end, the communicators whose
 * collectives ferry runs, the log, and waiting (fmpi.h).
 *
 * Ownership: the fcomm of MPI_COMM_WORLD is made by MPI_Init* and freed by
 * MPI_Finalize; a communicator made from a ferry one (MPI_Comm_dup,
 * MPI_Comm_split) carries its fcomm as an attribute (keyval `kv`), freed by
 * the attribute's delete function when MPI frees the communicator, or by
 * MPI_Finalize.  A group's handle is closed only after the handles split
 * from it (ferry_close says -EBUSY before): an fcomm freed before its
 * children stays in `comms`, marked freed, until they are gone.  Closing
 * waits for its operations to end, but their requests may be waited for
 * later (MPI lets a program free a communicator with operations pending):
 * each holds a reference (fcomm.refs, req.c), and an fcomm closed while
 * referenced leaves `comms` and is freed by the last request's free
 * (fmpi_unref).  Its communicator is gone then, and so is MPI's handle of
 * it: fmpi_raise calls the error handler it had (kept when MPI freed it)
 * instead.
 */
#include "fmpi.h"

#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define FMPI_API __attribute__((visibility("default")))

int fmpi_log_on;
static struct fcomm *world;     /* NULL: everything passes through */
static struct fcomm *comms;     /* every fcomm, newest first */
static int kv = MPI_KEYVAL_INVALID;
static int next_id;
static int world_rank;

void fmpi_say(const char *fmt, ...)
{
	char line[512];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(line, sizeof(line) - 1, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if (n > (int)sizeof(line) - 2)
		n = (int)sizeof(line) - 2;
	line[n++] = '\n';
	/* one write a line: the ranks' lines reach mpirun's output whole */
	if (write(STDERR_FILENO, line, (size_t)n) < 0) {
		/* nowhere to say it */
	}
}

void fmpi_log(const struct fcomm *c, const char *name, const char *fmt, ...)
{
	char text[256];
	va_list ap;

	if (!fmpi_log_on)
		return;
	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	if (c)
		fmpi_say("ferry-mpi %d: %s comm %d: %s", world_rank, name, c->id, text);
	else
		fmpi_say("ferry-mpi %d: %s: %s", world_rank, name, text);
}

/* MPI 4.0 §6.4.3: a freed communicator's pending operations complete
 * normally, the object living on while they refer to it, and their errors
 * are raised on it (§9.3).  Ours are generalized requests, which MPI does
 * not tie to the communicator, and the program's handle of it is gone: we
 * call the handler it had (a reference of our own, PMPI_Comm_get_errhandler
 * when MPI freed it) through MPI_COMM_SELF for a moment, the handler
 * seeing MPI_COMM_SELF where MPI would give the freed communicator. */
void fmpi_raise(struct fcomm *c, int cls)
{
	MPI_Errhandler self;

	if (!c->gone) {
		PMPI_Comm_call_errhandler(c->comm, cls);
		return;
	}
	if (c->eh == MPI_ERRHANDLER_NULL || PMPI_Comm_get_errhandler(MPI_COMM_SELF, &self) != MPI_SUCCESS) {
		PMPI_Comm_call_errhandler(MPI_COMM_WORLD, cls);
		return;
	}
	PMPI_Comm_set_errhandler(MPI_COMM_SELF, c->eh);
	PMPI_Comm_call_errhandler(MPI_COMM_SELF, cls);
	PMPI_Comm_set_errhandler(MPI_COMM_SELF, self);
	PMPI_Errhandler_free(&self);
}

static void comm_free(struct fcomm *c)
{
	int done = 1;

	if (c->eh != MPI_ERRHANDLER_NULL && PMPI_Finalized(&done) == MPI_SUCCESS && !done)
		PMPI_Errhandler_free(&c->eh);
	free(c);
}

/* c's handle is closed and c out of `comms`: freed now, or by the last
 * request of ours that points to it. */
static void comm_drop(struct fcomm *c)
{
	c->closed = 1;
	c->f = NULL;
	if (!c->refs)
		comm_free(c);
}

void fmpi_unref(struct fcomm *c)
{
	if (--c->refs == 0 && c->closed)
		comm_free(c);
}

int fmpi_error(struct fcomm *c, const char *name, int cls, const char *why)
{
	char text[MPI_MAX_ERROR_STRING] = "";
	int len;

	if (!why) {
		PMPI_Error_string(cls, text, &len);
		why = text;
	}
	fmpi_say("ferry-mpi %d: %s on comm %d failed: %s", world_rank, name, c->id, why);
	PMPI_Comm_call_errhandler(c->comm, cls);
	return cls;
}

/* A process or node lost: MPI 4.0 has no class for it, the fault-tolerance
 * extensions do (MPICH's MPIX_, a ULFM build's MPI_); else MPI_ERR_OTHER. */
#if defined(MPI_ERR_PROC_FAILED)
#define ERR_LOST MPI_ERR_PROC_FAILED
#elif defined(MPIX_ERR_PROC_FAILED)
#define ERR_LOST MPIX_ERR_PROC_FAILED
#else
#define ERR_LOST MPI_ERR_OTHER
#endif
/* A group broken by an earlier failure: as a revoked communicator. */
#if defined(MPI_ERR_REVOKED)
#define ERR_BROKEN MPI_ERR_REVOKED
#elif defined(MPIX_ERR_REVOKED)
#define ERR_BROKEN MPIX_ERR_REVOKED
#else
#define ERR_BROKEN MPI_ERR_OTHER
#endif

/* MPI's error class closest to ferry's error err (negative errno), whose
 * text (ferry_last_error) tells apart what the daemons say with one errno:
 *
 *   -ENOMEM, -ENOBUFS (a memory limit)         MPI_ERR_NO_MEM
 *   -E2BIG, -EMSGSIZE, -EOVERFLOW, -ERANGE     MPI_ERR_COUNT
 *   -EINVAL "... different sizes/counts"       MPI_ERR_TRUNCATE (a rank
 *           (a rank sent more or less than its peer expects)
 *   -EINVAL "... different roots"              MPI_ERR_ROOT
 *   -EINVAL "... different types or operations" MPI_ERR_OP
 *   -EINVAL otherwise (different operations, algorithms, arguments)
 *                                              MPI_ERR_ARG
 *   -EPIPE "... left ..." (a rank left), -EHOSTDOWN (a node or link lost),
 *   -ECONNRESET, -ENOTCONN (ferryd gone), -ETIMEDOUT
 *                                              MPI_ERR_PROC_FAILED where
 *           the MPI has it (MPICH: MPIX_ERR_PROC_FAILED), else MPI_ERR_OTHER
 *   -EPIPE otherwise (the group broken by an earlier failure)
 *                                              MPI_ERR_REVOKED where the MPI
 *           has it (MPICH: MPIX_ERR_REVOKED), else MPI_ERR_OTHER
 *   anything else                              MPI_ERR_OTHER
 */
int fmpi_class(int err, const char *text)
{
	if (!text)
		text = "";
	switch (-err) {
	case 0:
		return MPI_SUCCESS;
	case ENOMEM:
	case ENOBUFS:
		return MPI_ERR_NO_MEM;
	case E2BIG:
	case EMSGSIZE:
	case EOVERFLOW:
	case ERANGE:
		return MPI_ERR_COUNT;
	case EINVAL:
		if (strstr(text, "different sizes") || strstr(text, "different counts"))
			return MPI_ERR_TRUNCATE;
		if (strstr(text, "different roots"))
			return MPI_ERR_ROOT;
		if (strstr(text, "different types or operations"))
			return MPI_ERR_OP;
		return MPI_ERR_ARG;
	case EPIPE:
		return strstr(text, " left ") ? ERR_LOST : ERR_BROKEN;
	case EHOSTDOWN:
	case ECONNRESET:
	case ENOTCONN:
	case ETIMEDOUT:
		return ERR_LOST;
	default:
		return MPI_ERR_OTHER;
	}
}

int fmpi_on(void)
{
	return world != NULL;
}

struct fcomm *fmpi_comm(MPI_Comm comm)
{
	void *v;
	int flag = 0;

	if (!world || comm == MPI_COMM_NULL)
		return NULL;
	if (comm == MPI_COMM_WORLD)
		return world;
	if (PMPI_Comm_get_attr(comm, kv, &v, &flag) != MPI_SUCCESS || !flag)
		return NULL;
	return v;
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* How long fmpi_wait yields before it sleeps ($FERRY_MPI_SPIN_US): a
 * collective on ferry takes hundreds of microseconds, and the daemon may
 * share the cores. */
static uint64_t wait_spin_ns = 50000;
/* How long it sleeps at most before it drives MPI's progress again: the
 * delay a point-to-point transfer that needs this rank (a rendezvous) sees
 * while the rank waits for ferry. */
#define WAIT_PROGRESS_MS 1

int fmpi_wait(int (*done)(void *), void *arg)
{
	static int said;
	uint64_t t0 = now_ns();

	for (;;) {
		struct pollfd p = { .fd = ferry_fd(world->f), .events = POLLIN };
		int flag, ret;

		fmpi_progress();
		if ((ret = done(arg)))
			return ret;
		if (now_ns() - t0 < wait_spin_ns) {
			sched_yield();
			continue;
		}
		/* Open MPI progresses every transfer in any probe */
		PMPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
		fmpi_progress();
		if ((ret = done(arg)))
			return ret;
		/* ferry_fd wakes us when a request that a ferry_test (in
		 * fmpi_progress) said was pending ends.  A poll that fails
		 * (no memory) is no reason to stop waiting: the operations
		 * waited for, and their buffers, are ferry's until they end;
		 * sleep a turn instead. */
		if (poll(&p, 1, WAIT_PROGRESS_MS) < 0 && errno != EINTR) {
			struct timespec ms = { 0, WAIT_PROGRESS_MS * 1000000L };

			if (!said++)
				fmpi_say("ferry-mpi %d: poll: %s (sleeping instead)", world_rank, strerror(errno));
			nanosleep(&ms, NULL);
		}
	}
}

struct fcomm *fmpi_comms(void)
{
	return comms;
}

/* --- communicators --- */

static struct fcomm *comm_new(ferry_t *f, MPI_Comm comm)
{
	struct fcomm *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->f = f;
	c->comm = comm;
	c->eh = MPI_ERRHANDLER_NULL;
	c->id = next_id++;
	c->rank = ferry_rank(f);
	c->size = ferry_size(f);
	c->next = comms;
	comms = c;
	return c;
}

/* Closes c's handle once nothing of c runs and no handle split from it is
 * open; then closes parents freed earlier that waited for it. */
static void comm_close(struct fcomm *c)
{
	c->freed = 1;
	for (int again = 1; again;) {
		again = 0;
		for (struct fcomm **pp = &comms; *pp; pp = &(*pp)->next) {
			struct fcomm *x = *pp;
			int ret;

			if (!x->freed || x == world)
				continue;
			fmpi_wait(fmpi_idle, x);
			ret = ferry_close(x->f);
			if (ret == -EBUSY)
				continue;
			if (ret < 0)
				fmpi_log(x, "MPI_Comm_free", "ferry_close: %s", ferry_strerror(ret));
			*pp = x->next;
			comm_drop(x);
			again = 1;
			break;
		}
	}
}

static int comm_delete(MPI_Comm comm, int keyval, void *val, void *extra)
{
	struct fcomm *c = val;

	(void)keyval, (void)extra;
	/* requests of ours may outlive the communicator: keep its handler
	 * for their errors (fmpi_raise) */
	c->gone = 1;
	if (c->refs && PMPI_Comm_get_errhandler(comm, &c->eh) != MPI_SUCCESS)
		c->eh = MPI_ERRHANDLER_NULL;
	comm_close(c);
	return MPI_SUCCESS;
}

struct split {
	struct fcomm *c;
	int color, key, ret;
	ferry_t *sub;
};

/* ferry_split on c, as c's next operation: after what c's queue holds, and
 * once the handle has room for a request. */
static int split_done(void *arg)
{
	struct split *t = arg;

	if (t->c->qhead || t->c->sync_due || t->c->standins || !fmpi_room(t->c))
		return 0;
	t->ret = ferry_split(t->c->f, t->color, t->key, &t->sub);
	return t->ret != -EAGAIN;
}

/* A communicator newcomm made from c (collective over c's ranks): its
 * group of ferry, agreed on by every rank of newcomm. */
static void comm_derive(struct fcomm *c, const char *name, int color, int key, MPI_Comm newcomm)
{
	struct split t = { c, color, key, 0, NULL };
	ferry_t *sub;
	struct fcomm *n;
	int ret, ok, all = 0, mrank = -1, msize = -1, ncomms = 0;
	const char *why = "";

	fmpi_wait(split_done, &t);
	ret = t.ret;
	sub = t.sub;
	if (ret == 0)
		fmpi_counted(c);
	else
		fmpi_standin(c);        /* it may have failed here alone (coll.c) */
	if (newcomm == MPI_COMM_NULL) {
		if (sub)
			ferry_close(sub);
		return;
	}
	PMPI_Comm_rank(newcomm, &mrank);
	PMPI_Comm_size(newcomm, &msize);
	ok = ret == 0 && sub && ferry_rank(sub) == mrank && ferry_size(sub) == msize;
	for (struct fcomm *x = comms; x; x = x->next)
		ncomms++;
	if (ret < 0)
		why = ferry_strerror(ret);
	else if (!ok)
		why = "ferry's group differs from MPI's";
	else if (ncomms >= FMPI_MAX_COMMS)
		/* every communicator keeps room for its next operation
		 * (req.c): a rank has at most so many */
		ok = 0, why = "this rank has " FMPI_STR(FMPI_MAX_COMMS) " communicators on ferry already";
	PMPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, newcomm);
	n = all ? comm_new(sub, newcomm) : NULL;
	if (n && PMPI_Comm_set_attr(newcomm, kv, n) != MPI_SUCCESS) {
		comms = n->next;
		free(n);
		n = NULL;
	}
	if (!n) {
		if (sub)
			ferry_close(sub);
		fmpi_log(c, name, "new communicator passes through (%s)", all ? "no memory" :
			 ok ? "another rank could not make ferry's group" : why);
		return;
	}
	fmpi_log(c, name, "new communicator %d on ferry (%d ranks)", n->id, n->size);
}

FMPI_API int MPI_Comm_dup(MPI_Comm comm, MPI_Comm *newcomm)
{
	struct fcomm *c = fmpi_comm(comm);
	int ret = PMPI_Comm_dup(comm, newcomm);

	if (ret == MPI_SUCCESS && c)
		comm_derive(c, "MPI_Comm_dup", 0, c->rank, *newcomm);
	return ret;
}

FMPI_API int MPI_Comm_split(MPI_Comm comm, int color, int key, MPI_Comm *newcomm)
{
	struct fcomm *c = fmpi_comm(comm);
	int ret = PMPI_Comm_split(comm, color, key, newcomm);

	/* ferry orders a group by (key, rank in the parent), as MPI does */
	if (ret == MPI_SUCCESS && c)
		comm_derive(c, "MPI_Comm_split", color == MPI_UNDEFINED ? -1 : color, key, *newcomm);
	return ret;
}

/* --- start and end --- */

/* 1 if something listens on the daemon's socket (where ferry_open would
 * look: $FERRY_RUNTIME_DIR, else /run/ferry), so that a node without ferryd
 * makes the job pass through at once instead of timing out in ferry_open. */
static int probe(char *why, size_t len)
{
	const char *dir = getenv("FERRY_RUNTIME_DIR");
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd, ok;

	if (!dir || !*dir)
		dir = "/run/ferry";
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/ferryd.sock", dir);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		snprintf(why, len, "socket: %s", strerror(errno));
		return 0;
	}
	ok = connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
	if (!ok)
		snprintf(why, len, "no ferryd at %s: %s", sa.sun_path, strerror(errno));
	close(fd);
	return ok;
}

/* What FERRY_MPI says: 1 on (unset, empty, on, 1, yes, true, enable), 0 off
 * (off, 0, no, false, disable), any case; anything else is off, with a
 * warning: a program whose user meant to turn ferry off must not run on it
 * because of a spelling, and MPI alone always gives the program MPI's
 * semantics. */
static int ferry_mpi_on(const char *v)
{
	static const char *const on[] = { "", "on", "1", "yes", "true", "enable" };
	static const char *const off[] = { "off", "0", "no", "false", "disable" };

	if (!v)
		return 1;
	for (size_t i = 0; i < sizeof(on) / sizeof(on[0]); i++)
		if (!strcasecmp(v, on[i]))
			return 1;
	for (size_t i = 0; i < sizeof(off) / sizeof(off[0]); i++)
		if (!strcasecmp(v, off[i]))
			return 0;
	fmpi_say("ferry-mpi %d: FERRY_MPI=%s is neither on (on, 1, yes, true) nor off (off, 0, no, false, disable): "
		 "everything passes through to MPI", world_rank, v);
	return 0;
}

static void setup(int provided)
{
	const char *env = getenv("FERRY_MPI"), *log = getenv("FERRY_MPI_LOG");
	char why[160] = "", job[64] = "", host[32] = "";
	struct ferry_opts o = { 0 };
	ferry_t *f = NULL;
	int ok = 1, all = 0, size, ret;

	fmpi_log_on = log && *log && strcmp(log, "0") != 0;
	if ((env = getenv("FERRY_MPI_SPIN_US")) && *env)
		wait_spin_ns = strtoull(env, NULL, 10) * 1000;
	env = getenv("FERRY_MPI");
	PMPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
	PMPI_Comm_size(MPI_COMM_WORLD, &size);
	if (!ferry_mpi_on(env)) {
		ok = 0;
		snprintf(why, sizeof(why), "FERRY_MPI=%s", env);
	} else if (provided == MPI_THREAD_MULTIPLE) {
		/* ferry's handles are not thread-safe, and MPI_THREAD_MULTIPLE
		 * lets threads run collectives on different communicators at
		 * once: locking would serialise them, so MPI runs them */
		ok = 0;
		snprintf(why, sizeof(why), "MPI_THREAD_MULTIPLE");
	} else {
		ok = probe(why, sizeof(why));
	}
	/* every rank takes part even with FERRY_MPI=off, so that a rank
	 * whose environment differs cannot leave the others waiting here */
	PMPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
	if (!all) {
		fmpi_log(NULL, "MPI_Init", "everything passes through (%s)", ok ? "another rank cannot use ferry" : why);
		return;
	}
	if (world_rank == 0) {
		struct timespec ts;

		gethostname(host, sizeof(host) - 1);
		for (char *p = host; *p; p++)
			if (*p <= ' ' || *p > '~')
				*p = '_';
		clock_gettime(CLOCK_REALTIME, &ts);
		snprintf(job, sizeof(job), "mpi.%s.%d.%lx%09lx", host, (int)getpid(), (long)ts.tv_sec, ts.tv_nsec);
	}
	PMPI_Bcast(job, sizeof(job), MPI_CHAR, 0, MPI_COMM_WORLD);
	/* explicit job, rank and size: nothing of the launcher's environment
	 * (FERRY_JOB, Slurm's, Open MPI's variables) can name another job */
	o.job = job;
	o.rank = world_rank;
	o.size = size;
	ret = ferry_open(&f, &o);
	ok = ret == 0;
	if (!ok)
		snprintf(why, sizeof(why), "ferry_open: %s (%s)", ferry_strerror(ret), ferry_last_error());
	PMPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
	if (all && PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, comm_delete, &kv, NULL) != MPI_SUCCESS)
		all = 0;        /* the same on every rank: it fails for want of memory, and MPI aborts */
	if (all)
		world = comm_new(f, MPI_COMM_WORLD);
	if (!world) {
		if (f)
			ferry_close(f);
		fmpi_log(NULL, "MPI_Init", "everything passes through (%s)", ok ? "another rank cannot use ferry" : why);
		return;
	}
	fmpi_log(world, "MPI_Init", "on ferry, job %s, %d ranks%s", job, size,
		 fmpi_hook(1) ? "" : " (no progress hook: PMPI_Wait on a request of ours would not end)");
}

FMPI_API int MPI_Init(int *argc, char ***argv)
{
	int ret = PMPI_Init(argc, argv), provided = MPI_THREAD_SINGLE;

	if (ret == MPI_SUCCESS) {
		PMPI_Query_thread(&provided);
		setup(provided);
	}
	return ret;
}

FMPI_API int MPI_Init_thread(int *argc, char ***argv, int required, int *provided)
{
	int ret = PMPI_Init_thread(argc, argv, required, provided);

	if (ret == MPI_SUCCESS)
		setup(*provided);
	return ret;
}

FMPI_API int MPI_Finalize(void)
{
	if (world) {
		fmpi_req_fini();
		fmpi_hook(0);
		/* newest first: a group's handle before its parent's */
		while (comms && comms != world) {
			struct fcomm *c = comms;

			if (c->freed)
				comm_close(c);      /* waited for a child */
			else
				PMPI_Comm_delete_attr(c->comm, kv);
			if (comms == c) {   /* could not close (its attribute is gone): leave it */
				comms = c->next;
				comm_drop(c);
			}
		}
		fmpi_wait(fmpi_idle, world);
		ferry_close(world->f);
		comm_drop(world);
		world = NULL;
		comms = NULL;
		PMPI_Comm_free_keyval(&kv);
		fmpi_log(NULL, "MPI_Finalize", "ferry closed");
	}
	return PMPI_Finalize();
}
