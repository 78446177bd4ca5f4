/* tests/unit/test_a2a.c - the all-to-all routes of daemon/plan/a2a.c, run
 * by a simulator: every block reaches its destination, and each strategy
 * sends the messages the paper counts (seed 000, §2.2-2.4). */
#define UNIT "a2a"
#include "check.h"
#include "../../daemon/plan/a2a.c"

#include <stdlib.h>

/* What one strategy does over P nodes, counted by the simulator. */
struct sim {
	int ok;                                 /* every block ends at its destination */
	uint32_t phases;
	uint32_t sends_max, recvs_max;          /* messages per node, all phases */
	uint32_t phase_sends_max[A2A_MAX_PHASES], phase_recvs_max[A2A_MAX_PHASES];
	uint64_t sends_total;
	uint64_t blocks_moved;                  /* block hops, all phases */
	uint32_t self_messages;                 /* messages from a node to itself: none may be */
};

static void simulate(enum a2a_strategy s, uint32_t P, struct sim *out)
{
	struct a2a_plan p;
	uint32_t *hold = malloc((size_t)P * P * sizeof(*hold));
	uint8_t *msg = malloc((size_t)P * P);   /* msg[from * P + to]: a message this phase */
	uint32_t *sends = calloc(P, sizeof(*sends)), *recvs = calloc(P, sizeof(*recvs));
	uint32_t *ps = malloc(P * sizeof(*ps)), *pr = malloc(P * sizeof(*pr));

	memset(out, 0, sizeof(*out));
	CHECK_EQ(a2a_plan_init(&p, s, P), 0);
	out->phases = p.phases;
	for (uint32_t i = 0; i < P * P; i++)
		hold[i] = i / P;                /* block (src, dst) = i starts at src */
	for (uint32_t ph = 0; ph < p.phases; ph++) {
		memset(msg, 0, (size_t)P * P);
		memset(ps, 0, P * sizeof(*ps));
		memset(pr, 0, P * sizeof(*pr));
		for (uint32_t i = 0; i < P * P; i++) {
			uint32_t dst = i % P, h = hold[i], to = a2a_next(&p, h, dst, ph);

			if (to >= P) {
				out->ok = -1;
				goto done;
			}
			if (to == h)
				continue;
			out->blocks_moved++;
			if (!msg[(size_t)h * P + to]) {
				msg[(size_t)h * P + to] = 1;
				ps[h]++;
				pr[to]++;
			}
			hold[i] = to;
		}
		for (uint32_t n = 0; n < P; n++) {
			out->self_messages += msg[(size_t)n * P + n];
			sends[n] += ps[n];
			recvs[n] += pr[n];
			out->sends_total += ps[n];
			if (ps[n] > out->phase_sends_max[ph])
				out->phase_sends_max[ph] = ps[n];
			if (pr[n] > out->phase_recvs_max[ph])
				out->phase_recvs_max[ph] = pr[n];
		}
	}
	out->ok = 1;
	for (uint32_t i = 0; i < P * P; i++) {
		if (hold[i] != i % P)
			out->ok = 0;
		/* (a2a_holder agrees with the step by step walk) */
		if (a2a_holder(&p, i / P, i % P, p.phases - 1) != hold[i])
			out->ok = 0;
	}
	for (uint32_t n = 0; n < P; n++) {
		if (sends[n] > out->sends_max)
			out->sends_max = sends[n];
		if (recvs[n] > out->recvs_max)
			out->recvs_max = recvs[n];
	}
done:
	free(hold);
	free(msg);
	free(sends);
	free(recvs);
	free(ps);
	free(pr);
}

static const uint32_t sizes[] = { 1,  2,  3,  4,  5,  6,  7,  8,  9,   10,  11,  12,  13,  14,  15,  16,  17,
				  18, 19, 20, 23, 25, 26, 27, 28, 31,  32,  33,  35,  36,  37,  48,  49,  50,
				  63, 64, 65, 99, 100, 101, 124, 125, 126, 127, 128, 129, 216, 343, 1000, 1024 };
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))

static int is_pow2(uint32_t n) { return (n & (n - 1)) == 0; }

static uint32_t exact_root(uint32_t n, int k)
{
	uint32_t c = root_up(n, k);

	return (k == 2 ? c * c : c * c * c) == n ? c : 0;
}

TEST(every_block_reaches_its_destination_with_no_message_to_oneself)
{
	for (int s = 0; s < A2A_STRATEGIES; s++)
		for (size_t i = 0; i < NSIZES; i++) {
			struct sim r;

			simulate(s, sizes[i], &r);
			if (r.ok != 1 || r.self_messages)
				fprintf(stderr, "%s, %u nodes: ok %d, %u messages to self\n", a2a_strategy_name(s),
					sizes[i], r.ok, r.self_messages);
			CHECK_EQ(r.ok, 1);
			CHECK_EQ(r.self_messages, 0);
		}
}

TEST(direct_sends_p_minus_1_messages_in_one_phase)
{
	for (size_t i = 0; i < NSIZES; i++) {
		struct sim r;

		simulate(A2A_DIRECT, sizes[i], &r);
		CHECK_EQ(r.phases, 1);
		CHECK_EQ(r.sends_max, sizes[i] - 1);
		CHECK_EQ(r.sends_total, (uint64_t)sizes[i] * (sizes[i] - 1));
		CHECK_EQ(r.blocks_moved, (uint64_t)sizes[i] * (sizes[i] - 1));
	}
}

/* §2.2: 2(sqrt(P) - 1) messages per node on a square; with holes, a row
 * phase of at most C - 1 messages sent, and at most two more received by a
 * node standing in for holes; a column phase within the column. */
TEST(mesh_sends_2_sqrt_p_minus_1_and_holes_add_at_most_two_received)
{
	for (size_t i = 0; i < NSIZES; i++) {
		uint32_t P = sizes[i], c = root_up(P, 2), rows = (P + c - 1) / c, sq = exact_root(P, 2);
		struct sim r;

		simulate(A2A_MESH, P, &r);
		CHECK_EQ(r.phases, 2);
		if (sq) {
			CHECK_EQ(r.sends_max, 2 * (sq - 1));
			CHECK_EQ(r.recvs_max, 2 * (sq - 1));
		}
		CHECK(r.phase_sends_max[0] <= c - 1);
		CHECK(r.phase_recvs_max[0] <= c - 1 + 2);
		CHECK(r.phase_sends_max[1] <= rows - 1);
		CHECK(r.phase_recvs_max[1] <= rows - 1);
	}
}

/* §2.3: 3(cbrt(P) - 1) messages per node on a cube. */
TEST(grid_sends_3_cbrt_p_minus_1_on_a_cube)
{
	for (size_t i = 0; i < NSIZES; i++) {
		uint32_t P = sizes[i], c = root_up(P, 3), cu = exact_root(P, 3);
		struct sim r;

		simulate(A2A_GRID3D, P, &r);
		if (cu) {
			CHECK_EQ(r.sends_max, cu > 1 ? 3 * (cu - 1) : 0);
			CHECK_EQ(r.recvs_max, cu > 1 ? 3 * (cu - 1) : 0);
		}
		/* At most C - 1 messages a phase, holes or not. */
		for (uint32_t ph = 0; ph < r.phases; ph++)
			CHECK(r.phase_sends_max[ph] <= c - 1);
	}
}

/* §2.4: log2(P) phases of one message each for a power of two; otherwise
 * two more phases, and at most one more message per node. */
TEST(hypercube_sends_one_message_per_phase)
{
	for (size_t i = 0; i < NSIZES; i++) {
		uint32_t P = sizes[i], k = 0;
		struct sim r;

		while ((2u << k) <= P)
			k++;
		simulate(A2A_HYPERCUBE, P, &r);
		CHECK_EQ(r.phases, k + (is_pow2(P) ? 0 : 2));
		for (uint32_t ph = 0; ph < r.phases; ph++)
			CHECK(r.phase_sends_max[ph] <= 1);
		if (is_pow2(P))
			CHECK_EQ(r.sends_max, k);
		else
			CHECK(r.sends_max <= k + 1);
	}
}

/* a2a_stats (the library's own simulator) agrees with this one, and counts
 * dummy messages, of every strategy. */
TEST(stats_count_messages_bytes_and_dummies)
{
	for (int s = 0; s < A2A_STRATEGIES; s++)
		for (size_t i = 0; i < NSIZES && sizes[i] <= 128; i++) {
			uint32_t P = sizes[i];
			struct a2a_plan p;
			struct a2a_stats st, nb;
			struct sim r;

			simulate(s, P, &r);
			CHECK_EQ(a2a_plan_init(&p, s, P), 0);
			CHECK_EQ(a2a_stats(&p, P - 1, 100, &st), 0);
			CHECK_EQ(st.sends_max, r.sends_max);
			CHECK_EQ(st.recvs_max, r.recvs_max);
			CHECK(st.sends_mean * P > r.sends_total - 0.5 && st.sends_mean * P < r.sends_total + 0.5);
			if (s == A2A_DIRECT)
				CHECK_EQ(st.bytes_sent_max, 100ull * (P - 1));
			if (s == A2A_HYPERCUBE && is_pow2(P))
				CHECK_EQ(st.bytes_sent_max, 100ull * (P / 2) * r.phases);
			/* Each node to its next one only (degree 1): every
			 * strategy sends what the all-to-all does, dummies
			 * included, but fewer bytes. */
			if (P < 2)
				continue;
			CHECK_EQ(a2a_stats(&p, 1, 100, &nb), 0);
			CHECK_EQ(nb.sends_max, st.sends_max);
			CHECK(nb.bytes_sent_max >= 100 && nb.bytes_sent_max <= st.bytes_sent_max);
		}
	{
		struct a2a_plan p;
		struct a2a_stats st;

		CHECK_EQ(a2a_plan_init(&p, A2A_MESH, 4), 0);
		CHECK_EQ(a2a_stats(&p, 4, 1, &st), -EINVAL);   /* degree >= P */
		CHECK_EQ(a2a_plan_init(&p, A2A_MESH, A2A_STATS_MAX_NODES + 1), 0);
		CHECK_EQ(a2a_stats(&p, 1, 1, &st), -EINVAL);
	}
}

static double predict(enum a2a_strategy s, uint32_t P, uint32_t degree, uint64_t m, double a, double b)
{
	struct a2a_plan p;

	CHECK_EQ(a2a_plan_init(&p, s, P), 0);
	return a2a_predict_us(&p, degree, m, a, b);
}

static int near(double x, double y) { return x > y - 1e-6 && x < y + 1e-6; }

/* The paper's equations, worked by hand: P = 16, alpha 5 us, beta 3.33
 * ns/byte, m = 100 bytes (§2.1's example values). */
TEST(predictions_follow_the_papers_equations)
{
	double mb = 0.333;

	CHECK(near(predict(A2A_DIRECT, 16, 15, 100, 5, 3.33), 15 * (5 + mb)));                /* (1) */
	CHECK(near(predict(A2A_MESH, 16, 15, 100, 5, 3.33), 2 * 3 * (5 + 4 * mb)));           /* (2) */
	CHECK(near(predict(A2A_HYPERCUBE, 16, 15, 100, 5, 3.33), 4 * 5 + 4 * 0.5 * 16 * mb)); /* (5) */
	/* 16 nodes in a 3x3x3 grid: holes. */
	CHECK(near(predict(A2A_GRID3D, 16, 15, 100, 5, 3.33), 4 * 2 * 5 + 5 * 15 * mb));      /* (4) */
	CHECK(near(predict(A2A_GRID3D, 27, 26, 100, 5, 3.33), 3 * 2 * (5 + 9 * mb)));         /* (3) */
	/* 17 nodes: a hypercube of 16 plus one, two more phases, twice the bytes. */
	CHECK(near(predict(A2A_HYPERCUBE, 17, 16, 100, 5, 3.33), 6 * 5 + 4 * 2 * 8.5 * mb));  /* (6) */
	/* Many-to-many, degree 3. */
	CHECK(near(predict(A2A_DIRECT, 16, 3, 100, 5, 3.33), 15 * 5 + 3 * mb));              /* (10)* */
	CHECK(near(predict(A2A_MESH, 16, 3, 100, 5, 3.33), 2 * 3 * 5 + 2 * 3 * mb));          /* (7) */
	CHECK(near(predict(A2A_GRID3D, 16, 3, 100, 5, 3.33), 4 * 2 * 5 + 5 * 3 * mb));        /* (8) */
	CHECK(near(predict(A2A_HYPERCUBE, 16, 3, 100, 5, 3.33), 4 * 5 + 4 * 3 * mb));         /* (9) */
	CHECK(near(predict(A2A_MESH, 1, 0, 100, 5, 3.33), 0));
}

/* Small blocks go indirect, large ones direct (Figs. 6-7). */
TEST(the_choice_follows_the_block_size)
{
	CHECK(a2a_choose(64, 63, 8, &(struct cost){ 5, 3.33, 0, NULL }) != A2A_DIRECT);
	CHECK_EQ(a2a_choose(64, 63, 1 << 20, &(struct cost){ 5, 3.33, 0, NULL }), A2A_DIRECT);
	/* Two nodes: nothing to combine, the hypercube is direct; a tie goes
	 * to the lower strategy. */
	CHECK(near(predict(A2A_DIRECT, 2, 1, 8, 5, 3.33), predict(A2A_HYPERCUBE, 2, 1, 8, 5, 3.33)));
	CHECK_EQ(a2a_choose(2, 1, 8, &(struct cost){ 5, 3.33, 0, NULL }), A2A_DIRECT);
	CHECK_EQ(a2a_choose(1, 0, 8, &(struct cost){ 5, 3.33, 0, NULL }), A2A_DIRECT);
}

/* More destinations never cost less, and the many-to-many meets the
 * all-to-all without a jump at degree P - 1. */
TEST(predictions_grow_with_the_degree)
{
	for (int s = 0; s < A2A_STRATEGIES; s++)
		for (size_t i = 0; i < NSIZES && sizes[i] <= 300; i++) {
			uint32_t P = sizes[i];
			double last = 0;

			for (uint32_t d = 0; d < P; d++) {
				double t = predict(s, P, d, 1000, 5, 1);

				if (t < last - 1e-9)
					fprintf(stderr, "%s, %u nodes: degree %u predicts %.3f < %.3f\n",
						a2a_strategy_name(s), P, d, t, last);
				CHECK(t >= last - 1e-9);
				last = t;
			}
		}
}

TEST(names_and_bad_arguments)
{
	struct a2a_plan p;

	for (int s = 0; s < A2A_STRATEGIES; s++)
		CHECK_EQ(a2a_strategy_by_name(a2a_strategy_name(s)), s);
	CHECK_EQ(a2a_strategy_by_name("torus"), -1);
	CHECK_EQ(a2a_strategy_by_name(NULL), -1);
	CHECK(a2a_strategy_name(A2A_STRATEGIES) == NULL);
	CHECK_EQ(a2a_plan_init(&p, A2A_MESH, 0), -EINVAL);
	CHECK_EQ(a2a_plan_init(&p, A2A_STRATEGIES, 4), -EINVAL);
	CHECK_EQ(a2a_plan_init(&p, A2A_GRID3D, A2A_MAX_NODES + 1), -EINVAL);
	CHECK_EQ(a2a_plan_init(&p, A2A_GRID3D, A2A_MAX_NODES), 0);
	CHECK_EQ(a2a_holder(&p, A2A_MAX_NODES - 1, 0, p.phases - 1), 0);
	CHECK_EQ(a2a_holder(&p, 0, A2A_MAX_NODES - 1, p.phases - 1), A2A_MAX_NODES - 1);
}

int main(void)
{
	RUN(every_block_reaches_its_destination_with_no_message_to_oneself);
	RUN(direct_sends_p_minus_1_messages_in_one_phase);
	RUN(mesh_sends_2_sqrt_p_minus_1_and_holes_add_at_most_two_received);
	RUN(grid_sends_3_cbrt_p_minus_1_on_a_cube);
	RUN(hypercube_sends_one_message_per_phase);
	RUN(stats_count_messages_bytes_and_dummies);
	RUN(predictions_follow_the_papers_equations);
	RUN(the_choice_follows_the_block_size);
	RUN(predictions_grow_with_the_degree);
	RUN(names_and_bad_arguments);
	return check_done();
}
