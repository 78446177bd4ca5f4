/* daemon/plan/rs.h - node-level reduce-scatter and scan schedules (sched.h)
 * and their cost model: pure code, no I/O.
 *
 * Every schedule here is node-level (DESIGN.md, "Collectives"): a node
 * first combines its local ranks' contributions with local steps, takes
 * part in the network as one participant, and hands each local rank its
 * part.  The group is laid out by struct a2a_layout (a2a.h) over `nodes`
 * nodes; a node's ranks need not be contiguous in rank order.
 *
 * ---- reduce-scatter ----
 *
 * Rank r gets elements [displ(r), displ(r) + counts[r]) of the element-wise
 * reduction (type, op: proto/coll.h) of every rank's send vector of
 * N = sum of counts elements, displ(r) the sum of the counts before r
 * (reduce_scatter_block: equal counts).  Node n owns its ranks' pieces (its
 * share, not necessarily contiguous).  A node first combines its ranks'
 * vectors into a scratch vector `acc` of N elements (slot order, left to
 * right: acc = ((s0 op s1) op s2) ...), runs the plan's phases on acc in
 * place, and finally copies each rank's piece of acc to its receive buffer
 * (each byte written once).  Every node must have ranks.
 *
 * A plan is a factorization of the nodes into dimensions d0 x d1 x ... (at
 * most RS_MAX_DIMS, each >= 2; node n's coordinate i is (n / s_i) % d_i,
 * s_i = d0 ... d_{i-1}) with an algorithm per dimension (van de Geijn's
 * hybrids, seed 002 §4).  Phase i is a reduce-scatter among the d_i nodes
 * that differ in coordinate i only, over the region the phases before left
 * them (the shares of the nodes that agree with them in coordinates < i),
 * cut into d_i blocks: block v, the shares of the nodes whose coordinate i
 * is v, goes to the member at v.  After the last phase a node holds its
 * own share.  RS_SHORT and RS_LONG are the plans of one dimension.
 *
 * The poster's implementation used ready-mode sends (the receive posted
 * before the send, no handshake before the data).  These schedules need
 * nothing of the kind: the executor sends a step's message as soon as its
 * dependencies allow, and the receiving daemon takes it into the
 * operation's buffer, or keeps it until the operation starts there
 * (coll.c, "Holding back"): no step waits for its receiver to be ready.
 *
 * RS_SHORT  reduce-to-one then scatter (seed 002 §3): the binomial tree of
 *           sg_sched's SG_TREE (sg_tree_range) over the members, rooted at
 *           member 0; each member reduces its children's partial regions
 *           into its own, the nearest child (smallest subtree) first, and
 *           sends the whole region to its parent; member 0 then sends each
 *           child the blocks of that child's subtree, farthest first, and
 *           so on down.  (Built here, not with sg_sched: its root agreement
 *           messages would cost a scatter (d - 1) alpha more.)  Order of an
 *           element: at every member, own partial op child_nearest op ...
 *           op child_farthest, left to right.
 * RS_LONG   bucket (ring) algorithm (seed 002 §3): member v sends member
 *           v + 1 (mod d) at step s = 0 .. d-2 its partial of block
 *           v - s - 1 and reduces the partial of block v - s - 2 it gets
 *           from v - 1 into its own (RECV_REDUCE: own op incoming).  Block
 *           b is so combined along the ring b + 1, b + 2, ..., b: its
 *           element = acc_b op (acc_{b-1} op (... op (acc_{b+2} op
 *           acc_{b+1}))).  d - 1 messages per member.
 * RS_HYBRID plans of more than one dimension (rs_plan_dims, rs_choose).
 *
 * The order of every element's combination is so a function of the plan,
 * the layout and the counts alone, never of timing: the same bits on every
 * run of the same plan; different plans (and RS_SHORT against RS_LONG)
 * associate differently.
 *
 * Messages (unique per sender, receiver and number): phase i's data are
 * numbered RS_MSG_DATA(i, alg, x), x 0 for a reduction to the parent and 1
 * for a scatter message (RS_SHORT), the step s (RS_LONG).  Disagreement
 * (ranks that forced different algorithms, or counts that lead the chooser
 * elsewhere): every node first sends node n + 1 (mod nodes) one empty word
 * per phase, RS_MSG_WORD(i, alg_i, d_i), and expects the same from node
 * n - 1, without any dependency.  Two plans differ in some phase's
 * (d_i, alg_i) (the dimensions multiply to the same nodes: neither list is
 * the other's beginning), and where nodes that run different plans meet
 * round the ring one gets a word it does not expect: the operation fails
 * instead of hanging.  The data numbers differ between short and long
 * phases, but plans alike but for their dimensions (2 x 6 and 3 x 4, both
 * long) share them: a node may take a message of the other plan whose
 * parts happen to fit and finish, wrong, before the failure reaches it.
 * Ruling that out needs the plan in every piece (as wire_coll_piece.root
 * carries the rooted kinds' algorithm): the engine's part.  The words cost one
 * alpha per phase on each node's port (not in rs_predict_us: they leave at
 * once, behind the data on a shared link: order key RS_ORDER_WORD).
 * Zero-length pieces make no parts, but every message goes whatever the
 * counts (all ranks pass the same counts).
 *
 * ---- scan and exscan ----
 *
 * Rank r gets x_0 op x_1 op ... op x_r (scan) or ... op x_{r-1} (exscan;
 * rank 0's receive buffer is not written), combined strictly left to
 * right, ((x_0 op x_1) op x_2) ..., reduce_apply(acc, x) each time: the
 * bits a sequential loop over the ranks gives, whatever the layout.  So the
 * prefix is a chain through the ranks in rank order: the ranks, sorted,
 * fall into runs (maximal sequences of consecutive ranks on one node); the
 * node of run j receives the prefix before the run from the node of run
 * j - 1, folds in its run's ranks one by one in a scratch vector, copies
 * each rank's result to its receive buffer and passes the prefix on.  With
 * ranks contiguous per node this is a chain over the nodes in the order of
 * their first ranks: nodes - 1 messages; in general runs - 1 (a
 * round-robin layout: ranks - 1).  The vector is cut into `chunks` pieces
 * that travel the chain one after the other (a pipeline: each piece is
 * independent, element-wise), message RS_MSG_SCAN(c, j) for chunk c into
 * run j, order key c.  Every node must use the same chunks (rs_scan_chunks
 * from the same inputs): with others, some part's length or some message's
 * number differs and the operation fails.
 *
 * Ownership: the steps go into the caller's sched_node; working tables are
 * allocated and freed within each build.
 */
#ifndef FERRY_PLAN_RS_H
#define FERRY_PLAN_RS_H

#include <stdint.h>

#include "cost.h"

#include "a2a.h"

struct sched;
struct sched_node;

enum rs_alg {
	RS_SHORT = 0,
	RS_LONG = 1,
	RS_HYBRID = 2,
	RS_ALGS = 3,
};

#define RS_MAX_DIMS 3
/* The cost of reducing a byte that the daemons and ferryctl plan with
 * (seed 002's gamma): a vectorised loop, about what a copy costs.  Every
 * node uses the same, so every node chooses the same. */
#define RS_GAMMA_NS_PER_BYTE 0.1
#define RS_MAX_NODES (1u << 20)

/* Message numbers (above): phase i < 4, alg 0 or 1, x < 2^21 (d <= 2^20). */
#define RS_MSG_DATA(i, alg, x) (((uint32_t)(i) << 22) | ((uint32_t)(alg) << 21) | (uint32_t)(x))
#define RS_MSG_WORD(i, alg, d) ((1u << 31) | RS_MSG_DATA(i, alg, d))
#define RS_ORDER_WORD UINT32_MAX
/* Scan: chunk c < RS_SCAN_MAX_CHUNKS into run j < 2^20. */
#define RS_SCAN_MAX_CHUNKS 256u
#define RS_MSG_SCAN(c, j) ((1u << 30) | ((uint32_t)(c) << 20) | (uint32_t)(j))

struct rs_plan {
	uint32_t nodes;
	uint32_t ndims;                 /* 0 for one node */
	uint32_t dim[RS_MAX_DIMS];      /* d_i >= 2, product nodes */
	uint8_t alg[RS_MAX_DIMS];       /* RS_SHORT or RS_LONG */
};

/* The algorithm's name ("short", "long", "hybrid"), or NULL. */
const char *rs_alg_name(enum rs_alg alg);
/* The algorithm of that name, or -1. */
int rs_alg_by_name(const char *name);

/* The plan of one dimension of alg (RS_SHORT, RS_LONG) over nodes nodes (1
 * to RS_MAX_NODES; one node: no phase).  Returns 0 or -EINVAL. */
int rs_plan_init(struct rs_plan *p, enum rs_alg alg, uint32_t nodes);

/* The plan of ndims dimensions dim[] (each >= 2, product nodes), phase i by
 * alg[i] (RS_SHORT or RS_LONG).  Returns 0 or -EINVAL. */
int rs_plan_dims(struct rs_plan *p, uint32_t nodes, uint32_t ndims, const uint32_t *dim, const enum rs_alg *alg);

/* ---- the cost model (seed 002 §2-§4) ----
 *
 * alpha per message, beta per byte sent, gamma per byte reduced; a phase
 * over d nodes on a region of x bytes (bytes: the whole vector, x = bytes
 * / (d_0 ... d_{i-1}) in phase i), L = ceil(log2 d):
 *   short  L (alpha + x beta + x gamma) + L alpha + (d - 1) / d x beta
 *          (reduce-to-one by the tree, then its scatter)
 *   long   (d - 1) alpha + (d - 1) / d x (beta + gamma)
 * a plan the sum of its phases.  The local combination of a node's ranks
 * and the final copies are the same for every plan and left out. */
double rs_dim_predict_us(enum rs_alg alg, uint32_t d, double bytes, double alpha_us, double beta_ns_per_byte,
			 double gamma_ns_per_byte);

/* The faster of RS_SHORT and RS_LONG for one phase (ties: RS_SHORT). */
enum rs_alg rs_dim_choose(uint32_t d, double bytes, double alpha_us, double beta_ns_per_byte,
			  double gamma_ns_per_byte);

/* The plan's predicted time for a vector of bytes bytes. */
double rs_predict_us(const struct rs_plan *p, uint64_t bytes, double alpha_us, double beta_ns_per_byte,
		     double gamma_ns_per_byte);

/* The plan for alg: RS_SHORT or RS_LONG their plan of one dimension;
 * RS_HYBRID the fastest by c's α, β and γ of two or more dimensions (one
 * if nodes is prime or 1: the faster of short and long); -1 (automatic)
 * the one of those three the cost module predicts fastest (c's runtime
 * functions where it has them; ties: the lower enum).  For the hybrid
 * every ordered factorization into at most RS_MAX_DIMS dimensions is
 * tried, each phase's algorithm by rs_dim_choose; ties: fewer dimensions,
 * then the first found (smaller first dimensions first).  A function of
 * its arguments only: every node must pass the same (bytes: the whole
 * vector's, from the counts every rank passes).  Returns 0 or -EINVAL. */
int rs_choose(int alg, uint32_t nodes, uint64_t bytes, const struct cost *c, struct rs_plan *p_out);

/* The three candidates rs_choose weighs, as the cost module's model
 * (plan/cost.h): rs_predict_us of plan[alg], INFINITY where there is none
 * (a hybrid on a prime or one node). */
struct rs_model {
	uint64_t bytes;
	struct rs_plan plan[RS_ALGS];
	int have[RS_ALGS];
};
int rs_model_init(struct rs_model *m, uint32_t nodes, uint64_t bytes, const struct cost *c);
double rs_model_us(const void *model, uint32_t alg, double alpha_us, double beta_ns, double gamma_ns);

/* ---- reduce-scatter schedules ---- */

struct rs_args {
	const uint64_t *counts;         /* [ranks] elements each rank receives */
	unsigned type, op;              /* enum coll_type, enum coll_op */
};

/* Builds node n's part of the reduce-scatter by plan p (p->nodes nodes)
 * into out (an empty sched_node; nslots set by the caller as rs_sched
 * does).  O(ranks log ranks) per message.  Returns 0, -EINVAL (a bad type or
 * op, a node without ranks, a layout out of range, a plan of other nodes)
 * or -ENOMEM. */
int rs_sched_node(const struct rs_plan *p, const struct a2a_layout *lay, uint32_t n, const struct rs_args *a,
		  struct sched_node *out);

/* Every node's part (the unit tests, ferryctl); s sched_init'ed over
 * p->nodes nodes.  Returns as rs_sched_node. */
int rs_sched(const struct rs_plan *p, const struct a2a_layout *lay, const struct rs_args *a, struct sched *s);

/* ---- scan and exscan schedules ---- */

struct rs_scan_args {
	uint64_t count;                 /* elements per rank */
	unsigned type, op;
	int exclusive;                  /* exscan */
	uint32_t chunks;                /* 1 .. RS_SCAN_MAX_CHUNKS (rs_scan_chunks) */
};

/* The runs of the layout: maximal sequences of consecutive ranks on one
 * node (the chain's length + 1). */
uint32_t rs_scan_runs(const struct a2a_layout *lay, uint32_t nodes);

/* The chain's time by the same model: (runs - 2 + chunks) messages of
 * bytes / chunks after one another, each alpha + x beta + x gamma. */
double rs_scan_predict_us(uint32_t runs, uint32_t chunks, uint64_t bytes, double alpha_us,
			  double beta_ns_per_byte, double gamma_ns_per_byte);

/* rs_scan_predict_us as the cost module's model (plan/cost.h; the chain:
 * one algorithm). */
struct rs_scan_model {
	uint32_t runs, chunks;
	uint64_t bytes;
};
double rs_scan_model_us(const void *model, uint32_t alg, double alpha_us, double beta_ns, double gamma_ns);

/* The chunks that minimize rs_scan_predict_us for count elements of
 * elem_bytes (at most count, at least 1, at most RS_SCAN_MAX_CHUNKS). */
uint32_t rs_scan_chunks(uint32_t runs, uint64_t count, uint64_t elem_bytes, double alpha_us,
			double beta_ns_per_byte, double gamma_ns_per_byte);

/* Builds node n's part of the scan (exscan) into out.  Returns 0, -EINVAL
 * (bad type or op, chunks out of range, a layout out of range, too many
 * runs) or -ENOMEM. */
int rs_scan_sched_node(const struct rs_scan_args *a, const struct a2a_layout *lay, uint32_t nodes, uint32_t n,
		       struct sched_node *out);

/* Every node's part; s sched_init'ed over nodes. */
int rs_scan_sched(const struct rs_scan_args *a, const struct a2a_layout *lay, uint32_t nodes, struct sched *s);

#endif
