/* daemon/plan/orth.c - node-level broadcast, reduce, allreduce and
 * allgather(v) over a virtual grid of the nodes: trees and exchanges,
 * single-phase, orthogonal and hierarchical (seed 004 §2), and their cost
 * model.  See orth.h.
 *
 * Ownership: the steps and segments go into the caller's sched_node; a
 * build's working tables (struct ctx) are allocated and freed within it.
 */
#include "orth.h"
#include "names.h"
#include "sched.h"
#include "sg_sched.h"
#include "../../proto/coll.h"

#include <errno.h>
#include <math.h>
#include <float.h>
#include <stdlib.h>
#include <string.h>

#define NONE UINT32_MAX
#define NOPOS UINT64_MAX

/* The low bits of a message number (orth.h, "Message numbers"). */
enum { WHAT_DATA = 0, WHAT_READY = 1, WHAT_WORD = 2 };

/* A grid (orth.h, "Grids"): a slab of level l spans span[l] positions,
 * span[levels] = 1; positions P and beyond are holes. */
struct grid {
	uint32_t levels;
	uint64_t span[ORTH_MAX_DIMS + 1];
	uint64_t P;
};

/* A partner of a node in an exchange at one level: the position, the
 * sub-slab whose data it sends (for a partner the node receives from), and
 * which ways the data goes. */
struct xlink {
	uint64_t pos;
	uint64_t w;
	uint8_t in, out;
};

/* The slab of one level that holds a node, split into sub-slabs of M. */
struct xlevel {
	uint64_t base, len, M, wx;
};

static const char *const alg_names[ORTH_ALGS] = { "single", "orth", "hier" };

const char *orth_alg_name(enum orth_alg alg)
{
	return names_get(alg_names, ORTH_ALGS, alg);
}

int orth_alg_by_name(const char *name)
{
	return names_find(alg_names, ORTH_ALGS, name);
}

/* ---- grids ---- */

static int tree_kind(enum orth_kind kind)
{
	return kind == ORTH_BCAST || kind == ORTH_REDUCE || kind == ORTH_ALLREDUCE;
}

/* The dimensions alg lays over P nodes for kind (orth.h, "Algorithms").
 * Returns 0 or -EINVAL (no or bad dimensions for ORTH_HIER). */
static int dims_of(enum orth_kind kind, enum orth_alg alg, const struct orth_dims *hier, uint64_t P,
		   struct orth_dims *d)
{
	uint32_t r, c;

	memset(d, 0, sizeof(*d));
	switch (alg) {
	case ORTH_SINGLE:
		if (!tree_kind(kind)) {
			d->k = 1;
			d->d[0] = (uint32_t)P;
			return 0;
		}
		while ((1ull << d->k) < P)
			d->d[d->k++] = 2;
		return 0;
	case ORTH_GRID:
		if (hier) {     /* (the caller's r x c) */
			if (hier->k != 2 || !hier->d[0] || !hier->d[1])
				return -EINVAL;
			*d = *hier;
			return 0;
		}
		sg_grid((uint32_t)P, &r, &c);
		*d = (struct orth_dims){ .k = 2, .d = { r, c } };
		return 0;
	case ORTH_HIER:
		if (!hier || !hier->k || hier->k > ORTH_MAX_DIMS)
			return -EINVAL;
		for (uint32_t l = 0; l < hier->k; l++)
			if (!hier->d[l])
				return -EINVAL;
		*d = *hier;
		return 0;
	default:
		return -EINVAL;
	}
}

/* Returns 0, or -EINVAL if the grid is too small for P or its size
 * overflows. */
static int grid_init(struct grid *g, const struct orth_dims *d, uint64_t P)
{
	g->levels = d->k;
	g->P = P;
	g->span[d->k] = 1;
	for (uint32_t l = d->k; l-- > 0;) {
		if (g->span[l + 1] > UINT64_MAX / d->d[l])
			return -EINVAL;
		g->span[l] = g->span[l + 1] * d->d[l];
	}
	return g->span[0] >= P ? 0 : -EINVAL;
}

static uint64_t min64(uint64_t a, uint64_t b)
{
	return a < b ? a : b;
}

/* The slab of level l that holds position x. */
static void slab_of(const struct grid *g, uint64_t x, uint32_t l, uint64_t *base_p, uint64_t *len_p)
{
	uint64_t base = 0, len = g->P;

	for (uint32_t i = 0; i < l; i++) {
		uint64_t M = g->span[i + 1], w = (x - base) / M;

		base += w * M;
		len = min64(M, len - w * M);
	}
	*base_p = base;
	*len_p = len;
}

/* ---- trees (BCAST, REDUCE, ORTH_SINGLE's ALLREDUCE) ---- */

/* The leader of sub-slab w (M positions each) of the slab [base, base +
 * len) whose root is root: the root in its own sub-slab, else the position
 * at the root's offset, or the sub-slab's last node where that is a hole
 * (SG_ORTH's rule, applied at every level). */
static uint64_t leader(uint64_t base, uint64_t len, uint64_t M, uint64_t root, uint64_t w)
{
	uint64_t at = w * M + (root - base) % M;

	if ((root - base) / M == w)
		return root;
	return at < len ? base + at : base + len - 1;
}

/* Position x's parent in the tree rooted at rho (NOPOS for rho itself) and
 * its children, outer levels first, in ch[] with their levels in lvl[] (ch
 * NULL: only counted).  Returns how many children. */
static uint32_t tree_links(const struct grid *g, uint64_t rho, uint64_t x, uint64_t *parent_p, uint64_t *ch,
			   uint32_t *lvl)
{
	uint64_t base = 0, len = g->P, root = rho;
	uint32_t n = 0;

	*parent_p = NOPOS;
	for (uint32_t l = 0; l < g->levels; l++) {
		uint64_t M = g->span[l + 1], wx = (x - base) / M, lead = leader(base, len, M, root, wx);

		for (uint64_t w = 0; x == root && w * M < len; w++) {
			if (w == wx)
				continue;
			if (ch) {
				ch[n] = leader(base, len, M, root, w);
				lvl[n] = l;
			}
			n++;
		}
		if (x != root && x == lead)
			*parent_p = root;
		base += wx * M;
		len = min64(M, len - wx * M);
		root = lead;
	}
	return n;
}

/* ---- exchanges (ALLREDUCE on grids, ALLGATHER) ---- */

/* Position x's partners at level l (orth.h, "ALLREDUCE ... and ALLGATHER"):
 * for every other sub-slab of its slab, in order, the node at x's offset
 * (both ways) or, where the last sub-slab is too short, its stand-in (in
 * only); then, if x stands in, the nodes it serves (out only).  Returns how
 * many; 0 if the slab has a single sub-slab. */
static uint32_t xchg_links(const struct grid *g, uint64_t x, uint32_t l, struct xlevel *lv, struct xlink *xl)
{
	uint64_t M = g->span[l + 1], nw, o, last, llen;
	uint32_t n = 0;

	slab_of(g, x, l, &lv->base, &lv->len);
	lv->M = M;
	lv->wx = (x - lv->base) / M;
	nw = (lv->len + M - 1) / M;
	o = x - lv->base - lv->wx * M;
	last = nw - 1;
	llen = lv->len - last * M;
	for (uint64_t w = 0; w < nw; w++) {
		if (w == lv->wx)
			continue;
		if (w != last || o < llen)
			xl[n++] = (struct xlink){ lv->base + w * M + o, w, 1, 1 };
		else
			xl[n++] = (struct xlink){ lv->base + last * M + o % llen, w, 1, 0 };
	}
	for (uint64_t w = 0; lv->wx == last && w < last; w++)
		for (uint64_t o2 = o + llen; o2 < M; o2 += llen)
			xl[n++] = (struct xlink){ lv->base + w * M + o2, w, 0, 1 };
	return n;
}

/* ---- building one node's part ---- */

struct ctx {
	const struct orth_args *a;
	const struct a2a_layout *lay;
	struct sched_node *out;
	struct grid g;
	uint32_t *act;          /* [P]: the nodes with ranks, in node order */
	uint32_t P, rot;        /* position x is node act[(x + rot) % P] */
	uint32_t n, k;          /* the node planned, its ranks */
	uint64_t me, rho;       /* its position; the tree's root's */
	uint32_t root_slot;     /* the root's slot, on the root's node */
	uint32_t tag;           /* message numbers but for `what` */
	uint64_t len;           /* bytes of a node's data (not ALLGATHER) */
	uint64_t *ch;           /* [P]: tree children */
	uint32_t *lvl;          /* [P]: their levels */
	struct xlink *xl;       /* [2 P]: exchange partners of one level */
	uint32_t *wr, *seg0;    /* [ranks], ALLGATHER: the step that wrote a block, its segment */
	uint64_t *off;          /* [ranks], ALLGATHER: the default displacements */
	void *mem;              /* the block all of these are in */
};

static uint32_t node_at(const struct ctx *c, uint64_t x)
{
	return c->act[(x + c->rot) % c->P];
}

static uint32_t rank_of(const struct ctx *c, uint32_t node, uint32_t slot)
{
	return c->lay->rank_at[c->lay->node_first[node] + slot];
}

static uint32_t ranks_on(const struct ctx *c, uint32_t node)
{
	return c->lay->node_first[node + 1] - c->lay->node_first[node];
}

/* A step: to or from the node at position peer (NOPOS: local), message
 * `what`, after step `after` and over segment seg (each NONE for none). */
static uint32_t step(struct ctx *c, enum sched_kind kind, uint64_t peer, unsigned what, uint32_t order,
		     uint32_t after, uint32_t seg)
{
	uint32_t to = peer == NOPOS ? 0 : node_at(c, peer), s;

	s = sched_step(c->out, kind, to, peer == NOPOS ? 0 : c->tag | what, order);
	if (kind == SCHED_RECV_REDUCE || kind == SCHED_REDUCE)
		sched_step_reduce(c->out, c->a->type, c->a->op);
	if (after != NONE)
		sched_dep(c->out, after);
	if (seg != NONE)
		sched_ref(c->out, seg);
	return s;
}

/* A local COPY or REDUCE: dst = src, or dst = dst op src. */
static uint32_t local(struct ctx *c, enum sched_kind kind, uint32_t dst, uint32_t src, uint32_t after)
{
	uint32_t s = step(c, kind, NOPOS, 0, 0, after, dst);

	sched_ref(c->out, src);
	return s;
}

static uint32_t seg_buf(struct ctx *c, enum sched_buf buf, uint32_t slot, uint64_t off, uint64_t len)
{
	return sched_seg(c->out, buf, slot, off, len, 0);
}

static uint32_t seg_scratch(struct ctx *c)
{
	return seg_buf(c, SCHED_BUF_SCRATCH, sched_scratch(c->out, c->len), 0, c->len);
}

/* Combines the node's ranks' contributions into acc in slot order:
 * ((s0 op s1) op s2) ...  Returns the last step. */
static uint32_t combine_local(struct ctx *c, uint32_t acc)
{
	uint32_t last = local(c, SCHED_COPY, acc, seg_buf(c, SCHED_BUF_SEND, 0, 0, c->len), NONE);

	for (uint32_t i = 1; i < c->k; i++)
		last = local(c, SCHED_REDUCE, acc, seg_buf(c, SCHED_BUF_SEND, i, 0, c->len), last);
	return last;
}

/* The result src (after step after) copied to every local rank's receive
 * buffer but skip's (whose buffer src is, or the root's). */
static void copies(struct ctx *c, uint32_t src, uint32_t after, uint32_t skip)
{
	for (uint32_t i = 0; c->len && i < c->k; i++)
		if (i != skip)
			local(c, SCHED_COPY, seg_buf(c, SCHED_BUF_RECV, i, 0, c->len), src, after);
}

/* src (after step after) sent to the nch children in c->ch, outer levels
 * first (the order key). */
static void down(struct ctx *c, uint32_t nch, uint32_t src, uint32_t after)
{
	for (uint32_t i = 0; i < nch; i++)
		step(c, SCHED_SEND, c->ch[i], WHAT_DATA, c->lvl[i], after, src);
}

/* The readies of the children (those with children of their own only, if
 * inner_only): RECVs nothing waits for (orth.h, disagreement). */
static void readies_in(struct ctx *c, uint32_t nch, int inner_only)
{
	uint64_t p;

	for (uint32_t i = 0; i < nch; i++)
		if (!inner_only || tree_links(&c->g, c->rho, c->ch[i], &p, NULL, NULL))
			step(c, SCHED_RECV, c->ch[i], WHAT_READY, 0, NONE, NONE);
}

static int bcast(struct ctx *c)
{
	uint64_t parent;
	uint32_t nch = tree_links(&c->g, c->rho, c->me, &parent, c->ch, c->lvl), src, in = NONE;

	if (parent == NOPOS) {
		src = seg_buf(c, SCHED_BUF_SEND, c->root_slot, 0, c->len);
	} else {
		step(c, SCHED_SEND, parent, WHAT_READY, 0, NONE, NONE);
		src = seg_buf(c, SCHED_BUF_RECV, 0, 0, c->len);
		in = step(c, SCHED_RECV, parent, WHAT_DATA, 0, NONE, src);
	}
	down(c, nch, src, in);
	readies_in(c, nch, 0);
	copies(c, src, in, parent == NOPOS ? c->root_slot : 0);
	return c->out->err;
}

/* The root's word down the tree and the inner nodes' readies up (orth.h,
 * REDUCE): nothing waits for them. */
static void words_and_readies(struct ctx *c, uint64_t parent, uint32_t nch)
{
	uint32_t word = NONE;

	if (parent != NOPOS) {
		word = step(c, SCHED_RECV, parent, WHAT_WORD, 0, NONE, NONE);
		if (nch)
			step(c, SCHED_SEND, parent, WHAT_READY, 0, NONE, NONE);
	}
	for (uint32_t i = 0; i < nch; i++)
		step(c, SCHED_SEND, c->ch[i], WHAT_WORD, 0, word, NONE);
	readies_in(c, nch, 1);
}

/* REDUCE (all 0) up the tree to the root, or ORTH_SINGLE's ALLREDUCE (all
 * 1): the same to the first node, then down again.  A node's accumulator:
 * the root's receive buffer (REDUCE), the first rank's (ALLREDUCE), or
 * scratch; none (the send buffer goes as it is) for a leaf of one rank. */
static int tree_reduce(struct ctx *c, int all)
{
	uint64_t parent;
	uint32_t nch = tree_links(&c->g, c->rho, c->me, &parent, c->ch, c->lvl), acc, last = NONE, up = NONE, in;
	int root = parent == NOPOS;

	words_and_readies(c, parent, nch);
	if (c->k == 1 && !nch && !root) {
		acc = seg_buf(c, SCHED_BUF_SEND, 0, 0, c->len);
	} else {
		acc = all ? seg_buf(c, SCHED_BUF_RECV, 0, 0, c->len)
		    : root ? seg_buf(c, SCHED_BUF_RECV, c->root_slot, 0, c->len) : seg_scratch(c);
		last = combine_local(c, acc);
		/* deepest children first: a fixed order, whenever they come */
		for (uint32_t i = nch; i-- > 0;)
			last = step(c, SCHED_RECV_REDUCE, c->ch[i], WHAT_DATA, 0, last, acc);
	}
	if (!root)
		up = step(c, SCHED_SEND, parent, WHAT_DATA, 0, last, acc);
	if (!all)
		return c->out->err;
	/* The result comes down into the first rank's buffer, once the
	 * accumulator (maybe that buffer) has gone up. */
	acc = seg_buf(c, SCHED_BUF_RECV, 0, 0, c->len);
	in = root ? last : step(c, SCHED_RECV, parent, WHAT_DATA, 0, up, acc);
	down(c, nch, acc, in);
	copies(c, acc, in, 0);
	return c->out->err;
}

/* acc = S_0 op S_1 op ... over the sub-slabs in order, S_wx = cur (after
 * step after_cur), the others from the partners xl[0..nl) (orth.h, "Order
 * of combination").  Returns the last step. */
static uint32_t xchg_combine(struct ctx *c, uint32_t nl, uint64_t wx, uint32_t acc, uint32_t cur, uint32_t after_cur)
{
	uint32_t prev = NONE;
	int own = 0;

	for (uint32_t i = 0; i <= nl; i++) {
		if (!own && (i == nl || (c->xl[i].in && c->xl[i].w > wx))) {
			if (prev == NONE) {
				prev = local(c, SCHED_COPY, acc, cur, after_cur);
			} else {
				prev = local(c, SCHED_REDUCE, acc, cur, prev);
				if (after_cur != NONE)
					sched_dep(c->out, after_cur);
			}
			own = 1;
		}
		if (i < nl && c->xl[i].in)
			prev = step(c, prev == NONE ? SCHED_RECV : SCHED_RECV_REDUCE, c->xl[i].pos, WHAT_DATA, 0, prev,
				    acc);
	}
	return prev;
}

/* The outermost level at which the node exchanges (its last), or NONE. */
static uint32_t xchg_last_level(struct ctx *c)
{
	struct xlevel lv;

	for (uint32_t l = 0; l < c->g.levels; l++)
		if (xchg_links(&c->g, c->me, l, &lv, c->xl))
			return l;
	return NONE;
}

/* ALLREDUCE by exchanges, level after level from the deepest; the last
 * level's result lands in the first rank's receive buffer. */
static int xchg_reduce(struct ctx *c)
{
	uint32_t cur, after = NONE, acc, lastl = xchg_last_level(c), res = seg_buf(c, SCHED_BUF_RECV, 0, 0, c->len);
	struct xlevel lv;

	if (c->k > 1)
		after = combine_local(c, cur = seg_scratch(c));
	else
		cur = seg_buf(c, SCHED_BUF_SEND, 0, 0, c->len);
	for (uint32_t l = c->g.levels; l-- > 0;) {
		uint32_t nl = xchg_links(&c->g, c->me, l, &lv, c->xl);

		if (!nl)
			continue;
		acc = l == lastl ? res : seg_scratch(c);
		for (uint32_t i = 0; i < nl; i++)
			if (c->xl[i].out)
				step(c, SCHED_SEND, c->xl[i].pos, WHAT_DATA, c->g.levels - l, after, cur);
		after = xchg_combine(c, nl, lv.wx, acc, cur, after);
		cur = acc;
	}
	if (lastl == NONE)      /* a single node */
		after = local(c, SCHED_COPY, res, cur, after);
	copies(c, res, after, 0);
	return c->out->err;
}

static uint64_t ag_count(const struct ctx *c, uint32_t r)
{
	return c->a->counts ? c->a->counts[r] : c->a->block;
}

static uint64_t ag_displ(const struct ctx *c, uint32_t slot, uint32_t r)
{
	return c->a->displ ? c->a->displ[slot][r] : c->off[r];
}

/* Rank r's block in the first local rank's receive buffer: where every
 * block of the node arrives and leaves from. */
static uint32_t ag_seg0(struct ctx *c, uint32_t r)
{
	if (c->seg0[r] == NONE)
		c->seg0[r] = seg_buf(c, SCHED_BUF_RECV, 0, ag_displ(c, 0, r), ag_count(c, r));
	return c->seg0[r];
}

/* Rank r's block, just written by step wr, copied to the other local
 * ranks. */
static void ag_fanout(struct ctx *c, uint32_t r, uint32_t wr)
{
	c->wr[r] = wr;
	for (uint32_t i = 1; ag_count(c, r) && i < c->k; i++)
		local(c, SCHED_COPY, seg_buf(c, SCHED_BUF_RECV, i, ag_displ(c, i, r), ag_count(c, r)), ag_seg0(c, r),
		      wr);
}

/* The parts of a message that carries the blocks of the positions [lo,
 * hi): every rank of every node, in position order, then slot order; a
 * SEND waits for the steps that wrote them, a RECV records itself. */
static void ag_parts(struct ctx *c, uint64_t lo, uint64_t hi, int send)
{
	uint32_t me = c->out->nsteps - 1, prev = NONE;

	for (uint64_t x = lo; x < hi; x++) {
		uint32_t node = node_at(c, x);

		for (uint32_t j = 0; j < ranks_on(c, node); j++) {
			uint32_t r = rank_of(c, node, j);

			sched_ref(c->out, ag_seg0(c, r));
			if (send && c->wr[r] != NONE && c->wr[r] != prev)
				sched_dep(c->out, prev = c->wr[r]);
			if (!send)
				c->wr[r] = me;
		}
	}
}

/* The blocks that a RECV (step s) brought for [lo, hi), to the other local
 * ranks. */
static void ag_fanout_range(struct ctx *c, uint64_t lo, uint64_t hi, uint32_t s)
{
	for (uint64_t x = lo; x < hi; x++)
		for (uint32_t j = 0, node = node_at(c, x); j < ranks_on(c, node); j++)
			ag_fanout(c, rank_of(c, node, j), s);
}

/* One level of the allgather exchange. */
static void ag_level(struct ctx *c, uint32_t l)
{
	struct xlevel lv;
	uint32_t nl = xchg_links(&c->g, c->me, l, &lv, c->xl);
	uint64_t lo = lv.base + lv.wx * lv.M, hi = min64(lo + lv.M, lv.base + lv.len);

	for (uint32_t i = 0; i < nl; i++)
		if (c->xl[i].out) {
			step(c, SCHED_SEND, c->xl[i].pos, WHAT_DATA, c->g.levels - l, NONE, NONE);
			ag_parts(c, lo, hi, 1);
		}
	for (uint32_t i = 0; i < nl; i++) {
		uint64_t wlo = lv.base + c->xl[i].w * lv.M, whi = min64(wlo + lv.M, lv.base + lv.len);
		uint32_t s;

		if (!c->xl[i].in)
			continue;
		s = step(c, SCHED_RECV, c->xl[i].pos, WHAT_DATA, 0, NONE, NONE);
		ag_parts(c, wlo, whi, 0);
		ag_fanout_range(c, wlo, whi, s);
	}
}

/* ALLGATHER: the node's own blocks into the first rank's receive buffer,
 * then the exchanges from the deepest level; every block is copied on to
 * the other local ranks as soon as it is there. */
static int allgather(struct ctx *c)
{
	for (uint32_t i = 0; i < c->k; i++) {
		uint32_t r = rank_of(c, c->n, i), wr = NONE;

		if (ag_count(c, r))
			wr = local(c, SCHED_COPY, ag_seg0(c, r), seg_buf(c, SCHED_BUF_SEND, i, 0, ag_count(c, r)), NONE);
		ag_fanout(c, r, wr);
	}
	for (uint32_t l = c->g.levels; l-- > 0;)
		ag_level(c, l);
	return c->out->err;
}

/* ---- arguments and set-up ---- */

static int layout_ok(const struct a2a_layout *lay, uint32_t nodes)
{
	if (!nodes || lay->node_first[0] != 0 || lay->node_first[nodes] != lay->ranks)
		return 0;
	for (uint32_t n = 0; n < nodes; n++)
		if (lay->node_first[n + 1] < lay->node_first[n])
			return 0;
	for (uint32_t i = 0; i < lay->ranks; i++)
		if (lay->rank_at[i] >= lay->ranks)
			return 0;
	return 1;
}

/* The data's bytes per node (not ALLGATHER), the allgather's default
 * displacements.  Returns 0 or -EINVAL (a kind, type or op out of range,
 * sizes that overflow). */
static int sizes(struct ctx *c)
{
	const struct orth_args *a = c->a;
	uint64_t ts = coll_type_size(a->type), at = 0;

	switch (a->kind) {
	case ORTH_BCAST:
		c->len = a->bytes;
		return 0;
	case ORTH_REDUCE:
	case ORTH_ALLREDUCE:
		if (!coll_op_ok(a->type, a->op) || a->count > UINT64_MAX / ts)
			return -EINVAL;
		c->len = a->count * ts;
		return 0;
	case ORTH_ALLGATHER:
		for (uint32_t r = 0; r < c->lay->ranks; r++) {
			c->off[r] = at;
			if (ag_count(c, r) > UINT64_MAX - at)
				return -EINVAL;
			at += ag_count(c, r);
		}
		return 0;
	default:
		return -EINVAL;
	}
}

/* The high bits of every message number (orth.h): the algorithm (a
 * factorization's hash, FNV-1a) and the root. */
static uint32_t msg_tag(const struct orth_args *a, const struct orth_dims *d)
{
	uint32_t h = 2166136261u, root = a->kind == ORTH_BCAST || a->kind == ORTH_REDUCE ? a->root : 0;

	for (uint32_t l = 0; a->alg == ORTH_HIER && l < d->k; l++)
		h = (h ^ d->d[l]) * 16777619u;
	return (a->alg == ORTH_HIER ? 2 + h % 1021 : (uint32_t)a->alg) << 22 | root << 2;
}

/* The nodes with ranks and the positions: a tree of ORTH_SINGLE is laid
 * relative to its root's node (position 0), every other structure over the
 * nodes as they are. */
static int place(struct ctx *c, uint32_t nodes)
{
	uint32_t R = 0, me = 0, s0 = 0, Rn = UINT32_MAX;

	if (c->a->kind == ORTH_BCAST || c->a->kind == ORTH_REDUCE) {
		Rn = c->a->root > ORTH_MAX_ROOT ? UINT32_MAX : sg_node_of(c->lay, nodes, c->a->root, &s0);
		if (Rn == UINT32_MAX)
			return -EINVAL;
	}
	for (uint32_t n = 0; n < nodes; n++) {
		if (!ranks_on(c, n))
			continue;
		if (n == Rn)
			R = c->P;
		if (n == c->n)
			me = c->P;
		c->act[c->P++] = n;
	}
	if (!c->P)
		return -EINVAL;         /* a group without ranks */
	c->root_slot = s0;
	c->rot = c->a->alg == ORTH_SINGLE ? R : 0;
	c->rho = c->a->alg == ORTH_SINGLE ? 0 : R;
	c->me = (me + c->P - c->rot) % c->P;
	return 0;
}

/* The working tables, carved out of one block (c->mem), widest first. */
static int ctx_alloc(struct ctx *c, uint32_t nodes)
{
	size_t N = (size_t)nodes + 1, ranks = (size_t)c->lay->ranks + 1;
	uint8_t *p = c->mem = malloc((N + ranks) * 8 + 2 * N * sizeof(*c->xl) + (N + ranks) * 2 * 4);

	if (!p)
		return -ENOMEM;
	c->ch = (uint64_t *)p;
	c->off = (uint64_t *)(p += N * 8);
	c->xl = (struct xlink *)(p += ranks * 8);
	c->act = (uint32_t *)(p += 2 * N * sizeof(*c->xl));
	c->lvl = (uint32_t *)(p += N * 4);
	c->wr = (uint32_t *)(p += N * 4);
	c->seg0 = (uint32_t *)(p += ranks * 4);
	memset(c->wr, 0xff, ranks * 2 * 4);     /* wr and seg0: NONE */
	return 0;
}

static int ctx_init(struct ctx *c, uint32_t nodes)
{
	struct orth_dims d;
	int ret;

	if ((ret = ctx_alloc(c, nodes)) || (ret = sizes(c)) || (ret = place(c, nodes)))
		return ret;
	if ((ret = dims_of(c->a->kind, c->a->alg, c->a->alg == ORTH_GRID ? c->a->grid : c->a->dims, c->P, &d)) ||
	    (ret = grid_init(&c->g, &d, c->P)))
		return ret;
	c->tag = msg_tag(c->a, &d);
	return 0;
}

int orth_sched_node(const struct orth_args *a, const struct a2a_layout *lay, uint32_t nodes, uint32_t n,
		    struct sched_node *out)
{
	struct ctx c = { .a = a, .lay = lay, .out = out, .n = n };
	int ret;

	if (!layout_ok(lay, nodes) || n >= nodes || (unsigned)a->alg >= ORTH_ALGS)
		return -EINVAL;
	c.k = lay->node_first[n + 1] - lay->node_first[n];
	ret = ctx_init(&c, nodes);
	if (!ret && c.k) {
		if (a->kind == ORTH_BCAST)
			ret = bcast(&c);
		else if (a->kind == ORTH_REDUCE || (a->kind == ORTH_ALLREDUCE && a->alg == ORTH_SINGLE))
			ret = tree_reduce(&c, a->kind == ORTH_ALLREDUCE);
		else if (a->kind == ORTH_ALLREDUCE)
			ret = xchg_reduce(&c);
		else
			ret = allgather(&c);
	}
	free(c.mem);
	return ret < 0 ? ret : out->err;
}

int orth_sched(const struct orth_args *a, const struct a2a_layout *lay, uint32_t nodes,
	       const uint64_t *const *displ_of, struct sched *s)
{
	const uint64_t **dl;
	int ret = 0;

	if (!layout_ok(lay, nodes))
		return -EINVAL;
	dl = calloc((size_t)lay->ranks + 1, sizeof(*dl));
	if (!dl)
		return -ENOMEM;
	for (uint32_t n = 0; n < nodes && !ret; n++) {
		struct orth_args an = *a;
		uint32_t k0 = lay->node_first[n];

		for (uint32_t i = k0; displ_of && i < lay->node_first[n + 1]; i++)
			dl[i - k0] = displ_of[lay->rank_at[i]];
		an.displ = displ_of ? dl : NULL;
		s->node[n].nslots = lay->node_first[n + 1] - k0;
		ret = orth_sched_node(&an, lay, nodes, n, &s->node[n]);
	}
	free(dl);
	return ret < 0 ? ret : sched_err(s);
}

/* ---- the cost model (orth.h) ---- */

/* Messages the root sends at each level, one after the other. */
static double tree_cost(const struct grid *g, double m, double alpha_us, double beta_us)
{
	double t = 0;

	for (uint32_t l = 0; l < g->levels; l++) {
		uint64_t d = g->span[l] / g->span[l + 1], used = (g->P + g->span[l + 1] - 1) / g->span[l + 1];

		t += (double)(min64(d, used) - 1) * (alpha_us + m * beta_us);
	}
	return t;
}

/* The busiest node of each level: a full slab's d - 1 messages, or the
 * last slab's stand-in, which serves every missing offset congruent to
 * its own in every other sub-slab. */
static double xchg_cost(const struct grid *g, int gather, double m, double alpha_us, double beta_us)
{
	double t = 0;

	for (uint32_t l = g->levels; l-- > 0;) {
		uint64_t M = g->span[l + 1], d = g->span[l] / M, base, len, nw, llen, busy;

		slab_of(g, g->P - 1, l, &base, &len);
		nw = (len + M - 1) / M;
		llen = len - (nw - 1) * M;
		busy = (nw - 1) * (1 + (M - 1) / llen);
		if (g->P >= g->span[l] && d - 1 > busy)
			busy = d - 1;
		t += (double)busy * (alpha_us + (gather ? (double)M * m : m) * beta_us);
	}
	return t;
}

double orth_predict_us(enum orth_kind kind, enum orth_alg alg, const struct orth_dims *dims, uint32_t nodes,
		       uint32_t ppn, uint64_t bytes, double alpha_us, double beta_ns_per_byte)
{
	struct orth_dims d;
	struct grid g;
	double beta_us = beta_ns_per_byte / 1000.0, m = (double)bytes * (kind == ORTH_ALLGATHER ? ppn : 1);

	if ((unsigned)kind >= ORTH_KINDS || dims_of(kind, alg, dims, nodes, &d) || grid_init(&g, &d, nodes))
		return DBL_MAX;
	if (nodes <= 1)
		return 0;
	if (kind == ORTH_ALLGATHER || (kind == ORTH_ALLREDUCE && alg != ORTH_SINGLE))
		return xchg_cost(&g, kind == ORTH_ALLGATHER, m, alpha_us, beta_us);
	return (kind == ORTH_ALLREDUCE ? 2 : 1) * tree_cost(&g, m, alpha_us, beta_us);
}

double orth_model_us(const void *model, uint32_t alg, double alpha_us, double beta_ns, double gamma_ns)
{
	const struct orth_model *m = model;

	(void)gamma_ns;
	if (alg == ORTH_HIER && !m->dims)
		return INFINITY;
	double t = orth_predict_us(m->kind, (enum orth_alg)alg, alg == ORTH_GRID ? m->grid : alg == ORTH_HIER ? m->dims
													   : NULL,
				   m->nodes, m->ppn, m->bytes, alpha_us, beta_ns);

	return t >= DBL_MAX ? INFINITY : t;     /* (what orth_predict_us says of a grid it cannot plan) */
}

void orth_layout(enum orth_kind kind, uint32_t P, uint32_t ppn, uint64_t bytes, double alpha_us, double beta_ns,
		 struct orth_dims *grid)
{
	uint32_t r0, c0;
	double best;

	sg_grid(P, &r0, &c0);
	*grid = (struct orth_dims){ .k = 2, .d = { r0, c0 } };
	best = orth_predict_us(kind, ORTH_GRID, grid, P, ppn, bytes, alpha_us, beta_ns);
	for (uint32_t r = 2; P >= 4 && r <= P / 2; r++) {
		uint32_t c = (P + r - 1) / r;
		struct orth_dims d = { .k = 2, .d = { r, c } };
		double t;

		if (c < 2 || (uint64_t)(r - 1) * c >= P)
			continue;       /* (a row empty: the same as fewer rows) */
		t = orth_predict_us(kind, ORTH_GRID, &d, P, ppn, bytes, alpha_us, beta_ns);
		if (t < best) {
			best = t;
			*grid = d;
		}
	}
}

enum orth_alg orth_choose(enum orth_kind kind, uint32_t nodes, uint32_t ppn, uint64_t bytes, const struct cost *c,
			  const struct orth_dims *dims, const struct orth_dims *grid)
{
	struct orth_model m = { kind, nodes, ppn, bytes, dims, grid };

	return (enum orth_alg)cost_choose(c, orth_model_us, &m, ORTH_ALGS);
}

void orth_hier_dims(uint32_t P, struct orth_dims *d)
{
	uint32_t f[ORTH_MAX_DIMS], k = 0;

	for (uint32_t p = 2; P > 1 && k < ORTH_MAX_DIMS;) {
		if (P % p == 0) {
			f[k++] = p;
			P /= p;
		} else {
			p = p * p > P ? P : p + 1;      /* (P left is prime: it next) */
		}
	}
	d->k = k ? k : 1;
	d->d[0] = 1;
	for (uint32_t i = 0; i < k; i++)
		d->d[i] = f[k - 1 - i];
}
