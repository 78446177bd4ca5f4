/* daemon/plan/a2a.c - see a2a.h. */
#include "a2a.h"
#include "names.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char *const names[A2A_STRATEGIES] = { "direct", "mesh", "grid3d", "hypercube" };

const char *a2a_strategy_name(enum a2a_strategy s)
{
	return names_get(names, A2A_STRATEGIES, s);
}

int a2a_strategy_by_name(const char *name)
{
	return names_find(names, A2A_STRATEGIES, name);
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
	if (nodes == 0 || nodes > A2A_MAX_NODES || (unsigned)s >= A2A_STRATEGIES)
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
	uint32_t yh = (h / c) % c, zh = h / cc;
	uint32_t xd = dst % c, yd = (dst / c) % c, to;

	switch (ph) {
	case 0:         /* along x, to the destination's x */
		to = zh * cc + yh * c + xd;
		if (to < p->nodes)
			return to;
		if (p->planes > 1)
			return to - cc;         /* the hole's stand-in in the plane before */
		/* One plane: the mesh's rule, rows being y. */
		return mesh_row_hop(c, (p->nodes + c - 1) / c, p->nodes, h, xd);
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

uint32_t a2a_next(const struct a2a_plan *p, uint32_t holder, uint32_t dst, uint32_t ph)
{
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
		h = a2a_next(p, h, dst, i);
	return h;
}

int a2a_stats(const struct a2a_plan *p, uint32_t degree, uint64_t pair_bytes, struct a2a_stats *st)
{
	uint32_t P = p->nodes, *hold, *sends, *recvs;
	uint64_t *bytes;
	uint8_t *msg;
	int ret = 0;

	memset(st, 0, sizeof(*st));
	if (degree >= P)
		return -EINVAL;
	if (P > A2A_STATS_MAX_NODES)
		return -EINVAL;
	hold = malloc((size_t)P * P * sizeof(*hold));
	msg = malloc((size_t)P * P);
	sends = calloc(P, sizeof(*sends));
	recvs = calloc(P, sizeof(*recvs));
	bytes = calloc(P, sizeof(*bytes));
	if (!hold || !msg || !sends || !recvs || !bytes) {
		ret = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < (size_t)P * P; i++)
		hold[i] = (uint32_t)(i / P);
	for (uint32_t ph = 0; ph < p->phases; ph++) {
		memset(msg, 0, (size_t)P * P);
		for (size_t i = 0; i < (size_t)P * P; i++) {
			uint32_t src = (uint32_t)(i / P), dst = (uint32_t)(i % P), h = hold[i];
			uint32_t to = a2a_next(p, h, dst, ph);
			/* A real block: dst among src's degree successors. */
			int real = src != dst && (dst + P - src) % P <= degree;

			if (to == h)
				continue;
			hold[i] = to;
			if (real)
				bytes[h] += pair_bytes;
			/* Every strategy sends every message of its phases
			 * (dummies where no block goes): a2a.h, "schedules". */
			if (!msg[(size_t)h * P + to]) {
				msg[(size_t)h * P + to] = 1;
				sends[h]++;
				recvs[to]++;
			}
		}
	}
	{
		uint64_t total = 0;

		for (uint32_t n = 0; n < P; n++) {
			total += sends[n];
			if (sends[n] > st->sends_max)
				st->sends_max = sends[n];
			if (recvs[n] > st->recvs_max)
				st->recvs_max = recvs[n];
			if (bytes[n] > st->bytes_sent_max)
				st->bytes_sent_max = bytes[n];
		}
		st->sends_mean = (double)total / P;
	}
out:
	free(hold);
	free(msg);
	free(sends);
	free(recvs);
	free(bytes);
	return ret;
}

static double min_d(double a, double b)
{
	return a < b ? a : b;
}

double a2a_predict_us(const struct a2a_plan *p, uint32_t degree, uint64_t pair_bytes, double alpha_us,
		      double beta_ns_per_byte)
{
	double mb = (double)pair_bytes * beta_ns_per_byte / 1000.0;    /* one block's bytes, in us */
	double c = p->cols ? p->cols - 1.0 : 0, h;

	if (p->nodes == 1)
		return 0;
	switch (p->strategy) {
	case A2A_DIRECT:
		return (p->nodes - 1.0) * alpha_us + degree * mb;
	case A2A_MESH:
		return 2 * c * alpha_us + 2 * min_d(degree, c * p->cols) * mb;
	case A2A_GRID3D:
		h = (uint64_t)p->cols * p->cols * p->cols > p->nodes ? 1 : 0;
		return (3 + h) * c * alpha_us + (3 + 2 * h) * min_d(degree, c * p->cols * p->cols) * mb;
	case A2A_HYPERCUBE:
		h = p->nodes > p->cube ? 1 : 0;
		return p->phases * alpha_us + p->dims * (1 + h) * min_d(degree, p->nodes / 2.0) * mb;
	default:
		return 0;
	}
}

double a2a_model_us(const void *model, uint32_t s, double alpha_us, double beta_ns, double gamma_ns)
{
	const struct a2a_model *m = model;
	struct a2a_plan p;

	(void)gamma_ns;
	if (a2a_plan_init(&p, (enum a2a_strategy)s, m->nodes) < 0)
		return INFINITY;
	return a2a_predict_us(&p, m->degree, m->pair_bytes, alpha_us, beta_ns);
}

enum a2a_strategy a2a_choose(uint32_t nodes, uint32_t degree, uint64_t pair_bytes, const struct cost *c)
{
	struct a2a_model m = { nodes, degree, pair_bytes };

	return (enum a2a_strategy)cost_choose(c, a2a_model_us, &m, A2A_STRATEGIES);
}
