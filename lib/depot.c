// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * The per-class depot shared by all threads, and growth and trim.
 *
 * The depot of a class is the list of its arenas that have free buffers;
 * each arena keeps its free buffers as a stack of indexes outside the
 * buffer memory. Thread caches refill from it and flush into it in
 * batches. Growth and trim happen here, called by the slow paths, the
 * background thread and mrp_trim(), never by a fast path.
 */
#include <errno.h>

#include "internal.h"

static void mrp_avail_add(struct mrp_class *c, struct mrp_arena *a)
{
	a->av_prev = NULL;
	a->av_next = c->avail;
	if (a->av_next)
		a->av_next->av_prev = a;
	c->avail = a;
}

static void mrp_avail_del(struct mrp_class *c, struct mrp_arena *a)
{
	if (a->av_prev)
		a->av_prev->av_next = a->av_next;
	else
		c->avail = a->av_next;
	if (a->av_next)
		a->av_next->av_prev = a->av_prev;
	a->av_next = NULL;
	a->av_prev = NULL;
}

/* A new class arena's buffers into its depot: publish, pool->lock held (arena.c). */
void mrp_depot_add(struct mrp_pool *pool, struct mrp_arena *a)
{
	struct mrp_class *c = &pool->cls[a->cls];

	pthread_mutex_lock(&c->lock);
	mrp_avail_add(c, a);
	atomic_fetch_add(&c->free_blocks, a->nfree);
	pthread_mutex_unlock(&c->lock);
}

/*
 * Add one arena to class cls, made without pool->lock (arena.c). A
 * foreground caller first rechecks the depot: another thread may have
 * grown it meanwhile, or be growing it now (then it waits for that arena).
 */
int mrp_grow(struct mrp_pool *pool, unsigned int cls, bool background)
{
	struct mrp_class *c = &pool->cls[cls];
	struct mrp_arena *a;
	int cancel, ret;

	/*
	 * Arenas are made without the pool's lock (arena.c), so threads that
	 * find a class empty together would each make one: on a cold start of
	 * N threads, N arenas pinned where one serves them all (and, under
	 * max_bytes, the others' refused for bytes still in flight). The
	 * first makes it; the others wait for it here, and only for it.
	 * Background growth never waits: another thread is already adding to
	 * the class. A failed growth wakes the waiters too, and the next one
	 * tries itself. The wait is no cancellation point: it holds the
	 * class's lock.
	 */
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel);
	pthread_mutex_lock(&c->lock);
	while (c->growing && !background && !atomic_load(&c->free_blocks)) {
		mrp_add(&c->grow_waits, 1);
		pthread_cond_wait(&c->grown, &c->lock);
	}
	if (c->growing || (!background && atomic_load(&c->free_blocks))) {
		pthread_mutex_unlock(&c->lock);
		pthread_setcancelstate(cancel, NULL);
		return 0;
	}
	c->growing = true;
	pthread_mutex_unlock(&c->lock);

	ret = mrp_arena_create(pool, pool->cfg.arena_size, pool->granule, cls, 0, &a);
	if (!ret)
		mrp_add(background ? &pool->bg_growths : &pool->sync_growths, 1);

	pthread_mutex_lock(&c->lock);
	c->growing = false;
	pthread_cond_broadcast(&c->grown);
	pthread_mutex_unlock(&c->lock);
	pthread_setcancelstate(cancel, NULL);
	return ret;
}

/* Fill an empty bin with up to one batch, growing the class if needed. */
int mrp_depot_refill(struct mrp_pool *pool, unsigned int cls, struct mrp_bin *bin)
{
	struct mrp_class *c = &pool->cls[cls];
	uint32_t want = c->batch < bin->cap ? c->batch : bin->cap;
	uint32_t got = 0;
	struct mrp_arena *a;
	int ret;

	for (;;) {
		pthread_mutex_lock(&c->lock);
		while (got < want && (a = c->avail)) {
			while (got < want && a->nfree) {
				uint32_t i = a->free_idx[--a->nfree];
				uint8_t st = MRP_BUF_OUT;

				/* debug mode's compare-and-swap expects OUT */
				if (i >= a->fresh) {
					a->fresh = i + 1;
					if (!pool->debug)
						st = MRP_BUF_FRESH;
				}
				atomic_store_explicit(&a->state[i], st, memory_order_relaxed);
				bin->base[got].p = (void *)(a->base + (uintptr_t)i * a->bsize);
				bin->base[got++].a = a;
			}
			if (!a->nfree)
				mrp_avail_del(c, a);
		}
		atomic_fetch_sub(&c->free_blocks, got);
		pthread_mutex_unlock(&c->lock);
		if (got)
			break;
		ret = mrp_grow(pool, cls, false);
		if (ret)
			return ret;
	}
	mrp_bin_set_count(bin, got);
	mrp_add(&c->refills, 1);
	atomic_store_explicit(&c->last_refill, mrp_now_ns(), memory_order_relaxed);
	if (atomic_load_explicit(&pool->bg_running, memory_order_relaxed) &&
	    atomic_load(&c->free_blocks) < c->low_water)
		mrp_bg_kick(pool);
	return 0;
}

/*
 * Return n buffers of class cls to their arenas. A buffer already in the
 * depot (freed twice, the copies both cached) is dropped and counted: were
 * it stacked twice, two callers would get it and trim would count its
 * arena idle while a buffer in it is live.
 */
void mrp_depot_put(struct mrp_pool *pool, unsigned int cls, const struct mrp_ent *ents,
		   uint32_t n)
{
	struct mrp_class *c = &pool->cls[cls];
	uint64_t now = mrp_now_ns();
	uint32_t put = 0, dup = 0;

	pthread_mutex_lock(&c->lock);
	for (uint32_t k = 0; k < n; k++) {
		uintptr_t p = (uintptr_t)ents[k].p;
		struct mrp_arena *a = ents[k].a;
		uint32_t i = (uint32_t)mrp_buf_index(a, p);

		if (atomic_load_explicit(&a->state[i], memory_order_relaxed) == MRP_BUF_FREE ||
		    a->nfree >= a->nblocks) {
			dup++;
			continue;
		}
		atomic_store_explicit(&a->state[i], MRP_BUF_FREE, memory_order_relaxed);
		a->free_idx[a->nfree++] = i;
		if (a->retired)
			continue;	/* back, but never handed out again */
		if (a->nfree == 1)
			mrp_avail_add(c, a);
		if (a->nfree == a->nblocks)
			a->idle_since = now;
		put++;
	}
	atomic_fetch_add(&c->free_blocks, put);
	pthread_mutex_unlock(&c->lock);
	if (dup)
		mrp_add(&pool->double_frees, dup);
}

/*
 * Has @delay_ns passed from @since to @now? @now is read before the locks
 * are taken, so a put (or refill) can stamp a later @since meanwhile: that
 * one is recent, not 2^64 ns old (an arena freed a moment ago was trimmed
 * at once: trim_test background_trim, on an emulated, loaded machine).
 */
static bool mrp_elapsed(uint64_t now, uint64_t since, uint64_t delay_ns)
{
	return now >= since && now - since >= delay_ns;
}

/* Trim's last check: every buffer of a is in the depot. class->lock held. */
static bool mrp_arena_idle(const struct mrp_arena *a)
{
	if (a->nfree != a->nblocks)
		return false;
	for (uint32_t i = 0; i < a->nblocks; i++)
		if (atomic_load_explicit(&a->state[i], memory_order_relaxed) != MRP_BUF_FREE)
			return false;
	return true;
}

/*
 * Trim's claim on an arena nobody holds (see mrp_arena.holds): from here
 * no hold succeeds. Under the locks that took it off its list.
 */
static bool mrp_arena_claim(struct mrp_arena *a)
{
	uint32_t none = 0;

	return atomic_compare_exchange_strong_explicit(&a->holds, &none, MRP_ARENA_TRIMMED,
						       memory_order_acq_rel,
						       memory_order_relaxed);
}

/*
 * Take an arena whose deregistration failed out of service: no buffer of
 * it is handed out again. pool->lock held.
 */
void mrp_arena_retire(struct mrp_pool *pool, struct mrp_arena *a)
{
	struct mrp_arena **pp;

	if (a->retired)
		return;
	atomic_store(&a->block_mask, ~(uintptr_t)0);
	if (a->cls == MRP_LARGE) {
		for (pp = &pool->large_free; *pp; pp = &(*pp)->av_next)
			if (*pp == a) {
				*pp = a->av_next;
				a->av_next = NULL;
				break;
			}
		a->retired = true;
		return;
	}
	pthread_mutex_lock(&pool->cls[a->cls].lock);
	if (a->nfree) {
		mrp_avail_del(&pool->cls[a->cls], a);
		atomic_fetch_sub(&pool->cls[a->cls].free_blocks, a->nfree);
	}
	a->retired = true;
	pthread_mutex_unlock(&pool->cls[a->cls].lock);
}

/*
 * Release arenas with every buffer in the depot for at least delay_ns and
 * no hold on them (a served MR of the preload shim's pointing in). With
 * keep_reserve (background trim), a class used within the trim delay keeps
 * its low-water reserve so growth and trim do not undo each other.
 *
 * The victims are claimed and unpublished under pool->lock, deregistered
 * and unmapped without it (arena.c mrp_arena_trim_begin()); the count of
 * arenas and of those trimmed move together under the lock at the end.
 */
int mrp_trim_idle(struct mrp_pool *pool, uint64_t now, uint64_t delay_ns,
		  bool keep_reserve)
{
	struct mrp_arena *a, *next, *victims = NULL, **pp;
	int n = 0, cancel;

	pthread_mutex_lock(&pool->lock);
	for (unsigned int cls = 0; cls < MRP_NCLASSES; cls++) {
		struct mrp_class *c = &pool->cls[cls];
		bool busy = !mrp_elapsed(now, atomic_load(&c->last_refill), delay_ns);

		pthread_mutex_lock(&c->lock);
		for (a = c->avail; a; a = next) {
			next = a->av_next;
			if (!mrp_arena_idle(a) || !mrp_elapsed(now, a->idle_since, delay_ns))
				continue;
			if (keep_reserve && busy &&
			    atomic_load(&c->free_blocks) - a->nblocks < c->low_water)
				continue;
			/* a served MR points into it: it stays, idle or not */
			if (!mrp_arena_claim(a))
				continue;
			mrp_avail_del(c, a);
			atomic_fetch_sub(&c->free_blocks, a->nblocks);
			a->av_next = victims;
			victims = a;
		}
		pthread_mutex_unlock(&c->lock);
	}
	for (pp = &pool->large_free; (a = *pp);) {
		if (!mrp_elapsed(now, a->idle_since, delay_ns) || !mrp_arena_claim(a)) {
			pp = &a->av_next;
			continue;
		}
		*pp = a->av_next;
		a->av_next = victims;
		victims = a;
	}
	for (a = victims; a; a = a->av_next)
		mrp_arena_trim_begin(pool, a);
	pthread_mutex_unlock(&pool->lock);
	if (!victims)
		return 0;

	/* not a cancellation point: the victims would stay on pool->trimming */
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel);
	for (a = victims; a; a = a->av_next)
		a->trim_ok = mrp_arena_trim_dereg(pool, a);

	pthread_mutex_lock(&pool->lock);
	for (pp = &victims; (a = *pp);) {
		/* a failed deregistration retires it: kept, never reused */
		if (mrp_arena_trim_end(pool, a, a->trim_ok)) {
			n++;
			pp = &a->av_next;
			continue;
		}
		*pp = a->av_next;
		a->av_next = NULL;
	}
	/* with the arena count, under the lock: stats see both or neither */
	mrp_add(&pool->trimmed, (uint64_t)n);
	/* a detach waiting for the slots, close for the list */
	pthread_cond_broadcast(&pool->created);
	pthread_mutex_unlock(&pool->lock);

	for (a = victims; a; a = next) {
		next = a->av_next;
		mrp_arena_trim_unmap(pool, a);
	}
	pthread_setcancelstate(cancel, NULL);
	return n;
}
