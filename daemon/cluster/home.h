/* daemon/cluster/home.h - the home node's side of the job protocol.
 *
 * Every job has a home node, hash(uid, name) mod N (cluster.h).  Daemons tell
 * the home about each rank that joins or leaves on their node; the home keeps
 * the rank table (rank -> node), refuses a rank taken elsewhere or a size
 * that differs, gives the job a cluster-wide id (home << WIRE_JOB_INDEX_BITS |
 * index), and once every rank has joined sends the table to every node that
 * hosts ranks.  When all of them have it (HAVE), it tells them to go (GO),
 * and their daemons let ferry_open return: no item can reach a node that does
 * not yet know its job.  It also decides when a step ends (steps.h) and tells
 * the hosting nodes (STEP).  A rank that leaves a job that has started
 * means the job can complete no more steps: the home tells the hosting
 * nodes (FAIL, EPIPE), and their ranks' ferry_step_wait returns the error.
 * A FAIL about a lost node (from the nodes that noticed, cluster.h) takes
 * that node's ranks out of the table, as if they had left.
 *
 * Ownership: a job's record lives here from its first JOIN until its last
 * rank left.
 */
#ifndef FERRY_CLUSTER_HOME_H
#define FERRY_CLUSTER_HOME_H

#include "../core/conf.h"
#include "../../proto/wire.h"

#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

void home_init(const struct conf *c, uint32_t self);
void home_fini(void);

/* Control items for the home, from node from (decoded, valid). */
void home_join(const struct wire_ctl *c, uint32_t from);
void home_leave(const struct wire_ctl *c, uint32_t from);
void home_have(const struct wire_ctl *c, uint32_t from);
void home_report(const struct wire_ctl *c, uint32_t from);
void home_fail(const struct wire_ctl *c, uint32_t from);

/* Node is lost (cluster.c heard it): its ranks leave every job this node is
 * home of, as if they had said LEAVE (which they never will); a job that
 * had started fails (FAIL, EHOSTDOWN, why). */
void home_node_lost(uint32_t node, const char *why);

/* The jobs this node is home of, for ferryctl status (only uid's, unless 0). */
void home_write_status(FILE *out, uid_t uid);

#endif
