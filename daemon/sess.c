/* daemon/sess.c - see sess.h. */
#include "sess.h"
#include "cluster.h"
#include "fwd.h"
#include "job.h"
#include "log.h"
#include "loop.h"
#include "recq.h"
#include "../proto/ctl.h"
#include "../proto/ring.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/membarrier.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

enum sess_state { S_HELLO, S_JOIN, S_ENDPOINT, S_ADMIN, S_DEAD };

/* Records a TX ring may hand over per poll round, so that one busy sender
 * cannot starve the others. */
#define DRAIN_BUDGET 512

struct sess {
	struct sess *next;              /* all sessions, dead ones until reaped */
	uint32_t id;
	int state;
	int fd;
	struct loop_watch sock_w;
	struct ucred cred;
	uint8_t in[512];                /* partial control message */
	size_t in_len;
	char *out;                      /* unsent reply bytes */
	size_t out_len, out_off;
	int close_when_sent;

	/* endpoint */
	struct job *job;
	uint32_t rank;
	void *region;
	size_t region_bytes;
	int efd_client;                 /* we write: RX records or TX room */
	int efd_daemon;                 /* client writes: TX records or RX room */
	struct loop_watch efd_w;
	struct ring tx, rx;
	struct recq pending;            /* items waiting for room in rx */
	struct sess *blocked_on;        /* we stopped draining tx: its queue is full */
	struct peer *blocked_peer;      /* ... or the link to this peer takes no more */
	int rx_dirty;                   /* records written to rx, not yet published */
	int ready_sent;                 /* READY went out */
	uint32_t done_step;             /* the step this rank last ended */
	uint64_t items_sent, items_received;
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
	uint32_t nsess, nendpoints;
	uint64_t region_bytes;
	sess_query_fn *query;
	int membarrier;                 /* we fence for clients before sleeping */
} S = { .listen_fd = -1 };

static void wake(int efd)
{
	uint64_t one = 1;

	/* EAGAIN means the counter is already huge: the peer will wake anyway. */
	if (write(efd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		log_rl_warn("eventfd write: %m");
}

/* --- output --- */

static void close_session(struct sess *s, const char *why, int killed);

static int flush_out(struct sess *s)
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

/* --- delivery --- */

static int deliver_slow(struct sess *d, const struct proto_rec *rec, const void *payload, int force);

/* Writes one record into d's RX ring, or queues it.  Returns 0, or -EAGAIN if
 * d's queue (or daemon memory) is full: the caller must stop and retry later.
 * With force the queue takes it regardless (small control records).  The
 * common case, an item and room in the ring, is inline. */
static inline int deliver_rec(struct sess *d, const struct proto_rec *rec, const void *payload, int force)
{
	struct proto_rec *slot;

	if (__builtin_expect(rec->kind == PROTO_REC_ITEM && !d->pending.count, 1) &&
	    (slot = ring_reserve_fast(&d->rx, rec->len)) != NULL) {
		memcpy(slot, rec, sizeof(*rec));
		proto_copy((uint8_t *)(slot + 1), payload, rec->len);
		d->rx_dirty = 1;
		d->items_received++;
		d->job->ringed++;
		sess_stats.items_delivered++;
		return 0;
	}
	return deliver_slow(d, rec, payload, force);
}

__attribute__((noinline))
static int deliver_slow(struct sess *d, const struct proto_rec *rec, const void *payload, int force)
{
	uint64_t fp = ring_footprint(rec->len);

	if (!d->pending.count) {
		struct proto_rec *slot = ring_reserve_fast(&d->rx, rec->len);
		int ret = slot ? 0 : ring_reserve(&d->rx, rec->len, &slot);

		if (ret == 0) {
			int item = rec->kind == PROTO_REC_ITEM;

			memcpy(slot, rec, sizeof(*rec));
			proto_copy((uint8_t *)(slot + 1), payload, rec->len);
			d->rx_dirty = 1;
			d->items_received += item;
			d->job->ringed += item;
			sess_stats.items_delivered += item;
			return 0;
		}
		if (ret == -EPROTO) {
			close_session(d, "client published an impossible RX tail", 1);
			return 0;       /* nothing to deliver to any more */
		}
	}
	if (!force && d->pending.bytes + fp > S.conf->pending_bytes)
		return -EAGAIN;
	if (recq_push(&d->pending, rec, payload, force ? UINT64_MAX : S.conf->memory_bytes) < 0)
		return -EAGAIN;
	sess_stats.items_queued += rec->kind == PROTO_REC_ITEM;
	return 0;
}

static int deliver(struct sess *d, const struct proto_rec *rec, const void *payload)
{
	return deliver_rec(d, rec, payload, 0);
}

/* Moves queued records into d's RX ring as far as it has room. */
static int flush_pending(struct sess *d)
{
	const struct proto_rec *rec;
	const void *payload;
	int moved = 0;

	while (recq_peek(&d->pending, &rec, &payload)) {
		struct proto_rec *slot;
		int ret = ring_reserve(&d->rx, rec->len, &slot);

		if (ret == -EAGAIN)
			break;
		if (ret < 0) {
			close_session(d, "client published an impossible RX tail", 1);
			return 1;
		}
		memcpy(slot, rec, sizeof(*rec) + rec->len);
		d->rx_dirty = 1;
		if (rec->kind == PROTO_REC_ITEM) {
			d->items_received++;
			d->job->ringed++;
			sess_stats.items_delivered++;
		}
		recq_pop(&d->pending);
		moved = 1;
	}
	return moved;
}

/* An item of rank s->rank: to a local endpoint, or toward its node.  Returns
 * 0 (taken, delivered or dropped) or -EAGAIN (try again later). */
static int route_item(struct sess *s, struct proto_rec *rec, const void *payload)
{
	struct job *j = s->job;
	uint32_t node = j->ranks[rec->dst].node;
	struct sess *d = j->ranks[rec->dst].sess;

	rec->src = s->rank;
	if (d) {
		if (deliver(d, rec, payload) < 0) {
			s->blocked_on = d;
			return -EAGAIN;
		}
	} else if (node != JOB_NO_NODE && node != S.self) {
		struct wire_item it = {
			.len = rec->len,
			.flags = rec->flags & PROTO_REC_MORE ? WIRE_ITEM_MORE : 0,
			.channel = rec->channel,
			.node = node,
			.job = j->id,
			.dst = rec->dst,
			.src = rec->src,
		};
		uint8_t *slot = fwd_reserve(node, rec->len);

		if (slot) {
			wire_encode_item(slot, &it, payload);
		} else if (fwd_item(&it, payload, -1, 0) < 0) {
			s->blocked_peer = fwd_next_peer(node);
			return -EAGAIN;
		}
	} else {
		/* The rank left: the item is accounted as arrived, so that
		 * steps can still end. */
		j->items_dropped++;
		j->ringed++;
		sess_stats.items_dropped++;
		log_rl_warn("job %s: rank %u left; item from rank %u dropped", j->name, rec->dst, s->rank);
	}
	j->sent++;
	return 0;
}

/* Takes records out of s's TX ring and delivers them.  Returns 1 if it did
 * anything. */
static int drain_tx(struct sess *s)
{
	struct job *j = s->job;
	int work = 0;

	if (s->blocked_on) {
		if (s->blocked_on->state == S_ENDPOINT &&
		    s->blocked_on->pending.bytes > S.conf->pending_bytes / 2)
			return 0;
		s->blocked_on = NULL;
	}
	if (s->blocked_peer) {
		if (fwd_peer_full(s->blocked_peer))
			return 0;
		s->blocked_peer = NULL;
	}
	for (int i = 0; i < DRAIN_BUDGET && s->state == S_ENDPOINT; i++) {
		struct proto_rec rec;
		const void *payload;
		int ret = ring_peek_fast(&s->tx, &rec, &payload);

		if (!ret)
			ret = ring_peek(&s->tx, &rec, &payload);
		if (ret == 0)
			break;
		if (ret < 0) {
			close_session(s, "garbage in TX ring", 1);
			return 1;
		}
		switch (rec.kind) {
		case PROTO_REC_ITEM:
			if (rec.dst >= j->size) {
				close_session(s, "item for a rank outside the job", 1);
				return 1;
			}
			if (!j->ready) {
				close_session(s, "item before the job was ready", 1);
				return 1;
			}
			if (route_item(s, &rec, payload) < 0) {
				sess_stats.stalls++;
				goto out;
			}
			s->items_sent++;
			sess_stats.items_in++;
			sess_stats.bytes_in += rec.len;
			break;
		case PROTO_REC_FLUSH:
			sess_stats.flushes++;
			fwd_flush_all(FWD_FLUSH_EXPLICIT);
			break;
		case PROTO_REC_DONE:
			/* The end of this rank's step: its items so far are
			 * counted in j->sent; send what is buffered. */
			if (s->done_step != j->step) {
				s->done_step = j->step;
				j->done++;
			}
			fwd_flush_all(FWD_FLUSH_EXPLICIT);
			break;
		default:
			close_session(s, "record kind not allowed in a TX ring", 1);
			return 1;
		}
		ring_consume(&s->tx, &rec);
		work = 1;
	}
out:
	if (s->state == S_ENDPOINT && ring_release(&s->tx))
		wake(s->efd_client);
	return work;
}

int sess_deliver_item(const struct wire_item *it, const void *payload)
{
	struct job *j = job_by_id(it->job);
	struct sess *d = j && it->dst < j->size ? j->ranks[it->dst].sess : NULL;
	struct proto_rec rec = {
		.len = it->len,
		.kind = PROTO_REC_ITEM,
		.flags = it->flags & WIRE_ITEM_MORE ? PROTO_REC_MORE : 0,
		.channel = it->channel,
		.dst = it->dst,
		.src = it->src,
	};

	if (!d || it->src >= j->size) {
		if (j) {
			j->items_dropped++;
			j->ringed++;
		}
		sess_stats.items_dropped++;
		log_rl_warn("item for job %u rank %u, which is not attached here; dropped", it->job, it->dst);
		return 0;
	}
	return deliver(d, &rec, payload);
}

void sess_job_ready(struct job *j)
{
	uint8_t buf[64];
	uint32_t nodes = 0;
	ssize_t n;

	/* Nodes the job spans, for the client's information. */
	uint8_t *seen = calloc(S.conf->nnodes / 8 + 1, 1);

	for (uint32_t r = 0; seen && r < j->size; r++) {
		uint32_t node = j->ranks[r].node;

		if (node < S.conf->nnodes && !(seen[node / 8] & (1u << (node % 8)))) {
			seen[node / 8] |= (uint8_t)(1u << (node % 8));
			nodes++;
		}
	}
	free(seen);
	n = ctl_encode_ready(buf, sizeof(buf), j->size, nodes);
	for (uint32_t r = 0; r < j->size; r++) {
		struct sess *m = j->ranks[r].sess;

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
	struct sess *s = j && rank < j->size ? j->ranks[rank].sess : NULL;

	if (!s)
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

void sess_step_complete(struct job *j, uint32_t step)
{
	struct proto_rec rec = { .kind = PROTO_REC_STEP, .dst = step };

	for (uint32_t r = 0; r < j->size; r++) {
		struct sess *d = j->ranks[r].sess;

		if (d && d->state == S_ENDPOINT)
			deliver_slow(d, &rec, NULL, 1);
	}
}

/* --- endpoints --- */

static void on_efd(struct loop_watch *w, uint32_t events)
{
	struct sess *s = w->ctx;
	uint64_t n;

	(void)events;
	if (s->state != S_ENDPOINT)
		return;
	if (read(s->efd_daemon, &n, sizeof(n)) < 0 && errno != EAGAIN)
		log_rl_warn("session %u: eventfd read: %m", s->id);
	loop_kick();
}

static size_t page_align(size_t n)
{
	return (n + 4095) & ~(size_t)4095;
}

static int make_endpoint(struct sess *s, const char *name, uint32_t rank, uint32_t size)
{
	struct ctl_attached_wire a = { 0 };
	uint64_t ring = S.conf->ring_bytes;
	uint8_t buf[128];
	int memfd, fds[3], ret;
	ssize_t n;

	if (S.nendpoints >= S.conf->max_clients) {
		reject(s, EUSERS, "too many clients (limits.max_clients = %u)", S.conf->max_clients);
		return -EUSERS;
	}
	if (size > SESS_MAX_RANKS) {
		reject(s, EINVAL, "job %s: size %u is above the maximum of %u ranks", name, size, SESS_MAX_RANKS);
		return -EINVAL;
	}
	ret = job_join(s->cred.uid, name, size, rank, S.self, cluster_home(s->cred.uid, name), s, &s->job);
	if (ret == -EINVAL) {
		struct job *j;

		for (j = job_first(); j && (j->uid != s->cred.uid || strcmp(j->name, name)); j = j->next)
			;
		reject(s, EINVAL, "job %s has %u ranks, this process asked for %u", name, j ? j->size : 0, size);
		return ret;
	}
	if (ret == -EADDRINUSE) {
		reject(s, EADDRINUSE, "job %s: rank %u is already attached", name, rank);
		return ret;
	}
	if (ret < 0) {
		reject(s, -ret, "job %s: cannot join: %s", name, strerror(-ret));
		return ret;
	}
	s->rank = rank;

	a.tx_off = 0;
	a.tx_size = ring;
	a.rx_off = page_align(ring_bytes(ring));
	a.rx_size = ring;
	a.region_bytes = a.rx_off + page_align(ring_bytes(ring));
	a.node = S.self;
	a.session = s->id;
	a.flags = S.membarrier ? CTL_ATTACHED_MEMBARRIER : 0;

	memfd = memfd_create("ferry-endpoint", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (memfd < 0) {
		ret = -errno;
		log_err("session %u: memfd_create: %m", s->id);
		goto err_job;
	}
	if (ftruncate(memfd, (off_t)a.region_bytes) < 0) {
		ret = -errno;
		log_err("session %u: ftruncate %llu bytes: %m", s->id, (unsigned long long)a.region_bytes);
		goto err_memfd;
	}
	/* The client could otherwise shrink the file under our mapping and make
	 * our next access fault with SIGBUS. */
	if (fcntl(memfd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0) {
		ret = -errno;
		log_err("session %u: sealing memfd: %m", s->id);
		goto err_memfd;
	}
	s->region = mmap(NULL, a.region_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
	if (s->region == MAP_FAILED) {
		ret = -errno;
		s->region = NULL;
		log_err("session %u: mmap %llu bytes: %m", s->id, (unsigned long long)a.region_bytes);
		goto err_memfd;
	}
	s->region_bytes = a.region_bytes;
	ring_attach(&s->tx, (uint8_t *)s->region + a.tx_off, a.tx_size, 1);
	ring_attach(&s->rx, (uint8_t *)s->region + a.rx_off, a.rx_size, 1);

	s->efd_client = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	s->efd_daemon = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (s->efd_client < 0 || s->efd_daemon < 0) {
		ret = -errno;
		log_err("session %u: eventfd: %m", s->id);
		goto err_efd;
	}
	ret = loop_add(&s->efd_w, s->efd_daemon, EPOLLIN, on_efd, s);
	if (ret < 0) {
		log_err("session %u: epoll add: %s", s->id, strerror(-ret));
		goto err_efd;
	}
	n = ctl_encode_attached(buf, sizeof(buf), &a);
	fds[0] = memfd;
	fds[1] = s->efd_client;
	fds[2] = s->efd_daemon;
	ret = n < 0 ? (int)n : send_msg(s, buf, (size_t)n, fds, 3);
	if (ret < 0) {
		log_notice("session %u: sending the region: %s", s->id, strerror(-ret));
		goto err_watch;
	}
	close(memfd);
	S.region_bytes += s->region_bytes;
	S.nendpoints++;
	s->state = S_ENDPOINT;
	log_info("session %u: pid %d uid %u joined job %s as rank %u of %u", s->id,
		 s->cred.pid, s->cred.uid, name, rank, size);

	/* The job's home node answers with the rank table once every rank has
	 * joined somewhere; then READY goes out (sess_job_ready). */
	cluster_join(s->job, rank);
	return 0;

err_watch:
	loop_del(&s->efd_w);
err_efd:
	if (s->efd_client >= 0)
		close(s->efd_client);
	if (s->efd_daemon >= 0)
		close(s->efd_daemon);
	s->efd_client = s->efd_daemon = -1;
	munmap(s->region, s->region_bytes);
	s->region = NULL;
err_memfd:
	close(memfd);
err_job:
	job_leave(s->job, rank);        /* the home never heard of it */
	s->job = NULL;
	close_session(s, "cannot set up the endpoint", 0);
	return ret;
}

static void release_endpoint(struct sess *s)
{
	if (s->pending.count) {
		sess_stats.items_dropped += s->pending.count;
		s->job->items_dropped += s->pending.count;
		s->job->ringed += s->pending.count;
		log_notice("session %u: %llu queued items for rank %u dropped", s->id,
			   (unsigned long long)s->pending.count, s->rank);
	}
	recq_clear(&s->pending);
	for (struct sess *o = S.all; o; o = o->next)
		if (o->blocked_on == s)
			o->blocked_on = NULL;
	{
		struct job *j = s->job;
		uid_t uid = j->uid;
		uint32_t size = j->size, home = j->home;
		char name[sizeof(j->name)];

		memcpy(name, j->name, sizeof(name));
		job_leave(j, s->rank);
		cluster_leave(uid, name, size, s->rank, home);
	}
	s->job = NULL;
	loop_del(&s->efd_w);
	close(s->efd_client);
	close(s->efd_daemon);
	munmap(s->region, s->region_bytes);
	S.region_bytes -= s->region_bytes;
	s->region = NULL;
	S.nendpoints--;
}

/* Ends a session.  why != NULL is logged; killed counts it as misbehaviour.
 * The struct stays on the list as S_DEAD until sess_poll reaps it, because
 * epoll may still hand us events that point at it in this round. */
static void close_session(struct sess *s, const char *why, int killed)
{
	if (s->state == S_DEAD)
		return;
	if (why)
		log_msg(killed ? LOG_WARNING : LOG_INFO, "session %u (pid %d uid %u%s%s): %s", s->id,
			s->cred.pid, s->cred.uid, s->job ? " job " : "", s->job ? s->job->name : "", why);
	if (s->state == S_ENDPOINT) {
		/* A client that exits right after sending: take what it left in
		 * its TX ring, as far as the destinations have room. */
		if (!killed)
			drain_tx(s);
		release_endpoint(s);
	}
	loop_del(&s->sock_w);
	close(s->fd);
	s->fd = -1;
	free(s->out);
	s->out = NULL;
	s->state = S_DEAD;
	S.nsess--;
	sess_stats.sessions_closed++;
	sess_stats.sessions_killed += killed != 0;
}

static void reap(void)
{
	struct sess **pp = &S.all;

	while (*pp) {
		struct sess *s = *pp;

		if (s->state == S_DEAD) {
			*pp = s->next;
			free(s);
		} else {
			pp = &s->next;
		}
	}
}

/* --- control messages --- */

static void handle(struct sess *s, const struct ctl_msg *m)
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
		make_endpoint(s, m->u.join.name, m->u.join.rank, m->u.join.size);
		return;
	case S_ADMIN:
		if (m->type == CTL_QUERY && S.query) {
			char *text = NULL, *buf;
			size_t len = 0;
			FILE *out = open_memstream(&text, &len);
			ssize_t n;
			int ret;

			if (!out) {
				close_session(s, "out of memory for a reply", 0);
				return;
			}
			ret = S.query(m->u.query.what, m->u.query.arg, &s->cred, out);
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

	if (s->state == S_DEAD)
		return;
	if ((events & EPOLLOUT) && flush_out(s) < 0) {
		close_session(s, "cannot send", 0);
		return;
	}
	if (!(events & (EPOLLIN | EPOLLHUP | EPOLLERR)) || s->state == S_DEAD)
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
		while (s->state != S_DEAD && !s->close_when_sent &&
		       (used = ctl_decode(s->in, s->in_len, &m)) > 0) {
			handle(s, &m);
			memmove(s->in, s->in + used, s->in_len - (size_t)used);
			s->in_len -= (size_t)used;
		}
		if (s->state == S_DEAD || s->close_when_sent)
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

static void on_accept(struct loop_watch *w, uint32_t events)
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
		if (!S.accepting) {
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
		s->efd_client = s->efd_daemon = -1;
		s->id = ++S.next_id;
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
		s->next = S.all;
		S.all = s;
		S.nsess++;
		sess_stats.sessions_opened++;
	}
}

/* --- loop hooks --- */

int sess_poll(void)
{
	int work = 0;

	reap();
	for (struct sess *s = S.all; s; s = s->next) {
		if (s->state != S_ENDPOINT)
			continue;
		if (s->pending.count)
			work |= flush_pending(s);
		if (s->state == S_ENDPOINT)
			work |= drain_tx(s);
	}
	for (struct sess *s = S.all; s; s = s->next) {
		if (s->state == S_ENDPOINT && s->rx_dirty) {
			s->rx_dirty = 0;
			if (ring_publish(&s->rx))
				wake(s->efd_client);
		}
	}
	return work;
}

static int membarrier(int cmd)
{
	return (int)syscall(SYS_membarrier, cmd, 0, 0);
}

int sess_sleep_prepare(void)
{
	int armed = 0;

	for (struct sess *s = S.all; s; s = s->next) {
		const struct proto_rec *rec;
		const void *payload;

		if (s->state != S_ENDPOINT)
			continue;
		/* A blocked sender makes progress only when its destination's
		 * client frees RX room, which the check below arms. */
		if (!s->blocked_on && !s->blocked_peer) {
			if (S.membarrier) {
				ring_consumer_arm(&s->tx);
				armed = 1;
			} else if (ring_consumer_sleep(&s->tx)) {
				return 1;
			}
		}
		if (recq_peek(&s->pending, &rec, &payload) && ring_producer_sleep(&s->rx, rec->len))
			return 1;
	}
	if (!armed)
		return 0;
	/* The other half of the clients' fenceless publish (proto/ring.h). */
	if (membarrier(MEMBARRIER_CMD_GLOBAL_EXPEDITED) < 0) {
		log_err("membarrier: %m; clients attached from now on fence themselves");
		S.membarrier = 0;
		return 1;       /* look again, the slow way */
	}
	for (struct sess *s = S.all; s; s = s->next)
		if (s->state == S_ENDPOINT && !s->blocked_on && !s->blocked_peer && ring_consumer_check(&s->tx))
			return 1;
	return 0;
}

void sess_sleep_done(void)
{
	for (struct sess *s = S.all; s; s = s->next) {
		if (s->state != S_ENDPOINT)
			continue;
		ring_consumer_awake(&s->tx);
		ring_producer_awake(&s->rx);
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
	snprintf(S.sock_path, sizeof(S.sock_path), "%s", sa.sun_path);
	S.own_socket = 1;
	return fd;
}

int sess_init(const struct conf *c, uint32_t self, int listen_fd, sess_query_fn *query)
{
	int ret;

	S.conf = c;
	S.self = self;
	S.query = query;
	/* Register so that clients' membarrier calls reach us too, and offer
	 * clients the fenceless publish if the kernel has it. */
	S.membarrier = membarrier(MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED) == 0;
	if (!S.membarrier)
		log_info("membarrier not available (%m): clients will fence every publish");
	if (listen_fd < 0) {
		listen_fd = listen_on(c->runtime_dir);
		if (listen_fd < 0)
			return listen_fd;
	} else {
		/* systemd passes a blocking socket; on_accept accepts until
		 * EAGAIN and must not block in the last accept. */
		int fl = fcntl(listen_fd, F_GETFL);

		if (fl < 0 || fcntl(listen_fd, F_SETFL, fl | O_NONBLOCK) < 0) {
			ret = -errno;
			log_err("making the inherited socket non-blocking: %m");
			return ret;
		}
		log_info("using the listening socket systemd passed");
	}
	S.listen_fd = listen_fd;
	ret = loop_add(&S.listen_w, listen_fd, EPOLLIN, on_accept, NULL);
	if (ret < 0) {
		log_err("epoll add listening socket: %s", strerror(-ret));
		sess_fini();
		return ret;
	}
	S.accepting = 1;
	return 0;
}

void sess_fini(void)
{
	for (struct sess *s = S.all; s; s = s->next)
		close_session(s, NULL, 0);
	reap();
	if (S.listen_fd >= 0) {
		loop_del(&S.listen_w);
		close(S.listen_fd);
		S.listen_fd = -1;
	}
	if (S.own_socket)
		unlink(S.sock_path);
	S.own_socket = 0;
}

void sess_stop_accepting(void)
{
	S.accepting = 0;
}

int sess_busy(void)
{
	for (struct sess *s = S.all; s; s = s->next) {
		if (s->state != S_ENDPOINT)
			continue;
		if (s->pending.count ||
		    atomic_load_explicit(&s->tx.sh->head, memory_order_acquire) != s->tx.tail)
			return 1;
	}
	return 0;
}

uint32_t sess_count(void)
{
	return S.nsess;
}

uint32_t sess_endpoints(void)
{
	return S.nendpoints;
}

uint64_t sess_region_bytes(void)
{
	return S.region_bytes;
}

void sess_write_status(FILE *out, uid_t uid)
{
	uint32_t shown = 0;

	for (struct job *j = job_first(); j; j = j->next) {
		if (uid != 0 && j->uid != uid)
			continue;
		shown++;
		fprintf(out, "job %s uid %u: %u of %u ranks attached here, %s, id %u, home node %u, step %u; "
			"items sent %llu, arrived %llu, dropped %llu\n",
			j->name, j->uid, j->joined, j->size, j->ready ? "ready" : "waiting for ranks", j->id,
			j->home, j->step, (unsigned long long)j->sent, (unsigned long long)j->ringed,
			(unsigned long long)j->items_dropped);
		for (uint32_t r = 0; r < j->size; r++) {
			struct sess *s = j->ranks[r].sess;

			if (!s)
				continue;
			fprintf(out, "  rank %u: pid %d, session %u, sent %llu, received %llu, queued %llu%s\n",
				r, s->cred.pid, s->id, (unsigned long long)s->items_sent,
				(unsigned long long)s->items_received, (unsigned long long)s->pending.count,
				s->blocked_on ? ", sender stalled" : "");
			fprintf(out, "    rings: tx %llu of %llu bytes used, rx %llu of %llu bytes used\n",
				(unsigned long long)(atomic_load(&s->tx.sh->head) - s->tx.tail),
				(unsigned long long)s->tx.size,
				(unsigned long long)(s->rx.head - atomic_load(&s->rx.sh->tail)),
				(unsigned long long)s->rx.size);
		}
	}
	if (!shown)
		fprintf(out, "no jobs%s\n", uid ? " of yours" : "");
}
