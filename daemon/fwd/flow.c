/* daemon/fwd/flow.c - see flow.h. */
#include "flow.h"
#include "ctlq.h"
#include "../core/log.h"
#include "../core/loop.h"

struct flow_stats flow_stats;

static struct {
	const struct conf *conf;
	uint32_t self;
} flow;

void flow_init(const struct conf *c, uint32_t self)
{
	flow.conf = c;
	flow.self = self;
}

/* XOFF or XON about d's rank to every other node of its job. */
static void tell(struct ep *d, uint32_t type)
{
	struct job *j = d->job;
	struct wire_ctl_step m = { .job = j->id, .gen = j->gen, .step = d->rank };
	uint8_t buf[sizeof(m)];
	ssize_t len = wire_ctl_encode_step(buf, sizeof(buf), &m);
	const uint32_t *nodes;
	uint32_t n;

	nodes = job_nodes(j, flow.self, &n);
	if (!nodes && j->size > 1)
		log_rl_warn("job %s: out of memory for its node list; flow control for rank %u not sent", j->name,
			    d->rank);
	for (uint32_t i = 0; i < n; i++)
		ctlq_send(nodes[i], type, buf, (uint32_t)len);
}

int flow_park(struct ep *d, const struct proto_rec *rec, const void *payload)
{
	/* First stop the senders, whether or not there is room to park:
	 * if there is none the link pauses, and XOFF is what ends that. */
	if (!d->xoff && !d->failed) {
		d->xoff = 1;
		flow_stats.xoff_sent++;
		tell(d, WIRE_CTL_XOFF);
	}
	if (ep_park(d, rec, payload) < 0)
		return -EAGAIN;
	flow_stats.parked++;
	return 0;
}

void flow_check(struct ep *d)
{
	if (d->xoff && d->pending.bytes <= flow.conf->pending_bytes / 2) {
		d->xoff = 0;
		flow_stats.xon_sent++;
		tell(d, WIRE_CTL_XON);
	}
}

void flow_ep_gone(struct ep *d)
{
	if (d->xoff) {
		d->xoff = 0;
		flow_stats.xon_sent++;
		tell(d, WIRE_CTL_XON);
	}
}

void flow_remote(struct job *j, uint32_t rank, uint32_t from, int on)
{
	/* Only the node that hosts the rank speaks for it. */
	if (rank >= j->size || j->ranks[rank].node != from) {
		log_rl_warn("job %s: %s for rank %u from node %u, which does not host it; ignored", j->name,
			    on ? "XOFF" : "XON", rank, from);
		return;
	}
	if (on)
		flow_stats.xoff_received++;
	else
		flow_stats.xon_received++;
	if (job_set_xoff(j, rank, on) < 0)
		log_rl_warn("job %s: out of memory for XOFF of rank %u; its senders here go on", j->name, rank);
	if (!on)
		loop_kick();    /* senders waiting for it drain again */
}
