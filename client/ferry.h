/* ferry.h - libferry, the client library of the ferry cluster communication
 * service.  The only installed header.
 *
 * An application process opens an endpoint in a job, then sends items
 * (destination rank, channel, bytes) and receives items.  Items go through
 * shared-memory rings to the node's ferryd, which combines the items of all
 * local processes into network frames and forwards them.
 *
 *   ferry_t *f;
 *   int ret = ferry_open(&f, NULL);          // job, rank and size from the environment
 *   if (ret < 0) { fprintf(stderr, "%s\n", ferry_last_error()); exit(1); }
 *   ferry_send(f, (ferry_rank(f) + 1) % ferry_size(f), 0, "hi", 2);
 *   ferry_done(f);                           // this rank's part of the step is sent
 *   ferry_step_wait(f, -1);                  // every rank's items have arrived
 *   struct ferry_item it[16];
 *   int n = ferry_recv(f, it, 16, 1000);     // it[i].data valid until ferry_release
 *   ferry_release(f);
 *   ferry_close(f);
 *
 * Every function returns 0 (or a count) on success and a negative errno value
 * on failure; ferry_strerror() turns it into text and ferry_last_error() gives
 * the detailed message of the last failure in this thread.
 *
 * Ordering: items from one sender to one receiver arrive in the order they were
 * sent, exactly once.  A handle is not thread-safe: use one per thread, or lock.
 */
#ifndef FERRY_H
#define FERRY_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define FERRY_VERSION_MAJOR 0
#define FERRY_VERSION_MINOR 1

/* Largest item ferry_send accepts: 4 MiB.  Items above 64 KiB travel in pieces
 * and are reassembled before ferry_recv returns them. */
#define FERRY_MAX_ITEM   (4u * 1024 * 1024)
/* Largest channel number. */
#define FERRY_MAX_CHANNEL 65535u
/* Largest job: ranks 0 .. FERRY_MAX_RANKS-1. */
#define FERRY_MAX_RANKS  (1u << 20)

typedef struct ferry ferry_t;

/* ferry_opts.flags */
/* FERRY_BLOCKING: ferry_send waits for ring room instead of -EAGAIN.  It does
 * not receive meanwhile (except that, waiting for a rank on the same node,
 * it keeps up to 16 MiB of what arrives in the library, from the rings the
 * items of the last ferry_recv do not lie in: README, "Direct rings"):
 * where every rank sends to every other rank and receives only between
 * sends, receivers whose rings are full can stop the senders for good.
 * Such programs use ferry_poll instead.  Sending to itself with its own
 * ring full while holding items of the last ferry_recv fails with
 * -EDEADLK (release them first). */
#define FERRY_BLOCKING  0x1u
/* FERRY_BATCH: items of up to FERRY_BATCH_ITEM bytes are kept in this
 * process, per destination rank, and handed to ferryd a batch at a time: a
 * fraction of the cost per item in ferry_send and in every daemon on the
 * way (README, "Batches").  Order and exactly-once delivery are as without
 * it.  An item leaves the process when its rank's batch is full, or when
 * the program runs out of other things to do: ferry_recv finding nothing to
 * receive (and every 16th ferry_recv that does), ferry_poll, ferry_flush,
 * ferry_done, ferry_close.  A program that sends and then waits for
 * something outside libferry calls ferry_flush first. */
#define FERRY_BATCH     0x2u
#define FERRY_BATCH_ITEM 256u

struct ferry_opts {
	const char *job;        /* job name; NULL: $FERRY_JOB, then under
				 * mpirun $PMIX_NAMESPACE, then in an srun step
				 * slurm-$SLURM_JOB_ID.$SLURM_STEP_ID, then
				 * $PMIX_NAMESPACE (README, "Launching") */
	int rank;               /* this process's rank (used when size > 0) */
	int size;               /* ranks in the job; 0: rank and size come from
				 * $FERRY_RANK/$FERRY_SIZE, then
				 * $OMPI_COMM_WORLD_RANK/$OMPI_COMM_WORLD_SIZE, then in
				 * an srun step $SLURM_PROCID/$SLURM_NTASKS */
	int timeout_ms;         /* how long ferry_open waits for all ranks to join;
				 * 0: $FERRY_TIMEOUT_MS, else 60000; < 0: forever */
	const char *runtime_dir;/* where ferryd's socket is; NULL: $FERRY_RUNTIME_DIR,
				 * else /run/ferry */
	unsigned flags;         /* FERRY_BLOCKING, FERRY_BATCH */
};

/* One received item.  data points into shared memory (or, for items above
 * 64 KiB, a buffer of the library) and stays valid until ferry_release(),
 * the next ferry_recv() or ferry_step_wait() (which receives while it
 * waits), or ferry_close() on the same handle. */
struct ferry_item {
	const void *data;
	uint32_t len;
	uint32_t src;           /* sender's rank */
	uint16_t channel;
};

/* Connects to the local ferryd, joins the job and waits until every rank of
 * the job has joined (or opts->timeout_ms passes: -ETIMEDOUT).  opts may be
 * NULL (everything from the environment).  On success *f_p owns the endpoint.
 * Errors: -ENOENT / -ECONNREFUSED no daemon; -EINVAL bad rank, size or job
 * name; -EADDRINUSE rank already attached; -ETIMEDOUT ranks missing;
 * -EPROTO daemon speaks another protocol. */
int ferry_open(ferry_t **f_p, const struct ferry_opts *opts);

/* Sends what is still in the ring, waits until the daemon has taken it (at
 * most the open timeout), and frees everything.  Returns 0, or -ETIMEDOUT /
 * -ECONNRESET if items may not have reached the daemon.  f is freed either
 * way, except with collective requests not yet freed by ferry_test or
 * ferry_wait: then it returns -EBUSY and closes nothing. */
int ferry_close(ferry_t *f);

int ferry_rank(const ferry_t *f);
int ferry_size(const ferry_t *f);

/* Copies an item for rank dst on channel into the TX ring.  Returns 0;
 * -EAGAIN when the ring is full (try again after receiving: the daemon is
 * applying backpressure) unless FERRY_BLOCKING; -EINVAL bad rank or channel;
 * -EMSGSIZE len > FERRY_MAX_ITEM; -ECONNRESET the daemon went away.
 * Items above 64 KiB: once the first piece is in, the call returns; the
 * library keeps a copy of the rest and hands it over as the ring makes room
 * (in later calls: ferry_send says -EAGAIN until it is all in).  With
 * FERRY_BLOCKING the call waits for room for the rest instead. */
int ferry_send(ferry_t *f, uint32_t dst, uint32_t channel, const void *buf, size_t len);

/* Asks the daemon to send everything this endpoint has sent so far without
 * waiting for aggregation buffers to fill, after handing over what the
 * process still holds (FERRY_BATCH's batches, the rest of a large item).
 * Returns 0 or -errno: -EAGAIN (without FERRY_BLOCKING) when the ring had
 * no room for all of that, some of which is then still in the process:
 * call it again, or wait in ferry_poll, which hands it over as room
 * comes. */
int ferry_flush(ferry_t *f);

/* Receives up to max items, waiting up to timeout_ms (0: do not wait, < 0:
 * forever) for the first one.  Returns the number of items (0 on timeout) or
 * -errno.  Releases the items of the previous call first. */
int ferry_recv(ferry_t *f, struct ferry_item *items, int max, int timeout_ms);

/* Ends the validity of the items ferry_recv returned, giving their space back. */
void ferry_release(ferry_t *f);

/* Steps.  ferry_done says this rank sends no more items in the current step;
 * ferry_step_wait returns once every rank of the job has called ferry_done and
 * every item sent in the step has been delivered to its destination's RX ring
 * (0), or after timeout_ms (-ETIMEDOUT; < 0 waits forever; call it again to
 * keep waiting).  Items that arrive meanwhile are kept by the library and
 * returned by the following ferry_recv calls, in order.  Between ferry_done and
 * the return of ferry_step_wait, ferry_send returns -EBUSY.  Steps repeat:
 * the next ferry_send starts the next step.  ferry_done returns -EALREADY if
 * called twice in a step; ferry_step_wait -EINVAL without ferry_done.
 * ferry_done never waits: what it cannot hand over now for want of room
 * (its DONE record last) ferry_step_wait hands over, receiving meanwhile
 * (ferry_recv and ferry_poll also do when they find nothing to receive).
 * A step that can never complete fails instead of waiting for ever:
 * ferry_step_wait returns -EPIPE when a rank left the job (within about 2 s
 * of its exit), -EHOSTDOWN when a node or link the job needs was lost (a
 * daemon restarted, or a link its items or control messages take has been
 * down for 2 s after it was noticed), with ferry_last_error() naming the
 * rank, node or link; so do the steps after it.  Every rank of the job
 * completes the same steps before the failure, except the ranks of a node
 * cut off from the job's home node (which may miss the last one).
 * Items from the ranks still there keep arriving through ferry_recv. */
int ferry_done(ferry_t *f);
int ferry_step_wait(ferry_t *f, int timeout_ms);

/* ferry_poll events */
#define FERRY_POLLIN  0x1u      /* ferry_recv has something to return (or a step
				 * ended, or the job failed) */
#define FERRY_POLLOUT 0x2u      /* ferry_send would not say -EAGAIN: there is room
				 * for an item as long as the last one it refused
				 * (any small item if none was refused) */

/* Waits until one of events is ready or timeout_ms passes (0: do not wait,
 * < 0: forever), without using the CPU: the daemon wakes the caller when it
 * takes items out of the TX ring or delivers some.  Returns the events that
 * are ready (0 on timeout), or -errno (-ECONNRESET: the daemon went away).
 * The loop of an application that streams items (README, "Sending and
 * receiving"):
 *
 *   while (!finished) {
 *       int ret = 0;
 *       while (have_item && (ret = ferry_send(f, dst, ch, buf, len)) == 0) ...;
 *       n = ferry_recv(f, it, 256, 0);       // cheap when nothing came
 *       ... use it[0..n-1], then ferry_release(f) ...
 *       if (n == 0 && (ret == -EAGAIN || !have_item))   // nothing to do
 *           ferry_poll(f, FERRY_POLLIN | (have_item ? FERRY_POLLOUT : 0), -1);
 *   }
 *
 * Items of the last ferry_recv not yet released keep their room in the RX
 * ring: release them before waiting for FERRY_POLLIN, or a full ring can
 * keep what is to come out for good.  ferry_poll leaves ferry_fd() armed as
 * ferry_recv left it.
 *
 * Waiting this way matters where the application shares cores with ferryd:
 * a process spinning on -EAGAIN takes the CPU from the daemon that would
 * make room. */
int ferry_poll(ferry_t *f, unsigned events, int timeout_ms);

/* A file descriptor that becomes readable when items may have arrived, for
 * poll/epoll loops.  It is armed by a ferry_recv that returns 0 items: call
 * ferry_recv until it returns 0, then wait on the fd.  It also becomes
 * readable when a collective request ends after a ferry_test said it was
 * pending, or fails (see "Collective operations" for the rule). */
int ferry_fd(const ferry_t *f);

/* --- Collective operations (DESIGN.md "Collectives"; README "Collectives") ---
 *
 * Run by the daemons, node-level: ferryd waits until every rank of the job
 * on its node has posted an operation, runs it with the other nodes' daemons
 * while the application goes on, and tells each rank when it ended.  Every
 * rank of the job posts the same collectives in the same order.  They are
 * independent of items and steps: a barrier neither flushes nor orders
 * items (steps do that), and collectives may run between ferry_done and
 * ferry_step_wait.  A collective that cannot complete fails on every rank
 * instead of waiting for ever: -EPIPE when a rank left the job,
 * -EHOSTDOWN when a node or link was lost, -EINVAL when the ranks posted
 * different operations, with ferry_last_error() saying why; the job is then
 * broken (its steps fail too).  ferry_fd() becomes readable when a request
 * completes after a ferry_test of it said it was pending (that call arms
 * the fd for collectives, as an empty ferry_recv does for items, until no
 * request is pending).  Any ferry_test or ferry_wait takes the news of
 * every request that ended, and ferry_recv and ferry_send may take a
 * failure's off the socket, so a program that waits on ferry_fd() calls
 * ferry_test on each of its outstanding requests before it waits (as it
 * calls ferry_recv until it returns 0).
 * A handle has at most FERRY_COLL_MAX_PENDING requests not yet
 * freed by ferry_test or ferry_wait: posting another says -EAGAIN. */
typedef struct ferry_req ferry_req_t;
#define FERRY_COLL_MAX_PENDING 64

#define FERRY_IN_PLACE ((void *)1)

/* Returns when every rank of the job has entered the barrier: 0 or -errno. */
int ferry_barrier(ferry_t *f);
/* The same, non-blocking: *req_p is the request, for ferry_test/ferry_wait. */
int ferry_ibarrier(ferry_t *f, ferry_req_t **req_p);

/* Every rank sends block bytes to every rank: sendbuf holds size blocks,
 * the one for rank r at r x block; recvbuf gets size blocks, the one from
 * rank r at r x block.  sendbuf may be FERRY_IN_PLACE: recvbuf's blocks
 * are sent and replaced.  Every rank passes the same block (else -EINVAL
 * on every rank).  Buffers in memory from ferry_alloc are read and written
 * by the daemon in place; others are copied into shared memory when the
 * operation is posted and out of it when it completes (the non-blocking
 * form: when ferry_test or ferry_wait says it did).  The algorithm (direct,
 * mesh, grid3d, hypercube: README, "Collectives") is the one the cost model
 * predicts fastest, or the one ferry_coll_strategy or $FERRY_COLL_ALLTOALL
 * forces (every rank must force the same). */
int ferry_alltoall(ferry_t *f, const void *sendbuf, void *recvbuf, size_t block);
int ferry_ialltoall(ferry_t *f, const void *sendbuf, void *recvbuf, size_t block, ferry_req_t **req_p);

/* The same with a count and a displacement (bytes) per rank, each array
 * indexed by rank: sendcounts[r] bytes at sdispls[r] go to rank r,
 * recvcounts[r] bytes from rank r land at rdispls[r].  Zero counts make a
 * many-to-many; the counts rank a sends rank b and b expects from a must
 * agree (else -EINVAL on every rank).  With FERRY_IN_PLACE as sendbuf,
 * recvbuf's blocks as recvcounts and rdispls place them are sent.  The
 * arrays are read before the call returns.  The automatic choice of
 * algorithm is the one for small blocks (no node knows all the sizes). */
int ferry_alltoallv(ferry_t *f, const void *sendbuf, const size_t *sendcounts, const size_t *sdispls,
		    void *recvbuf, const size_t *recvcounts, const size_t *rdispls);
int ferry_ialltoallv(ferry_t *f, const void *sendbuf, const size_t *sendcounts, const size_t *sdispls,
		     void *recvbuf, const size_t *recvcounts, const size_t *rdispls, ferry_req_t **req_p);

/* Scatter: the root's sendbuf holds size blocks, the one for rank r at
 * r x block; every rank gets its block in recvbuf (block bytes).  Gather:
 * every rank's block (sendbuf, block bytes) lands in the root's recvbuf at
 * rank x block.  Only the root's sendbuf (scatter) or recvbuf (gather) is
 * read; elsewhere it may be NULL.  At the root, FERRY_IN_PLACE as recvbuf
 * (scatter) or sendbuf (gather) leaves its own block where it is; at
 * another rank it is -EINVAL.  Every rank passes the same block and root
 * (else -EINVAL on every rank).  The daemons combine the blocks of each
 * node's ranks into one message per node (README, "Scatter and gather").
 * Buffers as for ferry_alltoall (ferry_alloc memory in place, others
 * copied). */
int ferry_scatter(ferry_t *f, const void *sendbuf, void *recvbuf, size_t block, uint32_t root);
int ferry_iscatter(ferry_t *f, const void *sendbuf, void *recvbuf, size_t block, uint32_t root,
		   ferry_req_t **req_p);
int ferry_gather(ferry_t *f, const void *sendbuf, void *recvbuf, size_t block, uint32_t root);
int ferry_igather(ferry_t *f, const void *sendbuf, void *recvbuf, size_t block, uint32_t root,
		  ferry_req_t **req_p);

/* The same with a count and a displacement (bytes) per rank at the root
 * (read there only, before the call returns): rank r gets sendcounts[r]
 * bytes at sdispls[r] and passes recvbytes, which must be sendcounts[r]
 * (else -EINVAL on every rank); the root receives recvcounts[r] bytes
 * from rank r at rdispls[r], and rank r passes sendbytes, which must be
 * recvcounts[r]. */
int ferry_scatterv(ferry_t *f, const void *sendbuf, const size_t *sendcounts, const size_t *sdispls,
		   void *recvbuf, size_t recvbytes, uint32_t root);
int ferry_iscatterv(ferry_t *f, const void *sendbuf, const size_t *sendcounts, const size_t *sdispls,
		    void *recvbuf, size_t recvbytes, uint32_t root, ferry_req_t **req_p);
int ferry_gatherv(ferry_t *f, const void *sendbuf, size_t sendbytes, void *recvbuf, const size_t *recvcounts,
		  const size_t *rdispls, uint32_t root);
int ferry_igatherv(ferry_t *f, const void *sendbuf, size_t sendbytes, void *recvbuf, const size_t *recvcounts,
		   const size_t *rdispls, uint32_t root, ferry_req_t **req_p);

/* Element types and reduction operations (values fixed; append only). */
enum ferry_type { FERRY_BYTE = 0, FERRY_INT8 = 1, FERRY_UINT8 = 2, FERRY_INT16 = 3, FERRY_UINT16 = 4,
		  FERRY_INT32 = 5, FERRY_UINT32 = 6, FERRY_INT64 = 7, FERRY_UINT64 = 8,
		  FERRY_FLOAT = 9, FERRY_DOUBLE = 10 };
enum ferry_op { FERRY_SUM = 0, FERRY_PROD = 1, FERRY_MIN = 2, FERRY_MAX = 3, FERRY_BAND = 4,
		FERRY_BOR = 5, FERRY_BXOR = 6, FERRY_LAND = 7, FERRY_LOR = 8, FERRY_LXOR = 9 };

/* Broadcast: the root's bytes at buf reach every rank's buf. */
int ferry_bcast(ferry_t *f, void *buf, size_t bytes, uint32_t root);
int ferry_ibcast(ferry_t *f, void *buf, size_t bytes, uint32_t root, ferry_req_t **req_p);

/* The reductions: count elements of type combined element by element with
 * op (sum, prod, min and max for every type; band, bor, bxor, land, lor
 * and lxor for the integer types and FERRY_BYTE: else -EINVAL).  Integer
 * arithmetic wraps around; FERRY_BYTE is unsigned.  Floating-point results
 * are bitwise identical on every rank of an operation and the same run to
 * run for the same algorithm, group and placement (README, "Reductions").
 * FERRY_IN_PLACE as sendbuf: the input is in recvbuf (reduce: at the root
 * only).  Every rank passes the same count, type, op and root (else
 * -EINVAL on every rank). */
int ferry_reduce(ferry_t *f, const void *sendbuf, void *recvbuf, size_t count, enum ferry_type type,
		 enum ferry_op op, uint32_t root);
int ferry_ireduce(ferry_t *f, const void *sendbuf, void *recvbuf, size_t count, enum ferry_type type,
		  enum ferry_op op, uint32_t root, ferry_req_t **req_p);
int ferry_allreduce(ferry_t *f, const void *sendbuf, void *recvbuf, size_t count, enum ferry_type type,
		    enum ferry_op op);
int ferry_iallreduce(ferry_t *f, const void *sendbuf, void *recvbuf, size_t count, enum ferry_type type,
		     enum ferry_op op, ferry_req_t **req_p);
/* Rank r gets count_per_rank elements, those from r x count_per_rank of the
 * reduction of every rank's size x count_per_rank (in place: the result at
 * the start of recvbuf). */
int ferry_reduce_scatter_block(ferry_t *f, const void *sendbuf, void *recvbuf, size_t count_per_rank,
			       enum ferry_type type, enum ferry_op op);
int ferry_ireduce_scatter_block(ferry_t *f, const void *sendbuf, void *recvbuf, size_t count_per_rank,
				enum ferry_type type, enum ferry_op op, ferry_req_t **req_p);
/* The same with recvcounts[r] elements for rank r (the same array on every
 * rank; the input is their sum). */
int ferry_reduce_scatter(ferry_t *f, const void *sendbuf, void *recvbuf, const size_t *recvcounts,
			 enum ferry_type type, enum ferry_op op);
int ferry_ireduce_scatter(ferry_t *f, const void *sendbuf, void *recvbuf, const size_t *recvcounts,
			  enum ferry_type type, enum ferry_op op, ferry_req_t **req_p);
/* Prefix reductions in rank order: rank r gets ranks 0..r's (scan) or
 * 0..r-1's (exscan; rank 0's recvbuf is left as it was). */
int ferry_scan(ferry_t *f, const void *sendbuf, void *recvbuf, size_t count, enum ferry_type type,
	       enum ferry_op op);
int ferry_iscan(ferry_t *f, const void *sendbuf, void *recvbuf, size_t count, enum ferry_type type,
		enum ferry_op op, ferry_req_t **req_p);
int ferry_exscan(ferry_t *f, const void *sendbuf, void *recvbuf, size_t count, enum ferry_type type,
		 enum ferry_op op);
int ferry_iexscan(ferry_t *f, const void *sendbuf, void *recvbuf, size_t count, enum ferry_type type,
		  enum ferry_op op, ferry_req_t **req_p);

/* Allgather: every rank's block of block bytes, in rank order, in every
 * rank's recvbuf (size x block); FERRY_IN_PLACE as sendbuf: the rank's own
 * block is in recvbuf already, at its place.  allgatherv: rank r sends
 * sendbytes, which must be recvcounts[r], and every rank receives it at
 * rdispls[r] (bytes; the same arrays on every rank); what lies between the
 * blocks stays as it was. */
int ferry_allgather(ferry_t *f, const void *sendbuf, void *recvbuf, size_t block);
int ferry_iallgather(ferry_t *f, const void *sendbuf, void *recvbuf, size_t block, ferry_req_t **req_p);
int ferry_allgatherv(ferry_t *f, const void *sendbuf, size_t sendbytes, void *recvbuf, const size_t *recvcounts,
		     const size_t *rdispls);
int ferry_iallgatherv(ferry_t *f, const void *sendbuf, size_t sendbytes, void *recvbuf, const size_t *recvcounts,
		      const size_t *rdispls, ferry_req_t **req_p);

/* Groups.  Collective over f: every rank with the same color gets a handle
 * *sub_p whose ranks are f's ranks of that color, ordered by (key, rank in
 * f); color < 0 gives *sub_p = NULL.  The daemons run a group's
 * collectives among the group's nodes only, numbered by the group (its
 * ranks post them in the same order), independent of f's and of other
 * groups'.  ferry_rank and ferry_size of a group's handle are the group's;
 * ferry_alloc and ferry_fd are its job's.  A group's handle is for
 * collectives: ferry_send, ferry_recv, ferry_flush, ferry_poll, ferry_done
 * and ferry_step_wait on it say -EOPNOTSUPP (items and steps use the job's
 * handle and job ranks: README, "Groups").  ferry_close(sub) leaves the
 * group: its operations this rank did not post fail on the others with
 * -EPIPE; ferry_close of the job's handle says -EBUSY while a group's
 * handle made from it (or from its groups) is open.  A group is split
 * further like the job's handle.  0 or -errno (the exchange's error, which
 * every rank of f gets). */
int ferry_split(ferry_t *f, int color, int key, ferry_t **sub_p);
/* The node (its id in ferry.conf) that f's rank runs on, or -errno. */
int ferry_node_of(const ferry_t *f, uint32_t rank);
/* f's ranks on this node, in rank order: up to max of them into ranks;
 * returns how many there are (which may be more than max), or -errno. */
int ferry_local_ranks(const ferry_t *f, uint32_t *ranks, int max);

/* Forces the algorithm of collective op: "alltoall" (and "alltoallv"):
 * "direct", "mesh", "grid3d", "hypercube"; "scatter" or "gather" (their v
 * forms alike): "direct", "opt", "sdf" (a physical torus: README, "Scatter
 * and gather"), "orth", "tree"; NULL or "auto" for the automatic choice.
 * Every rank must force the same.  0 or -EINVAL. */
int ferry_coll_strategy(ferry_t *f, const char *op, const char *algorithm);

/* Memory the daemon reads and writes directly (no copy): bytes of it into
 * *p_p, shared with this process's ferryd.  Any pointer inside it counts
 * as such a buffer.  0 or -errno.  ferry_free gives it back (p as
 * ferry_alloc returned it; an operation that still uses it keeps the
 * daemon's mapping). */
int ferry_alloc(ferry_t *f, size_t bytes, void **p_p);
void ferry_free(ferry_t *f, void *p);

/* 0: pending; 1: done, or *req_p is NULL (the request is freed and *req_p
 * set to NULL); -errno: it failed (freed too). */
int ferry_test(ferry_req_t **req_p);
/* Waits until the request ended: 0 or -errno; frees it, *req_p = NULL. */
int ferry_wait(ferry_req_t **req_p);
/* Waits for n requests (NULL entries are skipped): 0, or the first error;
 * frees them all. */
int ferry_waitall(int n, ferry_req_t **reqs);

/* Text for a negative errno value returned by this library. */
const char *ferry_strerror(int err);

/* Detailed message of the last failure in this thread ("" if none). */
const char *ferry_last_error(void);

#ifdef __cplusplus
}
#endif

#endif
