/* tests/unit/test_auth.c - frame integrity and encryption (daemon/net/auth.c,
 * and the peer layer's use of it in daemon/net/peer.c): the link keys and
 * tags follow the construction documented in auth.h (recomputed here with
 * libsodium directly), every changed bit and every dropped, replayed,
 * reordered or misdirected frame fails; then the peer layer over the fake
 * transport (fake_link.h), as node 1 of a 2x2 grid with a cluster key, once
 * with security.integrity and once with security.encrypt: frames going out
 * are sealed (and open at the other end), frames coming in are checked before
 * anything in them counts (a forged ack frees nothing, a forged DATA frame
 * reaches nobody), frames sent again after a reconnection are sealed again
 * under the new link's keys, a frame offered again after a pause is checked
 * once, and a peer with other security settings is refused.
 */
#define UNIT "auth"
#include "check.h"
#include "fake_link.h"
#include "../../daemon/core/conf.h"
#include "../../daemon/core/log.h"
#include "../../daemon/net/auth.h"
#include "../../daemon/net/peer.h"

#include <sodium.h>
#include <sys/stat.h>
#include <unistd.h>

#define HDR sizeof(struct wire_frame_hdr)

static char key_path[] = "/tmp/ferry-test-key.XXXXXX";
static uint8_t cluster_key[32];
static uint8_t hello_i[sizeof(struct wire_hello)], hello_a[sizeof(struct wire_hello)];

/* A frame of kind DATA with seq, ack and body bytes of b, room for the tag;
 * *len_p its length. */
static uint8_t *frame_of(uint8_t b, uint32_t body, uint64_t seq, uint64_t ack, uint16_t flags, size_t *len_p)
{
	struct wire_frame_hdr h = { .version = WIRE_VERSION, .kind = WIRE_DATA, .flags = flags,
				    .len = body + WIRE_TAG_BYTES, .seq = seq, .ack = ack };
	uint8_t *f = calloc(1, HDR + h.len);

	wire_encode_hdr(f, &h);
	memset(f + HDR, b, body);
	*len_p = HDR + h.len;
	return f;
}

/* --- auth.c alone --- */

/* The keys of auth.h's construction, computed here with libsodium itself. */
static void spec_keys(uint8_t k_i[32], uint8_t k_a[32])
{
	uint8_t master[32];
	crypto_generichash_state st;

	crypto_generichash_init(&st, cluster_key, sizeof(cluster_key), sizeof(master));
	crypto_generichash_update(&st, (const uint8_t *)"ferry frame keys", 16);
	crypto_generichash_update(&st, hello_i, sizeof(hello_i));
	crypto_generichash_update(&st, hello_a, sizeof(hello_a));
	crypto_generichash_final(&st, master, sizeof(master));
	crypto_kdf_derive_from_key(k_i, 32, 1, "ferrylnk", master);
	crypto_kdf_derive_from_key(k_a, 32, 2, "ferrylnk", master);
}

static void spec_nonce(uint8_t n[12], uint64_t count)
{
	memset(n, 0, 12);
	for (int i = 0; i < 8; i++)
		n[i] = (uint8_t)(count >> (8 * i));
}

TEST(keys_and_tags_follow_the_documented_construction)
{
	uint8_t k_i[32], k_a[32], n[12], tag[16], ct[200];
	struct auth_link i, a;
	size_t len;
	uint8_t *f;

	spec_keys(k_i, k_a);
	auth_link_start(&i, AUTH_FRAMES_MAC, 1, hello_i, hello_a);
	auth_link_start(&a, AUTH_FRAMES_MAC, 0, hello_i, hello_a);
	CHECK(memcmp(i.tx_key, k_i, 32) == 0 && memcmp(i.rx_key, k_a, 32) == 0);
	CHECK(memcmp(a.tx_key, k_a, 32) == 0 && memcmp(a.rx_key, k_i, 32) == 0);
	CHECK(memcmp(k_i, k_a, 32) != 0);
	/* Integrity: the tag is the AEAD's over header and body as associated
	 * data, nonce = frames sealed before on the link (here the third). */
	i.tx_count = 2;
	f = frame_of(0x5a, 200, 7, 3, WIRE_FRAME_MAC, &len);
	auth_seal(&i, f, f, len);
	spec_nonce(n, 2);
	crypto_aead_chacha20poly1305_ietf_encrypt_detached(ct, tag, NULL, NULL, 0, f, len - 16, NULL, n, k_i);
	CHECK(memcmp(f + len - 16, tag, 16) == 0);
	CHECK_EQ(i.tx_count, 3);
	for (size_t k = HDR; k < len - 16; k++)
		CHECK_EQ(f[k], 0x5a);           /* nothing encrypted */
	free(f);
	/* Encryption: the header is the associated data, the body encrypted. */
	auth_link_start(&a, AUTH_FRAMES_ENCRYPT, 0, hello_i, hello_a);
	f = frame_of(0x33, 200, 9, 0, WIRE_FRAME_MAC | WIRE_FRAME_SEALED, &len);
	{
		uint8_t *out = malloc(len);
		uint8_t plain[200];

		memset(plain, 0x33, sizeof(plain));
		auth_seal(&a, f, out, len);
		spec_nonce(n, 0);
		crypto_aead_chacha20poly1305_ietf_encrypt_detached(ct, tag, NULL, plain, 200, f, HDR, NULL, n, k_a);
		CHECK(memcmp(out, f, HDR) == 0);
		CHECK(memcmp(out + HDR, ct, 200) == 0);
		CHECK(memcmp(out + len - 16, tag, 16) == 0);
		CHECK(memcmp(f + HDR, plain, 200) == 0);        /* sealed out of place: the frame is as it was */
		free(out);
	}
	free(f);
	auth_link_stop(&i);
	CHECK(sodium_is_zero(i.tx_key, 32) && sodium_is_zero(i.rx_key, 32));
}

TEST(another_handshake_gives_other_keys)
{
	struct auth_link x, y;
	uint8_t other[sizeof(hello_a)];

	memcpy(other, hello_a, sizeof(other));
	other[40] ^= 1;                         /* another nonce */
	auth_link_start(&x, AUTH_FRAMES_MAC, 1, hello_i, hello_a);
	auth_link_start(&y, AUTH_FRAMES_MAC, 1, hello_i, other);
	CHECK(memcmp(x.tx_key, y.tx_key, 32) != 0);
	CHECK(memcmp(x.rx_key, y.rx_key, 32) != 0);
}

/* The connecting end seals, the accepting end opens, both modes. */
static void both_ends(int mode, struct auth_link *i, struct auth_link *a)
{
	auth_link_start(i, mode, 1, hello_i, hello_a);
	auth_link_start(a, mode, 0, hello_i, hello_a);
}

TEST(frames_open_in_order_and_any_changed_bit_fails)
{
	for (int mode = AUTH_FRAMES_MAC; mode <= AUTH_FRAMES_ENCRYPT; mode++) {
		uint16_t flags = mode == AUTH_FRAMES_MAC ? WIRE_FRAME_MAC : WIRE_FRAME_MAC | WIRE_FRAME_SEALED;
		struct auth_link i, a;
		size_t len;
		uint8_t *f, *g;

		both_ends(mode, &i, &a);
		for (int k = 0; k < 3; k++) {
			f = frame_of((uint8_t)k, 40, (uint64_t)k + 1, 0, flags, &len);
			auth_seal(&i, f, f, len);
			CHECK_EQ(auth_open(&a, f, len), 0);
			CHECK_EQ(f[HDR], k);    /* (decrypted) */
			free(f);
		}
		CHECK_EQ(a.rx_count, 3);
		f = frame_of(0x77, 40, 4, 2, flags, &len);
		auth_seal(&i, f, f, len);
		g = malloc(len);
		for (size_t byte = 0; byte < len; byte++) {
			memcpy(g, f, len);
			g[byte] ^= 0x10;
			if (auth_open(&a, g, len) != -EBADMSG)
				fprintf(stderr, "mode %d: a bit changed in byte %zu went unnoticed\n", mode, byte);
			CHECK_EQ(a.rx_count, 3);
		}
		memcpy(g, f, len);
		CHECK_EQ(auth_open(&a, g, len), 0);
		CHECK_EQ(g[HDR + 39], 0x77);
		free(g);
		free(f);
	}
}

TEST(dropped_replayed_reordered_and_misdirected_frames_fail)
{
	struct auth_link i, a, i2, a2;
	uint8_t *f[3];
	size_t len;

	both_ends(AUTH_FRAMES_MAC, &i, &a);
	for (int k = 0; k < 3; k++) {
		f[k] = frame_of(1, 16, (uint64_t)k + 1, 0, WIRE_FRAME_MAC, &len);
		auth_seal(&i, f[k], f[k], len);
	}
	CHECK_EQ(auth_open(&a, f[1], len), -EBADMSG);  /* f[0] dropped, or f[1] first */
	CHECK_EQ(auth_open(&a, f[0], len), 0);
	CHECK_EQ(auth_open(&a, f[0], len), -EBADMSG);  /* replayed */
	CHECK_EQ(auth_open(&i, f[1], len), -EBADMSG);  /* back to its sender: the other direction's key */
	/* Another link between the same nodes: another pair of HELLOs. */
	hello_a[50] ^= 1;
	both_ends(AUTH_FRAMES_MAC, &i2, &a2);
	hello_a[50] ^= 1;
	CHECK_EQ(auth_open(&a2, f[0], len), -EBADMSG); /* replayed on a new link */
	CHECK_EQ(auth_open(&a, f[1], len), 0);
	CHECK_EQ(auth_open(&a, f[2], len), 0);
	for (int k = 0; k < 3; k++)
		free(f[k]);
}

/* --- the peer layer with sealed frames --- */

static struct conf conf;

static struct {
	int calls;
	uint32_t last_len;
	uint8_t last[256];
	int answer;
} above;

static int above_rx(struct peer *p, const uint8_t *body, uint32_t len, int urgent)
{
	(void)p;
	(void)urgent;
	above.calls++;
	above.last_len = len;
	memcpy(above.last, body, len < sizeof(above.last) ? len : sizeof(above.last));
	return above.answer;
}

static const struct peer_events events = { .rx = above_rx };
static uint64_t our_inc;

static struct fake_link *up_from_0(uint64_t peer_inc, uint64_t ack)
{
	struct fake_link *fl = fake_accept();

	our_inc = fake_handshake_accepted(fl, 0, 1, 0x1000, peer_inc, ack, "unit");
	CHECK(our_inc != 0);
	return fl;
}

static struct frame *data(uint8_t b, uint32_t body)
{
	struct frame *f = frame_alloc(body);

	memset(f->data + f->len, b, body);
	f->len += body;
	f->nitems = 1;
	return f;
}

static uint16_t link_flags(void)
{
	return fake.frames == AUTH_FRAMES_ENCRYPT ? WIRE_FRAME_MAC | WIRE_FRAME_SEALED : WIRE_FRAME_MAC;
}

TEST(frames_going_out_are_sealed_and_open_at_the_other_end)
{
	struct fake_link *fl = up_from_0(0, 0);
	struct peer *p = peer_by_node(0);
	struct fake_frame *o;

	CHECK_EQ(p->state, PEER_UP);
	CHECK_EQ(fl->l.encrypt, fake.frames == AUTH_FRAMES_ENCRYPT);
	peer_send(p, data(0xa1, 40));
	o = fake_expect(fl, WIRE_DATA);
	CHECK(o && o->opened == 1 && o->h.flags == link_flags() && o->h.len == 40 + WIRE_TAG_BYTES && o->h.seq == 1);
	CHECK(o && o->body[0] == 0xa1 && o->body[39] == 0xa1);
	/* Encrypted on the wire: the plaintext is not there. */
	if (o && fake.frames == AUTH_FRAMES_ENCRYPT)
		CHECK(memcmp(o->raw + HDR, o->body, sizeof(o->raw) - HDR) != 0);
	/* An ACK frame, from the peer layer and for a transport (send_ack). */
	CHECK_EQ(fake_arrive(fl, WIRE_DATA, 1, 0, "hello", 5), 1);
	CHECK_EQ(above.calls, 1);
	CHECK_EQ(above.last_len, 5);
	CHECK(memcmp(above.last, "hello", 5) == 0);
	CHECK_EQ(peer_poll(), 0);       /* (an ack waits up to 1 ms for a frame going back) */
	usleep(1500);
	CHECK_EQ(peer_poll(), 1);
	o = fake_expect(fl, WIRE_ACK);
	CHECK(o && o->opened == 1 && o->h.ack == 1 && o->h.len == WIRE_TAG_BYTES);
	fake.ev->send_ack(&fl->l);
	fake_kick(&fl->l);
	o = fake_expect(fl, WIRE_ACK);
	CHECK(o && o->opened == 1 && o->h.ack == 1);
	CHECK_EQ(fake_arrive(fl, WIRE_ACK, 0, 1, NULL, 0), 1);
	CHECK_EQ(peer_backlog(p), 0);
}

TEST(a_forged_ack_frees_nothing)
{
	struct peer *p = peer_by_node(0);
	struct fake_link *fl = (struct fake_link *)p->link;
	uint64_t backlog, fails = p->st.integrity_failures;
	uint8_t frame[HDR + WIRE_TAG_BYTES];
	struct wire_frame_hdr h = { .version = WIRE_VERSION, .kind = WIRE_ACK, .flags = link_flags(),
				    .len = WIRE_TAG_BYTES, .ack = 3 };

	for (uint8_t k = 2; k <= 3; k++)
		peer_send(p, data(k, 24));
	while (fake_next(fl))
		;
	backlog = peer_backlog(p);
	CHECK(backlog > 0);
	/* An on-path host acknowledges frames 2 and 3 (they went out, so the
	 * ack itself would be believed): it cannot make the tag. */
	wire_encode_hdr(frame, &h);
	memset(frame + HDR, 0x42, WIRE_TAG_BYTES);
	CHECK_EQ(fake_arrive_raw(fl, frame, sizeof(frame)), -EPROTO);
	CHECK(fl->closed);
	CHECK_EQ(p->state, PEER_DOWN);
	CHECK_EQ(peer_backlog(p), backlog);     /* nothing freed: it all goes out again */
	CHECK_EQ(p->st.integrity_failures, fails + 1);
}

TEST(frames_sent_again_are_sealed_under_the_new_links_keys)
{
	struct peer *p = peer_by_node(0);
	struct fake_link *fl = up_from_0(our_inc, 1);
	struct fake_frame *o;

	CHECK_EQ(p->state, PEER_UP);
	o = fake_expect(fl, WIRE_DATA);
	CHECK(o && o->h.seq == 2 && o->opened == 1 && o->body[0] == 2);
	o = fake_expect(fl, WIRE_DATA);
	CHECK(o && o->h.seq == 3 && o->opened == 1 && o->body[0] == 3);
	CHECK_EQ(fake_arrive(fl, WIRE_ACK, 0, 3, NULL, 0), 1);
	CHECK_EQ(peer_backlog(p), 0);
}

TEST(a_tampered_data_frame_reaches_nobody)
{
	struct peer *p = peer_by_node(0);
	struct fake_link *fl = (struct fake_link *)p->link;
	uint8_t body[40];
	int calls = above.calls;
	uint64_t recv = p->seq.recv_seq;

	memset(body, 0x61, sizeof(body));
	/* The other end seals frame recv+1; on the way one bit changes. */
	CHECK_EQ(fake_arrive(fl, WIRE_DATA, recv + 1, 0, body, sizeof(body)), 1);
	CHECK_EQ(above.calls, calls + 1);
	{
		size_t len;
		uint8_t *f = frame_of(0x62, 40, recv + 2, 0, link_flags(), &len);

		auth_seal(&fl->remote, f, f, len);
		f[HDR + 10] ^= 4;
		CHECK_EQ(fake_arrive_raw(fl, f, len), -EPROTO);
		free(f);
	}
	CHECK_EQ(above.calls, calls + 1);       /* the changed frame was passed up to nobody */
	CHECK_EQ(p->seq.recv_seq, recv + 1);
	CHECK_EQ(p->state, PEER_DOWN);
	up_from_0(our_inc, 0);
	CHECK_EQ(p->state, PEER_UP);
}

TEST(a_frame_without_the_tag_or_replayed_is_refused)
{
	struct peer *p = peer_by_node(0);
	struct fake_link *fl = (struct fake_link *)p->link;
	uint64_t recv = p->seq.recv_seq;
	uint8_t plain[HDR + 8] = { 0 }, *keep;
	struct wire_frame_hdr h = { .version = WIRE_VERSION, .kind = WIRE_DATA, .len = 8, .seq = recv + 2 };
	size_t keep_len;

	/* A frame the other end sealed, kept by an on-path host. */
	CHECK_EQ(fake_arrive(fl, WIRE_DATA, recv + 1, 0, "12345678", 8), 1);
	keep_len = fl->last_len;
	keep = malloc(keep_len);
	memcpy(keep, fl->last, keep_len);
	/* Injected without a tag at all. */
	wire_encode_hdr(plain, &h);
	CHECK_EQ(fake_arrive_raw(fl, plain, sizeof(plain)), -EPROTO);
	CHECK_EQ(p->state, PEER_DOWN);
	/* Replayed on the next link. */
	fl = up_from_0(our_inc, 0);
	CHECK_EQ(p->state, PEER_UP);
	CHECK_EQ(fake_arrive_raw(fl, keep, keep_len), -EPROTO);
	CHECK_EQ(p->state, PEER_DOWN);
	free(keep);
	up_from_0(our_inc, 0);
	CHECK_EQ(p->state, PEER_UP);
}

TEST(a_frame_offered_again_after_a_pause_is_checked_once)
{
	struct peer *p = peer_by_node(0);
	struct fake_link *fl = (struct fake_link *)p->link;
	uint64_t recv = p->seq.recv_seq;
	int calls = above.calls;

	above.answer = 1;                       /* the layer above keeps part of it */
	CHECK_EQ(fake_arrive(fl, WIRE_DATA, recv + 1, 0, "held", 4), 1);
	above.answer = 0;
	CHECK_EQ(fake_arrive(fl, WIRE_DATA, recv + 2, 0, "next", 4), 0);       /* not taken now */
	peer_resume_rx(p);
	CHECK_EQ(fake_reoffer(fl), 1);          /* the same bytes, checked (and decrypted) before */
	CHECK_EQ(above.calls, calls + 2);
	CHECK_EQ(above.last_len, 4);
	CHECK(memcmp(above.last, "next", 4) == 0);
	CHECK_EQ(p->seq.recv_seq, recv + 2);
	/* And the frame after it is checked as the next one. */
	CHECK_EQ(fake_arrive(fl, WIRE_DATA, recv + 3, 0, "more", 4), 1);
	CHECK_EQ(p->state, PEER_UP);
}

TEST(a_peer_with_other_security_settings_is_refused)
{
	struct peer *p = peer_by_node(0);
	struct link *live = p->link;
	int saved = fake.frames;
	struct fake_link *fl = fake_accept();
	uint8_t hi[sizeof(struct wire_hello)], mac[WIRE_MAC_BYTES];
	struct fake_frame *o;

	/* It holds the key, but protects frames otherwise. */
	fake.frames = saved == AUTH_FRAMES_MAC ? AUTH_FRAMES_ENCRYPT : AUTH_FRAMES_MAC;
	fake_hello(hi, 0, 1, 0x1000, our_inc, 0, "unit");
	fake.frames = saved;
	CHECK_EQ(fake_arrive(fl, WIRE_HELLO, 0, 0, hi, sizeof(hi)), 1);
	o = fake_expect(fl, WIRE_HELLO);
	CHECK(fake_expect(fl, WIRE_AUTH) != NULL);
	if (o) {
		auth_mac(mac, 'I', hi, o->body);
		CHECK_EQ(fake_arrive(fl, WIRE_AUTH, 0, 0, mac, sizeof(mac)), -EPROTO);
	}
	CHECK(fl->closed);
	CHECK(p->link == live);                 /* the live link stays */
	CHECK_EQ(p->state, PEER_UP);
}

TEST(no_op_was_called_on_a_dead_link)
{
	CHECK_EQ(fake.used_dead, 0);
}

static int peer_suite(int mode)
{
	char extra[256];

	snprintf(extra, sizeof(extra), "security: { key_file = \"%s\"; encrypt = %s; };", key_path,
		 mode == AUTH_FRAMES_ENCRYPT ? "true" : "false");
	if (fake_daemon(&conf, "unit", extra) < 0)
		return -1;
	CHECK_EQ(conf.integrity, 1);            /* on by default with a key */
	fake.frames = mode;
	memset(&above, 0, sizeof(above));
	if (peer_init(&conf, 1, &fake_transport, &events) < 0)
		return -1;
	printf("# security.%s\n", mode == AUTH_FRAMES_ENCRYPT ? "encrypt = true" : "integrity = true");
	RUN(frames_going_out_are_sealed_and_open_at_the_other_end);
	RUN(a_forged_ack_frees_nothing);
	RUN(frames_sent_again_are_sealed_under_the_new_links_keys);
	RUN(a_tampered_data_frame_reaches_nobody);
	RUN(a_frame_without_the_tag_or_replayed_is_refused);
	RUN(a_frame_offered_again_after_a_pause_is_checked_once);
	RUN(a_peer_with_other_security_settings_is_refused);
	RUN(no_op_was_called_on_a_dead_link);
	peer_fini();
	fake_daemon_stop(&conf);
	fake.frames = AUTH_FRAMES_PLAIN;
	fake.used_dead = 0;
	return 0;
}

int main(void)
{
	char hex[65];
	int fd = mkstemp(key_path), ret = 0;

	log_init("test_auth", LOG_ERR);
	if (fd < 0 || sodium_init() < 0)
		return 1;
	randombytes_buf(cluster_key, sizeof(cluster_key));
	sodium_bin2hex(hex, sizeof(hex), cluster_key, sizeof(cluster_key));
	if (write(fd, hex, 64) != 64 || fchmod(fd, 0600) < 0)
		return 1;
	close(fd);
	if (auth_init(key_path) < 0)
		return 1;
	randombytes_buf(hello_i, sizeof(hello_i));
	randombytes_buf(hello_a, sizeof(hello_a));
	RUN(keys_and_tags_follow_the_documented_construction);
	RUN(another_handshake_gives_other_keys);
	RUN(frames_open_in_order_and_any_changed_bit_fails);
	RUN(dropped_replayed_reordered_and_misdirected_frames_fail);
	auth_fini();
	if (peer_suite(AUTH_FRAMES_MAC) < 0 || peer_suite(AUTH_FRAMES_ENCRYPT) < 0)
		ret = 1;
	unlink(key_path);
	return ret || check_done();
}
