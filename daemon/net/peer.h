/* daemon/net/peer.h - the nodes this daemon exchanges frames with directly (its
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
 * Frame integrity (auth.h): when a link comes up it gets keys of its own, and
 * from then on every frame, DATA and ACK, is sealed when it goes out on it and
 * checked (and decrypted, with security.encrypt) when it arrives, before
 * anything in it is believed, its ack included; a frame that fails ends the
 * link.  Every daemon of a cluster must have the same security settings: the
 * HELLOs carry them, and a link whose ends differ is refused (both log why).
 *
 * Reliability (seq.h): every DATA frame gets the next per-peer sequence
 * number and stays queued until the peer acknowledges it.  After a
 * reconnection each side learns from the other's HELLO what arrived and sends
 * the rest again, in order; frames with a number already seen are discarded,
 * so nothing is lost or delivered twice.  Each daemon start has an
 * incarnation, larger than the ones before it (the start time, and random
 * bits): a peer that restarted has lost its state, so the frames queued
 * for its previous instance are dropped (logged and counted) and both
 * sequences start over.
 *
 * Upward, the layer above (forwarding) hears of each DATA frame that arrives
 * in order through peer_events.rx, registered at init.  A frame counts as
 * taken (and is acknowledged) as soon as rx returns, even if the items in it
 * cannot all go on yet: the layer above keeps the rest, says so (rx returns
 * 1), and reading from that peer's link pauses until it calls
 * peer_resume_rx().
 *
 * Ownership: the peers live in one array from peer_init to peer_fini.  A
 * peer's link belongs to its transport, which frees it (after ev->down(), or
 * in ops->close()); the peer layer only points at it while it is current.
 */
#ifndef FERRY_NET_PEER_H
#define FERRY_NET_PEER_H

#include "auth.h"
#include "link.h"
#include "seq.h"
#include "../plan/linkcost.h"
#include "../core/conf.h"
#include "../core/loop.h"

#include <stdint.h>
#include <stdio.h>

enum peer_state { PEER_DOWN, PEER_CONNECTING, PEER_HANDSHAKE, PEER_UP };

struct peer_stats {
	uint64_t frames_sent, bytes_sent;       /* DATA frames queued (first send) */
	uint64_t frames_recv, bytes_recv;       /* DATA frames taken */
	uint64_t items_sent;                    /* items in frames queued for this peer */
	uint64_t retransmits;                   /* frames sent again after a reconnection */
	uint64_t duplicates;                    /* frames received again and discarded */
	uint64_t connects, disconnects;
	uint64_t dropped_frames;                /* queued for an instance that restarted */
	uint64_t integrity_failures;            /* frames that failed their check (link ended) */
	uint64_t acks_sent;                     /* ACK frames of their own (peer_poll) */
	uint64_t acks_late;                     /* ... of them sent when ACK_DELAY_NS ran out */
};

struct peer {
	uint32_t node;
	uint32_t idx;                   /* position: peer_at(idx) == this */
	int dim;                        /* dimension of the link; -1 if none */
	int outgoing;                   /* we connect to it */
	const struct conf_node *addr;
	int state;                      /* enum peer_state */
	struct link *link;              /* current connection, NULL when down */
	char last_error[128];

	uint64_t incarnation;           /* the peer's; 0 before the first contact */
	struct auth_link sec;           /* the current link's keys and frame counts, while it is up */
	int rx_opened;                  /* the frame the link offers was checked already (offered again) */
	struct seq seq;                 /* sequence numbers, acks, the frame queue */
	int rx_held;                    /* the layer above holds a frame it has not finished */
	uint64_t ack_owed_ns;           /* when peer_poll first saw an ack owed (0: none) */
	uint64_t ack_owed_bytes;        /* st.bytes_recv then */
	int ack_now;                    /* an URGENT or ACK_SOON frame came: its ack goes at once (peer_poll) */

	struct loop_timer retry;        /* reconnection */
	uint32_t backoff_ms;
	struct loop_timer lost_timer;   /* down since PEER_LOST_NS: lost */
	int lost;                       /* times the layer above heard it is lost; 0 once up again */

	struct peer_stats st;
	/* The link's α and β (plan/linkcost.h), from the round trips of its
	 * frames: a probe at link start, then live traffic. */
	struct linkcost cost;
	uint32_t probes_left;           /* link-start probes still to send, one at a time */
	uint32_t probe_retries;         /* ... chains sent again for lack of samples */
	struct loop_timer probe_timer;  /* ... the next of them, a while after the last was acknowledged */
};

enum { PEER_URGENT = 1, PEER_URGENT_LAZY = 2 };

/* What the layer above does with what arrives. */
struct peer_events {
	/* A DATA body (len bytes) from p, in order; urgent: the frame was
	 * marked WIRE_FRAME_URGENT (PEER_URGENT), and WIRE_FRAME_ACK_LAZY too
	 * (PEER_URGENT_LAZY), or neither (0).  Returns 0 when its items went on, 1 when
	 * the layer keeps some of them for later (p then takes no more until
	 * peer_resume_rx), -EPROTO if it is malformed (nothing of it was used;
	 * the link is dropped and the frame comes again). */
	int (*rx)(struct peer *p, const uint8_t *body, uint32_t len, int urgent);
	/* Optional, receiving in place (link.h): the next DATA body from p,
	 * len bytes, of which only the first item's header is at body so far
	 * (the rest is being read).  Returns where the bytes after that
	 * header go, or NULL to have the body whole through rx.  steered(p,
	 * ok) follows at once: they are there (the items went on, as rx
	 * returning 0 says), or not (undo: the body may come through rx
	 * after all).  With NULL, *later: only for now (link.h). */
	uint8_t *(*steer)(struct peer *p, const uint8_t *body, uint32_t len, int *later);
	void (*steered)(struct peer *p, int ok);
	/* p is lost: restarted_as 0, its link has been down for PEER_LOST_NS
	 * (and again every PEER_LOST_AGAIN_NS until it is up again: then
	 * found; the peer may be alive, and
	 * the frames queued for it go out when the link is back; the
	 * forwarding layer takes no more transit data for it meanwhile once
	 * its queue is full, fwd/agg.h);
	 * else it came back as a
	 * new instance of its daemon, incarnation restarted_as, which lost
	 * everything the old one had (then the frames queued for the old one
	 * were dropped).  Items on their way through it may be gone for good. */
	void (*lost)(struct peer *p, uint64_t restarted_as, const char *why);
	/* p's link is up again after lost said it was down (not after a
	 * restart: that one said all there is). */
	void (*found)(struct peer *p);
};

/* How long a peer's link may be down before the layer above hears that the
 * peer is lost: a link that breaks and comes back within this loses
 * nothing, its frames are resent. */
#define PEER_LOST_NS (2ull * 1000000000u)
/* ... and again every PEER_LOST_AGAIN_NS while it stays down. */
#define PEER_LOST_AGAIN_NS (10ull * 1000000000u)

/* Creates the peers of node self and starts connecting/listening with tr,
 * or, if tr is NULL, the transport c->transport asks for ("auto": verbs if
 * the node's address is on an RDMA device, else TCP).  ev stays valid until
 * peer_fini.  Returns 0 or -errno (logged). */
int peer_init(const struct conf *c, uint32_t self, const struct transport *tr, const struct peer_events *ev);
void peer_fini(void);

/* This daemon start's incarnation (non-zero, larger for a later start;
 * HELLO carries it). */
uint64_t peer_self_incarnation(void);

/* The transport links use ("tcp", "verbs"), and its counters. */
const char *peer_transport_name(void);
void peer_write_transport_stats(FILE *out);

/* The peer for node id n, or NULL if n is not a peer. */
struct peer *peer_by_node(uint32_t n);

/* All peers, for iteration. */
uint32_t peer_count(void);
struct peer *peer_at(uint32_t i);

/* Queues f (a DATA frame: header space, then f->nitems items) for p: it
 * gets the next sequence number, goes out as soon as the link takes it and
 * is freed when p acknowledges it (or when its node is forgotten, for
 * good).  f may have lent bytes (frame.h) only if peer_takes_lent(). */
void peer_send(struct peer *p, struct frame *f);

/* 1 if frames may have lent bytes: they carry no tag and are not encrypted,
 * and the transport writes from any memory (TCP). */
int peer_takes_lent(void);

/* Bytes of frames queued for p and not yet acknowledged, written or not. */
static inline uint64_t peer_backlog(const struct peer *p)
{
	return p->seq.q.bytes;
}

/* Loop hook: sends pending acknowledgements. */
int peer_poll(void);

/* Debug: breaks the connection to node n like a network failure.  0 or -ENOENT. */
int peer_fault(uint32_t n);

/* The layer above finished the frame it held (rx returned 1): reading from
 * p's link resumes. */
void peer_resume_rx(struct peer *p);

/* One line per peer for ferryctl status. */
void peer_write_status(FILE *out);
/* p's counters as "name value" pairs, each preceded by a space, for the
 * "peer N ..." line of ferryctl stats. */
void peer_write_stats(FILE *out, const struct peer *p);
/* This node's link cost: the mean α (ns) and β (ps per byte) of its links
 * that measured one (plan/linkcost.h), 0 where none did. */
void peer_cost(uint32_t *alpha_ns, uint32_t *beta_ps);

#endif
