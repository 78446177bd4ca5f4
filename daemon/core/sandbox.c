/* daemon/core/sandbox.c - see sandbox.h.
 *
 * What a call outside the list does: it kills the process
 * (SCMP_ACT_KILL_PROCESS), as a forbidden call does under the unit's
 * SystemCallFilter=, rather than fail with EPERM.  The filter is there for
 * the day ferryd runs code it did not mean to (a memory-safety bug reached
 * by a peer or a client): a process that makes a call it never makes is not
 * doing ferryd's work any more, and letting it go on, trying other calls,
 * is what the filter must not do.  Nothing in the process can catch or
 * ignore that kill, where a trapped call could be answered by a signal
 * handler that the attacker installs or overwrites.  An EPERM on a call
 * ferryd does make but that is missing from the list would turn into a
 * misleading error on some path taken rarely, half-working; a kill is
 * loud, logged by the kernel with the call's number (audit type 1326:
 * dmesg, journalctl -k), and what follows is the restart of a node that the
 * cluster handles anyway (peers drop its links, clients get ECONNRESET, the
 * unit restarts it).  daemon.seccomp = "log" lets such calls through with
 * the kernel logging them, to find what a new RDMA provider or name service
 * needs before turning the kill back on.
 *
 * The list is written for x86_64 (other architectures name some calls
 * differently: unlinkat for unlink, ppoll for poll); calls of another
 * architecture's ABI (x32, i386) kill the process too. */
#include "sandbox.h"
#include "log.h"

#include <errno.h>
#include <sched.h>
#include <seccomp.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

static const struct call {
	const char *name;
	int san;                        /* only in sanitizer builds */
} calls[] = {
#define CALL(n) { #n, 0 },
#define START(n)
#ifdef FERRY_SANITIZERS
#define SAN(n) { #n, 1 },
#else
#define SAN(n)
#endif
#include "sandbox.def"
#undef CALL
#undef START
#undef SAN
};

const char *sandbox_mode_name(int mode)
{
	switch (mode) {
	case SANDBOX_KILL: return "kill";
	case SANDBOX_LOG: return "log";
	case SANDBOX_OFF: return "off";
	}
	return "?";
}

void sandbox_list(FILE *out)
{
	for (size_t i = 0; i < sizeof(calls) / sizeof(calls[0]); i++)
		fprintf(out, "%s%s\n", calls[i].name, calls[i].san ? " san" : "");
}

/* Argument arg equals v.  (SCMP_A0(SCMP_CMP_EQ, v) leaves datum_b out of
 * its initialiser, which clang's -Wmissing-field-initializers rejects.) */
static struct scmp_arg_cmp arg_is(unsigned arg, scmp_datum_t v)
{
	return (struct scmp_arg_cmp){ .arg = arg, .op = SCMP_CMP_EQ, .datum_a = v };
}

/* Calls allowed only with some arguments; the rest of the list is allowed
 * whatever the arguments. */
static int narrowed(scmp_filter_ctx ctx, int nr, int *done_p)
{
	static const int families[] = { AF_UNIX, AF_INET, AF_INET6, AF_NETLINK };
	int ret = 0;

	*done_p = 1;
	if (nr == SCMP_SYS(socket)) {
		/* The address families of the unit's RestrictAddressFamilies=:
		 * clients, peers, DNS, and libibverbs' netlink. */
		for (size_t i = 0; i < sizeof(families) / sizeof(families[0]) && ret == 0; i++)
			ret = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 1, arg_is(0, (scmp_datum_t)families[i]));
	} else if (nr == SCMP_SYS(mmap)) {
		/* MemoryDenyWriteExecute=: never writable and executable at
		 * once (libraries loaded later map code read-only). */
		ret = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 1, SCMP_A2(SCMP_CMP_MASKED_EQ, PROT_EXEC, 0));
		if (ret == 0)
			ret = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 1, SCMP_A2(SCMP_CMP_MASKED_EQ, PROT_WRITE, 0));
	} else if (nr == SCMP_SYS(mprotect)) {
		ret = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 1, SCMP_A2(SCMP_CMP_MASKED_EQ, PROT_EXEC, 0));
	} else if (nr == SCMP_SYS(clone)) {
#ifndef FERRY_SANITIZERS
		/* A thread of this process (core/closer.c), never a process,
		 * and none in new namespaces, traced or under another parent. */
		const scmp_datum_t thread = CLONE_THREAD | CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_SIGHAND;
		const scmp_datum_t never = CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER |
					   CLONE_NEWPID | CLONE_NEWNET | CLONE_PARENT | CLONE_PTRACE | CLONE_UNTRACED |
					   CLONE_VFORK;

		ret = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 1, SCMP_A0(SCMP_CMP_MASKED_EQ, thread | never, thread));
#else
		*done_p = 0;
#endif
	} else if (nr == SCMP_SYS(clone3)) {
		ret = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), nr, 0);
	} else if (nr == SCMP_SYS(tgkill)) {
		/* abort() signals itself; no other process. */
		ret = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 1, arg_is(0, (scmp_datum_t)getpid()));
	} else {
		*done_p = 0;
	}
	return ret;
}

int sandbox_init(int mode)
{
	scmp_filter_ctx ctx;
	unsigned n = 0;
	int ret;

	if (mode == SANDBOX_OFF) {
		log_warn("daemon.seccomp = \"off\": no system call filter");
		return 0;
	}
	ctx = seccomp_init(mode == SANDBOX_LOG ? SCMP_ACT_LOG : SCMP_ACT_KILL_PROCESS);
	if (!ctx) {
		/* libseccomp checks what the kernel offers first (valgrind,
		 * for one, does not know the seccomp call). */
		log_err("seccomp: cannot set up a system call filter here; daemon.seccomp = \"off\" runs without");
		return -ENOSYS;
	}
	if ((ret = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS)) < 0 ||
	    (ret = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_NNP, 1)) < 0 ||
	    (ret = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_TSYNC, 1)) < 0) {
		log_err("seccomp: setting the filter's attributes: %s", strerror(-ret));
		goto out;
	}
	for (size_t i = 0; i < sizeof(calls) / sizeof(calls[0]); i++) {
		int nr = seccomp_syscall_resolve_name(calls[i].name), done;

		if (nr == __NR_SCMP_ERROR) {
			/* Not a call of this architecture: nothing to allow. */
			log_debug("seccomp: no system call %s here", calls[i].name);
			continue;
		}
		ret = narrowed(ctx, nr, &done);
		if (ret == 0 && !done)
			ret = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 0);
		if (ret < 0) {
			log_err("seccomp: allowing %s: %s", calls[i].name, strerror(-ret));
			goto out;
		}
		n++;
	}
	ret = seccomp_load(ctx);
	if (ret < 0) {
		log_err("seccomp: loading the filter: %s", strerror(-ret));
		goto out;
	}
	log_info("seccomp: %u system calls allowed; any other %s", n,
		 mode == SANDBOX_LOG ? "is made, and logged by the kernel (daemon.seccomp = \"log\")" :
				       "kills the daemon");
out:
	seccomp_release(ctx);
	return ret;
}

int sandbox_probe(void)
{
	static char path[] = "/nonexistent/ferryd-sandbox-probe";
	char *const argv[] = { path, NULL }, *const envp[] = { NULL };

	execve(path, argv, envp);
	return -errno;
}
