/* daemon/cluster/cluster.c - see cluster.h. */
#include "cluster.h"
#include "costs.h"
#include "home.h"
#include "msg.h"
#include "steps.h"
#include "../core/log.h"
#include "../core/loop.h"
#include "../fwd/agg.h"
#include "../fwd/ctlq.h"
#include "../fwd/flow.h"
#include "../fwd/fwd.h"
#include "../local/direct.h"
#include "../local/endpoint.h"
#include "../net/peer.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct {
	const struct conf *conf;
	uint32_t self;
	struct loop_timer report_timer;
	uint64_t *restarted_as;         /* nnodes: the incarnation the last restart heard of named */
	cluster_coll_rx_fn *coll_rx;
} cluster;

uint32_t cluster_home(uid_t uid, const char *name)
{
	uint32_t h = 2166136261u;       /* FNV-1a over uid and name */

	for (unsigned i = 0; i < sizeof(uid); i++)
		h = (h ^ (uint8_t)(uid >> (8 * i))) * 16777619u;
	for (const char *p = name; *p; p++)
		h = (h ^ (uint8_t)*p) * 16777619u;
	return h % cluster.conf->nnodes;
}

/* --- jobs that fail --- */

/* Its ranks here hear it (once).  Its collective operations up to coll_ok
 * may still complete (coll.h); a later failure can only lower that. */
static int fail_local(struct job *j, uint32_t step, uint32_t rank, int err, uint32_t coll_ok, const char *text)
{
	if (err != EPIPE && !j->coll_groups_fail)
		j->coll_groups_fail = err;
	if (j->failed) {
		if (coll_ok < j->coll_ok)
			j->coll_ok = coll_ok;
		return 0;
	}
	j->coll_ok = coll_ok;
	j->failed = err;
	snprintf(j->fail_text, sizeof(j->fail_text), "%s", text);
	log_notice("job %s (uid %u): %s; its steps fail with %s", j->name, j->uid, text, strerror(err));
	ep_job_fail(j, step, rank, err, text);
	loop_kick();    /* its senders stop waiting (fwd/tx.c) */
	return 1;
}

/* The job can complete no more steps, as this node found: the loss cuts
 * routes it needs (why).  Its home decides (home.h): FAIL goes to the home,
 * whose FAIL to every node of the job follows, in order with its STEPs.
 * When the loss cuts the routes between here and the home, the home may
 * never hear this or never answer: then the ranks here fail at once (and may
 * miss a STEP that is on its way, which the ranks elsewhere complete: nobody
 * could tell them in time). */
static void job_cut(struct job *j, const struct loss *l, int home_cut, const char *why)
{
	struct wire_ctl c = {
		.type = WIRE_CTL_FAIL,
		.u.fail = { .job = j->id, .gen = j->gen, .step = j->step, .rank = JOB_NO_NODE, .node = l->b,
			    .err = EHOSTDOWN },
	};
	uint32_t home = cluster_home(j->uid, j->name);

	if (home_cut)
		fail_local(j, j->step, JOB_NO_NODE, EHOSTDOWN, 0, why);
	if (home != cluster.self) {
		msg_fail(home, &c.u.fail, why);
	} else {
		snprintf(c.text, sizeof(c.text), "%s", why);
		home_fail(&c, cluster.self);
	}
}

/* 1 if the loss cuts a route between here and a node of the job. */
static int job_uses(struct job *j, const struct loss *l)
{
	uint32_t n;
	const uint32_t *nodes = job_nodes(j, cluster.self, &n);

	for (uint32_t i = 0; i < n; i++)
		if (loss_cuts(&cluster.conf->route, l, cluster.self, nodes[i]))
			return 1;
	return !nodes && j->size > 1;   /* out of memory for its node list: assume so */
}

/* The job fails (job_cut) if the loss cuts a route it needs from here: to
 * its home, or to another of its nodes.  Returns 1 if so. */
static int cut_if_needed(struct job *j, const struct loss *l, const char *why)
{
	int home_cut = loss_cuts(&cluster.conf->route, l, cluster.self, cluster_home(j->uid, j->name));

	if (!home_cut && !job_uses(j, l))
		return 0;
	job_cut(j, l, home_cut, why);
	return 1;
}

static void rank_joined(struct job *j, uint32_t rank);

/* A loss (home.h, struct loss), noticed here or heard of: the homes here
 * drop what a restarted node had and fail the jobs it cuts (home_lost), and
 * the jobs with ranks here that need a route it cuts fail (job_cut).  A job
 * whose home restarted fails at once (the home knows nothing of it any more)
 * and gives up its id, which the home's new instance may hand out again
 * (local/job.h, stale); one still being set up says its JOINs again. */
static void take_loss(const struct loss *l, const char *why)
{
	home_lost(l, why);
	for (struct job *j = job_first(); j; j = j->next) {
		if (l->restarted_as && cluster_home(j->uid, j->name) == l->b) {
			if (!j->ready) {
				/* For the home's new instance, which knows nothing
				 * of it (its present one, if the JOINs were said to
				 * it already, takes them as a no-op). */
				for (uint32_t r = 0; r < j->size; r++)
					if (j->ranks[r].ep)
						rank_joined(j, r);
			} else if (j->id && !j->stale) {
				fail_local(j, j->step, JOB_NO_NODE, EHOSTDOWN, 0, why);
				job_forget_id(j);
			}
			continue;
		}
		if (j->ready && !j->failed)     /* one being set up waits for its ranks (ferry_open's timeout) */
			cut_if_needed(j, l, why);
	}
}

/* 1 the first time a restart of node as incarnation inc is heard of (each
 * peer of the node says so), and only if it is later than every restart of
 * it heard of before: a LOST about an earlier restart can come late (it may
 * have waited behind a link that was down), and must not be taken for news
 * about the present instance (incarnations grow, net/peer.h). */
static int restart_news(uint32_t node, uint64_t inc)
{
	if (inc <= cluster.restarted_as[node])
		return 0;
	cluster.restarted_as[node] = inc;
	return 1;
}

/* LOST of kind about node (and its restart as inc) to every other node.
 * (Not to node itself: about a link, it would travel that link; about a
 * restart, node knows.) */
static void tell_all(uint32_t node, uint32_t kind, uint64_t inc, const char *why)
{
	for (uint32_t k = 0; k < cluster.conf->nnodes; k++)
		if (k != cluster.self && k != node)
			msg_lost(k, node, kind, inc, why);
}

/* A loss of kind (enum wire_lost_kind) reported by node a, here or heard of. */
static void lost_news(uint32_t a, uint32_t b, uint32_t kind, uint64_t inc, const char *why)
{
	if (kind == WIRE_LOST_RESTART && inc < cluster.restarted_as[b])
		log_rl_info("LOST about node %u restarting (as %016llx) from node %u: an earlier restart than the "
			    "latest heard of (%016llx); ignored", b, (unsigned long long)inc, a,
			    (unsigned long long)cluster.restarted_as[b]);
	struct loss l = { .a = a, .b = b, .restarted_as = inc };

	switch (kind) {
	case WIRE_LOST_LINK:
		if (cuts_add(a, b))     /* said again: its jobs have heard it */
			take_loss(&l, why);
		break;
	case WIRE_LOST_LINK_BACK:
		cuts_del(a, b);
		break;
	case WIRE_LOST_RESTART:
		if (restart_news(b, inc)) {
			cuts_del_from(b);       /* what its earlier instances said */
			take_loss(&l, why);
		}
		break;
	}
}

/* The peer layer lost a routing peer: the link to it has been down for a
 * while (restarted_as 0), or it restarted.  Only its peers notice, but jobs
 * of any node may need that link or node (ranks there, routes through it):
 * every node hears it (LOST). */
static void node_lost(uint32_t node, uint64_t restarted_as, const char *why)
{
	uint32_t kind = restarted_as ? WIRE_LOST_RESTART : WIRE_LOST_LINK;

	tell_all(node, kind, restarted_as, why);
	lost_news(cluster.self, node, kind, restarted_as, why);
}

/* The link to a peer is up again after node_lost said it was down. */
static void node_found(uint32_t node)
{
	char why[WIRE_FAIL_TEXT_MAX];

	snprintf(why, sizeof(why), "the link between nodes %u and %u is up again", cluster.self, node);
	tell_all(node, WIRE_LOST_LINK_BACK, 0, why);
	lost_news(cluster.self, node, WIRE_LOST_LINK_BACK, 0, why);
}

/* LOST from node from. */
static void node_heard_lost(const struct wire_ctl *c, uint32_t from)
{
	const struct wire_ctl_lost *m = &c->u.lost;

	/* Only a routing peer of a node can tell (this node notices what
	 * happens to its own links itself). */
	if (m->node >= cluster.conf->nnodes || m->node == cluster.self ||
	    !route_are_peers(&cluster.conf->route, from, m->node)) {
		log_rl_warn("LOST about node %u from node %u, which is not its peer; ignored", m->node, from);
		return;
	}
	lost_news(from, m->node, m->kind, m->incarnation, c->text);
}

static const struct fwd_events cluster_fwd_events = {
	.node_lost = node_lost,
	.node_found = node_found,
};

/* A job that has just started (GO): if a link down already (cuts_add) cuts
 * a route it needs, it fails now rather than wait for the link. */
static void check_cuts(struct job *j)
{
	for (uint32_t i = 0; i < cuts_count() && !j->failed; i++) {
		struct loss l = cuts_at(i);
		char why[WIRE_FAIL_TEXT_MAX];

		snprintf(why, sizeof(why), "the link between nodes %u and %u is down", l.a, l.b);
		if (cut_if_needed(j, &l, why))
			return;
	}
}

/* A FAIL: from a node of a job this node is home of, asking (home_fail); or
 * from the home of a job with ranks here, deciding. */
static void node_fail(const struct wire_ctl *c, uint32_t from)
{
	const struct wire_ctl_fail *f = &c->u.fail;
	struct job *j = job_by_id(f->job, (uint8_t)f->gen);
	uint32_t home;

	if (f->job >> WIRE_JOB_INDEX_BITS == cluster.self)
		home_fail(c, from);     /* checks the sender itself */
	if (!j)
		return;
	home = cluster_home(j->uid, j->name);
	if (from != home) {
		if (home != cluster.self)
			log_rl_warn("FAIL about job %s from node %u, which is not its home; ignored", j->name, from);
		return;
	}
	fail_local(j, f->step, f->rank, f->err, f->coll_ok, c->text);
}

/* --- the session layer's events --- */

static void rank_joined(struct job *j, uint32_t rank)
{
	msg_rank(cluster_home(j->uid, j->name), WIRE_CTL_JOIN, j->uid, j->name, j->size, rank, 0, 0);
}

static void rank_left(struct ep *ep)
{
	struct job *j = ep->job;

	flow_ep_gone(ep);
	msg_rank(cluster_home(j->uid, j->name), WIRE_CTL_LEAVE, j->uid, j->name, j->size, ep->rank, 0,
		 j->coll_started);
}

const struct sess_events cluster_sess_events = {
	.rank_joined = rank_joined,
	.rank_left = rank_left,
};

/* --- control items for this node --- */

/* A node a rank table names must be this one or reachable from it: the
 * data path indexes its routing table with it. */
static int node_ok(uint32_t node)
{
	return node == JOB_NO_NODE || node == cluster.self || agg_routable(node);
}

static void node_table(const struct wire_ctl *c, uint32_t from)
{
	const struct wire_ctl_table *t = &c->u.table;
	struct job *j = job_find(t->uid, c->name);

	if (!j || j->size != t->size)
		return;         /* its ranks here left meanwhile */
	if (from != cluster_home(t->uid, c->name)) {
		log_rl_warn("rank table of job %s (uid %u) from node %u, which is not its home; ignored", c->name,
			    t->uid, from);
		return;
	}
	for (uint32_t i = 0; i < t->count; i++) {
		uint32_t node = wire_ctl_table_node(c, i);

		if (!node_ok(node)) {
			log_rl_warn("rank table of job %s from node %u puts rank %u on node %u; ignored", c->name, from,
				    t->first + i, node);
			return;
		}
	}
	{
		/* Another job here with this id and generation: its home, this
		 * job's too, restarted since and handed them out again. */
		struct job *old = job_by_id(t->job, (uint8_t)t->gen);

		if (old && old != j) {
			fail_local(old, old->step, UINT32_MAX, EHOSTDOWN, 0, "its home node restarted");
			job_forget_id(old);
		}
	}
	job_set_id(j, t->job, (uint8_t)t->gen);
	for (uint32_t i = 0; i < t->count; i++)
		j->ranks[t->first + i].node = wire_ctl_table_node(c, i);
	if (t->first + t->count < t->size)
		return;         /* more parts follow, in order */
	uint32_t alpha_ns, beta_ps;

	peer_cost(&alpha_ns, &beta_ps);
	msg_have(cluster_home(j->uid, j->name), j->id, j->gen, alpha_ns, beta_ps);
}

/* The job a GO or STEP is about, if it came from the job's home. */
static struct job *job_from_home(const struct wire_ctl *c, uint32_t from)
{
	struct job *j = job_by_id(c->u.step.job, (uint8_t)c->u.step.gen);

	if (j && from != cluster_home(j->uid, j->name)) {
		log_rl_warn("control message %u about job %s from node %u, which is not its home; ignored", c->type,
			    j->name, from);
		return NULL;
	}
	return j;
}

static void node_go(const struct wire_ctl *c, uint32_t from)
{
	struct job *j = job_from_home(c, from);

	if (!j || j->ready)
		return;         /* (a second GO, resent or forged, changes nothing) */
	j->ready = 1;
	/* The cost model's α and β, and the layout of its collectives, fixed
	 * now (job.h) */
	j->coll_alpha_ns = c->u.step.alpha_ns;
	j->coll_beta_ps = c->u.step.beta_ps;
	memcpy(j->coll_force, c->go.force, sizeof(j->coll_force));
	memset(j->coll_fn, 0, sizeof(j->coll_fn));
	for (uint32_t i = 0; i < c->go.nfn; i++) {
		struct wire_go_fn f;

		wire_ctl_go_fn(c, i, &f);       /* (valid: wire_ctl_decode) */
		cost_fn_unwire(f.tau_ns, f.tc_ps, &j->coll_fn[f.fam][f.alg]);
	}
	free(j->layout);
	j->layout = malloc(((size_t)j->size + 1) * sizeof(*j->layout));
	for (uint32_t r = 0; j->layout && r < j->size; r++)
		j->layout[r] = j->ranks[r].node;
	sess_job_ready(j);
	check_cuts(j);
}

static void node_step(const struct wire_ctl *c, uint32_t from)
{
	struct job *j = job_from_home(c, from);

	if (!j || j->failed || c->u.step.step != j->step)
		return;         /* (a STEP of a job failed here because its home was cut off) */
	ep_step_complete(j);
}

static void dispatch(const struct wire_ctl *c, uint32_t from)
{
	switch (c->type) {
	case WIRE_CTL_JOIN:
		home_join(c, from);
		break;
	case WIRE_CTL_LEAVE:
		home_leave(c, from);
		break;
	case WIRE_CTL_REJECT:
		if (from == cluster_home(c->u.rank.uid, c->name))
			sess_reject_rank(c->u.rank.uid, c->name, c->u.rank.rank, c->u.rank.err);
		break;
	case WIRE_CTL_TABLE:
		node_table(c, from);
		break;
	case WIRE_CTL_REPORT:
		home_report(c, from);
		break;
	case WIRE_CTL_STEP:
		node_step(c, from);
		break;
	case WIRE_CTL_HAVE:
		home_have(c, from);
		break;
	case WIRE_CTL_GO:
		node_go(c, from);
		break;
	case WIRE_CTL_FAIL:
		node_fail(c, from);
		break;
	case WIRE_CTL_LOST:
		node_heard_lost(c, from);
		break;
	case WIRE_CTL_XOFF:
	case WIRE_CTL_XON: {
		struct job *j = job_by_id(c->u.step.job, (uint8_t)c->u.step.gen);

		if (j)
			flow_remote(j, c->u.step.step, from, c->type == WIRE_CTL_XOFF);
		break;
	}
	}
}

/* --- step reports --- */

static void on_report_timer(struct loop_timer *t)
{
	(void)t;
	loop_kick();    /* cluster_poll sends what is due */
}

static int send_reports(void)
{
	uint64_t now = loop_now_ns();
	int work = 0, waiting = 0;

	for (struct job *j = job_first(); j; j = j->next) {
		struct wire_ctl_report r;
		uint8_t buf[sizeof(r)];

		switch (steps_due(j, now)) {
		case STEPS_NOTHING:
			continue;
		case STEPS_LATER:
			waiting = 1;
			continue;
		case STEPS_NOW:
			break;
		}
		steps_report(j, now, &r);
		wire_ctl_encode_report(buf, sizeof(buf), &r);
		ctlq_send(cluster_home(j->uid, j->name), WIRE_CTL_REPORT, buf, sizeof(buf));
		work = 1;
	}
	if (waiting && !cluster.report_timer.armed)
		loop_timer_arm(&cluster.report_timer, STEPS_REPORT_GAP_NS, on_report_timer, NULL);
	return work;
}

void cluster_set_coll_rx(cluster_coll_rx_fn *fn)
{
	cluster.coll_rx = fn;
}

void cluster_job_fail(struct job *j, int err, uint32_t coll_ok, const char *why)
{
	struct wire_ctl c = {
		.type = WIRE_CTL_FAIL,
		.u.fail = { .job = j->id, .gen = j->gen, .step = j->step, .rank = JOB_NO_NODE, .node = JOB_NO_NODE,
			    .err = err, .coll_ok = coll_ok },
	};
	uint32_t home = cluster_home(j->uid, j->name);

	/* (Failed already: the home may still lower coll_ok, or say the
	 * failure is more than ranks leaving.) */
	if (!j->id || (j->failed && coll_ok >= j->coll_ok && (err == EPIPE || j->coll_groups_fail)))
		return;
	if (home != cluster.self) {
		msg_fail(home, &c.u.fail, why);
	} else {
		snprintf(c.text, sizeof(c.text), "%s", why);
		home_fail(&c, cluster.self);
	}
}

int cluster_poll(void)
{
	const struct ctlq_item *m;
	int work = 0;

	while ((m = ctlq_first())) {
		struct wire_ctl c;

		if (m->type == WIRE_CTL_COLL) {
			/* the collective engine's, which checks it */
			if (cluster.coll_rx && m->from < cluster.conf->nnodes)
				cluster.coll_rx(m->from, m->payload, m->len);
		} else if (m->type == WIRE_CTL_PROBE) {
			/* (its round trip was the point: net/peer.c) */
		} else if (m->from >= cluster.conf->nnodes || wire_ctl_decode(m->type, m->payload, m->len, &c) < 0)
			log_rl_warn("malformed control item (type %u) from node %u; ignored", m->type, m->from);
		else
			dispatch(&c, m->from);
		ctlq_pop();
		work = 1;
	}
	return send_reports() | work;
}

int cluster_init(const struct conf *c, uint32_t self)
{
	cluster.conf = c;
	cluster.self = self;
	cluster.restarted_as = calloc(c->nnodes, sizeof(*cluster.restarted_as));
	if (!cluster.restarted_as)
		return -ENOMEM;
	home_init(c, self);
	fwd_set_events(&cluster_fwd_events);
	return costs_init(c);
}

void cluster_fini(void)
{
	loop_timer_cancel(&cluster.report_timer);
	free(cluster.restarted_as);
	cluster.restarted_as = NULL;
	home_fini();
	costs_fini();
}

void cluster_write_status(FILE *out, uid_t uid)
{
	uint32_t shown = 0;

	for (struct job *j = job_first(); j; j = j->next) {
		if (uid != 0 && j->uid != uid)
			continue;
		shown++;
		fprintf(out, "job %s uid %u: %u of %u ranks attached here, %s, id %u generation %u, home node %u, "
			"step %u; items sent %llu, arrived %llu, dropped %llu\n",
			j->name, j->uid, j->joined, j->size, j->ready ? "ready" : "waiting for ranks", j->id, j->gen,
			cluster_home(j->uid, j->name), j->step, (unsigned long long)j->sent,
			(unsigned long long)j->ringed, (unsigned long long)j->items_dropped);
		if (j->direct)
			direct_write_status(out, j->direct);
		for (uint32_t r = 0; r < j->size; r++)
			if (j->ranks[r].ep)
				ep_write_status(out, j->ranks[r].ep);
	}
	if (!shown)
		fprintf(out, "no jobs%s\n", uid ? " of yours" : "");
	home_write_status(out, uid);
}
