/* daemon/plan/reduce.c - see reduce.h. */
#include "reduce.h"

#include "../../proto/coll.h"

#include <errno.h>
#include <stdint.h>

/* GCC's -O2 vectorises only loops its "very cheap" cost model accepts, which
 * leaves out every kernel here (unknown trip counts); the dynamic model
 * vectorises them, the float ones included (element by element, so the
 * results are exactly those of the scalar loop).  Check with
 * gcc -O2 -fopt-info-vec-optimized -c reduce.c: on x86-64 (SSE2) every
 * kernel of 8- to 32-bit and floating-point elements says "loop vectorized",
 * and 4 of the 10 on 64-bit integers (SSE2 has no 64-bit multiply or
 * compare; they stay scalar).  Clang vectorises at -O2 already. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("tree-loop-vectorize", "vect-cost-model=dynamic")
#endif

/* Element types of alignment 1: a user's buffer may start anywhere. */
typedef uint8_t u8a;
typedef uint16_t u16a __attribute__((aligned(1), may_alias));
typedef uint32_t u32a __attribute__((aligned(1), may_alias));
typedef uint64_t u64a __attribute__((aligned(1), may_alias));
typedef int8_t s8a;
typedef int16_t s16a __attribute__((aligned(1), may_alias));
typedef int32_t s32a __attribute__((aligned(1), may_alias));
typedef int64_t s64a __attribute__((aligned(1), may_alias));
typedef float f32a __attribute__((aligned(1), may_alias));
typedef double f64a __attribute__((aligned(1), may_alias));

/* One kernel: d[i] = EXPR(d[i], s[i]).  U is the unsigned type arithmetic
 * wraps in; a product starts from 1u, since two uint16_t operands are
 * promoted to int, whose product overflows (0xffff * 0xffff). */
#define KERNEL(name, T, EXPR)                                                    \
	static void name(void *dv, const void *sv, size_t n)                     \
	{                                                                        \
		T *d = dv;                                                       \
		const T *s = sv;                                                 \
		for (size_t i = 0; i < n; i++) {                                 \
			T a = d[i], b = s[i];                                    \
			d[i] = (EXPR);                                           \
		}                                                                \
	}

#define INT_KERNELS(sfx, T, U)                                                   \
	KERNEL(sum_##sfx, T, (T)((U)a + (U)b))                                   \
	KERNEL(prod_##sfx, T, (T)((U)(1u * (U)a * (U)b)))                        \
	KERNEL(min_##sfx, T, b < a ? b : a)                                      \
	KERNEL(max_##sfx, T, b > a ? b : a)                                      \
	KERNEL(band_##sfx, T, (T)(a & b))                                        \
	KERNEL(bor_##sfx, T, (T)(a | b))                                         \
	KERNEL(bxor_##sfx, T, (T)(a ^ b))                                        \
	KERNEL(land_##sfx, T, (T)(a != 0 && b != 0))                             \
	KERNEL(lor_##sfx, T, (T)(a != 0 || b != 0))                              \
	KERNEL(lxor_##sfx, T, (T)((a != 0) != (b != 0)))

#define FLOAT_KERNELS(sfx, T)                                                    \
	KERNEL(sum_##sfx, T, a + b)                                              \
	KERNEL(prod_##sfx, T, a * b)                                             \
	KERNEL(min_##sfx, T, b < a ? b : a)                                      \
	KERNEL(max_##sfx, T, b > a ? b : a)

INT_KERNELS(u8, u8a, uint8_t)
INT_KERNELS(s8, s8a, uint8_t)
INT_KERNELS(u16, u16a, uint16_t)
INT_KERNELS(s16, s16a, uint16_t)
INT_KERNELS(u32, u32a, uint32_t)
INT_KERNELS(s32, s32a, uint32_t)
INT_KERNELS(u64, u64a, uint64_t)
INT_KERNELS(s64, s64a, uint64_t)
FLOAT_KERNELS(f32, f32a)
FLOAT_KERNELS(f64, f64a)

typedef void kernel_fn(void *d, const void *s, size_t n);

#define INT_ROW(sfx) { sum_##sfx, prod_##sfx, min_##sfx, max_##sfx, band_##sfx, bor_##sfx, \
		       bxor_##sfx, land_##sfx, lor_##sfx, lxor_##sfx }
#define FLOAT_ROW(sfx) { sum_##sfx, prod_##sfx, min_##sfx, max_##sfx }

/* Indexed by enum coll_type, then enum coll_op; NULL where the pair is not
 * allowed. */
static kernel_fn *const kernels[COLL_TYPES][COLL_OPS] = {
	[COLL_BYTE] = INT_ROW(u8),
	[COLL_INT8] = INT_ROW(s8),
	[COLL_UINT8] = INT_ROW(u8),
	[COLL_INT16] = INT_ROW(s16),
	[COLL_UINT16] = INT_ROW(u16),
	[COLL_INT32] = INT_ROW(s32),
	[COLL_UINT32] = INT_ROW(u32),
	[COLL_INT64] = INT_ROW(s64),
	[COLL_UINT64] = INT_ROW(u64),
	[COLL_FLOAT] = FLOAT_ROW(f32),
	[COLL_DOUBLE] = FLOAT_ROW(f64),
};

int reduce_apply(unsigned type, unsigned op, void *dst, const void *src, size_t count)
{
	if (!coll_op_ok(type, op) || !kernels[type][op])
		return -EINVAL;
	if (count)
		kernels[type][op](dst, src, count);
	return 0;
}
