/* daemon/local/endpoint.c - see endpoint.h. */
#include "endpoint.h"
#include "mem.h"
#include "../../proto/clock.h"
#include "direct.h"
#include "user.h"
#include "../core/log.h"

#include <assert.h>
#include <errno.h>
#include <sched.h>
#include <fcntl.h>
#include <linux/membarrier.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

struct ep_stats ep_stats;

static struct {
	const struct conf *conf;
	uint32_t self;
	struct ep *all;
	uint32_t count;
	uint64_t region_bytes;          /* of all endpoints (and lenders that keep one) */
	struct ep_lender *kept;         /* lenders of closed endpoints with loans out */
	void (*take_back)(struct ep *ep);       /* ep_set_close_hook */
	int exiting;                    /* ep_fini: closing everything, nothing is written any more */
	int membarrier;                 /* we fence for clients before sleeping */
	struct ring_judge judge;        /* ... and whether it pays (proto/ring.h ring_judge) */
	struct loop_timer recheck;      /* looks at TX rings whose clients may not fence */
	uint32_t sharing;               /* endpoints whose clients may share ferryd's CPUs (!other_cpus) */
} endpoints;

/* How often the loop looks at TX rings whose clients were offered the
 * fenceless publish, once it has been withdrawn and until each client says
 * it fences (proto/ring.h): the longest a record published in that window
 * can wait. */
#define RECHECK_NS (10 * 1000 * 1000ull)

static void wake(int efd)
{
	uint64_t one = 1;

	/* EAGAIN means the counter is already huge: the peer will wake anyway. */
	if (write(efd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		log_rl_warn("eventfd write: %m");
}

void ep_fail(struct ep *ep, const char *why)
{
	if (ep->failed)
		return;
	ep->failed = why;
	/* Out of the rank table at once: what comes for the rank from now on
	 * is dropped and counted as for a rank that left, and the delivery
	 * fast path (endpoint.h) need not look at failed. */
	if (ep->job->ranks[ep->rank].ep == ep) {
		ep->job->ranks[ep->rank].ep = NULL;
		ep->job->eps_gone++;
	}
	loop_kick();            /* the session reaps it */
}

/* --- delivery --- */

/* rec goes neither into d's ring nor into its queue now: -EAGAIN, and its
 * sender tries again later.  With nothing queued for d, nothing would tell
 * us when d's client makes room: note the smallest such record, for which
 * ep_sleep_prepare arms d's ring. */
static int wait_for_room(struct ep *d, const struct proto_rec *rec)
{
	if (!d->pending.count && (!d->rx_wait_len || rec->len + 1 < d->rx_wait_len))
		d->rx_wait_len = rec->len + 1;
	return -EAGAIN;
}

__attribute__((noinline))
int ep_deliver_slow(struct ep *d, const struct proto_rec *rec, const void *payload, int force)
{
	uint64_t fp = ring_footprint(rec->len), cost;

	/* Room may have come since the loop's last turn: what is queued goes
	 * first, and if that was all, this record goes straight into the ring
	 * as usual.  Without this, a receiver that fell behind once kept its
	 * daemon queueing every item (twice the work each) for as long as
	 * items kept coming faster than one queue flush per loop turn.  (The
	 * queue may so drain outside tx_poll, which then sends XON: it looks
	 * at every endpoint whose XOFF is on.) */
	if (d->pending.count && !d->failed)
		ep_flush_pending(d);
	if (!d->failed && !d->pending.count) {
		struct proto_rec *slot = ring_reserve_fast(&d->rx, rec->len);
		int ret = slot ? 0 : ring_reserve(&d->rx, rec->len, &slot);

		if (ret == 0) {
			ep_put(d, slot, rec, payload);
			return 0;
		}
		if (ret == -EPROTO)
			ep_fail(d, "client published an impossible RX tail");
	}
	if (d->failed) {
		/* It ends at the next turn of the loop: what comes for it
		 * meanwhile is dropped, and counted as its queue will be. */
		ep_drop(d->job, proto_rec_items(rec, payload));
		return 0;
	}
	if (!force && d->pending.bytes + fp > endpoints.conf->pending_bytes)
		return -EAGAIN;
	/* The queue's memory is its user's (all items for d come from d's
	 * job, which is that user's): one user's slow receivers make that
	 * user's senders wait, not everyone's. */
	cost = recq_push_cost(&d->pending, rec->len);
	if (cost && user_take_queue(d->user, cost, force) < 0)
		return wait_for_room(d, rec);
	if (recq_push(&d->pending, rec, payload) < 0) {
		if (cost)
			user_give_queue(d->user, cost);
		return wait_for_room(d, rec);
	}
	ep_stats.items_queued += proto_rec_items(rec, payload);
	return 0;
}

int ep_park(struct ep *d, const struct proto_rec *rec, const void *payload)
{
	uint64_t cost;

	if (d->failed)
		return ep_deliver_slow(d, rec, payload, 0);     /* dropped, counted */
	if (d->pending.bytes + ring_footprint(rec->len) > ep_park_limit(endpoints.conf))
		return -EAGAIN;
	/* Counted as the receiver's user's memory, but not held to its limit
	 * (user_take_parked says why). */
	cost = recq_push_cost(&d->pending, rec->len);
	if (cost && user_take_parked(d->user, cost) < 0)
		return -EAGAIN;
	if (recq_push(&d->pending, rec, payload) < 0) {
		if (cost)
			user_give_queue(d->user, cost);
		return -EAGAIN;
	}
	ep_stats.items_queued += proto_rec_items(rec, payload);
	return 0;
}

int ep_flush_pending(struct ep *d)
{
	const struct proto_rec *rec;
	const void *payload;
	uint64_t mem = d->pending.mem;
	int moved = 0;

	while (!d->failed && recq_peek(&d->pending, &rec, &payload)) {
		struct proto_rec *slot;
		int ret = ring_reserve(&d->rx, rec->len, &slot);

		if (ret == -EAGAIN)
			break;
		if (ret < 0) {
			ep_fail(d, "client published an impossible RX tail");
			moved = 1;
			break;
		}
		ep_put(d, slot, rec, payload);
		recq_pop(&d->pending);
		moved = 1;
	}
	if (mem != d->pending.mem)
		user_give_queue(d->user, mem - d->pending.mem);
	return moved;
}

/* --- loans (endpoint.h "Loans") --- */

struct ep_lender {
	struct ep *ep;                  /* NULL once the endpoint is closed */
	uint64_t *start;                /* by id & (cap - 1): where the loan's record begins */
	uint8_t *ended;                 /* ... 1 once ep_loan_end */
	uint64_t first, next;           /* the oldest loan not ended; the next id */
	uint32_t cap;                   /* a power of two >= next - first */
	/* Once the endpoint is closed with loans out: */
	void *region;                   /* its mapping, NULL once unmapped */
	size_t region_bytes;
	struct user *user;              /* whose endpoint it still is, NULL once given back */
	struct ep_lender *next_kept;    /* every such lender (endpoints.kept) */
};

static void lender_unmap(struct ep_lender *l)
{
	if (l->region) {
		munmap(l->region, l->region_bytes);
		endpoints.region_bytes -= l->region_bytes;
		l->region = NULL;
	}
	if (l->user) {
		user_give_endpoint(l->user);
		l->user = NULL;
	}
}

static void lender_free(struct ep_lender *l)
{
	free(l->start);
	free(l->ended);
	free(l);
}

int ep_loan(struct ep *ep, struct ep_lender **lp, uint64_t *id)
{
	struct ep_lender *l = ep->lender;

	if (!l) {
		l = calloc(1, sizeof(*l));
		if (!l)
			return -ENOMEM;
		l->ep = ep;
		ep->lender = l;
	}
	if (l->next - l->first == l->cap) {
		uint32_t cap = l->cap ? 2 * l->cap : 16;
		uint64_t *start = malloc(cap * sizeof(*start));
		uint8_t *ended = malloc(cap);

		if (!start || !ended) {
			free(start);
			free(ended);
			return -ENOMEM;
		}
		for (uint64_t i = l->first; i < l->next; i++) {
			start[i & (cap - 1)] = l->start[i & (l->cap - 1)];
			ended[i & (cap - 1)] = l->ended[i & (l->cap - 1)];
		}
		free(l->start);
		free(l->ended);
		l->start = start;
		l->ended = ended;
		l->cap = cap;
	}
	*id = l->next++;
	l->start[*id & (l->cap - 1)] = ep->tx.tail;
	l->ended[*id & (l->cap - 1)] = 0;
	*lp = l;
	return 0;
}

void ep_loan_cancel(struct ep_lender *l, uint64_t id)
{
	assert(id + 1 == l->next && !l->ended[id & (l->cap - 1)]);
	l->next = id;
}

void ep_loan_end(struct ep_lender *l, uint64_t id)
{
	assert(id - l->first < l->next - l->first && !l->ended[id & (l->cap - 1)]);
	l->ended[id & (l->cap - 1)] = 1;
	while (l->first != l->next && l->ended[l->first & (l->cap - 1)])
		l->first++;
	if (l->ep) {
		ep_tx_release(l->ep);
		return;
	}
	if (l->first != l->next)
		return;
	/* The last loan of a closed endpoint. */
	for (struct ep_lender **pp = &endpoints.kept; *pp; pp = &(*pp)->next_kept)
		if (*pp == l) {
			*pp = l->next_kept;
			break;
		}
	lender_unmap(l);
	lender_free(l);
}

void ep_set_close_hook(void (*take_back)(struct ep *ep))
{
	endpoints.take_back = take_back;
}

void ep_exit_begin(void)
{
	endpoints.exiting = 1;
}

void ep_tx_release(struct ep *ep)
{
	struct ep_lender *l = ep->lender;
	uint64_t to = ep->tx.tail;

	if (l && l->first != l->next)
		to = l->start[l->first & (l->cap - 1)];
	if (!ep->failed && ring_release_to(&ep->tx, to))
		wake(ep->efd_client);
}

int ep_done_publish(struct ep *ep, uint32_t group, uint32_t seq)
{
	struct proto_done_shared *d = ep->done;
	/* (consumed is the client's word: a lie costs it its own records) */
	uint32_t unread = ep->done_pub - atomic_load_explicit(&d->consumed, memory_order_acquire);

	if (unread >= PROTO_DONE_SLOTS)
		return 0;
	atomic_store_explicit(&d->rec[ep->done_pub % PROTO_DONE_SLOTS], (uint64_t)group << 32 | seq,
			      memory_order_relaxed);
	atomic_store_explicit(&d->published, ++ep->done_pub, memory_order_release);
	/* the waker's half of the handshake (proto/done.h) */
	atomic_thread_fence(memory_order_seq_cst);
	if (atomic_load_explicit(&d->armed, memory_order_relaxed))
		wake(ep->efd_coll);
	return 1;
}

void ep_done_sent(struct ep *ep)
{
	atomic_store_explicit(&ep->done->sock_done, ++ep->done_sock, memory_order_release);
}

/* --- the post page (proto/post.h) --- */

/* 1 if slot taken of ep's post page holds a post that may be taken now:
 * posted, and what its client sent on the socket before it handled; -1
 * after failing ep (posted too far ahead). */
static int post_due(struct ep *ep)
{
	struct proto_post_shared *p = ep->post;
	uint32_t ahead = atomic_load_explicit(&p->posted, memory_order_acquire) - ep->post_taken, sb;

	if (!ahead)
		return 0;
	if (ahead > PROTO_POST_SLOTS) {
		ep_fail(ep, "posted more collectives on its post page than it has slots");
		return -1;
	}
	sb = __atomic_load_n(&p->slot[ep->post_taken % PROTO_POST_SLOTS].sock_before, __ATOMIC_RELAXED);
	/* (sock_before - ctl_handled) as signed: ahead of what was handled */
	return (int32_t)(sb - ep->ctl_handled) <= 0;
}

int ep_post_next(struct ep *ep, uint8_t *msg, uint32_t *len_p)
{
	struct proto_post_slot *slot;
	uint32_t len;

	if (ep->failed || ep->posts_closed || !ep->ready || post_due(ep) <= 0)
		return 0;
	slot = &ep->post->slot[ep->post_taken % PROTO_POST_SLOTS];
	len = __atomic_load_n(&slot->len, __ATOMIC_RELAXED);
	if (len > PROTO_POST_MSG_MAX) {
		ep_fail(ep, "a post on its post page longer than a slot");
		return 0;
	}
	if (len < sizeof(struct ctl_hdr)) {
		/* (ctl_decode would say "not whole yet", and decode nothing) */
		ep_fail(ep, "a post on its post page shorter than a message header");
		return 0;
	}
	/* A copy: the client may write the slot while we decode. */
	memcpy(msg, slot->msg, len);
	*len_p = len;
	return 1;
}

void ep_post_taken(struct ep *ep)
{
	atomic_store_explicit(&ep->post->taken, ++ep->post_taken, memory_order_release);
}

void ep_step_complete(struct job *j)
{
	struct proto_rec rec = { .kind = PROTO_REC_STEP, .dst = j->step };

	for (uint32_t r = 0; r < j->size; r++) {
		struct ep *d = j->ranks[r].ep;

		if (d)
			ep_deliver_slow(d, &rec, NULL, 1);
	}
	j->step++;
	j->done = 0;
}

void ep_job_fail(struct job *j, uint32_t step, uint32_t rank, int err, const char *text)
{
	struct proto_rec rec = { .kind = PROTO_REC_FAIL, .dst = step, .src = rank, .channel = (uint16_t)err,
				 .len = (uint32_t)strlen(text) };

	for (uint32_t r = 0; r < j->size; r++) {
		struct ep *d = j->ranks[r].ep;

		if (d)
			ep_deliver_slow(d, &rec, text, 1);
	}
}

int ep_publish(void)
{
	int work = 0;

	for (struct ep *ep = endpoints.all; ep; ep = ep->next) {
		if (!ep->rx_dirty || ep->failed)
			continue;
		ep->rx_dirty = 0;
		work = 1;
		if (ring_publish(&ep->rx))
			wake(ep->efd_client);
	}
	return work;
}

/* --- opening and closing --- */

static void on_efd(struct loop_watch *w, uint32_t events)
{
	struct ep *ep = w->ctx;
	uint64_t n;

	(void)events;
	if (read(ep->efd_daemon, &n, sizeof(n)) < 0 && errno != EAGAIN)
		log_rl_warn("session %u: eventfd read: %m", ep->id);
	loop_kick();
}

static size_t page_align(size_t n)
{
	return (n + 4095) & ~(size_t)4095;
}

/* Whether process pid may run on none of ferryd's CPUs now (as libferry
 * finds at its open, client/poll.c: then it spins, and ferryd may too).
 * ferryd's own are read each time: taskset -p may have moved it.  (A
 * machine of more than CPU_SETSIZE CPUs says EINVAL: sharing, no spin.) */
static int other_cpus(pid_t pid)
{
	cpu_set_t mine, theirs, both;

	if (pid <= 0 || sched_getaffinity(0, sizeof(mine), &mine) < 0 ||
	    sched_getaffinity(pid, sizeof(theirs), &theirs) < 0)
		return 0;
	CPU_AND(&both, &theirs, &mine);
	return CPU_COUNT(&both) == 0;
}

#define EP_CPUS_EVERY_NS (100ull * 1000000u)

void ep_check_cpus(struct ep *ep)
{
	int apart;

	if (loop_now_ns() - ep->cpus_checked_ns < EP_CPUS_EVERY_NS)
		return;
	ep->cpus_checked_ns = loop_now_ns();
	apart = other_cpus(ep->pid);
	endpoints.sharing += (uint32_t)(!apart) - (uint32_t)(!ep->other_cpus);
	ep->other_cpus = apart;
}

int ep_all_apart(void)
{
	return endpoints.count && !endpoints.sharing;
}

int ep_open(uid_t uid, pid_t pid, uint32_t id, const char *name, uint32_t rank, uint32_t size,
	    struct ep **ep_p, struct ctl_attached_wire *a, int fds[4])
{
	uint64_t ring = endpoints.conf->ring_bytes;
	struct ep *ep = calloc(1, sizeof(*ep));
	int memfd, ret;

	if (!ep)
		return -ENOMEM;
	ep->user = user_get(uid);
	if (!ep->user) {
		free(ep);
		return -ENOMEM;
	}
	ret = user_take_endpoint(ep->user);
	if (ret < 0) {
		user_put(ep->user);
		free(ep);
		return ret;
	}
	ep->id = id;
	ep->pid = pid;
	ep->other_cpus = other_cpus(pid);
	ep->cpus_checked_ns = loop_now_ns();
	ep->uid = uid;
	ep->rank = rank;
	ep->blocked_node = JOB_NO_NODE;
	ep->blocked_rank = EP_NO_RANK;
	ep->efd_client = ep->efd_daemon = ep->efd_coll = -1;
	ep->efd_w.fd = -1;
	ret = job_join(uid, name, size, rank, endpoints.self, ep, &ep->job);
	if (ret < 0)
		goto err_user;

	*a = (struct ctl_attached_wire){ 0 };
	a->tx_off = 0;
	a->tx_size = ring;
	a->rx_off = page_align(ring_bytes(ring));
	a->rx_size = ring;
	a->done_off = a->rx_off + page_align(ring_bytes(ring));
	a->region_bytes = a->done_off + PROTO_DONE_BYTES + PROTO_POST_BYTES;    /* (the post page: proto/post.h) */
	a->node = endpoints.self;
	a->session = id;
	a->flags = endpoints.membarrier ? CTL_ATTACHED_MEMBARRIER : 0;

	/* Clients can make these fail (by taking every file descriptor or all
	 * memory), hence rate-limited lines. */
	memfd = memfd_create("ferry-endpoint", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (memfd < 0) {
		ret = -errno;
		log_rl_err("session %u: memfd_create: %m", id);
		goto err_leave;
	}
	if (ftruncate(memfd, (off_t)a->region_bytes) < 0) {
		ret = -errno;
		log_rl_err("session %u: ftruncate %llu bytes: %m", id, (unsigned long long)a->region_bytes);
		goto err_memfd;
	}
	/* The client could otherwise shrink the file under our mapping and make
	 * our next access fault with SIGBUS. */
	if (fcntl(memfd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0) {
		ret = -errno;
		log_rl_err("session %u: sealing memfd: %m", id);
		goto err_memfd;
	}
	/* Populated now: the rings' pages are allocated and mapped here
	 * rather than by page faults during the first lap of the data (at 4
	 * KiB a fault, they made a sender's first pass over a large ring
	 * twice as slow: make bench-rate).  The memory is counted as the
	 * region's whole size anyway (memory_region_bytes, per user). */
	ep->region = mmap(NULL, a->region_bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, memfd, 0);
	if (ep->region == MAP_FAILED) {
		ret = -errno;
		log_rl_err("session %u: mmap %llu bytes: %m", id, (unsigned long long)a->region_bytes);
		goto err_memfd;
	}
	ep->region_bytes = a->region_bytes;
	ring_attach(&ep->tx, (uint8_t *)ep->region + a->tx_off, a->tx_size, 1);
	ring_attach(&ep->rx, (uint8_t *)ep->region + a->rx_off, a->rx_size, 1);
	ep->done = (struct proto_done_shared *)((uint8_t *)ep->region + a->done_off);
	ep->post = (struct proto_post_shared *)((uint8_t *)ep->region + a->done_off + PROTO_DONE_BYTES);
	if (endpoints.membarrier)
		ring_consumer_offer_fenceless(&ep->tx);

	ep->efd_client = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	ep->efd_daemon = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	ep->efd_coll = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (ep->efd_client < 0 || ep->efd_daemon < 0 || ep->efd_coll < 0) {
		ret = -errno;
		log_rl_err("session %u: eventfd: %m", id);
		goto err_efds;
	}
	ret = loop_add(&ep->efd_w, ep->efd_daemon, EPOLLIN, on_efd, ep);
	if (ret < 0) {
		log_rl_err("session %u: epoll add: %s", id, strerror(-ret));
		goto err_efds;
	}
	fds[0] = memfd;
	fds[1] = ep->efd_client;
	fds[2] = ep->efd_daemon;
	fds[3] = ep->efd_coll;
	ep->next = endpoints.all;
	endpoints.all = ep;
	endpoints.count++;
	endpoints.sharing += !ep->other_cpus;
	endpoints.region_bytes += ep->region_bytes;
	*ep_p = ep;
	return 0;

err_efds:
	if (ep->efd_client >= 0)
		close(ep->efd_client);
	if (ep->efd_daemon >= 0)
		close(ep->efd_daemon);
	if (ep->efd_coll >= 0)
		close(ep->efd_coll);
	munmap(ep->region, ep->region_bytes);
err_memfd:
	close(memfd);
err_leave:
	job_leave(ep->job, rank, ep);   /* nobody else heard of it */
err_user:
	user_give_endpoint(ep->user);
	free(ep);
	return ret;
}

void ep_close(struct ep *ep)
{
	struct ep **pp;

	/* (Not at exit: nothing is written any more, see ep_fini.) */
	if (ep->lender && ep->lender->first != ep->lender->next && endpoints.take_back && !endpoints.exiting)
		endpoints.take_back(ep);

	mem_remove_all(&ep->mems);
	if (ep->pending.items) {
		/* (Items, not records: a DENSE record holds many, a STEP
		 * none.) */
		ep_drop(ep->job, ep->pending.items);
		log_rl_notice("session %u: %llu queued items for rank %u dropped", ep->id,
			      (unsigned long long)ep->pending.items, ep->rank);
	}
	if (ep->pending.mem)
		user_give_queue(ep->user, ep->pending.mem);
	recq_clear(&ep->pending);
	for (struct ep *o = endpoints.all; o; o = o->next)
		if (o->blocked_on == ep)
			o->blocked_on = NULL;
	for (pp = &endpoints.all; *pp != ep; pp = &(*pp)->next)
		;
	*pp = ep->next;
	endpoints.count--;
	endpoints.sharing -= !ep->other_cpus;
	/* Its slot in the job's direct rings, if it has one, is gone: while
	 * the job (which job_leave may free) and the eventfd still exist. */
	direct_end(ep->job->direct, ep);
	job_leave(ep->job, ep->rank, ep);
	loop_del(&ep->efd_w);
	close(ep->efd_client);
	close(ep->efd_daemon);
	close(ep->efd_coll);
	if (ep->lender && ep->lender->first != ep->lender->next) {
		/* Frames still send from its TX ring: loans that could not
		 * be taken back (see Loans). */
		struct ep_lender *l = ep->lender;

		l->ep = NULL;
		l->region = ep->region;
		l->region_bytes = ep->region_bytes;
		l->user = ep->user;
		l->next_kept = endpoints.kept;
		endpoints.kept = l;
	} else {
		if (ep->lender)
			lender_free(ep->lender);
		endpoints.region_bytes -= ep->region_bytes;
		munmap(ep->region, ep->region_bytes);
		user_give_endpoint(ep->user);
	}
	free(ep->put_serial);
	free(ep);
}

struct ep *ep_first(void)
{
	return endpoints.all;
}

uint32_t ep_count(void)
{
	return endpoints.count;
}

uint64_t ep_region_bytes(void)
{
	return endpoints.region_bytes;
}

/* --- sleeping --- */

static int membarrier(int cmd)
{
	return (int)syscall(SYS_membarrier, cmd, 0, 0);
}

/* The drainer waits for room elsewhere: this TX ring's records could not go
 * on anyway, so its client need not wake us. */
static int tx_blocked(const struct ep *ep)
{
	return ep->blocked_on || ep->blocked_node != JOB_NO_NODE || ep->blocked_rank != EP_NO_RANK;
}

/* Nothing to do: the loop polls the rings when it wakes up. */
static void on_recheck(struct loop_timer *t)
{
	(void)t;
}

int ep_sleep_prepare(void)
{
	int armed = 0, unsure = 0;
	uint64_t t;

	for (struct ep *ep = endpoints.all; ep; ep = ep->next) {
		const struct proto_rec *rec;
		const void *payload;

		if (ep->failed)
			continue;
		/* A blocked sender makes progress only when its destination's
		 * client frees RX room, which the check below arms. */
		if (!tx_blocked(ep)) {
			int fenceless = ring_consumer_fenceless(&ep->tx);

			/* (An offer withdrawn as too dear: until the client
			 * answers, the way of a failed membarrier, below.) */
			if (fenceless && endpoints.membarrier && !ep->offer_withdrawn) {
				ring_consumer_arm(&ep->tx);
				armed = 1;
			} else {
				/* After the offer was withdrawn, and until the
				 * client answers, its publishes may skip the
				 * fence: look again later whatever this says. */
				unsure |= fenceless;
				if (ring_consumer_sleep(&ep->tx))
					return 1;
			}
		}
		if (recq_peek(&ep->pending, &rec, &payload) && ring_producer_sleep(&ep->rx, rec->len))
			return 1;
		/* An item refused with nothing queued (no memory was left for
		 * a queue) waits for room in the ring itself: its client must
		 * wake us when it makes some, for nothing else might (the
		 * memory may be held by queues that do not move, or by rank
		 * tables).  Room now: whoever waits tries again, and sets
		 * this again if it must still wait. */
		if (ep->rx_wait_len && !ep->pending.count && ring_producer_sleep(&ep->rx, ep->rx_wait_len - 1)) {
			ep->rx_wait_len = 0;
			return 1;
		}
		/* The post page: the sleeper's half of its handshake.  A post
		 * that waits for a control message waits for the socket, which
		 * wakes us anyway. */
		if (ep->ready && !ep->posts_closed) {
			atomic_store_explicit(&ep->post->sleeping, 1, memory_order_relaxed);
			atomic_thread_fence(memory_order_seq_cst);
			if (post_due(ep) != 0)
				return 1;       /* (failed: the session is reaped first) */
		}
	}
	if (unsure)
		loop_timer_arm(&endpoints.recheck, RECHECK_NS, on_recheck, NULL);
	if (!armed)
		return 0;
	/* The other half of the clients' fenceless publish (proto/ring.h). */
	t = proto_now_ns();
	if (membarrier(MEMBARRIER_CMD_GLOBAL_EXPEDITED) < 0) {
		/* Clients that attached before cannot know at once: withdraw
		 * the offer, and look at their rings now and then until each
		 * says it fences every publish. */
		log_err("membarrier: %m; clients fence every publish from now on");
		endpoints.membarrier = 0;
		for (struct ep *ep = endpoints.all; ep; ep = ep->next)
			ring_consumer_withdraw_fenceless(&ep->tx, 0);
		return 1;       /* look again, the slow way */
	}
	if (ring_judge(&endpoints.judge, proto_now_ns() - t, ep_stats.records_taken)) {
		/* Dearer than the fences it saves (ring_judge): withdrawn
		 * from the clients that have it now.  Until each answers (at
		 * its next publish or wait), we look at its ring now and
		 * then, as after a failed membarrier, rather than pay for
		 * membarrier; clients that attach later are offered it again
		 * (their traffic may differ). */
		for (struct ep *ep = endpoints.all; ep; ep = ep->next)
			if (ep->tx.fenceless && !ep->offer_withdrawn) {
				ring_consumer_withdraw_fenceless(&ep->tx, 0);
				ep->offer_withdrawn = 1;
				ep_stats.offers_withdrawn++;
			}
		return 1;       /* look again, the slow way */
	}
	for (struct ep *ep = endpoints.all; ep; ep = ep->next)
		if (!ep->failed && !tx_blocked(ep) && ring_consumer_check(&ep->tx))
			return 1;
	return 0;
}

void ep_sleep_done(void)
{
	for (struct ep *ep = endpoints.all; ep; ep = ep->next) {
		ring_consumer_awake(&ep->tx);
		ring_producer_awake(&ep->rx);
		atomic_store_explicit(&ep->post->sleeping, 0, memory_order_relaxed);
	}
}

int ep_tx_pending(const struct ep *ep)
{
	return !ep->failed && atomic_load_explicit(&ep->tx.sh->head, memory_order_acquire) != ep->tx.tail;
}

uint64_t ep_tx_abandon(struct ep *ep)
{
	uint64_t n = 0;

	for (;;) {
		struct proto_rec rec;
		const void *payload;

		if (ep->failed || ring_peek(&ep->tx, &rec, &payload) <= 0)
			break;
		n += rec.kind == PROTO_REC_ITEM;
		if (rec.kind == PROTO_REC_DENSE && rec.len >= sizeof(struct proto_dense))
			n += proto_dense_check(proto_dense_word(payload), rec.len);   /* (one read) */
		if (rec.kind == PROTO_REC_BATCH && rec.len <= PROTO_BATCH_MAX) {
			/* Its items not taken yet (past batch_off), counted in
			 * a copy: the client may be writing the ring. */
			uint8_t copy[PROTO_BATCH_MAX] __attribute__((aligned(8)));
			uint32_t k, taken = 0;

			memcpy(copy, payload, rec.len);
			k = proto_batch_check(copy, rec.len, rec.dst | (uint64_t)ep->rank << 32);
			if (k)
				proto_batch_at(copy, rec.len, ep->batch_off, &taken);
			n += k - taken;
			ep->batch_off = 0;
		}
		ring_consume(&ep->tx, &rec);
	}
	ep_stats.items_lost += n;
	return n;
}

int ep_busy(void)
{
	for (struct ep *ep = endpoints.all; ep; ep = ep->next) {
		if (ep->failed)
			continue;
		if (ep->pending.count ||
		    atomic_load_explicit(&ep->tx.sh->head, memory_order_acquire) != ep->tx.tail)
			return 1;
	}
	return 0;
}

void ep_write_status(FILE *out, const struct ep *ep)
{
	fprintf(out, "  rank %u: pid %d, session %u, sent %llu, received %llu, queued %llu%s%s\n",
		ep->rank, ep->pid, ep->id, (unsigned long long)ep->items_sent,
		(unsigned long long)ep->items_received, (unsigned long long)ep->pending.items,
		tx_blocked(ep) ? ", sender stalled" : "", ep->xoff ? ", senders on other nodes told to wait" : "");
	fprintf(out, "    rings: tx %llu of %llu bytes used, rx %llu of %llu bytes used\n",
		(unsigned long long)(atomic_load(&ep->tx.sh->head) - ep->tx.tail),
		(unsigned long long)ep->tx.size,
		(unsigned long long)(ep->rx.head - atomic_load(&ep->rx.sh->tail)),
		(unsigned long long)ep->rx.size);
}

/* --- setup --- */

int ep_init(const struct conf *c, uint32_t self)
{
	endpoints.conf = c;
	endpoints.self = self;
	endpoints.exiting = 0;
	user_init(c);
	/* Register so that clients' membarrier calls reach us too, and offer
	 * clients the fenceless publish if the kernel has it. */
	endpoints.membarrier = membarrier(MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED) == 0;
	if (!endpoints.membarrier)
		log_info("membarrier not available (%m): clients will fence every publish");
	return 0;
}

void ep_fini(void)
{
	loop_timer_cancel(&endpoints.recheck);
	endpoints.exiting = 1;  /* (sess_fini said so already, in ferryd) */
	while (endpoints.all)
		ep_close(endpoints.all);
	/* Frames that still point into kept regions are only freed from now
	 * on, never written (see Loans). */
	for (struct ep_lender *l = endpoints.kept; l; l = l->next_kept)
		lender_unmap(l);
	user_fini();
}
