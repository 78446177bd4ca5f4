/* daemon/coll/exec.h - the executor: runs this node's part of one
 * collective operation's schedule (daemon/plan/sched.h), whatever planner
 * made it.  It does no I/O itself: the layer above hands it the pieces that
 * arrive for the operation (coll_exec_deliver) and gives it a function that
 * sends a piece (struct coll_exec_ops), and calls coll_exec_run until it
 * says the operation is done or failed.
 *
 * What it trusts and what it checks: the schedule is ferryd's own (its
 * planners; the unit tests run every planner's output through sched_check),
 * so it is trusted.  The segments' places come from a rank's arguments and
 * are checked against the buffers when the executor starts.  Everything in a
 * piece is checked: a piece of a message the schedule does not expect, one
 * that does not continue its message, a message whose head is malformed or
 * whose parts do not fit the segments fails the operation (never the
 * daemon) with a message saying which node sent what.
 *
 * Messages are sent whole: a SEND's segments are copied into one stream
 * when the step runs (in slices of the budget with coll_exec_run_budget;
 * the step is done once they are all copied, and a later step may then
 * overwrite them) -- except segments in the ranks' send buffers, which no
 * step writes: those are read in place as the pieces go (the operation
 * holds the buffers until it ends, and it ends only once every piece is
 * sent) -- and go out in pieces of at most piece_max stream bytes,
 * the lowest order key first among the messages ready for any peer (a peer
 * that has no room, -EAGAIN, is tried again at the next run).  A message
 * arriving is kept whole until the step that takes it may run -- except one
 * for a RECV into receive buffers only, of the size it expects, whose step
 * waits for nothing else when its first piece comes: its head is kept, and
 * checked once whole (before any of its parts is written), and its parts
 * are written where they go as they come ("placed").  A FORWARD passes the
 * kept stream on without copying it.  Neither reading in place nor placing
 * is done where a rank's send buffer overlaps a receive buffer (one buffer
 * passed as both, without FERRY_IN_PLACE): its bytes would be overwritten
 * before they went.  Every byte allocated so (scratch, streams, heads)
 * counts against mem_max.
 *
 * Ownership: the executor owns its streams and scratch; the schedule and
 * the buffers (mem) are the caller's and must stay until coll_exec_free.
 */
#ifndef FERRY_COLL_EXEC_H
#define FERRY_COLL_EXEC_H

#include "../plan/sched.h"
#include "../../proto/coll.h"

#include <stdint.h>
#include <string.h>
#include <sys/uio.h>

struct coll_exec;

/* Copies the niov parts at iov to dst, one after the other. */
static inline void coll_iov_copy(uint8_t *dst, const struct iovec *iov, int niov)
{
	for (int i = 0; i < niov; i++) {
		if (iov[i].iov_len)
			memcpy(dst, iov[i].iov_base, iov[i].iov_len);
		dst += iov[i].iov_len;
	}
}

struct coll_exec_ops {
	/* Sends one piece to node peer of the group: hdr, then len stream
	 * bytes in niov parts at iov (copied before it returns; coll_iov_copy
	 * gathers them).  Returns 0, -EAGAIN when there is no room now, or
	 * another -errno, which fails the operation. */
	int (*send)(void *ctx, uint32_t peer, const struct wire_coll_piece *hdr, const struct iovec *iov, int niov,
		    uint32_t len);
	/* Optional: bytes the executor is about to hold (beyond mem_max's
	 * own bound: the user's share of daemon memory): 0, or -errno to fail
	 * the operation; and bytes it gave back.  Whatever it still holds when
	 * it is freed is given back then. */
	int (*mem_take)(void *ctx, uint64_t bytes);
	void (*mem_give)(void *ctx, uint64_t bytes);
};

struct coll_exec_cfg {
	uint32_t self;          /* this node's index in the group */
	uint32_t job, gen, op, group;   /* what the pieces carry */
	uint32_t piece_max;     /* stream bytes per piece, 1..WIRE_COLL_PIECE_MAX */
	uint64_t mem_max;       /* bytes the executor may hold at once */
	/* What runs of this schedule node start from (NULL: made for this
	 * run): the tables that depend on the schedule only, built once for
	 * operations that share a plan (coll.c). */
	const struct coll_exec_tmpl *tmpl;
};

struct coll_exec_tmpl;
/* Builds the template of schedule node n (which must outlive it): 0 or
 * -ENOMEM. */
int coll_exec_tmpl_new(const struct sched_node *n, struct coll_exec_tmpl **t_p);
/* Frees t (NULL: nothing); executors made from it are not touched (they
 * copied what they need). */
void coll_exec_tmpl_free(struct coll_exec_tmpl *t);
/* The bytes it takes (0 for NULL). */
uint64_t coll_exec_tmpl_bytes(const struct coll_exec_tmpl *t);

/* Sets up the run of schedule node n over buffers mem.  Returns 0, -EINVAL
 * (a segment beyond its buffer: err says which; a bad cfg), or -ENOMEM
 * (also when the scratch buffers alone exceed mem_max). */
int coll_exec_new(const struct sched_node *n, const struct sched_mem *mem, const struct coll_exec_cfg *cfg,
		  const struct coll_exec_ops *ops, void *ctx, struct coll_exec **x_p, char *err, size_t err_len);

/* Runs every step that can run and sends what the peers take.  Returns 1
 * when every step is done and every piece sent, 0 when it waits for pieces
 * or room, or the -errno the operation failed with (coll_exec_error says
 * why; it stays failed). */
int coll_exec_run(struct coll_exec *x);
/* The same, running steps only while *budget (bytes they copy, about) lasts,
 * lowering it: a COPY, REDUCE, SEND not read in place or RECV of a message
 * held whole larger than what is left goes in slices, the rest of it at
 * the next call (before any other step).  The loop's way (coll.c): a turn of it
 * never copies more than a budget. */
int coll_exec_run_budget(struct coll_exec *x, uint64_t *budget);
/* 1 if steps are ready to run (the budget ran out): call again soon. */
int coll_exec_busy(const struct coll_exec *x);

/* A piece for this operation arrived (hdr decoded by
 * wire_coll_piece_decode, data its len stream bytes), from the node hdr->from
 * (the caller checks that the transport agrees).  Takes a copy (or, placed,
 * writes it where it goes).  Returns 0, or the -errno the operation failed
 * with: -EPROTO (a message the schedule does not expect, an empty piece, a
 * piece out of order, a malformed head), -EINVAL (a placed message's parts
 * of other sizes than its blocks: the ranks disagree), -ENOMEM (beyond
 * mem_max).  Call coll_exec_run after. */
int coll_exec_deliver(struct coll_exec *x, const struct wire_coll_piece *hdr, const uint8_t *data, uint32_t len);

/* Why the operation failed ("" while it has not). */
const char *coll_exec_error(const struct coll_exec *x);

/* Bytes the executor holds now, and the most it held. */
uint64_t coll_exec_mem(const struct coll_exec *x);
uint64_t coll_exec_mem_peak(const struct coll_exec *x);
/* Bytes of its own tables (by the schedule's size, not in coll_exec_mem:
 * the layer above counts them against the user). */
uint64_t coll_exec_tables_bytes(const struct coll_exec *x);

void coll_exec_free(struct coll_exec *x);

#endif
