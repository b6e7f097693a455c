/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * libmrpool internals: the objects every file shares and the prototypes,
 * grouped by the file that defines them.
 *
 * Shape: a pool owns arenas (2 MiB-aligned regions from a backend). A class
 * arena holds buffers of one size class (classes.c); a large arena holds
 * one buffer. The global map turns any address into its arena with one load
 * (mrp_map[addr >> 21]), and the arena carries the keys of every attached
 * PD. Free buffers are kept out of band (index stacks in the arena, pointer
 * stacks in thread caches), never inside the buffers: an arena's rkey lets
 * a remote peer write any buffer, and a late write must not corrupt the
 * allocator.
 *
 * Locks, outermost first: mrp_global_lock (pool slots, tcache lists),
 * tcache->lock (a cache against its reclaimer, never on a fast path),
 * pool->lock (arena list, PDs, large and fallback lists), class->lock
 * (depot of one class), mrp_fork_lock (read: a slice's dma-buf fd exists;
 * write: a fork). The fork handlers take mrp_global_lock, every open
 * pool->lock, then mrp_fork_lock. pool->bg_lock only guards the thread's
 * wakeups; arena.c's map lock only the address map's creation, under a
 * pool->lock.
 *
 * No lock is held while an arena is made (arena.c): the backend's map
 * (mmap, mbind, mlock; the module's ALLOC) and the registrations in every
 * PD run between two short pool->lock sections, so nothing that takes
 * pool->lock (a large free, stats, mrp_pd_dead, a fork) waits for growth.
 * Nor across any other mmap, munmap, mlock, ibv_reg_mr or ibv_dereg_mr:
 * attach, detach, lazy registration and trim make theirs unlocked too
 * (reg.c, depot.c), and fallback buffers are made, registered and freed
 * by the same scheme (reg.c).
 * mrp_fork_lock is then taken for read alone, around one dma-buf export
 * and its registration.
 */
#ifndef MRP_INTERNAL_H
#define MRP_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "mrpool.h"

/* Everything declared below is internal to the shared object. */
#pragma GCC visibility push(hidden)

#define MRP_EXPORT	__attribute__((visibility("default")))
#define likely(x)	__builtin_expect(!!(x), 1)
#define unlikely(x)	__builtin_expect(!!(x), 0)
#define MRP_NOINLINE	__attribute__((noinline))

#define MRP_MIN_SHIFT	12			/* smallest class: 4 KiB */
#define MRP_MAX_SHIFT	21			/* largest class: 2 MiB */
/* classes of both modes (classes.c): 10 powers of two, 9 fine ones */
#define MRP_NCLASSES	19
#define MRP_MAX_CLASS	((size_t)1 << MRP_MAX_SHIFT)
/* sizes above 64 KiB take the pool's table, one entry per 16 KiB */
#define MRP_FINE_MIN	((size_t)1 << 16)
#define MRP_TAB_SHIFT	14
#define MRP_TAB_SIZE	(MRP_MAX_CLASS >> MRP_TAB_SHIFT)
/*
 * The allocation fast paths' table: bin offset in a thread's cache by
 * (size - 1) >> MRP_BIN_TAB_SHIFT. Every class is a multiple of the
 * smallest, so no class boundary falls inside an entry (mrp_bin_table()).
 */
#define MRP_BIN_TAB_SHIFT	MRP_MIN_SHIFT
#define MRP_BIN_TAB_SIZE	(MRP_MAX_CLASS >> MRP_BIN_TAB_SHIFT)
/* Class index of large arenas: its bin has capacity 0 in every cache. */
#define MRP_LARGE	MRP_NCLASSES

#define MRP_MAP_SHIFT	21			/* map granule: 2 MiB */
#define MRP_MAP_GRANULE	((size_t)1 << MRP_MAP_SHIFT)
/*
 * Bits of user address space the map covers at least: 48, the default mmap
 * window of arm64 (4 KiB and 64 KiB pages) and more than x86-64's 47, so
 * one size serves both. mrp_map_va_bits() raises it to what the process's
 * own stack shows, up to MRP_VA_BITS_MAX (57-bit x86 and 52-bit arm64 hand
 * out higher addresses only to mmap calls that ask for them with a hint,
 * which the library never does).
 */
#define MRP_VA_BITS_MIN	48
#define MRP_VA_BITS_MAX	56

#define MRP_MAX_POOLS	32			/* open pools per process */
#define MRP_MAX_BIN	256			/* cap on buffers per thread per class */

struct ibv_mr;
struct mrpool_client_stats;

/* Keys of one arena in one attached PD. */
struct mrp_key {
	uint32_t lkey;
	uint32_t rkey;
};

/*
 * An arena. The first fields are read on the fast paths and written once
 * before the arena is published in the map; the depot fields belong to
 * class->lock; the rest to pool->lock.
 */
struct mrp_arena {
	struct mrp_pool *pool;		/* owner, checked by free */
	/*
	 * Buffer size - 1, the free fast path's start-of-buffer test; all ones
	 * while memory windows are bound in the arena, which sends every free
	 * of it to the slow path (it invalidates them) at no cost otherwise.
	 */
	_Atomic uintptr_t block_mask;
	uint32_t cls;			/* size class or MRP_LARGE */
	/*
	 * log2 of the buffers' alignment: of their size for a power of two,
	 * of its lowest set bit for a fine class (80 KiB: 14)
	 */
	uint32_t shift;
	size_t bsize;			/* buffer size: mrp_alloc_pdh()'s buf->size */
	/*
	 * Fine classes: mrp_buf_magic(bsize), the reciprocal that divides an
	 * offset by the size; 0 for a power of two. Its block_mask is
	 * MRP_FINE_MASK: frees take mrp_free_fine(), which tests the start
	 * exactly.
	 */
	uint64_t magic;
	/*
	 * Bit s: keys[s] are those of a live MR in a PD not marked dead.
	 * Registration per PD is best effort, so an arena may lack some; the
	 * fast path tests the bit before handing out keys and leaves the rest
	 * to the slow path (lazy registration, -ENODEV for a dead PD). Set
	 * with release after keys[s] is written, cleared first when they go;
	 * both under pool->lock.
	 */
	_Atomic uint32_t reg_mask;
	/*
	 * The preload shim saw the program mprotect() part of the arena to
	 * something other than read-write: frees in it restore read-write
	 * over the buffer before it is handed on (preload/malloc.c). Never
	 * cleared; fills the hole before keys.
	 */
	_Atomic bool user_prot;
	/*
	 * Large: 0, or MRP_BUF_DEFERRED or MRP_BUF_ORPHAN: the preload shim
	 * took a free of its buffer while the thread was inside the library,
	 * and gives it back later (what a class buffer's state byte says).
	 * Changed by compare-and-swap, by the shim only.
	 */
	_Atomic uint8_t pl_deferred;
	/*
	 * mrp_bin_off(cls): where the free fast path finds the bin of this
	 * arena's buffers in a thread's cache, with no multiply by the class.
	 */
	uint16_t bin_off;
	/* per pool->pds slot; 8-byte aligned: mrp_alloc_pdh() loads a pair at once */
	_Alignas(8) struct mrp_key keys[MRP_MAX_PDS];

	/* depot, class->lock */
	/*
	 * buffers in the arena (constant): a fine class leaves a tail past
	 * nblocks * bsize that is never a buffer
	 */
	uint32_t nblocks;
	uint32_t nfree;			/* of which in the depot */
	/*
	 * Buffers [fresh, nblocks) have never left the depot: their bytes are
	 * still the backend's zeros. Refills pop from the top of free_idx,
	 * where frees push; the indexes never popped stay below them in
	 * ascending order from the top, so this is one past the highest
	 * index ever popped.
	 */
	uint32_t fresh;
	uint32_t *free_idx;		/* stack of free buffer indexes */
	/*
	 * Per buffer, MRP_BUF_*: changed under class->lock between FREE and
	 * OUT; OUT <-> LIVE by compare-and-swap (debug mode) without it.
	 */
	_Atomic uint8_t *state;
	uint64_t idle_since;		/* ns when nfree reached nblocks */
	struct mrp_arena *av_next, *av_prev;	/* class->avail list */

	/* pool->lock */
	/*
	 * pool->arenas list; while the arena is being made, pool->creating
	 * (arena.c): then base and size are 0 until its memory is mapped, and
	 * only its creator touches the rest
	 */
	struct mrp_arena *next, *prev;
	uintptr_t base;
	size_t size;
	uint64_t handle;		/* backend's id (kernel slice id) */
	bool locked;			/* memory is pinned (mlock or module) */
	bool large_free;		/* large arena parked or being parked */
	/*
	 * Large: its buffer was handed out and given back before, so its
	 * bytes are no longer the backend's zeros. Set by mrp_large_free(),
	 * read by the arena's next owner (after mrp_large_alloc()).
	 */
	bool large_used;
	/*
	 * A deregistration failed: the device may still reach the memory
	 * through that MR, so no buffer of it is handed out again (off the
	 * avail and large_free lists), and its memory is never unmapped nor
	 * given back to the backend, only forgotten at close. Its frees take
	 * the slow path (block_mask), which returns them to the depot, not to
	 * a cache; buffers already cached are handed out once more at most.
	 * Set under pool->lock and, for class arenas, class->lock.
	 */
	_Atomic bool retired;
	_Atomic uint32_t nmw;		/* memory windows bound in the arena */
	/*
	 * Per buffer (one for a large arena), the windows over it: a free
	 * finds its own in constant time. pool->lock; allocated at the
	 * arena's first bind.
	 */
	struct mrp_mw **mw_index;
	bool announced;			/* arena_ops.add took it: remove owed. pool->lock */
	size_t large_len;		/* large: bytes the caller asked for */
	struct ibv_mr *mr[MRP_MAX_PDS];
	/*
	 * Where the slot was attached with bind_access (the preload shim's
	 * PDs with a binder): a second MR of the arena, the only one that may
	 * bind windows, whose keys are never handed out (mw.c). Registered
	 * and deregistered with mr[s], under the same rules.
	 */
	struct ibv_mr *bind_mr[MRP_MAX_PDS];
	/*
	 * References from outside the allocator that need the arena mapped
	 * and registered whatever its buffers' state: the preload shim's
	 * served MRs, which carry its keys (preload/verbs.c). Trim releases
	 * an arena only by switching this from 0 to MRP_ARENA_TRIMMED
	 * (mrp_arena_claim()); a hold taken after that fails, so of a hold
	 * and a trim racing exactly one wins. Last, away from the fast
	 * paths' lines: taking and dropping one writes it.
	 */
	_Atomic uint32_t holds;
	/*
	 * pool->lock: bit s, an MR of slot s is being made for the listed
	 * arena without the lock, by an attach or a lazy registration
	 * (reg.c); a second lazy registration waits for it.
	 */
	uint32_t reg_pending;
	/* slots counted busy while trim deregisters it unlocked (arena.c) */
	uint32_t trim_slots;
	bool trim_ok;			/* trim: every MR went (unlocked step) */
};

#define MRP_ARENA_TRIMMED	(1u << 31)	/* holds: trim took the arena */

/*
 * Keep a from trim: false if trim took it already (then it is about to
 * go). The caller found a through the map and must hold something that
 * keeps trim from freeing the struct meanwhile (a live buffer in it).
 */
static inline bool mrp_arena_hold(struct mrp_arena *a)
{
	if (likely(!(atomic_fetch_add_explicit(&a->holds, 1, memory_order_acquire) &
		     MRP_ARENA_TRIMMED)))
		return true;
	atomic_fetch_sub_explicit(&a->holds, 1, memory_order_relaxed);
	return false;
}

/* Drop a hold: release, so that what the holder did comes before a trim. */
static inline void mrp_arena_unhold(struct mrp_arena *a)
{
	atomic_fetch_sub_explicit(&a->holds, 1, memory_order_release);
}

/*
 * Where a class buffer is. The depot knows FREE from the rest; only debug
 * mode, which marks every allocation, tells LIVE (the application's) from
 * OUT (in a thread cache). A free of a FREE buffer, or in debug mode of
 * anything not LIVE, is a double free or a stale pointer. The preload
 * shim keeps LIVE and OUT itself outside debug mode (preload/malloc.c):
 * it sees every allocation and free of its pool's buffers. Outside debug
 * mode a refill marks a buffer FRESH rather than OUT the first time it
 * leaves the depot (its bytes are still zero: the shim's calloc skips the
 * memset); the library takes FRESH for OUT.
 */
enum {
	MRP_BUF_FREE = 0,		/* in the depot (calloc'd arenas start so) */
	MRP_BUF_OUT = 1,		/* handed out of the depot */
	MRP_BUF_LIVE = 2,		/* debug mode, or the shim: held by the application */
	MRP_BUF_FRESH = 3,		/* OUT for the first time since its arena was made */
	MRP_BUF_DEFERRED = 4,		/* the shim: freed by the application while its
					 * thread was inside the library, not given back
					 * yet (preload/malloc.c); LIVE to the library */
	MRP_BUF_ORPHAN = 5,		/* the same, in no thread's list: any drain
					 * of the shim's finds it by this mark */
};

/* floor(off / bsize) for an arena's shift and magic (classes.c) */
static inline uint64_t mrp_buf_div(uint64_t off, unsigned int shift, uint64_t magic)
{
	uint64_t q = off >> shift;

	return magic ? (uint64_t)(((unsigned __int128)q * magic) >> 64) : q;
}

/* Index of the class buffer slot holding p (nblocks or more: the tail). */
static inline uint64_t mrp_buf_index(const struct mrp_arena *a, uintptr_t p)
{
	return mrp_buf_div(p - a->base, a->shift, a->magic);
}

/* Start of the class buffer holding p, 0 if p is in the tail. */
static inline uintptr_t mrp_buf_start(const struct mrp_arena *a, uintptr_t p)
{
	uint64_t i = mrp_buf_index(a, p);

	return i < a->nblocks ? a->base + i * a->bsize : 0;
}

/* p: a buffer's start */
static inline _Atomic uint8_t *mrp_buf_state(const struct mrp_arena *a, uintptr_t p)
{
	return &a->state[mrp_buf_index(a, p)];
}

/* One size class's depot, shared by all threads. */
struct mrp_class {
	pthread_mutex_t lock;
	/*
	 * One growth of a class at a time (depot.c mrp_grow): set under lock
	 * by the thread that makes the class's next arena, without the pool's
	 * lock; a thread that needs the class meanwhile waits on grown (and
	 * counts in grow_waits, for tests) for that arena instead of making
	 * one more. Only growth waits: frees, stats and fork never look here.
	 */
	bool growing;
	pthread_cond_t grown;
	_Atomic uint64_t grow_waits;
	struct mrp_arena *avail;	/* arenas with nfree > 0 */
	_Atomic uint64_t free_blocks;	/* sum of nfree: read unlocked as a hint */
	uint32_t batch;			/* refill/flush batch */
	uint32_t low_water;		/* background growth below this */
	_Atomic uint64_t last_refill;	/* ns, recent use keeps a reserve */
	_Atomic uint64_t refills, flushes;
} __attribute__((aligned(64)));

/* Where an idle reclaim stands with a thread cache (tcache.c). */
enum {
	MRP_TC_LIVE,			/* lim and end as configured */
	MRP_TC_MARKED,			/* bins marked, the pass's barrier to come */
	MRP_TC_TAKEN,			/* marked since a barrier; taken went */
};

/*
 * A cached buffer: its address and its arena, so that an allocation hands
 * out keys with no map lookup (the free has the arena from the map).
 */
struct mrp_ent {
	void *p;
	struct mrp_arena *a;
};

/*
 * One thread's cache of one class: a stack of entries in [base, top).
 * Only the owner writes top and the entries; an idle reclaim reads them
 * and writes lim and end (tcache.c). Addresses are kept as integers: a pop
 * stores top - 1 before it knows whether the bin is empty, which is
 * base - 1 then, one entry below the stack: a guard entry that is never
 * handed out (tcache.c, mrp_tcache_get()).
 *
 * The allocation fast path pops (top - 1 stored), then compares the new
 * top against lim: base when live, all ones while a reclaim is marked and
 * in the empty and orphan caches, so one compare covers both the empty bin
 * and the reclaim. The free fast path compares top against end: base +
 * cap when live, 0 while marked.
 */
struct mrp_bin {
	_Atomic uintptr_t top;		/* next entry; release-stored by free */
	_Atomic uintptr_t lim;		/* base, or MRP_BIN_MARKED */
	_Atomic uintptr_t end;		/* base + cap, or 0 while marked */
	size_t bsize;			/* the class's buffer size, buf->size */
	struct mrp_ent *base;		/* the stack: base[-1] is the guard */
	uint32_t cap;			/* entries, as configured */
	_Atomic uint64_t allocs;	/* written by the owner thread only */
	_Atomic uint64_t frees;
} __attribute__((aligned(64)));

/* A bin's lim while it must not be popped: no address is above it. */
#define MRP_BIN_MARKED	(~(uintptr_t)0)

/*
 * Entries in a bin, the owner's view or the reclaimer's: 0 while a pop of
 * an empty bin is in flight (its top is base - 1 until it puts it back), or
 * was left there by a call abandoned halfway (siglongjmp out of a signal
 * handler: the preload shim).
 */
static inline uint32_t mrp_bin_count_of(const struct mrp_bin *b, uintptr_t top)
{
	uintptr_t base = (uintptr_t)b->base;

	return top > base ? (uint32_t)((top - base) / sizeof(struct mrp_ent)) : 0;
}

static inline uint32_t mrp_bin_count(const struct mrp_bin *b)
{
	return mrp_bin_count_of(b, atomic_load_explicit(&b->top, memory_order_relaxed));
}

/* The owner, with its cache's lock: n entries from base on. */
static inline void mrp_bin_set_count(struct mrp_bin *b, uint32_t n)
{
	atomic_store_explicit(&b->top, (uintptr_t)(b->base + n), memory_order_release);
}

/*
 * A thread's cache for one pool. Reached through mrp_tls[pool->idx], which
 * starts at mrp_tcache_empty (every bin marked), so the first use of a pool in a
 * thread falls into the slow path, which installs a real cache.
 */
struct mrp_tcache {
	struct mrp_bin bins[MRP_NCLASSES + 1];
	struct mrp_pool *pool;		/* NULL once the pool closed (orphan) */
	uint32_t idx;			/* slot in mrp_tls */
	uint32_t sample_left;		/* allocations until the next timed one */
	_Atomic uint64_t misses;
	struct mrp_tcache *next, *prev;	/* pool->tcaches, mrp_global_lock */

	/* idle reclaim (tcache.c): the owner's slow paths and the reclaimer */
	pthread_mutex_t lock;		/* bins off the fast paths, reclaim, taken */
	uint8_t reclaim;		/* MRP_TC_*: bins marked unless LIVE */
	uint32_t taken[MRP_NCLASSES];	/* per bin: base[0, taken) are the depot's */
	/* the reclaimer's, mrp_global_lock */
	bool in_pass;			/* in a pass's batch: not freed until it ends */
	struct mrp_tcache *pass_next;	/* that batch, walked without the lock */
	uint64_t seen_ops, seen_ns;	/* activity last seen and when */
} __attribute__((aligned(64)));

/* Offset of class cls's bin (or MRP_LARGE's) in a thread's cache. */
static inline uint16_t mrp_bin_off(unsigned int cls)
{
	return (uint16_t)(offsetof(struct mrp_tcache, bins) + cls * sizeof(struct mrp_bin));
}
_Static_assert(offsetof(struct mrp_tcache, bins) + (MRP_NCLASSES + 1) * sizeof(struct mrp_bin)
	       <= UINT16_MAX, "bin offsets are uint16_t");

/* The bin at offset off (mrp_bin_off()) in cache tc. */
static inline struct mrp_bin *mrp_bin_at(struct mrp_tcache *tc, size_t off)
{
	return (struct mrp_bin *)((char *)tc + off);
}

/* Settings after attributes, environment and defaults are merged. */
struct mrp_cfg {
	enum mrp_backend backend;
	char device[256];
	size_t arena_size;
	size_t tcache_bytes;
	uint32_t trim_delay_ms;
	size_t max_bytes;
	bool fallback;
	bool background;
	bool hugetlb;
	uint32_t sample_every;
	uint32_t low_water;
	bool idle_reclaim;		/* 0: never a membarrier() call */
	bool debug;			/* MRPOOL_DEBUG: check every free */
	bool dmabuf;			/* MRPOOL_DMABUF: try ibv_reg_dmabuf_mr */
	int numa_node;			/* MRPOOL_NUMA_NODE: MRP_NUMA_* or a node */
	bool fine;			/* MRPOOL_CLASSES=fine: MRP_CLASSES_FINE */
	bool fork_copy;			/* MRPOOL_FORK=copy: MRP_FORK_COPY asked */
};

/* A region a backend hands out. */
struct mrp_region {
	uintptr_t base;
	size_t size;
	uint64_t handle;
	bool locked;
};

/*
 * Backend contract: map() returns size bytes aligned to align (a power of
 * two, at least MRP_MAP_GRANULE), zeroed, readable and writable, resident,
 * not inherited across fork unless pool->fork_copy (MADV_DONTFORK or
 * VM_DONTCOPY, which the fork handler sets again: pool.c; with
 * pool->fork_copy the fork handler clears it at each fork), or a negative
 * errno; unmap() returns them;
 * export_dmabuf(), where the backend has it, a dma-buf of a region for
 * ibv_reg_dmabuf_mr(), which keeps the memory alive while it is held.
 * map() and export_dmabuf() are called without pool->lock, by any number
 * of threads at once (arena.c: growth runs unlocked), so what they read
 * or write of the pool is constant after open or atomic; unmap() with or
 * without it. fini() with forked set must not touch memory or kernel
 * objects still owned by the parent.
 */
struct mrp_backend_ops {
	enum mrp_backend_kind kind;
	int (*init)(struct mrp_pool *pool);
	void (*fini)(struct mrp_pool *pool, bool forked);
	int (*map)(struct mrp_pool *pool, size_t size, size_t align,
		   struct mrp_region *r);
	void (*unmap)(struct mrp_pool *pool, struct mrp_region *r);
	/* optional: a new close-on-exec dma-buf fd of a region, or -errno */
	int (*export_dmabuf)(struct mrp_pool *pool, uint64_t handle);
};

/*
 * A buffer served by its own mapping + ibv_reg_mr when arenas ran out:
 * mapped, not malloc'ed, so that it can be kept out of children
 * (MADV_DONTFORK) without touching the heap around it.
 */
struct mrp_fallback {
	struct mrp_fallback *next;
	void *addr;
	size_t size;			/* the buffer's size, as the caller sees it */
	size_t len;			/* of the mapping: size in whole pages */
	bool leak;			/* a deregistration failed: never unmap */
	struct ibv_mr *mr[MRP_MAX_PDS];
	/*
	 * pool->lock, as an arena's holds and reg_pending (reg.c): callers
	 * registering it without the lock (an attach, a lookup, a detach
	 * deregistering), which its free waits for; the slots they register
	 * it in (a second lookup waits for that MR); and the slots counted in
	 * pool->reg_busy[] for it while it is made or freed.
	 */
	uint32_t busy;
	uint32_t reg_pending;
	uint32_t slots;
};

/*
 * A PD handle (handle.c): one per attachment of a PD that was asked for
 * one, kept on pool->pdhs until the pool closes, so that a handle never
 * dangles. The allocation fast path reads its first four fields: a handle
 * names its pool, cache slot and key slot without a search. Detaching the
 * PD clears bit, which no arena's reg_mask matches: every later call
 * through the handle takes the slow path, which fails it; a later attach
 * in the same slot gets a new handle.
 */
struct mrp_pdh {
	/*
	 * The pool, or in a pool that samples or debugs (hooked)
	 * &mrp_pdh_no_pool, which no caller passes (NULL would pass for a
	 * NULL pool): its allocations take the slow path, which routes them
	 * as mrp_alloc() does. One compare tests the caller's pool and that.
	 */
	struct mrp_pool *fast_pool;
	uint32_t idx;			/* pool->idx: the thread's cache */
	/* 1 << slot while attached, 0 once detached; pool->lock */
	_Atomic uint32_t bit;
	uintptr_t key_off;		/* offsetof(struct mrp_arena, keys[slot]) */
	uintptr_t tls_off;		/* pool->tls_off */
	struct mrp_pool *pool;		/* the owner, for the slow path's checks */
	struct ibv_pd *pd;		/* the PD of this attachment */
	struct mrp_pdh *next;		/* pool->pdhs, pool->lock */
	/* a copy of pool->bin_off: no load of the pool on the fast path */
	uint16_t bin_off[MRP_BIN_TAB_SIZE];
} __attribute__((aligned(64)));

#define MRP_HIST_BUCKETS 64

struct mrp_pool {
	/* read by the fast paths */
	uint32_t idx;			/* slot in mrp_tls and mrp_pools */
	bool hooked;			/* sampling or debug: allocations take
					 * mrp_alloc_hooked() */
	bool debug;			/* cfg.debug */
	uintptr_t tls_off;		/* mrp_tls_off(idx): the fast paths' */
	struct ibv_pd *_Atomic pds[MRP_MAX_PDS];	/* attached, by slot */
	/*
	 * Sizes mrp_alloc() serves from the caches: size - 1 below it, which
	 * is MRP_MAX_CLASS, or 0 in a hooked pool. One compare tests size 0,
	 * large sizes and hooked.
	 */
	size_t fast_lim;
	/* bin offset of every class size, by (size - 1) >> MRP_BIN_TAB_SHIFT */
	uint16_t bin_off[MRP_BIN_TAB_SIZE];
	/* size class of sizes above 64 KiB, by (size - 1) >> MRP_TAB_SHIFT */
	uint8_t class_tab[MRP_TAB_SIZE];

	struct mrp_cfg cfg;
	const struct mrp_backend_ops *ops;
	int fd;				/* kernel backend */
	size_t granule;			/* arena sizes are multiples of this */
	_Atomic bool hugetlb_failed;	/* anon: MAP_HUGETLB refused once */
	bool fork_copy;			/* children get copies, fixed at open */
	bool backend_fork_copy;		/* kernel: the module can copy (init) */
	_Atomic bool hugepages;		/* anon: THP or hugetlb in use */
	unsigned int fork_gen;		/* mrp_fork_gen at open */

	pthread_mutex_t lock;
	struct mrp_arena *arenas;	/* every arena */
	/*
	 * Arena creation without the lock (arena.c), all pool->lock: arenas
	 * being made, in no map, list nor depot yet; their bytes, held
	 * against max_bytes with mapped; per PD slot, how many of them,
	 * lazy registrations (reg.c) and trimmed arenas (depot.c) register
	 * or deregister in it unlocked (mrp_detach_pd() waits for 0 before
	 * the PD's MRs go); slots a detach is waiting on, which no creation
	 * nor lazy registration starts to register in; and the condition
	 * those waits sleep on, broadcast whenever one of those ends (and a
	 * lazy registration waits on for another's). detach_waits counts the
	 * detaches that found registrations in flight and slept (for tests:
	 * that a detach waited, not only that it returned late).
	 */
	struct mrp_arena *creating;
	size_t creating_bytes;
	uint32_t reg_busy[MRP_MAX_PDS];
	uint32_t pd_detaching;
	pthread_cond_t created;
	_Atomic uint64_t detach_waits;
	/*
	 * The PD an attach in flight registers the arenas in, per slot
	 * (pool->lock): the slot is taken, the PD not in pds[] yet (reg.c).
	 * For tests: arenas registered by attaches without the lock, and lazy
	 * registrations that waited for another's.
	 */
	struct ibv_pd *attaching[MRP_MAX_PDS];
	_Atomic uint64_t attach_unlocked_regs;
	/* arenas, by detaches (and attaches undoing a failure) */
	_Atomic uint64_t detach_unlocked_deregs;
	_Atomic uint64_t lazy_waits;
	/* frees of a fallback buffer that waited for its registration (reg.c) */
	_Atomic uint64_t fb_free_waits;
	/*
	 * Arenas trim deregisters and unmaps without the lock (depot.c),
	 * off the map and pool->arenas, still counted in mapped and narenas
	 * until they are gone; pool->lock. A fork child unmaps them as it
	 * does creations, close waits for them.
	 */
	struct mrp_arena *trimming;
	struct mrp_arena *large_free;	/* large arenas waiting for reuse */
	struct mrp_fallback *fallbacks;
	/*
	 * Fallback buffers being made or freed without the lock (reg.c),
	 * on no list a lookup or free reaches; a fork child unmaps them as
	 * it does creations, close waits for them.
	 */
	struct mrp_fallback *fb_flight;
	struct mrp_mw *mws;		/* bound memory windows */
	struct mrp_pdh *pdh[MRP_MAX_PDS];	/* handle of each slot's attachment, if asked */
	struct mrp_pdh *pdhs;		/* every handle handed out, freed at close */
	unsigned int access[MRP_MAX_PDS];
	/* access of each arena's bind_mr in the slot, 0: none (mrp_attach_pd_bind()) */
	unsigned int bind_access[MRP_MAX_PDS];
	/*
	 * Slots whose device went away (mrp_pd_dead()): never registered in
	 * again, their calls fail with -ENODEV until the detach. Set under
	 * pool->lock, read without it; cleared when a slot is attached.
	 */
	_Atomic uint32_t pd_dead;
	_Atomic uint64_t pd_reg_failures[MRP_MAX_PDS];	/* per slot, since attach */
	_Atomic uint64_t pd_dereg_errors[MRP_MAX_PDS];
	_Atomic uint64_t pd_dmabuf_regs[MRP_MAX_PDS];
	/*
	 * Per slot: the errno that turned dma-buf registration off. Atomic:
	 * creations write it without pool->lock (reg.c).
	 */
	_Atomic int pd_dmabuf_error[MRP_MAX_PDS];
	/*
	 * Node new arenas are placed on, -1 none: cfg.numa_node, or for
	 * auto the first attached PD's device's. Written under pool->lock,
	 * read by the backends' map() without it.
	 */
	_Atomic int node;
	/* pool->lock: the application's arena callbacks, if set (arena_ops.c) */
	struct mrp_arena_ops arena_ops;
	bool arena_ops_set;
	size_t mapped, locked_bytes;
	uint64_t narenas;

	struct mrp_class cls[MRP_NCLASSES];
	struct mrp_tcache *tcaches;	/* mrp_global_lock */

	/* background thread */
	pthread_t bg;
	/*
	 * Set once the thread is started, cleared after it is joined, both by
	 * open and close, which no other call of the pool races; read by every
	 * thread's slow paths (mrp_depot_refill(), the alloc slow path,
	 * mrp_trim()) for a hint only: whether to kick the thread or do its
	 * work themselves. Relaxed: nothing is read through it, and a stale
	 * value costs one kick or one publish more or less.
	 */
	_Atomic bool bg_running;
	pthread_mutex_t bg_lock;
	pthread_cond_t bg_cond;
	bool bg_stop, bg_kick;
	/* stopped by mrp_bg_pause() until mrp_bg_resume() (pool.c) */
	bool bg_paused;
	pid_t bg_tid;		/* the thread's, set by the thread */

	/* stats page of the kernel backend (publish.c) */
	struct mrpool_client_stats *pub;	/* NULL: nothing to publish to */
	size_t pub_len;
	_Atomic uint64_t pub_last_ns;	/* when it was last written */
	_Atomic bool pub_busy;		/* a writer is at it */

	/* counters; cache counters of exited threads are folded in here */
	_Atomic uint64_t dead_allocs[MRP_NCLASSES], dead_frees[MRP_NCLASSES];
	_Atomic uint64_t dead_misses;
	_Atomic uint64_t large_allocs, large_frees, large_bytes;
	_Atomic uint64_t fb_allocs, fb_frees, fb_bytes;
	_Atomic uint64_t sync_growths, bg_growths, trimmed;
	_Atomic uint64_t regs, reg_ns, reg_ns_max;
	_Atomic uint64_t double_frees;	/* frees of buffers not live */
	_Atomic uint64_t dereg_errors;	/* failed ibv_dereg_mr calls */
	_Atomic uint64_t tcache_reclaims;	/* idle caches returned to the depot */
	/*
	 * Registrations of the program's that libmrpool-preload (preload/)
	 * served from this pool or passed on to libibverbs: written by the
	 * shim only (preload_publish), published on the stats page.
	 */
	_Atomic uint64_t preload_served, preload_passed;
	/*
	 * The shim's, set once after the open: brings preload_served and
	 * preload_passed up to date from its per-thread counters before
	 * mrp_publish() writes them to the stats page.
	 */
	void (*_Atomic preload_publish)(struct mrp_pool *pool);
	_Atomic uint64_t hist[MRP_HIST_BUCKETS];
};

/*
 * A fine class's block_mask: as all ones, no buffer start passes it (user
 * addresses are below 2^63 and not 0), and mrp_free_fine() tells it from
 * all ones with one compare.
 */
#define MRP_FINE_MASK	(~(uintptr_t)0 >> 1)

/*
 * The free fast path's start-of-buffer mask: buffer size - 1 of a power
 * of two; MRP_FINE_MASK for a fine class (mrp_free_fine() tests the start
 * exactly); all ones sends every free of the arena to the slow path
 * (memory windows bound, debug mode, retired).
 */
static inline uintptr_t mrp_fast_mask(const struct mrp_arena *a)
{
	if (a->pool->debug || atomic_load_explicit(&a->nmw, memory_order_relaxed) ||
	    atomic_load_explicit(&a->retired, memory_order_relaxed))
		return ~(uintptr_t)0;
	if (a->magic)
		return MRP_FINE_MASK;
	return ((uintptr_t)1 << a->shift) - 1;
}

/*
 * Owner-thread counter bump: a plain add, readable from other threads.
 * The relaxed load and store below are what it means; GCC emits them as
 * three instructions (load, add, store). On x86-64 one add to memory does
 * the same (an aligned 8-byte store is single-copy atomic there, and only
 * the owner writes): one instruction on each fast path's counter.
 * ThreadSanitizer does not see into asm, so its build keeps the C.
 */
static inline void mrp_inc(_Atomic uint64_t *c)
{
#if defined(__x86_64__) && !defined(__SANITIZE_THREAD__)
	__asm__("addq $1, %0" : "+m"(*(uint64_t *)c));
#else
	atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + 1,
			      memory_order_relaxed);
#endif
}

/*
 * A relaxed load the compiler may fold into the instruction that uses it
 * (cmp, test with a memory operand), which it does not do with atomics:
 * one instruction less per bound on the fast paths. On x86-64 an aligned
 * 8- or 4-byte load is single-copy atomic, and the callers order it with
 * a signal fence where order matters (mrp_bin_pop()); ThreadSanitizer
 * and other targets get the atomic load.
 */
#if defined(__x86_64__) && !defined(__SANITIZE_THREAD__)
#define mrp_peek(p)	(*(const __typeof__(+*(p)) *)(p))
#else
#define mrp_peek(p)	atomic_load_explicit(p, memory_order_relaxed)
#endif

static inline void mrp_add(_Atomic uint64_t *c, uint64_t v)
{
	atomic_fetch_add_explicit(c, v, memory_order_relaxed);
}

static inline uint64_t mrp_get(_Atomic uint64_t *c)
{
	return atomic_load_explicit(c, memory_order_relaxed);
}

/*
 * Size classes (the one place they are computed, with classes.c): for
 * 1 <= size <= MRP_MAX_CLASS, up to 64 KiB msb = log2 of the class size
 * minus one (one bsr) and class = msb - 11 (indexes 0..4 are 4..64 KiB in
 * both modes); above, the pool's table, which holds only the classes of
 * its mode: the same code for both.
 */
extern const size_t mrp_class_sizes[MRP_NCLASSES];

static inline unsigned int mrp_size_msb(size_t size)
{
	size_t s = (size - 1) | (((size_t)1 << MRP_MIN_SHIFT) - 1);

	/* 63 - clz written as ^: GCC makes one bsr of it on x86 */
	return (unsigned int)__builtin_clzl(s) ^ 63;
}

static inline unsigned int mrp_size_class(const struct mrp_pool *pool, size_t size)
{
	if (size > MRP_FINE_MIN)
		return pool->class_tab[(size - 1) >> MRP_TAB_SHIFT];
	return mrp_size_msb(size) - (MRP_MIN_SHIFT - 1);
}

static inline size_t mrp_class_size(unsigned int cls)
{
	return mrp_class_sizes[cls];
}

/* A class's buffers are aligned to the lowest set bit of its size. */
static inline size_t mrp_class_align(unsigned int cls)
{
	size_t s = mrp_class_size(cls);

	return s & -s;
}

/* classes.c */
bool mrp_class_exists(unsigned int cls, bool fine, size_t page);
void mrp_class_table(uint8_t tab[MRP_TAB_SIZE], bool fine, size_t page);
void mrp_bin_table(const struct mrp_pool *pool, uint16_t tab[MRP_BIN_TAB_SIZE]);
uint64_t mrp_buf_magic(size_t bsize);

/* Is the PD of slot marked dead? */
static inline bool mrp_slot_dead(struct mrp_pool *pool, int slot)
{
	return atomic_load_explicit(&pool->pd_dead, memory_order_acquire) & (1u << slot);
}

/*
 * Does the arena carry usable keys of slot? (see reg_mask) Shifted, not
 * masked: GCC tests the bit in place and the allocation fast path keeps
 * no register for 1 << slot (which cost it a push and pop).
 */
static inline bool mrp_arena_has(const struct mrp_arena *a, int slot)
{
	return (atomic_load_explicit(&a->reg_mask, memory_order_acquire) >> slot) & 1;
}

/* PD slot, -1 if pd is not attached. */
static inline int mrp_pd_slot(struct mrp_pool *pool, struct ibv_pd *pd)
{
	for (int i = 0; i < MRP_MAX_PDS; i++)
		if (atomic_load_explicit(&pool->pds[i], memory_order_acquire) == pd)
			return i;
	return -1;
}

/*
 * Ordering of the idle reclaim's handshake (tcache.c): the allocation fast
 * path stores a bin's top, then loads its lim; the reclaimer stores lim,
 * then loads top. Natively the reclaimer's membarrier() orders
 * the owner's side, which costs the fast path nothing. ThreadSanitizer does
 * not know membarrier(), so its build makes both sides seq_cst: what it
 * checks there is that build for data races, not that this ordering is
 * right; reclaim_hooks_test checks that, with a pass between the two.
 */
#ifdef __SANITIZE_THREAD__
#define MRP_HANDSHAKE		memory_order_seq_cst
#define MRP_HANDSHAKE_ACQUIRE	memory_order_seq_cst
#else
#define MRP_HANDSHAKE		memory_order_relaxed
#define MRP_HANDSHAKE_ACQUIRE	memory_order_acquire
#endif

/*
 * Test hooks (tests/reclaim_hooks_test.c): a call at the points of the
 * reclaim handshake where one interleaving matters and a stress test cannot
 * land, a single instruction apart. Only objects built with MRP_TEST_HOOKS
 * (lib/Makefile, build/hooks/) have them; the library has none.
 */
enum mrp_test_hook {
	MRP_HOOK_ALLOC_POPPED,		/* alloc fast path: top stored, lim not loaded */
	MRP_HOOK_ALLOC_CAP_SEEN,	/* alloc fast path: lim seen, keys not tested */
	MRP_HOOK_FREE_CAP_SEEN,		/* free fast path: end seen, entry not stored */
	MRP_HOOK_PASS_MARKED,		/* reclaim pass: caches marked, no barrier yet */
	MRP_HOOK_N
};
#ifdef MRP_TEST_HOOKS
extern void (*_Atomic mrp_test_hooks[MRP_HOOK_N])(void);
#define MRP_TEST_HOOK(h) do {							\
	void (*_f)(void) = atomic_load_explicit(&mrp_test_hooks[h],		\
						memory_order_acquire);		\
										\
	if (_f)									\
		_f();								\
} while (0)
#else
#define MRP_TEST_HOOK(h) do { } while (0)
#endif

/* tcache.c */
extern __thread struct mrp_tcache *mrp_tls[MRP_MAX_POOLS]
	__attribute__((tls_model("initial-exec")));

/*
 * The fast paths reach the calling thread's cache of a pool by
 * mrp_tls_get(pool->tls_off). On x86-64, tls_off is the offset of
 * mrp_tls[idx] from the thread pointer, the same in every thread (static
 * TLS: initial-exec), so the load is one %fs-relative move with no load
 * of mrp_tls's offset from the GOT first (GCC's named address space,
 * hence -std=gnu11). Elsewhere, and under the sanitizers (which do not
 * follow __seg_fs), it is the index. Every object of one build agrees.
 */
#if defined(__x86_64__) && defined(__SEG_FS) && \
	!defined(__SANITIZE_THREAD__) && !defined(__SANITIZE_ADDRESS__)
#ifdef __STRICT_ANSI__
#error "internal.h on x86-64: __seg_fs needs -std=gnu11"
#endif
static inline uintptr_t mrp_tls_off(uint32_t idx)
{
	return (uintptr_t)&mrp_tls[idx] - (uintptr_t)__builtin_thread_pointer();
}

static inline struct mrp_tcache *mrp_tls_get(uintptr_t off)
{
	return *(struct mrp_tcache *const __seg_fs *)off;
}
#else
static inline uintptr_t mrp_tls_off(uint32_t idx)
{
	return idx;
}

static inline struct mrp_tcache *mrp_tls_get(uintptr_t off)
{
	return mrp_tls[off];
}
#endif

extern struct mrp_tcache mrp_tcache_empty;
extern pthread_mutex_t mrp_global_lock;
extern pthread_rwlock_t mrp_fork_lock;
extern _Atomic unsigned int mrp_fork_gen;
int mrp_global_init(void);
struct mrp_tcache *mrp_tcache_get(struct mrp_pool *pool);
void mrp_tcache_put(struct mrp_tcache *tc);
int mrp_tcache_flush_self(struct mrp_pool *pool);
void mrp_tcache_flush(struct mrp_tcache *tc);
void mrp_tcaches_orphan(struct mrp_pool *pool, bool forked);
int mrp_tcaches_reclaim_idle(struct mrp_pool *pool, uint64_t now, uint64_t delay_ns);
int mrp_tcaches_reclaim_now(struct mrp_pool *pool);

/*
 * The address map: an arena pointer for every 2 MiB of the address space
 * it covers. Entries are written under the owning pool's lock, read
 * without one.
 *
 * Readers load one pointer, slot, which brings its bound with it: the
 * number of entries is the size_t just below slot[0] (mrp_map_len()).
 * The process's map is created for the first arena (mrp_map_init()), not
 * at load nor at pool open: until then slot points just past
 * mrp_map_none, a bound of 0 with no table, so every address is outside
 * and every reader (free() of a foreign pointer, mrp_lookup(), the shim's
 * malloc_usable_size() and mprotect()) takes it for no arena's without a
 * test of its own. The creator writes the header and the table's
 * mapping, then stores slot with release; a reader that may run before
 * any arena exists loads it with acquire (a plain load on x86-64), so it
 * sees either the empty map or the whole new one, never a new bound over
 * the old table. A reader holding a pool buffer (a cache's pop) loads it
 * relaxed: the buffer's arena, published after the map was, already
 * orders it.
 */
struct mrp_map {
	struct mrp_arena **_Atomic slot;	/* entries pointers, read-only until reserved */
	size_t entries;			/* covers [0, entries << MRP_MAP_SHIFT): the
					 * writers' copy of slot's header */
	size_t page;			/* the system page size */
};

/* arena.c */
extern struct mrp_map mrp_map;		/* the process's, made for the first arena */
extern const size_t mrp_map_none[1];	/* the bound of a map not created: 0 */
unsigned int mrp_map_va_bits(void);
int mrp_map_init(void);
int mrp_map_create(struct mrp_map *m, unsigned int va_bits);
void mrp_map_destroy(struct mrp_map *m);
int mrp_map_reserve(struct mrp_map *m, uintptr_t base, size_t size);
int mrp_map_set(struct mrp_map *m, uintptr_t base, size_t size, struct mrp_arena *a);

/* The entries a map's slot pointer covers: its header. */
static inline size_t mrp_map_len(struct mrp_arena *const *slot)
{
	return ((const size_t *)slot)[-1];
}

/* Any thread, any time after mrp_map_create() (see struct mrp_map). */
static inline struct mrp_arena *mrp_map_get(const struct mrp_map *m, uintptr_t a)
{
	struct mrp_arena **slot = atomic_load_explicit(&m->slot, memory_order_acquire);
	size_t i = a >> MRP_MAP_SHIFT;

	return i < mrp_map_len(slot) ? slot[i] : NULL;
}

/* Entries of the process's map: 0 until the first arena. */
static inline size_t mrp_map_entries(void)
{
	return mrp_map_len(atomic_load_explicit(&mrp_map.slot, memory_order_acquire));
}

static inline struct mrp_arena *mrp_arena_of(uintptr_t a)
{
	return mrp_map_get(&mrp_map, a);
}

/*
 * The arena of a buffer the caller holds, taken from a cache: no bound
 * test, and no ordering (see struct mrp_map).
 */
static inline struct mrp_arena *mrp_arena_of_held(const void *p)
{
	return atomic_load_explicit(&mrp_map.slot, memory_order_relaxed)
		[(uintptr_t)p >> MRP_MAP_SHIFT];
}
int mrp_arena_create(struct mrp_pool *pool, size_t size, size_t align,
		     unsigned int cls, size_t large_len, struct mrp_arena **out);
void mrp_arenas_creating_wait(struct mrp_pool *pool);
int mrp_arena_destroy(struct mrp_pool *pool, struct mrp_arena *a);
void mrp_arena_trim_begin(struct mrp_pool *pool, struct mrp_arena *a);
bool mrp_arena_trim_dereg(struct mrp_pool *pool, struct mrp_arena *a);
bool mrp_arena_trim_end(struct mrp_pool *pool, struct mrp_arena *a, bool deregistered);
void mrp_arena_trim_unmap(struct mrp_pool *pool, struct mrp_arena *a);
void mrp_arena_forget(struct mrp_pool *pool, struct mrp_arena *a);
int mrp_arena_announce(struct mrp_pool *pool, struct mrp_arena *a);
void mrp_arena_unannounce(struct mrp_pool *pool, struct mrp_arena *a);
void mrp_arena_free(struct mrp_arena *a);
int mrp_large_alloc(struct mrp_pool *pool, size_t size, size_t align,
		    struct mrp_arena **out);
int mrp_large_free(struct mrp_pool *pool, uintptr_t p);
bool mrp_large_live(struct mrp_pool *pool, uintptr_t p);

/* depot.c */
void mrp_depot_add(struct mrp_pool *pool, struct mrp_arena *a);
int mrp_depot_refill(struct mrp_pool *pool, unsigned int cls, struct mrp_bin *bin);
void mrp_depot_put(struct mrp_pool *pool, unsigned int cls, const struct mrp_ent *ents,
		   uint32_t n);
int mrp_grow(struct mrp_pool *pool, unsigned int cls, bool background);
int mrp_trim_idle(struct mrp_pool *pool, uint64_t now, uint64_t delay_ns,
		  bool keep_reserve);
void mrp_arena_retire(struct mrp_pool *pool, struct mrp_arena *a);

/* reg.c */
void mrp_reg_resolve(void);
void mrp_reg_arena(struct mrp_pool *pool, struct mrp_arena *a, uint32_t slots);
void mrp_reg_arena_publish(struct mrp_pool *pool, struct mrp_arena *a);
uint32_t mrp_reg_arena_missing(struct mrp_pool *pool, uint32_t slots);
int mrp_reg_lazy(struct mrp_pool *pool, struct mrp_arena *a, int slot);
int mrp_dereg_arena(struct mrp_pool *pool, struct mrp_arena *a);
int mrp_attach_pd_bind(struct mrp_pool *pool, struct ibv_pd *pd, unsigned int access,
		       unsigned int bind_access);
int mrp_fallback_alloc(struct mrp_pool *pool, size_t size, size_t align,
		       int slot, struct mrp_buf *buf);
int mrp_fallback_free(struct mrp_pool *pool, void *addr);
int mrp_fallback_lookup(struct mrp_pool *pool, const void *addr, int slot,
			struct mrp_buf *buf);
void mrp_fallback_release_all(struct mrp_pool *pool, bool forked);

/* handle.c */
extern const char mrp_pdh_no_pool;
void mrp_pdh_detach(struct mrp_pool *pool, int slot);
void mrp_pdh_free_all(struct mrp_pool *pool);

/* mw.c */
int mrp_mw_release_buf(struct mrp_pool *pool, struct mrp_arena *a, uintptr_t start);
void mrp_mw_release_all(struct mrp_pool *pool, bool forked);
void mrp_mw_release_pd_locked(struct mrp_pool *pool, struct ibv_pd *pd);
/* type 1 windows on a private QP of a PD (the preload shim's) */
struct mrp_binder;
struct ibv_mw;
struct mrp_binder *mrp_binder_create(struct ibv_pd *pd);
void mrp_binder_destroy(struct mrp_binder *b, bool forked);
int mrp_binder_bind(struct mrp_binder *b, struct mrp_arena *a, int slot, void *addr,
		    size_t len, unsigned int access, struct ibv_mw **mwp);

/* pool.c */
static inline bool mrp_forked(struct mrp_pool *pool)
{
	return pool->fork_gen != atomic_load_explicit(&mrp_fork_gen, memory_order_relaxed);
}
/*
 * True on a pool's background thread only: the preload shim tells the
 * library's own allocations there from the program's with one TLS load.
 */
extern __thread bool mrp_bg_self __attribute__((tls_model("initial-exec")));
void mrp_bg_kick(struct mrp_pool *pool);
bool mrp_bg_pause(struct mrp_pool *pool);
int mrp_bg_resume(struct mrp_pool *pool);
void mrp_pools_fork_prepare(void);
void mrp_pools_fork_parent(void);
void mrp_pools_fork_child(void);
uint64_t mrp_now_ns(void);

/* publish.c */
void mrp_publish_init(struct mrp_pool *pool);
void mrp_publish(struct mrp_pool *pool, bool force);
void mrp_publish_fini(struct mrp_pool *pool, bool forked);

/* options.c */
int mrp_parse_size(const char *s, size_t *out);
int mrp_cfg_load(struct mrp_cfg *cfg, const struct mrp_pool_attr *attr, const char **bad);

/* stats.c */
void mrp_lat_record(struct mrp_pool *pool, uint64_t ns);

/* backend_anon.c, backend_kmod.c, os.c */
extern const struct mrp_backend_ops mrp_backend_anon;
extern const struct mrp_backend_ops mrp_backend_kmod;
void *mrp_os_map_aligned(size_t size, size_t align, int prot, int flags,
			 int fd, off_t off);
void mrp_os_unmap(void *addr, size_t len);
void mrp_os_unmap_resolve(void);
bool mrp_os_fork_copies_pinned(void);
size_t mrp_os_page_size(void);
/* numa.c */
#define MRP_NUMA_MAX	1023	/* highest node number taken (MAX_NUMNODES) */
int mrp_numa_device_node(struct ibv_pd *pd);
int mrp_numa_node_online(int node);
void mrp_numa_attach(struct mrp_pool *pool, struct ibv_pd *pd);
void mrp_numa_prefer(void *addr, size_t len, int node);
int mrp_os_membarrier_register(void);
int mrp_os_membarrier(void);

#pragma GCC visibility pop

#endif /* MRP_INTERNAL_H */
