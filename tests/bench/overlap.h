/* tests/bench/overlap.h - the rounds of an overlap point, shared by
 * fb_coll.c (ferry_ialltoall) and mb_coll.c (MPI_Ialltoall), which measure
 * them the same way.  The program that includes it defines ovl_phase. */
#ifndef FERRY_BENCH_OVERLAP_H
#define FERRY_BENCH_OVERLAP_H

#include <stddef.h>
#include <stdint.h>

/* Rounds of an overlap point: its three phases are timed in turns, each
 * round n / OVERLAP_ROUNDS iterations of each, so that the machine's speed
 * drifting over the point (a VM's clock rate changes by a few percent from
 * one second to the next) weighs on all three alike instead of on whichever
 * ran last.  Each round times t_comm first and then sets the compute loop's
 * length so that it lasts that round's t_comm (scaled from the last round's
 * t_compute), then times the other two, in turns.  A loop calibrated once
 * drifted by up to a third from t_comm by the time it ran, and one shorter
 * than t_comm caps the overlap at t_compute / t_comm whatever the
 * communication does (make bench of 2026-11-27: 1 KiB at 65 % with t_compute
 * 0.67 t_comm, the overlapped run only 4 us longer than t_comm). */
#define OVERLAP_ROUNDS 6

/* What one overlap point has measured so far: seconds in each phase, and
 * this rank's time in each part of the overlapped iterations. */
struct ovl {
	uint8_t *sbuf, *rbuf;
	size_t block;
	uint32_t seq, k;        /* the blocks' sequence, the next stamp */
	long c;                 /* the compute loop's length */
	double comm, comp, total, in, post, wait;
};

/* m iterations of the phase (the program's own): 0 post and wait (t_comm),
 * 1 the compute loop alone (t_compute), 2 post, compute, wait (t_total);
 * the job's time, the same on every rank. */
static double ovl_phase(struct ovl *o, int phase, long m);

/* Round r of an overlap point (OVERLAP_ROUNDS): t_comm, the compute loop
 * scaled to last it (*last: the last round's t_compute, 0 before), then
 * t_compute and t_total in turns.  Every rank computes the same length
 * (ovl_phase's times are the job's, the same on every rank). */
static void ovl_round(struct ovl *o, int r, long m, double *last)
{
	double comm = ovl_phase(o, 0, m), comp;

	if (*last > 0)
		o->c = (long)((double)o->c * comm / *last) + 1;
	if (r % 2) {
		o->total += ovl_phase(o, 2, m);
		comp = ovl_phase(o, 1, m);
	} else {
		comp = ovl_phase(o, 1, m);
		o->total += ovl_phase(o, 2, m);
	}
	o->comm += comm;
	o->comp += comp;
	*last = comp;
}

#endif
