/* tests/fuzz/fuzz_ctl.c - ctl_decode on arbitrary bytes, as ferryd reads them
 * from a client socket: decode messages back to back until an error. */
#include "../../proto/ctl.c"
#include "../../proto/job.c"
#include "../../proto/ring.c"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ctl_msg m;
	size_t off = 0;

	for (;;) {
		ssize_t n = ctl_decode(data + off, size - off, &m);

		if (n <= 0)
			break;
		if (m.type == CTL_TEXT && m.u.text.len)
			(void)*(volatile const char *)(m.u.text.text + m.u.text.len - 1);
		off += (size_t)n;
	}
	return 0;
}
