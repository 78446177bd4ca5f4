/* tests/unit/test_seq.c - sequence numbers, acknowledgements and resending
 * (daemon/net/seq.c), on real frames from the frame pool. */
#define UNIT "seq"
#include "check.h"
#include "../../daemon/net/seq.h"

#include <errno.h>
#include <string.h>

/* A DATA frame with n items' worth of body bytes. */
static struct frame *data_frame(uint32_t body, uint32_t nitems)
{
	struct frame *f = frame_alloc(body);

	memset(f->data + f->len, 0x5a, body);
	f->len += body;
	f->nitems = nitems;
	return f;
}

static uint64_t header_seq(const struct frame *f)
{
	struct wire_frame_hdr h;

	if (wire_decode_hdr(f->data, &h) < 0 || h.kind != WIRE_DATA || h.len != f->len - sizeof(h))
		return 0;
	return h.seq;
}

TEST(numbers_from_one_and_encodes_headers)
{
	struct seq s = { 0 };
	uint64_t n = 1;

	for (uint32_t i = 1; i <= 5; i++)
		seq_push(&s, data_frame(100 * i, i), 0);
	CHECK_EQ(s.send_seq, 5);
	CHECK_EQ(s.q.count, 5);
	CHECK(s.cur == s.q.head);
	CHECK_EQ(s.off, 0);
	for (struct frame *f = s.q.head; f; f = f->next, n++)
		CHECK_EQ(header_seq(f), n);
	CHECK_EQ(s.unsent, s.q.bytes);
	seq_fini(&s);
	CHECK_EQ(s.q.count, 0);
}

TEST(written_bytes_move_the_cursor_across_frames)
{
	struct seq s = { 0 };
	struct frame *a = data_frame(100, 1), *b = data_frame(200, 1);

	seq_push(&s, a, 0);
	seq_push(&s, b, 0);
	seq_written(&s, 10);
	CHECK(s.cur == a);
	CHECK_EQ(s.off, 10);
	CHECK_EQ(seq_written_upto(&s), 0);
	seq_written(&s, a->len - 10 + 5);       /* the rest of a and 5 bytes of b */
	CHECK(s.cur == b);
	CHECK_EQ(s.off, 5);
	CHECK_EQ(seq_written_upto(&s), 1);
	CHECK_EQ(s.unsent, b->len - 5);
	seq_written(&s, b->len - 5);
	CHECK(s.cur == NULL);
	CHECK_EQ(seq_written_upto(&s), 2);
	CHECK_EQ(s.unsent, 0);
	seq_fini(&s);
}

TEST(acks_free_written_frames_and_refuse_unwritten_ones)
{
	struct seq s = { 0 };

	for (int i = 0; i < 4; i++)
		seq_push(&s, data_frame(64, 2), 0);
	seq_written(&s, s.q.head->len * 2);     /* frames 1 and 2 went out */
	CHECK_EQ(seq_take_ack(&s, 3), -EPROTO); /* frame 3 never went out */
	CHECK_EQ(s.q.count, 4);                 /* ... and nothing was dropped */
	CHECK_EQ(seq_take_ack(&s, 1), 0);
	CHECK_EQ(s.q.count, 3);
	CHECK_EQ(header_seq(s.q.head), 2);
	CHECK_EQ(seq_take_ack(&s, 1), 0);       /* old acks change nothing */
	CHECK_EQ(seq_take_ack(&s, 0), 0);
	CHECK_EQ(s.q.count, 3);
	CHECK_EQ(seq_take_ack(&s, 2), 0);
	CHECK_EQ(s.q.count, 2);
	CHECK(s.cur == s.q.head);               /* the unwritten ones remain */
	seq_fini(&s);
}

TEST(received_numbers_in_order_duplicates_and_gaps)
{
	struct seq s = { 0 };

	CHECK_EQ(seq_check(&s, 1), 1);
	seq_taken(&s, 1);
	CHECK_EQ(seq_check(&s, 1), 0);          /* a duplicate: discard */
	CHECK_EQ(seq_check(&s, 0), 0);
	CHECK_EQ(seq_check(&s, 3), -EPROTO);    /* a gap: the link is broken */
	CHECK_EQ(seq_check(&s, 2), 1);
	seq_taken(&s, 2);
	CHECK(seq_ack_due(&s));
	CHECK_EQ(seq_ack_out(&s), 2);
	CHECK(!seq_ack_due(&s));
}

TEST(ack_is_not_due_while_a_frame_carries_it)
{
	struct seq s = { 0 };

	seq_taken(&s, 7);
	seq_push(&s, data_frame(8, 1), 0);
	CHECK(!seq_ack_due(&s));                /* the unwritten frame will carry it */
	seq_written(&s, s.q.head->len);
	CHECK(seq_ack_due(&s));
	seq_fini(&s);
}

TEST(a_lost_link_sends_everything_unacknowledged_again)
{
	struct seq s = { 0 };

	for (int i = 0; i < 5; i++)
		seq_push(&s, data_frame(32, 1), 0);
	seq_written(&s, 4 * s.q.head->len + 7); /* all out but the end of frame 5 */
	CHECK_EQ(s.off, 7);
	CHECK_EQ(seq_take_ack(&s, 2), 0);
	seq_taken(&s, 11);
	CHECK_EQ(seq_ack_out(&s), 11);
	seq_rewind(&s);                         /* the link went down */
	CHECK_EQ(header_seq(s.cur), 3);
	CHECK_EQ(s.off, 0);                     /* frames go again from their first byte */
	CHECK_EQ(s.unsent, s.q.bytes);
	/* The new link's peer says it has frame 4 already. */
	CHECK_EQ(seq_resume(&s, 4), 0);
	CHECK_EQ(s.q.count, 1);
	CHECK_EQ(header_seq(s.cur), 5);
	CHECK_EQ(s.ack_sent, 0);
	seq_fini(&s);
}

TEST(resume_refuses_acks_of_frames_never_sent)
{
	struct seq s = { 0 };

	seq_push(&s, data_frame(32, 1), 0);
	seq_push(&s, data_frame(32, 1), 0);
	seq_written(&s, 10);
	CHECK_EQ(seq_resume(&s, 3), -EPROTO);
	CHECK_EQ(s.q.count, 2);
	CHECK_EQ(s.off, 10);                    /* untouched */
	/* Frames queued but not yet written count as sent for the peer's
	 * HELLO: the previous link may have written them. */
	CHECK_EQ(seq_resume(&s, 2), 0);
	CHECK_EQ(s.q.count, 0);
	CHECK(s.cur == NULL);
	seq_fini(&s);
}

TEST(a_restarted_peer_drops_the_queue_and_both_sequences)
{
	struct seq s = { 0 };
	uint64_t items = 0;

	seq_push(&s, data_frame(32, 3), 0);
	seq_push(&s, data_frame(32, 4), 0);
	seq_taken(&s, 9);
	CHECK_EQ(seq_reset(&s, &items), 2);
	CHECK_EQ(items, 7);
	CHECK_EQ(s.q.count, 0);
	CHECK_EQ(s.send_seq, 0);
	CHECK_EQ(s.recv_seq, 0);
	CHECK(s.cur == NULL);
	seq_push(&s, data_frame(8, 1), 0);
	CHECK_EQ(header_seq(s.q.head), 1);
	seq_fini(&s);
}

TEST(every_frame_went_back)
{
	frame_fini();
	CHECK_EQ(frame_mem_bytes, 0);
}

int main(void)
{
	frame_init(16384, 8u << 20);
	RUN(numbers_from_one_and_encodes_headers);
	RUN(written_bytes_move_the_cursor_across_frames);
	RUN(acks_free_written_frames_and_refuse_unwritten_ones);
	RUN(received_numbers_in_order_duplicates_and_gaps);
	RUN(ack_is_not_due_while_a_frame_carries_it);
	RUN(a_lost_link_sends_everything_unacknowledged_again);
	RUN(resume_refuses_acks_of_frames_never_sent);
	RUN(a_restarted_peer_drops_the_queue_and_both_sequences);
	RUN(every_frame_went_back);
	return check_done();
}
