/* tests/unit/test_confdoc.c - one set of options: every option
 * daemon/core/conf.c parses is documented in conf/ferry.conf and in
 * ferry.conf(5) (packaging/man/ferry.conf.5), with its default there, and
 * neither documents an option the code does not take.  Run from the top of
 * the tree (tests/run.sh does). */
#define UNIT "confdoc"
#include "check.h"
#include "../../daemon/core/conf.c"
#include "../../daemon/plan/route.c"
#include "../../daemon/core/log.c"

#define MAX_OPTS 128

struct names {
	char v[MAX_OPTS][64];
	int n;
};

static void add(struct names *s, const char *group, const char *key)
{
	if (s->n < MAX_OPTS)
		snprintf(s->v[s->n++], sizeof(s->v[0]), "%s.%s", group, key);
}

static int has(const struct names *s, const char *name)
{
	for (int i = 0; i < s->n; i++)
		if (strcmp(s->v[i], name) == 0)
			return 1;
	return 0;
}

/* The code's options: conf.c's key lists, group by group.  A group the
 * table below does not know fails the test (add it here and document it). */
static void code_options(struct names *s)
{
	static const struct { const char *group; const char *const *keys; } groups[] = {
		{ "cluster", cluster_keys }, { "topology", topology_keys }, { "aggregation", agg_keys },
		{ "transport", tr_keys }, { "limits", lim_keys }, { "direct", dir_keys },
		{ "collectives", NULL }, { "security", sec_keys }, { "logging", log_keys },
		{ "daemon", dmn_keys },
	};

	for (const char *const *g = top_keys; *g; g++) {
		size_t i;

		for (i = 0; i < sizeof(groups) / sizeof(groups[0]) && strcmp(groups[i].group, *g); i++)
			;
		if (i == sizeof(groups) / sizeof(groups[0])) {
			fprintf(stderr, "    group '%s' of conf.c is not known to this test\n", *g);
			CHECK(0);
			continue;
		}
		if (!groups[i].keys) {
			for (uint32_t f = 0; f < CTL_FAMS; f++)
				add(s, *g, ctl_fam_name(f));
			continue;
		}
		for (const char *const *k = groups[i].keys; *k; k++)
			add(s, *g, *k);
	}
}

/* conf/ferry.conf: "group: {" opens a group, "};" closes it; inside, a line
 * "name = ..." or "#   name = ..." (a commented default) names an option.
 * Lines of examples that continue a value start with something else. */
static int file_options(const char *path, struct names *s)
{
	FILE *f = fopen(path, "r");
	char line[512], group[64] = "";

	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		char name[64];
		const char *q = line;

		if (sscanf(line, "%63[a-z_]: {", name) == 1 && strchr(line, '{')) {
			strcpy(group, name);
			continue;
		}
		if (strncmp(line, "};", 2) == 0) {
			group[0] = '\0';
			continue;
		}
		while (*q == ' ')
			q++;
		if (*q == '#') {
			/* a commented default has at least three spaces after the '#' */
			if (strncmp(q, "#   ", 4) != 0)
				continue;
			q += 4;
			while (*q == ' ')
				q++;
		}
		if (group[0] && sscanf(q, "%63[a-z_] =", name) == 1 && strstr(q, " ="))
			add(s, group, name);
	}
	fclose(f);
	return 0;
}

/* ferry.conf(5): in OPTIONS, each option is a tagged paragraph whose tag is
 * ".B group.name" and whose text starts with "Default:". */
static int man_options(const char *path, struct names *s, struct names *no_default)
{
	FILE *f = fopen(path, "r");
	char line[512], name[64];
	int in_opts = 0, after_tp = 0, want_default = 0;

	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		if (strncmp(line, ".SH ", 4) == 0)
			in_opts = strncmp(line, ".SH OPTIONS", 11) == 0;
		if (!in_opts)
			continue;
		if (want_default) {
			if (strncmp(line, "Default:", 8) != 0)
				add(no_default, "option", s->v[s->n - 1]);
			want_default = 0;
		}
		if (after_tp && sscanf(line, ".B %63[a-z_.]", name) == 1 && strchr(name, '.')) {
			char *dot = strchr(name, '.');

			*dot = '\0';
			add(s, name, dot + 1);
			want_default = 1;
		}
		after_tp = strncmp(line, ".TP", 3) == 0;
	}
	fclose(f);
	return 0;
}

static struct names code, conf_file, man, no_default;

static void same(const char *what, const struct names *doc)
{
	for (int i = 0; i < code.n; i++)
		if (!has(doc, code.v[i])) {
			fprintf(stderr, "    %s does not document %s\n", what, code.v[i]);
			CHECK(0);
		}
	for (int i = 0; i < doc->n; i++)
		if (!has(&code, doc->v[i])) {
			fprintf(stderr, "    %s documents %s, which conf.c does not take\n", what, doc->v[i]);
			CHECK(0);
		}
}

TEST(conf_file_names_every_option)
{
	CHECK_EQ(file_options("conf/ferry.conf", &conf_file), 0);
	same("conf/ferry.conf", &conf_file);
}

TEST(man_page_names_every_option)
{
	CHECK_EQ(man_options("packaging/man/ferry.conf.5", &man, &no_default), 0);
	same("ferry.conf(5)", &man);
}

TEST(man_page_gives_every_default)
{
	for (int i = 0; i < no_default.n; i++) {
		fprintf(stderr, "    ferry.conf(5): %s has no \"Default:\" line\n", no_default.v[i] + strlen("option."));
		CHECK(0);
	}
}

/* The file is what ferryd reads when it is installed: it must load, and its
 * values must be the defaults (every setting in it is one). */
TEST(conf_file_is_the_defaults)
{
	struct conf c, d;
	char err[512];

	CHECK_EQ(conf_load_file(&c, "conf/ferry.conf", err, sizeof(err)), 0);
	conf_defaults(&d);
	CHECK(strcmp(c.cluster_name, d.cluster_name) == 0);
	CHECK_EQ(c.nnodes, d.nnodes);
	CHECK_EQ(c.nodes[0].port, d.nodes[0].port);
	CHECK_EQ(c.buffer_bytes, d.buffer_bytes);
	CHECK_EQ(c.flush_us, d.flush_us);
	CHECK_EQ(c.transport, d.transport);
	CHECK_EQ(c.max_clients, d.max_clients);
	CHECK_EQ(c.max_unjoined, d.max_unjoined);
	CHECK_EQ(c.join_timeout_ms, d.join_timeout_ms);
	CHECK_EQ(c.admin_idle_ms, d.admin_idle_ms);
	CHECK_EQ(c.user_jobs, d.user_jobs);
	CHECK_EQ(c.ring_bytes, d.ring_bytes);
	CHECK_EQ(c.memory_bytes, d.memory_bytes);
	CHECK_EQ(c.pending_bytes, d.pending_bytes);
	CHECK_EQ(c.link_bytes, d.link_bytes);
	CHECK_EQ(c.direct_max_ranks, d.direct_max_ranks);
	CHECK_EQ(c.direct_ring_bytes, d.direct_ring_bytes);
	CHECK_EQ(c.log_level, d.log_level);
	CHECK(strcmp(c.runtime_dir, d.runtime_dir) == 0);
	CHECK(strcmp(c.state_dir, d.state_dir) == 0);
	CHECK_EQ(c.spin_us, d.spin_us);
	CHECK_EQ(c.seccomp, d.seccomp);
	conf_free(&c);
	conf_free(&d);
}

int main(void)
{
	code_options(&code);
	RUN(conf_file_names_every_option);
	RUN(man_page_names_every_option);
	RUN(man_page_gives_every_default);
	RUN(conf_file_is_the_defaults);
	return check_done();
}
