// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Allocation, free and address lookup. The fast paths pop or push the
 * calling thread's bin and read the arena through the map: no lock, no
 * system call, one unlikely exit each into a noinline slow path that
 * validates, refills, grows, falls back and reports.
 */
#include <errno.h>
#include <stddef.h>
#include <string.h>

#include "internal.h"

/*
 * Keys of arena a in slot (0 without a PD) into buf; an arena the PD
 * refused at growth is registered now. 0 or the error of mrp_reg_lazy().
 */
static int mrp_fill_keys(struct mrp_pool *pool, struct mrp_arena *a, int slot,
			 struct mrp_buf *buf)
{
	int ret;

	buf->lkey = 0;
	buf->rkey = 0;
	if (slot < 0)
		return 0;
	if (!mrp_arena_has(a, slot)) {
		ret = mrp_reg_lazy(pool, a, slot);
		if (ret)
			return ret;
	}
	buf->lkey = a->keys[slot].lkey;
	buf->rkey = a->keys[slot].rkey;
	return 0;
}

/*
 * Checks shared by the calls that take a PD: the pool is this process's
 * (-ECHILD in a forked child), @pd, when given, is attached (-EINVAL) and
 * not marked dead (-ENODEV). *slot becomes its key slot, or stays -1
 * without a PD.
 */
static int mrp_caller_slot(struct mrp_pool *pool, struct ibv_pd *pd, int *slot)
{
	if (mrp_forked(pool))
		return -ECHILD;
	if (pd) {
		*slot = mrp_pd_slot(pool, pd);
		if (*slot < 0)
			return -EINVAL;
		if (mrp_slot_dead(pool, *slot))
			return -ENODEV;
	}
	return 0;
}

/*
 * The bin's top buffer lacks keys of slot: bring up one that has them, or
 * register the top one's arena now. The cached buffers stay either way.
 */
static int mrp_bin_keyed_top(struct mrp_pool *pool, struct mrp_bin *bin, int slot)
{
	uint32_t top = mrp_bin_count(bin) - 1;

	for (uint32_t i = top; i-- > 0;) {
		if (mrp_arena_has(bin->base[i].a, slot)) {
			struct mrp_ent e = bin->base[i];

			bin->base[i] = bin->base[top];
			bin->base[top] = e;
			return 0;
		}
	}
	return mrp_reg_lazy(pool, bin->base[top].a, slot);
}

static MRP_NOINLINE int mrp_alloc_slow(struct mrp_pool *pool, size_t size,
				       size_t align, struct ibv_pd *pd,
				       struct mrp_buf *buf)
{
	struct mrp_tcache *tc;
	struct mrp_arena *a;
	struct mrp_bin *bin;
	unsigned int cls;
	uint32_t n;
	size_t need;
	int slot = -1;
	int ret;

	if (!pool || !buf || !size || (align & (align - 1)))
		return -EINVAL;
	ret = mrp_caller_slot(pool, pd, &slot);
	if (ret)
		return ret;
	need = size > align ? size : align;
	if (need > MRP_MAX_CLASS || align > MRP_MAX_CLASS) {
		if (size > SIZE_MAX / 2)
			return -ENOMEM;
		ret = mrp_large_alloc(pool, size, align, &a);
		if (ret < 0)
			goto fallback;
		ret = mrp_fill_keys(pool, a, slot, buf);
		if (ret) {
			mrp_large_free(pool, a->base);
			goto keyless;
		}
		buf->addr = (void *)a->base;
		buf->size = a->size;
		return 0;
	}

	cls = mrp_size_class(pool, need);
	tc = mrp_tcache_get(pool);
	if (!tc)
		return -ENOMEM;
	bin = &tc->bins[cls];
	/* 0 also for a top left below base by an abandoned pop: set again below */
	n = mrp_bin_count(bin);
	if (!n) {
		ret = mrp_depot_refill(pool, cls, bin);
		if (ret < 0) {
			mrp_bin_set_count(bin, 0);
			mrp_tcache_put(tc);
			goto fallback;
		}
		n = mrp_bin_count(bin);
	}
	if (slot >= 0 && !mrp_arena_has(bin->base[n - 1].a, slot)) {
		ret = mrp_bin_keyed_top(pool, bin, slot);
		if (ret) {
			mrp_tcache_put(tc);
			goto keyless;
		}
	}
	/* Keys before the pop: a PD marked dead meanwhile fails here. */
	ret = mrp_fill_keys(pool, bin->base[n - 1].a, slot, buf);
	if (ret) {
		mrp_tcache_put(tc);
		goto keyless;
	}
	mrp_inc(&tc->misses);
	buf->addr = bin->base[--n].p;
	mrp_bin_set_count(bin, n);
	mrp_inc(&bin->allocs);
	mrp_tcache_put(tc);
	buf->size = mrp_class_size(cls);
	/* no background thread to publish the counters: the slow path does */
	if (!atomic_load_explicit(&pool->bg_running, memory_order_relaxed))
		mrp_publish(pool, false);
	return 0;

keyless:
	/*
	 * A PD dead or detached meanwhile has no buffer to get; one that
	 * refused the arena (RLIMIT_MEMLOCK, say) may still take the small
	 * registration of a fallback buffer, as when growth itself failed.
	 */
	if (ret == -ENODEV || ret == -EINVAL)
		return ret;
fallback:
	if (!pool->cfg.fallback)
		return ret;
	return mrp_fallback_alloc(pool, size, align, slot, buf);
}

/*
 * Undo a pop: it found the bin empty or raced a reclaim (the reclaim took
 * the buffer, or leaves it to the slow path's settle), or the buffer's
 * arena has no keys the caller can hand out (the slow path deals with it).
 * t is the top the pop stored.
 */
static inline void mrp_bin_unpop(struct mrp_bin *bin, uintptr_t t)
{
	atomic_store_explicit(&bin->top, t + sizeof(struct mrp_ent), memory_order_release);
}

/*
 * Pop the top entry of bin, the calling thread's, into *e: 0, or 1 for the
 * slow path (empty bin, or a reclaim under way: tcache.c). A caller that
 * then finds the buffer unfit gives it back with mrp_bin_unpop().
 */
static inline __attribute__((always_inline))
int mrp_bin_pop(struct mrp_bin *bin, struct mrp_ent **e)
{
	uintptr_t t = atomic_load_explicit(&bin->top, memory_order_relaxed) -
		      sizeof(struct mrp_ent);

	/*
	 * Store top, then load lim: one compare for an empty bin (lim is its
	 * base, t below it) and for a reclaim that may have taken the entry
	 * meanwhile (lim all ones: tcache.c).
	 */
	atomic_store_explicit(&bin->top, t, MRP_HANDSHAKE);
	atomic_signal_fence(memory_order_seq_cst);
	MRP_TEST_HOOK(MRP_HOOK_ALLOC_POPPED);
#ifdef __SANITIZE_THREAD__
	if (unlikely(t < atomic_load_explicit(&bin->lim, MRP_HANDSHAKE))) {
#else
	if (unlikely(t < mrp_peek(&bin->lim))) {	/* after the fence above */
#endif
		mrp_bin_unpop(bin, t);
		return 1;
	}
	MRP_TEST_HOOK(MRP_HOOK_ALLOC_CAP_SEEN);
	*e = (struct mrp_ent *)t;
	return 0;
}

/*
 * Push addr of arena a onto bin, the calling thread's: 0, or 1 for the
 * slow path (the bin is full, or a reclaim under way set its end to 0:
 * tcache.c). Both frees inline it, mrp_free() and mrp_free_fine().
 * A top below the guard entry (two pops abandoned in a row, each after
 * its store of top: tcache.c) also goes to the slow path, which writes
 * from base on and so puts top back; a push there would write into the
 * previous bin's entries, or before the first bin's allocation. That test
 * is the pop's, on the top the push would store: below lim (base, or all
 * ones while marked, when end sends the push to the slow path anyway).
 * It costs a compare and a branch, not a load of base and a subtraction.
 */
static inline __attribute__((always_inline))
int mrp_bin_push(struct mrp_bin *bin, void *addr, struct mrp_arena *a)
{
	uintptr_t t = atomic_load_explicit(&bin->top, memory_order_relaxed);
	uintptr_t next = t + sizeof(struct mrp_ent);
	struct mrp_ent *e = (struct mrp_ent *)t;

	if (unlikely(t >= mrp_peek(&bin->end) || next < mrp_peek(&bin->lim)))
		return 1;
	MRP_TEST_HOOK(MRP_HOOK_FREE_CAP_SEEN);
	e->p = addr;
	__asm__("" : "+m"(e->p));	/* two plain stores, not a vector pair */
	e->a = a;
	/* release: an idle reclaim that reads this top reads the entry */
	atomic_store_explicit(&bin->top, next, memory_order_release);
	mrp_inc(&bin->frees);
	return 0;
}

/*
 * mrp_alloc_fast() with a PD not in slot 0: the scan, then the same key
 * test, and on a miss the slow path every caller of mrp_alloc_fast() takes
 * then (mrp_alloc_slow() with no alignment): never 1, so that the fast
 * path reaches here by a tail call and needs no frame. Out of line, so
 * that the slot-0 path keeps its keys' offset a constant. The arguments
 * mrp_alloc() has come first, in its order: the tail call leaves them
 * where they are, and the fast path copies none aside to free registers.
 */
static MRP_NOINLINE int mrp_alloc_fast_slot(struct mrp_pool *pool, size_t size,
					    struct ibv_pd *pd, struct mrp_buf *buf,
					    struct mrp_bin *bin, struct mrp_ent *e)
{
	struct mrp_arena *a = e->a;
	int slot = mrp_pd_slot(pool, pd);

	if (slot < 0 || !mrp_arena_has(a, slot)) {
		mrp_bin_unpop(bin, (uintptr_t)e);
		return mrp_alloc_slow(pool, size, 0, pd, buf);
	}
	buf->lkey = a->keys[slot].lkey;
	buf->rkey = a->keys[slot].rkey;
	mrp_inc(&bin->allocs);
	buf->addr = e->p;
	buf->size = bin->bsize;
	return 0;
}

/*
 * Thread-cache pop: 0 done, below 0 failed (a PD outside slot 0 whose
 * buffer did not fit took the slow path already), 1 take the slow path
 * (mrp_alloc_slow() with no alignment, every caller): empty bin, a reclaim
 * under way (tcache.c), a PD not attached (the slow path says so), or the
 * top buffer's arena has no keys of pd (its registration failed or the PD
 * is marked dead). Always inlined: GCC stops doing so on its own once the
 * key test is in, and a call costs more than the test.
 */
static inline __attribute__((always_inline))
int mrp_alloc_fast(struct mrp_pool *pool, size_t size, struct ibv_pd *pd,
		   struct mrp_buf *buf)
{
	struct mrp_bin *bin = mrp_bin_at(mrp_tls_get(pool->tls_off),
					 pool->bin_off[(size - 1) >> MRP_BIN_TAB_SHIFT]);
	struct mrp_ent *e;
	uint64_t keys = 0;

	/* one register for the bin from here on, not its cache and offset */
	__asm__("" : "+r"(bin));
	if (unlikely(mrp_bin_pop(bin, &e)))
		return 1;
	if (pd) {
		/* most programs attach one PD: its slot here, the others apart */
		if (unlikely(atomic_load_explicit(&pool->pds[0], memory_order_acquire) != pd)) {
			int ret = mrp_alloc_fast_slot(pool, size, pd, buf, bin, e);

			if (ret > 0)
				__builtin_unreachable();	/* 0 or an error */
			return ret;
		}
		struct mrp_arena *a = e->a;

		if (unlikely(!mrp_arena_has(a, 0))) {
			mrp_bin_unpop(bin, (uintptr_t)e);
			return 1;
		}
		memcpy(&keys, &a->keys[0], sizeof(keys));
	}
	/* lkey and rkey in one move, 0 without a PD */
	memcpy(&buf->lkey, &keys, sizeof(keys));
	mrp_inc(&bin->allocs);
	buf->addr = e->p;
	buf->size = bin->bsize;
	return 0;
}

/*
 * Debug mode: the class buffer just handed out becomes LIVE, which its
 * free checks. It must have been OUT (in this thread's cache); anything
 * else means a cache held a buffer twice, which debug mode prevents.
 */
static void mrp_debug_mark(struct mrp_pool *pool, const struct mrp_buf *buf)
{
	struct mrp_arena *a = mrp_arena_of((uintptr_t)buf->addr);
	uint8_t out = MRP_BUF_OUT;

	if (!a || a->pool != pool || a->cls == MRP_LARGE)
		return;		/* fallback or large: tracked by their lists */
	if (!atomic_compare_exchange_strong(mrp_buf_state(a, (uintptr_t)buf->addr),
					    &out, MRP_BUF_LIVE))
		mrp_add(&pool->double_frees, 1);
}

/* One allocation in sample_every per thread is timed, slow path included. */
static int mrp_alloc_sampled(struct mrp_pool *pool, size_t size,
			     struct ibv_pd *pd, struct mrp_buf *buf)
{
	struct mrp_tcache *tc = mrp_tls[pool->idx];
	uint64_t t0;
	int ret;

	if (tc != &mrp_tcache_empty && --tc->sample_left) {
		ret = mrp_alloc_fast(pool, size, pd, buf);
		return ret <= 0 ? ret : mrp_alloc_slow(pool, size, 0, pd, buf);
	}
	t0 = mrp_now_ns();
	ret = mrp_alloc_fast(pool, size, pd, buf);
	if (ret > 0)
		ret = mrp_alloc_slow(pool, size, 0, pd, buf);
	if (!ret)
		mrp_lat_record(pool, mrp_now_ns() - t0);
	tc = mrp_tls[pool->idx];
	if (tc != &mrp_tcache_empty)
		tc->sample_left = pool->cfg.sample_every;
	return ret;
}

/* Class-size allocations of a pool that samples latency or debugs. */
static MRP_NOINLINE int mrp_alloc_hooked(struct mrp_pool *pool, size_t size,
					 struct ibv_pd *pd, struct mrp_buf *buf)
{
	int ret;

	if (pool->cfg.sample_every) {
		ret = mrp_alloc_sampled(pool, size, pd, buf);
	} else {
		ret = mrp_alloc_fast(pool, size, pd, buf);
		if (ret > 0)
			ret = mrp_alloc_slow(pool, size, 0, pd, buf);
	}
	if (!ret && pool->debug)
		mrp_debug_mark(pool, buf);
	return ret;
}

/*
 * mrp_alloc() off its fast path. Out of line with mrp_alloc()'s own
 * arguments, so that the fast path reaches it by a plain jump and keeps
 * pd and buf where they came, with no copies to free those registers.
 */
static MRP_NOINLINE int mrp_alloc_miss(struct mrp_pool *pool, size_t size,
				       struct ibv_pd *pd, struct mrp_buf *buf)
{
	if (pool && buf && pool->hooked && size - 1 < MRP_MAX_CLASS)
		return mrp_alloc_hooked(pool, size, pd, buf);
	return mrp_alloc_slow(pool, size, 0, pd, buf);
}

MRP_EXPORT int mrp_alloc(struct mrp_pool *pool, size_t size, struct ibv_pd *pd,
			 struct mrp_buf *buf)
{
	int ret;

	/* fast_lim: size 0, large sizes and hooked pools in one compare */
	if (unlikely(!pool || !buf || size - 1 >= pool->fast_lim))
		goto slow;
	ret = mrp_alloc_fast(pool, size, pd, buf);
	if (likely(ret <= 0))
		return ret;
slow:
	return mrp_alloc_miss(pool, size, pd, buf);
}

MRP_EXPORT int mrp_alloc_aligned(struct mrp_pool *pool, size_t size, size_t align,
				 struct ibv_pd *pd, struct mrp_buf *buf)
{
	if (!align || (align & (align - 1)))
		return -EINVAL;
	if (align > MRP_MAX_CLASS)
		return mrp_alloc_slow(pool, size, align, pd, buf);
	/*
	 * A power-of-two class is aligned to its size, a fine one to its
	 * lowest set bit: where that falls short, the next power of two.
	 */
	if (size && size < align)
		size = align;
	else if (pool && size && size <= MRP_MAX_CLASS &&
		 mrp_class_align(mrp_size_class(pool, size)) < align)
		size = (size_t)2 << mrp_size_msb(size);
	return mrp_alloc(pool, size, pd, buf);
}

_Static_assert(offsetof(struct mrp_buf, rkey) == offsetof(struct mrp_buf, lkey) + 4 &&
	       offsetof(struct mrp_key, rkey) == offsetof(struct mrp_key, lkey) + 4 &&
	       sizeof(struct mrp_key) == 8, "mrp_alloc_pdh() copies both keys at once");

/*
 * mrp_alloc_pdh() off its fast path: the handle's checks, then the PD's
 * own path, which knows hooked pools, large sizes, lazy registration, dead
 * PDs and the fallback. The PD is attached: a detach clears the handle
 * first and must not race with calls through it.
 */
static MRP_NOINLINE int mrp_alloc_pdh_slow(struct mrp_pool *pool, size_t size,
					   struct mrp_pdh *h, struct mrp_buf *buf)
{
	if (!pool || !h || !buf || h->pool != pool)
		return -EINVAL;
	if (mrp_forked(pool))
		return -ECHILD;
	if (!atomic_load_explicit(&h->bit, memory_order_relaxed))
		return -EINVAL;		/* detached */
	return mrp_alloc(pool, size, h->pd, buf);
}

/*
 * The allocation fast path of mrp_alloc_fast() for a PD named by its
 * handle: the handle gives the cache index, the key slot's bit and the
 * keys' offset, so neither the pool's PD table nor its hooked flag is read
 * (a hooked pool's handles have a fast_pool no caller passes). Same exits to the slow path:
 * empty bin, a reclaim under way, an arena without keys of the PD (its
 * registration failed, the PD is marked dead, or, with bit 0, detached).
 */
MRP_EXPORT int mrp_alloc_pdh(struct mrp_pool *pool, size_t size, struct mrp_pdh *h,
			     struct mrp_buf *buf)
{
	struct mrp_arena *a;
	struct mrp_bin *bin;
	struct mrp_ent *e;
	uint64_t keys;

	if (unlikely(!h || !buf || h->fast_pool != pool || size - 1 >= MRP_MAX_CLASS))
		goto slow;
	/* fast_pool is the caller's pool: a real one */
	bin = mrp_bin_at(mrp_tls_get(h->tls_off), h->bin_off[(size - 1) >> MRP_BIN_TAB_SHIFT]);
	__asm__("" : "+r"(bin));	/* as in mrp_alloc_fast() */
	if (unlikely(mrp_bin_pop(bin, &e)))
		goto slow;
	a = e->a;
	if (unlikely(!(atomic_load_explicit(&a->reg_mask, memory_order_acquire) &
		       mrp_peek(&h->bit)))) {
		mrp_bin_unpop(bin, (uintptr_t)e);
		goto slow;
	}
	/* lkey and rkey in one move: struct mrp_key and mrp_buf lay them out alike */
	memcpy(&keys, (const char *)a + h->key_off, sizeof(keys));
	memcpy(&buf->lkey, &keys, sizeof(keys));
	mrp_inc(&bin->allocs);
	buf->addr = e->p;
	buf->size = a->bsize;	/* a load: no shift register to keep */
	return 0;
slow:
	return mrp_alloc_pdh_slow(pool, size, h, buf);
}

static MRP_NOINLINE int mrp_free_slow(struct mrp_pool *pool, void *addr)
{
	uintptr_t p = (uintptr_t)addr;
	_Atomic uint8_t *state;
	struct mrp_tcache *tc;
	struct mrp_arena *a;
	struct mrp_bin *bin;
	struct mrp_ent e;
	uint32_t n, count;

	if (!pool)
		return -EINVAL;
	if (!addr)
		return 0;
	if (mrp_forked(pool))
		return -ECHILD;
	a = mrp_arena_of(p);
	if (!a || a->pool != pool)
		return mrp_fallback_free(pool, addr);
	if (a->cls == MRP_LARGE)
		return mrp_large_free(pool, p);
	if (mrp_buf_start(a, p) != p)	/* inside a buffer, or in the tail */
		return -EINVAL;
	/*
	 * A buffer in the depot is not the caller's: a double free whose first
	 * free reached the depot, or a stale pointer into an arena trimmed and
	 * created again. Debug mode knows exactly which buffers are live.
	 */
	state = mrp_buf_state(a, p);
	if (pool->debug) {
		uint8_t live = MRP_BUF_LIVE;

		if (!atomic_compare_exchange_strong(state, &live, MRP_BUF_OUT))
			goto bad;
	} else if (atomic_load_explicit(state, memory_order_relaxed) == MRP_BUF_FREE) {
		goto bad;
	}
	if (atomic_load(&a->nmw))
		mrp_mw_release_buf(pool, a, p);
	e.p = addr;
	e.a = a;
	if (atomic_load(&a->retired)) {
		/* out of service: straight to the depot, never to a cache */
		mrp_depot_put(pool, a->cls, &e, 1);
		mrp_add(&pool->dead_frees[a->cls], 1);	/* counted as frees */
		return 0;
	}
	tc = mrp_tcache_get(pool);
	if (!tc) {
		mrp_depot_put(pool, a->cls, &e, 1);
		return 0;
	}
	bin = &tc->bins[a->cls];
	/* settled: the bin is live (lim and end as configured) under our lock */
	count = mrp_bin_count(bin);
	if (count >= bin->cap) {
		/* Return the oldest half: the newest stay hot in this cache. */
		n = bin->cap / 2 ? bin->cap / 2 : 1;
		mrp_depot_put(pool, a->cls, bin->base, n);
		count -= n;
		memmove(bin->base, bin->base + n, count * sizeof(*bin->base));
		atomic_fetch_add_explicit(&pool->cls[a->cls].flushes, 1,
					  memory_order_relaxed);
	}
	bin->base[count++] = e;
	mrp_bin_set_count(bin, count);
	mrp_inc(&bin->frees);
	mrp_tcache_put(tc);
	return 0;

bad:
	mrp_add(&pool->double_frees, 1);
	return -EINVAL;
}

/*
 * mrp_free() of an arena whose block_mask failed the start: a fine class
 * (MRP_FINE_MASK) gets the fast path's push after an exact start test;
 * the rest (mask all ones, or not a start) take the slow path.
 */
static MRP_NOINLINE int mrp_free_fine(struct mrp_pool *pool, struct mrp_arena *a,
				      void *addr, uintptr_t mask)
{
	uintptr_t p = (uintptr_t)addr;
	uint64_t i;

	if (mask != MRP_FINE_MASK)
		goto slow;
	/* mrp_buf_index() without its test: magic is not 0 here */
	i = (uint64_t)(((unsigned __int128)((p - a->base) >> a->shift) * a->magic) >> 64);
	/*
	 * Exactly a buffer's start, not the tail past the last buffer. As on
	 * the fast path, a double free is caught where the buffer meets the
	 * depot.
	 */
	if (i >= a->nblocks || a->base + i * a->bsize != p ||
	    mrp_bin_push(mrp_bin_at(mrp_tls_get(pool->tls_off), a->bin_off), addr, a))
		goto slow;
	return 0;
slow:
	return mrp_free_slow(pool, addr);
}

MRP_EXPORT int mrp_free(struct mrp_pool *pool, void *addr)
{
	uintptr_t p = (uintptr_t)addr;
	size_t i = p >> MRP_MAP_SHIFT;
	struct mrp_arena **slot;
	struct mrp_arena *a;
	struct mrp_bin *bin;
	uintptr_t mask;

	/*
	 * addr may be anything, maybe before any arena exists: acquire, so
	 * that the bound and the table go together (struct mrp_map); a map
	 * not created yet has 0 entries. pool NULL fails the owner compare:
	 * an arena always has its pool.
	 */
	slot = atomic_load_explicit(&mrp_map.slot, memory_order_acquire);
	if (unlikely(i >= mrp_map_len(slot)))
		goto slow;
	a = slot[i];
	if (unlikely(!a || a->pool != pool))
		goto slow;
	mask = atomic_load_explicit(&a->block_mask, memory_order_relaxed);
	if (unlikely(p & mask))
		return mrp_free_fine(pool, a, addr, mask);
	bin = mrp_bin_at(mrp_tls_get(pool->tls_off), a->bin_off);
	__asm__("" : "+r"(bin));	/* as in mrp_alloc_fast() */
	if (unlikely(mrp_bin_push(bin, addr, a)))
		goto slow;
	return 0;
slow:
	return mrp_free_slow(pool, addr);
}

MRP_EXPORT int mrp_lookup(struct mrp_pool *pool, const void *addr,
			  struct ibv_pd *pd, struct mrp_buf *buf)
{
	uintptr_t p = (uintptr_t)addr;
	struct mrp_arena *a;
	int slot = -1;
	int ret;

	if (!pool || !buf)
		return -EINVAL;
	ret = mrp_caller_slot(pool, pd, &slot);
	if (ret)
		return ret;
	a = mrp_arena_of(p);
	if (!a || a->pool != pool)
		return mrp_fallback_lookup(pool, addr, slot, buf);
	if (a->cls == MRP_LARGE) {
		buf->addr = (void *)a->base;
		buf->size = a->size;
	} else {
		uintptr_t start = mrp_buf_start(a, p);

		/* the tail past a fine class's last buffer: in no buffer */
		if (!start)
			return -ENOENT;
		buf->addr = (void *)start;
		buf->size = a->bsize;
	}
	return mrp_fill_keys(pool, a, slot, buf);
}

MRP_EXPORT int mrp_lookup_keys(struct mrp_pool *pool, const void *addr,
			       struct ibv_pd *const *pds, unsigned int n,
			       struct mrp_keys *keys)
{
	struct mrp_buf b;
	int ret;

	if (!pool || (n && (!pds || !keys)))
		return -EINVAL;
	if (!n)		/* still says whether addr is a buffer of the pool */
		return mrp_lookup(pool, addr, NULL, &b);
	for (unsigned int i = 0; i < n; i++) {
		ret = mrp_lookup(pool, addr, pds[i], &b);
		if (ret) {
			memset(keys, 0, (size_t)n * sizeof(*keys));
			return ret;
		}
		keys[i].lkey = b.lkey;
		keys[i].rkey = b.rkey;
	}
	return 0;
}
