/* tests/unit/test_endpoint.c - delivery into endpoints (daemon/local/endpoint.c)
 * against the per-user memory limit: a user's queues stop at its limit and
 * another user's do not, what is queued is given back, and an item that
 * waits for room in a receiver's ring while no memory is left for a queue
 * is woken by that receiver's client. */
#define UNIT "endpoint"
#include "check.h"
#include "../../daemon/core/conf.h"
#include "../../daemon/core/log.h"
#include "../../daemon/core/loop.h"
#include "../../daemon/local/endpoint.h"
#include "../../daemon/local/user.h"

#include <dirent.h>
#include <errno.h>
#include <sys/mman.h>
#include <unistd.h>

/* An endpoint and its client's side of the rings. */
struct client {
	struct ep *ep;
	void *map;
	size_t map_bytes;
	struct ring tx, rx;
	struct proto_done_shared *done; /* in map */
	int efd_coll;                   /* (ferryd's own fd: one process here) */
};

static struct conf conf;
static uint8_t payload[1000];

/* ep_sleep_prepare, with the fenceless offers always worth their membarrier
 * call: ring_judge times each call against the publishes it saved
 * (ep_stats.records_taken), and where other processes load the cores a call
 * takes 20 us and the offers are withdrawn after a few, which is right for
 * ferryd and not what these tests are about.  So the clients here have
 * published a great deal since. */
static int sleep_prepare(void)
{
	ep_stats.records_taken += 1ull << 40;
	return ep_sleep_prepare();
}

static int open_client(struct client *c, uid_t uid, const char *job, uint32_t rank, uint32_t size)
{
	struct ctl_attached_wire a;
	int fds[4], ret;

	ret = ep_open(uid, getpid(), rank, job, rank, size, &c->ep, &a, fds);
	if (ret < 0)
		return ret;
	c->map_bytes = a.region_bytes;
	c->map = mmap(NULL, a.region_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fds[0], 0);
	close(fds[0]);
	if (c->map == MAP_FAILED)
		return -errno;
	ring_attach(&c->tx, (uint8_t *)c->map + a.tx_off, a.tx_size, 0);
	ring_attach(&c->rx, (uint8_t *)c->map + a.rx_off, a.rx_size, 0);
	c->done = (struct proto_done_shared *)((uint8_t *)c->map + a.done_off);
	c->efd_coll = fds[3];
	c->ep->job->ready = 1;
	c->ep->ready = 1;
	return 0;
}

static void close_client(struct client *c)
{
	munmap(c->map, c->map_bytes);
	ep_close(c->ep);
}

/* Delivers 1000-byte items to d until it refuses; returns how many it took. */
static int fill(struct ep *d)
{
	struct proto_rec rec = { .len = sizeof(payload), .kind = PROTO_REC_ITEM, .dst = d->rank };
	int n = 0;

	while (ep_deliver(d, &rec, payload) == 0)
		n++;
	return n;
}

/* The client takes n records out of its RX ring. */
static void client_take(struct client *c, int n)
{
	struct proto_rec rec;
	const void *p;

	while (n-- > 0 && ring_peek(&c->rx, &rec, &p) == 1)
		ring_consume(&c->rx, &rec);
	ring_release(&c->rx);
}

TEST(one_users_queues_stop_at_its_limit_and_not_anothers)
{
	struct recq empty = { 0 };
	uint64_t chunk = recq_push_cost(&empty, 0);     /* what a queue grows by */
	struct client a, b;

	CHECK_EQ(open_client(&a, 1000, "a", 0, 1), 0);
	CHECK_EQ(open_client(&b, 1001, "b", 0, 1), 0);
	CHECK(fill(a.ep) > 0);
	ep_publish();
	/* The queue stopped at the user's 1 MiB, far below pending_bytes. */
	CHECK(a.ep->user->queue_bytes + a.ep->user->table_bytes <= conf.user_memory_bytes);
	CHECK(a.ep->user->queue_bytes + a.ep->user->table_bytes + chunk > conf.user_memory_bytes);
	CHECK(a.ep->pending.bytes < conf.pending_bytes);
	CHECK(a.ep->user->mem_waits > 0);
	/* The other user's queue grows as far. */
	CHECK(fill(b.ep) > 0);
	CHECK_EQ(b.ep->pending.mem, a.ep->pending.mem);
	CHECK_EQ(user_total.queue_bytes, a.ep->pending.mem + b.ep->pending.mem);
	/* The client takes everything: the queue moves into the ring, its
	 * memory is given back (but the chunk kept for reuse). */
	while (a.ep->pending.count) {
		client_take(&a, 1 << 20);
		ep_flush_pending(a.ep);
		ep_publish();
	}
	CHECK_EQ(a.ep->user->queue_bytes, a.ep->pending.mem);
	CHECK(a.ep->pending.mem <= chunk);
	close_client(&a);
	close_client(&b);
	CHECK_EQ(user_total.queue_bytes, 0);
	CHECK_EQ(user_total.table_bytes, 0);
	CHECK_EQ(user_count(), 0);
}

/* An item refused for d with nothing queued for d (the user's memory is
 * held by another receiver's queue that does not move) waits for room in
 * d's ring itself, wherever it comes from (a local sender's TX ring, a frame
 * from a peer): d's client must be asked to wake the daemon when it takes
 * something, or the item waits for ever. */
TEST(an_item_waiting_for_ring_room_is_woken_by_its_receiver)
{
	struct client d, e;

	CHECK_EQ(open_client(&d, 1000, "w", 1, 3), 0);
	CHECK_EQ(open_client(&e, 1000, "w", 2, 3), 0);
	fill(e.ep);                             /* e's queue takes the user's memory */
	CHECK(e.ep->pending.count > 0);
	fill(d.ep);                             /* d's ring fills; no memory for a queue */
	CHECK_EQ(d.ep->pending.count, 0);
	ep_publish();

	CHECK_EQ(sleep_prepare(), 0);        /* nothing to do: the daemon sleeps ... */
	CHECK_EQ(atomic_load(&d.ep->rx.sh->producer_waiting), 1);      /* ... woken by d's client */
	ep_sleep_done();
	client_take(&d, 1);                     /* room for the item */
	CHECK_EQ(sleep_prepare(), 1);        /* work: do not sleep */
	ep_sleep_done();
	CHECK_EQ(sleep_prepare(), 0);        /* once: nobody tried again, nothing waits */
	ep_sleep_done();
	close_client(&d);
	close_client(&e);
	CHECK_EQ(user_count(), 0);
}

/* Whether ferryd wrote c's efd_coll since the last look (and resets it). */
static int open_fds(void)
{
	int n = 0;
	DIR *d = opendir("/proc/self/fd");

	while (d && readdir(d))
		n++;
	if (d)
		closedir(d);
	return n;
}

static int coll_woken(struct client *c)
{
	uint64_t v;

	return read(c->efd_coll, &v, sizeof(v)) == sizeof(v);
}

/* The done page (proto/done.h): successes are published while fewer than
 * PROTO_DONE_SLOTS are unread, in order; beyond that (or when the client's
 * consumed makes no sense) the caller is told to use the socket; the
 * eventfd is written only while the client is armed. */
TEST(the_done_page_keeps_unread_records_and_wakes_only_an_armed_client)
{
	struct client c;
	struct proto_done_shared *d;
	int fds0 = open_fds();

	CHECK_EQ(open_client(&c, 1000, "done", 0, 1), 0);
	d = c.done;
	CHECK_EQ(atomic_load(&d->published), 0);
	for (uint32_t i = 0; i < PROTO_DONE_SLOTS; i++)
		CHECK_EQ(ep_done_publish(c.ep, 7, i + 1), 1);
	CHECK_EQ(atomic_load(&d->published), PROTO_DONE_SLOTS);
	CHECK_EQ(atomic_load(&d->rec[0]), (7ull << 32) | 1);
	CHECK_EQ(atomic_load(&d->rec[PROTO_DONE_SLOTS - 1]), (7ull << 32) | PROTO_DONE_SLOTS);
	CHECK(!coll_woken(&c));                 /* not armed: no wake-up */
	/* full: nothing unread is written over */
	CHECK_EQ(ep_done_publish(c.ep, 7, 100), 0);
	CHECK_EQ(atomic_load(&d->published), PROTO_DONE_SLOTS);
	CHECK_EQ(atomic_load(&d->rec[0]), (7ull << 32) | 1);
	/* the client read 10: 10 slots again, the first reused */
	atomic_store(&d->consumed, 10);
	CHECK_EQ(ep_done_publish(c.ep, 8, 101), 1);
	CHECK_EQ(atomic_load(&d->rec[0]), (8ull << 32) | 101);
	/* armed: every record wakes it */
	atomic_store(&d->armed, 1);
	CHECK_EQ(ep_done_publish(c.ep, 8, 102), 1);
	CHECK(coll_woken(&c));
	atomic_store(&d->armed, 0);
	CHECK_EQ(ep_done_publish(c.ep, 8, 103), 1);
	CHECK(!coll_woken(&c));
	/* a consumed ahead of what was published: the socket, never an
	 * overwrite of the page's count */
	atomic_store(&d->consumed, atomic_load(&d->published) + 5);
	CHECK_EQ(ep_done_publish(c.ep, 8, 104), 0);
	CHECK_EQ(atomic_load(&d->published), PROTO_DONE_SLOTS + 3);
	/* ... and the client writing published changes nothing ferryd counts */
	atomic_store(&d->published, 0);
	atomic_store(&d->consumed, PROTO_DONE_SLOTS + 3);
	CHECK_EQ(ep_done_publish(c.ep, 8, 105), 1);
	CHECK_EQ(atomic_load(&d->published), PROTO_DONE_SLOTS + 4);
	/* COLL_DONEs on the socket are counted for the client */
	ep_done_sent(c.ep);
	ep_done_sent(c.ep);
	CHECK_EQ(atomic_load(&d->sock_done), 2);
	close_client(&c);
	CHECK_EQ(user_count(), 0);
	CHECK_EQ(open_fds(), fds0);             /* every eventfd of the endpoint closed */
}

/* Writes a post into slot posted % SLOTS of ep's post page, as a client
 * would (proto/post.h), and publishes it. */
static void post(struct ep *ep, uint32_t sock_before, uint32_t len, uint8_t fill)
{
	struct proto_post_shared *p = ep->post;
	uint32_t n = atomic_load(&p->posted);
	struct proto_post_slot *slot = &p->slot[n % PROTO_POST_SLOTS];

	slot->sock_before = sock_before;
	slot->len = len;
	memset(slot->msg, fill, sizeof(slot->msg));
	atomic_store(&p->posted, n + 1);
}

/* The post page (proto/post.h): a post is taken once the endpoint is ready
 * and its sock_before control messages were handled, copied whole, in
 * order; a due post keeps the daemon awake, one that waits for the socket
 * does not; a post longer than a slot, or posted past the slots, fails the
 * endpoint. */
TEST(the_post_page_gives_posts_in_order_once_due_and_fails_a_lying_client)
{
	struct client c;
	uint8_t msg[PROTO_POST_MSG_MAX];
	uint32_t len = 0;

	CHECK_EQ(open_client(&c, 1000, "post", 0, 1), 0);
	/* the page after the done page (both mappings of the region) */
	CHECK_EQ((uint8_t *)c.ep->post - (uint8_t *)c.ep->region,
		 (uint8_t *)c.done - (uint8_t *)c.map + PROTO_DONE_BYTES);
	CHECK(c.map_bytes >= (size_t)((uint8_t *)c.ep->post - (uint8_t *)c.ep->region) + PROTO_POST_BYTES);
	CHECK_EQ(ep_post_next(c.ep, msg, &len), 0);     /* nothing posted */
	post(c.ep, 0, 128, 0xa1);
	c.ep->ready = 0;
	CHECK_EQ(ep_post_next(c.ep, msg, &len), 0);     /* not before READY */
	c.ep->ready = 1;
	CHECK_EQ(ep_post_next(c.ep, msg, &len), 1);
	CHECK_EQ(len, 128);
	CHECK_EQ(msg[0], 0xa1);
	CHECK_EQ(msg[127], 0xa1);
	CHECK_EQ(ep_post_next(c.ep, msg, &len), 1);     /* not taken yet: the same again */
	ep_post_taken(c.ep);
	CHECK_EQ(atomic_load(&c.ep->post->taken), 1);
	CHECK_EQ(ep_post_next(c.ep, msg, &len), 0);
	/* after 2 control messages on the socket: waits for them */
	post(c.ep, 2, 8, 0xb2);
	c.ep->ctl_handled = 1;
	CHECK_EQ(ep_post_next(c.ep, msg, &len), 0);
	CHECK_EQ(sleep_prepare(), 0);                   /* the socket will wake us */
	CHECK_EQ(atomic_load(&c.ep->post->sleeping), 1);
	ep_sleep_done();
	CHECK_EQ(atomic_load(&c.ep->post->sleeping), 0);
	c.ep->ctl_handled = 2;
	CHECK_EQ(sleep_prepare(), 1);                   /* due now: no sleep */
	ep_sleep_done();
	CHECK_EQ(ep_post_next(c.ep, msg, &len), 1);
	CHECK_EQ(len, 8);
	CHECK_EQ(msg[7], 0xb2);
	ep_post_taken(c.ep);
	/* slots wrap around: 3 laps of them */
	for (uint32_t i = 0; i < 3 * PROTO_POST_SLOTS; i++) {
		post(c.ep, 2, 16, (uint8_t)i);
		CHECK_EQ(ep_post_next(c.ep, msg, &len), 1);
		CHECK_EQ(msg[15], (uint8_t)i);
		ep_post_taken(c.ep);
	}
	CHECK(!c.ep->failed);
	/* longer than a slot */
	post(c.ep, 0, PROTO_POST_MSG_MAX + 1, 0);
	CHECK_EQ(ep_post_next(c.ep, msg, &len), 0);
	CHECK(c.ep->failed != NULL);
	close_client(&c);

	CHECK_EQ(open_client(&c, 1000, "post2", 0, 1), 0);
	atomic_store(&c.ep->post->posted, PROTO_POST_SLOTS + 1);       /* past the slots */
	CHECK_EQ(ep_post_next(c.ep, msg, &len), 0);
	CHECK(c.ep->failed != NULL);
	close_client(&c);

	/* shorter than a message header (ctl_decode would decode nothing) */
	for (uint32_t short_len = 0; short_len < sizeof(struct ctl_hdr); short_len += 7) {
		CHECK_EQ(open_client(&c, 1000, "post3", 0, 1), 0);
		post(c.ep, 0, short_len, 0);
		CHECK_EQ(ep_post_next(c.ep, msg, &len), 0);
		CHECK(c.ep->failed != NULL);
		close_client(&c);
	}

	/* a closing session's posts are not taken, and do not keep the
	 * daemon awake */
	CHECK_EQ(open_client(&c, 1000, "post4", 0, 1), 0);
	post(c.ep, 0, 16, 0);
	c.ep->posts_closed = 1;
	CHECK_EQ(ep_post_next(c.ep, msg, &len), 0);
	CHECK_EQ(sleep_prepare(), 0);
	ep_sleep_done();
	CHECK(!c.ep->failed);
	close_client(&c);

	/* the counters wrap: posted and taken, sock_before and ctl_handled */
	CHECK_EQ(open_client(&c, 1000, "post5", 0, 1), 0);
	c.ep->post_taken = UINT32_MAX - 2;
	atomic_store(&c.ep->post->posted, UINT32_MAX - 2);
	c.ep->ctl_handled = UINT32_MAX - 1;
	for (uint32_t i = 0; i < 2 * PROTO_POST_SLOTS; i++) {
		post(c.ep, UINT32_MAX - 1, 16, (uint8_t)i);
		CHECK_EQ(ep_post_next(c.ep, msg, &len), 1);
		CHECK_EQ(msg[15], (uint8_t)i);
		ep_post_taken(c.ep);
	}
	CHECK_EQ(atomic_load(&c.ep->post->taken), UINT32_MAX - 2 + 2 * PROTO_POST_SLOTS);
	post(c.ep, 1, 16, 0xc3);                /* after 3 more messages, across the wrap */
	CHECK_EQ(ep_post_next(c.ep, msg, &len), 0);
	c.ep->ctl_handled += 2;
	CHECK_EQ(ep_post_next(c.ep, msg, &len), 0);
	c.ep->ctl_handled += 1;                 /* 1 */
	CHECK_EQ(ep_post_next(c.ep, msg, &len), 1);
	CHECK_EQ(msg[0], 0xc3);
	CHECK(!c.ep->failed);
	close_client(&c);
	CHECK_EQ(user_count(), 0);
}

int main(void)
{
	static const struct loop_hooks hooks = { 0 };
	char err[256];

	log_init("test_endpoint", LOG_ERR);
	if (conf_load_string(&conf, "limits: { ring_bytes = 262144; pending_bytes = 4194304;"
			     " memory_bytes = 16777216; user_memory_bytes = 1048576; };", "unit.conf",
			     err, sizeof(err)) < 0) {
		fprintf(stderr, "%s\n", err);
		return 1;
	}
	if (loop_init(0, &hooks) < 0 || ep_init(&conf, 0) < 0)
		return 1;
	RUN(one_users_queues_stop_at_its_limit_and_not_anothers);
	RUN(an_item_waiting_for_ring_room_is_woken_by_its_receiver);
	RUN(the_done_page_keeps_unread_records_and_wakes_only_an_armed_client);
	RUN(the_post_page_gives_posts_in_order_once_due_and_fails_a_lying_client);
	ep_fini();
	loop_fini();
	conf_free(&conf);
	return check_done();
}
