// SPDX-License-Identifier: GPL-2.0
/*
 * Whole chunks as huge folios of a private tmpfs (i915's gemfs pattern).
 *
 * Why: since 6.5 GUP-fast refuses writable FOLL_LONGTERM pins of folios
 * that are neither anonymous, shmem nor hugetlb (gup_fast_folio_allowed()).
 * A chunk of plain pages has no mapping, so ibv_reg_mr of a slice took the
 * slow path (page-table walk under mmap_lock): 1.19x what THP anonymous
 * memory costs on 6.12. A PMD folio in a shmem file's page cache is pinned
 * by GUP-fast like anonymous memory, on every kernel.
 *
 * Each chunk is one file of chunk_size bytes on a kernel-internal tmpfs
 * mounted huge=always: never in a mount namespace, never reachable from
 * userspace, no size limit (the pool's own limits apply). One mount per
 * memory node, mpol=prefer:N, so the folio lands on the node asked for.
 * The file's mapping is unevictable (kernel MRs pin its pages; never
 * swapped) and allocates without __GFP_MOVABLE and without direct reclaim:
 * a chunk that cannot have a free PMD block at once is left to the page
 * allocator path in pool.c, which compacts.
 *
 * The pool holds one folio reference and the page cache holds one per page
 * (checked at allocation), so a chunk is idle at 1 + nr_pages references
 * (mrpool_shmem_busy()). Slices' VMAs stay on the client's map file: the
 * folio's mapping is not the VMA's file, so rmap walks (reclaim, migration,
 * memory failure) do not find these mappings. The pool's reference is what
 * makes that safe, and it is load-bearing: it makes every split
 * (can_split_folio()), migration (folio_ref_freeze()) and eviction
 * (mapping_evict_folio()) of the folio fail, as for the pool's plain
 * pages; the folio stays whole, mapped and in its file until the pool
 * lets go of it. The VMAs also have no memory policy (mmap.c), so NUMA
 * balancing leaves them alone.
 *
 * Folios are allocated on the module's own workqueue: page cache insertion
 * charges the memcg of current->mm, and pool memory belongs to no cgroup of
 * whoever happened to grow the pool (the charge would outlive that slice).
 * A caller under PF_MEMALLOC or in a NOIO/NOFS scope gets plain pages
 * instead, allocated in its own context: the worker would not inherit the
 * scope, and waiting for its GFP_KERNEL allocations could wait for the
 * caller's own reclaim. That caller is a kernel-buffer borrower on a
 * reclaim or writeback path, which mrpool_kapi.h asks to mark itself so;
 * the locks it meets on the way (the pool's, mrpool_ib_lock, the
 * devices') are never held across an allocation that enters IO or FS
 * reclaim (ib.h). A borrower that does not mark its path gets no such
 * promise.
 */
#include "mrpool.h"

#include <linux/fs.h>
#include <linux/file.h>
#include <linux/mm.h>
#include <linux/mount.h>
#include <linux/nodemask.h>
#include <linux/pagemap.h>
#include <linux/huge_mm.h>
#include <linux/shmem_fs.h>
#include <linux/slab.h>

/* One mount per node id with memory at load; NULL: plain pages there. */
static struct vfsmount **mrpool_shmem_mnt;
/* WQ_MEM_RECLAIM: a flush from a reclaim-safe workqueue must not wait on
 * a queue without a rescuer (check_flush_dependency()).
 */
static struct workqueue_struct *mrpool_shmem_wq;

static struct vfsmount *mrpool_shmem_mount(int nid)
{
	struct file_system_type *type;
	char opts[48];

	/* tmpfs is built in: no module reference to drop. */
	type = get_fs_type("tmpfs");
	if (!type)
		return ERR_PTR(-ENODEV);
	/* The option parser writes into its string: a buffer, not a literal. */
	if (IS_ENABLED(CONFIG_NUMA))
		snprintf(opts, sizeof(opts), "huge=always,mpol=prefer:%d", nid);
	else
		strscpy(opts, "huge=always", sizeof(opts));
	return vfs_kern_mount(type, SB_KERNMOUNT, type->name, opts);
}

/**
 * mrpool_shmem_init - mount the private tmpfs, one per memory node
 *
 * Only when whole chunks are single PMD folios (pmd_map, chunk_kb of one
 * PMD) and shmem_chunks is set. A node whose mount fails gets plain pages.
 *
 * Return: 0, or -ENOMEM.
 */
int mrpool_shmem_init(void)
{
	struct vfsmount *mnt;
	int nid;

	if (!mrpool_shmem_chunks || !mrpool_pmd_map ||
	    mrpool_pool.chunk_order != MRPOOL_PMD_ORDER ||
	    !IS_ENABLED(CONFIG_TRANSPARENT_HUGEPAGE) ||
	    !has_transparent_hugepage())
		return 0;
	mrpool_shmem_wq = alloc_workqueue("mrpool_shmem",
					  WQ_UNBOUND | WQ_MEM_RECLAIM, 0);
	if (!mrpool_shmem_wq)
		return -ENOMEM;
	mrpool_shmem_mnt = kcalloc(nr_node_ids, sizeof(*mrpool_shmem_mnt),
				   GFP_KERNEL);
	if (!mrpool_shmem_mnt) {
		destroy_workqueue(mrpool_shmem_wq);
		mrpool_shmem_wq = NULL;
		return -ENOMEM;
	}
	for_each_node_state(nid, N_MEMORY) {
		mnt = mrpool_shmem_mount(nid);
		if (IS_ERR(mnt)) {
			pr_warn("node %d: no huge tmpfs (%ld), chunks of plain pages\n",
				nid, PTR_ERR(mnt));
			continue;
		}
		mrpool_shmem_mnt[nid] = mnt;
	}
	return 0;
}

/* Files of retired chunks keep their mount (a reference each) until fput. */
void mrpool_shmem_exit(void)
{
	if (!mrpool_shmem_mnt)
		return;
	/* One RCU grace period for all (NULL entries are skipped). */
	kern_unmount_array(mrpool_shmem_mnt, nr_node_ids);
	kfree(mrpool_shmem_mnt);
	mrpool_shmem_mnt = NULL;
	destroy_workqueue(mrpool_shmem_wq);
	mrpool_shmem_wq = NULL;
}

struct mrpool_shmem_alloc {
	struct work_struct work;
	struct vfsmount *mnt;
	struct file *file;	/* out: the chunk's file, or NULL */
	struct page *head;	/* out: its PMD folio's head, one reference */
};

static void mrpool_shmem_alloc_fn(struct work_struct *work)
{
	struct mrpool_shmem_alloc *a =
		container_of(work, struct mrpool_shmem_alloc, work);
	struct address_space *mapping;
	struct folio *folio;
	struct file *file;
	struct page *page;

	file = shmem_file_setup_with_mnt(a->mnt, "mrpool-chunk",
					 mrpool_pool.chunk_size,
					 MRPOOL_SHMEM_NORESERVE);
	if (IS_ERR(file))
		return;
	mapping = file->f_mapping;
	mapping_set_unevictable(mapping);
	mapping_set_gfp_mask(mapping, (GFP_KERNEL & ~__GFP_DIRECT_RECLAIM) |
				      __GFP_NOWARN);
	/* Read at offset 0: a new folio, zeroed by shmem, huge if possible. */
	page = shmem_read_mapping_page_gfp(mapping, 0, mapping_gfp_mask(mapping));
	if (IS_ERR(page))
		goto put_file;
	folio = page_folio(page);
	/*
	 * Not a PMD folio (no free PMD block at once), or references other
	 * than ours and the page cache's: the caller uses plain pages.
	 */
	if (folio_order(folio) != MRPOOL_PMD_ORDER ||
	    folio_ref_count(folio) != 1 + folio_nr_pages(folio))
		goto put_page;
	a->file = file;
	a->head = page;
	return;

put_page:
	put_page(page);
put_file:
	fput(file);
}

/**
 * mrpool_shmem_chunk - a zeroed PMD folio of a new shmem file
 * @nid: node wanted, NUMA_NO_NODE for the caller's
 * @filep: receives the file on success
 *
 * May sleep. The folio is on @nid: the mount prefers it, and a folio
 * that landed elsewhere is given back.
 *
 * Return: the folio's head page (one reference), or NULL: the caller
 * builds the chunk of plain pages.
 */
struct page *mrpool_shmem_chunk(int nid, struct file **filep)
{
	struct mrpool_shmem_alloc a = {};

	if (!mrpool_shmem_mnt || mrpool_should_fail(&mrpool_fail_shmem))
		return NULL;
	if ((current->flags & PF_MEMALLOC) ||
	    current_gfp_context(GFP_KERNEL) != GFP_KERNEL)
		return NULL;
	if (nid == NUMA_NO_NODE)
		nid = numa_mem_id();
	if (nid < 0 || nid >= nr_node_ids || !mrpool_shmem_mnt[nid])
		return NULL;
	a.mnt = mrpool_shmem_mnt[nid];
	INIT_WORK_ONSTACK(&a.work, mrpool_shmem_alloc_fn);
	queue_work(mrpool_shmem_wq, &a.work);
	flush_work(&a.work);
	destroy_work_on_stack(&a.work);
	if (a.head && page_to_nid(a.head) != nid) {
		mrpool_shmem_put(a.head, a.file);
		return NULL;
	}
	*filep = a.file;
	return a.head;
}

/*
 * Someone besides the pool and the page cache holds the folio. A folio
 * that is no longer whole and in its file cannot happen (see the top of
 * this file); were it to, the chunk must never be reused: busy for good.
 */
bool mrpool_shmem_busy(struct page *head, struct file *file)
{
	struct folio *folio = page_folio(head);

	if (WARN_ON_ONCE(folio_order(folio) != MRPOOL_PMD_ORDER ||
			 folio->mapping != file->f_mapping))
		return true;
	return folio_ref_count(folio) != 1 + folio_nr_pages(folio);
}

/* Drop the pool's reference and the file: the folio goes with the file. */
void mrpool_shmem_put(struct page *head, struct file *file)
{
	put_page(head);
	fput(file);
}
