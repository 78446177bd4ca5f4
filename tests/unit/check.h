/* tests/unit/check.h - the smallest test harness that does the job.
 *
 *   TEST(name) { CHECK(x == 1); }
 *   int main(void) { RUN(name); return check_done(); }
 *
 * Prints "ok - name" or "not ok - name" per test (tests/run.sh counts them)
 * and the failing expression with its line; SKIP("why") inside a test ends
 * it as "ok - name # SKIP why", which tests/run.sh counts as skipped.
 */
#ifndef FERRY_CHECK_H
#define FERRY_CHECK_H

#include <stdio.h>

static int check_failed_total, check_failed_now;
static const char *check_skipped_now;

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

/* Ends the current test as skipped: what it checks cannot be checked here. */
#define SKIP(why) do { check_skipped_now = (why); return; } while (0)

#define RUN(name) do {                                                           \
	check_failed_now = 0;                                                    \
	check_skipped_now = NULL;                                                \
	name();                                                                  \
	if (check_skipped_now && !check_failed_now)                              \
		printf("ok - %s: %s # SKIP %s\n", UNIT, #name, check_skipped_now); \
	else                                                                     \
		printf("%s - %s: %s\n", check_failed_now ? "not ok" : "ok", UNIT, #name); \
	fflush(stdout);                                                          \
	check_failed_total += check_failed_now;                                  \
} while (0)

static inline int check_done(void)
{
	return check_failed_total ? 1 : 0;
}

#endif
