/* tests/progs/ft_conns.c - many connections to ferryd that never join, to
 * test the limits on them (limits.max_unjoined, user_unjoined,
 * join_timeout_ms, admin_idle_ms) and the accept loop when the daemon has
 * no file descriptors left.
 *
 *   ft_conns DIR N MODE [HOLD_MS]
 *
 * Opens N connections to DIR/ferryd.sock, one after the other, and on each:
 *   silent   sends nothing
 *   hello    sends HELLO as an application, never JOIN
 *   admin    sends HELLO as a tool, never a query
 *   noread   sends HELLO as a tool, then STATUS queries for as long as the
 *            socket takes them, and never reads a reply
 * then waits until the daemon has closed every one of them, or HOLD_MS
 * (default 15000) passed, and closes the rest.  Prints one line per
 * connection the daemon refused or closed, and a summary:
 *
 *   conn K: error E after T ms: TEXT     (an ERROR message from the daemon)
 *   conn K: closed after T ms
 *   summary: opened N closed C errors E open O first_ms F last_ms L
 *
 * (T, F, L: milliseconds from the connection's own connect to its close.)
 * Exits 0, or 2 on setup errors.
 */
#include "../../proto/ctl.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

struct conn {
	int fd;
	double t0;              /* connected */
	int done;
	uint8_t in[1024];
	size_t in_len;
};

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

int main(int argc, char **argv)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int n, closed = 0, errors = 0, noread, listen_only;
	double hold = 15000, first = -1, last = -1, start;
	struct conn *c;
	struct pollfd *p;
	const char *mode;

	if (argc < 4)
		return 2;
	n = atoi(argv[2]);
	mode = argv[3];
	if (argc > 4)
		hold = atof(argv[4]);
	noread = strcmp(mode, "noread") == 0;
	listen_only = strcmp(mode, "silent") == 0;
	if (!listen_only && !noread && strcmp(mode, "hello") != 0 && strcmp(mode, "admin") != 0)
		return 2;
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/ferryd.sock", argv[1]);
	c = calloc((size_t)n, sizeof(*c));
	p = calloc((size_t)n, sizeof(*p));
	if (!c || !p)
		return 2;
	for (int i = 0; i < n; i++) {
		uint8_t buf[64];
		ssize_t len = 0;

		c[i].fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (c[i].fd < 0 || connect(c[i].fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
			fprintf(stderr, "ft_conns: connect %d: %s\n", i, strerror(errno));
			return 2;
		}
		c[i].t0 = now_ms();
		if (!listen_only)
			len = ctl_encode_hello(buf, sizeof(buf), strcmp(mode, "hello") == 0 ? CTL_ROLE_ENDPOINT
											 : CTL_ROLE_ADMIN);
		if (len > 0 && send(c[i].fd, buf, (size_t)len, MSG_NOSIGNAL) != len) {
			fprintf(stderr, "ft_conns: send %d: %s\n", i, strerror(errno));
			return 2;
		}
		if (noread) {
			fcntl(c[i].fd, F_SETFL, O_NONBLOCK);
			len = ctl_encode_query(buf, sizeof(buf), CTL_Q_STATUS, 0);
			while (send(c[i].fd, buf, (size_t)len, MSG_NOSIGNAL) == len)
				;
		}
	}
	printf("opened %d\n", n);
	fflush(stdout);
	start = now_ms();
	while (closed < n && now_ms() - start < hold) {
		for (int i = 0; i < n; i++) {
			p[i].fd = c[i].done ? -1 : c[i].fd;
			p[i].events = noread ? 0 : POLLIN;      /* POLLHUP comes anyway */
			p[i].revents = 0;
		}
		if (poll(p, (nfds_t)n, 50) <= 0)
			continue;
		for (int i = 0; i < n; i++) {
			ssize_t got;
			struct ctl_msg m;
			double t;

			if (!p[i].revents)
				continue;
			if (!noread) {
				got = recv(c[i].fd, c[i].in + c[i].in_len, sizeof(c[i].in) - c[i].in_len, MSG_DONTWAIT);
				if (got > 0) {
					c[i].in_len += (size_t)got;
					if (ctl_decode(c[i].in, c[i].in_len, &m) > 0 && m.type == CTL_ERROR) {
						printf("conn %d: error %d after %.0f ms: %s\n", i, m.u.error.err,
						       now_ms() - c[i].t0, m.u.error.text);
						errors++;
						c[i].in_len = 0;
					}
					continue;
				}
				if (got < 0 && errno == EAGAIN)
					continue;
			} else if (!(p[i].revents & (POLLHUP | POLLERR))) {
				continue;
			}
			t = now_ms() - c[i].t0;
			printf("conn %d: closed after %.0f ms\n", i, t);
			c[i].done = 1;
			closed++;
			if (first < 0 || t < first)
				first = t;
			if (t > last)
				last = t;
		}
		fflush(stdout);
	}
	printf("summary: opened %d closed %d errors %d open %d first_ms %.0f last_ms %.0f\n", n, closed, errors,
	       n - closed, first, last);
	for (int i = 0; i < n; i++)
		close(c[i].fd);
	free(c);
	free(p);
	return 0;
}
