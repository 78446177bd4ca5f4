/* tests/fuzz/fuzz_peer.c - the peer layer's state machine (daemon/net/peer.c
 * and seq.c: handshake, sequence numbers, acknowledgements, reconnection) fed
 * by arbitrary peers, over the in-memory transport of tests/unit/fake_link.h.
 *
 * The daemon is node 1 of a 2x2 virtual grid (peer 0 connects to it, it
 * connects to peer 3), with a cluster key and, chosen by the first byte of
 * the input, frames not authenticated, authenticated (security.integrity) or
 * encrypted (security.encrypt).  The rest of the input is a script, a byte an
 * operation: accept a connection, establish the outgoing one, hand a link an
 * arbitrary frame (sealed as the other end would, on a link that is up, or
 * not), a well-formed HELLO (with fields from the input, its security
 * settings too) or a correct AUTH for the HELLOs exchanged on it, hand it
 * again the last frame it got, changed in one bit or not (a replay), fail a
 * link, queue a frame for a peer, send acknowledgements, resume reading,
 * choose what the layer above answers.  A link whose last frame was not
 * taken gets only that frame again (as a transport does after a pause).
 * Besides what the sanitizers catch, it aborts when the peer layer closes a
 * link whose frame it is handling (the contract of net/link.h), when a frame
 * is left over after everything was shut down, and when a replayed or changed
 * frame on a link with sealed frames is not refused, or reaches the layer
 * above.
 */
#include "../unit/fake_link.h"
#include "../../daemon/core/conf.h"
#include "../../daemon/core/log.h"
#include "../../daemon/net/peer.h"

#include <stdlib.h>
#include <unistd.h>

#define MAX_LINKS 8

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct conf confs[3];    /* by enum auth_frames */
static char key_path[] = "/tmp/fuzz_peer-key.XXXXXX";
static int answer;              /* what the layer above says to a frame */
static int tampering;           /* a replayed or changed frame is being handed over */
/* What the inputs reached, printed at exit with FUZZ_PEER_STATS=1 (to see
 * that the corpus gets links up and through the checks). */
static struct {
	unsigned long up[3], sealed_taken, tampered_refused;
} reached;

static int above_rx(struct peer *p, const uint8_t *body, uint32_t len, int urgent)
{
	(void)p;
	(void)body;
	(void)len;
	(void)urgent;
	if (tampering)
		abort();        /* a frame that fails its check reached the layer above */
	return answer;
}

static const struct peer_events events = { .rx = above_rx };

/* What the remote end sent as HELLO on each link, for its AUTH. */
static struct {
	struct fake_link *fl;
	uint8_t hello[sizeof(struct wire_hello)];
	int have_hello;
	int held;               /* its last frame was not taken: only that one comes again */
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

/* Hands a frame to link k as its transport would; remembers whether it was
 * taken. */
static int arrive_raw(int k, const void *frame, size_t len)
{
	int ret = fake_arrive_raw(links[k].fl, frame, len);

	links[k].held = ret == 0;
	return ret;
}

static int arrive(int k, uint8_t kind, uint64_t seq, uint64_t ack, const void *body, uint32_t len)
{
	int up = links[k].fl->sealed && links[k].fl->l.state == LINK_UP;
	int ret = fake_arrive(links[k].fl, kind, seq, ack, body, len);

	links[k].held = ret == 0;
	reached.sealed_taken += up && ret == 1 && (kind == WIRE_DATA || kind == WIRE_ACK);
	return ret;
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

	/* A paused link: its transport offers the same frame again, and
	 * nothing else, until the peer layer takes it. */
	if (fl && !fl->closed && links[k].held && (op % 10 == 2 || op % 10 == 3 || op % 10 == 4 || op % 10 == 9)) {
		links[k].held = fake_reoffer(fl) == 0;
		return;
	}
	switch (op % 10) {
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
		uint8_t kind = next() % 6, len = next() % sizeof(body), how = next();
		uint64_t seq = next() % 8, ack = next() % 8;

		for (int i = 0; i < len; i++)
			body[i] = next();
		if (kind == WIRE_HELLO && next() & 1)
			len = sizeof(struct wire_hello) < sizeof(body) ? sizeof(struct wire_hello) : len;
		if (!fl || fl->closed)
			break;
		if (!fl->sealed || !(how & 0x80)) {
			arrive(k, kind, seq, ack, body, len);  /* sealed as the other end would, when up */
		} else {        /* not sealed: flags from the input, no tag or a made-up one */
			uint8_t frame[sizeof(struct wire_frame_hdr) + sizeof(body)];
			struct wire_frame_hdr h = { .version = WIRE_VERSION, .kind = kind, .flags = how & 0x1f,
						    .len = len, .seq = seq, .ack = ack };

			wire_encode_hdr(frame, &h);
			memcpy(frame + sizeof(h), body, len);
			arrive_raw(k, frame, sizeof(h) + len);
		}
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
		{
			/* Now and then, other security settings than the daemon's. */
			int frames = fake.frames, other = next();

			if (!(other & 7))
				fake.frames = (fake.frames + 1 + (other >> 3) % 2) % 3;
			fake_hello(links[k].hello, from, to, inc, peer_inc, ack, next() & 7 ? "fuzz" : "other");
			fake.frames = frames;
		}
		links[k].have_hello = 1;
		arrive(k, WIRE_HELLO, 0, 0, links[k].hello, sizeof(links[k].hello));
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
		/* If the link comes up, the other end seals its frames from
		 * then on (and opens the daemon's). */
		if (fake.frames != AUTH_FRAMES_PLAIN && !fl->sealed) {
			auth_link_start(&fl->remote, fake.frames, !fl->l.outgoing,
					fl->l.outgoing ? ours : links[k].hello, fl->l.outgoing ? links[k].hello : ours);
			fl->sealed = 1;
		}
		arrive(k, WIRE_AUTH, 0, 0, mac, sizeof(mac));
		if (fl->l.state != LINK_UP)
			fl->sealed = 0;
		else
			reached.up[fake.frames]++;
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
	case 9: {       /* the last frame again: replayed, or changed in one bit */
		uint8_t bit = next(), *copy;
		uint16_t where = (uint16_t)(next() | next() << 8);
		int up, ret;

		if (!fl || fl->closed || !fl->last)
			break;
		copy = malloc(fl->last_len);
		memcpy(copy, fl->last, fl->last_len);
		if (bit & 0x80)
			copy[where % fl->last_len] ^= (uint8_t)(1u << (bit & 7));
		up = fl->sealed && fl->l.state == LINK_UP;
		tampering = up;
		ret = arrive_raw(k, copy, fl->last_len);
		tampering = 0;
		if (up && ret != -EPROTO)
			abort();        /* a replayed or changed frame was not refused */
		reached.tampered_refused += up;
		free(copy);
		break;
	}
	}
	if (fake.used_dead)
		abort();        /* the peer layer used a link it had let go of */
}

static void at_exit(void)
{
	unlink(key_path);
	if (getenv("FUZZ_PEER_STATS"))
		fprintf(stderr, "links up: %lu plain, %lu authenticated, %lu encrypted; sealed frames taken %lu; "
			"replayed or changed frames refused %lu\n", reached.up[0], reached.up[1], reached.up[2],
			reached.sealed_taken, reached.tampered_refused);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const struct loop_hooks hooks = { 0 };
	static int ready;

	if (!ready) {
		static const char *const sec[3] = { "integrity = false;", "", "encrypt = true;" };
		int fd = mkstemp(key_path);
		char extra[256];

		log_init("fuzz_peer", -1);              /* quiet */
		if (fd < 0 || write(fd, "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", 64) != 64)
			abort();
		close(fd);
		atexit(at_exit);
		for (int i = 0; i < 3; i++) {
			snprintf(extra, sizeof(extra), "security: { key_file = \"%s\"; %s };", key_path, sec[i]);
			if (fake_daemon(&confs[i], "fuzz", extra) < 0)
				abort();
			loop_fini();
			frame_fini();
		}
		ready = 1;
	}
	fake.frames = size ? data[0] % 3 : 0;
	in = data + (size ? 1 : 0);
	left = size ? size - 1 : 0;
	nlinks = 0;
	answer = 0;
	fake.used_dead = 0;
	fake.connects = 0;
	if (loop_init(0, &hooks) < 0)
		abort();
	frame_init(confs[fake.frames].buffer_bytes, confs[fake.frames].link_bytes);
	if (peer_init(&confs[fake.frames], 1, &fake_transport, &events) < 0)
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
