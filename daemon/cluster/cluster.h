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
 * (its home notices, home.h), or a node is lost (the peer layer's lost event:
 * down for 2 s, or restarted and so without its state), the jobs that can
 * no longer complete a step (ranks on the lost node, or routes to or from
 * their nodes, or to the home, through it) fail: a FAIL record goes to
 * their ranks here and FAIL to their other nodes and home.
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

/* The job can complete no more steps: err (EPIPE, EHOSTDOWN) goes to its
 * ranks here as a FAIL record (their ferry_step_wait returns it, with the
 * message), and to its other nodes and its home (FAIL).  rank: the rank that
 * left, node: the node lost, UINT32_MAX if none.  Once per job. */
void cluster_fail_job(struct job *j, uint32_t rank, uint32_t node, int err, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));

/* Loop hook: handles the control items that arrived, sends step reports. */
int cluster_poll(void);

/* For ferryctl status (only uid's jobs, unless uid is 0): the jobs with ranks
 * here, and the jobs this node is home of. */
void cluster_write_status(FILE *out, uid_t uid);

#endif
