/* daemon/plan/sg_sched.c - node-level scatter and gather schedules: along
 * given paths (direct, a torus planner's), the orthogonal two-phase and the
 * binomial tree realizations, and their cost model.  See sg_sched.h.
 *
 * Ownership: the steps and segments go into the caller's sched_node; a
 * realization's working tables (nine words per node) are allocated and
 * freed within each build.
 */
#include "sg_sched.h"
#include "names.h"
#include "sched.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Message numbers on every hop of node d's path (sg_sched.h): its data d,
 * the root's word 3 nodes + 2 + d, a scatter's ready 4 nodes + 2 + d (past
 * the orthogonal and tree realizations' data, nodes + 2 + x and 2 nodes +
 * 2 + x, and their gathers' words to a parent, nodes). */
#define MSG_WORD(nodes, d)  (3 * (nodes) + 2 + (d))
#define MSG_READY(nodes, d) (4 * (nodes) + 2 + (d))

uint32_t sg_node_of(const struct a2a_layout *lay, uint32_t nodes, uint32_t r, uint32_t *slot_p)
{
	for (uint32_t n = 0; n < nodes; n++)
		for (uint32_t i = lay->node_first[n]; i < lay->node_first[n + 1]; i++)
			if (lay->rank_at[i] == r) {
				*slot_p = i - lay->node_first[n];
				return n;
			}
	return UINT32_MAX;
}

/* Node d's path: *len_p hops at the returned array, their order keys in
 * *order_p (NULL: all 0).  Direct: d itself. */
static const uint32_t *path_of(const struct sg_paths *paths, const uint32_t *d, uint32_t *len_p,
			       const uint32_t **order_p)
{
	if (!paths) {
		*len_p = 1;
		*order_p = NULL;
		return d;
	}
	*len_p = paths->first[*d + 1] - paths->first[*d];
	*order_p = paths->order + paths->first[*d];
	return paths->hop + paths->first[*d];
}

/* 1 if node d's path is one: non-empty, within the nodes, ending at d,
 * never through R nor twice through a node (else two steps would wait for
 * the same message and one of them for ever).  Paths are short (a torus's
 * diameter): the pairs are compared. */
static int path_ok(const uint32_t *p, uint32_t len, uint32_t d, uint32_t R, uint32_t nodes)
{
	if (!len || p[len - 1] != d)
		return 0;
	for (uint32_t i = 0; i < len; i++) {
		if (p[i] >= nodes || p[i] == R)
			return 0;
		for (uint32_t k = 0; k < i; k++)
			if (p[k] == p[i])
				return 0;
	}
	return 1;
}

static int has_ranks(const struct a2a_layout *lay, uint32_t n)
{
	return lay->node_first[n + 1] > lay->node_first[n];
}

/* The messages node n passes on: for every path through n (not ending
 * there), a FORWARD from the node before to the node after (scatter), or
 * back (gather). */
static int forwards(int gather, const struct a2a_layout *lay, uint32_t nodes, uint32_t n, uint32_t R,
		    const struct sg_paths *paths, struct sched_node *out)
{
	if (!paths)
		return 0;
	for (uint32_t d = 0; d < nodes; d++) {
		const uint32_t *p, *ord;
		uint32_t len;

		if (d == R || !has_ranks(lay, d))
			continue;
		p = path_of(paths, &d, &len, &ord);
		if (!path_ok(p, len, d, R, nodes))
			return -EINVAL;
		for (uint32_t i = 0; i + 1 < len; i++) {
			uint32_t before = i ? p[i - 1] : R;

			if (p[i] != n)
				continue;
			/* the root's word out, a scatter's ready back */
			sched_step(out, SCHED_FORWARD, p[i + 1], MSG_WORD(nodes, d), 0);
			sched_step_forward(out, before, MSG_WORD(nodes, d));
			if (!gather) {
				sched_step(out, SCHED_FORWARD, before, MSG_READY(nodes, d), 0);
				sched_step_forward(out, p[i + 1], MSG_READY(nodes, d));
			}
			if (!gather) {
				sched_step(out, SCHED_FORWARD, p[i + 1], d, ord[i + 1]);
				sched_step_forward(out, before, d);
			} else {
				sched_step(out, SCHED_FORWARD, before, d, paths->last_order - ord[i]);
				sched_step_forward(out, p[i + 1], d);
			}
		}
	}
	return 0;
}

/* The root node's own ranks' blocks: a copy each between the root's buffer
 * and the rank's (none for the root itself in place). */
static int local_copies(int gather, const struct a2a_layout *lay, uint32_t R, uint32_t s0, const struct sg_args *a,
			uint32_t ready, struct sched_node *out)
{
	uint32_t k0 = lay->node_first[R], nk = lay->node_first[R + 1] - k0;

	for (uint32_t k = 0; k < nk; k++) {
		uint32_t r = lay->rank_at[k0 + k];

		if (k == s0 && a->in_place)
			continue;
		if (a->count[r] != a->mine[k])
			return -EINVAL;
		if (!a->mine[k])
			continue;
		sched_step(out, SCHED_COPY, 0, 0, 0);
		if (ready != UINT32_MAX)
			sched_dep(out, ready);
		if (!gather) {
			sched_ref(out, sched_seg(out, SCHED_BUF_RECV, k, 0, a->mine[k], 0));
			sched_ref(out, sched_seg(out, SCHED_BUF_SEND, s0, a->displ[r], a->count[r], 0));
		} else {
			sched_ref(out, sched_seg(out, SCHED_BUF_RECV, s0, a->displ[r], a->count[r], 0));
			sched_ref(out, sched_seg(out, SCHED_BUF_SEND, k, 0, a->mine[k], 0));
		}
	}
	return 0;
}

/* The root's side of the disagreement rules (sg_sched.h): its word to
 * every other node with ranks, and a scatter's readies from them, along the
 * paths (NULL: direct), one after the other, so that nothing leaves before
 * every node named this root.  Returns the last of those RECVs' step (what
 * the data waits for), or UINT32_MAX (a gather, or no other node).  The
 * caller checked the paths. */
static uint32_t root_agree(int gather, const struct a2a_layout *lay, uint32_t nodes, uint32_t R,
			   const struct sg_paths *paths, struct sched_node *out)
{
	uint32_t ready = UINT32_MAX;

	for (uint32_t d = 0; d < nodes; d++) {
		const uint32_t *p, *ord;
		uint32_t len;

		if (d == R || !has_ranks(lay, d))
			continue;
		p = path_of(paths, &d, &len, &ord);
		sched_step(out, SCHED_SEND, p[0], MSG_WORD(nodes, d), 0);
		if (!gather) {
			uint32_t k = sched_step(out, SCHED_RECV, p[0], MSG_READY(nodes, d), 0);

			if (ready != UINT32_MAX)
				sched_dep(out, ready);
			ready = k;
		}
	}
	return ready;
}

/* The root's node: a message to (scatter) or from (gather) every other node
 * with ranks, its parts the root's blocks for that node's ranks; a
 * scatter's sends and copies wait for every other node's ready. */
static int root_node(int gather, const struct a2a_layout *lay, uint32_t nodes, uint32_t R, uint32_t s0,
		     const struct sg_args *a, const struct sg_paths *paths, struct sched_node *out)
{
	uint32_t ready;

	if (!a->count || !a->displ)
		return -EINVAL;
	for (uint32_t d = 0; d < nodes; d++) {
		const uint32_t *p, *ord;
		uint32_t len;

		if (d == R || !has_ranks(lay, d))
			continue;
		p = path_of(paths, &d, &len, &ord);
		if (!path_ok(p, len, d, R, nodes))
			return -EINVAL;
	}
	ready = root_agree(gather, lay, nodes, R, paths, out);
	for (uint32_t d = 0; d < nodes; d++) {
		const uint32_t *p, *ord;
		uint32_t len;

		if (d == R || !has_ranks(lay, d))
			continue;
		p = path_of(paths, &d, &len, &ord);
		if (!path_ok(p, len, d, R, nodes))
			return -EINVAL;
		if (!gather)
			sched_step(out, SCHED_SEND, p[0], d, ord ? ord[0] : 0);
		else
			sched_step(out, SCHED_RECV, p[0], d, 0);
		if (ready != UINT32_MAX)
			sched_dep(out, ready);
		for (uint32_t i = lay->node_first[d]; i < lay->node_first[d + 1]; i++) {
			uint32_t r = lay->rank_at[i];

			sched_ref(out, sched_seg(out, gather ? SCHED_BUF_RECV : SCHED_BUF_SEND, s0, a->displ[r],
						 a->count[r], 0));
		}
	}
	return local_copies(gather, lay, R, s0, a, ready, out);
}

int sg_sched_node(int gather, const struct a2a_layout *lay, uint32_t nodes, uint32_t n, const struct sg_args *a,
		  const struct sg_paths *paths, struct sched_node *out)
{
	uint32_t s0, R = sg_node_of(lay, nodes, a->root, &s0);
	const uint32_t *p, *ord;
	uint32_t len, prev;
	int ret;

	if (R == UINT32_MAX || n >= nodes)
		return -EINVAL;
	if (n == R)
		ret = root_node(gather, lay, nodes, R, s0, a, paths, out);
	else
		ret = forwards(gather, lay, nodes, n, R, paths, out);
	if (ret < 0)
		return ret;
	if (n == R || !has_ranks(lay, n))
		return out->err;
	p = path_of(paths, &n, &len, &ord);
	if (!path_ok(p, len, n, R, nodes))
		return -EINVAL;
	prev = len > 1 ? p[len - 2] : R;
	sched_step(out, SCHED_RECV, prev, MSG_WORD(nodes, n), 0);
	if (!gather)
		sched_step(out, SCHED_RECV, prev, n, 0);
	else
		sched_step(out, SCHED_SEND, prev, n, ord ? paths->last_order - ord[len - 1] : 0);
	for (uint32_t k = 0; k < lay->node_first[n + 1] - lay->node_first[n]; k++)
		sched_ref(out, sched_seg(out, gather ? SCHED_BUF_SEND : SCHED_BUF_RECV, k, 0, a->mine[k], 0));
	if (!gather)
		sched_step(out, SCHED_SEND, prev, MSG_READY(nodes, n), 0);
	return out->err;
}

/* Every node's part, each from its own ranks' counts (mine[rank]): by the
 * path builder (alg SG_DIRECT, along paths) or by alg. */
static int whole(enum sg_alg alg, int gather, const struct a2a_layout *lay, uint32_t nodes, const struct sg_args *a,
		 const uint64_t *mine, const struct sg_paths *paths, struct sched *s)
{
	uint64_t *m = calloc((size_t)lay->ranks + 1, sizeof(*m));
	int ret = m ? 0 : -ENOMEM;

	for (uint32_t n = 0; n < nodes && !ret; n++) {
		struct sg_args an = *a;
		uint32_t k0 = lay->node_first[n];

		for (uint32_t i = k0; i < lay->node_first[n + 1]; i++)
			m[i - k0] = mine[lay->rank_at[i]];
		an.mine = m;
		s->node[n].nslots = lay->node_first[n + 1] - k0;
		ret = alg == SG_DIRECT ? sg_sched_node(gather, lay, nodes, n, &an, paths, &s->node[n])
				       : sg_sched_alg_node(alg, gather, lay, nodes, n, &an, &s->node[n]);
	}
	free(m);
	return ret < 0 ? ret : sched_err(s);
}

int sg_sched(int gather, const struct a2a_layout *lay, uint32_t nodes, const struct sg_args *a,
	     const uint64_t *mine, const struct sg_paths *paths, struct sched *s)
{
	return whole(SG_DIRECT, gather, lay, nodes, a, mine, paths, s);
}

/* ---- orthogonal and tree realizations (sg_sched.h) ---- */

static const char *const alg_names[SG_ALGS] = { "direct", "orth", "tree" };

const char *sg_alg_name(enum sg_alg alg)
{
	return names_get(alg_names, SG_ALGS, alg);
}

int sg_alg_by_name(const char *name)
{
	return names_find(alg_names, SG_ALGS, name);
}

void sg_grid(uint32_t nodes, uint32_t *rows_p, uint32_t *cols_p)
{
	uint64_t best_c = 1, best_r = nodes ? nodes : 1;

	/* r + c >= c + 1: no c beyond the best sum can win, so the loop stops
	 * near 2 sqrt(nodes). */
	for (uint64_t c = 2; c <= nodes && c < best_r + best_c; c++) {
		uint64_t r = (nodes + c - 1) / c;
		uint64_t sum = r + c, best_sum = best_r + best_c;

		if (sum < best_sum || (sum == best_sum && r * c - nodes <= best_r * best_c - nodes)) {
			best_c = c;
			best_r = r;
		}
	}
	*rows_p = (uint32_t)best_r;
	*cols_p = (uint32_t)best_c;
}

uint32_t sg_orth_leader(uint32_t nodes, uint32_t cols, uint32_t R, uint32_t row)
{
	uint64_t at = (uint64_t)row * cols + R % cols;

	/* Only the last row can be short; its last node stands in. */
	return at < nodes ? (uint32_t)at : nodes - 1;
}

/* The structure of one realization for one root: who passes what to whom. */
struct shape {
	enum sg_alg alg;
	uint32_t nodes, R;
	uint32_t rows, cols;    /* SG_ORTH */
	uint32_t base;          /* data message numbers: base + the node served */
};

static void shape_init(struct shape *sh, enum sg_alg alg, uint32_t nodes, uint32_t R)
{
	sh->alg = alg;
	sh->nodes = nodes;
	sh->R = R;
	sg_grid(nodes, &sh->rows, &sh->cols);
	sh->base = alg == SG_ORTH ? nodes + 2 : 2 * nodes + 2;
}

uint32_t sg_tree_range(uint32_t d, uint32_t v, uint32_t *hi_p)
{
	uint32_t lo = 0, hi = d, parent = UINT32_MAX;

	while (lo != v) {
		uint32_t mid = lo + (hi - lo + 1) / 2;

		if (v >= mid) {
			parent = lo;
			lo = mid;
		} else {
			hi = mid;
		}
	}
	*hi_p = hi;
	return parent;
}

/* Tree: node v's range [v, *hi_p) in the numbering relative to R, and its
 * parent there (UINT32_MAX for R). */
static uint32_t tree_range(const struct shape *sh, uint32_t v, uint32_t *hi_p)
{
	return sg_tree_range(sh->nodes, v, hi_p);
}

static uint32_t rel(const struct shape *sh, uint32_t n)
{
	return (uint32_t)(((uint64_t)n + sh->nodes - sh->R) % sh->nodes);
}

static uint32_t unrel(const struct shape *sh, uint32_t v)
{
	return (uint32_t)(((uint64_t)v + sh->R) % sh->nodes);
}

/* The node n passes its data to (gather) or gets it from (scatter);
 * UINT32_MAX for R. */
static uint32_t shape_parent(const struct shape *sh, uint32_t n)
{
	uint32_t hi, p, lead;

	if (n == sh->R)
		return UINT32_MAX;
	if (sh->alg == SG_ORTH) {
		lead = sg_orth_leader(sh->nodes, sh->cols, sh->R, n / sh->cols);
		return n == lead ? sh->R : lead;
	}
	p = tree_range(sh, rel(sh, n), &hi);
	return unrel(sh, p);
}

/* n's children in the order n sends to them (scatter), with their order
 * keys: orthogonal R the other rows' leaders first (they pass on), then its
 * own row; a tree node the farthest first.  Returns how many. */
static uint32_t shape_children(const struct shape *sh, uint32_t n, uint32_t *ch, uint32_t *order)
{
	uint32_t k = 0, c = sh->cols, row = n / c;

	if (sh->alg == SG_ORTH) {
		if (n == sh->R)
			for (uint32_t i = 0; i < sh->rows; i++)
				if (i != row) {
					order[k] = 0;
					ch[k++] = sg_orth_leader(sh->nodes, c, sh->R, i);
				}
		if (n == sg_orth_leader(sh->nodes, c, sh->R, row))
			for (uint32_t m = row * c; m < (row + 1) * c && m < sh->nodes; m++)
				if (m != n) {
					order[k] = n == sh->R;
					ch[k++] = m;
				}
		return k;
	}
	uint32_t v = rel(sh, n), hi;

	tree_range(sh, v, &hi);
	while (hi - v > 1) {
		uint32_t mid = v + (hi - v + 1) / 2;

		order[k] = k;
		ch[k++] = unrel(sh, mid);
		hi = mid;
	}
	return k;
}

/* The nodes whose blocks n's message holds, in part order (n among them).
 * Returns how many. */
static uint32_t shape_subtree(const struct shape *sh, uint32_t n, uint32_t *sub)
{
	uint32_t k = 0, c = sh->cols, row = n / c, v, hi;

	if (sh->alg == SG_ORTH) {
		if (n == sh->R || n != sg_orth_leader(sh->nodes, c, sh->R, row)) {
			sub[0] = n;
			return 1;
		}
		for (uint32_t m = row * c; m < (row + 1) * c && m < sh->nodes; m++)
			sub[k++] = m;
		return k;
	}
	v = rel(sh, n);
	tree_range(sh, v, &hi);
	for (uint32_t x = v; x < hi; x++)
		sub[k++] = unrel(sh, x);
	return k;
}

/* Working memory of one build: node-sized tables. */
struct sbuild {
	const struct shape *sh;
	const struct a2a_layout *lay;
	uint32_t *sub, *ch, *order;     /* the node built: its subtree, children */
	uint32_t *sub2;                 /* a child's subtree */
	uint32_t *ch2, *order2, *sub3;  /* combines() and carries() */
	uint32_t *recvs;                /* a gather's data RECV steps */
	uint32_t *seg_first;            /* [node]: its first scratch segment at this node */
};

static int ranked_any(const struct sbuild *b, const uint32_t *sub, uint32_t k)
{
	for (uint32_t i = 0; i < k; i++)
		if (has_ranks(b->lay, sub[i]))
			return 1;
	return 0;
}

/* 1 if some node behind child x has ranks (x gets or sends a message). */
static int carries(const struct sbuild *b, uint32_t x)
{
	return ranked_any(b, b->sub3, shape_subtree(b->sh, x, b->sub3));
}

/* 1 if x's data waits for a message of a child (gather: x combines). */
static int combines(const struct sbuild *b, uint32_t x)
{
	uint32_t *ch = b->ch2, k = shape_children(b->sh, x, ch, b->order2);

	for (uint32_t i = 0; i < k; i++)
		if (carries(b, ch[i]))
			return 1;
	return 0;
}

/* Segments of the root's buffer for every rank of the nodes sub[0..k). */
static void root_parts(const struct sbuild *b, int gather, uint32_t s0, const struct sg_args *a,
		       const uint32_t *sub, uint32_t k, struct sched_node *out)
{
	for (uint32_t j = 0; j < k; j++)
		for (uint32_t i = b->lay->node_first[sub[j]]; i < b->lay->node_first[sub[j] + 1]; i++) {
			uint32_t r = b->lay->rank_at[i];

			sched_ref(out, sched_seg(out, gather ? SCHED_BUF_RECV : SCHED_BUF_SEND, s0, a->displ[r],
						 a->count[r], 0));
		}
}

/* Parts of n's message for the nodes sub[0..k): n's own ranks' buffers, a
 * new sized scratch segment per rank of another node (fresh 1: recorded in
 * seg_first) or the one recorded. */
static void relay_parts(struct sbuild *b, int gather, uint32_t n, const struct sg_args *a, const uint32_t *sub,
			uint32_t k, int fresh, struct sched_node *out)
{
	for (uint32_t j = 0; j < k; j++) {
		uint32_t d = sub[j], nk = b->lay->node_first[d + 1] - b->lay->node_first[d];

		if (d == n) {
			for (uint32_t i = 0; i < nk; i++)
				sched_ref(out, sched_seg(out, gather ? SCHED_BUF_SEND : SCHED_BUF_RECV, i, 0,
							 a->mine[i], 0));
			continue;
		}
		for (uint32_t i = 0; i < nk; i++) {
			uint32_t g;

			if (fresh) {
				g = sched_seg(out, SCHED_BUF_SCRATCH, sched_scratch(out, 0), 0, 0, SCHED_SEG_SIZED);
				if (i == 0)
					b->seg_first[d] = g;
			} else {
				g = b->seg_first[d] + i;
			}
			sched_ref(out, g);
		}
	}
}

static int shape_root(struct sbuild *b, int gather, uint32_t s0, const struct sg_args *a, struct sched_node *out)
{
	const struct shape *sh = b->sh;
	uint32_t R = sh->R, ready, nch = shape_children(sh, R, b->ch, b->order);

	if (!a->count || !a->displ)
		return -EINVAL;
	ready = root_agree(gather, b->lay, sh->nodes, R, NULL, out);
	for (uint32_t j = 0; j < nch; j++) {
		uint32_t x = b->ch[j], k = shape_subtree(sh, x, b->sub);

		if (!ranked_any(b, b->sub, k))
			continue;
		if (gather && has_ranks(b->lay, x) && combines(b, x))
			sched_step(out, SCHED_RECV, x, sh->nodes, 0);
		if (gather)
			sched_step(out, SCHED_RECV, x, sh->base + x, 0);
		else
			sched_step(out, SCHED_SEND, x, sh->base + x, b->order[j]);
		if (ready != UINT32_MAX)
			sched_dep(out, ready);
		root_parts(b, gather, s0, a, b->sub, k, out);
	}
	return local_copies(gather, b->lay, R, s0, a, ready, out);
}

static int shape_other(struct sbuild *b, int gather, uint32_t n, const struct sg_args *a, struct sched_node *out)
{
	const struct shape *sh = b->sh;
	uint32_t R = sh->R, p = shape_parent(sh, n), nch, k, in, nrecv = 0;
	int mine = has_ranks(b->lay, n);

	if (mine)
		sched_step(out, SCHED_RECV, R, MSG_WORD(sh->nodes, n), 0);
	k = shape_subtree(sh, n, b->sub);
	if (!ranked_any(b, b->sub, k))
		return out->err;
	nch = shape_children(sh, n, b->ch, b->order);
	if (!gather) {
		in = sched_step(out, SCHED_RECV, p, sh->base + n, 0);
		relay_parts(b, 0, n, a, b->sub, k, 1, out);
		for (uint32_t j = 0; j < nch; j++) {
			uint32_t x = b->ch[j], kx = shape_subtree(sh, x, b->sub2);

			if (!ranked_any(b, b->sub2, kx))
				continue;
			sched_step(out, SCHED_SEND, x, sh->base + x, b->order[j]);
			sched_dep(out, in);
			relay_parts(b, 0, n, a, b->sub2, kx, 0, out);
		}
		if (mine)
			sched_step(out, SCHED_SEND, R, MSG_READY(sh->nodes, n), 0);
		return out->err;
	}
	/* Gather: the word at once if this node combines (sg_sched.h), then
	 * its children's data, then its own message with theirs. */
	if (mine && combines(b, n))
		sched_step(out, SCHED_SEND, p, sh->nodes, 0);
	for (uint32_t j = 0; j < nch; j++) {
		uint32_t x = b->ch[j], kx;

		if (has_ranks(b->lay, x) && combines(b, x))
			sched_step(out, SCHED_RECV, x, sh->nodes, 0);
		kx = shape_subtree(sh, x, b->sub2);
		if (!ranked_any(b, b->sub2, kx))
			continue;
		b->recvs[nrecv++] = sched_step(out, SCHED_RECV, x, sh->base + x, 0);
		relay_parts(b, 1, n, a, b->sub2, kx, 1, out);
	}
	sched_step(out, SCHED_SEND, p, sh->base + n, 0);
	for (uint32_t j = 0; j < nrecv; j++)
		sched_dep(out, b->recvs[j]);
	relay_parts(b, 1, n, a, b->sub, k, 0, out);
	return out->err;
}

int sg_sched_alg_node(enum sg_alg alg, int gather, const struct a2a_layout *lay, uint32_t nodes, uint32_t n,
		      const struct sg_args *a, struct sched_node *out)
{
	uint32_t s0, R;
	struct shape sh;
	struct sbuild b = { .sh = &sh, .lay = lay };
	uint32_t *mem;
	int ret;

	if (alg == SG_DIRECT)
		return sg_sched_node(gather, lay, nodes, n, a, NULL, out);
	if (alg != SG_ORTH && alg != SG_TREE)
		return -EINVAL;
	R = sg_node_of(lay, nodes, a->root, &s0);
	if (R == UINT32_MAX || n >= nodes)
		return -EINVAL;
	shape_init(&sh, alg, nodes, R);
	mem = calloc((size_t)nodes * 9 + 1, sizeof(*mem));
	if (!mem)
		return -ENOMEM;
	b.sub = mem;
	b.ch = mem + nodes;
	b.order = mem + 2 * (size_t)nodes;
	b.sub2 = mem + 3 * (size_t)nodes;
	b.ch2 = mem + 4 * (size_t)nodes;
	b.order2 = mem + 5 * (size_t)nodes;
	b.sub3 = mem + 6 * (size_t)nodes;
	b.recvs = mem + 7 * (size_t)nodes;
	b.seg_first = mem + 8 * (size_t)nodes;
	ret = n == R ? shape_root(&b, gather, s0, a, out) : shape_other(&b, gather, n, a, out);
	free(mem);
	return ret < 0 ? ret : out->err;
}

int sg_sched_alg(enum sg_alg alg, int gather, const struct a2a_layout *lay, uint32_t nodes,
		 const struct sg_args *a, const uint64_t *mine, struct sched *s)
{
	return whole(alg, gather, lay, nodes, a, mine, NULL, s);
}

/* ---- the cost model (sg_sched.h) ---- */

double sg_predict_us(enum sg_alg alg, int gather, uint32_t nodes, uint32_t ppn, uint64_t block_bytes,
		     double alpha_us, double beta_ns_per_byte)
{
	double P = nodes, B = (double)ppn * (double)block_bytes * beta_ns_per_byte / 1000.0;
	double agree = gather ? 0 : (P - 1) * alpha_us;
	uint32_t r, c, L = 0, K = 0;

	if (nodes <= 1)
		return 0;
	switch (alg) {
	case SG_DIRECT:
		return agree + (P - 1) * (alpha_us + B);
	case SG_ORTH: {
		double h, hello;

		sg_grid(nodes, &r, &c);
		h = (double)r * c - P;
		/* the worst root's other rows: r - 1, each of c >= 2 nodes */
		hello = gather && c >= 2 ? r - 1.0 : 0;
		return agree + (r + c - 2.0 + hello) * alpha_us + (P - 1 + h) * B;
	}
	case SG_TREE:
		for (uint32_t n = nodes; n > 1; n = n - n / 2) {
			L++;
			K += n / 2 > 1;         /* a child with a subtree to combine */
		}
		return agree + (L + (gather ? K : 0)) * alpha_us + (P - 1) * B;
	default:
		return 0;
	}
}

uint64_t sg_relay_bytes(enum sg_alg alg, uint32_t nodes, uint32_t ppn, uint64_t block_bytes)
{
	uint32_t r, c;
	uint64_t m = (uint64_t)ppn * block_bytes;

	if (nodes <= 1)
		return 0;
	switch (alg) {
	case SG_ORTH:
		sg_grid(nodes, &r, &c);
		return r > 1 && c > 1 ? c * m : 0;     /* a leader's row */
	case SG_TREE:
		return nodes / 2 > 1 ? nodes / 2 * m : 0;      /* the first child's half */
	default:
		return 0;
	}
}

double sg_model_us(const void *model, uint32_t alg, double alpha_us, double beta_ns, double gamma_ns)
{
	const struct sg_model *m = model;

	(void)gamma_ns;
	if (alg != SG_DIRECT && m->mem_max && sg_relay_bytes(alg, m->nodes, m->ppn, m->block_bytes) > m->mem_max / 2)
		return INFINITY;
	return sg_predict_us(alg, m->gather, m->nodes, m->ppn, m->block_bytes, alpha_us, beta_ns);
}

enum sg_alg sg_choose(int gather, uint32_t nodes, uint32_t ppn, uint64_t block_bytes, const struct cost *c,
		      uint64_t mem_max)
{
	struct sg_model m = { gather, nodes, ppn, block_bytes, mem_max };

	return (enum sg_alg)cost_choose(c, sg_model_us, &m, SG_ALGS);
}
