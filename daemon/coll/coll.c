/* daemon/coll/coll.c - see coll.h.
 *
 * Ownership (coll.h): cjobs in one list, each holding its job; a cjob owns
 * its groups (struct cgrp: the job's own first, then ferry_split's), a
 * split group holds its parent (the parent stays while it has children);
 * an operation (struct cop) belongs to its group's list, ordered by number,
 * holds a reference to its plan (struct cplan, which the group may keep,
 * up to COLL_PLANS of them, for the operations to come: a reference too;
 * a plan owns its steps and its executor's template), and owns its
 * executor and the early pieces waiting for it.  Operations and groups end from coll_poll, which tells the ranks
 * and frees them; events (a post, a piece, a BREAK) only mark and queue.
 */
#include "coll.h"

#include "exec.h"
#include "../cluster/costs.h"
#include "../cluster/cluster.h"
#include "../core/log.h"
#include "../core/loop.h"
#include "../fwd/ctlq.h"
#include "../local/endpoint.h"
#include "../local/job.h"
#include "../local/mem.h"
#include "../local/user.h"
#include "../plan/a2a.h"
#include "../plan/orth.h"
#include "../plan/rs.h"
#include "../plan/scatter.h"
#include "../plan/sg_sched.h"
#include "../core/conf.h"
#include "../local/session.h"
#include "../plan/barrier.h"
#include "../plan/sched.h"
#include "../../proto/coll.h"
#include "../../proto/wire.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* What one operation may hold (streams, scratch) on this node. */
#define COLL_OP_MEM_MAX (256ull << 20)
/* Operations of one job this node keeps at once (running, waiting for its
 * ranks, or for pieces that came early).  libferry lets a rank have
 * FERRY_COLL_MAX_PENDING (64) requests at once, which bounds them at twice
 * that between the ranks here and those of the nodes ahead (coll.h); a
 * client that posts beyond loses its session, a node whose pieces would go
 * beyond fails the job. */
#define COLL_MAX_OPS 256
/* ... and of all its groups together (a client has at most
 * COLL_EP_PENDING operations posted and not answered, the nodes ahead
 * bring the rest). */
#define COLL_MAX_JOB_OPS 4096
#define COLL_EP_PENDING 64      /* FERRY_COLL_MAX_PENDING */
/* Groups of one job this node keeps at once (the job's and ferry_split's). */
#define COLL_MAX_GROUPS 1024
/* A job whose ranks here all left keeps running the operations this node
 * started, for the other nodes, at most this long (then they end: nobody
 * here waits for them, and the job's state is freed). */
#define COLL_GONE_GRACE_NS (10ull * 1000000000u)
/* Bytes the executors copy at most in one turn of the loop (about a
 * millisecond's worth): a large local block goes in slices, and the loop
 * serves links, clients and other jobs in between. */
#define COLL_TURN_BYTES (4u << 20)
/* Pieces of one job that may wait for the job to start here (coll.pre). */
#define COLL_PRE_MAX 4096
/* How long the loop keeps spinning after the last collective work, while an
 * operation is under way and every rank here runs on other CPUs than
 * ferryd (core specialisation: the core is ferryd's, and a sleep and a
 * wake-up cost tens of microseconds per event; libferry's ferry_wait spins
 * as long for the same reason, COLL_SPIN_US in client/coll.c).  A user
 * who keeps an operation open and posts others every 2 ms keeps ferryd
 * spinning on its own CPUs, no one else's.  It pays even where several
 * daemons share one core (the benchmarks' pinned layout: 8 on CPU 1, each
 * yielding to the others between turns): an 8-byte allreduce over 8 x 2
 * took 133-151 us with it and 198-221 us without it (and spin_us = 0),
 * 162 against 210 us sharing the cores (A/B on a quiet machine,
 * 2026-11-28): a sleep and a wake-up cost more than the yields. */
#define COLL_SPIN_NS (2000ull * 1000u)
/* Plans a group keeps for the operations to come (struct cplan): an
 * application alternating a few operations (an allreduce of 8 bytes, a
 * bcast, a barrier) plans each once.  Planning an allgather over 8 nodes
 * took a third of the daemon's instructions of an 8-byte operation
 * (callgrind, make bench-red's case). */
#define COLL_PLANS 4
/* Runtime functions ("Runtime functions" below): the operations of a group
 * whose time a rank may still report, and how much longer than the
 * daemon's own a rank's time may be. */
#define COLL_RECENT 8
#define COLL_REPORT_SLACK_NS (1000ull * 1000u)

/* Holding back ("Holding back" below): once a job's early pieces take this
 * much, the nodes that send more are told to hold back ... */
#ifndef COLL_HOLD_BYTES                 /* (fuzz_session: far less, to get there) */
#define COLL_HOLD_BYTES (8u << 20)
#endif
/* ... and once they take no more than this, to go on. */
#ifndef COLL_RESUME_BYTES
#define COLL_RESUME_BYTES (2u << 20)
#endif
static_assert(COLL_HOLD_BYTES < COLL_EARLY_MAX / 4, "room for what is on its way when a HOLD leaves");

struct early {
	struct early *next;
	struct wire_coll_piece h;
	uint32_t from;                  /* the node it came from */
	uint32_t len;
	uint8_t data[];
};

/* What an early piece of n stream bytes takes (and is charged). */
static uint64_t early_cost(uint32_t n)
{
	return sizeof(struct early) + (uint64_t)n + 1;
}

/* A piece for a job this node has not seen start yet (its GO is still on
 * its way while another node's ranks already post): kept as it came, in
 * order, until the job is ready here (coll_poll) or gone. */
struct pre {
	struct pre *next;
	uint32_t from, len;
	struct job *j;                  /* held */
	uint8_t payload[];
};

struct cjob;
struct cgrp;

/* This node's part of an operation's schedule.  The planners are pure, so
 * the operations of a group that post the same kind, block size and
 * algorithm have the same steps: a group keeps its last plan and lends it
 * to each such operation (an all-to-allv, whose counts are the ranks' own,
 * gets one of its own).  Read-only once built; freed with its last
 * reference (the group's, the operations'). */
struct cplan {
	uint32_t refs;
	uint32_t kind, strategy, red, root;     /* as posted */
	uint64_t count;
	uint64_t used;                  /* the group's plan_tick when an operation last took it */
	uint32_t agree;                 /* its tag (op->agree) */
	struct sched s;                 /* node me's part only */
	const char *alg;                /* the algorithm it runs */
	int strat;                      /* ... as an enum a2a_strategy, or -1 (not an all-to-all) */
	/* ... and what the runtime functions learn when an operation on it
	 * completes (plan_measure; measure 0: nothing) */
	int measure, fam;
	uint32_t fam_alg;
	uint64_t model_bytes;
	struct cost_x x;
	struct user *user;              /* charged this much for the steps (given back when freed) */
	uint64_t charged;
	struct coll_exec_tmpl *tmpl;    /* what its runs start from (a plan kept: plan_keep) */
};

/* What one local rank posted for an operation: its buffers (their regions
 * held while the operation lasts). */
struct cslot {
	int posted;
	struct mem *sm, *rm;
	uint8_t *sp, *rp;
	uint64_t slen, rlen;
	uint64_t *vec;                  /* all-to-allv: its counts and displacements, copied (4 x size);
					 * scatterv, gatherv at the root: 2 x size */
	uint64_t vlen;                  /* bytes of vec */
	uint64_t count;                 /* rooted kinds: the bytes the rank receives (scatter) or
					 * sends (gather): its count, or the block */
	/* A split: sp and rp point into own, the daemon's (2 x 8 x size:
	 * the rank's {color, key} for every rank, then the table received),
	 * and the client's receive buffer gets the table once the split
	 * completed here (split_groups). */
	uint8_t *own;
	uint8_t *crp;
};

struct cop {
	struct cop *next;
	struct cgrp *g;
	uint32_t seq;
	uint32_t kind;                  /* enum ctl_coll_kind; 0 until a local rank posted it */
	uint32_t piece_kind;            /* the kind the first piece named; 0 before one came */
	uint32_t piece_root;            /* ... and the root it named (the rooted kinds) */
	uint32_t posted;                /* local ranks that posted it */
	uint64_t count;                 /* the kind's count (all-to-all: bytes per block) */
	uint32_t strategy;              /* as posted: 0 automatic, else the algorithm + 1 */
	uint32_t root;                  /* rooted kinds: the root's rank in the group */
	uint32_t rooted;                /* ... and the algorithm (enum ctl_rooted_alg) */
	int in_place;                   /* ... and the root posted CTL_COLL_IN_PLACE */
	uint32_t red;                   /* the reductions: the type and operation (COLL flags' bits) */
	uint32_t agree;                 /* bcast .. exscan: 1..255, its plan's tag; all-to-alls: the strategy + 1 (op_tag) */
	struct cslot *slots;            /* [g->nlocal], by slot */
	uint8_t **sp, **rp;             /* [nlocal]: the schedule's buffers (mem; op_mem) */
	uint64_t *slen, *rlen;
	uint64_t *counts, *displs;      /* all-to-all: [size], the same for every rank */
	int started, ended, told;
	int err;                        /* positive errno once ended badly */
	char why[CTL_ERRTEXT_MAX + 1];
	struct cplan *plan;             /* held */
	struct sched_mem mem;
	struct coll_exec *x;
	struct early *early, **early_tail;
	uint64_t start_ns, ns;
	const char *alg;                /* the algorithm that ran */
	uint64_t charged;               /* its arrays and executor's tables, against its user */
};

/* A group of the job's ranks whose collectives this node takes part in:
 * the whole job (id 0, always first in its cjob's list) or one that a split
 * made (see "Groups" below).  Its ranks are numbered 0..size-1; its nodes
 * (those hosting its ranks) 0..G-1 in the order of their ids; a local
 * member's slot is its place among the members on this node. */
struct cgrp {
	struct cgrp *next, **pprev;     /* in its cjob's groups */
	struct cgrp *busy_next;         /* in its cjob's busy list, while busy */
	int busy;
	struct cjob *cj;
	uint32_t id;
	uint32_t size;
	uint32_t *members;              /* [size]: job rank by rank in the group; NULL: the job (identity) */
	uint32_t *nodes, G, me;         /* its nodes by id; this node's index */
	uint32_t nlocal;                /* its ranks on this node (left or not) */
	uint32_t *node_first, *rank_at; /* [G + 1], [size]: ranks by node index (a2a_layout) */
	uint32_t *posted;               /* [nlocal]: the last operation each local rank posted */
	uint8_t *left;                  /* [nlocal]: 1 left the group, 2 ... and the group's nodes were told */
	struct cop *ops;
	uint32_t nops;                  /* in ops */
	uint32_t started;               /* operations started here (the job: j->coll_started) */
	/* A split group is broken (its nodes sent or got a BREAK): its
	 * operations after ok fail with broken (an errno) and why. */
	int broken;
	uint32_t ok;
	char why[CTL_ERRTEXT_MAX + 1];
	uint64_t mem;                   /* user memory its arrays take (split groups) */
	/* A split group's parent (held: a parent stays while it has children
	 * here, so that its failure reaches them, grp_doomed) and the parent's
	 * operation that made it. */
	struct cgrp *parent;
	uint32_t split_seq;
	uint32_t children;
	/* The plans of its last operations (plan_keep), held (struct cplan):
	 * an operation like one of them runs on it, unplanned, and the least
	 * recently used one goes when a new one needs the room. */
	struct cplan *plans[COLL_PLANS];
	uint64_t plan_tick;
	/* Holding back: the nodes (by index) this node told to hold back
	 * pieces of operations from hold_from on ([G], allocated at the
	 * first; ntold of them), and what the others told this node ([G]:
	 * 0, or the first operation whose pieces for that node wait here). */
	uint8_t *told;
	uint32_t ntold, hold_from;
	uint32_t *hold;
	/* Its last operations that ended well here, by seq % COLL_RECENT,
	 * until a local rank reports its time of one (coll_report). */
	struct crecent {
		uint32_t seq;           /* 0: none */
		int fam;
		uint32_t alg;
		uint64_t bytes;
		struct cost_x x;
		uint64_t ns;            /* its time here, from cop_start to cop_end */
	} recent[COLL_RECENT];
	/* The last choice plan_orth made (valid 0: none), for the next
	 * operation of the same kind, size, type and strategy: a choice is a
	 * function of those and of the job's α, β and functions, fixed at GO,
	 * so it is the same again, and weighing every algorithm and layout
	 * each time cost the daemons' core tens of microseconds an operation
	 * (make bench-red). */
	struct {
		int valid;
		uint32_t kind, strategy, red;
		uint64_t count;
		enum orth_alg alg;
		struct orth_dims grid;
		struct cost_x x;
	} pick;
};

/* The ids of a job's split groups that ended here, so that a late piece
 * for one is dropped rather than kept for a group to come. */
#define COLL_FREED_IDS 1024

struct cjob {
	struct cjob *next;
	struct job *j;                  /* held */
	struct cgrp *groups;            /* the job's first */
	/* The groups coll_poll looks at in its next turn (grp_busy): those
	 * with operations, and those something happened to (a rank here
	 * left, a child group went).  An idle group costs no turn anything
	 * (a user with thousands of them slowed every other user's
	 * collectives when each turn looked at all: review of issue 12). */
	struct cgrp *busy;
	uint32_t eps_seen;              /* j->eps_gone when its groups' leaves were looked at */
	uint32_t ngroups;
	uint32_t nops;                  /* operations of all its groups */
	struct early *gearly, **gearly_tail; /* pieces for split groups not made here yet */
	uint32_t freed[COLL_FREED_IDS], nfreed;
	uint64_t gone_ns;               /* when its last rank here left, 0 while it has ranks here */
	uint64_t early_bytes;           /* in operations' early lists and gearly */
	uint64_t early_max;             /* ... the most at once */
	uint64_t ops_run, ops_failed, last_us;
	uint64_t link_waits;            /* pieces a full link made wait (send_piece) */
	uint64_t hold_waits;            /* ... and pieces another node's HOLD made wait */
	uint64_t holds_sent;            /* HOLDs this node sent (to hold back, or to move the first) */
	uint32_t ntold;                 /* its groups' ntold together */
	uint64_t groups_polled;         /* groups coll_poll looked at (busy ones: struct cjob) */
	uint64_t chosen[A2A_STRATEGIES]; /* all-to-alls by algorithm (forced or chosen) */
	uint64_t rooted[CTL_ROOTED_ALGS];       /* scatters and gathers by algorithm */
	uint32_t last_kind;
	const char *last_alg;
};

static struct {
	const struct conf *conf;
	uint32_t self;
	struct cjob *jobs;
	int work;                       /* something to do at the next coll_poll */
	uint64_t worked_ns;             /* when a coll_poll last had work */
	uint64_t budget;                /* bytes the executors may still copy in this turn of the loop */
	struct loop_timer gone_timer;   /* a job without ranks here may have to be ended */
	struct pre *pre, **pre_tail;    /* pieces of jobs not ready here yet, in order */
	uint8_t piece[WIRE_COLL_PIECE_MAX];     /* a piece of many parts, gathered (send_piece) */
	uint64_t rooted[CTL_ROOTED_ALGS];       /* scatters and gathers by algorithm, all jobs */
	uint64_t gathers[CTL_ROOTED_ALGS];      /* ... the gathers among them */
	uint64_t reports;               /* samples of the runtime functions made (coll_report) */
	uint64_t reports_own;           /* ... of them the daemon's own time (a rank's was not plausible) */
	/* The last torus scatter's paths (rooted_paths), valid for the
	 * operation being planned. */
	struct {
		int valid;
		uint32_t root, nodes;
		enum scatter_algo algo;
		uint32_t *first, *hop, *order;
		struct sg_paths paths;
		struct scatter_plan base[2];    /* from node 0, by enum scatter_algo (nodes 0: none) */
		uint32_t relay[2];              /* ... and its scatter_relay_max */
	} torus;
} coll;

static const char *kind_name(uint32_t kind)
{
	const char *n = ctl_coll_kind_name(kind & WIRE_COLL_KIND_MAX);

	return n ? n : "?";
}

/* --- jobs and groups --- */

static int node_cmp(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

static uint32_t grp_job_rank(const struct cgrp *g, uint32_t r)
{
	return g->members ? g->members[r] : r;
}

/* The group's ranks on this node, by slot (g->nlocal of them). */
static const uint32_t *grp_local(const struct cgrp *g)
{
	return g->rank_at + g->node_first[g->me];
}

/* The slot of job rank r among g's local ranks, or -1. */
static int grp_slot(const struct cgrp *g, uint32_t r)
{
	for (uint32_t k = 0; k < g->nlocal; k++)
		if (grp_job_rank(g, grp_local(g)[k]) == r)
			return (int)k;
	return -1;
}

/* The group's nodes, sorted (index = the node's number in schedules), and
 * its ranks by node, in rank order within a node: the planners' layout, and
 * a local rank's slot.  From the job's layout at GO. */
static int grp_layout(struct cgrp *g)
{
	const struct job *j = g->cj->j;
	uint32_t n = 0, size = g->size;
	uint32_t *fill = NULL, *idx = NULL;
	int ret = -ENOMEM;

	g->nodes = malloc(((size_t)size + 1) * sizeof(*g->nodes));
	g->node_first = calloc((size_t)size + 2, sizeof(*g->node_first));
	g->rank_at = calloc((size_t)size + 1, sizeof(*g->rank_at));
	fill = calloc((size_t)size + 1, sizeof(*fill));
	idx = calloc((size_t)size + 1, sizeof(*idx));
	if (!j->layout || !g->nodes || !g->node_first || !g->rank_at || !fill || !idx)
		goto out;
	ret = -ENOENT;
	for (uint32_t r = 0; r < size; r++)
		if (j->layout[grp_job_rank(g, r)] != JOB_NO_NODE)
			g->nodes[n++] = j->layout[grp_job_rank(g, r)];
	qsort(g->nodes, n, sizeof(*g->nodes), node_cmp);
	g->G = 0;
	for (uint32_t i = 0; i < n; i++)
		if (!g->G || g->nodes[g->G - 1] != g->nodes[i])
			g->nodes[g->G++] = g->nodes[i];
	for (g->me = 0; g->me < g->G && g->nodes[g->me] != coll.self; g->me++)
		;
	if (g->me == g->G)
		goto out;
	for (uint32_t r = 0; r < size; r++) {
		uint32_t *at = bsearch(&j->layout[grp_job_rank(g, r)], g->nodes, g->G, sizeof(*g->nodes), node_cmp);

		if (!at)
			goto out;       /* a rank on no node: the table is not whole */
		idx[r] = (uint32_t)(at - g->nodes);
		g->node_first[idx[r] + 1]++;
	}
	for (uint32_t i = 0; i < g->G; i++)
		g->node_first[i + 1] += g->node_first[i];
	for (uint32_t r = 0; r < size; r++) {
		g->rank_at[g->node_first[idx[r]] + fill[idx[r]]++] = r;
	}
	g->nlocal = g->node_first[g->me + 1] - g->node_first[g->me];
	g->posted = calloc((size_t)g->nlocal + 1, sizeof(*g->posted));
	g->left = calloc((size_t)g->nlocal + 1, 1);
	ret = g->posted && g->left ? 0 : -ENOMEM;
out:
	free(fill);
	free(idx);
	return ret;
}

/* What a split group's state takes of its user's memory. */
static uint64_t grp_bytes(uint32_t size)
{
	return sizeof(struct cgrp) + 18ull * size + 64;
}

static void plan_put(struct cplan *pl)
{
	if (!pl || --pl->refs)
		return;
	if (pl->charged)
		user_give_coll(pl->user, pl->charged);
	coll_exec_tmpl_free(pl->tmpl);
	sched_free(&pl->s);
	free(pl);
}

static void grp_free(struct cgrp *g)
{
	if (!g)
		return;
	for (int k = 0; k < COLL_PLANS; k++)
		plan_put(g->plans[k]);
	if (g->mem)
		user_give_coll(g->cj->j->user, g->mem);
	free(g->members);
	free(g->nodes);
	free(g->node_first);
	free(g->rank_at);
	free(g->posted);
	free(g->left);
	free(g->told);
	free(g->hold);
	free(g);
}

/* g is looked at in coll_poll's next turn (struct cjob's busy).  It does
 * not make that turn come sooner: what happened (a post, a piece, a leave)
 * woke the loop already. */
static void grp_busy(struct cgrp *g)
{
	if (g->busy)
		return;
	g->busy = 1;
	g->busy_next = g->cj->busy;
	g->cj->busy = g;
}

static struct cgrp *grp_find(const struct cjob *cj, uint32_t id)
{
	for (struct cgrp *g = cj->groups; g; g = g->next)
		if (g->id == id)
			return g;
	return NULL;
}

static struct cjob *cjob_find(const struct job *j)
{
	for (struct cjob *cj = coll.jobs; cj; cj = cj->next)
		if (cj->j == j)
			return cj;
	return NULL;
}

/* By the id pieces carry: also a job whose ranks here all left (job_by_id
 * no longer finds it), whose started operations this node runs to the end
 * for the others. */
static struct cjob *cjob_by_id(uint32_t id, uint32_t gen)
{
	for (struct cjob *cj = coll.jobs; cj; cj = cj->next)
		if (cj->j->id == id && cj->j->gen == gen && !cj->j->stale)
			return cj;
	return NULL;
}

/* The job's collective state, made at its first operation or piece (the
 * job is ready: its rank table is whole). */
static struct cjob *cjob_get(struct job *j)
{
	struct cjob *cj = cjob_find(j);
	struct cgrp *g;

	if (cj)
		return cj;
	if (!j->ready)
		return NULL;
	cj = calloc(1, sizeof(*cj));
	g = calloc(1, sizeof(*g));
	if (!cj || !g) {
		free(cj);
		free(g);
		return NULL;
	}
	cj->j = j;
	cj->gearly_tail = &cj->gearly;
	g->cj = cj;
	g->size = j->size;
	if (grp_layout(g) < 0) {
		grp_free(g);
		free(cj);
		return NULL;
	}
	cj->groups = g;
	g->pprev = &cj->groups;
	cj->ngroups = 1;
	cj->eps_seen = j->eps_gone;
	job_hold(j);
	cj->next = coll.jobs;
	coll.jobs = cj;
	return cj;
}

static void cop_free(struct cop *op)
{
	struct cgrp *g = op->g;
	struct job *j = g->cj->j;

	for (uint32_t i = 0; op->slots && i < g->nlocal; i++) {
		mem_put(op->slots[i].sm);
		mem_put(op->slots[i].rm);
		if (op->slots[i].vec) {
			user_give_coll(j->user, op->slots[i].vlen);
			free(op->slots[i].vec);
		}
		if (op->slots[i].own) {
			user_give_coll(j->user, 16ull * g->size);
			free(op->slots[i].own);
		}
	}
	free(op->slots);
	free(op->sp);                   /* (and rp, slen, rlen: op_mem) */
	free(op->counts);
	free(op->displs);
	while (op->early) {
		struct early *e = op->early;

		op->early = e->next;
		g->cj->early_bytes -= early_cost(e->len);
		user_give_coll(j->user, early_cost(e->len));
		free(e);
	}
	coll_exec_free(op->x);
	plan_put(op->plan);
	user_give_coll(j->user, op->charged);
	g->cj->nops--;
	user_give_coll(j->user, sizeof(*op));
	free(op);
}

/* Operation seq of g, made if it is not there and make says so.  An
 * operation is not made again once it ended and went: operations start here
 * in order, so one at or below the last started (g->started) that is not in
 * the list has gone.  NULL also when g holds COLL_MAX_OPS (*full_p set) or
 * memory is short. */
static struct cop *cop_get(struct cgrp *g, uint32_t seq, int make, int *full_p)
{
	struct cop **pp = &g->ops, *op;

	while (*pp && (*pp)->seq < seq)
		pp = &(*pp)->next;
	if (*pp && (*pp)->seq == seq)
		return *pp;
	if (!make || seq <= g->started)
		return NULL;
	if (g->nops >= COLL_MAX_OPS || g->cj->nops >= COLL_MAX_JOB_OPS) {
		if (full_p)
			*full_p = 1;
		return NULL;
	}
	/* its memory is its user's, like the rest of the operation's */
	if (user_take_coll(g->cj->j->user, sizeof(*op)) < 0)
		return NULL;
	op = calloc(1, sizeof(*op));
	if (!op) {
		user_give_coll(g->cj->j->user, sizeof(*op));
		return NULL;
	}
	g->nops++;
	g->cj->nops++;
	grp_busy(g);
	op->g = g;
	op->seq = seq;
	op->early_tail = &op->early;
	op->next = *pp;
	*pp = op;
	return op;
}

/* The operation ends (once): err 0, or a positive errno and why. */
static void op_measured(const struct cop *op);

static void cop_end(struct cop *op, int err, const char *why)
{
	if (op->ended)
		return;
	op->ended = 1;
	op->err = err;
	op->ns = loop_now_ns() - (op->start_ns ? op->start_ns : loop_now_ns());
	if (!err)
		op->why[0] = '\0';
	else if (why != op->why)
		snprintf(op->why, sizeof(op->why), "%s", why);
	op_measured(op);
	coll.work = 1;
}

/* A piece named kind `theirs` for op, whose ranks here posted (or whose
 * earlier pieces named) `ours`: the ranks posted different operations. */
static void kind_mismatch(struct cop *op, uint32_t theirs, uint32_t ours)
{
	char why[CTL_ERRTEXT_MAX + 1];

	if ((theirs & WIRE_COLL_KIND_MAX) == (ours & WIRE_COLL_KIND_MAX))
		snprintf(why, sizeof(why), "the ranks posted %s of different types or operations (type %u op %u on "
			 "some, type %u op %u on others)", kind_name(ours), CTL_COLL_TYPE(theirs), CTL_COLL_OP(theirs),
			 CTL_COLL_TYPE(ours), CTL_COLL_OP(ours));
	else
		snprintf(why, sizeof(why), "the ranks posted different operations: %s on some, %s on others",
			 kind_name(theirs), kind_name(ours));
	cop_end(op, EINVAL, why);
}

/* A piece from node `from` named root `theirs` for op, whose ranks here
 * named (or whose earlier pieces named) `ours`. */
static void root_mismatch(struct cop *op, uint32_t from, uint32_t theirs, uint32_t ours)
{
	char why[CTL_ERRTEXT_MAX + 1];

	if (from == UINT32_MAX)
		snprintf(why, sizeof(why), "the ranks named different roots: %u on another node, %u on node %u", theirs,
			 ours, coll.self);
	else
		snprintf(why, sizeof(why), "the ranks named different roots: %u on node %u, %u on node %u", theirs,
			 from, ours, coll.self);
	cop_end(op, EINVAL, why);
}

/* The rooted kinds' algorithms' names (enum ctl_rooted_alg). */
static const char *rooted_name(uint32_t alg)
{
	return alg < CTL_ROOTED_ALGS ? ctl_rooted_algs[alg + 1] : "?";
}

/* A piece from node `from` (UINT32_MAX: one that came before) said its node
 * runs algorithm `theirs` - 1 for op, whose node runs `ours` - 1: nodes
 * that run different schedules could wait for each other for ever (their
 * messages may well match), so it fails. */
static void alg_mismatch(struct cop *op, uint32_t from, uint32_t theirs, uint32_t ours)
{
	char why[CTL_ERRTEXT_MAX + 1];

	if (from == UINT32_MAX)
		snprintf(why, sizeof(why), "the ranks chose different algorithms: %s on another node, %s on node %u",
			 rooted_name(theirs - 1), rooted_name(ours - 1), coll.self);
	else
		snprintf(why, sizeof(why), "the ranks chose different algorithms: %s on node %u, %s on node %u",
			 rooted_name(theirs - 1), from, rooted_name(ours - 1), coll.self);
	cop_end(op, EINVAL, why);
}

/* What a piece of op says of the plan its node runs, above the root
 * (WIRE_COLL_ALG_SHIFT): the rooted kinds' algorithm + 1, the phased
 * kinds' plan tag, the all-to-alls' strategy + 1; 0 for a barrier (its
 * plan depends on nothing the ranks may disagree on). */
static uint32_t op_tag(const struct cop *op)
{
	return ctl_coll_rooted(op->kind) ? op->rooted + 1 : op->agree;
}

/* A piece from node `from` (UINT32_MAX: one that came before) named plan
 * tag `theirs` for op of a phased kind, whose node runs `ours`. */
static void tag_mismatch(struct cop *op, uint32_t from, uint32_t theirs, uint32_t ours)
{
	char why[CTL_ERRTEXT_MAX + 1], where[32] = "another node";

	if (from != UINT32_MAX)
		snprintf(where, sizeof(where), "node %u", from);
	snprintf(why, sizeof(why), "the ranks forced different algorithms or passed different counts: the nodes' "
		 "plans differ (tag %u on %s, %u on node %u)", theirs, where, ours, coll.self);
	cop_end(op, EINVAL, why);
}

static const char *a2a_name(uint32_t tag)
{
	return tag && tag <= A2A_STRATEGIES ? a2a_strategy_name((enum a2a_strategy)(tag - 1)) : "?";
}

/* ... or of op of kind k (the kind posted or named: op->kind may be 0 yet),
 * whichever family it is. */
static void plan_mismatch(struct cop *op, uint32_t k, uint32_t from, uint32_t theirs, uint32_t ours)
{
	char why[CTL_ERRTEXT_MAX + 1], where[32] = "another node";

	if (ctl_coll_rooted(k)) {
		alg_mismatch(op, from, theirs, ours);
		return;
	}
	if (k == CTL_COLL_ALLTOALL || k == CTL_COLL_ALLTOALLV || k == CTL_COLL_SPLIT) {
		if (from != UINT32_MAX)
			snprintf(where, sizeof(where), "node %u", from);
		snprintf(why, sizeof(why), "the nodes' all-to-all strategies differ: %s on %s, %s on node %u (forced "
			 "differently, or blocks of different sizes)", a2a_name(theirs), where, a2a_name(ours), coll.self);
		cop_end(op, EINVAL, why);
		return;
	}
	tag_mismatch(op, from, theirs, ours);   /* (the phased kinds; a barrier's, always 0) */
}

/* --- sending --- */

/* The most parts of a piece: its header, and the executor's parts (a
 * SEND's segments and its head; more than this many are copied together
 * first). */
#define PIECE_IOV 64

static int send_piece(void *ctx, uint32_t peer, const struct wire_coll_piece *h, const struct iovec *iov, int niov,
		      uint32_t len)
{
	struct cop *op = ctx;
	struct cgrp *g = op->g;
	const struct job *j = g->cj->j;
	struct wire_coll_piece named = *h;
	uint8_t head[sizeof(*h)];
	struct iovec v[PIECE_IOV];
	int nv = 1, ret;

	if (peer >= g->G)
		return -EINVAL;
	if (g->hold && g->hold[peer] && op->seq >= g->hold[peer]) {
		/* that node asked to wait: it has not started this operation
		 * and holds enough early pieces (again at a later turn) */
		g->cj->hold_waits++;
		return -EAGAIN;
	}
	named.kind = op->kind | op->red;
	named.root = (ctl_coll_has_root(op->kind) ? op->root : 0) | op_tag(op) << WIRE_COLL_ALG_SHIFT;
	wire_coll_piece_encode(head, &named);
	v[0] = (struct iovec){ head, sizeof(head) };
	if (niov < PIECE_IOV) {
		memcpy(v + 1, iov, (size_t)niov * sizeof(*iov));
		nv += niov;
	} else {
		/* many small parts (an indirect strategy's blocks): one copy */
		coll_iov_copy(coll.piece, iov, niov);
		v[nv++] = (struct iovec){ coll.piece, len };
	}
	/* As an item of the job, under its links' limits: -EAGAIN when the
	 * link is full, and the executor sends it again at a later turn of
	 * the loop (coll_poll runs at every turn; the acknowledgements that
	 * make room wake the loop).  The parts are gathered straight into
	 * the frame. */
	ret = ctlq_send_job(g->nodes[peer], j->id, j->gen, v, nv, (uint32_t)sizeof(*h) + len);
	if (ret == -EAGAIN)
		g->cj->link_waits++;
	return ret;
}

/* The executor's memory is its user's (limits.user_memory_bytes). */
static int exec_mem_take(void *ctx, uint64_t bytes)
{
	struct cop *op = ctx;

	return user_take_coll(op->g->cj->j->user, bytes);
}

static void exec_mem_give(void *ctx, uint64_t bytes)
{
	struct cop *op = ctx;

	user_give_coll(op->g->cj->j->user, bytes);
}

static const struct coll_exec_ops exec_ops = { .send = send_piece, .mem_take = exec_mem_take,
					       .mem_give = exec_mem_give };

/* --- starting --- */

/* Cost model defaults for a job whose nodes' links had measured nothing
 * when it started (the job's α and β are agreed at GO: cluster.c, from
 * the links' round trips, net/peer.c and plan/linkcost.h): loopback TCP
 * here (README, ferryctl plan). */
#define COLL_ALPHA_US 6.0
#define COLL_BETA_NS_PER_BYTE 0.4

static double coll_alpha_us(const struct job *j)
{
	return j->coll_alpha_ns ? j->coll_alpha_ns / 1e3 : COLL_ALPHA_US;
}

static double coll_beta_ns(const struct job *j)
{
	return j->coll_beta_ps ? j->coll_beta_ps / 1e3 : COLL_BETA_NS_PER_BYTE;
}

/* The algorithm op runs as 0 (automatic) or algorithm + 1: what its ranks
 * forced (ferry_coll_strategy, FERRY_COLL_*), else what the job's home's
 * configuration forces on its family (collectives.*, carried in GO: the
 * same on every node of the job; wire_ctl_decode lets through only
 * algorithms there are), else automatic. */
static_assert(A2A_STRATEGIES == CTL_A2A_ALGS, "proto/ctl.h counts the all-to-all's algorithms");
static_assert(ORTH_ALGS == CTL_ORTH_ALGS && RS_ALGS == CTL_RS_ALGS, "proto/ctl.h counts the algorithms");
static uint32_t op_strategy(const struct cop *op)
{
	int fam = ctl_coll_fam(op->kind);

	if (op->strategy)
		return op->strategy;
	return fam >= 0 ? op->g->cj->j->coll_force[fam] : 0;
}

/* The cost module's view of op (plan/cost.h): the job's α and β, the
 * planners' γ, and the runtime functions its home sent for op's family
 * (GO; indexed as the family's algorithms), the same on every node. */
static struct cost op_cost(const struct cop *op)
{
	const struct job *j = op->g->cj->j;
	int fam = ctl_coll_fam(op->kind);

	return (struct cost){ coll_alpha_us(j), coll_beta_ns(j), RS_GAMMA_NS_PER_BYTE, fam >= 0 ? j->coll_fn[fam] : NULL };
}

/* --- runtime functions ---
 *
 * The times the runtime functions (plan/cost.h, cluster/costs.h) are
 * fitted to are what an application sees: from a rank's post to the rank
 * seeing the operation end.  libferry reports that time of the last
 * operation it saw end with its next post (proto/ctl.h, COLL prev_us);
 * the operation's plan says what it was (plan_measure), its group keeps
 * that for its last COLL_RECENT operations that ended well here
 * (op_measured), and the first report of a local rank for one makes the
 * sample (coll_report).  The daemon's own time of it, from cop_start (all
 * local ranks posted) to cop_end, is a bound: a rank's time cannot be
 * shorter, and one longer by more than COLL_REPORT_SLACK_NS and a quarter
 * (a rank that computed before waiting: the point of a non-blocking
 * operation; or a client that lies) counts as the daemon's own instead.
 * The samples go to the table of the job's user (cluster/costs.h): what a
 * user's ranks do to them (post late, report long times) moves only that
 * user's later choices, and only which algorithm is chosen, never whether
 * an operation is right or whether its nodes agree (the home's functions,
 * fixed at GO). */

/* What op's plan tells the runtime functions when op completes (costs.h):
 * algorithm alg of op's family ran for bytes bytes (the planner's model's
 * size) with the model's start-ups and bytes x. */
static void plan_measured(struct cop *op, uint32_t alg, uint64_t bytes, const struct cost_x *x)
{
	struct cplan *p = op->plan;

	p->fam = ctl_coll_fam(op->kind);
	p->fam_alg = alg;
	p->model_bytes = bytes;
	p->x = *x;
	p->measure = p->fam >= 0;
}

/* ... the features from the planner's model m. */
static void plan_measure(struct cop *op, uint32_t alg, uint64_t bytes, cost_model_fn m, const void *ctx)
{
	struct cost_x x;

	cost_features(m, ctx, alg, &x);
	plan_measured(op, alg, bytes, &x);
}

/* ... when it ended well: kept for its ranks' reports. */
static void op_measured(const struct cop *op)
{
	const struct cplan *p = op->plan;

	if (!p || !p->measure || op->err || !op->started)
		return;
	op->g->recent[op->seq % COLL_RECENT] = (struct crecent){ op->seq, p->fam, p->fam_alg, p->model_bytes, p->x,
								 op->ns ? op->ns : 1 };
}

static uint32_t grp_ppn(const struct cgrp *g);

/* A local rank of group g (its slot there) saw operation seq take us
 * microseconds: the sample, once per operation. */
static void coll_report(struct cgrp *g, uint32_t seq, uint32_t us)
{
	struct crecent *r = &g->recent[seq % COLL_RECENT];
	uint64_t ns = (uint64_t)us * 1000, t;

	if (r->seq != seq || !seq)
		return;         /* (long gone, or reported) */
	t = ns >= r->ns && ns - r->ns <= COLL_REPORT_SLACK_NS + r->ns / 4 ? ns : r->ns;
	costs_add(g->cj->j->uid, (uint32_t)r->fam, r->alg, g->G, grp_ppn(g), r->bytes, &r->x, RS_GAMMA_NS_PER_BYTE,
		  coll_beta_ns(g->cj->j), (double)t / 1e3);
	r->seq = 0;
	coll.reports++;
	coll.reports_own += t != ns;
}

/* op->mem: the local ranks' buffers, from their slots (one allocation:
 * the arrays behind op->sp). */
static int op_mem(struct cop *op)
{
	size_t n = (size_t)op->g->nlocal + 1;

	if (!op->slots || !(op->sp = calloc(n, 2 * sizeof(*op->sp) + 2 * sizeof(*op->slen))))
		return -ENOMEM;
	op->rp = op->sp + n;
	op->slen = (uint64_t *)(op->rp + n);
	op->rlen = op->slen + n;
	for (uint32_t k = 0; k < op->g->nlocal; k++) {
		op->sp[k] = op->slots[k].sp;
		op->rp[k] = op->slots[k].rp;
		op->slen[k] = op->slots[k].slen;
		op->rlen[k] = op->slots[k].rlen;
	}
	op->mem = (struct sched_mem){ op->sp, op->rp, op->slen, op->rlen };
	return 0;
}

/* This node's part of an all-to-all of op->count bytes per block: every
 * rank's counts are the same, so one pair of arrays serves them all, and
 * every node computes the same choice from the same numbers. */
static int plan_alltoall(struct cop *op, struct sched_node *out)
{
	struct cgrp *g = op->g;
	uint32_t size = g->size, n = g->nlocal;
	struct a2a_layout lay = { size, g->node_first, g->rank_at };
	struct a2a_rank_args *args;
	struct a2a_plan p;
	enum a2a_strategy s;
	double ppn = (double)size / g->G;
	int ret;

	op->counts = calloc((size_t)size + 1, sizeof(*op->counts));
	op->displs = calloc((size_t)size + 1, sizeof(*op->displs));
	args = calloc((size_t)n + 1, sizeof(*args));
	if (!op->counts || !op->displs || !args || op_mem(op) < 0) {
		free(args);
		return -ENOMEM;
	}
	for (uint32_t r = 0; r < size; r++) {
		op->counts[r] = op->count;
		op->displs[r] = (uint64_t)r * op->count;
	}
	for (uint32_t k = 0; k < n; k++) {
		const uint64_t *v = op->slots[k].vec;

		if (op->kind == CTL_COLL_ALLTOALLV)
			args[k] = (struct a2a_rank_args){ v, v + size, v + 2 * (size_t)size, v + 3 * (size_t)size };
		else
			args[k] = (struct a2a_rank_args){ op->counts, op->displs, op->counts, op->displs };
	}
	if (!out) {
		free(args);
		op->agree = op->plan->agree;
		return 0;       /* the group's plan serves */
	}
	/* (An all-to-allv's sizes are known to no node in full: every node
	 * chooses as for small blocks, the same everywhere.) */
	struct a2a_model m = { g->G, g->G - 1, (uint64_t)((double)op->count * ppn * ppn) };
	struct cost c = op_cost(op);

	s = op_strategy(op) ? (enum a2a_strategy)(op_strategy(op) - 1)
			    : a2a_choose(m.nodes, m.degree, m.pair_bytes, &c);
	if (op->kind == CTL_COLL_ALLTOALL)
		plan_measure(op, s, m.pair_bytes, a2a_model_us, &m);     /* (the v form's sizes are not m's) */
	op->alg = a2a_strategy_name(s);
	op->plan->strat = (int)s;
	op->agree = (uint32_t)s + 1;    /* (op_tag) */
	ret = a2a_plan_init(&p, s, g->G);
	if (!ret)
		ret = a2a_sched_node(&p, &lay, g->me, args, out);
	free(args);
	return ret;
}

/* Node a moved by dir (+1, -1) times node b's coordinates on torus r. */
static uint32_t torus_move(const struct route *r, uint32_t a, uint32_t b, int dir)
{
	uint32_t ca[ROUTE_MAX_DIMS], cb[ROUTE_MAX_DIMS], id = 0;

	route_coords(r, a, ca);
	route_coords(r, b, cb);
	for (uint32_t k = 0; k < r->ndims; k++)
		id += ((ca[k] + (dir > 0 ? cb[k] : r->dims[k] - cb[k])) % r->dims[k]) * r->stride[k];
	return id;
}

/* The torus plan of algorithm sa from node 0 (coll.torus.base[sa]),
 * searched once per algorithm (SDF takes seconds on tens of thousands of
 * nodes).  0 or -errno (why in op->why). */
static int torus_base(struct cop *op, enum scatter_algo sa)
{
	struct scatter_plan sp;
	uint32_t relay;
	int ret;

	if (coll.torus.base[sa].first && coll.torus.base[sa].nodes == op->g->G)
		return 0;
	scatter_plan_free(&coll.torus.base[sa]);
	ret = scatter_plan(&coll.conf->route, 0, sa, &sp);
	if (!ret && (ret = scatter_relay_max(&sp, &relay)) < 0)
		scatter_plan_free(&sp);
	if (ret < 0) {
		snprintf(op->why, sizeof(op->why), "cannot plan the %s scatter: %s", scatter_algo_name(sa),
			 strerror(-ret));
		return ret;
	}
	coll.torus.base[sa] = sp;
	coll.torus.relay[sa] = relay;
	return 0;
}

/* Whether an OPT scatter or gather of op's blocks (not a v form) could
 * make a node hold more than an operation's memory: a node passing
 * messages on holds each whole until it goes (exec.c's FORWARD), and the
 * first node of a region passes on all of its region's but its own
 * (scatter_relay_max), each the blocks of up to the largest node's ranks.
 * (Then the automatic choice is direct, which streams every message from
 * the root's node.)  -errno if the plan cannot be made. */
static int torus_relay_too_big(struct cop *op)
{
	const struct cgrp *g = op->g;
	uint64_t held, ppn = 0;
	int ret;

	if ((ret = torus_base(op, SCATTER_OPT)) < 0)
		return ret;
	held = coll.torus.relay[SCATTER_OPT];
	for (uint32_t i = 0; i < g->G; i++)
		ppn = g->node_first[i + 1] - g->node_first[i] > ppn ? g->node_first[i + 1] - g->node_first[i] : ppn;
	return held && ppn && op->count > COLL_OP_MEM_MAX / (held * ppn);
}

/* sg_model_us of one algorithm (enum sg_alg sg) whatever the family's index
 * of it (enum ctl_rooted_alg): what plan_measure takes. */
struct sg_model_at {
	const struct sg_model *m;
	uint32_t sg;
};

static double sg_model_at_us(const void *ctx, uint32_t alg, double alpha_us, double beta_ns, double gamma_ns)
{
	const struct sg_model_at *at = ctx;

	(void)alg;
	return sg_model_us(at->m, at->sg, alpha_us, beta_ns, gamma_ns);
}

/* The paths of a scatter or gather from the root's node R (plan/sg_sched.h)
 * into coll.torus (valid 0: direct), and op->alg.  Automatic: the planned
 * regions (plan/scatter.h, OPT) on a physical torus whose every node has
 * ranks of the group (the group's node i is then node id i, and every hop
 * a link) unless a node on the way could have to hold more than an
 * operation's memory (torus_relay_too_big), else the cost model's choice
 * among direct (the root's node sends every node its message, routed like
 * every frame), orth and tree.  opt and sdf need such a torus.  The last plan
 * is kept: the same root and algorithm plan nothing again.  0 or -errno
 * (why in op->why). */
static int rooted_paths(struct cop *op, uint32_t R)
{
	struct cgrp *g = op->g;
	const struct conf *c = coll.conf;
	int torus = c && c->physical == CONF_TORUS && g->G > 1 && g->G == c->route.nnodes &&
		    g->G <= SCATTER_MAX_NODES && g->nodes[g->G - 1] == g->G - 1;
	int gather = op->kind == CTL_COLL_GATHER || op->kind == CTL_COLL_GATHERV;
	int v = op->kind == CTL_COLL_SCATTERV || op->kind == CTL_COLL_GATHERV;
	uint32_t strategy = op_strategy(op), alg = strategy ? strategy - 1 : CTL_ROOTED_OPT;
	enum scatter_algo sa = alg == CTL_ROOTED_SDF ? SCATTER_SDF : SCATTER_OPT;
	struct scatter_plan sp;
	uint32_t *first, *hop, *order;
	int ret;

	coll.torus.valid = 0;
	/* the cost model's, from what every node knows alike (a v variant's
	 * sizes are not: as for small blocks); its runtime functions are
	 * the family's, indexed by enum ctl_rooted_alg */
	static const uint32_t of[SG_ALGS] = { CTL_ROOTED_DIRECT, CTL_ROOTED_ORTH, CTL_ROOTED_TREE };
	struct sg_model m = { gather, g->G, (g->size + g->G - 1) / g->G, v ? 0 : op->count, COLL_OP_MEM_MAX };
	struct cost cm = op_cost(op);
	struct cost_fn fn[SG_ALGS] = { { 0, 0 } };

	for (uint32_t a = 0; cm.fn && a < SG_ALGS; a++)
		fn[a] = cm.fn[of[a]];
	cm.fn = fn;
	if (!strategy && !torus) {
		alg = of[sg_choose(gather, m.nodes, m.ppn, m.block_bytes, &cm, m.mem_max)];
	} else if (!strategy && !v) {
		if ((ret = torus_relay_too_big(op)) < 0)
			return ret;
		if (ret)
			alg = CTL_ROOTED_DIRECT;
	}
	g->cj->rooted[alg]++;
	coll.rooted[alg]++;
	coll.gathers[alg] += gather;
	op->rooted = alg;
	if (alg == CTL_ROOTED_DIRECT || alg == CTL_ROOTED_ORTH || alg == CTL_ROOTED_TREE) {
		op->alg = alg == CTL_ROOTED_DIRECT ? "direct" : alg == CTL_ROOTED_ORTH ? "orth" : "tree";
		if (!v) {
			struct sg_model_at at = { &m, alg == CTL_ROOTED_DIRECT ? SG_DIRECT
						      : alg == CTL_ROOTED_ORTH ? SG_ORTH : SG_TREE };

			plan_measure(op, alg, op->count, sg_model_at_us, &at);
		}
		return 0;
	}
	if (!torus) {
		snprintf(op->why, sizeof(op->why), "%s needs a physical torus with ranks of the group on every node%s",
			 alg == CTL_ROOTED_OPT ? "opt" : "sdf",
			 op->strategy ? "" : gather ? " (collectives.gather of the job's home forces it)"
						    : " (collectives.scatter of the job's home forces it)");
		return -EINVAL;
	}
	op->alg = scatter_algo_name(sa);
	if (coll.torus.first && coll.torus.root == R && coll.torus.algo == sa && coll.torus.nodes == g->G) {
		coll.torus.valid = 1;
		return 0;
	}
	/* The plan from node 0 moved to R: tori look the same from every
	 * node, so d's path from R is (d - R)'s from 0, every hop + R,
	 * coordinate by coordinate. */
	if ((ret = torus_base(op, sa)) < 0)
		return ret;
	sp = coll.torus.base[sa];
	first = calloc((size_t)g->G + 1, sizeof(*first));
	hop = calloc((size_t)sp.first[sp.nodes] + 1, sizeof(*hop));
	order = calloc((size_t)sp.first[sp.nodes] + 1, sizeof(*order));
	if (!first || !hop || !order) {
		free(first);
		free(hop);
		free(order);
		snprintf(op->why, sizeof(op->why), "out of memory for the paths");
		return -ENOMEM;
	}
	for (uint32_t d = 0; d < g->G; d++) {
		uint32_t d0 = torus_move(&c->route, d, R, -1);

		first[d + 1] = first[d] + (sp.first[d0 + 1] - sp.first[d0]);
		for (uint32_t k = sp.first[d0]; k < sp.first[d0 + 1]; k++) {
			hop[first[d] + (k - sp.first[d0])] = torus_move(&c->route, sp.hops[k].to, R, 1);
			order[first[d] + (k - sp.first[d0])] = sp.hops[k].step;
		}
	}
	free(coll.torus.first);
	free(coll.torus.hop);
	free(coll.torus.order);
	coll.torus.first = first;
	coll.torus.hop = hop;
	coll.torus.order = order;
	coll.torus.paths = (struct sg_paths){ first, hop, order, sp.steps };
	coll.torus.root = R;
	coll.torus.algo = sa;
	coll.torus.nodes = g->G;
	coll.torus.valid = 1;
	return 0;
}

/* This node's part of a scatter or gather (plan/sg_sched.h) along the
 * paths rooted_paths chose. */
static int plan_rooted(struct cop *op, struct sched_node *out)
{
	struct cgrp *g = op->g;
	uint32_t n = g->nlocal, size = g->size, s0 = 0;
	struct a2a_layout lay = { size, g->node_first, g->rank_at };
	int gather = op->kind == CTL_COLL_GATHER || op->kind == CTL_COLL_GATHERV;
	struct sg_args a = { .root = op->root, .in_place = op->in_place };
	uint64_t *mine;
	int ret;

	if (op_mem(op) < 0 || !(mine = calloc((size_t)n + 1, sizeof(*mine))))
		return -ENOMEM;
	for (uint32_t k = 0; k < n; k++)
		mine[k] = op->slots[k].count;
	a.mine = mine;
	if (sg_node_of(&lay, g->G, op->root, &s0) == g->me) {
		if (op->kind == CTL_COLL_SCATTERV || op->kind == CTL_COLL_GATHERV) {
			a.count = op->slots[s0].vec;
			a.displ = op->slots[s0].vec + size;
		} else {
			op->counts = calloc((size_t)size + 1, sizeof(*op->counts));
			op->displs = calloc((size_t)size + 1, sizeof(*op->displs));
			if (!op->counts || !op->displs) {
				free(mine);
				return -ENOMEM;
			}
			for (uint32_t r = 0; r < size; r++) {
				op->counts[r] = op->count;
				op->displs[r] = (uint64_t)r * op->count;
			}
			a.count = op->counts;
			a.displ = op->displs;
		}
	}
	ret = rooted_paths(op, sg_node_of(&lay, g->G, op->root, &s0));
	out->nslots = n;
	if (!ret && (op->rooted == CTL_ROOTED_ORTH || op->rooted == CTL_ROOTED_TREE))
		ret = sg_sched_alg_node(op->rooted == CTL_ROOTED_ORTH ? SG_ORTH : SG_TREE, gather, &lay, g->G, g->me, &a,
					out);
	else if (!ret)
		ret = sg_sched_node(gather, &lay, g->G, g->me, &a, coll.torus.valid ? &coll.torus.paths : NULL, out);
	free(mine);
	return ret;
}

/* Hands a started operation the pieces that came before it started, in
 * the order they came, within *budget bytes (NULL: all of them), which it
 * lowers.  early_replay: within the turn's budget (coll.budget), since tens
 * of megabytes of them must not hold the loop for one turn (review of
 * issue 12, finding 5); the rest go at the next turns, and a piece that
 * comes meanwhile joins them, behind (grp_piece). */
static void early_deliver(struct cop *op, uint64_t *budget)
{
	struct cjob *cj = op->g->cj;

	while (op->early && !op->ended && (!budget || *budget)) {
		struct early *e = op->early;
		int ret;

		op->early = e->next;
		cj->early_bytes -= early_cost(e->len);
		user_give_coll(cj->j->user, early_cost(e->len));
		if (budget)
			*budget -= e->len < *budget ? e->len : *budget;
		ret = coll_exec_deliver(op->x, &e->h, e->data, e->len);
		free(e);
		if (ret < 0)
			cop_end(op, -ret, coll_exec_error(op->x));
	}
	if (!op->early)
		op->early_tail = &op->early;
}

static void early_replay(struct cop *op)
{
	early_deliver(op, &coll.budget);
}

/* Whether the plans of operations of this kind are kept (COLL_PLANS):
 * not when the ranks' counts are their own (an all-to-allv, an allgatherv,
 * a reduce_scatter), nor for the rooted ones, whose steps depend on the
 * ranks' buffers (FERRY_IN_PLACE at the root). */
static int plan_keep(uint32_t kind)
{
	return kind == CTL_COLL_BARRIER || kind == CTL_COLL_ALLTOALL || kind == CTL_COLL_SPLIT ||
	       (ctl_coll_phased(kind) && kind != CTL_COLL_ALLGATHERV && kind != CTL_COLL_REDUCE_SCATTER);
}

/* The plan g keeps for an operation like op, or NULL.  A plan is a
 * function of the kind, size, type and operation, root and strategy, and
 * of what is fixed for the group (its layout, the job's α, β and runtime
 * functions, all fixed at GO). */
static struct cplan *plan_find(struct cgrp *g, const struct cop *op)
{
	if (!plan_keep(op->kind))
		return NULL;
	for (int k = 0; k < COLL_PLANS; k++) {
		struct cplan *pl = g->plans[k];

		if (pl && pl->kind == op->kind && pl->count == op->count && pl->strategy == op->strategy &&
		    pl->red == op->red && pl->root == op->root) {
			pl->used = ++g->plan_tick;
			return pl;
		}
	}
	return NULL;
}

/* ... and g keeps pl, in place of the least recently used one. */
static void plan_keep_in(struct cgrp *g, struct cplan *pl)
{
	int v = 0;

	for (int k = 0; k < COLL_PLANS; k++) {
		if (!g->plans[k]) {
			v = k;
			break;
		}
		if (g->plans[k]->used < g->plans[v]->used)
			v = k;
	}
	plan_put(g->plans[v]);
	g->plans[v] = pl;
	pl->refs++;
	pl->used = ++g->plan_tick;
}

/* Takes b bytes of cj's user's memory for an operation's plan or tables;
 * where the user has no more, the plans cj's groups keep for operations to
 * come and no operation runs on now go first (they cost a planning when
 * one is needed again).  0 or -ENOBUFS. */
static int take_coll_mem(struct cjob *cj, uint64_t b)
{
	if (user_take_coll(cj->j->user, b) == 0)
		return 0;
	for (struct cgrp *g = cj->groups; g; g = g->next)
		for (int k = 0; k < COLL_PLANS; k++)
			if (g->plans[k] && g->plans[k]->refs == 1) {
				plan_put(g->plans[k]);
				g->plans[k] = NULL;
			}
	return user_take_coll(cj->j->user, b) == 0 ? 0 : -ENOBUFS;
}

/* The most ranks one node of g has (the cost model's ranks per node: the
 * same on every node). */
static uint32_t grp_ppn(const struct cgrp *g)
{
	uint32_t m = 0;

	for (uint32_t n = 0; n < g->G; n++)
		if (g->node_first[n + 1] - g->node_first[n] > m)
			m = g->node_first[n + 1] - g->node_first[n];
	return m;
}

/* The counts every rank passed (an allgatherv's bytes, a reduce_scatter's
 * elements), from slot 0, after checking that the other ranks here passed
 * the same (the nodes check each other's through the parts' lengths).
 * NULL, with why in op->why, if they differ. */
static const uint64_t *same_counts(struct cop *op)
{
	uint64_t n = op->g->size;

	for (uint32_t k = 1; k < op->g->nlocal; k++)
		if (memcmp(op->slots[k].vec, op->slots[0].vec, n * sizeof(uint64_t)) != 0) {
			snprintf(op->why, sizeof(op->why), "the ranks on node %u passed different counts", coll.self);
			return NULL;
		}
	return op->slots[0].vec;
}

/* A plan's tag (op->agree): a hash of what the nodes must agree on and
 * the pieces' lengths do not show (the algorithm forced and chosen, its
 * grid, every rank's counts), folded to 1..255.  Pieces carry it: nodes
 * that disagree fail with -EINVAL, one in 255 pairs of plans aside (then
 * the messages' numbers or lengths differ, as before: -EPROTO). */
static uint64_t tag_add(uint64_t h, const void *p, size_t n)
{
	const uint8_t *b = p;

	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 0x100000001b3ull;      /* FNV-1a */
	return h;
}

static uint32_t tag_of(uint64_t h)
{
	h ^= h >> 32;
	h ^= h >> 16;
	return (uint32_t)(h % 255) + 1;
}

#define TAG_BASIS 0xcbf29ce484222325ull

/* bcast, reduce, allreduce, allgather(v) (daemon/plan/orth.h): the
 * algorithm forced or chosen (every node the same: the job's α and β, the
 * group's layout), then node me's steps. */
static int plan_orth(struct cop *op, const struct a2a_layout *lay, uint32_t alg, struct sched_node *out)
{
	struct cgrp *g = op->g;
	struct orth_dims dims, grid;
	const uint64_t **displ = NULL;
	struct orth_args a = { .root = op->root, .type = CTL_COLL_TYPE(op->red), .op = CTL_COLL_OP(op->red),
			       .dims = &dims };
	uint64_t bytes = op->count;
	int ret;

	orth_hier_dims(g->G, &dims);
	switch (op->kind) {
	case CTL_COLL_BCAST:
		a.kind = ORTH_BCAST;
		a.bytes = op->count;
		break;
	case CTL_COLL_REDUCE:
	case CTL_COLL_ALLREDUCE:
		a.kind = op->kind == CTL_COLL_REDUCE ? ORTH_REDUCE : ORTH_ALLREDUCE;
		a.count = op->count;
		bytes = op->count * coll_type_size(a.type);
		break;
	case CTL_COLL_ALLGATHER:
		a.kind = ORTH_ALLGATHER;
		a.block = op->count;
		break;
	default:                        /* allgatherv: the mean block */
		a.kind = ORTH_ALLGATHER;
		if (!(a.counts = same_counts(op)))
			return -EINVAL;
		bytes = 0;
		for (uint32_t r = 0; r < g->size; r++)
			bytes += a.counts[r] / g->size;
		if (!(displ = calloc((size_t)g->nlocal + 1, sizeof(*displ))))
			return -ENOMEM;
		for (uint32_t k = 0; k < g->nlocal; k++)
			displ[k] = op->slots[k].vec + g->size;
		a.displ = displ;
	}
	if (g->pick.valid && g->pick.kind == op->kind && g->pick.strategy == alg && g->pick.red == op->red &&
	    g->pick.count == op->count && op->kind != CTL_COLL_ALLGATHERV) {
		grid = g->pick.grid;
		a.grid = &grid;
		a.alg = g->pick.alg;
		plan_measured(op, a.alg, bytes, &g->pick.x);
	} else {
		struct orth_model m = { a.kind, g->G, grp_ppn(g), bytes, &dims, &grid };
		struct cost c = op_cost(op);

		/* the 2-D layout the model predicts fastest (seed 004 §3.7),
		 * from the job's α and β: the same on every node */
		orth_layout(m.kind, m.nodes, m.ppn, m.bytes, c.alpha_us, c.beta_ns, &grid);
		a.grid = &grid;
		a.alg = alg ? (enum orth_alg)(alg - 1) : orth_choose(m.kind, m.nodes, m.ppn, m.bytes, &c, m.dims, m.grid);
		plan_measure(op, a.alg, bytes, orth_model_us, &m);
		g->pick.valid = 1;
		g->pick.kind = op->kind;
		g->pick.strategy = alg;
		g->pick.red = op->red;
		g->pick.count = op->count;
		g->pick.alg = a.alg;
		g->pick.grid = grid;
		g->pick.x = op->plan->x;
	}
	op->alg = orth_alg_name(a.alg);
	{
		uint64_t h = tag_add(tag_add(TAG_BASIS, &op->strategy, sizeof(op->strategy)), &a.alg, sizeof(a.alg));

		if (a.alg == ORTH_GRID)
			h = tag_add(h, grid.d, sizeof(grid.d[0]) * 2);

		if (a.counts)
			h = tag_add(h, a.counts, g->size * sizeof(*a.counts));
		op->agree = tag_of(h);
	}
	ret = orth_sched_node(&a, lay, g->G, g->me, out);
	free(displ);
	return ret;
}

/* reduce_scatter(_block) (daemon/plan/rs.h), as plan_orth. */
static int plan_rs(struct cop *op, const struct a2a_layout *lay, uint32_t alg, struct sched_node *out)
{
	struct cgrp *g = op->g;
	struct rs_args a = { .type = CTL_COLL_TYPE(op->red), .op = CTL_COLL_OP(op->red) };
	struct rs_plan p;
	struct cost c;
	enum rs_alg ran;
	uint64_t total = 0;
	int ret;

	if (op->kind == CTL_COLL_REDUCE_SCATTER_BLOCK) {
		if (!(op->counts = calloc((size_t)g->size + 1, sizeof(*op->counts))))
			return -ENOMEM;
		for (uint32_t r = 0; r < g->size; r++)
			op->counts[r] = op->count;
		a.counts = op->counts;
	} else if (!(a.counts = same_counts(op))) {
		return -EINVAL;
	}
	for (uint32_t r = 0; r < g->size; r++)
		total += a.counts[r];
	c = op_cost(op);
	if ((ret = rs_choose(alg ? (int)alg - 1 : -1, g->G, total * coll_type_size(a.type), &c, &p)) < 0)
		return ret;
	/* what runs: a hybrid forced on a prime number of nodes is one
	 * dimension's short or long (rs_choose), and its time is theirs */
	ran = p.ndims > 1 ? RS_HYBRID : (enum rs_alg)p.alg[0];
	op->alg = rs_alg_name(ran);
	{
		struct rs_model m = { .bytes = total * coll_type_size(a.type) };

		m.plan[ran] = p;
		m.have[ran] = 1;
		plan_measure(op, ran, m.bytes, rs_model_us, &m);
	}
	{
		uint64_t h = tag_add(tag_add(TAG_BASIS, &op->strategy, sizeof(op->strategy)), &p.ndims, sizeof(p.ndims));

		h = tag_add(tag_add(h, p.dim, sizeof(p.dim[0]) * p.ndims), p.alg, p.ndims);
		op->agree = tag_of(tag_add(h, a.counts, g->size * sizeof(*a.counts)));
	}
	return rs_sched_node(&p, lay, g->me, &a, out);
}

/* scan and exscan (daemon/plan/rs.h): the chain, in chunks. */
static int plan_scan(struct cop *op, const struct a2a_layout *lay, struct sched_node *out)
{
	struct cgrp *g = op->g;
	struct rs_scan_args a = { .count = op->count, .type = CTL_COLL_TYPE(op->red), .op = CTL_COLL_OP(op->red),
				  .exclusive = op->kind == CTL_COLL_EXSCAN };

	struct rs_scan_model m = { rs_scan_runs(lay, g->G), 0, op->count * coll_type_size(a.type) };

	a.chunks = m.chunks = rs_scan_chunks(m.runs, op->count, coll_type_size(a.type), coll_alpha_us(g->cj->j),
					     coll_beta_ns(g->cj->j), RS_GAMMA_NS_PER_BYTE);
	plan_measure(op, 0, m.bytes, rs_scan_model_us, &m);
	op->alg = "chain";
	op->agree = tag_of(tag_add(tag_add(TAG_BASIS, &op->strategy, sizeof(op->strategy)), &a.chunks,
				   sizeof(a.chunks)));
	return rs_scan_sched_node(&a, lay, g->G, g->me, out);
}

/* bcast .. exscan: this node's steps into out (NULL: op runs on a plan
 * the group kept, plan_find). */
static int plan_phased(struct cop *op, struct sched_node *out)
{
	struct cgrp *g = op->g;
	struct a2a_layout lay = { g->size, g->node_first, g->rank_at };
	uint32_t alg = op_strategy(op);

	if (op_mem(op) < 0)
		return -ENOMEM;
	if (!out) {
		op->agree = op->plan->agree;
		return 0;
	}
	out->nslots = g->nlocal;
	switch (op->kind) {
	case CTL_COLL_REDUCE_SCATTER_BLOCK:
	case CTL_COLL_REDUCE_SCATTER:
		return plan_rs(op, &lay, alg, out);
	case CTL_COLL_SCAN:
	case CTL_COLL_EXSCAN:
		return plan_scan(op, &lay, out);
	}
	return plan_orth(op, &lay, alg, out);
}

/* ... all of them, now (see grp_piece). */
static void early_replay_all(struct cop *op)
{
	early_deliver(op, NULL);
}

static void hold_move(struct cgrp *g, int resume);

static void cop_start(struct cop *op)
{
	struct cgrp *g = op->g;
	struct cjob *cj = g->cj;
	struct coll_exec_cfg cfg = {
		.self = g->me, .job = cj->j->id, .gen = cj->j->gen, .op = op->seq, .group = g->id,
		.piece_max = WIRE_COLL_PIECE_MAX, .mem_max = COLL_OP_MEM_MAX,
	};
	char err[200];
	int ret, kept = 0;

	op->started = 1;
	op->start_ns = loop_now_ns();
	if (op->seq > g->started)
		g->started = op->seq;
	if (g->ntold)
		hold_move(g, 0);        /* (its pieces go on: the nodes told hear so) */
	if (!g->id && op->seq > cj->j->coll_started)
		cj->j->coll_started = op->seq;  /* a LEAVE says so (cluster.c) */
	if ((op->plan = plan_find(g, op))) {
		op->plan->refs++;
		kept = 1;
	} else {
		if ((op->plan = calloc(1, sizeof(*op->plan))))
			op->plan->refs = 1;     /* (before anything can fail: cop_free puts it) */
		if (!op->plan || sched_init(&op->plan->s, g->G) < 0) {
			cop_end(op, ENOMEM, "out of memory for the schedule");
			return;
		}
		op->plan->strat = -1;
		op->plan->kind = op->kind;
		op->plan->count = op->count;
		op->plan->strategy = op->strategy;
		op->plan->red = op->red;
		op->plan->root = op->root;
	}
	switch (op->kind) {
	case CTL_COLL_BARRIER:
		op->alg = "dissemination";
		ret = kept ? 0 : barrier_sched_node(g->G, g->me, &op->plan->s.node[g->me]);
		break;
	case CTL_COLL_ALLTOALL:
	case CTL_COLL_ALLTOALLV:
	case CTL_COLL_SPLIT:
		ret = plan_alltoall(op, kept ? NULL : &op->plan->s.node[g->me]);
		break;
	case CTL_COLL_SCATTER:
	case CTL_COLL_SCATTERV:
	case CTL_COLL_GATHER:
	case CTL_COLL_GATHERV:
		ret = plan_rooted(op, &op->plan->s.node[g->me]);
		break;
	default:
		ret = ctl_coll_phased(op->kind) ? plan_phased(op, kept ? NULL : &op->plan->s.node[g->me]) : -EINVAL;
	}
	if (ret < 0) {
		cop_end(op, -ret, op->why[0] ? op->why : "cannot plan the operation");
		return;
	}
	if (op->piece_kind && op->piece_root >> WIRE_COLL_ALG_SHIFT != op_tag(op)) {
		plan_mismatch(op, op->kind, UINT32_MAX, op->piece_root >> WIRE_COLL_ALG_SHIFT, op_tag(op));
		return;
	}
	if (!kept) {
		/* the steps are the user's memory too (review of issue 12) */
		uint64_t b = sched_node_bytes(&op->plan->s.node[g->me]);

		if (plan_keep(op->kind) && coll_exec_tmpl_new(&op->plan->s.node[g->me], &op->plan->tmpl) < 0) {
			cop_end(op, ENOMEM, "out of memory for the schedule");
			return;
		}
		b += coll_exec_tmpl_bytes(op->plan->tmpl);

		if (take_coll_mem(cj, b) < 0) {
			cop_end(op, ENOBUFS, user_refusal());
			return;
		}
		op->plan->user = cj->j->user;
		op->plan->charged = b;
		op->plan->alg = op->alg;
		op->plan->agree = op->agree;
		if (plan_keep(op->kind))
			plan_keep_in(g, op->plan);
	}
	op->alg = op->plan->alg;
	if (op->plan->strat >= 0 && op->plan->strat < A2A_STRATEGIES)
		cj->chosen[op->plan->strat]++;
	cfg.tmpl = op->plan->tmpl;
	ret = coll_exec_new(&op->plan->s.node[g->me], &op->mem, &cfg, &exec_ops, op, &op->x, err, sizeof(err));
	if (ret < 0) {
		cop_end(op, -ret, err);
		return;
	}
	{
		/* its tables and arrays: the user's memory too */
		uint64_t b = coll_exec_tables_bytes(op->x) + 4ull * (g->nlocal + 1) * sizeof(uint64_t) +
			     (op->counts ? 2ull * (g->size + 1) * sizeof(uint64_t) : 0);

		if (take_coll_mem(cj, b) < 0) {
			cop_end(op, ENOBUFS, user_refusal());
			return;
		}
		op->charged = b;
	}
	early_replay(op);
}

/* --- events --- */

/* One buffer of a post: len bytes at b in ep's memory, held for the
 * operation.  Returns 0 or -EINVAL (why in op->why). */
static int post_buffer(struct cop *op, struct ep *ep, const struct ctl_buf *b, uint64_t len, struct mem **m_p,
		       uint8_t **p_p, const char *what)
{
	struct mem *m;
	uint8_t *p;

	if (b->len != len) {
		snprintf(op->why, sizeof(op->why), "rank %u: a %s buffer of %llu bytes where %llu were expected",
			 ep->rank, what, (unsigned long long)b->len, (unsigned long long)len);
		return -EINVAL;
	}
	if (!len)
		return 0;
	m = mem_find(ep->mems, b->mem);
	p = mem_at(m, b->off, b->len);
	if (!p) {
		snprintf(op->why, sizeof(op->why), "rank %u: its %s buffer is not in memory it shares with ferryd "
			 "(region %u, %llu bytes at %llu)", ep->rank, what, b->mem, (unsigned long long)b->len,
			 (unsigned long long)b->off);
		return -EINVAL;
	}
	mem_hold(m);
	*m_p = m;
	*p_p = p;
	return 0;
}

/* A split's buffers, the daemon's own (review F4): its groups are made
 * from what the nodes exchanged, which must be the same on every node and
 * out of any client's reach.  So the rank's {color, key} is read once, from
 * its first block, and sent to every rank alike (a client cannot tell
 * ranks different things), and the table is received where no client can
 * write; libferry computes its handle from the copy it gets at the end. */
static int split_post(struct cop *op, struct ep *ep, struct cslot *sl)
{
	struct job *j = op->g->cj->j;
	uint64_t len = 8ull * op->g->size;
	uint8_t ck[8];

	if (sl->slen != len || !sl->sp || !sl->rp) {
		snprintf(op->why, sizeof(op->why), "rank %u: a split of blocks of %llu bytes, not 8", ep->rank,
			 (unsigned long long)(op->g->size ? sl->slen / op->g->size : 0));
		return -EINVAL;
	}
	if (user_take_coll(j->user, 2 * len) < 0) {
		snprintf(op->why, sizeof(op->why), "%s", user_refusal());
		return -EINVAL;
	}
	if (!(sl->own = malloc(2 * len))) {
		user_give_coll(j->user, 2 * len);
		snprintf(op->why, sizeof(op->why), "out of memory");
		return -EINVAL;
	}
	memcpy(ck, sl->sp, sizeof(ck));
	for (uint64_t off = 0; off < len; off += sizeof(ck))
		memcpy(sl->own + off, ck, sizeof(ck));
	sl->crp = sl->rp;
	sl->sp = sl->own;
	sl->rp = sl->own + len;
	return 0;
}

/* The counts and displacements ep posted (c->vec, n x size numbers),
 * copied out of the shared memory the client could still write into
 * sl->vec; the executor checks every block against the buffers
 * (coll_exec_new).  Returns 0 or -EINVAL (why in op->why). */
static int post_vec(struct cop *op, struct ep *ep, struct cslot *sl, const struct ctl_coll_wire *c, unsigned n)
{
	struct job *j = op->g->cj->j;
	uint64_t vlen = 8ull * n * op->g->size;
	const uint8_t *v = mem_at(mem_find(ep->mems, c->vec.mem), c->vec.off, c->vec.len);

	if (c->vec.len != vlen || !v) {
		snprintf(op->why, sizeof(op->why), "rank %u: its counts and displacements (%llu bytes) are not "
			 "%u x %u in memory it shares with ferryd", ep->rank, (unsigned long long)c->vec.len, n,
			 op->g->size);
		return -EINVAL;
	}
	if (user_take_coll(j->user, vlen) < 0) {
		snprintf(op->why, sizeof(op->why), "%s", user_refusal());
		return -EINVAL;
	}
	sl->vec = malloc(vlen);
	if (!sl->vec) {
		user_give_coll(j->user, vlen);
		snprintf(op->why, sizeof(op->why), "out of memory");
		return -EINVAL;
	}
	sl->vlen = vlen;
	memcpy(sl->vec, v, vlen);
	return 0;
}

/* A scatter's or gather's buffers: the root's side (the blocks of every
 * rank: size x count, or as its counts say) and the rank's own block
 * (count bytes; none at the root in place).  Returns 0 or -EINVAL (why in
 * op->why). */
static int post_rooted(struct cop *op, struct ep *ep, int slot, struct cslot *sl, const struct ctl_coll_wire *c)
{
	struct cgrp *g = op->g;
	int scatter = c->kind == CTL_COLL_SCATTER || c->kind == CTL_COLL_SCATTERV;
	int v = c->kind == CTL_COLL_SCATTERV || c->kind == CTL_COLL_GATHERV;
	int root = c->root < g->size && g->rank_at[g->node_first[g->me] + (uint32_t)slot] == c->root;
	int in_place = (c->flags & CTL_COLL_IN_PLACE) != 0;
	uint64_t all_len = 0, own_len = root && in_place ? 0 : c->count;

	if (c->root >= g->size) {
		snprintf(op->why, sizeof(op->why), "rank %u: root %u, in a group of %u ranks", ep->rank, c->root,
			 g->size);
		return -EINVAL;
	}
	if (!root && (in_place || c->vec.len)) {
		snprintf(op->why, sizeof(op->why), "rank %u: %s, but it is not the root", ep->rank,
			 in_place ? "in place" : "counts and displacements");
		return -EINVAL;
	}
	sl->count = c->count;
	if (root) {
		op->in_place = in_place;
		if (v) {
			if (post_vec(op, ep, sl, c, 2) < 0)
				return -EINVAL;
			all_len = (scatter ? c->send : c->recv).len;
		} else if (__builtin_mul_overflow(c->count, (uint64_t)g->size, &all_len)) {
			snprintf(op->why, sizeof(op->why), "rank %u: blocks of %llu bytes for %u ranks", ep->rank,
				 (unsigned long long)c->count, g->size);
			return -EINVAL;
		}
	}
	sl->slen = scatter ? all_len : own_len;
	sl->rlen = scatter ? own_len : all_len;
	if (post_buffer(op, ep, &c->send, sl->slen, &sl->sm, &sl->sp, "send") < 0 ||
	    post_buffer(op, ep, &c->recv, sl->rlen, &sl->rm, &sl->rp, "receive") < 0)
		return -EINVAL;
	return 0;
}

/* The bytes of n elements of the type op's flags name into *b_p (1 per
 * element for the kinds that move bytes): 0, or -EINVAL (why in op->why). */
static int elem_bytes(struct cop *op, const struct ep *ep, uint32_t kind, uint32_t flags, uint64_t n, uint64_t *b_p)
{
	uint64_t esz = ctl_coll_reduces(kind) ? coll_type_size(CTL_COLL_TYPE(flags)) : 1;

	if (__builtin_mul_overflow(n, esz, b_p)) {
		snprintf(op->why, sizeof(op->why), "rank %u: %llu elements of %llu bytes", ep->rank,
			 (unsigned long long)n, (unsigned long long)esz);
		return -EINVAL;
	}
	return 0;
}

/* The input and output bytes of a rank (me, the group's size P) in one of
 * bcast .. exscan (proto/ctl.h), into *in_p and *out_p; the counts in
 * sl->vec where the kind has them.  0, or -EINVAL (why in op->why). */
static int phased_sizes(struct cop *op, const struct ep *ep, const struct cslot *sl, const struct ctl_coll_wire *c,
			uint32_t me, uint64_t *in_p, uint64_t *out_p)
{
	uint32_t P = op->g->size;
	uint64_t n = c->count, total = 0;

	switch (c->kind) {
	case CTL_COLL_BCAST:
		*in_p = me == c->root ? n : 0;
		*out_p = me == c->root ? 0 : n;
		return 0;
	case CTL_COLL_REDUCE:
		if (elem_bytes(op, ep, c->kind, c->flags, n, in_p) < 0)
			return -EINVAL;
		*out_p = me == c->root ? *in_p : 0;
		return 0;
	case CTL_COLL_ALLREDUCE:
	case CTL_COLL_SCAN:
	case CTL_COLL_EXSCAN:
		if (elem_bytes(op, ep, c->kind, c->flags, n, in_p) < 0)
			return -EINVAL;
		*out_p = *in_p;
		return 0;
	case CTL_COLL_ALLGATHER:
		*in_p = n;
		if (__builtin_mul_overflow(n, (uint64_t)P, out_p)) {
			snprintf(op->why, sizeof(op->why), "rank %u: blocks of %llu bytes for %u ranks", ep->rank,
				 (unsigned long long)n, P);
			return -EINVAL;
		}
		return 0;
	case CTL_COLL_ALLGATHERV:
		if (sl->vec[me] != n) {
			snprintf(op->why, sizeof(op->why), "rank %u sends %llu bytes, and its counts say %llu",
				 ep->rank, (unsigned long long)n, (unsigned long long)sl->vec[me]);
			return -EINVAL;
		}
		*in_p = n;
		*out_p = c->recv.len;   /* (every block checked against it: coll_exec_new) */
		return 0;
	case CTL_COLL_REDUCE_SCATTER_BLOCK:
		if (__builtin_mul_overflow(n, (uint64_t)P, &total))
			total = UINT64_MAX;
		return elem_bytes(op, ep, c->kind, c->flags, total, in_p) < 0 ||
		       elem_bytes(op, ep, c->kind, c->flags, n, out_p) < 0 ? -EINVAL : 0;
	case CTL_COLL_REDUCE_SCATTER:
		for (uint32_t r = 0; r < P; r++)
			if (__builtin_add_overflow(total, sl->vec[r], &total))
				total = UINT64_MAX;
		return elem_bytes(op, ep, c->kind, c->flags, total, in_p) < 0 ||
		       elem_bytes(op, ep, c->kind, c->flags, sl->vec[me], out_p) < 0 ? -EINVAL : 0;
	}
	snprintf(op->why, sizeof(op->why), "rank %u: operation kind %u", ep->rank, c->kind);
	return -EINVAL;
}

/* bcast .. exscan: the counts where the kind has them, then the buffers.
 * Returns 0 or -EINVAL (why in op->why). */
static int post_phased(struct cop *op, struct ep *ep, int slot, struct cslot *sl, const struct ctl_coll_wire *c)
{
	struct cgrp *g = op->g;
	uint32_t me = g->rank_at[g->node_first[g->me] + (uint32_t)slot];
	uint64_t in, out;

	if (ctl_coll_has_root(c->kind) && c->root >= g->size) {
		snprintf(op->why, sizeof(op->why), "rank %u: root %u, in a group of %u ranks", ep->rank, c->root,
			 g->size);
		return -EINVAL;
	}
	if ((c->kind == CTL_COLL_ALLGATHERV && post_vec(op, ep, sl, c, 2) < 0) ||
	    (c->kind == CTL_COLL_REDUCE_SCATTER && post_vec(op, ep, sl, c, 1) < 0) ||
	    phased_sizes(op, ep, sl, c, me, &in, &out) < 0)
		return -EINVAL;
	sl->count = c->count;
	sl->slen = in;
	sl->rlen = out;
	if (post_buffer(op, ep, &c->send, sl->slen, &sl->sm, &sl->sp, "send") < 0 ||
	    post_buffer(op, ep, &c->recv, sl->rlen, &sl->rm, &sl->rp, "receive") < 0)
		return -EINVAL;
	return 0;
}

/* The buffers ep posted for op (all-to-all: size blocks each way). */
static int post_buffers(struct cop *op, struct ep *ep, int slot, const struct ctl_coll_wire *c)
{
	struct cgrp *g = op->g;
	struct cslot *sl;
	uint64_t len;

	if (c->kind == CTL_COLL_BARRIER)
		return 0;
	if (!op->slots && !(op->slots = calloc(g->nlocal + 1, sizeof(*op->slots)))) {
		snprintf(op->why, sizeof(op->why), "out of memory");
		return -EINVAL;
	}
	sl = &op->slots[slot];
	if (sl->posted) {
		snprintf(op->why, sizeof(op->why), "rank %u posted operation %u twice", ep->rank, op->seq);
		return -EINVAL;
	}
	sl->posted = 1;
	if (ctl_coll_rooted(c->kind))
		return post_rooted(op, ep, slot, sl, c);
	if (ctl_coll_phased(c->kind))
		return post_phased(op, ep, slot, sl, c);
	if (c->kind == CTL_COLL_ALLTOALLV) {
		if (post_vec(op, ep, sl, c, 4) < 0)
			return -EINVAL;
		sl->slen = c->send.len;
		sl->rlen = c->recv.len;
		if (post_buffer(op, ep, &c->send, c->send.len, &sl->sm, &sl->sp, "send") < 0 ||
		    post_buffer(op, ep, &c->recv, c->recv.len, &sl->rm, &sl->rp, "receive") < 0)
			return -EINVAL;
		return 0;
	}
	if (__builtin_mul_overflow(c->count, (uint64_t)g->size, &len)) {
		snprintf(op->why, sizeof(op->why), "rank %u: blocks of %llu bytes for %u ranks", ep->rank,
			 (unsigned long long)c->count, g->size);
		return -EINVAL;
	}
	sl->slen = sl->rlen = len;
	if (post_buffer(op, ep, &c->send, len, &sl->sm, &sl->sp, "send") < 0 ||
	    post_buffer(op, ep, &c->recv, len, &sl->rm, &sl->rp, "receive") < 0)
		return -EINVAL;
	return c->kind == CTL_COLL_SPLIT ? split_post(op, ep, sl) : 0;
}

/* 1 if the failure of g's job or of g itself ends g's operation seq: its
 * errno and why in *err_p and *why_p.  The job's operations fail after
 * j->coll_ok once the job failed (cluster.h); a split group's after its
 * ok once broken, and all once the job lost a node or link it needs (the
 * other failures of the job are its ranks' and operations', which the
 * group sees for itself). */
static int grp_doomed(const struct cgrp *g, uint32_t seq, int *err_p, const char **why_p)
{
	const struct job *j = g->cj->j;

	if (!g->id ? j->failed && seq > j->coll_ok : j->coll_groups_fail || j->stale) {
		*err_p = j->failed ? j->failed : EHOSTDOWN;
		*why_p = j->fail_text[0] ? j->fail_text : "the job failed";
		return 1;
	}
	if (g->id && g->broken && seq > g->ok) {
		*err_p = g->broken;
		*why_p = g->why;
		return 1;
	}
	/* The split that made it failed (on some node: that one made no such
	 * group, and the others' would wait for it for ever). */
	return g->parent && grp_doomed(g->parent, g->split_seq, err_p, why_p);
}

static void grp_break(struct cgrp *g, int err, uint32_t ok, const char *why, int tell);

/* An operation of g after ok failed here for a reason of its own (why), or
 * could not be made: the other nodes would wait for it, so g's operations
 * after ok fail everywhere; the job's through its home (which tells every
 * node), a split group's by a BREAK to each of its nodes. */
static void grp_fail(struct cgrp *g, int err, uint32_t ok, const char *why)
{
	if (!g->id)
		cluster_job_fail(g->cj->j, err, ok, why);
	else
		grp_break(g, err, ok, why, 1);
}

void coll_post(struct ep *ep, const struct ctl_coll_wire *c)
{
	struct job *j = ep->job;
	struct cjob *cj;
	struct cgrp *g;
	struct cop *op;
	const char *dwhy;
	int slot, derr;

	/* What libferry keeps to (client/ferry.h): a client beyond breaks the
	 * protocol, and no more of its posts cost this daemon anything. */
	if (ep->coll_pending >= COLL_EP_PENDING) {
		ep_fail(ep, "more collective operations posted and not answered than a client may have (64)");
		return;
	}
	ep->coll_pending++;
	ep_check_cpus(ep);      /* (moved since it joined?) */
	cj = cjob_get(j);
	g = cj ? grp_find(cj, c->group) : NULL;

	if (!cj) {
		/* The other nodes would wait for this one: the job fails. */
		sess_coll_done(ep, c->group, c->seq, ENOMEM, "out of memory for the job's collectives");
		cluster_job_fail(j, ENOMEM, j->coll_started, "out of memory for the job's collectives");
		return;
	}
	slot = g ? grp_slot(g, ep->rank) : -1;
	if (slot < 0) {
		/* A group this rank is not in here: its handle came from a
		 * split this node saw otherwise (a client that wrote over its
		 * result), or the group's id collided with another's. */
		char why[CTL_ERRTEXT_MAX + 1];

		snprintf(why, sizeof(why), "rank %u posted operation %u on group %08x, which it is not in on node %u",
			 ep->rank, c->seq, c->group, coll.self);
		sess_coll_done(ep, c->group, c->seq, EINVAL, why);
		return;
	}
	if (g->left[slot]) {
		ep_fail(ep, "posted a collective operation on a group it left");
		return;
	}
	if (c->seq != g->posted[slot] + 1) {
		ep_fail(ep, "posted collective operations out of order");
		return;
	}
	g->posted[slot] = c->seq;
	if (c->prev_seq) {
		/* (a group of this rank's: its own report, on its own operations) */
		struct cgrp *pg = c->prev_group == g->id ? g : grp_find(cj, c->prev_group);

		if (pg && grp_slot(pg, ep->rank) >= 0 && c->prev_seq <= pg->posted[grp_slot(pg, ep->rank)])
			coll_report(pg, c->prev_seq, c->prev_us);
	}
	op = cop_get(g, c->seq, 0, NULL);
	if (!op && grp_doomed(g, c->seq, &derr, &dwhy)) {
		/* (an operation that exists answers when it ends, once) */
		sess_coll_done(ep, g->id, c->seq, derr, dwhy);
		return;
	}
	if (!op) {
		int full = 0;

		op = cop_get(g, c->seq, 1, &full);
		if (!op && full) {
			ep_fail(ep, "more collective operations outstanding than a group (256) or a job (4096) may have");
			return;
		}
		if (!op) {
			char why[CTL_ERRTEXT_MAX + 1];

			snprintf(why, sizeof(why), "out of memory for collective operation %u", c->seq);
			sess_coll_done(ep, g->id, c->seq, ENOMEM, why);
			grp_fail(g, ENOMEM, c->seq - 1, why);
			return;
		}
	}
	if (op->kind && op->kind != c->kind) {
		cop_end(op, EINVAL, "the ranks posted different operations");
	} else if (!op->kind && op->piece_kind && op->piece_kind != (c->kind | (c->flags & ~CTL_COLL_IN_PLACE))) {
		kind_mismatch(op, op->piece_kind, c->kind | (c->flags & ~CTL_COLL_IN_PLACE));
	} else if (!op->kind && op->piece_kind && ctl_coll_has_root(c->kind) &&
		   (op->piece_root & WIRE_COLL_ROOT_MASK) != c->root) {
		root_mismatch(op, UINT32_MAX, op->piece_root & WIRE_COLL_ROOT_MASK, c->root);
	} else if (op->kind && ((op->count != c->count && c->kind != CTL_COLL_SCATTERV && c->kind != CTL_COLL_GATHERV &&
				 c->kind != CTL_COLL_ALLGATHERV) ||
				op->strategy != c->strategy || op->root != c->root ||
				op->red != (c->flags & ~CTL_COLL_IN_PLACE))) {
		cop_end(op, EINVAL, op->root != c->root ? "the ranks named different roots"
			: op->strategy != c->strategy ? "the ranks forced different algorithms"
			: op->red != (c->flags & ~CTL_COLL_IN_PLACE) ? "the ranks named different types or operations"
								    : "the ranks posted different sizes");
	} else {
		op->kind = c->kind;
		op->count = c->count;
		op->strategy = c->strategy;
		op->root = c->root;
		op->red = c->flags & ~CTL_COLL_IN_PLACE;
	}
	if (!op->ended && post_buffers(op, ep, slot, c) < 0)
		cop_end(op, EINVAL, op->why);
	op->posted++;
	if (op->told)   /* it failed before this rank posted it */
		sess_coll_done(ep, g->id, op->seq, op->err, op->why);
	coll.work = 1;
	loop_kick();
}

static void piece_in(struct cjob *cj, uint32_t from, const struct wire_coll_piece *h, const uint8_t *data,
		     uint32_t n);

static void coll_rx(uint32_t from, const uint8_t *payload, uint32_t len)
{
	struct wire_coll_piece h;
	int64_t n = wire_coll_piece_decode(payload, len, &h);
	struct job *j;
	struct cjob *cj;

	if (n < 0) {
		log_rl_warn("malformed collective piece from node %u; dropped", from);
		return;
	}
	cj = cjob_by_id(h.job, h.gen);
	j = cj ? cj->j : job_by_id(h.job, (uint8_t)h.gen);
	if (!j)
		return;         /* a job that ended here (or never was) */
	if (!cj && (!j->ready || j->coll_pre)) {
		/* Not started here yet: it waits, within COLL_PRE_MAX pieces
		 * of the job, COLL_EARLY_MAX bytes and its user's memory (or
		 * the job fails: dropped, it would leave the operation waiting
		 * for ever). */
		uint64_t bytes = sizeof(struct pre) + len;
		struct pre *p;

		if (j->coll_pre >= COLL_PRE_MAX || j->coll_pre_bytes + bytes > COLL_EARLY_MAX ||
		    user_take_coll(j->user, bytes) < 0) {
			char why[CTL_ERRTEXT_MAX + 1];

			snprintf(why, sizeof(why), "collective pieces from other nodes before job %s started on node "
				 "%u: more than %s", j->name, coll.self, j->coll_pre >= COLL_PRE_MAX ? "4096" :
				 j->coll_pre_bytes + bytes > COLL_EARLY_MAX ? "64 MiB" : "its user's memory");
			log_rl_warn("job %s (uid %u): %s", j->name, j->uid, why);
			cluster_job_fail(j, ENOBUFS, j->coll_started, why);
			return;
		}
		p = malloc(bytes);
		if (!p) {
			user_give_coll(j->user, bytes);
			cluster_job_fail(j, ENOMEM, j->coll_started, "out of memory for an early collective piece");
			return;
		}
		p->next = NULL;
		p->from = from;
		p->len = len;
		p->j = j;
		job_hold(j);
		j->coll_pre++;
		j->coll_pre_bytes += bytes;
		memcpy(p->payload, payload, len);
		*coll.pre_tail = p;
		coll.pre_tail = &p->next;
		coll.work = 1;
		return;
	}
	if (!cj)
		cj = cjob_get(j);
	if (!cj) {
		cluster_job_fail(j, ENOMEM, j->coll_started, "out of memory for the job's collectives");
		return;
	}
	piece_in(cj, from, &h, payload + sizeof(h), (uint32_t)n);
}

/* Frees p (out of coll.pre already), giving back what it took. */
static void pre_free(struct pre *p)
{
	struct job *j = p->j;
	uint64_t bytes = sizeof(struct pre) + p->len;

	j->coll_pre--;
	j->coll_pre_bytes -= bytes;
	user_give_coll(j->user, bytes);
	job_put(j);
	free(p);
}

/* The pieces that waited for their jobs to start here: those of jobs now
 * ready go in, in order; those of jobs gone are dropped. */
static void pre_poll(void)
{
	struct pre **pp = &coll.pre;

	while (*pp) {
		struct pre *p = *pp;
		struct job *j = p->j;
		struct cjob *cj = NULL;
		int go = j->ready && !j->gone && !j->stale;

		if (!go && !j->gone && !j->stale) {
			pp = &p->next;
			continue;
		}
		*pp = p->next;
		if (!*pp)
			coll.pre_tail = pp;
		if (go && (cj = cjob_get(j))) {
			struct wire_coll_piece h;
			int64_t n = wire_coll_piece_decode(p->payload, p->len, &h);

			if (n >= 0)     /* (it was decoded when it came) */
				piece_in(cj, p->from, &h, p->payload + sizeof(h), (uint32_t)n);
		} else if (go) {
			cluster_job_fail(j, ENOMEM, j->coll_started, "out of memory for the job's collectives");
		}
		pre_free(p);
	}
}

/* --- groups (ferry_split) ---
 *
 * A split is an all-to-all of {color, key} (CTL_COLL_SPLIT) over its parent
 * group; when it completes here, before its ranks hear so, this node makes
 * the groups its local ranks' colors name, from the table the first local
 * rank received (every rank received the same: each rank's blocks are all
 * its own color and key), members ordered by (key, rank in the parent); the
 * client computes the same from its copy.  So every node that hosts ranks of
 * a group has the group from the moment its ranks can use it, whatever its
 * ranks do next; pieces that come before (another node finished the split
 * first and its ranks went on) wait in cj->gearly, within COLL_EARLY_MAX.
 *
 * A split group ends here when each of its ranks here left it (GROUP_FREE,
 * or the rank left the job) and nothing of it runs; a rank that leaves
 * first makes this node send a BREAK to every node of the group: the
 * operations that rank did not post fail everywhere (those it posted may
 * complete).  An operation that fails here breaks the group from it on the
 * same way.  Whole-job failures (cluster.h) end a split group's operations
 * only when the job lost a node or link, or a job operation failed
 * (j->coll_groups_fail): ranks leaving are the group's own business. */

/* 1 if split group id of cj ended here (a late piece for it is dropped). */
static int grp_freed(const struct cjob *cj, uint32_t id)
{
	for (uint32_t i = 0; i < cj->nfreed && i < COLL_FREED_IDS; i++)
		if (cj->freed[i] == id)
			return 1;
	return 0;
}

/* Sends g's BREAK from operation ok + 1 on to its other nodes. */
static void grp_tell_break(struct cgrp *g)
{
	uint8_t buf[sizeof(struct wire_coll_piece) + sizeof(struct wire_coll_break) + CTL_ERRTEXT_MAX];
	uint32_t tl = (uint32_t)strnlen(g->why, CTL_ERRTEXT_MAX);
	struct wire_coll_break b = { .err = g->broken, .text_len = tl };
	struct wire_coll_piece h = {
		.job = g->cj->j->id, .gen = g->cj->j->gen, .op = g->ok + 1, .msg = WIRE_COLL_MSG_BREAK,
		.from = g->me, .group = g->id, .offset = 0, .total = sizeof(b) + tl,
	};

	if (g->ok == UINT32_MAX)
		return;
	wire_coll_piece_encode(buf, &h);
	memcpy(buf + sizeof(h), &b, sizeof(b));
	memcpy(buf + sizeof(h) + sizeof(b), g->why, tl);
	for (uint32_t i = 0; i < g->G; i++)
		if (i != g->me)
			ctlq_send(g->nodes[i], WIRE_CTL_COLL, buf, (uint32_t)(sizeof(h) + sizeof(b) + tl));
}

/* Split group g is broken from operation ok + 1 on (err, why); tell: this
 * node found it, and tells the group's other nodes.  A later break only
 * lowers ok. */
static void grp_break(struct cgrp *g, int err, uint32_t ok, const char *why, int tell)
{
	if (g->broken && ok >= g->ok)
		return;
	if (!g->broken) {
		g->broken = err;
		snprintf(g->why, sizeof(g->why), "%s", why);
		log_rl_info("job %s (uid %u): group %08x broken from its operation %u on: %s", g->cj->j->name,
			    g->cj->j->uid, g->id, ok + 1, why);
	}
	g->ok = ok;
	coll.work = 1;
	if (tell)
		grp_tell_break(g);
}

/* A BREAK from node index h->from of g (checked against the node it came
 * from): the stream in data, n bytes. */
static void break_in(struct cgrp *g, const struct wire_coll_piece *h, const uint8_t *data, uint32_t n)
{
	char why[CTL_ERRTEXT_MAX + 1];
	int err;

	if (!g->id || wire_coll_break_decode(h, data, n, &err, why, sizeof(why)) < 0) {
		log_rl_warn("job %s: malformed group break from node %u; dropped", g->cj->j->name,
			    g->nodes[h->from]);
		return;
	}
	grp_break(g, err, h->op - 1, why, 0);
}

/* --- holding back ---
 *
 * Pieces for an operation this node has not started (its ranks here post
 * it later) wait here as early pieces, within COLL_EARLY_MAX per job and
 * the user's memory.  Rather than letting other nodes fill that and fail the
 * job, this node holds them back (WIRE_COLL_MSG_HOLD, proto/coll.h): once
 * the job's early pieces take COLL_HOLD_BYTES, the node that sent the next
 * one hears "hold back your pieces of this group from operation
 * g->started + 1 on" (the first not started here).  When an operation
 * starts here, the nodes told hear the new first one (cop_start), so a
 * started operation's pieces always go on; once the job's early pieces
 * take COLL_RESUME_BYTES or less, they hear "go on" (hold_poll, one walk
 * over the job's groups: no turn of the loop looks at idle groups).  The
 * resume is the job's, not each group's: a group whose nodes were told
 * stays told while another group of the job keeps pieces waiting, and its
 * operations then wait for that update (one message) before their pieces
 * leave.  A sending node keeps what
 * it heard per peer (g->hold), and send_piece answers -EAGAIN for a piece
 * that must wait: the executor sends it at a later turn, as for a full link.
 *
 * Why it cannot deadlock: only pieces of operations not started here wait,
 * and an operation starts here when its ranks here post it, which needs
 * nothing from another node but the operations before it, which started
 * here (so theirs never wait).  Why it is enough: what is on its way when
 * the HOLD leaves (a link's window per sending node, limits.link_bytes,
 * and what the nodes between pass on) still comes, into the room between
 * COLL_HOLD_BYTES and COLL_EARLY_MAX; beyond that, the job fails as before
 * (more nodes sending than the room holds windows).  HOLDs travel as
 * control items (ctlq_send: never refused, in order between two nodes), so
 * the last one a node sent is the one in force.  Pieces for split groups
 * not made here yet (cj->gearly) and for jobs not started here (coll.pre)
 * are not held back: the time they wait is the time a split or a GO takes
 * to reach every node. */

/* A zeroed array of n bytes for g, charged to its user with g's others
 * (g->mem, given back when g is freed); NULL if it cannot have it. */
static void *grp_array(struct cgrp *g, size_t n)
{
	void *p;

	if (user_take_coll(g->cj->j->user, n) < 0)
		return NULL;
	if (!(p = calloc(n, 1))) {
		user_give_coll(g->cj->j->user, n);
		return NULL;
	}
	g->mem += n;
	return p;
}

/* Tells node index i of g to hold back its pieces of operations from
 * `from` on (on), or to go on (!on). */
static void hold_tell(struct cgrp *g, uint32_t i, int on, uint32_t from)
{
	uint8_t buf[sizeof(struct wire_coll_piece) + sizeof(struct wire_coll_hold)];
	struct wire_coll_hold b = { .on = (uint32_t)on };
	struct wire_coll_piece h = {
		.job = g->cj->j->id, .gen = g->cj->j->gen, .op = on ? from : 1, .msg = WIRE_COLL_MSG_HOLD,
		.from = g->me, .group = g->id, .offset = 0, .total = sizeof(b),
	};

	wire_coll_piece_encode(buf, &h);
	memcpy(buf + sizeof(h), &b, sizeof(b));
	ctlq_send(g->nodes[i], WIRE_CTL_COLL, buf, (uint32_t)sizeof(buf));
	g->cj->holds_sent += on;
}

/* An early piece from node index i of g was kept: i is told to hold back
 * if the job's early pieces take enough (and it was not told yet). */
static void hold_check(struct cgrp *g, uint32_t i)
{
	struct cjob *cj = g->cj;

	if (cj->early_bytes < COLL_HOLD_BYTES || (g->told && g->told[i]) || i == g->me)
		return;
	if (!g->told && !(g->told = grp_array(g, g->G)))
		return;         /* (the cap still holds: COLL_EARLY_MAX) */
	if (g->ntold && g->hold_from != g->started + 1)
		for (uint32_t k = 0; k < g->G; k++)     /* (the others first: one first for all) */
			if (g->told[k])
				hold_tell(g, k, 1, g->started + 1);
	g->hold_from = g->started + 1;
	g->told[i] = 1;
	g->ntold++;
	cj->ntold++;
	hold_tell(g, i, 1, g->hold_from);
	log_rl_info("job %s (uid %u): %llu bytes of collective pieces wait for operations not started here; node %u "
		    "holds back its pieces of group %08x from operation %u on", cj->j->name, cj->j->uid,
		    (unsigned long long)cj->early_bytes, g->nodes[i], g->id, g->hold_from);
}

/* The nodes g told hear the first operation not started here now, or to
 * go on (all: resume). */
static void hold_move(struct cgrp *g, int resume)
{
	if (!g->ntold || (!resume && g->hold_from == g->started + 1))
		return;
	g->hold_from = g->started + 1;
	for (uint32_t k = 0; k < g->G; k++)
		if (g->told[k]) {
			hold_tell(g, k, !resume, g->hold_from);
			if (resume) {
				g->told[k] = 0;
				g->ntold--;
				g->cj->ntold--;
			}
		}
}

/* cj's early pieces take COLL_RESUME_BYTES or less: every node told hears
 * "go on" (one walk over the groups, then cj->ntold is 0). */
static void hold_poll(struct cjob *cj)
{
	for (struct cgrp *g = cj->groups; g && cj->ntold; g = g->next)
		hold_move(g, 1);
}

/* A HOLD from node index h->from of g (checked against the node it came
 * from): the stream in data, n bytes. */
static void hold_in(struct cgrp *g, const struct wire_coll_piece *h, const uint8_t *data, uint32_t n)
{
	int on;

	if (wire_coll_hold_decode(h, data, n, &on) < 0) {
		log_rl_warn("job %s: malformed collective HOLD from node %u; dropped", g->cj->j->name,
			    g->nodes[h->from]);
		return;
	}
	if (!g->hold && !(g->hold = grp_array(g, g->G * sizeof(*g->hold)))) {
		log_rl_warn("job %s (uid %u): no memory for a collective HOLD from node %u; not held back",
			    g->cj->j->name, g->cj->j->uid, g->nodes[h->from]);
		return;
	}
	g->hold[h->from] = on ? h->op : 0;
	grp_busy(g);            /* (what waited may go now) */
	coll.work = 1;
}

/* Keeps a copy of a piece that came early (n stream bytes at data) at
 * *tail_p (which then points past it), within COLL_EARLY_MAX per job and
 * its user's memory: 0, or -ENOBUFS / -ENOMEM with *why_p saying why. */
static int early_keep(struct cjob *cj, struct early ***tail_p, uint32_t from, const struct wire_coll_piece *h,
		      const uint8_t *data, uint32_t n, const char **why_p)
{
	struct early *e;

	uint64_t bytes = early_cost(n);

	if (cj->early_bytes + bytes > COLL_EARLY_MAX) {
		*why_p = "other nodes are too far ahead in the job's collectives";
		return -ENOBUFS;
	}
	if (user_take_coll(cj->j->user, bytes) < 0) {
		*why_p = user_refusal();
		return -ENOBUFS;
	}
	e = malloc(sizeof(*e) + (size_t)n + 1);
	if (!e) {
		user_give_coll(cj->j->user, bytes);
		*why_p = "out of memory for an early piece";
		return -ENOMEM;
	}
	e->next = NULL;
	e->h = *h;
	e->from = from;
	e->len = n;
	memcpy(e->data, data, n);
	**tail_p = e;
	*tail_p = &e->next;
	cj->early_bytes += bytes;
	if (cj->early_bytes > cj->early_max)
		cj->early_max = cj->early_bytes;
	return 0;
}

/* Keeps a piece for split group h->group, not made here yet; the job
 * fails if it cannot. */
static void gearly_keep(struct cjob *cj, uint32_t from, const struct wire_coll_piece *h, const uint8_t *data,
			uint32_t n)
{
	const char *why;
	int ret = early_keep(cj, &cj->gearly_tail, from, h, data, n, &why);

	if (ret < 0) {
		char text[CTL_ERRTEXT_MAX + 1];

		snprintf(text, sizeof(text), "a piece for a group not made on node %u yet: %s", coll.self, why);
		log_rl_warn("job %s (uid %u): %s", cj->j->name, cj->j->uid, text);
		cluster_job_fail(cj->j, -ret, cj->j->coll_started, text);
	}
}

static void grp_piece(struct cgrp *g, uint32_t from, const struct wire_coll_piece *h, const uint8_t *data,
		      uint32_t n);
static uint32_t left_to_post(const struct cgrp *g, uint32_t seq);

/* The pieces that waited for split group g (just made), in order. */
static void gearly_replay(struct cjob *cj, struct cgrp *g)
{
	struct early **pp = &cj->gearly;

	while (*pp) {
		struct early *e = *pp;

		if (e->h.group != g->id) {
			pp = &e->next;
			continue;
		}
		*pp = e->next;
		if (!*pp)
			cj->gearly_tail = pp;
		cj->early_bytes -= early_cost(e->len);
		user_give_coll(cj->j->user, early_cost(e->len));
		grp_piece(g, e->from, &e->h, e->data, e->len);
		free(e);
	}
}

static int u64_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Makes the group of color out of split op's parent, from t (the parent's
 * {color, key} by rank).  0, or -errno with why. */
static int split_one(struct cop *op, const int32_t (*t)[2], int32_t color, char *why, size_t cap)
{
	struct cgrp *pg = op->g, *g, *old;
	struct cjob *cj = pg->cj;
	struct job *j = cj->j;
	uint64_t *order, bytes;
	uint32_t n = 0;

	for (uint32_t r = 0; r < pg->size; r++)
		n += t[r][0] == color;
	bytes = grp_bytes(n);
	if (cj->ngroups >= COLL_MAX_GROUPS) {
		snprintf(why, cap, "more than %u groups of job %s on node %u", COLL_MAX_GROUPS, j->name, coll.self);
		return -ENOSPC;
	}
	if (user_take_coll(j->user, bytes) < 0) {
		snprintf(why, cap, "%s", user_refusal());
		return -ENOBUFS;
	}
	order = malloc(((size_t)n + 1) * sizeof(*order));
	g = calloc(1, sizeof(*g));
	if (g) {
		g->cj = cj;
		g->mem = bytes;
		g->size = n;
		g->members = malloc(((size_t)n + 1) * sizeof(*g->members));
	}
	if (!order || !g || !g->members) {
		free(order);
		if (g)
			grp_free(g);
		else
			user_give_coll(j->user, bytes);
		snprintf(why, cap, "out of memory for a group");
		return -ENOMEM;
	}
	/* by (key, rank in the parent): one sortable number each */
	n = 0;
	for (uint32_t r = 0; r < pg->size; r++)
		if (t[r][0] == color)
			order[n++] = (uint64_t)((uint32_t)t[r][1] ^ 0x80000000u) << 32 | r;
	qsort(order, n, sizeof(*order), u64_cmp);
	for (uint32_t i = 0; i < n; i++)
		g->members[i] = grp_job_rank(pg, (uint32_t)order[i]);
	free(order);
	g->id = coll_group_id(pg->id, op->seq, g->members[0]);
	if ((old = grp_find(cj, g->id)) || grp_freed(cj, g->id)) {
		/* Another group with the same id (coll_group_id): neither
		 * can tell its pieces from the other's. */
		snprintf(why, cap, "group %08x of job %s: its id is another group's too (split again)", g->id,
			 j->name);
		if (old)
			grp_break(old, EEXIST, old->started, why, 1);
		grp_free(g);
		return -EEXIST;
	}
	if (grp_layout(g) < 0) {
		grp_free(g);
		snprintf(why, cap, "out of memory for a group");
		return -ENOMEM;
	}
	g->parent = pg;
	g->split_seq = op->seq;
	pg->children++;
	/* after the job's, the others in the order they came */
	g->next = pg->cj->groups->next;
	g->pprev = &pg->cj->groups->next;
	if (g->next)
		g->next->pprev = &g->next;
	pg->cj->groups->next = g;
	cj->ngroups++;
	grp_busy(g);
	gearly_replay(cj, g);
	return 0;
}

/* Split op completed here: the groups of its local ranks' colors.  0, or
 * -errno with why in op->why. */
static int split_groups(struct cop *op)
{
	struct cgrp *pg = op->g;
	uint64_t bytes = 8ull * pg->size;
	const int32_t (*t)[2];
	int ret = 0;

	if (!pg->nlocal || !op->slots || !op->slots[0].own) {
		snprintf(op->why, sizeof(op->why), "out of memory for a split");
		return -ENOMEM;
	}
	/* The daemon's own table (split_post: out of any client's reach, and
	 * malloc's alignment at a multiple of 8 bytes in). */
	t = (const int32_t (*)[2])op->slots[0].rp;
	for (uint32_t k = 0; k < pg->nlocal && !ret; k++) {
		int32_t color = t[grp_local(pg)[k]][0];
		int seen = color < 0;

		for (uint32_t i = 0; i < k && !seen; i++)
			seen = t[grp_local(pg)[i]][0] == color;
		if (!seen)
			ret = split_one(op, t, color, op->why, sizeof(op->why));
	}
	/* Each rank's copy, from which libferry computes its handle. */
	for (uint32_t k = 0; k < pg->nlocal && !ret; k++)
		memcpy(op->slots[k].crp, op->slots[k].rp, bytes);
	if (ret < 0) {
		/* The split fails (from here on in the parent, everywhere:
		 * its groups elsewhere are doomed through their parent); the
		 * ones it made here go, their ranks never having had them. */
		for (struct cgrp *g = pg->cj->groups; g; g = g->next)
			if (g->parent == pg && g->split_seq == op->seq)
				memset(g->left, 2, g->nlocal);
	}
	return ret;
}

/* A decoded piece of cj's job from node from, for group h->group. */
static void piece_in(struct cjob *cj, uint32_t from, const struct wire_coll_piece *h, const uint8_t *data,
		     uint32_t n)
{
	struct cgrp *g = grp_find(cj, h->group);

	const struct cgrp *jg = cj->groups;     /* the job's */

	if (g)
		grp_piece(g, from, h, data, n);
	else if (!bsearch(&from, jg->nodes, jg->G, sizeof(*jg->nodes), node_cmp))
		/* only a node of the job makes its groups: not kept (nor
		 * counted against the job, which it could fail) */
		log_rl_warn("job %s: a collective piece for group %08x from node %u, which has no rank of the job; "
			    "dropped", cj->j->name, h->group, from);
	else if (h->group && !grp_freed(cj, h->group))
		gearly_keep(cj, from, h, data, n);
	/* else: a group that ended here (or, for the job, no state) */
}

static void grp_piece(struct cgrp *g, uint32_t from, const struct wire_coll_piece *h, const uint8_t *data,
		      uint32_t n)
{
	struct job *j = g->cj->j;
	struct cop *op;
	const char *dwhy, *ewhy;
	int full = 0, derr, ret;
	uint32_t want;

	if (h->from >= g->G || g->nodes[h->from] != from) {
		log_rl_warn("job %s: collective piece from node %u claims to be from node index %u of %u; dropped",
			    j->name, from, h->from, g->G);
		return;
	}
	if (h->msg == WIRE_COLL_MSG_BREAK) {
		break_in(g, h, data, n);
		return;
	}
	if (h->msg == WIRE_COLL_MSG_HOLD) {
		hold_in(g, h, data, n);
		return;
	}
	/* No node can be further ahead than this: a rank there posts
	 * operation s with at most COLL_EP_PENDING - 1 others not yet ended
	 * there, so s - COLL_EP_PENDING ended there, and an operation ends on
	 * a node only once its root's node, or every node, started it (the
	 * root's word; an all-to-all or barrier waits for all), which in turn
	 * is at most COLL_EP_PENDING ahead of this node: three times that, to
	 * be sure.  A piece beyond would make an operation that lives as long
	 * as the group (review of issue 12): the sender is broken, and the
	 * group fails. */
	if (h->op > g->started + 3ull * COLL_EP_PENDING) {
		char why[CTL_ERRTEXT_MAX + 1];

		snprintf(why, sizeof(why), "node %u sent a piece of collective operation %u, while node %u started "
			 "only %u", from, h->op, coll.self, g->started);
		log_rl_warn("job %s (uid %u): %s", j->name, j->uid, why);
		if (!grp_doomed(g, g->started + 1, &derr, &dwhy))
			grp_fail(g, EPROTO, g->started, why);
		return;
	}
	/* A piece makes its operation only if a rank here has still to post
	 * it: once they all did, it was made then, and is gone if it is not
	 * there (ended and told: a late piece must not make it again and tell
	 * them twice). */
	op = cop_get(g, h->op, !grp_doomed(g, h->op, &derr, &dwhy) && left_to_post(g, h->op) > 0, &full);
	if (!op && full && !grp_doomed(g, h->op, &derr, &dwhy)) {
		char why[CTL_ERRTEXT_MAX + 1];

		snprintf(why, sizeof(why), "node %u is more than %u collective operations ahead of node %u", from,
			 COLL_MAX_OPS, coll.self);
		log_rl_warn("job %s (uid %u): %s", j->name, j->uid, why);
		grp_fail(g, ENOBUFS, g->started, why);
		return;
	}
	if (!op || op->ended)
		return;         /* after the operation ended here: it failed, or the job did */
	coll.work = 1;
	want = op->kind ? op->kind | op->red : op->piece_kind;  /* (0: neither posted nor named yet) */
	if (want && h->kind != want) {
		kind_mismatch(op, h->kind, want);
		return;
	}
	if (want) {
		uint32_t k = h->kind & WIRE_COLL_KIND_MAX;
		uint32_t ours = op->kind ? op->root : op->piece_root & WIRE_COLL_ROOT_MASK;
		uint32_t tag = op->started ? op_tag(op) : op->piece_root >> WIRE_COLL_ALG_SHIFT;

		if (ctl_coll_has_root(k) && (h->root & WIRE_COLL_ROOT_MASK) != ours) {
			root_mismatch(op, from, h->root & WIRE_COLL_ROOT_MASK, ours);
			return;
		}
		/* (not started, and no piece before: cop_start checks this
		 * one's, kept in piece_root) */
		if ((op->started || op->piece_kind) && h->root >> WIRE_COLL_ALG_SHIFT != tag) {
			plan_mismatch(op, k, from, h->root >> WIRE_COLL_ALG_SHIFT, tag);
			return;
		}
	}
	op->piece_kind = h->kind;
	op->piece_root = h->root;
	if (op->started && op->early) {
		/* Behind the early pieces still to hand it (a stream's pieces
		 * in order), unless the job's early pieces are too many to
		 * keep one more: then all of them go now, whatever the turn's
		 * budget, and this one straight after.  (A started operation
		 * must never fail for want of room to queue what it could take
		 * at once: an earlier operation using every turn's budget
		 * would otherwise let its queue grow to the limit.) */
		if (!early_keep(g->cj, &op->early_tail, from, h, data, n, &ewhy))
			return;
		early_replay_all(op);
		if (op->ended)
			return;
	}
	if (op->started) {
		/* a piece that fails it leaves the executor failed: coll_poll
		 * ends the operation and the job */
		(void)coll_exec_deliver(op->x, h, data, n);
		return;
	}
	if ((ret = early_keep(g->cj, &op->early_tail, from, h, data, n, &ewhy)) < 0)
		cop_end(op, -ret, ewhy);
	else
		hold_check(g, h->from);
}

void coll_group_free(struct ep *ep, uint32_t id)
{
	struct cjob *cj = cjob_find(ep->job);
	struct cgrp *g = cj && id ? grp_find(cj, id) : NULL;
	int slot = g ? grp_slot(g, ep->rank) : -1;

	if (slot < 0 || g->left[slot]) {
		/* Its client computed another group than this node from the
		 * split (another rank sent it a different color or key): what
		 * it posts on that group fails already (coll_post); leaving it
		 * changes nothing. */
		log_rl_info("job %s: rank %u left group %08x, which it is not in here; ignored", ep->job->name, ep->rank,
			    id);
		return;
	}
	g->left[slot] = 1;
	grp_busy(g);
	loop_kick();
}

/* --- the loop --- */

/* 1 if g's local rank in slot k left the group (or the job). */
static int grp_gone(const struct cgrp *g, uint32_t k)
{
	return g->left[k] || !g->cj->j->ranks[grp_job_rank(g, grp_local(g)[k])].ep;
}

/* Tells the local ranks that posted op how it ended. */
static void cop_tell(struct cop *op)
{
	struct cgrp *g = op->g;
	struct cjob *cj = g->cj;
	struct job *j = cj->j;

	for (uint32_t k = 0; k < g->nlocal; k++) {
		struct ep *ep = j->ranks[grp_job_rank(g, grp_local(g)[k])].ep;

		if (ep && !g->left[k] && g->posted[k] >= op->seq)
			sess_coll_done(ep, g->id, op->seq, op->err, op->why);
	}
	op->told = 1;
	if (op->started) {
		cj->ops_run++;
		cj->ops_failed += op->err != 0;
		cj->last_kind = op->kind;
		cj->last_alg = op->alg;
		cj->last_us = op->ns / 1000;
	}
}

/* Local ranks still in g that have not posted operation seq. */
static uint32_t left_to_post(const struct cgrp *g, uint32_t seq)
{
	uint32_t n = 0;

	for (uint32_t k = 0; k < g->nlocal; k++)
		n += !grp_gone(g, k) && g->posted[k] < seq;
	return n;
}

/* The first local rank (job rank) that left g before posting operation
 * seq, or UINT32_MAX. */
static uint32_t left_before(const struct cgrp *g, uint32_t seq)
{
	for (uint32_t k = 0; k < g->nlocal; k++)
		if (grp_gone(g, k) && g->posted[k] < seq)
			return grp_job_rank(g, grp_local(g)[k]);
	return UINT32_MAX;
}

/* Split group g's local ranks that left it since the last look: each
 * breaks the group after the operations it posted (the job's own ranks
 * leaving go through its home: cluster.c's LEAVE). */
static void grp_leaves(struct cgrp *g)
{
	for (uint32_t k = 0; k < g->nlocal; k++) {
		char why[CTL_ERRTEXT_MAX + 1];

		if (g->left[k] == 2 || !grp_gone(g, k))
			continue;
		g->left[k] = 2;
		snprintf(why, sizeof(why), "rank %u of group %08x (job rank %u, on node %u) left it after its "
			 "operation %u", grp_local(g)[k], g->id, grp_job_rank(g, grp_local(g)[k]), coll.self,
			 g->posted[k]);
		grp_break(g, EPIPE, g->posted[k], why, 1);
	}
}

static int grp_poll(struct cgrp *g)
{
	struct cjob *cj = g->cj;
	struct job *j = cj->j;
	int work = 0;

	if (g->id)
		grp_leaves(g);
	for (struct cop **pp = &g->ops, *op; (op = *pp);) {
		const char *dwhy;
		uint32_t gone;
		int derr;

		/* The job or group failed: what the failure left able to
		 * complete goes on (coll.h), the rest fails; so does what a
		 * rank here left before posting: both before anything
		 * starts. */
		if (!op->ended && grp_doomed(g, op->seq, &derr, &dwhy))
			cop_end(op, derr, dwhy);
		if (!op->ended && !op->started && (gone = left_before(g, op->seq)) != UINT32_MAX) {
			char why[CTL_ERRTEXT_MAX + 1];

			snprintf(why, sizeof(why), "rank %u (on node %u) left job %s before collective operation %u",
				 gone, coll.self, j->name, op->seq);
			cop_end(op, EPIPE, why);
		}
		if (!op->ended && !op->started && op->kind && op->posted >= g->nlocal) {
			cop_start(op);
			work = 1;
		}
		if (!op->ended && op->started && op->early) {
			early_replay(op);
			work |= op->early != NULL;      /* (the rest at the next turn) */
		}
		if (!op->ended && op->started) {
			int r = coll_exec_run_budget(op->x, &coll.budget), e;

			if (r == 0 && coll_exec_busy(op->x))
				work = 1;       /* the budget ran out: the next turn goes on */

			if (r == 1 && op->kind == CTL_COLL_SPLIT && (e = split_groups(op)) < 0)
				cop_end(op, -e, op->why);       /* the groups could not be made */
			else if (r == 1)
				cop_end(op, 0, NULL);
			else if (r < 0)
				cop_end(op, -r, coll_exec_error(op->x));
		}
		if (!op->ended && cj->gone_ns && loop_now_ns() - cj->gone_ns >= COLL_GONE_GRACE_NS)
			cop_end(op, ETIMEDOUT, "no rank of the job is left on this node");
		if (op->ended && op->err && !op->told && !grp_doomed(g, op->seq, &derr, &dwhy)) {
			/* Failed here, for a reason of its own: it fails
			 * everywhere from this operation on. */
			char why[CTL_ERRTEXT_MAX + 100];

			snprintf(why, sizeof(why), "collective operation %u (%s) failed on node %u: %.180s", op->seq,
				 kind_name(op->kind ? op->kind : op->piece_kind), coll.self, op->why);
			snprintf(op->why, sizeof(op->why), "%.*s", (int)sizeof(op->why) - 1, why);
			log_rl_notice("job %s (uid %u): %s", j->name, j->uid, why);
			grp_fail(g, op->err, op->seq - 1, why);
		}
		if (op->ended && !op->told) {
			/* ranks that have not posted it yet hear it when they do
			 * (only a failure can end it before they all did) */
			cop_tell(op);
			work = 1;
		}
		/* It goes once told, unless a rank here still has to post it
		 * (and hear how it ended).  A piece that comes after finds
		 * nothing and is dropped (cop_get). */
		if (op->told && left_to_post(g, op->seq) == 0) {
			*pp = op->next;
			g->nops--;
			cop_free(op);
			work = 1;
			continue;
		}
		pp = &op->next;
	}
	return work;
}

/* 1 if an operation of g is running here (started, not ended). */
static int grp_running(const struct cgrp *g)
{
	for (const struct cop *op = g->ops; op; op = op->next)
		if (op->started && !op->ended)
			return 1;
	return 0;
}

/* Frees g (out of its list already) and its operations. */
static void grp_end(struct cgrp *g)
{
	while (g->ops) {
		struct cop *op = g->ops;

		g->ops = op->next;
		cop_free(op);
	}
	grp_free(g);
}

static int cjob_poll(struct cjob *cj)
{
	struct cgrp *list, *g;
	int work = 0;

	/* A rank here left the job (its endpoint went): the groups' leaves,
	 * once (grp_leaves). */
	if (cj->eps_seen != cj->j->eps_gone) {
		cj->eps_seen = cj->j->eps_gone;
		for (g = cj->groups; g; g = g->next)
			grp_busy(g);
	}
	list = cj->busy;
	cj->busy = NULL;
	while ((g = list)) {
		int all_left = 1;

		list = g->busy_next;
		g->busy = 0;
		cj->groups_polled++;
		work |= grp_poll(g);
		for (uint32_t k = 0; k < g->nlocal && all_left; k++)
			all_left = g->left[k] == 2;
		if (g->id && all_left && !grp_running(g) && !g->children && !g->busy) {
			/* every rank here left it (and its nodes were told),
			 * and no group split from it is left here */
			*g->pprev = g->next;
			if (g->next)
				g->next->pprev = g->pprev;
			cj->freed[cj->nfreed++ % COLL_FREED_IDS] = g->id;
			cj->ngroups--;
			hold_move(g, 1);        /* (nothing of it waits here any more) */
			if (g->parent) {
				g->parent->children--;
				grp_busy(g->parent);    /* (it may go now) */
			}
			grp_end(g);
			work = 1;
			continue;
		}
		if (g->ops)
			grp_busy(g);    /* its operations wait for posts, pieces, the budget */
	}
	if (cj->ntold && cj->early_bytes <= COLL_RESUME_BYTES)
		hold_poll(cj);  /* (once: everyone told hears "go on") */
	return work;
}

/* Frees cj (out of the list already), its groups and its job reference. */
static void cjob_free(struct cjob *cj)
{
	while (cj->groups) {
		struct cgrp *g = cj->groups;

		cj->groups = g->next;
		grp_end(g);
	}
	while (cj->gearly) {
		struct early *e = cj->gearly;

		cj->gearly = e->next;
		user_give_coll(cj->j->user, early_cost(e->len));
		free(e);
	}
	job_put(cj->j);
	free(cj);
}

/* 1 if an operation of cj is running here (started, not ended). */
static int cjob_running(const struct cjob *cj)
{
	for (const struct cgrp *g = cj->groups; g; g = g->next)
		if (grp_running(g))
			return 1;
	return 0;
}

static void gone_check(struct loop_timer *t)
{
	uint64_t next = 0;

	(void)t;
	coll.work = 1;  /* coll_poll runs in this turn of the loop */
	/* the next job whose grace ends */
	for (struct cjob *cj = coll.jobs; cj; cj = cj->next) {
		uint64_t when = cj->gone_ns + COLL_GONE_GRACE_NS + 1000000;

		if (cj->gone_ns && when > loop_now_ns() && (!next || when < next))
			next = when;
	}
	if (next)
		loop_timer_arm(&coll.gone_timer, next - loop_now_ns(), gone_check, NULL);
}

/* Whether ferryd may spin for the collectives: every endpoint here runs on
 * other CPUs than ferryd (ep_all_apart: its CPUs are its own, and no rank
 * waits for one), and an operation is under way (posted here, not ended). */
static int spin_for_some(void)
{
	if (!ep_all_apart())
		return 0;
	for (const struct cjob *cj = coll.jobs; cj; cj = cj->next)
		for (const struct cgrp *g = cj->busy; g; g = g->busy_next)     /* (every group with operations) */
			for (const struct cop *op = g->ops; op; op = op->next)
				if (!op->ended && op->posted)
					return 1;
	return 0;
}

int coll_poll(void)
{
	struct cjob **pp = &coll.jobs;
	int work = coll.work;

	coll.work = 0;
	coll.budget = COLL_TURN_BYTES;
	if (coll.pre)
		pre_poll();
	while (*pp) {
		struct cjob *cj = *pp;

		if (cj->j->gone && !cj->gone_ns) {
			/* Its grace ends at gone_ns + COLL_GONE_GRACE_NS; the
			 * timer wakes the loop at the earliest of those (an
			 * earlier job's is never pushed back by a later one). */
			uint64_t when = (cj->gone_ns = loop_now_ns()) + COLL_GONE_GRACE_NS + 1000000;

			if (!coll.gone_timer.armed || coll.gone_timer.when_ns > when)
				loop_timer_arm(&coll.gone_timer, when - loop_now_ns(), gone_check, NULL);
		}
		work |= cjob_poll(cj);
		if (cj->j->gone && !cjob_running(cj)) {
			/* no rank here any more, and nothing this node still
			 * runs for the others */
			*pp = cj->next;
			cjob_free(cj);
			continue;
		}
		pp = &cj->next;
	}
	ctlq_flush_sent();      /* what the executors sent, in as few frames as it fits */
	if (work)
		coll.worked_ns = loop_now_ns();
	loop_spin_until(coll.jobs && loop_now_ns() - coll.worked_ns < COLL_SPIN_NS && spin_for_some() ?
			coll.worked_ns + COLL_SPIN_NS : 0);
	if (!coll.budget && coll.jobs && coll.jobs->next) {
		/* The budget ran out: the first job goes last, so that the
		 * next turns serve the others first. */
		struct cjob *first = coll.jobs, **pp2 = &coll.jobs;

		coll.jobs = first->next;
		while (*pp2)
			pp2 = &(*pp2)->next;
		*pp2 = first;
		first->next = NULL;
	}
	return work;
}

/* The runtime functions j's home sent at GO (ferryctl stats: "fitted"). */
static uint32_t job_fitted(const struct job *j)
{
	uint32_t n = 0;

	for (uint32_t f = 0; f < CTL_FAMS; f++)
		for (uint32_t a = 0; a < CTL_FAM_ALGS_MAX; a++)
			n += j->coll_fn[f][a].tau_us > 0 || j->coll_fn[f][a].tc_ns > 0;
	return n;
}

void coll_write_stats(FILE *out, uid_t uid)
{
	if (!uid)       /* (every user's: the administrator's only) */
		fprintf(out, "coll rooted_direct %llu rooted_opt %llu rooted_sdf %llu rooted_orth %llu rooted_tree %llu "
			"gather_direct %llu gather_opt %llu gather_sdf %llu gather_orth %llu gather_tree %llu "
			"cost_samples %llu cost_samples_own %llu\n",
			(unsigned long long)coll.rooted[0], (unsigned long long)coll.rooted[1],
			(unsigned long long)coll.rooted[2], (unsigned long long)coll.rooted[3],
			(unsigned long long)coll.rooted[4], (unsigned long long)coll.gathers[0],
			(unsigned long long)coll.gathers[1], (unsigned long long)coll.gathers[2],
			(unsigned long long)coll.gathers[3], (unsigned long long)coll.gathers[4],
			(unsigned long long)coll.reports, (unsigned long long)coll.reports_own);
	for (struct cjob *cj = coll.jobs; cj; cj = cj->next) {
		uint32_t pending = 0;

		if (uid && cj->j->uid != uid)
			continue;
		for (struct cgrp *g = cj->groups; g; g = g->next)
			for (struct cop *op = g->ops; op; op = op->next)
				pending += !op->ended;
		fprintf(out, "coll job %s uid %u nodes %u groups %u ops_run %llu ops_failed %llu pending %u last %s "
			"alg %s last_us %llu link_waits %llu hold_waits %llu holds_sent %llu early_max %llu "
			"groups_polled %llu alpha_us %.1f beta_ns_per_byte %.3f%s fitted %u",
			cj->j->name,
			cj->j->uid, cj->groups->G, cj->ngroups - 1, (unsigned long long)cj->ops_run,
			(unsigned long long)cj->ops_failed, pending, cj->ops_run ? kind_name(cj->last_kind) : "-",
			cj->ops_run && cj->last_alg ? cj->last_alg : "-", (unsigned long long)cj->last_us,
			(unsigned long long)cj->link_waits, (unsigned long long)cj->hold_waits,
			(unsigned long long)cj->holds_sent, (unsigned long long)cj->early_max,
			(unsigned long long)cj->groups_polled, coll_alpha_us(cj->j),
			coll_beta_ns(cj->j),
			cj->j->coll_alpha_ns ? " measured" : " default", job_fitted(cj->j));
		for (int k = 0; k < A2A_STRATEGIES; k++)
			fprintf(out, " %s %llu", a2a_strategy_name((enum a2a_strategy)k), (unsigned long long)cj->chosen[k]);
		fprintf(out, " rooted_direct %llu rooted_opt %llu rooted_sdf %llu rooted_orth %llu rooted_tree %llu",
			(unsigned long long)cj->rooted[0], (unsigned long long)cj->rooted[1],
			(unsigned long long)cj->rooted[2], (unsigned long long)cj->rooted[3],
			(unsigned long long)cj->rooted[4]);
		fputc('\n', out);
	}
}

int coll_init(const struct conf *c, uint32_t self)
{
	coll.conf = c;
	coll.self = self;
	coll.pre_tail = &coll.pre;
	cluster_set_coll_rx(coll_rx);
	return 0;
}

void coll_fini(void)
{
	cluster_set_coll_rx(NULL);
	free(coll.torus.first);
	free(coll.torus.hop);
	free(coll.torus.order);
	scatter_plan_free(&coll.torus.base[0]);
	scatter_plan_free(&coll.torus.base[1]);
	memset(&coll.torus, 0, sizeof(coll.torus));
	while (coll.pre) {
		struct pre *p = coll.pre;

		coll.pre = p->next;
		pre_free(p);
	}
	coll.pre_tail = &coll.pre;
	loop_timer_cancel(&coll.gone_timer);
	while (coll.jobs) {
		struct cjob *cj = coll.jobs;

		coll.jobs = cj->next;
		cjob_free(cj);
	}
}
