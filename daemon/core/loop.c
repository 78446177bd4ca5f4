/* daemon/core/loop.c - see loop.h. */
#include "loop.h"
#include "log.h"

#include <assert.h>
#include <errno.h>
#include <sched.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

struct loop_stats loop_stats;
uint64_t loop_clock_ns;

static struct {
	int epfd;
	int tfd;
	struct loop_watch tfd_watch;
	uint64_t tfd_armed_for;         /* deadline the timerfd is set to, 0 = none */
	struct loop_timer *timers;      /* sorted, earliest first */
	struct loop_grave *graves;      /* buried, freed by loop_reap */
	struct loop_hooks hooks;
	uint64_t spin_ns;
	uint64_t last_work_ns;
	uint64_t spin_until_ns;         /* loop_spin_until */
	int kicked;                     /* loop_kick since the last look */
	int stop;
} evloop = { .epfd = -1, .tfd = -1 };

void loop_kick(void)
{
	evloop.kicked = 1;      /* loop_run reads the clock once for all kicks of a turn */
}

void loop_spin_until(uint64_t until_ns)
{
	evloop.spin_until_ns = until_ns;
}

static void arm_timerfd(void)
{
	uint64_t when = evloop.timers ? evloop.timers->when_ns : 0;
	struct itimerspec its = { 0 };

	if (when == evloop.tfd_armed_for)
		return;
	its.it_value.tv_sec = (time_t)(when / 1000000000u);
	its.it_value.tv_nsec = (long)(when % 1000000000u);
	if (when == 0)
		memset(&its, 0, sizeof(its));   /* disarm */
	if (timerfd_settime(evloop.tfd, TFD_TIMER_ABSTIME, &its, NULL) < 0)
		log_err("timerfd_settime: %m");
	evloop.tfd_armed_for = when;
}

void loop_bury(struct loop_grave *g, loop_grave_fn *fn)
{
	g->fn = fn;
	g->next = evloop.graves;
	evloop.graves = g;
}

void loop_reap(void)
{
	while (evloop.graves) {
		struct loop_grave *g = evloop.graves;

		evloop.graves = g->next;
		g->fn(g);
	}
}

void loop_timer_cancel(struct loop_timer *t)
{
	if (!t->armed)
		return;
	if (t->prev)
		t->prev->next = t->next;
	else
		evloop.timers = t->next;
	if (t->next)
		t->next->prev = t->prev;
	t->prev = t->next = NULL;
	t->armed = 0;
}

void loop_timer_arm(struct loop_timer *t, uint64_t delay_ns, loop_timer_fn *fn, void *ctx)
{
	struct loop_timer **pp = &evloop.timers, *prev = NULL;

	loop_timer_cancel(t);
	t->when_ns = loop_now_ns() + delay_ns;
	t->fn = fn;
	t->ctx = ctx;
	while (*pp && (*pp)->when_ns <= t->when_ns) {
		prev = *pp;
		pp = &(*pp)->next;
	}
	t->next = *pp;
	t->prev = prev;
	if (*pp)
		(*pp)->prev = t;
	*pp = t;
	t->armed = 1;
}

static void run_timers(void)
{
	uint64_t now = loop_now_ns();

	while (evloop.timers && evloop.timers->when_ns <= now) {
		struct loop_timer *t = evloop.timers;

		loop_timer_cancel(t);
		t->fn(t);
		loop_reap();
	}
}

static void on_timerfd(struct loop_watch *w, uint32_t events)
{
	uint64_t n;

	(void)events;
	if (read(w->fd, &n, sizeof(n)) < 0 && errno != EAGAIN)
		log_err("timerfd read: %m");
	evloop.tfd_armed_for = 0;    /* it fired: re-arm for whatever is next */
}

int loop_add(struct loop_watch *w, int fd, uint32_t events, loop_fd_fn *fn, void *ctx)
{
	struct epoll_event ev = { .events = events, .data.ptr = w };

	w->fd = fd;
	w->fn = fn;
	w->ctx = ctx;
	if (epoll_ctl(evloop.epfd, EPOLL_CTL_ADD, fd, &ev) < 0)
		return -errno;
	return 0;
}

int loop_mod(struct loop_watch *w, uint32_t events)
{
	struct epoll_event ev = { .events = events, .data.ptr = w };

	if (epoll_ctl(evloop.epfd, EPOLL_CTL_MOD, w->fd, &ev) < 0)
		return -errno;
	return 0;
}

void loop_del(struct loop_watch *w)
{
	if (w->fd >= 0 && epoll_ctl(evloop.epfd, EPOLL_CTL_DEL, w->fd, NULL) < 0)
		log_err("epoll_ctl del fd %d: %m", w->fd);
	w->fd = -1;
}

int loop_init(uint32_t spin_us, const struct loop_hooks *hooks)
{
	int ret;

	evloop.epfd = epoll_create1(EPOLL_CLOEXEC);
	if (evloop.epfd < 0) {
		ret = -errno;
		log_err("epoll_create1: %m");
		return ret;
	}
	evloop.tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	if (evloop.tfd < 0) {
		ret = -errno;
		log_err("timerfd_create: %m");
		goto err_epoll;
	}
	ret = loop_add(&evloop.tfd_watch, evloop.tfd, EPOLLIN, on_timerfd, NULL);
	if (ret < 0) {
		log_err("epoll_ctl add timerfd: %s", strerror(-ret));
		goto err_tfd;
	}
	evloop.hooks = *hooks;
	evloop.spin_ns = (uint64_t)spin_us * 1000u;
	evloop.stop = 0;
	return 0;

err_tfd:
	close(evloop.tfd);
	evloop.tfd = -1;
err_epoll:
	close(evloop.epfd);
	evloop.epfd = -1;
	return ret;
}

void loop_fini(void)
{
	loop_reap();
	if (evloop.tfd >= 0)
		close(evloop.tfd);
	if (evloop.epfd >= 0)
		close(evloop.epfd);
	evloop.tfd = evloop.epfd = -1;
	evloop.timers = NULL;
	evloop.spin_until_ns = 0;
	evloop.tfd_armed_for = 0;
}

void loop_stop(void)
{
	evloop.stop = 1;
}

int loop_run(void)
{
	struct epoll_event evs[64];

	evloop.stop = 0;
	loop_clock_ns = proto_now_ns();
	evloop.last_work_ns = loop_now_ns();
	while (!evloop.stop) {
		int timeout = 0, sleeping = 0, n;

		loop_stats.spins++;
		if ((evloop.hooks.poll && evloop.hooks.poll()) || evloop.kicked) {
			evloop.kicked = 0;
			evloop.last_work_ns = loop_now_ns();
		}
		loop_reap();
		run_timers();
		if (evloop.kicked) {
			evloop.kicked = 0;
			evloop.last_work_ns = loop_now_ns();
		}
		if (evloop.stop)
			break;
		if (loop_now_ns() - evloop.last_work_ns >= evloop.spin_ns && loop_now_ns() >= evloop.spin_until_ns) {
			/* Idle long enough: arm wake-ups and block. */
			if (evloop.hooks.sleep_prepare && evloop.hooks.sleep_prepare()) {
				if (evloop.hooks.sleep_done)
					evloop.hooks.sleep_done();
				evloop.last_work_ns = loop_now_ns();
				continue;
			}
			arm_timerfd();
			timeout = -1;
			sleeping = 1;
		}
		if (!sleeping)
			sched_yield();  /* spinning: let the clients we wait for run (see ferry_recv) */
		n = epoll_wait(evloop.epfd, evs, 64, timeout);
		loop_clock_ns = proto_now_ns();
		if (sleeping) {
			loop_stats.wakeups++;
			if (evloop.hooks.sleep_done)
				evloop.hooks.sleep_done();
		}
		if (n < 0) {
			if (errno == EINTR)
				continue;
			log_err("epoll_wait: %m");
			loop_clock_ns = 0;
			return -errno;
		}
		for (int i = 0; i < n; i++) {
			struct loop_watch *w = evs[i].data.ptr;

			/* An earlier event of this batch may have deleted it
			 * (loop_del sets fd to -1); its memory must still be
			 * valid, see loop.h. */
			if (w->fd >= 0)
				w->fn(w, evs[i].events);
		}
		/* Only now: a watch later in the batch may be in a grave. */
		loop_reap();
		if (n > 0 || evloop.kicked) {
			evloop.kicked = 0;
			evloop.last_work_ns = loop_now_ns();
		}
	}
	loop_clock_ns = 0;
	return 0;
}
