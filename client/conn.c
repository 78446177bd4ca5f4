/* client/conn.c - libferry's side of the control socket: connecting,
 * control messages, waiting for the daemon; the environment that names the job
 * and the rank; the error text.  See internal.h.
 */
#include "internal.h"
#include "../proto/clock.h"
#include "../proto/ctl.h"

#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>

static _Thread_local char last_error[512];

int conn_seterr(int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(last_error, sizeof(last_error), fmt, ap);
	va_end(ap);
	return err;
}

void conn_clearerr(void)
{
	last_error[0] = '\0';
}

FERRY_API const char *ferry_last_error(void)
{
	return last_error;
}

FERRY_API const char *ferry_strerror(int err)
{
	switch (-err) {
	case 0: return "success";
	case ENOENT: return "no ferryd socket found (is ferryd running? is FERRY_RUNTIME_DIR right?)";
	case ECONNREFUSED: return "ferryd is not accepting connections (is it running?)";
	case ETIMEDOUT: return "timed out (waiting for the other ranks of the job, or for the daemon)";
	case EAGAIN: return "ring full: ferryd is applying backpressure; receive, then try again";
	case EMSGSIZE: return "item larger than FERRY_MAX_ITEM";
	case EINVAL: return "invalid argument (rank, size, channel or job name)";
	case EADDRINUSE: return "this rank of the job is already attached";
	case ECONNRESET: return "the connection to ferryd was lost";
	case EPIPE: return "a rank of the job left before it ended (ferry_last_error says which)";
	case EHOSTDOWN: return "a node or link the job needs was lost (ferry_last_error says which)";
	case EPROTO: return "protocol error between libferry and ferryd";
	case EUSERS: return "ferryd has too many clients";
	case EDQUOT: return "a per-user limit of ferryd was reached (ferry_last_error() says which)";
	case ENOBUFS: return "ferryd's memory for jobs and queued items is used up";
	case ENOMEM: return "out of memory";
	}
	return strerror(-err);
}

/* --- environment --- */

int conn_env_int(const char *name, int *out)
{
	const char *v = getenv(name);
	char *end;
	long x;

	if (!v || !*v)
		return 0;
	errno = 0;
	x = strtol(v, &end, 10);
	if (errno || *end || x < 0 || x > (long)FERRY_MAX_RANKS)
		return -1;
	*out = (int)x;
	return 1;
}

/* A Slurm job step's ids, if srun started this process: SLURM_STEP_ID set
 * and a step of tasks.  The batch script and salloc's shell have
 * SLURM_JOB_ID, SLURM_PROCID 0 and the allocation's SLURM_NTASKS but no
 * step id; Slurm's special steps (batch, extern, interactive: 0xfffffff0 and
 * above) are no steps of tasks either. */
static int slurm_step(const char **job_p, const char **step_p)
{
	const char *job = getenv("SLURM_JOB_ID"), *step = getenv("SLURM_STEP_ID");
	char *end;
	unsigned long id;

	if (!job || !*job || !step || !*step)
		return 0;
	errno = 0;
	id = strtoul(step, &end, 10);
	if (errno || *end || id >= 0xfffffff0ul)
		return 0;
	/* ... and this process is the step's task, not a rank that another
	 * launcher's proxy started (MPICH's or Intel MPI's hydra starts its
	 * proxies with srun: their ranks carry the proxy's SLURM_PROCID, and
	 * their own rank in PMI_RANK or PMIX_RANK; under srun --mpi=pmix the
	 * two are the same) */
	for (const char *const *v = (const char *const[]){ "PMIX_RANK", "PMI_RANK", NULL }; *v; v++) {
		const char *r = getenv(*v), *procid = getenv("SLURM_PROCID");

		if (r && *r && (!procid || strcmp(r, procid) != 0))
			return 0;
	}
	*job_p = job;
	*step_p = step;
	return 1;
}

/* Open MPI's launcher (mpirun, prterun) started this process.  It comes
 * before Slurm's variables: under Slurm, mpirun starts its daemons with
 * srun, and the ranks they start inherit that step's SLURM_PROCID and
 * SLURM_NTASKS, which count the daemons. */
static int ompi_launched(void)
{
	const char *r = getenv("OMPI_COMM_WORLD_RANK"), *n = getenv("OMPI_COMM_WORLD_SIZE");

	return r && *r && n && *n;
}

int conn_ranks_from_env(int *rank, int *size)
{
	static const char *const vars[][2] = {
		{ "FERRY_RANK", "FERRY_SIZE" },
		{ "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE" },
		{ "SLURM_PROCID", "SLURM_NTASKS" },
	};
	const char *job, *step;

	for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) {
		int r, s;

		if (i == 2 && !slurm_step(&job, &step))
			break;
		r = conn_env_int(vars[i][0], rank);
		s = conn_env_int(vars[i][1], size);
		if (r < 0 || s < 0)
			return conn_seterr(-EINVAL, "%s or %s is not a number", vars[i][0], vars[i][1]);
		if (r && s)
			return 0;
	}
	if (getenv("SLURM_JOB_ID"))
		return conn_seterr(-EINVAL, "rank and size unknown: SLURM_JOB_ID without a job step of its own (no "
				   "SLURM_STEP_ID: a batch script or an allocation's shell; or PMI_RANK or PMIX_RANK "
				   "other than SLURM_PROCID: a rank another launcher started through srun); start the "
				   "ranks with srun, or set FERRY_RANK and FERRY_SIZE");
	return conn_seterr(-EINVAL, "rank and size unknown: pass them in ferry_opts or set FERRY_RANK and FERRY_SIZE");
}

int conn_job_from_env(char *buf, size_t len)
{
	const char *v = getenv("FERRY_JOB"), *job, *step, *ns = getenv("PMIX_NAMESPACE");

	if (v && *v)
		snprintf(buf, len, "%s", v);
	else if (ompi_launched() && ns && *ns)
		snprintf(buf, len, "%s", ns);
	else if (slurm_step(&job, &step))
		snprintf(buf, len, "slurm-%s.%s", job, step);
	else if (ns && *ns)
		snprintf(buf, len, "%s", ns);
	else if (getenv("SLURM_JOB_ID"))
		return conn_seterr(-EINVAL, "job name unknown: SLURM_JOB_ID without a job step of its own (no "
				   "SLURM_STEP_ID: a batch script or an allocation's shell; or a rank another launcher "
				   "started through srun); start the ranks with srun, or set FERRY_JOB");
	else
		return conn_seterr(-EINVAL, "job name unknown: pass it in ferry_opts or set FERRY_JOB");
	return 0;
}

/* --- control socket --- */

int conn_connect(struct ferry *f, const char *dir)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int err;

	if ((size_t)snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/ferryd.sock", dir) >= sizeof(sa.sun_path))
		return conn_seterr(-ENAMETOOLONG, "runtime directory %s: path too long", dir);
	f->sock = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (f->sock < 0)
		return conn_seterr(-errno, "socket: %s", strerror(errno));
	if (connect(f->sock, (struct sockaddr *)&sa, sizeof(sa)) == 0) {
		int one = 1;

		/* Every message from the daemon then says which process sent
		 * it (poll_setup wants ferryd's CPUs; SO_PEERCRED names whoever
		 * listened, systemd under socket activation).  Without it we
		 * merely do not learn that. */
		(void)setsockopt(f->sock, SOL_SOCKET, SO_PASSCRED, &one, sizeof(one));
		return 0;
	}
	err = errno;
	if (err == ENOENT)
		return conn_seterr(-ENOENT,
				   "no ferryd socket at %s: is ferryd running? (FERRY_RUNTIME_DIR selects another directory)",
				   sa.sun_path);
	if (err == ECONNREFUSED)
		return conn_seterr(-ECONNREFUSED, "nothing listens on %s: ferryd is not running", sa.sun_path);
	return conn_seterr(-err, "connecting to %s: %s", sa.sun_path, strerror(err));
}

int conn_read_msg(struct ferry *f, struct ctl_msg *m, int *fds, int *nfds, int timeout_ms)
{
	uint64_t deadline = timeout_ms < 0 ? 0 : proto_now_ms() + (uint64_t)timeout_ms;

	for (;;) {
		union {
			char buf[CMSG_SPACE(CONN_MAX_FDS * sizeof(int)) + CMSG_SPACE(sizeof(struct ucred))];
			struct cmsghdr align;
		} cbuf;
		struct iovec iov = { .iov_base = f->in + f->in_len, .iov_len = sizeof(f->in) - f->in_len };
		struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1,
				     .msg_control = cbuf.buf, .msg_controllen = sizeof(cbuf.buf) };
		struct pollfd pfd = { .fd = f->sock, .events = POLLIN };
		ssize_t used = ctl_decode(f->in, f->in_len, m);
		int wait;

		if (used < 0 && ctl_hdr_version(f->in) != CTL_VERSION)
			return conn_seterr(-EPROTO, "ferryd speaks control protocol version %u, this libferry (ferry %s) "
					   "version %u: libferry and ferryd must come from the same ferry release",
					   ctl_hdr_version(f->in), FERRY_VERSION, CTL_VERSION);
		if (used < 0)
			return conn_seterr(-EPROTO, "malformed control message from ferryd");
		if (used > 0)
			return (int)used;
		if (f->in_len == sizeof(f->in))
			return conn_seterr(-EPROTO, "control message from ferryd too long");
		wait = conn_wait_ms(deadline, timeout_ms < 0);
		if (poll(&pfd, 1, wait) == 0)
			return -ETIMEDOUT;
		used = recvmsg(f->sock, &mh, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
		if (used == 0)
			return conn_seterr(-ECONNRESET, "ferryd closed the connection");
		if (used < 0) {
			if (errno == EAGAIN || errno == EINTR)
				continue;
			return conn_seterr(-errno, "receiving from ferryd: %s", strerror(errno));
		}
		for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm)) {
			size_t n = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);

			if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_CREDENTIALS &&
			    cm->cmsg_len >= CMSG_LEN(sizeof(struct ucred))) {
				struct ucred cred;

				/* The kernel's word for who sent it (SO_PASSCRED):
				 * ferryd itself, also where another process made
				 * the listening socket (socket activation). */
				memcpy(&cred, CMSG_DATA(cm), sizeof(cred));
				if (cred.pid > 0)
					f->daemon_pid = cred.pid;
				continue;
			}
			if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
				continue;
			for (size_t i = 0; i < n; i++) {
				int fd;

				memcpy(&fd, CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
				if (*nfds < CONN_MAX_FDS)
					fds[(*nfds)++] = fd;
				else
					close(fd);
			}
		}
		f->in_len += (size_t)used;
	}
}

void conn_drop_msg(struct ferry *f, int len)
{
	memmove(f->in, f->in + len, f->in_len - (size_t)len);
	f->in_len -= (size_t)len;
}

int conn_check(struct ferry *f)
{
	struct ctl_msg m;
	int fds[CONN_MAX_FDS], nfds = 0, len;

	if (f->dead)
		return f->dead;
	/* every COLL_DONE counted so far is in the socket now (coll.c sock_due) */
	if (f->done)
		f->sock_seen = atomic_load_explicit(&f->done->sock_done, memory_order_acquire);
	for (;;) {
		nfds = 0;
		len = conn_read_msg(f, &m, fds, &nfds, 0);
		for (int i = 0; i < nfds; i++)
			close(fds[i]);
		if (len <= 0 || m.type != CTL_COLL_DONE || nfds)
			break;
		conn_drop_msg(f, len);
		if (coll_done(f, m.u.coll_done.group, m.u.coll_done.seq, m.u.coll_done.err, m.u.coll_done.text) < 0) {
			f->dead = conn_seterr(-EPROTO, "ferryd ended collective operation %u of group %08x, which was "
					      "not posted", m.u.coll_done.seq, m.u.coll_done.group);
			return f->dead;
		}
	}
	if (len == -ETIMEDOUT)
		return 0;
	if (len > 0 && m.type == CTL_ERROR)
		f->dead = conn_seterr(-ECONNRESET, "ferryd: %s", m.u.error.text);
	else if (len > 0)
		f->dead = conn_seterr(-EPROTO, "unexpected control message %u from ferryd", m.type);
	else
		f->dead = len;
	return f->dead;
}

int conn_wait(struct ferry *f, int timeout_ms)
{
	struct pollfd pfd[2] = {
		{ .fd = f->efd_client, .events = POLLIN },
		{ .fd = f->sock, .events = POLLIN },
	};
	int n = poll(pfd, 2, timeout_ms);
	uint64_t v;

	if (n < 0 && errno != EINTR)
		return conn_seterr(-errno, "poll: %s", strerror(errno));
	if (n <= 0)
		return n == 0 ? -ETIMEDOUT : 0;
	if ((pfd[1].revents & (POLLIN | POLLHUP | POLLERR)) && conn_check(f) < 0)
		return f->dead;
	if (pfd[0].revents & POLLIN) {
		ssize_t r = read(f->efd_client, &v, sizeof(v));

		(void)r;
	}
	return 0;
}
