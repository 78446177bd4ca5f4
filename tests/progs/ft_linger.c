/* tests/progs/ft_linger.c - a client that hands ferryd a descriptor whose
 * close() blocks: a TCP socket with SO_LINGER set for an hour and data its
 * peer never reads (the peer is a connection left in our listener's
 * backlog, never accepted).  Closing it waits until the data is acknowledged
 * or the hour is over; ferryd must not wait (daemon/core/closer.h).
 *
 *   ft_linger DIR MODE HOLD_S [N [GOFILE]]
 *
 * MODE:
 *   sent      N times (1 unless given): connect and send one garbage byte
 *             with such a socket (SCM_RIGHTS); ferryd reads it and ends the
 *             session.  Then one more connection, which sends nothing:
 *             prints "then: refused" if ferryd closes it at once (with an
 *             ERROR or none), "then: open" if it is still open after 1 s
 *   refused   open N connections that never join (as many as the user's
 *             limits.user_unjoined), print "conns open", wait until GOFILE
 *             exists (the test stops ferryd meanwhile), then connect once
 *             more and send the socket at once: ferryd, once it runs again,
 *             refuses that connection with the descriptor in it, unread
 *   pipe      as sent, with the read end of a pipe (whose close does not
 *             block): ferryd's thread closes it at once
 * then prints "handed over", holds its listener (so that the connection
 * stays and the close keeps waiting) for HOLD_S seconds, prints "done" and
 * exits: the listener's end resets the connection, and the close in
 * ferryd's thread returns. */
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

/* A TCP socket whose close blocks: connected to lis (never accepted), its
 * send buffer full, lingering for an hour.  (Small buffers: many of them
 * hold little of the kernel's memory.) */
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

static void send_fd(int sock, int fd)
{
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} cbuf;
	char byte = 0x7f;
	struct iovec iov = { .iov_base = &byte, .iov_len = 1 };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf.buf,
			     .msg_controllen = sizeof(cbuf.buf) };
	struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);

	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(cm), &fd, sizeof(fd));
	if (sendmsg(sock, &mh, MSG_NOSIGNAL) != 1)
		die("sendmsg");
}

/* Sends fd with a byte over a new connection, closes our copy, and reads
 * until ferryd ends the session. */
static void hand_over(const char *dir, int fd)
{
	int sock = connect_daemon(dir);
	char c;

	send_fd(sock, fd);
	close(fd);
	while (read(sock, &c, 1) > 0)
		;
	close(sock);
}

/* Whether ferryd closes a new connection within 1 s (refusing it). */
static int refused(const char *dir)
{
	struct pollfd p = { .fd = connect_daemon(dir), .events = POLLIN };
	char buf[256];
	int gone = 0;

	while (!gone && poll(&p, 1, 1000) > 0) {
		ssize_t n = read(p.fd, buf, sizeof(buf));

		gone = n <= 0;
	}
	close(p.fd);
	return gone;
}

int main(int argc, char **argv)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int lis, n, small = 4096;
	const char *mode;

	if (argc < 4)
		return 2;
	mode = argv[2];
	n = argc > 4 ? atoi(argv[4]) : 1;
	lis = socket(AF_INET, SOCK_STREAM, 0);
	if (lis < 0 || setsockopt(lis, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small)) < 0 ||
	    bind(lis, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(lis, n + 1) < 0)
		die("listen");
	if (strcmp(mode, "pipe") == 0) {
		int pfd[2];

		if (pipe(pfd) < 0)
			die("pipe");
		hand_over(argv[1], pfd[0]);
		close(pfd[1]);
	} else if (strcmp(mode, "sent") == 0) {
		for (int i = 0; i < n; i++)
			hand_over(argv[1], lingering(lis));
		printf("then: %s\n", refused(argv[1]) ? "refused" : "open");
	} else if (strcmp(mode, "refused") == 0 && argc > 5) {
		int fd = lingering(lis), sock;

		for (int i = 0; i < n; i++)
			(void)connect_daemon(argv[1]);  /* held until we exit */
		printf("conns open\n");
		fflush(stdout);
		while (access(argv[5], F_OK) != 0)
			usleep(10000);
		sock = connect_daemon(argv[1]);
		send_fd(sock, fd);
		close(fd);
	} else {
		return 2;
	}
	printf("handed over\n");
	fflush(stdout);
	sleep((unsigned)atoi(argv[3]));
	printf("done\n");
	return 0;
}
