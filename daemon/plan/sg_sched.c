/* daemon/plan/sg_sched.c - node-level scatter and gather schedules along
 * given paths.  See sg_sched.h. */
#include "sg_sched.h"
#include "sched.h"

#include <errno.h>
#include <stdlib.h>

uint32_t sg_node_of(const struct a2a_layout *lay, uint32_t nodes, uint32_t r, uint32_t *slot_p)
{
	for (uint32_t n = 0; n < nodes; n++)
		for (uint32_t i = lay->node_first[n]; i < lay->node_first[n + 1]; i++)
			if (lay->rank_at[i] == r) {
				*slot_p = i - lay->node_first[n];
				return n;
			}
	return UINT32_MAX;
}

/* Node d's path: *len_p hops at the returned array, their order keys in
 * *order_p (NULL: all 0).  Direct: d itself. */
static const uint32_t *path_of(const struct sg_paths *paths, const uint32_t *d, uint32_t *len_p,
			       const uint32_t **order_p)
{
	if (!paths) {
		*len_p = 1;
		*order_p = NULL;
		return d;
	}
	*len_p = paths->first[*d + 1] - paths->first[*d];
	*order_p = paths->order + paths->first[*d];
	return paths->hop + paths->first[*d];
}

/* 1 if node d's path is one: non-empty, within the nodes, ending at d,
 * never through R or twice through a node next to each other. */
static int path_ok(const uint32_t *p, uint32_t len, uint32_t d, uint32_t R, uint32_t nodes)
{
	if (!len || p[len - 1] != d)
		return 0;
	for (uint32_t i = 0; i < len; i++)
		if (p[i] >= nodes || p[i] == R || (i && p[i] == p[i - 1]))
			return 0;
	return 1;
}

static int has_ranks(const struct a2a_layout *lay, uint32_t n)
{
	return lay->node_first[n + 1] > lay->node_first[n];
}

/* The messages node n passes on: for every path through n (not ending
 * there), a FORWARD from the node before to the node after (scatter), or
 * back (gather). */
static int forwards(int gather, const struct a2a_layout *lay, uint32_t nodes, uint32_t n, uint32_t R,
		    const struct sg_paths *paths, struct sched_node *out)
{
	if (!paths)
		return 0;
	for (uint32_t d = 0; d < nodes; d++) {
		const uint32_t *p, *ord;
		uint32_t len;

		if (d == R || !has_ranks(lay, d))
			continue;
		p = path_of(paths, &d, &len, &ord);
		if (!path_ok(p, len, d, R, nodes))
			return -EINVAL;
		for (uint32_t i = 0; i + 1 < len; i++) {
			uint32_t before = i ? p[i - 1] : R;

			if (p[i] != n)
				continue;
			if (!gather) {
				sched_step(out, SCHED_FORWARD, p[i + 1], d, ord[i + 1]);
				sched_step_forward(out, before, d);
			} else {
				sched_step(out, SCHED_FORWARD, before, d, paths->last_order - ord[i]);
				sched_step_forward(out, p[i + 1], d);
			}
		}
	}
	return 0;
}

/* The root node's own ranks' blocks: a copy each between the root's buffer
 * and the rank's (none for the root itself in place). */
static int local_copies(int gather, const struct a2a_layout *lay, uint32_t R, uint32_t s0, const struct sg_args *a,
			uint32_t ready, struct sched_node *out)
{
	uint32_t k0 = lay->node_first[R], nk = lay->node_first[R + 1] - k0;

	for (uint32_t k = 0; k < nk; k++) {
		uint32_t r = lay->rank_at[k0 + k];

		if (k == s0 && a->in_place)
			continue;
		if (a->count[r] != a->mine[k])
			return -EINVAL;
		if (!a->mine[k])
			continue;
		sched_step(out, SCHED_COPY, 0, 0, 0);
		if (ready != UINT32_MAX)
			sched_dep(out, ready);
		if (!gather) {
			sched_ref(out, sched_seg(out, SCHED_BUF_RECV, k, 0, a->mine[k], 0));
			sched_ref(out, sched_seg(out, SCHED_BUF_SEND, s0, a->displ[r], a->count[r], 0));
		} else {
			sched_ref(out, sched_seg(out, SCHED_BUF_RECV, s0, a->displ[r], a->count[r], 0));
			sched_ref(out, sched_seg(out, SCHED_BUF_SEND, k, 0, a->mine[k], 0));
		}
	}
	return 0;
}

/* The root's side of the disagreement rules (sg_sched.h): its word to
 * every other node with ranks, and a scatter's empty messages from them,
 * one after the other, so that nothing leaves before every node named this
 * root.  Returns the last of those RECVs' step (what the data waits for),
 * or UINT32_MAX (a gather, or no other node). */
static uint32_t root_agree(int gather, const struct a2a_layout *lay, uint32_t nodes, uint32_t R,
			   struct sched_node *out)
{
	uint32_t ready = UINT32_MAX;

	for (uint32_t d = 0; d < nodes; d++)
		if (d != R && has_ranks(lay, d))
			sched_step(out, SCHED_SEND, d, nodes + 1, 0);
	for (uint32_t d = 0; d < nodes && !gather; d++)
		if (d != R && has_ranks(lay, d)) {
			uint32_t k = sched_step(out, SCHED_RECV, d, nodes, 0);

			if (ready != UINT32_MAX)
				sched_dep(out, ready);
			ready = k;
		}
	return ready;
}

/* The root's node: a message to (scatter) or from (gather) every other node
 * with ranks, its parts the root's blocks for that node's ranks; a
 * scatter's sends and copies wait for every other node's empty message. */
static int root_node(int gather, const struct a2a_layout *lay, uint32_t nodes, uint32_t R, uint32_t s0,
		     const struct sg_args *a, const struct sg_paths *paths, struct sched_node *out)
{
	uint32_t ready;

	if (!a->count || !a->displ)
		return -EINVAL;
	ready = root_agree(gather, lay, nodes, R, out);
	for (uint32_t d = 0; d < nodes; d++) {
		const uint32_t *p, *ord;
		uint32_t len;

		if (d == R || !has_ranks(lay, d))
			continue;
		p = path_of(paths, &d, &len, &ord);
		if (!path_ok(p, len, d, R, nodes))
			return -EINVAL;
		if (!gather)
			sched_step(out, SCHED_SEND, p[0], d, ord ? ord[0] : 0);
		else
			sched_step(out, SCHED_RECV, p[0], d, 0);
		if (ready != UINT32_MAX)
			sched_dep(out, ready);
		for (uint32_t i = lay->node_first[d]; i < lay->node_first[d + 1]; i++) {
			uint32_t r = lay->rank_at[i];

			sched_ref(out, sched_seg(out, gather ? SCHED_BUF_RECV : SCHED_BUF_SEND, s0, a->displ[r],
						 a->count[r], 0));
		}
	}
	return local_copies(gather, lay, R, s0, a, ready, out);
}

int sg_sched_node(int gather, const struct a2a_layout *lay, uint32_t nodes, uint32_t n, const struct sg_args *a,
		  const struct sg_paths *paths, struct sched_node *out)
{
	uint32_t s0, R = sg_node_of(lay, nodes, a->root, &s0);
	const uint32_t *p, *ord;
	uint32_t len, prev;
	int ret;

	if (R == UINT32_MAX || n >= nodes)
		return -EINVAL;
	if (n == R)
		ret = root_node(gather, lay, nodes, R, s0, a, paths, out);
	else
		ret = forwards(gather, lay, nodes, n, R, paths, out);
	if (ret < 0)
		return ret;
	if (n == R || !has_ranks(lay, n))
		return out->err;
	p = path_of(paths, &n, &len, &ord);
	if (!path_ok(p, len, n, R, nodes))
		return -EINVAL;
	prev = len > 1 ? p[len - 2] : R;
	sched_step(out, SCHED_RECV, R, nodes + 1, 0);
	if (!gather)
		sched_step(out, SCHED_RECV, prev, n, 0);
	else
		sched_step(out, SCHED_SEND, prev, n, ord ? paths->last_order - ord[len - 1] : 0);
	for (uint32_t k = 0; k < lay->node_first[n + 1] - lay->node_first[n]; k++)
		sched_ref(out, sched_seg(out, gather ? SCHED_BUF_SEND : SCHED_BUF_RECV, k, 0, a->mine[k], 0));
	if (!gather)
		sched_step(out, SCHED_SEND, R, nodes, 0);
	return out->err;
}

int sg_sched(int gather, const struct a2a_layout *lay, uint32_t nodes, const struct sg_args *a,
	     const uint64_t *mine, const struct sg_paths *paths, struct sched *s)
{
	uint64_t *m = calloc((size_t)lay->ranks + 1, sizeof(*m));
	int ret = m ? 0 : -ENOMEM;

	for (uint32_t n = 0; n < nodes && !ret; n++) {
		struct sg_args an = *a;
		uint32_t k0 = lay->node_first[n];

		for (uint32_t i = k0; i < lay->node_first[n + 1]; i++)
			m[i - k0] = mine[lay->rank_at[i]];
		an.mine = m;
		s->node[n].nslots = lay->node_first[n + 1] - k0;
		ret = sg_sched_node(gather, lay, nodes, n, &an, paths, &s->node[n]);
	}
	free(m);
	return ret < 0 ? ret : sched_err(s);
}

