/* tests/progs/ft_notify.c - stands in for systemd's notification socket:
 * binds a datagram socket at PATH and prints every message it receives, one
 * per line (newlines inside a message become spaces), for SECONDS seconds.
 *
 *   ft_notify PATH SECONDS
 */
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct timespec t0, t;
	double limit;
	int fd;

	if (argc != 3)
		return 2;
	limit = atof(argv[2]);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", argv[1]);
	fd = socket(AF_UNIX, SOCK_DGRAM, 0);
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		perror("ft_notify: bind");
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		char buf[4096];
		ssize_t n;

		clock_gettime(CLOCK_MONOTONIC, &t);
		if ((double)(t.tv_sec - t0.tv_sec) + (double)(t.tv_nsec - t0.tv_nsec) / 1e9 > limit)
			break;
		if (poll(&p, 1, 50) <= 0)
			continue;
		n = recv(fd, buf, sizeof(buf) - 1, 0);
		if (n <= 0)
			continue;
		for (ssize_t i = 0; i < n; i++)
			if (buf[i] == '\n')
				buf[i] = ' ';
		buf[n] = '\0';
		printf("%s\n", buf);
	}
	unlink(sa.sun_path);
	return 0;
}
