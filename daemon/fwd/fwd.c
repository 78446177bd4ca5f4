/* daemon/fwd/fwd.c - see fwd.h. */
#include "fwd.h"
#include "agg.h"
#include "ctlq.h"
#include "flow.h"
#include "rx.h"
#include "tx.h"

static const struct fwd_events *above;

void fwd_set_events(const struct fwd_events *ev)
{
	above = ev;
}

static void peer_lost(struct peer *p, uint64_t restarted_as, const char *why)
{
	if (above && above->node_lost)
		above->node_lost(p->node, restarted_as, why);
}

static void peer_found(struct peer *p)
{
	if (above && above->node_found)
		above->node_found(p->node);
}

const struct peer_events fwd_peer_events = {
	.rx = rx_frame,
	.steer = rx_steer,
	.steered = rx_steered,
	.lost = peer_lost,
	.found = peer_found,
};

int fwd_init(const struct conf *c, uint32_t self)
{
	int ret;

	ctlq_init(self);
	flow_init(c, self);
	ret = agg_init(c, self);
	if (ret == 0)
		ret = rx_init(c, self);
	if (ret == 0)
		ret = tx_init(c, self);
	if (ret < 0)
		fwd_fini();
	return ret;
}

void fwd_fini(void)
{
	above = NULL;
	rx_fini();
	agg_fini();
	ctlq_fini();
}

int fwd_poll(void)
{
	int work = tx_poll();

	return rx_poll() | work;
}

void fwd_write_peer_stats(FILE *out)
{
	for (uint32_t i = 0; i < peer_count(); i++) {
		const struct peer *p = peer_at(i);

		fprintf(out, "peer %u", p->node);
		peer_write_stats(out, p);
		rx_write_peer_stats(out, p);
		agg_write_peer_stats(out, p);
		fputc('\n', out);
	}
}
