/* daemon/plan/rs.c - node-level reduce-scatter (short, long and hybrid
 * plans) and scan schedules, and their cost model.  See rs.h.
 *
 * Ownership: the steps and segments go into the caller's sched_node; a
 * build's working tables (a few words per rank) are allocated and freed
 * within it.
 */
#include "rs.h"
#include "names.h"
#include "sched.h"
#include "sg_sched.h"

#include "../../proto/coll.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define NONE UINT32_MAX

static const char *const alg_names[RS_ALGS] = { "short", "long", "hybrid" };

const char *rs_alg_name(enum rs_alg alg)
{
	return names_get(alg_names, RS_ALGS, alg);
}

int rs_alg_by_name(const char *name)
{
	return names_find(alg_names, RS_ALGS, name);
}

/* 0 if p is a plan: dimensions >= 2 multiplying to its nodes, each with
 * RS_SHORT or RS_LONG. */
static int plan_ok(const struct rs_plan *p)
{
	uint64_t prod = 1;

	if (!p->nodes || p->nodes > RS_MAX_NODES || p->ndims > RS_MAX_DIMS)
		return -EINVAL;
	for (uint32_t i = 0; i < p->ndims; i++) {
		if (p->dim[i] < 2 || (p->alg[i] != RS_SHORT && p->alg[i] != RS_LONG))
			return -EINVAL;
		prod *= p->dim[i];
		if (prod > p->nodes)
			return -EINVAL;
	}
	return prod == p->nodes ? 0 : -EINVAL;
}

int rs_plan_dims(struct rs_plan *p, uint32_t nodes, uint32_t ndims, const uint32_t *dim, const enum rs_alg *alg)
{
	struct rs_plan q = { .nodes = nodes, .ndims = ndims };

	if (ndims > RS_MAX_DIMS)
		return -EINVAL;
	for (uint32_t i = 0; i < ndims; i++) {
		if ((unsigned)alg[i] > RS_LONG)
			return -EINVAL;
		q.dim[i] = dim[i];
		q.alg[i] = (uint8_t)alg[i];
	}
	if (plan_ok(&q) < 0)
		return -EINVAL;
	*p = q;
	return 0;
}

int rs_plan_init(struct rs_plan *p, enum rs_alg alg, uint32_t nodes)
{
	return rs_plan_dims(p, nodes, nodes > 1, &nodes, &alg);
}

/* ---- the cost model (rs.h) ---- */

static double log2_ceil(uint32_t d)
{
	double L = 0;

	for (uint64_t x = 1; x < d; x *= 2)
		L++;
	return L;
}

double rs_dim_predict_us(enum rs_alg alg, uint32_t d, double bytes, double alpha_us, double beta_ns_per_byte,
			 double gamma_ns_per_byte)
{
	double b = bytes * beta_ns_per_byte / 1000.0, g = bytes * gamma_ns_per_byte / 1000.0;
	double L = log2_ceil(d), part = d > 1 ? (d - 1.0) / d : 0;

	if (d <= 1)
		return 0;
	if (alg == RS_LONG)
		return (d - 1.0) * alpha_us + part * (b + g);
	/* seed 002 §3: the tree's reduce-to-one, then its scatter */
	return L * (alpha_us + b + g) + L * alpha_us + part * b;
}

enum rs_alg rs_dim_choose(uint32_t d, double bytes, double alpha_us, double beta_ns_per_byte,
			  double gamma_ns_per_byte)
{
	double s = rs_dim_predict_us(RS_SHORT, d, bytes, alpha_us, beta_ns_per_byte, gamma_ns_per_byte);
	double l = rs_dim_predict_us(RS_LONG, d, bytes, alpha_us, beta_ns_per_byte, gamma_ns_per_byte);

	return l < s ? RS_LONG : RS_SHORT;
}

double rs_predict_us(const struct rs_plan *p, uint64_t bytes, double alpha_us, double beta_ns_per_byte,
		     double gamma_ns_per_byte)
{
	double x = (double)bytes, t = 0;

	/* each phase leaves 1/d_i of its region to the next (seed 002 §4) */
	for (uint32_t i = 0; i < p->ndims; i++) {
		t += rs_dim_predict_us(p->alg[i], p->dim[i], x, alpha_us, beta_ns_per_byte, gamma_ns_per_byte);
		x /= p->dim[i];
	}
	return t;
}

/* The chooser's state: the best plan so far and its time. */
struct pick {
	uint32_t nodes;
	uint64_t bytes;
	double alpha, beta, gamma;
	struct rs_plan best;
	double best_us;
};

/* Tries the factorization dim[0..ndims) with each phase's algorithm by
 * rs_dim_choose. */
static void pick_try(struct pick *k, uint32_t ndims, const uint32_t *dim)
{
	enum rs_alg alg[RS_MAX_DIMS];
	struct rs_plan p;
	double x = (double)k->bytes, t;

	for (uint32_t i = 0; i < ndims; i++) {
		alg[i] = rs_dim_choose(dim[i], x, k->alpha, k->beta, k->gamma);
		x /= dim[i];
	}
	if (rs_plan_dims(&p, k->nodes, ndims, dim, alg) < 0)
		return;
	t = rs_predict_us(&p, k->bytes, k->alpha, k->beta, k->gamma);
	if (!k->best.nodes || t < k->best_us) {
		k->best = p;
		k->best_us = t;
	}
}

/* Every ordered factorization of rem into left more factors >= 2 after
 * dim[0..at), the last one rem itself. */
static void pick_factors(struct pick *k, uint32_t *dim, uint32_t at, uint32_t left, uint32_t rem)
{
	if (left == 1) {
		dim[at] = rem;
		pick_try(k, at + 1, dim);
		return;
	}
	for (uint32_t f = 2; (uint64_t)f * 2 <= rem; f++)
		if (rem % f == 0) {
			dim[at] = f;
			pick_factors(k, dim, at + 1, left - 1, rem / f);
		}
}

int rs_model_init(struct rs_model *m, uint32_t nodes, uint64_t bytes, const struct cost *c)
{
	struct pick k = { nodes, bytes, c->alpha_us, c->beta_ns, c->gamma_ns, { 0 }, 0 };
	uint32_t dim[RS_MAX_DIMS];
	int ret;

	memset(m, 0, sizeof(*m));
	m->bytes = bytes;
	if (!nodes || nodes > RS_MAX_NODES)
		return -EINVAL;
	for (int a = RS_SHORT; a <= RS_LONG; a++) {
		if ((ret = rs_plan_init(&m->plan[a], (enum rs_alg)a, nodes)) < 0)
			return ret;
		m->have[a] = 1;
	}
	for (uint32_t nd = 2; nodes > 1 && nd <= RS_MAX_DIMS; nd++)
		pick_factors(&k, dim, 0, nd, nodes);
	m->plan[RS_HYBRID] = k.best;
	m->have[RS_HYBRID] = k.best.nodes != 0;
	return 0;
}

double rs_model_us(const void *model, uint32_t alg, double alpha_us, double beta_ns, double gamma_ns)
{
	const struct rs_model *m = model;

	if (alg >= RS_ALGS || !m->have[alg])
		return INFINITY;
	return rs_predict_us(&m->plan[alg], m->bytes, alpha_us, beta_ns, gamma_ns);
}

int rs_choose(int alg, uint32_t nodes, uint64_t bytes, const struct cost *c, struct rs_plan *p_out)
{
	struct rs_model m;
	int ret;

	if (alg == RS_SHORT || alg == RS_LONG)
		return rs_plan_init(p_out, alg, nodes);
	if ((alg != RS_HYBRID && alg != -1) || !nodes || nodes > RS_MAX_NODES)
		return -EINVAL;
	if (nodes == 1)
		return rs_plan_init(p_out, RS_SHORT, 1);
	if ((ret = rs_model_init(&m, nodes, bytes, c)) < 0)
		return ret;
	if (alg == RS_HYBRID && !m.have[RS_HYBRID]) {
		/* prime: no hybrid; the faster of the two (by the links) */
		struct cost ab = { c->alpha_us, c->beta_ns, c->gamma_ns, NULL };

		alg = (int)cost_choose(&ab, rs_model_us, &m, RS_HYBRID);
	} else if (alg == -1) {
		alg = (int)cost_choose(c, rs_model_us, &m, RS_ALGS);
	}
	*p_out = m.plan[alg];
	return 0;
}

/* ---- reduce-scatter schedules ---- */

/* One node's build. */
struct rsb {
	const struct rs_plan *p;
	const struct a2a_layout *lay;
	const struct rs_args *a;
	struct sched_node *out;
	uint32_t n;
	uint32_t acc;                   /* the scratch vector of the whole N elements */
	uint64_t es;                    /* bytes per element */
	uint64_t *displ;                /* [ranks + 1]: byte offsets of the rank's pieces */
	uint32_t *tmp;                  /* [ranks]: ranks of a region */
	uint32_t stride[RS_MAX_DIMS + 1];
};

static int cmp_u32(const void *x, const void *y)
{
	uint32_t a = *(const uint32_t *)x, b = *(const uint32_t *)y;

	return a < b ? -1 : a > b;
}

/* Adds to the last step the segments of acc holding the shares of the
 * nodes that agree with b->n in the coordinates below i and whose
 * coordinate i is in [lo, hi): the pieces of their ranks in rank order,
 * adjacent ones merged, empty ones left out. */
static void region(struct rsb *b, uint32_t i, uint32_t lo, uint32_t hi)
{
	uint32_t base = b->n % b->stride[i], k = 0, reps = b->p->nodes / b->stride[i + 1];
	const struct a2a_layout *lay = b->lay;

	for (uint32_t v = lo; v < hi; v++)
		for (uint32_t t = 0; t < reps; t++) {
			uint32_t m = base + v * b->stride[i] + t * b->stride[i + 1];

			for (uint32_t x = lay->node_first[m]; x < lay->node_first[m + 1]; x++)
				b->tmp[k++] = lay->rank_at[x];
		}
	qsort(b->tmp, k, sizeof(*b->tmp), cmp_u32);
	for (uint32_t j = 0; j < k;) {
		uint64_t off = b->displ[b->tmp[j]], end = b->displ[b->tmp[j] + 1];

		for (j++; j < k && b->displ[b->tmp[j]] == end; j++)
			end = b->displ[b->tmp[j] + 1];
		if (end > off)
			sched_ref(b->out, sched_seg(b->out, SCHED_BUF_SCRATCH, b->acc, off, end - off, 0));
	}
}

/* b->n's coordinate in dimension i, and the node at coordinate v there. */
static uint32_t coord(const struct rsb *b, uint32_t i)
{
	return b->n / b->stride[i] % b->p->dim[i];
}

static uint32_t member(const struct rsb *b, uint32_t i, uint32_t v)
{
	return b->n - coord(b, i) * b->stride[i] + v * b->stride[i];
}

/* A new step waiting for dep (NONE: nothing). */
static uint32_t step_after(struct rsb *b, enum sched_kind kind, uint32_t peer, uint32_t msg, uint32_t order,
			   uint32_t dep)
{
	uint32_t k = sched_step(b->out, kind, peer, msg, order);

	if (kind == SCHED_RECV_REDUCE || kind == SCHED_REDUCE)
		sched_step_reduce(b->out, b->a->type, b->a->op);
	if (dep != NONE)
		sched_dep(b->out, dep);
	return k;
}

/* Phase i by the bucket algorithm (rs.h, RS_LONG), after step e.  Returns
 * the step after which the node's block is final. */
static uint32_t phase_long(struct rsb *b, uint32_t i, uint32_t e)
{
	uint32_t d = b->p->dim[i], v = coord(b, i), last = e;
	uint32_t next = member(b, i, (v + 1) % d), prev = member(b, i, (v + d - 1) % d);

	for (uint32_t s = 0; s + 1 < d; s++) {
		uint32_t out = (v + 2 * d - s - 1) % d, in = (v + 2 * d - s - 2) % d;

		step_after(b, SCHED_SEND, next, RS_MSG_DATA(i, RS_LONG, s), s, last);
		region(b, i, out, out + 1);
		last = step_after(b, SCHED_RECV_REDUCE, prev, RS_MSG_DATA(i, RS_LONG, s), 0, e);
		region(b, i, in, in + 1);
	}
	return last;
}

/* The children of tree position v over d positions, farthest first, with
 * the end of each one's range.  Returns how many. */
static uint32_t tree_children(uint32_t d, uint32_t v, uint32_t *ch, uint32_t *ch_hi)
{
	uint32_t hi, k = 0;

	sg_tree_range(d, v, &hi);
	while (hi - v > 1) {
		uint32_t mid = v + (hi - v + 1) / 2;

		ch[k] = mid;
		ch_hi[k++] = hi;
		hi = mid;
	}
	return k;
}

/* Phase i by reduce-to-one and scatter over SG_TREE's tree (rs.h,
 * RS_SHORT), after step e.  Returns the step after which the node's block
 * is final. */
static uint32_t phase_short(struct rsb *b, uint32_t i, uint32_t e)
{
	uint32_t d = b->p->dim[i], v = coord(b, i), hi, parent = sg_tree_range(d, v, &hi);
	uint32_t ch[32], ch_hi[32], nch = tree_children(d, v, ch, ch_hi), last = e;

	/* the nearest child's partial first: a fixed order */
	for (uint32_t k = nch; k-- > 0;) {
		last = step_after(b, SCHED_RECV_REDUCE, member(b, i, ch[k]), RS_MSG_DATA(i, RS_SHORT, 0), 0, last);
		region(b, i, 0, d);
	}
	if (parent != NONE) {
		last = step_after(b, SCHED_SEND, member(b, i, parent), RS_MSG_DATA(i, RS_SHORT, 0), 0, last);
		region(b, i, 0, d);
		/* the scatter overwrites what that send took */
		last = step_after(b, SCHED_RECV, member(b, i, parent), RS_MSG_DATA(i, RS_SHORT, 1), 0, last);
		region(b, i, v, hi);
	}
	for (uint32_t k = 0; k < nch; k++) {
		step_after(b, SCHED_SEND, member(b, i, ch[k]), RS_MSG_DATA(i, RS_SHORT, 1), k, last);
		region(b, i, ch[k], ch_hi[k]);
	}
	return last;
}

/* The node's ranks' vectors combined into acc in slot order.  Returns the
 * last step. */
static uint32_t combine_local(struct rsb *b, uint64_t bytes)
{
	uint32_t nk = b->lay->node_first[b->n + 1] - b->lay->node_first[b->n], last;

	last = step_after(b, SCHED_COPY, 0, 0, 0, NONE);
	sched_ref(b->out, sched_seg(b->out, SCHED_BUF_SCRATCH, b->acc, 0, bytes, 0));
	sched_ref(b->out, sched_seg(b->out, SCHED_BUF_SEND, 0, 0, bytes, 0));
	for (uint32_t k = 1; k < nk; k++) {
		last = step_after(b, SCHED_REDUCE, 0, 0, 0, last);
		sched_ref(b->out, sched_seg(b->out, SCHED_BUF_SCRATCH, b->acc, 0, bytes, 0));
		sched_ref(b->out, sched_seg(b->out, SCHED_BUF_SEND, k, 0, bytes, 0));
	}
	return last;
}

/* The words of the disagreement rule (rs.h): one per phase to node n + 1,
 * one per phase from node n - 1. */
static void words(struct rsb *b)
{
	uint32_t P = b->p->nodes;

	for (uint32_t i = 0; i < b->p->ndims; i++) {
		uint32_t msg = RS_MSG_WORD(i, b->p->alg[i], b->p->dim[i]);

		step_after(b, SCHED_SEND, (b->n + 1) % P, msg, RS_ORDER_WORD, NONE);
		step_after(b, SCHED_RECV, (b->n + P - 1) % P, msg, 0, NONE);
	}
}

/* Each local rank's piece of acc to its receive buffer, after step e. */
static void hand_out(struct rsb *b, uint32_t e)
{
	const struct a2a_layout *lay = b->lay;
	uint32_t k0 = lay->node_first[b->n];

	for (uint32_t k = 0; k < lay->node_first[b->n + 1] - k0; k++) {
		uint32_t r = lay->rank_at[k0 + k];
		uint64_t len = b->displ[r + 1] - b->displ[r];

		if (!len)
			continue;
		step_after(b, SCHED_COPY, 0, 0, 0, e);
		sched_ref(b->out, sched_seg(b->out, SCHED_BUF_RECV, k, 0, len, 0));
		sched_ref(b->out, sched_seg(b->out, SCHED_BUF_SCRATCH, b->acc, b->displ[r], len, 0));
	}
}

/* 0 if lay is a layout over nodes nodes, every rank on one node once, and
 * (ranked) every node with ranks. */
static int layout_ok(const struct a2a_layout *lay, uint32_t nodes, int ranked, uint32_t *seen)
{
	if (lay->node_first[0] != 0 || lay->node_first[nodes] != lay->ranks)
		return -EINVAL;
	memset(seen, 0, (size_t)lay->ranks * sizeof(*seen));
	for (uint32_t n = 0; n < nodes; n++) {
		uint32_t lo = lay->node_first[n], hi = lay->node_first[n + 1];

		if (hi < lo || (ranked && hi == lo))
			return -EINVAL;
	}
	for (uint32_t x = 0; x < lay->ranks; x++)
		if (lay->rank_at[x] >= lay->ranks || seen[lay->rank_at[x]]++)
			return -EINVAL;
	return 0;
}

/* The byte offsets of every rank's piece; 0 or -EINVAL (too large). */
static int rs_displ(struct rsb *b)
{
	uint64_t off = 0;

	for (uint32_t r = 0; r < b->lay->ranks; r++) {
		b->displ[r] = off;
		if (b->a->counts[r] > (UINT64_MAX / 2 - off) / b->es)
			return -EINVAL;
		off += b->a->counts[r] * b->es;
	}
	b->displ[b->lay->ranks] = off;
	return 0;
}

static int rs_build(struct rsb *b)
{
	uint32_t e;
	int ret = rs_displ(b);

	if (ret < 0)
		return ret;
	b->stride[0] = 1;
	for (uint32_t i = 0; i < b->p->ndims; i++)
		b->stride[i + 1] = b->stride[i] * b->p->dim[i];
	b->acc = sched_scratch(b->out, b->displ[b->lay->ranks]);
	words(b);
	e = combine_local(b, b->displ[b->lay->ranks]);
	for (uint32_t i = 0; i < b->p->ndims; i++)
		e = b->p->alg[i] == RS_LONG ? phase_long(b, i, e) : phase_short(b, i, e);
	hand_out(b, e);
	return b->out->err;
}

int rs_sched_node(const struct rs_plan *p, const struct a2a_layout *lay, uint32_t n, const struct rs_args *a,
		  struct sched_node *out)
{
	struct rsb b = { .p = p, .lay = lay, .a = a, .out = out, .n = n, .es = coll_type_size(a->type) };
	int ret;

	if (!coll_op_ok(a->type, a->op) || plan_ok(p) < 0 || n >= p->nodes)
		return -EINVAL;
	b.displ = calloc((size_t)lay->ranks + 1, sizeof(*b.displ));
	b.tmp = calloc((size_t)lay->ranks + 1, sizeof(*b.tmp));
	ret = b.displ && b.tmp ? layout_ok(lay, p->nodes, 1, b.tmp) : -ENOMEM;
	if (!ret)
		ret = rs_build(&b);
	free(b.displ);
	free(b.tmp);
	return ret;
}

int rs_sched(const struct rs_plan *p, const struct a2a_layout *lay, const struct rs_args *a, struct sched *s)
{
	int ret = 0;

	for (uint32_t n = 0; n < p->nodes && !ret; n++) {
		s->node[n].nslots = lay->node_first[n + 1] - lay->node_first[n];
		ret = rs_sched_node(p, lay, n, a, &s->node[n]);
	}
	return ret < 0 ? ret : sched_err(s);
}

/* ---- scan and exscan schedules ---- */

double rs_scan_predict_us(uint32_t runs, uint32_t chunks, uint64_t bytes, double alpha_us,
			  double beta_ns_per_byte, double gamma_ns_per_byte)
{
	double x = chunks ? (double)bytes / chunks : 0;

	if (runs < 2 || !chunks)
		return 0;
	/* the pipeline: the first chunk's runs - 1 hops, then one hop a chunk */
	return (runs - 2.0 + chunks) * (alpha_us + x * (beta_ns_per_byte + gamma_ns_per_byte) / 1000.0);
}

double rs_scan_model_us(const void *model, uint32_t alg, double alpha_us, double beta_ns, double gamma_ns)
{
	const struct rs_scan_model *m = model;

	(void)alg;
	return rs_scan_predict_us(m->runs, m->chunks, m->bytes, alpha_us, beta_ns, gamma_ns);
}

uint32_t rs_scan_chunks(uint32_t runs, uint64_t count, uint64_t elem_bytes, double alpha_us,
			double beta_ns_per_byte, double gamma_ns_per_byte)
{
	uint32_t best = 1, max = count < RS_SCAN_MAX_CHUNKS ? (uint32_t)count : RS_SCAN_MAX_CHUNKS;
	uint64_t bytes = count * elem_bytes;
	double best_us = rs_scan_predict_us(runs, 1, bytes, alpha_us, beta_ns_per_byte, gamma_ns_per_byte);

	for (uint32_t k = 2; k <= max; k++) {
		double t = rs_scan_predict_us(runs, k, bytes, alpha_us, beta_ns_per_byte, gamma_ns_per_byte);

		if (t < best_us) {
			best = k;
			best_us = t;
		}
	}
	return best;
}

/* Where every rank is: its node and slot, from a checked layout. */
static void rank_places(const struct a2a_layout *lay, uint32_t nodes, uint32_t *node_of, uint32_t *slot_of)
{
	for (uint32_t m = 0; m < nodes; m++)
		for (uint32_t x = lay->node_first[m]; x < lay->node_first[m + 1]; x++) {
			node_of[lay->rank_at[x]] = m;
			slot_of[lay->rank_at[x]] = x - lay->node_first[m];
		}
}

uint32_t rs_scan_runs(const struct a2a_layout *lay, uint32_t nodes)
{
	uint32_t *node_of = calloc((size_t)lay->ranks + 1, sizeof(*node_of)), runs = 0;
	uint32_t *slot_of = calloc((size_t)lay->ranks + 1, sizeof(*slot_of));

	if (node_of && slot_of && layout_ok(lay, nodes, 0, slot_of) == 0) {
		rank_places(lay, nodes, node_of, slot_of);
		for (uint32_t r = 0; r < lay->ranks; r++)
			runs += r == 0 || node_of[r] != node_of[r - 1];
	}
	free(node_of);
	free(slot_of);
	return runs;
}

/* One node's scan build. */
struct scanb {
	const struct rs_scan_args *a;
	const struct a2a_layout *lay;
	struct sched_node *out;
	uint32_t *node_of, *slot_of;    /* [ranks] */
	uint32_t *last_send, *last_read;        /* [chunks]: the node's run before, on pref */
	uint32_t pref;                  /* scratch: the prefix, count elements */
	uint64_t es;
};

/* A segment of chunk c of slot's buffer buf (or of pref: buf SCRATCH). */
static uint32_t chunk_seg(struct scanb *b, enum sched_buf buf, uint32_t slot, uint32_t c)
{
	uint64_t lo = b->a->count * c / b->a->chunks, hi = b->a->count * (c + 1) / b->a->chunks;

	if (buf == SCHED_BUF_SCRATCH)
		slot = b->pref;
	return sched_seg(b->out, buf, slot, lo * b->es, (hi - lo) * b->es, 0);
}

/* A COPY or REDUCE of chunk c, dst = dst op src, after step dep. */
static uint32_t chunk_local(struct scanb *b, enum sched_kind kind, enum sched_buf dst, enum sched_buf src,
			    uint32_t slot, uint32_t c, uint32_t dep)
{
	uint32_t k = sched_step(b->out, kind, 0, 0, 0);

	if (kind == SCHED_REDUCE)
		sched_step_reduce(b->out, b->a->type, b->a->op);
	if (dep != NONE)
		sched_dep(b->out, dep);
	sched_ref(b->out, chunk_seg(b, dst, slot, c));
	sched_ref(b->out, chunk_seg(b, src, slot, c));
	return k;
}

/* Chunk c of run j, ranks [r0, r1) on this node: the prefix in from the
 * run before (unless j is 0), each rank folded in left to right with its
 * result copied out, the prefix on to the next run's node (if any). */
static void scan_run_chunk(struct scanb *b, uint32_t j, uint32_t r0, uint32_t r1, uint32_t c)
{
	uint32_t last = NONE, ranks = b->lay->ranks;

	if (j > 0) {
		last = sched_step(b->out, SCHED_RECV, b->node_of[r0 - 1], RS_MSG_SCAN(c, j), 0);
		/* pref is overwritten: after this node's run before took it */
		if (b->last_send[c] != NONE)
			sched_dep(b->out, b->last_send[c]);
		if (b->last_read[c] != NONE)
			sched_dep(b->out, b->last_read[c]);
		sched_ref(b->out, chunk_seg(b, SCHED_BUF_SCRATCH, 0, c));
	}
	for (uint32_t r = r0; r < r1; r++) {
		uint32_t s = b->slot_of[r];

		if (b->a->exclusive && r > 0)
			last = chunk_local(b, SCHED_COPY, SCHED_BUF_RECV, SCHED_BUF_SCRATCH, s, c, last);
		if (!b->a->exclusive || r + 1 < ranks)
			last = chunk_local(b, r ? SCHED_REDUCE : SCHED_COPY, SCHED_BUF_SCRATCH, SCHED_BUF_SEND, s, c,
					   last);
		if (!b->a->exclusive)
			last = chunk_local(b, SCHED_COPY, SCHED_BUF_RECV, SCHED_BUF_SCRATCH, s, c, last);
	}
	b->last_read[c] = last;
	b->last_send[c] = NONE;
	if (r1 < ranks) {
		b->last_send[c] = sched_step(b->out, SCHED_SEND, b->node_of[r1], RS_MSG_SCAN(c, j + 1), c);
		sched_dep(b->out, last);
		sched_ref(b->out, chunk_seg(b, SCHED_BUF_SCRATCH, 0, c));
	}
}

/* The runs of node n, in rank order, chunk by chunk. */
static int scan_build(struct scanb *b, uint32_t n)
{
	uint32_t ranks = b->lay->ranks, j = 0;

	b->pref = sched_scratch(b->out, b->a->count * b->es);
	for (uint32_t c = 0; c < b->a->chunks; c++)
		b->last_send[c] = b->last_read[c] = NONE;
	for (uint32_t r0 = 0, r1; r0 < ranks; r0 = r1, j++) {
		for (r1 = r0 + 1; r1 < ranks && b->node_of[r1] == b->node_of[r0]; r1++)
			;
		if (j >= (1u << 20))
			return -EINVAL;
		if (b->node_of[r0] != n)
			continue;
		for (uint32_t c = 0; c < b->a->chunks; c++)
			scan_run_chunk(b, j, r0, r1, c);
	}
	return b->out->err;
}

int rs_scan_sched_node(const struct rs_scan_args *a, const struct a2a_layout *lay, uint32_t nodes, uint32_t n,
		       struct sched_node *out)
{
	struct scanb b = { .a = a, .lay = lay, .out = out, .es = coll_type_size(a->type) };
	size_t r = (size_t)lay->ranks + 1;
	int ret;

	if (!coll_op_ok(a->type, a->op) || !a->chunks || a->chunks > RS_SCAN_MAX_CHUNKS || n >= nodes ||
	    a->count > UINT64_MAX / 16 / b.es)
		return -EINVAL;
	b.node_of = calloc(2 * r + 2 * (size_t)a->chunks, sizeof(uint32_t));
	if (!b.node_of)
		return -ENOMEM;
	b.slot_of = b.node_of + r;
	b.last_send = b.slot_of + r;
	b.last_read = b.last_send + a->chunks;
	ret = layout_ok(lay, nodes, 0, b.slot_of);
	if (!ret) {
		rank_places(lay, nodes, b.node_of, b.slot_of);
		ret = scan_build(&b, n);
	}
	free(b.node_of);
	return ret;
}

int rs_scan_sched(const struct rs_scan_args *a, const struct a2a_layout *lay, uint32_t nodes, struct sched *s)
{
	int ret = 0;

	for (uint32_t n = 0; n < nodes && !ret; n++) {
		s->node[n].nslots = lay->node_first[n + 1] - lay->node_first[n];
		ret = rs_scan_sched_node(a, lay, nodes, n, &s->node[n]);
	}
	return ret < 0 ? ret : sched_err(s);
}
