/* client/send.c - libferry's sending side: items, FLUSH and DONE records
 * into the TX ring.  See internal.h.
 */
#include "internal.h"
#include "../proto/clock.h"
#include "../proto/ring.h"

#include <assert.h>
#include <errno.h>
#include <string.h>

/* Every fragment of the largest item has an index (proto/ring.h). */
static_assert(FERRY_MAX_ITEM / PROTO_FRAG_BYTES <= PROTO_REC_FRAG_MAX + 1, "fragment indexes");

static int wait_room_armed(struct ferry *f, uint32_t len);

/* Waits for room for a record of len bytes in the TX ring; its waits may
 * take the eventfd count that was to make ferry_fd() readable, so an armed
 * fd is armed again after (poll_rearm). */
static int wait_room(struct ferry *f, uint32_t len)
{
	int was_armed = f->armed, ret;

	f->armed = 0;
	ret = wait_room_armed(f, len);
	if (was_armed && !f->dead)
		poll_rearm(f);
	return ret;
}

static int wait_room_armed(struct ferry *f, uint32_t len)
{
	uint64_t spin_until = proto_now_ns() + f->spin_us * 1000ull;

	while (proto_now_ns() < spin_until) {
		if (ring_producer_sleep(&f->tx, len))   /* also refreshes the tail */
			return 0;
		ring_producer_awake(&f->tx);
	}
	for (;;) {
		int ret;

		if (ring_producer_sleep(&f->tx, len))
			return 0;
		ret = conn_wait(f, -1);
		ring_producer_awake(&f->tx);
		if (ret < 0)
			return ret;
	}
}

static int put_rec(struct ferry *f, uint8_t kind, uint8_t flags, uint32_t dst, uint16_t channel,
		   const void *buf, uint32_t len, int block)
{
	struct proto_rec *rec;
	int ret;

	if (f->dead)
		return f->dead;
	while ((ret = ring_reserve(&f->tx, len, &rec)) != 0) {
		if (ret == -EPROTO)
			return f->dead = conn_seterr(-EPROTO, "ferryd published an impossible TX tail");
		if (!block) {
			f->want_room = len;     /* what FERRY_POLLOUT waits for */
			return -EAGAIN;
		}
		/* Only now is a check for a vanished daemon worth its syscall. */
		if ((ret = conn_check(f)) < 0 || (ret = wait_room(f, len)) < 0)
			return ret;
	}
	rec->len = len;
	rec->kind = kind;
	rec->flags = flags;
	rec->channel = channel;
	rec->dst = dst;
	rec->src = f->rank;
	if (len)
		memcpy(rec + 1, buf, len);
	if (ring_publish(&f->tx))
		conn_wake(f->efd_daemon);
	return 0;
}

static int send_slow(ferry_t *f, uint32_t dst, uint32_t channel, const void *buf, size_t len);

FERRY_API int ferry_send(ferry_t *f, uint32_t dst, uint32_t channel, const void *buf, size_t len)
{
	struct proto_rec *rec;

	/* Fast path, the reason ferry exists: a small item, room in the ring.
	 * Everything unusual (errors, a full ring, the end of the ring, large
	 * items) takes the general way, kept out of line so that this path
	 * saves no registers it does not use. */
	static_assert(PROTO_FRAG_BYTES == 1u << 16 && FERRY_MAX_CHANNEL == 0xffff, "one shift checks both");
	/* (An item of exactly PROTO_FRAG_BYTES takes the general way.) */
	if (__builtin_expect(((len | channel) >> 16) == 0 && dst < f->size && !(f->step_done | f->dead), 1) &&
	    (rec = ring_reserve_fast(&f->tx, (uint32_t)len)) != NULL) {
		/* The header as two words: len, kind, flags 0, channel; dst, us. */
		uint64_t w0 = len | (uint64_t)PROTO_REC_ITEM << 32 | (uint64_t)channel << 48;
		uint64_t w1 = dst | f->src_word;

		memcpy(rec, &w0, 8);
		memcpy((uint8_t *)rec + 8, &w1, 8);
		proto_copy((uint8_t *)(rec + 1), buf, len);
		if (__builtin_expect(ring_publish(&f->tx), 0))
			conn_wake(f->efd_daemon);
		return 0;
	}
	return send_slow(f, dst, channel, buf, len);
}

__attribute__((noinline))
static int send_slow(ferry_t *f, uint32_t dst, uint32_t channel, const void *buf, size_t len)
{
	const uint8_t *p = buf;
	int ret;

	if (f->step_done)
		return conn_seterr(-EBUSY, "step %u ended with ferry_done: call ferry_step_wait before sending again",
				   f->step);
	if (dst >= f->size)
		return conn_seterr(-EINVAL, "rank %u is outside the job (size %u)", dst, f->size);
	if (channel > FERRY_MAX_CHANNEL)
		return conn_seterr(-EINVAL, "channel %u is above %u", channel, FERRY_MAX_CHANNEL);
	if (len > FERRY_MAX_ITEM)
		return conn_seterr(-EMSGSIZE, "item of %zu bytes is above FERRY_MAX_ITEM (%u)", len, FERRY_MAX_ITEM);
	if (len <= PROTO_FRAG_BYTES)
		return put_rec(f, PROTO_REC_ITEM, 0, dst, (uint16_t)channel, buf, (uint32_t)len,
			       f->flags & FERRY_BLOCKING);
	/* A large item: once its first piece is in, the rest must follow (the
	 * receiver reassembles the pieces of one sender in order). */
	ret = put_rec(f, PROTO_REC_ITEM, PROTO_REC_MORE, dst, (uint16_t)channel, p, PROTO_FRAG_BYTES,
		      f->flags & FERRY_BLOCKING);
	if (ret < 0)
		return ret;
	for (size_t off = PROTO_FRAG_BYTES; off < len; off += PROTO_FRAG_BYTES) {
		uint32_t piece = (uint32_t)(len - off < PROTO_FRAG_BYTES ? len - off : PROTO_FRAG_BYTES);
		uint8_t frag = (uint8_t)((off / PROTO_FRAG_BYTES) << 1);     /* PROTO_REC_FRAG */

		ret = put_rec(f, PROTO_REC_ITEM, frag | (off + piece < len ? PROTO_REC_MORE : 0), dst,
			      (uint16_t)channel, p + off, piece, 1);
		if (ret < 0)
			return ret;
	}
	return 0;
}

FERRY_API int ferry_flush(ferry_t *f)
{
	return put_rec(f, PROTO_REC_FLUSH, 0, 0, 0, NULL, 0, f->flags & FERRY_BLOCKING);
}

FERRY_API int ferry_done(ferry_t *f)
{
	int ret;

	if (f->step_done)
		return conn_seterr(-EALREADY, "ferry_done was already called in step %u", f->step);
	/* The DONE record must get in (the daemon counts this rank's items up
	 * to it), so wait for room whatever FERRY_BLOCKING says. */
	ret = put_rec(f, PROTO_REC_DONE, 0, 0, 0, NULL, 0, 1);
	if (ret == 0)
		f->step_done = 1;
	return ret;
}

/* Waits until the daemon has taken every TX record, at most timeout_ms. */
static int wait_tx_empty(struct ferry *f, int timeout_ms)
{
	uint64_t deadline = timeout_ms < 0 ? 0 : proto_now_ms() + (uint64_t)timeout_ms;

	for (;;) {
		int ret, wait;

		if (ring_producer_sleep_empty(&f->tx)) {
			if (f->tx.tail != f->tx.head)
				return conn_seterr(-EPROTO, "ferryd published an impossible TX tail");
			return 0;
		}
		wait = conn_wait_ms(deadline, timeout_ms < 0);
		ret = conn_wait(f, wait);
		ring_producer_awake(&f->tx);
		if (ret == -ETIMEDOUT)
			return conn_seterr(-ETIMEDOUT, "ferryd did not take the last items within %d ms", timeout_ms);
		if (ret < 0)
			return ret;
	}
}

int tx_drain(struct ferry *f, int timeout_ms)
{
	int ret = put_rec(f, PROTO_REC_FLUSH, 0, 0, 0, NULL, 0, 1);

	if (ret == 0)
		ret = wait_tx_empty(f, timeout_ms);
	return ret;
}
