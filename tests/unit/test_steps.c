/* tests/unit/test_steps.c - the arithmetic of step completion
 * (daemon/cluster/steps.c): when a node reports, and when the home declares
 * a step complete. */
#define UNIT "steps"
#include "check.h"
#include "../../daemon/cluster/steps.h"

#include <string.h>

static struct job job(uint32_t size)
{
	struct job j;

	memset(&j, 0, sizeof(j));
	j.size = size;
	j.step = 1;
	j.id = 4097;
	return j;
}

TEST(nothing_to_report_until_a_local_rank_is_done)
{
	struct job j = job(4);

	j.sent = 10;
	CHECK_EQ(steps_due(&j, 1000000), STEPS_NOTHING);       /* not ready */
	j.ready = 1;
	CHECK_EQ(steps_due(&j, 1000000), STEPS_NOTHING);       /* nobody done */
	j.done = 1;
	CHECK_EQ(steps_due(&j, 1000000), STEPS_NOW);
}

TEST(a_report_carries_the_counters_and_is_not_repeated)
{
	struct job j = job(4);
	struct wire_ctl_report r;

	j.ready = 1;
	j.done = 2;
	j.sent = 100;
	j.ringed = 90;
	steps_report(&j, 5000000, &r);
	CHECK_EQ(r.job, 4097);
	CHECK_EQ(r.step, 1);
	CHECK_EQ(r.done, 2);
	CHECK_EQ(r.sent, 100);
	CHECK_EQ(r.ringed, 90);
	CHECK_EQ(steps_due(&j, 9000000000ull), STEPS_NOTHING);  /* nothing changed */
}

TEST(changed_counts_wait_for_the_gap_but_done_changes_go_at_once)
{
	struct job j = job(4);
	struct wire_ctl_report r;
	uint64_t t = 1000000000;

	j.ready = 1;
	j.done = 1;
	steps_report(&j, t, &r);
	j.ringed += 5;
	CHECK_EQ(steps_due(&j, t + 1), STEPS_LATER);
	CHECK_EQ(steps_due(&j, t + STEPS_REPORT_GAP_NS - 1), STEPS_LATER);
	CHECK_EQ(steps_due(&j, t + STEPS_REPORT_GAP_NS), STEPS_NOW);
	j.done = 2;
	CHECK_EQ(steps_due(&j, t + 1), STEPS_NOW);
	steps_report(&j, t + 1, &r);
	j.step = 2;
	j.done = 1;
	CHECK_EQ(steps_due(&j, t + 2), STEPS_NOW);      /* a new step */
}

/* The home's view: nodes 3 and 5 host 2 ranks each of a 4-rank job. */
TEST(complete_when_every_rank_is_done_and_everything_arrived)
{
	struct steps_node n[2] = { { .node = 3, .step = 1 }, { .node = 5, .step = 1 } };
	uint32_t step = 1;
	struct wire_ctl_report r;

	r = (struct wire_ctl_report){ .step = 1, .done = 2, .sent = 10, .ringed = 4 };
	CHECK_EQ(steps_take(n, 2, 4, &step, &n[0], &r), 0);    /* node 5 not done */
	r = (struct wire_ctl_report){ .step = 1, .done = 2, .sent = 6, .ringed = 11 };
	CHECK_EQ(steps_take(n, 2, 4, &step, &n[1], &r), 0);    /* 16 sent, 15 arrived */
	CHECK_EQ(step, 1);
	r = (struct wire_ctl_report){ .step = 1, .done = 2, .sent = 10, .ringed = 5 };
	CHECK_EQ(steps_take(n, 2, 4, &step, &n[0], &r), 1);
	CHECK_EQ(step, 2);
	CHECK_EQ(n[0].ringed, 5);
}

TEST(counts_are_cumulative_across_steps)
{
	struct steps_node n[2] = { { .node = 0, .step = 1 }, { .node = 1, .step = 1 } };
	uint32_t step = 1;
	struct wire_ctl_report r;

	r = (struct wire_ctl_report){ .step = 1, .done = 1, .sent = 3, .ringed = 3 };
	CHECK_EQ(steps_take(n, 2, 2, &step, &n[0], &r), 0);
	r = (struct wire_ctl_report){ .step = 1, .done = 1, .sent = 0, .ringed = 0 };
	CHECK_EQ(steps_take(n, 2, 2, &step, &n[1], &r), 1);
	/* Step 2: node 0 is done again; node 1's last report is of step 1, so
	 * its done count does not count, only its totals. */
	r = (struct wire_ctl_report){ .step = 2, .done = 1, .sent = 8, .ringed = 3 };
	CHECK_EQ(steps_take(n, 2, 2, &step, &n[0], &r), 0);
	r = (struct wire_ctl_report){ .step = 2, .done = 1, .sent = 0, .ringed = 5 };
	CHECK_EQ(steps_take(n, 2, 2, &step, &n[1], &r), 1);
	CHECK_EQ(step, 3);
}

/* A node whose last report is of the previous step: its done count is of
 * that step, so it must not complete this one even where the sums agree. */
TEST(a_done_count_of_the_previous_step_does_not_count)
{
	struct steps_node n[2] = { { .node = 0, .step = 1 }, { .node = 1, .step = 1 } };
	uint32_t step = 1;
	struct wire_ctl_report r;

	r = (struct wire_ctl_report){ .step = 1, .done = 1, .sent = 2, .ringed = 1 };
	CHECK_EQ(steps_take(n, 2, 2, &step, &n[0], &r), 0);
	r = (struct wire_ctl_report){ .step = 1, .done = 1, .sent = 1, .ringed = 2 };
	CHECK_EQ(steps_take(n, 2, 2, &step, &n[1], &r), 1);
	/* Step 2: node 0 is done, nothing more was sent; node 1 says nothing. */
	r = (struct wire_ctl_report){ .step = 2, .done = 1, .sent = 2, .ringed = 1 };
	CHECK_EQ(steps_take(n, 2, 2, &step, &n[0], &r), 0);
	CHECK_EQ(step, 2);
	r = (struct wire_ctl_report){ .step = 2, .done = 1, .sent = 1, .ringed = 2 };
	CHECK_EQ(steps_take(n, 2, 2, &step, &n[1], &r), 1);
	CHECK_EQ(step, 3);
}

TEST(late_reports_of_an_earlier_step_change_nothing)
{
	struct steps_node n[1] = { { .node = 0, .step = 2, .done = 0, .sent = 7, .ringed = 7 } };
	uint32_t step = 2;
	struct wire_ctl_report r = { .step = 1, .done = 1, .sent = 9, .ringed = 9 };

	CHECK_EQ(steps_take(n, 1, 1, &step, &n[0], &r), 0);
	CHECK_EQ(n[0].sent, 7);
	CHECK_EQ(step, 2);
}

TEST(one_rank_on_one_node_with_no_items)
{
	struct steps_node n[1] = { { .node = 0, .step = 1 } };
	uint32_t step = 1;
	struct wire_ctl_report r = { .step = 1, .done = 1 };

	CHECK_EQ(steps_take(n, 1, 1, &step, &n[0], &r), 1);
	CHECK_EQ(step, 2);
}

int main(void)
{
	RUN(nothing_to_report_until_a_local_rank_is_done);
	RUN(a_report_carries_the_counters_and_is_not_repeated);
	RUN(changed_counts_wait_for_the_gap_but_done_changes_go_at_once);
	RUN(complete_when_every_rank_is_done_and_everything_arrived);
	RUN(counts_are_cumulative_across_steps);
	RUN(a_done_count_of_the_previous_step_does_not_count);
	RUN(late_reports_of_an_earlier_step_change_nothing);
	RUN(one_rank_on_one_node_with_no_items);
	return check_done();
}
