/* tests/unit/test_log.c - rate-limited logging (daemon/core/log.c): a burst
 * per call site, then a count of what was left out, naming the message. */
#define UNIT "log"
#include "check.h"
#include "../../daemon/core/log.c"

#include <stdlib.h>
#include <time.h>
#include <unistd.h>

/* Runs fn with stderr going to a file; returns what it wrote (static). */
static const char *captured(void (*fn)(void))
{
	static char out[8192];
	FILE *f = tmpfile();
	int saved = dup(2);
	size_t n;

	fflush(stderr);
	dup2(fileno(f), 2);
	fn();
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	rewind(f);
	n = fread(out, 1, sizeof(out) - 1, f);
	out[n] = '\0';
	fclose(f);
	return out;
}

static unsigned lines_with(const char *text, const char *what)
{
	unsigned n = 0;

	for (const char *p = text; (p = strstr(p, what)); p += strlen(what))
		n++;
	return n;
}

static struct log_ratelimit rl = { .burst = 3, .interval_ms = 200 };
static int written;

static void flood(void)
{
	for (int i = 0; i < 20; i++)
		written += log_rl(&rl, LOG_NOTICE, "client %d refused", i);
}

static void after_the_interval(void)
{
	struct timespec ts = { 0, 250 * 1000000 };

	nanosleep(&ts, NULL);
	written += log_rl(&rl, LOG_NOTICE, "client %d refused", 99);
}

TEST(a_burst_then_a_count_naming_the_message)
{
	const char *out;

	log_init("test", LOG_INFO);
	written = 0;
	out = captured(flood);
	CHECK_EQ(written, 3);
	CHECK_EQ(lines_with(out, "refused\n"), 3);
	CHECK(strstr(out, "<5>test: client 0 refused\n") != NULL);
	CHECK(strstr(out, "client 3 refused") == NULL);
	CHECK_EQ(rl.suppressed, 17);

	written = 0;
	out = captured(after_the_interval);
	CHECK_EQ(written, 1);
	CHECK(strstr(out, "<5>test: 17 messages like \"client %d refused\" suppressed in the last 1 s\n") != NULL);
	CHECK(strstr(out, "client 99 refused\n") != NULL);
	CHECK_EQ(rl.suppressed, 0);
}

static void below_level(void)
{
	static struct log_ratelimit quiet;

	for (int i = 0; i < 50; i++)
		written += log_rl(&quiet, LOG_DEBUG, "not shown %d", i);
	CHECK_EQ(quiet.suppressed, 0);  /* not counted: never meant to be shown */
}

TEST(lines_above_the_level_are_neither_written_nor_counted)
{
	written = 0;
	CHECK_EQ(captured(below_level)[0], '\0');
	CHECK_EQ(written, 0);
}

static void sites(void)
{
	for (int i = 0; i < 30; i++) {
		log_rl_notice("site a %d", i);
		log_rl_warn("site b %d", i);
	}
}

TEST(each_call_site_has_its_own_limit)
{
	const char *out = captured(sites);

	CHECK_EQ(lines_with(out, "<5>test: site a"), LOG_RL_BURST);
	CHECK_EQ(lines_with(out, "<4>test: site b"), LOG_RL_BURST);
}

int main(void)
{
	RUN(a_burst_then_a_count_naming_the_message);
	RUN(lines_above_the_level_are_neither_written_nor_counted);
	RUN(each_call_site_has_its_own_limit);
	return check_done();
}
