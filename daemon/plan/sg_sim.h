/* daemon/plan/sg_sim.h - a schedule-level alpha-beta simulation of scatter
 * and gather on a physical torus (issue 13's benchmark: "plus a
 * schedule-level alpha-beta simulation for the paper's sizes").  Pure code,
 * no I/O: ferryctl plan scatter|gather --simulate and the unit tests call it.
 *
 * The model is the planner's (scatter.h, seed 001 §2) with time in it:
 * store-and-forward, every port of a node usable at once, each directed
 * link carrying one message (one node's block of m bytes) at a time, and a
 * message taking alpha + m beta to cross a link.  A node passes a message
 * on as soon as it has arrived whole and its next link is free (and, for a
 * plan, it is that message's turn on the link, below).  Nothing else costs
 * time: no per-node overhead, no contention inside a node.
 *
 * The algorithms:
 *   SG_SIM_OPT, SG_SIM_SDF  the plans of scatter_plan() (and scatter_reverse()
 *       for gather), run asynchronously as ferryd runs them: every message
 *       follows its planned path, and every link sends its messages in the
 *       plan's step order (the order keys of scatter_sched()) - it never
 *       sends a message ahead of one the plan puts earlier on it, but it does
 *       not wait for step boundaries either: there are no global steps.
 *   SG_SIM_NAIVE  no plan: every message goes along the default
 *       dimension-ordered route (route_next_hop(), highest dimension first,
 *       ties +), every link first come first served by arrival time, ties by
 *       message number (the destination's, for gather the source's, id).
 *       A scatter's root queues its messages furthest first (ties by id), so
 *       that what NAIVE loses against the plans is its routing (the root's
 *       links carry unequal shares: on 8x8, 32 of 63 messages leave on one
 *       link), not its order.  A gather's sources hold one message each.
 *
 * Gather is simulated, not inferred: the reversed plan (scatter_reverse)
 * runs forward in time, and NAIVE's gather routes every node to the root.
 * For a plan it takes exactly the scatter's time (the dependences - a
 * message's previous hop, the message before it on its link - are the
 * scatter's, reversed, and the longest chain of equal-cost hops is the same
 * read either way; the unit test checks it); NAIVE's gather is another
 * schedule and can differ.
 *
 * Every crossing costs the same, alpha + m beta (one "hop time"), so every
 * event falls on a whole number of hop times: the simulation counts in hop
 * times, exactly, and the makespan is rounds * (alpha + m beta).  In this
 * model, therefore, the algorithms' ratios do not depend on m, alpha or
 * beta; only the absolute times do.
 *
 * A plan run this way is never slower than its step-synchronous execution,
 * steps * (alpha + m beta): by induction on the steps, a hop the plan puts
 * at step s is done by s hop times (its message's previous hop and the
 * link's previous message are both planned earlier).  The planner's plans
 * take exactly that long: OPT meets the lower bound, and in SDF, a greedy
 * schedule, every hop at step s waits for one at step s - 1 (its message's
 * previous hop, or the message its link carried while it waited), so with
 * equal hop costs there is nothing to gain; the asynchronous execution
 * would differ only with unequal costs, which this model does not have.
 *
 * Ownership: the simulation's tables are allocated and freed inside each
 * call; results are plain values.
 */
#ifndef FERRY_PLAN_SG_SIM_H
#define FERRY_PLAN_SG_SIM_H

#include "route.h"
#include "scatter.h"

#include <stdint.h>

enum sg_sim_algo {
	SG_SIM_OPT = SCATTER_OPT,
	SG_SIM_SDF = SCATTER_SDF,
	SG_SIM_NAIVE = 2,
};

#define SG_SIM_ALGOS 3

/* The cost of one message crossing one link: alpha_us + block * beta_us_per_byte. */
struct sg_sim_cost {
	uint64_t block;                 /* m: bytes of one node's block */
	double alpha_us;                /* per message per hop */
	double beta_us_per_byte;
};

struct sg_sim_result {
	double makespan_us;             /* the last message delivered */
	double hop_us;                  /* alpha + m beta */
	uint32_t rounds;                /* makespan in hop times */
	uint32_t steps;                 /* the plan's steps (OPT, SDF); NAIVE: 0 */
	double step_sync_us;            /* steps * hop_us, >= makespan_us; NAIVE: 0 */
	uint32_t bound;                 /* max(ceil((p - 1) / L), e), in hop times */
	uint64_t hops;                  /* link crossings in all */
	uint32_t link_max;              /* most messages one directed link carries */
	/* Most messages waiting for one directed link at one time (arrived, not
	 * yet sent on it): counting those at their origin (a scatter's root
	 * holds all of its link's messages at the start), and counting only
	 * those a relay holds (what a node keeps for others). */
	uint32_t queue_max, queue_from, queue_to;
	uint32_t relay_queue_max, relay_from, relay_to;
};

/* The algorithm's name ("opt", "sdf", "naive"), or NULL; the algorithm of a
 * name, or -1. */
const char *sg_sim_algo_name(enum sg_sim_algo a);
int sg_sim_algo_by_name(const char *name);

/* Simulates plan p (scatter_plan() or scatter_reverse() over the torus r)
 * at cost c into *res_p.  Returns 0; -EINVAL if r is not the plan's torus,
 * a hop is no link or a path does not join its message's ends; -EDEADLK if
 * the plan's link orders wait on each other (never for the planner's
 * plans); -ENOMEM. */
int sg_sim_plan(const struct route *r, const struct scatter_plan *p, const struct sg_sim_cost *c,
		struct sg_sim_result *res_p);

/* Simulates NAIVE: a scatter from root (gather: to root) over the torus r
 * (ROUTE_TORUS, at most SCATTER_MAX_NODES nodes) at cost c.  Returns 0,
 * -EINVAL or -ENOMEM. */
int sg_sim_naive(const struct route *r, uint32_t root, int gather, const struct sg_sim_cost *c,
		 struct sg_sim_result *res_p);

/* Plans (OPT, SDF) and simulates algorithm a: sg_sim_plan or sg_sim_naive.
 * Returns what they and scatter_plan() return. */
int sg_sim_run(const struct route *r, uint32_t root, int gather, enum sg_sim_algo a, const struct sg_sim_cost *c,
	       struct sg_sim_result *res_p);

#endif
