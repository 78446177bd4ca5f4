/* daemon/plan/cost.c - see cost.h. */
#include "cost.h"

#include <assert.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void cost_features(cost_model_fn m, const void *ctx, uint32_t alg, struct cost_x *x_p)
{
	x_p->a = m(ctx, alg, 1, 0, 0);
	x_p->b = m(ctx, alg, 0, 1, 0);
	x_p->g = m(ctx, alg, 0, 0, 1);
}

static const struct cost_fn *fn_of(const struct cost *c, uint32_t alg)
{
	const struct cost_fn *f = c->fn && alg < CTL_FAM_ALGS_MAX ? &c->fn[alg] : NULL;

	return f && (f->tau_us > 0 || f->tc_ns > 0) ? f : NULL;
}

static uint32_t wire_units(double v)
{
	if (!(v > 0))
		return 0;
	if (v >= (double)UINT32_MAX)
		return UINT32_MAX;
	return v < 1 ? 1 : (uint32_t)(v + 0.5);
}

void cost_fn_wire(const struct cost_fn *f, uint32_t *tau_ns_p, uint32_t *tc_ps_p)
{
	*tau_ns_p = wire_units(f->tau_us * 1e3);
	*tc_ps_p = wire_units(f->tc_ns * 1e3);
}

void cost_fn_unwire(uint32_t tau_ns, uint32_t tc_ps, struct cost_fn *f_p)
{
	*f_p = (struct cost_fn){ tau_ns / 1e3, tc_ps / 1e3 };
}

int cost_fitted(const struct cost *c, uint32_t alg)
{
	return fn_of(c, alg) != NULL;
}

double cost_predict(const struct cost *c, cost_model_fn m, const void *ctx, uint32_t alg)
{
	const struct cost_fn *f = fn_of(c, alg);
	double t = m(ctx, alg, c->alpha_us, c->beta_ns, c->gamma_ns);
	struct cost_x x;

	if (!f || isinf(t))
		return t;
	cost_features(m, ctx, alg, &x);
	return f->tau_us * x.a + f->tc_ns * x.b + c->gamma_ns * x.g;
}

uint32_t cost_choose(const struct cost *c, cost_model_fn m, const void *ctx, uint32_t nalgs)
{
	uint32_t best = 0;
	double best_us = INFINITY;

	for (uint32_t alg = 0; alg < nalgs; alg++) {
		double t = cost_predict(c, m, ctx, alg);

		if (t < best_us) {
			best = alg;
			best_us = t;
		}
	}
	return best;
}

/* ---- the table ---- */

static_assert(CTL_FAMS * CTL_FAM_ALGS_MAX <= 64, "a bit per family and algorithm (cost_table_add's refit)");

void cost_table_init(struct cost_table *t)
{
	memset(t, 0, sizeof(*t));
}

/* (an insertion sort: at most COST_WINDOW times, and once per sample,
 * where qsort's calls cost the daemon a thousand instructions) */
static double median(const struct cost_point *p)
{
	double v[COST_WINDOW];

	for (uint32_t i = 0; i < p->nt; i++) {
		uint32_t k = i;

		while (k && v[k - 1] > p->t_us[i]) {
			v[k] = v[k - 1];
			k--;
		}
		v[k] = p->t_us[i];
	}
	return p->nt % 2 ? v[p->nt / 2] : (v[p->nt / 2 - 1] + v[p->nt / 2]) / 2;
}

static int usable(const struct cost_point *p, uint32_t fam, uint32_t alg)
{
	return p->used && p->fam == fam && p->alg == alg && p->nt >= COST_MIN_RUNS;
}

uint32_t cost_table_points(const struct cost_table *t, uint32_t fam, uint32_t alg)
{
	uint32_t n = 0;

	for (uint32_t i = 0; i < COST_POINTS; i++)
		n += usable(&t->pt[i], fam, alg);
	return n;
}

/* The weighted least squares of cost.h for one algorithm. */
static void fit(struct cost_table *t, uint32_t fam, uint32_t alg)
{
	double saa = 0, sab = 0, sbb = 0, say = 0, sby = 0, sw = 0, beta = 0, tau, tc, det;
	struct cost_fn *f = &t->fn[fam][alg];

	*f = (struct cost_fn){ 0, 0 };
	for (uint32_t i = 0; i < COST_POINTS; i++) {
		const struct cost_point *p = &t->pt[i];
		double m, y, w;

		if (!usable(p, fam, alg))
			continue;
		m = p->med;
		y = m - p->gamma_ns * p->x.g;
		if (y <= 0)
			continue;       /* (the reductions' part alone says more) */
		w = 1 / (m * m);
		saa += w * p->x.a * p->x.a;
		sab += w * p->x.a * p->x.b;
		sbb += w * p->x.b * p->x.b;
		say += w * p->x.a * y;
		sby += w * p->x.b * y;
		beta += w * p->beta_ns;
		sw += w;
	}
	if (sw == 0 || (saa == 0 && sbb == 0))
		return;
	beta /= sw;
	det = saa * sbb - sab * sab;
	if (saa > 0 && det <= 1e-3 * saa * sbb) {
		/* the points cannot tell τ from t_c: the links' β */
		tc = beta;
		tau = (say - tc * sab) / saa;
	} else if (saa == 0) {
		tau = 0;
		tc = sby / sbb;
	} else {
		tau = (sbb * say - sab * sby) / det;
		tc = (saa * sby - sab * say) / det;
	}
	if (tau < 0) {
		tau = 0;
		tc = sbb > 0 ? sby / sbb : 0;
	} else if (tc < 0) {
		tc = 0;
		tau = saa > 0 ? say / saa : 0;
	}
	if (!(tau >= 0 && tc >= 0 && isfinite(tau) && isfinite(tc)))
		return;
	*f = (struct cost_fn){ tau, tc };
}

void cost_table_fit_all(struct cost_table *t)
{
	t->refit = 0;
	for (uint32_t f = 0; f < CTL_FAMS; f++)
		for (uint32_t a = 0; a < ctl_fam_nalgs(f) && a < CTL_FAM_ALGS_MAX; a++)
			fit(t, f, a);
}

static int fam_alg_ok(uint32_t fam, uint32_t alg)
{
	return fam < CTL_FAMS && alg < ctl_fam_nalgs(fam) && alg < CTL_FAM_ALGS_MAX;
}

static int x_ok(const struct cost_x *x)
{
	return isfinite(x->a) && isfinite(x->b) && isfinite(x->g) && x->a >= 0 && x->b >= 0 && x->g >= 0;
}

/* The point of that key, else a free one, else the one measured longest
 * ago (emptied: its algorithm is marked in *refit_p). */
static struct cost_point *point(struct cost_table *t, uint32_t fam, uint32_t alg, uint32_t nodes, uint32_t ppn,
				uint64_t bytes, uint64_t *refit_p)
{
	struct cost_point *free_p = NULL, *old = NULL;

	for (uint32_t i = 0; i < COST_POINTS; i++) {
		struct cost_point *p = &t->pt[i];

		if (!p->used) {
			free_p = free_p ? free_p : p;
			continue;
		}
		if (p->fam == fam && p->alg == alg && p->nodes == nodes && p->ppn == ppn && p->bytes == bytes)
			return p;
		if (!old || p->stamp < old->stamp)
			old = p;
	}
	if (!free_p) {
		free_p = old;
		*refit_p |= 1ull << (free_p->fam * CTL_FAM_ALGS_MAX + free_p->alg);
		memset(free_p, 0, sizeof(*free_p));
	}
	*free_p = (struct cost_point){ .used = 1, .fam = (uint8_t)fam, .alg = (uint8_t)alg, .nodes = nodes,
				       .ppn = ppn, .bytes = bytes };
	return free_p;
}

static void push(struct cost_point *p, double t_us)
{
	p->t_us[p->next] = t_us;
	p->next = (uint8_t)((p->next + 1) % COST_WINDOW);
	if (p->nt < COST_WINDOW)
		p->nt++;
	p->med = median(p);
}

int cost_table_add(struct cost_table *t, uint32_t fam, uint32_t alg, uint32_t nodes, uint32_t ppn, uint64_t bytes,
		   const struct cost_x *x, double gamma_ns, double beta_ns, double t_us, uint64_t now_s)
{
	struct cost_point *p;
	uint64_t refit = 0;

	if (!fam_alg_ok(fam, alg) || !(t_us > 0 && isfinite(t_us)) || !x_ok(x) || !(gamma_ns >= 0) ||
	    !(beta_ns >= 0) || !isfinite(gamma_ns) || !isfinite(beta_ns))
		return -EINVAL;
	if (x->a == 0 && x->b == 0)
		return 0;       /* (one node: nothing of the network to fit) */
	p = point(t, fam, alg, nodes, ppn, bytes, &refit);
	p->x = *x;
	p->gamma_ns = gamma_ns;
	p->beta_ns = beta_ns;
	p->stamp = ++t->clock;
	p->seen_s = now_s;
	push(p, t_us);
	t->changes++;
	/* points not measured for COST_AGE_S go (looked for once a second) */
	for (uint32_t i = 0; now_s >= COST_AGE_S && now_s != t->aged_s && i < COST_POINTS; i++) {
		struct cost_point *q = &t->pt[i];

		if (q->used && q->seen_s <= now_s - COST_AGE_S) {
			refit |= 1ull << (q->fam * CTL_FAM_ALGS_MAX + q->alg);
			memset(q, 0, sizeof(*q));
		}
	}
	t->aged_s = now_s;
	t->refit |= refit | 1ull << (fam * CTL_FAM_ALGS_MAX + alg);
	return 0;
}

void cost_table_refit(struct cost_table *t)
{
	for (uint32_t f = 0; t->refit && f < CTL_FAMS; f++)
		for (uint32_t a = 0; a < CTL_FAM_ALGS_MAX; a++)
			if (t->refit >> (f * CTL_FAM_ALGS_MAX + a) & 1)
				fit(t, f, a);
	t->refit = 0;
}

/* ---- text ---- */

#define HEADER "ferry-costs 1"

size_t cost_table_format(const struct cost_table *t, char *buf, size_t cap)
{
	size_t n = 0;

#define OUT(...)                                                                                  \
	do {                                                                                      \
		int k_ = snprintf(n < cap ? buf + n : NULL, n < cap ? cap - n : 0, __VA_ARGS__); \
		n += k_ > 0 ? (size_t)k_ : 0;                                                     \
	} while (0)
	OUT("%s\n", HEADER);
	for (uint32_t i = 0; i < COST_POINTS; i++) {
		const struct cost_point *p = &t->pt[i];

		if (!p->used || !p->nt)
			continue;
		OUT("point %s %s %u %u %llu %.9g %.9g %.9g %.9g %.9g", ctl_fam_name(p->fam),
		    ctl_fam_algs(p->fam)[p->alg + 1], p->nodes, p->ppn, (unsigned long long)p->bytes, p->x.a, p->x.b,
		    p->x.g, p->gamma_ns, p->beta_ns);
		for (uint32_t k = 0; k < p->nt; k++)
			OUT(" %.9g", p->t_us[(p->next + COST_WINDOW - p->nt + k) % COST_WINDOW]);
		OUT("\n");
	}
#undef OUT
	return n;
}

static int num(const char *s, double *v_p)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (end == s || *end || errno || !isfinite(v) || v < 0)
		return -EINVAL;
	*v_p = v;
	return 0;
}

static int unum(const char *s, uint64_t max, uint64_t *v_p)
{
	char *end;
	unsigned long long v;

	if (*s < '0' || *s > '9')
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (end == s || *end || errno || v > max)
		return -EINVAL;
	*v_p = v;
	return 0;
}

#define FIELDS (11 + COST_WINDOW)

/* One point line (NUL-terminated, in a buffer of our own) into t, seen at
 * now_s. */
static int parse_point(struct cost_table *t, char *line, uint64_t now_s)
{
	char *f[FIELDS + 1], *save = NULL;
	uint32_t nf = 0;
	int fam = -1, alg;
	uint64_t nodes, ppn, bytes;
	struct cost_x x;
	double gamma, beta, times[COST_WINDOW];
	struct cost_point *p;
	uint64_t refit = 0;     /* (parse fits all at the end) */

	for (char *tok = strtok_r(line, " ", &save); tok; tok = strtok_r(NULL, " ", &save)) {
		if (nf == FIELDS)
			return -EINVAL;
		f[nf++] = tok;
	}
	if (nf < 12 || strcmp(f[0], "point") != 0)
		return -EINVAL;
	for (uint32_t k = 0; k < CTL_FAMS; k++)
		if (strcmp(f[1], ctl_fam_name(k)) == 0)
			fam = (int)k;
	if (fam < 0 || (alg = ctl_alg_by_name(ctl_fam_algs((uint32_t)fam), f[2]) - 1) < 0 ||
	    !fam_alg_ok((uint32_t)fam, (uint32_t)alg))
		return -EINVAL;
	if (unum(f[3], 1u << 20, &nodes) < 0 || !nodes || unum(f[4], 1u << 20, &ppn) < 0 || !ppn ||
	    unum(f[5], UINT64_MAX, &bytes) < 0 || num(f[6], &x.a) < 0 || num(f[7], &x.b) < 0 || num(f[8], &x.g) < 0 ||
	    num(f[9], &gamma) < 0 || num(f[10], &beta) < 0 || (x.a == 0 && x.b == 0))
		return -EINVAL;
	for (uint32_t k = 11; k < nf; k++)
		if (num(f[k], &times[k - 11]) < 0 || times[k - 11] <= 0)
			return -EINVAL;
	p = point(t, (uint32_t)fam, (uint32_t)alg, (uint32_t)nodes, (uint32_t)ppn, bytes, &refit);
	if (p->nt)
		return -EINVAL;         /* (a key twice) */
	p->x = x;
	p->gamma_ns = gamma;
	p->beta_ns = beta;
	p->stamp = ++t->clock;
	p->seen_s = now_s;
	for (uint32_t k = 11; k < nf; k++)
		push(p, times[k - 11]);
	return 0;
}

int cost_table_parse(struct cost_table *t, const char *text, size_t len, uint64_t now_s, char *err, size_t errlen)
{
	size_t at = 0;
	uint32_t lineno = 0;
	int bad = 0;

	cost_table_init(t);
	if (errlen)
		err[0] = 0;
	while (at < len) {
		const char *nl = memchr(text + at, '\n', len - at);
		size_t n = (nl ? (size_t)(nl - text) : len) - at;
		char line[512];

		lineno++;
		if (n < sizeof(line)) {
			memcpy(line, text + at, n);
			line[n] = 0;
		}
		at += n + (nl != NULL);
		if (lineno == 1) {
			if (n >= sizeof(line) || strcmp(line, HEADER) != 0) {
				snprintf(err, errlen, "line 1: not \"%s\"", HEADER);
				cost_table_init(t);
				return -EINVAL;
			}
			continue;
		}
		if (n == 0 || text[at - n - (nl != NULL)] == '#')
			continue;       /* (comments: ferryctl costs writes some) */
		if (n >= sizeof(line) || memchr(line, 0, n) || parse_point(t, line, now_s) < 0) {
			if (!bad++)
				snprintf(err, errlen, "line %u: not a valid point", lineno);
		}
	}
	if (!lineno) {
		snprintf(err, errlen, "empty");
		return -EINVAL;
	}
	cost_table_fit_all(t);
	t->changes = 0;
	return bad;
}
