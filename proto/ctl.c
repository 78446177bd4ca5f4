/* proto/ctl.c - control message encoders and validating decoders; see ctl.h. */
#include "ctl.h"
#include "coll.h"

#include <errno.h>
#include <string.h>

static ssize_t put(void *buf, size_t cap, uint8_t type, const void *body, size_t len,
		   const void *tail, size_t tail_len)
{
	struct ctl_hdr h = { .version = CTL_VERSION, .type = type,
			     .len = (uint32_t)(len + tail_len) };
	size_t total = sizeof(h) + len + tail_len;

	if (len + tail_len > CTL_MAX_BODY)
		return -EINVAL;
	if (total > cap)
		return -ENOSPC;
	memcpy(buf, &h, sizeof(h));
	if (len)
		memcpy((char *)buf + sizeof(h), body, len);
	if (tail_len)
		memcpy((char *)buf + sizeof(h) + len, tail, tail_len);
	return (ssize_t)total;
}

ssize_t ctl_encode_hello(void *buf, size_t cap, uint32_t role)
{
	struct ctl_hello_wire b = { .role = role };

	return put(buf, cap, CTL_HELLO, &b, sizeof(b), NULL, 0);
}

ssize_t ctl_encode_join_flags(void *buf, size_t cap, const char *job, uint32_t rank, uint32_t size,
			      uint32_t flags)
{
	size_t n = strlen(job);
	struct ctl_join_wire b = { .rank = rank, .size = size, .flags = flags, .name_len = (uint32_t)n };

	if (!proto_name_ok(job, n) || (flags & ~CTL_JOIN_FLAGS_ALL))
		return -EINVAL;
	return put(buf, cap, CTL_JOIN, &b, sizeof(b), job, n);
}

ssize_t ctl_encode_join(void *buf, size_t cap, const char *job, uint32_t rank, uint32_t size)
{
	return ctl_encode_join_flags(buf, cap, job, rank, size, 0);
}

/* What a DIRECT body must satisfy (ranks: d->n of them). */
static int direct_ok(const struct ctl_direct_wire *d, const uint32_t *ranks)
{
	if (d->n < 1 || d->n > PROTO_DIRECT_MAX || d->slot >= d->n || !ring_size_ok(d->ring_size) ||
	    d->region_bytes != proto_direct_region_bytes(d->n, d->ring_size))
		return 0;
	for (uint32_t i = 0; i < d->n; i++) {
		if (ranks[i] >= PROTO_MAX_RANKS)
			return 0;
		for (uint32_t k = 0; k < i; k++)
			if (ranks[k] == ranks[i])
				return 0;
	}
	return 1;
}

ssize_t ctl_encode_direct(void *buf, size_t cap, const struct ctl_direct_wire *d, const uint32_t *ranks)
{
	if (!direct_ok(d, ranks))
		return -EINVAL;
	return put(buf, cap, CTL_DIRECT, d, sizeof(*d), ranks, (size_t)d->n * sizeof(uint32_t));
}

ssize_t ctl_encode_attached(void *buf, size_t cap, const struct ctl_attached_wire *a)
{
	return put(buf, cap, CTL_ATTACHED, a, sizeof(*a), NULL, 0);
}

ssize_t ctl_encode_ready(void *buf, size_t cap, uint32_t size, uint32_t nodes)
{
	struct ctl_ready_wire b = { .size = size, .nodes = nodes };

	return put(buf, cap, CTL_READY, &b, sizeof(b), NULL, 0);
}

ssize_t ctl_encode_error(void *buf, size_t cap, int err, const char *text)
{
	size_t n = strnlen(text, CTL_ERRTEXT_MAX);
	struct ctl_error_wire b = { .err = err, .text_len = (uint32_t)n };

	if (err <= 0)
		return -EINVAL;
	return put(buf, cap, CTL_ERROR, &b, sizeof(b), text, n);
}

static int buf_ok(const struct ctl_buf *b)
{
	return !b->reserved && (b->mem || (!b->off && !b->len)) && b->off <= UINT64_MAX - b->len;
}

static int buf_none(const struct ctl_buf *b)
{
	return !b->mem && !b->off && !b->len && !b->reserved;
}

/* What a COLL body must satisfy (what depends on the job, its size, is the
 * daemon's to check). */
const char *const ctl_a2a_algs[CTL_A2A_ALGS + 2] = { "auto", "direct", "mesh", "grid3d", "hypercube", NULL };
const char *const ctl_rooted_algs[CTL_ROOTED_ALGS + 2] = { "auto", "direct", "opt", "sdf", "orth", "tree", NULL };
const char *const ctl_orth_algs[CTL_ORTH_ALGS + 2] = { "auto", "single", "orth", "hier", NULL };
const char *const ctl_rs_algs[CTL_RS_ALGS + 2] = { "auto", "short", "long", "hybrid", NULL };
const char *const ctl_scan_algs[CTL_SCAN_ALGS + 2] = { "auto", "chain", NULL };

static const char *const kind_names[CTL_COLL_KIND_MAX + 1] = {
	NULL, "barrier", "alltoall", "alltoallv", "split", "scatter", "scatterv", "gather", "gatherv", "bcast",
	"reduce", "allreduce", "allgather", "allgatherv", "reduce_scatter_block", "reduce_scatter", "scan", "exscan",
};

const char *ctl_coll_kind_name(uint32_t kind)
{
	return kind <= CTL_COLL_KIND_MAX ? kind_names[kind] : NULL;
}

uint32_t ctl_coll_kind_by_name(const char *name)
{
	for (uint32_t k = 1; name && k <= CTL_COLL_KIND_MAX; k++)
		if (strcmp(name, kind_names[k]) == 0)
			return k;
	return 0;
}

const char *const *ctl_coll_algs(uint32_t kind)
{
	switch (kind) {
	case CTL_COLL_ALLTOALL:
	case CTL_COLL_ALLTOALLV:
		return ctl_a2a_algs;
	case CTL_COLL_SCATTER:
	case CTL_COLL_SCATTERV:
	case CTL_COLL_GATHER:
	case CTL_COLL_GATHERV:
		return ctl_rooted_algs;
	case CTL_COLL_REDUCE_SCATTER_BLOCK:
	case CTL_COLL_REDUCE_SCATTER:
		return ctl_rs_algs;
	case CTL_COLL_SCAN:
	case CTL_COLL_EXSCAN:
		return ctl_scan_algs;
	}
	return ctl_coll_phased(kind) ? ctl_orth_algs : NULL;
}

/* (the first kind of each family, in enum ctl_fam's order) */
static const uint32_t fam_kind[CTL_FAMS] = {
	CTL_COLL_ALLTOALL, CTL_COLL_SCATTER, CTL_COLL_GATHER, CTL_COLL_BCAST, CTL_COLL_REDUCE, CTL_COLL_ALLREDUCE,
	CTL_COLL_ALLGATHER, CTL_COLL_REDUCE_SCATTER, CTL_COLL_SCAN,
};

int ctl_coll_fam(uint32_t kind)
{
	if (kind == CTL_COLL_ALLTOALLV || kind == CTL_COLL_SPLIT)
		kind = CTL_COLL_ALLTOALL;
	for (int f = 0; f < CTL_FAMS; f++)
		if (fam_kind[f] == kind || fam_kind[f] == ctl_coll_variant(kind) ||
		    fam_kind[f] == kind - (kind == CTL_COLL_SCATTERV || kind == CTL_COLL_GATHERV))
			return f;
	return -1;
}

const char *ctl_fam_name(uint32_t fam)
{
	return fam < CTL_FAMS ? kind_names[fam_kind[fam]] : NULL;
}

const char *const *ctl_fam_algs(uint32_t fam)
{
	return fam < CTL_FAMS ? ctl_coll_algs(fam_kind[fam]) : NULL;
}

uint32_t ctl_fam_nalgs(uint32_t fam)
{
	const char *const *a = ctl_fam_algs(fam);
	uint32_t n = 0;

	while (a && a[n + 1])
		n++;
	return n;
}

int ctl_alg_by_name(const char *const *names, const char *name)
{
	for (int i = 0; name && names[i]; i++)
		if (strcmp(name, names[i]) == 0)
			return i;
	return -1;
}

/* The flags kind may carry: IN_PLACE for scatter and gather, and for a
 * reduction a type and operation that go together (proto/coll.h). */
static int flags_ok(uint32_t kind, uint32_t flags)
{
	uint32_t rest = flags & ~CTL_COLL_IN_PLACE;

	if ((flags & CTL_COLL_IN_PLACE) && !ctl_coll_rooted(kind))
		return 0;       /* (bcast .. exscan: libferry stages FERRY_IN_PLACE, client/phased.c) */
	if (ctl_coll_reduces(kind))
		return rest == (CTL_COLL_TYPE(flags) << CTL_COLL_TYPE_SHIFT | CTL_COLL_OP(flags) << CTL_COLL_OP_SHIFT) &&
		       coll_op_ok(CTL_COLL_TYPE(flags), CTL_COLL_OP(flags));
	return rest == 0;
}

static int coll_ok(const struct ctl_coll_wire *c)
{
	if (c->reserved || (!c->prev_seq && (c->prev_group || c->prev_us)))
		return 0;
	if (c->kind < 1 || c->kind > CTL_COLL_KIND_MAX || c->seq == 0 || !flags_ok(c->kind, c->flags) ||
	    (c->root && !ctl_coll_has_root(c->kind)) || !buf_ok(&c->send) || !buf_ok(&c->recv) || !buf_ok(&c->vec))
		return 0;
	switch (c->kind) {
	case CTL_COLL_BARRIER:
		return !c->strategy && !c->count && buf_none(&c->send) && buf_none(&c->recv) && buf_none(&c->vec);
	case CTL_COLL_ALLTOALL:
		return c->strategy <= CTL_A2A_ALGS && buf_none(&c->vec);
	case CTL_COLL_ALLTOALLV:
		return c->strategy <= CTL_A2A_ALGS && !c->count && c->vec.mem && c->vec.len % 32 == 0;
	case CTL_COLL_SPLIT:
		return c->strategy <= CTL_A2A_ALGS && c->count == 8 && buf_none(&c->vec);
	case CTL_COLL_SCATTER:
	case CTL_COLL_GATHER:
		return c->strategy <= CTL_ROOTED_ALGS && buf_none(&c->vec);
	case CTL_COLL_SCATTERV:
	case CTL_COLL_GATHERV:
		return c->strategy <= CTL_ROOTED_ALGS && (buf_none(&c->vec) || c->vec.len % 16 == 0);
	case CTL_COLL_ALLGATHERV:
		return c->strategy <= CTL_ORTH_ALGS && c->vec.mem && c->vec.len % 16 == 0;
	case CTL_COLL_REDUCE_SCATTER:
		return c->strategy <= CTL_RS_ALGS && !c->count && c->vec.mem && c->vec.len % 8 == 0;
	case CTL_COLL_REDUCE_SCATTER_BLOCK:
		return c->strategy <= CTL_RS_ALGS && buf_none(&c->vec);
	case CTL_COLL_SCAN:
	case CTL_COLL_EXSCAN:
		return c->strategy <= CTL_SCAN_ALGS && buf_none(&c->vec);
	case CTL_COLL_BCAST:
	case CTL_COLL_REDUCE:
	case CTL_COLL_ALLREDUCE:
	case CTL_COLL_ALLGATHER:
		return c->strategy <= CTL_ORTH_ALGS && buf_none(&c->vec);
	}
	return 0;
}

ssize_t ctl_encode_mem(void *buf, size_t cap, uint32_t type, uint32_t id, uint64_t bytes)
{
	struct ctl_mem_wire m = { .id = id, .bytes = bytes };

	if ((type != CTL_MEM && type != CTL_MEM_FREE) || !id || (type == CTL_MEM_FREE && bytes))
		return -EINVAL;
	return put(buf, cap, (uint8_t)type, &m, sizeof(m), NULL, 0);
}

ssize_t ctl_encode_coll(void *buf, size_t cap, const struct ctl_coll_wire *c)
{
	if (!coll_ok(c))
		return -EINVAL;
	return put(buf, cap, CTL_COLL, c, sizeof(*c), NULL, 0);
}

ssize_t ctl_encode_coll_done(void *buf, size_t cap, uint32_t group, uint32_t seq, int err, const char *text)
{
	size_t n = err ? strnlen(text, CTL_ERRTEXT_MAX) : 0;
	struct ctl_coll_done_wire b = { .seq = seq, .err = err, .text_len = (uint32_t)n, .group = group };

	if (err < 0)
		return -EINVAL;
	return put(buf, cap, CTL_COLL_DONE, &b, sizeof(b), text, n);
}

ssize_t ctl_encode_group_free(void *buf, size_t cap, uint32_t id)
{
	struct ctl_group_wire g = { .id = id };

	if (!id)
		return -EINVAL;
	return put(buf, cap, CTL_GROUP_FREE, &g, sizeof(g), NULL, 0);
}

ssize_t ctl_encode_layout(void *buf, size_t cap, const struct ctl_buf *b)
{
	if (!buf_ok(b) || !b->mem || !b->len)
		return -EINVAL;
	return put(buf, cap, CTL_LAYOUT, b, sizeof(*b), NULL, 0);
}

ssize_t ctl_encode_query(void *buf, size_t cap, uint32_t what, uint32_t arg)
{
	struct ctl_query_wire b = { .what = what, .arg = arg };

	return put(buf, cap, CTL_QUERY, &b, sizeof(b), NULL, 0);
}

ssize_t ctl_encode_text(void *buf, size_t cap, const char *text, size_t len)
{
	return put(buf, cap, CTL_TEXT, NULL, 0, text, len);
}

/* Copies a fixed-size body; the body must be exactly that size. */
static int fixed(const uint8_t *body, uint32_t len, void *out, size_t size)
{
	if (len != size)
		return -EPROTO;
	memcpy(out, body, size);
	return 0;
}

ssize_t ctl_decode(const void *buf, size_t n, struct ctl_msg *msg)
{
	const uint8_t *p = buf;
	const uint8_t *body;
	struct ctl_hdr h;

	if (n < sizeof(h))
		return 0;
	memcpy(&h, p, sizeof(h));
	if (h.version != CTL_VERSION || h.type < 1 || h.type > CTL_TYPE_MAX ||
	    h.flags || h.len > CTL_MAX_BODY)
		return -EPROTO;
	if (n - sizeof(h) < h.len)
		return 0;
	body = p + sizeof(h);
	memset(msg, 0, sizeof(*msg));
	msg->type = h.type;

	switch (h.type) {
	case CTL_HELLO:
		if (fixed(body, h.len, &msg->u.hello, sizeof(msg->u.hello)) < 0 ||
		    msg->u.hello.reserved ||
		    (msg->u.hello.role != CTL_ROLE_ENDPOINT && msg->u.hello.role != CTL_ROLE_ADMIN))
			return -EPROTO;
		break;
	case CTL_JOIN: {
		struct ctl_join_wire j;

		if (h.len < sizeof(j))
			return -EPROTO;
		memcpy(&j, body, sizeof(j));
		if ((j.flags & ~CTL_JOIN_FLAGS_ALL) || j.size == 0 || j.rank >= j.size ||
		    j.name_len != h.len - sizeof(j) ||
		    !proto_name_ok((const char *)body + sizeof(j), j.name_len))
			return -EPROTO;
		msg->u.join.rank = j.rank;
		msg->u.join.size = j.size;
		msg->u.join.flags = j.flags;
		memcpy(msg->u.join.name, body + sizeof(j), j.name_len);
		msg->u.join.name[j.name_len] = '\0';
		break;
	}
	case CTL_ATTACHED:
		if (fixed(body, h.len, &msg->u.attached, sizeof(msg->u.attached)) < 0 ||
		    (msg->u.attached.flags & ~CTL_ATTACHED_FLAGS_ALL) || msg->u.attached.reserved)
			return -EPROTO;
		break;
	case CTL_READY:
		if (fixed(body, h.len, &msg->u.ready, sizeof(msg->u.ready)) < 0 ||
		    msg->u.ready.size == 0)
			return -EPROTO;
		break;
	case CTL_ERROR: {
		struct ctl_error_wire e;

		if (h.len < sizeof(e))
			return -EPROTO;
		memcpy(&e, body, sizeof(e));
		if (e.err <= 0 || e.text_len > CTL_ERRTEXT_MAX || e.text_len != h.len - sizeof(e))
			return -EPROTO;
		msg->u.error.err = e.err;
		memcpy(msg->u.error.text, body + sizeof(e), e.text_len);
		msg->u.error.text[e.text_len] = '\0';
		break;
	}
	case CTL_QUERY:
		if (fixed(body, h.len, &msg->u.query, sizeof(msg->u.query)) < 0 ||
		    msg->u.query.what < 1 || msg->u.query.what > CTL_Q_MAX)
			return -EPROTO;
		break;
	case CTL_DIRECT: {
		struct ctl_direct_wire d;

		if (h.len < sizeof(d))
			return -EPROTO;
		memcpy(&d, body, sizeof(d));
		if (d.n < 1 || d.n > PROTO_DIRECT_MAX || h.len != sizeof(d) + (size_t)d.n * sizeof(uint32_t))
			return -EPROTO;
		memcpy(msg->u.direct.ranks, body + sizeof(d), (size_t)d.n * sizeof(uint32_t));
		if (!direct_ok(&d, msg->u.direct.ranks))
			return -EPROTO;
		msg->u.direct.w = d;
		break;
	}
	case CTL_TEXT:
		msg->u.text.text = (const char *)body;
		msg->u.text.len = h.len;
		break;
	case CTL_COLL:
		if (fixed(body, h.len, &msg->u.coll, sizeof(msg->u.coll)) < 0 || !coll_ok(&msg->u.coll))
			return -EPROTO;
		break;
	case CTL_MEM:
	case CTL_MEM_FREE:
		if (fixed(body, h.len, &msg->u.mem, sizeof(msg->u.mem)) < 0 || !msg->u.mem.id ||
		    msg->u.mem.reserved || (h.type == CTL_MEM_FREE && msg->u.mem.bytes))
			return -EPROTO;
		break;
	case CTL_GROUP_FREE:
		if (fixed(body, h.len, &msg->u.group, sizeof(msg->u.group)) < 0 || !msg->u.group.id ||
		    msg->u.group.reserved)
			return -EPROTO;
		break;
	case CTL_LAYOUT:
		if (fixed(body, h.len, &msg->u.layout, sizeof(msg->u.layout)) < 0 || !buf_ok(&msg->u.layout) ||
		    !msg->u.layout.mem || !msg->u.layout.len)
			return -EPROTO;
		break;
	case CTL_COLL_DONE: {
		struct ctl_coll_done_wire d;

		if (h.len < sizeof(d))
			return -EPROTO;
		memcpy(&d, body, sizeof(d));
		if (d.err < 0 || d.text_len > CTL_ERRTEXT_MAX ||
		    d.text_len != h.len - sizeof(d) || (!d.err && d.text_len))
			return -EPROTO;
		msg->u.coll_done.group = d.group;
		msg->u.coll_done.seq = d.seq;
		msg->u.coll_done.err = d.err;
		memcpy(msg->u.coll_done.text, body + sizeof(d), d.text_len);
		msg->u.coll_done.text[d.text_len] = '\0';
		break;
	}
	}
	return (ssize_t)(sizeof(h) + h.len);
}
