/* tests/unit/test_peer.c - the peer layer (daemon/net/peer.c) driven through
 * a fake transport (fake_link.h): the authenticated handshake from both ends
 * and its refusals, sequence numbers and acknowledgements in both directions,
 * duplicates, gaps, pausing while the layer above holds a frame, resending
 * after a reconnection, a restarted peer, reconnecting with backoff.
 *
 * This daemon is node 1 of a 2x2 virtual grid: its peers are node 0, which
 * connects to it, and node 3, which it connects to; node 2 is not a peer.
 * The test plays nodes 0 and 3 with the same cluster key (insecure mode, an
 * all-zero key: the MACs are computed and checked all the same).
 */
#define UNIT "peer"
#include "check.h"
#include "fake_link.h"
#include "../../daemon/core/conf.h"
#include "../../daemon/core/log.h"
#include "../../daemon/net/auth.h"
#include "../../daemon/net/peer.h"

#include <sodium.h>
#include <unistd.h>

static struct conf conf;

/* The layer above: what it was handed, and what it answers. */
static struct {
	int calls;
	uint32_t last_len;
	uint8_t last[256];
	int answer;             /* 0 taken, 1 held, -EPROTO */
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

static uint64_t our_incarnation;

/* Brings up the link from node 0 (we accept): returns it up. */
static struct fake_link *up_from_0(uint64_t inc0, uint64_t peer_inc, uint64_t ack)
{
	struct fake_link *fl = fake_accept();

	our_incarnation = fake_handshake_accepted(fl, 0, 1, inc0, peer_inc, ack, "unit");
	CHECK(our_incarnation != 0);
	return fl;
}

/* Brings up the link to node 3 (we connect): the latest connect() to it. */
static struct fake_link *up_to_3(uint64_t inc3)
{
	struct fake_link *fl = fake.connected[3];

	if (!fl || !fake_handshake_connected(fl, 3, 1, inc3, "unit")) {
		CHECK(!"the link to node 3 came up");
		return NULL;
	}
	return fl;
}

/* A DATA frame with body bytes of payload b. */
static struct frame *data(uint8_t b, uint32_t body)
{
	struct frame *f = frame_alloc(body);

	memset(f->data + f->len, b, body);
	f->len += body;
	f->nitems = 1;
	return f;
}

TEST(connects_to_the_higher_peer_only)
{
	CHECK_EQ(peer_count(), 2);
	CHECK(peer_by_node(0) && peer_by_node(3));
	CHECK(!peer_by_node(2));
	CHECK(!peer_by_node(1));
	CHECK_EQ(fake.connects, 1);
	CHECK(fake.connected[3] != NULL);
	CHECK_EQ(peer_by_node(3)->state, PEER_CONNECTING);
	CHECK_EQ(peer_by_node(0)->dim, 1);
	CHECK_EQ(peer_by_node(3)->dim, 0);
}

TEST(handshake_as_the_connecting_end)
{
	struct fake_link *fl = up_to_3(0x3333);

	CHECK(fl != NULL);
	CHECK_EQ(peer_by_node(3)->state, PEER_UP);
	CHECK_EQ(fl->l.state, LINK_UP);
	CHECK_EQ(peer_by_node(3)->incarnation, 0x3333);
}

TEST(handshake_as_the_accepting_end)
{
	struct fake_link *fl = up_from_0(0x1000, 0, 0);

	CHECK_EQ(peer_by_node(0)->state, PEER_UP);
	CHECK(peer_by_node(0)->link == &fl->l);
}

/* Refused handshakes on connections that come in; each ends the link. */
static void refused(const uint8_t *hello_body, size_t len, const char *what)
{
	struct fake_link *fl = fake_accept();
	int ret = fake_arrive(fl, WIRE_HELLO, 0, 0, hello_body, (uint32_t)len);

	if (ret != -EPROTO || !fl->closed)
		fprintf(stderr, "not refused: %s\n", what);
	CHECK_EQ(ret, -EPROTO);
	CHECK(fl->closed);
}

TEST(refuses_wrong_cluster_node_role_and_garbage)
{
	uint8_t h[sizeof(struct wire_hello)];
	struct peer *p0 = peer_by_node(0);
	struct link *before = p0->link;

	fake_hello(h, 0, 1, 0x2000, 0, 0, "other");
	refused(h, sizeof(h), "another cluster");
	fake_hello(h, 0, 2, 0x2000, 0, 0, "unit");
	refused(h, sizeof(h), "meant for node 2");
	fake_hello(h, 2, 1, 0x2000, 0, 0, "unit");
	refused(h, sizeof(h), "node 2 is no peer");
	fake_hello(h, 3, 1, 0x2000, 0, 0, "unit");
	refused(h, sizeof(h), "node 3 must be connected to, not connect");
	fake_hello(h, 0, 1, 0x2000, 0, 0, "unit");
	h[0] ^= 0xff;   /* magic */
	refused(h, sizeof(h), "bad magic");
	refused(h, 10, "short HELLO");
	/* None of it touched the link that is up. */
	CHECK(p0->link == before);
	CHECK_EQ(p0->state, PEER_UP);
}

TEST(refuses_a_bad_mac_and_frames_out_of_turn)
{
	uint8_t hi[sizeof(struct wire_hello)], mac[WIRE_MAC_BYTES], key[crypto_auth_KEYBYTES];
	struct fake_link *fl = fake_accept();
	struct fake_frame *o;

	CHECK_EQ(fake_arrive(fl, WIRE_DATA, 1, 0, "x", 1), -EPROTO);   /* DATA before the handshake */
	fl = fake_accept();
	fake_hello(hi, 0, 1, 0x4000, 0, 0, "unit");
	CHECK_EQ(fake_arrive(fl, WIRE_HELLO, 0, 0, hi, sizeof(hi)), 1);
	o = fake_expect(fl, WIRE_HELLO);
	CHECK(fake_expect(fl, WIRE_AUTH) != NULL);
	/* A MAC with another key: a node that does not hold the cluster key. */
	memset(key, 7, sizeof(key));
	if (o) {
		unsigned char msg[1 + 2 * sizeof(struct wire_hello)];

		msg[0] = 'I';
		memcpy(msg + 1, hi, sizeof(hi));
		memcpy(msg + 1 + sizeof(hi), o->body, sizeof(hi));
		crypto_auth(mac, msg, sizeof(msg), key);
	}
	{
		struct link *live = peer_by_node(0)->link;

		CHECK_EQ(fake_arrive(fl, WIRE_AUTH, 0, 0, mac, sizeof(mac)), -EPROTO);
		CHECK(fl->closed);
		/* The link node 0 had is untouched (finding 3). */
		CHECK(peer_by_node(0)->link == live);
	}
	/* Node 0 connects again, properly: that one replaces it. */
	up_from_0(0x1000, our_incarnation, 0);
	CHECK_EQ(peer_by_node(0)->state, PEER_UP);
}

TEST(frames_out_carry_sequence_numbers_and_the_latest_ack)
{
	struct peer *p = peer_by_node(3);
	struct fake_link *fl = (struct fake_link *)p->link;
	struct fake_frame *o;
	struct frame *f;

	peer_send(p, data(0xa1, 40));
	o = fake_expect(fl, WIRE_DATA);
	CHECK(o && o->h.seq == 1 && o->h.ack == 0 && o->h.len == 40 && o->body[0] == 0xa1);
	/* A frame from 3 arrives: the layer above gets its body. */
	above.answer = 0;
	CHECK_EQ(fake_arrive(fl, WIRE_DATA, 1, 0, "hello", 5), 1);
	CHECK_EQ(above.calls, 1);
	CHECK_EQ(above.last_len, 5);
	CHECK_EQ(memcmp(above.last, "hello", 5), 0);
	/* Nothing goes out to carry the ack: it waits (up to 1 ms) for a
	 * frame going back, then peer_poll sends an ACK frame. */
	CHECK_EQ(peer_poll(), 0);
	CHECK(fake_expect(fl, WIRE_ACK) == NULL);
	usleep(1500);
	CHECK_EQ(peer_poll(), 1);
	o = fake_expect(fl, WIRE_ACK);
	CHECK(o && o->h.ack == 1);
	CHECK_EQ(peer_poll(), 0);
	/* The next frame carries the ack itself (and says that its own may
	 * wait: ACK_LAZY, which only an urgent frame carries). */
	CHECK_EQ(fake_arrive(fl, WIRE_DATA, 2, 0, "again", 5), 1);
	f = data(0xa2, 16);
	f->urgent = 1;
	f->ack_lazy = 1;
	peer_send(p, f);
	o = fake_expect(fl, WIRE_DATA);
	CHECK(o && o->h.seq == 2 && o->h.ack == 2);
	CHECK(o && (o->h.flags & (WIRE_FRAME_URGENT | WIRE_FRAME_ACK_LAZY)) ==
		   (WIRE_FRAME_URGENT | WIRE_FRAME_ACK_LAZY));
	CHECK_EQ(peer_poll(), 0);
	/* 3 acknowledges both: they are freed. */
	CHECK(peer_backlog(p) > 0);
	CHECK_EQ(fake_arrive(fl, WIRE_ACK, 0, 2, NULL, 0), 1);
	CHECK_EQ(peer_backlog(p), 0);
	CHECK_EQ(p->st.frames_sent, 2);
	CHECK_EQ(p->st.frames_recv, 2);
}

/* An URGENT frame is acknowledged at the end of the turn (its sender
 * waits); URGENT with ACK_LAZY (collectives' pieces: nobody waits) is not:
 * its ack waits for a frame going back, like any other frame's. */
TEST(urgent_frames_are_acked_at_once_unless_lazy)
{
	struct peer *p = peer_by_node(3);
	struct fake_link *fl = (struct fake_link *)p->link;
	uint64_t seq = p->seq.recv_seq + 1;
	struct fake_frame *o;

	above.answer = 0;
	fake.data_flags = WIRE_FRAME_URGENT | WIRE_FRAME_ACK_LAZY;
	CHECK_EQ(fake_arrive(fl, WIRE_DATA, seq, 0, "lazy", 4), 1);
	CHECK_EQ(peer_poll(), 0);
	CHECK(fake_expect(fl, WIRE_ACK) == NULL);       /* it waits */
	fake.data_flags = WIRE_FRAME_URGENT;
	CHECK_EQ(fake_arrive(fl, WIRE_DATA, seq + 1, 0, "urgent", 6), 1);
	CHECK_EQ(peer_poll(), 1);
	o = fake_expect(fl, WIRE_ACK);
	CHECK(o && o->h.ack == seq + 1);                /* (both) */
	fake.data_flags = 0;
}

TEST(duplicates_are_discarded_and_gaps_end_the_link)
{
	struct peer *p = peer_by_node(3);
	struct fake_link *fl = (struct fake_link *)p->link;
	int calls = above.calls;

	uint64_t last = p->seq.recv_seq, dups = p->st.duplicates;

	CHECK_EQ(fake_arrive(fl, WIRE_DATA, last, 0, "dup", 3), 1);
	CHECK_EQ(above.calls, calls);           /* not passed up again */
	CHECK_EQ(p->st.duplicates, dups + 1);
	CHECK_EQ(fake_arrive(fl, WIRE_DATA, last + 2, 0, "gap", 3), -EPROTO);
	CHECK_EQ(p->state, PEER_DOWN);
	CHECK(fl->closed);
}

TEST(reconnects_with_backoff_and_resends_what_was_not_acknowledged)
{
	struct peer *p = peer_by_node(3);
	struct fake_link *old = fake.connected[3], *fl;
	struct fake_frame *o;

	/* Frames queued while the link is down. */
	peer_send(p, data(0xb3, 8));
	peer_send(p, data(0xb4, 8));
	fake_run_loop(120);                     /* the first retry comes after 50 ms */
	fl = fake.connected[3];
	CHECK(fl != NULL && fl != old);
	if (!fl || fl == old)
		return;
	CHECK(up_to_3(0x3333) == fl);
	CHECK_EQ(p->state, PEER_UP);
	o = fake_expect(fl, WIRE_DATA);
	CHECK(o && o->h.seq == 3 && o->body[0] == 0xb3);
	o = fake_expect(fl, WIRE_DATA);
	CHECK(o && o->h.seq == 4 && o->body[0] == 0xb4);
	CHECK_EQ(p->st.retransmits, 2);
	CHECK_EQ(fake_arrive(fl, WIRE_ACK, 0, 4, NULL, 0), 1);
	CHECK_EQ(peer_backlog(p), 0);
}

TEST(acks_of_frames_never_sent_end_the_link)
{
	struct peer *p = peer_by_node(3);
	struct fake_link *fl = (struct fake_link *)p->link;

	CHECK_EQ(fake_arrive(fl, WIRE_ACK, 0, 99, NULL, 0), -EPROTO);
	CHECK_EQ(p->state, PEER_DOWN);
	fake_run_loop(120);
	CHECK(up_to_3(0x3333) != NULL);
	CHECK_EQ(p->state, PEER_UP);
}

TEST(a_held_frame_pauses_the_link_until_resumed)
{
	struct peer *p = peer_by_node(0);
	struct fake_link *fl = (struct fake_link *)p->link;
	int calls = above.calls;

	above.answer = 1;               /* the layer above keeps part of it */
	CHECK_EQ(fake_arrive(fl, WIRE_DATA, 1, 0, "held", 4), 1);
	above.answer = 0;
	CHECK_EQ(fake_arrive(fl, WIRE_DATA, 2, 0, "next", 4), 0);      /* not taken now */
	CHECK_EQ(above.calls, calls + 1);
	CHECK_EQ(p->seq.recv_seq, 1);
	peer_resume_rx(p);
	CHECK_EQ(fl->resumes, 1);
	CHECK_EQ(fl->paused, 0);
	CHECK_EQ(fake_arrive(fl, WIRE_DATA, 2, 0, "next", 4), 1);
	CHECK_EQ(p->seq.recv_seq, 2);
}

TEST(a_malformed_frame_is_refused_and_comes_again)
{
	struct peer *p = peer_by_node(0);
	struct fake_link *fl = (struct fake_link *)p->link;

	above.answer = -EPROTO;
	CHECK_EQ(fake_arrive(fl, WIRE_DATA, 3, 0, "bad", 3), -EPROTO);
	above.answer = 0;
	CHECK_EQ(p->seq.recv_seq, 2);           /* not taken: it will come again */
	CHECK_EQ(p->state, PEER_DOWN);
}

TEST(resends_after_the_accepting_side_reconnects)
{
	struct peer *p = peer_by_node(0);
	struct fake_link *fl;
	struct fake_frame *o;

	fl = up_from_0(0x1000, our_incarnation, 0);
	CHECK_EQ(p->state, PEER_UP);
	for (uint8_t i = 1; i <= 3; i++)
		peer_send(p, data(i, 8));
	for (int i = 0; i < 3; i++)
		CHECK(fake_expect(fl, WIRE_DATA) != NULL);
	CHECK_EQ(fake_arrive(fl, WIRE_ACK, 0, 1, NULL, 0), 1);
	fake_fail(fl, "connection reset");
	CHECK_EQ(p->state, PEER_DOWN);
	/* Node 0 comes back with the same incarnation and says it has frame 2. */
	fl = up_from_0(0x1000, our_incarnation, 2);
	CHECK_EQ(p->state, PEER_UP);
	o = fake_expect(fl, WIRE_DATA);
	CHECK(o && o->h.seq == 3 && o->body[0] == 3);
	CHECK(fake_next(fl) == NULL);
	/* Our position went out with our HELLO: node 0 has frames up to 2. */
}

TEST(a_restarted_peer_gets_a_fresh_start)
{
	struct peer *p = peer_by_node(0);
	struct fake_link *fl;
	struct fake_frame *o;
	uint64_t dropped = p->st.dropped_frames;

	CHECK(peer_backlog(p) > 0);             /* frame 3 is not acknowledged */
	fake_fail((struct fake_link *)p->link, "node 0 died");
	fl = up_from_0(0x5000, 0, 0);           /* a new instance of node 0 */
	CHECK_EQ(p->state, PEER_UP);
	CHECK_EQ(p->incarnation, 0x5000);
	CHECK_EQ(p->st.dropped_frames, dropped + 1);
	CHECK_EQ(peer_backlog(p), 0);
	CHECK_EQ(p->seq.recv_seq, 0);
	peer_send(p, data(9, 8));
	o = fake_expect(fl, WIRE_DATA);
	CHECK(o && o->h.seq == 1);
}

TEST(a_new_connection_replaces_the_old_one)
{
	struct peer *p = peer_by_node(0);
	struct fake_link *old = (struct fake_link *)p->link, *fl;

	fl = up_from_0(0x5000, our_incarnation, 0);
	CHECK(old->closed);
	CHECK(p->link == &fl->l);
	CHECK_EQ(p->state, PEER_UP);
}

/* Hardening finding 3: node ids are not secret, so a HELLO claiming to come
 * from node 0 proves nothing; until that connection authenticates, node 0's
 * live link stays, and keeps working. */
TEST(an_unauthenticated_hello_does_not_disturb_the_live_link)
{
	struct peer *p = peer_by_node(0);
	struct fake_link *live = (struct fake_link *)p->link, *fl;
	uint8_t hi[sizeof(struct wire_hello)], mac[WIRE_MAC_BYTES];
	uint64_t seq = p->seq.recv_seq;

	CHECK_EQ(p->state, PEER_UP);
	for (int i = 0; i < 3; i++) {
		fl = fake_accept();
		fake_hello(hi, 0, 1, 0x6666, our_incarnation, 0, "unit");
		CHECK_EQ(fake_arrive(fl, WIRE_HELLO, 0, 0, hi, sizeof(hi)), 1);
		CHECK(p->link == &live->l);
		CHECK_EQ(p->state, PEER_UP);
		CHECK(!live->closed);
		if (i == 0) {
			memset(mac, 0x5a, sizeof(mac));         /* a forged AUTH */
			CHECK_EQ(fake_arrive(fl, WIRE_AUTH, 0, 0, mac, sizeof(mac)), -EPROTO);
			CHECK(fl->closed);
		} else if (i == 1) {
			fake_fail(fl, "the attacker hung up");
		}                                       /* i == 2: left hanging */
	}
	CHECK(p->link == &live->l);
	CHECK_EQ(p->state, PEER_UP);
	CHECK(!live->closed);
	CHECK_EQ(p->last_error[0], '\0');
	/* The live link still carries frames in both directions. */
	above.calls = 0;
	CHECK_EQ(fake_arrive(live, WIRE_DATA, seq + 1, 0, "still", 5), 1);
	CHECK_EQ(above.calls, 1);
	peer_send(p, data(7, 8));
	CHECK(fake_expect(live, WIRE_DATA) != NULL);
	/* The hanging one times out (5 s) without touching the live link:
	 * covered by the handshake timeout; here it is closed with the peers
	 * at the end of the test. */
}

TEST(an_ack_beyond_what_was_sent_is_refused_without_closing_the_link_mid_frame)
{
	struct peer *p = peer_by_node(0);
	struct fake_link *old = (struct fake_link *)p->link, *fl = fake_accept();

	/* Node 0 says it has frame 1000 of this instance of us. */
	CHECK_EQ(fake_handshake_accepted(fl, 0, 1, 0x5000, our_incarnation, 1000, "unit"), 0);
	CHECK(fl->closed);
	CHECK(old->closed);                     /* the new connection had replaced it */
	CHECK_EQ(p->state, PEER_DOWN);
	CHECK_EQ(fake.used_dead, 0);
	CHECK(strstr(p->last_error, "never sent") || strstr(p->last_error, "protocol error"));
	up_from_0(0x5000, our_incarnation, 0);
	CHECK_EQ(p->state, PEER_UP);
}

TEST(handshake_frames_out_of_order_are_refused)
{
	uint8_t hi[sizeof(struct wire_hello)], mac[WIRE_MAC_BYTES] = { 0 };
	struct fake_link *fl = fake_accept();

	CHECK_EQ(fake_arrive(fl, WIRE_AUTH, 0, 0, mac, sizeof(mac)), -EPROTO);  /* AUTH before HELLO */
	fl = fake_accept();
	fake_hello(hi, 0, 1, 0x5000, our_incarnation, 0, "unit");
	CHECK_EQ(fake_arrive(fl, WIRE_HELLO, 0, 0, hi, sizeof(hi)), 1);
	CHECK_EQ(fake_arrive(fl, WIRE_HELLO, 0, 0, hi, sizeof(hi)), -EPROTO);  /* a second HELLO */
	CHECK(fl->closed);
	up_from_0(0x5000, our_incarnation, 0);
	CHECK_EQ(peer_by_node(0)->state, PEER_UP);
}

TEST(an_outgoing_peer_answering_as_another_node_is_refused)
{
	struct peer *p = peer_by_node(3);
	uint8_t ha[sizeof(struct wire_hello)];
	struct fake_link *fl;

	fake_fail((struct fake_link *)p->link, "reset");
	fake_run_loop(120);
	fl = fake.connected[3];
	fake_established(fl);
	CHECK(fake_expect(fl, WIRE_HELLO) != NULL);
	fake_hello(ha, 0, 1, 0x3333, 0, 0, "unit");     /* "node 0" answers at node 3's address */
	CHECK_EQ(fake_arrive(fl, WIRE_HELLO, 0, 0, ha, sizeof(ha)), -EPROTO);
	CHECK_EQ(p->state, PEER_DOWN);
	fake_run_loop(220);                             /* the backoff doubled: 100 ms */
	CHECK(up_to_3(0x3333) != NULL);
	CHECK_EQ(p->state, PEER_UP);
}

TEST(a_link_that_comes_up_while_a_frame_is_held_starts_paused)
{
	struct peer *p = peer_by_node(0);
	struct fake_link *fl = (struct fake_link *)p->link;
	uint64_t seq = p->seq.recv_seq;

	above.answer = 1;
	CHECK_EQ(fake_arrive(fl, WIRE_DATA, seq + 1, 0, "held", 4), 1);
	above.answer = 0;
	fake_fail(fl, "reset");
	fl = up_from_0(0x5000, our_incarnation, seq + 1);
	CHECK_EQ(p->state, PEER_UP);
	CHECK_EQ(fl->pauses, 1);
	CHECK_EQ(fl->paused, 1);
	peer_resume_rx(p);
	CHECK_EQ(fl->paused, 0);
}

TEST(fault_injection_breaks_the_link)
{
	struct fake_link *fl = (struct fake_link *)peer_by_node(3)->link;

	CHECK_EQ(peer_fault(3), 0);
	CHECK_EQ(fl->faults, 1);
	CHECK_EQ(peer_fault(2), -ENOENT);       /* not a peer */
}

/* Last: it leaves node 3's link down for two seconds. */
TEST(backoff_doubles_up_to_two_seconds)
{
	struct peer *p = peer_by_node(3);
	uint32_t expect = 100;

	fake_fail((struct fake_link *)p->link, "reset");
	for (int i = 0; i < 3; i++) {
		CHECK_EQ(p->backoff_ms, expect);        /* the next wait after this one */
		fake_run_loop(expect / 2 + 60);         /* the retry happens */
		if (!p->link)
			break;
		fake_fail((struct fake_link *)p->link, "refused");
		expect *= 2;
	}
	CHECK_EQ(p->backoff_ms, 800);
	/* ... and no further than 2 s. */
	p->backoff_ms = 1600;
	fake_run_loop(450);
	CHECK(p->link != NULL);
	if (p->link)
		fake_fail((struct fake_link *)p->link, "refused");
	CHECK_EQ(p->backoff_ms, 2000);
}

TEST(no_op_was_called_on_a_dead_link)
{
	CHECK_EQ(fake.used_dead, 0);
}

TEST(status_and_stats_lines)
{
	char *text = NULL;
	size_t len = 0;
	FILE *out = open_memstream(&text, &len);

	peer_write_status(out);
	peer_write_stats(out, peer_by_node(3));
	fclose(out);
	CHECK(strstr(text, "peer 0 127.0.0.1:7000 dim 1: up via fake") != NULL);
	CHECK(strstr(text, "peer 3 127.0.0.1:7003 dim 0: up via fake to node 3") != NULL);
	CHECK(strstr(text, " retransmits 2 ") != NULL);
	free(text);
}

int main(void)
{
	log_init("test_peer", LOG_ERR);
	if (fake_daemon(&conf, "unit", "") < 0)
		return 1;
	if (peer_init(&conf, 1, &fake_transport, &events) < 0)
		return 1;
	RUN(connects_to_the_higher_peer_only);
	RUN(handshake_as_the_connecting_end);
	RUN(handshake_as_the_accepting_end);
	RUN(refuses_wrong_cluster_node_role_and_garbage);
	RUN(refuses_a_bad_mac_and_frames_out_of_turn);
	RUN(frames_out_carry_sequence_numbers_and_the_latest_ack);
	RUN(urgent_frames_are_acked_at_once_unless_lazy);
	RUN(duplicates_are_discarded_and_gaps_end_the_link);
	RUN(reconnects_with_backoff_and_resends_what_was_not_acknowledged);
	RUN(acks_of_frames_never_sent_end_the_link);
	RUN(a_held_frame_pauses_the_link_until_resumed);
	RUN(a_malformed_frame_is_refused_and_comes_again);
	RUN(resends_after_the_accepting_side_reconnects);
	RUN(a_restarted_peer_gets_a_fresh_start);
	RUN(a_new_connection_replaces_the_old_one);
	RUN(an_unauthenticated_hello_does_not_disturb_the_live_link);
	RUN(an_ack_beyond_what_was_sent_is_refused_without_closing_the_link_mid_frame);
	RUN(handshake_frames_out_of_order_are_refused);
	RUN(an_outgoing_peer_answering_as_another_node_is_refused);
	RUN(a_link_that_comes_up_while_a_frame_is_held_starts_paused);
	RUN(fault_injection_breaks_the_link);
	RUN(status_and_stats_lines);
	RUN(backoff_doubles_up_to_two_seconds);
	RUN(no_op_was_called_on_a_dead_link);
	peer_fini();
	fake_daemon_stop(&conf);
	return check_done();
}
