/* proto/coll.h - what the collectives name on every side: the element types
 * and reduction operations (libferry passes them to ferryd, daemons put them
 * in schedules and frames).  The values are ferry.h's enum ferry_type and
 * enum ferry_op (DESIGN.md, "Collectives"): fixed, append only.
 */
#ifndef FERRY_PROTO_COLL_H
#define FERRY_PROTO_COLL_H

#include <stddef.h>
#include <stdint.h>

enum coll_type {
	COLL_BYTE = 0, COLL_INT8 = 1, COLL_UINT8 = 2, COLL_INT16 = 3, COLL_UINT16 = 4,
	COLL_INT32 = 5, COLL_UINT32 = 6, COLL_INT64 = 7, COLL_UINT64 = 8,
	COLL_FLOAT = 9, COLL_DOUBLE = 10,
	COLL_TYPES = 11,
};

enum coll_op {
	COLL_SUM = 0, COLL_PROD = 1, COLL_MIN = 2, COLL_MAX = 3, COLL_BAND = 4,
	COLL_BOR = 5, COLL_BXOR = 6, COLL_LAND = 7, COLL_LOR = 8, COLL_LXOR = 9,
	COLL_OPS = 10,
};

/* Bytes in one element of type t, or 0 if t is no type. */
static inline size_t coll_type_size(unsigned t)
{
	static const uint8_t size[COLL_TYPES] = { 1, 1, 1, 2, 2, 4, 4, 8, 8, 4, 8 };

	return t < COLL_TYPES ? size[t] : 0;
}

/* 1 if op applies to type t: sum, prod, min and max to every type; the bit
 * and logical operations to the integer types and bytes only.  Else 0. */
static inline int coll_op_ok(unsigned t, unsigned op)
{
	if (t >= COLL_TYPES || op >= COLL_OPS)
		return 0;
	return op <= COLL_MAX || (t != COLL_FLOAT && t != COLL_DOUBLE);
}

#endif
