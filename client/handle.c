/* client/handle.c - libferry: opening a handle (joining the job, mapping the
 * shared-memory region), closing it, and what it knows of the job.  See
 * ferry.h for the contract, internal.h for the handle.
 */
#include "internal.h"
#include "../proto/clock.h"
#include "../proto/ctl.h"
#include "../proto/ring.h"

#include <errno.h>
#include <linux/membarrier.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#define DEFAULT_RUNTIME_DIR "/run/ferry"
#define DEFAULT_TIMEOUT_MS  60000

static_assert(FERRY_MAX_RANKS == PROTO_MAX_RANKS, "the public limit is the protocol's");

/* Maps the region from ATTACHED after checking its layout. */
static int map_region(struct ferry *f, const struct ctl_attached_wire *a, int memfd)
{
	struct stat st;

	if (fstat(memfd, &st) < 0 || (uint64_t)st.st_size < a->region_bytes ||
	    !ring_size_ok(a->tx_size) || !ring_size_ok(a->rx_size) ||
	    a->tx_off % PROTO_CACHELINE || a->rx_off % PROTO_CACHELINE ||
	    a->tx_off > a->region_bytes || ring_bytes(a->tx_size) > a->region_bytes - a->tx_off ||
	    a->rx_off > a->region_bytes || ring_bytes(a->rx_size) > a->region_bytes - a->rx_off ||
	    (a->tx_off < a->rx_off ? a->tx_off + ring_bytes(a->tx_size) > a->rx_off
				   : a->rx_off + ring_bytes(a->rx_size) > a->tx_off) ||
	    a->done_off % PROTO_CACHELINE || a->done_off > a->region_bytes ||
	    sizeof(struct proto_done_shared) > a->region_bytes - a->done_off ||
	    (a->done_off < a->tx_off + ring_bytes(a->tx_size) && a->tx_off < a->done_off + sizeof(*f->done)) ||
	    (a->done_off < a->rx_off + ring_bytes(a->rx_size) && a->rx_off < a->done_off + sizeof(*f->done)))
		return conn_seterr(-EPROTO, "ferryd sent an invalid shared-memory layout");
	/* Mapped whole now (ferryd allocated the pages): no page faults while
	 * the first items go through. */
	f->region = mmap(NULL, a->region_bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, memfd, 0);
	if (f->region == MAP_FAILED) {
		f->region = NULL;
		return conn_seterr(-errno, "mmap of the shared rings: %s", strerror(errno));
	}
	f->region_bytes = a->region_bytes;
	ring_attach(&f->tx, (uint8_t *)f->region + a->tx_off, a->tx_size, 0);
	ring_attach(&f->rx, (uint8_t *)f->region + a->rx_off, a->rx_size, 0);
	f->done = (struct proto_done_shared *)((uint8_t *)f->region + a->done_off);
	/* The post page follows the done page, where the region holds it (a
	 * ferryd without it: posts go on the socket). */
	if (a->region_bytes - a->done_off >= PROTO_DONE_BYTES + PROTO_POST_BYTES &&
	    a->done_off + PROTO_DONE_BYTES >= a->rx_off + ring_bytes(a->rx_size) &&
	    a->done_off + PROTO_DONE_BYTES >= a->tx_off + ring_bytes(a->tx_size))
		f->post = (struct proto_post_shared *)((uint8_t *)f->done + PROTO_DONE_BYTES);
	f->node = a->node;
	/* If the daemon fences for us before it sleeps, and the kernel lets it
	 * reach this process, publish items without a fence for as long as
	 * the TX ring's header says the daemon still does (ring.h).  Not
	 * with FERRY_BATCH: a publish per batch of up to 128 items saves
	 * next to nothing, and the daemon's membarrier calls are dear where
	 * the cores are busy (ring.h ring_judge), so we answer at once. */
	ring_producer_set_fenceless(&f->tx, (a->flags & CTL_ATTACHED_MEMBARRIER) && !(f->flags & FERRY_BATCH) &&
				    syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED, 0, 0) == 0);
	return 0;
}

/* Frees the direct rings (the fds, the mapping, the tables). */
static void direct_free(struct ferry *f)
{
	struct direct *dr = f->dr;

	if (dr) {
		for (uint32_t j = 0; dr->out && j < dr->n; j++) {
			if (dr->region)
				ring_producer_answer(&dr->out[j].r);    /* (answer_withdrawals) */
			if (dr->out[j].efd >= 0)
				close(dr->out[j].efd);
		}
		if (dr->region)
			munmap(dr->region, dr->region_bytes);
		free(dr->out);
		free(dr->in);
		free(dr);
	}
	free(f->direct_of);
	f->dr = NULL;
	f->direct_of = NULL;
}

/* Takes the job's direct rings from CTL_DIRECT: fds[0] the region, then
 * each slot's eventfd (all of them ours now, also on failure). */
static int direct_setup(struct ferry *f, const struct ctl_msg *m, const int *fds, int nfds)
{
	const struct ctl_direct_wire *w = &m->u.direct.w;
	struct direct *dr;
	struct stat st;
	int ret = 0, registered, env;
	long mb;

	if (f->dr || (uint32_t)nfds != 1 + w->n) {
		ret = conn_seterr(-EPROTO, "ferryd sent direct rings with %d file descriptors for %u ranks", nfds, w->n);
		goto err_fds;
	}
	dr = calloc(1, sizeof(*dr));
	f->direct_of = calloc(f->size, 1);
	if (dr) {
		dr->out = calloc(w->n, sizeof(*dr->out));
		dr->in = calloc(w->n, sizeof(*dr->in));
	}
	if (!dr || !f->direct_of || !dr->out || !dr->in) {
		if (dr) {
			free(dr->out);
			free(dr->in);
		}
		free(dr);
		ret = conn_seterr(-ENOMEM, "out of memory for direct rings");
		goto err_fds;
	}
	f->dr = dr;
	dr->n = w->n;
	dr->slot = w->slot;
	for (uint32_t j = 0; j < w->n; j++)
		dr->out[j].efd = dr->in[j].efd = fds[1 + j];
	/* (The decoder checked n, slot, the ranks' distinctness and the size.) */
	if (m->u.direct.ranks[w->slot] != f->rank) {
		ret = conn_seterr(-EPROTO, "ferryd gave rank %u the direct slot of rank %u", f->rank,
				  m->u.direct.ranks[w->slot]);
		goto err_mem;
	}
	for (uint32_t j = 0; j < w->n; j++)
		if (m->u.direct.ranks[j] >= f->size) {
			ret = conn_seterr(-EPROTO, "ferryd gave a direct slot to rank %u of %u", m->u.direct.ranks[j],
					  f->size);
			goto err_mem;
		}
	if (fstat(fds[0], &st) < 0 || (uint64_t)st.st_size < w->region_bytes) {
		ret = conn_seterr(-EPROTO, "ferryd sent a direct ring region smaller than it said");
		goto err_mem;
	}
	/* Not populated: the pages of a ring are allocated as the two ends
	 * use it (a job of n local ranks has n * n rings, most of which may
	 * never carry much). */
	dr->region = mmap(NULL, w->region_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fds[0], 0);
	if (dr->region == MAP_FAILED) {
		dr->region = NULL;
		ret = conn_seterr(-errno, "mmap of the direct rings: %s", strerror(errno));
		goto err_mem;
	}
	close(fds[0]);
	dr->region_bytes = w->region_bytes;
	dr->gone = (const _Atomic uint8_t *)((const uint8_t *)dr->region + PROTO_DIRECT_GONE);
	/* Fenceless publish both ways (proto/ring.h "Late offers"): we offer
	 * our writers to run membarrier before we sleep if the kernel has
	 * the command, and write without a fence where our readers offer
	 * it, if their membarrier reaches us (registered).  Every end
	 * offers when this message reaches it, which may be after its
	 * writers began: "Late offers" says why that is sound. */
	/* (FERRY_DIRECT_FENCELESS=0: no offer, for measuring the difference.) */
	mb = syscall(SYS_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);
	mb = mb >= 0 && (mb & MEMBARRIER_CMD_GLOBAL_EXPEDITED);
	registered = mb && syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED, 0, 0) == 0;
	/* (One call to try: a seccomp filter may allow the query only.) */
	dr->fences = mb && !(conn_env_int("FERRY_DIRECT_FENCELESS", &env) == 1 && env == 0) &&
		     syscall(SYS_membarrier, MEMBARRIER_CMD_GLOBAL_EXPEDITED, 0, 0) == 0;
	for (uint32_t j = 0; j < w->n; j++) {
		uint32_t rank = m->u.direct.ranks[j];

		/* (From zero, whatever the header says by now: a process of
		 * the job may have written anything there, proto/direct.h.) */
		ring_attach_new(&dr->out[j].r, (uint8_t *)dr->region +
				proto_direct_ring_off(w->n, w->ring_size, w->slot, j), w->ring_size);
		ring_attach_new(&dr->in[j].r, (uint8_t *)dr->region +
				proto_direct_ring_off(w->n, w->ring_size, j, w->slot), w->ring_size);
		ring_producer_await_offer(&dr->out[j].r, registered && !(f->flags & FERRY_BATCH)); /* (see map_region) */
		if (dr->fences)
			ring_consumer_offer_fenceless(&dr->in[j].r);
		dr->out[j].rank = dr->in[j].rank = rank;
		dr->out[j].slot = dr->in[j].slot = j;
		f->direct_of[rank] = (uint8_t)(j + 1);
	}
	return 0;

err_mem:
	close(fds[0]);
	direct_free(f);
	return ret;
err_fds:
	for (int i = 0; i < nfds; i++)
		close(fds[i]);
	return ret;
}

/* FERRY_BATCH: a batch per destination rank, of 1 MiB / size bytes (at
 * least 512, at most PROTO_BATCH_MAX), or $FERRY_BATCH_BYTES within those
 * bounds; the buffers themselves come with a rank's first item. */
static int batch_setup(struct ferry *f)
{
	int env;
	uint32_t cap = (1u << 20) / f->size;

	if (conn_env_int("FERRY_BATCH_BYTES", &env) == 1)
		cap = (uint32_t)env;
	cap &= ~7u;
	cap = cap < 512 ? 512 : cap > PROTO_BATCH_MAX ? PROTO_BATCH_MAX : cap;
	f->batch_cap = cap;
	f->batch = calloc(f->size, sizeof(*f->batch));
	f->batch_open = calloc(f->size, sizeof(*f->batch_open));
	if (!f->batch || !f->batch_open)
		return conn_seterr(-ENOMEM, "out of memory for batches");
	return 0;
}

static void destroy(struct ferry *f)
{
	ferry_release(f);
	rx_free(f);
	batch_free(f);
	direct_free(f);
	mem_free_all(f);
	free(f->layout);
	if (f->region)
		munmap(f->region, f->region_bytes);
	if (f->efd_client >= 0)
		close(f->efd_client);
	if (f->efd_daemon >= 0)
		close(f->efd_daemon);
	if (f->efd_coll >= 0)
		close(f->efd_coll);
	if (f->epfd >= 0)
		close(f->epfd);
	if (f->sock >= 0)
		close(f->sock);
	free(f);
}

/* ferry_fd() is an epoll fd over efd_client, efd_coll and the socket, so
 * that an application waiting on it also wakes up when a collective ends
 * and when the daemon goes away. */
static int watch_both(struct ferry *f)
{
	struct epoll_event ev = { .events = EPOLLIN };

	f->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (f->epfd < 0 || epoll_ctl(f->epfd, EPOLL_CTL_ADD, f->efd_client, &ev) < 0 ||
	    epoll_ctl(f->epfd, EPOLL_CTL_ADD, f->efd_coll, &ev) < 0 ||
	    epoll_ctl(f->epfd, EPOLL_CTL_ADD, f->sock, &ev) < 0)
		return conn_seterr(-errno, "epoll for ferry_fd: %s", strerror(errno));
	return 0;
}

FERRY_API int ferry_open(ferry_t **f_p, const struct ferry_opts *opts)
{
	struct ferry_opts o = opts ? *opts : (struct ferry_opts){ 0 };
	char job[PROTO_NAME_MAX + 2], buf[256];
	const char *dir;
	struct ferry *f;
	struct ctl_msg m;
	int fds[CONN_MAX_FDS], nfds = 0, len, ret, env;
	uint64_t deadline;
	ssize_t n;

	conn_clearerr();
	if (o.job)
		snprintf(job, sizeof(job), "%s", o.job);
	else if ((ret = conn_job_from_env(job, sizeof(job))) < 0)
		return ret;
	if (!proto_name_ok(job, strlen(job)))
		return conn_seterr(-EINVAL, "job name \"%s\": must be 1 to %d printable characters without spaces",
				   job, PROTO_NAME_MAX);
	if (o.size == 0 && (ret = conn_ranks_from_env(&o.rank, &o.size)) < 0)
		return ret;
	if (o.size < 1 || (unsigned)o.size > FERRY_MAX_RANKS || o.rank < 0 || o.rank >= o.size)
		return conn_seterr(-EINVAL, "rank %d of size %d: need 0 <= rank < size <= %u", o.rank, o.size,
				   FERRY_MAX_RANKS);
	if (o.timeout_ms == 0) {
		int t;

		o.timeout_ms = conn_env_int("FERRY_TIMEOUT_MS", &t) == 1 ? t : DEFAULT_TIMEOUT_MS;
	}
	dir = o.runtime_dir ? o.runtime_dir : getenv("FERRY_RUNTIME_DIR");
	if (!dir || !*dir)
		dir = DEFAULT_RUNTIME_DIR;

	f = handle_alloc();
	if (!f)
		return conn_seterr(-ENOMEM, "out of memory");
	f->sock = f->efd_client = f->efd_daemon = f->efd_coll = f->epfd = -1;
	f->step = 1;
	f->rank = (uint32_t)o.rank;
	f->src_word = (uint64_t)f->rank << 32;
	f->size = (uint32_t)o.size;
	f->timeout_ms = o.timeout_ms;
	f->flags = o.flags;
	ret = conn_connect(f, dir);
	if (ret < 0)
		goto err;

	n = ctl_encode_hello(buf, sizeof(buf), CTL_ROLE_ENDPOINT);
	len = (int)n;
	/* Direct rings to the job's other ranks on this node, unless
	 * $FERRY_DIRECT=0 (README, "Direct rings"). */
	n = ctl_encode_join_flags(buf + len, sizeof(buf) - (size_t)len, job, f->rank, f->size,
				  conn_env_int("FERRY_DIRECT", &env) == 1 && env == 0 ? 0 : CTL_JOIN_DIRECT);
	if (n < 0) {
		ret = conn_seterr((int)n, "cannot encode JOIN");
		goto err;
	}
	len += (int)n;
	if (send(f->sock, buf, (size_t)len, MSG_NOSIGNAL) != len) {
		int e = errno;

		/* A daemon that refuses the connection (a limit) sends an
		 * ERROR and closes it, maybe before this send: read why. */
		len = conn_read_msg(f, &m, fds, &nfds, 0);
		if (len > 0 && m.type == CTL_ERROR)
			ret = conn_seterr(-m.u.error.err, "ferryd: %s", m.u.error.text);
		else
			ret = conn_seterr(-ECONNRESET, "sending to ferryd: %s", strerror(e));
		goto err;
	}

	deadline = o.timeout_ms < 0 ? 0 : proto_now_ms() + (uint64_t)o.timeout_ms;
	for (;;) {
		int wait = conn_wait_ms(deadline, o.timeout_ms < 0);

		len = conn_read_msg(f, &m, fds, &nfds, wait);
		if (len == -ETIMEDOUT) {
			if (f->region)
				ret = conn_seterr(-ETIMEDOUT, "job %s: not all %u ranks joined within %d ms",
						  job, f->size, o.timeout_ms);
			else
				ret = conn_seterr(-ETIMEDOUT, "job %s: ferryd did not answer within %d ms",
						  job, o.timeout_ms);
			goto err;
		}
		if (len < 0) {
			ret = len;
			goto err;
		}
		if (m.type == CTL_ERROR) {
			ret = conn_seterr(-m.u.error.err, "ferryd: %s", m.u.error.text);
			goto err;
		}
		if (m.type == CTL_ATTACHED && !f->region) {
			if (nfds != 4) {
				ret = conn_seterr(-EPROTO, "ferryd sent %d file descriptors, expected 4", nfds);
				goto err;
			}
			ret = map_region(f, &m.u.attached, fds[0]);
			close(fds[0]);
			f->efd_client = fds[1];
			f->efd_daemon = fds[2];
			f->efd_coll = fds[3];
			nfds = 0;
			if (ret < 0)
				goto err;
		} else if (m.type == CTL_DIRECT && f->region && !f->dr) {
			ret = direct_setup(f, &m, fds, nfds);
			nfds = 0;
			if (ret < 0)
				goto err;
		} else if (m.type == CTL_READY && f->region) {
			conn_drop_msg(f, len);
			ret = watch_both(f);
			if (ret < 0)
				goto err;
			poll_setup(f);          /* once the daemon's messages said who it is */
			if ((f->flags & FERRY_BATCH) && (ret = batch_setup(f)) < 0)
				goto err;
			break;
		} else {
			ret = conn_seterr(-EPROTO, "unexpected control message %u from ferryd", m.type);
			goto err;
		}
		conn_drop_msg(f, len);
	}
	*f_p = f;
	return 0;

err:
	for (int i = 0; i < nfds; i++)
		close(fds[i]);
	destroy(f);
	return ret;
}

FERRY_API int ferry_close(ferry_t *f)
{
	int ret = 0;

	if (!f)
		return 0;
	if (coll_outstanding(f))
		return conn_seterr(-EBUSY, "collective requests are outstanding: ferry_wait for them first");
	if (f->root)
		return group_close(f);
	if (f->nsubs)
		return conn_seterr(-EBUSY, "%u group handles (ferry_split) are open: ferry_close them first",
				   f->nsubs);
	if (!f->dead)
		ret = tx_drain(f, f->timeout_ms);
	destroy(f);
	return ret;
}

FERRY_API int ferry_rank(const ferry_t *f)
{
	return (int)f->rank;
}

FERRY_API int ferry_size(const ferry_t *f)
{
	return (int)f->size;
}

FERRY_API int ferry_fd(const ferry_t *f)
{
	return f->epfd;
}
