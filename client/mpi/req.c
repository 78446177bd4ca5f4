/* client/mpi/req.c - the requests of the non-blocking collectives ferry runs,
 * and MPI_Wait, MPI_Test and their families over ferry's and MPI's requests
 * mixed (fmpi.h).
 *
 * The choice (README, "MPI programs"): the program's handle is a real MPI
 * request, a generalized one (PMPI_Grequest_start), and the wait and test
 * functions are intercepted.  Generalized requests alone would need a
 * thread that completes them (MPI_Grequest_complete) when ferry's request
 * ends: ferry's handles are not thread-safe, so that thread would have to
 * lock every ferry call of the program's thread, and a thread that waits
 * for ferry holds the lock or polls.  Intercepting alone would need a
 * handle MPI knows nothing of, which any function we do not intercept
 * (MPI_Request_get_status, MPI_Cancel, a tool below us) would take for
 * garbage.  Together: we learn that ferry's request ended in the program's
 * own calls (ferry_test), complete the generalized request then, and hand
 * the whole array to PMPI_Wait... or PMPI_Test..., which does what MPI does for
 * statuses, MPI_REQUEST_NULL, errors and freeing; the free function frees
 * our part.  A wait over ferry's requests sleeps on ferry_fd() between
 * looks (fmpi_wait), driving MPI's progress every millisecond.
 *
 * The queue: ferry takes FERRY_COLL_MAX_PENDING requests per handle (its
 * groups' included) and says -EAGAIN to more; a non-blocking call must
 * return without waiting, so an operation is queued on its communicator
 * with its arguments captured (fmpi.h, struct fargs; packed copies made
 * when the program called) and posted from the queue, in the order of the
 * calls, as soon as ferry takes it: at once when there is room, else at a
 * later progress point (fmpi_progress: every wait and test function, every
 * call that posts, fmpi_wait's loop).  Every rank posts a communicator's
 * operations in the same order, which is all ferry needs; when each rank
 * posts them does not matter.  A blocking call queues its operation the
 * same way (after the non-blocking ones called before it) and waits.
 *
 * Room (the rule that keeps communicators from waiting for each other):
 * ferry takes FERRY_COLL_MAX_PENDING (64) requests per job on this rank,
 * every group's handle counted on the job's, while MPI lets ranks call
 * collectives on different communicators in different orders.  Were the
 * 64 first come first served, a rank whose communicator A held them all
 * could not post B's operation, in which the other ranks wait before they
 * post A's: a hang.  So every communicator's next operation can always be
 * posted: a communicator that holds none of ferry's requests may always
 * take one, and one that holds some may take another only while, after
 * it, the sum over this rank's communicators of max(held, 1), plus one for
 * each communicator it may still make (FMPI_MAX_COMMS less those it has),
 * is at most 64 (fmpi_room).  Held: its operations posted and not yet
 * taken back by ferry_test, its barriers and stand-ins likewise, the
 * ferry_split of MPI_Comm_dup/split while it runs.  The sum stays within
 * 64 whatever the communicators do (making one turns a slot kept for it
 * into its own), so the head of a queue waits only for requests of its
 * own communicator, older ones, which end once every rank posted them,
 * which each rank can by the same rule.  The limit: a rank has at most
 * FMPI_MAX_COMMS (32) communicators on ferry at once (world, and freed
 * ones not yet closed, included); one made beyond that passes through,
 * decided with the PMPI_Allreduce that agrees on every new communicator
 * (init.c), and a communicator alone holds at most 64 - 31 = 33 requests,
 * the rest of its operations waiting in its queue.
 *
 * Blocking in MPI (the rule that keeps a rank's queue moving while it
 * waits in MPI): a rank that blocks in MPI with something of ours queued
 * must still post it, since another rank may wait for it before it sends
 * what this one waits for.  The wait functions therefore never block in a
 * PMPI_Wait... while anything of ours is queued: they test, our progress
 * between the tests (handed), and they hold `busy', which keeps the
 * progress hook out, only across MPI calls that return at once or across a
 * blocking one made with nothing queued (nothing can be queued during it:
 * only the program's calls queue).  MPI's calls that we do not intercept
 * (MPI_Recv, MPI_Probe, a collective that passes through) post from the
 * queues only through the hook: Open MPI's, or nothing in MPICH (README,
 * "MPI programs", says when that can hang).
 *
 * Ownership: a struct freq of a non-blocking call lives from fmpi_start
 * until MPI frees its generalized request (grq_free), which happens in a
 * PMPI_Wait... or Test... after we completed it, when ferry's request
 * ended; one MPI_Request_free'd by the program is waited for by us (reap)
 * once it ended.  Meanwhile it holds a reference on its fcomm (fmpi.h),
 * which the program may free before it waits; so does a failure kept for
 * raising (struct fail) across the PMPI call that frees the request.  A
 * blocking call's is on its stack, in `live` from fmpi_run until it
 * returns.
 */
#include "fmpi.h"

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FMPI_API __attribute__((visibility("default")))

static struct freq *live, *live_tail; /* every operation of ours, oldest first */

/* The non-blocking ones by the program's request (lookup), so that a wait
 * over many requests with many outstanding is not quadratic. */
#define NBUCKETS 1024
static struct freq *bucket[NBUCKETS];

static struct freq **bucket_of(MPI_Request r)
{
	uint64_t k = 0;

	/* (a pointer in Open MPI, an int in MPICH) */
	memcpy(&k, &r, sizeof(r) < sizeof(k) ? sizeof(r) : sizeof(k));
	return &bucket[(k * 0x9e3779b97f4a7c15ull) >> 54];
}

static void unhash(struct freq *q)
{
	if (!q->hashed)
		return;
	for (struct freq **pp = bucket_of(q->mreq); *pp; pp = &(*pp)->hnext)
		if (*pp == q) {
			*pp = q->hnext;
			break;
		}
	q->hashed = 0;
}

static void live_add(struct freq *q)
{
	q->next = NULL;
	q->prev = live_tail;
	if (live_tail)
		live_tail->next = q;
	else
		live = q;
	live_tail = q;
	if (q->mreq != MPI_REQUEST_NULL) {
		struct freq **b = bucket_of(q->mreq);

		q->hnext = *b;
		*b = q;
		q->hashed = 1;
	}
}

static void live_del(struct freq *q)
{
	unhash(q);
	if (q->prev)
		q->prev->next = q->next;
	else
		live = q->next;
	if (q->next)
		q->next->prev = q->prev;
	else
		live_tail = q->prev;
	q->next = q->prev = NULL;
}

static int grq_query(void *extra, MPI_Status *st)
{
	struct freq *q = extra;

	PMPI_Status_set_elements(st, MPI_BYTE, 0);
	PMPI_Status_set_cancelled(st, 0);
	st->MPI_SOURCE = MPI_UNDEFINED;
	st->MPI_TAG = MPI_UNDEFINED;
	/* an error our wait and test functions raise on the request's
	 * communicator is none of MPI's: Open MPI raises a generalized
	 * request's errors on MPI_COMM_WORLD */
	return q->err && !q->raised ? q->cls : MPI_SUCCESS;
}

static int grq_free(void *extra)
{
	struct freq *q = extra;
	struct fcomm *c = q->c;

	live_del(q);
	free(q);
	fmpi_unref(c);
	return MPI_SUCCESS;
}

static int grq_cancel(void *extra, int complete)
{
	(void)extra, (void)complete;
	return MPI_SUCCESS;     /* a collective cannot be cancelled */
}

/* q ended (err: ferry's result): its buffers are the program's again. */
static void q_end(struct freq *q, int err)
{
	if (q->state == Q_POSTED)
		q->c->nposted--;        /* ferry_test freed its request */
	q->state = Q_ENDED;
	q->err = err;
	q->cls = fmpi_class(err, ferry_last_error());
	if (err)
		snprintf(q->why, sizeof(q->why), "%s (%s)", ferry_strerror(err), ferry_last_error());
	q->c->pending--;
	side_finish(&q->s[0]);
	side_finish(&q->s[1]);
	if (q->mreq == MPI_REQUEST_NULL)
		return;         /* a blocking call's: it raises the error */
	if (err)
		fmpi_say("ferry-mpi: %s on comm %d failed: %s", q->name, q->c->id, q->why);
	PMPI_Grequest_complete(q->mreq);
}

static int q_ended(void *arg)
{
	const struct freq *q = arg;

	return q->state == Q_ENDED;
}

/* Every SYNC_EVERY operations of a communicator, a barrier of ours; the
 * one SYNC_EVERY later is posted only once the one before it ended, and
 * the operations after it wait in the queue meanwhile, so that no rank
 * gets more than about 3 x SYNC_EVERY operations ahead of the slowest.
 * MPI lets a rank that needs nobody run ahead for ever (rank 0 of a scan,
 * a reduce's other ranks, a gather's), but ferryd fails a group whose
 * pieces come more than 192 operations (3 x its pending limit) ahead of
 * what a node started (README, "The engine"). */
#define SYNC_EVERY 32

void fmpi_counted(struct fcomm *c)
{
	if (++c->posted % SYNC_EVERY == 0)
		c->sync_due = 1;
}

/* The requests of ferry's that c holds. */
static int held(const struct fcomm *c)
{
	int n = c->nposted;

	for (int i = 0; i < 2; i++)
		n += c->sync[i] != NULL;
	for (int i = 0; i < 4; i++)
		n += c->standin[i] != NULL;
	return n;
}

int fmpi_room(const struct fcomm *c)
{
	int sum = 0, comms = 0;

	if (!held(c))
		return 1;
	for (const struct fcomm *x = fmpi_comms(); x; x = x->next) {
		int h = held(x);

		sum += h ? h : 1;
		comms++;
	}
	if (comms < FMPI_MAX_COMMS)
		sum += FMPI_MAX_COMMS - comms;
	return sum < FERRY_COLL_MAX_PENDING;
}

/* Posts a stand-in on c (fmpi_standin); 0, or -EAGAIN to try again
 * later. */
static int post_standin(struct fcomm *c)
{
	ferry_req_t **slot = NULL;
	int ret;

	for (int i = 0; i < 4; i++)
		if (!c->standin[i] || ferry_test(&c->standin[i]) != 0)
			slot = &c->standin[i];
	if (!slot || !fmpi_room(c))
		return -EAGAIN;
	ret = ferry_ibarrier(c->f, slot);
	/* no memory for ferry's request: later, as for room */
	if (ret == -EAGAIN || ret == -ENOMEM)
		return -EAGAIN;
	c->standins--;
	if (ret == 0)
		fmpi_counted(c);
	/* else the group is broken or the daemon gone: nothing is left to
	 * keep in step */
	return 0;
}

/* Posts what c owes ferry, in order, as far as ferry takes it; how many
 * operations left the queue. */
static int push(struct fcomm *c)
{
	int n = 0;

	for (;;) {
		struct freq *q = c->qhead;
		ferry_req_t *b;
		int ret;

		if (c->sync_due) {
			if (c->sync[0] && ferry_test(&c->sync[0]) == 0)
				return n;
			/* no memory for ferry's request: later, as for room
			 * (skipping it here alone would leave this rank's
			 * operations one behind the others') */
			if (!fmpi_room(c) || (ret = ferry_ibarrier(c->f, &b)) == -EAGAIN || ret == -ENOMEM)
				return n;
			c->sync[0] = c->sync[1];
			/* a broken group: its operations say so */
			c->sync[1] = ret < 0 ? NULL : b;
			c->sync_due = 0;
			continue;
		}
		if (c->standins) {
			if (post_standin(c) < 0)
				return n;
			continue;
		}
		if (!q || !fmpi_room(c) || (ret = fmpi_post(q)) == -EAGAIN)
			return n;
		if (!(c->qhead = q->qnext))
			c->qtail = NULL;
		n++;
		/* the stand-ins owed after q come before the next one */
		c->standins += q->standins;
		if (ret < 0) {
			/* refused here alone (no memory to stage a buffer, an
			 * argument libferry finds wrong): it fails, and a
			 * stand-in takes its place (coll.c says why) */
			c->standins++;
			q_end(q, ret);
			continue;
		}
		q->state = Q_POSTED;
		c->nposted++;
		fmpi_counted(c);
	}
}

void fmpi_standin(struct fcomm *c)
{
	if (c->qtail)
		c->qtail->standins++;
	else
		c->standins++;
	push(c);
}

static void enqueue(struct freq *q)
{
	struct fcomm *c = q->c;

	q->state = Q_QUEUED;
	q->qnext = NULL;
	c->pending++;
	live_add(q);
	if (c->qtail)
		c->qtail->qnext = q;
	else
		c->qhead = q;
	c->qtail = q;
	push(c);
}

/* Frees what the program let go (MPI_Request_free) and has ended. */
static void reap(void)
{
	for (struct freq *q = live, *next; q; q = next) {
		MPI_Request r = q->mreq;

		next = q->next;
		if (q->detached && q->state == Q_ENDED) {
			/* no call of the program's is left to return a failure
			 * (q_end printed it): MPI must not raise it, on
			 * MPI_COMM_WORLD, from a wait the program never made */
			q->raised = 1;
			PMPI_Wait(&r, MPI_STATUS_IGNORE);       /* grq_free frees q */
		}
	}
}

/* Our code is running: the MPI library's progress hook keeps out. */
static int busy;

/* Takes the news of ferry's requests and posts what the queues can. */
static int progress_ops(void)
{
	int n = 0;

	for (struct freq *q = live, *next; q; q = next) {
		int ret;

		next = q->next;
		if (q->state == Q_POSTED && (ret = ferry_test(&q->fr)) != 0) {
			q_end(q, ret < 0 ? ret : 0);
			n++;
		}
	}
	for (struct fcomm *c = fmpi_comms(); c; c = c->next) {
		for (int i = 0; i < 2; i++)
			if (c->sync[i] && ferry_test(&c->sync[i]) != 0)
				n++;
		for (int i = 0; i < 4; i++)
			if (c->standin[i] && ferry_test(&c->standin[i]) != 0)
				n++;
		if (c->qhead || c->sync_due || c->standins)
			n += push(c);
	}
	return n;
}

int fmpi_progress(void)
{
	int n;

	busy++;
	n = progress_ops();
	reap();
	busy--;
	return n;
}

/* --- progress from the MPI library itself ---
 *
 * A request of ours waited for without us (PMPI_Wait called directly: a
 * tool below us, Fortran's MPI_WAIT in Open MPI) would spin for ever,
 * since only our progress completes the generalized request.  So the MPI
 * library drives our progress too, where it has a hook for it: MPICH polls
 * a generalized request started by MPIX_Grequest_start through its poll
 * function, in every wait and test of it; Open MPI 4.1 has no such
 * generalized requests (MPIX_Grequest_start came in 5.0), but calls the
 * functions registered with opal_progress_register_lp (libopen-pal, looked
 * up at run time: no link to Open MPI's internals) in its progress loop,
 * at low priority (less often than its own).  The hook takes the news of ferry's requests,
 * completes ours and posts what the queues can, and does nothing while our
 * own code runs (busy: it is then driving progress itself, and may be
 * in the middle of a wait and test function's bookkeeping) nor when
 * nothing of ours is outstanding; it frees nothing (reap waits for our
 * next call). */
static int hook(void)
{
	int n;

	if (busy || !live)
		return 0;
	busy++;
	n = progress_ops();
	busy--;
	return n;
}

#ifdef MPICH
static int grq_poll(void *extra, MPI_Status *st)
{
	(void)extra, (void)st;
	hook();
	return MPI_SUCCESS;
}

/* MPICH wants a wait function too (it refuses NULL), which it calls in a
 * loop, in a wait for such a request, until it is complete: one turn of
 * progress a call, as poll. */
static int grq_wait(int count, void **states, double timeout, MPI_Status *st)
{
	(void)count, (void)states, (void)timeout, (void)st;
	if (!hook())
		sched_yield();
	return MPI_SUCCESS;
}

static int grq_start(struct freq *q)
{
	return PMPIX_Grequest_start(grq_query, grq_free, grq_cancel, grq_poll, grq_wait, q, &q->mreq);
}

int fmpi_hook(int on)
{
	(void)on;
	return 1;       /* every request of ours carries its poll function */
}
#else
static int grq_start(struct freq *q)
{
	return PMPI_Grequest_start(grq_query, grq_free, grq_cancel, q, &q->mreq);
}

#ifdef OPEN_MPI
#include <dlfcn.h>

int fmpi_hook(int on)
{
	static int (*reg)(int (*)(void)), (*unreg)(int (*)(void));
	static int hooked;

	if (on && !hooked) {
		*(void **)&reg = dlsym(RTLD_DEFAULT, "opal_progress_register_lp");
		*(void **)&unreg = dlsym(RTLD_DEFAULT, "opal_progress_unregister");
		hooked = reg && unreg && reg(hook) == 0;
	} else if (!on && hooked) {
		unreg(hook);
		hooked = 0;
	}
	return hooked;
}
#else
int fmpi_hook(int on)
{
	(void)on;
	return 0;
}
#endif
#endif

int fmpi_idle(void *arg)
{
	const struct fcomm *c = arg;

	if (c->pending || c->qhead || c->sync_due || c->standins || c->sync[0] || c->sync[1])
		return 0;
	for (int i = 0; i < 4; i++)
		if (c->standin[i])
			return 0;
	return 1;
}

int fmpi_run(struct freq *q)
{
	q->mreq = MPI_REQUEST_NULL;
	enqueue(q);
	fmpi_wait(q_ended, q);
	live_del(q);
	return q->err;
}

int fmpi_start(struct freq *q, MPI_Request *req_p)
{
	int ret;

	reap();
	if ((ret = grq_start(q)) != MPI_SUCCESS)
		return ret;
	*req_p = q->mreq;
	q->c->refs++;           /* until grq_free */
	enqueue(q);
	return MPI_SUCCESS;
}

static int all_idle(void *arg)
{
	(void)arg;
	for (struct freq *q = live; q; q = q->next)
		if (q->state != Q_ENDED)
			return 0;
	for (struct fcomm *c = fmpi_comms(); c; c = c->next)
		if (!fmpi_idle(c))
			return 0;
	return 1;
}

void fmpi_req_fini(void)
{
	fmpi_wait(all_idle, NULL);
	reap();
}

/* --- the wait and test functions --- */

/* Our request behind the program's r, or NULL (MPI's own). */
static struct freq *lookup(MPI_Request r)
{
	if (r == MPI_REQUEST_NULL)
		return NULL;
	for (struct freq *q = *bucket_of(r); q; q = q->hnext)
		if (q->mreq == r)
			return q;
	return NULL;
}

/* Every wait and test function is a progress point of ours too (MPI's
 * progress rule: a test of any request lets every operation move). */
static void progress(void)
{
	if (live)
		fmpi_progress();
}

struct fails;

/* The requests of ours among reqs[0..n): qs[i], or NULL where MPI's. */
struct set {
	int n, ours;
	MPI_Request *reqs;
	struct freq **qs;
	struct freq *small[16];
	/* the wait it is handed to MPI as (handed) */
	enum { C_WAIT, C_WAITALL, C_WAITANY, C_WAITSOME } call;
	int *idx, *outcount, *idxs;
	MPI_Status *st;
	int ret;
	struct fails *f;        /* our errors kept for it */
};

static int set_init(struct set *s, int n, MPI_Request *reqs)
{
	s->n = n;
	s->reqs = reqs;
	s->ours = 0;
	s->qs = s->small;
	if (!live || n <= 0)
		return 0;
	/* without memory for the table, set_poll looks them up each time */
	if (n > (int)(sizeof(s->small) / sizeof(s->small[0])))
		s->qs = malloc((size_t)n * sizeof(*s->qs));
	for (int i = 0; i < n; i++) {
		struct freq *q = lookup(reqs[i]);

		if (s->qs)
			s->qs[i] = q;
		s->ours += q != NULL;
	}
	return s->ours;
}

static void set_fini(struct set *s)
{
	if (s->qs && s->qs != s->small)
		free(s->qs);
}

/* How many requests of ours have ended. */
static int set_poll(struct set *s)
{
	int ended = 0;

	for (int i = 0; i < s->n; i++) {
		struct freq *q = s->qs ? s->qs[i] : lookup(s->reqs[i]);

		if (q)
			ended += q->state == Q_ENDED;
	}
	return ended;
}

static int all_done(void *arg)
{
	struct set *s = arg;

	return set_poll(s) == s->ours;
}

/* The errors of ours among the requests a wait or test function is about
 * to hand MPI (which frees them): kept here by index before the call,
 * raised after it on the communicator each was posted on, as MPI raises
 * errors returned by MPI_Wait or MPI_Test on the request's communicator
 * (MPI 4.0 §9.3).  MPI would raise a generalized request's error on
 * MPI_COMM_WORLD (Open MPI 4.1 does: a generalized request has no
 * communicator), so those requests tell MPI they ended well (grq_query,
 * q->raised).  Where there is no memory to keep more than a few, the rest
 * go MPI's way. */
struct fail {
	int idx, cls;
	struct fcomm *c;        /* a reference: MPI may free the request */
};
struct fails {
	int n;
	struct fail *v;
	struct fail small[8];
};

static void fails_collect(struct fails *f, int n, const MPI_Request *reqs)
{
	int cap = (int)(sizeof(f->small) / sizeof(f->small[0])), bad = 0;

	f->n = 0;
	f->v = f->small;
	for (int i = 0; live && i < n; i++) {
		struct freq *q = lookup(reqs[i]);

		bad += q && q->state == Q_ENDED && q->err;
	}
	if (bad > cap && (f->v = malloc((size_t)bad * sizeof(*f->v))))
		cap = bad;
	if (!f->v)
		f->v = f->small;
	for (int i = 0; bad && i < n; i++) {
		struct freq *q = lookup(reqs[i]);

		if (q && q->state == Q_ENDED && q->err && f->n < cap) {
			q->raised = 1;
			f->v[f->n++] = (struct fail){ i, q->cls, q->c };
			q->c->refs++;
		}
	}
}

static const struct fail *fails_at(const struct fails *f, int idx)
{
	for (int k = 0; k < f->n; k++)
		if (f->v[k].idx == idx)
			return &f->v[k];
	return NULL;
}

static void fails_fini(struct fails *f)
{
	for (int k = 0; k < f->n; k++)
		fmpi_unref(f->v[k].c);
	if (f->v != f->small)
		free(f->v);
}

/* After a call that completed request idx (Wait, Test, Waitany, Testany;
 * MPI_UNDEFINED: none) and returned ret. */
static int raise_one(struct fails *f, int idx, int ret)
{
	const struct fail *x = fails_at(f, idx);

	if (x && ret == MPI_SUCCESS) {
		fmpi_raise(x->c, x->cls);
		ret = x->cls;
	}
	fails_fini(f);
	return ret;
}

/* After a call that completed cnt requests (Waitall, Testall: all n, idxs
 * NULL; Waitsome, Testsome: idxs[0..cnt)) and returned ret: the statuses'
 * MPI_ERROR fields, and MPI_ERR_IN_STATUS raised on the communicator of
 * the first that failed, as MPI does for its own requests. */
static int raise_many(struct fails *f, int cnt, const int *idxs, MPI_Status *sts, int ret)
{
	const struct fail *first = NULL;

	for (int k = 0; f->n && k < cnt; k++) {
		const struct fail *x = fails_at(f, idxs ? idxs[k] : k);

		if (x && !first)
			first = x;
		/* (MPI set the fields itself where it returned MPI_ERR_IN_STATUS) */
		if (sts != MPI_STATUSES_IGNORE && (x || ret == MPI_SUCCESS))
			sts[k].MPI_ERROR = x ? x->cls : MPI_SUCCESS;
	}
	if (first && ret == MPI_SUCCESS) {
		fmpi_raise(first->c, MPI_ERR_IN_STATUS);
		ret = MPI_ERR_IN_STATUS;
	}
	fails_fini(f);
	return ret;
}

/* The value of call, a PMPI_Wait... or Test... over the n requests at reqs,
 * made with the errors of ours among them kept in *f first, and without
 * the progress hook meanwhile (it could complete one of ours whose error
 * is not kept).  A PMPI_Wait... only while nothing of ours is queued
 * (handed). */
#define HANDED(f, n, reqs, call) ({ \
	int r_; \
	busy++; \
	fails_collect((f), (n), (reqs)); \
	r_ = (call); \
	busy--; \
	r_; })

/* 1 if something of ours waits to be posted (a queue, a barrier or a
 * stand-in due): other ranks may be waiting for it. */
static int queued(void)
{
	for (const struct fcomm *c = fmpi_comms(); c; c = c->next)
		if (c->qhead || c->sync_due || c->standins)
			return 1;
	return 0;
}

/* One PMPI_Test... of the wait s stands for, our errors kept in s->f: 1
 * once it completed a request (or all are null, or it failed), else 0. */
static int tested(void *arg)
{
	struct set *s = arg;
	int flag = 0;

	switch (s->call) {
	case C_WAIT:
		s->ret = HANDED(s->f, 1, s->reqs, PMPI_Test(s->reqs, &flag, s->st));
		break;
	case C_WAITALL:
		s->ret = HANDED(s->f, s->n, s->reqs, PMPI_Testall(s->n, s->reqs, &flag, s->st));
		break;
	case C_WAITANY:
		s->ret = HANDED(s->f, s->n, s->reqs, PMPI_Testany(s->n, s->reqs, s->idx, &flag, s->st));
		break;
	case C_WAITSOME:
		s->ret = HANDED(s->f, s->n, s->reqs, PMPI_Testsome(s->n, s->reqs, s->outcount, s->idxs, s->st));
		flag = *s->outcount != 0;       /* (MPI_UNDEFINED: all null) */
		break;
	}
	if (flag || s->ret != MPI_SUCCESS)
		return 1;
	fails_fini(s->f);
	return 0;
}

/* The wait s stands for, handed to MPI (its result; our errors among the
 * requests it completed kept in s->f, to raise).  It blocks in
 * PMPI_Wait... only while nothing of ours waits to be posted: HANDED keeps
 * our progress out of MPI's (busy), and the other ranks may be waiting for
 * what this one has queued (a rank that waits for a message whose sender
 * first waits for our operations).  Else it tests, our progress between
 * the tests, sleeping as fmpi_wait does. */
static int handed(struct set *s)
{
	if (queued()) {
		fmpi_wait(tested, s);
		return s->ret;
	}
	switch (s->call) {
	case C_WAIT:
		return s->ret = HANDED(s->f, 1, s->reqs, PMPI_Wait(s->reqs, s->st));
	case C_WAITALL:
		return s->ret = HANDED(s->f, s->n, s->reqs, PMPI_Waitall(s->n, s->reqs, s->st));
	case C_WAITANY:
		return s->ret = HANDED(s->f, s->n, s->reqs, PMPI_Waitany(s->n, s->reqs, s->idx, s->st));
	case C_WAITSOME:
		return s->ret = HANDED(s->f, s->n, s->reqs, PMPI_Waitsome(s->n, s->reqs, s->outcount, s->idxs, s->st));
	}
	return MPI_ERR_INTERN;
}

/* Waitany's and Waitsome's wait while some of theirs are ours: 1 once one
 * of ours ended, 2 once MPI's test completed one of MPI's (tested). */
static int any_done(void *arg)
{
	struct set *s = arg;

	if (set_poll(s))
		return 1;
	return tested(s) ? 2 : 0;
}

FMPI_API int MPI_Wait(MPI_Request *req, MPI_Status *st)
{
	struct freq *q = live ? lookup(*req) : NULL;
	struct fails f;
	struct set s = { .call = C_WAIT, .n = 1, .reqs = req, .st = st, .f = &f };

	if (q)
		fmpi_wait(q_ended, q);
	else
		progress();
	return raise_one(&f, 0, handed(&s));
}

FMPI_API int MPI_Waitall(int n, MPI_Request reqs[], MPI_Status sts[])
{
	struct fails f;
	struct set s = { .call = C_WAITALL, .st = sts, .f = &f };

	if (set_init(&s, n, reqs))
		fmpi_wait(all_done, &s);
	else
		progress();
	set_fini(&s);
	return raise_many(&f, n, NULL, sts, handed(&s));
}

FMPI_API int MPI_Waitany(int n, MPI_Request reqs[], int *idx, MPI_Status *st)
{
	struct fails f;
	struct set s = { .call = C_WAITANY, .idx = idx, .st = st, .f = &f };

	/* (2: MPI's own request completed in any_done, none of ours had:
	 * the test kept our errors all the same) */
	if (!(set_init(&s, n, reqs) && fmpi_wait(any_done, &s) == 2))
		handed(&s);
	set_fini(&s);
	return raise_one(&f, *idx, s.ret);
}

FMPI_API int MPI_Waitsome(int n, MPI_Request reqs[], int *outcount, int idxs[], MPI_Status sts[])
{
	struct fails f;
	struct set s = { .call = C_WAITSOME, .outcount = outcount, .idxs = idxs, .st = sts, .f = &f };

	if (!(set_init(&s, n, reqs) && fmpi_wait(any_done, &s) == 2))
		handed(&s);
	set_fini(&s);
	return raise_many(&f, *outcount == MPI_UNDEFINED ? 0 : *outcount, idxs, sts, s.ret);
}

FMPI_API int MPI_Test(MPI_Request *req, int *flag, MPI_Status *st)
{
	struct fails f;
	int ret;

	progress();
	ret = HANDED(&f, 1, req, PMPI_Test(req, flag, st));
	return raise_one(&f, *flag ? 0 : MPI_UNDEFINED, ret);
}

FMPI_API int MPI_Testall(int n, MPI_Request reqs[], int *flag, MPI_Status sts[])
{
	struct fails f;
	int ret;

	progress();
	ret = HANDED(&f, n, reqs, PMPI_Testall(n, reqs, flag, sts));
	return raise_many(&f, *flag ? n : 0, NULL, sts, ret);
}

FMPI_API int MPI_Testany(int n, MPI_Request reqs[], int *idx, int *flag, MPI_Status *st)
{
	struct fails f;
	int ret;

	progress();
	ret = HANDED(&f, n, reqs, PMPI_Testany(n, reqs, idx, flag, st));
	return raise_one(&f, *flag ? *idx : MPI_UNDEFINED, ret);
}

FMPI_API int MPI_Testsome(int n, MPI_Request reqs[], int *outcount, int idxs[], MPI_Status sts[])
{
	struct fails f;
	int ret;

	progress();
	ret = HANDED(&f, n, reqs, PMPI_Testsome(n, reqs, outcount, idxs, sts));
	return raise_many(&f, *outcount == MPI_UNDEFINED ? 0 : *outcount, idxs, sts, ret);
}

FMPI_API int MPI_Request_get_status(MPI_Request req, int *flag, MPI_Status *st)
{
	progress();
	return PMPI_Request_get_status(req, flag, st);
}

FMPI_API int MPI_Request_free(MPI_Request *req)
{
	struct freq *q = live ? lookup(*req) : NULL;

	if (!q)
		return PMPI_Request_free(req);
	/* MPI frees it once it ended; freeing an incomplete generalized
	 * request would leave grq_free to run before we complete it */
	q->detached = 1;
	unhash(q);              /* (MPI may hand its handle out again) */
	*req = MPI_REQUEST_NULL;
	progress();
	return MPI_SUCCESS;
}
