/* tests/unit/fake_link.h - a transport for unit tests of the peer layer and
 * what sits on it: links are structs in memory; what the peer layer writes
 * is kept, frame by frame, for the test to read, and the test hands frames
 * to the peer layer as if they had arrived (the link events of link.h).
 *
 * A link the peer layer closes, or that fails (a frame the peer layer
 * refuses with -EPROTO ends it as a real transport would), is only marked
 * closed and dead, as link.h says a transport does (a real one frees it from
 * the loop later): the test may still look at it; fake_free_all frees them
 * all.  The contract of link.h is checked on the way: an op other than close
 * called on a dead link (the peer layer still using a link it let go of)
 * counts in fake.used_dead, which tests expect to stay 0.
 *
 * Frame integrity: with fake.frames set to what the daemon's configuration
 * says (security.integrity, security.encrypt), the handshake helpers start
 * the other end's keys too (fl->remote, auth.h) once the link is up: from then
 * on fake_arrive seals what the test sends as the other end would, and every
 * frame the daemon writes is opened as the other end would (o->opened says
 * whether it passed, and its body is then the plaintext).
 */
#ifndef FERRY_TEST_FAKE_LINK_H
#define FERRY_TEST_FAKE_LINK_H

#include "../../daemon/core/conf.h"
#include "../../daemon/core/loop.h"
#include "../../daemon/net/auth.h"
#include "../../daemon/net/link.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FAKE_OUT_MAX 1024

struct fake_frame {
	struct wire_frame_hdr h;
	uint8_t *body;                  /* h.len bytes (the tag included), opened */
	uint8_t raw[64];                /* the first bytes as written (header, start of the body), sealed */
	int opened;                     /* fl->sealed: 1 if the other end's check passed, -1 if not */
};

struct fake_link {
	struct link l;
	uint32_t node;                  /* connect()'s node */
	int closed;                     /* ops->close ran, or the link failed */
	int paused;                     /* the last pause() said so */
	int pauses, resumes;
	int faults;                     /* ops->fault calls */
	int in_rx;                      /* inside ev->rx */
	uint8_t ctrl[16][512];          /* control frames not yet written */
	size_t ctrl_len[16];
	int nctrl;
	struct fake_frame out[FAKE_OUT_MAX];    /* written, oldest first */
	int nout, read;                 /* frames written; frames the test took */
	struct auth_link remote;        /* the other end's frame keys, once sealed */
	int sealed;                     /* the link is up and fake.frames says frames are sealed */
	uint8_t *last;                  /* the last frame handed to the peer layer, as it was */
	size_t last_len;
	struct fake_link *next_all;
};

static struct {
	const struct link_events *ev;
	struct fake_link *all;
	struct fake_link *connected[64];        /* by node: the latest connect() */
	int connects;
	int used_dead;                  /* contract violations: ops on a dead link */
	int frames;                     /* enum auth_frames of the daemon under test */
	uint16_t data_flags;            /* fake_arrive: more flags on DATA frames (URGENT) */
	int steer;                      /* fake_arrive_raw offers DATA frames to ev->steer first */
	int steer_fail;                 /* ... and the bytes it asks for then never come */
	int steered;                    /* frames received in place */
} fake;

/* The daemon wrote a frame (sealed): the other end reads it. */
static inline void fake_put(struct fake_link *fl, const uint8_t *frame, size_t len)
{
	struct fake_frame *o = &fl->out[fl->nout++ % FAKE_OUT_MAX];
	uint8_t *copy = malloc(len);

	memcpy(copy, frame, len);
	memcpy(o->raw, frame, len < sizeof(o->raw) ? len : sizeof(o->raw));
	wire_decode_hdr(frame, &o->h);
	o->opened = 0;
	if (fl->sealed && (o->h.kind == WIRE_DATA || o->h.kind == WIRE_ACK))
		o->opened = auth_open(&fl->remote, copy, len) == 0 ? 1 : -1;
	o->body = malloc(len - sizeof(o->h) + 1);
	memcpy(o->body, copy + sizeof(o->h), len - sizeof(o->h));
	free(copy);
}

static inline void fake_kick(struct link *l)
{
	struct fake_link *fl = (struct fake_link *)l;
	struct frame *f;
	uint32_t off;

	if (fl->closed) {
		fake.used_dead++;
		return;
	}
	if (l->state == LINK_CONNECTING)
		return;
	/* Each frame is sealed as it is written, control frames first. */
	for (int i = 0; i < fl->nctrl; i++) {
		fake.ev->tx_seal(l, fl->ctrl[i], fl->ctrl[i]);
		fake_put(fl, fl->ctrl[i], fl->ctrl_len[i]);
	}
	fl->nctrl = 0;
	while ((f = fake.ev->tx_first(l, &off)) != NULL) {
		if (l->encrypt) {       /* out of place: the frame stays plaintext */
			uint8_t *out = malloc(f->len);

			fake.ev->tx_seal(l, f->data, out);
			fake_put(fl, out, f->len);
			free(out);
		} else if (f->lent) {   /* lent bytes (frame.h): never tagged */
			uint8_t *out = malloc(f->len);

			fake.ev->tx_seal(l, f->data, f->data);
			memcpy(out, f->data, f->own);
			memcpy(out + f->own, f->lent, f->len - f->own);
			fake_put(fl, out, f->len);
			free(out);
		} else {
			fake.ev->tx_seal(l, f->data, f->data);
			fake_put(fl, f->data, f->len);
		}
		fake.ev->tx_done(l, f->len - off);
	}
}

static inline int fake_send_ctrl(struct link *l, const void *frame, size_t len)
{
	struct fake_link *fl = (struct fake_link *)l;

	if (fl->closed)
		fake.used_dead++;
	if (fl->nctrl == 16 || len > sizeof(fl->ctrl[0]))
		return -ENOBUFS;
	memcpy(fl->ctrl[fl->nctrl], frame, len);
	fl->ctrl_len[fl->nctrl++] = len;
	return 0;
}

static inline void fake_pause(struct link *l, int on)
{
	struct fake_link *fl = (struct fake_link *)l;

	if (fl->closed)
		fake.used_dead++;
	fl->paused = on;
	if (on)
		fl->pauses++;
	else
		fl->resumes++;
}

static inline void fake_close(struct link *l)
{
	struct fake_link *fl = (struct fake_link *)l;

	fl->closed = 1;
	l->dead = 1;
}

static inline void fake_fault(struct link *l)
{
	((struct fake_link *)l)->faults++;
}

static inline void fake_describe(const struct link *l, char *buf, size_t len)
{
	snprintf(buf, len, "fake to node %u", ((const struct fake_link *)l)->node);
}

static const struct link_ops fake_ops = {
	.name = "fake",
	.kick = fake_kick,
	.send_ctrl = fake_send_ctrl,
	.pause = fake_pause,
	.close = fake_close,
	.fault = fake_fault,
	.describe = fake_describe,
};

static inline struct fake_link *fake_new(int outgoing)
{
	struct fake_link *fl = calloc(1, sizeof(*fl));

	fl->l.ops = &fake_ops;
	fl->l.outgoing = outgoing;
	fl->l.state = outgoing ? LINK_CONNECTING : LINK_HANDSHAKE;
	fl->next_all = fake.all;
	fake.all = fl;
	return fl;
}

static inline int fake_listen(const struct conf *c, uint32_t self, const struct link_events *ev)
{
	(void)c;
	(void)self;
	fake.ev = ev;
	return 0;
}

static inline int fake_connect(uint32_t node, const char *host, uint16_t port, struct link **l_p, char *err,
			       size_t errlen)
{
	struct fake_link *fl = fake_new(1);

	(void)host;
	(void)port;
	(void)err;
	(void)errlen;
	fl->node = node;
	if (node < 64)
		fake.connected[node] = fl;
	fake.connects++;
	*l_p = &fl->l;
	return 0;
}

static inline void fake_fini(void)
{
	fake.ev = NULL;
}

static const struct transport fake_transport = {
	.name = "fake",
	.listen = fake_listen,
	.connect = fake_connect,
	.fini = fake_fini,
	.sends_lent = 1,        /* as TCP: frames without a tag may lend bytes */
};

/* The connection of an outgoing link is established. */
static inline void fake_established(struct fake_link *fl)
{
	fl->l.state = LINK_HANDSHAKE;
	fake.ev->connected(&fl->l);
}

/* A connection comes in. */
static inline struct fake_link *fake_accept(void)
{
	struct fake_link *fl = fake_new(0);

	fake.ev->accepted(&fl->l);
	return fl;
}

/* Hands the frame at frame (len bytes, as on the wire) to the peer layer as
 * if it had arrived on fl; it is kept as fl->last (the peer layer may change
 * it in place).  A header that does not decode ends the link, as in a real
 * transport.  Returns what the peer layer said; a refusal ends the link. */
static inline int fake_arrive_raw(struct fake_link *fl, const void *frame, size_t len)
{
	struct wire_frame_hdr h;
	int ret;

	free(fl->last);
	fl->last = malloc(len);
	memcpy(fl->last, frame, len);
	fl->last_len = len;
	if (len < sizeof(h) || wire_decode_hdr(frame, &h) < 0 || sizeof(h) + h.len != len) {
		ret = -EPROTO;
	} else {
		uint8_t *to = NULL;
		int later;

		fl->in_rx = 1;
		/* Receiving in place (link.h), as TCP does it, for frames of
		 * any size: the peer layer and the one above decide. */
		if (fake.steer && h.kind == WIRE_DATA && len >= WIRE_STEER_HEAD && fl->l.state == LINK_UP)
			to = fake.ev->steer(&fl->l, &h, fl->last, &later);
		if (to && fake.steer_fail) {
			fake.ev->steered(&fl->l, &h, fl->last, 0);
			ret = -EIO;
		} else if (to) {
			memcpy(to, fl->last + WIRE_STEER_HEAD, len - WIRE_STEER_HEAD);
			ret = fake.ev->steered(&fl->l, &h, fl->last, 1);
			fake.steered += ret == 1;
		} else {
			ret = fake.ev->rx(&fl->l, &h, fl->last);
		}
		fl->in_rx = 0;
	}

	if (ret < 0 && !fl->closed) {
		fl->closed = 1;
		fl->l.dead = 1;
		fake.ev->down(&fl->l, "protocol error");
	} else {
		fl->l.frames_in += ret == 1;
	}
	return ret;
}

/* The frame the other end sends on fl (kind, seq, ack, body): sealed with
 * fl->remote once the link is sealed (DATA and ACK), else as it is. */
static inline int fake_arrive(struct fake_link *fl, uint8_t kind, uint64_t seq, uint64_t ack, const void *body,
			      uint32_t len)
{
	int seal = fl->sealed && (kind == WIRE_DATA || kind == WIRE_ACK);
	uint32_t tag = seal ? WIRE_TAG_BYTES : 0;
	struct wire_frame_hdr h = { .version = WIRE_VERSION, .kind = kind, .len = len + tag, .seq = seq, .ack = ack };
	size_t total = sizeof(h) + len + tag;
	uint8_t *frame = calloc(1, total);
	int ret;

	if (seal)
		h.flags = fl->remote.mode == AUTH_FRAMES_ENCRYPT ? WIRE_FRAME_MAC | WIRE_FRAME_SEALED : WIRE_FRAME_MAC;
	if (kind == WIRE_DATA)
		h.flags |= fake.data_flags;
	wire_encode_hdr(frame, &h);
	if (len)
		memcpy(frame + sizeof(h), body, len);
	if (seal)
		auth_seal(&fl->remote, frame, frame, total);
	ret = fake_arrive_raw(fl, frame, total);
	free(frame);
	return ret;
}

/* Offers the last frame again, as it is now (a transport does that after a
 * pause, with the frame the peer layer may have decrypted in place). */
static inline int fake_reoffer(struct fake_link *fl)
{
	struct wire_frame_hdr h;
	int ret;

	wire_decode_hdr(fl->last, &h);
	fl->in_rx = 1;
	ret = fake.ev->rx(&fl->l, &h, fl->last);
	fl->in_rx = 0;
	if (ret < 0 && !fl->closed) {
		fl->closed = 1;
		fl->l.dead = 1;
		fake.ev->down(&fl->l, "protocol error");
	}
	return ret;
}

/* The link fails (the network, the other end). */
static inline void fake_fail(struct fake_link *fl, const char *why)
{
	fl->closed = 1;
	fl->l.dead = 1;
	fake.ev->down(&fl->l, why);
}

/* The next frame fl wrote that the test has not taken, or NULL. */
static inline struct fake_frame *fake_next(struct fake_link *fl)
{
	if (fl->read == fl->nout)
		return NULL;
	return &fl->out[fl->read++ % FAKE_OUT_MAX];
}

static inline void fake_free_all(void)
{
	while (fake.all) {
		struct fake_link *fl = fake.all;

		fake.all = fl->next_all;
		for (int i = 0; i < fl->nout && i < FAKE_OUT_MAX; i++)
			free(fl->out[i].body);
		free(fl->last);
		free(fl);
	}
	memset(fake.connected, 0, sizeof(fake.connected));
}

static inline void fake_stop_loop(struct loop_timer *t)
{
	(void)t;
	loop_stop();
}

/* Runs the event loop for ms milliseconds (timers: retries, flushes). */
static inline void fake_run_loop(uint64_t ms)
{
	static struct loop_timer stop;

	loop_timer_arm(&stop, ms * 1000000u, fake_stop_loop, NULL);
	loop_run();
}


/* --- the handshake, played by the other end (net/peer.h) --- */

/* A HELLO as node `from` would send it to node `to` (with fake.frames's
 * security settings). */
static inline void fake_hello(uint8_t out[sizeof(struct wire_hello)], uint32_t from, uint32_t to, uint64_t inc,
		       uint64_t peer_inc, uint64_t ack, const char *cluster)
{
	struct wire_hello h = {
		.magic = WIRE_MAGIC, .version = WIRE_VERSION, .from = from, .to = to, .incarnation = inc,
		.peer_incarnation = peer_inc, .ack = ack, .cluster_len = (uint8_t)strlen(cluster),
		/* the same security settings as the daemon under test */
		.flags = fake.frames == AUTH_FRAMES_ENCRYPT ? WIRE_HELLO_INTEGRITY | WIRE_HELLO_ENCRYPT :
			 fake.frames == AUTH_FRAMES_MAC ? WIRE_HELLO_INTEGRITY : 0,
	};

	memcpy(h.cluster, cluster, h.cluster_len);
	auth_random(h.nonce, sizeof(h.nonce));
	wire_encode_hello(out, &h);
}

/* Takes the next frame fl wrote, which must be of kind; NULL if not. */
static inline struct fake_frame *fake_expect(struct fake_link *fl, uint8_t kind)
{
	struct fake_frame *o = fake_next(fl);

	if (!o || o->h.kind != kind) {
		fprintf(stderr, "expected a frame of kind %u, got %d\n", kind, o ? o->h.kind : -1);
		return NULL;
	}
	return o;
}

/* Node from connects to node self over the accepted link fl, with the
 * incarnation inc (and, from an earlier link, self's peer_inc and the ack of
 * what it took).  Returns self's incarnation, 0 if the handshake failed. */
static inline uint64_t fake_handshake_accepted(struct fake_link *fl, uint32_t from, uint32_t self, uint64_t inc,
					uint64_t peer_inc, uint64_t ack, const char *cluster)
{
	uint8_t hi[sizeof(struct wire_hello)], mac[WIRE_MAC_BYTES];
	struct fake_frame *o, *a;
	struct wire_hello ours;

	fake_hello(hi, from, self, inc, peer_inc, ack, cluster);
	if (fake_arrive(fl, WIRE_HELLO, 0, 0, hi, sizeof(hi)) != 1 || !(o = fake_expect(fl, WIRE_HELLO)) ||
	    !(a = fake_expect(fl, WIRE_AUTH)) || wire_decode_hello(o->body, o->h.len, &ours) < 0 ||
	    ours.from != self || ours.to != from || !auth_check(a->body, 'A', hi, o->body))
		return 0;
	auth_mac(mac, 'I', hi, o->body);
	if (fake.frames != AUTH_FRAMES_PLAIN) {         /* the other end connected */
		auth_link_start(&fl->remote, fake.frames, 1, hi, o->body);
		fl->sealed = 1;
	}
	if (fake_arrive(fl, WIRE_AUTH, 0, 0, mac, sizeof(mac)) != 1)
		return 0;
	return ours.incarnation;
}

/* Node self connected to node to over fl, which answers with incarnation
 * inc.  Returns 1 if the link came up. */
static inline int fake_handshake_connected(struct fake_link *fl, uint32_t to, uint32_t self, uint64_t inc,
				    const char *cluster)
{
	uint8_t ha[sizeof(struct wire_hello)], mac[WIRE_MAC_BYTES];
	struct fake_frame *o, *a;
	struct wire_hello ours;

	fake_established(fl);
	if (!(o = fake_expect(fl, WIRE_HELLO)) || wire_decode_hello(o->body, o->h.len, &ours) < 0 ||
	    ours.from != self || ours.to != to || memcmp(ours.cluster, cluster, strlen(cluster)))
		return 0;
	fake_hello(ha, to, self, inc, ours.incarnation, 0, cluster);
	if (fake_arrive(fl, WIRE_HELLO, 0, 0, ha, sizeof(ha)) != 1)
		return 0;
	auth_mac(mac, 'A', o->body, ha);
	if (fake.frames != AUTH_FRAMES_PLAIN) {         /* the other end accepted */
		auth_link_start(&fl->remote, fake.frames, 0, o->body, ha);
		fl->sealed = 1;
	}
	if (fake_arrive(fl, WIRE_AUTH, 0, 0, mac, sizeof(mac)) != 1 || !(a = fake_expect(fl, WIRE_AUTH)))
		return 0;
	return auth_check(a->body, 'I', o->body, ha);
}

/* --- a daemon to test --- */

/* What the peer and forwarding tests run: node 1 of a 2x2 virtual grid named
 * cluster (peers 0, which connects to it, and 3, which it connects to), the
 * configuration lines in extra added; the core and frames started.  Returns
 * 0, or -1 with the reason printed. */
static inline int fake_daemon(struct conf *c, const char *cluster, const char *extra)
{
	static const struct loop_hooks hooks = { 0 };
	char text[2048], err[256];

	snprintf(text, sizeof(text),
		 "cluster: { name = \"%s\"; nodes = ( { host = \"127.0.0.1\"; port = 7000; },"
		 " { host = \"127.0.0.1\"; port = 7001; }, { host = \"127.0.0.1\"; port = 7002; },"
		 " { host = \"127.0.0.1\"; port = 7003; } ); };\n"
		 "topology: { physical = \"switched\"; virtual = [ 2, 2 ]; };\n%s", cluster, extra);
	if (conf_load_string(c, text, "unit.conf", err, sizeof(err)) < 0) {
		fprintf(stderr, "%s\n", err);
		return -1;
	}
	/* The fake links' tests count frames: no link-start probes (test_peer
	 * turns them on where it tests them). */
	c->link_probe = 0;
	if (loop_init(0, &hooks) < 0 || auth_init(c->key_file) < 0) {
		fprintf(stderr, "cannot start the loop or auth\n");
		return -1;
	}
	frame_init(c->buffer_bytes, c->link_bytes);
	return 0;
}

/* Stops what fake_daemon started (the caller stops its own layers first,
 * peer_fini last), and frees every fake link. */
static inline void fake_daemon_stop(struct conf *c)
{
	frame_fini();
	fake_free_all();
	auth_fini();
	loop_fini();
	conf_free(c);
}

#endif
