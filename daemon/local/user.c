/* daemon/local/user.c - see user.h. */
#include "user.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>

struct user user_total;

static struct {
	const struct conf *conf;        /* NULL: no limits */
	struct user *all;
	uint32_t count;
	char refusal[200];
} users;

void user_init(const struct conf *c)
{
	users.conf = c;
}

void user_fini(void)
{
	while (users.all) {
		struct user *u = users.all;

		users.all = u->next;
		free(u);
	}
	users.count = 0;
}

static int refuse(int err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int refuse(int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(users.refusal, sizeof(users.refusal), fmt, ap);
	va_end(ap);
	return err;
}

const char *user_refusal(void)
{
	return users.refusal;
}

struct user *user_get(uid_t uid)
{
	struct user *u;

	for (u = users.all; u; u = u->next)
		if (u->uid == uid)
			return u;
	u = calloc(1, sizeof(*u));
	if (!u) {
		refuse(-ENOMEM, "ferryd is out of memory");
		return NULL;
	}
	u->uid = uid;
	u->next = users.all;
	users.all = u;
	users.count++;
	return u;
}

void user_put(struct user *u)
{
	struct user **pp;

	if (u->unjoined || u->endpoints || u->jobs || u->queue_bytes || u->table_bytes || u->coll_bytes ||
	    u->mapped_bytes)
		return;
	for (pp = &users.all; *pp != u; pp = &(*pp)->next)
		;
	*pp = u->next;
	users.count--;
	free(u);
}

uint32_t user_count(void)
{
	return users.count;
}

/* --- connections and endpoints --- */

int user_take_unjoined(struct user *u)
{
	const struct conf *c = users.conf;

	/* When both are reached, the user's own limit is named, which is what
	 * the user can do something about (unless it is the node's too). */
	if (c && u->unjoined >= c->user_unjoined && c->user_unjoined < c->max_unjoined)
		return refuse(-EDQUOT, "uid %u has %u connections without an endpoint (limits.user_unjoined = %u)",
			      (unsigned)u->uid, u->unjoined, c->user_unjoined);
	if (c && user_total.unjoined >= c->max_unjoined)
		return refuse(-EUSERS, "too many connections without an endpoint (limits.max_unjoined = %u)",
			      c->max_unjoined);
	u->unjoined++;
	user_total.unjoined++;
	return 0;
}

void user_give_unjoined(struct user *u)
{
	u->unjoined--;
	user_total.unjoined--;
	user_put(u);
}

int user_take_endpoint(struct user *u)
{
	const struct conf *c = users.conf;

	if (c && u->endpoints >= c->user_clients && c->user_clients < c->max_clients)
		return refuse(-EDQUOT, "uid %u has %u endpoints (limits.user_clients = %u)", (unsigned)u->uid,
			      u->endpoints, c->user_clients);
	if (c && user_total.endpoints >= c->max_clients)
		return refuse(-EUSERS, "too many clients (limits.max_clients = %u)", c->max_clients);
	u->endpoints++;
	user_total.endpoints++;
	return 0;
}

void user_give_endpoint(struct user *u)
{
	u->endpoints--;
	user_total.endpoints--;
	user_put(u);
}

/* --- memory --- */

/* Whether bytes more fit in u's memory and the node's; 0 or the refusal. */
static int mem_fits(const struct user *u, uint64_t bytes)
{
	const struct conf *c = users.conf;

	if (!c)
		return 0;
	if (u->queue_bytes + u->table_bytes + u->coll_bytes + bytes > c->user_memory_bytes)
		return -EDQUOT;
	if (user_total.queue_bytes + user_total.table_bytes + user_total.coll_bytes + bytes > c->memory_bytes)
		return -ENOBUFS;
	return 0;
}

int user_take_job(struct user *u, uint64_t bytes)
{
	const struct conf *c = users.conf;
	int ret;

	if (c && u->jobs >= c->user_jobs)
		return refuse(-EDQUOT, "uid %u has %u jobs on this node (limits.user_jobs = %u)", (unsigned)u->uid,
			      u->jobs, c->user_jobs);
	ret = mem_fits(u, bytes);
	if (ret == -EDQUOT)
		return refuse(ret, "its rank table needs %llu bytes, and uid %u holds %llu bytes of daemon memory "
			      "already (limits.user_memory_bytes = %llu)", (unsigned long long)bytes,
			      (unsigned)u->uid, (unsigned long long)(u->queue_bytes + u->table_bytes),
			      (unsigned long long)c->user_memory_bytes);
	if (ret == -ENOBUFS)
		return refuse(ret, "its rank table needs %llu bytes, more than ferryd has left "
			      "(limits.memory_bytes = %llu)", (unsigned long long)bytes,
			      (unsigned long long)c->memory_bytes);
	u->jobs++;
	u->table_bytes += bytes;
	user_total.jobs++;
	user_total.table_bytes += bytes;
	return 0;
}

void user_give_job(struct user *u, uint64_t bytes)
{
	u->jobs--;
	u->table_bytes -= bytes;
	user_total.jobs--;
	user_total.table_bytes -= bytes;
	user_put(u);
}

int user_take_coll(struct user *u, uint64_t bytes)
{
	const struct conf *c = users.conf;
	int ret = mem_fits(u, bytes);

	if (ret == -EDQUOT)
		return refuse(ret, "a collective operation needs %llu bytes more, and uid %u holds %llu bytes of "
			      "daemon memory already (limits.user_memory_bytes = %llu)", (unsigned long long)bytes,
			      (unsigned)u->uid, (unsigned long long)(u->queue_bytes + u->table_bytes + u->coll_bytes),
			      (unsigned long long)c->user_memory_bytes);
	if (ret == -ENOBUFS)
		return refuse(ret, "a collective operation needs %llu bytes more than ferryd has left "
			      "(limits.memory_bytes = %llu)", (unsigned long long)bytes,
			      (unsigned long long)c->memory_bytes);
	u->coll_bytes += bytes;
	user_total.coll_bytes += bytes;
	return 0;
}

void user_give_coll(struct user *u, uint64_t bytes)
{
	u->coll_bytes -= bytes;
	user_total.coll_bytes -= bytes;
	user_put(u);
}

int user_take_mapped(struct user *u, uint64_t bytes)
{
	if (bytes > USER_MAPPED_MAX - u->mapped_bytes)
		return refuse(-EDQUOT, "uid %u's clients share %llu bytes with ferryd already, at most %llu",
			      (unsigned)u->uid, (unsigned long long)u->mapped_bytes,
			      (unsigned long long)USER_MAPPED_MAX);
	if (bytes > MAPPED_MAX - user_total.mapped_bytes)
		return refuse(-ENOBUFS, "ferryd maps %llu bytes of its clients' memory already, at most %llu",
			      (unsigned long long)user_total.mapped_bytes, (unsigned long long)MAPPED_MAX);
	u->mapped_bytes += bytes;
	user_total.mapped_bytes += bytes;
	return 0;
}

void user_give_mapped(struct user *u, uint64_t bytes)
{
	u->mapped_bytes -= bytes;
	user_total.mapped_bytes -= bytes;
	user_put(u);
}

int user_take_queue(struct user *u, uint64_t bytes, int force)
{
	int ret = force ? 0 : mem_fits(u, bytes);

	if (ret < 0) {
		u->mem_waits++;
		user_total.mem_waits++;
		return ret;
	}
	u->queue_bytes += bytes;
	user_total.queue_bytes += bytes;
	return 0;
}

int user_take_parked(struct user *u, uint64_t bytes)
{
	const struct conf *c = users.conf;

	if (c && user_total.queue_bytes + user_total.table_bytes + bytes > c->memory_bytes) {
		u->mem_waits++;
		user_total.mem_waits++;
		return -ENOBUFS;
	}
	return user_take_queue(u, bytes, 1);
}

void user_give_queue(struct user *u, uint64_t bytes)
{
	u->queue_bytes -= bytes;
	user_total.queue_bytes -= bytes;
	user_put(u);
}

/* --- status --- */

void user_write_status(FILE *out, uid_t uid)
{
	const struct conf *c = users.conf;

	if (c)
		fprintf(out, "limits per user: %u endpoints, %u connections without an endpoint, %u jobs, "
			"%llu bytes of memory\n", c->user_clients, c->user_unjoined, c->user_jobs,
			(unsigned long long)c->user_memory_bytes);
	for (const struct user *u = users.all; u; u = u->next) {
		if (uid != 0 && u->uid != uid)
			continue;
		fprintf(out, "  user %u: %u endpoints, %u connections without an endpoint, %u jobs, memory %llu "
			"bytes (queued items %llu, rank tables %llu), waited for memory %llu times\n",
			(unsigned)u->uid, u->endpoints, u->unjoined, u->jobs,
			(unsigned long long)(u->queue_bytes + u->table_bytes), (unsigned long long)u->queue_bytes,
			(unsigned long long)u->table_bytes, (unsigned long long)u->mem_waits);
	}
}
