/* daemon/cluster/costs.h - this node's runtime functions (plan/cost.h;
 * seed 004 §4): the tables the collectives' measured times feed
 * (coll/coll.c "Runtime functions", on-line, from the operations that
 * completed), kept in daemon.state_dir across restarts, and sent in GO to
 * the nodes of every job this node is the home of (home.c) with the
 * algorithms its configuration forces: a job's nodes all choose with the
 * home's functions, fixed when the job starts, so they choose alike.
 *
 * One table per user (uid), in state_dir/costs.UID: a user's operations
 * teach only that user's table, and a job is sent its user's functions,
 * and for the families and algorithms its user's table has none, root's
 * (costs.0: what an administrator's runs measured, shared by everyone).
 * So what one user's jobs do (a rank that posts late, a client that
 * reports long times) moves only that user's choices; only root's own
 * operations reach the shared table.  At most COSTS_USERS tables are held;
 * the least recently used other than root's is saved and let go for a new
 * one (it is read back when needed).
 *
 * The files are written at most every COSTS_SAVE_NS after a change, and
 * when the daemon stops, through a temporary file synced and renamed over
 * the old one (a crash or a power loss meanwhile leaves the last whole
 * file).  A file that cannot be read or parsed is logged and set aside
 * (.bad): that table starts empty.
 *
 * Ownership: the tables are this module's, made when first needed, freed
 * when let go or at costs_fini.
 */
#ifndef FERRY_CLUSTER_COSTS_H
#define FERRY_CLUSTER_COSTS_H

#include "../core/conf.h"
#include "../plan/cost.h"
#include "../../proto/wire.h"

#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#define COSTS_SAVE_NS (10ull * 1000000000u)
#define COSTS_USERS 32

/* Sets up ("" state_dir: tables in memory only).  0, or -ENOMEM. */
int costs_init(const struct conf *c);
/* Saves the tables that changed, and frees them. */
void costs_fini(void);

/* A time t_us of an operation of uid's measured (cost_table_add's
 * arguments). */
void costs_add(uid_t uid, uint32_t fam, uint32_t alg, uint32_t nodes, uint32_t ppn, uint64_t bytes,
	       const struct cost_x *x, double gamma_ns, double beta_ns, double t_us);

/* GO's tail for a job of uid this node is the home of: the forced
 * algorithms of its configuration, and uid's functions, root's where uid
 * has none (fns: WIRE_GO_FNS_MAX). */
void costs_go(uid_t uid, struct wire_ctl_go_tail *t, struct wire_go_fn *fns);

/* uid's table as its file has it, and the functions a job of uid would get
 * as comments ("# fn FAMILY ALGORITHM tau_us T tc_ns_per_byte C points N
 * [root's]"). */
void costs_write(FILE *out, uid_t uid);

#endif
