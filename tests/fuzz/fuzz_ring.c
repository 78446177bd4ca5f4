/* tests/fuzz/fuzz_ring.c - ring_peek/ring_consume (consumer) and
 * ring_reserve (producer) against a ring whose shared header and data the
 * other side filled with arbitrary bytes.
 * Input: 8 bytes head, 8 bytes tail, then the start of the data area. */
#include "../../proto/ring.c"

#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint8_t *mem;
	uint64_t ring = PROTO_RING_MIN, head = 0, tail = 0;
	struct ring c, p;
	struct proto_rec rec, *slot;
	const void *payload;
	size_t n;

	if (!mem)
		mem = aligned_alloc(PROTO_CACHELINE, ring_bytes(ring));
	if (size >= 16) {
		memcpy(&head, data, 8);
		memcpy(&tail, data + 8, 8);
		data += 16;
		size -= 16;
	}
	n = size < ring ? size : ring;

	/* Consumer: whatever was published must be decoded or refused. */
	ring_attach(&c, mem, ring, 1);
	memcpy(c.data, data, n);
	atomic_store(&c.sh->head, head);
	for (int i = 0; i < 100000; i++) {
		int ret = ring_peek(&c, &rec, &payload);

		if (ret <= 0)
			break;
		/* Touch the payload: it must lie inside the ring. */
		if (rec.len && ((const uint8_t *)payload)[rec.len - 1] == 0xfe)
			c.tail += 0;
		ring_consume(&c, &rec);
	}

	/* Producer: a tail from the consumer must be validated before use. */
	ring_attach(&p, mem, ring, 1);
	p.head = head & (ring * 4 - 1) & ~7ull;  /* a plausible own head */
	set_fast_end(&p);
	atomic_store(&p.sh->tail, tail);
	for (int i = 0; i < 64; i++) {
		uint32_t len = (uint32_t)((tail >> (i % 48)) % (PROTO_FRAG_BYTES + 1));

		/* The fast way first where it agrees to (fast_end), as
		 * libferry and ferryd do: either way the slot lies inside. */
		if (!(i & 1) && (slot = ring_reserve_fast(&p, len)) != NULL) {
			if ((uint8_t *)slot < p.data || (uint8_t *)slot + ring_footprint(len) > p.data + ring)
				abort();
		} else if (ring_reserve(&p, len, &slot) != 0) {
			break;
		}
		memset(slot, 0, ring_footprint(len));
	}
	return 0;
}
