/* daemon/main.c - ferryd: arguments, start-up and shut-down order, signals,
 * systemd notifications and the answers to ferryctl's queries. */
#include "auth.h"
#include "cluster.h"
#include "conf.h"
#include "frame.h"
#include "fwd.h"
#include "job.h"
#include "log.h"
#include "loop.h"
#include "notify.h"
#include "peer.h"
#include "recq.h"
#include "route.h"
#include "sess.h"
#include "../proto/ctl.h"

#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <unistd.h>

#define DRAIN_TIMEOUT_NS (5ull * 1000000000u)

static struct {
	struct conf conf;
	uint32_t self;
	uint64_t start_ns;
	int sfd;
	struct loop_watch sfd_w;
	struct loop_timer status_timer, watchdog_timer, drain_timer;
	uint64_t watchdog_ns;
	uint64_t drain_deadline;
	int stopping;
	char last_status[200];
} M = { .sfd = -1 };

static void usage(FILE *out)
{
	fprintf(out,
		"usage: ferryd [options]\n"
		"  --config FILE         configuration (default " CONF_DEFAULT_PATH ")\n"
		"  --node K              serve node K of the cluster (default: the node whose host\n"
		"                        is this machine's name)\n"
		"  --runtime-dir DIR     directory for the client socket (default: daemon.runtime_dir,\n"
		"                        /run/ferry)\n"
		"  --log-level LEVEL     err, warning, notice, info or debug (default: logging.level)\n"
		"  --check-config [FILE] validate the configuration, print the resolved topology, exit\n"
		"  --version, --help\n");
}

/* --- --check-config --- */

static void print_coords(FILE *out, const struct route *r, uint32_t node)
{
	uint32_t c[ROUTE_MAX_DIMS];

	route_coords(r, node, c);
	fputc('(', out);
	for (uint32_t d = 0; d < r->ndims; d++)
		fprintf(out, "%s%u", d ? "," : "", c[d]);
	fputc(')', out);
}

static void print_topology(FILE *out, const struct conf *c)
{
	const struct route *r = &c->route;
	uint32_t *peers = calloc(r->nnodes, sizeof(*peers));
	uint32_t maxp = 0, maxh = 0;
	char dims[128];

	route_dims_str(r, dims, sizeof(dims));
	fprintf(out, "cluster \"%s\": %u node%s, %s network\n", c->cluster_name, c->nnodes,
		c->nnodes == 1 ? "" : "s", conf_physical_name(c->physical));
	if (c->physical == CONF_SWITCHED)
		fprintf(out, "routing: virtual grid %s (%s)%s\n", dims,
			c->virtual_kind == CONF_VIRT_AUTO ? "auto" :
			c->virtual_kind == CONF_VIRT_DIRECT ? "direct" : "configured",
			r->npos > r->nnodes ? ", with empty positions at the end" : "");
	else
		fprintf(out, "routing: %s %s, neighbours only\n", conf_physical_name(c->physical), dims);
	for (uint32_t n = 0; n < c->nnodes && peers; n++) {
		uint32_t np = route_peers(r, n, peers, r->nnodes);

		fprintf(out, "node %u %s:%u ", n, c->nodes[n].host, c->nodes[n].port);
		print_coords(out, r, n);
		fprintf(out, " peers");
		for (uint32_t i = 0; i < np; i++)
			fprintf(out, " %u", peers[i]);
		fputc('\n', out);
		if (np > maxp)
			maxp = np;
	}
	for (uint32_t d = 0; d < c->nnodes && c->nnodes <= 4096; d++) {
		int h = route_hops(r, 0, d);

		if (h > (int)maxh)
			maxh = (uint32_t)h;
	}
	fprintf(out, "links per node: at most %u; hops from node 0: at most %u\n", maxp, maxh);
	fprintf(out, "aggregation: buffer_bytes %u, flush_us %u\n", c->buffer_bytes, c->flush_us);
	fprintf(out, "transport: %s\n", conf_transport_name(c->transport));
	fprintf(out, "limits: max_clients %u, ring_bytes %llu, memory_bytes %llu, pending_bytes %llu, "
		"link_bytes %llu\n", c->max_clients, (unsigned long long)c->ring_bytes,
		(unsigned long long)c->memory_bytes, (unsigned long long)c->pending_bytes,
		(unsigned long long)c->link_bytes);
	fprintf(out, "security: %s\n", c->key_file[0] ? c->key_file : "no key_file: insecure mode");
	fprintf(out, "daemon: runtime_dir %s, spin_us %u\n", c->runtime_dir, c->spin_us);
	free(peers);
}

/* --- which node are we --- */

static int resolve_self(const struct conf *c, long node_opt, uint32_t *self)
{
	char host[256] = "";
	long found = -1;

	if (node_opt >= 0) {
		if ((unsigned long)node_opt >= c->nnodes) {
			log_err("--node %ld: the cluster in %s has nodes 0 to %u", node_opt, c->path, c->nnodes - 1);
			return -EINVAL;
		}
		*self = (uint32_t)node_opt;
		return 0;
	}
	if (c->nnodes == 1) {
		*self = 0;
		return 0;
	}
	gethostname(host, sizeof(host) - 1);
	for (uint32_t i = 0; i < c->nnodes; i++) {
		const char *h = c->nodes[i].host;
		size_t n = strlen(h);

		if (strcmp(h, host) != 0 && !(strncmp(h, host, n) == 0 && host[n] == '.'))
			continue;
		if (found >= 0) {
			log_err("nodes %ld and %u of %s are both on host %s: pass --node", found, i, c->path, host);
			return -EINVAL;
		}
		found = i;
	}
	if (found < 0) {
		log_err("host %s is not a node of %s: pass --node", host, c->path);
		return -EINVAL;
	}
	*self = (uint32_t)found;
	return 0;
}

/* --- ferryctl queries --- */

static int query(uint32_t what, uint32_t arg, const struct ucred *cred, FILE *out)
{
	const struct conf *c = &M.conf;
	char dims[128];

	route_dims_str(&c->route, dims, sizeof(dims));
	switch (what) {
	case CTL_Q_STATUS:
		fprintf(out, "ferryd node %u of %u (cluster \"%s\"), pid %d, up %llu s%s\n", M.self,
			c->nnodes, c->cluster_name, (int)getpid(),
			(unsigned long long)((loop_now_ns() - M.start_ns) / 1000000000u),
			M.stopping ? ", stopping" : "");
		fprintf(out, "topology: %s, %s %s; transport %s%s\n", conf_physical_name(c->physical),
			c->physical == CONF_SWITCHED ? "virtual grid" : "routing over", dims, peer_transport_name(),
			auth_insecure() ? " (insecure: no cluster key)" : ", authenticated");
		fprintf(out, "links: %u peers\n", peer_count());
		peer_write_status(out);
		fprintf(out, "clients: %u sessions, %u endpoints; jobs here: %u\n", sess_count(),
			sess_endpoints(), job_count());
		sess_write_status(out, cred->uid);
		cluster_write_status(out, cred->uid);
		return 0;
	case CTL_Q_STATS:
		fprintf(out, "node %u\n", M.self);
		fprintf(out, "sessions %u\nendpoints %u\njobs %u\n", sess_count(), sess_endpoints(), job_count());
		fprintf(out, "memory_queued_bytes %llu\nmemory_queued_peak_bytes %llu\nmemory_region_bytes %llu\n"
			"memory_frame_bytes %llu\n",
			(unsigned long long)recq_mem_bytes, (unsigned long long)recq_mem_peak,
			(unsigned long long)sess_region_bytes(), (unsigned long long)frame_mem_bytes);
		fprintf(out, "sessions_opened %llu\nsessions_closed %llu\nsessions_killed %llu\n",
			(unsigned long long)sess_stats.sessions_opened,
			(unsigned long long)sess_stats.sessions_closed,
			(unsigned long long)sess_stats.sessions_killed);
		fprintf(out, "items_in %llu\nbytes_in %llu\nitems_delivered %llu\nitems_queued %llu\n"
			"items_dropped %llu\nstalls %llu\nflushes %llu\n",
			(unsigned long long)sess_stats.items_in, (unsigned long long)sess_stats.bytes_in,
			(unsigned long long)sess_stats.items_delivered,
			(unsigned long long)sess_stats.items_queued,
			(unsigned long long)sess_stats.items_dropped, (unsigned long long)sess_stats.stalls,
			(unsigned long long)sess_stats.flushes);
		fprintf(out, "items_routed %llu\nitems_from_network %llu\n",
			(unsigned long long)fwd_stats.items_routed, (unsigned long long)fwd_stats.items_local_in);
		fprintf(out, "loop_wakeups %llu\nloop_spins %llu\n", (unsigned long long)loop_stats.wakeups,
			(unsigned long long)loop_stats.spins);
		fprintf(out, "transport %s\n", peer_transport_name());
		peer_write_transport_stats(out);
		peer_write_stats(out);
		return 0;
	case CTL_Q_DEBUG:
		/* Fault injection for tests: break the link to node arg. */
		if (cred->uid != 0 && cred->uid != geteuid())
			return -EPERM;
		if (peer_fault(arg) < 0) {
			fprintf(out, "node %u is not a connected peer\n", arg);
			return -ENOENT;
		}
		fprintf(out, "link to node %u broken\n", arg);
		return 0;
	}
	return -EOPNOTSUPP;
}

/* --- timers and signals --- */

static void update_status(struct loop_timer *t)
{
	char s[sizeof(M.last_status)];

	snprintf(s, sizeof(s), "node %u/%u: %u clients, %u jobs, %llu items delivered%s", M.self,
		 M.conf.nnodes, sess_endpoints(), job_count(),
		 (unsigned long long)sess_stats.items_delivered, M.stopping ? ", stopping" : "");
	if (strcmp(s, M.last_status) != 0) {
		notify_status("%s", s);
		strcpy(M.last_status, s);
	}
	if (t)
		loop_timer_arm(t, 1000000000u, update_status, NULL);
}

static void on_watchdog(struct loop_timer *t)
{
	notify_watchdog();
	loop_timer_arm(t, M.watchdog_ns / 2, on_watchdog, NULL);
}

static void on_drain(struct loop_timer *t)
{
	if (!sess_busy()) {
		log_info("drained; exiting");
		loop_stop();
		return;
	}
	if (loop_now_ns() >= M.drain_deadline) {
		log_warn("items still queued after %llu s; exiting anyway",
			 (unsigned long long)(DRAIN_TIMEOUT_NS / 1000000000u));
		loop_stop();
		return;
	}
	loop_timer_arm(t, 10000000u, on_drain, NULL);
}

static void on_signal(struct loop_watch *w, uint32_t events)
{
	struct signalfd_siginfo si;

	(void)events;
	while (read(w->fd, &si, sizeof(si)) == sizeof(si)) {
		if (si.ssi_signo == SIGHUP) {
			log_notice("SIGHUP: configuration reload is not supported; restart ferryd to apply changes");
			continue;
		}
		if (M.stopping) {
			log_notice("second signal: exiting now");
			loop_stop();
			continue;
		}
		log_info("signal %u: stopping, delivering what is queued", si.ssi_signo);
		M.stopping = 1;
		notify_stopping();
		sess_stop_accepting();
		update_status(NULL);
		M.drain_deadline = loop_now_ns() + DRAIN_TIMEOUT_NS;
		on_drain(&M.drain_timer);
	}
}

static int signals_init(void)
{
	sigset_t set;
	int ret;

	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGHUP);
	sigprocmask(SIG_BLOCK, &set, NULL);
	M.sfd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
	if (M.sfd < 0) {
		ret = -errno;
		log_err("signalfd: %m");
		return ret;
	}
	ret = loop_add(&M.sfd_w, M.sfd, EPOLLIN, on_signal, NULL);
	if (ret < 0) {
		log_err("epoll add signalfd: %s", strerror(-ret));
		close(M.sfd);
		M.sfd = -1;
	}
	return ret;
}

static void signals_fini(void)
{
	if (M.sfd >= 0) {
		loop_del(&M.sfd_w);
		close(M.sfd);
	}
	M.sfd = -1;
}

/* One round of the data path: endpoints' rings, stalled frames and timers,
 * control messages, then acknowledgements for whatever arrived. */
static int poll_all(void)
{
	int work = sess_poll();

	work |= fwd_poll();
	work |= cluster_poll();
	work |= peer_poll();
	return work;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "node", required_argument, NULL, 'n' },
		{ "runtime-dir", required_argument, NULL, 'r' },
		{ "log-level", required_argument, NULL, 'l' },
		{ "check-config", no_argument, NULL, 'C' },
		{ "version", no_argument, NULL, 'V' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	static const struct loop_hooks hooks = {
		.poll = poll_all,
		.sleep_prepare = sess_sleep_prepare,
		.sleep_done = sess_sleep_done,
	};
	const char *config = NULL, *runtime_dir = NULL, *level = NULL;
	int check = 0, opt, ret, explicit_config;
	long node = -1;
	char err[512];

	while ((opt = getopt_long(argc, argv, "c:n:r:l:Vh", opts, NULL)) != -1) {
		switch (opt) {
		case 'c': config = optarg; break;
		case 'r': runtime_dir = optarg; break;
		case 'l': level = optarg; break;
		case 'C': check = 1; break;
		case 'n': {
			char *end;

			errno = 0;
			node = strtol(optarg, &end, 10);
			if (errno || *end || node < 0) {
				fprintf(stderr, "ferryd: --node %s: not a node number\n", optarg);
				return 2;
			}
			break;
		}
		case 'V': printf("ferryd %s\n", FERRY_VERSION); return 0;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (check && optind < argc)
		config = argv[optind++];
	if (optind < argc) {
		fprintf(stderr, "ferryd: unexpected argument '%s'\n", argv[optind]);
		usage(stderr);
		return 2;
	}

	explicit_config = config != NULL;
	if (!config)
		config = CONF_DEFAULT_PATH;
	ret = conf_load_file(&M.conf, config, err, sizeof(err));
	if (ret == -ENOENT && !explicit_config) {
		/* No configuration at all: a one-node cluster with every default. */
		snprintf(M.conf.path, sizeof(M.conf.path), "(built-in defaults)");
	} else if (ret < 0) {
		fprintf(stderr, "%s\n", err);
		return 1;
	}
	if (check) {
		print_topology(stdout, &M.conf);
		conf_free(&M.conf);
		return 0;
	}
	if (level && (M.conf.log_level = log_level_parse(level)) < 0) {
		fprintf(stderr, "ferryd: --log-level %s: must be err, warning, notice, info or debug\n", level);
		return 2;
	}
	if (runtime_dir) {
		if (strlen(runtime_dir) >= sizeof(M.conf.runtime_dir) - 32) {
			fprintf(stderr, "ferryd: --runtime-dir: path too long\n");
			return 2;
		}
		strcpy(M.conf.runtime_dir, runtime_dir);
	}
	log_init("ferryd", M.conf.log_level);
	if (resolve_self(&M.conf, node, &M.self) < 0)
		goto err_conf;
	M.start_ns = loop_now_ns();

	if (loop_init(M.conf.spin_us, &hooks) < 0)
		goto err_conf;
	if (signals_init() < 0)
		goto err_loop;
	if (auth_init(M.conf.key_file) < 0)
		goto err_signals;
	frame_init(M.conf.buffer_bytes);
	if (peer_init(&M.conf, M.self) < 0)
		goto err_peer;
	if (fwd_init(&M.conf, M.self) < 0)
		goto err_fwd;
	if (cluster_init(&M.conf, M.self) < 0)
		goto err_fwd;
	if (sess_init(&M.conf, M.self, notify_listen_fd(), query) < 0)
		goto err_cluster;

	log_notice("node %u of %u (cluster \"%s\") ready on %s/%s; %u peers, transport %s", M.self,
		   M.conf.nnodes, M.conf.cluster_name, M.conf.runtime_dir, SESS_SOCKET_NAME, peer_count(),
		   peer_transport_name());
	notify_ready();
	update_status(&M.status_timer);
	M.watchdog_ns = notify_watchdog_usec() * 1000u;
	if (M.watchdog_ns)
		on_watchdog(&M.watchdog_timer);

	ret = loop_run();

	sess_fini();
	cluster_fini();
	fwd_fini();
	peer_fini();
	frame_fini();
	auth_fini();
	signals_fini();
	loop_fini();
	conf_free(&M.conf);
	return ret < 0 ? 1 : 0;

err_cluster:
	cluster_fini();
err_fwd:
	fwd_fini();
err_peer:
	peer_fini();
	frame_fini();
	auth_fini();
err_signals:
	signals_fini();
err_loop:
	loop_fini();
err_conf:
	conf_free(&M.conf);
	return 1;
}
