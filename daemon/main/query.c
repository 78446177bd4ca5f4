/* daemon/main/query.c - see query.h. */
#include "query.h"
#include "../cluster/cluster.h"
#include "../cluster/costs.h"
#include "../coll/coll.h"
#include "../core/closer.h"
#include "../core/loop.h"
#include "../core/sandbox.h"
#include "../fwd/agg.h"
#include "../fwd/flow.h"
#include "../fwd/fwd.h"
#include "../fwd/rx.h"
#include "../fwd/tx.h"
#include "../local/direct.h"
#include "../local/endpoint.h"
#include "../local/session.h"
#include "../local/user.h"
#include "../net/auth.h"
#include "../net/frame.h"
#include "../net/peer.h"
#include "../../proto/ctl.h"

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static struct {
	const struct conf *conf;
	uint32_t self;
	uint64_t start_ns;
	const int *stopping;
} daemon_state;

void query_init(const struct conf *c, uint32_t self, uint64_t start_ns, const int *stopping)
{
	daemon_state.conf = c;
	daemon_state.self = self;
	daemon_state.start_ns = start_ns;
	daemon_state.stopping = stopping;
}

int query_answer(uint32_t what, uint32_t arg, const struct ucred *cred, FILE *out)
{
	const struct conf *c = daemon_state.conf;
	char dims[128], cpu_list[256];
	cpu_set_t cpus;

	route_dims_str(&c->route, dims, sizeof(dims));
	switch (what) {
	case CTL_Q_STATUS:
		/* The CPUs it runs on: daemon.cpus, or those it was started on. */
		if (sched_getaffinity(0, sizeof(cpus), &cpus) == 0)
			conf_cpus_str(&cpus, cpu_list, sizeof(cpu_list));
		else
			snprintf(cpu_list, sizeof(cpu_list), "?");
		fprintf(out, "ferryd node %u of %u (cluster \"%s\"), pid %d, up %llu s, on CPUs %s%s\n",
			daemon_state.self, c->nnodes, c->cluster_name, (int)getpid(),
			(unsigned long long)((loop_now_ns() - daemon_state.start_ns) / 1000000000u), cpu_list,
			*daemon_state.stopping ? ", stopping" : "");
		fprintf(out, "topology: %s, %s %s; transport %s%s\n", conf_physical_name(c->physical),
			c->physical == CONF_SWITCHED ? "virtual grid" : "routing over", dims, peer_transport_name(),
			auth_insecure() ? " (insecure: no cluster key)" :
			c->encrypt ? ", authenticated, frames encrypted" :
			c->integrity ? ", authenticated, frames authenticated" :
			", authenticated, frames NOT authenticated (security.integrity = false)");
		fprintf(out, "links: %u peers\n", peer_count());
		peer_write_status(out);
		fprintf(out, "clients: %u sessions, %u endpoints; jobs here: %u\n", sess_count(),
			ep_count(), job_count());
		user_write_status(out, cred->uid);
		cluster_write_status(out, cred->uid);
		return 0;
	case CTL_Q_STATS:
		fprintf(out, "node %u\n", daemon_state.self);
		fprintf(out, "sessions %u\nsessions_unjoined %u\nendpoints %u\njobs %u\nusers %u\n", sess_count(),
			user_total.unjoined, ep_count(), job_count(), user_count());
		fprintf(out, "memory_queued_bytes %llu\nmemory_queued_peak_bytes %llu\nmemory_table_bytes %llu\n"
			"memory_region_bytes %llu\nmemory_frame_bytes %llu\nmemory_reply_bytes %llu\n"
			"memory_waits %llu\nmemory_coll_bytes %llu\n",
			(unsigned long long)recq_mem_bytes, (unsigned long long)recq_mem_peak,
			(unsigned long long)user_total.table_bytes, (unsigned long long)ep_region_bytes(),
			(unsigned long long)frame_mem_bytes, (unsigned long long)sess_out_bytes(),
			(unsigned long long)user_total.mem_waits, (unsigned long long)user_total.coll_bytes);
		fprintf(out, "sessions_opened %llu\nsessions_closed %llu\nsessions_killed %llu\nsessions_refused %llu\n"
			"sessions_timed_out %llu\njoins_refused %llu\naccept_paused %llu\n"
			"joins_waited_fds %llu\n",
			(unsigned long long)sess_stats.sessions_opened,
			(unsigned long long)sess_stats.sessions_closed,
			(unsigned long long)sess_stats.sessions_killed,
			(unsigned long long)sess_stats.sessions_refused,
			(unsigned long long)sess_stats.sessions_timed_out,
			(unsigned long long)sess_stats.joins_refused,
			(unsigned long long)sess_stats.accept_paused,
			(unsigned long long)sess_stats.joins_waited_fds);
		fprintf(out, "fds_closing %u\nfds_handed_to_threads %llu\nclosing_threads_started %llu\nfds_kept_open %llu\n",
			closer_waiting_all(), (unsigned long long)closer_stats.queued,
			(unsigned long long)closer_stats.threads, (unsigned long long)closer_stats.kept);
		fprintf(out, "direct_jobs %llu\ndirect_failed %llu\ndirect_regions %u\n",
			(unsigned long long)direct_stats.jobs, (unsigned long long)direct_stats.failed, direct_count());
		fprintf(out, "items_in %llu\nbytes_in %llu\nitems_delivered %llu\nitems_queued %llu\n"
			"items_dropped %llu\nitems_lost %llu\nstalls %llu\nflushes %llu\nbatches_in %llu\ndense_in %llu\n",
			(unsigned long long)tx_stats.items_in, (unsigned long long)tx_stats.bytes_in,
			(unsigned long long)ep_stats.items_delivered,
			(unsigned long long)ep_stats.items_queued,
			(unsigned long long)ep_stats.items_dropped, (unsigned long long)ep_stats.items_lost,
			(unsigned long long)tx_stats.stalls,
			(unsigned long long)tx_stats.flushes, (unsigned long long)tx_stats.batches_in,
			(unsigned long long)tx_stats.dense_in);
		fprintf(out, "pieces_lent %llu\nloans_out %llu\npieces_taken_back %llu\ntaken_back_bytes %llu\n"
			"pieces_steered %llu\n",
			(unsigned long long)tx_stats.pieces_lent, (unsigned long long)tx_stats.loans_out,
			(unsigned long long)tx_stats.pieces_taken_back, (unsigned long long)tx_stats.taken_back_bytes,
			(unsigned long long)rx_pieces_steered);
		fprintf(out, "records_taken %llu\noffers_withdrawn %llu\n", (unsigned long long)ep_stats.records_taken,
			(unsigned long long)ep_stats.offers_withdrawn);
		fprintf(out, "items_routed %llu\nitems_from_network %llu\nsteps_early %llu\n",
			(unsigned long long)agg_items_routed, (unsigned long long)rx_items_local,
			(unsigned long long)rx_steps_early);
		fprintf(out, "items_parked %llu\nflow_xoff_sent %llu\nflow_xon_sent %llu\nflow_xoff_received %llu\n"
			"flow_xon_received %llu\n",
			(unsigned long long)flow_stats.parked, (unsigned long long)flow_stats.xoff_sent,
			(unsigned long long)flow_stats.xon_sent, (unsigned long long)flow_stats.xoff_received,
			(unsigned long long)flow_stats.xon_received);
		fprintf(out, "loop_wakeups %llu\nloop_spins %llu\n", (unsigned long long)loop_stats.wakeups,
			(unsigned long long)loop_stats.spins);
		fprintf(out, "transport %s\n", peer_transport_name());
		peer_write_transport_stats(out);
		fwd_write_peer_stats(out);
		coll_write_stats(out, cred->uid);
		return 0;
	case CTL_Q_COSTS:
		/* a user's own table (costs.h); another's for root only */
		if (arg != CTL_COSTS_OWN && arg != cred->uid && cred->uid != 0 && cred->uid != geteuid())
			return -EPERM;
		costs_write(out, arg == CTL_COSTS_OWN ? cred->uid : (uid_t)arg);
		return 0;
	case CTL_Q_DEBUG:
		/* Fault injection for tests: break the link to node arg, or
		 * show that the system call filter is on (by dying of it). */
		if (cred->uid != 0 && cred->uid != geteuid())
			return -EPERM;
		if (arg == CTL_DEBUG_FORBIDDEN_CALL) {
			int e = sandbox_probe();

			fprintf(out, "execve was not refused (%s): the system call filter is %s\n",
				strerror(-e), sandbox_mode_name(c->seccomp));
			return 0;
		}
		if (arg == CTL_DEBUG_KEEP_LOANS) {
			tx_keep_loans = 1;
			fprintf(out, "closing endpoints keep their loans from now on\n");
			return 0;
		}
		if (peer_fault(arg) < 0) {
			fprintf(out, "node %u is not a connected peer\n", arg);
			return -ENOENT;
		}
		fprintf(out, "link to node %u broken\n", arg);
		return 0;
	}
	return -EOPNOTSUPP;
}

