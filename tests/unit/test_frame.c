/* tests/unit/test_frame.c - the frame pools (daemon/net/frame.c): which
 * frames are kept for reuse.  On verbs a reused frame keeps its memory
 * registration; one freed and allocated again is registered again. */
#define UNIT "frame"
#include "check.h"
#include "../../daemon/net/frame.h"

#include <stdlib.h>

/* A stream of large items fills a link with up to link_bytes of pieces
 * before the first is acknowledged: all of them come back to the pool, and
 * the next stream gets the same frames again, none new. */
TEST(pieces_up_to_link_bytes_are_kept)
{
	enum { N = 128 };               /* 128 pieces of 64 KiB: 8 MiB */
	struct frame *f[N];
	uint64_t mem;

	frame_init(16384, 8u << 20);
	for (int i = 0; i < N; i++) {
		f[i] = frame_alloc((uint32_t)wire_item_footprint(PROTO_FRAG_BYTES));
		CHECK(f[i] != NULL);
	}
	mem = frame_mem_bytes;
	for (int i = 0; i < N; i++)
		frame_free(f[i]);
	CHECK_EQ(frame_mem_bytes, mem);         /* all kept */
	for (int i = 0; i < N; i++)
		f[i] = frame_alloc((uint32_t)wire_item_footprint(PROTO_FRAG_BYTES));
	CHECK_EQ(frame_mem_bytes, mem);         /* none new */
	for (int i = 0; i < N; i++)
		frame_free(f[i]);
	frame_fini();
	CHECK_EQ(frame_mem_bytes, 0);
}

/* Standard frames: 4 MiB of them kept, the rest given back. */
TEST(standard_frames_kept_up_to_4_mib)
{
	enum { N = 512 };               /* 512 of 16 KiB: 8 MiB */
	struct frame *f[N];
	uint64_t one;

	frame_init(16384, 8u << 20);
	f[0] = frame_alloc(16384);
	one = frame_mem_bytes;
	for (int i = 1; i < N; i++)
		f[i] = frame_alloc(16384);
	for (int i = 0; i < N; i++)
		frame_free(f[i]);
	CHECK(frame_mem_bytes <= (4u << 20) + one);
	CHECK(frame_mem_bytes >= (4u << 20) - one);
	frame_fini();
	CHECK_EQ(frame_mem_bytes, 0);
}

int main(void)
{
	RUN(pieces_up_to_link_bytes_are_kept);
	RUN(standard_frames_kept_up_to_4_mib);
	return check_done();
}
