/* daemon/cluster/cluster.c - see cluster.h. */
#include "cluster.h"
#include "home.h"
#include "msg.h"
#include "steps.h"
#include "../core/log.h"
#include "../core/loop.h"
#include "../fwd/agg.h"
#include "../fwd/ctlq.h"
#include "../fwd/flow.h"
#include "../fwd/fwd.h"
#include "../local/endpoint.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct {
	const struct conf *conf;
	uint32_t self;
	struct loop_timer report_timer;
	uint64_t *lost_at;              /* nnodes: when a LOST about each was taken last */
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

/* Its ranks here hear it (once). */
static int fail_local(struct job *j, uint32_t step, uint32_t rank, int err, const char *text)
{
	if (j->failed)
		return 0;
	j->failed = err;
	snprintf(j->fail_text, sizeof(j->fail_text), "%s", text);
	log_notice("job %s (uid %u): %s; its steps fail with %s", j->name, j->uid, text, strerror(err));
	ep_job_fail(j, step, rank, err, text);
	loop_kick();    /* its senders stop waiting (fwd/tx.c) */
	return 1;
}

void cluster_fail_job(struct job *j, uint32_t rank, uint32_t node, int err, const char *fmt, ...)
{
	struct wire_ctl_fail f = { .job = j->id, .gen = j->gen, .step = j->step, .rank = rank, .node = node,
				   .err = err };
	uint32_t home = cluster_home(j->uid, j->name), n;
	char text[WIRE_FAIL_TEXT_MAX];
	const uint32_t *nodes;
	va_list ap;
	int len;

	va_start(ap, fmt);
	len = vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	if (len < 1)
		return;
	if (!fail_local(j, j->step, rank, err, text) || !j->ready)
		return;
	nodes = job_nodes(j, cluster.self, &n);
	for (uint32_t i = 0; i < n; i++)
		if (nodes[i] != node)
			msg_fail(nodes[i], WIRE_CTL_FAIL, &f, text);
	if (home != cluster.self && home != node) {
		int told = 0;

		for (uint32_t i = 0; i < n; i++)
			told |= nodes[i] == home;
		if (!told)
			msg_fail(home, WIRE_CTL_FAIL, &f, text);
	}
	if (home == cluster.self) {
		struct wire_ctl c = { .type = WIRE_CTL_FAIL, .u.fail = f };

		home_fail(&c, cluster.self);
	}
}

/* 1 if the route from a to b passes through node via (b included). */
static int route_via(uint32_t a, uint32_t b, uint32_t via)
{
	for (uint32_t hops = 0; a != b && hops < cluster.conf->nnodes; hops++) {
		if (route_next_hop(&cluster.conf->route, a, b, &a) < 0)
			return 1;       /* no route: as good as lost */
		if (a == via)
			return 1;
	}
	return 0;
}

/* 1 if the job's items or control messages may travel through node. */
static int job_uses(struct job *j, uint32_t node)
{
	uint32_t home = cluster_home(j->uid, j->name), n;
	const uint32_t *nodes = job_nodes(j, cluster.self, &n);

	if (route_via(cluster.self, home, node) || route_via(home, cluster.self, node))
		return 1;
	for (uint32_t i = 0; i < n; i++)
		if (route_via(cluster.self, nodes[i], node) || route_via(nodes[i], cluster.self, node))
			return 1;
	return !nodes && j->size > 1;   /* out of memory for its node list: assume so */
}

static void rank_joined(struct job *j, uint32_t rank);

/* Node is lost: fail the jobs here that need it.  Those whose home it is
 * also give up their ids: the home's next instance may hand them out again
 * (local/job.h, stale). */
static void fail_jobs_using(uint32_t node, const char *why)
{
	home_node_lost(node, why);
	for (struct job *j = job_first(); j; j = j->next) {
		/* A job still being set up whose home is lost: say JOIN again,
		 * for the home's next instance, which knows nothing of it (its
		 * present instance, if it is only unreachable, takes a JOIN
		 * said again as a no-op). */
		if (!j->ready && cluster_home(j->uid, j->name) == node) {
			for (uint32_t r = 0; r < j->size; r++)
				if (j->ranks[r].ep)
					rank_joined(j, r);
			continue;
		}
		if (j->ready && !j->failed && job_uses(j, node))
			cluster_fail_job(j, UINT32_MAX, node, EHOSTDOWN, "%s", why);
		if (j->id && !j->stale && cluster_home(j->uid, j->name) == node) {
			fail_local(j, j->step, UINT32_MAX, EHOSTDOWN, why);
			job_forget_id(j);
		}
	}
}

/* The peer layer lost a routing peer.  Only its peers notice, but jobs of
 * any node may need it (ranks there, routes through it): every node hears
 * it (LOST), and each fails its own jobs that need it.  A node hears it once
 * from each peer of the lost node; the jobs it failed the first time are
 * not failed again. */
static void node_lost(uint32_t node, const char *why)
{
	struct wire_ctl_fail f = { .node = node, .err = EHOSTDOWN };

	for (uint32_t k = 0; k < cluster.conf->nnodes; k++)
		if (k != cluster.self && k != node)
			msg_fail(k, WIRE_CTL_LOST, &f, why);
	fail_jobs_using(node, why);
}

static const struct fwd_events cluster_fwd_events = {
	.node_lost = node_lost,
};

/* A FAIL from another node of the job (or its home). */
static void node_fail(const struct wire_ctl *c, uint32_t from)
{
	const struct wire_ctl_fail *f = &c->u.fail;
	struct job *j = job_by_id(f->job, (uint8_t)f->gen);
	const uint32_t *nodes;
	uint32_t n, i;

	if (f->job >> WIRE_JOB_INDEX_BITS == cluster.self)
		home_fail(c, from);     /* checks the sender itself */
	if (!j)
		return;
	/* Only the job's home or another node of it says so. */
	nodes = job_nodes(j, cluster.self, &n);
	for (i = 0; i < n && nodes[i] != from; i++)
		;
	if (i == n && from != cluster_home(j->uid, j->name)) {
		log_rl_warn("FAIL about job %s from node %u, which is not one of its nodes; ignored", j->name, from);
		return;
	}
	fail_local(j, f->step, f->rank, f->err, c->text);
}

/* --- the session layer's events --- */

static void rank_joined(struct job *j, uint32_t rank)
{
	msg_rank(cluster_home(j->uid, j->name), WIRE_CTL_JOIN, j->uid, j->name, j->size, rank, 0);
}

static void rank_left(struct ep *ep)
{
	struct job *j = ep->job;

	flow_ep_gone(ep);
	msg_rank(cluster_home(j->uid, j->name), WIRE_CTL_LEAVE, j->uid, j->name, j->size, ep->rank, 0);
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
			fail_local(old, old->step, UINT32_MAX, EHOSTDOWN, "its home node restarted");
			job_forget_id(old);
		}
	}
	job_set_id(j, t->job, (uint8_t)t->gen);
	for (uint32_t i = 0; i < t->count; i++)
		j->ranks[t->first + i].node = wire_ctl_table_node(c, i);
	if (t->first + t->count < t->size)
		return;         /* more parts follow, in order */
	msg_job(cluster_home(j->uid, j->name), WIRE_CTL_HAVE, j->id, j->gen, 0);
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

	if (!j)
		return;
	j->ready = 1;
	sess_job_ready(j);
}

static void node_step(const struct wire_ctl *c, uint32_t from)
{
	struct job *j = job_from_home(c, from);

	if (!j || c->u.step.step != j->step)
		return;
	ep_step_complete(j, j->step);
	j->step++;
	j->done = 0;
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
		/* Only a routing peer of a node can tell it is lost; each peer
		 * of it says so, so later copies are ignored for a while. */
		if (c->u.fail.node < cluster.conf->nnodes && c->u.fail.node != cluster.self &&
		    route_link_dim(&cluster.conf->route, from, c->u.fail.node) >= 0 &&
		    loop_now_ns() - cluster.lost_at[c->u.fail.node] > PEER_LOST_NS) {
			cluster.lost_at[c->u.fail.node] = loop_now_ns();
			fail_jobs_using(c->u.fail.node, c->text);
		}
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

int cluster_poll(void)
{
	const struct ctlq_item *m;
	int work = 0;

	while ((m = ctlq_first())) {
		struct wire_ctl c;

		if (m->from >= cluster.conf->nnodes || wire_ctl_decode(m->type, m->payload, m->len, &c) < 0)
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
	cluster.lost_at = calloc(c->nnodes, sizeof(*cluster.lost_at));
	if (!cluster.lost_at)
		return -ENOMEM;
	home_init(c, self);
	fwd_set_events(&cluster_fwd_events);
	return 0;
}

void cluster_fini(void)
{
	loop_timer_cancel(&cluster.report_timer);
	free(cluster.lost_at);
	cluster.lost_at = NULL;
	home_fini();
}

void cluster_write_status(FILE *out, uid_t uid)
{
	uint32_t shown = 0;

	for (struct job *j = job_first(); j; j = j->next) {
		if (uid != 0 && j->uid != uid)
			continue;
		shown++;
		fprintf(out, "job %s uid %u: %u of %u ranks attached here, %s, id %u, home node %u, step %u; "
			"items sent %llu, arrived %llu, dropped %llu\n",
			j->name, j->uid, j->joined, j->size, j->ready ? "ready" : "waiting for ranks", j->id,
			cluster_home(j->uid, j->name), j->step, (unsigned long long)j->sent,
			(unsigned long long)j->ringed, (unsigned long long)j->items_dropped);
		for (uint32_t r = 0; r < j->size; r++)
			if (j->ranks[r].ep)
				ep_write_status(out, j->ranks[r].ep);
	}
	if (!shown)
		fprintf(out, "no jobs%s\n", uid ? " of yours" : "");
	home_write_status(out, uid);
}
