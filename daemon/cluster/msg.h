/* daemon/cluster/msg.h - the control messages both sides of the job protocol
 * send (wire_ctl_* payloads, proto/wire.h), encoded and handed to the
 * forwarding layer's control items (fwd/ctlq.h).
 */
#ifndef FERRY_CLUSTER_MSG_H
#define FERRY_CLUSTER_MSG_H

#include "../../proto/wire.h"

#include <stdint.h>
#include <sys/types.h>

struct wire_ctl_fail;

/* JOIN, LEAVE or REJECT (err: positive errno) about rank of job (uid, name).
 * JOIN and LEAVE carry this daemon's incarnation. */
void msg_rank(uint32_t node, uint32_t type, uid_t uid, const char *name, uint32_t size, uint32_t rank, int err,
	      uint32_t coll_started);

/* FAIL to node, saying text (cut to WIRE_FAIL_TEXT_MAX bytes; f->text_len
 * is set from it). */
void msg_fail(uint32_t node, const struct wire_ctl_fail *f, const char *text);

/* LOST of kind (enum wire_lost_kind) to node about lost (the link from here
 * to it, or its restart as incarnation restarted_as), saying text (cut as
 * FAIL's). */
void msg_lost(uint32_t node, uint32_t lost, uint32_t kind, uint64_t restarted_as, const char *text);

/* HAVE, GO (step 0) or STEP about job id of generation gen. */
void msg_job(uint32_t node, uint32_t type, uint32_t job, uint8_t gen, uint32_t step);
/* HAVE with a link cost (wire_ctl_step: α in ns, β in ps per byte). */
void msg_have(uint32_t node, uint32_t job, uint8_t gen, uint32_t alpha_ns, uint32_t beta_ps);
/* GO with the job's link cost and its tail (wire.h: the forced algorithms,
 * t->nfn runtime functions fns). */
void msg_go(uint32_t node, uint32_t job, uint8_t gen, uint32_t alpha_ns, uint32_t beta_ps,
	    const struct wire_ctl_go_tail *t, const struct wire_go_fn *fns);

#endif
