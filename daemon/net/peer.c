/* daemon/net/peer.c - see peer.h.
 *
 * Ownership: a link's handshake state (struct peer_hs) is allocated when the
 * link starts and freed when the link comes up or goes (free_hs); the link
 * itself belongs to the transport, which frees it from the loop after it
 * died (link.h), so dropping any link, even the one whose frame is being
 * handled, is safe.  Links still in their handshake are on a list, so that
 * peer_fini closes those no peer has claimed yet too.
 *
 * A link is the peer's (p->link) from the moment we connect to it, or, for
 * a connection it made to us, from the moment that connection has
 * authenticated, until it goes down or is replaced.  An accepted connection
 * only claims to come from a node until its AUTH checks (l->peer points at
 * the claimed peer meanwhile), and must not disturb the link that node has:
 * anyone can send a HELLO with any node id (they are in the configuration,
 * not secret).  Only an authenticated connection replaces a live link.
 */
#include "peer.h"
#include "auth.h"
#include "../core/log.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Connecting, and then the handshake, each get this long.  Without a limit
 * on connecting, an attempt made while the peer was unreachable would hang
 * for as long as the transport retries (TCP SYNs, rdma_cm REQs: a minute
 * or two) and hold back the reconnection after the peer is back. */
#define HANDSHAKE_TIMEOUT_NS (5ull * 1000000000u)
/* An accepted connection must say HELLO within this: a peer sends it at
 * once, and the transports admit only a few connections at a time before
 * they authenticate, which idle ones must not hold for long. */
#define FIRST_HELLO_NS (1000ull * 1000000u)
#define BACKOFF_MIN_MS 50
#define BACKOFF_MAX_MS 2000

/* Handshake state of a link that is not up yet. */
struct peer_hs {
	struct link *l;
	struct peer_hs *prev, *next;    /* every link in a handshake (peers.handshakes) */
	uint8_t mine[sizeof(struct wire_hello)];        /* our HELLO as sent */
	uint8_t theirs[sizeof(struct wire_hello)];      /* theirs as received */
	struct wire_hello their;
	int have_mine, have_theirs;
	struct loop_timer timeout;
};

static struct {
	const struct conf *conf;
	const struct transport *tr;     /* how links are made */
	const struct peer_events *ev;   /* the layer above */
	uint32_t self;
	uint64_t incarnation;           /* this daemon start's */
	struct peer *all;
	uint32_t npeers;
	struct peer **by_node;          /* nnodes entries, NULL for non-peers */
	struct peer_hs *handshakes;     /* links not up yet */
	int frames;                     /* enum auth_frames: security.integrity, security.encrypt */
	uint16_t frame_flags;           /* what every frame after the handshake has in hdr.flags */
	uint32_t trailer;               /* and at the end of its body: the tag, or nothing */
	struct loop_timer ack_timer;    /* an ack held back (peer_poll) falls due */
} peers;

/* A later start of a daemon has a larger incarnation: the wall clock's
 * milliseconds in the top 44 bits (enough until the year 2527), random bits
 * below (two starts in one millisecond still differ).  The layer above
 * tells a LOST about an earlier restart, come late, from one about the
 * latest by it (cluster.c).  A clock set back by more than the time
 * between two restarts would order them wrongly; NTP steps are far smaller. */
static uint64_t new_incarnation(void)
{
	struct timespec ts;
	uint64_t rnd;

	clock_gettime(CLOCK_REALTIME, &ts);
	auth_random(&rnd, sizeof(rnd));
	return ((uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u) << 20 | (rnd & 0xfffff) | 1;
}

uint64_t peer_self_incarnation(void)
{
	return peers.incarnation;
}

const char *peer_transport_name(void)
{
	return peers.tr ? peers.tr->name : "none";
}

void peer_write_transport_stats(FILE *out)
{
	if (peers.tr && peers.tr->write_stats)
		peers.tr->write_stats(out);
}

struct peer *peer_by_node(uint32_t n)
{
	return n < peers.conf->nnodes ? peers.by_node[n] : NULL;
}

uint32_t peer_count(void)
{
	return peers.npeers;
}

struct peer *peer_at(uint32_t i)
{
	return &peers.all[i];
}

/* --- sending --- */

int peer_takes_lent(void)
{
	return peers.tr && peers.tr->sends_lent && !peers.frame_flags && !peers.trailer;
}

void peer_send(struct peer *p, struct frame *f)
{
	assert(!f->lent || peer_takes_lent());
	assert(f->lent || f->cap - f->len >= peers.trailer);   /* frame_alloc keeps the tag's room */
	f->len += peers.trailer;
	/* Its round trip, from now (its own write included, and whatever
	 * waits before it: the link's cost takes minima, plan/linkcost.h).
	 * The clock itself, not the loop's turn: on a loaded machine one turn
	 * can queue a frame and read its ack (the peer ran on the other core
	 * meanwhile), and the turn's time made that a round trip of 0 (an α
	 * of 1 ns, which then stayed the minimum). */
	f->sent_ns = proto_now_ns();
	/* A frame with lent bytes holds room in its client's TX ring until
	 * it is acknowledged: with the usual delayed ack (up to
	 * ACK_DELAY_BYTES behind), a ring of 256 KiB stalled for the ack
	 * timer at every turn (0.15 GB/s of large items). */
	seq_push(&p->seq, f, (uint16_t)(peers.frame_flags | (f->urgent ? WIRE_FRAME_URGENT : 0) |
					 (f->urgent && f->ack_lazy ? WIRE_FRAME_ACK_LAZY : 0) |
					 (f->lent ? WIRE_FRAME_ACK_SOON : 0)));
	p->st.frames_sent++;
	p->st.bytes_sent += f->len;
	p->st.items_sent += f->nitems;
	if (p->state == PEER_UP)
		p->link->ops->kick(p->link);
}

/* --- what the transport sends (struct link_events) --- */

static struct frame *tx_first(struct link *l, uint32_t *off_p)
{
	struct peer *p = l->peer;

	if (l->state != LINK_UP || !p)
		return NULL;
	*off_p = p->seq.off;
	return p->seq.cur;
}

/* Frames are the peer layer's own (a queued frame or a send_ctrl one), so
 * their headers are valid. */
static void tx_seal(struct link *l, uint8_t *frame, uint8_t *out)
{
	struct wire_frame_hdr h;
	int ret = wire_decode_hdr(frame, &h);

	assert(ret == 0);
	(void)ret;
	if (h.kind == WIRE_DATA || h.kind == WIRE_ACK)
		wire_set_ack(frame, seq_ack_out(&l->peer->seq));
	if (h.flags & WIRE_FRAME_MAC)
		auth_seal(&l->peer->sec, frame, out, sizeof(h) + h.len);
	else if (out != frame)
		memcpy(out, frame, sizeof(h) + h.len);
}

static void tx_done(struct link *l, size_t n)
{
	struct seq *q = &l->peer->seq;
	struct frame *f = q->cur;

	seq_written(q, n);
	/* The frames written whole just now: a frame written again after a
	 * reconnection has no round trip of its own (Karn). */
	for (; f && f != q->cur; f = f->next) {
		f->resent = f->written;
		f->written = 1;
	}
}

/* A HELLO or AUTH (never sealed), or an ACK (sealed like every frame after
 * the handshake: room for the tag; the ack is stamped again when it is
 * sealed). */
static void send_ctrl(struct link *l, uint8_t kind, uint64_t ack, const void *body, uint32_t len)
{
	uint8_t buf[sizeof(struct wire_frame_hdr) + sizeof(struct wire_hello)];
	uint32_t tag = kind == WIRE_ACK ? peers.trailer : 0;
	struct wire_frame_hdr h = { .version = WIRE_VERSION, .kind = kind, .len = len + tag, .ack = ack,
				    .flags = kind == WIRE_ACK ? peers.frame_flags : 0 };

	static_assert(sizeof(buf) >= sizeof(h) + WIRE_TAG_BYTES, "room for an ACK's tag");
	wire_encode_hdr(buf, &h);
	if (len)
		memcpy(buf + sizeof(h), body, len);
	memset(buf + sizeof(h) + len, 0, tag);
	if (l->ops->send_ctrl(l, buf, sizeof(h) + len + tag) < 0)
		log_rl_warn("link control buffer full; a %s frame was not sent",
			    kind == WIRE_ACK ? "ACK" : "handshake");
}

/* --- acknowledgements --- */

/* Link-start probes (probe_next). */
#define PROBE_LARGE  (32u << 10)
#define PROBE_ROUNDS 4
#define PROBE_BURST  8
/* Apart, so that they sample moments after the start's rush of handshakes
 * and probes on every link (minima: one quiet moment is enough). */
#define PROBE_GAP_NS (25ull * 1000000u)
/* A chain that left α or β unknown (its samples refused: frames resent on
 * a loaded machine, Karn; or acknowledged together with a job's frames
 * that came right after) is sent again, 250 ms after, then twice as long
 * each time up to 8 s, while the link lacks an estimate, PROBE_CHAINS_MAX
 * times (about 100 s: a peer that never lets a sample through does not get
 * 1 MiB every 8 s for good; live traffic may still measure it), and again
 * from the start when the link comes up anew (link_up). */
#define PROBE_RETRY_NS (250ull * 1000000u)
#define PROBE_RETRY_MAX_SHIFT 5
#define PROBE_CHAINS_MAX 16
static void on_probe_timer(struct loop_timer *t);

static int probe_more(const struct peer *p)
{
	return (!linkcost_alpha_ns(&p->cost) || !linkcost_beta_ps(&p->cost)) && p->probe_retries < PROBE_CHAINS_MAX;
}

static uint64_t probe_retry_ns(const struct peer *p)
{
	uint32_t shift = p->probe_retries < PROBE_RETRY_MAX_SHIFT ? p->probe_retries : PROBE_RETRY_MAX_SHIFT;

	return PROBE_RETRY_NS << shift;
}

static int take_ack(struct peer *p, uint64_t ack)
{
	const struct frame *last = NULL, *first = p->seq.q.head;
	uint64_t bytes = 0, now;
	int probed, clean = 1;

	/* The frames this new ack covers, written first to last: their bytes
	 * over the time since the first was written make one sample (a small
	 * frame alone: α; many bytes: β, plan/linkcost.h), unless one was
	 * written twice (Karn). */
	probed = 0;
	for (const struct frame *f = first; f && f->seq <= ack && f != p->seq.cur; f = f->next) {
		last = f;
		bytes += f->len;
		clean &= f->written && !f->resent;
		probed |= f->probe;     /* (also when live frames came after it) */
		if (f->ack_lazy && f->next) {
			/* its ack may have waited for a frame going back: the
			 * sample starts after it */
			first = f->next;
			bytes = 0;
		}
	}
	if (last && last->ack_lazy)
		clean = 0;
	if (last && clean && ack <= seq_written_upto(&p->seq) && (now = proto_now_ns()) > first->sent_ns)
		linkcost_sample(&p->cost, now, bytes > UINT32_MAX ? UINT32_MAX : (uint32_t)bytes, now - first->sent_ns);
	if (seq_take_ack(&p->seq, ack) < 0) {
		log_rl_warn("peer %u acknowledges frame %llu, but only %llu went out; closing the link",
			    p->node, (unsigned long long)ack, (unsigned long long)seq_written_upto(&p->seq));
		return -EPROTO;
	}
	if (probed && (p->probes_left || probe_more(p)))
		loop_timer_arm(&p->probe_timer, p->probes_left ? PROBE_GAP_NS : probe_retry_ns(p), on_probe_timer, p);
	else if (probed && (!linkcost_alpha_ns(&p->cost) || !linkcost_beta_ps(&p->cost)))
		log_rl_notice("peer %u: %u probe chains left its %s unknown; live traffic may measure it", p->node,
			      p->probe_retries + 1, linkcost_alpha_ns(&p->cost) ? "beta" : "alpha");
	return 0;
}

/* An acknowledgement owed waits this long, or until this many bytes came,
 * for a frame going the other way to carry it: an ACK of its own is a write
 * here and a read and a wake-up at the peer, and request-response traffic
 * (the collectives' pieces) sends the other way within a round. */
#define ACK_DELAY_NS (1000ull * 1000u)
#define ACK_DELAY_BYTES (256u * 1024)

static void on_ack_timer(struct loop_timer *t)
{
	(void)t;
	loop_kick();    /* the next peer_poll sends what is due */
}

int peer_poll(void)
{
	uint64_t now = 0, next = 0;
	int work = 0;

	for (uint32_t i = 0; i < peers.npeers; i++) {
		struct peer *p = &peers.all[i];

		/* A frame going out anyway carries the acknowledgement. */
		if (p->state != PEER_UP || !seq_ack_due(&p->seq)) {
			p->ack_owed_ns = 0;
			p->ack_now = 0;
			continue;
		}
		if (!now)
			now = loop_now_ns();
		if (!p->ack_owed_ns) {
			p->ack_owed_ns = now;
			p->ack_owed_bytes = p->st.bytes_recv;
		}
		if (!p->ack_now && now - p->ack_owed_ns < ACK_DELAY_NS &&
		    p->st.bytes_recv - p->ack_owed_bytes < ACK_DELAY_BYTES) {
			if (!next || p->ack_owed_ns + ACK_DELAY_NS < next)
				next = p->ack_owed_ns + ACK_DELAY_NS;
			continue;
		}
		p->st.acks_sent++;
		p->st.acks_late += !p->ack_now && now - p->ack_owed_ns >= ACK_DELAY_NS;
		p->ack_owed_ns = 0;
		p->ack_now = 0;
		send_ctrl(p->link, WIRE_ACK, seq_ack_out(&p->seq), NULL, 0);
		p->link->ops->kick(p->link);
		work = 1;
	}
	if (next && (!peers.ack_timer.armed || peers.ack_timer.when_ns > next))
		loop_timer_arm(&peers.ack_timer, next - now, on_ack_timer, NULL);
	return work;
}

/* The transport's send_ack event. */
static void send_ack(struct link *l)
{
	if (l->state == LINK_UP && l->peer && l->peer->link == l)
		send_ctrl(l, WIRE_ACK, seq_ack_out(&l->peer->seq), NULL, 0);
}

/* --- connection management --- */

static void connect_peer(struct peer *p);

static void on_retry(struct loop_timer *t)
{
	connect_peer(t->ctx);
}

static void schedule_retry(struct peer *p)
{
	loop_timer_arm(&p->retry, (uint64_t)p->backoff_ms * 1000000u, on_retry, p);
	p->backoff_ms = p->backoff_ms * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : p->backoff_ms * 2;
}

static void free_hs(struct link *l)
{
	struct peer_hs *hs = l->hs;

	if (!hs)
		return;
	loop_timer_cancel(&hs->timeout);
	if (hs->prev)
		hs->prev->next = hs->next;
	else
		peers.handshakes = hs->next;
	if (hs->next)
		hs->next->prev = hs->prev;
	free(hs);
	l->hs = NULL;
}

static void on_lost(struct loop_timer *t)
{
	struct peer *p = t->ctx;
	char why[256];

	if (p->state == PEER_UP)
		return;
	/* Said again while the link stays down: the layer above keeps what it
	 * heard only for a while (cluster.c), so that news lost on the way
	 * (LINK_BACK in a restarted node's queue) cannot stay true for ever. */
	loop_timer_arm(&p->lost_timer, PEER_LOST_AGAIN_NS, on_lost, p);
	snprintf(why, sizeof(why), "the link between nodes %u and %u has been down for %llu s (%s)", peers.self,
		 p->node, (unsigned long long)((PEER_LOST_NS + p->lost * PEER_LOST_AGAIN_NS) / 1000000000u),
		 p->last_error[0] ? p->last_error : "link down");
	if (!p->lost++)
		log_warn("peer %u: %s", p->node, why);
	if (peers.ev->lost)
		peers.ev->lost(p, 0, why);
}

/* The peer loses its link: everything not acknowledged goes out again on the
 * next one, from the first unacknowledged frame. */
static void detach(struct peer *p, const char *why)
{
	int was_up = p->state == PEER_UP;

	p->link = NULL;
	p->state = PEER_DOWN;
	auth_link_stop(&p->sec);
	p->rx_opened = 0;
	seq_rewind(&p->seq);
	if (why)
		snprintf(p->last_error, sizeof(p->last_error), "%s", why);
	if (was_up) {
		p->st.disconnects++;
		log_notice("peer %u: link down: %s", p->node, why ? why : "closed");
	} else {
		log_debug("peer %u: %s", p->node, why ? why : "closed");
	}
	if (p->outgoing)
		schedule_retry(p);
	if (was_up && !p->lost)
		loop_timer_arm(&p->lost_timer, PEER_LOST_NS, on_lost, p);
}

/* The transport's down event: the link is gone (and freed right after). */
static void link_down(struct link *l, const char *why)
{
	struct peer *p = l->peer;

	free_hs(l);
	if (p && p->link == l)
		detach(p, why);
	else if (!p)
		log_debug("unidentified connection: %s", why);
}

/* Drops a link from our side (handshake failure, replaced connection): the
 * peer layer lets go of it as if it had gone down, and the transport ends
 * it (and frees it from the loop, link.h). */
static void drop(struct link *l, const char *why)
{
	link_down(l, why);
	l->ops->close(l);
}

static void on_hs_timeout(struct loop_timer *t)
{
	struct peer_hs *hs = t->ctx;
	struct link *l = hs->l;

	if (l->state == LINK_CONNECTING) {
		log_debug("peer %u: connecting did not complete within %llu s; trying again", l->peer->node,
			  (unsigned long long)(HANDSHAKE_TIMEOUT_NS / 1000000000u));
		drop(l, "connecting timed out");
		return;
	}
	log_rl_notice("%s%u: handshake did not complete in time (HELLO within %llu ms, all of it within %llu s); "
		      "closing", l->peer ? "peer " : "connection ", l->peer ? l->peer->node : 0,
		      (unsigned long long)(FIRST_HELLO_NS / 1000000u),
		      (unsigned long long)(HANDSHAKE_TIMEOUT_NS / 1000000000u));
	drop(l, "handshake timed out");
}

static struct peer_hs *new_hs(struct link *l)
{
	struct peer_hs *hs = calloc(1, sizeof(*hs));

	if (!hs)
		return NULL;
	hs->l = l;
	l->hs = hs;
	hs->next = peers.handshakes;
	if (hs->next)
		hs->next->prev = hs;
	peers.handshakes = hs;
	loop_timer_arm(&hs->timeout, HANDSHAKE_TIMEOUT_NS, on_hs_timeout, hs);
	return hs;
}

/* What our HELLO says of us: the key, and how frames are protected. */
static uint16_t hello_flags(void)
{
	switch (peers.frames) {
	case AUTH_FRAMES_ENCRYPT: return WIRE_HELLO_INTEGRITY | WIRE_HELLO_ENCRYPT;
	case AUTH_FRAMES_MAC: return WIRE_HELLO_INTEGRITY;
	}
	return auth_insecure() ? WIRE_HELLO_INSECURE : 0;
}

static const char *frames_name(uint16_t hello_flags)
{
	if (hello_flags & WIRE_HELLO_ENCRYPT)
		return "encrypt = true";
	if (hello_flags & WIRE_HELLO_INTEGRITY)
		return "integrity = true, encrypt = false";
	return "integrity = false";
}

static void send_hello(struct link *l, struct peer *p)
{
	struct peer_hs *hs = l->hs;
	struct wire_hello h = {
		.magic = WIRE_MAGIC,
		.version = WIRE_VERSION,
		.flags = hello_flags(),
		.from = peers.self,
		.to = p->node,
		.incarnation = peers.incarnation,
		.peer_incarnation = p->incarnation,
		.ack = p->incarnation ? p->seq.recv_seq : 0,
		.cluster_len = (uint8_t)strlen(peers.conf->cluster_name),
	};

	auth_random(h.nonce, sizeof(h.nonce));
	memcpy(h.cluster, peers.conf->cluster_name, h.cluster_len);
	wire_encode_hello(hs->mine, &h);
	hs->have_mine = 1;
	send_ctrl(l, WIRE_HELLO, 0, hs->mine, sizeof(hs->mine));
}

static void connect_peer(struct peer *p)
{
	struct link *l;
	int ret;

	if (p->link)
		return;
	ret = peers.tr->connect(p->node, p->addr->host, p->addr->port, &l, p->last_error, sizeof(p->last_error));
	if (ret < 0) {
		log_debug("peer %u: %s", p->node, p->last_error);
		schedule_retry(p);
		return;
	}
	l->peer = p;
	p->link = l;
	p->state = PEER_CONNECTING;
	if (!new_hs(l))
		drop(l, "out of memory");
}

static void link_connected(struct link *l)
{
	struct peer *p = l->peer;
	struct peer_hs *hs = l->hs;

	/* The connect timeout becomes the handshake's. */
	loop_timer_arm(&hs->timeout, HANDSHAKE_TIMEOUT_NS, on_hs_timeout, hs);
	p->state = PEER_HANDSHAKE;
	send_hello(l, p);
	l->ops->kick(l);
}

static void link_accepted(struct link *l)
{
	struct peer_hs *hs = new_hs(l);

	if (!hs)
		l->ops->close(l);
	else
		loop_timer_arm(&hs->timeout, FIRST_HELLO_NS, on_hs_timeout, hs);
}

/* A new link's cost at once (plan/linkcost.h): PROBE_ROUNDS rounds of a
 * small probe frame and a burst of PROBE_BURST large ones, each sent when
 * the one before was acknowledged (alone on the link, or nearly: round
 * trips, not a queue), dropped by the peer's cluster layer.  The estimates are minima, so the
 * rounds after the first smooth out a busy start; live traffic refines
 * them from there. */
static void probe_next(struct peer *p)
{
	struct wire_item it = { .node = p->node, .job = 0, .dst = WIRE_CTL_PROBE, .src = peers.self };
	struct frame *f;
	uint8_t *zero;
	uint32_t len, n;

	if (p->state != PEER_UP)
		return;
	if (!p->probes_left) {
		if (!probe_more(p))
			return;
		p->probe_retries++;
		p->probes_left = 2 * PROBE_ROUNDS;
	}
	/* a large probe is a burst: one acknowledgement for many bytes (β) */
	len = p->probes_left % 2 ? PROBE_LARGE : 0;
	n = len ? PROBE_BURST : 1;
	it.len = len;
	p->probes_left--;
	zero = len ? calloc(1, len) : NULL;
	for (uint32_t k = 0; k < n; k++) {
		f = frame_alloc((uint32_t)wire_item_footprint(len));
		if (!f || (len && !zero)) {
			if (f)
				frame_free(f);
			p->probes_left = 0;     /* (live traffic measures it then) */
			break;
		}
		f->len += (uint32_t)wire_encode_item(f->data + f->len, &it, zero);
		f->nitems = 1;
		/* its acknowledgement sends the next, or sees whether another
		 * chain is needed (take_ack) */
		f->probe = k + 1 == n;
		f->urgent = 1;  /* acknowledged at once: its round trip is the point */
		peer_send(p, f);
	}
	free(zero);
}

static void on_probe_timer(struct loop_timer *t)
{
	probe_next(t->ctx);
}

/* Both sides authenticated: resume where the last connection left off.
 * Returns 1, or -EPROTO: the transport then ends the link. */
static int link_up(struct link *l)
{
	struct peer *p = l->peer;
	struct peer_hs *hs = l->hs;
	uint64_t ack;
	int was_lost;

	if (p->link != l) {
		/* An accepted connection authenticated: now it is the peer's. */
		if (p->link)
			drop(p->link, "replaced by a new authenticated connection from the same node");
		p->link = l;
	}
	loop_timer_cancel(&p->lost_timer);
	if (p->incarnation && hs->their.incarnation != p->incarnation) {
		uint64_t items;
		uint32_t frames = seq_reset(&p->seq, &items);
		char why[160];

		log_notice("peer %u restarted; %u frames (%llu items) queued for its previous instance dropped",
			   p->node, frames, (unsigned long long)items);
		p->st.dropped_frames += frames;
		snprintf(why, sizeof(why), "node %u restarted (its daemon lost what it held; %llu items queued "
			 "for it were dropped here)", p->node, (unsigned long long)items);
		if (peers.ev->lost)
			peers.ev->lost(p, hs->their.incarnation, why);
	}
	was_lost = p->lost;
	p->lost = 0;
	p->incarnation = hs->their.incarnation;
	/* Their ack counts only if it refers to this instance of us. */
	ack = hs->their.peer_incarnation == peers.incarnation ? hs->their.ack : 0;
	if (seq_resume(&p->seq, ack) < 0) {
		log_rl_warn("peer %u acknowledges frame %llu, but only %llu were sent; closing the link", p->node,
			    (unsigned long long)ack, (unsigned long long)p->seq.send_seq);
		snprintf(p->last_error, sizeof(p->last_error), "peer acknowledges frames that were never sent");
		return -EPROTO;
	}
	p->st.retransmits += p->seq.q.count;
	/* From here on, every frame either way is sealed with this link's keys. */
	auth_link_start(&p->sec, peers.frames, l->outgoing, l->outgoing ? hs->mine : hs->theirs,
			l->outgoing ? hs->theirs : hs->mine);
	p->rx_opened = 0;
	l->encrypt = peers.frames == AUTH_FRAMES_ENCRYPT;
	free_hs(l);
	l->state = LINK_UP;
	p->state = PEER_UP;
	p->backoff_ms = BACKOFF_MIN_MS;
	p->last_error[0] = '\0';
	p->st.connects++;
	log_notice("peer %u (%s port %u) up%s; %u frames to send again", p->node, p->addr->host, p->addr->port,
		   auth_insecure() ? " (insecure)" : peers.frames == AUTH_FRAMES_ENCRYPT ? " (frames encrypted)" :
		   peers.frames == AUTH_FRAMES_MAC ? " (frames authenticated)" : " (frames not authenticated)",
		   p->seq.q.count);
	if (p->rx_held)
		l->ops->pause(l, 1);
	if (was_lost && peers.ev->found)
		peers.ev->found(p);
	/* A new link, or one whose chain stopped (the link went down while a
	 * retry waited; the peer restarted and its probe frames were dropped
	 * unacknowledged) with an estimate still unknown: a chain from the
	 * start.  (After a mere reconnection, the old chain's frames are sent
	 * again and may carry it on too: two chains for a while.) */
	p->probe_retries = 0;
	if (peers.conf->link_probe && (!p->cost.samples || probe_more(p))) {
		loop_timer_cancel(&p->probe_timer);
		p->probes_left = 2 * PROBE_ROUNDS;
		probe_next(p);
	}
	l->ops->kick(l);
	return 1;
}

static int handshake(struct link *l, const struct wire_frame_hdr *h, const uint8_t *body)
{
	const uint16_t sec_flags = WIRE_HELLO_INTEGRITY | WIRE_HELLO_ENCRYPT;
	struct peer_hs *hs = l->hs;
	struct peer *p = l->peer;
	uint8_t mac[WIRE_MAC_BYTES];

	if (!hs)
		return -EPROTO;
	if (h->kind == WIRE_HELLO && !hs->have_theirs) {
		struct wire_hello *w = &hs->their;

		if (wire_decode_hello(body, h->len, w) < 0) {
			log_rl_warn("%s%u: malformed HELLO; closing", p ? "peer " : "connection from node ", p ? p->node : 0);
			return -EPROTO;
		}
		if (w->cluster_len != strlen(peers.conf->cluster_name) ||
		    memcmp(w->cluster, peers.conf->cluster_name, w->cluster_len) != 0) {
			log_rl_warn("node %u belongs to cluster \"%.*s\", not \"%s\"; refused", w->from, w->cluster_len,
				    w->cluster, peers.conf->cluster_name);
			return -EPROTO;
		}
		if (w->to != peers.self) {
			log_rl_warn("node %u meant to reach node %u, this is node %u; refused (check --node)", w->from,
				    w->to, peers.self);
			return -EPROTO;
		}
		memcpy(hs->theirs, body, sizeof(hs->theirs));
		hs->have_theirs = 1;
		if (!l->outgoing)       /* it said HELLO in time: the rest of the handshake's */
			loop_timer_arm(&hs->timeout, HANDSHAKE_TIMEOUT_NS, on_hs_timeout, hs);
		if (l->outgoing) {
			if (w->from != p->node) {
				log_rl_warn("peer %u answered as node %u; refused", p->node, w->from);
				return -EPROTO;
			}
			return 1;       /* its AUTH follows */
		}
		p = peer_by_node(w->from);
		if (!p) {
			log_rl_warn("node %u is not a routing peer of node %u; refused (do both use the same topology?)",
				    w->from, peers.self);
			return -EPROTO;
		}
		if (p->outgoing) {
			log_rl_warn("node %u connected, but node %u is the one that connects to it; refused "
				    "(do both use the same configuration?)", w->from, peers.self);
			return -EPROTO;
		}
		l->peer = p;    /* claimed; p->link and p->state change once it authenticates */
		send_hello(l, p);
		auth_mac(mac, 'A', hs->theirs, hs->mine);
		send_ctrl(l, WIRE_AUTH, 0, mac, sizeof(mac));
		l->ops->kick(l);
		return 1;
	}
	if (h->kind == WIRE_AUTH && hs->have_theirs && hs->have_mine) {
		const uint8_t *hi = l->outgoing ? hs->mine : hs->theirs;
		const uint8_t *ha = l->outgoing ? hs->theirs : hs->mine;
		int theirs_insecure = hs->their.flags & WIRE_HELLO_INSECURE;

		if (h->len != WIRE_MAC_BYTES || !auth_check(body, l->outgoing ? 'A' : 'I', hi, ha)) {
			if (l->outgoing) {
				/* Send our AUTH all the same, so that the other end
				 * can tell (and log) why the link fails; it reveals
				 * nothing but a MAC over public bytes. */
				auth_mac(mac, 'I', hi, ha);
				send_ctrl(l, WIRE_AUTH, 0, mac, sizeof(mac));
				l->ops->kick(l);
			}
			/* An accepted connection is only a claim (see the top). */
			const char *who = l->outgoing ? "peer" : "connection claiming to be node";

			if (theirs_insecure && !auth_insecure())
				log_rl_warn("%s %u has no cluster key (insecure mode); refused", who, p->node);
			else if (!theirs_insecure && auth_insecure())
				log_rl_warn("%s %u has a cluster key and this daemon has none; it cannot be "
					    "authenticated; refused", who, p->node);
			else
				log_rl_warn("%s %u failed authentication: it holds a different cluster key; refused",
					    who, p->node);
			if (p->link == l || !p->link)
				snprintf(p->last_error, sizeof(p->last_error), "authentication failed");
			return -EPROTO;
		}
		if (l->outgoing) {
			auth_mac(mac, 'I', hi, ha);
			send_ctrl(l, WIRE_AUTH, 0, mac, sizeof(mac));
		}
		/* Authenticated, so what its HELLO says is true. */
		if ((hs->their.flags & sec_flags) != (hello_flags() & sec_flags)) {
			log_rl_warn("%s %u has security.%s, this daemon security.%s: every daemon of a cluster needs the "
				    "same; refused", l->outgoing ? "peer" : "node", p->node, frames_name(hs->their.flags),
				    frames_name(hello_flags()));
			if (p->link == l || !p->link)
				snprintf(p->last_error, sizeof(p->last_error), "its security settings differ");
			if (l->outgoing)
				l->ops->kick(l);        /* our AUTH, so that it can tell too */
			return -EPROTO;
		}
		return link_up(l);
	}
	log_rl_warn("%s%u: unexpected frame (kind %u) during the handshake; closing", p ? "peer " : "node ",
		    p ? p->node : hs->their.from, h->kind);
	return -EPROTO;
}

/* Checks (and decrypts) a frame of an up link, once: a frame offered again
 * after a pause was checked already. */
static int open_frame(struct link *l, const struct wire_frame_hdr *h, uint8_t *frame)
{
	struct peer *p = l->peer;

	if (p->rx_opened)
		return 0;
	if ((h->flags & WIRE_FRAME_SECURITY) != peers.frame_flags) {
		log_rl_warn("peer %u: a frame (kind %u) with flags 0x%x, where this link has 0x%x (%s); closing the link",
			    p->node, h->kind, h->flags, peers.frame_flags,
			    peers.frame_flags ? "every frame is authenticated" : "no frame has a tag");
		p->st.integrity_failures++;
		return -EPROTO;
	}
	if (auth_open(&p->sec, frame, sizeof(*h) + h->len) < 0) {
		/* The nonce is the link's frame count: whatever was dropped,
		 * replayed, reordered, injected or changed on the way ends here,
		 * before anything in it (its ack first) is believed. */
		log_rl_warn("peer %u: frame %llu of this link (kind %u, seq %llu) fails its integrity check: forged, "
			    "replayed or damaged on the way; closing the link", p->node,
			    (unsigned long long)p->sec.rx_count, h->kind, (unsigned long long)h->seq);
		p->st.integrity_failures++;
		return -EPROTO;
	}
	p->rx_opened = 1;
	return 0;
}

/* The DATA frame h went to the layer above (taken whole, or received in
 * place): it counts as received, and is acknowledged. */
static void frame_taken(struct peer *p, const struct wire_frame_hdr *h)
{
	seq_taken(&p->seq, h->seq);
	/* Its sender waits on it (a flush, a step's end, a probe timing the
	 * link) or wants its memory back (lent bytes: the frames received in
	 * place): acknowledged at once (at the end of this turn of the loop),
	 * not held for a frame going back -- unless nobody waits (ACK_LAZY:
	 * collectives' pieces). */
	p->ack_now |= (h->flags & WIRE_FRAME_ACK_SOON) ||
		      (h->flags & (WIRE_FRAME_URGENT | WIRE_FRAME_ACK_LAZY)) == WIRE_FRAME_URGENT;
	p->st.frames_recv++;
	p->st.bytes_recv += sizeof(*h) + h->len;
}

/* A checked frame of an up link: its ack, then (DATA) its body, len bytes. */
static int take_frame(struct peer *p, const struct wire_frame_hdr *h, const uint8_t *body, uint32_t len)
{
	int ret;

	if (take_ack(p, h->ack) < 0)
		return -EPROTO;
	if (h->kind == WIRE_ACK)
		return 1;
	if (h->kind != WIRE_DATA) {
		log_rl_warn("peer %u: unexpected frame kind %u; closing the link", p->node, h->kind);
		return -EPROTO;
	}
	ret = seq_check(&p->seq, h->seq);
	if (ret == 0) {
		p->st.duplicates++;     /* sent again after a reconnection: we have it */
		return 1;
	}
	if (ret < 0) {
		log_rl_warn("peer %u: frame %llu out of sequence (expected %llu); closing the link", p->node,
			    (unsigned long long)h->seq, (unsigned long long)p->seq.recv_seq + 1);
		return -EPROTO;
	}
	if (p->rx_held)
		return 0;
	ret = peers.ev->rx(p, body, len, !(h->flags & WIRE_FRAME_URGENT) ? 0 :
				       h->flags & WIRE_FRAME_ACK_LAZY ? PEER_URGENT_LAZY : PEER_URGENT);
	if (ret < 0) {
		log_rl_warn("peer %u: malformed frame %llu; closing the link", p->node, (unsigned long long)h->seq);
		return -EPROTO;
	}
	p->rx_held = ret == 1;
	frame_taken(p, h);
	return 1;
}

static int link_rx(struct link *l, const struct wire_frame_hdr *h, uint8_t *frame)
{
	struct peer *p = l->peer;
	int ret;

	if (l->state != LINK_UP)
		return handshake(l, h, frame + sizeof(*h));
	ret = open_frame(l, h, frame);
	if (ret < 0)
		return ret;
	ret = take_frame(p, h, frame + sizeof(*h), h->len - peers.trailer);
	if (ret != 0)
		p->rx_opened = 0;       /* taken, or the link ends: the next frame is new */
	return ret;
}

/* Receiving in place (link.h): only the next DATA frame in sequence, on a
 * link without tags, while the layer above takes frames; anything else
 * comes whole through link_rx, which says what is wrong with it. */
static uint8_t *link_steer(struct link *l, const struct wire_frame_hdr *h, const uint8_t *frame, int *later)
{
	struct peer *p = l->peer;

	*later = 0;
	if (l->state != LINK_UP || !p || peers.frame_flags || (h->flags & WIRE_FRAME_SECURITY) ||
	    h->kind != WIRE_DATA || p->rx_opened || seq_check(&p->seq, h->seq) != 1 || !peers.ev->steer)
		return NULL;
	if (p->rx_held) {
		*later = 1;     /* (the layer above takes frames again soon) */
		return NULL;
	}
	return peers.ev->steer(p, frame + sizeof(*h), h->len, later);
}

static int link_steered(struct link *l, const struct wire_frame_hdr *h, const uint8_t *frame, int ok)
{
	struct peer *p = l->peer;

	(void)frame;
	if (!ok) {
		peers.ev->steered(p, 0);
		return 1;
	}
	if (take_ack(p, h->ack) < 0) {
		peers.ev->steered(p, 0);
		return -EPROTO;
	}
	peers.ev->steered(p, 1);
	frame_taken(p, h);
	return 1;
}

void peer_resume_rx(struct peer *p)
{
	p->rx_held = 0;
	if (p->link && p->state == PEER_UP)
		p->link->ops->pause(p->link, 0);
}

int peer_fault(uint32_t n)
{
	struct peer *p = peer_by_node(n);

	if (!p || !p->link)
		return -ENOENT;
	log_notice("peer %u: breaking the link on request (fault injection)", n);
	p->link->ops->fault(p->link);
	return 0;
}

/* --- setup and status --- */

static const struct link_events link_events = {
	.connected = link_connected,
	.accepted = link_accepted,
	.rx = link_rx,
	.steer = link_steer,
	.steered = link_steered,
	.down = link_down,
	.tx_first = tx_first,
	.tx_seal = tx_seal,
	.send_ack = send_ack,
	.tx_done = tx_done,
};

/* Starts the transport c->transport asks for: verbs, TCP, or ("auto") verbs
 * if it can be set up, else TCP. */
static int start_transport(const struct conf *c, uint32_t self)
{
	int ret;

	if (c->transport != CONF_TRANSPORT_TCP) {
		ret = transport_verbs.listen(c, self, &link_events);
		if (ret == 0) {
			peers.tr = &transport_verbs;
			return 0;
		}
		if (c->transport == CONF_TRANSPORT_VERBS) {
			log_err("transport.kind = \"verbs\", but RDMA links cannot be set up (see above)");
			return ret;
		}
		log_notice("transport.kind = \"auto\": RDMA links cannot be set up (see above); using TCP");
	}
	peers.tr = &transport_tcp;
	return transport_tcp.listen(c, self, &link_events);
}
int peer_init(const struct conf *c, uint32_t self, const struct transport *tr, const struct peer_events *ev)
{
	uint32_t n = route_peers(&c->route, self, NULL, 0);
	uint32_t *ids = calloc(n ? n : 1, sizeof(*ids));
	int ret;

	peers.conf = c;
	peers.self = self;
	peers.ev = ev;
	/* Integrity needs the key (conf.c refuses it without key_file). */
	peers.frames = c->encrypt ? AUTH_FRAMES_ENCRYPT : c->integrity ? AUTH_FRAMES_MAC : AUTH_FRAMES_PLAIN;
	assert(peers.frames == AUTH_FRAMES_PLAIN || !auth_insecure());
	peers.frame_flags = peers.frames == AUTH_FRAMES_ENCRYPT ? WIRE_FRAME_MAC | WIRE_FRAME_SEALED :
			    peers.frames == AUTH_FRAMES_MAC ? WIRE_FRAME_MAC : 0;
	peers.trailer = peers.frames != AUTH_FRAMES_PLAIN ? WIRE_TAG_BYTES : 0;
	peers.incarnation = new_incarnation();
	peers.by_node = calloc(c->nnodes, sizeof(*peers.by_node));
	peers.all = calloc(n ? n : 1, sizeof(*peers.all));
	if (!ids || !peers.by_node || !peers.all) {
		free(ids);
		peer_fini();
		return -ENOMEM;
	}
	route_peers(&c->route, self, ids, n);
	peers.npeers = n;
	for (uint32_t i = 0; i < n; i++) {
		struct peer *p = &peers.all[i];

		p->node = ids[i];
		p->idx = i;
		p->addr = &c->nodes[ids[i]];
		p->dim = route_link_dim(&c->route, self, ids[i]);
		p->outgoing = self < ids[i];
		p->backoff_ms = BACKOFF_MIN_MS;
		peers.by_node[ids[i]] = p;
	}
	free(ids);
	if (n == 0) {
		peers.tr = &transport_tcp;      /* for status; nothing to listen for */
		return 0;
	}
	if (tr) {
		peers.tr = tr;
		ret = tr->listen(c, self, &link_events);
	} else {
		ret = start_transport(c, self);
	}
	if (ret < 0) {
		peer_fini();
		return ret;
	}
	for (uint32_t i = 0; i < n; i++)
		if (peers.all[i].outgoing)
			connect_peer(&peers.all[i]);
	return 0;
}

void peer_fini(void)
{
	loop_timer_cancel(&peers.ack_timer);
	for (uint32_t i = 0; i < peers.npeers; i++) {
		struct peer *p = &peers.all[i];

		loop_timer_cancel(&p->retry);
		loop_timer_cancel(&p->lost_timer);
		loop_timer_cancel(&p->probe_timer);
		auth_link_stop(&p->sec);
		if (p->link) {
			free_hs(p->link);
			p->link->ops->close(p->link);
			p->link = NULL;
		}
		seq_fini(&p->seq);
	}
	while (peers.handshakes) {      /* connections no peer has claimed */
		struct link *l = peers.handshakes->l;

		free_hs(l);
		l->ops->close(l);
	}
	if (peers.tr)
		peers.tr->fini();
	peers.tr = NULL;
	free(peers.all);
	free(peers.by_node);
	peers.all = NULL;
	peers.by_node = NULL;
	peers.npeers = 0;
}

static const char *state_name(int s)
{
	switch (s) {
	case PEER_CONNECTING: return "connecting";
	case PEER_HANDSHAKE: return "handshake";
	case PEER_UP: return "up";
	}
	return "down";
}

void peer_write_status(FILE *out)
{
	for (uint32_t i = 0; i < peers.npeers; i++) {
		struct peer *p = &peers.all[i];
		char desc[160] = "";

		if (p->link)
			p->link->ops->describe(p->link, desc, sizeof(desc));
		fprintf(out, "  peer %u %s:%u dim %d: %s%s%s%s%s; %u frames queued (%llu bytes unsent), sent to %llu, "
			"received to %llu\n", p->node, p->addr->host, p->addr->port, p->dim, state_name(p->state),
			desc[0] ? " via " : "", desc, p->last_error[0] && p->state != PEER_UP ? ", last error: " : "",
			p->state != PEER_UP ? p->last_error : "", p->seq.q.count, (unsigned long long)p->seq.unsent,
			(unsigned long long)p->seq.send_seq, (unsigned long long)p->seq.recv_seq);
	}
}

void peer_write_stats(FILE *out, const struct peer *p)
{
	const struct peer_stats *s = &p->st;

	fprintf(out, " frames_sent %llu bytes_sent %llu frames_recv %llu bytes_recv %llu items_sent %llu "
		"items_per_frame_sent %.2f retransmits %llu duplicates %llu connects %llu disconnects %llu "
		"dropped_frames %llu integrity_failures %llu acks_sent %llu acks_late %llu",
		(unsigned long long)s->frames_sent, (unsigned long long)s->bytes_sent,
		(unsigned long long)s->frames_recv, (unsigned long long)s->bytes_recv,
		(unsigned long long)s->items_sent,
		s->frames_sent ? (double)s->items_sent / (double)s->frames_sent : 0.0,
		(unsigned long long)s->retransmits, (unsigned long long)s->duplicates,
		(unsigned long long)s->connects, (unsigned long long)s->disconnects,
		(unsigned long long)s->dropped_frames, (unsigned long long)s->integrity_failures,
		(unsigned long long)s->acks_sent, (unsigned long long)s->acks_late);
	fprintf(out, " alpha_us %.1f beta_ns_per_byte %.3f cost_samples %llu", (double)linkcost_alpha_ns(&p->cost) / 1e3,
		(double)linkcost_beta_ps(&p->cost) / 1e3, (unsigned long long)p->cost.samples);
}

void peer_cost(uint32_t *alpha_ns, uint32_t *beta_ps)
{
	uint64_t asum = 0, bsum = 0;
	uint32_t na = 0, nb = 0;

	for (uint32_t i = 0; i < peers.npeers; i++) {
		uint64_t a = linkcost_alpha_ns(&peers.all[i].cost), b = linkcost_beta_ps(&peers.all[i].cost);

		asum += a;
		na += a != 0;
		bsum += b;
		nb += b != 0;
	}
	*alpha_ns = na ? (uint32_t)(asum / na > UINT32_MAX ? UINT32_MAX : asum / na) : 0;
	*beta_ps = nb ? (uint32_t)(bsum / nb > UINT32_MAX ? UINT32_MAX : bsum / nb) : 0;
}
