/* daemon/main/main.c - ferryd: arguments, start-up and shut-down order,
 * signals and systemd notifications.  The layers start bottom up (core, net,
 * local, fwd, cluster) and stop in reverse; main wires each layer's events to
 * the layer above (see the README's Layout section). */
#include "query.h"
#include "topology.h"
#include "../cluster/cluster.h"
#include "../coll/coll.h"
#include "../core/conf.h"
#include "../core/log.h"
#include "../core/loop.h"
#include "../core/notify.h"
#include "../core/sandbox.h"
#include "../fwd/fwd.h"
#include "../local/endpoint.h"
#include "../local/session.h"
#include "../net/auth.h"
#include "../net/frame.h"
#include "../net/peer.h"

#include <errno.h>
#include <getopt.h>
#include <malloc.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
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
} ferryd = { .sfd = -1 };

static void usage(FILE *out)
{
	fprintf(out,
		"usage: ferryd [options]\n"
		"  --config FILE         configuration (default " CONF_DEFAULT_PATH ")\n"
		"  --node K              serve node K of the cluster (default: the node whose host\n"
		"                        is this machine's name)\n"
		"  --runtime-dir DIR     directory for the client socket (default: daemon.runtime_dir,\n"
		"                        /run/ferry)\n"
		"  --state-dir DIR       where the runtime functions are kept (default:\n"
		"                        daemon.state_dir, /var/lib/ferry; \"\": nowhere)\n"
		"  --log-level LEVEL     err, warning, notice, info or debug (default: logging.level)\n"
		"  --seccomp MODE        the system call filter: kill, log or off (default: daemon.seccomp,\n"
		"                        kill)\n"
		"  --syscalls            print the system calls the filter allows, exit\n"
		"  --check-config [FILE] validate the configuration, print the resolved topology, exit\n"
		"  --version, --help\n");
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

/* File descriptors ferryd sends its clients are charged to its own
 * RLIMIT_NOFILE until the client reads them (the kernel refuses more in
 * flight: ETOOMANYREFS): 4 per endpoint, and 1 + direct.max_ranks more
 * with direct rings, for every endpoint at once if no client reads; and
 * the SESS_FDS_IN a client may send ahead of their MEMs.  So
 * the soft limit goes up to the hard one (the unit's LimitNOFILE=65536),
 * and a limit below what the configuration may need is said once. */
static void raise_nofile(const struct conf *c)
{
	uint64_t need = (uint64_t)c->max_clients * (5 + c->direct_max_ranks + 1 + SESS_FDS_IN) + 256;
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
		return;
	if (rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
			getrlimit(RLIMIT_NOFILE, &rl);
	}
	if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < need)
		log_notice("open files limited to %llu, below the %llu that limits.max_clients = %u with "
			   "direct.max_ranks = %u may need when clients do not read what they are sent "
			   "(their joins would then fail): raise LimitNOFILE", (unsigned long long)rl.rlim_cur,
			   (unsigned long long)need, c->max_clients, c->direct_max_ranks);
}

/* daemon.cpus: from here on ferryd runs on those CPUs only (and first
 * touches its memory there).  Under the unit, CPUAffinity= pins it before it
 * starts and the unit's filter has no sched_setaffinity (core/sandbox.def):
 * the call is made only when it changes something. */
static int pin_cpus(const struct conf *c)
{
	cpu_set_t now;
	char cpus[256];
	int ret;

	if (CPU_COUNT(&c->cpus) == 0)
		return 0;
	conf_cpus_str(&c->cpus, cpus, sizeof(cpus));
	if (sched_getaffinity(0, sizeof(now), &now) == 0 && CPU_EQUAL(&now, &c->cpus)) {
		log_notice("pinned to CPUs %s (already, by whoever started ferryd)", cpus);
		return 0;
	}
	if (sched_setaffinity(0, sizeof(c->cpus), &c->cpus) < 0) {
		ret = -errno;
		log_err("daemon.cpus %s: sched_setaffinity: %m", cpus);
		return ret;
	}
	log_notice("pinned to CPUs %s", cpus);
	return 0;
}

/* --- timers and signals --- */

static void update_status(struct loop_timer *t)
{
	char s[sizeof(ferryd.last_status)];

	snprintf(s, sizeof(s), "node %u/%u: %u clients, %u jobs, %llu items delivered%s", ferryd.self,
		 ferryd.conf.nnodes, ep_count(), job_count(),
		 (unsigned long long)ep_stats.items_delivered, ferryd.stopping ? ", stopping" : "");
	if (strcmp(s, ferryd.last_status) != 0) {
		notify_status("%s", s);
		strcpy(ferryd.last_status, s);
	}
	if (t)
		loop_timer_arm(t, 1000000000u, update_status, NULL);
}

static void on_watchdog(struct loop_timer *t)
{
	notify_watchdog();
	loop_timer_arm(t, ferryd.watchdog_ns / 2, on_watchdog, NULL);
}

static void on_drain(struct loop_timer *t)
{
	if (!ep_busy()) {
		log_info("drained; exiting");
		loop_stop();
		return;
	}
	if (loop_now_ns() >= ferryd.drain_deadline) {
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
		if (ferryd.stopping) {
			log_notice("second signal: exiting now");
			loop_stop();
			continue;
		}
		log_info("signal %u: stopping, delivering what is queued", si.ssi_signo);
		ferryd.stopping = 1;
		notify_stopping();
		sess_stop_accepting();
		update_status(NULL);
		ferryd.drain_deadline = loop_now_ns() + DRAIN_TIMEOUT_NS;
		on_drain(&ferryd.drain_timer);
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
	ferryd.sfd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
	if (ferryd.sfd < 0) {
		ret = -errno;
		log_err("signalfd: %m");
		return ret;
	}
	ret = loop_add(&ferryd.sfd_w, ferryd.sfd, EPOLLIN, on_signal, NULL);
	if (ret < 0) {
		log_err("epoll add signalfd: %s", strerror(-ret));
		close(ferryd.sfd);
		ferryd.sfd = -1;
	}
	return ret;
}

static void signals_fini(void)
{
	if (ferryd.sfd >= 0) {
		loop_del(&ferryd.sfd_w);
		close(ferryd.sfd);
	}
	ferryd.sfd = -1;
}

/* One round of the data path: endpoints' TX rings and frames kept back,
 * control items, then RX rings published and closed sessions ended (after
 * their TX rings were drained in this round), then acknowledgements for
 * whatever arrived. */
static int poll_all(void)
{
	int work = sess_take_posts();   /* (before coll_poll, which runs them) */

	work |= fwd_poll();
	work |= cluster_poll();
	work |= coll_poll();
	work |= sess_poll();
	work |= peer_poll();
	return work;
}

/* What the session layer tells the layers above: joins and leaves to the
 * cluster layer, collectives to the engine. */
static struct sess_events sess_ev;

/* Freed memory stays in the heap, up to KEEP_HEAP_BYTES.  A collective's
 * buffers (its streams, early pieces, the frames of large blocks) are
 * allocated and freed again at every operation, megabytes at a time; with
 * glibc's defaults (a threshold that follows the largest block freed, the
 * heap trimmed past twice that) every operation gave its pages back to the
 * kernel and faulted them in again, zeroed: a fifth of the daemons' time
 * in an all-to-all of 1 MiB blocks (perf: exc_page_fault, clear_page, brk),
 * and 1.3 ms instead of 0.55 ms per all-to-all of 64 KiB blocks over 4
 * nodes.  Blocks below KEEP_HEAP_MMAP come from the heap; larger ones are
 * mapped, and unmapped when freed.  Setting either option ends glibc's
 * adjusting of both, so both are set.  What users' jobs may take is
 * bounded by the limits (user.h), not by this; what the heap keeps is not:
 * the daemon's resident memory stays near its peak (freed blocks below the
 * heap's top are never given back), which the limits bound in turn. */
#define KEEP_HEAP_BYTES (64 << 20)
#define KEEP_HEAP_MMAP (32 << 20)

static void keep_heap(void)
{
#ifndef FERRY_SANITIZERS
	/* Both tried (a glibc that refuses one still takes the other), and
	 * nothing said if refused: it costs speed, not correctness.  (The
	 * sanitizers' allocator has options of its own and refuses both.) */
	(void)mallopt(M_MMAP_THRESHOLD, KEEP_HEAP_MMAP);
	(void)mallopt(M_TRIM_THRESHOLD, KEEP_HEAP_BYTES);
#endif
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "node", required_argument, NULL, 'n' },
		{ "runtime-dir", required_argument, NULL, 'r' },
		{ "state-dir", required_argument, NULL, 'D' },
		{ "log-level", required_argument, NULL, 'l' },
		{ "check-config", no_argument, NULL, 'C' },
		{ "seccomp", required_argument, NULL, 'S' },
		{ "syscalls", no_argument, NULL, 'L' },
		{ "version", no_argument, NULL, 'V' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	static const struct loop_hooks hooks = {
		.poll = poll_all,
		.sleep_prepare = ep_sleep_prepare,
		.sleep_done = ep_sleep_done,
	};
	const char *config = NULL, *runtime_dir = NULL, *state_dir = NULL, *level = NULL, *seccomp = NULL;
	int check = 0, opt, ret = 1, explicit_config;
	long node = -1;
	char err[512];

	while ((opt = getopt_long(argc, argv, "c:n:r:l:Vh", opts, NULL)) != -1) {
		switch (opt) {
		case 'c': config = optarg; break;
		case 'r': runtime_dir = optarg; break;
		case 'D': state_dir = optarg; break;
		case 'l': level = optarg; break;
		case 'C': check = 1; break;
		case 'S': seccomp = optarg; break;
		case 'L': sandbox_list(stdout); return 0;
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

	keep_heap();
	explicit_config = config != NULL;
	if (!config)
		config = CONF_DEFAULT_PATH;
	ret = conf_load_file(&ferryd.conf, config, err, sizeof(err));
	if (ret == -ENOENT && !explicit_config) {
		/* No configuration at all: a one-node cluster with every default. */
		snprintf(ferryd.conf.path, sizeof(ferryd.conf.path), "(built-in defaults)");
	} else if (ret < 0) {
		fprintf(stderr, "%s\n", err);
		return 1;
	}
	if (check) {
		topology_print(stdout, &ferryd.conf);
		conf_free(&ferryd.conf);
		return 0;
	}
	if (level && (ferryd.conf.log_level = log_level_parse(level)) < 0) {
		fprintf(stderr, "ferryd: --log-level %s: must be err, warning, notice, info or debug\n", level);
		return 2;
	}
	if (seccomp) {
		int m = -1;

		for (int i = SANDBOX_KILL; i <= SANDBOX_OFF; i++)
			if (strcmp(seccomp, sandbox_mode_name(i)) == 0)
				m = i;
		if (m < 0) {
			fprintf(stderr, "ferryd: --seccomp %s: must be kill, log or off\n", seccomp);
			return 2;
		}
		ferryd.conf.seccomp = m;
	}
	if (runtime_dir) {
		if (strlen(runtime_dir) >= sizeof(ferryd.conf.runtime_dir) - 32) {
			fprintf(stderr, "ferryd: --runtime-dir: path too long\n");
			return 2;
		}
		strcpy(ferryd.conf.runtime_dir, runtime_dir);
	}
	if (state_dir) {
		if (strlen(state_dir) >= sizeof(ferryd.conf.state_dir) - 32 || (*state_dir && *state_dir != '/')) {
			fprintf(stderr, "ferryd: --state-dir: an absolute path (not too long), or \"\"\n");
			return 2;
		}
		strcpy(ferryd.conf.state_dir, state_dir);
	}
	log_init("ferryd", ferryd.conf.log_level);
	ret = 1;                /* until the loop ran */
	raise_nofile(&ferryd.conf);
	if (resolve_self(&ferryd.conf, node, &ferryd.self) < 0 || pin_cpus(&ferryd.conf) < 0)
		goto free_conf;
	ferryd.start_ns = loop_now_ns();
	query_init(&ferryd.conf, ferryd.self, ferryd.start_ns, &ferryd.stopping);

	if (loop_init(ferryd.conf.spin_us, &hooks) < 0)
		goto free_conf;
	if (signals_init() < 0)
		goto fini_loop;
	if (auth_init(ferryd.conf.key_file) < 0)
		goto fini_signals;
	frame_init(ferryd.conf.buffer_bytes, ferryd.conf.link_bytes);
	if (peer_init(&ferryd.conf, ferryd.self, NULL, &fwd_peer_events) < 0)
		goto fini_frames;
	if (ep_init(&ferryd.conf, ferryd.self) < 0)
		goto fini_peers;
	if (fwd_init(&ferryd.conf, ferryd.self) < 0)
		goto fini_endpoints;
	if (cluster_init(&ferryd.conf, ferryd.self) < 0)
		goto fini_fwd;
	if (coll_init(&ferryd.conf, ferryd.self) < 0)
		goto fini_cluster;
	sess_ev = cluster_sess_events;
	sess_ev.coll_post = coll_post;
	sess_ev.coll_group_free = coll_group_free;
	if (sess_init(&ferryd.conf, ferryd.self, notify_listen_fd(), query_answer, &sess_ev) < 0)
		goto fini_coll;
	/* Everything is set up: from here on ferryd makes only the calls of
	 * core/sandbox.def.  Before READY=1, so that a daemon systemd counts
	 * as started is a sandboxed one. */
	if (sandbox_init(ferryd.conf.seccomp) < 0)
		goto fini_sessions;

	log_notice("node %u of %u (cluster \"%s\") ready on %s/%s; %u peers, transport %s", ferryd.self,
		   ferryd.conf.nnodes, ferryd.conf.cluster_name, ferryd.conf.runtime_dir, SESS_SOCKET_NAME, peer_count(),
		   peer_transport_name());
	notify_ready();
	update_status(&ferryd.status_timer);
	ferryd.watchdog_ns = notify_watchdog_usec() * 1000u;
	if (ferryd.watchdog_ns)
		on_watchdog(&ferryd.watchdog_timer);

	ret = loop_run() < 0 ? 1 : 0;
fini_sessions:
	sess_fini();
fini_coll:
	coll_fini();
fini_cluster:
	cluster_fini();
fini_fwd:
	fwd_fini();
fini_endpoints:
	ep_fini();
fini_peers:
	peer_fini();
fini_frames:
	frame_fini();
	auth_fini();
fini_signals:
	signals_fini();
fini_loop:
	loop_fini();
free_conf:
	conf_free(&ferryd.conf);
	return ret;
}
