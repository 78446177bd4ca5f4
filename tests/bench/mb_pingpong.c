/* tests/bench/mb_pingpong.c - latency of an 8-byte MPI ping-pong between
 * ranks 0 and 1; rank 0 prints "oneway_us X". */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 20000, warm = 1000;
	double v = 0, t0 = 0;
	int me;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &me);
	for (long i = 0; i < n + warm; i++) {
		if (i == warm)
			t0 = MPI_Wtime();
		if (me == 0) {
			MPI_Send(&v, 1, MPI_DOUBLE, 1, 0, MPI_COMM_WORLD);
			MPI_Recv(&v, 1, MPI_DOUBLE, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
		} else {
			MPI_Recv(&v, 1, MPI_DOUBLE, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
			MPI_Send(&v, 1, MPI_DOUBLE, 0, 0, MPI_COMM_WORLD);
		}
	}
	if (me == 0)
		printf("oneway_us %.3f\n", (MPI_Wtime() - t0) / (double)n / 2 * 1e6);
	MPI_Finalize();
	return 0;
}
