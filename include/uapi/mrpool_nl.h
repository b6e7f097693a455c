/* SPDX-License-Identifier: ((GPL-2.0 WITH Linux-syscall-note) OR BSD-2-Clause) */
/*
 * mrpool's generic netlink family: the pool's and each RDMA device's state
 * on request, and a multicast group of events, for monitoring agents that
 * would otherwise poll sysfs, and the cgroup pool quotas. Everything GET
 * returns is also in sysfs, which is world-readable: so is the family,
 * but for setting and deleting quotas (root of the initial namespaces).
 *
 * The family lives in the initial network namespace only. Requests are
 * validated strictly: an attribute the policy does not name, of the wrong
 * size or type, is -EINVAL (with an extended ack message), and so is a
 * request with an unknown command (-EOPNOTSUPP). Replies and events may
 * grow new attributes: ignore the ones you do not know.
 */
#ifndef _UAPI_MRPOOL_NL_H
#define _UAPI_MRPOOL_NL_H

#define MRPOOL_GENL_NAME		"mrpool"
#define MRPOOL_GENL_VERSION		1
/* Multicast group of MRPOOL_CMD_EVENT messages; anyone may join. */
#define MRPOOL_GENL_MCGRP_EVENTS	"events"
/* Largest %MRPOOL_A_QUOTA_LIMIT_BYTES: max_mb's largest value, 1 TiB. */
#define MRPOOL_QUOTA_MAX_BYTES		(1ULL << 40)

/**
 * enum mrpool_nl_cmd - commands of the family
 * @MRPOOL_CMD_UNSPEC: unused
 * @MRPOOL_CMD_GET: request (no privilege needed): the pool's geometry,
 *	totals and counters, and a %MRPOOL_A_DEVICES nest with one
 *	%MRPOOL_A_DEVICE per RDMA device. An optional %MRPOOL_A_DEV_NAME
 *	limits the devices to that one (-ENODEV if the module knows none of
 *	that name). The reply carries the same command. A nest holds at
 *	most 64 KiB: with more devices than fit (some hundreds) GET without
 *	a name is -E2BIG; sysfs lists them all.
 * @MRPOOL_CMD_EVENT: notification only, sent to %MRPOOL_GENL_MCGRP_EVENTS:
 *	%MRPOOL_A_EVENT says what happened, the pool's totals follow (as
 *	after the event), then the event's own attributes (see
 *	enum mrpool_nl_event). Not a request: -EOPNOTSUPP.
 * @MRPOOL_CMD_QUOTA_SET: request, CAP_NET_ADMIN and CAP_SYS_ADMIN in the
 *	initial user namespace (-EPERM otherwise, so a container cannot raise
 *	its own quota): give a cgroup v2 directory a pool quota of
 *	%MRPOOL_A_QUOTA_LIMIT_BYTES (required, at most
 *	%MRPOOL_QUOTA_MAX_BYTES; 0 allows nothing). The cgroup is named by
 *	exactly one of %MRPOOL_A_QUOTA_PATH and %MRPOOL_A_QUOTA_CGROUP_ID
 *	(-ENOENT if there is none). Every process below the cgroup then
 *	draws from it, hierarchically: an ALLOC is charged to every quota
 *	above the caller and fails with -EDQUOT past any. Usage counts what
 *	is allocated after the quota was set; a limit below the usage stops
 *	further allocations only. Setting an existing quota changes its
 *	limit. How a quota combines with RLIMIT_MEMLOCK and the per-user
 *	share is the module parameter quota_mode (mrpool(4)).
 * @MRPOOL_CMD_QUOTA_DEL: request, privileged as %MRPOOL_CMD_QUOTA_SET:
 *	delete a cgroup's limit (named as for SET; -ENOENT if it has none).
 *	What it has charged stays listed, without a limit, until it is back.
 * @MRPOOL_CMD_QUOTA_GET: request (no privilege needed): one cgroup's quota
 *	(named as for SET; -ENOENT if it has none), or with NLM_F_DUMP every
 *	quota the caller's cgroup namespace holds, one message each, paths
 *	from that namespace's root (a container sees its own quotas only,
 *	its own cgroup as "/"): %MRPOOL_A_QUOTA_PATH,
 *	%MRPOOL_A_QUOTA_CGROUP_ID, %MRPOOL_A_QUOTA_LIMIT_BYTES (absent once
 *	deleted), %MRPOOL_A_QUOTA_USAGE_BYTES,
 *	%MRPOOL_A_QUOTA_QUARANTINED_BYTES and %MRPOOL_A_QUOTA_REMOVED. A
 *	cgroup removed while it holds pool memory stays charged and listed
 *	with %MRPOOL_A_QUOTA_REMOVED until the memory is back.
 * @MRPOOL_CMD_TENANT_GET: request (no privilege needed): what the users
 *	pool memory is charged to (tenants) hold, one message per tenant:
 *	%MRPOOL_A_TENANT_UID, %MRPOOL_A_TENANT_BYTES,
 *	%MRPOOL_A_TENANT_QUARANTINED_BYTES, %MRPOOL_A_TENANT_MEMLOCK_BYTES,
 *	%MRPOOL_A_TENANT_ORPHANED_BYTES (what the orphans hold of the
 *	tenant's). Without NLM_F_DUMP, the caller's own tenant (all counts 0
 *	if it has none). With NLM_F_DUMP, every tenant in uid order and then the
 *	charges of dead owners (%MRPOOL_A_TENANT_ORPHANS, no uid) for a
 *	caller with CAP_SYS_ADMIN in the initial user namespace; for anyone
 *	else only its own tenant, if it exists. A process inside a user
 *	namespace is charged to the owner of its outermost one (mrpool(4)):
 *	uids are shown as the caller's namespace sees them, 65534 (the
 *	overflow uid) where it has no mapping.
 *
 * A dump (QUOTA_GET, TENANT_GET) gives the view of the task that asked
 * for it -- its privilege, user and cgroup namespaces, tenant -- in every
 * part, whichever task reads the socket for the later ones.
 *
 * Pool events (GROW_FAILED, EXHAUSTED, QUARANTINE_HIGH, TRIM,
 * ORPHANS_FULL) are rate-limited per type, since unprivileged requests
 * cause them: at most one per second. One that comes sooner is held back; the latest held
 * back is sent when the second ends (its totals as then), with
 * %MRPOOL_A_EVENT_SUPPRESSED counting the earlier ones it replaces.
 * Device events are never held back.
 */
enum mrpool_nl_cmd {
	MRPOOL_CMD_UNSPEC,
	MRPOOL_CMD_GET,
	MRPOOL_CMD_EVENT,
	MRPOOL_CMD_QUOTA_SET,
	MRPOOL_CMD_QUOTA_DEL,
	MRPOOL_CMD_QUOTA_GET,
	MRPOOL_CMD_TENANT_GET,

	__MRPOOL_CMD_MAX,
	MRPOOL_CMD_MAX = __MRPOOL_CMD_MAX - 1
};

/**
 * enum mrpool_nl_event - values of %MRPOOL_A_EVENT
 * @MRPOOL_EVENT_UNSPEC: unused
 * @MRPOOL_EVENT_GROW_FAILED: the pool could not build chunks it was
 *	allowed to (page allocator short, or the memory headroom reached);
 *	%MRPOOL_A_EVENT_CHUNKS: chunks that could not be built.
 * @MRPOOL_EVENT_EXHAUSTED: a request for chunks failed with -ENOMEM: the
 *	pool is at max_mb or could not grow; %MRPOOL_A_EVENT_CHUNKS: chunks
 *	asked for. A request larger than max_mb alone is the caller's error,
 *	refused with -ENOMEM but no event.
 * @MRPOOL_EVENT_QUARANTINE_HIGH: quarantined bytes rose to the threshold
 *	(quarantine_event_pct of max_mb); once per crossing, again only
 *	after they fell below it; a threshold lowered under what is
 *	quarantined is a crossing. %MRPOOL_A_EVENT_THRESHOLD_BYTES.
 * @MRPOOL_EVENT_DEV_ADDED: ib_core gave the module an RDMA device;
 *	%MRPOOL_A_DEVICE with its state after setup. Followed by
 *	%MRPOOL_EVENT_DEV_READY or %MRPOOL_EVENT_DEV_FAILED.
 * @MRPOOL_EVENT_DEV_READY: a device's kernel MR cache is in use;
 *	%MRPOOL_A_DEVICE.
 * @MRPOOL_EVENT_DEV_FAILED: a device is not usable (state failed or
 *	unsupported, and why in %MRPOOL_DEV_A_REASON), at setup or later;
 *	%MRPOOL_A_DEVICE.
 * @MRPOOL_EVENT_DEV_REMOVED: the device is gone; %MRPOOL_A_DEVICE.
 * @MRPOOL_EVENT_TRIM: the idle trim gave chunks back to the page
 *	allocator; %MRPOOL_A_EVENT_CHUNKS: how many.
 * @MRPOOL_EVENT_ORPHANS_FULL: a revocation left chunks charged to their
 *	owner for want of room: the one other user whose importer holds
 *	them at its share, or none, the orphans holding a share (mrpool(4)
 *	"Revocation"); %MRPOOL_A_EVENT_CHUNKS: how many.
 */
enum mrpool_nl_event {
	MRPOOL_EVENT_UNSPEC,
	MRPOOL_EVENT_GROW_FAILED,
	MRPOOL_EVENT_EXHAUSTED,
	MRPOOL_EVENT_QUARANTINE_HIGH,
	MRPOOL_EVENT_DEV_ADDED,
	MRPOOL_EVENT_DEV_READY,
	MRPOOL_EVENT_DEV_FAILED,
	MRPOOL_EVENT_DEV_REMOVED,
	MRPOOL_EVENT_TRIM,
	MRPOOL_EVENT_ORPHANS_FULL,

	__MRPOOL_EVENT_MAX,
	MRPOOL_EVENT_MAX = __MRPOOL_EVENT_MAX - 1
};

/**
 * enum mrpool_nl_attr - top-level attributes
 * @MRPOOL_A_UNSPEC: unused
 * @MRPOOL_A_PAD: padding for 64-bit attributes
 * @MRPOOL_A_ABI_VERSION: u32, MRPOOL_ABI_VERSION of the module (GET)
 * @MRPOOL_A_CHUNK_BYTES: u64, bytes per chunk (GET)
 * @MRPOOL_A_NODE: s32, the pool's default NUMA node, -1 if none (GET)
 * @MRPOOL_A_TOTAL_BYTES: u64, bytes the pool holds (GET, events)
 * @MRPOOL_A_FREE_BYTES: u64 (GET, events)
 * @MRPOOL_A_USED_BYTES: u64 (GET, events)
 * @MRPOOL_A_QUARANTINED_BYTES: u64 (GET, events)
 * @MRPOOL_A_MAX_BYTES: u64, max_mb in bytes (GET, events)
 * @MRPOOL_A_ALLOCS: u64, slices handed out since load (GET)
 * @MRPOOL_A_FREES: u64, slices returned since load (GET)
 * @MRPOOL_A_ALLOC_FAILURES: u64, failed slice allocations, every reason (GET)
 * @MRPOOL_A_GROWS: u64, chunks added since load (GET)
 * @MRPOOL_A_TRIMS: u64, chunks trimmed since load (GET)
 * @MRPOOL_A_QUARANTINES: u64, chunks that went to quarantine (GET)
 * @MRPOOL_A_CHUNK_ALLOC_FAILURES: u64, chunks that could not be built (GET)
 * @MRPOOL_A_DEVICES_READY: u32, devices whose MR cache is in use (GET)
 * @MRPOOL_A_DEVICES: nest of %MRPOOL_A_DEVICE (GET)
 * @MRPOOL_A_DEVICE: nest of enum mrpool_nl_dev_attr (GET, device events)
 * @MRPOOL_A_DEV_NAME: NUL-terminated string, at most
 *	MRPOOL_DEVICE_NAME_LEN - 1 characters: GET's device filter; the only
 *	attribute GET may carry
 * @MRPOOL_A_EVENT: u32, enum mrpool_nl_event (events)
 * @MRPOOL_A_EVENT_CHUNKS: u32, see enum mrpool_nl_event
 * @MRPOOL_A_EVENT_THRESHOLD_BYTES: u64, see enum mrpool_nl_event
 * @MRPOOL_A_EVENT_SUPPRESSED: u32, earlier events of this type that this
 *	one stands for: held back by the rate limit and never sent (absent:
 *	none)
 * @MRPOOL_A_QUOTA_PATH: NUL-terminated string, a cgroup v2 directory from
 *	the cgroup2 root ("/pods/pod42" or "pods/pod42", not
 *	"/sys/fs/cgroup/..."), shorter than 4096 bytes (quota requests,
 *	QUOTA_GET replies)
 * @MRPOOL_A_QUOTA_CGROUP_ID: u64, a cgroup's id (the inode number of its
 *	directory in cgroup2; quota requests, QUOTA_GET replies)
 * @MRPOOL_A_QUOTA_LIMIT_BYTES: u64, a quota's limit (QUOTA_SET, QUOTA_GET)
 * @MRPOOL_A_QUOTA_USAGE_BYTES: u64, bytes charged to the quota, quarantined
 *	ones included (QUOTA_GET)
 * @MRPOOL_A_QUOTA_QUARANTINED_BYTES: u64, of those, in quarantine
 *	(QUOTA_GET)
 * @MRPOOL_A_QUOTA_REMOVED: flag, the cgroup was removed while charged
 *	(QUOTA_GET)
 * @MRPOOL_A_TENANT_UID: u32, the tenant's uid (TENANT_GET)
 * @MRPOOL_A_TENANT_BYTES: u64, bytes charged to the tenant, quarantined ones
 *	included (TENANT_GET)
 * @MRPOOL_A_TENANT_QUARANTINED_BYTES: u64, of those, in quarantine
 *	(TENANT_GET)
 * @MRPOOL_A_TENANT_MEMLOCK_BYTES: u64, of those, charged to the user's
 *	RLIMIT_MEMLOCK count (locked_vm) (TENANT_GET)
 * @MRPOOL_A_TENANT_ORPHANS: flag, this entry is the orphans: what dead
 *	owners' slices still hold, charged to no user (TENANT_GET)
 * @MRPOOL_A_TENANT_ORPHANED_BYTES: u64, bytes taken from the tenant to the
 *	orphans and still held, in none of its counts above (TENANT_GET;
 *	0 in the orphans' entry)
 */
enum mrpool_nl_attr {
	MRPOOL_A_UNSPEC,
	MRPOOL_A_PAD,
	MRPOOL_A_ABI_VERSION,
	MRPOOL_A_CHUNK_BYTES,
	MRPOOL_A_NODE,
	MRPOOL_A_TOTAL_BYTES,
	MRPOOL_A_FREE_BYTES,
	MRPOOL_A_USED_BYTES,
	MRPOOL_A_QUARANTINED_BYTES,
	MRPOOL_A_MAX_BYTES,
	MRPOOL_A_ALLOCS,
	MRPOOL_A_FREES,
	MRPOOL_A_ALLOC_FAILURES,
	MRPOOL_A_GROWS,
	MRPOOL_A_TRIMS,
	MRPOOL_A_QUARANTINES,
	MRPOOL_A_CHUNK_ALLOC_FAILURES,
	MRPOOL_A_DEVICES_READY,
	MRPOOL_A_DEVICES,
	MRPOOL_A_DEVICE,
	MRPOOL_A_DEV_NAME,
	MRPOOL_A_EVENT,
	MRPOOL_A_EVENT_CHUNKS,
	MRPOOL_A_EVENT_THRESHOLD_BYTES,
	MRPOOL_A_EVENT_SUPPRESSED,
	MRPOOL_A_QUOTA_PATH,
	MRPOOL_A_QUOTA_CGROUP_ID,
	MRPOOL_A_QUOTA_LIMIT_BYTES,
	MRPOOL_A_QUOTA_USAGE_BYTES,
	MRPOOL_A_QUOTA_QUARANTINED_BYTES,
	MRPOOL_A_QUOTA_REMOVED,
	MRPOOL_A_TENANT_UID,
	MRPOOL_A_TENANT_BYTES,
	MRPOOL_A_TENANT_QUARANTINED_BYTES,
	MRPOOL_A_TENANT_MEMLOCK_BYTES,
	MRPOOL_A_TENANT_ORPHANS,
	MRPOOL_A_TENANT_ORPHANED_BYTES,

	__MRPOOL_A_MAX,
	MRPOOL_A_MAX = __MRPOOL_A_MAX - 1
};

/**
 * enum mrpool_nl_dev_attr - attributes inside %MRPOOL_A_DEVICE
 * @MRPOOL_DEV_A_UNSPEC: unused
 * @MRPOOL_DEV_A_PAD: padding for 64-bit attributes
 * @MRPOOL_DEV_A_NAME: string, the ib_device's name
 * @MRPOOL_DEV_A_STATE: u32, MRPOOL_DEVICE_READY etc. (uapi/mrpool.h)
 * @MRPOOL_DEV_A_NODE: s32, NUMA node of its DMA device, -1 if none
 * @MRPOOL_DEV_A_CHUNKS: u32, chunks registered on it
 * @MRPOOL_DEV_A_KBUFS: u32, in-kernel API buffers lent on it
 * @MRPOOL_DEV_A_REGS: u64, registration work requests completed
 * @MRPOOL_DEV_A_REG_FAILURES: u64, chunks that could not be registered
 * @MRPOOL_DEV_A_WR_TIMEOUTS: u64, work requests that never completed
 * @MRPOOL_DEV_A_REASON: string, why it is not ready (absent when ready)
 */
enum mrpool_nl_dev_attr {
	MRPOOL_DEV_A_UNSPEC,
	MRPOOL_DEV_A_PAD,
	MRPOOL_DEV_A_NAME,
	MRPOOL_DEV_A_STATE,
	MRPOOL_DEV_A_NODE,
	MRPOOL_DEV_A_CHUNKS,
	MRPOOL_DEV_A_KBUFS,
	MRPOOL_DEV_A_REGS,
	MRPOOL_DEV_A_REG_FAILURES,
	MRPOOL_DEV_A_WR_TIMEOUTS,
	MRPOOL_DEV_A_REASON,

	__MRPOOL_DEV_A_MAX,
	MRPOOL_DEV_A_MAX = __MRPOOL_DEV_A_MAX - 1
};

#endif /* _UAPI_MRPOOL_NL_H */
