/* daemon/plan/linkcost.c - see linkcost.h. */
#include "linkcost.h"

static uint64_t min_known(uint64_t a, uint64_t b)
{
	if (!a)
		return b;
	if (!b)
		return a;
	return a < b ? a : b;
}

/* Starts a new window if the current one is over. */
static void window(struct linkcost *c, uint64_t now_ns)
{
	if (!c->win_start_ns) {
		c->win_start_ns = now_ns ? now_ns : 1;
	} else if (now_ns - c->win_start_ns >= LINKCOST_WINDOW_NS) {
		/* a new window: the current one becomes the last (two windows
		 * or more since: the last is empty) */
		int gap = now_ns - c->win_start_ns >= 2 * LINKCOST_WINDOW_NS;
		uint64_t rtt = min_known(c->rtt_small[0], c->rtt_small[1]);
		uint64_t ps = min_known(c->ps_per_byte[0], c->ps_per_byte[1]);

		if (rtt)
			c->kept_rtt_small = rtt;
		if (ps)
			c->kept_ps_per_byte = ps;

		c->rtt_small[0] = gap ? 0 : c->rtt_small[1];
		c->ps_per_byte[0] = gap ? 0 : c->ps_per_byte[1];
		c->rtt_small[1] = c->ps_per_byte[1] = 0;
		c->win_start_ns = now_ns;
	}
}

void linkcost_sample(struct linkcost *c, uint64_t now_ns, uint32_t bytes, uint64_t rtt_ns)
{
	if (!rtt_ns)
		rtt_ns = 1;
	window(c, now_ns);
	c->samples++;
	if (bytes <= LINKCOST_SMALL) {
		c->rtt_small[1] = min_known(c->rtt_small[1], rtt_ns);
		return;
	}
	if (bytes < LINKCOST_LARGE)
		return;
	/* the whole round trip per byte: α's share of it is small at this
	 * size (and subtracting a noisy α from a noisy round trip gave
	 * nothing useful), so β errs a little on the slow side */
	uint64_t ps = rtt_ns * 1000 / bytes;

	c->ps_per_byte[1] = min_known(c->ps_per_byte[1], ps ? ps : 1);
}

uint64_t linkcost_alpha_ns(const struct linkcost *c)
{
	uint64_t rtt = min_known(c->rtt_small[0], c->rtt_small[1]);

	if (!rtt)
		rtt = c->kept_rtt_small;
	return rtt ? (rtt + 1) / 2 : 0;
}

uint64_t linkcost_beta_ps(const struct linkcost *c)
{
	uint64_t ps = min_known(c->ps_per_byte[0], c->ps_per_byte[1]);

	return ps ? ps : c->kept_ps_per_byte;
}
