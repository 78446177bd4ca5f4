/* tests/progs/ft_deny.c - runs a program under a seccomp filter that kills
 * it when it makes one system call, as a systemd unit's SystemCallFilter=
 * without that call does (the filter outlives exec, as the unit's does).
 *
 *   ft_deny CALL PROGRAM [ARGS...]
 *
 * Every other call is allowed.  Execs PROGRAM (its pid is ours); exits 2 if
 * the filter cannot be made or PROGRAM cannot be run.
 */
#include <errno.h>
#include <seccomp.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	scmp_filter_ctx ctx;
	int nr, ret;

	if (argc < 3) {
		fprintf(stderr, "usage: ft_deny CALL PROGRAM [ARGS...]\n");
		return 2;
	}
	nr = seccomp_syscall_resolve_name(argv[1]);
	if (nr == __NR_SCMP_ERROR) {
		fprintf(stderr, "ft_deny: %s: no such system call\n", argv[1]);
		return 2;
	}
	ctx = seccomp_init(SCMP_ACT_ALLOW);
	if (!ctx) {
		fprintf(stderr, "ft_deny: seccomp_init failed\n");
		return 2;
	}
	/* no_new_privs is set by seccomp_load (the default of libseccomp), as
	 * under the unit's NoNewPrivileges=. */
	ret = seccomp_rule_add(ctx, SCMP_ACT_KILL_PROCESS, nr, 0);
	if (ret == 0)
		ret = seccomp_load(ctx);
	seccomp_release(ctx);
	if (ret < 0) {
		fprintf(stderr, "ft_deny: seccomp %s: %s\n", argv[1], strerror(-ret));
		return 2;
	}
	execvp(argv[2], argv + 2);
	fprintf(stderr, "ft_deny: %s: %s\n", argv[2], strerror(errno));
	return 2;
}
