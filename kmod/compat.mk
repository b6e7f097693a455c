# SPDX-License-Identifier: GPL-2.0
# Feature tests for compat.h, against the headers of the target kernel,
# for every module that includes it (include this file from its Kbuild).
# Each greps for what an upstream change brought, named above it: never a
# version number (distribution kernels backport).
mrpool-have = $(shell grep -qsE '$(2)' $(srctree)/include/linux/$(1) && echo -DMRPOOL_HAVE_$(3))
# 6.3, "mm: introduce vma->vm_flags wrapper functions"
ccflags-y += $(call mrpool-have,mm.h,void vm_flags_set.,VM_FLAGS_SET)
# 6.7, "mempolicy: alloc_pages_mpol() for NUMA policy without vma"
ccflags-y += $(call mrpool-have,mm.h,unsigned long addr. pgoff_t .ilx.;,GET_POLICY_ILX)
# 6.10, "mm: switch mm->get_unmapped_area() to a flag"
ccflags-y += $(call mrpool-have,sched/mm.h,long mm_get_unmapped_area.struct mm_struct,MM_GET_UNMAPPED_AREA)
# 6.13, "module: Convert symbol namespace to string literal" (the probe
# finds the older form)
ccflags-y += $(call mrpool-have,module.h,MODULE_INFO.import_ns. __stringify,IMPORT_NS_STRINGIFY)
# 6.19, "mm: consistently use current->mm in mm_get_unmapped_area()"
ccflags-y += $(call mrpool-have,sched/mm.h,long mm_get_unmapped_area.struct file,MM_GET_UNMAPPED_AREA_NO_MM)
# folio_contain_hwpoisoned_page(): Debian's 6.12 and 7.3 have it, 6.1
# does not (a folio with a poisoned page, head or any other)
ccflags-y += $(call mrpool-have,page-flags.h,bool folio_contain_hwpoisoned_page.,FOLIO_CONTAIN_HWPOISONED)
# vmf_insert_page_mkwrite() (6.15's DAX rework): one PTE for one page of
# a large folio from a fault handler, without VM_MIXEDMAP
ccflags-y += $(call mrpool-have,mm.h,vm_fault_t vmf_insert_page_mkwrite.struct vm_fault,VMF_INSERT_PAGE_MKWRITE)
# 7.1, "mm: update shmem_[kernel]_file_*() functions to use vma_flags_t"
ccflags-y += $(call mrpool-have,shmem_fs.h,loff_t size. vma_flags_t,SHMEM_VMA_FLAGS)
