// SPDX-License-Identifier: GPL-2.0
/*
 * Mapping slices into processes. Only the owning file's token, the exact
 * length, shared and writable: a private mapping would make an RDMA pin
 * break copy-on-write and pin a copy. Each VMA holds a slice reference;
 * a FREE, or the file's release, revokes the slice (revoke.c): its VMAs
 * are zapped, fault with SIGBUS from then on, and its memory goes back
 * to the pool at once, or once a pin goes. VMAs hold the
 * client's map file (mapfile.c), not the device file, and fault only in
 * the owner's mm: MADV_DOFORK can make a child inherit a VMA, never its
 * pages. A slice allocated with MRPOOL_ALLOC_FORK_COPY is not VM_DONTCOPY:
 * a fork child's VMA of it becomes a private copy (forkcopy.c).
 *
 * Pages are ordinary refcounted pages handed out by the fault handler
 * (MAP_POPULATE or the first touch, or the pin itself, fault them in).
 * When the page is part of a PMD-order compound chunk and the address is
 * 2 MiB aligned, the core fault code (finish_fault -> do_set_pmd) maps the
 * whole chunk with one PMD, as it does for huge page-cache folios; GUP then
 * pins one entry per 2 MiB. No vm_insert_pages(): it would set
 * VM_MIXEDMAP, and huge mappings of a VM_MIXEDMAP VMA are treated as
 * special (not refcounted) when zapped.
 */
#include "mrpool.h"

#include <linux/mm.h>
#include <linux/mman.h>
#include <linux/huge_mm.h>
#include <linux/pagemap.h>
#include <linux/file.h>
#include <linux/task_work.h>
#include <linux/rcupdate.h>

/* A slice put was ever deferred to task work: see mrpool_mmap_exit(). */
static bool mrpool_put_deferred;

static void mrpool_vm_open(struct vm_area_struct *vma)
{
	struct mrpool_slice *s = vma->vm_private_data;

	/* A fork child's, of a FORK_COPY slice: a copy, not the slice. */
	if (mrpool_forkcopy_open(vma, s))
		return;
	/* A split or a moved VMA: one more mapping of the slice. */
	kref_get(&s->ref);
	atomic_inc(&s->maps);
}

static void mrpool_slice_put_work(struct callback_head *head)
{
	struct mrpool_slice *s = container_of(head, struct mrpool_slice,
					      put_work);
	struct file *file = s->put_file;

	mrpool_slice_put(s);
	/*
	 * If this is the file's last reference, __fput() (which drops the
	 * module) is queued behind this callback. If not, another holder
	 * may unload the module before this returns: mrpool_mmap_exit().
	 */
	fput(file);
}

/*
 * Drop a slice reference under mmap_lock (vm_ops->close, .mmap's error
 * path). The last one zeroes the slice's chunks, ~100 ms per GiB, which
 * would hold off the process's other mmap()/munmap() (and, on exit, the
 * whole teardown) that long. It is dropped instead when the task returns
 * to user space or exits, as fput() defers __fput(): still before
 * munmap() returns or the parent can reap the task -- unless another task
 * holds the mm (get_task_mm(): a read of /proc/<pid>/cmdline whose copy
 * waits on a FUSE page holds it as long as that user likes). Then the
 * exiting task's VMAs outlive it and close in the holder when it lets go;
 * nothing of the pool waits for that: the owner's file release, in
 * exit_files() after exit_mm(), has revoked its slices, zapped the held
 * VMAs and returned the chunks (revoke.c; selftests/held_mm_test). @file
 * (the VMA's or the mmap()ed one), held until then, keeps the module
 * loaded. A kernel thread (mmput_async()) runs no task work: it drops it
 * here.
 */
static void mrpool_slice_put_mm(struct mrpool_slice *s, struct file *file)
{
	if (refcount_dec_not_one(&s->ref.refcount))
		return;
	/*
	 * Ours is the last reference: no lookup finds the slice any more
	 * (it is freed) and no other VMA maps it, so put_work is unused.
	 */
	if (!(current->flags & PF_KTHREAD)) {
		s->put_file = get_file(file);
		init_task_work(&s->put_work, mrpool_slice_put_work);
		if (!task_work_add(current, &s->put_work, TWA_RESUME)) {
			WRITE_ONCE(mrpool_put_deferred, true);
			return;
		}
		fput(file);
	}
	mrpool_slice_put(s);
}

/**
 * mrpool_mmap_exit - wait out the end of deferred slice puts
 *
 * No callback is pending at unload (each holds a file, hence the module),
 * but one may still be returning from its fput() after another holder's
 * __fput() dropped the module's last reference. A task is past it once
 * it has switched voluntarily or been in user space: an RCU Tasks grace
 * period (as for trampolines), waited for only if a put was deferred.
 */
void mrpool_mmap_exit(void)
{
	if (READ_ONCE(mrpool_put_deferred))
		synchronize_rcu_tasks();
}

static void mrpool_vm_close(struct vm_area_struct *vma)
{
	struct mrpool_slice *s = vma->vm_private_data;

	atomic_dec(&s->maps);
	mrpool_slice_put_mm(s, vma->vm_file);
}

/*
 * Whether a page of the large @folio (a PMD chunk) is marked poisoned.
 * memory_failure() also marks the folio (has_hwpoisoned) when it tried to
 * split it; it did not when the page looked unhandlable to it first (the
 * path of a machine check, or of an injection by frame number, for a
 * chunk of plain pages).
 */
static bool mrpool_folio_scan_hwpoison(struct folio *folio)
{
	long i, nr = folio_nr_pages(folio);

	for (i = 0; i < nr; i++)
		if (PageHWPoison(folio_page(folio, i)))
			return true;
	return false;
}

/**
 * mrpool_slice_fault - hand page @idx of @s to the fault in @vmf
 * @vmf: a fault of a slice's mapping (a dma-buf's has its own, dmabuf.c)
 * @s: the slice, held by the VMA
 * @idx: the page's index in the slice
 *
 * A page marked as hardware-poisoned is never mapped: the owner gets
 * SIGBUS with BUS_MCEERR_AR (a GUP, -EHWPOISON or -EFAULT) instead of a
 * load of poison. The core checks the page it is given as well
 * (__do_fault()), but maps a whole PMD chunk from any page of it
 * (do_set_pmd()) unless the folio is marked as holding a poisoned page:
 * a chunk with one is so marked here, and is then mapped page by page,
 * each by its own fault: newer kernels' finish_fault() would otherwise
 * set a PTE for every page of the folio, the poisoned one too
 * (mrpool_vmf_map_one_page()). The chunk itself is retired when the slice
 * is released (pool.c).
 *
 * A revoked slice (revoke.c) faults with SIGBUS. The check holds the
 * slice's mem_sem for read until the page is locked, and the page stays
 * locked until the core has mapped it, which a revocation waits for
 * before it zaps.
 *
 * Return: VM_FAULT_LOCKED with vmf->page set, referenced and locked;
 * VM_FAULT_NOPAGE with the page mapped; or an error: VM_FAULT_SIGBUS once
 * revoked, VM_FAULT_HWPOISON for a poisoned page.
 */
vm_fault_t mrpool_slice_fault(struct vm_fault *vmf, struct mrpool_slice *s,
			      unsigned long idx)
{
	struct page *page;
	struct folio *folio;
	vm_fault_t ret = 0;

	if (!mrpool_slice_mem_read(s))
		return VM_FAULT_SIGBUS;
	/* Seen by a revocation once it holds mem_sem (revoke.c). */
	if (!READ_ONCE(s->faulted))
		WRITE_ONCE(s->faulted, true);
	page = mrpool_slice_page(s, idx);
	folio = page_folio(page);
	if (unlikely(PageHWPoison(page))) {
		ret = VM_FAULT_HWPOISON;
		goto done;
	}
	if (IS_ENABLED(CONFIG_MEMORY_FAILURE) && folio_test_large(folio) &&
	    unlikely(folio_test_has_hwpoisoned(folio) ||
		     mrpool_folio_scan_hwpoison(folio))) {
		if (!folio_test_has_hwpoisoned(folio))
			folio_set_has_hwpoisoned(folio);
		ret = mrpool_vmf_map_one_page(vmf, page);
	} else {
		get_page(page);
		vmf->page = page;
	}
	if (!ret) {
		lock_page(vmf->page);
		ret = VM_FAULT_LOCKED;
	}
done:
	mrpool_slice_mem_done(s);
	return ret;
}

static vm_fault_t mrpool_vm_fault(struct vm_fault *vmf)
{
	struct mrpool_slice *s = vmf->vma->vm_private_data;
	unsigned long base = (unsigned long)s->id <<
			     (MRPOOL_TOKEN_SHIFT - PAGE_SHIFT);
	unsigned long idx = vmf->pgoff - base;

	if (vmf->pgoff < base || idx >= s->length >> PAGE_SHIFT)
		return VM_FAULT_SIGBUS;
	if (vmf->vma->vm_mm != s->client->mm)
		return VM_FAULT_SIGBUS;
	return mrpool_slice_fault(vmf, s, idx);
}

#ifdef CONFIG_NUMA
/*
 * No memory policy: NUMA balancing skips a VMA whose policy is not
 * MPOL_F_MOF (vma_policy_mof()). Its hinting faults could only try to
 * migrate chunks the pool holds, which always fails (and, for shmem
 * folios on the LRU, only after allocating a target and retrying);
 * mbind() cannot move them either.
 */
struct mempolicy *mrpool_vm_get_policy(MRPOOL_GET_POLICY_ARGS)
{
	return NULL;
}
#endif

static const struct vm_operations_struct mrpool_vm_ops = {
	.open = mrpool_vm_open,
	.close = mrpool_vm_close,
	.fault = mrpool_vm_fault,
#ifdef CONFIG_NUMA
	.get_policy = mrpool_vm_get_policy,
#endif
};

/**
 * mrpool_mmap - map a slice of the calling file
 * @file: /dev/mrpool file
 * @vma: offset = the slice's token, length = the slice's length
 *
 * Offset MRPOOL_STATS_MMAP_OFFSET maps the file's stats page instead
 * (client_stats.c), with the same checks.
 *
 * Every mapping is shared and writable, so only a file open for writing
 * maps anything: do_mmap() refuses PROT_WRITE on any other with -EACCES
 * (and would clear VM_MAYWRITE and VM_SHARED from a MAP_SHARED one, so
 * mprotect() could not add write later); this refuses the rest, before
 * the owner check, as the ioctls refuse such a file first.
 *
 * Return: 0; -EACCES for a file not open for writing or a mapping without
 * write access; -EPERM from a process other than the file's opener;
 * -EINVAL for a private mapping or a wrong length; -ENOENT for a token
 * that is not a live slice of this file.
 */
int mrpool_mmap(struct file *file, struct vm_area_struct *vma)
{
	struct mrpool_client *client = file->private_data;
	unsigned long len = vma->vm_end - vma->vm_start;
	struct mrpool_slice *s;
	int ret;

	if (!(file->f_mode & FMODE_WRITE))
		return -EACCES;
	if (!mrpool_client_is_owner(client))
		return -EPERM;
	if (!(vma->vm_flags & VM_MAYSHARE))
		return -EINVAL;
	if (!(vma->vm_flags & VM_WRITE) || !(vma->vm_flags & VM_SHARED))
		return -EACCES;
	if (vma->vm_pgoff == MRPOOL_STATS_MMAP_OFFSET >> PAGE_SHIFT) {
		ret = mrpool_client_stats_mmap(client, vma);
		goto set_file;
	}
	s = mrpool_slice_get_owned(client, vma->vm_pgoff);
	if (!s)
		return -ENOENT;
	if (len != s->length) {
		ret = -EINVAL;
		goto put;
	}

	mrpool_vm_flags_set(vma, (s->fork_copy ? 0 : VM_DONTCOPY) |
			    VM_DONTEXPAND | VM_DONTDUMP);
	/* The reference from mrpool_slice_get_owned() now belongs to @vma. */
	vma->vm_private_data = s;
	vma->vm_ops = &mrpool_vm_ops;
	atomic_inc(&s->maps);
	ret = 0;
set_file:
	/* The VMA holds the map file from here; the device file can close. */
	if (!ret)
		vma_set_file(vma, client->map_file);
	return ret;

put:
	/* A FREE meanwhile may have left this the last reference. */
	mrpool_slice_put_mm(s, file);
	return ret;
}

/*
 * Place mappings on a chunk-size boundary (at least 2 MiB) so the slice's
 * contiguous chunks line up with huge translation entries. 6.1's
 * thp_get_unmapped_area() aligns DAX files only, hence this: ask for the
 * length plus the alignment and round up inside the hole.
 */
unsigned long mrpool_get_unmapped_area(struct file *file, unsigned long addr,
				       unsigned long len, unsigned long pgoff,
				       unsigned long flags)
{
	unsigned long align = max_t(unsigned long, PMD_SIZE,
				    mrpool_pool.chunk_size);
	unsigned long ret;

	if ((flags & MAP_FIXED) || len + align < len)
		return mrpool_mm_get_unmapped_area(file, addr, len, pgoff,
						   flags);
	ret = mrpool_mm_get_unmapped_area(file, addr ? ALIGN(addr, align) : 0,
					  len + align, pgoff, flags);
	if (IS_ERR_VALUE(ret))
		return mrpool_mm_get_unmapped_area(file, addr, len, pgoff,
						   flags);
	return ALIGN(ret, align);
}
