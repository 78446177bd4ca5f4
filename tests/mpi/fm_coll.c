/* tests/mpi/fm_coll.c OUT - every collective libferry-mpi intercepts, in
 * plain MPI: the reductions with every predefined datatype and every
 * predefined op MPI defines on it, data movement with datatypes of every
 * shape (padded, and a derived vector, which libferry-mpi packs), in place
 * and not, blocking and non-blocking (completed by every function of the
 * MPI_Wait/MPI_Test families, mixed with point-to-point requests), on
 * MPI_COMM_WORLD, on a communicator from MPI_Comm_split and on one from
 * MPI_Comm_dup; the v-forms with negative displacements; point-to-point
 * traffic between the operations, and a
 * rendezvous that needs the progress of a rank waiting in a barrier.  Each
 * result's hash goes to OUT.RANK (fm.h); tests/integration/mpi_coll.sh
 * compares the files of a run through ferry with a run of MPI alone.
 * FM_QUICK=1: the reductions on world with one type per class and size,
 * and only a barrier on the split and dup communicators (mpich.sh).
 */
#include "fm.h"

enum { C_INT, C_FLOAT, C_BYTE, C_BOOL };

struct rtype {
	MPI_Datatype t;
	const char *name;
	int cls, size, is_signed;
};

static struct rtype rtypes[32];
static int nrtypes;
static MPI_Op ops[10];
static const char *const opnames[10] = { "sum", "prod", "min", "max", "band", "bor", "bxor", "land", "lor", "lxor" };
static const unsigned allowed[] = { [C_INT] = 0x3ff, [C_FLOAT] = 0x00f, [C_BYTE] = 0x070, [C_BOOL] = 0x380 };

struct mtype {
	MPI_Datatype t;
	const char *name;
	MPI_Aint ext;
};
static struct mtype mtypes[16];
static int nmtypes;

static void add_r(MPI_Datatype t, const char *name, int cls, int size, int is_signed)
{
	rtypes[nrtypes++] = (struct rtype){ t, name, cls, size, is_signed };
}

static void add_m(MPI_Datatype t, const char *name)
{
	MPI_Aint lb;

	mtypes[nmtypes].t = t;
	mtypes[nmtypes].name = name;
	MPI_Type_get_extent(t, &lb, &mtypes[nmtypes].ext);
	nmtypes++;
}

static void types_init(void)
{
	MPI_Datatype vec;

#define I(t, s, sg) add_r(t, #t, C_INT, sizeof(s), sg)
	I(MPI_SIGNED_CHAR, signed char, 1); I(MPI_UNSIGNED_CHAR, unsigned char, 0);
	I(MPI_SHORT, short, 1); I(MPI_UNSIGNED_SHORT, unsigned short, 0);
	I(MPI_INT, int, 1); I(MPI_UNSIGNED, unsigned, 0);
	I(MPI_LONG, long, 1); I(MPI_UNSIGNED_LONG, unsigned long, 0);
	I(MPI_LONG_LONG_INT, long long, 1); I(MPI_LONG_LONG, long long, 1);
	I(MPI_UNSIGNED_LONG_LONG, unsigned long long, 0);
	I(MPI_INT8_T, int8_t, 1); I(MPI_UINT8_T, uint8_t, 0); I(MPI_INT16_T, int16_t, 1); I(MPI_UINT16_T, uint16_t, 0);
	I(MPI_INT32_T, int32_t, 1); I(MPI_UINT32_T, uint32_t, 0); I(MPI_INT64_T, int64_t, 1);
	I(MPI_UINT64_T, uint64_t, 0);
	I(MPI_AINT, MPI_Aint, 1); I(MPI_OFFSET, MPI_Offset, 1); I(MPI_COUNT, MPI_Count, 1);
#undef I
	add_r(MPI_FLOAT, "MPI_FLOAT", C_FLOAT, sizeof(float), 1);
	add_r(MPI_DOUBLE, "MPI_DOUBLE", C_FLOAT, sizeof(double), 1);
	add_r(MPI_BYTE, "MPI_BYTE", C_BYTE, 1, 0);
	add_r(MPI_C_BOOL, "MPI_C_BOOL", C_BOOL, 1, 0);
	ops[0] = MPI_SUM; ops[1] = MPI_PROD; ops[2] = MPI_MIN; ops[3] = MPI_MAX; ops[4] = MPI_BAND;
	ops[5] = MPI_BOR; ops[6] = MPI_BXOR; ops[7] = MPI_LAND; ops[8] = MPI_LOR; ops[9] = MPI_LXOR;

	add_m(MPI_CHAR, "MPI_CHAR");
	add_m(MPI_SHORT, "MPI_SHORT");
	add_m(MPI_INT, "MPI_INT");
	add_m(MPI_DOUBLE, "MPI_DOUBLE");
	add_m(MPI_LONG_DOUBLE, "MPI_LONG_DOUBLE");
	add_m(MPI_2INT, "MPI_2INT");
	add_m(MPI_DOUBLE_INT, "MPI_DOUBLE_INT");        /* 12 bytes in an extent of 16 */
	MPI_Type_vector(2, 1, 2, MPI_INT, &vec);         /* 8 bytes in an extent of 12 */
	MPI_Type_commit(&vec);
	add_m(vec, "vector");
}

/* Element i of a rank's reduction input: small values whose sums and
 * products are exact and fit every type over up to 6 ranks. */
static void fill_red(void *buf, int n, const struct rtype *t, int seed)
{
	for (int i = 0; i < n; i++) {
		int x = (seed * 7 + i * 3) % 5;
		long long v = t->is_signed ? x - 2 : x;
		char *p = (char *)buf + (size_t)i * (size_t)t->size;

		if (t->cls == C_FLOAT && t->size == sizeof(float)) {
			float f = (float)v;
			memcpy(p, &f, sizeof(f));
		} else if (t->cls == C_FLOAT) {
			double d = (double)v;
			memcpy(p, &d, sizeof(d));
		} else if (t->cls == C_BOOL) {
			*p = (char)(x & 1);
		} else {
			switch (t->size) {
			case 1: { int8_t y = (int8_t)v; memcpy(p, &y, 1); break; }
			case 2: { int16_t y = (int16_t)v; memcpy(p, &y, 2); break; }
			case 4: { int32_t y = (int32_t)v; memcpy(p, &y, 4); break; }
			default: { int64_t y = v; memcpy(p, &y, 8); break; }
			}
		}
	}
}

static void fill_bytes(void *buf, size_t n, int seed)
{
	for (size_t i = 0; i < n; i++)
		((unsigned char *)buf)[i] = (unsigned char)(seed * 31 + (int)i * 7 + 1);
}

/* --- non-blocking operations, completed a batch at a time --- */

struct pend {
	char what[128];
	void *hash;             /* result to hash */
	size_t n;
	void *mem[4];           /* freed after */
	MPI_Request req;
};

#define BATCH 12
static struct pend batch[BATCH];
static int nbatch, style;

static void pend_done(struct pend *p)
{
	if (p->hash)
		fm_emit(p->what, p->hash, p->n);
	else
		fprintf(fm_out, "%s -\n", p->what);
	for (int i = 0; i < 4; i++)
		free(p->mem[i]);
	memset(p, 0, sizeof(*p));
}

/* Completes the batch with one of the wait/test functions (each batch the
 * next), a point-to-point exchange around the ring in the same array. */
static void flush_batch(void)
{
	MPI_Request reqs[BATCH + 2];
	int n = nbatch + 2, left = (fm_rank + fm_size - 1) % fm_size, right = (fm_rank + 1) % fm_size;
	int in[4], out[4] = { fm_rank, style, nbatch, 77 }, done = 0, flag, idx, cnt, idxs[BATCH + 2];
	char what[64];

	if (!nbatch)
		return;
	MPI_Irecv(in, 4, MPI_INT, left, style, MPI_COMM_WORLD, &reqs[0]);
	for (int i = 0; i < nbatch; i++)
		reqs[i + 1] = batch[i].req;
	MPI_Isend(out, 4, MPI_INT, right, style, MPI_COMM_WORLD, &reqs[n - 1]);
	switch (style % 9) {
	case 0:
		MPI_Waitall(n, reqs, MPI_STATUSES_IGNORE);
		break;
	case 1:
		for (int i = n - 1; i >= 0; i--)
			MPI_Wait(&reqs[i], MPI_STATUS_IGNORE);
		break;
	case 2:
		for (int i = 0; i < n; i++) {
			MPI_Waitany(n, reqs, &idx, MPI_STATUS_IGNORE);
			if (idx == MPI_UNDEFINED || reqs[idx] != MPI_REQUEST_NULL)
				fm_fail("MPI_Waitany");
		}
		break;
	case 3:
		while (done < n) {
			MPI_Waitsome(n, reqs, &cnt, idxs, MPI_STATUSES_IGNORE);
			if (cnt == MPI_UNDEFINED || cnt < 1)
				fm_fail("MPI_Waitsome");
			done += cnt;
		}
		break;
	case 4:
		do
			MPI_Testall(n, reqs, &flag, MPI_STATUSES_IGNORE);
		while (!flag);
		break;
	case 5:
		do
			MPI_Testany(n, reqs, &idx, &flag, MPI_STATUS_IGNORE);
		while (!(flag && idx == MPI_UNDEFINED));
		break;
	case 6:
		do
			MPI_Testsome(n, reqs, &cnt, idxs, MPI_STATUSES_IGNORE);
		while (cnt != MPI_UNDEFINED);
		break;
	case 7:
		for (int i = 0; i < n; i++)
			do
				MPI_Test(&reqs[i], &flag, MPI_STATUS_IGNORE);
			while (!flag);
		break;
	case 8:
		/* MPI_Request_get_status leaves the request; MPI_Wait frees it */
		for (int i = 0; i < n; i++) {
			do
				MPI_Request_get_status(reqs[i], &flag, MPI_STATUS_IGNORE);
			while (!flag);
			if (reqs[i] == MPI_REQUEST_NULL)
				fm_fail("MPI_Request_get_status freed a request");
			MPI_Wait(&reqs[i], MPI_STATUS_IGNORE);
		}
		break;
	}
	for (int i = 0; i < n; i++)
		if (reqs[i] != MPI_REQUEST_NULL)
			fm_fail("a request is not MPI_REQUEST_NULL after completion");
	if (in[0] != left || in[1] != style || in[3] != 77)
		fm_fail("point-to-point message between collectives wrong");
	snprintf(what, sizeof(what), "p2p style %d", style % 9);
	fm_emit(what, in, sizeof(in));
	for (int i = 0; i < nbatch; i++)
		pend_done(&batch[i]);
	nbatch = 0;
	style++;
}

/* The operation just made: emit now (blocking) or keep it for the batch. */
static struct pend *cur;
static struct pend *op_new(int nb)
{
	static struct pend one;

	cur = nb ? &batch[nbatch] : &one;
	memset(cur, 0, sizeof(*cur));
	return cur;
}

static void op_made(int nb)
{
	if (!nb) {
		pend_done(cur);
		return;
	}
	if (++nbatch == BATCH)
		flush_batch();
}

/* --- reductions --- */

enum rkind { K_REDUCE, K_ALLREDUCE, K_SCAN, K_EXSCAN, K_RSB, K_RS, K_N };
static const char *const knames[K_N] = { "reduce", "allreduce", "scan", "exscan", "rsb", "rs" };

static void reduction(MPI_Comm comm, const char *cname, enum rkind k, const struct rtype *t, int o, int ip, int nb)
{
	int r, p, n, m, rcs[64], root;
	struct pend *e = op_new(nb);
	char *sb, *rb;
	const void *s;
	MPI_Request *q = nb ? &e->req : NULL;

	MPI_Comm_rank(comm, &r);
	MPI_Comm_size(comm, &p);
	root = p - 1;
	n = m = 4;
	for (int i = 0; i < p; i++)
		rcs[i] = i % 3;
	if (k == K_RSB) {
		n = 2 * p;
		m = 2;
	} else if (k == K_RS) {
		n = 0;
		for (int i = 0; i < p; i++)
			n += rcs[i];
		m = rcs[r];
	}
	sb = e->mem[0] = fm_alloc((size_t)n * (size_t)t->size);
	rb = e->mem[1] = fm_alloc((size_t)n * (size_t)t->size);
	fill_red(sb, n, t, r);
	memset(rb, 0x5a, (size_t)n * (size_t)t->size);
	if (k == K_REDUCE && r != root)
		ip = 0;         /* in place at the root only */
	if (ip)
		fill_red(rb, n, t, r);
	s = ip ? MPI_IN_PLACE : sb;
	snprintf(e->what, sizeof(e->what), "%s %s %s %s%s%s", cname, knames[k], t->name, opnames[o], ip ? " inplace" : "",
		 nb ? " nb" : "");
	switch (k) {
	case K_REDUCE:
		nb ? MPI_Ireduce(s, rb, n, t->t, ops[o], root, comm, q) : MPI_Reduce(s, rb, n, t->t, ops[o], root, comm);
		break;
	case K_ALLREDUCE:
		nb ? MPI_Iallreduce(s, rb, n, t->t, ops[o], comm, q) : MPI_Allreduce(s, rb, n, t->t, ops[o], comm);
		break;
	case K_SCAN:
		nb ? MPI_Iscan(s, rb, n, t->t, ops[o], comm, q) : MPI_Scan(s, rb, n, t->t, ops[o], comm);
		break;
	case K_EXSCAN:
		nb ? MPI_Iexscan(s, rb, n, t->t, ops[o], comm, q) : MPI_Exscan(s, rb, n, t->t, ops[o], comm);
		break;
	case K_RSB:
		nb ? MPI_Ireduce_scatter_block(s, rb, 2, t->t, ops[o], comm, q) :
			MPI_Reduce_scatter_block(s, rb, 2, t->t, ops[o], comm);
		break;
	case K_RS:
		nb ? MPI_Ireduce_scatter(s, rb, rcs, t->t, ops[o], comm, q) :
			MPI_Reduce_scatter(s, rb, rcs, t->t, ops[o], comm);
		break;
	default:
		break;
	}
	/* undefined by MPI: exscan's rank 0, reduce's other ranks */
	if (!((k == K_EXSCAN && r == 0) || (k == K_REDUCE && r != root))) {
		e->hash = rb;
		e->n = (size_t)m * (size_t)t->size;
	}
	op_made(nb);
}

/* --- data movement --- */

enum mkind { M_BCAST, M_GATHER, M_GATHERV, M_SCATTER, M_SCATTERV, M_ALLGATHER, M_ALLGATHERV, M_ALLTOALL,
	     M_ALLTOALLV, M_N };
static const char *const mnames[M_N] = { "bcast", "gather", "gatherv", "scatter", "scatterv", "allgather",
					 "allgatherv", "alltoall", "alltoallv" };

static void movement(MPI_Comm comm, const char *cname, enum mkind k, const struct mtype *t, int ip, int nb)
{
	int r, p, root, c = 3, scs[64], sds[64], rcs[64], rds[64], tot = 0;
	struct pend *e = op_new(nb);
	MPI_Request *q = nb ? &e->req : NULL;
	MPI_Datatype d = t->t;
	size_t big;
	char *sb, *rb;

	MPI_Comm_rank(comm, &r);
	MPI_Comm_size(comm, &p);
	root = k == M_GATHERV || k == M_SCATTERV ? 1 % p : k == M_BCAST ? p - 1 : 0;
	big = (size_t)(t->ext * 8 * p + 64);      /* room for every layout below */
	sb = e->mem[0] = fm_alloc(big);
	rb = e->mem[1] = fm_alloc(big);
	fill_bytes(sb, big, r + 1);
	memset(rb, 0xa5, big);
	if ((k == M_GATHER || k == M_GATHERV || k == M_SCATTER || k == M_SCATTERV) && r != root)
		ip = 0;
	if (k == M_BCAST)
		ip = 0;
	if (ip)
		fill_bytes(rb, big, r + 1);
	snprintf(e->what, sizeof(e->what), "%s %s %s%s%s", cname, mnames[k], t->name, ip ? " inplace" : "",
		 nb ? " nb" : "");
	e->hash = rb;
	e->n = big;
	switch (k) {
	case M_BCAST:
		if (r == root)
			e->hash = sb;
		nb ? MPI_Ibcast(r == root ? sb : rb, c, d, root, comm, q) : MPI_Bcast(r == root ? sb : rb, c, d, root, comm);
		break;
	case M_GATHER:
		nb ? MPI_Igather(ip ? MPI_IN_PLACE : sb, c, d, rb, c, d, root, comm, q) :
			MPI_Gather(ip ? MPI_IN_PLACE : sb, c, d, rb, c, d, root, comm);
		break;
	case M_SCATTER:
		if (ip)
			e->hash = sb;
		nb ? MPI_Iscatter(sb, c, d, ip ? MPI_IN_PLACE : rb, c, d, root, comm, q) :
			MPI_Scatter(sb, c, d, ip ? MPI_IN_PLACE : rb, c, d, root, comm);
		break;
	case M_ALLGATHER:
		nb ? MPI_Iallgather(ip ? MPI_IN_PLACE : sb, c, d, rb, c, d, comm, q) :
			MPI_Allgather(ip ? MPI_IN_PLACE : sb, c, d, rb, c, d, comm);
		break;
	case M_ALLTOALL:
		nb ? MPI_Ialltoall(ip ? MPI_IN_PLACE : sb, c, d, rb, c, d, comm, q) :
			MPI_Alltoall(ip ? MPI_IN_PLACE : sb, c, d, rb, c, d, comm);
		break;
	case M_GATHERV:
	case M_ALLGATHERV:
		/* rank i gives i % 3 + 1 (gatherv) or i % 3 (allgatherv, rank
		 * 0 none), with a gap of one element after each block */
		for (int i = 0; i < p; i++) {
			rcs[i] = k == M_GATHERV ? i % 3 + 1 : i % 3;
			rds[i] = tot;
			tot += rcs[i] + 1;
		}
		if (k == M_GATHERV)
			nb ? MPI_Igatherv(ip ? MPI_IN_PLACE : sb, rcs[r], d, rb, rcs, rds, d, root, comm, q) :
				MPI_Gatherv(ip ? MPI_IN_PLACE : sb, rcs[r], d, rb, rcs, rds, d, root, comm);
		else
			nb ? MPI_Iallgatherv(ip ? MPI_IN_PLACE : sb, rcs[r], d, rb, rcs, rds, d, comm, q) :
				MPI_Allgatherv(ip ? MPI_IN_PLACE : sb, rcs[r], d, rb, rcs, rds, d, comm);
		break;
	case M_SCATTERV:
		/* rank i gets (i + 1) % 3 (some none), blocks in reverse rank order */
		for (int i = p - 1; i >= 0; i--) {
			scs[i] = (i + 1) % 3;
			sds[i] = tot;
			tot += scs[i] + 1;
		}
		if (ip)
			e->hash = sb;
		nb ? MPI_Iscatterv(sb, scs, sds, d, ip ? MPI_IN_PLACE : rb, scs[r], d, root, comm, q) :
			MPI_Scatterv(sb, scs, sds, d, ip ? MPI_IN_PLACE : rb, scs[r], d, root, comm);
		break;
	case M_ALLTOALLV: {
		/* a sends b (a + 2b) % 3 elements ((a + b) % 3 in place, where
		 * both directions must agree); received blocks in reverse order */
		int rtot = 0;

		for (int i = 0; i < p; i++) {
			scs[i] = ip ? (r + i) % 3 : (r + 2 * i) % 3;
			sds[i] = tot;
			tot += scs[i] + 1;
		}
		for (int i = p - 1; i >= 0; i--) {
			rcs[i] = ip ? (i + r) % 3 : (i + 2 * r) % 3;
			rds[i] = rtot;
			rtot += rcs[i] + 1;
		}
		nb ? MPI_Ialltoallv(ip ? MPI_IN_PLACE : sb, scs, sds, d, rb, rcs, rds, d, comm, q) :
			MPI_Alltoallv(ip ? MPI_IN_PLACE : sb, scs, sds, d, rb, rcs, rds, d, comm);
		break;
	}
	default:
		break;
	}
	op_made(nb);
}

static void barrier(MPI_Comm comm, const char *cname, int nb)
{
	struct pend *e = op_new(nb);

	snprintf(e->what, sizeof(e->what), "%s barrier%s", cname, nb ? " nb" : "");
	nb ? MPI_Ibarrier(comm, &e->req) : MPI_Barrier(comm);
	op_made(nb);
}

/* Displacements below the buffer's address (MPI allows any that land in
 * the program's memory): Alltoallv, Gatherv and Scatterv whose blocks all
 * lie before the pointer passed, in reverse rank order, with MPI_INT and
 * with a vector (packed), blocking and not.  Each value is checked here;
 * the whole arrays, gaps included, are hashed. */
static void negative_displs(MPI_Comm comm, const char *cname)
{
	enum { W = 4 };         /* extents per rank's slot */
	int r, p, scs[64], sds[64], rcs[64], rds[64];
	MPI_Datatype vec;

	MPI_Comm_rank(comm, &r);
	MPI_Comm_size(comm, &p);
	MPI_Type_vector(2, 1, 2, MPI_INT, &vec);        /* 2 ints of an extent of 3 */
	MPI_Type_commit(&vec);
	for (int v = 0; v < 2; v++)
		for (int nb = 0; nb < 2; nb++)
			for (int k = 0; k < 3; k++) {
				MPI_Datatype t = v ? vec : MPI_INT;
				int e = v ? 3 : 1, n = p * W * e, root = p - 1, per = v ? 2 : 1;
				int *sa = fm_alloc((size_t)n * sizeof(int)), *ra = fm_alloc((size_t)n * sizeof(int));
				int *sb = sa + n, *rb = ra + n;     /* one past the end */
				char what[96];
				MPI_Request q = MPI_REQUEST_NULL;

				for (int i = 0; i < n; i++) {
					sa[i] = r * 10000 + i;
					ra[i] = -1;
				}
				for (int i = 0; i < p; i++) {
					/* i's block at slot p - 1 - i below the end */
					scs[i] = 1 + (r + i) % 2;
					rcs[i] = k == 0 ? 1 + (r + i) % 2 : 1 + i % 2;
					sds[i] = -(i + 1) * W;
					rds[i] = -(i + 1) * W;
				}
				snprintf(what, sizeof(what), "%s negative displacements %s %s%s", cname,
					 k == 0 ? "alltoallv" : k == 1 ? "gatherv" : "scatterv", v ? "vector" : "int",
					 nb ? " nb" : "");
				if (k == 0)
					nb ? MPI_Ialltoallv(sb, scs, sds, t, rb, rcs, rds, t, comm, &q) :
						MPI_Alltoallv(sb, scs, sds, t, rb, rcs, rds, t, comm);
				else if (k == 1)
					nb ? MPI_Igatherv(sa, 1 + r % 2, t, rb, rcs, rds, t, root, comm, &q) :
						MPI_Gatherv(sa, 1 + r % 2, t, rb, rcs, rds, t, root, comm);
				else
					nb ? MPI_Iscatterv(sb, rcs, rds, t, ra, 1 + r % 2, t, root, comm, &q) :
						MPI_Scatterv(sb, rcs, rds, t, ra, 1 + r % 2, t, root, comm);
				MPI_Wait(&q, MPI_STATUS_IGNORE);
				/* the j-th int of what src sent from slot s (its
				 * elements' ints are every other one for the vector) */
#define SENT(src, s, j) ((src) * 10000 + n - ((s) + 1) * W * e + ((j) / per) * e + ((j) % per) * 2)
				for (int i = 0; i < p; i++) {
					int *at = (k == 2 ? ra : rb - (i + 1) * W * e);
					int cnt = (k == 0 ? rcs[i] : 1 + i % 2) * per;

					if ((k == 1 && r != root) || (k == 2 && i != r))
						continue;
					for (int j = 0; j < cnt; j++) {
						int got = at[(j / per) * e + (j % per) * 2];
						int want = k == 0 ? SENT(i, r, j) : k == 1 ? i * 10000 + (j / per) * e + (j % per) * 2
							: SENT(root, r, j);

						if (got != want)
							fm_fail(what);
					}
				}
#undef SENT
				fm_emit(what, ra, (size_t)n * sizeof(int));
				free(sa);
				free(ra);
			}
	MPI_Type_free(&vec);
}

/* --- the run --- */

static void all_ops(MPI_Comm comm, const char *cname, int every_type)
{
	for (int nb = 0; nb < 2; nb++) {
		barrier(comm, cname, nb);
		for (int k = 0; k < K_N; k++)
			for (int i = 0; i < nrtypes; i++)
				for (int o = 0; o < 10; o++)
					for (int ip = 0; ip < 2; ip++) {
						/* other communicators: one type per class and size */
						if (!every_type && i > 0 && rtypes[i].cls == rtypes[i - 1].cls &&
						    rtypes[i].size == rtypes[i - 1].size)
							continue;
						if (allowed[rtypes[i].cls] & (1u << o))
							reduction(comm, cname, k, &rtypes[i], o, ip, nb);
					}
		flush_batch();
		for (int k = 0; k < M_N; k++)
			for (int i = 0; i < nmtypes; i++)
				for (int ip = 0; ip < 2; ip++)
					movement(comm, cname, k, &mtypes[i], ip, nb);
		flush_batch();
		MPI_Barrier(comm);
	}
}

/* Rank 0 sends rank 1 a message large enough for a rendezvous, then waits
 * in a barrier; rank 1 receives it before it enters the barrier: the
 * transfer needs rank 0's MPI progress while it waits for ferry. */
static void rendezvous(void)
{
	size_t n = 4u << 20;
	char *buf;
	MPI_Request r;

	if (fm_size < 2)
		return;
	buf = fm_alloc(n);
	if (fm_rank == 0) {
		fill_bytes(buf, n, 9);
		MPI_Isend(buf, (int)n, MPI_BYTE, 1, 5, MPI_COMM_WORLD, &r);
		MPI_Barrier(MPI_COMM_WORLD);
		MPI_Wait(&r, MPI_STATUS_IGNORE);
	} else {
		if (fm_rank == 1)
			MPI_Recv(buf, (int)n, MPI_BYTE, 0, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
		MPI_Barrier(MPI_COMM_WORLD);
		if (fm_rank == 1)
			fm_emit("rendezvous", buf, n);
	}
	free(buf);
}

int main(int argc, char **argv)
{
	MPI_Comm half, dup, none;
	const char *q = getenv("FM_QUICK");
	int hr, quick = q && *q == '1';

	fm_init(&argc, &argv);
	types_init();
	rendezvous();
	all_ops(MPI_COMM_WORLD, "world", !quick);
	negative_displs(MPI_COMM_WORLD, "world");
	/* the odd and the even ranks, in reverse order */
	MPI_Comm_split(MPI_COMM_WORLD, fm_rank % 2, -fm_rank, &half);
	MPI_Comm_rank(half, &hr);
	fprintf(fm_out, "split rank %d\n", hr);
	if (quick)
		barrier(half, "half", 0);
	else
		all_ops(half, "half", 0);
	MPI_Comm_dup(half, &dup);
	if (quick)
		barrier(dup, "dup", 1);
	else
		all_ops(dup, "dup", 0);
	flush_batch();
	/* a rank outside every group */
	MPI_Comm_split(MPI_COMM_WORLD, fm_rank == 0 ? MPI_UNDEFINED : 0, 0, &none);
	if ((none == MPI_COMM_NULL) != (fm_rank == 0))
		fm_fail("MPI_Comm_split with MPI_UNDEFINED");
	if (none != MPI_COMM_NULL) {
		int v = fm_rank, sum = 0;

		MPI_Allreduce(&v, &sum, 1, MPI_INT, MPI_SUM, none);
		fm_emit("none allreduce", &sum, sizeof(sum));
		MPI_Comm_free(&none);
	}
	MPI_Comm_free(&dup);
	MPI_Comm_free(&half);
	fm_fini();
	return 0;
}
