/* daemon/main/query.h - the answers to ferryctl's queries (status, stats,
 * debug): what every layer reports, put together. */
#ifndef FERRY_MAIN_QUERY_H
#define FERRY_MAIN_QUERY_H

#include "../core/conf.h"

#include <stdint.h>
#include <stdio.h>

struct ucred;

/* stopping points at main's flag, read at each query. */
void query_init(const struct conf *c, uint32_t self, uint64_t start_ns, const int *stopping);

/* A sess_query_fn (local/session.h). */
int query_answer(uint32_t what, uint32_t arg, const struct ucred *cred, FILE *out);

#endif
