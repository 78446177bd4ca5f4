/* daemon/link.h - one transport connection between two daemons, behind an
 * ops table so that TCP (link_tcp.c) and, later, RDMA verbs links plug in
 * without touching routing, aggregation or reliability (libfabric-style
 * providers).
 *
 * A transport moves frames and reports what happens; everything else is the
 * peer layer's (peer.h): the handshake, sequence numbers and acknowledgements,
 * retransmission after a reconnection, backpressure.
 *
 * Sending.  The transport writes, in order, the unsequenced control frames
 * handed to send_ctrl (HELLO, AUTH, ACK) and then the peer's sequenced frames
 * from peer->send_cur (at byte peer->send_off) onward, advancing both through
 * peer_tx_advance().  Before the first byte of a sequenced frame goes out it
 * calls peer_tx_stamp() to put the current acknowledgement into its header.
 *
 * Receiving.  Each complete frame is handed to peer_rx(), whose result says
 * whether it was taken; while the peer cannot take frames the transport stops
 * reading (the kernel's flow control then throttles the sender) until
 * ops->pause(l, 0).
 *
 * Ending.  When the connection fails the transport calls peer_link_down()
 * once and frees the link; ops->close() frees it without that call.
 */
#ifndef FERRY_LINK_H
#define FERRY_LINK_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct peer;
struct link;

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
	/* Frees the link without calling peer_link_down(). */
	void (*close)(struct link *l);
	/* Debug: breaks the connection the way a network failure would. */
	void (*fault)(struct link *l);
	/* One line for ferryctl status: addresses, queue states. */
	void (*describe)(const struct link *l, char *buf, size_t len);
};

struct link {
	const struct link_ops *ops;
	struct peer *peer;      /* NULL until the handshake says who it is */
	int state;              /* enum link_state */
	int outgoing;           /* we connected (the lower node id does) */
	void *hs;               /* handshake state, owned by peer.c */
	uint64_t frames_in;     /* statistics of this connection */
};

/* A transport: how links are made.  One is chosen at start-up
 * (transport.kind; "auto" tries verbs, then TCP). */
struct conf;
struct transport {
	const char *name;
	/* Starts accepting connections for node self.  Returns 0, or -errno
	 * with the reason logged (for verbs: no RDMA device holds the node's
	 * address, for instance). */
	int (*listen)(const struct conf *c, uint32_t self);
	/* Starts connecting to host:port for peer p.  On success *l_p is a
	 * link in LINK_CONNECTING; peer_link_connected() follows, or
	 * peer_link_down(). */
	int (*connect)(struct peer *p, const char *host, uint16_t port, struct link **l_p);
	/* Closes the listener and whatever the transport holds. */
	void (*fini)(void);
	/* Transport-wide counters for ferryctl stats, "name value" lines;
	 * NULL if there are none. */
	void (*write_stats)(FILE *out);
};

extern const struct transport transport_tcp;    /* link_tcp.c */
extern const struct transport transport_verbs;  /* link_verbs.c */

#endif
