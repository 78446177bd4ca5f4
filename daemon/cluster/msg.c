/* daemon/cluster/msg.c - see msg.h. */
#include "msg.h"
#include "../fwd/ctlq.h"
#include "../net/peer.h"
#include "../../proto/wire.h"

#include <string.h>

void msg_rank(uint32_t node, uint32_t type, uid_t uid, const char *name, uint32_t size, uint32_t rank, int err,
	      uint32_t coll_started)
{
	struct wire_ctl_rank r = { .uid = uid, .size = size, .rank = rank, .err = err,
				   .incarnation = err ? 0 : peer_self_incarnation(),
				   .name_len = (uint32_t)strlen(name), .coll_started = coll_started };
	uint8_t buf[sizeof(r) + PROTO_NAME_MAX];
	ssize_t n = wire_ctl_encode_rank(buf, sizeof(buf), &r, name);

	if (n > 0)
		ctlq_send(node, type, buf, (uint32_t)n);
}

void msg_fail(uint32_t node, const struct wire_ctl_fail *f, const char *text)
{
	struct wire_ctl_fail m = *f;
	uint8_t buf[sizeof(m) + WIRE_FAIL_TEXT_MAX];
	ssize_t n;

	m.text_len = (uint32_t)strnlen(text, WIRE_FAIL_TEXT_MAX);
	n = wire_ctl_encode_fail(buf, sizeof(buf), &m, text);
	if (n > 0)
		ctlq_send(node, WIRE_CTL_FAIL, buf, (uint32_t)n);
}

void msg_lost(uint32_t node, uint32_t lost, uint32_t kind, uint64_t restarted_as, const char *text)
{
	struct wire_ctl_lost m = { .node = lost, .kind = kind, .incarnation = restarted_as,
				   .text_len = (uint32_t)strnlen(text, WIRE_FAIL_TEXT_MAX) };
	uint8_t buf[sizeof(m) + WIRE_FAIL_TEXT_MAX];
	ssize_t n = wire_ctl_encode_lost(buf, sizeof(buf), &m, text);

	if (n > 0)
		ctlq_send(node, WIRE_CTL_LOST, buf, (uint32_t)n);
}

void msg_job(uint32_t node, uint32_t type, uint32_t job, uint8_t gen, uint32_t step)
{
	struct wire_ctl_step m = { .job = job, .step = step, .gen = gen };
	uint8_t buf[sizeof(m)];
	ssize_t len = wire_ctl_encode_step(buf, sizeof(buf), &m);

	ctlq_send(node, type, buf, (uint32_t)len);
}

void msg_have(uint32_t node, uint32_t job, uint8_t gen, uint32_t alpha_ns, uint32_t beta_ps)
{
	struct wire_ctl_step m = { .job = job, .gen = gen, .alpha_ns = alpha_ns, .beta_ps = beta_ps };
	uint8_t buf[sizeof(m)];
	ssize_t len = wire_ctl_encode_step(buf, sizeof(buf), &m);

	ctlq_send(node, WIRE_CTL_HAVE, buf, (uint32_t)len);
}

void msg_go(uint32_t node, uint32_t job, uint8_t gen, uint32_t alpha_ns, uint32_t beta_ps,
	    const struct wire_ctl_go_tail *t, const struct wire_go_fn *fns)
{
	struct wire_ctl_step m = { .job = job, .gen = gen, .alpha_ns = alpha_ns, .beta_ps = beta_ps };
	uint8_t buf[sizeof(m) + sizeof(*t) + WIRE_GO_FNS_MAX * sizeof(*fns)];
	ssize_t len = wire_ctl_encode_go(buf, sizeof(buf), &m, t, fns);

	if (len > 0)
		ctlq_send(node, WIRE_CTL_GO, buf, (uint32_t)len);
}
