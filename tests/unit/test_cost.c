/* tests/unit/test_cost.c - the cost module (daemon/plan/cost.c): the
 * runtime functions refine the α–β models, the fit recovers the
 * coefficients of the points it is given (weighted least squares, the
 * median of a point's times, the fallbacks of cost.h), the table's text
 * reads back as it was written and rejects what is not a point, and the
 * planners' models are linear in α, β, γ where cost.h says they are. */
#define UNIT "cost"
#include "check.h"
#include "../../daemon/plan/cost.c"
#include "../../daemon/plan/a2a.h"
#include "../../daemon/plan/orth.h"
#include "../../daemon/plan/rs.h"
#include "../../daemon/plan/sg_sched.h"

#include <math.h>

/* A model of two algorithms: alg 0 costs 2 messages and 1000 bytes, alg 1
 * one message and 5000 bytes; alg 2 cannot run. */
static double toy(const void *ctx, uint32_t alg, double a, double b, double g)
{
	(void)ctx;
	if (alg == 2)
		return INFINITY;
	return alg ? a + 5 * b + 0 * g : 2 * a + b + 3 * g;
}

/* t's functions, refitted (cost_table_add leaves them to cost_table_refit). */
static struct cost_fn (*fns(struct cost_table *t))[CTL_FAM_ALGS_MAX]
{
	cost_table_refit(t);
	return t->fn;
}

static int near(double x, double y, double rel)
{
	return fabs(x - y) <= rel * fabs(y) + 1e-12;
}

TEST(predict_and_choose)
{
	struct cost_fn fn[3] = { { 0, 0 }, { 100, 0 }, { 0, 0 } };
	struct cost c = { 10, 1, 0.5, NULL };
	struct cost_x x;

	cost_features(toy, NULL, 0, &x);
	CHECK(x.a == 2 && x.b == 1 && x.g == 3);
	/* no function: the model at the links' α, β, γ */
	CHECK(near(cost_predict(&c, toy, NULL, 0), 20 + 1 + 1.5, 1e-12));
	CHECK(near(cost_predict(&c, toy, NULL, 1), 10 + 5, 1e-12));
	CHECK(isinf(cost_predict(&c, toy, NULL, 2)));
	CHECK_EQ(cost_choose(&c, toy, NULL, 3), 1);
	CHECK_EQ(cost_fitted(&c, 1), 0);
	/* alg 1's function: 100 µs a start-up, so alg 0 wins */
	c.fn = fn;
	CHECK(cost_fitted(&c, 1) && !cost_fitted(&c, 0));
	CHECK(near(cost_predict(&c, toy, NULL, 1), 100, 1e-12));
	CHECK_EQ(cost_choose(&c, toy, NULL, 3), 0);
	/* a tie goes to the lower; nothing that can run: 0 */
	fn[1] = (struct cost_fn){ 0, 22.5 / 5 };
	CHECK_EQ(cost_choose(&c, toy, NULL, 2), 0);
	CHECK_EQ(cost_choose(&c, toy, NULL, 0), 0);
}

/* Points on T = tau a + tc b + gamma g exactly: the fit gives tau and tc
 * back; a point's time is the median of its runs. */
TEST(fit_recovers_coefficients)
{
	static struct cost_table t;
	const double tau = 37.5, tc = 0.8, gamma = 0.25;

	cost_table_init(&t);
	for (uint32_t k = 0; k < 6; k++) {
		struct cost_x x = { 1 + k % 3, 100.0 * (1 << k), 10.0 * k };
		double T = tau * x.a + tc * x.b + gamma * x.g;

		for (int r = 0; r < COST_MIN_RUNS; r++) {
			CHECK_EQ(cost_table_points(&t, CTL_FAM_ALLREDUCE, 1), k);
			CHECK_EQ(cost_table_add(&t, CTL_FAM_ALLREDUCE, 1, 8, 2, 1000 + k, &x, gamma, 0.4,
						T * (r == 1 ? 9 : 1), 0), 0);      /* one slow run in three */
		}
	}
	CHECK_EQ(cost_table_points(&t, CTL_FAM_ALLREDUCE, 1), 6);
	CHECK(near(fns(&t)[CTL_FAM_ALLREDUCE][1].tau_us, tau, 1e-9));
	CHECK(near(fns(&t)[CTL_FAM_ALLREDUCE][1].tc_ns, tc, 1e-9));
	/* the other algorithms learnt nothing */
	CHECK(fns(&t)[CTL_FAM_ALLREDUCE][0].tau_us == 0 && fns(&t)[CTL_FAM_ALLREDUCE][0].tc_ns == 0);
	CHECK(fns(&t)[CTL_FAM_BCAST][1].tau_us == 0);
}

TEST(fit_fallbacks)
{
	static struct cost_table t;
	struct cost_x x = { 2, 1000, 0 }, y = { 4, 2000, 0 };

	/* fewer runs than COST_MIN_RUNS: no function */
	cost_table_init(&t);
	for (int r = 0; r < COST_MIN_RUNS - 1; r++)
		cost_table_add(&t, CTL_FAM_BCAST, 0, 4, 1, 64, &x, 0, 0.5, 500, 0);
	CHECK(fns(&t)[CTL_FAM_BCAST][0].tau_us == 0 && fns(&t)[CTL_FAM_BCAST][0].tc_ns == 0);
	/* one point: t_c is the links' β, τ the rest: (500 - 0.5 x 1000) / 2 */
	cost_table_add(&t, CTL_FAM_BCAST, 0, 4, 1, 64, &x, 0, 0.5, 500, 0);
	CHECK(near(fns(&t)[CTL_FAM_BCAST][0].tc_ns, 0.5, 1e-12));
	CHECK(near(fns(&t)[CTL_FAM_BCAST][0].tau_us, 0, 1e-12) || fns(&t)[CTL_FAM_BCAST][0].tau_us == 0);
	/* two points of the same ratio b / a cannot tell either: the same way */
	for (int r = 0; r < COST_MIN_RUNS; r++)
		cost_table_add(&t, CTL_FAM_BCAST, 0, 4, 1, 128, &y, 0, 0.5, 1000 + 4 * 50, 0);
	CHECK(near(fns(&t)[CTL_FAM_BCAST][0].tc_ns, 0.5, 1e-12));
	CHECK(fns(&t)[CTL_FAM_BCAST][0].tau_us > 0 && fns(&t)[CTL_FAM_BCAST][0].tau_us < 50);
	/* times that fall as bytes grow would make t_c negative: 0, τ alone */
	cost_table_init(&t);
	for (int r = 0; r < COST_MIN_RUNS; r++) {
		cost_table_add(&t, CTL_FAM_SCAN, 0, 4, 1, 8, &(struct cost_x){ 1, 10, 0 }, 0, 0.5, 300, 0);
		cost_table_add(&t, CTL_FAM_SCAN, 0, 4, 1, 9, &(struct cost_x){ 1, 100000, 0 }, 0, 0.5, 100, 0);
	}
	CHECK(fns(&t)[CTL_FAM_SCAN][0].tc_ns == 0 && fns(&t)[CTL_FAM_SCAN][0].tau_us > 100 &&
	      fns(&t)[CTL_FAM_SCAN][0].tau_us < 300);
	/* what is not a measurement is refused; one node's nothing to fit */
	CHECK_EQ(cost_table_add(&t, CTL_FAMS, 0, 4, 1, 8, &x, 0, 0.5, 1, 0), -EINVAL);
	CHECK_EQ(cost_table_add(&t, CTL_FAM_SCAN, 1, 4, 1, 8, &x, 0, 0.5, 1, 0), -EINVAL);
	CHECK_EQ(cost_table_add(&t, CTL_FAM_SCAN, 0, 4, 1, 8, &x, 0, 0.5, 0, 0), -EINVAL);
	CHECK_EQ(cost_table_add(&t, CTL_FAM_SCAN, 0, 4, 1, 8, &x, 0, 0.5, NAN, 0), -EINVAL);
	CHECK_EQ(cost_table_add(&t, CTL_FAM_SCAN, 0, 4, 1, 8, &(struct cost_x){ INFINITY, 1, 0 }, 0, 0.5, 1, 0),
		 -EINVAL);
	CHECK_EQ(cost_table_add(&t, CTL_FAM_SCAN, 0, 1, 1, 8, &(struct cost_x){ 0, 0, 0 }, 0, 0.5, 7, 0), 0);
	CHECK_EQ(cost_table_points(&t, CTL_FAM_SCAN, 0), 2);
}

/* A full table makes room by the point measured longest ago, and the
 * algorithm whose point went is refitted: no function stays without its
 * points (a review found one that did, sent in GO for ever). */
TEST(eviction)
{
	static struct cost_table t;
	struct cost_x x = { 1, 1, 0 };

	cost_table_init(&t);
	for (uint32_t k = 0; k < 4; k++)
		for (int r = 0; r < COST_MIN_RUNS; r++)
			cost_table_add(&t, CTL_FAM_BCAST, 0, 2, 1, k, &x, 0, 1, 100000, 0);
	CHECK(fns(&t)[CTL_FAM_BCAST][0].tau_us > 1000);
	for (uint32_t k = 0; k <= COST_POINTS; k++)
		for (int r = 0; r < COST_MIN_RUNS; r++)
			cost_table_add(&t, CTL_FAM_ALLTOALL, 0, 2, 1, k, &x, 0, 1, 10, 0);
	CHECK_EQ(cost_table_points(&t, CTL_FAM_ALLTOALL, 0), COST_POINTS);
	CHECK_EQ(cost_table_points(&t, CTL_FAM_BCAST, 0), 0);
	CHECK(fns(&t)[CTL_FAM_BCAST][0].tau_us == 0 && fns(&t)[CTL_FAM_BCAST][0].tc_ns == 0);
	for (uint32_t i = 0; i < COST_POINTS; i++)
		CHECK(t.pt[i].fam == CTL_FAM_ALLTOALL && t.pt[i].bytes != 0);  /* (the first went) */
}

/* A point not measured for COST_AGE_S goes, and its function with it: an
 * algorithm once slow is predicted by the links again, and tried.  Many
 * samples of another point age nothing (an age in samples did: one busy
 * point made every other one old, in make bench-costs). */
TEST(ageing)
{
	static struct cost_table t;
	struct cost_x x = { 1, 1, 0 };
	const uint64_t t0 = 1000000;

	cost_table_init(&t);
	for (int r = 0; r < COST_MIN_RUNS; r++)
		cost_table_add(&t, CTL_FAM_REDUCE, 2, 4, 1, 64, &x, 0, 1, 5000, t0);
	CHECK(fns(&t)[CTL_FAM_REDUCE][2].tau_us > 0);
	for (uint32_t k = 0; k < 100000; k++)
		cost_table_add(&t, CTL_FAM_ALLTOALL, 0, 2, 1, 8, &x, 0, 1, 10, t0 + COST_AGE_S - 1);
	CHECK_EQ(cost_table_points(&t, CTL_FAM_REDUCE, 2), 1);
	CHECK(fns(&t)[CTL_FAM_REDUCE][2].tau_us > 0);
	cost_table_add(&t, CTL_FAM_ALLTOALL, 0, 2, 1, 8, &x, 0, 1, 10, t0 + COST_AGE_S);
	CHECK_EQ(cost_table_points(&t, CTL_FAM_REDUCE, 2), 0);
	CHECK(fns(&t)[CTL_FAM_REDUCE][2].tau_us == 0 && fns(&t)[CTL_FAM_REDUCE][2].tc_ns == 0);
	CHECK(fns(&t)[CTL_FAM_ALLTOALL][0].tau_us > 0);
}

/* What GO carries: ns and ps, rounded, never 0 where not 0. */
TEST(wire_rounding)
{
	struct cost_fn f = { 12.3456, 0.0004 }, g;
	uint32_t tau, tc;

	cost_fn_wire(&f, &tau, &tc);
	CHECK(tau == 12346 && tc == 1);
	cost_fn_unwire(tau, tc, &g);
	CHECK(near(g.tau_us, 12.346, 1e-12) && near(g.tc_ns, 0.001, 1e-12));
	f = (struct cost_fn){ 0, 1e12 };
	cost_fn_wire(&f, &tau, &tc);
	CHECK(tau == 0 && tc == UINT32_MAX);
}

TEST(text_round_trip_and_rejects)
{
	static struct cost_table t, u;
	char buf[65536], err[160];
	size_t n;
	int bad;

	cost_table_init(&t);
	for (uint32_t k = 0; k < 5; k++)
		for (int r = 0; r < 4 + (int)k; r++)     /* 4 .. 8 runs: the window's order kept */
			cost_table_add(&t, k % CTL_FAMS, 0, 3 + k, 1 + k, 1ull << (10 * k),
				       &(struct cost_x){ 1.5 + k, 1e3 * k, 0.1 * k }, 0.2, 0.4, 100.0 + k + r / 7.0, 0);
	n = cost_table_format(&t, buf, sizeof(buf));
	CHECK(n > 0 && n < sizeof(buf));
	CHECK_EQ(cost_table_format(&t, buf, 10), n);   /* (cut, as snprintf: the length it needs) */
	n = cost_table_format(&t, buf, sizeof(buf));
	CHECK_EQ(cost_table_parse(&u, buf, n, 0, err, sizeof(err)), 0);
	for (uint32_t f = 0; f < CTL_FAMS; f++)
		CHECK(near(u.fn[f][0].tau_us, fns(&t)[f][0].tau_us, 1e-6) && near(u.fn[f][0].tc_ns, fns(&t)[f][0].tc_ns, 1e-6));
	{
		char again[65536];

		CHECK_EQ(cost_table_format(&u, again, sizeof(again)), n);
		CHECK(memcmp(again, buf, n) == 0);
	}
	/* comments and empty lines; bad lines are counted and skipped */
	{
		static const char *const bad_lines[] = {
			"point allreduce single 4 1 64 2 1000 0 0.2 0.4",               /* no time */
			"point allreduce ring 4 1 64 2 1000 0 0.2 0.4 5 5 5",           /* no such algorithm */
			"point allgatherv single 4 1 64 2 1000 0 0.2 0.4 5 5 5",        /* a kind, not a family */
			"point allreduce single 0 1 64 2 1000 0 0.2 0.4 5 5 5",         /* no node */
			"point allreduce single 4 1 64 -2 1000 0 0.2 0.4 5 5 5",        /* negative */
			"point allreduce single 4 1 64 nan 1000 0 0.2 0.4 5 5 5",
			"point allreduce single 4 1 64 2 1000 0 0.2 0.4 5 0 5",         /* a time of 0 */
			"point allreduce single 4 1 64 2 1000 0 0.2 0.4 5 5 5 5 5 5 5 5 5 5",   /* > COST_WINDOW */
			"point allreduce single 4 1 64x 2 1000 0 0.2 0.4 5 5 5",
			"point allreduce single 4 1 -64 2 1000 0 0.2 0.4 5 5 5",
			"point allreduce single 4 1 64 0 0 0 0.2 0.4 5 5 5",            /* nothing to fit */
			"point allreduce single 4 1 99999999999999999999 2 1 0 0.2 0.4 5 5 5",
			"point allreduce single 4 1 8 2 1000 0 0.2 0.4 5 5 5",          /* the key of the good one */
			"pointless",
		};
		char text[4096];
		size_t len = (size_t)snprintf(text, sizeof(text), "ferry-costs 1\n# a comment\n\n"
					     "point allreduce single 4 1 8 2 10 0 0.2 0.4 5 6 7\n");

		for (size_t i = 0; i < sizeof(bad_lines) / sizeof(bad_lines[0]); i++)
			len += (size_t)snprintf(text + len, sizeof(text) - len, "%s\n", bad_lines[i]);
		bad = cost_table_parse(&u, text, len, 0, err, sizeof(err));
		CHECK_EQ(bad, (int)(sizeof(bad_lines) / sizeof(bad_lines[0])));
		CHECK(strstr(err, "line 5") != NULL);
		CHECK_EQ(cost_table_points(&u, CTL_FAM_ALLREDUCE, 0), 1);
		/* one point: t_c the links' β, τ = (6 - 0.4 x 10) / 2 */
		CHECK(near(u.fn[CTL_FAM_ALLREDUCE][0].tc_ns, 0.4, 1e-12));
		CHECK(near(u.fn[CTL_FAM_ALLREDUCE][0].tau_us, 1, 1e-12));
	}
	CHECK_EQ(cost_table_parse(&u, "ferry-costs 2\n", 14, 0, err, sizeof(err)), -EINVAL);
	CHECK_EQ(cost_table_parse(&u, "", 0, 0, err, sizeof(err)), -EINVAL);
	CHECK_EQ(cost_table_parse(&u, "ferry-costs 1", 13, 0, err, sizeof(err)), 0);
	{
		char nul[] = "ferry-costs 1\npoint allreduce single 4 1 8 2 1000 0 0.2 0.4 5 6 7\0 x\n";

		CHECK_EQ(cost_table_parse(&u, nul, sizeof(nul) - 1, 0, err, sizeof(err)), 1);
	}
}

/* cost.h's claim: a model at (α, β, γ) is α x_a + β x_b + γ x_g, so a
 * function with τ = α and t_c = β predicts what the links do. */
static void linear(const char *what, cost_model_fn m, const void *ctx, uint32_t alg)
{
	struct cost_fn fn[CTL_FAM_ALGS_MAX] = { { 0, 0 } };
	struct cost ab = { 7, 0.3, 0.2, NULL }, f = ab;
	double want = m(ctx, alg, ab.alpha_us, ab.beta_ns, ab.gamma_ns);

	if (isinf(want))
		return;
	fn[alg] = (struct cost_fn){ ab.alpha_us, ab.beta_ns };
	f.fn = fn;
	if (!near(cost_predict(&f, m, ctx, alg), want, 1e-9)) {
		fprintf(stderr, "    %s alg %u: %g, the model says %g\n", what, alg, cost_predict(&f, m, ctx, alg), want);
		CHECK(0);
	}
}

TEST(models_linear)
{
	static const uint32_t Ps[] = { 2, 3, 5, 8, 9, 12, 16, 17 };
	static const uint64_t Bs[] = { 8, 1000, 1 << 20 };

	for (size_t i = 0; i < sizeof(Ps) / sizeof(Ps[0]); i++)
		for (size_t k = 0; k < sizeof(Bs) / sizeof(Bs[0]); k++) {
			uint32_t P = Ps[i];
			struct orth_dims dims;
			struct rs_model rm;
			struct a2a_model am = { P, P - 1, Bs[k] };
			struct rs_scan_model sm = { P, 4, Bs[k] };

			orth_hier_dims(P, &dims);
			for (int kind = ORTH_BCAST; kind <= ORTH_ALLGATHER; kind++) {
				struct orth_model om = { kind, P, 2, Bs[k], &dims, NULL };

				for (uint32_t a = 0; a < ORTH_ALGS; a++)
					linear("orth", orth_model_us, &om, a);
			}
			CHECK_EQ(rs_model_init(&rm, P, Bs[k], &(struct cost){ 7, 0.3, 0.2, NULL }), 0);
			for (uint32_t a = 0; a < RS_ALGS; a++)
				linear("rs", rs_model_us, &rm, a);
			for (uint32_t a = 0; a < A2A_STRATEGIES; a++)
				linear("a2a", a2a_model_us, &am, a);
			linear("scan", rs_scan_model_us, &sm, 0);
			for (int gather = 0; gather < 2; gather++) {
				struct sg_model gm = { gather, P, 2, Bs[k], 0 };

				for (uint32_t a = 0; a < SG_ALGS; a++)
					linear("sg", sg_model_us, &gm, a);
			}
		}
}

int main(void)
{
	RUN(predict_and_choose);
	RUN(fit_recovers_coefficients);
	RUN(fit_fallbacks);
	RUN(eviction);
	RUN(ageing);
	RUN(wire_rounding);
	RUN(text_round_trip_and_rejects);
	RUN(models_linear);
	return check_done();
}
