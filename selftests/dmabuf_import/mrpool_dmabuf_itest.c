// SPDX-License-Identifier: GPL-2.0
/*
 * Test-only importer of mrpool dma-bufs (selftests/dmabuf_import_test.c):
 * what a NIC driver does in ib_umem_dmabuf_get(), on a platform device
 * with direct DMA, since rxe in 6.1 imports no dma-bufs.
 *
 * debugfs mrpool_dmabuf_itest/import: write a dma-buf descriptor number
 * of the writing process; the module attaches, maps the attachment for
 * its device, walks the scatter-gather table and unmaps. Reading gives
 * "size S nents N dma_bytes B direct D sum X wsum W" (D: every DMA address
 * is the page's physical address; X: the sum of the first byte of every
 * page, from the pages the table names; W: the sum over those pages, in
 * the table's order, of (its index + 1) * (its first byte + its last
 * byte)) or "error E".
 *
 * debugfs mrpool_dmabuf_itest/hold: write a dma-buf descriptor number;
 * the module attaches and maps it, and keeps the mapped attachment, as a
 * NIC's dma-buf MR does, until -1 is written (or the module unloads).
 * Reading gives "sum X" over the held table's pages, as import's X, read
 * now; "error E" from a failed write; "none" while nothing is held.
 *
 * debugfs mrpool_dmabuf_itest/kvcalloc: write N; the module allocates
 * and frees an array of N page pointers with kvcalloc(), as an exporter
 * building its table from a page array of the whole buffer would: a
 * reference allocation for tests that watch the importer's allocations.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/module.h>
#include <linux/debugfs.h>
#include <linux/dma-buf.h>
#include <linux/dma-mapping.h>
#include <linux/platform_device.h>
#include <linux/scatterlist.h>
#include <linux/highmem.h>
#include <linux/slab.h>
#include <linux/mutex.h>
#include <linux/uaccess.h>
#include "compat.h"

MRPOOL_IMPORT_NS_DMA_BUF;

static struct platform_device *itest_pdev;
static struct device_dma_parameters itest_dma_parms;
static struct dentry *itest_dir;
static DEFINE_MUTEX(itest_lock);	/* itest_result */
static char itest_result[160];

/* What the pages of a table hold, in the table's order. */
struct itest_sums {
	u64 pages;	/* pages walked so far */
	u64 sum;	/* first bytes */
	u64 wsum;	/* (index + 1) * (first byte + last byte) */
};

/* Adds every page in [off, off + len) of @page on to @s. */
static void itest_sum(struct itest_sums *s, struct page *page,
		      unsigned int off, unsigned int len)
{
	unsigned int done;
	u8 *va;

	for (done = 0; done < len; done += PAGE_SIZE) {
		va = kmap_local_page(page + (off + done) / PAGE_SIZE);
		s->sum += va[0];
		s->wsum += ++s->pages * (va[0] + va[PAGE_SIZE - 1]);
		kunmap_local(va);
	}
}

static int itest_import(int fd)
{
	struct dma_buf_attachment *at;
	unsigned int i, nents = 0;
	struct itest_sums sums = { 0 };
	struct scatterlist *sg;
	struct dma_buf *dmabuf;
	u64 dma_bytes = 0;
	struct sg_table *sgt;
	bool direct = true;
	int ret = 0;

	dmabuf = dma_buf_get(fd);
	if (IS_ERR(dmabuf))
		return PTR_ERR(dmabuf);
	at = dma_buf_attach(dmabuf, &itest_pdev->dev);
	if (IS_ERR(at)) {
		ret = PTR_ERR(at);
		goto put;
	}
	sgt = dma_buf_map_attachment_unlocked(at, DMA_BIDIRECTIONAL);
	if (IS_ERR(sgt)) {
		ret = PTR_ERR(sgt);
		goto detach;
	}
	for_each_sgtable_dma_sg(sgt, sg, i) {
		nents++;
		dma_bytes += sg_dma_len(sg);
	}
	for_each_sgtable_sg(sgt, sg, i) {
		if (sg_dma_address(sg) != page_to_phys(sg_page(sg)) + sg->offset)
			direct = false;
		itest_sum(&sums, sg_page(sg), sg->offset, sg->length);
	}
	dma_buf_unmap_attachment_unlocked(at, sgt, DMA_BIDIRECTIONAL);

	mutex_lock(&itest_lock);
	snprintf(itest_result, sizeof(itest_result),
		 "size %zu nents %u dma_bytes %llu direct %d sum %llu wsum %llu\n",
		 dmabuf->size, nents, dma_bytes, direct, sums.sum, sums.wsum);
	mutex_unlock(&itest_lock);
detach:
	dma_buf_detach(dmabuf, at);
put:
	dma_buf_put(dmabuf);
	return ret;
}

static ssize_t import_write(struct file *file, const char __user *ubuf,
			    size_t len, loff_t *ppos)
{
	int fd, ret;

	ret = kstrtoint_from_user(ubuf, len, 0, &fd);
	if (ret)
		return ret;
	ret = itest_import(fd);
	if (ret) {
		mutex_lock(&itest_lock);
		snprintf(itest_result, sizeof(itest_result), "error %d\n", ret);
		mutex_unlock(&itest_lock);
		return ret;
	}
	return len;
}

static ssize_t import_read(struct file *file, char __user *ubuf, size_t len,
			   loff_t *ppos)
{
	char buf[sizeof(itest_result)];

	mutex_lock(&itest_lock);
	strscpy(buf, itest_result, sizeof(buf));
	mutex_unlock(&itest_lock);
	return simple_read_from_buffer(ubuf, len, ppos, buf, strlen(buf));
}

/* The held attachment; under itest_lock. */
static struct dma_buf *held_buf;
static struct dma_buf_attachment *held_at;
static struct sg_table *held_sgt;
static int held_err;

static void itest_release_held(void)
{
	if (!held_buf)
		return;
	dma_buf_unmap_attachment_unlocked(held_at, held_sgt,
					  DMA_BIDIRECTIONAL);
	dma_buf_detach(held_buf, held_at);
	dma_buf_put(held_buf);
	held_buf = NULL;
}

static int itest_hold(int fd)
{
	struct dma_buf_attachment *at;
	struct dma_buf *dmabuf;
	struct sg_table *sgt;
	int ret;

	dmabuf = dma_buf_get(fd);
	if (IS_ERR(dmabuf))
		return PTR_ERR(dmabuf);
	at = dma_buf_attach(dmabuf, &itest_pdev->dev);
	if (IS_ERR(at)) {
		ret = PTR_ERR(at);
		goto put;
	}
	sgt = dma_buf_map_attachment_unlocked(at, DMA_BIDIRECTIONAL);
	if (IS_ERR(sgt)) {
		ret = PTR_ERR(sgt);
		goto detach;
	}
	held_buf = dmabuf;
	held_at = at;
	held_sgt = sgt;
	return 0;

detach:
	dma_buf_detach(dmabuf, at);
put:
	dma_buf_put(dmabuf);
	return ret;
}

static ssize_t hold_write(struct file *file, const char __user *ubuf,
			  size_t len, loff_t *ppos)
{
	int fd, ret;

	ret = kstrtoint_from_user(ubuf, len, 0, &fd);
	if (ret)
		return ret;
	mutex_lock(&itest_lock);
	itest_release_held();
	held_err = fd < 0 ? 0 : itest_hold(fd);
	ret = held_err;
	mutex_unlock(&itest_lock);
	return ret ? ret : len;
}

static ssize_t hold_read(struct file *file, char __user *ubuf, size_t len,
			 loff_t *ppos)
{
	struct itest_sums sums = { 0 };
	struct scatterlist *sg;
	char buf[64];
	unsigned int i;

	mutex_lock(&itest_lock);
	if (held_buf) {
		for_each_sgtable_sg(held_sgt, sg, i)
			itest_sum(&sums, sg_page(sg), sg->offset, sg->length);
		snprintf(buf, sizeof(buf), "sum %llu\n", sums.sum);
	} else if (held_err) {
		snprintf(buf, sizeof(buf), "error %d\n", held_err);
	} else {
		snprintf(buf, sizeof(buf), "none\n");
	}
	mutex_unlock(&itest_lock);
	return simple_read_from_buffer(ubuf, len, ppos, buf, strlen(buf));
}

static const struct file_operations hold_fops = {
	.owner = THIS_MODULE,
	.write = hold_write,
	.read = hold_read,
	.llseek = default_llseek,
};

static const struct file_operations import_fops = {
	.owner = THIS_MODULE,
	.write = import_write,
	.read = import_read,
	.llseek = default_llseek,
};

static ssize_t kvcalloc_write(struct file *file, const char __user *ubuf,
			      size_t len, loff_t *ppos)
{
	struct page **pages;
	unsigned long n;
	int ret;

	ret = kstrtoul_from_user(ubuf, len, 0, &n);
	if (ret)
		return ret;
	pages = kvcalloc(n, sizeof(*pages), GFP_KERNEL);
	if (!pages)
		return -ENOMEM;
	kvfree(pages);
	return len;
}

static const struct file_operations kvcalloc_fops = {
	.owner = THIS_MODULE,
	.write = kvcalloc_write,
	.llseek = noop_llseek,
};

static int __init itest_init(void)
{
	int ret;

	itest_pdev = platform_device_register_simple(KBUILD_MODNAME, -1,
						     NULL, 0);
	if (IS_ERR(itest_pdev))
		return PTR_ERR(itest_pdev);
	/* Direct DMA over all memory: no IOMMU in the test guest. */
	ret = dma_coerce_mask_and_coherent(&itest_pdev->dev, DMA_BIT_MASK(64));
	if (ret)
		goto unregister;
	/*
	 * Segments as large as a NIC takes (the default is 64 KiB). With
	 * dma_parms set this cannot fail; 6.12 made it return void.
	 */
	itest_pdev->dev.dma_parms = &itest_dma_parms;
	dma_set_max_seg_size(&itest_pdev->dev, UINT_MAX);
	itest_dir = debugfs_create_dir(KBUILD_MODNAME, NULL);
	debugfs_create_file("import", 0600, itest_dir, NULL, &import_fops);
	debugfs_create_file("kvcalloc", 0200, itest_dir, NULL, &kvcalloc_fops);
	debugfs_create_file("hold", 0600, itest_dir, NULL, &hold_fops);
	return 0;

unregister:
	platform_device_unregister(itest_pdev);
	return ret;
}

static void __exit itest_exit(void)
{
	debugfs_remove_recursive(itest_dir);
	mutex_lock(&itest_lock);
	itest_release_held();
	mutex_unlock(&itest_lock);
	platform_device_unregister(itest_pdev);
}

module_init(itest_init);
module_exit(itest_exit);

MODULE_DESCRIPTION("mrpool selftest: import a slice's dma-buf");
MODULE_LICENSE("GPL");
