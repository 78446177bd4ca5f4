/* daemon/local/direct.h - the direct rings of a job's endpoints on this node
 * (proto/direct.h): the memfd region ferryd makes for them once, and what
 * ferryd still does for it afterwards, which is only to say which slot's
 * endpoint has ended.
 *
 * The session layer (session.c) picks the endpoints and sends each its
 * CTL_DIRECT; this module makes the region, keeps its header page mapped,
 * and marks a slot gone when its endpoint ends (ep_close).  It knows
 * endpoints only by identity and by the eventfd that wakes their clients,
 * so that it sits below endpoint.c and job.c, which call it.
 *
 * Ownership: a struct direct belongs to its job (struct job's direct),
 * which frees it with direct_free when the job itself is freed (job_put),
 * after every endpoint of the job has ended.  It holds no reference: a
 * slot's endpoint and eventfd are forgotten (direct_end) before the
 * endpoint closes its eventfd.
 */
#ifndef FERRY_LOCAL_DIRECT_H
#define FERRY_LOCAL_DIRECT_H

#include "../../proto/direct.h"

#include <stdint.h>
#include <stdio.h>

struct ep;

/* One slot of a job's direct region. */
struct direct_slot {
	uint32_t rank;                  /* the job's rank in this slot */
	const struct ep *ep;            /* its endpoint, for identity only; NULL once it ended */
	int efd;                        /* that endpoint's efd_client, -1 once it ended */
};

struct direct {
	uint8_t *hdr;                   /* the region's header page, mapped shared (gone[]) */
	uint64_t region_bytes;          /* proto_direct_region_bytes(n, ring_size) */
	uint64_t ring_size;             /* data bytes of each ring */
	uint32_t n;                     /* slots */
	struct direct_slot slot[];      /* n of them, by slot */
};

struct direct_stats {
	uint64_t jobs;                  /* jobs given direct rings */
	uint64_t failed;                /* regions that could not be made */
};
extern struct direct_stats direct_stats;

/* Makes the direct region of n slots (1 .. PROTO_DIRECT_MAX) of ring_size
 * data bytes each (ring_size_ok): a sealed memfd, zero (every ring empty,
 * nobody gone), of which only the header page is mapped here.  slots[]
 * (copied) names each slot's rank, endpoint and efd_client; name is the
 * job's, for logs.  Returns 0 with *d_p (the caller's to keep, normally in
 * its job) and *memfd_p (the caller sends it to the slots' clients and
 * closes it), or -errno (logged, rate-limited: clients can make it fail). */
int direct_create(const char *name, uint32_t n, uint64_t ring_size, const struct direct_slot *slots,
		  struct direct **d_p, int *memfd_p);

/* Endpoint ep is ending: if it has a slot in d (NULL: no region), sets
 * gone[slot] (release) and wakes the client of every other slot whose
 * endpoint has not ended, so that one waiting for room in its ring toward
 * ep's rank sees it gone; the slot forgets ep and its eventfd.  Call before
 * ep's eventfd is closed. */
void direct_end(struct direct *d, const struct ep *ep);

/* Unmaps the header page and frees d (NULL: nothing). */
void direct_free(struct direct *d);

/* Regions mapped now. */
uint32_t direct_count(void);

/* Writes d's line for ferryctl status (under its job's line). */
void direct_write_status(FILE *out, const struct direct *d);

#endif
