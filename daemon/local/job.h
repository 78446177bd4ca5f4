/* daemon/local/job.h - this node's view of jobs: named sets of endpoints that
 * know each other by rank, possibly spread over many nodes.
 *
 * A job is keyed by (uid, name): the uid comes from the joining client's
 * SO_PEERCRED, so two users who pick the same name get two unrelated jobs,
 * and nothing of one user's job is reachable from another's endpoints.  Across
 * nodes the uid is taken to mean the same user (shared passwd/LDAP, as on any
 * cluster).  A node keeps a job while at least one of its ranks is attached
 * here.
 *
 * The rank table (rank -> local endpoint or node) is what every item needs on
 * its way, so it lives here, below the layers that route items; the cluster
 * layer fills in where remote ranks live and the cluster-wide id (from the
 * job's home node), and reads the step counters that the data path keeps.
 *
 * Ownership: jobs are reference-counted.  job_join creates a job or takes a
 * reference for the endpoint that joins; job_leave drops it.  Anything else
 * that keeps a job pointer beyond the current call (an operation in flight)
 * takes its own with job_hold and drops it with job_put.  The last reference
 * frees the job; a job with no local rank left but still referenced is
 * unlisted at once (job_find and job_by_id no longer return it: a new job
 * of the same name is a new job), so only its holders see it, marked gone.
 * Since endpoints end only from the loop (endpoint.h), a job never vanishes
 * under a caller that got it from an endpoint in the same call.  A job holds
 * no reference to anything it does not own (its endpoints point back at it,
 * and leave before they go).
 */
#ifndef FERRY_LOCAL_JOB_H
#define FERRY_LOCAL_JOB_H

#include "../plan/cost.h"
#include "../../proto/job.h"
#include "../../proto/wire.h"

#include <stdint.h>
#include <sys/types.h>

#define JOB_NO_NODE UINT32_MAX

struct direct;
struct ep;
struct user;

struct job_rank {
	struct ep *ep;          /* endpoint attached on this node, or NULL */
	uint32_t node;          /* where the rank lives; JOB_NO_NODE if unknown */
};

struct job {
	struct job *next, *id_next;
	uid_t uid;
	char name[PROTO_NAME_MAX + 1];
	uint32_t size;          /* ranks */
	uint32_t id;            /* cluster-wide id from the home node; 0 until known */
	uint8_t gen;            /* ... and its generation (proto/wire.h) */
	uint32_t joined;        /* ranks attached on this node */
	uint32_t refs;          /* one per attached endpoint, one per job_hold */
	int gone;               /* no rank here any more; unlisted, freed with the last reference */
	int ready;              /* the whole rank table is known */
	struct job_rank *ranks; /* size entries */
	struct user *user;      /* its uid's accounting (user.h), charged mem_bytes */
	uint64_t mem_bytes;     /* this struct and the rank table */

	/* Step accounting: the data path counts, the cluster layer reads (see
	 * cluster/cluster.h); counts are cumulative over steps. */
	uint32_t step;          /* current step, from 1 */
	uint32_t done;          /* local ranks that ended the current step */
	uint64_t sent;          /* item records local ranks handed over */
	uint64_t ringed;        /* item records for local ranks written to RX rings or dropped */
	struct {                /* the cluster layer's: what the last report said, and when */
		uint32_t step, done;
		uint64_t sent, ringed, ns;
	} reported;

	/* Flow control across nodes (fwd/flow.h): ranks of this job on other
	 * nodes that asked this node to stop sending to them (XOFF).  A bitmap
	 * of size bits, allocated at the first XOFF; nxoff bits are set. */
	uint8_t *xoff;
	uint32_t nxoff;
	/* The nodes other than this one that host ranks of the job, once asked
	 * for (job_nodes). */
	uint32_t *nodes, nnodes;

	/* The job can no longer complete its steps (cluster/cluster.h): the
	 * errno its ranks' ferry_step_wait returns, 0 while it can; and why. */
	int failed;
	char fail_text[160];
	/* Collective operations (coll/coll.h): how many this node has started
	 * (it runs them to the end, even when its ranks leave; a LEAVE says so
	 * to the home); and, once the job failed, up to which operation they
	 * may still complete (the FAIL says, from what the node that lost its
	 * rank had started; the others fail). */
	uint32_t coll_started;
	uint32_t coll_ok;
	/* ... and the job failed otherwise than by ranks leaving (a node or
	 * link lost, an operation of the whole job failed): the errno, which
	 * ends the operations of its split groups too (coll.c, "Groups");
	 * 0 if not. */
	int coll_groups_fail;
	/* Pieces of its collectives that came before it started here, waiting
	 * in the engine's list (coll.c), and their bytes. */
	uint32_t coll_pre;
	uint64_t coll_pre_bytes;
	uint32_t eps_gone;      /* local ranks' endpoints that left the table (coll looks at
				 * its groups' leaves when this changes) */
	/* rank -> node as the table was when the job started (GO): the
	 * collectives' layout, which a rank that leaves does not change
	 * (ranks[].node does); NULL before GO.  Freed with the job. */
	uint32_t *layout;
	/* The link cost its nodes agreed on at GO (plan/linkcost.h; 0:
	 * unknown, the engine's defaults). */
	uint32_t coll_alpha_ns, coll_beta_ps;
	/* ... the algorithms its home's configuration forces, per family (GO's
	 * tail: 0 automatic, else the algorithm + 1), and its home's runtime
	 * functions (plan/cost.h; tau and tc 0: none) */
	uint8_t coll_force[WIRE_GO_FAMS];
	struct cost_fn coll_fn[CTL_FAMS][CTL_FAM_ALGS_MAX];
	/* Its home was lost: its id may be handed out again by the home's
	 * next instance, so it has given it up (job_forget_id) and its items
	 * are dropped where they start (fwd/tx.c). */
	int stale;

	/* The direct rings of its endpoints here (direct.h), made at most once,
	 * when it became ready (session.c); NULL if none were.  Freed with
	 * the job. */
	struct direct *direct;
	int direct_tried;       /* the endpoints that asked were looked for */

	/* statistics */
	uint64_t items_dropped; /* sent to a rank that had left */
};

/* Attaches endpoint ep as rank of the job (uid, name) of size ranks on node
 * self, creating the job if needed (the job and its rank table are the
 * user's: user_take_job).  Returns 0 with *job_p set, -EINVAL if the job
 * exists here with another size (or rank >= size), -EADDRINUSE if the rank
 * is attached here already, -ENOMEM, or the refusals of user_take_job
 * (-EDQUOT, -ENOBUFS; user_refusal() says which limit). */
int job_join(uid_t uid, const char *name, uint32_t size, uint32_t rank, uint32_t self, struct ep *ep,
	     struct job **job_p);

/* Detaches endpoint ep from rank (once for each job_join; ep may have left
 * the table already, see ep_fail, and another endpoint may hold the rank
 * since: then the slot stays as it is) and drops its reference.  When no
 * rank is left on this node the job is unlisted.  Returns 1 if the job was
 * freed. */
int job_leave(struct job *j, uint32_t rank, const struct ep *ep);

/* 1 if rank of j (on another node) said stop (XOFF). */
static inline int job_xoff(const struct job *j, uint32_t rank)
{
	return j->nxoff && (j->xoff[rank / 8] >> (rank % 8) & 1);
}

/* Records an XOFF (on) or XON (!on) for rank of j.  0, or -ENOMEM. */
int job_set_xoff(struct job *j, uint32_t rank, int on);

/* The nodes other than self that host ranks of j (from its rank table, so
 * only once it is ready); *n_p of them.  NULL with *n_p 0 if none (or out of
 * memory). */
const uint32_t *job_nodes(struct job *j, uint32_t self, uint32_t *n_p);

/* Keeps j (see Ownership) / lets go of it; returns 1 if that freed it. */
void job_hold(struct job *j);
int job_put(struct job *j);

struct job *job_find(uid_t uid, const char *name);
/* j gives up its id (j->stale): job_by_id no longer finds it. */
void job_forget_id(struct job *j);

/* The job with cluster-wide id and generation gen, or NULL. */
struct job *job_by_id(uint32_t id, uint8_t gen);
void job_set_id(struct job *j, uint32_t id, uint8_t gen);

/* First job, for iteration with ->next. */
struct job *job_first(void);
uint32_t job_count(void);

#endif
