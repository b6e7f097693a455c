// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * The allocator entry points. Requests of at least MRPOOL_PRELOAD_MIN
 * bytes come from the pool (a size-class buffer, a power of two from 4 KiB
 * to 2 MiB, aligned to its size; above that an arena of its own), the rest
 * from the real allocator, as does anything the pool refuses (limit,
 * RLIMIT_MEMLOCK). free() and realloc() tell the two apart with one load
 * from the library's address map: a pointer in one of the pool's arenas is
 * the pool's, anything else the real allocator's (or the bootstrap
 * buffer's, which is never freed).
 *
 * malloc_usable_size() and reallocarray() are covered too: glibc's own
 * would read a pool buffer as one of its chunks.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "preload.h"

#define MRP_PL_EXPORT	__attribute__((visibility("default")))
/* Large requests the pool refused: the next ones go straight to malloc. */
#define MRP_PL_BACKOFF	64
static _Atomic unsigned int mrp_pl_backoff;	/* requests left to skip */

/* Alignment from which a request counts as page-aligned (aligned_min). */
#define MRP_PL_PAGE	4096

/* The page size valloc and pvalloc align to (4, 16 or 64 KiB on arm64). */
static size_t mrp_pl_page(void)
{
	static _Atomic size_t page;
	size_t p = atomic_load_explicit(&page, memory_order_relaxed);

	if (!p) {
		p = mrp_os_page_size();
		atomic_store_explicit(&page, p, memory_order_relaxed);
	}
	return p;
}

/*
 * Double frees of size-class buffers. The library's fast free pushes onto
 * the thread's cache without looking at the buffer (its own callers keep
 * that lean path), so two frees of one buffer would put it in a cache
 * twice and hand it to two owners. The shim sees every allocation and
 * free of its pool's buffers, so it keeps each one's state byte itself:
 * LIVE while the program holds it, OUT once freed (what the depot left
 * there otherwise); a free of a buffer not LIVE is a double free, in this
 * thread's cache or another's. Plain loads and stores to the byte the
 * buffer's index gives, no atomic read-modify-write: two threads freeing
 * one buffer at the same instant may both pass. Large blocks are checked
 * exactly by the library, under the pool's lock; in debug mode the
 * library marks class buffers itself (with compare-and-swap).
 */
static inline __attribute__((always_inline))
void mrp_pl_mark_live(struct mrp_pool *pool, void *p, bool *zero)
{
	struct mrp_arena *a = mrp_pl_arena(p);
	_Atomic uint8_t *st;

	if (a->cls == MRP_LARGE) {
		if (zero)
			*zero = !a->large_used;
		return;
	}
	st = mrp_buf_state(a, (uintptr_t)p);
	/*
	 * Zero while it never left the depot before. With
	 * MRPOOL_PRELOAD_REMOTE=arena a peer holding a window's rkey may
	 * have written it anyway, on a device that does not enforce window
	 * bounds (rxe: the window reaches its whole arena).
	 */
	if (zero)
		*zero = atomic_load_explicit(st, memory_order_relaxed) == MRP_BUF_FRESH &&
			mrp_pl_cfg.remote != MRP_PL_REMOTE_ARENA;
	if (!pool->debug)
		atomic_store_explicit(st, MRP_BUF_LIVE, memory_order_relaxed);
}

/*
 * A pool buffer of at least size bytes aligned to align (0: malloc's), or
 * NULL: below the threshold, the pool refused or is not to be used here.
 * With zero, *zero says whether its bytes are known to be zero: a new
 * large arena, or a class buffer out of the depot for the first time (the
 * backend's memory is zeroed).
 */
static inline __attribute__((always_inline))
void *mrp_pl_pool_get(size_t size, size_t align, bool *zero)
{
	size_t min = align >= MRP_PL_PAGE ? mrp_pl_cfg.aligned_min : mrp_pl_cfg.min;
	struct mrp_pool *pool;
	struct mrp_buf b;
	unsigned int skip;
	int ret;

	if (!min || size < min || (mrp_pl_cfg.max && size > mrp_pl_cfg.max))
		return NULL;
	skip = atomic_load_explicit(&mrp_pl_backoff, memory_order_relaxed);
	if (skip) {
		atomic_compare_exchange_strong(&mrp_pl_backoff, &skip, skip - 1);
		return NULL;
	}
	pool = mrp_pl_pool();
	if (!pool)
		return NULL;
	mrp_pl_enter_outer();
	ret = mrp_alloc_aligned(pool, size, align < MRP_PL_PAGE ? MRP_PL_PAGE : align, NULL, &b);
	mrp_pl_leave_outer();
	if (ret) {
		mrp_add(&mrp_pl_count.alloc_fails, 1);
		atomic_store_explicit(&mrp_pl_backoff, MRP_PL_BACKOFF, memory_order_relaxed);
		return NULL;
	}
	mrp_pl_mark_live(pool, b.addr, zero);
	return b.addr;
}

/*
 * Always inlined, as mrp_pl_pool_get(): mrp_pl_pool() takes the frame of
 * the function it lands in, an entry point's for malloc() and the like,
 * to tell a thread inside the library from one that left a call behind
 * (struct mrp_pl_tls).
 */
static inline __attribute__((always_inline))
void *mrp_pl_pool_alloc(size_t size, size_t align)
{
	return mrp_pl_pool_get(size, align, NULL);
}

/*
 * free() or realloc() of a pool pointer that is not a live block: a double
 * free, or a pointer inside a block rather than at its start. Like glibc
 * ("free(): double free detected"), say so and abort: going on would hand
 * one buffer to two owners.
 */
static MRP_NOINLINE void mrp_pl_bad_free(const char *call, const char *what, void *p)
{
	char line[160];
	int n = snprintf(line, sizeof(line), "mrpool-preload: %s(): %s %p\n", call, what, p);

	if (n > 0 && write(STDERR_FILENO, line, (size_t)n) < 0) {
		/* aborting anyway */
	}
	abort();
}

/*
 * The shim's check of a pool pointer the program gives back (free, or
 * realloc before it moves or keeps the block): the size-class buffer
 * holding p must be LIVE (see mrp_pl_mark_live()); with mark, it becomes
 * OUT. That p is the buffer's start the library checks (mrp_free() fails
 * with -EINVAL otherwise, and the shim aborts). A large block's free is
 * left to the library, but for a free the shim deferred (mrp_pl_defer()),
 * which the library still sees live; a realloc (!mark) asks the library
 * here, for it may keep the block and reach no mrp_free().
 */
static MRP_NOINLINE void mrp_pl_check_large(struct mrp_pool *pool, void *p, const char *call)
{
	bool live;

	/* pool->lock: a signal handler's free must defer meanwhile */
	mrp_pl_enter_outer();
	live = mrp_large_live(pool, (uintptr_t)p);
	mrp_pl_leave_outer();
	if (!live)
		mrp_pl_bad_free(call, "double free or invalid pointer", p);
}

static inline void mrp_pl_check_live(struct mrp_pool *pool, struct mrp_arena *a, void *p,
				     const char *call, bool mark)
{
	_Atomic uint8_t *st;
	uint64_t i;

	if (a->cls == MRP_LARGE) {
		if (unlikely(atomic_load_explicit(&a->pl_deferred, memory_order_relaxed)))
			mrp_pl_bad_free(call, "double free detected", p);
		if (!mark)
			mrp_pl_check_large(pool, p, call);
		return;
	}
	if (pool->debug)
		return;
	i = mrp_buf_index(a, (uintptr_t)p);
	if (unlikely(i >= a->nblocks))	/* a fine class's tail: no buffer */
		mrp_pl_bad_free(call, "invalid pointer", p);
	st = &a->state[i];
	if (unlikely(atomic_load_explicit(st, memory_order_relaxed) != MRP_BUF_LIVE))
		mrp_pl_bad_free(call, "double free detected", p);
	if (mark)
		atomic_store_explicit(st, MRP_BUF_OUT, memory_order_relaxed);
}

/*
 * Protection the program changed inside a pool block (a guard page below a
 * fiber's stack, a W^X page of a JIT): glibc unmaps a large block at free,
 * so the next owner gets fresh read-write memory; a pool block stays
 * mapped and would be handed on still protected (the next owner's first
 * write faults). The shim's mprotect() marks the arenas it touches, and a
 * free in a marked arena makes the whole buffer read-write again: one
 * system call per free there, nothing elsewhere (one load of a flag on
 * the arena's first cache line, which the free reads anyway).
 * pkey_mprotect() and raw system calls are not seen.
 */
static MRP_NOINLINE void mrp_pl_unprotect(struct mrp_arena *a, void *p)
{
	uintptr_t start = a->base;
	size_t len = a->size;

	if (a->cls != MRP_LARGE) {
		start = mrp_buf_start(a, (uintptr_t)p);
		len = a->bsize;
		if (!start)
			return;		/* the tail: no buffer, free() aborts */
	}
	syscall(SYS_mprotect, (void *)start, len, PROT_READ | PROT_WRITE);
}

MRP_PL_EXPORT int mprotect(void *addr, size_t len, int prot)
{
	uintptr_t g = (uintptr_t)addr & ~(MRP_MAP_GRANULE - 1), end;
	/* 0 before the pool's first arena: nothing to mark */
	uintptr_t limit = (uintptr_t)mrp_map_entries() << MRP_MAP_SHIFT;

	if (prot != (PROT_READ | PROT_WRITE) && len &&
	    !__builtin_add_overflow((uintptr_t)addr, len, &end)) {
		/* arenas are 2 MiB aligned: one map entry per granule */
		for (end = end < limit ? end : limit; g < end; g += MRP_MAP_GRANULE) {
			struct mrp_arena *a = mrp_pl_arena((void *)g);

			if (a)
				atomic_store_explicit(&a->user_prot, true, memory_order_relaxed);
		}
	}
	return (int)syscall(SYS_mprotect, addr, len, prot);
}

/*
 * Orphans: deferred blocks that found no free slot in their thread's
 * list (struct mrp_pl_tls), marked MRP_BUF_ORPHAN. Set after the mark,
 * cleared by the drain that looks for them; one drain looks at a time
 * (mrp_pl_orphan_lock, taken before the pool's locks), so every orphan is
 * given back by exactly one, while its arena is sure to exist.
 */
static atomic_bool mrp_pl_orphans;
static pthread_mutex_t mrp_pl_orphan_lock = PTHREAD_MUTEX_INITIALIZER;

/*
 * A free of pool block p (arena a) while the thread is inside the
 * library: checked as free() checks, marked and put aside, out of band
 * (see struct mrp_pl_tls). Async-signal-safe: compare-and-swap on the
 * mark and the slot, a store to the thread's own pending.
 */
static MRP_NOINLINE void mrp_pl_defer(struct mrp_arena *a, void *p)
{
	struct mrp_pl_tls *t = &mrp_pl_tls;
	_Atomic uint8_t *mark;
	uint8_t expect;
	unsigned int i;

	if (a->cls == MRP_LARGE) {
		if ((uintptr_t)p != a->base)
			mrp_pl_bad_free("free", "invalid pointer", p);
		/* parked already (read without the pool's lock: a hint) */
		if (__atomic_load_n(&a->large_free, __ATOMIC_RELAXED))
			mrp_pl_bad_free("free", "double free detected", p);
		mark = &a->pl_deferred;
		expect = 0;
	} else {
		if (mrp_buf_start(a, (uintptr_t)p) != (uintptr_t)p)
			mrp_pl_bad_free("free", "invalid pointer", p);
		mark = mrp_buf_state(a, (uintptr_t)p);
		expect = MRP_BUF_LIVE;	/* the shim's mark, or debug mode's */
	}
	if (!atomic_compare_exchange_strong(mark, &expect, MRP_BUF_DEFERRED))
		mrp_pl_bad_free("free", "double free detected", p);
	for (i = 0; i < MRP_PL_DEFER_SLOTS; i++) {
		void *none = NULL;

		if (__atomic_compare_exchange_n(&t->slot[i], &none, p, false, __ATOMIC_RELAXED,
						__ATOMIC_RELAXED))
			break;
	}
	if (unlikely(i == MRP_PL_DEFER_SLOTS)) {
		/* nobody else changes a DEFERRED mark */
		atomic_store_explicit(mark, MRP_BUF_ORPHAN, memory_order_relaxed);
		atomic_store_explicit(&mrp_pl_orphans, true, memory_order_release);
	}
	mrp_add(&mrp_pl_count.deferred, 1);
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	__atomic_store_n(&t->pending, 1, __ATOMIC_RELAXED);
}

/*
 * A deferred block goes back to the pool, if its mark is still as (its
 * claim is the compare-and-swap of the mark); in a forked child it is the
 * parent's and not there: nothing to do.
 */
static void mrp_pl_give_back(void *p, uint8_t as)
{
	struct mrp_arena *a = mrp_pl_arena(p);
	struct mrp_pool *pool = a->pool;
	_Atomic uint8_t *mark;
	uint8_t to;

	if (mrp_forked(pool))
		return;
	if (a->cls == MRP_LARGE) {
		mark = &a->pl_deferred;
		to = 0;
	} else {
		mark = mrp_buf_state(a, (uintptr_t)p);
		/* what free() leaves: OUT, or LIVE for the library's own check */
		to = pool->debug ? MRP_BUF_LIVE : MRP_BUF_OUT;
	}
	if (!atomic_compare_exchange_strong(mark, &as, to))
		return;
	if (unlikely(atomic_load_explicit(&a->user_prot, memory_order_relaxed)))
		mrp_pl_unprotect(a, p);
	if (mrp_free(pool, p) == -EINVAL)
		mrp_pl_bad_free("free", "double free or invalid pointer", p);
}

#define MRP_PL_SCAN_BATCH	32

/*
 * Every orphan of the pool back: found by their marks under the pool's
 * lock, given back without it, a batch at a time.
 */
static MRP_NOINLINE void mrp_pl_scan(void)
{
	struct mrp_pool *pool = mrp_pl_pool_peek();	/* open: orphans exist */
	void *batch[MRP_PL_SCAN_BATCH];
	unsigned int n;

	if (!pool)
		return;
	pthread_mutex_lock(&mrp_pl_orphan_lock);
	atomic_store(&mrp_pl_orphans, false);
	do {
		n = 0;
		pthread_mutex_lock(&pool->lock);
		for (struct mrp_arena *a = pool->arenas; a && n < MRP_PL_SCAN_BATCH; a = a->next) {
			if (a->cls == MRP_LARGE) {
				if (atomic_load_explicit(&a->pl_deferred, memory_order_relaxed) ==
				    MRP_BUF_ORPHAN)
					batch[n++] = (void *)a->base;
				continue;
			}
			for (uint32_t i = 0; i < a->nblocks && n < MRP_PL_SCAN_BATCH; i++)
				if (atomic_load_explicit(&a->state[i], memory_order_relaxed) ==
				    MRP_BUF_ORPHAN)
					batch[n++] = (void *)(a->base + i * a->bsize);
		}
		pthread_mutex_unlock(&pool->lock);
		for (unsigned int k = 0; k < n; k++)
			mrp_pl_give_back(batch[k], MRP_BUF_ORPHAN);
	} while (n == MRP_PL_SCAN_BATCH);
	pthread_mutex_unlock(&mrp_pl_orphan_lock);
}

/*
 * The thread is out of the library (in 0) with pending set: give back
 * what it deferred, inside the library again meanwhile, so that a signal
 * handler's free defers too; what a handler deferred after pending was
 * cleared makes the loop go round once more.
 */
void mrp_pl_drain(void)
{
	struct mrp_pl_tls *t = &mrp_pl_tls;

	do {
		mrp_pl_enter_outer();
		__atomic_store_n(&t->pending, 0, __ATOMIC_RELAXED);
		__atomic_signal_fence(__ATOMIC_SEQ_CST);
		for (unsigned int i = 0; i < MRP_PL_DEFER_SLOTS; i++) {
			/* a handler fills only a free slot: no race on a full one */
			void *p = __atomic_load_n(&t->slot[i], __ATOMIC_RELAXED);

			if (!p)
				continue;
			__atomic_store_n(&t->slot[i], NULL, __ATOMIC_RELAXED);
			mrp_pl_give_back(p, MRP_BUF_DEFERRED);
		}
		if (atomic_load_explicit(&mrp_pl_orphans, memory_order_acquire))
			mrp_pl_scan();
		__atomic_store_n(&t->in, 0, __ATOMIC_RELAXED);
		__atomic_signal_fence(__ATOMIC_SEQ_CST);
	} while (__atomic_load_n(&t->pending, __ATOMIC_RELAXED));
}

/*
 * A pool buffer of arena a goes back: now from outside the library, later
 * from inside it; in a forked child it is not there: nothing to do. The
 * pool's thread frees none of the program's blocks.
 */
static MRP_NOINLINE void mrp_pl_pool_free(struct mrp_arena *a, void *p)
{
	struct mrp_pool *pool = a->pool;
	int ret;

	if (unlikely(mrp_forked(pool)) || unlikely(mrp_bg_self))
		return;
	if (mrp_pl_inside()) {
		mrp_pl_defer(a, p);
		return;
	}
	mrp_pl_check_live(pool, a, p, "free", true);
	if (unlikely(atomic_load_explicit(&a->user_prot, memory_order_relaxed)))
		mrp_pl_unprotect(a, p);
	mrp_pl_enter_outer();
	ret = mrp_free(pool, p);
	mrp_pl_leave_outer();
	/* a large block freed twice, or not at its start */
	if (unlikely(ret == -EINVAL))
		mrp_pl_bad_free("free", "double free or invalid pointer", p);
}

/* Usable bytes at p, whoever allocated it. */
static size_t mrp_pl_usable(void *p)
{
	struct mrp_arena *a = mrp_pl_arena(p);

	if (a)
		return mrp_pl_buf_left(a, p);
	if (mrp_pl_boot_owns(p))
		return mrp_pl_boot_size(p);
	return mrp_pl_real.malloc_usable_size(p);
}

MRP_PL_EXPORT void *malloc(size_t size)
{
	void *p;

	if (unlikely(!mrp_pl_ready()))
		return mrp_pl_boot_alloc(size, 16);
	if (size >= mrp_pl_cfg.min && mrp_pl_cfg.min) {
		p = mrp_pl_pool_alloc(size, 0);
		if (p)
			return p;
	}
	return mrp_pl_real.malloc(size);
}

MRP_PL_EXPORT void free(void *p)
{
	struct mrp_arena *a;

	if (!p)
		return;
	a = mrp_pl_arena(p);
	if (unlikely(a != NULL)) {
		mrp_pl_pool_free(a, p);
		return;
	}
	if (unlikely(mrp_pl_boot_owns(p)))
		return;
	mrp_pl_ready();
	mrp_pl_real.free(p);
}

MRP_PL_EXPORT void *calloc(size_t n, size_t size)
{
	size_t bytes;
	void *p;

	if (unlikely(!mrp_pl_ready())) {
		if (__builtin_mul_overflow(n, size, &bytes))
			return NULL;
		return mrp_pl_boot_alloc(bytes, 16);	/* static: zero */
	}
	/*
	 * Above MRPOOL_PRELOAD_CALLOC_MAX the real calloc: its fresh
	 * mappings are zero pages until touched, where the pool would pin
	 * (and, reused, clear) every byte of a table that may stay sparse.
	 */
	if (!__builtin_mul_overflow(n, size, &bytes) && mrp_pl_cfg.min &&
	    bytes >= mrp_pl_cfg.min &&
	    (!mrp_pl_cfg.calloc_max || bytes <= mrp_pl_cfg.calloc_max)) {
		bool zero;

		p = mrp_pl_pool_get(bytes, 0, &zero);
		if (p) {
			/* reused buffers keep their old bytes; fresh ones are zero */
			if (!zero) {
				memset(p, 0, bytes);
				mrp_add(&mrp_pl_count.zeroed, bytes);
			}
			return p;
		}
	}
	return mrp_pl_real.calloc(n, size);
}

/* Would the pool take a request of size bytes (malloc's alignment)? */
static inline bool mrp_pl_fits(size_t size)
{
	return mrp_pl_cfg.min && size >= mrp_pl_cfg.min &&
	       (!mrp_pl_cfg.max || size <= mrp_pl_cfg.max);
}

/*
 * The size to ask the pool for when a pool block of old usable bytes must
 * grow to size: half as much again as it had, at least size, at most
 * MRPOOL_PRELOAD_MAX unless size itself is larger. A pool block cannot
 * grow where it lies (an arena is mapped and registered whole), so a block
 * grown step by step (a buffer filled as input arrives, a string builder,
 * a growing array) would otherwise be copied at every step: n steps, n^2
 * bytes. With the headroom it moves O(log n) times and the bytes copied in
 * all stay below three times its final size; the price is memory held
 * ahead of need, at most half the block, as glibc's own growth policies
 * and every vector type pay.
 */
static size_t mrp_pl_grow_size(size_t old, size_t size)
{
	size_t want = old <= SIZE_MAX / 3 ? old + old / 2 : size;

	if (want < size)
		want = size;
	if (mrp_pl_cfg.max && want > mrp_pl_cfg.max)
		want = size > mrp_pl_cfg.max ? size : mrp_pl_cfg.max;
	return want;
}

/*
 * p (non-NULL, in arena a of the pool, or a == NULL: the bootstrap
 * buffer's or, with real, the real allocator's) is to hold size bytes
 * (non-zero) elsewhere: a new block, the pool's when it takes size, else
 * the real allocator's. A real block the pool does not take is the real
 * realloc's to resize, which grows in place or by mremap(2) without a
 * copy; a pool block moving there is copied once, and is real from then on.
 */
static void *mrp_pl_move(void *p, struct mrp_arena *a, size_t size, bool real)
{
	size_t old = mrp_pl_usable(p), n;
	void *q = NULL;

	if (mrp_pl_fits(size))
		q = mrp_pl_pool_alloc(a && size > old ? mrp_pl_grow_size(old, size) : size, 0);
	if (!q) {
		if (real)
			return mrp_pl_real.realloc(p, size);
		q = mrp_pl_real.malloc(size);
		if (!q)
			return NULL;	/* p untouched, errno ENOMEM */
	}
	n = old < size ? old : size;
	/*
	 * A page the program protected inside the block (a guard page):
	 * readable again before the copy, as the free below would make it,
	 * where glibc's realloc resizes in place or by mremap(2) and reads
	 * nothing.
	 */
	if (a && unlikely(atomic_load_explicit(&a->user_prot, memory_order_relaxed)))
		mrp_pl_unprotect(a, p);
	memcpy(q, p, n);
	mrp_add(&mrp_pl_count.copies, 1);
	mrp_add(&mrp_pl_count.copied, n);
	free(p);
	return q;
}

MRP_PL_EXPORT void *realloc(void *p, size_t size)
{
	struct mrp_pool *pool;
	struct mrp_arena *a;
	size_t left;
	bool ready = mrp_pl_ready();

	if (!p)
		return malloc(size);
	if (unlikely(!ready)) {
		/* inside dlsym while resolving: the static buffer again */
		void *q = mrp_pl_boot_alloc(size, 16);
		size_t old;

		if (!q || !mrp_pl_boot_owns(p))
			return q;	/* nothing else can exist yet */
		old = mrp_pl_boot_size(p);
		memcpy(q, p, old < size ? old : size);
		return q;
	}
	a = mrp_pl_arena(p);
	if (!a && !mrp_pl_boot_owns(p)) {
		/* the real allocator's block: into the pool once it is large */
		if (mrp_pl_fits(size) && mrp_pl_pool())
			return mrp_pl_move(p, NULL, size, true);
		return mrp_pl_real.realloc(p, size);
	}
	if (!size) {		/* glibc's realloc(p, 0): free, NULL */
		free(p);
		return NULL;
	}
	if (a) {
		/* in a forked child the block is the parent's: no pool here */
		pool = mrp_pl_pool();
		if (pool)
			mrp_pl_check_live(pool, a, p, "realloc", false);
		/*
		 * A pool buffer keeps serving while the size fits, stays large
		 * and uses more than half of it; one shrunk to half or less
		 * moves to a block its size, which gives the rest back to the
		 * pool (to its depot, or a large arena to the trim).
		 */
		left = mrp_pl_buf_left(a, p);
		if (size <= left && size > left / 2 && mrp_pl_cfg.min && size >= mrp_pl_cfg.min)
			return p;
	}
	return mrp_pl_move(p, a, size, false);
}

MRP_PL_EXPORT void *reallocarray(void *p, size_t n, size_t size)
{
	size_t bytes;

	if (__builtin_mul_overflow(n, size, &bytes)) {
		errno = ENOMEM;
		return NULL;
	}
	return realloc(p, bytes);
}

static bool mrp_pl_pow2(size_t x)
{
	return x && !(x & (x - 1));
}

MRP_PL_EXPORT int posix_memalign(void **out, size_t align, size_t size)
{
	void *p;

	if (unlikely(!mrp_pl_ready())) {
		if (!mrp_pl_pow2(align) || align % sizeof(void *))
			return EINVAL;
		p = mrp_pl_boot_alloc(size, align);
		if (!p)
			return ENOMEM;
		*out = p;
		return 0;
	}
	if (mrp_pl_pow2(align) && !(align % sizeof(void *))) {
		p = mrp_pl_pool_alloc(size, align);
		if (p) {
			*out = p;
			return 0;
		}
	}
	return mrp_pl_real.posix_memalign(out, align, size);
}

/* aligned_alloc, memalign: glibc takes any power of two (others: its errors). */
static void *mrp_pl_aligned(size_t align, size_t size, void *(*real)(size_t, size_t))
{
	void *p;

	if (unlikely(!mrp_pl_ready()))
		return mrp_pl_pow2(align) ? mrp_pl_boot_alloc(size, align) : NULL;
	if (mrp_pl_pow2(align)) {
		p = mrp_pl_pool_alloc(size, align);
		if (p)
			return p;
	}
	return real(align, size);
}

MRP_PL_EXPORT void *aligned_alloc(size_t align, size_t size)
{
	mrp_pl_ready();
	return mrp_pl_aligned(align, size, mrp_pl_real.aligned_alloc);
}

MRP_PL_EXPORT void *memalign(size_t align, size_t size)
{
	mrp_pl_ready();
	return mrp_pl_aligned(align, size, mrp_pl_real.memalign);
}

MRP_PL_EXPORT void *valloc(size_t size)
{
	void *p;

	if (unlikely(!mrp_pl_ready()))
		return mrp_pl_boot_alloc(size, mrp_pl_page());
	p = mrp_pl_pool_alloc(size, mrp_pl_page());
	return p ? p : mrp_pl_real.valloc(size);
}

MRP_PL_EXPORT void *pvalloc(size_t size)
{
	size_t page = mrp_pl_page(), bytes;
	void *p;

	if (unlikely(!mrp_pl_ready()))
		return mrp_pl_boot_alloc(size, page);
	if (!__builtin_add_overflow(size, page - 1, &bytes)) {
		p = mrp_pl_pool_alloc(bytes & ~(page - 1), page);
		if (p)
			return p;
	}
	return mrp_pl_real.pvalloc(size);
}

/*
 * C23's sized frees (glibc 2.39): glibc's would hand a pool block to its
 * own free. The size and alignment are hints free() does not need.
 */
MRP_PL_EXPORT void free_sized(void *p, size_t size)
{
	(void)size;
	free(p);
}

MRP_PL_EXPORT void free_aligned_sized(void *p, size_t align, size_t size)
{
	(void)align;
	(void)size;
	free(p);
}

/*
 * glibc's own names for its allocator (exported, GLIBC_2.2.5): what a
 * program or library calls to reach glibc's heap past any malloc
 * interposed (a replacement's fallback, glibc's libc_malloc_debug.so).
 * Those that take a block are the shim's, since the block may be a pool
 * block the program got from malloc: glibc's would read the bytes before
 * it as a chunk header (a crash, or a corrupt heap). A pool block goes to
 * the shim's free and realloc, any other pointer to glibc's. Calls glibc
 * makes inside itself do not come here (its internal aliases), and need
 * not: glibc only ever frees its own blocks that way.
 *
 * __libc_malloc, __libc_calloc, __libc_memalign, __libc_valloc and
 * __libc_pvalloc are not interposed: they are asked for glibc's memory,
 * and return a block of glibc's, which every free path here hands back to
 * glibc (the shim's free and realloc take anything outside the pool for
 * the real allocator's).
 */
MRP_PL_EXPORT void __libc_free(void *p)
{
	struct mrp_arena *a;

	if (!p)
		return;
	a = mrp_pl_arena(p);
	if (unlikely(a != NULL)) {
		mrp_pl_pool_free(a, p);
		return;
	}
	if (unlikely(mrp_pl_boot_owns(p)))
		return;
	mrp_pl_ready();
	if (mrp_pl_real.libc_free)
		mrp_pl_real.libc_free(p);
	else
		mrp_pl_real.free(p);
}

MRP_PL_EXPORT void *__libc_realloc(void *p, size_t size)
{
	if ((p && mrp_pl_arena(p)) || mrp_pl_boot_owns(p) || !mrp_pl_ready() ||
	    !mrp_pl_real.libc_realloc)
		return realloc(p, size);
	return mrp_pl_real.libc_realloc(p, size);
}

MRP_PL_EXPORT size_t malloc_usable_size(void *p)
{
	if (!p)
		return 0;
	mrp_pl_ready();
	return mrp_pl_usable(p);
}
