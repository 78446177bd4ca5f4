/* daemon/net/seq.h - reliable, ordered frames over a succession of links to
 * one peer: sequence numbers, acknowledgements, and what to send again.  Pure
 * bookkeeping (no I/O, no logging), used by the peer layer and unit-tested
 * on its own.
 *
 * Every DATA frame gets the next sequence number (from 1) and stays queued
 * until the peer acknowledges it: the ack field of any frame it sends carries
 * the last sequence number it took in order.  The queue holds the
 * unacknowledged frames, then the ones not yet written; `cur`/`off` is the
 * write position.  When a link is lost, the position goes back to the first
 * unacknowledged frame; on the next link the peer's HELLO says what it has,
 * and the rest goes out again, in order.  Frames received with a number
 * already taken are duplicates of such a resend and are discarded.
 *
 * Ownership: the queue owns its frames and frees them when acknowledged (or
 * dropped by seq_reset/seq_fini).
 */
#ifndef FERRY_NET_SEQ_H
#define FERRY_NET_SEQ_H

#include "frame.h"

#include <stddef.h>
#include <stdint.h>

struct seq {
	uint64_t send_seq;              /* last sequence number given out */
	uint64_t recv_seq;              /* last in-order frame taken */
	uint64_t ack_sent;              /* last ack value that went out */
	struct frameq q;                /* sequenced frames: unacknowledged, then unwritten */
	struct frame *cur;              /* first frame not completely written, or NULL */
	uint32_t off;                   /* bytes of cur already written */
	uint64_t unsent;                /* bytes of q not yet written on this link */
};

/* Gives f the next sequence number, encodes its DATA header with flags (the
 * body is f->len - header bytes, the tag's room included if flags say so;
 * ack is stamped when it goes out) and queues it. */
void seq_push(struct seq *s, struct frame *f, uint16_t flags);

/* The acknowledgement to stamp on a frame going out now; it counts as sent. */
static inline uint64_t seq_ack_out(struct seq *s)
{
	s->ack_sent = s->recv_seq;
	return s->recv_seq;
}

/* 1 if an acknowledgement is owed and no frame going out would carry it. */
static inline int seq_ack_due(const struct seq *s)
{
	return s->recv_seq != s->ack_sent && !s->cur;
}

/* n more bytes from the write position were written. */
void seq_written(struct seq *s, size_t n);

/* The last sequence number completely written. */
uint64_t seq_written_upto(const struct seq *s);

/* The peer acknowledges every frame up to ack: frees them.  Returns 0, or
 * -EPROTO if ack covers a frame that was never written (nothing changes). */
int seq_take_ack(struct seq *s, uint64_t ack);

/* A DATA frame numbered seqno arrived: returns 1 if it is the next one (take
 * it, then seq_taken), 0 if it is a duplicate (discard), -EPROTO if it is
 * out of sequence. */
int seq_check(const struct seq *s, uint64_t seqno);

static inline void seq_taken(struct seq *s, uint64_t seqno)
{
	s->recv_seq = seqno;
}

/* The link was lost: everything not acknowledged is to be written again. */
void seq_rewind(struct seq *s);

/* A new link is up and the peer says it took everything up to their_ack:
 * drops those, rewinds, and returns 0; or -EPROTO if their_ack covers frames
 * never sent (nothing is dropped then). */
int seq_resume(struct seq *s, uint64_t their_ack);

/* The peer restarted (a new incarnation): its state is gone, so both
 * directions start over; frames queued for it are dropped.  Returns how many
 * frames were dropped and (in *items_p) how many items they held. */
uint32_t seq_reset(struct seq *s, uint64_t *items_p);

/* Frees everything queued. */
void seq_fini(struct seq *s);

#endif
