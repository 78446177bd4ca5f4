/* daemon/cluster/steps.c - see steps.h. */
#include "steps.h"

enum steps_due steps_due(const struct job *j, uint64_t now_ns)
{
	if (!j->ready || !j->done)
		return STEPS_NOTHING;   /* reports are only needed once a local rank is done */
	if (j->reported.step == j->step && j->reported.done == j->done && j->reported.sent == j->sent &&
	    j->reported.ringed == j->ringed)
		return STEPS_NOTHING;
	if (j->reported.step == j->step && j->reported.done == j->done &&
	    now_ns - j->reported.ns < STEPS_REPORT_GAP_NS)
		return STEPS_LATER;
	return STEPS_NOW;
}

void steps_report(struct job *j, uint64_t now_ns, struct wire_ctl_report *r)
{
	*r = (struct wire_ctl_report){ .job = j->id, .gen = j->gen, .step = j->step, .done = j->done,
				       .sent = j->sent, .ringed = j->ringed };
	j->reported.step = j->step;
	j->reported.done = j->done;
	j->reported.sent = j->sent;
	j->reported.ringed = j->ringed;
	j->reported.ns = now_ns;
}

int steps_take(struct steps_node *nodes, uint32_t n, uint32_t size, uint32_t *step, struct steps_node *from,
	       const struct wire_ctl_report *r)
{
	uint64_t sent = 0, ringed = 0;
	uint32_t done = 0;

	if (r->step != *step)
		return 0;       /* a late report of a finished step */
	from->step = r->step;
	from->done = r->done;
	from->sent = r->sent;
	from->ringed = r->ringed;
	for (uint32_t i = 0; i < n; i++) {
		if (nodes[i].step == *step)
			done += nodes[i].done;
		sent += nodes[i].sent;
		ringed += nodes[i].ringed;
	}
	if (done < size || sent != ringed)
		return 0;
	(*step)++;
	return 1;
}
