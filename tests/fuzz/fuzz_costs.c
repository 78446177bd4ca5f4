/* tests/fuzz/fuzz_costs.c - the runtime functions' file as ferryd reads it
 * at start (daemon/plan/cost.c, cost_table_parse: daemon.state_dir/costs,
 * and ferryctl plan --costs): whatever the text, the table it makes has
 * only points that are valid, functions that are finite and not negative,
 * and writes back as text that reads again to the same table. */
#include "../../daemon/plan/cost.c"
#include "../../proto/ctl.c"
#include "../../proto/job.c"
#include "../../proto/ring.c"

#include <assert.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct cost_table t, u;
	static char text[1 << 17], again[1 << 17];
	char err[160];
	size_t n, m;

	if (cost_table_parse(&t, (const char *)data, size, 0, err, sizeof(err)) < 0)
		return 0;
	for (uint32_t f = 0; f < CTL_FAMS; f++)
		for (uint32_t a = 0; a < CTL_FAM_ALGS_MAX; a++)
			if (!(t.fn[f][a].tau_us >= 0 && t.fn[f][a].tc_ns >= 0 && isfinite(t.fn[f][a].tau_us) &&
			      isfinite(t.fn[f][a].tc_ns)) || (a >= ctl_fam_nalgs(f) && (t.fn[f][a].tau_us || t.fn[f][a].tc_ns)))
				__builtin_trap();
	n = cost_table_format(&t, text, sizeof(text));
	if (n >= sizeof(text))
		__builtin_trap();       /* (COST_POINTS lines of at most ~400 bytes) */
	if (cost_table_parse(&u, text, n, 0, err, sizeof(err)) != 0)
		__builtin_trap();       /* what it writes, it reads */
	m = cost_table_format(&u, again, sizeof(again));
	if (m != n || memcmp(text, again, n) != 0)
		__builtin_trap();
	return 0;
}
