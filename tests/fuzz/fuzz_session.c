/* tests/fuzz/fuzz_session.c - the control-socket sessions (daemon/local/session.c
 * with the endpoints, jobs and per-user accounting under them) fed by
 * arbitrary clients over real Unix sockets.
 *
 * The daemon runs with small limits (3 endpoints, 4 connections without an
 * endpoint, 2 jobs, short timeouts).  The input is a script, a byte an
 * operation: connect a client, have a client send arbitrary bytes, a
 * well-formed HELLO, JOIN (asking for direct rings or not) or QUERY
 * (fields from the input; a query may ask for a reply of up to 300 KB, more
 * than a socket holds, or be refused), read what it was sent (closing the
 * fds that came with it), or close; turn the daemon's loop once; let the
 * timeouts pass; tell the sessions a job is ready or that its home refused
 * a rank.  Op bytes from 240 on (the ops above are their value % 12
 * below that) speak the collectives (daemon/coll/coll.c runs under the
 * sessions, its way to other nodes stubbed): MEM with a memfd the harness
 * makes (sealed or not, shorter than it says, or no fd at all) filled
 * with small numbers (counts and displacements), COLL of any kind with
 * buffers in those regions, GROUP_FREE, LAYOUT, MEM_FREE, a collective
 * piece from another node (coll_rx), the job's layout (ranks not here
 * on node 1), node 1 lost (every job fails, as the home would say).  Once
 * every client has gone, the jobs fail as their ranks left (the cluster
 * layer's FAIL, which its stubs here never send).  Besides what the sanitizers catch, it aborts when a limit is
 * exceeded, when a session holds more than one reply, or when anything (a
 * session, an endpoint, a job, its direct rings, a user's count, a reply)
 * is left once every client has gone.  A COLL may go on the client's post
 * page instead of its socket (proto/post.h: as written, with a byte
 * changed, longer than a slot or shorter than a header, posted past the
 * slots, or ahead of what was read of the socket).  FUZZ_SESSION_STATS=1 says at exit
 * how many collective posts, pieces and failures the inputs made.
 */
#include "../../daemon/cluster/cluster.h"
#include "../../daemon/cluster/costs.h"
#include "../../daemon/coll/coll.h"
#include "../../daemon/core/conf.h"
#include "../../daemon/core/log.h"
#include "../../daemon/core/loop.h"
#include "../../daemon/local/direct.h"
#include "../../daemon/local/endpoint.h"
#include "../../daemon/local/job.h"
#include "../../daemon/local/session.h"
#include "../../daemon/local/user.h"
#include "../../daemon/fwd/ctlq.h"
#include "../../proto/coll.h"
#include "../../proto/ctl.h"
#include "../../proto/wire.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define MAX_CLIENTS 8

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct conf conf;
static char sock_path[PATH_MAX];
static int clients[MAX_CLIENTS];
static uint32_t coll_seq[MAX_CLIENTS];         /* the operations each client posted */
static int rounds_left;

static const uint8_t *in;
static size_t left;

static uint8_t next(void)
{
	if (!left)
		return 0;
	left--;
	return *in++;
}

static int query(uint32_t what, uint32_t arg, const struct ucred *cred, FILE *out)
{
	(void)cred;
	if (what == CTL_Q_DEBUG)
		return -EPERM;
	if (what == CTL_Q_STATS)
		for (uint32_t i = 0; i < arg % 300000; i++)
			fputc('x', out);
	else
		fprintf(out, "status %u\n", arg);
	return 0;
}

/* The jobs the input made, held until its end (when every other node is
 * lost: what waits for them then fails; a job's ranks here may have left
 * long before, its collectives still holding it). */
#define SEEN_JOBS 64
static struct job *seen[SEEN_JOBS];
static int nseen;

static void rank_joined(struct job *j, uint32_t rank)
{
	(void)rank;
	for (int i = 0; i < nseen; i++)
		if (seen[i] == j)
			return;
	if (nseen < SEEN_JOBS) {
		job_hold(j);
		seen[nseen++] = j;
	}
}

static void job_failed(struct job *j, int err, uint32_t coll_ok, const char *why);

/* A rank left: its node's LEAVE makes the home fail the job after the
 * operations that node started (cluster.c), as here at once. */
static void rank_left(struct ep *ep)
{
	if (ep->job)
		job_failed(ep->job, EPIPE, ep->job->coll_started, "a rank left (fuzz_session)");
}

static const struct sess_events events = { .rank_joined = rank_joined, .rank_left = rank_left,
					    .coll_post = coll_post, .coll_group_free = coll_group_free };

/* ---- the cluster layer, as the collective engine sees it ---- */

static cluster_coll_rx_fn *coll_rx;
static struct {
	uint64_t posts, page_posts, mems, pieces_in, pieces_out, job_fails, holds_out, holds_in;
} stats;

void cluster_set_coll_rx(cluster_coll_rx_fn *fn)
{
	coll_rx = fn;
}

/* What the job's home answers, at once: the job failed (cluster.h). */
static void job_failed(struct job *j, int err, uint32_t coll_ok, const char *why)
{
	if (j->failed) {
		/* as cluster.c's fail_local: a later failure may only lower
		 * what may still complete */
		if (coll_ok < j->coll_ok)
			j->coll_ok = coll_ok;
		return;
	}
	j->failed = err;
	j->coll_ok = coll_ok;
	j->coll_groups_fail = err == EPIPE ? 0 : err;
	snprintf(j->fail_text, sizeof(j->fail_text), "%s", why);
}

void cluster_job_fail(struct job *j, int err, uint32_t coll_ok, const char *why)
{
	stats.job_fails++;
	job_failed(j, err, coll_ok, why);
}

static void check(int ok, const char *what);

void ctlq_send(uint32_t node, uint32_t type, const void *payload, uint32_t len)
{
	struct wire_coll_piece h;
	int64_t n = type == WIRE_CTL_COLL ? wire_coll_piece_decode(payload, len, &h) : -1;
	int on;

	(void)node;
	/* what the engine sends another node must decode there */
	if (type == WIRE_CTL_COLL && n < 0)
		check(0, "the engine sent a malformed control piece");
	if (n >= 0 && h.msg == WIRE_COLL_MSG_HOLD) {
		check(wire_coll_hold_decode(&h, (const uint8_t *)payload + sizeof(h), (uint64_t)n, &on) == 0,
		      "the engine sent a malformed HOLD");
		stats.holds_out += on;
	}
}

int ctlq_send_job(uint32_t node, uint32_t job, uint8_t gen, const struct iovec *iov, int niov, uint32_t len)
{
	(void)node;
	(void)job;
	(void)gen;
	(void)iov;
	(void)niov;
	(void)len;
	stats.pieces_out++;
	return 0;
}

void ctlq_flush_sent(void)
{
}

/* The loop's poll hook: ends the loop on its second call, so that
 * loop_run handles one batch of events. */
static int poll_once(void)
{
	if (rounds_left-- <= 0)
		loop_stop();
	return sess_take_posts() | coll_poll() | sess_poll() | 1;      /* (ferryd's order) */
}

static void turn(void)
{
	rounds_left = 1;
	loop_run();
}

static void check(int ok, const char *what)
{
	if (!ok) {
		fprintf(stderr, "fuzz_session: %s\n", what);
		abort();
	}
}

static void check_limits(void)
{
	check(user_total.unjoined <= conf.max_unjoined, "more connections without an endpoint than max_unjoined");
	check(user_total.endpoints <= conf.max_clients, "more endpoints than max_clients");
	check(user_total.jobs <= conf.user_jobs, "more jobs than user_jobs (one user)");
	check(sess_out_bytes() <= MAX_CLIENTS * (sizeof(struct ctl_hdr) + CTL_MAX_BODY),
	      "a session holds more than one reply");
}

static char dir[] = "/tmp/fuzz_session.XXXXXX";

/* At exit: the socket and its directory go. */
static void teardown(void)
{
	if (getenv("FUZZ_SESSION_STATS"))
		fprintf(stderr, "fuzz_session: %llu collective posts (%llu on post pages), %llu regions, %llu pieces in (%llu HOLDs), %llu "
			"out, %llu HOLDs sent, %llu job failures asked for\n", (unsigned long long)stats.posts,
			(unsigned long long)stats.page_posts,
			(unsigned long long)stats.mems, (unsigned long long)stats.pieces_in,
			(unsigned long long)stats.holds_in, (unsigned long long)stats.pieces_out,
			(unsigned long long)stats.holds_out, (unsigned long long)stats.job_fails);
	sess_fini();
	coll_fini();
	costs_fini();
	ep_fini();
	loop_fini();
	conf_free(&conf);
	rmdir(dir);
}

static int setup(void)
{
	static const struct loop_hooks hooks = { .poll = poll_once };
	char text[512], err[256];

	/* Quiet, unless FUZZ_SESSION_LOG is set (to see what a script does). */
	log_init("fuzz_session", getenv("FUZZ_SESSION_LOG") ? LOG_DEBUG : LOG_EMERG);
	if (!mkdtemp(dir))
		return -1;
	snprintf(text, sizeof(text),
		 "limits: { max_clients = 3; user_clients = 3; max_unjoined = 4; user_unjoined = 4; user_jobs = 2;"
		 " ring_bytes = 262144; pending_bytes = 262144; memory_bytes = 1048576;"
		 " join_timeout_ms = 10; admin_idle_ms = 20; };\n"
		 "daemon: { runtime_dir = \"%s\"; state_dir = \"\"; };\n", dir);
	if (conf_load_string(&conf, text, "fuzz.conf", err, sizeof(err)) < 0) {
		fprintf(stderr, "%s\n", err);
		return -1;
	}
	snprintf(sock_path, sizeof(sock_path), "%s/%s", dir, SESS_SOCKET_NAME);
	/* A long spin: the loop never blocks in epoll_wait. */
	if (loop_init(1000000, &hooks) < 0 || ep_init(&conf, 0) < 0 ||
	    sess_init(&conf, 0, -1, query, &events) < 0 || coll_init(&conf, 0) < 0 || costs_init(&conf) < 0)
		return -1;
	for (int i = 0; i < MAX_CLIENTS; i++)
		clients[i] = -1;
	atexit(teardown);
	return 0;
}

static void client_connect(void)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };

	for (int i = 0; i < MAX_CLIENTS; i++) {
		if (clients[i] >= 0)
			continue;
		snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", sock_path);
		clients[i] = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		if (clients[i] >= 0 && connect(clients[i], (struct sockaddr *)&sa, sizeof(sa)) < 0) {
			close(clients[i]);
			clients[i] = -1;
		}
		return;
	}
}

static void client_send(int c, const void *buf, size_t len)
{
	if (clients[c] >= 0 && len)
		(void)send(clients[c], buf, len, MSG_NOSIGNAL | MSG_DONTWAIT);
}

/* Reads what the daemon sent, closing the fds that came with it. */
static void client_read(int c)
{
	for (;;) {
		union {
			char buf[CMSG_SPACE(8 * sizeof(int))];
			struct cmsghdr align;
		} cbuf;
		static char buf[65536];
		struct iovec iov = { .iov_base = buf, .iov_len = sizeof(buf) };
		struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf.buf,
				     .msg_controllen = sizeof(cbuf.buf) };
		ssize_t n = clients[c] >= 0 ? recvmsg(clients[c], &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC) : -1;

		if (n <= 0)
			return;
		for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm)) {
			size_t nfds = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);

			for (size_t i = 0; cm->cmsg_type == SCM_RIGHTS && i < nfds; i++) {
				int fd;

				memcpy(&fd, CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
				close(fd);
			}
		}
	}
}

/* MEM: region id of bytes, with a memfd of u64s (seed + 3i) % 9 (counts
 * and displacements a collective may take); how 0 sealed, 1 unsealed, 2
 * shorter than it says, 3 no fd at all. */
static void client_mem(int c, uint32_t id, uint64_t bytes, uint8_t seed, int how)
{
	uint8_t buf[64];
	ssize_t n = ctl_encode_mem(buf, sizeof(buf), CTL_MEM, id, bytes);
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} cbuf;
	struct iovec iov = { .iov_base = buf, .iov_len = (size_t)n };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	struct cmsghdr *cm;
	int fd = -1;

	if (clients[c] < 0 || n < 0)
		return;
	if (how != 3) {
		uint64_t len = how == 2 ? bytes / 2 : bytes;
		uint64_t *p;

		fd = memfd_create("fuzz_session", MFD_CLOEXEC | MFD_ALLOW_SEALING);
		if (fd < 0 || ftruncate(fd, (off_t)len) < 0)
			goto out;
		p = len ? mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) : NULL;
		if (p == MAP_FAILED)
			goto out;
		for (uint64_t i = 0; i < len / 8; i++)
			p[i] = (seed + 3 * i) % 9;
		if (p)
			munmap(p, len);
		if (how != 1)
			fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW);
		mh.msg_control = cbuf.buf;
		mh.msg_controllen = sizeof(cbuf.buf);
		cm = CMSG_FIRSTHDR(&mh);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(cm), &fd, sizeof(int));
	}
	if (sendmsg(clients[c], &mh, MSG_NOSIGNAL | MSG_DONTWAIT) > 0)
		stats.mems++;
out:
	if (fd >= 0)
		close(fd);
}

/* A buffer in region 0-2 (0: none) from three input bytes. */
static struct ctl_buf some_buf(uint64_t unit)
{
	uint8_t mem = next() % 3, off, len;

	off = next();
	len = next();
	if (!mem)
		return (struct ctl_buf){ 0 };
	return (struct ctl_buf){ .mem = mem, .off = 8ull * (off % 32), .len = len & 0x80 ? len % 64 : unit * (len % 5) };
}

/* A post on the post page (proto/post.h) of an endpoint (the c-th, where
 * there are fewer: round again), as its client writes it or not: how 0
 * well-formed (after what the client sent on the socket, or not yet),
 * 1 a byte of the message changed, 2 longer than a slot, 3 posted past the
 * slots the client has; or shorter than a message header. */
static void post_page(int c, const uint8_t *msg, size_t n, uint8_t how)
{
	struct ep *ep = ep_first();
	struct proto_post_shared *p;
	struct proto_post_slot *slot;
	uint32_t posted;

	for (int i = 0; ep && i < c; i++)
		ep = ep->next ? ep->next : ep_first();
	if (!ep || n > PROTO_POST_MSG_MAX)
		return;
	p = ep->post;
	posted = atomic_load_explicit(&p->posted, memory_order_relaxed);
	slot = &p->slot[posted % PROTO_POST_SLOTS];
	slot->sock_before = ep->ctl_handled + (how & 4 ? next() % 3 : 0);
	slot->len = how % 4 == 2 ? PROTO_POST_MSG_MAX + 1 + next() :
		    how & 8 ? next() % sizeof(struct ctl_hdr) : (uint32_t)n;
	memcpy(slot->msg, msg, n);
	if (how % 4 == 1 && n)
		slot->msg[next() % n] ^= next();
	atomic_store_explicit(&p->posted, posted + (how % 4 == 3 ? PROTO_POST_SLOTS + 1 : 1), memory_order_release);
	stats.page_posts++;
}

/* The collectives' ops (op bytes 240-255). */
static void coll_op(uint8_t op, int c, uint8_t *buf, size_t cap, ssize_t *n_p)
{
	struct job *j = job_first();

	switch (op % 8) {
	case 0: {
		uint8_t id = next(), sz = next();

		uint8_t seed = next();

		client_mem(c, 1 + id % 3, 64ull * (1 + sz % 64), seed, (id >> 2) % 4 == 3 ? (id >> 4) % 4 : 0);
		break;
	}
	case 1: {
		uint8_t k = next(), f = next();
		struct ctl_coll_wire w = { .kind = 1 + k % CTL_COLL_KIND_MAX, .flags = (f >> 5) & 1,
					   .strategy = f & 0x10 ? 1 + f % 4 : 0 };

		w.seq = f & 0x80 ? next() : ++coll_seq[c];
		if (f & 0x40) {
			/* a group a split of the job's operation s makes, led
			 * by rank l (coll_group_id) */
			uint8_t sq = next() % 4 + 1, l = next() % 4;

			w.group = coll_group_id(0, sq, l);
		}
		w.count = next() % 17;
		w.root = ctl_coll_has_root(w.kind) ? next() % 4 : 0;
		if (ctl_coll_phased(w.kind))
			w.flags = 0;
		if (ctl_coll_reduces(w.kind)) {
			/* a type and op that go together, mostly */
			uint8_t t = next() % COLL_TYPES, o = next() % COLL_OPS;

			if (!(f & 2) && !coll_op_ok(t, o))
				o %= 4;
			w.flags |= (uint32_t)t << CTL_COLL_TYPE_SHIFT | (uint32_t)o << CTL_COLL_OP_SHIFT;
		}
		if (w.kind == CTL_COLL_SPLIT)
			w.count = 8;
		if (w.kind == CTL_COLL_BARRIER || w.kind >= CTL_COLL_SCATTER)
			w.strategy = 0;
		if (w.kind == CTL_COLL_ALLTOALLV)
			w.count = 0;
		w.send = some_buf(w.count ? w.count : 8);
		w.recv = some_buf(w.count ? w.count : 8);
		if (w.kind == CTL_COLL_ALLTOALLV || w.kind == CTL_COLL_SCATTERV || w.kind == CTL_COLL_GATHERV ||
		    w.kind == CTL_COLL_ALLGATHERV || w.kind == CTL_COLL_REDUCE_SCATTER) {
			/* numbers per rank: 4 (all-to-allv), 2 or 1 (reduce_scatter) */
			unsigned per = w.kind == CTL_COLL_ALLTOALLV ? 32 : w.kind == CTL_COLL_REDUCE_SCATTER ? 8 : 16;
			int must = w.kind == CTL_COLL_ALLTOALLV || w.kind == CTL_COLL_ALLGATHERV ||
				   w.kind == CTL_COLL_REDUCE_SCATTER;

			w.vec = some_buf(per);
			if (must && !w.vec.mem)
				w.vec = (struct ctl_buf){ .mem = 1, .len = per };
			w.vec.len -= w.vec.len % per;
			if (w.kind == CTL_COLL_REDUCE_SCATTER)
				w.count = 0;
		}
		if (f & 4) {
			/* a time of an earlier operation, as libferry reports
			 * it (or not: any seq, group, time) */
			uint8_t r = next();

			w.prev_group = r & 1 ? w.group : coll_group_id(0, r % 4 + 1, r / 4 % 4);
			w.prev_seq = r & 2 ? w.seq - 1 : next();
			w.prev_us = (uint32_t)next() << (r / 16 % 24);
			if (!w.prev_seq)
				w.prev_group = w.prev_us = 0;
		}
		*n_p = ctl_encode_coll(buf, cap, &w);
		if (*n_p > 0)
			stats.posts++;
		if (*n_p > 0 && f & 8) {
			/* on the post page instead of the socket */
			post_page(c, buf, (size_t)*n_p, next());
			*n_p = 0;
		}
		break;
	}
	case 2: {
		uint8_t sq = next() % 4 + 1, l = next();

		*n_p = ctl_encode_group_free(buf, cap, l & 0x80 ? l : coll_group_id(0, sq, l % 4));
		break;
	}
	case 3: {
		struct ctl_buf b = some_buf(4);

		*n_p = ctl_encode_layout(buf, cap, &b);
		break;
	}
	case 4:
		*n_p = ctl_encode_mem(buf, cap, CTL_MEM_FREE, 1 + next() % 3, 0);
		break;
	case 5: {                       /* a piece from node 1 or 2 */
		uint8_t p[sizeof(struct wire_coll_piece) + 64], f = next(), len = next() % 64;
		struct wire_coll_piece h = { .job = j ? j->id : 0, .gen = j ? j->gen : 0, .from = 1 + (f & 1) };

		/* (one field after the other: the input's order) */
		h.op = next() % 4;
		h.msg = f & 0x80 ? (f & 0x08 ? WIRE_COLL_MSG_HOLD : WIRE_COLL_MSG_BREAK) : next() % 4;
		h.group = f & 0x40 ? next() : 0;
		h.offset = f & 0x20 ? next() : 0;
		h.kind = wire_coll_msg_engine(h.msg) ? 0 : 1 + next() % 8;
		/* the root (the rooted kinds) and the plan the sender's node
		 * runs above it (proto/coll.h): the all-to-alls' strategy + 1,
		 * the rooted kinds' algorithm + 1, a barrier's 0; some of them
		 * match what this node runs, and the pieces get to the executor */
		if (h.kind) {
			uint8_t r = next();

			h.root = (uint32_t)(r & 3) | (uint32_t)(r >> 2 & 3) << WIRE_COLL_ALG_SHIFT;
		}
		h.total = f & 0x10 ? h.offset + len + next() : h.offset + len;
		for (uint8_t i = 0; i < len; i++)
			p[sizeof(h) + i] = next();
		if (h.msg == WIRE_COLL_MSG_HOLD && !(f & 0x20)) {
			/* a well-formed HOLD (hold back from op on, or go on) */
			struct wire_coll_hold hb = { .on = next() & 1 };

			len = sizeof(hb);
			h.total = sizeof(hb);
			memcpy(p + sizeof(h), &hb, sizeof(hb));
		}
		wire_coll_piece_encode(p, &h);
		if (coll_rx) {
			stats.pieces_in++;
			stats.holds_in += h.msg == WIRE_COLL_MSG_HOLD;
			coll_rx(h.from, p, (uint32_t)(sizeof(h) + len));
		}
		break;
	}
	case 6: {                       /* the job's layout, as at GO: ranks not here on node 1 */
		uint8_t bits = next();

		if (j && !j->layout && (j->layout = malloc(4ull * j->size)))
			for (uint32_t r = 0; r < j->size; r++)
				j->layout[r] = j->ranks[r].ep || !(bits >> (r % 8) & 1) ? 0 : 1;
		if (j && !j->id) {
			j->id = 1 + next() % 16;
			j->gen = 1;
		}
		break;
	}
	default:                        /* node 1 is lost: every job fails */
		for (struct job *f = j; f; f = f->next)
			job_failed(f, EHOSTDOWN, 0, "node 1 lost (fuzz_session)");
		break;
	}
}

static void client_close(int c)
{
	if (clients[c] >= 0)
		close(clients[c]);
	clients[c] = -1;
	coll_seq[c] = 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int ready = -1;
	int sleeps = 0;

	if (ready < 0)
		ready = setup();
	if (ready < 0)
		abort();
	in = data;
	left = size;
	while (left) {
		uint8_t op = next(), c = next() % MAX_CLIENTS;
		uint8_t buf[256];
		ssize_t n = 0;

		if (op >= 240) {
			coll_op(op, c, buf, sizeof(buf), &n);
			if (n > 0)
				client_send(c, buf, (size_t)n);
			check_limits();
			continue;
		}
		switch (op % 12) {
		case 0:
			client_connect();
			break;
		case 1: {               /* arbitrary bytes */
			size_t len = next() % 64;

			for (size_t i = 0; i < len; i++)
				buf[i] = next();
			client_send(c, buf, len);
			break;
		}
		case 2:
			n = ctl_encode_hello(buf, sizeof(buf), next() & 1 ? CTL_ROLE_ADMIN : CTL_ROLE_ENDPOINT);
			break;
		case 3: {
			static const char *const names[] = { "a", "b", "c" };
			uint8_t rank = next(), sz = next();

			/* Bit 6 of the rank's byte, which rank % 4 leaves
			 * out, asks for direct rings: scripts keep their
			 * layout. */
			n = ctl_encode_join_flags(buf, sizeof(buf), names[next() % 3], rank % 4,
						  sz & 0x80 ? PROTO_MAX_RANKS : sz % 4 + 1u,
						  rank & 0x40 ? CTL_JOIN_DIRECT : 0);
			break;
		}
		case 4: {
			uint8_t what = next(), a = next(), b = next();

			n = ctl_encode_query(buf, sizeof(buf), what % 4, (uint32_t)a << 12 | b);
			break;
		}
		case 5:
			client_read(c);
			break;
		case 6:
			client_close(c);
			break;
		case 7:
		case 8:
			turn();
			break;
		case 9:
			if (sleeps++ < 2) {     /* the timeouts pass */
				struct timespec ts = { 0, 25 * 1000000 };

				nanosleep(&ts, NULL);
				turn();
			}
			break;
		case 10:
			if (job_first()) {
				struct job *j = job_first();

				/* (a job ready has its layout: every rank here,
				 * unless op 246 said otherwise) */
				if (!j->layout && (j->layout = malloc(4ull * j->size)))
					memset(j->layout, 0, 4ull * j->size);
				/* the algorithms its home's configuration forces
				 * (collectives.*: any wire_ctl_decode lets
				 * through of a GO) and its runtime functions,
				 * from how much input is left (no byte taken:
				 * the kept inputs mean what they meant; the same
				 * input, the same run) */
				uint32_t v = (uint32_t)left;

				for (uint32_t f = 0; f < CTL_FAMS; f++) {
					j->coll_force[f] = (uint8_t)(v % (ctl_fam_nalgs(f) + 1));
					v = v / (ctl_fam_nalgs(f) + 1) + (uint32_t)left * f;
					for (uint32_t a = 0; a < ctl_fam_nalgs(f); a++)
						j->coll_fn[f][a] = (struct cost_fn){ (v >> a) % 7 * 10.0,
										     (v >> (a + 3)) % 3 * 0.5 };
				}
				j->ready = 1;
				sess_job_ready(j);
			}
			break;
		case 11:
			if (job_first())
				sess_reject_rank(job_first()->uid, job_first()->name, next() % 4,
						 next() & 1 ? EADDRINUSE : EINVAL);
			break;
		}
		if (n > 0)
			client_send(c, buf, (size_t)n);
		check_limits();
	}
	/* Every client goes; then nothing may be left.  (Its ranks here gone,
	 * a job with ranks elsewhere fails: the cluster layer's FAIL, which
	 * the stubs above do not send, ends the operations that wait for
	 * other nodes; at the end every other node is lost, so that nothing
	 * waits for ferryd's grace timer, seconds later.) */
	for (int i = 0; i < MAX_CLIENTS; i++)
		client_close(i);
	for (int i = 0; i < nseen; i++) {
		job_failed(seen[i], EHOSTDOWN, 0, "every other node lost (fuzz_session)");
		job_put(seen[i]);
	}
	nseen = 0;
	/* Connections still in the backlog are accepted, then see the end;
	 * closed sessions are reaped a turn later. */
	for (int i = 0; i < 20; i++) {
		turn();
		if (i >= 3 && !sess_count() && !ep_count())
			break;
	}
	turn();
	check(sess_count() == 0, "a session outlived its client");
	check(ep_count() == 0, "an endpoint outlived its client");
	check(job_count() == 0, "a job outlived its ranks");
	check(direct_count() == 0, "a job's direct rings outlived it");
	check(user_count() == 0 && user_total.unjoined == 0 && user_total.endpoints == 0 &&
	      user_total.queue_bytes == 0 && user_total.table_bytes == 0, "a user's count was not given back");
	check(sess_out_bytes() == 0, "a reply outlived its session");
	return 0;
}
