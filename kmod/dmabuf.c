// SPDX-License-Identifier: GPL-2.0
/*
 * MRPOOL_IOC_EXPORT_DMABUF: a slice as a dma-buf, for drivers that register
 * dma-bufs (ibv_reg_dmabuf_mr: mlx5, efa) instead of pinning user pages.
 * Importers get scatter-gather tables of the slice's chunk pages mapped for
 * their device; userspace can mmap the dma-buf itself, but not pin it:
 * the mapping is of frame numbers (VM_PFNMAP, below), so a process that
 * wants the memory in an MR registers the dma-buf (an attachment).
 *
 * Ownership: the dma-buf holds a reference on the slice (which holds its
 * client), dropped by its release; never the /dev/mrpool file, whose close
 * must return the owner's other slices even while a receiver keeps the
 * dma-buf.
 *
 * Revocation (revoke.c): a FREE or that close revokes the slice. Every
 * mmap of each of its dma-bufs, in any process, is zapped through the
 * dma-buf file's mapping, which each export holds (an inode reference:
 * the dma-buf's dentry drops its inode before its release runs), and
 * faults with SIGBUS from then on; a new mmap() or attachment map fails
 * with -ENODEV. A kernel importer whose attachment is mapped keeps its
 * table, and with it the slice's chunks, until its last unmap:
 * the pages are the pool's for the slice's whole life, so nothing moves
 * under an attachment (a pinned, non-dynamic exporter: no move_notify).
 * A CPU mapping of the dma-buf cannot be pinned (below), so what a
 * revocation leaves held is told apart: chunks kept for mapped
 * attachments are charged to the one other user that mapped one (within
 * its share, then the orphans within theirs; the orphans when several
 * did, or a kernel thread), chunks still pinned are the owner's own
 * (pinned through its own mapping of the slice), and what has no room
 * stays the owner's (revoke.c, tenant.c).
 */
#include "mrpool.h"

#include <linux/dma-buf.h>
#include <linux/dma-mapping.h>
#include <linux/file.h>
#include <linux/fs.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/scatterlist.h>
#include <linux/slab.h>
#include <linux/string.h>

MRPOOL_IMPORT_NS_DMA_BUF;

struct mrpool_dmabuf {
	struct mrpool_slice *slice;	/* a reference */
	struct list_head node;		/* slice->exports, under export_lock */
	struct inode *inode;		/* the dma-buf file's (a reference) */
};

/*
 * A mapped attachment: its table, and who mapped it, which a revocation
 * charges for the chunks it keeps (revoke.c) -- whoever maps one then,
 * not whoever once did.
 */
struct mrpool_dmabuf_map {
	struct sg_append_table sga;
	struct list_head node;		/* slice->dma_mapv, under export_lock */
	/* The mapper's user (a reference); NULL: a kernel thread, or unknown */
	struct mrpool_tenant *tenant;
	bool owner;			/* the mapper is the slice's owner's user */
};

/*
 * The table is built chunk by chunk, from each chunk's own page array:
 * nothing the size of the whole slice is allocated, whatever its length
 * (a page array of a 1 TiB slice would be 2 GiB). Pages contiguous across
 * a chunk boundary still merge into one segment. The table is freed as
 * the append table it was built as: its chained allocations are sized by
 * total_nents, not by the entries in use.
 */
static struct sg_table *mrpool_dmabuf_map(struct dma_buf_attachment *at,
					  enum dma_data_direction dir)
{
	struct mrpool_dmabuf *mb = at->dmabuf->priv;
	unsigned int max_seg = dma_get_max_seg_size(at->dev);
	unsigned int npages = mrpool_pool.chunk_pages;
	struct mrpool_slice *s = mb->slice;
	struct mrpool_dmabuf_map *m;
	struct sg_append_table *sga;
	unsigned int i, left;
	int ret;

	m = mrpool_kzalloc(sizeof(*m), GFP_KERNEL);
	if (!m)
		return ERR_PTR(-ENOMEM);
	sga = &m->sga;
	if (!(current->flags & PF_KTHREAD)) {
		m->owner = mrpool_tenant_is_current(s->client->tenant);
		if (!m->owner)
			m->tenant = mrpool_tenant_get();
	}
	/* Held across the build, so a revocation sees this map counted. */
	if (!mrpool_slice_mem_read(s)) {
		ret = -ENODEV;
		goto free_map;
	}
	for (i = 0; i < s->nr_chunks; i++) {
		/*
		 * Pages still to come, a sizing hint whose zero ends the
		 * table: only its being zero must be exact.
		 */
		left = min_t(u64, (u64)(s->nr_chunks - i - 1) * npages,
			     UINT_MAX);
		ret = sg_alloc_append_table_from_pages(sga,
						       s->chunkv[i]->pages,
						       npages, 0,
						       mrpool_pool.chunk_size,
						       max_seg, left,
						       GFP_KERNEL);
		if (ret)
			goto free_table;
	}
	ret = dma_map_sgtable(at->dev, &sga->sgt, dir, 0);
	if (ret)
		goto free_table;
	mutex_lock(&s->export_lock);
	list_add_tail(&m->node, &s->dma_mapv);
	atomic_inc(&s->dma_maps);
	mutex_unlock(&s->export_lock);
	mrpool_slice_mem_done(s);
	return &sga->sgt;

free_table:
	sg_free_append_table(sga);
	mrpool_slice_mem_done(s);
free_map:
	mrpool_tenant_put(m->tenant);
	kfree(m);
	return ERR_PTR(ret);
}

static void mrpool_dmabuf_unmap(struct dma_buf_attachment *at,
				struct sg_table *sgt,
				enum dma_data_direction dir)
{
	struct mrpool_dmabuf_map *m = container_of(sgt, struct mrpool_dmabuf_map,
						   sga.sgt);
	struct mrpool_dmabuf *mb = at->dmabuf->priv;
	struct mrpool_slice *s = mb->slice;
	bool last;

	dma_unmap_sgtable(at->dev, sgt, dir, 0);
	sg_free_append_table(&m->sga);
	mutex_lock(&s->export_lock);
	list_del(&m->node);
	last = atomic_dec_and_test(&s->dma_maps);
	mutex_unlock(&s->export_lock);
	mrpool_tenant_put(m->tenant);
	kfree(m);
	/* The last one: chunks a revocation kept for it go back. */
	if (last)
		mrpool_slice_unkeep(s);
}

/* The last reference to the dma-buf is gone: so are its mappings. */
static void mrpool_dmabuf_release(struct dma_buf *dmabuf)
{
	struct mrpool_dmabuf *mb = dmabuf->priv;
	struct mrpool_slice *s = mb->slice;

	mutex_lock(&s->export_lock);
	list_del_init(&mb->node);
	mutex_unlock(&s->export_lock);
	if (mb->inode)
		iput(mb->inode);
	mrpool_slice_put(s);
	kfree(mb);
}

/**
 * mrpool_dmabuf_importer - who maps attachments of @s's dma-bufs now
 * @s: the slice, its export_lock held by the caller
 * @many: set when several users other than the owner's do, or a kernel
 *	thread or a mapper whose user could not be had; else cleared
 *
 * Return: the one user other than the owner's with an attachment mapped
 * (referenced by its maps, so while export_lock is held), or NULL: none
 * (no map, or only the owner's own), or @many.
 */
struct mrpool_tenant *mrpool_dmabuf_importer(struct mrpool_slice *s,
					     bool *many)
{
	struct mrpool_tenant *to = NULL;
	struct mrpool_dmabuf_map *m;

	lockdep_assert_held(&s->export_lock);
	*many = false;
	list_for_each_entry(m, &s->dma_mapv, node) {
		if (m->owner)
			continue;
		if (!m->tenant || (to && to != m->tenant)) {
			*many = true;
			return NULL;
		}
		to = m->tenant;
	}
	return to;
}

/**
 * mrpool_dmabuf_zap - unmap every mmap of @s's dma-bufs, in any process
 * @s: a slice being revoked (revoke.c), referenced by the caller
 *
 * export_lock is held across the zaps: a dma-buf released meanwhile
 * waits to leave the list, and its inode is held until it has.
 */
void mrpool_dmabuf_zap(struct mrpool_slice *s)
{
	struct mrpool_dmabuf *mb;

	mutex_lock(&s->export_lock);
	list_for_each_entry(mb, &s->exports, node)
		unmap_mapping_range(mb->inode->i_mapping, 0, 0, 1);
	mutex_unlock(&s->export_lock);
}

/*
 * A CPU mapping of the dma-buf is VM_PFNMAP | VM_IO: each fault inserts
 * the frame of the slice's page as a special entry, which no
 * get_user_pages() or pin_user_pages() follows (-EFAULT: vmsplice(),
 * O_DIRECT, ibv_reg_mr(), io_uring's registered buffers,
 * process_vm_readv() and /proc/pid/mem of it all fail; so do gdb's and
 * ptrace()'s reads, and MAP_POPULATE and mlock() populate nothing: each
 * page is mapped at its first touch, 4 KiB at a time). Only an
 * attachment, whose map records its mapper, can hold the slice's pages
 * through a dma-buf. One exception, before Linux 6.13: KVM follows such
 * an entry to the page and may take a reference (hva_to_pfn_remapped(),
 * kvm_try_get_pfn(); a nested guest's vAPIC page, kvm_vcpu_map()), so a
 * guest's memory backed by the mapping can hold a page; that reference
 * counts as a pin of the owner's (revoke.c): the chunk stays quarantined
 * and the owner's charge until it goes, never reused meanwhile. The VMA
 * holds the dma-buf's file, hence the slice: no open/close.
 *
 * Revocation (revoke.c): the check of the revoked flag and the insert
 * are made under the slice's mem_sem held for read, so a revocation,
 * which takes it for write before its zap, finds every entry inserted
 * that will be: none appears after the zap, and no folio lock is needed
 * (nor s->faulted, which tells the revocation to wait those out). A page
 * marked as hardware-poisoned is never mapped: SIGBUS, BUS_MCEERR_AR, as
 * from the slice's own mapping (mrpool_slice_fault()); each fault maps
 * one page, so a poisoned page of a chunk spoils only its own.
 */
static vm_fault_t mrpool_dmabuf_fault(struct vm_fault *vmf)
{
	struct mrpool_dmabuf *mb = vmf->vma->vm_private_data;
	struct mrpool_slice *s = mb->slice;
	struct page *page;
	vm_fault_t ret;

	if (vmf->pgoff >= s->length >> PAGE_SHIFT)
		return VM_FAULT_SIGBUS;
	if (!mrpool_slice_mem_read(s))
		return VM_FAULT_SIGBUS;
	page = mrpool_slice_page(s, vmf->pgoff);
	if (unlikely(PageHWPoison(page)))
		ret = VM_FAULT_HWPOISON;
	else
		ret = vmf_insert_pfn(vmf->vma, vmf->address,
				     page_to_pfn(page));
	mrpool_slice_mem_done(s);
	return ret;
}

static const struct vm_operations_struct mrpool_dmabuf_vm_ops = {
	.fault = mrpool_dmabuf_fault,
#ifdef CONFIG_NUMA
	.get_policy = mrpool_vm_get_policy,
#endif
};

/*
 * dma_buf_mmap_internal() has checked the range against the size, and
 * do_mmap() the dma-buf file's mode (mrpool_dmabuf_accmode()): a mapping
 * needs it readable, PROT_WRITE writable, and a shared mapping of a file
 * not open for writing has lost VM_MAYWRITE.
 */
static int mrpool_dmabuf_mmap(struct dma_buf *dmabuf,
			      struct vm_area_struct *vma)
{
	struct mrpool_dmabuf *mb = dmabuf->priv;

	/* A private mapping would copy on write: not the slice's memory. */
	if (!(vma->vm_flags & VM_MAYSHARE))
		return -EINVAL;
	/* Racy, and need not be: a fault checks again (revoke.c). */
	if (!mrpool_slice_mem_read(mb->slice))
		return -ENODEV;
	mrpool_slice_mem_done(mb->slice);
	mrpool_vm_flags_set(vma, VM_PFNMAP | VM_IO | VM_DONTCOPY |
			    VM_DONTEXPAND | VM_DONTDUMP);
	vma->vm_ops = &mrpool_dmabuf_vm_ops;
	vma->vm_private_data = dmabuf->priv;
	return 0;
}

static const struct dma_buf_ops mrpool_dmabuf_ops = {
	.map_dma_buf = mrpool_dmabuf_map,
	.unmap_dma_buf = mrpool_dmabuf_unmap,
	.release = mrpool_dmabuf_release,
	.mmap = mrpool_dmabuf_mmap,
};

/*
 * The dma-buf's file is open as the device file is (the dispatcher let
 * only a writer through: read-write, or write-only), never wider: its
 * mmap() then gets no more than the device file's own would. Importers
 * are not bound by it: dma_buf_get() checks no mode, and an attachment
 * is mapped in whatever direction its driver asks for.
 */
static int mrpool_dmabuf_accmode(const struct file *file)
{
	if (!(file->f_mode & FMODE_WRITE))
		return O_RDONLY;
	return file->f_mode & FMODE_READ ? O_RDWR : O_WRONLY;
}

/**
 * mrpool_ioc_export_dmabuf - MRPOOL_IOC_EXPORT_DMABUF
 * @file: the /dev/mrpool file, open for writing, whose opener is the caller
 * @uarg: struct mrpool_export_dmabuf in user memory
 *
 * The descriptor is installed only once the caller has its number, so a
 * fault copying out leaves nothing behind.
 *
 * Return: 0; -EINVAL for a malformed request; -ENOENT for a slice that is
 * not a live slice of @file; -EFAULT; -EMFILE; -ENOMEM.
 */
long mrpool_ioc_export_dmabuf(struct file *file, void __user *uarg)
{
	struct mrpool_client *client = file->private_data;
	DEFINE_DMA_BUF_EXPORT_INFO(exp);
	struct mrpool_export_dmabuf a;
	struct mrpool_dmabuf *mb;
	struct dma_buf *dmabuf;
	u32 usize;
	int ret, fd;

	ret = mrpool_copy_in(&a, sizeof(a), MRPOOL_EXPORT_SIZE_V1, uarg,
			     &usize);
	if (ret)
		return ret;
	if (a.flags & ~MRPOOL_EXPORT_VALID_FLAGS || a.pad ||
	    memchr_inv(a.reserved, 0, sizeof(a.reserved)))
		return -EINVAL;

	mb = mrpool_kzalloc(sizeof(*mb), GFP_KERNEL_ACCOUNT);
	if (!mb)
		return -ENOMEM;
	INIT_LIST_HEAD(&mb->node);
	mb->slice = mrpool_slice_get_id(client, a.slice_id);
	if (!mb->slice) {
		ret = -ENOENT;
		goto free_mb;
	}
	fd = get_unused_fd_flags(a.flags & MRPOOL_EXPORT_CLOEXEC ?
				 O_CLOEXEC : 0);
	if (fd < 0) {
		ret = fd;
		goto put_slice;
	}

	exp.exp_name = KBUILD_MODNAME;
	exp.owner = THIS_MODULE;
	exp.ops = &mrpool_dmabuf_ops;
	exp.size = mb->slice->length;
	exp.flags = mrpool_dmabuf_accmode(file);
	exp.priv = mb;
	dmabuf = dma_buf_export(&exp);
	if (IS_ERR(dmabuf)) {
		ret = PTR_ERR(dmabuf);
		goto put_fd;
	}
	/* From here the dma-buf owns @mb; its release drops the references. */
	mb->inode = file_inode(dmabuf->file);
	ihold(mb->inode);
	/* Listed before anyone can map it: a revocation zaps its mmaps. */
	mutex_lock(&mb->slice->export_lock);
	list_add_tail(&mb->node, &mb->slice->exports);
	mutex_unlock(&mb->slice->export_lock);

	a.fd = fd;
	a.length = mb->slice->length;
	ret = mrpool_copy_out(uarg, &a, sizeof(a), usize);
	if (ret) {
		put_unused_fd(fd);
		dma_buf_put(dmabuf);
		return ret;
	}
	fd_install(fd, dmabuf->file);
	return 0;

put_fd:
	put_unused_fd(fd);
put_slice:
	mrpool_slice_put(mb->slice);
free_mb:
	kfree(mb);
	return ret;
}
