// SPDX-License-Identifier: GPL-2.0
/*
 * DOC: per-device sysfs
 *
 * /sys/module/mrpool/devices/<ib_device>/ holds one directory per RDMA
 * device the kernel MR cache was given, usable or not: node, state, reason,
 * registered chunks and counters. Documented in
 * kmod/ABI/sysfs-mrpool-devices. The directory's kobject is the reference
 * count of struct mrpool_ib_dev.
 */
#include "ib.h"

#include <linux/module.h>
#include <linux/slab.h>
#include <linux/sysfs.h>

static struct kobject *mrpool_ib_devices_kobj;

static ssize_t node_show(struct kobject *kobj, struct kobj_attribute *attr,
			 char *buf)
{
	return sysfs_emit(buf, "%d\n", to_mrpool_ib_dev(kobj)->node);
}

static struct kobj_attribute mrpool_ib_attr_node = __ATTR_RO(node);

static ssize_t state_show(struct kobject *kobj, struct kobj_attribute *attr,
			  char *buf)
{
	struct mrpool_ib_dev *d = to_mrpool_ib_dev(kobj);

	return sysfs_emit(buf, "%s\n",
			  mrpool_ib_state_name(READ_ONCE(d->state)));
}

static struct kobj_attribute mrpool_ib_attr_state = __ATTR_RO(state);

static ssize_t reason_show(struct kobject *kobj, struct kobj_attribute *attr,
			   char *buf)
{
	struct mrpool_ib_dev *d = to_mrpool_ib_dev(kobj);
	ssize_t n;

	/* The text is rewritten under the lock when the state changes. */
	mutex_lock(&mrpool_ib_lock);
	n = sysfs_emit(buf, "%s\n", d->reason);
	mutex_unlock(&mrpool_ib_lock);
	return n;
}

static struct kobj_attribute mrpool_ib_attr_reason = __ATTR_RO(reason);

static ssize_t chunks_show(struct kobject *kobj, struct kobj_attribute *attr,
			   char *buf)
{
	return sysfs_emit(buf, "%d\n",
			  atomic_read(&to_mrpool_ib_dev(kobj)->nr_mrs));
}

static struct kobj_attribute mrpool_ib_attr_chunks = __ATTR_RO(chunks);

static ssize_t kbufs_show(struct kobject *kobj, struct kobj_attribute *attr,
			  char *buf)
{
	return sysfs_emit(buf, "%d\n",
			  atomic_read(&to_mrpool_ib_dev(kobj)->kbufs));
}

static struct kobj_attribute mrpool_ib_attr_kbufs = __ATTR_RO(kbufs);

/* The 64-bit counters of struct mrpool_ib_dev, one attribute each. */
struct mrpool_ib_counter_attr {
	struct kobj_attribute kattr;
	size_t offset;			/* of an atomic64_t in mrpool_ib_dev */
};

static ssize_t mrpool_ib_counter_show(struct kobject *kobj,
				      struct kobj_attribute *attr, char *buf)
{
	struct mrpool_ib_counter_attr *ca =
		container_of(attr, struct mrpool_ib_counter_attr, kattr);
	atomic64_t *counter = (void *)to_mrpool_ib_dev(kobj) + ca->offset;

	return sysfs_emit(buf, "%lld\n", atomic64_read(counter));
}

static struct mrpool_ib_counter_attr mrpool_ib_counters[] = {
	{ __ATTR(regs, 0444, mrpool_ib_counter_show, NULL),
	  offsetof(struct mrpool_ib_dev, regs) },
	{ __ATTR(invalidations, 0444, mrpool_ib_counter_show, NULL),
	  offsetof(struct mrpool_ib_dev, invalidations) },
	{ __ATTR(reg_failures, 0444, mrpool_ib_counter_show, NULL),
	  offsetof(struct mrpool_ib_dev, reg_failures) },
	{ __ATTR(wr_timeouts, 0444, mrpool_ib_counter_show, NULL),
	  offsetof(struct mrpool_ib_dev, wr_timeouts) },
	{ __ATTR(qp_drains, 0444, mrpool_ib_counter_show, NULL),
	  offsetof(struct mrpool_ib_dev, qp_drains) },
	{ __ATTR(dereg_failures, 0444, mrpool_ib_counter_show, NULL),
	  offsetof(struct mrpool_ib_dev, dereg_failures) },
	{ __ATTR(recoveries, 0444, mrpool_ib_counter_show, NULL),
	  offsetof(struct mrpool_ib_dev, recoveries) },
	{ __ATTR(recover_failures, 0444, mrpool_ib_counter_show, NULL),
	  offsetof(struct mrpool_ib_dev, recover_failures) },
};

static struct attribute *mrpool_ib_dev_attrs[] = {
	&mrpool_ib_attr_node.attr,
	&mrpool_ib_attr_state.attr,
	&mrpool_ib_attr_reason.attr,
	&mrpool_ib_attr_chunks.attr,
	&mrpool_ib_attr_kbufs.attr,
	&mrpool_ib_counters[0].kattr.attr,
	&mrpool_ib_counters[1].kattr.attr,
	&mrpool_ib_counters[2].kattr.attr,
	&mrpool_ib_counters[3].kattr.attr,
	&mrpool_ib_counters[4].kattr.attr,
	&mrpool_ib_counters[5].kattr.attr,
	&mrpool_ib_counters[6].kattr.attr,
	&mrpool_ib_counters[7].kattr.attr,
	NULL,
};
ATTRIBUTE_GROUPS(mrpool_ib_dev);

static void mrpool_ib_dev_kobj_release(struct kobject *kobj)
{
	struct mrpool_ib_dev *d = to_mrpool_ib_dev(kobj);

	xa_destroy(&d->mrs);
	mutex_destroy(&d->lock);
	kfree(d);
}

static const struct kobj_type mrpool_ib_dev_ktype = {
	.release = mrpool_ib_dev_kobj_release,
	.sysfs_ops = &kobj_sysfs_ops,
	.default_groups = mrpool_ib_dev_groups,
};

/* A new device object with one reference, not yet in sysfs. */
struct mrpool_ib_dev *mrpool_ib_dev_alloc(struct ib_device *ibdev, int node)
{
	struct mrpool_ib_dev *d;

	BUILD_BUG_ON(ARRAY_SIZE(mrpool_ib_counters) != 8);
	d = kzalloc_node(sizeof(*d), GFP_KERNEL, node);
	if (!d)
		return NULL;
	kobject_init(&d->kobj, &mrpool_ib_dev_ktype);
	INIT_LIST_HEAD(&d->link);
	d->ibdev = ibdev;
	d->node = node;
	strscpy(d->name, dev_name(&ibdev->dev), sizeof(d->name));
	mutex_init(&d->lock);
	xa_init(&d->mrs);
	INIT_LIST_HEAD(&d->lends);
	INIT_LIST_HEAD(&d->stuck);
	INIT_LIST_HEAD(&d->sessions);
	INIT_DELAYED_WORK(&d->recover, mrpool_ib_recover_work);
	ratelimit_state_init(&d->recover_rs, DEFAULT_RATELIMIT_INTERVAL,
			     DEFAULT_RATELIMIT_BURST);
	return d;
}

/* sysfs is informational: a failure here never refuses the device. */
void mrpool_ib_dev_publish(struct mrpool_ib_dev *d)
{
	int ret;

	if (!mrpool_ib_devices_kobj)
		return;
	ret = kobject_add(&d->kobj, mrpool_ib_devices_kobj, "%s", d->name);
	if (ret) {
		pr_warn("%s: no sysfs directory: %d\n", d->name, ret);
		return;
	}
	d->in_sysfs = true;
}

void mrpool_ib_dev_unpublish(struct mrpool_ib_dev *d)
{
	if (d->in_sysfs)
		kobject_del(&d->kobj);
	d->in_sysfs = false;
}

int mrpool_ib_sysfs_init(void)
{
	mrpool_ib_devices_kobj = kobject_create_and_add("devices",
							&THIS_MODULE->mkobj.kobj);
	return mrpool_ib_devices_kobj ? 0 : -ENOMEM;
}

void mrpool_ib_sysfs_exit(void)
{
	kobject_put(mrpool_ib_devices_kobj);
	mrpool_ib_devices_kobj = NULL;
}
