/* tests/fuzz/fuzz_ctlitem.c - the decoders a daemon applies to what another
 * daemon sends besides frames: the HELLO of the link handshake and the
 * payloads of control items (job 0).  Input: 1 byte type, then the payload. */
#include "../../proto/wire.c"
#include "../../proto/job.c"
#include "../../proto/ring.c"
#include "../../proto/ctl.c"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct wire_hello h;
	struct wire_ctl c;

	if (size < 1)
		return 0;
	wire_decode_hello(data + 1, size - 1, &h);
	if (wire_ctl_decode(data[0] % (WIRE_CTL_TYPE_MAX + 2), data + 1, size - 1, &c) != 0)
		return 0;
	if (c.type == WIRE_CTL_TABLE)
		for (uint32_t i = 0; i < c.u.table.count; i++)
			(void)wire_ctl_table_node(&c, i);
	if (c.type == WIRE_CTL_GO)
		for (uint32_t i = 0; i < c.go.nfn; i++) {
			struct wire_go_fn f;

			wire_ctl_go_fn(&c, i, &f);
			if (f.fam >= CTL_FAMS || f.alg >= ctl_fam_nalgs(f.fam))
				__builtin_trap();       /* the decoder let it through */
		}
	return 0;
}
