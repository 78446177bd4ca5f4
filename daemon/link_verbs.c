/* daemon/link_verbs.c - RDMA verbs links: reliable-connected queue pairs set up
 * with librdmacm and driven with libibverbs.  The only file that touches
 * either library.  See link.h for what a transport does; the handshake,
 * sequence numbers, acknowledgements and retransmission are the peer layer's,
 * exactly as for TCP.
 *
 * Resources.  One device (the one holding the node's address, which rdma_cm
 * finds from it), one protection domain, one completion channel and one
 * completion queue per daemon; one queue pair per routing peer.  The
 * completion channel's fd is in the epoll loop; on an event the CQ is polled
 * in batches.
 *
 * Sending: a frame goes out as one SEND (with immediate data, see credits)
 * straight from the frame buffer: aggregation buffers are registered memory
 * (registered on first use and kept while the frame sits in the reuse pool),
 * so a full buffer is posted without another copy.  SEND rather than RDMA
 * WRITE with immediate into a ring at the peer: the receiver must be able to
 * stop taking frames (backpressure) and take them apart in place, which
 * pre-posted receive buffers give for free, and a ring would need a second
 * credit scheme for its space; frames are large (kilobytes), so the extra
 * receive-side bookkeeping per SEND is nothing.
 *
 * Credits.  Each side posts VERBS_RECV_BUFS receive buffers.  A sender may
 * have at most that many SENDs unreturned, less a reserve: every SEND carries
 * in its immediate data the number of buffers its sender has posted again
 * since its last SEND (its credits back to the peer).  When a side has many
 * credits to return and nothing to send, it sends an ACK frame just for them;
 * ACK frames may use the reserve, so two sides without data credits can always
 * tell each other.  A receiver that cannot take a frame now (backpressure)
 * keeps its buffer and returns no credit for it, which stops the sender.
 * rnr_retry_count is "infinite" as a last line of defence.
 *
 * Handshake.  rdma_cm's private data (56 bytes for RC) cannot hold the
 * authenticated HELLO/AUTH (144 + 32 bytes): it carries an identification
 * (magic, version, node ids, largest frame each side receives) checked before
 * a queue pair is spent, and HELLO/AUTH are the first SENDs on the connection,
 * through the same peer-layer code as on TCP.
 *
 * Failures.  An error completion, a DISCONNECTED or UNREACHABLE event, or the
 * device's port going down ends the link (peer_link_down); the connecting side
 * retries with backoff and the frames not acknowledged are sent again.  A removed
 * device ends every link and the listener; the daemon keeps running, logs it,
 * and tries to set the device up again every few seconds.
 */
#include "link.h"
#include "conf.h"
#include "frame.h"
#include "log.h"
#include "loop.h"
#include "peer.h"

#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <netdb.h>
#include <rdma/rdma_cma.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>

#define VERBS_RECV_BUFS   32            /* receive buffers per link */
#define VERBS_RESERVE     2             /* credits only ACK frames may use */
#define VERBS_CTRL_SLOTS  16            /* control frames (HELLO, AUTH, ACK) in flight */
#define VERBS_CTRL_BYTES  256           /* one control frame */
#define VERBS_SQ_DEPTH    (VERBS_RECV_BUFS + VERBS_CTRL_SLOTS)
#define VERBS_MAX_LINKS   1024
#define VERBS_MAGIC       0x46525642u   /* "FRVB" */
#define VERBS_RESOLVE_MS  2000
#define VERBS_REINIT_NS   (3ull * 1000000000u)
#define VERBS_KEEPALIVE_NS (5ull * 1000000000u)
/* Transport retries of a SEND before it completes with an error (the REQ's
 * value serves both sides).  Not 7: soft-RoCE (rxe) takes 7 to mean "retry
 * for ever", and then a SEND to a dead or partitioned peer never fails, so
 * neither the keepalive nor anything else would end the link. */
#define VERBS_RETRY_COUNT 6

/* What rdma_connect / rdma_accept carry (at most 56 bytes). */
struct verbs_priv {
	uint32_t magic;         /* VERBS_MAGIC */
	uint16_t version;       /* WIRE_VERSION */
	uint16_t reserved;      /* zero */
	uint32_t from, to;      /* node ids */
	uint32_t max_frame;     /* largest frame the sender of this receives */
};
static_assert(sizeof(struct verbs_priv) <= 56, "RC private data");

/* wr_id: a generation, a link slot, receive or send, and a buffer index, so
 * that completions of a link that is gone are recognised and ignored. */
#define WR(gen, slot, recv, idx) (((uint64_t)(gen) << 40) | ((uint64_t)(slot) << 20) | \
				  ((uint64_t)(recv) << 19) | (uint64_t)(idx))
#define WR_GEN(w)  ((uint32_t)((w) >> 40))
#define WR_SLOT(w) ((uint32_t)(((w) >> 20) & 0xfffff))
#define WR_RECV(w) ((int)(((w) >> 19) & 1))
#define WR_IDX(w)  ((uint32_t)((w) & 0x7ffff))
#define WR_CTRL    0x40000u             /* send idx: a control slot (ORed with its number) */

struct vlink {
	struct link l;
	struct rdma_cm_id *id;
	uint32_t slot, gen;
	int dead;               /* torn down; events and completions ignored */
	char addr[64];

	/* receiving */
	uint8_t *rbuf;          /* VERBS_RECV_BUFS buffers of V.max_frame bytes */
	struct ibv_mr *rmr;
	int paused;
	uint32_t held[VERBS_RECV_BUFS], held_len[VERBS_RECV_BUFS], nheld;  /* taken off the CQ, not processed */
	uint32_t credits_back;  /* buffers posted again, not yet announced */

	/* sending */
	uint32_t credits;       /* SENDs we may still post */
	uint32_t peer_max_frame;
	uint8_t *cbuf;          /* control frame slots */
	struct ibv_mr *cmr;
	uint32_t cfree;         /* bitmap of free control slots */
	uint32_t cq_pending[VERBS_CTRL_SLOTS], cq_len[VERBS_CTRL_SLOTS], ncq;   /* control frames to post, in order */
	uint32_t outstanding;   /* posted SENDs without a completion */

	/* statistics */
	uint64_t posted, completed, credit_waits;
	uint64_t posted_seen;   /* posted at the last keepalive tick */
	int touched;            /* had completions in this on_cq batch (on V.touched) */
};

static struct {
	const struct conf *conf;
	uint32_t self;
	struct rdma_event_channel *ech;
	struct loop_watch ech_w;
	struct rdma_cm_id *listen_id;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_comp_channel *cc;
	struct ibv_cq *cq;
	struct loop_watch cc_w, async_w;
	int have_dev;
	int retrying;           /* the device went away; start() is retried */
	struct sockaddr_storage self_sa;
	uint32_t max_frame;
	struct vlink *slots[VERBS_MAX_LINKS];
	uint32_t gen[VERBS_MAX_LINKS];
	uint32_t touched[VERBS_MAX_LINKS], ntouched;    /* slots of links with completions */
	struct loop_timer reinit, keepalive;
	struct vreg *regs;      /* every frame registration */
	uint64_t posted, completed, credit_waits, errors;
} V;

static const struct link_ops verbs_ops;

/* --- registration of frames (they may be sent without a copy) --- */

/* A frame's registration (frame.reg), on the list of them all: a removed
 * device must be let go of entirely, every MR and then the PD.  Drivers
 * without "disassociate" (rxe, siw) hold the removal (rdma link delete, a
 * hot unplug) until every user has closed everything on the device. */
struct vreg {
	struct ibv_mr *mr;
	struct frame *f;
	struct vreg *prev, *next;
};

static void unregister_frame(struct frame *f)
{
	struct vreg *r = f->reg;

	ibv_dereg_mr(r->mr);
	if (r->prev)
		r->prev->next = r->next;
	else
		V.regs = r->next;
	if (r->next)
		r->next->prev = r->prev;
	free(r);
	f->reg = NULL;
}

static int register_frame(struct frame *f)
{
	struct vreg *r;

	if (f->reg)
		return 0;
	r = malloc(sizeof(*r));
	if (!r)
		return -ENOMEM;
	r->mr = ibv_reg_mr(V.pd, f->data, f->cap, IBV_ACCESS_LOCAL_WRITE);
	if (!r->mr) {
		int ret = -errno;

		free(r);
		return ret;
	}
	r->f = f;
	r->prev = NULL;
	r->next = V.regs;
	if (V.regs)
		V.regs->prev = r;
	V.regs = r;
	f->reg = r;
	f->lkey = r->mr->lkey;
	return 0;
}

/* Every frame registration goes, then the PD (the queue pairs, whose SENDs
 * used them, are gone already); frames are registered again when sent. */
static void release_pd(void)
{
	while (V.regs)
		unregister_frame(V.regs->f);
	if (V.pd)
		ibv_dealloc_pd(V.pd);
	V.pd = NULL;
}

/* --- link life --- */

static void free_link(struct vlink *v)
{
	if (v->id) {
		if (v->id->qp)
			rdma_destroy_qp(v->id);
		rdma_destroy_id(v->id);
	}
	if (v->rmr)
		ibv_dereg_mr(v->rmr);
	if (v->cmr)
		ibv_dereg_mr(v->cmr);
	free(v->rbuf);
	free(v->cbuf);
	V.slots[v->slot] = NULL;
	V.gen[v->slot]++;       /* completions still in the CQ now match nothing */
	free(v);
}

static void verbs_close(struct link *l);

/* Ends a link because of a failure: tells the peer layer once, then closes. */
static void fail(struct vlink *v, const char *why)
{
	if (v->dead)
		return;
	v->dead = 1;
	log_debug("verbs link %s: %s", v->addr, why);
	peer_link_down(&v->l, why);
	verbs_close(&v->l);
}

static struct vlink *new_link(struct rdma_cm_id *id, int outgoing)
{
	struct vlink *v = calloc(1, sizeof(*v));
	uint32_t s;

	if (!v)
		return NULL;
	for (s = 0; s < VERBS_MAX_LINKS && V.slots[s]; s++)
		;
	if (s == VERBS_MAX_LINKS) {
		free(v);
		return NULL;
	}
	v->slot = s;
	v->gen = V.gen[s] & 0xffffff;
	V.slots[s] = v;
	v->id = id;
	id->context = v;
	v->l.ops = &verbs_ops;
	v->l.outgoing = outgoing;
	v->l.state = outgoing ? LINK_CONNECTING : LINK_HANDSHAKE;
	v->cfree = (1u << VERBS_CTRL_SLOTS) - 1;
	v->credits = VERBS_RECV_BUFS;   /* the peer posts as many as we do */
	v->peer_max_frame = V.max_frame;
	return v;
}

static int post_recv(struct vlink *v, uint32_t idx)
{
	struct ibv_sge sge = {
		.addr = (uintptr_t)(v->rbuf + (size_t)idx * V.max_frame),
		.length = V.max_frame,
		.lkey = v->rmr->lkey,
	};
	struct ibv_recv_wr wr = { .wr_id = WR(v->gen, v->slot, 1, idx), .sg_list = &sge, .num_sge = 1 }, *bad;

	return ibv_post_recv(v->id->qp, &wr, &bad) ? -errno : 0;
}

/* Queue pair and buffers for a link whose id knows its device. */
static int setup_qp(struct vlink *v)
{
	struct ibv_qp_init_attr qa = {
		.send_cq = V.cq,
		.recv_cq = V.cq,
		.cap = { .max_send_wr = VERBS_SQ_DEPTH, .max_recv_wr = VERBS_RECV_BUFS,
			 .max_send_sge = 1, .max_recv_sge = 1 },
		.qp_type = IBV_QPT_RC,
	};
	size_t rbytes = (size_t)VERBS_RECV_BUFS * V.max_frame;

	if (v->id->verbs != V.ctx) {
		log_warn("verbs link %s: the peer is reachable only through another RDMA device", v->addr);
		return -EXDEV;
	}
	v->rbuf = malloc(rbytes);
	v->cbuf = malloc(VERBS_CTRL_SLOTS * VERBS_CTRL_BYTES);
	if (!v->rbuf || !v->cbuf)
		return -ENOMEM;
	v->rmr = ibv_reg_mr(V.pd, v->rbuf, rbytes, IBV_ACCESS_LOCAL_WRITE);
	v->cmr = ibv_reg_mr(V.pd, v->cbuf, VERBS_CTRL_SLOTS * VERBS_CTRL_BYTES, IBV_ACCESS_LOCAL_WRITE);
	if (!v->rmr || !v->cmr) {
		log_err("verbs link %s: registering %zu bytes of receive buffers: %m", v->addr, rbytes);
		return -ENOMEM;
	}
	if (rdma_create_qp(v->id, V.pd, &qa) < 0) {
		int ret = -errno;

		log_err("verbs link %s: rdma_create_qp: %m", v->addr);
		return ret;
	}
	for (uint32_t i = 0; i < VERBS_RECV_BUFS; i++) {
		int ret = post_recv(v, i);

		if (ret < 0) {
			log_err("verbs link %s: ibv_post_recv: %s", v->addr, strerror(-ret));
			return ret;
		}
	}
	return 0;
}

static void fill_priv(struct verbs_priv *p, uint32_t to)
{
	*p = (struct verbs_priv){ .magic = htole32(VERBS_MAGIC), .version = htole16(WIRE_VERSION),
				  .from = htole32(V.self), .to = htole32(to), .max_frame = htole32(V.max_frame) };
}

/* Checks a peer's private data; returns the peer's node id or -1. */
static int check_priv(const void *data, uint8_t len, uint32_t *max_frame_p, char *why, size_t whylen)
{
	struct verbs_priv p;

	if (!data || len < sizeof(p)) {
		snprintf(why, whylen, "no ferry identification in the connection request");
		return -1;
	}
	memcpy(&p, data, sizeof(p));
	if (le32toh(p.magic) != VERBS_MAGIC || le16toh(p.version) != WIRE_VERSION || p.reserved) {
		snprintf(why, whylen, "not a ferry %u connection", WIRE_VERSION);
		return -1;
	}
	if (le32toh(p.to) != V.self || le32toh(p.from) >= V.conf->nnodes) {
		snprintf(why, whylen, "meant for node %u from node %u; this is node %u", le32toh(p.to),
			 le32toh(p.from), V.self);
		return -1;
	}
	*max_frame_p = le32toh(p.max_frame);
	if (*max_frame_p < V.max_frame) {
		snprintf(why, whylen, "node %u receives frames up to %u bytes, this node sends up to %u "
			 "(aggregation.buffer_bytes differs)", le32toh(p.from), *max_frame_p, V.max_frame);
		return -1;
	}
	return (int)le32toh(p.from);
}

/* --- sending --- */

static int post_send(struct vlink *v, void *addr, uint32_t len, uint32_t lkey, uint32_t idx)
{
	struct ibv_sge sge = { .addr = (uintptr_t)addr, .length = len, .lkey = lkey };
	struct ibv_send_wr wr = {
		.wr_id = WR(v->gen, v->slot, 0, idx),
		.sg_list = &sge,
		.num_sge = 1,
		.opcode = IBV_WR_SEND_WITH_IMM,
		.send_flags = IBV_SEND_SIGNALED,
		.imm_data = htonl(v->credits_back),
	}, *bad;

	if (ibv_post_send(v->id->qp, &wr, &bad))
		return -errno;
	v->credits_back = 0;
	v->credits--;
	v->outstanding++;
	v->posted++;
	V.posted++;
	return 0;
}

static int queue_ctrl(struct vlink *v, const void *frame, size_t len)
{
	uint32_t s;

	if (len > VERBS_CTRL_BYTES || !v->cfree || v->ncq == VERBS_CTRL_SLOTS)
		return -ENOBUFS;
	s = (uint32_t)__builtin_ctz(v->cfree);
	v->cfree &= ~(1u << s);
	memcpy(v->cbuf + s * VERBS_CTRL_BYTES, frame, len);
	v->cq_pending[v->ncq] = s;
	v->cq_len[v->ncq++] = (uint32_t)len;
	return 0;
}

/* An ACK frame just to hand credits back (and the latest acknowledgement). */
static void credit_update(struct vlink *v)
{
	uint8_t buf[sizeof(struct wire_frame_hdr)];
	struct wire_frame_hdr h = { .version = WIRE_VERSION, .kind = WIRE_ACK,
				    .ack = v->l.peer ? v->l.peer->recv_seq : 0 };

	wire_encode_hdr(buf, &h);
	if (queue_ctrl(v, buf, sizeof(buf)) == 0 && v->l.peer)
		v->l.peer->ack_sent = h.ack;
}

/* Posts control frames, then the peer's frames, as credits allow. */
static void flush_out(struct vlink *v)
{
	struct peer *p = v->l.peer;

	if (v->dead || v->l.state == LINK_CONNECTING || !v->id->qp)
		return;
	while (v->ncq && v->credits > 0 && v->outstanding < VERBS_SQ_DEPTH) {
		uint32_t s = v->cq_pending[0], len = v->cq_len[0];

		if (post_send(v, v->cbuf + s * VERBS_CTRL_BYTES, len, v->cmr->lkey, WR_CTRL | s) < 0) {
			fail(v, "ibv_post_send failed");
			return;
		}
		memmove(v->cq_pending, v->cq_pending + 1, --v->ncq * sizeof(v->cq_pending[0]));
		memmove(v->cq_len, v->cq_len + 1, v->ncq * sizeof(v->cq_len[0]));
	}
	while (v->l.state == LINK_UP && p && p->send_cur && v->outstanding < VERBS_SQ_DEPTH) {
		struct frame *f = p->send_cur;

		if (v->credits <= VERBS_RESERVE) {
			v->credit_waits++;
			V.credit_waits++;
			break;
		}
		if (f->len > v->peer_max_frame || register_frame(f) < 0) {
			fail(v, f->len > v->peer_max_frame ? "frame larger than the peer receives" :
			     "cannot register a frame");
			return;
		}
		peer_tx_stamp(p, f->data);
		if (post_send(v, f->data, f->len, f->lkey, 0) < 0) {
			fail(v, "ibv_post_send failed");
			return;
		}
		peer_tx_advance(p, f->len - p->send_off);
	}
	/* Many credits to give back and nothing going out to carry them. */
	if (v->credits_back >= VERBS_RECV_BUFS / 2 && !v->ncq) {
		credit_update(v);
		if (v->ncq && v->credits > 0)
			flush_out(v);
	}
}

/* --- receiving --- */

/* Hands received frame idx to the peer layer.  Returns 1 if taken (buffer
 * posted again), 0 if the link pauses, -1 if the link failed. */
static int take(struct vlink *v, uint32_t idx, uint32_t len)
{
	uint8_t *buf = v->rbuf + (size_t)idx * V.max_frame;
	struct wire_frame_hdr h;
	int ret;

	if (len < sizeof(h) || wire_decode_hdr(buf, &h) < 0 || sizeof(h) + h.len != len) {
		log_warn("verbs link %s: malformed frame; closing", v->addr);
		fail(v, "malformed frame");
		return -1;
	}
	ret = peer_rx(&v->l, &h, buf + sizeof(h));
	if (v->dead)
		return -1;
	if (ret < 0) {
		fail(v, "protocol error");
		return -1;
	}
	if (ret == 0) {
		v->paused = 1;
		return 0;
	}
	v->l.frames_in++;
	if (post_recv(v, idx) < 0) {
		fail(v, "ibv_post_recv failed");
		return -1;
	}
	v->credits_back++;
	return 1;
}

/* Processes held frames in order while the peer takes them. */
static void drain_held(struct vlink *v)
{
	while (v->nheld && !v->paused) {
		int ret = take(v, v->held[0], v->held_len[0]);

		if (ret < 0)
			return;
		if (ret == 0)
			break;
		memmove(v->held, v->held + 1, --v->nheld * sizeof(v->held[0]));
		memmove(v->held_len, v->held_len + 1, v->nheld * sizeof(v->held_len[0]));
	}
}

static void on_completion(const struct ibv_wc *wc)
{
	uint32_t slot = WR_SLOT(wc->wr_id);
	struct vlink *v = slot < VERBS_MAX_LINKS ? V.slots[slot] : NULL;

	V.completed++;
	if (!v || v->dead || v->gen != WR_GEN(wc->wr_id))
		return;         /* a link that is gone */
	v->completed++;
	if (!v->touched) {      /* on_cq flushes it after the batch */
		v->touched = 1;
		V.touched[V.ntouched++] = slot;
	}
	if (wc->status != IBV_WC_SUCCESS) {
		char why[96];

		V.errors++;
		snprintf(why, sizeof(why), "%s completion: %s", WR_RECV(wc->wr_id) ? "receive" : "send",
			 ibv_wc_status_str(wc->status));
		if (wc->status != IBV_WC_WR_FLUSH_ERR)
			log_notice("verbs link %s: %s", v->addr, why);
		fail(v, why);
		return;
	}
	if (wc->wc_flags & IBV_WC_WITH_IMM)
		v->credits += ntohl(wc->imm_data);
	if (!WR_RECV(wc->wr_id)) {
		v->outstanding--;
		if (WR_IDX(wc->wr_id) & WR_CTRL)
			v->cfree |= 1u << (WR_IDX(wc->wr_id) & (WR_CTRL - 1));
		return;
	}
	if (v->nheld == VERBS_RECV_BUFS) {
		fail(v, "more receives than buffers");
		return;
	}
	v->held[v->nheld] = WR_IDX(wc->wr_id);
	v->held_len[v->nheld++] = wc->byte_len;
	drain_held(v);
}

static void on_cq(struct loop_watch *w, uint32_t events)
{
	struct ibv_cq *cq;
	void *cq_ctx;
	struct ibv_wc wc[32];
	int n;

	(void)w;
	(void)events;
	if (ibv_get_cq_event(V.cc, &cq, &cq_ctx) == 0) {
		ibv_ack_cq_events(cq, 1);
		if (ibv_req_notify_cq(cq, 0))
			log_err("ibv_req_notify_cq: %m");
	}
	while ((n = ibv_poll_cq(V.cq, 32, wc)) > 0) {
		for (int i = 0; i < n; i++)
			on_completion(&wc[i]);
	}
	/* Whatever the completions freed (credits, send slots) may now go out,
	 * on the links that had completions.  (A link that failed meanwhile has
	 * left its slot empty; no new link takes a slot before on_cm runs.) */
	for (uint32_t i = 0; i < V.ntouched; i++) {
		struct vlink *v = V.slots[V.touched[i]];

		if (v && v->touched) {
			v->touched = 0;
			flush_out(v);
		}
	}
	V.ntouched = 0;
	loop_kick();
}

/* --- link ops --- */

static void verbs_kick(struct link *l)
{
	flush_out((struct vlink *)l);
}

static int verbs_send_ctrl(struct link *l, const void *frame, size_t len)
{
	return queue_ctrl((struct vlink *)l, frame, len);
}

static void verbs_pause(struct link *l, int on)
{
	struct vlink *v = (struct vlink *)l;

	v->paused = on;
	if (!on) {
		drain_held(v);
		if (!v->dead)
			flush_out(v);
	}
}

static void verbs_close(struct link *l)
{
	struct vlink *v = (struct vlink *)l;

	v->dead = 1;
	if (v->id && v->id->qp)
		rdma_disconnect(v->id);
	free_link(v);
}

static void verbs_fault(struct link *l)
{
	struct vlink *v = (struct vlink *)l;
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_ERR };

	/* Break the queue pair as a failing link would: outstanding work
	 * completes with errors, the peer sees the connection go. */
	if (v->id && v->id->qp && ibv_modify_qp(v->id->qp, &a, IBV_QP_STATE))
		log_err("verbs link %s: ibv_modify_qp to ERR: %m", v->addr);
	loop_kick();
}

static void verbs_describe(const struct link *l, char *buf, size_t len)
{
	const struct vlink *v = (const struct vlink *)l;

	snprintf(buf, len, "verbs %s dev %s qp 0x%x, credits %u, to return %u, outstanding %u%s, "
		 "posted %llu, completions %llu, rnr waits %llu", v->addr,
		 V.ctx ? ibv_get_device_name(V.ctx->device) : "-", v->id && v->id->qp ? v->id->qp->qp_num : 0,
		 v->credits, v->credits_back, v->outstanding, v->paused ? ", paused" : "",
		 (unsigned long long)v->posted, (unsigned long long)v->completed,
		 (unsigned long long)v->credit_waits);
}

static const struct link_ops verbs_ops = {
	.name = "verbs",
	.kick = verbs_kick,
	.send_ctrl = verbs_send_ctrl,
	.pause = verbs_pause,
	.close = verbs_close,
	.fault = verbs_fault,
	.describe = verbs_describe,
};

/* --- connection management (rdma_cm events) --- */

static int resolve(const char *host, uint16_t port, struct sockaddr_storage *ss)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *res;
	char p[8];

	snprintf(p, sizeof(p), "%u", port);
	if (getaddrinfo(host, p, &hints, &res) != 0)
		return -EHOSTUNREACH;
	memcpy(ss, res->ai_addr, res->ai_addrlen);
	freeaddrinfo(res);
	return 0;
}

static int verbs_connect(struct peer *p, const char *host, uint16_t port, struct link **l_p)
{
	struct sockaddr_storage dst, src = V.self_sa;
	struct rdma_cm_id *id;
	struct vlink *v;

	if (!V.have_dev) {
		snprintf(p->last_error, sizeof(p->last_error), "no RDMA device");
		return -ENODEV;
	}
	if (resolve(host, port, &dst) < 0) {
		snprintf(p->last_error, sizeof(p->last_error), "cannot resolve %s", host);
		return -EHOSTUNREACH;
	}
	((struct sockaddr_in *)&src)->sin_port = 0;     /* any source port */
	if (rdma_create_id(V.ech, &id, NULL, RDMA_PS_TCP) < 0)
		return -errno;
	v = new_link(id, 1);
	if (!v) {
		rdma_destroy_id(id);
		return -ENOMEM;
	}
	v->l.peer = p;
	snprintf(v->addr, sizeof(v->addr), "%s:%u", host, port);
	if (rdma_resolve_addr(id, (struct sockaddr *)&src, (struct sockaddr *)&dst, VERBS_RESOLVE_MS) < 0) {
		int ret = -errno;

		snprintf(p->last_error, sizeof(p->last_error), "rdma_resolve_addr %s: %s", v->addr, strerror(errno));
		v->dead = 1;
		free_link(v);
		return ret;
	}
	*l_p = &v->l;
	return 0;
}

/* A connection request on the listener, from node `from` (or -1: why says
 * what is wrong with its identification). */
static void on_connect_request(struct rdma_cm_id *id, int from, uint32_t max_frame, const char *why)
{
	struct rdma_conn_param cp = { .responder_resources = 1, .initiator_depth = 1, .rnr_retry_count = 7 };
	struct verbs_priv mine;
	struct vlink *v;

	if (from < 0) {
		log_warn("verbs: connection refused: %s", why);
		rdma_reject(id, NULL, 0);
		rdma_destroy_id(id);
		return;
	}
	v = new_link(id, 0);
	if (!v) {
		rdma_reject(id, NULL, 0);
		rdma_destroy_id(id);
		return;
	}
	v->peer_max_frame = max_frame;
	snprintf(v->addr, sizeof(v->addr), "node %d", from);
	if (setup_qp(v) < 0) {
		rdma_reject(id, NULL, 0);
		v->dead = 1;
		free_link(v);
		return;
	}
	fill_priv(&mine, (uint32_t)from);
	cp.private_data = &mine;
	cp.private_data_len = sizeof(mine);
	if (rdma_accept(id, &cp) < 0) {
		log_warn("verbs: rdma_accept for node %d: %m", from);
		v->dead = 1;
		free_link(v);
		return;
	}
	/* The peer layer hears of it now, not at ESTABLISHED: the queue pair
	 * is ready to receive, and the connecting side's HELLO can complete on
	 * the CQ before that event is read from the event channel. */
	peer_link_accepted(&v->l);
}

static void teardown_device(const char *why);

static void on_cm(struct loop_watch *w, uint32_t events)
{
	struct rdma_cm_event *ev;

	(void)w;
	(void)events;
	while (rdma_get_cm_event(V.ech, &ev) == 0) {
		struct rdma_cm_event copy = *ev;
		struct vlink *v = ev->id && ev->id != V.listen_id ? ev->id->context : NULL;
		char why[48];

		if (copy.event == RDMA_CM_EVENT_CONNECT_REQUEST) {
			/* The private data lives in the event, so it is checked
			 * first; then the event is acked, since destroying the
			 * new id (on a refusal) waits for its events to be. */
			uint32_t max_frame = 0;
			char bad[160];
			int from = check_priv(ev->param.conn.private_data, ev->param.conn.private_data_len,
					      &max_frame, bad, sizeof(bad));

			rdma_ack_cm_event(ev);
			on_connect_request(copy.id, from, max_frame, bad);
			continue;
		}
		if (copy.event == RDMA_CM_EVENT_ESTABLISHED && v && !v->dead) {
			uint32_t max_frame = V.max_frame;
			char bad[160];
			int from = v->l.outgoing ? check_priv(copy.param.conn.private_data,
							      copy.param.conn.private_data_len, &max_frame,
							      bad, sizeof(bad)) : 0;

			rdma_ack_cm_event(ev);
			if (from < 0) {
				log_warn("verbs link %s: %s", v->addr, bad);
				fail(v, "the peer's identification does not fit");
				continue;
			}
			if (v->l.outgoing) {
				v->peer_max_frame = max_frame;
				v->l.state = LINK_HANDSHAKE;
				peer_link_connected(&v->l);     /* queues our HELLO */
			}
			if (!v->dead)
				flush_out(v);
			continue;
		}
		rdma_ack_cm_event(ev);
		if (copy.event == RDMA_CM_EVENT_DEVICE_REMOVAL) {
			teardown_device("the RDMA device was removed");
			continue;
		}
		if (!v || v->dead)
			continue;
		switch (copy.event) {
		case RDMA_CM_EVENT_ADDR_RESOLVED:
			if (rdma_resolve_route(v->id, VERBS_RESOLVE_MS) < 0)
				fail(v, "rdma_resolve_route failed");
			break;
		case RDMA_CM_EVENT_ROUTE_RESOLVED: {
			struct rdma_conn_param cp = { .responder_resources = 1, .initiator_depth = 1,
						      .retry_count = VERBS_RETRY_COUNT, .rnr_retry_count = 7 };
			struct verbs_priv mine;

			if (setup_qp(v) < 0) {
				fail(v, "cannot set up the queue pair");
				break;
			}
			fill_priv(&mine, v->l.peer->node);
			cp.private_data = &mine;
			cp.private_data_len = sizeof(mine);
			if (rdma_connect(v->id, &cp) < 0)
				fail(v, "rdma_connect failed");
			break;
		}
		case RDMA_CM_EVENT_ADDR_ERROR:
		case RDMA_CM_EVENT_ROUTE_ERROR:
		case RDMA_CM_EVENT_CONNECT_ERROR:
		case RDMA_CM_EVENT_UNREACHABLE:
		case RDMA_CM_EVENT_REJECTED:
		case RDMA_CM_EVENT_DISCONNECTED:
			snprintf(why, sizeof(why), "%s", rdma_event_str(copy.event));
			if (v->l.peer && copy.event != RDMA_CM_EVENT_DISCONNECTED)
				snprintf(v->l.peer->last_error, sizeof(v->l.peer->last_error), "%s: %s", v->addr, why);
			fail(v, why);
			break;
		default:
			break;
		}
	}
}

/* A queue pair learns that its peer is gone only when it sends: a SEND to
 * a dead node or across a silent partition completes with an error once the
 * transport's retries are spent (seconds), and the link fails.  So a link
 * that posted nothing for a keepalive interval sends an ACK frame, as TCP
 * keepalive probes an idle connection.  (A link with no credits left and
 * nothing outstanding cannot probe; its peer is then holding our frames
 * and will be noticed when it hands credits back or its link fails.) */
static void on_keepalive(struct loop_timer *t)
{
	for (uint32_t s = 0; s < VERBS_MAX_LINKS; s++) {
		struct vlink *v = V.slots[s];
		uint32_t gen = V.gen[s];

		if (!v || v->dead || v->l.state != LINK_UP)
			continue;
		if (v->posted == v->posted_seen && !v->ncq) {
			credit_update(v);
			flush_out(v);
			if (V.gen[s] != gen)
				continue;       /* failed and freed */
		}
		v->posted_seen = v->posted;
	}
	loop_timer_arm(t, VERBS_KEEPALIVE_NS, on_keepalive, NULL);
}

/* --- device --- */

static void on_async(struct loop_watch *w, uint32_t events)
{
	struct ibv_async_event ae;

	(void)w;
	(void)events;
	if (ibv_get_async_event(V.ctx, &ae))
		return;
	switch (ae.event_type) {
	case IBV_EVENT_PORT_ERR:
		log_warn("RDMA device %s port %d is down; links over it will fail and be retried",
			 ibv_get_device_name(V.ctx->device), ae.element.port_num);
		break;
	case IBV_EVENT_PORT_ACTIVE:
		log_notice("RDMA device %s port %d is up again", ibv_get_device_name(V.ctx->device),
			   ae.element.port_num);
		break;
	case IBV_EVENT_DEVICE_FATAL:
		log_err("RDMA device %s reports a fatal error", ibv_get_device_name(V.ctx->device));
		break;
	default:
		log_debug("RDMA async event: %s", ibv_event_type_str(ae.event_type));
	}
	ibv_ack_async_event(&ae);
	if (ae.event_type == IBV_EVENT_DEVICE_FATAL) {
		teardown_device("fatal device error");
	} else if (ae.event_type == IBV_EVENT_PORT_ERR) {
		/* An idle queue pair would not notice for a long time: end the
		 * links now; reconnection attempts go on (and fail) until the
		 * port is back, and what was not acknowledged is sent again. */
		for (uint32_t s = 0; s < VERBS_MAX_LINKS; s++)
			if (V.slots[s])
				fail(V.slots[s], "the RDMA port went down");
	}
}

static int setup_device(struct ibv_context *ctx)
{
	int fl;

	V.cc_w.fd = V.async_w.fd = -1;  /* not in the loop yet */
	V.ctx = ctx;
	V.pd = ibv_alloc_pd(ctx);
	V.cc = V.pd ? ibv_create_comp_channel(ctx) : NULL;
	V.cq = V.cc ? ibv_create_cq(ctx, VERBS_MAX_LINKS > 64 ? 64 * VERBS_SQ_DEPTH * 2 : 4096, NULL, V.cc, 0) : NULL;
	if (!V.cq) {
		log_err("RDMA device %s: allocating PD/completion channel/CQ: %m", ibv_get_device_name(ctx->device));
		return -ENOMEM;
	}
	if (ibv_req_notify_cq(V.cq, 0)) {
		log_err("ibv_req_notify_cq: %m");
		return -EIO;
	}
	fl = fcntl(V.cc->fd, F_GETFL);
	fcntl(V.cc->fd, F_SETFL, fl | O_NONBLOCK);
	fl = fcntl(ctx->async_fd, F_GETFL);
	fcntl(ctx->async_fd, F_SETFL, fl | O_NONBLOCK);
	if (loop_add(&V.cc_w, V.cc->fd, EPOLLIN, on_cq, NULL) < 0 ||
	    loop_add(&V.async_w, ctx->async_fd, EPOLLIN, on_async, NULL) < 0)
		return -EIO;
	frame_unregister = unregister_frame;
	V.have_dev = 1;
	return 0;
}

static void release_device(void)
{
	if (V.cq) {
		loop_del(&V.cc_w);
		loop_del(&V.async_w);
		ibv_destroy_cq(V.cq);
	}
	if (V.cc)
		ibv_destroy_comp_channel(V.cc);
	release_pd();
	V.cq = NULL;
	V.cc = NULL;
	V.ctx = NULL;           /* librdmacm's; closed once its ids are gone */
	V.have_dev = 0;
}

/* Binds and listens on the node's address; sets up the device it is on.
 * On failure nothing is left set up.  While the device is being retried
 * (V.retrying) its absence is logged at debug level only. */
static int start(void)
{
	int prio = V.retrying ? LOG_DEBUG : LOG_NOTICE, ret;
	const char *dev;

	if (rdma_create_id(V.ech, &V.listen_id, NULL, RDMA_PS_TCP) < 0) {
		ret = -errno;
		log_msg(prio, "verbs: rdma_create_id: %m");
		V.listen_id = NULL;
		return ret;
	}
	errno = 0;
	if (rdma_bind_addr(V.listen_id, (struct sockaddr *)&V.self_sa) < 0 || !V.listen_id->verbs) {
		log_msg(prio, "verbs: node %u's address %s is not on an RDMA device (%s)", V.self,
			V.conf->nodes[V.self].host, errno ? strerror(errno) : "no RDMA device holds it");
		ret = -ENODEV;
		goto fail;
	}
	dev = ibv_get_device_name(V.listen_id->verbs->device);
	if (V.conf->verbs_device[0] && strcmp(V.conf->verbs_device, dev)) {
		log_err("verbs: node %u's address is on RDMA device %s, transport.device says %s", V.self, dev,
			V.conf->verbs_device);
		ret = -ENODEV;
		goto fail;
	}
	ret = setup_device(V.listen_id->verbs);
	if (ret < 0)
		goto fail;
	if (rdma_listen(V.listen_id, 64) < 0) {
		ret = -errno;
		log_err("verbs: rdma_listen on %s port %u: %m", V.conf->nodes[V.self].host, V.conf->nodes[V.self].port);
		goto fail;
	}
	log_notice("verbs: RDMA device %s, listening on %s port %u", dev, V.conf->nodes[V.self].host,
		   V.conf->nodes[V.self].port);
	return 0;
fail:
	rdma_destroy_id(V.listen_id);
	V.listen_id = NULL;
	release_device();
	return ret;
}

/* librdmacm closes a device that went away only when it next reads the list
 * of devices, and only once nothing of it is in use any more: make it read
 * the list, so that a removal waiting for the device's users can complete. */
static void forget_removed_devices(void)
{
	struct ibv_context **l = rdma_get_devices(NULL);

	if (l)
		rdma_free_devices(l);
}

static void on_reinit(struct loop_timer *t)
{
	forget_removed_devices();
	V.retrying = 1;
	if (start() < 0) {
		loop_timer_arm(t, VERBS_REINIT_NS, on_reinit, NULL);
		return;
	}
	V.retrying = 0;
}

static void teardown_device(const char *why)
{
	log_err("verbs: %s; every RDMA link ends, retrying the device every %llu s", why,
		(unsigned long long)(VERBS_REINIT_NS / 1000000000u));
	for (uint32_t s = 0; s < VERBS_MAX_LINKS; s++)
		if (V.slots[s])
			fail(V.slots[s], why);
	if (V.listen_id) {
		rdma_destroy_id(V.listen_id);
		V.listen_id = NULL;
	}
	release_device();
	forget_removed_devices();
	loop_timer_arm(&V.reinit, VERBS_REINIT_NS, on_reinit, NULL);
}

static int verbs_listen(const struct conf *c, uint32_t self)
{
	struct ibv_device **devs;
	int n, ret;

	V.conf = c;
	V.self = self;
	V.max_frame = (uint32_t)(sizeof(struct wire_frame_hdr) +
				 (c->buffer_bytes > wire_item_footprint(PROTO_FRAG_BYTES) ?
				  c->buffer_bytes : wire_item_footprint(PROTO_FRAG_BYTES)));
	devs = ibv_get_device_list(&n);
	if (devs)
		ibv_free_device_list(devs);
	if (!devs || n == 0) {
		log_notice("verbs: no RDMA device on this machine");
		return -ENODEV;
	}
	if (resolve(c->nodes[self].host, c->nodes[self].port, &V.self_sa) < 0 ||
	    V.self_sa.ss_family != AF_INET) {
		log_notice("verbs: cannot resolve node %u's host %s to an IPv4 address", self, c->nodes[self].host);
		return -EHOSTUNREACH;
	}
	V.ech = rdma_create_event_channel();
	if (!V.ech) {
		ret = -errno;
		log_notice("verbs: rdma_create_event_channel: %m (is rdma_ucm loaded?)");
		return ret;
	}
	n = fcntl(V.ech->fd, F_GETFL);
	fcntl(V.ech->fd, F_SETFL, n | O_NONBLOCK);
	if (loop_add(&V.ech_w, V.ech->fd, EPOLLIN, on_cm, NULL) < 0) {
		rdma_destroy_event_channel(V.ech);
		V.ech = NULL;
		return -EIO;
	}
	ret = start();
	if (ret == 0)
		loop_timer_arm(&V.keepalive, VERBS_KEEPALIVE_NS, on_keepalive, NULL);
	if (ret < 0) {
		loop_del(&V.ech_w);
		frame_unregister = NULL;
		rdma_destroy_event_channel(V.ech);
		V.ech = NULL;
	}
	return ret;
}

static void verbs_fini(void)
{
	loop_timer_cancel(&V.reinit);
	loop_timer_cancel(&V.keepalive);
	for (uint32_t s = 0; s < VERBS_MAX_LINKS; s++)
		if (V.slots[s]) {
			V.slots[s]->dead = 1;
			free_link(V.slots[s]);
		}
	if (V.listen_id)
		rdma_destroy_id(V.listen_id);
	V.listen_id = NULL;
	release_device();       /* deregisters the frames still registered */
	frame_unregister = NULL;
	if (V.ech) {
		loop_del(&V.ech_w);
		rdma_destroy_event_channel(V.ech);
	}
	V.ech = NULL;
}

/* verbs_rnr_waits: times a frame waited because the peer had no receive
 * buffer free for it (no credit).  Credits keep the hardware from ever
 * meeting a receiver that is not ready, so this is where such waits show. */
static void verbs_write_stats(FILE *out)
{
	fprintf(out, "verbs_device %s\nverbs_posted_sends %llu\nverbs_completions %llu\n"
		"verbs_rnr_waits %llu\nverbs_error_completions %llu\n",
		V.ctx ? ibv_get_device_name(V.ctx->device) : "-", (unsigned long long)V.posted,
		(unsigned long long)V.completed, (unsigned long long)V.credit_waits,
		(unsigned long long)V.errors);
}

const struct transport transport_verbs = {
	.name = "verbs",
	.listen = verbs_listen,
	.connect = verbs_connect,
	.fini = verbs_fini,
	.write_stats = verbs_write_stats,
};
