/* daemon/plan/sg_sched.h - node-level scatter and gather schedules (sched.h)
 * along given paths, and the orthogonal and tree realizations for switched
 * networks (below): pure code, no I/O.
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

/* ---- switched networks: orthogonal and tree realizations ----
 *
 * SG_DIRECT  the paths above with paths NULL: the root's node R sends every
 *            other node its message (gather: receives).
 * SG_ORTH    two phases over the orthogonal grid of seed 004 §2.1
 *            (Kühnemann, Rauber, Rünger): nodes 0..nodes-1 row-major in
 *            rows of c (sg_grid), the last row possibly short.  Row i's
 *            leader is its node in R's column; R leads its own row; a short
 *            last row without a node in R's column is led by its last node
 *            (nodes - 1).  The positions beyond nodes - 1 are holes: they
 *            take no part, and nobody stands in for them but that leader.
 *            Scatter: R sends each other row's leader one message holding
 *            the blocks of every rank of every node of that row (node
 *            order, slot order), then each leader, and R in its own row,
 *            sends each node of its row its blocks.  R: r-1 + c-1 data
 *            messages instead of nodes-1; each other leader c-1 more.
 *            Gather is the reverse: a row's nodes to their leader, which
 *            combines them with its own into one message to R.
 * SG_TREE    a binomial tree over the nodes numbered relative to R
 *            (v = (n - R) mod nodes): a node that holds the blocks of the
 *            range [v, hi) sends the upper half [v + ceil(len/2), hi) to
 *            its first node (distance nodes/2 from R at the top, ceil for
 *            odd lengths), then halves again what it kept: R sends
 *            ceil(log2 nodes) data messages.  Gather is the reverse.
 *
 * Blocks a node passes on (orthogonal leaders, tree nodes) travel through
 * it in SCHED_SEG_SIZED scratch segments, one per rank: a scatterv's counts
 * are known only at the root, a gatherv's only at their senders and the
 * root.  A node without ranks neither receives nor sends data of its own,
 * but forwards where the structure puts it (a leader, a tree node) and
 * some node behind it has ranks; in the daemons every node of a group has
 * ranks, so this arises only where a caller lays out such nodes (ferryctl,
 * the tests).
 *
 * Message numbers: data nodes + 2 + the node the message is for
 * (scatter; the node it comes from in a gather) for SG_ORTH, 2 nodes + 2 +
 * that node for SG_TREE, so that nodes that chose different algorithms
 * fail on a message they do not expect rather than take it.
 *
 * Disagreement, as above: R's empty message (nodes + 1) to every other
 * node with ranks, and in a scatter every other node's empty message
 * (nodes) to R, which R receives before it sends or copies anything.  A
 * gather needs one more rule here: a node that combines blocks waits for
 * them, and two nodes that each take the other for a node of their row or
 * subtree (ranks naming different roots, none naming one of its own) would
 * wait for each other for ever with no message unexpected anywhere.  So in
 * a gather every node with ranks whose data waits for others' sends its
 * parent (its leader, or R) an empty message (nodes) at once; the others'
 * data leaves at once anyway.  Then, where no node takes itself for the
 * root, some node gets a message it does not expect: following each
 * node's parent from node to node would otherwise close a cycle, which the
 * structures cannot have (orthogonal: a leader's parent is R in another
 * row; tree: the distance to the parent, translation-invariant, grows
 * from child to parent).  tests/unit/test_sg.c checks every assignment of
 * roots to nodes for small groups.
 */
enum sg_alg {
	SG_DIRECT = 0,
	SG_ORTH = 1,
	SG_TREE = 2,
	SG_ALGS = 3,
};

/* The algorithm's name ("direct", "orth", "tree"), or NULL. */
const char *sg_alg_name(enum sg_alg alg);
/* The algorithm of that name, or -1. */
int sg_alg_by_name(const char *name);

/* The orthogonal grid for nodes nodes (>= 1): *cols_p = c and *rows_p =
 * ceil(nodes / c), c the one with the fewest rows + columns (the fewest
 * messages at R), then the fewest holes, then the most columns: near
 * square (16: 4 x 4; 12: 3 rows of 4; 7: 2 rows of 4, the second short).
 * A function of nodes alone, the same on every node. */
void sg_grid(uint32_t nodes, uint32_t *rows_p, uint32_t *cols_p);

/* SG_TREE's binomial tree over d positions numbered 0..d-1 from its root
 * (v < d): the range [v, *hi_p) position v holds, and its parent
 * (UINT32_MAX for the root 0).  Its children are the starts of the upper
 * halves it splits off: v + ceil((hi - v) / 2), then again below that. */
uint32_t sg_tree_range(uint32_t d, uint32_t v, uint32_t *hi_p);

/* The leader of row `row` of that grid when the root's node is R. */
uint32_t sg_orth_leader(uint32_t nodes, uint32_t cols, uint32_t R, uint32_t row);

/* Builds node n's part of a scatter (gather 0) or gather (gather 1) by alg
 * into out (an empty sched_node; nslots set by the caller as sg_sched
 * does).  Returns as sg_sched_node (SG_DIRECT is sg_sched_node with paths
 * NULL), or -EINVAL for an unknown alg. */
int sg_sched_alg_node(enum sg_alg alg, int gather, const struct a2a_layout *lay, uint32_t nodes, uint32_t n,
		      const struct sg_args *a, struct sched_node *out);

/* Every node's part by alg, as sg_sched. */
int sg_sched_alg(enum sg_alg alg, int gather, const struct a2a_layout *lay, uint32_t nodes,
		 const struct sg_args *a, const uint64_t *mine, struct sched *s);

/* ---- the cost model ----
 *
 * The alpha-beta model with one port per node: a node sends one message at
 * a time and receives one at a time (both at once), a message of x bytes
 * holds its sender's port for alpha + x beta, a node passes blocks on only
 * once their message has arrived whole.  P = nodes, m = ppn x block_bytes
 * (a node's blocks), B = m beta; for SG_ORTH r x c = sg_grid(P) and
 * h = r c - P its holes; L = ceil(log2 P).  Every algorithm must move the
 * P - 1 other nodes' blocks through R's port, (P - 1) B; they differ in
 * R's message count and in what relays add:
 *
 *   direct   (P - 1) (alpha + B)
 *   orth     (r + c - 2) alpha + (P - 1 + h) B
 *            R sends r - 1 leader messages of c m, then its row's c - 1;
 *            a leader that got its message last forwards c - 1 while R
 *            sends its row.  Worst root: in the short last row, where R's
 *            row is short but every leader it serves has c - 1 to send:
 *            (r - 1)(alpha + c B) + (c - 1)(alpha + B) (h B more).
 *   tree     L alpha + (P - 1) B
 *            T(n) = alpha + floor(n/2) B + T(ceil(n/2)), T(1) = 0: R's own
 *            chain of halves is the longest, the half sent away having
 *            floor(n/2) <= ceil(n/2) nodes to serve (Chan et al.'s MST
 *            scatter: both lower bounds at once).
 *
 * plus what the disagreement rules put on R's port: a scatter's (P - 1)
 * empty messages from R before any data (every algorithm), a gather's empty
 * messages to R from its children that combine (orth: the other rows with
 * two nodes or more, r - 1 at most; tree: R's children with a subtree of
 * two or more).  A gather is the scatter reversed in time, the same data
 * terms.  So in this model the tree is never slower than the others (the
 * same bytes through R, L <= r + c - 2 <= P - 1 messages; checked for
 * P < 3000): the chooser's ties decide the rest, direct for a scatter on
 * up to 3 nodes and a gather on up to 5, orth where the grid ties with the
 * tree (scatter 4, 6, 9 nodes; gather 6, 8, 9, 10), the tree beyond.  Only
 * what the model leaves out can favour direct for large blocks: the
 * relays' memory (a relay holds what it passes on: orth c m, tree
 * floor(P/2) m), which sg_choose weighs, and their copies. */
double sg_predict_us(enum sg_alg alg, int gather, uint32_t nodes, uint32_t ppn, uint64_t block_bytes,
		     double alpha_us, double beta_ns_per_byte);

/* The most bytes of blocks one node passes on (0 for direct). */
uint64_t sg_relay_bytes(enum sg_alg alg, uint32_t nodes, uint32_t ppn, uint64_t block_bytes);

/* The algorithm sg_predict_us says is fastest (ties: the simpler, the
 * lower enum) among those whose relays hold at most mem_max bytes (twice
 * sg_relay_bytes: the executor keeps a message whole as it arrives and its
 * parts in scratch; mem_max 0: no limit).  Its inputs must be the same on
 * every node (a v variant's sizes are not: choose as for the same count
 * everywhere), or the nodes' schedules differ and the operation fails. */
enum sg_alg sg_choose(int gather, uint32_t nodes, uint32_t ppn, uint64_t block_bytes, const struct cost *c,
		      uint64_t mem_max);

/* sg_predict_us as the cost module's model (plan/cost.h), INFINITY for an
 * algorithm whose relays would hold more than mem_max / 2. */
struct sg_model {
	int gather;
	uint32_t nodes, ppn;
	uint64_t block_bytes, mem_max;
};
double sg_model_us(const void *model, uint32_t alg, double alpha_us, double beta_ns, double gamma_ns);

#endif
