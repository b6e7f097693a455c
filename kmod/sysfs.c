// SPDX-License-Identifier: GPL-2.0
/*
 * DOC: sysfs
 *
 * Stable attributes of the pool under /sys/class/misc/mrpool/ (totals and
 * geometry) and /sys/class/misc/mrpool/stats/ (counters since load). The
 * ABI is documented in kmod/ABI/sysfs-class-misc-mrpool. Tunables are
 * module parameters (kmod/ABI/sysfs-module-mrpool).
 *
 * The totals are read without the pool lock (mrpool_pool_snapshot()), so
 * reading them in a loop never slows ALLOC or FREE: each file shows one
 * moment's value (blocks_per_order all its counts of one moment), two
 * files may show two moments. Each counter under stats/ is read on its
 * own.
 */
#include "mrpool.h"

#include <linux/device.h>
#include <linux/sysfs.h>

enum mrpool_total {
	MRPOOL_TOTAL,
	MRPOOL_FREE,
	MRPOOL_USED,
	MRPOOL_QUARANTINED,
};

static ssize_t mrpool_show_bytes(char *buf, enum mrpool_total which)
{
	struct mrpool_snapshot snap;
	unsigned long nr;

	mrpool_pool_snapshot(&snap);
	switch (which) {
	case MRPOOL_TOTAL:
		nr = snap.nr_total;
		break;
	case MRPOOL_FREE:
		nr = snap.nr_free;
		break;
	case MRPOOL_USED:
		nr = snap.nr_used;
		break;
	default:
		nr = snap.nr_quarantined;
		break;
	}
	return sysfs_emit(buf, "%llu\n", mrpool_pool_bytes(nr));
}

static ssize_t total_bytes_show(struct device *dev,
				struct device_attribute *attr, char *buf)
{
	return mrpool_show_bytes(buf, MRPOOL_TOTAL);
}
static DEVICE_ATTR_RO(total_bytes);

static ssize_t free_bytes_show(struct device *dev,
			       struct device_attribute *attr, char *buf)
{
	return mrpool_show_bytes(buf, MRPOOL_FREE);
}
static DEVICE_ATTR_RO(free_bytes);

static ssize_t used_bytes_show(struct device *dev,
			       struct device_attribute *attr, char *buf)
{
	return mrpool_show_bytes(buf, MRPOOL_USED);
}
static DEVICE_ATTR_RO(used_bytes);

static ssize_t quarantined_bytes_show(struct device *dev,
				      struct device_attribute *attr, char *buf)
{
	return mrpool_show_bytes(buf, MRPOOL_QUARANTINED);
}
static DEVICE_ATTR_RO(quarantined_bytes);

static ssize_t max_bytes_show(struct device *dev,
			      struct device_attribute *attr, char *buf)
{
	return sysfs_emit(buf, "%llu\n", mrpool_max_bytes());
}
static DEVICE_ATTR_RO(max_bytes);

static ssize_t chunk_bytes_show(struct device *dev,
				struct device_attribute *attr, char *buf)
{
	return sysfs_emit(buf, "%zu\n", mrpool_pool.chunk_size);
}
static DEVICE_ATTR_RO(chunk_bytes);

static ssize_t node_show(struct device *dev, struct device_attribute *attr,
			 char *buf)
{
	return sysfs_emit(buf, "%d\n", mrpool_pool_node());
}
static DEVICE_ATTR_RO(node);

/* Blocks the chunks are built of, one count per page order from 0. */
static ssize_t blocks_per_order_show(struct device *dev,
				     struct device_attribute *attr, char *buf)
{
	struct mrpool_snapshot snap;
	unsigned int o, n = 0;
	unsigned int top = mrpool_pool.chunk_order;

	mrpool_pool_snapshot(&snap);
	for (o = 0; o <= top; o++)
		n += sysfs_emit_at(buf, n, "%lu%c", snap.blocks[o],
				   o == top ? '\n' : ' ');
	return n;
}
static DEVICE_ATTR_RO(blocks_per_order);

static struct attribute *mrpool_attrs[] = {
	&dev_attr_total_bytes.attr,
	&dev_attr_free_bytes.attr,
	&dev_attr_used_bytes.attr,
	&dev_attr_quarantined_bytes.attr,
	&dev_attr_max_bytes.attr,
	&dev_attr_chunk_bytes.attr,
	&dev_attr_node.attr,
	&dev_attr_blocks_per_order.attr,
	NULL,
};

static const struct attribute_group mrpool_attr_group = {
	.attrs = mrpool_attrs,
};

/* A counter of struct mrpool_stats shown as one attribute. */
struct mrpool_stat_attr {
	struct device_attribute dattr;
	size_t offset;			/* into struct mrpool_stats */
};

static ssize_t mrpool_stat_show(struct device *dev,
				struct device_attribute *attr, char *buf)
{
	struct mrpool_stat_attr *sa =
		container_of(attr, struct mrpool_stat_attr, dattr);
	atomic64_t *counter = (void *)&mrpool_stats + sa->offset;

	return sysfs_emit(buf, "%lld\n", atomic64_read(counter));
}

static struct mrpool_stat_attr mrpool_stat_table[] = {
	{ __ATTR(allocs, 0444, mrpool_stat_show, NULL),
	  offsetof(struct mrpool_stats, allocs) },
	{ __ATTR(frees, 0444, mrpool_stat_show, NULL),
	  offsetof(struct mrpool_stats, frees) },
	{ __ATTR(fail_nomem, 0444, mrpool_stat_show, NULL),
	  offsetof(struct mrpool_stats, fail_nomem) },
	{ __ATTR(fail_quota, 0444, mrpool_stat_show, NULL),
	  offsetof(struct mrpool_stats, fail_quota) },
	{ __ATTR(fail_memlock, 0444, mrpool_stat_show, NULL),
	  offsetof(struct mrpool_stats, fail_memlock) },
	{ __ATTR(fail_injected, 0444, mrpool_stat_show, NULL),
	  offsetof(struct mrpool_stats, fail_injected) },
	{ __ATTR(chunk_alloc_failures, 0444, mrpool_stat_show, NULL),
	  offsetof(struct mrpool_stats, chunk_alloc_failures) },
	{ __ATTR(grows, 0444, mrpool_stat_show, NULL),
	  offsetof(struct mrpool_stats, grows) },
	{ __ATTR(trims, 0444, mrpool_stat_show, NULL),
	  offsetof(struct mrpool_stats, trims) },
	{ __ATTR(zeroed, 0444, mrpool_stat_show, NULL),
	  offsetof(struct mrpool_stats, zeroed) },
	{ __ATTR(quarantines, 0444, mrpool_stat_show, NULL),
	  offsetof(struct mrpool_stats, quarantines) },
	{ __ATTR(node_fallbacks, 0444, mrpool_stat_show, NULL),
	  offsetof(struct mrpool_stats, node_fallbacks) },
	{ __ATTR(defrags, 0444, mrpool_stat_show, NULL),
	  offsetof(struct mrpool_stats, defrags) },
	{ __ATTR(quarantine_checks, 0444, mrpool_stat_show, NULL),
	  offsetof(struct mrpool_stats, quarantine_checks) },
	{ __ATTR(retired, 0444, mrpool_stat_show, NULL),
	  offsetof(struct mrpool_stats, retired) },
	{ __ATTR(hwpoison_retired, 0444, mrpool_stat_show, NULL),
	  offsetof(struct mrpool_stats, hwpoison_retired) },
	{ __ATTR(fork_copies, 0444, mrpool_stat_show, NULL),
	  offsetof(struct mrpool_stats, fork_copies) },
	{ __ATTR(fork_copy_bytes, 0444, mrpool_stat_show, NULL),
	  offsetof(struct mrpool_stats, fork_copy_bytes) },
	{ __ATTR(fork_copy_failures, 0444, mrpool_stat_show, NULL),
	  offsetof(struct mrpool_stats, fork_copy_failures) },
	{ __ATTR(orphans_full, 0444, mrpool_stat_show, NULL),
	  offsetof(struct mrpool_stats, orphans_full) },
};

/* Filled by mrpool_sysfs_init() from mrpool_stat_table. */
static struct attribute *mrpool_stat_attrs[ARRAY_SIZE(mrpool_stat_table) + 1];

static const struct attribute_group mrpool_stat_group = {
	.name = "stats",
	.attrs = mrpool_stat_attrs,
};

void mrpool_sysfs_init(void)
{
	unsigned int i;

	for (i = 0; i < ARRAY_SIZE(mrpool_stat_table); i++)
		mrpool_stat_attrs[i] = &mrpool_stat_table[i].dattr.attr;
}

const struct attribute_group *mrpool_groups[] = {
	&mrpool_attr_group,
	&mrpool_stat_group,
	NULL,
};
