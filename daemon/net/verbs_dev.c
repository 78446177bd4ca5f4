/* daemon/net/verbs_dev.c - the RDMA device of the verbs transport: protection
 * domain, completion channel and queue, async events, hot-plug, and the
 * transport table; see verbs.h.
 *
 * Ownership: everything on the device (the CQ, the channel, the PD with every
 * registration) is set up by start() and let go of by release_device(); its
 * callers end the links (their QPs and MRs) first, as the driver needs, then
 * release_device lets go of the frame registrations, then the PD.
 */
#include "verbs.h"
#include "../core/log.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/epoll.h>

struct verbs_state verbs;

static struct {
	struct loop_watch cc_w, async_w;
	int retrying;           /* the device went away; start() is retried */
	struct loop_timer reinit;
} dev;

static void on_async(struct loop_watch *w, uint32_t events)
{
	struct ibv_async_event ae;

	(void)w;
	(void)events;
	if (ibv_get_async_event(verbs.ctx, &ae))
		return;
	switch (ae.event_type) {
	case IBV_EVENT_PORT_ERR:
		log_warn("RDMA device %s port %d is down; links over it will fail and be retried",
			 ibv_get_device_name(verbs.ctx->device), ae.element.port_num);
		break;
	case IBV_EVENT_PORT_ACTIVE:
		log_notice("RDMA device %s port %d is up again", ibv_get_device_name(verbs.ctx->device),
			   ae.element.port_num);
		break;
	case IBV_EVENT_DEVICE_FATAL:
		log_err("RDMA device %s reports a fatal error", ibv_get_device_name(verbs.ctx->device));
		break;
	case IBV_EVENT_CQ_ERR:
		log_err("RDMA device %s: the completion queue failed (overrun?)", ibv_get_device_name(verbs.ctx->device));
		break;
	default:
		log_debug("RDMA async event: %s", ibv_event_type_str(ae.event_type));
	}
	ibv_ack_async_event(&ae);
	if (ae.event_type == IBV_EVENT_DEVICE_FATAL) {
		verbs_dev_teardown("fatal device error");
	} else if (ae.event_type == IBV_EVENT_CQ_ERR) {
		/* Every link's completions go through it: start over. */
		verbs_dev_teardown("the completion queue failed");
	} else if (ae.event_type == IBV_EVENT_PORT_ERR) {
		/* An idle queue pair would not notice for a long time: end the
		 * links now; reconnection attempts go on (and fail) until the
		 * port is back, and what was not acknowledged is sent again. */
		verbs_links_fail_all("the RDMA port went down");
	}
}

static int setup_device(struct ibv_context *ctx)
{
	int fl;

	dev.cc_w.fd = dev.async_w.fd = -1;  /* not in the loop yet */
	verbs.ctx = ctx;
	verbs.pd = ibv_alloc_pd(ctx);
	verbs.cc = verbs.pd ? ibv_create_comp_channel(ctx) : NULL;
	if (verbs.cc) {
		/* Room in the CQ for every completion every link can have
		 * pending (a CQ that overflows is dead, IBV_EVENT_CQ_ERR), as
		 * many links as the device's largest CQ allows; verbs_link_new
		 * refuses links beyond that. */
		struct ibv_device_attr da;
		int max_cqe = ibv_query_device(ctx, &da) == 0 ? da.max_cqe : 4096;

		verbs.max_links = (uint32_t)max_cqe / VERBS_WR_PER_LINK;
		if (verbs.max_links > VERBS_MAX_LINKS)
			verbs.max_links = VERBS_MAX_LINKS;
		verbs.cq = verbs.max_links ? ibv_create_cq(ctx, (int)(verbs.max_links * VERBS_WR_PER_LINK), NULL,
							   verbs.cc, 0) : NULL;
	}
	if (!verbs.cq) {
		log_err("RDMA device %s: allocating PD/completion channel/CQ: %m", ibv_get_device_name(ctx->device));
		return -ENOMEM;
	}
	if (ibv_req_notify_cq(verbs.cq, 0)) {
		log_err("ibv_req_notify_cq: %m");
		return -EIO;
	}
	fl = fcntl(verbs.cc->fd, F_GETFL);
	fcntl(verbs.cc->fd, F_SETFL, fl | O_NONBLOCK);
	fl = fcntl(ctx->async_fd, F_GETFL);
	fcntl(ctx->async_fd, F_SETFL, fl | O_NONBLOCK);
	if (loop_add(&dev.cc_w, verbs.cc->fd, EPOLLIN, verbs_on_cq, NULL) < 0 ||
	    loop_add(&dev.async_w, ctx->async_fd, EPOLLIN, on_async, NULL) < 0)
		return -EIO;
	verbs.up = 1;
	return 0;
}

static void release_device(void)
{
	if (verbs.cq) {
		loop_del(&dev.cc_w);
		loop_del(&dev.async_w);
		ibv_destroy_cq(verbs.cq);
		verbs_qp_cq_gone();
	}
	if (verbs.cc)
		ibv_destroy_comp_channel(verbs.cc);
	/* Every frame registration goes, then the PD (the queue pairs, whose
	 * SENDs used them, are gone already); frames are registered again
	 * when sent. */
	verbs_mr_release_all();
	if (verbs.pd)
		ibv_dealloc_pd(verbs.pd);
	verbs.pd = NULL;
	verbs.cq = NULL;
	verbs.cc = NULL;
	verbs.ctx = NULL;           /* librdmacm's; closed once its ids are gone */
	verbs.up = 0;
}

/* Binds the listener to the node's address and sets up the device it is on,
 * then listens.  On failure nothing is left set up.  While the device is
 * being retried (dev.retrying) its absence is logged at debug level only. */
static int start(void)
{
	struct ibv_context *ctx = NULL;
	int ret;

	ret = verbs_cm_bind(dev.retrying ? LOG_DEBUG : LOG_NOTICE, &ctx);
	if (ret < 0)
		return ret;
	ret = setup_device(ctx);
	if (ret == 0)
		ret = verbs_cm_listen();
	if (ret < 0) {
		verbs_cm_unbind();
		release_device();
	}
	return ret;
}

/* librdmacm closes a device that went away only when it next reads the list
 * of devices, and only once nothing of it is in use any more: make it read
 * the list, so that a removal waiting for the device's users can complete. */
static void forget_removed_devices(void)
{
	struct ibv_context **l = rdma_get_devices(NULL);

	if (l)
		rdma_free_devices(l);
}

static void on_reinit(struct loop_timer *t)
{
	forget_removed_devices();
	dev.retrying = 1;
	if (start() < 0) {
		loop_timer_arm(t, VERBS_REINIT_NS, on_reinit, NULL);
		return;
	}
	dev.retrying = 0;
}

void verbs_dev_teardown(const char *why)
{
	log_err("verbs: %s; every RDMA link ends, retrying the device every %llu s", why,
		(unsigned long long)(VERBS_REINIT_NS / 1000000000u));
	verbs_links_fail_all(why);
	verbs_cm_unbind();
	release_device();
	forget_removed_devices();
	loop_timer_arm(&dev.reinit, VERBS_REINIT_NS, on_reinit, NULL);
}

static int verbs_listen(const struct conf *c, uint32_t self, const struct link_events *ev)
{
	struct ibv_device **devs;
	int n, ret;

	verbs.conf = c;
	verbs.self = self;
	verbs.ev = ev;
	/* A body, and room for its integrity tag (whether used or not, so that
	 * daemons that differ only in security settings get to the handshake
	 * and are told why they are refused). */
	verbs.max_frame = (uint32_t)(sizeof(struct wire_frame_hdr) +
				     (c->buffer_bytes > wire_item_footprint(PROTO_FRAG_BYTES) ?
				      c->buffer_bytes : wire_item_footprint(PROTO_FRAG_BYTES)) + WIRE_TAG_BYTES);
	/* A multiple of 8: frames are received in place at idx x max_frame, and
	 * their elements are read as aligned words (proto_dense_word), whatever
	 * aggregation.buffer_bytes says. */
	verbs.max_frame = (verbs.max_frame + 7) & ~7u;
	devs = ibv_get_device_list(&n);
	if (devs)
		ibv_free_device_list(devs);
	if (!devs || n == 0) {
		log_notice("verbs: no RDMA device on this machine");
		return -ENODEV;
	}
	ret = verbs_cm_init();
	if (ret < 0)
		return ret;
	ret = start();
	if (ret < 0) {
		verbs_cm_fini();
		return ret;
	}
	verbs_keepalive_start();
	return 0;
}

static void verbs_fini(void)
{
	loop_timer_cancel(&dev.reinit);
	verbs_keepalive_stop();
	verbs_links_end_all();
	verbs_cm_unbind();
	release_device();       /* deregisters the frames still registered */
	verbs_cm_fini();
}

const struct transport transport_verbs = {
	.name = "verbs",
	.listen = verbs_listen,
	.connect = verbs_connect,
	.fini = verbs_fini,
	.write_stats = verbs_qp_write_stats,
};
