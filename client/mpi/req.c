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
 * Ownership: a struct freq lives from fmpi_req_start until MPI frees its
 * generalized request (grq_free), which happens in a PMPI_Wait... or Test...
 * after grq's completion; one MPI_Request_free'd by the program is waited
 * for by us (reap) once it ended.
 */
#include "fmpi.h"

#include <stdlib.h>

#define FMPI_API __attribute__((visibility("default")))

static struct freq *live;       /* oldest first */

static int grq_query(void *extra, MPI_Status *st)
{
	struct freq *q = extra;

	PMPI_Status_set_elements(st, MPI_BYTE, 0);
	PMPI_Status_set_cancelled(st, 0);
	st->MPI_SOURCE = MPI_UNDEFINED;
	st->MPI_TAG = MPI_UNDEFINED;
	return q->err ? MPI_ERR_OTHER : MPI_SUCCESS;
}

static int grq_free(void *extra)
{
	struct freq *q = extra;

	for (struct freq **pp = &live; *pp; pp = &(*pp)->next)
		if (*pp == q) {
			*pp = q->next;
			break;
		}
	free(q);
	return MPI_SUCCESS;
}

static int grq_cancel(void *extra, int complete)
{
	(void)extra, (void)complete;
	return MPI_SUCCESS;     /* a collective cannot be cancelled */
}

/* 1 if q ended (its generalized request is then complete). */
static int q_poll(struct freq *q)
{
	int ret;

	if (q->ended)
		return 1;
	if ((ret = ferry_test(&q->fr)) == 0)
		return 0;
	q->ended = 1;
	q->err = ret < 0 ? ret : 0;
	q->c->pending--;
	side_finish(&q->s[0]);
	side_finish(&q->s[1]);
	if (q->err)
		fmpi_say("ferry-mpi: %s on comm %d failed: %s (%s)", q->name, q->c->id, ferry_strerror(q->err),
			 ferry_last_error());
	PMPI_Grequest_complete(q->mreq);
	return 1;
}

static int q_done(void *arg)
{
	return q_poll(arg);
}

/* Frees q if the program let it go (MPI_Request_free) and it ended. */
static void q_reap(struct freq *q)
{
	MPI_Request r = q->mreq;

	if (q->detached && q_poll(q))
		PMPI_Wait(&r, MPI_STATUS_IGNORE);       /* grq_free frees q */
}

static struct freq *lookup(MPI_Request r)
{
	if (r == MPI_REQUEST_NULL)
		return NULL;
	for (struct freq *q = live; q; q = q->next)
		if (q->mreq == r && !q->detached)
			return q;
	return NULL;
}

int fmpi_req_start(struct fcomm *c, const char *name, ferry_req_t *r, struct side s[2], MPI_Request *req_p)
{
	struct freq *q = calloc(1, sizeof(*q)), **pp;
	int ret;

	for (struct freq *x = live, *next; x; x = next) {
		next = x->next;
		q_reap(x);
	}
	if (!q)
		return MPI_ERR_NO_MEM;
	if ((ret = PMPI_Grequest_start(grq_query, grq_free, grq_cancel, q, &q->mreq)) != MPI_SUCCESS) {
		free(q);
		return ret;
	}
	q->fr = r;
	q->c = c;
	q->name = name;
	q->s[0] = s[0];
	q->s[1] = s[1];
	c->pending++;
	for (pp = &live; *pp; pp = &(*pp)->next)
		;
	*pp = q;
	*req_p = q->mreq;
	return MPI_SUCCESS;
}

int fmpi_req_reap_one(struct fcomm *c)
{
	for (struct freq *q = live; q; q = q->next) {
		if (q->c != c || q->ended)
			continue;
		fmpi_wait(q_done, q);
		q_reap(q);
		return 1;
	}
	return 0;
}

void fmpi_req_fini(void)
{
	for (struct freq *q = live, *next; q; q = next) {
		next = q->next;
		fmpi_wait(q_done, q);
		q_reap(q);
	}
}

/* --- the wait and test functions --- */

/* The requests of ours among reqs[0..n): qs[i], or NULL where MPI's. */
struct set {
	int n, ours;
	MPI_Request *reqs;
	struct freq **qs;
	struct freq *small[16];
	/* MPI's part, for waitany and waitsome */
	int *idx, *outcount, *idxs;
	MPI_Status *st;
	int ret;
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

/* Polls every request of ours; returns how many have ended. */
static int set_poll(struct set *s)
{
	int ended = 0;

	for (int i = 0; i < s->n; i++) {
		struct freq *q = s->qs ? s->qs[i] : lookup(s->reqs[i]);

		if (q)
			ended += q_poll(q);
	}
	return ended;
}

static int all_done(void *arg)
{
	struct set *s = arg;

	return set_poll(s) == s->ours;
}

static int any_done(void *arg)
{
	struct set *s = arg;
	int flag = 0;

	if (set_poll(s))
		return 1;
	s->ret = PMPI_Testany(s->n, s->reqs, s->idx, &flag, s->st);
	return flag || s->ret != MPI_SUCCESS ? 2 : 0;
}

static int some_done(void *arg)
{
	struct set *s = arg;

	if (set_poll(s))
		return 1;
	s->ret = PMPI_Testsome(s->n, s->reqs, s->outcount, s->idxs, s->st);
	return (*s->outcount > 0 && *s->outcount != MPI_UNDEFINED) || s->ret != MPI_SUCCESS ? 2 : 0;
}

FMPI_API int MPI_Wait(MPI_Request *req, MPI_Status *st)
{
	struct freq *q = live ? lookup(*req) : NULL;

	if (q)
		fmpi_wait(q_done, q);
	return PMPI_Wait(req, st);
}

FMPI_API int MPI_Waitall(int n, MPI_Request reqs[], MPI_Status sts[])
{
	struct set s;

	if (set_init(&s, n, reqs))
		fmpi_wait(all_done, &s);
	set_fini(&s);
	return PMPI_Waitall(n, reqs, sts);
}

FMPI_API int MPI_Waitany(int n, MPI_Request reqs[], int *idx, MPI_Status *st)
{
	struct set s = { .idx = idx, .st = st };

	if (set_init(&s, n, reqs) && fmpi_wait(any_done, &s) == 2) {
		set_fini(&s);
		return s.ret;
	}
	set_fini(&s);
	return PMPI_Waitany(n, reqs, idx, st);
}

FMPI_API int MPI_Waitsome(int n, MPI_Request reqs[], int *outcount, int idxs[], MPI_Status sts[])
{
	struct set s = { .outcount = outcount, .idxs = idxs, .st = sts };

	if (set_init(&s, n, reqs) && fmpi_wait(some_done, &s) == 2) {
		set_fini(&s);
		return s.ret;
	}
	set_fini(&s);
	return PMPI_Waitsome(n, reqs, outcount, idxs, sts);
}

FMPI_API int MPI_Test(MPI_Request *req, int *flag, MPI_Status *st)
{
	struct freq *q = live ? lookup(*req) : NULL;

	if (q)
		q_poll(q);
	return PMPI_Test(req, flag, st);
}

FMPI_API int MPI_Testall(int n, MPI_Request reqs[], int *flag, MPI_Status sts[])
{
	struct set s;

	if (set_init(&s, n, reqs))
		set_poll(&s);
	set_fini(&s);
	return PMPI_Testall(n, reqs, flag, sts);
}

FMPI_API int MPI_Testany(int n, MPI_Request reqs[], int *idx, int *flag, MPI_Status *st)
{
	struct set s;

	if (set_init(&s, n, reqs))
		set_poll(&s);
	set_fini(&s);
	return PMPI_Testany(n, reqs, idx, flag, st);
}

FMPI_API int MPI_Testsome(int n, MPI_Request reqs[], int *outcount, int idxs[], MPI_Status sts[])
{
	struct set s;

	if (set_init(&s, n, reqs))
		set_poll(&s);
	set_fini(&s);
	return PMPI_Testsome(n, reqs, outcount, idxs, sts);
}

FMPI_API int MPI_Request_get_status(MPI_Request req, int *flag, MPI_Status *st)
{
	struct freq *q = live ? lookup(req) : NULL;

	if (q)
		q_poll(q);
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
	*req = MPI_REQUEST_NULL;
	q_reap(q);
	return MPI_SUCCESS;
}
