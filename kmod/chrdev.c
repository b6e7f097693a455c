// SPDX-License-Identifier: GPL-2.0
/*
 * /dev/mrpool: open/close (one client per file) and the ioctls. Commands
 * are dispatched on type and number only: the size bits of the command
 * change as structs grow, and each struct carries its own size instead.
 */
#include "mrpool.h"

#include <linux/fs.h>
#include <linux/miscdevice.h>
#include <linux/module.h>
#include <linux/uaccess.h>
#include <linux/string.h>

static int mrpool_open(struct inode *inode, struct file *file)
{
	struct mrpool_client *client;

	if (!current->mm)
		return -EPERM;
	client = mrpool_client_create();
	if (!client)
		return -ENOMEM;
	/* Replaces the miscdevice pointer misc_open() stored there. */
	file->private_data = client;
	return 0;
}

static int mrpool_release(struct inode *inode, struct file *file)
{
	mrpool_client_close(file->private_data);
	return 0;
}

/*
 * Copy an ioctl struct whose first field is its size: at least @minsize
 * (the first published size), at most MRPOOL_MAX_STRUCT_SIZE; bytes beyond
 * what the kernel knows must be zero (-E2BIG otherwise).
 */
int mrpool_copy_in(void *karg, size_t ksize, size_t minsize,
		   const void __user *uarg, u32 *usize)
{
	u32 size;
	int ret;

	if (get_user(size, (const u32 __user *)uarg))
		return -EFAULT;
	if (size < minsize || size > MRPOOL_MAX_STRUCT_SIZE)
		return -EINVAL;
	ret = copy_struct_from_user(karg, ksize, uarg, size);
	if (ret)
		return ret;
	*usize = size;
	return 0;
}

int mrpool_copy_out(void __user *uarg, const void *karg, size_t ksize,
		    u32 usize)
{
	if (copy_to_user(uarg, karg, min_t(size_t, ksize, usize)))
		return -EFAULT;
	return 0;
}

static long mrpool_ioc_query(struct mrpool_client *client, void __user *uarg)
{
	struct mrpool_stats *st = &mrpool_stats;
	struct mrpool_snapshot snap;
	struct mrpool_query q;
	u32 usize;
	int ret;

	ret = mrpool_copy_in(&q, sizeof(q), MRPOOL_QUERY_SIZE_V1, uarg, &usize);
	if (ret)
		return ret;
	if (memchr_inv(q.reserved, 0, sizeof(q.reserved)))
		return -EINVAL;

	/* Without the pool lock: the totals of one moment. */
	mrpool_pool_snapshot(&snap);
	q.abi_version = MRPOOL_ABI_VERSION;
	q.features = MRPOOL_FEATURE_FORK_COPY;
	q.chunk_size = mrpool_pool.chunk_size;
	q.node = mrpool_pool_node();
	q.ndevices = mrpool_devices_ready();
	q.total_bytes = mrpool_pool_bytes(snap.nr_total);
	q.free_bytes = mrpool_pool_bytes(snap.nr_free);
	q.used_bytes = mrpool_pool_bytes(snap.nr_used);
	q.quarantined_bytes = mrpool_pool_bytes(snap.nr_quarantined);
	q.max_bytes = mrpool_max_bytes();
	/*
	 * What the file and its user hold is the owner's to know, not that
	 * of a process the descriptor was inherited by or passed to.
	 */
	q.file_bytes = 0;
	q.user_bytes = 0;
	q.user_quarantined_bytes = 0;
	if (mrpool_client_is_owner(client)) {
		mutex_lock(&client->lock);
		q.file_bytes = client->bytes;
		mutex_unlock(&client->lock);
		q.user_bytes = mrpool_tenant_bytes(client->tenant,
						   &q.user_quarantined_bytes);
	}
	q.allocs = atomic64_read(&st->allocs);
	q.frees = atomic64_read(&st->frees);
	q.alloc_failures = atomic64_read(&st->fail_nomem) +
			   atomic64_read(&st->fail_quota) +
			   atomic64_read(&st->fail_memlock) +
			   atomic64_read(&st->fail_injected);
	return mrpool_copy_out(uarg, &q, sizeof(q), usize);
}

static long mrpool_ioc_alloc(struct mrpool_client *client, void __user *uarg)
{
	struct mrpool_alloc a;
	u32 usize;
	int ret;

	ret = mrpool_copy_in(&a, sizeof(a), MRPOOL_ALLOC_SIZE_V1, uarg, &usize);
	if (ret)
		return ret;
	ret = mrpool_slice_alloc(client, &a);
	if (ret)
		return ret;
	ret = mrpool_copy_out(uarg, &a, sizeof(a), usize);
	/* The caller never learnt the id: undo rather than leak until close. */
	if (ret)
		mrpool_slice_free(client, a.slice_id);
	return ret;
}

static long mrpool_ioc_free(struct mrpool_client *client, void __user *uarg)
{
	struct mrpool_free f;
	u32 usize;
	int ret;

	ret = mrpool_copy_in(&f, sizeof(f), MRPOOL_FREE_SIZE_V1, uarg, &usize);
	if (ret)
		return ret;
	if (f.flags || memchr_inv(f.reserved, 0, sizeof(f.reserved)))
		return -EINVAL;
	return mrpool_slice_free(client, f.slice_id);
}

/*
 * What a command that changes the pool or hands out writable memory needs
 * before it looks at its argument: a file open for writing (-EBADF, as
 * write(2) on an O_RDONLY descriptor), then the process that opened it
 * (-EPERM). A file's slices, and so everything exported from them, come
 * only through ALLOC: a read-only file never holds one. QUERY and DEVICES
 * read and stay open to any mode.
 */
static int mrpool_may_change(struct file *file)
{
	if (!(file->f_mode & FMODE_WRITE))
		return -EBADF;
	if (!mrpool_client_is_owner(file->private_data))
		return -EPERM;
	return 0;
}

static long mrpool_ioctl(struct file *file, unsigned int cmd,
			 unsigned long arg)
{
	struct mrpool_client *client = file->private_data;
	void __user *uarg = (void __user *)arg;
	int ret;

	if (_IOC_TYPE(cmd) != MRPOOL_IOC_MAGIC)
		return -ENOTTY;
	switch (_IOC_NR(cmd)) {
	case _IOC_NR(MRPOOL_IOC_QUERY):
		return mrpool_ioc_query(client, uarg);
	case _IOC_NR(MRPOOL_IOC_ALLOC):
		ret = mrpool_may_change(file);
		return ret ?: mrpool_ioc_alloc(client, uarg);
	case _IOC_NR(MRPOOL_IOC_FREE):
		ret = mrpool_may_change(file);
		return ret ?: mrpool_ioc_free(client, uarg);
	case _IOC_NR(MRPOOL_IOC_DEVICES):
		return mrpool_ioc_devices(uarg);
	case _IOC_NR(MRPOOL_IOC_EXPORT_DMABUF):
		ret = mrpool_may_change(file);
		return ret ?: mrpool_ioc_export_dmabuf(file, uarg);
	case _IOC_NR(MRPOOL_IOC_SLICE_KEYS):
		/* Keys of the file's own slices: only a writer has any. */
		ret = mrpool_may_change(file);
		return ret ?: mrpool_ioc_slice_keys(client, uarg);
	default:
		return -ENOTTY;
	}
}

static const struct file_operations mrpool_fops = {
	.owner = THIS_MODULE,
	.open = mrpool_open,
	.release = mrpool_release,
	.unlocked_ioctl = mrpool_ioctl,
	.compat_ioctl = compat_ptr_ioctl,
	.mmap = mrpool_mmap,
	.get_unmapped_area = mrpool_get_unmapped_area,
	.llseek = noop_llseek,
};

static struct miscdevice mrpool_misc = {
	.minor = MISC_DYNAMIC_MINOR,
	.name = MRPOOL_DEV_NAME,
	.fops = &mrpool_fops,
	.groups = mrpool_groups,
	/* Anyone may take slices: each is charged and owned by its file. */
	.mode = 0666,
};

int mrpool_chrdev_init(void)
{
	int ret;

	mrpool_sysfs_init();
	ret = misc_register(&mrpool_misc);
	if (ret)
		pr_err("cannot register /dev/%s: %d\n", MRPOOL_DEV_NAME, ret);
	return ret;
}

void mrpool_chrdev_exit(void)
{
	misc_deregister(&mrpool_misc);
}
