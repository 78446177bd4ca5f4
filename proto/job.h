/* proto/job.h - what names a job and its ranks, for every side: libferry and
 * ferryd on the control socket (ctl.h), daemons on the wire (wire.h), and the
 * configuration's cluster name, which follows the same rule.
 */
#ifndef FERRY_PROTO_JOB_H
#define FERRY_PROTO_JOB_H

#include <stddef.h>

/* Bytes in a job or cluster name. */
#define PROTO_NAME_MAX   63

/* Ranks in a job: 0 .. PROTO_MAX_RANKS-1 (ferry.h's FERRY_MAX_RANKS). */
#define PROTO_MAX_RANKS  (1u << 20)

/* Returns 1 if name[0..len) is a valid job or cluster name: 1 to
 * PROTO_NAME_MAX printable ASCII bytes, no spaces.  Else 0. */
int proto_name_ok(const char *name, size_t len);

#endif
