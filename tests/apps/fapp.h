/* tests/apps/fapp.h - the ferry side of the applications (tests/apps/):
 * opening the endpoint, the loop that receives while it sends, and the
 * figures every rank contributes to (collectives run by the daemons).
 *
 * The loop is the one the README recommends ("Sending and receiving"):
 * send until ferry refuses (-EAGAIN), take what came with ferry_recv(..., 0),
 * release it, and sleep in ferry_poll only when neither can go on.  An app
 * gives fapp_take() its handler for received items.
 *
 * Errors: any libferry failure prints ferry_last_error() and exits 1 (these
 * are test programs; a real application would unwind).
 */
#ifndef FERRY_FAPP_H
#define FERRY_FAPP_H

#include "app.h"
#include "../progs/common.h"        /* now_s */

#include <ferry.h>

#include <errno.h>
#include <getopt.h>
#include <poll.h>

struct fapp {
	ferry_t *f;
	uint32_t me, P;
};

/* The options of the bale kernels: --n N (items per rank, 1 M unless
 * said), --table T (words per rank, 1000 unless said: bale's default),
 * --one (items one by one: else in FERRY_BATCH's batches). */
struct fapp_args {
	uint64_t n, table;
	unsigned flags;
};

static inline void fapp_args(int argc, char **argv, struct fapp_args *o)
{
	static const struct option lo[] = {
		{ "n", required_argument, NULL, 'n' }, { "table", required_argument, NULL, 't' },
		{ "one", no_argument, NULL, '1' }, { NULL, 0, NULL, 0 },
	};
	int opt;

	*o = (struct fapp_args){ .n = 1 << 20, .table = 1000, .flags = FERRY_BATCH };
	while ((opt = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (opt) {
		case 'n': o->n = (uint64_t)app_arg("--n", optarg); break;
		case 't': o->table = (uint64_t)app_arg("--table", optarg); break;
		case '1': o->flags = 0; break;
		default: exit(2);
		}
	}
	if (!o->table) {
		fprintf(stderr, "--table 0\n");
		exit(2);
	}
}

static inline void fapp_die(const char *what, int ret)
{
	fprintf(stderr, "%s: %s (%s)\n", what, ferry_last_error(), ferry_strerror(ret));
	exit(1);
}

/* Joins the job from the environment (FERRY_JOB, FERRY_RANK, FERRY_SIZE);
 * flags: FERRY_BATCH or 0. */
static inline void fapp_open(struct fapp *a, unsigned flags)
{
	struct ferry_opts o = { .flags = flags };
	int ret = ferry_open(&a->f, &o);

	if (ret < 0)
		fapp_die("ferry_open", ret);
	a->me = (uint32_t)ferry_rank(a->f);
	a->P = (uint32_t)ferry_size(a->f);
}

static inline void fapp_close(struct fapp *a)
{
	int ret = ferry_close(a->f);

	if (ret < 0)
		fapp_die("ferry_close", ret);
}

static inline void fapp_barrier(struct fapp *a)
{
	int ret = ferry_barrier(a->f);

	if (ret < 0)
		fapp_die("ferry_barrier", ret);
}

/* Every rank's x combined with op (FERRY_MAX, FERRY_SUM...): the daemons
 * run the reduction. */
static inline uint64_t fapp_reduce_u64(struct fapp *a, uint64_t x, enum ferry_op op)
{
	uint64_t r;
	int ret = ferry_allreduce(a->f, &x, &r, 1, FERRY_UINT64, op);

	if (ret < 0)
		fapp_die("ferry_allreduce", ret);
	return r;
}

static inline double fapp_max_double(struct fapp *a, double x)
{
	double r;
	int ret = ferry_allreduce(a->f, &x, &r, 1, FERRY_DOUBLE, FERRY_MAX);

	if (ret < 0)
		fapp_die("ferry_allreduce", ret);
	return r;
}

/* Handles n received items (their data valid until fapp_recv releases
 * them); returns 0, or -1 on an item that cannot be (the app says why). */
typedef int (*fapp_take_fn)(void *app, const struct ferry_item *it, int n);

#define FAPP_RECV_MAX 256       /* items one fapp_recv takes at most */

/* Takes what came (without waiting), FAPP_RECV_MAX items at most, and
 * releases it; returns how many items came (FAPP_RECV_MAX: more may wait).
 * With wait set (the caller cannot go on: a send was refused, or it waits
 * for others) and nothing received, sleeps in ferry_poll until something
 * comes or there is room (events). */
static inline int fapp_recv(struct fapp *a, fapp_take_fn take, void *app, int wait, unsigned events)
{
	struct ferry_item it[FAPP_RECV_MAX];
	int n = ferry_recv(a->f, it, FAPP_RECV_MAX, 0), ret;

	if (n < 0)
		fapp_die("ferry_recv", n);
	if (n > 0 && take(app, it, n) < 0)
		exit(1);
	ferry_release(a->f);
	if (n == 0 && wait && (ret = ferry_poll(a->f, events, -1)) < 0)
		fapp_die("ferry_poll", ret);
	return n;
}

/* Sends one item, receiving (and sleeping when neither can go on) while
 * ferry refuses it. */
static inline void fapp_send(struct fapp *a, uint32_t dst, uint32_t ch, const void *p, size_t len, fapp_take_fn take,
			     void *app)
{
	int ret;

	while ((ret = ferry_send(a->f, dst, ch, p, len)) == -EAGAIN)
		fapp_recv(a, take, app, 1, FERRY_POLLIN | FERRY_POLLOUT);
	if (ret < 0)
		fapp_die("ferry_send", ret);
}

/* Ends a step, taking what comes meanwhile: ferry_done, then the items as
 * they arrive (take), asking whether the step ended with ferry_step_wait(f,
 * 0) each time nothing is left to take, and sleeping in ferry_poll
 * (FERRY_POLLIN also wakes it when the step ends or the job fails).  When
 * it returns every item of every rank of the step has arrived and been
 * taken (with what ferry_step_wait kept in its last call).  ferry_step_wait
 * alone would keep every item that comes while it waits for the following
 * ferry_recv calls, a copy of each: with ranks that finish their part at
 * different times, most of a step's items for the ones that finish first
 * (histogram 4 x 1 and 4 x 2 sharing the cores: 65-89 M items/s that way,
 * 93-129 M this way, 3 runs each). */
static inline void fapp_step(struct fapp *a, fapp_take_fn take, void *app)
{
	int ret = ferry_done(a->f);

	if (ret < 0)
		fapp_die("ferry_done", ret);
	for (;;) {
		while (fapp_recv(a, take, app, 0, 0) > 0)
			;
		if ((ret = ferry_step_wait(a->f, 0)) == 0)
			break;
		if (ret != -ETIMEDOUT)
			fapp_die("ferry_step_wait", ret);
		if ((ret = ferry_poll(a->f, FERRY_POLLIN, -1)) < 0)
			fapp_die("ferry_poll", ret);
	}
	while (fapp_recv(a, take, app, 0, 0) > 0)
		;
}

/* Hands over what this process still holds (FERRY_BATCH's batches) and
 * asks the daemon to send what it aggregates now.  Returns 1 if the ring
 * had no room for all of it (-EAGAIN, not an error): the rest is still in
 * the process, and only ferry_poll (or another flush) hands it over, as
 * room comes; a wait on ferry_fd() would not (it says when items come,
 * not room).  0 when all of it went. */
static inline int fapp_flush(struct fapp *a)
{
	int ret = ferry_flush(a->f);

	if (ret < 0 && ret != -EAGAIN)
		fapp_die("ferry_flush", ret);
	return ret == -EAGAIN;
}

/* Serves others (take, and idle when nothing comes: a call of its own that
 * sends what it owes, and says whether some of it still waits for room,
 * refused by ferry_send; then a flush, which may leave some in the process
 * too: fapp_flush)
 * until every rank has entered a non-blocking barrier this rank enters
 * now: the end of a two-way exchange whose ranks finish at different
 * times.  While nothing waits for room, ferry_fd() wakes the wait both for
 * items and for the barrier's end; while something does, ferry_poll waits
 * for items or room (the barrier cannot end before what this rank owes
 * has gone: the others wait for it). */
static inline void fapp_serve_until_all(struct fapp *a, fapp_take_fn take, int (*idle)(void *app), void *app)
{
	ferry_req_t *req;
	int ret = ferry_ibarrier(a->f, &req), left;

	if (ret < 0)
		fapp_die("ferry_ibarrier", ret);
	for (;;) {
		if (fapp_recv(a, take, app, 0, 0) > 0)
			continue;
		/* What idle sent, and anything still held in the process,
		 * goes out now; what finds no room makes this a wait for
		 * room in ferry_poll (a wait on ferry_fd with items held here
		 * lasted until its timeout: their receivers waited for them) */
		left = idle ? idle(app) : 0;
		left |= fapp_flush(a);
		ret = ferry_test(&req);
		if (ret == 1)
			return;
		if (ret < 0)
			fapp_die("ferry_ibarrier", ret);
		if (left) {
			if ((ret = ferry_poll(a->f, FERRY_POLLIN | FERRY_POLLOUT, 1000)) < 0)
				fapp_die("ferry_poll", ret);
			if (ret == 0 && getenv("FAPP_DEBUG"))
				fprintf(stderr, "rank %u: serve: a second without room or items\n", a->me);
			continue;
		}
		/* Nothing came (ferry_recv armed the fd) and the barrier
		 * is pending (ferry_test armed it too): sleep on both.  A
		 * second at most, so that a lost wake-up costs a second,
		 * never the run (FAPP_DEBUG=1 says when it happens). */
		struct pollfd p = { .fd = ferry_fd(a->f), .events = POLLIN };
		int pr = poll(&p, 1, 1000);

		if (pr < 0 && errno != EINTR) {
			perror("poll");
			exit(1);
		}
		if (pr == 0 && getenv("FAPP_DEBUG"))
			fprintf(stderr, "rank %u: serve: a second without a wake-up\n", a->me);
	}
}

#endif
