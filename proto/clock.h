/* proto/clock.h - the monotonic clock both sides time things with (timeouts,
 * spin windows, timers, log rate limits): one definition for libferry and
 * ferryd.
 */
#ifndef FERRY_PROTO_CLOCK_H
#define FERRY_PROTO_CLOCK_H

#include <stdint.h>
#include <time.h>

/* Nanoseconds of CLOCK_MONOTONIC. */
static inline uint64_t proto_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Milliseconds of CLOCK_MONOTONIC. */
static inline uint64_t proto_now_ms(void)
{
	return proto_now_ns() / 1000000u;
}

#endif
