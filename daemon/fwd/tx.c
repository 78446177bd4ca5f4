/* daemon/fwd/tx.c - see tx.h. */
#include "tx.h"
#include "agg.h"
#include "flow.h"
#include "../core/log.h"
#include "../local/endpoint.h"

#include <errno.h>

/* Records a TX ring may hand over per poll round, so that one busy sender
 * cannot starve the others. */
#define DRAIN_BUDGET 512

struct tx_stats tx_stats;

static struct {
	const struct conf *conf;
	uint32_t self;
} drainer;

/* 1 if j lost a node (cluster/cluster.h: failed with EHOSTDOWN).  Then an
 * item whose destination takes no more now is dropped and counted
 * (failed_job_item) rather than holding its sender for ever: the job's steps
 * fail anyway, and its destination may be gone for good (behind the lost
 * node, whose XOFF will never be lifted and whose link queue does not
 * drain).  A job that failed because a rank left is not so: its other ranks
 * are there, and items to them wait as usual. */
static inline int lost_node(const struct job *j)
{
	return __builtin_expect(j->failed == EHOSTDOWN, 0);
}

/* See lost_node. */
static int failed_job_item(struct job *j, const struct ep *s, const struct proto_rec *rec)
{
	ep_drop(j, 1);
	j->sent++;
	log_rl_warn("job %s (failed: %s): item from rank %u to rank %u dropped", j->name, j->fail_text, s->rank,
		    rec->dst);
	return 0;
}

/* An item of rank s->rank: to a local endpoint, or toward its node.  Returns
 * 0 (taken, delivered or dropped) or -EAGAIN (try again later). */
static int route_item(struct ep *s, struct proto_rec *rec, const void *payload)
{
	struct job *j = s->job;
	uint32_t node = j->ranks[rec->dst].node;
	struct ep *d = j->ranks[rec->dst].ep;

	rec->src = s->rank;
	if (d) {
		if (ep_deliver(d, rec, payload) < 0) {
			if (lost_node(j))
				return failed_job_item(j, s, rec);
			s->blocked_on = d;
			return -EAGAIN;
		}
	} else if (__builtin_expect(j->stale, 0) && node != JOB_NO_NODE && node != drainer.self) {
		/* Its home is gone and so is its id (local/job.h): what it
		 * sends could land in another job that gets the id. */
		return failed_job_item(j, s, rec);
	} else if (__builtin_expect(j->nxoff != 0, 0) && node != JOB_NO_NODE && node != drainer.self &&
		   job_xoff(j, rec->dst)) {
		if (lost_node(j))
			return failed_job_item(j, s, rec);
		s->blocked_rank = rec->dst;     /* its node said XOFF (flow.h) */
		return -EAGAIN;
	} else if (node != JOB_NO_NODE && node != drainer.self) {
		struct wire_item it = {
			.len = rec->len,
			.flags = rec->flags,            /* the same bits (wire.h) */
			.channel = rec->channel,
			.node = node,
			.job = j->id,
			.gen = j->gen,
			.dst = rec->dst,
			.src = rec->src,
		};
		uint8_t *slot = agg_reserve(node, rec->len);

		if (slot) {
			wire_encode_item(slot, &it, payload);
		} else if (agg_item(&it, payload, -1, AGG_DATA) < 0) {
			if (lost_node(j))
				return failed_job_item(j, s, rec);
			s->blocked_node = node;
			return -EAGAIN;
		}
	} else {
		/* The rank left: the item is accounted as arrived, so that
		 * steps can still end. */
		ep_drop(j, 1);
		log_rl_warn("job %s: rank %u left; item from rank %u dropped", j->name, rec->dst, s->rank);
	}
	j->sent++;
	return 0;
}

/* Takes records out of s's TX ring and passes them on.  Returns 1 if it did
 * anything. */
static int drain(struct ep *s)
{
	struct job *j = s->job;
	int work = 0;

	if (lost_node(j)) {
		/* What it waited for may never come (failed_job_item). */
		s->blocked_on = NULL;
		s->blocked_node = JOB_NO_NODE;
		s->blocked_rank = EP_NO_RANK;
	}
	if (s->blocked_on) {
		if (ep_pending_high(s->blocked_on, drainer.conf))
			return 0;
		s->blocked_on = NULL;
	}
	if (s->blocked_node != JOB_NO_NODE) {
		if (agg_link_full(s->blocked_node))
			return 0;
		s->blocked_node = JOB_NO_NODE;
	}
	if (s->blocked_rank != EP_NO_RANK) {
		if (job_xoff(j, s->blocked_rank))
			return 0;
		s->blocked_rank = EP_NO_RANK;
	}
	for (int i = 0; i < DRAIN_BUDGET && !s->failed; i++) {
		struct proto_rec rec;
		const void *payload;
		int ret = ring_peek_fast(&s->tx, &rec, &payload);

		if (!ret)
			ret = ring_peek(&s->tx, &rec, &payload);
		if (ret == 0)
			break;
		if (ret < 0) {
			ep_fail(s, "garbage in TX ring");
			return 1;
		}
		switch (rec.kind) {
		case PROTO_REC_ITEM:
			if (rec.dst >= j->size) {
				ep_fail(s, "item for a rank outside the job");
				return 1;
			}
			if (!j->ready) {
				ep_fail(s, "item before the job was ready");
				return 1;
			}
			if (route_item(s, &rec, payload) < 0) {
				tx_stats.stalls++;
				goto out;
			}
			s->items_sent++;
			tx_stats.items_in++;
			tx_stats.bytes_in += rec.len;
			break;
		case PROTO_REC_FLUSH:
			tx_stats.flushes++;
			agg_flush_all(AGG_FLUSH_EXPLICIT);
			break;
		case PROTO_REC_DONE:
			/* The end of this rank's step: its items so far are
			 * counted in j->sent; send what is buffered. */
			if (s->done_step != j->step) {
				s->done_step = j->step;
				j->done++;
			}
			agg_flush_all(AGG_FLUSH_EXPLICIT);
			break;
		default:
			ep_fail(s, "record kind not allowed in a TX ring");
			return 1;
		}
		ring_consume(&s->tx, &rec);
		work = 1;
	}
out:
	ep_tx_release(s);
	return work;
}

int tx_poll(void)
{
	int work = 0;

	for (struct ep *s = ep_first(); s; s = s->next) {
		if (s->failed)
			continue;
		if (s->pending.count) {
			work |= ep_flush_pending(s);
			flow_check(s);
		}
		work |= drain(s);
	}
	return work;
}

int tx_init(const struct conf *c, uint32_t self)
{
	drainer.conf = c;
	drainer.self = self;
	return 0;
}
