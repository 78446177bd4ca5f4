/* daemon/cluster/costs.c - see costs.h. */
#include "costs.h"
#include "../core/log.h"
#include "../core/loop.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define FILE_MAX (1u << 20)

static struct {
	const struct conf *conf;
	struct cost_table *t;
	char path[PATH_MAX + 16];       /* "": memory only */
	struct loop_timer save_timer;
	int dirty;
	int save_failed;                /* logged once */
} costs;

static void load(void)
{
	char err[160], aside[sizeof(costs.path) + 8];
	char *text = malloc(FILE_MAX);
	ssize_t n = 0, r;
	int fd, bad;

	if (!text)
		return;
	if ((fd = open(costs.path, O_RDONLY | O_CLOEXEC)) < 0) {
		if (errno != ENOENT)
			log_warn("runtime functions: cannot read %s: %m; starting without", costs.path);
		free(text);
		return;
	}
	while (n < (ssize_t)FILE_MAX && (r = read(fd, text + n, FILE_MAX - (size_t)n)) > 0)
		n += r;
	close(fd);
	bad = n >= (ssize_t)FILE_MAX ? -EFBIG : cost_table_parse(costs.t, text, (size_t)n, err, sizeof(err));
	free(text);
	if (bad < 0) {
		/* not ours, or cut: set aside for whoever wants to look */
		snprintf(aside, sizeof(aside), "%s.bad", costs.path);
		log_warn("runtime functions: %s: %s; moved to %s, starting without", costs.path,
			 bad == -EFBIG ? "too large" : err, aside);
		if (rename(costs.path, aside) < 0)
			log_warn("runtime functions: cannot move %s: %m", costs.path);
		cost_table_init(costs.t);
		return;
	}
	if (bad)
		log_warn("runtime functions: %s: %d lines skipped (%s)", costs.path, bad, err);
	log_info("runtime functions: %s read", costs.path);
}

static void save(void)
{
	char tmp[sizeof(costs.path) + 8];
	size_t n = cost_table_format(costs.t, NULL, 0);
	char *text = malloc(n + 1);
	int fd = -1, ok = 0;

	if (!costs.path[0] || !costs.dirty || !text)
		goto out;
	cost_table_format(costs.t, text, n + 1);
	snprintf(tmp, sizeof(tmp), "%s.tmp", costs.path);
	if ((fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600)) >= 0) {
		size_t done = 0;
		ssize_t w = 0;

		while (done < n && (w = write(fd, text + done, n - done)) > 0)
			done += (size_t)w;
		ok = done == n;
		if (close(fd) < 0)
			ok = 0;
		ok = ok && rename(tmp, costs.path) == 0;
	}
	if (!ok && !costs.save_failed)
		log_warn("runtime functions: cannot write %s: %m (they are kept in memory; logged once)", costs.path);
	costs.save_failed |= !ok;
	costs.dirty = !ok;
out:
	free(text);
}

static void save_fn(struct loop_timer *t)
{
	(void)t;
	save();
}

int costs_init(const struct conf *c)
{
	costs.conf = c;
	if (!(costs.t = malloc(sizeof(*costs.t))))
		return -ENOMEM;
	cost_table_init(costs.t);
	costs.path[0] = 0;
	costs.dirty = costs.save_failed = 0;
	if (c->state_dir[0]) {
		snprintf(costs.path, sizeof(costs.path), "%s/" COSTS_FILE, c->state_dir);
		load();
	}
	return 0;
}

void costs_fini(void)
{
	if (!costs.t)
		return;
	loop_timer_cancel(&costs.save_timer);
	save();
	free(costs.t);
	costs.t = NULL;
}

void costs_add(uint32_t fam, uint32_t alg, uint32_t nodes, uint32_t ppn, uint64_t bytes, const struct cost_x *x,
	       double gamma_ns, double beta_ns, double t_us)
{
	if (!costs.t || cost_table_add(costs.t, fam, alg, nodes, ppn, bytes, x, gamma_ns, beta_ns, t_us) < 0)
		return;
	costs.dirty = 1;
	if (costs.path[0] && !costs.save_timer.armed)
		loop_timer_arm(&costs.save_timer, COSTS_SAVE_NS, save_fn, NULL);
}

/* A coefficient as GO carries it: rounded, at least 1 where it is not 0
 * (a function that is not none stays one), at most UINT32_MAX. */
static uint32_t wire_units(double v)
{
	if (!(v > 0))
		return 0;
	if (v >= (double)UINT32_MAX)
		return UINT32_MAX;
	return v < 1 ? 1 : (uint32_t)(v + 0.5);
}

void costs_go(struct wire_ctl_go_tail *t, struct wire_go_fn *fns)
{
	memset(t, 0, sizeof(*t));
	for (uint32_t f = 0; f < CTL_FAMS; f++)
		t->force[f] = costs.conf->coll_force[f];
	for (uint32_t f = 0; costs.t && f < CTL_FAMS; f++)
		for (uint32_t a = 0; a < ctl_fam_nalgs(f) && t->nfn < WIRE_GO_FNS_MAX; a++) {
			const struct cost_fn *fn = &costs.t->fn[f][a];

			if (fn->tau_us <= 0 && fn->tc_ns <= 0)
				continue;
			fns[t->nfn++] = (struct wire_go_fn){ .fam = (uint8_t)f, .alg = (uint8_t)a,
							     .tau_ns = wire_units(fn->tau_us * 1e3),
							     .tc_ps = wire_units(fn->tc_ns * 1e3) };
		}
}

void costs_write(FILE *out)
{
	size_t n;
	char *text;

	if (!costs.t)
		return;
	n = cost_table_format(costs.t, NULL, 0);
	if (!(text = malloc(n + 1))) {
		fprintf(out, "# out of memory\n");
		return;
	}
	cost_table_format(costs.t, text, n + 1);
	fputs(text, out);
	free(text);
	fprintf(out, "# file %s\n", costs.path[0] ? costs.path : "(none: daemon.state_dir is \"\")");
	for (uint32_t f = 0; f < CTL_FAMS; f++)
		for (uint32_t a = 0; a < ctl_fam_nalgs(f); a++) {
			const struct cost_fn *fn = &costs.t->fn[f][a];

			if (fn->tau_us > 0 || fn->tc_ns > 0)
				fprintf(out, "# fn %s %s tau_us %.3f tc_ns_per_byte %.5f points %u\n", ctl_fam_name(f),
					ctl_fam_algs(f)[a + 1], fn->tau_us, fn->tc_ns, cost_table_points(costs.t, f, a));
		}
}
