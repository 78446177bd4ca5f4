/* daemon/local/job.c - see job.h. */
#include "job.h"
#include "direct.h"
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

struct job *job_by_id(uint32_t id, uint8_t gen)
{
	struct job *j = jobs.last_by_id;

	if (j && j->id == id)
		return j->gen == gen ? j : NULL;
	for (j = jobs.by_id[id % ID_BUCKETS]; j; j = j->id_next)
		if (j->id == id)
			break;
	/* Ids are unique among the jobs here; an item of an earlier job that
	 * had this id has another generation. */
	if (!j || j->gen != gen)
		return NULL;
	return jobs.last_by_id = j;
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

void job_forget_id(struct job *j)
{
	unhash(j);
	j->stale = 1;
}

void job_set_id(struct job *j, uint32_t id, uint8_t gen)
{
	j->gen = gen;
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
	j->refs++;
	*job_p = j;
	return 0;
}

void job_hold(struct job *j)
{
	j->refs++;
}

int job_set_xoff(struct job *j, uint32_t rank, int on)
{
	int was;

	if (rank >= j->size)
		return 0;
	if (!j->xoff) {
		if (!on)
			return 0;
		j->xoff = calloc(j->size / 8 + 1, 1);
		if (!j->xoff)
			return -ENOMEM;
	}
	was = j->xoff[rank / 8] >> (rank % 8) & 1;
	if (on && !was) {
		j->xoff[rank / 8] |= (uint8_t)(1u << (rank % 8));
		j->nxoff++;
	} else if (!on && was) {
		j->xoff[rank / 8] &= (uint8_t)~(1u << (rank % 8));
		j->nxoff--;
	}
	return 0;
}

const uint32_t *job_nodes(struct job *j, uint32_t self, uint32_t *n_p)
{
	*n_p = 0;
	if (!j->nodes) {
		uint32_t top = 0, n = 0;
		uint8_t *seen;

		/* Nodes are below WIRE_MAX_NODES (proto/wire.h): one pass for
		 * the largest, a bitmap to take each once. */
		for (uint32_t r = 0; r < j->size; r++)
			if (j->ranks[r].node != JOB_NO_NODE && j->ranks[r].node >= top)
				top = j->ranks[r].node + 1;
		seen = calloc(top / 8 + 1, 1);
		j->nodes = seen ? malloc(sizeof(*j->nodes) * (j->size ? j->size : 1)) : NULL;
		for (uint32_t r = 0; j->nodes && r < j->size; r++) {
			uint32_t node = j->ranks[r].node;

			if (node == JOB_NO_NODE || node == self || (seen[node / 8] >> (node % 8) & 1))
				continue;
			seen[node / 8] |= (uint8_t)(1u << (node % 8));
			j->nodes[n++] = node;
		}
		free(seen);
		if (!j->nodes)
			return NULL;
		{
			uint32_t *shrunk = realloc(j->nodes, sizeof(*shrunk) * (n ? n : 1));

			if (shrunk)
				j->nodes = shrunk;
		}
		j->nnodes = n;
	}
	*n_p = j->nnodes;
	return j->nodes;
}

int job_put(struct job *j)
{
	if (--j->refs > 0)
		return 0;
	user_give_job(j->user, j->mem_bytes);
	direct_free(j->direct);
	free(j->xoff);
	free(j->nodes);
	free(j->layout);
	free(j->ranks);
	free(j);
	return 1;
}

int job_leave(struct job *j, uint32_t rank, const struct ep *ep)
{
	struct job **pp;

	/* The slot may be another endpoint's by now: this one left the table
	 * when it failed (ep_fail), and a new client took the rank. */
	if (j->ranks[rank].ep == ep || !j->ranks[rank].ep) {
		j->eps_gone += j->ranks[rank].ep != NULL;
		j->ranks[rank].ep = NULL;
		j->ranks[rank].node = JOB_NO_NODE;
	}
	if (--j->joined == 0) {
		for (pp = &jobs.all; *pp != j; pp = &(*pp)->next)
			;
		*pp = j->next;
		unhash(j);
		jobs.count--;
		j->gone = 1;
	}
	return job_put(j);
}

struct job *job_first(void)
{
	return jobs.all;
}

uint32_t job_count(void)
{
	return jobs.count;
}
