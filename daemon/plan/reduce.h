/* daemon/plan/reduce.h - the reduction kernels: dst[i] = dst[i] op src[i]
 * over count elements of a type (proto/coll.h).  Pure code: the collective
 * engine runs them on the node's buffers, the schedule simulator (sched.h)
 * and the unit tests on theirs, so a result is computed the same way
 * everywhere.
 *
 * Integer arithmetic wraps around (done in unsigned arithmetic: no undefined
 * behaviour on overflow); signed types compare as signed; the logical
 * operations give 0 or 1.  Floating-point min and max return dst's element
 * when the two compare neither less nor greater (NaN, or -0 against +0), so
 * the result depends on the order of the operands only, which a schedule
 * fixes: the same on every rank, run to run.
 *
 * Buffers may be unaligned (accesses go through types of alignment 1) and
 * dst may equal src; they must not overlap otherwise.  The loops are written
 * so that the compiler vectorises them (reduce.c says how to check).
 */
#ifndef FERRY_PLAN_REDUCE_H
#define FERRY_PLAN_REDUCE_H

#include <stddef.h>

/* Applies op over count elements of type.  Returns 0, or -EINVAL if the
 * pair is not one coll_op_ok accepts. */
int reduce_apply(unsigned type, unsigned op, void *dst, const void *src, size_t count);

#endif
