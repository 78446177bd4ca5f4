/* daemon/local/user.h - what each Unix user holds on this node, against the
 * limits of the configuration (limits.*): connections without an endpoint,
 * endpoints, jobs, and daemon memory (items queued for slow receivers, the
 * rank tables of jobs).  Each is bounded per uid (user_*) and for the node
 * (max_*, memory_bytes): the node-wide limits protect the daemon, the
 * per-uid ones keep one user from taking what the others share.  Root is a
 * user like any other here: its jobs use the same slots and memory, and the
 * node-wide limits must hold whoever asks.
 *
 * Whatever a client makes the daemon hold is taken here first and given
 * back here, so that the counts are the truth and the limits are checked in
 * one place.  A refusal leaves a sentence for the client (user_refusal) that
 * names the limit and its value.
 *
 * Ownership: a struct user exists while its uid holds something; the call
 * that gives back the last of it frees it.  user_get makes one that holds
 * nothing yet: take something, or user_put it.
 */
#ifndef FERRY_LOCAL_USER_H
#define FERRY_LOCAL_USER_H

#include "../core/conf.h"

#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

struct user {
	struct user *next;
	uid_t uid;
	uint32_t unjoined;              /* sessions without an endpoint */
	uint32_t endpoints;
	uint32_t jobs;                  /* jobs with ranks here */
	uint64_t queue_bytes;           /* chunks of items queued for its endpoints (recq.h) */
	uint64_t table_bytes;           /* its jobs and their rank tables */
	uint64_t coll_bytes;            /* its collectives' streams, scratch and early pieces */
	uint64_t mapped_bytes;          /* its clients' regions ferryd maps (mem.h), until unmapped */
	uint64_t mem_waits;             /* items that waited because memory was used up */
};

/* The same, for every user together. */
extern struct user user_total;

/* Keeps c's limits; c NULL: no limits (unit tests).  user_fini frees what
 * is left (at exit). */
void user_init(const struct conf *c);
void user_fini(void);

/* The user with this uid, made if needed; NULL if out of memory. */
struct user *user_get(uid_t uid);
/* Frees u if it holds nothing. */
void user_put(struct user *u);

/* Each take returns 0, or a negative errno with user_refusal() saying why:
 * -EUSERS or -ENOBUFS for a node-wide limit, -EDQUOT for a per-uid one.
 * Each give hands back what one take took, and may free u. */
int user_take_unjoined(struct user *u);
void user_give_unjoined(struct user *u);
int user_take_endpoint(struct user *u);
void user_give_endpoint(struct user *u);
/* A job created here, and its rank table (bytes). */
int user_take_job(struct user *u, uint64_t bytes);
void user_give_job(struct user *u, uint64_t bytes);
/* Memory for queued items; force: even above the limits (control records
 * that must not wait).  Refusals of queue memory are backpressure, not
 * errors: they are counted in mem_waits, and user_refusal is left alone. */
/* Memory of its jobs' collective operations (coll/coll.c: the executors'
 * streams and scratch, pieces that came early): bounded by its share of
 * daemon memory like its queues.  Returns 0, -EDQUOT or -ENOBUFS (the
 * operation fails, saying so: user_refusal). */
int user_take_coll(struct user *u, uint64_t bytes);
void user_give_coll(struct user *u, uint64_t bytes);

/* Address space for the regions its clients share (mem.h), held until the
 * last operation that uses one lets go: at most USER_MAPPED_MAX per uid and
 * MAPPED_MAX for the node (no memory: the pages are the clients'; but a
 * daemon without address space can take no one's region or job).  Returns
 * 0, -EDQUOT or -ENOBUFS (user_refusal). */
#define USER_MAPPED_MAX (4ull << 40)
#define MAPPED_MAX      (64ull << 40)
int user_take_mapped(struct user *u, uint64_t bytes);
void user_give_mapped(struct user *u, uint64_t bytes);

int user_take_queue(struct user *u, uint64_t bytes, int force);
/* Memory for items parked for u's endpoint (fwd/flow.h): they are already
 * on their way and their senders have been told to stop, so only the
 * node-wide memory_bytes holds them back, not u's own limit: one user's
 * quota must not be able to pause a link that every user shares.  (Each
 * endpoint's parking is bounded too, ep_park_limit.)  Counted as u's. */
int user_take_parked(struct user *u, uint64_t bytes);
void user_give_queue(struct user *u, uint64_t bytes);

/* Why the last take was refused: "uid 1000 has 16 connections without an
 * endpoint (limits.user_unjoined = 16)". */
const char *user_refusal(void);

/* Lines for ferryctl status: the per-user limits, then what each user
 * holds; uid 0 sees every user, anyone else only themselves. */
void user_write_status(FILE *out, uid_t uid);

/* Users holding something. */
uint32_t user_count(void);

#endif
