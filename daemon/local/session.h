/* daemon/local/session.h - client sessions on ferryd's Unix socket.
 *
 * Owns the listening socket and every client connection.  An application's
 * session (libferry) says HELLO and JOIN; the session checks what the
 * client's credentials allow, opens its endpoint (endpoint.h), sends it the
 * region and eventfds, and READY once the job's rank table is complete
 * (before READY, to clients that asked, the job's direct rings: direct.h).  A
 * tool's session (ferryctl) sends QUERY messages, answered by the query
 * function main registers.
 *
 * Upward, the layer above (cluster) hears of ranks that join and leave here
 * through struct sess_events, registered at init.
 *
 * Ownership: a session is freed from the loop (sess_poll), never inside an
 * event: closing one marks it, and its endpoint ends at the next turn of the
 * loop, after its TX ring was drained once more (unless the client broke the
 * protocol).
 */
#ifndef FERRY_LOCAL_SESSION_H
#define FERRY_LOCAL_SESSION_H

#include "job.h"
#include "../core/conf.h"
#include "../../proto/ctl.h"

struct ep;

#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#define SESS_SOCKET_NAME  "ferryd.sock"
/* MEM descriptors a session may hold that came before their messages were
 * read whole (session.c): ferryd's descriptors per client count them. */
#define SESS_FDS_IN 4

struct sess_stats {
	uint64_t sessions_opened;
	uint64_t sessions_closed;
	uint64_t sessions_killed;       /* closed because the client misbehaved */
	uint64_t sessions_refused;      /* connections over limits.max_unjoined or user_unjoined */
	uint64_t sessions_timed_out;    /* join_timeout_ms or admin_idle_ms passed */
	uint64_t joins_refused;         /* JOINs over a limit on endpoints, jobs or memory */
	uint64_t accept_paused;         /* times accept found no fd or memory and paused */
	uint64_t joins_waited_fds;      /* times a JOIN found no fd and waited */
};
extern struct sess_stats sess_stats;

/* Answers an admin QUERY (ferryctl): writes the reply text to out, or returns
 * -errno to refuse.  cred is the asking process. */
struct ucred;
typedef int sess_query_fn(uint32_t what, uint32_t arg, const struct ucred *cred, FILE *out);

struct sess_events {
	/* A local rank joined j: its client has the region, and waits for
	 * READY (sess_job_ready). */
	void (*rank_joined)(struct job *j, uint32_t rank);
	/* A local rank leaves: ep (ep->job, ep->rank) ends right after, and
	 * its job too if it was its last rank here. */
	void (*rank_left)(struct ep *ep);
	/* A local rank whose client has READY posted a collective operation
	 * (decoded and checked as ctl_decode does; the rest is the layer's
	 * to check).  Optional: without it, COLL is a protocol error. */
	void (*coll_post)(struct ep *ep, const struct ctl_coll_wire *c);
	/* ... left split group id (GROUP_FREE).  Optional, with coll_post. */
	void (*coll_group_free)(struct ep *ep, uint32_t id);
};

/* Sets up the listening socket in c->runtime_dir, or takes listen_fd (socket
 * activation) if >= 0.  query and ev stay valid until sess_fini.  Returns 0
 * or -errno (logged). */
int sess_init(const struct conf *c, uint32_t self, int listen_fd, sess_query_fn *query,
	      const struct sess_events *ev);

/* Closes every session (their endpoints end without telling the layer
 * above: the daemon is going away) and the socket; removes the socket file
 * if we made it. */
void sess_fini(void);

/* Loop hook: publishes RX rings, ends the sessions and endpoints that were
 * closed.  Runs after the TX rings were drained in this turn of the loop. */
int sess_poll(void);

/* Loop hook, before the collective engine's: runs what clients posted on
 * their post pages (proto/post.h) that may run now, as if it came on their
 * sockets.  Returns 1 if it ran any. */
int sess_take_posts(void);

/* Tells ep's client that its collective operation seq ended: err 0, or a
 * positive errno and why.  A client that does not read its socket loses its
 * session (SESS_OUT_MAX). */
void sess_coll_done(struct ep *ep, uint32_t group, uint32_t seq, int err, const char *why);

/* Stops accepting clients (SIGTERM). */
void sess_stop_accepting(void);

/* Sessions open. */
uint32_t sess_count(void);

/* Bytes of replies and errors held for clients that have not read them. */
uint64_t sess_out_bytes(void);

/* The rank table of j is complete: READY to its endpoints here. */
void sess_job_ready(struct job *j);

/* The job's home refused a rank that joined here (err: EADDRINUSE, EINVAL...). */
void sess_reject_rank(uid_t uid, const char *name, uint32_t rank, int err);

#endif
