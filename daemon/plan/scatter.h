/* daemon/plan/scatter.h - one-to-all personalized communication (scatter)
 * and its reverse (gather) on a physical torus, seed 001 (Mao, Chen,
 * Watson).  Pure code, no I/O: the collective engine, ferryctl plan
 * scatter|gather and the unit tests call it.  (Issue 13, the planner.)
 *
 * The model is the paper's (§2): store-and-forward nodes, every port usable
 * at once, one message (one node's block) per directed link per step, the
 * root holding a message for every other node.  The root sends at most one
 * message a step on each of its L links, so every schedule takes at least
 *
 *   bound = max(ceil((p - 1) / L), e)     (e: the root's eccentricity)
 *
 * steps (§3.2 with L = 2D).
 *
 * SCATTER_OPT (§3.1, the partition computed instead of drawn by hand):
 * every node but the root is given to a region, one region per root link,
 * such that each node of a region has a neighbour one hop closer to the
 * root in the same region (the region's link's far end is its only node at
 * distance 1).  A message leaves the root on its region's link, follows a
 * shortest path inside the region and is forwarded at once at every node.
 * A region sends its messages furthest-distance-first, one a step: messages
 * that left at different steps and move one hop a step never meet on a
 * link, and regions share no link, so the plan is free of conflicts and a
 * region finishes at max_i (i + d_i) over its messages sorted by distance
 * d_i descending, i = 0, 1, ...  That is at most the bound iff for every t
 * the region has at most bound - t + 1 nodes at distance >= t.  The
 * partition is searched for: a balanced first assignment from the root
 * outward, then a local search that moves a node to the region of another
 * of its closer neighbours, with the nodes that depended on it, until no
 * region is late, and then more such moves from larger regions to smaller
 * ones that keep every region on time, until the sizes differ by 1 at
 * most (deterministic: every node computes the same plan).  It
 * reaches the bound on every 2-D torus with sides 3-10 and every 3-D torus
 * with sides 3-10 (tests/unit/test_scatter.c); where it does not find one,
 * steps says what it reached.
 *
 * SCATTER_SDF (§3.3): no partition.  Each step every node takes the
 * messages it holds in the order they arrived (first come, first served;
 * at the root, and among messages that arrived at the same step, by
 * destination id) and sends each one on the free link of a direction that
 * brings it closer, the direction with the fewest hops left in it first
 * (shortest direction first; ties: lower dimension, then +); a message
 * without a free useful link waits for the next step.  Paths are shortest;
 * a message's region is the root link it left on.
 *
 * Sides of 1 and 2.  A side of 1 is no dimension: no link, every node's
 * coordinate there 0 (4x1x8 plans as 4x8 with the same ids).  A side of 2
 * has one link between its two nodes, not two (+1 and -1 are the same
 * neighbour, ROUTE_TORUS's peers): it gives the root one link and one
 * region, and L counts it once (a 2x2x2 torus has L = 3, bound 3).  A
 * torus of one node has nothing to send: bound and steps 0.
 *
 * Gather (the paper's §2: "the reverse of any scattering algorithm"):
 * every message crosses the same links the other way, step s of the
 * scatter becoming steps + 1 - s: the same number of steps, and still no
 * directed link carrying two messages in one step.
 *
 * Ownership: a scatter_plan owns its arrays; scatter_plan_free frees them.
 */
#ifndef FERRY_PLAN_SCATTER_H
#define FERRY_PLAN_SCATTER_H

#include "route.h"

#include <stdint.h>

enum scatter_algo {
	SCATTER_OPT = 0,
	SCATTER_SDF = 1,
};

#define SCATTER_MAX_REGIONS (2 * ROUTE_MAX_DIMS)
#define SCATTER_MAX_NODES (1u << 16)    /* what the searches are made for */
#define SCATTER_NONE UINT32_MAX

/* One message crossing one link. */
struct scatter_hop {
	uint32_t from, to;
	uint32_t step;                  /* from 1 */
};

struct scatter_plan {
	enum scatter_algo algo;
	int gather;                     /* 1: the messages go to the root */
	uint32_t nodes, root;
	uint32_t nregions;              /* the root's links, L */
	uint32_t nbr[SCATTER_MAX_REGIONS];      /* region r's node next to the root */
	uint32_t size[SCATTER_MAX_REGIONS];     /* its nodes (messages on its link) */
	uint32_t bound;                 /* max(ceil((nodes - 1) / L), e) */
	uint32_t ecc;                   /* e */
	uint32_t steps;                 /* what the plan takes */
	uint32_t *region;               /* [nodes]: each node's region, SCATTER_NONE for the root */
	uint32_t *dist;                 /* [nodes]: hops from the root */
	uint32_t *first;                /* [nodes + 1]: node v's message crosses */
	struct scatter_hop *hops;       /* hops[first[v] .. first[v + 1]), in path order */
};

/* The algorithm's name ("opt", "sdf"), or NULL; the algorithm of a name, or -1. */
const char *scatter_algo_name(enum scatter_algo a);
int scatter_algo_by_name(const char *name);

/* Plans a scatter from root over the torus r (ROUTE_TORUS, at most
 * SCATTER_MAX_NODES nodes).  The plan is searched for root 0 and
 * translated (tori look the same from every node), so any root takes the
 * same time and the same number of steps.  Returns 0, -EINVAL or -ENOMEM
 * (p untouched then). */
int scatter_plan(const struct route *r, uint32_t root, enum scatter_algo algo, struct scatter_plan *p);

/* The gather that reverses scatter plan s, into g.  Returns 0, -EINVAL (s
 * a gather already) or -ENOMEM. */
int scatter_reverse(const struct scatter_plan *s, struct scatter_plan *g);

void scatter_plan_free(struct scatter_plan *p);

/* The most messages one node passes on (neither their origin nor their
 * destination) over the whole of plan p, into *most_p: an upper bound of
 * what it may have to hold at once, since a relay holds a message whole
 * until it goes (daemon/coll/exec.c).  (Under the paper's model a relay
 * of OPT holds one at a time; in a real network the root's node sends a
 * region's messages as fast as its link takes them, and the relay's
 * onward links may be slower, so only the bound is sure.)  The first node
 * of a region passes on all of its region's messages but its own: the
 * largest region's size - 1.  Returns 0 or -ENOMEM. */
int scatter_relay_max(const struct scatter_plan *p, uint32_t *most_p);

struct sched;

/* The plan as a schedule (sched.h) over p->nodes nodes, one rank slot each
 * (the node's combined block): s must be sched_init'ed over p->nodes nodes
 * and empty.  count[v] and displ[v] give node v's block in the root's
 * buffer (scatter: its send buffer, gather: its receive buffer); node v's
 * own buffer (receive, send) holds it at offset 0.  Message number = the
 * node the block belongs to, order key = the step it crosses the link at
 * (on a link that is furthest-distance-first for OPT).  Scatter: the root
 * SENDs every block on its first link, FORWARDs carry it on, the node
 * RECVs it; gather the other way; the root's own block is a COPY.  Every
 * message goes, empty ones too.  Returns 0, -EINVAL or -ENOMEM. */
int scatter_sched(const struct scatter_plan *p, const uint64_t *count, const uint64_t *displ, struct sched *s);

#endif
