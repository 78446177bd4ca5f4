/* proto/wire.h - frames between daemons.
 *
 * A link (TCP stream or verbs queue pair) carries frames: a 24-byte header and
 * hdr.len bytes of body.  All fields are little-endian on the wire; the
 * encoders and decoders convert.  DATA frames carry items back to back, each a
 * 24-byte struct wire_item and its payload padded to 8 bytes.  Intermediate
 * daemons route an item by its destination node only; the destination daemon
 * uses job and dst to find the endpoint.
 *
 * Sequence numbers are per link and direction; every frame that must not be
 * lost (DATA, CTRL) has seq > 0; ack acknowledges every frame up to and
 * including that number.  See daemon/link.h for how they are used.
 */
#ifndef FERRY_PROTO_WIRE_H
#define FERRY_PROTO_WIRE_H

#include <assert.h>
#include <stddef.h>
#include <stdint.h>

#define WIRE_VERSION    1
#define WIRE_BODY_MAX   (1u << 20)

enum wire_kind {
	WIRE_HELLO = 1,         /* handshake, unsequenced */
	WIRE_AUTH  = 2,         /* handshake answer, unsequenced */
	WIRE_DATA  = 3,         /* items */
	WIRE_ACK   = 4,         /* only the ack field, empty body, unsequenced */
	WIRE_CTRL  = 5,         /* daemon control (jobs, steps), sequenced */
	WIRE_KIND_MAX = WIRE_CTRL,
};

struct wire_frame_hdr {
	uint8_t  version;       /* WIRE_VERSION */
	uint8_t  kind;          /* enum wire_kind */
	uint16_t flags;         /* none defined yet: must be zero */
	uint32_t len;           /* body bytes after this header, <= WIRE_BODY_MAX */
	uint64_t seq;           /* per-link sequence number; 0 for unsequenced kinds */
	uint64_t ack;           /* all frames up to this seq arrived from the peer */
};
static_assert(sizeof(struct wire_frame_hdr) == 24, "wire frame header layout");

enum wire_item_flags {
	WIRE_ITEM_MORE = 1u << 0,       /* fragment; more of the item follow */
	WIRE_ITEM_FLAGS_ALL = WIRE_ITEM_MORE,
};

struct wire_item {
	uint32_t len;           /* payload bytes, <= PROTO_FRAG_BYTES */
	uint8_t  flags;         /* enum wire_item_flags */
	uint8_t  reserved;      /* zero */
	uint16_t channel;
	uint32_t node;          /* destination node id */
	uint32_t job;           /* cluster-wide job id */
	uint32_t dst;           /* destination rank */
	uint32_t src;           /* source rank */
};
static_assert(sizeof(struct wire_item) == 24, "wire item layout");

static inline size_t wire_item_footprint(uint32_t len)
{
	return sizeof(struct wire_item) + (((size_t)len + 7) & ~(size_t)7);
}

/* Encodes h into 24 bytes at buf. */
void wire_encode_hdr(void *buf, const struct wire_frame_hdr *h);

/* Decodes and validates a frame header from buf (at least 24 bytes).  Returns
 * 0 or -EPROTO. */
int wire_decode_hdr(const void *buf, struct wire_frame_hdr *h);

/* Appends an item header and payload at buf (wire_item_footprint(len) bytes,
 * padding zeroed).  Returns the bytes written. */
size_t wire_encode_item(void *buf, const struct wire_item *it, const void *payload);

/* Decodes the item at body[*off] of a DATA body of len bytes and advances *off.
 * Returns 1 with *it and *payload_p set, 0 at the end of the body, -EPROTO if
 * the body is malformed. */
int wire_next_item(const void *body, size_t len, size_t *off,
		   struct wire_item *it, const void **payload_p);

#endif
