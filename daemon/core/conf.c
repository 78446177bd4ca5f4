/* daemon/core/conf.c - see conf.h.  Validation walks the libconfig tree against a
 * schema so that unknown keys, wrong types and out-of-range values each get a
 * "file:line: what is wrong" message. */
#include "conf.h"
#include "log.h"
#include "sandbox.h"
#include "../../proto/ctl.h"
#include "../../proto/direct.h"

#include <errno.h>
#include <inttypes.h>
#include <libconfig.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct parse {
	struct conf *c;
	const char *file;       /* for messages */
	char *err;
	size_t errlen;
};

/* The options, group by group: check_keys refuses any other.  Every one is
 * documented, with its default, in conf/ferry.conf and ferry.conf(5)
 * (packaging/man/ferry.conf.5); tests/unit/test_confdoc.c checks that
 * both name exactly these.  collectives' members are the families of
 * proto/ctl.h (ctl_fam_name). */
static const char *const top_keys[] = { "cluster", "topology", "aggregation", "transport", "limits",
					"direct", "collectives", "security", "logging", "daemon", NULL };
static const char *const cluster_keys[] = { "name", "nodes", "host_pattern", "count", "first", "port", NULL };
static const char *const node_keys[] = { "host", "port", NULL };   /* each of cluster.nodes */
static const char *const topology_keys[] = { "physical", "dims", "virtual", NULL };
static const char *const agg_keys[] = { "buffer_bytes", "flush_us", NULL };
static const char *const tr_keys[] = { "kind", "device", "tcp_congestion", "probe", NULL };
static const char *const lim_keys[] = { "max_clients", "ring_bytes", "memory_bytes", "pending_bytes",
					"link_bytes", "max_unjoined", "user_clients", "user_unjoined",
					"user_jobs", "user_memory_bytes", "join_timeout_ms", "admin_idle_ms",
					NULL };
static const char *const dir_keys[] = { "max_ranks", "ring_bytes", NULL };
static const char *const sec_keys[] = { "key_file", "integrity", "encrypt", NULL };
static const char *const log_keys[] = { "level", NULL };
static const char *const dmn_keys[] = { "runtime_dir", "state_dir", "spin_us", "seccomp", "cpus", NULL };

static int invalid(struct parse *p, const config_setting_t *s, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int invalid(struct parse *p, const config_setting_t *s, const char *fmt, ...)
{
	const char *file = s ? config_setting_source_file(s) : NULL;
	int n = snprintf(p->err, p->errlen, "%s:%u: ", file ? file : p->file,
			 s ? config_setting_source_line(s) : 0);
	va_list ap;

	va_start(ap, fmt);
	if (n >= 0 && (size_t)n < p->errlen)
		vsnprintf(p->err + n, p->errlen - (size_t)n, fmt, ap);
	va_end(ap);
	return -EINVAL;
}

/* Full dotted path of a setting ("topology.dims"), for messages. */
static const char *path_of(const config_setting_t *s, char *buf, size_t len)
{
	const char *names[16];
	int n = 0;
	size_t off = 0;

	for (; s && !config_setting_is_root(s) && n < 16; s = config_setting_parent(s))
		names[n++] = config_setting_name(s) ? config_setting_name(s) : "[]";
	buf[0] = '\0';
	while (n-- > 0 && off < len)
		off += (size_t)snprintf(buf + off, len - off, "%s%s", off ? "." : "", names[n]);
	return buf;
}

static const char *type_name(int type)
{
	switch (type) {
	case CONFIG_TYPE_GROUP: return "a group";
	case CONFIG_TYPE_INT:
	case CONFIG_TYPE_INT64: return "an integer";
	case CONFIG_TYPE_FLOAT: return "a number with a fraction";
	case CONFIG_TYPE_STRING: return "a string";
	case CONFIG_TYPE_BOOL: return "a boolean";
	case CONFIG_TYPE_ARRAY: return "an array";
	case CONFIG_TYPE_LIST: return "a list";
	}
	return "something unknown";
}

/* Rejects members of group g that are not in the NULL-terminated list keys. */
static int check_keys(struct parse *p, const config_setting_t *g, const char *const *keys)
{
	char buf[256];
	int n = config_setting_length(g);

	for (int i = 0; i < n; i++) {
		const config_setting_t *m = config_setting_get_elem(g, (unsigned)i);
		const char *name = config_setting_name(m);
		const char *const *k;

		for (k = keys; *k && strcmp(*k, name) != 0; k++)
			;
		if (!*k)
			return invalid(p, m, "unknown option '%s'", path_of(m, buf, sizeof(buf)));
	}
	return 0;
}

/* A group member that must be a group itself, or absent (*out = NULL). */
static int get_group(struct parse *p, const config_setting_t *parent, const char *name,
		     config_setting_t **out)
{
	config_setting_t *s = config_setting_get_member(parent, name);
	char buf[256];

	*out = NULL;
	if (!s)
		return 0;
	if (config_setting_type(s) != CONFIG_TYPE_GROUP)
		return invalid(p, s, "'%s' must be a group { ... }, not %s",
			    path_of(s, buf, sizeof(buf)), type_name(config_setting_type(s)));
	*out = s;
	return 0;
}

static int int_value(struct parse *p, const config_setting_t *s, long long min, long long max,
		     long long *out)
{
	char buf[256];
	long long v;

	if (config_setting_type(s) != CONFIG_TYPE_INT && config_setting_type(s) != CONFIG_TYPE_INT64)
		return invalid(p, s, "'%s' must be an integer, not %s",
			    path_of(s, buf, sizeof(buf)), type_name(config_setting_type(s)));
	v = config_setting_get_int64(s);
	if (v < min || v > max)
		return invalid(p, s, "'%s' is %lld, must be between %lld and %lld",
			    path_of(s, buf, sizeof(buf)), v, min, max);
	*out = v;
	return 0;
}

/* An optional integer member; *out keeps its default when absent. */
static int get_int(struct parse *p, const config_setting_t *g, const char *name,
		   long long min, long long max, long long *out)
{
	const config_setting_t *s = g ? config_setting_get_member(g, name) : NULL;

	return s ? int_value(p, s, min, max, out) : 0;
}

#define GET_INT(p, g, name, min, max, field) ({                                  \
	long long v_ = (long long)(field);                                       \
	int r_ = get_int(p, g, name, min, max, &v_);                             \
	if (r_ == 0)                                                             \
		(field) = (__typeof__(field))v_;                                 \
	r_; })

/* An optional boolean member; *out keeps its default when absent. */
static int get_bool(struct parse *p, const config_setting_t *g, const char *name, int *out,
		    const config_setting_t **where)
{
	const config_setting_t *s = g ? config_setting_get_member(g, name) : NULL;
	char buf[256];

	*where = s;
	if (!s)
		return 0;
	if (config_setting_type(s) != CONFIG_TYPE_BOOL)
		return invalid(p, s, "'%s' must be true or false, not %s",
			    path_of(s, buf, sizeof(buf)), type_name(config_setting_type(s)));
	*out = config_setting_get_bool(s);
	return 0;
}

/* An optional string member, at most cap-1 bytes. */
static int get_str(struct parse *p, const config_setting_t *g, const char *name,
		   char *out, size_t cap, const config_setting_t **where)
{
	const config_setting_t *s = g ? config_setting_get_member(g, name) : NULL;
	char buf[256];
	const char *v;

	if (where)
		*where = s;
	if (!s)
		return 0;
	if (config_setting_type(s) != CONFIG_TYPE_STRING)
		return invalid(p, s, "'%s' must be a string, not %s",
			    path_of(s, buf, sizeof(buf)), type_name(config_setting_type(s)));
	v = config_setting_get_string(s);
	if (strlen(v) >= cap)
		return invalid(p, s, "'%s' is longer than %zu characters",
			    path_of(s, buf, sizeof(buf)), cap - 1);
	strcpy(out, v);
	return 0;
}

/* An optional string member that must be one of names[]; *out = its index. */
static int get_enum(struct parse *p, const config_setting_t *g, const char *name,
		    const char *const *names, int *out)
{
	const config_setting_t *s;
	char v[64], buf[256], list[256];
	size_t off = 0;
	int ret = get_str(p, g, name, v, sizeof(v), &s);

	if (ret < 0 || !s)
		return ret;
	for (int i = 0; names[i]; i++) {
		if (strcmp(v, names[i]) == 0) {
			*out = i;
			return 0;
		}
		off += (size_t)snprintf(list + off, sizeof(list) - off, "%s\"%s\"",
					i ? (names[i + 1] ? ", " : " or ") : "", names[i]);
	}
	return invalid(p, s, "'%s' is \"%s\", must be %s", path_of(s, buf, sizeof(buf)), v, list);
}

/* An array of dimension sizes. */
static int get_dims(struct parse *p, const config_setting_t *s, uint32_t *ndims, uint32_t *dims)
{
	char buf[256];
	int n = config_setting_length(s);

	if (config_setting_type(s) != CONFIG_TYPE_ARRAY && config_setting_type(s) != CONFIG_TYPE_LIST)
		return invalid(p, s, "'%s' must be an array of sizes like [ 8, 8 ], not %s",
			    path_of(s, buf, sizeof(buf)), type_name(config_setting_type(s)));
	if (n < 1 || n > ROUTE_MAX_DIMS)
		return invalid(p, s, "'%s' has %d dimensions, must have 1 to %d",
			    path_of(s, buf, sizeof(buf)), n, ROUTE_MAX_DIMS);
	for (int i = 0; i < n; i++) {
		long long v;
		int ret = int_value(p, config_setting_get_elem(s, (unsigned)i), 1, ROUTE_MAX_NODES, &v);

		if (ret < 0)
			return ret;
		dims[i] = (uint32_t)v;
	}
	*ndims = (uint32_t)n;
	return 0;
}

static void dims_str(const uint32_t *dims, uint32_t n, char *buf, size_t len)
{
	size_t off = 0;

	buf[0] = '\0';
	for (uint32_t i = 0; i < n && off < len; i++)
		off += (size_t)snprintf(buf + off, len - off, "%s%u", i ? "x" : "", dims[i]);
}

/* host_pattern holds exactly one %d, optionally zero-padded (%02d). */
static int expand_pattern(const char *pat, uint32_t index, char *out, size_t cap)
{
	const char *pct = strchr(pat, '%');
	const char *q;
	int width = 0, zero = 0, n;

	if (!pct)
		return -EINVAL;
	q = pct + 1;
	if (*q == '0') {
		zero = 1;
		q++;
	}
	while (*q >= '0' && *q <= '9' && width < 100)
		width = width * 10 + (*q++ - '0');
	if (*q != 'd' || strchr(q + 1, '%'))
		return -EINVAL;
	n = snprintf(out, cap, "%.*s%0*u%s", (int)(pct - pat), pat, zero ? width : 0, index, q + 1);
	if (!zero && width) /* "%3d": space padding makes no host name */
		return -EINVAL;
	return n < 0 || (size_t)n >= cap ? -EINVAL : 0;
}

static int parse_cluster(struct parse *p, const config_setting_t *root)
{
	struct conf *c = p->c;
	config_setting_t *g, *nodes;
	const config_setting_t *pat_s, *name_s;
	char pattern[CONF_HOST_MAX + 1] = "", buf[256];
	long long port = CONF_DEFAULT_PORT, count = 0, first = 0;
	int ret;

	if ((ret = get_group(p, root, "cluster", &g)) < 0)
		return ret;
	if (!g)
		return 0;       /* defaults: one node on localhost */
	if ((ret = check_keys(p, g, cluster_keys)) < 0 ||
	    (ret = get_str(p, g, "name", c->cluster_name, sizeof(c->cluster_name), &name_s)) < 0 ||
	    (ret = get_int(p, g, "port", 1, 65535, &port)) < 0 ||
	    (ret = get_str(p, g, "host_pattern", pattern, sizeof(pattern), &pat_s)) < 0 ||
	    (ret = get_int(p, g, "count", 1, ROUTE_MAX_NODES, &count)) < 0 ||
	    (ret = get_int(p, g, "first", 0, 1000000000, &first)) < 0)
		return ret;
	if (name_s && !proto_name_ok(c->cluster_name, strlen(c->cluster_name)))
		return invalid(p, name_s, "'cluster.name' must be 1 to %d printable characters without spaces",
			    PROTO_NAME_MAX);
	nodes = config_setting_get_member(g, "nodes");
	if (nodes && pat_s)
		return invalid(p, pat_s, "set either 'cluster.nodes' or 'cluster.host_pattern', not both");
	if (pat_s) {
		if (!config_setting_get_member(g, "count"))
			return invalid(p, pat_s, "'cluster.host_pattern' needs 'cluster.count' (the number of nodes)");
		if (expand_pattern(pattern, 0, buf, sizeof(buf)) < 0)
			return invalid(p, pat_s, "'cluster.host_pattern' must contain exactly one %%d or %%0Nd, like \"node%%03d\"");
		free(c->nodes);
		c->nodes = calloc((size_t)count, sizeof(*c->nodes));
		if (!c->nodes)
			return invalid(p, pat_s, "out of memory for %lld nodes", count);
		c->nnodes = (uint32_t)count;
		for (uint32_t i = 0; i < c->nnodes; i++) {
			if (expand_pattern(pattern, (uint32_t)first + i, c->nodes[i].host,
					   sizeof(c->nodes[i].host)) < 0)
				return invalid(p, pat_s, "'cluster.host_pattern' makes host names longer than %d characters",
					    CONF_HOST_MAX);
			c->nodes[i].port = (uint16_t)port;
		}
		return 0;
	}
	if (config_setting_get_member(g, "count") || config_setting_get_member(g, "first"))
		return invalid(p, config_setting_get_member(g, "count") ? config_setting_get_member(g, "count")
								    : config_setting_get_member(g, "first"),
			    "'cluster.count' and 'cluster.first' go with 'cluster.host_pattern'");
	if (!nodes) {
		c->nodes[0].port = (uint16_t)port;
		return 0;
	}
	if (config_setting_type(nodes) != CONFIG_TYPE_LIST)
		return invalid(p, nodes, "'cluster.nodes' must be a list ( { host = \"...\"; port = N; }, ... ), not %s",
			    type_name(config_setting_type(nodes)));
	if (config_setting_length(nodes) < 1 || config_setting_length(nodes) > (int)ROUTE_MAX_NODES)
		return invalid(p, nodes, "'cluster.nodes' must list 1 to %u nodes", ROUTE_MAX_NODES);
	free(c->nodes);
	c->nnodes = (uint32_t)config_setting_length(nodes);
	c->nodes = calloc(c->nnodes, sizeof(*c->nodes));
	if (!c->nodes) {
		c->nnodes = 0;
		return invalid(p, nodes, "out of memory for %d nodes", config_setting_length(nodes));
	}
	for (uint32_t i = 0; i < c->nnodes; i++) {
		config_setting_t *n = config_setting_get_elem(nodes, i);
		const config_setting_t *host_s;
		long long nport = port;

		if (config_setting_type(n) != CONFIG_TYPE_GROUP)
			return invalid(p, n, "node %u in 'cluster.nodes' must be a group { host = \"...\"; port = N; }", i);
		if ((ret = check_keys(p, n, node_keys)) < 0 ||
		    (ret = get_str(p, n, "host", c->nodes[i].host, sizeof(c->nodes[i].host), &host_s)) < 0 ||
		    (ret = get_int(p, n, "port", 1, 65535, &nport)) < 0)
			return ret;
		if (!host_s || !c->nodes[i].host[0])
			return invalid(p, n, "node %u in 'cluster.nodes' has no host", i);
		c->nodes[i].port = (uint16_t)nport;
		for (uint32_t j = 0; j < i; j++)
			if (c->nodes[j].port == c->nodes[i].port &&
			    strcmp(c->nodes[j].host, c->nodes[i].host) == 0)
				return invalid(p, n, "node %u (%s port %u) duplicates node %u",
					    i, c->nodes[i].host, c->nodes[i].port, j);
	}
	return 0;
}

static int parse_topology(struct parse *p, const config_setting_t *root)
{
	static const char *const physical[] = { "switched", "torus", "mesh", NULL };
	struct conf *c = p->c;
	config_setting_t *g, *dims_s = NULL, *virt_s = NULL;
	uint32_t ndims = 0, dims[ROUTE_MAX_DIMS];
	char d[128];
	int ret, kind;

	if ((ret = get_group(p, root, "topology", &g)) < 0)
		return ret;
	if (g) {
		if ((ret = check_keys(p, g, topology_keys)) < 0 ||
		    (ret = get_enum(p, g, "physical", physical, &c->physical)) < 0)
			return ret;
		dims_s = config_setting_get_member(g, "dims");
		virt_s = config_setting_get_member(g, "virtual");
	}
	if (c->physical != CONF_SWITCHED) {
		kind = c->physical == CONF_TORUS ? ROUTE_TORUS : ROUTE_MESH;
		if (!dims_s)
			return invalid(p, g, "a %s needs 'topology.dims', e.g. [ 8, 8 ]", conf_physical_name(c->physical));
		if (virt_s)
			return invalid(p, virt_s, "'topology.virtual' applies to switched networks; a %s routes over its physical dims",
				    conf_physical_name(c->physical));
		if ((ret = get_dims(p, dims_s, &ndims, dims)) < 0)
			return ret;
		dims_str(dims, ndims, d, sizeof(d));
		if (route_init(&c->route, kind, ndims, dims, c->nnodes) < 0) {
			uint64_t prod = 1;

			for (uint32_t i = 0; i < ndims; i++)
				prod *= dims[i];
			return invalid(p, dims_s, "'topology.dims' %s has %" PRIu64 " positions but the cluster has %u nodes",
				    d, prod, c->nnodes);
		}
		c->virtual_kind = CONF_VIRT_PHYSICAL;
		return 0;
	}
	if (dims_s)
		return invalid(p, dims_s, "'topology.dims' describes a physical torus or mesh; for a switched network set 'topology.virtual'");
	c->virtual_kind = CONF_VIRT_AUTO;
	if (virt_s && config_setting_type(virt_s) == CONFIG_TYPE_STRING) {
		static const char *const virt[] = { "auto", "direct", NULL };

		if ((ret = get_enum(p, g, "virtual", virt, &c->virtual_kind)) < 0)
			return ret;
	} else if (virt_s) {
		uint64_t prod = 1;

		if (config_setting_type(virt_s) != CONFIG_TYPE_ARRAY && config_setting_type(virt_s) != CONFIG_TYPE_LIST)
			return invalid(p, virt_s, "'topology.virtual' must be \"auto\", \"direct\" or an array of sizes like [ 4, 4, 4 ], not %s",
				    type_name(config_setting_type(virt_s)));
		if ((ret = get_dims(p, virt_s, &ndims, dims)) < 0)
			return ret;
		for (uint32_t i = 0; i < ndims; i++)
			prod *= dims[i];
		dims_str(dims, ndims, d, sizeof(d));
		if (prod < c->nnodes)
			return invalid(p, virt_s, "'topology.virtual' %s has %" PRIu64 " positions, fewer than the %u nodes",
				    d, prod, c->nnodes);
		if (prod >= 2ull * c->nnodes)
			return invalid(p, virt_s, "'topology.virtual' %s has %" PRIu64 " positions for %u nodes; at most %u may be empty",
				    d, prod, c->nnodes, c->nnodes - 1);
		c->virtual_kind = CONF_VIRT_DIMS;
	}
	if (c->virtual_kind == CONF_VIRT_AUTO) {
		route_auto_dims(c->nnodes, &ndims, dims);
	} else if (c->virtual_kind == CONF_VIRT_DIRECT) {
		ndims = 1;
		dims[0] = c->nnodes;
	}
	if (route_init(&c->route, ROUTE_GRID, ndims, dims, c->nnodes) < 0)
		return invalid(p, virt_s ? virt_s : g, "cannot build a virtual grid for %u nodes", c->nnodes);
	return 0;
}

/* daemon.cpus: a CPU list as taskset -c and systemd's CPUAffinity= take it,
 * numbers and ranges separated by commas ("1", "2-3,6"), spaces allowed
 * around them.  CPUs named twice (as in "0-3,2") count once, as there.
 * Returns 0 with the CPUs in *set, or -EINVAL with what is wrong in why. */
static int cpus_parse(const char *s, cpu_set_t *set, char *why, size_t len)
{
	const char *q = s;

	CPU_ZERO(set);
	while (*q == ' ' || *q == '\t')
		q++;
	if (!*q) {
		snprintf(why, len, "the list is empty; leave 'daemon.cpus' out to run on every CPU");
		return -EINVAL;
	}
	for (;;) {
		long range[2];

		for (int i = 0; i < 2; i++) {
			const char *start;

			while (*q == ' ' || *q == '\t')
				q++;
			start = q;
			range[i] = 0;
			while (*q >= '0' && *q <= '9' && range[i] <= CPU_SETSIZE)
				range[i] = range[i] * 10 + (*q++ - '0');
			while (*q >= '0' && *q <= '9')  /* too large anyway */
				q++;
			if (q == start) {
				snprintf(why, len, "expected a CPU number at %s%.32s%s", *q ? "\"" : "the end",
					 q, *q ? "\"" : "");
				return -EINVAL;
			}
			if (range[i] >= CPU_SETSIZE) {
				snprintf(why, len, "CPU %.*s is beyond CPU_SETSIZE (ferryd takes CPUs 0 to %d)",
					 (int)(q - start), start, CPU_SETSIZE - 1);
				return -EINVAL;
			}
			while (*q == ' ' || *q == '\t')
				q++;
			if (i == 1 || *q != '-') {
				if (i == 0)
					range[1] = range[0];
				break;
			}
			q++;
		}
		if (range[1] < range[0]) {
			snprintf(why, len, "the range %ld-%ld goes down", range[0], range[1]);
			return -EINVAL;
		}
		for (long cpu = range[0]; cpu <= range[1]; cpu++)
			CPU_SET((size_t)cpu, set);
		if (!*q)
			return 0;
		if (*q != ',') {
			snprintf(why, len, "expected \",\" or \"-\" at \"%.32s\"", q);
			return -EINVAL;
		}
		q++;
	}
}

void conf_cpus_str(const cpu_set_t *set, char *buf, size_t len)
{
	size_t off = 0;
	int first = -1;

	if (len)
		buf[0] = '\0';
	if (CPU_COUNT(set) == 0) {
		snprintf(buf, len, "none");
		return;
	}
	for (int cpu = 0; cpu <= CPU_SETSIZE; cpu++) {
		int in = cpu < CPU_SETSIZE && CPU_ISSET((size_t)cpu, set);
		char item[32];
		int n;

		if (in && first < 0)
			first = cpu;
		if (in || first < 0)
			continue;
		if (first == cpu - 1)
			n = snprintf(item, sizeof(item), "%s%d", off ? "," : "", first);
		else
			n = snprintf(item, sizeof(item), "%s%d-%d", off ? "," : "", first, cpu - 1);
		/* What does not fit ends in "...", never in half a number. */
		if (off + (size_t)n + sizeof(",...") > len) {
			snprintf(buf + off, len - off, "%s...", off ? "," : "");
			return;
		}
		memcpy(buf + off, item, (size_t)n + 1);
		off += (size_t)n;
		first = -1;
	}
}

/* The CPUs of daemon.cpus must exist and be among those ferryd was started
 * on: it narrows what whoever started it gave it (taskset, CPUAffinity=, a
 * cpuset), never widens it.  Otherwise it would fail to pin itself, or pin
 * itself to fewer CPUs than asked. */
static int cpus_check(struct parse *p, const config_setting_t *s, const cpu_set_t *cpus)
{
	long ncpus = sysconf(_SC_NPROCESSORS_CONF);
	cpu_set_t allowed, missing;
	char list[256], mine[256];

	for (int cpu = CPU_SETSIZE - 1; cpu >= 0 && ncpus > 0; cpu--) {
		if (!CPU_ISSET((size_t)cpu, cpus))
			continue;
		if (cpu >= ncpus)
			return invalid(p, s, "'daemon.cpus' names CPU %d, but this machine has CPUs 0 to %ld",
				    cpu, ncpus - 1);
		break;
	}
	if (sched_getaffinity(0, sizeof(allowed), &allowed) < 0)
		return 0;       /* nothing to compare with; sched_setaffinity will say */
	CPU_XOR(&missing, cpus, &allowed);     /* missing: in cpus, not in allowed */
	CPU_AND(&missing, &missing, cpus);
	if (CPU_COUNT(&missing) == 0)
		return 0;
	conf_cpus_str(&missing, list, sizeof(list));
	conf_cpus_str(&allowed, mine, sizeof(mine));
	return invalid(p, s, "'daemon.cpus' names CPU%s %s, where ferryd may not run: it may run on %s "
		    "(as whoever started it allows: taskset, CPUAffinity=, the cgroup's cpuset)",
		    CPU_COUNT(&missing) > 1 ? "s" : "", list, mine);
}

/* A per-user limit left unset is a share of its node-wide limit, so that
 * lowering the node-wide one lowers it too; one set explicitly must not
 * exceed the node-wide one.  *user holds what was read, if anything. */
static int user_limit(struct parse *p, const config_setting_t *g, const char *name, const char *node_name,
		      uint64_t node, unsigned share, uint64_t *user)
{
	const config_setting_t *s = g ? config_setting_get_member(g, name) : NULL;

	if (!s)
		*user = node / share ? node / share : 1;
	else if (*user > node)
		return invalid(p, s, "'limits.%s' (%" PRIu64 ") exceeds 'limits.%s' (%" PRIu64 ")",
			    name, *user, node_name, node);
	return 0;
}

static int per_user_limits(struct parse *p, const config_setting_t *g)
{
	struct conf *c = p->c;
	uint64_t clients = c->user_clients, unjoined = c->user_unjoined;
	int ret;

	if ((ret = user_limit(p, g, "user_clients", "max_clients", c->max_clients, CONF_USER_SHARE_CLIENTS,
			      &clients)) < 0 ||
	    (ret = user_limit(p, g, "user_unjoined", "max_unjoined", c->max_unjoined, CONF_USER_SHARE_UNJOINED,
			      &unjoined)) < 0 ||
	    (ret = user_limit(p, g, "user_memory_bytes", "memory_bytes", c->memory_bytes, CONF_USER_SHARE_MEMORY,
			      &c->user_memory_bytes)) < 0)
		return ret;
	c->user_clients = (uint32_t)clients;
	c->user_unjoined = (uint32_t)unjoined;
	return 0;
}

/* collectives: { FAMILY = "auto" or an algorithm, ... } for every family
 * of proto/ctl.h (enum ctl_fam: alltoall, scatter, gather, bcast, reduce,
 * allreduce, allgather, reduce_scatter, scan), as ferry_coll_strategy
 * names them; index = 0 automatic, else algorithm + 1. */
static int parse_collectives(struct parse *p, const config_setting_t *root)
{
	const char *keys[CTL_FAMS + 1];
	struct conf *c = p->c;
	config_setting_t *g;
	int v[CTL_FAMS] = { 0 }, ret;

	for (uint32_t f = 0; f < CTL_FAMS; f++)
		keys[f] = ctl_fam_name(f);
	keys[CTL_FAMS] = NULL;
	if ((ret = get_group(p, root, "collectives", &g)) < 0 || !g)
		return ret;
	if ((ret = check_keys(p, g, keys)) < 0)
		return ret;
	for (uint32_t f = 0; f < CTL_FAMS; f++)
		if ((ret = get_enum(p, g, keys[f], ctl_fam_algs(f), &v[f])) < 0)
			return ret;
	/* opt and sdf follow the links of a physical torus (daemon/plan/scatter.h) */
	for (uint32_t f = CTL_FAM_SCATTER; f <= CTL_FAM_GATHER; f++)
		if (c->physical != CONF_TORUS && (v[f] == CTL_ROOTED_OPT + 1 || v[f] == CTL_ROOTED_SDF + 1))
			return invalid(p, config_setting_get_member(g, keys[f]),
				       "'collectives.%s' is \"%s\", which needs 'topology.physical' = \"torus\"",
				       keys[f], ctl_fam_algs(f)[v[f]]);
	for (uint32_t f = 0; f < CTL_FAMS; f++)
		c->coll_force[f] = (uint8_t)v[f];
	return 0;
}

static int parse_rest(struct parse *p, const config_setting_t *root)
{
	/* in the order of enum sandbox_mode */
	static const char *const seccomp_modes[] = { "kill", "log", "off", NULL };
	static const char *const transports[] = { "auto", "tcp", "verbs", NULL };
	struct conf *c = p->c;
	config_setting_t *g;
	const config_setting_t *s, *integ_s, *enc_s, *cpus_s, *sd, *cc_s, *probe_s;
	char level[32], cpus[256], why[128];
	int ret, integ = -1;

	if ((ret = get_group(p, root, "aggregation", &g)) < 0 ||
	    (g && (ret = check_keys(p, g, agg_keys)) < 0) ||
	    (ret = GET_INT(p, g, "buffer_bytes", 0, 1 << 20, c->buffer_bytes)) < 0 ||
	    (ret = GET_INT(p, g, "flush_us", 0, 10000000, c->flush_us)) < 0)
		return ret;

	if ((ret = get_group(p, root, "transport", &g)) < 0 ||
	    (g && (ret = check_keys(p, g, tr_keys)) < 0) ||
	    (ret = get_enum(p, g, "kind", transports, &c->transport)) < 0 ||
	    (ret = get_str(p, g, "device", c->verbs_device, sizeof(c->verbs_device), NULL)) < 0 ||
	    (ret = get_str(p, g, "tcp_congestion", c->tcp_congestion, sizeof(c->tcp_congestion), &cc_s)) < 0 ||
	    (ret = get_bool(p, g, "probe", &c->link_probe, &probe_s)) < 0)
		return ret;
	/* A name, as the kernel's congestion controls have (TCP_CA_NAME_MAX 16,
	 * get_str's limit): printable, no space. */
	for (const char *q = c->tcp_congestion; cc_s && *q; q++)
		if (*q <= ' ' || *q > '~')
			return invalid(p, cc_s, "'transport.tcp_congestion' is \"%s\", not a congestion control's name "
				       "(no spaces or control characters; \"\" keeps the system's)", c->tcp_congestion);

	if ((ret = get_group(p, root, "limits", &g)) < 0 ||
	    (g && (ret = check_keys(p, g, lim_keys)) < 0) ||
	    (ret = GET_INT(p, g, "max_clients", 1, 65536, c->max_clients)) < 0 ||
	    (ret = GET_INT(p, g, "ring_bytes", 256 * 1024, 1 << 30, c->ring_bytes)) < 0 ||
	    (ret = GET_INT(p, g, "memory_bytes", 1 << 20, 1LL << 40, c->memory_bytes)) < 0 ||
	    (ret = GET_INT(p, g, "pending_bytes", 256 * 1024, 1LL << 40, c->pending_bytes)) < 0 ||
	    (ret = GET_INT(p, g, "link_bytes", 1 << 20, 1LL << 40, c->link_bytes)) < 0 ||
	    (ret = GET_INT(p, g, "max_unjoined", 1, 65536, c->max_unjoined)) < 0 ||
	    (ret = GET_INT(p, g, "user_clients", 1, 65536, c->user_clients)) < 0 ||
	    (ret = GET_INT(p, g, "user_unjoined", 1, 65536, c->user_unjoined)) < 0 ||
	    (ret = GET_INT(p, g, "user_jobs", 1, 65536, c->user_jobs)) < 0 ||
	    (ret = GET_INT(p, g, "user_memory_bytes", 1 << 20, 1LL << 40, c->user_memory_bytes)) < 0 ||
	    (ret = GET_INT(p, g, "join_timeout_ms", 10, 3600000, c->join_timeout_ms)) < 0 ||
	    (ret = GET_INT(p, g, "admin_idle_ms", 10, 3600000, c->admin_idle_ms)) < 0)
		return ret;
	if (g && (s = config_setting_get_member(g, "ring_bytes")) && (c->ring_bytes & (c->ring_bytes - 1)))
		return invalid(p, s, "'limits.ring_bytes' is %" PRIu64 ", must be a power of two", c->ring_bytes);
	if (c->pending_bytes > c->memory_bytes)
		return invalid(p, g, "'limits.pending_bytes' (%" PRIu64 ") exceeds 'limits.memory_bytes' (%" PRIu64 ")",
			    c->pending_bytes, c->memory_bytes);
	if ((ret = per_user_limits(p, g)) < 0)
		return ret;

	/* The range and the power of two are what ring_size_ok asks of a ring
	 * (proto/ring.h), as for limits.ring_bytes. */
	if ((ret = get_group(p, root, "direct", &g)) < 0 ||
	    (g && (ret = check_keys(p, g, dir_keys)) < 0) ||
	    (ret = GET_INT(p, g, "max_ranks", 0, PROTO_DIRECT_MAX, c->direct_max_ranks)) < 0 ||
	    (ret = GET_INT(p, g, "ring_bytes", PROTO_RING_MIN, PROTO_RING_MAX, c->direct_ring_bytes)) < 0)
		return ret;
	if (g && (s = config_setting_get_member(g, "ring_bytes")) &&
	    (c->direct_ring_bytes & (c->direct_ring_bytes - 1)))
		return invalid(p, s, "'direct.ring_bytes' is %" PRIu64 ", must be a power of two",
			       c->direct_ring_bytes);
	/* Every client of such a job maps the whole region. */
	if (g && c->direct_max_ranks &&
	    proto_direct_region_bytes(c->direct_max_ranks, c->direct_ring_bytes) > CONF_DIRECT_REGION_MAX)
		return invalid(p, g, "'direct.max_ranks' squared times 'direct.ring_bytes' makes a region of %" PRIu64
			       " bytes, above the %" PRIu64 " a job's region may have",
			       proto_direct_region_bytes(c->direct_max_ranks, c->direct_ring_bytes),
			       (uint64_t)CONF_DIRECT_REGION_MAX);

	if ((ret = get_group(p, root, "security", &g)) < 0 ||
	    (g && (ret = check_keys(p, g, sec_keys)) < 0) ||
	    (ret = get_str(p, g, "key_file", c->key_file, sizeof(c->key_file), NULL)) < 0 ||
	    (ret = get_bool(p, g, "integrity", &integ, &integ_s)) < 0 ||
	    (ret = get_bool(p, g, "encrypt", &c->encrypt, &enc_s)) < 0)
		return ret;
	/* Integrity is on by default with a key; without one it cannot be. */
	c->integrity = integ < 0 ? c->key_file[0] != '\0' : integ;
	if (c->integrity && !c->key_file[0])
		return invalid(p, integ_s, "'security.integrity' needs 'security.key_file': without a cluster key "
			    "nothing can be authenticated");
	if (c->encrypt && !c->key_file[0])
		return invalid(p, enc_s, "'security.encrypt' needs 'security.key_file'");
	if (c->encrypt && !c->integrity)
		return invalid(p, enc_s, "'security.encrypt' needs 'security.integrity' (the cipher authenticates "
			    "what it encrypts)");

	if ((ret = get_group(p, root, "logging", &g)) < 0 ||
	    (g && (ret = check_keys(p, g, log_keys)) < 0) ||
	    (ret = get_str(p, g, "level", level, sizeof(level), &s)) < 0)
		return ret;
	if (s && (c->log_level = log_level_parse(level)) < 0)
		return invalid(p, s, "'logging.level' is \"%s\", must be \"err\", \"warning\", \"notice\", \"info\" or \"debug\"",
			    level);

	if ((ret = get_group(p, root, "daemon", &g)) < 0 ||
	    (g && (ret = check_keys(p, g, dmn_keys)) < 0) ||
	    (ret = get_str(p, g, "runtime_dir", c->runtime_dir, sizeof(c->runtime_dir) - 32, &s)) < 0 ||
	    (ret = get_str(p, g, "state_dir", c->state_dir, sizeof(c->state_dir) - 32, &sd)) < 0 ||
	    (ret = GET_INT(p, g, "spin_us", 0, 100000, c->spin_us)) < 0 ||
	    (ret = get_enum(p, g, "seccomp", seccomp_modes, &c->seccomp)) < 0 ||
	    (ret = get_str(p, g, "cpus", cpus, sizeof(cpus), &cpus_s)) < 0)
		return ret;
	if (s && c->runtime_dir[0] != '/')
		return invalid(p, s, "'daemon.runtime_dir' must be an absolute path");
	if (sd && c->state_dir[0] && c->state_dir[0] != '/')
		return invalid(p, sd, "'daemon.state_dir' must be an absolute path, or \"\" for none");
	if (cpus_s && cpus_parse(cpus, &c->cpus, why, sizeof(why)) < 0)
		return invalid(p, cpus_s, "'daemon.cpus' is \"%s\": %s", cpus, why);
	if (cpus_s)
		return cpus_check(p, cpus_s, &c->cpus);
	return 0;
}

void conf_defaults(struct conf *c)
{
	memset(c, 0, sizeof(*c));
	strcpy(c->cluster_name, "ferry");
	c->nnodes = 1;
	c->nodes = calloc(1, sizeof(*c->nodes));
	if (c->nodes) {
		strcpy(c->nodes[0].host, "localhost");
		c->nodes[0].port = CONF_DEFAULT_PORT;
	}
	c->physical = CONF_SWITCHED;
	c->virtual_kind = CONF_VIRT_AUTO;
	c->buffer_bytes = 16384;
	c->flush_us = 200;
	c->transport = CONF_TRANSPORT_AUTO;
	c->tcp_congestion[0] = '\0';         /* the system's: see conf/ferry.conf */
	c->link_probe = 1;
	c->max_clients = 256;
	c->max_unjoined = 64;
	c->ring_bytes = 1 << 20;
	c->memory_bytes = 256ull << 20;
	c->pending_bytes = 16ull << 20;
	c->link_bytes = 8ull << 20;
	c->user_clients = c->max_clients / CONF_USER_SHARE_CLIENTS;
	c->user_unjoined = c->max_unjoined / CONF_USER_SHARE_UNJOINED;
	c->user_jobs = 64;
	c->user_memory_bytes = c->memory_bytes / CONF_USER_SHARE_MEMORY;
	c->join_timeout_ms = 10000;
	c->admin_idle_ms = 60000;
	c->direct_max_ranks = 16;
	c->direct_ring_bytes = 256 * 1024;
	c->key_file[0] = '\0';
	c->log_level = LOG_INFO;
	strcpy(c->runtime_dir, "/run/ferry");
	strcpy(c->state_dir, "/var/lib/ferry");
	c->spin_us = 50;
	c->seccomp = SANDBOX_KILL;
	route_init(&c->route, ROUTE_GRID, 1, &c->nnodes, 1);
}

static int load(struct conf *c, config_t *cfg, struct parse *p)
{
	const config_setting_t *root = config_root_setting(cfg);
	int ret;

	if (!c->nodes)
		return invalid(p, NULL, "out of memory");
	if ((ret = check_keys(p, root, top_keys)) < 0 ||
	    (ret = parse_cluster(p, root)) < 0 ||
	    (ret = parse_topology(p, root)) < 0 ||
	    (ret = parse_collectives(p, root)) < 0 ||
	    (ret = parse_rest(p, root)) < 0)
		return ret;
	return 0;
}

static int finish(struct conf *c, config_t *cfg, struct parse *p, int read_ok)
{
	int ret;

	if (!read_ok) {
		const char *f = config_error_file(cfg);

		snprintf(p->err, p->errlen, "%s:%d: %s", f ? f : p->file, config_error_line(cfg),
			 config_error_text(cfg));
		ret = config_error_type(cfg) == CONFIG_ERR_FILE_IO ? -ENOENT : -EINVAL;
	} else {
		ret = load(c, cfg, p);
	}
	config_destroy(cfg);
	if (ret < 0) {
		conf_free(c);
		conf_defaults(c);
	}
	return ret;
}

int conf_load_file(struct conf *c, const char *path, char *err, size_t errlen)
{
	struct parse p = { .c = c, .file = path, .err = err, .errlen = errlen };
	config_t cfg;
	FILE *f;
	int ok;

	conf_defaults(c);
	snprintf(c->path, sizeof(c->path), "%s", path);
	/* Open it once ourselves to tell "missing" from "unreadable". */
	f = fopen(path, "r");
	if (!f) {
		int e = errno;

		snprintf(err, errlen, "%s:0: cannot open: %s", path, strerror(e));
		return e == ENOENT ? -ENOENT : -EINVAL;
	}
	fclose(f);
	config_init(&cfg);
	ok = config_read_file(&cfg, path) == CONFIG_TRUE;
	return finish(c, &cfg, &p, ok);
}

int conf_load_string(struct conf *c, const char *text, const char *name, char *err, size_t errlen)
{
	struct parse p = { .c = c, .file = name, .err = err, .errlen = errlen };
	config_t cfg;

	conf_defaults(c);
	snprintf(c->path, sizeof(c->path), "%s", name);
	config_init(&cfg);
	return finish(c, &cfg, &p, config_read_string(&cfg, text) == CONFIG_TRUE);
}

void conf_free(struct conf *c)
{
	free(c->nodes);
	c->nodes = NULL;
	c->nnodes = 0;
}

const char *conf_physical_name(int physical)
{
	switch (physical) {
	case CONF_TORUS: return "torus";
	case CONF_MESH: return "mesh";
	}
	return "switched";
}

const char *conf_transport_name(int transport)
{
	switch (transport) {
	case CONF_TRANSPORT_TCP: return "tcp";
	case CONF_TRANSPORT_VERBS: return "verbs";
	}
	return "auto";
}
