/* daemon/fwd/ctlq.c - see ctlq.h. */
#include "ctlq.h"
#include "agg.h"
#include "../core/log.h"
#include "../core/loop.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* Payload bytes of queued items from the network before ctlq_push refuses:
 * the cluster layer empties the queue at every turn of the loop, so only a
 * flood comes near this, and it then waits in the TCP or RDMA flow control
 * rather than in this daemon's memory.  Above the largest control item (a
 * TABLE part, 64 KiB), so that one always fits an empty queue. */
#define CTLQ_BYTES (1u << 20)

static struct {
	uint32_t self;
	struct ctlq_item *head, **tail;
	uint64_t bytes;                 /* payload bytes queued */
	uint32_t *sent, nsent, capsent; /* nodes ctlq_send_job sent to, to flush */
} ctlq = { .tail = &ctlq.head };

void ctlq_init(uint32_t self)
{
	ctlq.self = self;
	ctlq.head = NULL;
	ctlq.tail = &ctlq.head;
	ctlq.bytes = 0;
}

static int push(uint32_t type, uint32_t from, const void *payload, uint32_t len)
{
	struct ctlq_item *m = malloc(sizeof(*m) + len);

	if (!m)
		return -EAGAIN;
	m->next = NULL;
	m->type = type;
	m->from = from;
	m->len = len;
	if (len)
		memcpy(m->payload, payload, len);
	*ctlq.tail = m;
	ctlq.tail = &m->next;
	ctlq.bytes += len;
	loop_kick();
	return 0;
}

int ctlq_push(uint32_t type, uint32_t from, const void *payload, uint32_t len)
{
	if (ctlq.head && ctlq.bytes + len > CTLQ_BYTES)
		return -EAGAIN;
	return push(type, from, payload, len);
}

void ctlq_send(uint32_t node, uint32_t type, const void *payload, uint32_t len)
{
	struct wire_item it = { .len = len, .node = node, .job = 0, .dst = type, .src = ctlq.self };

	if (node == ctlq.self) {
		if (push(type, node, payload, len) < 0)
			log_rl_err("out of memory for a control message");
		return;
	}
	if (agg_item(&it, payload, -1, AGG_LOCAL) < 0) {
		log_rl_err("out of memory for a control message to node %u", node);
		return;
	}
	agg_flush_toward(node, AGG_FLUSH_EXPLICIT);
}

int ctlq_send_job(uint32_t node, uint32_t job, uint8_t gen, const struct iovec *iov, int niov, uint32_t len)
{
	struct wire_item it = { .len = len, .gen = gen, .node = node, .job = job, .dst = WIRE_DST_COLL,
				.src = ctlq.self };
	int ret;

	if (node == ctlq.self || !job)
		return -EINVAL;
	for (uint32_t i = 0; i < ctlq.nsent; i++)
		if (ctlq.sent[i] == node)
			goto send;
	if (ctlq.nsent == ctlq.capsent) {
		uint32_t cap = ctlq.capsent ? 2 * ctlq.capsent : 16;
		uint32_t *n = realloc(ctlq.sent, cap * sizeof(*n));

		if (!n)
			return -EAGAIN;
		ctlq.sent = n;
		ctlq.capsent = cap;
	}
	ctlq.sent[ctlq.nsent++] = node;
send:
	ret = agg_item_v(&it, iov, niov, AGG_DATA);
	return ret == -EINVAL ? ret : ret < 0 ? -EAGAIN : 0;
}

void ctlq_flush_sent(void)
{
	for (uint32_t i = 0; i < ctlq.nsent; i++)
		agg_flush_toward(ctlq.sent[i], AGG_FLUSH_COLL);     /* (nobody waits for their acks) */
	ctlq.nsent = 0;
}

const struct ctlq_item *ctlq_first(void)
{
	return ctlq.head;
}

void ctlq_pop(void)
{
	struct ctlq_item *m = ctlq.head;

	if (!m)
		return;
	ctlq.head = m->next;
	if (!ctlq.head)
		ctlq.tail = &ctlq.head;
	ctlq.bytes -= m->len;
	free(m);
}

void ctlq_fini(void)
{
	while (ctlq.head)
		ctlq_pop();
	free(ctlq.sent);
	ctlq.sent = NULL;
	ctlq.nsent = ctlq.capsent = 0;
}
