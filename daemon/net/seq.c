/* daemon/net/seq.c - see seq.h. */
#include "seq.h"

#include <errno.h>

void seq_push(struct seq *s, struct frame *f, uint16_t flags)
{
	struct wire_frame_hdr h = {
		.version = WIRE_VERSION,
		.kind = WIRE_DATA,
		.flags = flags,
		.len = f->len - (uint32_t)sizeof(struct wire_frame_hdr),
		.seq = ++s->send_seq,
	};

	f->seq = h.seq;
	wire_encode_hdr(f->data, &h);
	frameq_push(&s->q, f);
	if (!s->cur) {
		s->cur = f;
		s->off = 0;
	}
	s->unsent += f->len;
}

void seq_written(struct seq *s, size_t n)
{
	while (n > 0 && s->cur) {
		size_t left = s->cur->len - s->off;

		if (n < left) {
			s->off += (uint32_t)n;
			s->unsent -= n;
			return;
		}
		n -= left;
		s->unsent -= left;
		s->cur = s->cur->next;
		s->off = 0;
	}
}

uint64_t seq_written_upto(const struct seq *s)
{
	return s->cur ? s->cur->seq - 1 : s->send_seq;
}

int seq_take_ack(struct seq *s, uint64_t ack)
{
	uint64_t acked = s->q.head ? s->q.head->seq - 1 : s->send_seq;

	if (ack <= acked)
		return 0;
	if (ack > seq_written_upto(s))
		return -EPROTO;
	while (s->q.head && s->q.head->seq <= ack)
		frame_free(frameq_pop(&s->q));
	return 0;
}

int seq_check(const struct seq *s, uint64_t seqno)
{
	if (seqno <= s->recv_seq)
		return 0;
	return seqno == s->recv_seq + 1 ? 1 : -EPROTO;
}

void seq_rewind(struct seq *s)
{
	s->cur = s->q.head;
	s->off = 0;
	s->unsent = s->q.bytes;
}

int seq_resume(struct seq *s, uint64_t their_ack)
{
	struct frame *cur = s->cur;
	uint32_t off = s->off;

	if (their_ack > s->send_seq)
		return -EPROTO;
	/* Everything queued went out on some link, as far as the peer's ack
	 * is concerned. */
	s->cur = NULL;
	if (seq_take_ack(s, their_ack) < 0) {
		s->cur = cur;
		s->off = off;
		return -EPROTO;
	}
	seq_rewind(s);
	s->ack_sent = 0;        /* tell it our position promptly */
	return 0;
}

uint32_t seq_reset(struct seq *s, uint64_t *items_p)
{
	uint32_t frames = s->q.count;
	uint64_t items = 0;

	for (struct frame *f = s->q.head; f; f = f->next)
		items += f->nitems;
	frameq_clear(&s->q);
	s->send_seq = s->recv_seq = s->ack_sent = 0;
	seq_rewind(s);
	*items_p = items;
	return frames;
}

void seq_fini(struct seq *s)
{
	frameq_clear(&s->q);
	seq_rewind(s);
}
