// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Pool life cycle: open (settings, backend, slot), the background thread
 * that grows classes ahead of demand, reclaims idle threads' caches
 * (tcache.c), trims idle arenas and publishes the counters (publish.c),
 * explicit trim and flush, close (also from a forked child).
 */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"

static struct mrp_pool *mrp_pools[MRP_MAX_POOLS];	/* mrp_global_lock */
__thread bool mrp_bg_self __attribute__((tls_model("initial-exec")));

uint64_t mrp_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

MRP_EXPORT int mrp_version(void)
{
	return MRP_VERSION;
}

MRP_EXPORT const char *mrp_strerror(int err)
{
	if (err < 0)
		err = -err;
	switch (err) {
	case 0:
		return "success";
	case ECHILD:
		return "pool belongs to the parent process (used after fork)";
	case ENOMEM:
		return "pool exhausted (limit reached, backend out of memory) and fallback not allowed";
	case ENODEV:
		return "mrpool kernel backend unavailable, or protection domain marked dead";
	case EEXIST:
		return "protection domain already attached";
	case ENOSPC:
		return "too many protection domains attached";
	case EMFILE:
		return "too many pools open in this process";
	default:
		return strerror(err);
	}
}

/*
 * Fork (the library's handlers, tcache.c, mrp_global_lock held across it):
 * every open pool's lock is taken before the fork and released after it,
 * so a child sees each pool's arena list, PDs and large and fallback
 * lists as they are between two operations, never half-changed (the
 * preload shim walks the arena list in the child). Order as everywhere:
 * mrp_global_lock, pool->lock, then mrp_fork_lock. An arena being made
 * holds none of them while it maps and registers (arena.c), so a fork
 * does not wait for growth; such an arena is on pool->creating, never on
 * the list, and the child drops it (mrp_pool_drop_inherited()). So for a
 * fallback buffer being made or freed (reg.c): it is on pool->fb_flight,
 * marked DONTFORK here as the listed ones, dropped by the child.
 *
 * Under those locks every arena and fallback buffer is marked
 * MADV_DONTFORK again. The backends mark them once, when they map them
 * (the module's slices are VM_DONTCOPY, the flag the advice sets), but
 * libibverbs' fork support (ibv_fork_init(), RDMAV_FORK_SAFE) clears it:
 * when the last MR of its own over a page is deregistered it calls
 * madvise(MADV_DOFORK) there, not knowing the pool had marked the page
 * first. That happens to an MR the application (the preload shim, UCX's
 * registration cache) made over pool memory, and to the pool's own MRs at
 * mrp_detach_pd() while the arenas live on. A child would then get those
 * pages: a copy the parent's MR no longer reaches once either side writes
 * (on kernels without copy-on-fork for pinned pages, the reason fork
 * support is on), and a mapping where the shim's placeholder belongs.
 *
 * A pool with MRP_FORK_COPY needs the converse: its arenas are the
 * child's (the kernel copies pinned pages, the module slices), yet the same fork support,
 * once ibv_fork_init() ran, marks every range it registers MADV_DONTFORK,
 * even where ibv_is_fork_initialized() says IBV_FORK_UNNEEDED (the
 * answer takes precedence, the bookkeeping still runs: rdma-core 44, and a
 * later one with RDMAV_USE_MADVISE; UCX calls ibv_fork_init() by default). Its arenas are marked
 * MADV_DOFORK again, so that the child still gets every block; its
 * fallback buffers stay out of children as always.
 *
 * The advice is idempotent: one madvise() per arena and fallback buffer,
 * merging back what the other advice split. A pool of a parent (a child's
 * copy not closed yet) has nothing mapped here and is left alone.
 */
static void mrp_pool_fork_advice(struct mrp_pool *pool)
{
	int arenas = pool->fork_copy ? MADV_DOFORK : MADV_DONTFORK;
	struct mrp_fallback *fb;
	struct mrp_arena *a;

	if (mrp_forked(pool))
		return;
	for (a = pool->arenas; a; a = a->next)
		madvise((void *)a->base, a->size, arenas);
	for (fb = pool->fallbacks; fb; fb = fb->next)
		madvise(fb->addr, fb->len, MADV_DONTFORK);
	/* being made or freed without the lock (reg.c): mapped, not unmapped yet */
	for (fb = pool->fb_flight; fb; fb = fb->next)
		madvise(fb->addr, fb->len, MADV_DONTFORK);
}

void mrp_pools_fork_prepare(void)
{
	for (int i = 0; i < MRP_MAX_POOLS; i++)
		if (mrp_pools[i]) {
			pthread_mutex_lock(&mrp_pools[i]->lock);
			mrp_pool_fork_advice(mrp_pools[i]);
		}
}

void mrp_pools_fork_parent(void)
{
	for (int i = MRP_MAX_POOLS - 1; i >= 0; i--)
		if (mrp_pools[i])
			pthread_mutex_unlock(&mrp_pools[i]->lock);
}

/*
 * In the child, before mrp_fork_gen moves: what it got of the memory of a
 * pool the parent owned. Arenas another thread was making at the fork
 * (pool->creating, arena.c) are the parent's alone in every mode: their
 * creator is not here, nothing of them is published, and whatever the
 * child got of a recorded range goes too (their records are freed at the
 * child's close). Nothing, unless MADV_DOFORK came between the
 * prepare handler and the fork itself (another thread's ibv_dereg_mr()):
 * whatever is mapped in an arena's or fallback buffer's range here is
 * that, and goes. The child then holds none of the parent's memory (with
 * the module, no mapping that keeps a slice alive), and the preload shim's
 * placeholders, which never replace a mapping, cover each arena whole.
 * One munmap() per arena, of a range normally empty.
 */
static void mrp_pool_drop_inherited(struct mrp_pool *pool)
{
	struct mrp_fallback *fb;
	struct mrp_arena *a;

	/* with MRP_FORK_COPY the arenas' ranges hold the child's own copy */
	for (a = pool->fork_copy ? NULL : pool->arenas; a; a = a->next)
		munmap((void *)a->base, a->size);
	for (a = pool->creating; a; a = a->next)
		if (a->size)
			munmap((void *)a->base, a->size);
	/* arenas a trim was deregistering (depot.c): the parent's as well */
	for (a = pool->trimming; a; a = a->next)
		munmap((void *)a->base, a->size);
	for (fb = pool->fallbacks; fb; fb = fb->next)
		munmap(fb->addr, fb->len);
	/* fallback buffers being made or freed by the parent's threads (reg.c) */
	for (fb = pool->fb_flight; fb; fb = fb->next)
		munmap(fb->addr, fb->len);
}

/*
 * In the child: the locks start again unlocked (the one thread here took
 * them), and every pool's file closes. The module releases a file's
 * slices when its last descriptor closes, so a child's copy would keep the
 * parent's pinned memory alive after the parent dies, for as long as the
 * child lives. O_CLOEXEC covers exec, not a child that does not exec.
 * Called before the generation moves: a pool mrp_forked() already was the
 * parent's own parent's, whose ranges the parent may have mapped since.
 */
void mrp_pools_fork_child(void)
{
	for (int i = 0; i < MRP_MAX_POOLS; i++) {
		struct mrp_pool *pool = mrp_pools[i];

		if (!pool)
			continue;
		pthread_mutex_init(&pool->lock, NULL);
		/* a detach or close may have waited on it in the parent */
		pthread_cond_init(&pool->created, NULL);
		if (!mrp_forked(pool))
			mrp_pool_drop_inherited(pool);
		if (pool->fd >= 0) {
			close(pool->fd);
			pool->fd = -1;
		}
	}
}

void mrp_bg_kick(struct mrp_pool *pool)
{
	pthread_mutex_lock(&pool->bg_lock);
	pool->bg_kick = true;
	pthread_cond_signal(&pool->bg_cond);
	pthread_mutex_unlock(&pool->bg_lock);
}

/* Add arenas to recently used classes below their low-water mark. */
static void mrp_grow_ahead(struct mrp_pool *pool, uint64_t now, uint64_t window)
{
	for (unsigned int cls = 0; cls < MRP_NCLASSES; cls++) {
		struct mrp_class *c = &pool->cls[cls];
		uint64_t last = atomic_load(&c->last_refill);

		if (!last || now - last > window)
			continue;
		/* bounded per wakeup: a huge low_water must not map everything */
		for (int n = 0; n < 8 && atomic_load(&c->free_blocks) < c->low_water; n++)
			if (mrp_grow(pool, cls, true))
				break;
	}
}

static void *mrp_bg_main(void *arg)
{
	struct mrp_pool *pool = arg;
	uint64_t delay = (uint64_t)pool->cfg.trim_delay_ms * 1000000ull;
	uint64_t period = delay / 2;
	struct timespec ts;

	if (period > 1000000000ull)
		period = 1000000000ull;
	if (period < 5000000ull)
		period = 5000000ull;
	mrp_bg_self = true;
	pool->bg_tid = (pid_t)syscall(SYS_gettid);	/* mrp_bg_pause() reads it after the join */
	pthread_mutex_lock(&pool->bg_lock);
	while (!pool->bg_stop) {
		if (!pool->bg_kick) {
			clock_gettime(CLOCK_MONOTONIC, &ts);
			ts.tv_nsec += (long)(period % 1000000000ull);
			ts.tv_sec += (time_t)(period / 1000000000ull) + ts.tv_nsec / 1000000000L;
			ts.tv_nsec %= 1000000000L;
			pthread_cond_timedwait(&pool->bg_cond, &pool->bg_lock, &ts);
		}
		if (pool->bg_stop)
			break;
		pool->bg_kick = false;
		pthread_mutex_unlock(&pool->bg_lock);
		mrp_os_unmap_resolve();	/* no lock held: see os.c */
		mrp_grow_ahead(pool, mrp_now_ns(), delay > period ? delay : period);
		/* caches first: what they return is idle_since now, trimmed later */
		mrp_tcaches_reclaim_idle(pool, mrp_now_ns(), delay);
		mrp_trim_idle(pool, mrp_now_ns(), delay, true);
		mrp_publish(pool, false);
		pthread_mutex_lock(&pool->bg_lock);
	}
	pthread_mutex_unlock(&pool->bg_lock);
	return NULL;
}

/*
 * The pool thread is named (it shows as "mrpool-bg" in ps, top and gdb)
 * and blocks every signal: it is created with all of them blocked, which
 * it inherits, so a process-directed signal is never delivered to it and
 * no handler of the application runs on it.
 */
static int mrp_bg_spawn(struct mrp_pool *pool)
{
	sigset_t all, old;
	int ret;

	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	ret = pthread_create(&pool->bg, NULL, mrp_bg_main, pool);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (ret)
		return -ret;
	pthread_setname_np(pool->bg, "mrpool-bg");
	return 0;
}

static int mrp_bg_start(struct mrp_pool *pool)
{
	pthread_condattr_t ca;
	int ret;

	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&pool->bg_cond, &ca);
	pthread_condattr_destroy(&ca);
	pthread_mutex_init(&pool->bg_lock, NULL);
	if (!pool->cfg.background)
		return 0;
	ret = mrp_bg_spawn(pool);
	if (ret)
		return ret;
	atomic_store_explicit(&pool->bg_running, true, memory_order_relaxed);
	return 0;
}

/* Stop the thread and wait for it; what it was asked to do stays asked. */
static void mrp_bg_join(struct mrp_pool *pool)
{
	pthread_mutex_lock(&pool->bg_lock);
	pool->bg_stop = true;
	pthread_cond_signal(&pool->bg_cond);
	pthread_mutex_unlock(&pool->bg_lock);
	pthread_join(pool->bg, NULL);
	pool->bg_stop = false;
}

static void mrp_bg_stop(struct mrp_pool *pool)
{
	if (atomic_load_explicit(&pool->bg_running, memory_order_relaxed)) {
		if (!pool->bg_paused)
			mrp_bg_join(pool);
		atomic_store_explicit(&pool->bg_running, false, memory_order_relaxed);
	}
}

/*
 * For the preload shim's unshare() and setns() (preload/shim.c): the
 * kernel refuses a new user namespace, and joining a user or mount
 * namespace, to a process of more than one thread (EINVAL), which the pool
 * thread makes of a single-threaded program. mrp_bg_pause() stops the
 * thread and waits for it, so that such a call sees the program's own
 * threads only, and mrp_bg_resume() starts it again. Nothing is lost
 * meanwhile: the growth, reclaim, trim and publishing it would have done
 * are done by the new thread's passes (a kick meanwhile stays set for its
 * first), and bg_running stays true throughout, so the allocation paths
 * behave as with the thread there. Not concurrent with each other or with
 * mrp_pool_close() (the caller serialises them); a forked child's pool has
 * no thread. If the thread cannot be started again, bg_paused stays set
 * and the pool goes on without it, as with MRPOOL_BACKGROUND=0 but for
 * publishing from the slow path; close then has nothing to join.
 * Returns whether a thread was stopped (and is gone).
 */
bool mrp_bg_pause(struct mrp_pool *pool)
{
	struct timespec ts = { .tv_nsec = 100000 };

	if (!atomic_load_explicit(&pool->bg_running, memory_order_relaxed) ||
	    pool->bg_paused || mrp_forked(pool))
		return false;
	mrp_bg_join(pool);
	pool->bg_paused = true;
	/*
	 * pthread_join() returns once the kernel has cleared the thread's
	 * tid, at the start of its exit; the thread leaves the thread group
	 * (what the kernel counts) at its end, until which its tid still
	 * takes a signal. Wait for that, two seconds at most, or the call
	 * paused for may still see two threads (it did in a guest under TCG).
	 */
	for (int i = 0; i < 20000 && !syscall(SYS_tgkill, getpid(), pool->bg_tid, 0); i++)
		nanosleep(&ts, NULL);
	return true;
}

int mrp_bg_resume(struct mrp_pool *pool)
{
	int ret;

	if (!pool->bg_paused || mrp_forked(pool))
		return 0;
	ret = mrp_bg_spawn(pool);
	if (!ret)
		pool->bg_paused = false;
	return ret;
}

static void mrp_classes_init(struct mrp_pool *pool)
{
	for (unsigned int cls = 0; cls < MRP_NCLASSES; cls++) {
		struct mrp_class *c = &pool->cls[cls];
		size_t per_arena = pool->cfg.arena_size / mrp_class_size(cls);
		size_t cap = pool->cfg.tcache_bytes / mrp_class_size(cls);

		pthread_mutex_init(&c->lock, NULL);
		pthread_cond_init(&c->grown, NULL);
		cap = cap < 1 ? 1 : cap > MRP_MAX_BIN ? MRP_MAX_BIN : cap;
		c->batch = (uint32_t)(cap / 2 ? cap / 2 : 1);
		c->low_water = pool->cfg.low_water ? pool->cfg.low_water :
			       (uint32_t)(per_arena / 2 ? per_arena / 2 : 1);
	}
}

static int mrp_backend_init(struct mrp_pool *pool)
{
	int ret;

	switch (pool->cfg.backend) {
	case MRP_BACKEND_KERNEL:
		pool->ops = &mrp_backend_kmod;
		return pool->ops->init(pool);
	case MRP_BACKEND_ANON:
		pool->ops = &mrp_backend_anon;
		return pool->ops->init(pool);
	default:
		pool->ops = &mrp_backend_kmod;
		ret = pool->ops->init(pool);
		if (!ret)
			return 0;
		pool->ops = &mrp_backend_anon;
		return pool->ops->init(pool);
	}
}

MRP_EXPORT struct mrp_pool *mrp_pool_open(const struct mrp_pool_attr *attr)
{
	struct mrp_pool *pool;
	int ret, idx = -1;

	ret = mrp_global_init();
	if (ret)
		goto out;
	pool = aligned_alloc(64, sizeof(*pool));
	if (!pool) {
		ret = -ENOMEM;
		goto out;
	}
	memset(pool, 0, sizeof(*pool));
	pool->fd = -1;
	ret = mrp_cfg_load(&pool->cfg, attr, NULL);
	if (!ret && pool->cfg.numa_node >= 0 && !mrp_numa_node_online(pool->cfg.numa_node))
		ret = -EINVAL;
	if (ret)
		goto free_pool;
	/*
	 * The idle reclaim's barrier, registered once per process and before
	 * this pool's thread starts: with one thread the kernel has nothing
	 * to synchronise (with more, some kernels wait for a grace period).
	 * A failure only turns the idle reclaim off. Without idle_reclaim
	 * the pool makes no membarrier() call: a seccomp policy may kill the
	 * process on one rather than refuse it.
	 */
	if (pool->cfg.idle_reclaim)
		mrp_os_membarrier_register();
	pool->debug = pool->cfg.debug;
	pool->hooked = pool->cfg.sample_every != 0 || pool->debug;
	pool->fork_gen = atomic_load(&mrp_fork_gen);
	pool->node = pool->cfg.numa_node >= 0 ? pool->cfg.numa_node : -1;
	pthread_mutex_init(&pool->lock, NULL);
	pthread_cond_init(&pool->created, NULL);
	mrp_os_unmap_resolve();
	mrp_reg_resolve();	/* no lock held: see reg.c */

	ret = mrp_backend_init(pool);
	if (ret)
		goto free_pool;
	/*
	 * A child may have a copy of the arenas only where that copy cannot
	 * take the parent's pinned pages away from its registrations: anon
	 * memory, on a kernel that copies DMA-pinned pages at fork; slices,
	 * where the module makes the child a private copy at the fork
	 * (MRPOOL_FEATURE_FORK_COPY), the slice staying the parent's alone.
	 */
	pool->fork_copy = pool->cfg.fork_copy &&
			  (pool->ops->kind == MRP_KIND_ANON ? mrp_os_fork_copies_pinned() :
			   pool->backend_fork_copy);
	/* arenas are whole backend granules (2 MiB, or the module's chunk) */
	pool->cfg.arena_size = (pool->cfg.arena_size + pool->granule - 1) &
			       ~(pool->granule - 1);
	mrp_class_table(pool->class_tab, pool->cfg.fine, mrp_os_page_size());
	mrp_bin_table(pool, pool->bin_off);
	pool->fast_lim = pool->hooked ? 0 : MRP_MAX_CLASS;
	mrp_classes_init(pool);
	mrp_publish_init(pool);

	pthread_mutex_lock(&mrp_global_lock);
	for (int i = 0; i < MRP_MAX_POOLS; i++)
		if (!mrp_pools[i]) {
			idx = i;
			mrp_pools[i] = pool;
			break;
		}
	pthread_mutex_unlock(&mrp_global_lock);
	if (idx < 0) {
		ret = -EMFILE;
		goto fini_backend;
	}
	pool->idx = (uint32_t)idx;
	pool->tls_off = mrp_tls_off(pool->idx);

	ret = mrp_bg_start(pool);
	if (ret)
		goto release_slot;
	return pool;

release_slot:
	pthread_mutex_lock(&mrp_global_lock);
	mrp_pools[idx] = NULL;
	pthread_mutex_unlock(&mrp_global_lock);
fini_backend:
	mrp_publish_fini(pool, false);
	pool->ops->fini(pool, false);
free_pool:
	pthread_cond_destroy(&pool->created);
	free(pool);
out:
	errno = -ret;
	return NULL;
}

/*
 * Does the application still hold a buffer of pool? Every thread's cache
 * goes back to the depot first (close does not race with other calls, so
 * no cache is in use), then every arena must be wholly in the depot or
 * parked, and no fallback buffer left.
 */
static bool mrp_pool_busy(struct mrp_pool *pool)
{
	struct mrp_tcache *tc;
	struct mrp_arena *a;
	bool busy;

	pthread_mutex_lock(&mrp_global_lock);
	for (tc = pool->tcaches; tc; tc = tc->next)
		mrp_tcache_flush(tc);
	pthread_mutex_unlock(&mrp_global_lock);

	pthread_mutex_lock(&pool->lock);
	busy = pool->fallbacks != NULL;
	for (a = pool->arenas; a && !busy; a = a->next) {
		if (a->cls == MRP_LARGE) {
			busy = !a->large_free;
			continue;
		}
		pthread_mutex_lock(&pool->cls[a->cls].lock);
		busy = a->nfree != a->nblocks;
		pthread_mutex_unlock(&pool->cls[a->cls].lock);
	}
	pthread_mutex_unlock(&pool->lock);
	return busy;
}

MRP_EXPORT int mrp_pool_close(struct mrp_pool *pool)
{
	return mrp_pool_close_flags(pool, 0);
}

MRP_EXPORT int mrp_pool_close_flags(struct mrp_pool *pool, unsigned int flags)
{
	bool forked;
	struct mrp_arena *a, *next;

	if (!pool || (flags & ~MRP_CLOSE_FORCE))
		return -EINVAL;
	forked = mrp_forked(pool);
	mrp_os_unmap_resolve();		/* before pool->lock: see os.c */
	/* a child holds none of the parent's buffers: nothing to wait for */
	if (!forked && !(flags & MRP_CLOSE_FORCE) && mrp_pool_busy(pool))
		return -EBUSY;
	/* a forked child has no pool thread: the parent's is not copied */
	if (!forked) {
		mrp_bg_stop(pool);
		/* the last word: what the application did, before teardown */
		mrp_publish(pool, true);
	}

	pthread_mutex_lock(&mrp_global_lock);
	mrp_tcaches_orphan(pool, forked);
	if (mrp_pools[pool->idx] == pool)
		mrp_pools[pool->idx] = NULL;
	pthread_mutex_unlock(&mrp_global_lock);

	/*
	 * In a child, locks may have been held by threads that did not fork,
	 * and the arenas, MRs and slices are the parent's: free bookkeeping only.
	 */
	mrp_mw_release_all(pool, forked);
	mrp_pdh_free_all(pool);
	/*
	 * Arenas still being made (arena.c) or trimmed (depot.c): in the
	 * parent their threads finish, and what they publish is torn down
	 * below with the rest; in a child they are records of the parent's
	 * threads, whose ranges the fork handler unmapped.
	 */
	if (forked) {
		for (a = pool->creating; a; a = next) {
			next = a->next;
			mrp_arena_free(a);
		}
		pool->creating = NULL;
		for (a = pool->trimming; a; a = next) {
			next = a->next;
			mrp_arena_free(a);
		}
		pool->trimming = NULL;
	} else {
		pthread_mutex_lock(&pool->lock);
		mrp_arenas_creating_wait(pool);
		pthread_mutex_unlock(&pool->lock);
	}
	for (a = pool->arenas; a; a = next) {
		next = a->next;
		if (forked) {
			/*
			 * The map is the child's private copy: point it at
			 * nothing, or an address the child maps there later
			 * would lead mrp_free()/mrp_lookup() to the freed
			 * struct (of this pool or one opened after).
			 */
			mrp_map_set(&mrp_map, a->base, a->size, NULL);
			/* with MRP_FORK_COPY the range holds the child's copy */
			if (pool->fork_copy)
				munmap((void *)a->base, a->size);
			mrp_arena_free(a);
		} else if (mrp_arena_destroy(pool, a))
			mrp_arena_forget(pool, a);	/* retired: memory left as is */
	}
	mrp_fallback_release_all(pool, forked);
	mrp_publish_fini(pool, forked);
	pool->ops->fini(pool, forked);
	if (!forked) {
		for (unsigned int cls = 0; cls < MRP_NCLASSES; cls++) {
			pthread_mutex_destroy(&pool->cls[cls].lock);
			pthread_cond_destroy(&pool->cls[cls].grown);
		}
		pthread_mutex_destroy(&pool->lock);
		pthread_cond_destroy(&pool->created);
		pthread_mutex_destroy(&pool->bg_lock);
		pthread_cond_destroy(&pool->bg_cond);
	}
	free(pool);
	return 0;
}

/*
 * Without a pool thread, this is where other threads' idle caches are
 * reclaimed (idle for the trim delay, as seen by successive calls), as it
 * is where idle arenas are trimmed.
 */
MRP_EXPORT int mrp_trim(struct mrp_pool *pool, unsigned int flags)
{
	if (!pool || (flags & ~MRP_TRIM_FLUSH))
		return -EINVAL;
	if (mrp_forked(pool))
		return -ECHILD;
	mrp_os_unmap_resolve();		/* before pool->lock: see os.c */
	if (flags & MRP_TRIM_FLUSH)
		mrp_tcache_flush_self(pool);
	if (!atomic_load_explicit(&pool->bg_running, memory_order_relaxed))
		mrp_tcaches_reclaim_idle(pool, mrp_now_ns(),
					 (uint64_t)pool->cfg.trim_delay_ms * 1000000ull);
	return mrp_trim_idle(pool, mrp_now_ns(), 0, false);
}

MRP_EXPORT int mrp_thread_flush(struct mrp_pool *pool)
{
	if (!pool)
		return -EINVAL;
	if (mrp_forked(pool))
		return -ECHILD;
	return mrp_tcache_flush_self(pool);
}
