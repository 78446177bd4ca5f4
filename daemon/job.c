/* daemon/job.c - see job.h. */
#include "job.h"

#include <errno.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

static struct job *jobs;
static uint32_t njobs, next_id = 1;

static struct job *find(uid_t uid, const char *name)
{
	for (struct job *j = jobs; j; j = j->next)
		if (j->uid == uid && strcmp(j->name, name) == 0)
			return j;
	return NULL;
}

int job_join(uid_t uid, const char *name, uint32_t size, uint32_t rank, struct sess *s,
	     struct job **job_p)
{
	struct job *j = find(uid, name);

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
		j->ranks = calloc(size, sizeof(*j->ranks));
		if (!j->ranks) {
			free(j);
			return -ENOMEM;
		}
		j->uid = uid;
		snprintf(j->name, sizeof(j->name), "%s", name);
		j->size = size;
		j->id = next_id++;
		j->next = jobs;
		jobs = j;
		njobs++;
	}
	j->ranks[rank].sess = s;
	j->joined++;
	*job_p = j;
	return 0;
}

void job_leave(struct job *j, uint32_t rank)
{
	struct job **pp;

	if (!j->ranks[rank].sess)
		return;
	j->ranks[rank].sess = NULL;
	if (--j->joined > 0)
		return;
	for (pp = &jobs; *pp != j; pp = &(*pp)->next)
		;
	*pp = j->next;
	njobs--;
	free(j->ranks);
	free(j);
}

struct job *job_first(void)
{
	return jobs;
}

uint32_t job_count(void)
{
	return njobs;
}
