/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Kernel API differences, in one place so the rest of the module reads as
 * plain code. Kbuild detects each feature in the target kernel's headers
 * (MRPOOL_HAVE_*): distribution kernels backport, so version numbers lie.
 * Tested on 6.1 and 6.12; built for trixie-backports' 7.3.
 */
#ifndef _MRPOOL_COMPAT_H
#define _MRPOOL_COMPAT_H

#include <linux/mm.h>
#include <linux/sched/mm.h>

/* The page allocator serves orders 0..10 on every supported kernel. */
#define MRPOOL_NR_PAGE_ORDERS	11

/* 6.3 made vm_flags read-only outside helpers taking the right lock. */
static inline void mrpool_vm_flags_set(struct vm_area_struct *vma,
				       vm_flags_t flags)
{
#ifdef MRPOOL_HAVE_VM_FLAGS_SET
	vm_flags_set(vma, flags);
#else
	vma->vm_flags |= flags;
#endif
}

static inline void mrpool_vm_flags_clear(struct vm_area_struct *vma,
					 vm_flags_t flags)
{
#ifdef MRPOOL_HAVE_VM_FLAGS_SET
	vm_flags_clear(vma, flags);
#else
	vma->vm_flags &= ~flags;
#endif
}

/*
 * 6.10 replaced mm->get_unmapped_area with mm_get_unmapped_area(mm, ...);
 * 6.19 dropped its mm ("mm: consistently use current->mm in
 * mm_get_unmapped_area()").
 */
static inline unsigned long
mrpool_mm_get_unmapped_area(struct file *file, unsigned long addr,
			    unsigned long len, unsigned long pgoff,
			    unsigned long flags)
{
#if defined(MRPOOL_HAVE_MM_GET_UNMAPPED_AREA_NO_MM)
	return mm_get_unmapped_area(file, addr, len, pgoff, flags);
#elif defined(MRPOOL_HAVE_MM_GET_UNMAPPED_AREA)
	return mm_get_unmapped_area(current->mm, file, addr, len, pgoff, flags);
#else
	return current->mm->get_unmapped_area(file, addr, len, pgoff, flags);
#endif
}

/* 6.7 gave vm_operations_struct.get_policy an interleave index. */
#ifdef MRPOOL_HAVE_GET_POLICY_ILX
#define MRPOOL_GET_POLICY_ARGS	struct vm_area_struct *vma, unsigned long addr, \
				pgoff_t *ilx
#else
#define MRPOOL_GET_POLICY_ARGS	struct vm_area_struct *vma, unsigned long addr
#endif

/*
 * 7.1 passes VMA flags to shmem's file setup as a vma_flags_t bitmap ("mm:
 * update shmem_[kernel]_file_*() functions to use vma_flags_t").
 */
#ifdef MRPOOL_HAVE_SHMEM_VMA_FLAGS
#define MRPOOL_SHMEM_NORESERVE	mk_vma_flags(VMA_NORESERVE_BIT)
#else
#define MRPOOL_SHMEM_NORESERVE	VM_NORESERVE
#endif

/*
 * A large folio with a hardware-poisoned page: memory_failure() marks the
 * page itself, and the folio's second page (has_hwpoisoned) when it tried
 * to split it. 6.12 names the test folio_contain_hwpoisoned_page(); 6.1
 * has its parts. Without CONFIG_MEMORY_FAILURE both flags read false.
 */
static inline bool mrpool_folio_hwpoisoned(struct folio *folio)
{
#ifdef MRPOOL_HAVE_FOLIO_CONTAIN_HWPOISONED
	return folio_contain_hwpoisoned_page(folio);
#else
	return folio_test_hwpoison(folio) ||
	       (folio_test_large(folio) && folio_test_has_hwpoisoned(folio));
#endif
}

/*
 * Map page @page of a large folio, alone, at the fault's address: 0 with
 * vmf->page set and referenced (for finish_fault()), or VM_FAULT_NOPAGE
 * with the PTE in place. Newer kernels' finish_fault() (7.3's, not 6.12's:
 * that maps a large folio's PTEs in one go for anonymous shmem only) set
 * PTEs for every page of the folio the VMA and page table cover, with no
 * check for hardware poison: such a kernel has vmf_insert_page_mkwrite()
 * (6.15), which inserts one refcounted PTE as finish_fault() would. On an
 * older one finish_fault() maps the page it is given, and that alone.
 */
static inline vm_fault_t mrpool_vmf_map_one_page(struct vm_fault *vmf,
						 struct page *page)
{
#ifdef MRPOOL_HAVE_VMF_INSERT_PAGE_MKWRITE
	return vmf_insert_page_mkwrite(vmf, page,
				       vmf->flags & FAULT_FLAG_WRITE);
#else
	get_page(page);
	vmf->page = page;
	return 0;
#endif
}

/* 6.13 takes a symbol namespace as a string literal. */
#ifdef MRPOOL_HAVE_IMPORT_NS_STRINGIFY
#define MRPOOL_IMPORT_NS_DMA_BUF	MODULE_IMPORT_NS(DMA_BUF)
#else
#define MRPOOL_IMPORT_NS_DMA_BUF	MODULE_IMPORT_NS("DMA_BUF")
#endif

#endif /* _MRPOOL_COMPAT_H */
