/* daemon/coll/coll.h - the collective engine (DESIGN.md, "Collectives"):
 * the operations ranks post, run node-level by the daemons.
 *
 * A rank's client posts its operations as CTL_COLL messages, on its post
 * page (proto/post.h; the session layer runs them as if they came on the
 * control socket, in order with what does), numbered from 1 in the order it
 * posts them; every rank of a job posts the
 * same operations in the same order, so operation k is every rank's k-th.
 * This node starts operation k when each of the job's local ranks has
 * posted it (their contributions are combined before anything goes to the
 * network): it plans this node's part of the schedule over the job's nodes
 * (daemon/plan/), numbered 0..G-1 in the order of their node ids, and runs
 * it on an executor (exec.h), whose pieces travel as control items
 * (WIRE_CTL_COLL, routed and resent like every item).  When the executor is
 * done, every local rank hears it: on its done page (proto/done.h), or a
 * COLL_DONE on the socket.  Pieces that come for an
 * operation this node has not started yet wait with it, up to
 * COLL_EARLY_MAX bytes per job, and are handed to it when it starts, within
 * each turn's budget (the rest at the next turns).
 *
 * Failure: when the job fails (a rank leaves, a node is lost: cluster.h),
 * every operation it has outstanding here fails with the job's errno and
 * text; when an operation fails here (a piece that does not fit its
 * schedule, counts that disagree, memory), this node asks the job's home to
 * fail the job (cluster_job_fail), so every rank hears it within the
 * control path's delay: nothing hangs.  Groups made by ferry_split
 * (CTL_COLL_SPLIT) have their own operation numbers and fail on their own:
 * coll.c, "Groups".  A rank that breaks the protocol
 * (posts out of order, a kind the others' k-th is not) loses its session.
 *
 * Ownership: struct cjob (one per job with collectives here) holds a job
 * reference (job_hold) and owns its groups (the job's own first), each of
 * which owns its operations; an operation owns its
 * schedule, executor and early pieces.  Everything is freed from coll_poll
 * (never inside an event): an operation once its ranks heard it ended, a
 * split group once its ranks here all left it and nothing of it runs, a
 * cjob once nothing of it runs and its job is gone.
 */
#ifndef FERRY_COLL_COLL_H
#define FERRY_COLL_COLL_H

#include "../core/conf.h"
#include "../../proto/ctl.h"

#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

struct ep;

/* Bytes of pieces that may wait for operations not started here, per job. */
#define COLL_EARLY_MAX (64u << 20)

int coll_init(const struct conf *c, uint32_t self);
void coll_fini(void);

/* The session layer's event: ep posted c (its client has READY). */
void coll_post(struct ep *ep, const struct ctl_coll_wire *c);

/* The session layer's event: ep leaves split group id (GROUP_FREE). */
void coll_group_free(struct ep *ep, uint32_t id);

/* Loop hook: runs executors, ends what ended.  Returns 1 if it did work. */
int coll_poll(void);

/* "coll" lines of ferryctl stats (only uid's jobs unless uid is 0). */
void coll_write_stats(FILE *out, uid_t uid);

#endif
