/* client/poll.c - waiting without spinning: ferry_poll, and how long the
 * library spins before it sleeps.  See internal.h.
 *
 * Why this matters: on a node where the application's processes and ferryd
 * share the cores, every cycle a client spends looking at an empty ring or a
 * full one is a cycle the daemon that would empty or fill it does not get.
 * With 16 clients spinning on -EAGAIN and empty ferry_recv(..., 0) calls,
 * 8 daemons on two cores got the CPU once per scheduler round and a
 * sustained all-to-all fell to a tenth of its rate.  So: an application
 * that can neither send nor receive sleeps in ferry_poll until the daemon
 * makes room or delivers, and the library spins before sleeping only when
 * the daemon runs on cores of its own (daemon.cpus), where a spinning client
 * takes nothing from it.
 */
#include "internal.h"
#include "../proto/clock.h"
#include "../proto/ring.h"

#include <errno.h>
#include <sched.h>
#include <sys/socket.h>

/* Spin before sleeping, when the daemon has cores of its own: a sleep and a
 * wake-up cost tens of microseconds on the virtual machines we measure on
 * (README, Performance), a few on bare metal. */
#define OWN_CORES_SPIN_US 50

void poll_setup(struct ferry *f)
{
	struct ucred cred;
	socklen_t len = sizeof(cred);
	cpu_set_t mine, daemon, both;
	pid_t pid = f->daemon_pid;
	int env;

	/* The daemon's pid from the credentials of its messages (conn.c);
	 * failing that, whoever made the listening socket, which is ferryd
	 * unless it was socket-activated. */
	if (pid <= 0 && getsockopt(f->sock, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0)
		pid = cred.pid;
	/* Unless we learn otherwise, the daemon shares our cores, and so does
	 * everyone else: yield at every poll. */
	f->shares_cores = 1;
	f->spin_polls = 1;
	if (sched_getaffinity(0, sizeof(mine), &mine) == 0) {
		f->spin_polls = CPU_COUNT(&mine) > 1 ? SPIN_POLLS : 1;
		if (pid > 0 && sched_getaffinity(pid, sizeof(daemon), &daemon) == 0) {
			CPU_AND(&both, &mine, &daemon);
			f->shares_cores = CPU_COUNT(&both) != 0;
		}
	}
	if (conn_env_int("FERRY_SPIN_US", &env) == 1)
		f->spin_us = (unsigned)env;
	else
		f->spin_us = f->shares_cores ? 0 : OWN_CORES_SPIN_US;
}

/* Whether the ring that refused the last record has room for it now, or
 * will never have (a direct ring toward a rank that left: what is sent to
 * it is dropped). */
static int room(struct ferry *f)
{
	if (f->want_dr && atomic_load_explicit(&f->dr->gone[f->want_dr->slot], memory_order_acquire))
		return 1;
	return ring_has_room(want_ring(f), f->want_room) != 0;
}

/* What of events is ready now.  POLLOUT: the next ferry_send would not
 * say -EAGAIN (room for the record it refused last), or would fail at once
 * (the step is done, the daemon is gone: let the caller see the error). */
static unsigned ready(struct ferry *f, unsigned events)
{
	unsigned r = 0;

	if ((events & FERRY_POLLIN) && (f->stash_len > f->stash_head || rx_readable(f)))
		r |= FERRY_POLLIN;
	if ((events & FERRY_POLLOUT) && (f->step_done || room(f)))
		r |= FERRY_POLLOUT;
	return r;
}

/* Sets the flags that make the daemon wake us for events; returns 1 if one
 * is ready already (the flags are cleared again), 0 to sleep. */
static int arm(struct ferry *f, unsigned events, struct ring *out)
{
	answer_withdrawals(f);  /* (rx_sleep does too, but not for POLLOUT alone) */
	if ((events & FERRY_POLLIN) && rx_sleep(f))
		return 1;
	if ((events & FERRY_POLLOUT) && ring_producer_sleep(out, f->want_room)) {
		if (events & FERRY_POLLIN)
			rx_awake(f);
		return 1;
	}
	return 0;
}

static void disarm(struct ferry *f, unsigned events, struct ring *out)
{
	if (events & FERRY_POLLIN)
		rx_awake(f);
	if (events & FERRY_POLLOUT)
		ring_producer_awake(out);
}

void poll_rearm(struct ferry *f)
{
	/* (A wait for room may have moved items into the stash and taken
	 * the eventfd's count: they are there to receive too.) */
	if (rx_sleep(f) || f->stash_len > f->stash_head)
		conn_wake(f->efd_client);       /* records are there: the fd must say so */
	f->armed = 1;
}

static int poll_wait(struct ferry *f, unsigned events, int timeout_ms);

FERRY_API int ferry_poll(ferry_t *f, unsigned events, int timeout_ms)
{
	int was_armed = f->armed, ret;

	NOT_ON_GROUP(f);
	if (events & ~(FERRY_POLLIN | FERRY_POLLOUT))
		return conn_seterr(-EINVAL, "ferry_poll: unknown events 0x%x", events);
	if (f->dead)
		return f->dead;
	/* ferry_recv may have left the RX flag set for ferry_fd(): this call
	 * may clear it, and its waits may take the eventfd's count; hand both
	 * back as they would have been (poll_rearm). */
	f->armed = 0;
	ret = poll_wait(f, events, timeout_ms);
	if (was_armed && !f->dead)
		poll_rearm(f);
	return ret;
}

static int poll_wait(struct ferry *f, unsigned events, int timeout_ms)
{
	uint64_t deadline = timeout_ms > 0 ? proto_now_ms() + (uint64_t)timeout_ms : 0;
	uint64_t spin_until = proto_now_ns() + f->spin_us * 1000ull;
	unsigned polls = 0;
	unsigned r;

	for (;;) {
		unsigned want = events;
		struct ring *out;
		int ret, wait;

		if (out_pending(f)) {
			/* Waiting: what is batched leaves first, and room for
			 * what the ring cannot take yet is waited for too. */
			ret = out_flush(f, 0);
			if (ret < 0 && ret != -EAGAIN)
				return ret;
			if (out_pending(f))
				want |= FERRY_POLLOUT;
		}
		if ((r = ready(f, events)) != 0 || events == 0 || timeout_ms == 0)
			break;
		/* Room for what we hold: push it (not ready(), which says
		 * POLLOUT once the step is done, DONE held or not). */
		if (want != events && room(f))
			continue;
		if (proto_now_ns() < spin_until) {
			spin_turn(f, &polls);
			continue;
		}
		out = want_ring(f);
		if (arm(f, want, out)) {
			if (f->dead)    /* (rx_sleep can end the handle) */
				return f->dead;
			continue;
		}
		wait = conn_wait_ms(deadline, timeout_ms < 0);
		ret = wait == 0 ? -ETIMEDOUT : conn_wait(f, wait);
		disarm(f, want, out);
		if (ret == -ETIMEDOUT)
			return (int)ready(f, events);
		if (ret < 0)
			return ret;
	}
	/* A daemon that went away leaves rings that never change: say so
	 * rather than "nothing yet" (a ready ring is worth reading first). */
	if (!r && conn_check(f) < 0)
		return f->dead;
	return (int)r;
}
