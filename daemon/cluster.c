/* daemon/cluster.c - see cluster.h. */
#include "cluster.h"
#include "fwd.h"
#include "log.h"
#include "loop.h"
#include "sess.h"
#include "../proto/wire.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define REPORT_GAP_NS   50000u          /* at most one report per job per 50 us */
#define JOB_IDS_PER_HOME 4096u

/* A job as its home node sees it. */
struct hnode {
	uint32_t node;
	int have;                       /* acknowledged the latest rank table */
	uint32_t step, done;            /* done counts ranks of that step */
	uint64_t sent, ringed;
};

struct hjob {
	struct hjob *next;
	uid_t uid;
	char name[PROTO_NAME_MAX + 1];
	uint32_t size;
	uint32_t id;
	uint32_t joined;
	uint32_t step;
	uint32_t *node;                 /* rank -> node, JOB_NO_NODE if not joined */
	struct hnode *hn;               /* nodes that report step accounting */
	uint32_t nhn, caphn;
};

/* A control message to ourselves, handled from the loop (not from inside
 * whatever produced it). */
struct selfmsg {
	struct selfmsg *next;
	uint32_t type, len;
	uint8_t payload[];
};

static struct {
	const struct conf *conf;
	uint32_t self;
	struct hjob *hjobs;
	uint8_t ids_used[JOB_IDS_PER_HOME];
	struct selfmsg *selfq, **selfq_tail;
	struct loop_timer report_timer;
} C;

uint32_t cluster_home(uid_t uid, const char *name)
{
	uint32_t h = 2166136261u;       /* FNV-1a over uid and name */

	for (unsigned i = 0; i < sizeof(uid); i++)
		h = (h ^ (uint8_t)(uid >> (8 * i))) * 16777619u;
	for (const char *p = name; *p; p++)
		h = (h ^ (uint8_t)*p) * 16777619u;
	return h % C.conf->nnodes;
}

static void send_ctl(uint32_t node, uint32_t type, const void *payload, uint32_t len)
{
	struct wire_item it = { .len = len, .node = node, .job = 0, .dst = type, .src = C.self };

	if (node == C.self) {
		struct selfmsg *m = malloc(sizeof(*m) + len);

		if (!m) {
			log_err("out of memory for a control message");
			return;
		}
		m->next = NULL;
		m->type = type;
		m->len = len;
		memcpy(m->payload, payload, len);
		*C.selfq_tail = m;
		C.selfq_tail = &m->next;
		loop_kick();
		return;
	}
	/* Control items ignore the queue limits (they are few and small) and
	 * leave at once rather than waiting to fill a buffer. */
	if (fwd_item(&it, payload, -1, 1) < 0) {
		log_err("out of memory for a control message to node %u", node);
		return;
	}
	fwd_flush_peer(fwd_next_peer(node), FWD_FLUSH_EXPLICIT);
}

static void send_rank_msg(uint32_t node, uint32_t type, uid_t uid, const char *name, uint32_t size,
			  uint32_t rank, int err)
{
	struct wire_ctl_rank r = { .uid = uid, .size = size, .rank = rank, .err = err,
				   .name_len = (uint32_t)strlen(name) };
	uint8_t buf[sizeof(r) + PROTO_NAME_MAX];
	ssize_t n = wire_ctl_encode_rank(buf, sizeof(buf), &r, name);

	if (n > 0)
		send_ctl(node, type, buf, (uint32_t)n);
}

void cluster_join(struct job *j, uint32_t rank)
{
	send_rank_msg(j->home, WIRE_CTL_JOIN, j->uid, j->name, j->size, rank, 0);
}

void cluster_leave(uid_t uid, const char *name, uint32_t size, uint32_t rank, uint32_t home)
{
	send_rank_msg(home, WIRE_CTL_LEAVE, uid, name, size, rank, 0);
}

/* --- home side --- */

static struct hjob *hjob_find(uid_t uid, const char *name)
{
	for (struct hjob *h = C.hjobs; h; h = h->next)
		if (h->uid == uid && strcmp(h->name, name) == 0)
			return h;
	return NULL;
}

static struct hjob *hjob_by_id(uint32_t id)
{
	for (struct hjob *h = C.hjobs; h; h = h->next)
		if (h->id == id)
			return h;
	return NULL;
}

static void hjob_free(struct hjob *h)
{
	struct hjob **pp;

	for (pp = &C.hjobs; *pp != h; pp = &(*pp)->next)
		;
	*pp = h->next;
	if (h->id)
		C.ids_used[h->id & (JOB_IDS_PER_HOME - 1)] = 0;
	free(h->node);
	free(h->hn);
	free(h);
}

static struct hnode *hnode(struct hjob *h, uint32_t node)
{
	for (uint32_t i = 0; i < h->nhn; i++)
		if (h->hn[i].node == node)
			return &h->hn[i];
	if (h->nhn == h->caphn) {
		uint32_t cap = h->caphn ? 2 * h->caphn : 8;
		struct hnode *n = realloc(h->hn, cap * sizeof(*n));

		if (!n)
			return NULL;
		h->hn = n;
		h->caphn = cap;
	}
	h->hn[h->nhn] = (struct hnode){ .node = node, .step = h->step };
	return &h->hn[h->nhn++];
}

/* Sends the whole rank table to every node hosting ranks.  They answer HAVE;
 * once all have, GO lets their ranks start (home_have).  Until every node
 * knows the job's id, an item could reach a node that would not know what it
 * is for: the copies of the table travel different routes. */
static void send_table(struct hjob *h)
{
	size_t cap = sizeof(struct wire_ctl_table) + 64 + 4 * (size_t)WIRE_TABLE_MAX;
	uint8_t *buf = malloc(cap);

	if (!buf) {
		log_err("out of memory for the rank table of job %s", h->name);
		return;
	}
	for (uint32_t i = 0; i < h->nhn; i++) {
		uint32_t node = h->hn[i].node;

		h->hn[i].have = 0;
		for (uint32_t first = 0; first < h->size; first += WIRE_TABLE_MAX) {
			struct wire_ctl_table t = {
				.uid = h->uid, .job = h->id, .size = h->size, .first = first,
				.count = h->size - first < WIRE_TABLE_MAX ? h->size - first : WIRE_TABLE_MAX,
				.name_len = (uint32_t)strlen(h->name),
			};
			ssize_t n = wire_ctl_encode_table(buf, cap, &t, h->name, h->node + first);

			if (n > 0)
				send_ctl(node, WIRE_CTL_TABLE, buf, (uint32_t)n);
		}
	}
	free(buf);
}

static void home_join(const struct wire_ctl *c, uint32_t from)
{
	const struct wire_ctl_rank *r = &c->u.rank;
	struct hjob *h = hjob_find(r->uid, c->name);

	if (!h) {
		h = calloc(1, sizeof(*h));
		if (h)
			h->node = malloc(r->size * sizeof(*h->node));
		if (!h || !h->node) {
			free(h);
			send_rank_msg(from, WIRE_CTL_REJECT, r->uid, c->name, r->size, r->rank, ENOMEM);
			return;
		}
		for (uint32_t i = 0; i < r->size; i++)
			h->node[i] = JOB_NO_NODE;
		h->uid = r->uid;
		snprintf(h->name, sizeof(h->name), "%s", c->name);
		h->size = r->size;
		h->step = 1;
		h->next = C.hjobs;
		C.hjobs = h;
	}
	if (h->size != r->size) {
		send_rank_msg(from, WIRE_CTL_REJECT, r->uid, c->name, r->size, r->rank, EINVAL);
		return;
	}
	if (h->node[r->rank] != JOB_NO_NODE) {
		send_rank_msg(from, WIRE_CTL_REJECT, r->uid, c->name, r->size, r->rank, EADDRINUSE);
		return;
	}
	if (!hnode(h, from)) {
		send_rank_msg(from, WIRE_CTL_REJECT, r->uid, c->name, r->size, r->rank, ENOMEM);
		return;
	}
	h->node[r->rank] = from;
	h->joined++;
	if (h->joined < h->size)
		return;
	if (!h->id) {
		uint32_t i;

		for (i = 1; i < JOB_IDS_PER_HOME && C.ids_used[i]; i++)
			;
		if (i == JOB_IDS_PER_HOME) {
			log_err("node %u is home of %u jobs already; job %s refused", C.self, JOB_IDS_PER_HOME - 1,
				h->name);
			send_rank_msg(from, WIRE_CTL_REJECT, r->uid, c->name, r->size, r->rank, EUSERS);
			h->node[r->rank] = JOB_NO_NODE;
			h->joined--;
			return;
		}
		C.ids_used[i] = 1;
		h->id = C.self << 12 | i;
	}
	log_info("job %s (uid %u): all %u ranks joined on %u nodes; id %u", h->name, h->uid, h->size, h->nhn,
		 h->id);
	send_table(h);
}

static void send_job_msg(uint32_t node, uint32_t type, uint32_t job, uint32_t step)
{
	struct wire_ctl_step m = { .job = job, .step = step };
	uint8_t buf[sizeof(m)];
	ssize_t len = wire_ctl_encode_step(buf, sizeof(buf), &m);

	send_ctl(node, type, buf, (uint32_t)len);
}

static void home_have(const struct wire_ctl *c, uint32_t from)
{
	struct hjob *h = hjob_by_id(c->u.step.job);
	struct hnode *n;

	if (!h || !(n = hnode(h, from)))
		return;
	n->have = 1;
	for (uint32_t i = 0; i < h->nhn; i++)
		if (!h->hn[i].have)
			return;
	for (uint32_t i = 0; i < h->nhn; i++)
		send_job_msg(h->hn[i].node, WIRE_CTL_GO, h->id, 0);
}

static void home_leave(const struct wire_ctl *c, uint32_t from)
{
	const struct wire_ctl_rank *r = &c->u.rank;
	struct hjob *h = hjob_find(r->uid, c->name);

	if (!h || r->rank >= h->size || h->node[r->rank] != from)
		return;
	h->node[r->rank] = JOB_NO_NODE;
	if (--h->joined == 0)
		hjob_free(h);
}

static void home_report(const struct wire_ctl *c, uint32_t from)
{
	const struct wire_ctl_report *r = &c->u.report;
	struct hjob *h = hjob_by_id(r->job);
	struct hnode *n;
	uint64_t sent = 0, ringed = 0;
	uint32_t done = 0;

	if (!h || r->step != h->step)
		return;         /* a late report of a finished step, or a job gone */
	n = hnode(h, from);
	if (!n)
		return;
	n->step = r->step;
	n->done = r->done;
	n->sent = r->sent;
	n->ringed = r->ringed;
	for (uint32_t i = 0; i < h->nhn; i++) {
		if (h->hn[i].step == h->step)
			done += h->hn[i].done;
		sent += h->hn[i].sent;
		ringed += h->hn[i].ringed;
	}
	if (done < h->size || sent != ringed)
		return;
	log_debug("job %s: step %u complete (%llu items)", h->name, h->step, (unsigned long long)sent);
	for (uint32_t i = 0; i < h->nhn; i++)
		send_job_msg(h->hn[i].node, WIRE_CTL_STEP, h->id, h->step);
	h->step++;
}

/* --- node side --- */

static void node_table(const struct wire_ctl *c)
{
	const struct wire_ctl_table *t = &c->u.table;
	struct job *j = job_find(t->uid, c->name);

	if (!j || j->size != t->size)
		return;         /* its ranks here left meanwhile */
	job_set_id(j, t->job);
	for (uint32_t i = 0; i < t->count; i++)
		j->ranks[t->first + i].node = wire_ctl_table_node(c, i);
	if (t->first + t->count < t->size)
		return;         /* more parts follow, in order */
	send_job_msg(j->home, WIRE_CTL_HAVE, j->id, 0);
}

static void node_go(const struct wire_ctl *c)
{
	struct job *j = job_by_id(c->u.step.job);

	if (!j)
		return;
	j->ready = 1;
	sess_job_ready(j);
}

static void node_step(const struct wire_ctl *c)
{
	struct job *j = job_by_id(c->u.step.job);

	if (!j || c->u.step.step != j->step)
		return;
	sess_step_complete(j, j->step);
	j->step++;
	j->done = 0;
}

static void handle(const struct wire_ctl *c, uint32_t from)
{
	switch (c->type) {
	case WIRE_CTL_JOIN:
		home_join(c, from);
		break;
	case WIRE_CTL_LEAVE:
		home_leave(c, from);
		break;
	case WIRE_CTL_REJECT:
		sess_reject_rank(c->u.rank.uid, c->name, c->u.rank.rank, c->u.rank.err);
		break;
	case WIRE_CTL_TABLE:
		node_table(c);
		break;
	case WIRE_CTL_REPORT:
		home_report(c, from);
		break;
	case WIRE_CTL_STEP:
		node_step(c);
		break;
	case WIRE_CTL_HAVE:
		home_have(c, from);
		break;
	case WIRE_CTL_GO:
		node_go(c);
		break;
	}
}

void cluster_ctl_item(const struct wire_item *it, const void *payload)
{
	struct wire_ctl c;

	if (it->src >= C.conf->nnodes || wire_ctl_decode(it->dst, payload, it->len, &c) < 0) {
		log_rl_warn("malformed control item (type %u) from node %u; ignored", it->dst, it->src);
		return;
	}
	handle(&c, it->src);
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

		if (!j->ready || !j->done)
			continue;       /* reports are only needed once a local rank is done */
		if (j->rep_step == j->step && j->rep_done == j->done && j->rep_sent == j->sent &&
		    j->rep_ringed == j->ringed)
			continue;
		if (j->rep_step == j->step && j->rep_done == j->done && now - j->rep_ns < REPORT_GAP_NS) {
			waiting = 1;
			continue;
		}
		r = (struct wire_ctl_report){ .job = j->id, .step = j->step, .done = j->done,
					      .sent = j->sent, .ringed = j->ringed };
		wire_ctl_encode_report(buf, sizeof(buf), &r);
		send_ctl(j->home, WIRE_CTL_REPORT, buf, sizeof(buf));
		j->rep_step = j->step;
		j->rep_done = j->done;
		j->rep_sent = j->sent;
		j->rep_ringed = j->ringed;
		j->rep_ns = now;
		work = 1;
	}
	if (waiting && !C.report_timer.armed)
		loop_timer_arm(&C.report_timer, REPORT_GAP_NS, on_report_timer, NULL);
	return work;
}

int cluster_poll(void)
{
	int work = 0;

	while (C.selfq) {
		struct selfmsg *m = C.selfq;
		struct wire_ctl c;

		C.selfq = m->next;
		if (!C.selfq)
			C.selfq_tail = &C.selfq;
		if (wire_ctl_decode(m->type, m->payload, m->len, &c) == 0)
			handle(&c, C.self);
		free(m);
		work = 1;
	}
	return send_reports() | work;
}

int cluster_init(const struct conf *c, uint32_t self)
{
	C.conf = c;
	C.self = self;
	C.selfq = NULL;
	C.selfq_tail = &C.selfq;
	return 0;
}

void cluster_fini(void)
{
	loop_timer_cancel(&C.report_timer);
	while (C.hjobs)
		hjob_free(C.hjobs);
	while (C.selfq) {
		struct selfmsg *m = C.selfq;

		C.selfq = m->next;
		free(m);
	}
	C.selfq_tail = &C.selfq;
}

void cluster_write_status(FILE *out, uid_t uid)
{
	for (struct hjob *h = C.hjobs; h; h = h->next) {
		if (uid != 0 && h->uid != uid)
			continue;
		fprintf(out, "home of job %s uid %u: id %u, %u of %u ranks joined on %u nodes, step %u\n", h->name,
			h->uid, h->id, h->joined, h->size, h->nhn, h->step);
	}
}
