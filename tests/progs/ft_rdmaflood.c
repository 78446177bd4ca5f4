/* tests/progs/ft_rdmaflood.c - a hostile host on an RDMA network (hardening
 * issue 10, finding 2): keeps --conns rdma_cm connection requests to a ferry
 * daemon open at once, each with a valid ferry identification in its private
 * data (node ids are no secret), and never authenticates: no HELLO, no AUTH,
 * nothing on the queue pair.  A connection the daemon accepts stays open
 * until the daemon ends it (1 s without HELLO); one it refuses or ends is
 * opened again at once (a refused one after 20 ms), so the daemon's slots
 * for connections that have not authenticated stay taken.
 *
 *   ft_rdmaflood --src IP --dst IP --port P --from N --to N [--conns C]
 *                [--seconds S] [--max-frame B]
 *
 * Runs for S seconds (default 10) or until SIGTERM, then prints one line:
 *   "flood: established E refused R ended D errors X most-at-once M"
 * and exits 0.  Event-driven (poll on the rdma_cm event channel), no spinning.
 */
#include "../../proto/wire.h"

#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <infiniband/verbs.h>
#include <poll.h>
#include <rdma/rdma_cma.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_CONNS 256

/* The daemon's identification (daemon/net/verbs_cm.c, struct verbs_priv). */
struct priv {
	uint32_t magic, version_reserved, from, to, max_frame;
};

struct conn {
	struct rdma_cm_id *id;
	int established;
	double retry_at;        /* not open: open again then */
};

static struct rdma_event_channel *ech;
static struct ibv_pd *pd;
static struct ibv_cq *cq;
static struct sockaddr_in src, dst;
static struct priv pv;
static struct conn conns[MAX_CONNS];
static unsigned long established, refused, ended, errors;
static int open_now, most;
static volatile sig_atomic_t stop;

static void on_term(int sig)
{
	(void)sig;
	stop = 1;
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void conn_open(struct conn *c)
{
	c->established = 0;
	c->retry_at = 0;
	if (rdma_create_id(ech, &c->id, c, RDMA_PS_TCP) < 0) {
		perror("rdma_create_id");
		exit(1);
	}
	if (rdma_resolve_addr(c->id, (struct sockaddr *)&src, (struct sockaddr *)&dst, 2000) < 0) {
		errors++;
		rdma_destroy_id(c->id);
		c->id = NULL;
		c->retry_at = now() + 0.02;
	}
}

static void conn_close(struct conn *c, double delay)
{
	if (c->established)
		open_now--;
	c->established = 0;
	if (c->id->qp)
		rdma_destroy_qp(c->id);
	rdma_destroy_id(c->id);
	c->id = NULL;
	c->retry_at = now() + delay;
}

static void on_route(struct conn *c)
{
	struct ibv_qp_init_attr qa = { .qp_type = IBV_QPT_RC,
				       .cap = { .max_send_wr = 1, .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1 } };
	struct rdma_conn_param cp = { .responder_resources = 1, .initiator_depth = 1, .retry_count = 6,
				      .rnr_retry_count = 7, .private_data = &pv, .private_data_len = sizeof(pv) };

	if (!pd) {
		pd = ibv_alloc_pd(c->id->verbs);
		cq = pd ? ibv_create_cq(c->id->verbs, 2 * MAX_CONNS, NULL, NULL, 0) : NULL;
		if (!cq) {
			perror("ibv_alloc_pd/ibv_create_cq");
			exit(1);
		}
	}
	qa.send_cq = qa.recv_cq = cq;
	if (rdma_create_qp(c->id, pd, &qa) < 0 || rdma_connect(c->id, &cp) < 0) {
		errors++;
		conn_close(c, 0.02);
	}
}

static void on_event(void)
{
	struct rdma_cm_event *ev;

	while (rdma_get_cm_event(ech, &ev) == 0) {
		struct conn *c = ev->id->context;
		enum rdma_cm_event_type t = ev->event;

		rdma_ack_cm_event(ev);
		if (!c || !c->id)
			continue;
		switch (t) {
		case RDMA_CM_EVENT_ADDR_RESOLVED:
			if (rdma_resolve_route(c->id, 2000) < 0) {
				errors++;
				conn_close(c, 0.02);
			}
			break;
		case RDMA_CM_EVENT_ROUTE_RESOLVED:
			on_route(c);
			break;
		case RDMA_CM_EVENT_ESTABLISHED:
			c->established = 1;
			established++;
			if (++open_now > most)
				most = open_now;
			break;
		case RDMA_CM_EVENT_REJECTED:
			refused++;
			conn_close(c, 0.02);
			break;
		case RDMA_CM_EVENT_DISCONNECTED:
			ended++;
			rdma_disconnect(c->id);
			conn_close(c, 0);
			break;
		case RDMA_CM_EVENT_ADDR_ERROR:
		case RDMA_CM_EVENT_ROUTE_ERROR:
		case RDMA_CM_EVENT_CONNECT_ERROR:
		case RDMA_CM_EVENT_UNREACHABLE:
			errors++;
			conn_close(c, 0.02);
			break;
		default:
			break;
		}
	}
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "src", required_argument, NULL, 's' }, { "dst", required_argument, NULL, 'd' },
		{ "port", required_argument, NULL, 'p' }, { "from", required_argument, NULL, 'f' },
		{ "to", required_argument, NULL, 't' }, { "conns", required_argument, NULL, 'c' },
		{ "seconds", required_argument, NULL, 'S' }, { "max-frame", required_argument, NULL, 'm' },
		{ NULL, 0, NULL, 0 },
	};
	const char *s = NULL, *d = NULL;
	int port = 0, nconns = 16, o;
	uint32_t from = 1, to = 0, max_frame = 1u << 20;
	double seconds = 10, end;

	while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (o) {
		case 's': s = optarg; break;
		case 'd': d = optarg; break;
		case 'p': port = atoi(optarg); break;
		case 'f': from = (uint32_t)strtoul(optarg, NULL, 0); break;
		case 't': to = (uint32_t)strtoul(optarg, NULL, 0); break;
		case 'c': nconns = atoi(optarg); break;
		case 'S': seconds = atof(optarg); break;
		case 'm': max_frame = (uint32_t)strtoul(optarg, NULL, 0); break;
		default: return 2;
		}
	}
	if (!s || !d || port <= 0 || nconns < 1 || nconns > MAX_CONNS) {
		fprintf(stderr, "usage: ft_rdmaflood --src IP --dst IP --port P --from N --to N [--conns C] "
			"[--seconds S] [--max-frame B]\n");
		return 2;
	}
	src = (struct sockaddr_in){ .sin_family = AF_INET };
	dst = (struct sockaddr_in){ .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	if (inet_pton(AF_INET, s, &src.sin_addr) != 1 || inet_pton(AF_INET, d, &dst.sin_addr) != 1) {
		fprintf(stderr, "ft_rdmaflood: --src and --dst are IPv4 addresses\n");
		return 2;
	}
	pv = (struct priv){ .magic = htole32(0x46525642u), .version_reserved = htole32(WIRE_VERSION),
			    .from = htole32(from), .to = htole32(to), .max_frame = htole32(max_frame) };
	ech = rdma_create_event_channel();
	if (!ech) {
		perror("rdma_create_event_channel");
		return 1;
	}
	fcntl(ech->fd, F_SETFL, fcntl(ech->fd, F_GETFL) | O_NONBLOCK);
	for (int i = 0; i < nconns; i++)
		conn_open(&conns[i]);
	{
		/* No SA_RESTART: poll returns at once with EINTR. */
		struct sigaction sa = { .sa_handler = on_term };

		sigaction(SIGTERM, &sa, NULL);
		sigaction(SIGINT, &sa, NULL);
	}
	end = now() + seconds;
	for (double t = now(); t < end && !stop; t = now()) {
		struct pollfd p = { .fd = ech->fd, .events = POLLIN };
		double next = end;

		for (int i = 0; i < nconns; i++) {
			if (conns[i].id)
				continue;
			if (conns[i].retry_at <= t)
				conn_open(&conns[i]);
			else if (conns[i].retry_at < next)
				next = conns[i].retry_at;
		}
		if (poll(&p, 1, (int)((next - t) * 1000) + 1) > 0)
			on_event();
	}
	printf("flood: established %lu refused %lu ended %lu errors %lu most-at-once %d\n", established, refused,
	       ended, errors, most);
	fflush(stdout);
	for (int i = 0; i < nconns; i++)
		if (conns[i].id)
			conn_close(&conns[i], 0);
	if (cq)
		ibv_destroy_cq(cq);
	if (pd)
		ibv_dealloc_pd(pd);
	rdma_destroy_event_channel(ech);
	return 0;
}
