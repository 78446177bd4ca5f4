/* tests/progs/ft_activate.c - socket activation as systemd does it: this
 * process creates and listens on the socket, then starts the daemon as a
 * child with the socket as fd 3 (LISTEN_FDS, LISTEN_PID) and stays, owning
 * the listener.  A client's SO_PEERCRED then names this process (pid 1 under
 * ferryd.socket), not ferryd.  (systemd-socket-activate execs the daemon in
 * its own process, so it cannot show that.)
 *
 *   ft_activate PATH COMMAND [ARGS...]
 *
 * Prints "activator PID daemon PID", waits for the child and exits with its
 * status.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd, st;
	pid_t child;

	if (argc < 3 || strlen(argv[1]) >= sizeof(sa.sun_path)) {
		fprintf(stderr, "usage: ft_activate PATH COMMAND [ARGS...]\n");
		return 2;
	}
	strcpy(sa.sun_path, argv[1]);
	fd = socket(AF_UNIX, SOCK_STREAM, 0);
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || chmod(argv[1], 0666) < 0 ||
	    listen(fd, 64) < 0) {
		perror("ft_activate: socket");
		return 1;
	}
	child = fork();
	if (child < 0)
		return 1;
	if (child == 0) {
		char pid[32];

		if (fd != 3 && (dup2(fd, 3) < 0 || close(fd) < 0))
			_exit(1);
		snprintf(pid, sizeof(pid), "%d", (int)getpid());
		setenv("LISTEN_FDS", "1", 1);
		setenv("LISTEN_PID", pid, 1);
		execvp(argv[2], argv + 2);
		perror("ft_activate: exec");
		_exit(127);
	}
	printf("activator %d daemon %d\n", (int)getpid(), (int)child);
	fflush(stdout);
	if (waitpid(child, &st, 0) < 0)
		return 1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}
