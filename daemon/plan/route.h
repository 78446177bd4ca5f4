/* daemon/plan/route.h - topologies and routing.  Pure functions, no I/O: the
 * daemon, ferryd --check-config and ferryctl route all call these.
 *
 * Node ids are row-major over the dimensions, last dimension fastest: in a
 * 4x8x8 grid node (x,y,z) has id (x*8+y)*8+z.
 *
 * ROUTE_GRID  - virtual grid over a switched network: a Cartesian product of
 *               cliques (TRAM thesis §3.3).  Peers differ in exactly one
 *               coordinate.  Dimension-ordered routing fixes one differing
 *               coordinate per hop, highest dimension first as in the thesis.
 *               The grid may have more positions than nodes ("holes", positions
 *               with ids >= nnodes, at the end of the row-major order); a hop
 *               never lands on a hole: when the preferred dimension's
 *               intermediate is a hole, the next differing dimension is fixed
 *               first.  One always exists (see route.c), so routes stay minimal:
 *               hops = number of differing coordinates.  A 1-D grid is "direct":
 *               every node a peer.
 * ROUTE_TORUS - physical torus: links only between neighbours; one hop at a
 *               time in the shortest direction (wrap-around), highest
 *               dimension first; ties go in the + direction.
 * ROUTE_MESH  - the same without wrap-around.
 */
#ifndef FERRY_PLAN_ROUTE_H
#define FERRY_PLAN_ROUTE_H

#include "../../proto/wire.h"

#include <stdint.h>

#define ROUTE_MAX_DIMS  8
#define ROUTE_MAX_NODES WIRE_MAX_NODES  /* node ids must fit the wire's job ids */

enum route_kind {
	ROUTE_GRID  = 0,
	ROUTE_TORUS = 1,
	ROUTE_MESH  = 2,
};

struct route {
	int kind;
	uint32_t ndims;
	uint32_t dims[ROUTE_MAX_DIMS];
	uint32_t stride[ROUTE_MAX_DIMS];        /* id = sum(coord[d] * stride[d]) */
	uint32_t nnodes;                        /* real nodes */
	uint32_t npos;                          /* product of dims (>= nnodes for grids) */
};

/* Sets up a topology.  Tori and meshes need prod(dims) == nnodes; grids need
 * nnodes <= prod(dims) < 2 * nnodes.  Returns 0 or -EINVAL. */
int route_init(struct route *r, int kind, uint32_t ndims, const uint32_t *dims, uint32_t nnodes);

/* Balanced virtual grid dimensions for nnodes ("virtual = auto"): about 8 nodes
 * per dimension (1-D up to 11 nodes, 2-D up to 90, then 3-D, ...), sides as equal
 * as possible, holes only where nnodes has no balanced factorisation.  Writes
 * *ndims_p sides into dims. */
void route_auto_dims(uint32_t nnodes, uint32_t *ndims_p, uint32_t *dims);

/* Coordinates of a node (ndims values). */
void route_coords(const struct route *r, uint32_t node, uint32_t *coords);

/* Sets *hop_p to the next node on the way from self to dst (dst itself if it
 * is a peer; self if self == dst).  Returns 0, or -EHOSTUNREACH if either node
 * is outside the topology. */
int route_next_hop(const struct route *r, uint32_t self, uint32_t dst, uint32_t *hop_p);

/* Number of network messages (hops) an item from src to dst takes, or -1. */
int route_hops(const struct route *r, uint32_t src, uint32_t dst);

/* 1 if the route from src to dst passes through node (src and dst count),
 * or if either is outside the topology (no route: as good as cut). */
int route_uses_node(const struct route *r, uint32_t src, uint32_t dst, uint32_t node);

/* 1 if the route from src to dst crosses the link between peers a and b, in
 * either direction, or if src or dst is outside the topology. */
int route_uses_link(const struct route *r, uint32_t src, uint32_t dst, uint32_t a, uint32_t b);

/* 1 if a and b are distinct nodes with a link between them. */
int route_are_peers(const struct route *r, uint32_t a, uint32_t b);

/* Writes the peers of self (the nodes it has links to), ascending, into peers
 * (room for max) and returns how many there are (which may exceed max). */
uint32_t route_peers(const struct route *r, uint32_t self, uint32_t *peers, uint32_t max);

/* The dimension along which peers a and b differ (the dimension of the link
 * between them), or -1 if they differ in none or in more than one. */
int route_link_dim(const struct route *r, uint32_t a, uint32_t b);

/* Formats the dims as "4x8x8" into buf. */
void route_dims_str(const struct route *r, char *buf, unsigned len);

#endif
