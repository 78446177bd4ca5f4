/* tests/fuzz/fuzz_ctlitem.c - the decoders a daemon applies to what another
 * daemon sends besides frames: the HELLO of the link handshake and the
 * payloads of control items (job 0).  Input: 1 byte type, then the payload. */
#include "../../proto/wire.c"
#include "../../proto/job.c"
#include "../../proto/ring.c"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct wire_hello h;
	struct wire_ctl c;

	if (size < 1)
		return 0;
	wire_decode_hello(data + 1, size - 1, &h);
	if (wire_ctl_decode(data[0] % (WIRE_CTL_TYPE_MAX + 2), data + 1, size - 1, &c) == 0 && c.type == WIRE_CTL_TABLE)
		for (uint32_t i = 0; i < c.u.table.count; i++)
			(void)wire_ctl_table_node(&c, i);
	return 0;
}
