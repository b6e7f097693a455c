// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Per-thread caches and the process-wide state they hang from: the TLS
 * slots, the thread-exit flush, and the fork handler.
 *
 * mrp_tls[] starts pointing at mrp_tcache_empty, whose bins all have
 * capacity 0: the fast paths need no "initialised?" test, the first use of
 * a pool in a thread simply fails the bin test and the slow path installs a
 * real cache. Closing a pool, and forking, turn caches back into that state.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define MRP_E8(x) x, x, x, x, x, x, x, x
struct mrp_tcache mrp_tcache_empty;
__thread struct mrp_tcache *mrp_tls[MRP_MAX_POOLS]
	__attribute__((tls_model("initial-exec"))) = {
	MRP_E8(&mrp_tcache_empty), MRP_E8(&mrp_tcache_empty),
	MRP_E8(&mrp_tcache_empty), MRP_E8(&mrp_tcache_empty),
};
_Static_assert(MRP_MAX_POOLS == 32, "mrp_tls initialiser");

pthread_mutex_t mrp_global_lock = PTHREAD_MUTEX_INITIALIZER;
_Atomic unsigned int mrp_fork_gen;

static pthread_once_t mrp_once = PTHREAD_ONCE_INIT;
static pthread_key_t mrp_exit_key;
static int mrp_init_err;

static void mrp_tcache_free(struct mrp_tcache *tc)
{
	free(tc->bins[0].slots);
	free(tc);
}

/* Return every cached buffer of tc to its pool's depot. */
void mrp_tcache_flush(struct mrp_tcache *tc)
{
	for (unsigned int c = 0; c < MRP_NCLASSES; c++) {
		struct mrp_bin *b = &tc->bins[c];

		if (b->count)
			mrp_depot_put(tc->pool, c, b->slots, b->count);
		b->count = 0;
	}
}

/* Fold a dying cache's counters into its pool; mrp_global_lock held. */
static void mrp_tcache_retire(struct mrp_tcache *tc)
{
	struct mrp_pool *pool = tc->pool;

	if (pool) {
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
	mrp_tcache_free(tc);
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
}

static void mrp_fork_parent(void)
{
	pthread_mutex_unlock(&mrp_global_lock);
}

/*
 * The child has none of the parent's arenas. Bump the generation every
 * pool checks on its slow paths, and send this thread's fast paths there:
 * its caches hold addresses that are not mapped here.
 */
static void mrp_fork_child(void)
{
	pthread_mutex_init(&mrp_global_lock, NULL);
	atomic_fetch_add(&mrp_fork_gen, 1);
	mrp_pools_fork_child();
	for (unsigned int i = 0; i < MRP_MAX_POOLS; i++)
		mrp_tls[i] = &mrp_tcache_empty;
}

static void mrp_global_once(void)
{
	mrp_init_err = mrp_map_create(&mrp_map, mrp_map_va_bits());
	if (mrp_init_err)
		return;
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

static uint32_t mrp_bin_cap(const struct mrp_pool *pool, unsigned int cls)
{
	size_t cap = pool->cfg.tcache_bytes / mrp_class_size(cls);

	if (cap < 1)
		cap = 1;
	if (cap > MRP_MAX_BIN)
		cap = MRP_MAX_BIN;
	return (uint32_t)cap;
}

/* The calling thread's cache for pool, created on first use. */
struct mrp_tcache *mrp_tcache_get(struct mrp_pool *pool)
{
	struct mrp_tcache *tc = mrp_tls[pool->idx];
	size_t nslots = 0;
	void **slots;

	if (tc != &mrp_tcache_empty) {
		if (tc->pool == pool)
			return tc;
		/* left behind by a closed pool that had this slot */
		mrp_tls[pool->idx] = &mrp_tcache_empty;
		mrp_tcache_free(tc);
	}
	for (unsigned int c = 0; c < MRP_NCLASSES; c++)
		nslots += mrp_bin_cap(pool, c);
	tc = aligned_alloc(64, sizeof(*tc));
	slots = calloc(nslots, sizeof(void *));
	if (!tc || !slots) {
		free(tc);
		free(slots);
		return NULL;
	}
	memset(tc, 0, sizeof(*tc));
	for (unsigned int c = 0; c < MRP_NCLASSES; c++) {
		tc->bins[c].slots = slots;
		tc->bins[c].cap = mrp_bin_cap(pool, c);
		slots += tc->bins[c].cap;
	}
	tc->pool = pool;
	tc->idx = pool->idx;
	tc->sample_left = pool->cfg.sample_every;
	/* Any non-NULL value makes the key's destructor run at thread exit. */
	pthread_setspecific(mrp_exit_key, &mrp_tcache_empty);

	pthread_mutex_lock(&mrp_global_lock);
	tc->next = pool->tcaches;
	if (tc->next)
		tc->next->prev = tc;
	pool->tcaches = tc;
	pthread_mutex_unlock(&mrp_global_lock);
	mrp_tls[pool->idx] = tc;
	return tc;
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
			mrp_tcache_free(tc);
			continue;
		}
		for (unsigned int c = 0; c <= MRP_NCLASSES; c++) {
			tc->bins[c].count = 0;
			tc->bins[c].cap = 0;
		}
		tc->pool = NULL;
		tc->next = NULL;
		tc->prev = NULL;
	}
	pool->tcaches = NULL;
	tc = mrp_tls[pool->idx];
	mrp_tls[pool->idx] = &mrp_tcache_empty;
	if (!forked && tc != &mrp_tcache_empty)
		mrp_tcache_free(tc);
}
