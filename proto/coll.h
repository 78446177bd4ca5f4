/* proto/coll.h - what the collectives name on every side: the element types
 * and reduction operations (libferry passes them to ferryd, daemons put them
 * in schedules and frames).  The values are ferry.h's enum ferry_type and
 * enum ferry_op (DESIGN.md, "Collectives"): fixed, append only.
 */
#ifndef FERRY_PROTO_COLL_H
#define FERRY_PROTO_COLL_H

#include <assert.h>
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

enum coll_type {
	COLL_BYTE = 0, COLL_INT8 = 1, COLL_UINT8 = 2, COLL_INT16 = 3, COLL_UINT16 = 4,
	COLL_INT32 = 5, COLL_UINT32 = 6, COLL_INT64 = 7, COLL_UINT64 = 8,
	COLL_FLOAT = 9, COLL_DOUBLE = 10,
	COLL_TYPES = 11,
};

enum coll_op {
	COLL_SUM = 0, COLL_PROD = 1, COLL_MIN = 2, COLL_MAX = 3, COLL_BAND = 4,
	COLL_BOR = 5, COLL_BXOR = 6, COLL_LAND = 7, COLL_LOR = 8, COLL_LXOR = 9,
	COLL_OPS = 10,
};

/* Bytes in one element of type t, or 0 if t is no type. */
static inline size_t coll_type_size(unsigned t)
{
	static const uint8_t size[COLL_TYPES] = { 1, 1, 1, 2, 2, 4, 4, 8, 8, 4, 8 };

	return t < COLL_TYPES ? size[t] : 0;
}

/* 1 if op applies to type t: sum, prod, min and max to every type; the bit
 * and logical operations to the integer types and bytes only.  Else 0. */
static inline int coll_op_ok(unsigned t, unsigned op)
{
	if (t >= COLL_TYPES || op >= COLL_OPS)
		return 0;
	return op <= COLL_MAX || (t != COLL_FLOAT && t != COLL_DOUBLE);
}

/* --- collective messages on the wire --------------------------------------
 *
 * A message of a collective schedule (daemon/plan/sched.h) is a byte stream:
 * a struct wire_coll_msg, then nparts little-endian u64 part lengths, then
 * the parts one after the other.  It travels in pieces of at most
 * WIRE_COLL_PIECE_MAX stream bytes, each the payload of one item after a
 * struct wire_coll_piece, in order (a piece's offset is where the one before
 * ended: the path between two nodes keeps order, and a receiver refuses a
 * piece that does not continue its message).  Between daemons a piece is a
 * control item of type WIRE_CTL_COLL (proto/wire.h), routed and resent like
 * every item. */

#define WIRE_COLL_PIECE_MAX (64u * 1024 - 64)   /* stream bytes in one piece */
#define WIRE_COLL_ALG_SHIFT 24  /* wire_coll_piece.root: the rank below (ranks < 2^20) */
#define WIRE_COLL_ROOT_MASK ((1u << WIRE_COLL_ALG_SHIFT) - 1)
#define WIRE_COLL_PARTS_MAX (1u << 24)          /* parts in one message */

struct wire_coll_piece {
	uint32_t job;           /* cluster-wide job id (proto/wire.h) */
	uint32_t gen;           /* its generation, <= 127 */
	uint32_t op;            /* the group's operation number (posting order, from 1) */
	uint32_t msg;           /* the message's number in the schedule */
	uint32_t from;          /* the sending node's index in the group */
	uint32_t group;         /* the group: 0 the whole job, else a ferry_split group */
	uint64_t offset;        /* of this piece's bytes in the stream */
	uint64_t total;         /* stream bytes of the whole message */
	uint32_t kind;          /* the operation's kind (enum ctl_coll_kind) as the sender's
				 * ranks posted it, in bits 0-7, and for a reduction its
				 * type and operation in bits 8-15 and 16-23 (as COLL's
				 * flags carry them): a receiver whose ranks posted another
				 * fails it (a split and an all-to-all of 8-byte blocks, or
				 * an int32 and a float sum, travel alike); 0 in a BREAK or
				 * HOLD */
	uint32_t root;          /* the kinds with a root: the root's rank in the group as the
				 * sender's ranks named it; above it (WIRE_COLL_ALG_SHIFT)
				 * what its node's plan is: the rooted kinds' algorithm + 1,
				 * the phased kinds' plan tag (1..255), the all-to-alls'
				 * strategy + 1, 0 for a barrier (a receiver whose ranks
				 * named another root, or whose node runs another plan, fails
				 * it with EINVAL, wherever the piece is on its way) */
};
static_assert(sizeof(struct wire_coll_piece) == 48, "coll piece layout");

/* A piece whose msg is WIRE_COLL_MSG_BREAK is no message of a schedule: it
 * says the group is broken from operation `op` on (those fail on every
 * node; the ones before may still complete).  Its stream (offset 0, all in
 * this one piece) is a struct wire_coll_break and text_len bytes of why.  A
 * node sends it to every node of the group when one of its ranks leaves the
 * group (ferry_close of the group's handle, or of the rank's session) or an
 * operation of the group fails there. */
#define WIRE_COLL_MSG_BREAK UINT32_MAX
#define WIRE_COLL_KIND_MAX 255  /* a piece's kind's bits 0-7: 1 .. this, 0 in a BREAK or HOLD */
#define WIRE_COLL_KIND_BITS 24  /* ... and bits beyond these are 0 */
struct wire_coll_break {
	int32_t  err;           /* positive errno */
	uint32_t text_len;      /* <= 255 */
};
static_assert(sizeof(struct wire_coll_break) == 8, "coll break layout");

/* Decodes the stream of a BREAK piece h (n bytes at data): its errno into
 * *err_p and its why into why (cap >= 256 bytes: NUL-terminated, control
 * characters replaced by '?').  Returns 0, or -EPROTO if it is not one
 * whole BREAK (offset 0, total n, an errno 1..4095, text_len the rest). */
static inline int wire_coll_break_decode(const struct wire_coll_piece *h, const uint8_t *data, uint64_t n,
					 int *err_p, char *why, size_t cap)
{
	struct wire_coll_break b;

	if (h->msg != WIRE_COLL_MSG_BREAK || h->offset || h->total != n || n < sizeof(b) || cap < 256)
		return -EPROTO;
	memcpy(&b, data, sizeof(b));
	if (b.err <= 0 || b.err > 4095 || b.text_len > 255 || b.text_len != n - sizeof(b))
		return -EPROTO;
	memcpy(why, data + sizeof(b), b.text_len);
	why[b.text_len] = '\0';
	for (char *c = why; *c; c++)
		if ((unsigned char)*c < 0x20 || *c == 0x7f)
			*c = '?';
	*err_p = b.err;
	return 0;
}

/* A piece whose msg is WIRE_COLL_MSG_HOLD is no message of a schedule
 * either: it is backpressure for pieces that come before their operation
 * starts (daemon/coll/coll.c, "Holding back").  The node that sends it asks
 * the receiver to hold back its pieces of the group's operations from `op`
 * on (those before it go on), or with on == 0 to send them all again.  Its
 * stream (offset 0, all in this one piece) is a struct wire_coll_hold.  A
 * later HOLD replaces an earlier one. */
#define WIRE_COLL_MSG_HOLD (UINT32_MAX - 1)
struct wire_coll_hold {
	uint32_t on;            /* 1 hold back from op on, 0 go on */
	uint32_t reserved;      /* 0 */
};
static_assert(sizeof(struct wire_coll_hold) == 8, "coll hold layout");

/* Decodes the stream of a HOLD piece h (n bytes at data) into *on_p (0 or
 * 1).  Returns 0, or -EPROTO if it is not one whole HOLD. */
static inline int wire_coll_hold_decode(const struct wire_coll_piece *h, const uint8_t *data, uint64_t n,
					int *on_p)
{
	struct wire_coll_hold b;

	if (h->msg != WIRE_COLL_MSG_HOLD || h->offset || h->total != n || n != sizeof(b))
		return -EPROTO;
	memcpy(&b, data, sizeof(b));
	if (b.on > 1 || b.reserved)
		return -EPROTO;
	*on_p = (int)b.on;
	return 0;
}

/* 1 if a piece with msg m is the engine's own (BREAK, HOLD), not a message
 * of a schedule. */
static inline int wire_coll_msg_engine(uint32_t m)
{
	return m == WIRE_COLL_MSG_BREAK || m == WIRE_COLL_MSG_HOLD;
}

/* The id of the group ferry_split makes out of group parent at the
 * parent's operation split_seq, whose rank 0 is job rank leader: never 0
 * (the whole job).  No two groups of one split share a leader, and a group
 * splits at most once per operation, so different groups of a job have
 * different (parent, split_seq, leader); ids of different groups collide
 * with a probability of about 2^-32 per pair, which a daemon that hosts
 * both finds (coll.c) and reports as a broken group. */
static inline uint32_t coll_group_id(uint32_t parent, uint32_t split_seq, uint32_t leader)
{
	uint64_t x = ((uint64_t)parent << 32 | split_seq) ^ ((uint64_t)leader * 0x9e3779b97f4a7c15ull);

	x ^= x >> 30;   /* splitmix64's finaliser */
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebull;
	x ^= x >> 31;
	x = (x >> 32) ^ (x & 0xffffffffu);
	return x ? (uint32_t)x : 1;
}

struct wire_coll_msg {
	uint32_t nparts;        /* <= WIRE_COLL_PARTS_MAX */
	uint32_t reserved;      /* 0 */
};
static_assert(sizeof(struct wire_coll_msg) == 8, "coll message layout");

/* The stream bytes before the parts of a message of nparts parts. */
static inline uint64_t wire_coll_head_bytes(uint32_t nparts)
{
	return sizeof(struct wire_coll_msg) + 8 * (uint64_t)nparts;
}

static inline void wire_coll_piece_encode(void *buf, const struct wire_coll_piece *p)
{
	/* little-endian hosts only (proto/wire.h says so for every item) */
	memcpy(buf, p, sizeof(*p));
}

/* Decodes the piece header at the start of an item's payload of len bytes:
 * the header, and at least one byte after it unless the piece ends an
 * empty stream (impossible: a stream has its 8-byte head), within its
 * message (offset + bytes <= total), at most WIRE_COLL_PIECE_MAX bytes.
 * Returns the stream bytes that follow, or -EPROTO. */
static inline int64_t wire_coll_piece_decode(const void *payload, size_t len, struct wire_coll_piece *p)
{
	uint64_t n;

	if (len <= sizeof(*p))
		return -EPROTO;
	memcpy(p, payload, sizeof(*p));
	n = len - sizeof(*p);
	if (n > WIRE_COLL_PIECE_MAX || p->total < sizeof(struct wire_coll_msg) || p->offset > p->total ||
	    n > p->total - p->offset || p->gen > 127 || p->op == 0 ||
	    (wire_coll_msg_engine(p->msg) ? p->kind != 0
					   : (p->kind & WIRE_COLL_KIND_MAX) == 0 || p->kind >> WIRE_COLL_KIND_BITS))
		return -EPROTO;
	return (int64_t)n;
}

#endif
