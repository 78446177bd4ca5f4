/* tests/unit/check.h - the smallest test harness that does the job.
 *
 *   TEST(name) { CHECK(x == 1); }
 *   int main(void) { RUN(name); return check_done(); }
 *
 * Prints "ok - name" or "not ok - name" per test (tests/run.sh counts them)
 * and the failing expression with its line.
 */
#ifndef FERRY_CHECK_H
#define FERRY_CHECK_H

#include <stdio.h>

static int check_failed_total, check_failed_now;

#define CHECK(cond) do {                                                         \
	if (!(cond)) {                                                           \
		check_failed_now++;                                              \
		fprintf(stderr, "%s:%d: CHECK(%s) failed\n", __FILE__, __LINE__, #cond); \
	}                                                                        \
} while (0)

#define CHECK_EQ(a, b) do {                                                      \
	long long a_ = (long long)(a), b_ = (long long)(b);                      \
	if (a_ != b_) {                                                          \
		check_failed_now++;                                              \
		fprintf(stderr, "%s:%d: %s == %s failed: %lld != %lld\n", __FILE__, __LINE__, \
			#a, #b, a_, b_);                                         \
	}                                                                        \
} while (0)

#define TEST(name) static void name(void)

#define RUN(name) do {                                                           \
	check_failed_now = 0;                                                    \
	name();                                                                  \
	printf("%s - %s: %s\n", check_failed_now ? "not ok" : "ok", UNIT, #name); \
	fflush(stdout);                                                          \
	check_failed_total += check_failed_now;                                  \
} while (0)

static inline int check_done(void)
{
	return check_failed_total ? 1 : 0;
}

#endif
