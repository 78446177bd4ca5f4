/* proto/job.c - see job.h. */
#include "job.h"

int proto_name_ok(const char *name, size_t len)
{
	if (len < 1 || len > PROTO_NAME_MAX)
		return 0;
	for (size_t i = 0; i < len; i++)
		if (name[i] <= ' ' || name[i] > '~')
			return 0;
	return 1;
}
