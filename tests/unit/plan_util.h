/* tests/unit/plan_util.h - what the planners' unit tests (test_sg,
 * test_orth) share: layouts with ranks dealt round the nodes, a
 * pseudo-random sequence, and a run of a schedule whose nodes were
 * planned with different beliefs (root, algorithm), messages only. */
#ifndef FERRY_TEST_PLAN_UTIL_H
#define FERRY_TEST_PLAN_UTIL_H

#include "../../daemon/plan/sched.h"

#include <stdint.h>
#include <stdlib.h>

#define PLAN_MAX_NODES 20

static inline int plan_is_recv(unsigned kind)
{
	return kind == SCHED_RECV || kind == SCHED_RECV_REDUCE;
}

/* per[n] ranks on node n (nodes <= PLAN_MAX_NODES), ranks dealt round the
 * nodes that have room, so that a node's ranks are not contiguous:
 * first[nodes + 1], at[ranks] as struct a2a_layout wants them.  Returns
 * the ranks. */
static inline uint32_t plan_deal(uint32_t nodes, const uint32_t *per, uint32_t *first, uint32_t *at)
{
	uint32_t fill[PLAN_MAX_NODES] = { 0 }, ranks = 0;

	first[0] = 0;
	for (uint32_t n = 0; n < nodes; n++) {
		first[n + 1] = first[n] + per[n];
		ranks += per[n];
	}
	for (uint32_t r = 0, n = 0; r < ranks; n = (n + 1) % nodes)
		if (fill[n] < per[n])
			at[first[n] + fill[n]++] = r++;
	return ranks;
}

static inline uint64_t plan_rnd(uint64_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 7;
	*x ^= *x << 17;
	return *x;
}

/* Messages only: node n's schedule planned with its own root.  A message
 * its receiver has no step for (or with another number of parts) fails
 * that node, which then does nothing more; every other node goes on as far
 * as it can (the engine's failure reaches it some time later).  Returns 1
 * if some node failed, 0 if every step ran, -1 if steps are left and no
 * node failed: a hang.  *delivered_p: a step wrote a receive buffer. */
static inline int plan_run_beliefs(const struct sched *s, int *delivered_p)
{
	uint32_t P = s->nodes, total = 0, ran = 0;
	uint8_t *done[PLAN_MAX_NODES], *arrived[PLAN_MAX_NODES], failed[PLAN_MAX_NODES] = { 0 };
	uint32_t *parts[PLAN_MAX_NODES];
	int any_failed = 0, progress = 1;

	*delivered_p = 0;
	for (uint32_t n = 0; n < P; n++) {
		done[n] = calloc(s->node[n].nsteps + 1, 1);
		arrived[n] = calloc(s->node[n].nsteps + 1, 1);
		parts[n] = calloc(s->node[n].nsteps + 1, 4);
		total += s->node[n].nsteps;
	}
	while (progress) {
		progress = 0;
		for (uint32_t n = 0; n < P; n++) {
			const struct sched_node *sn = &s->node[n];

			for (uint32_t k = 0; k < sn->nsteps && !failed[n]; k++) {
				const struct sched_step *st = &sn->steps[k];
				int ready = !done[n][k];

				for (uint32_t d = 0; d < st->ndep && ready; d++)
					ready = done[n][sn->deps[st->dep + d]];
				if (ready && (plan_is_recv(st->kind) || st->kind == SCHED_FORWARD))
					ready = arrived[n][k];
				if (!ready)
					continue;
				done[n][k] = 1;
				ran++;
				progress = 1;
				for (uint32_t i = 0; i < st->nref; i++)
					if (sn->segs[sn->refs[st->ref + i]].buf == SCHED_BUF_RECV &&
					    (plan_is_recv(st->kind) || (st->kind == SCHED_COPY && i == 0)))
						*delivered_p = 1;
				if (st->kind == SCHED_SEND || st->kind == SCHED_FORWARD) {
					uint32_t t = st->peer, np = st->kind == SCHED_SEND ? st->nref : parts[n][k], k2;
					const struct sched_node *tn = &s->node[t];

					if (failed[t])
						continue;
					for (k2 = 0; k2 < tn->nsteps; k2++) {
						const struct sched_step *q = &tn->steps[k2];

						if ((plan_is_recv(q->kind) && q->peer == n && q->msg == st->msg) ||
						    (q->kind == SCHED_FORWARD && q->from == n && q->from_msg == st->msg))
							break;
					}
					if (k2 == tn->nsteps || (plan_is_recv(tn->steps[k2].kind) && tn->steps[k2].nref != np)) {
						failed[t] = 1;
						any_failed = 1;
						continue;
					}
					arrived[t][k2] = 1;
					parts[t][k2] = np;
				}
			}
		}
	}
	for (uint32_t n = 0; n < P; n++) {
		free(done[n]);
		free(arrived[n]);
		free(parts[n]);
	}
	return any_failed ? 1 : ran == total ? 0 : -1;
}

#endif
