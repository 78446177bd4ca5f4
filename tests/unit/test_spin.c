/* tests/unit/test_spin.c - core specialisation in the daemon: the event
 * loop keeps spinning (not sleeping) while a layer asks it to
 * (loop_spin_until, daemon/core/loop.c), and an endpoint knows whether its
 * client may run on any of the daemon's CPUs (ep->other_cpus,
 * ep_all_apart: daemon/local/endpoint.c), which coll.c asks first.  Real
 * processes with real CPU affinities; the loop's order of events, not
 * clock windows, decides. */
#define UNIT "spin"
#include "check.h"
#include "../../daemon/core/conf.h"
#include "../../daemon/core/log.h"
#include "../../daemon/core/loop.h"
#include "../../daemon/local/endpoint.h"

#include <sched.h>
#include <sys/prctl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

/* The loop's hook before it sleeps: records when, and stops it there. */
static int fired;
static uint64_t slept_at_ns;
static int fired_before_sleep;

static int before_sleep(void)
{
	slept_at_ns = loop_now_ns();
	fired_before_sleep = fired;
	loop_stop();
	return 1;               /* (not sleeping: it stops) */
}

static void timer_fired(struct loop_timer *t)
{
	(void)t;
	fired++;
}

/* Spinning asked for until 20 ms from now: the loop first decides to sleep
 * at that time or later, after the 5 ms timer ran in a spinning turn
 * (whatever the scheduler does meanwhile: no clock window). */
TEST(the_loop_spins_while_asked_then_sleeps)
{
	struct loop_timer t5 = { 0 };
	uint64_t until = loop_now_ns() + 20000000ull;

	fired = 0;
	loop_spin_until(until);
	loop_timer_arm(&t5, 5000000ull, timer_fired, NULL);
	CHECK_EQ(loop_run(), 0);
	CHECK(slept_at_ns >= until);
	CHECK_EQ(fired_before_sleep, 1);
}

/* Without it (spin_us 0 here), the loop decides to sleep in its first
 * turn, long before a timer a second away. */
TEST(without_it_the_loop_sleeps_at_once)
{
	struct loop_timer t1s = { 0 };

	fired = 0;
	loop_spin_until(0);
	loop_timer_arm(&t1s, 1000000000ull, timer_fired, NULL);
	CHECK_EQ(loop_run(), 0);
	CHECK_EQ(fired_before_sleep, 0);
	loop_timer_cancel(&t1s);
}

static struct conf conf;

/* An endpoint for process pid (its job "spinN"). */
static struct ep *open_for(pid_t pid, uint32_t n)
{
	struct ctl_attached_wire a;
	struct ep *ep;
	char job[16];
	int fds[4];

	snprintf(job, sizeof(job), "spin%u", n);
	if (ep_open(1000, pid, n, job, 0, 2, &ep, &a, fds) < 0)
		return NULL;
	close(fds[0]);
	return ep;
}

TEST(an_endpoint_knows_whether_its_client_shares_our_cpus)
{
	cpu_set_t all, one;
	struct ep *ep, *self;
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
	CHECK_EQ(ep_all_apart(), 0);            /* no endpoint */
	/* a client on our CPUs (this process) */
	self = open_for(getpid(), 1);
	CHECK(self && !self->other_cpus && !ep_all_apart());
	if (self)
		ep_close(self);
	if (cpu1 < 0)
		SKIP("needs 2 CPUs");
	child = fork();
	if (child < 0) {
		CHECK(child > 0);
		return;
	}
	if (child == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		pause();
		_exit(0);
	}
	CPU_ZERO(&one);
	CPU_SET(cpu0, &one);
	CHECK_EQ(sched_setaffinity(child, sizeof(one), &one), 0);
	/* ferryd (this process) on another CPU than the client: apart */
	CPU_ZERO(&one);
	CPU_SET(cpu1, &one);
	CHECK_EQ(sched_setaffinity(0, sizeof(one), &one), 0);
	ep = open_for(child, 2);
	CHECK(ep && ep->other_cpus && ep_all_apart());
	/* ... until a client on ferryd's CPUs joins */
	self = open_for(getpid(), 3);
	CHECK(self && !ep_all_apart());
	if (self)
		ep_close(self);
	CHECK(ep_all_apart());
	/* ferryd moved onto the client's CPU too (taskset -p, as the bench
	 * does): seen at the next look, 100 ms on */
	CHECK_EQ(sched_setaffinity(0, sizeof(all), &all), 0);
	if (ep) {
		ep_check_cpus(ep);
		CHECK(ep->other_cpus);          /* (not yet looked at again) */
		usleep(110000);
		ep_check_cpus(ep);
		CHECK(!ep->other_cpus && !ep_all_apart());
		ep_close(ep);
	}
	kill(child, SIGKILL);
	waitpid(child, NULL, 0);
}

int main(void)
{
	static const struct loop_hooks hooks = { .sleep_prepare = before_sleep };
	char err[256];

	log_init("test_spin", LOG_ERR);
	if (conf_load_string(&conf, "limits: { ring_bytes = 262144; };", "unit.conf", err, sizeof(err)) < 0) {
		fprintf(stderr, "%s\n", err);
		return 1;
	}
	if (loop_init(0, &hooks) < 0 || ep_init(&conf, 0) < 0)
		return 1;
	RUN(the_loop_spins_while_asked_then_sleeps);
	RUN(without_it_the_loop_sleeps_at_once);
	RUN(an_endpoint_knows_whether_its_client_shares_our_cpus);
	ep_fini();
	loop_fini();
	conf_free(&conf);
	return check_done();
}
