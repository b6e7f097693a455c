// SPDX-License-Identifier: GPL-2.0
/*
 * A fork child's private copy of a slice mapping (MRPOOL_ALLOC_FORK_COPY).
 *
 * The mapping of such a slice is not VM_DONTCOPY, so dup_mmap() gives the
 * child a VMA of it and calls its vm_ops->open, the child's mm and the
 * parent's both write-locked. That open (mmap.c) hands the VMA here when
 * it lies in an mm other than the slice owner's: a slice is mapped only
 * in its owner's mm (mrpool_mmap()) and split or moved only inside the mm
 * that maps it, so another mm is a fork's new one. The VMA then becomes a
 * copy: the bytes its range of the slice holds now, in order-0 pages
 * allocated with GFP_KERNEL_ACCOUNT -- charged to the memory cgroup of
 * the forking task, which the child starts in unless clone3() put it
 * elsewhere (as the kernel's own copies of DMA-pinned anonymous pages at
 * fork are), and counted as locked memory (below), not to the pool;
 * never pinned by the module, registered or zeroed for reuse. The
 * child's faults map those pages, so its writes stay its own, and the
 * parent's VMA, its slice and the slice's registrations are left as they
 * were. The copy holds no slice reference: a FREE or close by the
 * parent returns the chunks whatever the child still maps.
 *
 * The copy counts as locked memory (mrpool_forkcopy_charge()): in the
 * locked_vm of the forking task's tenant (tenant.c; in a user namespace
 * that of its outermost owner, which the pool charges of every uid in it
 * draw on too), against the forking task's RLIMIT_MEMLOCK, unless it has
 * CAP_IPC_LOCK.
 *
 * A copy that cannot be made (no memory, no tenant, past RLIMIT_MEMLOCK,
 * a fatal signal, a page with a hardware error, or the debugfs knob
 * fail_fork_copy) leaves the VMA with no copy: every access of the child
 * to it is SIGBUS, never the pool's pages. A copy is shared by the pieces
 * of its VMA (split, mremap() in the child) and freed with the last; a
 * fork by the child gives the grandchild a copy of the child's copy, the
 * same way.
 *
 * Context: dup_mmap() runs in the forking task (current is the parent,
 * with the parent's credentials and rlimits; the child's task is not
 * running yet), holding both mms' mmap_lock for write and no spinlock:
 * the copy may sleep -- allocate with GFP_KERNEL, take the slice's
 * mem_sem and a tenant reference -- and what it charges is the parent's.
 *
 * Locking: the slice's mem_sem for read while its pages are copied, as a
 * fault holds it (mmap_lock, then mem_sem: revoke.c), and the allocator's.
 * A revoked slice is not copied: its chunks went back to the pool. The
 * source pages cannot go away otherwise: the parent's VMA holds the slice
 * (or the copy), and it cannot be unmapped while dup_mmap() holds the
 * parent's mmap_lock.
 * Other threads of the parent and RDMA may still write the slice while it
 * is copied, as they may an anonymous page the kernel copies at fork.
 */
#include "mrpool.h"

#include <linux/mm.h>
#include <linux/highmem.h>
#include <linux/sched/signal.h>
#include <linux/capability.h>
#include <linux/user_namespace.h>

/* What the child's VMA (and its pieces) holds; vm_private_data. */
struct mrpool_fork_copy {
	struct kref ref;		/* one per VMA */
	/* The mm the copy is mapped in: compared only, never dereferenced. */
	const struct mm_struct *mm;
	unsigned long pgoff;		/* file offset of pages[0], in pages */
	unsigned long nr_pages;
	struct page **pages;		/* kvcalloc()ed, nr_pages */
	/*
	 * The tenant whose locked_vm holds nr_pages (a reference), or NULL:
	 * not charged (CAP_IPC_LOCK), or not yet.
	 */
	struct mrpool_tenant *tenant;
};

static const struct vm_operations_struct mrpool_forkcopy_vm_ops;

static void mrpool_forkcopy_free_pages(struct page **pages, unsigned long nr)
{
	unsigned long i;

	for (i = 0; i < nr; i++)
		if (pages[i])
			put_page(pages[i]);
	kvfree(pages);
}

/*
 * A copy is memory the kernel cannot reclaim or swap, and it is not in
 * the child's RSS until touched: locked memory, as the pool's own. Unless
 * the task has CAP_IPC_LOCK, it is charged against RLIMIT_MEMLOCK to the
 * forking task's tenant (tenant.c), the locked_vm the pool charges of
 * that task's uid draw on -- shared by every uid of a user namespace, as
 * a per-kuid count (current_user()) would not be -- so that forks cannot
 * multiply a small slice into memory no limit and no OOM score sees.
 * The count outlives a child that exited while another task holds its
 * mm (get_task_mm(): a read of its /proc/<pid>/cmdline stuck on a FUSE
 * page), until that task lets go: a per-mm count (pinned_vm) would not,
 * but would let one user pin RLIMIT_MEMLOCK per process, unswappable and
 * out of RSS until touched, so unseen by the OOM killer; this bound
 * is kept, and the held count is the smaller harm.
 * Return: 0, or -ENOMEM past the limit or with no tenant to be had.
 */
static int mrpool_forkcopy_charge(struct mrpool_fork_copy *fc)
{
	unsigned long limit = rlimit(RLIMIT_MEMLOCK) >> PAGE_SHIFT;
	struct mrpool_tenant *t;

	if (ns_capable_noaudit(&init_user_ns, CAP_IPC_LOCK))
		return 0;
	t = mrpool_tenant_get();
	if (!t)
		return -ENOMEM;
	if (mrpool_tenant_lock_pages(t, fc->nr_pages, limit)) {
		mrpool_tenant_put(t);
		return -ENOMEM;
	}
	fc->tenant = t;
	return 0;
}

static void mrpool_forkcopy_uncharge(struct mrpool_fork_copy *fc)
{
	if (!fc->tenant)
		return;
	mrpool_tenant_unlock_pages(fc->tenant, fc->nr_pages);
	mrpool_tenant_put(fc->tenant);
	fc->tenant = NULL;
}

static void mrpool_forkcopy_release(struct kref *ref)
{
	struct mrpool_fork_copy *fc = container_of(ref, struct mrpool_fork_copy,
						   ref);

	mrpool_forkcopy_free_pages(fc->pages, fc->nr_pages);
	mrpool_forkcopy_uncharge(fc);
	kfree(fc);
}

/*
 * The page at file offset @pgoff of what the parent's VMA maps: the slice
 * @s, or the copy @src when the parent is itself a child.
 */
static struct page *mrpool_forkcopy_src(struct mrpool_slice *s,
					struct mrpool_fork_copy *src,
					unsigned long pgoff)
{
	unsigned long base;

	if (src)
		return src->pages[pgoff - src->pgoff];
	base = (unsigned long)s->id << (MRPOOL_TOKEN_SHIFT - PAGE_SHIFT);
	return mrpool_slice_page(s, pgoff - base);
}

/*
 * Copy what the parent maps over @vma's range into fresh pages. Return:
 * the copy, or NULL when it could not be made.
 */
static struct mrpool_fork_copy *
mrpool_forkcopy_make(struct vm_area_struct *vma, struct mrpool_slice *s,
		     struct mrpool_fork_copy *src)
{
	unsigned long i, nr = vma_pages(vma);
	struct mrpool_fork_copy *fc;
	struct page *from;

	if (mrpool_should_fail(&mrpool_fail_fork_copy))
		return NULL;
	fc = mrpool_kzalloc(sizeof(*fc), GFP_KERNEL_ACCOUNT);
	if (!fc)
		return NULL;
	fc->pages = mrpool_kvcalloc(nr, sizeof(*fc->pages), GFP_KERNEL_ACCOUNT);
	if (!fc->pages)
		goto free_fc;
	kref_init(&fc->ref);
	fc->mm = vma->vm_mm;
	fc->pgoff = vma->vm_pgoff;
	fc->nr_pages = nr;
	if (mrpool_forkcopy_charge(fc))
		goto free_pages;
	for (i = 0; i < nr; i++) {
		/* A fork being killed is undone anyway: stop copying. */
		if (fatal_signal_pending(current))
			goto free_pages;
		from = mrpool_forkcopy_src(s, src, vma->vm_pgoff + i);
		/* Never read a page with a hardware error (a machine check). */
		if (PageHWPoison(from))
			goto free_pages;
		/* Fail the copy, not OOM-kill another process for it. */
		fc->pages[i] = alloc_page(GFP_KERNEL_ACCOUNT | __GFP_NOWARN |
					  __GFP_RETRY_MAYFAIL);
		if (!fc->pages[i])
			goto free_pages;
		copy_highpage(fc->pages[i], from);
		cond_resched();
	}
	return fc;

free_pages:
	mrpool_forkcopy_free_pages(fc->pages, nr);
	mrpool_forkcopy_uncharge(fc);
free_fc:
	kfree(fc);
	return NULL;
}

/*
 * Turn the fork child's @vma, a copy of the parent's VMA of @s or of the
 * copy @src, into a VMA of a copy of its own (or of none: SIGBUS).
 */
static void mrpool_forkcopy_set(struct vm_area_struct *vma,
				struct mrpool_fork_copy *fc)
{
	if (fc) {
		atomic64_inc(&mrpool_stats.fork_copies);
		atomic64_add(fc->nr_pages << PAGE_SHIFT,
			     &mrpool_stats.fork_copy_bytes);
	} else {
		atomic64_inc(&mrpool_stats.fork_copy_failures);
	}
	/* Not yet visible to any task: the child's mm is being built. */
	vma->vm_private_data = fc;
	vma->vm_ops = &mrpool_forkcopy_vm_ops;
}

static void mrpool_forkcopy_adopt(struct vm_area_struct *vma,
				  struct mrpool_slice *s,
				  struct mrpool_fork_copy *src)
{
	mrpool_forkcopy_set(vma, mrpool_forkcopy_make(vma, s, src));
}

/**
 * mrpool_forkcopy_open - vm_ops->open of a slice VMA: is it a fork's?
 * @vma: the new VMA (a split piece, a moved one, or a fork child's copy)
 * @s: the slice it maps (vm_private_data)
 *
 * Return: true if @vma is a fork child's copy of a mapping of a
 * MRPOOL_ALLOC_FORK_COPY slice, now a VMA of a private copy (it holds no
 * slice reference); false if it maps the slice as before.
 */
bool mrpool_forkcopy_open(struct vm_area_struct *vma, struct mrpool_slice *s)
{
	if (!s->fork_copy || vma->vm_mm == s->client->mm)
		return false;
	/*
	 * Revoked (revoke.c: FREEd or its owner's file released while the
	 * parent still maps it): its chunks went back to the pool, maybe to
	 * another owner already. No copy: the child gets SIGBUS, as the
	 * parent does. Else the revocation waits until the copy is made.
	 */
	if (!mrpool_slice_mem_read(s)) {
		mrpool_forkcopy_set(vma, NULL);
		return true;
	}
	mrpool_forkcopy_adopt(vma, s, NULL);
	mrpool_slice_mem_done(s);
	return true;
}

static void mrpool_forkcopy_vm_open(struct vm_area_struct *vma)
{
	struct mrpool_fork_copy *fc = vma->vm_private_data;

	if (!fc)
		return;		/* a piece of a failed copy: SIGBUS too */
	if (vma->vm_mm != fc->mm) {
		/* The child forks in turn: the grandchild's own copy. */
		mrpool_forkcopy_adopt(vma, NULL, fc);
		return;
	}
	kref_get(&fc->ref);
}

static void mrpool_forkcopy_vm_close(struct vm_area_struct *vma)
{
	struct mrpool_fork_copy *fc = vma->vm_private_data;

	if (fc)
		kref_put(&fc->ref, mrpool_forkcopy_release);
}

static vm_fault_t mrpool_forkcopy_vm_fault(struct vm_fault *vmf)
{
	struct mrpool_fork_copy *fc = vmf->vma->vm_private_data;
	struct page *page;

	if (!fc || vmf->pgoff < fc->pgoff ||
	    vmf->pgoff - fc->pgoff >= fc->nr_pages)
		return VM_FAULT_SIGBUS;
	page = fc->pages[vmf->pgoff - fc->pgoff];
	get_page(page);
	vmf->page = page;
	return 0;
}

static const struct vm_operations_struct mrpool_forkcopy_vm_ops = {
	.open = mrpool_forkcopy_vm_open,
	.close = mrpool_forkcopy_vm_close,
	.fault = mrpool_forkcopy_vm_fault,
#ifdef CONFIG_NUMA
	/* Pages the pool does not hold, yet not on the LRU: no migration. */
	.get_policy = mrpool_vm_get_policy,
#endif
};
