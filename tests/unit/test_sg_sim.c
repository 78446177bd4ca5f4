/* tests/unit/test_sg_sim.c - the alpha-beta simulation of scatter and
 * gather on a torus (daemon/plan/sg_sim.c): small cases worked by hand,
 * the bounds every algorithm must respect (never below the planner's
 * lower bound, a plan never slower than its step-synchronous time), NAIVE
 * against OPT on the paper's tori, the same time from every root, gather
 * as long as scatter for a plan, and plans that are not plans refused.
 * Prints the figures for 8x8 and 4x8x8 as "# " lines. */
#define UNIT "sg_sim"
#include "check.h"
#include "../../daemon/plan/sg_sim.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static const struct sg_sim_cost zero_beta = { .block = 1 << 20, .alpha_us = 50, .beta_us_per_byte = 0 };
static const struct sg_sim_cost paper = { .block = 64 << 10, .alpha_us = 50, .beta_us_per_byte = 0.01 };

static uint32_t torus(struct route *r, uint32_t nd, const uint32_t *dims)
{
	uint32_t n = 1;

	for (uint32_t d = 0; d < nd; d++)
		n *= dims[d];
	CHECK_EQ(route_init(r, ROUTE_TORUS, nd, dims, n), 0);
	return n;
}

static struct sg_sim_result run(const struct route *r, uint32_t root, int gather, enum sg_sim_algo a,
				const struct sg_sim_cost *c)
{
	struct sg_sim_result res;

	memset(&res, 0, sizeof(res));
	CHECK_EQ(sg_sim_run(r, root, gather, a, c, &res), 0);
	return res;
}

static int near(double a, double b)
{
	return fabs(a - b) <= 1e-9 * (fabs(a) + fabs(b) + 1);
}

/* A ring of 3 from node 0: one message on each link, one hop time. */
TEST(ring_of_three)
{
	static const uint32_t d[] = { 3 };
	struct route r;

	torus(&r, 1, d);
	for (int a = 0; a < SG_SIM_ALGOS; a++) {
		struct sg_sim_result res = run(&r, 0, 0, a, &paper);

		CHECK_EQ(res.rounds, 1);
		CHECK(near(res.makespan_us, 50 + 65536 * 0.01));
		CHECK(near(res.hop_us, 705.36));
		CHECK_EQ(res.hops, 2);
		CHECK_EQ(res.queue_max, 1);
		CHECK_EQ(res.relay_queue_max, 0);
	}
}

/* A ring of 4 from node 0: node 2 is 2 hops away either way and goes +
 * (route.h's ties), behind or ahead of node 1 on the link 0 -> 1.  NAIVE
 * queues furthest first, so 2 then 1: 2 hop times (1 then 2 would take 3),
 * and at every link's near end one message waits at most on a relay. */
TEST(ring_of_four_furthest_first)
{
	static const uint32_t d[] = { 4 };
	struct route r;
	struct sg_sim_result res;

	torus(&r, 1, d);
	res = run(&r, 0, 0, SG_SIM_NAIVE, &paper);
	CHECK_EQ(res.rounds, 2);
	CHECK_EQ(res.link_max, 2);
	CHECK_EQ(res.queue_max, 2);
	CHECK_EQ(res.queue_from, 0);
	CHECK_EQ(res.queue_to, 1);
	CHECK_EQ(res.relay_queue_max, 1);
	CHECK_EQ(res.hops, 4);
	res = run(&r, 0, 0, SG_SIM_OPT, &paper);
	CHECK_EQ(res.rounds, 2);
	CHECK_EQ(res.steps, 2);
}

/* 3x3 from node 0 at beta = 0: OPT takes the bound, 2 = max(ceil(8 / 4), 2),
 * times alpha.  NAIVE (highest dimension first) sends 0 -> 1 the three
 * messages of column 1: 3 alpha. */
TEST(three_by_three_beta_zero)
{
	static const uint32_t d[] = { 3, 3 };
	struct route r;
	struct sg_sim_result res;

	torus(&r, 2, d);
	res = run(&r, 0, 0, SG_SIM_OPT, &zero_beta);
	CHECK_EQ(res.bound, 2);
	CHECK_EQ(res.rounds, 2);
	CHECK(near(res.makespan_us, 2 * 50.0));
	CHECK(near(res.step_sync_us, 2 * 50.0));
	res = run(&r, 0, 0, SG_SIM_NAIVE, &zero_beta);
	CHECK_EQ(res.rounds, 3);
	CHECK_EQ(res.link_max, 3);
	CHECK(near(res.makespan_us, 3 * 50.0));
}

/* On every torus below, from every root (a few for the larger ones),
 * scatter and gather, every algorithm: at least the lower bound, every
 * message on a shortest path (hops = the sum of the distances), the same
 * time from every root (a torus looks the same from every node), a plan
 * within its step-synchronous time - and equal to it: OPT takes the bound,
 * and SDF is greedy (a message that waited at step s - 1 found its link
 * busy then), so in both every hop at step s waits for one at step s - 1
 * and equal hop costs leave nothing to gain - and the gather of a plan as
 * long as its scatter. */
TEST(bounds_and_roots)
{
	static const uint32_t shapes[][4] = {
		{ 1, 5 }, { 1, 8 }, { 2, 3, 3 }, { 2, 4, 4 }, { 2, 5, 7 }, { 2, 8, 8 }, { 3, 3, 3, 3 }, { 3, 2, 6, 3 },
		{ 3, 4, 8, 8 },
	};

	for (size_t k = 0; k < sizeof(shapes) / sizeof(shapes[0]); k++) {
		uint32_t nd = shapes[k][0];
		struct route r;
		uint32_t n = torus(&r, nd, &shapes[k][1]);
		uint32_t at0[2][SG_SIM_ALGOS];
		uint64_t dist_sum = 0;

		for (uint32_t v = 0; v < n; v++)
			dist_sum += (uint64_t)route_hops(&r, 0, v);
		for (uint32_t root = 0; root < n; root += n > 64 ? 37 : 1) {
			for (int g = 0; g < 2; g++) {
				for (int a = 0; a < SG_SIM_ALGOS; a++) {
					struct sg_sim_result res = run(&r, root, g, a, &paper);

					CHECK(res.rounds >= res.bound);
					CHECK(res.bound > 0);
					CHECK_EQ(res.hops, dist_sum);
					CHECK(near(res.makespan_us, res.rounds * res.hop_us));
					if (a != SG_SIM_NAIVE) {
						CHECK(res.makespan_us <= res.step_sync_us);
						CHECK(res.rounds <= res.steps);
						CHECK_EQ(res.rounds, res.steps);
					}
					if (a == SG_SIM_OPT)
						CHECK_EQ(res.rounds, res.bound);
					if (root == 0)
						at0[g][a] = res.rounds;
					CHECK_EQ(res.rounds, at0[g][a]);
				}
				CHECK(at0[g][SG_SIM_OPT] <= at0[g][SG_SIM_SDF]);
				CHECK(at0[g][SG_SIM_OPT] <= at0[g][SG_SIM_NAIVE]);
			}
			for (int a = 0; a < SG_SIM_ALGOS; a++)
				if (a != SG_SIM_NAIVE)
					CHECK_EQ(at0[1][a], at0[0][a]);
		}
	}
}

/* The paper's tori at large blocks: NAIVE's root link carries every
 * message whose highest differing coordinate is + (32 of 63 on 8x8, 128
 * of 255 on 4x8x8), OPT the bound (16, 43). */
TEST(naive_behind_opt_on_the_papers_tori)
{
	static const uint32_t d2[] = { 8, 8 }, d3[] = { 4, 8, 8 };
	static const struct sg_sim_cost big = { .block = 1 << 20, .alpha_us = 50, .beta_us_per_byte = 0.01 };
	struct route r;
	struct sg_sim_result o, nv;

	torus(&r, 2, d2);
	o = run(&r, 0, 0, SG_SIM_OPT, &big);
	nv = run(&r, 0, 0, SG_SIM_NAIVE, &big);
	CHECK_EQ(o.rounds, 16);
	CHECK_EQ(nv.rounds, 32);
	CHECK_EQ(nv.link_max, 32);
	CHECK(nv.makespan_us >= o.makespan_us);
	torus(&r, 3, d3);
	o = run(&r, 0, 0, SG_SIM_OPT, &big);
	nv = run(&r, 0, 0, SG_SIM_NAIVE, &big);
	CHECK_EQ(o.rounds, 43);
	CHECK_EQ(nv.rounds, 128);
	CHECK(nv.makespan_us >= o.makespan_us);
}

/* Plans that are not plans of this torus: a hop that is no link, a path
 * that does not reach its node, another torus. */
TEST(bad_plans_refused)
{
	static const uint32_t d[] = { 4, 4 }, d2[] = { 4, 5 };
	struct route r, r2;
	struct scatter_plan p;
	struct sg_sim_result res;
	uint32_t v = 10;

	torus(&r, 2, d);
	torus(&r2, 2, d2);
	CHECK_EQ(scatter_plan(&r, 0, SCATTER_OPT, &p), 0);
	CHECK_EQ(sg_sim_plan(&r2, &p, &paper, &res), -EINVAL);
	CHECK_EQ(sg_sim_plan(&r, &p, &paper, &res), 0);
	/* node 10 = (2,2): 4 hops; make its last hop end elsewhere */
	uint32_t last = p.first[v + 1] - 1, to = p.hops[last].to;
	p.hops[last].to = p.hops[last].from;
	CHECK_EQ(sg_sim_plan(&r, &p, &paper, &res), -EINVAL);
	p.hops[last].to = 0;    /* (0,0): no neighbour of (2,1) or (1,2) */
	CHECK_EQ(sg_sim_plan(&r, &p, &paper, &res), -EINVAL);
	p.hops[last].to = to;
	CHECK_EQ(sg_sim_plan(&r, &p, &paper, &res), 0);
	scatter_plan_free(&p);
	CHECK_EQ(sg_sim_naive(&r, 16, 0, &paper, &res), -EINVAL);
	CHECK_EQ(sg_sim_algo_by_name("naive"), SG_SIM_NAIVE);
	CHECK_EQ(sg_sim_algo_by_name("best"), -1);
}

/* The figures (issue 13's benchmark): alpha 50 us, beta 0.01 us/B. */
TEST(figures)
{
	static const uint32_t shapes[][4] = { { 2, 8, 8 }, { 3, 4, 8, 8 } };
	static const uint64_t blocks[] = { 64, 4 << 10, 64 << 10, 1 << 20 };

	for (size_t k = 0; k < 2; k++) {
		struct route r;

		torus(&r, shapes[k][0], &shapes[k][1]);
		for (size_t b = 0; b < sizeof(blocks) / sizeof(blocks[0]); b++) {
			struct sg_sim_cost c = { .block = blocks[b], .alpha_us = 50, .beta_us_per_byte = 0.01 };

			printf("# %s m %7llu B:", k ? "4x8x8" : "8x8  ", (unsigned long long)blocks[b]);
			for (int a = 0; a < SG_SIM_ALGOS; a++) {
				struct sg_sim_result res = run(&r, 0, 0, a, &c);

				printf(" %s %.1f us (%u)", sg_sim_algo_name(a), res.makespan_us, res.rounds);
			}
			printf("\n");
		}
	}
}

int main(void)
{
	RUN(ring_of_three);
	RUN(ring_of_four_furthest_first);
	RUN(three_by_three_beta_zero);
	RUN(bounds_and_roots);
	RUN(naive_behind_opt_on_the_papers_tori);
	RUN(bad_plans_refused);
	RUN(figures);
	return check_done();
}
