/* daemon/plan/barrier.c - see barrier.h. */
#include "barrier.h"

#include "sched.h"

#include <errno.h>

int barrier_sched_node(uint32_t G, uint32_t n, struct sched_node *out)
{
	uint32_t recv[32], r;

	if (G == 0 || n >= G)
		return -EINVAL;
	for (r = 0; r < 32 && (1ull << r) < G; r++) {
		uint32_t d = 1u << r;

		sched_step(out, SCHED_SEND, (uint32_t)((n + (uint64_t)d) % G), r, r);
		/* after every receive before it, not only the last: a
		 * receive whose message came early is done early, and what
		 * an earlier one brings would then be missing */
		for (uint32_t q = 0; q < r; q++)
			sched_dep(out, recv[q]);
		recv[r] = sched_step(out, SCHED_RECV, (uint32_t)((n + (uint64_t)G - d) % G), r, r);
	}
	return out->err;
}
