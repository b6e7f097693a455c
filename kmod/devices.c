// SPDX-License-Identifier: GPL-2.0
/*
 * MRPOOL_IOC_DEVICES: the RDMA devices the ib_core client knows, with
 * their state and how many chunks the kernel MR cache holds for each, and
 * the ready-device count QUERY reports. MRPOOL_IOC_SLICE_KEYS: the kernel
 * keys of a slice's chunks (informational). Snapshots are taken under
 * mrpool_ib_lock and copied out after it is dropped (a fault in the
 * caller's buffer must not happen under the lock).
 */
#include "mrpool.h"
#include "ib.h"

#include <linux/slab.h>
#include <linux/string.h>
#include <linux/uaccess.h>
#include <linux/capability.h>

/* Entry @i of a user array @usize bytes apart: @e, then zeroes. */
static int mrpool_put_entry(u64 base, u32 usize, unsigned int i,
			    const void *e, size_t ksize)
{
	u8 __user *dst = (u8 __user *)u64_to_user_ptr(base) + (u64)i * usize;
	size_t n = min_t(size_t, usize, ksize);

	if (copy_to_user(dst, e, n) || clear_user(dst + n, usize - n))
		return -EFAULT;
	return 0;
}

/* Devices the client knows, ready or not. */
static unsigned int mrpool_devices_count(void)
{
	struct mrpool_ib_dev *d;
	unsigned int n = 0;

	mutex_lock(&mrpool_ib_lock);
	list_for_each_entry(d, &mrpool_ib_devs, link)
		n++;
	mutex_unlock(&mrpool_ib_lock);
	return n;
}

/* Devices whose kernel MR cache is in use: QUERY's ndevices. */
unsigned int mrpool_devices_ready(void)
{
	struct mrpool_ib_dev *d;
	unsigned int n = 0;

	mutex_lock(&mrpool_ib_lock);
	list_for_each_entry(d, &mrpool_ib_devs, link)
		n += d->state == MRPOOL_IB_READY;
	mutex_unlock(&mrpool_ib_lock);
	return n;
}

/*
 * Up to @max entries into a new array *@out (NULL when @max is 0).
 * Return: the number of devices, or -ENOMEM.
 */
static int mrpool_devices_snapshot(unsigned int max,
				   struct mrpool_device **out)
{
	struct mrpool_device *v = NULL, *e;
	struct mrpool_ib_dev *d;
	unsigned int n = 0;

	mutex_lock(&mrpool_ib_lock);
	list_for_each_entry(d, &mrpool_ib_devs, link)
		n++;
	max = min(max, n);
	if (max) {
		v = mrpool_kcalloc(max, sizeof(*v), GFP_KERNEL);
		if (!v) {
			mutex_unlock(&mrpool_ib_lock);
			return -ENOMEM;
		}
	}
	e = v;
	list_for_each_entry(d, &mrpool_ib_devs, link) {
		if (e == v + max)
			break;
		strscpy(e->name, d->name, sizeof(e->name));
		e->node = d->node;
		e->state = mrpool_ib_state_uapi(d->state);
		e->nr_chunks = atomic_read(&d->nr_mrs);
		if (d->state != MRPOOL_IB_READY)
			strscpy(e->reason, d->reason, sizeof(e->reason));
		e++;
	}
	mutex_unlock(&mrpool_ib_lock);
	*out = v;
	return n;
}

/**
 * mrpool_ioc_devices - MRPOOL_IOC_DEVICES
 * @uarg: struct mrpool_devices in user memory
 *
 * Return: 0; -EINVAL for a malformed request; -EFAULT for an unwritable
 * entry array; -ENOMEM.
 */
long mrpool_ioc_devices(void __user *uarg)
{
	struct mrpool_device *v = NULL;
	struct mrpool_devices a;
	unsigned int i, fill;
	u32 usize;
	int ret;

	ret = mrpool_copy_in(&a, sizeof(a), MRPOOL_DEVICES_SIZE_V1, uarg,
			     &usize);
	if (ret)
		return ret;
	if (a.flags || a.pad || memchr_inv(a.reserved, 0, sizeof(a.reserved)))
		return -EINVAL;
	if (a.entry_size < MRPOOL_DEVICE_SIZE_V1 ||
	    a.entry_size > MRPOOL_MAX_STRUCT_SIZE)
		return -EINVAL;

	ret = mrpool_devices_snapshot(a.count, &v);
	if (ret < 0)
		return ret;
	a.total = ret;
	fill = min(a.count, a.total);

	ret = 0;
	for (i = 0; i < fill && !ret; i++)
		ret = mrpool_put_entry(a.entries, a.entry_size, i, &v[i],
				       sizeof(v[i]));
	kfree(v);
	if (ret)
		return ret;
	return mrpool_copy_out(uarg, &a, sizeof(a), usize);
}

/**
 * mrpool_ioc_slice_keys - MRPOOL_IOC_SLICE_KEYS
 * @client: the calling file, the slice's owner
 * @uarg: struct mrpool_slice_keys in user memory
 *
 * Return: 0; -EINVAL for a malformed request; -ENOENT for a slice that is
 * not a live slice of @client, or was freed meanwhile; -EFAULT; -ENOMEM.
 */
long mrpool_ioc_slice_keys(struct mrpool_client *client, void __user *uarg)
{
	struct mrpool_ib_key *keys = NULL;
	struct mrpool_slice_keys a;
	struct mrpool_slice_key e;
	unsigned int i, j, n, max;
	struct mrpool_slice *s;
	bool show_iova;
	u32 usize;
	int ret;

	/*
	 * A kernel virtual or a physical address: KASLR and pagemap hide
	 * those. It picks what to show, it refuses nothing: no audit record
	 * (an AVC denial under SELinux) for every unprivileged call.
	 */
	show_iova = ns_capable_noaudit(&init_user_ns, CAP_SYS_ADMIN);
	ret = mrpool_copy_in(&a, sizeof(a), MRPOOL_SLICE_KEYS_SIZE_V1, uarg,
			     &usize);
	if (ret)
		return ret;
	if (a.flags || a.pad || memchr_inv(a.reserved, 0, sizeof(a.reserved)))
		return -EINVAL;
	if (a.entry_size < MRPOOL_SLICE_KEY_SIZE_V1 ||
	    a.entry_size > MRPOOL_MAX_STRUCT_SIZE)
		return -EINVAL;
	/* The reference keeps the slice; mem_sem its chunks (revoke.c). */
	s = mrpool_slice_get_id(client, a.slice_id);
	if (!s)
		return -ENOENT;
	max = mrpool_devices_count();
	if (max) {
		keys = mrpool_kcalloc(max, sizeof(*keys), GFP_KERNEL);
		if (!keys) {
			ret = -ENOMEM;
			goto put;
		}
	}

	a.total = 0;
	for (i = 0; i < s->nr_chunks && !ret; i++) {
		/*
		 * The chunk is the slice's until a revocation (a FREE from
		 * another thread) returns it: read its keys before that, and
		 * copy them out after (a fault on the slice takes mem_sem).
		 */
		if (!mrpool_slice_mem_read(s)) {
			ret = -ENOENT;
			break;
		}
		n = min_t(unsigned int,
			  mrpool_ib_chunk_keys(s->chunkv[i], keys, max), max);
		mrpool_slice_mem_done(s);
		for (j = 0; j < n && !ret; j++, a.total++) {
			if (a.total >= a.count)
				continue;
			memset(&e, 0, sizeof(e));
			strscpy(e.device, keys[j].name, sizeof(e.device));
			e.chunk = i;
			e.lkey = keys[j].lkey;
			e.rkey = keys[j].rkey;
			e.iova = show_iova ? keys[j].iova : 0;
			ret = mrpool_put_entry(a.entries, a.entry_size, a.total,
					       &e, sizeof(e));
		}
	}
	kfree(keys);
put:
	mrpool_slice_put(s);
	if (ret)
		return ret;
	return mrpool_copy_out(uarg, &a, sizeof(a), usize);
}
