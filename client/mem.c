/* client/mem.c - memory shared with ferryd for collectives: ferry_alloc
 * (the application's, used in place) and the staging that ordinary buffers
 * are copied through.  See internal.h, "mem.c".
 *
 * A region is a memfd, sealed against shrinking and growing (ferryd maps it
 * and must not fault on a page that went away: daemon/local/mem.h), mapped
 * and populated here, and registered with CTL_MEM under a number of this
 * handle.  ferryd seals it against writing once it has mapped it
 * (F_SEAL_FUTURE_WRITE: our mapping stays writable, no hole can be punched
 * in it), so it is left open to more seals, and never written but through
 * our mapping.
 *
 * Ownership: the handle's list owns every region.  ferry_free drops an
 * application region (ferryd keeps its own mapping while an operation uses
 * it); a staging region belongs to one request while it runs, then goes
 * back to the handle (f->stage_free), which keeps one for the next request;
 * ferry_close unmaps them all.
 */
#include "internal.h"
#include "../proto/ctl.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

struct fmem {
	struct fmem *next;
	uint32_t id;
	int app;                /* ferry_alloc's */
	uint8_t *base;
	size_t bytes;
};

/* Sends MEM with the memfd.  Returns 0 or -errno (the session is lost). */
static int send_mem(struct ferry *f, uint32_t id, uint64_t bytes, int fd)
{
	uint8_t msg[sizeof(struct ctl_hdr) + sizeof(struct ctl_mem_wire)];
	ssize_t n = ctl_encode_mem(msg, sizeof(msg), CTL_MEM, id, bytes);

	if (n < 0)
		return conn_seterr(-EINVAL, "cannot encode MEM");
	return ctl_send(f, msg, (size_t)n, fd, "sharing memory");
}

/* A new region of bytes (rounded up to pages), registered, into *m_p.
 * Returns 0 or -errno (ferry_last_error says why). */
static int region_new(struct ferry *f, size_t bytes, int app, struct fmem **m_p)
{
	long page = sysconf(_SC_PAGESIZE);
	struct fmem *m;
	int fd, ret;

	if (page <= 0)
		page = 4096;
	if (bytes > SIZE_MAX - (size_t)page)
		return conn_seterr(-ENOMEM, "%zu bytes of shared memory: too many", bytes);
	bytes = bytes ? (bytes + (size_t)page - 1) / (size_t)page * (size_t)page : (size_t)page;
	{
		/* What ferryd takes per endpoint (daemon/local/mem.h), with room
		 * kept for a staging region per request: beyond, ferry_alloc
		 * says so here rather than ferryd ending the session. */
		uint32_t n = 0, napp = 0;
		uint64_t total = 0;

		for (struct fmem *q = f->mems; q; q = q->next) {
			n++;
			napp += q->app;
			total += q->bytes;
		}
		if (n >= CTL_MEM_MAX_REGIONS || (app && napp >= CTL_MEM_MAX_REGIONS - FERRY_COLL_MAX_PENDING - 2) ||
		    bytes > CTL_MEM_MAX_BYTES - total)
			return conn_seterr(-ENOSPC, "%zu bytes more of memory shared with ferryd: it takes at most %u "
					   "regions (%u from ferry_alloc) and %llu bytes per process, and has %u of "
					   "%llu bytes", bytes, CTL_MEM_MAX_REGIONS,
					   CTL_MEM_MAX_REGIONS - FERRY_COLL_MAX_PENDING - 2,
					   (unsigned long long)CTL_MEM_MAX_BYTES, n, (unsigned long long)total);
	}
	m = calloc(1, sizeof(*m));
	if (!m)
		return conn_seterr(-ENOMEM, "out of memory");
	fd = memfd_create("ferry-coll", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0) {
		ret = conn_seterr(-errno, "memfd_create: %s", strerror(errno));
		free(m);
		return ret;
	}
	if (ftruncate(fd, (off_t)bytes) < 0 ||
	    fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW) < 0) {
		ret = conn_seterr(-errno, "sizing shared memory of %zu bytes: %s", bytes, strerror(errno));
		goto err;
	}
	/* Populated here: its pages are this process's memory (its cgroup's),
	 * not ferryd's, which would otherwise be the first to touch those the
	 * application leaves alone (a receive buffer).  ferryd refuses a
	 * region with a page missing; one fallocate(2) reserved but no one
	 * touched counts as missing (daemon/local/mem.c, hold_pages), so
	 * MAP_POPULATE, not fallocate. */
	m->base = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
	if (m->base == MAP_FAILED) {
		ret = conn_seterr(-errno, "mmap of %zu bytes: %s", bytes, strerror(errno));
		goto err;
	}
	/* MAP_POPULATE says nothing when it could not populate (the memory
	 * cgroup's limit): ferryd would refuse the region and end the session,
	 * so say it here instead. */
	if (lseek(fd, 0, SEEK_HOLE) < (off_t)bytes) {
		ret = conn_seterr(-ENOMEM, "%zu bytes of shared memory: could not allocate them all", bytes);
		munmap(m->base, bytes);
		goto err;
	}
	m->bytes = bytes;
	m->app = app;
	m->id = ++f->mem_next_id;
	if ((ret = send_mem(f, m->id, bytes, fd)) < 0) {
		munmap(m->base, bytes);
		goto err;
	}
	close(fd);
	m->next = f->mems;
	f->mems = m;
	*m_p = m;
	return 0;
err:
	close(fd);
	free(m);
	return ret;
}

static void region_free(struct ferry *f, struct fmem *m, int tell)
{
	struct fmem **pp = &f->mems;
	uint8_t msg[sizeof(struct ctl_hdr) + sizeof(struct ctl_mem_wire)];
	ssize_t n;

	while (*pp && *pp != m)
		pp = &(*pp)->next;
	if (*pp)
		*pp = m->next;
	if (tell && (n = ctl_encode_mem(msg, sizeof(msg), CTL_MEM_FREE, m->id, 0)) > 0)
		ctl_send(f, msg, (size_t)n, -1, "freeing shared memory");
	munmap(m->base, m->bytes);
	free(m);
}

int mem_ref(struct ferry *f, const void *p, size_t len, struct ctl_buf *b)
{
	const uint8_t *q = p;

	for (struct fmem *m = f->mems; m; m = m->next)
		if (m->app && q >= m->base && q <= m->base + m->bytes && len <= (size_t)(m->base + m->bytes - q)) {
			*b = (struct ctl_buf){ .mem = m->id, .off = (uint64_t)(q - m->base), .len = len };
			return 1;
		}
	return 0;
}

int stage_get(struct ferry *f, size_t bytes, struct fmem **m_p, uint8_t **base_p, uint32_t *id_p)
{
	struct fmem *m = f->stage_free;
	int ret;

	if (m && m->bytes >= bytes) {
		f->stage_free = NULL;
	} else if ((ret = region_new(f, bytes, 0, &m)) < 0) {
		return ret;
	}
	*m_p = m;
	*base_p = m->base;
	*id_p = m->id;
	return 0;
}

void stage_put(struct ferry *f, struct fmem *m)
{
	if (!m)
		return;
	/* Keep the larger of the two for the next request. */
	if (!f->stage_free || f->stage_free->bytes < m->bytes) {
		if (f->stage_free)
			region_free(f, f->stage_free, 1);
		f->stage_free = m;
		return;
	}
	region_free(f, m, 1);
}

void mem_free_all(struct ferry *f)
{
	while (f->mems)
		region_free(f, f->mems, 0);
	f->stage_free = NULL;
}

FERRY_API int ferry_alloc(ferry_t *f, size_t bytes, void **p_p)
{
	struct fmem *m;
	int ret;

	conn_clearerr();
	f = froot(f);   /* a group's memory is its job's */
	if (!p_p)
		return conn_seterr(-EINVAL, "no place for the pointer");
	if (f->dead)
		return f->dead;
	if ((ret = region_new(f, bytes, 1, &m)) < 0)
		return ret;
	*p_p = m->base;
	return 0;
}

FERRY_API void ferry_free(ferry_t *f, void *p)
{
	f = froot(f);
	for (struct fmem *m = f->mems; p && m; m = m->next)
		if (m->app && m->base == p) {
			region_free(f, m, 1);
			return;
		}
}
