/* daemon/job.c - see job.h. */
#include "job.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ID_BUCKETS 256

static struct job *jobs, *by_id[ID_BUCKETS];
static uint32_t njobs;
static struct job *last_by_id;  /* items of one job come in runs */

struct job *job_find(uid_t uid, const char *name)
{
	for (struct job *j = jobs; j; j = j->next)
		if (j->uid == uid && strcmp(j->name, name) == 0)
			return j;
	return NULL;
}

struct job *job_by_id(uint32_t id)
{
	if (last_by_id && last_by_id->id == id)
		return last_by_id;
	for (struct job *j = by_id[id % ID_BUCKETS]; j; j = j->id_next)
		if (j->id == id)
			return last_by_id = j;
	return NULL;
}

static void unhash(struct job *j)
{
	struct job **pp;

	if (last_by_id == j)
		last_by_id = NULL;
	if (!j->id)
		return;
	for (pp = &by_id[j->id % ID_BUCKETS]; *pp && *pp != j; pp = &(*pp)->id_next)
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
	j->id_next = by_id[id % ID_BUCKETS];
	by_id[id % ID_BUCKETS] = j;
}

int job_join(uid_t uid, const char *name, uint32_t size, uint32_t rank, uint32_t self,
	     uint32_t home, struct sess *s, struct job **job_p)
{
	struct job *j = job_find(uid, name);

	if (j) {
		if (j->size != size)
			return -EINVAL;
		if (rank >= j->size || j->ranks[rank].sess)
			return -EADDRINUSE;
	} else {
		if (rank >= size)
			return -EINVAL;
		j = calloc(1, sizeof(*j));
		if (!j)
			return -ENOMEM;
		j->ranks = malloc(size * sizeof(*j->ranks));
		if (!j->ranks) {
			free(j);
			return -ENOMEM;
		}
		for (uint32_t r = 0; r < size; r++)
			j->ranks[r] = (struct job_rank){ .sess = NULL, .node = JOB_NO_NODE };
		j->uid = uid;
		snprintf(j->name, sizeof(j->name), "%s", name);
		j->size = size;
		j->home = home;
		j->step = 1;
		j->next = jobs;
		jobs = j;
		njobs++;
	}
	j->ranks[rank].sess = s;
	j->ranks[rank].node = self;
	j->joined++;
	*job_p = j;
	return 0;
}

int job_leave(struct job *j, uint32_t rank)
{
	struct job **pp;

	if (!j->ranks[rank].sess)
		return 0;
	j->ranks[rank].sess = NULL;
	j->ranks[rank].node = JOB_NO_NODE;
	if (--j->joined > 0)
		return 0;
	for (pp = &jobs; *pp != j; pp = &(*pp)->next)
		;
	*pp = j->next;
	unhash(j);
	njobs--;
	free(j->ranks);
	free(j);
	return 1;
}

struct job *job_first(void)
{
	return jobs;
}

uint32_t job_count(void)
{
	return njobs;
}
