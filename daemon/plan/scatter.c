/* daemon/plan/scatter.c - see scatter.h.
 *
 * Both algorithms plan from node 0 (the torus as the root sees it, "the
 * frame"); plan_translate moves the result to the real root.
 *
 * Ownership: the frame's and the searches' tables are allocated and freed
 * here; the plan's arrays go to the caller's scatter_plan.
 */
#include "scatter.h"

#include "sched.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* The torus from node 0.  Every node has the same links, numbered alike:
 * per dimension of side >= 2 its + link, then (side >= 3) its - link. */
struct frame {
	const struct route *r;
	uint32_t n, nlinks, ecc;
	uint32_t link_dim[SCATTER_MAX_REGIONS];
	int link_sign[SCATTER_MAX_REGIONS];     /* +1, -1 */
	uint32_t *coord;                        /* [n * ndims] */
	uint32_t *dist;                         /* [n] */
	uint32_t *nb;                           /* [n * nlinks]: the neighbour on each link */
	uint32_t *by_dist;                      /* [n]: nodes by distance, then id */
};

static void frame_free(struct frame *f)
{
	free(f->coord);
	free(f->dist);
	free(f->nb);
	free(f->by_dist);
}

static int frame_init(struct frame *f, const struct route *r)
{
	uint32_t nd = r->ndims, n = r->nnodes;
	uint32_t *ndist;

	memset(f, 0, sizeof(*f));
	f->r = r;
	f->n = n;
	for (uint32_t d = 0; d < nd; d++) {
		if (r->dims[d] >= 2) {
			f->link_dim[f->nlinks] = d;
			f->link_sign[f->nlinks++] = 1;
		}
		if (r->dims[d] >= 3) {
			f->link_dim[f->nlinks] = d;
			f->link_sign[f->nlinks++] = -1;
		}
		f->ecc += r->dims[d] / 2;
	}
	f->coord = malloc((size_t)n * nd * sizeof(*f->coord));
	f->dist = malloc((size_t)n * sizeof(*f->dist));
	f->nb = malloc(((size_t)n * f->nlinks + 1) * sizeof(*f->nb));
	f->by_dist = malloc((size_t)n * sizeof(*f->by_dist));
	ndist = calloc(f->ecc + 2, sizeof(*ndist));
	if (!f->coord || !f->dist || !f->nb || !f->by_dist || !ndist) {
		free(ndist);
		frame_free(f);
		return -ENOMEM;
	}
	for (uint32_t v = 0; v < n; v++) {
		uint32_t *c = &f->coord[(size_t)v * nd];

		route_coords(r, v, c);
		f->dist[v] = 0;
		for (uint32_t d = 0; d < nd; d++)
			f->dist[v] += c[d] < r->dims[d] - c[d] ? c[d] : r->dims[d] - c[d];
		for (uint32_t k = 0; k < f->nlinks; k++) {
			uint32_t d = f->link_dim[k], side = r->dims[d];
			uint32_t to = f->link_sign[k] > 0 ? (c[d] + 1) % side : (c[d] + side - 1) % side;

			f->nb[(size_t)v * f->nlinks + k] = v - c[d] * r->stride[d] + to * r->stride[d];
		}
		ndist[f->dist[v] + 1]++;
	}
	for (uint32_t t = 1; t <= f->ecc + 1; t++)
		ndist[t] += ndist[t - 1];
	for (uint32_t v = 0; v < n; v++)
		f->by_dist[ndist[f->dist[v]]++] = v;
	free(ndist);
	return 0;
}

static uint32_t nb(const struct frame *f, uint32_t v, uint32_t k)
{
	return f->nb[(size_t)v * f->nlinks + k];
}

/* A small deterministic generator (xorshift64*): every node that plans the
 * same torus gets the same plan. */
static uint32_t rnd(uint64_t *s)
{
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return (uint32_t)((*s * 0x2545f4914f6cdd1dull) >> 32);
}

/* ---- OPT: the partition (§3.1) ---- */

struct search {
	const struct frame *f;
	uint32_t bound, L, e;
	uint32_t *label;                /* [n]: region of each node (SCATTER_NONE: root) */
	uint32_t *cnt;                  /* [L * (e + 1)]: nodes of region r at distance t */
	uint32_t *cost;                 /* [L]: how late region r is (0: on time) */
	uint32_t *stamp, now;           /* the nodes of the move being tried */
	uint32_t *moved, nmoved;
	uint64_t rng;
};

/* How late region r is: the sum over t of how many of its nodes at
 * distance >= t exceed bound - t + 1 (0 iff it finishes by the bound). */
static uint32_t region_cost(const struct search *s, uint32_t r)
{
	const uint32_t *c = &s->cnt[(size_t)r * (s->e + 1)];
	uint32_t sum = 0, late = 0;

	for (uint32_t t = s->e; t >= 1; t--) {
		sum += c[t];
		if (sum + t - 1 > s->bound)
			late += sum + t - 1 - s->bound;
	}
	return late;
}

/* 1 if node w (of region r) keeps a closer neighbour in r outside the move. */
static int supported(const struct search *s, uint32_t w, uint32_t r)
{
	const struct frame *f = s->f;

	for (uint32_t k = 0; k < f->nlinks; k++) {
		uint32_t y = nb(f, w, k);

		if (f->dist[y] + 1 == f->dist[w] && s->label[y] == r && s->stamp[y] != s->now)
			return 1;
	}
	return 0;
}

/* The nodes that leave region r with v: v, and outward every node of r
 * whose closer neighbours in r all leave.  They can all go where v goes (each
 * follows one that leaves), and every node that stays keeps a way in. */
static void collect_move(struct search *s, uint32_t v, uint32_t r)
{
	const struct frame *f = s->f;
	uint32_t done = 0;

	s->now++;
	s->nmoved = 0;
	s->stamp[v] = s->now;
	s->moved[s->nmoved++] = v;
	/* moved[] grows layer by layer: a layer is complete before the next
	 * one's nodes are looked at */
	while (done < s->nmoved) {
		uint32_t end = s->nmoved;

		for (; done < end; done++) {
			uint32_t x = s->moved[done];

			for (uint32_t k = 0; k < f->nlinks; k++) {
				uint32_t w = nb(f, x, k);

				if (f->dist[w] != f->dist[x] + 1 || s->label[w] != r || s->stamp[w] == s->now)
					continue;
				if (!supported(s, w, r)) {
					s->stamp[w] = s->now;
					s->moved[s->nmoved++] = w;
				}
			}
		}
	}
}

static void shift_counts(struct search *s, uint32_t from, uint32_t to)
{
	for (uint32_t i = 0; i < s->nmoved; i++) {
		uint32_t d = s->f->dist[s->moved[i]];

		s->cnt[(size_t)from * (s->e + 1) + d]--;
		s->cnt[(size_t)to * (s->e + 1) + d]++;
	}
}

/* A node of a late region, mostly; any node at distance >= 2 otherwise. */
static uint32_t pick(struct search *s, uint32_t first_far)
{
	const struct frame *f = s->f;
	uint32_t span = f->n - first_far, v = 0;

	for (int tries = 0; tries < 8; tries++) {
		v = f->by_dist[first_far + rnd(&s->rng) % span];
		if (s->cost[s->label[v]])
			break;
	}
	return v;
}

/* Moves nodes between regions until none is late or the budget is spent.
 * A move takes node v (distance >= 2) to the region of another of its
 * closer neighbours, with collect_move's nodes; it is kept if it makes the
 * sum of lateness no larger, and now and then if it makes it larger by a
 * little (to leave a local minimum). */
static void search_run(struct search *s, uint64_t budget, uint32_t *best, uint32_t *best_cost_p)
{
	const struct frame *f = s->f;
	uint32_t first_far = 0, total = 0, best_cost;

	while (first_far < f->n && f->dist[f->by_dist[first_far]] < 2)
		first_far++;
	for (uint32_t r = 0; r < s->L; r++) {
		s->cost[r] = region_cost(s, r);
		total += s->cost[r];
	}
	best_cost = total;
	memcpy(best, s->label, f->n * sizeof(*best));
	for (uint64_t it = 0; it < budget && total && first_far < f->n; it++) {
		uint32_t v = pick(s, first_far), r = s->label[v], to, k, old, now;
		uint32_t cand[SCATTER_MAX_REGIONS], ncand = 0;

		for (k = 0; k < f->nlinks; k++) {
			uint32_t u = nb(f, v, k);

			if (f->dist[u] + 1 == f->dist[v] && s->label[u] != r)
				cand[ncand++] = s->label[u];
		}
		if (!ncand)
			continue;
		to = cand[rnd(&s->rng) % ncand];
		collect_move(s, v, r);
		shift_counts(s, r, to);
		old = s->cost[r] + s->cost[to];
		now = region_cost(s, r) + region_cost(s, to);
		if (now > old && (now - old > 2 || rnd(&s->rng) % (64u << (2 * (now - old))) != 0)) {
			shift_counts(s, to, r);
			continue;
		}
		for (uint32_t i = 0; i < s->nmoved; i++)
			s->label[s->moved[i]] = to;
		total = total - old + now;
		s->cost[r] = region_cost(s, r);
		s->cost[to] = region_cost(s, to);
		if (total < best_cost) {
			best_cost = total;
			memcpy(best, s->label, f->n * sizeof(*best));
		}
	}
	*best_cost_p = best_cost;
}

/* Once no region is late: moves (as search_run's) from a larger region to a
 * smaller one that keep every region on time, until the sizes differ by 1
 * at most or the budget is spent, so that the root's links carry about as
 * many messages each (the "as equal as possible"; the steps do not
 * change). */
static void search_balance(struct search *s, uint64_t budget)
{
	const struct frame *f = s->f;
	uint32_t first_far = 0, size[SCATTER_MAX_REGIONS] = { 0 };

	while (first_far < f->n && f->dist[f->by_dist[first_far]] < 2)
		first_far++;
	for (uint32_t v = 0; v < f->n; v++)
		if (s->label[v] != SCATTER_NONE)
			size[s->label[v]]++;
	for (uint64_t it = 0; it < budget && first_far < f->n; it++) {
		uint32_t lo = UINT32_MAX, hi = 0, v = 0, r, to = SCATTER_NONE, seen = 0;

		for (uint32_t k = 0; k < s->L; k++) {
			lo = size[k] < lo ? size[k] : lo;
			hi = size[k] > hi ? size[k] : hi;
		}
		if (hi <= lo + 1)
			break;
		for (int tries = 0; tries < 8; tries++) {
			v = f->by_dist[first_far + rnd(&s->rng) % (f->n - first_far)];
			if (size[s->label[v]] > lo + 1)
				break;
		}
		r = s->label[v];
		/* a smaller region of a closer neighbour, one picked at random */
		for (uint32_t k = 0; k < f->nlinks; k++) {
			uint32_t u = nb(f, v, k);

			if (f->dist[u] + 1 == f->dist[v] && size[s->label[u]] + 1 < size[r] && rnd(&s->rng) % ++seen == 0)
				to = s->label[u];
		}
		if (to == SCATTER_NONE)
			continue;
		collect_move(s, v, r);
		if (size[to] + s->nmoved > size[r] - s->nmoved + 1)
			continue;
		shift_counts(s, r, to);
		if (region_cost(s, to)) {
			shift_counts(s, to, r);
			continue;
		}
		for (uint32_t i = 0; i < s->nmoved; i++)
			s->label[s->moved[i]] = to;
		size[r] -= s->nmoved;
		size[to] += s->nmoved;
	}
}

/* A first partition from the root outward: each node joins, among the
 * regions of its closer neighbours, the one with the fewest nodes so far. */
static void first_partition(struct search *s)
{
	const struct frame *f = s->f;
	uint32_t size[SCATTER_MAX_REGIONS] = { 0 };

	for (uint32_t i = 0; i < f->n; i++) {
		uint32_t v = f->by_dist[i], best = SCATTER_NONE;

		if (f->dist[v] == 0) {
			s->label[v] = SCATTER_NONE;
			continue;
		}
		for (uint32_t k = 0; k < f->nlinks; k++) {
			uint32_t u = nb(f, v, k), r;

			if (f->dist[v] == 1 && u == 0) {
				/* v is the far end of root link r: region r */
				for (r = 0; r < s->L; r++)
					if (nb(f, 0, r) == v)
						break;
				best = r;
				break;
			}
			if (f->dist[u] + 1 != f->dist[v])
				continue;
			r = s->label[u];
			if (best == SCATTER_NONE || size[r] < size[best] || (size[r] == size[best] && r < best))
				best = r;
		}
		s->label[v] = best;
		size[best]++;
		s->cnt[(size_t)best * (s->e + 1) + f->dist[v]]++;
	}
}

/* The OPT partition of the frame into label[] (region per node). */
static int opt_partition(const struct frame *f, uint32_t bound, uint32_t *label)
{
	struct search s = { .f = f, .bound = bound, .L = f->nlinks, .e = f->ecc, .label = label,
			    .rng = 0x9e3779b97f4a7c15ull };
	uint32_t *best = malloc((size_t)f->n * sizeof(*best)), best_cost = 0;
	int ret = -ENOMEM;

	s.cnt = calloc((size_t)s.L * (s.e + 1) + 1, sizeof(*s.cnt));
	s.cost = calloc(s.L + 1, sizeof(*s.cost));
	s.stamp = calloc(f->n, sizeof(*s.stamp));
	s.moved = malloc((size_t)f->n * sizeof(*s.moved));
	if (!best || !s.cnt || !s.cost || !s.stamp || !s.moved)
		goto out;
	first_partition(&s);
	/* The budget grows with the torus: a few hundred moves a node. */
	search_run(&s, 400ull * f->n + 100000, best, &best_cost);
	if (!best_cost)
		search_balance(&s, 100ull * f->n + 10000);
	else
		memcpy(label, best, f->n * sizeof(*label));
	ret = 0;
out:
	free(best);
	free(s.cnt);
	free(s.cost);
	free(s.stamp);
	free(s.moved);
	return ret;
}

struct by_far {
	const uint32_t *dist;
	uint32_t v;
};

static int far_cmp(const void *a, const void *b)
{
	const struct by_far *x = a, *y = b;

	if (x->dist[x->v] != y->dist[y->v])
		return x->dist[x->v] > y->dist[y->v] ? -1 : 1;
	return x->v < y->v ? -1 : x->v > y->v;
}

/* The frame's plan from a partition: each region's messages furthest first,
 * one a step, each on a shortest path inside its region (through the
 * closer neighbour in the region on the lowest link), forwarded at once. */
static int opt_paths(const struct frame *f, const uint32_t *label, struct scatter_hop *hops, const uint32_t *first,
		     uint32_t *steps_p)
{
	struct by_far *order = malloc((size_t)f->n * sizeof(*order));
	uint32_t steps = 0;

	if (!order)
		return -ENOMEM;
	for (uint32_t r = 0; r < f->nlinks; r++) {
		uint32_t m = 0;

		for (uint32_t v = 0; v < f->n; v++)
			if (label[v] == r)
				order[m++] = (struct by_far){ f->dist, v };
		qsort(order, m, sizeof(*order), far_cmp);
		for (uint32_t i = 0; i < m; i++) {
			uint32_t v = order[i].v, d = f->dist[v];

			/* message i leaves at step i + 1, crosses hop k (1-based) at i + k */
			for (uint32_t h = d; h >= 1; h--) {
				uint32_t u = 0;

				for (uint32_t k = 0; k < f->nlinks && h > 1; k++) {
					u = nb(f, v, k);
					if (f->dist[u] + 1 == f->dist[v] && label[u] == r)
						break;
				}
				hops[first[order[i].v] + h - 1] = (struct scatter_hop){ u, v, i + h };
				v = u;
			}
			if (i + d > steps)
				steps = i + d;
		}
	}
	free(order);
	*steps_p = steps;
	return 0;
}

/* ---- SDF (§3.3) ---- */

struct held {
	uint32_t at, since, msg;
};

static int held_cmp(const void *a, const void *b)
{
	const struct held *x = a, *y = b;

	if (x->at != y->at)
		return x->at < y->at ? -1 : 1;
	if (x->since != y->since)
		return x->since < y->since ? -1 : 1;
	return x->msg < y->msg ? -1 : x->msg > y->msg;
}

/* The link node `at` sends message `msg` on, among those not in `used`:
 * one that brings it closer, the fewest hops left in its dimension first;
 * or SCATTER_NONE. */
static uint32_t sdf_link(const struct frame *f, uint32_t at, uint32_t msg, uint32_t used)
{
	const struct route *r = f->r;
	const uint32_t *ca = &f->coord[(size_t)at * r->ndims], *cm = &f->coord[(size_t)msg * r->ndims];
	uint32_t best = SCATTER_NONE, best_left = UINT32_MAX;

	for (uint32_t k = 0; k < f->nlinks; k++) {
		uint32_t d = f->link_dim[k], side = r->dims[d];
		uint32_t ahead = (cm[d] + side - ca[d]) % side, left;

		if (!ahead || used >> k & 1)
			continue;
		/* + brings it closer if ahead <= side / 2, - if side - ahead <= side / 2 */
		if (f->link_sign[k] > 0 ? 2 * ahead > side : 2 * (side - ahead) > side)
			continue;
		left = ahead < side - ahead ? ahead : side - ahead;
		if (left < best_left) {
			best = k;
			best_left = left;
		}
	}
	return best;
}

static int sdf_paths(const struct frame *f, struct scatter_hop *hops, const uint32_t *first, uint32_t *region,
		     uint32_t *steps_p)
{
	struct held *h = malloc((size_t)f->n * sizeof(*h));
	uint32_t *nhops = calloc(f->n, sizeof(*nhops)), m = 0, step = 0;

	if (!h || !nhops) {
		free(h);
		free(nhops);
		return -ENOMEM;
	}
	for (uint32_t v = 1; v < f->n; v++)
		h[m++] = (struct held){ 0, 0, v };
	while (m) {
		uint32_t used = 0, keep = 0, at = SCATTER_NONE;

		step++;
		qsort(h, m, sizeof(*h), held_cmp);
		for (uint32_t i = 0; i < m; i++) {
			uint32_t k, to;

			if (h[i].at != at) {
				at = h[i].at;
				used = 0;
			}
			k = sdf_link(f, h[i].at, h[i].msg, used);
			if (k == SCATTER_NONE) {
				h[keep++] = h[i];
				continue;
			}
			used |= 1u << k;
			to = nb(f, h[i].at, k);
			if (h[i].at == 0)
				region[h[i].msg] = k;
			hops[first[h[i].msg] + nhops[h[i].msg]++] = (struct scatter_hop){ h[i].at, to, step };
			if (to != h[i].msg)
				h[keep++] = (struct held){ to, step, h[i].msg };
		}
		m = keep;
	}
	free(h);
	free(nhops);
	*steps_p = step;
	return 0;
}

/* ---- plans ---- */

const char *scatter_algo_name(enum scatter_algo a)
{
	switch (a) {
	case SCATTER_OPT: return "opt";
	case SCATTER_SDF: return "sdf";
	}
	return NULL;
}

int scatter_algo_by_name(const char *name)
{
	if (!strcmp(name, "opt"))
		return SCATTER_OPT;
	if (!strcmp(name, "sdf"))
		return SCATTER_SDF;
	return -1;
}

int scatter_relay_max(const struct scatter_plan *p, uint32_t *most_p)
{
	uint32_t *n = calloc((size_t)p->nodes + 1, sizeof(*n)), most = 0;

	if (!n)
		return -ENOMEM;
	/* every hop but a path's last ends at a node that passes it on */
	for (uint32_t v = 0; v < p->nodes; v++)
		for (uint32_t k = p->first[v]; k + 1 < p->first[v + 1]; k++) {
			uint32_t at = p->hops[k].to;

			most = ++n[at] > most ? n[at] : most;
		}
	free(n);
	*most_p = most;
	return 0;
}

void scatter_plan_free(struct scatter_plan *p)
{
	free(p->region);
	free(p->dist);
	free(p->first);
	free(p->hops);
	p->region = p->dist = p->first = NULL;
	p->hops = NULL;
}

static int plan_alloc(struct scatter_plan *p, uint32_t n, uint64_t nhops)
{
	p->region = malloc((size_t)n * sizeof(*p->region));
	p->dist = malloc((size_t)n * sizeof(*p->dist));
	p->first = malloc(((size_t)n + 1) * sizeof(*p->first));
	p->hops = malloc((nhops + 1) * sizeof(*p->hops));
	if (!p->region || !p->dist || !p->first || !p->hops) {
		scatter_plan_free(p);
		return -ENOMEM;
	}
	return 0;
}

/* The frame's plan (root 0: label, first, hops) moved to the root: a
 * node's offset from the root is its id in the frame.  real[o] is the id of
 * frame node o, frame_of[] the other way. */
static void plan_translate(const struct frame *f, const uint32_t *label, const uint32_t *first,
			   const struct scatter_hop *hops, uint32_t *real, uint32_t *frame_of, struct scatter_plan *p)
{
	const struct route *r = f->r;
	const uint32_t *cr = &f->coord[(size_t)p->root * r->ndims];
	uint32_t at = 0;

	for (uint32_t o = 0; o < f->n; o++) {
		const uint32_t *c = &f->coord[(size_t)o * r->ndims];

		real[o] = 0;
		for (uint32_t d = 0; d < r->ndims; d++)
			real[o] += (c[d] + cr[d]) % r->dims[d] * r->stride[d];
		frame_of[real[o]] = o;
	}
	for (uint32_t v = 0; v < f->n; v++) {
		uint32_t o = frame_of[v];

		p->region[v] = label[o];
		p->dist[v] = f->dist[o];
		if (label[o] != SCATTER_NONE)
			p->size[label[o]]++;
		p->first[v] = at;
		for (uint32_t i = first[o]; i < first[o + 1]; i++)
			p->hops[at++] = (struct scatter_hop){ real[hops[i].from], real[hops[i].to], hops[i].step };
	}
	p->first[f->n] = at;
	for (uint32_t k = 0; k < f->nlinks; k++)
		p->nbr[k] = real[nb(f, 0, k)];
}

int scatter_plan(const struct route *r, uint32_t root, enum scatter_algo algo, struct scatter_plan *out)
{
	struct scatter_plan p = { .algo = algo, .root = root };
	struct scatter_hop *hops = NULL;
	uint32_t *label = NULL, *first = NULL, *real = NULL, *frame_of = NULL;
	uint64_t nhops = 0;
	struct frame f;
	int ret;

	if (r->kind != ROUTE_TORUS || r->nnodes > SCATTER_MAX_NODES || root >= r->nnodes ||
	    (algo != SCATTER_OPT && algo != SCATTER_SDF))
		return -EINVAL;
	ret = frame_init(&f, r);
	if (ret)
		return ret;
	p.nodes = f.n;
	p.nregions = f.nlinks;
	p.ecc = f.ecc;
	p.bound = f.n > 1 ? (f.n - 1 + f.nlinks - 1) / f.nlinks : 0;
	if (f.ecc > p.bound)
		p.bound = f.ecc;
	for (uint32_t v = 0; v < f.n; v++)
		nhops += f.dist[v];     /* every path is a shortest one */
	ret = -ENOMEM;
	label = malloc((size_t)f.n * sizeof(*label));
	first = malloc(((size_t)f.n + 1) * sizeof(*first));
	real = malloc((size_t)f.n * sizeof(*real));
	frame_of = malloc((size_t)f.n * sizeof(*frame_of));
	hops = malloc((nhops + 1) * sizeof(*hops));
	if (!label || !first || !real || !frame_of || !hops)
		goto out;
	first[0] = 0;
	for (uint32_t v = 0; v < f.n; v++) {
		first[v + 1] = first[v] + f.dist[v];
		label[v] = SCATTER_NONE;
	}
	if (algo == SCATTER_OPT) {
		ret = opt_partition(&f, p.bound, label);
		if (!ret)
			ret = opt_paths(&f, label, hops, first, &p.steps);
	} else {
		ret = sdf_paths(&f, hops, first, label, &p.steps);
	}
	if (!ret)
		ret = plan_alloc(&p, f.n, nhops);
	if (ret)
		goto out;
	plan_translate(&f, label, first, hops, real, frame_of, &p);
	*out = p;
out:
	free(label);
	free(first);
	free(real);
	free(frame_of);
	free(hops);
	frame_free(&f);
	return ret;
}

int scatter_reverse(const struct scatter_plan *s, struct scatter_plan *g)
{
	struct scatter_plan p = *s;
	uint64_t nhops = s->first[s->nodes];

	if (s->gather)
		return -EINVAL;
	if (plan_alloc(&p, s->nodes, nhops))
		return -ENOMEM;
	p.gather = 1;
	memcpy(p.region, s->region, s->nodes * sizeof(*p.region));
	memcpy(p.dist, s->dist, s->nodes * sizeof(*p.dist));
	memcpy(p.first, s->first, (s->nodes + 1) * sizeof(*p.first));
	for (uint32_t v = 0; v < s->nodes; v++) {
		uint32_t a = s->first[v], b = s->first[v + 1];

		for (uint32_t i = a; i < b; i++) {
			const struct scatter_hop *h = &s->hops[a + b - 1 - i];

			p.hops[i] = (struct scatter_hop){ h->to, h->from, s->steps + 1 - h->step };
		}
	}
	*g = p;
	return 0;
}

/* ---- schedules ---- */

int scatter_sched(const struct scatter_plan *p, const uint64_t *count, const uint64_t *displ, struct sched *s)
{
	uint32_t root = p->root;

	if (s->nodes != p->nodes)
		return -EINVAL;
	for (uint32_t n = 0; n < p->nodes; n++)
		s->node[n].nslots = 1;
	for (uint32_t v = 0; v < p->nodes; v++) {
		const struct scatter_hop *h = &p->hops[p->first[v]];
		uint32_t nh = p->first[v + 1] - p->first[v];
		/* the block lies at displ[v] on the root's side, at 0 on v's */
		uint64_t send_off = p->gather ? 0 : displ[v], recv_off = p->gather ? displ[v] : 0;
		struct sched_node *n;

		if (v == root) {
			n = &s->node[root];
			if (!count[v])
				continue;
			sched_step(n, SCHED_COPY, 0, 0, 0);
			sched_ref(n, sched_seg(n, SCHED_BUF_RECV, 0, recv_off, count[v], 0));
			sched_ref(n, sched_seg(n, SCHED_BUF_SEND, 0, send_off, count[v], 0));
			continue;
		}
		n = &s->node[h[0].from];
		sched_step(n, SCHED_SEND, h[0].to, v, h[0].step);
		sched_ref(n, sched_seg(n, SCHED_BUF_SEND, 0, send_off, count[v], 0));
		for (uint32_t i = 1; i < nh; i++) {
			n = &s->node[h[i].from];
			sched_step(n, SCHED_FORWARD, h[i].to, v, h[i].step);
			sched_step_forward(n, h[i - 1].from, v);
		}
		n = &s->node[h[nh - 1].to];
		sched_step(n, SCHED_RECV, h[nh - 1].from, v, 0);
		sched_ref(n, sched_seg(n, SCHED_BUF_RECV, 0, recv_off, count[v], 0));
	}
	return sched_err(s);
}
