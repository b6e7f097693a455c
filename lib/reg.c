// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Registration: each arena once in each attached PD (ibv_reg_dmabuf_mr when
 * the backend exports a dma-buf for it, else ibv_reg_mr), and the counted
 * fallback of malloc + per-buffer registration when arenas run out.
 */
#include <errno.h>
#include <stdlib.h>
#include <sys/mman.h>

#include <infiniband/verbs.h>

#include "internal.h"

/* Register [addr, addr + len) in the PD of slot, timed into the stats. */
static struct ibv_mr *mrp_reg(struct mrp_pool *pool, struct ibv_pd *pd, int slot,
			      void *addr, size_t len, int dmabuf_fd)
{
	int access = (int)pool->access[slot];
	uint64_t t0 = mrp_now_ns(), dt, max;
	struct ibv_mr *mr;

	if (dmabuf_fd >= 0)
		mr = ibv_reg_dmabuf_mr(pd, 0, len, (uintptr_t)addr, dmabuf_fd, access);
	else
		mr = ibv_reg_mr(pd, addr, len, access);
	dt = mrp_now_ns() - t0;
	mrp_add(&pool->regs, 1);
	mrp_add(&pool->reg_ns, dt);
	max = mrp_get(&pool->reg_ns_max);
	while (dt > max && !atomic_compare_exchange_weak(&pool->reg_ns_max, &max, dt))
		;
	return mr;
}

static int mrp_reg_one(struct mrp_pool *pool, struct ibv_pd *pd,
		       struct mrp_arena *a, int slot)
{
	struct ibv_mr *mr = mrp_reg(pool, pd, slot, (void *)a->base, a->size,
				    a->dmabuf_fd);

	if (!mr)
		return errno ? -errno : -EIO;
	a->mr[slot] = mr;
	a->keys[slot].lkey = mr->lkey;
	a->keys[slot].rkey = mr->rkey;
	return 0;
}

/*
 * ibv_dereg_mr, counted when it fails (EBUSY with windows still bound,
 * a device gone): the MR is given up either way, the caller decides what
 * becomes of the memory it covered.
 */
static int mrp_dereg_mr(struct mrp_pool *pool, struct ibv_mr *mr)
{
	int ret = ibv_dereg_mr(mr);

	if (!ret)
		return 0;
	mrp_add(&pool->dereg_errors, 1);
	return ret > 0 ? -ret : -EIO;
}

static int mrp_dereg_one(struct mrp_pool *pool, struct mrp_arena *a, int slot)
{
	int ret;

	if (!a->mr[slot])
		return 0;
	ret = mrp_dereg_mr(pool, a->mr[slot]);
	a->mr[slot] = NULL;
	a->keys[slot].lkey = 0;
	a->keys[slot].rkey = 0;
	return ret;
}

/* A new arena in every attached PD, all or nothing. pool->lock held. */
int mrp_reg_arena(struct mrp_pool *pool, struct mrp_arena *a)
{
	int ret;

	for (int s = 0; s < MRP_MAX_PDS; s++) {
		struct ibv_pd *pd = atomic_load(&pool->pds[s]);

		if (!pd)
			continue;
		ret = mrp_reg_one(pool, pd, a, s);
		if (ret) {
			/* not published yet: a failure here is only marked */
			if (mrp_dereg_arena(pool, a))
				a->retired = true;
			return ret;
		}
	}
	return 0;
}

/* Every MR of the arena; the first error, after trying them all. */
int mrp_dereg_arena(struct mrp_pool *pool, struct mrp_arena *a)
{
	int ret = 0, err;

	for (int s = 0; s < MRP_MAX_PDS; s++) {
		err = mrp_dereg_one(pool, a, s);
		if (err && !ret)
			ret = err;
	}
	return ret;
}

/* A PD's MR of an arena in use: a failure retires the arena. */
static void mrp_dereg_live(struct mrp_pool *pool, struct mrp_arena *a, int slot)
{
	if (mrp_dereg_one(pool, a, slot))
		mrp_arena_retire(pool, a);
}

static int mrp_fb_reg(struct mrp_pool *pool, struct ibv_pd *pd,
		      struct mrp_fallback *fb, int slot)
{
	fb->mr[slot] = mrp_reg(pool, pd, slot, fb->addr, fb->size, -1);
	return fb->mr[slot] ? 0 : (errno ? -errno : -EIO);
}

static int mrp_fb_dereg(struct mrp_pool *pool, struct mrp_fallback *fb)
{
	int ret = 0;

	for (int s = 0; s < MRP_MAX_PDS; s++)
		if (fb->mr[s]) {
			if (mrp_dereg_mr(pool, fb->mr[s]))
				ret = -EBUSY;
			fb->mr[s] = NULL;
		}
	return ret;
}

MRP_EXPORT int mrp_attach_pd(struct mrp_pool *pool, struct ibv_pd *pd,
			     unsigned int access)
{
	struct mrp_fallback *fb;
	struct mrp_arena *a;
	int slot = -1, ret = 0;

	if (!pool || !pd)
		return -EINVAL;
	if (mrp_forked(pool))
		return -ECHILD;
	pthread_mutex_lock(&pool->lock);
	for (int s = 0; s < MRP_MAX_PDS; s++) {
		struct ibv_pd *cur = atomic_load(&pool->pds[s]);

		if (cur == pd) {
			ret = -EEXIST;
			goto unlock;
		}
		if (!cur && slot < 0)
			slot = s;
	}
	if (slot < 0) {
		ret = -ENOSPC;
		goto unlock;
	}
	/*
	 * The slot is published last (release): whoever finds the PD in
	 * pds[] finds its keys in every arena.
	 */
	pool->access[slot] = access;
	for (a = pool->arenas; a && !ret; a = a->next)
		ret = mrp_reg_one(pool, pd, a, slot);
	for (fb = pool->fallbacks; fb && !ret; fb = fb->next)
		ret = mrp_fb_reg(pool, pd, fb, slot);
	if (ret) {
		for (a = pool->arenas; a; a = a->next)
			mrp_dereg_live(pool, a, slot);
		for (fb = pool->fallbacks; fb; fb = fb->next)
			if (fb->mr[slot]) {
				mrp_dereg_mr(pool, fb->mr[slot]);
				fb->mr[slot] = NULL;
			}
	} else {
		atomic_store(&pool->pds[slot], pd);
	}
unlock:
	pthread_mutex_unlock(&pool->lock);
	return ret;
}

MRP_EXPORT int mrp_detach_pd(struct mrp_pool *pool, struct ibv_pd *pd)
{
	struct mrp_fallback *fb;
	struct mrp_arena *a;
	int slot;

	if (!pool || !pd)
		return -EINVAL;
	if (mrp_forked(pool))
		return -ECHILD;
	pthread_mutex_lock(&pool->lock);
	slot = mrp_pd_slot(pool, pd);
	if (slot < 0) {
		pthread_mutex_unlock(&pool->lock);
		return -ENOENT;
	}
	atomic_store(&pool->pds[slot], NULL);
	mrp_mw_release_pd_locked(pool, pd);
	/*
	 * An MR that fails to go retires its arena: the PD's rkey may still
	 * reach that memory, so it must not carry other buffers. The detach
	 * itself completes (dereg_errors counts what failed).
	 */
	for (a = pool->arenas; a; a = a->next)
		mrp_dereg_live(pool, a, slot);
	for (fb = pool->fallbacks; fb; fb = fb->next)
		if (fb->mr[slot]) {
			if (mrp_dereg_mr(pool, fb->mr[slot]))
				fb->leak = true;
			fb->mr[slot] = NULL;
		}
	pthread_mutex_unlock(&pool->lock);
	return 0;
}

/* Unmap unless a deregistration of it ever failed: then only forget it. */
static void mrp_fb_unmap(struct mrp_fallback *fb)
{
	if (!fb->leak)
		munmap(fb->addr, fb->len);
	free(fb);
}

/*
 * Arenas ran out and the caller allows it: a mapping of its own +
 * registration, counted. Like arenas, not inherited by a child.
 */
int mrp_fallback_alloc(struct mrp_pool *pool, size_t size, size_t align,
		       int slot, struct mrp_buf *buf)
{
	size_t page = mrp_os_page_size();
	size_t al = align > page ? align : page;
	struct mrp_fallback *fb;
	int ret = 0;

	if (size <= MRP_MAX_CLASS) {
		/* keep the class size and alignment a pool buffer would have */
		size = mrp_class_size(mrp_size_class(size > align ? size : align));
		al = size > al ? size : al;
	}
	if (size > SIZE_MAX - page)
		return -ENOMEM;
	fb = calloc(1, sizeof(*fb));
	if (!fb)
		return -ENOMEM;
	fb->size = size;
	fb->len = (size + page - 1) & ~(page - 1);
	fb->addr = mrp_os_map_aligned(fb->len, al, PROT_READ | PROT_WRITE,
				      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (!fb->addr) {
		free(fb);
		return -ENOMEM;
	}
	if (madvise(fb->addr, fb->len, MADV_DONTFORK)) {
		ret = -errno;
		mrp_fb_unmap(fb);
		return ret;
	}
	pthread_mutex_lock(&pool->lock);
	for (int s = 0; s < MRP_MAX_PDS && !ret; s++) {
		struct ibv_pd *pd = atomic_load(&pool->pds[s]);

		if (pd)
			ret = mrp_fb_reg(pool, pd, fb, s);
	}
	if (ret) {
		pthread_mutex_unlock(&pool->lock);
		if (mrp_fb_dereg(pool, fb))
			fb->leak = true;
		mrp_fb_unmap(fb);
		return ret;
	}
	fb->next = pool->fallbacks;
	pool->fallbacks = fb;
	buf->addr = fb->addr;
	buf->size = size;
	buf->lkey = slot >= 0 ? fb->mr[slot]->lkey : 0;
	buf->rkey = slot >= 0 ? fb->mr[slot]->rkey : 0;
	pthread_mutex_unlock(&pool->lock);
	mrp_add(&pool->fb_allocs, 1);
	mrp_add(&pool->fb_bytes, size);
	return 0;
}

int mrp_fallback_free(struct mrp_pool *pool, void *addr)
{
	struct mrp_fallback *fb, **pp;

	pthread_mutex_lock(&pool->lock);
	for (pp = &pool->fallbacks; (fb = *pp); pp = &fb->next)
		if (fb->addr == addr)
			break;
	if (fb)
		*pp = fb->next;
	pthread_mutex_unlock(&pool->lock);
	if (!fb)
		return -EINVAL;
	if (mrp_fb_dereg(pool, fb))
		fb->leak = true;
	atomic_fetch_sub(&pool->fb_bytes, fb->size);
	mrp_add(&pool->fb_frees, 1);
	mrp_fb_unmap(fb);
	return 0;
}

/* Fallback buffers are rare: a list walk, not the O(1) map. */
int mrp_fallback_lookup(struct mrp_pool *pool, const void *addr, int slot,
			struct mrp_buf *buf)
{
	uintptr_t p = (uintptr_t)addr;
	struct mrp_fallback *fb;
	int ret = -ENOENT;

	pthread_mutex_lock(&pool->lock);
	for (fb = pool->fallbacks; fb; fb = fb->next) {
		if (p < (uintptr_t)fb->addr || p - (uintptr_t)fb->addr >= fb->size)
			continue;
		buf->addr = fb->addr;
		buf->size = fb->size;
		buf->lkey = slot >= 0 ? fb->mr[slot]->lkey : 0;
		buf->rkey = slot >= 0 ? fb->mr[slot]->rkey : 0;
		ret = 0;
		break;
	}
	pthread_mutex_unlock(&pool->lock);
	return ret;
}

/*
 * Pool close. In a forked child the MRs belong to the parent and the
 * buffers were not inherited (their range may hold something else now):
 * just forget.
 */
void mrp_fallback_release_all(struct mrp_pool *pool, bool forked)
{
	struct mrp_fallback *fb, *next;

	for (fb = pool->fallbacks; fb; fb = next) {
		next = fb->next;
		if (forked) {
			free(fb);
			continue;
		}
		if (mrp_fb_dereg(pool, fb))
			fb->leak = true;
		mrp_fb_unmap(fb);
	}
	pool->fallbacks = NULL;
}
