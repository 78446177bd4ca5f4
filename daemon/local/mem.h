/* daemon/local/mem.h - memory a client shares with ferryd for collective
 * operations (DESIGN.md "Collectives": ferry_alloc memory the daemon reads
 * and writes in place, and the staging libferry copies ordinary buffers
 * into).
 *
 * A client registers a region with CTL_MEM: a memfd of shared memory
 * (tmpfs: a hugetlbfs one could have a hole punched and its pages taken,
 * and the daemon's next access would be a SIGBUS), sealed so that it
 * cannot shrink (F_SEAL_SHRINK, else an access after an ftruncate would
 * kill the daemon with SIGBUS) but open to more seals (no F_SEAL_SEAL), of
 * at least the size it says, every page of it there (written or
 * populated: no hole), numbered by the client (1, 2, ...; unique per
 * endpoint).  ferryd maps it shared, read and write, then adds
 * F_SEAL_FUTURE_WRITE, after which no one can punch a hole in it (mem.c,
 * hold_pages): the pages ferryd reads and writes are the client's memory
 * (its cgroup's) for as long as ferryd maps them, never ferryd's.  The
 * client keeps writing through the mapping it made before; it can make no
 * new writable mapping of the file, nor write(2) it.  An operation names
 * its buffers as (region, offset, length), checked against the region
 * here.
 *
 * Ownership: a region is reference-counted.  The endpoint's table holds one
 * reference from CTL_MEM to CTL_MEM_FREE or the endpoint's end; an
 * operation that uses the region holds one (mem_hold) until it ends (it may
 * end after its rank left: the daemon finishes operations for the other
 * nodes).  The last reference unmaps it.
 */
#ifndef FERRY_LOCAL_MEM_H
#define FERRY_LOCAL_MEM_H

#include "../../proto/ctl.h"

#include <stddef.h>
#include <stdint.h>

struct user;

struct mem {
	struct mem *next;               /* the endpoint's table */
	uint32_t id;
	uint32_t refs;
	uint8_t *base;
	uint64_t bytes;
	uint64_t mapped;                /* bytes mapped (bytes rounded up to pages) */
	struct user *user;              /* whose address space it counts in (user_take_mapped) */
};

/* Regions one endpoint may have, and their bytes in all. */
#define MEM_MAX_REGIONS CTL_MEM_MAX_REGIONS  /* a staging region per request, the application's */
#define MEM_MAX_BYTES   CTL_MEM_MAX_BYTES

/* Registers fd (taken: closed here whatever happens) as region id of the
 * endpoint whose table is list (struct ep's mems), of user u's, bytes long.
 * Returns 0, or -EINVAL (not a tmpfs memfd sealed against shrinking,
 * sealed with F_SEAL_SEAL or against writing already, shorter than bytes,
 * a hole in its first bytes, id 0 or in use), fcntl's error (ferryd's seal
 * refused), -EDQUOT (beyond MEM_MAX_REGIONS or
 * MEM_MAX_BYTES, or the user's share of address space: user.h), -ENOBUFS
 * (the node's), -ENOMEM, or mmap's error; why says what. */
int mem_add(struct mem **list, struct user *u, uint32_t id, int fd, uint64_t bytes, char *why, size_t why_len);

/* Drops the table's reference to region id.  Returns 0 or -ENOENT. */
int mem_remove(struct mem **list, uint32_t id);

/* Drops every region of the table (its endpoint's end). */
void mem_remove_all(struct mem **list);

/* The region id of the table, or NULL. */
struct mem *mem_find(struct mem *list, uint32_t id);

/* len bytes at off of m, or NULL if they are not all inside it. */
static inline uint8_t *mem_at(const struct mem *m, uint64_t off, uint64_t len)
{
	if (!m || off > m->bytes || len > m->bytes - off)
		return 0;
	return m->base + off;
}

void mem_hold(struct mem *m);
void mem_put(struct mem *m);

#endif
