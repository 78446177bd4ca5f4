/* daemon/job.h - jobs: named sets of endpoints that know each other by rank.
 *
 * A job is keyed by (uid, name): the uid comes from the joining client's
 * SO_PEERCRED, so two users who pick the same name get two unrelated jobs, and
 * nothing of one user's job is reachable from another's endpoints.  The job
 * lives while at least one of its ranks is attached.
 */
#ifndef FERRY_JOB_H
#define FERRY_JOB_H

#include "../proto/ctl.h"

#include <stdint.h>
#include <sys/types.h>

struct sess;

struct job_rank {
	struct sess *sess;      /* attached endpoint on this node, or NULL */
};

struct job {
	struct job *next;
	uid_t uid;
	char name[CTL_JOB_MAX + 1];
	uint32_t id;            /* unique among this daemon's jobs, for logs */
	uint32_t size;          /* ranks */
	uint32_t joined;        /* ranks with an endpoint */
	struct job_rank *ranks; /* size entries */
	/* counters */
	uint64_t items_delivered;
	uint64_t items_dropped; /* sent to a rank that had left */
};

/* Attaches session s as rank of the job (uid, name) of size ranks, creating the
 * job if needed.  Returns 0 with *job_p set, -EINVAL if the job exists with
 * another size, -EADDRINUSE if the rank is taken, -ENOMEM. */
int job_join(uid_t uid, const char *name, uint32_t size, uint32_t rank, struct sess *s,
	     struct job **job_p);

/* Detaches rank; frees the job when no rank is left. */
void job_leave(struct job *j, uint32_t rank);

/* First job, for iteration with ->next. */
struct job *job_first(void);

/* Number of jobs. */
uint32_t job_count(void);

#endif
