/* tests/unit/test_scatter.c - the scatter and gather plans of
 * daemon/plan/scatter.c (seed 001, Mao, Chen, Watson) checked from the
 * outside: regions partition the torus, every path is a shortest one
 * inside its region, no directed link carries two messages in a step, links
 * go furthest-distance-first, every node gets its message once, OPT's
 * regions differ in size by 1 at most, and OPT
 * takes exactly the lower bound max(ceil((p-1)/L), e) on every torus with 2
 * dimensions of sides 3-10 and 3 dimensions of sides 3-10; SDF is valid;
 * the schedules run in the simulator. */
#define UNIT "scatter"
#include "check.h"
#include "../../daemon/plan/scatter.h"
#include "../../daemon/plan/sched.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static uint32_t torus(struct route *r, uint32_t nd, const uint32_t *dims)
{
	uint32_t n = 1;

	for (uint32_t d = 0; d < nd; d++)
		n *= dims[d];
	CHECK_EQ(route_init(r, ROUTE_TORUS, nd, dims, n), 0);
	return n;
}

static const char *name(uint32_t nd, const uint32_t *dims)
{
	static char buf[64];
	int at = 0;

	for (uint32_t d = 0; d < nd; d++)
		at += snprintf(buf + at, sizeof(buf) - at, "%s%u", d ? "x" : "", dims[d]);
	return buf;
}

/* Hops from a to b, computed here from the coordinates. */
static uint32_t distance(const struct route *r, uint32_t a, uint32_t b)
{
	uint32_t ca[ROUTE_MAX_DIMS], cb[ROUTE_MAX_DIMS], h = 0;

	route_coords(r, a, ca);
	route_coords(r, b, cb);
	for (uint32_t d = 0; d < r->ndims; d++) {
		uint32_t x = (ca[d] + r->dims[d] - cb[d]) % r->dims[d];

		h += x < r->dims[d] - x ? x : r->dims[d] - x;
	}
	return h;
}

/* The root's links as the model counts them: 2 per side >= 3, 1 per side 2. */
static uint32_t links(const struct route *r)
{
	uint32_t l = 0;

	for (uint32_t d = 0; d < r->ndims; d++)
		l += r->dims[d] >= 3 ? 2 : r->dims[d] == 2;
	return l;
}

static uint32_t bound_of(const struct route *r)
{
	uint32_t e = 0, l = links(r), b;

	for (uint32_t d = 0; d < r->ndims; d++)
		e += r->dims[d] / 2;
	if (r->nnodes == 1)
		return 0;
	b = (r->nnodes - 1 + l - 1) / l;
	return b > e ? b : e;
}

struct use {
	uint32_t from, to, step, dist;
};

static int by_step(const void *a, const void *b)
{
	const struct use *x = a, *y = b;

	if (x->step != y->step)
		return x->step < y->step ? -1 : 1;
	if (x->from != y->from)
		return x->from < y->from ? -1 : 1;
	return x->to < y->to ? -1 : x->to > y->to;
}

static int by_link(const void *a, const void *b)
{
	const struct use *x = a, *y = b;

	if (x->from != y->from)
		return x->from < y->from ? -1 : 1;
	if (x->to != y->to)
		return x->to < y->to ? -1 : 1;
	return x->step < y->step ? -1 : x->step > y->step;
}

/* Everything a plan must be, checked independently of how it was made.
 * Returns the number of faults (and prints the first few). */
static int check_plan(const struct route *r, const struct scatter_plan *p, uint32_t root)
{
	uint32_t n = r->nnodes, size[SCATTER_MAX_REGIONS] = { 0 }, last = 0;
	struct use *u = malloc(((size_t)p->first[n] + 1) * sizeof(*u));
	size_t nu = 0;
	int bad = 0;

#define FAULT(...) do { if (bad++ < 5) fprintf(stderr, "  %s %s: ", name(r->ndims, r->dims), \
	scatter_algo_name(p->algo)), fprintf(stderr, __VA_ARGS__), fputc('\n', stderr); } while (0)

	if (p->nodes != n || p->root != root || p->nregions != links(r) || p->bound != bound_of(r))
		FAULT("nodes %u root %u regions %u bound %u", p->nodes, p->root, p->nregions, p->bound);
	if (p->region[root] != SCATTER_NONE || p->first[root + 1] != p->first[root])
		FAULT("the root has a region or a message");
	for (uint32_t k = 0; k < p->nregions && k < SCATTER_MAX_REGIONS; k++) {
		if (!route_are_peers(r, root, p->nbr[k]) || p->region[p->nbr[k]] != k)
			FAULT("region %u: its first node %u is not next to the root, or elsewhere", k, p->nbr[k]);
		for (uint32_t j = 0; j < k; j++)
			if (p->nbr[j] == p->nbr[k])
				FAULT("regions %u and %u start at the same node", j, k);
	}
	for (uint32_t v = 0; v < n; v++) {
		const struct scatter_hop *h = &p->hops[p->first[v]];
		uint32_t nh = p->first[v + 1] - p->first[v], d = distance(r, root, v), reg = p->region[v];

		if (v == root)
			continue;
		if (reg >= p->nregions) {
			FAULT("node %u in no region", v);
			continue;
		}
		size[reg]++;
		if (nh != d || p->dist[v] != d) {
			FAULT("node %u: %u hops, %u away", v, nh, d);
			continue;
		}
		/* scatter: root -> ... -> v; gather: v -> ... -> root */
		if (h[0].from != (p->gather ? v : root) || h[nh - 1].to != (p->gather ? root : v))
			FAULT("node %u: path from %u to %u", v, h[0].from, h[nh - 1].to);
		for (uint32_t i = 0; i < nh; i++) {
			uint32_t near = p->gather ? h[i].to : h[i].from, far = p->gather ? h[i].from : h[i].to;

			if (!route_are_peers(r, h[i].from, h[i].to))
				FAULT("node %u: hop %u -> %u is no link", v, h[i].from, h[i].to);
			if (distance(r, root, far) != distance(r, root, near) + 1)
				FAULT("node %u: hop %u -> %u is not on a shortest path", v, h[i].from, h[i].to);
			if (i && (h[i].from != h[i - 1].to || h[i].step <= h[i - 1].step))
				FAULT("node %u: hop %u out of order", v, i);
			if (h[i].step < 1 || h[i].step > p->steps)
				FAULT("node %u: hop at step %u of %u", v, h[i].step, p->steps);
			if (p->algo == SCATTER_OPT && (p->region[far] != reg || (near == root && far != p->nbr[reg])))
				FAULT("node %u: hop %u -> %u leaves region %u", v, h[i].from, h[i].to, reg);
			if (p->algo == SCATTER_SDF && near == root && far != p->nbr[reg])
				FAULT("node %u: left the root on another link than its region's", v);
			u[nu++] = (struct use){ h[i].from, h[i].to, h[i].step, d };
			if (h[i].step > last)
				last = h[i].step;
		}
	}
	if (last != p->steps)
		FAULT("steps %u, the last hop at %u", p->steps, last);
	for (uint32_t k = 0; k < p->nregions; k++) {
		if (size[k] != p->size[k])
			FAULT("region %u: size %u, counted %u", k, p->size[k], size[k]);
		/* OPT's regions as equal as they can be */
		if (p->algo == SCATTER_OPT && (size[k] + 1 < size[0] || size[0] + 1 < size[k]))
			FAULT("regions 0 and %u: %u and %u nodes", k, size[0], size[k]);
	}
	qsort(u, nu, sizeof(*u), by_step);
	for (size_t i = 1; i < nu; i++)
		if (!by_step(&u[i - 1], &u[i]))
			FAULT("link %u -> %u carries two messages at step %u", u[i].from, u[i].to, u[i].step);
	/* furthest-distance-first on every link (scatter; a gather's nearest
	 * come first, its links being the scatter's run backwards) */
	qsort(u, nu, sizeof(*u), by_link);
	for (size_t i = 1; i < nu && p->algo == SCATTER_OPT; i++)
		if (u[i].from == u[i - 1].from && u[i].to == u[i - 1].to &&
		    (p->gather ? u[i].dist < u[i - 1].dist : u[i].dist > u[i - 1].dist))
			FAULT("link %u -> %u: a message for distance %u after one for %u", u[i].from, u[i].to, u[i].dist,
			      u[i - 1].dist);
	free(u);
	return bad;
#undef FAULT
}

/* Plans (and checks) scatter and gather; returns the scatter's steps. */
static uint32_t plan_checked(const struct route *r, uint32_t root, enum scatter_algo algo, double *secs_p)
{
	struct scatter_plan p, g, again;
	double t0 = now_s();
	uint32_t steps;

	CHECK_EQ(scatter_plan(r, root, algo, &p), 0);
	if (secs_p)
		*secs_p = now_s() - t0;
	CHECK_EQ(check_plan(r, &p, root), 0);
	CHECK_EQ(scatter_reverse(&p, &g), 0);
	CHECK_EQ(g.gather, 1);
	CHECK_EQ(g.steps, p.steps);
	CHECK_EQ(check_plan(r, &g, root), 0);
	/* a region's first node passes on the rest of its region */
	{
		uint32_t most = 0;

		for (uint32_t i = 0; i < p.nregions; i++)
			most = p.size[i] > most ? p.size[i] : most;
		uint32_t rp = UINT32_MAX, rg = UINT32_MAX;

		CHECK_EQ(scatter_relay_max(&p, &rp), 0);
		CHECK_EQ(scatter_relay_max(&g, &rg), 0);
		CHECK_EQ(rp, most ? most - 1 : 0);
		CHECK_EQ(rg, most ? most - 1 : 0);
	}
	CHECK_EQ(scatter_reverse(&g, &again), -EINVAL);
	steps = p.steps;
	scatter_plan_free(&p);
	scatter_plan_free(&g);
	return steps;
}

/* Every torus of nd dimensions with sides lo..hi: OPT reaches the bound. */
static void all_tori(uint32_t nd, uint32_t lo, uint32_t hi)
{
	uint32_t dims[3], total = 0, short_of = 0;

	for (uint32_t i = 0; i < nd; i++)
		dims[i] = lo;
	for (;;) {
		struct route r;
		uint32_t steps;

		torus(&r, nd, dims);
		steps = plan_checked(&r, 0, SCATTER_OPT, NULL);
		total++;
		if (steps != bound_of(&r)) {
			short_of++;
			fprintf(stderr, "  %s: opt %u steps, bound %u\n", name(nd, dims), steps, bound_of(&r));
		}
		uint32_t d = nd;
		while (d > 0 && dims[d - 1] == hi)
			dims[--d] = lo;
		if (!d)
			break;
		dims[d - 1]++;
	}
	printf("# %u tori of %u dimensions, sides %u-%u: opt reaches the bound on %u\n", total, nd, lo, hi,
	       total - short_of);
	CHECK_EQ(short_of, 0);
}

TEST(opt_reaches_the_bound_2d_sides_3_to_10) { all_tori(2, 3, 10); }
TEST(opt_reaches_the_bound_3d_sides_3_to_6) { all_tori(3, 3, 6); }
TEST(opt_reaches_the_bound_3d_sides_7_to_10) { all_tori(3, 7, 10); }

/* The paper's clusters (§4): 8x8 in ceil(63/4) = 16 steps, 4x8x8 in
 * ceil(255/6) = 43, and the 7x5 of its Fig. 1 in ceil(34/4) = 9; planning
 * 4x8x8 well under the 10 s. */
TEST(paper_figures)
{
	struct route r;
	double secs;

	torus(&r, 2, (uint32_t[]){ 8, 8 });
	CHECK_EQ(plan_checked(&r, 0, SCATTER_OPT, NULL), 16);
	torus(&r, 2, (uint32_t[]){ 7, 5 });
	CHECK_EQ(plan_checked(&r, 0, SCATTER_OPT, NULL), 9);
	torus(&r, 3, (uint32_t[]){ 4, 8, 8 });
	CHECK_EQ(plan_checked(&r, 0, SCATTER_OPT, &secs), 43);
	printf("# 4x8x8: planned in %.3f s\n", secs);
	CHECK(secs < 10);
}

/* Another root: the same steps, every check again from there. */
TEST(other_roots)
{
	struct route r;

	torus(&r, 2, (uint32_t[]){ 7, 5 });
	for (uint32_t root = 0; root < r.nnodes; root += 6)
		CHECK_EQ(plan_checked(&r, root, SCATTER_OPT, NULL), 9);
	torus(&r, 3, (uint32_t[]){ 4, 8, 8 });
	CHECK_EQ(plan_checked(&r, 173, SCATTER_OPT, NULL), 43);
	CHECK_EQ(plan_checked(&r, 255, SCATTER_SDF, NULL) >= 43, 1);
}

/* Every node plans alone and must get the same plan: twice the same, and
 * from another root the same plan moved there. */
TEST(deterministic)
{
	struct route r;
	struct scatter_plan a, b;

	torus(&r, 3, (uint32_t[]){ 5, 6, 7 });
	CHECK_EQ(scatter_plan(&r, 0, SCATTER_OPT, &a), 0);
	CHECK_EQ(scatter_plan(&r, 0, SCATTER_OPT, &b), 0);
	CHECK_EQ(memcmp(a.hops, b.hops, a.first[r.nnodes] * sizeof(*a.hops)), 0);
	CHECK_EQ(memcmp(a.region, b.region, r.nnodes * sizeof(*a.region)), 0);
	scatter_plan_free(&b);
	/* root 43 = (1,0,1): node v's message takes node (v - 43)'s path, moved */
	CHECK_EQ(scatter_plan(&r, 43, SCATTER_OPT, &b), 0);
	for (uint32_t v = 0; v < r.nnodes; v++) {
		uint32_t c[3], o;

		route_coords(&r, v, c);
		o = ((c[0] + 4) % 5 * 6 + c[1]) * 7 + (c[2] + 6) % 7;
		CHECK_EQ(b.region[v], a.region[o]);
		CHECK_EQ(b.first[v + 1] - b.first[v], a.first[o + 1] - a.first[o]);
		if (v != 43)
			CHECK_EQ(b.hops[b.first[v]].step, a.hops[a.first[o]].step);
	}
	scatter_plan_free(&a);
	scatter_plan_free(&b);
}

/* SDF (§3.3): valid, never below the bound, here and there above it. */
TEST(sdf_is_valid)
{
	uint32_t shapes[][3] = { { 2, 8, 8 }, { 2, 7, 5 }, { 2, 3, 4 }, { 3, 4, 8, }, { 3, 3, 5 }, { 2, 10, 3 } };
	struct route r;

	for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++) {
		uint32_t dims[3] = { shapes[i][1], shapes[i][2], 8 }, steps;

		torus(&r, shapes[i][0], dims);
		steps = plan_checked(&r, 1, SCATTER_SDF, NULL);
		CHECK(steps >= bound_of(&r));
	}
	torus(&r, 2, (uint32_t[]){ 8, 8 });
	printf("# 8x8: sdf %u steps, opt %u\n", plan_checked(&r, 0, SCATTER_SDF, NULL),
	       plan_checked(&r, 0, SCATTER_OPT, NULL));
	torus(&r, 3, (uint32_t[]){ 4, 8, 8 });
	printf("# 4x8x8: sdf %u steps, opt %u\n", plan_checked(&r, 0, SCATTER_SDF, NULL),
	       plan_checked(&r, 0, SCATTER_OPT, NULL));
}

/* Sides of 1 (no dimension) and 2 (one link, one region). */
TEST(sides_of_one_and_two)
{
	struct route r;
	struct scatter_plan p;

	torus(&r, 3, (uint32_t[]){ 4, 1, 8 });
	CHECK_EQ(plan_checked(&r, 0, SCATTER_OPT, NULL), 8);   /* as 4x8: ceil(31/4) */
	torus(&r, 3, (uint32_t[]){ 2, 2, 2 });
	CHECK_EQ(scatter_plan(&r, 0, SCATTER_OPT, &p), 0);
	CHECK_EQ(p.nregions, 3);
	CHECK_EQ(p.bound, 3);
	CHECK_EQ(check_plan(&r, &p, 0), 0);
	CHECK_EQ(p.steps, 3);
	scatter_plan_free(&p);
	torus(&r, 2, (uint32_t[]){ 2, 9 });
	CHECK_EQ(plan_checked(&r, 3, SCATTER_OPT, NULL), bound_of(&r));
	torus(&r, 1, (uint32_t[]){ 1 });
	CHECK_EQ(scatter_plan(&r, 0, SCATTER_OPT, &p), 0);
	CHECK_EQ(p.bound, 0);
	CHECK_EQ(p.steps, 0);
	CHECK_EQ(p.nregions, 0);
	scatter_plan_free(&p);
	/* a ring of 2 to 10, where the bound is reached */
	for (uint32_t side = 2; side <= 10; side++) {
		torus(&r, 1, &side);
		CHECK_EQ(plan_checked(&r, 0, SCATTER_OPT, NULL), bound_of(&r));
	}
	/* refused */
	CHECK_EQ(scatter_plan(&r, r.nnodes, SCATTER_OPT, &p), -EINVAL);
	CHECK_EQ(scatter_plan(&r, 0, 7, &p), -EINVAL);
	CHECK_EQ(route_init(&r, ROUTE_MESH, 1, (uint32_t[]){ 4 }, 4), 0);
	CHECK_EQ(scatter_plan(&r, 0, SCATTER_OPT, &p), -EINVAL);
	CHECK_EQ(scatter_algo_by_name("sdf"), SCATTER_SDF);
	CHECK_EQ(scatter_algo_by_name("opt"), SCATTER_OPT);
	CHECK_EQ(scatter_algo_by_name("x"), -1);
}

/* ---- schedules, run by the simulator ---- */

static uint8_t pat(uint32_t v, uint64_t i)
{
	return (uint8_t)(v * 131 + i * 7 + 1);
}

/* Scatter and gather of blocks of 0-6 bytes (node v: (v * 5) % 7) as
 * schedules: sched_check accepts them, sched_run delivers every byte once. */
static void run_sched(const struct route *r, uint32_t root, enum scatter_algo algo)
{
	uint32_t n = r->nnodes;
	uint64_t *count = malloc(n * sizeof(*count)), *displ = malloc(n * sizeof(*displ)), total = 0;
	struct scatter_plan p[2];
	char why[256] = "";

	for (uint32_t v = 0; v < n; v++) {
		count[v] = (v * 5) % 7;
		displ[v] = total;
		total += count[v];
	}
	CHECK_EQ(scatter_plan(r, root, algo, &p[0]), 0);
	CHECK_EQ(scatter_reverse(&p[0], &p[1]), 0);
	for (int gather = 0; gather < 2; gather++) {
		struct sched_mem *mem = calloc(n, sizeof(*mem));
		uint32_t *writes = calloc(total + n * 8 + 1, sizeof(*writes));
		struct sched_run_stats st;
		struct sched s;
		int bad = 0;

		CHECK_EQ(sched_init(&s, n), 0);
		CHECK_EQ(scatter_sched(&p[gather], count, displ, &s), 0);
		CHECK_EQ(sched_check(&s, why, sizeof(why)), 0);
		if (why[0])
			fprintf(stderr, "  %s: %s\n", name(r->ndims, r->dims), why);
		for (uint32_t v = 0; v < n; v++) {
			/* the root's buffer holds every block, the others their own
			 * (or nothing: the root's own block in scatter is a COPY) */
			uint64_t slen = gather ? count[v] : v == root ? total : 0;
			uint64_t rlen = !gather ? count[v] : v == root ? total : 0;

			mem[v].send = calloc(2, sizeof(void *));
			mem[v].recv = calloc(2, sizeof(void *));
			mem[v].send_len = calloc(2, 8);
			mem[v].recv_len = calloc(2, 8);
			mem[v].send[0] = malloc(slen + 1);
			mem[v].recv[0] = malloc(rlen + 1);
			mem[v].send_len[0] = slen;
			mem[v].recv_len[0] = rlen;
			memset(mem[v].recv[0], 0xee, rlen);
			for (uint32_t w = 0; w < n; w++)
				for (uint64_t i = 0; i < count[w]; i++) {
					if (!gather && v == root)
						mem[v].send[0][displ[w] + i] = pat(w, i);
					else if (gather && w == v)
						mem[v].send[0][i] = pat(w, i);
				}
		}
		CHECK_EQ(sched_run(&s, mem, 7 + gather, writes, &st, why, sizeof(why)), 0);
		uint64_t at = 0;
		for (uint32_t v = 0; v < n; v++) {
			uint64_t rlen = mem[v].recv_len[0];

			for (uint64_t i = 0; i < rlen; i++) {
				uint32_t w = v;
				uint64_t j = i;

				if (gather && v == root) {
					for (w = 0; displ[w] + count[w] <= i; w++)
						;
					j = i - displ[w];
				}
				if (mem[v].recv[0][i] != pat(w, j) || writes[at + i] != 1) {
					if (!bad)
						fprintf(stderr, "  node %u byte %lu: %02x want %02x, %u writes\n", v,
							(unsigned long)i, mem[v].recv[0][i], pat(w, j), writes[at + i]);
					bad++;
				}
			}
			at += rlen;
		}
		CHECK_EQ(bad, 0);
		/* one message per node and link crossed: the root sends p - 1 (scatter) */
		CHECK_EQ(st.messages, p[gather].first[n]);
		if (!gather)
			CHECK_EQ(st.sends_max, n - 1);
		else
			CHECK_EQ(st.recvs_max, n - 1);
		for (uint32_t v = 0; v < n; v++) {
			free(mem[v].send[0]);
			free(mem[v].recv[0]);
			free(mem[v].send);
			free(mem[v].recv);
			free(mem[v].send_len);
			free(mem[v].recv_len);
		}
		free(mem);
		free(writes);
		sched_free(&s);
	}
	scatter_plan_free(&p[0]);
	scatter_plan_free(&p[1]);
	free(count);
	free(displ);
}

/* The order keys: furthest first on the root's links (OPT). */
TEST(sched_order_keys)
{
	struct route r;
	struct scatter_plan p;
	struct sched s;

	torus(&r, 2, (uint32_t[]){ 5, 6 });
	CHECK_EQ(scatter_plan(&r, 4, SCATTER_OPT, &p), 0);
	CHECK_EQ(sched_init(&s, r.nnodes), 0);
	uint64_t count[30], displ[30];
	for (uint32_t v = 0; v < 30; v++) {
		count[v] = 1;
		displ[v] = v;
	}
	CHECK_EQ(scatter_sched(&p, count, displ, &s), 0);
	const struct sched_node *root = &s.node[4];
	for (uint32_t i = 0; i < root->nsteps; i++)
		for (uint32_t j = 0; j < root->nsteps; j++) {
			const struct sched_step *a = &root->steps[i], *b = &root->steps[j];

			if (a->kind == SCHED_SEND && b->kind == SCHED_SEND && a->peer == b->peer && a->order < b->order)
				CHECK(p.dist[a->msg] >= p.dist[b->msg]);
		}
	sched_free(&s);
	scatter_plan_free(&p);
}

TEST(schedules_run)
{
	struct route r;

	torus(&r, 2, (uint32_t[]){ 4, 4 });
	run_sched(&r, 0, SCATTER_OPT);
	run_sched(&r, 5, SCATTER_SDF);
	torus(&r, 3, (uint32_t[]){ 3, 3, 3 });
	run_sched(&r, 13, SCATTER_OPT);
	run_sched(&r, 0, SCATTER_SDF);
	torus(&r, 2, (uint32_t[]){ 7, 5 });
	run_sched(&r, 11, SCATTER_OPT);
	torus(&r, 2, (uint32_t[]){ 8, 8 });
	run_sched(&r, 0, SCATTER_OPT);
	torus(&r, 3, (uint32_t[]){ 2, 3, 4 });
	run_sched(&r, 7, SCATTER_OPT);
	torus(&r, 3, (uint32_t[]){ 4, 8, 8 });
	run_sched(&r, 100, SCATTER_OPT);
}

int main(void)
{
	RUN(opt_reaches_the_bound_2d_sides_3_to_10);
	RUN(opt_reaches_the_bound_3d_sides_3_to_6);
	RUN(opt_reaches_the_bound_3d_sides_7_to_10);
	RUN(paper_figures);
	RUN(other_roots);
	RUN(deterministic);
	RUN(sdf_is_valid);
	RUN(sides_of_one_and_two);
	RUN(sched_order_keys);
	RUN(schedules_run);
	return check_done();
}
