/* client/mpi/coll.c - the collectives of MPI that ferry runs, blocking and
 * non-blocking (fmpi.h).  Each MPI_X and MPI_IX share one function, which
 * either posts ferry's non-blocking form (then waits for it, or makes the
 * program's request) or calls PMPI_X / PMPI_IX unchanged.
 *
 * What passes through, and why every rank agrees:
 *   - a communicator not on ferry (fmpi_comm: decided at its creation);
 *   - a reduction whose datatype is not a predefined one ferry has, or
 *     whose op is not a predefined one ferry has, or an op MPI does not
 *     define on that type (MPI then reports the error): MPI requires every
 *     rank to pass the same datatype and op to a reduction;
 *   - an invalid root, or a reduction's negative count (arguments MPI
 *     requires to be the same on every rank): MPI reports the error.
 * Data movement never passes through for its datatype: MPI lets ranks use
 * different datatypes with the same type signature, so a rank cannot
 * decide from its own.  A datatype whose elements are not contiguous bytes
 * is packed into a copy (struct side): the same bytes, in signature order.
 *
 * Errors one rank finds alone: a data-movement argument of its own (a
 * negative count, an invalid datatype, no counts array), or no memory for
 * a packed copy or a request.  Passing through to MPI on that rank alone
 * would leave the others, which posted to ferry, waiting for ever; agreeing
 * first (an allreduce per call) would cost every call a round trip and make
 * the non-blocking calls wait.  So the whole group fails instead, as ferry
 * fails it when a rank errs or leaves (DESIGN.md, "Collectives"): the rank
 * reports its error at once (op_error: MPI_ERR_COUNT, MPI_ERR_TYPE,
 * MPI_ERR_ARG, MPI_ERR_NO_MEM through the communicator's handler) and posts
 * a barrier of ours in the operation's place (fmpi_standin, req.c), which
 * the daemons find to differ from what the other ranks posted: their
 * operation fails with -EINVAL on every rank, and the group is broken
 * (later operations say -EPIPE), never hung, and every later operation
 * keeps its place in the order.  (Where every rank erred alike, the
 * stand-ins match and each rank has its error.)  A post that ferry refuses
 * locally later, from the queue, is replaced the same way (req.c).
 *
 * Ownership: an operation's sides (packed copies, byte arrays) belong to it
 * until it ended: to the caller for a blocking call, to its struct freq
 * (req.c) for a non-blocking one.
 */
#include "fmpi.h"

#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FMPI_API __attribute__((visibility("default")))

#define SIDE_READ  1    /* ferry reads it: pack a copy first */
#define SIDE_WRITE 2    /* ferry writes it: unpack the copy at the end */

/* --- buffers --- */

void side_free(struct side *s)
{
	free(s->tmp);
	free(s->ch);
	free(s->cnt);
	free(s->dsp);
	memset(s, 0, sizeof(*s));
}

void side_finish(struct side *s)
{
	int pos = 0;

	for (int i = 0; s->unpack && i < s->nch; i++)
		PMPI_Unpack(s->tmp, (int)s->tmp_bytes, &pos, s->ch[i].user, s->ch[i].count, s->type, MPI_COMM_WORLD);
	side_free(s);
}

/* Whether t's bytes are its typemap in signature order: a predefined type,
 * or a duplicate or contiguous run of one (a type that only moves its
 * elements, an indexed block {1, 0} of two ints, has a dense extent too,
 * but its signature's first element is the second int in memory: such a
 * one is packed). */
static int in_order(MPI_Datatype t, int depth)
{
	int ni, na, nd, comb, ints[1], r;
	MPI_Aint addrs[1];
	MPI_Datatype inner[1];

	if (PMPI_Type_get_envelope(t, &ni, &na, &nd, &comb) != MPI_SUCCESS)
		return 0;
	if (comb == MPI_COMBINER_NAMED)
		return 1;
	if ((comb != MPI_COMBINER_DUP && comb != MPI_COMBINER_CONTIGUOUS) || ni > 1 || na != 0 || nd != 1 ||
	    depth >= 8 || PMPI_Type_get_contents(t, ni, na, nd, ints, addrs, inner) != MPI_SUCCESS)
		return 0;
	r = in_order(inner[0], depth + 1);
	/* (a derived type get_contents returns is the caller's to free) */
	if (PMPI_Type_get_envelope(inner[0], &ni, &na, &nd, &comb) == MPI_SUCCESS && comb != MPI_COMBINER_NAMED)
		PMPI_Type_free(&inner[0]);
	return r;
}

/* Size, extent and whether count elements of t are count x size bytes in a
 * row from the buffer's address, in signature order; -EINVAL for an
 * invalid datatype. */
static int type_info(MPI_Datatype t, int *size_p, MPI_Aint *extent_p, int *contig_p)
{
	MPI_Aint lb, ext, tlb, text;
	int size;

	if (t == MPI_DATATYPE_NULL || PMPI_Type_size(t, &size) != MPI_SUCCESS ||
	    PMPI_Type_get_extent(t, &lb, &ext) != MPI_SUCCESS ||
	    PMPI_Type_get_true_extent(t, &tlb, &text) != MPI_SUCCESS)
		return -EINVAL;
	*size_p = size;
	*extent_p = ext;
	*contig_p = lb == 0 && tlb == 0 && ext == size && text == size && in_order(t, 0);
	return 0;
}

/* The side functions return 0 or the MPI error class of what is wrong
 * with this rank's arguments (or memory). */

/* Packs s's chunks (already in s->ch) of datatype t into s->tmp. */
static int side_pack(struct side *s, MPI_Datatype t, int size, int mode)
{
	int pos = 0;

	s->tmp_bytes = 0;
	for (int i = 0; i < s->nch; i++)
		s->tmp_bytes += (size_t)s->ch[i].count * (size_t)size;
	if (s->tmp_bytes > INT_MAX)
		return MPI_ERR_COUNT;   /* MPI_Pack counts bytes in an int */
	if (!(s->tmp = malloc(s->tmp_bytes ? s->tmp_bytes : 1)))
		return MPI_ERR_NO_MEM;
	s->type = t;
	s->unpack = !!(mode & SIDE_WRITE);
	for (int i = 0; (mode & SIDE_READ) && i < s->nch; i++)
		if (PMPI_Pack(s->ch[i].user, s->ch[i].count, t, s->tmp, (int)s->tmp_bytes, &pos, MPI_COMM_WORLD) !=
		    MPI_SUCCESS)
			return MPI_ERR_TYPE;
	s->p = s->tmp;
	return 0;
}

/* buf holds nblk blocks of count elements of t; s->bytes is one block's. */
static int side_block(struct side *s, const void *buf, int count, MPI_Datatype t, int nblk, int mode)
{
	MPI_Aint ext;
	int size, contig;

	if (count < 0)
		return MPI_ERR_COUNT;
	if (type_info(t, &size, &ext, &contig) < 0)
		return MPI_ERR_TYPE;
	s->bytes = (size_t)count * (size_t)size;
	if (contig || !s->bytes) {
		s->p = (char *)buf;
		return 0;
	}
	if (!(s->ch = malloc(sizeof(*s->ch))))
		return MPI_ERR_NO_MEM;
	s->nch = 1;
	s->ch[0] = (struct fchunk){ (char *)buf, count * nblk };
	return side_pack(s, t, size, mode);
}

/* buf holds counts[r] elements of t at displs[r] (in extents) for rank r.
 * A displacement may be negative (MPI's are relative to buf, anywhere in
 * the program's memory): ferry's are bytes from a base (size_t), so the
 * lowest address of a block becomes the base ferry sees. */
static int side_vec(struct side *s, const void *buf, const int *counts, const int *displs, MPI_Datatype t,
		    int n, int mode)
{
	MPI_Aint ext, lo = 0;
	size_t off = 0;
	int size, contig;

	if (type_info(t, &size, &ext, &contig) < 0)
		return MPI_ERR_TYPE;
	if (!counts || !displs)
		return MPI_ERR_ARG;
	for (int r = 0; r < n; r++) {
		if (counts[r] < 0)
			return MPI_ERR_COUNT;
		if (counts[r] > 0 && (MPI_Aint)displs[r] * ext < lo)
			lo = (MPI_Aint)displs[r] * ext;
	}
	s->cnt = malloc((size_t)n * sizeof(*s->cnt));
	s->dsp = malloc((size_t)n * sizeof(*s->dsp));
	if (!s->cnt || !s->dsp || (!contig && !(s->ch = malloc((size_t)n * sizeof(*s->ch)))))
		return MPI_ERR_NO_MEM;
	for (int r = 0; r < n; r++) {
		s->cnt[r] = (size_t)counts[r] * (size_t)size;
		if (contig) {
			/* (an empty block's displacement is no address) */
			s->dsp[r] = counts[r] ? (size_t)((MPI_Aint)displs[r] * ext - lo) : 0;
		} else {
			s->dsp[r] = off;
			off += s->cnt[r];
			s->ch[r] = (struct fchunk){ (char *)buf + (MPI_Aint)displs[r] * ext, counts[r] };
		}
	}
	if (contig) {
		s->p = (char *)buf + lo;
		return 0;
	}
	s->nch = n;
	return side_pack(s, t, size, mode);
}

/* --- reductions' types and ops --- */

enum tclass { T_INT, T_FLOAT, T_BYTE, T_BOOL };

static enum ferry_type int_type(size_t size, int is_signed)
{
	switch (size) {
	case 1: return is_signed ? FERRY_INT8 : FERRY_UINT8;
	case 2: return is_signed ? FERRY_INT16 : FERRY_UINT16;
	case 4: return is_signed ? FERRY_INT32 : FERRY_UINT32;
	default: return is_signed ? FERRY_INT64 : FERRY_UINT64;
	}
}

/* ferry's type for a predefined MPI datatype of a reduction, and the class
 * of operations MPI defines on it; 0, or -1 (not one ferry has). */
static int red_type(MPI_Datatype t, enum ferry_type *ft, enum tclass *cl)
{
	const struct { MPI_Datatype t; size_t size; int is_signed; } ints[] = {
		{ MPI_SIGNED_CHAR, 1, 1 }, { MPI_UNSIGNED_CHAR, 1, 0 },
		{ MPI_SHORT, sizeof(short), 1 }, { MPI_UNSIGNED_SHORT, sizeof(short), 0 },
		{ MPI_INT, sizeof(int), 1 }, { MPI_UNSIGNED, sizeof(int), 0 },
		{ MPI_LONG, sizeof(long), 1 }, { MPI_UNSIGNED_LONG, sizeof(long), 0 },
		{ MPI_LONG_LONG_INT, sizeof(long long), 1 }, { MPI_LONG_LONG, sizeof(long long), 1 },
		{ MPI_UNSIGNED_LONG_LONG, sizeof(long long), 0 },
		{ MPI_INT8_T, 1, 1 }, { MPI_UINT8_T, 1, 0 }, { MPI_INT16_T, 2, 1 }, { MPI_UINT16_T, 2, 0 },
		{ MPI_INT32_T, 4, 1 }, { MPI_UINT32_T, 4, 0 }, { MPI_INT64_T, 8, 1 }, { MPI_UINT64_T, 8, 0 },
		/* not MPI_OFFSET: Open MPI 4.1's min and max take it for
		 * unsigned; MPI runs it as it does */
		{ MPI_AINT, sizeof(MPI_Aint), 1 }, { MPI_COUNT, sizeof(MPI_Count), 1 },
	};

	for (size_t i = 0; i < sizeof(ints) / sizeof(ints[0]); i++)
		if (t == ints[i].t) {
			*ft = int_type(ints[i].size, ints[i].is_signed);
			*cl = T_INT;
			return 0;
		}
	if (t == MPI_FLOAT || t == MPI_DOUBLE) {
		*ft = t == MPI_FLOAT ? FERRY_FLOAT : FERRY_DOUBLE;
		*cl = T_FLOAT;
	} else if (t == MPI_BYTE) {
		*ft = FERRY_BYTE;
		*cl = T_BYTE;
	} else if (t == MPI_C_BOOL && sizeof(_Bool) == 1) {
		*ft = FERRY_UINT8;
		*cl = T_BOOL;
	} else {
		return -1;
	}
	return 0;
}

/* ferry's op for a predefined MPI op, if MPI defines it on class cl. */
static int red_op(MPI_Op op, enum tclass cl, enum ferry_op *fo)
{
	static const unsigned allowed[] = {
		[T_INT] = 0x3ff,                        /* all ten */
		[T_FLOAT] = 0x00f,                      /* sum prod min max */
		[T_BYTE] = 0x070,                       /* band bor bxor */
		[T_BOOL] = 0x380,                       /* land lor lxor */
	};
	const MPI_Op ops[] = { MPI_SUM, MPI_PROD, MPI_MIN, MPI_MAX, MPI_BAND, MPI_BOR, MPI_BXOR,
			       MPI_LAND, MPI_LOR, MPI_LXOR };

	for (unsigned i = 0; i < sizeof(ops) / sizeof(ops[0]); i++)
		if (op == ops[i]) {
			*fo = (enum ferry_op)i;   /* FERRY_SUM .. FERRY_LXOR in this order */
			return allowed[cl] & (1u << i) ? 0 : -1;
		}
	return -1;
}

/* --- one operation --- */

struct op {
	const char *name;
	struct fcomm *c;
	struct side s[2];
	MPI_Request *req;       /* NULL: blocking */
};

/* 1 if ferry runs it (o->c set), 0 if it passes through. */
static int op_begin(struct op *o, const char *name, const char *iname, MPI_Comm comm, MPI_Request *req)
{
	memset(o, 0, sizeof(*o));
	o->name = req ? iname : name;
	o->req = req;
	if (!(o->c = fmpi_comm(comm))) {
		fmpi_log(NULL, o->name, "MPI (%s)", fmpi_on() ? "communicator not on ferry" : "ferry not in use: MPI_Init says why");
		return 0;
	}
	return 1;
}

/* The call passes through, for a reason every rank shares. */
static int op_pass(struct op *o, const char *why)
{
	fmpi_log(o->c, o->name, "MPI (%s)", why);
	side_free(&o->s[0]);
	side_free(&o->s[1]);
	return 0;
}

/* An error this rank found alone (its own arguments, its memory): MPI's
 * error class cls through the communicator's handler, and a stand-in of
 * ours posted in the operation's place (fmpi_standin: the other ranks may
 * have posted theirs, and must not wait for ever). */
static int op_error(struct op *o, int cls)
{
	side_free(&o->s[0]);
	side_free(&o->s[1]);
	if (o->req)
		*o->req = MPI_REQUEST_NULL;
	fmpi_standin(o->c);
	return fmpi_error(o->c, o->name, cls, NULL);
}

/* cls from making a side: 1 to go on, or -1 with the call's result in
 * *mpi_ret (op_error). */
static int op_side(struct op *o, int cls, int *mpi_ret)
{
	if (cls == 0)
		return 1;
	*mpi_ret = op_error(o, cls);
	return -1;
}

/* Runs o on ferry with ferry's call a: queued on its communicator (req.c),
 * then waited for, or the program's request made. */
static int op_go(struct op *o, struct fargs a)
{
	struct freq *q, qb;
	int ret;

	fmpi_log(o->c, o->name, "ferry");
	if (!(q = o->req ? calloc(1, sizeof(*q)) : &qb))
		return op_error(o, MPI_ERR_NO_MEM);
	if (q == &qb)
		memset(q, 0, sizeof(*q));
	q->c = o->c;
	q->name = o->name;
	q->a = a;
	q->s[0] = o->s[0];
	q->s[1] = o->s[1];
	if (o->req) {
		if ((ret = fmpi_start(q, o->req)) == MPI_SUCCESS)
			return MPI_SUCCESS;
		free(q);
		return op_error(o, ret);
	}
	ret = fmpi_run(q);
	return ret < 0 ? fmpi_error(o->c, o->name, q->cls, q->why) : MPI_SUCCESS;
}

int fmpi_post(struct freq *q)
{
	const struct fargs *a = &q->a;
	ferry_t *f = q->c->f;
	ferry_req_t **r = &q->fr;

	switch (a->kind) {
	case K_BARRIER:
		return ferry_ibarrier(f, r);
	case K_BCAST:
		return ferry_ibcast(f, a->rb, a->n, a->root, r);
	case K_GATHER:
		return ferry_igather(f, a->sb, a->rb, a->n, a->root, r);
	case K_SCATTER:
		return ferry_iscatter(f, a->sb, a->rb, a->n, a->root, r);
	case K_ALLGATHER:
		return ferry_iallgather(f, a->sb, a->rb, a->n, r);
	case K_ALLTOALL:
		return ferry_ialltoall(f, a->sb, a->rb, a->n, r);
	case K_GATHERV:
		return ferry_igatherv(f, a->sb, a->n, a->rb, a->rcnt, a->rdsp, a->root, r);
	case K_SCATTERV:
		return ferry_iscatterv(f, a->sb, a->scnt, a->sdsp, a->rb, a->n, a->root, r);
	case K_ALLGATHERV:
		return ferry_iallgatherv(f, a->sb, a->n, a->rb, a->rcnt, a->rdsp, r);
	case K_ALLTOALLV:
		return ferry_ialltoallv(f, a->sb, a->scnt, a->sdsp, a->rb, a->rcnt, a->rdsp, r);
	case K_REDUCE:
		return ferry_ireduce(f, a->sb, a->rb, a->n, a->ft, a->fo, a->root, r);
	case K_ALLREDUCE:
		return ferry_iallreduce(f, a->sb, a->rb, a->n, a->ft, a->fo, r);
	case K_SCAN:
		return ferry_iscan(f, a->sb, a->rb, a->n, a->ft, a->fo, r);
	case K_EXSCAN:
		return ferry_iexscan(f, a->sb, a->rb, a->n, a->ft, a->fo, r);
	case K_RSB:
		return ferry_ireduce_scatter_block(f, a->sb, a->rb, a->n, a->ft, a->fo, r);
	case K_RS:
		return ferry_ireduce_scatter(f, a->sb, a->rb, a->rcnt, a->ft, a->fo, r);
	}
	return -EINVAL;
}

static void *in_place(const void *buf)
{
	return buf == MPI_IN_PLACE ? FERRY_IN_PLACE : (void *)buf;
}

static int bad_root(struct op *o, int root)
{
	return root < 0 || root >= o->c->size ? !op_pass(o, "invalid root: MPI's error") : 0;
}

/* --- the collectives --- */

static int barrier(MPI_Comm comm, MPI_Request *req)
{
	struct op o;

	if (!op_begin(&o, "MPI_Barrier", "MPI_Ibarrier", comm, req))
		return req ? PMPI_Ibarrier(comm, req) : PMPI_Barrier(comm);
	return op_go(&o, (struct fargs){ .kind = K_BARRIER });
}

static int bcast(void *buf, int count, MPI_Datatype t, int root, MPI_Comm comm, MPI_Request *req)
{
	struct op o;
	int k, ret = 0;

	if (op_begin(&o, "MPI_Bcast", "MPI_Ibcast", comm, req) && !bad_root(&o, root) &&
	    (k = op_side(&o, side_block(&o.s[0], buf, count, t, 1, o.c->rank == root ? SIDE_READ : SIDE_WRITE),
			 &ret)))
		return k < 0 ? ret : op_go(&o, (struct fargs){ .kind = K_BCAST, .rb = o.s[0].p, .n = o.s[0].bytes,
								   .root = (uint32_t)root });
	return req ? PMPI_Ibcast(buf, count, t, root, comm, req) : PMPI_Bcast(buf, count, t, root, comm);
}

static int gather(const void *sb, int sc, MPI_Datatype st, void *rb, int rc, MPI_Datatype rt, int root,
		  MPI_Comm comm, MPI_Request *req)
{
	struct op o;
	int k = 1, ret = 0, me, ip;

	if (op_begin(&o, "MPI_Gather", "MPI_Igather", comm, req) && !bad_root(&o, root)) {
		me = o.c->rank == root;
		ip = me && sb == MPI_IN_PLACE;
		if (me)
			k = op_side(&o, side_block(&o.s[1], rb, rc, rt, o.c->size, ip ? SIDE_READ | SIDE_WRITE : SIDE_WRITE),
				    &ret);
		if (k > 0 && !ip)
			k = op_side(&o, side_block(&o.s[0], sb, sc, st, 1, SIDE_READ), &ret);
		if (k)
			return k < 0 ? ret : op_go(&o, (struct fargs){ .kind = K_GATHER,
				.sb = ip ? FERRY_IN_PLACE : o.s[0].p, .rb = o.s[1].p,
				.n = ip ? o.s[1].bytes : o.s[0].bytes, .root = (uint32_t)root });
	}
	return req ? PMPI_Igather(sb, sc, st, rb, rc, rt, root, comm, req) :
		PMPI_Gather(sb, sc, st, rb, rc, rt, root, comm);
}

static int scatter(const void *sb, int sc, MPI_Datatype st, void *rb, int rc, MPI_Datatype rt, int root,
		   MPI_Comm comm, MPI_Request *req)
{
	struct op o;
	int k = 1, ret = 0, me, ip;

	if (op_begin(&o, "MPI_Scatter", "MPI_Iscatter", comm, req) && !bad_root(&o, root)) {
		me = o.c->rank == root;
		ip = me && rb == MPI_IN_PLACE;
		if (me)
			k = op_side(&o, side_block(&o.s[0], sb, sc, st, o.c->size, SIDE_READ), &ret);
		if (k > 0 && !ip)
			k = op_side(&o, side_block(&o.s[1], rb, rc, rt, 1, SIDE_WRITE), &ret);
		if (k)
			return k < 0 ? ret : op_go(&o, (struct fargs){ .kind = K_SCATTER,
				.sb = o.s[0].p, .rb = ip ? FERRY_IN_PLACE : o.s[1].p,
				.n = me ? o.s[0].bytes : o.s[1].bytes, .root = (uint32_t)root });
	}
	return req ? PMPI_Iscatter(sb, sc, st, rb, rc, rt, root, comm, req) :
		PMPI_Scatter(sb, sc, st, rb, rc, rt, root, comm);
}

static int allgather(const void *sb, int sc, MPI_Datatype st, void *rb, int rc, MPI_Datatype rt, MPI_Comm comm,
		     MPI_Request *req)
{
	struct op o;
	int k, ret = 0, ip = sb == MPI_IN_PLACE;

	if (op_begin(&o, "MPI_Allgather", "MPI_Iallgather", comm, req) &&
	    (k = op_side(&o, side_block(&o.s[1], rb, rc, rt, o.c->size, ip ? SIDE_READ | SIDE_WRITE : SIDE_WRITE),
			 &ret)) &&
	    (k < 0 || ip || (k = op_side(&o, side_block(&o.s[0], sb, sc, st, 1, SIDE_READ), &ret))))
		return k < 0 ? ret : op_go(&o, (struct fargs){ .kind = K_ALLGATHER,
			.sb = ip ? FERRY_IN_PLACE : o.s[0].p, .rb = o.s[1].p, .n = o.s[1].bytes });
	return req ? PMPI_Iallgather(sb, sc, st, rb, rc, rt, comm, req) :
		PMPI_Allgather(sb, sc, st, rb, rc, rt, comm);
}

static int alltoall(const void *sb, int sc, MPI_Datatype st, void *rb, int rc, MPI_Datatype rt, MPI_Comm comm,
		    MPI_Request *req)
{
	struct op o;
	int k, ret = 0, ip = sb == MPI_IN_PLACE;

	if (op_begin(&o, "MPI_Alltoall", "MPI_Ialltoall", comm, req) &&
	    (k = op_side(&o, side_block(&o.s[1], rb, rc, rt, o.c->size, ip ? SIDE_READ | SIDE_WRITE : SIDE_WRITE),
			 &ret)) &&
	    (k < 0 || ip || (k = op_side(&o, side_block(&o.s[0], sb, sc, st, o.c->size, SIDE_READ), &ret))))
		return k < 0 ? ret : op_go(&o, (struct fargs){ .kind = K_ALLTOALL,
			.sb = ip ? FERRY_IN_PLACE : o.s[0].p, .rb = o.s[1].p, .n = o.s[1].bytes });
	return req ? PMPI_Ialltoall(sb, sc, st, rb, rc, rt, comm, req) :
		PMPI_Alltoall(sb, sc, st, rb, rc, rt, comm);
}

static int gatherv(const void *sb, int sc, MPI_Datatype st, void *rb, const int *rcs, const int *rds,
		   MPI_Datatype rt, int root, MPI_Comm comm, MPI_Request *req)
{
	struct op o;
	int k = 1, ret = 0, me, ip;

	if (op_begin(&o, "MPI_Gatherv", "MPI_Igatherv", comm, req) && !bad_root(&o, root)) {
		me = o.c->rank == root;
		ip = me && sb == MPI_IN_PLACE;
		if (me)
			k = op_side(&o, side_vec(&o.s[1], rb, rcs, rds, rt, o.c->size,
						 ip ? SIDE_READ | SIDE_WRITE : SIDE_WRITE), &ret);
		if (k > 0 && !ip)
			k = op_side(&o, side_block(&o.s[0], sb, sc, st, 1, SIDE_READ), &ret);
		if (k)
			return k < 0 ? ret : op_go(&o, (struct fargs){ .kind = K_GATHERV,
				.sb = ip ? FERRY_IN_PLACE : o.s[0].p, .n = ip ? o.s[1].cnt[root] : o.s[0].bytes,
				.rb = o.s[1].p, .rcnt = o.s[1].cnt, .rdsp = o.s[1].dsp, .root = (uint32_t)root });
	}
	return req ? PMPI_Igatherv(sb, sc, st, rb, rcs, rds, rt, root, comm, req) :
		PMPI_Gatherv(sb, sc, st, rb, rcs, rds, rt, root, comm);
}

static int scatterv(const void *sb, const int *scs, const int *sds, MPI_Datatype st, void *rb, int rc,
		    MPI_Datatype rt, int root, MPI_Comm comm, MPI_Request *req)
{
	struct op o;
	int k = 1, ret = 0, me, ip;

	if (op_begin(&o, "MPI_Scatterv", "MPI_Iscatterv", comm, req) && !bad_root(&o, root)) {
		me = o.c->rank == root;
		ip = me && rb == MPI_IN_PLACE;
		if (me)
			k = op_side(&o, side_vec(&o.s[0], sb, scs, sds, st, o.c->size, SIDE_READ), &ret);
		if (k > 0 && !ip)
			k = op_side(&o, side_block(&o.s[1], rb, rc, rt, 1, SIDE_WRITE), &ret);
		if (k)
			return k < 0 ? ret : op_go(&o, (struct fargs){ .kind = K_SCATTERV,
				.sb = o.s[0].p, .scnt = o.s[0].cnt, .sdsp = o.s[0].dsp,
				.rb = ip ? FERRY_IN_PLACE : o.s[1].p, .n = ip ? o.s[0].cnt[root] : o.s[1].bytes,
				.root = (uint32_t)root });
	}
	return req ? PMPI_Iscatterv(sb, scs, sds, st, rb, rc, rt, root, comm, req) :
		PMPI_Scatterv(sb, scs, sds, st, rb, rc, rt, root, comm);
}

static int allgatherv(const void *sb, int sc, MPI_Datatype st, void *rb, const int *rcs, const int *rds,
		      MPI_Datatype rt, MPI_Comm comm, MPI_Request *req)
{
	struct op o;
	int k, ret = 0, ip = sb == MPI_IN_PLACE;

	if (op_begin(&o, "MPI_Allgatherv", "MPI_Iallgatherv", comm, req) &&
	    (k = op_side(&o, side_vec(&o.s[1], rb, rcs, rds, rt, o.c->size, ip ? SIDE_READ | SIDE_WRITE : SIDE_WRITE),
			 &ret)) &&
	    (k < 0 || ip || (k = op_side(&o, side_block(&o.s[0], sb, sc, st, 1, SIDE_READ), &ret))))
		return k < 0 ? ret : op_go(&o, (struct fargs){ .kind = K_ALLGATHERV,
			.sb = ip ? FERRY_IN_PLACE : o.s[0].p, .n = ip ? o.s[1].cnt[o.c->rank] : o.s[0].bytes,
			.rb = o.s[1].p, .rcnt = o.s[1].cnt, .rdsp = o.s[1].dsp });
	return req ? PMPI_Iallgatherv(sb, sc, st, rb, rcs, rds, rt, comm, req) :
		PMPI_Allgatherv(sb, sc, st, rb, rcs, rds, rt, comm);
}

static int alltoallv(const void *sb, const int *scs, const int *sds, MPI_Datatype st, void *rb, const int *rcs,
		     const int *rds, MPI_Datatype rt, MPI_Comm comm, MPI_Request *req)
{
	struct op o;
	int k, ret = 0, ip = sb == MPI_IN_PLACE;

	if (op_begin(&o, "MPI_Alltoallv", "MPI_Ialltoallv", comm, req) &&
	    (k = op_side(&o, side_vec(&o.s[1], rb, rcs, rds, rt, o.c->size, ip ? SIDE_READ | SIDE_WRITE : SIDE_WRITE),
			 &ret)) &&
	    (k < 0 || ip || (k = op_side(&o, side_vec(&o.s[0], sb, scs, sds, st, o.c->size, SIDE_READ), &ret))))
		return k < 0 ? ret : op_go(&o, (struct fargs){ .kind = K_ALLTOALLV,
			.sb = ip ? FERRY_IN_PLACE : o.s[0].p, .scnt = ip ? o.s[1].cnt : o.s[0].cnt,
			.sdsp = ip ? o.s[1].dsp : o.s[0].dsp, .rb = o.s[1].p, .rcnt = o.s[1].cnt, .rdsp = o.s[1].dsp });
	return req ? PMPI_Ialltoallv(sb, scs, sds, st, rb, rcs, rds, rt, comm, req) :
		PMPI_Alltoallv(sb, scs, sds, st, rb, rcs, rds, rt, comm);
}

/* The reductions: 1 with *ft and *fo when ferry runs it, else 0 (logged). */
static int red_ok(struct op *o, int count, MPI_Datatype t, MPI_Op op, enum ferry_type *ft, enum ferry_op *fo)
{
	char why[MPI_MAX_OBJECT_NAME + 64] = "", tn[MPI_MAX_OBJECT_NAME] = "?";
	enum tclass cl;
	int len;

	if (count < 0)
		return op_pass(o, "negative count: MPI's error");
	if (red_type(t, ft, &cl) == 0 && red_op(op, cl, fo) == 0)
		return 1;
	if (fmpi_log_on) {
		if (PMPI_Type_get_name(t, tn, &len) != MPI_SUCCESS || !tn[0])
			snprintf(tn, sizeof(tn), "a derived datatype");
		snprintf(why, sizeof(why), "%s %s", red_type(t, ft, &cl) < 0 ? "datatype not one ferry reduces:" :
			 "op not a predefined one ferry has for", tn);
	}
	return op_pass(o, why);
}

enum red_kind { R_REDUCE, R_ALLREDUCE, R_SCAN, R_EXSCAN, R_RSB };

static int reduction(enum red_kind kind, const void *sb, void *rb, int count, MPI_Datatype t, MPI_Op op, int root,
		     MPI_Comm comm, MPI_Request *req)
{
	static const char *const names[][2] = {
		[R_REDUCE] = { "MPI_Reduce", "MPI_Ireduce" },
		[R_ALLREDUCE] = { "MPI_Allreduce", "MPI_Iallreduce" },
		[R_SCAN] = { "MPI_Scan", "MPI_Iscan" },
		[R_EXSCAN] = { "MPI_Exscan", "MPI_Iexscan" },
		[R_RSB] = { "MPI_Reduce_scatter_block", "MPI_Ireduce_scatter_block" },
	};
	enum ferry_type ft;
	enum ferry_op fo;
	struct op o;

	if (op_begin(&o, names[kind][0], names[kind][1], comm, req) && red_ok(&o, count, t, op, &ft, &fo) &&
	    !(kind == R_REDUCE && bad_root(&o, root))) {
		static const enum fkind kinds[] = {
			[R_REDUCE] = K_REDUCE, [R_ALLREDUCE] = K_ALLREDUCE, [R_SCAN] = K_SCAN,
			[R_EXSCAN] = K_EXSCAN, [R_RSB] = K_RSB,
		};

		return op_go(&o, (struct fargs){ .kind = kinds[kind], .sb = in_place(sb),
						 .rb = kind == R_REDUCE && o.c->rank != root ? NULL : rb,
						 .n = (size_t)count, .ft = ft, .fo = fo, .root = (uint32_t)root });
	}
	switch (kind) {
	case R_REDUCE:
		return req ? PMPI_Ireduce(sb, rb, count, t, op, root, comm, req) :
			PMPI_Reduce(sb, rb, count, t, op, root, comm);
	case R_ALLREDUCE:
		return req ? PMPI_Iallreduce(sb, rb, count, t, op, comm, req) : PMPI_Allreduce(sb, rb, count, t, op, comm);
	case R_SCAN:
		return req ? PMPI_Iscan(sb, rb, count, t, op, comm, req) : PMPI_Scan(sb, rb, count, t, op, comm);
	case R_EXSCAN:
		return req ? PMPI_Iexscan(sb, rb, count, t, op, comm, req) : PMPI_Exscan(sb, rb, count, t, op, comm);
	case R_RSB:
		break;
	}
	return req ? PMPI_Ireduce_scatter_block(sb, rb, count, t, op, comm, req) :
		PMPI_Reduce_scatter_block(sb, rb, count, t, op, comm);
}

static int reduce_scatter(const void *sb, void *rb, const int *rcs, MPI_Datatype t, MPI_Op op, MPI_Comm comm,
			  MPI_Request *req)
{
	enum ferry_type ft;
	enum ferry_op fo;
	struct op o;
	size_t *n;

	if (op_begin(&o, "MPI_Reduce_scatter", "MPI_Ireduce_scatter", comm, req) && red_ok(&o, 0, t, op, &ft, &fo)) {
		if (!rcs)
			return op_error(&o, MPI_ERR_ARG);
		/* MPI requires every rank's recvcounts to be the same */
		for (int r = 0; r < o.c->size; r++)
			if (rcs[r] < 0) {
				op_pass(&o, "negative count: MPI's error");
				goto pass;
			}
		/* the counts, in the operation's side until it ended (the
		 * post may be made from the queue, after the call returned) */
		if (!(n = o.s[1].cnt = malloc((size_t)o.c->size * sizeof(*n))))
			return op_error(&o, MPI_ERR_NO_MEM);
		for (int r = 0; r < o.c->size; r++)
			n[r] = (size_t)rcs[r];
		return op_go(&o, (struct fargs){ .kind = K_RS, .sb = in_place(sb), .rb = rb, .rcnt = n,
						 .ft = ft, .fo = fo });
	}
pass:
	return req ? PMPI_Ireduce_scatter(sb, rb, rcs, t, op, comm, req) :
		PMPI_Reduce_scatter(sb, rb, rcs, t, op, comm);
}

/* --- the entry points --- */

FMPI_API int MPI_Barrier(MPI_Comm comm)
{
	return barrier(comm, NULL);
}

FMPI_API int MPI_Ibarrier(MPI_Comm comm, MPI_Request *req)
{
	return barrier(comm, req);
}

FMPI_API int MPI_Bcast(void *buf, int count, MPI_Datatype t, int root, MPI_Comm comm)
{
	return bcast(buf, count, t, root, comm, NULL);
}

FMPI_API int MPI_Ibcast(void *buf, int count, MPI_Datatype t, int root, MPI_Comm comm, MPI_Request *req)
{
	return bcast(buf, count, t, root, comm, req);
}

FMPI_API int MPI_Gather(const void *sb, int sc, MPI_Datatype st, void *rb, int rc, MPI_Datatype rt, int root,
			MPI_Comm comm)
{
	return gather(sb, sc, st, rb, rc, rt, root, comm, NULL);
}

FMPI_API int MPI_Igather(const void *sb, int sc, MPI_Datatype st, void *rb, int rc, MPI_Datatype rt, int root,
			 MPI_Comm comm, MPI_Request *req)
{
	return gather(sb, sc, st, rb, rc, rt, root, comm, req);
}

FMPI_API int MPI_Scatter(const void *sb, int sc, MPI_Datatype st, void *rb, int rc, MPI_Datatype rt, int root,
			 MPI_Comm comm)
{
	return scatter(sb, sc, st, rb, rc, rt, root, comm, NULL);
}

FMPI_API int MPI_Iscatter(const void *sb, int sc, MPI_Datatype st, void *rb, int rc, MPI_Datatype rt, int root,
			  MPI_Comm comm, MPI_Request *req)
{
	return scatter(sb, sc, st, rb, rc, rt, root, comm, req);
}

FMPI_API int MPI_Allgather(const void *sb, int sc, MPI_Datatype st, void *rb, int rc, MPI_Datatype rt, MPI_Comm comm)
{
	return allgather(sb, sc, st, rb, rc, rt, comm, NULL);
}

FMPI_API int MPI_Iallgather(const void *sb, int sc, MPI_Datatype st, void *rb, int rc, MPI_Datatype rt,
			    MPI_Comm comm, MPI_Request *req)
{
	return allgather(sb, sc, st, rb, rc, rt, comm, req);
}

FMPI_API int MPI_Alltoall(const void *sb, int sc, MPI_Datatype st, void *rb, int rc, MPI_Datatype rt, MPI_Comm comm)
{
	return alltoall(sb, sc, st, rb, rc, rt, comm, NULL);
}

FMPI_API int MPI_Ialltoall(const void *sb, int sc, MPI_Datatype st, void *rb, int rc, MPI_Datatype rt,
			   MPI_Comm comm, MPI_Request *req)
{
	return alltoall(sb, sc, st, rb, rc, rt, comm, req);
}

FMPI_API int MPI_Gatherv(const void *sb, int sc, MPI_Datatype st, void *rb, const int rcs[], const int rds[],
			 MPI_Datatype rt, int root, MPI_Comm comm)
{
	return gatherv(sb, sc, st, rb, rcs, rds, rt, root, comm, NULL);
}

FMPI_API int MPI_Igatherv(const void *sb, int sc, MPI_Datatype st, void *rb, const int rcs[], const int rds[],
			  MPI_Datatype rt, int root, MPI_Comm comm, MPI_Request *req)
{
	return gatherv(sb, sc, st, rb, rcs, rds, rt, root, comm, req);
}

FMPI_API int MPI_Scatterv(const void *sb, const int scs[], const int sds[], MPI_Datatype st, void *rb, int rc,
			  MPI_Datatype rt, int root, MPI_Comm comm)
{
	return scatterv(sb, scs, sds, st, rb, rc, rt, root, comm, NULL);
}

FMPI_API int MPI_Iscatterv(const void *sb, const int scs[], const int sds[], MPI_Datatype st, void *rb, int rc,
			   MPI_Datatype rt, int root, MPI_Comm comm, MPI_Request *req)
{
	return scatterv(sb, scs, sds, st, rb, rc, rt, root, comm, req);
}

FMPI_API int MPI_Allgatherv(const void *sb, int sc, MPI_Datatype st, void *rb, const int rcs[], const int rds[],
			    MPI_Datatype rt, MPI_Comm comm)
{
	return allgatherv(sb, sc, st, rb, rcs, rds, rt, comm, NULL);
}

FMPI_API int MPI_Iallgatherv(const void *sb, int sc, MPI_Datatype st, void *rb, const int rcs[], const int rds[],
			     MPI_Datatype rt, MPI_Comm comm, MPI_Request *req)
{
	return allgatherv(sb, sc, st, rb, rcs, rds, rt, comm, req);
}

FMPI_API int MPI_Alltoallv(const void *sb, const int scs[], const int sds[], MPI_Datatype st, void *rb,
			   const int rcs[], const int rds[], MPI_Datatype rt, MPI_Comm comm)
{
	return alltoallv(sb, scs, sds, st, rb, rcs, rds, rt, comm, NULL);
}

FMPI_API int MPI_Ialltoallv(const void *sb, const int scs[], const int sds[], MPI_Datatype st, void *rb,
			    const int rcs[], const int rds[], MPI_Datatype rt, MPI_Comm comm, MPI_Request *req)
{
	return alltoallv(sb, scs, sds, st, rb, rcs, rds, rt, comm, req);
}

FMPI_API int MPI_Reduce(const void *sb, void *rb, int count, MPI_Datatype t, MPI_Op op, int root, MPI_Comm comm)
{
	return reduction(R_REDUCE, sb, rb, count, t, op, root, comm, NULL);
}

FMPI_API int MPI_Ireduce(const void *sb, void *rb, int count, MPI_Datatype t, MPI_Op op, int root, MPI_Comm comm,
			 MPI_Request *req)
{
	return reduction(R_REDUCE, sb, rb, count, t, op, root, comm, req);
}

/* The four with allreduce's arguments, and their non-blocking forms. */
#define ALLREDUCE_LIKE(name, iname, kind) \
	FMPI_API int name(const void *sb, void *rb, int count, MPI_Datatype t, MPI_Op op, MPI_Comm comm) \
	{ \
		return reduction(kind, sb, rb, count, t, op, 0, comm, NULL); \
	} \
	FMPI_API int iname(const void *sb, void *rb, int count, MPI_Datatype t, MPI_Op op, MPI_Comm comm, \
			   MPI_Request *req) \
	{ \
		return reduction(kind, sb, rb, count, t, op, 0, comm, req); \
	}

ALLREDUCE_LIKE(MPI_Allreduce, MPI_Iallreduce, R_ALLREDUCE)
ALLREDUCE_LIKE(MPI_Scan, MPI_Iscan, R_SCAN)
ALLREDUCE_LIKE(MPI_Exscan, MPI_Iexscan, R_EXSCAN)
ALLREDUCE_LIKE(MPI_Reduce_scatter_block, MPI_Ireduce_scatter_block, R_RSB)

FMPI_API int MPI_Reduce_scatter(const void *sb, void *rb, const int rcs[], MPI_Datatype t, MPI_Op op, MPI_Comm comm)
{
	return reduce_scatter(sb, rb, rcs, t, op, comm, NULL);
}

FMPI_API int MPI_Ireduce_scatter(const void *sb, void *rb, const int rcs[], MPI_Datatype t, MPI_Op op,
				 MPI_Comm comm, MPI_Request *req)
{
	return reduce_scatter(sb, rb, rcs, t, op, comm, req);
}
