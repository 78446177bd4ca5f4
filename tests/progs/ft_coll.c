/* tests/progs/ft_coll.c - collective operations run by the daemons, checked
 * from the outside.
 *
 *   ft_coll --job J --rank R --size P [--barriers N] [--skew-ms MS]
 *           [--times FILE] [--nonblocking] [--die-before K] [--linger MS]
 *           [--close-busy] [--die-rank R]
 *
 * Runs N barriers (ferry_barrier, or with --nonblocking ferry_ibarrier and
 * ferry_test until it is done, counting the tests that said "pending").
 * Before each barrier, rank r sleeps r x MS milliseconds (--skew-ms), so
 * that ranks enter at different times.  With --times, appends a line per
 * barrier to FILE: "k enter_ns exit_ns" (CLOCK_REALTIME, one clock for every
 * process of the machine), for the test to check that no rank left barrier
 * k before every rank entered it.  With --die-before K, rank R (--die-rank,
 * default every rank) exits at once (no ferry_close) instead of entering
 * barrier K.  With --close-busy,
 * it posts an ibarrier and checks that ferry_close says -EBUSY before
 * waiting for it.  With --linger, it waits MS ms before ferry_close.
 *
 * With --alltoall B, runs N all-to-alls of B-byte blocks instead of
 * barriers (ferry_alltoall, or ferry_ialltoall with --nonblocking) and
 * checks every byte it receives against what its sender's pattern says;
 * --alloc puts both buffers in ferry_alloc memory, --in-place sends from
 * the receive buffer (FERRY_IN_PLACE), --strategy NAME forces an algorithm
 * (ferry_coll_strategy), --mismatch makes this rank pass one byte more.
 * --alltoallv runs all-to-allv instead, with uneven counts (zeros among
 * them) and displacements in reverse rank order with gaps that must stay
 * untouched (--many D: only to the next D ranks, a many-to-many).
 * --post-and-die K: this rank (--die-rank) posts barrier K with
 * ferry_ibarrier and exits at once.  --flood N: first posts N ibarriers
 * without waiting, and prints how many were taken before -EAGAIN (then
 * waits for those).
 *
 * --fd: with --nonblocking, waits between ferry_test calls in poll(2) on
 * ferry_fd() (which ferry_test armed) instead of sleeping 100 us: the fd
 * must become readable when the request ends (10 s at most), and must not
 * stay readable for nothing: the pending tests count the wake-ups.
 *
 * --split-instead R: rank R calls ferry_split (color 0, key 0) where the
 * others call ferry_alltoall of 8-byte blocks (the split's exchange has that
 * shape); every rank must fail with -EINVAL: prints "rank R mismatch:
 * ERRNAME: message" and exits 0 if it did, 1 if not.
 * --pair (with --fd): each of the N rounds posts two ibarriers, the second
 * after sleeping rank x MS ms (not before the round), so that the first
 * ends at once and the second when the last rank posts it; after MS/2 ms
 * every rank tests the second, then the first (done by then), then waits
 * on ferry_fd() for the second: a finished request's test must leave the
 * fd armed for the other.
 *
 * Prints "rank R ok: N barriers, T pending tests" and exits 0, or
 * "rank R barrier K: ERRNAME: message" and exits 3 when a barrier failed
 * (what the tests look for when a rank dies), 1 on any other error.
 */
#include "common.h"

#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <unistd.h>

/* Bytes rank a sends rank b in an all-to-allv: uneven, zeros among them;
 * with many >= 0 only to the next many ranks. */
static size_t vcount(uint32_t a, uint32_t b, uint32_t P, long many, int sym)
{
	if (sym && a > b) {     /* in place: a sends b what b sends a */
		uint32_t t = a;

		a = b;
		b = t;
	}
	if (many >= 0) {
		uint32_t d = (b + P - a) % P;

		return d >= 1 && d <= (uint32_t)many ? (size_t)((a * 5 + b * 13) % 29 + 1) : 0;
	}
	return (a * 7 + b * 3) % 11 == 0 ? 0 : (size_t)((a * 5 + b * 13) % 29 + 1);
}

/* A non-blocking post's result, then ferry_test until the request ends,
 * counting the tests that said it was pending: 0 or -errno. */
static ferry_t *fd_of;  /* --fd: wait on ferry_fd(fd_of) */

static int until_done(int ret, ferry_req_t **r, long *pending)
{
	/* (r NULL: one wait, the caller tested) */
	while (ret == 0 && (!r || (ret = ferry_test(r)) == 0)) {
		(*pending)++;
		if (fd_of) {
			struct pollfd p = { .fd = ferry_fd(fd_of), .events = POLLIN };

			if (poll(&p, 1, 10000) != 1) {
				fprintf(stderr, "ferry_fd() did not become readable within 10 s of ferry_test saying "
					"pending\n");
				exit(1);
			}
		} else {
			usleep(100);
		}
		if (!r)
			return 0;
	}
	return ret == 1 ? 0 : ret;
}

static long long real_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "job", required_argument, NULL, 'j' }, { "rank", required_argument, NULL, 'r' },
		{ "size", required_argument, NULL, 'p' }, { "barriers", required_argument, NULL, 'n' },
		{ "skew-ms", required_argument, NULL, 's' }, { "times", required_argument, NULL, 't' },
		{ "nonblocking", no_argument, NULL, 'N' }, { "die-before", required_argument, NULL, 'd' },
		{ "linger", required_argument, NULL, 'L' }, { "close-busy", no_argument, NULL, 'B' },
		{ "die-rank", required_argument, NULL, 'R' }, { "alltoall", required_argument, NULL, 'A' },
		{ "alloc", no_argument, NULL, 'M' }, { "in-place", no_argument, NULL, 'I' },
		{ "strategy", required_argument, NULL, 'S' }, { "mismatch", no_argument, NULL, 'X' },
		{ "post-and-die", required_argument, NULL, 'P' }, { "flood", required_argument, NULL, 'F' },
		{ "alltoallv", no_argument, NULL, 'V' }, { "many", required_argument, NULL, 'D' },
		{ "fd", no_argument, NULL, 'W' }, { "pair", no_argument, NULL, 'Q' },
		{ "split-instead", required_argument, NULL, 'K' },
		{ NULL, 0, NULL, 0 },
	};
	struct ferry_opts fo = { 0 };
	long split_instead = -1;
	long barriers = 1, skew_ms = 0, die_before = -1, die_rank = -1, linger = 0, pending = 0, a2a = -1;
	int use_alloc = 0, in_place = 0, mismatch = 0;
	long post_and_die = -1, flood = 0, many = -1;
	int v = 0;
	size_t *sc = NULL, *sd = NULL, *rc = NULL, *rd = NULL, sext = 0, rext = 0;
	const char *strategy = NULL;
	uint8_t *sbuf = NULL, *rbuf = NULL;
	const char *times = NULL;
	int opt, ret, nonblocking = 0, close_busy = 0, wait_fd = 0, pair = 0;
	FILE *tf = NULL;
	ferry_t *f;

	while ((opt = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (opt) {
		case 'j': fo.job = optarg; break;
		case 'r': fo.rank = (int)arg_long("--rank", optarg); break;
		case 'p': fo.size = (int)arg_long("--size", optarg); break;
		case 'n': barriers = arg_long("--barriers", optarg); break;
		case 's': skew_ms = arg_long("--skew-ms", optarg); break;
		case 't': times = optarg; break;
		case 'N': nonblocking = 1; break;
		case 'W': wait_fd = 1; break;
		case 'Q': pair = 1; break;
		case 'K': split_instead = arg_long("--split-instead", optarg); break;
		case 'd': die_before = arg_long("--die-before", optarg); break;
		case 'L': linger = arg_long("--linger", optarg); break;
		case 'B': close_busy = 1; break;
		case 'R': die_rank = arg_long("--die-rank", optarg); break;
		case 'A': a2a = arg_long("--alltoall", optarg); break;
		case 'M': use_alloc = 1; break;
		case 'I': in_place = 1; break;
		case 'S': strategy = optarg; break;
		case 'X': mismatch = 1; break;
		case 'P': post_and_die = arg_long("--post-and-die", optarg); break;
		case 'F': flood = arg_long("--flood", optarg); break;
		case 'V': v = 1; break;
		case 'D': many = arg_long("--many", optarg); break;
		default: return 2;
		}
	}
	ret = ferry_open(&f, &fo);
	if (ret < 0) {
		fprintf(stderr, "ferry_open: %s: %s\n", ferry_strerror(ret), ferry_last_error());
		return 1;
	}
	if (wait_fd)
		fd_of = f;
	if (split_instead >= 0) {
		uint8_t sb[8 * 64] = { 0 }, rb[8 * 64];
		ferry_t *sub = NULL;

		if (fo.size > 64)
			return 2;
		if (fo.rank == split_instead)
			ret = ferry_split(f, 0, 0, &sub);
		else
			ret = ferry_alltoall(f, sb, rb, 8);
		printf("rank %d mismatch: %s: %s\n", fo.rank, ret < 0 ? ferry_strerror(ret) : "none",
		       ret < 0 ? ferry_last_error() : "it succeeded");
		fflush(stdout);
		return ret == -EINVAL ? 0 : 1;
	}
	if (times && !(tf = fopen(times, "a"))) {
		perror(times);
		return 1;
	}
	/* Every rank appends to the one file: a line a write (O_APPEND), or
	 * the ranks' 4 KiB buffers would interleave in the middle of lines. */
	if (tf)
		setvbuf(tf, NULL, _IOLBF, 0);
	printf("rank %d running\n", fo.rank);
	fflush(stdout);
	if (flood > 0) {
		ferry_req_t **reqs = calloc((size_t)flood, sizeof(*reqs));
		long taken = 0;

		while (taken < flood && (ret = ferry_ibarrier(f, &reqs[taken])) == 0)
			taken++;
		printf("rank %d flood: %ld taken, then %s\n", fo.rank, taken, taken < flood ? ferry_strerror(ret) : "none refused");
		fflush(stdout);
		if ((ret = ferry_waitall((int)taken, reqs)) < 0) {
			printf("rank %d flood: %s: %s\n", fo.rank, ferry_strerror(ret), ferry_last_error());
			return 3;
		}
		free(reqs);
	}
	if (strategy && (ret = ferry_coll_strategy(f, "alltoall", strategy)) < 0) {
		fprintf(stderr, "ferry_coll_strategy: %s\n", ferry_last_error());
		return 1;
	}
	if (v) {
		/* counts and reverse-order displacements with 3-byte gaps */
		uint32_t P = (uint32_t)fo.size, me = (uint32_t)fo.rank;

		sc = calloc(P, sizeof(*sc));
		sd = calloc(P, sizeof(*sd));
		rc = calloc(P, sizeof(*rc));
		rd = calloc(P, sizeof(*rd));
		for (uint32_t b = 0; b < P; b++) {
			sc[b] = vcount(me, b, P, many, in_place);
			rc[b] = vcount(b, me, P, many, in_place);
		}
		sext = rext = 3;
		for (uint32_t b = P; b-- > 0;) {
			sd[b] = sext;
			sext += sc[b] + 3;
			rd[b] = rext;
			rext += rc[b] + 3;
		}
		if (in_place)   /* one buffer: the larger extent, placed by recv */
			sext = rext;
		if (use_alloc) {
			if (ferry_alloc(f, sext, (void **)&sbuf) < 0 || ferry_alloc(f, rext, (void **)&rbuf) < 0) {
				fprintf(stderr, "ferry_alloc: %s\n", ferry_last_error());
				return 1;
			}
		} else {
			sbuf = malloc(sext);
			rbuf = malloc(rext);
		}
		a2a = -1;
	}
	if (a2a >= 0) {
		size_t block = (size_t)a2a + (size_t)mismatch, total = block * (size_t)fo.size;

		if (use_alloc) {
			if (ferry_alloc(f, total + 1, (void **)&sbuf) < 0 || ferry_alloc(f, total + 1, (void **)&rbuf) < 0) {
				fprintf(stderr, "ferry_alloc: %s\n", ferry_last_error());
				return 1;
			}
		} else {
			sbuf = malloc(total + 1);
			rbuf = malloc(total + 1);
		}
	}
	if (close_busy) {
		ferry_req_t *r;

		if ((ret = ferry_ibarrier(f, &r)) < 0) {
			fprintf(stderr, "ferry_ibarrier: %s\n", ferry_last_error());
			return 1;
		}
		ret = ferry_close(f);
		if (ret != -EBUSY) {
			fprintf(stderr, "ferry_close with a request outstanding said %d, not -EBUSY\n", ret);
			return 1;
		}
		if ((ret = ferry_wait(&r)) < 0 || r != NULL) {
			fprintf(stderr, "ferry_wait: %s\n", ferry_last_error());
			return 1;
		}
		/* a freed request: test says done */
		if (ferry_test(&r) != 1) {
			fprintf(stderr, "ferry_test of NULL is not 1\n");
			return 1;
		}
	}
	for (long k = 1; k <= barriers; k++) {
		long long enter, leave;

		if (k == post_and_die && (die_rank < 0 || die_rank == fo.rank)) {
			ferry_req_t *r;

			ret = ferry_ibarrier(f, &r);
			printf("rank %d posted barrier %ld (%d) and dies\n", fo.rank, k, ret);
			fflush(stdout);
			_exit(0);
		}
		if (k == die_before && (die_rank < 0 || die_rank == fo.rank)) {
			printf("rank %d dies before barrier %ld\n", fo.rank, k);
			fflush(stdout);
			_exit(0);
		}
		if (skew_ms && !pair)
			usleep((useconds_t)(skew_ms * fo.rank * 1000));
		enter = real_ns();
		if (v) {
			uint32_t P = (uint32_t)fo.size, me = (uint32_t)fo.rank;

			memset(rbuf, 0xee, rext);
			for (uint32_t b = 0; b < P; b++)
				for (size_t i = 0; i < (in_place ? rc[b] : sc[b]); i++)
					(in_place ? rbuf : sbuf)[(in_place ? rd[b] : sd[b]) + i] =
						pattern_byte(me, b, (uint32_t)k, (uint32_t)i);
			if (nonblocking) {
				ferry_req_t *r;

				ret = until_done(ferry_ialltoallv(f, in_place ? FERRY_IN_PLACE : sbuf, sc, sd, rbuf, rc,
								  rd, &r), &r, &pending);
			} else {
				ret = ferry_alltoallv(f, in_place ? FERRY_IN_PLACE : sbuf, sc, sd, rbuf, rc, rd);
			}
			/* every block from its sender, the gaps untouched (in
			 * place: what is not a block is what we wrote, 0xee) */
			for (uint32_t a = 0; ret == 0 && a < P; a++)
				for (size_t i = 0; i < rc[a]; i++)
					if (rbuf[rd[a] + i] != pattern_byte(a, me, (uint32_t)k, (uint32_t)i)) {
						printf("rank %d alltoallv %ld: byte %zu from rank %u is wrong\n", fo.rank,
						       k, i, a);
						return 1;
					}
			for (size_t i = 0; ret == 0 && i < rext; i++) {
				int in_block = 0;

				for (uint32_t a = 0; a < P; a++)
					in_block |= i >= rd[a] && i < rd[a] + rc[a];
				if (!in_block && rbuf[i] != 0xee) {
					printf("rank %d alltoallv %ld: byte %zu between blocks was written\n", fo.rank,
					       k, i);
					return 1;
				}
			}
		} else if (a2a >= 0) {
			size_t block = (size_t)a2a + (size_t)mismatch;
			uint8_t *src = in_place ? rbuf : sbuf;

			for (int dst = 0; dst < fo.size; dst++)
				for (size_t i = 0; i < block; i++)
					src[(size_t)dst * block + i] = pattern_byte((uint32_t)fo.rank, (uint32_t)dst,
										    (uint32_t)k, (uint32_t)i);
			if (!in_place)
				memset(rbuf, 0xee, block * (size_t)fo.size);
			if (nonblocking) {
				ferry_req_t *r;

				ret = until_done(ferry_ialltoall(f, in_place ? FERRY_IN_PLACE : sbuf, rbuf, block, &r),
						 &r, &pending);
			} else {
				ret = ferry_alltoall(f, in_place ? FERRY_IN_PLACE : sbuf, rbuf, block);
			}
			for (int src_rank = 0; ret == 0 && src_rank < fo.size; src_rank++)
				for (size_t i = 0; i < block; i++)
					if (rbuf[(size_t)src_rank * block + i] !=
					    pattern_byte((uint32_t)src_rank, (uint32_t)fo.rank, (uint32_t)k, (uint32_t)i)) {
						printf("rank %d alltoall %ld: byte %zu from rank %d is wrong\n", fo.rank, k,
						       i, src_rank);
						fflush(stdout);
						return 1;
					}
		} else if (pair) {
			ferry_req_t *r1 = NULL, *r2 = NULL;

			if ((ret = ferry_ibarrier(f, &r1)) == 0) {
				usleep((useconds_t)(skew_ms * fo.rank * 1000));
				ret = ferry_ibarrier(f, &r2);
			}
			if (ret == 0)
				usleep((useconds_t)(skew_ms * 500));
			/* the second first (pending: arms), then the first */
			while (ret == 0 && (r1 || r2)) {
				int t2 = ferry_test(&r2), t1 = ferry_test(&r1);

				ret = t1 < 0 ? t1 : t2 < 0 ? t2 : 0;
				if (ret == 0 && (r1 || r2))
					ret = until_done(0, NULL, &pending);
			}
		} else if (nonblocking) {
			ferry_req_t *r;

			ret = until_done(ferry_ibarrier(f, &r), &r, &pending);
		} else {
			ret = ferry_barrier(f);
		}
		leave = real_ns();
		if (ret < 0) {
			printf("rank %d %s %ld: %s: %s\n", fo.rank, v ? "alltoallv" : a2a >= 0 ? "alltoall" : "barrier", k,
			       ferry_strerror(ret), ferry_last_error());
			fflush(stdout);
			ferry_close(f); /* (it says the job failed) */
			return 3;
		}
		if (tf)
			fprintf(tf, "%ld %lld %lld\n", k, enter, leave);
	}
	if (tf)
		fclose(tf);
	printf("rank %d ok: %ld %s, %ld pending tests\n", fo.rank, barriers,
	       v ? "alltoallvs" : a2a >= 0 ? "alltoalls" : "barriers", pending);
	free(sc);
	free(sd);
	free(rc);
	free(rd);
	if (use_alloc) {
		ferry_free(f, sbuf);
		ferry_free(f, rbuf);
	} else {
		free(sbuf);
		free(rbuf);
	}
	fflush(stdout);
	if (linger)
		usleep((useconds_t)linger * 1000);
	ret = ferry_close(f);
	if (ret < 0) {
		fprintf(stderr, "ferry_close: %s\n", ferry_last_error());
		return 1;
	}
	return 0;
}
