/* daemon/local/mem.c - see mem.h.
 *
 * Ownership (mem.h): a struct mem is freed and unmapped by the mem_put that
 * drops its last reference.
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

int mem_add(struct mem **list, struct user *u, uint32_t id, int fd, uint64_t bytes, char *why, size_t why_len)
{
	uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE), mapped = (bytes + page - 1) / page * page;
	struct statfs sf;
	struct stat st;
	uint64_t total = 0;
	uint32_t n = 0;
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
	if (mapped && user_take_mapped(u, mapped) < 0) {
		snprintf(why, why_len, "memory region %u: %s", id, user_refusal());
		ret = -EDQUOT;
		goto out;
	}
	m = calloc(1, sizeof(*m));
	if (!m) {
		if (mapped)
			user_give_mapped(u, mapped);
		ret = -ENOMEM;
		snprintf(why, why_len, "out of memory");
		goto out;
	}
	if (mapped) {
		m->base = mmap(NULL, mapped, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		if (m->base == MAP_FAILED) {
			ret = -errno;
			snprintf(why, why_len, "memory region %u: mmap of %llu bytes: %m", id,
				 (unsigned long long)bytes);
			user_give_mapped(u, mapped);
			free(m);
			goto out;
		}
	}
	m->id = id;
	m->bytes = bytes;
	m->mapped = mapped;
	m->user = u;
	m->refs = 1;
	m->next = *list;
	*list = m;
	ret = 0;
out:
	closer_close(fd, u->uid);
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
