/* tests/unit/test_sg.c - plan/sg_sched: scatter and gather schedules, node
 * by node, checked (sched_check) and run by the simulator (sched_run) over
 * real buffers: every byte of every block where it belongs, written exactly
 * once, the gaps untouched; direct paths and forwarding chains; every root;
 * uneven ranks per node, nodes without ranks, zero counts, in place. */
#define UNIT "test_sg"
#include "check.h"

#include "../../daemon/plan/sched.h"
#include "../../daemon/plan/sg_sched.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static uint8_t pat(uint32_t rank, uint64_t i)
{
	return (uint8_t)(rank * 37 + i * 5 + 3);
}

/* One case: nodes nodes, per[n] ranks on node n (ranks numbered round the
 * nodes), root, counts count(r) = (r * 3 + b) % 7 (zeros among them, v) or
 * b; displacements in reverse rank order with 4-byte gaps.  chain: the
 * path of node d runs through every node between the root's node and d
 * (the simulator then forwards). */
static void one(int gather, uint32_t nodes, const uint32_t *per, uint32_t root, uint64_t b, int v, int chain,
		int in_place, uint64_t seed)
{
	uint32_t ranks = 0, *first = calloc(nodes + 1, 4), *at, *fill = calloc(nodes, 4);
	uint64_t *cnt, *dis, ext = 0, *mine;
	struct a2a_layout lay;
	struct sg_args a = { .root = root, .in_place = in_place };
	struct sched s;
	struct sched_mem *mem = calloc(nodes, sizeof(*mem));
	uint32_t *pf = calloc(nodes + 1, 4), *hop = calloc((size_t)nodes * nodes + 1, 4),
		 *ord = calloc((size_t)nodes * nodes + 1, 4), s0 = 0, R, nh = 0;
	struct sg_paths paths = { pf, hop, ord, 0 };
	uint32_t *writes;
	uint64_t wtotal = 0;
	char why[256] = "";
	int ret;

	for (uint32_t n = 0; n < nodes; n++) {
		first[n + 1] = first[n] + per[n];
		ranks += per[n];
	}
	at = calloc(ranks + 1, 4);
	/* ranks round the nodes that have room */
	for (uint32_t r = 0, n = 0; r < ranks; n = (n + 1) % nodes)
		if (fill[n] < per[n])
			at[first[n] + fill[n]++] = r++;
	lay = (struct a2a_layout){ ranks, first, at };
	cnt = calloc(ranks + 1, 8);
	dis = calloc(ranks + 1, 8);
	mine = calloc(ranks + 1, 8);
	for (uint32_t r = ranks; r-- > 0;) {
		ext += 4;
		cnt[r] = mine[r] = v ? (r * 3 + b) % 7 : b;
		dis[r] = ext;
		ext += cnt[r];
	}
	a.count = cnt;
	a.displ = dis;
	R = sg_node_of(&lay, nodes, root, &s0);
	CHECK(R < nodes);
	/* paths: direct, or R+1, R+2, ... d (mod nodes) */
	for (uint32_t d = 0; d < nodes; d++) {
		pf[d] = nh;
		if (d != R)
			for (uint32_t x = (R + 1) % nodes;; x = (x + 1) % nodes) {
				hop[nh] = x;
				ord[nh] = nh - pf[d] + 1;
				if (ord[nh] > paths.last_order)
					paths.last_order = ord[nh];
				nh++;
				if (x == d)
					break;
			}
	}
	pf[nodes] = nh;
	CHECK_EQ(sched_init(&s, nodes), 0);
	ret = sg_sched(gather, &lay, nodes, &a, mine, chain ? &paths : NULL, &s);
	CHECK_EQ(ret, 0);
	if (!ret && (ret = sched_check(&s, why, sizeof(why))) != 0)
		fprintf(stderr, "  sched_check: %s\n", why);
	CHECK_EQ(ret, 0);
	for (uint32_t n = 0; n < nodes; n++) {
		uint32_t k = per[n];

		mem[n].send = calloc(k + 1, sizeof(void *));
		mem[n].recv = calloc(k + 1, sizeof(void *));
		mem[n].send_len = calloc(k + 1, 8);
		mem[n].recv_len = calloc(k + 1, 8);
		for (uint32_t slot = 0; slot < k; slot++) {
			uint32_t r = at[first[n] + slot];
			int isroot = r == root;
			uint64_t sl = gather ? (isroot && in_place ? 0 : mine[r]) : (isroot ? ext : 0);
			uint64_t rl = gather ? (isroot ? ext : 0) : (isroot && in_place ? 0 : mine[r]);

			mem[n].send_len[slot] = sl;
			mem[n].recv_len[slot] = rl;
			mem[n].send[slot] = malloc(sl + 1);
			mem[n].recv[slot] = malloc(rl + 1);
			memset(mem[n].send[slot], 0x5a, sl);
			memset(mem[n].recv[slot], 0xee, rl);
			if (!gather && isroot)
				for (uint32_t d = 0; d < ranks; d++)
					for (uint64_t i = 0; i < cnt[d]; i++)
						mem[n].send[slot][dis[d] + i] = pat(d, i);
			if (gather && !(isroot && in_place))
				for (uint64_t i = 0; i < mine[r]; i++)
					mem[n].send[slot][i] = pat(r, i);
			if (gather && isroot && in_place)
				for (uint64_t i = 0; i < cnt[r]; i++)
					mem[n].recv[slot][dis[r] + i] = pat(r, i);
			wtotal += rl;
		}
	}
	writes = calloc(wtotal + 1, 4);
	if (!ret) {
		struct sched_run_stats rs;

		ret = sched_run(&s, mem, seed, writes, &rs, why, sizeof(why));
		if (ret)
			fprintf(stderr, "  sched_run: %s\n", why);
		CHECK_EQ(ret, 0);
	}
	/* every byte: the pattern in the blocks (once), 0xee in the gaps (never) */
	for (uint32_t n = 0, w = 0; n < nodes && !ret; n++)
		for (uint32_t slot = 0; slot < per[n]; slot++) {
			uint32_t r = at[first[n] + slot];
			uint64_t rl = mem[n].recv_len[slot];

			for (uint64_t i = 0; i < rl; i++, w++) {
				int in_block = 0, own = 0;
				uint8_t want = 0xee;

				if (!gather) {
					in_block = 1;
					want = pat(r, i);
				} else {
					for (uint32_t q = 0; q < ranks; q++)
						if (i >= dis[q] && i < dis[q] + cnt[q]) {
							in_block = 1;
							own = q == root && in_place;
							want = pat(q, i - dis[q]);
						}
				}
				if (mem[n].recv[slot][i] != want || writes[w] != (uint32_t)(in_block && !own)) {
					fprintf(stderr, "  %s nodes %u root %u b %llu v %d chain %d: rank %u byte %llu: "
						"%u (want %u), written %u times\n", gather ? "gather" : "scatter", nodes,
						root, (unsigned long long)b, v, chain, r, (unsigned long long)i,
						mem[n].recv[slot][i], want, writes[w]);
					CHECK(0);
					goto out;
				}
			}
		}
out:
	for (uint32_t n = 0; n < nodes; n++) {
		for (uint32_t slot = 0; slot < per[n]; slot++) {
			free(mem[n].send[slot]);
			free(mem[n].recv[slot]);
		}
		free(mem[n].send);
		free(mem[n].recv);
		free(mem[n].send_len);
		free(mem[n].recv_len);
	}
	sched_free(&s);
	free(mem), free(writes), free(first), free(at), free(fill), free(cnt), free(dis), free(mine);
	free(pf), free(hop), free(ord);
}

static const uint32_t layouts[][8] = {
	{ 1, 1 }, { 1, 3 }, { 2, 1, 1 }, { 3, 2, 2, 1 }, { 5, 1, 0, 2, 1, 3 }, { 7, 1, 1, 1, 1, 1, 1, 1 },
	{ 4, 2, 0, 1, 3 },
};

TEST(every_root_every_layout_direct_and_forwarded)
{
	uint64_t seed = 1;

	for (size_t l = 0; l < sizeof(layouts) / sizeof(layouts[0]); l++) {
		uint32_t nodes = layouts[l][0], ranks = 0;

		for (uint32_t n = 0; n < nodes; n++)
			ranks += layouts[l][1 + n];
		for (uint32_t root = 0; root < ranks; root++)
			for (int gather = 0; gather < 2; gather++)
				for (int chain = 0; chain < 2; chain++)
					for (int v = 0; v < 2; v++) {
						one(gather, nodes, layouts[l] + 1, root, v ? 2 : 5, v, chain, 0, seed++);
						one(gather, nodes, layouts[l] + 1, root, 3, v, chain, 1, seed++);
						one(gather, nodes, layouts[l] + 1, root, 0, 0, chain, 0, seed++);
					}
	}
}

TEST(refusals)
{
	static const uint32_t per[2] = { 1, 1 };
	uint32_t first[3] = { 0, 1, 2 }, at[2] = { 0, 1 };
	struct a2a_layout lay = { 2, first, at };
	uint64_t cnt[2] = { 4, 4 }, dis[2] = { 0, 4 }, mine[1] = { 5 };
	struct sg_args a = { .root = 0, .count = cnt, .displ = dis, .mine = mine };
	struct sched s;

	(void)per;
	CHECK_EQ(sched_init(&s, 2), 0);
	/* the root's count for one of its own ranks is not what that rank says */
	CHECK_EQ(sg_sched_node(0, &lay, 2, 0, &a, NULL, &s.node[0]), -EINVAL);
	sched_free(&s);
	CHECK_EQ(sched_init(&s, 2), 0);
	a.root = 2;     /* no such rank */
	CHECK_EQ(sg_sched_node(0, &lay, 2, 1, &a, NULL, &s.node[1]), -EINVAL);
	sched_free(&s);
	CHECK_EQ(sched_init(&s, 2), 0);
	a.root = 0;
	a.count = NULL; /* the root's node without the root's counts */
	CHECK_EQ(sg_sched_node(1, &lay, 2, 0, &a, NULL, &s.node[0]), -EINVAL);
	sched_free(&s);
}

int main(void)
{
	RUN(every_root_every_layout_direct_and_forwarded);
	RUN(refusals);
	return check_done();
}
