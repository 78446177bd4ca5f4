/* daemon/plan/sg_sim.c - see sg_sim.h.
 *
 * The simulation runs in rounds of one hop time: in round k every busy
 * link delivers the message it carries, the messages that arrived join
 * their next link's queue (a plan's: its fixed order; NAIVE's: first come
 * first served), and every free link starts the next message it may send.
 * Since every crossing takes one hop time, this is the asynchronous
 * execution exactly, counted in hop times (sg_sim.h).
 *
 * Ownership: struct sim's tables are allocated by sim_alloc and freed by
 * sim_free inside each exported call.
 */
#include "sg_sim.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define NONE UINT32_MAX

struct sim {
	uint32_t n, deg, nlinks, ordered;
	uint32_t *nbr;          /* [n * deg]: each node's peers; link id = node * deg + k */
	uint32_t *first;        /* [n + 1]: message v's hops are first[v] .. first[v + 1] */
	uint32_t *link;         /* [hops]: each hop's directed link, in path order */
	uint32_t *cur;          /* [n]: message v's next hop */
	uint32_t *busy;         /* [nlinks]: the message crossing it, or NONE */
	uint32_t *waiting;      /* [nlinks]: arrived at its near end, not yet sent on it */
	uint32_t *relayed;      /* [nlinks]: of those, the ones that left their origin */
	uint32_t *carried;      /* [nlinks]: messages it has sent */
	uint32_t *lfirst;       /* ordered: [nlinks + 1]: link L's messages are */
	uint32_t *lorder;       /*   lorder[lfirst[L] .. lfirst[L + 1]), in the plan's order */
	uint32_t *lpos;         /*   [nlinks]: the next of them (an index into lorder) */
	uint32_t *head, *tail;  /* first come first served: [nlinks] queues of messages */
	uint32_t *next;         /*   [n]: linked through next (a message waits in one queue) */
	uint32_t *active, *act2; /* [nlinks]: the links crossing this round, next round */
	uint32_t nactive, nact2;
	uint64_t *batch;        /* [n]: this round's arrivals, link << 32 | message */
	struct sg_sim_result res;
};

static void sim_free(struct sim *s)
{
	free(s->nbr);
	free(s->first);
	free(s->link);
	free(s->cur);
	free(s->busy);
	free(s->waiting);
	free(s->relayed);
	free(s->carried);
	free(s->lfirst);
	free(s->lorder);
	free(s->lpos);
	free(s->head);
	free(s->tail);
	free(s->next);
	free(s->active);
	free(s->act2);
	free(s->batch);
}

/* The tables of a torus of r->nnodes nodes, paths to be filled in (first,
 * link: nhops). */
static int sim_alloc(struct sim *s, const struct route *r, uint64_t nhops, int ordered)
{
	uint32_t peers[2 * ROUTE_MAX_DIMS];

	memset(s, 0, sizeof(*s));
	if (r->kind != ROUTE_TORUS || r->nnodes < 1 || r->nnodes > SCATTER_MAX_NODES || nhops >= UINT32_MAX)
		return -EINVAL;
	s->n = r->nnodes;
	s->deg = route_peers(r, 0, peers, 2 * ROUTE_MAX_DIMS);
	s->nlinks = s->n * s->deg;
	s->ordered = ordered;
	s->nbr = malloc(((size_t)s->nlinks + 1) * sizeof(*s->nbr));
	s->first = calloc((size_t)s->n + 1, sizeof(*s->first));
	s->link = malloc((nhops + 1) * sizeof(*s->link));
	s->cur = malloc((size_t)s->n * sizeof(*s->cur));
	s->busy = malloc(((size_t)s->nlinks + 1) * sizeof(*s->busy));
	s->waiting = calloc((size_t)s->nlinks + 1, sizeof(*s->waiting));
	s->relayed = calloc((size_t)s->nlinks + 1, sizeof(*s->relayed));
	s->carried = calloc((size_t)s->nlinks + 1, sizeof(*s->carried));
	s->active = malloc(((size_t)s->nlinks + 1) * sizeof(*s->active));
	s->act2 = malloc(((size_t)s->nlinks + 1) * sizeof(*s->act2));
	s->batch = malloc((size_t)s->n * sizeof(*s->batch));
	if (ordered) {
		s->lfirst = calloc((size_t)s->nlinks + 1, sizeof(*s->lfirst));
		s->lorder = malloc((nhops + 1) * sizeof(*s->lorder));
		s->lpos = malloc(((size_t)s->nlinks + 1) * sizeof(*s->lpos));
	} else {
		s->head = malloc(((size_t)s->nlinks + 1) * sizeof(*s->head));
		s->tail = malloc(((size_t)s->nlinks + 1) * sizeof(*s->tail));
		s->next = malloc((size_t)s->n * sizeof(*s->next));
	}
	if (!s->nbr || !s->first || !s->link || !s->cur || !s->busy || !s->waiting || !s->relayed || !s->carried ||
	    !s->active || !s->act2 || !s->batch ||
	    (ordered ? !s->lfirst || !s->lorder || !s->lpos : !s->head || !s->tail || !s->next)) {
		sim_free(s);
		return -ENOMEM;
	}
	for (uint32_t v = 0; v < s->n; v++) {
		/* a torus: every node has as many links */
		if (route_peers(r, v, &s->nbr[(size_t)v * s->deg], s->deg) != s->deg) {
			sim_free(s);
			return -EINVAL;
		}
	}
	for (uint32_t l = 0; l < s->nlinks; l++) {
		s->busy[l] = NONE;
		if (!ordered)
			s->head[l] = s->tail[l] = NONE;
	}
	return 0;
}

/* The directed link from a to b, or NONE. */
static uint32_t link_of(const struct sim *s, uint32_t a, uint32_t b)
{
	if (a >= s->n)
		return NONE;
	for (uint32_t k = 0; k < s->deg; k++)
		if (s->nbr[(size_t)a * s->deg + k] == b)
			return a * s->deg + k;
	return NONE;
}

static uint32_t link_from(const struct sim *s, uint32_t l) { return l / s->deg; }
static uint32_t link_to(const struct sim *s, uint32_t l) { return s->nbr[l]; }

/* Message m has arrived at the near end of link l (at its origin if it has
 * not left it yet). */
static void arrive(struct sim *s, uint32_t l, uint32_t m)
{
	struct sg_sim_result *res = &s->res;

	s->waiting[l]++;
	if (s->waiting[l] > res->queue_max) {
		res->queue_max = s->waiting[l];
		res->queue_from = link_from(s, l);
		res->queue_to = link_to(s, l);
	}
	if (s->cur[m] > s->first[m]) {
		s->relayed[l]++;
		if (s->relayed[l] > res->relay_queue_max) {
			res->relay_queue_max = s->relayed[l];
			res->relay_from = link_from(s, l);
			res->relay_to = link_to(s, l);
		}
	}
	if (!s->ordered) {
		s->next[m] = NONE;
		if (s->tail[l] == NONE)
			s->head[l] = m;
		else
			s->next[s->tail[l]] = m;
		s->tail[l] = m;
	}
}

/* Link l, if free, starts the next message it may send: the plan's next one
 * on it once that one is here, or the first to have come. */
static void try_start(struct sim *s, uint32_t l)
{
	uint32_t m;

	if (s->busy[l] != NONE)
		return;
	if (s->ordered) {
		if (s->lpos[l] == s->lfirst[l + 1])
			return;
		m = s->lorder[s->lpos[l]];
		/* here: its next hop is this link (a message crossing a link
		 * still has that link as its next hop, but then it is this
		 * one, and busy) */
		if (s->cur[m] == s->first[m + 1] || s->link[s->cur[m]] != l)
			return;
		s->lpos[l]++;
	} else {
		m = s->head[l];
		if (m == NONE)
			return;
		s->head[l] = s->next[m];
		if (s->head[l] == NONE)
			s->tail[l] = NONE;
	}
	s->waiting[l]--;
	if (s->cur[m] > s->first[m])
		s->relayed[l]--;
	s->carried[l]++;
	s->busy[l] = m;
	s->act2[s->nact2++] = l;
}

static int u64_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Runs the rounds once the messages wait at their origins (arrive() called
 * for every message with hops).  Returns 0 or -EDEADLK. */
static int sim_run(struct sim *s, const struct sg_sim_cost *c)
{
	uint32_t round = 0, left = 0, last = 0;

	for (uint32_t m = 0; m < s->n; m++)
		left += s->first[m + 1] > s->first[m];
	s->nact2 = 0;
	for (uint32_t l = 0; l < s->nlinks; l++)
		try_start(s, l);
	while (s->nact2) {
		uint32_t *t = s->active, nb = 0;

		s->active = s->act2;
		s->nactive = s->nact2;
		s->act2 = t;
		s->nact2 = 0;
		round++;
		for (uint32_t i = 0; i < s->nactive; i++) {
			uint32_t l = s->active[i], m = s->busy[l];

			s->busy[l] = NONE;
			s->res.hops++;
			if (++s->cur[m] == s->first[m + 1]) {
				left--;
				last = round;
			} else {
				s->batch[nb++] = (uint64_t)s->link[s->cur[m]] << 32 | m;
			}
		}
		/* arrivals at one moment: by link, then message number */
		qsort(s->batch, nb, sizeof(*s->batch), u64_cmp);
		for (uint32_t i = 0; i < nb; i++)
			arrive(s, (uint32_t)(s->batch[i] >> 32), (uint32_t)s->batch[i]);
		for (uint32_t i = 0; i < s->nactive; i++)
			try_start(s, s->active[i]);
		for (uint32_t i = 0; i < nb; i++)
			try_start(s, (uint32_t)(s->batch[i] >> 32));
	}
	if (left)
		return -EDEADLK;
	for (uint32_t l = 0; l < s->nlinks; l++)
		if (s->carried[l] > s->res.link_max)
			s->res.link_max = s->carried[l];
	s->res.rounds = last;
	s->res.hop_us = c->alpha_us + (double)c->block * c->beta_us_per_byte;
	s->res.makespan_us = last * s->res.hop_us;
	return 0;
}

/* max(ceil((p - 1) / L), e) for root. */
static uint32_t bound_of(const struct route *r, const struct sim *s, uint32_t root)
{
	uint32_t e = 0, b;

	if (s->n < 2)
		return 0;
	for (uint32_t v = 0; v < s->n; v++) {
		int h = route_hops(r, root, v);

		if (h > 0 && (uint32_t)h > e)
			e = (uint32_t)h;
	}
	b = (s->n - 1 + s->deg - 1) / s->deg;
	return b > e ? b : e;
}

const char *sg_sim_algo_name(enum sg_sim_algo a)
{
	switch (a) {
	case SG_SIM_OPT: return "opt";
	case SG_SIM_SDF: return "sdf";
	case SG_SIM_NAIVE: return "naive";
	}
	return NULL;
}

int sg_sim_algo_by_name(const char *name)
{
	for (int a = 0; a < SG_SIM_ALGOS; a++)
		if (strcmp(name, sg_sim_algo_name(a)) == 0)
			return a;
	return -1;
}

struct planned {
	uint32_t link, step, msg;
};

static int planned_cmp(const void *a, const void *b)
{
	const struct planned *x = a, *y = b;

	if (x->link != y->link)
		return x->link < y->link ? -1 : 1;
	if (x->step != y->step)
		return x->step < y->step ? -1 : 1;
	return x->msg < y->msg ? -1 : x->msg > y->msg;
}

int sg_sim_plan(const struct route *r, const struct scatter_plan *p, const struct sg_sim_cost *c,
		struct sg_sim_result *res_p)
{
	uint64_t nhops = p->first[p->nodes];
	struct planned *pl = NULL;
	struct sim s;
	int ret;

	if (p->nodes != r->nnodes || p->root >= p->nodes)
		return -EINVAL;
	ret = sim_alloc(&s, r, nhops, 1);
	if (ret)
		return ret;
	ret = -ENOMEM;
	pl = malloc((nhops + 1) * sizeof(*pl));
	if (!pl)
		goto out;
	ret = -EINVAL;
	for (uint32_t v = 0; v <= s.n; v++)
		s.first[v] = p->first[v];
	for (uint32_t v = 0; v < s.n; v++) {
		uint32_t a = s.first[v], b = s.first[v + 1];
		uint32_t at = p->gather ? v : p->root, end = p->gather ? p->root : v;

		if (b < a || b > nhops || (v == p->root) != (a == b))
			goto out;
		for (uint32_t i = a; i < b; i++) {
			const struct scatter_hop *h = &p->hops[i];

			if (h->from != at || (s.link[i] = link_of(&s, h->from, h->to)) == NONE)
				goto out;
			at = h->to;
			pl[i] = (struct planned){ s.link[i], h->step, v };
		}
		if (at != end)
			goto out;
		s.cur[v] = a;
	}
	/* every link's messages in the plan's step order */
	qsort(pl, nhops, sizeof(*pl), planned_cmp);
	for (uint64_t i = 0; i < nhops; i++) {
		s.lfirst[pl[i].link + 1]++;
		s.lorder[i] = pl[i].msg;
	}
	for (uint32_t l = 0; l < s.nlinks; l++) {
		s.lfirst[l + 1] += s.lfirst[l];
		s.lpos[l] = s.lfirst[l];
	}
	for (uint32_t v = 0; v < s.n; v++)
		if (s.first[v + 1] > s.first[v])
			arrive(&s, s.link[s.first[v]], v);
	ret = sim_run(&s, c);
	if (ret)
		goto out;
	s.res.steps = p->steps;
	s.res.step_sync_us = p->steps * s.res.hop_us;
	s.res.bound = bound_of(r, &s, p->root);
	*res_p = s.res;
out:
	free(pl);
	sim_free(&s);
	return ret;
}

int sg_sim_naive(const struct route *r, uint32_t root, int gather, const struct sg_sim_cost *c,
		 struct sg_sim_result *res_p)
{
	uint32_t *dist = NULL;
	uint64_t *order = NULL;
	uint64_t nhops = 0;
	struct sim s;
	int ret;

	if (r->kind != ROUTE_TORUS || r->nnodes > SCATTER_MAX_NODES || root >= r->nnodes)
		return -EINVAL;
	dist = malloc((size_t)r->nnodes * sizeof(*dist));
	order = malloc((size_t)r->nnodes * sizeof(*order));
	if (!dist || !order) {
		free(dist);
		free(order);
		return -ENOMEM;
	}
	for (uint32_t v = 0; v < r->nnodes; v++) {
		int h = gather ? route_hops(r, v, root) : route_hops(r, root, v);

		dist[v] = h < 0 ? 0 : (uint32_t)h;
		nhops += dist[v];
		/* a scatter's root: furthest first, then by id */
		order[v] = (uint64_t)(gather ? 0 : UINT32_MAX - dist[v]) << 32 | v;
	}
	ret = sim_alloc(&s, r, nhops, 0);
	if (ret)
		goto out_free;
	ret = -EINVAL;
	for (uint32_t v = 0; v < s.n; v++) {
		uint32_t at = gather ? v : root, end = gather ? root : v, i = s.first[v];

		s.first[v + 1] = i + dist[v];
		s.cur[v] = i;
		/* the default route, hop by hop: route_next_hop() */
		for (; at != end && i < s.first[v + 1]; i++) {
			uint32_t hop;

			if (route_next_hop(r, at, end, &hop) < 0 || (s.link[i] = link_of(&s, at, hop)) == NONE)
				goto out;
			at = hop;
		}
		if (at != end || i != s.first[v + 1])
			goto out;
	}
	/* A gather's sources hold one message each; a scatter's root queues
	 * its messages furthest first. */
	qsort(order, s.n, sizeof(*order), u64_cmp);
	for (uint32_t i = 0; i < s.n; i++) {
		uint32_t v = (uint32_t)order[i];

		if (s.first[v + 1] > s.first[v])
			arrive(&s, s.link[s.first[v]], v);
	}
	ret = sim_run(&s, c);
	if (ret)
		goto out;
	s.res.bound = bound_of(r, &s, root);
	*res_p = s.res;
out:
	sim_free(&s);
out_free:
	free(dist);
	free(order);
	return ret;
}

int sg_sim_run(const struct route *r, uint32_t root, int gather, enum sg_sim_algo a, const struct sg_sim_cost *c,
	       struct sg_sim_result *res_p)
{
	struct scatter_plan s, g;
	int ret;

	if (a == SG_SIM_NAIVE)
		return sg_sim_naive(r, root, gather, c, res_p);
	if (a != SG_SIM_OPT && a != SG_SIM_SDF)
		return -EINVAL;
	ret = scatter_plan(r, root, (enum scatter_algo)a, &s);
	if (ret)
		return ret;
	if (gather) {
		ret = scatter_reverse(&s, &g);
		scatter_plan_free(&s);
		if (ret)
			return ret;
		s = g;
	}
	ret = sg_sim_plan(r, &s, c, res_p);
	scatter_plan_free(&s);
	return ret;
}
