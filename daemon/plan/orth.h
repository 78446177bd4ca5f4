/* daemon/plan/orth.h - node-level broadcast, reduce, allreduce and
 * allgather(v) schedules (sched.h): single-phase, orthogonal two-phase and
 * hierarchical realizations over a virtual grid of the nodes (seed 004:
 * Kühnemann, Rauber, Rünger, §2.1 and §2.2), and their cost model.  Pure
 * code, no I/O.
 *
 * Node level (DESIGN.md, "Collectives"): a node with several ranks of the
 * group takes part once.  Its ranks' contributions are combined on the node
 * (COPY, REDUCE) before any of its network steps, the network steps move one
 * node's data, and the result is copied to every local rank at the end.
 * Nodes without ranks take no part: the structures below are laid over the
 * nodes that have ranks, numbered in node order (P of them); the others get
 * empty schedules.
 *
 * Buffers, per rank (the engine stages FERRY_IN_PLACE, sched.h):
 *   BCAST      the root's send buffer holds the bytes; every other rank's
 *              receive buffer gets them.  The root's receive buffer is not
 *              touched (its data is already where the application wants
 *              it; it may be empty), nor are other ranks' send buffers.
 *   REDUCE     every rank's send buffer: count elements of type; the root's
 *              receive buffer gets the result (count elements), nobody
 *              else's receive buffer is touched.
 *   ALLREDUCE  every rank's send buffer as in REDUCE; every rank's receive
 *              buffer gets the result.
 *   ALLGATHER  every rank's send buffer: its block (block bytes, or
 *              counts[rank] for an allgatherv); every rank's receive buffer
 *              gets the block of group rank q at displ(q) (q * block, or
 *              the rank's own displacements: displacements may differ from
 *              rank to rank, as in MPI; the counts may not).  Bytes between
 *              the blocks are not written.
 *
 * Grids.  A grid of dimensions d_0 x d_1 x ... x d_{L-1} holds positions
 * 0 .. d_0 d_1 ... d_{L-1} - 1 row-major (the last dimension fastest, as
 * node ids in DESIGN.md); position x is played by a node if x < P, else it
 * is a hole (only the tail of the grid can be holes).  A slab of level l is
 * a set of positions that agree in the coordinates 0 .. l-1: the whole grid
 * at level 0, contiguous in position order; its sub-slabs (those of level
 * l+1) split it by coordinate l.  (2-D: the rows are the sub-slabs of the
 * grid, the columns the groups of level 0.)  Holes are handled as SG_ORTH
 * does in sg_sched.h, recursively: a slab's part beyond P is missing, so
 * only the last sub-slab of the last slab of a level can be short.
 *
 * Algorithms (enum orth_alg), over these grids:
 *   ORTH_SINGLE  one structure over all nodes: for BCAST and REDUCE a
 *                binomial tree (the grid 2 x 2 x ... x 2 of ceil(log2 P)
 *                levels over the positions relative to the root's node, so
 *                that the root sends, or receives, ceil(log2 P) messages);
 *                ALLREDUCE a reduce along that tree rooted at the first
 *                node, then a broadcast down it; ALLGATHER a direct
 *                exchange (the grid of one dimension P: every node sends
 *                its ranks' blocks to every other node, P - 1 messages).
 *   ORTH_GRID    seed 004 §2.1: an r x c grid (r c >= P), the caller's
 *                (orth_layout: the model's choice, §3.7) or sg_grid(P)'s
 *                (the orthogonal scatter's), nodes at their own positions.
 *   ORTH_HIER    seed 004 §2.2: the caller's dimensions (struct orth_dims,
 *                product >= P), nodes at their own positions.  A
 *                factorization p1 x p2 x ... x pk of P has no holes.
 *
 * BCAST and REDUCE: a tree over the grid (§2.1, "leader group"): the root
 * of a slab sends (BCAST) to the leader of every other non-empty sub-slab,
 * the position in it with the root's offset in its own sub-slab, or, if
 * that is a hole, the sub-slab's last node (SG_ORTH's rule); each leader is
 * the root of its sub-slab at the next level.  2-D: the root sends its
 * column's nodes (the other rows' leaders) r - 1 messages, then its row
 * c - 1; each leader c - 1.  BCAST sends data down the tree, outer levels
 * first (order key: the level); REDUCE receives it up, each node combining
 * its own ranks first, then its children deepest level first, a fixed
 * order (RECV_REDUCE steps chained by dependencies, whatever order the
 * messages arrive in).
 *
 * ALLREDUCE (ORTH_GRID, ORTH_HIER) and ALLGATHER: an exchange, deepest level
 * first (2-D: within the rows, then within the columns, §2.1
 * "Multi-accumulation", "Multi-broadcast"): at level l, within each slab,
 * a node exchanges with the node at its own offset in every other sub-slab
 * what its sub-slab has gathered so far (ALLGATHER: the blocks of all its
 * nodes' ranks, a message of span x block bytes; ALLREDUCE: its
 * sub-slab's reduction, count elements).  Where the last, short sub-slab
 * has no node at that offset, that sub-slab's node at offset
 * (offset mod its length) stands in: it sends its sub-slab's data there
 * too, one way.  A full r x c grid: every node sends c - 1 messages, then
 * r - 1.
 *
 * Order of combination (floating-point results are bitwise identical on
 * every rank, and the same run to run for one algorithm, group and
 * placement):
 *   every algorithm   a node combines its own ranks first, in slot order:
 *                     ((s0 op s1) op s2) ...
 *   ORTH_SINGLE       ALLREDUCE and REDUCE: up the binomial tree, each node
 *                     (own ranks) op child ... deepest child first; ALLREDUCE
 *                     computes it once, at the first node, and broadcasts it.
 *   ORTH_GRID, HIER   REDUCE: up the grid's tree as above.  ALLREDUCE: at each
 *                     level, from the deepest, every node of a slab computes
 *                     S_0 op S_1 op ... op S_{d-1} over its sub-slabs'
 *                     results in sub-slab order (left to right), whichever
 *                     sub-slab it is in; by induction every node of a slab
 *                     holds the same bits, so every node ends with the same.
 * The algorithms combine in different orders from each other (and REDUCE on
 * a grid differs from ALLREDUCE on it): a float sum may differ in its last
 * bits between them, never between the ranks of one operation.
 *
 * Message numbers: (tag << 22) | (root << 2) | what, where what is 0 for
 * data, 1 for a ready, 2 for a word (below); root the root's rank for BCAST
 * and REDUCE (< 2^20), 0 otherwise; tag 0 for ORTH_SINGLE, 1 for ORTH_GRID,
 * 2 + (a hash of the dimensions) mod 1021 for ORTH_HIER.  Between two nodes
 * there is at most one message of each `what` in a schedule (two nodes
 * meet at one level of a grid only), so (sender, receiver, msg) is unique.
 * Nodes that chose a different algorithm, root or factorization (but for
 * a hash collision, about 1 in 1000 between two factorizations) number
 * every message differently, so any message from one to the other is one
 * the receiver does not expect: it fails the operation there (and, through
 * the engine, everywhere).  So that such a message is always sent (no
 * hang), the structures follow these rules (the argument: a set A of nodes
 * that agree, not all nodes, always sends a message out of A):
 *   BCAST       the root sends its data at once; every other node sends
 *               its parent an empty ready at once.  If A holds its root,
 *               data flows down the tree, which reaches every node: it
 *               leaves A.  If not, following parents from a node of A
 *               leaves A, and the node where it does sends its ready out.
 *   REDUCE      the root sends its children an empty word at once, every
 *               node passes it on to its children when it comes (nothing
 *               waits for it); every node with children sends its parent an
 *               empty ready at once, and a leaf its data: the same argument.
 *               (Without the words two roots, each the other's child, would
 *               wait for each other with nothing sent.)
 *   ALLREDUCE   ORTH_SINGLE: as REDUCE, with the first node as root for
 *               every node.  Exchanges: every exchange within a slab is both
 *               ways but a stand-in's, and a slab's nodes are connected
 *               through the levels below; at the deepest level where A's
 *               structure joins A to another node, a node of A sends across
 *               (a node waiting on a stand-in outside A has a neighbour in
 *               its sub-slab, hence in A, whose partner is that stand-in).
 *   ALLGATHER   the same exchanges.
 * Sizes: the structure does not depend on them (empty parts are sent too),
 * so every message goes, and a part whose length its receiver does not
 * expect (bytes, count, an allgatherv's counts, a type's size) fails the
 * operation where it arrives.  The type and op of a reduction are not
 * visible to the schedule: int32 and float sums match; the engine must
 * compare them.  tests/unit/test_orth.c runs every assignment of beliefs
 * for small groups.
 */
#ifndef FERRY_PLAN_ORTH_H
#define FERRY_PLAN_ORTH_H

#include <stdint.h>

#include "a2a.h"

struct sched_node;
struct sched;

enum orth_kind {
	ORTH_BCAST = 0,
	ORTH_REDUCE = 1,
	ORTH_ALLREDUCE = 2,
	ORTH_ALLGATHER = 3,     /* allgatherv too: counts */
	ORTH_KINDS = 4,
};

enum orth_alg {
	ORTH_SINGLE = 0,
	ORTH_GRID = 1,
	ORTH_HIER = 2,
	ORTH_ALGS = 3,
};

#define ORTH_MAX_DIMS 32
#define ORTH_MAX_ROOT ((1u << 20) - 1)  /* the largest root rank (message numbers) */

/* A factorization for ORTH_HIER: d[0] the leader group's size (the first
 * phase of a BCAST), d[k-1] the innermost groups'.  Dimensions of 1 are
 * allowed (a level without messages). */
struct orth_dims {
	uint32_t k;
	uint32_t d[ORTH_MAX_DIMS];
};

struct orth_args {
	enum orth_kind kind;
	enum orth_alg alg;
	const struct orth_dims *dims;   /* ORTH_HIER: the grid (product >= P), else ignored */
	const struct orth_dims *grid;   /* ORTH_GRID: r x c (k 2, r c >= P); NULL: sg_grid(P) */
	uint32_t root;                  /* BCAST, REDUCE: the root's rank in the group */
	uint64_t bytes;                 /* BCAST */
	uint64_t count;                 /* REDUCE, ALLREDUCE: elements */
	unsigned type, op;              /* REDUCE, ALLREDUCE: enum coll_type, enum coll_op */
	/* ALLGATHER: every rank's block is block bytes, or counts[rank]
	 * (allgatherv; counts for every rank, the same on every node). */
	uint64_t block;
	const uint64_t *counts;
	/* ALLGATHER: the displacements of the node planned, by slot:
	 * displ[slot][rank]; NULL: rank order without gaps (q * block, or the
	 * sum of the counts before q). */
	const uint64_t *const *displ;
};

/* The algorithm's name ("single", "orth", "hier"), or NULL. */
const char *orth_alg_name(enum orth_alg alg);
/* The algorithm of that name, or -1. */
int orth_alg_by_name(const char *name);

/* Builds node n's part of the operation into out (an empty sched_node whose
 * nslots the caller set to n's ranks), from the layout of the group over
 * nodes nodes and the arguments as n's ranks passed them.  Returns 0, or
 * -EINVAL (a kind, algorithm, type or op, dimensions or root out of range,
 * sizes that overflow, a layout out of range) or -ENOMEM.  Working tables
 * of a few words per node and rank are allocated and freed within the
 * call; a node's build takes O(nodes + ranks x its ranks) time (an
 * allgather copies every block to each of its ranks), plus O(levels x
 * dimension) per tree child. */
int orth_sched_node(const struct orth_args *a, const struct a2a_layout *lay, uint32_t nodes, uint32_t n,
		    struct sched_node *out);

/* Every node's part (ferryctl, the unit tests): s sched_init'ed over nodes;
 * displ_of[rank] the displacements every rank passes (NULL: a->displ's
 * default for every rank; a->displ is ignored). */
int orth_sched(const struct orth_args *a, const struct a2a_layout *lay, uint32_t nodes,
	       const uint64_t *const *displ_of, struct sched *s);

/* ---- the cost model ----
 *
 * The alpha-beta model with one port per node (sg_sched.h): a message of x
 * bytes holds its sender's port for alpha + x beta, sending and receiving
 * go on at once, a node passes data on once its message has arrived whole.
 * P = nodes; m the bytes of one node's data: bytes (BCAST; REDUCE and
 * ALLREDUCE: count x the type's size), ppn x bytes (ALLGATHER: bytes the
 * block).  The grid's dimensions d_l (single: 2 x ... x 2 for the trees, P
 * for the allgather; orth: r x c; hier: the caller's), span_l the positions
 * of a level-l sub-slab (c for the rows of a 2-D grid):
 *
 *   tree     sum_l (d_l - 1) (alpha + m beta)       BCAST, REDUCE
 *            the root's own sends, level after level: a leader of level l
 *            got its message last and sends as many at the next (§5.1's
 *            T_sb(p1) + T_sb(p2), (5)); single: ceil(log2 P) (alpha + m beta).
 *   ALLREDUCE single: twice the tree.
 *   exchange sum_l (d_l - 1 + e_l) (alpha + x_l beta)   ALLREDUCE, ALLGATHER
 *            x_l = m (ALLREDUCE) or span_l m (ALLGATHER: §5.1's (4), T_mb(p1, b)
 *            + T_mb(p2, b p1)); e_l the extra messages of the busiest
 *            stand-in at level l beyond d_l - 1 (0 without holes).
 *
 * The empty messages of the disagreement rules are left out: they travel
 * while the data is still being combined or sent below them, on ports that
 * are idle then.  So are the local copies and reductions (memory speed).
 * dims: ORTH_GRID's r x c (NULL: sg_grid's), ORTH_HIER's grid. */
double orth_predict_us(enum orth_kind kind, enum orth_alg alg, const struct orth_dims *dims, uint32_t nodes,
		       uint32_t ppn, uint64_t bytes, double alpha_us, double beta_ns_per_byte);

/* The r x c grid ORTH_GRID runs over (seed 004 §3.7: the layout the model
 * predicts fastest for this operation), into grid: of the grids of r rows
 * of c = ceil(P / r) (2 <= r, 2 <= c, no row empty), the one with the
 * smallest orth_predict_us, ties to sg_grid(P)'s, then fewer rows.  The
 * same on every node for the same arguments. */
void orth_layout(enum orth_kind kind, uint32_t P, uint32_t ppn, uint64_t bytes, double alpha_us, double beta_ns,
		 struct orth_dims *grid);

/* The grid ORTH_HIER runs over for P nodes, as the daemons choose it: P's
 * prime factors, largest first (2 x 2 x ... x 2, recursive doubling, for a
 * power of two; the one dimension 1 for one node). */
void orth_hier_dims(uint32_t P, struct orth_dims *d);

/* The algorithm the cost module predicts fastest (ties: the lower enum),
 * among ORTH_SINGLE, ORTH_GRID over grid (NULL: sg_grid's) and, if dims is
 * not NULL, ORTH_HIER over dims.  Its inputs must be the same on every node (an allgatherv's mean
 * count, say), or the nodes' schedules differ and the operation fails. */
enum orth_alg orth_choose(enum orth_kind kind, uint32_t nodes, uint32_t ppn, uint64_t bytes, const struct cost *c,
			  const struct orth_dims *dims, const struct orth_dims *grid);

/* orth_predict_us as the cost module's model (plan/cost.h): ORTH_HIER
 * over dims, INFINITY if dims is NULL. */
struct orth_model {
	enum orth_kind kind;
	uint32_t nodes, ppn;
	uint64_t bytes;
	const struct orth_dims *dims;   /* ORTH_HIER's */
	const struct orth_dims *grid;   /* ORTH_GRID's (NULL: sg_grid's) */
};
double orth_model_us(const void *model, uint32_t alg, double alpha_us, double beta_ns, double gamma_ns);

#endif
