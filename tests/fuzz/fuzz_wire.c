/* tests/fuzz/fuzz_wire.c - frame header and DATA body decoding on arbitrary
 * bytes, as a daemon reads them from a peer link. */
#include "../../proto/wire.c"
#include "../../proto/job.c"
#include "../../proto/ring.c"
#include "../../proto/ctl.c"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct wire_frame_hdr h;
	struct wire_item it;
	const void *payload;
	size_t off = 0;

	if (size < sizeof(h) || wire_decode_hdr(data, &h) < 0)
		return 0;
	data += sizeof(h);
	size -= sizeof(h);
	if (h.len < size)
		size = h.len;
	while (wire_next_item(data, size, &off, &it, &payload) == 1)
		if (it.len)
			(void)*(volatile const uint8_t *)((const uint8_t *)payload + it.len - 1);
	return 0;
}
