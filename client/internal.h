/* client/internal.h - what the files of libferry share; not installed.
 *
 * The handle holds the Unix socket to ferryd (kept open: its EOF tells either
 * side that the other is gone), the shared-memory region with the TX and RX
 * rings, and two eventfds: the daemon writes efd_client when it published RX
 * records (or freed TX room) while we slept; we write efd_daemon when we
 * published TX records (or freed RX room) while it slept.  A third, efd_coll,
 * the daemon writes when a collective operation ended on the done page
 * while we were armed for it (proto/done.h, coll.c).
 *
 * Everything declared here has hidden visibility (the library is compiled with
 * -fvisibility=hidden); only FERRY_API functions leave libferry.
 */
#ifndef FERRY_CLIENT_INTERNAL_H
#define FERRY_CLIENT_INTERNAL_H

#include "ferry.h"
#include "../proto/clock.h"
#include "../proto/ctl.h"
#include "../proto/direct.h"
#include "../proto/done.h"
#include "../proto/post.h"
#include "../proto/ring.h"

#include <sched.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define FERRY_API __attribute__((visibility("default")))

struct ctl_msg;
struct reasm;

/* Reassembly buffers a handle keeps for the next large items, instead of
 * freeing them at ferry_release (recv.c "Spare buffers"): at most this many
 * bytes (each at least 4 pieces, 256 KiB, so at most 128 buffers). */
#define RX_SPARE_BYTES (32u << 20)

/* One of the job's direct rings (proto/direct.h), as this process sees it:
 * toward a local rank (it consumes) or from one (we consume). */
struct dring {
	struct ring r;
	int efd;                /* the other end's eventfd (its efd_client): wakes it */
	uint32_t rank;          /* the other end's rank */
	uint32_t slot;
	uint32_t at;            /* in[]: the last step whose end marker we read (recv.c) */
	uint32_t dense_at;      /* in[]: items of the DENSE record at the tail handed out
				 * (recv.c "Dense records"); 0: none */
};

/* The direct rings of this endpoint (handle.c sets them up from CTL_DIRECT;
 * ownership: the handle's, freed by direct_free).  out[j] goes from us to
 * slot j, in[j] from slot j to us; slot == our own slot is our ring to
 * ourselves, both ways. */
struct direct {
	void *region;
	size_t region_bytes;
	const _Atomic uint8_t *gone;    /* gone[slot]: ferryd says that endpoint ended */
	uint32_t n, slot;
	struct dring *out, *in;
	uint32_t next_in;       /* where collect starts among in[], round robin */
	uint32_t mark_next;     /* ferry_done: out[] up to here have this step's end marker */
	uint64_t touched;       /* in[j] read from since the last release: bit j */
	int fences;             /* we offered our writers to run membarrier before
				 * we sleep (proto/ring.h "Late offers"), and do */
	struct ring_judge judge; /* ... and whether it pays (proto/ring.h) */
	uint64_t items_in;      /* items read from in[] */
};

/* The stash (recv.c): items kept in chunks of the library's memory. */
struct stash_chunk {
	size_t used, cap;
	_Alignas(8) uint8_t data[];
};

struct stashed {
	struct ferry_item it;   /* it.data points into c */
	struct stash_chunk *c;
};

/* A buffer libferry allocated and its size (0: not kept for reuse, as a
 * stash chunk is not). */
struct rxbuf {
	void *buf;
	size_t cap;
};

struct ferry {
	/* What ferry_send reads on FERRY_BATCH's fast path (send.c: the
	 * checks every call makes, and the dense append), together in the
	 * first cache line: spread over the struct they were five lines, each
	 * a miss of its own where the application's data evicts them
	 * (index-gather's random writes).  (The unbatched path reads tx too,
	 * and the batch of records batch_cap.)  Each field belongs to a part
	 * below and is described here. */
	struct ferry *root;     /* groups: the job's handle; NULL in the job's handle itself */
	struct batch *batch;    /* FERRY_BATCH: by destination rank; NULL without it */
	uint8_t *direct_of;     /* by rank: 1 + its direct slot, 0 none; NULL: no direct rings */
	uint64_t src_word;      /* rank << 32: the second word of a TX record header */
	uint32_t rank, size, node;
	int dead;               /* the daemon went away or broke the protocol: error to return */
	int step_done;          /* steps: ferry_done called in the current one */
	uint32_t large_left;    /* the large item being sent: bytes of it still to go; 0: none */
	int sock;
	int efd_client, efd_daemon, efd_coll;
	int epfd;               /* ferry_fd(): efd_client, efd_coll and sock together */
	void *region;
	size_t region_bytes;
	struct ring tx, rx;
	uint32_t rx_dense_at;   /* items of the DENSE record at the RX tail handed out (recv.c) */
	struct direct *dr;      /* NULL: no direct rings */
	int timeout_ms;
	unsigned flags;
	unsigned spin_us;       /* spin this long before sleeping (poll_setup) */
	unsigned spin_polls;    /* ... giving the CPU up every this many polls (spin_turn) */
	int shares_cores;       /* the daemon may run on our cores (poll_setup) */
	pid_t daemon_pid;       /* ferryd's, from its messages' credentials; 0: unknown */
	int outstanding;        /* the last ferry_recv handed out items, not released yet */
	uint32_t want_room;     /* payload bytes of the record ferry_send last refused */
	struct dring *want_dr;  /* ... and the direct ring that refused it; NULL: the TX ring */
	uint64_t flushed_head;  /* the TX ring's head after the last FLUSH (ferry_flush) */
	uint64_t checked_ns;    /* when an empty ferry_recv last asked the socket */
	uint32_t empty_calls;   /* ... and how many empty calls were made since */
	int armed;              /* rx consumer_sleeping set by a ferry_recv that found nothing */
	uint8_t in[512];        /* partial control message from the daemon */
	size_t in_len;
	struct reasm *reasm;    /* items being reassembled, by source */
	struct rxbuf *held;     /* reassembled buffers handed out by the last ferry_recv */
	size_t nheld, capheld;
	struct rxbuf *spare;    /* reassembly buffers kept for the next items (recv.c) */
	size_t nspare, capspare, spare_bytes;
	/* steps */
	uint32_t step;          /* the current step, from 1 */
	uint32_t completed;     /* last step the daemon said is complete */
	int failed;             /* the job can complete no more steps: -errno (a FAIL record) */
	char fail_text[192];    /* ... and what the daemon said happened */
	struct stashed *stash;  /* items copied out of the rings while waiting (recv.c "The stash") */
	size_t stash_head, stash_len, stash_cap;
	size_t stash_bytes;     /* payload bytes in the stash */
	struct stash_chunk *stash_chunk; /* the chunk small items are copied into now; NULL: none */
	/* The rest of a large item whose first piece is in the TX ring
	 * (send.c): it goes in as the ring makes room, before anything else
	 * is sent, so that ferry_send never waits without FERRY_BLOCKING. */
	uint8_t *large;         /* its bytes from the next piece on (and large_left, above) */
	uint32_t large_base;    /* offset in the item of large[0] */
	uint32_t large_at;      /* ... and of the next piece */
	uint32_t large_dst;
	uint16_t large_channel;
	int done_held;          /* ferry_done's DONE record, after all of that */
	/* FERRY_BATCH (send.c) */
	uint32_t batch_cap;     /* bytes of item records one batch holds */
	uint32_t *batch_open;   /* the ranks whose batch holds records */
	uint32_t nbatch_open;
	uint32_t recv_unflushed;        /* ferry_recv calls since batches were pushed */
	int tx_armed;           /* producer_waiting set for batches the ring had no room for */
	struct ring *armed_out; /* ... in this ring (out_arm) */
	/* collectives (coll.c) */
	uint32_t coll_seq;      /* operations posted */
	struct ferry_req *reqs; /* requests not yet freed by ferry_test/ferry_wait */
	/* the last operation seen to end well, and its time from post to
	 * then, which the next post reports (proto/ctl.h COLL prev_us); root
	 * handle only, seq 0: none */
	struct coll_report {
		uint32_t group, seq, us;
	} report;
	struct proto_done_shared *done; /* the done page, in region (proto/done.h) */
	uint32_t done_taken;    /* records taken from it (our count) */
	struct proto_post_shared *post; /* the post page, in region (proto/post.h); NULL: post on the socket */
	uint32_t post_sent;     /* slots written to it (our count) */
	uint32_t ctl_sent;      /* control messages sent on the socket since JOIN (ctl_send) */
	uint32_t sock_seen;     /* its sock_done when conn_check last read the socket */
	uint64_t sock_read_ns;  /* ... and when */
	int coll_armed;         /* done->armed set by us: who (coll.c ARMED_*) */
	uint64_t coll_reset_ns; /* when efd_coll was last reset */
	int coll_fd_stale;      /* disarmed since ferry_recv last reset efd_coll */
	uint32_t alltoall_alg;  /* ferry_coll_strategy / $FERRY_COLL_ALLTOALL: 0 automatic, else alg + 1 */
	uint32_t scatter_alg, gather_alg;       /* ... SCATTER, GATHER (enum ctl_rooted_alg + 1) */
	uint32_t phased_alg[CTL_COLL_EXSCAN - CTL_COLL_BCAST + 1];     /* ... bcast .. exscan, by kind */
	int coll_env_read;      /* ... the environment was read */
	/* groups (coll.c, ferry_split): a group's handle has its own rank,
	 * size, operation numbers and strategies, and shares everything else
	 * (the connection, the rings, the memory, the requests' list) with the
	 * job's handle, its root; only the collectives work on it. */
	uint32_t group;         /* 0: the job; else the group's id (coll_group_id) */
	uint32_t *members;      /* [size]: job rank by rank here; NULL: the job (identity) */
	uint32_t nsubs;         /* job handle: group handles not closed yet */
	uint32_t *layout;       /* job handle: rank -> node (LAYOUT), once asked; else NULL */
	/* memory shared with ferryd (mem.c) */
	struct fmem *mems;      /* every region, application's and staging */
	struct fmem *stage_free; /* a staging region no request uses, kept for the next */
	uint32_t mem_next_id;
};

/* A zeroed handle, its first cache line (the fields ferry_send's batched
 * fast path reads: above) on a line of its own; free() frees it. */
static inline struct ferry *handle_alloc(void)
{
	size_t n = (sizeof(struct ferry) + 63) & ~(size_t)63;
	struct ferry *f = aligned_alloc(64, n);

	if (f)
		memset(f, 0, n);
	return f;
}

/* Items for one destination rank (FERRY_BATCH): fill bytes at buf (NULL
 * until the first item), either a dense batch's payload (key != 0:
 * proto/ring.h "Dense batches"; its header's count is written when it
 * leaves) or item records, as they will lie in the receiver's RX ring
 * (key 0).  send.c "FERRY_BATCH" says which when. */
struct batch {
	uint32_t fill;
	uint32_t open_idx;      /* where the rank is in batch_open while fill > 0 */
	uint8_t *buf;
	uint32_t key;           /* dense: BATCH_DENSE_KEY(L, channel) of its items; 0: records */
	uint32_t room;          /* dense: items it may take still */
	uint32_t count;         /* dense: items it holds */
	uint32_t run_key;       /* records: BATCH_DENSE_KEY of the last records' shape, */
	uint32_t run;           /* and how many of them in a row end it */
};

/* The ring toward rank dst: its direct ring, or NULL for the TX ring. */
static inline struct dring *direct_to(const struct ferry *f, uint32_t dst)
{
	if (!f->direct_of || !f->direct_of[dst])
		return NULL;
	return &f->dr->out[f->direct_of[dst] - 1];
}

/* The ring the last refused record waits for room in. */
static inline struct ring *want_ring(struct ferry *f)
{
	return f->want_dr ? &f->want_dr->r : &f->tx;
}

/* --- conn.c: errors, the environment, the control socket --- */

/* Sets this thread's ferry_last_error() text; returns err, so that a caller
 * can fail with `return conn_seterr(-E..., ...)`. */
int conn_seterr(int err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Empties ferry_last_error(), for a call that starts afresh. */
void conn_clearerr(void);

/* Reads the decimal environment variable name (0 to FERRY_MAX_RANKS) into
 * *out.  Returns 1, 0 if it is unset or empty, -1 if it is not such a number. */
int conn_env_int(const char *name, int *out);

/* Rank and size from the launcher's environment, first match wins:
 * FERRY_RANK/FERRY_SIZE, Open MPI's OMPI_COMM_WORLD_RANK/SIZE, then Slurm's
 * SLURM_PROCID/SLURM_NTASKS in a job step that srun started (not in a batch
 * script or an allocation's shell, which have no SLURM_STEP_ID).  Returns 0
 * or -EINVAL with ferry_last_error() saying what is missing. */
int conn_ranks_from_env(int *rank, int *size);

/* The job name from the environment into buf (len bytes), from the same
 * launcher as the ranks: FERRY_JOB, PMIX_NAMESPACE under Open MPI's
 * launcher, slurm-$SLURM_JOB_ID.$SLURM_STEP_ID in an srun step, then
 * PMIX_NAMESPACE.  Returns 0 or -EINVAL. */
int conn_job_from_env(char *buf, size_t len);

/* Connects f->sock to ferryd.sock in dir.  Returns 0 or -errno, with a
 * message that says what to check. */
int conn_connect(struct ferry *f, const char *dir);

/* File descriptors a control message may carry: CTL_DIRECT's. */
#define CONN_MAX_FDS (1 + (int)PROTO_DIRECT_MAX)

/* Reads until one whole control message is buffered, or timeout_ms passes
 * (-1: forever).  Collects fds that came with it into fds (room for
 * CONN_MAX_FDS).
 * Returns the message length (consume with conn_drop_msg), or -errno. */
int conn_read_msg(struct ferry *f, struct ctl_msg *m, int *fds, int *nfds, int timeout_ms);

/* Consumes the len bytes of the message conn_read_msg returned. */
void conn_drop_msg(struct ferry *f, int len);

/* After READY the daemon talks on the socket only to say that a collective
 * operation ended (COLL_DONE: coll_done takes it) or, before it closes the
 * connection, what went wrong (ERROR).  Takes every message that came, and
 * returns 0, or the error that ended the session (then also in f->dead). */
int conn_check(struct ferry *f);

/* Sleeps until the daemon signals efd_client, the socket says something, or
 * timeout_ms passes (-1: forever).  Returns 0, -ETIMEDOUT, or the error that
 * ended the session. */
int conn_wait(struct ferry *f, int timeout_ms);

/* Inline: ferry_send's fast path wakes the daemon without a call. */
static inline void conn_wake(int efd)
{
	uint64_t one = 1;
	ssize_t n = write(efd, &one, sizeof(one));

	(void)n;        /* EAGAIN: the counter is huge, the daemon wakes anyway */
}

/* --- mem.c --- */

struct fmem;
struct ctl_buf;

/* If [p, p + len) lies in a ferry_alloc region: its place there into *b,
 * and 1; else 0. */
int mem_ref(struct ferry *f, const void *p, size_t len, struct ctl_buf *b);
/* A staging region of at least bytes for one request (the kept one if it
 * is large enough): 0 or -errno. */
int stage_get(struct ferry *f, size_t bytes, struct fmem **m_p, uint8_t **base_p, uint32_t *id_p);
/* The request is done with it (NULL: nothing). */
void stage_put(struct ferry *f, struct fmem *m);
/* For closing: unmaps every region. */
void mem_free_all(struct ferry *f);

/* --- coll.c --- */

/* The daemon says operation seq ended (err 0 or a positive errno, text why).
 * Returns 0, or -EPROTO if no request of ours has that number. */
int coll_done(struct ferry *f, uint32_t group, uint32_t seq, int err, const char *text);
/* Requests not yet freed (ferry_close refuses while there are). */
/* 1 if requests of handle f (a job's or a group's) are not freed yet. */
int coll_outstanding(const struct ferry *f);
/* Sends the n-byte control message at buf on rf's socket after JOIN (with
 * file descriptor fd, unless -1): first waits until ferryd took what was
 * posted on the post page (proto/post.h), so that it reads both in the
 * order they were sent, and counts it in ctl_sent.  0, or rf->dead (set
 * with "ferryd went away (WHAT: why)" if the send failed). */
int ctl_send(struct ferry *rf, const void *buf, size_t n, int fd, const char *what);

/* For ferry_recv's reset of ferry_fd(): resets efd_coll if no collective
 * is armed (coll.c). */
void coll_fd_recheck(struct ferry *rf);
/* ferry_close of a group's handle (f->root set). */
int group_close(struct ferry *f);
/* Posts operation c (its group and seq filled in here) and makes its
 * request, which owns stage (NULL: none) and when it succeeds copies len
 * bytes from `from` (in stage) to recvbuf (NULL: nothing to copy out).
 * 0 or -errno (then stage is given back). */
struct fmem;
struct ctl_coll_wire;
int coll_post_staged(struct ferry *f, struct ctl_coll_wire *c, ferry_req_t **req_p, struct fmem *stage,
		     void *recvbuf, const uint8_t *from, size_t len);
/* Reads $FERRY_COLL_* once per handle: 0, or -EINVAL for a name that is
 * no algorithm. */
int coll_read_env(struct ferry *f);
/* The bytes counts[r] at displs[r] reach over all ranks (0 if none), or
 * SIZE_MAX if they wrap. */
size_t coll_extent(const struct ferry *f, const size_t *counts, const size_t *displs);
/* The algorithm f's ranks force for operations of kind (COLL strategy: 0
 * automatic, else the algorithm + 1). */
uint32_t coll_alg_of(const struct ferry *f, uint32_t kind);

/* The job's handle of f (f itself, or a group's root). */
static inline struct ferry *froot(const struct ferry *f)
{
	return f->root ? f->root : (struct ferry *)f;
}

/* Item streams and steps are the job's handle's: on a group's handle they
 * are refused (README, "Groups"). */
#define NOT_ON_GROUP(f)                                                                              \
	do {                                                                                         \
		if ((f)->root)                                                                       \
			return conn_seterr(-EOPNOTSUPP, "items and steps use the job's handle, not a " \
					   "group's (ferry_split)");                                  \
	} while (0)

/* --- poll.c --- */

/* Once connected: whether the daemon may run on the cores this process
 * runs on (f->shares_cores: it does unless both affinity masks say
 * otherwise), and how long the library spins before it sleeps (f->spin_us):
 * $FERRY_SPIN_US if set, else a short while if the daemon has cores of its
 * own, else not at all (spinning would take the CPU from the daemon we wait
 * for). */
void poll_setup(struct ferry *f);

/* One poll of a spin (ferry_recv, ferry_poll): the CPU is given up
 * (sched_yield) every f->spin_polls polls.  That is every poll where our
 * affinity allows one CPU, whose time whoever we wait for may need; else
 * every SPIN_POLLS polls: an item that comes meanwhile is seen at once, not
 * after a system call (a same-node ping-pong on two cores took 0.5 us one
 * way yielding at every poll, against 0.1 for a raw ring that spins). */
#define SPIN_POLLS 32
static inline void spin_turn(struct ferry *f, unsigned *polls)
{
	if (++*polls >= f->spin_polls) {
		*polls = 0;
		sched_yield();
	}
}

/* For a call that found f->armed set (ferry_recv armed ferry_fd()) and may
 * have cleared the RX flag or read the eventfd since: arms them again, and
 * makes the fd readable if records came meanwhile. */
void poll_rearm(struct ferry *f);

/* --- send.c --- */

/* For ferry_close: what the process holds and a FLUSH record, as room
 * comes, then a wait until the daemon has taken every TX record, all within
 * timeout_ms (-1: forever), dropping what arrives meanwhile.  Returns 0 or
 * -errno. */
int tx_drain(struct ferry *f, int timeout_ms);

/* Output the process still holds: the rest of a large item, open batches
 * (FERRY_BATCH), the DONE of ferry_done. */
static inline int out_pending(const struct ferry *f)
{
	return f->large_left != 0 || f->nbatch_open != 0 || f->done_held;
}

/* Hands what out_pending says to the daemon (block: waiting for room in
 * the TX ring, else as much as fits now): the rest of a large item first,
 * then every open batch.  Returns 0 when nothing is left, -EAGAIN when the
 * ring had no room (f->want_room says how much it needs), or the error
 * that ended the session. */
int out_flush(struct ferry *f, int block);

/* For a call about to sleep until the daemon wakes it, or to tell the
 * application that there is nothing to receive: out_flush without
 * waiting, and if something stays for want of room, sets the TX ring's
 * producer_waiting so that room wakes us too (ferry_fd() included;
 * f->tx_armed, which out_disarm clears).  Returns 1 if the caller must not
 * sleep (room came, or output left), 0 to sleep, or an error. */
int out_arm(struct ferry *f);
void out_disarm(struct ferry *f);

/* Frees the batches. */
void batch_free(struct ferry *f);

/* --- recv.c --- */

/* The receiving side's rings (RX, and the direct rings toward us): records
 * waiting (one relaxed load per ring); about to sleep (sets the consumers'
 * flags, fences, and returns 1 if records came meanwhile, the flags cleared
 * again); awake (flags cleared). */
int rx_readable(const struct ferry *f);
/* A writer's half of a withdrawal (proto/ring.h): answers every reader of
 * ours (ferryd for the TX ring, the ranks of our direct rings) that
 * withdrew its offer, so that it need not wait for our next item to stop
 * running membarrier.  Called where no publish of ours is under way:
 * before each wait, and at the end. */
void answer_withdrawals(struct ferry *f);
int rx_sleep(struct ferry *f);
void rx_awake(struct ferry *f);

/* Copies what can be read now into the stash (which ferry_recv returns
 * first) and gives the room back: for waits that must keep the rings
 * moving.  Only while the application holds no items (f->outstanding).
 * Returns 0 or -errno. */
int rx_stash(struct ferry *f);
/* While the application holds items: the same for the direct rings the
 * last ferry_recv did not read (dr->touched), whose room can go back
 * without moving what the application holds.  rx_sleep_some: rx_sleep for
 * the direct rings not in skip (bit j: in[j]) and, if with_rx, the RX
 * ring. */
int rx_stash_direct(struct ferry *f);
int rx_sleep_some(struct ferry *f, uint64_t skip, int with_rx);

/* Frees what the receiving side keeps: items being reassembled, held[] and
 * the stash.  For closing, after ferry_release. */
void rx_free(struct ferry *f);

/* For closing: takes whatever the RX ring holds and drops it. */
void rx_discard(struct ferry *f);

/* What poll() is to wait for a deadline (proto_now_ms() time): -1 (for ever)
 * if forever, else the milliseconds left, 0 once it passed.  The clock is
 * read once: read twice, a millisecond ticking past the deadline between the
 * reads made the difference wrap around and the wait endless. */
static inline int conn_wait_ms(uint64_t deadline, int forever)
{
	uint64_t now = proto_now_ms();

	if (forever)
		return -1;
	return deadline > now ? (int)(deadline - now) : 0;
}

#endif
