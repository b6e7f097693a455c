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
 * fork are), and counted as pinned memory of the child (below), not to
 * the pool; never pinned by the module, registered or zeroed for reuse.
 * The parent's VMA, its slice and the slice's registrations are left as
 * they were. The copy holds no slice reference: a FREE or close by the
 * parent returns the chunks whatever the child still maps.
 *
 * The whole copy is mapped into the child at once, from that open
 * (mrpool_forkcopy_install()): every page is in the child's RSS
 * (RssFile, as a fault of it would count it) from the fork on, so the
 * memory a copy holds is seen where the OOM killer looks and goes when
 * it kills the child, touched or not. The child's writes stay its own;
 * a page whose entry was zapped since (below) is mapped again by the
 * fault handler.
 *
 * The copy counts as pinned memory of the child's mm
 * (mrpool_forkcopy_charge()): in its pinned_vm, against the forking
 * task's RLIMIT_MEMLOCK, unless that task has CAP_IPC_LOCK or a cgroup
 * pool quota bounds it instead of its user's limits (quota_mode quota,
 * quota.c: then in a count of the mm's own against that quota's limit),
 * as it bounded the slice; it goes with the copy, when the child's mm
 * unmaps the last of it or is torn down.
 * Nothing of it is a count of the forking user's: a child that exited
 * while another user holds its mm (a read of its /proc/<pid>/cmdline
 * stuck on a FUSE page) keeps only memory of its own, in its RSS and its
 * memory cgroup, and the user's limits as they were before the fork.
 *
 * What can still hold copy pages out of the child's RSS, until it
 * touches them again: a zap of its entries that leaves the VMA -- its
 * own MADV_DONTNEED, or the revocation of the slice when the parent
 * FREEs it or exits, which zaps every VMA of the slice's file range,
 * copies included (revoke.c) -- and the pieces of a VMA the child
 * partly unmapped, freed with the last piece. Each stays within the
 * child's pinned_vm, hence its RLIMIT_MEMLOCK, and its memory cgroup:
 * exactly what any process may hold out of its RSS with an RDMA
 * registration (ib_umem_get() pins pages into pinned_vm per mm, and a
 * MADV_DONTNEED of the range leaves them pinned), so a user forking many
 * children gets no more than it gets by registering in many processes.
 *
 * A copy that cannot be made (no memory, past RLIMIT_MEMLOCK,
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
 * mem_sem -- and its limit is the parent's. On every supported kernel
 * the child's VMA is already in its mm's tree when open runs (6.1.192,
 * 6.12 and 7.3 call open after storing it in the tree and before linking
 * it to its file and copy_page_range(); 6.1 before the stable backport of
 * "fork: defer linking file vma until vma is fully initialized" called
 * it after both), so the entries installed here are torn down with the
 * child's mm however its fork ends, and copy_page_range() copies nothing
 * into the range: the parent's VMA is neither VM_MIXEDMAP nor anonymous.
 * No Kbuild probe is needed for it.
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
#include <linux/lockdep.h>
#include <linux/highmem.h>
#include <linux/sched/signal.h>
#include <linux/capability.h>
#include <linux/user_namespace.h>
#include <linux/hashtable.h>
#include <linux/spinlock.h>

/* What the child's VMA (and its pieces) holds; vm_private_data. */
struct mrpool_fork_copy {
	struct kref ref;		/* one per VMA */
	/* The mm the copy is mapped in: compared only, never dereferenced. */
	const struct mm_struct *mm;
	unsigned long pgoff;		/* file offset of pages[0], in pages */
	unsigned long nr_pages;
	struct page **pages;		/* kvcalloc()ed, nr_pages */
	/*
	 * The mm charged nr_pages (mmgrab()ed: the child's) -- in its
	 * pinned_vm, or in @under_quota's count -- or NULL: not charged
	 * (CAP_IPC_LOCK), or not yet.
	 */
	struct mm_struct *charged;
	struct mrpool_forkcopy_mm *under_quota;
};

/*
 * The copies of one child mm made below a cgroup pool quota
 * (mrpool_forkcopy_charge()): their pages, bounded by the quota's limit
 * as RLIMIT_MEMLOCK bounds a pinned_vm. Keyed by the mm, which every
 * copy counted here holds (mmgrab()); freed with its last page.
 * mrpool_forkcopy_mms_lock guards the table and the counts.
 */
struct mrpool_forkcopy_mm {
	struct hlist_node node;
	const struct mm_struct *mm;
	unsigned long pages;
};

static DEFINE_HASHTABLE(mrpool_forkcopy_mms, 6);
static DEFINE_SPINLOCK(mrpool_forkcopy_mms_lock);

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
 * A copy is memory the kernel cannot reclaim or swap: pinned memory of
 * the child's mm, as an RDMA registration's pages are of theirs (VmPin
 * in /proc/<pid>/status). Unless the forking task has CAP_IPC_LOCK, it
 * is charged to @mm's pinned_vm against that task's RLIMIT_MEMLOCK
 * (which the child inherits), so that forks cannot multiply a small
 * slice into memory no limit sees: each process up to its limit, as
 * mlock() allows, and the memory cgroup (GFP_KERNEL_ACCOUNT) over all of
 * them; the copy is in the child's RSS as well (mrpool_forkcopy_install()),
 * so each such process is as visible to the OOM killer as its size.
 *
 * pinned_vm, not locked_vm: locked_vm is mlock()'s count of VM_LOCKED
 * ranges, kept by munmap() and mremap() themselves under mmap_lock held
 * for write, and a VM_DONTEXPAND VMA is never VM_LOCKED (mlock() skips
 * VM_SPECIAL ones); taking the copy back out of it would be ours to do
 * in vm_ops->close, which munmap() may run with mmap_lock downgraded to
 * read, racing another's plain update. pinned_vm is atomic, is what
 * ib_umem_get() counts a registration in against the same
 * RLIMIT_MEMLOCK (so the child's own registrations and its copies share
 * one limit), and is given back here whatever lock the caller holds.
 *
 * Below a cgroup pool quota with a limit (quota_mode quota) the quota
 * takes RLIMIT_MEMLOCK's place, as it did for the slices: a container
 * keeps a few MiB of memlock (Kubernetes never raises it), and holding
 * the copy to that would give the child of a process its quota let hold
 * 64 MiB a SIGBUS for what the parent may hold. Each child mm's copies
 * are then counted on their own (struct mrpool_forkcopy_mm), not in its
 * pinned_vm -- which ib_umem_get() holds to RLIMIT_MEMLOCK, and copies
 * there would refuse every registration of the child's own -- and held
 * to the lowest limit of the quotas above the forking task: per process,
 * as RLIMIT_MEMLOCK was, so a parent mapping one slice many times cannot
 * make a child's copies exceed what the quota grants. Not the quota's
 * usage (the copy is not pool memory, and a parent using more than half
 * its quota could not fork); the memory cgroup, which GFP_KERNEL_ACCOUNT
 * charges, is the bound over all children.
 *
 * Not a per-user count: the copy lives and dies with the child's mm, and
 * a count of its user would outlive the child wherever another task
 * holds that mm (a read of /proc/<pid>/cmdline stuck on a FUSE page can
 * hold any process's): another user could keep the owner's count full,
 * and its next forks refused, long after the child had exited.
 * Return: 0, or -ENOMEM past the limit.
 */
static int mrpool_forkcopy_charge_quota(struct mrpool_fork_copy *fc,
					struct mm_struct *mm, u64 limit)
{
	unsigned long max = min_t(u64, limit >> PAGE_SHIFT, ULONG_MAX);
	struct mrpool_forkcopy_mm *new, *e;
	int ret = 0;

	/* @new is freed below unless it became @mm's entry */
	new = mrpool_kzalloc(sizeof(*new), GFP_KERNEL_ACCOUNT);
	if (!new)
		return -ENOMEM;
	spin_lock(&mrpool_forkcopy_mms_lock);
	hash_for_each_possible(mrpool_forkcopy_mms, e, node, (unsigned long)mm)
		if (e->mm == mm)
			break;
	if (!e) {
		swap(e, new);
		e->mm = mm;
		hash_add(mrpool_forkcopy_mms, &e->node, (unsigned long)mm);
	}
	/* the limit may have been lowered since the count's last copy */
	if (e->pages > max || fc->nr_pages > max - e->pages) {
		ret = -ENOMEM;
		if (!e->pages) {
			hash_del(&e->node);
			new = e;
		}
	} else {
		e->pages += fc->nr_pages;
	}
	spin_unlock(&mrpool_forkcopy_mms_lock);
	kfree(new);
	if (ret)
		return ret;
	mmgrab(mm);
	fc->charged = mm;
	fc->under_quota = e;
	return 0;
}

static int mrpool_forkcopy_charge(struct mrpool_fork_copy *fc,
				  struct mm_struct *mm)
{
	unsigned long limit = rlimit(RLIMIT_MEMLOCK) >> PAGE_SHIFT;
	u64 quota;
	s64 pinned;

	if (ns_capable_noaudit(&init_user_ns, CAP_IPC_LOCK))
		return 0;
	if (mrpool_quota_covers(&quota))
		return mrpool_forkcopy_charge_quota(fc, mm, quota);
	pinned = atomic64_add_return(fc->nr_pages, &mm->pinned_vm);
	if ((u64)pinned > limit) {
		atomic64_sub(fc->nr_pages, &mm->pinned_vm);
		return -ENOMEM;
	}
	mmgrab(mm);
	fc->charged = mm;
	return 0;
}

static void mrpool_forkcopy_uncharge(struct mrpool_fork_copy *fc)
{
	struct mrpool_forkcopy_mm *e = fc->under_quota;

	if (!fc->charged)
		return;
	if (e) {
		spin_lock(&mrpool_forkcopy_mms_lock);
		e->pages -= fc->nr_pages;
		if (e->pages)
			e = NULL;
		else
			hash_del(&e->node);
		spin_unlock(&mrpool_forkcopy_mms_lock);
		kfree(e);
		fc->under_quota = NULL;
	} else {
		atomic64_sub(fc->nr_pages, &fc->charged->pinned_vm);
	}
	mmdrop(fc->charged);
	fc->charged = NULL;
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
	if (mrpool_forkcopy_charge(fc, vma->vm_mm))
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
 * Map every page of the new copy @fc into the child's @vma now, rather
 * than at each first touch: the copy is then in the child's RSS from the
 * fork on (vm_insert_pages() counts each page as a fault of it would,
 * MM_FILEPAGES, and the zap at the child's exit or unmap takes it out
 * again). Called from vm_ops->open inside dup_mmap(), with the child's
 * mmap_lock held for write: vm_insert_pages() sets VM_MIXEDMAP (it
 * checks that mmap_lock cannot be taken for read; 6.3+'s vm_flags_set()
 * asserts it held for write and, 6.4+, write-locks the VMA,
 * vma_start_write(), as dup_mmap() does clearing VM_LOCKED on it); it is
 * cleared again here, for the entries are of ordinary refcounted pages,
 * as a fault maps them, and a VM_MIXEDMAP VMA would have its entries
 * copied into a grandchild by copy_page_range() -- the child's own pages
 * shared with it, on top of the grandchild's copy mapped here. A failure
 * to map a page (no memory for a page table) leaves it to the fault
 * handler, as before.
 */
static void mrpool_forkcopy_install(struct vm_area_struct *vma,
				    struct mrpool_fork_copy *fc)
{
	unsigned long left = fc->nr_pages;

	/* not mmap_assert_write_locked(): its dump_mm() is not exported */
	lockdep_assert_held_write(&vma->vm_mm->mmap_lock);
	vm_insert_pages(vma, vma->vm_start, fc->pages, &left);
	mrpool_vm_flags_clear(vma, VM_MIXEDMAP);
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
	struct mrpool_fork_copy *fc = mrpool_forkcopy_make(vma, s, src);

	mrpool_forkcopy_set(vma, fc);
	if (fc)
		mrpool_forkcopy_install(vma, fc);
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
