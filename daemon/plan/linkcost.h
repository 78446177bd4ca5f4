/* daemon/plan/linkcost.h - the cost of a link as the collectives' model
 * takes it (DESIGN.md "Collectives", "Choosing"; seed 000's α and β): α,
 * the time a message takes before its first byte counts (one way), and β,
 * the time per byte, estimated from round trips of the link's own frames.
 * Pure code, no I/O and no clock: the peer layer feeds it the samples (when
 * a frame it wrote was acknowledged, at link start and from live traffic)
 * and the time.
 *
 * A sample is (frame bytes, round trip).  Queues only ever add to a round
 * trip, so the estimates are minima: α is half the smallest round trip of a
 * small frame (<= LINKCOST_SMALL bytes), β the smallest round trip per
 * byte of at least LINKCOST_LARGE bytes (α's share of those is small; a
 * round trip less a noisy α measured nothing useful here): a sample may be
 * several frames one acknowledgement covers, timed from when the first was
 * queued (the peer acknowledges a frame once its layers took it, so β is
 * the rate of the whole path, copies included, not only the wire's).  Minima over two
 * windows of LINKCOST_WINDOW_NS, the last complete one and the current, so
 * a link that became slower (a route changed, a host got busier) is seen as
 * such within two windows.  Until a sample of a kind came, that estimate is
 * 0: unknown (the caller takes its default).
 */
#ifndef FERRY_PLAN_LINKCOST_H
#define FERRY_PLAN_LINKCOST_H

#include <stdint.h>

#define LINKCOST_SMALL     1024u
#define LINKCOST_LARGE     (64u << 10)
#define LINKCOST_WINDOW_NS (10ull * 1000000000u)

struct linkcost {
	uint64_t win_start_ns;          /* when the current window began; 0: no sample yet */
	uint64_t rtt_small[2];          /* [0] the last complete window's minimum, [1] the current's; 0: none */
	uint64_t ps_per_byte[2];        /* the same for the large samples' excess per byte (picoseconds) */
	uint64_t samples;
	/* the estimates when the windows last rolled: what α and β say while
	 * both windows lack a sample of their kind (a link that carried only
	 * large frames for a while still has an α: stale, not unknown) */
	uint64_t kept_rtt_small, kept_ps_per_byte;
};

/* Frames of bytes in all were acknowledged rtt_ns after the first of them
 * was written, at now_ns. */
void linkcost_sample(struct linkcost *c, uint64_t now_ns, uint32_t bytes, uint64_t rtt_ns);

/* α in nanoseconds, 0 if unknown. */
uint64_t linkcost_alpha_ns(const struct linkcost *c);
/* β in picoseconds per byte, 0 if unknown (a link this fast would round
 * to 0 too: at least 1 once known). */
uint64_t linkcost_beta_ps(const struct linkcost *c);

#endif
