/* daemon/local/session.c - see session.h.
 *
 * States of a session: HELLO (nothing said yet), JOIN (an application that
 * must say JOIN next), ENDPOINT (it has an endpoint), ADMIN (a tool), ENDING
 * (closed, its endpoint ends at the next sess_poll), DEAD (freed by
 * sess_poll).
 *
 * Limits (user.h): a session without an endpoint (HELLO, JOIN, ADMIN) holds
 * one of its user's limits.user_unjoined connections and of the node's
 * limits.max_unjoined; one over either is refused with an ERROR as soon as
 * it is accepted.  HELLO and JOIN end after limits.join_timeout_ms; ADMIN
 * after limits.admin_idle_ms with nothing moving.  A tool is answered one
 * query at a time: while its reply is not all out, its next queries wait in
 * the socket (it is not read), so a session holds at most one reply.  The
 * listening socket is not watched while accept fails for want of file
 * descriptors or memory (a level-triggered watch would spin): accepting
 * resumes after a delay that grows from 10 ms to 1 s, or as soon as a
 * session ends.  A JOIN whose endpoint finds no file descriptors (it needs
 * JOIN_FDS) waits, unread (wait_fds): the waiting JOINs are tried again,
 * oldest first, when a session ends and on a timer of their own (the same
 * back-off), and one still waiting at limits.join_timeout_ms of connecting
 * is refused with EMFILE.  Accepting goes on meanwhile (a tool must still
 * get in to see why), so new connections may take descriptors first: the
 * waiting is not a reservation.  An endpoint's client may send at most
 * SESS_FDS_IN descriptors ahead of the MEMs they belong to (a fifth kills
 * the session); they are the session's until its MEM takes one, and closed
 * through the closer when it is reaped.  ferryd's RLIMIT_NOFILE counts them
 * per client (main.c, raise_nofile).
 */
#include "session.h"
#include "mem.h"
#include "direct.h"
#include "endpoint.h"
#include "user.h"
#include "../core/closer.h"
#include "../core/log.h"
#include "../core/loop.h"
#include "../../proto/ctl.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

enum sess_state { S_HELLO, S_JOIN, S_ENDPOINT, S_ADMIN, S_ENDING, S_DEAD };

/* Replies and errors a session may hold for its client: one full reply. */
#define SESS_OUT_MAX (sizeof(struct ctl_hdr) + CTL_MAX_BODY)
/* Connections accepted per wake-up, so that a flood of them cannot hold the
 * loop (the watch is level-triggered: the rest come next turn). */
#define ACCEPT_BATCH 32
/* Backoff of the listening socket while accept has no fd or memory. */
#define ACCEPT_DELAY_MIN_MS 10
#define ACCEPT_DELAY_MAX_MS 1000
/* Descriptors a JOIN's endpoint takes (endpoint.c: the region's memfd
 * until ATTACHED is sent, and 3 eventfds). */
#define JOIN_FDS 4
/* File descriptors one message carries at most: CTL_DIRECT's region and
 * its slots' eventfds (ATTACHED carries 3). */
#define SESS_FDS_MAX (1 + PROTO_DIRECT_MAX)

/* (SESS_FDS_IN, session.h: MEM descriptors a session may have received
 * before their messages were read whole: one per MEM a read ended inside,
 * and the next one; a fifth kills the session) */

struct sess {
	struct sess *next;              /* all sessions, dead ones until reaped */
	uint32_t id;
	int state;                      /* enum sess_state */
	int fd;
	struct loop_watch sock_w;
	uint32_t events;                /* what sock_w watches */
	struct ucred cred;
	struct user *unjoined;          /* HELLO, JOIN, ADMIN: the user whose connection slot it holds */
	struct loop_timer timer;        /* join timeout, tool idle, error not read */
	uint8_t in[512];                /* partial control message */
	size_t in_len;
	char *out;                      /* unsent reply bytes */
	size_t out_len, out_off;
	int close_when_sent;
	struct ep *ep;                  /* ENDPOINT, ENDING: its endpoint */
	uint32_t join_flags;            /* ENDPOINT, ENDING: the CTL_JOIN_* flags of its JOIN */
	int killed;                     /* closed for breaking the protocol (counted) */
	/* ENDPOINT: the fds that came for MEMs not yet read, in order.  A
	 * MEM's fd comes with its first byte; a read that ends inside a MEM
	 * leaves its fd here while the next read may bring the rest and the
	 * next MEM with its own fd (a client sharing memory for many
	 * operations at once, libferry-mpi's tests under load), so one slot
	 * is not enough. */
	int fd_in[SESS_FDS_IN];
	unsigned nfd_in;
	uint64_t end_by_ns;             /* ENDING: when its endpoint ends even if its TX ring is not empty */
	int wait_fds;                   /* JOIN: its JOIN (first in in[]) waits for file descriptors */
	int waited_fds;                 /* ... and it did at least once (counted once) */
};

/* A client that exits without ferry_close (or is killed) may leave items in
 * its TX ring that its destinations have no room for yet: its endpoint stays
 * this long for them to go on, then what is left is counted as lost.  Short,
 * because the job's other ranks hear only then that it left (their steps
 * fail, cluster.h). */
#define SESS_END_GRACE_NS (1000ull * 1000000u)

struct sess_stats sess_stats;

static struct {
	const struct conf *conf;
	uint32_t self;
	int listen_fd;
	struct loop_watch listen_w;
	char sock_path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	int own_socket;                 /* we created the file: remove it at exit */
	int accepting;
	struct sess *all;
	uint32_t next_id;
	uint32_t count;                 /* open (not ENDING or DEAD) */
	sess_query_fn *query;
	const struct sess_events *ev;   /* the layer above */
	struct log_ratelimit rl_failed;
	struct loop_timer end_timer;    /* the next ENDING session's end_by_ns */
	int accept_paused;              /* listen_w unwatched: out of fds or memory */
	uint32_t accept_delay_ms;       /* current backoff; 0 after an accept worked */
	struct loop_timer accept_timer;
	uint32_t join_delay_ms;         /* the same for JOINs waiting for descriptors */
	struct loop_timer join_timer;
} sessions = { .listen_fd = -1 };

/* --- output --- */

static void close_session(struct sess *s, const char *why, int killed);
static void arm(struct sess *s, uint32_t ms);
static void join_retry_later(void);
static void resume_accepting(void);

/* Whether s's messages are read and handled now: not once it is being
 * closed, and not while a tool's reply is held (one at a time). */
static int reading(const struct sess *s)
{
	return !s->close_when_sent && !s->wait_fds && !(s->state == S_ADMIN && s->out);
}

/* Watches s's socket for what it needs now. */
static int watch(struct sess *s)
{
	uint32_t events = (reading(s) ? EPOLLIN : 0) | (s->out ? EPOLLOUT : 0);
	int ret;

	if (events == s->events)
		return 0;
	ret = loop_mod(&s->sock_w, events);
	if (ret == 0)
		s->events = events;
	return ret;
}

static int send_pending(struct sess *s)
{
	while (s->out_off < s->out_len) {
		ssize_t n = send(s->fd, s->out + s->out_off, s->out_len - s->out_off,
				 MSG_DONTWAIT | MSG_NOSIGNAL);

		if (n < 0) {
			if (errno == EAGAIN)
				return watch(s);
			return -errno;
		}
		s->out_off += (size_t)n;
	}
	free(s->out);
	s->out = NULL;
	s->out_len = s->out_off = 0;
	if (s->close_when_sent) {
		close_session(s, NULL, 0);
		return 0;
	}
	return watch(s);
}

/* Sends one message, optionally with fds (they go with the first byte).
 * Whatever the socket does not take now is kept and sent on EPOLLOUT, up to
 * SESS_OUT_MAX in all (-ENOBUFS beyond: the client does not read). */
static int send_msg(struct sess *s, const void *buf, size_t len, const int *fds, int nfds)
{
	union {
		char buf[CMSG_SPACE(SESS_FDS_MAX * sizeof(int))];
		struct cmsghdr align;
	} cbuf;
	struct iovec iov = { .iov_base = (void *)buf, .iov_len = len };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	ssize_t n = 0;
	char *grown;

	assert(nfds >= 0 && nfds <= (int)SESS_FDS_MAX);
	if (!s->out) {
		if (nfds) {
			struct cmsghdr *cm;

			memset(&cbuf, 0, sizeof(cbuf));
			mh.msg_control = cbuf.buf;
			mh.msg_controllen = CMSG_SPACE((size_t)nfds * sizeof(int));
			cm = CMSG_FIRSTHDR(&mh);
			cm->cmsg_level = SOL_SOCKET;
			cm->cmsg_type = SCM_RIGHTS;
			cm->cmsg_len = CMSG_LEN((size_t)nfds * sizeof(int));
			memcpy(CMSG_DATA(cm), fds, (size_t)nfds * sizeof(int));
		}
		n = sendmsg(s->fd, &mh, MSG_DONTWAIT | MSG_NOSIGNAL);
		if (n < 0 && errno != EAGAIN)
			return -errno;
		if (n < 0) {
			if (nfds)       /* fds must ride on the first byte */
				return -EAGAIN;
			n = 0;
		}
		if ((size_t)n == len)
			return 0;
	} else if (nfds) {
		return -EAGAIN;
	}
	if (s->out_len - s->out_off + len - (size_t)n > SESS_OUT_MAX)
		return -ENOBUFS;
	grown = realloc(s->out, s->out_len + len - (size_t)n);
	if (!grown)
		return -ENOMEM;
	memcpy(grown + s->out_len, (const char *)buf + n, len - (size_t)n);
	s->out = grown;
	s->out_len += len - (size_t)n;
	return watch(s);
}

/* Sends an ERROR and closes the session once it is out. */
static void reject(struct sess *s, int err, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static void reject(struct sess *s, int err, const char *fmt, ...)
{
	char text[CTL_ERRTEXT_MAX + 1], buf[sizeof(struct ctl_hdr) + sizeof(struct ctl_error_wire) + sizeof(text)];
	va_list ap;
	ssize_t n;

	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	log_rl_notice("session %u (pid %d uid %u): %s", s->id, s->cred.pid, s->cred.uid, text);
	n = ctl_encode_error(buf, sizeof(buf), err, text);
	if (n > 0 && send_msg(s, buf, (size_t)n, NULL, 0) == 0 && s->out) {
		/* It has join_timeout_ms to read it. */
		s->close_when_sent = 1;
		if (s->ep)
			s->ep->posts_closed = 1;        /* (its socket is not read either) */
		watch(s);
		arm(s, sessions.conf->join_timeout_ms);
		return;
	}
	close_session(s, NULL, 0);
}

/* --- joining --- */

/* The JOIN of an application: its endpoint, if its credentials and the job
 * allow.  flags: the JOIN's (CTL_JOIN_*). */
static void join(struct sess *s, const char *name, uint32_t rank, uint32_t size, uint32_t flags)
{
	struct ctl_attached_wire a;
	uint8_t buf[128];
	int fds[4], ret;
	struct ep *ep = NULL;        /* (LTO cannot see that ep_open sets it) */
	ssize_t n;

	if (size > PROTO_MAX_RANKS) {
		reject(s, EINVAL, "job %s: size %u is above the maximum of %u ranks", name, size, PROTO_MAX_RANKS);
		return;
	}
	ret = ep_open(s->cred.uid, s->cred.pid, s->id, name, rank, size, &ep, &a, fds);
	if (ret == -EINVAL) {
		struct job *j = job_find(s->cred.uid, name);

		reject(s, EINVAL, "job %s has %u ranks, this process asked for %u", name, j ? j->size : 0, size);
		return;
	}
	if (ret == -EADDRINUSE) {
		reject(s, EADDRINUSE, "job %s: rank %u is already attached", name, rank);
		return;
	}
	if (ret == -EUSERS || ret == -EDQUOT || ret == -ENOBUFS) {
		sess_stats.joins_refused++;
		reject(s, -ret, "job %s: cannot join: %s", name, user_refusal());
		return;
	}
	if (ret == -EMFILE || ret == -ENFILE) {
		/* Its JOIN stays in s->in (consume) and is tried again when
		 * descriptors may be free (fds_freed); on_timer refuses it. */
		if (!s->waited_fds) {
			log_rl_warn("session %u (pid %d uid %u): job %s: no file descriptors for its endpoint (%s); "
				    "its JOIN waits", s->id, s->cred.pid, s->cred.uid, name, strerror(-ret));
			sess_stats.joins_waited_fds++;
			s->waited_fds = 1;
		}
		s->wait_fds = 1;
		join_retry_later();
		return;
	}
	if (ret == -ENOMEM) {
		reject(s, ENOMEM, "job %s: cannot join: %s", name, strerror(ENOMEM));
		return;
	}
	if (ret < 0) {
		close_session(s, "cannot set up the endpoint", 0);
		return;
	}
	ep->sess = s;
	n = ctl_encode_attached(buf, sizeof(buf), &a);
	ret = n < 0 ? (int)n : send_msg(s, buf, (size_t)n, fds, 4);
	close(fds[0]);
	if (ret < 0) {
		log_rl_notice("session %u: sending the region: %s", s->id, strerror(-ret));
		ep_close(ep);           /* nobody else heard of it yet */
		close_session(s, "cannot set up the endpoint", 0);
		return;
	}
	/* Its endpoint counts against the limits from now on, not the
	 * connection, and it may wait for the other ranks for as long as it
	 * likes. */
	user_give_unjoined(s->unjoined);
	s->unjoined = NULL;
	loop_timer_cancel(&s->timer);
	s->ep = ep;
	s->join_flags = flags;
	s->state = S_ENDPOINT;
	log_rl_info("session %u: pid %d uid %u joined job %s as rank %u of %u", s->id,
		    s->cred.pid, s->cred.uid, name, rank, size);
	/* The job's home node answers with the rank table once every rank has
	 * joined somewhere; then READY goes out (sess_job_ready). */
	sessions.ev->rank_joined(ep->job, rank);
}

/* Once per job, before its first READY: the endpoints here that asked for
 * direct rings (CTL_JOIN_DIRECT) and wait for READY get a region of them
 * (direct.h), a slot each in rank order, and each a CTL_DIRECT with the
 * region's memfd and the slots' eventfds, if there are at most
 * direct.max_ranks of them.  Otherwise, or if the region cannot be made,
 * none gets one, and their items go through the daemon as before.  A
 * session the message cannot go to is closed: its rank leaves, and its
 * slot is gone when its endpoint ends (direct_end). */
static void send_direct(struct job *j)
{
	struct direct_slot slots[PROTO_DIRECT_MAX];
	struct sess *to[PROTO_DIRECT_MAX];
	uint32_t ranks[PROTO_DIRECT_MAX], n = 0, max = sessions.conf->direct_max_ranks;
	uint8_t buf[sizeof(struct ctl_hdr) + sizeof(struct ctl_direct_wire) + sizeof(ranks)];
	int fds[SESS_FDS_MAX], memfd = -1;     /* (LTO cannot see that direct_create sets it) */

	if (j->direct_tried)
		return;
	j->direct_tried = 1;
	for (uint32_t r = 0; r < j->size; r++) {
		struct ep *ep = j->ranks[r].ep;
		struct sess *m = ep ? ep->sess : NULL;

		if (!m || ep->ready || m->state != S_ENDPOINT || !(m->join_flags & CTL_JOIN_DIRECT))
			continue;
		if (n < max) {
			slots[n] = (struct direct_slot){ .rank = r, .ep = ep, .efd = ep->efd_client };
			to[n] = m;
		}
		n++;
	}
	if (n == 0 || max == 0)
		return;
	if (n > max) {
		log_rl_info("job %s (uid %u): %u ranks here asked for direct rings, more than direct.max_ranks = %u; "
			    "their items go through ferryd", j->name, j->uid, n, max);
		return;
	}
	if (direct_create(j->name, n, sessions.conf->direct_ring_bytes, slots, &j->direct, &memfd) < 0)
		return;
	fds[0] = memfd;
	for (uint32_t k = 0; k < n; k++) {
		ranks[k] = slots[k].rank;
		fds[1 + k] = slots[k].efd;
	}
	for (uint32_t k = 0; k < n; k++) {
		struct ctl_direct_wire w = { .region_bytes = j->direct->region_bytes, .ring_size = j->direct->ring_size,
					     .n = n, .slot = k };
		ssize_t len = ctl_encode_direct(buf, sizeof(buf), &w, ranks);
		int ret = len < 0 ? (int)len : send_msg(to[k], buf, (size_t)len, fds, (int)(1 + n));

		if (ret < 0) {
			log_rl_notice("session %u: sending the direct rings: %s", to[k]->id, strerror(-ret));
			close_session(to[k], "cannot send the direct rings", 0);
		}
	}
	/* The clients have it now (or will never have it); our header
	 * mapping stays. */
	close(memfd);
	log_rl_info("job %s (uid %u): direct rings for %u ranks here, %llu bytes each", j->name, j->uid, n,
		    (unsigned long long)j->direct->ring_size);
}

void sess_job_ready(struct job *j)
{
	uint8_t buf[64];
	uint32_t nodes = 0;
	ssize_t n;

	/* Before READY: a client reads its region before it starts. */
	send_direct(j);

	/* Nodes the job spans, for the client's information. */
	uint8_t *seen = calloc(sessions.conf->nnodes / 8 + 1, 1);

	for (uint32_t r = 0; seen && r < j->size; r++) {
		uint32_t node = j->ranks[r].node;

		if (node < sessions.conf->nnodes && !(seen[node / 8] & (1u << (node % 8)))) {
			seen[node / 8] |= (uint8_t)(1u << (node % 8));
			nodes++;
		}
	}
	free(seen);
	n = ctl_encode_ready(buf, sizeof(buf), j->size, nodes);
	for (uint32_t r = 0; r < j->size; r++) {
		struct sess *m = j->ranks[r].ep ? j->ranks[r].ep->sess : NULL;

		if (!m || j->ranks[r].ep->ready || m->state != S_ENDPOINT)
			continue;
		j->ranks[r].ep->ready = 1;     /* (READY goes out once) */
		if (send_msg(m, buf, (size_t)n, NULL, 0) < 0)
			close_session(m, "cannot send READY", 0);
	}
	log_rl_info("job %s (uid %u): ready, %u ranks on %u nodes", j->name, j->uid, j->size, nodes);
}

/* LAYOUT: the job's rank -> node table (as at GO: job.h), one u32 per rank,
 * into the client's buffer b; COLL_DONE {group 0, seq 0} says it is there. */
static void layout(struct ep *ep, const struct ctl_buf *b)
{
	const struct job *j = ep->job;
	uint8_t *p = mem_at(mem_find(ep->mems, b->mem), b->off, b->len);

	if (!j->layout || !p || b->len != 4ull * j->size) {
		sess_coll_done(ep, 0, 0, EINVAL, "LAYOUT: no table yet, or a buffer that is not 4 bytes per rank in "
			       "memory shared with ferryd");
		return;
	}
	memcpy(p, j->layout, 4ull * j->size);
	sess_coll_done(ep, 0, 0, 0, NULL);
}

void sess_coll_done(struct ep *ep, uint32_t group, uint32_t seq, int err, const char *why)
{
	uint8_t buf[sizeof(struct ctl_hdr) + sizeof(struct ctl_coll_done_wire) + CTL_ERRTEXT_MAX];
	struct sess *s = ep->sess;
	ssize_t n;

	if (seq && ep->coll_pending)
		ep->coll_pending--;
	if (!s || s->state != S_ENDPOINT)
		return;
	/* success on the done page; a failure's text only fits the socket */
	if (!err && ep_done_publish(ep, group, seq))
		return;
	n = ctl_encode_coll_done(buf, sizeof(buf), group, seq, err, why ? why : "");
	if (n < 0 || send_msg(s, buf, (size_t)n, NULL, 0) < 0)
		close_session(s, "cannot send COLL_DONE", 0);
	else
		ep_done_sent(ep);
}

void sess_reject_rank(uid_t uid, const char *name, uint32_t rank, int err)
{
	struct job *j = job_find(uid, name);
	struct ep *ep = j && rank < j->size ? j->ranks[rank].ep : NULL;
	struct sess *s = ep ? ep->sess : NULL;

	if (!s || s->state != S_ENDPOINT)
		return;
	switch (err) {
	case EADDRINUSE:
		reject(s, err, "job %s: rank %u is already attached on another node", name, rank);
		break;
	case EINVAL:
		reject(s, err, "job %s: other ranks joined with a size other than %u", name, j->size);
		break;
	case EBUSY:
		reject(s, err, "job %s has started without rank %u (it left); the job ends when its other ranks "
		       "leave, then the name can be used again", name, rank);
		break;
	default:
		reject(s, err, "job %s: the job's home node refused rank %u: %s", name, rank, strerror(err));
	}
}

/* --- ending --- */

/* Ends a session.  why != NULL is logged; killed counts it as misbehaviour.
 * The socket closes now; the endpoint, if any, ends at the next sess_poll
 * (after its TX ring was drained once more, unless killed), and the struct
 * stays on the list until then, because epoll may still hand us events that
 * point at it in this round. */
static void close_session(struct sess *s, const char *why, int killed)
{
	if (s->state >= S_ENDING)
		return;
	if (why)
		log_rl_at(killed ? LOG_WARNING : LOG_INFO, "session %u (pid %d uid %u%s%s): %s", s->id,
			  s->cred.pid, s->cred.uid, s->ep ? " job " : "", s->ep ? s->ep->job->name : "", why);
	/* A client that exits right after sending: what it left in its TX ring
	 * is taken at the next turn of the loop, before sess_poll ends the
	 * endpoint (main's poll hook drains TX rings first), as far as the
	 * destinations have room.  One that broke the protocol: nothing.  (A
	 * session closed from cluster_poll, in the same turn after the drain,
	 * had not been told READY: it cannot have sent anything.) */
	if (s->ep && killed)
		ep_fail(s->ep, why ? why : "killed");
	loop_del(&s->sock_w);
	loop_timer_cancel(&s->timer);
	closer_close_conn(s->fd, s->cred.uid);
	s->fd = -1;
	free(s->out);
	s->out = NULL;
	if (s->unjoined) {
		user_give_unjoined(s->unjoined);
		s->unjoined = NULL;
	}
	if (s->ep)
		s->ep->posts_closed = 1;        /* (nothing more of what it posts runs) */
	s->state = s->ep ? S_ENDING : S_DEAD;
	s->end_by_ns = loop_now_ns() + SESS_END_GRACE_NS;
	sessions.count--;
	sess_stats.sessions_closed++;
	sess_stats.sessions_killed += killed != 0;
	s->killed = killed != 0;
	loop_kick();
}

static void on_end_timer(struct loop_timer *t)
{
	(void)t;
	loop_kick();    /* sess_poll ends what is due */
}

/* Ends what was closed: endpoints whose client broke the protocol, then
 * those of closed sessions whose TX rings are drained (or that waited
 * SESS_END_GRACE_NS), then frees dead sessions.  tell: whether the layer
 * above hears of the ranks that leave (0: the daemon is going away, nothing
 * waits). */
static void fds_freed(void);

static void reap(int tell)
{
	struct sess **pp = &sessions.all;
	uint64_t now = loop_now_ns(), next = 0;
	int freed = 0;

	while (*pp) {
		struct sess *s = *pp;

		if (s->state == S_ENDPOINT && s->ep->failed) {
			close_session(s, s->ep->failed, 1);
		} else if (s->state == S_ENDING && s->ep->failed && !s->killed) {
			/* It broke the protocol on its way out (in what was
			 * left in its rings): say so, and count it. */
			log_rl(&sessions.rl_failed, LOG_WARNING, "session %u (pid %d uid %u job %s): %s", s->id,
			       s->cred.pid, s->cred.uid, s->ep->job->name, s->ep->failed);
			sess_stats.sessions_killed++;
			s->killed = 1;
		}
		if (s->state == S_ENDING && tell && ep_tx_pending(s->ep) && now < s->end_by_ns) {
			if (!next || s->end_by_ns < next)
				next = s->end_by_ns;
		} else if (s->state == S_ENDING) {
			uint64_t lost = ep_tx_abandon(s->ep);

			if (lost)
				log_rl(&sessions.rl_failed, LOG_NOTICE, "session %u (pid %d uid %u job %s): exited with %llu "
				       "items in its TX ring that could not go on within %llu ms; they are lost", s->id,
				       s->cred.pid, s->cred.uid, s->ep->job->name, (unsigned long long)lost,
				       (unsigned long long)(SESS_END_GRACE_NS / 1000000u));
			if (tell)
				sessions.ev->rank_left(s->ep);
			ep_close(s->ep);
			s->ep = NULL;
			s->state = S_DEAD;
		}
		if (s->state == S_DEAD) {
			*pp = s->next;
			for (unsigned i = 0; i < s->nfd_in; i++)
				closer_close(s->fd_in[i], s->cred.uid);
			free(s);
			freed = 1;
		} else {
			pp = &s->next;
		}
	}
	if (next)
		loop_timer_arm(&sessions.end_timer, next - now, on_end_timer, NULL);
	/* Their file descriptors are free now: a JOIN may be waiting for
	 * them, or someone to connect. */
	if (freed)
		fds_freed();
}

/* Runs what endpoints' clients posted on their post pages (proto/post.h)
 * that may run now, as if it came on the socket: exactly one CTL_COLL a
 * slot.  Returns 1 if it ran any. */
static int take_posts_of(struct sess *s)
{
	uint8_t msg[PROTO_POST_MSG_MAX];
	uint32_t len;
	int work = 0;

	if (s->state != S_ENDPOINT || !sessions.ev->coll_post)
		return 0;
	/* At most a page a turn: a client that refills its slots as fast as
	 * they are taken (with operations that fail at once) gets no more of
	 * the loop than one that sends on its socket; what is left keeps the
	 * loop awake (ep_sleep_prepare).  The session may close on the way
	 * (its COLL_DONEs not read): nothing more of it then (posts_closed,
	 * and s->ep stays until the loop reaps it). */
	for (unsigned i = 0; i < PROTO_POST_SLOTS && ep_post_next(s->ep, msg, &len); i++) {
		struct ctl_msg m;       /* (each post decoded afresh: ep_post_next refused one too short) */

		if (ctl_decode(msg, len, &m) != (ssize_t)len || m.type != CTL_COLL) {
			ep_fail(s->ep, "a post on its post page that is not one whole collective operation");
			break;
		}
		sessions.ev->coll_post(s->ep, &m.u.coll);
		ep_post_taken(s->ep);
		work = 1;
	}
	return work;
}

int sess_take_posts(void)
{
	int work = 0;

	for (struct sess *s = sessions.all; s; s = s->next)
		work |= take_posts_of(s);
	return work;
}

int sess_poll(void)
{
	int work = ep_publish();

	reap(1);
	return work;
}

/* --- timers --- */

static void on_timer(struct loop_timer *t)
{
	struct sess *s = t->ctx;
	const struct conf *c = sessions.conf;

	if (s->state >= S_ENDING)
		return;
	if (s->close_when_sent) {
		close_session(s, "did not read the error it was sent", 0);
		return;
	}
	if (s->wait_fds) {
		s->wait_fds = 0;
		sess_stats.joins_refused++;
		reject(s, EMFILE, "cannot join: ferryd had no file descriptors for its endpoint within %u ms of "
		       "connecting (limits.join_timeout_ms)", c->join_timeout_ms);
		return;
	}
	sess_stats.sessions_timed_out++;
	switch (s->state) {
	case S_HELLO:
	case S_JOIN:
		reject(s, ETIMEDOUT, "no JOIN within %u ms of connecting (limits.join_timeout_ms = %u)",
		       c->join_timeout_ms, c->join_timeout_ms);
		break;
	case S_ADMIN:
		/* It reads nothing: an error would not reach it either. */
		close_session(s, s->out ? "does not read its replies (limits.admin_idle_ms)"
					: "idle (limits.admin_idle_ms)", 0);
		break;
	}
}

/* (Re)starts s's timer: it fires ms from now. */
static void arm(struct sess *s, uint32_t ms)
{
	loop_timer_arm(&s->timer, (uint64_t)ms * 1000000u, on_timer, s);
}

/* --- control messages --- */

static void answer(struct sess *s, const struct ctl_msg *m)
{
	char *text = NULL, *buf;
	size_t len = 0;
	FILE *out = open_memstream(&text, &len);
	ssize_t n;
	int ret;

	if (!out) {
		close_session(s, "out of memory for a reply", 0);
		return;
	}
	ret = sessions.query(m->u.query.what, m->u.query.arg, &s->cred, out);
	fclose(out);
	if (ret < 0) {
		free(text);
		reject(s, -ret, "query %u refused: %s", m->u.query.what, strerror(-ret));
		return;
	}
	if (len > CTL_MAX_BODY)
		len = CTL_MAX_BODY;
	buf = malloc(len + sizeof(struct ctl_hdr));
	n = buf ? ctl_encode_text(buf, len + sizeof(struct ctl_hdr), text, len) : -ENOMEM;
	free(text);
	/* Nothing is held when a query is read (reading()): a whole reply
	 * always fits. */
	if (n < 0 || send_msg(s, buf, (size_t)n, NULL, 0) < 0)
		close_session(s, "cannot send a reply", 0);
	free(buf);
}

static void handle_msg(struct sess *s, const struct ctl_msg *m)
{
	switch (s->state) {
	case S_HELLO:
		if (m->type != CTL_HELLO) {
			close_session(s, "first message is not HELLO", 1);
			return;
		}
		if (m->u.hello.role == CTL_ROLE_ADMIN) {
			s->state = S_ADMIN;
			arm(s, sessions.conf->admin_idle_ms);
		} else {
			s->state = S_JOIN;
		}
		return;
	case S_JOIN:
		if (m->type != CTL_JOIN) {
			close_session(s, "expected JOIN", 1);
			return;
		}
		join(s, m->u.join.name, m->u.join.rank, m->u.join.size, m->u.join.flags);
		return;
	case S_ADMIN:
		if (m->type == CTL_QUERY && sessions.query) {
			arm(s, sessions.conf->admin_idle_ms);
			answer(s, m);
			return;
		}
		close_session(s, "unexpected message from a tool", 1);
		return;
	case S_ENDPOINT:
		/* After READY only; ep_fail on the way (a broken protocol)
		 * closes the session, and nothing more of it is taken: not
		 * the rest of what it sent already either. */
		if (s->ep)
			s->ep->ctl_handled++;   /* (what posts on its post page wait for) */
		if (s->ep && s->ep->failed)
			return;
		if (m->type == CTL_COLL && sessions.ev->coll_post && s->ep && s->ep->ready) {
			sessions.ev->coll_post(s->ep, &m->u.coll);
			return;
		}
		if (m->type == CTL_MEM && s->ep && s->ep->ready && s->nfd_in) {
			char why[160];
			int fd = s->fd_in[0], ret;

			memmove(s->fd_in, s->fd_in + 1, --s->nfd_in * sizeof(s->fd_in[0]));
			ret = mem_add(&s->ep->mems, s->ep->job->user, m->u.mem.id, fd, m->u.mem.bytes, why,
				      sizeof(why));
			if (ret < 0)
				reject(s, -ret, "%s", why);
			return;
		}
		if (m->type == CTL_GROUP_FREE && sessions.ev->coll_group_free && s->ep && s->ep->ready) {
			sessions.ev->coll_group_free(s->ep, m->u.group.id);
			return;
		}
		if (m->type == CTL_LAYOUT && s->ep && s->ep->ready) {
			layout(s->ep, &m->u.layout);
			return;
		}
		if (m->type == CTL_MEM_FREE && s->ep && s->ep->ready) {
			if (mem_remove(&s->ep->mems, m->u.mem.id) < 0)
				reject(s, EINVAL, "memory region %u: not registered", m->u.mem.id);
			return;
		}
		close_session(s, "unexpected control message", 1);
		return;
	default:
		close_session(s, "unexpected control message", 1);
	}
}

/* Handles the whole messages in s->in while s is read (see reading()).
 * Returns 0 if s was closed. */
static int consume(struct sess *s)
{
	for (;;) {
		struct ctl_msg m;
		ssize_t used;

		if (s->state >= S_ENDING)
			return 0;
		if (!reading(s))
			return 1;
		used = ctl_decode(s->in, s->in_len, &m);
		if (used == 0)
			return 1;
		/* (the first message only: anything else that does not decode
		 * is a broken client, killed as one) */
		if (used < 0 && s->state == S_HELLO && ctl_hdr_version(s->in) != CTL_VERSION) {
			reject(s, EPROTO, "the client speaks control protocol version %u, ferryd (ferry %s) version %u: "
			       "libferry and ferryd must come from the same ferry release",
			       ctl_hdr_version(s->in), FERRY_VERSION, CTL_VERSION);
			return 0;
		}
		if (used < 0) {
			close_session(s, "malformed control message", 1);
			return 0;
		}
		handle_msg(s, &m);
		if (s->wait_fds)
			return 1;       /* the message stays for its retry */
		memmove(s->in, s->in + used, s->in_len - (size_t)used);
		s->in_len -= (size_t)used;
	}
}

/* Receives what s sent into s->in, and a file descriptor that came with
 * it (a MEM's memfd) onto s->fd_in: one a read (the kernel ends a read
 * after the bytes that carried descriptors), only from an endpoint's
 * client, only while fewer than SESS_FDS_IN wait.  Returns the bytes, 0 at
 * EOF, -EPROTO for descriptors that were not expected (closed:
 * core/closer.h), or -errno. */
static ssize_t recv_fds(struct sess *s)
{
	int want = s->state == S_ENDPOINT && s->nfd_in < SESS_FDS_IN, got = -1;
	unsigned nfds = 0;
	int n = closer_recv(s->fd, s->in + s->in_len, sizeof(s->in) - s->in_len, 0, s->cred.uid, want ? &got : NULL,
			    &nfds);

	if (got >= 0)
		s->fd_in[s->nfd_in++] = got;
	if (nfds > CLOSER_FDS_MAX)
		log_rl_warn("session %u (pid %d uid %u): more descriptors than ferryd could take (at its limit of open "
			    "files?): the kernel released the rest in ferryd's loop", s->id, s->cred.pid, s->cred.uid);
	if (n < 0)
		return n;
	return nfds > (unsigned)want ? -EPROTO : n;
}

static void on_sock(struct loop_watch *w, uint32_t events)
{
	struct sess *s = w->ctx;

	if (s->state >= S_ENDING)
		return;
	if (s->out && (events & (EPOLLOUT | EPOLLHUP | EPOLLERR))) {
		if (send_pending(s) < 0) {
			close_session(s, "cannot send", 0);
			return;
		}
		if (s->state >= S_ENDING)
			return;
		if (s->state == S_ADMIN)
			arm(s, sessions.conf->admin_idle_ms);    /* its reply moves */
	}
	if (!reading(s)) {
		/* Its socket is not read: nothing more can come of it once
		 * the client is gone. */
		if (events & (EPOLLHUP | EPOLLERR))
			close_session(s, NULL, 0);
		return;
	}
	/* Queries that waited in s->in while a reply was held. */
	if (!consume(s))
		return;
	if ((events & (EPOLLIN | EPOLLHUP | EPOLLERR)) && closer_waiting(s->cred.uid) >= CLOSER_MAX_WAITING) {
		/* Not read: what it sent goes to the user's thread with it. */
		close_session(s, "descriptors this user's clients sent are still being closed", 1);
		return;
	}
	if (events & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
		while (reading(s)) {
			size_t want = sizeof(s->in) - s->in_len;
			ssize_t n = recv_fds(s);

			if (n == -EPROTO) {
				close_session(s, "file descriptors where none were expected", 1);
				return;
			}
			if (n == 0) {
				/* (what it posted before it closed runs, as what
				 * it sent on the socket did) */
				take_posts_of(s);
				close_session(s, s->state == S_ENDPOINT ? "closed" : NULL, 0);
				return;
			}
			if (n < 0) {
				if (n == -EAGAIN || n == -EINTR)
					break;
				close_session(s, "receive failed", 0);
				return;
			}
			s->in_len += (size_t)n;
			if (!consume(s))
				return;
			/* Every whole message was handled, unless s stopped
			 * reading: a full buffer then is one message too long. */
			if (reading(s) && s->in_len == sizeof(s->in)) {
				close_session(s, "control message too long", 1);
				return;
			}
			/* Less than there was room for: the socket was empty
			 * (the watch is level-triggered: what comes meanwhile
			 * wakes it again), so no read just to hear EAGAIN. */
			if ((size_t)n < want)
				break;
		}
	}
	if (watch(s) < 0)
		close_session(s, "epoll", 0);
}

/* --- accepting --- */

/* Refuses a connection before it is a session: an ERROR saying which limit
 * (the socket's buffer is empty, it takes the message), then close. */
static void refuse(int fd, const struct ucred *cred, int err, const char *why)
{
	uint8_t buf[sizeof(struct ctl_hdr) + sizeof(struct ctl_error_wire) + CTL_ERRTEXT_MAX];
	ssize_t n = ctl_encode_error(buf, sizeof(buf), err, why);

	if (n > 0 && send(fd, buf, (size_t)n, MSG_DONTWAIT | MSG_NOSIGNAL) < 0)
		log_rl_info("refusing pid %d uid %u: send: %m", cred->pid, cred->uid);
	closer_close_conn(fd, cred->uid);
	sess_stats.sessions_refused++;
	log_rl_notice("connection of pid %d uid %u refused: %s", cred->pid, cred->uid, why);
}

static void new_session(int fd)
{
	socklen_t len = sizeof(struct ucred);
	struct ucred cred;
	struct user *u;
	struct sess *s;
	int ret;

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0) {
		log_rl_warn("SO_PEERCRED: %m");
		closer_close_conn(fd, (uid_t)-1);
		return;
	}
	/* Its descriptors that could not be closed at once, each sent (or
	 * left in its socket) by a client that broke the protocol. */
	if (closer_waiting(cred.uid) >= CLOSER_MAX_WAITING) {
		refuse(fd, &cred, EAGAIN, "descriptors this user's clients sent are still being closed");
		return;
	}
	u = user_get(cred.uid);
	ret = u ? user_take_unjoined(u) : -ENOMEM;
	if (ret < 0) {
		if (u)
			user_put(u);
		refuse(fd, &cred, -ret, user_refusal());
		return;
	}
	s = calloc(1, sizeof(*s));
	if (!s) {
		user_give_unjoined(u);
		refuse(fd, &cred, ENOMEM, "ferryd is out of memory");
		return;
	}
	s->fd = fd;
	s->cred = cred;
	s->unjoined = u;
	s->id = ++sessions.next_id;
	s->events = EPOLLIN;
	ret = loop_add(&s->sock_w, fd, s->events, on_sock, s);
	if (ret < 0) {
		log_rl_warn("epoll add: %s", strerror(-ret));
		user_give_unjoined(u);
		closer_close_conn(fd, cred.uid);
		free(s);
		return;
	}
	s->state = S_HELLO;
	s->next = sessions.all;
	sessions.all = s;
	sessions.count++;
	sess_stats.sessions_opened++;
	arm(s, sessions.conf->join_timeout_ms);
}

/* The next delay of a back-off that was d ms (0: none yet). */
static uint32_t backoff(uint32_t d)
{
	return d ? (d * 2 > ACCEPT_DELAY_MAX_MS ? ACCEPT_DELAY_MAX_MS : d * 2) : ACCEPT_DELAY_MIN_MS;
}

static void on_accept_timer(struct loop_timer *t)
{
	(void)t;
	fds_freed();
}

/* Whether n descriptors are free now (dups of fd, closed at once): a JOIN
 * is tried again only then, not through its endpoint's memory and a
 * failing eventfd. */
static int fds_free(int fd, int n)
{
	int got[JOIN_FDS], k = 0;

	while (k < n && k < (int)(sizeof(got) / sizeof(got[0])) && (got[k] = fcntl(fd, F_DUPFD_CLOEXEC, 0)) >= 0)
		k++;
	for (int i = 0; i < k; i++)
		close(got[i]);
	return k == n;
}

/* The waiting JOIN that came first (session ids grow), or NULL. */
static struct sess *oldest_waiting(void)
{
	struct sess *o = NULL;

	for (struct sess *s = sessions.all; s; s = s->next)
		if (s->wait_fds && s->state < S_ENDING && (!o || s->id < o->id))
			o = s;
	return o;
}

/* Descriptors may be free (a session ended, or a back-off is over): the
 * JOINs that wait for them, oldest first, as long as they get in; then
 * accepting, if it was paused. */
static void fds_freed(void)
{
	struct sess *s;

	while ((s = oldest_waiting())) {
		/* Exactly what the endpoint takes: a JOIN tried first with
		 * JOIN_FDS free gets in, so one waiting must too (a margin
		 * here kept it waiting, at the edge, for as long as nothing
		 * else closed). */
		if (!fds_free(s->fd, JOIN_FDS)) {
			join_retry_later();
			break;
		}
		s->wait_fds = 0;
		if (consume(s) && watch(s) < 0)
			close_session(s, "epoll", 0);
		if (s->wait_fds)
			break;          /* (join armed the timer) */
	}
	if (!oldest_waiting()) {
		sessions.join_delay_ms = 0;
		loop_timer_cancel(&sessions.join_timer);
	}
	resume_accepting();
}

static void on_join_timer(struct loop_timer *t)
{
	(void)t;
	fds_freed();
}

/* A JOIN waits for descriptors: try again after the back-off, unless a
 * try is due already. */
static void join_retry_later(void)
{
	if (sessions.join_timer.armed)
		return;
	sessions.join_delay_ms = backoff(sessions.join_delay_ms);
	loop_timer_arm(&sessions.join_timer, (uint64_t)sessions.join_delay_ms * 1000000u, on_join_timer, NULL);
}

/* accept failed for want of file descriptors or memory: leave the listening
 * socket alone for a while (its watch is level-triggered: it would fire at
 * once, again and again).  Clients that connect meanwhile wait in its
 * backlog. */
static void pause_accepting(const char *why)
{
	uint32_t d = backoff(sessions.accept_delay_ms);

	sessions.accept_delay_ms = d;
	sessions.accept_paused = 1;
	sess_stats.accept_paused++;
	log_rl_warn("accept: %s; not accepting clients for %u ms", why, d);
	if (loop_mod(&sessions.listen_w, 0) < 0)
		log_rl_err("epoll: cannot pause the listening socket: %m");
	loop_timer_arm(&sessions.accept_timer, (uint64_t)d * 1000000u, on_accept_timer, NULL);
}

static void resume_accepting(void)
{
	if (!sessions.accept_paused || sessions.listen_fd < 0)
		return;
	sessions.accept_paused = 0;
	loop_timer_cancel(&sessions.accept_timer);
	if (loop_mod(&sessions.listen_w, EPOLLIN) < 0)
		log_rl_err("epoll: cannot watch the listening socket again: %m");
}

/* Closes a connection not taken (its client may have sent already). */
static void drop(int fd)
{
	socklen_t len = sizeof(struct ucred);
	struct ucred cred;

	closer_close_conn(fd, getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0 ? cred.uid : (uid_t)-1);
}

static void on_client_accept(struct loop_watch *w, uint32_t events)
{
	(void)events;
	if (closer_waiting_all() >= CLOSER_TOTAL_MAX) {
		/* (core/closer.h: the descriptor table is everyone's) */
		pause_accepting("too many descriptors clients sent are still being closed");
		return;
	}
	for (int i = 0; i < ACCEPT_BATCH; i++) {
		int fd = accept4(w->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

		if (fd < 0) {
			if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
				pause_accepting(strerror(errno));
			else if (errno != EAGAIN && errno != EINTR && errno != ECONNABORTED)
				log_rl_warn("accept: %m");
			return;
		}
		sessions.accept_delay_ms = 0;
		/* Before its first read: a MSG_OOB byte, and descriptors that
		 * came with it, are read with the rest (core/closer.h). */
		if (setsockopt(fd, SOL_SOCKET, SO_OOBINLINE, &(int){ 1 }, sizeof(int)) < 0)
			log_rl_warn("SO_OOBINLINE: %m");
		if (!sessions.accepting) {
			drop(fd);
			continue;
		}
		new_session(fd);
	}
}

/* --- setup --- */

static int listen_on(const char *dir)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd, ret;

	if (mkdir(dir, 0755) < 0 && errno != EEXIST) {
		ret = -errno;
		log_err("cannot create runtime directory %s: %m", dir);
		return ret;
	}
	if ((size_t)snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/%s", dir, SESS_SOCKET_NAME) >=
	    sizeof(sa.sun_path)) {
		log_err("runtime directory %s: socket path too long", dir);
		return -ENAMETOOLONG;
	}
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		ret = -errno;
		log_err("socket: %m");
		return ret;
	}
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		/* Stale socket from a daemon that died, or a live daemon? */
		int probe = errno == EADDRINUSE ? socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0) : -1;

		if (probe >= 0 && connect(probe, (struct sockaddr *)&sa, sizeof(sa)) == 0) {
			close(probe);
			close(fd);
			log_err("another ferryd is listening on %s", sa.sun_path);
			return -EADDRINUSE;
		}
		if (probe >= 0) {
			close(probe);
			unlink(sa.sun_path);
		}
		if (probe < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
			ret = -errno;
			log_err("bind %s: %m", sa.sun_path);
			close(fd);
			return ret;
		}
	}
	/* Everyone may connect; credentials decide what they can do. */
	if (chmod(sa.sun_path, 0666) < 0 || listen(fd, 128) < 0) {
		ret = -errno;
		log_err("listen %s: %m", sa.sun_path);
		close(fd);
		unlink(sa.sun_path);
		return ret;
	}
	snprintf(sessions.sock_path, sizeof(sessions.sock_path), "%s", sa.sun_path);
	sessions.own_socket = 1;
	return fd;
}

int sess_init(const struct conf *c, uint32_t self, int listen_fd, sess_query_fn *query,
	      const struct sess_events *ev)
{
	int ret;

	sessions.conf = c;
	sessions.self = self;
	sessions.query = query;
	sessions.ev = ev;
	if (listen_fd < 0) {
		listen_fd = listen_on(c->runtime_dir);
		if (listen_fd < 0)
			return listen_fd;
	} else {
		/* systemd passes a blocking socket; on_client_accept accepts until
		 * EAGAIN and must not block in the last accept. */
		int fl = fcntl(listen_fd, F_GETFL);

		if (fl < 0 || fcntl(listen_fd, F_SETFL, fl | O_NONBLOCK) < 0) {
			ret = -errno;
			log_err("making the inherited socket non-blocking: %m");
			return ret;
		}
		log_info("using the listening socket systemd passed");
	}
	sessions.listen_fd = listen_fd;
	ret = loop_add(&sessions.listen_w, listen_fd, EPOLLIN, on_client_accept, NULL);
	if (ret < 0) {
		log_err("epoll add listening socket: %s", strerror(-ret));
		sess_fini();
		return ret;
	}
	sessions.accepting = 1;
	return 0;
}

void sess_fini(void)
{
	ep_exit_begin();        /* what the endpoints lent is not taken back now */
	loop_timer_cancel(&sessions.end_timer);
	for (struct sess *s = sessions.all; s; s = s->next)
		close_session(s, NULL, 0);
	reap(0);
	loop_timer_cancel(&sessions.accept_timer);
	loop_timer_cancel(&sessions.join_timer);
	sessions.accept_paused = 0;
	if (sessions.listen_fd >= 0) {
		int fd;

		loop_del(&sessions.listen_w);
		/* Connections not taken yet: closing our own listener would
		 * release what their clients sent in them here (closer.h).  (A
		 * socket systemd made keeps them for the next ferryd.) */
		for (int i = 0; sessions.own_socket && i < 1024 &&
				(fd = accept4(sessions.listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0; i++)
			drop(fd);
		close(sessions.listen_fd);
		sessions.listen_fd = -1;
	}
	if (sessions.own_socket)
		unlink(sessions.sock_path);
	sessions.own_socket = 0;
}

void sess_stop_accepting(void)
{
	sessions.accepting = 0;
}

uint32_t sess_count(void)
{
	return sessions.count;
}

uint64_t sess_out_bytes(void)
{
	uint64_t n = 0;

	for (const struct sess *s = sessions.all; s; s = s->next)
		n += s->out_len - s->out_off;
	return n;
}
