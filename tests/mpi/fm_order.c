/* tests/mpi/fm_order.c OUT - valid MPI programs whose ranks call their
 * operations in orders MPI allows and libferry-mpi once hung on:
 *   - collectives on different communicators in different orders: rank 0
 *     calls 70 non-blocking allreduces on MPI_COMM_WORLD, then a barrier on
 *     a duplicate and a duplicate of that duplicate (MPI_Comm_dup: ferry's
 *     split); the other ranks the barrier and the dup first, then the 70.
 *     Rank 0's 70 must not take all of ferry's 64 requests per job (a
 *     handle's, its groups' included), or its barrier cannot be posted
 *     while the others wait in theirs;
 *   - point-to-point while non-blocking collectives wait in the queue: 70
 *     MPI_Ibarrier, then rank 0 receives from the last rank (MPI_Irecv and
 *     MPI_Wait), which sends only after its MPI_Waitall over the barriers
 *     ended: rank 0's wait must post the barriers ferry could not take at
 *     the call;
 *   - the same with a blocking MPI_Recv, which libferry-mpi does not
 *     intercept: only the MPI library's progress hook (Open MPI's) posts
 *     them; MPICH has none for it (README, "MPI programs"): FM_NO_RECV=1
 *     leaves it out.
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

/* N barriers, then the last rank sends to rank 0 once they ended there. */
static void p2p(const char *what, int blocking)
{
	MPI_Request q[N], r;
	int x = 0, last = fm_size - 1;

	for (int i = 0; i < N; i++)
		MPI_Ibarrier(MPI_COMM_WORLD, &q[i]);
	if (fm_rank == 0) {
		if (blocking) {
			MPI_Recv(&x, 1, MPI_INT, last, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
		} else {
			MPI_Irecv(&x, 1, MPI_INT, last, 7, MPI_COMM_WORLD, &r);
			MPI_Wait(&r, MPI_STATUS_IGNORE);
		}
		MPI_Waitall(N, q, MPI_STATUSES_IGNORE);
		if (x != 42)
			fm_fail(what);
	} else {
		MPI_Waitall(N, q, MPI_STATUSES_IGNORE);
		x = 42;
		if (fm_rank == last)
			MPI_Send(&x, 1, MPI_INT, 0, 7, MPI_COMM_WORLD);
	}
	fm_emit(what, &x, sizeof(x));
}

int main(int argc, char **argv)
{
	const char *e = getenv("FM_NO_RECV");

	fm_init(&argc, &argv);
	alarm(30);
	if (fm_size < 2)
		fm_fail("at least 2 ranks");
	cross();
	p2p("70 barriers outstanding, MPI_Irecv and MPI_Wait", 0);
	if (!(e && *e == '1'))
		p2p("70 barriers outstanding, MPI_Recv", 1);
	fm_fini();
	return 0;
}
