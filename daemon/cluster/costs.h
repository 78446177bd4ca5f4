/* daemon/cluster/costs.h - this node's runtime functions (plan/cost.h;
 * seed 004 §4): the table the collectives' measured times feed
 * (coll/coll.c, on-line, from every operation that completed), kept in
 * daemon.state_dir/costs across restarts, and sent in GO to the nodes of
 * every job this node is the home of (home.c) with the algorithms its
 * configuration forces: a job's nodes all choose with the home's functions,
 * fixed when the job starts, so they choose alike.
 *
 * The file is written at most every COSTS_SAVE_NS after a change, and when
 * the daemon stops, through a temporary file renamed over it (a daemon
 * killed meanwhile leaves the last whole file).  A file that cannot be read
 * or parsed is logged and set aside: the table starts empty.  Its points
 * name no user or job, but they are every user's operations: only root sees
 * them (ferryctl costs).
 *
 * Ownership: the table is this module's, made at costs_init, gone at
 * costs_fini.
 */
#ifndef FERRY_CLUSTER_COSTS_H
#define FERRY_CLUSTER_COSTS_H

#include "../core/conf.h"
#include "../plan/cost.h"
#include "../../proto/wire.h"

#include <stdint.h>
#include <stdio.h>

#define COSTS_SAVE_NS (10ull * 1000000000u)
#define COSTS_FILE "costs"

/* Loads c->state_dir/costs if there is one ("" state_dir: memory only).
 * 0, or -ENOMEM. */
int costs_init(const struct conf *c);
/* Saves the table if it changed, and frees it. */
void costs_fini(void);

/* A time t_us measured for an operation (cost_table_add's arguments). */
void costs_add(uint32_t fam, uint32_t alg, uint32_t nodes, uint32_t ppn, uint64_t bytes, const struct cost_x *x,
	       double gamma_ns, double beta_ns, double t_us);

/* GO's tail for a job this node is the home of: the forced algorithms of
 * its configuration and its fitted functions (fns: WIRE_GO_FNS_MAX). */
void costs_go(struct wire_ctl_go_tail *t, struct wire_go_fn *fns);

/* The table as its file has it, and the fitted functions as comments
 * ("# fn FAMILY ALGORITHM tau_us T tc_ns_per_byte C points N"). */
void costs_write(FILE *out);

#endif
