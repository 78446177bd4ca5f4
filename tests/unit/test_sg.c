/* tests/unit/test_sg.c - plan/sg_sched: scatter and gather schedules, node
 * by node, checked (sched_check) and run by the simulator (sched_run) over
 * real buffers: every byte of every block where it belongs, written exactly
 * once, the gaps untouched; direct paths, forwarding chains, the orthogonal
 * two-phase realization and the binomial tree; every root; uneven ranks per
 * node, nodes without ranks, short last rows, zero counts, in place.  Then
 * the message counts the paper claims, ranks naming different roots (every
 * assignment for small groups: a failure, never a hang, a scatter
 * delivering nothing), and the cost model and chooser. */
#define UNIT "test_sg"
#include "check.h"

#include "../../daemon/plan/sched.h"
#include "../../daemon/plan/sg_sched.h"
#include "plan_util.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static uint8_t pat(uint32_t rank, uint64_t i)
{
	return (uint8_t)(rank * 37 + i * 5 + 3);
}

enum mode { M_DIRECT, M_CHAIN, M_ORTH, M_TREE, MODES };
static const char *const mode_name[MODES] = { "direct", "chain", "orth", "tree" };

/* One case: nodes nodes, per[n] ranks on node n (ranks numbered round the
 * nodes), root, counts count(r) = (r * 3 + b) % 7 (zeros among them, v) or
 * b; displacements in reverse rank order with 4-byte gaps.  mode M_CHAIN:
 * the path of node d runs through every node between the root's node and d
 * (the simulator then forwards); M_ORTH, M_TREE: sg_sched_alg. */
static void one(int gather, uint32_t nodes, const uint32_t *per, uint32_t root, uint64_t b, int v, int mode,
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
	if (mode == M_ORTH || mode == M_TREE)
		ret = sg_sched_alg(mode == M_ORTH ? SG_ORTH : SG_TREE, gather, &lay, nodes, &a, mine, &s);
	else
		ret = sg_sched(gather, &lay, nodes, &a, mine, mode == M_CHAIN ? &paths : NULL, &s);
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
					fprintf(stderr, "  %s nodes %u root %u b %llu v %d %s: rank %u byte %llu: "
						"%u (want %u), written %u times\n", gather ? "gather" : "scatter", nodes,
						root, (unsigned long long)b, v, mode_name[mode], r, (unsigned long long)i,
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

/* nodes, then ranks per node.  Grids (sg_grid): 5 nodes 2 rows of 3, 7
 * nodes 2 rows of 4, 12 nodes 3 rows of 4, 16 nodes 4 x 4: short last rows
 * (a root in their missing columns: the last node leads), leaders without
 * ranks (7 nodes, root in column 0: node 4; 12: node 9 in column 1). */
static const uint32_t layouts[][17] = {
	{ 1, 1 }, { 1, 3 }, { 2, 1, 1 }, { 3, 2, 2, 1 }, { 5, 1, 0, 2, 1, 3 }, { 7, 1, 1, 1, 1, 1, 1, 1 },
	{ 4, 2, 0, 1, 3 }, { 3, 0, 2, 1 }, { 7, 2, 0, 1, 1, 0, 3, 1 },
	{ 12, 1, 2, 1, 0, 1, 1, 3, 1, 1, 0, 1, 1 },
	{ 16, 1, 1, 2, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1 },
	{ 16, 1, 0, 1, 1, 2, 1, 0, 1, 1, 1, 1, 1, 0, 3, 1, 1 },
};

static void every_root(int mode)
{
	uint64_t seed = 1;

	for (size_t l = 0; l < sizeof(layouts) / sizeof(layouts[0]); l++) {
		uint32_t nodes = layouts[l][0], ranks = 0;

		for (uint32_t n = 0; n < nodes; n++)
			ranks += layouts[l][1 + n];
		for (uint32_t root = 0; root < ranks; root++)
			for (int gather = 0; gather < 2; gather++)
				for (int v = 0; v < 2; v++) {
					one(gather, nodes, layouts[l] + 1, root, v ? 2 : 5, v, mode, 0, seed++);
					one(gather, nodes, layouts[l] + 1, root, 3, v, mode, 1, seed++);
					one(gather, nodes, layouts[l] + 1, root, 0, 0, mode, 0, seed++);
				}
	}
}

TEST(every_root_every_layout_direct_and_forwarded)
{
	every_root(M_DIRECT);
	every_root(M_CHAIN);
}

TEST(every_root_every_layout_orthogonal)
{
	every_root(M_ORTH);
}

TEST(every_root_every_layout_tree)
{
	every_root(M_TREE);
}

/* A layout of nodes nodes, per ranks each (ranks round the nodes). */
struct flat {
	uint32_t first[20], at[40];
	struct a2a_layout lay;
	uint64_t cnt[40], dis[40];
};

static void flat_init(struct flat *f, uint32_t nodes, const uint32_t *per)
{
	uint32_t ranks = plan_deal(nodes, per, f->first, f->at);

	for (uint32_t r = 0; r < ranks; r++) {
		f->cnt[r] = 1;
		f->dis[r] = r;
	}
	f->lay = (struct a2a_layout){ ranks, f->first, f->at };
}

/* Steps of node n of a kind carrying data (message number >= lo). */
static uint32_t data_steps(const struct sched_node *n, unsigned kind, uint32_t lo, uint32_t nodes)
{
	uint32_t k = 0;

	for (uint32_t i = 0; i < n->nsteps; i++)    /* (the data's numbers: lo + node) */
		k += n->steps[i].kind == kind && n->steps[i].msg >= lo && n->steps[i].msg < lo + nodes;
	return k;
}

/* Seed 004 §2.1's counts, on layouts where every node has ranks: R sends
 * (gather: receives) r - 1 leader messages and one per other node of its
 * row, instead of nodes - 1; every other leader c - 1 more, for its row;
 * the others one message each.  The tree: R ceil(log2 nodes).  Every
 * scratch segment a relay uses is sized. */
TEST(message_counts)
{
	static const uint32_t sizes[] = { 1, 2, 3, 5, 7, 12, 16 };
	uint32_t per[20];

	for (size_t z = 0; z < sizeof(sizes) / sizeof(sizes[0]); z++) {
		uint32_t P = sizes[z], r, c, L = 0;
		struct flat f;

		for (uint32_t n = 0; n < P; n++)
			per[n] = 1 + n % 2;
		flat_init(&f, P, per);
		sg_grid(P, &r, &c);
		while ((1u << L) < P)
			L++;
		for (uint32_t R = 0; R < P; R++)
			for (int gather = 0; gather < 2; gather++)
				for (int alg = SG_ORTH; alg < SG_ALGS; alg++) {
					struct sg_args a = { .root = f.at[f.first[R]], .count = f.cnt, .displ = f.dis };
					uint32_t lo = alg == SG_ORTH ? P + 2 : 2 * P + 2, rowR = R / c;
					unsigned out = gather ? SCHED_RECV : SCHED_SEND, in = gather ? SCHED_SEND : SCHED_RECV;
					struct sched s;

					CHECK_EQ(sched_init(&s, P), 0);
					CHECK_EQ(sg_sched_alg(alg, gather, &f.lay, P, &a, f.cnt, &s), 0);
					for (uint32_t n = 0; n < P; n++) {
						const struct sched_node *sn = &s.node[n];
						uint32_t row = n / c, rowlen = row == r - 1 ? P - row * c : c;
						uint32_t lead = sg_orth_leader(P, c, R, row);
						/* messages n sends toward its ranks' nodes (gather: takes from them) */
						uint32_t down = data_steps(sn, out, lo, P), up = data_steps(sn, in, lo, P);

						for (uint32_t g = 0; g < sn->nsegs; g++)
							if (sn->segs[g].buf == SCHED_BUF_SCRATCH)
								CHECK(sn->segs[g].flags & SCHED_SEG_SIZED);
						if (alg == SG_TREE) {
							if (n == R)
								CHECK_EQ(down, L);
							CHECK_EQ(up, n != R);
							continue;
						}
						if (n == R) {
							uint32_t rowRlen = rowR == r - 1 ? P - rowR * c : c;

							CHECK_EQ(down, (r - 1) + (rowRlen - 1));
							CHECK(down <= r - 1 + c - 1);
							CHECK_EQ(up, 0);
						} else if (n == lead) {
							CHECK_EQ(down, rowlen - 1);
							CHECK_EQ(up, 1);
						} else {
							CHECK_EQ(down, 0);
							CHECK_EQ(up, 1);
						}
					}
					sched_free(&s);
				}
	}
}

/* One assignment: node n's ranks name root belief[n]. */
static void beliefs_one(const struct flat *f, uint32_t P, const uint32_t *belief, uint32_t *bad)
{
	uint32_t s0, R0 = sg_node_of(&f->lay, P, belief[0], &s0);
	int agree = 1;

	for (uint32_t n = 1; n < P; n++)
		agree &= sg_node_of(&f->lay, P, belief[n], &s0) == R0;
	for (int alg = 0; alg < SG_ALGS; alg++)
		for (int gather = 0; gather < 2; gather++) {
			struct sched s;
			uint64_t mine[4];
			int delivered, ret = 0, out;

			CHECK_EQ(sched_init(&s, P), 0);
			for (uint32_t n = 0; n < P && !ret; n++) {
				struct sg_args a = { .root = belief[n], .count = f->cnt, .displ = f->dis, .mine = mine };

				s.node[n].nslots = f->first[n + 1] - f->first[n];
				for (uint32_t i = 0; i < s.node[n].nslots; i++)
					mine[i] = 1;
				ret = sg_sched_alg_node(alg, gather, &f->lay, P, n, &a, &s.node[n]);
			}
			CHECK_EQ(ret, 0);
			out = plan_run_beliefs(&s, &delivered);
			if (agree ? out != 0 || !delivered : out != 1 || (!gather && delivered)) {
				if ((*bad)++ < 5) {
					fprintf(stderr, "  %s %s nodes %u roots", sg_alg_name(alg),
						gather ? "gather" : "scatter", P);
					for (uint32_t n = 0; n < P; n++)
						fprintf(stderr, " %u", belief[n]);
					fprintf(stderr, ": %s%s\n", out < 0 ? "hangs" : out ? "fails" : "completes",
						delivered ? ", delivered" : "");
				}
			}
			sched_free(&s);
		}
}

/* Every assignment of roots to nodes for 1 to 5 nodes of one rank, samples
 * for more nodes and two ranks a node: agreeing nodes finish and deliver,
 * disagreeing ones fail somewhere (never all waiting), and a scatter that
 * fails has delivered nothing anywhere. */
TEST(different_roots_fail_never_hang)
{
	uint32_t per[20], belief[20], bad = 0;
	uint64_t x = 88172645463325252ull;

	for (uint32_t P = 1; P <= 5; P++) {
		struct flat f;
		uint32_t combos = 1;

		for (uint32_t n = 0; n < P; n++) {
			per[n] = 1;
			combos *= P;
		}
		flat_init(&f, P, per);
		for (uint32_t c = 0; c < combos; c++) {
			for (uint32_t n = 0, y = c; n < P; n++, y /= P)
				belief[n] = y % P;
			beliefs_one(&f, P, belief, &bad);
		}
	}
	for (uint32_t P = 6; P <= 16; P += 1) {
		struct flat f;

		for (uint32_t n = 0; n < P; n++)
			per[n] = 1 + (P > 9 && n % 3 == 0);
		flat_init(&f, P, per);
		for (int t = 0; t < 400; t++) {
			/* mostly two or three roots, so that near-agreement is tried */
			uint32_t roots[3];

			for (int i = 0; i < 3; i++)
				roots[i] = (uint32_t)(plan_rnd(&x) % f.lay.ranks);
			for (uint32_t n = 0; n < P; n++)
				belief[n] = t % 4 == 0 ? (uint32_t)(plan_rnd(&x) % f.lay.ranks) : roots[plan_rnd(&x) % (t % 2 ? 2 : 3)];
			beliefs_one(&f, P, belief, &bad);
		}
	}
	CHECK_EQ(bad, 0);
}

TEST(grid_and_cost_model)
{
	static const uint32_t grid[][3] = {
		{ 1, 1, 1 }, { 2, 1, 2 }, { 3, 1, 3 }, { 4, 2, 2 }, { 5, 2, 3 }, { 6, 2, 3 }, { 7, 2, 4 },
		{ 9, 3, 3 }, { 12, 3, 4 }, { 16, 4, 4 }, { 17, 3, 6 }, { 1000, 28, 36 } /* 1008: fewer holes than 32 x 32 */, { 1u << 20, 1024, 1024 },
	};
	uint32_t r, c;

	for (size_t i = 0; i < sizeof(grid) / sizeof(grid[0]); i++) {
		sg_grid(grid[i][0], &r, &c);
		if (r != grid[i][1] || c != grid[i][2])
			fprintf(stderr, "  grid %u: %u x %u\n", grid[i][0], r, c);
		CHECK(r == grid[i][1] && c == grid[i][2]);
	}
	/* the leader of a short last row without R's column: its last node */
	CHECK_EQ(sg_orth_leader(7, 4, 3, 1), 6);
	CHECK_EQ(sg_orth_leader(7, 4, 1, 1), 5);
	CHECK_EQ(sg_orth_leader(7, 4, 5, 0), 1);
	CHECK_EQ(sg_alg_by_name("orth"), SG_ORTH);
	CHECK_EQ(sg_alg_by_name("tree"), SG_TREE);
	CHECK_EQ(sg_alg_by_name("x"), -1);
	CHECK(sg_alg_name(SG_ALGS) == NULL);

	/* the formulas, alpha 10 us, m beta 1 us (1000 bytes at 1 ns/B) */
	CHECK(sg_predict_us(SG_DIRECT, 1, 1, 1, 1000, 10, 1) == 0);
	CHECK(sg_predict_us(SG_DIRECT, 1, 4, 1, 1000, 10, 1) == 3 * 11.0);
	CHECK(sg_predict_us(SG_DIRECT, 0, 4, 1, 1000, 10, 1) == 30 + 3 * 11.0);
	CHECK(sg_predict_us(SG_ORTH, 1, 16, 2, 500, 10, 1) == (6 + 3) * 10.0 + 15);    /* 4 x 4 */
	CHECK(sg_predict_us(SG_ORTH, 0, 7, 1, 1000, 10, 1) == 60 + 4 * 10.0 + 7);       /* 2 x 4, 1 hole */
	CHECK(sg_predict_us(SG_TREE, 0, 16, 1, 1000, 10, 1) == 150 + 4 * 10.0 + 15);
	CHECK(sg_predict_us(SG_TREE, 1, 16, 1, 1000, 10, 1) == (4 + 3) * 10.0 + 15);   /* children of 8, 4, 2 nodes */
	CHECK_EQ(sg_relay_bytes(SG_TREE, 16, 2, 100), 1600);
	CHECK_EQ(sg_relay_bytes(SG_TREE, 3, 2, 100), 0);
	CHECK_EQ(sg_relay_bytes(SG_ORTH, 16, 2, 100), 800);
	CHECK_EQ(sg_relay_bytes(SG_DIRECT, 16, 2, 100), 0);

	/* The chooser, clear cases.  Two or three nodes: the tree and the grid
	 * are the direct pattern, the tie goes to direct, any size. */
	for (int gather = 0; gather < 2; gather++) {
		CHECK_EQ(sg_choose(gather, 2, 4, 8, &(struct cost){ 5, 0.1, 0, NULL }, 0), SG_DIRECT);
		CHECK_EQ(sg_choose(gather, 3, 4, 1u << 20, &(struct cost){ 5, 0.1, 0, NULL }, 0), SG_DIRECT);
		/* small blocks on many nodes: a structure, not direct */
		CHECK_EQ(sg_choose(gather, 64, 8, 8, &(struct cost){ 5, 0.1, 0, NULL }, 0), SG_TREE);
		CHECK(sg_choose(gather, 1024, 1, 64, &(struct cost){ 2, 0.1, 0, NULL }, 256ull << 20) != SG_DIRECT);
		/* 4 nodes: a scatter's 2 x 2 grid ties with the tree, the simpler
		 * wins; a gather's pays for its leader's empty message what it
		 * saved, and ties with direct */
		CHECK_EQ(sg_choose(gather, 4, 1, 8, &(struct cost){ 5, 0.1, 0, NULL }, 0), gather ? SG_DIRECT : SG_ORTH);
		/* large blocks on few nodes: the relays could not hold them */
		CHECK_EQ(sg_choose(gather, 6, 4, 32ull << 20, &(struct cost){ 5, 0.1, 0, NULL }, 256ull << 20), SG_DIRECT);
		CHECK_EQ(sg_choose(gather, 8, 4, 16ull << 20, &(struct cost){ 5, 0.1, 0, NULL }, 256ull << 20), SG_DIRECT);
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
	RUN(every_root_every_layout_orthogonal);
	RUN(every_root_every_layout_tree);
	RUN(message_counts);
	RUN(different_roots_fail_never_hang);
	RUN(grid_and_cost_model);
	RUN(refusals);
	return check_done();
}
