/* tests/unit/test_mem.c - the regions clients share with ferryd
 * (daemon/local/mem.c): what mem_add takes and refuses, bounds, the
 * address space each user may have the daemon map (user_take_mapped), and
 * that a region taken has every page and keeps them (hold_pages). */
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

/* A memfd of bytes, with seals (0: none; -1: cannot be sealed), its pages
 * allocated from byte 0 to populated (rounded up to pages) and not beyond. */
static int memfd_part(uint64_t bytes, uint64_t populated, int seals, unsigned flags)
{
	int fd = memfd_create("test_mem", flags | (seals >= 0 ? MFD_ALLOW_SEALING : 0));
	void *p;

	if (fd < 0)
		return -1;
	if (ftruncate(fd, (off_t)bytes) < 0)
		goto err;
	if (populated) {
		p = mmap(NULL, populated, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
		if (p == MAP_FAILED)
			goto err;
		munmap(p, populated);
	}
	if (seals > 0 && fcntl(fd, F_ADD_SEALS, seals) < 0)
		goto err;
	return fd;
err:
	close(fd);
	return -1;
}

/* ... every page allocated. */
static int memfd(uint64_t bytes, int seals, unsigned flags)
{
	return memfd_part(bytes, bytes, seals, flags);
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
	 * endpoints: the user's share is taken but one page (the regions
	 * themselves would need their pages: hold_pages), then regions */
	uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
	struct mem *list = NULL, *other = NULL;
	struct user *u = user_get(1001), *v;

	CHECK_EQ(user_take_mapped(u, USER_MAPPED_MAX - page), 0);
	CHECK_EQ(mem_add(&list, u, 1, memfd(page, F_SEAL_SHRINK, 0), page, why, sizeof(why)), 0);
	CHECK_EQ(u->mapped_bytes, USER_MAPPED_MAX);
	/* one page more, on another endpoint: refused, saying why */
	CHECK_EQ(mem_add(&other, u, 1, memfd(page, F_SEAL_SHRINK, 0), page, why, sizeof(why)), -EDQUOT);
	CHECK(strstr(why, "uid 1001") != NULL);
	/* another user is not held back */
	v = user_get(1002);
	CHECK_EQ(mem_add(&other, v, 1, memfd(page, F_SEAL_SHRINK, 0), page, why, sizeof(why)), 0);
	mem_remove_all(&other);
	mem_remove_all(&list);
	user_give_mapped(u, USER_MAPPED_MAX - page);
	CHECK_EQ(user_total.mapped_bytes, 0);
	CHECK_EQ(user_count(), 0);
}

TEST(holes_refused)
{
	/* review finding: pages a client never allocated, or took back,
	 * would be allocated by ferryd's first touch and charged to it */
	uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE), bytes = 64 * page;
	struct user *u = user_get(1000);
	struct mem *list = NULL;
	int fd;

	/* held as an endpoint holds its user in ferryd: a refusal gives back
	 * what it took, which frees a user that holds nothing else */
	CHECK_EQ(user_take_endpoint(u), 0);
	/* none populated */
	CHECK_EQ(mem_add(&list, u, 1, memfd_part(bytes, 0, F_SEAL_SHRINK, 0), bytes, why, sizeof(why)), -EINVAL);
	CHECK(strstr(why, "a hole at byte 0 ") != NULL);
	/* all but the last page */
	CHECK_EQ(mem_add(&list, u, 1, memfd_part(bytes, bytes - page, F_SEAL_SHRINK, 0), bytes, why, sizeof(why)),
		 -EINVAL);
	CHECK(strstr(why, "a hole at byte") != NULL);
	/* a hole punched in the middle */
	fd = memfd(bytes, F_SEAL_SHRINK, 0);
	CHECK_EQ(fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 10 * page, page), 0);
	CHECK_EQ(mem_add(&list, u, 1, fd, bytes, why, sizeof(why)), -EINVAL);
	/* a hole beyond the bytes it says does not matter: ferryd never
	 * touches it */
	CHECK_EQ(mem_add(&list, u, 1, memfd_part(bytes, bytes - page, F_SEAL_SHRINK, 0), bytes - page, why,
			 sizeof(why)), 0);
	/* nor does the rest of a partial last page (ferryd maps it whole, and
	 * the page is there) */
	CHECK_EQ(mem_add(&list, u, 2, memfd(bytes - 100, F_SEAL_SHRINK, 0), bytes - 100, why, sizeof(why)), 0);
	mem_remove_all(&list);
	user_give_endpoint(u);
	CHECK_EQ(user_total.mapped_bytes, 0);
	CHECK_EQ(user_count(), 0);
}

TEST(pages_held_while_mapped)
{
	uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE), bytes = 16 * page;
	struct user *u = user_get(1000);
	struct mem *list = NULL, *m;
	int fd = memfd(bytes, F_SEAL_SHRINK | F_SEAL_GROW, 0), mine;
	uint8_t *p;

	/* held as an endpoint holds its user in ferryd: a refusal gives back
	 * what it took, which frees a user that holds nothing else */
	CHECK_EQ(user_take_endpoint(u), 0);
	CHECK(fd >= 0);
	/* the client's own mapping, made before it shares the region */
	p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	CHECK(p != MAP_FAILED);
	mine = dup(fd);
	CHECK_EQ(mem_add(&list, u, 1, fd, bytes, why, sizeof(why)), 0);
	m = mem_find(list, 1);
	CHECK(fcntl(mine, F_GET_SEALS) & F_SEAL_FUTURE_WRITE);
	/* no hole can be punched any more, by fallocate or madvise */
	errno = 0;
	CHECK_EQ(fallocate(mine, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, bytes), -1);
	CHECK_EQ(errno, EPERM);
	errno = 0;
	CHECK_EQ(madvise(p, bytes, MADV_REMOVE), -1);
	CHECK_EQ(errno, EPERM);
	CHECK_EQ(lseek(mine, 0, SEEK_HOLE), (off_t)bytes);
	/* the client's mapping stays writable, and both see one memory */
	p[5] = 0x11;
	m->base[6] = 0x22;
	CHECK_EQ(m->base[5], 0x11);
	CHECK_EQ(p[6], 0x22);
	/* no new writable mapping, no write(2) */
	CHECK(mmap(NULL, page, PROT_READ | PROT_WRITE, MAP_SHARED, mine, 0) == MAP_FAILED);
	CHECK_EQ(pwrite(mine, "x", 1, 0), -1);
	/* the same memfd a second time: sealed already, refused */
	CHECK_EQ(mem_add(&list, u, 2, dup(mine), bytes, why, sizeof(why)), -EINVAL);
	CHECK(strstr(why, "F_SEAL_FUTURE_WRITE") != NULL);
	mem_remove_all(&list);
	munmap(p, bytes);
	close(mine);
	/* sealed against further seals: ferryd could not add its own */
	CHECK_EQ(mem_add(&list, u, 1, memfd(page, F_SEAL_SHRINK | F_SEAL_SEAL, 0), page, why, sizeof(why)), -EINVAL);
	CHECK(strstr(why, "F_SEAL_SEAL") != NULL);
	user_give_endpoint(u);
	CHECK_EQ(user_total.mapped_bytes, 0);
	CHECK_EQ(user_count(), 0);
}

int main(void)
{
	user_init(NULL);
	RUN(sealed_memfd_taken_and_bounded);
	RUN(unsealed_short_or_not_shared_memory_refused);
	RUN(address_space_per_user);
	RUN(holes_refused);
	RUN(pages_held_while_mapped);
	user_fini();
	return check_done();
}
