/* daemon/net/frame.h - frame buffers: one network frame between two daemons, a
 * struct wire_frame_hdr followed by its body, in one allocation.  Frames of
 * the standard size (aggregation.buffer_bytes) come from a free list, so the
 * data path allocates nothing per frame once warm; larger ones (a piece of a
 * large item) are allocated for the occasion.  All frame memory is counted in
 * frame_mem_bytes.
 *
 * Frames are daemon memory: items are copied into frames from the clients'
 * shared-memory rings (fwd/tx.c, proto_copy; their headers are built from a
 * copy of the record that was validated).  A frame's integrity tag (auth.h)
 * is computed when it goes out, over these bytes: a client that rewrites its
 * ring meanwhile changes nothing that is sent, and cannot make a peer refuse
 * a frame.  Every frame has room for the tag after its body (frame_room does
 * not count it).
 *
 * Lent bytes, the one exception.  Where frames carry no tag and are not
 * encrypted, and the transport writes from any memory (TCP), the payload of
 * a large item's piece is not copied: the frame's header and item header are
 * its own, and its last bytes are lent (frame_lend) by the client's TX ring,
 * which holds them until the frame is freed (fwd/tx.c agg_piece; local/
 * endpoint.h "Loans"), or takes them back before (frame_relend to a copy of
 * its own, when the client's endpoint closes).  Nothing the
 * daemon or a peer decodes is lent: the bytes are an item's payload, opaque
 * to every daemon, so a client that rewrites them changes only its own
 * item.  Transports that seal, encrypt or send from registered memory (verbs)
 * never see such a frame (transport.sends_lent).
 *
 * Ownership: a frame has one owner at a time, which frees it with frame_free:
 * the aggregation buffer filling it (fwd), then the peer queue it is sequenced
 * on until the peer acknowledges it (peer.c), or a frame kept while its items
 * wait to go on (fwd).  Transports only borrow the frames of a peer's queue
 * while they write them.  A transport whose hardware reads the frame after the
 * call that posted it returns (verbs: a SEND straight from the frame) holds it
 * for each such work request (frame_hold) until the work request's completion
 * is reaped or its queue pair is destroyed (frame_unhold).  The owner may free
 * a held frame at any time (the peer acknowledged it before the SEND's own
 * completion was reaped, say): frame_free then only marks it, and the last
 * frame_unhold frees it.  So neither the memory nor its registration goes, and
 * nothing reuses it, while a device may still read it.
 */
#ifndef FERRY_FRAME_H
#define FERRY_FRAME_H

#include "../../proto/wire.h"

#include <stdint.h>

struct frame {
	struct frame *next;
	uint64_t seq;           /* per-link sequence number once queued */
	uint32_t len;           /* bytes used in data, header included */
	uint32_t cap;           /* bytes available in data */
	uint32_t nitems;        /* items in the body (statistics) */
	uint32_t lkey;          /* a transport's registration key (verbs), with reg */
	uint32_t holds;         /* work requests still reading it (frame_hold) */
	int urgent;             /* peer_send: mark it WIRE_FRAME_URGENT ... */
	uint8_t ack_lazy;       /* ... and WIRE_FRAME_ACK_LAZY (then its round trip says nothing) */
	uint64_t sent_ns;       /* when it was queued to be sent (peer.c: round trips) */
	uint8_t written;        /* a link took it whole */
	uint8_t resent;         /* ... more than once: its round trip says nothing */
	uint8_t probe;          /* a link-start probe (peer.c): its ack sends the next */
	int orphan;             /* freed by its owner while held: the last unhold frees it */
	struct frame_reg *reg;  /* the transport's registration, or NULL */
	/* Lent bytes (above): with lent, bytes own..len of the frame are
	 * there, not in data, and lender is told when the frame lets go of
	 * them.  lent and lender are NULL for a frame of its own. */
	uint32_t own;
	const uint8_t *lent;
	struct frame_lender *lender;
	uint8_t data[];         /* wire_frame_hdr, then the body */
};

/* Whoever lends bytes to a frame: put is called once, when the frame is
 * freed (after its last hold).  f is the frame (frame_lend sets it). */
struct frame_lender {
	void (*put)(struct frame_lender *x);
	struct frame *f;
};

/* A transport that sends from registered memory (verbs) registers a frame's
 * memory when it first sends it, and attaches the registration here; the
 * registration says how it is released.  The frame owns it from then on:
 * frames in the reuse pools keep theirs, and freeing a frame's memory calls
 * release first.  The transport may also release it earlier (a removed
 * device), setting f->reg to NULL. */
struct frame_reg {
	void (*release)(struct frame *f);
};

extern uint64_t frame_mem_bytes;

/* Sets the standard body size (aggregation.buffer_bytes, at least 4 KiB).
 * Frames of that size and frames for one maximal piece of a large item are
 * kept for reuse: 4 MiB of the first, and of the second as much as a link
 * may hold unacknowledged (link_bytes, limits.link_bytes) if that is more. */
void frame_init(uint32_t body_bytes, uint64_t link_bytes);
void frame_fini(void);

/* A frame with room for at least body bytes of body (a standard frame if that
 * is enough) and a tag, its header zeroed and len covering just the header.
 * NULL when out of memory. */
struct frame *frame_alloc(uint32_t body);
/* Gives the frame back (to the reuse pool, or its memory, registration
 * first); a held frame only once its last hold goes (see Ownership). */
void frame_free(struct frame *f);
/* Makes the n bytes at p the rest of f's body, lent by x (see Lent bytes):
 * f->len grows by n, and x->put follows when f is freed.  At most one
 * lender per frame, and nothing may be appended after. */
void frame_lend(struct frame *f, const uint8_t *p, uint32_t n, struct frame_lender *x);
/* The lent bytes of f are now at p (a copy of them, with as many bytes):
 * what was written of them stays written. */
void frame_relend(struct frame *f, const uint8_t *p);
/* The bytes of f from off on that are in one piece, in *p; returns how many
 * (0 at len).  For a transport writing a frame that may have lent bytes. */
static inline uint32_t frame_bytes_at(const struct frame *f, uint32_t off, const uint8_t **p)
{
	if (!f->lent || off < f->own) {
		*p = f->data + off;
		return (f->lent ? f->own : f->len) - off;
	}
	*p = f->lent + (off - f->own);
	return f->len - off;
}
/* A transport's hold while a work request reads the frame (see Ownership). */
void frame_hold(struct frame *f);
/* Drops a hold; frees the frame if its owner freed it meanwhile. */
void frame_unhold(struct frame *f);

/* Bytes of body room left (the tag's room kept). */
static inline uint32_t frame_room(const struct frame *f)
{
	return f->cap - WIRE_TAG_BYTES - f->len;
}

/* Singly linked FIFO of frames with a byte count. */
struct frameq {
	struct frame *head, *tail;
	uint64_t bytes;         /* sum of len */
	uint32_t count;
};

void frameq_push(struct frameq *q, struct frame *f);
struct frame *frameq_pop(struct frameq *q);
void frameq_clear(struct frameq *q);

#endif
