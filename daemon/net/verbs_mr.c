/* daemon/net/verbs_mr.c - registrations of frames (they are sent without a
 * copy); see verbs.h.
 *
 * Every registration is on one list: a removed device must be let go of
 * entirely, every MR and then the PD.  Drivers without "disassociate" (rxe,
 * siw) hold the removal (rdma link delete, a hot unplug) until every user has
 * closed everything on the device.
 *
 * Ownership: a registration belongs to its frame (frame.h): freeing the
 * frame's memory releases it; verbs_mr_release_all releases them all early
 * (the frames stay, unregistered, and are registered again when next sent).
 */
#include "verbs.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>

struct vreg {
	struct frame_reg base;  /* first: frame.reg points here */
	struct ibv_mr *mr;
	struct frame *f;
	struct vreg *prev, *next;
};

static struct vreg *registrations;
static uint64_t reg_bytes;

static void deregister(struct frame *f)
{
	struct vreg *r = (struct vreg *)f->reg;

	/* No SEND reads it: frame.c frees a held frame only at its last
	 * unhold, and links drop their holds before the device goes. */
	assert(!f->holds);
	reg_bytes -= r->mr->length;
	ibv_dereg_mr(r->mr);
	if (r->prev)
		r->prev->next = r->next;
	else
		registrations = r->next;
	if (r->next)
		r->next->prev = r->prev;
	free(r);
	f->reg = NULL;
}

int verbs_mr_register(struct frame *f)
{
	struct vreg *r;

	if (f->reg)
		return 0;
	r = malloc(sizeof(*r));
	if (!r)
		return -ENOMEM;
	r->mr = ibv_reg_mr(verbs.pd, f->data, f->cap, IBV_ACCESS_LOCAL_WRITE);
	if (!r->mr) {
		int ret = -errno;

		free(r);
		return ret;
	}
	reg_bytes += r->mr->length;
	r->base.release = deregister;
	r->f = f;
	r->prev = NULL;
	r->next = registrations;
	if (registrations)
		registrations->prev = r;
	registrations = r;
	f->reg = &r->base;
	f->lkey = r->mr->lkey;
	return 0;
}

uint64_t verbs_mr_bytes(void)
{
	return reg_bytes;
}

void verbs_mr_release_all(void)
{
	while (registrations)
		deregister(registrations->f);
}
