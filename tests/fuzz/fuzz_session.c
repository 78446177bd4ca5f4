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
 * a rank.  Besides what the sanitizers catch, it aborts when a limit is
 * exceeded, when a session holds more than one reply, or when anything (a
 * session, an endpoint, a job, its direct rings, a user's count, a reply)
 * is left once every client has gone.
 */
#include "../../daemon/core/conf.h"
#include "../../daemon/core/log.h"
#include "../../daemon/core/loop.h"
#include "../../daemon/local/direct.h"
#include "../../daemon/local/endpoint.h"
#include "../../daemon/local/job.h"
#include "../../daemon/local/session.h"
#include "../../daemon/local/user.h"
#include "../../proto/ctl.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define MAX_CLIENTS 8

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct conf conf;
static char sock_path[PATH_MAX];
static int clients[MAX_CLIENTS];
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

static void rank_joined(struct job *j, uint32_t rank)
{
	(void)j;
	(void)rank;
}

static void rank_left(struct ep *ep)
{
	(void)ep;
}

static const struct sess_events events = { .rank_joined = rank_joined, .rank_left = rank_left };

/* The loop's poll hook: ends the loop on its second call, so that
 * loop_run handles one batch of events. */
static int poll_once(void)
{
	if (rounds_left-- <= 0)
		loop_stop();
	return sess_poll() | 1;
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
	sess_fini();
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
		 "daemon: { runtime_dir = \"%s\"; };\n", dir);
	if (conf_load_string(&conf, text, "fuzz.conf", err, sizeof(err)) < 0) {
		fprintf(stderr, "%s\n", err);
		return -1;
	}
	snprintf(sock_path, sizeof(sock_path), "%s/%s", dir, SESS_SOCKET_NAME);
	/* A long spin: the loop never blocks in epoll_wait. */
	if (loop_init(1000000, &hooks) < 0 || ep_init(&conf, 0) < 0 ||
	    sess_init(&conf, 0, -1, query, &events) < 0)
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

static void client_close(int c)
{
	if (clients[c] >= 0)
		close(clients[c]);
	clients[c] = -1;
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
				job_first()->ready = 1;
				sess_job_ready(job_first());
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
	/* Every client goes; then nothing may be left. */
	for (int i = 0; i < MAX_CLIENTS; i++)
		client_close(i);
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
