/* tests/fuzz/fuzz_coll.c - the collective executor (daemon/coll/exec.c)
 * fed by hostile peers, over the schedules of every planner.
 *
 * An input starts with HDR bytes that pick a schedule (h[0] % 5):
 *   0  all-to-all(v): strategy h[2] (direct, mesh, grid3d, hypercube) over
 *      1-9 nodes with 0-3 ranks each (h[4..7]), ranks in node order or
 *      round the nodes, blocks of 0-8 bytes (h[8]), even or v, gaps
 *   1  the barrier over 1-9 nodes
 *   2  scatter or gather through plan/sg_sched: any root, v counts, in
 *      place or not, direct or along chains of FORWARDs (either way round)
 *   3  scatter or gather on a small torus (plan/scatter.c: OPT or SDF)
 *   4  (h[0] / 5 % 8 == 6) bcast, reduce, allreduce or allgather(v) of
 *      plan/orth (h[9] % 4, v: h[9] & 0x40), algorithm h[2] % 3 (single,
 *      orth over sg_grid's or, h[3] & 0x40, an r x ceil(P/r) layout, hier over
 *      P's prime factors), root h[3], h[8] % 9 elements or
 *      bytes, type (h[9] >> 2) % 11, op h[2] / 3 % 10 (or % 4 where the
 *      type takes no bit operation)
 *   4  (h[0] / 5 % 8 == 7) reduce_scatter (short, long or hybrid: h[2] % 3;
 *      uneven counts: h[9] & 4) or scan / exscan (h[9] & 1, & 2) of plan/rs,
 *      every node with ranks
 *   4  (otherwise) a synthetic reduction along a chain of 1-5 nodes (1-3 slots each):
 *      local COPY and REDUCE, RECV_REDUCE or RECV into scratch and REDUCE,
 *      messages in one or two parts, and the result broadcast back or not;
 *      any type and op (h[2], h[3]).  Checked by sched_check first: a
 *      schedule it refuses is never run (the daemon runs only its own
 *      planners' output).
 * Every node's part runs on an executor, the pieces carried between them
 * in order; every node's receive buffers must come out as the simulator
 * (sched_run) leaves them.  The pieces node `victim` (h[10]) received are
 * kept, and what it sent.  Then a fresh executor of the victim gets them
 * again, as the rest of the input says, 4 bytes per action [what, a,
 * pos (2 bytes)]:
 *   0  the next piece in the order they came      1  the next of message a
 *   2  piece a | pos << 8 as it is (again, early: must fail)
 *   3  piece a, one bit at pos flipped            4  piece a cut at pos
 *   5  piece a with offset, total, msg, from changed by (int8)(pos >> 8),
 *      or another message's header (pos & 7 says which)
 *   6  run the executor (its sends take pos % 8 pieces, then -EAGAIN)
 *   7  run it within a budget of pos bytes (COPY, REDUCE, SEND and RECV in slices)
 *   8  a raw piece: the next pos bytes (a BREAK decoded as the engine does)
 *   9  the last piece delivered, again
 * The header, byte by byte: 0 the schedule, 1 its nodes (torus: its
 * shape), 2 strategy, root or type, 3 op (all-to-all: odd, the
 * disagreement leaves the message's size alone), 4-7 ranks per node (3
 * bits each; reduction: slots, 2 bits each), 8 block size, 9 variant bits,
 * 10 the victim, 11 piece_max, 12 modes, 13 the faulty call or mem_max,
 * 14 which slot overlaps or is short, 15 the simulator's seed.  Modes
 * (h[12]): 1 the victim's send and receive buffers overlapping (one buffer
 * passed as both: never placed, never sent in place); 2 its first rank's
 * receive counts disagreeing with a sender's (all-to-all); 4 empty
 * buffers passed as NULL; 8, 16, 24 the executor's mem_take failing
 * (-ENOMEM, -EDQUOT) or its send failing (-EPIPE) at the (h[13] % 32 +
 * 1)-th call; 32 a small mem_max; 64 a receive buffer one byte short
 * (coll_exec_new must refuse it where a block reaches its end).
 * The last scenario built is kept for the next input with the same header.
 * Pieces go through wire_coll_piece_decode first, as in the engine.
 *
 * Whatever comes, the executor must not crash, leak or write outside its
 * buffers (ASan: every buffer allocated at its exact size); it never writes
 * a send buffer; a failed operation stays failed with the same error; the
 * memory it says it holds is what its mem_take and mem_give say, and all
 * of it is given back when it is freed; the pieces it sends continue their
 * streams; a piece that is the next of its message is taken while nothing
 * else went wrong, an exact copy of a piece out of its place is refused.
 * If every piece delivered was the next of its message, the rest is
 * delivered at the end and the operation must complete (or fail with the
 * fault injected, or with -EINVAL where the counts disagree) with every
 * receive buffer as the simulator left it and every stream sent as in the
 * first run.  FUZZ_COLL_DEBUG=1 says what each input built. */
#include "../../daemon/coll/exec.h"
#include "../../daemon/plan/a2a.h"
#include "../../daemon/plan/barrier.h"
#include "../../daemon/plan/route.h"
#include "../../daemon/plan/scatter.h"
#include "../../daemon/plan/sg_sched.h"
#include "../../daemon/plan/orth.h"
#include "../../daemon/plan/rs.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define HDR 16
#define MAXN 9
#define MAXR (MAXN * 3)

#define MODE_OVERLAP 1u
#define MODE_DISAGREE 2u
#define MODE_NULL 4u
#define MODE_FAULT(m) (((m) >> 3) & 3u)         /* 0 none, 1 mem -ENOMEM, 2 mem -EDQUOT, 3 send -EPIPE */
#define MODE_SMALL_MEM 32u
#define MODE_SHORT 64u                  /* a receive buffer one byte shorter than its blocks need */

static int debug;

#define BUG(...)                                                \
	do {                                                    \
		fprintf(stderr, "fuzz_coll: " __VA_ARGS__);     \
		fputc('\n', stderr);                            \
		abort();                                        \
	} while (0)

/* ---- a scenario: the schedule, every node's buffers ---- */

struct stream {                 /* a message as sent: (peer, msg) and its bytes */
	uint32_t peer, msg;
	uint64_t total, got;
	uint8_t *buf;
};

struct piece {
	uint32_t to;
	struct wire_coll_piece h;
	uint32_t len;
	uint8_t *data;
	uint32_t m, k;          /* its message among the victim's, its number there */
};

struct world {
	uint32_t nodes, victim;
	struct sched s;                 /* every node's part */
	struct sched vs;                /* (disagree) the victim's own part, at vs.node[victim] */
	const struct sched_node *vn;    /* what the victim runs */
	struct sched_mem init[MAXN];    /* the buffers as every run starts */
	struct sched_mem vinit;         /* the victim's (disagree: its own counts) */
	struct sched_mem sim[MAXN], run[MAXN];
	uint32_t piece_max;
	uint32_t mode;                  /* MODE_*, those that apply */

	struct piece *q;                /* pieces in flight in the first run */
	size_t nq, capq;
	struct piece *got;              /* those the victim received, in order */
	size_t ngot;
	struct stream *sent;            /* what the victim sent in the first run */
	size_t nsent;
	uint32_t nmsg;                  /* messages the victim received */
	uint32_t *msg_first;            /* [nmsg + 1]: their pieces at byidx[msg_first[m] ..] */
	uint32_t *byidx;                /* piece indices by message, then number */
};

static void mem_free(struct sched_mem *m, uint32_t nslots)
{
	for (uint32_t i = 0; m->send && i < nslots; i++) {
		free(m->send[i]);
		free(m->recv[i]);
	}
	free(m->send);
	free(m->recv);
	free(m->send_len);
	free(m->recv_len);
	memset(m, 0, sizeof(*m));
}

/* Buffers of exactly these sizes (NULL where empty if null_empty). */
static void mem_alloc(struct sched_mem *m, uint32_t nslots, const uint64_t *slen, const uint64_t *rlen,
		      int null_empty)
{
	m->send = calloc(nslots + 1, sizeof(*m->send));
	m->recv = calloc(nslots + 1, sizeof(*m->recv));
	m->send_len = calloc(nslots + 1, sizeof(*m->send_len));
	m->recv_len = calloc(nslots + 1, sizeof(*m->recv_len));
	for (uint32_t i = 0; i < nslots; i++) {
		m->send_len[i] = slen[i];
		m->recv_len[i] = rlen[i];
		m->send[i] = slen[i] || !null_empty ? malloc(slen[i]) : NULL;
		m->recv[i] = rlen[i] || !null_empty ? malloc(rlen[i]) : NULL;
	}
}

static void mem_copy(struct sched_mem *d, const struct sched_mem *s, uint32_t nslots, int null_empty)
{
	mem_alloc(d, nslots, s->send_len, s->recv_len, null_empty);
	for (uint32_t i = 0; i < nslots; i++) {
		if (s->send_len[i])
			memcpy(d->send[i], s->send[i], s->send_len[i]);
		if (s->recv_len[i])
			memcpy(d->recv[i], s->recv[i], s->recv_len[i]);
	}
}

/* The initial contents: every send byte its own, receive bytes another
 * pattern (gaps must keep it). */
static void mem_fill(struct sched_mem *m, uint32_t nslots, uint32_t node)
{
	for (uint32_t i = 0; i < nslots; i++) {
		for (uint64_t b = 0; b < m->send_len[i]; b++)
			m->send[i][b] = (uint8_t)(node * 71 + i * 13 + b * 7 + 1);
		for (uint64_t b = 0; b < m->recv_len[i]; b++)
			m->recv[i][b] = (uint8_t)(0xe0 ^ (node * 5 + i + b * 3));
	}
}

static int mem_same(const struct sched_mem *a, const struct sched_mem *b, uint32_t nslots, int recv)
{
	for (uint32_t i = 0; i < nslots; i++) {
		const uint64_t *la = recv ? a->recv_len : a->send_len;
		const uint8_t *pa = recv ? a->recv[i] : a->send[i], *pb = recv ? b->recv[i] : b->send[i];

		if (la[i] && memcmp(pa, pb, la[i]))
			return 0;
	}
	return 1;
}

static void world_free(struct world *w)
{
	for (uint32_t n = 0; n < w->nodes; n++) {
		uint32_t k = w->s.node ? w->s.node[n].nslots : 0;

		mem_free(&w->init[n], k);
		mem_free(&w->sim[n], k);
		mem_free(&w->run[n], k);
	}
	if (w->vn)
		mem_free(&w->vinit, w->vn->nslots);
	for (size_t i = 0; i < w->nq; i++)
		free(w->q[i].data);
	free(w->q);
	for (size_t i = 0; i < w->ngot; i++)
		free(w->got[i].data);
	free(w->got);
	for (size_t i = 0; i < w->nsent; i++)
		free(w->sent[i].buf);
	free(w->sent);
	free(w->msg_first);
	free(w->byidx);
	sched_free(&w->s);
	sched_free(&w->vs);
}

/* ---- the planners ---- */

struct layout {
	uint32_t ppn[MAXN], first[MAXN + 1], at[MAXR], ranks;
	struct a2a_layout lay;
};

/* 0-3 ranks on each of P nodes from u's bits, numbered in node order or
 * round the nodes. */
static void layout(struct layout *L, uint32_t P, uint32_t u, int round)
{
	uint32_t fill[MAXN] = { 0 };

	L->ranks = 0;
	L->first[0] = 0;
	for (uint32_t n = 0; n < P; n++) {
		L->ppn[n] = (u >> (3 * n)) % 4;
		L->first[n + 1] = L->first[n] + L->ppn[n];
		L->ranks += L->ppn[n];
	}
	if (!round) {
		for (uint32_t r = 0; r < L->ranks; r++)
			L->at[r] = r;
	} else {
		for (uint32_t r = 0, n = 0; r < L->ranks; n = (n + 1) % P)
			if (fill[n] < L->ppn[n])
				L->at[L->first[n] + fill[n]++] = r++;
	}
	L->lay = (struct a2a_layout){ L->ranks, L->first, L->at };
}

/* Buffers of every node from per-rank lengths (by rank), slot order. */
static void node_bufs(struct world *w, const struct layout *L, const uint64_t *slen, const uint64_t *rlen)
{
	for (uint32_t n = 0; n < w->nodes; n++) {
		uint64_t sl[4] = { 0 }, rl[4] = { 0 };

		for (uint32_t i = L->first[n]; i < L->first[n + 1]; i++) {
			sl[i - L->first[n]] = slen[L->at[i]];
			rl[i - L->first[n]] = rlen[L->at[i]];
		}
		w->s.node[n].nslots = L->ppn[n];
		mem_alloc(&w->init[n], L->ppn[n], sl, rl, 0);
	}
}

static int build_a2a(struct world *w, const uint8_t *h)
{
	struct layout L;
	static uint64_t sc[MAXR * MAXR], sd[MAXR * MAXR], rc[MAXR * MAXR], rd[MAXR * MAXR];
	uint64_t slen[MAXR] = { 0 }, rlen[MAXR] = { 0 }, blk = h[8] % 9, gap = (h[9] >> 2) & 3;
	struct a2a_rank_args args[MAXR];
	struct a2a_plan p;
	uint32_t P = w->nodes, R;
	int ret;

	layout(&L, P, (uint32_t)h[4] | (uint32_t)h[5] << 8 | (uint32_t)h[6] << 16 | (uint32_t)h[7] << 24, h[9] & 1);
	R = L.ranks;
	for (uint32_t a = 0; a < R; a++)
		for (uint32_t b = 0; b < R; b++)
			sc[a * R + b] = (h[9] & 2) ? (a * 7 + b * 3 + h[8]) % (blk + 1) : blk;
	/* sends in rank order, receives in reverse, gaps between */
	for (uint32_t a = 0; a < R; a++) {
		for (uint32_t b = 0; b < R; b++) {
			sd[a * R + b] = slen[a];
			slen[a] += sc[a * R + b] + gap;
		}
		for (uint32_t b = R; b-- > 0;) {
			rc[a * R + b] = sc[b * R + a];
			rd[a * R + b] = rlen[a];
			rlen[a] += rc[a * R + b] + gap;
		}
	}
	for (uint32_t a = 0; a < R; a++)
		args[a] = (struct a2a_rank_args){ sc + a * R, sd + a * R, rc + a * R, rd + a * R };
	if (a2a_plan_init(&p, (enum a2a_strategy)(h[2] % A2A_STRATEGIES), P) || sched_init(&w->s, P))
		return -1;
	if ((ret = a2a_sched(&p, &L.lay, args, &w->s)))
		BUG("a2a_sched: %d", ret);
	node_bufs(w, &L, slen, rlen);
	if (!(w->mode & MODE_DISAGREE))
		return 0;
	/* The victim's first rank expects one byte more from the first rank
	 * of another node than that rank sends it (h[3] odd: and its second
	 * rank one byte less, where it gets any: the message the same size,
	 * its parts not). */
	uint32_t v = w->victim, a = UINT32_MAX, b;

	w->mode &= ~MODE_DISAGREE;      /* (until it does) */
	if (!L.ppn[v])
		return 0;
	b = L.at[L.first[v]];
	for (uint32_t i = 0; i < R && a == UINT32_MAX; i++)
		if (i < L.first[v] || i >= L.first[v + 1])
			a = L.at[i];
	if (a == UINT32_MAX)
		return 0;
	static uint64_t vrc[MAXR], vrd[MAXR];
	struct a2a_rank_args vargs[4];
	uint64_t vrl = 0, sl[4], rl[4];

	static uint64_t vrc2[MAXR], vrd2[MAXR];
	uint32_t b2 = L.ppn[v] > 1 && (h[3] & 1) && rc[L.at[L.first[v] + 1] * R + a] ? L.at[L.first[v] + 1] : UINT32_MAX;
	uint64_t vrl2 = 0;

	for (uint32_t c = R; c-- > 0;) {
		vrc[c] = rc[b * R + c] + (c == a);
		vrd[c] = vrl;
		vrl += vrc[c] + gap;
		if (b2 == UINT32_MAX)
			continue;
		vrc2[c] = rc[b2 * R + c] - (c == a);
		vrd2[c] = vrl2;
		vrl2 += vrc2[c] + gap;
	}
	for (uint32_t i = L.first[v]; i < L.first[v + 1]; i++) {
		uint32_t r = L.at[i];

		vargs[i - L.first[v]] = r == b ? (struct a2a_rank_args){ sc + r * R, sd + r * R, vrc, vrd } :
					r == b2 ? (struct a2a_rank_args){ sc + r * R, sd + r * R, vrc2, vrd2 } :
					args[r];
		sl[i - L.first[v]] = slen[r];
		rl[i - L.first[v]] = r == b ? vrl : r == b2 ? vrl2 : rlen[r];
	}
	if (sched_init(&w->vs, P))
		return -1;
	w->vs.node[v].nslots = L.ppn[v];
	if ((ret = a2a_sched_node(&p, &L.lay, v, vargs, &w->vs.node[v])))
		BUG("a2a_sched_node (disagreeing): %d", ret);
	mem_alloc(&w->vinit, L.ppn[v], sl, rl, 0);
	mem_fill(&w->vinit, L.ppn[v], v);
	w->vn = &w->vs.node[v];
	w->mode |= MODE_DISAGREE;
	return 0;
}

static int build_barrier(struct world *w)
{
	int ret;

	if (sched_init(&w->s, w->nodes))
		return -1;
	for (uint32_t n = 0; n < w->nodes; n++) {
		if ((ret = barrier_sched_node(w->nodes, n, &w->s.node[n])))
			BUG("barrier_sched_node: %d", ret);
		mem_alloc(&w->init[n], 0, NULL, NULL, 0);
	}
	return 0;
}

static int build_sg(struct world *w, const uint8_t *h)
{
	struct layout L;
	uint32_t P = w->nodes, pf[MAXN + 1], hop[MAXN * MAXN], ord[MAXN * MAXN], nh = 0, s0, R;
	uint64_t cnt[MAXR], dis[MAXR], ext = 0, blk = h[8] % 9, gap = h[9] >> 5;
	uint64_t slen[MAXR], rlen[MAXR];
	int gather = h[9] & 1, in_place = !!(h[9] & 2), path = (h[9] >> 3) % 3, ret;
	struct sg_paths paths = { pf, hop, ord, 0 };
	struct sg_args a = { .in_place = in_place, .count = cnt, .displ = dis };

	layout(&L, P, (uint32_t)h[4] | (uint32_t)h[5] << 8 | (uint32_t)h[6] << 16 | (uint32_t)h[7] << 24, h[9] & 0x80);
	if (!L.ranks)
		return 1;
	a.root = h[2] % L.ranks;
	for (uint32_t r = L.ranks; r-- > 0;) {
		ext += gap;
		cnt[r] = (h[9] & 4) ? (r * 3 + h[8]) % (blk + 1) : blk;
		dis[r] = ext;
		ext += cnt[r];
	}
	R = sg_node_of(&L.lay, P, a.root, &s0);
	/* chains R+1, R+2, ... d or, ... d */
	for (uint32_t d = 0; d < P; d++) {
		pf[d] = nh;
		if (d == R)
			continue;
		for (uint32_t x = R;;) {
			x = path == 2 ? (x + P - 1) % P : (x + 1) % P;
			hop[nh] = x;
			ord[nh] = nh - pf[d] + 1;
			if (ord[nh] > paths.last_order)
				paths.last_order = ord[nh];
			nh++;
			if (x == d)
				break;
		}
	}
	pf[P] = nh;
	for (uint32_t r = 0; r < L.ranks; r++) {
		int isroot = r == a.root;

		slen[r] = gather ? (isroot && in_place ? 0 : cnt[r]) : (isroot ? ext : 0);
		rlen[r] = gather ? (isroot ? ext : 0) : (isroot && in_place ? 0 : cnt[r]);
	}
	if (sched_init(&w->s, P))
		return -1;
	if ((ret = sg_sched(gather, &L.lay, P, &a, cnt, path ? &paths : NULL, &w->s)))
		BUG("sg_sched: %d", ret);
	node_bufs(w, &L, slen, rlen);
	return 0;
}

static int build_torus(struct world *w, const uint8_t *h)
{
	static const uint32_t tori[][4] = {
		/* ndims, sides */
		{ 1, 2 }, { 1, 3 }, { 1, 4 }, { 1, 5 }, { 1, 6 }, { 1, 7 }, { 1, 8 }, { 1, 9 },
		{ 2, 2, 2 }, { 2, 2, 3 }, { 2, 3, 3 }, { 2, 2, 4 }, { 3, 2, 2, 2 }, { 2, 3, 2 }, { 2, 1, 4 },
		{ 3, 1, 3, 3 },
	};
	const uint32_t *t = tori[h[1] % (sizeof(tori) / sizeof(tori[0]))];
	struct route r;
	struct scatter_plan p[2];
	uint32_t n = 1, gather = !!(h[9] & 2), root;
	uint64_t count[MAXN], displ[MAXN], ext = 0, blk = h[8] % 9, gap = h[9] >> 5;
	int ret;

	for (uint32_t d = 0; d < t[0]; d++)
		n *= t[1 + d];
	w->nodes = n;
	root = h[2] % n;
	w->victim = h[10] % n;
	if (route_init(&r, ROUTE_TORUS, t[0], t + 1, n))
		BUG("route_init");
	for (uint32_t v = 0; v < n; v++) {
		count[v] = (h[9] & 4) ? (v * 5 + h[8]) % (blk + 1) : blk;
		displ[v] = ext;
		ext += count[v] + gap;
	}
	if ((ret = scatter_plan(&r, root, (enum scatter_algo)(h[9] & 1), &p[0])))
		BUG("scatter_plan: %d", ret);
	if (gather && (ret = scatter_reverse(&p[0], &p[1])))
		BUG("scatter_reverse: %d", ret);
	if (sched_init(&w->s, n))
		return -1;
	ret = scatter_sched(&p[gather], count, displ, &w->s);
	scatter_plan_free(&p[0]);
	if (gather)
		scatter_plan_free(&p[1]);
	if (ret)
		BUG("scatter_sched: %d", ret);
	for (uint32_t v = 0; v < n; v++) {
		uint64_t sl = gather ? count[v] : v == root ? ext : 0;
		uint64_t rl = !gather ? count[v] : v == root ? ext : 0;

		mem_alloc(&w->init[v], 1, &sl, &rl, 0);
	}
	return 0;
}

/* A reduction along the chain 0, 1, ... N-1 (to the last node; back to
 * every node if bcast): each node reduces its slots' send buffers into its
 * first slot's receive buffer, then what came from the node before into
 * it, and passes it on. */
/* The type and op of a planned reduction from h. */
static void type_op(const uint8_t *h, unsigned *type_p, unsigned *op_p)
{
	*type_p = (h[9] >> 2) % COLL_TYPES;
	*op_p = h[2] / 3 % COLL_OPS;
	if (!coll_op_ok(*type_p, *op_p))
		*op_p %= 4;
}

static int build_orth(struct world *w, const uint8_t *h)
{
	struct layout L;
	uint32_t P = w->nodes, x = P;
	uint64_t slen[MAXR], rlen[MAXR], cnt[MAXR], total = 0, n = h[8] % 9;
	struct orth_dims dims = { 0 }, grid;
	struct orth_args a = { .kind = (enum orth_kind)(h[9] % 4), .alg = (enum orth_alg)(h[2] % 3),
			       .dims = &dims };
	size_t esz;
	int ret;

	layout(&L, P, (uint32_t)h[4] | (uint32_t)h[5] << 8 | (uint32_t)h[6] << 16 | (uint32_t)h[7] << 24, h[9] & 0x80);
	if (!L.ranks)
		return 1;
	for (uint32_t f = 2; x > 1;)    /* P's prime factors */
		if (x % f == 0) {
			dims.d[dims.k++] = f;
			x /= f;
		} else {
			f++;
		}
	if (!dims.k)
		dims.d[dims.k++] = 1;
	if (a.alg == ORTH_GRID && (h[3] & 0x40) && P >= 2) {
		/* a layout of its own (as orth_layout may choose): r x ceil(P/r) */
		uint32_t r = 2 + h[3] % (P > 2 ? P - 1 : 1);

		grid = (struct orth_dims){ 2, { r, (P + r - 1) / r } };
		a.grid = &grid;
	}
	type_op(h, &a.type, &a.op);
	esz = coll_type_size(a.type);
	a.root = h[3] % L.ranks;
	a.bytes = a.count = a.block = n;
	for (uint32_t r = 0; r < L.ranks; r++) {
		cnt[r] = (h[9] & 0x40) ? (r * 3 + h[8]) % (n + 1) : n;
		total += cnt[r];
	}
	if (a.kind == ORTH_ALLGATHER && (h[9] & 0x40))
		a.counts = cnt;
	for (uint32_t r = 0; r < L.ranks; r++) {
		int root = r == a.root;

		switch (a.kind) {
		case ORTH_BCAST: slen[r] = root ? n : 0; rlen[r] = root ? 0 : n; break;
		case ORTH_REDUCE: slen[r] = n * esz; rlen[r] = root ? n * esz : 0; break;
		case ORTH_ALLREDUCE: slen[r] = rlen[r] = n * esz; break;
		default: slen[r] = cnt[r]; rlen[r] = total; break;
		}
	}
	if (sched_init(&w->s, P))
		return -1;
	if ((ret = orth_sched(&a, &L.lay, P, NULL, &w->s)))
		BUG("orth_sched: %d", ret);
	node_bufs(w, &L, slen, rlen);
	return 0;
}

static int build_rs(struct world *w, const uint8_t *h)
{
	struct layout L;
	uint32_t P = w->nodes;
	uint64_t slen[MAXR], rlen[MAXR], cnt[MAXR], total = 0, n = h[8] % 9;
	unsigned type, op;
	size_t esz;
	int ret;

	layout(&L, P, (uint32_t)h[4] | (uint32_t)h[5] << 8 | (uint32_t)h[6] << 16 | (uint32_t)h[7] << 24, h[9] & 0x80);
	for (uint32_t k = 0; k < P; k++)
		if (!L.ppn[k])
			return 1;       /* (the daemons' groups have ranks on every node) */
	type_op(h, &type, &op);
	esz = coll_type_size(type);
	for (uint32_t r = 0; r < L.ranks; r++) {
		cnt[r] = (h[9] & 4) ? (r * 3 + h[8]) % (n + 1) : n;
		total += cnt[r];
	}
	if (sched_init(&w->s, P))
		return -1;
	if (h[9] & 1) {
		struct rs_scan_args a = { .count = n, .type = type, .op = op, .exclusive = !!(h[9] & 2),
					  .chunks = n ? 1 + h[3] % (n < 4 ? n : 4) : 1 };

		for (uint32_t r = 0; r < L.ranks; r++)
			slen[r] = rlen[r] = n * esz;
		if ((ret = rs_scan_sched(&a, &L.lay, P, &w->s)))
			BUG("rs_scan_sched: %d", ret);
	} else {
		struct rs_args a = { .counts = cnt, .type = type, .op = op };
		struct rs_plan p;

		if (rs_choose(h[2] % 3, P, total * esz, &(struct cost){ 10, 1, 0.1, NULL }, &p))
			BUG("rs_choose");
		for (uint32_t r = 0; r < L.ranks; r++) {
			slen[r] = total * esz;
			rlen[r] = cnt[r] * esz;
		}
		if ((ret = rs_sched(&p, &L.lay, &a, &w->s)))
			BUG("rs_sched: %d", ret);
	}
	node_bufs(w, &L, slen, rlen);
	return 0;
}

static int build_reduce(struct world *w, const uint8_t *h)
{
	uint32_t N = w->nodes, type = h[2] % COLL_TYPES, op = h[3] % COLL_OPS;
	uint32_t u = (uint32_t)(h[4] | h[5] << 8), split = h[9] & 2, bcast = h[9] & 4, scratch = h[9] & 1;
	uint64_t es, cnt = h[8] % 9, len, half;
	char why[256];

	if (!coll_op_ok(type, op))
		op %= 4;        /* (sum, prod, min, max: every type) */
	es = coll_type_size(type);
	len = cnt * es;
	half = cnt / 2 * es;
	if (sched_init(&w->s, N))
		return -1;
	for (uint32_t i = 0; i < N; i++) {
		struct sched_node *n = &w->s.node[i];
		uint32_t k = 1 + (u >> (2 * i)) % 3, last, snd = UINT32_MAX, r;
		uint32_t rv[2], nrv = split ? 2 : 1, sd[3], rs[3];
		uint64_t lens[3];

		n->nslots = k;
		if (split) {
			rv[0] = sched_seg(n, SCHED_BUF_RECV, 0, 0, half, 0);
			rv[1] = sched_seg(n, SCHED_BUF_RECV, 0, half, len - half, 0);
		} else {
			rv[0] = sched_seg(n, SCHED_BUF_RECV, 0, 0, len, 0);
		}
		for (uint32_t j = 0; j < k; j++) {
			sd[j] = sched_seg(n, SCHED_BUF_SEND, j, 0, len, 0);
			rs[j] = sched_seg(n, SCHED_BUF_RECV, j, 0, len, 0);
			lens[j] = len;
		}
		last = sched_step(n, SCHED_COPY, 0, 0, 0);
		sched_ref(n, rs[0]);
		sched_ref(n, sd[0]);
		for (uint32_t j = 1; j < k; j++) {
			uint32_t s = sched_step(n, SCHED_REDUCE, 0, 0, 0);

			sched_step_reduce(n, type, op);
			sched_ref(n, rs[0]);
			sched_ref(n, sd[j]);
			sched_dep(n, last);
			last = s;
		}
		if (i > 0 && scratch) {
			uint32_t b = sched_scratch(n, len), sc = sched_seg(n, SCHED_BUF_SCRATCH, b, 0, len, 0), s;

			r = sched_step(n, SCHED_RECV, i - 1, 0, 0);
			if (split) {
				sched_ref(n, sched_seg(n, SCHED_BUF_SCRATCH, b, 0, half, 0));
				sched_ref(n, sched_seg(n, SCHED_BUF_SCRATCH, b, half, len - half, 0));
			} else {
				sched_ref(n, sc);
			}
			s = sched_step(n, SCHED_REDUCE, 0, 0, 0);
			sched_step_reduce(n, type, op);
			sched_ref(n, rs[0]);
			sched_ref(n, sc);
			sched_dep(n, last);
			sched_dep(n, r);
			last = s;
		} else if (i > 0) {
			r = sched_step(n, SCHED_RECV_REDUCE, i - 1, 0, 0);
			sched_step_reduce(n, type, op);
			for (uint32_t g = 0; g < nrv; g++)
				sched_ref(n, rv[g]);
			sched_dep(n, last);
			last = r;
		}
		if (i + 1 < N) {
			snd = sched_step(n, SCHED_SEND, i + 1, 0, 0);
			for (uint32_t g = 0; g < nrv; g++)
				sched_ref(n, rv[g]);
			sched_dep(n, last);
		}
		if (bcast && N > 1) {
			if (i + 1 < N) {
				r = sched_step(n, SCHED_RECV, i + 1, 1, 0);
				for (uint32_t g = 0; g < nrv; g++)
					sched_ref(n, rv[g]);
				sched_dep(n, snd);
				last = r;
			}
			if (i > 0) {
				sched_step(n, SCHED_SEND, i - 1, 1, 1);
				for (uint32_t g = 0; g < nrv; g++)
					sched_ref(n, rv[g]);
				sched_dep(n, last);
			}
		}
		for (uint32_t j = 1; j < k; j++) {
			sched_step(n, SCHED_COPY, 0, 0, 0);
			sched_ref(n, rs[j]);
			sched_ref(n, rs[0]);
			sched_dep(n, last);
		}
		mem_alloc(&w->init[i], k, lens, lens, 0);
	}
	if (sched_err(&w->s))
		return -1;
	if (sched_check(&w->s, why, sizeof(why))) {
		/* never run what sched_check refuses */
		if (debug)
			fprintf(stderr, "fuzz_coll: synthetic schedule refused: %s\n", why);
		return 1;
	}
	return 0;
}

/* ---- the first run: every node on an executor ---- */

struct rec_ctx {
	struct world *w;
	uint32_t self;
};

static struct stream *stream_of(struct stream **tab, size_t *n, uint32_t peer, uint32_t msg, int add)
{
	for (size_t i = 0; i < *n; i++)
		if ((*tab)[i].peer == peer && (*tab)[i].msg == msg)
			return &(*tab)[i];
	if (!add)
		return NULL;
	*tab = realloc(*tab, (*n + 1) * sizeof(**tab));
	(*tab)[*n] = (struct stream){ .peer = peer, .msg = msg };
	return &(*tab)[(*n)++];
}

/* A piece the victim sends: it continues its stream (recorded in tab). */
static void stream_add(struct stream **tab, size_t *n, uint32_t self, uint32_t nodes, uint32_t piece_max,
		       uint32_t peer, const struct wire_coll_piece *h, const uint8_t *d, uint32_t len)
{
	struct stream *s = stream_of(tab, n, peer, h->msg, 1);

	if (peer >= nodes || peer == self || h->from != self || wire_coll_msg_engine(h->msg))
		BUG("node %u sent message %u from %u to %u", self, h->msg, h->from, peer);
	if (!len || len > piece_max || h->offset != s->got || (s->got && h->total != s->total) ||
	    h->total < sizeof(struct wire_coll_msg) || len > h->total - h->offset || (s->got && s->got == s->total))
		BUG("node %u sent a piece of %u bytes at %llu of message %u (%llu bytes) to %u, which is at %llu",
		    self, len, (unsigned long long)h->offset, h->msg, (unsigned long long)h->total, peer,
		    (unsigned long long)s->got);
	if (!s->got) {
		s->total = h->total;
		s->buf = malloc(s->total);
	}
	memcpy(s->buf + s->got, d, len);
	s->got += len;
}

static int rec_send(void *vctx, uint32_t peer, const struct wire_coll_piece *h, const struct iovec *iov, int niov,
		    uint32_t len)
{
	struct rec_ctx *c = vctx;
	struct world *w = c->w;
	struct piece *p;

	if (w->nq == w->capq) {
		w->capq = w->capq ? w->capq * 2 : 256;
		w->q = realloc(w->q, w->capq * sizeof(*w->q));
	}
	p = &w->q[w->nq++];
	p->to = peer;
	p->h = *h;
	p->h.kind = 2;          /* (the engine names it: send_piece) */
	p->len = len;
	p->data = malloc(len);
	coll_iov_copy(p->data, iov, niov);
	if (c->self == w->victim)
		stream_add(&w->sent, &w->nsent, c->self, w->nodes, w->piece_max, peer, h, p->data, len);
	return 0;
}

static const struct coll_exec_ops rec_ops = { .send = rec_send };

/* Runs every node's part, carrying pieces in order, and checks the result
 * against the simulator's.  Keeps the victim's pieces. */
static void first_run(struct world *w, uint64_t seed)
{
	struct coll_exec *x[MAXN];
	struct rec_ctx ctx[MAXN];
	struct sched_run_stats st;
	char why[256];
	size_t head = 0;
	int ret, round;

	for (uint32_t i = 0; i < w->nodes; i++) {
		uint32_t k = w->s.node[i].nslots;
		struct coll_exec_cfg cfg = { .self = i, .op = 1, .piece_max = w->piece_max, .mem_max = 1 << 24 };

		mem_copy(&w->sim[i], &w->init[i], k, 0);
		mem_copy(&w->run[i], &w->init[i], k, 0);
		ctx[i] = (struct rec_ctx){ w, i };
		if ((ret = coll_exec_new(&w->s.node[i], &w->run[i], &cfg, &rec_ops, &ctx[i], &x[i], why, sizeof(why))))
			BUG("coll_exec_new node %u: %s", i, why);
	}
	if ((ret = sched_run(&w->s, w->sim, seed, NULL, &st, why, sizeof(why))))
		BUG("sched_run: %s", why);
	for (round = 0; round < 1000; round++) {
		int all = 1;

		for (uint32_t i = 0; i < w->nodes; i++) {
			if ((ret = coll_exec_run(x[i])) < 0)
				BUG("node %u: %s", i, coll_exec_error(x[i]));
			all &= ret == 1;
		}
		if (all && head == w->nq)
			break;
		while (head < w->nq) {
			struct piece *p = &w->q[head++];

			if (coll_exec_deliver(x[p->to], &p->h, p->data, p->len))
				BUG("node %u deliver: %s", p->to, coll_exec_error(x[p->to]));
			if (p->to == w->victim) {
				w->got = realloc(w->got, (w->ngot + 1) * sizeof(*w->got));
				w->got[w->ngot++] = *p;
			} else {
				free(p->data);
			}
			p->data = NULL;
		}
	}
	if (round == 1000)
		BUG("the first run never ended");
	for (uint32_t i = 0; i < w->nodes; i++) {
		uint32_t k = w->s.node[i].nslots;

		coll_exec_free(x[i]);
		if (!mem_same(&w->run[i], &w->sim[i], k, 1))
			BUG("node %u: the executors' receive buffers are not the simulator's", i);
		if (!mem_same(&w->run[i], &w->init[i], k, 0))
			BUG("node %u: a send buffer was written", i);
	}
	/* the victim's messages (by their first piece) and their pieces, in
	 * order */
	uint32_t *first = calloc(w->ngot + 1, sizeof(*first)), *cnt = calloc(w->ngot + 1, sizeof(*cnt));

	for (size_t i = 0; i < w->ngot; i++) {
		struct piece *p = &w->got[i];
		uint32_t m = 0;

		while (m < w->nmsg && !(w->got[first[m]].h.from == p->h.from && w->got[first[m]].h.msg == p->h.msg))
			m++;
		if (m == w->nmsg)
			first[w->nmsg++] = (uint32_t)i;
		p->m = m;
		p->k = cnt[m]++;
	}
	w->msg_first = calloc(w->nmsg + 1, sizeof(*w->msg_first));
	w->byidx = calloc(w->ngot + 1, sizeof(*w->byidx));
	for (uint32_t m = 0; m < w->nmsg; m++)
		w->msg_first[m + 1] = w->msg_first[m] + cnt[m];
	for (size_t i = 0; i < w->ngot; i++)
		w->byidx[w->msg_first[w->got[i].m] + w->got[i].k] = (uint32_t)i;
	free(first);
	free(cnt);
}

/* ---- the victim's replay ---- */

struct victim {
	struct world *w;
	struct coll_exec *x;
	uint32_t mode;
	uint64_t held;                  /* bytes its mem_take took, less mem_give */
	uint64_t calls;                 /* to mem_take or send, for the fault */
	uint64_t fault_at;
	int fault_err, faulted;
	int eagain;
	uint32_t send_budget;
	struct stream *sent;
	size_t nsent;
	uint32_t *next;                 /* [nmsg]: the number of each message's next piece */
	int tainted;                    /* a piece other than the next of its message was delivered */
	int failed;
	uint32_t ov_send, ov_recv;      /* (overlap) the slots sharing memory */
	uint32_t short_slot;            /* (short) the slot whose receive buffer is short, or UINT32_MAX */
	uint8_t last[sizeof(struct wire_coll_piece) + WIRE_COLL_PIECE_MAX];
	size_t nlast;
};

static int fault(struct victim *v, int is_send)
{
	int kind = (int)MODE_FAULT(v->mode);

	if (!kind || (kind == 3) != is_send)
		return 0;
	if (++v->calls != v->fault_at)
		return 0;
	v->faulted = 1;
	return v->fault_err;
}

static int v_mem_take(void *ctx, uint64_t bytes)
{
	struct victim *v = ctx;
	int ret = fault(v, 0);

	if (!ret)
		v->held += bytes;
	return ret;
}

static void v_mem_give(void *ctx, uint64_t bytes)
{
	struct victim *v = ctx;

	if (bytes > v->held)
		BUG("mem_give of %llu bytes, %llu held", (unsigned long long)bytes, (unsigned long long)v->held);
	v->held -= bytes;
}

static int v_send(void *ctx, uint32_t peer, const struct wire_coll_piece *h, const struct iovec *iov, int niov,
		  uint32_t len)
{
	struct victim *v = ctx;
	uint8_t *d;
	int ret;

	if (v->eagain && v->send_budget == 0)
		return -EAGAIN;
	if ((ret = fault(v, 1)))
		return ret;
	if (v->send_budget)
		v->send_budget--;
	/* every part readable (ASan checks) */
	d = malloc(len);
	coll_iov_copy(d, iov, niov);
	stream_add(&v->sent, &v->nsent, v->w->victim, v->w->nodes, v->w->piece_max, peer, h, d, len);
	free(d);
	return 0;
}

static const struct coll_exec_ops victim_ops = { .send = v_send, .mem_take = v_mem_take, .mem_give = v_mem_give };

/* What every call must leave true. */
static void after(struct victim *v, int ret, const char *what)
{
	if (v->failed && ret != v->failed)
		BUG("%s returned %d after the operation failed with %d", what, ret, v->failed);
	if (ret < 0) {
		v->failed = ret;
		if (!coll_exec_error(v->x)[0])
			BUG("%s failed (%d) without saying why", what, ret);
	}
	if (coll_exec_mem(v->x) != v->held)
		BUG("the executor says it holds %llu bytes, its mem_take took %llu",
		    (unsigned long long)coll_exec_mem(v->x), (unsigned long long)v->held);
	if (coll_exec_mem_peak(v->x) < coll_exec_mem(v->x))
		BUG("peak below what it holds");
}

/* Whether nothing but the input's pieces can fail the operation. */
static int strict(const struct victim *v)
{
	return !(v->mode & (MODE_DISAGREE | MODE_SMALL_MEM)) && !MODE_FAULT(v->mode);
}

/* A piece (header and stream bytes, n in all) for the victim, decoded as
 * the engine does. */
static void deliver(struct victim *v, const uint8_t *buf, size_t n)
{
	struct world *w = v->w;
	struct wire_coll_piece h;
	int64_t len;
	int ret, exact = -1;    /* 1 the next piece of its message, 0 a recorded one out of place */
	uint32_t m;

	if (n > sizeof(v->last))
		n = sizeof(v->last);
	memcpy(v->last, buf, n);
	v->nlast = n;
	len = wire_coll_piece_decode(buf, n, &h);
	if (len < 0)
		return;
	if (h.msg == WIRE_COLL_MSG_BREAK) {
		/* a group's BREAK: the engine decodes it, never the executor */
		char why[256];
		int err = 0;

		if (wire_coll_break_decode(&h, buf + sizeof(h), (uint64_t)len, &err, why, sizeof(why)) == 0 &&
		    (err <= 0 || err > 4095 || strlen(why) > 255 || strpbrk(why, "\n\r\x1b")))
			BUG("BREAK decoded out of range");
		return;
	}
	if (h.msg == WIRE_COLL_MSG_HOLD) {
		/* a HOLD: the engine's too */
		int on = -1;

		if (wire_coll_hold_decode(&h, buf + sizeof(h), (uint64_t)len, &on) == 0 && on != 0 && on != 1)
			BUG("HOLD decoded out of range");
		return;
	}
	/* compare with the recorded pieces of its message (what the executor
	 * reads of a header: from, msg, offset, total) */
	for (m = 0; m < w->nmsg; m++) {
		const struct piece *p0 = &w->got[w->byidx[w->msg_first[m]]];

		if (p0->h.from == h.from && p0->h.msg == h.msg)
			break;
	}
	for (uint32_t i = m < w->nmsg ? w->msg_first[m] : 0; m < w->nmsg && i < w->msg_first[m + 1]; i++) {
		const struct piece *p = &w->got[w->byidx[i]];

		if (p->h.offset == h.offset && p->h.total == h.total && p->len == (uint64_t)len &&
		    !memcmp(p->data, buf + sizeof(h), p->len)) {
			exact = p->k == v->next[m];
			break;
		}
	}
	ret = coll_exec_deliver(v->x, &h, buf + sizeof(h), (uint32_t)len);
	if (exact == 1 && !v->tainted && !v->failed && strict(v) && ret)
		BUG("the next piece of message %u from %u refused: %s", h.msg, h.from, coll_exec_error(v->x));
	if (exact == 0 && !v->tainted && !ret)
		BUG("a piece of message %u from %u at %llu taken out of its place", h.msg, h.from,
		    (unsigned long long)h.offset);
	if (exact == 1)
		v->next[m]++;
	else
		v->tainted = 1;
	after(v, ret, "coll_exec_deliver");
}

static void deliver_piece(struct victim *v, const struct piece *p)
{
	uint8_t *buf = malloc(sizeof(p->h) + p->len);

	wire_coll_piece_encode(buf, &p->h);
	memcpy(buf + sizeof(p->h), p->data, p->len);
	deliver(v, buf, sizeof(p->h) + p->len);
	free(buf);
}

static void run(struct victim *v, uint64_t *budget)
{
	int ret = budget ? coll_exec_run_budget(v->x, budget) : coll_exec_run(v->x);

	after(v, ret, "coll_exec_run");
}

/* Every piece delivered was the next of its message: the rest comes now,
 * and the operation must end as the first run did. */
static void finish(struct victim *v, const struct sched_mem *vmem)
{
	struct world *w = v->w;
	const struct sched_node *n = w->vn;
	int ret = 0;

	for (size_t i = 0; i < w->ngot; i++)
		if (w->got[i].k == v->next[w->got[i].m])
			deliver_piece(v, &w->got[i]);
	v->eagain = 0;
	for (int i = 0; i < 4 && ret == 0; i++) {
		ret = coll_exec_run(v->x);
		after(v, ret, "coll_exec_run");
	}
	if (ret < 0) {
		/* the ranks' disagreement, or the fault injected */
		if (!((v->mode & MODE_DISAGREE) && ret == -EINVAL) && !(v->faulted && ret == v->fault_err) &&
		    !((v->mode & MODE_SMALL_MEM) && ret == -ENOMEM))
			BUG("a clean replay failed with %d (%s)", ret, coll_exec_error(v->x));
		return;
	}
	if (v->mode & MODE_DISAGREE)
		BUG("ranks whose counts disagree: %d", ret);
	if (ret == 1 && coll_exec_busy(v->x))
		BUG("done and busy");
	if (ret != 1)
		BUG("a clean replay ended with %d: %s", ret, coll_exec_error(v->x));
	if (v->mode & MODE_OVERLAP)
		return;         /* (what an overlapping buffer gets: whatever copies gave it) */
	if (!mem_same(vmem, &w->sim[w->victim], n->nslots, 1))
		BUG("a clean replay's receive buffers are not the simulator's");
	if (v->nsent != w->nsent)
		BUG("a clean replay sent %zu messages, the first run %zu", v->nsent, w->nsent);
	for (size_t i = 0; i < w->nsent; i++) {
		const struct stream *a = &w->sent[i];
		struct stream *b = stream_of(&v->sent, &v->nsent, a->peer, a->msg, 0);

		if (!b || b->got != a->total || a->got != a->total || memcmp(a->buf, b->buf, a->total))
			BUG("a clean replay sent message %u to %u otherwise", a->msg, a->peer);
	}
}

/* The victim's buffers: a copy of its first ones, or (overlap) one of its
 * send buffers sharing memory with one of its receive buffers.  Returns
 * the shared block to free, or NULL. */
static uint8_t *victim_mem(struct victim *v, struct sched_mem *m, const struct sched_mem *init, uint32_t k,
			   uint8_t shift)
{
	uint32_t si = UINT32_MAX, ri = UINT32_MAX;
	uint8_t *region;
	uint64_t sl, rl, off, sz;

	mem_copy(m, init, k, !!(v->mode & MODE_NULL));
	for (uint32_t i = 0; (v->mode & MODE_SHORT) && i < k; i++)
		if (m->recv_len[(i + shift) % k]) {
			/* (exactly that long: ASan sees a byte beyond) */
			uint32_t j = (i + shift) % k;

			m->recv_len[j]--;
			free(m->recv[j]);
			m->recv[j] = malloc(m->recv_len[j]);
			memcpy(m->recv[j], init->recv[j], m->recv_len[j]);
			v->short_slot = j;
			break;
		}
	if (!(v->mode & MODE_OVERLAP))
		return NULL;
	for (uint32_t i = 0; i < k; i++) {
		if (m->send_len[i] && si == UINT32_MAX)
			si = i;
		if (m->recv_len[(i + shift) % k] && ri == UINT32_MAX)
			ri = (i + shift) % k;
	}
	if (si == UINT32_MAX || ri == UINT32_MAX) {
		v->mode &= ~MODE_OVERLAP;
		return NULL;
	}
	sl = m->send_len[si];
	rl = m->recv_len[ri];
	off = shift % sl;
	sz = off + rl > sl ? off + rl : sl;
	region = malloc(sz);
	memcpy(region + off, m->recv[ri], rl);
	memcpy(region, m->send[si], sl);
	free(m->send[si]);
	free(m->recv[ri]);
	m->send[si] = region;
	m->recv[ri] = region + off;
	v->ov_send = si;
	v->ov_recv = ri;
	return region;
}

static void replay(struct world *w, const uint8_t *h, const uint8_t *data, size_t size)
{
	static struct victim v;
	const struct sched_node *n = w->vn;
	struct sched_mem vmem;
	uint8_t *region;
	struct coll_exec_cfg cfg = { .self = w->victim, .op = 1, .piece_max = w->piece_max, .mem_max = 1 << 24 };
	static uint8_t buf[sizeof(struct wire_coll_piece) + 64 * 1024];
	char why[256];
	int ret;

	memset(&v, 0, sizeof(v));
	v.w = w;
	v.mode = w->mode;
	v.fault_at = 1 + h[13] % 32;
	v.fault_err = MODE_FAULT(v.mode) == 1 ? -ENOMEM : MODE_FAULT(v.mode) == 2 ? -EDQUOT : -EPIPE;
	if (v.mode & MODE_SMALL_MEM)
		cfg.mem_max = 16ull << (h[13] % 12);
	v.next = calloc(w->nmsg + 1, sizeof(*v.next));
	v.short_slot = UINT32_MAX;
	region = victim_mem(&v, &vmem, &w->vinit, n->nslots, h[14]);
	ret = coll_exec_new(n, &vmem, &cfg, &victim_ops, &v, &v.x, why, sizeof(why));
	if (v.short_slot != UINT32_MAX) {
		/* a segment beyond its buffer (the ranks' arguments place them),
		 * unless none touches the last byte of that buffer: the
		 * executor then runs, within it */
		if (ret && ret != -EINVAL && !(ret == -ENOMEM && !strict(&v)))
			BUG("coll_exec_new with a short buffer: %d %s", ret, why);
		if (ret)
			goto out;
	} else if (ret) {
		if (strict(&v) || ret != -ENOMEM)
			BUG("coll_exec_new: %d %s", ret, why);
		goto out;
	}
	after(&v, 0, "coll_exec_new");
	v.eagain = 1;
	for (size_t i = 0; i + 4 <= size;) {
		uint8_t what = data[i] % 10, a = data[i + 1];
		uint16_t pos = (uint16_t)(data[i + 2] | data[i + 3] << 8);
		const struct piece *p = w->ngot ? &w->got[a % w->ngot] : NULL;
		struct wire_coll_piece ph;
		uint64_t budget;
		size_t len;

		i += 4;
		if (what <= 5 && !p)
			continue;
		if (what >= 3 && what <= 5) {
			wire_coll_piece_encode(buf, &p->h);
			memcpy(buf + sizeof(p->h), p->data, p->len);
		}
		len = p ? sizeof(p->h) + p->len : 0;
		switch (what) {
		case 0:
			for (size_t j = 0; j < w->ngot; j++)
				if (w->got[j].k == v.next[w->got[j].m]) {
					deliver_piece(&v, &w->got[j]);
					break;
				}
			break;
		case 1: {
			uint32_t m = a % w->nmsg, k = w->msg_first[m] + v.next[m];

			/* (all of it came: its last piece again) */
			if (k >= w->msg_first[m + 1])
				k = w->msg_first[m + 1] - 1;
			deliver_piece(&v, &w->got[w->byidx[k]]);
			break;
		}
		case 2:
			deliver_piece(&v, &w->got[(a | (uint32_t)pos << 8) % w->ngot]);
			break;
		case 3:
			buf[pos % len] ^= (uint8_t)(1u << (pos >> 13));
			deliver(&v, buf, len);
			break;
		case 4:
			deliver(&v, buf, pos % (len + 1));
			break;
		case 5: {
			int8_t d = (int8_t)(pos >> 8);
			const struct piece *o = &w->got[(a + 1 + (pos >> 8)) % w->ngot];

			memcpy(&ph, buf, sizeof(ph));
			switch (pos & 7) {
			case 0: ph.offset += (uint64_t)(int64_t)d; break;
			case 1: ph.total += (uint64_t)(int64_t)d; break;
			case 2: ph.msg += (uint32_t)d; break;
			case 3: ph.from += (uint32_t)d; break;
			case 4: ph.offset += (uint64_t)(int64_t)d; ph.total += (uint64_t)(int64_t)d; break;
			case 5: ph.msg = o->h.msg; ph.from = o->h.from; break;
			case 6: ph.msg = o->h.msg; ph.from = o->h.from; ph.total = o->h.total; break;
			default: ph.total = o->h.total; break;
			}
			wire_coll_piece_encode(buf, &ph);
			deliver(&v, buf, len);
			break;
		}
		case 6:
			v.send_budget = pos % 8;
			run(&v, NULL);
			break;
		case 7:
			v.send_budget = a % 8;
			budget = pos;
			run(&v, &budget);
			break;
		case 8:
			len = pos < size - i ? pos : size - i;
			memcpy(buf, data + i, len);
			i += len;
			deliver(&v, buf, len);
			break;
		case 9:
			if (v.nlast) {
				memcpy(buf, v.last, v.nlast);
				deliver(&v, buf, v.nlast);
			}
			break;
		}
	}
	if (!v.tainted)
		finish(&v, &vmem);
	v.eagain = 0;
	run(&v, NULL);
	if (!(v.mode & MODE_OVERLAP) && !mem_same(&vmem, &w->vinit, n->nslots, 0))
		BUG("the victim wrote a send buffer");
	coll_exec_free(v.x);
	if (v.held)
		BUG("%llu bytes not given back", (unsigned long long)v.held);
out:
	if (region) {
		/* (one block for both: freed once) */
		vmem.send[v.ov_send] = NULL;
		vmem.recv[v.ov_recv] = NULL;
		free(region);
	}
	mem_free(&vmem, n->nslots);
	for (size_t i = 0; i < v.nsent; i++)
		free(v.sent[i].buf);
	free(v.sent);
	free(v.next);
}

/* Builds the scenario h says and runs it once. */
static int world_build(struct world *w, const uint8_t *h)
{
	static const uint16_t pmax[8] = { 1, 2, 3, 7, 16, 24, 100, WIRE_COLL_PIECE_MAX };
	int ret;

	memset(w, 0, sizeof(*w));
	w->nodes = 1 + h[1] % (h[0] % 5 == 4 && h[0] / 5 % 8 < 6 ? 5 : MAXN);
	w->victim = h[10] % w->nodes;
	w->mode = h[0] % 5 ? h[12] & ~MODE_DISAGREE : h[12];
	w->piece_max = h[11] < 0x80 ? pmax[h[11] % 8] : 1 + h[11] % 64;
	switch (h[0] % 5) {
	case 0: ret = build_a2a(w, h); break;
	case 1: ret = build_barrier(w); break;
	case 2: ret = build_sg(w, h); break;
	case 3: ret = build_torus(w, h); break;
	default:
		ret = h[0] / 5 % 8 == 6 ? build_orth(w, h) : h[0] / 5 % 8 == 7 ? build_rs(w, h) : build_reduce(w, h);
		break;
	}
	if (debug)
		fprintf(stderr, "fuzz_coll: kind %u, %u nodes, victim %u, piece_max %u, mode 0x%x: %s\n", h[0] % 5,
			w->nodes, w->victim, w->piece_max, w->mode, ret ? "not built" : "built");
	if (ret)
		return ret;
	for (uint32_t n = 0; n < w->nodes; n++)
		mem_fill(&w->init[n], w->s.node[n].nslots, n);
	if (!w->vn) {
		w->vn = &w->s.node[w->victim];
		mem_copy(&w->vinit, &w->init[w->victim], w->vn->nslots, 0);
	}
	first_run(w, h[15]);
	if (debug)
		fprintf(stderr, "fuzz_coll: the victim got %zu pieces of %u messages, sent %zu messages\n", w->ngot,
			w->nmsg, w->nsent);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* The last scenario is kept: inputs that differ only after the
	 * header (most mutations) replay it without building it again. */
	static struct world w;
	static uint8_t last_h[HDR];
	static int have, built;

	debug = getenv("FUZZ_COLL_DEBUG") != NULL;
	if (size < HDR)
		return 0;
	if (!have || memcmp(last_h, data, HDR)) {
		if (have)
			world_free(&w);
		memcpy(last_h, data, HDR);
		have = 1;
		built = world_build(&w, data) == 0;
	}
	if (built)
		replay(&w, data, data + HDR, size - HDR);
	return 0;
}
