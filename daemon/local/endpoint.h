/* daemon/local/endpoint.h - local endpoints: the shared-memory region of each
 * client attachment (its TX and RX rings), the eventfds that wake either side,
 * and delivery into RX rings.
 *
 * Delivery never loses an item: one whose destination ring is full waits in
 * the destination's queue (daemon memory, recq.h).  When that queue holds
 * limits.pending_bytes, or its user's memory (queues and rank tables) is at
 * limits.user_memory_bytes, or everyone's at limits.memory_bytes (user.h),
 * delivery refuses (-EAGAIN) and the layer that drains TX rings (fwd/tx.c)
 * stops draining the sender (the item stays in its TX ring) until the queue
 * has drained to half; the sender's ring then fills and ferry_send returns
 * -EAGAIN (or waits, per flag).
 *
 * The fast path of delivery (an item, room in the ring, nothing queued) is
 * inline here, so that the forwarding layer's per-item loops compile it in.
 *
 * Ownership: the control session (session.c) opens an endpoint and ends it
 * with ep_close, always from the loop (sess_poll), never from inside a
 * callback that a caller above still runs in: anything that finds an endpoint
 * unusable (a record it cannot accept, an impossible ring index) marks it
 * with ep_fail and goes on; the endpoint stays valid, and stays in its job's
 * rank table, until the session reaps it.
 *
 * Loans.  The forwarding layer may send a record's payload straight from
 * the TX ring (net/frame.h "Lent bytes"): it takes a loan (ep_loan) on the
 * record at the TX tail before it moves past it, and ends it (ep_loan_end)
 * when the frame lets go of the bytes, acknowledged or dropped.  Until then
 * the client does not get that room back: ep_tx_release publishes the tail
 * only up to the oldest loan not ended.  The loans of one ring are kept by
 * its struct ep_lender, which belongs to the endpoint.  ep_close first has
 * the forwarding layer take its loans back (the hook of ep_set_close_hook:
 * the frames get copies of the bytes, and the loans end), so that a closed
 * endpoint's memory does not wait for a peer that may never answer.  Only a
 * loan it could not take back (no memory for the copy) keeps the region
 * mapped and the user's endpoint counted (user_take_endpoint) until the
 * frame lets go; the last ep_loan_end then frees them and the lender.
 * ep_fini, at exit, unmaps what such lenders hold (no frame is written any
 * more), and their last ep_loan_end frees only them.
 */
#ifndef FERRY_LOCAL_ENDPOINT_H
#define FERRY_LOCAL_ENDPOINT_H

#include "job.h"
#include "recq.h"
#include "../core/conf.h"
#include "../core/loop.h"
#include "../../proto/ctl.h"
#include "../../proto/done.h"
#include "../../proto/post.h"
#include "../../proto/ring.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>

struct sess;
struct user;
struct ep_lender;               /* a TX ring's loans (endpoint.c) */
struct mem;

struct ep {
	struct ep *next;                /* every endpoint (ep_first) */
	uint32_t id;                    /* its session's id, for logs */
	pid_t pid;                      /* the client, for logs and status */
	int other_cpus;                 /* the client might run on none of ferryd's CPUs, when last
					 * looked at (ep_check_cpus) */
	uint64_t cpus_checked_ns;
	uid_t uid;
	struct user *user;              /* its uid's accounting (user.h): this endpoint, its queue */
	struct sess *sess;              /* the session that opened it (session.c's) */
	struct job *job;
	uint32_t rank;
	int ready;                      /* READY went to its client (session.c): only from then on
					 * does fwd/tx.c take items from its TX ring.  (Not the job's
					 * ready: a rank that left may attach again to a started job
					 * until its home refuses it, and must send nothing.) */

	void *region;                   /* the memfd mapping: both rings, the done and post pages */
	size_t region_bytes;
	struct proto_done_shared *done; /* in region: collective completions (proto/done.h) */
	uint32_t done_pub;              /* records we published (our count, not the page's) */
	uint32_t done_sock;             /* COLL_DONEs we sent on the socket */
	struct proto_post_shared *post; /* in region: collectives posted (proto/post.h) */
	uint32_t post_taken;            /* slots we took (our count, not the page's) */
	uint32_t ctl_handled;           /* control messages of its session handled since JOIN
					 * (session.c): what a slot's sock_before waits for */
	int posts_closed;               /* its session closes (session.c): no post is taken any more */
	int efd_client;                 /* we write: RX records or TX room */
	int efd_daemon;                 /* client writes: TX records or RX room */
	int efd_coll;                   /* we write: a collective ended while the client was armed */
	struct loop_watch efd_w;
	struct ring tx, rx;
	int offer_withdrawn;            /* we withdrew tx's fenceless offer as too dear (ep_sleep_prepare) */
	struct recq pending;            /* items waiting for room in rx */
	uint32_t rx_wait_len;           /* 1 + length of the smallest record refused with nothing
					 * queued (no memory for a queue): it waits for room in rx
					 * itself, and rx is armed for it; 0: none */
	int rx_dirty;                   /* records written to rx, not yet published */

	/* Draining tx: written by the forwarding layer (fwd/tx.c), which stops
	 * taking from tx while a destination takes no more; read here to leave
	 * such a ring unwatched while the daemon sleeps, and for status. */
	uint32_t done_step;             /* the step this rank last ended */
	struct ep *blocked_on;          /* its destination's queue is full */
	uint32_t blocked_node;          /* ... or the link toward this node is; JOB_NO_NODE if not */
	uint32_t blocked_rank;          /* ... or that rank's node said XOFF; EP_NO_RANK if not */
	uint32_t batch_off;             /* fwd/tx.c: records of the BATCH at the TX tail taken so
					 * far (bytes of its payload); 0 when none are */
	uint64_t batch_tail;            /* ... the TX tail (counter) it was at then */
	uint32_t *put_serial;           /* fwd/agg.h agg_flush_serials: by peer, the buffer that
					 * last took an item of this endpoint; NULL until its
					 * first drain (allocated there, freed by ep_close) */
	int put_serial_failed;          /* ... could not be allocated: FLUSH flushes all */
	struct ep_lender *lender;       /* loans of tx bytes (see Loans); NULL before the first */

	/* Receiving from other nodes (fwd/flow.h): its queue went past
	 * pending_bytes with items from the network, and the job's other
	 * nodes were told to stop sending to it (XOFF) until it drains. */
	int xoff;

	/* Ending (always from the loop, see above). */
	const char *failed;             /* the client broke the protocol: why; nothing more is taken */

	uint64_t items_sent, items_received;

	/* Memory its client shares for collectives (mem.h); ep_close drops
	 * the table's references. */
	struct mem *mems;
	/* Collective operations it posted that have not been answered yet
	 * (session.c counts the COLL_DONEs): at most FERRY_COLL_MAX_PENDING,
	 * as libferry keeps to (coll/coll.c). */
	uint32_t coll_pending;
};

#define EP_NO_RANK UINT32_MAX

struct ep_stats {
	uint64_t items_delivered;       /* items written into RX rings */
	uint64_t items_queued;          /* items that had to wait in daemon memory */
	uint64_t items_dropped;         /* destination rank gone */
	uint64_t items_lost;            /* left in the TX ring of a client that exited, undeliverable */
	uint64_t records_taken;         /* records taken from TX rings whose clients may publish
					 * without a fence (ep_taken): publishes the offer saved */
	uint64_t offers_withdrawn;      /* fenceless offers withdrawn as too dear (ep_sleep_prepare) */
};
extern struct ep_stats ep_stats;

/* fwd/tx.c took records from ep's TX ring: publishes the fenceless offer
 * saved its client, if it still may publish without a fence (judged in
 * ep_sleep_prepare: proto/ring.h ring_judge). */
static inline void ep_taken(const struct ep *ep, uint64_t records)
{
	if (ep->tx.fenceless && !ep->offer_withdrawn)
		ep_stats.records_taken += records;
}

/* Registers for membarrier (see proto/ring.h's fenceless publish) and keeps
 * the limits of c.  Returns 0. */
int ep_init(const struct conf *c, uint32_t self);
void ep_fini(void);

/* Opens an endpoint as rank of the job (uid, name) of size ranks: takes an
 * endpoint of the user's (user_take_endpoint), joins the job (job.h) and
 * creates the region and eventfds.  On success fills in a (the ATTACHED
 * message), fds (memfd, eventfd to client, eventfd to daemon, eventfd for
 * collectives to client: proto/done.h; the caller
 * closes fds[0] once it is sent) and *ep_p.  Returns 0, the refusals of
 * user_take_endpoint (-EUSERS, -EDQUOT), the errors of job_join, or -errno
 * of a system call (logged, rate-limited). */
int ep_open(uid_t uid, pid_t pid, uint32_t id, const char *name, uint32_t rank, uint32_t size,
	    struct ep **ep_p, struct ctl_attached_wire *a, int fds[4]);

/* Ends an endpoint: drops what is queued for it (counted), marks its slot in
 * the job's direct rings gone (direct_end), leaves its job, frees
 * everything.  Only from the loop (see above). */
void ep_close(struct ep *ep);

/* Marks ep unusable because its client broke the protocol (why: a string
 * constant): it leaves its job's rank table at once (items for the rank are
 * dropped and counted from now on), nothing more is taken from it, and its
 * session ends from the loop. */
void ep_fail(struct ep *ep, const char *why);

/* Every endpoint, for iteration with ->next. */
struct ep *ep_first(void);
uint32_t ep_count(void);
uint64_t ep_region_bytes(void);

/* Writes one record into d's RX ring (accounting it), or queues it.  Returns
 * 0, or -EAGAIN if d's queue (or daemon memory) is full: the caller keeps
 * the record and tries again later.  force: the queue takes it regardless
 * (small control records). */
int ep_deliver_slow(struct ep *d, const struct proto_rec *rec, const void *payload, int force);

/* Accounts count item records written into d's RX ring (published with the
 * next ep_publish): every writer of item records calls it. */
static inline void ep_ringed(struct ep *d, uint32_t count)
{
	d->rx_dirty = 1;
	d->items_received += count;
	d->job->ringed += count;
	ep_stats.items_delivered += count;
}

/* Zeroes the padding after a payload of len bytes in an RX ring slot (the
 * payload then overwrites the rest of that last word): the ring's earlier
 * bytes must not reach the receiver beside an item, as libferry's batches
 * and the wire (wire_put_rec_item) zero theirs (review finding: records ferryd
 * wrote one by one kept them; batch.sh "shapes"). */
static inline void ep_zero_pad(struct proto_rec *slot, uint32_t len)
{
	if (len & 7)
		__builtin_memset((uint8_t *)(slot + 1) + (len & ~7u), 0, 8);
}

/* Writes an item record whose header is the two words w0, w1 (and len
 * payload bytes) into a reserved RX ring slot, and accounts it: ep_put for
 * the per-item loops (fwd/tx.c drain_fast, fwd/rx.c deliver). */
static inline void ep_put_words(struct ep *d, struct proto_rec *slot, uint64_t w0, uint64_t w1, const void *payload,
				uint32_t len)
{
	__builtin_memcpy(slot, &w0, 8);
	__builtin_memcpy((uint8_t *)slot + 8, &w1, 8);
	ep_zero_pad(slot, len);
	proto_copy((uint8_t *)(slot + 1), payload, len);
	ep_ringed(d, 1);
}

/* Copies count item records (len bytes, validated: proto_batch_check) into
 * a reserved RX ring slot of len bytes and accounts them. */
static inline void ep_put_batch(struct ep *d, struct proto_rec *slot, const uint8_t *recs, uint32_t len,
				uint32_t count)
{
	__builtin_memcpy(slot, recs, len);
	ep_ringed(d, count);
}

/* Copies a record into a reserved RX ring slot and accounts it (a DENSE
 * record's payload is ours, checked: proto_rec_items). */
static inline void ep_put(struct ep *d, struct proto_rec *slot, const struct proto_rec *rec, const void *payload)
{
	uint32_t items = proto_rec_items(rec, payload);

	memcpy(slot, rec, sizeof(*rec));
	ep_zero_pad(slot, rec->len);
	proto_copy((uint8_t *)(slot + 1), payload, rec->len);
	if (items)
		ep_ringed(d, items);
	else
		d->rx_dirty = 1;
}

/* Writes a DENSE record (header words w0, w1) of k items whose checked
 * header word is h into a reserved RX ring slot, the len - 8 bytes of
 * items from items (which may be client memory: copied, not checked),
 * and accounts it (proto/ring.h "Dense batches"). */
static inline void ep_put_dense(struct ep *d, struct proto_rec *slot, uint64_t w0, uint64_t w1, uint64_t h,
				const uint8_t *items, uint32_t len, uint32_t k)
{
	__builtin_memcpy(slot, &w0, 8);
	__builtin_memcpy((uint8_t *)slot + 8, &w1, 8);
	__builtin_memcpy(slot + 1, &h, 8);
	__builtin_memcpy((uint8_t *)(slot + 1) + sizeof(struct proto_dense), items, len - sizeof(struct proto_dense));
	ep_ringed(d, k);
}

/* ep_deliver_slow for an item; the common case, room in the ring and
 * nothing queued, inline. */
static inline int ep_deliver(struct ep *d, const struct proto_rec *rec, const void *payload)
{
	struct proto_rec *slot;

	if (__builtin_expect(!d->pending.count, 1) && (slot = ring_reserve_fast(&d->rx, rec->len)) != NULL) {
		ep_put(d, slot, rec, payload);
		return 0;
	}
	return ep_deliver_slow(d, rec, payload, 0);
}

/* Queues an item that came from the network for d beyond d's queue limit:
 * the link it came on must go on carrying other jobs' items while this
 * rank's senders are told to stop (fwd/flow.h).  Up to ep_park_limit()
 * bytes, and limits.memory_bytes.  Returns 0, or -EAGAIN: no room even so. */
int ep_park(struct ep *d, const struct proto_rec *rec, const void *payload);

/* How far ep_park lets a queue grow: its limit, plus what the senders' nodes
 * can still have on the way when they hear XOFF (a link's worth), plus as
 * much again. */
static inline uint64_t ep_park_limit(const struct conf *c)
{
	return 2 * c->pending_bytes + c->link_bytes;
}

/* n items of j will never reach their rank (it left, or is not here): they
 * count as arrived, so that steps can still end. */
static inline void ep_drop(struct job *j, uint64_t n)
{
	j->items_dropped += n;
	j->ringed += n;
	ep_stats.items_dropped += n;
}

/* Moves queued records into d's RX ring as far as it has room.  Returns 1 if
 * it moved any. */
int ep_flush_pending(struct ep *d);

/* 1 while d's queue is above the level at which blocked senders resume. */
static inline int ep_pending_high(const struct ep *d, const struct conf *c)
{
	return !d->failed && d->pending.bytes > c->pending_bytes / 2;
}

/* The records taken from ep's TX ring so far go back to the client as room
 * (up to the oldest loan not ended: see Loans). */
void ep_tx_release(struct ep *ep);

/* A loan on the record at ep's TX tail (see Loans), before the caller moves
 * past it: its bytes stay as they are in the ring, and the room is not given
 * back, until ep_loan_end(*lp, id).  Returns 0, or -ENOMEM (the caller copies
 * instead). */
int ep_loan(struct ep *ep, struct ep_lender **lp, uint64_t *id);
/* The loan id of l is over.  May free l (and the region of a closed
 * endpoint): see Loans. */
void ep_loan_end(struct ep_lender *l, uint64_t id);
/* Takes back the newest loan of l, id, which was not used after all. */
void ep_loan_cancel(struct ep_lender *l, uint64_t id);
/* The forwarding layer's: called by ep_close first, for an endpoint with
 * loans out, to end as many of them as it can (see Loans). */
void ep_set_close_hook(void (*take_back)(struct ep *ep));
/* The daemon is ending (sess_fini, then ep_fini): from now on nothing is
 * written to peers any more, so closing endpoints keep their loans rather
 * than having them copied (ep_fini unmaps what they keep). */
void ep_exit_begin(void);

/* j's current step completed (the home said so, or an item of the next one
 * came: proto/wire.h "The step of an item"): a STEP record for it to every
 * endpoint of j here, behind every item of the step, and j moves on to the
 * next step. */
void ep_step_complete(struct job *j);

/* Collective operation seq of group ended well: publishes it on ep's done
 * page and wakes the client if it sleeps on it (proto/done.h).  Returns 1,
 * or 0 when the page has no free slot (the caller sends COLL_DONE). */
int ep_done_publish(struct ep *ep, uint32_t group, uint32_t seq);
/* A COLL_DONE went out on ep's socket: counts it on the done page. */
void ep_done_sent(struct ep *ep);

/* The post page (proto/post.h).  ep_post_next copies the next post that
 * may be taken now (ep ready, not failed, its sock_before handled: see
 * ctl_handled; its session not closing: posts_closed) into msg
 * (PROTO_POST_MSG_MAX bytes) and returns 1 with its length at *len_p (at
 * least a message header's); 0 if there is none (or ep failed: posted too
 * far ahead, too long, too short).  The caller decodes and runs it, then calls
 * ep_post_taken, which frees its slot for the client. */
int ep_post_next(struct ep *ep, uint8_t *msg, uint32_t *len_p);
void ep_post_taken(struct ep *ep);

/* A FAIL record (proto/ring.h) to every endpoint of j here, behind every
 * item delivered so far: the job cannot complete step or any later one. */
void ep_job_fail(struct job *j, uint32_t step, uint32_t rank, int err, const char *text);

/* Publishes what was written into RX rings, waking clients that sleep.
 * Returns 1 if any was published. */
int ep_publish(void);

/* Loop hooks (loop.h): arm and disarm wake-ups of TX and RX rings. */
int ep_sleep_prepare(void);
void ep_sleep_done(void);

/* 1 while ep's TX ring holds records not taken yet (and ep has not failed). */
int ep_tx_pending(const struct ep *ep);

/* ep ends with records still in its TX ring: they are taken out and counted
 * as lost (ep_stats.items_lost).  Returns how many items that was. */
uint64_t ep_tx_abandon(struct ep *ep);

/* 1 while queued items or unconsumed TX records remain. */
int ep_busy(void);

/* Writes ep's lines for ferryctl status (under its job's line). */
void ep_write_status(FILE *out, const struct ep *ep);

/* Core specialisation: whether ep's client may run on none of ferryd's
 * CPUs is looked at when it joins and again here, at most every 100 ms (a
 * client or ferryd moved by taskset -p since; a hint: only the client's
 * main thread is looked at).  ep_all_apart: every endpoint here was apart
 * when last looked at, and there is one (then ferryd's CPUs are its own,
 * and it may spin for them: coll.c). */
void ep_check_cpus(struct ep *ep);
int ep_all_apart(void);

#endif
