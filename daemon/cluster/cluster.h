/* daemon/cluster/cluster.h - jobs across nodes, and the end of steps: the
 * node's side of the job protocol (its home's side is home.h, the counting
 * steps.h).
 *
 * Every job has a home node, hash(uid, name) mod N.  This node tells the home
 * about each local rank that joins or leaves (the session layer's events),
 * takes the rank table the home sends once every rank has joined (TABLE),
 * answers HAVE, and on GO tells its endpoints READY; it reports its step
 * counters (steps.h) and, on STEP, appends a STEP record to each local
 * endpoint's RX ring, behind every item of the step.  These messages are
 * items of job 0 (fwd/ctlq.h), so they are routed, acknowledged and resent
 * like any other.
 *
 * Steps end by counting (the issue allowed staged completion or counting;
 * this needs no per-dimension ordering and works on every topology alike).
 *
 * Steps fail rather than hang: when a rank leaves a job that has started
 * (its home notices, home.h), or something a job needs is lost, its ranks'
 * steps fail (a FAIL record in their RX rings).  The peer layer's lost event
 * says what: the link to a peer has been down for 2 s (the peer may well be
 * alive, and other nodes still reach it), or the peer restarted and so has
 * none of its earlier state.  Its peers notice, and tell every node (LOST);
 * each fails the jobs of its own whose routes (between it and the job's
 * other nodes, or its home) the loss cuts.  A link that is down fails only
 * the jobs routed over it, not every job of the nodes at its ends.  The
 * home decides, so that every rank completes the same steps (home.h): a
 * node asks it (FAIL to the home) and fails its ranks itself only when the
 * routes between it and the home are cut.  Of the two ends of a broken link
 * at least one still reaches any home (routes are minimal: they cannot both
 * run through each other), so the home hears of it.
 *
 * A job being set up is not failed by a loss: a rank of a node that
 * restarted may join again, and until every rank has joined ferry_open's
 * own timeout bounds the wait.
 *
 * Ownership: the node side keeps nothing of its own: the jobs and their
 * counters are local/job.h's (they end when their last local rank leaves);
 * the home's records are home.c's.
 */
#ifndef FERRY_CLUSTER_CLUSTER_H
#define FERRY_CLUSTER_CLUSTER_H

#include "../core/conf.h"
#include "../local/job.h"
#include "../local/session.h"

#include <stdio.h>
#include <sys/types.h>

int cluster_init(const struct conf *c, uint32_t self);
void cluster_fini(void);

/* What the session layer tells this layer (sess_init). */
extern const struct sess_events cluster_sess_events;

/* The home node of the job (uid, name). */
uint32_t cluster_home(uid_t uid, const char *name);

/* Loop hook: handles the control items that arrived, sends step reports. */
int cluster_poll(void);

/* The collective engine (the layer above) takes the pieces of collective
 * messages (control items of type WIRE_CTL_COLL) that arrive for this node:
 * fn(from, payload, len) is called from cluster_poll for each, from the node
 * that sent it.  NULL: they are dropped. */
typedef void cluster_coll_rx_fn(uint32_t from, const uint8_t *payload, uint32_t len);
void cluster_set_coll_rx(cluster_coll_rx_fn *fn);

/* Something this node found makes the job unable to go on (a collective
 * that failed here: err, why): it asks the home to fail the job, whose FAIL
 * reaches every node of the job, which fail their ranks' steps and their
 * collective operations after coll_ok (the same way as when a rank
 * leaves). */
void cluster_job_fail(struct job *j, int err, uint32_t coll_ok, const char *why);

/* For ferryctl status (only uid's jobs, unless uid is 0): the jobs with ranks
 * here, and the jobs this node is home of. */
void cluster_write_status(FILE *out, uid_t uid);

#endif
