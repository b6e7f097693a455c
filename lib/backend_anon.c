// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Standalone backend: the library's own anonymous memory, for hosts without
 * the mrpool module. Hugetlb pages when the host has some reserved, else
 * THP (MADV_HUGEPAGE), kept out of children (MADV_DONTFORK, like slices)
 * unless the pool gives them a copy (pool->fork_copy: the kernel then
 * copies pinned pages for the child, mlock is not inherited), and pinned
 * with mlock() when RLIMIT_MEMLOCK allows: weaker than the module (no NUMA
 * placement, no contiguity, no host-wide accounting).
 */
#include <errno.h>
#include <sys/mman.h>

#include "internal.h"

#ifndef MAP_HUGE_2MB
#define MAP_HUGE_2MB	(21 << 26)
#endif
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE	23
#endif

static int mrp_anon_init(struct mrp_pool *pool)
{
	pool->granule = MRP_MAP_GRANULE;
	return 0;
}

static void mrp_anon_fini(struct mrp_pool *pool, bool forked)
{
	(void)pool;
	(void)forked;
}

static int mrp_anon_map(struct mrp_pool *pool, size_t size, size_t align,
			struct mrp_region *r)
{
	const int prot = PROT_READ | PROT_WRITE;
	void *m = NULL;
	bool huge = false;

	/*
	 * Not for a pool whose children get copies: fork copies a pinned
	 * private huge page at once from the free huge pages, not the
	 * reserve (fork fails with ENOMEM when there are too few), and a
	 * write to an unpinned one needs another, or the kernel takes the
	 * page from the child (SIGBUS there). Hosts reserve what they need.
	 */
	if (pool->cfg.hugetlb && !pool->hugetlb_failed && !pool->fork_copy) {
		m = mrp_os_map_aligned(size, align, prot, MAP_PRIVATE | MAP_ANONYMOUS |
				       MAP_HUGETLB | MAP_HUGE_2MB, -1, 0);
		/* no reserved hugepages: do not ask again for every arena */
		if (!m)
			pool->hugetlb_failed = true;
		huge = m != NULL;
	}
	if (!m) {
		m = mrp_os_map_aligned(size, align, prot, MAP_PRIVATE | MAP_ANONYMOUS,
				       -1, 0);
		if (!m)
			return -errno;
		huge = !madvise(m, size, MADV_HUGEPAGE);
	}
	/* before the first touch (mlock, prefault): where pages are placed */
	mrp_numa_prefer(m, size, pool->node);
	/*
	 * Out of children while it is made, in every mode: a fork between
	 * here and the arena's publication would give the child a populated
	 * copy no record of its pool names. A pool whose children get copies
	 * marks its published arenas MADV_DOFORK at each fork (pool.c
	 * mrp_pool_fork_advice), so those reach the child, this one not yet.
	 */
	if (madvise(m, size, MADV_DONTFORK)) {
		int err = errno;

		munmap(m, size);
		return -err;
	}
	r->locked = !mlock(m, size);
	if (!r->locked)
		madvise(m, size, MADV_POPULATE_WRITE);	/* best effort prefault */
	if (huge)
		atomic_store(&pool->hugepages, true);
	r->base = (uintptr_t)m;
	r->size = size;
	r->handle = 0;
	return 0;
}

static void mrp_anon_unmap(struct mrp_pool *pool, struct mrp_region *r)
{
	(void)pool;
	mrp_os_unmap((void *)r->base, r->size);
}

const struct mrp_backend_ops mrp_backend_anon = {
	.kind = MRP_KIND_ANON,
	.init = mrp_anon_init,
	.fini = mrp_anon_fini,
	.map = mrp_anon_map,
	.unmap = mrp_anon_unmap,
};
