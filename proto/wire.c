/* proto/wire.c - frame and item codecs; see wire.h. */
#include "wire.h"
#include "ctl.h"

#include <endian.h>
#include <errno.h>
#include <string.h>

void wire_encode_hdr(void *buf, const struct wire_frame_hdr *h)
{
	struct wire_frame_hdr le = {
		.version = h->version,
		.kind = h->kind,
		.flags = htole16(h->flags),
		.len = htole32(h->len),
		.seq = htole64(h->seq),
		.ack = htole64(h->ack),
	};

	memcpy(buf, &le, sizeof(le));
}

int wire_decode_hdr(const void *buf, struct wire_frame_hdr *h)
{
	struct wire_frame_hdr le;
	uint32_t tag;

	memcpy(&le, buf, sizeof(le));
	h->version = le.version;
	h->kind = le.kind;
	h->flags = le16toh(le.flags);
	h->len = le32toh(le.len);
	h->seq = le64toh(le.seq);
	h->ack = le64toh(le.ack);
	tag = h->flags & WIRE_FRAME_MAC ? WIRE_TAG_BYTES : 0;
	if (h->version != WIRE_VERSION || h->kind < 1 || h->kind > WIRE_KIND_MAX ||
	    (h->flags & ~WIRE_FRAME_FLAGS_ALL) || ((h->flags & WIRE_FRAME_SEALED) && !tag) ||
	    h->len < tag || h->len - tag > WIRE_BODY_MAX)
		return -EPROTO;
	switch (h->kind) {
	case WIRE_DATA:
		if (h->seq == 0)
			return -EPROTO;
		break;
	case WIRE_ACK:
		if (h->seq != 0 || h->len != tag ||
		    (h->flags & (WIRE_FRAME_URGENT | WIRE_FRAME_ACK_SOON | WIRE_FRAME_ACK_LAZY)))
			return -EPROTO;
		break;
	default:        /* the handshake: never sealed */
		if (h->seq != 0 || h->flags)
			return -EPROTO;
	}
	return 0;
}

/* --- handshake --- */

void wire_encode_hello(void *buf, const struct wire_hello *h)
{
	struct wire_hello le = *h;

	le.magic = htole32(h->magic);
	le.version = htole16(h->version);
	le.flags = htole16(h->flags);
	le.from = htole32(h->from);
	le.to = htole32(h->to);
	le.incarnation = htole64(h->incarnation);
	le.peer_incarnation = htole64(h->peer_incarnation);
	le.ack = htole64(h->ack);
	memcpy(buf, &le, sizeof(le));
}

int wire_decode_hello(const void *buf, size_t len, struct wire_hello *h)
{
	static const uint8_t zero[64];

	if (len != sizeof(*h))
		return -EPROTO;
	memcpy(h, buf, sizeof(*h));
	h->magic = le32toh(h->magic);
	h->version = le16toh(h->version);
	h->flags = le16toh(h->flags);
	h->from = le32toh(h->from);
	h->to = le32toh(h->to);
	h->incarnation = le64toh(h->incarnation);
	h->peer_incarnation = le64toh(h->peer_incarnation);
	h->ack = le64toh(h->ack);
	/* Encryption needs integrity, and integrity a key. */
	if (h->magic != WIRE_MAGIC || h->version != WIRE_VERSION || (h->flags & ~WIRE_HELLO_FLAGS_ALL) ||
	    ((h->flags & WIRE_HELLO_ENCRYPT) && !(h->flags & WIRE_HELLO_INTEGRITY)) ||
	    ((h->flags & WIRE_HELLO_INSECURE) && (h->flags & WIRE_HELLO_INTEGRITY)) ||
	    h->incarnation == 0 || !proto_name_ok(h->cluster, h->cluster_len) ||
	    memcmp(h->reserved, zero, sizeof(h->reserved)) != 0 ||
	    memcmp(h->cluster + h->cluster_len, zero, sizeof(h->cluster) - h->cluster_len) != 0)
		return -EPROTO;
	return 0;
}

/* --- control items --- */

static uint32_t rd32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, 4);
	return le32toh(v);
}

static uint64_t rd64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, 8);
	return le64toh(v);
}

static void wr32(uint8_t *p, uint32_t v)
{
	v = htole32(v);
	memcpy(p, &v, 4);
}

static void wr64(uint8_t *p, uint64_t v)
{
	v = htole64(v);
	memcpy(p, &v, 8);
}

static size_t pad4(size_t n)
{
	return (n + 3) & ~(size_t)3;
}

/* FAIL's and LOST's text: 1..WIRE_FAIL_TEXT_MAX printable bytes, copied to
 * out with a NUL. */
static int decode_text(const uint8_t *p, uint32_t len, char *out)
{
	if (len == 0 || len > WIRE_FAIL_TEXT_MAX)
		return -EPROTO;
	for (uint32_t i = 0; i < len; i++)
		if (p[i] < 0x20 || p[i] > 0x7e)
			return -EPROTO;
	memcpy(out, p, len);
	out[len] = '\0';
	return 0;
}

/* GO's tail (wire.h): the forced algorithms each of one there is, the
 * functions of algorithms there are, in increasing order, each with a
 * start-up or a byte time. */
static int decode_go(const uint8_t *p, size_t len, struct wire_ctl *c)
{
	struct wire_ctl_go_tail *t = &c->go;
	uint32_t last = 0;

	if (len < sizeof(*t))
		return -EPROTO;
	memcpy(t->force, p, sizeof(t->force));
	t->nfn = rd32(p + sizeof(t->force));
	if (t->nfn > WIRE_GO_FNS_MAX || len != sizeof(*t) + (size_t)t->nfn * sizeof(struct wire_go_fn))
		return -EPROTO;
	for (uint32_t f = 0; f < WIRE_GO_FAMS; f++)
		if (t->force[f] > (f < CTL_FAMS ? ctl_fam_nalgs(f) : 0))
			return -EPROTO;
	c->fns = p + sizeof(*t);
	for (uint32_t i = 0; i < t->nfn; i++) {
		struct wire_go_fn fn;
		uint32_t key;

		wire_ctl_go_fn(c, i, &fn);
		key = (uint32_t)fn.fam << 8 | fn.alg;
		if (fn.fam >= CTL_FAMS || fn.alg >= ctl_fam_nalgs(fn.fam) || fn.reserved || (!fn.tau_ns && !fn.tc_ps) ||
		    (i && key <= last))
			return -EPROTO;
		last = key;
	}
	return 0;
}

void wire_ctl_go_fn(const struct wire_ctl *c, uint32_t i, struct wire_go_fn *f)
{
	const uint8_t *p = c->fns + (size_t)i * sizeof(*f);

	f->fam = p[0];
	f->alg = p[1];
	f->reserved = (uint16_t)(p[2] | p[3] << 8);
	f->tau_ns = rd32(p + 4);
	f->tc_ps = rd32(p + 8);
}

int wire_ctl_decode(uint32_t type, const void *payload, size_t len, struct wire_ctl *c)
{
	const uint8_t *p = payload;

	memset(c, 0, sizeof(*c));
	c->type = type;
	switch (type) {
	case WIRE_CTL_JOIN:
	case WIRE_CTL_LEAVE:
	case WIRE_CTL_REJECT: {
		struct wire_ctl_rank *r = &c->u.rank;

		if (len < sizeof(*r))
			return -EPROTO;
		r->uid = rd32(p);
		r->size = rd32(p + 4);
		r->rank = rd32(p + 8);
		r->err = (int32_t)rd32(p + 12);
		r->incarnation = rd64(p + 16);
		r->name_len = rd32(p + 24);
		r->coll_started = rd32(p + 28);
		if (r->name_len != len - sizeof(*r) || !proto_name_ok((const char *)p + sizeof(*r), r->name_len) ||
		    r->size == 0 || r->size > PROTO_MAX_RANKS || r->rank >= r->size ||
		    (type != WIRE_CTL_LEAVE && r->coll_started) ||
		    (type == WIRE_CTL_REJECT ? r->err <= 0 || r->incarnation : r->err != 0 || !r->incarnation))
			return -EPROTO;
		memcpy(c->name, p + sizeof(*r), r->name_len);
		return 0;
	}
	case WIRE_CTL_TABLE: {
		struct wire_ctl_table *t = &c->u.table;
		size_t off;

		if (len < sizeof(*t))
			return -EPROTO;
		t->uid = rd32(p);
		t->job = rd32(p + 4);
		t->size = rd32(p + 8);
		t->first = rd32(p + 12);
		t->count = rd32(p + 16);
		t->name_len = rd32(p + 20);
		t->gen = rd32(p + 24);
		if (t->job == 0 || t->size == 0 || t->size > PROTO_MAX_RANKS || t->gen > WIRE_GEN_MASK || t->count == 0 ||
		    t->count > WIRE_TABLE_MAX ||
		    t->first >= t->size || t->count > t->size - t->first || t->name_len > PROTO_NAME_MAX)
			return -EPROTO;
		/* The length first: the name must lie inside the payload. */
		off = sizeof(*t) + pad4(t->name_len);
		if (len != off + 4 * (size_t)t->count || !proto_name_ok((const char *)p + sizeof(*t), t->name_len))
			return -EPROTO;
		memcpy(c->name, p + sizeof(*t), t->name_len);
		c->nodes = p + off;
		return 0;
	}
	case WIRE_CTL_REPORT: {
		struct wire_ctl_report *r = &c->u.report;

		if (len != sizeof(*r))
			return -EPROTO;
		r->job = rd32(p);
		r->step = rd32(p + 4);
		r->done = rd32(p + 8);
		r->gen = rd32(p + 12);
		r->sent = rd64(p + 16);
		r->ringed = rd64(p + 24);
		if (r->job == 0 || r->gen > WIRE_GEN_MASK)
			return -EPROTO;
		return 0;
	}
	case WIRE_CTL_STEP:
	case WIRE_CTL_HAVE:
	case WIRE_CTL_GO:
	case WIRE_CTL_XOFF:
	case WIRE_CTL_XON:
		if (len < sizeof(c->u.step) || (type != WIRE_CTL_GO && len != sizeof(c->u.step)))
			return -EPROTO;
		c->u.step.job = rd32(p);
		c->u.step.step = rd32(p + 4);
		c->u.step.gen = rd32(p + 8);
		c->u.step.alpha_ns = rd32(p + 12);
		c->u.step.beta_ps = rd32(p + 16);
		c->u.step.reserved = rd32(p + 20);
		if (!c->u.step.job || c->u.step.gen > WIRE_GEN_MASK || c->u.step.reserved ||
		    (type != WIRE_CTL_HAVE && type != WIRE_CTL_GO && (c->u.step.alpha_ns || c->u.step.beta_ps)) ||
		    ((type == WIRE_CTL_HAVE || type == WIRE_CTL_GO) && c->u.step.step != 0) ||
		    ((type == WIRE_CTL_XOFF || type == WIRE_CTL_XON) && c->u.step.step >= PROTO_MAX_RANKS))
			return -EPROTO;
		return type == WIRE_CTL_GO ? decode_go(p + sizeof(c->u.step), len - sizeof(c->u.step), c) : 0;
	case WIRE_CTL_FAIL: {
		struct wire_ctl_fail *f = &c->u.fail;

		if (len < sizeof(*f))
			return -EPROTO;
		f->job = rd32(p);
		f->gen = rd32(p + 4);
		f->step = rd32(p + 8);
		f->rank = rd32(p + 12);
		f->node = rd32(p + 16);
		f->err = (int32_t)rd32(p + 20);
		f->coll_ok = rd32(p + 24);
		f->text_len = rd32(p + 28);
		if (!f->job || f->gen > WIRE_GEN_MASK || f->err <= 0 || f->err > 4095 || f->text_len != len - sizeof(*f))
			return -EPROTO;
		return decode_text(p + sizeof(*f), f->text_len, c->text);
	}
	case WIRE_CTL_LOST: {
		struct wire_ctl_lost *l = &c->u.lost;

		if (len < sizeof(*l))
			return -EPROTO;
		l->node = rd32(p);
		l->kind = rd32(p + 4);
		l->incarnation = rd64(p + 8);
		l->text_len = rd32(p + 16);
		l->reserved = rd32(p + 20);
		if (l->node >= WIRE_MAX_NODES || l->kind > WIRE_LOST_LINK_BACK ||
		    !l->incarnation != (l->kind != WIRE_LOST_RESTART) ||
		    l->reserved || l->text_len != len - sizeof(*l))
			return -EPROTO;
		return decode_text(p + sizeof(*l), l->text_len, c->text);
	}
	}
	return -EPROTO;
}

ssize_t wire_ctl_encode_fail(void *buf, size_t cap, const struct wire_ctl_fail *f, const char *text)
{
	uint8_t *p = buf;
	size_t n = sizeof(*f) + f->text_len;

	if (n > cap || f->text_len > WIRE_FAIL_TEXT_MAX)
		return -ENOSPC;
	wr32(p, f->job);
	wr32(p + 4, f->gen);
	wr32(p + 8, f->step);
	wr32(p + 12, f->rank);
	wr32(p + 16, f->node);
	wr32(p + 20, (uint32_t)f->err);
	wr32(p + 24, f->coll_ok);
	wr32(p + 28, f->text_len);
	memcpy(p + sizeof(*f), text, f->text_len);
	return (ssize_t)n;
}

ssize_t wire_ctl_encode_lost(void *buf, size_t cap, const struct wire_ctl_lost *l, const char *text)
{
	uint8_t *p = buf;
	size_t n = sizeof(*l) + l->text_len;

	if (n > cap || l->text_len > WIRE_FAIL_TEXT_MAX)
		return -ENOSPC;
	wr32(p, l->node);
	wr32(p + 4, l->kind);
	wr64(p + 8, l->incarnation);
	wr32(p + 16, l->text_len);
	wr32(p + 20, 0);
	memcpy(p + sizeof(*l), text, l->text_len);
	return (ssize_t)n;
}

ssize_t wire_ctl_encode_rank(void *buf, size_t cap, const struct wire_ctl_rank *r, const char *name)
{
	uint8_t *p = buf;
	size_t n = sizeof(*r) + r->name_len;

	if (n > cap)
		return -ENOSPC;
	wr32(p, r->uid);
	wr32(p + 4, r->size);
	wr32(p + 8, r->rank);
	wr32(p + 12, (uint32_t)r->err);
	wr64(p + 16, r->incarnation);
	wr32(p + 24, r->name_len);
	wr32(p + 28, r->coll_started);
	memcpy(p + sizeof(*r), name, r->name_len);
	return (ssize_t)n;
}

ssize_t wire_ctl_encode_table(void *buf, size_t cap, const struct wire_ctl_table *t, const char *name,
			      const uint32_t *nodes)
{
	uint8_t *p = buf;
	size_t off = sizeof(*t) + pad4(t->name_len), n = off + 4 * (size_t)t->count;

	if (n > cap)
		return -ENOSPC;
	wr32(p, t->uid);
	wr32(p + 4, t->job);
	wr32(p + 8, t->size);
	wr32(p + 12, t->first);
	wr32(p + 16, t->count);
	wr32(p + 20, t->name_len);
	wr32(p + 24, t->gen);
	memset(p + sizeof(*t), 0, off - sizeof(*t));
	memcpy(p + sizeof(*t), name, t->name_len);
	for (uint32_t i = 0; i < t->count; i++)
		wr32(p + off + 4 * (size_t)i, nodes[i]);
	return (ssize_t)n;
}

ssize_t wire_ctl_encode_report(void *buf, size_t cap, const struct wire_ctl_report *r)
{
	uint8_t *p = buf;

	if (cap < sizeof(*r))
		return -ENOSPC;
	wr32(p, r->job);
	wr32(p + 4, r->step);
	wr32(p + 8, r->done);
	wr32(p + 12, r->gen);
	wr64(p + 16, r->sent);
	wr64(p + 24, r->ringed);
	return sizeof(*r);
}

ssize_t wire_ctl_encode_step(void *buf, size_t cap, const struct wire_ctl_step *s)
{
	uint8_t *p = buf;

	if (cap < sizeof(*s))
		return -ENOSPC;
	wr32(p, s->job);
	wr32(p + 4, s->step);
	wr32(p + 8, s->gen);
	wr32(p + 12, s->alpha_ns);
	wr32(p + 16, s->beta_ps);
	wr32(p + 20, s->reserved);
	return sizeof(*s);
}

ssize_t wire_ctl_encode_go(void *buf, size_t cap, const struct wire_ctl_step *s, const struct wire_ctl_go_tail *t,
			   const struct wire_go_fn *fns)
{
	uint8_t *p = buf;
	size_t n = sizeof(*s) + sizeof(*t) + (size_t)t->nfn * sizeof(*fns);

	if (t->nfn > WIRE_GO_FNS_MAX || cap < n)
		return -ENOSPC;
	wire_ctl_encode_step(p, cap, s);
	p += sizeof(*s);
	memcpy(p, t->force, sizeof(t->force));
	wr32(p + sizeof(t->force), t->nfn);
	p += sizeof(*t);
	for (uint32_t i = 0; i < t->nfn; i++, p += sizeof(*fns)) {
		p[0] = fns[i].fam;
		p[1] = fns[i].alg;
		p[2] = (uint8_t)fns[i].reserved;
		p[3] = (uint8_t)(fns[i].reserved >> 8);
		wr32(p + 4, fns[i].tau_ns);
		wr32(p + 8, fns[i].tc_ps);
	}
	return (ssize_t)n;
}
