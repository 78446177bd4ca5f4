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

#include <errno.h>
#include <stdlib.h>

struct vreg {
	struct frame_reg base;  /* first: frame.reg points here */
	struct ibv_mr *mr;
	struct frame *f;
	struct vreg *prev, *next;
};

static struct vreg *registrations;

static void deregister(struct frame *f)
{
	struct vreg *r = (struct vreg *)f->reg;

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

void verbs_mr_release_all(void)
{
	while (registrations)
		deregister(registrations->f);
}
