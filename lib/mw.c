// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Memory windows: a narrow rkey for one buffer. An arena's rkey reaches
 * every buffer in the arena; a type 2 window bound over one buffer reaches
 * only that buffer (on devices that enforce window bounds), and dies when
 * the buffer is freed or the caller invalidates it.
 *
 * The bind is a work request on the caller's QP (type 2 windows are bound
 * through a QP, and a device accepts the window's rkey on that QP only), so
 * its completion arrives on the caller's CQ. Invalidation is
 * ibv_dealloc_mw(): synchronous, needs no QP, and the rkey is dead when it
 * returns. While an arena has windows, its block_mask is all ones so that
 * frees of it take the slow path, which invalidates; arenas without
 * windows pay nothing.
 */
#include <errno.h>
#include <stdlib.h>

#include <infiniband/verbs.h>

#include "internal.h"

struct mrp_mw {
	struct mrp_mw *next;
	uintptr_t buf;			/* start of the buffer it covers */
	struct mrp_arena *arena;
	struct ibv_mw *mw;
};

static void mrp_mw_count(struct mrp_arena *a, int delta)
{
	uint32_t n = atomic_load(&a->nmw) + (uint32_t)delta;

	atomic_store(&a->nmw, n);
	atomic_store(&a->block_mask, mrp_fast_mask(a));
}

MRP_EXPORT int mrp_mw_bind(struct mrp_pool *pool, struct ibv_qp *qp, void *addr,
			   size_t len, unsigned int access, uint64_t wr_id,
			   unsigned int send_flags, uint32_t *rkey)
{
	uintptr_t p = (uintptr_t)addr, start, end;
	struct ibv_send_wr wr = { 0 }, *bad;
	struct mrp_arena *a;
	struct mrp_mw *w;
	int slot, ret;

	if (!pool || !qp || !addr || !len || !rkey)
		return -EINVAL;
	if (mrp_forked(pool))
		return -ECHILD;
	a = mrp_arena_of(p);
	if (!a || a->pool != pool)
		return -EINVAL;
	slot = mrp_pd_slot(pool, qp->pd);
	if (slot < 0 || !(pool->access[slot] & IBV_ACCESS_MW_BIND))
		return -EINVAL;
	if (mrp_slot_dead(pool, slot))
		return -ENODEV;
	/* an arena the PD refused at growth: its MR first */
	if (!mrp_arena_has(a, slot)) {
		ret = mrp_reg_lazy(pool, a, slot);
		if (ret)
			return ret;
	}
	if (a->cls == MRP_LARGE) {
		start = a->base;
		end = a->base + a->size;
	} else {
		start = p & ~mrp_buf_mask(a);
		end = start + mrp_buf_mask(a) + 1;
	}
	if (len > end - p)
		return -EINVAL;	/* one window covers one buffer at most */
	w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	w->mw = ibv_alloc_mw(qp->pd, IBV_MW_TYPE_2);
	if (!w->mw) {
		ret = errno ? -errno : -ENOMEM;
		free(w);
		return ret;
	}
	w->buf = start;
	w->arena = a;

	wr.wr_id = wr_id;
	wr.opcode = IBV_WR_BIND_MW;
	wr.send_flags = send_flags;
	wr.bind_mw.mw = w->mw;
	wr.bind_mw.rkey = ibv_inc_rkey(w->mw->rkey);
	wr.bind_mw.bind_info.mr = a->mr[slot];
	wr.bind_mw.bind_info.addr = p;
	wr.bind_mw.bind_info.length = len;
	wr.bind_mw.bind_info.mw_access_flags = access;

	pthread_mutex_lock(&pool->lock);
	ret = ibv_post_send(qp, &wr, &bad);
	if (ret) {
		pthread_mutex_unlock(&pool->lock);
		ibv_dealloc_mw(w->mw);
		free(w);
		return -ret;
	}
	w->next = pool->mws;
	pool->mws = w;
	mrp_mw_count(a, 1);
	pthread_mutex_unlock(&pool->lock);
	*rkey = wr.bind_mw.rkey;
	return 0;
}

/* Invalidate the windows over the buffer starting at start; how many. */
int mrp_mw_release_buf(struct mrp_pool *pool, struct mrp_arena *a, uintptr_t start)
{
	struct mrp_mw *w, **pp, *dead = NULL;
	int n = 0;

	pthread_mutex_lock(&pool->lock);
	for (pp = &pool->mws; (w = *pp);) {
		if (w->arena != a || w->buf != start) {
			pp = &w->next;
			continue;
		}
		*pp = w->next;
		mrp_mw_count(a, -1);
		w->next = dead;
		dead = w;
	}
	pthread_mutex_unlock(&pool->lock);
	for (w = dead; w; w = dead) {
		dead = w->next;
		ibv_dealloc_mw(w->mw);
		free(w);
		n++;
	}
	return n;
}

MRP_EXPORT int mrp_mw_invalidate(struct mrp_pool *pool, void *addr)
{
	uintptr_t p = (uintptr_t)addr;
	struct mrp_arena *a;

	if (!pool || !addr)
		return -EINVAL;
	if (mrp_forked(pool))
		return -ECHILD;
	a = mrp_arena_of(p);
	if (!a || a->pool != pool)
		return -EINVAL;
	if (!atomic_load(&a->nmw) ||
	    !mrp_mw_release_buf(pool, a, a->cls == MRP_LARGE ? a->base : p & ~mrp_buf_mask(a)))
		return -ENOENT;
	return 0;
}

/* Pool close; a forked child only forgets the parent's windows. */
void mrp_mw_release_all(struct mrp_pool *pool, bool forked)
{
	struct mrp_mw *w, *next;

	for (w = pool->mws; w; w = next) {
		next = w->next;
		if (!forked)
			ibv_dealloc_mw(w->mw);
		free(w);
	}
	pool->mws = NULL;
}

/* PD detach: windows of pd go before its MRs. pool->lock held. */
void mrp_mw_release_pd_locked(struct mrp_pool *pool, struct ibv_pd *pd)
{
	struct mrp_mw *w, **pp;

	for (pp = &pool->mws; (w = *pp);) {
		if (w->mw->pd != pd) {
			pp = &w->next;
			continue;
		}
		*pp = w->next;
		mrp_mw_count(w->arena, -1);
		ibv_dealloc_mw(w->mw);
		free(w);
	}
}
