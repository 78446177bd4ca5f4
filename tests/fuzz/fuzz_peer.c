/* tests/fuzz/fuzz_peer.c - the peer layer's state machine (daemon/net/peer.c
 * and seq.c: handshake, sequence numbers, acknowledgements, reconnection) fed
 * by arbitrary peers, over the in-memory transport of tests/unit/fake_link.h.
 *
 * The daemon is node 1 of a 2x2 virtual grid (peer 0 connects to it, it
 * connects to peer 3).  The input is a script, a byte an operation: accept a
 * connection, establish the outgoing one, hand a link an arbitrary frame, a
 * well-formed HELLO (with fields from the input) or a correct AUTH for the
 * HELLOs exchanged on it, fail a link, queue a frame for a peer, send
 * acknowledgements, resume reading, choose what the layer above answers.
 * Besides what the sanitizers catch, it aborts when the peer layer closes a
 * link whose frame it is handling (the contract of net/link.h), or when a
 * frame is left over after everything was shut down.
 */
#include "../unit/fake_link.h"
#include "../../daemon/core/conf.h"
#include "../../daemon/core/log.h"
#include "../../daemon/net/peer.h"

#include <stdlib.h>

#define MAX_LINKS 8

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct conf conf;
static int answer;              /* what the layer above says to a frame */

static int above_rx(struct peer *p, const uint8_t *body, uint32_t len)
{
	(void)p;
	(void)body;
	(void)len;
	return answer;
}

static const struct peer_events events = { .rx = above_rx };

/* What the remote end sent as HELLO on each link, for its AUTH. */
static struct {
	struct fake_link *fl;
	uint8_t hello[sizeof(struct wire_hello)];
	int have_hello;
} links[MAX_LINKS];
static int nlinks;

static const uint8_t *in;
static size_t left;

static uint8_t next(void)
{
	if (!left)
		return 0;
	left--;
	return *in++;
}

static void add_link(struct fake_link *fl)
{
	if (nlinks < MAX_LINKS)
		links[nlinks++] = (typeof(links[0])){ .fl = fl };
}

/* The HELLO the daemon wrote on fl, or NULL. */
static const uint8_t *daemon_hello(struct fake_link *fl)
{
	for (int i = 0; i < fl->nout && i < FAKE_OUT_MAX; i++)
		if (fl->out[i].h.kind == WIRE_HELLO && fl->out[i].h.len == sizeof(struct wire_hello))
			return fl->out[i].body;
	return NULL;
}

static void one(void)
{
	uint8_t op = next();
	int k = nlinks ? next() % nlinks : 0;
	struct fake_link *fl = nlinks ? links[k].fl : NULL;

	switch (op % 9) {
	case 0:
		add_link(fake_accept());
		break;
	case 1: {
		struct fake_link *c = fake.connected[3];

		if (c && !c->closed && c->l.state == LINK_CONNECTING) {
			add_link(c);
			fake_established(c);
		}
		break;
	}
	case 2: {       /* an arbitrary frame */
		uint8_t body[64];
		uint8_t kind = next() % 6, len = next() % sizeof(body);
		uint64_t seq = next() % 8, ack = next() % 8;

		for (int i = 0; i < len; i++)
			body[i] = next();
		if (kind == WIRE_HELLO && next() & 1)
			len = sizeof(struct wire_hello) < sizeof(body) ? sizeof(struct wire_hello) : len;
		if (fl && !fl->closed)
			fake_arrive(fl, kind, seq, ack, body, len);
		break;
	}
	case 3: {       /* a well-formed HELLO */
		uint32_t from = next() % 4, to = next() % 4;
		uint64_t inc = 1 + next() % 3, peer_inc = 0, ack = next() % 8;
		const uint8_t *ours;

		if (!fl || fl->closed)
			break;
		if ((ours = daemon_hello(fl)) && next() & 1) {
			struct wire_hello h;

			if (wire_decode_hello(ours, sizeof(h), &h) == 0)
				peer_inc = h.incarnation;
		}
		fake_hello(links[k].hello, from, to, inc, peer_inc, ack, next() & 7 ? "fuzz" : "other");
		links[k].have_hello = 1;
		fake_arrive(fl, WIRE_HELLO, 0, 0, links[k].hello, sizeof(links[k].hello));
		break;
	}
	case 4: {       /* the right AUTH for what was exchanged */
		const uint8_t *ours = fl ? daemon_hello(fl) : NULL;
		uint8_t mac[WIRE_MAC_BYTES];

		if (!fl || fl->closed || !ours || !links[k].have_hello)
			break;
		if (fl->l.outgoing)
			auth_mac(mac, 'A', ours, links[k].hello);
		else
			auth_mac(mac, 'I', links[k].hello, ours);
		fake_arrive(fl, WIRE_AUTH, 0, 0, mac, sizeof(mac));
		break;
	}
	case 5:
		if (fl && !fl->closed)
			fake_fail(fl, "fuzz");
		break;
	case 6: {
		struct peer *p = peer_by_node(next() & 1 ? 3 : 0);
		struct frame *f = frame_alloc(16);

		if (f) {
			f->len += 16;
			f->nitems = 1;
			peer_send(p, f);
		}
		break;
	}
	case 7:
		peer_poll();
		peer_resume_rx(peer_by_node(next() & 1 ? 3 : 0));
		break;
	case 8:
		answer = (int[]){ 0, 1, -EPROTO }[next() % 3];
		break;
	}
	if (fake.used_dead)
		abort();        /* the peer layer used a link it had let go of */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const struct loop_hooks hooks = { 0 };
	static int ready;

	if (!ready) {
		log_init("fuzz_peer", -1);              /* quiet */
		if (fake_daemon(&conf, "fuzz", "") < 0)
			abort();
		loop_fini();
		frame_fini();
		ready = 1;
	}
	in = data;
	left = size;
	nlinks = 0;
	answer = 0;
	fake.used_dead = 0;
	fake.connects = 0;
	if (loop_init(0, &hooks) < 0)
		abort();
	frame_init(conf.buffer_bytes);
	if (peer_init(&conf, 1, &fake_transport, &events) < 0)
		abort();
	while (left)
		one();
	peer_fini();
	frame_fini();
	if (frame_mem_bytes != 0)
		abort();        /* a frame was lost track of */
	fake_free_all();
	loop_fini();
	return 0;
}
