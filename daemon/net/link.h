/* daemon/net/link.h - one transport connection between two daemons, behind an
 * ops table, so that TCP (link_tcp.c) and RDMA verbs (verbs_*.c) plug in
 * without touching routing, aggregation or reliability (libfabric-style
 * providers).  This file is all a transport sees of the rest of the daemon
 * (besides frames, frame.h, and the core services): the ops it implements,
 * and the events of the peer layer (peer.c) that it is given when it starts.
 *
 * A transport moves frames and reports what happens; everything else is the
 * peer layer's: the handshake, sequence numbers and acknowledgements,
 * retransmission after a reconnection, backpressure.
 *
 * Sending.  The transport writes, in order, the unsequenced control frames
 * handed to send_ctrl (HELLO, AUTH, ACK) and then the peer's sequenced frames:
 * ev->tx_first() gives the first one not completely written (and how much of
 * it was), the rest follow through frame->next; ev->tx_done() says how many
 * more bytes went out.  Every frame, control frames too, is sealed once on
 * the link before its first byte goes out, in the order the frames go out:
 * ev->tx_seal() stamps the current acknowledgement into it and, with frame
 * integrity, its tag (auth.h; the nonce is the count of frames sealed on the
 * link).  So a frame must not be sealed and then overtaken by another one,
 * and a sequenced frame that goes out again on a later link is sealed again
 * there.  On a link with l->encrypt the sealed bytes of a sequenced frame
 * must go elsewhere (the transport's own memory) and the frame stay as it is,
 * because it may have to be sent again on another link under another key.
 *
 * Receiving.  Each complete frame is handed to ev->rx(), whose result says
 * whether it was taken; while the peer cannot take frames the transport stops
 * reading (the kernel's or the HCA's flow control then throttles the sender)
 * until ops->pause(l, 0) and then offers the same frame again.  The peer layer
 * checks (and decrypts) the frame in place, in the transport's buffer.  A
 * transport that reads a byte stream (TCP) may instead offer a large frame
 * whose rest it can read at once to ev->steer(), which may say where that
 * rest goes (a piece of a large item: the destination's RX ring), and then
 * reads it there and calls ev->steered(): the payload is copied once less.
 *
 * Ending.  When the connection fails the transport calls ev->down() once;
 * ops->close() ends it without that call.  Either way the link dies at once
 * (l->dead: its fd or queue pair is gone, no event comes for it any more) but
 * its memory is freed only by the loop, after the current callback has
 * returned (loop_bury): a link may die while a frame of its own is being
 * handed over (the peer layer closes a link whose peer misbehaves, or
 * replaces it), or while the transport is somewhere inside an op, so every
 * transport checks l->dead after each event it calls and then stops touching
 * anything but memory.  Nothing frees a link from inside another's callback.
 */
#ifndef FERRY_NET_LINK_H
#define FERRY_NET_LINK_H

#include "frame.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct conf;
struct link;
struct peer;                    /* the peer layer's; transports never look inside */
struct peer_hs;                 /* the peer layer's handshake state */

enum link_state {
	LINK_CONNECTING,        /* outgoing, transport-level connect in progress */
	LINK_HANDSHAKE,         /* connected, HELLO/AUTH being exchanged */
	LINK_UP,                /* authenticated, frames flow */
};

struct link_ops {
	const char *name;                                       /* "tcp" */
	/* Something is waiting to be sent: write what the transport takes now. */
	void (*kick)(struct link *l);
	/* Queues an unsequenced frame (header and body, whole).  0 or -ENOBUFS. */
	int (*send_ctrl)(struct link *l, const void *frame, size_t len);
	/* Stops (on) or resumes (!on) handing received frames to the peer. */
	void (*pause)(struct link *l, int on);
	/* Ends the link without calling ev->down() (see Ending). */
	void (*close)(struct link *l);
	/* Debug: breaks the connection the way a network failure would. */
	void (*fault)(struct link *l);
	/* One line for ferryctl status: addresses, queue states. */
	void (*describe)(const struct link *l, char *buf, size_t len);
};

struct link {
	const struct link_ops *ops;
	int state;              /* enum link_state; the transport sets CONNECTING and HANDSHAKE, the peer layer UP */
	int outgoing;           /* we connected (the lower node id does) */
	int dead;               /* ended; the loop frees it (see Ending) */
	int encrypt;            /* set by the peer layer when the link comes up: seal out of place (Sending) */
	uint64_t frames_in;     /* statistics of this connection */
	/* The peer layer's: */
	struct peer *peer;      /* NULL until the handshake says who it is */
	struct peer_hs *hs;     /* handshake state while not up */
};

/* What the peer layer does for its transport; given to listen(). */
struct link_events {
	/* An outgoing connection is established: the handshake starts. */
	void (*connected)(struct link *l);
	/* A connection was accepted; who it is comes with its HELLO. */
	void (*accepted)(struct link *l);
	/* A frame arrived: h is its header decoded (wire_decode_hdr checked it),
	 * frame the 24 + h->len bytes as received (header, body), which the
	 * peer layer may change (decrypting in place).  Returns 1 if taken, 0
	 * if the peer cannot take it now (the transport pauses and offers it
	 * again, untouched since, after pause(l, 0)), or -EPROTO: the transport
	 * must drop the connection (the reason is logged).  May call ops->kick
	 * on this or another link. */
	int (*rx)(struct link *l, const struct wire_frame_hdr *h, uint8_t *frame);
	/* Receiving in place (see Receiving): a DATA frame of an up link with
	 * header h, of which the first WIRE_STEER_HEAD bytes are at frame
	 * (the header, then its first item's header) and the rest is waiting
	 * in the transport, whole.  Returns where the bytes of the frame from
	 * WIRE_STEER_HEAD on go (the transport reads them there, and then
	 * calls steered at once, before anything else), or NULL: offer the
	 * frame whole to rx as usual.  With NULL, *later says whether that is
	 * for now only (a frame of the kind that goes in place, whose place
	 * has no room yet): the transport then reads the frames around such
	 * pieces one by one, so that the next may go in place. */
	uint8_t *(*steer)(struct link *l, const struct wire_frame_hdr *h, const uint8_t *frame, int *later);
	/* The bytes steer asked for are there (ok), or not (!ok: undone; the
	 * transport then reads the frame through its buffer as usual, or ends
	 * the link if reading failed).  Returns 1, or -EPROTO: the transport
	 * ends the link. */
	int (*steered)(struct link *l, const struct wire_frame_hdr *h, const uint8_t *frame, int ok);
	/* The connection is gone (l->dead is set; the loop frees l later). */
	void (*down)(struct link *l, const char *why);
	/* The first sequenced frame not completely written, *off_p of its
	 * bytes already written; NULL if none (or the link is not up). */
	struct frame *(*tx_first)(struct link *l, uint32_t *off_p);
	/* The frame at frame (header and body, whole; its length is in its
	 * header) goes out next on l: stamps the acknowledgement into it and
	 * seals it (see Sending) into out, which is frame itself or as many
	 * bytes of the transport's own (then frame stays as it was). */
	void (*tx_seal)(struct link *l, uint8_t *frame, uint8_t *out);
	/* Queues an ACK frame on l (through ops->send_ctrl), for a transport
	 * that must send something (verbs: credits, keepalive) and has no
	 * frame to carry it.  Nothing if l is not up. */
	void (*send_ack)(struct link *l);
	/* n more bytes of the sequenced frames were written. */
	void (*tx_done)(struct link *l, size_t n);
};

/* A transport: how links are made.  One is chosen at start-up
 * (transport.kind; "auto" tries verbs, then TCP). */
struct transport {
	const char *name;
	/* Starts accepting connections for node self; ev stays valid until
	 * fini.  Returns 0, or -errno with the reason logged (for verbs: no
	 * RDMA device holds the node's address, for instance). */
	int (*listen)(const struct conf *c, uint32_t self, const struct link_events *ev);
	/* Starts connecting to node `node` at host:port.  On success *l_p is
	 * a link in LINK_CONNECTING; ev->connected() follows, or ev->down().
	 * On failure returns -errno with a reason in err. */
	int (*connect)(uint32_t node, const char *host, uint16_t port, struct link **l_p, char *err,
		       size_t errlen);
	/* Closes the listener and whatever the transport holds. */
	void (*fini)(void);
	/* Transport-wide counters for ferryctl stats, "name value" lines;
	 * NULL if there are none. */
	void (*write_stats)(FILE *out);
	/* 1 if it writes frames with lent bytes (frame.h "Lent bytes") from
	 * wherever they are; such frames come only where frames are neither
	 * tagged nor encrypted. */
	int sends_lent;
};

extern const struct transport transport_tcp;    /* link_tcp.c */
extern const struct transport transport_verbs;  /* verbs_dev.c */

#endif
