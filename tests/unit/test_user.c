/* tests/unit/test_user.c - per-uid accounting and limits (daemon/local/user.c):
 * node-wide and per-uid limits on connections, endpoints, jobs and memory,
 * the sentence a refused client gets, and a user freed once it holds
 * nothing. */
#define UNIT "user"
#include "check.h"
#include "../../daemon/local/user.c"

#include <string.h>

static struct conf conf;

static void limits(void)
{
	memset(&conf, 0, sizeof(conf));
	conf.max_clients = 5;
	conf.user_clients = 3;
	conf.max_unjoined = 4;
	conf.user_unjoined = 2;
	conf.user_jobs = 2;
	conf.memory_bytes = 1000;
	conf.user_memory_bytes = 600;
	user_init(&conf);
}

TEST(connections_per_uid_and_for_the_node)
{
	struct user *a, *b, *c;

	limits();
	a = user_get(1000);
	b = user_get(1001);
	c = user_get(0);
	CHECK(a && b && c && a != b);
	CHECK(user_get(1000) == a);
	CHECK_EQ(user_take_unjoined(a), 0);
	CHECK_EQ(user_take_unjoined(a), 0);
	CHECK_EQ(user_take_unjoined(a), -EDQUOT);
	CHECK(strcmp(user_refusal(), "uid 1000 has 2 connections without an endpoint (limits.user_unjoined = 2)") == 0);
	CHECK_EQ(user_take_unjoined(b), 0);     /* another uid still gets in */
	CHECK_EQ(user_take_unjoined(c), 0);     /* root is a user like any other */
	CHECK_EQ(user_total.unjoined, 4);
	CHECK_EQ(user_take_unjoined(b), -EUSERS);
	CHECK(strcmp(user_refusal(), "too many connections without an endpoint (limits.max_unjoined = 4)") == 0);
	CHECK_EQ(user_take_unjoined(a), -EDQUOT);       /* over both: its own limit is named */
	user_give_unjoined(a);
	CHECK_EQ(user_take_unjoined(b), 0);
	user_give_unjoined(a);
	user_give_unjoined(b);
	user_give_unjoined(b);
	user_give_unjoined(c);
	CHECK_EQ(user_total.unjoined, 0);
	CHECK_EQ(user_count(), 0);              /* all freed: they hold nothing */
}

TEST(endpoints_per_uid_and_for_the_node)
{
	struct user *a, *b;

	limits();
	a = user_get(1000);
	b = user_get(1001);
	for (int i = 0; i < 3; i++)
		CHECK_EQ(user_take_endpoint(a), 0);
	CHECK_EQ(user_take_endpoint(a), -EDQUOT);
	CHECK(strcmp(user_refusal(), "uid 1000 has 3 endpoints (limits.user_clients = 3)") == 0);
	CHECK_EQ(user_take_endpoint(b), 0);
	CHECK_EQ(user_take_endpoint(b), 0);
	CHECK_EQ(user_take_endpoint(b), -EUSERS);
	CHECK(strcmp(user_refusal(), "too many clients (limits.max_clients = 5)") == 0);
	for (int i = 0; i < 3; i++)
		user_give_endpoint(a);
	CHECK_EQ(user_count(), 1);
	user_give_endpoint(b);
	user_give_endpoint(b);
	CHECK_EQ(user_count(), 0);
}

TEST(jobs_and_their_tables)
{
	struct user *a, *b;

	limits();
	a = user_get(1000);
	b = user_get(1001);
	CHECK_EQ(user_take_job(a, 100), 0);
	CHECK_EQ(user_take_job(a, 601), -EDQUOT);       /* memory first: 100 + 601 > 600 */
	CHECK(strstr(user_refusal(), "needs 601 bytes, and uid 1000 holds 100 bytes") != NULL);
	CHECK(strstr(user_refusal(), "(limits.user_memory_bytes = 600)") != NULL);
	CHECK_EQ(user_take_job(a, 100), 0);
	CHECK_EQ(user_take_job(a, 1), -EDQUOT);         /* then the count */
	CHECK(strcmp(user_refusal(), "uid 1000 has 2 jobs on this node (limits.user_jobs = 2)") == 0);
	CHECK_EQ(user_take_job(b, 600), 0);
	CHECK_EQ(a->table_bytes, 200);
	CHECK_EQ(user_total.table_bytes, 800);
	user_give_job(b, 600);                  /* b held nothing else: freed */
	CHECK_EQ(user_count(), 1);
	b = user_get(1001);
	CHECK_EQ(user_take_job(b, 500), 0);
	CHECK_EQ(user_take_queue(a, 301, 0), -ENOBUFS); /* 200 + 500 + 301 > 1000, the node's */
	user_give_job(a, 100);
	user_give_job(a, 100);
	user_give_job(b, 500);
	CHECK_EQ(user_count(), 0);
	CHECK_EQ(user_total.jobs, 0);
}

TEST(queue_memory_waits_or_is_forced)
{
	uint64_t waits = user_total.mem_waits;
	struct user *a, *b;

	limits();
	a = user_get(1000);
	b = user_get(1001);
	CHECK_EQ(user_take_endpoint(a), 0);
	CHECK_EQ(user_take_endpoint(b), 0);
	CHECK_EQ(user_take_queue(a, 500, 0), 0);
	CHECK_EQ(user_take_queue(a, 200, 0), -EDQUOT);  /* a waits ... */
	CHECK_EQ(a->mem_waits, 1);
	CHECK_EQ(user_take_queue(b, 400, 0), 0);        /* ... b does not */
	CHECK_EQ(user_take_queue(b, 200, 0), -ENOBUFS); /* the node is full */
	CHECK_EQ(user_take_queue(a, 200, 1), 0);        /* a control record goes anyway */
	CHECK_EQ(a->queue_bytes, 700);
	CHECK_EQ(user_total.queue_bytes, 1100);
	CHECK_EQ(user_total.mem_waits - waits, 2);
	user_give_queue(a, 700);
	user_give_queue(b, 400);
	CHECK_EQ(user_count(), 2);              /* they still hold endpoints */
	user_give_endpoint(a);
	user_give_endpoint(b);
	CHECK_EQ(user_count(), 0);
}

TEST(status_shows_a_user_only_themselves_and_root_everyone)
{
	struct user *a, *b;
	char *text = NULL;
	size_t len = 0;
	FILE *out;

	limits();
	a = user_get(1000);
	b = user_get(1001);
	CHECK_EQ(user_take_unjoined(a), 0);
	CHECK_EQ(user_take_unjoined(b), 0);
	out = open_memstream(&text, &len);
	user_write_status(out, 1000);
	fclose(out);
	CHECK(strstr(text, "limits per user: 3 endpoints, 2 connections without an endpoint, 2 jobs, 600 bytes") != NULL);
	CHECK(strstr(text, "user 1000: 0 endpoints, 1 connections") != NULL);
	CHECK(strstr(text, "user 1001") == NULL);
	free(text);
	out = open_memstream(&text, &len);
	user_write_status(out, 0);
	fclose(out);
	CHECK(strstr(text, "user 1000:") != NULL && strstr(text, "user 1001:") != NULL);
	free(text);
	user_give_unjoined(a);
	user_give_unjoined(b);
}

TEST(without_a_configuration_nothing_is_limited)
{
	struct user *a;

	user_init(NULL);
	a = user_get(1000);
	for (int i = 0; i < 1000; i++)
		CHECK_EQ(user_take_endpoint(a), 0);
	CHECK_EQ(user_take_job(a, 1ull << 40), 0);
	user_give_job(a, 1ull << 40);
	for (int i = 0; i < 1000; i++)
		user_give_endpoint(a);
	CHECK_EQ(user_count(), 0);
	user_fini();
}

int main(void)
{
	RUN(connections_per_uid_and_for_the_node);
	RUN(endpoints_per_uid_and_for_the_node);
	RUN(jobs_and_their_tables);
	RUN(queue_memory_waits_or_is_forced);
	RUN(status_shows_a_user_only_themselves_and_root_everyone);
	RUN(without_a_configuration_nothing_is_limited);
	return check_done();
}
