/* daemon/fwd/ctlq.h - daemon control items (job 0: job joins, rank tables,
 * step accounting, see proto/wire.h): sending them to a node, and the queue
 * of those for this node until the cluster layer takes them.
 *
 * Control items for another node travel like any item (routed, aggregated,
 * acknowledged, resent), but ignore the queue limits (they are few and
 * small) and leave at once rather than waiting to fill a buffer.  Those for
 * this node, from the network or from this node itself, wait in a queue that
 * the cluster layer empties from the loop (cluster_poll): never from inside
 * the taking apart of a frame, which may be in the middle of a transport's
 * receive path.
 *
 * The queue of items from the network is bounded (ctlq_push): a peer that
 * floods control items is held back like one that floods data.
 *
 * Ownership: the queue owns copies of the items; ctlq_pop frees one.
 */
#ifndef FERRY_FWD_CTLQ_H
#define FERRY_FWD_CTLQ_H

#include <stdint.h>

struct ctlq_item {
	struct ctlq_item *next;
	uint32_t type;                  /* enum wire_ctl_type */
	uint32_t from;                  /* the node that sent it */
	uint32_t len;
	uint8_t payload[];
};

void ctlq_init(uint32_t self);
/* Frees what is queued. */
void ctlq_fini(void);

/* Sends a control item of type to node (this node too). */
void ctlq_send(uint32_t node, uint32_t type, const void *payload, uint32_t len);

/* Sends a piece of job's collectives (gen: its generation; len bytes in
 * niov parts at iov) to node (not this one) as an item of the job
 * (proto/wire.h WIRE_DST_COLL): under the job's items' limits, so it
 * returns 0 or -EAGAIN (the link toward node is full: try again later, the
 * loop's next turns); -EINVAL for this node, job 0 or parts that are not
 * len bytes.  It leaves with the next flush toward node (ctlq_flush_sent). */
struct iovec;
int ctlq_send_job(uint32_t node, uint32_t job, uint8_t gen, const struct iovec *iov, int niov, uint32_t len);
/* Flushes the buffers toward the nodes ctlq_send_job sent to since the
 * last call. */
void ctlq_flush_sent(void);

/* A control item for this node arrived from node from: queues a copy.
 * Returns 0, or -EAGAIN when the queue holds its limit (or memory is short):
 * the caller keeps the item, and the link it came on pauses, until the
 * cluster layer has emptied the queue (the next turn of the loop). */
int ctlq_push(uint32_t type, uint32_t from, const void *payload, uint32_t len);

/* The oldest queued item, or NULL; ctlq_pop frees it. */
const struct ctlq_item *ctlq_first(void);
void ctlq_pop(void);

#endif
