/* tests/bench/mb_red.c - the red family's comparator: fb_red.c built with
 * Open MPI (MPI_Allreduce, MPI_Allgather, MPI_Bcast, MPI_Reduce,
 * MPI_Reduce_scatter_block), timed by the same code (fb_red.c says how). */
#define BENCH_MPI 1
#include "fb_red.c"
