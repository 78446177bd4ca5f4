/* proto/wire.c - frame and item codecs; see wire.h. */
#include "wire.h"
#include "ring.h"

#include <endian.h>
#include <errno.h>
#include <string.h>

void wire_encode_hdr(void *buf, const struct wire_frame_hdr *h)
{
	struct wire_frame_hdr le = {
		.version = h->version,
		.kind = h->kind,
		.flags = htole16(h->flags),
		.len = htole32(h->len),
		.seq = htole64(h->seq),
		.ack = htole64(h->ack),
	};

	memcpy(buf, &le, sizeof(le));
}

int wire_decode_hdr(const void *buf, struct wire_frame_hdr *h)
{
	struct wire_frame_hdr le;

	memcpy(&le, buf, sizeof(le));
	h->version = le.version;
	h->kind = le.kind;
	h->flags = le16toh(le.flags);
	h->len = le32toh(le.len);
	h->seq = le64toh(le.seq);
	h->ack = le64toh(le.ack);
	if (h->version != WIRE_VERSION || h->kind < 1 || h->kind > WIRE_KIND_MAX ||
	    h->flags || h->len > WIRE_BODY_MAX)
		return -EPROTO;
	switch (h->kind) {
	case WIRE_DATA:
	case WIRE_CTRL:
		if (h->seq == 0)
			return -EPROTO;
		break;
	case WIRE_ACK:
		if (h->seq != 0 || h->len != 0)
			return -EPROTO;
		break;
	default:
		if (h->seq != 0)
			return -EPROTO;
	}
	return 0;
}

size_t wire_encode_item(void *buf, const struct wire_item *it, const void *payload)
{
	struct wire_item le = {
		.len = htole32(it->len),
		.flags = it->flags,
		.channel = htole16(it->channel),
		.node = htole32(it->node),
		.job = htole32(it->job),
		.dst = htole32(it->dst),
		.src = htole32(it->src),
	};
	size_t pad = wire_item_footprint(it->len) - sizeof(le) - it->len;
	uint8_t *p = buf;

	memcpy(p, &le, sizeof(le));
	memcpy(p + sizeof(le), payload, it->len);
	memset(p + sizeof(le) + it->len, 0, pad);
	return sizeof(le) + it->len + pad;
}

int wire_next_item(const void *body, size_t len, size_t *off,
		   struct wire_item *it, const void **payload_p)
{
	const uint8_t *p = body;
	struct wire_item le;

	if (*off == len)
		return 0;
	if (*off > len || len - *off < sizeof(le))
		return -EPROTO;
	memcpy(&le, p + *off, sizeof(le));
	it->len = le32toh(le.len);
	it->flags = le.flags;
	it->reserved = le.reserved;
	it->channel = le16toh(le.channel);
	it->node = le32toh(le.node);
	it->job = le32toh(le.job);
	it->dst = le32toh(le.dst);
	it->src = le32toh(le.src);
	if (it->len > PROTO_FRAG_BYTES || (it->flags & ~WIRE_ITEM_FLAGS_ALL) || it->reserved ||
	    wire_item_footprint(it->len) > len - *off)
		return -EPROTO;
	*payload_p = p + *off + sizeof(le);
	*off += wire_item_footprint(it->len);
	return 1;
}
