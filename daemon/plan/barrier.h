/* daemon/plan/barrier.h - the barrier's schedule (sched.h): dissemination
 * (Hensgen, Finkel, Manber) over the group's nodes, node-level: the daemon
 * starts it once every local rank of the group entered the barrier and
 * tells them all when it ends.  In round r (d = 2^r < G) node n sends an
 * empty message to node (n + d) mod G and receives one from node
 * (n - d) mod G; its send of round r + 1 waits for its receives of rounds
 * 0 .. r (all of them: the executor runs a step once the steps it depends
 * on are done, and a receive whose message came early is done early, so
 * a send after the last receive only could leave before what the earlier
 * ones bring had come).
 * After round r a node has heard, directly or not, from the 2^(r+1) nodes
 * before it, so after ceil(log2 G) rounds from every node: no node leaves
 * before every node entered.  ceil(log2 G) messages per node; one node, no
 * step at all.  Pure code.
 */
#ifndef FERRY_PLAN_BARRIER_H
#define FERRY_PLAN_BARRIER_H

#include <stdint.h>

struct sched_node;

/* Builds node n's part of the barrier over G nodes into out (empty).
 * Returns 0, -EINVAL (n >= G, G = 0) or -ENOMEM. */
int barrier_sched_node(uint32_t G, uint32_t n, struct sched_node *out);

#endif
