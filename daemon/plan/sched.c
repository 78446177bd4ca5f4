/* daemon/plan/sched.c - see sched.h.
 *
 * Ownership: struct sched owns node[], and each node its arrays (grown by
 * the builders with realloc); sched_free frees them.  sched_check and
 * sched_run allocate their working tables and free them before returning.
 */
#include "sched.h"

#include "reduce.h"
#include "../../proto/coll.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int sched_init(struct sched *s, uint32_t nodes)
{
	memset(s, 0, sizeof(*s));
	if (nodes == 0)
		return -EINVAL;
	s->node = calloc(nodes, sizeof(*s->node));
	if (!s->node)
		return -ENOMEM;
	s->nodes = nodes;
	return 0;
}

void sched_free(struct sched *s)
{
	for (uint32_t i = 0; s->node && i < s->nodes; i++) {
		struct sched_node *n = &s->node[i];

		free(n->steps);
		free(n->segs);
		free(n->refs);
		free(n->deps);
		free(n->scratch_len);
	}
	free(s->node);
	memset(s, 0, sizeof(*s));
}

/* Makes room for one more element of an array the node grows; 0 or -ENOMEM
 * (kept in n->err). */
static int grow(struct sched_node *n, void **arr, uint32_t *cap, uint32_t used, size_t size)
{
	if (n->err)
		return n->err;
	if (used < *cap)
		return 0;
	uint32_t ncap = *cap ? *cap * 2 : 16;
	void *p = ncap > *cap ? reallocarray(*arr, ncap, size) : NULL;

	if (!p)
		return n->err = -ENOMEM;
	*arr = p;
	*cap = ncap;
	return 0;
}

#define GROW(n, field, cap, used) grow((n), (void **)&(n)->field, &(n)->cap, (n)->used, sizeof(*(n)->field))

uint32_t sched_scratch(struct sched_node *n, uint64_t len)
{
	if (GROW(n, scratch_len, cap_scratch, nscratch))
		return 0;
	n->scratch_len[n->nscratch] = len;
	return n->nscratch++;
}

uint32_t sched_seg(struct sched_node *n, enum sched_buf buf, uint32_t index, uint64_t off, uint64_t len,
		   unsigned flags)
{
	if (GROW(n, segs, cap_segs, nsegs))
		return 0;
	n->segs[n->nsegs] = (struct sched_seg){ .buf = (uint8_t)buf, .flags = (uint8_t)flags, .index = index,
						.off = off, .len = len };
	return n->nsegs++;
}

uint32_t sched_step(struct sched_node *n, enum sched_kind kind, uint32_t peer, uint32_t msg, uint32_t order)
{
	if (GROW(n, steps, cap_steps, nsteps))
		return 0;
	n->steps[n->nsteps] = (struct sched_step){ .kind = (uint8_t)kind, .peer = peer, .msg = msg,
						   .order = order, .ref = n->nrefs, .dep = n->ndeps };
	return n->nsteps++;
}

void sched_step_forward(struct sched_node *n, uint32_t from, uint32_t from_msg)
{
	if (n->err)
		return;
	if (!n->nsteps) {
		n->err = -EINVAL;
		return;
	}
	n->steps[n->nsteps - 1].from = from;
	n->steps[n->nsteps - 1].from_msg = from_msg;
}

void sched_step_reduce(struct sched_node *n, unsigned type, unsigned op)
{
	if (n->err)
		return;
	if (!n->nsteps || type > UINT8_MAX || op > UINT8_MAX) {
		n->err = -EINVAL;
		return;
	}
	n->steps[n->nsteps - 1].type = (uint8_t)type;
	n->steps[n->nsteps - 1].op = (uint8_t)op;
}

void sched_ref(struct sched_node *n, uint32_t seg)
{
	if (!n->err && !n->nsteps)
		n->err = -EINVAL;
	if (GROW(n, refs, cap_refs, nrefs))
		return;
	n->refs[n->nrefs++] = seg;
	n->steps[n->nsteps - 1].nref++;
}

void sched_dep(struct sched_node *n, uint32_t step)
{
	if (!n->err && !n->nsteps)
		n->err = -EINVAL;
	if (GROW(n, deps, cap_deps, ndeps))
		return;
	n->deps[n->ndeps++] = step;
	n->steps[n->nsteps - 1].ndep++;
}

uint64_t sched_node_bytes(const struct sched_node *n)
{
	return (uint64_t)n->cap_steps * sizeof(*n->steps) + (uint64_t)n->cap_segs * sizeof(*n->segs) +
	       ((uint64_t)n->cap_refs + n->cap_deps) * sizeof(uint32_t) + (uint64_t)n->cap_scratch * sizeof(uint64_t);
}

int sched_err(const struct sched *s)
{
	for (uint32_t i = 0; i < s->nodes; i++)
		if (s->node[i].err)
			return s->node[i].err;
	return 0;
}

/* ---- checking ---- */

static int why_set(char *why, size_t why_len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int why_set(char *why, size_t why_len, const char *fmt, ...)
{
	va_list ap;

	if (why && why_len) {
		va_start(ap, fmt);
		vsnprintf(why, why_len, fmt, ap);
		va_end(ap);
	}
	return -EINVAL;
}

static int is_recv(unsigned kind)
{
	return kind == SCHED_RECV || kind == SCHED_RECV_REDUCE;
}

/* A message's key: sender, receiver, number. */
struct mkey {
	uint32_t src, dst, msg;
	uint32_t node, step;    /* the step that sends it (SEND, FORWARD) or takes it */
};

static int mkey_cmp(const void *a, const void *b)
{
	const struct mkey *x = a, *y = b;

	if (x->src != y->src)
		return x->src < y->src ? -1 : 1;
	if (x->dst != y->dst)
		return x->dst < y->dst ? -1 : 1;
	if (x->msg != y->msg)
		return x->msg < y->msg ? -1 : 1;
	return 0;
}

/* Every message of the schedule, as sent (out) and as taken (in), each
 * sorted by key.  Built by index_messages, freed by the caller. */
struct mindex {
	struct mkey *out, *in;
	size_t nout, nin;
};

static int index_messages(const struct sched *s, struct mindex *mi)
{
	size_t total = 0;

	memset(mi, 0, sizeof(*mi));
	for (uint32_t i = 0; i < s->nodes; i++)
		total += s->node[i].nsteps;
	mi->out = malloc((total ? total : 1) * sizeof(*mi->out));
	mi->in = malloc((total ? total : 1) * sizeof(*mi->in));
	if (!mi->out || !mi->in) {
		free(mi->out);
		free(mi->in);
		return -ENOMEM;
	}
	for (uint32_t i = 0; i < s->nodes; i++) {
		const struct sched_node *n = &s->node[i];

		for (uint32_t k = 0; k < n->nsteps; k++) {
			const struct sched_step *st = &n->steps[k];

			if (st->kind == SCHED_SEND || st->kind == SCHED_FORWARD)
				mi->out[mi->nout++] = (struct mkey){ i, st->peer, st->msg, i, k };
			if (is_recv(st->kind))
				mi->in[mi->nin++] = (struct mkey){ st->peer, i, st->msg, i, k };
			if (st->kind == SCHED_FORWARD)
				mi->in[mi->nin++] = (struct mkey){ st->from, i, st->from_msg, i, k };
		}
	}
	qsort(mi->out, mi->nout, sizeof(*mi->out), mkey_cmp);
	qsort(mi->in, mi->nin, sizeof(*mi->in), mkey_cmp);
	return 0;
}

static const struct mkey *mfind(const struct mkey *arr, size_t n, uint32_t src, uint32_t dst, uint32_t msg)
{
	struct mkey k = { src, dst, msg, 0, 0 };

	return bsearch(&k, arr, n, sizeof(*arr), mkey_cmp);
}

/* The segment's buffer length as the schedule knows it (scratch), or
 * UINT64_MAX (a rank's buffer: its length comes with the operation). */
static uint64_t seg_buf_len(const struct sched_node *n, const struct sched_seg *g)
{
	return g->buf == SCHED_BUF_SCRATCH ? n->scratch_len[g->index] : UINT64_MAX;
}

static int check_node(const struct sched *s, uint32_t me, char *why, size_t why_len)
{
	const struct sched_node *n = &s->node[me];

	if (n->err)
		return why_set(why, why_len, "node %u: builder error %d", me, n->err);
	for (uint32_t g = 0; g < n->nsegs; g++) {
		const struct sched_seg *sg = &n->segs[g];

		if (sg->buf > SCHED_BUF_SCRATCH || sg->reserved || (sg->flags & ~SCHED_SEG_SIZED))
			return why_set(why, why_len, "node %u segment %u: bad buffer or flags", me, g);
		if (sg->buf != SCHED_BUF_SCRATCH ? sg->index >= n->nslots : sg->index >= n->nscratch)
			return why_set(why, why_len, "node %u segment %u: buffer %u does not exist", me, g, sg->index);
		if (sg->flags & SCHED_SEG_SIZED) {
			if (sg->buf != SCHED_BUF_SCRATCH || sg->off || n->scratch_len[sg->index])
				return why_set(why, why_len, "node %u segment %u: a sized segment is a whole "
					       "scratch buffer of length 0", me, g);
		} else if (sg->off > seg_buf_len(n, sg) || sg->len > seg_buf_len(n, sg) - sg->off) {
			return why_set(why, why_len, "node %u segment %u: beyond its scratch buffer", me, g);
		}
	}
	for (uint32_t k = 0; k < n->nsteps; k++) {
		const struct sched_step *st = &n->steps[k];
		int net = st->kind == SCHED_SEND || st->kind == SCHED_FORWARD || is_recv(st->kind);

		if (st->kind < SCHED_SEND || st->kind > SCHED_REDUCE || st->reserved)
			return why_set(why, why_len, "node %u step %u: bad kind %u", me, k, st->kind);
		if (st->ref > n->nrefs || st->nref > n->nrefs - st->ref || st->dep > n->ndeps ||
		    st->ndep > n->ndeps - st->dep)
			return why_set(why, why_len, "node %u step %u: references out of range", me, k);
		if (net && (st->peer >= s->nodes || st->peer == me))
			return why_set(why, why_len, "node %u step %u: bad peer %u", me, k, st->peer);
		if (st->kind == SCHED_FORWARD && (st->from >= s->nodes || st->from == me || st->nref))
			return why_set(why, why_len, "node %u step %u: bad forward", me, k);
		if ((st->kind == SCHED_COPY || st->kind == SCHED_REDUCE) && st->nref != 2)
			return why_set(why, why_len, "node %u step %u: a copy or reduce has 2 segments", me, k);
		if ((st->kind == SCHED_RECV_REDUCE || st->kind == SCHED_REDUCE) && !coll_op_ok(st->type, st->op))
			return why_set(why, why_len, "node %u step %u: bad type %u or op %u", me, k, st->type, st->op);
		for (uint32_t d = 0; d < st->ndep; d++)
			if (n->deps[st->dep + d] >= k)
				return why_set(why, why_len, "node %u step %u: depends on a later step %u", me, k,
					       n->deps[st->dep + d]);
		for (uint32_t r = 0; r < st->nref; r++) {
			uint32_t g = n->refs[st->ref + r];
			const struct sched_seg *sg;

			if (g >= n->nsegs)
				return why_set(why, why_len, "node %u step %u: no segment %u", me, k, g);
			sg = &n->segs[g];
			if ((sg->flags & SCHED_SEG_SIZED) && st->kind != SCHED_SEND && st->kind != SCHED_RECV)
				return why_set(why, why_len, "node %u step %u: a sized segment only sent or "
					       "received", me, k);
			if ((st->kind == SCHED_RECV_REDUCE || st->kind == SCHED_REDUCE) &&
			    sg->len % coll_type_size(st->type))
				return why_set(why, why_len, "node %u step %u: segment %u not whole elements",
					       me, k, g);
			if (sg->buf == SCHED_BUF_SEND && r == 0 &&
			    (is_recv(st->kind) || st->kind == SCHED_COPY || st->kind == SCHED_REDUCE))
				return why_set(why, why_len, "node %u step %u: writes a send buffer", me, k);
			if (is_recv(st->kind) && sg->buf == SCHED_BUF_SEND)
				return why_set(why, why_len, "node %u step %u: writes a send buffer", me, k);
		}
		if ((st->kind == SCHED_COPY || st->kind == SCHED_REDUCE) &&
		    n->segs[n->refs[st->ref]].len != n->segs[n->refs[st->ref + 1]].len)
			return why_set(why, why_len, "node %u step %u: segments of different lengths", me, k);
	}
	return 0;
}

/* One access of a step to a segment, for the ordering check. */
struct access {
	uint8_t buf, write, read;
	uint32_t index, step;
	uint64_t off, end;
};

static int access_cmp(const void *a, const void *b)
{
	const struct access *x = a, *y = b;

	if (x->buf != y->buf)
		return x->buf < y->buf ? -1 : 1;
	if (x->index != y->index)
		return x->index < y->index ? -1 : 1;
	if (x->off != y->off)
		return x->off < y->off ? -1 : 1;
	return 0;
}

/* Within a node, two steps that touch the same bytes, one of them writing,
 * must be ordered by dependencies.  reach: the transitive closure of the
 * node's dependencies, one bit per step pair. */
static int check_races(const struct sched_node *n, uint32_t me, char *why, size_t why_len)
{
	size_t words = ((size_t)n->nsteps + 63) / 64, na = 0;
	uint64_t *reach = calloc((size_t)n->nsteps * words + 1, sizeof(*reach));
	struct access *acc = malloc(((size_t)n->nrefs + 1) * sizeof(*acc));
	int ret = 0;

	if (!reach || !acc) {
		ret = -ENOMEM;
		goto out;
	}
	for (uint32_t k = 0; k < n->nsteps; k++) {
		const struct sched_step *st = &n->steps[k];
		uint64_t *rk = reach + (size_t)k * words;

		for (uint32_t d = 0; d < st->ndep; d++) {
			uint32_t p = n->deps[st->dep + d];
			const uint64_t *rp = reach + (size_t)p * words;

			rk[p / 64] |= 1ull << (p % 64);
			for (size_t w = 0; w < words; w++)
				rk[w] |= rp[w];
		}
		for (uint32_t r = 0; r < st->nref; r++) {
			const struct sched_seg *sg = &n->segs[n->refs[st->ref + r]];
			int local = st->kind == SCHED_COPY || st->kind == SCHED_REDUCE;
			int write = is_recv(st->kind) || (local && r == 0);
			int read = st->kind == SCHED_SEND || st->kind == SCHED_RECV_REDUCE || (local && r == 1) ||
				   (st->kind == SCHED_REDUCE && r == 0);

			/* (a sized segment: the whole of its buffer, whatever comes) */
			acc[na++] = (struct access){ sg->buf, (uint8_t)write, (uint8_t)read, sg->index, k, sg->off,
						     (sg->flags & SCHED_SEG_SIZED) ? UINT64_MAX : sg->off + sg->len };
		}
	}
	qsort(acc, na, sizeof(*acc), access_cmp);
	for (size_t i = 0; i < na && !ret; i++) {
		const struct access *a = &acc[i];

		for (size_t j = i + 1; j < na; j++) {
			const struct access *b = &acc[j];
			uint32_t lo, hi;

			if (b->buf != a->buf || b->index != a->index || b->off >= a->end)
				break;
			if ((!a->write && !b->write) || a->end == a->off || b->end == b->off)
				continue;
			if (a->step == b->step) {
				/* One step naming bytes twice, one of them
				 * written: a part delivered twice, a reduction
				 * done twice, or a copy or reduction over
				 * overlapping ranges (reduce.h forbids those,
				 * but for the very same range). */
				const struct sched_step *st = &n->steps[a->step];

				if ((st->kind == SCHED_COPY || st->kind == SCHED_REDUCE) && a->off == b->off &&
				    a->end == b->end && a->write != b->write)
					continue;
				ret = why_set(why, why_len, "node %u step %u: names the same bytes twice", me, a->step);
				break;
			}
			lo = a->step < b->step ? a->step : b->step;
			hi = a->step ^ b->step ^ lo;
			if (!(reach[(size_t)hi * words + lo / 64] & (1ull << (lo % 64)))) {
				ret = why_set(why, why_len, "node %u: steps %u and %u touch the same bytes and no "
					      "dependency orders them", me, lo, hi);
				break;
			}
		}
		/* Scratch is read only after steps it depends on wrote every
		 * byte of it: the writes before it, in the order of their
		 * offsets, leave no gap. */
		if (ret || !a->read || a->buf != SCHED_BUF_SCRATCH || a->end == a->off)
			continue;
		uint64_t covered = a->off;
		const uint64_t *ra = reach + (size_t)a->step * words;

		for (size_t j = 0; j < na && covered < a->end; j++) {
			const struct access *w = &acc[j];

			if (w->buf != a->buf || w->index != a->index || !w->write || w->off > covered)
				continue;
			if (!(ra[w->step / 64] & (1ull << (w->step % 64))))
				continue;
			if (w->end > covered)
				covered = w->end;
		}
		if (covered < a->end)
			ret = why_set(why, why_len, "node %u step %u: reads scratch %u at %llu before a step it "
				      "depends on wrote it", me, a->step, a->index, (unsigned long long)covered);
	}
out:
	free(reach);
	free(acc);
	return ret;
}

/* The global step graph (dependencies and messages) has no cycle: Kahn's
 * algorithm reaches every step. */
static int check_cycles(const struct sched *s, const struct mindex *mi, char *why, size_t why_len)
{
	size_t total = 0, done = 0, head = 0, tail = 0;
	uint32_t *base = malloc(((size_t)s->nodes + 1) * sizeof(*base));
	uint32_t *indeg, *queue;
	int ret = 0;

	if (!base)
		return -ENOMEM;
	for (uint32_t i = 0; i < s->nodes; i++) {
		base[i] = (uint32_t)total;
		total += s->node[i].nsteps;
	}
	base[s->nodes] = (uint32_t)total;
	indeg = calloc(total + 1, sizeof(*indeg));
	queue = malloc((total + 1) * sizeof(*queue));
	if (!indeg || !queue) {
		ret = -ENOMEM;
		goto out;
	}
	/* In-degrees: dependencies, plus one per message a step takes. */
	for (uint32_t i = 0; i < s->nodes; i++)
		for (uint32_t k = 0; k < s->node[i].nsteps; k++) {
			const struct sched_step *st = &s->node[i].steps[k];

			indeg[base[i] + k] = st->ndep + (is_recv(st->kind) || st->kind == SCHED_FORWARD);
		}
	for (size_t g = 0; g < total; g++)
		if (!indeg[g])
			queue[tail++] = (uint32_t)g;
	/* A step's dependants within its node: found by scanning later steps,
	 * which is quadratic only in what the tests build; the executor keeps
	 * its own lists. */
	while (head < tail) {
		uint32_t g = queue[head++], i = 0, k;

		while (base[i + 1] <= g)
			i++;
		k = g - base[i];
		done++;
		const struct sched_node *n = &s->node[i];
		const struct sched_step *st = &n->steps[k];

		for (uint32_t l = k + 1; l < n->nsteps; l++)
			for (uint32_t d = 0; d < n->steps[l].ndep; d++)
				if (n->deps[n->steps[l].dep + d] == k && !--indeg[base[i] + l])
					queue[tail++] = base[i] + l;
		if (st->kind == SCHED_SEND || st->kind == SCHED_FORWARD) {
			const struct mkey *m = mfind(mi->in, mi->nin, i, st->peer, st->msg);

			if (m && !--indeg[base[m->node] + m->step])
				queue[tail++] = base[m->node] + m->step;
		}
	}
	if (done != total)
		ret = why_set(why, why_len, "%zu steps wait for each other in a cycle", total - done);
out:
	free(base);
	free(indeg);
	free(queue);
	return ret;
}

/* The SEND a message comes from: out itself, or for a FORWARD the SEND of
 * the message it passes on, followed back.  NULL if there is none. */
static const struct mkey *msg_origin(const struct sched *s, const struct mindex *mi, const struct mkey *out)
{
	for (size_t hops = 0; out && hops <= mi->nout; hops++) {
		const struct sched_step *st = &s->node[out->node].steps[out->step];

		if (st->kind == SCHED_SEND)
			return out;
		out = mfind(mi->out, mi->nout, st->from, out->node, st->from_msg);
	}
	return NULL;
}

int sched_check(const struct sched *s, char *why, size_t why_len)
{
	struct mindex mi;
	int ret;

	if (!s->nodes || !s->node)
		return why_set(why, why_len, "no nodes");
	for (uint32_t i = 0; i < s->nodes; i++)
		if ((ret = check_node(s, i, why, why_len)) || (ret = check_races(&s->node[i], i, why, why_len)))
			return ret;
	if ((ret = index_messages(s, &mi)))
		return ret;
	for (size_t m = 0; m < mi.nout && !ret; m++)
		if (m + 1 < mi.nout && !mkey_cmp(&mi.out[m], &mi.out[m + 1]))
			ret = why_set(why, why_len, "message %u from node %u to node %u sent twice", mi.out[m].msg,
				      mi.out[m].src, mi.out[m].dst);
	for (size_t m = 0; m < mi.nin && !ret; m++) {
		const struct mkey *in = &mi.in[m], *out;
		const struct sched_step *rs = &s->node[in->node].steps[in->step], *ss;
		const struct sched_node *sn, *rn = &s->node[in->node];

		if (m + 1 < mi.nin && !mkey_cmp(in, &mi.in[m + 1])) {
			ret = why_set(why, why_len, "message %u from node %u to node %u taken twice", in->msg,
				      in->src, in->dst);
			break;
		}
		out = mfind(mi.out, mi.nout, in->src, in->dst, in->msg);
		if (!out) {
			ret = why_set(why, why_len, "node %u step %u waits for message %u from node %u, never sent",
				      in->node, in->step, in->msg, in->src);
			break;
		}
		if (!(out = msg_origin(s, &mi, out))) {
			ret = why_set(why, why_len, "message %u from node %u to node %u: forwarded from nowhere",
				      in->msg, in->src, in->dst);
			break;
		}
		if (rs->kind == SCHED_FORWARD)
			continue;
		sn = &s->node[out->node];
		ss = &sn->steps[out->step];
		if (ss->nref != rs->nref) {
			ret = why_set(why, why_len, "message %u from node %u to node %u: %u parts sent, %u taken",
				      in->msg, in->src, in->dst, ss->nref, rs->nref);
			break;
		}
		/* Fixed lengths on both sides must agree (a sized part's length
		 * is known only when it runs). */
		for (uint32_t p = 0; p < ss->nref && !ret; p++) {
			const struct sched_seg *a = &sn->segs[sn->refs[ss->ref + p]];
			const struct sched_seg *b = &rn->segs[rn->refs[rs->ref + p]];

			if (!(a->flags & SCHED_SEG_SIZED) && !(b->flags & SCHED_SEG_SIZED) && a->len != b->len)
				ret = why_set(why, why_len, "message %u from node %u to node %u part %u: %llu bytes "
					      "sent into %llu", in->msg, in->src, in->dst, p,
					      (unsigned long long)a->len, (unsigned long long)b->len);
		}
	}
	for (size_t m = 0; m < mi.nout && !ret; m++)
		if (!mfind(mi.in, mi.nin, mi.out[m].src, mi.out[m].dst, mi.out[m].msg))
			ret = why_set(why, why_len, "message %u from node %u to node %u never taken", mi.out[m].msg,
				      mi.out[m].src, mi.out[m].dst);
	if (!ret)
		ret = check_cycles(s, &mi, why, why_len);
	free(mi.out);
	free(mi.in);
	return ret;
}

/* ---- the simulator ---- */

/* A message in flight: its parts' bytes, one after the other. */
struct simmsg {
	uint8_t *data;
	uint64_t *part_len;
	uint32_t parts;
	int sent;
};

struct simnode {
	uint8_t **scratch;              /* [nscratch] */
	uint64_t *scratch_got;          /* a sized buffer's length once received */
	uint8_t **written;              /* [nscratch]: a byte per scratch byte, 1 once written */
	uint32_t *waiting;              /* [nsteps]: dependencies not yet done, plus 1 for a message */
	uint32_t **dependants;          /* [nsteps]: the later steps that list it */
	uint32_t *ndependants;
	uint32_t sends, recvs;
	uint64_t bytes_sent;
};

struct sim {
	const struct sched *s;
	const struct sched_mem *mem;
	struct mindex mi;
	struct simmsg *msgs;            /* [mi.nout], in mi.out's order */
	struct simnode *nodes;
	uint64_t *ready;                /* node << 32 | step */
	size_t nready;
	uint32_t *writes;
	uint64_t *writes_base;          /* [node * ... ]: where a node's slots start in writes */
	char *why;
	size_t why_len;
};

static uint64_t rnd_next(uint64_t *x)
{
	/* xorshift64*: enough to shuffle the order the steps run in */
	*x ^= *x >> 12;
	*x ^= *x << 25;
	*x ^= *x >> 27;
	return *x * 0x2545F4914F6CDD1Dull;
}

/* The bytes of a segment in the simulator's memory, and its length; NULL
 * (with why) if the segment lies beyond its buffer. */
static uint8_t *sim_seg(struct sim *m, uint32_t node, const struct sched_seg *g, uint64_t *len_p)
{
	const struct sched_mem *mem = &m->mem[node];
	struct simnode *sn = &m->nodes[node];
	uint64_t buflen;
	uint8_t *base;

	switch (g->buf) {
	case SCHED_BUF_SEND:
		base = mem->send[g->index];
		buflen = mem->send_len[g->index];
		break;
	case SCHED_BUF_RECV:
		base = mem->recv[g->index];
		buflen = mem->recv_len[g->index];
		break;
	default:
		base = sn->scratch[g->index];
		buflen = (g->flags & SCHED_SEG_SIZED) ? sn->scratch_got[g->index] : m->s->node[node].scratch_len[g->index];
		break;
	}
	if (g->flags & SCHED_SEG_SIZED) {
		*len_p = buflen;
		return base;
	}
	if (g->off > buflen || g->len > buflen - g->off) {
		why_set(m->why, m->why_len, "node %u: a segment of %llu bytes at %llu beyond its buffer of %llu",
			node, (unsigned long long)g->len, (unsigned long long)g->off, (unsigned long long)buflen);
		return NULL;
	}
	*len_p = g->len;
	return base ? base + g->off : (uint8_t *)"";
}

/* Reading scratch bytes nobody wrote is a planner's error. */
static int sim_read_ok(struct sim *m, uint32_t node, const struct sched_seg *g, uint64_t len)
{
	const uint8_t *w;

	if (g->buf != SCHED_BUF_SCRATCH)
		return 0;
	w = m->nodes[node].written[g->index];
	if ((g->flags & SCHED_SEG_SIZED) && !w)
		return why_set(m->why, m->why_len, "node %u: sized scratch %u read before received", node, g->index);
	for (uint64_t i = 0; i < len; i++)
		if (!w || !w[g->off + i])
			return why_set(m->why, m->why_len, "node %u: scratch %u read at %llu before written", node,
				       g->index, (unsigned long long)(g->off + i));
	return 0;
}

static void sim_wrote(struct sim *m, uint32_t node, const struct sched_seg *g, uint64_t len)
{
	if (g->buf == SCHED_BUF_SCRATCH && m->nodes[node].written[g->index])
		memset(m->nodes[node].written[g->index] + g->off, 1, len);
	if (g->buf == SCHED_BUF_RECV && m->writes) {
		uint32_t *w = m->writes + m->writes_base[node];

		for (uint32_t slot = 0; slot < g->index; slot++)
			w += m->mem[node].recv_len[slot];
		for (uint64_t i = 0; i < len; i++)
			w[g->off + i]++;
	}
}

static void sim_ready(struct sim *m, uint32_t node, uint32_t step)
{
	m->ready[m->nready++] = (uint64_t)node << 32 | step;
}

/* A message m's index in msgs (mi.out's order). */
static struct simmsg *sim_msg(struct sim *m, uint32_t src, uint32_t dst, uint32_t msg)
{
	const struct mkey *k = mfind(m->mi.out, m->mi.nout, src, dst, msg);

	return k ? &m->msgs[k - m->mi.out] : NULL;
}

/* The message is sent: the step that takes it may become ready. */
static void sim_post(struct sim *m, uint32_t src, uint32_t dst, uint32_t msg)
{
	const struct mkey *in = mfind(m->mi.in, m->mi.nin, src, dst, msg);

	if (in && !--m->nodes[in->node].waiting[in->step])
		sim_ready(m, in->node, in->step);
}

static int sim_step(struct sim *m, uint32_t node, uint32_t k)
{
	const struct sched_node *n = &m->s->node[node];
	const struct sched_step *st = &n->steps[k];
	struct simnode *sn = &m->nodes[node];
	struct simmsg *msg, *in;
	uint64_t len, off, total;
	uint8_t *p, *q;

	switch (st->kind) {
	case SCHED_SEND:
		msg = sim_msg(m, node, st->peer, st->msg);
		total = 0;
		msg->part_len = calloc(st->nref + 1, sizeof(*msg->part_len));
		if (!msg->part_len)
			return -ENOMEM;
		for (uint32_t r = 0; r < st->nref; r++) {
			const struct sched_seg *g = &n->segs[n->refs[st->ref + r]];

			if (!sim_seg(m, node, g, &len))
				return -EINVAL;
			msg->part_len[r] = len;
			total += len;
		}
		msg->data = malloc(total + 1);
		if (!msg->data)
			return -ENOMEM;
		off = 0;
		for (uint32_t r = 0; r < st->nref; r++) {
			const struct sched_seg *g = &n->segs[n->refs[st->ref + r]];

			p = sim_seg(m, node, g, &len);
			if (sim_read_ok(m, node, g, len))
				return -EINVAL;
			memcpy(msg->data + off, p, len);
			off += len;
		}
		msg->parts = st->nref;
		msg->sent = 1;
		sn->sends++;
		sn->bytes_sent += total;
		sim_post(m, node, st->peer, st->msg);
		return 0;
	case SCHED_FORWARD:
		in = sim_msg(m, st->from, node, st->from_msg);
		msg = sim_msg(m, node, st->peer, st->msg);
		*msg = *in;             /* passed on as it is: the bytes change owner */
		memset(in, 0, sizeof(*in));
		in->sent = 1;
		total = 0;
		for (uint32_t r = 0; r < msg->parts; r++)
			total += msg->part_len[r];
		sn->sends++;
		sn->recvs++;
		sn->bytes_sent += total;
		sim_post(m, node, st->peer, st->msg);
		return 0;
	case SCHED_RECV:
	case SCHED_RECV_REDUCE:
		in = sim_msg(m, st->peer, node, st->msg);
		if (in->parts != st->nref)
			return why_set(m->why, m->why_len, "node %u step %u: %u parts came for %u segments", node, k,
				       in->parts, st->nref);
		off = 0;
		for (uint32_t r = 0; r < st->nref; r++) {
			const struct sched_seg *g = &n->segs[n->refs[st->ref + r]];
			uint64_t plen = in->part_len[r];

			if (g->flags & SCHED_SEG_SIZED) {
				if (g->len && plen > g->len)
					return why_set(m->why, m->why_len, "node %u step %u part %u: %llu bytes came "
						       "for at most %llu", node, k, r, (unsigned long long)plen,
						       (unsigned long long)g->len);
				free(sn->scratch[g->index]);
				sn->scratch[g->index] = malloc(plen + 1);
				free(sn->written[g->index]);
				sn->written[g->index] = calloc(plen + 1, 1);
				if (!sn->scratch[g->index] || !sn->written[g->index])
					return -ENOMEM;
				sn->scratch_got[g->index] = plen;
			}
			if (!(p = sim_seg(m, node, g, &len)))
				return -EINVAL;
			if (len != plen)
				return why_set(m->why, m->why_len, "node %u step %u part %u: %llu bytes came for %llu",
					       node, k, r, (unsigned long long)plen, (unsigned long long)len);
			if (st->kind == SCHED_RECV) {
				memcpy(p, in->data + off, len);
			} else {
				if (sim_read_ok(m, node, g, len))
					return -EINVAL;
				reduce_apply(st->type, st->op, p, in->data + off, len / coll_type_size(st->type));
			}
			sim_wrote(m, node, g, len);
			off += len;
		}
		free(in->data);
		free(in->part_len);
		in->data = NULL;
		in->part_len = NULL;
		sn->recvs++;
		return 0;
	case SCHED_COPY:
	case SCHED_REDUCE: {
		const struct sched_seg *d = &n->segs[n->refs[st->ref]], *s = &n->segs[n->refs[st->ref + 1]];

		if (!(p = sim_seg(m, node, d, &len)) || !(q = sim_seg(m, node, s, &len)))
			return -EINVAL;
		if (sim_read_ok(m, node, s, len) || (st->kind == SCHED_REDUCE && sim_read_ok(m, node, d, len)))
			return -EINVAL;
		if (st->kind == SCHED_COPY)
			memmove(p, q, len);
		else
			reduce_apply(st->type, st->op, p, q, len / coll_type_size(st->type));
		sim_wrote(m, node, d, len);
		return 0;
	}
	}
	return -EINVAL;
}

static void sim_free(struct sim *m)
{
	for (size_t i = 0; m->msgs && i < m->mi.nout; i++) {
		free(m->msgs[i].data);
		free(m->msgs[i].part_len);
	}
	for (uint32_t i = 0; m->nodes && i < m->s->nodes; i++) {
		struct simnode *sn = &m->nodes[i];

		for (uint32_t b = 0; sn->scratch && b < m->s->node[i].nscratch; b++) {
			free(sn->scratch[b]);
			free(sn->written[b]);
		}
		for (uint32_t k = 0; sn->dependants && k < m->s->node[i].nsteps; k++)
			free(sn->dependants[k]);
		free(sn->scratch);
		free(sn->written);
		free(sn->scratch_got);
		free(sn->waiting);
		free(sn->dependants);
		free(sn->ndependants);
	}
	free(m->nodes);
	free(m->msgs);
	free(m->ready);
	free(m->writes_base);
	free(m->mi.out);
	free(m->mi.in);
}

static int sim_setup(struct sim *m)
{
	const struct sched *s = m->s;
	size_t total = 0;
	uint64_t wbase = 0;

	m->msgs = calloc(m->mi.nout + 1, sizeof(*m->msgs));
	m->nodes = calloc(s->nodes, sizeof(*m->nodes));
	m->writes_base = calloc(s->nodes, sizeof(*m->writes_base));
	if (!m->msgs || !m->nodes || !m->writes_base)
		return -ENOMEM;
	for (uint32_t i = 0; i < s->nodes; i++) {
		const struct sched_node *n = &s->node[i];
		struct simnode *sn = &m->nodes[i];

		m->writes_base[i] = wbase;
		for (uint32_t slot = 0; slot < n->nslots; slot++)
			wbase += m->mem[i].recv_len[slot];
		total += n->nsteps;
		sn->scratch = calloc(n->nscratch + 1, sizeof(*sn->scratch));
		sn->written = calloc(n->nscratch + 1, sizeof(*sn->written));
		sn->scratch_got = calloc(n->nscratch + 1, sizeof(*sn->scratch_got));
		sn->waiting = calloc(n->nsteps + 1, sizeof(*sn->waiting));
		sn->dependants = calloc(n->nsteps + 1, sizeof(*sn->dependants));
		sn->ndependants = calloc(n->nsteps + 1, sizeof(*sn->ndependants));
		if (!sn->scratch || !sn->written || !sn->scratch_got || !sn->waiting || !sn->dependants ||
		    !sn->ndependants)
			return -ENOMEM;
		for (uint32_t b = 0; b < n->nscratch; b++) {
			/* Filled with a pattern, so that reading what nobody
			 * wrote would show even without the written map. */
			sn->scratch[b] = malloc(n->scratch_len[b] + 1);
			if (!sn->scratch[b])
				return -ENOMEM;
			/* (none for a sized buffer until its part comes) */
			if (n->scratch_len[b] && !(sn->written[b] = calloc(n->scratch_len[b], 1)))
				return -ENOMEM;
			memset(sn->scratch[b], 0xa5, n->scratch_len[b]);
		}
		for (uint32_t k = 0; k < n->nsteps; k++) {
			const struct sched_step *st = &n->steps[k];

			for (uint32_t d = 0; d < st->ndep; d++) {
				uint32_t p = n->deps[st->dep + d];
				uint32_t *na = reallocarray(sn->dependants[p], sn->ndependants[p] + 1, sizeof(*na));

				if (!na)
					return -ENOMEM;
				sn->dependants[p] = na;
				na[sn->ndependants[p]++] = k;
			}
			sn->waiting[k] = st->ndep + (is_recv(st->kind) || st->kind == SCHED_FORWARD);
		}
	}
	m->ready = malloc((total + 1) * sizeof(*m->ready));
	if (!m->ready)
		return -ENOMEM;
	for (uint32_t i = 0; i < s->nodes; i++)
		for (uint32_t k = 0; k < s->node[i].nsteps; k++)
			if (!m->nodes[i].waiting[k])
				sim_ready(m, i, k);
	return 0;
}

int sched_run(const struct sched *s, const struct sched_mem *mem, uint64_t seed, uint32_t *writes,
	      struct sched_run_stats *st, char *why, size_t why_len)
{
	struct sim m = { .s = s, .mem = mem, .writes = writes, .why = why, .why_len = why_len };
	uint64_t rnd = seed * 2 + 1, total = 0, ran = 0;
	int ret;

	memset(st, 0, sizeof(*st));
	if ((ret = sched_check(s, why, why_len)))
		return ret;
	if ((ret = index_messages(s, &m.mi)) || (ret = sim_setup(&m)))
		goto out;
	for (uint32_t i = 0; i < s->nodes; i++)
		total += s->node[i].nsteps;
	while (m.nready) {
		size_t pick = rnd_next(&rnd) % m.nready;
		uint64_t g = m.ready[pick];
		uint32_t node = (uint32_t)(g >> 32), k = (uint32_t)g;
		struct simnode *sn = &m.nodes[node];

		m.ready[pick] = m.ready[--m.nready];
		if ((ret = sim_step(&m, node, k)))
			goto out;
		ran++;
		for (uint32_t d = 0; d < sn->ndependants[k]; d++)
			if (!--sn->waiting[sn->dependants[k][d]])
				sim_ready(&m, node, sn->dependants[k][d]);
	}
	if (ran != total) {
		ret = why_set(why, why_len, "%llu of %llu steps never became ready", (unsigned long long)(total - ran),
			      (unsigned long long)total);
		goto out;
	}
	st->steps = ran;
	st->messages = m.mi.nout;
	for (uint32_t i = 0; i < s->nodes; i++) {
		struct simnode *sn = &m.nodes[i];

		st->bytes_sent += sn->bytes_sent;
		if (sn->bytes_sent > st->bytes_sent_max)
			st->bytes_sent_max = sn->bytes_sent;
		if (sn->sends > st->sends_max)
			st->sends_max = sn->sends;
		if (sn->recvs > st->recvs_max)
			st->recvs_max = sn->recvs;
	}
out:
	sim_free(&m);
	return ret;
}
