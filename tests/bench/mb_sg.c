/* tests/bench/mb_sg.c - the sg family's comparator: fb_sg.c built with Open
 * MPI (MPI_Scatter, MPI_Gather), timed by the same code (fb_sg.c says how). */
#define BENCH_MPI 1
#include "fb_sg.c"
