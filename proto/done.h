/* proto/done.h - the completion page: how ferryd tells a client that its
 * collective operations ended, through shared memory rather than the
 * control socket.
 *
 * One page per endpoint, in the endpoint's region after the rings
 * (ctl_attached_wire.done_off).  A COLL_DONE on the socket costs the
 * client two or three system calls per operation (reading it, and reading
 * again to hear that nothing more is there) on the core that should be
 * computing while the daemons run its collectives; reading this page costs
 * it none.
 *
 * ferryd, for an operation that succeeded: if fewer than PROTO_DONE_SLOTS
 * records are published and not consumed, it writes rec[published %
 * SLOTS] = group << 32 | seq, then stores published + 1 (release), fences
 * (seq_cst) and, if armed is set, writes the endpoint's collectives
 * eventfd (efd_coll, the fourth fd of ATTACHED, which ferry_fd() watches).  Otherwise - a failure, whose text only the
 * socket carries, or no free slot - it sends COLL_DONE on the socket as
 * before and then stores sock_done + 1.
 *
 * The client: takes records from consumed up to published (acquire) and
 * stores consumed; reads the socket when sock_done moved since it last
 * did (or now and then, to hear of the daemon's end).  Before it sleeps
 * it stores armed = 1, fences (seq_cst) and loads published once more (the
 * store-buffering handshake of proto/ring.h: the daemon sees the flag or
 * the client sees the record).  It clears armed once it stops waiting
 * (client/coll.c: who armed, and for how long).
 *
 * Only the client's own requests depend on what it writes here (consumed,
 * armed): ferryd reads consumed to keep its unconsumed records, and a
 * client that lies about it loses its own completions to the socket path
 * or overwrites them; ferryd never trusts it further.  Counters are u32 and
 * wrap; differences are taken modulo 2^32.
 */
#ifndef FERRY_PROTO_DONE_H
#define FERRY_PROTO_DONE_H

#include "ring.h"

#include <assert.h>
#include <stdint.h>

#define PROTO_DONE_SLOTS 64u    /* per endpoint (a client has at most 64 requests: ferry.h) */

struct proto_done_shared {
	_Alignas(PROTO_CACHELINE) _Atomic uint32_t published; /* ferryd: records written */
	_Atomic uint32_t sock_done;                         /* ferryd: COLL_DONEs sent on the socket */
	_Alignas(PROTO_CACHELINE) _Atomic uint32_t consumed;  /* client: records taken */
	_Atomic uint32_t armed;                             /* client: wake me when you publish */
	_Alignas(PROTO_CACHELINE) _Atomic uint64_t rec[PROTO_DONE_SLOTS]; /* group << 32 | seq */
};
static_assert(sizeof(struct proto_done_shared) == 2 * PROTO_CACHELINE + 8 * PROTO_DONE_SLOTS,
	      "done page layout");
static_assert(sizeof(struct proto_done_shared) <= 4096, "the done page is one page");

#define PROTO_DONE_BYTES 4096u  /* what the region gives it */

#endif
