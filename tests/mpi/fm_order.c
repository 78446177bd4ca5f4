/* tests/mpi/fm_order.c OUT - valid MPI programs whose ranks call their
 * operations in orders MPI allows and libferry-mpi once hung on:
 *   - collectives on different communicators in different orders: rank 0
 *     calls 70 non-blocking allreduces on MPI_COMM_WORLD, then a barrier on
 *     a duplicate and a duplicate of that duplicate (MPI_Comm_dup: ferry's
 *     split); the other ranks the barrier and the dup first, then the 70.
 *     Rank 0's 70 must not take all of ferry's 64 requests per job (a
 *     handle's, its groups' included), or its barrier cannot be posted
 *     while the others wait in theirs.
 * Results are checked here and written to OUT.RANK (fm.h); an alarm ends a
 * hang.
 */
#include "fm.h"

#include <unistd.h>

enum { N = 70 };

static void cross(void)
{
	MPI_Request q[N];
	MPI_Comm d, e;
	int x[N], one = 1, sum = 0;

	MPI_Comm_dup(MPI_COMM_WORLD, &d);
	for (int i = 0; i < N; i++)
		x[i] = fm_rank + i;
	if (fm_rank == 0) {
		for (int i = 0; i < N; i++)
			MPI_Iallreduce(MPI_IN_PLACE, &x[i], 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &q[i]);
		MPI_Barrier(d);
		MPI_Comm_dup(d, &e);
	} else {
		MPI_Barrier(d);
		MPI_Comm_dup(d, &e);
		for (int i = 0; i < N; i++)
			MPI_Iallreduce(MPI_IN_PLACE, &x[i], 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &q[i]);
	}
	MPI_Waitall(N, q, MPI_STATUSES_IGNORE);
	MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, e);
	for (int i = 0; i < N; i++)
		if (x[i] != fm_size * (fm_size - 1) / 2 + fm_size * i)
			fm_fail("70 allreduces on world, a barrier and a dup on another communicator first");
	if (sum != fm_size)
		fm_fail("an allreduce on the dup of a dup");
	fm_emit("orders across communicators", x, sizeof(x));
	MPI_Comm_free(&e);
	MPI_Comm_free(&d);
}

int main(int argc, char **argv)
{
	fm_init(&argc, &argv);
	alarm(30);
	if (fm_size < 2)
		fm_fail("at least 2 ranks");
	cross();
	fm_fini();
	return 0;
}
