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
 *
 * Windows are listed per buffer (arena->mw_index) and pool-wide (for PD
 * detach and close), both under pool->lock, which is held only to link
 * and unlink: the bind is posted without it, so a slow or busy QP never
 * stalls the pool. A window is freed by whoever drops its last reference:
 * one for being listed, one for the bind being posted. So a free of the
 * buffer racing its bind (a misuse: the application still holds the
 * buffer it is binding) unlists the window, and the binder deallocates it
 * once its post returned, never while the post reads it.
 */
#include <errno.h>
#include <stdlib.h>

#include <infiniband/verbs.h>

#include "internal.h"

struct mrp_mw {
	struct mrp_mw *next, **pprev;		/* pool->mws */
	struct mrp_mw *buf_next, **buf_pprev;	/* arena->mw_index[buffer] */
	uintptr_t buf;			/* start of the buffer it covers */
	struct mrp_arena *arena;
	struct ibv_mw *mw;
	_Atomic uint32_t refs;		/* listed + bind being posted */
};

static void mrp_mw_count(struct mrp_arena *a, int delta)
{
	uint32_t n = atomic_load(&a->nmw) + (uint32_t)delta;

	atomic_store(&a->nmw, n);
	atomic_store(&a->block_mask, mrp_fast_mask(a));
}

static struct mrp_mw **mrp_mw_head(struct mrp_arena *a, uintptr_t buf)
{
	return &a->mw_index[a->cls == MRP_LARGE ? 0 : mrp_buf_index(a, buf)];
}

/* List w in the pool and under its buffer. pool->lock held. */
static int mrp_mw_link(struct mrp_pool *pool, struct mrp_mw *w)
{
	struct mrp_arena *a = w->arena;
	struct mrp_mw **head;

	if (!a->mw_index) {
		a->mw_index = calloc(a->nblocks, sizeof(*a->mw_index));
		if (!a->mw_index)
			return -ENOMEM;
	}
	head = mrp_mw_head(a, w->buf);
	w->buf_next = *head;
	if (*head)
		(*head)->buf_pprev = &w->buf_next;
	*head = w;
	w->buf_pprev = head;
	w->next = pool->mws;
	if (pool->mws)
		pool->mws->pprev = &w->next;
	pool->mws = w;
	w->pprev = &pool->mws;
	mrp_mw_count(a, 1);
	return 0;
}

/* Take w off both lists; false if it was not listed. pool->lock held. */
static bool mrp_mw_unlink(struct mrp_mw *w)
{
	if (!w->pprev)
		return false;
	*w->pprev = w->next;
	if (w->next)
		w->next->pprev = w->pprev;
	*w->buf_pprev = w->buf_next;
	if (w->buf_next)
		w->buf_next->buf_pprev = w->buf_pprev;
	w->pprev = NULL;
	w->buf_pprev = NULL;
	mrp_mw_count(w->arena, -1);
	return true;
}

static void mrp_mw_put(struct mrp_mw *w)
{
	if (atomic_fetch_sub(&w->refs, 1) == 1) {
		ibv_dealloc_mw(w->mw);
		free(w);
	}
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
		start = mrp_buf_start(a, p);
		if (!start)	/* a fine class's tail */
			return -EINVAL;
		end = start + a->bsize;
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
	atomic_init(&w->refs, 2);

	wr.wr_id = wr_id;
	wr.opcode = IBV_WR_BIND_MW;
	wr.send_flags = send_flags;
	wr.bind_mw.mw = w->mw;
	wr.bind_mw.rkey = ibv_inc_rkey(w->mw->rkey);
	wr.bind_mw.bind_info.mr = a->mr[slot];
	wr.bind_mw.bind_info.addr = p;
	wr.bind_mw.bind_info.length = len;
	wr.bind_mw.bind_info.mw_access_flags = access;

	/* listed before the post, so that a free from now on invalidates it */
	pthread_mutex_lock(&pool->lock);
	ret = mrp_mw_link(pool, w);
	pthread_mutex_unlock(&pool->lock);
	if (ret) {
		ibv_dealloc_mw(w->mw);
		free(w);
		return ret;
	}
	ret = ibv_post_send(qp, &wr, &bad);
	if (ret) {
		pthread_mutex_lock(&pool->lock);
		if (mrp_mw_unlink(w))
			mrp_mw_put(w);	/* the list's reference */
		pthread_mutex_unlock(&pool->lock);
		mrp_mw_put(w);
		return -ret;
	}
	mrp_mw_put(w);
	*rkey = wr.bind_mw.rkey;
	return 0;
}

/* Invalidate the windows over the buffer starting at start; how many. */
int mrp_mw_release_buf(struct mrp_pool *pool, struct mrp_arena *a, uintptr_t start)
{
	struct mrp_mw *w, *dead = NULL;
	int n = 0;

	pthread_mutex_lock(&pool->lock);
	while (a->mw_index && (w = *mrp_mw_head(a, start))) {
		mrp_mw_unlink(w);
		w->buf_next = dead;
		dead = w;
	}
	pthread_mutex_unlock(&pool->lock);
	for (w = dead; w; w = dead) {
		dead = w->buf_next;
		mrp_mw_put(w);
		n++;
	}
	return n;
}

MRP_EXPORT int mrp_mw_invalidate(struct mrp_pool *pool, void *addr)
{
	uintptr_t p = (uintptr_t)addr, start;
	struct mrp_arena *a;

	if (!pool || !addr)
		return -EINVAL;
	if (mrp_forked(pool))
		return -ECHILD;
	a = mrp_arena_of(p);
	if (!a || a->pool != pool)
		return -EINVAL;
	start = a->cls == MRP_LARGE ? a->base : mrp_buf_start(a, p);
	if (!start)	/* a fine class's tail */
		return -EINVAL;
	if (!atomic_load(&a->nmw) || !mrp_mw_release_buf(pool, a, start))
		return -ENOENT;
	return 0;
}

/*
 * Pool close (nothing else runs on the pool); a forked child only forgets
 * the parent's windows.
 */
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

/*
 * PD detach: windows of pd go before its MRs. pool->lock held; no bind
 * naming pd runs (the detach must not race with calls naming it), so each
 * reference dropped here is the last.
 */
void mrp_mw_release_pd_locked(struct mrp_pool *pool, struct ibv_pd *pd)
{
	struct mrp_mw *w, *next;

	for (w = pool->mws; w; w = next) {
		next = w->next;
		if (w->mw->pd != pd)
			continue;
		mrp_mw_unlink(w);
		mrp_mw_put(w);
	}
}
