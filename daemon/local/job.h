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
 * Ownership: job_join creates a job, job_leave frees it when its last local
 * rank leaves; a job holds no reference to anything it does not own (its
 * endpoints point back at it, and leave before they go).
 */
#ifndef FERRY_LOCAL_JOB_H
#define FERRY_LOCAL_JOB_H

#include "../../proto/job.h"

#include <stdint.h>
#include <sys/types.h>

#define JOB_NO_NODE UINT32_MAX

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
	uint32_t joined;        /* ranks attached on this node */
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
 * since: then the slot stays as it is); frees the job when no rank is left
 * on this node.  Returns 1 if the job was freed. */
int job_leave(struct job *j, uint32_t rank, const struct ep *ep);

struct job *job_find(uid_t uid, const char *name);
struct job *job_by_id(uint32_t id);
void job_set_id(struct job *j, uint32_t id);

/* First job, for iteration with ->next. */
struct job *job_first(void);
uint32_t job_count(void);

#endif
