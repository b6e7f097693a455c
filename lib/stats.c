// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Statistics: the fast paths bump per-thread counters only; this file sums
 * them (live caches under mrp_global_lock, exited ones already folded into
 * the pool) with the pool's own counters, and keeps the sampled latency
 * histogram (log2 buckets of nanoseconds).
 */
#include <errno.h>
#include <string.h>

#include "internal.h"

void mrp_lat_record(struct mrp_pool *pool, uint64_t ns)
{
	unsigned int b = ns ? 64 - (unsigned int)__builtin_clzll(ns) : 0;

	mrp_add(&pool->hist[b < MRP_HIST_BUCKETS ? b : MRP_HIST_BUCKETS - 1], 1);
}

/* Upper bound of the bucket holding the q-th per-mille sample. */
static uint64_t mrp_lat_quantile(const uint64_t *h, uint64_t total, unsigned int q)
{
	uint64_t want = (total * q + 999) / 1000, seen = 0;

	for (unsigned int b = 0; b < MRP_HIST_BUCKETS; b++) {
		seen += h[b];
		if (seen >= want && seen)
			return b ? (uint64_t)1 << b : 1;
	}
	return 0;
}

/*
 * size bytes of the caller's struct from the library's have bytes: a
 * caller built against a newer header passes a larger one, whose fields
 * this library does not know; they read as 0, never as stack garbage.
 */
static void mrp_stats_copy(void *out, const void *st, size_t size, size_t have)
{
	if (size > have)
		memset((char *)out + have, 0, size - have);
	memcpy(out, st, size < have ? size : have);
}

MRP_EXPORT int mrp_stats(struct mrp_pool *pool, struct mrp_stats *out, size_t size)
{
	uint64_t allocs[MRP_NCLASSES], frees[MRP_NCLASSES], misses, h[MRP_HIST_BUCKETS];
	struct mrp_stats st;
	struct mrp_tcache *tc;
	uint64_t used = 0, total = 0;

	if (!pool || !out)
		return -EINVAL;
	if (mrp_forked(pool))
		return -ECHILD;
	memset(&st, 0, sizeof(st));

	pthread_mutex_lock(&mrp_global_lock);
	for (unsigned int c = 0; c < MRP_NCLASSES; c++) {
		allocs[c] = mrp_get(&pool->dead_allocs[c]);
		frees[c] = mrp_get(&pool->dead_frees[c]);
	}
	misses = mrp_get(&pool->dead_misses);
	for (tc = pool->tcaches; tc; tc = tc->next) {
		for (unsigned int c = 0; c < MRP_NCLASSES; c++) {
			allocs[c] += mrp_get(&tc->bins[c].allocs);
			frees[c] += mrp_get(&tc->bins[c].frees);
		}
		misses += mrp_get(&tc->misses);
	}
	pthread_mutex_unlock(&mrp_global_lock);

	for (unsigned int c = 0; c < MRP_NCLASSES; c++) {
		st.allocs += allocs[c];
		st.frees += frees[c];
		/* a buffer freed by another thread than its allocator's may be
		 * counted there first: clamp the transient difference */
		if (allocs[c] > frees[c])
			st.bytes_in_use += (allocs[c] - frees[c]) * mrp_class_size(c);
		st.depot_refills += mrp_get(&pool->cls[c].refills);
		st.depot_flushes += mrp_get(&pool->cls[c].flushes);
	}
	st.tcache_misses = misses;
	st.tcache_hits = st.allocs > misses ? st.allocs - misses : 0;
	st.large_allocs = mrp_get(&pool->large_allocs);
	st.allocs += st.large_allocs + mrp_get(&pool->fb_allocs);
	st.frees += mrp_get(&pool->large_frees) + mrp_get(&pool->fb_frees);
	st.fallbacks = mrp_get(&pool->fb_allocs);
	st.fallback_bytes = mrp_get(&pool->fb_bytes);
	st.bytes_in_use += mrp_get(&pool->large_bytes) + st.fallback_bytes;
	st.sync_growths = mrp_get(&pool->sync_growths);
	st.bg_growths = mrp_get(&pool->bg_growths);
	st.registrations = mrp_get(&pool->regs);
	st.reg_ns_total = mrp_get(&pool->reg_ns);
	st.reg_ns_max = mrp_get(&pool->reg_ns_max);
	st.double_frees = mrp_get(&pool->double_frees);
	st.dereg_errors = mrp_get(&pool->dereg_errors);
	st.tcache_reclaims = mrp_get(&pool->tcache_reclaims);
	st.backend = pool->ops->kind;
	st.hugepages = atomic_load(&pool->hugepages);

	pthread_mutex_lock(&pool->lock);
	st.bytes_mapped = pool->mapped;
	st.numa_node = pool->node;
	st.fork = pool->fork_copy ? MRP_FORK_COPY : MRP_FORK_NONE;
	st.bytes_locked = pool->locked_bytes;
	st.arenas = pool->narenas;
	st.arenas_trimmed = mrp_get(&pool->trimmed);
	for (int s = 0; s < MRP_MAX_PDS; s++)
		st.pds += atomic_load(&pool->pds[s]) != NULL;
	pthread_mutex_unlock(&pool->lock);

	used = st.bytes_in_use - st.fallback_bytes;
	if (st.bytes_mapped)
		st.fragmentation_pm = (uint32_t)(used >= st.bytes_mapped ? 0 :
			(st.bytes_mapped - used) * 1000 / st.bytes_mapped);

	for (unsigned int b = 0; b < MRP_HIST_BUCKETS; b++) {
		h[b] = mrp_get(&pool->hist[b]);
		total += h[b];
	}
	st.lat_samples = total;
	st.lat_p50_ns = mrp_lat_quantile(h, total, 500);
	st.lat_p99_ns = mrp_lat_quantile(h, total, 990);

	mrp_stats_copy(out, &st, size, sizeof(st));
	return 0;
}

MRP_EXPORT int mrp_pd_stats(struct mrp_pool *pool, struct ibv_pd *pd,
			    struct mrp_pd_stats *out, size_t size)
{
	struct mrp_pd_stats st;
	struct mrp_arena *a;
	int slot;

	if (!pool || !pd || !out)
		return -EINVAL;
	if (mrp_forked(pool))
		return -ECHILD;
	memset(&st, 0, sizeof(st));
	pthread_mutex_lock(&pool->lock);
	slot = mrp_pd_slot(pool, pd);
	if (slot < 0) {
		pthread_mutex_unlock(&pool->lock);
		return -ENOENT;
	}
	st.state = mrp_slot_dead(pool, slot) ? MRP_PD_DEAD : MRP_PD_LIVE;
	for (a = pool->arenas; a; a = a->next)
		st.arenas += mrp_arena_has(a, slot);
	st.reg_failures = mrp_get(&pool->pd_reg_failures[slot]);
	st.dereg_errors = mrp_get(&pool->pd_dereg_errors[slot]);
	st.dmabuf_regs = mrp_get(&pool->pd_dmabuf_regs[slot]);
	st.dmabuf_error = pool->pd_dmabuf_error[slot];
	pthread_mutex_unlock(&pool->lock);
	mrp_stats_copy(out, &st, size, sizeof(st));
	return 0;
}
