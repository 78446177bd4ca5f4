/* daemon/plan/sg_sched.h - node-level scatter and gather schedules (sched.h)
 * along given paths: pure code, no I/O.
 *
 * A scatter from the root rank's node R sends every other node one message:
 * the blocks of that node's ranks, in slot order (the node's ranks share
 * it: one message per node, not per rank).  The message travels a path
 * R -> h1 -> ... -> d that the caller gives (direct: d alone; a torus
 * planner: its regions' shortest paths, with the step each hop is planned
 * for as its order key, so that a link sends the furthest first); every
 * intermediate node passes it on unchanged (FORWARD), the destination
 * receives it straight into its ranks' receive buffers.  A gather is the
 * same paths backwards: each node's ranks' blocks, combined into one
 * message, travel to R, which receives them straight into the root's
 * receive buffer.  Message numbers: the destination (scatter) or source
 * (gather) node, on every hop (and below); so a (sender, receiver, msg)
 * is unique while paths are paths (no node twice).
 *
 * Disagreement: every rank must name the same root, and a node that
 * names another must not wait for ever.  Every piece names the root its
 * sender's ranks named, and a node whose ranks named another fails the
 * operation on seeing it (daemon/coll/coll.c), wherever the piece is on
 * its way.  So that pieces go both ways whatever the ranks named, R sends
 * every other node with ranks an empty message (its word: number nodes +
 * d, along d's path), which each expects from the root it names, and in a
 * scatter every other node sends R an empty message back along its path
 * (its ready: number 2 nodes + d), all of which R waits for before it
 * sends or copies anything; a gather's data goes to R anyway.  A node that
 * takes itself for the root sends words that others do not expect or name
 * another root; where no node does, the readies reach a node that names
 * another root.  Either way the operation fails (and, through the engine,
 * everywhere), and a scatter has delivered nothing anywhere.  Every
 * message goes along the paths, so on a torus every hop is a link.
 * Sizes: each part travels with its length, and a part that does not fit
 * its segment (a rank that expects another count than the root sends it)
 * fails the operation where it arrives (and, through the engine, where it
 * is still under way; a node whose part was complete and right may have
 * finished).
 */
#ifndef FERRY_PLAN_SG_SCHED_H
#define FERRY_PLAN_SG_SCHED_H

#include <stdint.h>

#include "a2a.h"

struct sched_node;
struct sched;

/* Paths from the root's node to every node: path of node d is
 * hop[first[d] .. first[d + 1]), the nodes after R in order, ending with
 * d; empty for R itself.  order[i]: the order key of the hop into hop[i]
 * (lower first on a link; the planned step).  NULL paths: direct, every
 * path d alone, order 0. */
struct sg_paths {
	const uint32_t *first;  /* [nodes + 1] */
	const uint32_t *hop, *order;
	uint32_t last_order;    /* the largest order key (a gather's keys run backwards from it) */
};

struct sg_args {
	uint32_t root;          /* the root's rank in the group */
	int in_place;           /* the root's own block stays where it is */
	/* The root's counts and displacements by rank, in its send buffer
	 * (scatter) or receive buffer (gather): needed on R only (NULL
	 * elsewhere). */
	const uint64_t *count, *displ;
	/* By slot of the node being planned: the bytes each of its ranks
	 * receives (scatter) or sends (gather). */
	const uint64_t *mine;
};

/* The node of rank r in lay (nodes nodes), or UINT32_MAX if there is none;
 * *slot_p its slot there. */
uint32_t sg_node_of(const struct a2a_layout *lay, uint32_t nodes, uint32_t r, uint32_t *slot_p);

/* Builds node n's part of a scatter (gather 0) or gather (gather 1) into
 * out (an empty sched_node).  Returns 0, -EINVAL (root out of range, a
 * path that leaves the nodes or does not end at its node, the root's
 * count for one of R's own ranks not what that rank says, no counts on
 * R) or -ENOMEM. */
int sg_sched_node(int gather, const struct a2a_layout *lay, uint32_t nodes, uint32_t n, const struct sg_args *a,
		  const struct sg_paths *paths, struct sched_node *out);

/* Every node's part (the unit tests, ferryctl): mine[rank] for every rank
 * (a->mine ignored); s sched_init'ed over nodes. */
int sg_sched(int gather, const struct a2a_layout *lay, uint32_t nodes, const struct sg_args *a,
	     const uint64_t *mine, const struct sg_paths *paths, struct sched *s);

#endif
