/* daemon/cluster/home.c - see home.h. */
#include "home.h"
#include "costs.h"
#include "msg.h"
#include "steps.h"
#include "../core/log.h"
#include "../core/loop.h"
#include "../fwd/ctlq.h"
#include "../net/peer.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#define JOB_IDS_PER_HOME (1u << WIRE_JOB_INDEX_BITS)
/* Ranks of one user's jobs this node is home of: their tables (4 bytes a
 * rank) are this node's memory, and any user anywhere in the cluster can ask
 * for a job of PROTO_MAX_RANKS ranks. */
#define HOME_RANKS_PER_UID (4u * PROTO_MAX_RANKS)

/* A job as its home node sees it. */
struct hjob {
	struct hjob *next;
	uid_t uid;
	char name[PROTO_NAME_MAX + 1];
	uint32_t size;
	uint32_t id;
	uint8_t gen;
	uint32_t joined;
	uint32_t step;
	int started;                    /* GO went out */
	int failed;                     /* FAIL went out */
	int lost;                       /* ... for more than ranks leaving (EPIPE): its split groups'
					 * collectives fail too (coll.c) */
	uint32_t coll_ok;               /* ... saying collectives up to this may complete */
	uint32_t *node;                 /* rank -> node, JOB_NO_NODE if not joined */
	struct steps_node *hn;          /* nodes that host ranks */
	uint32_t nhn, caphn;
};

/* A link reported down, and when it was said last. */
struct cut {
	struct loss l;
	uint64_t said_ns;
};

/* A cut not said again for this long is forgotten (home.h). */
#define CUT_KEEP_NS (3 * PEER_LOST_AGAIN_NS)

static struct {
	const struct conf *conf;
	uint32_t self;
	struct hjob *hjobs;
	struct cut *cuts;               /* links down (cuts_add) */
	uint32_t ncuts, capcuts;
	uint8_t ids_used[JOB_IDS_PER_HOME];
	uint8_t gen[JOB_IDS_PER_HOME];  /* generation each index had last (wire.h) */
	uint32_t next_index;            /* indexes are handed out in turn */
} home;

static struct hjob *hjob_find(uid_t uid, const char *name)
{
	for (struct hjob *h = home.hjobs; h; h = h->next)
		if (h->uid == uid && strcmp(h->name, name) == 0)
			return h;
	return NULL;
}

static struct hjob *hjob_by_id(uint32_t id, uint32_t gen)
{
	for (struct hjob *h = home.hjobs; h; h = h->next)
		if (h->id == id)
			return h->gen == gen ? h : NULL;
	return NULL;
}

/* Ranks of uid's jobs here (for HOME_RANKS_PER_UID). */
static uint64_t uid_ranks(uid_t uid)
{
	uint64_t n = 0;

	for (struct hjob *h = home.hjobs; h; h = h->next)
		n += h->uid == uid ? h->size : 0;
	return n;
}

static void hjob_free(struct hjob *h)
{
	struct hjob **pp;

	for (pp = &home.hjobs; *pp != h; pp = &(*pp)->next)
		;
	*pp = h->next;
	if (h->id)
		home.ids_used[h->id & (JOB_IDS_PER_HOME - 1)] = 0;
	free(h->node);
	free(h->hn);
	free(h);
}

static struct steps_node *hnode_find(struct hjob *h, uint32_t node)
{
	for (uint32_t i = 0; i < h->nhn; i++)
		if (h->hn[i].node == node)
			return &h->hn[i];
	return NULL;
}

/* The node's entry, added for its daemon's incarnation inc if it is new
 * (only a JOIN adds nodes). */
static struct steps_node *hnode(struct hjob *h, uint32_t node, uint64_t inc)
{
	struct steps_node *n = hnode_find(h, node);

	if (n)
		return n;
	if (h->nhn == h->caphn) {
		uint32_t cap = h->caphn ? 2 * h->caphn : 8;
		struct steps_node *grown = realloc(h->hn, cap * sizeof(*grown));

		if (!grown)
			return NULL;
		h->hn = grown;
		h->caphn = cap;
	}
	h->hn[h->nhn] = (struct steps_node){ .node = node, .incarnation = inc, .step = h->step };
	return &h->hn[h->nhn++];
}

/* The job can complete no more steps: FAIL to each of its nodes, behind the
 * STEPs that went to it (home.h), and no STEP after it (home_report). */
static void fail_hjob(struct hjob *h, uint32_t rank, uint32_t node, int err, uint32_t coll_ok, const char *text)
{
	struct wire_ctl_fail f = { .job = h->id, .gen = h->gen, .step = h->step, .rank = rank, .node = node,
				   .err = err, .coll_ok = coll_ok };

	if (!h->started || (h->failed && coll_ok >= h->coll_ok && (err == EPIPE || h->lost)))
		return;
	/* Failed already: a later failure can only lower the collective
	 * operations that may still complete (a rank that left before
	 * posting one of them), or say that more than ranks leaving went
	 * wrong (which ends the split groups' operations: coll.c), and the
	 * nodes hear that. */
	if (!h->failed)
		log_info("job %s (uid %u): %s; its ranks' steps from step %u on fail", h->name, h->uid, text,
			 h->step);
	if (!h->failed || coll_ok < h->coll_ok)
		h->coll_ok = coll_ok;
	f.coll_ok = h->coll_ok;
	h->failed = 1;
	h->lost |= err != EPIPE;
	for (uint32_t i = 0; i < h->nhn; i++)
		msg_fail(h->hn[i].node, &f, text);
}

static void fail_if_cut(struct hjob *h, const struct loss *l, const char *why);

/* Node's ranks in job h are gone (its daemon restarted: they will never say
 * LEAVE), as if they had left: the job fails if it had started (FAIL to its
 * nodes, the node itself too, whose new instance may have ranks of it),
 * then the node's entry goes.  Returns 1 if that freed h. */
static int drop_node(struct hjob *h, uint32_t node, const char *why)
{
	uint32_t gone = 0, i;

	for (uint32_t r = 0; r < h->size; r++) {
		if (h->node[r] != node)
			continue;
		h->node[r] = JOB_NO_NODE;
		h->joined--;
		gone++;
	}
	if (gone)
		log_rl_info("job %s (uid %u): %u ranks on node %u are gone (%s)", h->name, h->uid, gone, node, why);
	if (gone && !h->joined) {
		hjob_free(h);
		return 1;
	}
	if (gone)
		fail_hjob(h, JOB_NO_NODE, node, EHOSTDOWN, 0, why);
	/* Its step counters must not count any more either. */
	for (i = 0; i < h->nhn && h->hn[i].node != node; i++)
		;
	if (i < h->nhn)
		h->hn[i] = h->hn[--h->nhn];
	return 0;
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
		log_rl_err("out of memory for the rank table of job %s", h->name);
		return;
	}
	for (uint32_t i = 0; i < h->nhn; i++) {
		uint32_t node = h->hn[i].node;

		h->hn[i].have = 0;
		for (uint32_t first = 0; first < h->size; first += WIRE_TABLE_MAX) {
			struct wire_ctl_table t = {
				.uid = h->uid, .job = h->id, .gen = h->gen, .size = h->size, .first = first,
				.count = h->size - first < WIRE_TABLE_MAX ? h->size - first : WIRE_TABLE_MAX,
				.name_len = (uint32_t)strlen(h->name),
			};
			ssize_t n = wire_ctl_encode_table(buf, cap, &t, h->name, h->node + first);

			if (n > 0)
				ctlq_send(node, WIRE_CTL_TABLE, buf, (uint32_t)n);
		}
	}
	free(buf);
}

void home_join(const struct wire_ctl *c, uint32_t from)
{
	const struct wire_ctl_rank *r = &c->u.rank;
	struct hjob *h = hjob_find(r->uid, c->name);
	struct steps_node *n;

	/* A JOIN from a new instance of a node whose earlier one had ranks
	 * here: that one restarted (its LOST has not come yet), and its ranks
	 * are gone.  One from an earlier instance than the one whose ranks are
	 * here is old news, come late. */
	if (h && (n = hnode_find(h, from)) && n->incarnation != r->incarnation) {
		if (r->incarnation < n->incarnation)
			return;
		if (drop_node(h, from, "its daemon restarted"))
			h = NULL;
	}
	if (!h) {
		if (uid_ranks(r->uid) + r->size > HOME_RANKS_PER_UID) {
			log_rl_warn("job %s (uid %u): the user's jobs homed here would exceed %u ranks; refused",
				    c->name, r->uid, HOME_RANKS_PER_UID);
			msg_rank(from, WIRE_CTL_REJECT, r->uid, c->name, r->size, r->rank, EUSERS, 0);
			return;
		}
		h = calloc(1, sizeof(*h));
		if (h)
			h->node = malloc(r->size * sizeof(*h->node));
		if (!h || !h->node) {
			free(h);
			msg_rank(from, WIRE_CTL_REJECT, r->uid, c->name, r->size, r->rank, ENOMEM, 0);
			return;
		}
		for (uint32_t i = 0; i < r->size; i++)
			h->node[i] = JOB_NO_NODE;
		h->uid = r->uid;
		snprintf(h->name, sizeof(h->name), "%s", c->name);
		h->size = r->size;
		h->step = 1;
		h->next = home.hjobs;
		home.hjobs = h;
	}
	if (h->size != r->size) {
		msg_rank(from, WIRE_CTL_REJECT, r->uid, c->name, r->size, r->rank, EINVAL, 0);
		return;
	}
	if (h->node[r->rank] == from)
		return;         /* said again by the same instance (its node says JOIN again when it
				 * hears this home restarted, or could not reach it) */
	if (h->node[r->rank] != JOB_NO_NODE) {
		msg_rank(from, WIRE_CTL_REJECT, r->uid, c->name, r->size, r->rank, EADDRINUSE, 0);
		return;
	}
	if (h->started) {
		/* A rank of a job that has started (and failed when it left)
		 * cannot take its place again: its steps would wait for a job
		 * the others have given up on.  The job ends when its last
		 * rank leaves; then the name is free. */
		msg_rank(from, WIRE_CTL_REJECT, r->uid, c->name, r->size, r->rank, EBUSY, 0);
		return;
	}
	if (!hnode(h, from, r->incarnation)) {
		msg_rank(from, WIRE_CTL_REJECT, r->uid, c->name, r->size, r->rank, ENOMEM, 0);
		return;
	}
	h->node[r->rank] = from;
	h->joined++;
	if (h->joined < h->size)
		return;
	if (!h->id) {
		uint32_t i = 0;

		/* The next free index after the last one given (never 0). */
		for (uint32_t k = 0; k < JOB_IDS_PER_HOME - 1 && !i; k++) {
			uint32_t cand = 1 + (home.next_index + k) % (JOB_IDS_PER_HOME - 1);

			if (!home.ids_used[cand])
				i = cand;
		}
		if (!i) {
			log_rl_err("node %u is home of %u jobs already; job %s refused", home.self, JOB_IDS_PER_HOME - 1,
				   h->name);
			msg_rank(from, WIRE_CTL_REJECT, r->uid, c->name, r->size, r->rank, EUSERS, 0);
			h->node[r->rank] = JOB_NO_NODE;
			h->joined--;
			return;
		}
		home.ids_used[i] = 1;
		home.next_index = i;
		h->gen = home.gen[i] = (uint8_t)((home.gen[i] + 1) & WIRE_GEN_MASK);
		h->id = home.self << WIRE_JOB_INDEX_BITS | i;
	}
	log_rl_info("job %s (uid %u): all %u ranks joined on %u nodes; id %u generation %u", h->name, h->uid,
		    h->size, h->nhn, h->id, h->gen);
	send_table(h);
}

void home_have(const struct wire_ctl *c, uint32_t from)
{
	struct hjob *h = hjob_by_id(c->u.step.job, c->u.step.gen);
	struct steps_node *n;

	uint64_t asum = 0, bsum = 0;
	uint32_t na = 0, nb = 0;
	struct wire_ctl_go_tail tail;
	struct wire_go_fn fns[WIRE_GO_FNS_MAX];

	if (!h || !(n = hnode_find(h, from)))
		return;
	n->have = 1;
	n->alpha_ns = c->u.step.alpha_ns;
	n->beta_ps = c->u.step.beta_ps;
	for (uint32_t i = 0; i < h->nhn; i++)
		if (!h->hn[i].have)
			return;
	h->started = 1;
	/* The job's link cost: the mean of what its nodes measured (each the
	 * mean of its links), the same for every node of it, so that they all
	 * choose the same algorithms (coll/coll.c). */
	for (uint32_t i = 0; i < h->nhn; i++) {
		asum += h->hn[i].alpha_ns;
		na += h->hn[i].alpha_ns != 0;
		bsum += h->hn[i].beta_ps;
		nb += h->hn[i].beta_ps != 0;
	}
	/* ... the algorithms this node's configuration forces (collectives.*)
	 * and its runtime functions (costs.h) */
	costs_go(h->uid, &tail, fns);
	for (uint32_t i = 0; i < h->nhn; i++)
		msg_go(h->hn[i].node, h->id, h->gen, na ? (uint32_t)(asum / na) : 0, nb ? (uint32_t)(bsum / nb) : 0,
		       &tail, fns);
	/* A link it needs may be down already (its nodes check their routes
	 * too, when GO comes). */
	for (uint32_t i = 0; i < cuts_count() && !h->lost; i++) {
		char why[WIRE_FAIL_TEXT_MAX];

		snprintf(why, sizeof(why), "the link between nodes %u and %u is down", home.cuts[i].l.a,
			 home.cuts[i].l.b);
		fail_if_cut(h, &home.cuts[i].l, why);
	}
}

void home_leave(const struct wire_ctl *c, uint32_t from)
{
	const struct wire_ctl_rank *r = &c->u.rank;
	struct hjob *h = hjob_find(r->uid, c->name);
	struct steps_node *n = h ? hnode_find(h, from) : NULL;
	char text[WIRE_FAIL_TEXT_MAX];

	if (!n || n->incarnation != r->incarnation || r->rank >= h->size || h->node[r->rank] != from)
		return;
	h->node[r->rank] = JOB_NO_NODE;
	if (--h->joined == 0) {
		hjob_free(h);
		return;
	}
	/* No step can complete without it.  (Ranks that end a job normally
	 * leave after their last step completed: the STEP for it went out
	 * before this, along the same routes.) */
	snprintf(text, sizeof(text), "rank %u (on node %u) left job %s in step %u", r->rank, from, h->name, h->step);
	/* The collectives its node started go on there to the end (coll.h):
	 * those may still complete everywhere, the later ones cannot. */
	fail_hjob(h, r->rank, JOB_NO_NODE, EPIPE, r->coll_started, text);
}

int loss_cuts(const struct route *r, const struct loss *l, uint32_t x, uint32_t y)
{
	if (l->restarted_as)
		return route_uses_node(r, x, y, l->b) || route_uses_node(r, y, x, l->b);
	return route_uses_link(r, x, y, l->a, l->b) || route_uses_link(r, y, x, l->a, l->b);
}

/* Forgets the cuts not said again for CUT_KEEP_NS. */
static void cuts_expire(void)
{
	uint64_t now = loop_now_ns();

	for (uint32_t i = 0; i < home.ncuts; i++)
		if (now - home.cuts[i].said_ns > CUT_KEEP_NS)
			home.cuts[i--] = home.cuts[--home.ncuts];
}

int cuts_add(uint32_t a, uint32_t b)
{
	cuts_expire();
	for (uint32_t i = 0; i < home.ncuts; i++)
		if (home.cuts[i].l.a == a && home.cuts[i].l.b == b) {
			home.cuts[i].said_ns = loop_now_ns();
			return 0;
		}
	if (home.ncuts == home.capcuts) {
		uint32_t cap = home.capcuts ? 2 * home.capcuts : 8;
		struct cut *grown = realloc(home.cuts, cap * sizeof(*grown));

		if (!grown) {
			log_rl_err("out of memory for the links that are down");
			return 1;
		}
		home.cuts = grown;
		home.capcuts = cap;
	}
	home.cuts[home.ncuts++] = (struct cut){ .l = { .a = a, .b = b }, .said_ns = loop_now_ns() };
	return 1;
}

void cuts_del(uint32_t a, uint32_t b)
{
	for (uint32_t i = 0; i < home.ncuts; i++)
		if (home.cuts[i].l.a == a && home.cuts[i].l.b == b)
			home.cuts[i--] = home.cuts[--home.ncuts];
}

void cuts_del_from(uint32_t a)
{
	for (uint32_t i = 0; i < home.ncuts; i++)
		if (home.cuts[i].l.a == a)
			home.cuts[i--] = home.cuts[--home.ncuts];
}

uint32_t cuts_count(void)
{
	cuts_expire();
	return home.ncuts;
}

struct loss cuts_at(uint32_t i)
{
	return home.cuts[i].l;
}

/* A started job whose routes between here and one of its nodes the loss cuts
 * fails. */
static void fail_if_cut(struct hjob *h, const struct loss *l, const char *why)
{
	for (uint32_t i = 0; i < h->nhn && h->started && !h->lost; i++)
		if (loss_cuts(&home.conf->route, l, home.self, h->hn[i].node))
			fail_hjob(h, JOB_NO_NODE, l->b, EHOSTDOWN, 0, why);
}

void home_lost(const struct loss *l, const char *why)
{
	struct hjob *h = home.hjobs;

	while (h) {
		struct hjob *next = h->next;
		struct steps_node *n = hnode_find(h, l->b);

		if (!l->restarted_as || !n)
			fail_if_cut(h, l, why);
		else if (n->incarnation < l->restarted_as && !drop_node(h, l->b, why))
			fail_if_cut(h, l, why);
		/* else its ranks there joined from the new instance (or a later
		 * one: incarnations grow), or h is gone */
		h = next;
	}
}

void home_fail(const struct wire_ctl *c, uint32_t from)
{
	const struct wire_ctl_fail *f = &c->u.fail;
	struct hjob *h = hjob_by_id(f->job, f->gen);

	if (h && hnode_find(h, from))   /* only a node of the job says so */
		fail_hjob(h, f->rank, f->node, f->err, f->coll_ok, c->text);
}

void home_report(const struct wire_ctl *c, uint32_t from)
{
	const struct wire_ctl_report *r = &c->u.report;
	struct hjob *h = hjob_by_id(r->job, r->gen);
	struct steps_node *n;

	if (!h || h->failed || r->step != h->step)
		return;         /* a late report of a finished step, a job gone, or one that failed */
	n = hnode_find(h, from);
	if (!n || !steps_take(h->hn, h->nhn, h->size, &h->step, n, r))
		return;
	log_debug("job %s: step %u complete", h->name, h->step - 1);
	for (uint32_t i = 0; i < h->nhn; i++)
		msg_job(h->hn[i].node, WIRE_CTL_STEP, h->id, h->gen, h->step - 1);
}

void home_init(const struct conf *c, uint32_t self)
{
	home.conf = c;
	home.self = self;
	/* Generations start anywhere: jobs this node was home of before it
	 * restarted may still be known elsewhere (cluster.c forgets them when
	 * it hears that, but an item of one may be on its way). */
	if (getrandom(home.gen, sizeof(home.gen), 0) != (ssize_t)sizeof(home.gen))
		memset(home.gen, 0, sizeof(home.gen));
}

void home_fini(void)
{
	while (home.hjobs)
		hjob_free(home.hjobs);
	free(home.cuts);
	home.cuts = NULL;
	home.ncuts = home.capcuts = 0;
}

void home_write_status(FILE *out, uid_t uid)
{
	for (struct hjob *h = home.hjobs; h; h = h->next) {
		if (uid != 0 && h->uid != uid)
			continue;
		fprintf(out, "home of job %s uid %u: id %u, %u of %u ranks joined on %u nodes, step %u\n", h->name,
			h->uid, h->id, h->joined, h->size, h->nhn, h->step);
	}
}
