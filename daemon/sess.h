/* daemon/sess.h - client sessions on ferryd's Unix socket.
 *
 * Owns the listening socket, every client connection, the shared-memory
 * region of each endpoint (TX and RX rings) and the queues of items waiting for
 * room in an RX ring.  The data path between local endpoints lives here: the
 * loop's poll hook (sess_poll) drains TX rings and delivers into RX rings.
 *
 * Backpressure, never loss: an item whose destination ring is full waits in
 * the destination's queue (daemon memory).  When that queue holds
 * limits.pending_bytes, or all queues together limits.memory_bytes, the daemon
 * stops draining the sender's TX ring (the item stays there) until the queue
 * has drained to half; the sender's ring then fills and ferry_send returns
 * -EAGAIN (or waits, per flag).
 */
#ifndef FERRY_SESS_H
#define FERRY_SESS_H

#include "conf.h"

#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#define SESS_SOCKET_NAME  "ferryd.sock"
#define SESS_MAX_RANKS    (1u << 20)

struct sess_stats {
	uint64_t sessions_opened;
	uint64_t sessions_closed;
	uint64_t sessions_killed;       /* closed because the client misbehaved */
	uint64_t items_in;              /* items taken from TX rings */
	uint64_t bytes_in;
	uint64_t items_delivered;       /* items written into RX rings */
	uint64_t items_queued;          /* items that had to wait in daemon memory */
	uint64_t items_dropped;         /* destination rank gone */
	uint64_t stalls;                /* TX draining stopped for backpressure */
	uint64_t flushes;               /* FLUSH records seen */
};
extern struct sess_stats sess_stats;

/* Answers an admin QUERY (ferryctl): writes the reply text to out, or returns
 * -errno to refuse.  cred is the asking process. */
struct ucred;
typedef int sess_query_fn(uint32_t what, uint32_t arg, const struct ucred *cred, FILE *out);

/* Sets up the listening socket in c->runtime_dir, or takes listen_fd (socket
 * activation) if >= 0.  Returns 0 or -errno (logged). */
int sess_init(const struct conf *c, uint32_t self, int listen_fd, sess_query_fn *query);

/* Closes every session and the socket, removes the socket file if we made it. */
void sess_fini(void);

/* Loop hooks: see loop.h. */
int sess_poll(void);
int sess_sleep_prepare(void);
void sess_sleep_done(void);

/* Stops accepting clients (SIGTERM).  Returns 1 while queued items or
 * unconsumed TX records remain, 0 when everything has been delivered. */
void sess_stop_accepting(void);
int sess_busy(void);

/* Counts for STATUS= and ferryctl. */
uint32_t sess_count(void);
uint32_t sess_endpoints(void);
uint64_t sess_region_bytes(void);

/* An item from the network for an endpoint here.  Returns 0 (delivered,
 * queued or dropped for a rank that is gone) or -EAGAIN: its queue is full,
 * try again later. */
struct wire_item;
struct job;
int sess_deliver_item(const struct wire_item *it, const void *payload);

/* The rank table of j is complete: READY to its endpoints here. */
void sess_job_ready(struct job *j);

/* The job's home refused a rank that joined here (err: EADDRINUSE, EINVAL...). */
void sess_reject_rank(uid_t uid, const char *name, uint32_t rank, int err);

/* Step step of j is complete: a STEP record to each endpoint here, behind
 * every item of the step. */
void sess_step_complete(struct job *j, uint32_t step);

/* Writes a human-readable status (only the jobs of uid unless uid is 0). */
void sess_write_status(FILE *out, uid_t uid);

#endif
