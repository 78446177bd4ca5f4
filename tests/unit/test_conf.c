/* tests/unit/test_conf.c - configuration parsing: defaults, every option,
 * host patterns, resolved topologies, and one clear message per mistake. */
#define UNIT "conf"
#include "check.h"
#include "../../daemon/core/conf.c"
#include "../../daemon/plan/route.c"
#include "../../daemon/core/log.c"

static char err[512];

static int parse(struct conf *c, const char *text)
{
	err[0] = '\0';
	return conf_load_string(c, text, "test.conf", err, sizeof(err));
}

/* The error for text must start with "test.conf:LINE: " and contain what. */
static void rejects(const char *text, int line, const char *what)
{
	struct conf c;
	char prefix[64];

	CHECK_EQ(parse(&c, text), -EINVAL);
	snprintf(prefix, sizeof(prefix), "test.conf:%d: ", line);
	if (strncmp(err, prefix, strlen(prefix)) != 0 || !strstr(err, what)) {
		fprintf(stderr, "    got: %s\n    want: %s...%s\n", err, prefix, what);
		CHECK(0);
	}
	conf_free(&c);
}

TEST(defaults)
{
	struct conf c;

	CHECK_EQ(parse(&c, ""), 0);
	CHECK_EQ(c.nnodes, 1);
	CHECK(strcmp(c.nodes[0].host, "localhost") == 0);
	CHECK_EQ(c.nodes[0].port, 7470);
	CHECK_EQ(c.physical, CONF_SWITCHED);
	CHECK_EQ(c.buffer_bytes, 16384);
	CHECK_EQ(c.flush_us, 200);
	CHECK_EQ(c.transport, CONF_TRANSPORT_AUTO);
	CHECK_EQ(c.verbs_device[0], '\0');
	CHECK_EQ(c.link_probe, 1);              /* new links are measured at once */
	CHECK_EQ(c.max_clients, 256);
	CHECK_EQ(c.ring_bytes, 1 << 20);
	CHECK_EQ(c.max_unjoined, 64);
	CHECK_EQ(c.user_clients, 128);
	CHECK_EQ(c.user_unjoined, 16);
	CHECK_EQ(c.user_jobs, 64);
	CHECK_EQ(c.user_memory_bytes, 64 << 20);
	CHECK_EQ(c.join_timeout_ms, 10000);
	CHECK_EQ(c.admin_idle_ms, 60000);
	CHECK_EQ(c.direct_max_ranks, 16);
	CHECK_EQ(c.direct_ring_bytes, 256 * 1024);
	CHECK_EQ(c.key_file[0], '\0');
	CHECK_EQ(c.integrity, 0);               /* no key: nothing to authenticate with */
	CHECK_EQ(c.encrypt, 0);
	CHECK_EQ(c.log_level, LOG_INFO);
	CHECK(strcmp(c.runtime_dir, "/run/ferry") == 0);
	CHECK(strcmp(c.state_dir, "/var/lib/ferry") == 0);
	CHECK_EQ(c.seccomp, SANDBOX_KILL);      /* the filter is on unless turned off */
	conf_free(&c);
}

TEST(every_option)
{
	struct conf c;

	CHECK_EQ(parse(&c,
		"cluster: { name = \"lqcd\"; nodes = ( { host = \"a\"; port = 1; }, { host = \"b\"; } ); port = 9; };\n"
		"topology: { physical = \"switched\"; virtual = \"direct\"; };\n"
		"aggregation: { buffer_bytes = 0; flush_us = 1000; };\n"
		"transport: { kind = \"tcp\"; device = \"mlx5_1\"; probe = false; };\n"
		"limits: { max_clients = 8; ring_bytes = 262144; memory_bytes = 2097152; pending_bytes = 1048576; };\n"
		"direct: { max_ranks = 64; ring_bytes = 1048576; };\n"
		"security: { key_file = \"/k\"; encrypt = true; };\n"
		"logging: { level = \"debug\"; };\n"
		"daemon: { runtime_dir = \"/tmp/x\"; state_dir = \"\"; spin_us = 0; seccomp = \"off\"; };\n"), 0);
	CHECK(strcmp(c.cluster_name, "lqcd") == 0);
	CHECK_EQ(c.nnodes, 2);
	CHECK_EQ(c.link_probe, 0);
	CHECK_EQ(c.nodes[0].port, 1);
	CHECK_EQ(c.nodes[1].port, 9);           /* cluster.port is the default */
	CHECK_EQ(c.route.ndims, 1);
	CHECK_EQ(c.route.dims[0], 2);
	CHECK_EQ(c.buffer_bytes, 0);
	CHECK_EQ(c.flush_us, 1000);
	CHECK_EQ(c.transport, CONF_TRANSPORT_TCP);
	CHECK(strcmp(c.verbs_device, "mlx5_1") == 0);
	CHECK_EQ(c.max_clients, 8);
	CHECK_EQ(c.ring_bytes, 262144);
	CHECK_EQ(c.memory_bytes, 2097152);
	CHECK_EQ(c.pending_bytes, 1048576);
	CHECK_EQ(c.direct_max_ranks, 64);
	CHECK_EQ(c.direct_ring_bytes, 1048576);
	CHECK(strcmp(c.key_file, "/k") == 0);
	CHECK_EQ(c.integrity, 1);
	CHECK_EQ(c.encrypt, 1);
	CHECK_EQ(c.log_level, LOG_DEBUG);
	CHECK(strcmp(c.runtime_dir, "/tmp/x") == 0);
	CHECK_EQ(c.state_dir[0], 0);
	CHECK_EQ(c.spin_us, 0);
	CHECK_EQ(c.seccomp, SANDBOX_OFF);
	conf_free(&c);
	CHECK_EQ(parse(&c, "daemon: { seccomp = \"log\"; };"), 0);
	CHECK_EQ(c.seccomp, SANDBOX_LOG);
	conf_free(&c);
}

/* Per-user limits: set, or a share of the node-wide limit when not set;
 * never above the node-wide limit. */
TEST(limits_per_user)
{
	struct conf c;

	CHECK_EQ(parse(&c, "limits: { max_clients = 10; max_unjoined = 3; memory_bytes = 4194304;\n"
			   " pending_bytes = 1048576; };"), 0);
	CHECK_EQ(c.user_clients, 5);
	CHECK_EQ(c.user_unjoined, 1);           /* a share, but at least 1 */
	CHECK_EQ(c.user_memory_bytes, 1048576);
	conf_free(&c);
	CHECK_EQ(parse(&c, "limits: { max_clients = 10; user_clients = 10; user_unjoined = 2; user_jobs = 3;\n"
			   " user_memory_bytes = 2097152; join_timeout_ms = 250; admin_idle_ms = 700; };"), 0);
	CHECK_EQ(c.user_clients, 10);
	CHECK_EQ(c.user_unjoined, 2);
	CHECK_EQ(c.user_jobs, 3);
	CHECK_EQ(c.user_memory_bytes, 2097152);
	CHECK_EQ(c.join_timeout_ms, 250);
	CHECK_EQ(c.admin_idle_ms, 700);
	conf_free(&c);
	rejects("limits: {\n max_clients = 10;\n user_clients = 11;\n};", 3,
		"'limits.user_clients' (11) exceeds 'limits.max_clients' (10)");
	rejects("limits: { user_unjoined = 65; };", 1, "'limits.user_unjoined' (65) exceeds 'limits.max_unjoined' (64)");
	rejects("limits: { memory_bytes = 2097152; pending_bytes = 1048576; user_memory_bytes = 4194304; };", 1,
		"'limits.user_memory_bytes' (4194304) exceeds 'limits.memory_bytes' (2097152)");
	rejects("limits: { user_jobs = 0; };", 1, "'limits.user_jobs' is 0, must be between 1 and");
	rejects("limits: { join_timeout_ms = 5; };", 1, "'limits.join_timeout_ms' is 5, must be between 10 and");
	rejects("limits: { admin_idle_ms = \"1s\"; };", 1, "'limits.admin_idle_ms' must be an integer, not a string");
}

TEST(host_patterns)
{
	struct conf c;

	CHECK_EQ(parse(&c, "cluster: { host_pattern = \"node%03d.hpc\"; count = 12; first = 1; port = 80; };"), 0);
	CHECK_EQ(c.nnodes, 12);
	CHECK(strcmp(c.nodes[0].host, "node001.hpc") == 0);
	CHECK(strcmp(c.nodes[11].host, "node012.hpc") == 0);
	CHECK_EQ(c.nodes[5].port, 80);
	CHECK_EQ(c.route.ndims, 2);             /* auto: 12 nodes -> 2-D */
	conf_free(&c);
	CHECK_EQ(parse(&c, "cluster: { host_pattern = \"n%d\"; count = 3; };"), 0);
	CHECK(strcmp(c.nodes[2].host, "n2") == 0);
	conf_free(&c);
}

TEST(topologies_resolve)
{
	struct conf c;

	CHECK_EQ(parse(&c, "cluster: { host_pattern = \"n%d\"; count = 256; };\n"
			  "topology: { physical = \"torus\"; dims = [ 4, 8, 8 ]; };"), 0);
	CHECK_EQ(c.route.kind, ROUTE_TORUS);
	CHECK_EQ(c.route.npos, 256);
	conf_free(&c);
	CHECK_EQ(parse(&c, "cluster: { host_pattern = \"n%d\"; count = 7; };\n"
			  "topology: { virtual = [ 2, 4 ]; };"), 0);
	CHECK_EQ(c.route.kind, ROUTE_GRID);
	CHECK_EQ(c.route.npos, 8);
	CHECK_EQ(c.route.nnodes, 7);
	conf_free(&c);
	CHECK_EQ(parse(&c, "cluster: { host_pattern = \"n%d\"; count = 8; };\n"
			  "topology: { physical = \"mesh\"; dims = [ 2, 4 ]; };"), 0);
	CHECK_EQ(c.route.kind, ROUTE_MESH);
	conf_free(&c);
}

/* collectives.*: 0 automatic (the default), else the algorithm + 1, in
 * the orders of enum a2a_strategy and enum ctl_rooted_alg. */
TEST(collectives_force_algorithms)
{
	struct conf c;

	CHECK_EQ(parse(&c, ""), 0);
	CHECK(c.coll_force[CTL_FAM_ALLTOALL] == 0 && c.coll_force[CTL_FAM_SCATTER] == 0 && c.coll_force[CTL_FAM_GATHER] == 0);
	conf_free(&c);
	CHECK_EQ(parse(&c, "collectives: { alltoall = \"hypercube\"; scatter = \"tree\"; gather = \"orth\"; };"), 0);
	CHECK_EQ(c.coll_force[CTL_FAM_ALLTOALL], 4);          /* hypercube, the 4th (ctl_a2a_algs) */
	CHECK_EQ(c.coll_force[CTL_FAM_SCATTER], CTL_ROOTED_TREE + 1);
	CHECK_EQ(c.coll_force[CTL_FAM_GATHER], CTL_ROOTED_ORTH + 1);
	conf_free(&c);
	CHECK_EQ(parse(&c, "cluster: { host_pattern = \"n%d\"; count = 16; };\n"
			  "topology: { physical = \"torus\"; dims = [ 4, 4 ]; };\n"
			  "collectives: { alltoall = \"auto\"; scatter = \"sdf\"; gather = \"direct\"; };"), 0);
	CHECK_EQ(c.coll_force[CTL_FAM_ALLTOALL], 0);
	CHECK_EQ(c.coll_force[CTL_FAM_SCATTER], CTL_ROOTED_SDF + 1);
	CHECK_EQ(c.coll_force[CTL_FAM_GATHER], CTL_ROOTED_DIRECT + 1);
	conf_free(&c);
	rejects("collectives: {\n scatter = \"opt\"; };", 2, "'collectives.scatter' is \"opt\", which needs "
		"'topology.physical' = \"torus\"");
	rejects("collectives: {\n gather = \"sdf\"; };", 2, "'collectives.gather' is \"sdf\"");
	rejects("collectives: { alltoall = \"ring\"; };", 1, "'collectives.alltoall' is \"ring\", must be \"auto\", "
		"\"direct\", \"mesh\", \"grid3d\" or \"hypercube\"");
	rejects("collectives: { scatter = \"binomial\"; };", 1, "must be \"auto\", \"direct\", \"opt\", \"sdf\", "
		"\"orth\" or \"tree\"");
	/* the families of issue 14 (ctl_fam_name) */
	CHECK_EQ(parse(&c, "collectives: { bcast = \"orth\"; reduce = \"single\"; allreduce = \"hier\"; "
			  "allgather = \"single\"; reduce_scatter = \"hybrid\"; scan = \"chain\"; };"), 0);
	CHECK_EQ(c.coll_force[CTL_FAM_BCAST], 2);
	CHECK_EQ(c.coll_force[CTL_FAM_REDUCE], 1);
	CHECK_EQ(c.coll_force[CTL_FAM_ALLREDUCE], 3);
	CHECK_EQ(c.coll_force[CTL_FAM_ALLGATHER], 1);
	CHECK_EQ(c.coll_force[CTL_FAM_REDUCE_SCATTER], 3);
	CHECK_EQ(c.coll_force[CTL_FAM_SCAN], 1);
	CHECK_EQ(c.coll_force[CTL_FAM_ALLTOALL], 0);
	conf_free(&c);
	rejects("collectives: { allreduce = \"long\"; };", 1, "'collectives.allreduce' is \"long\", must be \"auto\", "
		"\"single\", \"orth\" or \"hier\"");
	rejects("collectives: { allgatherv = \"single\"; };", 1, "allgatherv");
	rejects("collectives: { reduce_scatter = \"orth\"; };", 1, "\"short\", \"long\" or \"hybrid\"");
	rejects("collectives: { bcast = \"tree\"; };", 1, "bcast");
}

TEST(frame_integrity_is_on_with_a_key_unless_turned_off)
{
	struct conf c;

	CHECK_EQ(parse(&c, "security: { key_file = \"/k\"; };"), 0);
	CHECK_EQ(c.integrity, 1);
	CHECK_EQ(c.encrypt, 0);
	conf_free(&c);
	CHECK_EQ(parse(&c, "security: { key_file = \"/k\"; integrity = false; };"), 0);
	CHECK_EQ(c.integrity, 0);
	conf_free(&c);
	CHECK_EQ(parse(&c, "security: { integrity = false; };"), 0);
	CHECK_EQ(c.integrity, 0);
	conf_free(&c);
}

TEST(each_mistake_has_its_message)
{
	rejects("security: {\n integrity = true;\n};", 2, "'security.integrity' needs 'security.key_file'");
	rejects("security: {\n encrypt = true;\n};", 2, "'security.encrypt' needs 'security.key_file'");
	rejects("security: { key_file = \"/k\";\n integrity = false;\n encrypt = true; };", 3,
		"'security.encrypt' needs 'security.integrity'");
	rejects("security: { encrypt = 1; };", 1, "'security.encrypt' must be true or false, not an integer");
	rejects("cluster: {\n name = 5;\n};", 2, "'cluster.name' must be a string, not an integer");
	rejects("cluster: {\n name = \"a b\";\n};", 2, "'cluster.name' must be 1 to 63 printable");
	rejects("cluster = 5;", 1, "'cluster' must be a group");
	rejects("\n\nfoo = 1;", 3, "unknown option 'foo'");
	rejects("limits: {\n ring_bytes = 1024;\n};", 2, "'limits.ring_bytes' is 1024, must be between 262144 and");
	rejects("direct: {\n max_ranks = 65;\n};", 2, "'direct.max_ranks' is 65, must be between 0 and 64");
	rejects("direct: { ring_bytes = 65536; };", 1, "'direct.ring_bytes' is 65536, must be between 262144 and");
	rejects("direct: {\n\n ring_bytes = 786432;\n};", 3, "'direct.ring_bytes' is 786432, must be a power of two");
	rejects("direct: { slots = 2; };", 1, "unknown option 'direct.slots'");
	rejects("limits: { memory_bytes = 1048576; pending_bytes = 2097152; };", 1,
		"'limits.pending_bytes' (2097152) exceeds 'limits.memory_bytes'");
	rejects("transport: { kind = \"ib\"; };", 1, "'transport.kind' is \"ib\", must be \"auto\", \"tcp\" or \"verbs\"");
	rejects("transport: {\n device = 0;\n};", 2, "'transport.device' must be a string, not an integer");
	rejects("transport: { probe = 1; };", 1, "'transport.probe' must be true or false, not an integer");
	rejects("transport: { device = \"rxe_with_a_name_longer_than_sixty_three_characters_which_no_device_has\"; };", 1,
		"'transport.device' is longer than 63 characters");
	rejects("aggregation: { buffer_bytes = 2.5; };", 1, "must be an integer, not a number with a fraction");
	rejects("cluster: { host_pattern = \"n%d\"; };", 1, "needs 'cluster.count'");
	rejects("cluster: { host_pattern = \"n%d%d\"; count = 2; };", 1, "exactly one %d");
	rejects("cluster: { count = 2; };", 1, "go with 'cluster.host_pattern'");
	rejects("cluster: { host_pattern = \"n%d\"; count = 2; nodes = (); };", 1, "not both");
	rejects("cluster: { nodes = ( 5 ); };", 1, "must be a group");
	rejects("cluster: { nodes = ( { host = \"a\"; colour = 1; } ); };", 1, "unknown option 'cluster.nodes.[].colour'");
	rejects("cluster: { nodes = ( { host = \"a\"; port = 70000; } ); };", 1, "between 1 and 65535");
	rejects("topology: { dims = [ 1 ]; };", 1, "describes a physical torus or mesh");
	rejects("topology: { virtual = 3; };", 1, "must be \"auto\", \"direct\" or an array");
	rejects("cluster: { host_pattern = \"n%d\"; count = 4; };\ntopology: { virtual = [ 2, 2, 2 ]; };", 2,
		"at most 3 may be empty");
	rejects("cluster: { host_pattern = \"n%d\"; count = 4; };\ntopology: { physical = \"torus\"; dims = [ 2, \"x\" ]; };",
		2, "mismatched element type in array");   /* libconfig's own check */
}

/* list parses, and its set written back as a list is want. */
static int cpus_are(const char *list, const char *want)
{
	cpu_set_t set;
	char why[128], back[256];

	if (cpus_parse(list, &set, why, sizeof(why)) < 0) {
		fprintf(stderr, "    \"%s\": %s\n", list, why);
		return 0;
	}
	conf_cpus_str(&set, back, sizeof(back));
	if (strcmp(back, want) != 0)
		fprintf(stderr, "    \"%s\": got %s, want %s\n", list, back, want);
	return strcmp(back, want) == 0;
}

/* The list must be refused, saying what. */
static int cpus_refused(const char *list, const char *what)
{
	cpu_set_t set;
	char why[128] = "";

	if (cpus_parse(list, &set, why, sizeof(why)) != -EINVAL || !strstr(why, what)) {
		fprintf(stderr, "    \"%s\": got \"%s\", want ...%s\n", list, why, what);
		return 0;
	}
	return 1;
}

/* daemon.cpus's syntax alone (CPUs this machine need not have). */
TEST(cpu_lists)
{
	cpu_set_t set;
	char s[16];

	CHECK(cpus_are("1", "1"));
	CHECK(cpus_are("0", "0"));
	CHECK(cpus_are("2-3,6", "2-3,6"));
	CHECK(cpus_are("6,2-3", "2-3,6"));
	CHECK(cpus_are("0-3", "0-3"));
	CHECK(cpus_are("4-4", "4"));
	CHECK(cpus_are("0,2,4", "0,2,4"));
	CHECK(cpus_are(" 1 - 2 , 8 ", "1-2,8"));
	CHECK(cpus_are("1023", "1023"));                 /* the last of CPU_SETSIZE */
	CHECK(cpus_are("0-1023", "0-1023"));
	/* twice or overlapping, as taskset -c and CPUAffinity= take them */
	CHECK(cpus_are("1,1", "1"));
	CHECK(cpus_are("0-3,2", "0-3"));
	CHECK(cpus_are("0-2,1-4", "0-4"));
	CHECK(cpus_refused("", "the list is empty"));
	CHECK(cpus_refused("  ", "the list is empty"));
	CHECK(cpus_refused("a", "expected a CPU number at \"a\""));
	CHECK(cpus_refused("1-", "expected a CPU number at the end"));
	CHECK(cpus_refused("-1", "expected a CPU number at \"-1\""));
	CHECK(cpus_refused("1,", "expected a CPU number at the end"));
	CHECK(cpus_refused("1,,2", "expected a CPU number at \",2\""));
	CHECK(cpus_refused("+1", "expected a CPU number"));
	CHECK(cpus_refused("0x1", "expected \",\" or \"-\" at \"x1\""));
	CHECK(cpus_refused("1 2", "expected \",\" or \"-\" at \"2\""));
	CHECK(cpus_refused("1;2", "expected \",\" or \"-\" at \";2\""));
	CHECK(cpus_refused("0-10:2", "expected \",\" or \"-\" at \":2\""));  /* no strides */
	CHECK(cpus_refused("3-1", "the range 3-1 goes down"));
	CHECK(cpus_refused("1024", "CPU 1024 is beyond CPU_SETSIZE (ferryd takes CPUs 0 to 1023)"));
	CHECK(cpus_refused("0-1024", "CPU 1024 is beyond CPU_SETSIZE"));
	CHECK(cpus_refused("99999999999999999999999", "CPU 99999999999999999999999 is beyond CPU_SETSIZE"));
	CPU_ZERO(&set);
	conf_cpus_str(&set, s, sizeof(s));
	CHECK(strcmp(s, "none") == 0);
	for (int cpu = 0; cpu < 20; cpu += 2)
		CPU_SET((size_t)cpu, &set);
	conf_cpus_str(&set, s, sizeof(s));             /* cut short: "...", never half a number */
	CHECK(strcmp(s, "0,2,4,6,8,...") == 0);
	conf_cpus_str(&set, s, 6);
	CHECK(strcmp(s, "0,...") == 0);
}

/* daemon.cpus in a file: the CPUs this machine has and lets us run on. */
TEST(cpus_option)
{
	long ncpus = sysconf(_SC_NPROCESSORS_CONF);
	cpu_set_t mine, one, missing;
	struct conf c;
	char text[320], what[320], list[256];
	int first = -1, other = -1;

	CHECK_EQ(sched_getaffinity(0, sizeof(mine), &mine), 0);
	for (int cpu = 0; cpu < CPU_SETSIZE; cpu++)
		if (CPU_ISSET((size_t)cpu, &mine)) {
			if (first < 0)
				first = cpu;
			else if (other < 0)
				other = cpu;
		}
	CHECK_EQ(parse(&c, ""), 0);
	CHECK_EQ(CPU_COUNT(&c.cpus), 0);                /* the default: not pinned */
	conf_free(&c);
	snprintf(text, sizeof(text), "daemon: { cpus = \"%d\"; };", first);
	CHECK_EQ(parse(&c, text), 0);
	CHECK_EQ(CPU_COUNT(&c.cpus), 1);
	CHECK(CPU_ISSET((size_t)first, &c.cpus));
	conf_free(&c);
	conf_cpus_str(&mine, list, sizeof(list));       /* every CPU we may use, as a list */
	snprintf(text, sizeof(text), "daemon: { cpus = \"%s\"; };", list);
	CHECK_EQ(parse(&c, text), 0);
	CHECK(CPU_EQUAL(&c.cpus, &mine));
	conf_free(&c);

	rejects("daemon: { state_dir = \"var/lib\"; };", 1, "'daemon.state_dir' must be an absolute path");
	rejects("daemon: {\n cpus = \"\";\n};", 2, "'daemon.cpus' is \"\": the list is empty");
	rejects("daemon: {\n cpus = 1;\n};", 2, "'daemon.cpus' must be a string, not an integer");
	rejects("daemon: {\n\n cpus = \"1-x\";\n};", 3, "'daemon.cpus' is \"1-x\": expected a CPU number at \"x\"");
	rejects("daemon: { cpus = \"2-1\"; };", 1, "'daemon.cpus' is \"2-1\": the range 2-1 goes down");
	rejects("daemon: { cpus = \"4096\"; };", 1, "'daemon.cpus' is \"4096\": CPU 4096 is beyond CPU_SETSIZE");
	if (ncpus > 0 && ncpus < CPU_SETSIZE) {
		snprintf(text, sizeof(text), "daemon: {\n cpus = \"0,%ld\";\n};", ncpus);
		snprintf(what, sizeof(what), "'daemon.cpus' names CPU %ld, but this machine has CPUs 0 to %ld",
			 ncpus, ncpus - 1);
		rejects(text, 2, what);
	}

	/* CPUs we may not run on: made so by running this test on one CPU. */
	if (other < 0)
		SKIP("refusing CPUs we may not use needs 2 CPUs to run on");
	CPU_ZERO(&one);
	CPU_SET((size_t)first, &one);
	CHECK_EQ(sched_setaffinity(0, sizeof(one), &one), 0);
	snprintf(text, sizeof(text), "daemon: { cpus = \"%d\"; };", other);
	snprintf(what, sizeof(what), "'daemon.cpus' names CPU %d, where ferryd may not run: it may run on %d "
		 "(as whoever started it allows", other, first);
	rejects(text, 1, what);
	snprintf(text, sizeof(text), "daemon: { cpus = \"%d-%d\"; };", first, other);
	CPU_ZERO(&missing);
	for (int cpu = first + 1; cpu <= other; cpu++)
		CPU_SET((size_t)cpu, &missing);
	conf_cpus_str(&missing, list, sizeof(list));
	snprintf(what, sizeof(what), "names CPU%s %s, where", CPU_COUNT(&missing) > 1 ? "s" : "", list);
	rejects(text, 1, what);
	CHECK_EQ(sched_setaffinity(0, sizeof(mine), &mine), 0);
}

TEST(shipped_files_load)
{
	static const char *const files[] = { "conf/ferry.conf", "conf/torus-8x8.conf", "conf/torus-4x8x8.conf",
					     "conf/switched-64.conf", "conf/localhost-8.conf" };
	struct conf c;

	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		int ret = conf_load_file(&c, files[i], err, sizeof(err));

		if (ret)
			fprintf(stderr, "%s\n", err);
		CHECK_EQ(ret, 0);
		conf_free(&c);
	}
	CHECK_EQ(conf_load_file(&c, "conf/nonexistent.conf", err, sizeof(err)), -ENOENT);
	conf_free(&c);
}

int main(void)
{
	RUN(defaults);
	RUN(every_option);
	RUN(limits_per_user);
	RUN(host_patterns);
	RUN(topologies_resolve);
	RUN(collectives_force_algorithms);
	RUN(frame_integrity_is_on_with_a_key_unless_turned_off);
	RUN(each_mistake_has_its_message);
	RUN(cpu_lists);
	RUN(cpus_option);
	RUN(shipped_files_load);
	return check_done();
}
