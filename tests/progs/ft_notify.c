/* tests/progs/ft_notify.c - stands in for systemd's notification socket:
 * binds a datagram socket at PATH and prints every message it receives, one
 * per line (newlines inside a message become spaces), until it is killed
 * (the test's cleanup does that).
 *
 *   ft_notify PATH
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

static volatile sig_atomic_t stop;

static void on_term(int sig)
{
	(void)sig;
	stop = 1;
}

int main(int argc, char **argv)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct sigaction act = { .sa_handler = on_term };   /* no SA_RESTART: recv returns */
	int fd;

	if (argc != 2)
		return 2;
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", argv[1]);
	fd = socket(AF_UNIX, SOCK_DGRAM, 0);
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		perror("ft_notify: bind");
		return 2;
	}
	sigaction(SIGTERM, &act, NULL);
	sigaction(SIGINT, &act, NULL);
	setvbuf(stdout, NULL, _IOLBF, 0);
	while (!stop) {
		char buf[4096];
		ssize_t n = recv(fd, buf, sizeof(buf) - 1, 0);

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
