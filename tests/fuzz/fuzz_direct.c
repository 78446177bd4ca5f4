/* tests/fuzz/fuzz_direct.c - libferry's receiving side (client/recv.c)
 * reading a direct ring that another process of the job filled with
 * arbitrary bytes (proto/direct.h: a peer is a process of the same user,
 * but a broken one must break nothing but its job, and never make us read
 * outside the ring).  The handle has a direct ring from rank 1 holding the
 * input and an empty RX ring; ferry_recv(..., 0) is called until it finds
 * nothing or gives up on the ring (for up to 64 items, or 1 to 7 every
 * other call), and every item it returns is read whole.
 * Input: 8 bytes head, then the start of the ring's data.
 */
#include "../../client/recv.c"
#include "../../proto/ring.c"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

/* What recv.c calls in the rest of libferry: here nothing is pending,
 * and there is no daemon to ask. */
int conn_seterr(int err, const char *fmt, ...)
{
	(void)fmt;
	return err;
}
int conn_check(struct ferry *f) { return f->dead; }
int conn_wait(struct ferry *f, int timeout_ms) { (void)f; (void)timeout_ms; return -ETIMEDOUT; }
int out_flush(struct ferry *f, int block) { (void)f; (void)block; return 0; }
int out_arm(struct ferry *f) { (void)f; return 0; }
void out_disarm(struct ferry *f) { (void)f; }
void poll_rearm(struct ferry *f) { (void)f; }
void coll_fd_recheck(struct ferry *f) { (void)f; }

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint8_t *rxmem, *dmem, *emem;
	static _Atomic uint8_t gone[2];
	uint64_t ring = PROTO_RING_MIN, head = 0;
	struct ferry f = { 0 };
	struct direct dr = { 0 };
	struct dring in[2] = { 0 }, out[2] = { 0 };
	struct ferry_item it[64];
	uint8_t direct_of[8] = { 0 };
	volatile uint8_t sink = 0;
	size_t n;

	if (!rxmem) {
		rxmem = aligned_alloc(PROTO_CACHELINE, ring_bytes(ring));
		dmem = aligned_alloc(PROTO_CACHELINE, ring_bytes(ring));
		emem = aligned_alloc(PROTO_CACHELINE, ring_bytes(ring));
	}
	if (size >= 8) {
		memcpy(&head, data, 8);
		data += 8;
		size -= 8;
	}
	n = size < ring ? size : ring;

	f.size = 8;
	f.rank = 0;
	f.efd_client = f.efd_daemon = -1;
	ring_attach(&f.rx, rxmem, ring, 1);
	f.region = rxmem;               /* (only tested for NULL) */
	dr.n = 2;
	dr.slot = 0;
	dr.gone = gone;
	dr.in = in;
	dr.out = out;
	for (uint32_t j = 0; j < 2; j++) {
		in[j].efd = out[j].efd = -1;
		in[j].rank = out[j].rank = j;
		in[j].slot = out[j].slot = j;
	}
	/* As client/handle.c attaches them: from zero, the header not read
	 * (here: arbitrary, tail and flags too). */
	memset(emem, 0, ring_bytes(ring));
	memset(dmem, 0xa5, sizeof(struct proto_ring_shared));
	ring_attach_new(&in[0].r, emem, ring);  /* from ourselves: empty */
	ring_attach_new(&in[1].r, dmem, ring);  /* from rank 1: the input */
	memcpy(in[1].r.data, data, n);
	atomic_store(&in[1].r.sh->head, head);
	direct_of[0] = 1;
	direct_of[1] = 2;
	f.dr = &dr;
	f.direct_of = direct_of;

	for (int i = 0; i < 10000; i++) {
		/* Arrays of 1 to 7 items now and then: a dense record then
		 * comes out over several calls (recv.c "Dense records"). */
		int got = ferry_recv(&f, it, i & 1 ? 64 : 1 + i % 7, 0);

		if (got <= 0)
			break;
		for (int k = 0; k < got; k++) {
			/* Inside the ring (or a reassembly buffer), from rank 1. */
			if (it[k].src != 1)
				abort();
			for (uint32_t b = 0; b < it[k].len; b++)
				sink ^= ((const uint8_t *)it[k].data)[b];
		}
	}
	(void)sink;
	ferry_release(&f);
	rx_free(&f);
	return 0;
}
