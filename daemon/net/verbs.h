/* daemon/net/verbs.h - the RDMA verbs transport's own interface between its
 * files (not for the rest of the daemon, which sees only link.h):
 *
 *   verbs_dev.c  the device: protection domain, completion channel and queue,
 *                async events, hot-plug (a removed device is let go of and
 *                retried), and the transport table (listen, fini, stats)
 *   verbs_cm.c   connections: rdma_cm's event channel, the listener,
 *                connecting, accepting, the private-data identification
 *   verbs_mr.c   frame registrations (frames are sent without a copy)
 *   verbs_qp.c   the links: queue pairs, the data path with credits,
 *                completions, the link ops, keepalive
 *
 * The only files that touch libibverbs or librdmacm.  See link.h for what a
 * transport does; the handshake, sequence numbers, acknowledgements and
 * retransmission are the peer layer's, exactly as for TCP.
 *
 * Resources.  One device (the one holding the node's address, which rdma_cm
 * finds from it), one protection domain, one completion channel and one
 * completion queue per daemon; one queue pair per routing peer.  The
 * completion channel's fd is in the epoll loop; on an event the CQ is polled
 * in batches.
 *
 * Sending: a frame goes out as one SEND (with immediate data, see credits)
 * straight from the frame buffer: aggregation buffers are registered memory
 * (registered on first use and kept while the frame sits in the reuse pool),
 * so a full buffer is posted without another copy.  With frame integrity the
 * tag is written into the frame just before it is posted (link.h); a link
 * that encrypts seals the frame into one of VERBS_SEAL_BUFS registered
 * buffers of its own instead (the encryption writes the copy), freed at the
 * SEND's completion.  SEND rather than RDMA
 * WRITE with immediate into a ring at the peer: the receiver must be able to
 * stop taking frames (backpressure) and take them apart in place, which
 * pre-posted receive buffers give for free, and a ring would need a second
 * credit scheme for its space; frames are large (kilobytes), so the extra
 * receive-side bookkeeping per SEND is nothing.
 *
 * Credits.  Each side posts VERBS_RECV_BUFS receive buffers once the link
 * has authenticated (before that, see below).  A sender may have at most as
 * many SENDs unreturned as the peer has buffers, less a reserve: every SEND
 * carries in its immediate data the number of buffers its sender has posted
 * again since its last SEND (its credits back to the peer), counted when the
 * completion is reaped, even while the frame itself waits (pause).  When a
 * side has many credits to return and nothing to send, it sends an ACK frame
 * just for them; data frames leave VERBS_RESERVE credits to ACK frames, and
 * the very last credit goes only to a SEND that returns credits (see
 * may_post in verbs_qp.c for why that keeps two paused sides from waiting
 * for each other for ever).  A receiver that cannot take a frame now
 * (backpressure) keeps its buffer and returns no credit for it, which stops
 * the sender.  rnr_retry_count is "infinite" as a last line of defence.
 *
 * Before authentication.  Anyone who can reach the port gets a queue pair
 * for a connection request with a plausible identification, so until the
 * peer layer has checked the peer's AUTH a link has only VERBS_PREAUTH_BUFS
 * receive buffers of VERBS_CTRL_BYTES (a HELLO and an AUTH fit; a larger
 * SEND fails the link) in the same registration as its control slots: some
 * 5 KiB instead of 2 MiB.  Those are used once, never posted again and never
 * returned as credits; once the link is up the full set is registered and
 * posted behind them and returned as credits.  Receive queues are FIFO, so
 * a sender knows how many of the peer's SENDs still land in small buffers
 * (small_left): a frame that does not fit one waits until ACK frames have
 * used them up.  Accepted connections not authenticated yet are capped
 * (VERBS_MAX_UNAUTH, VERBS_MAX_UNAUTH_PER_HOST), must say HELLO within 1 s
 * and authenticate within 5 s (peer.c), and one from a node of the cluster
 * takes the place of the oldest one from elsewhere (or, at the per-address
 * cap, of the oldest from its own address that has not said HELLO), as on
 * TCP.
 *
 * Handshake.  rdma_cm's private data (56 bytes for RC) cannot hold the
 * authenticated HELLO/AUTH (144 + 32 bytes): it carries an identification
 * (magic, version, node ids, largest frame each side receives) checked before
 * a queue pair is spent, and HELLO/AUTH are the first SENDs on the connection,
 * through the same peer-layer code as on TCP.
 *
 * Failures.  An error completion, a DISCONNECTED or UNREACHABLE event, or the
 * device's port going down ends the link (ev->down).  A peer that is gone
 * without a word (a crashed host, a silent partition) shows only as a work
 * request of ours that fails: a link with no completion for a keepalive
 * interval posts an ACK frame if it may, and a zero-length RDMA WRITE (the
 * probe) whatever its credits, which needs no receive buffer at the peer
 * (verbs_qp.c, on_keepalive).  The connecting side
 * retries with backoff and the frames not acknowledged are sent again.  A
 * removed device ends every link and the listener; the daemon keeps running,
 * logs it, and tries to set the device up again every few seconds.
 *
 * The four files call each other through this header (one transport, one
 * interface); the rest of the daemon sees only transport_verbs (link.h).
 *
 * Ownership: a link (struct vlink) sits in a slot from verbs_link_new until
 * it ends (verbs_link_end, or verbs_link_fail, which also tells the peer
 * layer): then its queue pair, id and buffers go at once, it leaves its slot
 * and is marked dead, and its memory is freed by the loop once the current
 * callback has returned (link.h), since code up the stack (take(), on_cm)
 * may still look at it.  Completions carry the slot's generation, so those
 * of a link that ended match nothing.  Frame registrations belong to their
 * frames (frame.h) and are all released, with the PD, when the device goes.
 * A frame posted as a SEND from its own memory is held (frame_hold) for that
 * work request, in the link's sent[] slot named by its wr_id, until the
 * completion is reaped or the link ends, after its queue pair is destroyed:
 * its owner may free it meanwhile (frame.h), but the memory and registration
 * stay until the device cannot read them any more.
 */
#ifndef FERRY_NET_VERBS_H
#define FERRY_NET_VERBS_H

#include "link.h"
#include "../core/conf.h"
#include "../core/loop.h"

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>
#include <stdint.h>

#define VERBS_RECV_BUFS   32            /* receive buffers per link, once authenticated */
#define VERBS_PREAUTH_BUFS 4            /* small receive buffers before that (VERBS_CTRL_BYTES each) */
#define VERBS_RQ_DEPTH    (VERBS_RECV_BUFS + VERBS_PREAUTH_BUFS)
#define VERBS_RESERVE     2             /* credits only ACK frames may use */
#define VERBS_CTRL_SLOTS  16            /* control frames (HELLO, AUTH, ACK) in flight */
#define VERBS_CTRL_BYTES  256           /* one control frame */
#define VERBS_SEAL_BUFS   VERBS_RECV_BUFS       /* encrypting links: frames sealed and in flight */
#define VERBS_SQ_DEPTH    (VERBS_RECV_BUFS + VERBS_CTRL_SLOTS)     /* SENDs in flight */
#define VERBS_SQ_WRS      (VERBS_SQ_DEPTH + 1)  /* and the liveness probe (verbs_qp.c, on_keepalive) */
#define VERBS_MAX_LINKS   1024
#define VERBS_WR_PER_LINK (VERBS_SQ_WRS + VERBS_RQ_DEPTH)      /* completions one link can have pending */
/* Accepted connections that have not authenticated yet (see Before
 * authentication): each holds a queue pair and a few KiB of pinned memory. */
#define VERBS_MAX_UNAUTH  16
#define VERBS_MAX_UNAUTH_PER_HOST 8
#define VERBS_MAGIC       0x46525642u   /* "FRVB" */
#define VERBS_RESOLVE_MS  2000
#define VERBS_REINIT_NS   (3ull * 1000000000u)
#define VERBS_KEEPALIVE_NS (5ull * 1000000000u)
/* Transport retries of a SEND before it completes with an error (the REQ's
 * value serves both sides).  Not 7: soft-RoCE (rxe) takes 7 to mean "retry
 * for ever", and then a SEND to a dead or partitioned peer never fails, so
 * neither the keepalive nor anything else would end the link. */
#define VERBS_RETRY_COUNT 6

/* What every file of the transport needs: the configuration, the peer
 * layer's events, and the device; set up by verbs_dev.c. */
struct verbs_state {
	const struct conf *conf;
	uint32_t self;
	const struct link_events *ev;   /* the peer layer's */
	uint32_t max_frame;             /* largest frame this node sends and receives */
	uint32_t max_links;             /* links the CQ has room for (every WR of each) */
	int up;                         /* the device is set up */
	struct ibv_context *ctx;        /* librdmacm's; closed once its ids are gone */
	struct ibv_pd *pd;
	struct ibv_comp_channel *cc;
	struct ibv_cq *cq;
};
extern struct verbs_state verbs;

struct vlink {
	struct link l;
	struct rdma_cm_id *id;
	uint32_t slot, gen;
	uint32_t node;          /* the peer's node id, once known */
	int dead;               /* ended; events and completions ignored, the loop frees it */
	struct loop_grave grave;
	char addr[80];
	char host[48];          /* accepted: the address it came from */
	uint64_t born;          /* accepted: order of arrival (the oldest is evicted first) */

	/* receiving */
	uint8_t *rbuf;          /* VERBS_RECV_BUFS buffers of verbs.max_frame bytes, once up */
	struct ibv_mr *rmr;
	int paused;
	uint32_t held[VERBS_RQ_DEPTH], held_len[VERBS_RQ_DEPTH], nheld;  /* taken off the CQ, not processed */
	uint32_t credits_back;  /* buffers posted again, not yet announced */

	/* sending */
	uint32_t credits;       /* SENDs we may still post */
	uint32_t small_left;    /* the peer's pre-authentication buffers our SENDs have not used yet */
	uint32_t peer_max_frame;
	uint8_t *cbuf;          /* control frame slots, then the pre-authentication receive buffers */
	struct ibv_mr *cmr;
	struct frame *sent[VERBS_SQ_DEPTH];     /* frames held by their posted SENDs */
	uint64_t sent_used;     /* bitmap of sent[] */
	uint32_t cfree;         /* bitmap of free control slots */
	uint32_t cq_pending[VERBS_CTRL_SLOTS], cq_len[VERBS_CTRL_SLOTS], ncq;   /* control frames to post, in order */
	uint32_t outstanding;   /* posted SENDs without a completion */
	int probing;            /* the liveness probe is posted, without a completion */
	uint32_t rq_out;        /* posted receives without a completion */
	uint8_t *sbuf;          /* encrypting links: VERBS_SEAL_BUFS sealed frames of verbs.max_frame bytes */
	struct ibv_mr *smr;
	uint32_t sfree;         /* bitmap of free sealing buffers */

	/* statistics */
	uint64_t posted, completed, credit_waits, keepalives, probes;
	uint64_t posted_seen;   /* posted at the last keepalive tick */
	uint64_t completed_seen;        /* completed at the last keepalive tick */
	int touched;            /* had completions in this CQ batch (verbs_qp.c) */
};

/* --- verbs_dev.c --- */

/* The device went away (or failed): ends every link and the listener, lets
 * go of everything on the device and retries it every VERBS_REINIT_NS. */
void verbs_dev_teardown(const char *why);

/* --- verbs_cm.c --- */

/* Opens rdma_cm's event channel (into the loop) and resolves the node's own
 * address.  0 or -errno (logged at notice: "auto" falls back to TCP). */
int verbs_cm_init(void);
void verbs_cm_fini(void);
/* Binds the listener to the node's address; *ctx_p is the device holding
 * it.  prio is the level for "not there" messages. */
int verbs_cm_bind(int prio, struct ibv_context **ctx_p);
/* Starts listening on the bound address, 0 or -errno (logged). */
int verbs_cm_listen(void);
/* Destroys the listener. */
void verbs_cm_unbind(void);
int verbs_connect(uint32_t node, const char *host, uint16_t port, struct link **l_p, char *err, size_t errlen);

/* --- verbs_mr.c --- */

/* Registers f's memory with the PD (once; it stays while f is pooled). */
int verbs_mr_register(struct frame *f);
/* Releases every frame registration (before the PD goes). */
void verbs_mr_release_all(void);
/* Bytes of frame memory registered now. */
uint64_t verbs_mr_bytes(void);

/* --- verbs_qp.c --- */

/* A link for id in a free slot, or NULL. */
struct vlink *verbs_link_new(struct rdma_cm_id *id, int outgoing);
/* The queue pair and buffers of a link whose id knows its device. */
int verbs_link_setup(struct vlink *v);
/* Ends a link without telling the peer layer (see Ownership). */
void verbs_link_end(struct vlink *v);
/* Ends a link because of a failure and tells the peer layer (once). */
void verbs_link_fail(struct vlink *v, const char *why);
/* Posts what the link may send now. */
void verbs_link_flush(struct vlink *v);
/* Every link: fails (tells the peer layer) or ends (at shutdown). */
void verbs_links_fail_all(const char *why);
void verbs_links_end_all(void);
/* Accepted links not authenticated yet (each holds a QP and a few KiB of
 * pinned buffers); *from_host_p of them came from host. */
uint32_t verbs_links_unauthenticated(const char *host, uint32_t *from_host_p);
/* Ends the oldest accepted link not authenticated yet whose host is_stranger
 * says is not a node of the cluster; 1 if there was one. */
int verbs_link_evict_stranger(int (*is_stranger)(const char *host));
/* Ends the oldest accepted link from host that has received nothing yet
 * (no HELLO); 1 if there was one. */
int verbs_link_evict_silent(const char *host);
/* The completion channel's loop callback. */
void verbs_on_cq(struct loop_watch *w, uint32_t events);
/* The CQ is destroyed: what ended links left in it is gone with it. */
void verbs_qp_cq_gone(void);
void verbs_keepalive_start(void);
void verbs_keepalive_stop(void);
/* Counters for ferryctl stats. */
void verbs_qp_write_stats(FILE *out);

#endif
