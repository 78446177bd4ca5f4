/* proto/post.h - the post page: how a client posts its collective
 * operations to ferryd through shared memory rather than the control
 * socket.
 *
 * One page per endpoint, in the endpoint's region right after the done page
 * (proto/done.h): at ctl_attached_wire.done_off + PROTO_DONE_BYTES.  A
 * region too small to hold it (a ferryd without it) leaves the client
 * posting on the socket, as before; a client that never uses it leaves
 * posted at 0.  A CTL_COLL on the socket costs the client a system call
 * per operation, and ferryd another to read it: the rank's core is the one
 * that should be computing meanwhile, and with the ranks of a node on one
 * core the posts of an overlapped all-to-all took half the time it did not
 * overlap (make bench-coll, 1 KiB blocks over 4 nodes: 4 posts of 1.1 us
 * per round of 37 us).
 *
 * The client, to post message m (a whole CTL_COLL, header and body, at most
 * PROTO_POST_MSG_MAX bytes): waits until posted - taken < PROTO_POST_SLOTS;
 * writes slot[posted % SLOTS] = { sock_before, len, m } where sock_before
 * is the number of control messages it sent on the socket since its JOIN;
 * stores posted + 1 (release), fences (seq_cst) and loads sleeping: if set,
 * it writes the endpoint's efd_daemon, as for TX records (proto/ring.h's
 * store-buffering handshake).  Before it sends anything on the socket after
 * its JOIN (a MEM, MEM_FREE, GROUP_FREE, LAYOUT, or a post too long for a
 * slot) it waits until taken == posted: what it posted first is taken
 * first.
 *
 * ferryd takes slot[taken % SLOTS] once it has handled sock_before control
 * messages of the endpoint after its JOIN (so a MEM the client sent before
 * a post that uses its memory is read first; the socket wakes ferryd for
 * it), copies it out and decodes the copy as it decodes the socket's
 * messages (it must be exactly one CTL_COLL of len bytes), runs it, and
 * stores taken + 1 (release).  Before it sleeps it stores sleeping = 1,
 * fences (seq_cst) and loads posted once more; it clears sleeping when it
 * wakes.
 *
 * Everything here is the client's to write but taken and sleeping; ferryd
 * trusts none of it: a slot is copied before it is looked at, a len over
 * PROTO_POST_MSG_MAX or under a message header, a message that does not
 * decode, or posted more than PROTO_POST_SLOTS ahead of taken fails the
 * endpoint (its session closes, as for a malformed message on the socket);
 * a sock_before ahead of what the client sent leaves its own posts waiting,
 * no one else's.  ferryd takes at most PROTO_POST_SLOTS posts of an
 * endpoint in a turn of its loop, and none once its session is closing.  Counters
 * are u32 and wrap; differences are taken modulo 2^32.
 */
#ifndef FERRY_PROTO_POST_H
#define FERRY_PROTO_POST_H

#include "done.h"

#include <assert.h>
#include <stddef.h>
#include <stdint.h>

#define PROTO_POST_SLOTS 8u
#define PROTO_POST_SLOT_BYTES 256u
#define PROTO_POST_MSG_MAX (PROTO_POST_SLOT_BYTES - 8u)

struct proto_post_slot {
	uint32_t sock_before;   /* control messages the client sent on the socket first */
	uint32_t len;           /* bytes of msg: one whole control message */
	uint8_t msg[PROTO_POST_MSG_MAX];
};

struct proto_post_shared {
	_Alignas(PROTO_CACHELINE) _Atomic uint32_t posted;    /* client: slots written */
	_Alignas(PROTO_CACHELINE) _Atomic uint32_t taken;     /* ferryd: slots taken */
	_Atomic uint32_t sleeping;                            /* ferryd: wake me (efd_daemon) */
	_Alignas(PROTO_CACHELINE) struct proto_post_slot slot[PROTO_POST_SLOTS];
};
static_assert(sizeof(struct proto_post_slot) == PROTO_POST_SLOT_BYTES, "post slot layout");
static_assert(offsetof(struct proto_post_shared, slot) == 2 * PROTO_CACHELINE, "post page layout");
static_assert(sizeof(struct proto_post_shared) <= 4096, "the post page is one page");

#define PROTO_POST_BYTES 4096u  /* what the region gives it */

#endif
