// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Arenas and the address map.
 *
 * The map has one pointer per 2 MiB of the user address space the platform
 * hands out (48 bits, more if the stack shows it): 1 GiB of address space,
 * mapped read-only (reads of untouched parts see the
 * zero page, and a read-only private mapping is not charged to the commit
 * limit); the pages that hold entries of arenas are made writable as
 * arenas appear. A page before the table holds its bound (struct mrp_map).
 * The process's map is made for the first arena, not at load nor at pool
 * open: a process that never maps an arena (under the preload shim with
 * MRPOOL_PRELOAD_MIN=0, registrations included) keeps that 1 GiB for
 * itself, which matters under ulimit -v. Every arena starts on a 2 MiB
 * boundary, so the arena of any address is one bounds test and one load.
 * The writers check the bound too: an arena the map cannot hold is
 * refused (-ERANGE) before anything is written, never written past the
 * map's end.
 *
 * An arena is mapped and registered in every attached PD that accepts it
 * (a PD whose registration failed gets it lazily, or an error, on its slow
 * path), without pool->lock, then made reachable from the map, before any
 * of its buffers is handed out; it is unpublished and deregistered before
 * it is unmapped. Large buffers (above 2 MiB) are
 * arenas of their own, parked after free for reuse until trimmed.
 */
#include <errno.h>
#include <stdlib.h>
#include <sys/auxv.h>
#include <sys/mman.h>

#include "internal.h"

const size_t mrp_map_none[1];
/* no table yet: a bound of 0 just below slot (mrp_map_init() makes one) */
struct mrp_map mrp_map = {
	.slot = (struct mrp_arena **)(mrp_map_none + 1),
};

static unsigned int mrp_bit_len(uintptr_t v)
{
	return v ? 64 - (unsigned int)__builtin_clzl(v) : 0;
}

/* Address bits the process map must cover on this machine. */
unsigned int mrp_map_va_bits(void)
{
	unsigned int bits = MRP_VA_BITS_MIN;
	unsigned int top;

	/* the initial stack sits at the top of the default mmap window */
	top = mrp_bit_len((uintptr_t)getauxval(AT_RANDOM));
	if (top > bits)
		bits = top;
	top = mrp_bit_len((uintptr_t)__builtin_frame_address(0));
	if (top > bits)
		bits = top;
	return bits < MRP_VA_BITS_MAX ? bits : MRP_VA_BITS_MAX;
}

/* Bytes of a map's mapping: the header page, then the table. */
static size_t mrp_map_bytes(size_t entries, size_t page)
{
	return page + ((entries * sizeof(struct mrp_arena *) + page - 1) & ~(page - 1));
}

/*
 * A map covering [0, 2^va_bits), read-only until reserved, published by
 * its slot pointer last (release: see struct mrp_map). On failure m is
 * left as it was.
 */
int mrp_map_create(struct mrp_map *m, unsigned int va_bits)
{
	size_t entries, page = mrp_os_page_size(), len;
	char *p;

	if (va_bits <= MRP_MAP_SHIFT || va_bits > MRP_VA_BITS_MAX)
		return -EINVAL;
	entries = (size_t)1 << (va_bits - MRP_MAP_SHIFT);
	len = mrp_map_bytes(entries, page);
	p = mmap(NULL, len, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED)
		return -errno;
	/* the bound, written once, read-only again after */
	if (mprotect(p, page, PROT_READ | PROT_WRITE)) {
		int err = errno;

		munmap(p, len);
		return -err;
	}
	((size_t *)(p + page))[-1] = entries;
	mprotect(p, page, PROT_READ);
	m->page = page;
	m->entries = entries;
	atomic_store_explicit(&m->slot, (struct mrp_arena **)(p + page),
			      memory_order_release);
	return 0;
}

/* Tests' maps only: the process's lives as long as the process. */
void mrp_map_destroy(struct mrp_map *m)
{
	struct mrp_arena **slot = atomic_load_explicit(&m->slot, memory_order_relaxed);

	if (m->entries)
		munmap((char *)slot - m->page, mrp_map_bytes(m->entries, m->page));
	atomic_store_explicit(&m->slot, (struct mrp_arena **)(mrp_map_none + 1),
			      memory_order_relaxed);
	m->entries = 0;
}

/*
 * Keeps two pools' first arenas from making two maps. Innermost: taken
 * under a pool->lock (mrp_arena_create()), never held across a call that
 * takes another lock, nor at fork (the prepare handler waits for every
 * pool->lock, under which alone it is taken).
 */
static pthread_mutex_t mrp_map_lock = PTHREAD_MUTEX_INITIALIZER;

/*
 * The process's map, made for the first arena (mrp_arena_create()), not
 * at load nor at pool open: a process that opens a pool and never maps
 * an arena (the preload shim's, which opens at the first registration
 * even with MRPOOL_PRELOAD_MIN=0) has none either. 0, or the error that
 * arena fails with (-ENOMEM under ulimit -v); the next one tries again.
 * Afterwards one load answers.
 */
int mrp_map_init(void)
{
	int ret = 0;

	if (likely(mrp_map_entries()))
		return 0;
	pthread_mutex_lock(&mrp_map_lock);
	if (!mrp_map_entries())
		ret = mrp_map_create(&mrp_map, mrp_map_va_bits());
	pthread_mutex_unlock(&mrp_map_lock);
	return ret;
}

/* Entries [*first, *end) of [base, base + size), or -ERANGE if outside m. */
static int mrp_map_range(const struct mrp_map *m, uintptr_t base, size_t size,
			 size_t *first, size_t *end)
{
	uintptr_t limit = (uintptr_t)m->entries << MRP_MAP_SHIFT;

	if (!size || (base | size) & (MRP_MAP_GRANULE - 1) || size > limit ||
	    base > limit - size)
		return -ERANGE;
	*first = base >> MRP_MAP_SHIFT;
	*end = (base + size) >> MRP_MAP_SHIFT;
	return 0;
}

/* Make the map pages covering [base, base + size) writable. */
int mrp_map_reserve(struct mrp_map *m, uintptr_t base, size_t size)
{
	struct mrp_arena **slot = atomic_load_explicit(&m->slot, memory_order_relaxed);
	uintptr_t first, last;
	size_t i, end;
	int ret;

	ret = mrp_map_range(m, base, size, &i, &end);
	if (ret)
		return ret;
	first = (uintptr_t)&slot[i] & ~(m->page - 1);
	last = ((uintptr_t)&slot[end - 1] | (m->page - 1)) + 1;
	return mprotect((void *)first, last - first, PROT_READ | PROT_WRITE) ? -errno : 0;
}

/* Point the entries of [base, base + size) at a (reserved before). */
int mrp_map_set(struct mrp_map *m, uintptr_t base, size_t size, struct mrp_arena *a)
{
	struct mrp_arena **slot = atomic_load_explicit(&m->slot, memory_order_relaxed);
	size_t i, end;
	int ret;

	ret = mrp_map_range(m, base, size, &i, &end);
	if (ret)
		return ret;
	for (; i < end; i++)
		slot[i] = a;
	return 0;
}

/*
 * Arena creation runs without pool->lock. Its slow part is the backend's
 * map (mmap, mbind, mlock or populate of the whole arena; for the module
 * an ALLOC ioctl, some 30 ms per 2 MiB chunk) and a registration in every
 * PD (ibv_reg_mr pins and translates each page). Under pool->lock, as it
 * once was, it held up every large malloc and free, mrp_stats,
 * mrp_pd_dead and fork (whose prepare handler takes the lock) for seconds,
 * and kept two threads growing cold memory from being faster than one. So
 * an arena is made in three steps, the slow ones unlocked:
 *
 *  1. begin (pool->lock): its bytes are held against max_bytes
 *     (creating_bytes, with mapped), it goes on pool->creating, and the
 *     PD slots it is to be registered in are chosen (attached, neither
 *     dead nor being detached) and counted in reg_busy[].
 *  2. unlocked, the backend maps it; under the lock for a moment its range
 *     is recorded (the fork child handler unmaps it, pool.c) and the
 *     address map's pages for it are made writable; unlocked again, it is
 *     registered in the chosen slots, and then, unlocked as well, in PDs
 *     attached meanwhile (chosen and counted busy in the same way, until a
 *     look under the lock finds none left).
 *  3. publish (pool->lock): what changed meanwhile is caught up with (a PD
 *     marked dead: its bit cleared, the MR left to the detach as in every
 *     arena), the application's domain is told (arena_ops), then the
 *     arena goes into the map, the arena list and the depot (a class) or
 *     to its caller (large), counted in the stats in the same section.
 *     Readers of the map, the list and the callbacks see only whole arenas.
 *
 * Concurrent growth: threads making large arenas (each its own
 * allocation's) never wait for one another: that is what kept a second
 * thread from speeding up a cold start. Threads that find one class empty
 * together wait for the first one's arena (depot.c mrp_grow), not for the
 * pool: one arena serves them all, where one each would pin N arenas on a
 * cold start of N threads. max_bytes counts arenas in flight, so together
 * they never pass it. Nothing else waits for a creation: large
 * frees, stats, mrp_pd_dead, attach, trim and fork take pool->lock, which
 * a creator holds only for list and counter updates (attach and lazy
 * registration register without it too, reg.c; trim deregisters and
 * unmaps without it, depot.c). Two
 * waits remain, both for a step, never for a whole growth loop:
 * mrp_detach_pd() for creations registering in the PD it detaches, and
 * close for creations in flight (a thread still inside a call close races
 * is the application's bug; the wait keeps the pool's own state whole).
 *
 * PDs: a slot chosen in step 1 keeps its PD until step 3. mrp_detach_pd()
 * marks the slot pd_detaching, so no creation starts to register there,
 * and waits for its reg_busy[] to reach 0: a PD is never deallocated under
 * an unlocked ibv_reg_mr, and its MR in a new arena, published by then,
 * goes with the others. Nor is pool->access[] of a chosen slot rewritten
 * meanwhile (attach writes only a free slot's), so step 2 reads it as is.
 *
 * Fork: a child has no creation in flight (its thread is not there). The
 * child handler unmaps each recorded range (pool.c), the child's close
 * frees the records, nothing of them is published there. The parent's
 * creator goes on as if no fork had happened. A fork between the
 * backend's mmap() and the record leaves the child an unreferenced
 * mapping, which the backend has made DONTFORK unless the pool is
 * MRP_FORK_COPY: then it is the child's until it exits or execs.
 *
 * Failure: what a creation made is undone in reverse (registrations under
 * the lock before its slots are released, so that a waiting detach never
 * meets them, memory after its record is gone, so that no fork child
 * unmaps a range the parent reused) and its error returned, as before.
 */

static void mrp_list_add(struct mrp_arena **head, struct mrp_arena *a)
{
	a->prev = NULL;
	a->next = *head;
	if (a->next)
		a->next->prev = a;
	*head = a;
}

static void mrp_list_del(struct mrp_arena **head, struct mrp_arena *a)
{
	if (a->prev)
		a->prev->next = a->next;
	else
		*head = a->next;
	if (a->next)
		a->next->prev = a->prev;
	a->next = NULL;
	a->prev = NULL;
}

/* The struct and depot bookkeeping of an arena of cls: no lock, nothing shared. */
static struct mrp_arena *mrp_arena_new(struct mrp_pool *pool, size_t size, unsigned int cls)
{
	struct mrp_arena *a = calloc(1, sizeof(*a));

	if (!a)
		return NULL;
	a->pool = pool;
	a->cls = cls;
	a->bin_off = mrp_bin_off(cls);
	if (cls == MRP_LARGE) {
		a->shift = MRP_MAP_SHIFT;
		a->nblocks = 1;
	} else {
		a->bsize = mrp_class_size(cls);
		a->shift = (uint32_t)__builtin_ctzl(a->bsize);
		a->magic = mrp_buf_magic(a->bsize);
		/* a fine class leaves a tail: never a buffer (mrp_buf_start()) */
		a->nblocks = (uint32_t)(size / a->bsize);
		a->nfree = a->nblocks;
		a->free_idx = malloc(a->nblocks * sizeof(uint32_t));
		a->state = calloc(a->nblocks, sizeof(*a->state));
		if (!a->free_idx || !a->state) {
			mrp_arena_free(a);
			return NULL;
		}
		/* popped from the top: low addresses first */
		for (uint32_t i = 0; i < a->nblocks; i++)
			a->free_idx[i] = a->nblocks - 1 - i;
	}
	atomic_init(&a->nmw, 0);
	atomic_init(&a->block_mask, mrp_fast_mask(a));
	return a;
}

/*
 * Step 1, pool->lock held: size held against max_bytes, a listed in
 * flight, *slots the PDs to register it in, each counted busy.
 */
static int mrp_arena_begin(struct mrp_pool *pool, struct mrp_arena *a, size_t size,
			   uint32_t *slots)
{
	uint32_t skip = atomic_load(&pool->pd_dead) | pool->pd_detaching;

	if (pool->cfg.max_bytes &&
	    pool->mapped + pool->creating_bytes + size > pool->cfg.max_bytes)
		return -ENOMEM;
	pool->creating_bytes += size;
	mrp_list_add(&pool->creating, a);
	*slots = 0;
	for (int s = 0; s < MRP_MAX_PDS; s++) {
		if (!atomic_load(&pool->pds[s]) || (skip & (1u << s)))
			continue;
		*slots |= 1u << s;
		pool->reg_busy[s]++;
	}
	return 0;
}

/* The end of a creation, published or failed; pool->lock held. */
static void mrp_arena_end(struct mrp_pool *pool, struct mrp_arena *a, size_t size,
			  uint32_t slots)
{
	mrp_list_del(&pool->creating, a);
	pool->creating_bytes -= size;
	for (int s = 0; s < MRP_MAX_PDS; s++)
		if (slots & (1u << s))
			pool->reg_busy[s]--;
	/* a detach waiting for these slots, close for the list */
	pthread_cond_broadcast(&pool->created);
}

/*
 * Step 2's middle, pool->lock held: the mapped region recorded (the fork
 * child handler unmaps it) and the address map made ready for it.
 */
static int mrp_arena_place(struct mrp_arena *a, const struct mrp_region *r)
{
	int ret;

	a->base = r->base;
	a->size = r->size;
	a->handle = r->handle;
	a->locked = r->locked;
	/*
	 * An address beyond the map (a platform with more address bits than
	 * it was sized for) is the backend's memory the pool cannot use: as
	 * if the backend were exhausted, so that the fallback, if allowed,
	 * still serves. So is no room for the map itself (the first arena
	 * makes it: ulimit -v). Here, before the registrations, so that such
	 * an arena costs none; under the lock, as the map lock wants.
	 */
	ret = mrp_map_init();
	if (!ret)
		ret = mrp_map_reserve(&mrp_map, a->base, a->size);
	return ret == -ERANGE ? -ENOMEM : ret;
}

/*
 * Step 3, pool->lock held: the arena, mapped and registered,
 * becomes the pool's. 0, or the error of the application's add(), which
 * leaves it unpublished.
 */
static int mrp_arena_publish(struct mrp_pool *pool, struct mrp_arena *a)
{
	int ret;

	/* the application's domain first: its refusal leaves nothing published */
	ret = mrp_arena_announce(pool, a);
	if (ret)
		return ret;
	mrp_reg_arena_publish(pool, a);
	/* reserved in step 2: in range, cannot fail */
	mrp_map_set(&mrp_map, a->base, a->size, a);
	mrp_list_add(&pool->arenas, a);
	pool->mapped += a->size;
	if (a->locked)
		pool->locked_bytes += a->size;
	pool->narenas++;
	a->idle_since = mrp_now_ns();
	if (a->cls == MRP_LARGE) {
		/* born live, its caller's: counted with the arena (stats) */
		mrp_add(&pool->large_allocs, 1);
		mrp_add(&pool->large_bytes, a->size);
	} else {
		mrp_depot_add(pool, a);
	}
	return 0;
}

/*
 * Map, register and publish an arena (see above): called without
 * pool->lock, returns without it. large_len: a large arena's bytes asked
 * for (0 for a class), set before anyone can see it.
 */
static int mrp_arena_make(struct mrp_pool *pool, size_t size, size_t align,
			  unsigned int cls, size_t large_len, struct mrp_arena **out)
{
	struct mrp_region r = { 0 };
	struct mrp_arena *a;
	uint32_t slots;
	bool keep = false;
	int ret;

	a = mrp_arena_new(pool, size, cls);
	if (!a)
		return -ENOMEM;
	a->large_len = large_len;
	pthread_mutex_lock(&pool->lock);
	ret = mrp_arena_begin(pool, a, size, &slots);
	pthread_mutex_unlock(&pool->lock);
	if (ret) {
		mrp_arena_free(a);
		return ret;
	}

	ret = pool->ops->map(pool, size, align, &r);
	pthread_mutex_lock(&pool->lock);
	if (!ret)
		ret = mrp_arena_place(a, &r);
	/*
	 * Best effort: a PD that refuses the arena only lacks its keys. PDs
	 * attached meanwhile are registered in unlocked as well, counted
	 * busy as the first ones, until none is left for the publish.
	 */
	for (uint32_t more = slots; !ret;) {
		if (more) {
			pthread_mutex_unlock(&pool->lock);
			mrp_reg_arena(pool, a, more);
			pthread_mutex_lock(&pool->lock);
		}
		more = mrp_reg_arena_missing(pool, slots);
		if (!more)
			break;
		for (int s = 0; s < MRP_MAX_PDS; s++)
			if (more & (1u << s))
				pool->reg_busy[s]++;
		slots |= more;
	}
	/*
	 * Off pool->creating before it goes on pool->arenas (the same links).
	 * A detach woken here runs once the lock is dropped: after the
	 * publish, or after the MRs of a failed one are gone.
	 */
	mrp_arena_end(pool, a, size, slots);
	if (!ret) {
		ret = mrp_arena_publish(pool, a);
		if (ret && mrp_dereg_arena(pool, a))
			keep = true;	/* a device may still reach it: never unmapped */
	}
	pthread_mutex_unlock(&pool->lock);
	if (!ret) {
		*out = a;
		return 0;
	}
	/* its record is gone: no fork child unmaps the range from here on */
	if (r.base && !keep)
		pool->ops->unmap(pool, &r);
	mrp_arena_free(a);
	return ret;
}

/*
 * Not a cancellation point: the registrations of the unlocked step reach
 * some (libibverbs' command write()), and a creator cancelled there would
 * leave its record on pool->creating, its bytes counted against max_bytes
 * and its PD slots busy for the life of the pool (a detach of those PDs
 * and the close would wait for it for ever).
 */
int mrp_arena_create(struct mrp_pool *pool, size_t size, size_t align,
		     unsigned int cls, size_t large_len, struct mrp_arena **out)
{
	int cancel, ret;

	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel);
	ret = mrp_arena_make(pool, size, align, cls, large_len, out);
	pthread_setcancelstate(cancel, NULL);
	return ret;
}

/*
 * Close, pool->lock held: wait for the creations and trims in flight to
 * end, and fallback buffers being made or freed (reg.c). The
 * wait is a cancellation point, and the lock must not be left held.
 */
void mrp_arenas_creating_wait(struct mrp_pool *pool)
{
	int cancel;

	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel);
	while (pool->creating || pool->trimming || pool->fb_flight)
		pthread_cond_wait(&pool->created, &pool->lock);
	pthread_setcancelstate(cancel, NULL);
}

void mrp_arena_free(struct mrp_arena *a)
{
	free(a->free_idx);
	free((void *)a->state);
	free(a->mw_index);
	free(a);
}

/*
 * Unpublish and unlink an arena and free its bookkeeping, leaving its
 * memory as it is (mapped, and for the kernel backend owned by the file
 * until it closes). pool->lock held.
 */
void mrp_arena_forget(struct mrp_pool *pool, struct mrp_arena *a)
{
	mrp_map_set(&mrp_map, a->base, a->size, NULL);
	mrp_list_del(&pool->arenas, a);
	pool->mapped -= a->size;
	if (a->locked)
		pool->locked_bytes -= a->size;
	pool->narenas--;
	mrp_arena_free(a);
}

/*
 * Trim without pool->lock (depot.c mrp_trim_idle()): what it claimed goes
 * in three steps, as a creation comes, so that the deregistrations (each
 * ibv_dereg_mr unpins a whole arena) and munmap() hold up no large free,
 * stats, mrp_pd_dead, attach nor fork:
 *
 *  1. begin (pool->lock): the application's domain is told (arena_ops,
 *     under the lock as always), the arena leaves the map and
 *     pool->arenas for pool->trimming, and each PD slot it has an MR in is
 *     counted in reg_busy[] (a detach waits for the deregistration, as
 *     for a creation's registration: the caller may deallocate the PD
 *     once the detach returns). Still counted in mapped and narenas.
 *  2. unlocked, every MR goes; in a pool whose children get the arenas
 *     (MRP_FORK_COPY) the range is made DONTFORK first, so that a fork
 *     from here on leaves the child nothing of it.
 *  3. end (pool->lock): off pool->trimming and its slots released; gone
 *     from the counts, or back on the list, retired, if a deregistration
 *     failed (a device may still reach it: never unmapped, never reused).
 *     Then, unlocked, unmapped (mrp_arena_trim_unmap()).
 *
 * A fork child unmaps what it got of an arena on pool->trimming (pool.c),
 * as of one on pool->creating; close waits for both lists to empty.
 */
void mrp_arena_trim_begin(struct mrp_pool *pool, struct mrp_arena *a)
{
	mrp_arena_unannounce(pool, a);
	mrp_map_set(&mrp_map, a->base, a->size, NULL);
	mrp_list_del(&pool->arenas, a);
	mrp_list_add(&pool->trimming, a);
	for (int s = 0; s < MRP_MAX_PDS; s++)
		if (a->mr[s]) {
			a->trim_slots |= 1u << s;
			pool->reg_busy[s]++;
		}
}

/* Step 2, unlocked: true if every MR went. */
bool mrp_arena_trim_dereg(struct mrp_pool *pool, struct mrp_arena *a)
{
	if (pool->fork_copy)
		madvise((void *)a->base, a->size, MADV_DONTFORK);
	return !mrp_dereg_arena(pool, a);
}

/*
 * Step 3, pool->lock held: false if it was kept, retired (see above);
 * then the caller's pool->created broadcast wakes a waiting detach.
 */
bool mrp_arena_trim_end(struct mrp_pool *pool, struct mrp_arena *a, bool deregistered)
{
	mrp_list_del(&pool->trimming, a);
	for (int s = 0; s < MRP_MAX_PDS; s++)
		if (a->trim_slots & (1u << s))
			pool->reg_busy[s]--;
	a->trim_slots = 0;
	if (!deregistered) {
		a->retired = true;
		mrp_list_add(&pool->arenas, a);
		mrp_map_set(&mrp_map, a->base, a->size, a);
		return false;
	}
	pool->mapped -= a->size;
	if (a->locked)
		pool->locked_bytes -= a->size;
	pool->narenas--;
	return true;
}

/* After step 3, unlocked: the memory and the struct of a trimmed arena. */
void mrp_arena_trim_unmap(struct mrp_pool *pool, struct mrp_arena *a)
{
	struct mrp_region r = {
		.base = a->base, .size = a->size, .handle = a->handle,
		.locked = a->locked,
	};

	pool->ops->unmap(pool, &r);
	mrp_arena_free(a);
}

/*
 * Deregister, unpublish and unmap an arena nobody can reach. pool->lock
 * held. If a deregistration fails (now or before), the arena is retired
 * instead and stays, mapped and listed: -EBUSY.
 */
int mrp_arena_destroy(struct mrp_pool *pool, struct mrp_arena *a)
{
	struct mrp_region r = {
		.base = a->base, .size = a->size, .handle = a->handle,
		.locked = a->locked,
	};

	mrp_arena_unannounce(pool, a);
	if (mrp_dereg_arena(pool, a) || a->retired) {
		a->retired = true;
		return -EBUSY;
	}
	mrp_arena_forget(pool, a);
	pool->ops->unmap(pool, &r);
	return 0;
}

/*
 * A large buffer: a parked arena that fits (at most 2x), else a new one,
 * made without pool->lock (mrp_arena_create()).
 */
int mrp_large_alloc(struct mrp_pool *pool, size_t size, size_t align,
		    struct mrp_arena **out)
{
	size_t len = (size + pool->granule - 1) & ~(pool->granule - 1);
	struct mrp_arena *a, **pp;

	if (align < pool->granule)
		align = pool->granule;
	pthread_mutex_lock(&pool->lock);
	for (pp = &pool->large_free; (a = *pp); pp = &a->av_next)
		if (a->size >= len && a->size / 2 <= len && !(a->base & (align - 1)))
			break;
	if (a) {
		*pp = a->av_next;
		a->av_next = NULL;
		a->large_free = false;
		a->large_len = size;
		mrp_add(&pool->large_allocs, 1);
		mrp_add(&pool->large_bytes, a->size);
	}
	pthread_mutex_unlock(&pool->lock);
	if (!a)
		return mrp_arena_create(pool, len, align, MRP_LARGE, size, out);
	*out = a;
	return 0;
}

/* p is the start of a large buffer of pool; pool->lock held. */
static bool mrp_large_is_start(struct mrp_pool *pool, struct mrp_arena *a, uintptr_t p)
{
	return a && a->pool == pool && a->cls == MRP_LARGE && p == a->base;
}

/*
 * Whether p is a live large buffer of pool (its start, not freed): for a
 * realloc the preload shim answers by keeping the block, which no
 * mrp_large_free() checks then. A parked arena is still mapped and in the
 * map, so without this a realloc of a freed block would hand it out
 * again while the next large allocation takes it from the cache too.
 * Read under pool->lock, as mrp_large_free() claims it.
 */
bool mrp_large_live(struct mrp_pool *pool, uintptr_t p)
{
	struct mrp_arena *a;
	bool live;

	pthread_mutex_lock(&pool->lock);
	a = mrp_arena_of(p);
	live = mrp_large_is_start(pool, a, p) && !a->large_free;
	pthread_mutex_unlock(&pool->lock);
	return live;
}

/*
 * Park the large buffer starting at p for reuse; trim releases it after the
 * delay. Checked and claimed under pool->lock, the map read there too: of
 * two frees of one buffer, however close, exactly one succeeds, and a
 * pointer whose arena is gone is refused. -EINVAL if p is not a live large
 * buffer of pool.
 */
int mrp_large_free(struct mrp_pool *pool, uintptr_t p)
{
	struct mrp_arena *a;
	bool nmw;

	pthread_mutex_lock(&pool->lock);
	a = mrp_arena_of(p);
	if (!mrp_large_is_start(pool, a, p) || a->large_free) {
		if (mrp_large_is_start(pool, a, p))
			mrp_add(&pool->double_frees, 1);
		pthread_mutex_unlock(&pool->lock);
		return -EINVAL;
	}
	/* claimed: neither live nor parked until the windows are gone */
	a->large_free = true;
	a->large_used = true;
	nmw = atomic_load(&a->nmw) != 0;
	pthread_mutex_unlock(&pool->lock);
	if (nmw)
		mrp_mw_release_buf(pool, a, a->base);

	pthread_mutex_lock(&pool->lock);
	a->idle_since = mrp_now_ns();
	if (!a->retired) {
		a->av_next = pool->large_free;
		pool->large_free = a;
	}
	mrp_add(&pool->large_frees, 1);
	atomic_fetch_sub(&pool->large_bytes, a->size);
	pthread_mutex_unlock(&pool->lock);
	return 0;
}
