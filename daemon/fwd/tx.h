/* daemon/fwd/tx.h - draining the TX rings of local endpoints: every record
 * an application published goes on, in order: an item to a local endpoint's
 * RX ring or into the aggregation buffer of its next hop, FLUSH and DONE to
 * the buffers and the step counters.
 *
 * Backpressure, never loss: when a destination takes no more (a local
 * endpoint's queue, or the link toward a node, see endpoint.h and agg.h), the
 * record stays in the TX ring and draining that ring stops until the
 * destination has drained to half; the sender's ring then fills and
 * ferry_send returns -EAGAIN (or waits).  Other rings go on.
 *
 * Ownership: what it notes on an endpoint while the endpoint waits
 * (ep->blocked_on, ep->blocked_node) points at another endpoint or names a
 * node; the endpoint module clears blocked_on when the endpoint it points at
 * ends, and reads both to leave a waiting sender's ring unwatched while it
 * sleeps.  It owns one record per large piece sent from a TX ring (struct
 * tx_lend, the frame's lender, net/frame.h "Lent bytes"): made when the
 * piece goes out, listed while it is a loan on its endpoint's ring (a loan
 * names the endpoint's lender, local/endpoint.h "Loans", never the endpoint,
 * which may close first), and freed by the frame's put.  When the endpoint
 * closes, take_back gives such frames copies that the record owns (counted
 * in frame_mem_bytes) and ends the loans; the put frees the copy too.
 */
#ifndef FERRY_FWD_TX_H
#define FERRY_FWD_TX_H

#include "../core/conf.h"

#include <stdint.h>

struct tx_stats {
	uint64_t items_in;              /* items taken from TX rings */
	uint64_t bytes_in;
	uint64_t stalls;                /* TX draining stopped for backpressure */
	uint64_t flushes;               /* FLUSH records seen */
	uint64_t batches_in;            /* BATCH and DENSE records taken (FERRY_BATCH); their items are in items_in */
	uint64_t dense_in;              /* ... of which DENSE records (proto/ring.h "Dense batches") */
	uint64_t pieces_lent;           /* pieces sent straight from TX rings (net/frame.h "Lent bytes") */
	uint64_t loans_out;             /* ... whose frames still hold them */
	uint64_t pieces_taken_back;     /* ... copied when their endpoint closed first */
	uint64_t taken_back_bytes;      /* ... the copies' bytes still held */
};
extern struct tx_stats tx_stats;

/* Fault injection (ferryctl debug keep-loans): closing endpoints keep their
 * loans, as when there is no memory to copy what they lent. */
extern int tx_keep_loans;

int tx_init(const struct conf *c, uint32_t self);

/* Loop hook: moves queued records into RX rings, then drains every TX ring
 * (a bounded number of records each).  Returns 1 if it did anything. */
int tx_poll(void);

#endif
