/* daemon/fwd/ctlq.c - see ctlq.h. */
#include "ctlq.h"
#include "agg.h"
#include "../core/log.h"
#include "../core/loop.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static struct {
	uint32_t self;
	struct ctlq_item *head, **tail;
} ctlq = { .tail = &ctlq.head };

void ctlq_init(uint32_t self)
{
	ctlq.self = self;
	ctlq.head = NULL;
	ctlq.tail = &ctlq.head;
}

int ctlq_push(uint32_t type, uint32_t from, const void *payload, uint32_t len)
{
	struct ctlq_item *m = malloc(sizeof(*m) + len);

	if (!m)
		return -ENOMEM;
	m->next = NULL;
	m->type = type;
	m->from = from;
	m->len = len;
	if (len)
		memcpy(m->payload, payload, len);
	*ctlq.tail = m;
	ctlq.tail = &m->next;
	loop_kick();
	return 0;
}

void ctlq_send(uint32_t node, uint32_t type, const void *payload, uint32_t len)
{
	struct wire_item it = { .len = len, .node = node, .job = 0, .dst = type, .src = ctlq.self };

	if (node == ctlq.self) {
		if (ctlq_push(type, node, payload, len) < 0)
			log_err("out of memory for a control message");
		return;
	}
	if (agg_item(&it, payload, -1, 1) < 0) {
		log_err("out of memory for a control message to node %u", node);
		return;
	}
	agg_flush_toward(node, AGG_FLUSH_EXPLICIT);
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
	free(m);
}

void ctlq_fini(void)
{
	while (ctlq.head)
		ctlq_pop();
}
