/* daemon/plan/a2a.c - see a2a.h. */
#include "a2a.h"

#include <errno.h>
#include <string.h>

static const char *const names[A2A_STRATEGIES] = { "direct", "mesh", "grid3d", "hypercube" };

const char *a2a_strategy_name(enum a2a_strategy s)
{
	return (unsigned)s < A2A_STRATEGIES ? names[s] : NULL;
}

int a2a_strategy_by_name(const char *name)
{
	for (int s = 0; name && s < A2A_STRATEGIES; s++)
		if (strcmp(name, names[s]) == 0)
			return s;
	return -1;
}

/* The smallest c with c^k >= n (k = 2 or 3). */
static uint32_t root_up(uint32_t n, int k)
{
	uint64_t c = 1;

	while ((k == 2 ? c * c : c * c * c) < n)
		c++;
	return (uint32_t)c;
}

int a2a_plan_init(struct a2a_plan *p, enum a2a_strategy s, uint32_t nodes)
{
	if (nodes == 0 || (unsigned)s >= A2A_STRATEGIES)
		return -EINVAL;
	memset(p, 0, sizeof(*p));
	p->strategy = s;
	p->nodes = nodes;
	switch (s) {
	case A2A_DIRECT:
		p->phases = 1;
		break;
	case A2A_MESH:
		p->cols = root_up(nodes, 2);
		p->rows = (nodes + p->cols - 1) / p->cols;
		p->phases = 2;
		break;
	case A2A_GRID3D:
		p->cols = root_up(nodes, 3);
		p->rows = p->cols;
		p->planes = (nodes + p->cols * p->cols - 1) / (p->cols * p->cols);
		p->phases = p->planes > 1 ? 3 : 2;     /* one plane: no z phase */
		break;
	case A2A_HYPERCUBE:
		p->cube = 1;
		while (p->cube <= nodes / 2)
			p->cube *= 2;
		while ((1u << p->dims) < p->cube)
			p->dims++;
		p->phases = p->dims + (nodes > p->cube ? 2 : 0);
		break;
	default:
		return -EINVAL;
	}
	return 0;
}

/* The mesh's first phase: from node s (which holds its own blocks) toward
 * column k.  A hole's role goes to the nodes of its column in the full rows,
 * spread by the sender's column (§2.2). */
static uint32_t mesh_row_hop(uint32_t cols, uint32_t rows, uint32_t nodes, uint32_t s, uint32_t k)
{
	uint32_t i = s / cols, j = s % cols, to = i * cols + k;

	if (to < nodes)
		return to;
	return (j % (rows - 1)) * cols + k;     /* a hole: only the last row has them, so rows >= 2 */
}

static uint32_t grid_next(const struct a2a_plan *p, uint32_t h, uint32_t dst, uint32_t ph)
{
	uint32_t c = p->cols, cc = c * c;
	uint32_t xh = h % c, yh = (h / c) % c, zh = h / cc;
	uint32_t xd = dst % c, yd = (dst / c) % c, to;

	switch (ph) {
	case 0:         /* along x, to the destination's x */
		to = zh * cc + yh * c + xd;
		if (to < p->nodes)
			return to;
		if (p->planes > 1)
			return to - cc;         /* the hole's stand-in in the plane before */
		/* One plane: the mesh's rule, rows being y. */
		return (xh % (((p->nodes + c - 1) / c) - 1)) * c + xd;
	case 1:         /* along y */
		to = zh * cc + yd * c + xd;
		return to < p->nodes ? to : to - cc;
	default:        /* along z */
		return dst;
	}
}

static uint32_t cube_next(const struct a2a_plan *p, uint32_t h, uint32_t dst, uint32_t ph)
{
	uint32_t q = p->cube, inner = dst >= q ? dst - q : dst;
	int extra = p->nodes > q;

	if (extra && ph == 0)
		return h >= q ? h - q : h;      /* the nodes beyond the cube hand their blocks in */
	if (extra && ph == p->phases - 1)
		return dst >= q && h == dst - q ? dst : h;     /* and get theirs back */
	{
		uint32_t bit = ph - (extra ? 1 : 0);

		return ((h ^ inner) >> bit) & 1 ? h ^ (1u << bit) : h;
	}
}

uint32_t a2a_next(const struct a2a_plan *p, uint32_t holder, uint32_t src, uint32_t dst, uint32_t ph)
{
	(void)src;
	if (holder == dst || ph >= p->phases)
		return holder;
	switch (p->strategy) {
	case A2A_DIRECT:
		return dst;
	case A2A_MESH:
		if (ph == 0)
			return holder % p->cols == dst % p->cols ? holder
								 : mesh_row_hop(p->cols, p->rows, p->nodes, holder,
										dst % p->cols);
		return dst;
	case A2A_GRID3D:
		return grid_next(p, holder, dst, ph);
	case A2A_HYPERCUBE:
		return cube_next(p, holder, dst, ph);
	default:
		return holder;
	}
}

uint32_t a2a_holder(const struct a2a_plan *p, uint32_t src, uint32_t dst, uint32_t ph)
{
	uint32_t h = src;

	for (uint32_t i = 0; i <= ph && i < p->phases; i++)
		h = a2a_next(p, h, src, dst, i);
	return h;
}
