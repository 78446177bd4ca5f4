/* daemon/net/verbs_qp.c - the links of the verbs transport: queue pairs, the
 * data path with credits, completions, the link ops and the keepalive; see
 * verbs.h for the design.
 *
 * Ownership.  A link's buffers (control slots and pre-authentication receive
 * buffers, receive buffers, sealing buffers) and their registrations are the
 * link's, freed in verbs_link_end after its queue pair is destroyed, so no
 * work request can still use them.  A frame posted as a SEND from its own
 * memory is the peer layer's (frame.h), but each posted SEND holds it
 * (frame_hold, the slot in v->sent[] is named by the wr_id) until that SEND's
 * completion is reaped here, or, for SENDs that never complete (the link
 * ended, its completions are ignored), until verbs_link_end has destroyed
 * the queue pair.  The peer layer may meanwhile free the frame (its ack can
 * be reaped before the SEND's completion); frame_free then leaves it to the
 * last frame_unhold, so the memory is neither reused, freed nor deregistered
 * while the device may read it.  The link itself is freed by the loop
 * (loop_bury) once it is dead.
 */
#include "verbs.h"
#include "../core/log.h"

#include <arpa/inet.h>
#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* wr_id: a generation, a link slot, receive or send, and a buffer index, so
 * that completions of a link that is gone are recognised and ignored. */
#define WR(gen, slot, recv, idx) (((uint64_t)(gen) << 40) | ((uint64_t)(slot) << 20) | \
				  ((uint64_t)(recv) << 19) | (uint64_t)(idx))
#define WR_GEN(w)  ((uint32_t)((w) >> 40))
#define WR_SLOT(w) ((uint32_t)(((w) >> 20) & 0xfffff))
#define WR_RECV(w) ((int)(((w) >> 19) & 1))
#define WR_IDX(w)  ((uint32_t)((w) & 0x7ffff))
#define WR_CTRL    0x40000u             /* send idx: a control slot (ORed with its number) */
#define WR_SEAL    0x20000u             /* send idx: a sealing buffer (ORed with its number) */
#define WR_FRAME   0x10000u             /* send idx: a held frame, v->sent[number] */
#define WR_PROBE   0x08000u             /* send idx: the liveness probe (on_keepalive) */

static struct {
	struct vlink *slots[VERBS_MAX_LINKS];
	uint32_t count;                 /* occupied slots */
	uint32_t gen[VERBS_MAX_LINKS];
	uint32_t touched[VERBS_MAX_LINKS], ntouched;    /* slots of links with completions */
	struct loop_timer keepalive;
	struct loop_timer drain;        /* polls the CQ after a link ended (cq_budget) */
	uint64_t ended_wr;              /* completions ended links may still have in the CQ */
	uint64_t posted, completed, credit_waits, errors, keepalives, probes;
	uint64_t late_frees;            /* frames freed by their owner before their SEND completed */
	uint64_t reg_bytes;             /* the links' own registered buffers */
	uint64_t born;                  /* accepted links so far */
	uint64_t evicted;               /* unauthenticated strangers ended for a node of the cluster */
} links;

static const struct link_ops verbs_ops;
static void on_drain(struct loop_timer *t);

/* --- link life --- */

static void link_free(struct loop_grave *g)
{
	free((struct vlink *)((char *)g - offsetof(struct vlink, grave)));
}

/* A link's own buffers: bytes of memory, registered for local writes (the
 * device reads and writes them; no remote access), counted in reg_bytes.
 * Returns the registration, with *buf_p the memory, or NULL (logged; what
 * was allocated is in *buf_p for buffers_free). */
static struct ibv_mr *buffers_new(struct vlink *v, uint8_t **buf_p, size_t bytes, const char *what)
{
	struct ibv_mr *mr;

	*buf_p = malloc(bytes);
	mr = *buf_p ? ibv_reg_mr(verbs.pd, *buf_p, bytes, IBV_ACCESS_LOCAL_WRITE) : NULL;
	if (!mr) {
		log_rl_warn("verbs link %s: registering %zu bytes of %s: %m", v->addr, bytes, what);
		return NULL;
	}
	links.reg_bytes += bytes;
	return mr;
}

static void buffers_free(struct ibv_mr **mr_p, uint8_t **buf_p)
{
	if (*mr_p) {
		links.reg_bytes -= (*mr_p)->length;
		ibv_dereg_mr(*mr_p);
	}
	free(*buf_p);
	*mr_p = NULL;
	*buf_p = NULL;
}

void verbs_link_end(struct vlink *v)
{
	if (v->dead)
		return;
	v->dead = 1;
	v->l.dead = 1;
	if (v->id) {
		if (v->id->qp) {
			/* Its work requests without a completion may still
			 * complete (flushed) into the shared CQ, or be there
			 * already: their room stays taken (cq_budget). */
			links.ended_wr += v->outstanding + (uint32_t)v->probing + v->rq_out;
			loop_timer_arm(&links.drain, 0, on_drain, NULL);
			rdma_disconnect(v->id);
			rdma_destroy_qp(v->id);
		}
		rdma_destroy_id(v->id);
		v->id = NULL;
	}
	/* The queue pair is gone: nothing reads the frames its SENDs held. */
	for (uint32_t i = 0; i < VERBS_SQ_DEPTH; i++)
		if (v->sent_used & (1ull << i))
			frame_unhold(v->sent[i]);
	v->sent_used = 0;
	buffers_free(&v->rmr, &v->rbuf);
	buffers_free(&v->cmr, &v->cbuf);
	buffers_free(&v->smr, &v->sbuf);
	v->nheld = v->ncq = 0;
	links.count--;
	links.slots[v->slot] = NULL;
	links.gen[v->slot]++;       /* completions still in the CQ now match nothing */
	loop_bury(&v->grave, link_free);
}

void verbs_link_fail(struct vlink *v, const char *why)
{
	if (v->dead)
		return;
	log_debug("verbs link %s: %s", v->addr, why);
	verbs_link_end(v);
	verbs.ev->down(&v->l, why);
}

/* Whether the CQ has room for one more link.  Every link may have all its
 * work requests' completions in the CQ at once (VERBS_WR_PER_LINK; the CQ
 * holds verbs.max_links of those, verbs_dev.c), and a CQ that overflows is
 * dead (IBV_EVENT_CQ_ERR ends every link).  A link that ended does not give
 * its room back at once: rdma_disconnect moves its queue pair to the error
 * state, which flushes every work request without a completion into the
 * CQ, and destroying the queue pair leaves there what is there (rxe too).
 * So verbs_link_end adds the link's work requests without a completion to
 * links.ended_wr, and that room is free again only once the CQ has been
 * polled empty after the queue pair was destroyed: once ibv_destroy_qp has
 * returned, no completion of it can be added any more (the provider has
 * stopped its processing of the queue pair), so all of them were read by
 * then.  on_drain polls soon after an end (links.drain), so the room comes
 * back even when no other link has completions; until then, near
 * max_links, a connection is refused (and retried) rather than the CQ
 * overrun. */
static int cq_budget(void)
{
	return (uint64_t)(links.count + 1) * VERBS_WR_PER_LINK + links.ended_wr <=
	       (uint64_t)verbs.max_links * VERBS_WR_PER_LINK;
}

struct vlink *verbs_link_new(struct rdma_cm_id *id, int outgoing)
{
	struct vlink *v = calloc(1, sizeof(*v));
	uint32_t s;

	if (!v)
		return NULL;
	for (s = 0; s < VERBS_MAX_LINKS && links.slots[s]; s++)
		;
	if (!cq_budget() || s == VERBS_MAX_LINKS) {
		log_rl_warn("verbs: %u links already and %llu completions of ended ones not read yet, as many as "
			    "the completion queue holds; connection refused", links.count,
			    (unsigned long long)links.ended_wr);
		free(v);
		return NULL;
	}
	links.count++;
	v->slot = s;
	v->gen = links.gen[s] & 0xffffff;
	links.slots[s] = v;
	v->id = id;
	id->context = v;
	v->l.ops = &verbs_ops;
	v->l.outgoing = outgoing;
	v->l.state = outgoing ? LINK_CONNECTING : LINK_HANDSHAKE;
	v->cfree = (1u << VERBS_CTRL_SLOTS) - 1;
	/* The peer starts with as many small buffers as we do (verbs.h). */
	v->credits = v->small_left = VERBS_PREAUTH_BUFS;
	if (!outgoing)
		v->born = ++links.born;
	v->peer_max_frame = verbs.max_frame;
	return v;
}

/* Receive buffer idx: one of the full set (idx < VERBS_RECV_BUFS), or a
 * small one for before authentication, behind the control slots. */
static uint8_t *rx_buf(const struct vlink *v, uint32_t idx)
{
	if (idx < VERBS_RECV_BUFS)
		return v->rbuf + (size_t)idx * verbs.max_frame;
	return v->cbuf + (size_t)(VERBS_CTRL_SLOTS + idx - VERBS_RECV_BUFS) * VERBS_CTRL_BYTES;
}

static int post_recv(struct vlink *v, uint32_t idx)
{
	int small = idx >= VERBS_RECV_BUFS;
	struct ibv_sge sge = {
		.addr = (uintptr_t)rx_buf(v, idx),
		.length = small ? VERBS_CTRL_BYTES : verbs.max_frame,
		.lkey = small ? v->cmr->lkey : v->rmr->lkey,
	};
	struct ibv_recv_wr wr = { .wr_id = WR(v->gen, v->slot, 1, idx), .sg_list = &sge, .num_sge = 1 }, *bad;
	/* ibv_post_* return an errno value themselves (not -1 and errno). */
	int ret = ibv_post_recv(v->id->qp, &wr, &bad);

	if (ret)
		return -ret;
	v->rq_out++;
	return 0;
}

/* Until the link has authenticated it has only the small receive buffers
 * (verbs.h, Before authentication): anyone may get this far. */
int verbs_link_setup(struct vlink *v)
{
	struct ibv_qp_init_attr qa = {
		.send_cq = verbs.cq,
		.recv_cq = verbs.cq,
		.cap = { .max_send_wr = VERBS_SQ_WRS, .max_recv_wr = VERBS_RQ_DEPTH,
			 .max_send_sge = 1, .max_recv_sge = 1 },
		.qp_type = IBV_QPT_RC,
	};
	size_t cbytes = (size_t)(VERBS_CTRL_SLOTS + VERBS_PREAUTH_BUFS) * VERBS_CTRL_BYTES;

	if (v->id->verbs != verbs.ctx) {
		log_rl_warn("verbs link %s: the peer is reachable only through another RDMA device", v->addr);
		return -EXDEV;
	}
	v->cmr = buffers_new(v, &v->cbuf, cbytes, "control buffers");
	if (!v->cmr)
		return -ENOMEM;
	if (rdma_create_qp(v->id, verbs.pd, &qa) < 0) {
		int ret = -errno;

		log_rl_warn("verbs link %s: rdma_create_qp: %m", v->addr);
		return ret;
	}
	for (uint32_t i = 0; i < VERBS_PREAUTH_BUFS; i++) {
		int ret = post_recv(v, VERBS_RECV_BUFS + i);

		if (ret < 0) {
			log_rl_warn("verbs link %s: ibv_post_recv: %s", v->addr, strerror(-ret));
			return ret;
		}
	}
	return 0;
}

/* The link has authenticated: the full set of receive buffers, posted behind
 * the small ones and handed to the peer as credits. */
static int grow(struct vlink *v)
{
	size_t rbytes = (size_t)VERBS_RECV_BUFS * verbs.max_frame;

	v->rmr = buffers_new(v, &v->rbuf, rbytes, "receive buffers");
	if (!v->rmr)
		return -ENOMEM;
	for (uint32_t i = 0; i < VERBS_RECV_BUFS; i++) {
		int ret = post_recv(v, i);

		if (ret < 0) {
			log_rl_warn("verbs link %s: ibv_post_recv: %s", v->addr, strerror(-ret));
			return ret;
		}
	}
	v->credits_back += VERBS_RECV_BUFS;
	return 0;
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
	int ret = ibv_post_send(v->id->qp, &wr, &bad);

	if (ret)
		return -ret;
	v->credits_back = 0;
	v->credits--;
	if (v->small_left)
		v->small_left--;
	v->outstanding++;
	v->posted++;
	links.posted++;
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
	if (!v->cfree || v->ncq == VERBS_CTRL_SLOTS)
		return;         /* no room: the next one carries it */
	verbs.ev->send_ack(&v->l);      /* through verbs_send_ctrl */
}

/* Whether a SEND may take a credit now; data frames leave VERBS_RESERVE to
 * ACK frames (sequence acks and credits must get through while data waits).
 *
 * The last credit goes only to a SEND that hands credits back.  Why: a side
 * whose receive side is paused (its local destination is full, the last
 * resort of flow control) holds every buffer the other side fills and posts
 * none again, so the other side runs out of credits; meanwhile the paused
 * side's own SENDs (data, ACKs, a keepalive every 5 s) spend its credits,
 * which only the other side's SENDs return.  If both reached zero, the
 * paused side, once it drains, would have buffers to hand back and no credit
 * to say so, and the other side the same: both wait for ever.  With this
 * rule a side spends its last credit only on a SEND whose immediate data
 * gives the other side at least one credit, counted when that SEND's
 * completion is reaped (on_completion), whether or not the frame must then
 * wait behind paused data; so of the two sides one always holds a credit,
 * and a side with buffers to return always can say so.  Nothing has to be
 * read out of order: credits travel in the immediate data, outside the
 * frames, whose sequence acks are opened in order (their nonces are the link's
 * frame count) once the pause ends.  Cost: a side may keep one credit
 * unused while it has nothing to return; keepalives of a link whose peer
 * holds every buffer stop one credit earlier. */
static int may_post(const struct vlink *v, int data)
{
	if (data)
		return v->credits > VERBS_RESERVE;
	return v->credits > 1 || (v->credits == 1 && v->credits_back > 0);
}

/* An encrypting link seals its frames into buffers of its own (link.h), one
 * per SEND in flight, registered once, when it first sends. */
static int seal_setup(struct vlink *v)
{
	size_t bytes = (size_t)VERBS_SEAL_BUFS * verbs.max_frame;

	v->smr = buffers_new(v, &v->sbuf, bytes, "sealing buffers");
	if (!v->smr)
		return -ENOMEM;
	v->sfree = VERBS_SEAL_BUFS == 32 ? UINT32_MAX : (1u << VERBS_SEAL_BUFS) - 1;
	return 0;
}

/* Posts control frames, then the peer's frames, as credits allow.  A frame
 * that does not fit the peer's small pre-authentication buffers waits until
 * our SENDs have used them up (verbs.h): ACK frames fill them. */
void verbs_link_flush(struct vlink *v)
{
	struct frame *f;
	uint32_t off;

	if (v->dead || v->l.state == LINK_CONNECTING || !v->id->qp)
		return;
again:
	while (v->ncq && may_post(v, 0) && v->outstanding < VERBS_SQ_DEPTH) {
		uint32_t s = v->cq_pending[0], len = v->cq_len[0];

		/* Sealed now, in the order the frames go out (link.h). */
		verbs.ev->tx_seal(&v->l, v->cbuf + s * VERBS_CTRL_BYTES, v->cbuf + s * VERBS_CTRL_BYTES);
		if (post_send(v, v->cbuf + s * VERBS_CTRL_BYTES, len, v->cmr->lkey, WR_CTRL | s) < 0) {
			verbs_link_fail(v, "ibv_post_send failed");
			return;
		}
		memmove(v->cq_pending, v->cq_pending + 1, --v->ncq * sizeof(v->cq_pending[0]));
		memmove(v->cq_len, v->cq_len + 1, v->ncq * sizeof(v->cq_len[0]));
	}
	while ((f = verbs.ev->tx_first(&v->l, &off)) && v->outstanding < VERBS_SQ_DEPTH) {
		uint8_t *from = f->data;
		uint32_t lkey, idx, s;

		if (!may_post(v, 1)) {
			v->credit_waits++;
			links.credit_waits++;
			break;
		}
		assert(!f->lent);       /* never here: transport_verbs.sends_lent is 0 */
		if (f->len > v->peer_max_frame) {
			verbs_link_fail(v, "frame larger than the peer receives");
			return;
		}
		if (v->small_left && f->len > VERBS_CTRL_BYTES) {
			/* An ACK frame takes the next small buffer. */
			if (!v->ncq) {
				credit_update(v);
				if (v->ncq)
					goto again;
			}
			break;
		}
		if (v->l.encrypt) {
			/* Sealed into a buffer of the link's; the frame keeps
			 * its plaintext for a resend on another link. */
			if (!v->sbuf && seal_setup(v) < 0) {
				verbs_link_fail(v, "cannot register the sealing buffers");
				return;
			}
			if (!v->sfree)
				break;          /* a SEND completion frees one */
			s = (uint32_t)__builtin_ctz(v->sfree);
			from = v->sbuf + (size_t)s * verbs.max_frame;
			lkey = v->smr->lkey;
			idx = WR_SEAL | s;
		} else {
			if (verbs_mr_register(f) < 0) {
				verbs_link_fail(v, "cannot register a frame");
				return;
			}
			/* outstanding < VERBS_SQ_DEPTH: a sent[] slot is free. */
			s = (uint32_t)__builtin_ctzll(~v->sent_used);
			assert(s < VERBS_SQ_DEPTH);
			lkey = f->lkey;
			idx = WR_FRAME | s;
		}
		verbs.ev->tx_seal(&v->l, f->data, from);
		if (post_send(v, from, f->len, lkey, idx) < 0) {
			verbs_link_fail(v, "ibv_post_send failed");
			return;
		}
		if (idx & WR_SEAL) {
			v->sfree &= ~(1u << s);
		} else {
			frame_hold(f);  /* until the completion (see Ownership) */
			v->sent[s] = f;
			v->sent_used |= 1ull << s;
		}
		verbs.ev->tx_done(&v->l, f->len - off);
	}
	/* Many credits to give back and nothing going out to carry them. */
	if (v->credits_back >= VERBS_RECV_BUFS / 2 && !v->ncq) {
		credit_update(v);
		if (v->ncq && may_post(v, 0))
			goto again;
	}
}

/* --- receiving --- */

/* Hands received frame idx to the peer layer.  Returns 1 if taken (buffer
 * posted again), 0 if the link pauses, -1 if the link failed. */
static int take(struct vlink *v, uint32_t idx, uint32_t len)
{
	uint8_t *buf = rx_buf(v, idx);
	struct wire_frame_hdr h;
	int ret;

	if (len >= sizeof(h) && wire_hdr_version(buf) != WIRE_VERSION) {
		log_rl_warn("verbs link %s: the peer speaks wire protocol version %u, this ferryd (ferry %s) version "
			    "%u: every node must run the same ferry release; closing", v->addr, wire_hdr_version(buf),
			    FERRY_VERSION, WIRE_VERSION);
		verbs_link_fail(v, "another wire protocol version");
		return -1;
	}
	if (len < sizeof(h) || wire_decode_hdr(buf, &h) < 0 || sizeof(h) + h.len != len) {
		log_rl_warn("verbs link %s: malformed frame; closing", v->addr);
		verbs_link_fail(v, "malformed frame");
		return -1;
	}
	ret = verbs.ev->rx(&v->l, &h, buf);
	if (v->dead)
		return -1;
	if (ret < 0) {
		verbs_link_fail(v, "protocol error");
		return -1;
	}
	if (ret == 0) {
		v->paused = 1;
		return 0;
	}
	v->l.frames_in++;
	if (idx < VERBS_RECV_BUFS) {
		if (post_recv(v, idx) < 0) {
			verbs_link_fail(v, "ibv_post_recv failed");
			return -1;
		}
		v->credits_back++;
	}
	/* (A small pre-authentication buffer is used once.)  The frame may
	 * have been the AUTH that brought the link up: the full set now. */
	if (v->l.state == LINK_UP && !v->rmr && grow(v) < 0) {
		verbs_link_fail(v, "cannot set up the receive buffers");
		return -1;
	}
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
	struct vlink *v = slot < VERBS_MAX_LINKS ? links.slots[slot] : NULL;

	links.completed++;
	if (!v || v->dead || v->gen != WR_GEN(wc->wr_id))
		return;         /* a link that is gone */
	v->completed++;
	/* Work requests without a completion (cq_budget), the one just reaped
	 * no longer among them, whatever its status. */
	if (WR_RECV(wc->wr_id))
		v->rq_out--;
	else if (WR_IDX(wc->wr_id) == WR_PROBE)
		v->probing = 0;
	else
		v->outstanding--;
	if (!v->touched) {      /* on_cq flushes it after the batch */
		v->touched = 1;
		links.touched[links.ntouched++] = slot;
	}
	if (wc->status != IBV_WC_SUCCESS) {
		char why[96];

		links.errors++;
		snprintf(why, sizeof(why), "%s completion: %s", WR_RECV(wc->wr_id) ? "receive" : "send",
			 ibv_wc_status_str(wc->status));
		if (wc->status != IBV_WC_WR_FLUSH_ERR)
			log_notice("verbs link %s: %s", v->addr, why);
		verbs_link_fail(v, why);
		return;
	}
	if (wc->wc_flags & IBV_WC_WITH_IMM) {
		uint32_t back = ntohl(wc->imm_data);

		/* The peer cannot hand back more than we may have in flight:
		 * its full set and the small buffers we have not used yet. */
		if (back > VERBS_RECV_BUFS + v->small_left - v->credits) {
			log_rl_warn("verbs link %s: the peer returns %u credits, %u are out; closing", v->addr,
				    back, VERBS_RECV_BUFS + v->small_left - v->credits);
			verbs_link_fail(v, "the peer returned more credits than it was given");
			return;
		}
		v->credits += back;
	}
	if (!WR_RECV(wc->wr_id)) {
		uint32_t idx = WR_IDX(wc->wr_id);

		if (idx & WR_CTRL) {
			v->cfree |= 1u << (idx & (WR_CTRL - 1));
		} else if (idx & WR_SEAL) {
			v->sfree |= 1u << (idx & (WR_SEAL - 1));
		} else if ((idx & WR_FRAME) && (v->sent_used & (1ull << (idx & (WR_FRAME - 1))))) {
			struct frame *f = v->sent[idx & (WR_FRAME - 1)];

			v->sent_used &= ~(1ull << (idx & (WR_FRAME - 1)));
			links.late_frees += f->orphan;
			frame_unhold(f);
		}
		return;
	}
	if (v->nheld == VERBS_RQ_DEPTH) {
		verbs_link_fail(v, "more receives than buffers");
		return;
	}
	v->held[v->nheld] = WR_IDX(wc->wr_id);
	v->held_len[v->nheld++] = wc->byte_len;
	drain_held(v);
}

/* Reads the CQ until it is empty, then lets the links that had completions
 * post what those freed. */
static void poll_cq(void)
{
	struct ibv_wc wc[32];
	int n;

	while ((n = ibv_poll_cq(verbs.cq, 32, wc)) > 0) {
		for (int i = 0; i < n; i++)
			on_completion(&wc[i]);
	}
	/* Empty: every completion of the queue pairs destroyed so far has
	 * been read (cq_budget). */
	if (n == 0)
		links.ended_wr = 0;
	/* Whatever the completions freed (credits, send slots) may now go out,
	 * on the links that had completions.  (A link that failed meanwhile has
	 * left its slot empty; no new link takes a slot before the rdma_cm
	 * events are read.) */
	for (uint32_t i = 0; i < links.ntouched; i++) {
		struct vlink *v = links.slots[links.touched[i]];

		if (v && v->touched) {
			v->touched = 0;
			verbs_link_flush(v);
		}
	}
	links.ntouched = 0;
}

void verbs_on_cq(struct loop_watch *w, uint32_t events)
{
	struct ibv_cq *cq;
	void *cq_ctx;

	(void)w;
	(void)events;
	if (ibv_get_cq_event(verbs.cc, &cq, &cq_ctx) == 0) {
		ibv_ack_cq_events(cq, 1);
		if (ibv_req_notify_cq(cq, 0))
			log_err("ibv_req_notify_cq: %m");
	}
	poll_cq();
	loop_kick();
}

/* A link ended: read what its queue pair left in the CQ, so that its room
 * there is free again (cq_budget), even if no completion event comes. */
static void on_drain(struct loop_timer *t)
{
	(void)t;
	if (verbs.cq) {
		poll_cq();
		loop_kick();
	}
}

void verbs_qp_cq_gone(void)
{
	loop_timer_cancel(&links.drain);
	links.ended_wr = 0;
}

/* --- link ops --- */

static void verbs_kick(struct link *l)
{
	verbs_link_flush((struct vlink *)l);
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
			verbs_link_flush(v);
	}
}

static void verbs_close(struct link *l)
{
	verbs_link_end((struct vlink *)l);
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
		 "posted %llu, completions %llu, rnr waits %llu, keepalives %llu, probes %llu", v->addr,
		 verbs.ctx ? ibv_get_device_name(verbs.ctx->device) : "-", v->id && v->id->qp ? v->id->qp->qp_num : 0,
		 v->credits, v->credits_back, v->outstanding, v->paused ? ", paused" : "",
		 (unsigned long long)v->posted, (unsigned long long)v->completed,
		 (unsigned long long)v->credit_waits, (unsigned long long)v->keepalives,
		 (unsigned long long)v->probes);
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


/* A zero-length RDMA WRITE, signalled: the liveness probe (on_keepalive).
 * No receive buffer, no credit, no memory: a responder does not check the
 * remote key and address of a zero-length RDMA operation (the InfiniBand
 * spec's rule; rxe's responder: "A zero-byte op is not required to set an
 * addr or rkey"; tests/rdma/vm-tests.sh runs it on rxe), and rdma_cm gives
 * connected queue pairs remote write access, which no registration of ours
 * grants on any memory (none is registered for remote access).  Nothing
 * completes at the peer.  It has a send queue entry of its own
 * (VERBS_SQ_WRS), so it never waits for, or takes, a SEND's. */
static int post_probe(struct vlink *v)
{
	struct ibv_send_wr wr = {
		.wr_id = WR(v->gen, v->slot, 0, WR_PROBE),
		.opcode = IBV_WR_RDMA_WRITE,
		.send_flags = IBV_SEND_SIGNALED,
	}, *bad;        /* no sg_list, remote_addr and rkey 0 */
	int ret = ibv_post_send(v->id->qp, &wr, &bad);

	if (ret)
		return -ret;
	v->probing = 1;
	v->probes++;
	links.probes++;
	return 0;
}

/* A queue pair learns that its peer is gone only when a work request of its
 * own fails: a crashed host or a silent partition sends no DREQ, and
 * rdma_cm reports nothing.  Anything we post to a dead peer completes with
 * an error once the transport's retries are spent (IBV_WC_RETRY_EXC_ERR,
 * seconds), and the link fails; the peer layer's lost timer then runs as
 * for any link that goes down.  So every keepalive interval:
 *
 * - a link that posted nothing sends an ACK frame if it may (it also hands
 *   credits back), as TCP keepalive probes an idle connection;
 * - a link that had no completion at all in the interval (nothing of the
 *   peer's arrived, nothing of ours was acknowledged) and has no SEND in
 *   flight posts the probe, a zero-length RDMA WRITE (post_probe).
 *
 * The second is what finds a peer that died holding our credits: a paused
 * peer keeps every receive buffer we filled, so our credits fall to 1 or 0,
 * every ACK frame (the keepalive's too) waits in cq_pending, and the first
 * rule posts nothing; with nothing posted an RC queue pair never learns that
 * the peer is gone, the link would stay up and jobs across it hang for ever.
 * The probe needs no receive buffer and no credit, so it goes whatever the
 * credits; a live peer's device answers it even while its daemon holds every
 * buffer (or is stopped).  A SEND in flight is a probe already: it
 * completes, or fails as the probe would.  At most one probe is in flight
 * per link (its own send queue entry, VERBS_SQ_WRS); its completion comes
 * through on_completion like any other, with the link's generation in its
 * wr_id, and is flushed with the rest when the link ends. */
static void on_keepalive(struct loop_timer *t)
{
	for (uint32_t s = 0; s < VERBS_MAX_LINKS; s++) {
		struct vlink *v = links.slots[s];
		uint32_t gen = links.gen[s];

		if (!v || v->dead || v->l.state != LINK_UP)
			continue;
		if (v->posted == v->posted_seen && !v->ncq) {
			v->keepalives++;
			links.keepalives++;
			credit_update(v);
			verbs_link_flush(v);
			if (links.gen[s] != gen)
				continue;       /* failed and freed */
		}
		if (v->completed == v->completed_seen && !v->outstanding && !v->probing &&
		    post_probe(v) < 0) {
			verbs_link_fail(v, "ibv_post_send (probe) failed");
			continue;
		}
		v->posted_seen = v->posted;
		v->completed_seen = v->completed;
	}
	loop_timer_arm(t, VERBS_KEEPALIVE_NS, on_keepalive, NULL);
}


void verbs_keepalive_start(void)
{
	loop_timer_arm(&links.keepalive, VERBS_KEEPALIVE_NS, on_keepalive, NULL);
}

void verbs_keepalive_stop(void)
{
	loop_timer_cancel(&links.keepalive);
}

void verbs_links_fail_all(const char *why)
{
	for (uint32_t s = 0; s < VERBS_MAX_LINKS; s++)
		if (links.slots[s])
			verbs_link_fail(links.slots[s], why);
}

void verbs_links_end_all(void)
{
	for (uint32_t s = 0; s < VERBS_MAX_LINKS; s++)
		if (links.slots[s])
			verbs_link_end(links.slots[s]);
}

static int unauthenticated(const struct vlink *v)
{
	return v && !v->dead && !v->l.outgoing && v->l.state != LINK_UP;
}

uint32_t verbs_links_unauthenticated(const char *host, uint32_t *from_host_p)
{
	uint32_t n = 0, from_host = 0;

	for (uint32_t s = 0; s < VERBS_MAX_LINKS; s++) {
		if (!unauthenticated(links.slots[s]))
			continue;
		n++;
		from_host += host && strcmp(links.slots[s]->host, host) == 0;
	}
	if (from_host_p)
		*from_host_p = from_host;
	return n;
}

int verbs_link_evict_stranger(int (*is_stranger)(const char *host))
{
	struct vlink *oldest = NULL;

	for (uint32_t s = 0; s < VERBS_MAX_LINKS; s++) {
		struct vlink *v = links.slots[s];

		if (unauthenticated(v) && is_stranger(v->host) && (!oldest || v->born < oldest->born))
			oldest = v;
	}
	if (!oldest)
		return 0;
	log_rl_warn("verbs: a connection from %s, not a node of the cluster, makes room for one that is",
		    oldest->host);
	links.evicted++;
	verbs_link_fail(oldest, "made room for a node of the cluster");
	return 1;
}

int verbs_link_evict_silent(const char *host)
{
	struct vlink *oldest = NULL;

	for (uint32_t s = 0; s < VERBS_MAX_LINKS; s++) {
		struct vlink *v = links.slots[s];

		if (unauthenticated(v) && !v->l.frames_in && strcmp(v->host, host) == 0 &&
		    (!oldest || v->born < oldest->born))
			oldest = v;
	}
	if (!oldest)
		return 0;
	log_rl_warn("verbs: a connection from %s that has not said HELLO makes room for a newer one from "
		    "that node's address", host);
	links.evicted++;
	verbs_link_fail(oldest, "made room for a newer connection from its node's address");
	return 1;
}

/* verbs_rnr_waits: times a frame waited because the peer had no receive
 * buffer free for it (no credit).  Credits keep the hardware from ever
 * meeting a receiver that is not ready, so this is where such waits show. */
void verbs_qp_write_stats(FILE *out)
{
	fprintf(out, "verbs_device %s\nverbs_posted_sends %llu\nverbs_completions %llu\n"
		"verbs_rnr_waits %llu\nverbs_error_completions %llu\nverbs_keepalives %llu\nverbs_probes %llu\n"
		"verbs_frames_freed_in_flight %llu\nverbs_unauthenticated %u\nverbs_evicted %llu\n"
		"verbs_registered_bytes %llu\n",
		verbs.ctx ? ibv_get_device_name(verbs.ctx->device) : "-", (unsigned long long)links.posted,
		(unsigned long long)links.completed, (unsigned long long)links.credit_waits,
		(unsigned long long)links.errors, (unsigned long long)links.keepalives, (unsigned long long)links.probes,
		(unsigned long long)links.late_frees, verbs_links_unauthenticated(NULL, NULL),
		(unsigned long long)links.evicted,
		(unsigned long long)(links.reg_bytes + verbs_mr_bytes()));
}
