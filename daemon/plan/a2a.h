/* daemon/plan/a2a.h - the routes of a node-level all-to-all (personalized
 * all-to-all, seed 000: Kalé, Kumar, Varadarajan, §2): which node holds the
 * block from node src to node dst after each phase.  Pure functions, no I/O:
 * the collective engine builds its schedules from these, and ferryctl plan
 * and the unit tests (a simulator) call them too.  (Issue 12, first part.)
 *
 * Nodes are the job's nodes numbered 0..P-1; each node has one block for
 * every node (its local ranks' contributions combined).  A strategy moves
 * the blocks in phases; in a phase a node sends every block it holds whose
 * next holder is another node, combined into one message per next holder.
 * A node sends its messages of a phase once it has every message of the
 * phases before (the strategies below are built so that no message waits on
 * one of the same phase).  The routes do not depend on the blocks' sizes, so
 * every node knows from P alone which messages to expect; a message whose
 * blocks are all empty still goes (the paper's dummy message).
 *
 * A2A_DIRECT    1 phase: every node to every node.  P-1 messages each.
 * A2A_MESH      2 phases over a C x R mesh, C = ceil(sqrt(P)) columns and
 *               R = ceil(P / C) rows, node n at row n / C, column n % C: the
 *               block first goes along the row to the column of its
 *               destination, then along that column.  The positions of the
 *               last row beyond P are holes; a block for a hole's position
 *               goes instead to the node of the hole's column in row
 *               (sender's column) mod (R - 1) (§2.2).  2(sqrt(P)-1) messages
 *               per node when P is a square.
 * A2A_GRID3D    3 phases over a C x C x Z grid, C = ceil(cbrt(P)),
 *               Z = ceil(P / C^2), node n at x = n % C, y = (n / C) % C,
 *               z = n / C^2: along x, then y, then z.  A hole (a position of
 *               the last plane beyond P) is taken by the node at the same x
 *               and y in the plane before (§2.3); with a single plane, by the
 *               mesh's rule.  3(cbrt(P)-1) messages per node when P is a cube;
 *               at most C-1 a phase always, but with holes a node of the plane
 *               before the last may receive many more (P = 293: 28, against
 *               3(C-1) = 18): the paper's simpler mapping.
 * A2A_HYPERCUBE dimensional exchange over the largest power of two Q <= P,
 *               log2(Q) phases, one message per node and phase; when P > Q a
 *               first phase sends the blocks of every node n >= Q to node
 *               n - Q, and a last one takes those for node n >= Q from node
 *               n - Q to it (§2.4, Fig. 3).
 */
#ifndef FERRY_PLAN_A2A_H
#define FERRY_PLAN_A2A_H

#include <stdint.h>

#include "cost.h"

enum a2a_strategy {
	A2A_DIRECT = 0,
	A2A_MESH = 1,
	A2A_GRID3D = 2,
	A2A_HYPERCUBE = 3,
	A2A_STRATEGIES = 4,
};

#define A2A_MAX_NODES (1u << 20)        /* as many as a cluster may have (proto/wire.h) */
#define A2A_MAX_PHASES 22               /* a hypercube of 2^19 nodes with extra ones: 19 + 2 */

struct a2a_plan {
	enum a2a_strategy strategy;
	uint32_t nodes;                 /* P */
	uint32_t phases;
	uint32_t cols, rows, planes;    /* mesh: C, R; grid: C, C, Z */
	uint32_t cube;                  /* hypercube: Q */
	uint32_t dims;                  /* hypercube: log2(Q) */
};

/* The strategy's name ("direct", "mesh", "grid3d", "hypercube"), or NULL. */
const char *a2a_strategy_name(enum a2a_strategy s);
/* The strategy of that name, or -1. */
int a2a_strategy_by_name(const char *name);

/* Fills p for strategy s over nodes nodes (1 to A2A_MAX_NODES).  Returns 0
 * or -EINVAL. */
int a2a_plan_init(struct a2a_plan *p, enum a2a_strategy s, uint32_t nodes);

/* The node that holds a block for dst after phase ph (0-based), given that
 * holder held it before that phase (where it came from does not matter).
 * holder, dst < nodes. */
uint32_t a2a_next(const struct a2a_plan *p, uint32_t holder, uint32_t dst, uint32_t ph);

/* The holder after phase ph, from the start (src holds it before phase 0). */
uint32_t a2a_holder(const struct a2a_plan *p, uint32_t src, uint32_t dst, uint32_t ph);

/* What a strategy sends, found by running it (a simulator): node src has a
 * block of pair_bytes for nodes src+1 .. src+degree (mod P): degree P-1 is
 * the all-to-all, less the many-to-many of §3.1.  Messages are counted per
 * node over all phases; those of the indirect strategies include the dummy
 * messages their phases always send (every message the all-to-all would
 * send), the direct one's too (see "schedules").  Up to A2A_STATS_MAX_NODES
 * nodes (memory: about 5 x P^2 bytes). */
#define A2A_STATS_MAX_NODES 2048u
struct a2a_stats {
	uint32_t sends_max, recvs_max;
	double sends_mean;
	uint64_t bytes_sent_max;        /* block bytes a node sends, all phases */
};
/* Returns 0, -EINVAL (degree >= P, or too many nodes) or -ENOMEM. */
int a2a_stats(const struct a2a_plan *p, uint32_t degree, uint64_t pair_bytes, struct a2a_stats *st);

/* The time the strategy takes by the paper's cost equations, in
 * microseconds: a message costs alpha_us, a byte beta_ns_per_byte.  Per
 * node, m = pair_bytes, delta = degree, C the mesh's or grid's side, h 1
 * when the grid or hypercube has holes (else 0):
 *   direct     (P - 1) alpha + delta m beta                            (1), (10)*
 *   mesh       2 (C - 1) alpha + 2 min(delta, C (C - 1)) m beta         (2), (7)
 *   grid3d     (3 + h) (C - 1) alpha
 *              + (3 + 2h) min(delta, C^2 (C - 1)) m beta               (3), (4), (8)
 *   hypercube  phases alpha + log2(Q) (1 + h) min(delta, P / 2) m beta (5), (6), (9)
 * The all-to-all's equations (2), (3), (5) exactly, the many-to-many's
 * (7)-(10) while delta is below the cap, and no jump between the two: the
 * cap is what a phase carries in the all-to-all (the paper's sqrt(P) and
 * cbrt(P) are C here, its log2(P) the phases, and (4) and (6) write P for
 * the cap).  The same numbers whichever node computes them. */
double a2a_predict_us(const struct a2a_plan *p, uint32_t degree, uint64_t pair_bytes, double alpha_us,
		      double beta_ns_per_byte);

/* a2a_predict_us as the cost module's model (plan/cost.h; INFINITY for a
 * strategy that cannot run on nodes nodes). */
struct a2a_model {
	uint32_t nodes, degree;
	uint64_t pair_bytes;
};
double a2a_model_us(const void *model, uint32_t s, double alpha_us, double beta_ns, double gamma_ns);

/* The strategy the cost module predicts fastest (ties: the lower enum). */
enum a2a_strategy a2a_choose(uint32_t nodes, uint32_t degree, uint64_t pair_bytes, const struct cost *c);

/* ---- schedules (a2a_sched.c) ---- */

struct sched;
struct sched_node;

/* One rank's all-to-all(v) arguments, each indexed by group rank: bytes and
 * byte offsets it sends to every rank, receives from every rank. */
struct a2a_rank_args {
	const uint64_t *scount, *sdispl, *rcount, *rdispl;
};

/* Where the group's ranks are: node n (0..nodes-1) has the ranks
 * rank_at[node_first[n] .. node_first[n + 1]), its slots 0, 1, ... in that
 * order.  A node may have no rank. */
struct a2a_layout {
	uint32_t ranks;
	const uint32_t *node_first;     /* [nodes + 1] */
	const uint32_t *rank_at;        /* [ranks] */
};

/* Builds node n's part of the all-to-all schedule (sched.h) into out (a
 * sched_node of a schedule over p->nodes nodes, empty), from the layout and
 * the arguments of n's ranks (args[slot]); what other nodes' ranks pass is
 * not needed.
 *
 * Message number = phase, order key = phase.  Node n's ranks' blocks leave
 * straight from their send buffers (the message gathers them: the node's
 * ranks are combined without a copy) and arrive straight in the receive
 * buffers; blocks passing through n travel in SCHED_SEG_SIZED scratch
 * segments, since only their senders know their sizes.  A message from node
 * h to node t holds, for every pair of nodes (s, d) whose block goes from h
 * to t in that phase (in the order of s, then d), one part per pair of
 * ranks (a of s, b of d; a, then b, in slot order), zero-length parts
 * included, so that the number of parts depends on the layout alone.  Every
 * strategy sends every message of its phases, dummies too (seed 000 §3.1),
 * the direct one as well: a receiver then learns every size it was sent,
 * and ranks whose counts disagree (a sender with nothing for a receiver
 * that expects bytes) fail the operation instead of leaving the receiver
 * waiting for a message that never comes.  (The paper's sparse direct
 * many-to-many, delta messages, needs every receiver to know its senders,
 * which only counts that agree tell.)  Blocks between ranks of n are local
 * copies.  Building a node's part walks the route of every node pair:
 * O(P^2 phases) time, fine for the thousands of nodes the tests and
 * benchmarks reach, not for the 2^20 the routes allow.  Returns 0, -EINVAL
 * (a rank's own send and receive counts between ranks of n disagree, or a
 * layout out of range) or -ENOMEM. */
int a2a_sched_node(const struct a2a_plan *p, const struct a2a_layout *lay, uint32_t n,
		   const struct a2a_rank_args *args, struct sched_node *out);

/* The whole schedule (every node, args[rank] for every group rank), as
 * ferryctl plan and the unit tests build it: s must be sched_init'ed over
 * p->nodes nodes.  Returns as a2a_sched_node. */
int a2a_sched(const struct a2a_plan *p, const struct a2a_layout *lay, const struct a2a_rank_args *args,
	      struct sched *s);

#endif
