/* daemon/local/mem.c - see mem.h.
 *
 * Ownership (mem.h): a struct mem is freed and unmapped by the mem_put that
 * drops its last reference.
 *
 * Charging: a region's pages are its owner's memory (its memory cgroup's),
 * never ferryd's.  ferryd takes a region only once it has sealed it so that
 * no page can be taken from it while mapped, and found every page there
 * (hold_pages): its reads and writes then only map pages that exist, which
 * costs ferryd page tables, not pages.  A region with a hole would have
 * ferryd allocate the missing pages, charged to ferryd's cgroup, on its
 * first touch (review finding: a client's MADV_REMOVE grew ferryd by the
 * region's size).
 */
#include "mem.h"
#include "user.h"
#include "../core/closer.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

struct mem *mem_find(struct mem *list, uint32_t id)
{
	for (struct mem *m = list; m; m = m->next)
		if (m->id == id)
			return m;
	return NULL;
}

void mem_hold(struct mem *m)
{
	m->refs++;
}

void mem_put(struct mem *m)
{
	if (!m || --m->refs)
		return;
	if (m->mapped) {
		munmap(m->base, m->mapped);
		user_give_mapped(m->user, m->mapped);
	}
	free(m);
}

/* Seals the memfd fd, which ferryd has just mapped writable, so that none of
 * its pages can be taken away while ferryd maps it, then checks that the
 * pages of its first bytes are all there.  Returns 0, or -EINVAL (a hole;
 * why says where) or fcntl's error.
 *
 * What holds, on tmpfs (mm/shmem.c since Linux 5.1, so Debian 12's 6.1;
 * tests/integration/mem_seal.sh tries it on the running kernel):
 * - shmem_fallocate refuses FALLOC_FL_PUNCH_HOLE with EPERM once the file
 *   has F_SEAL_WRITE or F_SEAL_FUTURE_WRITE, and madvise(MADV_REMOVE) is
 *   that same punch (vfs_fallocate); shrinking is F_SEAL_SHRINK's, checked
 *   by the caller.  Nothing else a client can ask for frees a page of the
 *   file: reclaim (MADV_PAGEOUT too) moves it to swap, which stays charged
 *   to the owner, as the page is again when it comes back (to the cgroup
 *   recorded when it went out, while that cgroup exists).
 * - F_SEAL_WRITE cannot be added while a writable shared mapping exists
 *   (EBUSY), and the client's and ferryd's both are; F_SEAL_FUTURE_WRITE
 *   leaves existing mappings writable and refuses only new writable ones
 *   and write(2), which libferry does not use after sharing.  So ferryd
 *   maps first (the seal would refuse its own mapping after) and seals
 *   second.
 * - The check comes after the seal: no hole can open after it, and a punch
 *   racing it has ended before (both take the inode's lock).
 * - lseek(SEEK_HOLE) rather than st_blocks: a large folio is counted whole
 *   in st_blocks where it reaches past the end of the file (shmem THP),
 *   which could make up for a hole; SEEK_HOLE looks at every page of the
 *   range.  It counts a page in swap as there (its swap is the owner's,
 *   and so is its charge when it comes back) and a page fallocate(2)
 *   reserved but no one touched yet as a hole (shmem marks it up to date
 *   at its first touch), so libferry populates its regions rather than
 *   fallocating them.  It walks the page cache: about 15 ms per GiB on a
 *   slow machine, once per region, a fraction of what populating it cost
 *   the client. */
static int hold_pages(int fd, uint32_t id, uint64_t bytes, char *why, size_t why_len)
{
	off_t hole;

	if (fcntl(fd, F_ADD_SEALS, F_SEAL_FUTURE_WRITE) < 0) {
		int ret = -errno;

		snprintf(why, why_len, "memory region %u: cannot seal it (F_SEAL_FUTURE_WRITE): %m", id);
		return ret;
	}
	hole = lseek(fd, 0, SEEK_HOLE);
	if (hole < 0 || (uint64_t)hole < bytes) {
		snprintf(why, why_len, "memory region %u: a hole at byte %lld of %llu: every page must exist "
			 "(written, or MAP_POPULATE) when shared", id, (long long)hole,
			 (unsigned long long)bytes);
		return -EINVAL;
	}
	return 0;
}

int mem_add(struct mem **list, struct user *u, uint32_t id, int fd, uint64_t bytes, char *why, size_t why_len)
{
	uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE), mapped = (bytes + page - 1) / page * page;
	struct statfs sf;
	struct stat st;
	uint64_t total = 0;
	uint32_t n = 0;
	uid_t uid = u->uid;             /* u may be gone after user_give_mapped */
	struct mem *m;
	int seals, ret;

	for (m = *list; m; m = m->next) {
		total += m->bytes;
		n++;
	}
	if (id == 0 || mem_find(*list, id)) {
		snprintf(why, why_len, "memory region %u: %s", id, id ? "registered already" : "id 0");
		ret = -EINVAL;
		goto out;
	}
	if (n >= MEM_MAX_REGIONS || bytes > MEM_MAX_BYTES - total) {
		snprintf(why, why_len, "memory region %u: the endpoint has %u regions of %llu bytes (at most %u, "
			 "%llu bytes)", id, n, (unsigned long long)total, MEM_MAX_REGIONS,
			 (unsigned long long)MEM_MAX_BYTES);
		ret = -EDQUOT;
		goto out;
	}
	/* Only a memfd that cannot shrink: a region the client could
	 * truncate under us would be a SIGBUS in the daemon. */
	seals = fcntl(fd, F_GET_SEALS);
	if (seals < 0 || !(seals & F_SEAL_SHRINK) || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) ||
	    (uint64_t)st.st_size < bytes || fstatfs(fd, &sf) < 0 || sf.f_type != TMPFS_MAGIC) {
		snprintf(why, why_len, "memory region %u: not a memfd of %llu bytes of shared memory (tmpfs) sealed "
			 "against shrinking", id, (unsigned long long)bytes);
		ret = -EINVAL;
		goto out;
	}
	/* ferryd adds its own seal once it has mapped the region (hold_pages):
	 * one sealed against more seals, or against writing already (which
	 * refuses ferryd's writable mapping), cannot be taken. */
	if (seals & (F_SEAL_SEAL | F_SEAL_WRITE | F_SEAL_FUTURE_WRITE)) {
		snprintf(why, why_len, "memory region %u: sealed with %s already: ferryd seals it itself "
			 "(F_SEAL_FUTURE_WRITE) once mapped", id, seals & F_SEAL_SEAL ? "F_SEAL_SEAL" :
			 seals & F_SEAL_WRITE ? "F_SEAL_WRITE" : "F_SEAL_FUTURE_WRITE");
		ret = -EINVAL;
		goto out;
	}
	if (mapped && user_take_mapped(u, mapped) < 0) {
		snprintf(why, why_len, "memory region %u: %s", id, user_refusal());
		ret = -EDQUOT;
		goto out;
	}
	m = calloc(1, sizeof(*m));
	if (!m) {
		ret = -ENOMEM;
		snprintf(why, why_len, "out of memory");
		goto err_give;
	}
	if (mapped) {
		m->base = mmap(NULL, mapped, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		if (m->base == MAP_FAILED) {
			ret = -errno;
			snprintf(why, why_len, "memory region %u: mmap of %llu bytes: %m", id,
				 (unsigned long long)bytes);
			goto err_free;
		}
		if ((ret = hold_pages(fd, id, bytes, why, why_len)) < 0)
			goto err_unmap;
	}
	m->id = id;
	m->bytes = bytes;
	m->mapped = mapped;
	m->user = u;
	m->refs = 1;
	m->next = *list;
	*list = m;
	ret = 0;
	goto out;
err_unmap:
	munmap(m->base, mapped);
err_free:
	free(m);
err_give:
	if (mapped)
		user_give_mapped(u, mapped);
out:
	closer_close(fd, uid);
	return ret;
}

int mem_remove(struct mem **list, uint32_t id)
{
	for (struct mem **pp = list; *pp; pp = &(*pp)->next)
		if ((*pp)->id == id) {
			struct mem *m = *pp;

			*pp = m->next;
			mem_put(m);
			return 0;
		}
	return -ENOENT;
}

void mem_remove_all(struct mem **list)
{
	while (*list) {
		struct mem *m = *list;

		*list = m->next;
		mem_put(m);
	}
}
