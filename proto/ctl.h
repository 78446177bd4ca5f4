/* proto/ctl.h - control messages on ferryd's Unix stream socket.
 *
 * Every message is an 8-byte header and a body of hdr.len bytes, in host byte
 * order (both ends are on the same machine).  A client speaks first:
 *
 *   client                              ferryd
 *   HELLO {role=ENDPOINT}        ──▶
 *   JOIN {job, rank, size}       ──▶    checks credentials, rank, size
 *                                ◀──    ATTACHED {region layout} + SCM_RIGHTS:
 *                                       [memfd region, eventfd to client, eventfd to daemon]
 *                                ◀──    DIRECT {slots} + SCM_RIGHTS: [memfd of the job's
 *                                       direct rings, the slots' eventfds] (only if
 *                                       JOIN asked, and the job has direct rings here)
 *                                ◀──    READY {size}, once every rank has joined
 *                                ◀──    ERROR {errno, text} when something fails
 *   MEM {id, bytes} + SCM_RIGHTS: ──▶    (after READY) shares a sealed memfd for
 *     [memfd]                           collectives' buffers (daemon/local/mem.h)
 *   MEM_FREE {id}                ──▶    ... and stops sharing it
 *   COLL {kind, seq, group, ...} ──▶    (after READY) posts a collective operation
 *                                ◀──    COLL_DONE {group, seq, errno, text} when it ended
 *   GROUP_FREE {id}              ──▶    leaves a group (COLL kind SPLIT made it): its
 *                                       later operations fail on the other ranks
 *   LAYOUT {buf}                 ──▶    (after READY) asks for the job's rank -> node
 *                                ◀──    table, written into buf: COLL_DONE {0, 0, ...}
 *
 * A tool (ferryctl) sends HELLO {role=ADMIN} and then QUERY messages, each
 * answered by one TEXT message.  Items never travel here: they use the rings.
 *
 * Decoders take arbitrary bytes and either fill a struct ctl_msg or return an
 * error; they never read outside the buffer they are given.
 */
#ifndef FERRY_PROTO_CTL_H
#define FERRY_PROTO_CTL_H

#include <assert.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "direct.h"
#include "job.h"

/* 2: the fragments of a large item carry their index in it (proto/ring.h,
 *    PROTO_REC_FRAG): a daemon and a libferry of version 1 would not agree
 *    on where items start.
 * 3: COLL and COLL_DONE (collective operations).
 * 4: COLL kind SPLIT, GROUP_FREE and LAYOUT; COLL_DONE names the group.
 * 5: ATTACHED gives the completion page (done_off, proto/done.h): an
 *    operation that succeeded ends there, not with a COLL_DONE.
 * 6: COLL kinds SCATTER, SCATTERV, GATHER, GATHERV; COLL's root and
 *    flags (CTL_COLL_IN_PLACE).
 * 7: COLL kinds BCAST .. EXSCAN; the type and operation in COLL's flags.
 * 8: COLL reports the time of an earlier operation as the rank saw it
 *    (prev_group, prev_seq, prev_us); QUERY COSTS.
 * 9: DENSE records in TX, RX and direct rings (proto/ring.h "Dense
 *    batches"). */
#define CTL_VERSION   9
#define CTL_MAX_BODY  (1u << 20)        /* TEXT replies may be long; others are tiny */
#define CTL_ERRTEXT_MAX 255

enum ctl_type {
	CTL_HELLO    = 1,   /* c→d */
	CTL_JOIN     = 2,   /* c→d */
	CTL_ATTACHED = 3,   /* d→c, carries 3 fds */
	CTL_READY    = 4,   /* d→c */
	CTL_ERROR    = 5,   /* d→c */
	CTL_QUERY    = 6,   /* c→d, admin */
	CTL_TEXT     = 7,   /* d→c, admin */
	CTL_DIRECT   = 8,   /* d→c, before READY, carries 1 + n fds (proto/direct.h) */
	CTL_COLL     = 9,   /* c→d, after READY: a collective operation */
	CTL_COLL_DONE = 10, /* d→c: that operation ended */
	CTL_MEM      = 11,  /* c→d, after READY, carries 1 fd: memory for collectives */
	CTL_MEM_FREE = 12,  /* c→d: that memory is no longer shared */
	CTL_GROUP_FREE = 13,/* c→d, after READY: the rank leaves a group */
	CTL_LAYOUT   = 14,  /* c→d, after READY: asks for the job's rank -> node table */
	CTL_TYPE_MAX = CTL_LAYOUT,
};

enum ctl_role {
	CTL_ROLE_ENDPOINT = 1,  /* an application endpoint (libferry) */
	CTL_ROLE_ADMIN    = 2,  /* ferryctl */
};

enum ctl_query {
	CTL_Q_STATUS = 1,       /* human-readable status */
	CTL_Q_STATS  = 2,       /* counters */
	CTL_Q_DEBUG  = 3,       /* root only: arg selects a fault to inject */
	CTL_Q_COSTS  = 4,       /* the runtime functions of user arg (daemon/cluster/costs.h):
				 * another user's for root only; CTL_COSTS_OWN: the asker's */
	CTL_Q_MAX    = CTL_Q_COSTS,
};

#define CTL_COSTS_OWN 0xffffffffu

/* CTL_Q_DEBUG's arg: a node id (break the link to it), or this: make a
 * system call that ferryd's seccomp filter forbids (it kills the daemon
 * when the filter is on), or this: from now on, endpoints that close keep
 * their TX rings' loans as when there is no memory to take them back
 * (daemon/local/endpoint.h "Loans"). */
#define CTL_DEBUG_FORBIDDEN_CALL 0xffffffffu
#define CTL_DEBUG_KEEP_LOANS     0xfffffffeu

struct ctl_hdr {
	uint8_t  version;       /* CTL_VERSION */
	uint8_t  type;          /* enum ctl_type */
	uint16_t flags;         /* none defined: must be zero */
	uint32_t len;           /* body bytes after this header, <= CTL_MAX_BODY */
};
static_assert(sizeof(struct ctl_hdr) == 8, "ctl header layout");

/* The version a message claims: the first byte of its header, where every
 * version of this protocol keeps it.  A client and a daemon of different
 * versions refuse each other with an error that names both (the daemon in
 * an ERROR of its own version, which the client recognises by this byte).
 * The layouts of the rings, the direct rings and the done page come with
 * ATTACHED and DIRECT: a change to any of them is a new CTL_VERSION. */
static inline unsigned ctl_hdr_version(const void *buf)
{
	return *(const uint8_t *)buf;
}

/* Bodies as they appear on the socket. */
struct ctl_hello_wire {
	uint32_t role;          /* enum ctl_role */
	uint32_t reserved;      /* zero */
};
static_assert(sizeof(struct ctl_hello_wire) == 8, "hello layout");

struct ctl_join_wire {
	uint32_t rank;
	uint32_t size;          /* ranks in the job, >= 1 */
	uint32_t flags;         /* enum ctl_join_flags */
	uint32_t name_len;      /* 1..PROTO_NAME_MAX bytes of name follow, no NUL (proto_name_ok) */
};
static_assert(sizeof(struct ctl_join_wire) == 16, "join layout");

enum ctl_join_flags {
	/* The client reads direct rings (proto/direct.h): ferryd may send
	 * CTL_DIRECT before READY.  A daemon that does not know the flag
	 * refuses the JOIN. */
	CTL_JOIN_DIRECT = 1u << 0,
	CTL_JOIN_FLAGS_ALL = CTL_JOIN_DIRECT,
};

struct ctl_attached_wire {
	uint64_t region_bytes;  /* size of the memfd region */
	uint64_t tx_off;        /* offset of the TX ring header */
	uint64_t tx_size;       /* TX ring data bytes */
	uint64_t rx_off;
	uint64_t rx_size;
	uint32_t node;          /* this daemon's node id */
	uint32_t session;       /* session id, for logs */
	uint32_t flags;         /* enum ctl_attached_flags */
	uint32_t reserved;      /* zero */
	uint64_t done_off;      /* offset of the completion page (proto/done.h) */
};
static_assert(sizeof(struct ctl_attached_wire) == 64, "attached layout");

enum ctl_attached_flags {
	/* The daemon runs membarrier(MEMBARRIER_CMD_GLOBAL_EXPEDITED) before it
	 * sleeps: a client registered for it may publish TX records without a
	 * fence while the TX ring's consumer_fences says so (proto/ring.h). */
	CTL_ATTACHED_MEMBARRIER = 1u << 0,
	CTL_ATTACHED_FLAGS_ALL = CTL_ATTACHED_MEMBARRIER,
};

struct ctl_ready_wire {
	uint32_t size;          /* ranks in the job */
	uint32_t nodes;         /* nodes the job spans */
};
static_assert(sizeof(struct ctl_ready_wire) == 8, "ready layout");

/* CTL_DIRECT: the job's direct rings on this node.  n ranks (by slot, all
 * different) follow as uint32_t; the message carries the region's memfd and
 * then the n slots' eventfds, by slot. */
struct ctl_direct_wire {
	uint64_t region_bytes;  /* proto_direct_region_bytes(n, ring_size) */
	uint64_t ring_size;     /* data bytes of each ring (ring_size_ok) */
	uint32_t n;             /* slots: 1 .. PROTO_DIRECT_MAX */
	uint32_t slot;          /* the receiver's, < n */
};
static_assert(sizeof(struct ctl_direct_wire) == 24, "direct layout");

struct ctl_error_wire {
	int32_t  err;           /* positive errno value */
	uint32_t text_len;      /* <= CTL_ERRTEXT_MAX bytes follow */
};
static_assert(sizeof(struct ctl_error_wire) == 8, "error layout");

struct ctl_query_wire {
	uint32_t what;          /* enum ctl_query */
	uint32_t arg;           /* query-specific */
};
static_assert(sizeof(struct ctl_query_wire) == 8, "query layout");

/* COLL: the rank posts its operation number seq of the group (every rank
 * of a group posts the same operations in the same order, numbered from 1
 * by each handle); kind says what it is, the rest its arguments. */
enum ctl_coll_kind {
	CTL_COLL_BARRIER = 1,   /* no arguments */
	CTL_COLL_ALLTOALL = 2,  /* count: bytes per block; send and recv: size blocks each */
	CTL_COLL_ALLTOALLV = 3, /* vec: sendcounts, sdispls, recvcounts, rdispls (size u64 each,
				 * in that order); send and recv: the extents they address */
	CTL_COLL_SPLIT = 4,     /* ferry_split: an all-to-all of 8-byte blocks (count 8), each
				 * rank's blocks all its {int32 color, int32 key}; when it
				 * completes, every node with ranks in them has the groups
				 * (daemon/coll/coll.c, "Groups") */
	/* The rooted ones: root is the root's rank in the group; only the
	 * root passes vec, and sends (scatter) or receives (gather) more than
	 * its own block.  Only the root may set CTL_COLL_IN_PLACE (its own
	 * block stays where it is: in its send buffer for a scatter, its
	 * receive buffer for a gather). */
	CTL_COLL_SCATTER = 5,   /* count: bytes per block; send: size blocks (root), recv: one block */
	CTL_COLL_SCATTERV = 6,  /* count: bytes this rank receives; vec (root): sendcounts, sdispls
				 * (size u64 each); send (root): the extent they address */
	CTL_COLL_GATHER = 7,    /* count: bytes per block; send: one block, recv: size blocks (root) */
	CTL_COLL_GATHERV = 8,   /* count: bytes this rank sends; vec (root): recvcounts, rdispls;
				 * recv (root): the extent they address */
	/* Broadcast (rooted): count bytes; the root's data in send, the
	 * others' buffer as recv. */
	CTL_COLL_BCAST = 9,
	/* The reductions: the type and operation in flags (CTL_COLL_TYPE,
	 * CTL_COLL_OP), counts in elements.  (FERRY_IN_PLACE is libferry's:
	 * it posts a copy of the input as the send buffer.) */
	CTL_COLL_REDUCE = 10,   /* rooted; count; send: count elements, recv (root): count */
	CTL_COLL_ALLREDUCE = 11,        /* count; send, recv: count elements */
	/* Allgather: count bytes per block; send one block, recv size blocks. */
	CTL_COLL_ALLGATHER = 12,
	CTL_COLL_ALLGATHERV = 13,       /* count: bytes this rank sends; vec: recvcounts, rdispls
					 * (size u64 each); recv: the extent they address */
	CTL_COLL_REDUCE_SCATTER_BLOCK = 14,     /* count: elements per rank; send: size x count, recv: count */
	CTL_COLL_REDUCE_SCATTER = 15,   /* vec: recvcounts (size u64, elements); send: their sum, recv:
					 * this rank's */
	CTL_COLL_SCAN = 16,     /* count; send, recv: count elements */
	CTL_COLL_EXSCAN = 17,   /* the same; rank 0's recv is left as it was */
	CTL_COLL_KIND_MAX = CTL_COLL_EXSCAN,
};

/* The rooted kinds' algorithms (COLL strategy: 0 automatic, else this
 * + 1): direct (the root's node sends every node its message), opt and
 * sdf (a physical torus whose every node has ranks of the group: the
 * planned regions, daemon/plan/scatter.h), orth and tree (the orthogonal
 * two-phase and the binomial tree, daemon/plan/sg_sched.h). */
enum ctl_rooted_alg { CTL_ROOTED_DIRECT = 0, CTL_ROOTED_OPT = 1, CTL_ROOTED_SDF = 2, CTL_ROOTED_ORTH = 3,
		      CTL_ROOTED_TREE = 4 };
#define CTL_ROOTED_ALGS 5
/* The all-to-all's algorithms (enum a2a_strategy, daemon/plan/a2a.h). */
#define CTL_A2A_ALGS 4
/* The algorithms of bcast, reduce, allreduce and allgather(v) (enum
 * orth_alg, daemon/plan/orth.h), of reduce_scatter(_block) (enum rs_alg,
 * daemon/plan/rs.h), and of scan and exscan (one: the chain). */
#define CTL_ORTH_ALGS 3
#define CTL_RS_ALGS 3
#define CTL_SCAN_ALGS 1
#define CTL_PHASED_ALGS 3       /* the most of those */

/* The algorithms' names by COLL strategy: [0] "auto", [alg + 1] algorithm
 * alg's, NULL after the last; one table for libferry, ferryd's
 * configuration (collectives.*) and its messages. */
extern const char *const ctl_a2a_algs[CTL_A2A_ALGS + 2];
extern const char *const ctl_rooted_algs[CTL_ROOTED_ALGS + 2];
extern const char *const ctl_orth_algs[CTL_ORTH_ALGS + 2];
extern const char *const ctl_rs_algs[CTL_RS_ALGS + 2];
extern const char *const ctl_scan_algs[CTL_SCAN_ALGS + 2];
/* The table of a kind's algorithms (NULL: a kind without). */
const char *const *ctl_coll_algs(uint32_t kind);
/* The name of a kind, as ferry_coll_strategy and collectives.* take it
 * ("alltoall", "reduce_scatter_block"...), or NULL. */
const char *ctl_coll_kind_name(uint32_t kind);
/* The kind of a name, or 0. */
uint32_t ctl_coll_kind_by_name(const char *name);

/* The kind that shares kind's algorithm setting (ferry_coll_strategy,
 * FERRY_COLL_*): allgather and allgatherv, reduce_scatter_block and
 * reduce_scatter, scan and exscan; else kind itself. */
static inline uint32_t ctl_coll_variant(uint32_t kind)
{
	switch (kind) {
	case CTL_COLL_ALLGATHER: return CTL_COLL_ALLGATHERV;
	case CTL_COLL_ALLGATHERV: return CTL_COLL_ALLGATHER;
	case CTL_COLL_REDUCE_SCATTER_BLOCK: return CTL_COLL_REDUCE_SCATTER;
	case CTL_COLL_REDUCE_SCATTER: return CTL_COLL_REDUCE_SCATTER_BLOCK;
	case CTL_COLL_SCAN: return CTL_COLL_EXSCAN;
	case CTL_COLL_EXSCAN: return CTL_COLL_SCAN;
	}
	return kind;
}
/* The families of kinds that share an algorithm setting (ferry_coll_strategy,
 * FERRY_COLL_*, collectives.* in ferry.conf, GO's forced algorithms) and
 * the runtime functions fitted to their times (daemon/plan/cost.h): a kind
 * and its variant (ctl_coll_variant; the all-to-all's: alltoallv and
 * split), scatter and gather apart.  Their names are the first kind's. */
enum ctl_fam { CTL_FAM_ALLTOALL, CTL_FAM_SCATTER, CTL_FAM_GATHER, CTL_FAM_BCAST, CTL_FAM_REDUCE,
	       CTL_FAM_ALLREDUCE, CTL_FAM_ALLGATHER, CTL_FAM_REDUCE_SCATTER, CTL_FAM_SCAN, CTL_FAMS };
#define CTL_FAM_ALGS_MAX CTL_ROOTED_ALGS        /* the most algorithms of a family */
/* kind's family, or -1 (barrier: it has no algorithms). */
int ctl_coll_fam(uint32_t kind);
/* A family's name ("alltoall", "reduce_scatter"...) or NULL. */
const char *ctl_fam_name(uint32_t fam);
/* A family's table of algorithms (as ctl_coll_algs), its number of them. */
const char *const *ctl_fam_algs(uint32_t fam);
uint32_t ctl_fam_nalgs(uint32_t fam);

/* name's index in such a table (0 for "auto"), or -1. */
int ctl_alg_by_name(const char *const *names, const char *name);

/* COLL flags */
#define CTL_COLL_IN_PLACE 1u    /* scatter, gather, at the root (see above) */
#define CTL_COLL_TYPE_SHIFT 8   /* the reductions: enum coll_type (proto/coll.h) in bits 8-15 */
#define CTL_COLL_OP_SHIFT 16    /* ... and enum coll_op in bits 16-23 */
#define CTL_COLL_TYPE(flags) ((flags) >> CTL_COLL_TYPE_SHIFT & 0xffu)
#define CTL_COLL_OP(flags) ((flags) >> CTL_COLL_OP_SHIFT & 0xffu)

/* 1 for the kinds with a root (scatter, gather: the root's rank in the
 * group is COLL's root). */
static inline int ctl_coll_rooted(uint32_t kind)
{
	return kind >= CTL_COLL_SCATTER && kind <= CTL_COLL_GATHERV;
}

/* 1 for the kinds of seed 004 and 002 (bcast .. exscan). */
static inline int ctl_coll_phased(uint32_t kind)
{
	return kind >= CTL_COLL_BCAST && kind <= CTL_COLL_EXSCAN;
}

/* 1 for the reductions (a type and an operation in flags). */
static inline int ctl_coll_reduces(uint32_t kind)
{
	return kind == CTL_COLL_REDUCE || kind == CTL_COLL_ALLREDUCE || kind == CTL_COLL_REDUCE_SCATTER_BLOCK ||
	       kind == CTL_COLL_REDUCE_SCATTER || kind == CTL_COLL_SCAN || kind == CTL_COLL_EXSCAN;
}

/* 1 for the kinds that name a root. */
static inline int ctl_coll_has_root(uint32_t kind)
{
	return ctl_coll_rooted(kind) || kind == CTL_COLL_BCAST || kind == CTL_COLL_REDUCE;
}

/* A buffer in memory shared with MEM: len bytes at off of region mem; mem 0
 * with off and len 0 for none. */
struct ctl_buf {
	uint32_t mem;
	uint32_t reserved;      /* zero */
	uint64_t off, len;
};
static_assert(sizeof(struct ctl_buf) == 24, "buf layout");

struct ctl_coll_wire {
	uint32_t kind;          /* enum ctl_coll_kind */
	uint32_t seq;           /* >= 1 */
	uint32_t group;         /* 0: the whole job */
	uint32_t flags;         /* CTL_COLL_IN_PLACE (rooted kinds); else zero */
	uint32_t strategy;      /* 0: automatic; else the algorithm (per kind) + 1 */
	uint32_t root;          /* rooted kinds: the root's rank in the group; else zero */
	uint64_t count;         /* kind-specific; zero where the kind has none */
	struct ctl_buf send, recv;
	struct ctl_buf vec;     /* per-rank counts and displacements, where the kind has them */
	/* A time this rank saw (all 0: none): operation prev_seq of group
	 * prev_group took prev_us microseconds from the rank's post to the
	 * rank seeing it end, what the runtime functions are fitted to
	 * (daemon/coll/coll.c "Runtime functions"). */
	uint32_t prev_group, prev_seq, prev_us;
	uint32_t reserved;      /* zero */
};
static_assert(sizeof(struct ctl_coll_wire) == 120, "coll layout");

/* What ferryd maps of one endpoint's regions at most (daemon/local/mem.h);
 * libferry keeps within it. */
#define CTL_MEM_MAX_REGIONS 256
#define CTL_MEM_MAX_BYTES   (64ull << 30)

/* MEM, MEM_FREE (bytes 0). */
struct ctl_mem_wire {
	uint32_t id;            /* >= 1, chosen by the client */
	uint32_t reserved;      /* zero */
	uint64_t bytes;
};
static_assert(sizeof(struct ctl_mem_wire) == 16, "mem layout");

/* COLL_DONE: operation seq of the group ended, err 0 or a positive errno
 * (the operation failed: text_len bytes of why follow).  Group 0 seq 0
 * answers the LAYOUT the client sent last (it has at most one
 * outstanding). */
struct ctl_coll_done_wire {
	uint32_t seq;
	int32_t  err;
	uint32_t text_len;      /* <= CTL_ERRTEXT_MAX */
	uint32_t group;         /* 0: the whole job */
};
static_assert(sizeof(struct ctl_coll_done_wire) == 16, "coll done layout");

/* GROUP_FREE: the rank leaves group id (ferry_close of its handle). */
struct ctl_group_wire {
	uint32_t id;            /* != 0 */
	uint32_t reserved;      /* zero */
};
static_assert(sizeof(struct ctl_group_wire) == 8, "group layout");

/* A decoded message.  Pointers point into the buffer given to ctl_decode. */
struct ctl_msg {
	uint8_t type;
	union {
		struct ctl_hello_wire hello;
		struct {
			uint32_t rank, size, flags;
			char name[PROTO_NAME_MAX + 1];
		} join;
		struct {
			struct ctl_direct_wire w;
			uint32_t ranks[PROTO_DIRECT_MAX];
		} direct;
		struct ctl_attached_wire attached;
		struct ctl_ready_wire ready;
		struct {
			int err;
			char text[CTL_ERRTEXT_MAX + 1];
		} error;
		struct ctl_query_wire query;
		struct {
			const char *text;
			uint32_t len;
		} text;
		struct ctl_coll_wire coll;
		struct ctl_mem_wire mem;
		struct ctl_group_wire group;    /* GROUP_FREE */
		struct ctl_buf layout;          /* LAYOUT: where the table goes (size u32) */
		struct {
			uint32_t group;
			uint32_t seq;
			int err;
			char text[CTL_ERRTEXT_MAX + 1];
		} coll_done;
	} u;
};

/* Decodes one message from the first n bytes of buf.  Returns the number of
 * bytes it used (header and body), 0 if buf holds only part of a message, or
 * -EPROTO for anything malformed (the connection must be closed). */
ssize_t ctl_decode(const void *buf, size_t n, struct ctl_msg *msg);

/* Encoders write one whole message into buf (cap bytes) and return its length,
 * or -ENOSPC / -EINVAL. */
ssize_t ctl_encode_hello(void *buf, size_t cap, uint32_t role);
ssize_t ctl_encode_join(void *buf, size_t cap, const char *job, uint32_t rank, uint32_t size);
ssize_t ctl_encode_join_flags(void *buf, size_t cap, const char *job, uint32_t rank, uint32_t size,
			      uint32_t flags);
ssize_t ctl_encode_direct(void *buf, size_t cap, const struct ctl_direct_wire *d, const uint32_t *ranks);
ssize_t ctl_encode_attached(void *buf, size_t cap, const struct ctl_attached_wire *a);
ssize_t ctl_encode_ready(void *buf, size_t cap, uint32_t size, uint32_t nodes);
ssize_t ctl_encode_error(void *buf, size_t cap, int err, const char *text);
ssize_t ctl_encode_query(void *buf, size_t cap, uint32_t what, uint32_t arg);
ssize_t ctl_encode_text(void *buf, size_t cap, const char *text, size_t len);
ssize_t ctl_encode_coll(void *buf, size_t cap, const struct ctl_coll_wire *c);
/* group 0 seq 0: the answer to a LAYOUT. */
ssize_t ctl_encode_coll_done(void *buf, size_t cap, uint32_t group, uint32_t seq, int err, const char *text);
ssize_t ctl_encode_group_free(void *buf, size_t cap, uint32_t id);
ssize_t ctl_encode_layout(void *buf, size_t cap, const struct ctl_buf *b);
ssize_t ctl_encode_mem(void *buf, size_t cap, uint32_t type, uint32_t id, uint64_t bytes);

#endif
