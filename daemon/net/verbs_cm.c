/* daemon/net/verbs_cm.c - connections of the verbs transport through rdma_cm:
 * the event channel, the listener, connecting, accepting, and the
 * identification in the private data; see verbs.h.
 *
 * Ownership: the listener and the event channel are this file's, from
 * verbs_cm_init/verbs_cm_bind to verbs_cm_unbind/verbs_cm_fini.  A
 * connection's rdma_cm id belongs to its link (verbs_qp.c) as soon as one
 * exists; a refused request's id is destroyed here.
 */
#include "verbs.h"
#include "../core/log.h"

#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>

/* What rdma_connect / rdma_accept carry (at most 56 bytes). */
struct verbs_priv {
	uint32_t magic;         /* VERBS_MAGIC */
	uint16_t version;       /* WIRE_VERSION */
	uint16_t reserved;      /* zero */
	uint32_t from, to;      /* node ids */
	uint32_t max_frame;     /* largest frame the sender of this receives */
};
static_assert(sizeof(struct verbs_priv) <= 56, "RC private data");

static struct {
	struct rdma_event_channel *ech;
	struct loop_watch ech_w;
	struct rdma_cm_id *listen_id;
	struct sockaddr_storage self_sa;        /* the node's own address */
} cm;

static void fill_priv(struct verbs_priv *p, uint32_t to)
{
	*p = (struct verbs_priv){ .magic = htole32(VERBS_MAGIC), .version = htole16(WIRE_VERSION),
				  .from = htole32(verbs.self), .to = htole32(to), .max_frame = htole32(verbs.max_frame) };
}

/* Checks a peer's private data; returns the peer's node id or -1. */
static int check_priv(const void *data, uint8_t len, uint32_t *max_frame_p, char *why, size_t whylen)
{
	struct verbs_priv p;

	if (!data || len < sizeof(p)) {
		snprintf(why, whylen, "no ferry identification in the connection request");
		return -1;
	}
	memcpy(&p, data, sizeof(p));
	if (le32toh(p.magic) == VERBS_MAGIC && le16toh(p.version) != WIRE_VERSION) {
		snprintf(why, whylen, "the peer speaks wire protocol version %u, this ferryd (ferry %s) version %u: every "
			 "node must run the same ferry release", le16toh(p.version), FERRY_VERSION, WIRE_VERSION);
		return -1;
	}
	if (le32toh(p.magic) != VERBS_MAGIC || p.reserved) {
		snprintf(why, whylen, "not a ferry %u connection", WIRE_VERSION);
		return -1;
	}
	if (le32toh(p.to) != verbs.self || le32toh(p.from) >= verbs.conf->nnodes) {
		snprintf(why, whylen, "meant for node %u from node %u; this is node %u", le32toh(p.to),
			 le32toh(p.from), verbs.self);
		return -1;
	}
	*max_frame_p = le32toh(p.max_frame);
	if (*max_frame_p < verbs.max_frame) {
		snprintf(why, whylen, "node %u receives frames up to %u bytes, this node sends up to %u "
			 "(aggregation.buffer_bytes differs)", le32toh(p.from), *max_frame_p, verbs.max_frame);
		return -1;
	}
	return (int)le32toh(p.from);
}


static int resolve(const char *host, uint16_t port, struct sockaddr_storage *ss)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *res;
	char p[8];

	snprintf(p, sizeof(p), "%u", port);
	if (getaddrinfo(host, p, &hints, &res) != 0)
		return -EHOSTUNREACH;
	memcpy(ss, res->ai_addr, res->ai_addrlen);
	freeaddrinfo(res);
	return 0;
}

int verbs_connect(uint32_t node, const char *host, uint16_t port, struct link **l_p, char *err, size_t errlen)
{
	struct sockaddr_storage dst, src = cm.self_sa;
	struct rdma_cm_id *id;
	struct vlink *v;

	if (!verbs.up) {
		snprintf(err, errlen, "no RDMA device");
		return -ENODEV;
	}
	if (resolve(host, port, &dst) < 0) {
		snprintf(err, errlen, "cannot resolve %s", host);
		return -EHOSTUNREACH;
	}
	((struct sockaddr_in *)&src)->sin_port = 0;     /* any source port */
	if (rdma_create_id(cm.ech, &id, NULL, RDMA_PS_TCP) < 0)
		return -errno;
	v = verbs_link_new(id, 1);
	if (!v) {
		rdma_destroy_id(id);
		return -ENOMEM;
	}
	v->node = node;
	snprintf(v->addr, sizeof(v->addr), "%s:%u", host, port);
	if (rdma_resolve_addr(id, (struct sockaddr *)&src, (struct sockaddr *)&dst, VERBS_RESOLVE_MS) < 0) {
		int ret = -errno;

		snprintf(err, errlen, "rdma_resolve_addr %s: %s", v->addr, strerror(errno));
		verbs_link_end(v);
		return ret;
	}
	*l_p = &v->l;
	return 0;
}

/* The address a connection request came from, as text. */
static void peer_host(struct rdma_cm_id *id, char *buf, size_t len)
{
	const struct sockaddr *sa = rdma_get_peer_addr(id);
	const void *a = NULL;

	if (sa && sa->sa_family == AF_INET)
		a = &((const struct sockaddr_in *)sa)->sin_addr;
	else if (sa && sa->sa_family == AF_INET6)
		a = &((const struct sockaddr_in6 *)sa)->sin6_addr;
	if (!a || !inet_ntop(sa->sa_family, a, buf, (socklen_t)len))
		snprintf(buf, len, "?");
}

/* 1 if host is not the address of a node in the configuration (as written
 * there: numeric addresses, as clusters should use, compare exactly; the
 * same rule as TCP's). */
static int stranger(const char *host)
{
	for (uint32_t k = 0; k < verbs.conf->nnodes; k++)
		if (strcmp(verbs.conf->nodes[k].host, host) == 0)
			return 0;
	return 1;
}

/* A connection request on the listener, from node `from` (or -1: why says
 * what is wrong with its identification).  Until it authenticates it is a
 * claim by whoever can reach the port, and costs a queue pair and a few KiB
 * (verbs.h, Before authentication): at most VERBS_MAX_UNAUTH of them, at
 * most VERBS_MAX_UNAUTH_PER_HOST from one address, and one from a node of
 * the cluster takes the place of the oldest from elsewhere, or, at the
 * per-address cap, of the oldest from its own address that has not said
 * HELLO, as on TCP. */
static void on_connect_request(struct rdma_cm_id *id, int from, uint32_t max_frame, const char *why)
{
	struct rdma_conn_param cp = { .responder_resources = 1, .initiator_depth = 1, .rnr_retry_count = 7 };
	struct verbs_priv mine;
	struct vlink *v;
	char host[48];
	uint32_t n, from_host;

	peer_host(id, host, sizeof(host));
	if (from < 0) {
		log_rl_warn("verbs: connection from %s refused: %s", host, why);
		rdma_reject(id, NULL, 0);
		rdma_destroy_id(id);
		return;
	}
	n = verbs_links_unauthenticated(host, &from_host);
	/* The per-address cap also holds for a node's own address, and any
	 * user on that node can open rdma_cm connections from it: 8 requests
	 * renewed within the HELLO deadline would keep the node's daemon out.
	 * So a request from a node's address ends the oldest connection from
	 * that address that has not said HELLO; the daemon's own says HELLO
	 * as soon as it is established, so only a newer one could end it. */
	if (from_host >= VERBS_MAX_UNAUTH_PER_HOST && !stranger(host) && verbs_link_evict_silent(host)) {
		n--;
		from_host--;
	}
	if (from_host >= VERBS_MAX_UNAUTH_PER_HOST ||
	    (n >= VERBS_MAX_UNAUTH && (stranger(host) || !verbs_link_evict_stranger(stranger)))) {
		log_rl_warn("verbs: %u connections are authenticating already (%u from %s); one claiming node %d refused",
			    n, from_host, host, from);
		rdma_reject(id, NULL, 0);
		rdma_destroy_id(id);
		return;
	}
	v = verbs_link_new(id, 0);
	if (!v) {
		rdma_reject(id, NULL, 0);
		rdma_destroy_id(id);
		return;
	}
	snprintf(v->host, sizeof(v->host), "%s", host);
	v->peer_max_frame = max_frame;
	v->node = (uint32_t)from;
	snprintf(v->addr, sizeof(v->addr), "%s claiming node %d", host, from);
	if (verbs_link_setup(v) < 0) {
		rdma_reject(id, NULL, 0);
		verbs_link_end(v);
		return;
	}
	fill_priv(&mine, (uint32_t)from);
	cp.private_data = &mine;
	cp.private_data_len = sizeof(mine);
	if (rdma_accept(id, &cp) < 0) {
		log_rl_warn("verbs: rdma_accept for node %d: %m", from);
		verbs_link_end(v);
		return;
	}
	/* The peer layer hears of it now, not at ESTABLISHED: the queue pair
	 * is ready to receive, and the connecting side's HELLO can complete on
	 * the CQ before that event is read from the event channel. */
	verbs.ev->accepted(&v->l);
}

static void on_cm(struct loop_watch *w, uint32_t events)
{
	struct rdma_cm_event *ev;

	(void)w;
	(void)events;
	while (rdma_get_cm_event(cm.ech, &ev) == 0) {
		struct rdma_cm_event copy = *ev;
		struct vlink *v = ev->id && ev->id != cm.listen_id ? ev->id->context : NULL;
		char why[48];

		if (copy.event == RDMA_CM_EVENT_CONNECT_REQUEST) {
			/* The private data lives in the event, so it is checked
			 * first; then the event is acked, since destroying the
			 * new id (on a refusal) waits for its events to be. */
			uint32_t max_frame = 0;
			char bad[160];
			int from = check_priv(ev->param.conn.private_data, ev->param.conn.private_data_len,
					      &max_frame, bad, sizeof(bad));

			rdma_ack_cm_event(ev);
			on_connect_request(copy.id, from, max_frame, bad);
			continue;
		}
		if (copy.event == RDMA_CM_EVENT_ESTABLISHED && v && !v->dead) {
			uint32_t max_frame = verbs.max_frame;
			char bad[160];
			int from = v->l.outgoing ? check_priv(copy.param.conn.private_data,
							      copy.param.conn.private_data_len, &max_frame,
							      bad, sizeof(bad)) : 0;

			rdma_ack_cm_event(ev);
			if (from < 0) {
				log_rl_warn("verbs link %s: %s", v->addr, bad);
				verbs_link_fail(v, "the peer's identification does not fit");
				continue;
			}
			if (v->l.outgoing) {
				v->peer_max_frame = max_frame;
				v->l.state = LINK_HANDSHAKE;
				verbs.ev->connected(&v->l);     /* queues our HELLO */
			}
			if (!v->dead)
				verbs_link_flush(v);
			continue;
		}
		rdma_ack_cm_event(ev);
		if (copy.event == RDMA_CM_EVENT_DEVICE_REMOVAL) {
			verbs_dev_teardown("the RDMA device was removed");
			continue;
		}
		if (!v || v->dead)
			continue;
		switch (copy.event) {
		case RDMA_CM_EVENT_ADDR_RESOLVED:
			if (rdma_resolve_route(v->id, VERBS_RESOLVE_MS) < 0)
				verbs_link_fail(v, "rdma_resolve_route failed");
			break;
		case RDMA_CM_EVENT_ROUTE_RESOLVED: {
			struct rdma_conn_param cp = { .responder_resources = 1, .initiator_depth = 1,
						      .retry_count = VERBS_RETRY_COUNT, .rnr_retry_count = 7 };
			struct verbs_priv mine;

			if (verbs_link_setup(v) < 0) {
				verbs_link_fail(v, "cannot set up the queue pair");
				break;
			}
			fill_priv(&mine, v->node);
			cp.private_data = &mine;
			cp.private_data_len = sizeof(mine);
			if (rdma_connect(v->id, &cp) < 0)
				verbs_link_fail(v, "rdma_connect failed");
			break;
		}
		case RDMA_CM_EVENT_ADDR_ERROR:
		case RDMA_CM_EVENT_ROUTE_ERROR:
		case RDMA_CM_EVENT_CONNECT_ERROR:
		case RDMA_CM_EVENT_UNREACHABLE:
		case RDMA_CM_EVENT_REJECTED:
		case RDMA_CM_EVENT_DISCONNECTED:
			snprintf(why, sizeof(why), "%s", rdma_event_str(copy.event));
			verbs_link_fail(v, why);
			break;
		default:
			break;
		}
	}
}

int verbs_cm_init(void)
{
	const struct conf *c = verbs.conf;
	int fl;

	if (resolve(c->nodes[verbs.self].host, c->nodes[verbs.self].port, &cm.self_sa) < 0 ||
	    cm.self_sa.ss_family != AF_INET) {
		log_notice("verbs: cannot resolve node %u's host %s to an IPv4 address", verbs.self,
			   c->nodes[verbs.self].host);
		return -EHOSTUNREACH;
	}
	cm.ech = rdma_create_event_channel();
	if (!cm.ech) {
		int ret = -errno;

		log_notice("verbs: rdma_create_event_channel: %m (is rdma_ucm loaded?)");
		return ret;
	}
	fl = fcntl(cm.ech->fd, F_GETFL);
	fcntl(cm.ech->fd, F_SETFL, fl | O_NONBLOCK);
	if (loop_add(&cm.ech_w, cm.ech->fd, EPOLLIN, on_cm, NULL) < 0) {
		rdma_destroy_event_channel(cm.ech);
		cm.ech = NULL;
		return -EIO;
	}
	return 0;
}

void verbs_cm_fini(void)
{
	verbs_cm_unbind();
	if (cm.ech) {
		loop_del(&cm.ech_w);
		rdma_destroy_event_channel(cm.ech);
	}
	cm.ech = NULL;
}

int verbs_cm_bind(int prio, struct ibv_context **ctx_p)
{
	const struct conf *c = verbs.conf;
	const char *dev;
	int ret;

	if (rdma_create_id(cm.ech, &cm.listen_id, NULL, RDMA_PS_TCP) < 0) {
		ret = -errno;
		log_msg(prio, "verbs: rdma_create_id: %m");
		cm.listen_id = NULL;
		return ret;
	}
	errno = 0;
	if (rdma_bind_addr(cm.listen_id, (struct sockaddr *)&cm.self_sa) < 0 || !cm.listen_id->verbs) {
		log_msg(prio, "verbs: node %u's address %s is not on an RDMA device (%s)", verbs.self,
			c->nodes[verbs.self].host, errno ? strerror(errno) : "no RDMA device holds it");
		verbs_cm_unbind();
		return -ENODEV;
	}
	dev = ibv_get_device_name(cm.listen_id->verbs->device);
	if (c->verbs_device[0] && strcmp(c->verbs_device, dev)) {
		log_err("verbs: node %u's address is on RDMA device %s, transport.device says %s", verbs.self, dev,
			c->verbs_device);
		verbs_cm_unbind();
		return -ENODEV;
	}
	*ctx_p = cm.listen_id->verbs;
	return 0;
}

int verbs_cm_listen(void)
{
	const struct conf_node *n = &verbs.conf->nodes[verbs.self];

	if (rdma_listen(cm.listen_id, 64) < 0) {
		int ret = -errno;

		log_err("verbs: rdma_listen on %s port %u: %m", n->host, n->port);
		return ret;
	}
	log_notice("verbs: RDMA device %s, listening on %s port %u", ibv_get_device_name(cm.listen_id->verbs->device),
		   n->host, n->port);
	return 0;
}

void verbs_cm_unbind(void)
{
	if (cm.listen_id)
		rdma_destroy_id(cm.listen_id);
	cm.listen_id = NULL;
}
