/* daemon/plan/cost.h - the collectives' one cost module (DESIGN.md
 * "Choosing"): an algorithm's predicted time from the α–β(–γ) model its
 * planner gives, refined by a runtime function fitted to the times this
 * cluster measured (seed 004, Kühnemann, Rauber, Rünger, §4).  Pure code,
 * no I/O and no clock: the daemon feeds the table its measurements and
 * keeps its text (daemon/cluster/costs.c), ferryctl prints the predictions.
 *
 * The model.  Every planner writes an algorithm's time as a function of
 * α (µs per message), β (ns per byte sent) and γ (ns per byte reduced),
 * a sum of terms each a count times one of them along the critical path
 * (plan/orth.h, plan/rs.h, plan/a2a.h, plan/sg_sched.h): evaluated at
 * (1, 0, 0) it gives the start-ups x_a, at (0, 1, 0) the bytes x_b, at (0,
 * 0, 1) the reduced bytes x_g (where a planner takes a maximum over phases
 * or nodes, the one it takes at those points: an approximation).
 *
 * A runtime function, per family of collectives (enum ctl_fam) and
 * algorithm, is the paper's: T = τ x_a + t_c x_b (+ γ x_g, γ fixed), with
 * τ and t_c fitted by least squares to measured times, so that it
 * includes what the α–β model leaves out (the daemons' turns, the local
 * combination and hand-out, the client's post).  Where a family's
 * algorithm has one, its prediction is the function's; else the model's
 * with the links' α and β.  An algorithm never measured is thus predicted
 * from the links alone, lower than measured ones: the automatic choice
 * tries it, and its own times then refine it.  That optimism is how an
 * untried algorithm gets measured at all: weighing it instead with its
 * family's τ and t_c (the means of the measured ones') was tried, and a
 * job kept an allreduce of 1 MiB twice as slow as one never tried; a ratio
 * of the family's predictions carried small operations' overhead over to
 * large ones.  The price: the next jobs whose home has no points of an
 * algorithm at a size try it once.
 *
 * The fit.  The table keeps up to COST_POINTS points, each a (family,
 * algorithm, nodes, ranks per node, bytes) measured, its x_a, x_b, x_g,
 * and its last COST_WINDOW times; a point's time is their median (a late
 * rank or a busy host makes a time longer, not the operation slower).  The
 * least squares are weighted by 1 / time² (relative errors: the times span
 * microseconds to seconds) over the points with at least COST_MIN_RUNS
 * times.  If the points cannot tell τ from t_c (one point, or all with
 * nearly the same x_b / x_a), t_c is the links' β and τ alone is fitted;
 * a negative coefficient is set to 0 and the other fitted alone.  A point
 * not measured for the longest goes when a new one needs room, and one not
 * measured for COST_AGE_S seconds goes anyway (an algorithm that was slow
 * once is not predicted from that for ever: once its points are gone it
 * has no function, the links' model predicts it, and the automatic choice
 * tries it again; a point read from text counts as measured then).  Either
 * way its algorithm is refitted.  (Not an age in samples: one busy point
 * would make all others old.)
 */
#ifndef FERRY_PLAN_COST_H
#define FERRY_PLAN_COST_H

#include <stddef.h>
#include <stdint.h>

#include "../../proto/ctl.h"

#define COST_POINTS   256
#define COST_WINDOW   9
#define COST_MIN_RUNS 3
#define COST_AGE_S    86400u

/* A runtime function; tau_us and tc_ns both 0: none. */
struct cost_fn {
	double tau_us;          /* per start-up */
	double tc_ns;           /* per byte */
};

/* What a choice takes: the links' model, and the runtime functions of the
 * operation's family (fn[alg], NULL: none). */
struct cost {
	double alpha_us, beta_ns, gamma_ns;
	const struct cost_fn *fn;
};

/* An algorithm's model (a planner's predict function behind ctx): its time
 * in µs at α, β, γ, or INFINITY where the algorithm cannot run. */
typedef double (*cost_model_fn)(const void *ctx, uint32_t alg, double alpha_us, double beta_ns, double gamma_ns);

/* The model's start-ups, bytes and reduced bytes (above). */
struct cost_x {
	double a, b, g;
};
void cost_features(cost_model_fn m, const void *ctx, uint32_t alg, struct cost_x *x_p);

/* A function as GO carries it (proto/wire.h, wire_go_fn): τ in ns and t_c
 * in ps per byte, rounded, at least 1 where not 0, at most UINT32_MAX; and
 * back.  ferryctl plan --costs rounds the same way, so it predicts what the
 * daemons do. */
void cost_fn_wire(const struct cost_fn *f, uint32_t *tau_ns_p, uint32_t *tc_ps_p);
void cost_fn_unwire(uint32_t tau_ns, uint32_t tc_ps, struct cost_fn *f_p);

/* 1 if c has a runtime function for alg. */
int cost_fitted(const struct cost *c, uint32_t alg);

/* Algorithm alg's predicted time, µs: its runtime function's where c has
 * one, else the model's at c's α, β, γ; INFINITY where it cannot run. */
double cost_predict(const struct cost *c, cost_model_fn m, const void *ctx, uint32_t alg);

/* The algorithm of 0 .. nalgs - 1 with the smallest prediction (ties: the
 * lower), or 0 if none can run. */
uint32_t cost_choose(const struct cost *c, cost_model_fn m, const void *ctx, uint32_t nalgs);

/* A measured point (above). */
struct cost_point {
	uint8_t used;
	uint8_t fam, alg;
	uint8_t nt;             /* times kept, <= COST_WINDOW */
	uint8_t next;           /* where the next goes */
	uint32_t nodes, ppn;
	uint64_t bytes;
	struct cost_x x;
	double gamma_ns;        /* γ of the model it was measured with */
	double beta_ns;         /* ... and β (the fit's t_c when it cannot tell) */
	double t_us[COST_WINDOW];
	double med;             /* the median of t_us */
	uint64_t stamp;         /* when last measured (the table's clock) */
	uint64_t seen_s;        /* ... in the caller's seconds */
};

struct cost_table {
	struct cost_point pt[COST_POINTS];
	struct cost_fn fn[CTL_FAMS][CTL_FAM_ALGS_MAX];
	uint64_t clock;
	uint32_t changes;       /* times added since the caller last cleared it */
	uint64_t refit;         /* the algorithms (bit fam * CTL_FAM_ALGS_MAX + alg) whose fn[] is stale */
	uint64_t aged_s;        /* when points were last aged (cost_table_add) */
};

void cost_table_init(struct cost_table *t);

/* Adds a time t_us measured at now_s (seconds, any clock that moves
 * forward) for algorithm alg of family fam on nodes nodes with ppn ranks
 * per node (the most on a node), bytes bytes (the size the planner's model
 * takes).  Its algorithm's function, and those of points that went, are
 * refitted by cost_table_refit (a daemon adds a time per operation, and
 * reads the functions once per job).
 * -EINVAL for a family or algorithm there is not, or a time that is not
 * a positive finite number, or features that are not finite. */
int cost_table_add(struct cost_table *t, uint32_t fam, uint32_t alg, uint32_t nodes, uint32_t ppn, uint64_t bytes,
		   const struct cost_x *x, double gamma_ns, double beta_ns, double t_us, uint64_t now_s);

/* Refits every function from the points. */
void cost_table_fit_all(struct cost_table *t);
/* Refits the functions cost_table_add left stale: call before reading fn[]. */
void cost_table_refit(struct cost_table *t);

/* The points with at least COST_MIN_RUNS times of family fam and algorithm
 * alg. */
uint32_t cost_table_points(const struct cost_table *t, uint32_t fam, uint32_t alg);

/* The table as text, one line per point:
 *   point FAMILY ALGORITHM NODES PPN BYTES XA XB XG GAMMA BETA T...
 * (names as proto/ctl.h's tables, numbers in C's formats, times oldest
 * first), after a first line "ferry-costs 1".  Returns the length it needs
 * (as snprintf: the text is cut if cap is smaller). */
size_t cost_table_format(const struct cost_table *t, char *buf, size_t cap);

/* Reads such text into t (initialized first) and fits; empty lines and
 * lines that begin with '#' are comments.  A line that is not a valid
 * point is skipped and counted; returns the count (0: all were read), or
 * -EINVAL if the first line is not the header.  What line went wrong
 * first is in err. */
int cost_table_parse(struct cost_table *t, const char *text, size_t len, uint64_t now_s, char *err, size_t errlen);

#endif
