// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Host-wide visibility: on the kernel backend the pool maps its file's
 * stats page (struct mrpool_client_stats) and copies its counters there
 * about once a second, from the background thread or, without one, from
 * the allocation slow path; and once more at close. The module shows the
 * page in debugfs mrpool/clients, so operators see every process's hit
 * rate, fallbacks and bytes without a server in the application. The
 * anonymous backend has no module to publish to: its stats say which
 * backend runs, nothing more is needed.
 *
 * Writers are serialised by pool->pub_busy (a busy writer makes others
 * skip); readers follow the sequence count: odd while fields change.
 */
#include <stddef.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <uapi/mrpool.h>

#include "internal.h"

#define MRP_PUBLISH_NS	900000000ull	/* "about once a second" */

void mrp_publish_init(struct mrp_pool *pool)
{
	long page = sysconf(_SC_PAGESIZE);
	void *m;

	pool->pub = NULL;
	if (pool->ops->kind != MRP_KIND_KERNEL || pool->fd < 0 || page <= 0 ||
	    (size_t)page < sizeof(struct mrpool_client_stats))
		return;
	/* an older module refuses the offset: run without publishing */
	m = mmap(NULL, (size_t)page, PROT_READ | PROT_WRITE, MAP_SHARED, pool->fd,
		 (off_t)MRPOOL_STATS_MMAP_OFFSET);
	if (m == MAP_FAILED)
		return;
	pool->pub = m;
	pool->pub_len = (size_t)page;
}

/*
 * One counter of the page; read by the kernel while we write. Release
 * stores: each is ordered after the odd count that opens the update, which
 * is what a fence after that store would give, and ThreadSanitizer (which
 * does not model fences: GCC 12 refuses them under -fsanitize=thread)
 * understands. Once a second, so the cost does not matter.
 */
#define MRP_PUB(p, field, v)	__atomic_store_n(&(p)->field, (v), __ATOMIC_RELEASE)

void mrp_publish(struct mrp_pool *pool, bool force)
{
	struct mrpool_client_stats *p = pool->pub;
	uint64_t now = mrp_now_ns();
	void (*hook)(struct mrp_pool *pool);
	struct mrp_stats st;
	uint32_t seq;

	if (!p || mrp_forked(pool))
		return;
	if (!force && now - atomic_load_explicit(&pool->pub_last_ns,
						 memory_order_relaxed) < MRP_PUBLISH_NS)
		return;
	if (atomic_exchange_explicit(&pool->pub_busy, true, memory_order_acquire))
		return;
	atomic_store_explicit(&pool->pub_last_ns, now, memory_order_relaxed);
	hook = atomic_load_explicit(&pool->preload_publish, memory_order_acquire);
	if (hook)
		hook(pool);
	if (mrp_stats(pool, &st, sizeof(st)))
		goto out;

	seq = __atomic_load_n(&p->seq, __ATOMIC_RELAXED);
	/* the page is ours alone, but a stray odd value must not stick */
	seq |= 1;
	__atomic_store_n(&p->seq, seq, __ATOMIC_RELAXED);
	MRP_PUB(p, size, (uint32_t)sizeof(*p));
	MRP_PUB(p, allocs, st.allocs);
	MRP_PUB(p, frees, st.frees);
	MRP_PUB(p, tcache_hits, st.tcache_hits);
	MRP_PUB(p, tcache_misses, st.tcache_misses);
	MRP_PUB(p, fallbacks, st.fallbacks);
	MRP_PUB(p, fallback_bytes, st.fallback_bytes);
	MRP_PUB(p, bytes_in_use, st.bytes_in_use);
	MRP_PUB(p, bytes_mapped, st.bytes_mapped);
	MRP_PUB(p, registrations, st.registrations);
	MRP_PUB(p, reg_ns_total, st.reg_ns_total);
	MRP_PUB(p, preload_served, mrp_get(&pool->preload_served));
	MRP_PUB(p, preload_passed, mrp_get(&pool->preload_passed));
	/* the fields above before the even count that vouches for them */
	__atomic_store_n(&p->seq, seq + 1, __ATOMIC_RELEASE);
out:
	atomic_store_explicit(&pool->pub_busy, false, memory_order_release);
}

void mrp_publish_fini(struct mrp_pool *pool, bool forked)
{
	/* a child never inherits the page (VM_DONTCOPY): nothing to unmap */
	if (pool->pub && !forked)
		munmap(pool->pub, pool->pub_len);
	pool->pub = NULL;
}
