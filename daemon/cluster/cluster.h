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

/* For ferryctl status (only uid's jobs, unless uid is 0): the jobs with ranks
 * here, and the jobs this node is home of. */
void cluster_write_status(FILE *out, uid_t uid);

#endif
