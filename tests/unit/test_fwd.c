/* tests/unit/test_fwd.c - the forwarding layer (daemon/fwd/): aggregation
 * buffers and when they leave, the next hop, backpressure on links, taking
 * received frames apart (delivery, forwarding, control items, malformed
 * frames, a full receiver), and draining a TX ring.  Real endpoints (memfd
 * rings, local/endpoint.c) and the real peer layer, over the fake transport
 * of fake_link.h.
 *
 * This daemon is node 1 of a 2x2 virtual grid: peers 0 (dimension 1) and 3
 * (dimension 0); node 2 is reached through node 0 (the highest dimension is
 * fixed first).  Job 4097 has rank 0 here, rank 1 on node 3, rank 2 on node 2.
 */
#define UNIT "fwd"
#include "check.h"
#include "fake_link.h"
#include "../../daemon/core/conf.h"
#include "../../daemon/core/log.h"
#include "../../daemon/fwd/agg.h"
#include "../../daemon/fwd/ctlq.h"
#include "../../daemon/fwd/flow.h"
#include "../../daemon/fwd/fwd.h"
#include "../../daemon/fwd/rx.h"
#include "../../daemon/fwd/tx.h"
#include "../../daemon/local/endpoint.h"

#include <sys/mman.h>
#include <unistd.h>

#define JOB_ID 4097u

static struct conf conf;
static struct fake_link *link0, *link3;
static uint64_t seq_from3;              /* the last DATA frame node 3 sent us */
static struct ep *ep;
static struct ring crx, ctx;            /* the client's side of ep's rings */
static void *client_map;

/* The items in the next DATA frame written on fl; returns their number, or
 * -1 if there is none.  Copies the first max items' headers to its. */
static int next_frame_items(struct fake_link *fl, struct wire_item *its, int max)
{
	struct fake_frame *o;
	struct wire_item it;
	const void *payload;
	size_t off = 0;
	int n = 0;

	while ((o = fake_next(fl)) && o->h.kind != WIRE_DATA)
		;
	if (!o)
		return -1;
	while (wire_next_item(o->body, o->h.len, &off, &it, &payload) == 1) {
		if (n < max)
			its[n] = it;
		n++;
	}
	return n;
}

static int item(uint32_t node, uint32_t job, uint32_t dst, uint32_t len)
{
	static uint8_t payload[PROTO_FRAG_BYTES];
	struct wire_item it = { .len = len, .node = node, .job = job, .dst = dst, .src = 0, .channel = 7 };

	return agg_item(&it, payload, -1, AGG_DATA);
}

/* A DATA body of items, built item by item. */
struct body {
	uint8_t buf[1 << 20];
	uint32_t len;
};

/* An item as a node in the job's step sends it (gen: proto/wire.h "The step
 * of an item"); add_next as one already in the next step. */
static void add_gen(struct body *b, uint32_t node, uint32_t job, uint32_t dst, uint32_t src, const void *p,
		    uint32_t len, int next)
{
	uint32_t step = ep->job->step + (next ? 1 : 0);
	struct wire_item it = { .len = len, .node = node, .job = job, .dst = dst, .src = src, .channel = 3,
				.gen = job == JOB_ID && (step & 1) ? WIRE_GEN_STEP : 0 };

	b->len += (uint32_t)wire_encode_item(b->buf + b->len, &it, p);
}

static void add(struct body *b, uint32_t node, uint32_t job, uint32_t dst, uint32_t src, const void *p, uint32_t len)
{
	add_gen(b, node, job, dst, src, p, len, 0);
}

/* The next record in the client's RX ring, ITEM or STEP; -1 if none. */
static int client_recv(struct proto_rec *rec, uint8_t *payload)
{
	const void *p;
	int ret = ring_peek(&crx, rec, &p);

	if (ret <= 0)
		return ret < 0 ? -2 : -1;
	memcpy(payload, p, rec->len);
	ring_consume(&crx, rec);
	ring_release(&crx);
	return 0;
}

TEST(the_next_hop_is_the_route_of_the_topology)
{
	CHECK(agg_routable(0));
	CHECK(agg_routable(3));
	CHECK(!agg_routable(1));
	CHECK(agg_routable(2));
	CHECK(!agg_routable(4));
}

TEST(items_wait_in_the_buffer_until_flushed)
{
	struct wire_item its[8];

	CHECK_EQ(item(3, JOB_ID, 1, 16), 0);
	CHECK_EQ(item(3, JOB_ID, 1, 0), 0);     /* zero-length items are items */
	CHECK_EQ(item(3, JOB_ID, 1, 5), 0);
	CHECK_EQ(next_frame_items(link3, its, 8), -1);
	agg_flush_all(AGG_FLUSH_EXPLICIT);
	CHECK_EQ(next_frame_items(link3, its, 8), 3);
	CHECK_EQ(its[0].len, 16);
	CHECK_EQ(its[1].len, 0);
	CHECK_EQ(its[2].len, 5);
	CHECK_EQ(next_frame_items(link0, its, 8), -1);  /* nothing went the other way */
}

TEST(a_full_buffer_leaves_at_once)
{
	struct wire_item its[16];

	/* 1024-byte buffers: 8 items of 104-byte footprint + 24 fill one. */
	for (int i = 0; i < 8; i++)
		CHECK_EQ(item(3, JOB_ID, 1, 100), 0);
	CHECK_EQ(next_frame_items(link3, its, 16), 8);
	CHECK_EQ(next_frame_items(link3, its, 16), -1);
}

TEST(the_timer_sends_a_partly_filled_buffer)
{
	struct wire_item its[4];

	CHECK_EQ(item(3, JOB_ID, 1, 8), 0);
	fake_run_loop(20);                      /* flush_us is 2000 */
	CHECK_EQ(next_frame_items(link3, its, 4), 1);
}

TEST(a_large_item_goes_alone_behind_what_was_buffered)
{
	struct wire_item its[4];

	CHECK_EQ(item(3, JOB_ID, 1, 8), 0);
	CHECK_EQ(item(3, JOB_ID, 1, 600), 0);   /* more than half a buffer */
	CHECK_EQ(next_frame_items(link3, its, 4), 1);
	CHECK_EQ(its[0].len, 8);
	CHECK_EQ(next_frame_items(link3, its, 4), 1);
	CHECK_EQ(its[0].len, 600);
}

TEST(items_for_a_node_further_away_go_through_the_next_hop)
{
	struct wire_item its[4];

	CHECK_EQ(item(2, JOB_ID, 2, 8), 0);
	agg_flush_all(AGG_FLUSH_EXPLICIT);
	CHECK_EQ(next_frame_items(link0, its, 4), 1);
	CHECK_EQ(its[0].node, 2);
	CHECK_EQ(next_frame_items(link3, its, 4), -1);
}

/* Node 3 acknowledges every frame it was sent. */
static void ack_all_from_3(void)
{
	struct fake_frame *o;
	uint64_t last = 0;

	agg_flush_all(AGG_FLUSH_EXPLICIT);
	while ((o = fake_next(link3)))
		if (o->h.kind == WIRE_DATA)
			last = o->h.seq;
	CHECK(last != 0);
	CHECK_EQ(fake_arrive(link3, WIRE_ACK, 0, last, NULL, 0), 1);
}

/* Until node 3 acknowledges, frames to it pile up. */
TEST(backpressure_new_items_stop_at_half_continuing_ones_at_the_limit)
{
	struct peer *p3 = peer_by_node(3);
	struct wire_item it = { .len = 60000, .node = 3, .job = JOB_ID, .dst = 1 };
	static uint8_t payload[60000];
	int n = 0;

	while (agg_item(&it, payload, -1, AGG_DATA) == 0 && n < 100)
		n++;
	CHECK(n < 100);
	CHECK(peer_backlog(p3) >= conf.link_bytes / 2);
	CHECK(peer_backlog(p3) < conf.link_bytes / 2 + 70000);
	CHECK(agg_link_full(3));
	/* Items continuing along the link's dimension (0) may use the rest. */
	while (agg_item(&it, payload, 0, AGG_DATA) == 0 && n < 200)
		n++;
	CHECK(peer_backlog(p3) >= conf.link_bytes);
	/* Another dimension's items turning here stop at half, like new ones. */
	CHECK_EQ(agg_item(&it, payload, 1, AGG_DATA), -EAGAIN);
	/* Control items passing through have a reserve above that, and no
	 * more (finding 4: what a peer sends through us stays bounded)... */
	it.job = 0;
	while (agg_item(&it, payload, 1, AGG_CONTROL) == 0 && n < 300)
		n++;
	CHECK(n < 300);
	CHECK(peer_backlog(p3) >= conf.link_bytes + AGG_CONTROL_RESERVE);
	CHECK(peer_backlog(p3) < conf.link_bytes + AGG_CONTROL_RESERVE + 70000);
	/* ... and this node's own control items are never refused. */
	CHECK_EQ(agg_item(&it, payload, -1, AGG_LOCAL), 0);
	it.job = JOB_ID;
	/* Node 3 acknowledges everything: items flow again. */
	ack_all_from_3();
	CHECK_EQ(peer_backlog(p3), 0);
	CHECK(!agg_link_full(3));
	CHECK_EQ(agg_item(&it, payload, -1, AGG_DATA), 0);
	ack_all_from_3();
}

/* One frame from node 3 with an item for our rank 0, one to forward to node
 * 2, a control item, and one for a job this node does not know. */
TEST(a_frame_is_taken_apart)
{
	static struct body b;
	const struct ctlq_item *c;
	struct proto_rec rec;
	uint8_t payload[PROTO_FRAG_BYTES], ctl[8] = { 1, 2, 3, 4, 5, 6, 7, 8 };
	struct wire_item its[4];
	uint64_t dropped = ep_stats.items_dropped;

	b.len = 0;
	add(&b, 1, JOB_ID, 0, 1, "to rank 0", 9);
	add(&b, 2, JOB_ID, 2, 1, "to node 2", 9);
	add(&b, 1, 0, WIRE_CTL_GO, 3, ctl, sizeof(ctl));
	add(&b, 1, 999, 0, 1, "lost", 4);
	CHECK_EQ(fake_arrive(link3, WIRE_DATA, ++seq_from3, 0, b.buf, b.len), 1);
	ep_publish();
	CHECK_EQ(client_recv(&rec, payload), 0);
	CHECK_EQ(rec.kind, PROTO_REC_ITEM);
	CHECK_EQ(rec.src, 1);
	CHECK_EQ(rec.dst, 0);
	CHECK_EQ(rec.channel, 3);
	CHECK_EQ(rec.len, 9);
	CHECK_EQ(memcmp(payload, "to rank 0", 9), 0);
	CHECK_EQ(client_recv(&rec, payload), -1);
	c = ctlq_first();
	CHECK(c && c->type == WIRE_CTL_GO && c->from == 3 && c->len == 8 && memcmp(c->payload, ctl, 8) == 0);
	ctlq_pop();
	CHECK(ctlq_first() == NULL);
	CHECK_EQ(ep_stats.items_dropped, dropped + 1);
	agg_flush_all(AGG_FLUSH_EXPLICIT);
	CHECK_EQ(next_frame_items(link0, its, 4), 1);
	CHECK_EQ(its[0].node, 2);
	CHECK_EQ(its[0].src, 1);
}

TEST(a_malformed_frame_is_not_used_at_all)
{
	static struct body b;
	struct proto_rec rec;
	uint8_t payload[PROTO_FRAG_BYTES];
	struct wire_item its[4];
	struct peer *p3 = peer_by_node(3);
	uint64_t recv = p3->seq.recv_seq;

	b.len = 0;
	add(&b, 1, JOB_ID, 0, 1, "fine", 4);
	add(&b, 2, JOB_ID, 2, 1, "fine too", 8);
	add(&b, 9, JOB_ID, 0, 1, "no such node", 12);
	CHECK_EQ(fake_arrive(link3, WIRE_DATA, recv + 1, 0, b.buf, b.len), -EPROTO);
	ep_publish();
	CHECK_EQ(client_recv(&rec, payload), -1);
	agg_flush_all(AGG_FLUSH_EXPLICIT);
	CHECK_EQ(next_frame_items(link0, its, 4), -1);
	CHECK_EQ(p3->seq.recv_seq, recv);
	/* The link is gone; node 3 comes back (we connect) and resends. */
	fake_run_loop(120);
	link3 = fake.connected[3];
	CHECK(link3 && fake_handshake_connected(link3, 3, 1, 0x3333, "unit"));
	/* A body cut in the middle of an item: the same. */
	b.len = 0;
	add(&b, 1, JOB_ID, 0, 1, "fine", 4);
	add(&b, 1, JOB_ID, 0, 1, "cut short", 9);
	CHECK_EQ(fake_arrive(link3, WIRE_DATA, recv + 1, 0, b.buf, b.len - 3), -EPROTO);
	ep_publish();
	CHECK_EQ(client_recv(&rec, payload), -1);
	fake_run_loop(250);
	link3 = fake.connected[3];
	CHECK(link3 && fake_handshake_connected(link3, 3, 1, 0x3333, "unit"));
	seq_from3 = recv;
}

/* The control items of type `type` in what fl wrote since the test last
 * looked, about rank `rank`. */
static int ctl_items(struct fake_link *fl, uint32_t type, uint32_t rank)
{
	struct fake_frame *o;
	int n = 0;

	while ((o = fake_next(fl))) {
		struct wire_item it;
		const void *payload;
		struct wire_ctl c;
		size_t off = 0;

		while (o->h.kind == WIRE_DATA && wire_next_item(o->body, o->h.len, &off, &it, &payload) == 1)
			n += it.job == 0 && it.dst == type && wire_ctl_decode(type, payload, it.len, &c) == 0 &&
			     c.u.step.job == JOB_ID && c.u.step.step == rank;
	}
	return n;
}

/* What the cluster layer does with XOFF and XON items that arrived (it is
 * not linked here): hands them to flow_remote. */
static void take_flow_items(void)
{
	const struct ctlq_item *c;

	while ((c = ctlq_first())) {
		struct wire_ctl m;

		if ((c->type == WIRE_CTL_XOFF || c->type == WIRE_CTL_XON) &&
		    wire_ctl_decode(c->type, c->payload, c->len, &m) == 0) {
			struct job *j = job_by_id(m.u.step.job, (uint8_t)m.u.step.gen);

			if (j)
				flow_remote(j, m.u.step.step, c->from, c->type == WIRE_CTL_XOFF);
		}
		ctlq_pop();
	}
}

/* Finding 7 (fwd/flow.h): items for a receiver whose queue is full are
 * parked, not left on the link, and the job's other nodes (3, and 2 through
 * node 0) are told XOFF; once the receiver drained, XON.  Only beyond what
 * parking may hold does the link pause, and then nothing is lost either. */
TEST(a_full_receiver_parks_items_and_holds_back_its_senders_not_the_link)
{
	static struct body b;
	static uint8_t big[60000];
	struct proto_rec rec;
	static uint8_t payload[PROTO_FRAG_BYTES];
	int got = 0, rounds = 0, sent = 0;

	for (int frame = 0; frame < 2; frame++) {
		b.len = 0;
		for (uint32_t i = 0; i < 12; i++, sent++) {
			memset(big, sent, sizeof(big));
			add(&b, 1, JOB_ID, 0, 1, big, sizeof(big));
		}
		CHECK_EQ(fake_arrive(link3, WIRE_DATA, ++seq_from3, 0, b.buf, b.len), 1);
		if (frame == 0) {
			/* All of it taken: parked beyond the queue's limit. */
			CHECK(ep->pending.bytes > conf.pending_bytes);
			CHECK_EQ(link3->pauses, 0);
			CHECK_EQ(ctl_items(link3, WIRE_CTL_XOFF, 0), 1);
			CHECK_EQ(ctl_items(link0, WIRE_CTL_XOFF, 0), 1);   /* to node 2 */
		}
	}
	/* The second frame went beyond memory_bytes: the last resort. */
	CHECK_EQ(fake_arrive(link3, WIRE_DATA, seq_from3 + 1, 0, "x", 0), 0);
	while (got < 24 && rounds++ < 1000) {
		fwd_poll();
		ep_publish();
		while (client_recv(&rec, payload) == 0) {
			CHECK_EQ(rec.len, 60000);
			CHECK_EQ(payload[0], got);
			CHECK_EQ(payload[59999], got);
			got++;
		}
	}
	CHECK_EQ(got, 24);
	CHECK(link3->resumes >= 1);             /* the peer layer resumed reading */
	CHECK_EQ(fake_arrive(link3, WIRE_DATA, seq_from3 + 1, 0, "x", 0), 1);
	seq_from3++;
	agg_flush_all(AGG_FLUSH_EXPLICIT);
	CHECK_EQ(ctl_items(link3, WIRE_CTL_XON, 0), 1);
	CHECK_EQ(ctl_items(link0, WIRE_CTL_XON, 0), 1);
	CHECK_EQ(ep->xoff, 0);
}

/* The other side: an XOFF from the node of rank 1 stops the TX draining of
 * a local sender at its first item for rank 1, in order, until XON. */
TEST(an_xoff_holds_back_local_senders_to_that_rank_until_xon)
{
	struct job *j = ep->job;
	struct proto_rec *r;
	uint8_t buf[64];
	struct wire_ctl_step m = { .job = JOB_ID, .gen = 0, .step = 1 };
	ssize_t n = wire_ctl_encode_step(buf, sizeof(buf), &m);
	uint64_t in = tx_stats.items_in;
	static struct body b;

	b.len = 0;
	add(&b, 1, 0, WIRE_CTL_XOFF, 3, buf, (uint32_t)n);      /* from node 3, which hosts rank 1 */
	CHECK_EQ(fake_arrive(link3, WIRE_DATA, ++seq_from3, 0, b.buf, b.len), 1);
	take_flow_items();
	CHECK(job_xoff(j, 1));
	for (uint32_t dst = 1; dst <= 2; dst++) {       /* rank 1 (held), then rank 2 */
		CHECK_EQ(ring_reserve(&ctx, 8, &r), 0);
		*r = (struct proto_rec){ .len = 8, .kind = PROTO_REC_ITEM, .dst = dst };
	}
	ring_publish(&ctx);
	fwd_poll();
	CHECK_EQ(tx_stats.items_in, in);                /* nothing taken: the first waits */
	CHECK_EQ(ep->blocked_rank, 1);
	b.len = 0;
	add(&b, 1, 0, WIRE_CTL_XON, 3, buf, (uint32_t)n);
	CHECK_EQ(fake_arrive(link3, WIRE_DATA, ++seq_from3, 0, b.buf, b.len), 1);
	take_flow_items();
	CHECK(!job_xoff(j, 1));
	fwd_poll();
	CHECK_EQ(tx_stats.items_in, in + 2);            /* both, in order */
	CHECK_EQ(ep->blocked_rank, EP_NO_RANK);
	agg_flush_all(AGG_FLUSH_EXPLICIT);
	ack_all_from_3();
}

/* Once items wait for a receiver, a later one does not overtake them, even
 * when the ring has room again before the queue moved in. */
TEST(queued_items_are_not_overtaken)
{
	static uint8_t big[60000];
	struct proto_rec rec = { .kind = PROTO_REC_ITEM, .src = 1, .dst = 0 };
	static uint8_t payload[PROTO_FRAG_BYTES];
	int order[16], got = 0;

	for (uint32_t i = 0; i < 6; i++) {     /* 4 fit the ring, 2 wait */
		memset(big, (int)(100 + i), sizeof(big));
		rec.len = sizeof(big);
		CHECK_EQ(ep_deliver(ep, &rec, big), 0);
	}
	CHECK(ep->pending.count > 0);
	ep_publish();
	while (client_recv(&rec, payload) == 0)         /* the client makes room */
		order[got++] = payload[0];
	memset(big, 106, 8);
	rec.len = 8;
	CHECK_EQ(ep_deliver(ep, &rec, big), 0);         /* must queue behind the two */
	while (got < 7 && ep_flush_pending(ep) | ep_publish())
		while (got < 16 && client_recv(&rec, payload) == 0)
			order[got++] = payload[0];
	CHECK_EQ(got, 7);
	for (int i = 0; i < got; i++)
		CHECK_EQ(order[i], 100 + i);
}

/* A peer that floods control items for this node is held back like one
 * that floods data: the queue for the cluster layer is bounded. */
TEST(a_flood_of_control_items_holds_the_link)
{
	static struct body b;
	static uint8_t payload[60000];
	const struct ctlq_item *c;
	uint32_t next = 0, n = 0;
	int rounds = 0;

	for (int f = 0; f < 2; f++) {
		b.len = 0;
		for (uint32_t i = 0; i < 17; i++) {
			uint32_t k = (uint32_t)f * 17 + i;

			memcpy(payload, &k, sizeof(k));
			add(&b, 1, 0, WIRE_CTL_REPORT, 3, payload, sizeof(payload));
		}
		CHECK_EQ(fake_arrive(link3, WIRE_DATA, ++seq_from3, 0, b.buf, b.len), 1);
	}
	/* The second frame did not fit the queue: the link takes no more. */
	CHECK_EQ(fake_arrive(link3, WIRE_DATA, seq_from3 + 1, 0, "x", 0), 0);
	/* The cluster layer empties the queue, turn after turn of the loop. */
	while (next < 34 && rounds++ < 100) {
		while ((c = ctlq_first())) {
			uint32_t k;

			memcpy(&k, c->payload, sizeof(k));
			CHECK_EQ(k, next);
			CHECK(c->type == WIRE_CTL_REPORT && c->from == 3 && c->len == sizeof(payload));
			next++;
			n++;
			ctlq_pop();
		}
		fwd_poll();
	}
	CHECK_EQ(n, 34);
	CHECK(link3->resumes >= 1);
	CHECK_EQ(fake_arrive(link3, WIRE_DATA, seq_from3 + 1, 0, "x", 0), 1);
	seq_from3++;
}

/* What the client publishes in its TX ring. */
static void client_send(uint8_t kind, uint32_t dst, const void *p, uint32_t len)
{
	struct proto_rec *rec;

	if (ring_reserve(&ctx, len, &rec) < 0) {
		CHECK(!"room in the TX ring");
		return;
	}
	*rec = (struct proto_rec){ .len = len, .kind = kind, .channel = 5, .dst = dst, .src = 0 };
	if (len)
		memcpy(rec + 1, p, len);
	ring_publish(&ctx);
}

TEST(tx_records_go_on_in_order_to_local_and_remote_ranks)
{
	struct job *j = ep->job;
	struct proto_rec rec;
	uint8_t payload[PROTO_FRAG_BYTES];
	struct wire_item its[4];
	uint64_t sent = j->sent;

	client_send(PROTO_REC_ITEM, 0, "me", 2);        /* to itself */
	client_send(PROTO_REC_ITEM, 1, "there", 5);     /* to node 3 */
	client_send(PROTO_REC_ITEM, 0, NULL, 0);
	client_send(PROTO_REC_DONE, 0, NULL, 0);
	CHECK_EQ(tx_poll(), 1);
	CHECK_EQ(j->sent, sent + 3);
	CHECK_EQ(j->done, 1);
	ep_publish();
	CHECK_EQ(client_recv(&rec, payload), 0);
	CHECK(rec.len == 2 && rec.src == 0 && memcmp(payload, "me", 2) == 0);
	CHECK_EQ(client_recv(&rec, payload), 0);
	CHECK_EQ(rec.len, 0);
	/* DONE sent the buffer at once. */
	CHECK_EQ(next_frame_items(link3, its, 4), 1);
	CHECK(its[0].job == JOB_ID && its[0].dst == 1 && its[0].src == 0 && its[0].len == 5 && its[0].node == 3);
	/* ... marked with the step (proto/wire.h "The step of an item"). */
	CHECK_EQ(its[0].gen, (j->step & 1) ? WIRE_GEN_STEP : 0);
	CHECK(!ep->failed);
	CHECK_EQ(tx_poll(), 0);
	/* The step completes (as the home's STEP would have it); what the
	 * rank sends then goes with the next step's mark.  (An item before
	 * that would end its session: tests/integration/step_order.sh.) */
	ep_step_complete(j);
	CHECK_EQ(j->done, 0);
	client_send(PROTO_REC_ITEM, 1, "next", 4);
	CHECK_EQ(tx_poll(), 1);
	CHECK_EQ(j->sent, sent + 4);
	agg_flush_all(AGG_FLUSH_EXPLICIT);
	CHECK_EQ(next_frame_items(link3, its, 4), 1);
	CHECK(its[0].len == 4 && its[0].gen == ((j->step & 1) ? WIRE_GEN_STEP : 0));
	ep_publish();
	CHECK_EQ(client_recv(&rec, payload), 0);
	CHECK(rec.kind == PROTO_REC_STEP && rec.dst == j->step - 1);
	CHECK_EQ(client_recv(&rec, payload), -1);
}

/* An item of the next step, from a node that heard of the step's end before
 * this one: it completes the step here first (STEP record, then the item),
 * and the following items of that step go on as usual. */
TEST(an_item_of_the_next_step_completes_the_step_first)
{
	static struct body b;
	struct job *j = ep->job;
	struct proto_rec rec;
	uint8_t payload[PROTO_FRAG_BYTES];
	uint32_t step = j->step;
	uint64_t early = rx_steps_early;

	b.len = 0;
	add(&b, 1, JOB_ID, 0, 1, "this", 4);
	add_gen(&b, 1, JOB_ID, 0, 1, "next", 4, 1);
	add_gen(&b, 1, JOB_ID, 0, 1, "next too", 8, 1);
	CHECK_EQ(fake_arrive(link3, WIRE_DATA, ++seq_from3, 0, b.buf, b.len), 1);
	ep_publish();
	CHECK_EQ(j->step, step + 1);
	CHECK_EQ(rx_steps_early, early + 1);
	CHECK_EQ(client_recv(&rec, payload), 0);
	CHECK(rec.kind == PROTO_REC_ITEM && rec.len == 4 && memcmp(payload, "this", 4) == 0);
	CHECK_EQ(client_recv(&rec, payload), 0);
	CHECK(rec.kind == PROTO_REC_STEP && rec.dst == step);
	CHECK_EQ(client_recv(&rec, payload), 0);
	CHECK(rec.kind == PROTO_REC_ITEM && rec.len == 4 && memcmp(payload, "next", 4) == 0);
	CHECK_EQ(client_recv(&rec, payload), 0);
	CHECK(rec.kind == PROTO_REC_ITEM && rec.len == 8);
	CHECK_EQ(client_recv(&rec, payload), -1);

	/* Not in a job that failed here: its steps are over (no STEP
	 * record), and the item is delivered behind what came before. */
	j->failed = EPIPE;
	step = j->step;
	b.len = 0;
	add_gen(&b, 1, JOB_ID, 0, 1, "late", 4, 1);
	CHECK_EQ(fake_arrive(link3, WIRE_DATA, ++seq_from3, 0, b.buf, b.len), 1);
	ep_publish();
	CHECK_EQ(j->step, step);
	CHECK_EQ(rx_steps_early, early + 1);
	CHECK_EQ(client_recv(&rec, payload), 0);
	CHECK(rec.kind == PROTO_REC_ITEM && rec.len == 4 && memcmp(payload, "late", 4) == 0);
	CHECK_EQ(client_recv(&rec, payload), -1);
	j->failed = 0;
}

/* A local sender whose items go to a link at its limit stops (its records
 * stay in its TX ring) and goes on once the link drained. */
TEST(a_sender_toward_a_full_link_waits_and_resumes)
{
	static uint8_t big[60000];
	struct peer *p3 = peer_by_node(3);
	struct wire_item it = { .len = sizeof(big), .node = 3, .job = JOB_ID, .dst = 1 };
	uint64_t sent = ep->job->sent;
	int n = 0;

	while (peer_backlog(p3) < conf.link_bytes / 2 && n++ < 100)
		CHECK_EQ(agg_item(&it, big, 0, AGG_DATA), 0);
	client_send(PROTO_REC_ITEM, 1, "wait", 4);
	tx_poll();
	CHECK_EQ(ep->job->sent, sent);          /* still in the TX ring */
	CHECK_EQ(ep->blocked_node, 3);
	CHECK_EQ(tx_poll(), 0);                 /* and it stays there */
	ack_all_from_3();
	CHECK_EQ(peer_backlog(p3), 0);
	CHECK_EQ(tx_poll(), 1);
	CHECK_EQ(ep->job->sent, sent + 1);
	CHECK_EQ(ep->blocked_node, JOB_NO_NODE);
	ack_all_from_3();
}

TEST(a_client_breaking_the_protocol_is_failed_not_freed)
{
	struct job *j = ep->job;

	static struct body b;
	uint64_t dropped = ep_stats.items_dropped, ringed = j->ringed;

	client_send(PROTO_REC_ITEM, 3, "out", 3);       /* rank 3 of a 3-rank job */
	tx_poll();
	CHECK(ep->failed != NULL);
	CHECK(j->ranks[0].ep == NULL);          /* out of the rank table at once */
	CHECK_EQ(j->joined, 1);                 /* but a member until its session ends it */
	CHECK_EQ(tx_poll(), 0);                 /* nothing more is taken from it */
	/* What comes for the rank now is dropped, and counted as arrived. */
	b.len = 0;
	add(&b, 1, JOB_ID, 0, 1, "late", 4);
	CHECK_EQ(fake_arrive(link3, WIRE_DATA, ++seq_from3, 0, b.buf, b.len), 1);
	CHECK_EQ(ep_stats.items_dropped, dropped + 1);
	CHECK_EQ(j->ringed, ringed + 1);
}

int main(void)
{
	struct ctl_attached_wire a;
	int fds[4];

	log_init("test_fwd", LOG_ERR);
	if (fake_daemon(&conf, "unit",
			"aggregation: { buffer_bytes = 1024; flush_us = 2000; };\n"
			"limits: { ring_bytes = 262144; pending_bytes = 262144; memory_bytes = 1048576;"
			" link_bytes = 1048576; user_memory_bytes = 1048576; };\n") < 0)
		return 1;
	if (peer_init(&conf, 1, &fake_transport, &fwd_peer_events) < 0 || ep_init(&conf, 1) < 0 ||
	    fwd_init(&conf, 1) < 0)
		return 1;
	link0 = fake_accept();
	link3 = fake.connected[3];
	if (!fake_handshake_accepted(link0, 0, 1, 0x1000, 0, 0, "unit") ||
	    !link3 || !fake_handshake_connected(link3, 3, 1, 0x3333, "unit")) {
		fprintf(stderr, "links did not come up\n");
		return 1;
	}
	if (ep_open(1000, getpid(), 7, "job", 0, 3, &ep, &a, fds) < 0)
		return 1;
	client_map = mmap(NULL, a.region_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fds[0], 0);
	close(fds[0]);
	if (client_map == MAP_FAILED)
		return 1;
	ring_attach(&crx, (uint8_t *)client_map + a.rx_off, a.rx_size, 0);
	ring_attach(&ctx, (uint8_t *)client_map + a.tx_off, a.tx_size, 0);
	job_set_id(ep->job, JOB_ID, 0);
	ep->job->ranks[1].node = 3;
	ep->job->ranks[2].node = 2;
	ep->job->ready = 1;
	ep->ready = 1;          /* (as READY would have gone out) */

	RUN(the_next_hop_is_the_route_of_the_topology);
	RUN(items_wait_in_the_buffer_until_flushed);
	RUN(a_full_buffer_leaves_at_once);
	RUN(the_timer_sends_a_partly_filled_buffer);
	RUN(a_large_item_goes_alone_behind_what_was_buffered);
	RUN(items_for_a_node_further_away_go_through_the_next_hop);
	RUN(backpressure_new_items_stop_at_half_continuing_ones_at_the_limit);
	RUN(a_frame_is_taken_apart);
	RUN(a_malformed_frame_is_not_used_at_all);
	RUN(a_full_receiver_parks_items_and_holds_back_its_senders_not_the_link);
	RUN(an_xoff_holds_back_local_senders_to_that_rank_until_xon);
	RUN(a_flood_of_control_items_holds_the_link);
	RUN(queued_items_are_not_overtaken);
	RUN(a_sender_toward_a_full_link_waits_and_resumes);
	RUN(tx_records_go_on_in_order_to_local_and_remote_ranks);
	RUN(an_item_of_the_next_step_completes_the_step_first);
	RUN(a_client_breaking_the_protocol_is_failed_not_freed);

	munmap(client_map, a.region_bytes);
	fwd_fini();
	ep_fini();
	peer_fini();
	fake_daemon_stop(&conf);
	return check_done();
}
