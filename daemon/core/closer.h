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
 * put a file into is closed through closer_close():
 *   - a memfd (F_GET_SEALS answers: shared memory, whose close never waits)
 *     at once;
 *   - a session's socket, once shut down (nothing can arrive after that),
 *     at once if nothing is left in it to read (a descriptor never travels
 *     without a byte): every session's socket but a misbehaving client's;
 *   - anything else by a thread of the user's own, started when needed and
 *     ended after a second with nothing to close: a close that never
 *     returns holds that user's thread, and only that user's later
 *     descriptors wait behind it.
 * Rule: a module that holds such a descriptor never calls close() on it.
 *
 * closer_waiting(uid) is how many of a user's descriptors wait; the session
 * layer refuses the user's new connections from CLOSER_MAX_WAITING on.  Not
 * a full bound: a refused connection that came with bytes (and so perhaps
 * descriptors) waits too, one per connection the user makes; Linux 6.16's
 * SO_PASSRIGHTS, off until a client has joined, would close that gap.
 *
 * The threads close, free and take a mutex, nothing else (the sandbox
 * allows new threads, not processes: core/sandbox.def). */
#ifndef FERRY_CLOSER_H
#define FERRY_CLOSER_H

#include <stdint.h>
#include <sys/types.h>

#define CLOSER_MAX_WAITING 32   /* a user's descriptors waiting: no new connections from there on */

/* Closes fd, a descriptor a client of user uid sent: at once if it is a
 * memfd, else by the user's thread.  If no thread can be started (no
 * memory, no threads), fd is kept open, and logged: an open descriptor is
 * the lesser harm than a loop that waits. */
void closer_close(int fd, uid_t uid);

/* Closes fd, a connected Unix stream socket ferryd accepted from a client
 * of user uid (a session's): shut down, then at once if nothing is left in
 * it to read, else by the user's thread.  The client reads what was sent
 * before. */
void closer_close_conn(int fd, uid_t uid);

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
