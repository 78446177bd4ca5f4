/* tests/fuzz/fuzz_fwd.c - the data path fed from outside: frames from an
 * (authenticated, but arbitrary) peer taken apart by the forwarding layer
 * (fwd/rx.c: delivery, parking and XOFF, forwarding, control items), the
 * cluster layer's handling of control items (cluster/: JOIN, TABLE, STEP,
 * XOFF, FAIL, ... with fields from the input, mostly well-formed), and a
 * client's TX ring drained by fwd/tx.c (records of any kind, any rank) while
 * the client consumes its RX ring or not; batches (FERRY_BATCH), of item
 * records and dense ones, both ways, well-formed or damaged; frames
 * received in place (daemon/net/link.h), some of whose rest never comes;
 * large pieces sent from the TX ring (lent bytes, net/frame.h).  Real
 * endpoints (memfd rings, local/), the real peer layer over the in-memory
 * transport of tests/unit/fake_link.h.
 *
 * The daemon is node 1 of a 2x2 virtual grid (peer 0 connects to it, it
 * connects to peer 3; node 2 is reached through node 0).  Job "fz" of 4
 * ranks: 0 and 1 here, 2 on node 3, 3 on node 2.  The input is a script, a
 * byte an operation.  Besides what the sanitizers catch, it aborts when a
 * frame is left over after everything was shut down, when the peer layer
 * used a link it had let go of, or when a frame it sends would not pass the
 * next node's checks (wire_next_item).
 */
#include "../unit/fake_link.h"
#include "../../daemon/cluster/cluster.h"
#include "../../daemon/core/conf.h"
#include "../../daemon/core/log.h"
#include "../../daemon/fwd/ctlq.h"
#include "../../daemon/fwd/fwd.h"
#include "../../daemon/local/endpoint.h"
#include "../../daemon/local/session.h"
#include "../../daemon/net/peer.h"

#include <stdlib.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#define JOB_ID 4097u            /* home node 1, index 1 */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct conf conf;
static const uint8_t *in;
static size_t left;

static struct {
	struct ep *ep;
	void *map;
	size_t bytes;
	struct ring tx, rx;
} client[2];
static struct fake_link *link0, *link3;
static uint64_t seq_in[4];      /* last DATA frame numbered from node 0 / 3 */

static uint8_t next(void)
{
	if (!left)
		return 0;
	left--;
	return *in++;
}

static uint32_t next32(void)
{
	return (uint32_t)next() | (uint32_t)next() << 8;
}

/* A control payload of type into buf: well-formed from input fields, or
 * (rarely) raw bytes.  Returns its length. */
static uint32_t ctl_payload(uint32_t type, uint8_t *buf, size_t cap)
{
	uint32_t job = next() & 7 ? JOB_ID : next32(), gen = next() & 3, n;
	ssize_t len = -1;

	switch (type) {
	case WIRE_CTL_JOIN:
	case WIRE_CTL_LEAVE:
	case WIRE_CTL_REJECT: {
		struct wire_ctl_rank r = { .uid = next() & 1, .size = 1 + next() % 6, .rank = next() % 6,
					   .err = type == WIRE_CTL_REJECT ? 1 + next() % 100 : 0,
					   .incarnation = type == WIRE_CTL_REJECT ? 0 : 1 + next() % 3, .name_len = 2 };

		len = wire_ctl_encode_rank(buf, cap, &r, next() & 1 ? "fz" : "zz");
		break;
	}
	case WIRE_CTL_TABLE: {
		uint32_t nodes[8];
		struct wire_ctl_table t = { .uid = 0, .job = job, .gen = gen, .size = 4, .first = 0,
					    .count = 1 + next() % 4, .name_len = 2 };

		for (n = 0; n < 8; n++)
			nodes[n] = next() & 7 ? next() % 5 : next32() << 8;
		len = wire_ctl_encode_table(buf, cap, &t, "fz", nodes);
		break;
	}
	case WIRE_CTL_REPORT: {
		struct wire_ctl_report r = { .job = job, .gen = gen, .step = next() % 4, .done = next() % 3,
					     .sent = next() % 50, .ringed = next() % 50 };

		len = wire_ctl_encode_report(buf, cap, &r);
		break;
	}
	case WIRE_CTL_FAIL: {
		struct wire_ctl_fail f = { .job = job, .gen = gen, .step = next() % 4, .rank = next() % 6,
					   .node = next() & 1 ? UINT32_MAX : next() % 4, .err = 1 + next() % 200,
					   .text_len = 4 };

		len = wire_ctl_encode_fail(buf, cap, &f, "fuzz");
		break;
	}
	case WIRE_CTL_LOST: {
		struct wire_ctl_lost l = { .node = next() & 7 ? next() % 5 : next32(), .kind = next() % 3,
					   .text_len = 4 };

		l.incarnation = l.kind == WIRE_LOST_RESTART ? 1 + next() % 3 : 0;
		len = wire_ctl_encode_lost(buf, cap, &l, "lost");
		break;
	}
	default: {      /* STEP, HAVE, GO, XOFF, XON */
		struct wire_ctl_step s = { .job = job, .gen = gen,
					   .step = type == WIRE_CTL_HAVE || type == WIRE_CTL_GO ? 0 : next() % 6 };

		if (type == WIRE_CTL_GO) {
			/* its tail: forced algorithms, some out of range, and
			 * functions, some of algorithms there are not */
			struct wire_ctl_go_tail t = { .nfn = next() % 4 };
			struct wire_go_fn fns[4];

			for (uint32_t f = 0; f < WIRE_GO_FAMS; f++)
				t.force[f] = next() & 3 ? 0 : next() % 7;
			for (uint32_t i = 0; i < t.nfn; i++)
				fns[i] = (struct wire_go_fn){ .fam = (uint8_t)(i * 2 + next() % 3), .alg = next() % 5,
							      .tau_ns = next32(), .tc_ps = next() };
			len = wire_ctl_encode_go(buf, cap, &s, &t, fns);
			break;
		}
		len = wire_ctl_encode_step(buf, cap, &s);
	}
	}
	if (len < 0 || !(next() & 15)) {        /* or arbitrary bytes */
		len = next() % 48;
		for (ssize_t i = 0; i < len; i++)
			buf[i] = next();
	}
	return (uint32_t)len;
}

/* Item records of a batch for dst from src (proto/ring.h "Batches") into
 * buf, mostly well-formed; sometimes one byte of them damaged.  Returns
 * their bytes (at most PROTO_BATCH_MAX, at least one record). */
static uint32_t batch_recs(uint8_t *buf, uint32_t dst, uint32_t src)
{
	uint32_t n = 1 + next() % 12, off = 0;

	for (uint32_t i = 0; i < n; i++) {
		struct proto_rec r = { .len = next() & 7 ? next() % 40 : next() % 400, .kind = PROTO_REC_ITEM,
				       .channel = next(), .dst = dst, .src = src };

		if (off + ring_footprint(r.len) > PROTO_BATCH_MAX)
			break;
		memcpy(buf + off, &r, sizeof(r));
		memset(buf + off + sizeof(r), next(), ring_footprint(r.len) - sizeof(r));
		off += (uint32_t)ring_footprint(r.len);
	}
	if (!(next() & 15))
		buf[next() % off] ^= next();
	return off;
}

/* A dense batch's payload (proto/ring.h "Dense batches") into buf (cap
 * bytes), mostly well-formed from the input, sometimes its header or
 * length off, or (where cap allows) consistent but longer than
 * PROTO_BATCH_MAX (many long items: a peer's, which every node must refuse
 * alike).  Returns its length and its count in *k_p. */
static uint32_t dense_payload(uint8_t *buf, uint32_t cap, uint32_t *k_p)
{
	if (cap > PROTO_BATCH_MAX + 8 && !(next() & 31)) {
		uint32_t l = 64 + next32() % (PROTO_DENSE_ITEM_MAX - 63), stride = (l + 7) & ~7u;
		uint32_t k = (cap - 8) / stride, len;
		uint64_t h;

		if (k > PROTO_DENSE_COUNT_MAX)
			k = PROTO_DENSE_COUNT_MAX;
		len = 8 + k * stride;
		h = l | (uint64_t)k << 32;
		memcpy(buf, &h, 8);
		memset(buf + 8, next(), len - 8);
		*k_p = k;
		return len;
	}

	uint32_t l = next() & 7 ? next() % 33 : next32() % (PROTO_DENSE_ITEM_MAX + 2), stride = (l + 7) & ~7u;
	uint32_t max = stride ? (PROTO_BATCH_MAX - 8) / stride : PROTO_DENSE_COUNT_MAX + 1;
	uint32_t k = max ? 1 + next() % (max < 40 ? max : 40) : 1, len;
	uint64_t h;

	if (!(next() & 15))
		k = next() & 1 ? max : 0;               /* exactly full, or empty */
	len = 8 + k * stride;
	if (len > PROTO_BATCH_MAX)
		len = PROTO_BATCH_MAX;
	if (!(next() & 15))
		len = (len + 8 * (next() % 3) - 8) & (PROTO_BATCH_MAX - 8);    /* a stride off, or 0 */
	h = l | (uint64_t)next() << 16 | (uint64_t)(next() & 15 ? k : k + next() - 128) << 32;
	memcpy(buf, &h, len < 8 ? len : 8);
	if (len > 8)
		memset(buf + 8, next(), len - 8);
	*k_p = k;
	return len;
}

/* A DATA frame from node 0 or 3 with items made from the input. */
static void frame_in(void)
{
	static uint8_t body[1 << 17], payload[PROTO_FRAG_BYTES];
	int from3 = next() & 1, nitems = 1 + next() % 24;
	struct fake_link *fl = from3 ? link3 : link0;
	size_t len = 0;

	if (fl->closed)
		return;
	for (int i = 0; i < nitems; i++) {
		uint8_t kind = next() % 8;
		struct wire_item it = {
			.node = kind ? (next() & 7 ? 1 : next() % 5) : next32(),
			.job = next() & 7 ? JOB_ID : next() % 3,
			.gen = next() & 7 ? 0 : next(),
			.dst = next() % 6,
			.src = next() % 6,
			.channel = next(),
			.flags = next() & 7 ? 0 : next(),       /* MORE, fragment index, bad bits */
		};

		if (it.job == 0 && it.node == 1) {
			it.dst = 1 + next() % WIRE_CTL_TYPE_MAX;
			it.src = from3 ? 3 : next() % 4;
			it.len = ctl_payload(it.dst, payload, sizeof(payload));
		} else if (!(next() & 7)) {
			/* A dense batch (wire.h WIRE_ITEM_DENSE), for here or
			 * passing through; its count right or not. */
			uint32_t k;

			it.len = dense_payload(payload, sizeof(payload), &k);
			it.flags = next() & 15 ? WIRE_ITEM_DENSE : next();
			it.channel = (uint16_t)(next() & 15 ? k : next());
		} else if (!(next() & 3)) {
			/* A batch (wire.h WIRE_ITEM_BATCH), for here or
			 * passing through; its count right or not. */
			uint32_t k = 0;

			it.len = batch_recs(payload, it.dst, it.src);
			for (uint32_t o = 0; o < it.len; o += (uint32_t)ring_footprint(((struct proto_rec *)(payload + o))->len))
				if (++k > 1000 || ((struct proto_rec *)(payload + o))->len > PROTO_BATCH_MAX)
					break;
			it.flags = next() & 15 ? WIRE_ITEM_BATCH : WIRE_ITEM_BATCH | next();
			it.channel = (uint16_t)(next() & 15 ? k : next());
		} else {
			it.len = next() & 15 ? next() % 200 : (uint32_t)next() << 8;
			for (uint32_t b = 0; b < it.len && b < 64; b++)
				payload[b] = next();
		}
		if (wire_item_footprint(it.len) > sizeof(body) - len)
			break;
		len += wire_encode_item(body + len, &it, payload);
	}
	if (!(next() & 31) && len > 8)
		body[next() % len] ^= next();   /* and sometimes a damaged one */
	fake.data_flags = next() & 1 ? WIRE_FRAME_URGENT : 0;   /* its next hops flush what it brought */
	fake.steer = next() & 1;        /* received in place, if the daemon wants it so */
	fake.steer_fail = fake.steer && !(next() & 15);  /* ... and the rest never comes */
	fake_arrive(fl, WIRE_DATA, ++seq_in[from3 ? 3 : 0], 0, body, (uint32_t)len);
	fake.data_flags = 0;
	fake.steer = fake.steer_fail = 0;
}

/* Records from client c into its TX ring. */
static void tx_records(int c)
{
	int n = 1 + next() % 32;

	for (int i = 0; i < n; i++) {
		uint8_t kind = next() & 7 ? PROTO_REC_ITEM : next() % 10;
		uint32_t len = next() & 15 ? next() % 100 : (uint32_t)next() << 8;
		struct proto_rec *r;

		if (kind == PROTO_REC_DENSE && (next() & 3)) {
			/* A dense batch as libferry writes one, for a rank
			 * here, there, or none; sometimes damaged (a channel in
			 * its header, flags, its payload). */
			static uint8_t pay[PROTO_BATCH_MAX];
			uint32_t k, dst = next() & 15 ? next() % 4 : next32();

			len = dense_payload(pay, sizeof(pay), &k);
			if (ring_reserve(&client[c].tx, len, &r) < 0)
				break;
			*r = (struct proto_rec){ .len = len, .kind = kind, .dst = dst,
						 .channel = next() & 15 ? 0 : next() };
			memcpy(r + 1, pay, len);
			continue;
		}
		if (kind == PROTO_REC_BATCH && (next() & 3)) {
			/* A batch as libferry writes one (FERRY_BATCH), for
			 * a rank here, there, or none; sometimes damaged. */
			static uint8_t recs[PROTO_BATCH_MAX];
			uint32_t dst = next() & 15 ? next() % 4 : next32();

			len = batch_recs(recs, dst, next() & 15 ? (uint32_t)c : next() % 4);
			if (ring_reserve(&client[c].tx, len, &r) < 0)
				break;
			*r = (struct proto_rec){ .len = len, .kind = kind, .dst = dst };
			memcpy(r + 1, recs, len);
			continue;
		}
		if (kind != PROTO_REC_ITEM)
			len = 0;
		if (ring_reserve(&client[c].tx, len, &r) < 0)
			break;
		*r = (struct proto_rec){ .len = len, .kind = kind, .dst = next() & 15 ? next() % 4 : next32(),
					 .flags = next() & 15 ? 0 : next() };   /* MORE, index, bad bits */
		memset(r + 1, next(), len);
	}
	ring_publish(&client[c].tx);
}

/* Client c takes up to n records out of its RX ring. */
static void rx_consume(int c, int n)
{
	while (n--) {
		struct proto_rec rec;
		const void *p;

		if (ring_peek(&client[c].rx, &rec, &p) <= 0)
			break;
		ring_consume(&client[c].rx, &rec);
	}
	ring_release(&client[c].rx);
}

/* Node 0 and 3 acknowledge everything the daemon wrote to them. */
static void ack_all(void)
{
	struct fake_link *fls[2] = { link0, link3 };

	for (int i = 0; i < 2; i++) {
		struct fake_frame *o;
		uint64_t last = 0;

		if (fls[i]->closed)
			continue;
		while ((o = fake_next(fls[i]))) {
			size_t off = 0;
			struct wire_item it;
			const void *p;
			int r;

			if (o->h.kind != WIRE_DATA)
				continue;
			last = o->h.seq;
			/* What the daemon sends, the next node must take: a
			 * frame refused there comes again for ever. */
			while ((r = wire_next_item(o->body, o->h.len, &off, &it, &p)) == 1)
				;
			if (r != 0)
				abort();
		}
		if (last)
			fake_arrive(fls[i], WIRE_ACK, 0, last, NULL, 0);
	}
}

static void one(void)
{
	uint8_t op = next();

	switch (op % 7) {
	case 0:
	case 1:
		frame_in();
		break;
	case 2:
		tx_records(next() & 1);
		break;
	case 3:
		rx_consume(next() & 1, next());
		break;
	case 4:
		fwd_poll();
		cluster_poll();
		ep_publish();
		break;
	case 5:
		ack_all();
		break;
	case 6:
		peer_poll();
		for (uint32_t i = 0; i < peer_count(); i++)
			peer_resume_rx(peer_at(i));
		break;
	}
	if (fake.used_dead)
		abort();        /* the peer layer used a link it had let go of */
}

static int open_client(int c)
{
	struct ctl_attached_wire a;
	int fds[4];

	if (ep_open(0, getpid(), (uint32_t)c + 1, "fz", (uint32_t)c, 4, &client[c].ep, &a, fds) < 0)
		return -1;
	client[c].bytes = a.region_bytes;
	client[c].map = mmap(NULL, a.region_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fds[0], 0);
	close(fds[0]);
	if (client[c].map == MAP_FAILED)
		return -1;
	ring_attach(&client[c].rx, (uint8_t *)client[c].map + a.rx_off, a.rx_size, 0);
	ring_attach(&client[c].tx, (uint8_t *)client[c].map + a.tx_off, a.tx_size, 0);
	return 0;
}

/* The session layer, with no client ever connecting: the cluster layer tells
 * it when a job becomes ready (a GO), and it must be set up for that
 * (sess_job_ready).  A listening socket on an abstract address the kernel
 * picks. */
static int sessions_up(void)
{
	static const struct sess_events no_events = { 0 };
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa_family_t)) < 0 || listen(fd, 1) < 0 ||
	    sess_init(&conf, 1, fd, NULL, &no_events) < 0)
		return -1;
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const struct loop_hooks hooks = { 0 };
	static int ready;
	struct job *j;

	if (!ready) {
		log_init("fuzz_fwd", -1);               /* quiet */
		if (fake_daemon(&conf, "fuzz", "limits: { ring_bytes = 262144; pending_bytes = 262144; "
				"memory_bytes = 1048576; link_bytes = 1048576; };\n") < 0)
			abort();
		loop_fini();
		frame_fini();
		ready = 1;
	}
	in = data;
	left = size;
	memset(seq_in, 0, sizeof(seq_in));
	fake.used_dead = 0;
	if (loop_init(0, &hooks) < 0)
		abort();
	frame_init(conf.buffer_bytes, conf.link_bytes);
	if (peer_init(&conf, 1, &fake_transport, &fwd_peer_events) < 0 || ep_init(&conf, 1) < 0 ||
	    fwd_init(&conf, 1) < 0 || cluster_init(&conf, 1) < 0 || sessions_up() < 0)
		abort();
	link0 = fake_accept();
	link3 = fake.connected[3];
	if (!fake_handshake_accepted(link0, 0, 1, 0x1000, 0, 0, "fuzz") || !link3 ||
	    !fake_handshake_connected(link3, 3, 1, 0x3333, "fuzz") || open_client(0) < 0 || open_client(1) < 0)
		abort();
	j = client[0].ep->job;
	job_set_id(j, JOB_ID, 0);
	j->ranks[2].node = 3;
	j->ranks[3].node = 2;
	j->ready = 1;
	client[0].ep->ready = client[1].ep->ready = 1;

	while (left)
		one();

	cluster_fini();
	sess_fini();
	for (int c = 0; c < 2; c++) {
		munmap(client[c].map, client[c].bytes);
		ep_close(client[c].ep);
	}
	fwd_fini();
	ep_fini();
	peer_fini();
	frame_fini();
	if (frame_mem_bytes != 0)
		abort();        /* a frame was lost track of */
	fake_free_all();
	loop_fini();
	return 0;
}
