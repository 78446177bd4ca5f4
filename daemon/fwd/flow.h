/* daemon/fwd/flow.h - flow control per destination rank across nodes, so that
 * one job's receiver that does not keep up holds back only that job.
 *
 * Why not just stop reading the link (what a full queue did before)?  A link
 * between two daemons carries the items of every job, and of every user,
 * whose route crosses it, and the daemon's own control items.  Pausing it
 * for one endpoint's full queue stops all of them, backs up across the
 * cluster, and lets one user who never calls ferry_recv stall everyone else.
 *
 * The design.  An item from the network for a local endpoint whose queue is
 * full (limits.pending_bytes) is parked in that queue anyway (ep_park, up to
 * ep_park_limit), and the first time that happens this node tells every
 * other node of the job: XOFF (job, rank).  Those nodes stop taking items
 * for that rank out of their local TX rings: the sending rank's TX draining
 * stops at the first such item (ep->blocked_rank), just as it stops for a
 * full local destination, so the sender's ferry_send gets -EAGAIN and
 * nothing is lost or reordered.  Once the queue has drained to half of
 * pending_bytes, XON (job, rank) lets them go on.  Other ranks, jobs and
 * users on the same links never wait.  XOFF and XON are control items (job
 * 0), travelling the same routes as the data, so for each sending node they
 * arrive in the order they were sent.
 *
 * What is on its way when XOFF arrives (the senders' aggregation buffers and
 * link queues toward here, at most a link's worth per sending node, plus
 * what is drained while XOFF travels) still arrives and is parked: that is
 * why parking may go to 2 x pending_bytes + link_bytes.  If even that is
 * full (many sending nodes at once, or memory_bytes reached) the item waits
 * as before: reading from that link pauses until the queue drains.  That
 * last resort is the old behaviour, now reached only under a flood XOFF
 * could not hold back in time; counted as stalls in ferryctl stats.
 *
 * An endpoint that ends while its XOFF stands sends XON first (its items
 * are dropped and counted from then on, as for any rank that left).
 *
 * Ownership: nothing is held here; the state is a flag on the endpoint
 * (ep->xoff, this node asked) and a bitmap on the job (job->xoff, others
 * asked, local/job.h).
 */
#ifndef FERRY_FWD_FLOW_H
#define FERRY_FWD_FLOW_H

#include "../core/conf.h"
#include "../local/endpoint.h"

#include <stdint.h>

struct flow_stats {
	uint64_t xoff_sent, xon_sent;           /* times this node asked, per rank */
	uint64_t xoff_received, xon_received;
	uint64_t parked;                        /* items queued beyond pending_bytes */
};
extern struct flow_stats flow_stats;

void flow_init(const struct conf *c, uint32_t self);

/* An item from the network for d, whose queue is full: parks it and, the
 * first time, sends XOFF.  Returns 0, or -EAGAIN (the caller keeps the item
 * and stops reading the link, the last resort). */
int flow_park(struct ep *d, const struct proto_rec *rec, const void *payload);

/* After d's queue moved: XON once it has drained to half. */
void flow_check(struct ep *d);

/* d ends: XON if its XOFF stands. */
void flow_ep_gone(struct ep *d);

/* An XOFF (on) or XON (!on) from node `from` about rank of j. */
void flow_remote(struct job *j, uint32_t rank, uint32_t from, int on);

#endif
