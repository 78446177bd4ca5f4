/* client/coll.c - collective operations: posting them to ferryd (COLL on
 * the control socket) and the requests that wait for its COLL_DONE.  See
 * ferry.h, "Collective operations".
 *
 * Ownership: a request is the handle's (in f->reqs) from its post until
 * ferry_test or ferry_wait frees it; the application holds the pointer.
 * ferry_close refuses (-EBUSY) while any is not freed, so a request never
 * outlives its handle.
 */
#include "internal.h"
#include "../proto/clock.h"
#include "../proto/coll.h"
#include "../proto/ctl.h"

#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

struct ferry_req {
	struct ferry_req *next;
	struct ferry *f;        /* the job's handle (froot) */
	uint32_t group;         /* the handle's group (0: the job's) */
	uint32_t seq;           /* 0: a LAYOUT */
	int done;               /* COLL_DONE came */
	uint64_t post_ns;       /* when it was posted (proto_now_ns) */
	int err;                /* ... with this: 0 or -errno */
	char text[CTL_ERRTEXT_MAX + 1];
	struct fmem *stage;     /* its staging region, or NULL */
	void *copy_to;          /* when it succeeded: copy_len bytes from copy_from here */
	const void *copy_from;
	size_t copy_len;
};

int coll_done(struct ferry *f, uint32_t group, uint32_t seq, int err, const char *text)
{
	for (struct ferry_req *r = f->reqs; r; r = r->next)
		if (r->seq == seq && r->group == group && !r->done) {
			uint64_t us = (proto_now_ns() - r->post_ns) / 1000;

			r->done = 1;
			r->err = -err;
			/* the time the next post reports (ctl.h, COLL prev_us): the
			 * latest operation seen to end well */
			if (!err && r->post_ns && us > 0 && us < UINT32_MAX)
				f->report = (struct coll_report){ group, seq, (uint32_t)us };
			snprintf(r->text, sizeof(r->text), "%s", text);
			return 0;
		}
	return -EPROTO;
}

int coll_outstanding(const struct ferry *f)
{
	for (const struct ferry_req *r = froot(f)->reqs; r; r = r->next)
		if (!f->root || r->group == f->group)
			return 1;
	return 0;
}

/* The post page (proto/post.h): waits until at most used_max of its slots
 * hold posts ferryd has not taken yet.  ferryd takes them as it goes (it
 * was woken for them if it slept); the socket says if it went away.  A
 * ferryd that takes none for ferry_open's timeout_ms (60 s unless said;
 * < 0: no limit) is taken for stuck: the session is lost, as when a send
 * on the socket fails. */
static int post_wait(struct ferry *rf, uint32_t used_max)
{
	uint64_t until = 0;

	for (unsigned spins = 0;; spins++) {
		uint32_t used = rf->post_sent - atomic_load_explicit(&rf->post->taken, memory_order_acquire);
		struct pollfd pfd = { .fd = rf->sock, .events = POLLIN };

		if (used > PROTO_POST_SLOTS)
			return rf->dead = conn_seterr(-EPROTO, "ferryd took more posts than there were");
		if (used <= used_max)
			return 0;
		if (rf->dead)
			return rf->dead;
		if (spins < 64) {
			sched_yield();
			continue;
		}
		if (rf->timeout_ms > 0) {       /* (the clock read only once it takes long) */
			if (!until)
				until = proto_now_ns() + (uint64_t)rf->timeout_ms * 1000000u;
			else if (proto_now_ns() > until)
				return rf->dead = conn_seterr(-ETIMEDOUT, "ferryd took none of %u collective "
							      "operations posted within %d ms", used, rf->timeout_ms);
		}
		if (poll(&pfd, 1, 1) > 0 && conn_check(rf) < 0)
			return rf->dead;
	}
}

int ctl_send(struct ferry *rf, const void *buf, size_t n, int fd, const char *what)
{
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} cbuf;
	struct iovec iov = { .iov_base = (void *)buf, .iov_len = n };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	int ret;

	if (rf->dead)
		return rf->dead;
	/* What was posted on the page first is taken first (proto/post.h). */
	if (rf->post && (ret = post_wait(rf, 0)) < 0)
		return ret;
	if (fd >= 0) {
		struct cmsghdr *cm;

		memset(&cbuf, 0, sizeof(cbuf));
		mh.msg_control = cbuf.buf;
		mh.msg_controllen = sizeof(cbuf.buf);
		cm = CMSG_FIRSTHDR(&mh);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(cm), &fd, sizeof(fd));
	}
	/* A small message on a socket the daemon keeps reading: a blocking
	 * send returns at once unless the daemon is stuck, and then the
	 * session is lost anyway. */
	if (sendmsg(rf->sock, &mh, MSG_NOSIGNAL) != (ssize_t)n)
		return rf->dead = conn_seterr(-ECONNRESET, "ferryd went away (%s: %s)", what, strerror(errno));
	rf->ctl_sent++;
	return 0;
}

/* Posts the n-byte CTL_COLL at buf on the post page (n fits a slot). */
static int post_page(struct ferry *rf, const void *buf, size_t n)
{
	struct proto_post_slot *slot;
	int ret = post_wait(rf, PROTO_POST_SLOTS - 1);

	if (ret < 0)
		return ret;
	slot = &rf->post->slot[rf->post_sent % PROTO_POST_SLOTS];
	slot->sock_before = rf->ctl_sent;
	slot->len = (uint32_t)n;
	memcpy(slot->msg, buf, n);
	atomic_store_explicit(&rf->post->posted, ++rf->post_sent, memory_order_release);
	/* the waker's half of the handshake (proto/post.h) */
	atomic_thread_fence(memory_order_seq_cst);
	if (atomic_load_explicit(&rf->post->sleeping, memory_order_relaxed))
		conn_wake(rf->efd_daemon);
	return 0;
}

/* Sends the n-byte control message at buf for handle f and makes its
 * request (group and seq: what its COLL_DONE will say): a CTL_COLL on the
 * post page where it fits, anything else on the socket. */
static int post_msg(struct ferry *f, const void *buf, ssize_t n, uint32_t seq, ferry_req_t **req_p)
{
	struct ferry *rf = froot(f);
	struct ferry_req *r;
	int pending = 0;

	conn_clearerr();
	if (!req_p)
		return conn_seterr(-EINVAL, "no place for the request");
	*req_p = NULL;
	if (rf->dead)
		return rf->dead;
	for (struct ferry_req *q = rf->reqs; q; q = q->next)
		pending++;
	if (pending >= FERRY_COLL_MAX_PENDING)
		return conn_seterr(-EAGAIN, "%d collective requests are outstanding: ferry_test or ferry_wait for "
				   "some first", pending);
	if (n < 0)
		return conn_seterr(-EINVAL, "cannot encode the operation");
	r = calloc(1, sizeof(*r));
	if (!r)
		return conn_seterr(-ENOMEM, "out of memory for a request");
	r->post_ns = proto_now_ns();
	if (rf->post && (size_t)n <= PROTO_POST_MSG_MAX && ((const struct ctl_hdr *)buf)->type == CTL_COLL) {
		int ret = post_page(rf, buf, (size_t)n);

		if (ret < 0) {
			free(r);
			return ret;
		}
	} else {
		int ret = ctl_send(rf, buf, (size_t)n, -1, "posting a collective");

		if (ret < 0) {
			free(r);
			return ret;
		}
	}
	r->f = rf;
	r->group = f->group;
	r->seq = seq;
	r->next = rf->reqs;
	rf->reqs = r;
	*req_p = r;
	return 0;
}

/* Posts operation c (its group and seq filled in here) and makes its
 * request. */
static int post(struct ferry *f, struct ctl_coll_wire *c, ferry_req_t **req_p)
{
	uint8_t buf[sizeof(struct ctl_hdr) + sizeof(*c)];
	int ret;

	c->group = f->group;
	c->seq = f->coll_seq + 1;
	c->prev_group = froot(f)->report.group;
	c->prev_seq = froot(f)->report.seq;
	c->prev_us = froot(f)->report.us;
	if (!c->prev_seq)
		c->prev_group = c->prev_us = 0;
	ret = post_msg(f, buf, ctl_encode_coll(buf, sizeof(buf), c), c->seq, req_p);
	if (ret == 0) {
		f->coll_seq = c->seq;
		froot(f)->report = (struct coll_report){ 0, 0, 0 };
	}
	return ret;
}

/* post, for an operation whose buffers went through stage (NULL: none):
 * the request owns stage, and when it succeeds copies len bytes from
 * `from` (in stage) to recvbuf (NULL: nothing to copy out). */
int coll_post_staged(struct ferry *f, struct ctl_coll_wire *c, ferry_req_t **req_p, struct fmem *stage,
		       void *recvbuf, const uint8_t *from, size_t len)
{
	int ret = post(f, c, req_p);

	if (ret < 0) {
		stage_put(froot(f), stage);
		return ret;
	}
	(*req_p)->stage = stage;
	if (recvbuf && len) {
		(*req_p)->copy_to = recvbuf;
		(*req_p)->copy_from = from;
		(*req_p)->copy_len = len;
	}
	return 0;
}

static void req_free(struct ferry_req *r)
{
	struct ferry_req **pp = &r->f->reqs;

	while (*pp && *pp != r)
		pp = &(*pp)->next;
	if (*pp)
		*pp = r->next;
	stage_put(r->f, r->stage);
	free(r);
}

/* Ends a request that is done: its result, and frees it. */
static int req_end(ferry_req_t **req_p)
{
	struct ferry_req *r = *req_p;
	int err = r->err;

	if (err)
		conn_seterr(err, "%s", r->text);
	else if (r->copy_len)
		memcpy(r->copy_to, r->copy_from, r->copy_len);
	req_free(r);
	*req_p = NULL;
	return err;
}

/* Takes the done page's new records (proto/done.h): each ends its request
 * well.  How many it took, or the handle's error once it is dead. */
static int take_done(struct ferry *rf)
{
	struct proto_done_shared *d = rf->done;
	uint32_t pub, n;

	if (rf->dead || !d)
		return rf->dead;
	pub = atomic_load_explicit(&d->published, memory_order_acquire);
	if (pub == rf->done_taken)
		return 0;
	n = pub - rf->done_taken;
	if (n > PROTO_DONE_SLOTS)
		return rf->dead = conn_seterr(-EPROTO, "ferryd published %u completions, more than the %u slots "
					      "of the done page", n, PROTO_DONE_SLOTS);
	while (rf->done_taken != pub) {
		uint64_t rec = atomic_load_explicit(&d->rec[rf->done_taken % PROTO_DONE_SLOTS], memory_order_relaxed);

		rf->done_taken++;
		if (coll_done(rf, (uint32_t)(rec >> 32), (uint32_t)rec, 0, "") < 0)
			return rf->dead = conn_seterr(-EPROTO, "ferryd ended collective operation %u of group %08x, "
						      "which was not posted", (uint32_t)rec, (uint32_t)(rec >> 32));
	}
	/* (release: the records are read before ferryd may write over them) */
	atomic_store_explicit(&d->consumed, rf->done_taken, memory_order_release);
	return (int)n;
}

static void coll_fd_reset(struct ferry *rf)
{
	uint64_t v;

	rf->coll_reset_ns = proto_now_ns();
	if (read(rf->efd_coll, &v, sizeof(v)) < 0) {
		/* EAGAIN: nothing to reset */
	}
}

/* take_done, keeping efd_coll readable only for records not taken yet
 * while we are armed (ferryd writes it for each record then): after
 * taking some, reset it and look again, until a look after a reset finds
 * nothing.  A record published after the reset writes it again. */
static void take_news(struct ferry *rf)
{
	while (take_done(rf) > 0 && rf->coll_armed)
		coll_fd_reset(rf);
}

static int any_pending(const struct ferry *rf)
{
	for (const struct ferry_req *r = rf->reqs; r; r = r->next)
		if (!r->done)
			return 1;
	return 0;
}

/* Whether the socket may hold news for our requests: a COLL_DONE (a
 * failure, or a success the done page had no room for) was counted since
 * conn_check last read it, part of a message waits, or it was not read for
 * a while (the daemon's end, or a message it had to queue, show only
 * there). */
#define COLL_SOCK_EVERY_NS 1000000ull

static int sock_due(const struct ferry *rf, int now_and_then)
{
	return !rf->done || rf->in_len ||
	       atomic_load_explicit(&rf->done->sock_done, memory_order_acquire) != rf->sock_seen ||
	       (now_and_then && proto_now_ns() - rf->sock_read_ns >= COLL_SOCK_EVERY_NS);
}

/* Asks ferryd to wake us through efd_coll when it publishes (arm), or stops
 * (disarm).  Arming is the sleeper's half of the handshake in proto/done.h:
 * flag, fence, look once more; it first resets what a wake-up that raced
 * with the last disarm may have left in the eventfd.  Who armed says how
 * long it lasts (f->coll_armed):
 *   ARMED_TEST  a ferry_test said pending: the application may sleep on
 *               ferry_fd() next, so the handle stays armed while any of its
 *               requests is pending (one flag serves them all: a program
 *               tests each before it sleeps);
 *   ARMED_WAIT  ferry_wait is about to sleep: until it returns.
 * While armed, every completion costs ferryd an eventfd write and us a
 * read; a ferry_wait that ends while it polls costs neither. */
#define ARMED_TEST 1
#define ARMED_WAIT 2

static void coll_arm(struct ferry *rf, int who)
{
	int was = rf->coll_armed;

	if (!rf->done)
		return;
	rf->coll_armed |= who;
	if (was)
		return;
	coll_fd_reset(rf);
	atomic_store_explicit(&rf->done->armed, 1, memory_order_relaxed);
	atomic_thread_fence(memory_order_seq_cst);
	take_news(rf);
}

/* who ends its arming; the flag goes when nobody's is left (ARMED_TEST's
 * lasts while a request is pending). */
static void coll_disarm(struct ferry *rf, int who)
{
	if (!(rf->coll_armed & who))
		return;
	if (who == ARMED_TEST && any_pending(rf))
		return;         /* the application may still sleep on ferry_fd() */
	rf->coll_armed &= ~who;
	if (rf->coll_armed == ARMED_TEST && !any_pending(rf))
		rf->coll_armed = 0;
	if (rf->coll_armed)
		return;
	atomic_store_explicit(&rf->done->armed, 0, memory_order_relaxed);
	coll_fd_reset(rf);
	rf->coll_fd_stale = 1;  /* (coll_fd_recheck) */
}

void coll_fd_recheck(struct ferry *rf)
{
	/* A wake-up that raced with the last disarm can leave the eventfd
	 * readable with nothing pending: ferry_recv resets it now and then
	 * (its fd_reset), as it does its own, once after each disarm (a
	 * program without collectives makes no system call for it). */
	if (rf->coll_fd_stale && !rf->coll_armed) {
		rf->coll_fd_stale = 0;
		coll_fd_reset(rf);
	}
}

/* How often a ferry_test that stays pending resets efd_coll (test_req). */
#define COLL_RESET_EVERY_NS 200000ull

/* ferry_test (arm ARMED_TEST: an application may sleep on ferry_fd()
 * next), and ferry_wait's look (arm 0: it arms by itself before it
 * sleeps, and then polls the socket: its looks need not read it now and
 * then to hear of the daemon's end). */
static int test_req(ferry_req_t **req_p, int arm)
{
	struct ferry_req *r;
	struct ferry *rf;
	int ret;

	if (!req_p || !*req_p)
		return 1;
	r = *req_p;
	rf = r->f;
	if (!r->done)
		take_news(rf);
	if (!r->done && sock_due(rf, arm != 0)) {
		rf->sock_read_ns = proto_now_ns();
		conn_check(rf);
	}
	if (!r->done && arm) {
		uint64_t now = proto_now_ns();

		coll_arm(rf, arm);
		/* ferryd's write for a record can land after we took the
		 * record and reset the eventfd: now and then reset it again
		 * and look, or a program sleeping on ferry_fd() would spin
		 * until the next record (at most this long) */
		if (!r->done && now - rf->coll_reset_ns >= COLL_RESET_EVERY_NS) {
			coll_fd_reset(rf);
			take_news(rf);
		}
	}
	if (!r->done && (ret = rf->dead) < 0) {
		/* the daemon is gone, and the operation had not ended */
		r->done = 1;
		r->err = ret;
		snprintf(r->text, sizeof(r->text), "%.*s", (int)sizeof(r->text) - 1, ferry_last_error());
	}
	if (!r->done)
		return 0;
	ret = req_end(req_p);
	coll_disarm(rf, ARMED_TEST);
	return ret < 0 ? ret : 1;
}

FERRY_API int ferry_test(ferry_req_t **req_p)
{
	return test_req(req_p, ARMED_TEST);
}

/* How long ferry_wait polls before it sleeps, where the daemon has cores
 * of its own (f->spin_us): a collective takes hundreds of microseconds, and
 * waking a sleeping rank costs the daemon an IPI (tens of microseconds on
 * the VMs we measure on) per rank and operation, on the daemon's core.
 * Polling costs no system call but the yield: the done page says when an
 * operation ended (proto/done.h). */
#define COLL_SPIN_US 2000

/* ferry_wait's loop: 1 when *req_p ended (or a negative errno). */
static int wait_req(ferry_req_t **req_p, struct ferry *rf, uint64_t spin_until)
{
	for (;;) {
		int ret = test_req(req_p, 0);
		struct pollfd pfd[2];

		if (ret != 0)
			return ret;
		if (spin_until && proto_now_ns() < spin_until) {
			sched_yield();
			continue;
		}
		coll_arm(rf, ARMED_WAIT);
		if ((ret = test_req(req_p, 0)) != 0)
			return ret;
		/* The done page or the socket says it ended (the daemon fails
		 * an operation that cannot complete: no time limit here). */
		pfd[0] = (struct pollfd){ .fd = rf->sock, .events = POLLIN };
		pfd[1] = (struct pollfd){ .fd = rf->efd_coll, .events = POLLIN };
		if (poll(pfd, 2, -1) < 0 && errno != EINTR)
			return conn_seterr(-errno, "poll: %s", strerror(errno));
		if (pfd[0].revents) {
			rf->sock_read_ns = proto_now_ns();
			conn_check(rf);
		}
		if (pfd[1].revents)
			coll_fd_reset(rf);
	}
}

FERRY_API int ferry_wait(ferry_req_t **req_p)
{
	uint64_t spin_until = 0;
	struct ferry *rf;
	int ret;

	if (!req_p || !*req_p)
		return 0;
	rf = (*req_p)->f;
	if (rf->spin_us) {
		int env;
		unsigned us = COLL_SPIN_US;

		if (conn_env_int("FERRY_COLL_SPIN_US", &env) == 1)
			us = (unsigned)env;
		spin_until = proto_now_ns() + us * 1000ull;
	}
	ret = wait_req(req_p, rf, spin_until);
	coll_disarm(rf, ARMED_WAIT);
	return ret < 0 ? ret : 0;
}

FERRY_API int ferry_waitall(int n, ferry_req_t **reqs)
{
	int first = 0;

	for (int i = 0; reqs && i < n; i++) {
		int ret = ferry_wait(&reqs[i]);

		if (ret < 0 && !first)
			first = ret;
	}
	return first;
}

/* The algorithms of each operation, by the names ferryctl plan prints
 * (proto/ctl.h's tables, numbered as the daemon numbers them): the
 * all-to-all's (NULL: automatic; "auto" is no name here), scatter's and
 * gather's (NULL or "auto": automatic). */
static int alg_by_name(const char *name, uint32_t *alg_p)
{
	int i = name ? ctl_alg_by_name(ctl_a2a_algs, name) : 0;

	if (name && i <= 0)
		return -EINVAL;
	*alg_p = (uint32_t)i;
	return 0;
}

static int rooted_alg_by_name(const char *name, uint32_t *alg_p)
{
	int i = name ? ctl_alg_by_name(ctl_rooted_algs, name) : 0;

	if (i < 0)
		return -EINVAL;
	*alg_p = (uint32_t)i;
	return 0;
}

/* $FERRY_COLL_ALLTOALL, $FERRY_COLL_SCATTER and $FERRY_COLL_GATHER, once;
 * ferry_coll_strategy's calls win over them. */
uint32_t coll_alg_of(const struct ferry *f, uint32_t kind)
{
	return ctl_coll_phased(kind) ? f->phased_alg[kind - CTL_COLL_BCAST] : 0;
}

static int phased_strategy(ferry_t *f, const char *op, const char *algorithm);

int coll_read_env(struct ferry *f)
{
	const char *e = getenv("FERRY_COLL_ALLTOALL"), *sc = getenv("FERRY_COLL_SCATTER");
	const char *ga = getenv("FERRY_COLL_GATHER");

	if (f->coll_env_read)
		return 0;
	f->coll_env_read = 1;
	if (e && *e && strcmp(e, "auto") != 0 && alg_by_name(e, &f->alltoall_alg) < 0)
		return conn_seterr(-EINVAL, "FERRY_COLL_ALLTOALL=%s: no such algorithm (direct, mesh, grid3d, "
				   "hypercube, auto)", e);
	if (sc && *sc && rooted_alg_by_name(sc, &f->scatter_alg) < 0)
		return conn_seterr(-EINVAL, "FERRY_COLL_SCATTER=%s: no such algorithm (direct, opt, sdf, orth, "
				   "tree, auto)", sc);
	if (ga && *ga && rooted_alg_by_name(ga, &f->gather_alg) < 0)
		return conn_seterr(-EINVAL, "FERRY_COLL_GATHER=%s: no such algorithm (direct, opt, sdf, orth, tree, "
				   "auto)", ga);
	/* FERRY_COLL_BCAST .. FERRY_COLL_EXSCAN */
	for (uint32_t k = CTL_COLL_BCAST; k <= CTL_COLL_EXSCAN; k++) {
		const char *name = ctl_coll_kind_name(k), *v;
		char var[64];
		int i = snprintf(var, sizeof(var), "FERRY_COLL_");

		for (const char *c = name; *c && i < (int)sizeof(var) - 1; c++)
			var[i++] = (char)(*c >= 'a' && *c <= 'z' ? *c - 'a' + 'A' : *c);
		var[i] = '\0';
		if ((v = getenv(var)) && *v && phased_strategy(f, name, v) < 0) {
			char why[512];

			snprintf(why, sizeof(why), "%.200s", ferry_last_error());
			return conn_seterr(-EINVAL, "%s=%s: %s", var, v, why);
		}
	}
	return 0;
}

/* ferry_coll_strategy for bcast .. exscan: their names as the functions'
 * (ferry_<op>), their algorithms' as proto/ctl.c's tables. */
static int phased_strategy(ferry_t *f, const char *op, const char *algorithm)
{
	uint32_t kind = op ? ctl_coll_kind_by_name(op) : 0;
	const char *const *names = ctl_coll_algs(kind);
	int i;

	if (!ctl_coll_phased(kind))
		return conn_seterr(-EINVAL, "collective \"%s\": no algorithms to choose from (alltoall, scatter, "
				   "gather, bcast, reduce, allreduce, allgather(v), reduce_scatter(_block), scan and "
				   "exscan have)", op ? op : "(null)");
	if ((i = algorithm ? ctl_alg_by_name(names, algorithm) : 0) < 0)
		return conn_seterr(-EINVAL, "%s has no algorithm \"%s\" (%s, %s%s%s)", op, algorithm, names[1],
				   names[2] ? names[2] : "auto", names[2] && names[3] ? ", " : "",
				   names[2] && names[3] ? names[3] : "");
	/* One setting for an operation and its variant, as alltoall's for
	 * alltoallv: allgather(v), reduce_scatter(_block), (ex)scan. */
	f->phased_alg[kind - CTL_COLL_BCAST] = (uint32_t)i;
	f->phased_alg[ctl_coll_variant(kind) - CTL_COLL_BCAST] = (uint32_t)i;
	return 0;
}

FERRY_API int ferry_coll_strategy(ferry_t *f, const char *op, const char *algorithm)
{
	uint32_t alg;
	int ret;

	conn_clearerr();
	if ((ret = coll_read_env(f)) < 0)    /* (then the call wins over it) */
		return ret;
	if (op && (strcmp(op, "alltoall") == 0 || strcmp(op, "alltoallv") == 0)) {
		if (alg_by_name(algorithm, &alg) < 0)
			return conn_seterr(-EINVAL, "alltoall has no algorithm \"%s\" (direct, mesh, grid3d, "
					   "hypercube)", algorithm);
		f->alltoall_alg = alg;
		return 0;
	}
	if (op && (strncmp(op, "scatter", 7) == 0 || strncmp(op, "gather", 6) == 0) &&
	    (!op[op[0] == 's' ? 7 : 6] || strcmp(op + (op[0] == 's' ? 7 : 6), "v") == 0)) {
		if (rooted_alg_by_name(algorithm, &alg) < 0)
			return conn_seterr(-EINVAL, "%s has no algorithm \"%s\" (direct, opt, sdf, orth, tree)", op,
					   algorithm);
		*(op[0] == 's' ? &f->scatter_alg : &f->gather_alg) = alg;
		return 0;
	}
	return phased_strategy(f, op, algorithm);
}

/* An all-to-all of block bytes per rank pair: kind ALLTOALL, or SPLIT
 * (ferry_split's exchange). */
static int post_alltoall(ferry_t *f, uint32_t kind, const void *sendbuf, void *recvbuf, size_t block,
			 ferry_req_t **req_p)
{
	struct ctl_coll_wire c = { .kind = kind, .count = block };
	int in_place = sendbuf == FERRY_IN_PLACE, stage_send, stage_recv, ret;
	size_t total, need;
	struct fmem *stage = NULL;
	uint8_t *base = NULL;
	uint32_t id = 0;

	conn_clearerr();
	if (req_p)
		*req_p = NULL;
	if ((ret = coll_read_env(f)) < 0)
		return ret;
	c.strategy = f->alltoall_alg;
	if (__builtin_mul_overflow(block, (size_t)f->size, &total))
		return conn_seterr(-EINVAL, "blocks of %zu bytes for %u ranks: too many bytes", block, f->size);
	if (total && (!recvbuf || !sendbuf))
		return conn_seterr(-EINVAL, "no %s buffer", recvbuf ? "send" : "receive");
	/* Memory from ferry_alloc is used in place; the rest goes through a
	 * staging region (in place: the receive buffer's contents are sent,
	 * so they are copied first, wherever they are). */
	stage_send = total && (in_place || !mem_ref(froot(f), sendbuf, total, &c.send));
	stage_recv = total && !mem_ref(froot(f), recvbuf, total, &c.recv);
	need = (stage_send ? total : 0) + (stage_recv ? total : 0);
	if (need && (ret = stage_get(froot(f), need, &stage, &base, &id)) < 0)
		return ret;
	if (stage_send) {
		memcpy(base, in_place ? recvbuf : sendbuf, total);
		c.send = (struct ctl_buf){ .mem = id, .off = 0, .len = total };
	}
	if (stage_recv)
		c.recv = (struct ctl_buf){ .mem = id, .off = stage_send ? total : 0, .len = total };
	return coll_post_staged(f, &c, req_p, stage, stage_recv ? recvbuf : NULL, stage_recv ? base + c.recv.off : NULL,
			   total);
}

FERRY_API int ferry_ialltoall(ferry_t *f, const void *sendbuf, void *recvbuf, size_t block, ferry_req_t **req_p)
{
	return post_alltoall(f, CTL_COLL_ALLTOALL, sendbuf, recvbuf, block, req_p);
}

/* The bytes counts[r] at displs[r] reach over all ranks (0 if none), or
 * SIZE_MAX if they wrap. */
size_t coll_extent(const struct ferry *f, const size_t *counts, const size_t *displs)
{
	size_t end = 0, e;

	for (uint32_t r = 0; r < f->size; r++) {
		if (!counts[r])
			continue;
		if (__builtin_add_overflow(displs[r], counts[r], &e))
			return SIZE_MAX;
		if (e > end)
			end = e;
	}
	return end;
}

FERRY_API int ferry_ialltoallv(ferry_t *f, const void *sendbuf, const size_t *sendcounts, const size_t *sdispls,
			       void *recvbuf, const size_t *recvcounts, const size_t *rdispls, ferry_req_t **req_p)
{
	struct ctl_coll_wire c = { .kind = CTL_COLL_ALLTOALLV };
	int in_place = sendbuf == FERRY_IN_PLACE, stage_send, stage_recv, ret;
	size_t sext, rext, vlen, need, off = 0;
	struct fmem *stage = NULL;
	uint8_t *base = NULL;
	uint64_t *vec;
	uint32_t id = 0;

	conn_clearerr();
	if (req_p)
		*req_p = NULL;
	if ((ret = coll_read_env(f)) < 0)
		return ret;
	c.strategy = f->alltoall_alg;
	/* In place: recvbuf's blocks, as recvcounts and rdispls place them,
	 * are what is sent. */
	if (in_place) {
		sendcounts = recvcounts;
		sdispls = rdispls;
	}
	if (!sendcounts || !sdispls || !recvcounts || !rdispls)
		return conn_seterr(-EINVAL, "no counts or displacements");
	sext = coll_extent(f, sendcounts, sdispls);
	rext = coll_extent(f, recvcounts, rdispls);
	if (sext == SIZE_MAX || rext == SIZE_MAX)
		return conn_seterr(-EINVAL, "a displacement plus its count wraps around");
	if ((sext && !sendbuf) || (rext && !recvbuf))
		return conn_seterr(-EINVAL, "no %s buffer", rext && !recvbuf ? "receive" : "send");
	vlen = 32 * (size_t)f->size;
	stage_send = sext && (in_place || !mem_ref(froot(f), sendbuf, sext, &c.send));
	stage_recv = rext && !mem_ref(froot(f), recvbuf, rext, &c.recv);
	need = vlen + (stage_send ? sext : 0) + (stage_recv ? rext : 0);
	if ((ret = stage_get(froot(f), need, &stage, &base, &id)) < 0)
		return ret;
	/* The counts and displacements, as 64-bit numbers, then the data. */
	vec = (uint64_t *)(void *)base;
	for (uint32_t r = 0; r < f->size; r++) {
		vec[r] = sendcounts[r];
		vec[f->size + r] = sdispls[r];
		vec[2 * (size_t)f->size + r] = recvcounts[r];
		vec[3 * (size_t)f->size + r] = rdispls[r];
	}
	c.vec = (struct ctl_buf){ .mem = id, .off = 0, .len = vlen };
	off = vlen;
	if (stage_send) {
		memcpy(base + off, in_place ? recvbuf : sendbuf, sext);
		c.send = (struct ctl_buf){ .mem = id, .off = off, .len = sext };
		off += sext;
	}
	if (stage_recv) {
		/* The extent is copied back whole when the operation ends:
		 * what lies between the blocks must come back as it was. */
		memcpy(base + off, recvbuf, rext);
		c.recv = (struct ctl_buf){ .mem = id, .off = off, .len = rext };
	}
	return coll_post_staged(f, &c, req_p, stage, stage_recv ? recvbuf : NULL, stage_recv ? base + c.recv.off : NULL,
			   rext);
}

FERRY_API int ferry_alltoallv(ferry_t *f, const void *sendbuf, const size_t *sendcounts, const size_t *sdispls,
			      void *recvbuf, const size_t *recvcounts, const size_t *rdispls)
{
	ferry_req_t *r;
	int ret = ferry_ialltoallv(f, sendbuf, sendcounts, sdispls, recvbuf, recvcounts, rdispls, &r);

	return ret < 0 ? ret : ferry_wait(&r);
}

FERRY_API int ferry_alltoall(ferry_t *f, const void *sendbuf, void *recvbuf, size_t block)
{
	ferry_req_t *r;
	int ret = ferry_ialltoall(f, sendbuf, recvbuf, block, &r);

	return ret < 0 ? ret : ferry_wait(&r);
}

/* --- scatter and gather --- */

/* The arguments of a scatter or gather: the rank's own block (own, len
 * bytes: its receive buffer in a scatter, its send buffer in a gather),
 * and at the root every rank's (all: size x block, or counts and displs). */
struct rooted {
	uint32_t kind, root;
	const void *all;
	void *own_recv;         /* scatter: own */
	const void *own_send;   /* gather: own */
	size_t len;
	const size_t *counts, *displs;  /* v kinds, at the root */
};

static int post_rooted(ferry_t *f, const struct rooted *a, ferry_req_t **req_p)
{
	struct ctl_coll_wire c = { .kind = a->kind, .count = a->len, .root = a->root };
	int scatter = a->kind == CTL_COLL_SCATTER || a->kind == CTL_COLL_SCATTERV;
	int v = a->kind == CTL_COLL_SCATTERV || a->kind == CTL_COLL_GATHERV;
	const void *own = scatter ? (const void *)a->own_recv : a->own_send;
	int root, in_place, stage_all, stage_own, ret;
	size_t ext = 0, vlen = 0, need, off;
	struct fmem *stage = NULL;
	uint8_t *base = NULL;
	uint32_t id = 0;

	conn_clearerr();
	if (req_p)
		*req_p = NULL;
	if ((ret = coll_read_env(f)) < 0)
		return ret;
	c.strategy = scatter ? f->scatter_alg : f->gather_alg;
	if (a->root >= f->size)
		return conn_seterr(-EINVAL, "root %u: the %s has %u ranks", a->root, f->root ? "group" : "job",
				   f->size);
	root = f->rank == a->root;
	in_place = own == FERRY_IN_PLACE;
	if (in_place && !root)
		return conn_seterr(-EINVAL, "FERRY_IN_PLACE is for the root's %s buffer only",
				   scatter ? "receive" : "send");
	if (a->all == FERRY_IN_PLACE && root)
		return conn_seterr(-EINVAL, "FERRY_IN_PLACE as the root's %s buffer", scatter ? "send" : "receive");
	if (root) {
		if (!v && __builtin_mul_overflow(a->len, (size_t)f->size, &ext))
			return conn_seterr(-EINVAL, "blocks of %zu bytes for %u ranks: too many bytes", a->len, f->size);
		if (v) {
			if (!a->counts || !a->displs)
				return conn_seterr(-EINVAL, "no counts or displacements at the root");
			if ((ext = coll_extent(f, a->counts, a->displs)) == SIZE_MAX)
				return conn_seterr(-EINVAL, "a displacement plus its count wraps around");
			vlen = 16 * (size_t)f->size;
		}
		if (ext && !a->all)
			return conn_seterr(-EINVAL, "no %s buffer at the root", scatter ? "send" : "receive");
	}
	if (in_place)
		c.flags |= CTL_COLL_IN_PLACE;
	else if (a->len && !own)
		return conn_seterr(-EINVAL, "no %s buffer", scatter ? "receive" : "send");
	/* Memory from ferry_alloc is used in place, the rest staged. */
	stage_all = ext && !mem_ref(froot(f), a->all, ext, scatter ? &c.send : &c.recv);
	stage_own = !in_place && a->len && !mem_ref(froot(f), own, a->len, scatter ? &c.recv : &c.send);
	need = vlen + (stage_all ? ext : 0) + (stage_own ? a->len : 0);
	if (need && (ret = stage_get(froot(f), need, &stage, &base, &id)) < 0)
		return ret;
	if (vlen) {
		uint64_t *vec = (uint64_t *)(void *)base;

		for (uint32_t r = 0; r < f->size; r++) {
			vec[r] = a->counts[r];
			vec[f->size + r] = a->displs[r];
		}
		c.vec = (struct ctl_buf){ .mem = id, .off = 0, .len = vlen };
	}
	off = vlen;
	if (stage_all) {
		/* a gather's extent goes back whole: what lies between the
		 * blocks must come back as it was */
		memcpy(base + off, a->all, ext);
		*(scatter ? &c.send : &c.recv) = (struct ctl_buf){ .mem = id, .off = off, .len = ext };
		off += ext;
	}
	if (stage_own) {
		if (!scatter)
			memcpy(base + off, own, a->len);
		*(scatter ? &c.recv : &c.send) = (struct ctl_buf){ .mem = id, .off = off, .len = a->len };
	}
	if (scatter)
		return coll_post_staged(f, &c, req_p, stage, stage_own ? a->own_recv : NULL,
				   stage_own ? base + c.recv.off : NULL, a->len);
	return coll_post_staged(f, &c, req_p, stage, stage_all ? (void *)(uintptr_t)a->all : NULL,
			   stage_all ? base + c.recv.off : NULL, ext);
}

FERRY_API int ferry_iscatter(ferry_t *f, const void *sendbuf, void *recvbuf, size_t block, uint32_t root,
			     ferry_req_t **req_p)
{
	struct rooted a = { .kind = CTL_COLL_SCATTER, .root = root, .all = sendbuf, .own_recv = recvbuf,
			    .len = block };

	return post_rooted(f, &a, req_p);
}

FERRY_API int ferry_iscatterv(ferry_t *f, const void *sendbuf, const size_t *sendcounts, const size_t *sdispls,
			      void *recvbuf, size_t recvbytes, uint32_t root, ferry_req_t **req_p)
{
	struct rooted a = { .kind = CTL_COLL_SCATTERV, .root = root, .all = sendbuf, .own_recv = recvbuf,
			    .len = recvbytes, .counts = sendcounts, .displs = sdispls };

	return post_rooted(f, &a, req_p);
}

FERRY_API int ferry_igather(ferry_t *f, const void *sendbuf, void *recvbuf, size_t block, uint32_t root,
			    ferry_req_t **req_p)
{
	struct rooted a = { .kind = CTL_COLL_GATHER, .root = root, .all = recvbuf, .own_send = sendbuf,
			    .len = block };

	return post_rooted(f, &a, req_p);
}

FERRY_API int ferry_igatherv(ferry_t *f, const void *sendbuf, size_t sendbytes, void *recvbuf,
			     const size_t *recvcounts, const size_t *rdispls, uint32_t root, ferry_req_t **req_p)
{
	struct rooted a = { .kind = CTL_COLL_GATHERV, .root = root, .all = recvbuf, .own_send = sendbuf,
			    .len = sendbytes, .counts = recvcounts, .displs = rdispls };

	return post_rooted(f, &a, req_p);
}

FERRY_API int ferry_scatter(ferry_t *f, const void *sendbuf, void *recvbuf, size_t block, uint32_t root)
{
	ferry_req_t *r;
	int ret = ferry_iscatter(f, sendbuf, recvbuf, block, root, &r);

	return ret < 0 ? ret : ferry_wait(&r);
}

FERRY_API int ferry_scatterv(ferry_t *f, const void *sendbuf, const size_t *sendcounts, const size_t *sdispls,
			     void *recvbuf, size_t recvbytes, uint32_t root)
{
	ferry_req_t *r;
	int ret = ferry_iscatterv(f, sendbuf, sendcounts, sdispls, recvbuf, recvbytes, root, &r);

	return ret < 0 ? ret : ferry_wait(&r);
}

FERRY_API int ferry_gather(ferry_t *f, const void *sendbuf, void *recvbuf, size_t block, uint32_t root)
{
	ferry_req_t *r;
	int ret = ferry_igather(f, sendbuf, recvbuf, block, root, &r);

	return ret < 0 ? ret : ferry_wait(&r);
}

FERRY_API int ferry_gatherv(ferry_t *f, const void *sendbuf, size_t sendbytes, void *recvbuf,
			    const size_t *recvcounts, const size_t *rdispls, uint32_t root)
{
	ferry_req_t *r;
	int ret = ferry_igatherv(f, sendbuf, sendbytes, recvbuf, recvcounts, rdispls, root, &r);

	return ret < 0 ? ret : ferry_wait(&r);
}

FERRY_API int ferry_ibarrier(ferry_t *f, ferry_req_t **req_p)
{
	struct ctl_coll_wire c = { .kind = CTL_COLL_BARRIER };

	return post(f, &c, req_p);
}

FERRY_API int ferry_barrier(ferry_t *f)
{
	ferry_req_t *r;
	int ret = ferry_ibarrier(f, &r);

	return ret < 0 ? ret : ferry_wait(&r);
}

/* --- groups and locality --- */

static int u64_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* The job rank of f's rank r. */
static uint32_t job_rank(const struct ferry *f, uint32_t r)
{
	return f->members ? f->members[r] : r;
}

/* The group of color from split table t (f->size {color, key}, as the
 * daemons exchanged them in f's operation seq: daemon/coll/coll.c,
 * "Groups", makes it the same way), ordered by (key, rank in f); its id
 * from proto/coll.h, as the daemons compute it.  0 with the handle in
 * *sub_p, or -errno (after which this rank has left the group the daemons
 * made). */
static int split_make(ferry_t *f, const int32_t (*t)[2], int32_t color, uint32_t seq, ferry_t **sub_p)
{
	struct ferry *rf = froot(f), *sub = NULL;
	uint64_t *order = NULL;
	uint32_t n = 0, me = UINT32_MAX;
	int ret;

	for (uint32_t r = 0; r < f->size; r++)
		n += t[r][0] == color;
	order = malloc((size_t)n * sizeof(*order));
	sub = handle_alloc();
	if (!order || !sub || !(sub->members = malloc((size_t)n * sizeof(*sub->members)))) {
		ret = conn_seterr(-ENOMEM, "out of memory for a group of %u ranks", n);
		goto leave;
	}
	n = 0;
	for (uint32_t r = 0; r < f->size; r++)
		if (t[r][0] == color)
			order[n++] = (uint64_t)((uint32_t)t[r][1] ^ 0x80000000u) << 32 | r;
	qsort(order, n, sizeof(*order), u64_cmp);
	for (uint32_t i = 0; i < n; i++) {
		sub->members[i] = job_rank(f, (uint32_t)order[i]);
		if ((uint32_t)order[i] == f->rank)
			me = i;
	}
	if (me == UINT32_MAX) {
		/* the daemons have this rank in another group than it asked */
		ret = conn_seterr(-EPROTO, "ferry_split: this rank is not in its own color's group");
		goto leave;
	}
	sub->root = rf;
	sub->group = coll_group_id(f->group, seq, sub->members[0]);
	sub->rank = me;
	sub->size = n;
	sub->node = rf->node;
	sub->epfd = rf->epfd;
	sub->sock = rf->sock;
	sub->efd_client = sub->efd_daemon = sub->efd_coll = -1;
	sub->timeout_ms = rf->timeout_ms;
	rf->nsubs++;
	*sub_p = sub;
	free(order);
	return 0;
leave:
	/* The daemons made the group with this rank in it: it leaves at once,
	 * so that the others' operations on it fail instead of waiting for it.
	 * Its id needs its rank 0: the least (key, rank in f) of the color. */
	{
		uint32_t lead = UINT32_MAX;
		uint8_t fb[sizeof(struct ctl_hdr) + sizeof(struct ctl_group_wire)];
		ssize_t fn;

		for (uint32_t r = 0; r < f->size; r++)
			if (t[r][0] == color && (lead == UINT32_MAX || t[r][1] < t[lead][1]))
				lead = r;
		fn = lead == UINT32_MAX ? -1 :
		     ctl_encode_group_free(fb, sizeof(fb), coll_group_id(f->group, seq, job_rank(f, lead)));
		if (fn > 0)
			ctl_send(rf, fb, (size_t)fn, -1, "leaving a group");
	}
	if (sub)
		free(sub->members);
	free(sub);
	free(order);
	return ret;
}

/* ferry_split: an all-to-all of {color, key} on f (CTL_COLL_SPLIT: when it
 * completes, the daemons have made the groups), then the handle of this
 * rank's group from the table the daemons exchanged. */
FERRY_API int ferry_split(ferry_t *f, int color, int key, ferry_t **sub_p)
{
	int32_t (*mine)[2] = NULL, (*t)[2] = NULL;
	ferry_req_t *req;
	uint32_t seq;
	int ret;

	conn_clearerr();
	if (!sub_p)
		return conn_seterr(-EINVAL, "no place for the group's handle");
	*sub_p = NULL;
	mine = malloc(8 * (size_t)f->size);
	t = malloc(8 * (size_t)f->size);
	if (!mine || !t) {
		ret = conn_seterr(-ENOMEM, "out of memory for a split of %u ranks", f->size);
		goto out;
	}
	for (uint32_t r = 0; r < f->size; r++) {
		mine[r][0] = color;
		mine[r][1] = key;
	}
	if ((ret = post_alltoall(f, CTL_COLL_SPLIT, mine, t, 8, &req)) < 0)
		goto out;
	seq = f->coll_seq;
	if ((ret = ferry_wait(&req)) == 0 && color >= 0)
		ret = split_make(f, (const int32_t (*)[2])t, color, seq, sub_p);
out:
	free(mine);
	free(t);
	return ret;
}

int group_close(struct ferry *f)
{
	struct ferry *rf = f->root;
	uint8_t buf[sizeof(struct ctl_hdr) + sizeof(struct ctl_group_wire)];
	ssize_t n = ctl_encode_group_free(buf, sizeof(buf), f->group);
	int ret = 0;

	/* The daemon ends the group here when it reads this (its operations
	 * after the ones this rank posted fail on the other ranks). */
	if (!rf->dead)
		ret = n < 0 ? (rf->dead = conn_seterr(-ECONNRESET, "ferryd went away (leaving a group)")) :
		      ctl_send(rf, buf, (size_t)n, -1, "leaving a group");
	rf->nsubs--;
	free(f->members);
	free(f);
	return ret;
}

/* The job's rank -> node table, asked for once (LAYOUT). */
static int get_layout(struct ferry *rf)
{
	uint8_t buf[sizeof(struct ctl_hdr) + sizeof(struct ctl_buf)];
	size_t bytes = 4 * (size_t)rf->size;
	struct fmem *stage = NULL;
	uint8_t *base = NULL;
	uint32_t *layout;
	ferry_req_t *req;
	uint32_t id = 0;
	int ret;

	if (rf->layout)
		return 0;
	layout = malloc(bytes);
	if (!layout)
		return conn_seterr(-ENOMEM, "out of memory for the job's layout");
	if ((ret = stage_get(rf, bytes, &stage, &base, &id)) < 0) {
		free(layout);
		return ret;
	}
	{
		struct ctl_buf b = { .mem = id, .off = 0, .len = bytes };

		ret = post_msg(rf, buf, ctl_encode_layout(buf, sizeof(buf), &b), 0, &req);
	}
	if (ret < 0) {
		stage_put(rf, stage);
		free(layout);
		return ret;
	}
	req->stage = stage;
	req->copy_to = layout;
	req->copy_from = base;
	req->copy_len = bytes;
	if ((ret = ferry_wait(&req)) < 0) {
		free(layout);
		return ret;
	}
	rf->layout = layout;
	return 0;
}

FERRY_API int ferry_node_of(const ferry_t *f, uint32_t rank)
{
	struct ferry *rf = froot(f);
	int ret;

	conn_clearerr();
	if (rank >= f->size)
		return conn_seterr(-EINVAL, "rank %u: the handle has %u ranks", rank, f->size);
	if ((ret = get_layout(rf)) < 0)
		return ret;
	return (int)rf->layout[job_rank(f, rank)];
}

FERRY_API int ferry_local_ranks(const ferry_t *f, uint32_t *ranks, int max)
{
	struct ferry *rf = froot(f);
	int n = 0, ret;

	conn_clearerr();
	if (max < 0 || (max > 0 && !ranks))
		return conn_seterr(-EINVAL, "no room for the ranks");
	if ((ret = get_layout(rf)) < 0)
		return ret;
	for (uint32_t r = 0; r < f->size; r++)
		if (rf->layout[job_rank(f, r)] == rf->node) {
			if (n < max)
				ranks[n] = r;
			n++;
		}
	return n;
}
