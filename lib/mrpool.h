/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * libmrpool: RDMA-ready buffers that already carry their keys.
 *
 * A pool takes large, 2 MiB-aligned, pinned arenas from a backend (the
 * mrpool kernel module through /dev/mrpool, or anonymous memory when the
 * module is absent), registers each arena once in every protection domain
 * attached to the pool, and carves arenas into power-of-two buffers (4 KiB
 * to 2 MiB, or finer classes in between on request: see
 * mrp_pool_attr.classes; larger requests get an arena of their own). Allocation and free
 * go through a bounded per-thread cache: no lock and no system call on that
 * path, and never a registration. A thread's cached buffers go back to the
 * pool when it exits, calls mrp_thread_flush(), or makes no call on the
 * pool for the trim delay (where membarrier(2) allows: see
 * mrp_thread_flush()).
 *
 * Error rule: calls returning int return 0 (or a documented non-negative
 * value) on success and a negative errno value on failure; calls returning
 * a pointer return NULL and set errno. mrp_strerror() describes both.
 *
 * Thread safety: every call may be made from any thread, except that
 * mrp_pool_close() and mrp_detach_pd() must not race with other calls on
 * the same pool (or, for detach, with calls naming that PD or its handle). No call is
 * async-signal-safe: none may be made from a signal handler (they take
 * locks, allocate memory and may map it). A thread may be cancelled
 * (pthread_cancel) while in a call: the library reaches no cancellation
 * point while it holds one of its locks (the callbacks of
 * mrp_set_arena_ops() must not either).
 *
 * A pool with the background attribute runs one thread, "mrpool-bg", with
 * every signal blocked. The shared library is never unloaded (-z nodelete):
 * dlclose() leaves it mapped, since threads that used it run its code at
 * exit.
 *
 * The per-thread caches use initial-exec TLS (256 bytes): a program that
 * dlopen()s the library late, after many other such libraries, may see
 * "cannot allocate memory in static TLS block"; linking it avoids that.
 *
 * Fork: arenas and fallback buffers are not inherited by a child (the
 * module maps slices VM_DONTCOPY; the library's own memory is
 * MADV_DONTFORK), and the library closes the child's copy of the pool's
 * /dev/mrpool descriptor at fork, so the parent's slices go back to the
 * module when the parent exits even while the child lives. In a child every
 * call on a pool opened by the parent fails with -ECHILD (or NULL with
 * errno ECHILD); only mrp_pool_close() works there, releasing the child's
 * bookkeeping without touching the parent's memory.
 */
#ifndef MRPOOL_H
#define MRPOOL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MRP_VERSION_MAJOR	1
#define MRP_VERSION_MINOR	7
/* Compile-time version: compare with mrp_version() for the loaded one. */
#define MRP_VERSION		((MRP_VERSION_MAJOR << 16) | MRP_VERSION_MINOR)

struct ibv_pd;
struct mrp_pool;
struct mrp_pdh;

/* Backend choice (attribute and MRPOOL_BACKEND=auto|kernel|anon). */
enum mrp_backend {
	MRP_BACKEND_AUTO = 0,	/* kernel module when its device opens, else anon */
	MRP_BACKEND_KERNEL,	/* /dev/mrpool slices only */
	MRP_BACKEND_ANON,	/* pinned anonymous memory, hugepages if possible */
};

/* Bits of mrp_pool_attr.comp_mask: which fields the caller has set. */
enum {
	MRP_POOL_ATTR_BACKEND		= 1 << 0,
	MRP_POOL_ATTR_DEVICE		= 1 << 1,
	MRP_POOL_ATTR_ARENA_SIZE	= 1 << 2,
	MRP_POOL_ATTR_TCACHE_BYTES	= 1 << 3,
	MRP_POOL_ATTR_TRIM_DELAY	= 1 << 4,
	MRP_POOL_ATTR_MAX_BYTES		= 1 << 5,
	MRP_POOL_ATTR_FALLBACK		= 1 << 6,
	MRP_POOL_ATTR_BACKGROUND	= 1 << 7,
	MRP_POOL_ATTR_HUGETLB		= 1 << 8,
	MRP_POOL_ATTR_SAMPLE_EVERY	= 1 << 9,
	MRP_POOL_ATTR_LOW_WATER		= 1 << 10,
	MRP_POOL_ATTR_IDLE_RECLAIM	= 1 << 11,	/* since 1.2 */
	MRP_POOL_ATTR_DMABUF		= 1 << 12,	/* since 1.3 */
	MRP_POOL_ATTR_NUMA_NODE		= 1 << 13,	/* since 1.4 */
	MRP_POOL_ATTR_CLASSES		= 1 << 14,	/* since 1.6 */
	MRP_POOL_ATTR_FORK		= 1 << 15,	/* since 1.7 */
};

/* mrp_pool_attr.numa_node besides a node number. */
#define MRP_NUMA_ANY	(-1)	/* no preference: the kernel's default policy */
#define MRP_NUMA_AUTO	(-2)	/* the node of the first attached PD's device */

/* mrp_pool_attr.classes (MRPOOL_CLASSES=pow2|fine). */
#define MRP_CLASSES_POW2	0	/* powers of two 4 KiB..2 MiB */
#define MRP_CLASSES_FINE	1	/* and 5/4, 6/4, 7/4 of each doubling 64K..512K */

/* mrp_pool_attr.fork (MRPOOL_FORK=none|copy), mrp_stats.fork. */
#define MRP_FORK_NONE	0	/* a child inherits no arena */
#define MRP_FORK_COPY	1	/* a child gets its own copy of anon arenas */

/*
 * Pool attributes. A field is used only when its bit is set in comp_mask;
 * otherwise the MRPOOL_* environment variable named beside it applies, and
 * without that the default. Unknown comp_mask bits are -EINVAL, so a
 * program built against a newer header fails cleanly on an older library.
 * Sizes accept K/M/G suffixes in the environment.
 */
struct mrp_pool_attr {
	uint32_t comp_mask;
	enum mrp_backend backend;	/* MRPOOL_BACKEND, default auto */
	const char *device;		/* MRPOOL_DEVICE, default /dev/mrpool */
	size_t arena_size;		/* MRPOOL_ARENA_SIZE, default 4M; rounded up to 2 MiB
					 * (or the module's chunk size) */
	size_t tcache_bytes;		/* MRPOOL_TCACHE_BYTES: per thread per size class,
					 * default 256K, at least one buffer */
	uint32_t trim_delay_ms;		/* MRPOOL_TRIM_DELAY_MS: idle arenas are released
					 * this long after their last buffer came back,
					 * and the buffers cached by a thread idle this
					 * long go back to the pool, default 5000
					 * (background thread; else in mrp_trim()) */
	size_t max_bytes;		/* MRPOOL_MAX_BYTES: arena bytes the pool may map,
					 * 0 (default) = no limit of its own */
	int fallback;			/* MRPOOL_FALLBACK: when arenas run out, serve
					 * malloc + per-buffer ibv_reg_mr (counted), default 0 */
	int background;			/* MRPOOL_BACKGROUND: growth ahead of demand and
					 * idle trim in a pool thread, default 1 */
	int hugetlb;			/* MRPOOL_HUGETLB: try MAP_HUGETLB in the anon
					 * backend before THP, default 1 */
	uint32_t sample_every;		/* MRPOOL_SAMPLE_EVERY: time one allocation in N
					 * per thread for the latency histogram, 0 (default) off */
	uint32_t low_water;		/* MRPOOL_LOW_WATER: free buffers per used class under
					 * which the background thread adds an arena,
					 * default 0 = half an arena's buffers */
	int idle_reclaim;		/* MRPOOL_IDLE_RECLAIM: take back the buffers
					 * cached by threads idle for the trim delay,
					 * default 1; 0: no membarrier(2) call at all,
					 * for seccomp policies that kill on it (see
					 * mrp_thread_flush). Since 1.2 */
	int dmabuf;			/* MRPOOL_DMABUF: register kernel-backend arenas
					 * through the slice's dma-buf
					 * (ibv_reg_dmabuf_mr: nothing pinned again)
					 * in PDs whose device takes it, else
					 * ibv_reg_mr, default 1. Since 1.3 */
	int numa_node;			/* MRPOOL_NUMA_NODE (auto, any or a number):
					 * the node arenas are placed on, preferred
					 * (another node's memory when it has none);
					 * default MRP_NUMA_AUTO: the node of the
					 * first attached PD's device that has one,
					 * until then no preference. Since 1.4 */
	int classes;			/* MRPOOL_CLASSES (pow2 or fine): size
					 * classes, default MRP_CLASSES_POW2, the
					 * powers of two 4 KiB..2 MiB (a buffer
					 * takes up to twice its size);
					 * MRP_CLASSES_FINE adds 80, 96, 112, 160,
					 * 192, 224, 320, 384 and 448 KiB, those
					 * whose quarter step (16, 32, 64 KiB) is
					 * a whole number of pages. A fine buffer
					 * is aligned to the lowest set bit of its
					 * size (80 KiB: 16 KiB). Since 1.6 */
	int fork;			/* MRPOOL_FORK (none or copy): what a child
					 * made with fork(2) gets of the arenas,
					 * default MRP_FORK_NONE: nothing (their
					 * range is unmapped there). MRP_FORK_COPY:
					 * a private copy of each arena of the anon
					 * backend, unlocked and unregistered, where
					 * the kernel copies DMA-pinned pages at fork
					 * rather than share them (libibverbs'
					 * ibv_is_fork_initialized() says
					 * IBV_FORK_UNNEEDED, or without the RDMA
					 * stack loaded the release is 5.13 or
					 * later); elsewhere, and on the
					 * kernel backend, a request that cannot be
					 * kept: the pool opens as with
					 * MRP_FORK_NONE, and mrp_stats() says which
					 * holds. Since 1.7 */
};

/* Access flags for mrp_attach_pd() are IBV_ACCESS_* from <infiniband/verbs.h>. */

/*
 * A buffer: its address, usable size (the size class, at least what was
 * asked) and the keys of its arena's registration in one attached PD (both
 * 0 when no PD was named). The rkey is the arena's: a peer holding it
 * reaches every buffer of that arena, as the PD's access allows, for as
 * long as the arena stays registered. It is 0 unless the PD was attached
 * with IBV_ACCESS_REMOTE_READ, _WRITE or _ATOMIC; to give a peer one
 * buffer only, bind a memory window over it (mrp_mw_bind()).
 */
struct mrp_buf {
	void *addr;
	size_t size;
	uint32_t lkey;
	uint32_t rkey;
};

/* Which backend a pool runs on (mrp_stats.backend). */
enum mrp_backend_kind {
	MRP_KIND_KERNEL = 1,	/* arenas are slices of the mrpool module */
	MRP_KIND_ANON = 2,	/* arenas are the library's own anonymous memory */
};

/*
 * Pool counters. Pass sizeof(struct mrp_stats) to mrp_stats(); the library
 * fills that many bytes, so the struct can grow at its end: the fields it
 * has, and 0 in those of a newer header it does not know (mrp_version()
 * tells an unknown field from a zero count).
 */
struct mrp_stats {
	uint32_t backend;		/* enum mrp_backend_kind */
	uint32_t hugepages;		/* 1 if arenas are THP/hugetlb backed (anon) */
	uint64_t allocs;		/* successful allocations, all paths */
	uint64_t frees;			/* successful frees, all paths */
	uint64_t tcache_hits;		/* allocations served by the thread cache */
	uint64_t tcache_misses;		/* allocations that went to the slow path */
	uint64_t depot_refills;		/* thread cache refills from the depot */
	uint64_t depot_flushes;		/* thread cache overflows into the depot */
	uint64_t sync_growths;		/* arenas added inside an allocation */
	uint64_t bg_growths;		/* arenas added ahead of demand */
	uint64_t fallbacks;		/* allocations served by malloc + ibv_reg_mr */
	uint64_t fallback_bytes;	/* bytes currently in fallback buffers */
	uint64_t registrations;		/* ibv_reg_mr calls (arenas and fallbacks) */
	uint64_t reg_ns_total;		/* time spent in them */
	uint64_t reg_ns_max;		/* the worst one */
	uint64_t bytes_in_use;		/* bytes of buffers held by the application */
	uint64_t bytes_mapped;		/* bytes of arenas mapped */
	uint64_t bytes_locked;		/* of which mlock()ed (anon) or pinned (kernel) */
	uint64_t arenas;		/* arenas mapped now */
	uint64_t arenas_trimmed;	/* arenas released since open */
	uint64_t large_allocs;		/* allocations above 2 MiB (own arena) */
	uint32_t fragmentation_pm;	/* per mille of mapped bytes not in use */
	uint32_t pds;			/* attached protection domains */
	uint64_t lat_samples;		/* sampled allocations */
	uint64_t lat_p50_ns;		/* their median (histogram bucket bound) */
	uint64_t lat_p99_ns;		/* their 99th percentile */
	/* since 1.1 */
	uint64_t double_frees;		/* frees of buffers not live: refused with
					 * -EINVAL, or dropped when a thread cache
					 * handed a second copy to the depot */
	uint64_t dereg_errors;		/* ibv_dereg_mr failures: the arena (or
					 * fallback buffer) is retired, never
					 * handed out, unmapped or given back */
	/* since 1.2 */
	uint64_t tcache_reclaims;	/* thread caches whose owner stayed idle
					 * for the trim delay, returned to the
					 * depot by the pool: once per idle
					 * period (always 0 without membarrier:
					 * see mrp_thread_flush) */
	/* since 1.4 */
	int32_t numa_node;		/* the node new arenas are placed on,
					 * -1 for no preference (see numa_node
					 * in mrp_pool_attr) */
	/* since 1.7 */
	uint32_t fork;			/* MRP_FORK_COPY when a child gets its own
					 * copy of the arenas, else MRP_FORK_NONE
					 * (see fork in mrp_pool_attr) */
};

/* Library version, MRP_VERSION layout. */
int mrp_version(void);

/* Describe an error (negative or positive errno), including mrpool's own. */
const char *mrp_strerror(int err);

/*
 * Open a pool. attr may be NULL (environment and defaults). Returns NULL and
 * sets errno: EINVAL (bad attribute), ENODEV (kernel backend requested but
 * unusable), ENOMEM, EMFILE (too many pools open in the process).
 */
struct mrp_pool *mrp_pool_open(const struct mrp_pool_attr *attr);

/*
 * Close a pool: deregister and release every arena and stop its thread,
 * once the application holds none of its buffers (every thread's cache is
 * returned first). Returns 0; -EBUSY, with the pool untouched and usable,
 * while buffers are still allocated (a QP may still use them, as
 * ibv_dealloc_pd refuses a PD with objects); -EINVAL for NULL.
 */
int mrp_pool_close(struct mrp_pool *pool);

/* mrp_pool_close_flags(): release the pool even with buffers allocated. */
#define MRP_CLOSE_FORCE	(1U << 0)

/*
 * As mrp_pool_close(); with MRP_CLOSE_FORCE, buffers still allocated are
 * deregistered and unmapped with the pool. -EINVAL for unknown flags.
 * Since 1.1.
 */
int mrp_pool_close_flags(struct mrp_pool *pool, unsigned int flags);

/*
 * Register every current and future arena of the pool in pd with access
 * (IBV_ACCESS_* flags), once. Returns 0, -EEXIST (already attached), -ENOSPC
 * (MRP_MAX_PDS attached), -EINVAL, or the errno of a failed registration
 * (nothing is left registered then). Arenas added later are registered
 * best effort per PD: one a PD refuses still serves pd NULL and the other
 * PDs, and is registered in that PD when an allocation asks for its keys
 * (see mrp_alloc()); mrp_pd_stats() counts the failures.
 */
#define MRP_MAX_PDS 8
int mrp_attach_pd(struct mrp_pool *pool, struct ibv_pd *pd, unsigned int access);

/* Deregister every arena from pd. Returns 0 or -ENOENT if not attached. */
int mrp_detach_pd(struct mrp_pool *pool, struct ibv_pd *pd);

/*
 * pd's device is gone (IBV_EVENT_DEVICE_FATAL on its context, the device
 * removed or reset): for the application's async-event thread, safe
 * against concurrent calls on the pool, including ones naming pd; it takes
 * the pool's lock, so it may wait for an arena being added meanwhile
 * (registered in every PD, pd's failing device included). Once it
 * returns, allocations and lookups naming pd fail with -ENODEV, no buffer
 * comes out with pd's keys again (cached ones included), growth and the
 * fallback skip pd, and pd NULL and the other PDs work on. An allocation
 * running at the same time may still get pd's keys. pd's MRs stay until
 * mrp_detach_pd() (or until trim or close releases their arena), where
 * failures are counted (dereg_errors) but retire nothing: the device
 * reaches no memory any more. Call mrp_detach_pd() once no thread uses pd.
 * Idempotent. Returns 0, -ENOENT (not attached), -EINVAL or -ECHILD.
 * Since 1.2.
 */
int mrp_pd_dead(struct mrp_pool *pool, struct ibv_pd *pd);

/* State of an attached PD (mrp_pd_stats.state). */
enum mrp_pd_state {
	MRP_PD_LIVE = 1,
	MRP_PD_DEAD = 2,	/* marked by mrp_pd_dead() */
};

/*
 * Counters of one attached PD, since its attach. Pass sizeof(struct
 * mrp_pd_stats); the library fills that many bytes, 0 in fields it does
 * not know (as mrp_stats()). Since 1.2.
 */
struct mrp_pd_stats {
	uint32_t state;			/* enum mrp_pd_state */
	uint32_t arenas;		/* arenas whose keys it can hand out now */
	uint64_t reg_failures;		/* failed ibv_reg_mr/ibv_reg_dmabuf_mr in it */
	uint64_t dereg_errors;		/* failed ibv_dereg_mr in it */
	/* since 1.3 */
	uint64_t dmabuf_regs;		/* arenas registered through their dma-buf */
	int32_t dmabuf_error;		/* 0 while dma-buf registration is tried in
					 * it; else the errno that turned it off
					 * (the device refused it: EOPNOTSUPP) */
	uint32_t reserved;
};

/* Fill size bytes of pd's counters. 0, -ENOENT (not attached), -EINVAL, -ECHILD. */
int mrp_pd_stats(struct mrp_pool *pool, struct ibv_pd *pd,
		 struct mrp_pd_stats *stats, size_t size);

/*
 * Allocate at least size bytes (size-class aligned: an 8 KiB buffer starts on
 * an 8 KiB boundary, a fine class's on its size's lowest set bit, 80 KiB on
 * 16 KiB, large ones on 2 MiB) and fill buf with the keys of pd
 * (NULL: keys 0). Returns 0, -EINVAL (size 0, pd not attached), -ENOMEM
 * (pool limit reached or backend exhausted, and fallback not allowed),
 * -ECHILD (pool of the parent process), -ENODEV (pd marked dead), or the
 * error of registering in pd the arena it is to come from, which pd
 * refused when it was added (tried again then; the buffers stay for other
 * callers, and buffers of arenas pd did take are preferred).
 */
int mrp_alloc(struct mrp_pool *pool, size_t size, struct ibv_pd *pd,
	      struct mrp_buf *buf);

/*
 * As mrp_alloc() with an alignment (a power of two) beyond the natural one;
 * a fine class aligned to less gives way to the next power of two.
 */
int mrp_alloc_aligned(struct mrp_pool *pool, size_t size, size_t align,
		      struct ibv_pd *pd, struct mrp_buf *buf);

/*
 * Return a buffer (its start address as allocated; NULL is a no-op).
 * Returns 0, -EINVAL (not a buffer of this pool) or -ECHILD.
 */
int mrp_free(struct mrp_pool *pool, void *addr);

/*
 * From any address inside a live buffer, O(1): fill buf with that buffer's
 * start, size and keys in pd (NULL: keys 0). Returns 0, -ENOENT (not in
 * this pool), -EINVAL (pd not attached), -ECHILD, -ENODEV (pd marked dead)
 * or a registration error as for mrp_alloc().
 */
int mrp_lookup(struct mrp_pool *pool, const void *addr, struct ibv_pd *pd,
	       struct mrp_buf *buf);

/*
 * Release arenas with no buffer in use (deregistered and returned to the
 * backend) now, whatever the trim delay. MRP_TRIM_FLUSH first returns the
 * calling thread's cached buffers to the depot. Returns the number of
 * arenas released or a negative errno.
 */
#define MRP_TRIM_FLUSH	(1U << 0)
int mrp_trim(struct mrp_pool *pool, unsigned int flags);

/*
 * Return the calling thread's cached buffers of pool to the pool, so that
 * trim can release their arenas: for a thread about to go idle, or before
 * mrp_trim() from another one. The pool does the same by itself for
 * threads idle for the trim delay, using membarrier(2)'s private expedited
 * command (Linux 4.14); where that cannot be registered (an older kernel, a
 * seccomp filter that denies it) or with idle_reclaim 0 (a policy that kills
 * on it: then the pool never calls it) there is no idle reclaim, and cached
 * buffers go back only by this call, MRP_TRIM_FLUSH or thread exit.
 * Returns 0, -EINVAL or -ECHILD. Since 1.2.
 */
int mrp_thread_flush(struct mrp_pool *pool);

struct ibv_qp;

/*
 * Narrow a peer's reach to one buffer: bind a type 2 memory window over
 * [addr, addr + len) (inside one buffer the caller holds: not checked, and
 * a window over a free buffer reaches its next owner until that owner
 * frees it) with access (IBV_ACCESS_REMOTE_*)
 * by posting IBV_WR_BIND_MW on qp, the QP the peer's requests will arrive
 * on, with wr_id and send_flags (e.g. IBV_SEND_SIGNALED): the completion
 * comes on qp's send CQ, and *rkey is usable once it has. qp->pd must be
 * attached with IBV_ACCESS_MW_BIND in its access. The window is invalidated
 * (deallocated) when the buffer is freed or by mrp_mw_invalidate().
 * Returns 0, -EINVAL (not in an arena of the pool, fallback buffers
 * included; range beyond the buffer; PD not attached for binding),
 * -ECHILD, -ENODEV (PD marked dead), -ENOMEM, or the error of
 * ibv_alloc_mw/ibv_post_send.
 */
int mrp_mw_bind(struct mrp_pool *pool, struct ibv_qp *qp, void *addr,
		size_t len, unsigned int access, uint64_t wr_id,
		unsigned int send_flags, uint32_t *rkey);

/*
 * Invalidate every window bound over the buffer holding addr now; their
 * rkeys fail with a remote access error afterwards. Returns 0, -ENOENT (no
 * window over that buffer), -EINVAL or -ECHILD.
 */
int mrp_mw_invalidate(struct mrp_pool *pool, void *addr);

/* Fill size bytes of stats (see struct mrp_stats). Returns 0, -EINVAL or -ECHILD. */
int mrp_stats(struct mrp_pool *pool, struct mrp_stats *stats, size_t size);

/*
 * n buffers of size for a receive ring or a batch, all or nothing: 0 with
 * bufs[0..n) filled as by mrp_alloc(), or the error of the first
 * allocation that failed with none of them held (bufs zeroed). n 0 is 0.
 * Since 1.4.
 */
int mrp_alloc_bulk(struct mrp_pool *pool, size_t size, struct ibv_pd *pd,
		   struct mrp_buf *bufs, unsigned int n);

/*
 * mrp_free() of bufs[i].addr for every i: each is freed that can be.
 * Returns 0, or the first error (the others were still freed). Since 1.4.
 */
int mrp_free_bulk(struct mrp_pool *pool, const struct mrp_buf *bufs,
		  unsigned int n);

/* One buffer's keys in one PD (mrp_lookup_keys). */
struct mrp_keys {
	uint32_t lkey;
	uint32_t rkey;
};

/*
 * As mrp_lookup() for n PDs at once (a buffer posted on QPs of several
 * devices): keys[i] are those of the buffer holding addr in pds[i] (NULL:
 * 0). Returns 0, or the first error of mrp_lookup() with keys zeroed.
 * Since 1.4.
 */
int mrp_lookup_keys(struct mrp_pool *pool, const void *addr,
		    struct ibv_pd *const *pds, unsigned int n,
		    struct mrp_keys *keys);

/*
 * For a framework that registers memory in a domain of its own (a UCX
 * memory domain, a libfabric domain, another verbs library): add() is
 * told of every arena before any of its buffers is handed out, remove()
 * before it is deregistered and unmapped (trim, close, or clearing the
 * callbacks). add() returns 0 or a negative errno, which fails the growth
 * that made the arena (the arena is released; mrp_alloc() returns it) or,
 * for the arenas that exist when the callbacks are set, the set itself.
 * Both run with the pool's lock held, on whichever thread grows or trims
 * (the pool thread included): they must not call libmrpool on the pool.
 * Fallback buffers (MRPOOL_FALLBACK) are not arenas and not reported.
 * Arenas are 2 MiB aligned and span every buffer carved from them.
 */
struct mrp_arena_ops {
	uint32_t comp_mask;	/* no bit defined: 0. A field added later is
				 * read only with its bit set here */
	int (*add)(void *ctx, void *addr, size_t len);
	void (*remove)(void *ctx, void *addr, size_t len);
	void *ctx;
};

/*
 * Set the pool's arena callbacks (both needed) and call add() for every
 * arena it has, or with ops NULL call remove() for every arena add() took
 * and clear them. Returns 0, -EEXIST (already set), -ENOENT (clearing
 * with none set), -EINVAL, -ECHILD, or add()'s error (then the arenas it
 * took are removed again and nothing is set). Since 1.4.
 */
int mrp_set_arena_ops(struct mrp_pool *pool, const struct mrp_arena_ops *ops);

/*
 * A handle for pd, attached to pool, for mrp_alloc_pdh(): the PD named by
 * its place in the pool rather than by a pointer the pool must search for.
 * Every call for the same attachment returns the same handle. It is
 * memory of the pool's until mrp_pool_close() frees it, so a handle is
 * never left dangling while its pool is open; once pd is detached, calls
 * through it fail with -EINVAL, also after pd is attached again (that
 * attachment has a handle of its own). Returns NULL and sets errno: EINVAL
 * (NULL pool or pd), ENOENT (pd not attached), ENOMEM, ECHILD. Since 1.5.
 */
struct mrp_pdh *mrp_pd_handle(struct mrp_pool *pool, struct ibv_pd *pd);

/*
 * mrp_alloc() with the PD of h, a handle of pool: the same buffers, keys
 * and errors, with a shorter fast path (no search for the PD). Free the
 * buffer with mrp_free(). Returns 0, -EINVAL (NULL argument, size 0, h a
 * handle of another pool, or of an attachment detached since), -ENODEV
 * (the PD marked dead), -ECHILD, -ENOMEM, or a registration error as for
 * mrp_alloc(). The same rule holds as for the PD itself: no call through
 * h may race with mrp_detach_pd() of its PD. Since 1.5.
 */
int mrp_alloc_pdh(struct mrp_pool *pool, size_t size, struct mrp_pdh *h,
		  struct mrp_buf *buf);

#ifdef INFINIBAND_VERBS_H
/*
 * A scatter/gather entry over [offset, offset + length) of buf with its
 * lkey; offset + length must not pass buf->size. Defined when
 * <infiniband/verbs.h> is included before this header.
 */
static inline struct ibv_sge mrp_buf_sge(const struct mrp_buf *buf,
					 size_t offset, uint32_t length)
{
	struct ibv_sge sge = {
		.addr = (uint64_t)(uintptr_t)buf->addr + offset,
		.length = length,
		.lkey = buf->lkey,
	};

	return sge;
}
#endif

#ifdef __cplusplus
}
#endif

#endif /* MRPOOL_H */
