/* tests/mpi/fm_pass.c OUT - what libferry-mpi leaves to MPI, and the calls
 * whose datatypes differ between ranks: reductions with a derived
 * datatype, a user-defined op, MPI_MAXLOC, MPI_LONG_DOUBLE; collectives on
 * communicators not made from a ferry one (MPI_Comm_create,
 * MPI_Comm_split_type, an intercommunicator); a broadcast whose root sends
 * a derived vector (or a type that swaps its two ints) and whose other
 * ranks receive plain ints of the same
 * signature (every rank must still take the same way).  Each result is
 * checked here against what it must be, and its hash written to OUT.RANK
 * (fm.h).  FM_THREAD_MULTIPLE=1 in the environment: MPI_Init_thread with
 * MPI_THREAD_MULTIPLE.
 */
#include "fm.h"

static void check(int ok, const char *what)
{
	if (!ok)
		fm_fail(what);
	fprintf(fm_out, "%s ok\n", what);
}

/* a + b, int by int: a user-defined op (on ints, or pairs of them) */
static void add_fn(void *in, void *inout, int *len, MPI_Datatype *t)
{
	int n = *len * (*t == MPI_INT ? 1 : 2);

	for (int i = 0; i < n; i++)
		((int *)inout)[i] += ((int *)in)[i];
}

int main(int argc, char **argv)
{
	MPI_Datatype pair, vec;
	MPI_Group wg, g;
	MPI_Comm sub, node, inter;
	MPI_Op myop;
	int r, p, in[2], out[2], sum = 0, buf[6];
	struct { int v, i; } mi, mo;
	long double ld, ldsum;
	const char *mt = getenv("FM_THREAD_MULTIPLE");

	if (mt && *mt == '1') {
		int provided;

		MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
		if (argc < 2)
			return 2;
		MPI_Comm_rank(MPI_COMM_WORLD, &fm_rank);
		MPI_Comm_size(MPI_COMM_WORLD, &fm_size);
		{
			char path[4096];

			snprintf(path, sizeof(path), "%s.%d", argv[1], fm_rank);
			fm_out = fopen(path, "w");
		}
		fprintf(fm_out, "provided %s\n", provided == MPI_THREAD_MULTIPLE ? "multiple" : "less");
	} else {
		fm_init(&argc, &argv);
	}
	r = fm_rank;
	p = fm_size;
	for (int i = 1; i <= p; i++)
		sum += i;

	/* a user-defined op, on ints and on a derived datatype (MPI defines
	 * its predefined ops on predefined datatypes only) */
	MPI_Op_create(add_fn, 1, &myop);
	in[0] = r + 1;
	in[1] = 2 * (r + 1);
	MPI_Allreduce(in, out, 2, MPI_INT, myop, MPI_COMM_WORLD);
	check(out[0] == sum && out[1] == 2 * sum, "allreduce user op");
	MPI_Type_contiguous(2, MPI_INT, &pair);
	MPI_Type_commit(&pair);
	MPI_Allreduce(in, out, 1, pair, myop, MPI_COMM_WORLD);
	check(out[0] == sum && out[1] == 2 * sum, "allreduce derived pair");
	MPI_Op_free(&myop);

	/* MPI_MAXLOC */
	mi.v = (r * 5) % p;
	mi.i = r;
	MPI_Allreduce(&mi, &mo, 1, MPI_2INT, MPI_MAXLOC, MPI_COMM_WORLD);
	check(mo.v == p - 1 && (mo.i * 5) % p == p - 1, "allreduce maxloc");

	/* a predefined type ferry has not */
	ld = (long double)(r + 1);
	MPI_Allreduce(&ld, &ldsum, 1, MPI_LONG_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
	check(ldsum == (long double)sum, "allreduce long double");

	/* the root sends 3 vectors of 2 ints (stride 2), the others take 6 ints */
	MPI_Type_vector(2, 1, 2, MPI_INT, &vec);
	MPI_Type_commit(&vec);
	if (r == 0) {
		int src[12];

		for (int i = 0; i < 12; i++)
			src[i] = 100 + i;
		MPI_Bcast(src, 3, vec, 0, MPI_COMM_WORLD);
		/* a vector's elements sit one extent (3 ints) apart */
		for (int i = 0; i < 6; i++)
			buf[i] = src[(i / 2) * 3 + (i % 2) * 2];
	} else {
		MPI_Bcast(buf, 6, MPI_INT, 0, MPI_COMM_WORLD);
	}
	check(buf[0] == 100 && buf[1] == 102 && buf[2] == 103 && buf[5] == 108, "bcast vector to ints");
	fm_emit("bcast vector to ints", buf, sizeof(buf));

	/* a type that only swaps its two ints: dense (extent = size), but its
	 * first element is the second int in memory, so it is packed */
	{
		MPI_Datatype swap;

		MPI_Type_create_indexed_block(2, 1, (int[]){ 1, 0 }, MPI_INT, &swap);
		MPI_Type_commit(&swap);
		if (r == 0) {
			int src[2] = { 10, 20 };

			MPI_Bcast(src, 1, swap, 0, MPI_COMM_WORLD);
			buf[0] = src[1];
			buf[1] = src[0];
		} else {
			MPI_Bcast(buf, 2, MPI_INT, 0, MPI_COMM_WORLD);
		}
		check(buf[0] == 20 && buf[1] == 10, "bcast of a swapping type to ints");
		fm_emit("bcast of a swapping type to ints", buf, 2 * sizeof(int));
		MPI_Type_free(&swap);
	}

	/* communicators not made from a ferry one */
	MPI_Comm_group(MPI_COMM_WORLD, &wg);
	MPI_Group_incl(wg, 1, (int[]){ 0 }, &g);
	MPI_Comm_create(MPI_COMM_WORLD, g, &sub);
	if (sub != MPI_COMM_NULL) {
		int one = 1, res = 0;

		MPI_Allreduce(&one, &res, 1, MPI_INT, MPI_SUM, sub);
		check(res == 1, "allreduce on MPI_Comm_create's communicator");
		MPI_Comm_free(&sub);
	}
	MPI_Group_free(&g);
	MPI_Group_free(&wg);
	MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
	{
		int one = 1, res = 0, ns;

		MPI_Comm_size(node, &ns);
		MPI_Allreduce(&one, &res, 1, MPI_INT, MPI_SUM, node);
		check(res == ns, "allreduce on MPI_Comm_split_type's communicator");
	}
	MPI_Comm_free(&node);
	if (p >= 2) {
		MPI_Comm half;
		int v = r, got = -1;

		/* even ranks and odd ranks, joined by an intercommunicator */
		MPI_Comm_split(MPI_COMM_WORLD, r % 2, r, &half);
		MPI_Intercomm_create(half, 0, MPI_COMM_WORLD, r % 2 ? 0 : 1, 7, &inter);
		/* the even group's rank 0 (world 0) broadcasts to the odd group */
		if (r % 2 == 0)
			MPI_Bcast(&v, 1, MPI_INT, r == 0 ? MPI_ROOT : MPI_PROC_NULL, inter);
		else
			MPI_Bcast(&got, 1, MPI_INT, 0, inter);
		check(r % 2 == 0 || got == 0, "bcast over an intercommunicator");
		MPI_Comm_free(&inter);
		MPI_Comm_free(&half);
	}
	MPI_Type_free(&vec);
	MPI_Type_free(&pair);
	fm_fini();
	return 0;
}
