// SPDX-License-Identifier: GPL-2.0
/*
 * The pool of chunks: allocation from the page allocator (with fallback to
 * smaller orders), growth on demand up to max_mb, return with pin checks,
 * quarantine of chunks someone still holds, zeroing before reuse, and the
 * idle trim worker.
 *
 * Invariants: every chunk on a free list (two per NUMA node, the node of
 * all its pages: whole chunks and fragmented ones) is zeroed, charged to
 * nobody, and each of its pages has refcount 1 (the pool's own); the
 * kernel MR cache (ib_*.c) takes no page reference. A chunk leaves a
 * slice only when no VMA maps it; if a page is still referenced then (an
 * MR pinning it), the chunk waits in quarantine, still charged to its
 * tenant and holding a module reference, until the quarantine worker sees
 * the references gone.
 *
 * A chunk with a hardware-poisoned page is never zeroed nor handed on:
 * memory_failure() cannot help with pool pages (it finds no rmap for the
 * slices' mappings and cannot split a chunk the pool holds), so the pool
 * looks for the kernel's mark wherever a chunk changes hands -- return,
 * quarantine check, take, growth, release -- and retires such a chunk.
 */
#include "mrpool.h"
#include "ib.h"

#include <linux/gfp.h>
#include <linux/mm.h>
#include <linux/highmem.h>
#include <linux/slab.h>
#include <linux/module.h>
#include <linux/jiffies.h>
#include <linux/kmemleak.h>

/*
 * Seconds between tries to replace fragmented free chunks with whole ones:
 * the first soon after one becomes free, doubling while high-order memory
 * stays short.
 */
#define MRPOOL_DEFRAG_FIRST	1
#define MRPOOL_DEFRAG_MAX	64

struct mrpool_pool mrpool_pool = {
	.lock = __MUTEX_INITIALIZER(mrpool_pool.lock),
	.chunks = LIST_HEAD_INIT(mrpool_pool.chunks),
	.totals_seq = SEQCNT_ZERO(mrpool_pool.totals_seq),
};

struct mrpool_stats mrpool_stats;

/*
 * The totals readers get without the pool lock (mrpool_pool_snapshot())
 * are a copy, published under a seqcount by the holder that changed them,
 * as it unlocks: one write section per hold, a few stores, however many
 * counters the hold changed and in however many steps (a take moves
 * chunks from free to used node by node, a defrag swaps a chunk's blocks,
 * a return counts a chunk out of used and into free or quarantine), so a
 * reader never sees a step in between and never waits for more than
 * those stores.
 *
 * Not the counters themselves under the seqcount: their changes are
 * spread over a dozen sites, several inside loops over chunks that scan
 * pages for poison or arm work (mrpool_take_list(), the quarantine worker,
 * trim); each would need its own write section with preemption off
 * around every step that must look atomic, and readers would spin for as
 * long as the longest of them.
 *
 * Published only when the copy differs from the counters, compared here
 * rather than marked dirty where they change: the many holds that change
 * nothing (the trim check after every return, the workers' first look at
 * their lists) then write nothing, leaving the readers' cache lines alone,
 * and there is no mark to forget at a new site.
 */
static bool mrpool_totals_changed(const struct mrpool_pool *p)
{
	return p->totals.nr_total != p->nr_total ||
	       p->totals.nr_free != p->nr_free ||
	       p->totals.nr_used != p->nr_used ||
	       p->totals.nr_quarantined != p->nr_quarantined ||
	       memcmp(p->totals.blocks, p->blocks, sizeof(p->blocks));
}

/*
 * Drop the pool lock, publishing the totals if this hold changed them. A
 * plain seqcount_t, not seqcount_mutex_t, whose readers take the mutex on
 * PREEMPT_RT when they meet a write: these readers never take the pool
 * lock (debugfs hold_pool_lock sleeps holding it). Writers are serialised
 * by the pool lock, so only they write the copy and may read it plainly.
 */
static void mrpool_pool_unlock(void)
{
	struct mrpool_pool *p = &mrpool_pool;

	lockdep_assert_held(&p->lock);
	if (mrpool_totals_changed(p)) {
		preempt_disable();
		write_seqcount_begin(&p->totals_seq);
		p->totals.nr_total = p->nr_total;
		p->totals.nr_free = p->nr_free;
		p->totals.nr_used = p->nr_used;
		p->totals.nr_quarantined = p->nr_quarantined;
		memcpy(p->totals.blocks, p->blocks, sizeof(p->totals.blocks));
		write_seqcount_end(&p->totals_seq);
		preempt_enable();
	}
	mutex_unlock(&p->lock);
}

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
 * Pages of a chunk are either order-0 pages (split blocks), the subpages
 * of one PMD-order compound page, or those of one shmem folio (c->file);
 * only heads and order-0 pages carry the pool's reference, tails are
 * reached through their head.
 */
static void mrpool_chunk_destroy(struct mrpool_chunk *c, unsigned int nr_pages)
{
	unsigned int i, step;
	struct page *page;

	if (c->file) {
		mrpool_shmem_put(c->pages[0], c->file);
		goto free;
	}
	/* Step over tails first: freeing a head turns them into plain pages. */
	for (i = 0; i < nr_pages; i += step) {
		page = c->pages[i];
		step = PageHead(page) ? 1U << compound_order(page) : 1;
		put_page(page);
	}
free:
	kvfree(c->pages);
	kfree(c);
}

/*
 * Growth leaves the rest of the machine 1/32 of its memory: a chunk is
 * taken only while available memory (free plus reclaimable) stays above
 * that. The chunk's own pages are asked for with __GFP_NORETRY, but under
 * fragmentation they come page by page, and what follows a growth -- the
 * chunk's registration on every RDMA device (the driver's MR tables),
 * page tables, everyone else -- allocates with plain GFP_KERNEL: a pool
 * that took the last free pages made those call the OOM killer on
 * bystanders (mem_pressure_test).
 */
static bool mrpool_headroom(void)
{
	return si_mem_available() >
	       (long)(totalram_pages() / 32 + mrpool_pool.chunk_pages);
}

/*
 * One block of @order for @c. A PMD block is the whole chunk: from shmem
 * if it can (sets c->file; always on @nid, see shmem.c), else, like every
 * other block, from the page allocator.
 */
static struct page *mrpool_block_alloc(struct mrpool_chunk *c, int nid,
				       gfp_t gfp, unsigned int order, bool pmd)
{
	struct page *page = NULL;

	if (pmd)
		page = mrpool_shmem_chunk(nid, &c->file);
	if (!page)
		page = alloc_pages_node(nid, pmd ? gfp | __GFP_COMP : gfp,
					order);
	return page;
}

/*
 * A chunk of chunk_pages zeroed pages. A block of exactly PMD order stays
 * one compound page (a shmem folio where it can), so the fault handler can
 * map it with one PMD (the cost of pinning and unpinning follows the
 * number of mappings). Other
 * blocks are split, each page refcounted on its own. Under fragmentation
 * the chunk is assembled from smaller blocks, all on the node of the first
 * one, so a chunk has one node. Only @thisnode keeps the first on @nid.
 * @whole_only (the defrag worker) wants one block or nothing: it consumes
 * no failure knob, and fails while fail_high_order is set. Never retries
 * hard, never takes the machine's last memory (mrpool_headroom()):
 * callers turn failure into -ENOMEM.
 */
static struct mrpool_chunk *mrpool_chunk_alloc(int nid, bool thisnode,
					       bool whole_only)
{
	struct mrpool_pool *p = &mrpool_pool;
	gfp_t gfp = GFP_KERNEL | __GFP_ZERO | __GFP_NOWARN | __GFP_NORETRY;
	unsigned int order = p->chunk_order;
	unsigned int filled = 0, i;
	struct mrpool_chunk *c;
	struct page *page;
	bool pmd;

	if (!whole_only && mrpool_should_fail(&mrpool_fail_chunk_alloc))
		goto fail;
	if (!mrpool_headroom())
		goto fail;
	/* While the knob makes high orders fail, a whole chunk fails too. */
	if (whole_only && atomic_read(&mrpool_fail_high_order) > 0)
		return NULL;
	if (thisnode && nid != NUMA_NO_NODE)
		gfp |= __GFP_THISNODE;

	c = mrpool_kzalloc(sizeof(*c), GFP_KERNEL);
	if (!c)
		goto fail;
	INIT_LIST_HEAD(&c->link);
	c->pages = mrpool_kvcalloc(p->chunk_pages, sizeof(*c->pages),
				   GFP_KERNEL);
	if (!c->pages)
		goto free_chunk;

	while (filled < p->chunk_pages) {
		pmd = mrpool_pmd_map && order == MRPOOL_PMD_ORDER;
		if ((order && !whole_only &&
		     mrpool_should_fail(&mrpool_fail_high_order)) ||
		    mrpool_fail_alloc(PAGE_SIZE << order))
			page = NULL;
		else
			page = mrpool_block_alloc(c, nid, gfp, order, pmd);
		if (c->file) {
			/* A shmem folio is the whole chunk, never a part. */
			WARN_ON_ONCE(filled);
			break;
		}
		if (!page) {
			if (!order || whole_only)
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
		/*
		 * The fault path compares a folio's index with the file's
		 * size (6.12, and 6.1 stable): never leave the allocator's.
		 * Each block set here is a folio (the compound head, or a
		 * page of a split block); struct page has no index since
		 * 6.16 ("mm: rename page->index to page->__folio_index").
		 */
		for (i = 0; i < (1U << order); i++) {
			if (!i || !pmd)
				page_folio(page + i)->index = 0;
			c->pages[filled++] = page + i;
		}
		c->blocks[order]++;
	}
	if (c->file) {
		for (i = 0; i < p->chunk_pages; i++)
			c->pages[i] = page + i;
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
static void mrpool_chunk_release(struct mrpool_chunk *c);

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
 * its head, so its tails are skipped. Also for a revocation, which asks
 * whose charge its pinned chunks become (revoke.c).
 */
bool mrpool_chunk_busy(struct mrpool_chunk *c)
{
	unsigned int i, step;
	struct page *page;

	if (c->file)
		return mrpool_shmem_busy(c->pages[0], c->file);
	for (i = 0; i < mrpool_pool.chunk_pages; i += step) {
		page = c->pages[i];
		step = PageHead(page) ? 1U << compound_order(page) : 1;
		if (page_ref_count(page) != 1)
			return true;
	}
	return false;
}

/*
 * A page of @c is marked as hardware-poisoned: memory_failure() ran for it
 * (a machine check, a scrubber's report, an injection) and, for lack of an
 * rmap to our mappings and of a split, left it where it was. Zeroing it
 * would store to the bad lines, handing it on would give the next owner
 * SIGBUS or its NIC the poison. Racy, as every such test (hardware fails
 * at any time): it sees what was reported by now. 512 flag tests, under
 * the pool lock at a take: far less than zeroing the chunk.
 */
static bool mrpool_chunk_hwpoisoned(struct mrpool_chunk *c)
{
	unsigned int i;
	struct page *page;

	if (!IS_ENABLED(CONFIG_MEMORY_FAILURE))
		return false;
	for (i = 0; i < mrpool_pool.chunk_pages; i++) {
		page = c->pages[i];
		if (PageHWPoison(page))
			return true;
		if (PageHead(page) && mrpool_folio_hwpoisoned(page_folio(page)))
			return true;
	}
	return false;
}

/*
 * Caller holds the pool lock. @c, poisoned, leaves the totals like a trimmed
 * chunk (max_mb no longer counts it; its owner's charge, if any, is
 * already gone) and waits on the hwpoisoned list: the worker deregisters
 * and keeps it, never here (a return may run under mmap_lock or on a
 * kernel buffer's reclaim path, where no device wait belongs).
 */
static void mrpool_hwpoison_queue(struct mrpool_chunk *c)
{
	struct mrpool_pool *p = &mrpool_pool;

	lockdep_assert_held(&p->lock);
	mrpool_chunk_account(c, false);
	list_move_tail(&c->link, &p->hwpoisoned);
	schedule_work(&p->hwpoison_work);
}

/* One block of the chunk's order: contiguous, PMD-mapped if PMD-sized. */
bool mrpool_chunk_whole(const struct mrpool_chunk *c)
{
	return c->blocks[mrpool_pool.chunk_order] == 1;
}

static void mrpool_chunk_zero(struct mrpool_chunk *c)
{
	unsigned int i;

	for (i = 0; i < mrpool_pool.chunk_pages; i++)
		clear_highpage(c->pages[i]);
	atomic64_inc(&mrpool_stats.zeroed);
}

static void mrpool_defrag_arm(void);

/*
 * Caller holds the pool lock. @c becomes free, at the head of its node's
 * whole or fragmented list (most recently freed first).
 */
static void mrpool_put_free(struct mrpool_chunk *c)
{
	struct mrpool_pool *p = &mrpool_pool;

	c->state = MRPOOL_CHUNK_FREE;
	c->owner = 0;
	p->nr_free++;
	if (mrpool_chunk_whole(c)) {
		list_move(&c->link, &p->free[c->nid].whole);
		return;
	}
	list_move(&c->link, &p->free[c->nid].frag);
	p->nr_fragmented_free++;
	mrpool_defrag_arm();
}

/*
 * Move up to @nr chunks of @list (of node @nid) to @out, from the head.
 * A poisoned one met on the way leaves the pool instead.
 */
static unsigned int mrpool_take_list(unsigned int nr, struct list_head *list,
				     struct list_head *out)
{
	struct mrpool_pool *p = &mrpool_pool;
	struct mrpool_chunk *c, *tmp;
	unsigned int got = 0;

	list_for_each_entry_safe(c, tmp, list, link) {
		if (got == nr)
			break;
		if (unlikely(mrpool_chunk_hwpoisoned(c))) {
			p->nr_free--;
			if (!mrpool_chunk_whole(c))
				p->nr_fragmented_free--;
			mrpool_hwpoison_queue(c);
			continue;
		}
		c->state = MRPOOL_CHUNK_USED;
		list_move_tail(&c->link, out);
		got++;
	}
	return got;
}

/* Move up to @nr free chunks of node @nid to @out, whole ones first. */
static unsigned int mrpool_take_node(unsigned int nr, int nid,
				     struct list_head *out)
{
	struct mrpool_pool *p = &mrpool_pool;
	unsigned int got, frag;

	got = mrpool_take_list(nr, &p->free[nid].whole, out);
	frag = mrpool_take_list(nr - got, &p->free[nid].frag, out);
	got += frag;
	p->nr_fragmented_free -= frag;
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
 * it is still private: no trim can free it under the registration. The
 * page allocator hands out no poisoned page; one poisoned since is kept
 * out of the pool and ends the growth.
 */
static unsigned int mrpool_grow(unsigned int nr, int nid, bool thisnode,
				struct list_head *fresh)
{
	struct mrpool_chunk *c;
	unsigned int i;

	for (i = 0; i < nr; i++) {
		c = mrpool_chunk_alloc(nid, thisnode, false);
		if (!c)
			break;
		if (unlikely(mrpool_chunk_hwpoisoned(c))) {
			mrpool_chunk_release(c);
			break;
		}
		mrpool_ib_chunk_added(c);
		list_add_tail(&c->link, fresh);
	}
	atomic64_add(i, &mrpool_stats.grows);
	if (i < nr)
		mrpool_nl_pool_event(MRPOOL_EVENT_GROW_FAILED, nr - i, 0);
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

/*
 * Caller holds the pool lock. Chunks on @list were taken, never exposed.
 * Taken from the heads of the free lists in order, they go back from the
 * last, so every list is as it was: most recently freed first.
 */
static void mrpool_untake(struct list_head *list)
{
	struct mrpool_pool *p = &mrpool_pool;
	struct mrpool_chunk *c, *tmp;

	list_for_each_entry_safe_reverse(c, tmp, list, link) {
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
	mrpool_debug_hold_pool_lock();
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
	mrpool_pool_unlock();

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
		mrpool_pool_unlock();

		grown = mrpool_grow(want, nid, false, &fresh);

		mutex_lock(&p->lock);
		p->nr_growing -= want;
		mrpool_grown_used(&fresh, out);
		got += grown;
	}
	if (got < nr)
		goto fail;
	mrpool_pool_unlock();

	if (prefer) {
		list_for_each_entry(c, out, link)
			off += c->nid != nid;
		atomic64_add(off, &mrpool_stats.node_fallbacks);
	}
	return 0;

fail:
	mrpool_untake(out);
	mrpool_pool_unlock();
	mrpool_trim_arm();
	mrpool_nl_pool_event(MRPOOL_EVENT_EXHAUSTED, nr, 0);
	return -ENOMEM;
}

/* Bytes of quarantine that make an event; 0: no events. */
static u64 mrpool_quarantine_threshold(void)
{
	return div_u64(mrpool_max_bytes() *
		       READ_ONCE(mrpool_quarantine_event_pct), 100);
}

/*
 * Caller holds the pool lock, quarantine just changed. True once per
 * crossing of the threshold upwards: the caller sends the event after
 * unlocking. Falling below it re-arms.
 */
static bool mrpool_quarantine_crossed(u64 threshold)
{
	struct mrpool_pool *p = &mrpool_pool;
	bool above = threshold &&
		     mrpool_pool_bytes(p->nr_quarantined) >= threshold;

	lockdep_assert_held(&p->lock);
	if (above == p->quarantine_high)
		return false;
	p->quarantine_high = above;
	return above;
}

/**
 * mrpool_pool_quarantine_check - compare quarantine with a new threshold
 *
 * quarantine_event_pct was written: a threshold lowered under what is
 * quarantined now is a crossing, reported at once. Process context, the
 * pool lock not held.
 */
void mrpool_pool_quarantine_check(void)
{
	struct mrpool_pool *p = &mrpool_pool;
	u64 threshold = mrpool_quarantine_threshold();
	bool high;

	mutex_lock(&p->lock);
	high = mrpool_quarantine_crossed(threshold);
	mrpool_pool_unlock();
	if (high)
		mrpool_nl_pool_event(MRPOOL_EVENT_QUARANTINE_HIGH, 0, threshold);
}

static unsigned long mrpool_quarantine_wait(unsigned int level)
{
	return min_t(unsigned long, 1UL << level, MRPOOL_QUARANTINE_MAX_WAIT);
}

/* Caller holds the pool lock. Queue @c for a check after @level's wait. */
static void mrpool_quarantine_add(struct mrpool_chunk *c, unsigned int level)
{
	struct mrpool_pool *p = &mrpool_pool;

	level = min_t(unsigned int, level, MRPOOL_QUARANTINE_LEVELS - 1);
	c->q_level = level;
	c->q_due = jiffies + mrpool_quarantine_wait(level);
	list_move_tail(&c->link, &p->quarantine[level]);
}

/* Caller holds the pool lock. Run the worker when the first chunk is due. */
static void mrpool_quarantine_arm(void)
{
	struct mrpool_pool *p = &mrpool_pool;
	unsigned long due = 0, now = jiffies;
	struct mrpool_chunk *c;
	bool any = false;
	unsigned int i;

	for (i = 0; i < MRPOOL_QUARANTINE_LEVELS; i++) {
		c = list_first_entry_or_null(&p->quarantine[i],
					     struct mrpool_chunk, link);
		if (c && (!any || time_before(c->q_due, due))) {
			due = c->q_due;
			any = true;
		}
	}
	if (any)
		mod_delayed_work(system_wq, &p->quarantine_work,
				 time_after(due, now) ? due - now : 0);
}

/**
 * mrpool_pool_return - give chunks of a released slice back
 * @chunks: the slice's chunks; no VMA maps them any more
 *
 * May sleep (zeroing). Chunks whose pages are still referenced go to
 * quarantine instead, keep their charge and pin the module until the
 * references are gone; the others are zeroed, uncharged and free. A chunk
 * with a poisoned page is uncharged and retired, referenced or not:
 * memory_failure() may keep a reference on the page for good, and the
 * pool keeps the pages for good anyway, so no pin can reach a next owner.
 */
void mrpool_pool_return(struct list_head *chunks)
{
	struct mrpool_pool *p = &mrpool_pool;
	u64 threshold = mrpool_quarantine_threshold();
	struct mrpool_chunk *c, *tmp;
	bool high = false;

	list_for_each_entry_safe(c, tmp, chunks, link) {
		list_del_init(&c->link);
		if (unlikely(mrpool_chunk_hwpoisoned(c))) {
			mrpool_chunk_uncharge(c, false);
			mutex_lock(&p->lock);
			p->nr_used--;
			mrpool_hwpoison_queue(c);
			mrpool_pool_unlock();
			continue;
		}
		if (mrpool_chunk_busy(c)) {
			__module_get(THIS_MODULE);
			atomic64_inc(&mrpool_stats.quarantines);
			mrpool_chunk_quarantined(c);
			mutex_lock(&p->lock);
			c->state = MRPOOL_CHUNK_QUARANTINED;
			p->nr_used--;
			p->nr_quarantined++;
			mrpool_quarantine_add(c, 0);
			mrpool_quarantine_arm();
			high |= mrpool_quarantine_crossed(threshold);
			mrpool_pool_unlock();
			continue;
		}
		mrpool_chunk_zero(c);
		mrpool_chunk_uncharge(c, false);
		mutex_lock(&p->lock);
		c->free_since = jiffies;
		p->nr_used--;
		mrpool_put_free(c);
		mrpool_pool_unlock();
		cond_resched();
	}
	mrpool_trim_arm();
	if (high)
		mrpool_nl_pool_event(MRPOOL_EVENT_QUARANTINE_HIGH, 0, threshold);
}

/*
 * Check the quarantined chunks that are due, without the pool lock: each
 * level's list is in due order, so only those are visited. Free ones are
 * zeroed, uncharged and freed; busy ones wait twice as long next time;
 * poisoned ones, busy or not, are uncharged and retired.
 */
static void mrpool_quarantine_fn(struct work_struct *work)
{
	struct mrpool_pool *p = &mrpool_pool;
	struct mrpool_chunk *c, *tmp;
	unsigned int released = 0, i;
	LIST_HEAD(poisoned);
	LIST_HEAD(due);
	LIST_HEAD(done);
	u64 threshold;
	bool high;

	mutex_lock(&p->lock);
	for (i = 0; i < MRPOOL_QUARANTINE_LEVELS; i++) {
		list_for_each_entry_safe(c, tmp, &p->quarantine[i], link) {
			if (time_before(jiffies, c->q_due))
				break;
			list_move_tail(&c->link, &due);
		}
	}
	mrpool_pool_unlock();

	/* Off the lists (still counted as quarantined): nobody else looks. */
	list_for_each_entry_safe(c, tmp, &due, link) {
		atomic64_inc(&mrpool_stats.quarantine_checks);
		if (unlikely(mrpool_chunk_hwpoisoned(c))) {
			list_move_tail(&c->link, &poisoned);
			mrpool_chunk_uncharge(c, true);
			continue;
		}
		if (mrpool_chunk_busy(c))
			continue;
		list_move_tail(&c->link, &done);
		mrpool_chunk_zero(c);
		mrpool_chunk_uncharge(c, true);
		cond_resched();
	}

	mutex_lock(&p->lock);
	list_for_each_entry_safe(c, tmp, &due, link)
		mrpool_quarantine_add(c, c->q_level + 1);
	list_for_each_entry_safe(c, tmp, &done, link) {
		c->free_since = jiffies;
		p->nr_quarantined--;
		mrpool_put_free(c);
		released++;
	}
	list_for_each_entry_safe(c, tmp, &poisoned, link) {
		p->nr_quarantined--;
		mrpool_hwpoison_queue(c);
		released++;
	}
	mrpool_quarantine_arm();
	/*
	 * Quarantine only shrinks here, which re-arms the event; but the
	 * threshold may have been lowered under what is still quarantined:
	 * that is a crossing too, reported now.
	 */
	threshold = mrpool_quarantine_threshold();
	high = mrpool_quarantine_crossed(threshold);
	mrpool_pool_unlock();

	if (high)
		mrpool_nl_pool_event(MRPOOL_EVENT_QUARANTINE_HIGH, 0, threshold);

	if (released)
		mrpool_trim_arm();
	/* module_exit cancels this work synchronously, so this is safe. */
	while (released--)
		module_put(THIS_MODULE);
}

/*
 * Counted and logged: @c is out of the pool and its pages are never freed.
 * Nothing points at @c any more: kmemleak is told it is kept on purpose,
 * and as it still scans it, its page array and shmem file (with the file's
 * credentials) count as referenced too. @hwpoison: a page of it is
 * poisoned (freed, the page allocator would have to deal with it in a
 * compound page; the kernel itself never frees such pages either).
 */
static void mrpool_chunk_keep(struct mrpool_chunk *c, bool hwpoison)
{
	kmemleak_not_leak(c);
	atomic64_inc(&mrpool_stats.retired);
	if (hwpoison) {
		atomic64_inc(&mrpool_stats.hwpoison_retired);
		pr_warn("chunk %p retired: a page has a hardware memory error\n",
			c);
		return;
	}
	pr_warn("chunk %p retired: an RDMA MR may still reach it\n", c);
}

/*
 * @c has left the pool's totals: deregistered on every device and freed,
 * or kept for good when an MR may still reach its pages or one of them
 * is poisoned. May sleep.
 */
static void mrpool_chunk_release(struct mrpool_chunk *c)
{
	bool safe = mrpool_ib_chunk_removing(c);

	if (unlikely(mrpool_chunk_hwpoisoned(c)))
		mrpool_chunk_keep(c, true);
	else if (safe)
		mrpool_chunk_destroy(c, mrpool_pool.chunk_pages);
	else
		mrpool_chunk_keep(c, false);
}

/*
 * Poisoned chunks out of the totals (mrpool_hwpoison_queue()): off every
 * device, then kept. A work item of its own, as the trim's release.
 */
static void mrpool_hwpoison_fn(struct work_struct *work)
{
	struct mrpool_pool *p = &mrpool_pool;
	struct mrpool_chunk *c, *tmp;
	LIST_HEAD(list);

	mutex_lock(&p->lock);
	list_splice_init(&p->hwpoisoned, &list);
	mrpool_pool_unlock();

	list_for_each_entry_safe(c, tmp, &list, link) {
		list_del_init(&c->link);
		mrpool_chunk_release(c);
		cond_resched();
	}
}

/*
 * Caller holds the pool lock. Move chunks of @list free for idle_trim_sec
 * to @victims, oldest (the tail) first, while the pool is above its floor.
 * Return: how many; *@next is lowered to the next expiry left.
 */
static unsigned int mrpool_trim_list(struct list_head *list, unsigned int sec,
				     struct list_head *victims,
				     unsigned long *next)
{
	struct mrpool_pool *p = &mrpool_pool;
	unsigned long floor = mrpool_floor_chunks(), expiry;
	struct mrpool_chunk *c, *tmp;
	unsigned int trimmed = 0;

	list_for_each_entry_safe_reverse(c, tmp, list, link) {
		if (p->nr_total <= floor)
			break;
		expiry = c->free_since + sec * HZ;
		if (time_before(jiffies, expiry)) {
			if (!*next || time_before(expiry, *next))
				*next = expiry;
			break;
		}
		if (!mrpool_chunk_whole(c))
			p->nr_fragmented_free--;
		list_move(&c->link, victims);
		mrpool_chunk_account(c, false);
		p->nr_free--;
		trimmed++;
	}
	return trimmed;
}

/* Give back chunks free for idle_trim_sec above the floor, fragmented first. */
static void mrpool_trim_fn(struct work_struct *work)
{
	struct mrpool_pool *p = &mrpool_pool;
	unsigned int sec = READ_ONCE(mrpool_idle_trim_sec);
	struct mrpool_chunk *c, *tmp;
	unsigned int trimmed = 0;
	unsigned long next = 0;
	LIST_HEAD(victims);
	int nid;

	if (!sec)
		return;

	mutex_lock(&p->lock);
	for (nid = 0; nid < nr_node_ids; nid++)
		trimmed += mrpool_trim_list(&p->free[nid].frag, sec, &victims,
					    &next);
	for (nid = 0; nid < nr_node_ids; nid++)
		trimmed += mrpool_trim_list(&p->free[nid].whole, sec,
					    &victims, &next);
	/* Counted as they leave the totals: deregistration below is slow. */
	atomic64_add(trimmed, &mrpool_stats.trims);
	mrpool_pool_unlock();

	list_for_each_entry_safe(c, tmp, &victims, link) {
		list_del_init(&c->link);
		mrpool_chunk_release(c);
	}
	if (trimmed)
		mrpool_nl_pool_event(MRPOOL_EVENT_TRIM, trimmed, 0);

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
	mrpool_pool_unlock();
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

/**
 * mrpool_pool_snapshot - the pool's totals, without the pool lock
 * @snap: receives them
 *
 * The totals as the pool lock's last holder left them: all of one moment
 * (total == free + used + quarantined, and the blocks those chunks are
 * built of), possibly older than a change in progress under the lock.
 * Never sleeps nor takes a lock: anyone may ask (sysfs, QUERY, netlink
 * GET), as often as it likes, without slowing ALLOC or FREE.
 */
void mrpool_pool_snapshot(struct mrpool_snapshot *snap)
{
	struct mrpool_pool *p = &mrpool_pool;
	unsigned int seq;

	do {
		seq = read_seqcount_begin(&p->totals_seq);
		*snap = p->totals;
	} while (read_seqcount_retry(&p->totals_seq, seq));
}

/*
 * Replace fragmented free chunks by whole ones while the page allocator
 * has PMD-order blocks again (fragmentation passed, or fail_high_order
 * ran out): a slice made of them maps with huge entries and registers at
 * the cost a pool exists for. The oldest fragmented chunk of a node goes
 * first; the pool's size does not change.
 */
static void mrpool_defrag_fn(struct work_struct *work)
{
	struct mrpool_pool *p = &mrpool_pool;
	struct mrpool_chunk *c, *old;
	int nid;

	for (;;) {
		mutex_lock(&p->lock);
		for (nid = 0; nid < nr_node_ids; nid++)
			if (!list_empty(&p->free[nid].frag))
				break;
		mrpool_pool_unlock();
		if (nid == nr_node_ids) {
			WRITE_ONCE(p->defrag_wait, MRPOOL_DEFRAG_FIRST);
			return;
		}

		c = mrpool_chunk_alloc(nid, true, true);
		if (!c)
			break;
		mrpool_ib_chunk_added(c);

		mutex_lock(&p->lock);
		old = NULL;
		if (!list_empty(&p->free[nid].frag))
			old = list_last_entry(&p->free[nid].frag,
					      struct mrpool_chunk, link);
		if (old) {
			list_del_init(&old->link);
			mrpool_chunk_account(old, false);
			p->nr_free--;
			p->nr_fragmented_free--;
			mrpool_chunk_account(c, true);
			c->free_since = jiffies;
			mrpool_put_free(c);
			c = NULL;
		}
		mrpool_pool_unlock();

		/* Taken meanwhile: whichever chunk is left over goes. */
		if (!old)
			old = c;
		else
			atomic64_inc(&mrpool_stats.defrags);
		mrpool_chunk_release(old);
		cond_resched();
	}
	/* Still no whole chunk: try again later, less often. */
	WRITE_ONCE(p->defrag_wait, min_t(unsigned int, p->defrag_wait * 2,
					 MRPOOL_DEFRAG_MAX));
	schedule_delayed_work(&p->defrag_work, READ_ONCE(p->defrag_wait) * HZ);
}

/* High-order memory is back (a test knob cleared): defrag now. */
void mrpool_pool_kick_defrag(void)
{
	struct mrpool_pool *p = &mrpool_pool;

	WRITE_ONCE(p->defrag_wait, MRPOOL_DEFRAG_FIRST);
	mod_delayed_work(system_wq, &p->defrag_work, 0);
}

/*
 * Test knob fail_init_after_prefill (main.c): the trim and defrag work
 * prefill armed is due now, so that it runs while the failed load
 * unwinds, unless the unwind stops it first.
 */
void mrpool_pool_hurry(void)
{
	struct mrpool_pool *p = &mrpool_pool;

	if (delayed_work_pending(&p->defrag_work))
		mod_delayed_work(system_wq, &p->defrag_work, 0);
	if (delayed_work_pending(&p->trim_work))
		mod_delayed_work(system_wq, &p->trim_work, 0);
}

/* Caller holds the pool lock: a fragmented chunk is free. */
static void mrpool_defrag_arm(void)
{
	struct mrpool_pool *p = &mrpool_pool;

	schedule_delayed_work(&p->defrag_work, READ_ONCE(p->defrag_wait) * HZ);
}

/* Caller holds the pool lock: @list's chunks leave the totals, to @out. */
static void mrpool_free_list_take_all(struct list_head *list,
				      struct list_head *out)
{
	struct mrpool_pool *p = &mrpool_pool;
	struct mrpool_chunk *c, *tmp;

	list_for_each_entry_safe(c, tmp, list, link) {
		if (!mrpool_chunk_whole(c))
			p->nr_fragmented_free--;
		mrpool_chunk_account(c, false);
		p->nr_free--;
		list_move_tail(&c->link, out);
	}
}

/* Every free chunk, released without the pool lock (devices may wait). */
static void mrpool_pool_free_all(void)
{
	struct mrpool_pool *p = &mrpool_pool;
	struct mrpool_chunk *c, *tmp;
	LIST_HEAD(all);
	int nid;

	mutex_lock(&p->lock);
	for (nid = 0; nid < nr_node_ids; nid++) {
		mrpool_free_list_take_all(&p->free[nid].whole, &all);
		mrpool_free_list_take_all(&p->free[nid].frag, &all);
	}
	/* Quarantined chunks hold the module, used ones a client. */
	WARN_ON(p->nr_total);
	mrpool_pool_unlock();

	list_for_each_entry_safe(c, tmp, &all, link) {
		list_del_init(&c->link);
		mrpool_chunk_release(c);
	}
}

/* Geometry and workers; the pool starts empty (see mrpool_pool_prefill). */
int mrpool_pool_init(void)
{
	struct mrpool_pool *p = &mrpool_pool;
	unsigned int i;
	int nid;

	p->free = kcalloc(nr_node_ids, sizeof(*p->free), GFP_KERNEL);
	if (!p->free)
		return -ENOMEM;
	for (nid = 0; nid < nr_node_ids; nid++) {
		INIT_LIST_HEAD(&p->free[nid].whole);
		INIT_LIST_HEAD(&p->free[nid].frag);
	}
	for (i = 0; i < MRPOOL_QUARANTINE_LEVELS; i++)
		INIT_LIST_HEAD(&p->quarantine[i]);
	INIT_LIST_HEAD(&p->hwpoisoned);
	INIT_WORK(&p->hwpoison_work, mrpool_hwpoison_fn);
	p->chunk_size = (size_t)mrpool_chunk_kb * SZ_1K;
	p->chunk_order = get_order(p->chunk_size);
	p->chunk_pages = 1U << p->chunk_order;
	p->defrag_wait = MRPOOL_DEFRAG_FIRST;
	INIT_DELAYED_WORK(&p->trim_work, mrpool_trim_fn);
	INIT_DELAYED_WORK(&p->quarantine_work, mrpool_quarantine_fn);
	INIT_DELAYED_WORK(&p->defrag_work, mrpool_defrag_fn);
	if (mrpool_shmem_init()) {
		kfree(p->free);
		p->free = NULL;
		return -ENOMEM;
	}
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
		c = mrpool_chunk_alloc(nid, false, false);
		if (!c) {
			pr_err("pool_mb=%u: could not allocate chunk %lu of %lu\n",
			       mrpool_pool_mb, i + 1, floor);
			mrpool_pool_free_all();
			return -ENOMEM;
		}
		mrpool_ib_chunk_added(c);
		mutex_lock(&p->lock);
		mrpool_chunk_account(c, true);
		mrpool_put_free(c);
		mrpool_pool_unlock();
		cond_resched();
	}
	atomic64_add(floor, &mrpool_stats.grows);
	return 0;
}

/*
 * Module exit, before the ib side goes: nothing re-arms these workers (no
 * file is open, no chunk is quarantined or lent, the knobs and
 * idle_trim_sec are closed), and after this no chunk is registered or
 * deregistered but by mrpool_ib_exit() and mrpool_pool_exit(). Poisoned
 * chunks already queued are retired now, while their devices are there.
 */
void mrpool_pool_quiesce(void)
{
	struct mrpool_pool *p = &mrpool_pool;

	cancel_delayed_work_sync(&p->trim_work);
	cancel_delayed_work_sync(&p->defrag_work);
	flush_work(&p->hwpoison_work);
}

void mrpool_pool_exit(void)
{
	struct mrpool_pool *p = &mrpool_pool;

	cancel_delayed_work_sync(&p->trim_work);
	cancel_delayed_work_sync(&p->quarantine_work);
	cancel_delayed_work_sync(&p->defrag_work);
	flush_work(&p->hwpoison_work);
	mrpool_pool_free_all();
	mrpool_shmem_exit();
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
	mrpool_pool_unlock();
	mrpool_chunk_keep(c, false);
}
