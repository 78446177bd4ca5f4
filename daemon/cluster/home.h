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
 * the hosting nodes (STEP).
 *
 * Failures are the home's to decide, so that every rank of a job completes
 * the same steps: the home's FAIL goes to each node along the route its
 * STEPs take, behind them (control items keep their order between two
 * nodes), and a STEP never follows it.  A rank that leaves a job that has
 * started means the job can complete no more steps (FAIL, EPIPE); a node of
 * the job that finds a route it needs cut asks the home to fail it (FAIL to
 * the home), and the home fails the jobs whose routes between itself and
 * their nodes a loss cuts (EHOSTDOWN).  A node that restarted has none of
 * the ranks its earlier instances had: the home drops them, as if they had
 * left, when it hears that (LOST) or when the new instance says JOIN (each
 * node's entry keeps the incarnation whose ranks joined).
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
/* A node of the job asks the home to fail it (FAIL from a node). */
void home_fail(const struct wire_ctl *c, uint32_t from);

/* What a LOST says (proto/wire.h, wire_ctl_lost): the link between nodes a
 * and b is down (restarted_as 0; both may be alive), or node b came back as
 * incarnation restarted_as without its earlier instances' state (a is the
 * peer that noticed). */
struct loss {
	uint32_t a, b;
	uint64_t restarted_as;
};

/* 1 if the loss cuts the route from x to y or from y to x: it crosses the
 * lost link, or passes through (or starts or ends at) the restarted node. */
int loss_cuts(const struct route *r, const struct loss *l, uint32_t x, uint32_t y);

/* Links reported down and not back yet (LOST of kind LINK, then LINK_BACK):
 * a job that starts while one is down and needs it fails at once (it would
 * wait for the link otherwise).  A restart of node n ends the links n
 * itself reported (its new instance knows nothing of them).  The ends of a
 * link that stays down say so again every PEER_LOST_AGAIN_NS (net/peer.h);
 * one not said again for three times that is forgotten, so that a LINK_BACK
 * lost on the way (in a restarted node's queue), or a LINK of a node's
 * earlier instance come late, cannot leave a link down for ever.  cuts_add
 * returns 1 if the cut is news. */
int cuts_add(uint32_t a, uint32_t b);
void cuts_del(uint32_t a, uint32_t b);
void cuts_del_from(uint32_t a);
uint32_t cuts_count(void);
struct loss cuts_at(uint32_t i);

/* A loss (cluster.c heard it): a restarted node's ranks from before leave
 * every job this node is home of, as if they had said LEAVE (which they never
 * will); every started job whose routes between here and its nodes the loss
 * cuts fails (FAIL, EHOSTDOWN, why). */
void home_lost(const struct loss *l, const char *why);

/* The jobs this node is home of, for ferryctl status (only uid's, unless 0). */
void home_write_status(FILE *out, uid_t uid);

#endif
