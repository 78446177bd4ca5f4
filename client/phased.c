/* client/phased.c - broadcast, the reductions, allgather and scans (the
 * collectives of seeds 002 and 004, README "Reductions"): posting them to
 * ferryd, which runs them node-level; requests, waiting and completion are
 * coll.c's.
 *
 * Each operation is one COLL message (proto/ctl.h, kinds BCAST .. EXSCAN):
 * what the rank sends, the buffer it receives into, and per-rank numbers
 * (vec) where the operation has them.  Buffers in ferry_alloc memory are
 * read and written in place; others go through the handle's staging
 * region: copied in when posted (a receive buffer too where parts of it
 * must stay as they were: allgatherv's gaps, exscan's rank 0) and out when
 * the operation completes.  FERRY_IN_PLACE is the client's business: the
 * input, in the receive buffer, is copied into the staging region and
 * posted as the send buffer (the daemons' schedules never read and write
 * one buffer, daemon/plan/sched.h), as for the all-to-all.
 */
#include "internal.h"
#include "../proto/coll.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* One operation as posted: send (slen bytes; NULL when the rank sends
 * nothing; in place: its input, inside recv), recv (rlen bytes the daemon
 * may write; recv_in: some of them must stay as they were), vec (nvec u64
 * per-rank numbers). */
struct phased {
	uint32_t kind, root, flags;
	uint64_t count;
	const void *send;
	size_t slen;
	void *recv;
	size_t rlen;
	int recv_in, in_place;
	const uint64_t *vec;
	size_t nvec;
};

static int post_phased(ferry_t *f, const struct phased *a, ferry_req_t **req_p)
{
	struct ctl_coll_wire c = { .kind = a->kind, .root = a->root, .flags = a->flags, .count = a->count };
	int stage_send, stage_recv, ret;
	size_t vlen = 8 * a->nvec, need, off;
	struct fmem *stage = NULL;
	uint8_t *base = NULL;
	uint32_t id = 0;

	if (a->recv == FERRY_IN_PLACE || a->send == FERRY_IN_PLACE)
		return conn_seterr(-EINVAL, "FERRY_IN_PLACE where it means nothing (it is for sendbuf of allreduce, "
				   "allgather(v), reduce_scatter(_block), scan, exscan, and of reduce at the root)");
	if (a->slen && !a->send)
		return conn_seterr(-EINVAL, "no send buffer");
	if (a->rlen && !a->recv)
		return conn_seterr(-EINVAL, "no receive buffer");
	c.strategy = coll_alg_of(f, a->kind);
	stage_send = a->slen && (a->in_place || !mem_ref(froot(f), a->send, a->slen, &c.send));
	stage_recv = a->rlen && !mem_ref(froot(f), a->recv, a->rlen, &c.recv);
	if (__builtin_add_overflow(vlen, stage_send ? a->slen : 0, &need) ||
	    __builtin_add_overflow(need, stage_recv ? a->rlen : 0, &need))
		return conn_seterr(-EINVAL, "buffers of %zu and %zu bytes: too many to stage", a->slen, a->rlen);
	if (need && (ret = stage_get(froot(f), need, &stage, &base, &id)) < 0)
		return ret;
	if (vlen) {
		memcpy(base, a->vec, vlen);
		c.vec = (struct ctl_buf){ .mem = id, .off = 0, .len = vlen };
	}
	off = vlen;
	if (stage_send) {
		memcpy(base + off, a->send, a->slen);
		c.send = (struct ctl_buf){ .mem = id, .off = off, .len = a->slen };
		off += a->slen;
	}
	if (stage_recv) {
		if (a->recv_in)
			memcpy(base + off, a->recv, a->rlen);
		c.recv = (struct ctl_buf){ .mem = id, .off = off, .len = a->rlen };
	}
	return coll_post_staged(f, &c, req_p, stage, stage_recv ? a->recv : NULL, stage_recv ? base + off : NULL,
				a->rlen);
}

/* FERRY_IN_PLACE as a's send buffer: the input is at off in recvbuf. */
static void in_place(struct phased *a, void *recvbuf, size_t off)
{
	if (a->send != FERRY_IN_PLACE)
		return;
	a->send = recvbuf ? (uint8_t *)recvbuf + off : NULL;
	a->in_place = 1;
}

/* Checks what every operation checks before anything is posted. */
static int start(ferry_t *f, ferry_req_t **req_p)
{
	conn_clearerr();
	if (req_p)
		*req_p = NULL;
	return coll_read_env(f);
}

static int root_ok(const ferry_t *f, uint32_t root)
{
	if (root >= f->size)
		return conn_seterr(-EINVAL, "root %u: the %s has %u ranks", root, f->root ? "group" : "job", f->size);
	return 0;
}

/* The bytes of n elements of type with op, into *bytes_p, and the flags
 * naming them: 0, or -EINVAL. */
static int elements(uint32_t type, uint32_t op, size_t n, size_t *bytes_p, uint32_t *flags_p)
{
	if (!coll_op_ok(type, op))
		return conn_seterr(-EINVAL, "operation %u on type %u: no such pair (DESIGN: bit and logical "
				   "operations are for the integer types)", op, type);
	if (__builtin_mul_overflow(n, coll_type_size(type), bytes_p))
		return conn_seterr(-EINVAL, "%zu elements: too many bytes", n);
	*flags_p = type << CTL_COLL_TYPE_SHIFT | op << CTL_COLL_OP_SHIFT;
	return 0;
}

FERRY_API int ferry_ibcast(ferry_t *f, void *buf, size_t bytes, uint32_t root, ferry_req_t **req_p)
{
	struct phased a = { .kind = CTL_COLL_BCAST, .root = root, .count = bytes };
	int ret;

	if ((ret = start(f, req_p)) < 0 || (ret = root_ok(f, root)) < 0)
		return ret;
	if (f->rank == root) {
		a.send = buf;
		a.slen = bytes;
	} else {
		a.recv = buf;
		a.rlen = bytes;
	}
	return post_phased(f, &a, req_p);
}

FERRY_API int ferry_ireduce(ferry_t *f, const void *sendbuf, void *recvbuf, size_t count, enum ferry_type type,
			    enum ferry_op op, uint32_t root, ferry_req_t **req_p)
{
	struct phased a = { .kind = CTL_COLL_REDUCE, .root = root, .count = count, .send = sendbuf };
	size_t bytes;
	int ret;

	if ((ret = start(f, req_p)) < 0 || (ret = root_ok(f, root)) < 0 ||
	    (ret = elements(type, op, count, &bytes, &a.flags)) < 0)
		return ret;
	if (sendbuf == FERRY_IN_PLACE && f->rank != root)
		return conn_seterr(-EINVAL, "FERRY_IN_PLACE is for the root's send buffer only");
	in_place(&a, recvbuf, 0);
	a.slen = bytes;
	if (f->rank == root) {
		a.recv = recvbuf;
		a.rlen = bytes;
	}
	return post_phased(f, &a, req_p);
}

/* allreduce, scan and exscan: count elements in, count out. */
static int post_elementwise(ferry_t *f, uint32_t kind, const void *sendbuf, void *recvbuf, size_t count,
			    enum ferry_type type, enum ferry_op op, ferry_req_t **req_p)
{
	struct phased a = { .kind = kind, .count = count, .send = sendbuf, .recv = recvbuf };
	size_t bytes;
	int ret;

	if ((ret = start(f, req_p)) < 0 || (ret = elements(type, op, count, &bytes, &a.flags)) < 0)
		return ret;
	in_place(&a, recvbuf, 0);
	a.slen = a.rlen = bytes;
	/* (exscan leaves rank 0's receive buffer as it was) */
	a.recv_in = kind == CTL_COLL_EXSCAN && f->rank == 0;
	return post_phased(f, &a, req_p);
}

FERRY_API int ferry_iallreduce(ferry_t *f, const void *sendbuf, void *recvbuf, size_t count, enum ferry_type type,
			       enum ferry_op op, ferry_req_t **req_p)
{
	return post_elementwise(f, CTL_COLL_ALLREDUCE, sendbuf, recvbuf, count, type, op, req_p);
}

FERRY_API int ferry_iscan(ferry_t *f, const void *sendbuf, void *recvbuf, size_t count, enum ferry_type type,
			  enum ferry_op op, ferry_req_t **req_p)
{
	return post_elementwise(f, CTL_COLL_SCAN, sendbuf, recvbuf, count, type, op, req_p);
}

FERRY_API int ferry_iexscan(ferry_t *f, const void *sendbuf, void *recvbuf, size_t count, enum ferry_type type,
			    enum ferry_op op, ferry_req_t **req_p)
{
	return post_elementwise(f, CTL_COLL_EXSCAN, sendbuf, recvbuf, count, type, op, req_p);
}

/* reduce_scatter(_block): the input is total elements, this rank's result
 * mine (in place: the input in recvbuf, the result at its start). */
static int post_rs(ferry_t *f, struct phased *a, size_t total, size_t mine, uint32_t type, uint32_t op,
		   ferry_req_t **req_p)
{
	size_t in, out;
	int ret;

	if ((ret = elements(type, op, total, &in, &a->flags)) < 0 || (ret = elements(type, op, mine, &out, &a->flags)) < 0)
		return ret;
	in_place(a, a->recv, 0);
	a->slen = in;
	a->rlen = out;
	return post_phased(f, a, req_p);
}

FERRY_API int ferry_ireduce_scatter_block(ferry_t *f, const void *sendbuf, void *recvbuf, size_t count_per_rank,
					  enum ferry_type type, enum ferry_op op, ferry_req_t **req_p)
{
	struct phased a = { .kind = CTL_COLL_REDUCE_SCATTER_BLOCK, .count = count_per_rank, .send = sendbuf,
			    .recv = recvbuf };
	size_t total;
	int ret;

	if ((ret = start(f, req_p)) < 0)
		return ret;
	if (__builtin_mul_overflow(count_per_rank, (size_t)f->size, &total))
		return conn_seterr(-EINVAL, "%zu elements per rank: too many", count_per_rank);
	return post_rs(f, &a, total, count_per_rank, type, op, req_p);
}

FERRY_API int ferry_ireduce_scatter(ferry_t *f, const void *sendbuf, void *recvbuf, const size_t *recvcounts,
				    enum ferry_type type, enum ferry_op op, ferry_req_t **req_p)
{
	struct phased a = { .kind = CTL_COLL_REDUCE_SCATTER, .send = sendbuf, .recv = recvbuf, .nvec = f->size };
	uint64_t *vec;
	size_t total = 0;
	int ret;

	if ((ret = start(f, req_p)) < 0)
		return ret;
	if (!recvcounts)
		return conn_seterr(-EINVAL, "no counts");
	for (uint32_t r = 0; r < f->size; r++)
		if (__builtin_add_overflow(total, recvcounts[r], &total))
			return conn_seterr(-EINVAL, "the counts add up to too many elements");
	if (!(vec = malloc(8 * (size_t)f->size)))
		return conn_seterr(-ENOMEM, "out of memory for the counts");
	for (uint32_t r = 0; r < f->size; r++)
		vec[r] = recvcounts[r];
	a.vec = vec;
	ret = post_rs(f, &a, total, recvcounts[f->rank], type, op, req_p);
	free(vec);
	return ret;
}

FERRY_API int ferry_iallgather(ferry_t *f, const void *sendbuf, void *recvbuf, size_t block, ferry_req_t **req_p)
{
	struct phased a = { .kind = CTL_COLL_ALLGATHER, .count = block, .send = sendbuf, .recv = recvbuf };
	int ret;

	if ((ret = start(f, req_p)) < 0)
		return ret;
	if (__builtin_mul_overflow(block, (size_t)f->size, &a.rlen))
		return conn_seterr(-EINVAL, "blocks of %zu bytes for %u ranks: too many bytes", block, f->size);
	in_place(&a, recvbuf, (size_t)f->rank * block);
	a.slen = block;
	return post_phased(f, &a, req_p);
}

FERRY_API int ferry_iallgatherv(ferry_t *f, const void *sendbuf, size_t sendbytes, void *recvbuf,
				const size_t *recvcounts, const size_t *rdispls, ferry_req_t **req_p)
{
	struct phased a = { .kind = CTL_COLL_ALLGATHERV, .count = sendbytes, .send = sendbuf, .recv = recvbuf,
			    .nvec = 2 * (size_t)f->size, .recv_in = 1 };
	uint64_t *vec;
	int ret;

	if ((ret = start(f, req_p)) < 0)
		return ret;
	if (!recvcounts || !rdispls)
		return conn_seterr(-EINVAL, "no counts or displacements");
	if ((a.rlen = coll_extent(f, recvcounts, rdispls)) == SIZE_MAX)
		return conn_seterr(-EINVAL, "a displacement plus its count wraps around");
	if (sendbuf == FERRY_IN_PLACE)
		a.count = sendbytes = recvcounts[f->rank];
	in_place(&a, recvbuf, rdispls[f->rank]);
	a.slen = sendbytes;
	if (!(vec = malloc(8 * a.nvec)))
		return conn_seterr(-ENOMEM, "out of memory for the counts");
	for (uint32_t r = 0; r < f->size; r++) {
		vec[r] = recvcounts[r];
		vec[f->size + r] = rdispls[r];
	}
	a.vec = vec;
	ret = post_phased(f, &a, req_p);
	free(vec);
	return ret;
}

/* --- the blocking forms: post, then wait --- */

static int wait_posted(int ret, ferry_req_t **r)
{
	return ret < 0 ? ret : ferry_wait(r);
}

FERRY_API int ferry_bcast(ferry_t *f, void *buf, size_t bytes, uint32_t root)
{
	ferry_req_t *r;

	return wait_posted(ferry_ibcast(f, buf, bytes, root, &r), &r);
}

FERRY_API int ferry_reduce(ferry_t *f, const void *sendbuf, void *recvbuf, size_t count, enum ferry_type type,
			   enum ferry_op op, uint32_t root)
{
	ferry_req_t *r;

	return wait_posted(ferry_ireduce(f, sendbuf, recvbuf, count, type, op, root, &r), &r);
}

FERRY_API int ferry_allreduce(ferry_t *f, const void *sendbuf, void *recvbuf, size_t count, enum ferry_type type,
			      enum ferry_op op)
{
	ferry_req_t *r;

	return wait_posted(ferry_iallreduce(f, sendbuf, recvbuf, count, type, op, &r), &r);
}

FERRY_API int ferry_scan(ferry_t *f, const void *sendbuf, void *recvbuf, size_t count, enum ferry_type type,
			 enum ferry_op op)
{
	ferry_req_t *r;

	return wait_posted(ferry_iscan(f, sendbuf, recvbuf, count, type, op, &r), &r);
}

FERRY_API int ferry_exscan(ferry_t *f, const void *sendbuf, void *recvbuf, size_t count, enum ferry_type type,
			   enum ferry_op op)
{
	ferry_req_t *r;

	return wait_posted(ferry_iexscan(f, sendbuf, recvbuf, count, type, op, &r), &r);
}

FERRY_API int ferry_reduce_scatter_block(ferry_t *f, const void *sendbuf, void *recvbuf, size_t count_per_rank,
					 enum ferry_type type, enum ferry_op op)
{
	ferry_req_t *r;

	return wait_posted(ferry_ireduce_scatter_block(f, sendbuf, recvbuf, count_per_rank, type, op, &r), &r);
}

FERRY_API int ferry_reduce_scatter(ferry_t *f, const void *sendbuf, void *recvbuf, const size_t *recvcounts,
				   enum ferry_type type, enum ferry_op op)
{
	ferry_req_t *r;

	return wait_posted(ferry_ireduce_scatter(f, sendbuf, recvbuf, recvcounts, type, op, &r), &r);
}

FERRY_API int ferry_allgather(ferry_t *f, const void *sendbuf, void *recvbuf, size_t block)
{
	ferry_req_t *r;

	return wait_posted(ferry_iallgather(f, sendbuf, recvbuf, block, &r), &r);
}

FERRY_API int ferry_allgatherv(ferry_t *f, const void *sendbuf, size_t sendbytes, void *recvbuf,
			       const size_t *recvcounts, const size_t *rdispls)
{
	ferry_req_t *r;

	return wait_posted(ferry_iallgatherv(f, sendbuf, sendbytes, recvbuf, recvcounts, rdispls, &r), &r);
}
