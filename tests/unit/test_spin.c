/* tests/unit/test_spin.c - core specialisation in the daemon: the event
 * loop keeps spinning (not sleeping) while a layer asks it to
 * (loop_spin_until, daemon/core/loop.c), and an endpoint knows whether its
 * client may run on any of the daemon's CPUs (ep->other_cpus,
 * daemon/local/endpoint.c), which is when coll.c asks.  Real processes with
 * real CPU affinities; the loop's own counters, not the clock, decide. */
#define UNIT "spin"
#include "check.h"
#include "../../daemon/core/conf.h"
#include "../../daemon/core/log.h"
#include "../../daemon/core/loop.h"
#include "../../daemon/local/endpoint.h"

#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

static uint64_t wakeups_at_5ms;
static int fired;

static void at_5ms(struct loop_timer *t)
{
	(void)t;
	wakeups_at_5ms = loop_stats.wakeups;
	fired++;
}

static void at_40ms(struct loop_timer *t)
{
	(void)t;
	fired++;
	loop_stop();
}

/* Spinning asked for 20 ms from the start: the 5 ms timer runs from a turn
 * of the spinning loop, which has not slept once; after the 20 ms it sleeps
 * until the 40 ms timer wakes it. */
TEST(the_loop_spins_while_asked_then_sleeps)
{
	struct loop_timer t5 = { 0 }, t40 = { 0 };
	uint64_t w0 = loop_stats.wakeups;

	fired = 0;
	loop_spin_until(loop_now_ns() + 20000000ull);
	loop_timer_arm(&t5, 5000000ull, at_5ms, NULL);
	loop_timer_arm(&t40, 40000000ull, at_40ms, NULL);
	CHECK_EQ(loop_run(), 0);
	CHECK_EQ(fired, 2);
	CHECK_EQ(wakeups_at_5ms, w0);
	CHECK(loop_stats.wakeups > w0);
}

/* Without it (spin_us 0 here), the loop sleeps at once: the 5 ms timer
 * wakes it. */
TEST(without_it_the_loop_sleeps)
{
	struct loop_timer t5 = { 0 }, t40 = { 0 };
	uint64_t w0 = loop_stats.wakeups;

	fired = 0;
	loop_timer_arm(&t5, 5000000ull, at_5ms, NULL);
	loop_timer_arm(&t40, 40000000ull, at_40ms, NULL);
	CHECK_EQ(loop_run(), 0);
	CHECK_EQ(fired, 2);
	CHECK(wakeups_at_5ms > w0);
}

static struct conf conf;

/* An endpoint for process pid (its job "spinN"), closed again: whether it
 * found pid's CPUs apart from ours. */
static int other_cpus_of(pid_t pid, uint32_t n)
{
	struct ctl_attached_wire a;
	struct ep *ep;
	char job[16];
	int fds[4], other;

	snprintf(job, sizeof(job), "spin%u", n);
	if (ep_open(1000, pid, n, job, 0, 2, &ep, &a, fds) < 0)
		return -1;
	other = ep->other_cpus;
	close(fds[0]);
	ep_close(ep);
	return other;
}

TEST(an_endpoint_knows_whether_its_client_shares_our_cpus)
{
	cpu_set_t all, one;
	pid_t child;
	int cpu0 = -1, cpu1 = -1;

	CHECK_EQ(sched_getaffinity(0, sizeof(all), &all), 0);
	for (int c = 0; c < CPU_SETSIZE && cpu1 < 0; c++)
		if (CPU_ISSET(c, &all)) {
			if (cpu0 < 0)
				cpu0 = c;
			else
				cpu1 = c;
		}
	/* a client on our CPUs (itself) */
	CHECK_EQ(other_cpus_of(getpid(), 1), 0);
	if (cpu1 < 0)
		SKIP("needs 2 CPUs");
	child = fork();
	if (child == 0) {
		pause();
		_exit(0);
	}
	CHECK(child > 0);
	CPU_ZERO(&one);
	CPU_SET(cpu0, &one);
	CHECK_EQ(sched_setaffinity(child, sizeof(one), &one), 0);
	/* ferryd (this process) on another CPU than the client: apart */
	CPU_ZERO(&one);
	CPU_SET(cpu1, &one);
	CHECK_EQ(sched_setaffinity(0, sizeof(one), &one), 0);
	CHECK_EQ(other_cpus_of(child, 2), 1);
	/* moved onto the client's too (taskset -p, as the bench does): shared */
	CHECK_EQ(sched_setaffinity(0, sizeof(all), &all), 0);
	CHECK_EQ(other_cpus_of(child, 3), 0);
	kill(child, SIGKILL);
	waitpid(child, NULL, 0);
}

int main(void)
{
	static const struct loop_hooks hooks = { 0 };
	char err[256];

	log_init("test_spin", LOG_ERR);
	if (conf_load_string(&conf, "limits: { ring_bytes = 262144; };", "unit.conf", err, sizeof(err)) < 0) {
		fprintf(stderr, "%s\n", err);
		return 1;
	}
	if (loop_init(0, &hooks) < 0 || ep_init(&conf, 0) < 0)
		return 1;
	RUN(the_loop_spins_while_asked_then_sleeps);
	RUN(without_it_the_loop_sleeps);
	RUN(an_endpoint_knows_whether_its_client_shares_our_cpus);
	ep_fini();
	loop_fini();
	conf_free(&conf);
	return check_done();
}
