/* daemon/local/job.c - see job.h. */
#include "job.h"
#include "user.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ID_BUCKETS 256

static struct {
	struct job *all;
	struct job *by_id[ID_BUCKETS];
	struct job *last_by_id;         /* items of one job come in runs */
	uint32_t count;
} jobs;

struct job *job_find(uid_t uid, const char *name)
{
	for (struct job *j = jobs.all; j; j = j->next)
		if (j->uid == uid && strcmp(j->name, name) == 0)
			return j;
	return NULL;
}

struct job *job_by_id(uint32_t id)
{
	if (jobs.last_by_id && jobs.last_by_id->id == id)
		return jobs.last_by_id;
	for (struct job *j = jobs.by_id[id % ID_BUCKETS]; j; j = j->id_next)
		if (j->id == id)
			return jobs.last_by_id = j;
	return NULL;
}

static void unhash(struct job *j)
{
	struct job **pp;

	if (jobs.last_by_id == j)
		jobs.last_by_id = NULL;
	if (!j->id)
		return;
	for (pp = &jobs.by_id[j->id % ID_BUCKETS]; *pp && *pp != j; pp = &(*pp)->id_next)
		;
	if (*pp)
		*pp = j->id_next;
	j->id_next = NULL;
}

void job_set_id(struct job *j, uint32_t id)
{
	if (j->id == id)
		return;
	unhash(j);
	j->id = id;
	j->id_next = jobs.by_id[id % ID_BUCKETS];
	jobs.by_id[id % ID_BUCKETS] = j;
}

int job_join(uid_t uid, const char *name, uint32_t size, uint32_t rank, uint32_t self, struct ep *ep,
	     struct job **job_p)
{
	struct job *j = job_find(uid, name);

	if (j) {
		if (j->size != size)
			return -EINVAL;
		if (rank >= j->size || j->ranks[rank].ep)
			return -EADDRINUSE;
	} else {
		/* What a job costs here is the user's: taken before it is
		 * allocated, so that a JOIN of a huge size is refused, not
		 * served. */
		uint64_t bytes = sizeof(*j) + (uint64_t)size * sizeof(*j->ranks);
		struct user *u;
		int ret;

		if (rank >= size)
			return -EINVAL;
		u = user_get(uid);
		if (!u)
			return -ENOMEM;
		ret = user_take_job(u, bytes);
		if (ret < 0) {
			user_put(u);
			return ret;
		}
		j = calloc(1, sizeof(*j));
		if (j)
			j->ranks = malloc(size * sizeof(*j->ranks));
		if (!j || !j->ranks) {
			free(j);
			user_give_job(u, bytes);
			return -ENOMEM;
		}
		j->user = u;
		j->mem_bytes = bytes;
		for (uint32_t r = 0; r < size; r++)
			j->ranks[r] = (struct job_rank){ .ep = NULL, .node = JOB_NO_NODE };
		j->uid = uid;
		snprintf(j->name, sizeof(j->name), "%s", name);
		j->size = size;
		j->step = 1;
		j->next = jobs.all;
		jobs.all = j;
		jobs.count++;
	}
	j->ranks[rank].ep = ep;
	j->ranks[rank].node = self;
	j->joined++;
	*job_p = j;
	return 0;
}

int job_leave(struct job *j, uint32_t rank, const struct ep *ep)
{
	struct job **pp;

	/* The slot may be another endpoint's by now: this one left the table
	 * when it failed (ep_fail), and a new client took the rank. */
	if (j->ranks[rank].ep == ep || !j->ranks[rank].ep) {
		j->ranks[rank].ep = NULL;
		j->ranks[rank].node = JOB_NO_NODE;
	}
	if (--j->joined > 0)
		return 0;
	for (pp = &jobs.all; *pp != j; pp = &(*pp)->next)
		;
	*pp = j->next;
	unhash(j);
	jobs.count--;
	user_give_job(j->user, j->mem_bytes);
	free(j->ranks);
	free(j);
	return 1;
}

struct job *job_first(void)
{
	return jobs.all;
}

uint32_t job_count(void)
{
	return jobs.count;
}
