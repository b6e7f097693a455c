// SPDX-License-Identifier: GPL-2.0
/*
 * The map file: every VMA of a slice (and of the stats page) holds a file
 * of its own client instead of /dev/mrpool's, swapped in by .mmap with
 * vma_set_file() as dma-buf exporters do. So closing the device file --
 * the last close(), or the owner exiting -- releases the client's unmapped
 * slices at once even while a slice stays mapped.
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

static struct vfsmount *mrpool_mnt;

static int mrpool_fs_init_fs_context(struct fs_context *fc)
{
	return init_pseudo(fc, MRPOOL_FS_MAGIC) ? 0 : -ENOMEM;
}

static struct file_system_type mrpool_fs_type = {
	.name = "mrpool",
	.init_fs_context = mrpool_fs_init_fs_context,
	.kill_sb = kill_anon_super,
};

/* The last VMA that held the file is gone. */
static int mrpool_mapfile_release(struct inode *inode, struct file *file)
{
	mrpool_client_put(file->private_data);
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

	inode = alloc_anon_inode(mrpool_mnt->mnt_sb);
	if (IS_ERR(inode))
		return ERR_CAST(inode);
	i_size_write(inode, MAX_LFS_FILESIZE);
	/* The file's f_op pins the module until its release has run. */
	__module_get(THIS_MODULE);
	file = alloc_file_pseudo(inode, mrpool_mnt, "[mrpool]", O_RDWR,
				 &mrpool_mapfile_fops);
	if (IS_ERR(file)) {
		module_put(THIS_MODULE);
		iput(inode);
		return file;
	}
	kref_get(&client->ref);
	file->private_data = client;
	return file;
}

int mrpool_mapfile_init(void)
{
	mrpool_mnt = kern_mount(&mrpool_fs_type);
	if (IS_ERR(mrpool_mnt)) {
		pr_err("cannot mount the map file system: %ld\n",
		       PTR_ERR(mrpool_mnt));
		return PTR_ERR(mrpool_mnt);
	}
	return 0;
}

void mrpool_mapfile_exit(void)
{
	kern_unmount(mrpool_mnt);
}
