/* daemon/plan/barrier.c - see barrier.h. */
#include "barrier.h"

#include "sched.h"

#include <errno.h>

int barrier_sched_node(uint32_t G, uint32_t n, struct sched_node *out)
{
	uint32_t prev = UINT32_MAX;

	if (G == 0 || n >= G)
		return -EINVAL;
	for (uint32_t r = 0; r < 32 && (1ull << r) < G; r++) {
		uint32_t d = 1u << r;

		sched_step(out, SCHED_SEND, (uint32_t)((n + (uint64_t)d) % G), r, r);
		if (prev != UINT32_MAX)
			sched_dep(out, prev);
		prev = sched_step(out, SCHED_RECV, (uint32_t)((n + (uint64_t)G - d) % G), r, r);
	}
	return out->err;
}
