/* daemon/core/closer.c - see closer.h.
 *
 * Ownership: closer_close takes the descriptor.  A user's struct cuser
 * (its queue and condition) is made by closer_close, under the mutex, when
 * the user has no thread, and freed by that thread when it ends, under the
 * same mutex: it is on cl.users exactly as long as its thread runs.  The
 * loop's thread only appends and counts; a closing thread only takes from
 * its own user's queue. */
#include "closer.h"
#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define CLOSER_IDLE_S      1                    /* a thread with nothing to close ends after this */
#define CLOSER_DRAIN_MAX   64                  /* messages read from a socket before it closes */
#define CLOSER_STACK_BYTES (256u * 1024u)       /* close() needs little; sanitizers more */

struct waiting {
	int fd;
	struct waiting *next;
};

struct cuser {
	uid_t uid;
	unsigned waiting;               /* queued, and the one being closed */
	struct waiting *head, **tail;
	pthread_cond_t more;            /* (CLOCK_MONOTONIC) something was queued */
	struct cuser *next;
};

static struct {
	pthread_mutex_t mu;
	struct cuser *users;            /* those with a running thread */
} cl = { .mu = PTHREAD_MUTEX_INITIALIZER };

struct closer_stats closer_stats;

static struct cuser *find(uid_t uid)
{
	struct cuser *u;

	for (u = cl.users; u && u->uid != uid; u = u->next)
		;
	return u;
}

/* A socket of another family than AF_UNIX (TCP above all): its close
 * waits only for SO_LINGER, turned off here, in the user's thread (a
 * setsockopt takes the socket's lock, which a client's send can hold for as
 * long as its memory takes to read: never in the loop).  Some families
 * wait on close whatever (TIPC, SMC): that thread waits. */
static void defuse(int fd)
{
	struct linger off = { .l_onoff = 0 };
	socklen_t len = sizeof(int);
	int dom = -1;

	if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &dom, &len) == 0 && dom != AF_UNIX)
		(void)setsockopt(fd, SOL_SOCKET, SO_LINGER, &off, sizeof(off));
}

static void *closing(void *arg)
{
	struct cuser *u = arg;

	pthread_mutex_lock(&cl.mu);
	for (;;) {
		struct waiting *w = u->head;
		struct timespec until;

		if (w) {
			u->head = w->next;
			if (!u->head)
				u->tail = &u->head;
			pthread_mutex_unlock(&cl.mu);
			defuse(w->fd);  /* what may wait: never with the mutex held */
			close(w->fd);
			free(w);
			pthread_mutex_lock(&cl.mu);
			u->waiting--;
			continue;
		}
		clock_gettime(CLOCK_MONOTONIC, &until);
		until.tv_sec += CLOSER_IDLE_S;
		if (pthread_cond_timedwait(&u->more, &cl.mu, &until) == ETIMEDOUT && !u->head)
			break;
	}
	for (struct cuser **pp = &cl.users; *pp; pp = &(*pp)->next)
		if (*pp == u) {
			*pp = u->next;
			break;
		}
	pthread_mutex_unlock(&cl.mu);
	pthread_cond_destroy(&u->more);
	free(u);
	return NULL;
}

/* A user's entry with its thread running, under the mutex; NULL if none
 * could be made (errno set). */
static struct cuser *start(uid_t uid)
{
	pthread_condattr_t ca;
	pthread_attr_t ta;
	pthread_t t;
	struct cuser *u = calloc(1, sizeof(*u));
	int ret;

	if (!u)
		return NULL;
	u->uid = uid;
	u->tail = &u->head;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	ret = pthread_cond_init(&u->more, &ca);
	pthread_condattr_destroy(&ca);
	if (ret) {
		free(u);
		errno = ret;
		return NULL;
	}
	pthread_attr_init(&ta);
	pthread_attr_setdetachstate(&ta, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&ta, CLOSER_STACK_BYTES);
	/* On the list before it runs: it takes the mutex (held here) first. */
	u->next = cl.users;
	cl.users = u;
	ret = pthread_create(&t, &ta, closing, u);
	pthread_attr_destroy(&ta);
	if (ret) {
		cl.users = u->next;
		pthread_cond_destroy(&u->more);
		free(u);
		errno = ret;
		return NULL;
	}
	closer_stats.threads++;
	return u;
}

/* Hands fd to user uid's thread. */
static void queue(int fd, uid_t uid)
{
	struct waiting *w = malloc(sizeof(*w));
	struct cuser *u;

	if (!w)
		goto keep;
	w->fd = fd;
	w->next = NULL;
	pthread_mutex_lock(&cl.mu);
	u = find(uid);
	if (!u && !(u = start(uid))) {
		pthread_mutex_unlock(&cl.mu);
		free(w);
		goto keep;
	}
	*u->tail = w;
	u->tail = &w->next;
	u->waiting++;
	pthread_cond_signal(&u->more);
	pthread_mutex_unlock(&cl.mu);
	closer_stats.queued++;
	return;
keep:
	closer_stats.kept++;
	log_rl_warn("descriptor %d of a client of uid %u: no thread to close it (%m); it stays open", fd,
		    (unsigned)uid);
}

void closer_close(int fd, uid_t uid)
{
	if (fd < 0)
		return;
	if (fcntl(fd, F_GET_SEALS) >= 0)
		close(fd);
	else
		queue(fd, uid);
}

int closer_recv(int fd, void *buf, size_t len, int flags, uid_t uid, int *keep, unsigned *nfds_p)
{
	union {
		char buf[CMSG_SPACE(CLOSER_FDS_MAX * sizeof(int))];
		struct cmsghdr align;
	} cbuf;
	struct iovec iov = { .iov_base = buf, .iov_len = len };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf.buf,
			     .msg_controllen = sizeof(cbuf.buf) };
	ssize_t n = recvmsg(fd, &mh, flags | MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
	unsigned k = 0;

	if (n < 0)
		return -errno;
	for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm)) {
		if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
			continue;
		for (size_t i = 0; i < (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int); i++, k++) {
			int got;

			memcpy(&got, CMSG_DATA(cm) + i * sizeof(int), sizeof(got));
			if (keep && *keep < 0)
				*keep = got;
			else
				closer_close(got, uid);
		}
	}
	if (nfds_p)
		*nfds_p = mh.msg_flags & MSG_CTRUNC ? CLOSER_FDS_MAX + 1 : k;
	return (int)n;
}

void closer_close_conn(int fd, uid_t uid)
{
	char buf[4096];
	int n = -1;

	if (fd < 0)
		return;
	/* Once shut down, nothing more can be queued to it (the sender's
	 * side checks under the socket's lock).  What is in it is read here,
	 * within a bound, its descriptors closed as above (the bytes of a
	 * MSG_OOB too), unless as many of the user's wait already: if that
	 * empties it, its close releases nothing of the client's.  Else it
	 * goes to the thread whole, one descriptor, what is in it with it. */
	shutdown(fd, SHUT_RDWR);
	setsockopt(fd, SOL_SOCKET, SO_OOBINLINE, &(int){ 1 }, sizeof(int));
	for (int i = 0; i < CLOSER_DRAIN_MAX && closer_waiting(uid) < CLOSER_MAX_WAITING &&
			closer_recv(fd, buf, sizeof(buf), 0, uid, NULL, NULL) > 0; i++)
		;
	if (ioctl(fd, FIONREAD, &n) == 0 && n == 0)
		close(fd);
	else
		queue(fd, uid);
}

unsigned closer_waiting_all(void)
{
	unsigned n = 0;

	pthread_mutex_lock(&cl.mu);
	for (const struct cuser *u = cl.users; u; u = u->next)
		n += u->waiting;
	pthread_mutex_unlock(&cl.mu);
	return n;
}

unsigned closer_waiting(uid_t uid)
{
	struct cuser *u;
	unsigned n;

	pthread_mutex_lock(&cl.mu);
	u = find(uid);
	n = u ? u->waiting : 0;
	pthread_mutex_unlock(&cl.mu);
	return n;
}
