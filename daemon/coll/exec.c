/* daemon/coll/exec.c - see exec.h.
 *
 * Ownership: struct coll_exec owns the per-step tables, the inbox (one
 * entry per message the schedule takes, with the stream kept while it
 * arrives), the outbox (streams being sent, owned until their last piece is
 * taken), a SEND's stream while it is copied in slices (send_buf) and the
 * scratch buffers; coll_exec_free frees them all.  A FORWARD moves an inbox
 * stream to the outbox (ownership moves with it).  A template (struct
 * coll_exec_tmpl) belongs to its caller (coll.c: the plan it was built
 * for), must not outlive the schedule node it was built from, and is only
 * read: an executor copies its tables and keeps no pointer to it.
 */
#include "exec.h"

#include "../plan/reduce.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

/* A message this node takes. */
struct inmsg {
	uint32_t from, msg;
	uint32_t step;          /* the RECV, RECV_REDUCE or FORWARD that takes it */
	uint8_t *buf;           /* the stream, total bytes, while it arrives and waits;
				 * placed: its head only (hlen bytes) */
	uint64_t total, got;
	uint64_t hlen;          /* placed: the head's bytes */
	uint64_t seg_pos;       /* placed: where segment seg starts in the stream, */
	uint32_t seg;           /* the one that takes the next byte (pieces come in order) */
	int taken;              /* its step ran: no more pieces */
	int placed;             /* its parts go straight to their places (deliver_placed) */
};

/* A stream being sent: buf whole, or (st set) buf its head (hlen bytes)
 * and the rest st's segments, all in send buffers, read as pieces go. */
struct outmsg {
	uint32_t peer, msg, order;
	uint64_t seq;           /* ties between equal order keys: first ready first */
	uint8_t *buf;
	uint64_t total, sent;
	const struct sched_step *st;
	uint64_t hlen;
	uint64_t seg_pos;       /* st: where segment seg starts in the stream, the */
	uint32_t seg;           /* one that holds byte `sent` (or past it: all sent) */
};

struct coll_exec {
	const struct sched_node *n;
	uint64_t tables_bytes;          /* tables and iov (coll_exec_tables_bytes) */
	const struct sched_mem *mem;
	struct coll_exec_cfg cfg;
	const struct coll_exec_ops *ops;
	void *ctx;

	uint32_t *waiting;              /* [nsteps]: dependencies not done, + 1 for a message not complete */
	uint32_t *dep_first, *dep_list; /* dependants of step k: dep_list[dep_first[k] .. dep_first[k + 1]) */
	uint8_t *done;                  /* [nsteps] */
	uint32_t *ready;                /* steps that may run, a stack */
	uint32_t nready, ndone;

	struct inmsg *in;               /* sorted by (from, msg) */
	uint32_t nin;
	uint32_t *in_of_step;           /* [nsteps]: its inbox entry, or UINT32_MAX */

	struct outmsg *out;
	uint32_t nout, cap_out;
	uint64_t out_seq;

	uint8_t **scratch;              /* [nscratch] */
	uint64_t *scratch_len;          /* a sized one's length once it came */
	uint32_t *scratch_refs;         /* steps still to run that name it: freed at 0 */

	uint8_t *arena;                 /* the fixed scratch buffers, when small (EXEC_ARENA_MAX) */
	void *tables;                   /* one allocation for the arrays above (but out) */
	uint8_t *bumped;                /* [nscratch]: a sized buffer lives in a bump chunk */
	struct bump *bump;              /* small sized buffers' chunks, newest first */
	uint64_t mem_now, mem_peak;
	int send_in_place;              /* no step writes a send buffer: SENDs from them are not copied */
	int place_ok;                   /* no send buffer overlaps a receive buffer: RECVs may be placed */
	struct iovec *iov;              /* a piece's parts: the head and the most segments a SEND names */
	uint32_t part_step;             /* a COPY, REDUCE, SEND or RECV done in part (the budget ran out), or UINT32_MAX */
	uint64_t part_off;              /* ... its bytes done so far */
	uint8_t *send_buf;              /* ... a SEND's stream being copied (run_send), owned here */
	uint64_t send_total;            /* ... and its length */
	int failed;
	char err[200];
};

/* What every run of a schedule node starts from (coll_exec_tmpl_new). */
struct coll_exec_tmpl {
	const struct sched_node *n;
	size_t bytes;                   /* of tables */
	uint32_t nin, most;             /* messages taken; the most segments a SEND names */
	int send_in_place;
	_Alignas(8) uint8_t tables[];   /* struct coll_exec's tables, as a run starts */
};

static int fail(struct coll_exec *x, int ret, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(struct coll_exec *x, int ret, const char *fmt, ...)
{
	va_list ap;

	if (x->failed)
		return x->failed;
	va_start(ap, fmt);
	vsnprintf(x->err, sizeof(x->err), fmt, ap);
	va_end(ap);
	x->failed = ret;
	return ret;
}

/* Counts bytes against mem_max; -ENOMEM (failing) beyond it. */
static int mem_take(struct coll_exec *x, uint64_t bytes)
{
	int ret;

	if (bytes > x->cfg.mem_max || x->mem_now > x->cfg.mem_max - bytes)
		return fail(x, -ENOMEM, "the operation needs more than its %llu bytes of memory",
			    (unsigned long long)x->cfg.mem_max);
	if (x->ops->mem_take && (ret = x->ops->mem_take(x->ctx, bytes)) < 0)
		return fail(x, ret, "the operation needs %llu bytes more of daemon memory than its user may "
			    "have (limits.user_memory_bytes, limits.memory_bytes)", (unsigned long long)bytes);
	x->mem_now += bytes;
	if (x->mem_now > x->mem_peak)
		x->mem_peak = x->mem_now;
	return 0;
}

static void mem_give(struct coll_exec *x, uint64_t bytes)
{
	x->mem_now -= bytes;
	if (x->ops->mem_give && bytes)
		x->ops->mem_give(x->ctx, bytes);
}

static int in_cmp(const void *a, const void *b)
{
	const struct inmsg *p = a, *q = b;

	if (p->from != q->from)
		return p->from < q->from ? -1 : 1;
	return p->msg < q->msg ? -1 : p->msg > q->msg;
}

/* Where segment g lives, and its length (a sized one: what came). */
static uint8_t *seg_ptr(struct coll_exec *x, const struct sched_seg *g, uint64_t *len_p)
{
	uint8_t *base;

	switch (g->buf) {
	case SCHED_BUF_SEND:
	case SCHED_BUF_RECV:
		/* (a rank may pass no buffer where its counts are zero) */
		base = g->buf == SCHED_BUF_SEND ? x->mem->send[g->index] : x->mem->recv[g->index];
		*len_p = g->len;
		return base && g->len ? base + g->off : base;
	default:
		if (g->flags & SCHED_SEG_SIZED) {
			*len_p = x->scratch_len[g->index];
			return x->scratch[g->index];
		}
		*len_p = g->len;
		return x->scratch[g->index] ? x->scratch[g->index] + g->off : NULL;
	}
}

static void make_ready(struct coll_exec *x, uint32_t k)
{
	x->ready[x->nready++] = k;
}

/* Sized scratch buffers (blocks passing through, whose size came with them)
 * of up to BUMP_PART bytes are cut from chunks that go when the operation
 * ends, not malloc'ed and freed one by one: an 8-byte grid3d all-to-all of 8
 * nodes x 2 passes a few dozen of them through each node. */
#define BUMP_PART 1024u
#define BUMP_CHUNK (16u * 1024)

struct bump {
	struct bump *next;
	size_t used, cap;
	uint8_t data[];
};

static uint8_t *bump_alloc(struct coll_exec *x, uint64_t len)
{
	struct bump *c = x->bump;

	len = (len + 7) & ~7ull;
	if (!c || c->cap - c->used < len) {
		if (!(c = malloc(sizeof(*c) + BUMP_CHUNK)))
			return NULL;
		c->next = x->bump;
		c->used = 0;
		c->cap = BUMP_CHUNK;
		x->bump = c;
	}
	c->used += len;
	return c->data + c->used - len;
}

/* Fixed scratch buffers up to this many bytes in all share one allocation,
 * kept until the operation ends: a small operation's many buffers (an 8-byte
 * grid3d all-to-all has dozens) cost a malloc and a free each otherwise. */
#define EXEC_ARENA_MAX (64u * 1024)

static void scratch_release(struct coll_exec *x, uint32_t b)
{
	if (--x->scratch_refs[b])
		return;
	if (x->arena && x->n->scratch_len[b]) {
		x->scratch[b] = NULL;   /* (the arena goes at the end) */
		return;
	}
	mem_give(x, (x->n->scratch_len[b] ? x->n->scratch_len[b] : x->scratch_len[b]));
	if (!x->bumped[b])
		free(x->scratch[b]);
	x->bumped[b] = 0;
	x->scratch[b] = NULL;
	x->scratch_len[b] = 0;
}

static void step_done(struct coll_exec *x, uint32_t k)
{
	const struct sched_step *st = &x->n->steps[k];

	/* Scratch no later step names is given back now, not at the end. */
	for (uint32_t r = 0; r < st->nref; r++) {
		const struct sched_seg *g = &x->n->segs[x->n->refs[st->ref + r]];

		if (g->buf == SCHED_BUF_SCRATCH)
			scratch_release(x, g->index);
	}
	x->done[k] = 1;
	x->ndone++;
	for (uint32_t i = x->dep_first[k]; i < x->dep_first[k + 1]; i++)
		if (!--x->waiting[x->dep_list[i]])
			make_ready(x, x->dep_list[i]);
}

static int out_add(struct coll_exec *x, uint32_t peer, uint32_t msg, uint32_t order, uint8_t *buf, uint64_t total,
		   const struct sched_step *st, uint64_t hlen)
{
	if (x->nout == x->cap_out) {
		uint32_t ncap = x->cap_out ? x->cap_out * 2 : 8;
		struct outmsg *o = reallocarray(x->out, ncap, sizeof(*o));

		if (!o)
			return fail(x, -ENOMEM, "out of memory");
		x->out = o;
		x->cap_out = ncap;
	}
	x->out[x->nout++] = (struct outmsg){ peer, msg, order, x->out_seq++, buf, total, 0, st, hlen, hlen, 0 };
	return 0;
}

/* 1 if every segment of SEND st is in a send buffer, which no step
 * writes (x->send_in_place): its pieces may be read from there as they go. */
static int send_from_place(const struct coll_exec *x, const struct sched_step *st)
{
	if (!x->send_in_place || !x->place_ok)
		return 0;
	for (uint32_t r = 0; r < st->nref; r++)
		if (x->n->segs[x->n->refs[st->ref + r]].buf != SCHED_BUF_SEND)
			return 0;
	return 1;
}

/* Copies between step st's segments and the stream of its message (the
 * segments into the stream when to_stream, else the stream into the
 * segments, added for a RECV_REDUCE), the segments after the stream's head,
 * from stream byte x->part_off on, within *budget bytes (NULL: no limit) in
 * whole elements, which it lowers.  Returns 1 if the budget ran out first
 * (x->part_off says where to go on), else 0. */
static int copy_slices(struct coll_exec *x, const struct sched_step *st, uint8_t *stream, int to_stream,
		       uint64_t *budget)
{
	const struct sched_node *n = x->n;
	uint64_t es = st->kind == SCHED_RECV_REDUCE ? coll_type_size(st->type) : 1;
	uint64_t pos = wire_coll_head_bytes(st->nref);

	/* segment r is stream bytes [pos, pos + len) */
	for (uint32_t r = 0; r < st->nref; r++) {
		uint64_t len, off, m;
		uint8_t *p = seg_ptr(x, &n->segs[n->refs[st->ref + r]], &len);

		if (x->part_off >= pos + len) {
			pos += len;
			continue;
		}
		off = x->part_off - pos;
		m = len - off;
		if (budget && m > *budget) {
			m = *budget / es * es;
			if (!m)
				m = es;
		}
		if (to_stream)
			memcpy(stream + x->part_off, p + off, m);
		else if (st->kind == SCHED_RECV)
			memcpy(p + off, stream + x->part_off, m);
		else
			reduce_apply(st->type, st->op, p + off, stream + x->part_off, m / es);
		x->part_off += m;
		if (budget)
			*budget -= m < *budget ? m : *budget;
		if (off + m < len)
			return 1;
		pos += len;
		if (budget && !*budget && r + 1 < st->nref)
			return 1;
	}
	return 0;
}

/* SEND: the segments as one stream, into the outbox: its head, and the
 * segments copied behind it, or left in place (send_from_place).  A copy
 * goes within *budget bytes (NULL: no limit), which it lowers: hundreds of
 * megabytes must not hold the loop for one copy (review of issue 12,
 * finding 5).  x->part_off is where in the stream it goes on (0: not
 * begun), x->send_buf the stream meanwhile (owned here until the outbox
 * takes it).  Returns 0 (done), 1 (the budget ran out: it goes on at the
 * next call) or x->failed. */
static int run_send(struct coll_exec *x, const struct sched_step *st, uint64_t *budget)
{
	const struct sched_node *n = x->n;
	uint64_t hlen = wire_coll_head_bytes(st->nref), total = hlen, len;
	int in_place = send_from_place(x, st);
	uint8_t *buf;

	if (!x->part_off) {
		struct wire_coll_msg head = { .nparts = st->nref };

		for (uint32_t r = 0; r < st->nref; r++) {
			seg_ptr(x, &n->segs[n->refs[st->ref + r]], &len);
			total += len;
		}
		if (mem_take(x, in_place ? hlen : total))
			return x->failed;
		buf = malloc(in_place ? hlen : total);
		if (!buf) {
			mem_give(x, in_place ? hlen : total);
			return fail(x, -ENOMEM, "out of memory");
		}
		memcpy(buf, &head, sizeof(head));
		for (uint32_t r = 0; r < st->nref; r++) {
			uint64_t le;

			seg_ptr(x, &n->segs[n->refs[st->ref + r]], &len);
			le = htole64(len);
			memcpy(buf + sizeof(head) + 8 * (uint64_t)r, &le, 8);
		}
		if (in_place) {
			if (out_add(x, st->peer, st->msg, st->order, buf, total, st, hlen)) {
				free(buf);
				mem_give(x, hlen);
				return x->failed;
			}
			return 0;
		}
		x->send_buf = buf;
		x->send_total = total;
		x->part_off = hlen;
	}
	if (copy_slices(x, st, x->send_buf, 1, budget))
		return 1;
	buf = x->send_buf;
	total = x->send_total;
	x->send_buf = NULL;
	x->part_off = 0;
	if (out_add(x, st->peer, st->msg, st->order, buf, total, NULL, hlen)) {
		free(buf);
		mem_give(x, total);
		return x->failed;
	}
	return 0;
}

/* Moves the cursor (*seg starting at *pos) of a stream of st's segments to
 * the one that holds byte off of the stream (or past the last). */
static void seg_advance(struct coll_exec *x, const struct sched_step *st, uint32_t *seg, uint64_t *pos, uint64_t off)
{
	uint64_t len;

	while (*seg < st->nref) {
		seg_ptr(x, &x->n->segs[x->n->refs[st->ref + *seg]], &len);
		if (*pos + len > off)
			break;
		*pos += len;
		++*seg;
	}
}

/* The part of st's segments that holds byte off of their stream: its
 * address, with *m the bytes it holds from off on (at most n); the cursor
 * (*seg starting at *pos) moves to it.  NULL past the last segment.  A
 * piece of a message walks from its cursor, not from the first segment:
 * a message of many segments would cost their number per piece. */
static uint8_t *seg_at(struct coll_exec *x, const struct sched_step *st, uint32_t *seg, uint64_t *pos, uint64_t off,
		       uint64_t n, uint64_t *m)
{
	uint64_t len;
	uint8_t *p;

	seg_advance(x, st, seg, pos, off);
	if (*seg >= st->nref)
		return NULL;
	p = seg_ptr(x, &x->n->segs[x->n->refs[st->ref + *seg]], &len);
	*m = *pos + len - off < n ? *pos + len - off : n;
	return p + (off - *pos);
}

/* The bytes of o's stream at [off, off + n) as parts in x->iov; their
 * number. */
static int piece_parts(struct coll_exec *x, const struct outmsg *o, uint64_t off, uint64_t n)
{
	uint64_t pos = o->seg_pos, m;
	uint32_t seg = o->seg;
	uint8_t *p;
	int k = 0;

	if (!o->st) {
		x->iov[0] = (struct iovec){ o->buf + off, n };
		return 1;
	}
	if (off < o->hlen) {
		m = o->hlen - off < n ? o->hlen - off : n;
		x->iov[k++] = (struct iovec){ o->buf + off, m };
		off += m;
		n -= m;
	}
	while (n && (p = seg_at(x, o->st, &seg, &pos, off, n, &m))) {
		x->iov[k++] = (struct iovec){ p, m };
		off += m;
		n -= m;
	}
	return k;
}

/* RECV, RECV_REDUCE, checked once at its start: the head and the parts'
 * sizes against the step's segments (a sized scratch buffer is made now,
 * as long as its part).  0 or x->failed. */
static int recv_check(struct coll_exec *x, uint32_t k, const struct sched_step *st, struct inmsg *im)
{
	const struct sched_node *n = x->n;
	struct wire_coll_msg head;
	uint64_t off, sum = 0;

	memcpy(&head, im->buf, sizeof(head));
	if (head.reserved || head.nparts != st->nref || im->total < wire_coll_head_bytes(head.nparts))
		return fail(x, -EPROTO, "node %u sent message %u with %u parts, step %u takes %u", im->from, im->msg,
			    head.nparts, k, st->nref);
	off = wire_coll_head_bytes(head.nparts);
	for (uint32_t r = 0; r < st->nref; r++) {
		uint64_t plen;

		memcpy(&plen, im->buf + sizeof(head) + 8 * (uint64_t)r, 8);
		plen = le64toh(plen);
		if (plen > im->total - off - sum)
			return fail(x, -EPROTO, "node %u sent message %u with parts longer than it", im->from,
				    im->msg);
		sum += plen;
	}
	if (off + sum != im->total)
		return fail(x, -EPROTO, "node %u sent message %u of %llu bytes, its parts say %llu", im->from,
			    im->msg, (unsigned long long)im->total, (unsigned long long)(off + sum));
	for (uint32_t r = 0; r < st->nref; r++) {
		const struct sched_seg *g = &n->segs[n->refs[st->ref + r]];
		uint64_t plen, len;

		memcpy(&plen, im->buf + sizeof(head) + 8 * (uint64_t)r, 8);
		plen = le64toh(plen);
		if (g->flags & SCHED_SEG_SIZED) {
			if (g->len && plen > g->len)
				return fail(x, -EINVAL, "node %u sent %llu bytes for a block of at most %llu "
					    "(message %u part %u): the ranks' counts disagree", im->from,
					    (unsigned long long)plen, (unsigned long long)g->len, im->msg, r);
			if (mem_take(x, plen))
				return x->failed;
			mem_give(x, x->scratch_len[g->index]);
			if (!x->bumped[g->index])
				free(x->scratch[g->index]);
			x->scratch_len[g->index] = 0;   /* (given back: not again) */
			x->bumped[g->index] = plen <= BUMP_PART;
			x->scratch[g->index] = x->bumped[g->index] ? bump_alloc(x, plen ? plen : 1) : malloc(plen ? plen : 1);
			if (!x->scratch[g->index]) {
				mem_give(x, plen);
				return fail(x, -ENOMEM, "out of memory");
			}
			x->scratch_len[g->index] = plen;
		}
		(void)seg_ptr(x, g, &len);
		if (plen != len)
			/* the ranks disagree about a block's size */
			return fail(x, -EINVAL, "node %u sent %llu bytes for a block of %llu (message %u part %u): "
				    "the ranks' counts disagree", im->from, (unsigned long long)plen,
				    (unsigned long long)len, im->msg, r);
	}
	return 0;
}

/* RECV, RECV_REDUCE: the complete stream of im into the segments, within
 * *budget bytes (NULL: no limit), which it lowers: a message of hundreds
 * of megabytes kept whole must not hold the loop for one copy (review of
 * issue 12, finding 5).  x->part_off is where in the stream it goes on (0:
 * not begun; checked then).  Returns 0 (done), 1 (the budget ran out: it
 * goes on at the next call) or x->failed. */
static int run_recv(struct coll_exec *x, uint32_t k, const struct sched_step *st, struct inmsg *im,
		    uint64_t *budget)
{
	if (im->placed) {
		/* its parts are in place already, its head checked */
		free(im->buf);
		mem_give(x, im->hlen);
		im->buf = NULL;
		return 0;
	}
	if (!x->part_off) {
		if (recv_check(x, k, st, im))
			return x->failed;
		x->part_off = wire_coll_head_bytes(st->nref);
	}
	if (copy_slices(x, st, im->buf, 0, budget))
		return 1;
	x->part_off = 0;
	free(im->buf);
	mem_give(x, im->total);
	im->buf = NULL;
	return 0;
}

/* Runs step k within *budget bytes (NULL: no limit), which it lowers.
 * Returns 0 (done), 1 (a COPY, REDUCE, SEND not read in place or RECV of a
 * message kept whole, of which only a part fitted: it goes on from
 * x->part_off at the next call) or x->failed. */
static int run_step(struct coll_exec *x, uint32_t k, uint64_t *budget)
{
	const struct sched_node *n = x->n;
	const struct sched_step *st = &n->steps[k];
	struct inmsg *im = x->in_of_step[k] != UINT32_MAX ? &x->in[x->in_of_step[k]] : NULL;
	uint8_t *d, *s;
	uint64_t len;
	int ret = 0;

	switch (st->kind) {
	case SCHED_SEND:
		/* (sent in place: read as the pieces go, nothing to copy now;
		 * else copied in slices of the budget) */
		ret = run_send(x, st, budget);
		if (ret == 1)
			return 1;
		break;
	case SCHED_RECV:
	case SCHED_RECV_REDUCE:
		/* (placed: copied as it came; else in slices of the budget) */
		im->taken = 1;
		ret = run_recv(x, k, st, im, budget);
		if (ret == 1)
			return 1;
		break;
	case SCHED_FORWARD:
		/* the stream changes hands: inbox to outbox, no copy */
		im->taken = 1;
		ret = out_add(x, st->peer, st->msg, st->order, im->buf, im->total, NULL, 0);
		if (!ret)
			im->buf = NULL;
		break;
	case SCHED_COPY:
	case SCHED_REDUCE: {
		/* In slices of the budget where they do not overlap (a local
		 * block can be gigabytes: the loop must go on meanwhile). */
		uint64_t es = st->kind == SCHED_COPY ? 1 : coll_type_size(st->type), off = x->part_off, m;

		d = seg_ptr(x, &n->segs[n->refs[st->ref]], &len);
		s = seg_ptr(x, &n->segs[n->refs[st->ref + 1]], &len);
		if (!len)
			break;
		m = len - off;
		if (budget && m > *budget && (d + len <= s || s + len <= d)) {
			m = *budget / es * es;
			if (!m)
				m = es;
		}
		if (st->kind == SCHED_COPY)
			memmove(d + off, s + off, m);
		else
			reduce_apply(st->type, st->op, d + off, s + off, m / es);
		if (budget)
			*budget -= m < *budget ? m : *budget;
		if (off + m < len) {
			x->part_off = off + m;
			return 1;
		}
		x->part_off = 0;
		break;
	}
	default:
		ret = fail(x, -EINVAL, "step %u: kind %u", k, st->kind);
	}
	if (!ret)
		step_done(x, k);
	return ret;
}

/* Sends pieces while peers take them, lowest order key first. */
static int send_pieces(struct coll_exec *x)
{
	uint32_t *blocked = NULL;       /* peers that said -EAGAIN this round */
	uint32_t nblocked = 0;

	for (;;) {
		struct outmsg *best = NULL;

		for (uint32_t i = 0; i < x->nout; i++) {
			struct outmsg *o = &x->out[i];
			int skip = 0;

			for (uint32_t b = 0; b < nblocked; b++)
				skip |= blocked[b] == o->peer;
			if (!skip && (!best || o->order < best->order ||
				      (o->order == best->order && o->seq < best->seq)))
				best = o;
		}
		if (!best)
			break;
		uint64_t n = best->total - best->sent;
		struct wire_coll_piece h = { .job = x->cfg.job, .gen = x->cfg.gen, .op = x->cfg.op,
					     .msg = best->msg, .from = x->cfg.self,
					     .group = x->cfg.group, .offset = best->sent, .total = best->total };

		if (n > x->cfg.piece_max)
			n = x->cfg.piece_max;
		int ret = x->ops->send(x->ctx, best->peer, &h, x->iov, piece_parts(x, best, best->sent, n), (uint32_t)n);

		if (ret == -EAGAIN) {
			uint32_t *nb = reallocarray(blocked, nblocked + 1, sizeof(*nb));

			if (!nb) {
				free(blocked);
				return fail(x, -ENOMEM, "out of memory");
			}
			blocked = nb;
			blocked[nblocked++] = best->peer;
			continue;
		}
		if (ret) {
			free(blocked);
			return fail(x, ret, "sending to node %u: %s", best->peer, strerror(-ret));
		}
		best->sent += n;
		if (best->st)
			seg_advance(x, best->st, &best->seg, &best->seg_pos, best->sent);
		if (best->sent == best->total) {
			free(best->buf);
			mem_give(x, best->st ? best->hlen : best->total);
			*best = x->out[--x->nout];
		}
	}
	free(blocked);
	return 0;
}

int coll_exec_run_budget(struct coll_exec *x, uint64_t *budget)
{
	if (x->failed)
		return x->failed;
	while ((x->part_step != UINT32_MAX || x->nready) && (!budget || *budget)) {
		/* a step begun goes on first: its offset is its own, and steps
		 * made ready meanwhile (a piece came) wait their turn */
		uint32_t k = x->part_step != UINT32_MAX ? x->part_step : x->ready[--x->nready];
		int r = run_step(x, k, budget);

		x->part_step = r == 1 ? k : UINT32_MAX;
		if (r == 1)
			break;
		if (r)
			return x->failed;
	}
	if (send_pieces(x))
		return x->failed;
	return x->ndone == x->n->nsteps && !x->nout;
}

int coll_exec_run(struct coll_exec *x)
{
	return coll_exec_run_budget(x, NULL);
}

int coll_exec_busy(const struct coll_exec *x)
{
	return !x->failed && (x->nready || x->part_step != UINT32_MAX);
}

/* The stream bytes a RECV into receive buffers only (fixed lengths) takes
 * whole, or 0 if it takes another kind of step or segment: only such a
 * message may be placed. */
static uint64_t placeable_bytes(const struct coll_exec *x, const struct sched_step *st)
{
	uint64_t total = wire_coll_head_bytes(st->nref);

	if (st->kind != SCHED_RECV)
		return 0;
	for (uint32_t r = 0; r < st->nref; r++) {
		const struct sched_seg *g = &x->n->segs[x->n->refs[st->ref + r]];

		if (g->buf != SCHED_BUF_RECV)
			return 0;
		total += g->len;
	}
	return total;
}

/* A piece of a placed message: its head kept (and checked once whole: the
 * parts the step expects, of the lengths it expects), its parts written
 * where the step puts them. */
static int deliver_placed(struct coll_exec *x, struct inmsg *im, const uint8_t *data, uint64_t len)
{
	const struct sched_step *st = &x->n->steps[im->step];
	uint64_t off = im->got, slen, m;
	uint8_t *p;

	if (off < im->hlen) {
		m = im->hlen - off < len ? im->hlen - off : len;
		memcpy(im->buf + off, data, m);
		off += m;
		data += m;
		len -= m;
		if (off == im->hlen) {
			struct wire_coll_msg head;

			memcpy(&head, im->buf, sizeof(head));
			if (head.reserved || head.nparts != st->nref)
				return fail(x, -EPROTO, "node %u sent message %u with %u parts, step %u takes %u",
					    im->from, im->msg, head.nparts, im->step, st->nref);
			/* as run_recv checks a whole message: a head whose
			 * parts do not add up to it is malformed; parts of
			 * other sizes than the blocks, a disagreement */
			uint64_t sum = 0, rest = im->total - im->hlen, plen;
			uint32_t bad = UINT32_MAX;

			for (uint32_t r = 0; r < st->nref; r++) {
				memcpy(&plen, im->buf + sizeof(head) + 8 * (uint64_t)r, 8);
				plen = le64toh(plen);
				if (plen > rest - sum)
					return fail(x, -EPROTO, "node %u sent message %u with parts longer than it",
						    im->from, im->msg);
				sum += plen;
				seg_ptr(x, &x->n->segs[x->n->refs[st->ref + r]], &slen);
				if (plen != slen && bad == UINT32_MAX)
					bad = r;
			}
			if (sum != rest)
				return fail(x, -EPROTO, "node %u sent message %u of %llu bytes, its parts say %llu",
					    im->from, im->msg, (unsigned long long)im->total,
					    (unsigned long long)(im->hlen + sum));
			if (bad != UINT32_MAX) {
				memcpy(&plen, im->buf + sizeof(head) + 8 * (uint64_t)bad, 8);
				seg_ptr(x, &x->n->segs[x->n->refs[st->ref + bad]], &slen);
				return fail(x, -EINVAL, "node %u sent %llu bytes for a block of %llu (message %u "
					    "part %u): the ranks' counts disagree", im->from,
					    (unsigned long long)le64toh(plen), (unsigned long long)slen, im->msg, bad);
			}
		}
	}
	/* into the segments, from the one that takes the next byte */
	while (len && (p = seg_at(x, st, &im->seg, &im->seg_pos, off, len, &m))) {
		memcpy(p, data, m);
		off += m;
		data += m;
		len -= m;
	}
	return 0;
}

int coll_exec_deliver(struct coll_exec *x, const struct wire_coll_piece *hdr, const uint8_t *data, uint32_t len)
{
	struct inmsg key = { .from = hdr->from, .msg = hdr->msg }, *im;

	if (x->failed)
		return x->failed;
	if (!len)
		return fail(x, -EPROTO, "node %u sent an empty piece of message %u", hdr->from, hdr->msg);
	im = x->nin ? bsearch(&key, x->in, x->nin, sizeof(*x->in), in_cmp) : NULL;
	if (!im || im->taken)
		return fail(x, -EPROTO, "node %u sent message %u, which the schedule does not expect%s", hdr->from,
			    hdr->msg, im ? " again" : "");
	if (hdr->offset != im->got || (im->got && hdr->total != im->total) || len > hdr->total - hdr->offset ||
	    (im->got && im->got == im->total))
		return fail(x, -EPROTO, "node %u sent a piece at %llu of message %u, which is at %llu of %llu",
			    hdr->from, (unsigned long long)hdr->offset, hdr->msg, (unsigned long long)im->got,
			    (unsigned long long)im->total);
	if (!im->got) {
		if (hdr->total < sizeof(struct wire_coll_msg))
			return fail(x, -EPROTO, "node %u sent message %u of %llu bytes", hdr->from, hdr->msg,
				    (unsigned long long)hdr->total);
		/* Straight to its places if nothing else the step waits for
		 * could still read or write them, and it is the size the step
		 * expects (else kept whole: run_recv says what is wrong). */
		const struct sched_step *st = &x->n->steps[im->step];

		im->placed = x->place_ok && x->waiting[im->step] == 1 && placeable_bytes(x, st) == hdr->total;
		im->hlen = im->placed ? wire_coll_head_bytes(st->nref) : hdr->total;
		im->seg = 0;
		im->seg_pos = im->hlen;
		if (mem_take(x, im->hlen))
			return x->failed;
		im->buf = malloc(im->hlen);
		if (!im->buf) {
			mem_give(x, im->hlen);
			return fail(x, -ENOMEM, "out of memory");
		}
		im->total = hdr->total;
	}
	if (im->placed) {
		if (deliver_placed(x, im, data, len))
			return x->failed;
	} else if (len) {
		memcpy(im->buf + im->got, data, len);
	}
	im->got += len;
	if (im->got == im->total && !--x->waiting[im->step])
		make_ready(x, im->step);
	return 0;
}

const char *coll_exec_error(const struct coll_exec *x)
{
	return x->err;
}

uint64_t coll_exec_mem(const struct coll_exec *x)
{
	return x->mem_now;
}

uint64_t coll_exec_mem_peak(const struct coll_exec *x)
{
	return x->mem_peak;
}

uint64_t coll_exec_tables_bytes(const struct coll_exec *x)
{
	return x->tables_bytes;
}

void coll_exec_free(struct coll_exec *x)
{
	if (!x)
		return;
	mem_give(x, x->mem_now);
	for (uint32_t i = 0; i < x->nin; i++)
		free(x->in[i].buf);
	for (uint32_t i = 0; i < x->nout; i++)
		free(x->out[i].buf);
	free(x->send_buf);
	for (uint32_t b = 0; x->scratch && b < x->n->nscratch; b++)
		if ((!x->arena || !x->n->scratch_len[b]) && !x->bumped[b])
			free(x->scratch[b]);
	free(x->arena);
	while (x->bump) {
		struct bump *c = x->bump;

		x->bump = c->next;
		free(c);
	}
	free(x->tables);
	free(x->out);
	free(x->iov);
	free(x);
}

static int err_out(char *err, size_t err_len, int ret, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int err_out(char *err, size_t err_len, int ret, const char *fmt, ...)
{
	va_list ap;

	if (err && err_len) {
		va_start(ap, fmt);
		vsnprintf(err, err_len, fmt, ap);
		va_end(ap);
	}
	return ret;
}

/* The executor's tables of schedule node n, in one allocation of
 * tables_size(n) bytes (8-byte ones first): where each starts. */
static size_t tables_size(const struct sched_node *n)
{
	size_t ns = n->nsteps;
	size_t n8 = (ns + 1) * sizeof(struct inmsg) + (n->nscratch + 1) * (sizeof(uint8_t *) + sizeof(uint64_t));
	size_t n4 = (ns + 1) * 5 + 1 + (n->ndeps + 1) + (n->nscratch + 1);

	return n8 + n4 * 4 + ns + 1 + n->nscratch + 1;
}

/* ... and x's pointers into x->tables; returns the dependants' fill
 * counts (used while a template is built). */
static uint32_t *tables_at(struct coll_exec *x, const struct sched_node *n)
{
	uint32_t ns = n->nsteps, *fill;
	uint8_t *t = x->tables;

	x->in = (struct inmsg *)t;
	t += (ns + 1) * sizeof(*x->in);
	x->scratch = (uint8_t **)t;
	t += (n->nscratch + 1) * sizeof(*x->scratch);
	x->scratch_len = (uint64_t *)t;
	t += (n->nscratch + 1) * sizeof(*x->scratch_len);
	x->waiting = (uint32_t *)t;
	x->dep_first = x->waiting + ns + 1;
	x->ready = x->dep_first + ns + 2;
	x->in_of_step = x->ready + ns + 1;
	fill = x->in_of_step + ns + 1;
	x->dep_list = fill + ns + 1;
	x->scratch_refs = x->dep_list + n->ndeps + 1;
	x->done = (uint8_t *)(x->scratch_refs + n->nscratch + 1);
	x->bumped = x->done + ns + 1;
	return fill;
}

/* Fills x's tables (x->tables: tables_size(n) zeroed bytes) for schedule
 * node n: what every run of it starts from; *most: the most segments a
 * SEND names. */
static void tables_fill(struct coll_exec *x, const struct sched_node *n, uint32_t *most)
{
	uint32_t ns = n->nsteps, *fill = tables_at(x, n);

	/* Dependants, counted then filled (CSR); the messages taken. */
	for (uint32_t k = 0; k < ns; k++) {
		const struct sched_step *st = &n->steps[k];

		for (uint32_t d = 0; d < st->ndep; d++)
			x->dep_first[n->deps[st->dep + d] + 1]++;
		x->waiting[k] = st->ndep;
		x->in_of_step[k] = UINT32_MAX;
		for (uint32_t r = 0; r < st->nref; r++)
			if (n->segs[n->refs[st->ref + r]].buf == SCHED_BUF_SCRATCH)
				x->scratch_refs[n->segs[n->refs[st->ref + r]].index]++;
		if (st->kind == SCHED_RECV || st->kind == SCHED_RECV_REDUCE || st->kind == SCHED_FORWARD) {
			x->waiting[k]++;
			x->in[x->nin++] = (struct inmsg){
				.from = st->kind == SCHED_FORWARD ? st->from : st->peer,
				.msg = st->kind == SCHED_FORWARD ? st->from_msg : st->msg,
				.step = k,
			};
		}
	}
	/* Sends from the send buffers in place unless a step writes one (no
	 * planner's does: FERRY_IN_PLACE is staged above, sched.h). */
	x->send_in_place = 1;
	for (uint32_t k = 0; k < ns; k++) {
		const struct sched_step *st = &n->steps[k];
		int writes = st->kind == SCHED_RECV || st->kind == SCHED_RECV_REDUCE;

		if (st->kind == SCHED_SEND && st->nref > *most)
			*most = st->nref;
		for (uint32_t r = 0; r < st->nref; r++)
			if ((writes || ((st->kind == SCHED_COPY || st->kind == SCHED_REDUCE) && r == 0)) &&
			    n->segs[n->refs[st->ref + r]].buf == SCHED_BUF_SEND)
				x->send_in_place = 0;
	}
	for (uint32_t k = 0; k < ns; k++)
		x->dep_first[k + 1] += x->dep_first[k];
	for (uint32_t k = 0; k < ns; k++) {
		const struct sched_step *st = &n->steps[k];

		for (uint32_t d = 0; d < st->ndep; d++) {
			uint32_t p = n->deps[st->dep + d];

			x->dep_list[x->dep_first[p] + fill[p]++] = k;
		}
	}
	if (x->nin)
		qsort(x->in, x->nin, sizeof(*x->in), in_cmp);
	for (uint32_t i = 0; i < x->nin; i++)
		x->in_of_step[x->in[i].step] = i;
}

int coll_exec_tmpl_new(const struct sched_node *n, struct coll_exec_tmpl **t_p)
{
	size_t bytes = tables_size(n);
	struct coll_exec_tmpl *t = calloc(1, sizeof(*t) + bytes);
	struct coll_exec x = { .tables = t ? t->tables : NULL };

	if (!t)
		return -ENOMEM;
	t->n = n;
	t->bytes = bytes;
	tables_fill(&x, n, &t->most);
	t->nin = x.nin;
	t->send_in_place = x.send_in_place;
	*t_p = t;
	return 0;
}

void coll_exec_tmpl_free(struct coll_exec_tmpl *t)
{
	free(t);
}

uint64_t coll_exec_tmpl_bytes(const struct coll_exec_tmpl *t)
{
	return t ? sizeof(*t) + t->bytes : 0;
}

int coll_exec_new(const struct sched_node *n, const struct sched_mem *mem, const struct coll_exec_cfg *cfg,
		  const struct coll_exec_ops *ops, void *ctx, struct coll_exec **x_p, char *err, size_t err_len)
{
	struct coll_exec *x;
	const struct coll_exec_tmpl *t;
	uint32_t ns = n->nsteps, most = 0;
	int ret = -ENOMEM;

	if (cfg->tmpl && cfg->tmpl->n != n)
		return err_out(err, err_len, -EINVAL, "a template of another schedule");
	if (!cfg->piece_max || cfg->piece_max > WIRE_COLL_PIECE_MAX)
		return err_out(err, err_len, -EINVAL, "piece size %u", cfg->piece_max);
	/* The ranks' arguments place the segments: each must lie in its buffer. */
	for (uint32_t g = 0; g < n->nsegs; g++) {
		const struct sched_seg *s = &n->segs[g];
		uint64_t blen;

		/* (an empty block's place does not matter: MPI's rule for a
		 * zero count, and nothing is read or written there) */
		if (s->buf == SCHED_BUF_SCRATCH || !s->len)
			continue;
		blen = s->buf == SCHED_BUF_SEND ? mem->send_len[s->index] : mem->recv_len[s->index];
		if (s->off > blen || s->len > blen - s->off)
			return err_out(err, err_len, -EINVAL, "a block of %llu bytes at %llu is beyond the %s buffer "
				       "(%llu bytes) of local rank %u", (unsigned long long)s->len,
				       (unsigned long long)s->off, s->buf == SCHED_BUF_SEND ? "send" : "receive",
				       (unsigned long long)blen, s->index);
	}
	x = calloc(1, sizeof(*x));
	if (!x)
		return err_out(err, err_len, -ENOMEM, "out of memory");
	x->n = n;
	x->mem = mem;
	x->cfg = *cfg;
	x->part_step = UINT32_MAX;
	x->ops = ops;
	x->ctx = ctx;
	if ((t = cfg->tmpl)) {
		/* the tables as every run of the plan starts */
		if (!(x->tables = malloc(t->bytes)))
			goto err;
		memcpy(x->tables, t->tables, t->bytes);
		tables_at(x, n);
		x->tables_bytes = t->bytes;
		x->nin = t->nin;
		x->send_in_place = t->send_in_place;
		most = t->most;
	} else {
		x->tables_bytes = tables_size(n);
		if (!(x->tables = calloc(1, x->tables_bytes)))
			goto err;
		tables_fill(x, n, &most);
	}
	if (!(x->iov = calloc((size_t)most + 1, sizeof(*x->iov))))
		goto err;
	x->tables_bytes += ((uint64_t)most + 1) * sizeof(*x->iov);
	/* Sends from the send buffers in place unless a step writes one (no
	 * planner's does: FERRY_IN_PLACE is staged above, sched.h), and puts
	 * what comes straight into the receive buffers, unless a rank passed
	 * memory that is both (one buffer as both without FERRY_IN_PLACE:
	 * erroneous, as in MPI, but what it gets stays what copies gave it,
	 * not bytes overwritten before they went). */
	x->place_ok = 1;
	for (uint32_t i = 0; i < n->nslots && x->place_ok; i++)
		for (uint32_t j = 0; j < n->nslots && x->place_ok; j++) {
			const uint8_t *sb = mem->send[i], *rb = mem->recv[j];

			if (sb && rb && mem->send_len[i] && mem->recv_len[j] && sb < rb + mem->recv_len[j] &&
			    rb < sb + mem->send_len[i])
				x->place_ok = 0;
		}
	{
		uint64_t arena = 0;

		for (uint32_t b = 0; b < n->nscratch; b++)
			if (n->scratch_len[b] && x->scratch_refs[b])
				arena += (n->scratch_len[b] + 7) & ~7ull;
		if (arena && arena <= EXEC_ARENA_MAX) {
			if (mem_take(x, arena)) {
				ret = err_out(err, err_len, -ENOMEM, "%s", x->err);
				goto err_free;
			}
			if (!(x->arena = malloc(arena)))
				goto err;
			arena = 0;
			for (uint32_t b = 0; b < n->nscratch; b++)
				if (n->scratch_len[b] && x->scratch_refs[b]) {
					x->scratch[b] = x->arena + arena;
					arena += (n->scratch_len[b] + 7) & ~7ull;
				}
		}
	}
	for (uint32_t b = 0; b < n->nscratch && !x->arena; b++) {
		if (!n->scratch_len[b] || !x->scratch_refs[b])
			continue;
		if (mem_take(x, n->scratch_len[b])) {
			ret = err_out(err, err_len, -ENOMEM, "%s", x->err);
			goto err_free;
		}
		x->scratch[b] = malloc(n->scratch_len[b]);
		if (!x->scratch[b])
			goto err;
	}
	for (uint32_t k = 0; k < ns; k++)
		if (!x->waiting[k])
			make_ready(x, k);
	*x_p = x;
	return 0;
err:
	err_out(err, err_len, ret, "out of memory");
err_free:
	coll_exec_free(x);
	return ret;
}
