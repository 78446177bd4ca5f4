/* daemon/cluster.h - jobs across nodes, and the end of steps.
 *
 * Every job has a home node, hash(uid, name) mod N.  A daemon tells the home
 * about each rank that joins or leaves on its node; the home keeps the rank
 * table (rank -> node), refuses a rank taken elsewhere or a size that differs,
 * gives the job a cluster-wide id (home << 12 | index), and once every rank
 * has joined sends the table to every node that hosts ranks.  When all of
 * them have it (HAVE), it tells them to go (GO), and their daemons let
 * ferry_open return: no item can reach a node that does not yet know its job.
 * These messages are items of job 0, so they are routed, acknowledged and
 * resent like any other.
 *
 * Steps end by counting (the issue allowed staged completion or counting; this
 * needs no per-dimension ordering and works on every topology alike).  Each
 * node hosting ranks counts, per job and over all steps, the items its ranks
 * handed over (sent) and the items written into its endpoints' RX rings or
 * dropped for a departed rank (ringed).  A rank's DONE record follows its
 * items in its TX ring, so a node's sent count is final for its ranks that are
 * done.  While any local rank is done, the node reports (done, sent, ringed)
 * to the home whenever they change (at most every 50 us, at once when done
 * changes).  The home declares step s complete when every rank is done and the
 * sums of sent and ringed are equal, and sends STEP to the hosting nodes,
 * which append a STEP record to each local endpoint's RX ring: behind every
 * item of the step.  A rank cannot send items of step s+1 before that arrives
 * (ferry_step_wait), so counts of different steps never mix.
 */
#ifndef FERRY_CLUSTER_H
#define FERRY_CLUSTER_H

#include "conf.h"
#include "job.h"

#include <stdio.h>
#include <sys/types.h>

struct wire_item;

int cluster_init(const struct conf *c, uint32_t self);
void cluster_fini(void);

/* The home node of the job (uid, name). */
uint32_t cluster_home(uid_t uid, const char *name);

/* A local rank joined j (the endpoint has its region already). */
void cluster_join(struct job *j, uint32_t rank);
/* A local rank of the job left (j may have been freed: hence the values). */
void cluster_leave(uid_t uid, const char *name, uint32_t size, uint32_t rank, uint32_t home);

/* A control item (job 0) for this node arrived. */
void cluster_ctl_item(const struct wire_item *it, const void *payload);

/* Loop hook: handles control messages to ourselves, sends step reports. */
int cluster_poll(void);

/* The jobs this node is home of, for ferryctl status (only uid's, unless 0). */
void cluster_write_status(FILE *out, uid_t uid);

#endif
