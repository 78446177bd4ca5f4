/* tests/bench/raw_tcp.c - what loopback TCP itself does, the comparator for
 * ferry's links.
 *
 *   raw_tcp pingpong N     8-byte ping-pong between two processes, both
 *                          busy-polling (non-blocking reads); "oneway_us X"
 *   raw_tcp stream MB      one process streams MB megabytes to the other in
 *                          1 MiB writes; "gbytes_per_s X"
 */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* Reads exactly n bytes, spinning on EAGAIN. */
static void readn(int fd, void *buf, size_t n)
{
	size_t got = 0;

	while (got < n) {
		ssize_t r = recv(fd, (char *)buf + got, n - got, MSG_DONTWAIT);

		if (r > 0)
			got += (size_t)r;
		else if (r == 0 || (errno != EAGAIN && errno != EINTR))
			exit(1);
	}
}

int main(int argc, char **argv)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t sl = sizeof(sa);
	int lfd = socket(AF_INET, SOCK_STREAM, 0), one = 1, fd;
	long n = argc > 2 ? atol(argv[2]) : 20000;
	pid_t child;

	if (argc < 2 || lfd < 0 || bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(lfd, 1) < 0 ||
	    getsockname(lfd, (struct sockaddr *)&sa, &sl) < 0)
		return 2;
	child = fork();
	if (child == 0) {
		fd = socket(AF_INET, SOCK_STREAM, 0);
		if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
			return 2;
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		if (!strcmp(argv[1], "pingpong")) {
			char b[8];

			for (long i = 0; i < n + 1000; i++) {
				readn(fd, b, 8);
				if (send(fd, b, 8, 0) != 8)
					return 1;
			}
		} else {
			char *b = malloc(1 << 20);
			size_t got = 0, want = (size_t)n << 20;

			while (got < want) {
				ssize_t r = read(fd, b, 1 << 20);

				if (r <= 0)
					return 1;
				got += (size_t)r;
			}
			if (write(fd, "k", 1) != 1)
				return 1;
		}
		return 0;
	}
	fd = accept(lfd, NULL, NULL);
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (!strcmp(argv[1], "pingpong")) {
		char b[8] = { 0 };
		double t0 = 0;

		for (long i = 0; i < n + 1000; i++) {
			if (i == 1000)
				t0 = now();
			if (send(fd, b, 8, 0) != 8)
				return 1;
			readn(fd, b, 8);
		}
		printf("oneway_us %.3f\n", (now() - t0) / (double)n / 2 * 1e6);
	} else {
		char *b = calloc(1, 1 << 20), k;
		double t0 = now();

		for (long i = 0; i < n; i++) {
			size_t off = 0;

			while (off < (1u << 20)) {
				ssize_t w = write(fd, b + off, (1u << 20) - off);

				if (w <= 0)
					return 1;
				off += (size_t)w;
			}
		}
		if (read(fd, &k, 1) != 1)
			return 1;
		printf("gbytes_per_s %.3f\n", (double)n * (1 << 20) / (now() - t0) / 1e9);
	}
	waitpid(child, NULL, 0);
	return 0;
}
