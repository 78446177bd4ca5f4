/* daemon/core/loop.h - the daemon's single-threaded event loop.
 *
 * epoll for file descriptors, one timerfd for all timers, and adaptive polling:
 * after any activity the loop keeps calling the poll hook without sleeping for
 * spin_us microseconds (waking a sleeping thread costs tens of microseconds on
 * the VMs we run on); once idle that long it asks the sleep hook to arm wake-ups
 * (set "sleeping" flags in the rings) and blocks in epoll_wait.
 */
#ifndef FERRY_LOOP_H
#define FERRY_LOOP_H

#include "../../proto/clock.h"

#include <stdint.h>

struct loop_watch;
typedef void loop_fd_fn(struct loop_watch *w, uint32_t events);

struct loop_watch {
	int fd;
	loop_fd_fn *fn;
	void *ctx;
};

struct loop_timer;
typedef void loop_timer_fn(struct loop_timer *t);

struct loop_timer {
	uint64_t when_ns;               /* CLOCK_MONOTONIC deadline */
	loop_timer_fn *fn;
	void *ctx;
	struct loop_timer *prev, *next; /* sorted by when_ns while armed */
	int armed;
};

/* Hooks the data path provides.  poll: do a bounded amount of work, return
 * nonzero if anything was done.  sleep_prepare: arm wake-ups; return nonzero
 * if work appeared meanwhile (then the loop does not sleep).  sleep_done: the
 * loop woke up; clear what sleep_prepare armed. */
struct loop_hooks {
	int (*poll)(void);
	int (*sleep_prepare)(void);
	void (*sleep_done)(void);
};

int loop_init(uint32_t spin_us, const struct loop_hooks *hooks);
void loop_fini(void);

/* Watches fd for events (EPOLLIN etc.).  Returns 0 or -errno.
 *
 * Ownership: the caller owns w.  After loop_del, events already fetched in
 * the current batch are not delivered, but w's memory must stay valid until
 * the loop has finished the batch: free what holds a watch with loop_bury
 * (below), or from a poll hook or a timer. */
int loop_add(struct loop_watch *w, int fd, uint32_t events, loop_fd_fn *fn, void *ctx);
int loop_mod(struct loop_watch *w, uint32_t events);
void loop_del(struct loop_watch *w);

/* Deferred freeing.  Whatever a callback may still be using further up its
 * stack (a link whose frame is being handed over, a watch later in this
 * batch of events) is not freed where it dies: it is marked dead and buried,
 * and the loop calls fn once the callback that buried it has returned, after
 * the current batch of fd events, the timers, or the poll hook.  The dead
 * object must have let go of everything else (fds, watches, timers) when it
 * is buried; fn frees its memory. */
struct loop_grave;
typedef void loop_grave_fn(struct loop_grave *g);

struct loop_grave {
	struct loop_grave *next;
	loop_grave_fn *fn;
};

void loop_bury(struct loop_grave *g, loop_grave_fn *fn);
/* Frees what was buried (the loop does this itself; for shutdown and tests). */
void loop_reap(void);

/* (Re)arms t to fire once after delay_ns. */
void loop_timer_arm(struct loop_timer *t, uint64_t delay_ns, loop_timer_fn *fn, void *ctx);
void loop_timer_cancel(struct loop_timer *t);

/* The time loop_run read after its last epoll_wait (0 outside loop_run). */
extern uint64_t loop_clock_ns;

/* Nanoseconds of CLOCK_MONOTONIC: inside the loop, as of the start of the
 * current turn (one clock read per turn: a read costs tens of nanoseconds
 * on the VMs we run on, and a turn made a dozen); outside it, now. */
static inline uint64_t loop_now_ns(void)
{
	return loop_clock_ns ? loop_clock_ns : proto_now_ns();
}

/* Marks the loop busy so it keeps spinning (e.g. after a wake-up event). */
void loop_kick(void);

/* Keeps the loop spinning, not sleeping, until CLOCK_MONOTONIC time
 * until_ns, with or without work (0: no longer; the last call decides).
 * For the one layer (coll.c) that expects events soon and whose clients
 * do not need the CPU the loop runs on. */
void loop_spin_until(uint64_t until_ns);

/* Runs until loop_stop() is called from inside it.  Returns 0 or -errno if
 * epoll fails. */
int loop_run(void);
void loop_stop(void);

/* Counters for ferryctl stats. */
struct loop_stats {
	uint64_t wakeups;       /* returns from a sleeping epoll_wait */
	uint64_t spins;         /* poll hook calls */
};
extern struct loop_stats loop_stats;

#endif
