/* daemon/cluster/steps.h - the end of steps, by counting: the arithmetic of
 * it, with no I/O, so that it is unit-tested on its own (the messages are
 * cluster.c's and home.c's).
 *
 * Each node hosting ranks counts, per job and over all steps, the items its
 * ranks handed over (sent) and the items written into its endpoints' RX rings
 * or dropped for a departed rank (ringed); the data path keeps these in
 * struct job.  A rank's DONE record follows its items in its TX ring, so a
 * node's sent count is final for its ranks that are done.  While any local
 * rank is done, the node reports (done, sent, ringed) to the job's home
 * whenever they change: at once when done or the step changes, else at most
 * every STEPS_REPORT_GAP_NS.  The home declares step s complete when every
 * rank is done in s and the sums of sent and ringed over the nodes are equal.
 * A rank cannot send items of step s+1 before it hears of that
 * (ferry_step_wait), so counts of different steps never mix.
 */
#ifndef FERRY_CLUSTER_STEPS_H
#define FERRY_CLUSTER_STEPS_H

#include "../local/job.h"
#include "../../proto/wire.h"

#include <stdint.h>

#define STEPS_REPORT_GAP_NS 50000u      /* at most one report per job per 50 us */

/* --- the node's side --- */

enum steps_due {
	STEPS_NOTHING,          /* nothing to report */
	STEPS_LATER,            /* counts changed, but the last report was too recent */
	STEPS_NOW,              /* report now */
};

/* Whether j's counters are to be reported to its home at time now_ns. */
enum steps_due steps_due(const struct job *j, uint64_t now_ns);

/* Fills r with j's counters and remembers them as reported at now_ns. */
void steps_report(struct job *j, uint64_t now_ns, struct wire_ctl_report *r);

/* --- the home's side --- */

/* The home's record of one node that hosts ranks of a job. */
struct steps_node {
	uint32_t node;
	uint64_t incarnation;           /* of the daemon there whose ranks joined (home.c) */
	int have;                       /* acknowledged the latest rank table */
	uint32_t alpha_ns, beta_ps;     /* ... and the cost of its links its HAVE said (0: unknown) */
	uint32_t step, done;            /* its latest report: done counts ranks of that step */
	uint64_t sent, ringed;
};

/* A report r from one of the n nodes of a job of size ranks whose current
 * step is *step.  A report about another step (a late one) is ignored.
 * Returns 1 if step *step is now complete, and then advances *step; else 0. */
int steps_take(struct steps_node *nodes, uint32_t n, uint32_t size, uint32_t *step, struct steps_node *from,
	       const struct wire_ctl_report *r);

#endif
