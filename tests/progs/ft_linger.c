/* tests/progs/ft_linger.c - a client that hands ferryd descriptors whose
 * close() blocks (daemon/core/closer.h):
 *   - a lingering socket: TCP, SO_LINGER set for an hour, with data its
 *     peer never reads (the peer is a connection left in our listener's
 *     backlog, never accepted): closing it waits an hour, unless its
 *     SO_LINGER is turned off first (ferryd does);
 *   - a loaded socket: an AF_UNIX socket with a lingering socket in flight
 *     in it (sent by its peer, never read): closing it releases that
 *     socket, and waits; nothing can be turned off first.
 *
 *   ft_linger DIR MODE HOLD_S [N [GOFILE]]
 *
 * MODE:
 *   sent      N times (1 unless given): connect and send one garbage byte
 *             with a loaded socket; ferryd reads it and ends the session.
 *             Then one more connection, which sends nothing: prints "then:
 *             refused" if ferryd closes it within 5 s (with an ERROR or
 *             none), else "then: open"
 *   tcp       as sent, once, with a lingering socket itself
 *   many      one garbage byte with 5 loaded sockets in one message (more
 *             than ferryd once had room for: the kernel released the rest
 *             in ferryd's own thread)
 *   oob       one byte sent MSG_OOB with a loaded socket, and close at once
 *             (a read that skips an out-of-band byte frees it, and what came
 *             with it, in the reader's thread)
 *   refused   open N connections that never join (as many as the user's
 *             limits.user_unjoined), print "conns open", wait until GOFILE
 *             exists (the test stops ferryd meanwhile), then connect once
 *             more and send a loaded socket at once: ferryd, once it runs
 *             again, refuses that connection with the descriptor in it,
 *             unread
 *   flood     N connections, one at a time, each sending one byte and
 *             closing (what a user who is refused may go on doing)
 *   pipe      as sent, once, with the read end of a pipe (whose close does
 *             not block): ferryd's thread closes it at once
 * then prints "handed over", holds its listener (so that the connections
 * stay and the closes keep waiting) for HOLD_S seconds, prints "done" and
 * exits: the listener's end resets the connections, and the closes in
 * ferryd's thread return. */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

static void die(const char *what)
{
	fprintf(stderr, "ft_linger: %s: %s\n", what, strerror(errno));
	exit(2);
}

static int connect_daemon(const char *dir)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int s = socket(AF_UNIX, SOCK_STREAM, 0);

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/ferryd.sock", dir);
	if (s < 0 || connect(s, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		die("connect to ferryd");
	return s;
}

/* A lingering socket, connected to lis (never accepted), its send buffer
 * full.  (Small buffers: many of them hold little of the kernel's memory.) */
static int lingering(int lis)
{
	struct sockaddr_in a;
	socklen_t len = sizeof(a);
	struct linger lg = { .l_onoff = 1, .l_linger = 3600 };
	static char junk[65536];
	int s = socket(AF_INET, SOCK_STREAM, 0), small = 4096;

	if (s < 0 || setsockopt(s, SOL_SOCKET, SO_SNDBUF, &small, sizeof(small)) < 0 ||
	    getsockname(lis, (struct sockaddr *)&a, &len) < 0 || connect(s, (struct sockaddr *)&a, len) < 0)
		die("connect to our listener");
	for (;;) {
		ssize_t n = send(s, junk, sizeof(junk), MSG_DONTWAIT);

		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			break;
		if (n < 0)
			die("send");
	}
	if (setsockopt(s, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg)) < 0)
		die("SO_LINGER");
	return s;
}

/* Sends n descriptors with one byte (flags: MSG_OOB or 0). */
static void send_fds(int sock, const int *fds, int n, int flags)
{
	union {
		char buf[CMSG_SPACE(8 * sizeof(int))];
		struct cmsghdr align;
	} cbuf;
	char byte = 0x7f;
	struct iovec iov = { .iov_base = &byte, .iov_len = 1 };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf.buf,
			     .msg_controllen = CMSG_SPACE((size_t)n * sizeof(int)) };
	struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);

	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN((size_t)n * sizeof(int));
	memcpy(CMSG_DATA(cm), fds, (size_t)n * sizeof(int));
	if (sendmsg(sock, &mh, MSG_NOSIGNAL | flags) != 1)
		die("sendmsg");
}

/* A loaded socket: a lingering one in flight in it, its peer closed. */
static int loaded(int lis)
{
	int sp[2], t = lingering(lis);

	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sp) < 0)
		die("socketpair");
	send_fds(sp[1], &t, 1, 0);
	close(t);
	close(sp[1]);
	return sp[0];
}

/* Sends fds (n) with a byte over a new connection, closes our copies, and
 * (unless now) reads until ferryd ends the session. */
static void hand_over(const char *dir, const int *fds, int n, int flags, int now)
{
	int sock = connect_daemon(dir);
	char c;

	send_fds(sock, fds, n, flags);
	for (int i = 0; i < n; i++)
		close(fds[i]);
	while (!now && read(sock, &c, 1) > 0)
		;
	close(sock);
}

/* Whether ferryd closes a new connection within 5 s (refusing it). */
static int refused(const char *dir)
{
	struct pollfd p = { .fd = connect_daemon(dir), .events = POLLIN };
	char buf[256];
	int gone = 0;

	while (!gone && poll(&p, 1, 5000) > 0)
		gone = read(p.fd, buf, sizeof(buf)) <= 0;
	close(p.fd);
	return gone;
}

int main(int argc, char **argv)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int lis, n, small = 4096, fds[5];
	const char *mode;

	if (argc < 4)
		return 2;
	mode = argv[2];
	n = argc > 4 ? atoi(argv[4]) : 1;
	lis = socket(AF_INET, SOCK_STREAM, 0);
	if (lis < 0 || setsockopt(lis, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small)) < 0 ||
	    bind(lis, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(lis, 4 * n + 8) < 0)
		die("listen");
	if (strcmp(mode, "pipe") == 0) {
		int pfd[2];

		if (pipe(pfd) < 0)
			die("pipe");
		hand_over(argv[1], pfd, 1, 0, 0);
		close(pfd[1]);
	} else if (strcmp(mode, "sent") == 0) {
		for (int i = 0; i < n; i++) {
			fds[0] = loaded(lis);
			hand_over(argv[1], fds, 1, 0, 0);
		}
		printf("then: %s\n", refused(argv[1]) ? "refused" : "open");
	} else if (strcmp(mode, "tcp") == 0) {
		fds[0] = lingering(lis);
		hand_over(argv[1], fds, 1, 0, 0);
	} else if (strcmp(mode, "many") == 0) {
		for (int i = 0; i < 5; i++)
			fds[i] = loaded(lis);
		hand_over(argv[1], fds, 5, 0, 0);
	} else if (strcmp(mode, "oob") == 0) {
		fds[0] = loaded(lis);
		hand_over(argv[1], fds, 1, MSG_OOB, 1);
	} else if (strcmp(mode, "flood") == 0) {
		for (int i = 0; i < n; i++) {
			int s = connect_daemon(argv[1]);

			/* (EPIPE: refused and closed before the byte) */
			if (send(s, "x", 1, MSG_NOSIGNAL) != 1 && errno != EPIPE && errno != ECONNRESET)
				die("send");
			close(s);
		}
	} else if (strcmp(mode, "refused") == 0 && argc > 5) {
		int sock;

		fds[0] = loaded(lis);
		for (int i = 0; i < n; i++)
			(void)connect_daemon(argv[1]);  /* held until we exit */
		printf("conns open\n");
		fflush(stdout);
		while (access(argv[5], F_OK) != 0)
			usleep(10000);
		sock = connect_daemon(argv[1]);
		send_fds(sock, fds, 1, 0);
		close(fds[0]);
	} else {
		return 2;
	}
	printf("handed over\n");
	fflush(stdout);
	sleep((unsigned)atoi(argv[3]));
	printf("done\n");
	return 0;
}
