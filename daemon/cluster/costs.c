/* daemon/cluster/costs.c - see costs.h. */
#include "costs.h"
#include "../core/log.h"
#include "../core/loop.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define FILE_MAX (1u << 20)

struct ucosts {
	int used;
	uid_t uid;
	struct cost_table *t;
	int dirty;                      /* changed since saved */
	uint64_t last;                  /* costs.clock when last needed */
};

static struct {
	const struct conf *conf;
	struct ucosts u[COSTS_USERS];
	uint64_t clock;
	struct loop_timer save_timer;
	int save_failed;                /* logged once per failure, again after a success */
} costs;

/* The points' ages (plan/cost.h COST_AGE_S): the loop's monotonic clock. */
static uint64_t now_s(void)
{
	return loop_now_ns() / 1000000000u;
}

static void path_of(char *buf, size_t cap, uid_t uid, const char *suffix)
{
	snprintf(buf, cap, "%s/costs.%u%s", costs.conf->state_dir, (unsigned)uid, suffix);
}

static void load(struct ucosts *u)
{
	char path[PATH_MAX + 32], aside[PATH_MAX + 40], err[160];
	char *text;
	ssize_t n = 0, r;
	int fd, bad;

	if (!costs.conf->state_dir[0])
		return;
	path_of(path, sizeof(path), u->uid, "");
	if ((fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)) < 0) {
		if (errno != ENOENT)
			log_warn("runtime functions: cannot read %s: %m; starting without", path);
		return;
	}
	if (!(text = malloc(FILE_MAX))) {
		close(fd);
		return;
	}
	while (n < (ssize_t)FILE_MAX && (r = read(fd, text + n, FILE_MAX - (size_t)n)) > 0)
		n += r;
	close(fd);
	bad = n >= (ssize_t)FILE_MAX ? -EFBIG : cost_table_parse(u->t, text, (size_t)n, now_s(), err, sizeof(err));
	free(text);
	if (bad < 0) {
		/* not ours, or cut: set aside for whoever wants to look */
		path_of(aside, sizeof(aside), u->uid, ".bad");
		log_warn("runtime functions: %s: %s; moved to %s, starting without", path,
			 bad == -EFBIG ? "too large" : err, aside);
		if (rename(path, aside) < 0)
			log_warn("runtime functions: cannot move %s: %m", path);
		cost_table_init(u->t);
		return;
	}
	if (bad)
		log_warn("runtime functions: %s: %d lines skipped (%s)", path, bad, err);
}

/* Writes u's table: a temporary file, synced, renamed over the old one,
 * the directory synced.  0 or -errno. */
static int save_one(struct ucosts *u)
{
	char path[PATH_MAX + 32], tmp[PATH_MAX + 40];
	size_t n = cost_table_format(u->t, NULL, 0), done = 0;
	char *text = malloc(n + 1);
	int fd, dfd, err = 0;

	if (!text)
		return -ENOMEM;
	cost_table_format(u->t, text, n + 1);
	path_of(path, sizeof(path), u->uid, "");
	path_of(tmp, sizeof(tmp), u->uid, ".tmp");
	if ((fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600)) < 0) {
		free(text);
		return -errno;
	}
	while (done < n && !err) {
		ssize_t w = write(fd, text + done, n - done);

		if (w > 0)
			done += (size_t)w;
		else
			err = w < 0 ? -errno : -EIO;
	}
	free(text);
	if (!err && fsync(fd) < 0)
		err = -errno;
	if (close(fd) < 0 && !err)
		err = -errno;
	if (!err && rename(tmp, path) < 0)
		err = -errno;
	if (err) {
		unlink(tmp);
		return err;
	}
	if ((dfd = open(costs.conf->state_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) >= 0) {
		fsync(dfd);     /* (the rename: best effort) */
		close(dfd);
	}
	u->dirty = 0;
	return 0;
}

static void save_all(void)
{
	for (uint32_t i = 0; i < COSTS_USERS; i++) {
		struct ucosts *u = &costs.u[i];
		int ret;

		if (!u->used || !u->dirty || !costs.conf->state_dir[0])
			continue;
		if ((ret = save_one(u)) < 0 && !costs.save_failed) {
			log_warn("runtime functions: cannot write %s/costs.%u: %s (kept in memory; said once until a "
				 "write succeeds)", costs.conf->state_dir, (unsigned)u->uid, strerror(-ret));
			costs.save_failed = 1;
		} else if (ret == 0) {
			costs.save_failed = 0;
		}
	}
}

static void save_fn(struct loop_timer *t)
{
	(void)t;
	save_all();
}

/* uid's table, read from its file the first time; NULL if out of memory
 * (or, with make 0, if it is not held). */
static struct ucosts *table_of(uid_t uid, int make)
{
	struct ucosts *u = NULL, *lru = NULL;

	for (uint32_t i = 0; i < COSTS_USERS; i++) {
		struct ucosts *v = &costs.u[i];

		if (v->used && v->uid == uid) {
			v->last = ++costs.clock;
			return v;
		}
		if (!v->used && !u)
			u = v;
		if (v->used && v->uid != 0 && (!lru || v->last < lru->last))
			lru = v;
	}
	if (!make)
		return NULL;
	if (!u) {
		/* let the least recently needed go (saved first) */
		if (!lru)
			return NULL;
		if (lru->dirty && costs.conf->state_dir[0] && save_one(lru) < 0)
			log_rl_warn("runtime functions: uid %u's table let go unsaved", (unsigned)lru->uid);
		free(lru->t);
		memset(lru, 0, sizeof(*lru));
		u = lru;
	}
	if (!(u->t = malloc(sizeof(*u->t))))
		return NULL;
	cost_table_init(u->t);
	u->used = 1;
	u->uid = uid;
	u->dirty = 0;
	u->last = ++costs.clock;
	load(u);
	return u;
}

int costs_init(const struct conf *c)
{
	memset(&costs, 0, sizeof(costs));
	costs.conf = c;
	/* root's, shared: read now (its file's trouble is said at start) */
	return table_of(0, 1) ? 0 : -ENOMEM;
}

void costs_fini(void)
{
	if (!costs.conf)
		return;
	loop_timer_cancel(&costs.save_timer);
	save_all();
	for (uint32_t i = 0; i < COSTS_USERS; i++) {
		free(costs.u[i].t);
		costs.u[i].t = NULL;
		costs.u[i].used = 0;
	}
	costs.conf = NULL;
}

void costs_add(uid_t uid, uint32_t fam, uint32_t alg, uint32_t nodes, uint32_t ppn, uint64_t bytes,
	       const struct cost_x *x, double gamma_ns, double beta_ns, double t_us)
{
	struct ucosts *u = costs.conf ? table_of(uid, 1) : NULL;

	if (!u || cost_table_add(u->t, fam, alg, nodes, ppn, bytes, x, gamma_ns, beta_ns, t_us, now_s()) < 0)
		return;
	u->dirty = 1;
	if (costs.conf->state_dir[0] && !costs.save_timer.armed)
		loop_timer_arm(&costs.save_timer, COSTS_SAVE_NS, save_fn, NULL);
}

/* The function a job of uid gets for (f, a), and whether it is root's. */
static const struct cost_fn *fn_for(const struct ucosts *u, const struct ucosts *root, uint32_t f, uint32_t a,
				    int *root_p)
{
	const struct cost_fn *fn = u ? &u->t->fn[f][a] : NULL;

	*root_p = 0;
	if (fn && (fn->tau_us > 0 || fn->tc_ns > 0))
		return fn;
	fn = root ? &root->t->fn[f][a] : NULL;
	*root_p = 1;
	return fn && (fn->tau_us > 0 || fn->tc_ns > 0) ? fn : NULL;
}

void costs_go(uid_t uid, struct wire_ctl_go_tail *t, struct wire_go_fn *fns)
{
	const struct ucosts *u, *root;

	memset(t, 0, sizeof(*t));
	for (uint32_t f = 0; f < CTL_FAMS; f++)
		t->force[f] = costs.conf->coll_force[f];
	root = table_of(0, 1);
	u = uid ? table_of(uid, 1) : root;
	if (root)
		cost_table_refit(root->t);
	if (u)
		cost_table_refit(u->t);
	for (uint32_t f = 0; f < CTL_FAMS; f++)
		for (uint32_t a = 0; a < ctl_fam_nalgs(f) && t->nfn < WIRE_GO_FNS_MAX; a++) {
			int from_root;
			const struct cost_fn *fn = fn_for(u, root, f, a, &from_root);

			if (!fn)
				continue;
			cost_fn_wire(fn, &fns[t->nfn].tau_ns, &fns[t->nfn].tc_ps);
			fns[t->nfn].fam = (uint8_t)f;
			fns[t->nfn].alg = (uint8_t)a;
			fns[t->nfn].reserved = 0;
			t->nfn++;
		}
}

void costs_write(FILE *out, uid_t uid)
{
	const struct ucosts *u = table_of(uid, 1), *root = table_of(0, 1);
	size_t n;
	char *text;

	if (!u) {
		fprintf(out, "# out of memory\n");
		return;
	}
	cost_table_refit(u->t);
	if (root)
		cost_table_refit(root->t);
	n = cost_table_format(u->t, NULL, 0);
	if (!(text = malloc(n + 1))) {
		fprintf(out, "# out of memory\n");
		return;
	}
	cost_table_format(u->t, text, n + 1);
	fputs(text, out);
	free(text);
	if (costs.conf->state_dir[0])
		fprintf(out, "# file %s/costs.%u\n", costs.conf->state_dir, (unsigned)uid);
	else
		fprintf(out, "# file: none (daemon.state_dir is \"\")\n");
	for (uint32_t f = 0; f < CTL_FAMS; f++)
		for (uint32_t a = 0; a < ctl_fam_nalgs(f); a++) {
			int from_root;
			const struct cost_fn *fn = fn_for(u, root, f, a, &from_root);

			if (fn)
				fprintf(out, "# fn %s %s tau_us %.3f tc_ns_per_byte %.5f points %u%s\n", ctl_fam_name(f),
					ctl_fam_algs(f)[a + 1], fn->tau_us, fn->tc_ns,
					cost_table_points(from_root ? root->t : u->t, f, a),
					from_root && uid ? " root's" : "");
		}
}
