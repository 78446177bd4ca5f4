/* daemon/peer.c - see peer.h. */
#include "peer.h"
#include "auth.h"
#include "fwd.h"
#include "log.h"

#include <endian.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* Connecting, and then the handshake, each get this long.  Without a limit
 * on connecting, an attempt made while the peer was unreachable would hang
 * for as long as the transport retries (TCP SYNs, rdma_cm REQs: a minute
 * or two) and hold back the reconnection after the peer is back. */
#define HANDSHAKE_TIMEOUT_NS (5ull * 1000000000u)
#define BACKOFF_MIN_MS 50
#define BACKOFF_MAX_MS 2000

/* Handshake state of a link that is not up yet. */
struct hs {
	struct link *l;
	uint8_t mine[sizeof(struct wire_hello)];        /* our HELLO as sent */
	uint8_t theirs[sizeof(struct wire_hello)];      /* theirs as received */
	struct wire_hello their;
	int have_mine, have_theirs;
	struct loop_timer timeout;
};

static struct {
	const struct conf *conf;
	const struct transport *tr;     /* how links are made */
	uint32_t self;
	uint64_t incarnation;
	struct peer *peers;
	uint32_t npeers;
	struct peer **by_node;          /* nnodes entries, NULL for non-peers */
} P;

uint64_t peer_incarnation_self(void)
{
	return P.incarnation;
}

const char *peer_transport_name(void)
{
	return P.tr ? P.tr->name : "none";
}

void peer_write_transport_stats(FILE *out)
{
	if (P.tr && P.tr->write_stats)
		P.tr->write_stats(out);
}

struct peer *peer_by_node(uint32_t n)
{
	return n < P.conf->nnodes ? P.by_node[n] : NULL;
}

uint32_t peer_count(void)
{
	return P.npeers;
}

struct peer *peer_at(uint32_t i)
{
	return &P.peers[i];
}

/* --- sending --- */

void peer_enqueue(struct peer *p, struct frame *f)
{
	struct wire_frame_hdr h = {
		.version = WIRE_VERSION,
		.kind = WIRE_DATA,
		.len = f->len - (uint32_t)sizeof(struct wire_frame_hdr),
		.seq = ++p->send_seq,
	};

	f->seq = h.seq;
	wire_encode_hdr(f->data, &h);
	frameq_push(&p->q, f);
	if (!p->send_cur) {
		p->send_cur = f;
		p->send_off = 0;
	}
	p->unsent += f->len;
	p->st.frames_sent++;
	p->st.bytes_sent += f->len;
	p->st.items_sent += f->nitems;
	if (p->state == PEER_UP)
		p->link->ops->kick(p->link);
}

void peer_tx_stamp(struct peer *p, uint8_t *hdr)
{
	uint64_t ack = htole64(p->recv_seq);

	memcpy(hdr + offsetof(struct wire_frame_hdr, ack), &ack, sizeof(ack));
	p->ack_sent = p->recv_seq;
}

void peer_tx_advance(struct peer *p, size_t n)
{
	while (n > 0 && p->send_cur) {
		size_t left = p->send_cur->len - p->send_off;

		if (n < left) {
			p->send_off += (uint32_t)n;
			p->unsent -= n;
			return;
		}
		n -= left;
		p->unsent -= left;
		p->send_cur = p->send_cur->next;
		p->send_off = 0;
	}
}

static void send_ctrl(struct link *l, uint8_t kind, uint64_t ack, const void *body, uint32_t len)
{
	uint8_t buf[sizeof(struct wire_frame_hdr) + sizeof(struct wire_hello)];
	struct wire_frame_hdr h = { .version = WIRE_VERSION, .kind = kind, .len = len, .ack = ack };

	wire_encode_hdr(buf, &h);
	if (len)
		memcpy(buf + sizeof(h), body, len);
	if (l->ops->send_ctrl(l, buf, sizeof(h) + len) < 0)
		log_rl_warn("link control buffer full; a %s frame was not sent",
			    kind == WIRE_ACK ? "ACK" : "handshake");
}

/* --- acknowledgements --- */

static int take_ack(struct peer *p, uint64_t ack)
{
	uint64_t acked = p->q.head ? p->q.head->seq - 1 : p->send_seq;
	uint64_t written = p->send_cur ? p->send_cur->seq - 1 : p->send_seq;

	if (ack <= acked)
		return 0;
	if (ack > written) {
		log_warn("peer %u acknowledges frame %llu, but only %llu went out; closing the link",
			 p->node, (unsigned long long)ack, (unsigned long long)written);
		return -EPROTO;
	}
	while (p->q.head && p->q.head->seq <= ack)
		frame_free(frameq_pop(&p->q));
	return 0;
}

int peer_poll(void)
{
	int work = 0;

	for (uint32_t i = 0; i < P.npeers; i++) {
		struct peer *p = &P.peers[i];

		/* A frame going out anyway carries the acknowledgement. */
		if (p->state != PEER_UP || p->recv_seq == p->ack_sent || p->send_cur)
			continue;
		send_ctrl(p->link, WIRE_ACK, p->recv_seq, NULL, 0);
		p->ack_sent = p->recv_seq;
		p->link->ops->kick(p->link);
		work = 1;
	}
	return work;
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
	struct hs *hs = l->hs;

	if (!hs)
		return;
	loop_timer_cancel(&hs->timeout);
	free(hs);
	l->hs = NULL;
}

/* The peer loses its link: everything not acknowledged goes out again on the
 * next one, from the first unacknowledged frame. */
static void detach(struct peer *p, const char *why)
{
	int was_up = p->state == PEER_UP;

	p->link = NULL;
	p->state = PEER_DOWN;
	p->send_cur = p->q.head;
	p->send_off = 0;
	p->unsent = p->q.bytes;
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
}

/* Drops a link from our side (handshake failure, replaced connection). */
static void drop(struct link *l, const char *why)
{
	struct peer *p = l->peer;

	free_hs(l);
	if (p && p->link == l)
		detach(p, why);
	l->ops->close(l);
}

void peer_link_down(struct link *l, const char *why)
{
	struct peer *p = l->peer;

	free_hs(l);
	if (p && p->link == l)
		detach(p, why);
	else if (!p)
		log_debug("unidentified connection: %s", why);
}

static void on_hs_timeout(struct loop_timer *t)
{
	struct hs *hs = t->ctx;
	struct link *l = hs->l;

	if (l->state == LINK_CONNECTING) {
		log_debug("peer %u: connecting did not complete within %llu s; trying again", l->peer->node,
			  (unsigned long long)(HANDSHAKE_TIMEOUT_NS / 1000000000u));
		drop(l, "connecting timed out");
		return;
	}
	log_notice("%s%u: handshake did not complete within %llu s; closing", l->peer ? "peer " : "connection ",
		   l->peer ? l->peer->node : 0, (unsigned long long)(HANDSHAKE_TIMEOUT_NS / 1000000000u));
	drop(l, "handshake timed out");
}

static struct hs *new_hs(struct link *l)
{
	struct hs *hs = calloc(1, sizeof(*hs));

	if (!hs)
		return NULL;
	hs->l = l;
	l->hs = hs;
	loop_timer_arm(&hs->timeout, HANDSHAKE_TIMEOUT_NS, on_hs_timeout, hs);
	return hs;
}

static void send_hello(struct link *l, struct peer *p)
{
	struct hs *hs = l->hs;
	struct wire_hello h = {
		.magic = WIRE_MAGIC,
		.version = WIRE_VERSION,
		.flags = auth_insecure() ? WIRE_HELLO_INSECURE : 0,
		.from = P.self,
		.to = p->node,
		.incarnation = P.incarnation,
		.peer_incarnation = p->incarnation,
		.ack = p->incarnation ? p->recv_seq : 0,
		.cluster_len = (uint8_t)strlen(P.conf->cluster_name),
	};

	auth_random(h.nonce, sizeof(h.nonce));
	memcpy(h.cluster, P.conf->cluster_name, h.cluster_len);
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
	ret = P.tr->connect(p, p->addr->host, p->addr->port, &l);
	if (ret < 0) {
		log_debug("peer %u: %s", p->node, p->last_error);
		schedule_retry(p);
		return;
	}
	p->link = l;
	p->state = PEER_CONNECTING;
	if (!new_hs(l))
		drop(l, "out of memory");
}

void peer_link_connected(struct link *l)
{
	struct peer *p = l->peer;
	struct hs *hs = l->hs;

	/* The connect timeout becomes the handshake's. */
	loop_timer_arm(&hs->timeout, HANDSHAKE_TIMEOUT_NS, on_hs_timeout, hs);
	p->state = PEER_HANDSHAKE;
	send_hello(l, p);
	l->ops->kick(l);
}

void peer_link_accepted(struct link *l)
{
	if (!new_hs(l))
		l->ops->close(l);
}

/* Both sides authenticated: resume where the last connection left off. */
static void link_up(struct link *l)
{
	struct peer *p = l->peer;
	struct hs *hs = l->hs;
	uint64_t ack;

	if (p->incarnation && hs->their.incarnation != p->incarnation) {
		uint64_t items = 0;

		for (struct frame *f = p->q.head; f; f = f->next)
			items += f->nitems;
		log_notice("peer %u restarted; %u frames (%llu items) queued for its previous instance dropped",
			   p->node, p->q.count, (unsigned long long)items);
		p->st.dropped_frames += p->q.count;
		frameq_clear(&p->q);
		p->send_seq = 0;
		p->recv_seq = 0;
		p->ack_sent = 0;
	}
	p->incarnation = hs->their.incarnation;
	/* Their ack counts only if it refers to this instance of us. */
	ack = hs->their.peer_incarnation == P.incarnation ? hs->their.ack : 0;
	p->send_cur = NULL;             /* everything queued counts as written for take_ack */
	if (ack > p->send_seq || take_ack(p, ack) < 0) {
		drop(l, "peer acknowledges frames that were never sent");
		return;
	}
	p->send_cur = p->q.head;
	p->send_off = 0;
	p->unsent = p->q.bytes;
	p->st.retransmits += p->q.count;
	p->ack_sent = 0;                /* tell it our position promptly */
	free_hs(l);
	l->state = LINK_UP;
	p->state = PEER_UP;
	p->backoff_ms = BACKOFF_MIN_MS;
	p->last_error[0] = '\0';
	p->st.connects++;
	log_notice("peer %u (%s port %u) up%s; %u frames to send again", p->node, p->addr->host, p->addr->port,
		   auth_insecure() ? " (insecure)" : "", p->q.count);
	if (p->stalled)
		l->ops->pause(l, 1);
	l->ops->kick(l);
}

static int handshake(struct link *l, const struct wire_frame_hdr *h, const uint8_t *body)
{
	struct hs *hs = l->hs;
	struct peer *p = l->peer;
	uint8_t mac[WIRE_MAC_BYTES];

	if (!hs)
		return -EPROTO;
	if (h->kind == WIRE_HELLO && !hs->have_theirs) {
		struct wire_hello *w = &hs->their;

		if (wire_decode_hello(body, h->len, w) < 0) {
			log_warn("%s%u: malformed HELLO; closing", p ? "peer " : "connection from node ", p ? p->node : 0);
			return -EPROTO;
		}
		if (w->cluster_len != strlen(P.conf->cluster_name) ||
		    memcmp(w->cluster, P.conf->cluster_name, w->cluster_len) != 0) {
			log_warn("node %u belongs to cluster \"%.*s\", not \"%s\"; refused", w->from, w->cluster_len,
				 w->cluster, P.conf->cluster_name);
			return -EPROTO;
		}
		if (w->to != P.self) {
			log_warn("node %u meant to reach node %u, this is node %u; refused (check --node)", w->from,
				 w->to, P.self);
			return -EPROTO;
		}
		memcpy(hs->theirs, body, sizeof(hs->theirs));
		hs->have_theirs = 1;
		if (l->outgoing) {
			if (w->from != p->node) {
				log_warn("peer %u answered as node %u; refused", p->node, w->from);
				return -EPROTO;
			}
			return 1;       /* its AUTH follows */
		}
		p = peer_by_node(w->from);
		if (!p) {
			log_warn("node %u is not a routing peer of node %u; refused (do both use the same topology?)",
				 w->from, P.self);
			return -EPROTO;
		}
		if (p->outgoing) {
			log_warn("node %u connected, but node %u is the one that connects to it; refused "
				 "(do both use the same configuration?)", w->from, P.self);
			return -EPROTO;
		}
		if (p->link && p->link != l)
			drop(p->link, "replaced by a new connection from the same node");
		l->peer = p;
		p->link = l;
		p->state = PEER_HANDSHAKE;
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
			if (theirs_insecure && !auth_insecure())
				log_warn("peer %u has no cluster key (insecure mode); refused", p->node);
			else if (!theirs_insecure && auth_insecure())
				log_warn("peer %u has a cluster key and this daemon has none; it cannot be "
					 "authenticated; refused", p->node);
			else
				log_warn("peer %u failed authentication: it holds a different cluster key; refused",
					 p->node);
			snprintf(p->last_error, sizeof(p->last_error), "authentication failed");
			return -EPROTO;
		}
		if (l->outgoing) {
			auth_mac(mac, 'I', hi, ha);
			send_ctrl(l, WIRE_AUTH, 0, mac, sizeof(mac));
		}
		link_up(l);
		return 1;
	}
	log_warn("%s%u: unexpected frame (kind %u) during the handshake; closing", p ? "peer " : "node ",
		 p ? p->node : hs->their.from, h->kind);
	return -EPROTO;
}

int peer_rx(struct link *l, const struct wire_frame_hdr *h, const uint8_t *body)
{
	struct peer *p = l->peer;
	int ret;

	if (l->state != LINK_UP)
		return handshake(l, h, body);
	if (take_ack(p, h->ack) < 0)
		return -EPROTO;
	if (h->kind == WIRE_ACK)
		return 1;
	if (h->kind != WIRE_DATA) {
		log_warn("peer %u: unexpected frame kind %u; closing the link", p->node, h->kind);
		return -EPROTO;
	}
	if (h->seq <= p->recv_seq) {
		p->st.duplicates++;     /* sent again after a reconnection: we have it */
		return 1;
	}
	if (h->seq != p->recv_seq + 1) {
		log_warn("peer %u: frame %llu out of sequence (expected %llu); closing the link", p->node,
			 (unsigned long long)h->seq, (unsigned long long)p->recv_seq + 1);
		return -EPROTO;
	}
	if (p->stalled)
		return 0;
	ret = fwd_rx(p, body, h->len);
	if (ret < 0) {
		log_warn("peer %u: malformed frame %llu; closing the link", p->node, (unsigned long long)h->seq);
		return -EPROTO;
	}
	p->recv_seq = h->seq;
	p->st.frames_recv++;
	p->st.bytes_recv += sizeof(*h) + h->len;
	return 1;
}

void peer_resume_rx(struct peer *p)
{
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

static int link_dim(const struct route *r, uint32_t a, uint32_t b)
{
	uint32_t ca[ROUTE_MAX_DIMS], cb[ROUTE_MAX_DIMS];
	int dim = -1;

	route_coords(r, a, ca);
	route_coords(r, b, cb);
	for (uint32_t d = 0; d < r->ndims; d++) {
		if (ca[d] == cb[d])
			continue;
		if (dim >= 0)
			return -1;
		dim = (int)d;
	}
	return dim;
}

int peer_init(const struct conf *c, uint32_t self)
{
	uint32_t n = route_peers(&c->route, self, NULL, 0);
	uint32_t *ids = calloc(n ? n : 1, sizeof(*ids));
	int ret;

	P.conf = c;
	P.self = self;
	do
		auth_random(&P.incarnation, sizeof(P.incarnation));
	while (P.incarnation == 0);
	P.by_node = calloc(c->nnodes, sizeof(*P.by_node));
	P.peers = calloc(n ? n : 1, sizeof(*P.peers));
	if (!ids || !P.by_node || !P.peers) {
		free(ids);
		return -ENOMEM;
	}
	route_peers(&c->route, self, ids, n);
	P.npeers = n;
	for (uint32_t i = 0; i < n; i++) {
		struct peer *p = &P.peers[i];

		p->node = ids[i];
		p->addr = &c->nodes[ids[i]];
		p->dim = link_dim(&c->route, self, ids[i]);
		p->outgoing = self < ids[i];
		p->backoff_ms = BACKOFF_MIN_MS;
		P.by_node[ids[i]] = p;
	}
	free(ids);
	P.tr = &transport_tcp;
	if (n == 0)
		return 0;
	if (c->transport != CONF_TRANSPORT_TCP) {
		ret = transport_verbs.listen(c, self);
		if (ret == 0) {
			P.tr = &transport_verbs;
		} else if (c->transport == CONF_TRANSPORT_VERBS) {
			log_err("transport.kind = \"verbs\", but RDMA links cannot be set up (see above)");
			return ret;
		} else {
			log_notice("transport.kind = \"auto\": RDMA links cannot be set up (see above); using TCP");
		}
	}
	if (P.tr == &transport_tcp && (ret = transport_tcp.listen(c, self)) < 0)
		return ret;
	for (uint32_t i = 0; i < n; i++)
		if (P.peers[i].outgoing)
			connect_peer(&P.peers[i]);
	return 0;
}

void peer_fini(void)
{
	for (uint32_t i = 0; i < P.npeers; i++) {
		struct peer *p = &P.peers[i];

		loop_timer_cancel(&p->retry);
		if (p->link) {
			free_hs(p->link);
			p->link->ops->close(p->link);
			p->link = NULL;
		}
		frameq_clear(&p->q);
		if (p->agg)
			frame_free(p->agg);
		if (p->stalled)
			frame_free(p->stalled);
	}
	if (P.tr)
		P.tr->fini();
	free(P.peers);
	free(P.by_node);
	P.peers = NULL;
	P.by_node = NULL;
	P.npeers = 0;
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
	for (uint32_t i = 0; i < P.npeers; i++) {
		struct peer *p = &P.peers[i];
		char desc[160] = "";

		if (p->link)
			p->link->ops->describe(p->link, desc, sizeof(desc));
		fprintf(out, "  peer %u %s:%u dim %d: %s%s%s%s%s; %u frames queued (%llu bytes unsent), sent to %llu, "
			"received to %llu\n", p->node, p->addr->host, p->addr->port, p->dim, state_name(p->state),
			desc[0] ? " via " : "", desc, p->last_error[0] && p->state != PEER_UP ? ", last error: " : "",
			p->state != PEER_UP ? p->last_error : "", p->q.count, (unsigned long long)p->unsent,
			(unsigned long long)p->send_seq, (unsigned long long)p->recv_seq);
	}
}

void peer_write_stats(FILE *out)
{
	for (uint32_t i = 0; i < P.npeers; i++) {
		const struct peer *p = &P.peers[i];
		const struct peer_stats *s = &p->st;

		fprintf(out,
			"peer %u frames_sent %llu bytes_sent %llu frames_recv %llu bytes_recv %llu "
			"items_sent %llu items_recv %llu items_forwarded %llu items_delivered %llu "
			"items_per_frame_sent %.2f items_per_frame_recv %.2f "
			"flush_full %llu flush_timer %llu flush_explicit %llu retransmits %llu duplicates %llu "
			"connects %llu disconnects %llu dropped_frames %llu stalls %llu\n",
			p->node, (unsigned long long)s->frames_sent, (unsigned long long)s->bytes_sent,
			(unsigned long long)s->frames_recv, (unsigned long long)s->bytes_recv,
			(unsigned long long)s->items_sent, (unsigned long long)s->items_recv,
			(unsigned long long)s->items_forwarded, (unsigned long long)s->items_delivered,
			s->frames_sent ? (double)s->items_sent / (double)s->frames_sent : 0.0,
			s->frames_recv ? (double)s->items_recv / (double)s->frames_recv : 0.0,
			(unsigned long long)s->flush_full, (unsigned long long)s->flush_timer,
			(unsigned long long)s->flush_explicit, (unsigned long long)s->retransmits,
			(unsigned long long)s->duplicates, (unsigned long long)s->connects,
			(unsigned long long)s->disconnects, (unsigned long long)s->dropped_frames,
			(unsigned long long)s->stalls);
	}
}
