/* proto/wire.h - frames between daemons.
 *
 * A link (TCP stream or verbs queue pair) carries frames: a 24-byte header and
 * hdr.len bytes of body.  All fields are little-endian on the wire; the
 * encoders and decoders convert.  DATA frames carry items back to back, each a
 * 24-byte struct wire_item and its payload padded to 8 bytes.  Intermediate
 * daemons route an item by its destination node only; the destination daemon
 * uses job and dst to find the endpoint.
 *
 * Sequence numbers are per peer and direction (they go on across
 * reconnections); every DATA frame has seq > 0; ack acknowledges every frame
 * up to and including that number.  See daemon/net/peer.h and seq.h for how
 * they are used, and how the handshake authenticates.
 *
 * Frame integrity (security.integrity; daemon/net/auth.h has the keys and the
 * nonces): every frame after the handshake, DATA and ACK alike, has
 * WIRE_FRAME_MAC in its flags and ends with a WIRE_TAG_BYTES tag, counted in
 * hdr.len: a ChaCha20-Poly1305 tag over the 24-byte header as sent (ack and
 * seq included) and the body before the tag.  With WIRE_FRAME_SEALED too
 * (security.encrypt) the body before the tag is encrypted (AEAD, the header
 * is the associated data).  HELLO and AUTH never have either: the AUTH MACs
 * authenticate the handshake.
 *
 * Daemon-to-daemon control (job joins, rank tables, step accounting) travels
 * as items of job 0, so that it is routed, aggregated and acknowledged like
 * any item; its payloads are the struct wire_ctl_* below.
 */
#ifndef FERRY_PROTO_WIRE_H
#define FERRY_PROTO_WIRE_H

#include <assert.h>
#include <endian.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "job.h"
#include "ring.h"

/* 2: job generations (wire_item.gen and the control items' gen).
 * 3: frame integrity (hdr.flags, the tag, HELLO flags INTEGRITY/ENCRYPT).
 * 4: JOIN and LEAVE carry the node's incarnation; LOST has its own layout
 *    (a link down, or a node restarted as a new incarnation).
 * 5: WIRE_FRAME_URGENT.
 * 6: WIRE_ITEM_BATCH.
 * 7: the step parity in wire_item.gen (WIRE_GEN_STEP); generations < 128.
 * 8: WIRE_CTL_COLL, the collectives' messages; LEAVE's coll_started and
 *    FAIL's coll_ok.
 * 9: the collectives' pieces travel as items of their job (WIRE_DST_COLL);
 *    WIRE_CTL_PROBE; HAVE and GO carry the link cost (wire_ctl_step).
 * 10: a collective piece names its operation's kind (wire_coll_piece).
 * 11: WIRE_FRAME_ACK_SOON.
 * 12: a collective piece names the root its sender's ranks named (scatter,
 *     gather: wire_coll_piece.root).
 * 13: GO carries the home's collectives.* settings (wire_ctl_step.coll).
 * 14: a collective piece may be a HOLD (proto/coll.h: backpressure for
 *     pieces that come before their operation starts); WIRE_FRAME_ACK_LAZY.
 * 15: GO's tail (struct wire_ctl_go_tail): the forced algorithm of every
 *     family of collectives, and the home's runtime functions;
 *     wire_ctl_step.coll is reserved.
 * 16: an all-to-all's pieces carry its strategy + 1 above the root
 *     (proto/coll.h, wire_coll_piece.root), where they carried 0.
 * 17: WIRE_ITEM_DENSE, a dense batch (proto/ring.h "Dense batches"). */
#define WIRE_VERSION    17
/* Node ids: below 2^20, because a job's cluster-wide id is its home node's id
 * shifted left by WIRE_JOB_INDEX_BITS, or'ed with an index (daemon/cluster). */
#define WIRE_JOB_INDEX_BITS 12
#define WIRE_MAX_NODES  (1u << (32 - WIRE_JOB_INDEX_BITS))
#define WIRE_BODY_MAX   (1u << 20)     /* body bytes before the tag */
#define WIRE_TAG_BYTES  16              /* Poly1305 */

enum wire_kind {
	WIRE_HELLO = 1,         /* handshake: struct wire_hello, unsequenced */
	WIRE_AUTH  = 2,         /* handshake: struct wire_auth, unsequenced */
	WIRE_DATA  = 3,         /* items (daemon control travels as items of job 0) */
	WIRE_ACK   = 4,         /* only the ack field, empty body, unsequenced */
	WIRE_KIND_MAX = WIRE_ACK,
};

enum wire_frame_flags {
	WIRE_FRAME_MAC    = 1u << 0,    /* the body ends with a WIRE_TAG_BYTES tag */
	WIRE_FRAME_SEALED = 1u << 1,    /* and the rest of it is encrypted (needs MAC) */
	/* Sent at once for a FLUSH or DONE (or a control message): the next
	 * node sends the items it passes on from it at once too, rather than
	 * when its buffers fill or its flush timer fires.  A hint only. */
	WIRE_FRAME_URGENT = 1u << 2,
	/* Its sender holds memory for it that it wants back (bytes a client's
	 * TX ring lent it, daemon/net/frame.h): acknowledge it at once, not
	 * after ACK_DELAY_BYTES more or the ack timer.  A hint only. */
	WIRE_FRAME_ACK_SOON = 1u << 3,
	/* With URGENT: nobody waits for its acknowledgement (collectives'
	 * pieces, whose operation ends when they are sent): it may wait for a
	 * frame going back, as for a frame that is not urgent, rather than
	 * going out alone at once.  (An all-to-all's frames go both ways
	 * within a round: half the frames of a small one were ACKs.)  A hint
	 * only. */
	WIRE_FRAME_ACK_LAZY = 1u << 4,
	WIRE_FRAME_SECURITY = WIRE_FRAME_MAC | WIRE_FRAME_SEALED,
	WIRE_FRAME_FLAGS_ALL = WIRE_FRAME_MAC | WIRE_FRAME_SEALED | WIRE_FRAME_URGENT | WIRE_FRAME_ACK_SOON |
			       WIRE_FRAME_ACK_LAZY,
};

struct wire_frame_hdr {
	uint8_t  version;       /* WIRE_VERSION */
	uint8_t  kind;          /* enum wire_kind */
	uint16_t flags;         /* enum wire_frame_flags; other bits: reject the frame */
	uint32_t len;           /* body bytes after this header, the tag included;
				 * <= WIRE_BODY_MAX without the tag */
	uint64_t seq;           /* per-link sequence number; 0 for unsequenced kinds */
	uint64_t ack;           /* all frames up to this seq arrived from the peer */
};
static_assert(sizeof(struct wire_frame_hdr) == 24, "wire frame header layout");

enum wire_item_flags {
	WIRE_ITEM_MORE = 1u << 0,       /* fragment; more of the item follow */
	WIRE_ITEM_FRAG_MASK = 0x3fu << 1,       /* its index in the item (PROTO_REC_FRAG) */
	/* A batch (proto/ring.h "Batches"), never with other flags: len is
	 * the bytes of its item records (a multiple of 8, at most
	 * PROTO_BATCH_MAX), channel how many there are, dst and src theirs;
	 * never for job 0.  It travels as one element, and its records go
	 * into the receiver's RX ring as they are.  wire_batch_ok checks it. */
	WIRE_ITEM_BATCH = 1u << 7,
	/* A dense batch (proto/ring.h "Dense batches"): BATCH with the bit
	 * that no batch had before (a batch never had other flags: a new kind
	 * of batch, not a flag of an item).  len is the DENSE record's, the
	 * payload its payload as it is (struct proto_dense, then the items),
	 * channel how many items (as for BATCH, so that every batch counts the
	 * same way: wire_item_count), dst and src theirs; never for job 0.
	 * wire_batch_ok checks it in O(1). */
	WIRE_ITEM_DENSE = WIRE_ITEM_BATCH | WIRE_ITEM_MORE,
	WIRE_ITEM_FLAGS_ALL = WIRE_ITEM_MORE | WIRE_ITEM_FRAG_MASK | WIRE_ITEM_BATCH,
};
/* Every bit of the byte is taken: no flags byte is unknown any more, and a
 * new kind of element needs a new field (and WIRE_VERSION); a new kind of
 * batch takes a value of the low bits with BATCH (WIRE_ITEM_DENSE). */
static_assert(WIRE_ITEM_FLAGS_ALL == 0xff, "the flags byte is full");
#define WIRE_ITEM_FRAG(flags) (((uint32_t)(flags) & WIRE_ITEM_FRAG_MASK) >> 1)
/* An item's flags are its ring record's, bit for bit. */
static_assert((int)WIRE_ITEM_MORE == (int)PROTO_REC_MORE && (int)WIRE_ITEM_FRAG_MASK == (int)PROTO_REC_FRAG_MASK,
	      "item flags as ring record flags");

struct wire_item {
	uint32_t len;           /* payload bytes, <= PROTO_FRAG_BYTES */
	uint8_t  flags;         /* enum wire_item_flags */
	uint8_t  gen;           /* the job's generation, and WIRE_GEN_STEP (below) */
	uint16_t channel;
	uint32_t node;          /* destination node id */
	uint32_t job;           /* cluster-wide job id */
	uint32_t dst;           /* destination rank */
	uint32_t src;           /* source rank */
};
static_assert(sizeof(struct wire_item) == 24, "wire item layout");

/* An item of a job (job != 0) whose dst is WIRE_DST_COLL is no rank's: it
 * is a piece of the job's collectives (proto/coll.h) for the destination
 * node's engine, and src is the node that sent it.  It travels as the job's
 * items do, under their limits and backpressure (fwd/agg.h), and is not
 * counted in the job's steps. */
#define WIRE_DST_COLL UINT32_MAX

static inline size_t wire_item_footprint(uint32_t len)
{
	return sizeof(struct wire_item) + (((size_t)len + 7) & ~(size_t)7);
}

/* For an element whose header words are w0 (len, flags, gen, channel), w1
 * (node, job) and w2 (dst, src) and whose payload (in memory the sender
 * cannot change) follows: 1 if it is not a batch, or a valid one; 0 if it
 * is a malformed batch. */
static inline int wire_batch_ok(uint64_t w0, uint64_t w1, uint64_t w2, const uint8_t *payload)
{
	uint32_t k, flags = (uint32_t)(w0 >> 32) & 0xff;

	if (!(flags & WIRE_ITEM_BATCH))
		return 1;
	if ((w1 >> 32) == 0)
		return 0;
	if (flags == WIRE_ITEM_DENSE)
		k = (uint32_t)w0 >= sizeof(struct proto_dense) ? proto_dense_check(proto_dense_word(payload), (uint32_t)w0)
							      : 0;
	else
		k = flags == WIRE_ITEM_BATCH ? proto_batch_check(payload, (uint32_t)w0, w2) : 0;
	return k != 0 && k == (uint32_t)(w0 >> 48);
}

/* Items an element carries: a batch's records, else 1. */
static inline uint32_t wire_item_count(const struct wire_item *it)
{
	return it->flags & WIRE_ITEM_BATCH ? it->channel : 1;
}

/* --- link handshake ---------------------------------------------------- */

#define WIRE_MAGIC        0x59525246u   /* "FRRY" */
#define WIRE_NONCE_BYTES  32
#define WIRE_MAC_BYTES    32

enum wire_hello_flags {
	WIRE_HELLO_INSECURE  = 1u << 0, /* the sender has no cluster key */
	WIRE_HELLO_INTEGRITY = 1u << 1, /* it has security.integrity on */
	WIRE_HELLO_ENCRYPT   = 1u << 2, /* it has security.encrypt on */
	WIRE_HELLO_FLAGS_ALL = WIRE_HELLO_INSECURE | WIRE_HELLO_INTEGRITY | WIRE_HELLO_ENCRYPT,
};

/* Sent by both ends when a connection opens, the connecting end first. */
struct wire_hello {
	uint32_t magic;                 /* WIRE_MAGIC */
	uint16_t version;               /* WIRE_VERSION */
	uint16_t flags;                 /* enum wire_hello_flags */
	uint32_t from;                  /* sender's node id */
	uint32_t to;                    /* node id the sender means to reach */
	uint64_t incarnation;           /* per daemon start, larger for a later one, never 0 */
	uint64_t peer_incarnation;      /* the addressee's incarnation that ack refers to, 0: none */
	uint64_t ack;                   /* last in-order frame received from that incarnation */
	uint8_t  nonce[WIRE_NONCE_BYTES];
	uint8_t  cluster_len;           /* 1..PROTO_NAME_MAX (proto_name_ok) */
	uint8_t  reserved[7];           /* zero */
	char     cluster[64];           /* cluster name, zero padded */
};
static_assert(sizeof(struct wire_hello) == 144, "hello layout");

/* HMAC (libsodium crypto_auth) with the cluster key over a role byte and both
 * HELLO bodies as sent; see daemon/net/auth.c. */
struct wire_auth {
	uint8_t mac[WIRE_MAC_BYTES];
};
static_assert(sizeof(struct wire_auth) == 32, "auth layout");

void wire_encode_hello(void *buf, const struct wire_hello *h);
/* Validates a HELLO body of len bytes.  Returns 0 or -EPROTO. */
int wire_decode_hello(const void *buf, size_t len, struct wire_hello *h);

/* --- daemon control items (job 0; the item's dst field is the type) ----- */

/* Job ids and generations.  A job's home node gives it an id (its own node id
 * and an index) and a generation, which counts how often the home has handed
 * out that index (mod 128).  Indexes are handed out in turn (next-fit), so an
 * (id, generation) pair comes back only after 128 x 4095 jobs at that home.
 * Every item and every control message about a job carries both, and a node
 * takes an item only for the job that has both: an old item of an ended job,
 * sent again after a reconnection, cannot land in a new job (of another
 * user, perhaps) that got the same id.
 *
 * The step of an item.  A node appends the STEP record of step s to its
 * ranks' RX rings when it hears that s completed, and the items of step s+1
 * must come after it.  Ranks on other nodes start s+1 when their node hears
 * the home's STEP, and their items can reach this node before the home's
 * STEP does: by another route, or right behind it on the same link, since a
 * control item waits in a queue (fwd/ctlq.h) while items go straight into
 * rings.  So the top bit of a data item's gen (WIRE_GEN_STEP) is the parity
 * of the step its sending node was in when it took the item from the rank's
 * TX ring: a rank's items of step s are taken before its DONE, those of s+1
 * after its node heard the STEP (an item written after DONE, before that,
 * ends the rank's session: fwd/tx.c).  A node is never a step ahead of one
 * it sends to (s+1 needs this node's ranks done in s), and once s completed
 * no item of s is on its way (the counts say all were ringed).  (A node
 * where the job failed completes no more steps, early or not.)  So an item
 * whose parity is not that of the receiving node's step is of the next
 * step, and says that the step completed: the node appends the STEP records
 * first (fwd/rx.c, local/endpoint.h ep_step_complete), and the home's STEP,
 * when it comes, is about a step gone by and ignored.  Control items, and the
 * gen fields of the control messages, carry the generation alone. */
#define WIRE_GEN_MASK   0x7fu
#define WIRE_GEN_STEP   0x80u

enum wire_ctl_type {
	WIRE_CTL_JOIN   = 1,    /* node -> home: a local rank joined */
	WIRE_CTL_LEAVE  = 2,    /* node -> home: a local rank left */
	WIRE_CTL_REJECT = 3,    /* home -> node: that join is refused */
	WIRE_CTL_TABLE  = 4,    /* home -> nodes: job id and (part of) the rank table */
	WIRE_CTL_REPORT = 5,    /* node -> home: step accounting */
	WIRE_CTL_STEP   = 6,    /* home -> nodes: a step completed */
	WIRE_CTL_HAVE   = 7,    /* node -> home: it has the whole rank table */
	WIRE_CTL_GO     = 8,    /* home -> nodes: every node has it; ranks may start */
	WIRE_CTL_XOFF   = 9,    /* node -> nodes of a job: stop sending to a rank here */
	WIRE_CTL_XON    = 10,   /* node -> nodes of a job: that rank takes items again */
	WIRE_CTL_FAIL   = 11,   /* node of a job -> its home, home -> the job's nodes: no more steps */
	WIRE_CTL_LOST   = 12,   /* a peer of a node -> every node: their link is down, or the node restarted */
	WIRE_CTL_COLL   = 13,   /* node -> node of a job: a piece of a collective's message (proto/coll.h) */
	WIRE_CTL_PROBE  = 14,   /* peer -> peer at link start: any payload, dropped; its frame's
				 * round trip measures the link (daemon/plan/linkcost.h) */
	WIRE_CTL_TYPE_MAX = WIRE_CTL_PROBE,
};

#define WIRE_TABLE_MAX     16000u       /* ranks per TABLE item: fits one 64 KiB item */

/* JOIN, LEAVE, REJECT: a rank of the job (uid, name).  JOIN and LEAVE carry
 * the incarnation of the sending node's daemon (net/peer.h), which the home
 * keeps beside the rank: a node that restarted (its ranks are gone) says JOIN
 * from its new incarnation, and a LOST about the restart drops only what the
 * instances before it had joined. */
struct wire_ctl_rank {
	uint32_t uid;
	uint32_t size;          /* ranks in the job */
	uint32_t rank;
	int32_t  err;           /* REJECT: positive errno; else 0 */
	uint64_t incarnation;   /* JOIN, LEAVE: non-zero; REJECT: 0 */
	uint32_t name_len;      /* 1..PROTO_NAME_MAX bytes follow (proto_name_ok) */
	uint32_t coll_started;  /* LEAVE: the job's collective operations the sending node has
				 * started (it runs them to the end); else 0 */
};
static_assert(sizeof(struct wire_ctl_rank) == 32, "ctl rank layout");

/* TABLE: ranks first..first+count-1 live on nodes[] (u32 each, after the
 * name padded to 4 bytes); UINT32_MAX marks a rank that left. */
struct wire_ctl_table {
	uint32_t uid;
	uint32_t job;           /* cluster-wide job id, > 0 */
	uint32_t size;
	uint32_t first;
	uint32_t count;         /* 1..WIRE_TABLE_MAX */
	uint32_t name_len;
	uint32_t gen;           /* the job's generation, <= WIRE_GEN_MASK */
};
static_assert(sizeof(struct wire_ctl_table) == 28, "ctl table layout");

/* REPORT: cumulative counters of one node for one job. */
struct wire_ctl_report {
	uint32_t job;
	uint32_t step;          /* the step the done count refers to */
	uint32_t done;          /* local ranks that ended that step */
	uint32_t gen;           /* the job's generation, <= WIRE_GEN_MASK */
	uint64_t sent;          /* items local ranks sent, all steps */
	uint64_t ringed;        /* items written into local RX rings, all steps */
};
static_assert(sizeof(struct wire_ctl_report) == 32, "ctl report layout");

/* STEP: step number step of job completed.  HAVE and GO: the same layout,
 * step 0, with the cost of the sending node's links (HAVE) or the one the
 * job's nodes agree on (GO; daemon/plan/linkcost.h, 0: unknown); GO has a
 * tail (below).  XOFF and XON: the same layout, step is the destination
 * rank.  alpha_ns and beta_ps are 0 but in HAVE and GO; reserved is 0. */
struct wire_ctl_step {
	uint32_t job;
	uint32_t step;
	uint32_t gen;           /* the job's generation, <= WIRE_GEN_MASK */
	uint32_t alpha_ns;      /* α, nanoseconds */
	uint32_t beta_ps;       /* β, picoseconds per byte */
	uint32_t reserved;      /* 0 (GO's forced algorithms in versions 13-14) */
};
static_assert(sizeof(struct wire_ctl_step) == 24, "ctl step layout");

/* GO's tail, after its step: what the job's home fixes for the job's
 * collectives, so that every node of the job chooses alike even where
 * their files or their measurements differ.  force[f]: the algorithm the
 * home's configuration forces on family f (enum ctl_fam, proto/ctl.h;
 * collectives.* in ferry.conf), 0 automatic, else the algorithm + 1 (0
 * past CTL_FAMS); then nfn runtime functions fitted on the home
 * (daemon/plan/cost.h), each a struct wire_go_fn, in increasing order of
 * (fam, alg). */
#define WIRE_GO_FAMS 12
#define WIRE_GO_FNS_MAX 64
struct wire_ctl_go_tail {
	uint8_t force[WIRE_GO_FAMS];
	uint32_t nfn;           /* <= WIRE_GO_FNS_MAX */
};
static_assert(sizeof(struct wire_ctl_go_tail) == 16, "ctl go tail layout");
struct wire_go_fn {
	uint8_t fam;            /* enum ctl_fam */
	uint8_t alg;            /* one of the family's algorithms (not + 1) */
	uint16_t reserved;      /* 0 */
	uint32_t tau_ns;        /* the start-up time τ, nanoseconds */
	uint32_t tc_ps;         /* the byte time t_c, picoseconds per byte */
};
static_assert(sizeof(struct wire_go_fn) == 12, "ctl go function layout");

/* FAIL: job (id, gen) cannot complete step or any later one, because rank
 * left (else UINT32_MAX), or node was lost (else UINT32_MAX); err is the
 * positive errno the ranks' ferry_step_wait returns (EPIPE, EHOSTDOWN), and
 * text_len bytes of printable text saying what happened follow.  A node of
 * the job says so to the home; the home decides, and says so to the job's
 * nodes (daemon/cluster/cluster.h). */
#define WIRE_FAIL_TEXT_MAX 160u
struct wire_ctl_fail {
	uint32_t job;
	uint32_t gen;
	uint32_t step;
	uint32_t rank;
	uint32_t node;
	int32_t  err;
	uint32_t coll_ok;       /* the job's collective operations up to this one may still
				 * complete (those a node that lost its rank had started);
				 * the later ones fail */
	uint32_t text_len;      /* 1..WIRE_FAIL_TEXT_MAX */
};
static_assert(sizeof(struct wire_ctl_fail) == 32, "ctl fail layout");

/* LOST, from a routing peer of node to every node, by kind: LINK, the link
 * between the sender and node has been down for a while (both may be alive:
 * the jobs whose routes use that link fail, and so do the jobs that start
 * while it is down); LINK_BACK, that link is up again; RESTART, node's
 * daemon came back as incarnation (non-zero), without the state of the
 * instances before it (every job that needs node fails, its homes drop the
 * ranks those instances had).  text_len bytes of printable text follow. */
enum wire_lost_kind {
	WIRE_LOST_LINK = 0,
	WIRE_LOST_RESTART = 1,
	WIRE_LOST_LINK_BACK = 2,
};
struct wire_ctl_lost {
	uint32_t node;
	uint32_t kind;          /* enum wire_lost_kind */
	uint64_t incarnation;   /* RESTART: the new one; else 0 */
	uint32_t text_len;      /* 1..WIRE_FAIL_TEXT_MAX */
	uint32_t reserved;      /* 0 */
};
static_assert(sizeof(struct wire_ctl_lost) == 24, "ctl lost layout");

/* A decoded control item.  name and nodes point into the payload. */
struct wire_ctl {
	uint32_t type;
	union {
		struct wire_ctl_rank rank;
		struct wire_ctl_table table;
		struct wire_ctl_report report;
		struct wire_ctl_step step;
		struct wire_ctl_fail fail;
		struct wire_ctl_lost lost;
	} u;
	char name[PROTO_NAME_MAX + 1];
	char text[WIRE_FAIL_TEXT_MAX + 1];      /* FAIL's and LOST's, NUL-terminated */
	const uint8_t *nodes;   /* TABLE: count little-endian u32, maybe unaligned */
	struct wire_ctl_go_tail go;     /* GO's tail */
	const uint8_t *fns;     /* GO: its functions (wire_ctl_go_fn) */
};

/* GO's function i (< c->go.nfn). */
void wire_ctl_go_fn(const struct wire_ctl *c, uint32_t i, struct wire_go_fn *f);

/* Decodes the payload of a control item of the given type.  Returns 0 or
 * -EPROTO. */
int wire_ctl_decode(uint32_t type, const void *payload, size_t len, struct wire_ctl *c);

/* Encoders write the payload into buf (cap bytes) and return its length, or
 * -ENOSPC.  Values are host order in, little-endian out. */
ssize_t wire_ctl_encode_rank(void *buf, size_t cap, const struct wire_ctl_rank *r, const char *name);
ssize_t wire_ctl_encode_table(void *buf, size_t cap, const struct wire_ctl_table *t, const char *name,
			      const uint32_t *nodes);
ssize_t wire_ctl_encode_report(void *buf, size_t cap, const struct wire_ctl_report *r);
ssize_t wire_ctl_encode_step(void *buf, size_t cap, const struct wire_ctl_step *s);
/* GO: the step, the tail, and t->nfn functions fns. */
ssize_t wire_ctl_encode_go(void *buf, size_t cap, const struct wire_ctl_step *s, const struct wire_ctl_go_tail *t,
			   const struct wire_go_fn *fns);
ssize_t wire_ctl_encode_fail(void *buf, size_t cap, const struct wire_ctl_fail *f, const char *text);
ssize_t wire_ctl_encode_lost(void *buf, size_t cap, const struct wire_ctl_lost *l, const char *text);

/* Reads the i-th node of a decoded TABLE. */
static inline uint32_t wire_ctl_table_node(const struct wire_ctl *c, uint32_t i)
{
	const uint8_t *p = c->nodes + 4 * (size_t)i;

	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* --- frames --------------------------------------------------------------- */

/* Encodes h into 24 bytes at buf. */
void wire_encode_hdr(void *buf, const struct wire_frame_hdr *h);

/* Decodes and validates a frame header from buf (at least 24 bytes): version,
 * kind, flags, the length (room for the tag with WIRE_FRAME_MAC), seq and an
 * empty ACK body (bar the tag).  Returns 0 or -EPROTO. */
int wire_decode_hdr(const void *buf, struct wire_frame_hdr *h);

/* The version a frame header claims: its first byte, where every version of
 * the protocol keeps it.  Daemons of different versions refuse each other
 * with a log line naming both (daemon/net/link_tcp.c, verbs_qp.c). */
static inline unsigned wire_hdr_version(const void *buf)
{
	return *(const uint8_t *)buf;
}

/* Sets the ack field of the encoded frame header at hdr (piggybacked
 * acknowledgements are stamped just before a frame goes out). */
static inline void wire_set_ack(void *hdr, uint64_t ack)
{
	uint64_t le = htole64(ack);

	__builtin_memcpy((uint8_t *)hdr + offsetof(struct wire_frame_hdr, ack), &le, sizeof(le));
}

/* The per-item codecs run once per item per hop, so they are inline, and on
 * little-endian hosts (the wire's order) a header is one plain copy. */
#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "wire_encode_item/wire_next_item: add byte swapping for big-endian hosts"
#endif

/* A frame received in place (daemon/net/link.h "Receiving"): what the
 * transport reads first, the frame header and its first item's header. */
#define WIRE_STEER_HEAD (sizeof(struct wire_frame_hdr) + sizeof(struct wire_item))

/* Appends an item header and payload at buf (wire_item_footprint(len) bytes,
 * padding zeroed).  Returns the bytes written. */
static inline size_t wire_encode_item(void *buf, const struct wire_item *it, const void *payload)
{
	uint8_t *p = buf;
	size_t fp = wire_item_footprint(it->len);
	__builtin_memcpy(p, it, sizeof(*it));
	if (fp > sizeof(*it)) {
		/* Zero the last word first: the payload then overwrites all
		 * of it but the padding. */
		__builtin_memset(p + fp - 8, 0, 8);
		proto_copy(p + sizeof(*it), payload, it->len);
	}
	return fp;
}

/* The per-item paths move headers between the two layouts as 64-bit words
 * (proto/ring.h struct proto_rec: len, kind, flags, channel | dst, src;
 * struct wire_item: len, flags, gen, channel | node, job | dst, src): the
 * first words differ only in the bytes 4 and 5, the last words are the
 * same.  These two are the only places that know it. */
static_assert(offsetof(struct wire_item, flags) == 4 && offsetof(struct wire_item, gen) == 5 &&
	      offsetof(struct wire_item, channel) == 6 && offsetof(struct wire_item, node) == 8 &&
	      offsetof(struct wire_item, job) == 12 && offsetof(struct wire_item, dst) == 16 &&
	      offsetof(struct wire_item, src) == 20, "struct wire_item's words");

/* Appends the item of an ITEM record whose header words are rec_w0 and
 * dst_src (src: the sender's rank) at p, for node and job (generation gen),
 * as wire_encode_item would: the header as three words stored straight into
 * the frame, the padding zeroed.  Returns the bytes written. */
static inline size_t wire_put_rec_item(uint8_t *p, uint64_t rec_w0, uint8_t gen, uint32_t node, uint32_t job,
				       uint64_t dst_src, const void *payload)
{
	uint32_t len = (uint32_t)rec_w0;
	uint64_t w0 = (rec_w0 & 0xffff0000ffffffffull) | ((rec_w0 >> 8) & 0xff00000000ull) | (uint64_t)gen << 40;
	uint64_t w1 = node | (uint64_t)job << 32;
	size_t fp = wire_item_footprint(len);

	__builtin_memcpy(p, &w0, 8);
	__builtin_memcpy(p + 8, &w1, 8);
	__builtin_memcpy(p + 16, &dst_src, 8);
	if (len & 7)    /* zero the padding: the payload overwrites the rest of the word */
		__builtin_memset(p + fp - 8, 0, 8);
	proto_copy(p + sizeof(struct wire_item), payload, len);
	return fp;
}

/* A batch (WIRE_ITEM_BATCH) of the len bytes of item records at recs
 * (client memory: it may change them meanwhile) for node and job
 * (generation gen), whose records say dst_src (the record header's second
 * word: dst, src), at p (wire_item_footprint(len) bytes): the records are
 * copied first and checked in the copy (proto_batch_check), then the
 * header is written.  Returns how many items it holds, or 0 if they are
 * not a valid batch (p then holds garbage). */
static inline void wire_put_batch_header(uint8_t *p, uint32_t len, uint32_t k, uint8_t gen, uint32_t node,
					 uint32_t job, uint64_t dst_src);

static inline uint32_t wire_put_batch(uint8_t *p, const uint8_t *recs, uint32_t len, uint8_t gen, uint32_t node,
				      uint32_t job, uint64_t dst_src)
{
	uint32_t k;

	if (len > PROTO_BATCH_MAX)
		return 0;
	__builtin_memcpy(p + sizeof(struct wire_item), recs, len);
	if (!(k = proto_batch_check(p + sizeof(struct wire_item), len, dst_src)))
		return 0;
	wire_put_batch_header(p, len, k, gen, node, job, dst_src);
	return k;
}

/* The header of a batch of k records (len bytes, checked) at p. */
static inline void wire_put_batch_header(uint8_t *p, uint32_t len, uint32_t k, uint8_t gen, uint32_t node,
					 uint32_t job, uint64_t dst_src)
{
	uint64_t w0 = len | (uint64_t)WIRE_ITEM_BATCH << 32 | (uint64_t)gen << 40 | (uint64_t)k << 48;
	uint64_t w1 = node | (uint64_t)job << 32;

	__builtin_memcpy(p, &w0, 8);
	__builtin_memcpy(p + 8, &w1, 8);
	__builtin_memcpy(p + 16, &dst_src, 8);
}

/* A dense batch (WIRE_ITEM_DENSE) of k items whose checked header word is
 * h, for node and job (generation gen), dst_src theirs, at p
 * (wire_item_footprint(len) bytes): the header, h, and the len - 8 bytes
 * of items at items (client memory: copied, never checked, so that they
 * may change meanwhile).  Returns the bytes written. */
static inline size_t wire_put_dense(uint8_t *p, uint64_t h, const uint8_t *items, uint32_t len, uint32_t k,
				    uint8_t gen, uint32_t node, uint32_t job, uint64_t dst_src)
{
	uint64_t w0 = len | (uint64_t)WIRE_ITEM_DENSE << 32 | (uint64_t)gen << 40 | (uint64_t)k << 48;
	uint64_t w1 = node | (uint64_t)job << 32;

	__builtin_memcpy(p, &w0, 8);
	__builtin_memcpy(p + 8, &w1, 8);
	__builtin_memcpy(p + 16, &dst_src, 8);
	__builtin_memcpy(p + sizeof(struct wire_item), &h, 8);
	__builtin_memcpy(p + sizeof(struct wire_item) + 8, items, len - sizeof(struct proto_dense));
	return wire_item_footprint(len);
}

/* The first word of the ITEM record for an item whose first wire header
 * word is wire_w0 (the record's second word is the wire's third). */
static inline uint64_t wire_rec_word0(uint64_t wire_w0)
{
	return (wire_w0 & 0xffff0000ffffffffull) | ((wire_w0 & 0xff00000000ull) << 8) | (uint64_t)PROTO_REC_ITEM << 32;
}

/* The item header at p of a body that wire_next_item has validated whole
 * (fwd/rx.c checks every frame before it uses any of it): no checks, so
 * that the second pass over a frame costs a copy of the header. */
static inline void wire_item_at(const uint8_t *p, struct wire_item *it)
{
	__builtin_memcpy(it, p, sizeof(*it));
}

/* Decodes the item at body[*off] of a DATA body of len bytes and advances *off.
 * Returns 1 with *it and *payload_p set, 0 at the end of the body, -EPROTO if
 * the body is malformed. */
static inline int wire_next_item(const void *body, size_t len, size_t *off,
				 struct wire_item *it, const void **payload_p)
{
	const uint8_t *p = body;

	if (*off == len)
		return 0;
	if (*off > len || len - *off < sizeof(*it))
		return -EPROTO;
	__builtin_memcpy(it, p + *off, sizeof(*it));
	/* (Every bit of the flags byte has a meaning: no unknown flag.) */
	if (it->len > PROTO_FRAG_BYTES || wire_item_footprint(it->len) > len - *off)
		return -EPROTO;
	{
		uint64_t w[3];

		__builtin_memcpy(w, it, sizeof(w));
		if (!wire_batch_ok(w[0], w[1], w[2], p + *off + sizeof(*it)))
			return -EPROTO;
	}
	*payload_p = p + *off + sizeof(*it);
	*off += wire_item_footprint(it->len);
	return 1;
}

#endif
