/* client/ferry.c - libferry; see ferry.h for the contract, internal.h for
 * the handle.
 */
#include "internal.h"
#include "../proto/clock.h"
#include "../proto/ctl.h"
#include "../proto/ring.h"

#include <errno.h>
#include <linux/membarrier.h>
#include <sched.h>
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
#define DEFAULT_SPIN_US     20

static_assert(FERRY_MAX_RANKS == PROTO_MAX_RANKS, "the public limit is the protocol's");

/* A large item being put back together from its fragments. */
struct reasm {
	struct reasm *next;
	uint32_t src;
	uint16_t channel;
	uint8_t *buf;
	size_t len, cap;
};

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
				   : a->rx_off + ring_bytes(a->rx_size) > a->tx_off))
		return conn_seterr(-EPROTO, "ferryd sent an invalid shared-memory layout");
	f->region = mmap(NULL, a->region_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
	if (f->region == MAP_FAILED) {
		f->region = NULL;
		return conn_seterr(-errno, "mmap of the shared rings: %s", strerror(errno));
	}
	f->region_bytes = a->region_bytes;
	ring_attach(&f->tx, (uint8_t *)f->region + a->tx_off, a->tx_size, 0);
	ring_attach(&f->rx, (uint8_t *)f->region + a->rx_off, a->rx_size, 0);
	f->node = a->node;
	/* If the daemon fences for us before it sleeps, and the kernel lets it
	 * reach this process, publish every item without a fence (ring.h). */
	if ((a->flags & CTL_ATTACHED_MEMBARRIER) &&
	    syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED, 0, 0) == 0)
		f->tx.fenceless = 1;
	return 0;
}

static void destroy(struct ferry *f)
{
	ferry_release(f);
	while (f->reasm) {
		struct reasm *r = f->reasm;

		f->reasm = r->next;
		free(r->buf);
		free(r);
	}
	free(f->held);
	for (size_t i = f->stash_head; i < f->stash_len; i++)
		free((void *)f->stash[i].data);
	free(f->stash);
	if (f->region)
		munmap(f->region, f->region_bytes);
	if (f->efd_client >= 0)
		close(f->efd_client);
	if (f->efd_daemon >= 0)
		close(f->efd_daemon);
	if (f->epfd >= 0)
		close(f->epfd);
	if (f->sock >= 0)
		close(f->sock);
	free(f);
}

/* ferry_fd() is an epoll fd over efd_client and the socket, so that an
 * application waiting on it also wakes up when the daemon goes away. */
static int watch_both(struct ferry *f)
{
	struct epoll_event ev = { .events = EPOLLIN };

	f->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (f->epfd < 0 || epoll_ctl(f->epfd, EPOLL_CTL_ADD, f->efd_client, &ev) < 0 ||
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
	int fds[3], nfds = 0, len, ret;
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

	f = calloc(1, sizeof(*f));
	if (!f)
		return conn_seterr(-ENOMEM, "out of memory");
	f->sock = f->efd_client = f->efd_daemon = f->epfd = -1;
	f->step = 1;
	f->rank = (uint32_t)o.rank;
	f->size = (uint32_t)o.size;
	f->timeout_ms = o.timeout_ms;
	f->flags = o.flags;
	{
		int spin;

		f->spin_us = conn_env_int("FERRY_SPIN_US", &spin) == 1 ? (unsigned)spin : DEFAULT_SPIN_US;
	}
	ret = conn_connect(f, dir);
	if (ret < 0)
		goto err;

	n = ctl_encode_hello(buf, sizeof(buf), CTL_ROLE_ENDPOINT);
	len = (int)n;
	n = ctl_encode_join(buf + len, sizeof(buf) - (size_t)len, job, f->rank, f->size);
	if (n < 0) {
		ret = conn_seterr((int)n, "cannot encode JOIN");
		goto err;
	}
	len += (int)n;
	if (send(f->sock, buf, (size_t)len, MSG_NOSIGNAL) != len) {
		ret = conn_seterr(-ECONNRESET, "sending to ferryd: %s", strerror(errno));
		goto err;
	}

	deadline = o.timeout_ms < 0 ? 0 : proto_now_ms() + (uint64_t)o.timeout_ms;
	for (;;) {
		int wait = o.timeout_ms < 0 ? -1 : (int)(deadline > proto_now_ms() ? deadline - proto_now_ms() : 0);

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
			if (nfds != 3) {
				ret = conn_seterr(-EPROTO, "ferryd sent %d file descriptors, expected 3", nfds);
				goto err;
			}
			ret = map_region(f, &m.u.attached, fds[0]);
			close(fds[0]);
			f->efd_client = fds[1];
			f->efd_daemon = fds[2];
			nfds = 0;
			if (ret < 0)
				goto err;
		} else if (m.type == CTL_READY && f->region) {
			conn_drop_msg(f, len);
			ret = watch_both(f);
			if (ret < 0)
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

/* --- receiving --- */

FERRY_API void ferry_release(ferry_t *f)
{
	for (size_t i = 0; i < f->nheld; i++)
		free(f->held[i]);
	f->nheld = 0;
	if (f->region && ring_release(&f->rx))
		conn_wake(f->efd_daemon);
}

static struct reasm **find_reasm(struct ferry *f, uint32_t src)
{
	struct reasm **pp = &f->reasm;

	while (*pp && (*pp)->src != src)
		pp = &(*pp)->next;
	return pp;
}

/* Keeps buf until the next ferry_release frees it.  Returns 0 or -ENOMEM,
 * without a message: one caller still succeeds with the items it has. */
static int hold(struct ferry *f, void *buf)
{
	if (f->nheld == f->capheld) {
		size_t cap = f->capheld ? f->capheld * 2 : 8;
		void **h = realloc(f->held, cap * sizeof(*h));

		if (!h)
			return -ENOMEM;
		f->held = h;
		f->capheld = cap;
	}
	f->held[f->nheld++] = buf;
	return 0;
}

/* Adds a fragment; on the last one, moves the whole item to items[*n]. */
static int reassemble(struct ferry *f, const struct proto_rec *rec, const void *payload,
		      struct ferry_item *items, int *n)
{
	struct reasm **pp = find_reasm(f, rec->src), *r = *pp;

	if (!r) {
		r = calloc(1, sizeof(*r));
		if (!r)
			return conn_seterr(-ENOMEM, "out of memory reassembling an item");
		r->src = rec->src;
		r->channel = rec->channel;
		r->next = f->reasm;
		f->reasm = r;
		pp = &f->reasm;
	}
	if (r->channel != rec->channel || r->len + rec->len > FERRY_MAX_ITEM)
		return conn_seterr(-EPROTO, "ferryd delivered inconsistent pieces of an item from rank %u", rec->src);
	if (r->len + rec->len > r->cap) {
		size_t cap = r->cap ? r->cap * 2 : 4 * PROTO_FRAG_BYTES;
		uint8_t *b;

		while (cap < r->len + rec->len)
			cap *= 2;
		b = realloc(r->buf, cap);
		if (!b)
			return conn_seterr(-ENOMEM, "out of memory reassembling an item");
		r->buf = b;
		r->cap = cap;
	}
	memcpy(r->buf + r->len, payload, rec->len);
	r->len += rec->len;
	if (rec->flags & PROTO_REC_MORE)
		return 0;
	if (hold(f, r->buf) < 0)
		return conn_seterr(-ENOMEM, "out of memory");
	items[*n] = (struct ferry_item){ .data = r->buf, .len = (uint32_t)r->len, .src = r->src,
					 .channel = r->channel };
	(*n)++;
	*pp = r->next;
	free(r);
	return 0;
}

/* Moves items out of the stash (oldest first) into items[]. */
static int from_stash(struct ferry *f, struct ferry_item *items, int max)
{
	int n = 0;

	while (n < max && f->stash_head < f->stash_len) {
		struct ferry_item *it = &f->stash[f->stash_head++];

		if (hold(f, (void *)it->data) < 0)
			return n ? n : conn_seterr(-ENOMEM, "out of memory");
		items[n++] = *it;
	}
	if (f->stash_head == f->stash_len)
		f->stash_head = f->stash_len = 0;
	return n;
}

/* Takes up to max items out of the RX ring. */
static int collect(struct ferry *f, struct ferry_item *items, int max)
{
	int n = 0;

	while (n < max) {
		struct proto_rec rec;
		const void *payload;
		int ret = ring_peek(&f->rx, &rec, &payload);

		if (ret == 0)
			break;
		if (ret < 0)
			return f->dead = conn_seterr(-EPROTO, "ferryd wrote an invalid record into the RX ring");
		ring_consume(&f->rx, &rec);
		if (rec.kind == PROTO_REC_STEP) {
			if (rec.dst != f->completed + 1)
				return f->dead = conn_seterr(-EPROTO, "ferryd completed step %u after step %u",
							     rec.dst, f->completed);
			f->completed = rec.dst;
			continue;
		}
		if (rec.kind != PROTO_REC_ITEM || rec.src >= f->size)
			return f->dead = conn_seterr(-EPROTO, "ferryd wrote an unexpected record (kind %u) into the RX ring",
						     rec.kind);
		if (!(rec.flags & PROTO_REC_MORE) && !*find_reasm(f, rec.src)) {
			items[n++] = (struct ferry_item){ .data = payload, .len = rec.len, .src = rec.src,
							  .channel = rec.channel };
			continue;
		}
		ret = reassemble(f, &rec, payload, items, &n);
		if (ret < 0)
			return ret;
	}
	return n;
}

FERRY_API int ferry_recv(ferry_t *f, struct ferry_item *items, int max, int timeout_ms)
{
	uint64_t deadline = timeout_ms > 0 ? proto_now_ms() + (uint64_t)timeout_ms : 0;
	uint64_t spin_until = proto_now_ns() + f->spin_us * 1000ull;

	if (max <= 0)
		return conn_seterr(-EINVAL, "max must be positive");
	ferry_release(f);
	if (f->stash_len > f->stash_head)
		return from_stash(f, items, max);
	if (f->armed) {
		/* The application may have slept on ferry_fd(): reset it, and see
		 * whether it was the daemon going away that woke it. */
		uint64_t v;
		ssize_t r = read(f->efd_client, &v, sizeof(v));

		(void)r;
		ring_consumer_awake(&f->rx);
		f->armed = 0;
		conn_check(f);        /* items still in the ring come first */
	}
	for (;;) {
		int n = collect(f, items, max), ret, wait;

		if (n != 0)
			return n;
		if (f->dead)
			return f->dead;
		/* Pieces of a large item may have been copied out of the ring
		 * without completing an item: give their room back before
		 * waiting, or the daemon could never deliver the rest. */
		if (ring_release(&f->rx))
			conn_wake(f->efd_daemon);
		if (timeout_ms != 0 && proto_now_ns() < spin_until) {
			/* Poll, but let the daemon (or anyone) have the CPU: on
			 * a machine with more busy processes than cores, a
			 * spinning client would delay the very daemon that is
			 * to deliver its items.  Nearly free on an idle core. */
			sched_yield();
			continue;
		}
		if (ring_consumer_sleep(&f->rx)) {
			ring_consumer_awake(&f->rx);
			continue;
		}
		if (timeout_ms == 0) {
			f->armed = 1;   /* ferry_fd() now becomes readable on arrival */
			return 0;
		}
		wait = timeout_ms < 0 ? -1 : (int)(deadline > proto_now_ms() ? deadline - proto_now_ms() : 0);
		ret = conn_wait(f, wait);
		ring_consumer_awake(&f->rx);
		if (ret == -ETIMEDOUT)
			return 0;
		if (ret < 0)
			return ret;
	}
}

/* Appends a copy of it to the stash. */
static int stash_push(struct ferry *f, const struct ferry_item *it)
{
	void *copy;

	if (f->stash_len == f->stash_cap) {
		size_t cap = f->stash_cap ? 2 * f->stash_cap : 64;
		struct ferry_item *s = realloc(f->stash, cap * sizeof(*s));

		if (!s)
			return conn_seterr(-ENOMEM, "out of memory keeping items during ferry_step_wait");
		f->stash = s;
		f->stash_cap = cap;
	}
	copy = malloc(it->len ? it->len : 1);
	if (!copy)
		return conn_seterr(-ENOMEM, "out of memory keeping items during ferry_step_wait");
	memcpy(copy, it->data, it->len);
	f->stash[f->stash_len] = *it;
	f->stash[f->stash_len++].data = copy;
	return 0;
}

/* Copies what the RX ring holds into the stash, so that the daemon can keep
 * delivering (and the step complete) while the application waits. */
static int stash_ring(struct ferry *f)
{
	struct ferry_item it[64];
	int n;

	do {
		n = collect(f, it, 64);
		if (n < 0)
			return n;
		for (int i = 0; i < n; i++) {
			int ret = stash_push(f, &it[i]);

			if (ret < 0)
				return ret;
		}
		ferry_release(f);
	} while (n == 64);
	return 0;
}

FERRY_API int ferry_step_wait(ferry_t *f, int timeout_ms)
{
	uint64_t deadline = timeout_ms > 0 ? proto_now_ms() + (uint64_t)timeout_ms : 0;

	if (!f->step_done)
		return conn_seterr(-EINVAL, "ferry_step_wait without ferry_done in step %u", f->step);
	ferry_release(f);
	for (;;) {
		int ret, wait;

		ret = stash_ring(f);
		if (ret < 0)
			return ret;
		if (f->completed >= f->step) {
			f->step++;
			f->step_done = 0;
			return 0;
		}
		if (f->dead)
			return f->dead;
		if (ring_consumer_sleep(&f->rx)) {
			ring_consumer_awake(&f->rx);
			continue;
		}
		wait = timeout_ms < 0 ? -1 : (int)(deadline > proto_now_ms() ? deadline - proto_now_ms() : 0);
		if (timeout_ms >= 0 && wait == 0) {
			ring_consumer_awake(&f->rx);
			return conn_seterr(-ETIMEDOUT, "step %u: not complete within %d ms", f->step, timeout_ms);
		}
		ret = conn_wait(f, wait);
		ring_consumer_awake(&f->rx);
		if (ret < 0 && ret != -ETIMEDOUT)
			return ret;
	}
}

