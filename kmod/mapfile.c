// SPDX-License-Identifier: GPL-2.0
/*
 * The map file: every VMA of a slice (and of the stats page) holds a file
 * of its own client instead of /dev/mrpool's, swapped in by .mmap with
 * vma_set_file() as dma-buf exporters do. So closing the device file --
 * the last close(), or the owner exiting -- releases the client's unmapped
 * slices at once even while a slice stays mapped. Its mapping is also
 * where every VMA of the client's slices hangs: a revocation zaps a
 * slice's range of it (revoke.c).
 *
 * Each map file has its own inode on a private pseudo filesystem (as
 * dma-buf and secretmem have), not the shared anon inode: no other
 * subsystem's mapping tree or size, and an i_size that covers every
 * mmap offset, which kernels whose fault path checks that a folio lies
 * within i_size need before they map a chunk with one PMD.
 */
#include "mrpool.h"

#include <linux/fs.h>
#include <linux/file.h>
#include <linux/mount.h>
#include <linux/pseudo_fs.h>
#include <linux/module.h>

#define MRPOOL_FS_MAGIC	0x6d72706c	/* "mrpl" */

/*
 * Pinned by every map file (simple_pin_fs), so the superblock, and through
 * its file_system_type the module, outlive the last map file's __fput():
 * that drops the file's module reference (fops_put) before its mount's.
 */
static struct vfsmount *mrpool_mnt;
static int mrpool_mnt_count;

static int mrpool_fs_init_fs_context(struct fs_context *fc)
{
	return init_pseudo(fc, MRPOOL_FS_MAGIC) ? 0 : -ENOMEM;
}

static struct file_system_type mrpool_fs_type = {
	.owner = THIS_MODULE,
	.name = "mrpool",
	.init_fs_context = mrpool_fs_init_fs_context,
	.kill_sb = kill_anon_super,
};

/* The last VMA that held the file is gone. */
static int mrpool_mapfile_release(struct inode *inode, struct file *file)
{
	mrpool_client_put(file->private_data);
	/* The file's own mount reference keeps the superblock a while yet. */
	simple_release_fs(&mrpool_mnt, &mrpool_mnt_count);
	return 0;
}

static const struct file_operations mrpool_mapfile_fops = {
	.owner = THIS_MODULE,
	.release = mrpool_mapfile_release,
	/* mremap() moves a mapping through its VMA's file. */
	.get_unmapped_area = mrpool_get_unmapped_area,
};

/**
 * mrpool_mapfile_create - the file @client's VMAs will hold
 * @client: a new client; the file takes a reference to it
 *
 * Return: the file, or an ERR_PTR.
 */
struct file *mrpool_mapfile_create(struct mrpool_client *client)
{
	struct inode *inode;
	struct file *file;
	int ret;

	ret = simple_pin_fs(&mrpool_fs_type, &mrpool_mnt, &mrpool_mnt_count);
	if (ret)
		return ERR_PTR(ret);
	inode = alloc_anon_inode(mrpool_mnt->mnt_sb);
	if (IS_ERR(inode)) {
		file = ERR_CAST(inode);
		goto unpin;
	}
	i_size_write(inode, MAX_LFS_FILESIZE);
	/* The file's f_op pins the module until its release has run. */
	__module_get(THIS_MODULE);
	file = alloc_file_pseudo(inode, mrpool_mnt, "[mrpool]", O_RDWR,
				 &mrpool_mapfile_fops);
	if (IS_ERR(file)) {
		module_put(THIS_MODULE);
		iput(inode);
		goto unpin;
	}
	kref_get(&client->ref);
	file->private_data = client;
	return file;

unpin:
	simple_release_fs(&mrpool_mnt, &mrpool_mnt_count);
	return file;
}
