/* daemon/core/closer.h - closing what clients may have put files into,
 * without ever waiting in the event loop.
 *
 * close() can block for as long as someone else decides:
 *   - a TCP socket with SO_LINGER set and data its peer does not read waits
 *     out its linger time (for ever, at the largest);
 *   - a file on FUSE waits for the file system's server (FLUSH), one on a
 *     hard NFS mount for the server;
 *   - a tty waits for its output to drain.
 * A client can pass any of those with SCM_RIGHTS.  The kernel puts them
 * into ferryd when it reads the message, and releases the ones still in
 * flight (sent, not read) when ferryd closes the session's socket, in
 * ferryd's own thread either way.  So every descriptor a client may have
 * put a file into is received and closed through here:
 *   - every descriptor that comes with a message, all of them
 *     (closer_recv has room for the most one message carries, SCM_MAX_FD;
 *     the kernel releases those it could not put into ferryd in ferryd's
 *     thread: at its descriptor limit, that is the exposure);
 *   - a memfd (F_GET_SEALS answers: shared memory, whose close never waits)
 *     at once;
 *   - a session's socket shut down (nothing can arrive after that) and read
 *     out, within a bound, its descriptors closed as here; then at once if
 *     nothing is left in it (a descriptor never travels without a byte, and
 *     MSG_OOB's byte is read inline: session.c sets SO_OOBINLINE before the
 *     first read);
 *   - anything else (a socket, a file on FUSE, what did not read out) by a
 *     thread of the user's own, started when needed and ended after a
 *     second with nothing to close, which turns a socket's SO_LINGER off
 *     first: a close that never returns holds that user's thread, and only
 *     that user's later descriptors wait behind it.
 * Rule: a module that holds such a descriptor never calls close() on it,
 * and reads a client's socket only through closer_recv.
 *
 * Bounds: from CLOSER_MAX_WAITING of a user's descriptors waiting on, the
 * session layer reads none of the user's sockets (it ends the sessions and
 * refuses new connections, and such a socket goes to the thread whole),
 * and from CLOSER_TOTAL_MAX of everyone's it accepts no connection for a
 * while.  What one user can make wait beyond its bound is one read's
 * descriptors (253) per session it holds, and one descriptor per refused
 * connection; Linux 6.16's SO_PASSRIGHTS, off until a client has joined,
 * would close that.
 *
 * Left to the kernel: before Linux 6.8 (Debian 12 has 6.1), closing any
 * AF_UNIX socket while descriptors are in flight anywhere runs the socket
 * garbage collector in the closing thread, which releases the files of
 * unreachable cycles there: every process's exposure on such a kernel, not
 * ferryd's alone.
 *
 * The threads turn SO_LINGER off, close, free and take a mutex, nothing
 * else (the sandbox allows new threads, not processes: core/sandbox.def). */
#ifndef FERRY_CLOSER_H
#define FERRY_CLOSER_H

#include <stdint.h>
#include <sys/types.h>

#define CLOSER_MAX_WAITING 32   /* a user's descriptors waiting: its sockets are no longer read */
#define CLOSER_TOTAL_MAX 16384  /* everyone's: ferryd stops accepting connections for a while */

/* Closes fd, a descriptor a client of user uid sent: at once if it is a
 * memfd, else by the user's thread.  If no thread can be started (no
 * memory, no threads), fd is kept open, and logged: an open descriptor is
 * the lesser harm than a loop that waits. */
void closer_close(int fd, uid_t uid);

/* Closes fd, a connected Unix stream socket ferryd accepted from a client
 * of user uid (a session's): shut down, read out (CLOSER_DRAIN_MAX
 * messages at most, none once CLOSER_MAX_WAITING of the user's wait), then
 * at once if nothing is left in it, else by the user's thread.  The
 * client reads what was sent to it before. */
void closer_close_conn(int fd, uid_t uid);

#define CLOSER_FDS_MAX 253       /* descriptors one message may carry (the kernel's SCM_MAX_FD) */

/* recvmsg() of up to len bytes of a client's socket fd (of user uid), with
 * MSG_DONTWAIT and flags: every descriptor that came with them is closed
 * as above, but the first if keep points to -1, which is stored there
 * instead.  *nfds_p (if not NULL): how many came, CLOSER_FDS_MAX + 1 if
 * the kernel had more than it could put into ferryd.  Returns the bytes,
 * 0 at EOF, or -errno. */
int closer_recv(int fd, void *buf, size_t len, int flags, uid_t uid, int *keep, unsigned *nfds_p);

/* How many of user uid's descriptors wait to be closed (0 if none); of
 * every user's. */
unsigned closer_waiting(uid_t uid);
unsigned closer_waiting_all(void);

struct closer_stats {
	uint64_t queued;                /* descriptors handed to a thread */
	uint64_t threads;               /* threads started */
	uint64_t kept;                  /* kept open: no thread could be started */
};
extern struct closer_stats closer_stats;

#endif
