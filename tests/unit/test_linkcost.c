/* tests/unit/test_linkcost.c - a link's α and β from its frames' round
 * trips (daemon/plan/linkcost.c): minima, small and large samples, the two
 * windows, unknown until measured. */
#define UNIT "linkcost"
#include "check.h"
#include "../../daemon/plan/linkcost.c"

#define MS 1000000ull

TEST(unknown_until_measured)
{
	struct linkcost c = { 0 };

	CHECK_EQ(linkcost_alpha_ns(&c), 0);
	CHECK_EQ(linkcost_beta_ps(&c), 0);
	/* a middling frame says neither */
	linkcost_sample(&c, 1 * MS, 4096, 50000);
	CHECK_EQ(linkcost_alpha_ns(&c), 0);
	CHECK_EQ(linkcost_beta_ps(&c), 0);
	CHECK_EQ(c.samples, 1);
}

TEST(minima_of_small_and_large)
{
	struct linkcost c = { 0 };

	linkcost_sample(&c, 1 * MS, 100, 30000);
	linkcost_sample(&c, 2 * MS, 0, 20000);          /* the smallest small: α = 10 us */
	linkcost_sample(&c, 3 * MS, 1024, 90000);       /* queued behind something */
	CHECK_EQ(linkcost_alpha_ns(&c), 10000);
	/* 256 KiB in 300 us, and in 200 us: β from the faster, 200e3 ns * 1000 / 262144 */
	linkcost_sample(&c, 4 * MS, 256 << 10, 300000);
	linkcost_sample(&c, 5 * MS, 256 << 10, 200000);
	CHECK_EQ(linkcost_beta_ps(&c), 200000ull * 1000 / (256 << 10));
	/* a sample of 0 ns is not 0 (unknown) */
	linkcost_sample(&c, 6 * MS, 64 << 10, 0);
	CHECK(linkcost_beta_ps(&c) >= 1);
}

TEST(windows_forget_old_minima)
{
	struct linkcost c = { 0 };

	linkcost_sample(&c, 1 * MS, 0, 10000);                          /* α 5 us */
	linkcost_sample(&c, 1 * MS + LINKCOST_WINDOW_NS, 0, 40000);    /* next window: still 5 us */
	CHECK_EQ(linkcost_alpha_ns(&c), 5000);
	linkcost_sample(&c, 1 * MS + 2 * LINKCOST_WINDOW_NS, 0, 60000); /* the 10 us window is gone */
	CHECK_EQ(linkcost_alpha_ns(&c), 20000);
	/* a gap of two windows: only the new sample counts */
	linkcost_sample(&c, 1 * MS + 5 * LINKCOST_WINDOW_NS, 0, 80000);
	CHECK_EQ(linkcost_alpha_ns(&c), 40000);
	/* only large frames for three windows: α stays what it was (stale,
	 * not unknown), β comes from them */
	linkcost_sample(&c, 1 * MS + 6 * LINKCOST_WINDOW_NS, LINKCOST_LARGE, 1000000);
	linkcost_sample(&c, 1 * MS + 7 * LINKCOST_WINDOW_NS, LINKCOST_LARGE, 1000000);
	linkcost_sample(&c, 1 * MS + 8 * LINKCOST_WINDOW_NS, LINKCOST_LARGE, 1000000);
	CHECK_EQ(linkcost_alpha_ns(&c), 40000);
	CHECK(linkcost_beta_ps(&c) > 0);
	/* ... and a new small sample replaces it */
	linkcost_sample(&c, 1 * MS + 8 * LINKCOST_WINDOW_NS + 1, 0, 20000);
	CHECK_EQ(linkcost_alpha_ns(&c), 10000);
}

int main(void)
{
	RUN(unknown_until_measured);
	RUN(minima_of_small_and_large);
	RUN(windows_forget_old_minima);
	return check_done();
}
