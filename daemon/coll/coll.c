/* daemon/coll/coll.c - see coll.h.
 *
 * Ownership (coll.h): cjobs in one list, each holding its job; an operation
 * (struct cop) belongs to its cjob's list, ordered by number, and owns its
 * schedule, executor and the early pieces waiting for it.  Operations end
 * (ok or failed) from coll_poll, which tells the ranks and frees them;
 * events (a post, a piece) only mark and queue.
 */
#include "coll.h"

#include "exec.h"
#include "../cluster/cluster.h"
#include "../core/log.h"
#include "../core/loop.h"
#include "../fwd/ctlq.h"
#include "../local/endpoint.h"
#include "../local/job.h"
#include "../local/mem.h"
#include "../local/user.h"
#include "../plan/a2a.h"
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
/* A job whose ranks here all left keeps running the operations this node
 * started, for the other nodes, at most this long (then they end: nobody
 * here waits for them, and the job's state is freed). */
#define COLL_GONE_GRACE_NS (10ull * 1000000000u)

struct early {
	struct early *next;
	struct wire_coll_piece h;
	uint32_t len;
	uint8_t data[];
};

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

/* What one local rank posted for an operation: its buffers (their regions
 * held while the operation lasts). */
struct cslot {
	int posted;
	struct mem *sm, *rm;
	uint8_t *sp, *rp;
	uint64_t slen, rlen;
	uint64_t *vec;                  /* all-to-allv: its counts and displacements, copied (4 x size) */
};

struct cop {
	struct cop *next;
	struct cjob *cj;
	uint32_t seq;
	uint32_t kind;                  /* enum ctl_coll_kind; 0 until a local rank posted it */
	uint32_t posted;                /* local ranks that posted it */
	uint64_t count;                 /* the kind's count (all-to-all: bytes per block) */
	uint32_t strategy;              /* as posted: 0 automatic, else the algorithm + 1 */
	struct cslot *slots;            /* [cj->nlocal], by slot */
	uint8_t **sp, **rp;             /* [nlocal]: the schedule's buffers (mem) */
	uint64_t *slen, *rlen;
	uint64_t *counts, *displs;      /* all-to-all: [size], the same for every rank */
	int started, ended, told;
	int err;                        /* positive errno once ended badly */
	char why[CTL_ERRTEXT_MAX + 1];
	struct sched s;
	struct sched_mem mem;
	struct coll_exec *x;
	struct early *early, **early_tail;
	uint64_t early_bytes;
	uint64_t start_ns, ns;
	const char *alg;                /* the algorithm that ran */
};

struct cjob {
	struct cjob *next;
	struct job *j;                  /* held */
	uint32_t *posted;               /* [j->size]: the last operation each local rank posted */
	uint32_t *nodes, G, me;         /* the job's nodes by id; this node's index */
	uint32_t nlocal;                /* the job's ranks on this node (the table's, left or not) */
	uint32_t *node_first, *rank_at; /* [G + 1], [size]: ranks by node index (a2a_layout) */
	uint32_t *slot_of;              /* [size]: a local rank's slot (its place among them) */
	struct cop *ops;
	uint32_t nops;                  /* in ops */
	uint64_t gone_ns;               /* when its last rank here left, 0 while it has ranks here */
	uint64_t early_bytes;
	uint64_t ops_run, ops_failed, last_us;
	uint32_t last_kind;
	const char *last_alg;
};

static struct {
	const struct conf *conf;
	uint32_t self;
	struct cjob *jobs;
	int work;                       /* something to do at the next coll_poll */
	struct loop_timer gone_timer;   /* a job without ranks here may have to be ended */
	struct pre *pre, **pre_tail;    /* pieces of jobs not ready here yet, in order */
	uint8_t piece[sizeof(struct wire_coll_piece) + WIRE_COLL_PIECE_MAX];
} coll;

static const char *kind_name(uint32_t kind)
{
	switch (kind) {
	case CTL_COLL_BARRIER:
		return "barrier";
	case CTL_COLL_ALLTOALL:
		return "alltoall";
	case CTL_COLL_ALLTOALLV:
		return "alltoallv";
	}
	return "?";
}

/* --- jobs --- */

static int node_cmp(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

/* The job's nodes, sorted: index = the node's number in schedules. */
static int cjob_nodes(struct cjob *cj)
{
	struct job *j = cj->j;
	uint32_t n = 0;

	free(cj->nodes);
	cj->nodes = j->layout ? malloc(((size_t)j->size + 1) * sizeof(*cj->nodes)) : NULL;
	if (!cj->nodes)
		return -ENOMEM;
	for (uint32_t r = 0; r < j->size; r++)
		if (j->layout[r] != JOB_NO_NODE)
			cj->nodes[n++] = j->layout[r];
	qsort(cj->nodes, n, sizeof(*cj->nodes), node_cmp);
	cj->G = 0;
	for (uint32_t i = 0; i < n; i++)
		if (!cj->G || cj->nodes[cj->G - 1] != cj->nodes[i])
			cj->nodes[cj->G++] = cj->nodes[i];
	for (cj->me = 0; cj->me < cj->G && cj->nodes[cj->me] != coll.self; cj->me++)
		;
	if (cj->me == cj->G)
		return -ENOENT;
	/* Ranks by node, in rank order within a node: the planners' layout,
	 * and a local rank's slot. */
	cj->node_first = calloc((size_t)cj->G + 1, sizeof(*cj->node_first));
	cj->rank_at = calloc((size_t)j->size + 1, sizeof(*cj->rank_at));
	cj->slot_of = calloc((size_t)j->size + 1, sizeof(*cj->slot_of));
	uint32_t *fill = calloc((size_t)cj->G + 1, sizeof(*fill));
	uint32_t *idx = calloc((size_t)j->size + 1, sizeof(*idx));
	if (!cj->node_first || !cj->rank_at || !cj->slot_of || !fill || !idx) {
		free(fill);
		free(idx);
		return -ENOMEM;
	}
	for (uint32_t r = 0; r < j->size; r++) {
		uint32_t *at = bsearch(&j->layout[r], cj->nodes, cj->G, sizeof(*cj->nodes), node_cmp);

		if (!at) {
			free(fill);
			free(idx);
			return -ENOENT;         /* a rank on no node: the table is not whole */
		}
		idx[r] = (uint32_t)(at - cj->nodes);
		cj->node_first[idx[r] + 1]++;
	}
	for (uint32_t i = 0; i < cj->G; i++)
		cj->node_first[i + 1] += cj->node_first[i];
	for (uint32_t r = 0; r < j->size; r++) {
		cj->slot_of[r] = fill[idx[r]];
		cj->rank_at[cj->node_first[idx[r]] + fill[idx[r]]++] = r;
	}
	free(fill);
	free(idx);
	cj->nlocal = cj->node_first[cj->me + 1] - cj->node_first[cj->me];
	return 0;
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

static void cjob_free_arrays(struct cjob *cj)
{
	free(cj->posted);
	free(cj->nodes);
	free(cj->node_first);
	free(cj->rank_at);
	free(cj->slot_of);
}

/* The job's collective state, made at its first operation or piece (the
 * job is ready: its rank table is whole). */
static struct cjob *cjob_get(struct job *j)
{
	struct cjob *cj = cjob_find(j);

	if (cj)
		return cj;
	if (!j->ready)
		return NULL;
	cj = calloc(1, sizeof(*cj));
	if (!cj)
		return NULL;
	cj->j = j;
	cj->posted = calloc(j->size, sizeof(*cj->posted));
	if (!cj->posted || cjob_nodes(cj) < 0) {
		cjob_free_arrays(cj);
		free(cj);
		return NULL;
	}
	job_hold(j);
	cj->next = coll.jobs;
	coll.jobs = cj;
	return cj;
}

static void cop_free(struct cop *op)
{
	for (uint32_t i = 0; op->slots && i < op->cj->nlocal; i++) {
		mem_put(op->slots[i].sm);
		mem_put(op->slots[i].rm);
		if (op->slots[i].vec) {
			user_give_coll(op->cj->j->user, 32ull * op->cj->j->size);
			free(op->slots[i].vec);
		}
	}
	free(op->slots);
	free(op->sp);
	free(op->rp);
	free(op->slen);
	free(op->rlen);
	free(op->counts);
	free(op->displs);
	while (op->early) {
		struct early *e = op->early;

		op->early = e->next;
		op->cj->early_bytes -= e->len;
		user_give_coll(op->cj->j->user, e->len);
		free(e);
	}
	coll_exec_free(op->x);
	sched_free(&op->s);
	free(op);
}

/* Operation seq of cj, made if it is not there and make says so.  An
 * operation is not made again once it ended and went: operations start here
 * in order, so one at or below the last started (j->coll_started) that is
 * not in the list has gone.  NULL also when cj holds COLL_MAX_OPS (*full_p
 * set) or memory is short. */
static struct cop *cop_get(struct cjob *cj, uint32_t seq, int make, int *full_p)
{
	struct cop **pp = &cj->ops, *op;

	while (*pp && (*pp)->seq < seq)
		pp = &(*pp)->next;
	if (*pp && (*pp)->seq == seq)
		return *pp;
	if (!make || seq <= cj->j->coll_started)
		return NULL;
	if (cj->nops >= COLL_MAX_OPS) {
		if (full_p)
			*full_p = 1;
		return NULL;
	}
	op = calloc(1, sizeof(*op));
	if (!op)
		return NULL;
	cj->nops++;
	op->cj = cj;
	op->seq = seq;
	op->early_tail = &op->early;
	op->next = *pp;
	*pp = op;
	return op;
}

/* The operation ends (once): err 0, or a positive errno and why. */
static void cop_end(struct cop *op, int err, const char *why)
{
	if (op->ended)
		return;
	op->ended = 1;
	op->err = err;
	op->ns = loop_now_ns() - (op->start_ns ? op->start_ns : loop_now_ns());
	snprintf(op->why, sizeof(op->why), "%s", err ? why : "");
	coll.work = 1;
}

/* --- sending --- */

static int send_piece(void *ctx, uint32_t peer, const struct wire_coll_piece *h, const uint8_t *data, uint32_t len)
{
	struct cop *op = ctx;
	struct cjob *cj = op->cj;

	if (peer >= cj->G)
		return -EINVAL;
	wire_coll_piece_encode(coll.piece, h);
	if (len)
		memcpy(coll.piece + sizeof(*h), data, len);
	ctlq_send(cj->nodes[peer], WIRE_CTL_COLL, coll.piece, (uint32_t)(sizeof(*h) + len));
	return 0;
}

/* The executor's memory is its user's (limits.user_memory_bytes). */
static int exec_mem_take(void *ctx, uint64_t bytes)
{
	struct cop *op = ctx;

	return user_take_coll(op->cj->j->user, bytes);
}

static void exec_mem_give(void *ctx, uint64_t bytes)
{
	struct cop *op = ctx;

	user_give_coll(op->cj->j->user, bytes);
}

static const struct coll_exec_ops exec_ops = { .send = send_piece, .mem_take = exec_mem_take,
					       .mem_give = exec_mem_give };

/* --- starting --- */

/* Cost model defaults until links measure their own (issue 12): loopback
 * TCP here (README, ferryctl plan). */
#define COLL_ALPHA_US 6.0
#define COLL_BETA_NS_PER_BYTE 0.4

/* This node's part of an all-to-all of op->count bytes per block: every
 * rank's counts are the same, so one pair of arrays serves them all, and
 * every node computes the same choice from the same numbers. */
static int plan_alltoall(struct cop *op)
{
	struct cjob *cj = op->cj;
	uint32_t size = cj->j->size, n = cj->nlocal;
	struct a2a_layout lay = { size, cj->node_first, cj->rank_at };
	struct a2a_rank_args *args;
	struct a2a_plan p;
	enum a2a_strategy s;
	double ppn = (double)size / cj->G;
	int ret;

	op->counts = calloc((size_t)size + 1, sizeof(*op->counts));
	op->displs = calloc((size_t)size + 1, sizeof(*op->displs));
	args = calloc((size_t)n + 1, sizeof(*args));
	op->sp = calloc((size_t)n + 1, sizeof(*op->sp));
	op->rp = calloc((size_t)n + 1, sizeof(*op->rp));
	op->slen = calloc((size_t)n + 1, sizeof(*op->slen));
	op->rlen = calloc((size_t)n + 1, sizeof(*op->rlen));
	if (!op->counts || !op->displs || !args || !op->sp || !op->rp || !op->slen || !op->rlen || !op->slots) {
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
		op->sp[k] = op->slots[k].sp;
		op->rp[k] = op->slots[k].rp;
		op->slen[k] = op->slots[k].slen;
		op->rlen[k] = op->slots[k].rlen;
	}
	op->mem = (struct sched_mem){ op->sp, op->rp, op->slen, op->rlen };
	/* (An all-to-allv's sizes are known to no node in full: every node
	 * chooses as for small blocks, the same everywhere.) */
	if (op->strategy)
		s = (enum a2a_strategy)(op->strategy - 1);
	else
		s = a2a_choose(cj->G, cj->G - 1, (uint64_t)((double)op->count * ppn * ppn), COLL_ALPHA_US,
			       COLL_BETA_NS_PER_BYTE);
	op->alg = a2a_strategy_name(s);
	ret = a2a_plan_init(&p, s, cj->G);
	if (!ret)
		ret = a2a_sched_node(&p, &lay, cj->me, args, &op->s.node[cj->me]);
	free(args);
	return ret;
}

static void cop_start(struct cop *op)
{
	struct cjob *cj = op->cj;
	struct coll_exec_cfg cfg = {
		.self = cj->me, .job = cj->j->id, .gen = cj->j->gen, .op = op->seq, .group = 0,
		.piece_max = WIRE_COLL_PIECE_MAX, .mem_max = COLL_OP_MEM_MAX,
	};
	char err[200];
	int ret;

	op->started = 1;
	op->start_ns = loop_now_ns();
	if (op->seq > cj->j->coll_started)
		cj->j->coll_started = op->seq;
	if ((ret = sched_init(&op->s, cj->G)) < 0) {
		cop_end(op, -ret, "out of memory for the schedule");
		return;
	}
	switch (op->kind) {
	case CTL_COLL_BARRIER:
		op->alg = "dissemination";
		ret = barrier_sched_node(cj->G, cj->me, &op->s.node[cj->me]);
		break;
	case CTL_COLL_ALLTOALL:
	case CTL_COLL_ALLTOALLV:
		ret = plan_alltoall(op);
		break;
	default:
		ret = -EINVAL;
	}
	if (ret < 0) {
		cop_end(op, -ret, "cannot plan the operation");
		return;
	}
	ret = coll_exec_new(&op->s.node[cj->me], &op->mem, &cfg, &exec_ops, op, &op->x, err, sizeof(err));
	if (ret < 0) {
		cop_end(op, -ret, err);
		return;
	}
	/* what came before it started */
	while (op->early && !op->ended) {
		struct early *e = op->early;

		op->early = e->next;
		cj->early_bytes -= e->len;
		user_give_coll(cj->j->user, e->len);
		ret = coll_exec_deliver(op->x, &e->h, e->data, e->len);
		free(e);
		if (ret < 0)
			cop_end(op, -ret, coll_exec_error(op->x));
	}
	op->early_tail = &op->early;
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

/* The buffers ep posted for op (all-to-all: size blocks each way). */
static int post_buffers(struct cop *op, struct ep *ep, const struct ctl_coll_wire *c)
{
	struct cjob *cj = op->cj;
	struct cslot *sl;
	uint64_t len;

	if (c->kind == CTL_COLL_BARRIER)
		return 0;
	if (!op->slots && !(op->slots = calloc(cj->nlocal + 1, sizeof(*op->slots)))) {
		snprintf(op->why, sizeof(op->why), "out of memory");
		return -EINVAL;
	}
	sl = &op->slots[cj->slot_of[ep->rank]];
	if (sl->posted) {
		snprintf(op->why, sizeof(op->why), "rank %u posted operation %u twice", ep->rank, op->seq);
		return -EINVAL;
	}
	sl->posted = 1;
	if (c->kind == CTL_COLL_ALLTOALLV) {
		/* Its counts and displacements, copied out of the shared
		 * memory the client could still write; the executor checks
		 * every block against the buffers (coll_exec_new). */
		uint64_t vlen = 32ull * cj->j->size;
		const uint8_t *v = mem_at(mem_find(ep->mems, c->vec.mem), c->vec.off, c->vec.len);

		if (c->vec.len != vlen || !v) {
			snprintf(op->why, sizeof(op->why), "rank %u: its counts and displacements (%llu bytes) are not "
				 "4 x %u in memory it shares with ferryd", ep->rank, (unsigned long long)c->vec.len,
				 cj->j->size);
			return -EINVAL;
		}
		if (user_take_coll(cj->j->user, vlen) < 0) {
			snprintf(op->why, sizeof(op->why), "%s", user_refusal());
			return -EINVAL;
		}
		sl->vec = malloc(vlen);
		if (!sl->vec) {
			user_give_coll(cj->j->user, vlen);
			snprintf(op->why, sizeof(op->why), "out of memory");
			return -EINVAL;
		}
		memcpy(sl->vec, v, vlen);
		sl->slen = c->send.len;
		sl->rlen = c->recv.len;
		if (post_buffer(op, ep, &c->send, c->send.len, &sl->sm, &sl->sp, "send") < 0 ||
		    post_buffer(op, ep, &c->recv, c->recv.len, &sl->rm, &sl->rp, "receive") < 0)
			return -EINVAL;
		return 0;
	}
	if (__builtin_mul_overflow(c->count, (uint64_t)cj->j->size, &len)) {
		snprintf(op->why, sizeof(op->why), "rank %u: blocks of %llu bytes for %u ranks", ep->rank,
			 (unsigned long long)c->count, cj->j->size);
		return -EINVAL;
	}
	sl->slen = sl->rlen = len;
	if (post_buffer(op, ep, &c->send, len, &sl->sm, &sl->sp, "send") < 0 ||
	    post_buffer(op, ep, &c->recv, len, &sl->rm, &sl->rp, "receive") < 0)
		return -EINVAL;
	return 0;
}

void coll_post(struct ep *ep, const struct ctl_coll_wire *c)
{
	struct job *j = ep->job;
	struct cjob *cj = cjob_get(j);
	struct cop *op;

	if (!cj) {
		sess_coll_done(ep, c->seq, ENOMEM, "out of memory for the job's collectives");
		return;
	}
	if (c->group != 0) {
		ep_fail(ep, "posted a collective on a group (not supported yet)");
		return;
	}
	if (c->seq != cj->posted[ep->rank] + 1) {
		ep_fail(ep, "posted collective operations out of order");
		return;
	}
	cj->posted[ep->rank] = c->seq;
	op = cop_get(cj, c->seq, 0, NULL);
	if (!op && j->failed && c->seq > j->coll_ok) {
		/* (an operation that exists answers when it ends, once) */
		sess_coll_done(ep, c->seq, j->failed, j->fail_text);
		return;
	}
	if (!op) {
		int full = 0;

		op = cop_get(cj, c->seq, 1, &full);
		if (!op && full) {
			ep_fail(ep, "more collective operations outstanding than a job may have (256)");
			return;
		}
		if (!op) {
			char why[CTL_ERRTEXT_MAX + 1];

			snprintf(why, sizeof(why), "out of memory for collective operation %u", c->seq);
			sess_coll_done(ep, c->seq, ENOMEM, why);
			cluster_job_fail(j, ENOMEM, c->seq - 1, why);
			return;
		}
	}
	if (op->kind && op->kind != c->kind) {
		cop_end(op, EINVAL, "the ranks posted different operations");
	} else if (op->kind && (op->count != c->count || op->strategy != c->strategy)) {
		cop_end(op, EINVAL, op->count != c->count ? "the ranks posted different sizes"
							  : "the ranks forced different algorithms");
	} else {
		op->kind = c->kind;
		op->count = c->count;
		op->strategy = c->strategy;
	}
	if (!op->ended && post_buffers(op, ep, c) < 0)
		cop_end(op, EINVAL, op->why);
	op->posted++;
	if (op->told)   /* it failed before this rank posted it */
		sess_coll_done(ep, op->seq, op->err, op->why);
	coll.work = 1;
	loop_kick();
}

static void piece_in(struct cjob *cj, uint32_t from, const uint8_t *payload, const struct wire_coll_piece *hp,
		     int64_t n);

/* 1 if pieces of j wait in coll.pre. */
static int pre_has(const struct job *j)
{
	for (struct pre *p = coll.pre; p; p = p->next)
		if (p->j == j)
			return 1;
	return 0;
}

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
	if (!cj && (!j->ready || pre_has(j))) {
		/* Not started here yet: it waits, its user's memory. */
		struct pre *p;

		if (user_take_coll(j->user, len) < 0) {
			log_rl_warn("job %s (uid %u): a collective piece from node %u before the job started here, "
				    "beyond the user's memory: dropped (%s)", j->name, j->uid, from, user_refusal());
			return;
		}
		p = malloc(sizeof(*p) + len);
		if (!p) {
			user_give_coll(j->user, len);
			return;
		}
		p->next = NULL;
		p->from = from;
		p->len = len;
		p->j = j;
		job_hold(j);
		memcpy(p->payload, payload, len);
		*coll.pre_tail = p;
		coll.pre_tail = &p->next;
		coll.work = 1;
		return;
	}
	if (!cj)
		cj = cjob_get(j);
	if (!cj)
		return;
	piece_in(cj, from, payload, &h, n);
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

			piece_in(cj, p->from, p->payload, &h, n);
		}
		user_give_coll(j->user, p->len);
		job_put(j);
		free(p);
	}
}

/* A decoded piece of cj's job from node from. */
static void piece_in(struct cjob *cj, uint32_t from, const uint8_t *payload, const struct wire_coll_piece *hp,
		     int64_t n)
{
	struct wire_coll_piece h = *hp;
	struct job *j = cj->j;
	struct cop *op;

	if (h.group != 0 || h.from >= cj->G || cj->nodes[h.from] != from) {
		log_rl_warn("job %s: collective piece from node %u claims to be from node index %u of %u; dropped",
			    j->name, from, h.from, cj->G);
		return;
	}
	int full = 0;

	op = cop_get(cj, h.op, !j->failed || h.op <= j->coll_ok, &full);
	if (!op && full && !j->failed) {
		char why[CTL_ERRTEXT_MAX + 1];

		snprintf(why, sizeof(why), "node %u is more than %u collective operations ahead of node %u", from,
			 COLL_MAX_OPS, coll.self);
		log_rl_warn("job %s (uid %u): %s", j->name, j->uid, why);
		cluster_job_fail(j, ENOBUFS, cj->j->coll_started, why);
		return;
	}
	if (!op || op->ended)
		return;         /* after the operation ended here: it failed, or the job did */
	coll.work = 1;
	if (op->started) {
		/* a piece that fails it leaves the executor failed: coll_poll
		 * ends the operation and the job */
		(void)coll_exec_deliver(op->x, &h, payload + sizeof(h), (uint32_t)n);
		return;
	}
	if (cj->early_bytes + (uint64_t)n > COLL_EARLY_MAX) {
		cop_end(op, ENOBUFS, "other nodes are too far ahead in the job's collectives");
		return;
	}
	if (user_take_coll(j->user, (uint64_t)n) < 0) {
		cop_end(op, ENOBUFS, user_refusal());
		return;
	}
	struct early *e = malloc(sizeof(*e) + (size_t)n + 1);

	if (!e) {
		user_give_coll(j->user, (uint64_t)n);
		cop_end(op, ENOMEM, "out of memory for an early piece");
		return;
	}
	e->next = NULL;
	e->h = h;
	e->len = (uint32_t)n;
	memcpy(e->data, payload + sizeof(h), (size_t)n);
	*op->early_tail = e;
	op->early_tail = &e->next;
	cj->early_bytes += (uint64_t)n;
}

/* --- the loop --- */

/* The job's ranks on this node (cj->nlocal of them), by slot. */
static const uint32_t *local_ranks(const struct cjob *cj)
{
	return cj->rank_at + cj->node_first[cj->me];
}

/* Tells the local ranks that posted op how it ended. */
static void cop_tell(struct cop *op)
{
	struct cjob *cj = op->cj;
	struct job *j = cj->j;

	for (uint32_t i = 0; i < cj->nlocal; i++) {
		uint32_t r = local_ranks(cj)[i];
		struct ep *ep = j->ranks[r].ep;

		if (ep && cj->posted[r] >= op->seq)
			sess_coll_done(ep, op->seq, op->err, op->why);
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

/* Local ranks still here that have not posted operation seq. */
static uint32_t left_to_post(const struct cjob *cj, uint32_t seq)
{
	const struct job *j = cj->j;
	uint32_t n = 0;

	for (uint32_t i = 0; i < cj->nlocal; i++) {
		uint32_t r = local_ranks(cj)[i];

		n += j->ranks[r].ep && cj->posted[r] < seq;
	}
	return n;
}

/* The first local rank that left before posting operation seq, or
 * UINT32_MAX. */
static uint32_t left_before(const struct cjob *cj, uint32_t seq)
{
	const struct job *j = cj->j;

	for (uint32_t i = 0; i < cj->nlocal; i++) {
		uint32_t r = local_ranks(cj)[i];

		if (!j->ranks[r].ep && cj->posted[r] < seq)
			return r;
	}
	return UINT32_MAX;
}

static int cjob_poll(struct cjob *cj)
{
	struct job *j = cj->j;
	int work = 0;

	for (struct cop **pp = &cj->ops, *op; (op = *pp);) {
		uint32_t gone;

		/* The job failed: what the failure left able to complete goes
		 * on (coll.h), the rest fails; so does what a rank here left
		 * before posting: both before anything starts. */
		if (!op->ended && j->failed && op->seq > j->coll_ok)
			cop_end(op, j->failed, j->fail_text[0] ? j->fail_text : "the job failed");
		if (!op->ended && !op->started && (gone = left_before(cj, op->seq)) != UINT32_MAX) {
			char why[CTL_ERRTEXT_MAX + 1];

			snprintf(why, sizeof(why), "rank %u (on node %u) left job %s before collective operation %u",
				 gone, coll.self, j->name, op->seq);
			cop_end(op, EPIPE, why);
		}
		if (!op->ended && !op->started && op->kind && op->posted >= cj->nlocal) {
			cop_start(op);
			work = 1;
		}
		if (!op->ended && op->started) {
			int r = coll_exec_run(op->x);

			if (r == 1)
				cop_end(op, 0, NULL);
			else if (r < 0)
				cop_end(op, -r, coll_exec_error(op->x));
		}
		if (!op->ended && cj->gone_ns && loop_now_ns() - cj->gone_ns >= COLL_GONE_GRACE_NS)
			cop_end(op, ETIMEDOUT, "no rank of the job is left on this node");
		if (op->ended && op->err && !op->told && (!j->failed || op->seq <= j->coll_ok)) {
			/* Failed here, for a reason of its own: the other
			 * nodes would wait for it, so the job fails
			 * everywhere from this operation on (the home tells
			 * every node). */
			char why[CTL_ERRTEXT_MAX + 100];

			snprintf(why, sizeof(why), "collective operation %u (%s) failed on node %u: %.180s", op->seq,
				 kind_name(op->kind), coll.self, op->why);
			snprintf(op->why, sizeof(op->why), "%.*s", (int)sizeof(op->why) - 1, why);
			log_rl_notice("job %s (uid %u): %s", j->name, j->uid, why);
			cluster_job_fail(j, op->err, op->seq - 1, why);
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
		if (op->told && left_to_post(cj, op->seq) == 0) {
			*pp = op->next;
			cj->nops--;
			cop_free(op);
			work = 1;
			continue;
		}
		pp = &op->next;
	}
	return work;
}

/* Frees cj (out of the list already), its operations and its job reference. */
static void cjob_free(struct cjob *cj)
{
	while (cj->ops) {
		struct cop *op = cj->ops;

		cj->ops = op->next;
		cop_free(op);
	}
	job_put(cj->j);
	cjob_free_arrays(cj);
	free(cj);
}

/* 1 if an operation of cj is running here (started, not ended). */
static int cjob_running(const struct cjob *cj)
{
	for (const struct cop *op = cj->ops; op; op = op->next)
		if (op->started && !op->ended)
			return 1;
	return 0;
}

static void gone_check(struct loop_timer *t)
{
	(void)t;
	coll.work = 1;  /* coll_poll runs in this turn of the loop */
}

int coll_poll(void)
{
	struct cjob **pp = &coll.jobs;
	int work = coll.work;

	coll.work = 0;
	if (coll.pre)
		pre_poll();
	while (*pp) {
		struct cjob *cj = *pp;

		if (cj->j->gone && !cj->gone_ns) {
			cj->gone_ns = loop_now_ns();
			loop_timer_arm(&coll.gone_timer, COLL_GONE_GRACE_NS + 1000000, gone_check, NULL);
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
	return work;
}

void coll_write_stats(FILE *out, uid_t uid)
{
	for (struct cjob *cj = coll.jobs; cj; cj = cj->next) {
		uint32_t pending = 0;

		if (uid && cj->j->uid != uid)
			continue;
		for (struct cop *op = cj->ops; op; op = op->next)
			pending += !op->ended;
		fprintf(out, "coll job %s uid %u nodes %u ops_run %llu ops_failed %llu pending %u last %s alg %s "
			"last_us %llu\n", cj->j->name, cj->j->uid, cj->G, (unsigned long long)cj->ops_run,
			(unsigned long long)cj->ops_failed, pending, cj->ops_run ? kind_name(cj->last_kind) : "-",
			cj->ops_run && cj->last_alg ? cj->last_alg : "-", (unsigned long long)cj->last_us);
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
	while (coll.pre) {
		struct pre *p = coll.pre;

		coll.pre = p->next;
		user_give_coll(p->j->user, p->len);
		job_put(p->j);
		free(p);
	}
	coll.pre_tail = &coll.pre;
	loop_timer_cancel(&coll.gone_timer);
	while (coll.jobs) {
		struct cjob *cj = coll.jobs;

		coll.jobs = cj->next;
		cjob_free(cj);
	}
}
