// SPDX-License-Identifier: GPL-2.0
/*
 * Revocation: the owner takes its memory back. A FREE, or the release of
 * the owner's /dev/mrpool file (its last close, or the owner exiting),
 * revokes the slice: every userspace mapping of it -- the owner's VMAs,
 * which all hang off the client's map file (mapfile.c), and the mmaps of
 * its dma-bufs in any process, which hang off each dma-buf's file
 * (dmabuf.c) -- is zapped, and a later fault on one gets SIGBUS. The
 * chunks then go back to the pool at once: zeroed and free, or, where a
 * page is still pinned (a pipe holding vmsplice()d pages, an MR, a
 * direct I/O), quarantined until the pin goes (pool.c). Only kernel
 * importers of a dma-buf with a mapped attachment keep the chunks in the
 * slice until their last attachment map is gone: their scatter-gather
 * tables hold no page reference the pool could see.
 *
 * Whose charge what stays held becomes is tenant.c's rule; who may hold
 * it is decided here, and since a dma-buf's mapping cannot be pinned
 * (dmabuf.c: frame numbers, no pages), that can be told:
 *  - a chunk still pinned once the mappings are gone was pinned through
 *    the owner's own mapping of the slice, the only one with pages (its
 *    MR, its vmsplice(), its O_DIRECT): it stays the owner's charge, but
 *    for an exiting owner's leftovers (a pin dropped a moment later, its
 *    uverbs file closing after this one), which go to the orphans within
 *    their share -- also where importers' attachments are mapped: those
 *    hold no page, so only the owner's pin can keep such a chunk past
 *    their last unmap (in quarantine);
 *  - the other chunks, kept for importers' mapped attachments, are the
 *    importers': who maps one at the revocation counts (each map records
 *    its mapper's user, dmabuf.c, and drops it at its unmap; a failed map
 *    records nothing). The one user other than the owner's that does
 *    takes them within its share, past it the orphans within theirs;
 *    when several such users do (or a kernel thread), the orphans within
 *    their share; when only the owner's own maps are left, they stay the
 *    owner's until its unmap (the orphans', within their share, if it is
 *    exiting);
 * and what has no room stays the owner's (stats/orphans_full). So the
 * owner cannot push more than a share on any other user, and another
 * user leaves the owner charged only through an attachment it maps
 * while it is at its share and the orphans are full, until its unmap.
 * What still cannot be told: where the owner and one other user both
 * have attachments mapped at the revocation, the other user is charged
 * for the chunks until the last of them is unmapped, the owner's included
 * (within its share).
 *
 * Locking: s->mem_sem orders the fault path against the revocation. A
 * fault takes it for read (under mmap_lock), checks s->revoked, and
 * returns its page locked (VM_FAULT_LOCKED), so the page stays locked
 * until the core has installed the entry. The revocation sets s->revoked
 * with mem_sem held for write: once it has it, every fault that passed
 * the check holds its page's lock, and none starts any more. Locking and
 * unlocking each folio of the slice then waits those out, and only then
 * are the mappings zapped: no entry can be installed after the zap. A
 * slice no fault ever reached (s->faulted, set by each fault under
 * mem_sem, so read here under it too) has no such page, and the wait,
 * a lock of every folio (262,144 for a GiB of order-0 blocks), is
 * skipped: a slice only handed to importers, or mapped and never touched.
 * A dma-buf's mapping (dmabuf.c) inserts frame numbers, not pages: its
 * fault holds mem_sem for read across the insert itself, which the
 * revocation's hold for write waits out, so it needs neither the folio
 * lock nor the mark.
 * Order: mmap_lock -> mem_sem -> folio lock, or the page table lock (a
 * dma-buf's fault); mem_sem is never held
 * across a zap, export_lock is (dmabuf.c), and nothing there takes
 * mmap_lock. An attachment map records itself under export_lock with
 * mem_sem held for read (mem_sem -> export_lock); nothing takes mem_sem
 * under export_lock.
 */
#include "mrpool.h"

#include <linux/mm.h>
#include <linux/pagemap.h>
#include <linux/fs.h>

/**
 * mrpool_slice_mem_read - hold a slice's pages against revocation
 * @s: the slice, referenced by the caller
 *
 * Return: true with @s->mem_sem held for read, to be dropped with
 * mrpool_slice_mem_done(); false, holding nothing, once @s is revoked.
 */
bool mrpool_slice_mem_read(struct mrpool_slice *s)
{
	down_read(&s->mem_sem);
	if (likely(!s->revoked))
		return true;
	up_read(&s->mem_sem);
	return false;
}

void mrpool_slice_mem_done(struct mrpool_slice *s)
{
	up_read(&s->mem_sem);
}

/*
 * Wait out the faults that passed the revoked check: each holds its
 * page's folio locked until its entry is installed (see above).
 */
static void mrpool_slice_wait_faults(struct mrpool_slice *s)
{
	struct folio *folio, *last = NULL;
	unsigned int i, j;

	for (i = 0; i < s->nr_chunks; i++) {
		for (j = 0; j < mrpool_pool.chunk_pages; j++) {
			folio = page_folio(s->chunkv[i]->pages[j]);
			if (folio == last)
				continue;
			last = folio;
			folio_lock(folio);
			folio_unlock(folio);
		}
		cond_resched();
	}
}

/*
 * Move the charge of @chunks as the rule above says: @to, the one other
 * user that mapped an attachment, or NULL; @many: several users;
 * @owner_exiting from the file's release by the exiting owner. @all:
 * every chunk of @chunks -- those kept for the importers (whose @to and
 * @many these are), or those the caller found pinned at the revocation
 * and set apart (the owner's: @to NULL, @many false) -- else only those
 * of @chunks still pinned (the owner's too). The caller owns the list,
 * or holds export_lock over the slice's own.
 *
 * Return: chunks that stayed the owner's for want of room, to be reported
 * with mrpool_slice_report_kept() once no lock is held.
 */
static unsigned long mrpool_slice_recharge(struct list_head *chunks,
					   bool all, struct mrpool_tenant *to,
					   bool many, bool owner_exiting)
{
	struct mrpool_chunk *c, *tmp;
	unsigned long kept;
	LIST_HEAD(pinned);

	if (!many && !to && !owner_exiting)
		return 0;

	list_for_each_entry_safe(c, tmp, chunks, link)
		if (all || mrpool_chunk_busy(c))
			list_move_tail(&c->link, &pinned);
	if (list_empty(&pinned))
		return 0;
	kept = mrpool_chunks_recharge(&pinned, many ? NULL : to, true);
	list_splice_tail(&pinned, chunks);
	return kept;
}

/* Count and announce chunks a revocation left charged to their owner. */
static void mrpool_slice_report_kept(unsigned long kept)
{
	if (!kept)
		return;
	atomic64_add(kept, &mrpool_stats.orphans_full);
	mrpool_nl_pool_event(MRPOOL_EVENT_ORPHANS_FULL, min(kept, U32_MAX), 0);
}

/*
 * The slice's chunks go back to the pool; those still pinned are the
 * owner's, orphaned within the orphans' share if it is exiting.
 */
static void mrpool_slice_give_back(struct mrpool_slice *s,
				   bool owner_exiting)
{
	struct mrpool_client *client = s->client;
	unsigned long kept;
	LIST_HEAD(chunks);

	mutex_lock(&client->lock);
	list_splice_init(&s->chunks, &chunks);
	s->returned = true;
	client->bytes -= s->length;
	mutex_unlock(&client->lock);

	kept = mrpool_slice_recharge(&chunks, false, NULL, false,
				     owner_exiting);
	mrpool_pool_return(&chunks);
	atomic64_inc(&mrpool_stats.frees);
	mrpool_slice_report_kept(kept);
}

/**
 * mrpool_slice_unkeep - an importer unmapped an attachment of @s
 * @s: the slice, referenced by the caller's dma-buf
 *
 * Called when the count of mapped attachments fell to zero. If a
 * revocation kept the chunks for the importers, they go back now (their
 * charge was moved at the revocation), not when the last revoked mapping
 * or descriptor of the slice goes. May sleep: dma-buf unmap context.
 */
void mrpool_slice_unkeep(struct mrpool_slice *s)
{
	bool kept;

	mutex_lock(&s->export_lock);
	kept = s->kept;
	s->kept = false;
	mutex_unlock(&s->export_lock);
	if (kept)
		mrpool_slice_give_back(s, false);
}

/**
 * mrpool_slice_revoke - take a slice's memory back from every mapping
 * @s: a slice its owner just freed (FREE, or its file's release): out of
 *	the id xarray, referenced by the caller
 * @map_file: the owner's map file, whose mapping holds the owner's VMAs
 * @owner_exiting: the owner process is closing its file on its way out
 *
 * Runs where the owner's reference is dropped: process context, no lock
 * held, no mmap_lock. May sleep (zaps, zeroing).
 */
void mrpool_slice_revoke(struct mrpool_slice *s, struct file *map_file,
			 bool owner_exiting)
{
	struct mrpool_chunk *c, *tmp;
	struct mrpool_tenant *to;
	bool many, faulted;
	unsigned long kept;
	LIST_HEAD(busy);

	down_write(&s->mem_sem);
	s->revoked = true;
	faulted = s->faulted;
	up_write(&s->mem_sem);
	if (faulted)
		mrpool_slice_wait_faults(s);

	unmap_mapping_range(map_file->f_mapping,
			    (loff_t)s->id << MRPOOL_TOKEN_SHIFT, s->length, 1);
	mrpool_dmabuf_zap(s);

	/*
	 * No map of an attachment starts once revoked: dma_maps only falls
	 * from here. A mapped one keeps the chunks until the last is
	 * unmapped (mrpool_slice_unkeep(), which waits for export_lock to
	 * see @kept), charged to the importers who map one now, but for
	 * those pinned now: the owner's own pins, which outlive no unmap.
	 */
	mutex_lock(&s->export_lock);
	if (atomic_read(&s->dma_maps)) {
		list_for_each_entry_safe(c, tmp, &s->chunks, link)
			if (mrpool_chunk_busy(c))
				list_move_tail(&c->link, &busy);
		kept = mrpool_slice_recharge(&busy, true, NULL, false,
					     owner_exiting);
		to = mrpool_dmabuf_importer(s, &many);
		kept += mrpool_slice_recharge(&s->chunks, true, to, many,
					      owner_exiting);
		list_splice_tail(&busy, &s->chunks);
		s->kept = true;
		mutex_unlock(&s->export_lock);
		mrpool_slice_report_kept(kept);
		return;
	}
	mutex_unlock(&s->export_lock);
	mrpool_slice_give_back(s, owner_exiting);
}
