/* daemon/plan/route.c - see route.h. */
#include "route.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

int route_init(struct route *r, int kind, uint32_t ndims, const uint32_t *dims, uint32_t nnodes)
{
	uint64_t prod = 1;

	if (ndims < 1 || ndims > ROUTE_MAX_DIMS || nnodes < 1 || nnodes > ROUTE_MAX_NODES)
		return -EINVAL;
	if (kind != ROUTE_GRID && kind != ROUTE_TORUS && kind != ROUTE_MESH)
		return -EINVAL;
	memset(r, 0, sizeof(*r));
	for (uint32_t d = 0; d < ndims; d++) {
		if (dims[d] < 1)
			return -EINVAL;
		prod *= dims[d];
		if (prod > 2ull * ROUTE_MAX_NODES)
			return -EINVAL;
	}
	if (kind == ROUTE_GRID ? (prod < nnodes || prod >= 2ull * nnodes) : prod != nnodes)
		return -EINVAL;
	r->kind = kind;
	r->ndims = ndims;
	r->nnodes = nnodes;
	r->npos = (uint32_t)prod;
	for (uint32_t d = ndims; d-- > 0;) {
		r->dims[d] = dims[d];
		r->stride[d] = d == ndims - 1 ? 1 : r->stride[d + 1] * r->dims[d + 1];
	}
	return 0;
}

/* Smallest s with s^n >= x. */
static uint32_t ceil_root(uint32_t x, uint32_t n)
{
	uint32_t s = 1;

	for (;;) {
		uint64_t p = 1;

		for (uint32_t i = 0; i < n && p < x; i++)
			p *= s;
		if (p >= x)
			return s;
		s++;
	}
}

/* Search state for route_auto_dims: non-increasing tuples of sides in [lo, hi]. */
struct auto_search {
	uint32_t n, lo, hi, nnodes;
	uint32_t cur[ROUTE_MAX_DIMS], best[ROUTE_MAX_DIMS];
	uint64_t best_holes;
	uint32_t best_spread;
	int found;
};

static void auto_try(struct auto_search *s, uint32_t depth, uint32_t max_side, uint64_t prod)
{
	if (depth == s->n) {
		uint64_t holes;
		uint32_t spread;

		if (prod < s->nnodes || prod >= 2ull * s->nnodes)
			return;
		holes = prod - s->nnodes;
		spread = s->cur[0] - s->cur[s->n - 1];
		if (!s->found || holes < s->best_holes ||
		    (holes == s->best_holes && spread < s->best_spread)) {
			memcpy(s->best, s->cur, sizeof(s->cur));
			s->best_holes = holes;
			s->best_spread = spread;
			s->found = 1;
		}
		return;
	}
	for (uint32_t side = s->lo; side <= max_side; side++) {
		s->cur[depth] = side;
		auto_try(s, depth + 1, side, prod * side);
	}
}

void route_auto_dims(uint32_t nnodes, uint32_t *ndims_p, uint32_t *dims)
{
	struct auto_search s = { .nnodes = nnodes ? nnodes : 1 };

	/* About 8 nodes per dimension, at most 11: TRAM (§4.6) found 2-D and 3-D
	 * grids best for all-to-all at moderate scale; fewer, longer dimensions
	 * mean fewer hops, more dimensions mean fuller buffers. */
	s.n = 1;
	while (s.n < ROUTE_MAX_DIMS && ceil_root(s.nnodes, s.n) > 11)
		s.n++;
	if (s.n == 1) {
		*ndims_p = 1;
		dims[0] = s.nnodes;
		return;
	}
	s.hi = ceil_root(s.nnodes, s.n) + 1;
	s.lo = s.hi / 2 > 2 ? s.hi / 2 : 2;
	auto_try(&s, 0, s.hi, 1);
	if (!s.found) {                 /* cannot happen: ceil_root^n is in range */
		*ndims_p = 1;
		dims[0] = s.nnodes;
		return;
	}
	*ndims_p = s.n;
	memcpy(dims, s.best, s.n * sizeof(dims[0]));
}

void route_coords(const struct route *r, uint32_t node, uint32_t *coords)
{
	for (uint32_t d = 0; d < r->ndims; d++)
		coords[d] = node / r->stride[d] % r->dims[d];
}

/* Next hop on a virtual grid.  Proof that some differing dimension leads to a
 * real node (id < nnodes, ids row-major): let i be the most significant
 * differing dimension.  If dst[i] < self[i], fixing i gives a node below self.
 * Otherwise dst > self, and fixing any other differing dimension x gives a node
 * that agrees with dst above i and is smaller at i, so it is below dst.  If i is
 * the only differing dimension, dst itself is the hop.  Scanning from the
 * highest dimension down therefore always finds one. */
static uint32_t grid_next(const struct route *r, uint32_t self, uint32_t dst)
{
	for (uint32_t d = r->ndims; d-- > 0;) {
		uint32_t cs = self / r->stride[d] % r->dims[d];
		uint32_t cd = dst / r->stride[d] % r->dims[d];
		uint32_t hop;

		if (cs == cd)
			continue;
		hop = self - cs * r->stride[d] + cd * r->stride[d];
		if (hop < r->nnodes)
			return hop;
	}
	return dst;     /* unreachable for valid input, see above */
}

static uint32_t torus_next(const struct route *r, uint32_t self, uint32_t dst)
{
	for (uint32_t d = r->ndims; d-- > 0;) {
		uint32_t s = r->dims[d];
		uint32_t cs = self / r->stride[d] % s;
		uint32_t cd = dst / r->stride[d] % s;
		uint32_t c;

		if (cs == cd)
			continue;
		if (r->kind == ROUTE_MESH)
			c = cd > cs ? cs + 1 : cs - 1;
		else
			c = (cd + s - cs) % s <= s / 2 ? (cs + 1) % s : (cs + s - 1) % s;
		return self - cs * r->stride[d] + c * r->stride[d];
	}
	return dst;
}

int route_next_hop(const struct route *r, uint32_t self, uint32_t dst, uint32_t *hop_p)
{
	if (self >= r->nnodes || dst >= r->nnodes)
		return -EHOSTUNREACH;
	if (self == dst)
		*hop_p = self;
	else if (r->kind == ROUTE_GRID)
		*hop_p = grid_next(r, self, dst);
	else
		*hop_p = torus_next(r, self, dst);
	return 0;
}

int route_hops(const struct route *r, uint32_t src, uint32_t dst)
{
	int hops = 0;

	if (src >= r->nnodes || dst >= r->nnodes)
		return -1;
	while (src != dst) {
		uint32_t next;

		route_next_hop(r, src, dst, &next);
		src = next;
		hops++;
	}
	return hops;
}

int route_uses_node(const struct route *r, uint32_t src, uint32_t dst, uint32_t node)
{
	if (src >= r->nnodes || dst >= r->nnodes)
		return 1;
	for (;;) {
		if (src == node)
			return 1;
		if (src == dst)
			return 0;
		route_next_hop(r, src, dst, &src);
	}
}

int route_uses_link(const struct route *r, uint32_t src, uint32_t dst, uint32_t a, uint32_t b)
{
	if (src >= r->nnodes || dst >= r->nnodes)
		return 1;
	while (src != dst) {
		uint32_t next;

		route_next_hop(r, src, dst, &next);
		if ((src == a && next == b) || (src == b && next == a))
			return 1;
		src = next;
	}
	return 0;
}

int route_are_peers(const struct route *r, uint32_t a, uint32_t b)
{
	uint32_t next;

	/* Routes are minimal: the first hop from a to b is b itself exactly
	 * when b is one of a's peers. */
	return a != b && route_next_hop(r, a, b, &next) == 0 && next == b;
}

static void add_peer(uint32_t *peers, uint32_t max, uint32_t *n, uint32_t p)
{
	/* Insertion into the sorted prefix; callers never add a node twice. */
	uint32_t have = *n < max ? *n : max;
	uint32_t i;

	for (i = 0; i < have && peers[i] < p; i++)
		;
	if (i < max) {
		uint32_t last = have < max ? have : max - 1;

		memmove(peers + i + 1, peers + i, (last - i) * sizeof(*peers));
		peers[i] = p;
	}
	(*n)++;
}

uint32_t route_peers(const struct route *r, uint32_t self, uint32_t *peers, uint32_t max)
{
	uint32_t n = 0;

	if (self >= r->nnodes)
		return 0;
	for (uint32_t d = 0; d < r->ndims; d++) {
		uint32_t s = r->dims[d];
		uint32_t cs = self / r->stride[d] % s;
		uint32_t base = self - cs * r->stride[d];

		if (r->kind == ROUTE_GRID) {
			for (uint32_t c = 0; c < s; c++) {
				uint32_t p = base + c * r->stride[d];

				if (c != cs && p < r->nnodes)
					add_peer(peers, max, &n, p);
			}
		} else {
			if (s < 2)
				continue;
			if (r->kind == ROUTE_TORUS || cs + 1 < s)
				add_peer(peers, max, &n, base + (cs + 1) % s * r->stride[d]);
			/* On a ring of two, both directions are the same node. */
			if ((r->kind == ROUTE_TORUS && s > 2) || (r->kind == ROUTE_MESH && cs > 0))
				add_peer(peers, max, &n, base + (cs + s - 1) % s * r->stride[d]);
		}
	}
	return n;
}

int route_link_dim(const struct route *r, uint32_t a, uint32_t b)
{
	uint32_t ca[ROUTE_MAX_DIMS], cb[ROUTE_MAX_DIMS];
	int dim = -1;

	route_coords(r, a, ca);
	route_coords(r, b, cb);
	for (uint32_t d = 0; d < r->ndims; d++) {
		if (ca[d] == cb[d])
			continue;
		if (dim >= 0)
			return -1;
		dim = (int)d;
	}
	return dim;
}

void route_dims_str(const struct route *r, char *buf, unsigned len)
{
	unsigned off = 0;

	buf[0] = '\0';
	for (uint32_t d = 0; d < r->ndims && off < len; d++)
		off += (unsigned)snprintf(buf + off, len - off, "%s%u", d ? "x" : "", r->dims[d]);
}
