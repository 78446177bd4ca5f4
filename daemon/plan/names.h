/* daemon/plan/names.h - the planners' algorithm names: a table indexed by
 * the algorithm's enum, looked up both ways the same way everywhere. */
#ifndef FERRY_PLAN_NAMES_H
#define FERRY_PLAN_NAMES_H

#include <string.h>

/* names[i] for 0 <= i < n, or NULL. */
static inline const char *names_get(const char *const *names, int n, unsigned i)
{
	return i < (unsigned)n ? names[i] : NULL;
}

/* The index of name among names[0..n), or -1 (name NULL or unknown). */
static inline int names_find(const char *const *names, int n, const char *name)
{
	for (int i = 0; name && i < n; i++)
		if (strcmp(name, names[i]) == 0)
			return i;
	return -1;
}

#endif
