/* tests/unit/test_job.c - this node's job table (daemon/local/job.c): joins,
 * refusals, ids, users kept apart, and a rank taken again after its first
 * endpoint failed. */
#define UNIT "job"
#include "check.h"
#include "../../daemon/local/job.h"
#include "../../daemon/local/user.h"

#include <errno.h>
#include <string.h>

/* Endpoints are only pointers to the job table. */
static struct ep *const A = (struct ep *)0x1000, *const B = (struct ep *)0x2000, *const C = (struct ep *)0x3000;

TEST(joins_and_refusals)
{
	struct job *j, *k;

	CHECK_EQ(job_join(1000, "sort", 4, 0, 7, A, &j), 0);
	CHECK_EQ(j->size, 4);
	CHECK_EQ(j->joined, 1);
	CHECK(j->ranks[0].ep == A && j->ranks[0].node == 7);
	CHECK(j->ranks[1].ep == NULL && j->ranks[1].node == JOB_NO_NODE);
	CHECK_EQ(job_join(1000, "sort", 4, 0, 7, B, &k), -EADDRINUSE);
	CHECK_EQ(job_join(1000, "sort", 5, 1, 7, B, &k), -EINVAL);      /* another size */
	CHECK_EQ(job_join(1000, "sort", 4, 4, 7, B, &k), -EADDRINUSE);  /* no rank 4 */
	CHECK_EQ(job_join(1000, "new", 2, 2, 7, B, &k), -EINVAL);       /* rank >= size */
	CHECK_EQ(job_join(1000, "sort", 4, 3, 7, B, &k), 0);
	CHECK(k == j);
	CHECK_EQ(job_count(), 1);
	CHECK_EQ(job_leave(j, 0, A), 0);
	CHECK_EQ(job_leave(j, 3, B), 1);                /* the last rank here: freed */
	CHECK_EQ(job_count(), 0);
}

TEST(users_are_kept_apart)
{
	struct job *a, *b;

	CHECK_EQ(job_join(1000, "same", 2, 0, 0, A, &a), 0);
	CHECK_EQ(job_join(1001, "same", 3, 0, 0, B, &b), 0);    /* same name, other user */
	CHECK(a != b);
	CHECK(job_find(1000, "same") == a);
	CHECK(job_find(1001, "same") == b);
	CHECK(job_find(1002, "same") == NULL);
	job_leave(a, 0, A);
	job_leave(b, 0, B);
}

TEST(ids_find_jobs_and_go_with_them)
{
	struct job *a, *b;

	CHECK_EQ(job_join(1000, "one", 1, 0, 0, A, &a), 0);
	CHECK_EQ(job_join(1000, "two", 1, 0, 0, B, &b), 0);
	job_set_id(a, 4097, 5);
	job_set_id(b, 4097 + 256, 5);              /* the same hash bucket */
	CHECK(job_by_id(4097, 5) == a);
	CHECK(job_by_id(4097 + 256, 5) == b);
	CHECK(job_by_id(4098, 5) == NULL);
	CHECK(job_by_id(4097, 4) == NULL);      /* an earlier job that had this id */
	CHECK(job_by_id(4097, 5) == a);
	job_leave(a, 0, A);
	CHECK(job_by_id(4097, 5) == NULL);         /* not a freed job */
	CHECK(job_by_id(4097 + 256, 5) == b);
	job_leave(b, 0, B);
	CHECK(job_by_id(4097 + 256, 5) == NULL);
}

/* An endpoint that failed leaves the table at once (ep_fail) but stays a
 * member until its session ends it; a new client may take the rank meanwhile,
 * and the old endpoint's leaving must not take the slot from it. */
TEST(a_rank_taken_again_after_its_endpoint_failed)
{
	struct job *j, *k;

	CHECK_EQ(job_join(1000, "again", 2, 0, 5, A, &j), 0);
	j->ranks[0].ep = NULL;                  /* A failed */
	CHECK_EQ(job_join(1000, "again", 2, 0, 5, C, &k), 0);
	CHECK(k == j);
	CHECK_EQ(j->joined, 2);
	CHECK_EQ(job_leave(j, 0, A), 0);
	CHECK(j->ranks[0].ep == C);
	CHECK_EQ(j->ranks[0].node, 5);
	CHECK_EQ(job_leave(j, 0, C), 1);
}

/* A job someone else still holds outlives its last rank here, unlisted: a
 * job of the same name joined meanwhile is a new one. */
TEST(a_held_job_outlives_its_ranks_unlisted)
{
	struct job *j, *k;

	CHECK_EQ(job_join(1000, "held", 1, 0, 0, A, &j), 0);
	job_set_id(j, 4200, 5);
	job_hold(j);
	CHECK_EQ(job_leave(j, 0, A), 0);        /* still held: not freed */
	CHECK(j->gone);
	CHECK(job_find(1000, "held") == NULL);
	CHECK(job_by_id(4200, 5) == NULL);
	CHECK_EQ(job_count(), 0);
	CHECK_EQ(job_join(1000, "held", 1, 0, 0, B, &k), 0);
	CHECK(k != j);
	CHECK_EQ(job_put(j), 1);                /* the last reference frees it */
	CHECK(job_find(1000, "held") == k);
	CHECK_EQ(job_leave(k, 0, B), 1);
}

/* A job and its rank table are its user's: charged when made, given back
 * when it ends, and a JOIN whose table would not fit is refused before
 * anything is allocated. */
TEST(jobs_are_charged_to_their_user)
{
	struct conf conf = { .max_clients = 8, .user_clients = 8, .max_unjoined = 8, .user_unjoined = 8,
			     .user_jobs = 2, .memory_bytes = 1 << 20, .user_memory_bytes = 1 << 19 };
	uint64_t table = sizeof(struct job) + 1000 * sizeof(struct job_rank);
	struct job *j, *k;

	user_init(&conf);
	CHECK_EQ(job_join(1000, "a", 1000, 0, 0, A, &j), 0);
	CHECK(j->user != NULL);
	CHECK_EQ(j->mem_bytes, table);
	CHECK_EQ(j->user->table_bytes, table);
	CHECK_EQ(job_join(1000, "a", 1000, 1, 0, B, &k), 0);    /* a rank more: no new table */
	CHECK_EQ(user_total.table_bytes, table);
	CHECK_EQ(job_join(1000, "huge", PROTO_MAX_RANKS, 0, 0, C, &k), -EDQUOT);
	CHECK(strstr(user_refusal(), "limits.user_memory_bytes = 524288") != NULL);
	CHECK_EQ(job_count(), 1);
	CHECK_EQ(job_join(1000, "b", 2, 0, 0, C, &k), 0);
	CHECK_EQ(job_join(1000, "c", 2, 0, 0, C, &k), -EDQUOT);     /* limits.user_jobs */
	CHECK_EQ(job_join(1001, "c", 2, 0, 0, C, &k), 0);           /* another user's */
	job_leave(k, 0, C);
	job_leave(job_find(1000, "b"), 0, C);
	job_leave(j, 0, A);
	job_leave(j, 1, B);
	CHECK_EQ(user_total.table_bytes, 0);
	CHECK_EQ(user_count(), 0);
	user_init(NULL);
}

int main(void)
{
	RUN(joins_and_refusals);
	RUN(users_are_kept_apart);
	RUN(ids_find_jobs_and_go_with_them);
	RUN(a_rank_taken_again_after_its_endpoint_failed);
	RUN(a_held_job_outlives_its_ranks_unlisted);
	RUN(jobs_are_charged_to_their_user);
	return check_done();
}
