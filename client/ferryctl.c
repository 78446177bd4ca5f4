/* client/ferryctl.c - ferry's command-line tool.
 *
 *   ferryctl [--runtime-dir DIR] status     what the local daemon is doing
 *   ferryctl [--runtime-dir DIR] stats      its counters, one "name value" per line
 *   ferryctl debug kill-link NODE           break the link to a peer (tests)
 *   ferryctl debug forbidden-call           show that ferryd's seccomp filter is on
 *   ferryctl debug keep-loans               closing clients keep their loans (tests)
 *   ferryctl route ...                      offline: routes through a topology
 *   ferryctl plan alltoall|scatter|gather   offline: what the collectives' planners make
 *   ferryctl keygen                         a new cluster key
 *
 * It speaks the control protocol of proto/ctl.h directly (it is not an
 * endpoint, so it does not use libferry).  `route` calls the daemon's own
 * routing functions (daemon/plan/route.c), so it shows exactly what ferryd does.
 */
#include "../daemon/plan/a2a.h"
#include "../daemon/plan/orth.h"
#include "../daemon/plan/rs.h"
#include "../daemon/plan/sched.h"
#include "../daemon/plan/route.h"
#include "../daemon/plan/scatter.h"
#include "../daemon/plan/sg_sim.h"
#include "../proto/coll.h"
#include "../proto/ctl.h"

#include <sodium.h>

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

static void usage(FILE *out)
{
	fprintf(out,
		"usage: ferryctl [--runtime-dir DIR] [--timeout MS] COMMAND\n"
		"  status                 node, topology, links, clients and jobs of the local ferryd\n"
		"  stats                  its counters, one \"name value\" per line; per peer: frames,\n"
		"                         bytes, items sent/received/forwarded/delivered, items per\n"
		"                         frame, flushes by cause, retransmissions; RDMA counters\n"
		"  debug kill-link NODE   break the link to peer NODE: its TCP connection, or its\n"
		"                         queue pair (to the error state); fault injection, for\n"
		"                         root or ferryd's user\n"
		"  debug forbidden-call   make ferryd attempt a system call its seccomp filter\n"
		"                         forbids (execve): with the filter on, the daemon is\n"
		"                         killed (systemd restarts it); for root or ferryd's user\n"
		"  debug keep-loans       from now on, a client that closes with large pieces\n"
		"                         unacknowledged leaves them in its ring, as when ferryd\n"
		"                         has no memory to copy them (tests); root or ferryd's user\n"
		"  route --dims AxBx... [--torus|--mesh|--grid] [--nodes N] --from NODE [--to NODE]\n"
		"        [--histogram]    offline: the path of one item, or how many network\n"
		"                         messages (hops) items need to every destination\n"
		"  plan alltoall (--nodes N | --dims AxBx... [--torus|--mesh|--grid]) --bytes M\n"
		"        [--ppn R] [--degree D] [--alpha-us A] [--beta-ns-per-byte B] [--format text|json]\n"
		"        [--costs FILE]\n"
		"                         offline: each all-to-all strategy's phases, messages and\n"
		"                         bytes per node and predicted time, and the one the cost\n"
		"                         model picks with these alpha and beta (M bytes per pair\n"
		"                         of ranks; R ranks per node, default 1; D: each node's\n"
		"                         blocks go to its next D nodes, default all; the topology\n"
		"                         options give the node count only, for now)\n"
		"  plan scatter|gather --dims AxBx... [--torus] [--root NODE] [--algo opt|sdf]\n"
		"        [--ppn R] [--bytes M] [--alpha-us A] [--beta-ns-per-byte B]\n"
		"        [--format text|json|schedule]\n"
		"                         offline: scatter from (gather to) NODE (default 0) on a\n"
		"                         physical torus, M bytes per rank (default 8): steps\n"
		"                         against the lower bound max(ceil((p-1)/L),\n"
		"                         eccentricity), regions (one per link of the root; text:\n"
		"                         drawn for 2-D and 3-D tori), opt (the partition) or sdf\n"
		"                         (shortest direction first); schedule: one line per\n"
		"                         message hop, \"node step from to\"\n"
		"  plan scatter|gather --dims AxBx... [--torus] [--root NODE] --simulate\n"
		"        [--algo opt|sdf|naive] [--block M] [--alpha-us A] [--beta-ns-per-byte B]\n"
		"        [--format text|json]\n"
		"                         offline: an alpha-beta simulation (daemon/plan/sg_sim.h):\n"
		"                         store and forward, each directed link one message at\n"
		"                         a time, A + M B per message per hop (M: a node's block,\n"
		"                         default --bytes x --ppn; A, B: default 6 us, 0.4 ns/B);\n"
		"                         opt and sdf run their plans asynchronously in each\n"
		"                         link's planned order, naive sends along the default\n"
		"                         dimension-ordered route, first come first served (the\n"
		"                         root furthest first); all three without --algo.  json:\n"
		"                         one object: collective, dims, nodes, root, block,\n"
		"                         alpha_us, beta_ns_per_byte, hop_us (A + M B), bound\n"
		"                         (hop times), algorithms: [{name, makespan_us, rounds\n"
		"                         (hop times), steps and step_sync_us (the plan's steps\n"
		"                         x hop_us; null for naive), hops, link_max (messages on\n"
		"                         the busiest link), queue_max, relay_queue_max (most\n"
		"                         messages waiting for one link, and of those held by a\n"
		"                         relay)}]\n"
		"  plan bcast|reduce|allreduce|allgather|allgatherv|reduce_scatter|reduce_scatter_block|\n"
		"       scan|exscan --nodes P --bytes M [--ppn R] [--alpha-us A] [--beta-ns-per-byte B]\n"
		"        [--format text|json] [--costs FILE] [--layout AxB...]\n"
		"                         offline: each algorithm's phases, messages and bytes per\n"
		"                         node and predicted time, and the one the daemons choose\n"
		"                         (M bytes per rank: the vector of the reductions, the\n"
		"                         block of allgather); --layout: orth over AxB, hier over\n"
		"                         AxBx... (default: the daemons' choice, the model's 2-D\n"
		"                         layout and the node count's prime factors)\n"
		"    --costs FILE         predict with the runtime functions of FILE (\"-\": the\n"
		"                         standard input) where it has them, as ferryctl costs\n"
		"                         prints them (\"(fitted)\"), else with A and B\n"
		"  costs [--uid U]        the local ferryd's runtime functions of your collectives\n"
		"                         (another user's: root): the times it measured (\"point\"\n"
		"                         lines: family, algorithm, nodes, ranks per node, bytes,\n"
		"                         the model's start-ups, bytes and reduced bytes, gamma,\n"
		"                         beta, the last times in us) and the functions a job of\n"
		"                         yours gets (\"# fn\"; \"root's\": from root's table)\n"
		"  keygen                 print a new cluster key (for security.key_file, chmod 600)\n"
		"options:\n"
		"  --runtime-dir DIR      where ferryd's socket is (default $FERRY_RUNTIME_DIR, /run/ferry)\n"
		"  --timeout MS           how long to wait for the daemon (default 5000)\n");
}

/* --- route --- */

static int parse_dims(const char *s, uint32_t *ndims, uint32_t *dims)
{
	*ndims = 0;
	while (*s) {
		char *end;
		unsigned long v = strtoul(s, &end, 10);

		if (end == s || v < 1 || v > ROUTE_MAX_NODES || *ndims == ROUTE_MAX_DIMS)
			return -1;
		dims[(*ndims)++] = (uint32_t)v;
		if (*end == 'x' || *end == 'X' || *end == ',')
			end++;
		else if (*end)
			return -1;
		s = end;
	}
	return *ndims ? 0 : -1;
}

/* parse_dims, saying what is wrong: "ferryctl CMD: --dims ARG: ...". */
static int dims_arg(const char *cmd, const char *arg, uint32_t *ndims, uint32_t *dims)
{
	if (parse_dims(arg, ndims, dims) == 0)
		return 0;
	fprintf(stderr, "ferryctl %s: --dims %s: want sizes like 4x8x8\n", cmd, arg);
	return -1;
}

static void print_node(const struct route *r, uint32_t n)
{
	uint32_t c[ROUTE_MAX_DIMS];

	route_coords(r, n, c);
	printf("%u (", n);
	for (uint32_t d = 0; d < r->ndims; d++)
		printf("%s%u", d ? "," : "", c[d]);
	printf(")");
}

static int cmd_route(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "dims", required_argument, NULL, 'd' }, { "torus", no_argument, NULL, 't' },
		{ "mesh", no_argument, NULL, 'm' }, { "grid", no_argument, NULL, 'g' },
		{ "nodes", required_argument, NULL, 'n' }, { "from", required_argument, NULL, 'f' },
		{ "to", required_argument, NULL, 'o' }, { "histogram", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	uint32_t dims[ROUTE_MAX_DIMS], ndims = 0, nodes = 0, hist[64] = { 0 };
	long from = -1, to = -1;
	int kind = ROUTE_GRID, histogram = 0, opt;
	uint64_t prod = 1, total = 0;
	struct route r;

	optind = 1;
	while ((opt = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (opt) {
		case 'd':
			if (dims_arg("route", optarg, &ndims, dims) < 0)
				return 2;
			break;
		case 't': kind = ROUTE_TORUS; break;
		case 'm': kind = ROUTE_MESH; break;
		case 'g': kind = ROUTE_GRID; break;
		case 'n': nodes = (uint32_t)strtoul(optarg, NULL, 10); break;
		case 'f': from = strtol(optarg, NULL, 10); break;
		case 'o': to = strtol(optarg, NULL, 10); break;
		case 'h': histogram = 1; break;
		default: return 2;
		}
	}
	if (!ndims || from < 0) {
		fprintf(stderr, "ferryctl route: needs --dims and --from\n");
		return 2;
	}
	for (uint32_t d = 0; d < ndims; d++)
		prod *= dims[d];
	if (!nodes)
		nodes = prod <= ROUTE_MAX_NODES ? (uint32_t)prod : 0;
	if (route_init(&r, kind, ndims, dims, nodes) < 0) {
		fprintf(stderr, "ferryctl route: %llu positions for %u nodes: a torus or mesh needs exactly as many "
			"nodes as positions, a grid at least as many positions as nodes and fewer than twice as many\n",
			(unsigned long long)prod, nodes);
		return 2;
	}
	if (from >= (long)nodes || to >= (long)nodes) {
		fprintf(stderr, "ferryctl route: nodes are 0 to %u\n", nodes - 1);
		return 2;
	}
	if (to >= 0 && !histogram) {
		uint32_t cur = (uint32_t)from;
		int hops = 0;

		print_node(&r, cur);
		while (cur != (uint32_t)to) {
			uint32_t next;

			route_next_hop(&r, cur, (uint32_t)to, &next);
			printf(" -> ");
			print_node(&r, next);
			cur = next;
			hops++;
		}
		printf("\n%d network message%s\n", hops, hops == 1 ? "" : "s");
		return 0;
	}
	for (uint32_t d = 0; d < nodes; d++) {
		int h = route_hops(&r, (uint32_t)from, d);

		if (h >= 0 && h < 64)
			hist[h]++;
		total++;
	}
	printf("%-6s %10s %9s\n", "hops", "nodes", "percent");
	for (int h = 0; h < 64; h++)
		if (hist[h])
			printf("%-6d %10u %8.3f%%\n", h, hist[h], 100.0 * hist[h] / (double)total);
	return 0;
}

/* --- plan --- */

/* Defaults of the cost model offline: loopback TCP on the machines ferry is
 * developed on (one way, busy-polling: 6 us; streaming 2.5 GB/s). */
#define PLAN_ALPHA_US 6.0
#define PLAN_BETA_NS_PER_BYTE 0.4

/* The long name of option val in opts. */
static const char *opt_name(const struct option *opts, int val)
{
	for (; opts->name; opts++)
		if (opts->val == val)
			return opts->name;
	return "?";
}

/* Whether option opt's argument may be read as a number, if it takes one
 * (numeric: those that do): not empty, no sign (strtoull takes "-1" for a
 * huge number), no leading blank.  Says why not. */
static int number_arg_ok(const struct option *opts, int opt, const char *numeric)
{
	if (!strchr(numeric, opt) || (*optarg && *optarg != '-' && *optarg != '+' && *optarg != ' '))
		return 1;
	fprintf(stderr, "ferryctl plan: --%s '%s': want a number, not negative\n", opt_name(opts, opt), optarg);
	return 0;
}

/* Whether the number just read from optarg (errno, where it ended, NULL if
 * none was read) took the whole argument.  Says why not. */
static int number_arg_read(const struct option *opts, int opt, const char *end)
{
	if (!errno && (!end || !*end))
		return 1;
	fprintf(stderr, "ferryctl plan: --%s %s: not a number\n", opt_name(opts, opt), optarg);
	return 0;
}

/* --- plan scatter | gather --- */

/* --simulate: the alpha-beta simulation of the plans pl (scatter, or their
 * reverse for gather) and of naive, or of algorithm only (-1: all three). */
static int print_simulation(const struct route *r, const struct scatter_plan *pl, int gather, int only,
			    const struct sg_sim_cost *c, int json)
{
	struct sg_sim_result res[SG_SIM_ALGOS];
	const char *op = gather ? "gather" : "scatter";
	char dstr[128];
	int ret, first = 1;

	route_dims_str(r, dstr, sizeof(dstr));
	for (int a = 0; a < SG_SIM_ALGOS; a++) {
		if (only >= 0 && a != only)
			continue;
		ret = a == SG_SIM_NAIVE ? sg_sim_naive(r, pl[0].root, gather, c, &res[a]) :
					  sg_sim_plan(r, &pl[a], c, &res[a]);
		if (ret) {
			fprintf(stderr, "ferryctl plan %s: simulating %s: %s\n", op, sg_sim_algo_name(a), strerror(-ret));
			return 1;
		}
	}
	const struct sg_sim_result *any = &res[only >= 0 ? only : 0];
	if (json) {
		printf("{\"schema_version\": 1, \"collective\": \"%s\", \"dims\": \"%s\", \"nodes\": %u, \"root\": %u, "
		       "\"block\": %llu, \"alpha_us\": %g, \"beta_ns_per_byte\": %g, \"hop_us\": %.3f, \"bound\": %u, "
		       "\"algorithms\": [",
		       op, dstr, pl[0].nodes, pl[0].root, (unsigned long long)c->block, c->alpha_us,
		       c->beta_us_per_byte * 1e3, any->hop_us, any->bound);
	} else {
		printf("%s %s node %u over the %s torus (%u nodes), simulated: block %llu B, alpha %g us, "
		       "beta %g ns/B: %.3f us a message a hop\n",
		       op, gather ? "to" : "from", pl[0].root, dstr, pl[0].nodes, (unsigned long long)c->block,
		       c->alpha_us, c->beta_us_per_byte * 1e3, any->hop_us);
	}
	for (int a = 0; a < SG_SIM_ALGOS; a++) {
		const struct sg_sim_result *x = &res[a];

		if (only >= 0 && a != only)
			continue;
		if (json) {
			printf("%s{\"name\": \"%s\", \"makespan_us\": %.3f, \"rounds\": %u, ", first ? "" : ", ",
			       sg_sim_algo_name(a), x->makespan_us, x->rounds);
			if (a == SG_SIM_NAIVE)
				printf("\"steps\": null, \"step_sync_us\": null, ");
			else
				printf("\"steps\": %u, \"step_sync_us\": %.3f, ", x->steps, x->step_sync_us);
			printf("\"hops\": %llu, \"link_max\": %u, \"queue_max\": %u, \"relay_queue_max\": %u}",
			       (unsigned long long)x->hops, x->link_max, x->queue_max, x->relay_queue_max);
		} else {
			printf("  %-5s %14.3f us  %4u hop times", sg_sim_algo_name(a), x->makespan_us, x->rounds);
			if (a != SG_SIM_NAIVE)
				printf(" (%u steps: %.3f us step by step)", x->steps, x->step_sync_us);
			printf("; busiest link %u messages, most waiting for a link %u, at a relay %u\n", x->link_max,
			       x->queue_max, x->relay_queue_max);
		}
		first = 0;
	}
	if (json)
		printf("]}\n");
	else
		printf("lower bound %u hop times (%.3f us)\n", any->bound, any->bound * any->hop_us);
	return 0;
}

/* What a plan makes each node send and receive (messages: SEND, FORWARD). */
static void scatter_counts(const struct scatter_plan *p, uint64_t block, struct a2a_stats *st)
{
	uint32_t *sends = calloc(p->nodes, sizeof(*sends)), *recvs = calloc(p->nodes, sizeof(*recvs));
	uint32_t total = p->first[p->nodes];

	memset(st, 0, sizeof(*st));
	for (uint32_t i = 0; sends && recvs && i < total; i++) {
		sends[p->hops[i].from]++;
		recvs[p->hops[i].to]++;
	}
	for (uint32_t v = 0; sends && recvs && v < p->nodes; v++) {
		if (sends[v] > st->sends_max)
			st->sends_max = sends[v];
		if (recvs[v] > st->recvs_max)
			st->recvs_max = recvs[v];
	}
	st->sends_mean = (double)total / p->nodes;
	st->bytes_sent_max = (uint64_t)st->sends_max * block;
	free(sends);
	free(recvs);
}

/* The partition drawn as the paper's Figures 1-3: one letter per region
 * (A for the root's first link, ...), the root '*'; a 3-D torus plane by
 * plane of its first dimension.  Dimensions of side 1 are left out. */
static void draw_regions(const struct route *r, const struct scatter_plan *p)
{
	uint32_t eff[ROUTE_MAX_DIMS], ne = 0;

	for (uint32_t d = 0; d < r->ndims; d++)
		if (r->dims[d] > 1)
			eff[ne++] = d;
	if (ne < 1 || ne > 3)
		return;
	uint32_t planes = ne == 3 ? r->dims[eff[0]] : 1;
	uint32_t rows = ne >= 2 ? r->dims[eff[ne - 2]] : 1, cols = r->dims[eff[ne - 1]];

	printf("partition (%s%s, root *):\n", ne == 3 ? "planes of the first dimension, " : "",
	       ne >= 2 ? "rows and columns the last two dimensions" : "one row");
	for (uint32_t pl = 0; pl < planes; pl++) {
		if (ne == 3)
			printf("  plane %u\n", pl);
		for (uint32_t y = 0; y < rows; y++) {
			printf("  ");
			for (uint32_t x = 0; x < cols; x++) {
				uint32_t v = x * r->stride[eff[ne - 1]];

				if (ne >= 2)
					v += y * r->stride[eff[ne - 2]];
				if (ne == 3)
					v += pl * r->stride[eff[0]];
				printf(" %c", v == p->root ? '*' : (char)('A' + p->region[v]));
			}
			printf("\n");
		}
	}
}

static int cmd_plan_scatter(int argc, char **argv, int gather)
{
	static const struct option opts[] = {
		{ "dims", required_argument, NULL, 'd' }, { "torus", no_argument, NULL, 't' },
		{ "mesh", no_argument, NULL, 'm' }, { "grid", no_argument, NULL, 'g' },
		{ "root", required_argument, NULL, 'r' }, { "algo", required_argument, NULL, 'a' },
		{ "ppn", required_argument, NULL, 'p' }, { "bytes", required_argument, NULL, 'b' },
		{ "alpha-us", required_argument, NULL, 'A' }, { "beta-ns-per-byte", required_argument, NULL, 'B' },
		{ "format", required_argument, NULL, 'f' }, { "simulate", no_argument, NULL, 'S' },
		{ "block", required_argument, NULL, 'k' }, { NULL, 0, NULL, 0 },
	};
	const char *op = gather ? "gather" : "scatter";
	uint32_t dims[ROUTE_MAX_DIMS], ndims = 0;
	unsigned long long root = 0, ppn = 1, bytes = 8, block = 0;
	double alpha = PLAN_ALPHA_US, beta = PLAN_BETA_NS_PER_BYTE;
	int kind = ROUTE_TORUS, algo = SCATTER_OPT, format = 't', opt, ret, simulate = 0, sim_algo = -1, have_block = 0;
	struct scatter_plan pl[2];
	struct a2a_stats st[2];
	uint64_t prod = 1;
	struct route r;
	char *end, dstr[128];

	optind = 1;
	while ((opt = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		errno = 0;
		end = NULL;     /* (set by the numbers' strto*) */
		if (!number_arg_ok(opts, opt, "rpbABk"))
			return 2;
		switch (opt) {
		case 'd':
			if (dims_arg("plan", optarg, &ndims, dims) < 0)
				return 2;
			break;
		case 't': kind = ROUTE_TORUS; break;
		case 'm': kind = ROUTE_MESH; break;
		case 'g': kind = ROUTE_GRID; break;
		case 'r': root = strtoull(optarg, &end, 10); break;
		case 'a':
			sim_algo = sg_sim_algo_by_name(optarg);
			if (sim_algo < 0) {
				fprintf(stderr, "ferryctl plan %s: --algo opt, sdf or (with --simulate) naive\n", op);
				return 2;
			}
			if (sim_algo != SG_SIM_NAIVE)
				algo = sim_algo;
			break;
		case 'S': simulate = 1; break;
		case 'k':
			block = strtoull(optarg, &end, 10);
			have_block = 1;
			break;
		case 'p': ppn = strtoull(optarg, &end, 10); break;
		case 'b': bytes = strtoull(optarg, &end, 10); break;
		case 'A': alpha = strtod(optarg, &end); break;
		case 'B': beta = strtod(optarg, &end); break;
		case 'f':
			if (strcmp(optarg, "json") != 0 && strcmp(optarg, "text") != 0 && strcmp(optarg, "schedule") != 0) {
				fprintf(stderr, "ferryctl plan %s: --format text, json or schedule\n", op);
				return 2;
			}
			format = optarg[0];
			break;
		default: return 2;
		}
		if (!number_arg_read(opts, opt, end))
			return 2;
	}
	if (!ndims) {
		fprintf(stderr, "ferryctl plan %s: needs --dims (a physical torus)\n", op);
		return 2;
	}
	if (!simulate && (sim_algo == SG_SIM_NAIVE || have_block)) {
		fprintf(stderr, "ferryctl plan %s: --algo naive and --block go with --simulate\n", op);
		return 2;
	}
	if (simulate && format == 's') {
		fprintf(stderr, "ferryctl plan %s: --simulate prints text or json\n", op);
		return 2;
	}
	if (kind != ROUTE_TORUS) {
		fprintf(stderr, "ferryctl plan %s: planned on a physical torus (--torus) only, so far\n", op);
		return 2;
	}
	for (uint32_t d = 0; d < ndims && prod <= SCATTER_MAX_NODES; d++)
		prod *= dims[d];
	if (prod > SCATTER_MAX_NODES || route_init(&r, kind, ndims, dims, (uint32_t)prod) < 0) {
		fprintf(stderr, "ferryctl plan %s: the torus has 1 to %u nodes\n", op, SCATTER_MAX_NODES);
		return 2;
	}
	/* (a hop's time, α + β × the block, must be a number too: JSON has no inf) */
	if (root >= prod || ppn < 1 || ppn > 1024 || bytes > (1ull << 40) / ppn || !isfinite(alpha) ||
	    !isfinite(beta) || alpha < 0 || beta < 0 || block > (1ull << 40) ||
	    !isfinite(alpha + (double)(block ? block : bytes * ppn) * beta * 1e-3 * 1e6)) {
		fprintf(stderr, "ferryctl plan %s: --root 0 to %llu, --ppn 1 to 1024, --bytes at most 2^40 / ppn, "
			"--block at most 2^40, --alpha-us and --beta-ns-per-byte finite and not negative, and a "
			"hop's time, a million times over, too\n", op, (unsigned long long)prod - 1);
		return 2;
	}
	/* Both algorithms (the JSON lists both), gather as their reverse. */
	for (int a = 0; a < 2; a++) {
		struct scatter_plan s;

		ret = scatter_plan(&r, (uint32_t)root, a, &s);
		if (!ret && gather) {
			ret = scatter_reverse(&s, &pl[a]);
			scatter_plan_free(&s);
		} else if (!ret) {
			pl[a] = s;
		}
		if (ret) {
			fprintf(stderr, "ferryctl plan %s: %s\n", op, strerror(-ret));
			if (a)
				scatter_plan_free(&pl[0]);
			return 1;
		}
		/* node level: a message carries a node's ranks' blocks */
		scatter_counts(&pl[a], bytes * ppn, &st[a]);
	}
	const struct scatter_plan *p = &pl[algo];
	route_dims_str(&r, dstr, sizeof(dstr));
	if (simulate) {
		struct sg_sim_cost c = {
			.block = have_block ? block : bytes * ppn, .alpha_us = alpha, .beta_us_per_byte = beta * 1e-3,
		};

		ret = print_simulation(&r, pl, gather, sim_algo, &c, format == 'j');
		scatter_plan_free(&pl[0]);
		scatter_plan_free(&pl[1]);
		return ret;
	} else if (format == 's') {
		printf("# %s %s torus root %u algo %s steps %u bound %u\n", op, dstr, p->root, scatter_algo_name(algo),
		       p->steps, p->bound);
		printf("# %s step from to (node ids row-major, last dimension fastest; steps from 1)\n",
		       gather ? "source" : "dest");
		for (uint32_t v = 0; v < p->nodes; v++)
			for (uint32_t i = p->first[v]; i < p->first[v + 1]; i++)
				printf("%u %u %u %u\n", v, p->hops[i].step, p->hops[i].from, p->hops[i].to);
	} else if (format == 'j') {
		printf("{\"schema_version\": 1, \"collective\": \"%s\", \"nodes\": %u, \"ppn\": %llu, \"bytes\": %llu, "
		       "\"dims\": \"%s\", \"root\": %u, \"alpha_us\": %g, \"beta_ns_per_byte\": %g, \"chosen\": \"%s\", "
		       "\"bound\": %u, \"steps\": %u, \"regions\": [",
		       op, p->nodes, ppn, bytes, dstr, p->root, alpha, beta, scatter_algo_name(algo), p->bound, p->steps);
		for (uint32_t k = 0; k < p->nregions; k++)
			printf("%s{\"name\": \"%c\", \"next_to_root\": %u, \"size\": %u}", k ? ", " : "", 'A' + k,
			       p->nbr[k], p->size[k]);
		printf("], \"strategies\": [");
		for (int a = 0; a < 2; a++)
			/* store and forward, one block per link and step: a step
			 * costs one message of the node's block */
			printf("%s{\"name\": \"%s\", \"phases\": %u, \"steps\": %u, \"bound\": %u, \"sends_max\": %u, "
			       "\"sends_mean\": %.3f, \"recvs_max\": %u, \"bytes_sent_max\": %llu, \"predicted_us\": %.3f}",
			       a ? ", " : "", scatter_algo_name(a), pl[a].steps, pl[a].steps, pl[a].bound, st[a].sends_max,
			       st[a].sends_mean, st[a].recvs_max, (unsigned long long)st[a].bytes_sent_max,
			       pl[a].steps * (alpha + beta * 1e-3 * (double)(bytes * ppn)));
		printf("]}\n");
	} else {
		printf("%s %s node %u over the %s torus (%u nodes), %s: %u steps, lower bound %u "
		       "(max(ceil(%u / %u links), eccentricity %u))\n",
		       op, gather ? "to" : "from", p->root, dstr, p->nodes, scatter_algo_name(algo), p->steps, p->bound,
		       p->nodes - 1, p->nregions, p->ecc);
		printf("regions, one per link of the root (%s):\n",
		       algo == SCATTER_OPT ? "the partition; furthest first on every link" : "the link each message left on");
		for (uint32_t k = 0; k < p->nregions; k++)
			printf("  %c  through node %-6u %u node%s\n", 'A' + k, p->nbr[k], p->size[k],
			       p->size[k] == 1 ? "" : "s");
		draw_regions(&r, p);
		printf("%s %u steps, %s %u\n", scatter_algo_name(algo), pl[algo].steps, scatter_algo_name(!algo),
		       pl[!algo].steps);
	}
	scatter_plan_free(&pl[0]);
	scatter_plan_free(&pl[1]);
	return 0;
}

/* plan's --format: text (0) or json (1) into *json_p; -1 (said) else. */
static int format_arg(const char *v, int *json_p)
{
	if (strcmp(v, "json") != 0 && strcmp(v, "text") != 0) {
		fprintf(stderr, "ferryctl plan: --format text or json\n");
		return -1;
	}
	*json_p = v[0] == 'j';
	return 0;
}

/* ---- plan of bcast, reduce, allreduce, allgather, reduce_scatter, scan ---- */

/* One candidate of a plan: its schedule's messages per node (SEND steps,
 * their parts' bytes; RECV and RECV_REDUCE), from the steps themselves. */
struct cand {
	const char *name;
	uint32_t phases, sends_max, recvs_max;
	double sends_mean, us;
	uint64_t bytes_sent_max;
	int fitted;                     /* us is a runtime function's (--costs) */
	char layout[48];                /* its grid, "4x2" ("": none) */
};

/* --costs FILE ("-": the standard input): runtime functions as ferryctl
 * costs prints them and ferryd keeps them (daemon/plan/cost.h), the table
 * allocated into *t_p.  0, or -1 (said why). */
static int costs_arg(const char *path, struct cost_table **t_p)
{
	FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "r");
	size_t cap = 1u << 20, n = 0;
	char *text = malloc(cap), err[160];
	int bad;

	if (!f || !text || !(*t_p = malloc(sizeof(**t_p)))) {
		fprintf(stderr, "ferryctl plan: --costs %s: %s\n", path, strerror(errno ? errno : ENOMEM));
		free(text);
		if (f && f != stdin)
			fclose(f);
		return -1;
	}
	n = fread(text, 1, cap, f);
	if (f != stdin)
		fclose(f);
	bad = n == cap ? -EFBIG : cost_table_parse(*t_p, text, n, 0, err, sizeof(err));
	free(text);
	/* (as GO carries them: the daemons' predictions, to the bit) */
	for (uint32_t fam = 0; !bad && fam < CTL_FAMS; fam++)
		for (uint32_t a = 0; a < CTL_FAM_ALGS_MAX; a++) {
			uint32_t tau, tc;

			cost_fn_wire(&(*t_p)->fn[fam][a], &tau, &tc);
			cost_fn_unwire(tau, tc, &(*t_p)->fn[fam][a]);
		}
	if (bad) {
		fprintf(stderr, "ferryctl plan: --costs %s: %s\n", path, bad == -EFBIG ? "too large" : err);
		free(*t_p);
		*t_p = NULL;
		return -1;
	}
	return 0;
}

/* Where plan alltoall's and the phased plans' common options go. */
struct plan_common {
	unsigned long long *nodes, *ppn, *bytes;
	double *alpha, *beta;
	int *json, *have_bytes;
	struct cost_table **t;
};

/* --nodes, --ppn, --bytes, --alpha-us, --beta-ns-per-byte, --format and
 * --costs (as 'n', 'p', 'b', 'a', 'B', 'f', 'c'): 1 if opt is one of them
 * (a number's end in *end, for number_arg_read), 0 if not, -1 for a bad
 * value (said). */
static int plan_common_opt(int opt, const struct plan_common *c, char **end)
{
	switch (opt) {
	case 'n': *c->nodes = strtoull(optarg, end, 10); return 1;
	case 'p': *c->ppn = strtoull(optarg, end, 10); return 1;
	case 'b':
		*c->bytes = strtoull(optarg, end, 10);
		*c->have_bytes = 1;
		return 1;
	case 'a': *c->alpha = strtod(optarg, end); return 1;
	case 'B': *c->beta = strtod(optarg, end); return 1;
	case 'f': return format_arg(optarg, c->json) < 0 ? -1 : 1;
	case 'c':
		free(*c->t);
		*c->t = NULL;
		return costs_arg(optarg, c->t) < 0 ? -1 : 1;
	}
	return 0;
}

static void cand_stats(const struct sched *s, struct cand *c)
{
	uint64_t sends = 0;

	for (uint32_t n = 0; n < s->nodes; n++) {
		const struct sched_node *sn = &s->node[n];
		uint32_t snd = 0, rcv = 0;
		uint64_t b = 0;

		for (uint32_t k = 0; k < sn->nsteps; k++) {
			const struct sched_step *st = &sn->steps[k];

			if (st->kind == SCHED_SEND || st->kind == SCHED_FORWARD) {
				snd++;
				for (uint32_t i = 0; i < st->nref; i++)
					b += sn->segs[sn->refs[st->ref + i]].len;
			}
			rcv += st->kind == SCHED_RECV || st->kind == SCHED_RECV_REDUCE;
		}
		sends += snd;
		c->sends_max = snd > c->sends_max ? snd : c->sends_max;
		c->recvs_max = rcv > c->recvs_max ? rcv : c->recvs_max;
		c->bytes_sent_max = b > c->bytes_sent_max ? b : c->bytes_sent_max;
	}
	c->sends_mean = s->nodes ? (double)sends / s->nodes : 0;
}

/* The plans of kind (ctl's) over nodes x ppn ranks (contiguous per node),
 * bytes per rank (the whole vector: uint8 elements, bitwise or, for the
 * reductions), into c[]; the chosen one's index in *chosen_p.  Returns the
 * candidates, or -errno. */
static int phased_cands(uint32_t kind, uint32_t nodes, uint32_t ppn, uint64_t bytes, const struct cost *cm,
			const struct orth_dims *layout, struct cand *c, int *chosen_p)
{
	uint32_t P = nodes * ppn, *first = malloc((nodes + 1) * sizeof(*first)), *at = malloc(P * sizeof(*at));
	uint64_t *counts = calloc(P, sizeof(*counts));
	struct a2a_layout lay = { P, first, at };
	int n = 0, ret = 0;

	if (!first || !at || !counts) {
		ret = -ENOMEM;
		goto out;
	}
	for (uint32_t k = 0; k <= nodes; k++)
		first[k] = k * ppn;
	for (uint32_t r = 0; r < P; r++) {
		at[r] = r;
		counts[r] = bytes / P;
	}
	if (kind == CTL_COLL_REDUCE_SCATTER || kind == CTL_COLL_REDUCE_SCATTER_BLOCK) {
		struct rs_args a = { .counts = counts, .type = COLL_UINT8, .op = COLL_BOR };
		struct rs_plan best;

		if ((ret = rs_choose(-1, nodes, bytes, cm, &best)) < 0)
			goto out;
		for (int alg = 0; alg < RS_ALGS && !ret; alg++, n++) {
			struct rs_plan p;
			struct sched s;

			struct rs_model one = { .bytes = bytes };

			if ((ret = rs_choose(alg, nodes, bytes, cm, &p)) < 0 || (ret = sched_init(&s, nodes)) < 0)
				break;
			one.plan[alg] = p;
			one.have[alg] = 1;
			if ((ret = rs_sched(&p, &lay, &a, &s)) == 0) {
				c[n] = (struct cand){ .name = rs_alg_name(alg), .phases = p.ndims,
						      .us = cost_predict(cm, rs_model_us, &one, (uint32_t)alg),
						      .fitted = cost_fitted(cm, (uint32_t)alg) };
				cand_stats(&s, &c[n]);
				if (!memcmp(&p, &best, sizeof(p)))
					*chosen_p = n;
			}
			sched_free(&s);
		}
	} else if (kind == CTL_COLL_SCAN || kind == CTL_COLL_EXSCAN) {
		uint32_t runs = rs_scan_runs(&lay, nodes);
		struct rs_scan_args a = { .count = bytes, .type = COLL_UINT8, .op = COLL_BOR,
					  .exclusive = kind == CTL_COLL_EXSCAN };
		struct sched s;

		struct rs_scan_model m = { runs, 0, bytes };

		a.chunks = m.chunks = rs_scan_chunks(runs, bytes, 1, cm->alpha_us, cm->beta_ns, cm->gamma_ns);
		if ((ret = sched_init(&s, nodes)) == 0 && (ret = rs_scan_sched(&a, &lay, nodes, &s)) == 0) {
			c[n] = (struct cand){ .name = "chain", .phases = 1, .us = cost_predict(cm, rs_scan_model_us, &m, 0),
					      .fitted = cost_fitted(cm, 0) };
			cand_stats(&s, &c[n++]);
			*chosen_p = 0;
		}
		sched_free(&s);
	} else {
		enum orth_kind ok = kind == CTL_COLL_BCAST ? ORTH_BCAST : kind == CTL_COLL_REDUCE ? ORTH_REDUCE
				    : kind == CTL_COLL_ALLREDUCE ? ORTH_ALLREDUCE : ORTH_ALLGATHER;
		uint64_t per = ok == ORTH_ALLGATHER ? bytes : bytes;
		struct orth_dims dims, grid;
		enum orth_alg best;
		struct orth_model m = { ok, nodes, ppn, per, &dims, &grid };

		/* as the daemons: orth over the model's layout, hier over P's
		 * prime factors; --layout: those */
		orth_hier_dims(nodes, &dims);
		orth_layout(ok, nodes, ppn, per, cm->alpha_us, cm->beta_ns, &grid);
		if (layout && layout->k == 2)
			grid = *layout;
		if (layout)
			dims = *layout;
		best = orth_choose(ok, nodes, ppn, per, cm, &dims, &grid);
		for (int alg = 0; alg < ORTH_ALGS && !ret; alg++, n++) {
			struct orth_args a = { .kind = ok, .alg = alg, .dims = &dims, .grid = &grid, .bytes = bytes,
					       .count = bytes, .type = COLL_UINT8, .op = COLL_BOR, .block = bytes };
			const struct orth_dims *d = alg == ORTH_GRID ? &grid : alg == ORTH_HIER ? &dims : NULL;
			struct sched s;

			if ((ret = sched_init(&s, nodes)) < 0)
				break;
			if ((ret = orth_sched(&a, &lay, nodes, NULL, &s)) == 0) {
				c[n] = (struct cand){ .name = orth_alg_name(alg),
						      .phases = alg == ORTH_SINGLE ? 1 + (ok == ORTH_ALLREDUCE)
								: alg == ORTH_GRID ? 2 : dims.k,
						      .us = cost_predict(cm, orth_model_us, &m, (uint32_t)alg),
						      .fitted = cost_fitted(cm, (uint32_t)alg) };
				for (uint32_t l = 0; d && l < d->k; l++)
					snprintf(c[n].layout + strlen(c[n].layout), sizeof(c[n].layout) - strlen(c[n].layout),
						 "%s%u", l ? "x" : "", d->d[l]);
				cand_stats(&s, &c[n]);
				if (alg == (int)best)
					*chosen_p = n;
			}
			sched_free(&s);
		}
	}
out:
	free(first);
	free(at);
	free(counts);
	return ret < 0 ? ret : n;
}

/* ferryctl plan bcast|reduce|allreduce|allgather|reduce_scatter|scan ...:
 * the candidates' messages and predicted times, and the choice, as the
 * daemons make it (the same planners and cost model). */
static int cmd_plan_phased(int argc, char **argv, uint32_t kind)
{
	static const struct option opts[] = {
		{ "nodes", required_argument, NULL, 'n' }, { "ppn", required_argument, NULL, 'p' },
		{ "bytes", required_argument, NULL, 'b' }, { "alpha-us", required_argument, NULL, 'a' },
		{ "beta-ns-per-byte", required_argument, NULL, 'B' }, { "format", required_argument, NULL, 'f' },
		{ "costs", required_argument, NULL, 'c' }, { "layout", required_argument, NULL, 'l' },
		{ NULL, 0, NULL, 0 },
	};
	const char *op = ctl_coll_kind_name(kind);
	struct cost_table *t = NULL;
	struct orth_dims layout;
	int have_layout = 0;
	struct cost cm;
	unsigned long long nodes = 0, ppn = 1, bytes = 0;
	double alpha = PLAN_ALPHA_US, beta = PLAN_BETA_NS_PER_BYTE;
	int json = 0, have_bytes = 0, opt, n, chosen = 0;
	const struct plan_common pc = { &nodes, &ppn, &bytes, &alpha, &beta, &json, &have_bytes, &t };
	struct cand c[4];
	char *end;

	optind = 1;
	while ((opt = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		errno = 0;
		end = NULL;
		if (!number_arg_ok(opts, opt, "npbaB"))
			return 2;
		if ((n = plan_common_opt(opt, &pc, &end)) < 0) {
			free(t);
			return 2;
		}
		if (!n) switch (opt) {
		case 'l': {
			uint32_t d[ROUTE_MAX_DIMS], k = 0;

			if (dims_arg("plan", optarg, &k, d) < 0 || k > ORTH_MAX_DIMS) {
				fprintf(stderr, "ferryctl plan %s: --layout: up to %u dimensions\n", op, ORTH_MAX_DIMS);
				free(t);
				return 2;
			}
			layout.k = k;
			memcpy(layout.d, d, k * sizeof(d[0]));
			have_layout = 1;
			break;
		}
		default: return 2;
		}
		if (!number_arg_read(opts, opt, end))
			return 2;
	}
	cm = (struct cost){ alpha, beta, RS_GAMMA_NS_PER_BYTE, t ? t->fn[ctl_coll_fam(kind)] : NULL };
	if (have_layout) {
		uint64_t prod = 1;

		for (uint32_t l = 0; l < layout.k; l++)
			prod *= layout.d[l];
		if (!ctl_coll_phased(kind) || kind == CTL_COLL_REDUCE_SCATTER || kind == CTL_COLL_REDUCE_SCATTER_BLOCK ||
		    kind == CTL_COLL_SCAN || kind == CTL_COLL_EXSCAN || prod < nodes) {
			fprintf(stderr, "ferryctl plan %s: --layout is for bcast, reduce, allreduce and allgather(v), "
				"its product at least --nodes\n", op);
			free(t);
			return 2;
		}
	}
	if (!nodes || nodes > 1024 || ppn < 1 || ppn > 64 || !have_bytes || bytes > (1ull << 26) ||
	    !isfinite(alpha) || !isfinite(beta) || alpha < 0 || beta < 0) {
		fprintf(stderr, "ferryctl plan %s: --nodes 1 to 1024, --ppn 1 to 64, --bytes up to 64 MiB, "
			"--alpha-us and --beta-ns-per-byte finite and not negative\n", op);
		return 2;
	}
	n = phased_cands(kind, (uint32_t)nodes, (uint32_t)ppn, bytes, &cm, have_layout ? &layout : NULL, c, &chosen);
	free(t);
	if (n < 0) {
		fprintf(stderr, "ferryctl plan %s: %s\n", op, strerror(-n));
		return 1;
	}
	if (json) {
		printf("{\"schema_version\": 1, \"collective\": \"%s\", \"nodes\": %llu, \"ppn\": %llu, \"bytes\": %llu, "
		       "\"alpha_us\": %g, \"beta_ns_per_byte\": %g, \"chosen\": \"%s\", \"strategies\": [",
		       op, nodes, ppn, bytes, alpha, beta, c[chosen].name);
		for (int i = 0; i < n; i++)
			printf("%s{\"name\": \"%s\", \"phases\": %u, \"sends_max\": %u, \"sends_mean\": %.3f, "
			       "\"recvs_max\": %u, \"bytes_sent_max\": %llu, \"predicted_us\": %.3f, \"fitted\": %s, "
			       "\"layout\": \"%s\"}",
			       i ? ", " : "", c[i].name, c[i].phases, c[i].sends_max, c[i].sends_mean, c[i].recvs_max,
			       (unsigned long long)c[i].bytes_sent_max, c[i].us, c[i].fitted ? "true" : "false", c[i].layout);
		printf("]}\n");
		return 0;
	}
	printf("%s over %llu nodes x %llu ranks, %llu bytes per rank; alpha %g us, beta %g ns/byte\n", op, nodes,
	       ppn, bytes, alpha, beta);
	printf("%-10s %-8s %6s %9s %10s %9s %16s %14s\n", "algorithm", "layout", "phases", "sends_max", "sends_mean",
	       "recvs_max", "bytes_sent_max", "predicted_us");
	for (int i = 0; i < n; i++)
		printf("%-10s %-8s %6u %9u %10.2f %9u %16llu %14.3f%s%s\n", c[i].name, c[i].layout[0] ? c[i].layout : "-",
		       c[i].phases, c[i].sends_max, c[i].sends_mean, c[i].recvs_max, (unsigned long long)c[i].bytes_sent_max,
		       c[i].us, c[i].fitted ? " (fitted)" : "", i == chosen ? "  <- chosen" : "");
	return 0;
}

static int cmd_plan(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "nodes", required_argument, NULL, 'n' }, { "dims", required_argument, NULL, 'd' },
		{ "torus", no_argument, NULL, 't' }, { "mesh", no_argument, NULL, 'm' },
		{ "grid", no_argument, NULL, 'g' }, { "ppn", required_argument, NULL, 'p' },
		{ "bytes", required_argument, NULL, 'b' }, { "degree", required_argument, NULL, 'D' },
		{ "alpha-us", required_argument, NULL, 'a' }, { "beta-ns-per-byte", required_argument, NULL, 'B' },
		{ "format", required_argument, NULL, 'f' }, { "costs", required_argument, NULL, 'c' },
		{ NULL, 0, NULL, 0 },
	};
	struct cost_table *t = NULL;
	struct cost cm;
	uint32_t dims[ROUTE_MAX_DIMS], ndims = 0;
	unsigned long long nodes = 0, ppn = 1, bytes = 0, degree = 0;
	double alpha = PLAN_ALPHA_US, beta = PLAN_BETA_NS_PER_BYTE;
	int json = 0, have_bytes = 0, have_degree = 0, opt, ret;
	const struct plan_common pc = { &nodes, &ppn, &bytes, &alpha, &beta, &json, &have_bytes, &t };
	struct a2a_stats st[A2A_STRATEGIES];
	struct a2a_plan pl[A2A_STRATEGIES];
	double us[A2A_STRATEGIES];
	uint64_t pair;
	enum a2a_strategy chosen;
	char *end;

	if (argc >= 2 && (strcmp(argv[1], "scatter") == 0 || strcmp(argv[1], "gather") == 0))
		return cmd_plan_scatter(argc - 1, argv + 1, argv[1][0] == 'g');
	if (argc >= 2 && ctl_coll_phased(ctl_coll_kind_by_name(argv[1])))
		return cmd_plan_phased(argc - 1, argv + 1, ctl_coll_kind_by_name(argv[1]));
	if (argc < 2 || strcmp(argv[1], "alltoall") != 0) {
		fprintf(stderr, "ferryctl plan: the collectives planned: alltoall, scatter, gather, bcast, reduce, "
			"allreduce, allgather, allgatherv, reduce_scatter, reduce_scatter_block, scan, exscan\n");
		return 2;
	}
	argc--;
	argv++;
	optind = 1;
	while ((opt = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		errno = 0;
		end = NULL;     /* (set by the numbers' strto*) */
		if (!number_arg_ok(opts, opt, "npbDaB"))
			return 2;
		if ((ret = plan_common_opt(opt, &pc, &end)) < 0) {
			free(t);
			return 2;
		}
		if (!ret) switch (opt) {
		case 'd':
			if (dims_arg("plan", optarg, &ndims, dims) < 0)
				return 2;
			break;
		case 't': case 'm': case 'g': break;    /* (the strategies run on any topology) */
		case 'D': degree = strtoull(optarg, &end, 10); have_degree = 1; break;
		default: return 2;
		}
		if (!number_arg_read(opts, opt, end))
			return 2;
	}
	cm = (struct cost){ alpha, beta, RS_GAMMA_NS_PER_BYTE, NULL };
	if (t) {
		static struct cost_fn fn[CTL_FAM_ALGS_MAX];

		memcpy(fn, t->fn[CTL_FAM_ALLTOALL], sizeof(fn));
		cm.fn = fn;
		free(t);
	}
	if (nodes && ndims) {
		fprintf(stderr, "ferryctl plan alltoall: --nodes or --dims, not both\n");
		return 2;
	}
	if (ndims) {
		nodes = 1;
		for (uint32_t d = 0; d < ndims && nodes <= A2A_STATS_MAX_NODES; d++)
			nodes *= dims[d];       /* (each factor <= 2^20: no overflow before the cap) */
	}
	if (!nodes || !have_bytes) {
		fprintf(stderr, "ferryctl plan alltoall: needs --nodes (or --dims) and --bytes\n");
		return 2;
	}
	if (nodes > A2A_STATS_MAX_NODES || ppn < 1 || ppn > 1024 || !isfinite(alpha) || !isfinite(beta) ||
	    alpha < 0 || beta < 0) {
		fprintf(stderr, "ferryctl plan alltoall: --nodes (or the product of --dims) 1 to %u, --ppn 1 to "
			"1024, --alpha-us and --beta-ns-per-byte finite and not negative\n", A2A_STATS_MAX_NODES);
		return 2;
	}
	if (!have_degree)
		degree = nodes - 1;
	if (degree >= nodes) {
		fprintf(stderr, "ferryctl plan alltoall: --degree is at most nodes - 1 (%llu)\n", nodes - 1);
		return 2;
	}
	if (bytes > (1ull << 40) / (ppn * ppn)) {
		fprintf(stderr, "ferryctl plan alltoall: --bytes too large\n");
		return 2;
	}
	/* Node level: a pair of nodes carries the blocks of ppn x ppn pairs of
	 * ranks, combined. */
	pair = bytes * ppn * ppn;
	for (int s = 0; s < A2A_STRATEGIES; s++) {
		if (a2a_plan_init(&pl[s], s, (uint32_t)nodes) < 0 ||
		    (ret = a2a_stats(&pl[s], (uint32_t)degree, pair, &st[s])) < 0) {
			fprintf(stderr, "ferryctl plan alltoall: out of memory\n");
			return 1;
		}
		struct a2a_model m = { (uint32_t)nodes, (uint32_t)degree, pair };

		us[s] = cost_predict(&cm, a2a_model_us, &m, (uint32_t)s);
		if (!isfinite(us[s])) {
			fprintf(stderr, "ferryctl plan alltoall: --alpha-us or --beta-ns-per-byte too large: the "
				"predicted time overflows\n");
			return 2;
		}
	}
	chosen = a2a_choose((uint32_t)nodes, (uint32_t)degree, pair, &cm);
	if (json) {
		printf("{\"schema_version\": 1, \"collective\": \"alltoall\", \"nodes\": %llu, \"ppn\": %llu, "
		       "\"bytes\": %llu, \"degree\": %llu, \"alpha_us\": %g, \"beta_ns_per_byte\": %g, "
		       "\"chosen\": \"%s\", \"strategies\": [",
		       nodes, ppn, bytes, degree, alpha, beta, a2a_strategy_name(chosen));
		for (int s = 0; s < A2A_STRATEGIES; s++)
			printf("%s{\"name\": \"%s\", \"phases\": %u, \"sends_max\": %u, \"sends_mean\": %.3f, "
			       "\"recvs_max\": %u, \"bytes_sent_max\": %llu, \"predicted_us\": %.3f}",
			       s ? ", " : "", a2a_strategy_name(s), pl[s].phases, st[s].sends_max, st[s].sends_mean,
			       st[s].recvs_max, (unsigned long long)st[s].bytes_sent_max, us[s]);
		printf("]}\n");
		return 0;
	}
	printf("all-to-all over %llu nodes x %llu ranks, %llu bytes per pair of ranks (%llu per pair of nodes), "
	       "each node to %llu others; alpha %g us, beta %g ns/byte\n",
	       nodes, ppn, bytes, (unsigned long long)pair, degree, alpha, beta);
	printf("%-10s %6s %9s %10s %9s %16s %14s\n", "strategy", "phases", "sends_max", "sends_mean", "recvs_max",
	       "bytes_sent_max", "predicted_us");
	for (int s = 0; s < A2A_STRATEGIES; s++)
		printf("%-10s %6u %9u %10.2f %9u %16llu %14.3f%s\n", a2a_strategy_name(s), pl[s].phases,
		       st[s].sends_max, st[s].sends_mean, st[s].recvs_max, (unsigned long long)st[s].bytes_sent_max,
		       us[s], s == (int)chosen ? "  <- chosen" : "");
	return 0;
}

static int cmd_keygen(void)
{
	unsigned char key[32];
	char hex[65];

	if (sodium_init() < 0) {
		fprintf(stderr, "ferryctl: libsodium failed to initialise\n");
		return 1;
	}
	randombytes_buf(key, sizeof(key));
	sodium_bin2hex(hex, sizeof(hex), key, sizeof(key));
	sodium_memzero(key, sizeof(key));
	printf("%s\n", hex);
	sodium_memzero(hex, sizeof(hex));
	return 0;
}

static int connect_daemon(const char *dir)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd;

	if ((size_t)snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/ferryd.sock", dir) >= sizeof(sa.sun_path)) {
		fprintf(stderr, "ferryctl: runtime directory %s: path too long\n", dir);
		return -1;
	}
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		fprintf(stderr, "ferryctl: cannot reach ferryd at %s: %s%s\n", sa.sun_path, strerror(errno),
			errno == ENOENT || errno == ECONNREFUSED ? " (is ferryd running?)" : "");
		if (fd >= 0)
			close(fd);
		return -1;
	}
	return fd;
}

/* Sends one QUERY and prints the TEXT reply.  Returns the exit status. */
static int query(const char *dir, uint32_t what, uint32_t arg, int timeout_ms)
{
	char req[64];
	char *buf = NULL;
	size_t len = 0, cap = 0;
	ssize_t n;
	int fd = connect_daemon(dir), status = 1, send_err = 0;

	if (fd < 0)
		return 1;
	n = ctl_encode_hello(req, sizeof(req), CTL_ROLE_ADMIN);
	n += ctl_encode_query(req + n, sizeof(req) - (size_t)n, what, arg);
	/* A daemon that refuses the connection (a limit) sends an ERROR and
	 * closes it, maybe before this send: the reply is read anyway. */
	if (send(fd, req, (size_t)n, MSG_NOSIGNAL) != n)
		send_err = errno;
	for (;;) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		struct ctl_msg m;
		ssize_t used;

		used = ctl_decode(buf ? buf : "", len, &m);
		if (used < 0 && ctl_hdr_version(buf) != CTL_VERSION) {
			fprintf(stderr, "ferryctl: ferryd speaks control protocol version %u, this ferryctl (ferry %s) "
				"version %u: ferryctl and ferryd must come from the same ferry release\n",
				ctl_hdr_version(buf), FERRY_VERSION, CTL_VERSION);
			goto out;
		}
		if (used < 0) {
			fprintf(stderr, "ferryctl: malformed reply from ferryd\n");
			goto out;
		}
		if (used > 0) {
			if (m.type == CTL_TEXT) {
				fwrite(m.u.text.text, 1, m.u.text.len, stdout);
				status = 0;
			} else if (m.type == CTL_ERROR) {
				fprintf(stderr, "ferryctl: ferryd: %s\n", m.u.error.text);
			} else {
				fprintf(stderr, "ferryctl: unexpected reply %u from ferryd\n", m.type);
			}
			goto out;
		}
		if (cap - len < 65536) {
			char *b = realloc(buf, cap + 65536 + 4096);

			if (!b) {
				fprintf(stderr, "ferryctl: out of memory\n");
				goto out;
			}
			buf = b;
			cap += 65536 + 4096;
		}
		if (poll(&pfd, 1, timeout_ms) == 0) {
			fprintf(stderr, "ferryctl: ferryd did not answer within %d ms\n", timeout_ms);
			goto out;
		}
		n = recv(fd, buf + len, cap - len, 0);
		if (n <= 0 && send_err) {
			fprintf(stderr, "ferryctl: sending to ferryd: %s\n", strerror(send_err));
			goto out;
		}
		if (n <= 0) {
			fprintf(stderr, "ferryctl: ferryd closed the connection%s%s\n", n < 0 ? ": " : "",
				n < 0 ? strerror(errno) : "");
			goto out;
		}
		len += (size_t)n;
	}
out:
	free(buf);
	close(fd);
	return status;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "runtime-dir", required_argument, NULL, 'r' },
		{ "timeout", required_argument, NULL, 't' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *dir = getenv("FERRY_RUNTIME_DIR");
	int timeout_ms = 5000, opt;

	if (argc >= 2 && strcmp(argv[1], "route") == 0)
		return cmd_route(argc - 1, argv + 1);
	if (argc >= 2 && strcmp(argv[1], "plan") == 0)
		return cmd_plan(argc - 1, argv + 1);
	if (argc >= 2 && strcmp(argv[1], "keygen") == 0)
		return cmd_keygen();
	while ((opt = getopt_long(argc, argv, "+r:t:h", opts, NULL)) != -1) {
		switch (opt) {
		case 'r': dir = optarg; break;
		case 't': timeout_ms = atoi(optarg); break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (!dir || !*dir)
		dir = "/run/ferry";
	if (optind >= argc) {
		usage(stderr);
		return 2;
	}
	if (strcmp(argv[optind], "status") == 0)
		return query(dir, CTL_Q_STATUS, 0, timeout_ms);
	if (strcmp(argv[optind], "stats") == 0)
		return query(dir, CTL_Q_STATS, 0, timeout_ms);
	if (strcmp(argv[optind], "costs") == 0) {
		uint32_t uid = CTL_COSTS_OWN;

		if (optind + 2 < argc && strcmp(argv[optind + 1], "--uid") == 0) {
			char *end;

			errno = 0;
			uid = (uint32_t)strtoul(argv[optind + 2], &end, 10);
			if (errno || *end || uid == CTL_COSTS_OWN) {
				fprintf(stderr, "ferryctl costs --uid: a uid\n");
				return 2;
			}
		}
		return query(dir, CTL_Q_COSTS, uid, timeout_ms);
	}
	if (strcmp(argv[optind], "debug") == 0 && optind + 2 < argc && strcmp(argv[optind + 1], "kill-link") == 0)
		return query(dir, CTL_Q_DEBUG, (uint32_t)strtoul(argv[optind + 2], NULL, 10), timeout_ms);
	if (strcmp(argv[optind], "debug") == 0 && optind + 1 < argc && strcmp(argv[optind + 1], "forbidden-call") == 0)
		return query(dir, CTL_Q_DEBUG, CTL_DEBUG_FORBIDDEN_CALL, timeout_ms);
	if (strcmp(argv[optind], "debug") == 0 && optind + 1 < argc && strcmp(argv[optind + 1], "keep-loans") == 0)
		return query(dir, CTL_Q_DEBUG, CTL_DEBUG_KEEP_LOANS, timeout_ms);
	fprintf(stderr, "ferryctl: unknown command '%s'\n", argv[optind]);
	usage(stderr);
	return 2;
}
