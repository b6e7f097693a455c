// SPDX-License-Identifier: GPL-2.0
/*
 * mrpool: a host-wide pool of pinned, zeroed, physically contiguous chunks
 * handed to processes as slices of /dev/mrpool, ready for ibv_reg_mr().
 *
 * This file holds the module parameters and load/unload. Parameters marked
 * writable may be changed at runtime through
 * /sys/module/mrpool/parameters/ (documented in ABI/sysfs-module-mrpool).
 */
#include "mrpool.h"
#include "ib.h"

#include <linux/module.h>
#include <linux/moduleparam.h>
#include <linux/kernel.h>
#include <linux/mm.h>
#include <linux/nodemask.h>
#include <linux/log2.h>

/* Upper bound of every size parameter, in MiB (1 TiB). */
#define MRPOOL_PARAM_MB_MAX	1048576U
/* Largest idle_trim_sec: one day. */
#define MRPOOL_TRIM_SEC_MAX	86400U

unsigned int mrpool_pool_mb = 8;
module_param_named(pool_mb, mrpool_pool_mb, uint, 0444);
MODULE_PARM_DESC(pool_mb,
		 "MiB allocated at load and never trimmed (default 8; on a host: the steady working set)");

unsigned int mrpool_chunk_kb = 2048;
module_param_named(chunk_kb, mrpool_chunk_kb, uint, 0444);
MODULE_PARM_DESC(chunk_kb,
		 "KiB per chunk, a power of two from PAGE_SIZE up to 4096 (default 2048: one PMD)");

int mrpool_numa_node = NUMA_NO_NODE;
module_param_named(numa_node, mrpool_numa_node, int, 0444);
MODULE_PARM_DESC(numa_node,
		 "NUMA node of the pool's memory, -1 = the RDMA devices' node, else the allocating CPU's (default)");

bool mrpool_pmd_map = true;
module_param_named(pmd_map, mrpool_pmd_map, bool, 0444);
MODULE_PARM_DESC(pmd_map,
		 "Keep PMD-order blocks whole so slices map with huge entries, cheap to pin (default Y)");

bool mrpool_shmem_chunks = true;
module_param_named(shmem_chunks, mrpool_shmem_chunks, bool, 0444);
MODULE_PARM_DESC(shmem_chunks,
		 "Whole PMD chunks are huge folios of a private tmpfs, which GUP-fast pins (6.5+: plain pages take the slow path) (default Y)");

unsigned int mrpool_max_mb = 256;
unsigned int mrpool_idle_trim_sec = 5;
unsigned int mrpool_max_user_mb;

/*
 * Set once the pool exists, cleared before it goes (under the param lock):
 * runtime writes check max_mb >= pool_mb and kick the trim worker only
 * then; at load mrpool_check_params() does the checking.
 */
static bool mrpool_loaded;

static int mrpool_set_max_mb(const char *val, const struct kernel_param *kp)
{
	unsigned int v;
	int ret;

	ret = kstrtouint(val, 0, &v);
	if (ret)
		return ret;
	if (!v || v > MRPOOL_PARAM_MB_MAX)
		return -EINVAL;
	if (mrpool_loaded && v < mrpool_pool_mb)
		return -EINVAL;
	WRITE_ONCE(mrpool_max_mb, v);
	/* The quarantine event's threshold is a share of max_mb. */
	if (mrpool_loaded)
		mrpool_pool_quarantine_check();
	return 0;
}

static const struct kernel_param_ops mrpool_max_mb_ops = {
	.set = mrpool_set_max_mb,
	.get = param_get_uint,
};

module_param_cb(max_mb, &mrpool_max_mb_ops, &mrpool_max_mb, 0644);
MODULE_PARM_DESC(max_mb,
		 "MiB the pool may grow to, >= pool_mb (default 256; on a host: the pinned memory budget) [writable]");

static int mrpool_set_trim(const char *val, const struct kernel_param *kp)
{
	unsigned int v;
	int ret;

	ret = kstrtouint(val, 0, &v);
	if (ret)
		return ret;
	if (v > MRPOOL_TRIM_SEC_MAX)
		return -EINVAL;
	WRITE_ONCE(mrpool_idle_trim_sec, v);
	if (mrpool_loaded)
		mrpool_pool_kick_trim();
	return 0;
}

static const struct kernel_param_ops mrpool_trim_ops = {
	.set = mrpool_set_trim,
	.get = param_get_uint,
};

module_param_cb(idle_trim_sec, &mrpool_trim_ops, &mrpool_idle_trim_sec, 0644);
MODULE_PARM_DESC(idle_trim_sec,
		 "Seconds a chunk above pool_mb stays free before it is given back, 0 = never (default 5) [writable]");

static int mrpool_set_user_mb(const char *val, const struct kernel_param *kp)
{
	unsigned int v;
	int ret;

	ret = kstrtouint(val, 0, &v);
	if (ret)
		return ret;
	if (v > MRPOOL_PARAM_MB_MAX)
		return -EINVAL;
	WRITE_ONCE(mrpool_max_user_mb, v);
	return 0;
}

static const struct kernel_param_ops mrpool_user_mb_ops = {
	.set = mrpool_set_user_mb,
	.get = param_get_uint,
};

module_param_cb(max_user_mb, &mrpool_user_mb_ops, &mrpool_max_user_mb, 0644);
MODULE_PARM_DESC(max_user_mb,
		 "MiB of the pool one user may hold (slices, mappings, dma-bufs, quarantine), 0 = max_user_pct of max_mb for users without CAP_IPC_LOCK (default 0) [writable]");

/*
 * A fresh host's default: a user charged to RLIMIT_MEMLOCK (no
 * CAP_IPC_LOCK) holds at most half of max_mb, so the first local user to
 * allocate cannot take the whole pool from the services it is for; those
 * hold CAP_IPC_LOCK (they may pin any memory anyway) and are bounded by
 * max_user_mb alone.
 */
unsigned int mrpool_max_user_pct = 50;

static int mrpool_set_user_pct(const char *val, const struct kernel_param *kp)
{
	unsigned int v;
	int ret;

	ret = kstrtouint(val, 0, &v);
	if (ret)
		return ret;
	if (!v || v > 100)
		return -EINVAL;
	WRITE_ONCE(mrpool_max_user_pct, v);
	return 0;
}

static const struct kernel_param_ops mrpool_user_pct_ops = {
	.set = mrpool_set_user_pct,
	.get = param_get_uint,
};

module_param_cb(max_user_pct, &mrpool_user_pct_ops, &mrpool_max_user_pct, 0644);
MODULE_PARM_DESC(max_user_pct,
		 "Percent of max_mb one user without CAP_IPC_LOCK may hold while max_user_mb is 0, 100 = all (default 50) [writable]");

unsigned int mrpool_quarantine_event_pct = 10;

static int mrpool_set_pct(const char *val, const struct kernel_param *kp)
{
	unsigned int v;
	int ret;

	ret = kstrtouint(val, 0, &v);
	if (ret)
		return ret;
	if (v > 100)
		return -EINVAL;
	WRITE_ONCE(mrpool_quarantine_event_pct, v);
	if (mrpool_loaded)
		mrpool_pool_quarantine_check();
	return 0;
}

static const struct kernel_param_ops mrpool_pct_ops = {
	.set = mrpool_set_pct,
	.get = param_get_uint,
};

module_param_cb(quarantine_event_pct, &mrpool_pct_ops,
		&mrpool_quarantine_event_pct, 0644);
MODULE_PARM_DESC(quarantine_event_pct,
		 "Quarantined bytes, in percent of max_mb, at which a netlink event is sent, 0 = never (default 10) [writable]");

/*
 * What a cgroup's pool quota does (quota.c). The default, quota: a quota
 * is set by root of the initial namespaces only, so it relaxes nothing an
 * operator did not ask for, and where one covers a caller it is the
 * bound instead of RLIMIT_MEMLOCK and the per-user share, which
 * containers cannot use (8 MiB of memlock, one uid for many pods). Where
 * no quota covers the caller, every mode behaves as before quotas.
 */
enum mrpool_quota_mode mrpool_quota_mode = MRPOOL_QUOTA_MODE_QUOTA;

static const char * const mrpool_quota_modes[] = {
	[MRPOOL_QUOTA_MODE_RLIMIT] = "rlimit",
	[MRPOOL_QUOTA_MODE_QUOTA] = "quota",
	[MRPOOL_QUOTA_MODE_BOTH] = "both",
};

static int mrpool_set_quota_mode(const char *val,
				 const struct kernel_param *kp)
{
	int i = sysfs_match_string(mrpool_quota_modes, val);

	if (i < 0)
		return -EINVAL;
	WRITE_ONCE(mrpool_quota_mode, i);
	return 0;
}

static int mrpool_get_quota_mode(char *buf, const struct kernel_param *kp)
{
	return sysfs_emit(buf, "%s\n",
			  mrpool_quota_modes[READ_ONCE(mrpool_quota_mode)]);
}

static const struct kernel_param_ops mrpool_quota_mode_ops = {
	.set = mrpool_set_quota_mode,
	.get = mrpool_get_quota_mode,
};

module_param_cb(quota_mode, &mrpool_quota_mode_ops, &mrpool_quota_mode, 0644);
MODULE_PARM_DESC(quota_mode,
		 "Where a cgroup pool quota covers the caller: quota = it replaces RLIMIT_MEMLOCK and the per-user share, both = all apply, rlimit = quotas counted, not enforced (default quota) [writable]");

/*
 * Test knobs for the unwind of a load failing after prefill
 * (pool_module_test), off by default and not in sysfs.
 */
static unsigned int mrpool_load_fail_high_order;
module_param_named(fail_high_order, mrpool_load_fail_high_order, uint, 0);
MODULE_PARM_DESC(fail_high_order,
		 "Test knob: debugfs fail_high_order from load on, so prefill builds fragmented chunks and arms the defrag worker (default 0)");

static bool mrpool_fail_init_after_prefill;
module_param_named(fail_init_after_prefill, mrpool_fail_init_after_prefill,
		   bool, 0);
MODULE_PARM_DESC(fail_init_after_prefill,
		 "Test knob: fail the load with ECANCELED once the pool is prefilled, the work prefill armed due at once (default N)");

static int __init mrpool_check_params(void)
{
	unsigned long chunk = (unsigned long)mrpool_chunk_kb * SZ_1K;

	if (!mrpool_chunk_kb || !is_power_of_2(mrpool_chunk_kb) ||
	    chunk < PAGE_SIZE || mrpool_chunk_kb > 4096 ||
	    get_order(chunk) >= MRPOOL_NR_PAGE_ORDERS) {
		pr_err("chunk_kb=%u: must be a power of two from %lu to 4096\n",
		       mrpool_chunk_kb, PAGE_SIZE / SZ_1K);
		return -EINVAL;
	}
	if (mrpool_max_mb > MRPOOL_PARAM_MB_MAX || !mrpool_max_mb ||
	    mrpool_pool_mb > mrpool_max_mb) {
		pr_err("pool_mb=%u max_mb=%u: need 0 <= pool_mb <= max_mb <= %u, max_mb > 0\n",
		       mrpool_pool_mb, mrpool_max_mb, MRPOOL_PARAM_MB_MAX);
		return -EINVAL;
	}
	if ((u64)mrpool_max_mb * SZ_1M < chunk) {
		pr_err("max_mb=%u is smaller than one chunk (chunk_kb=%u)\n",
		       mrpool_max_mb, mrpool_chunk_kb);
		return -EINVAL;
	}
	if (mrpool_numa_node != NUMA_NO_NODE &&
	    (mrpool_numa_node < 0 || mrpool_numa_node >= MAX_NUMNODES ||
	     !node_online(mrpool_numa_node))) {
		pr_err("numa_node=%d is not an online node (or -1)\n",
		       mrpool_numa_node);
		return -EINVAL;
	}
	if (mrpool_idle_trim_sec > MRPOOL_TRIM_SEC_MAX ||
	    mrpool_max_user_mb > MRPOOL_PARAM_MB_MAX ||
	    !mrpool_max_user_pct || mrpool_max_user_pct > 100 ||
	    mrpool_quarantine_event_pct > 100) {
		pr_err("idle_trim_sec, max_user_mb, max_user_pct or quarantine_event_pct out of range\n");
		return -EINVAL;
	}
	return 0;
}

static int __init mrpool_init(void)
{
	int ret;

	BUILD_BUG_ON(sizeof(struct mrpool_query) < MRPOOL_QUERY_SIZE_V1);
	BUILD_BUG_ON(sizeof(struct mrpool_alloc) < MRPOOL_ALLOC_SIZE_V1);
	BUILD_BUG_ON(sizeof(struct mrpool_free) < MRPOOL_FREE_SIZE_V1);
	BUILD_BUG_ON(sizeof(struct mrpool_devices) != MRPOOL_DEVICES_SIZE_V1);
	BUILD_BUG_ON(sizeof(struct mrpool_device) != MRPOOL_DEVICE_SIZE_V1);
	BUILD_BUG_ON(sizeof(struct mrpool_export_dmabuf) !=
		     MRPOOL_EXPORT_SIZE_V1);
	BUILD_BUG_ON(sizeof(struct mrpool_slice_keys) !=
		     MRPOOL_SLICE_KEYS_SIZE_V1);
	BUILD_BUG_ON(sizeof(struct mrpool_slice_key) !=
		     MRPOOL_SLICE_KEY_SIZE_V1);

	ret = mrpool_check_params();
	if (ret)
		return ret;

	ret = mrpool_pool_init();
	if (ret)
		return ret;

	/* Before the ib_client: adding a device sends events. */
	ret = mrpool_nl_init();
	if (ret)
		goto undo_pool;

	mrpool_debugfs_init();

	/* Devices present now are added (and get the node) before prefill. */
	ret = mrpool_ib_init();
	if (ret)
		goto undo_debugfs;

	atomic_set(&mrpool_fail_high_order, mrpool_load_fail_high_order);
	ret = mrpool_pool_prefill();
	if (ret)
		goto undo_ib;

	if (mrpool_fail_init_after_prefill) {
		pr_info("fail_init_after_prefill: failing the load, defrag %s, trim %s\n",
			delayed_work_pending(&mrpool_pool.defrag_work) ?
			"armed" : "idle",
			delayed_work_pending(&mrpool_pool.trim_work) ?
			"armed" : "idle");
		mrpool_pool_hurry();
		ret = -ECANCELED;
		goto undo_ib;
	}

	ret = mrpool_chrdev_init();
	if (ret)
		goto undo_ib;

	mrpool_loaded = true;
	pr_info("loaded: chunk %u KiB, pool %u MiB, max %u MiB, node %d\n",
		mrpool_chunk_kb, mrpool_pool_mb, mrpool_max_mb,
		mrpool_pool_node());
	return 0;

undo_ib:
	/*
	 * Prefill may have armed the trim and defrag workers: stop them
	 * first, once no debugfs knob can kick one again (as mrpool_exit()).
	 */
	mrpool_debugfs_exit();
	mrpool_pool_quiesce();
	mrpool_ib_exit();
	goto undo_nl;
undo_debugfs:
	mrpool_debugfs_exit();
undo_nl:
	mrpool_nl_exit();
	/* Netlink may have set quotas meanwhile. */
	mrpool_quotas_exit();
undo_pool:
	mrpool_pool_exit();
	mrpool_ib_exit_leaked();
	return ret;
}

/*
 * No file is open, device or map file (fops.owner holds the module), and
 * no chunk is quarantined (each holds a module reference), so every chunk
 * is free.
 */
static void __exit mrpool_exit(void)
{
	/* Writes to idle_trim_sec run under the param lock: none re-arms
	 * the trim worker once it is cancelled below.
	 */
	kernel_param_lock(THIS_MODULE);
	mrpool_loaded = false;
	kernel_param_unlock(THIS_MODULE);
	mrpool_chrdev_exit();
	mrpool_mmap_exit();
	/* No knob can kick a worker now, and no worker registers a chunk
	 * on a device once the ib side is gone.
	 */
	mrpool_debugfs_exit();
	mrpool_pool_quiesce();
	/* Deregisters every chunk on every device before the pages go. */
	mrpool_ib_exit();
	/* The last events (devices removed) are out; no worker sends more. */
	mrpool_nl_exit();
	/* Keeps the chunks a device would not deregister (ib side's record). */
	mrpool_pool_exit();
	mrpool_ib_exit_leaked();
	mrpool_quotas_exit();
}

module_init(mrpool_init);
module_exit(mrpool_exit);

MODULE_DESCRIPTION("Host-wide pool of pinned memory for RDMA");
MODULE_LICENSE("GPL");
