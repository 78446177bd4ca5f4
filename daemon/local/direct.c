/* daemon/local/direct.c - see direct.h.
 *
 * Ownership: direct_create's caller owns the struct direct it returns (the
 * job keeps it and frees it with direct_free when the job is freed) and the
 * memfd (closed once sent to the clients).  The region lives as long as
 * anyone maps it or holds the memfd: ferryd's header mapping, until
 * direct_free, and the clients'.  ferryd never maps the rings: the clients
 * that touch their pages are charged for them, not ferryd.  A slot's
 * eventfd is its endpoint's (endpoint.c closes it); direct_end forgets it
 * before that.
 */
#include "direct.h"
#include "../core/log.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

struct direct_stats direct_stats;

static uint32_t mapped;         /* regions whose header page is mapped */

int direct_create(const char *name, uint32_t n, uint64_t ring_size, const struct direct_slot *slots,
		  struct direct **d_p, int *memfd_p)
{
	uint64_t bytes = proto_direct_region_bytes(n, ring_size);
	struct direct *d;
	int memfd, ret;

	assert(n >= 1 && n <= PROTO_DIRECT_MAX && ring_size_ok(ring_size));
	d = calloc(1, sizeof(*d) + n * sizeof(d->slot[0]));
	if (!d) {
		log_rl_err("job %s: no memory for direct rings", name);
		return -ENOMEM;
	}
	memfd = memfd_create("ferry-direct", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (memfd < 0) {
		ret = -errno;
		log_rl_err("job %s: memfd_create for direct rings: %m", name);
		goto err_free;
	}
	/* Only the size is set here: the pages come as the clients touch
	 * them (no MAP_POPULATE, unlike an endpoint's rings), and are theirs. */
	if (ftruncate(memfd, (off_t)bytes) < 0) {
		ret = -errno;
		log_rl_err("job %s: ftruncate %llu bytes of direct rings: %m", name, (unsigned long long)bytes);
		goto err_memfd;
	}
	/* Our header mapping must not fault (SIGBUS) because a client shrank
	 * the file, and the clients' ring mappings neither. */
	if (fcntl(memfd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0) {
		ret = -errno;
		log_rl_err("job %s: sealing the direct rings' memfd: %m", name);
		goto err_memfd;
	}
	d->hdr = mmap(NULL, PROTO_DIRECT_PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
	if (d->hdr == MAP_FAILED) {
		ret = -errno;
		log_rl_err("job %s: mmap of the direct rings' header: %m", name);
		goto err_memfd;
	}
	d->region_bytes = bytes;
	d->ring_size = ring_size;
	d->n = n;
	memcpy(d->slot, slots, n * sizeof(d->slot[0]));
	mapped++;
	direct_stats.jobs++;
	*d_p = d;
	*memfd_p = memfd;
	return 0;

err_memfd:
	close(memfd);
err_free:
	free(d);
	direct_stats.failed++;
	return ret;
}

void direct_end(struct direct *d, const struct ep *ep)
{
	uint64_t one = 1;
	uint32_t s;

	if (!d)
		return;
	for (s = 0; s < d->n && d->slot[s].ep != ep; s++)
		;
	if (s == d->n)
		return;         /* it did not ask, or came after the region was made */
	d->slot[s].ep = NULL;
	d->slot[s].efd = -1;
	/* Before the wake-ups: a client woken by them sees it. */
	atomic_store_explicit((_Atomic uint8_t *)(d->hdr + PROTO_DIRECT_GONE + s), 1, memory_order_release);
	for (uint32_t k = 0; k < d->n; k++) {
		/* EAGAIN: its counter is huge, it wakes anyway. */
		if (d->slot[k].efd >= 0 && write(d->slot[k].efd, &one, sizeof(one)) < 0 && errno != EAGAIN)
			log_rl_warn("direct rings: eventfd write: %m");
	}
}

void direct_free(struct direct *d)
{
	if (!d)
		return;
	munmap(d->hdr, PROTO_DIRECT_PAGE);
	mapped--;
	free(d);
}

uint32_t direct_count(void)
{
	return mapped;
}

void direct_write_status(FILE *out, const struct direct *d)
{
	fprintf(out, "  direct rings: %u slots of %llu bytes each (region %llu bytes); ranks by slot:", d->n,
		(unsigned long long)d->ring_size, (unsigned long long)d->region_bytes);
	for (uint32_t s = 0; s < d->n; s++)
		fprintf(out, " %u%s", d->slot[s].rank, d->slot[s].ep ? "" : " (gone)");
	fputc('\n', out);
}
