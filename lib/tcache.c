// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Per-thread caches and the process-wide state they hang from: the TLS
 * slots, the thread-exit flush, the fork handler, and the reclaim of the
 * caches of idle threads.
 *
 * mrp_tls[] starts pointing at mrp_tcache_empty, whose bins are all marked
 * (lim all ones, end 0): the fast paths need no "initialised?" test, the
 * first use of a pool in a thread simply fails the bin test and the slow
 * path installs a real cache. Closing a pool, and forking, turn caches back
 * into that state. A pop there stores top - 1 and puts it back, as on any
 * empty bin; threads racing on the shared object may leave its top lower
 * than it was, which nothing reads (it starts far from 0, see below).
 *
 * Idle reclaim. A thread that stops calling keeps its cached buffers, and
 * with them whole arenas, pinned and registered. The pool thread (or
 * mrp_trim()) takes them back from the caches whose counters have not
 * moved for the trim delay, with no lock and no read-modify-write added to
 * the fast paths. A pass (mrp_tcaches_reclaim()) goes in three steps:
 *   1. mark: under each idle cache's tcache->lock, which every slow path
 *      touching the bins holds, it stores all ones in every bin's lim and
 *      0 in its end, which sends the owner's next free to its slow path,
 *      and its next allocation too (below);
 *   2. one membarrier() for every cache marked: each owner call in flight
 *      at that point has its stores so far visible, and each later one
 *      sees the marks;
 *   3. take: under the lock again, from each cache still marked, it hands
 *      base[0, count) of each bin to the depot and records that count as
 *      taken; it never writes top. A cache the owner emptied meanwhile
 *      gets its lim and end back: no reclaim.
 * No lock is held across the barrier, which recent kernels serialize
 * system-wide (os.c): an owner whose slow path runs in between finds its
 * cache marked and unmarks it (mrp_tcache_settle()), and step 3 leaves
 * that cache alone. A cache still marked has been so from before the
 * barrier to the take. Nor is mrp_global_lock: thread exit,
 * first use, mrp_stats() and open and close go on meanwhile; the marked
 * caches are pinned (in_pass), their thread's exit waits for the pass.
 *
 * The allocation fast path pops (top - 1 stored), then loads lim: a
 * marked lim means the pop may have raced step 3, so it puts top back and
 * takes the slow path, which under the lock drops the taken entries and
 * unmarks the bins. The same compare sends an empty bin there (lim is its
 * base). Store top, load lim (owner) against store lim, load top
 * (reclaimer): with the barrier between, one of them sees the other, so a
 * buffer is never both popped and taken. The reclaimer counts a top below
 * base (a pop of an empty bin in flight) as 0 entries. A free in flight
 * pushes at or above the top the reclaimer reads (which free
 * release-stores, so the entries below are visible): what it pushes stays
 * in the cache, and a later pass takes it. Only the owner, thread exit and
 * pool close free a cache.
 *
 * Signal handlers: a free from one never reaches a bin while its thread is
 * inside the library (the preload shim defers it), so the owner's pop and
 * push never nest. A call abandoned in the middle of a pop (siglongjmp)
 * may leave top at base - 1: the next push then fills the guard entry,
 * which is lost as the popped buffer would be today, not written past.
 * A second pop abandoned the same way before any push leaves it lower
 * still: the push sees a top below the guard and takes the slow path,
 * which writes from base on (alloc.c mrp_bin_push()).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define MRP_E8(x) x, x, x, x, x, x, x, x
/*
 * Every bin marked. top starts at the object's own address, far from 0: a
 * pop there computes top - 1, which must stay below lim (all ones).
 */
#define MRP_BIN_EMPTY { .top = (uintptr_t)&mrp_tcache_empty, .lim = MRP_BIN_MARKED }
struct mrp_tcache mrp_tcache_empty = {
	.bins = { MRP_E8(MRP_BIN_EMPTY), MRP_E8(MRP_BIN_EMPTY),
		  MRP_BIN_EMPTY, MRP_BIN_EMPTY, MRP_BIN_EMPTY, MRP_BIN_EMPTY },
};
_Static_assert(MRP_NCLASSES + 1 == 20, "mrp_tcache_empty initialiser");
__thread struct mrp_tcache *mrp_tls[MRP_MAX_POOLS]
	__attribute__((tls_model("initial-exec"))) = {
	MRP_E8(&mrp_tcache_empty), MRP_E8(&mrp_tcache_empty),
	MRP_E8(&mrp_tcache_empty), MRP_E8(&mrp_tcache_empty),
};
_Static_assert(MRP_MAX_POOLS == 32, "mrp_tls initialiser");

pthread_mutex_t mrp_global_lock = PTHREAD_MUTEX_INITIALIZER;
/*
 * Held for reading while a dma-buf fd of a slice exists (reg.c), for
 * writing across fork(): a child must never inherit one, since it could
 * map the parent's memory through it.
 */
pthread_rwlock_t mrp_fork_lock = PTHREAD_RWLOCK_INITIALIZER;
_Atomic unsigned int mrp_fork_gen;

#ifdef MRP_TEST_HOOKS
void (*_Atomic mrp_test_hooks[MRP_HOOK_N])(void);
#endif

/* a pass unpinned its batch (in_pass); with mrp_global_lock */
static pthread_cond_t mrp_pass_done = PTHREAD_COND_INITIALIZER;
static pthread_once_t mrp_once = PTHREAD_ONCE_INIT;
static pthread_key_t mrp_exit_key;
static int mrp_init_err;

/* forked: in a child, where a thread that did not fork may have held tc->lock */
static void mrp_tcache_free(struct mrp_tcache *tc, bool forked)
{
	if (!forked)
		pthread_mutex_destroy(&tc->lock);
	free(tc->bins[0].base - 1);	/* its guard entry */
	free(tc);
}

static uint32_t mrp_bin_cap(const struct mrp_pool *pool, unsigned int cls)
{
	size_t cap;

	if (cls == MRP_LARGE)
		return 0;
	cap = pool->cfg.tcache_bytes / mrp_class_size(cls);

	if (cap < 1)
		cap = 1;
	if (cap > MRP_MAX_BIN)
		cap = MRP_MAX_BIN;
	return (uint32_t)cap;
}

/* A bin as the fast paths use it: lim and end from base and cap. */
static void mrp_bin_unmark(struct mrp_bin *b)
{
	atomic_store_explicit(&b->lim, (uintptr_t)b->base, memory_order_relaxed);
	atomic_store_explicit(&b->end, (uintptr_t)(b->base + b->cap), memory_order_relaxed);
}

/*
 * tc->lock held, by the owner (or by close and thread exit, which no call
 * on it races): take a marked or reclaimed cache back. The taken entries
 * are the depot's; buffers pushed above them by a free that was in flight
 * stay, moved down; lim and end come back. A pass that took nothing
 * settles too: with no entry taken it only stores lim and end, which the
 * owner's fast paths may read meanwhile (a pass runs only while the owner
 * makes no call, and the owner settles only under the lock).
 */
static void mrp_tcache_settle(struct mrp_tcache *tc)
{
	if (tc->reclaim == MRP_TC_LIVE)
		return;
	for (unsigned int c = 0; c < MRP_NCLASSES; c++) {
		struct mrp_bin *b = &tc->bins[c];
		uint32_t n = mrp_bin_count(b);
		uint32_t t = tc->taken[c];

		if (t) {
			n = n > t ? n - t : 0;
			memmove(b->base, b->base + t, n * sizeof(*b->base));
			mrp_bin_set_count(b, n);
			tc->taken[c] = 0;
		}
		mrp_bin_unmark(b);
	}
	tc->reclaim = MRP_TC_LIVE;
}

/*
 * Return every cached buffer of tc to its pool's depot: by its owner, or by
 * close and thread exit.
 */
void mrp_tcache_flush(struct mrp_tcache *tc)
{
	pthread_mutex_lock(&tc->lock);
	mrp_tcache_settle(tc);
	for (unsigned int c = 0; c < MRP_NCLASSES; c++) {
		struct mrp_bin *b = &tc->bins[c];
		uint32_t n = mrp_bin_count(b);

		if (n)
			mrp_depot_put(tc->pool, c, b->base, n);
		mrp_bin_set_count(b, 0);
	}
	pthread_mutex_unlock(&tc->lock);
}

/* Fold a dying cache's counters into its pool; mrp_global_lock held. */
static void mrp_tcache_retire(struct mrp_tcache *tc)
{
	struct mrp_pool *pool = tc->pool;

	if (pool) {
		int cancel;

		/*
		 * A pass walks its batch without mrp_global_lock. The wait is
		 * a cancellation point, which must not unwind with that lock
		 * held (mrp_pool_close() gets here on the caller's thread).
		 */
		pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel);
		while (tc->in_pass)
			pthread_cond_wait(&mrp_pass_done, &mrp_global_lock);
		pthread_setcancelstate(cancel, NULL);
		mrp_tcache_flush(tc);
		for (unsigned int c = 0; c < MRP_NCLASSES; c++) {
			mrp_add(&pool->dead_allocs[c], mrp_get(&tc->bins[c].allocs));
			mrp_add(&pool->dead_frees[c], mrp_get(&tc->bins[c].frees));
		}
		mrp_add(&pool->dead_misses, mrp_get(&tc->misses));
		if (tc->prev)
			tc->prev->next = tc->next;
		else
			pool->tcaches = tc->next;
		if (tc->next)
			tc->next->prev = tc->prev;
	}
	mrp_tls[tc->idx] = &mrp_tcache_empty;
	mrp_tcache_free(tc, false);
}

static void mrp_thread_exit(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&mrp_global_lock);
	for (unsigned int i = 0; i < MRP_MAX_POOLS; i++)
		if (mrp_tls[i] != &mrp_tcache_empty)
			mrp_tcache_retire(mrp_tls[i]);
	pthread_mutex_unlock(&mrp_global_lock);
}

static void mrp_fork_prepare(void)
{
	pthread_mutex_lock(&mrp_global_lock);
	mrp_pools_fork_prepare();
	pthread_rwlock_wrlock(&mrp_fork_lock);
}

static void mrp_fork_parent(void)
{
	pthread_rwlock_unlock(&mrp_fork_lock);
	mrp_pools_fork_parent();
	pthread_mutex_unlock(&mrp_global_lock);
}

/*
 * The child has none of the parent's arenas. Bump the generation every
 * pool checks on its slow paths (after mrp_pools_fork_child(), which tells
 * the parent's own pools by it), and send this thread's fast paths there:
 * its caches hold addresses that are not mapped here.
 */
static void mrp_fork_child(void)
{
	pthread_mutex_init(&mrp_global_lock, NULL);
	pthread_rwlock_init(&mrp_fork_lock, NULL);
	pthread_cond_init(&mrp_pass_done, NULL);
	mrp_pools_fork_child();
	atomic_fetch_add(&mrp_fork_gen, 1);
	for (unsigned int i = 0; i < MRP_MAX_POOLS; i++)
		mrp_tls[i] = &mrp_tcache_empty;
}

/*
 * The thread-exit key and the fork handlers; no memory (the address map
 * comes with the first arena, mrp_map_init()): the preload shim calls
 * this from its constructor in every process it is loaded in.
 */
static void mrp_global_once(void)
{
	mrp_init_err = -pthread_key_create(&mrp_exit_key, mrp_thread_exit);
	if (mrp_init_err)
		return;
	mrp_init_err = -pthread_atfork(mrp_fork_prepare, mrp_fork_parent,
				       mrp_fork_child);
}

int mrp_global_init(void)
{
	pthread_once(&mrp_once, mrp_global_once);
	return mrp_init_err;
}

/*
 * The calling thread's cache for pool, created on first use, locked
 * against a reclaim (and settled if one happened): the caller works on its
 * bins, then calls mrp_tcache_put().
 */
struct mrp_tcache *mrp_tcache_get(struct mrp_pool *pool)
{
	struct mrp_tcache *tc = mrp_tls[pool->idx];
	struct mrp_ent *ents;
	size_t nents = 0;

	if (tc != &mrp_tcache_empty) {
		if (tc->pool == pool) {
			pthread_mutex_lock(&tc->lock);
			mrp_tcache_settle(tc);
			return tc;
		}
		/* left behind by a closed pool that had this slot */
		mrp_tls[pool->idx] = &mrp_tcache_empty;
		mrp_tcache_free(tc, false);
	}
	/* each bin's entries after a guard entry (struct mrp_bin) */
	for (unsigned int c = 0; c <= MRP_NCLASSES; c++)
		nents += mrp_bin_cap(pool, c) + 1;
	tc = aligned_alloc(64, sizeof(*tc));
	ents = calloc(nents, sizeof(*ents));
	if (!tc || !ents) {
		free(tc);
		free(ents);
		return NULL;
	}
	memset(tc, 0, sizeof(*tc));
	for (unsigned int c = 0; c <= MRP_NCLASSES; c++) {
		struct mrp_bin *b = &tc->bins[c];

		b->base = ents + 1;
		b->cap = mrp_bin_cap(pool, c);
		b->bsize = c == MRP_LARGE ? 0 : mrp_class_size(c);
		atomic_init(&b->top, (uintptr_t)b->base);
		atomic_init(&b->lim, (uintptr_t)b->base);
		atomic_init(&b->end, (uintptr_t)(b->base + b->cap));
		ents += b->cap + 1;
	}
	tc->pool = pool;
	tc->idx = pool->idx;
	tc->sample_left = pool->cfg.sample_every;
	pthread_mutex_init(&tc->lock, NULL);
	/* Any non-NULL value makes the key's destructor run at thread exit. */
	pthread_setspecific(mrp_exit_key, &mrp_tcache_empty);

	pthread_mutex_lock(&mrp_global_lock);
	tc->next = pool->tcaches;
	if (tc->next)
		tc->next->prev = tc;
	pool->tcaches = tc;
	pthread_mutex_unlock(&mrp_global_lock);
	/* after mrp_global_lock, which a reclaim holds around it */
	pthread_mutex_lock(&tc->lock);
	mrp_tls[pool->idx] = tc;
	return tc;
}

void mrp_tcache_put(struct mrp_tcache *tc)
{
	pthread_mutex_unlock(&tc->lock);
}

/* mrp_thread_flush(), MRP_TRIM_FLUSH: the calling thread's cache of pool. */
int mrp_tcache_flush_self(struct mrp_pool *pool)
{
	struct mrp_tcache *tc = mrp_tls[pool->idx];

	if (tc != &mrp_tcache_empty && tc->pool == pool)
		mrp_tcache_flush(tc);
	return 0;
}

/*
 * Pool close: every thread's cache of pool becomes an orphan that looks
 * empty to the fast paths; each thread frees its own on its next slow path
 * through that slot or at exit. The caller's own cache, and in a forked
 * child every cache (their threads do not exist here), are freed now.
 * Called with mrp_global_lock held.
 */
void mrp_tcaches_orphan(struct mrp_pool *pool, bool forked)
{
	struct mrp_tcache *tc, *next;

	for (tc = pool->tcaches; tc; tc = next) {
		next = tc->next;
		if (forked) {
			mrp_tcache_free(tc, true);
			continue;
		}
		/* the pool thread has stopped and no call races close: no reclaim */
		for (unsigned int c = 0; c <= MRP_NCLASSES; c++) {
			struct mrp_bin *b = &tc->bins[c];

			mrp_bin_set_count(b, 0);
			atomic_store_explicit(&b->lim, MRP_BIN_MARKED, memory_order_relaxed);
			atomic_store_explicit(&b->end, 0, memory_order_relaxed);
		}
		memset(tc->taken, 0, sizeof(tc->taken));
		tc->reclaim = MRP_TC_LIVE;
		tc->pool = NULL;
		tc->next = NULL;
		tc->prev = NULL;
	}
	pool->tcaches = NULL;
	tc = mrp_tls[pool->idx];
	mrp_tls[pool->idx] = &mrp_tcache_empty;
	if (!forked && tc != &mrp_tcache_empty)
		mrp_tcache_free(tc, false);
}

/* Owner calls on tc so far: moves whenever its thread uses the pool. */
static uint64_t mrp_tcache_ops(struct mrp_tcache *tc)
{
	uint64_t ops = mrp_get(&tc->misses);

	for (unsigned int c = 0; c < MRP_NCLASSES; c++)
		ops += mrp_get(&tc->bins[c].allocs) + mrp_get(&tc->bins[c].frees);
	return ops;
}

/* Made no call for delay_ns, as successive passes saw it; mrp_global_lock held. */
static bool mrp_tcache_idle(struct mrp_tcache *tc, uint64_t now, uint64_t delay_ns)
{
	uint64_t ops = mrp_tcache_ops(tc);

	if (ops != tc->seen_ops || !tc->seen_ns) {
		tc->seen_ops = ops;
		tc->seen_ns = now;
		return false;
	}
	return now - tc->seen_ns >= delay_ns;
}

/*
 * Step 1 (top of file) on a live cache, tc->lock held. An empty cache is
 * left alone: nothing to take, no barrier, no slow path after. Returns
 * whether it was marked.
 */
static bool mrp_tcache_mark(struct mrp_tcache *tc)
{
	bool holds = false;

	for (unsigned int c = 0; c < MRP_NCLASSES; c++)
		holds |= mrp_bin_count(&tc->bins[c]) != 0;
	if (!holds)
		return false;
	for (unsigned int c = 0; c < MRP_NCLASSES; c++) {
		atomic_store_explicit(&tc->bins[c].end, 0, MRP_HANDSHAKE);
		atomic_store_explicit(&tc->bins[c].lim, MRP_BIN_MARKED, MRP_HANDSHAKE);
	}
	tc->reclaim = MRP_TC_MARKED;
	return true;
}

/*
 * Step 3 on a cache marked since a barrier, tc->lock held:
 * what its bins hold above what was taken goes to the depot. Returns the
 * number of buffers.
 */
static uint32_t mrp_tcache_take(struct mrp_tcache *tc)
{
	uint32_t got = 0;

	for (unsigned int c = 0; c < MRP_NCLASSES; c++) {
		struct mrp_bin *b = &tc->bins[c];
		uint32_t n = mrp_bin_count_of(b, atomic_load_explicit(&b->top,
								       MRP_HANDSHAKE_ACQUIRE));

		if (n <= tc->taken[c])
			continue;
		mrp_depot_put(tc->pool, c, b->base + tc->taken[c], n - tc->taken[c]);
		got += n - tc->taken[c];
		tc->taken[c] = n;
	}
	tc->reclaim = MRP_TC_TAKEN;
	return got;
}

/*
 * One pass of the idle reclaim (top of file) over the caches of pool: those
 * whose owner made no call for delay_ns, or all with force. A cache whose
 * lock is held is skipped: its owner is in a slow path, so not idle. One
 * barrier serves the whole batch; without one (os.c), or without
 * idle_reclaim, nothing is marked.
 * Returns the number of caches reclaimed (live, then buffers taken), which
 * tcache_reclaims counts.
 */
static int mrp_tcaches_reclaim(struct mrp_pool *pool, uint64_t now, uint64_t delay_ns,
			       bool force)
{
	struct mrp_tcache *tc, *batch = NULL;
	bool barrier;
	int n = 0;

	if (!pool->cfg.idle_reclaim || mrp_os_membarrier_register())
		return 0;
	pthread_mutex_lock(&mrp_global_lock);
	for (tc = pool->tcaches; tc; tc = tc->next) {
		/* in another pass's batch (two mrp_trim() calls): that pass's */
		if (tc->in_pass)
			continue;
		if (!mrp_tcache_idle(tc, now, delay_ns) && !force)
			continue;
		if (pthread_mutex_trylock(&tc->lock))
			continue;
		if (tc->reclaim == MRP_TC_TAKEN) {
			/*
			 * Marked since an earlier barrier: what frees in flight
			 * pushed. The same idle period, not another reclaim.
			 */
			mrp_tcache_take(tc);
		} else if (mrp_tcache_mark(tc)) {
			tc->in_pass = true;
			tc->pass_next = batch;
			batch = tc;
		}
		pthread_mutex_unlock(&tc->lock);
	}
	pthread_mutex_unlock(&mrp_global_lock);
	if (!batch)
		return 0;
	MRP_TEST_HOOK(MRP_HOOK_PASS_MARKED);
	barrier = !mrp_os_membarrier();
	for (tc = batch; tc; tc = tc->pass_next) {
		/* held: its owner is in a slow path, which unmarks the cache */
		if (pthread_mutex_trylock(&tc->lock))
			continue;
		if (tc->reclaim == MRP_TC_MARKED) {
			/* nothing to take (the owner popped it all): not a reclaim */
			if (barrier && mrp_tcache_take(tc))
				n++;
			else
				mrp_tcache_settle(tc);
		}
		pthread_mutex_unlock(&tc->lock);
	}
	pthread_mutex_lock(&mrp_global_lock);
	for (tc = batch; tc; tc = tc->pass_next)
		tc->in_pass = false;
	pthread_cond_broadcast(&mrp_pass_done);
	pthread_mutex_unlock(&mrp_global_lock);
	if (n)
		mrp_add(&pool->tcache_reclaims, (uint64_t)n);
	return n;
}

/*
 * Return to the depot the buffers of every cache of pool whose owner made
 * no call for delay_ns (as successive passes saw it), so that trim can
 * release their arenas. The pool thread calls it on each wakeup, mrp_trim()
 * when there is no pool thread. Returns the number of caches reclaimed.
 */
int mrp_tcaches_reclaim_idle(struct mrp_pool *pool, uint64_t now, uint64_t delay_ns)
{
	return mrp_tcaches_reclaim(pool, now, delay_ns, false);
}

/* Tests only (reclaim_test.c): a pass now that takes every cache it can lock. */
int mrp_tcaches_reclaim_now(struct mrp_pool *pool)
{
	return mrp_tcaches_reclaim(pool, mrp_now_ns(), 0, true);
}
