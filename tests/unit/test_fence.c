/* tests/unit/test_fence.c - local endpoints (daemon/local/endpoint.c): the
 * daemon's half of the ring wake-ups with clients that publish without a
 * fence, and what happens to those clients when membarrier starts failing
 * at run time.  The failure is real: a seccomp filter makes the system call
 * fail in this process, as the kernel can (it allocates for each call). */
#define UNIT "fence"
#include "check.h"
#include "../../daemon/local/endpoint.c"

#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>

static struct conf conf;

/* A client's view of its endpoint, mapped and attached as libferry does. */
struct client {
	void *map;
	size_t bytes;
	struct ring tx, rx;
};

static int client_open(struct client *cl, uint32_t rank, struct ep **ep_p, struct ctl_attached_wire *a)
{
	int fds[4];

	/* fds[1] and fds[2] stay the endpoint's (ep_close closes them). */
	if (ep_open(1000, getpid(), rank + 1, "fence", rank, 3, ep_p, a, fds) < 0)
		return -1;
	cl->bytes = a->region_bytes;
	cl->map = mmap(NULL, cl->bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fds[0], 0);
	close(fds[0]);
	if (cl->map == MAP_FAILED)
		return -1;
	ring_attach(&cl->tx, (uint8_t *)cl->map + a->tx_off, a->tx_size, 0);
	ring_attach(&cl->rx, (uint8_t *)cl->map + a->rx_off, a->rx_size, 0);
	ring_producer_set_fenceless(&cl->tx, (a->flags & CTL_ATTACHED_MEMBARRIER) &&
				    membarrier(MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED) == 0);
	return 0;
}

/* The client publishes one 8-byte item; returns what ring_publish says (1:
 * the daemon sleeps and must be woken). */
static int client_send(struct client *cl)
{
	struct proto_rec *rec;

	if (ring_reserve(&cl->tx, 8, &rec) < 0)
		return -1;
	*rec = (struct proto_rec){ .len = 8, .kind = PROTO_REC_ITEM };
	return ring_publish(&cl->tx);
}

/* The daemon takes what the endpoint's TX ring holds. */
static int daemon_drain(struct ep *ep)
{
	struct proto_rec rec;
	const void *payload;
	int n = 0;

	while (ring_peek(&ep->tx, &rec, &payload) == 1) {
		ring_consume(&ep->tx, &rec);
		n++;
	}
	ep_tx_release(ep);
	return n;
}

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

/* The loop's sleep, without the sleeping: 1 if sleep_prepare found work. */
static int try_sleep(void)
{
	int ret = sleep_prepare();

	ep_sleep_done();
	return ret;
}

/* From now on membarrier(MEMBARRIER_CMD_GLOBAL_EXPEDITED) fails with ENOMEM
 * in this process; nothing else changes.  Returns 0, or -1 if that cannot be
 * arranged here. */
static int break_membarrier(void)
{
#if defined(__x86_64__)
#define THIS_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define THIS_ARCH AUDIT_ARCH_AARCH64
#endif
#ifdef THIS_ARCH
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, THIS_ARCH, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_membarrier, 0, 3),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[0])),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, MEMBARRIER_CMD_GLOBAL_EXPEDITED, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOMEM),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = { .len = sizeof(f) / sizeof(f[0]), .filter = f };

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) < 0)
		return -1;
	return membarrier(MEMBARRIER_CMD_GLOBAL_EXPEDITED) < 0 && errno == ENOMEM ? 0 : -1;
#else
	return -1;
#endif
}

TEST(clients_attached_before_membarrier_fails_stop_publishing_without_a_fence)
{
	struct client c1, c2, c3;
	struct ep *e1, *e2, *e3;
	struct ctl_attached_wire a;

	if (!endpoints.membarrier)
		SKIP("membarrier(MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED) fails here");
	if (client_open(&c1, 0, &e1, &a) < 0 || client_open(&c2, 1, &e2, &a) < 0) {
		CHECK(!"endpoints open");
		return;
	}
	CHECK(a.flags & CTL_ATTACHED_MEMBARRIER);
	CHECK(c1.tx.fenceless && c2.tx.fenceless);
	/* While membarrier works the daemon sleeps without a time limit, and
	 * a fenceless publish still finds it asleep. */
	CHECK_EQ(sleep_prepare(), 0);
	CHECK(!endpoints.recheck.armed);
	CHECK_EQ(client_send(&c1), 1);
	ep_sleep_done();
	CHECK_EQ(daemon_drain(e1), 1);

	if (break_membarrier() < 0)
		SKIP("cannot make membarrier fail here (seccomp)");
	CHECK_EQ(try_sleep(), 1);               /* it failed: look again, the fenced way */
	CHECK_EQ(endpoints.membarrier, 0);
	CHECK_EQ(atomic_load(&e1->tx.sh->consumer_fences), 0);
	CHECK_EQ(atomic_load(&e2->tx.sh->consumer_fences), 0);
	/* Neither client has noticed yet: the daemon sleeps, but for a while
	 * only, since their next publish may still skip the fence. */
	CHECK_EQ(sleep_prepare(), 0);
	CHECK(endpoints.recheck.armed);
	CHECK(endpoints.recheck.when_ns <= loop_now_ns() + RECHECK_NS);
	/* Client 1 publishes: it notices, fences, finds the daemon asleep,
	 * and answers. */
	CHECK_EQ(client_send(&c1), 1);
	CHECK_EQ(c1.tx.fenceless, 0);
	ep_sleep_done();
	loop_timer_cancel(&endpoints.recheck);
	CHECK_EQ(try_sleep(), 1);               /* the record is there */
	CHECK_EQ(daemon_drain(e1), 1);
	/* Client 2 has still not published: still a time limit. */
	CHECK_EQ(try_sleep(), 0);
	CHECK(endpoints.recheck.armed);
	loop_timer_cancel(&endpoints.recheck);
	CHECK_EQ(client_send(&c2), 0);          /* the daemon is awake */
	CHECK_EQ(c2.tx.fenceless, 0);
	CHECK_EQ(try_sleep(), 1);
	CHECK_EQ(daemon_drain(e2), 1);
	/* Both answered: sleeping without a limit is safe again. */
	CHECK_EQ(try_sleep(), 0);
	CHECK(!endpoints.recheck.armed);
	/* A client attaching now is offered nothing. */
	if (client_open(&c3, 2, &e3, &a) < 0) {
		CHECK(!"endpoint opens");
		return;
	}
	CHECK(!(a.flags & CTL_ATTACHED_MEMBARRIER));
	CHECK_EQ(c3.tx.fenceless, 0);
	CHECK_EQ(try_sleep(), 0);
	CHECK(!endpoints.recheck.armed);
	CHECK_EQ(ring_consumer_fenceless(&e3->tx), 0);
	ep_close(e3);
	munmap(c3.map, c3.bytes);

	ep_close(e1);
	ep_close(e2);
	munmap(c1.map, c1.bytes);
	munmap(c2.map, c2.bytes);
}

int main(void)
{
	static const struct loop_hooks hooks = { 0 };

	log_init("test_endpoint", LOG_CRIT);
	conf_defaults(&conf);
	if (loop_init(0, &hooks) < 0 || ep_init(&conf, 0) < 0)
		return 1;
	RUN(clients_attached_before_membarrier_fails_stop_publishing_without_a_fence);
	ep_fini();
	loop_fini();
	conf_free(&conf);
	return check_done();
}
