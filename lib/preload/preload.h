/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * libmrpool-preload: unmodified programs on pool memory (LD_PRELOAD, see
 * mrpool-run(1)). The shim carries its own copy of the library's objects
 * (linked from the same sources, every symbol hidden) and one pool:
 *
 *   real.c    the functions it interposes on, found with dlsym(RTLD_NEXT),
 *             and a static buffer for the allocations dlsym makes first
 *   shim.c    settings, the pool (opened on first use), fork, counters
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
 * thread, every entry point goes straight to the real function.
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
 * Real allocator entry points, resolved on first use: true once they are,
 * false inside dlsym while this thread resolves them (the caller then
 * serves itself from the static buffer). free is stored last, with
 * release (real.c): the acquire here makes the other pointers visible with
 * it, also on a weakly ordered CPU (arm64) to a thread an early
 * constructor started (a plain load on x86).
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
};

extern struct mrp_pl_cfg mrp_pl_cfg;	/* set by mrp_pl_resolve(), then read-only */
extern __thread unsigned int mrp_pl_depth __attribute__((tls_model("initial-exec")));

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
};
extern struct mrp_pl_counters mrp_pl_count;

void mrp_pl_load_cfg(const char *foreign);
struct mrp_pool *mrp_pl_pool(void);

/*
 * Is this call the library's own (inside a call of the shim's into it, or
 * on the pool's thread)? Then it goes straight to the real function.
 */
static inline bool mrp_pl_internal(void)
{
	return mrp_pl_depth || mrp_bg_self;
}

static inline void mrp_pl_enter(void)
{
	mrp_pl_depth++;
}

static inline void mrp_pl_leave(void)
{
	mrp_pl_depth--;
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
