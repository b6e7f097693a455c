// SPDX-License-Identifier: GPL-2.0
/*
 * debugfs views of the kernel MR cache, in the pool's mrpool/ directory:
 * mrs (each chunk's keys per device, and each lend), ib_devices, ib_stats
 * (live objects, for leak checks, and waits in progress), failure knobs,
 * wr_timeout_ms (how long a work request is awaited), recover_ms and
 * recover_max_ms (a failed device's first and longest wait before a
 * recovery attempt). Not ABI;
 * errors never fail the module.
 */
#include "ib.h"

#include <linux/debugfs.h>
#include <linux/seq_file.h>

/* The pool's directory, referenced from init to exit. */
static struct dentry *mrpool_ib_debugfs_dir;

static const char *const mrpool_ib_debugfs_files[] = {
	"mrs", "ib_devices", "ib_stats", "fail_ib_setup", "fail_ib_reg",
	"fail_ib_complete", "fail_ib_complete_after", "fail_ib_dereg",
	"fail_ib_dereg_final", "fail_ib_wc", "fail_ib_wc_after", "wr_timeout_ms",
	"recover_ms", "recover_max_ms",
};

/*
 * One MR: the iova is printed as its offset in a chunk-aligned block (0
 * for a chunk mapped in one piece), never as the kernel or bus address it
 * is: %p would not do, slub_debug on the command line turns its hashing
 * off. The chunk's pfn is the key tests match on.
 */
static void mrs_show_one(struct seq_file *m, struct mrpool_ib_dev *d,
			 struct mrpool_ib_mr *e)
{
	seq_printf(m, "%#lx %s %#x %#x %#llx %u %s %d\n",
		   mrpool_ib_chunk_key(e->chunk), d->name, e->lkey,
		   e->lent ? e->rkey : 0,
		   e->iova & ((u64)mrpool_pool.chunk_size - 1),
		   e->page_size, !e->valid ? "invalid" :
		   e->lent ? "remote" : "local", e->lent);
}

/*
 * pfn device lkey rkey iova_offset page_size access lent: cached MRs, then
 * lends. Takes each device's lock: waits while that device waits.
 */
static int mrs_show(struct seq_file *m, void *v)
{
	struct mrpool_ib_mr *e;
	struct mrpool_ib_dev *d;
	unsigned int noio;
	unsigned long key;

	seq_puts(m, "pfn device lkey rkey iova_offset page_size access lent\n");
	for (d = mrpool_ib_dev_next(NULL); d; d = mrpool_ib_dev_next(d)) {
		noio = mrpool_ib_dev_lock(d);
		xa_for_each(&d->mrs, key, e)
			mrs_show_one(m, d, e);
		list_for_each_entry(e, &d->lends, link)
			mrs_show_one(m, d, e);
		mrpool_ib_dev_unlock(d, noio);
	}
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(mrs);

/*
 * name node state chunks kbufs regs invalidations reg_failures wr_timeouts
 * qp_drains dereg_failures recoveries recover_failures reason. Never waits
 * for a device.
 */
static int ib_devices_show(struct seq_file *m, void *v)
{
	struct mrpool_ib_dev *d;

	seq_puts(m, "name node state chunks kbufs regs invalidations reg_failures wr_timeouts qp_drains dereg_failures recoveries recover_failures reason\n");
	mutex_lock(&mrpool_ib_lock);
	list_for_each_entry(d, &mrpool_ib_devs, link)
		seq_printf(m, "%s %d %s %d %d %lld %lld %lld %lld %lld %lld %lld %lld %s\n",
			   d->name, d->node, mrpool_ib_state_name(d->state),
			   atomic_read(&d->nr_mrs), atomic_read(&d->kbufs),
			   atomic64_read(&d->regs),
			   atomic64_read(&d->invalidations),
			   atomic64_read(&d->reg_failures),
			   atomic64_read(&d->wr_timeouts),
			   atomic64_read(&d->qp_drains),
			   atomic64_read(&d->dereg_failures),
			   atomic64_read(&d->recoveries),
			   atomic64_read(&d->recover_failures),
			   d->reason[0] ? d->reason : "-");
	mutex_unlock(&mrpool_ib_lock);
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(ib_devices);

/* "name value" lines: objects alive now, and add/remove totals. */
static int ib_stats_show(struct seq_file *m, void *v)
{
	struct mrpool_ib_stats *st = &mrpool_ib_stats;
	struct mrpool_chunk *c;
	unsigned long key, chunks = 0;
	unsigned int devs = 0;
	struct mrpool_ib_dev *d;

	mutex_lock(&mrpool_ib_lock);
	xa_for_each(&mrpool_ib_chunks, key, c)
		chunks++;
	list_for_each_entry(d, &mrpool_ib_devs, link)
		devs++;
	mutex_unlock(&mrpool_ib_lock);

	seq_printf(m, "devices %u\n", devs);
	seq_printf(m, "chunks %lu\n", chunks);
	seq_printf(m, "pds %d\n", atomic_read(&st->pds));
	seq_printf(m, "mrs %d\n", atomic_read(&st->mrs));
	seq_printf(m, "dma_maps %d\n", atomic_read(&st->dma_maps));
	seq_printf(m, "kbufs %d\n", atomic_read(&st->kbufs));
	seq_printf(m, "lends %d\n", atomic_read(&st->lends));
	seq_printf(m, "sessions %d\n", atomic_read(&st->sessions));
	seq_printf(m, "stuck_mrs %d\n", atomic_read(&st->stuck_mrs));
	seq_printf(m, "wr_waits %d\n", atomic_read(&st->wr_waits));
	seq_printf(m, "devs_added %lld\n", atomic64_read(&st->devs_added));
	seq_printf(m, "devs_removed %lld\n", atomic64_read(&st->devs_removed));
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(ib_stats);

void mrpool_ib_debugfs_init(void)
{
	struct dentry *dir;

	dir = debugfs_lookup(KBUILD_MODNAME, NULL);
	if (IS_ERR_OR_NULL(dir))
		return;
	mrpool_ib_debugfs_dir = dir;
	debugfs_create_file("mrs", 0400, dir, NULL, &mrs_fops);
	debugfs_create_file("ib_devices", 0400, dir, NULL, &ib_devices_fops);
	debugfs_create_file("ib_stats", 0400, dir, NULL, &ib_stats_fops);
	debugfs_create_atomic_t("fail_ib_setup", 0600, dir,
				&mrpool_ib_fail_setup);
	debugfs_create_atomic_t("fail_ib_reg", 0600, dir, &mrpool_ib_fail_reg);
	debugfs_create_atomic_t("fail_ib_complete", 0600, dir,
				&mrpool_ib_fail_complete);
	debugfs_create_atomic_t("fail_ib_complete_after", 0600, dir,
				&mrpool_ib_fail_complete_after);
	debugfs_create_atomic_t("fail_ib_dereg", 0600, dir,
				&mrpool_ib_fail_dereg);
	debugfs_create_atomic_t("fail_ib_dereg_final", 0600, dir,
				&mrpool_ib_fail_dereg_final);
	debugfs_create_atomic_t("fail_ib_wc", 0600, dir, &mrpool_ib_fail_wc);
	debugfs_create_atomic_t("fail_ib_wc_after", 0600, dir,
				&mrpool_ib_fail_wc_after);
	debugfs_create_u32("wr_timeout_ms", 0600, dir, &mrpool_ib_wr_timeout_ms);
	debugfs_create_u32("recover_ms", 0600, dir, &mrpool_ib_recover_ms);
	debugfs_create_u32("recover_max_ms", 0600, dir,
			   &mrpool_ib_recover_max_ms);
}

/* Safe whether or not the pool removed its directory first. */
void mrpool_ib_debugfs_exit(void)
{
	unsigned int i;

	if (!mrpool_ib_debugfs_dir)
		return;
	for (i = 0; i < ARRAY_SIZE(mrpool_ib_debugfs_files); i++)
		debugfs_lookup_and_remove(mrpool_ib_debugfs_files[i],
					  mrpool_ib_debugfs_dir);
	dput(mrpool_ib_debugfs_dir);
	mrpool_ib_debugfs_dir = NULL;
}
