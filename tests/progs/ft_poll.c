/* tests/progs/ft_poll.c - ferry_poll and the empty ferry_recv, on a real
 * daemon.
 *
 *   ft_poll --job J              two processes (ranks 0 and 1 of a 2-rank job)
 *   ft_poll --job J --empty N    one rank alone: N ferry_recv(..., 0) calls
 *                                that find nothing, then prints "empty done"
 *   ft_poll --job J --sleeper    one rank alone: prints "sleeping", then
 *                                ferry_poll(FERRY_POLLIN, -1); prints what it
 *                                returned ("poll: -ECONNRESET ...")
 *   ft_poll --job J --fdwake     two processes: rank 1 arms ferry_fd() with an
 *                                empty ferry_recv(..., 0), sleeps in
 *                                ferry_step_wait, then finds nothing with
 *                                ferry_recv(..., 0) and waits on ferry_fd()
 *                                for the item rank 0 sends in the next step:
 *                                the fd must become readable
 *   ft_poll --job J --fdwake-poll the same, with ferry_poll(FERRY_POLLOUT, 0)
 *                                (is there room to send?) between the empty
 *                                ferry_recv and the wait on ferry_fd()
 *
 * The two-process run (a pipe between them says when to go on) checks:
 * nothing ready without items; unknown events are refused; a timeout is
 * waited out; a receiver asleep in ferry_poll wakes when an item comes; a
 * sender whose TX ring is full (the receiver takes nothing, so the daemon
 * stops draining it) waits in ferry_poll and is woken once the receiver
 * takes items; after ferry_done, FERRY_POLLOUT is ready at once.  Every item
 * arrives, in order.  Prints "ok ..." lines, "FAIL ..." and exits 1 on the
 * first failed check.
 */
#include "common.h"

#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#define LEN 1024

static const char *who = "";

#define CHECK(cond, ...) do { \
	if (!(cond)) { \
		printf("FAIL %s: ", who); printf(__VA_ARGS__); printf(" (%s)\n", ferry_last_error()); \
		fflush(stdout); exit(1); \
	} \
	printf("ok %s: ", who); printf(__VA_ARGS__); printf("\n"); fflush(stdout); \
} while (0)

static ferry_t *open_rank(const char *job, int rank, int size)
{
	struct ferry_opts o = { .job = job, .rank = rank, .size = size, .timeout_ms = 30000 };
	ferry_t *f;
	int ret = ferry_open(&f, &o);

	if (ret < 0) {
		printf("FAIL rank %d: ferry_open: %s\n", rank, ferry_last_error());
		exit(1);
	}
	return f;
}

static void say(int fd, char c)
{
	if (write(fd, &c, 1) != 1)
		exit(1);
}

static void hear(int fd, char c)
{
	char got;

	if (read(fd, &got, 1) != 1 || got != c) {
		printf("FAIL %s: the other process did not say '%c'\n", who, c);
		exit(1);
	}
}

/* Rank 1: receives, checking order, until n items came. */
static void receive(ferry_t *f, uint32_t n, uint32_t *seq)
{
	struct ferry_item it[64];

	while (*seq < n) {
		int got = ferry_poll(f, FERRY_POLLIN, 10000);

		if (got != FERRY_POLLIN) {
			printf("FAIL %s: ferry_poll = %d after %u items (%s)\n", who, got, *seq,
			       got < 0 ? ferry_last_error() : "nothing for 10 s");
			exit(1);
		}
		got = ferry_recv(f, it, 64, 0);
		for (int i = 0; i < got; i++) {
			uint32_t got_seq;
			const char *bad = check_item(&it[i], 1, &got_seq);

			if (!bad && got_seq != *seq)
				bad = "out of order";
			if (bad) {
				printf("FAIL %s: item %u: %s\n", who, *seq, bad);
				exit(1);
			}
			(*seq)++;
		}
	}
}

static int receiver(const char *job, int to_s, int from_s)
{
	ferry_t *f = open_rank(job, 1, 2);
	uint32_t seq = 0, total;
	double t0;
	int ret;

	who = "receiver";
	ret = ferry_poll(f, FERRY_POLLIN, 0);
	CHECK(ret == 0, "nothing to receive: ferry_poll(POLLIN, 0) = %d", ret);
	ret = ferry_poll(f, 0x4, 0);
	CHECK(ret == -EINVAL, "unknown events refused: %d", ret);
	t0 = now_s();
	ret = ferry_poll(f, FERRY_POLLIN, 200);
	CHECK(ret == 0 && now_s() - t0 >= 0.19, "timeout waited out: %d after %.3f s", ret, now_s() - t0);
	/* Asleep before the first item is sent. */
	say(to_s, 'a');
	t0 = now_s();
	ret = ferry_poll(f, FERRY_POLLIN, 20000);
	CHECK(ret == FERRY_POLLIN, "woken by the first item after %.3f s", now_s() - t0);
	receive(f, 1, &seq);
	/* Take nothing until the sender's ring is full and it sleeps. */
	say(to_s, 'b');
	hear(from_s, 'c');
	if (read(from_s, &total, sizeof(total)) != sizeof(total))
		return 1;
	usleep(200000);         /* the sender is asleep in ferry_poll by now */
	receive(f, total, &seq);
	CHECK(seq == total, "all %u items arrived in order", total);
	CHECK(ferry_done(f) == 0 && ferry_step_wait(f, 30000) == 0, "step ends");
	ret = ferry_poll(f, FERRY_POLLIN, 0);
	CHECK(ret == 0, "nothing left to receive: %d", ret);
	ferry_close(f);
	return 0;
}

static int sender(const char *job, int to_r, int from_r)
{
	ferry_t *f = open_rank(job, 0, 2);
	uint8_t buf[LEN];
	uint32_t seq = 0, full = 0;
	double t0;
	int ret;

	who = "sender";
	ret = ferry_poll(f, FERRY_POLLOUT, 0);
	CHECK(ret == FERRY_POLLOUT, "room to send at the start: %d", ret);
	ret = ferry_poll(f, FERRY_POLLIN | FERRY_POLLOUT, 0);
	CHECK(ret == FERRY_POLLOUT, "only POLLOUT of the two: %d", ret);
	hear(from_r, 'a');
	usleep(200000);
	fill_item(buf, 0, 1, seq, LEN);
	CHECK(ferry_send(f, 1, 0, buf, LEN) == 0 && ferry_flush(f) == 0, "first item sent");
	seq++;
	hear(from_r, 'b');
	/* Fill the ring: the receiver takes nothing, so the daemon's queue
	 * for it fills and the daemon stops draining ours.  Full means
	 * refused three times in a row, 100 ms apart. */
	while (full < 3) {
		fill_item(buf, 0, 1, seq, LEN);
		ret = ferry_send(f, 1, 0, buf, LEN);
		if (ret == 0) {
			seq++;
			full = 0;
			continue;
		}
		CHECK(ret == -EAGAIN, "refused with -EAGAIN");
		full++;
		usleep(100000);
	}
	t0 = now_s();
	ret = ferry_poll(f, FERRY_POLLOUT, 300);
	CHECK(ret == 0 && now_s() - t0 >= 0.29, "ring full, receiver idle: no room within 300 ms (%d)", ret);
	/* Let the receiver go: the daemon must wake us once there is room. */
	say(to_r, 'c');
	{
		uint32_t total = seq + 1000;

		if (write(to_r, &total, sizeof(total)) != sizeof(total))
			return 1;
		t0 = now_s();
		ret = ferry_poll(f, FERRY_POLLOUT, 20000);
		CHECK(ret == FERRY_POLLOUT && now_s() - t0 >= 0.15, "woken when room appeared, after %.3f s",
		      now_s() - t0);
		while (seq < total) {
			fill_item(buf, 0, 1, seq, LEN);
			ret = ferry_send(f, 1, 0, buf, LEN);
			if (ret == -EAGAIN) {
				ret = ferry_poll(f, FERRY_POLLOUT, 20000);
				if (ret != FERRY_POLLOUT) {
					printf("FAIL sender: ferry_poll = %d at item %u (%s)\n", ret, seq,
					       ret < 0 ? ferry_last_error() : "no room for 20 s");
					exit(1);
				}
				continue;
			}
			if (ret < 0) {
				printf("FAIL sender: ferry_send: %s\n", ferry_last_error());
				exit(1);
			}
			seq++;
		}
	}
	CHECK(ferry_done(f) == 0, "done");
	ret = ferry_poll(f, FERRY_POLLOUT, 1000);
	CHECK(ret == FERRY_POLLOUT, "after ferry_done, POLLOUT at once (ferry_send fails at once): %d", ret);
	CHECK(ferry_step_wait(f, 30000) == 0, "step ends");
	ferry_close(f);
	return 0;
}

/* The fd-wake receivers' common end, ferry_fd() armed: says 'y' to the
 * sender, waits on the fd (at most 5 s) for its one item, takes it, ends
 * the step. */
static int fd_gets_item(ferry_t *f, int to_s)
{
	struct ferry_item it[4];
	struct pollfd pfd = { .fd = ferry_fd(f), .events = POLLIN };
	double t0;
	int ret;

	say(to_s, 'y');
	t0 = now_s();
	ret = poll(&pfd, 1, 5000);
	CHECK(ret == 1, "ferry_fd() readable when the item came, after %.3f s (poll = %d)", now_s() - t0, ret);
	t0 = now_s();
	do
		ret = ferry_recv(f, it, 4, 1000);
	while (ret == 0 && now_s() - t0 < 5);
	CHECK(ret == 1 && it[0].src == 0 && it[0].len == LEN, "the item: %d", ret);
	ferry_release(f);
	CHECK(ferry_done(f) == 0 && ferry_step_wait(f, 30000) == 0, "the last step ends");
	ferry_close(f);
	return 0;
}

/* --fdwake, rank 1: the event-loop pattern of ferry.h (ferry_recv until it
 * returns 0, then wait on ferry_fd()) across a ferry_step_wait that slept. */
static int fdwake_receiver(const char *job, int to_s, int from_s)
{
	ferry_t *f = open_rank(job, 1, 2);
	struct ferry_item it[4];
	double t0;
	int ret;

	(void)from_s;
	who = "fdwake receiver";
	ret = ferry_recv(f, it, 4, 0);
	CHECK(ret == 0, "nothing yet: ferry_recv(..., 0) = %d (arms ferry_fd)", ret);
	CHECK(ferry_done(f) == 0, "done with step 1");
	say(to_s, 'x');
	t0 = now_s();
	ret = ferry_step_wait(f, 30000);
	CHECK(ret == 0 && now_s() - t0 >= 0.1, "step 1 ends after %.3f s asleep in ferry_step_wait", now_s() - t0);
	ret = ferry_recv(f, it, 4, 0);
	CHECK(ret == 0, "nothing yet in step 2: ferry_recv(..., 0) = %d", ret);
	return fd_gets_item(f, to_s);
}

/* --fdwake, rank 0: ends step 1 once rank 1 sleeps in ferry_step_wait, sends
 * one item once rank 1 waits on its fd. */
static int fdwake_sender(const char *job, int to_r, int from_r)
{
	ferry_t *f = open_rank(job, 0, 2);
	uint8_t buf[LEN];

	(void)to_r;
	who = "fdwake sender";
	hear(from_r, 'x');
	usleep(300000);         /* rank 1 is asleep in ferry_step_wait by now */
	CHECK(ferry_done(f) == 0 && ferry_step_wait(f, 30000) == 0, "step 1 ends");
	hear(from_r, 'y');
	usleep(300000);         /* rank 1 waits on ferry_fd() by now */
	fill_item(buf, 0, 1, 0, LEN);
	CHECK(ferry_send(f, 1, 0, buf, LEN) == 0 && ferry_flush(f) == 0, "item sent in step 2");
	CHECK(ferry_done(f) == 0 && ferry_step_wait(f, 30000) == 0, "step 2 ends");
	ferry_close(f);
	return 0;
}

/* --fdwake-poll, rank 1: an event loop that receives through ferry_fd() and
 * asks ferry_poll(FERRY_POLLOUT, 0) whether it may send: the question must
 * not disarm the fd that the empty ferry_recv armed. */
static int fdpoll_receiver(const char *job, int to_s, int from_s)
{
	ferry_t *f = open_rank(job, 1, 2);
	struct ferry_item it[4];
	int ret;

	(void)from_s;
	who = "fdwake-poll receiver";
	ret = ferry_recv(f, it, 4, 0);
	CHECK(ret == 0, "nothing yet: ferry_recv(..., 0) = %d (arms ferry_fd)", ret);
	ret = ferry_poll(f, FERRY_POLLOUT, 0);
	CHECK(ret == FERRY_POLLOUT, "room to send: ferry_poll(POLLOUT, 0) = %d", ret);
	return fd_gets_item(f, to_s);
}

/* --fdwake-poll, rank 0: one item once rank 1 waits on its fd. */
static int fdpoll_sender(const char *job, int to_r, int from_r)
{
	ferry_t *f = open_rank(job, 0, 2);
	uint8_t buf[LEN];

	(void)to_r;
	who = "fdwake-poll sender";
	hear(from_r, 'y');
	usleep(300000);         /* rank 1 waits on ferry_fd() by now */
	fill_item(buf, 0, 1, 0, LEN);
	CHECK(ferry_send(f, 1, 0, buf, LEN) == 0 && ferry_flush(f) == 0, "item sent");
	CHECK(ferry_done(f) == 0 && ferry_step_wait(f, 30000) == 0, "step ends");
	ferry_close(f);
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "job", required_argument, NULL, 'j' }, { "empty", required_argument, NULL, 'e' },
		{ "sleeper", no_argument, NULL, 's' }, { "fdwake", no_argument, NULL, 'w' },
		{ "fdwake-poll", no_argument, NULL, 'P' },
		{ NULL, 0, NULL, 0 },
	};
	const char *job = "poll";
	long empty = -1;
	int sleeper = 0, fdwake = 0, opt, p1[2], p2[2], st, ret;
	pid_t child;

	while ((opt = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (opt) {
		case 'j': job = optarg; break;
		case 'e': empty = arg_long("--empty", optarg); break;
		case 's': sleeper = 1; break;
		case 'w': fdwake = 1; break;
		case 'P': fdwake = 2; break;
		default: return 2;
		}
	}
	if (empty >= 0) {
		struct ferry_item it[4];
		ferry_t *f = open_rank(job, 0, 1);

		for (long i = 0; i < empty; i++)
			if (ferry_recv(f, it, 4, 0) != 0)
				return 1;
		printf("empty done\n");
		ferry_close(f);
		return 0;
	}
	if (sleeper) {
		ferry_t *f = open_rank(job, 0, 1);

		printf("sleeping\n");
		fflush(stdout);
		ret = ferry_poll(f, FERRY_POLLIN, -1);
		printf("poll: %d %s\n", ret, ret < 0 ? ferry_strerror(ret) : "");
		fflush(stdout);
		ferry_close(f);         /* (LeakSanitizer: exit 1 with stdout unflushed) */
		return 0;
	}
	if (pipe(p1) < 0 || pipe(p2) < 0)
		return 1;
	fflush(stdout);
	child = fork();
	if (child < 0)
		return 1;
	if (child == 0)
		return (fdwake == 2 ? fdpoll_receiver : fdwake ? fdwake_receiver : receiver)(job, p1[1], p2[0]);
	ret = (fdwake == 2 ? fdpoll_sender : fdwake ? fdwake_sender : sender)(job, p2[1], p1[0]);
	if (waitpid(child, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
		return 1;
	return ret;
}
