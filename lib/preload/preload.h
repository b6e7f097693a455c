/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * libmrpool-preload: unmodified programs on pool memory (LD_PRELOAD, see
 * mrpool-run(1)). The shim carries its own copy of the library's objects
 * (linked from the same sources, every symbol hidden) and one pool:
 *
 *   real.c    the functions it interposes on, found with dlsym(RTLD_NEXT)
 *             by the first call that needs them (the constructor's or an
 *             earlier one), and a static buffer for the allocations dlsym
 *             makes first
 *   shim.c    settings, dormancy until the process uses RDMA, the pool
 *             (opened on first use once active), fork, counters
 *   malloc.c  the allocator entry points: large requests from the pool
 *   verbs.c   registrations inside a pool buffer served by its arena's MR
 *
 * Global state: interposed entry points get no handle from their caller, so
 * what they share (the real functions, the settings, the pool, the served
 * MRs) lives in process-wide variables, one set per process, each with a
 * comment saying who writes it.
 *
 * Recursion: the library itself calls malloc(), free() and ibv_reg_mr()
 * (arena bookkeeping, registering an arena in a PD), which reach the shim's
 * own definitions. Every call the shim makes into the library runs between
 * mrp_pl_enter() and mrp_pl_leave(); inside, and on the pool's background
 * thread, every entry point goes straight to the real function, and a free
 * of a pool block waits until the thread is out (see struct mrp_pl_tls).
 */
#ifndef MRP_PRELOAD_H
#define MRP_PRELOAD_H

#include <stddef.h>
#include <stdint.h>

#include "../internal.h"

#pragma GCC visibility push(hidden)

struct ibv_context;
struct ibv_mr;
struct ibv_pd;

/*
 * The next definitions in the lookup order: glibc's, or another
 * allocator's (real.c, then shim.c leaves allocations to it).
 */
struct mrp_pl_real {
	void *(*malloc)(size_t);
	void (*free)(void *);
	void *(*calloc)(size_t, size_t);
	void *(*realloc)(void *, size_t);
	void *(*reallocarray)(void *, size_t, size_t);
	int (*posix_memalign)(void **, size_t, size_t);
	void *(*aligned_alloc)(size_t, size_t);
	void *(*memalign)(size_t, size_t);
	void *(*valloc)(size_t);
	void *(*pvalloc)(size_t);
	size_t (*malloc_usable_size)(void *);
	void (*libc_free)(void *);		/* glibc's own names (malloc.c) */
	void *(*libc_realloc)(void *, size_t);
};

/* real.c */
extern struct mrp_pl_real mrp_pl_real;	/* written once, under pthread_once */
void mrp_pl_resolve(void);
void *mrp_pl_verbs_sym(const char *name);
bool mrp_pl_boot_owns(const void *p);
void *mrp_pl_boot_alloc(size_t size, size_t align);
size_t mrp_pl_boot_size(const void *p);

/*
 * Real allocator entry points and libibverbs' functions, resolved on first
 * use: true once they are, false inside dlsym while this thread resolves
 * them (the caller then serves itself from the static buffer). free is
 * stored last, with release (real.c): the acquire here makes the other
 * pointers visible with it, also on a weakly ordered CPU (arm64) to a
 * thread an early constructor started (a plain load on x86).
 */
static inline bool mrp_pl_ready(void)
{
	if (likely(__atomic_load_n(&mrp_pl_real.free, __ATOMIC_ACQUIRE)))
		return true;
	mrp_pl_resolve();
	return __atomic_load_n(&mrp_pl_real.free, __ATOMIC_ACQUIRE) != NULL;
}

/* shim.c */
enum mrp_pl_remote {
	MRP_PL_REMOTE_REAL,		/* remote access: a real registration */
	MRP_PL_REMOTE_ARENA,		/* MRPOOL_PRELOAD_REMOTE=arena */
};

/* MRPOOL_PRELOAD_INHERIT: when the pool is active, who keeps the shim (shim.c) */
enum mrp_pl_inherit {
	MRP_PL_INHERIT_DORMANT,		/* unset: dormant until RDMA, inherited */
	MRP_PL_INHERIT_ALL,		/* all or 1: active from the start, inherited */
	MRP_PL_INHERIT_UNTIL_RDMA,	/* 0: dormant until RDMA, then not inherited */
};

struct mrp_pl_cfg {
	size_t min;			/* MRPOOL_PRELOAD_MIN, 0: no allocations */
	size_t max;			/* MRPOOL_PRELOAD_MAX: largest from the pool,
					 * default 1 GiB, 0: no limit */
	size_t aligned_min;		/* MRPOOL_PRELOAD_ALIGNED_MIN: the same for
					 * page-aligned requests, default min */
	size_t calloc_max;		/* MRPOOL_PRELOAD_CALLOC_MAX: largest calloc
					 * from the pool, default 16 MiB, 0: max */
	enum mrp_pl_remote remote;
	const char *report;		/* MRPOOL_PRELOAD_REPORT: where, or NULL */
	bool debug;			/* MRPOOL_PRELOAD_DEBUG: warnings on stderr */
	const char *foreign;		/* the real malloc's object when it is not
					 * glibc's (file name), else NULL: min and
					 * aligned_min are then 0 ... */
	bool forced;			/* ... unless MRPOOL_PRELOAD_FOREIGN_MALLOC */
	bool left;			/* they were, from allocations asked for */
	enum mrp_pl_inherit inherit;	/* MRPOOL_PRELOAD_INHERIT */
};

extern struct mrp_pl_cfg mrp_pl_cfg;	/* set by mrp_pl_resolve(), then read-only */

/*
 * Where a thread is: outside the library, or inside a call the shim made
 * into it. The library is not reentrant: the library's own calls of
 * malloc() and ibv_reg_mr(), and a signal handler that runs while its
 * thread is inside, must not enter it again.
 *
 * in: 0 outside; inside, the stack pointer of the thread's outermost call
 * into the library, read where it went in (its top); MRP_PL_FRESH before
 * the thread's first look (which sets the key whose destructor runs at
 * its exit).
 *
 * A call into the library may be left without coming out: a signal
 * handler that interrupted it siglongjmp()s away, or the thread is
 * cancelled or calls pthread_exit() there. Its top then stays, and a
 * later call tells it from a live one by its own frame (the CFA of the
 * shim's entry point, mrp_pl_inside_slow()): stacks grow down, so every
 * frame that runs while the call is live (the library's own calls, a
 * signal handler on the thread's stack) lies below the top, and a call
 * made after a jump out lies at or above the frame the jump went to,
 * above the frames it left. A call from above the top clears it, unless
 * the thread runs on its alternate signal stack, where a handler may
 * interrupt a live call from any address. A call from below the top is
 * taken as inside, also after a jump when it comes from deeper frames
 * than the call it left: such calls wait (large allocations from the real
 * allocator, frees deferred) until the thread's next call from a frame as
 * high as the one the jump went to, or its exit. An exiting thread's
 * frames have all returned or been unwound, so its exit (the key's
 * destructor) and exit() (the shim's destructor) clear in too. Not seen:
 * a handler on an alternate stack armed with SS_AUTODISARM (the kernel
 * says it is not on it) above the thread's stack, or one that switches
 * stacks itself (swapcontext() out of a handler), which would be taken
 * for a call after a jump and enter the library while it is busy.
 *
 * Frees of pool blocks while inside wait, out of band (nothing is written
 * into a block, which a peer holding an arena's rkey may write): the
 * block is marked (its state byte MRP_BUF_DEFERRED, or its large arena's
 * pl_deferred) by compare-and-swap from LIVE, which is also the
 * double-free check, put in a free slot of slot[] by compare-and-swap from
 * NULL, and pending set. The outermost mrp_pl_leave() sees pending and
 * gives them back (mrp_pl_drain()). With slot[] full the block is an
 * orphan, which the next drain of any thread finds by its mark. A signal
 * handler may defer while its thread defers or drains: each slot goes to
 * one of them by its compare-and-swap, and a drain runs inside (a
 * handler's free defers), clears pending before it empties the slots and
 * reads it again once out, so a block deferred meanwhile is given back by
 * it or the next one. The fields are the thread's own: no other thread
 * reads or writes them, its signal handlers do.
 */
#define MRP_PL_FRESH		((uintptr_t)1)
#define MRP_PL_DEFER_SLOTS	16
struct mrp_pl_tls {
	uintptr_t in;			/* 0, MRP_PL_FRESH or the top */
	uintptr_t pending;		/* non-zero: something to give back */
	void *slot[MRP_PL_DEFER_SLOTS];	/* deferred blocks, NULL: free slot */
};
extern __thread struct mrp_pl_tls mrp_pl_tls __attribute__((tls_model("initial-exec")));

/*
 * Counters for the report and the stats page (struct mrp_pool), of the
 * slow paths only: what malloc and free serve from the pool is the pool's
 * own count (mrp_stats(): allocs, frees), per thread, where a shared
 * counter here would cost every pair two locked adds on one cache line.
 * Registrations served and passed on are counted per thread too (verbs.c,
 * mrp_pl_verbs_counts()).
 */
struct mrp_pl_counters {
	_Atomic uint64_t alloc_fails;	/* large ones the pool refused (real then) */
	_Atomic uint64_t forks;		/* forks with pool blocks live */
	_Atomic uint64_t copies;	/* realloc() moves that copied a block */
	_Atomic uint64_t copied;	/* bytes they copied */
	_Atomic uint64_t zeroed;	/* bytes calloc() cleared in pool blocks */
	_Atomic uint64_t deferred;	/* frees of pool blocks made while inside */
	_Atomic uint64_t abandoned;	/* calls into the library found abandoned */
};
extern struct mrp_pl_counters mrp_pl_count;

void mrp_pl_load_cfg(const char *foreign);
void mrp_pl_activate(void);
void mrp_pl_setup_slow(void);
extern _Atomic bool mrp_pl_set_up;

/*
 * What the shim's constructor sets up, for a call that comes before it (a
 * constructor of the program's libraries, or a thread one started): the
 * real functions resolved (mrp_pl_ready()), the library's fork handlers
 * and the shim's after them. Once, under pthread_once; then one load. The
 * pool opens after it, so a path that found the pool open never waits here.
 */
static inline void mrp_pl_setup(void)
{
	if (likely(atomic_load_explicit(&mrp_pl_set_up, memory_order_acquire)))
		return;
	mrp_pl_setup_slow();
}

void mrp_pl_tls_init(void);
struct mrp_pool *mrp_pl_pool_outside(void);
struct mrp_pool *mrp_pl_pool_peek(void);
bool mrp_pl_inside_slow(uintptr_t cfa);

/* malloc.c */
void mrp_pl_drain(void);

/* The stack pointer, for in (x86-64 stores it with one instruction). */
static inline __attribute__((always_inline)) uintptr_t mrp_pl_sp(void)
{
	uintptr_t sp;

#if defined(__aarch64__)
	__asm__ volatile("mov %0, sp" : "=r"(sp));
#else
	sp = (uintptr_t)__builtin_frame_address(0);
#endif
	return sp;
}

/*
 * Is this call inside one of the thread's calls into the library (see
 * struct mrp_pl_tls)? One compare with memory when not (a plain read, as
 * of pending below: a signal handler leaves in as it found it, or clears
 * a top left behind, which the slow path reads again). Inlined into the
 * entry points, whose frame (CFA) the answer takes when the thread is in.
 */
static inline __attribute__((always_inline)) bool mrp_pl_inside(void)
{
	return unlikely(mrp_pl_tls.in) && mrp_pl_inside_slow((uintptr_t)__builtin_dwarf_cfa());
}

/*
 * The pool, if this call may use it: not from inside the library (the
 * caller's own bookkeeping, or a signal handler), not on the pool's
 * thread, not in a forked child, not while another thread opens it.
 */
static inline __attribute__((always_inline)) struct mrp_pool *mrp_pl_pool(void)
{
	return mrp_pl_inside() ? NULL : mrp_pl_pool_outside();
}

/*
 * Is this call the library's own (inside a call of the shim's into it, or
 * on the pool's thread)? Then it goes straight to the real function.
 */
static inline __attribute__((always_inline)) bool mrp_pl_internal(void)
{
	return mrp_pl_inside() || mrp_bg_self;
}

/*
 * Into the library from outside (mrp_pl_pool() gave a pool, so in is 0):
 * one store. Out again: one store, and the frees that waited, if any.
 * in and pending are the thread's, also read and written by its signal
 * handlers: the signal fence keeps the compiler from reading pending
 * before in is 0. pending is read plainly (one aligned word, which no
 * other thread writes): an atomic load costs a register load and a test
 * where this is one compare with memory.
 */
static inline __attribute__((always_inline)) void mrp_pl_enter_outer(void)
{
#if defined(__x86_64__)
	__asm__ volatile("movq %%rsp, %0" : "=m"(mrp_pl_tls.in));
#else
	__atomic_store_n(&mrp_pl_tls.in, mrp_pl_sp(), __ATOMIC_RELAXED);
#endif
}

static inline __attribute__((always_inline)) void mrp_pl_leave_outer(void)
{
	__atomic_store_n(&mrp_pl_tls.in, 0, __ATOMIC_RELAXED);
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	if (unlikely(mrp_pl_tls.pending))
		mrp_pl_drain();
}

/*
 * Into the library from anywhere (also from inside it: a registration
 * passed on runs libibverbs, which calls the shim's ibv_reg_mr_iova2):
 * returns what mrp_pl_leave() restores, 0 if this call is the outermost.
 */
static inline __attribute__((always_inline)) uintptr_t mrp_pl_enter(void)
{
	uintptr_t outer = mrp_pl_inside() ? __atomic_load_n(&mrp_pl_tls.in, __ATOMIC_RELAXED) : 0;

	if (!outer)
		mrp_pl_enter_outer();
	return outer;
}

/* A nested call leaves in as it is: no check inside a live call clears it. */
static inline __attribute__((always_inline)) void mrp_pl_leave(uintptr_t outer)
{
	if (!outer)
		mrp_pl_leave_outer();
}

/*
 * The arena of the shim's pool holding p, or NULL: one load from the
 * address map (the shim's copy; it maps this pool's arenas only).
 */
static inline struct mrp_arena *mrp_pl_arena(const void *p)
{
	return mrp_arena_of((uintptr_t)p);
}

/* Bytes from p to the end of its buffer in arena a. */
static inline size_t mrp_pl_buf_left(const struct mrp_arena *a, const void *p)
{
	uintptr_t u = (uintptr_t)p, start;

	if (a->cls == MRP_LARGE)
		return a->base + a->size - u;
	/* 0 in a fine class's tail, which is never a buffer */
	start = mrp_buf_start(a, u);
	return start ? start + a->bsize - u : 0;
}

/* verbs.c */
void mrp_pl_verbs_resolve(void);
void mrp_pl_verbs_counts(uint64_t *served, uint64_t *passed);
void mrp_pl_verbs_publish(struct mrp_pool *pool);
void mrp_pl_verbs_fork_prepare(void);
void mrp_pl_verbs_fork_parent(void);
void mrp_pl_verbs_fork_child(void);

#pragma GCC visibility pop

#endif /* MRP_PRELOAD_H */
