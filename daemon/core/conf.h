/* daemon/core/conf.h - ferryd configuration (/etc/ferry/ferry.conf, libconfig syntax).
 * The only module that touches libconfig.  The file format and every default
 * are documented in conf/ferry.conf and the README.
 */
#ifndef FERRY_CONF_H
#define FERRY_CONF_H

#include "../plan/route.h"
#include "../../proto/ctl.h"
#include "../../proto/job.h"

#include <limits.h>
#include <sched.h>
#include <stddef.h>
#include <stdint.h>

#define CONF_DEFAULT_PATH  "/etc/ferry/ferry.conf"
#define CONF_DEFAULT_PORT  7470
#define CONF_HOST_MAX      255

enum conf_physical { CONF_SWITCHED, CONF_TORUS, CONF_MESH };
enum conf_virtual { CONF_VIRT_AUTO, CONF_VIRT_DIRECT, CONF_VIRT_DIMS, CONF_VIRT_PHYSICAL };
enum conf_transport { CONF_TRANSPORT_AUTO, CONF_TRANSPORT_TCP, CONF_TRANSPORT_VERBS };

/* A job's direct rings on a node (proto_direct_region_bytes: about
 * direct.max_ranks² × direct.ring_bytes), which every client of the job
 * maps: 64 GiB and a little (64 ranks of 16 MiB rings, each with its
 * header page). */
#define CONF_DIRECT_REGION_MAX ((64ull << 30) + (64ull * 64 + 1) * 4096)

/* Per-user limits not set in the file are this share of the node-wide one. */
#define CONF_USER_SHARE_CLIENTS   2     /* limits.user_clients = max_clients / 2 */
#define CONF_USER_SHARE_UNJOINED  4     /* limits.user_unjoined = max_unjoined / 4 */
#define CONF_USER_SHARE_MEMORY    4     /* limits.user_memory_bytes = memory_bytes / 4 */

struct conf_node {
	char host[CONF_HOST_MAX + 1];
	uint16_t port;
};

struct conf {
	char path[PATH_MAX];            /* where it came from, for messages */
	/* cluster */
	char cluster_name[PROTO_NAME_MAX + 1];
	uint32_t nnodes;
	struct conf_node *nodes;        /* nnodes entries, owned */
	/* topology */
	int physical;                   /* enum conf_physical */
	int virtual_kind;               /* enum conf_virtual */
	struct route route;             /* the resolved routing topology */
	/* aggregation */
	uint32_t buffer_bytes;          /* 0 = one item per frame */
	uint32_t flush_us;
	/* transport */
	int transport;                  /* enum conf_transport */
	char verbs_device[64];          /* "" or the RDMA device the node's address must be on */
	char tcp_congestion[16];        /* TCP links' congestion control; "" = the system's */
	int link_probe;                 /* transport.probe: measure a new link at once (net/peer.c) */
	/* limits (node-wide, then per uid; see conf/ferry.conf) */
	uint32_t max_clients;           /* endpoints */
	uint32_t max_unjoined;          /* sessions without an endpoint (joining, or ferryctl's) */
	uint64_t ring_bytes;            /* per direction per endpoint */
	uint64_t memory_bytes;          /* queued items and rank tables, all users */
	uint64_t pending_bytes;         /* queued items for one endpoint */
	uint64_t link_bytes;            /* frames not yet acknowledged by one peer */
	uint32_t user_clients;          /* endpoints of one uid */
	uint32_t user_unjoined;         /* sessions without an endpoint of one uid */
	uint32_t user_jobs;             /* jobs of one uid with ranks on this node */
	uint64_t user_memory_bytes;     /* queued items and rank tables of one uid */
	uint32_t join_timeout_ms;       /* from connecting to JOIN (or a tool's HELLO) */
	uint32_t admin_idle_ms;         /* a tool's session with nothing moving */
	/* direct (proto/direct.h) */
	uint32_t direct_max_ranks;      /* local ranks of a job up to which they get direct rings; 0: never */
	uint64_t direct_ring_bytes;     /* data bytes of each direct ring (ring_size_ok) */
	/* security */
	char key_file[PATH_MAX];        /* "" = insecure mode */
	int integrity;                  /* every frame authenticated (default: on with a key) */
	int encrypt;                    /* and encrypted (needs integrity) */
	/* collectives: the algorithm forced on every job this node is the home
	 * of, per family (enum ctl_fam; carried in GO's tail); 0 automatic,
	 * else the algorithm + 1 (proto/ctl.h's tables) */
	uint8_t coll_force[CTL_FAMS];
	/* logging */
	int log_level;                  /* LOG_* */
	/* daemon */
	char runtime_dir[PATH_MAX];
	char state_dir[PATH_MAX];       /* the runtime functions' file; "": kept in memory only */
	uint32_t spin_us;
	int seccomp;                    /* enum sandbox_mode (core/sandbox.h) */
	cpu_set_t cpus;                 /* daemon.cpus; empty: not pinned (the default) */
};

/* Fills c with the built-in defaults: a one-node cluster on localhost. */
void conf_defaults(struct conf *c);

/* Loads and validates a configuration.  On error returns -EINVAL (or -ENOENT
 * for a missing file) and writes "file:line: what is wrong" into err.  On
 * success c owns memory that conf_free releases. */
int conf_load_file(struct conf *c, const char *path, char *err, size_t errlen);
int conf_load_string(struct conf *c, const char *text, const char *name, char *err, size_t errlen);

void conf_free(struct conf *c);

/* Writes set in the CPU-list syntax of daemon.cpus ("1", "2-3,6"; "none"
 * if it is empty) into buf, cut short if len is too small. */
void conf_cpus_str(const cpu_set_t *set, char *buf, size_t len);

/* Name of the node's host:port, for logs. */
const char *conf_physical_name(int physical);
const char *conf_transport_name(int transport);

#endif
