/* daemon/local/session.c - see session.h.
 *
 * States of a session: HELLO (nothing said yet), JOIN (an application that
 * must say JOIN next), ENDPOINT (it has an endpoint), ADMIN (a tool), ENDING
 * (closed, its endpoint ends at the next sess_poll), DEAD (freed by
 * sess_poll).
 */
#include "session.h"
#include "endpoint.h"
#include "user.h"
#include "../core/log.h"
#include "../core/loop.h"
#include "../../proto/ctl.h"

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

struct sess {
	struct sess *next;              /* all sessions, dead ones until reaped */
	uint32_t id;
	int state;                      /* enum sess_state */
	int fd;
	struct loop_watch sock_w;
	struct ucred cred;
	uint8_t in[512];                /* partial control message */
	size_t in_len;
	char *out;                      /* unsent reply bytes */
	size_t out_len, out_off;
	int close_when_sent;
	struct ep *ep;                  /* ENDPOINT, ENDING: its endpoint */
	int ready_sent;                 /* READY went out */
};

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
} sessions = { .listen_fd = -1 };

/* --- output --- */

static void close_session(struct sess *s, const char *why, int killed);

static int send_pending(struct sess *s)
{
	while (s->out_off < s->out_len) {
		ssize_t n = send(s->fd, s->out + s->out_off, s->out_len - s->out_off,
				 MSG_DONTWAIT | MSG_NOSIGNAL);

		if (n < 0) {
			if (errno == EAGAIN)
				return loop_mod(&s->sock_w, EPOLLIN | EPOLLOUT);
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
	return loop_mod(&s->sock_w, EPOLLIN);
}

/* Sends one message, optionally with fds (they go with the first byte).
 * Whatever the socket does not take now is kept and sent on EPOLLOUT. */
static int send_msg(struct sess *s, const void *buf, size_t len, const int *fds, int nfds)
{
	union {
		char buf[CMSG_SPACE(3 * sizeof(int))];
		struct cmsghdr align;
	} cbuf;
	struct iovec iov = { .iov_base = (void *)buf, .iov_len = len };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	ssize_t n = 0;
	char *grown;

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
	/* Keep the rest.  A client that does not read its replies does not get
	 * to make us hold more than a few replies' worth. */
	if (s->out_len - s->out_off + len - (size_t)n > 4 * CTL_MAX_BODY)
		return -ENOBUFS;
	grown = realloc(s->out, s->out_len + len - (size_t)n);
	if (!grown)
		return -ENOMEM;
	memcpy(grown + s->out_len, (const char *)buf + n, len - (size_t)n);
	s->out = grown;
	s->out_len += len - (size_t)n;
	return loop_mod(&s->sock_w, EPOLLIN | EPOLLOUT);
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
	log_notice("session %u (pid %d uid %u): %s", s->id, s->cred.pid, s->cred.uid, text);
	n = ctl_encode_error(buf, sizeof(buf), err, text);
	if (n > 0 && send_msg(s, buf, (size_t)n, NULL, 0) == 0 && s->out) {
		s->close_when_sent = 1;
		return;
	}
	close_session(s, NULL, 0);
}

/* --- joining --- */

/* The JOIN of an application: its endpoint, if its credentials and the job
 * allow. */
static void join(struct sess *s, const char *name, uint32_t rank, uint32_t size)
{
	struct ctl_attached_wire a;
	uint8_t buf[128];
	int fds[3], ret;
	struct ep *ep;
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
		reject(s, -ret, "job %s: cannot join: ferryd has no file descriptors left (%s); try again later",
		       name, strerror(-ret));
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
	ret = n < 0 ? (int)n : send_msg(s, buf, (size_t)n, fds, 3);
	close(fds[0]);
	if (ret < 0) {
		log_notice("session %u: sending the region: %s", s->id, strerror(-ret));
		ep_close(ep);           /* nobody else heard of it yet */
		close_session(s, "cannot set up the endpoint", 0);
		return;
	}
	s->ep = ep;
	s->state = S_ENDPOINT;
	log_info("session %u: pid %d uid %u joined job %s as rank %u of %u", s->id,
		 s->cred.pid, s->cred.uid, name, rank, size);
	/* The job's home node answers with the rank table once every rank has
	 * joined somewhere; then READY goes out (sess_job_ready). */
	sessions.ev->rank_joined(ep->job, rank);
}

void sess_job_ready(struct job *j)
{
	uint8_t buf[64];
	uint32_t nodes = 0;
	ssize_t n;

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

		if (!m || m->ready_sent || m->state != S_ENDPOINT)
			continue;
		m->ready_sent = 1;
		if (send_msg(m, buf, (size_t)n, NULL, 0) < 0)
			close_session(m, "cannot send READY", 0);
	}
	log_info("job %s (uid %u): ready, %u ranks on %u nodes", j->name, j->uid, j->size, nodes);
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
		log_msg(killed ? LOG_WARNING : LOG_INFO, "session %u (pid %d uid %u%s%s): %s", s->id,
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
	close(s->fd);
	s->fd = -1;
	free(s->out);
	s->out = NULL;
	s->state = s->ep ? S_ENDING : S_DEAD;
	sessions.count--;
	sess_stats.sessions_closed++;
	sess_stats.sessions_killed += killed != 0;
	loop_kick();
}

/* Ends what was closed: endpoints whose client broke the protocol, then
 * those of closed sessions (their TX rings were drained in this turn of the
 * loop), then frees dead sessions.  tell: whether the layer above hears of
 * the ranks that leave. */
static void reap(int tell)
{
	struct sess **pp = &sessions.all;

	while (*pp) {
		struct sess *s = *pp;

		if (s->state == S_ENDPOINT && s->ep->failed)
			close_session(s, s->ep->failed, 1);
		if (s->state == S_ENDING) {
			if (tell)
				sessions.ev->rank_left(s->ep->job, s->ep->rank);
			ep_close(s->ep);
			s->ep = NULL;
			s->state = S_DEAD;
		}
		if (s->state == S_DEAD) {
			*pp = s->next;
			free(s);
		} else {
			pp = &s->next;
		}
	}
}

int sess_poll(void)
{
	int work = ep_publish();

	reap(1);
	return work;
}

/* --- control messages --- */

static void handle_msg(struct sess *s, const struct ctl_msg *m)
{
	switch (s->state) {
	case S_HELLO:
		if (m->type != CTL_HELLO) {
			close_session(s, "first message is not HELLO", 1);
			return;
		}
		s->state = m->u.hello.role == CTL_ROLE_ADMIN ? S_ADMIN : S_JOIN;
		return;
	case S_JOIN:
		if (m->type != CTL_JOIN) {
			close_session(s, "expected JOIN", 1);
			return;
		}
		join(s, m->u.join.name, m->u.join.rank, m->u.join.size);
		return;
	case S_ADMIN:
		if (m->type == CTL_QUERY && sessions.query) {
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
			if (n < 0 || send_msg(s, buf, (size_t)n, NULL, 0) < 0)
				close_session(s, "cannot send a reply", 0);
			free(buf);
			return;
		}
		close_session(s, "unexpected message from a tool", 1);
		return;
	default:
		close_session(s, "unexpected control message", 1);
	}
}

static void on_sock(struct loop_watch *w, uint32_t events)
{
	struct sess *s = w->ctx;

	if (s->state >= S_ENDING)
		return;
	if ((events & EPOLLOUT) && send_pending(s) < 0) {
		close_session(s, "cannot send", 0);
		return;
	}
	if (!(events & (EPOLLIN | EPOLLHUP | EPOLLERR)) || s->state >= S_ENDING)
		return;
	for (;;) {
		ssize_t n = recv(s->fd, s->in + s->in_len, sizeof(s->in) - s->in_len, MSG_DONTWAIT);
		struct ctl_msg m;
		ssize_t used = 0;

		if (n == 0) {
			close_session(s, s->state == S_ENDPOINT ? "closed" : NULL, 0);
			return;
		}
		if (n < 0) {
			if (errno == EAGAIN || errno == EINTR)
				return;
			close_session(s, "receive failed", 0);
			return;
		}
		s->in_len += (size_t)n;
		while (s->state < S_ENDING && !s->close_when_sent &&
		       (used = ctl_decode(s->in, s->in_len, &m)) > 0) {
			handle_msg(s, &m);
			memmove(s->in, s->in + used, s->in_len - (size_t)used);
			s->in_len -= (size_t)used;
		}
		if (s->state >= S_ENDING || s->close_when_sent)
			return;
		if (used < 0) {
			close_session(s, "malformed control message", 1);
			return;
		}
		if (s->in_len == sizeof(s->in)) {
			close_session(s, "control message too long", 1);
			return;
		}
	}
}

static void on_client_accept(struct loop_watch *w, uint32_t events)
{
	(void)events;
	for (;;) {
		int fd = accept4(w->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		socklen_t len = sizeof(struct ucred);
		struct sess *s;
		int ret;

		if (fd < 0) {
			if (errno != EAGAIN && errno != EINTR && errno != ECONNABORTED)
				log_rl_warn("accept: %m");
			return;
		}
		if (!sessions.accepting) {
			close(fd);
			continue;
		}
		s = calloc(1, sizeof(*s));
		if (!s) {
			log_rl_warn("out of memory for a session");
			close(fd);
			continue;
		}
		s->fd = fd;
		s->id = ++sessions.next_id;
		if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &s->cred, &len) < 0) {
			log_rl_warn("SO_PEERCRED: %m");
			close(fd);
			free(s);
			continue;
		}
		ret = loop_add(&s->sock_w, fd, EPOLLIN, on_sock, s);
		if (ret < 0) {
			log_rl_warn("epoll add: %s", strerror(-ret));
			close(fd);
			free(s);
			continue;
		}
		s->state = S_HELLO;
		s->next = sessions.all;
		sessions.all = s;
		sessions.count++;
		sess_stats.sessions_opened++;
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
	for (struct sess *s = sessions.all; s; s = s->next)
		close_session(s, NULL, 0);
	reap(0);
	if (sessions.listen_fd >= 0) {
		loop_del(&sessions.listen_w);
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
