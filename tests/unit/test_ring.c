/* tests/unit/test_ring.c - the shared-memory ring: records, wrap-around,
 * validation of what the other side wrote, wake-ups between two threads, and
 * the fenceless publish with its withdrawal. */
#define UNIT "ring"
#include "check.h"
#include <stdatomic.h>
#include "../../proto/ring.c"

#include <linux/membarrier.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <unistd.h>

static void *mem_for(uint64_t size)
{
	void *m = aligned_alloc(PROTO_CACHELINE, ring_bytes(size));

	memset(m, 0xee, ring_bytes(size));      /* garbage until attached */
	return m;
}

static struct proto_rec *last_put;     /* the record put() wrote last */

static int put(struct ring *r, uint32_t len, uint32_t tag)
{
	struct proto_rec *rec;
	int ret = ring_reserve(r, len, &rec);

	if (ret)
		return ret;
	*rec = (struct proto_rec){ .len = len, .kind = PROTO_REC_ITEM, .dst = tag, .src = ~tag };
	memset(rec + 1, (int)(tag & 0xff), len);
	last_put = rec;
	return 0;
}

/* Takes one record and checks it carries tag and len bytes of it. */
static int take(struct ring *r, uint32_t *tag_p, uint32_t *len_p)
{
	struct proto_rec rec;
	const void *p;
	int ret = ring_peek(r, &rec, &p);

	if (ret <= 0)
		return ret;
	for (uint32_t i = 0; i < rec.len; i++)
		if (((const uint8_t *)p)[i] != (rec.dst & 0xff))
			return -100;
	if (rec.src != ~rec.dst)
		return -101;
	*tag_p = rec.dst;
	*len_p = rec.len;
	ring_consume(r, &rec);
	return 1;
}

TEST(sizes)
{
	CHECK(ring_size_ok(PROTO_RING_MIN));
	CHECK(ring_size_ok(1 << 20));
	CHECK(!ring_size_ok(PROTO_RING_MIN / 2));
	CHECK(!ring_size_ok(300000));
	CHECK_EQ(ring_footprint(0), 16);
	CHECK_EQ(ring_footprint(1), 24);
	CHECK_EQ(ring_footprint(8), 24);
	CHECK_EQ(ring_footprint(9), 32);
}

/* How laps() damages a record. */
enum damage { DAMAGE_NONE, DAMAGE_KIND, DAMAGE_SRC };

/* Producer and consumer in one thread, lap after lap around the ring, with
 * lengths chosen so that every wrap position occurs, including the smallest
 * PAD.  Record number damage_at is damaged (how) once written.  Returns how
 * many records came out intact and in order before the first that did not,
 * n if all did, with *err_p 0 or what went wrong.  Every loop is bounded,
 * so a damaged ring ends the run with an error instead of hanging it. */
static uint32_t laps(uint32_t n, enum damage how, uint32_t damage_at, int *err_p)
{
	uint64_t size = PROTO_RING_MIN, seed = 1;
	void *m = mem_for(size);
	struct ring p, c;
	uint32_t next_put = 0, next_take = 0, tag, len;
	int err = 0;

	ring_attach(&p, m, size, 1);
	ring_attach(&c, m, size, 0);
	while (next_take < n && !err) {
		uint32_t before = next_take;

		/* Fill the ring: a record takes at least 16 bytes. */
		for (uint64_t k = 0; k < size / 16 && next_put < n; k++) {
			uint32_t l;

			seed = seed * 6364136223846793005ull + 1442695040888963407ull;
			l = (uint32_t)(seed >> 33) % 300;
			if (next_put % 997 == 0)
				l = PROTO_FRAG_BYTES;   /* now and then a maximal one */
			if (put(&p, l, next_put) != 0)
				break;
			if (how != DAMAGE_NONE && next_put == damage_at) {
				if (how == DAMAGE_KIND)
					last_put->kind = 0xff;
				else
					last_put->src ^= 1;
			}
			next_put++;
		}
		ring_publish(&p);
		/* Empty it: exactly the records put, no more tries than that. */
		while (next_take < next_put) {
			int ret = take(&c, &tag, &len);

			if (ret != 1) {
				err = ret < 0 ? ret : -ENODATA;         /* 0: published records missing */
				break;
			}
			if (tag != next_take) {
				err = -EILSEQ;
				break;
			}
			next_take++;
		}
		ring_release(&c);
		if (!err && next_take == before)
			err = -ENOSPC;          /* an empty ring took nothing */
	}
	free(m);
	*err_p = err;
	return next_take;
}

TEST(wrap_around_keeps_every_record)
{
	int err;

	CHECK_EQ(laps(200000, DAMAGE_NONE, 0, &err), 200000);
	CHECK_EQ(err, 0);
}

/* The check above can fail, and fails rather than hangs: a damaged record
 * ends the run at that record. */
TEST(wrap_around_stops_at_a_damaged_record)
{
	int err;

	CHECK_EQ(laps(200000, DAMAGE_KIND, 123457, &err), 123457);
	CHECK_EQ(err, -EPROTO);                 /* ring_peek refuses the header */
	CHECK_EQ(laps(200000, DAMAGE_SRC, 123457, &err), 123457);
	CHECK_EQ(err, -101);                    /* take() finds it is not what was put */
}

TEST(full_ring_says_eagain_until_released)
{
	uint64_t size = PROTO_RING_MIN;
	void *m = mem_for(size);
	struct ring p, c;
	uint32_t n = 0, tag, len;

	ring_attach(&p, m, size, 1);
	ring_attach(&c, m, size, 0);
	while (put(&p, 1000, n) == 0)
		n++;
	CHECK_EQ(n, size / ring_footprint(1000));
	CHECK_EQ(put(&p, 1000, n), -EAGAIN);
	ring_publish(&p);
	CHECK_EQ(take(&c, &tag, &len), 1);
	CHECK_EQ(put(&p, 1000, n), -EAGAIN);   /* consumed but not released */
	ring_release(&c);
	CHECK_EQ(put(&p, 1000, n), 0);
	free(m);
}

/* What ferry_poll looks at: room for a record (as ring_reserve would find
 * it, a PAD at the end included) and records waiting, without changing
 * either ring. */
TEST(room_and_readable_say_what_reserve_and_peek_would)
{
	uint64_t size = PROTO_RING_MIN;
	void *m = mem_for(size);
	struct ring p, c;
	uint32_t n = 0, tag, len;

	ring_attach(&p, m, size, 1);
	ring_attach(&c, m, size, 0);
	CHECK_EQ(ring_readable(&c), 0);
	CHECK_EQ(ring_has_room(&p, 1000), 1);
	while (ring_has_room(&p, 1000) == 1) {
		CHECK_EQ(put(&p, 1000, n), 0);
		n++;
	}
	CHECK_EQ(put(&p, 1000, n), -EAGAIN);
	CHECK_EQ(ring_readable(&c), 0);         /* nothing published yet */
	ring_publish(&p);
	CHECK_EQ(ring_readable(&c), 1);
	CHECK_EQ(take(&c, &tag, &len), 1);
	CHECK_EQ(ring_has_room(&p, 1000), 0);   /* consumed but not released */
	ring_release(&c);
	CHECK_EQ(ring_has_room(&p, 1000), 1);
	CHECK_EQ(ring_has_room(&p, 2000), 0);   /* one freed record is not enough */
	/* Drain all but the last: the room left before the end is too small
	 * for a big record, which needs the PAD and the room at the start. */
	while (n-- > 2)
		CHECK_EQ(take(&c, &tag, &len), 1);
	ring_release(&c);
	CHECK_EQ(ring_has_room(&p, PROTO_FRAG_BYTES), 1);
	CHECK_EQ(put(&p, PROTO_FRAG_BYTES, 7), 0);
	CHECK_EQ(ring_readable(&c), 1);
	atomic_store(&p.sh->tail, 4);                    /* misaligned */
	CHECK_EQ(ring_has_room(&p, size), -EPROTO);
	free(m);
}

TEST(flags_tell_who_must_be_woken)
{
	uint64_t size = PROTO_RING_MIN;
	void *m = mem_for(size);
	struct ring p, c;
	uint32_t tag, len;

	ring_attach(&p, m, size, 1);
	ring_attach(&c, m, size, 0);
	CHECK_EQ(ring_consumer_sleep(&c), 0);          /* empty: may sleep */
	put(&p, 8, 1);
	CHECK_EQ(ring_publish(&p), 1);                 /* consumer sleeps: wake it */
	ring_consumer_awake(&c);
	put(&p, 8, 2);
	CHECK_EQ(ring_publish(&p), 0);                 /* awake: no wake-up needed */
	CHECK_EQ(ring_consumer_sleep(&c), 1);          /* records there: do not sleep */
	CHECK_EQ(ring_publish(&p), 0);                 /* ... and the flag is down again */
	while (put(&p, 4000, 3) == 0)
		;
	ring_publish(&p);
	CHECK_EQ(ring_producer_sleep(&p, 4000), 0);    /* full: producer may sleep */
	CHECK_EQ(take(&c, &tag, &len), 1);
	CHECK_EQ(ring_release(&c), 1);                 /* producer waits: wake it */
	ring_producer_awake(&p);
	CHECK_EQ(ring_producer_sleep_empty(&p), 0);
	while (take(&c, &tag, &len) == 1)
		;
	CHECK_EQ(ring_release(&c), 1);
	CHECK_EQ(ring_producer_sleep_empty(&p), 1);    /* all consumed */
	free(m);
}

/* A consumer that holds room back (ferryd's loans, proto/ring.h "Taken"):
 * the tail stops at the oldest held record, taken says how far it read; a
 * producer waiting for everything to be taken is done on taken, and is
 * woken only when something it can see changed. */
TEST(taken_runs_ahead_of_a_held_back_tail)
{
	uint64_t size = PROTO_RING_MIN, held;
	void *m = mem_for(size);
	struct ring p, c;
	uint32_t tag, len;

	ring_attach(&p, m, size, 1);
	ring_attach(&c, m, size, 0);
	put(&p, 1000, 1);
	put(&p, 1000, 2);
	put(&p, 1000, 3);
	ring_publish(&p);
	CHECK_EQ(take(&c, &tag, &len), 1);
	held = c.tail;                                 /* record 2 is lent from here on */
	CHECK_EQ(take(&c, &tag, &len), 1);
	CHECK_EQ(take(&c, &tag, &len), 1);
	CHECK_EQ(ring_producer_sleep_empty(&p), 0);    /* nothing released yet: wait */
	CHECK_EQ(ring_release_to(&c, held), 1);        /* record 1's room and taken: wake */
	ring_producer_awake(&p);
	CHECK_EQ(atomic_load(&c.sh->tail), held);
	CHECK_EQ(atomic_load(&c.sh->taken), c.tail);
	CHECK_EQ(ring_producer_sleep_empty(&p), 1);    /* all taken, though not all released */
	/* Nothing new: a producer waiting for room is not woken again. */
	CHECK_EQ(ring_producer_sleep(&p, (uint32_t)(size - 16)), 0);
	CHECK_EQ(ring_release_to(&c, held), 0);
	/* The loan ends: the rest of the room comes back, and the wake-up. */
	CHECK_EQ(ring_release_to(&c, c.tail), 1);
	ring_producer_awake(&p);
	CHECK_EQ(atomic_load(&c.sh->tail), c.tail);
	/* A consumer that never holds anything back never writes taken. */
	put(&p, 8, 4);
	ring_publish(&p);
	CHECK_EQ(take(&c, &tag, &len), 1);
	ring_release(&c);
	CHECK(atomic_load(&c.sh->taken) != c.tail);
	free(m);
}

/* The fenceless publish, offered by the consumer before the producer
 * attaches (as ferryd does for TX rings), and withdrawn. */
TEST(fenceless_publish_ends_when_the_consumer_withdraws_it)
{
	uint64_t size = PROTO_RING_MIN;
	void *m = mem_for(size);
	struct ring p, c;
	uint32_t tag, len;

	ring_attach(&c, m, size, 1);
	ring_consumer_offer_fenceless(&c);
	ring_attach(&p, m, size, 0);
	ring_producer_set_fenceless(&p, 1);
	CHECK_EQ(p.fenceless, 1);
	CHECK_EQ(ring_consumer_fenceless(&c), 1);
	/* The handshake still works (one thread: membarrier adds nothing). */
	ring_consumer_arm(&c);
	put(&p, 8, 1);
	CHECK_EQ(ring_publish(&p), 1);
	CHECK_EQ(ring_consumer_check(&c), 1);
	CHECK_EQ(take(&c, &tag, &len), 1);
	/* Withdrawn: no answer until the producer publishes again. */
	ring_consumer_withdraw_fenceless(&c, 0);
	CHECK_EQ(ring_consumer_fenceless(&c), 1);
	CHECK_EQ(p.fenceless, 1);
	CHECK_EQ(ring_consumer_sleep(&c), 0);
	put(&p, 8, 2);
	CHECK_EQ(ring_publish(&p), 1);          /* this publish is fenced, and sees the sleeper */
	CHECK_EQ(p.fenceless, 0);
	CHECK_EQ(ring_consumer_fenceless(&c), 0);
	ring_consumer_awake(&c);
	CHECK_EQ(take(&c, &tag, &len), 1);
	CHECK_EQ(tag, 2);
	/* An answer once read cannot be taken back by the producer. */
	atomic_store(&c.sh->producer_fences, 0);
	CHECK_EQ(ring_consumer_fenceless(&c), 0);

	/* A producer that cannot use the offer (not registered for
	 * membarrier) answers as it attaches. */
	ring_attach(&c, m, size, 1);
	ring_consumer_offer_fenceless(&c);
	ring_attach(&p, m, size, 0);
	ring_producer_set_fenceless(&p, 0);
	CHECK_EQ(p.fenceless, 0);
	CHECK_EQ(ring_consumer_fenceless(&c), 0);
	/* Nor does a producer publish without a fence unless offered. */
	ring_attach(&c, m, size, 1);
	ring_attach(&p, m, size, 0);
	ring_producer_set_fenceless(&p, 1);
	CHECK_EQ(p.fenceless, 0);
	CHECK_EQ(ring_consumer_fenceless(&c), 0);
	free(m);
}

/* Both ends of a ring in m, zeroed as ferryd makes a direct region and
 * attached from zero as libferry attaches direct rings. */
static void attach_zeroed(void *m, uint64_t size, struct ring *p, struct ring *c)
{
	memset(m, 0, ring_bytes(size));
	ring_attach_new(c, m, size);
	ring_attach_new(p, m, size);
}

/* Late offers (the direct rings between clients): a producer that awaits
 * one publishes with a fence until it comes, without giving up on it; then
 * without; and answers once it is withdrawn, or on anything else. */
TEST(late_offer_comes_after_the_first_publish)
{
	uint64_t size = PROTO_RING_MIN;
	void *m = mem_for(size);
	struct ring p, c;
	uint32_t tag, len;

	attach_zeroed(m, size, &p, &c);
	ring_producer_await_offer(&p, 1);
	CHECK_EQ(p.fenceless, RING_FENCELESS_LATE);
	put(&p, 8, 1);
	CHECK_EQ(ring_publish(&p), 0);          /* fenced, and still waiting for the offer */
	CHECK_EQ(p.fenceless, RING_FENCELESS_LATE);
	CHECK_EQ(atomic_load(&p.sh->producer_fences), 0);
	ring_consumer_offer_fenceless(&c);
	CHECK_EQ(ring_consumer_fenceless(&c), 1);
	ring_consumer_arm(&c);
	CHECK_EQ(ring_consumer_check(&c), 1);   /* the fenced record is there */
	CHECK_EQ(take(&c, &tag, &len), 1);
	CHECK_EQ(tag, 1);
	ring_consumer_arm(&c);
	put(&p, 8, 2);
	CHECK_EQ(ring_publish(&p), 1);          /* without a fence now, and sees the sleeper */
	CHECK_EQ(p.fenceless, RING_FENCELESS_LATE);
	CHECK_EQ(ring_consumer_check(&c), 1);
	CHECK_EQ(take(&c, &tag, &len), 1);
	CHECK_EQ(tag, 2);
	/* Withdrawn: the next publish answers, for good. */
	ring_consumer_withdraw_fenceless(&c, 1);
	CHECK_EQ(atomic_load(&c.sh->consumer_fences), RING_FENCES_WITHDRAWN);
	CHECK_EQ(ring_consumer_fenceless(&c), 1);
	put(&p, 8, 3);
	ring_publish(&p);
	CHECK_EQ(p.fenceless, 0);
	CHECK_EQ(ring_consumer_fenceless(&c), 0);
	atomic_store(&c.sh->consumer_fences, 1);        /* an offer again changes nothing */
	put(&p, 8, 4);
	ring_publish(&p);
	CHECK_EQ(p.fenceless, 0);

	/* Garbage in consumer_fences (a peer of the job wrote it): fence. */
	attach_zeroed(m, size, &p, &c);
	ring_producer_await_offer(&p, 1);
	atomic_store(&c.sh->consumer_fences, 77);
	put(&p, 8, 1);
	ring_publish(&p);
	CHECK_EQ(p.fenceless, 0);
	CHECK_EQ(atomic_load(&c.sh->producer_fences), 1);
	/* A producer that cannot use an offer answers as it attaches. */
	attach_zeroed(m, size, &p, &c);
	ring_producer_await_offer(&p, 0);
	CHECK_EQ(p.fenceless, 0);
	ring_consumer_offer_fenceless(&c);
	CHECK_EQ(ring_consumer_fenceless(&c), 0);
	free(m);
}

/* A producer answers a withdrawal between publishes too (before it
 * sleeps), by the kind of offer it had. */
TEST(producer_answers_between_publishes)
{
	uint64_t size = PROTO_RING_MIN;
	void *m = mem_for(size);
	struct ring p, c;

	attach_zeroed(m, size, &p, &c);
	ring_consumer_offer_fenceless(&c);
	ring_producer_set_fenceless(&p, 1);     /* a TX ring: 0 is a withdrawal */
	ring_producer_answer(&p);
	CHECK_EQ(p.fenceless, RING_FENCELESS);  /* offered: nothing to answer */
	ring_consumer_withdraw_fenceless(&c, 0);
	ring_producer_answer(&p);
	CHECK_EQ(p.fenceless, 0);
	CHECK_EQ(ring_consumer_fenceless(&c), 0);

	attach_zeroed(m, size, &p, &c);
	ring_producer_await_offer(&p, 1);       /* a direct ring: 0 is "not yet" */
	ring_producer_answer(&p);
	CHECK_EQ(p.fenceless, RING_FENCELESS_LATE);
	ring_consumer_offer_fenceless(&c);
	ring_producer_answer(&p);
	CHECK_EQ(p.fenceless, RING_FENCELESS_LATE);
	ring_consumer_withdraw_fenceless(&c, 1);
	ring_producer_answer(&p);
	CHECK_EQ(p.fenceless, 0);
	CHECK_EQ(ring_consumer_fenceless(&c), 0);
	ring_producer_answer(&p);               /* once is enough; nothing changes */
	CHECK_EQ(p.fenceless, 0);
	free(m);
}

/* ring_judge: cheap membarrier calls never end an offer; dear ones end it
 * after four when the producers publish little, never while they publish
 * enough to pay for them; windows start again every 64 calls. */
TEST(judge_withdraws_only_what_costs_more_than_it_saves)
{
	struct ring_judge j = { 0 };
	uint64_t pubs = 0;
	int n;

	for (n = 0; n < 10000; n++)             /* 0.3 us calls, one publish each */
		CHECK_EQ(ring_judge(&j, 300, ++pubs), 0);
	memset(&j, 0, sizeof(j));
	pubs = 0;       /* (as for a consumer that starts judging) */
	for (n = 1; n <= 64 && !ring_judge(&j, 20000, pubs += 10); n++)
		;                               /* 20 us calls, ten publishes each */
	CHECK_EQ(n, 4);                         /* 80 us > 64 us, and > 40 x 30 ns */
	memset(&j, 0, sizeof(j));
	pubs = 0;
	for (n = 0; n < 10000; n++)             /* 20 us calls, a thousand publishes each (30 us saved) */
		CHECK_EQ(ring_judge(&j, 20000, pubs += 1000), 0);
	/* A window that began with cheap calls and busy producers: their
	 * publishes pay for the dear calls that end it (calls 61-64); the
	 * next window, with no publishes, ends the offer at its fourth. */
	memset(&j, 0, sizeof(j));
	pubs = 0;
	for (n = 0; n < 60; n++)
		CHECK_EQ(ring_judge(&j, 300, pubs += 5000), 0);
	for (n = 1; n <= 64 && !ring_judge(&j, 20000, pubs); n++)
		;
	CHECK_EQ(n, 8);
	CHECK_EQ(j.ns, j.window_ns);            /* and the window starts again */
}

/* The consumer must reject whatever a hostile producer publishes. */
TEST(consumer_rejects_garbage)
{
	uint64_t size = PROTO_RING_MIN;
	void *m = mem_for(size);
	struct ring p, c;
	struct proto_rec rec, *r;
	const void *pl;

	struct { uint32_t len; uint8_t kind, flags; } bad[] = {
		{ 8, 0, 0 },                          /* kind 0 */
		{ 8, 99, 0 },                         /* unknown kind */
		{ 8, PROTO_REC_ITEM, 0x80 },          /* unknown flag */
		{ 8, PROTO_REC_FLUSH, PROTO_REC_MORE },/* MORE on a control record */
		{ PROTO_FRAG_BYTES + 8, PROTO_REC_ITEM, 0 }, /* too long */
		{ 4096, PROTO_REC_ITEM, 0 },          /* longer than what was published */
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ring_attach(&p, m, size, 1);
		ring_attach(&c, m, size, 0);
		ring_reserve(&p, 64, &r);
		*r = (struct proto_rec){ .len = bad[i].len, .kind = bad[i].kind, .flags = bad[i].flags };
		ring_publish(&p);
		CHECK_EQ(ring_peek(&c, &rec, &pl), -EPROTO);
	}
	/* Heads that cannot be. */
	ring_attach(&p, m, size, 1);
	ring_attach(&c, m, size, 0);
	atomic_store(&p.sh->head, size + 8);
	CHECK_EQ(ring_peek(&c, &rec, &pl), -EPROTO);
	atomic_store(&p.sh->head, 12);
	CHECK_EQ(ring_peek(&c, &rec, &pl), -EPROTO);
	atomic_store(&p.sh->head, (uint64_t)-8);
	CHECK_EQ(ring_peek(&c, &rec, &pl), -EPROTO);
	/* A PAD whose length does not reach the end. */
	ring_attach(&p, m, size, 1);
	ring_attach(&c, m, size, 0);
	memcpy(c.data, &(struct proto_rec){ .len = 64, .kind = PROTO_REC_PAD }, 8);
	atomic_store(&p.sh->head, 64);
	CHECK_EQ(ring_peek(&c, &rec, &pl), -EPROTO);
	free(m);
}

TEST(producer_rejects_impossible_tail)
{
	uint64_t size = PROTO_RING_MIN;
	void *m = mem_for(size);
	struct ring p;
	struct proto_rec *r;

	ring_attach(&p, m, size, 1);
	while (ring_reserve(&p, 4000, &r) == 0)
		;
	ring_publish(&p);
	atomic_store(&p.sh->tail, p.head + 8);          /* beyond the head */
	CHECK_EQ(ring_reserve(&p, 4000, &r), -EPROTO);
	atomic_store(&p.sh->tail, 4);                    /* misaligned */
	CHECK_EQ(ring_reserve(&p, 4000, &r), -EPROTO);
	free(m);
}

/* Two threads, the consumer sleeping on an eventfd whenever the ring is empty
 * and the producer waking it only when the flag says so.  A lost wake-up
 * shows as a poll() timeout.  With fenceless, the producer publishes without
 * a fence while the consumer runs membarrier before it looks again, as ferryd
 * and libferry do, until halfway through the consumer withdraws that (as
 * ferryd does when membarrier fails): from then on it sleeps the fenced way,
 * with a short limit until the producer has answered. */
struct stress {
	struct ring p, c;
	int efd_c, efd_p;
	uint32_t n;
	int lost_wakeups, bad;
	uint64_t consumer_sleeps, sleeps_withdrawn, sleeps_offered, rechecks;
	uint64_t sleeps_membarrier_withdrawn;   /* looks with membarrier after the withdrawal */
	int late_answer;                /* 3: the producer answers at its pauses */
	uint64_t answered_at_pause;
	int offered;                    /* a late offer was made */
	_Atomic uint32_t consumed;      /* items the consumer has taken */
	int fenceless_at_end;           /* ring_consumer_fenceless(&c) once done */
};

/* No publish under way: answer a withdrawal now (mode 3), as libferry
 * does before it waits (ring_producer_answer). */
static void answer_at_pause(struct stress *s)
{
	int was = s->p.fenceless;

	if (!s->late_answer)
		return;
	ring_producer_answer(&s->p);
	s->answered_at_pause += was && !s->p.fenceless;
}

static void *producer(void *arg)
{
	struct stress *s = arg;
	uint64_t one = 1;

	for (uint32_t i = 0; i < s->n; i++) {
		while (put(&s->p, i % 61, i) != 0) {
			if (ring_producer_sleep(&s->p, i % 61))
				continue;
			struct pollfd pf = { .fd = s->efd_p, .events = POLLIN };
			uint64_t v;

			if (poll(&pf, 1, 2000) == 0)
				s->lost_wakeups++;
			else if (read(s->efd_p, &v, 8) < 0)
				s->bad++;
			ring_producer_awake(&s->p);
		}
		if ((i & 7) == 7 && ring_publish(&s->p) && write(s->efd_c, &one, 8) < 0)
			s->bad++;
		/* Pause now and then so that the consumer really goes to sleep:
		 * now and then briefly, and every 64 Ki items until it has
		 * taken everything and gone to sleep, whatever the load on the
		 * machine (a consumer that never found the ring empty would
		 * never sleep, nor withdraw the fenceless offer). */
		if ((i & 1023) == 1023) {
			answer_at_pause(s);
			usleep(10);
		}
		if ((i & 65535) == 65535) {
			/* (Everything is published already: i & 7 is 7.  A
			 * publish now would answer a withdrawal that mode 3
			 * wants answered at the pause.) */
			if (!s->late_answer && ring_publish(&s->p) && write(s->efd_c, &one, 8) < 0)
				s->bad++;
			while (atomic_load(&s->consumed) < i + 1 && !s->bad)
				usleep(100);
			usleep(2000);
			answer_at_pause(s);
		}
	}
	if (ring_publish(&s->p) && write(s->efd_c, &one, 8) < 0)
		s->bad++;
	return NULL;
}

/* fenceless: 0, the fenced handshake only; 1, offered before the producer
 * attaches; 2, a late offer, made once a quarter has gone through (while
 * the producer publishes), as between two clients; 3, the same, but after
 * the withdrawal the consumer keeps running membarrier until answered and
 * sleeps without a time limit, and the producer answers at its pauses
 * too, as libferry does (client/recv.c answer_withdrawals). */
static void stress(struct stress *s, int fenceless)
{
	uint64_t size = PROTO_RING_MIN;
	void *m = mem_for(size);
	pthread_t t;
	uint32_t next = 0, tag, len;
	uint64_t one = 1;
	int withdrawn = 0;

	ring_attach(&s->c, m, size, 1);
	if (fenceless == 1)
		ring_consumer_offer_fenceless(&s->c);
	ring_attach(&s->p, m, size, 0);
	s->late_answer = fenceless == 3;
	if (fenceless >= 2)
		ring_producer_await_offer(&s->p, 1);
	else
		ring_producer_set_fenceless(&s->p, fenceless);
	s->efd_c = eventfd(0, EFD_NONBLOCK);
	s->efd_p = eventfd(0, EFD_NONBLOCK);
	pthread_create(&t, NULL, producer, s);
	while (next < s->n) {
		int ret = take(&s->c, &tag, &len), timeout = 2000, unsure;

		if (ret == 1) {
			if (tag != next || len != next % 61) {
				s->bad++;
				break;
			}
			next++;
			atomic_store(&s->consumed, next);
			if ((next & 31) == 0 && ring_release(&s->c) && write(s->efd_p, &one, 8) < 0)
				s->bad++;
			continue;
		}
		if (ret < 0) {
			s->bad++;
			break;
		}
		if (ring_release(&s->c) && write(s->efd_p, &one, 8) < 0)
			s->bad++;
		if (fenceless >= 2 && !s->offered && next >= s->n / 4) {
			ring_consumer_offer_fenceless(&s->c);
			s->offered = 1;
		}
		/* (Mode 3: where the producer pauses, so that its answer
		 * comes between publishes.) */
		if (fenceless && !withdrawn && (fenceless == 3 ? next == 16 * 65536 : next >= s->n / 2)) {
			ring_consumer_withdraw_fenceless(&s->c, fenceless >= 2);
			withdrawn = 1;
		}
		/* As ferryd's ep_sleep_prepare: the answer first, then the look. */
		unsure = ring_consumer_fenceless(&s->c);
		if (unsure && (!withdrawn || fenceless == 3)) {
			s->sleeps_membarrier_withdrawn += withdrawn;
			ring_consumer_arm(&s->c);
			if (syscall(SYS_membarrier, MEMBARRIER_CMD_GLOBAL_EXPEDITED, 0, 0) < 0)
				s->bad++;
			if (ring_consumer_check(&s->c)) {
				ring_consumer_awake(&s->c);
				continue;
			}
		} else {
			if (ring_consumer_sleep(&s->c)) {
				ring_consumer_awake(&s->c);
				continue;
			}
			if (unsure)
				timeout = 10;
		}
		struct pollfd pf = { .fd = s->efd_c, .events = POLLIN };
		uint64_t v;

		s->consumer_sleeps++;
		s->sleeps_withdrawn += withdrawn;
		s->sleeps_offered += s->offered && !withdrawn;
		ret = poll(&pf, 1, timeout);
		if (ret == 0 && timeout == 10)
			s->rechecks++;
		else if (ret == 0)
			s->lost_wakeups++;
		else if (read(s->efd_c, &v, 8) < 0)
			s->bad++;
		ring_consumer_awake(&s->c);
	}
	pthread_join(t, NULL);
	CHECK_EQ(next, s->n);
	CHECK_EQ(s->bad, 0);
	CHECK_EQ(s->lost_wakeups, 0);
	CHECK(s->consumer_sleeps > 0);          /* else the test proved nothing */
	s->fenceless_at_end = ring_consumer_fenceless(&s->c);
	close(s->efd_c);
	close(s->efd_p);
	free(m);
}

TEST(two_threads_no_lost_wakeup)
{
	struct stress s = { .n = 2000000 };

	stress(&s, 0);
	printf("# %llu consumer sleeps\n", (unsigned long long)s.consumer_sleeps);
}

TEST(two_threads_fenceless_then_withdrawn_no_lost_wakeup)
{
	struct stress s = { .n = 2000000 };

	if (syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED, 0, 0) < 0)
		SKIP("membarrier(MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED) fails here");
	stress(&s, 1);
	CHECK_EQ(s.p.fenceless, 0);             /* the producer noticed */
	CHECK_EQ(s.fenceless_at_end, 0);       /* ... and said so */
	CHECK(s.sleeps_withdrawn > 0);
	CHECK(s.consumer_sleeps > s.sleeps_withdrawn);  /* it slept in both halves */
	printf("# %llu consumer sleeps, %llu after the withdrawal, %llu short ones\n",
	       (unsigned long long)s.consumer_sleeps, (unsigned long long)s.sleeps_withdrawn,
	       (unsigned long long)s.rechecks);
}

TEST(two_threads_late_offer_then_withdrawn_no_lost_wakeup)
{
	struct stress s = { .n = 2000000 };

	if (syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED, 0, 0) < 0)
		SKIP("membarrier(MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED) fails here");
	stress(&s, 2);
	CHECK_EQ(s.p.fenceless, 0);
	CHECK_EQ(s.fenceless_at_end, 0);
	CHECK(s.sleeps_offered > 0);            /* it slept under the offer */
	CHECK(s.sleeps_withdrawn > 0);
	CHECK(s.consumer_sleeps > s.sleeps_withdrawn + s.sleeps_offered);  /* and before it */
	printf("# %llu consumer sleeps, %llu under the offer, %llu after the withdrawal, %llu short ones\n",
	       (unsigned long long)s.consumer_sleeps, (unsigned long long)s.sleeps_offered,
	       (unsigned long long)s.sleeps_withdrawn, (unsigned long long)s.rechecks);
}

TEST(two_threads_late_offer_withdrawn_answered_between_publishes)
{
	struct stress s = { .n = 2000000 };

	if (syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED, 0, 0) < 0)
		SKIP("membarrier(MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED) fails here");
	stress(&s, 3);
	CHECK_EQ(s.p.fenceless, 0);
	CHECK_EQ(s.fenceless_at_end, 0);
	CHECK_EQ(s.rechecks, 0);                /* never a time limit */
	CHECK_EQ(s.answered_at_pause, 1);       /* between publishes, not at one */
	CHECK(s.sleeps_offered > 0);
	CHECK(s.sleeps_withdrawn > 0);
	printf("# %llu consumer sleeps, %llu under the offer, %llu after the withdrawal (%llu of them with "
	       "membarrier), answered at a pause: %llu\n",
	       (unsigned long long)s.consumer_sleeps, (unsigned long long)s.sleeps_offered,
	       (unsigned long long)s.sleeps_withdrawn, (unsigned long long)s.sleeps_membarrier_withdrawn,
	       (unsigned long long)s.answered_at_pause);
}

int main(void)
{
	RUN(sizes);
	RUN(wrap_around_keeps_every_record);
	RUN(wrap_around_stops_at_a_damaged_record);
	RUN(full_ring_says_eagain_until_released);
	RUN(room_and_readable_say_what_reserve_and_peek_would);
	RUN(flags_tell_who_must_be_woken);
	RUN(taken_runs_ahead_of_a_held_back_tail);
	RUN(fenceless_publish_ends_when_the_consumer_withdraws_it);
	RUN(late_offer_comes_after_the_first_publish);
	RUN(producer_answers_between_publishes);
	RUN(judge_withdraws_only_what_costs_more_than_it_saves);
	RUN(consumer_rejects_garbage);
	RUN(producer_rejects_impossible_tail);
	RUN(two_threads_no_lost_wakeup);
	RUN(two_threads_fenceless_then_withdrawn_no_lost_wakeup);
	RUN(two_threads_late_offer_then_withdrawn_no_lost_wakeup);
	RUN(two_threads_late_offer_withdrawn_answered_between_publishes);
	return check_done();
}
