/* client/ferryctl.c - ferry's command-line tool.
 *
 *   ferryctl [--runtime-dir DIR] status     what the local daemon is doing
 *   ferryctl [--runtime-dir DIR] stats      its counters, one "name value" per line
 *
 * It speaks the control protocol of proto/ctl.h directly (it is not an
 * endpoint, so it does not use libferry).
 */
#include "../proto/ctl.h"

#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

static void usage(FILE *out)
{
	fprintf(out,
		"usage: ferryctl [--runtime-dir DIR] COMMAND\n"
		"  status            node, topology, clients and jobs of the local ferryd\n"
		"  stats             counters of the local ferryd, one \"name value\" per line\n"
		"options:\n"
		"  --runtime-dir DIR where ferryd's socket is (default $FERRY_RUNTIME_DIR, /run/ferry)\n"
		"  --timeout MS      how long to wait for the daemon (default 5000)\n");
}

static int connect_daemon(const char *dir)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd;

	if ((size_t)snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/ferryd.sock", dir) >= sizeof(sa.sun_path)) {
		fprintf(stderr, "ferryctl: runtime directory %s: path too long\n", dir);
		return -1;
	}
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		fprintf(stderr, "ferryctl: cannot reach ferryd at %s: %s%s\n", sa.sun_path, strerror(errno),
			errno == ENOENT || errno == ECONNREFUSED ? " (is ferryd running?)" : "");
		if (fd >= 0)
			close(fd);
		return -1;
	}
	return fd;
}

/* Sends one QUERY and prints the TEXT reply.  Returns the exit status. */
static int query(const char *dir, uint32_t what, uint32_t arg, int timeout_ms)
{
	char req[64];
	char *buf = NULL;
	size_t len = 0, cap = 0;
	ssize_t n;
	int fd = connect_daemon(dir), status = 1;

	if (fd < 0)
		return 1;
	n = ctl_encode_hello(req, sizeof(req), CTL_ROLE_ADMIN);
	n += ctl_encode_query(req + n, sizeof(req) - (size_t)n, what, arg);
	if (send(fd, req, (size_t)n, MSG_NOSIGNAL) != n) {
		fprintf(stderr, "ferryctl: sending to ferryd: %s\n", strerror(errno));
		goto out;
	}
	for (;;) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		struct ctl_msg m;
		ssize_t used;

		used = ctl_decode(buf ? buf : "", len, &m);
		if (used < 0) {
			fprintf(stderr, "ferryctl: malformed reply from ferryd\n");
			goto out;
		}
		if (used > 0) {
			if (m.type == CTL_TEXT) {
				fwrite(m.u.text.text, 1, m.u.text.len, stdout);
				status = 0;
			} else if (m.type == CTL_ERROR) {
				fprintf(stderr, "ferryctl: ferryd: %s\n", m.u.error.text);
			} else {
				fprintf(stderr, "ferryctl: unexpected reply %u from ferryd\n", m.type);
			}
			goto out;
		}
		if (cap - len < 65536) {
			char *b = realloc(buf, cap + 65536 + 4096);

			if (!b) {
				fprintf(stderr, "ferryctl: out of memory\n");
				goto out;
			}
			buf = b;
			cap += 65536 + 4096;
		}
		if (poll(&pfd, 1, timeout_ms) == 0) {
			fprintf(stderr, "ferryctl: ferryd did not answer within %d ms\n", timeout_ms);
			goto out;
		}
		n = recv(fd, buf + len, cap - len, 0);
		if (n <= 0) {
			fprintf(stderr, "ferryctl: ferryd closed the connection%s%s\n", n < 0 ? ": " : "",
				n < 0 ? strerror(errno) : "");
			goto out;
		}
		len += (size_t)n;
	}
out:
	free(buf);
	close(fd);
	return status;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "runtime-dir", required_argument, NULL, 'r' },
		{ "timeout", required_argument, NULL, 't' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *dir = getenv("FERRY_RUNTIME_DIR");
	int timeout_ms = 5000, opt;

	while ((opt = getopt_long(argc, argv, "+r:t:h", opts, NULL)) != -1) {
		switch (opt) {
		case 'r': dir = optarg; break;
		case 't': timeout_ms = atoi(optarg); break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (!dir || !*dir)
		dir = "/run/ferry";
	if (optind >= argc) {
		usage(stderr);
		return 2;
	}
	if (strcmp(argv[optind], "status") == 0)
		return query(dir, CTL_Q_STATUS, 0, timeout_ms);
	if (strcmp(argv[optind], "stats") == 0)
		return query(dir, CTL_Q_STATS, 0, timeout_ms);
	fprintf(stderr, "ferryctl: unknown command '%s'\n", argv[optind]);
	usage(stderr);
	return 2;
}
