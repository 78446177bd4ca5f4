/* tests/unit/test_route.c - routing on virtual grids (with and without empty
 * positions), tori and meshes. */
#define UNIT "route"
#include "check.h"
#include "../../daemon/plan/route.c"

#include <stdlib.h>
#include <string.h>

static int is_peer(const struct route *r, uint32_t a, uint32_t b)
{
	static uint32_t peers[1 << 16];
	uint32_t n = route_peers(r, a, peers, 1 << 16);

	for (uint32_t i = 0; i < n; i++)
		if (peers[i] == b)
			return 1;
	return 0;
}

/* Minimal hop count computed independently of route.c. */
static int distance(const struct route *r, uint32_t a, uint32_t b)
{
	uint32_t ca[ROUTE_MAX_DIMS], cb[ROUTE_MAX_DIMS];
	int d = 0;

	route_coords(r, a, ca);
	route_coords(r, b, cb);
	for (uint32_t i = 0; i < r->ndims; i++) {
		int x = abs((int)ca[i] - (int)cb[i]);

		if (r->kind == ROUTE_GRID)
			d += x != 0;
		else if (r->kind == ROUTE_TORUS)
			d += x < (int)r->dims[i] - x ? x : (int)r->dims[i] - x;
		else
			d += x;
	}
	return d;
}

/* Every route from every node: reaches its destination in exactly the
 * minimal number of hops, each hop between peers, never via an empty position. */
static void check_all_routes(int kind, uint32_t ndims, const uint32_t *dims, uint32_t nnodes)
{
	struct route r;
	int bad = 0;

	CHECK_EQ(route_init(&r, kind, ndims, dims, nnodes), 0);
	for (uint32_t s = 0; s < nnodes && !bad; s++) {
		for (uint32_t d = 0; d < nnodes && !bad; d++) {
			uint32_t cur = s;
			int hops = 0;

			while (cur != d && hops <= 64) {
				uint32_t next;

				if (route_next_hop(&r, cur, d, &next) != 0 || next >= nnodes ||
				    !is_peer(&r, cur, next)) {
					fprintf(stderr, "bad hop %u -> %u toward %u\n", cur, next, d);
					bad = 1;
					break;
				}
				cur = next;
				hops++;
			}
			if (!bad && (hops != distance(&r, s, d) || route_hops(&r, s, d) != hops)) {
				fprintf(stderr, "route %u -> %u: %d hops, distance %d\n", s, d, hops,
					distance(&r, s, d));
				bad = 1;
			}
		}
	}
	CHECK_EQ(bad, 0);
}

TEST(torus_routes_are_minimal)
{
	check_all_routes(ROUTE_TORUS, 2, (uint32_t[]){ 3, 3 }, 9);
	check_all_routes(ROUTE_TORUS, 2, (uint32_t[]){ 8, 8 }, 64);
	check_all_routes(ROUTE_TORUS, 3, (uint32_t[]){ 4, 8, 8 }, 256);
	check_all_routes(ROUTE_TORUS, 3, (uint32_t[]){ 2, 5, 3 }, 30);
	check_all_routes(ROUTE_TORUS, 1, (uint32_t[]){ 7 }, 7);
}

TEST(mesh_routes_are_minimal)
{
	check_all_routes(ROUTE_MESH, 2, (uint32_t[]){ 2, 4 }, 8);
	check_all_routes(ROUTE_MESH, 3, (uint32_t[]){ 3, 4, 5 }, 60);
}

TEST(grid_routes_are_minimal_and_use_peers)
{
	check_all_routes(ROUTE_GRID, 3, (uint32_t[]){ 2, 2, 2 }, 8);
	check_all_routes(ROUTE_GRID, 2, (uint32_t[]){ 4, 2 }, 8);
	check_all_routes(ROUTE_GRID, 1, (uint32_t[]){ 8 }, 8);
	check_all_routes(ROUTE_GRID, 3, (uint32_t[]){ 4, 5, 3 }, 60);
}

/* route_are_peers agrees with route_peers; route_uses_node/link agree with
 * the hops of the route, walked here one by one, for every pair of nodes and
 * every node and link. */
static void check_uses(int kind, uint32_t ndims, const uint32_t *dims, uint32_t nnodes)
{
	struct route r;
	int bad = 0;

	CHECK_EQ(route_init(&r, kind, ndims, dims, nnodes), 0);
	for (uint32_t a = 0; a < nnodes; a++)
		for (uint32_t b = 0; b < nnodes; b++)
			bad |= route_are_peers(&r, a, b) != (a != b && is_peer(&r, a, b));
	for (uint32_t s = 0; s < nnodes && !bad; s++) {
		for (uint32_t d = 0; d < nnodes && !bad; d++) {
			static uint8_t on[64], crossed[64][64];
			uint32_t cur = s;

			memset(on, 0, sizeof(on));
			memset(crossed, 0, sizeof(crossed));
			on[cur] = 1;
			while (cur != d) {
				uint32_t next;

				route_next_hop(&r, cur, d, &next);
				crossed[cur][next] = crossed[next][cur] = 1;
				on[next] = 1;
				cur = next;
			}
			for (uint32_t x = 0; x < nnodes; x++) {
				bad |= route_uses_node(&r, s, d, x) != on[x];
				for (uint32_t y = 0; y < nnodes; y++)
					if (route_are_peers(&r, x, y))
						bad |= route_uses_link(&r, s, d, x, y) != crossed[x][y];
			}
			if (bad)
				fprintf(stderr, "route %u -> %u: uses disagrees with its hops\n", s, d);
		}
	}
	CHECK_EQ(bad, 0);
	CHECK_EQ(route_uses_node(&r, 0, nnodes, 1), 1);         /* no route: as good as cut */
	CHECK_EQ(route_uses_link(&r, nnodes, 0, 0, 1), 1);
	CHECK_EQ(route_are_peers(&r, 0, nnodes), 0);
	CHECK_EQ(route_are_peers(&r, 0, 0), 0);
}

TEST(routes_use_the_nodes_and_links_they_cross)
{
	check_uses(ROUTE_TORUS, 2, (uint32_t[]){ 4, 4 }, 16);
	check_uses(ROUTE_TORUS, 3, (uint32_t[]){ 2, 3, 3 }, 18);
	check_uses(ROUTE_MESH, 2, (uint32_t[]){ 3, 5 }, 15);
	check_uses(ROUTE_GRID, 2, (uint32_t[]){ 4, 4 }, 14);    /* with empty positions */
	check_uses(ROUTE_GRID, 1, (uint32_t[]){ 5 }, 5);
}

TEST(grids_with_empty_positions)
{
	/* Every node count up to 70 on a few shapes with up to N-1 holes. */
	for (uint32_t n = 2; n <= 70; n++) {
		uint32_t nd, dims[ROUTE_MAX_DIMS];

		route_auto_dims(n, &nd, dims);
		check_all_routes(ROUTE_GRID, nd, dims, n);
		if (n >= 5 && n <= 8)
			check_all_routes(ROUTE_GRID, 3, (uint32_t[]){ 2, 2, 2 }, n);
		if (n >= 9 && n <= 16)
			check_all_routes(ROUTE_GRID, 2, (uint32_t[]){ 4, 4 }, n);
		if (n >= 33 && n <= 64)
			check_all_routes(ROUTE_GRID, 3, (uint32_t[]){ 4, 4, 4 }, n);
	}
	check_all_routes(ROUTE_GRID, 2, (uint32_t[]){ 2, 4 }, 7);
	check_all_routes(ROUTE_GRID, 2, (uint32_t[]){ 3, 4 }, 7);
	check_all_routes(ROUTE_GRID, 2, (uint32_t[]){ 2, 3 }, 6);
	check_all_routes(ROUTE_GRID, 3, (uint32_t[]){ 3, 2, 2 }, 12);
}

/* TRAM thesis eq. 3.3: from any node of an N-dimensional grid with side s,
 * C(N,a)(s-1)^a destinations are a hops away. */
TEST(grid_hop_distribution_matches_thesis)
{
	static const struct { uint32_t n, s; } shapes[] = { { 3, 4 }, { 4, 16 }, { 3, 32 }, { 5, 3 } };

	for (size_t k = 0; k < sizeof(shapes) / sizeof(shapes[0]); k++) {
		uint32_t dims[ROUTE_MAX_DIMS], N = shapes[k].n, s = shapes[k].s, total = 1;
		uint64_t count[ROUTE_MAX_DIMS + 1] = { 0 };
		struct route r;

		for (uint32_t i = 0; i < N; i++) {
			dims[i] = s;
			total *= s;
		}
		CHECK_EQ(route_init(&r, ROUTE_GRID, N, dims, total), 0);
		for (uint32_t src = 0; src < total; src += total / 3 + 1) {
			memset(count, 0, sizeof(count));
			for (uint32_t d = 0; d < total; d++)
				count[route_hops(&r, src, d)]++;
			for (uint32_t a = 0; a <= N; a++) {
				uint64_t binom = 1, pw = 1;

				for (uint32_t i = 0; i < a; i++) {
					binom = binom * (N - i) / (i + 1);
					pw *= s - 1;
				}
				CHECK_EQ(count[a], binom * pw);
			}
		}
	}
}

TEST(auto_dims_are_balanced)
{
	for (uint32_t n = 1; n <= 5000; n++) {
		uint32_t nd, dims[ROUTE_MAX_DIMS];
		uint64_t prod = 1;
		struct route r;

		route_auto_dims(n, &nd, dims);
		for (uint32_t i = 0; i < nd; i++)
			prod *= dims[i];
		CHECK(prod >= n && prod < 2ull * n);
		CHECK(nd == 1 ? n <= 11 : dims[0] <= 12);
		CHECK_EQ(route_init(&r, ROUTE_GRID, nd, dims, n), 0);
		if (n == 64)
			CHECK(nd == 2 && dims[0] == 8 && dims[1] == 8);
		if (n == 12)
			CHECK(nd == 2 && dims[0] * dims[1] == 12);
		if (n == 512)
			CHECK(nd == 3 && dims[0] == 8 && dims[1] == 8 && dims[2] == 8);
	}
}

TEST(bad_topologies_are_refused)
{
	struct route r;
	uint32_t next;

	CHECK_EQ(route_init(&r, ROUTE_TORUS, 2, (uint32_t[]){ 4, 4 }, 15), -EINVAL);
	CHECK_EQ(route_init(&r, ROUTE_GRID, 2, (uint32_t[]){ 4, 4 }, 17), -EINVAL);
	CHECK_EQ(route_init(&r, ROUTE_GRID, 2, (uint32_t[]){ 4, 4 }, 8), -EINVAL);  /* half empty */
	CHECK_EQ(route_init(&r, ROUTE_GRID, 0, (uint32_t[]){ 4 }, 4), -EINVAL);
	CHECK_EQ(route_init(&r, ROUTE_MESH, 2, (uint32_t[]){ 0, 4 }, 0), -EINVAL);
	CHECK_EQ(route_init(&r, ROUTE_TORUS, 2, (uint32_t[]){ 4, 4 }, 16), 0);
	CHECK_EQ(route_next_hop(&r, 0, 16, &next), -EHOSTUNREACH);
	CHECK_EQ(route_hops(&r, 16, 0), -1);
}

int main(void)
{
	RUN(torus_routes_are_minimal);
	RUN(mesh_routes_are_minimal);
	RUN(grid_routes_are_minimal_and_use_peers);
	RUN(routes_use_the_nodes_and_links_they_cross);
	RUN(grids_with_empty_positions);
	RUN(grid_hop_distribution_matches_thesis);
	RUN(auto_dims_are_balanced);
	RUN(bad_topologies_are_refused);
	return check_done();
}
