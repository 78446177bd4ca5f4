/* daemon/plan/a2a_sched.c - the all-to-all's schedules, built from the
 * routes of a2a.c (see a2a.h, "schedules").
 *
 * Ownership: the working tables are allocated and freed here; the steps and
 * segments go into the caller's sched_node.
 */
#include "a2a.h"

#include "sched.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* A node pair's block crossing node n in one phase: going out to peer
 * (sent by n), or coming in from peer. */
struct hop {
	uint32_t ph, peer, s, d;
	uint32_t seg, step;     /* in: its first segment and the RECV step, once built */
};

static int hop_cmp(const void *a, const void *b)
{
	const struct hop *x = a, *y = b;

	if (x->ph != y->ph)
		return x->ph < y->ph ? -1 : 1;
	if (x->peer != y->peer)
		return x->peer < y->peer ? -1 : 1;
	if (x->s != y->s)
		return x->s < y->s ? -1 : 1;
	return x->d < y->d ? -1 : x->d > y->d;
}

/* Sorted by pair, to find where n received a block it sends on. */
static int hop_pair_cmp(const void *a, const void *b)
{
	const struct hop *const *x = a, *const *y = b;

	if ((*x)->s != (*y)->s)
		return (*x)->s < (*y)->s ? -1 : 1;
	return (*x)->d < (*y)->d ? -1 : (*x)->d > (*y)->d;
}

struct hops {
	struct hop *v;
	size_t n, cap;
};

static int hops_add(struct hops *h, uint32_t ph, uint32_t peer, uint32_t s, uint32_t d)
{
	if (h->n == h->cap) {
		size_t ncap = h->cap ? h->cap * 2 : 64;
		struct hop *v = reallocarray(h->v, ncap, sizeof(*v));

		if (!v)
			return -ENOMEM;
		h->v = v;
		h->cap = ncap;
	}
	h->v[h->n++] = (struct hop){ ph, peer, s, d, 0, 0 };
	return 0;
}

/* Every hop of a block through node n: the path of (s, d) walked from s. */
static int collect(const struct a2a_plan *p, uint32_t n, struct hops *out, struct hops *in)
{
	for (uint32_t s = 0; s < p->nodes; s++)
		for (uint32_t d = 0; d < p->nodes; d++) {
			uint32_t h = s;

			if (s == d)
				continue;
			for (uint32_t ph = 0; ph < p->phases; ph++) {
				uint32_t t = a2a_next(p, h, d, ph);

				if (t != h && h == n && hops_add(out, ph, t, s, d))
					return -ENOMEM;
				if (t != h && t == n && hops_add(in, ph, h, s, d))
					return -ENOMEM;
				h = t;
			}
		}
	if (out->n)
		qsort(out->v, out->n, sizeof(*out->v), hop_cmp);
	if (in->n)
		qsort(in->v, in->n, sizeof(*in->v), hop_cmp);
	return 0;
}

struct ctx {
	const struct a2a_plan *p;
	const struct a2a_layout *lay;
	uint32_t n;                     /* the node built */
	const struct a2a_rank_args *args;
	struct sched_node *out;
	struct hop **by_pair;           /* the in hops, sorted by pair */
	size_t nin;
};

static uint32_t nranks(const struct ctx *c, uint32_t node)
{
	return c->lay->node_first[node + 1] - c->lay->node_first[node];
}

static uint32_t rank_at(const struct ctx *c, uint32_t node, uint32_t slot)
{
	return c->lay->rank_at[c->lay->node_first[node] + slot];
}

/* The segment of n's slot a's send buffer for rank b. */
static uint32_t send_seg(struct ctx *c, uint32_t a, uint32_t b)
{
	return sched_seg(c->out, SCHED_BUF_SEND, a, c->args[a].sdispl[b], c->args[a].scount[b], 0);
}

/* The segment of n's slot b's receive buffer for rank a. */
static uint32_t recv_seg(struct ctx *c, uint32_t b, uint32_t a)
{
	return sched_seg(c->out, SCHED_BUF_RECV, b, c->args[b].rdispl[a], c->args[b].rcount[a], 0);
}

static struct hop *received(struct ctx *c, uint32_t s, uint32_t d)
{
	struct hop key = { .s = s, .d = d }, *kp = &key, **f;

	f = bsearch(&kp, c->by_pair, c->nin, sizeof(*c->by_pair), hop_pair_cmp);
	return f ? *f : NULL;
}

/* The SEND of out hops [i, j) (one phase, one peer). */
static void build_send(struct ctx *c, const struct hop *h, size_t cnt, uint32_t *stamp)
{
	uint32_t n = c->n, step;

	step = sched_step(c->out, SCHED_SEND, h->peer, h->ph, h->ph);
	/* Its segments, and its dependencies: the RECVs that brought blocks
	 * passing through (each once).  References and dependencies are
	 * separate arrays, each contiguous for the last step. */
	for (size_t k = 0; k < cnt; k++) {
		uint32_t s = h[k].s, d = h[k].d;

		if (s == n) {
			for (uint32_t a = 0; a < nranks(c, n); a++)
				for (uint32_t b = 0; b < nranks(c, d); b++)
					sched_ref(c->out, send_seg(c, a, rank_at(c, d, b)));
		} else {
			struct hop *r = received(c, s, d);
			uint32_t parts = nranks(c, s) * nranks(c, d);

			if (!r || r->ph >= h[k].ph) {
				c->out->err = -EINVAL;  /* a route through n that never came in: a planner bug */
				return;
			}
			for (uint32_t q = 0; q < parts; q++)
				sched_ref(c->out, r->seg + q);
			if (stamp[r->step] != step + 1) {
				stamp[r->step] = step + 1;
				sched_dep(c->out, r->step);
			}
		}
	}
}

/* The RECV of in hops [i, j). */
static void build_recv(struct ctx *c, struct hop *h, size_t cnt)
{
	uint32_t n = c->n, step;

	step = sched_step(c->out, SCHED_RECV, h->peer, h->ph, h->ph);
	for (size_t k = 0; k < cnt; k++) {
		uint32_t s = h[k].s, d = h[k].d;

		h[k].step = step;
		if (d == n) {
			for (uint32_t a = 0; a < nranks(c, s); a++)
				for (uint32_t b = 0; b < nranks(c, n); b++)
					sched_ref(c->out, recv_seg(c, b, rank_at(c, s, a)));
			continue;
		}
		for (uint32_t q = 0; q < nranks(c, s) * nranks(c, d); q++) {
			uint32_t seg = sched_seg(c->out, SCHED_BUF_SCRATCH, sched_scratch(c->out, 0), 0, 0,
						 SCHED_SEG_SIZED);

			if (q == 0)
				h[k].seg = seg;
			sched_ref(c->out, seg);
		}
	}
}

int a2a_sched_node(const struct a2a_plan *p, const struct a2a_layout *lay, uint32_t n,
		   const struct a2a_rank_args *args, struct sched_node *out)
{
	struct hops ho = { 0 }, hi = { 0 };
	struct ctx c = { .p = p, .lay = lay, .n = n, .args = args, .out = out };
	uint32_t *stamp = NULL;
	size_t nstamp = 0;
	int ret;

	if (n >= p->nodes || lay->node_first[0] != 0 || lay->node_first[p->nodes] != lay->ranks)
		return -EINVAL;
	for (uint32_t i = 0; i < p->nodes; i++)
		if (lay->node_first[i + 1] < lay->node_first[i] || lay->node_first[i + 1] > lay->ranks)
			return -EINVAL;
	for (uint32_t r = 0; r < lay->ranks; r++)
		if (lay->rank_at[r] >= lay->ranks)
			return -EINVAL;
	out->nslots = nranks(&c, n);
	ret = collect(p, n, &ho, &hi);
	if (ret)
		goto out;
	c.by_pair = malloc((hi.n + 1) * sizeof(*c.by_pair));
	if (!c.by_pair) {
		ret = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < hi.n; i++)
		c.by_pair[i] = &hi.v[i];
	c.nin = hi.n;
	qsort(c.by_pair, c.nin, sizeof(*c.by_pair), hop_pair_cmp);

	/* The blocks between n's own ranks: copies, which nothing waits for. */
	for (uint32_t a = 0; a < out->nslots; a++)
		for (uint32_t b = 0; b < out->nslots; b++) {
			uint32_t ra = rank_at(&c, n, a), rb = rank_at(&c, n, b);

			if (args[a].scount[rb] != args[b].rcount[ra]) {
				ret = -EINVAL;
				goto out;
			}
			if (!args[a].scount[rb])
				continue;
			sched_step(out, SCHED_COPY, 0, 0, 0);
			sched_ref(out, recv_seg(&c, b, ra));
			sched_ref(out, send_seg(&c, a, rb));
		}

	/* Phase by phase: its sends (which wait only for earlier phases'
	 * receives), then its receives. */
	size_t io = 0, ii = 0;
	for (uint32_t ph = 0; ph < p->phases && !out->err; ph++) {
		while (io < ho.n && ho.v[io].ph == ph) {
			size_t j = io;

			while (j < ho.n && ho.v[j].ph == ph && ho.v[j].peer == ho.v[io].peer)
				j++;
			/* stamp[step]: the last send that listed it (+1) */
			if (out->nsteps + 1 > nstamp) {
				size_t ncap = (out->nsteps + 1) * 2;
				uint32_t *ns = reallocarray(stamp, ncap, sizeof(*stamp));

				if (!ns) {
					out->err = -ENOMEM;
					break;
				}
				memset(ns + nstamp, 0, (ncap - nstamp) * sizeof(*ns));
				stamp = ns;
				nstamp = ncap;
			}
			build_send(&c, &ho.v[io], j - io, stamp);
			io = j;
		}
		while (ii < hi.n && hi.v[ii].ph == ph) {
			size_t j = ii;

			while (j < hi.n && hi.v[j].ph == ph && hi.v[j].peer == hi.v[ii].peer)
				j++;
			build_recv(&c, &hi.v[ii], j - ii);
			ii = j;
		}
	}
	ret = out->err;
out:
	free(ho.v);
	free(hi.v);
	free(c.by_pair);
	free(stamp);
	return ret;
}

int a2a_sched(const struct a2a_plan *p, const struct a2a_layout *lay, const struct a2a_rank_args *args,
	      struct sched *s)
{
	struct a2a_rank_args *mine = malloc(((size_t)lay->ranks + 1) * sizeof(*mine));
	int ret = 0;

	if (!mine)
		return -ENOMEM;
	if (s->nodes != p->nodes || lay->node_first[p->nodes] != lay->ranks)
		ret = -EINVAL;
	for (uint32_t n = 0; n < p->nodes && !ret; n++) {
		uint32_t first = lay->node_first[n], cnt = lay->node_first[n + 1] - first;

		for (uint32_t slot = 0; slot < cnt && !ret; slot++) {
			if (first + slot >= lay->ranks || lay->rank_at[first + slot] >= lay->ranks)
				ret = -EINVAL;
			else
				mine[slot] = args[lay->rank_at[first + slot]];
		}
		if (!ret)
			ret = a2a_sched_node(p, lay, n, mine, &s->node[n]);
	}
	free(mine);
	return ret;
}
