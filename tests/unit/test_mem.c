/* tests/unit/test_mem.c - the regions clients share with ferryd
 * (daemon/local/mem.c): what mem_add takes and refuses, bounds, and the
 * address space each user may have the daemon map (user_take_mapped). */
#define UNIT "mem"
#include "check.h"
#include "../../daemon/local/mem.h"
#include "../../daemon/local/user.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static char why[256];

/* A memfd of bytes, with seals (0: none; -1: cannot be sealed). */
static int memfd(uint64_t bytes, int seals, unsigned flags)
{
	int fd = memfd_create("test_mem", flags | (seals >= 0 ? MFD_ALLOW_SEALING : 0));

	if (fd < 0)
		return -1;
	if (ftruncate(fd, (off_t)bytes) < 0 || (seals > 0 && fcntl(fd, F_ADD_SEALS, seals) < 0)) {
		close(fd);
		return -1;
	}
	return fd;
}

TEST(sealed_memfd_taken_and_bounded)
{
	struct user *u = user_get(1000);
	struct mem *list = NULL, *m;
	int fd = memfd(10000, F_SEAL_SHRINK, 0);

	CHECK(fd >= 0);
	CHECK_EQ(mem_add(&list, u, 3, fd, 10000, why, sizeof(why)), 0);
	m = mem_find(list, 3);
	CHECK(m != NULL);
	/* page-rounded in the user's address space */
	CHECK_EQ(u->mapped_bytes, (10000 + sysconf(_SC_PAGESIZE) - 1) / sysconf(_SC_PAGESIZE) * sysconf(_SC_PAGESIZE));
	CHECK(mem_at(m, 0, 10000) != NULL);
	CHECK(mem_at(m, 9999, 1) != NULL);
	CHECK(mem_at(m, 9999, 2) == NULL);
	CHECK(mem_at(m, 10001, 0) == NULL);
	CHECK(mem_at(m, UINT64_MAX, 2) == NULL);
	/* the same id again, and id 0 */
	CHECK_EQ(mem_add(&list, u, 3, memfd(4096, F_SEAL_SHRINK, 0), 4096, why, sizeof(why)), -EINVAL);
	CHECK_EQ(mem_add(&list, u, 0, memfd(4096, F_SEAL_SHRINK, 0), 4096, why, sizeof(why)), -EINVAL);
	/* an operation's hold keeps it mapped, and counted, past the table */
	mem_hold(m);
	CHECK_EQ(mem_remove(&list, 3), 0);
	CHECK(u->mapped_bytes > 0);
	CHECK_EQ(((volatile uint8_t *)m->base)[9999], 0);
	mem_put(m);
	CHECK(list == NULL);
	CHECK_EQ(user_total.mapped_bytes, 0);
}

TEST(unsealed_short_or_not_shared_memory_refused)
{
	struct user *u = user_get(1000);
	struct mem *list = NULL;
	char path[] = "/var/tmp/test_mem.XXXXXX";
	int fd;

	/* not sealed against shrinking: a truncation would be a SIGBUS */
	CHECK_EQ(mem_add(&list, u, 1, memfd(4096, 0, 0), 4096, why, sizeof(why)), -EINVAL);
	CHECK(strstr(why, "sealed against shrinking") != NULL);
	CHECK_EQ(mem_add(&list, u, 1, memfd(4096, F_SEAL_GROW, 0), 4096, why, sizeof(why)), -EINVAL);
	/* shorter than it says */
	CHECK_EQ(mem_add(&list, u, 1, memfd(4096, F_SEAL_SHRINK, 0), 8192, why, sizeof(why)), -EINVAL);
	/* a file, not a memfd */
	fd = mkstemp(path);
	CHECK(fd >= 0);
	unlink(path);
	CHECK_EQ(ftruncate(fd, 4096), 0);
	CHECK_EQ(mem_add(&list, u, 1, fd, 4096, why, sizeof(why)), -EINVAL);
	CHECK(list == NULL);
	CHECK_EQ(user_total.mapped_bytes, 0);
	/* hugetlbfs: a punched hole whose pages someone else took would be a
	 * SIGBUS in the daemon (only tmpfs is taken) */
	fd = memfd(0, F_SEAL_SHRINK, MFD_HUGETLB);
	if (fd < 0) {
		user_put(u);
		SKIP("no hugetlbfs memfd here");
	}
	CHECK_EQ(mem_add(&list, u, 1, fd, 0, why, sizeof(why)), -EINVAL);
	CHECK(strstr(why, "tmpfs") != NULL);
	user_put(u);
}

TEST(address_space_per_user)
{
	/* MEM_MAX_BYTES per endpoint, USER_MAPPED_MAX per user across its
	 * endpoints: sparse regions, no memory used */
	uint32_t n = (uint32_t)(USER_MAPPED_MAX / MEM_MAX_BYTES);
	struct mem **lists = calloc(n + 1, sizeof(*lists));
	struct user *u = user_get(1001), *v;
	uint32_t i;

	for (i = 0; i < n; i++) {
		int fd = memfd(MEM_MAX_BYTES, F_SEAL_SHRINK, 0);

		CHECK(fd >= 0);
		if (mem_add(&lists[i], u, 1, fd, MEM_MAX_BYTES, why, sizeof(why)) < 0)
			break;
	}
	CHECK_EQ(i, n);
	CHECK_EQ(u->mapped_bytes, USER_MAPPED_MAX);
	/* one page more, on another endpoint: refused, saying why */
	CHECK_EQ(mem_add(&lists[n], u, 1, memfd(4096, F_SEAL_SHRINK, 0), 4096, why, sizeof(why)), -EDQUOT);
	CHECK(strstr(why, "uid 1001") != NULL);
	/* another user is not held back */
	v = user_get(1002);
	CHECK_EQ(mem_add(&lists[n], v, 1, memfd(4096, F_SEAL_SHRINK, 0), 4096, why, sizeof(why)), 0);
	mem_remove_all(&lists[n]);
	for (i = 0; i < n; i++)
		mem_remove_all(&lists[i]);
	CHECK_EQ(user_total.mapped_bytes, 0);
	CHECK_EQ(user_count(), 0);
	free(lists);
}

int main(void)
{
	user_init(NULL);
	RUN(sealed_memfd_taken_and_bounded);
	RUN(unsealed_short_or_not_shared_memory_refused);
	RUN(address_space_per_user);
	user_fini();
	return check_done();
}
