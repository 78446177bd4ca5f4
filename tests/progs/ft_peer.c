/* tests/progs/ft_peer.c - pretends to be a daemon on a link, completes (or
 * fails) the handshake, then misbehaves, to test that the real daemon drops
 * only that link.
 *
 *   ft_peer HOST PORT MODE FROM TO CLUSTER [KEYFILE]
 *
 * Plays node FROM connecting to node TO (FROM < TO).  Without KEYFILE it
 * uses the insecure all-zero key.  Its HELLO claims no frame integrity, so a
 * daemon with a key (and integrity on, its default) refuses it after AUTH:
 * the modes past the handshake are for daemons without a key (frames sealed
 * with a key are tested with ft_mitm and the unit tests).  MODE:
 *   garbage      random bytes instead of a HELLO
 *   version      a HELLO in a frame of wire version WIRE_VERSION + 1 (a
 *                daemon of another release); prints "notice version N"
 *                for the bare frame header the daemon answers with
 *                (daemon/net/link_tcp.c, version_refused), then waits
 *                for the close
 *   wrong-key    HELLO, then an AUTH made with another key
 *   hello-only   HELLO, then nothing: the daemon's handshake timeout ends it
 *   bad-header   full handshake, then a frame header with an unknown kind
 *   bad-item     full handshake, then a DATA frame whose item overruns it
 *   bad-seq      full handshake, then DATA frame 5 where 1 is due
 *   bad-ack      full handshake, then an ACK for frames never sent
 *   bad-node     full handshake, then an item for a node that does not exist
 *   bad-batch    full handshake, then a batch (WIRE_ITEM_BATCH) passing
 *                through to node TO + 1, its header right, its second item
 *                claiming another sender
 *   bad-dense    full handshake, then a dense batch (WIRE_ITEM_DENSE)
 *                passing through to node TO+1 whose count (3) is not its
 *                header's (2)
 *   bad-dense-here  ... for node TO, whose header's count (3) does not fit
 *                its length (two 8-byte items)
 *   good         full handshake, then wait: the daemon must keep the link
 *   coll-stranger  full handshake, then a collective piece of job
 *                $FT_PEER_JOB (generation $FT_PEER_GEN) for a group not
 *                made (yet), from this node, which has no rank of the job;
 *                then as good (the piece is dropped, not the link)
 *   coll-far     the same, but for the job's own group, operation
 *                0xfffffff0, claiming to come from node $FT_PEER_SRC (index
 *                $FT_PEER_FROM among the job's nodes); then as good
 *                ($FT_PEER_SEQ: the frame's sequence number, default 1)
 * Exits 0 if the daemon closed the connection within 10 s (for good: if it
 * kept it 2 s), 1 if not, 2 on setup errors.
 */
#include "../../proto/coll.h"
#include "../../proto/wire.h"

#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static int fd;
static unsigned char key[crypto_auth_KEYBYTES];

static void die(const char *what)
{
	fprintf(stderr, "ft_peer: %s: %s\n", what, strerror(errno));
	exit(2);
}

static void send_frame(uint8_t kind, uint64_t seq, uint64_t ack, const void *body, uint32_t len)
{
	uint8_t buf[sizeof(struct wire_frame_hdr) + 4096];
	struct wire_frame_hdr h = { .version = WIRE_VERSION, .kind = kind, .len = len, .seq = seq, .ack = ack };

	wire_encode_hdr(buf, &h);
	if (len)
		memcpy(buf + sizeof(h), body, len);
	if (send(fd, buf, sizeof(h) + len, MSG_NOSIGNAL) < 0)
		die("send");
}

/* Reads one frame (header and body), 5 s at most. */
static int read_frame(struct wire_frame_hdr *h, uint8_t *body, size_t cap)
{
	uint8_t hb[sizeof(*h)];
	size_t got = 0;

	while (got < sizeof(hb) + (got >= sizeof(hb) ? h->len : 0)) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		ssize_t n;

		if (poll(&p, 1, 5000) <= 0)
			return -1;
		if (got < sizeof(hb))
			n = recv(fd, hb + got, sizeof(hb) - got, 0);
		else
			n = recv(fd, body + got - sizeof(hb), sizeof(hb) + h->len - got, 0);
		if (n <= 0)
			return -1;
		got += (size_t)n;
		if (got == sizeof(hb) && (wire_decode_hdr(hb, h) < 0 || h->len > cap))
			return -1;
	}
	return 0;
}

static int wait_closed(int seconds)
{
	char buf[4096];

	for (int i = 0; i < seconds * 10; i++) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		ssize_t n;

		if (poll(&p, 1, 100) == 0)
			continue;
		n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
		if (n == 0 || (n < 0 && errno == ECONNRESET))
			return 1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *res;
	struct wire_hello mine = { 0 }, theirs;
	uint8_t mine_b[sizeof(mine)], theirs_b[sizeof(mine)], body[4096], mac[WIRE_MAC_BYTES];
	struct wire_frame_hdr h;
	const char *mode;

	if (argc < 7 || sodium_init() < 0)
		return 2;
	mode = argv[3];
	if (argc > 7) {
		FILE *f = fopen(argv[7], "r");
		char hex[80] = "";

		if (!f || !fgets(hex, sizeof(hex), f) ||
		    sodium_hex2bin(key, sizeof(key), hex, strlen(hex), " \n", NULL, NULL) != 0)
			die("key file");
		fclose(f);
	}
	if (getaddrinfo(argv[1], argv[2], &hints, &res) != 0)
		die("getaddrinfo");
	fd = socket(res->ai_family, SOCK_STREAM, 0);
	if (fd < 0 || connect(fd, res->ai_addr, res->ai_addrlen) < 0)
		die("connect");
	freeaddrinfo(res);

	if (strcmp(mode, "version") == 0) {
		uint8_t hb[sizeof(h)];
		size_t got = 0;

		mine.magic = WIRE_MAGIC;
		mine.version = WIRE_VERSION + 1;
		mine.flags = WIRE_HELLO_INSECURE;
		mine.from = (uint32_t)atoi(argv[4]);
		mine.to = (uint32_t)atoi(argv[5]);
		mine.incarnation = 1;
		mine.cluster_len = (uint8_t)strlen(argv[6]);
		memcpy(mine.cluster, argv[6], mine.cluster_len);
		wire_encode_hello(mine_b, &mine);
		h = (struct wire_frame_hdr){ .version = WIRE_VERSION + 1, .kind = WIRE_HELLO, .len = sizeof(mine_b) };
		wire_encode_hdr(body, &h);
		memcpy(body + sizeof(h), mine_b, sizeof(mine_b));
		if (send(fd, body, sizeof(h) + sizeof(mine_b), MSG_NOSIGNAL) < 0)
			die("send");
		while (got < sizeof(hb)) {
			struct pollfd p = { .fd = fd, .events = POLLIN };
			ssize_t n;

			if (poll(&p, 1, 5000) <= 0 || (n = recv(fd, hb + got, sizeof(hb) - got, 0)) <= 0)
				break;
			got += (size_t)n;
		}
		if (got == sizeof(hb))
			printf("notice version %u\n", wire_hdr_version(hb));
		fflush(stdout);
		return wait_closed(10) ? 0 : 1;
	}
	if (strcmp(mode, "garbage") == 0) {
		randombytes_buf(body, 512);
		send(fd, body, 512, MSG_NOSIGNAL);
		return wait_closed(10) ? 0 : 1;
	}
	mine.magic = WIRE_MAGIC;
	mine.version = WIRE_VERSION;
	mine.flags = argc > 7 ? 0 : WIRE_HELLO_INSECURE;
	mine.from = (uint32_t)atoi(argv[4]);
	mine.to = (uint32_t)atoi(argv[5]);
	mine.incarnation = 1234567;
	mine.cluster_len = (uint8_t)strlen(argv[6]);
	memcpy(mine.cluster, argv[6], mine.cluster_len);
	randombytes_buf(mine.nonce, sizeof(mine.nonce));
	wire_encode_hello(mine_b, &mine);
	send_frame(WIRE_HELLO, 0, 0, mine_b, sizeof(mine_b));
	if (read_frame(&h, theirs_b, sizeof(theirs_b)) < 0 || h.kind != WIRE_HELLO ||
	    wire_decode_hello(theirs_b, h.len, &theirs) < 0) {
		fprintf(stderr, "ft_peer: no HELLO from the daemon\n");
		return 2;
	}
	if (read_frame(&h, body, sizeof(body)) < 0 || h.kind != WIRE_AUTH) {
		fprintf(stderr, "ft_peer: no AUTH from the daemon\n");
		return 2;
	}
	if (strcmp(mode, "hello-only") == 0)
		return wait_closed(10) ? 0 : 1;
	{
		uint8_t msg[1 + 2 * sizeof(mine_b)];

		msg[0] = 'I';
		memcpy(msg + 1, mine_b, sizeof(mine_b));
		memcpy(msg + 1 + sizeof(mine_b), theirs_b, sizeof(theirs_b));
		if (strcmp(mode, "wrong-key") == 0)
			key[0] ^= 1;
		crypto_auth(mac, msg, sizeof(msg), key);
	}
	send_frame(WIRE_AUTH, 0, 0, mac, sizeof(mac));
	if (strcmp(mode, "wrong-key") == 0)
		return wait_closed(10) ? 0 : 1;
	if (strcmp(mode, "good") == 0)
		return wait_closed(2) ? 1 : 0;
	if (strcmp(mode, "coll-stranger") == 0 || strcmp(mode, "coll-far") == 0) {
		int far = strcmp(mode, "coll-far") == 0;
		const char *e_job = getenv("FT_PEER_JOB"), *e_gen = getenv("FT_PEER_GEN");
		const char *e_src = getenv("FT_PEER_SRC"), *e_from = getenv("FT_PEER_FROM");
		struct wire_coll_piece pc = { .job = e_job ? (uint32_t)atoi(e_job) : 0,
					      .gen = e_gen ? (uint32_t)atoi(e_gen) : 0,
					      .op = far ? 0xfffffff0u : 1, .msg = 0,
					      .from = far && e_from ? (uint32_t)atoi(e_from) : 0,
					      .group = far ? 0 : 0xdeadbeefu, .offset = 0, .total = 8, .kind = 1 };
		struct wire_item it = { .len = sizeof(pc) + 8, .gen = (uint8_t)pc.gen, .node = mine.to, .job = pc.job,
					.dst = WIRE_DST_COLL,
					.src = far && e_src ? (uint32_t)atoi(e_src) : mine.from };

		memset(body, 0, sizeof(body));
		memcpy(body, &it, sizeof(it));
		wire_coll_piece_encode(body + sizeof(it), &pc);
		/* the daemon keeps a peer's sequence numbers across its
		 * connections: a second run says which frame is due */
		send_frame(WIRE_DATA, getenv("FT_PEER_SEQ") ? (uint64_t)atoi(getenv("FT_PEER_SEQ")) : 1, 0, body,
			   (uint32_t)wire_item_footprint(it.len));
		return wait_closed(2) ? 1 : 0;
	}

	memset(body, 0, sizeof(body));
	if (strcmp(mode, "bad-header") == 0) {
		uint8_t raw[24] = { WIRE_VERSION, 99 };

		send(fd, raw, sizeof(raw), MSG_NOSIGNAL);
	} else if (strcmp(mode, "bad-item") == 0) {
		struct wire_item it = { .len = 200, .node = mine.to, .job = 1 };

		memcpy(body, &it, sizeof(it));              /* claims 200 payload bytes, has 8 */
		send_frame(WIRE_DATA, 1, 0, body, sizeof(it) + 8);
	} else if (strcmp(mode, "bad-seq") == 0) {
		struct wire_item it = { .len = 8, .node = mine.to, .job = 1 };

		memcpy(body, &it, sizeof(it));
		send_frame(WIRE_DATA, 5, 0, body, sizeof(it) + 8);
	} else if (strcmp(mode, "bad-ack") == 0) {
		send_frame(WIRE_ACK, 0, 1000, NULL, 0);
	} else if (strcmp(mode, "bad-node") == 0) {
		struct wire_item it = { .len = 8, .node = 1u << 30, .job = 1 };

		memcpy(body, &it, sizeof(it));
		send_frame(WIRE_DATA, 1, 0, body, sizeof(it) + 8);
	} else if (strcmp(mode, "bad-batch") == 0) {
		/* Two 8-byte items of job 4097 from rank 0 to rank 1. */
		struct wire_item it = { .len = 48, .flags = WIRE_ITEM_BATCH, .channel = 2, .node = mine.to + 1,
					.job = 4097, .dst = 1, .src = 0 };
		struct proto_rec r = { .len = 8, .kind = PROTO_REC_ITEM, .dst = 1, .src = 0 };

		memcpy(body, &it, sizeof(it));
		memcpy(body + sizeof(it), &r, sizeof(r));
		r.src = 7;
		memcpy(body + sizeof(it) + 24, &r, sizeof(r));
		send_frame(WIRE_DATA, 1, 0, body, sizeof(it) + 48);
	} else if (strcmp(mode, "bad-dense") == 0 || strcmp(mode, "bad-dense-here") == 0) {
		/* Two 8-byte items of job 4097 from rank 0 to rank 1. */
		int here = strcmp(mode, "bad-dense-here") == 0;
		struct wire_item it = { .len = 8 + 16, .flags = WIRE_ITEM_DENSE, .channel = here ? 2 : 3,
					.node = mine.to + !here, .job = 4097, .dst = 1, .src = 0 };
		uint64_t dh = 8 | (uint64_t)(here ? 3 : 2) << 32;

		memcpy(body, &it, sizeof(it));
		memcpy(body + sizeof(it), &dh, 8);
		memset(body + sizeof(it) + 8, 0x42, 16);
		send_frame(WIRE_DATA, 1, 0, body, sizeof(it) + 8 + 16);
	} else {
		fprintf(stderr, "ft_peer: unknown mode %s\n", mode);
		return 2;
	}
	return wait_closed(10) ? 0 : 1;
}
