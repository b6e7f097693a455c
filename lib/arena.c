// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Arenas and the address map.
 *
 * The map has one pointer per 2 MiB of the 47-bit user address space: 512
 * MiB of address space, mapped read-only (reads of untouched parts see the
 * zero page, and a read-only private mapping is not charged to the commit
 * limit); the pages that hold entries of arenas are made writable as
 * arenas appear. Every arena starts on a 2 MiB boundary, so the arena of
 * any address is mrp_map[addr >> 21]: one load.
 *
 * An arena is mapped, made reachable from the map and registered in every
 * attached PD before any of its buffers is handed out; it is unpublished
 * and deregistered before it is unmapped. Large buffers (above 2 MiB) are
 * arenas of their own, parked after free for reuse until trimmed.
 */
#include <errno.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "internal.h"

struct mrp_arena **mrp_map;

int mrp_map_init(void)
{
	void *m = mmap(NULL, MRP_MAP_ENTRIES * sizeof(*mrp_map), PROT_READ,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);

	if (m == MAP_FAILED)
		return -errno;
	mrp_map = m;
	return 0;
}

/* Make the map pages covering [base, base + size) writable. */
static int mrp_map_prepare(uintptr_t base, size_t size)
{
	uintptr_t first = (uintptr_t)&mrp_map[base >> MRP_MAP_SHIFT];
	uintptr_t last = (uintptr_t)&mrp_map[((base + size) >> MRP_MAP_SHIFT) - 1];
	uintptr_t page = 4096;

	first &= ~(page - 1);
	last = (last | (page - 1)) + 1;
	return mprotect((void *)first, last - first, PROT_READ | PROT_WRITE) ? -errno : 0;
}

static void mrp_map_set(uintptr_t base, size_t size, struct mrp_arena *a)
{
	for (size_t i = base >> MRP_MAP_SHIFT; i < (base + size) >> MRP_MAP_SHIFT; i++)
		mrp_map[i] = a;
}

/* Map, register and publish an arena. pool->lock held. */
int mrp_arena_create(struct mrp_pool *pool, size_t size, size_t align,
		     unsigned int cls, struct mrp_arena **out)
{
	struct mrp_region r = { .dmabuf_fd = -1 };
	struct mrp_arena *a;
	int ret;

	if (pool->cfg.max_bytes && pool->mapped + size > pool->cfg.max_bytes)
		return -ENOMEM;
	a = calloc(1, sizeof(*a));
	if (!a)
		return -ENOMEM;
	a->pool = pool;
	a->cls = cls;
	if (cls == MRP_LARGE) {
		a->shift = MRP_MAP_SHIFT;
		a->nblocks = 1;
	} else {
		a->shift = cls + MRP_MIN_SHIFT;
		a->nblocks = (uint32_t)(size >> a->shift);
		a->nfree = a->nblocks;
		a->free_idx = malloc(a->nblocks * sizeof(uint32_t));
		if (!a->free_idx) {
			ret = -ENOMEM;
			goto free_arena;
		}
		/* popped from the top: low addresses first */
		for (uint32_t i = 0; i < a->nblocks; i++)
			a->free_idx[i] = a->nblocks - 1 - i;
	}

	atomic_init(&a->block_mask, mrp_buf_mask(a));
	ret = pool->ops->map(pool, size, align, &r);
	if (ret)
		goto free_arena;
	a->base = r.base;
	a->size = r.size;
	a->handle = r.handle;
	a->dmabuf_fd = r.dmabuf_fd;
	a->locked = r.locked;

	ret = mrp_map_prepare(a->base, a->size);
	if (ret)
		goto unmap;
	ret = mrp_reg_arena(pool, a);
	if (ret)
		goto unmap;

	mrp_map_set(a->base, a->size, a);
	a->next = pool->arenas;
	if (a->next)
		a->next->prev = a;
	pool->arenas = a;
	pool->mapped += a->size;
	if (a->locked)
		pool->locked_bytes += a->size;
	pool->narenas++;
	a->idle_since = mrp_now_ns();
	*out = a;
	return 0;

unmap:
	pool->ops->unmap(pool, &r);
free_arena:
	free(a->free_idx);
	free(a);
	return ret;
}

/* Unpublish, deregister and unmap an arena nobody can reach. pool->lock held. */
void mrp_arena_destroy(struct mrp_pool *pool, struct mrp_arena *a)
{
	struct mrp_region r = {
		.base = a->base, .size = a->size, .handle = a->handle,
		.dmabuf_fd = a->dmabuf_fd, .locked = a->locked,
	};

	mrp_dereg_arena(pool, a);
	mrp_map_set(a->base, a->size, NULL);
	if (a->prev)
		a->prev->next = a->next;
	else
		pool->arenas = a->next;
	if (a->next)
		a->next->prev = a->prev;
	pool->mapped -= a->size;
	if (a->locked)
		pool->locked_bytes -= a->size;
	pool->narenas--;
	pool->ops->unmap(pool, &r);
	free(a->free_idx);
	free(a);
}

/* A large buffer: a parked arena that fits (at most 2x), else a new one. */
int mrp_large_alloc(struct mrp_pool *pool, size_t size, size_t align,
		    struct mrp_arena **out)
{
	size_t len = (size + pool->granule - 1) & ~(pool->granule - 1);
	struct mrp_arena *a, **pp;
	int ret = 0;

	if (align < pool->granule)
		align = pool->granule;
	pthread_mutex_lock(&pool->lock);
	for (pp = &pool->large_free; (a = *pp); pp = &a->av_next)
		if (a->size >= len && a->size / 2 <= len && !(a->base & (align - 1)))
			break;
	if (a) {
		*pp = a->av_next;
		a->av_next = NULL;
	} else {
		ret = mrp_arena_create(pool, len, align, MRP_LARGE, &a);
	}
	if (!ret) {
		a->large_free = false;
		a->large_len = size;
		mrp_add(&pool->large_allocs, 1);
		mrp_add(&pool->large_bytes, a->size);
		*out = a;
	}
	pthread_mutex_unlock(&pool->lock);
	return ret;
}

/* Park a large arena for reuse; trim releases it after the delay. */
void mrp_large_free(struct mrp_pool *pool, struct mrp_arena *a)
{
	pthread_mutex_lock(&pool->lock);
	a->large_free = true;
	a->idle_since = mrp_now_ns();
	a->av_next = pool->large_free;
	pool->large_free = a;
	mrp_add(&pool->large_frees, 1);
	atomic_fetch_sub(&pool->large_bytes, a->size);
	pthread_mutex_unlock(&pool->lock);
}

