// SPDX-License-Identifier: GPL-2.0
/*
 * The pool of chunks: allocation from the page allocator (with fallback to
 * smaller orders), growth on demand up to max_mb, return with pin checks,
 * quarantine of chunks someone still holds, zeroing before reuse, and the
 * idle trim worker.
 *
 * Invariants: every chunk on a free list (one per NUMA node, the node of
 * all its pages) is zeroed and each of its pages has refcount 1 (the
 * pool's own); the kernel MR cache (ib_*.c) takes no page reference. A
 * chunk leaves a slice only when no VMA maps it; if a page is still
 * referenced then (an MR pinning it), the chunk waits on the quarantine
 * list, holding a module reference, until the quarantine worker sees the
 * references gone.
 */
#include "mrpool.h"
#include "ib.h"

#include <linux/gfp.h>
#include <linux/mm.h>
#include <linux/highmem.h>
#include <linux/slab.h>
#include <linux/module.h>
#include <linux/jiffies.h>

/* How often the quarantine worker looks for released pins. */
#define MRPOOL_QUARANTINE_POLL	HZ

struct mrpool_pool mrpool_pool = {
	.lock = __MUTEX_INITIALIZER(mrpool_pool.lock),
	.quarantine = LIST_HEAD_INIT(mrpool_pool.quarantine),
	.chunks = LIST_HEAD_INIT(mrpool_pool.chunks),
};

struct mrpool_stats mrpool_stats;

u64 mrpool_pool_bytes(unsigned long nr_chunks)
{
	return (u64)nr_chunks * mrpool_pool.chunk_size;
}

u64 mrpool_max_bytes(void)
{
	return (u64)READ_ONCE(mrpool_max_mb) * SZ_1M;
}

static unsigned long mrpool_max_chunks(void)
{
	return div64_u64(mrpool_max_bytes(), mrpool_pool.chunk_size);
}

/**
 * mrpool_pool_node - the node chunks come from when a caller names none
 *
 * numa_node if set, else the node of the RDMA devices, else NUMA_NO_NODE:
 * no preference, the allocating CPU's node first. Never blocks: may be
 * called with the pool lock held (mrpool_ib_node() reads a cached value).
 */
int mrpool_pool_node(void)
{
	int nid = READ_ONCE(mrpool_numa_node);

	if (nid == NUMA_NO_NODE)
		nid = mrpool_ib_node();
	return nid;
}

static unsigned long mrpool_floor_chunks(void)
{
	return DIV_ROUND_UP((u64)mrpool_pool_mb * SZ_1M, mrpool_pool.chunk_size);
}

/*
 * Pages of a chunk are either order-0 pages (split blocks) or the
 * subpages of one PMD-order compound page; only heads and order-0 pages
 * carry a reference, tails are reached through their head.
 */
static void mrpool_chunk_destroy(struct mrpool_chunk *c, unsigned int nr_pages)
{
	unsigned int i, step;
	struct page *page;

	/* Step over tails first: freeing a head turns them into plain pages. */
	for (i = 0; i < nr_pages; i += step) {
		page = c->pages[i];
		step = PageHead(page) ? 1U << compound_order(page) : 1;
		put_page(page);
	}
	kvfree(c->pages);
	kfree(c);
}

/*
 * A chunk of chunk_pages zeroed pages. A block of exactly PMD order stays
 * one compound page, so the fault handler can map it with one PMD (the
 * cost of pinning and unpinning follows the number of mappings). Other
 * blocks are split, each page refcounted on its own. Under fragmentation
 * the chunk is assembled from smaller blocks, all on the node of the first
 * one, so a chunk has one node. Only @thisnode keeps the first on @nid.
 * Never retries hard: callers turn failure into -ENOMEM.
 */
static struct mrpool_chunk *mrpool_chunk_alloc(int nid, bool thisnode)
{
	struct mrpool_pool *p = &mrpool_pool;
	gfp_t gfp = GFP_KERNEL | __GFP_ZERO | __GFP_NOWARN | __GFP_NORETRY;
	unsigned int order = p->chunk_order;
	unsigned int filled = 0, i;
	struct mrpool_chunk *c;
	struct page *page;
	bool pmd;

	if (mrpool_should_fail(&mrpool_fail_chunk_alloc))
		goto fail;
	if (thisnode && nid != NUMA_NO_NODE)
		gfp |= __GFP_THISNODE;

	c = kzalloc(sizeof(*c), GFP_KERNEL);
	if (!c)
		goto fail;
	c->pages = kvcalloc(p->chunk_pages, sizeof(*c->pages), GFP_KERNEL);
	if (!c->pages)
		goto free_chunk;

	while (filled < p->chunk_pages) {
		pmd = mrpool_pmd_map && order == MRPOOL_PMD_ORDER;
		if (order && mrpool_should_fail(&mrpool_fail_high_order))
			page = NULL;
		else
			page = alloc_pages_node(nid, pmd ? gfp | __GFP_COMP : gfp,
						order);
		if (!page) {
			if (!order)
				goto free_pages;
			order--;
			continue;
		}
		if (!filled) {
			nid = page_to_nid(page);
			gfp |= __GFP_THISNODE;
		}
		if (order && !pmd)
			split_page(page, order);
		for (i = 0; i < (1U << order); i++)
			c->pages[filled++] = page + i;
		c->blocks[order]++;
	}
	c->nid = page_to_nid(c->pages[0]);
	c->state = MRPOOL_CHUNK_FREE;
	c->free_since = jiffies;
	return c;

free_pages:
	mrpool_chunk_destroy(c, filled);
	goto fail;
free_chunk:
	kfree(c);
fail:
	atomic64_inc(&mrpool_stats.chunk_alloc_failures);
	return NULL;
}

static void mrpool_trim_arm(void);

/* Caller holds the pool lock; @c is not on the free or quarantine list. */
static void mrpool_chunk_account(struct mrpool_chunk *c, bool add)
{
	struct mrpool_pool *p = &mrpool_pool;
	unsigned int o;

	for (o = 0; o < MRPOOL_NR_PAGE_ORDERS; o++) {
		if (add)
			p->blocks[o] += c->blocks[o];
		else
			p->blocks[o] -= c->blocks[o];
	}
	if (add) {
		list_add_tail(&c->all, &p->chunks);
		p->nr_total++;
	} else {
		list_del(&c->all);
		p->nr_total--;
	}
}

/*
 * Someone other than the pool holds a page: a pin (an MR that outlived
 * the slice) or a transient reference. Pins of a compound page count on
 * its head.
 */
static bool mrpool_chunk_busy(struct mrpool_chunk *c)
{
	struct page *page;
	unsigned int i;

	for (i = 0; i < mrpool_pool.chunk_pages; i++) {
		page = c->pages[i];
		if (!PageTail(page) && page_ref_count(page) != 1)
			return true;
	}
	return false;
}

static void mrpool_chunk_zero(struct mrpool_chunk *c)
{
	unsigned int i;

	for (i = 0; i < mrpool_pool.chunk_pages; i++)
		clear_highpage(c->pages[i]);
	atomic64_inc(&mrpool_stats.zeroed);
}

/* Caller holds the pool lock. @c becomes free, most recently used first. */
static void mrpool_put_free(struct mrpool_chunk *c)
{
	struct mrpool_pool *p = &mrpool_pool;

	c->state = MRPOOL_CHUNK_FREE;
	c->owner = 0;
	list_move(&c->link, &p->free[c->nid]);
	p->nr_free++;
}

/* Move up to @nr chunks of node @nid's free list to @out. */
static unsigned int mrpool_take_node(unsigned int nr, int nid,
				     struct list_head *out)
{
	struct mrpool_pool *p = &mrpool_pool;
	struct mrpool_chunk *c, *tmp;
	unsigned int got = 0;

	list_for_each_entry_safe(c, tmp, &p->free[nid], link) {
		if (got == nr)
			break;
		c->state = MRPOOL_CHUNK_USED;
		list_move_tail(&c->link, out);
		got++;
	}
	p->nr_free -= got;
	p->nr_used += got;
	return got;
}

/* ...then from the other nodes' lists, in node order. */
static unsigned int mrpool_take_others(unsigned int nr, int skip,
				       struct list_head *out)
{
	unsigned int got = 0;
	int nid;

	for (nid = 0; nid < nr_node_ids && got < nr; nid++)
		if (nid != skip)
			got += mrpool_take_node(nr - got, nid, out);
	return got;
}

/* Chunks the pool may still grow by, counting growth in flight. */
static unsigned long mrpool_room(void)
{
	struct mrpool_pool *p = &mrpool_pool;
	unsigned long max = mrpool_max_chunks(), held;

	held = p->nr_total + p->nr_growing;
	return held < max ? max - held : 0;
}

/*
 * Build up to @nr chunks into @fresh without the pool lock (the caller
 * reserved them in nr_growing), registering each on the RDMA devices while
 * it is still private: no trim can free it under the registration.
 */
static unsigned int mrpool_grow(unsigned int nr, int nid, bool thisnode,
				struct list_head *fresh)
{
	struct mrpool_chunk *c;
	unsigned int i;

	for (i = 0; i < nr; i++) {
		c = mrpool_chunk_alloc(nid, thisnode);
		if (!c)
			break;
		mrpool_ib_chunk_added(c);
		list_add_tail(&c->link, fresh);
	}
	atomic64_add(i, &mrpool_stats.grows);
	return i;
}

/* Caller holds the pool lock: count grown chunks in, as USED, onto @out. */
static void mrpool_grown_used(struct list_head *fresh, struct list_head *out)
{
	struct mrpool_pool *p = &mrpool_pool;
	struct mrpool_chunk *c;

	list_for_each_entry(c, fresh, link) {
		mrpool_chunk_account(c, true);
		c->state = MRPOOL_CHUNK_USED;
		p->nr_used++;
	}
	list_splice_tail_init(fresh, out);
}

/* Caller holds the pool lock. Chunks on @list were taken, never exposed. */
static void mrpool_untake(struct list_head *list)
{
	struct mrpool_pool *p = &mrpool_pool;
	struct mrpool_chunk *c, *tmp;

	list_for_each_entry_safe(c, tmp, list, link) {
		p->nr_used--;
		mrpool_put_free(c);
	}
}

/**
 * mrpool_pool_take - take @nr zeroed chunks, growing the pool if needed
 * @nr: chunks wanted
 * @nid: preferred node, NUMA_NO_NODE for none (the local node first)
 * @strict: only chunks of @nid
 * @out: receives the chunks, state USED
 *
 * A preferred node is served from its free list, then by growing on that
 * node; only then (unless @strict) from other nodes' free lists and by
 * growing anywhere, each such chunk counted in node_fallbacks. Growth runs
 * without the lock (nr_growing holds the room); chunks grown for a request
 * that fails anyway stay in the pool for the trim worker.
 *
 * Return: 0, or -ENOMEM when max_mb would be exceeded or pages are short.
 */
int mrpool_pool_take(unsigned int nr, int nid, bool strict,
		     struct list_head *out)
{
	struct mrpool_pool *p = &mrpool_pool;
	bool prefer = nid != NUMA_NO_NODE;
	unsigned int got, want, grown;
	struct mrpool_chunk *c;
	unsigned long off = 0;
	LIST_HEAD(fresh);

	mutex_lock(&p->lock);
	if (prefer) {
		got = mrpool_take_node(nr, nid, out);
	} else {
		got = mrpool_take_node(nr, numa_mem_id(), out);
		got += mrpool_take_others(nr - got, numa_mem_id(), out);
	}
	want = min_t(unsigned long, nr - got, mrpool_room());
	/* Nothing else could fill the gap: fail before growing. */
	if (got + want < nr && (strict || !prefer))
		goto fail;
	p->nr_growing += want;
	mutex_unlock(&p->lock);

	grown = mrpool_grow(want, nid, prefer, &fresh);

	mutex_lock(&p->lock);
	p->nr_growing -= want;
	mrpool_grown_used(&fresh, out);
	got += grown;
	if (got < nr && prefer && !strict) {
		got += mrpool_take_others(nr - got, nid, out);
		/* Growing anywhere else makes sense only with another node. */
		want = num_online_nodes() > 1 ?
		       min_t(unsigned long, nr - got, mrpool_room()) : 0;
		if (got + want < nr)
			goto fail;
		p->nr_growing += want;
		mutex_unlock(&p->lock);

		grown = mrpool_grow(want, nid, false, &fresh);

		mutex_lock(&p->lock);
		p->nr_growing -= want;
		mrpool_grown_used(&fresh, out);
		got += grown;
	}
	if (got < nr)
		goto fail;
	mutex_unlock(&p->lock);

	if (prefer) {
		list_for_each_entry(c, out, link)
			off += c->nid != nid;
		atomic64_add(off, &mrpool_stats.node_fallbacks);
	}
	return 0;

fail:
	mrpool_untake(out);
	mutex_unlock(&p->lock);
	mrpool_trim_arm();
	return -ENOMEM;
}

/**
 * mrpool_pool_return - give chunks of a released slice back
 * @chunks: the slice's chunks; no VMA maps them any more
 *
 * May sleep (zeroing). Chunks whose pages are still referenced go to
 * quarantine instead and pin the module until the references are gone.
 */
void mrpool_pool_return(struct list_head *chunks)
{
	struct mrpool_pool *p = &mrpool_pool;
	struct mrpool_chunk *c, *tmp;

	list_for_each_entry_safe(c, tmp, chunks, link) {
		list_del_init(&c->link);
		if (mrpool_chunk_busy(c)) {
			__module_get(THIS_MODULE);
			atomic64_inc(&mrpool_stats.quarantines);
			mutex_lock(&p->lock);
			c->state = MRPOOL_CHUNK_QUARANTINED;
			list_add_tail(&c->link, &p->quarantine);
			p->nr_used--;
			p->nr_quarantined++;
			mutex_unlock(&p->lock);
			schedule_delayed_work(&p->quarantine_work,
					      MRPOOL_QUARANTINE_POLL);
			continue;
		}
		mrpool_chunk_zero(c);
		mutex_lock(&p->lock);
		c->free_since = jiffies;
		p->nr_used--;
		mrpool_put_free(c);
		mutex_unlock(&p->lock);
		cond_resched();
	}
	mrpool_trim_arm();
}

static void mrpool_quarantine_fn(struct work_struct *work)
{
	struct mrpool_pool *p = &mrpool_pool;
	struct mrpool_chunk *c, *tmp;
	unsigned int released = 0;
	LIST_HEAD(done);
	bool more;

	mutex_lock(&p->lock);
	list_for_each_entry_safe(c, tmp, &p->quarantine, link)
		if (!mrpool_chunk_busy(c))
			list_move_tail(&c->link, &done);
	mutex_unlock(&p->lock);

	/* Off the quarantine list: nobody else touches these now. */
	list_for_each_entry(c, &done, link)
		mrpool_chunk_zero(c);

	mutex_lock(&p->lock);
	list_for_each_entry_safe(c, tmp, &done, link) {
		c->free_since = jiffies;
		p->nr_quarantined--;
		mrpool_put_free(c);
		released++;
	}
	more = !list_empty(&p->quarantine);
	mutex_unlock(&p->lock);

	if (more)
		schedule_delayed_work(&p->quarantine_work,
				      MRPOOL_QUARANTINE_POLL);
	if (released)
		mrpool_trim_arm();
	/* module_exit cancels this work synchronously, so this is safe. */
	while (released--)
		module_put(THIS_MODULE);
}

/* Give back chunks free for idle_trim_sec, oldest first, above the floor. */
static void mrpool_trim_fn(struct work_struct *work)
{
	struct mrpool_pool *p = &mrpool_pool;
	unsigned int sec = READ_ONCE(mrpool_idle_trim_sec);
	unsigned long floor = mrpool_floor_chunks();
	unsigned long expiry, next = 0;
	struct mrpool_chunk *c, *tmp;
	unsigned int trimmed = 0;
	LIST_HEAD(victims);
	int nid;

	if (!sec)
		return;

	mutex_lock(&p->lock);
	for (nid = 0; nid < nr_node_ids; nid++) {
		list_for_each_entry_safe_reverse(c, tmp, &p->free[nid], link) {
			if (p->nr_total <= floor)
				break;
			expiry = c->free_since + sec * HZ;
			if (time_before(jiffies, expiry)) {
				if (!next || time_before(expiry, next))
					next = expiry;
				break;
			}
			list_move(&c->link, &victims);
			mrpool_chunk_account(c, false);
			p->nr_free--;
			trimmed++;
		}
	}
	/* Counted as they leave the totals: deregistration below is slow. */
	atomic64_add(trimmed, &mrpool_stats.trims);
	mutex_unlock(&p->lock);

	list_for_each_entry_safe(c, tmp, &victims, link) {
		list_del_init(&c->link);
		if (mrpool_ib_chunk_removing(c)) {
			mrpool_chunk_destroy(c, p->chunk_pages);
			continue;
		}
		/* An MR may still reach its pages: never free them. */
		atomic64_inc(&mrpool_stats.retired);
		pr_warn("chunk %#lx kept: an RDMA MR may still reach it\n",
			page_to_pfn(c->pages[0]));
	}

	if (next)
		schedule_delayed_work(&p->trim_work,
				      max_t(long, (long)(next - jiffies), 1));
}

static bool mrpool_trim_wanted(void)
{
	struct mrpool_pool *p = &mrpool_pool;
	bool above;

	if (!READ_ONCE(mrpool_idle_trim_sec))
		return false;
	mutex_lock(&p->lock);
	above = p->nr_free && p->nr_total > mrpool_floor_chunks();
	mutex_unlock(&p->lock);
	return above;
}

/* Chunks became free: make sure a trim run is due idle_trim_sec from now. */
static void mrpool_trim_arm(void)
{
	if (mrpool_trim_wanted())
		schedule_delayed_work(&mrpool_pool.trim_work,
				      READ_ONCE(mrpool_idle_trim_sec) * HZ);
}

/* idle_trim_sec changed: run now; the worker re-arms for the next expiry. */
void mrpool_pool_kick_trim(void)
{
	if (mrpool_trim_wanted())
		mod_delayed_work(system_wq, &mrpool_pool.trim_work, 0);
}

void mrpool_pool_snapshot(struct mrpool_snapshot *snap)
{
	struct mrpool_pool *p = &mrpool_pool;

	mutex_lock(&p->lock);
	snap->nr_total = p->nr_total;
	snap->nr_free = p->nr_free;
	snap->nr_used = p->nr_used;
	snap->nr_quarantined = p->nr_quarantined;
	memcpy(snap->blocks, p->blocks, sizeof(snap->blocks));
	mutex_unlock(&p->lock);
}

static void mrpool_pool_free_all(void)
{
	struct mrpool_pool *p = &mrpool_pool;
	struct mrpool_chunk *c, *tmp;

	int nid;

	mutex_lock(&p->lock);
	for (nid = 0; nid < nr_node_ids; nid++) {
		list_for_each_entry_safe(c, tmp, &p->free[nid], link) {
			list_del(&c->link);
			mrpool_chunk_account(c, false);
			p->nr_free--;
			if (mrpool_ib_chunk_removing(c)) {
				mrpool_chunk_destroy(c, p->chunk_pages);
				continue;
			}
			/* An MR may still reach its pages: never free them. */
			atomic64_inc(&mrpool_stats.retired);
			pr_warn("chunk %#lx kept: an RDMA MR may still reach it\n",
				page_to_pfn(c->pages[0]));
		}
	}
	/* Quarantined chunks hold the module, used ones an open file. */
	WARN_ON(p->nr_total);
	mutex_unlock(&p->lock);
}

/* Geometry and workers; the pool starts empty (see mrpool_pool_prefill). */
int mrpool_pool_init(void)
{
	struct mrpool_pool *p = &mrpool_pool;
	int nid;

	p->free = kcalloc(nr_node_ids, sizeof(*p->free), GFP_KERNEL);
	if (!p->free)
		return -ENOMEM;
	for (nid = 0; nid < nr_node_ids; nid++)
		INIT_LIST_HEAD(&p->free[nid]);
	p->chunk_size = (size_t)mrpool_chunk_kb * SZ_1K;
	p->chunk_order = get_order(p->chunk_size);
	p->chunk_pages = 1U << p->chunk_order;
	INIT_DELAYED_WORK(&p->trim_work, mrpool_trim_fn);
	INIT_DELAYED_WORK(&p->quarantine_work, mrpool_quarantine_fn);
	return 0;
}

/**
 * mrpool_pool_prefill - allocate the pool_mb floor
 *
 * Runs after the ib_core client has seen the devices present at load, so
 * the chunks land on their node and are registered as they come.
 *
 * Return: 0, or -ENOMEM with every chunk given back.
 */
int mrpool_pool_prefill(void)
{
	struct mrpool_pool *p = &mrpool_pool;
	int nid = mrpool_pool_node();
	unsigned long i, floor;
	struct mrpool_chunk *c;

	floor = mrpool_floor_chunks();
	for (i = 0; i < floor; i++) {
		c = mrpool_chunk_alloc(nid, false);
		if (!c) {
			pr_err("pool_mb=%u: could not allocate chunk %lu of %lu\n",
			       mrpool_pool_mb, i + 1, floor);
			mrpool_pool_free_all();
			return -ENOMEM;
		}
		mrpool_ib_chunk_added(c);
		mutex_lock(&p->lock);
		mrpool_chunk_account(c, true);
		list_add_tail(&c->link, &p->free[c->nid]);
		p->nr_free++;
		mutex_unlock(&p->lock);
		cond_resched();
	}
	atomic64_add(floor, &mrpool_stats.grows);
	return 0;
}

void mrpool_pool_exit(void)
{
	struct mrpool_pool *p = &mrpool_pool;

	cancel_delayed_work_sync(&p->trim_work);
	cancel_delayed_work_sync(&p->quarantine_work);
	mrpool_pool_free_all();
	kfree(p->free);
	p->free = NULL;
}

/**
 * mrpool_pool_retire - take a used chunk out of the pool for good
 * @c: a USED chunk on no list, that an RDMA MR may still reach (a kernel
 *	buffer whose MR could not be invalidated or deregistered)
 *
 * Leaves the pool's totals and is counted in stats/retired; its pages are
 * intentionally never freed nor reused.
 */
void mrpool_pool_retire(struct mrpool_chunk *c)
{
	struct mrpool_pool *p = &mrpool_pool;

	mutex_lock(&p->lock);
	p->nr_used--;
	mrpool_chunk_account(c, false);
	mutex_unlock(&p->lock);
	atomic64_inc(&mrpool_stats.retired);
	pr_warn("chunk %#lx retired: an RDMA MR may still reach it\n",
		page_to_pfn(c->pages[0]));
}
