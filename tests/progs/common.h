/* tests/progs/common.h - helpers shared by the test client programs. */
#ifndef FERRY_TEST_COMMON_H
#define FERRY_TEST_COMMON_H

#include <ferry.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static inline double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* xorshift: deterministic per seed, so a failure can be replayed. */
static inline uint64_t rnd(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* Payload of item seq from src to dst: a 16-byte header then a pattern that
 * depends on all of them, so a misplaced or damaged byte is detected. */
struct item_hdr {
	uint32_t src, dst, seq, len;
};

static inline uint8_t pattern_byte(uint32_t src, uint32_t dst, uint32_t seq, uint32_t i)
{
	return (uint8_t)(src * 131u + dst * 31u + seq * 7u + i * 13u + (i >> 8));
}

static inline void fill_item(uint8_t *buf, uint32_t src, uint32_t dst, uint32_t seq, uint32_t len)
{
	struct item_hdr h = { src, dst, seq, len };

	memcpy(buf, &h, sizeof(h) < len ? sizeof(h) : len);
	for (uint32_t i = sizeof(h); i < len; i++)
		buf[i] = pattern_byte(src, dst, seq, i);
}

/* Returns NULL if the item is intact, else what is wrong. */
static inline const char *check_item(const struct ferry_item *it, uint32_t me, uint32_t *seq_p)
{
	const uint8_t *p = it->data;
	struct item_hdr h;

	if (it->len < sizeof(h))
		return "item shorter than its header";
	memcpy(&h, p, sizeof(h));
	if (h.len != it->len)
		return "length differs from the one sent";
	if (h.src != it->src)
		return "source rank differs from the one in the payload";
	if (h.dst != me)
		return "item for another rank";
	for (uint32_t i = sizeof(h); i < it->len; i++)
		if (p[i] != pattern_byte(h.src, h.dst, h.seq, i))
			return "payload damaged";
	*seq_p = h.seq;
	return NULL;
}

static inline long arg_long(const char *name, const char *v)
{
	char *end;
	long x = strtol(v, &end, 0);

	if (!*v || *end) {
		fprintf(stderr, "bad value for %s: %s\n", name, v);
		exit(2);
	}
	return x;
}

/* A comma-separated list of numbers for option name into out (at most
 * max): how many. */
static inline int arg_longs(const char *name, char *v, long *out, int max)
{
	char *t;
	int n;

	for (n = 0; n < max && (t = strsep(&v, ",")); n++)
		out[n] = arg_long(name, t);
	return n;
}

/* len bytes (1 if 0) of ferry_alloc memory of f (alloc) or of malloc's;
 * exits on failure.  mem_put gives them back. */
static inline void *mem_get(ferry_t *f, size_t len, int alloc)
{
	void *p = NULL;
	int ret;

	if (!len)
		len = 1;
	if (alloc && (ret = ferry_alloc(f, len, &p)) < 0) {
		fprintf(stderr, "ferry_alloc(%zu): %s\n", len, ferry_strerror(ret));
		exit(1);
	}
	if (!alloc && !(p = malloc(len))) {
		fprintf(stderr, "out of memory\n");
		exit(1);
	}
	return p;
}

static inline void mem_put(ferry_t *f, void *p, int alloc)
{
	if (alloc)
		ferry_free(f, p);
	else
		free(p);
}

#endif
