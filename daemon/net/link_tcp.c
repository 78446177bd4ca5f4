/* daemon/net/link_tcp.c - TCP links; see link.h for the contract.
 *
 * Ownership: a link (struct link_tcp) is allocated when a connection starts
 * or is accepted.  It ends in tcp_end(), from tcp_fail() (which tells the
 * peer layer) or ops->close(): the socket is closed and the link marked dead
 * there, and its memory is buried (loop_bury), because the function that
 * ended it may be deep inside on_io or parse with the link on its stack.
 * After every call into the peer layer those check l.dead and return.
 *
 * Sealing (link.h).  Control frames are sealed as they are queued (in cbuf,
 * which goes out before the sequenced frames not yet written).  Sequenced
 * frames are written straight from their memory and sealed in place when
 * they first enter a write (sealed_seq says how far), unless the link
 * encrypts: then whole frames are sealed into cbuf behind the control frames
 * (tcp_stage) and count as written from there on, so that a frame keeps its
 * plaintext for a resend on another link.
 */
#include "link.h"
#include "../core/conf.h"
#include "../core/log.h"
#include "../core/loop.h"

#include <assert.h>
#include <endian.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#define RBUF_START   (256u * 1024)
#define CBUF_BYTES   1024       /* control frames: two HELLOs and an AUTH fit */
#define STAGE_BYTES  (256u * 1024)      /* encrypted frames sealed ahead of the socket */
#define IOV_MAX_TCP  64
/* Before a connection has authenticated it holds only this much receive
 * buffer (a HELLO and an AUTH fit), and takes no larger frame: anyone who can
 * reach the port can open connections. */
#define RBUF_HANDSHAKE 1024
/* Accepted connections not authenticated yet; more are closed at once,
 * and no more than MAX_UNAUTH_PER_HOST from one address.  They must say
 * HELLO within 1 s and authenticate within 5 s (peer.c).  When all slots are
 * taken, a connection from the address of a node of the cluster takes the
 * slot of the oldest one from elsewhere: strangers cannot keep a node's
 * peers out by holding the slots.  When its own address has all its slots,
 * it takes the oldest of those: any local user of that node can connect
 * from its address, and must not keep its daemon out either. */
#define MAX_UNAUTH   16
#define MAX_UNAUTH_PER_HOST 8
/* Accepting pauses this long when the process is out of file descriptors
 * (the listening socket would otherwise stay readable and the loop spin). */
#define ACCEPT_BACKOFF_NS (100ull * 1000000u)

struct link_tcp {
	struct link l;
	int fd;
	struct loop_watch w;
	uint32_t events;        /* what w currently watches */
	int paused;
	char addr[80];          /* the other end, for logs */
	uint8_t *rbuf;          /* received bytes; frames are parsed in place */
	size_t rcap, rlen, roff;
	int peek;               /* after a piece (is_piece): read the next frame's head first */
	size_t rest;            /* bytes missing of a piece rbuf ends in: read no further */
	int pieces;             /* the last piece offered goes in place, now or later (steer) */
	uint8_t *cbuf;                  /* sealed control frames (and encrypted frames) to go out */
	size_t ccap, clen, coff;
	uint64_t sealed_seq;            /* sequenced frames up to this one are sealed on this link */
	struct link_tcp *prev, *next;   /* every live link (tcp.links) */
	struct loop_grave grave;
};

static const struct link_ops tcp_ops;
static void set_congestion(struct link_tcp *t);

static struct {
	int lfd;                        /* the peer port */
	struct loop_watch lw;
	struct loop_timer accept_retry; /* out of fds: accepting resumes */
	const struct link_events *ev;   /* the peer layer's, for every link */
	const struct conf *conf;
	const char *cc;                 /* congestion control set on every link, or NULL (the system's) */
	struct link_tcp *links;         /* live ones, newest first */
} tcp = { .lfd = -1 };

static void set_events(struct link_tcp *t)
{
	/* Paused, it reads nothing, but must still notice the other end
	 * going away (a peer that dies while we hold its frames). */
	uint32_t ev = t->paused ? EPOLLRDHUP : EPOLLIN, off;

	if (t->l.state == LINK_CONNECTING || t->clen > t->coff || tcp.ev->tx_first(&t->l, &off))
		ev |= EPOLLOUT;
	if (ev != t->events && loop_mod(&t->w, ev) == 0)
		t->events = ev;
}

static void tcp_free(struct loop_grave *g)
{
	struct link_tcp *t = (struct link_tcp *)((char *)g - offsetof(struct link_tcp, grave));

	free(t->rbuf);
	free(t->cbuf);
	free(t);
}

/* The link dies: no more events, the socket closes; the loop frees it. */
static void tcp_end(struct link_tcp *t)
{
	if (t->prev)
		t->prev->next = t->next;
	else
		tcp.links = t->next;
	if (t->next)
		t->next->prev = t->prev;
	t->l.dead = 1;
	loop_del(&t->w);
	close(t->fd);
	t->fd = -1;
	loop_bury(&t->grave, tcp_free);
}

/* Ends the connection and tells the peer layer (once). */
static void tcp_fail(struct link_tcp *t, const char *why)
{
	if (t->l.dead)
		return;
	tcp_end(t);
	tcp.ev->down(&t->l, why);
}

static void tcp_close(struct link *l)
{
	struct link_tcp *t = (struct link_tcp *)l;

	if (!l->dead)
		tcp_end(t);
}

/* Room for n more bytes at the end of cbuf.  0 or -ENOMEM. */
static int cbuf_room(struct link_tcp *t, size_t n)
{
	uint8_t *b;

	if (t->ccap - t->clen >= n)
		return 0;
	if (t->coff) {
		memmove(t->cbuf, t->cbuf + t->coff, t->clen - t->coff);
		t->clen -= t->coff;
		t->coff = 0;
	}
	if (t->ccap - t->clen >= n)
		return 0;
	b = realloc(t->cbuf, t->clen + n);
	if (!b)
		return -ENOMEM;
	t->cbuf = b;
	t->ccap = t->clen + n;
	return 0;
}

/* An encrypting link: seals whole sequenced frames into cbuf, up to about
 * STAGE_BYTES ahead of the socket; they count as written.  0 or -ENOMEM. */
static int tcp_stage(struct link_tcp *t)
{
	struct frame *f;
	uint32_t off;

	while (t->clen - t->coff < STAGE_BYTES && (f = tcp.ev->tx_first(&t->l, &off))) {
		assert(off == 0 && !f->lent);  /* only whole frames of their own are staged */
		if (cbuf_room(t, f->len) < 0)
			return -ENOMEM;
		tcp.ev->tx_seal(&t->l, f->data, t->cbuf + t->clen);
		t->clen += f->len;
		tcp.ev->tx_done(&t->l, f->len);
	}
	return 0;
}

/* Writes control frames, then sequenced frames, as far as the socket takes them. */
static int tcp_write(struct link_tcp *t)
{
	for (;;) {
		struct iovec iov[IOV_MAX_TCP];
		struct frame *f;
		int n = 0, full = 0;
		uint32_t off = 0;
		size_t want = 0;
		ssize_t w;

		if (t->l.encrypt && tcp_stage(t) < 0)
			return -ENOMEM;
		if (t->clen > t->coff) {
			iov[n].iov_base = t->cbuf + t->coff;
			iov[n].iov_len = t->clen - t->coff;
			want += iov[n++].iov_len;
		}
		f = t->l.encrypt ? NULL : tcp.ev->tx_first(&t->l, &off);
		/* (Room for two pieces of each: a frame with lent bytes.) */
		for (; f && n < IOV_MAX_TCP - 1; f = f->next, off = 0) {
			const uint8_t *p;
			uint32_t k;

			if (f->seq > t->sealed_seq) {
				/* Untagged if it has lent bytes: this stamps
				 * the ack into its header only. */
				tcp.ev->tx_seal(&t->l, f->data, f->data);
				t->sealed_seq = f->seq;
			}
			while ((k = frame_bytes_at(f, off, &p)) > 0) {
				iov[n].iov_base = (void *)p;
				iov[n].iov_len = k;
				want += k;
				off += k;
				n++;
			}
		}
		if (n == 0)
			return 0;
		w = writev(t->fd, iov, n);
		if (w < 0) {
			if (errno == EAGAIN || errno == EINTR)
				return 0;
			return -errno;
		}
		if ((size_t)w < want)
			full = 1;
		if (t->clen > t->coff) {
			size_t c = t->clen - t->coff < (size_t)w ? t->clen - t->coff : (size_t)w;

			t->coff += c;
			w -= (ssize_t)c;
			if (t->coff == t->clen)
				t->clen = t->coff = 0;
		}
		if (w > 0)
			tcp.ev->tx_done(&t->l, (size_t)w);
		if (full)
			return 0;       /* the socket takes no more now */
	}
}

/* Frames of at least this many bytes are offered to be received in place
 * (link.h "Receiving"): a large item's pieces. */
#define STEER_FRAME_MIN (16u * 1024)

/* Whether the frame h, its first WIRE_STEER_HEAD bytes at p, is a piece of
 * a large item: one item, the whole body, of at least STEER_FRAME_MIN bytes
 * in all, untagged, on an up link.  Only such frames are offered in place
 * (the peer layer decides), and only around pieces that go in place, now or
 * later (t->pieces), does the link read frame by frame (peek, rest): a full
 * frame of small items, or a piece that only passes through this node or
 * belongs to a collective, is read with whatever follows it. */
static int is_piece(const struct link_tcp *t, const struct wire_frame_hdr *h, const uint8_t *p)
{
	uint32_t ilen;

	if (t->l.state != LINK_UP || h->kind != WIRE_DATA || (h->flags & WIRE_FRAME_MAC) ||
	    sizeof(*h) + h->len < STEER_FRAME_MIN)
		return 0;
	memcpy(&ilen, p + sizeof(*h), sizeof(ilen));   /* struct wire_item's len */
	return wire_item_footprint(le32toh(ilen)) == h->len;
}

/* The frame at roff, header h, need bytes in all, is not all in rbuf: if
 * the socket holds the rest and the peer layer says where it goes, reads
 * it there.  Returns 1 (taken), 2 (not now: it comes through rbuf, and the
 * next piece may go in place), 0 (not: it comes through rbuf, and so do
 * pieces like it), -ECANCELED (the link died meanwhile) or another -errno:
 * the caller ends the link. */
static int steer(struct link_tcp *t, const struct wire_frame_hdr *h, size_t need)
{
	size_t have = t->rlen - t->roff, rest = need - have, done = 0, more = 0;
	const uint8_t *head = t->rbuf + t->roff;
	uint8_t next[WIRE_STEER_HEAD];
	int avail = 0, later, ret;
	uint8_t *to;

	/* The peer layer first (no system call for a frame it would not take
	 * in place: with frame integrity, none), then whether all of it is
	 * there; if not, the reservation is undone and the frame comes
	 * through rbuf. */
	to = tcp.ev->steer(&t->l, h, head, &later);
	t->pieces = to || later;
	if (!to)
		return later ? 2 : 0;
	if (ioctl(t->fd, FIONREAD, &avail) < 0 || avail < 0 || (size_t)avail < rest) {
		tcp.ev->steered(&t->l, h, head, 0);
		return 2;
	}
	memcpy(to, head + WIRE_STEER_HEAD, have - WIRE_STEER_HEAD);
	to += have - WIRE_STEER_HEAD;
	/* The rest, and the next frame's head with it: one system call per
	 * piece when pieces follow each other. */
	while (done < rest) {
		struct iovec iov[2] = { { to + done, rest - done }, { next, sizeof(next) } };
		ssize_t n = readv(t->fd, iov, 2);

		if (n > 0) {
			if ((size_t)n > rest - done) {
				more = (size_t)n - (rest - done);
				n = (ssize_t)(rest - done);
			}
			done += (size_t)n;
		} else if (n < 0 && errno == EINTR) {
			continue;
		} else {
			/* FIONREAD said it was there: a connection that broke
			 * meanwhile. */
			ret = n == 0 ? -ECONNRESET : errno == EAGAIN ? -EIO : -errno;
			tcp.ev->steered(&t->l, h, head, 0);
			return ret;
		}
	}
	ret = tcp.ev->steered(&t->l, h, head, 1);
	if (t->l.dead)
		return -ECANCELED;
	if (ret < 0)
		return ret;
	t->l.frames_in++;
	/* The frame began at roff and rbuf ended inside it: what rbuf holds
	 * now is what came after it. */
	assert(t->rcap >= sizeof(next));
	memcpy(t->rbuf, next, more);
	t->roff = 0;
	t->rlen = more;
	t->peek = 1;
	t->rest = 0;
	return 1;
}

/* A daemon of another wire version said HELLO (or answered ours).  Both
 * ends should say why they refuse each other, naming both versions: the
 * side that connected hears nothing but a close otherwise, so an accepted
 * connection gets a bare frame header of ours (a HELLO of no length) before
 * it closes, one try, never waited for.  A daemon of this version that
 * connected reads it and logs the same line. */
static void version_refused(struct link_tcp *t, unsigned theirs)
{
	log_rl_warn("link %s: the peer speaks wire protocol version %u, this ferryd (ferry %s) version %u: every "
		    "node must run the same ferry release; closing the connection", t->addr, theirs, FERRY_VERSION,
		    WIRE_VERSION);
	if (!t->l.outgoing) {
		struct wire_frame_hdr h = { .version = WIRE_VERSION, .kind = WIRE_HELLO };

		/* best effort: the connection closes either way */
		(void)!send(t->fd, &h, sizeof(h), MSG_DONTWAIT | MSG_NOSIGNAL);
	}
}

/* Hands every complete frame in rbuf to the peer layer.  Returns 0, or
 * -ECANCELED if the link died meanwhile (touch nothing but its memory), or
 * another -errno: the caller ends the link. */
static int parse(struct link_tcp *t)
{
	int last_piece = 0;     /* the last frame handed on was a piece (is_piece) */

	while (!t->paused && t->rlen - t->roff >= sizeof(struct wire_frame_hdr)) {
		struct wire_frame_hdr h;
		size_t need;
		int ret;

		if (wire_decode_hdr(t->rbuf + t->roff, &h) < 0) {
			if (wire_hdr_version(t->rbuf + t->roff) != WIRE_VERSION && t->l.state != LINK_UP) {
				version_refused(t, wire_hdr_version(t->rbuf + t->roff));
				return -EPROTO;
			}
			log_rl_warn("link %s: malformed frame header; closing the connection", t->addr);
			return -EPROTO;
		}
		need = sizeof(h) + h.len;
		if (t->l.state != LINK_UP && need > RBUF_HANDSHAKE) {
			log_rl_warn("link %s: a frame of %zu bytes before the handshake completed; closing",
				    t->addr, need);
			return -EPROTO;
		}
		if (t->rlen - t->roff < need) {
			int piece = 0;

			if (t->rlen - t->roff >= WIRE_STEER_HEAD) {
				ret = is_piece(t, &h, t->rbuf + t->roff) ? steer(t, &h, need) : 0;
				if (ret < 0)
					return ret;
				if (ret == 1)
					continue;
				piece = ret == 2;
			} else if (t->pieces && t->l.state == LINK_UP && h.kind == WIRE_DATA &&
				   !(h.flags & WIRE_FRAME_MAC) && need >= STEER_FRAME_MIN) {
				t->peek = 1;    /* its head first: it may be a piece */
			}
			if (need > t->rcap) {
				uint8_t *b = realloc(t->rbuf, need);

				if (!b)
					return -ENOMEM;
				t->rbuf = b;
				t->rcap = need;
			}
			/* A piece not taken in place: read its rest and no
			 * more, so that a piece behind it is offered again. */
			if (piece)
				t->rest = need - (t->rlen - t->roff);
			break;
		}
		last_piece = t->pieces && is_piece(t, &h, t->rbuf + t->roff);
		ret = tcp.ev->rx(&t->l, &h, t->rbuf + t->roff);
		if (t->l.dead)
			return -ECANCELED;
		if (ret < 0)
			return ret;
		if (ret == 0) {
			t->paused = 1;
			break;
		}
		t->l.frames_in++;
		t->roff += need;
	}
	if (t->roff == t->rlen) {
		t->roff = t->rlen = 0;
		/* After a piece, the next one's head first: if it is another
		 * piece, it may be received in place. */
		if (last_piece)
			t->peek = 1;
	} else if (t->roff > 0 && (t->rcap - t->rlen < sizeof(struct wire_frame_hdr) || t->roff > t->rcap / 2)) {
		memmove(t->rbuf, t->rbuf + t->roff, t->rlen - t->roff);
		t->rlen -= t->roff;
		t->roff = 0;
	}
	return 0;
}

/* Why parse failed, for tcp_fail. */
static const char *parse_error(int ret)
{
	return ret == -ENOMEM ? "out of memory" : ret == -EPROTO ? "protocol error" : strerror(-ret);
}

static void on_io(struct loop_watch *w, uint32_t events)
{
	struct link_tcp *t = w->ctx;
	int ret;

	if (t->l.state == LINK_CONNECTING && (events & (EPOLLOUT | EPOLLERR | EPOLLHUP))) {
		int err = 0;
		socklen_t len = sizeof(err);

		getsockopt(t->fd, SOL_SOCKET, SO_ERROR, &err, &len);
		if (err) {
			char why[128];

			snprintf(why, sizeof(why), "connect to %s: %s", t->addr, strerror(err));
			tcp_fail(t, why);
			return;
		}
		t->l.state = LINK_HANDSHAKE;
		set_congestion(t);
		tcp.ev->connected(&t->l);  /* queues our HELLO */
		if (t->l.dead)
			return;
	}
	if (t->paused && (events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR))) {
		/* What it sent and we have not read comes again from its next
		 * instance, or never: its frames are resent either way. */
		tcp_fail(t, "connection closed by the other end (while reading was paused)");
		return;
	}
	if (events & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
		for (;;) {
			size_t want;
			ssize_t n;

			if (t->paused)
				break;
			if (t->rcap - t->rlen < 4096 && t->rcap < 2 * RBUF_START && t->l.state == LINK_UP) {
				size_t cap = t->rcap < RBUF_START ? RBUF_START : t->rcap * 2;
				uint8_t *b = realloc(t->rbuf, cap);

				if (!b) {
					tcp_fail(t, "out of memory for the receive buffer");
					return;
				}
				t->rbuf = b;
				t->rcap = cap;
			}
			/* After a piece, the next frame's head only: if it is
			 * another piece, its rest goes in place; a piece not
			 * taken in place is read to its end and no further
			 * (parse).  (Both hold until a read brings something: a
			 * read that finds nothing yet must not make the next
			 * one read ahead.) */
			want = t->rcap - t->rlen;
			if (t->rest && t->rest < want)
				want = t->rest;
			else if (t->peek && t->rlen - t->roff < WIRE_STEER_HEAD &&
				 WIRE_STEER_HEAD - (t->rlen - t->roff) < want)
				want = WIRE_STEER_HEAD - (t->rlen - t->roff);
			n = read(t->fd, t->rbuf + t->rlen, want);
			if (n > 0)
				t->peek = 0, t->rest = 0;
			if (n == 0) {
				tcp_fail(t, "connection closed by the other end");
				return;
			}
			if (n < 0) {
				char why[128];

				if (errno == EAGAIN || errno == EINTR)
					break;
				snprintf(why, sizeof(why), "read from %s: %s", t->addr, strerror(errno));
				tcp_fail(t, why);
				return;
			}
			t->rlen += (size_t)n;
			ret = parse(t);
			if (ret == -ECANCELED)
				return;
			if (ret < 0) {
				tcp_fail(t, parse_error(ret));
				return;
			}
			if (t->rlen == t->rcap || t->peek)
				continue;       /* a big frame is coming; room was made */
			if ((size_t)n < want && (size_t)n < 4096)
				break;
		}
	}
	ret = tcp_write(t);
	if (ret < 0) {
		char why[128];

		snprintf(why, sizeof(why), "write to %s: %s", t->addr, strerror(-ret));
		tcp_fail(t, why);
		return;
	}
	set_events(t);
}

/* Called from the peer layer, possibly while this very link is handing it a
 * frame: it must not free the link.  A write error is left for on_io, where
 * the socket reports it again (EPOLLERR) and the link fails safely. */
static void tcp_kick(struct link *l)
{
	struct link_tcp *t = (struct link_tcp *)l;

	if (l->state == LINK_CONNECTING || l->dead)
		return;
	if (tcp_write(t) < 0)
		t->events = 0;          /* force set_events to re-arm EPOLLOUT */
	set_events(t);
}

static int tcp_send_ctrl(struct link *l, const void *frame, size_t len)
{
	struct link_tcp *t = (struct link_tcp *)l;
	struct frame *f;
	uint32_t off;

	/* cbuf goes out before the sequenced frames not yet written: a control
	 * frame must not overtake one sealed already (link.h).  The peer layer
	 * sends an ACK only when no sequenced frame is left to write. */
	if (!l->encrypt && (f = tcp.ev->tx_first(l, &off)) && f->seq <= t->sealed_seq)
		return -EAGAIN;
	if (t->clen - t->coff + len > CBUF_BYTES + (l->encrypt ? STAGE_BYTES : 0) || cbuf_room(t, len) < 0)
		return -ENOBUFS;
	memcpy(t->cbuf + t->clen, frame, len);
	tcp.ev->tx_seal(l, t->cbuf + t->clen, t->cbuf + t->clen);
	t->clen += len;
	return 0;
}

static void tcp_pause(struct link *l, int on)
{
	struct link_tcp *t = (struct link_tcp *)l;
	int ret;

	if (t->paused == on || l->dead)
		return;
	t->paused = on;
	ret = on ? 0 : parse(t);
	if (ret == -ECANCELED)
		return;
	if (ret < 0) {
		tcp_fail(t, parse_error(ret));
		return;
	}
	set_events(t);
}

static void tcp_fault(struct link *l)
{
	struct link_tcp *t = (struct link_tcp *)l;

	if (l->dead)
		return;
	/* Both ends see the connection fail; our own read returns 0 next. */
	shutdown(t->fd, SHUT_RDWR);
	loop_kick();
}

static void tcp_describe(const struct link *l, char *buf, size_t len)
{
	const struct link_tcp *t = (const struct link_tcp *)l;

	snprintf(buf, len, "tcp %s%s, %zu bytes unparsed", t->addr, t->paused ? ", paused" : "",
		 t->rlen - t->roff);
}

static const struct link_ops tcp_ops = {
	.name = "tcp",
	.kick = tcp_kick,
	.send_ctrl = tcp_send_ctrl,
	.pause = tcp_pause,
	.close = tcp_close,
	.fault = tcp_fault,
	.describe = tcp_describe,
};

static void sock_opts(int fd)
{
	int one = 1, idle = 10, intvl = 5, cnt = 3;

	/* We aggregate ourselves; Nagle would only add delay. */
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	/* Notice a peer that vanished without a FIN within about 25 s. */
	setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof(intvl));
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt));
}

/* transport.tcp_congestion on a connection once it is established (an
 * outgoing one's route may name its own congestion control, which connect
 * puts in place: set after, both ends run what the configuration says).  A
 * refusal is said, and the link keeps what it has. */
static void set_congestion(struct link_tcp *t)
{
	if (tcp.cc && setsockopt(t->fd, IPPROTO_TCP, TCP_CONGESTION, tcp.cc, (socklen_t)strlen(tcp.cc)) < 0)
		log_rl_warn("link %s: transport.tcp_congestion \"%s\": %s; the link keeps its own", t->addr,
			    tcp.cc, strerror(errno));
}

/* transport.tcp_congestion, tried on the listening socket once: a name the
 * kernel does not have, or may not give this process (one outside
 * net.ipv4.tcp_allowed_congestion_control needs CAP_NET_ADMIN), is said
 * once, and the links keep the system's default.  Why there is a setting at
 * all: conf/ferry.conf. */
static void congestion_init(int lfd, const char *name)
{
	char cur[16] = "";
	socklen_t len = sizeof(cur) - 1;

	tcp.cc = NULL;
	if (getsockopt(lfd, IPPROTO_TCP, TCP_CONGESTION, cur, &len) < 0)
		strcpy(cur, "unknown");
	if (!name[0]) {
		log_info("TCP links: congestion control %s (the system's: transport.tcp_congestion names none)", cur);
		return;
	}
	if (setsockopt(lfd, IPPROTO_TCP, TCP_CONGESTION, name, (socklen_t)strlen(name)) < 0) {
		log_warn("TCP links: transport.tcp_congestion \"%s\": %s%s; keeping the system's (%s)", name,
			 strerror(errno), errno == EPERM ? " (not in net.ipv4.tcp_allowed_congestion_control)" :
			 errno == ENOENT ? " (no such module loaded)" : "", cur);
		return;
	}
	tcp.cc = name;
	log_info("TCP links: congestion control %s (transport.tcp_congestion)", name);
}

static struct link_tcp *new_link(int fd, const char *addr, int outgoing)
{
	struct link_tcp *t = calloc(1, sizeof(*t));

	if (!t)
		return NULL;
	t->rbuf = malloc(RBUF_HANDSHAKE);      /* grows once the link is up */
	t->cbuf = malloc(CBUF_BYTES);
	if (!t->rbuf || !t->cbuf) {
		free(t->rbuf);
		free(t->cbuf);
		free(t);
		return NULL;
	}
	t->rcap = RBUF_HANDSHAKE;
	t->ccap = CBUF_BYTES;
	t->fd = fd;
	t->l.ops = &tcp_ops;
	t->l.outgoing = outgoing;
	t->l.state = outgoing ? LINK_CONNECTING : LINK_HANDSHAKE;
	snprintf(t->addr, sizeof(t->addr), "%s", addr);
	t->events = EPOLLIN | (outgoing ? EPOLLOUT : 0);
	if (loop_add(&t->w, fd, t->events, on_io, t) < 0) {
		free(t->rbuf);
		free(t->cbuf);
		free(t);
		return NULL;
	}
	t->next = tcp.links;
	if (t->next)
		t->next->prev = t;
	tcp.links = t;
	return t;
}

static void addr_str(const struct sockaddr *sa, char *buf, size_t len)
{
	char host[INET6_ADDRSTRLEN] = "?", port[8] = "?";

	getnameinfo(sa, sa->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in),
		    host, sizeof(host), port, sizeof(port), NI_NUMERICHOST | NI_NUMERICSERV);
	snprintf(buf, len, "%s:%s", host, port);
}

static int tcp_connect(uint32_t node, const char *host, uint16_t port, struct link **l_p, char *err,
		       size_t errlen)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *res;
	char portstr[8], addr[80];
	struct link_tcp *t;
	int fd, ret;

	/* Names are looked up at every attempt, so a node whose address
	 * changes is found again.  Numeric hosts cost nothing; a slow name
	 * service would stall this daemon, so clusters should use numeric
	 * addresses or /etc/hosts. */
	snprintf(portstr, sizeof(portstr), "%u", port);
	ret = getaddrinfo(host, portstr, &hints, &res);
	if (ret != 0) {
		log_debug("peer %u: resolving %s: %s", node, host, gai_strerror(ret));
		snprintf(err, errlen, "cannot resolve %s: %s", host, gai_strerror(ret));
		return -EHOSTUNREACH;
	}
	fd = socket(res->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		ret = -errno;
		freeaddrinfo(res);
		return ret;
	}
	sock_opts(fd);
	addr_str(res->ai_addr, addr, sizeof(addr));
	if (connect(fd, res->ai_addr, res->ai_addrlen) < 0 && errno != EINPROGRESS) {
		ret = -errno;
		snprintf(err, errlen, "connect to %s: %s", addr, strerror(errno));
		freeaddrinfo(res);
		close(fd);
		return ret;
	}
	freeaddrinfo(res);
	t = new_link(fd, addr, 1);
	if (!t) {
		close(fd);
		return -ENOMEM;
	}
	*l_p = &t->l;
	return 0;
}

/* The host part of an address "host:port" (addr_str). */
static size_t host_len(const char *addr)
{
	const char *colon = strrchr(addr, ':');

	return colon ? (size_t)(colon - addr) : strlen(addr);
}

static int same_host(const char *a, const char *b)
{
	return host_len(a) == host_len(b) && memcmp(a, b, host_len(a)) == 0;
}

/* 1 if addr is the address of a node in the configuration (as written
 * there: numeric addresses, as clusters should use, compare exactly). */
static int cluster_host(const char *addr)
{
	for (uint32_t k = 0; tcp.conf && k < tcp.conf->nnodes; k++) {
		const char *h = tcp.conf->nodes[k].host;

		if (strlen(h) == host_len(addr) && memcmp(h, addr, host_len(addr)) == 0)
			return 1;
	}
	return 0;
}

/* Accepted connections not authenticated yet: all of them, and from addr. */
static uint32_t unauthenticated(const char *addr, uint32_t *from_host)
{
	uint32_t n = 0;

	*from_host = 0;
	for (struct link_tcp *t = tcp.links; t; t = t->next) {
		if (t->l.outgoing || t->l.state == LINK_UP)
			continue;
		n++;
		*from_host += same_host(t->addr, addr);
	}
	return n;
}

/* Makes room for a connection from a node of the cluster: ends the oldest
 * unauthenticated one from an address that is not (from NULL), or from that
 * node's own address from.  Returns 1 if it did. */
static int evict_for_node(const char *from)
{
	struct link_tcp *oldest = NULL;

	for (struct link_tcp *t = tcp.links; t; t = t->next)
		if (!t->l.outgoing && t->l.state != LINK_UP &&
		    (from ? same_host(t->addr, from) : !cluster_host(t->addr)))
			oldest = t;
	if (!oldest)
		return 0;
	log_rl_warn("peer port: %s makes room for a connection from a node of the cluster", oldest->addr);
	tcp_fail(oldest, "made room for a node of the cluster");
	return 1;
}

static void on_tcp_accept(struct loop_watch *w, uint32_t events);

static void on_accept_retry(struct loop_timer *t)
{
	(void)t;
	if (tcp.lfd >= 0 && loop_mod(&tcp.lw, EPOLLIN) < 0)
		log_err("re-arming the peer port: %m");
}

static void on_tcp_accept(struct loop_watch *w, uint32_t events)
{
	(void)events;
	for (;;) {
		struct sockaddr_storage ss;
		socklen_t sl = sizeof(ss);
		int fd = accept4(w->fd, (struct sockaddr *)&ss, &sl, SOCK_NONBLOCK | SOCK_CLOEXEC);
		struct link_tcp *t;
		char addr[80];

		if (fd < 0) {
			if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
				/* The connection stays in the backlog; look again
				 * later instead of spinning on a readable socket. */
				log_rl_warn("accept on the peer port: %m; pausing accepting for 100 ms");
				loop_mod(&tcp.lw, 0);
				loop_timer_arm(&tcp.accept_retry, ACCEPT_BACKOFF_NS, on_accept_retry, NULL);
			} else if (errno != EAGAIN && errno != EINTR && errno != ECONNABORTED) {
				log_rl_warn("accept on the peer port: %m");
			}
			return;
		}
		addr_str((struct sockaddr *)&ss, addr, sizeof(addr));
		{
			uint32_t from_host, n = unauthenticated(addr, &from_host);
			int room = from_host < MAX_UNAUTH_PER_HOST && n < MAX_UNAUTH;

			if (!room && cluster_host(addr))
				room = evict_for_node(from_host >= MAX_UNAUTH_PER_HOST ? addr : NULL);
			if (!room) {
				log_rl_warn("peer port: %u connections are authenticating already (%u from %.*s); "
					    "%s refused", n, from_host, (int)host_len(addr), addr, addr);
				close(fd);
				continue;
			}
		}
		sock_opts(fd);
		t = new_link(fd, addr, 0);
		if (t)
			set_congestion(t);
		if (!t) {
			close(fd);
			continue;
		}
		tcp.ev->accepted(&t->l);
	}
}

/* Listens on the node's own address (c->nodes[self].host), not on every
 * interface: the peer port is for the cluster network only.  A host name is
 * resolved and the first of its addresses that is on this machine is used. */
static int tcp_listen(const struct conf *c, uint32_t self, const struct link_events *ev)
{
	const char *host = c->nodes[self].host;
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE | AI_NUMERICSERV }, *res, *ai;
	char portstr[8], addr[80] = "";
	int one = 1, fd = -1, ret, err = 0;

	snprintf(portstr, sizeof(portstr), "%u", c->nodes[self].port);
	ret = getaddrinfo(host, portstr, &hints, &res);
	if (ret != 0) {
		log_err("node %u's address %s: %s", self, host, gai_strerror(ret));
		return -EADDRNOTAVAIL;
	}
	for (ai = res; ai && fd < 0; ai = ai->ai_next) {
		fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		if (fd < 0) {
			err = errno;
			continue;
		}
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		addr_str(ai->ai_addr, addr, sizeof(addr));
		if (bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 || listen(fd, 256) < 0) {
			err = errno;
			close(fd);
			fd = -1;
		}
	}
	freeaddrinfo(res);
	if (fd < 0) {
		log_err("listening on node %u's address %s port %u: %s%s", self, host, c->nodes[self].port,
			strerror(err), err == EADDRNOTAVAIL ? " (that address is not on this machine: check --node)" : "");
		return -err;
	}
	log_info("peer port: listening on %s", addr);
	congestion_init(fd, c->tcp_congestion);
	tcp.ev = ev;
	tcp.conf = c;
	ret = loop_add(&tcp.lw, fd, EPOLLIN, on_tcp_accept, NULL);
	if (ret < 0) {
		close(fd);
		return ret;
	}
	tcp.lfd = fd;
	return 0;
}

static void tcp_fini(void)
{
	loop_timer_cancel(&tcp.accept_retry);
	if (tcp.lfd >= 0) {
		loop_del(&tcp.lw);
		close(tcp.lfd);
	}
	tcp.lfd = -1;
}

const struct transport transport_tcp = {
	.name = "tcp",
	.listen = tcp_listen,
	.connect = tcp_connect,
	.fini = tcp_fini,
	.sends_lent = 1,
};
