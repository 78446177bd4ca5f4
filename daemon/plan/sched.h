/* daemon/plan/sched.h - collective schedules as data (DESIGN.md,
 * "Collectives"): what a planner produces, what the collective engine runs,
 * what ferryctl plan and the unit tests check.  Pure code, no I/O.
 *
 * A schedule is per node of a group (nodes numbered 0..nodes-1 in the
 * group, whatever their node ids) a list of steps.  A step names byte ranges
 * (segments) of the node's buffers: a local rank's send or receive buffer,
 * or a scratch buffer of the node's own.  The step kinds are fixed; every
 * collective algorithm is a planner that emits them, never a change to the
 * executor:
 *
 *   SEND         the step's segments, in order, as message msg to node peer;
 *                on a link, ready messages go lowest order key first
 *   RECV         message msg from node peer into the step's segments
 *   RECV_REDUCE  the same, each part reduced (type, op) into its segment:
 *                segment = segment op part
 *   FORWARD      message from_msg from node from passed on unchanged to
 *                node peer as message msg (order key as SEND); the node
 *                keeps no part of it
 *   COPY         segment 1 copied into segment 0 (the same length)
 *   REDUCE       segment 0 = segment 0 op segment 1 (type, op)
 *
 * A message is a list of parts, one per segment of the SEND: each part as
 * long as its segment, the lengths travelling with the message.  The RECV
 * matching it (same sender, receiver and msg) lists as many segments; a
 * segment of a fixed length must get a part of that length (else the ranks
 * disagree about sizes: the operation fails), a scratch segment marked
 * SCHED_SEG_SIZED takes the length of its part (up to its len, if not 0).
 * A SEND is done once its bytes are taken (the executor copies them into a
 * stream, or, from send buffers, which no step writes, reads them as its
 * pieces go), so a later step may overwrite them; ready messages on one link
 * go lowest order key first, the first ready first among equal keys.  So a node plans with what
 * it knows when the operation is posted (its own ranks' counts), and data
 * whose size only its sender knows (alltoallv through an indirect strategy)
 * travels in sized scratch segments.
 *
 * Steps wait for their dependencies (earlier steps of the same node, listed
 * explicitly: edges, not phases), a RECV or FORWARD also for its message.
 * A node's steps are in an order where every dependency comes before the
 * step that waits for it; apart from that the executor runs them in any
 * order, as their messages arrive.  sched_check says whether a schedule is
 * well formed: every message sent once and received once with the same
 * number of parts and matching fixed lengths, no cycle across nodes, no
 * bytes written by two steps that no dependency orders (or read while
 * written), no step naming bytes it writes twice, scratch read only after
 * steps it depends on wrote every byte of it.  (Its cost grows with the
 * square of a node's steps: it is for the unit tests and ferryctl, not for
 * the daemon, which runs its own planners' output.)  The buffers a planner
 * addresses are distinct: FERRY_IN_PLACE is staged by the layer above
 * (the send side copied first), never a send buffer that is a receive
 * buffer.
 * sched_run executes one over real buffers (the simulator).
 *
 * Ownership: a sched owns its nodes' arrays; sched_free frees them all.
 */
#ifndef FERRY_PLAN_SCHED_H
#define FERRY_PLAN_SCHED_H

#include <stddef.h>
#include <stdint.h>

enum sched_kind {
	SCHED_SEND = 1,
	SCHED_RECV = 2,
	SCHED_RECV_REDUCE = 3,
	SCHED_FORWARD = 4,
	SCHED_COPY = 5,
	SCHED_REDUCE = 6,
};

enum sched_buf {
	SCHED_BUF_SEND = 0,     /* a local rank's send buffer; index: its slot on the node */
	SCHED_BUF_RECV = 1,     /* a local rank's receive buffer */
	SCHED_BUF_SCRATCH = 2,  /* the node's scratch buffer number index */
};

#define SCHED_SEG_SIZED 1u      /* scratch: the length is that of the part a RECV puts there */

struct sched_seg {
	uint8_t buf;            /* enum sched_buf */
	uint8_t flags;          /* SCHED_SEG_* */
	uint16_t reserved;
	uint32_t index;         /* rank slot, or scratch buffer */
	uint64_t off, len;      /* the byte range; SIZED: the most it takes, 0 no bound
				 * (but the operation's memory) */
};

struct sched_step {
	uint8_t kind;           /* enum sched_kind */
	uint8_t type, op;       /* RECV_REDUCE, REDUCE: enum coll_type, enum coll_op */
	uint8_t reserved;
	uint32_t peer;          /* SEND, FORWARD: to; RECV, RECV_REDUCE: from */
	uint32_t msg;           /* message number, unique per (sender, receiver) */
	uint32_t order;         /* SEND, FORWARD: lower first on a link */
	uint32_t from, from_msg;        /* FORWARD: the message passed on */
	uint32_t ref, nref;     /* its segments: refs[ref .. ref + nref) */
	uint32_t dep, ndep;     /* steps it waits for: deps[dep .. dep + ndep) */
};

struct sched_node {
	uint32_t nslots;        /* local ranks (send and receive buffers) */
	uint32_t nsteps, nsegs, nrefs, ndeps, nscratch;
	struct sched_step *steps;
	struct sched_seg *segs;
	uint32_t *refs;         /* segment numbers */
	uint32_t *deps;         /* step numbers */
	uint64_t *scratch_len;  /* bytes of each scratch buffer (0 for one of SIZED segments) */
	uint32_t cap_steps, cap_segs, cap_refs, cap_deps, cap_scratch;
	int err;                /* the first builder error (-ENOMEM, -EINVAL), sticky */
};

struct sched {
	uint32_t nodes;
	struct sched_node *node;        /* [nodes] */
};

/* Sets up a schedule over nodes nodes, none with steps.  Returns 0,
 * -EINVAL or -ENOMEM. */
int sched_init(struct sched *s, uint32_t nodes);
void sched_free(struct sched *s);

/* Builders.  Each returns the new segment, scratch buffer or step number;
 * an error (no memory, an argument out of range) is kept in n->err, which
 * the planner returns at the end (sched_err).  sched_ref and sched_dep add
 * to the node's last step. */
uint32_t sched_scratch(struct sched_node *n, uint64_t len);
uint32_t sched_seg(struct sched_node *n, enum sched_buf buf, uint32_t index, uint64_t off, uint64_t len,
		   unsigned flags);
uint32_t sched_step(struct sched_node *n, enum sched_kind kind, uint32_t peer, uint32_t msg, uint32_t order);
void sched_step_forward(struct sched_node *n, uint32_t from, uint32_t from_msg);
void sched_step_reduce(struct sched_node *n, unsigned type, unsigned op);
void sched_ref(struct sched_node *n, uint32_t seg);
void sched_dep(struct sched_node *n, uint32_t step);
/* Bytes node n's arrays take (their capacity). */
uint64_t sched_node_bytes(const struct sched_node *n);

/* The first builder error of any node, or 0. */
int sched_err(const struct sched *s);

/* Checks the whole schedule (every node built).  Returns 0, or -EINVAL with
 * what is wrong written to why (why_len bytes, may be 0). */
int sched_check(const struct sched *s, char *why, size_t why_len);

/* The simulator's buffers, one of these per node: every rank slot's send
 * and receive buffer.  Scratch buffers are its own. */
struct sched_mem {
	uint8_t **send, **recv;         /* [slot] */
	uint64_t *send_len, *recv_len;  /* [slot] */
};

/* What sched_run saw. */
struct sched_run_stats {
	uint64_t steps, messages, parts;
	uint64_t bytes_sent;            /* message bytes (parts), all nodes */
	uint64_t bytes_sent_max;        /* the most one node sent */
	uint32_t sends_max, recvs_max;  /* messages one node sent (SEND, FORWARD), received */
};

/* Runs a checked schedule over mem[nodes]: every node's steps, a step when its
 * dependencies are done and (RECV, FORWARD) its message has been sent, in
 * an order a seeded random choice among the ready steps of all nodes picks
 * (seed), so that a missing dependency shows.  If writes is not NULL it gets
 * one counter per byte of the receive buffers, node by node, slot by slot,
 * counting the steps that wrote the byte (delivery exactly once: every
 * counter 1).  Returns 0, -EINVAL (a fixed segment got a part of another
 * length, a segment beyond its buffer, a step that never became ready:
 * why says which), or -ENOMEM. */
int sched_run(const struct sched *s, const struct sched_mem *mem, uint64_t seed, uint32_t *writes,
	      struct sched_run_stats *st, char *why, size_t why_len);

#endif
