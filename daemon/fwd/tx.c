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
			s->blocked_on = d;
			return -EAGAIN;
		}
	} else if (__builtin_expect(j->nxoff != 0, 0) && node != JOB_NO_NODE && node != drainer.self &&
		   job_xoff(j, rec->dst)) {
		s->blocked_rank = rec->dst;     /* its node said XOFF (flow.h) */
		return -EAGAIN;
	} else if (node != JOB_NO_NODE && node != drainer.self) {
		struct wire_item it = {
			.len = rec->len,
			.flags = rec->flags & PROTO_REC_MORE ? WIRE_ITEM_MORE : 0,
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
