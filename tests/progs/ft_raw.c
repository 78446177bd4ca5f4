/* tests/progs/ft_raw.c - a client that speaks ferryd's protocol by hand and
 * misbehaves on purpose, to test that the daemon drops only this session.
 *
 *   ft_raw DIR MODE [JOB RANK SIZE]
 *
 * MODE:
 *   ctl-garbage   send random bytes instead of HELLO
 *   ctl-version   send HELLO and JOIN as a client of control version
 *                 CTL_VERSION + 1 would; print "error: TEXT" for the
 *                 daemon's ERROR, then wait for the close
 *   fake-daemon   no daemon but a fake one: listen on DIR/ferryd.sock,
 *                 answer the first client's first bytes with an ERROR of
 *                 control version CTL_VERSION + 1 and close (a ferryd of
 *                 another release); prints "listening" once it listens
 *   bad-first     send a well-formed JOIN before HELLO
 *   join-twice    join properly, then send another JOIN on the endpoint
 *   ring-garbage  join, then publish a record with an invalid kind in TX
 *   post-long     once the job is ready, a post on the post page
 *                 (proto/post.h) longer than a slot
 *   post-ahead    ... posted 9 ahead of what the daemon took (8 slots)
 *   post-other    ... that is a MEM_FREE, not a collective operation
 *   post-short    ... of 4 bytes, shorter than a message header (after a
 *                 barrier of its own: nothing decoded before may run again)
 *   post-flood    ... for 2 s: keeps the page full of barriers on a group
 *                 it is not in (each fails at once), never reading the
 *                 socket; prints "posted N taken M" and exits 0
 *   post-later    ... a barrier that waits for 5 control messages never
 *                 sent on the socket: prints "posted", then after 2 s
 *                 "taken N" (0: the daemon left it) and exits 0
 *   head-garbage  join, then publish a TX head far beyond the ring
 *   tail-garbage  join, let the RX ring fill up (someone must send to us),
 *                 then publish an RX tail beyond the head
 *   batch-spoof   once the job is ready, a BATCH record (FERRY_BATCH) for
 *                 rank SIZE-1 whose second item claims another sender
 *   batch-overrun ... whose last item runs past the end of the batch
 *   batch-smuggle ... whose second item is for another rank
 *   dense-count   once the job is ready, a DENSE record (proto/ring.h "Dense
 *                 batches") for rank SIZE-1 whose count says 5 8-byte items
 *                 where its length holds 4
 *   dense-len     ... of one item of PROTO_DENSE_ITEM_MAX + 1 bytes (the
 *                 length consistent with it)
 *   dense-empty   ... of no items
 *   dense-channel ... with a channel in its record header (the items' is in
 *                 the payload)
 *   dense-short   ... shorter than its own header
 *   dense-flip    once the job is ready, for 2 s: valid DENSE records of
 *                 8-byte items to rank SIZE-1, and meanwhile their headers
 *                 flipped between a valid count and an invalid one, taken by
 *                 the daemon or not; prints "flipped N records" and exits 0
 *                 (whether the daemon closed the connection or not: it
 *                 must stay up, and take each record whole or refuse it)
 *   scribble      once the job is ready, for 2 s: whole 64 KiB items to rank
 *                 SIZE-1, and meanwhile random bytes over the payloads of
 *                 the last 32 it published, taken by the daemon or not
 *                 (those it sends straight from the ring: lent bytes,
 *                 daemon/net/frame.h); prints "scribbled N items" and exits
 *                 0 (the daemon has no reason to close the connection)
 *   after-done    once the job is ready, a DONE record and behind it a
 *                 16-byte item for rank SIZE-1, in one publish, as no
 *                 library would (the next step has not begun); prints
 *                 "published", then waits for the daemon to close the
 *                 connection
 *   self-tail     alone in a job of one rank: fill the RX ring with items to
 *                 ourselves, publish an impossible RX tail, publish one more
 *                 item to ourselves and close the socket at once (hardening
 *                 finding 1: the daemon ended the sending session while it
 *                 was still routing that session's item)
 *
 * Direct rings (proto/direct.h), behaving well: JOIN asking for them
 * (direct-*) or not (plain-*), then one line for every CTL_DIRECT that comes
 * before READY:
 *     direct n=N slot=S ranks=R0,R1,... fds=F ring=BYTES region=BYTES
 *            size=FSTAT-SIZE seals=shrink,grow,seal own-efd=same eventfds=E
 * (own-efd: whether the eventfd of our slot is our endpoint's efd_client;
 * eventfds: how many of the fds after the memfd are eventfds), then
 * "ready directs=D" at READY, and then:
 *   direct-ready, plain-ready  exit 0 (the endpoint ends)
 *   direct-hold, plain-hold    stay for 60 s, or until killed
 *   direct-watch  wait up to 10 s for our efd_client to become readable (no
 *                 one else writes it: we never sleep on a ring, so the daemon
 *                 does not wake us for records or room), then print
 *                 "woken gone=G0,G1,..." (or "not woken gone=...") with the
 *                 gone[] bytes of the region's header, by slot, and exit 0
 *
 * Memory for collectives (CTL_MEM, daemon/local/mem.h), once READY has
 * come: a memfd sealed as libferry seals it (shrink, grow), shared as
 * region 1:
 *   mem-holes     256 MiB, no page of it allocated: prints "refused: TEXT"
 *                 with the daemon's ERROR, then waits for it to close
 *   mem-half      ... its first 128 MiB allocated, the rest not: the same
 *   mem-punch     64 MiB, every page allocated (MAP_POPULATE); waits (10 s
 *                 at most) for the daemon's seal (F_SEAL_FUTURE_WRITE) to
 *                 appear on it, prints "sealed", then punches a hole in it
 *                 with fallocate(FALLOC_FL_PUNCH_HOLE) and madvise
 *                 (MADV_REMOVE) on its own writable mapping, and prints
 *                 "punch: E1 madv_remove: E2 hole at H of 67108864" (E:
 *                 "done" or the errno's name; H: lseek SEEK_HOLE), writes
 *                 its mapping, and prints "session open" if nothing came
 *                 from the daemon for 300 ms; exits 0 if both punches
 *                 failed with EPERM, no page went and the session is open,
 *                 1 otherwise.
 *
 * Exits 0 if the daemon closed the connection within 10 s (what the test
 * expects; self-tail: once it has closed its own end; the direct and mem-punch
 * modes: as said), 1 if it did not, 2 on setup errors.
 */
#include "../../proto/ctl.h"
#include "../../proto/post.h"
#include "../../proto/ring.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/kcmp.h>
#include <poll.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

static int sock;

static void die(const char *what)
{
	fprintf(stderr, "ft_raw: %s: %s\n", what, strerror(errno));
	exit(2);
}

/* Waits for EOF from the daemon, discarding whatever it sends first. */
static int wait_closed(void)
{
	char buf[4096];

	for (int i = 0; i < 100; i++) {
		struct pollfd p = { .fd = sock, .events = POLLIN };
		ssize_t n;

		if (poll(&p, 1, 100) == 0)
			continue;
		n = recv(sock, buf, sizeof(buf), MSG_DONTWAIT);
		if (n == 0 || (n < 0 && errno == ECONNRESET))
			return 0;
	}
	fprintf(stderr, "ft_raw: the daemon did not close the connection within 10 s\n");
	return 1;
}

#define FDS_MAX (1 + PROTO_DIRECT_MAX)

/* What came from the daemon and was not taken yet: bytes, and the fds that
 * came with them, in order (a recvmsg may return the end of one message
 * and the next with its fds: the kernel glues them). */
static uint8_t in[4096];
static size_t in_len;
static int fdq[4 * FDS_MAX], nfdq;

/* Reads the next control message.  Those that carry fds (ATTACHED: 3,
 * DIRECT: 1 + n) take them from the queue into fds (at most FDS_MAX;
 * NULL: closed), *nfds_p of them.  Returns the bytes the message took. */
static ssize_t read_msg(struct ctl_msg *m, int *fds, int *nfds_p)
{
	for (;;) {
		union { char b[CMSG_SPACE(FDS_MAX * sizeof(int))]; struct cmsghdr a; } cb;
		struct iovec iov = { in + in_len, sizeof(in) - in_len };
		struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cb.b,
				     .msg_controllen = sizeof(cb.b) };
		ssize_t n = ctl_decode(in, in_len, m);
		int want = 0;

		if (n < 0)
			return n;
		if (n > 0) {
			memmove(in, in + n, in_len - (size_t)n);
			in_len -= (size_t)n;
			if (m->type == CTL_ATTACHED)
				want = 4;
			else if (m->type == CTL_DIRECT)
				want = 1 + (int)m->u.direct.w.n;
			if (want > nfdq) {
				fprintf(stderr, "ft_raw: message %u came with %d fds, not %d\n", m->type, nfdq, want);
				exit(2);
			}
			for (int i = 0; i < want; i++) {
				if (fds)
					fds[i] = fdq[i];
				else
					close(fdq[i]);
			}
			memmove(fdq, fdq + want, (size_t)(nfdq - want) * sizeof(int));
			nfdq -= want;
			if (nfds_p)
				*nfds_p = want;
			return n;
		}
		n = recvmsg(sock, &mh, 0);
		if (n <= 0)
			die("recvmsg");
		if (mh.msg_flags & MSG_CTRUNC) {
			fprintf(stderr, "ft_raw: fds cut short\n");
			exit(2);
		}
		for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm)) {
			int k = (int)((cm->cmsg_len - CMSG_LEN(0)) / sizeof(int));

			if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS ||
			    nfdq + k > (int)(sizeof(fdq) / sizeof(fdq[0])))
				exit(2);
			memcpy(fdq + nfdq, CMSG_DATA(cm), (size_t)k * sizeof(int));
			nfdq += k;
		}
		in_len += (size_t)n;
	}
}

/* Milliseconds since t0 (CLOCK_MONOTONIC). */
static long long since_ms(const struct timespec *t0)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (t.tv_sec - t0->tv_sec) * 1000ll + (t.tv_nsec - t0->tv_nsec) / 1000000;
}

/* Waits for READY on the socket: 0, or 1 (said so on stderr) if it did
 * not come first. */
static int wait_ready(void)
{
	struct ctl_msg m = { 0 };

	if (read_msg(&m, NULL, NULL) <= 0 || m.type != CTL_READY) {
		fprintf(stderr, "ft_raw: expected READY, got %u\n", m.type);
		return 1;
	}
	return 0;
}

/* --- direct rings --- */

/* One line about a CTL_DIRECT d and the fds (nfds) that came with it;
 * efd_client: our endpoint's eventfd, from ATTACHED. */
static void report_direct(const struct ctl_msg *m, const int *fds, int nfds, int efd_client)
{
	const struct ctl_direct_wire *d = &m->u.direct.w;
	struct stat st;
	int seals = fcntl(fds[0], F_GET_SEALS), eventfds = 0;
	pid_t self = getpid();
	const char *own;
	char ranks[16 * PROTO_DIRECT_MAX] = "";
	size_t off = 0;

	for (uint32_t i = 0; i < d->n; i++)
		off += (size_t)snprintf(ranks + off, sizeof(ranks) - off, "%s%u", i ? "," : "", m->u.direct.ranks[i]);
	for (int i = 1; i < nfds; i++) {
		char path[64], link[64] = "";

		snprintf(path, sizeof(path), "/proc/self/fd/%d", fds[i]);
		if (readlink(path, link, sizeof(link) - 1) > 0 && strstr(link, "eventfd"))
			eventfds++;
	}
	/* The same open file, not only an eventfd: kcmp (0: the same). */
	switch (syscall(SYS_kcmp, self, self, KCMP_FILE, fds[1 + d->slot], efd_client)) {
	case 0: own = "same"; break;
	case -1: own = "unknown"; break;
	default: own = "different";
	}
	if (fstat(fds[0], &st) < 0)
		die("fstat");
	printf("direct n=%u slot=%u ranks=%s fds=%d ring=%llu region=%llu size=%lld seals=%s%s%s%s%s own-efd=%s "
	       "eventfds=%d\n", d->n, d->slot, ranks, nfds, (unsigned long long)d->ring_size,
	       (unsigned long long)d->region_bytes, (long long)st.st_size,
	       seals <= 0 ? "none" : "", seals > 0 && (seals & F_SEAL_SHRINK) ? "shrink," : "",
	       seals > 0 && (seals & F_SEAL_GROW) ? "grow," : "", seals > 0 && (seals & F_SEAL_SEAL) ? "seal" : "",
	       seals > 0 && (seals & ~(F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)) ? ",other" : "", own, eventfds);
	fflush(stdout);
}

/* The direct-* and plain-* modes, once ATTACHED has come (see the top). */
static int direct_modes(const char *mode, int efd_client)
{
	int fds[FDS_MAX], nfds, directs = 0, memfd = -1;
	uint32_t n = 0;
	struct ctl_msg m;

	for (;;) {
		if (read_msg(&m, fds, &nfds) <= 0) {
			fprintf(stderr, "ft_raw: malformed message\n");
			return 2;
		}
		if (m.type == CTL_READY)
			break;
		if (m.type != CTL_DIRECT) {
			fprintf(stderr, "ft_raw: expected DIRECT or READY, got %u\n", m.type);
			return 2;
		}
		report_direct(&m, fds, nfds, efd_client);
		directs++;
		memfd = fds[0];
		n = m.u.direct.w.n;
	}
	printf("ready directs=%d\n", directs);
	fflush(stdout);
	if (strstr(mode, "-ready"))
		return 0;
	if (strstr(mode, "-hold")) {
		sleep(60);
		return 0;
	}
	if (strcmp(mode, "direct-watch") == 0 && memfd >= 0) {
		struct pollfd p = { .fd = efd_client, .events = POLLIN };
		const uint8_t *hdr = mmap(NULL, PROTO_DIRECT_PAGE, PROT_READ, MAP_SHARED, memfd, 0);
		int woken;

		if (hdr == MAP_FAILED)
			die("mmap");
		woken = poll(&p, 1, 10000) == 1;
		printf("%s gone=", woken ? "woken" : "not woken");
		for (uint32_t i = 0; i < n; i++)
			printf("%s%u", i ? "," : "", atomic_load_explicit((const _Atomic uint8_t *)(hdr + PROTO_DIRECT_GONE + i),
									memory_order_acquire));
		printf("\n");
		return 0;
	}
	fprintf(stderr, "ft_raw: unknown mode %s (or no DIRECT to watch)\n", mode);
	return 2;
}

/* --- memory for collectives --- */

static const char *errname(int ok, int err)
{
	if (ok)
		return "done";
	return err == EPERM ? "EPERM" : strerror(err);
}

/* The mem-* modes, once ATTACHED has come (see the top). */
static int mem_modes(const char *mode)
{
	uint64_t bytes = strcmp(mode, "mem-punch") == 0 ? 64ull << 20 : 256ull << 20, populated;
	uint8_t msg[sizeof(struct ctl_hdr) + sizeof(struct ctl_mem_wire)];
	union { char b[CMSG_SPACE(sizeof(int))]; struct cmsghdr a; } cb;
	struct iovec iov = { .iov_base = msg };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cb.b, .msg_controllen = sizeof(cb.b) };
	struct cmsghdr *cm;
	struct ctl_msg m;
	uint8_t *map;
	ssize_t n;
	int fd;

	alarm(30);      /* a daemon that never answers fails the test (SIGALRM), never hangs it */
	if (wait_ready())
		return 2;
	populated = strcmp(mode, "mem-punch") == 0 ? bytes : strcmp(mode, "mem-half") == 0 ? bytes / 2 : 0;
	fd = memfd_create("ft_raw", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0 || ftruncate(fd, (off_t)bytes) < 0 || fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW) < 0)
		die("memfd");
	map = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (map == MAP_FAILED)
		die("mmap");
	if (populated && madvise(map, populated, MADV_POPULATE_WRITE) < 0)
		die("madvise(MADV_POPULATE_WRITE)");
	n = ctl_encode_mem(msg, sizeof(msg), CTL_MEM, 1, bytes);
	iov.iov_len = (size_t)n;
	memset(&cb, 0, sizeof(cb));
	cm = CMSG_FIRSTHDR(&mh);
	*cm = (struct cmsghdr){ .cmsg_len = CMSG_LEN(sizeof(int)), .cmsg_level = SOL_SOCKET, .cmsg_type = SCM_RIGHTS };
	memcpy(CMSG_DATA(cm), &fd, sizeof(fd));
	if (n < 0 || sendmsg(sock, &mh, MSG_NOSIGNAL) != n)
		die("sendmsg MEM");

	if (strcmp(mode, "mem-punch") != 0) {
		if (read_msg(&m, NULL, NULL) <= 0 || m.type != CTL_ERROR) {
			fprintf(stderr, "ft_raw: expected ERROR, got %u\n", m.type);
			return 1;
		}
		printf("refused: %s\n", m.u.error.text);
		fflush(stdout);
		return wait_closed();
	}
	{
		struct pollfd p = { .fd = sock, .events = POLLIN };
		int i, r1, e1, r2, e2;
		off_t hole;

		for (i = 0; i < 1000 && !(fcntl(fd, F_GET_SEALS) & F_SEAL_FUTURE_WRITE); i++)
			usleep(10000);
		if (i == 1000) {
			fprintf(stderr, "ft_raw: the daemon did not seal the region within 10 s\n");
			return 1;
		}
		printf("sealed\n");
		errno = 0;
		r1 = fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, (off_t)bytes);
		e1 = errno;
		errno = 0;
		r2 = madvise(map, bytes, MADV_REMOVE);
		e2 = errno;
		hole = lseek(fd, 0, SEEK_HOLE);
		printf("punch: %s madv_remove: %s hole at %lld of %llu\n", errname(r1 == 0, e1), errname(r2 == 0, e2),
		       (long long)hole, (unsigned long long)bytes);
		memset(map, 0x5a, bytes);
		if (poll(&p, 1, 300) == 0)
			printf("session open\n");
		fflush(stdout);
		return r1 < 0 && e1 == EPERM && r2 < 0 && e2 == EPERM && hole == (off_t)bytes && !(p.revents & POLLIN) ? 0 : 1;
	}
}

int main(int argc, char **argv)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	const char *mode, *job = "raw";
	uint32_t rank = 0, size = 1;
	uint8_t buf[1024];
	struct ctl_msg m;
	struct ring tx, rx;
	int fds[4] = { -1, -1, -1, -1 };
	uint8_t *region;
	ssize_t n;

	if (argc < 3)
		return 2;
	mode = argv[2];
	if (argc >= 6) {
		job = argv[3];
		rank = (uint32_t)atoi(argv[4]);
		size = (uint32_t)atoi(argv[5]);
	}
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/ferryd.sock", argv[1]);
	sock = socket(AF_UNIX, SOCK_STREAM, 0);
	if (strcmp(mode, "fake-daemon") == 0) {
		int c;

		unlink(sa.sun_path);
		if (bind(sock, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(sock, 4) < 0)
			die("listen");
		printf("listening\n");
		fflush(stdout);
		c = accept(sock, NULL, NULL);
		if (c < 0 || recv(c, buf, sizeof(buf), 0) <= 0)
			die("accept");
		n = ctl_encode_error(buf, sizeof(buf), EPROTO, "a ferryd of another release");
		buf[0] = CTL_VERSION + 1;
		if (n < 0 || send(c, buf, (size_t)n, MSG_NOSIGNAL) != n)
			die("send");
		close(c);
		unlink(sa.sun_path);
		return 0;
	}
	if (connect(sock, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		die("connect");

	if (strcmp(mode, "ctl-garbage") == 0) {
		for (size_t i = 0; i < sizeof(buf); i++)
			buf[i] = (uint8_t)(rand() & 0xff);
		/* our version (another one is ctl-version's case), and type 0:
		 * surely not a valid header */
		buf[0] = CTL_VERSION;
		buf[1] = 0;
		send(sock, buf, sizeof(buf), MSG_NOSIGNAL);
		return wait_closed();
	}
	if (strcmp(mode, "ctl-version") == 0) {
		n = ctl_encode_hello(buf, sizeof(buf), CTL_ROLE_ENDPOINT);
		buf[0] = CTL_VERSION + 1;
		n += ctl_encode_join(buf + n, sizeof(buf) - (size_t)n, job, rank, size);
		send(sock, buf, (size_t)n, MSG_NOSIGNAL);
		n = recv(sock, buf, sizeof(buf), 0);
		if (n > 0 && ctl_decode(buf, (size_t)n, &m) > 0 && m.type == CTL_ERROR)
			printf("error: %s\n", m.u.error.text);
		fflush(stdout);
		return wait_closed();
	}
	if (strcmp(mode, "bad-first") == 0) {
		n = ctl_encode_join(buf, sizeof(buf), job, rank, size);
		send(sock, buf, (size_t)n, MSG_NOSIGNAL);
		return wait_closed();
	}

	n = ctl_encode_hello(buf, sizeof(buf), CTL_ROLE_ENDPOINT);
	n += ctl_encode_join_flags(buf + n, sizeof(buf) - (size_t)n, job, rank, size,
				   strncmp(mode, "direct-", 7) == 0 ? CTL_JOIN_DIRECT : 0);
	if (send(sock, buf, (size_t)n, MSG_NOSIGNAL) != n)
		die("send");
	if (read_msg(&m, fds, NULL) <= 0 || m.type != CTL_ATTACHED) {
		fprintf(stderr, "ft_raw: expected ATTACHED, got %u\n", m.type);
		return 2;
	}
	region = mmap(NULL, m.u.attached.region_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fds[0], 0);
	if (region == MAP_FAILED)
		die("mmap");
	ring_attach(&tx, region + m.u.attached.tx_off, m.u.attached.tx_size, 0);
	ring_attach(&rx, region + m.u.attached.rx_off, m.u.attached.rx_size, 0);

	if (strncmp(mode, "direct-", 7) == 0 || strncmp(mode, "plain-", 6) == 0)
		return direct_modes(mode, fds[1]);

	if (strncmp(mode, "mem-", 4) == 0)
		return mem_modes(mode);
	if (strcmp(mode, "join-twice") == 0) {
		n = ctl_encode_join(buf, sizeof(buf), job, rank, size);
		send(sock, buf, (size_t)n, MSG_NOSIGNAL);
		return wait_closed();
	}
	if (strncmp(mode, "post-", 5) == 0) {
		struct proto_post_shared *pp = (struct proto_post_shared *)(region + m.u.attached.done_off +
									     PROTO_DONE_BYTES);
		struct ctl_coll_wire w = { .kind = CTL_COLL_BARRIER, .seq = 1 };
		struct timespec two = { 2, 0 };

		if (m.u.attached.region_bytes < m.u.attached.done_off + PROTO_DONE_BYTES + PROTO_POST_BYTES) {
			fprintf(stderr, "ft_raw: the region has no post page\n");
			return 2;
		}
		if (wait_ready())
			return 2;
		if (strcmp(mode, "post-flood") == 0) {
			struct timespec t0, t;
			uint32_t posted = 0;

			w.group = 0xdeadbeef;
			clock_gettime(CLOCK_MONOTONIC, &t0);
			do {
				while (posted - atomic_load_explicit(&pp->taken, memory_order_acquire) < PROTO_POST_SLOTS) {
					struct proto_post_slot *sl = &pp->slot[posted % PROTO_POST_SLOTS];

					w.seq = posted + 1;
					sl->sock_before = 0;
					sl->len = (uint32_t)ctl_encode_coll(sl->msg, PROTO_POST_MSG_MAX, &w);
					atomic_store_explicit(&pp->posted, ++posted, memory_order_release);
				}
				clock_gettime(CLOCK_MONOTONIC, &t);
			} while (t.tv_sec - t0.tv_sec < 2);
			printf("posted %u taken %u\n", posted, atomic_load(&pp->taken));
			return 0;
		}
		if (strcmp(mode, "post-short") == 0) {
			/* a whole barrier first, then 4 bytes of another */
			pp->slot[0].len = (uint32_t)ctl_encode_coll(pp->slot[0].msg, PROTO_POST_MSG_MAX, &w);
			pp->slot[0].sock_before = 0;
			w.seq = 2;
			ctl_encode_coll(pp->slot[1].msg, PROTO_POST_MSG_MAX, &w);
			pp->slot[1].len = 4;
			pp->slot[1].sock_before = 0;
			atomic_store(&pp->posted, 2);
			return wait_closed();
		}
		n = strcmp(mode, "post-other") == 0 ? ctl_encode_mem(pp->slot[0].msg, PROTO_POST_MSG_MAX, CTL_MEM_FREE, 1, 0)
						     : ctl_encode_coll(pp->slot[0].msg, PROTO_POST_MSG_MAX, &w);
		pp->slot[0].len = strcmp(mode, "post-long") == 0 ? PROTO_POST_MSG_MAX + 1 : (uint32_t)n;
		pp->slot[0].sock_before = strcmp(mode, "post-later") == 0 ? 5 : 0;
		atomic_store(&pp->posted, strcmp(mode, "post-ahead") == 0 ? PROTO_POST_SLOTS + 1 : 1);
		if (strcmp(mode, "post-later") != 0)
			return wait_closed();
		printf("posted\n");
		fflush(stdout);
		nanosleep(&two, NULL);
		printf("taken %u\n", atomic_load(&pp->taken));
		return 0;
	}
	if (strcmp(mode, "ring-garbage") == 0) {
		struct proto_rec *rec;

		ring_reserve(&tx, 8, &rec);
		memset(rec, 0, sizeof(*rec));
		rec->kind = 99;
		rec->len = 8;
		ring_publish(&tx);
	} else if (strcmp(mode, "head-garbage") == 0) {
		atomic_store(&tx.sh->head, tx.size * 3 + 8);
	} else if (strncmp(mode, "batch-", 6) == 0) {
		/* Three 16-byte items for rank size - 1 from us, one of them
		 * broken as the mode says; with a whole item before it. */
		uint8_t recs[3 * 32] = { 0 };
		struct proto_rec *rec;
		uint64_t one = 1;

		if (wait_ready())
			return 2;
		for (int i = 0; i < 3; i++)
			*(struct proto_rec *)(recs + 32 * i) = (struct proto_rec){
				.len = 16, .kind = PROTO_REC_ITEM, .dst = size - 1, .src = rank };
		if (strcmp(mode, "batch-spoof") == 0)
			((struct proto_rec *)(recs + 32))->src = rank + 1;
		else if (strcmp(mode, "batch-overrun") == 0)
			((struct proto_rec *)(recs + 64))->len = 24;
		else if (strcmp(mode, "batch-smuggle") == 0)
			((struct proto_rec *)(recs + 32))->dst = size;  /* not even a rank */
		else {
			fprintf(stderr, "ft_raw: unknown mode %s\n", mode);
			return 2;
		}
		if (ring_reserve(&tx, sizeof(recs), &rec) != 0)
			return 2;
		*rec = (struct proto_rec){ .len = sizeof(recs), .kind = PROTO_REC_BATCH, .dst = size - 1 };
		memcpy(rec + 1, recs, sizeof(recs));
		ring_publish(&tx);
		if (write(fds[2], &one, sizeof(one)) < 0)
			die("eventfd write");
	} else if (strcmp(mode, "dense-flip") == 0) {
		uint64_t one = 1, flipped = 0, got = 0, bad = 5 | (uint64_t)3 << 32;    /* (L 5: not 8-byte items) */
		uint64_t good = 8 | (uint64_t)4 << 32;
		struct timespec t0;

		if (wait_ready())
			return 2;
		clock_gettime(CLOCK_MONOTONIC, &t0);
		do {
			struct proto_rec *rec;

			if (ring_reserve(&tx, 8 + 4 * 8, &rec) == 0) {
				_Atomic uint64_t *h = (_Atomic uint64_t *)(void *)(rec + 1);

				*rec = (struct proto_rec){ .len = 8 + 4 * 8, .kind = PROTO_REC_DENSE, .dst = size - 1 };
				atomic_store_explicit(h, good, memory_order_relaxed);
				memset((uint8_t *)(rec + 1) + 8, 0x77, 4 * 8);
				ring_publish(&tx);
				if (write(fds[2], &one, sizeof(one)) < 0)
					break;  /* (the daemon closed us) */
				/* Now, perhaps while the daemon reads it: */
				for (int i = 0; i < 64; i++)
					atomic_store_explicit(h, i & 1 ? good : bad, memory_order_relaxed);
				flipped++;
			} else {
				/* Full: take what came to us (to ourselves, in a
				 * job of one), and let the daemon take ours. */
				struct proto_rec r;
				const void *p;

				while (ring_peek(&rx, &r, &p) > 0) {
					/* What the daemon delivers is what it
					 * checked: the good header, our items. */
					if (r.kind == PROTO_REC_DENSE) {
						uint64_t h;
						const uint8_t *b = p;

						memcpy(&h, p, 8);
						if (h != good || r.len != 8 + 4 * 8) {
							printf("delivered a dense header %#llx, length %u\n",
							       (unsigned long long)h, r.len);
							return 1;
						}
						for (int i = 8; i < 8 + 4 * 8; i++)
							if (b[i] != 0x77) {
								printf("delivered a dense item byte %#x\n", b[i]);
								return 1;
							}
						got++;
					}
					ring_consume(&rx, &r);
				}
				if (ring_release(&rx) && write(fds[2], &one, sizeof(one)) < 0)
					break;
				sched_yield();
			}
		} while (since_ms(&t0) < 2000);
		printf("flipped %llu records, %llu came back whole\n", (unsigned long long)flipped,
		       (unsigned long long)got);
		return 0;
	} else if (strncmp(mode, "dense-", 6) == 0) {
		/* Four 8-byte items for rank size - 1 (or what the mode says). */
		struct proto_rec *rec;
		uint64_t one = 1, h = 8 | (uint64_t)4 << 32;
		uint32_t len = 8 + 4 * 8;
		uint16_t channel = 0;

		if (wait_ready())
			return 2;
		if (strcmp(mode, "dense-count") == 0) {
			h = 8 | (uint64_t)5 << 32;
		} else if (strcmp(mode, "dense-len") == 0) {
			h = (PROTO_DENSE_ITEM_MAX + 1) | (uint64_t)1 << 32;
			len = 8 + ((PROTO_DENSE_ITEM_MAX + 1 + 7) & ~7u);
		} else if (strcmp(mode, "dense-empty") == 0) {
			h = 8;
			len = 8;
		} else if (strcmp(mode, "dense-channel") == 0) {
			channel = 1;
		} else if (strcmp(mode, "dense-short") == 0) {
			len = 0;
		} else {
			fprintf(stderr, "ft_raw: unknown mode %s\n", mode);
			return 2;
		}
		if (ring_reserve(&tx, len, &rec) != 0)
			return 2;
		*rec = (struct proto_rec){ .len = len, .kind = PROTO_REC_DENSE, .channel = channel, .dst = size - 1 };
		if (len >= 8)
			memcpy(rec + 1, &h, 8);
		if (len > 8)
			memset((uint8_t *)(rec + 1) + 8, 0x55, len - 8);
		ring_publish(&tx);
		if (write(fds[2], &one, sizeof(one)) < 0)
			die("eventfd write");
	} else if (strcmp(mode, "after-done") == 0) {
		struct proto_rec *rec;
		uint64_t one = 1;

		if (wait_ready())
			return 2;
		if (ring_reserve(&tx, 0, &rec) != 0)
			return 2;
		*rec = (struct proto_rec){ .kind = PROTO_REC_DONE };
		if (ring_reserve(&tx, 16, &rec) != 0)
			return 2;
		*rec = (struct proto_rec){ .len = 16, .kind = PROTO_REC_ITEM, .dst = size - 1, .src = rank };
		memset(rec + 1, 0x33, 16);
		ring_publish(&tx);
		if (write(fds[2], &one, sizeof(one)) < 0)
			die("eventfd write");
		printf("published\n");
		fflush(stdout);
		return wait_closed();
	} else if (strcmp(mode, "scribble") == 0) {
		uint8_t *recent[32] = { NULL };
		uint64_t one = 1, sent = 0, x = 88172645463325252ull;
		struct timespec t0;

		if (wait_ready())
			return 2;
		clock_gettime(CLOCK_MONOTONIC, &t0);
		do {
			struct proto_rec *rec;

			if (ring_reserve(&tx, PROTO_FRAG_BYTES, &rec) == 0) {
				*rec = (struct proto_rec){ .len = PROTO_FRAG_BYTES, .kind = PROTO_REC_ITEM,
							   .dst = size - 1 };
				memset(rec + 1, 0x5a, PROTO_FRAG_BYTES);
				recent[sent++ % 32] = (uint8_t *)(rec + 1);
				ring_publish(&tx);
				if (write(fds[2], &one, sizeof(one)) < 0)
					die("eventfd write");
			}
			for (int i = 0; i < 32; i++) {
				if (!recent[i])
					continue;
				for (uint32_t k = 0; k < PROTO_FRAG_BYTES; k += 8) {
					x ^= x << 13, x ^= x >> 7, x ^= x << 17;    /* xorshift64 */
					memcpy(recent[i] + k, &x, 8);
				}
			}
		} while (since_ms(&t0) < 2000);
		printf("scribbled %llu items\n", (unsigned long long)sent);
		return 0;
	} else if (strcmp(mode, "self-tail") == 0) {
		uint8_t payload[64] = { 1 };
		uint64_t one = 1, fp = ring_footprint(sizeof(payload));
		struct proto_rec *rec;
		int full = 0;

		if (wait_ready())
			return 2;
		/* Items to rank 0, ourselves, until the daemon has filled our RX
		 * ring (and queued more for it in its memory). */
		for (int i = 0; i < 10000 && !full;) {  /* 10 s of waiting at most */
			if (ring_reserve(&tx, sizeof(payload), &rec) == 0) {
				*rec = (struct proto_rec){ .len = sizeof(payload), .kind = PROTO_REC_ITEM, .dst = 0 };
				memcpy(rec + 1, payload, sizeof(payload));
				continue;
			}
			ring_publish(&tx);
			if (write(fds[2], &one, sizeof(one)) < 0)
				die("eventfd write");
			usleep(1000);
			i++;
			full = atomic_load(&rx.sh->head) + 2 * fp > rx.size;
		}
		if (!full) {
			fprintf(stderr, "ft_raw: the daemon did not fill the RX ring\n");
			return 2;
		}
		atomic_store(&rx.sh->tail, atomic_load(&rx.sh->head) + 4096);
		/* One more, if the TX ring has room (the daemon may have stopped
		 * taking from it: its destination, we, takes nothing). */
		for (int i = 0; i < 100; i++) {
			if (ring_reserve(&tx, sizeof(payload), &rec) == 0) {
				*rec = (struct proto_rec){ .len = sizeof(payload), .kind = PROTO_REC_ITEM };
				memcpy(rec + 1, payload, sizeof(payload));
				ring_publish(&tx);
				break;
			}
			usleep(1000);
		}
		if (write(fds[2], &one, sizeof(one)) < 0)
			die("eventfd write");
		close(sock);
		return 0;
	} else if (strcmp(mode, "tail-garbage") == 0) {
		/* Wait until the daemon has filled our RX ring. */
		for (int i = 0; i < 1000; i++) {
			uint64_t h = atomic_load(&rx.sh->head);

			if (h + 4096 > rx.size)
				break;
			usleep(10000);
		}
		atomic_store(&rx.sh->tail, atomic_load(&rx.sh->head) + 4096);
	} else {
		fprintf(stderr, "ft_raw: unknown mode %s\n", mode);
		return 2;
	}
	{
		uint64_t one = 1;

		if (write(fds[2], &one, sizeof(one)) < 0)
			die("eventfd write");
	}
	return wait_closed();
}
