/* proto/ring.h - the shared-memory ring between a client and ferryd.
 *
 * One ring per direction per endpoint: TX (client produces, daemon consumes) and
 * RX (daemon produces, client consumes).  Both live in one memfd region that the
 * daemon creates, seals against resizing and passes to the client.
 *
 * A ring is a power-of-two data area behind a 192-byte header.  head and tail are
 * byte counters that only grow; position = counter & (size - 1).  Records are
 * variable length and 8-byte aligned: a 16-byte struct proto_rec followed by the
 * payload, padded to 8.  A record never wraps: when the contiguous space left
 * before the end is too small, the producer writes a PAD record there (its first
 * 8 bytes always fit, since positions are 8-aligned) and continues at offset 0.
 *
 * Wake-ups.  Each direction's sleep and wake-up is a store-buffering (Dekker)
 * handshake: the side about to sleep stores its flag (consumer_sleeping,
 * producer_waiting) and then loads the other side's counter once more; the
 * other side stores its counter (head, tail) and then loads the flag.  C11
 * orders a store before a later load of another object only through the
 * single total order S of seq_cst operations and fences, so each side needs
 * one: the sleeper stores its flag, issues atomic_thread_fence(seq_cst) and
 * loads; the waker (ring_publish, ring_release) stores and loads with
 * seq_cst.  (A seq_cst store followed by an acquire load is not enough: the
 * load is outside S, and a weakly ordered CPU may perform it before the
 * store is visible.)  Why no wake-up is lost, by two of C11's rules for
 * seq_cst fences (7.17.3): (a) a load sequenced after a fence X sees the last
 * seq_cst store preceding X in S, or a later one; (b) a seq_cst load that
 * follows X in S sees a store sequenced before X, or a later one.  Let F be
 * the sleeper's fence, W and R the waker's store and load.  If the sleeper's
 * load misses W, W does not precede F in S (a), so F precedes W, which
 * precedes R (both seq_cst, W sequenced first); the flag store is sequenced
 * before F, so R sees it or a later value (b) and the waker wakes the
 * sleeper.  A later value is the sleeper clearing the flag after it woke for
 * another reason; it then looks again the same way before it sleeps, and
 * that time its fence follows R in S (else R would see the new flag, b),
 * hence follows W, and its load sees W (a).  Counters only grow, so "W or a
 * later value" means "these records or more".
 *
 * Asymmetric fence.  The sequentially consistent store costs a producer that
 * publishes every item (ferry_send) more than the rest of its work: it waits
 * for the head's cache line, which the consumer keeps reading.  So when the
 * consumer promises to run membarrier(MEMBARRIER_CMD_GLOBAL_EXPEDITED) after
 * setting its flag and before looking again, the producer publishes with a
 * plain release store and a compiler barrier: membarrier forces a full
 * barrier on every CPU running the (registered) producer, so that either the
 * head is visible when membarrier returns or the producer's load of the flag
 * comes after the call began and sees it (the liburcu technique; outside
 * C11, whose model has no membarrier).  TX rings and direct rings use it
 * (see "Late offers"); the daemon publishes to RX rings once per batch,
 * fenced.
 *
 * The promise can be withdrawn (membarrier can fail at run time), and the
 * producer only learns it by reading consumer_fences, which it does at every
 * publish.  That read needs no ordering of its own, but it cannot close the
 * gap alone: a publish that read the promise just before it was withdrawn
 * still skips the fence, and nothing makes its head visible before the
 * consumer's next look (the read of consumer_fences is a load after a store
 * too, the same pattern again).  So the producer answers: the first time it
 * finds consumer_fences at 0 it stops publishing without a fence and stores
 * producer_fences = 1 with release.  A consumer that reads that answer with
 * acquire sees every head the producer stored before it (happens-before), and
 * every later publish is fenced, so from then on the handshake above holds.
 * Until the answer comes, the consumer must not sleep without a time limit
 * on that ring: it looks again now and then (C11 7.17.3 asks that a store
 * become visible to loads "within a reasonable amount of time"), as
 * ferryd does, or keeps running membarrier before it sleeps, as a client
 * does, since it cannot limit a sleep on ferry_fd().  On a TX ring the
 * offer is made before the producer attaches and withdrawn for good; a
 * producer that never uses it (not registered, or not offered) answers at
 * once when it attaches.
 *
 * Late offers.  Between two clients (the direct rings, proto/direct.h)
 * nobody orders the offer before the first publish: each end sets up its
 * side when ferryd's message reaches it.  There consumer_fences says one of
 * three things: 0, no offer yet (publish with a fence and look again next
 * time); 1, offered; RING_FENCES_WITHDRAWN, withdrawn (answer as above).  A
 * late offer is sound: a consumer never sleeps on the ring between its offer
 * and the answer without membarrier first, and a publish that skipped the
 * fence read the offer, so it was stored after the consumer's earlier sleeps
 * (which were fenced ones, racing only with fenced publishes) had begun
 * looking.  The producer says which it expects with
 * ring_producer_await_offer, and may answer a withdrawal at any time when
 * none of its publishes is under way, not only at the next one.
 *
 * Taken.  The consumer may read records and still not give their room back
 * (ferryd sends large pieces straight from a TX ring until the peer has them:
 * daemon/local/endpoint.h "Loans").  Beside tail it publishes taken, how far
 * it has read, so that a producer that waits for its records to be taken
 * (ferry_close) need not wait for the room.  Zero from a consumer that does
 * not know it (the word was padding): the producer then goes by tail.
 *
 * Trust.  Each side keeps its own copy of size and of its own counter; counters
 * and records read from shared memory are validated on every read, and record
 * headers are copied out before they are checked, so a peer writing concurrently
 * cannot make us read outside the ring.  No I/O here: the caller owns eventfds.
 */
#ifndef FERRY_PROTO_RING_H
#define FERRY_PROTO_RING_H

#include <assert.h>
#include <errno.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define PROTO_CACHELINE 64

/* Region and ring limits.  Record payloads are at most PROTO_FRAG_BYTES: larger
 * items travel as a run of fragments (PROTO_REC_MORE on all but the last,
 * each with its index in the item: PROTO_REC_FRAG). */
#define PROTO_FRAG_BYTES   (64u * 1024)
#define PROTO_RING_MIN     (256u * 1024)        /* holds two maximal records */
#define PROTO_RING_MAX     (1u << 30)

enum proto_rec_kind {
	PROTO_REC_ITEM  = 1,    /* an item or a fragment of one */
	PROTO_REC_PAD   = 2,    /* skip to the end of the ring; only len..flags are valid */
	PROTO_REC_FLUSH = 3,    /* TX only: send this endpoint's buffered items now */
	PROTO_REC_DONE  = 4,    /* TX only: this rank sends no more items in the step */
	PROTO_REC_STEP  = 5,    /* RX: the step numbered in dst has completed; in a
				 * direct ring: its writer's part of step dst
				 * ends here (proto/direct.h) */
	PROTO_REC_FAIL  = 6,    /* RX only: the job cannot complete step dst or any
				 * later one: channel is the errno (EPIPE: a rank
				 * left, EHOSTDOWN: a node was lost), src the rank
				 * that left or UINT32_MAX, the payload a message */
	PROTO_REC_BATCH = 7,    /* TX only: items for rank dst (see "Batches") */
	PROTO_REC_DENSE = 8,    /* TX, RX and direct rings: items of one length and
				 * channel for rank dst (see "Dense batches") */
	PROTO_REC_KIND_MAX = PROTO_REC_DENSE,
};

enum proto_rec_flags {
	PROTO_REC_MORE = 1u << 0,       /* fragment; more of the same item follow */
	/* Bits 1-6: the fragment's index in its item (PROTO_REC_FRAG; 0 for the
	 * first fragment and for a whole item; FERRY_MAX_ITEM is 64 fragments).
	 * Where fragments were lost on the way (a lost link's transit data, a
	 * restarted node's queue), the receiver tells a rest without its start
	 * from the next piece of the item it is putting together
	 * (client/recv.c). */
	PROTO_REC_FRAG_MASK = 0x3fu << 1,
	PROTO_REC_FLAGS_ALL = PROTO_REC_MORE | PROTO_REC_FRAG_MASK,
};
#define PROTO_REC_FRAG(flags)  (((uint32_t)(flags) & PROTO_REC_FRAG_MASK) >> 1)
#define PROTO_REC_FRAG_MAX     63u

/* One record in a ring.  The same layout carries control records. */
struct proto_rec {
	uint32_t len;           /* payload bytes after this header, <= PROTO_FRAG_BYTES */
	uint8_t  kind;          /* enum proto_rec_kind */
	uint8_t  flags;         /* enum proto_rec_flags; other bits must be zero */
	uint16_t channel;       /* application channel */
	uint32_t dst;           /* destination rank (STEP: step number) */
	uint32_t src;           /* source rank; on TX the daemon overrides it */
};
static_assert(sizeof(struct proto_rec) == 16, "ring record layout");
/* The per-item loops read and write the header as two little-endian words
 * (ferry_send, collect_fast, ferryd's drain_fast, wire.h's conversions). */
static_assert(offsetof(struct proto_rec, kind) == 4 && offsetof(struct proto_rec, flags) == 5 &&
	      offsetof(struct proto_rec, channel) == 6 && offsetof(struct proto_rec, dst) == 8 &&
	      offsetof(struct proto_rec, src) == 12, "struct proto_rec's words");

/* The shared header in front of each ring's data.  head and tail change all
 * the time, each on its own line; the flags change only when a side goes to
 * sleep or wakes up (or, once, when the fenceless publish ends), so they
 * share a third line that otherwise stays cached read-only on both sides (the
 * producer reads consumer_fences and consumer_sleeping at every publish).
 * The last two were zero, unused, in the first layout: a consumer that does
 * not know them offers nothing, and a producer that does not know them never
 * answers (after a withdrawal the consumer then keeps looking at its ring now
 * and then, or running membarrier, which is right for a producer that never
 * fences). */
struct proto_ring_shared {
	_Alignas(PROTO_CACHELINE) _Atomic uint64_t head;   /* written by the producer */
	_Alignas(PROTO_CACHELINE) _Atomic uint64_t tail;   /* written by the consumer */
	_Atomic uint64_t taken;         /* consumer: it has read up to here (see "Taken") */
	_Alignas(PROTO_CACHELINE) _Atomic uint32_t consumer_sleeping; /* consumer waits for records */
	_Atomic uint32_t producer_waiting;                  /* producer waits for space */
	_Atomic uint32_t consumer_fences;   /* consumer: 1 while it runs membarrier for the producer
					     * (RING_FENCES_WITHDRAWN: see "Late offers") */
	_Atomic uint32_t producer_fences;   /* producer: 1 once it fences every publish */
};
static_assert(sizeof(struct proto_ring_shared) == 3 * PROTO_CACHELINE, "ring header layout");
static_assert(offsetof(struct proto_ring_shared, tail) == PROTO_CACHELINE, "tail on its own line");
static_assert(offsetof(struct proto_ring_shared, taken) == PROTO_CACHELINE + 8, "taken beside tail");
static_assert(offsetof(struct proto_ring_shared, consumer_sleeping) == 2 * PROTO_CACHELINE,
	      "flags on their own line");
static_assert(offsetof(struct proto_ring_shared, producer_fences) == 2 * PROTO_CACHELINE + 12,
	      "flag layout");

/* Batches.  A client that opened with FERRY_BATCH keeps small items per
 * destination rank in its own memory and hands them over as one BATCH record
 * (client/send.c): dst is their rank, flags 0, channel 0, and the payload
 * (at most PROTO_BATCH_MAX bytes) is the items' own records back to back,
 * exactly as they will lie in the receiver's RX ring: kind ITEM, flags 0,
 * dst and src the batch's, len at most PROTO_BATCH_ITEM_MAX.  So the daemons
 * route a batch once, carry it as one wire element (WIRE_ITEM_BATCH) and
 * write it into the RX ring with one copy.  proto_batch_check validates the
 * records; it must run on memory the other side cannot change (a copy),
 * since what it checks is then used unchecked. */
#define PROTO_BATCH_MAX       4096u
#define PROTO_BATCH_ITEM_MAX  (PROTO_BATCH_MAX - 2 * 16u)

/* Checks the len bytes of item records at p (8-aligned) as a batch for the
 * record header word w1 (dst | src << 32).  Returns how many records there
 * are (>= 1), or 0 if they are not a valid batch. */
static inline uint32_t proto_batch_check(const uint8_t *p, uint32_t len, uint64_t w1)
{
	uint32_t off = 0, n = 0;

	if (len == 0 || len > PROTO_BATCH_MAX || (len & 7))
		return 0;
	while (off < len) {
		uint64_t w0, v1, fp;

		if (len - off < 16)
			return 0;
		__builtin_memcpy(&w0, p + off, 8);
		__builtin_memcpy(&v1, p + off + 8, 8);
		/* kind ITEM and flags 0 in one compare; the channel is free */
		fp = 16 + (((w0 & 0xffffffffu) + 7) & ~(uint64_t)7);
		if (((w0 >> 32) & 0xffff) != PROTO_REC_ITEM || v1 != w1 ||
		    (uint32_t)w0 > PROTO_BATCH_ITEM_MAX || fp > len - off)
			return 0;
		off += (uint32_t)fp;
		n++;
	}
	return n;
}

/* Dense batches.  Where every item of a batch has the same length L and
 * the same channel (bale's histogram and index-gather, HPCC RandomAccess:
 * 8-byte items), a per-item header is two thirds of the bytes: 24 bytes per
 * 8-byte item in every ring, on the wire and in every copy, and a check
 * that walks every record twice (the sending daemon, the receiving one).
 * So such a batch travels as one DENSE record instead: kind DENSE, flags 0,
 * channel 0, dst and src the items', and a payload of an 8-byte struct
 * proto_dense (L, the items' channel, their count) followed by the items
 * at a stride of L rounded up to 8, so that every item's data is 8-byte
 * aligned as in any record (L = 0: stride 0, the count says how many).
 * len is exactly 8 + count x stride, at most PROTO_BATCH_MAX: 8 bytes per
 * 8-byte item plus 24 per batch.  Checking one is O(1)
 * (proto_dense_check): the header against len; the items are opaque
 * bytes.  The padding after each item is the sender's (libferry zeroes
 * it); nobody checks it, since it shows nobody anything but the sender's
 * own bytes.  The same payload is the TX record's (client/send.c), the
 * wire element's (proto/wire.h WIRE_ITEM_DENSE), the RX record's and a
 * direct ring's record's (proto/direct.h), so each hop copies it as it is;
 * the receiving library hands its items out one by one as struct
 * ferry_item, pointing into the record (client/recv.c), and gives the
 * record's room back once every item of it was handed out and released.
 * The channel lives in the payload, not in the record header, because on
 * the wire the element's channel field holds the count (as for
 * WIRE_ITEM_BATCH), and the payload must not change on the way.
 *
 * The check must read the header once, from memory the other side cannot
 * change, or as one word (ring_word) whose value is then used alone: the
 * daemons copy the items after the header and write the header they
 * checked, never the client's again. */
#define PROTO_DENSE_ITEM_MAX  PROTO_BATCH_ITEM_MAX
#define PROTO_DENSE_COUNT_MAX 512u

struct proto_dense {
	uint16_t len;           /* L: every item's length, <= PROTO_DENSE_ITEM_MAX */
	uint16_t channel;       /* every item's channel */
	uint32_t count;         /* items, 1..PROTO_DENSE_COUNT_MAX */
};
static_assert(sizeof(struct proto_dense) == 8, "dense batch header layout");
static_assert(PROTO_DENSE_ITEM_MAX <= 0xffff, "L fits its field");

/* The item length, channel, stride and count of a dense header word
 * (little-endian: len | channel << 16 | count << 32). */
static inline uint32_t proto_dense_len(uint64_t h)
{
	return (uint32_t)(h & 0xffff);
}
static inline uint16_t proto_dense_channel(uint64_t h)
{
	return (uint16_t)(h >> 16);
}
static inline uint32_t proto_dense_stride(uint64_t h)
{
	return (proto_dense_len(h) + 7) & ~7u;
}

/* For a DENSE record of len payload bytes whose header word is h: how many
 * items it holds, or 0 if it is not a valid dense batch. */
static inline uint32_t proto_dense_check(uint64_t h, uint32_t len)
{
	uint32_t count = (uint32_t)(h >> 32);

	/* (len at most PROTO_BATCH_MAX here, for every caller: a node must
	 * take what the node before it took, and libferry takes no more.) */
	if (len > PROTO_BATCH_MAX || proto_dense_len(h) > PROTO_DENSE_ITEM_MAX || count == 0 ||
	    count > PROTO_DENSE_COUNT_MAX || len != sizeof(struct proto_dense) + (uint64_t)count * proto_dense_stride(h))
		return 0;
	return count;
}

/* The header word of a dense payload at p (8-aligned; memory of our own,
 * or a ring read as ring_word reads it). */
static inline uint64_t proto_dense_word(const void *p)
{
	return __atomic_load_n((const uint64_t *)p, __ATOMIC_RELAXED);
}

/* Items a record holds: 1 for an item (or a piece of one), the count of a
 * DENSE record (its payload checked already, in memory of our own), 0
 * for anything else. */
static inline uint32_t proto_rec_items(const struct proto_rec *rec, const void *payload)
{
	if (rec->kind == PROTO_REC_ITEM)
		return 1;
	if (rec->kind == PROTO_REC_DENSE)
		return (uint32_t)(proto_dense_word(payload) >> 32);
	return 0;
}

/* A side's private view of a ring. */
struct ring {
	struct proto_ring_shared *sh;
	uint8_t *data;
	uint64_t size;          /* private copy; power of two */
	uint64_t head;          /* producer: next write; consumer: last validated head */
	uint64_t tail;          /* consumer: next read; producer: last seen tail */
	uint64_t published;     /* consumer: tail last made visible to the producer */
	uint64_t published_taken; /* consumer: taken last made visible */
	uint64_t fast_end;      /* producer: ring_reserve_fast may fill up to this
				 * counter (the end of the lap, or tail + size if
				 * that comes first); ring_set_fast_end */
	int fenceless;          /* producer: 0, we fence every publish; RING_FENCELESS,
				 * the consumer offered before we attached;
				 * RING_FENCELESS_LATE, it may offer any time (see
				 * "Late offers").  Consumer: we offered and have
				 * no answer yet */
};

/* Copies n bytes of an item payload: small ones (the common case, once per
 * item per hop) without a call into libc.  dst has room for n rounded up to
 * 8, as ring records and frame items do; src is read only within n bytes. */
static inline void proto_copy(uint8_t *dst, const uint8_t *src, size_t n)
{
	if (n > 64) {
		__builtin_memcpy(dst, src, n);
	} else if (n >= 8) {
		size_t i;

		if (n <= 16) {  /* the commonest: two words, overlapping if need be */
			uint64_t a, b;

			__builtin_memcpy(&a, src, 8);
			__builtin_memcpy(&b, src + n - 8, 8);
			__builtin_memcpy(dst, &a, 8);
			__builtin_memcpy(dst + n - 8, &b, 8);
			return;
		}
		for (i = 0; i + 8 <= n; i += 8)
			__builtin_memcpy(dst + i, src + i, 8);
		if (i < n)      /* the tail, as 8 bytes overlapping what is copied */
			__builtin_memcpy(dst + n - 8, src + n - 8, 8);
	} else if (n >= 4) {
		__builtin_memcpy(dst, src, 4);
		__builtin_memcpy(dst + n - 4, src + n - 4, 4);
	} else if (n) {
		dst[0] = src[0];
		dst[n / 2] = src[n / 2];
		dst[n - 1] = src[n - 1];
	}
}

/* Bytes a record with len payload bytes takes in a ring. */
static inline uint64_t ring_footprint(uint32_t len)
{
	return sizeof(struct proto_rec) + (((uint64_t)len + 7) & ~(uint64_t)7);
}

/* For records at p that proto_batch_check accepted (len bytes): how many
 * of them lie before offset off, in *before; returns 1 if off is where one
 * starts (or len), 0 if it falls inside one or past len. */
static inline int proto_batch_at(const uint8_t *p, uint32_t len, uint32_t off, uint32_t *before)
{
	uint32_t o = 0, n = 0;

	while (o < off && o < len) {
		uint32_t rlen;

		__builtin_memcpy(&rlen, p + o, 4);
		o += (uint32_t)ring_footprint(rlen);
		n++;
	}
	*before = n;
	return o == off;
}

/* Returns 1 if size is a valid ring data size. */
int ring_size_ok(uint64_t size);

/* Bytes of shared memory for a ring with size data bytes (header included). */
static inline uint64_t ring_bytes(uint64_t size)
{
	return sizeof(struct proto_ring_shared) + size;
}

/* Sets up a view of the ring at mem (ring_bytes(size) bytes).  With init the
 * shared header is zeroed (the creator does this once).  size must be ring_size_ok. */
void ring_attach(struct ring *r, void *mem, uint64_t size, int init);

/* Sets up a view of a ring that its creator made zero and the other side
 * may have begun to use: both counters start at 0, and nothing is read
 * from the shared header (which the other side may have filled with
 * anything by now: what it published is read later, checked). */
void ring_attach_new(struct ring *r, void *mem, uint64_t size);

/* --- producer --- */

/* Reserves room for a record of len payload bytes (len <= PROTO_FRAG_BYTES) and
 * sets *rec_p to its header, to be filled by the caller.  Writes a PAD record
 * first if needed.  The record becomes visible at the next ring_publish().
 * Returns 0, -EAGAIN if the ring has no room now, or -EPROTO if the consumer
 * published an impossible tail (the ring is unusable). */
int ring_reserve(struct ring *r, uint32_t len, struct proto_rec **rec_p);

/* The common case of ring_reserve, inline for the per-item path: room in the
 * ring without wrapping around.  Returns the record's header, or NULL when
 * the caller must take the general path (ring_reserve). */
static inline struct proto_rec *ring_reserve_fast(struct ring *r, uint32_t len)
{
	uint64_t head = r->head, fp = ring_footprint(len);
	struct proto_rec *rec;

	/* One comparison: fast_end is where the lap ends or the room does. */
	if (__builtin_expect(head + fp > r->fast_end, 0))
		return NULL;
	rec = (struct proto_rec *)(r->data + (head & (r->size - 1)));
	r->head = head + fp;
	return rec;
}

/* consumer_fences of a withdrawn late offer (see "Late offers"). */
#define RING_FENCES_WITHDRAWN 2u

/* r->fenceless of a producer: the consumer offered before we attached
 * (0 in consumer_fences means withdrawn), or may offer later ("Late
 * offers": 0 means not yet). */
enum { RING_FENCELESS = 1, RING_FENCELESS_LATE = 2 };

/* Producer: the consumer's offer has been withdrawn (see "Asymmetric
 * fence"): publish with a fence from now on and say so. */
void ring_producer_fence_always(struct ring *r);

/* Producer with an offer (r->fenceless): whether offer, the consumer_fences
 * it read, says the offer is gone, to be answered (ring_producer_fence_always):
 * anything but 1, except 0 where the offer may still come ("Late offers").
 * Garbage from a peer counts as gone. */
static inline int ring_offer_gone(const struct ring *r, uint32_t offer)
{
	return offer != 1 && (offer != 0 || r->fenceless != RING_FENCELESS_LATE);
}

/* Makes every reserved record visible.  Returns 1 if the consumer sleeps and
 * must be woken (the caller writes its eventfd), else 0. */
static inline int ring_publish(struct ring *r)
{
	if (r->fenceless) {
		/* Relaxed: whatever this read returns, the consumer keeps
		 * looking until we answer (see "Asymmetric fence").  It shares
		 * its line with consumer_sleeping, read anyway. */
		uint32_t offer = atomic_load_explicit(&r->sh->consumer_fences, memory_order_relaxed);

		if (__builtin_expect(offer == 1, 1)) {
			/* The consumer's membarrier supplies the StoreLoad
			 * fence; the compiler must still not move the load
			 * above the store. */
			atomic_store_explicit(&r->sh->head, r->head, memory_order_release);
			atomic_signal_fence(memory_order_seq_cst);
			return atomic_load_explicit(&r->sh->consumer_sleeping, memory_order_relaxed) != 0;
		}
		if (ring_offer_gone(r, offer))
			ring_producer_fence_always(r);
	}
	/* The waker's half of the handshake (see "Wake-ups"): both accesses
	 * seq_cst, so that the store precedes the load in S. */
	atomic_store_explicit(&r->sh->head, r->head, memory_order_seq_cst);
	return atomic_load_explicit(&r->sh->consumer_sleeping, memory_order_seq_cst) != 0;
}

/* Producer, once attached: fenceless says whether this process may publish
 * without a fence (it was offered that and registered for membarrier).  If
 * not, or if the consumer offers nothing, it answers at once that it fences
 * every publish. */
void ring_producer_set_fenceless(struct ring *r, int fenceless);

/* Producer, once attached, of a ring whose consumer may offer later ("Late
 * offers"): fenceless as above.  If not, it answers at once. */
void ring_producer_await_offer(struct ring *r, int fenceless);

/* Producer about to wait until a record of len payload bytes fits: sets
 * producer_waiting, fences, and returns 1 if the room appeared meanwhile (the
 * flag is cleared again and the caller must not sleep), 0 to go to sleep. */
int ring_producer_sleep(struct ring *r, uint32_t len);
void ring_producer_awake(struct ring *r);

/* Producer: 1 if a record of len payload bytes fits now (ring_reserve would
 * succeed), 0 if not, -EPROTO if the consumer published an impossible tail.
 * Changes nothing but the cached tail. */
int ring_has_room(struct ring *r, uint32_t len);

/* Like ring_producer_sleep, but waits until the consumer has taken everything
 * (tail, or taken: see "Taken"): returns 1 if it has now (flag cleared), 0 to
 * go to sleep. */
int ring_producer_sleep_empty(struct ring *r);

/* --- consumer --- */

/* Looks at the next record.  Returns 1 and fills *rec_p (a copy) and *payload_p
 * (pointer into the ring, valid until the record is released) ; 0 if the ring is
 * empty; -EPROTO if the producer wrote something invalid (the ring is unusable).
 * PAD records are skipped here and never returned. */
int ring_peek(struct ring *r, struct proto_rec *rec_p, const void **payload_p);

/* The common case of ring_peek, inline for the per-item path: a whole item
 * record within what was validated of head.  Returns 1 as ring_peek does, or
 * 0 meaning "take the general path" (which also handles an empty ring, PAD,
 * other kinds and errors). */
static inline int ring_peek_fast(struct ring *r, struct proto_rec *rec_p, const void **payload_p)
{
	uint64_t pos = r->tail & (r->size - 1);
	uint64_t avail = r->head - r->tail, contig = r->size - pos, fp;

	if (avail < sizeof(*rec_p) || contig < sizeof(*rec_p))
		return 0;
	__builtin_memcpy(rec_p, r->data + pos, sizeof(*rec_p));
	fp = ring_footprint(rec_p->len);
	if (rec_p->kind != PROTO_REC_ITEM || (rec_p->flags & ~PROTO_REC_FLAGS_ALL) ||
	    rec_p->len > PROTO_FRAG_BYTES || fp > avail || fp > contig)
		return 0;
	*payload_p = r->data + pos + sizeof(*rec_p);
	return 1;
}

/* Consumer: 1 if a record waits to be read (ring_peek returns it, or finds
 * it invalid), 0 if the ring looks empty.  One relaxed load, no fence: for
 * deciding whether to look or to sleep (the sleep itself goes through
 * ring_consumer_sleep, which fences). */
static inline int ring_readable(const struct ring *r)
{
	return r->head != r->tail || atomic_load_explicit(&r->sh->head, memory_order_relaxed) != r->tail;
}

/* One 8-byte word of a record in shared memory (p 8-aligned, as record
 * headers are), read exactly once: a relaxed atomic load, so that the
 * compiler can neither read it twice (a check on one value and a use of
 * another that the other side wrote in between) nor tear it.  The same
 * single move as a plain load. */
static inline uint64_t ring_word(const uint8_t *p)
{
	return __atomic_load_n((const uint64_t *)(const void *)p, __ATOMIC_RELAXED);
}

/* Consumer: reads the producer's head again, for a caller that keeps its
 * own copy of tail (the records before tail are taken).  Returns 0 with
 * r->head updated, or -EPROTO if the head is impossible (ring_peek then
 * says so too). */
static inline int ring_refresh_head(struct ring *r, uint64_t tail)
{
	uint64_t h = atomic_load_explicit(&r->sh->head, memory_order_acquire);

	if (h - tail > r->size || h - r->published > r->size || (h & 7))
		return -EPROTO;
	r->head = h;
	return 0;
}

/* Moves past the record last returned by ring_peek (its payload stays valid
 * until ring_release). */
void ring_consume(struct ring *r, const struct proto_rec *rec);

/* Returns consumed space to the producer.  Returns 1 if the producer waits for
 * space and must be woken, else 0. */
int ring_release(struct ring *r);
/* The same, up to the counter to only (published <= to <= tail): a consumer
 * that still reads records before its tail (ferryd's loans).  Publishes
 * taken (the tail) too. */
int ring_release_to(struct ring *r, uint64_t to);

/* Consumer about to sleep: sets consumer_sleeping, fences, and returns 1 if a
 * record arrived meanwhile (flag cleared again; do not sleep).  For a
 * fenceless producer, arm every ring first (ring_consumer_arm), run
 * membarrier, then ring_consumer_check each: 1 means records arrived. */
int ring_consumer_sleep(struct ring *r);
void ring_consumer_arm(struct ring *r);
int ring_consumer_check(struct ring *r);
void ring_consumer_awake(struct ring *r);

/* Consumer, before the producer attaches (or at any time, on a ring whose
 * producer awaits it: "Late offers"): promises to run membarrier between
 * ring_consumer_arm and ring_consumer_check, so that the producer may publish
 * without a fence (see "Asymmetric fence"). */
void ring_consumer_offer_fenceless(struct ring *r);

/* Consumer: withdraws the promise, for good.  Until ring_consumer_fenceless
 * says 0, the producer may still publish without a fence: the consumer
 * sleeps with ring_consumer_sleep but not without a time limit, or keeps
 * running membarrier.  late: the offer was a late one (see "Late offers"). */
void ring_consumer_withdraw_fenceless(struct ring *r, int late);

/* Consumer: 1 while the producer may publish without a fence (offered and
 * not answered yet), 0 once it fences every publish.  The answer comes from
 * shared memory: a producer that lies only delays its own records. */
int ring_consumer_fenceless(struct ring *r);

/* Producer, when none of its publishes is under way (before it sleeps, at
 * the end): answers a withdrawn offer now rather than at its next publish,
 * so that the consumer can stop running membarrier for it. */
void ring_producer_answer(struct ring *r);

/* Whether an offer pays.  It saves each producer a fence per publish
 * (about RING_FENCE_NS where the consumer reads on another core) and costs
 * the consumer a membarrier call per sleep: 0.3 us where nothing else
 * runs, but about 20 us where the other cores run registered processes,
 * which the call interrupts (ferryd and libferry register), and a
 * sustained all-to-all, whose readers sleep every few hundred items, ran
 * at half speed with direct rings offered and 10 % slower with ferryd's
 * offers.  So a consumer times its calls, and once those of a window of
 * RING_JUDGE_WINDOW calls have taken longer than a microsecond each on
 * average and longer than RING_FENCE_NS for each publish its producers
 * made meanwhile without a fence (the caller counts only those of rings
 * still offered and unanswered), it withdraws its offers.  Judged at every call, so that
 * 20 us calls end them after four; and only while they cost that much on
 * average, since a consumer that waits for a producer to begin sleeps
 * often and reads little, which says nothing about the stream, and calls
 * that cheap never cost much (a sleeping ping-pong: 0.3 us a round trip).
 * Pure: the caller counts and times. */
#define RING_FENCE_NS 30u
#define RING_JUDGE_WINDOW 64u

struct ring_judge {
	uint64_t calls, ns, publishes;          /* so far */
	uint64_t window_ns, window_publishes;   /* at the window's start */
};

/* One membarrier call took call_ns; publishes is how many publishes the
 * offered producers have made so far.  Returns 1 if the offers should be
 * withdrawn (the window starts again). */
static inline int ring_judge(struct ring_judge *j, uint64_t call_ns, uint64_t publishes)
{
	uint64_t ns;

	j->ns += call_ns;
	j->publishes = publishes;
	ns = j->ns - j->window_ns;
	if (ns > RING_JUDGE_WINDOW * 1000ull && ns > (publishes - j->window_publishes) * RING_FENCE_NS) {
		j->window_ns = j->ns;
		j->window_publishes = publishes;
		return 1;
	}
	if (++j->calls % RING_JUDGE_WINDOW == 0) {
		j->window_ns = j->ns;
		j->window_publishes = publishes;
	}
	return 0;
}

#endif
