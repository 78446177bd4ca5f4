/* daemon/peer.h - the nodes this daemon exchanges frames with directly (its
 * routing peers), and the reliable, authenticated link to each.
 *
 * Who connects: the node with the lower id; the other accepts.  A lost
 * connection is re-established by the connecting side with exponential
 * backoff (50 ms doubling to 2 s).
 *
 * Handshake (both HELLOs carry fresh nonces, see auth.h):
 *     connecting end                      accepting end
 *     HELLO(i)                    ──▶     checks cluster, version, node ids
 *                                 ◀──     HELLO(a), AUTH(mac 'A')
 *     checks mac, AUTH(mac 'I')   ──▶     checks mac
 *     (up)                                (up)
 *
 * Reliability: every DATA frame gets the next per-peer sequence number and
 * stays queued until the peer acknowledges it (the ack field of any frame it
 * sends, or an ACK frame).  After a reconnection each side learns from the
 * other's HELLO what arrived and sends the rest again, in order; frames with a
 * number already seen are discarded, so nothing is lost or delivered twice.
 * Each daemon start has a random incarnation: a peer that restarted has lost
 * its state, so the frames queued for its previous instance are dropped
 * (logged and counted) and both sequences start over.
 *
 * A received frame counts as taken (and is acknowledged) as soon as the peer
 * layer holds it, even if the items in it cannot all go on yet: the rest is
 * kept in peer->stalled, reading from the link pauses, and it is finished
 * later (fwd_poll).
 */
#ifndef FERRY_PEER_H
#define FERRY_PEER_H

#include "conf.h"
#include "frame.h"
#include "link.h"
#include "loop.h"

#include <stdint.h>
#include <stdio.h>

enum peer_state { PEER_DOWN, PEER_CONNECTING, PEER_HANDSHAKE, PEER_UP };

struct peer_stats {
	uint64_t frames_sent, bytes_sent;       /* DATA frames queued (first send) */
	uint64_t frames_recv, bytes_recv;       /* DATA frames taken */
	uint64_t items_sent;                    /* items in frames queued for this peer */
	uint64_t items_recv;                    /* items in frames taken from this peer */
	uint64_t items_forwarded;               /* ... of which went on to another peer */
	uint64_t items_delivered;               /* ... of which were for this node */
	uint64_t flush_full, flush_timer, flush_explicit;
	uint64_t retransmits;                   /* frames sent again after a reconnection */
	uint64_t duplicates;                    /* frames received again and discarded */
	uint64_t connects, disconnects;
	uint64_t dropped_frames;                /* queued for an instance that restarted */
	uint64_t stalls;                        /* times reading paused for backpressure */
};

struct peer {
	uint32_t node;
	int dim;                        /* dimension of the link; -1 if none */
	int outgoing;                   /* we connect to it */
	const struct conf_node *addr;
	int state;                      /* enum peer_state */
	struct link *link;              /* current connection, NULL when down */
	char last_error[128];

	/* reliability */
	uint64_t incarnation;           /* the peer's; 0 before the first contact */
	uint64_t send_seq;              /* last sequence number given out */
	uint64_t recv_seq;              /* last in-order frame taken */
	uint64_t ack_sent;              /* last ack value that went out */
	struct frameq q;                /* sequenced frames: unacknowledged, then unsent */
	struct frame *send_cur;         /* first frame not completely written, or NULL */
	uint32_t send_off;              /* bytes of send_cur already written */
	uint64_t unsent;                /* bytes of q not yet written on this connection */

	/* aggregation (fwd.c) */
	struct frame *agg;              /* frame being filled, not yet sequenced */
	uint64_t agg_since_ns;          /* when its first item came */
	struct peer *agg_next;          /* list of peers with a non-empty agg */

	/* receive side (fwd.c) */
	struct frame *stalled;          /* rest of a taken frame not yet passed on */
	uint32_t stalled_off;           /* offset of the next item in stalled's body */

	/* reconnection */
	struct loop_timer retry;
	uint32_t backoff_ms;

	struct peer_stats st;
};

/* Creates the peers of node self and starts connecting/listening.
 * incarnation identifies this daemon start. */
int peer_init(const struct conf *c, uint32_t self);
void peer_fini(void);

uint64_t peer_incarnation_self(void);

/* The transport links use ("tcp", "verbs"), and its counters. */
const char *peer_transport_name(void);
void peer_write_transport_stats(FILE *out);

/* The peer for node id n, or NULL if n is not a peer. */
struct peer *peer_by_node(uint32_t n);

/* All peers, for iteration. */
uint32_t peer_count(void);
struct peer *peer_at(uint32_t i);

/* Gives f (header filled in by the caller except seq/ack/kind/len) the next
 * sequence number and queues it for sending. */
void peer_enqueue(struct peer *p, struct frame *f);

/* Loop hook: sends pending acknowledgements. */
int peer_poll(void);

/* Debug: breaks the connection to node n like a network failure.  0 or -ENOENT. */
int peer_fault(uint32_t n);

/* Resumes reading from p's link after a stall cleared. */
void peer_resume_rx(struct peer *p);

/* Writes one line per peer for ferryctl status / stats. */
void peer_write_status(FILE *out);
void peer_write_stats(FILE *out);

/* --- called by transports --- */

/* An outgoing connection is established: start the handshake. */
void peer_link_connected(struct link *l);
/* A connection was accepted; who it is comes with its HELLO. */
void peer_link_accepted(struct link *l);
/* A frame arrived.  Returns 1 if taken, 0 if the peer cannot take it now
 * (the transport pauses and offers it again after pause(l, 0)), or -EPROTO:
 * the transport must drop the connection (the reason is logged). */
int peer_rx(struct link *l, const struct wire_frame_hdr *h, const uint8_t *body);
/* The connection is gone; l is freed right after this returns. */
void peer_link_down(struct link *l, const char *why);
/* Sets the ack field of the frame header at hdr before it is written. */
void peer_tx_stamp(struct peer *p, uint8_t *hdr);
/* n more bytes of the queued frames were written. */
void peer_tx_advance(struct peer *p, size_t n);

#endif
