/* tests/progs/ft_mitm.c - a host on the path between two daemons, without the
 * cluster key: a TCP proxy that relays a link frame by frame and attacks it.
 *
 *   ft_mitm LISTEN_PORT TARGET_PORT ATTACK[,ATTACK...] [DELAY_MS]
 *
 * Daemon A (the connecting end) is configured to reach daemon B at
 * 127.0.0.1:LISTEN_PORT; each connection is relayed to 127.0.0.1:TARGET_PORT.
 * Every connection on which 20 DATA frames went from A to B gets the next
 * attack of the list (one per connection; after the last one, connections are
 * relayed faithfully).  An attack whose connection ended before it could
 * happen (ack needs 3 more DATA frames, and a job may end first; the daemon
 * then gives up on the link) goes to the next connection again:
 *
 *   flip     a bit of a DATA frame's body A->B changes
 *   hdr      the ack in a frame B->A is raised to the last frame A sent
 *            (acknowledging frames B may not have: they would be freed)
 *   ack      3 DATA frames A->B are held back, and B->A goes a made-up ACK
 *            frame for them (then A would free frames B never got)
 *   inject   a made-up DATA frame A->B with the next sequence number and an
 *            item for the job and rank of the frame it precedes
 *   step     the same with a STEP control item (job 0) for that job
 *   replay   a DATA frame A->B goes twice
 *
 * ATTACK none attacks nothing; ATTACK dribble attacks nothing either, but
 * relays A->B in pieces of random sizes (half of them 1-64 bytes, half up to
 * 40000), each its own TCP segment, 20 us apart: B's daemon reads frames,
 * and large items' pieces, split anywhere (the summary counts the segments).  With DELAY_MS, every frame B->A reaches A that
 * many milliseconds after it came (in order): a link slower one way than the
 * others, to see that nothing depends on which of two routes is faster.
 *
 * Made-up frames carry the flags the link's frames have and, with a tag, 16
 * random bytes for it.  Prints a line per attack ("attack N NAME done on
 * connection C"), and on SIGTERM or SIGINT a summary: "relayed A2B B2A frames,
 * plaintext P of D DATA frames" (DATA frames whose body reads as items: with
 * encryption there should be none).
 */
#include "../../proto/wire.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define TRIGGER 20              /* DATA frames A->B before a connection is attacked */
#define HOLD_BACK 3             /* the ack attack */
#define MAX_CONNS 8
#define OUT_HIGH (4u << 20)     /* stop reading a side while the other's output is above this */

struct buf {
	uint8_t *p;
	size_t len, cap;
};

struct dir {                    /* one direction of a connection */
	int from, to;           /* fds */
	struct buf in, out;
};

/* Frames B->A on their way (DELAY_MS): the bytes in order, and when each
 * frame is due. */
struct delayed {
	struct buf bytes;
	struct {
		uint64_t due_ms;
		size_t len;
	} *q;
	size_t first, n, cap;
};

struct conn {
	int used, id;
	struct dir ab, ba;      /* A->B, B->A */
	struct delayed late;    /* B->A frames not due yet */
	int attack;             /* index into the list, -1: none */
	int done;               /* the attack happened */
	uint64_t data_ab;       /* DATA frames A->B */
	uint64_t last_seq_ab;   /* the last DATA frame A->B */
	uint16_t flags;         /* the link's frame flags, as seen */
	int holding;            /* ack attack: frames still to hold back */
	uint64_t held_seq;
};

static struct conn conns[MAX_CONNS];
static char *attacks[16];
static int nattacks, next_attack, nconns;
static int redo[16], nredo;     /* attacks whose connection ended first: to be made again */
static volatile sig_atomic_t stop;
static uint64_t relayed_ab, relayed_ba, data_frames, plaintext;
static uint64_t delay_ms;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static void die(const char *what)
{
	fprintf(stderr, "ft_mitm: %s: %s\n", what, strerror(errno));
	exit(2);
}

static void put(struct buf *b, const void *p, size_t n)
{
	if (!n)
		return;
	if (b->cap - b->len < n) {
		b->cap = (b->len + n) * 2;
		b->p = realloc(b->p, b->cap);
		if (!b->p)
			die("realloc");
	}
	memcpy(b->p + b->len, p, n);
	b->len += n;
}

static void consume(struct buf *b, size_t n)
{
	memmove(b->p, b->p + n, b->len - n);
	b->len -= n;
}

static uint64_t now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000 + (uint64_t)t.tv_nsec / 1000000;
}

/* A frame B->A goes on, now or DELAY_MS later. */
static void put_ba(struct conn *c, const uint8_t *f, size_t n)
{
	struct delayed *l = &c->late;

	if (!delay_ms) {
		put(&c->ba.out, f, n);
		return;
	}
	if (l->first + l->n == l->cap) {
		if (l->n)
			memmove(l->q, l->q + l->first, l->n * sizeof(*l->q));
		l->first = 0;
		if (l->n == l->cap) {
			l->cap = l->cap ? 2 * l->cap : 64;
			l->q = realloc(l->q, l->cap * sizeof(*l->q));
			if (!l->q)
				die("realloc");
		}
	}
	l->q[l->first + l->n].due_ms = now_ms() + delay_ms;
	l->q[l->first + l->n++].len = n;
	put(&l->bytes, f, n);
}

/* The frames due by now (all of them if all) go on.  Returns the ms until
 * the next one is due, or -1. */
static int release_due(struct conn *c, int all)
{
	struct delayed *l = &c->late;
	uint64_t now = now_ms();

	while (l->n && (all || l->q[l->first].due_ms <= now)) {
		put(&c->ba.out, l->bytes.p, l->q[l->first].len);
		consume(&l->bytes, l->q[l->first].len);
		l->first++;
		l->n--;
	}
	return l->n ? (int)(l->q[l->first].due_ms - now) : -1;
}

/* A made-up frame of kind with the link's flags: header, body, a random tag. */
static void forge(struct buf *out, uint16_t flags, uint8_t kind, uint64_t seq, uint64_t ack, const void *body,
		  uint32_t len)
{
	uint32_t tag = flags & WIRE_FRAME_MAC ? WIRE_TAG_BYTES : 0;
	struct wire_frame_hdr h = { .version = WIRE_VERSION, .kind = kind, .flags = flags, .len = len + tag,
				    .seq = seq, .ack = ack };
	uint8_t hb[sizeof(h)], t[WIRE_TAG_BYTES];

	for (uint32_t i = 0; i < tag; i++)
		t[i] = (uint8_t)rand();
	wire_encode_hdr(hb, &h);
	put(out, hb, sizeof(hb));
	put(out, body, len);
	put(out, t, tag);
}

/* The first item header of a DATA body in the clear, or a zeroed one. */
static struct wire_item first_item(const uint8_t *body, uint32_t len)
{
	struct wire_item it = { 0 };
	const void *payload;
	size_t off = 0;

	if (wire_next_item(body, len, &off, &it, &payload) != 1)
		memset(&it, 0, sizeof(it));
	return it;
}

static int reads_as_items(const uint8_t *body, uint32_t len)
{
	struct wire_item it;
	const void *payload;
	size_t off = 0;
	int ret, n = 0;

	while ((ret = wire_next_item(body, len, &off, &it, &payload)) == 1)
		n++;
	return ret == 0 && n > 0;
}

static void attacked(struct conn *c)
{
	c->done = 1;
	printf("attack %d %s done on connection %d\n", c->attack + 1, attacks[c->attack], c->id);
	fflush(stdout);
}

/* A whole frame A->B (f, n bytes) goes on, or is attacked. */
static void frame_ab(struct conn *c, uint8_t *f, size_t n)
{
	struct wire_frame_hdr h;
	const char *a;

	if (wire_decode_hdr(f, &h) < 0) {
		put(&c->ab.out, f, n);
		return;
	}
	relayed_ab++;
	if (h.kind != WIRE_DATA) {
		put(&c->ab.out, f, n);
		return;
	}
	{
		uint32_t tag = h.flags & WIRE_FRAME_MAC ? WIRE_TAG_BYTES : 0;

		data_frames++;
		plaintext += reads_as_items(f + sizeof(h), h.len - tag);
	}
	c->flags = h.flags & WIRE_FRAME_SECURITY;     /* not URGENT: only DATA may be */
	c->data_ab++;
	c->last_seq_ab = h.seq;
	if (c->attack < 0 && c->data_ab >= TRIGGER) {
		if (nredo)
			c->attack = redo[--nredo];
		else if (next_attack < nattacks)
			c->attack = next_attack++;
	}
	a = c->attack >= 0 && !c->done ? attacks[c->attack] : "";
	if (c->holding) {               /* ack: held back, never sent */
		c->held_seq = h.seq;
		if (--c->holding == 0) {
			forge(&c->ba.out, c->flags, WIRE_ACK, 0, c->held_seq, NULL, 0);
			attacked(c);
		}
		return;
	}
	if (!strcmp(a, "flip")) {
		size_t at = sizeof(h) + 24 + 40 < n - WIRE_TAG_BYTES ? sizeof(h) + 24 + 40 : sizeof(h) + 4;

		f[at] ^= 0x08;
		put(&c->ab.out, f, n);
		attacked(c);
	} else if (!strcmp(a, "ack")) {
		c->holding = HOLD_BACK - 1;
		c->held_seq = h.seq;
	} else if (!strcmp(a, "inject") || !strcmp(a, "step")) {
		uint32_t tag = h.flags & WIRE_FRAME_MAC ? WIRE_TAG_BYTES : 0;
		struct wire_item real = first_item(f + sizeof(h), h.len - tag), it = real;
		uint8_t body[sizeof(struct wire_item) + 128], payload[128];
		uint32_t plen;

		memset(payload, 0xee, sizeof(payload));
		if (!strcmp(a, "step")) {
			struct wire_ctl_step st = { .job = real.job, .step = real.channel, .gen = real.gen & WIRE_GEN_MASK };

			ssize_t r = wire_ctl_encode_step(payload, sizeof(payload), &st);

			plen = r > 0 && r <= 64 ? (uint32_t)r : 12;
			it = (struct wire_item){ .len = plen, .node = real.node, .dst = WIRE_CTL_STEP };
		} else {
			plen = 48;
			it.len = plen;
		}
		wire_encode_item(body, &it, payload);
		/* It takes the number of the real frame, which then looks
		 * like a duplicate. */
		forge(&c->ab.out, h.flags, WIRE_DATA, h.seq, h.ack, body, (uint32_t)wire_item_footprint(plen));
		put(&c->ab.out, f, n);
		attacked(c);
	} else if (!strcmp(a, "replay")) {
		put(&c->ab.out, f, n);
		put(&c->ab.out, f, n);
		attacked(c);
	} else {
		put(&c->ab.out, f, n);
	}
}

/* A whole frame B->A. */
static void frame_ba(struct conn *c, uint8_t *f, size_t n)
{
	struct wire_frame_hdr h;

	relayed_ba++;
	if (c->attack >= 0 && !c->done && !strcmp(attacks[c->attack], "hdr") && wire_decode_hdr(f, &h) == 0 &&
	    (h.kind == WIRE_DATA || h.kind == WIRE_ACK) && c->last_seq_ab > h.ack) {
		wire_set_ack(f, c->last_seq_ab);
		put_ba(c, f, n);
		attacked(c);
		return;
	}
	put_ba(c, f, n);
}

/* Whole frames in d->in go on. */
static void parse(struct conn *c, struct dir *d)
{
	for (;;) {
		struct wire_frame_hdr h;
		size_t n;

		if (d->in.len < sizeof(h))
			return;
		if (wire_decode_hdr(d->in.p, &h) < 0) {
			/* Not a frame: relay the rest as it is. */
			put(&d->out, d->in.p, d->in.len);
			d->in.len = 0;
			return;
		}
		n = sizeof(h) + h.len;
		if (d->in.len < n)
			return;
		if (d == &c->ab)
			frame_ab(c, d->in.p, n);
		else
			frame_ba(c, d->in.p, n);
		consume(&d->in, n);
	}
}

static void close_conn(struct conn *c)
{
	if (c->attack >= 0 && !c->done && nredo < (int)(sizeof(redo) / sizeof(redo[0])))
		redo[nredo++] = c->attack;
	free(c->late.bytes.p);
	free(c->late.q);
	close(c->ab.from);
	close(c->ba.from);
	free(c->ab.in.p);
	free(c->ab.out.p);
	free(c->ba.in.p);
	free(c->ba.out.p);
	memset(c, 0, sizeof(*c));
}

static int dribble;     /* ATTACK dribble */
static uint64_t dribbled;       /* ... the segments it sent A->B */

/* Sends what d holds, as far as its socket takes it (ab: d is A->B). */
static int flush_out(struct dir *d, int ab)
{
	while (d->out.len) {
		size_t n = d->out.len;
		ssize_t w;

		if (dribble && ab) {
			size_t k = rand() % 2 ? 1 + (size_t)rand() % 64 : 1 + (size_t)rand() % 40000;

			n = k < n ? k : n;
		}
		w = send(d->to, d->out.p, n, MSG_DONTWAIT | MSG_NOSIGNAL);
		if (w < 0)
			return errno == EAGAIN ? 0 : -1;
		consume(&d->out, (size_t)w);
		dribbled += dribble && ab;
		if (dribble && ab && d->out.len)
			nanosleep(&(struct timespec){ .tv_nsec = 20000 }, NULL);
	}
	return 0;
}

static int connect_to(uint16_t port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port),
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	return fd;
}

int main(int argc, char **argv)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int lfd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
	uint16_t target;
	char *list, *tok, *save;

	if (argc < 4) {
		fprintf(stderr, "usage: ft_mitm LISTEN_PORT TARGET_PORT ATTACK[,ATTACK...] [DELAY_MS]\n");
		return 2;
	}
	if (argc > 4)
		delay_ms = (uint64_t)atoi(argv[4]);
	sa.sin_port = htons((uint16_t)atoi(argv[1]));
	target = (uint16_t)atoi(argv[2]);
	list = strdup(argv[3]);
	for (tok = strtok_r(list, ",", &save); tok && nattacks < 16; tok = strtok_r(NULL, ",", &save))
		if (!strcmp(tok, "dribble"))
			dribble = 1;
		else if (strcmp(tok, "none"))
			attacks[nattacks++] = tok;
	srand((unsigned)getpid());
	signal(SIGTERM, on_signal);
	signal(SIGINT, on_signal);
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (lfd < 0 || bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(lfd, 8) < 0)
		die("listen");
	while (!stop) {
		struct pollfd pf[1 + 2 * MAX_CONNS];
		struct conn *who[1 + 2 * MAX_CONNS];
		int np = 1, timeout = 200;
		/* (Dribbling, less ahead: each piece moves what is left.) */
		size_t high = dribble ? 256u << 10 : OUT_HIGH;

		pf[0] = (struct pollfd){ .fd = lfd, .events = POLLIN };
		for (int i = 0; i < MAX_CONNS; i++) {
			struct conn *c = &conns[i];

			if (!c->used)
				continue;
			{
				int due = release_due(c, 0);

				if (due >= 0 && due < timeout)
					timeout = due;
			}
			pf[np] = (struct pollfd){ .fd = c->ab.from, .events = (c->ab.out.len < high ? POLLIN : 0) |
						  (c->ba.out.len ? POLLOUT : 0) };
			who[np++] = c;
			pf[np] = (struct pollfd){ .fd = c->ba.from, .events = (c->ba.out.len < OUT_HIGH ? POLLIN : 0) |
						  (c->ab.out.len ? POLLOUT : 0) };
			who[np++] = c;
		}
		if (poll(pf, (nfds_t)np, timeout) < 0) {
			if (errno == EINTR)
				continue;
			die("poll");
		}
		if (pf[0].revents & POLLIN) {
			int a = accept(lfd, NULL, NULL), b = a >= 0 ? connect_to(target) : -1;
			struct conn *c = NULL;

			for (int i = 0; i < MAX_CONNS && !c; i++)
				if (!conns[i].used)
					c = &conns[i];
			if (a < 0 || b < 0 || !c) {
				if (a >= 0)
					close(a);
				if (b >= 0)
					close(b);
			} else {
				memset(c, 0, sizeof(*c));
				c->used = 1;
				c->id = ++nconns;
				c->attack = -1;
				c->ab = (struct dir){ .from = a, .to = b };
				if (dribble)    /* each piece a segment of its own */
					setsockopt(b, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
				c->ba = (struct dir){ .from = b, .to = a };
			}
		}
		for (int i = 1; i < np; i++) {
			struct conn *c = who[i];
			struct dir *d = pf[i].fd == c->ab.from ? &c->ab : &c->ba;
			uint8_t tmp[65536];
			ssize_t n;

			if (!c->used || !pf[i].revents)
				continue;
			if (pf[i].revents & (POLLIN | POLLHUP | POLLERR)) {
				n = recv(d->from, tmp, sizeof(tmp), MSG_DONTWAIT);
				if (n == 0 || (n < 0 && errno != EAGAIN)) {
					/* One end went: what it sent still goes on, then both close. */
					release_due(c, 1);
					flush_out(&c->ab, 1);
					flush_out(&c->ba, 0);
					close_conn(c);
					continue;
				}
				if (n > 0) {
					put(&d->in, tmp, (size_t)n);
					parse(c, d);
				}
			}
			if (flush_out(&c->ab, 1) < 0 || flush_out(&c->ba, 0) < 0)
				close_conn(c);
		}
	}
	printf("relayed %llu %llu frames, plaintext %llu of %llu DATA frames, dribbled %llu segments\n",
	       (unsigned long long)relayed_ab, (unsigned long long)relayed_ba, (unsigned long long)plaintext,
	       (unsigned long long)data_frames, (unsigned long long)dribbled);
	free(list);     /* (attacks[] point into it) */
	return 0;
}
