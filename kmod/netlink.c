// SPDX-License-Identifier: GPL-2.0
/*
 * The "mrpool" generic netlink family (include/uapi/mrpool_nl.h): the
 * pool's and each RDMA device's state on request (MRPOOL_CMD_GET), and
 * events on the "events" multicast group, so a monitoring agent hears of
 * exhaustion or a failed device without polling sysfs.
 *
 * Permissions follow sysfs: GET returns what the world-readable files
 * under /sys/class/misc/mrpool and /sys/module/mrpool/devices show, and
 * no per-process data (pids and owners stay in root-only debugfs), so it
 * needs no privilege, and neither does joining the group. The cgroup pool
 * quotas (quota.c) are listed to anyone too (QUOTA_GET: paths, ids and
 * counts, as cgroupfs shows them, of the caller's cgroup namespace only),
 * but set and deleted by root of the initial namespaces only. What each
 * user holds (TENANT_GET) is per-user data: anyone gets its own, root of
 * the initial namespace every user's.
 *
 * Events are sent from process context only: every call site holds at
 * most mutexes (the pool lock, a device's lock), never a spinlock, so
 * messages are allocated with GFP_KERNEL. Nothing is built when nobody
 * listens. The family is registered before anything that sends events
 * starts and unregistered after it stopped (main.c), so senders never
 * check for it.
 */
#include "mrpool.h"
#include "ib.h"

#include <linux/cgroup.h>
#include <linux/cred.h>
#include <linux/user_namespace.h>
#include <linux/module.h>
#include <net/genetlink.h>
#include <uapi/mrpool_nl.h>

enum mrpool_nl_groups {
	MRPOOL_NL_GRP_EVENTS,
};

/* A request may name a device and nothing else (strict validation). */
static const struct nla_policy mrpool_nl_policy[MRPOOL_A_MAX + 1] = {
	[MRPOOL_A_DEV_NAME] = { .type = NLA_NUL_STRING,
				.len = MRPOOL_DEVICE_NAME_LEN - 1 },
};

/*
 * Quota requests name a cgroup (one of the two); SET adds a limit. The
 * range is not const: 6.1's policy points at it as non-const.
 */
static struct netlink_range_validation mrpool_nl_limit_range = {
	.max = MRPOOL_QUOTA_MAX_BYTES,
};

static const struct nla_policy mrpool_nl_quota_set_policy[MRPOOL_A_MAX + 1] = {
	[MRPOOL_A_QUOTA_PATH] = { .type = NLA_NUL_STRING, .len = PATH_MAX - 1 },
	[MRPOOL_A_QUOTA_CGROUP_ID] = { .type = NLA_U64 },
	[MRPOOL_A_QUOTA_LIMIT_BYTES] =
		NLA_POLICY_FULL_RANGE(NLA_U64, &mrpool_nl_limit_range),
};

static const struct nla_policy mrpool_nl_quota_policy[MRPOOL_A_MAX + 1] = {
	[MRPOOL_A_QUOTA_PATH] = { .type = NLA_NUL_STRING, .len = PATH_MAX - 1 },
	[MRPOOL_A_QUOTA_CGROUP_ID] = { .type = NLA_U64 },
};

/* TENANT_GET takes no attribute: strict validation refuses any. */
static const struct nla_policy mrpool_nl_tenant_policy[MRPOOL_A_MAX + 1] = {};

static int mrpool_nl_get(struct sk_buff *skb, struct genl_info *info);
static int mrpool_nl_quota_set(struct sk_buff *skb, struct genl_info *info);
static int mrpool_nl_quota_del(struct sk_buff *skb, struct genl_info *info);
static int mrpool_nl_quota_get(struct sk_buff *skb, struct genl_info *info);
static int mrpool_nl_quota_dump_start(struct netlink_callback *cb);
static int mrpool_nl_quota_dump(struct sk_buff *skb,
				struct netlink_callback *cb);
static int mrpool_nl_quota_dump_done(struct netlink_callback *cb);
static int mrpool_nl_tenant_get(struct sk_buff *skb, struct genl_info *info);
static int mrpool_nl_tenant_dump_start(struct netlink_callback *cb);
static int mrpool_nl_tenant_dump_done(struct netlink_callback *cb);
static int mrpool_nl_tenant_dump(struct sk_buff *skb,
				 struct netlink_callback *cb);

static const struct genl_small_ops mrpool_nl_ops[] = {
	{
		.cmd = MRPOOL_CMD_GET,
		.doit = mrpool_nl_get,
	},
};

/*
 * Commands with policies of their own. Quota SET and DEL are for root of
 * the initial namespaces: GENL_ADMIN_PERM checks CAP_NET_ADMIN there, the
 * handlers CAP_SYS_ADMIN, so a container cannot raise its own quota.
 */
static const struct genl_ops mrpool_nl_full_ops[] = {
	{
		.cmd = MRPOOL_CMD_QUOTA_SET,
		.doit = mrpool_nl_quota_set,
		.policy = mrpool_nl_quota_set_policy,
		.maxattr = MRPOOL_A_MAX,
		.flags = GENL_ADMIN_PERM,
	},
	{
		.cmd = MRPOOL_CMD_QUOTA_DEL,
		.doit = mrpool_nl_quota_del,
		.policy = mrpool_nl_quota_policy,
		.maxattr = MRPOOL_A_MAX,
		.flags = GENL_ADMIN_PERM,
	},
	{
		.cmd = MRPOOL_CMD_QUOTA_GET,
		.doit = mrpool_nl_quota_get,
		.start = mrpool_nl_quota_dump_start,
		.dumpit = mrpool_nl_quota_dump,
		.done = mrpool_nl_quota_dump_done,
		.policy = mrpool_nl_quota_policy,
		.maxattr = MRPOOL_A_MAX,
	},
	{
		.cmd = MRPOOL_CMD_TENANT_GET,
		.doit = mrpool_nl_tenant_get,
		.start = mrpool_nl_tenant_dump_start,
		.dumpit = mrpool_nl_tenant_dump,
		.done = mrpool_nl_tenant_dump_done,
		.policy = mrpool_nl_tenant_policy,
		.maxattr = MRPOOL_A_MAX,
	},
};

static const struct genl_multicast_group mrpool_nl_mcgrps[] = {
	[MRPOOL_NL_GRP_EVENTS] = { .name = MRPOOL_GENL_MCGRP_EVENTS },
};

static struct genl_family mrpool_nl_family __ro_after_init = {
	.name = MRPOOL_GENL_NAME,
	.version = MRPOOL_GENL_VERSION,
	.maxattr = MRPOOL_A_MAX,
	.policy = mrpool_nl_policy,
	/* Every command is new: strict attribute and header checks. */
	.resv_start_op = MRPOOL_CMD_GET,
	/*
	 * GET takes no pool lock and mrpool_ib_lock only to copy devices
	 * (mrpool_nl_put_devs()); events need no genl_mutex.
	 */
	.parallel_ops = true,
	.module = THIS_MODULE,
	.small_ops = mrpool_nl_ops,
	.n_small_ops = ARRAY_SIZE(mrpool_nl_ops),
	.ops = mrpool_nl_full_ops,
	.n_ops = ARRAY_SIZE(mrpool_nl_full_ops),
	.mcgrps = mrpool_nl_mcgrps,
	.n_mcgrps = ARRAY_SIZE(mrpool_nl_mcgrps),
};

/* Caller holds mrpool_ib_lock (name, state and reason change under it). */
static int mrpool_nl_put_dev(struct sk_buff *skb, struct mrpool_ib_dev *d)
{
	struct nlattr *nest;

	lockdep_assert_held(&mrpool_ib_lock);
	nest = nla_nest_start(skb, MRPOOL_A_DEVICE);
	if (!nest)
		return -EMSGSIZE;
	if (nla_put_string(skb, MRPOOL_DEV_A_NAME, d->name) ||
	    nla_put_u32(skb, MRPOOL_DEV_A_STATE, mrpool_ib_state_uapi(d->state)) ||
	    nla_put_s32(skb, MRPOOL_DEV_A_NODE, d->node) ||
	    nla_put_u32(skb, MRPOOL_DEV_A_CHUNKS, atomic_read(&d->nr_mrs)) ||
	    nla_put_u32(skb, MRPOOL_DEV_A_KBUFS, atomic_read(&d->kbufs)) ||
	    nla_put_u64_64bit(skb, MRPOOL_DEV_A_REGS,
			      atomic64_read(&d->regs), MRPOOL_DEV_A_PAD) ||
	    nla_put_u64_64bit(skb, MRPOOL_DEV_A_REG_FAILURES,
			      atomic64_read(&d->reg_failures),
			      MRPOOL_DEV_A_PAD) ||
	    nla_put_u64_64bit(skb, MRPOOL_DEV_A_WR_TIMEOUTS,
			      atomic64_read(&d->wr_timeouts),
			      MRPOOL_DEV_A_PAD) ||
	    (d->state != MRPOOL_IB_READY &&
	     nla_put_string(skb, MRPOOL_DEV_A_REASON, d->reason))) {
		nla_nest_cancel(skb, nest);
		return -EMSGSIZE;
	}
	nla_nest_end(skb, nest);
	return 0;
}

static int mrpool_nl_put_u64(struct sk_buff *skb, int type, u64 v)
{
	return nla_put_u64_64bit(skb, type, v, MRPOOL_A_PAD);
}

/*
 * The totals, as in sysfs: all of one moment, read without the pool lock
 * (mrpool_pool_snapshot()), so GET never waits for ALLOC or FREE.
 */
static int mrpool_nl_put_totals(struct sk_buff *skb)
{
	struct mrpool_snapshot snap;

	mrpool_pool_snapshot(&snap);
	if (mrpool_nl_put_u64(skb, MRPOOL_A_TOTAL_BYTES,
			      mrpool_pool_bytes(snap.nr_total)) ||
	    mrpool_nl_put_u64(skb, MRPOOL_A_FREE_BYTES,
			      mrpool_pool_bytes(snap.nr_free)) ||
	    mrpool_nl_put_u64(skb, MRPOOL_A_USED_BYTES,
			      mrpool_pool_bytes(snap.nr_used)) ||
	    mrpool_nl_put_u64(skb, MRPOOL_A_QUARANTINED_BYTES,
			      mrpool_pool_bytes(snap.nr_quarantined)) ||
	    mrpool_nl_put_u64(skb, MRPOOL_A_MAX_BYTES, mrpool_max_bytes()))
		return -EMSGSIZE;
	return 0;
}

static int mrpool_nl_put_pool(struct sk_buff *skb)
{
	struct mrpool_stats *st = &mrpool_stats;
	u64 fails;

	fails = atomic64_read(&st->fail_nomem) + atomic64_read(&st->fail_quota) +
		atomic64_read(&st->fail_memlock) +
		atomic64_read(&st->fail_injected);
	if (nla_put_u32(skb, MRPOOL_A_ABI_VERSION, MRPOOL_ABI_VERSION) ||
	    mrpool_nl_put_u64(skb, MRPOOL_A_CHUNK_BYTES,
			      mrpool_pool.chunk_size) ||
	    nla_put_s32(skb, MRPOOL_A_NODE, mrpool_pool_node()) ||
	    mrpool_nl_put_totals(skb) ||
	    mrpool_nl_put_u64(skb, MRPOOL_A_ALLOCS,
			      atomic64_read(&st->allocs)) ||
	    mrpool_nl_put_u64(skb, MRPOOL_A_FREES, atomic64_read(&st->frees)) ||
	    mrpool_nl_put_u64(skb, MRPOOL_A_ALLOC_FAILURES, fails) ||
	    mrpool_nl_put_u64(skb, MRPOOL_A_GROWS, atomic64_read(&st->grows)) ||
	    mrpool_nl_put_u64(skb, MRPOOL_A_TRIMS, atomic64_read(&st->trims)) ||
	    mrpool_nl_put_u64(skb, MRPOOL_A_QUARANTINES,
			      atomic64_read(&st->quarantines)) ||
	    mrpool_nl_put_u64(skb, MRPOOL_A_CHUNK_ALLOC_FAILURES,
			      atomic64_read(&st->chunk_alloc_failures)) ||
	    nla_put_u32(skb, MRPOOL_A_DEVICES_READY, mrpool_devices_ready()))
		return -EMSGSIZE;
	return 0;
}

/*
 * Devices named @name (all when NULL) into a MRPOOL_A_DEVICES nest.
 * Under mrpool_ib_lock, which no ALLOC or FREE from the free lists takes:
 * only growth does, briefly, to add a chunk to the registry and walk the
 * device list (mrpool_ib_chunk_added()), never the pool lock with it.
 * Here it is held only to copy each device's fields into @skb, allocated
 * beforehand: no allocation, no wait. A mutex's waiters queue in order,
 * and one that loses the lock on waking is handed it next, so readers
 * looping GET cannot starve a growing ALLOC: it waits for bounded copies.
 * Return: how many; -EMSGSIZE when the message is full (a bigger one may
 * do), -E2BIG when the nest would pass the 64 KiB an attribute can hold.
 */
static int mrpool_nl_put_devs(struct sk_buff *skb, const char *name)
{
	struct mrpool_ib_dev *d;
	struct nlattr *nest;
	int n = 0, ret;

	nest = nla_nest_start(skb, MRPOOL_A_DEVICES);
	if (!nest)
		return -EMSGSIZE;
	mutex_lock(&mrpool_ib_lock);
	list_for_each_entry(d, &mrpool_ib_devs, link) {
		if (name && strcmp(name, d->name))
			continue;
		ret = mrpool_nl_put_dev(skb, d);
		/* nla_len is 16 bits: a longer nest would be cut short. */
		if (!ret && skb_tail_pointer(skb) - (unsigned char *)nest >
			    U16_MAX)
			ret = -E2BIG;
		if (ret) {
			mutex_unlock(&mrpool_ib_lock);
			nla_nest_cancel(skb, nest);
			return ret;
		}
		n++;
	}
	mutex_unlock(&mrpool_ib_lock);
	nla_nest_end(skb, nest);
	return n;
}

/* One reply; -EMSGSIZE asks the caller for a bigger buffer. */
static int mrpool_nl_fill_get(struct sk_buff *skb, struct genl_info *info,
			      const char *name)
{
	void *hdr;
	int n;

	hdr = genlmsg_put_reply(skb, info, &mrpool_nl_family, 0,
				MRPOOL_CMD_GET);
	if (!hdr)
		return -EMSGSIZE;
	if (mrpool_nl_put_pool(skb))
		return -EMSGSIZE;
	n = mrpool_nl_put_devs(skb, name);
	if (n == -E2BIG)
		NL_SET_ERR_MSG(info->extack,
			       "more devices than one reply holds: ask for one by name");
	if (n < 0)
		return n;
	if (name && !n) {
		NL_SET_ERR_MSG_ATTR(info->extack,
				    info->attrs[MRPOOL_A_DEV_NAME],
				    "no RDMA device of that name");
		return -ENODEV;
	}
	genlmsg_end(skb, hdr);
	return 0;
}

static int mrpool_nl_get(struct sk_buff *skb, struct genl_info *info)
{
	const char *name = NULL;
	size_t size = NLMSG_GOODSIZE;
	struct sk_buff *msg;
	int ret;

	if (info->attrs[MRPOOL_A_DEV_NAME])
		name = nla_data(info->attrs[MRPOOL_A_DEV_NAME]);
	/* Devices come and go between tries: grow until they fit. */
	for (;;) {
		msg = mrpool_fail_alloc(size) ? NULL :
		      genlmsg_new(size, GFP_KERNEL);
		if (!msg)
			return -ENOMEM;
		ret = mrpool_nl_fill_get(msg, info, name);
		if (ret != -EMSGSIZE || size >= SZ_1M)
			break;
		nlmsg_free(msg);
		size *= 2;
	}
	if (ret) {
		nlmsg_free(msg);
		return ret;
	}
	return genlmsg_reply(msg, info);
}

/*
 * The cgroup a quota request names (a reference), by path or by id:
 * exactly one of them.
 */
static struct cgroup *mrpool_nl_cgroup(struct genl_info *info)
{
	struct nlattr *path = info->attrs[MRPOOL_A_QUOTA_PATH];
	struct nlattr *id = info->attrs[MRPOOL_A_QUOTA_CGROUP_ID];
	struct cgroup *cgrp;

	if (!path == !id) {
		NL_SET_ERR_MSG(info->extack,
			       "name the cgroup by path or by id, one of them");
		return ERR_PTR(-EINVAL);
	}
	if (path)
		cgrp = cgroup_get_from_path(nla_data(path));
	else
		cgrp = cgroup_get_from_id(nla_get_u64(id));
	if (IS_ERR(cgrp))
		NL_SET_ERR_MSG_ATTR(info->extack, path ?: id,
				    "no cgroup v2 directory of that name");
	return cgrp;
}

/* SET and DEL: CAP_SYS_ADMIN in the initial user namespace as well. */
static int mrpool_nl_quota_perm(struct sk_buff *skb, struct genl_info *info)
{
	if (netlink_capable(skb, CAP_SYS_ADMIN))
		return 0;
	NL_SET_ERR_MSG(info->extack,
		       "quotas are set by CAP_SYS_ADMIN of the initial user namespace");
	return -EPERM;
}

static int mrpool_nl_quota_set(struct sk_buff *skb, struct genl_info *info)
{
	struct cgroup *cgrp;
	u64 limit;
	int ret;

	ret = mrpool_nl_quota_perm(skb, info);
	if (ret)
		return ret;
	if (GENL_REQ_ATTR_CHECK(info, MRPOOL_A_QUOTA_LIMIT_BYTES)) {
		NL_SET_ERR_MSG(info->extack, "a quota needs a limit in bytes");
		return -EINVAL;
	}
	limit = nla_get_u64(info->attrs[MRPOOL_A_QUOTA_LIMIT_BYTES]);
	cgrp = mrpool_nl_cgroup(info);
	if (IS_ERR(cgrp))
		return PTR_ERR(cgrp);
	/* The quota keeps the reference (or drops it). */
	ret = mrpool_quota_set(cgrp, limit);
	if (ret == -ENOENT)
		NL_SET_ERR_MSG(info->extack, "the cgroup is being removed");
	return ret;
}

static int mrpool_nl_quota_del(struct sk_buff *skb, struct genl_info *info)
{
	struct cgroup *cgrp;
	int ret;

	ret = mrpool_nl_quota_perm(skb, info);
	if (ret)
		return ret;
	cgrp = mrpool_nl_cgroup(info);
	if (IS_ERR(cgrp))
		return PTR_ERR(cgrp);
	ret = mrpool_quota_del(cgrp);
	cgroup_put(cgrp);
	if (ret == -ENOENT)
		NL_SET_ERR_MSG(info->extack, "the cgroup has no quota");
	return ret;
}

struct mrpool_nl_quota_msg {
	struct sk_buff *skb;
	u32 portid;
	u32 seq;
	int flags;
};

/* One quota, one message; under the quota lock (GFP-free). */
static int mrpool_nl_quota_fill(void *arg, const struct mrpool_quota_info *qi)
{
	struct mrpool_nl_quota_msg *m = arg;
	void *hdr;

	hdr = genlmsg_put(m->skb, m->portid, m->seq, &mrpool_nl_family,
			  m->flags, MRPOOL_CMD_QUOTA_GET);
	if (!hdr)
		return -EMSGSIZE;
	if (nla_put_string(m->skb, MRPOOL_A_QUOTA_PATH, qi->path) ||
	    mrpool_nl_put_u64(m->skb, MRPOOL_A_QUOTA_CGROUP_ID,
			      qi->cgroup_id) ||
	    (qi->has_limit &&
	     mrpool_nl_put_u64(m->skb, MRPOOL_A_QUOTA_LIMIT_BYTES,
			       qi->limit)) ||
	    mrpool_nl_put_u64(m->skb, MRPOOL_A_QUOTA_USAGE_BYTES, qi->usage) ||
	    mrpool_nl_put_u64(m->skb, MRPOOL_A_QUOTA_QUARANTINED_BYTES,
			      qi->quarantined) ||
	    (qi->removed && nla_put_flag(m->skb, MRPOOL_A_QUOTA_REMOVED))) {
		genlmsg_cancel(m->skb, hdr);
		return -EMSGSIZE;
	}
	genlmsg_end(m->skb, hdr);
	return 0;
}

static int mrpool_nl_quota_get(struct sk_buff *skb, struct genl_info *info)
{
	struct mrpool_nl_quota_msg m = {
		.portid = info->snd_portid,
		.seq = info->snd_seq,
	};
	struct cgroup *cgrp;
	u64 pos = 0;
	char *buf;
	int ret;

	cgrp = mrpool_nl_cgroup(info);
	if (IS_ERR(cgrp))
		return PTR_ERR(cgrp);
	ret = -ENOMEM;
	buf = mrpool_kzalloc(PATH_MAX, GFP_KERNEL);
	if (!buf)
		goto put_cgroup;
	/* A path of at most PATH_MAX and five numbers fit. */
	m.skb = mrpool_fail_alloc(PATH_MAX + 256) ? NULL :
		genlmsg_new(PATH_MAX + 256, GFP_KERNEL);
	if (!m.skb)
		goto free_buf;
	ret = mrpool_quotas_walk(&pos, mrpool_cgroup_ns_root(), cgrp, buf,
				 PATH_MAX, mrpool_nl_quota_fill, &m);
	if (ret) {
		if (ret == -ENOENT)
			NL_SET_ERR_MSG(info->extack, "the cgroup has no quota");
		nlmsg_free(m.skb);
		goto free_buf;
	}
	ret = genlmsg_reply(m.skb, info);
free_buf:
	kfree(buf);
put_cgroup:
	cgroup_put(cgrp);
	return ret;
}

/*
 * A dump's cursor (a cgroup id, a kuid value) in cb->args[0..1]: u64,
 * where long may have 32 bits. Whose view the dump gives is decided in
 * its .start, from the task that asked, and kept in cb->args[2..4] until
 * its .done: each later part runs in the task that reads the socket,
 * which may be another (the descriptor passed on, or inherited), and must
 * neither see more nor less than the dump was asked for.
 */
enum {
	MRPOOL_NL_CB_QUOTA_TOP = 2,	/* struct cgroup *, a reference */
	MRPOOL_NL_CB_TENANT_ALL = 2,	/* bool */
	MRPOOL_NL_CB_TENANT_MINE,	/* kuid value */
	MRPOOL_NL_CB_TENANT_NS,		/* struct user_namespace *, a ref */
};

static u64 mrpool_nl_cursor(const struct netlink_callback *cb)
{
	return (u64)(u32)cb->args[1] << 32 | (u32)cb->args[0];
}

/*
 * End a part of a dump whose walk stopped at @pos with @ret, @before the
 * skb's length at its start: a full skb ends this part (the walk goes on
 * from @pos), an empty one past the last ends the dump.
 */
static int mrpool_nl_dump_part(struct sk_buff *skb, struct netlink_callback *cb,
			       int before, u64 pos, int ret)
{
	cb->args[0] = lower_32_bits(pos);
	cb->args[1] = upper_32_bits(pos);
	if (ret == -EMSGSIZE && skb->len > before)
		return skb->len;
	if (ret)
		return ret;
	return skb->len;
}

/*
 * Each part of the dump gets room for the longest path: a quota's message
 * is never split, and one that did not fit an empty skb would end the dump.
 */
static int mrpool_nl_quota_dump_start(struct netlink_callback *cb)
{
	struct cgroup *top = mrpool_cgroup_ns_root();

	cgroup_get(top);
	cb->args[MRPOOL_NL_CB_QUOTA_TOP] = (long)top;
	cb->min_dump_alloc = PATH_MAX + 256;
	return 0;
}

static int mrpool_nl_quota_dump_done(struct netlink_callback *cb)
{
	cgroup_put((struct cgroup *)cb->args[MRPOOL_NL_CB_QUOTA_TOP]);
	return 0;
}

/* Quotas in cgroup id order, going on from the id after the last sent. */
static int mrpool_nl_quota_dump(struct sk_buff *skb,
				struct netlink_callback *cb)
{
	struct mrpool_nl_quota_msg m = {
		.skb = skb,
		.portid = NETLINK_CB(cb->skb).portid,
		.seq = cb->nlh->nlmsg_seq,
		.flags = NLM_F_MULTI,
	};
	u64 pos = mrpool_nl_cursor(cb);
	int before = skb->len;
	char *buf;
	int ret;

	buf = mrpool_kzalloc(PATH_MAX, GFP_KERNEL);
	if (!buf)
		return -ENOMEM;
	ret = mrpool_quotas_walk(&pos,
				 (struct cgroup *)cb->args[MRPOOL_NL_CB_QUOTA_TOP],
				 NULL, buf, PATH_MAX, mrpool_nl_quota_fill, &m);
	kfree(buf);
	return mrpool_nl_dump_part(skb, cb, before, pos, ret);
}

struct mrpool_nl_tenant_msg {
	struct sk_buff *skb;
	struct user_namespace *ns;	/* the caller's: uids as it sees them */
	u32 portid;
	u32 seq;
	int flags;
	bool found;
};

/* One tenant, one message; under the tenants' spinlock (GFP-free). */
static int mrpool_nl_tenant_fill(void *arg,
				 const struct mrpool_tenant_info *ti)
{
	struct mrpool_nl_tenant_msg *m = arg;
	void *hdr;

	hdr = genlmsg_put(m->skb, m->portid, m->seq, &mrpool_nl_family,
			  m->flags, MRPOOL_CMD_TENANT_GET);
	if (!hdr)
		return -EMSGSIZE;
	if ((ti->orphans ? nla_put_flag(m->skb, MRPOOL_A_TENANT_ORPHANS) :
	     nla_put_u32(m->skb, MRPOOL_A_TENANT_UID,
			 from_kuid_munged(m->ns, ti->uid))) ||
	    mrpool_nl_put_u64(m->skb, MRPOOL_A_TENANT_BYTES, ti->bytes) ||
	    mrpool_nl_put_u64(m->skb, MRPOOL_A_TENANT_QUARANTINED_BYTES,
			      ti->quarantined) ||
	    mrpool_nl_put_u64(m->skb, MRPOOL_A_TENANT_MEMLOCK_BYTES,
			      ti->memlock) ||
	    mrpool_nl_put_u64(m->skb, MRPOOL_A_TENANT_ORPHANED_BYTES,
			      ti->orphaned)) {
		genlmsg_cancel(m->skb, hdr);
		return -EMSGSIZE;
	}
	genlmsg_end(m->skb, hdr);
	m->found = true;
	return 0;
}

/* The caller's own tenant; zeros when it holds nothing (no tenant yet). */
static int mrpool_nl_tenant_get(struct sk_buff *skb, struct genl_info *info)
{
	struct mrpool_nl_tenant_msg m = {
		.ns = current_user_ns(),
		.portid = info->snd_portid,
		.seq = info->snd_seq,
	};
	struct mrpool_tenant_info none = { .uid = mrpool_tenant_uid() };
	u64 pos = 0;
	int ret;

	m.skb = mrpool_fail_alloc(NLMSG_DEFAULT_SIZE) ? NULL :
		genlmsg_new(NLMSG_DEFAULT_SIZE, GFP_KERNEL);
	if (!m.skb)
		return -ENOMEM;
	ret = mrpool_tenants_walk(&pos, false, none.uid, mrpool_nl_tenant_fill,
				  &m);
	if (!ret && !m.found)
		ret = mrpool_nl_tenant_fill(&m, &none);
	if (ret) {
		nlmsg_free(m.skb);
		return ret;
	}
	return genlmsg_reply(m.skb, info);
}

/*
 * Every tenant, then the orphans, for root of the initial user namespace;
 * only the caller's own tenant for anyone else: which users hold how much
 * is per-user data, as the owners in root-only debugfs are. Decided here,
 * for every part (see mrpool_nl_cursor()).
 */
static int mrpool_nl_tenant_dump_start(struct netlink_callback *cb)
{
	bool all = netlink_capable(cb->skb, CAP_SYS_ADMIN);

	cb->args[MRPOOL_NL_CB_TENANT_ALL] = all;
	cb->args[MRPOOL_NL_CB_TENANT_MINE] = __kuid_val(mrpool_tenant_uid());
	cb->args[MRPOOL_NL_CB_TENANT_NS] = (long)get_user_ns(current_user_ns());
	return 0;
}

static int mrpool_nl_tenant_dump_done(struct netlink_callback *cb)
{
	put_user_ns((struct user_namespace *)cb->args[MRPOOL_NL_CB_TENANT_NS]);
	return 0;
}

static int mrpool_nl_tenant_dump(struct sk_buff *skb,
				 struct netlink_callback *cb)
{
	struct mrpool_nl_tenant_msg m = {
		.skb = skb,
		.ns = (struct user_namespace *)cb->args[MRPOOL_NL_CB_TENANT_NS],
		.portid = NETLINK_CB(cb->skb).portid,
		.seq = cb->nlh->nlmsg_seq,
		.flags = NLM_F_MULTI,
	};
	kuid_t mine = KUIDT_INIT(cb->args[MRPOOL_NL_CB_TENANT_MINE]);
	u64 pos = mrpool_nl_cursor(cb);
	int before = skb->len;
	int ret;

	ret = mrpool_tenants_walk(&pos, cb->args[MRPOOL_NL_CB_TENANT_ALL], mine,
				  mrpool_nl_tenant_fill, &m);
	return mrpool_nl_dump_part(skb, cb, before, pos, ret);
}

/* Nobody in the group: the caller builds nothing. */
static bool mrpool_nl_listening(void)
{
	return genl_has_listeners(&mrpool_nl_family, &init_net,
				  MRPOOL_NL_GRP_EVENTS) > 0;
}

/* Room for the pool's totals (five u64 attributes). */
static size_t mrpool_nl_totals_size(void)
{
	return 5 * nla_total_size_64bit(sizeof(u64));
}

/* Room for one MRPOOL_A_DEVICE nest (mrpool_nl_put_dev()). */
static size_t mrpool_nl_dev_size(void)
{
	return nla_total_size(0) +			/* the nest */
	       nla_total_size(MRPOOL_DEVICE_NAME_LEN) +	/* name */
	       4 * nla_total_size(sizeof(u32)) +	/* state .. kbufs */
	       3 * nla_total_size_64bit(sizeof(u64)) +	/* regs .. timeouts */
	       nla_total_size(MRPOOL_IB_REASON_LEN);	/* reason */
}

/* A new event message of type @ev, @size bytes of payload after the type. */
static struct sk_buff *mrpool_nl_event_new(enum mrpool_nl_event ev,
					   size_t size, void **hdr)
{
	struct sk_buff *msg;

	might_sleep();
	msg = genlmsg_new(nla_total_size(sizeof(u32)) + size, GFP_KERNEL);
	if (!msg)
		return NULL;
	*hdr = genlmsg_put(msg, 0, 0, &mrpool_nl_family, 0, MRPOOL_CMD_EVENT);
	if (!*hdr || nla_put_u32(msg, MRPOOL_A_EVENT, ev)) {
		nlmsg_free(msg);
		return NULL;
	}
	return msg;
}

/* Sends (or on a full message drops) @msg; listeners may lose events. */
static void mrpool_nl_event_send(struct sk_buff *msg, void *hdr, int err)
{
	if (err) {
		nlmsg_free(msg);
		return;
	}
	genlmsg_end(msg, hdr);
	genlmsg_multicast(&mrpool_nl_family, msg, 0, MRPOOL_NL_GRP_EVENTS,
			  GFP_KERNEL);
}

/*
 * Pool events follow requests anyone with /dev/mrpool may make (every
 * failed ALLOC is an EXHAUSTED event), so they are rate-limited per type:
 * at most one per MRPOOL_NL_EVENT_INTERVAL. One that comes sooner is held
 * back; the latest held back goes out when the interval ends, carrying in
 * MRPOOL_A_EVENT_SUPPRESSED how many earlier ones it stands for. A flood
 * thus costs listeners two messages per type and interval, and no event
 * is lost without being counted. Device events come from ib_core (root
 * adds and removes devices) and name a device: never held back.
 */
#define MRPOOL_NL_EVENT_INTERVAL	HZ

/**
 * struct mrpool_nl_limit - rate limit of one pool event type
 * @work: sends the event held back when the interval ends
 * @ev: the event type
 * @next: jiffies before which no event of the type is sent
 * @held: events held back since the last one sent
 * @chunks: the latest held back event's %MRPOOL_A_EVENT_CHUNKS
 * @threshold: its %MRPOOL_A_EVENT_THRESHOLD_BYTES
 *
 * All but @work and @ev are under mrpool_nl_limit_lock (a spinlock:
 * senders may hold the pool lock, a mutex, and take it briefly).
 */
struct mrpool_nl_limit {
	struct delayed_work work;
	enum mrpool_nl_event ev;
	unsigned long next;
	u32 held;
	u32 chunks;
	u64 threshold;
};

static DEFINE_SPINLOCK(mrpool_nl_limit_lock);
static struct mrpool_nl_limit mrpool_nl_limits[MRPOOL_EVENT_MAX + 1];
/* Set at unload under the lock: no held event schedules work after it. */
static bool mrpool_nl_closing;

static void mrpool_nl_pool_send(enum mrpool_nl_event ev, u32 chunks,
				u64 threshold, u32 suppressed)
{
	struct sk_buff *msg;
	void *hdr;
	int err;

	/* The totals, a u64 threshold or a u32 count, and SUPPRESSED. */
	msg = mrpool_nl_event_new(ev, mrpool_nl_totals_size() +
				  nla_total_size_64bit(sizeof(u64)) +
				  nla_total_size(sizeof(u32)), &hdr);
	if (!msg)
		return;
	err = mrpool_nl_put_totals(msg);
	if (!err && ev == MRPOOL_EVENT_QUARANTINE_HIGH)
		err = mrpool_nl_put_u64(msg, MRPOOL_A_EVENT_THRESHOLD_BYTES,
					threshold);
	else if (!err)
		err = nla_put_u32(msg, MRPOOL_A_EVENT_CHUNKS, chunks);
	if (!err && suppressed)
		err = nla_put_u32(msg, MRPOOL_A_EVENT_SUPPRESSED, suppressed);
	mrpool_nl_event_send(msg, hdr, err);
}

/*
 * May an event of @l's type go now? If not, it becomes the held one (its
 * arguments kept) and the work that sends it is due when the interval
 * ends.
 */
static bool mrpool_nl_limit_pass(struct mrpool_nl_limit *l, u32 chunks,
				 u64 threshold)
{
	unsigned long now = jiffies;
	bool pass;

	spin_lock(&mrpool_nl_limit_lock);
	pass = time_after_eq(now, l->next) && !l->held;
	if (pass) {
		l->next = now + MRPOOL_NL_EVENT_INTERVAL;
	} else {
		if (l->held < U32_MAX)
			l->held++;
		l->chunks = chunks;
		l->threshold = threshold;
		if (!mrpool_nl_closing)
			schedule_delayed_work(&l->work,
					      time_after(l->next, now) ?
					      l->next - now : 0);
	}
	spin_unlock(&mrpool_nl_limit_lock);
	return pass;
}

/* The interval ended: the latest held back event goes, with the count. */
static void mrpool_nl_limit_fn(struct work_struct *work)
{
	struct mrpool_nl_limit *l = container_of(to_delayed_work(work),
						 struct mrpool_nl_limit, work);
	unsigned long now = jiffies;
	u32 held, chunks;
	u64 threshold;

	spin_lock(&mrpool_nl_limit_lock);
	held = l->held;
	chunks = l->chunks;
	threshold = l->threshold;
	l->held = 0;
	if (held)
		l->next = now + MRPOOL_NL_EVENT_INTERVAL;
	spin_unlock(&mrpool_nl_limit_lock);

	if (held && mrpool_nl_listening())
		mrpool_nl_pool_send(l->ev, chunks, threshold, held - 1);
}

/**
 * mrpool_nl_pool_event - tell listeners about the pool
 * @ev: %MRPOOL_EVENT_GROW_FAILED, %MRPOOL_EVENT_EXHAUSTED,
 *	%MRPOOL_EVENT_TRIM, %MRPOOL_EVENT_ORPHANS_FULL or
 *	%MRPOOL_EVENT_QUARANTINE_HIGH
 * @chunks: %MRPOOL_A_EVENT_CHUNKS (not sent for QUARANTINE_HIGH)
 * @threshold: %MRPOOL_A_EVENT_THRESHOLD_BYTES (QUARANTINE_HIGH only)
 *
 * Rate-limited per type (see struct mrpool_nl_limit). Process context
 * (GFP_KERNEL); the totals are read without the pool lock.
 */
void mrpool_nl_pool_event(enum mrpool_nl_event ev, u32 chunks, u64 threshold)
{
	might_sleep();
	if (WARN_ON_ONCE(ev <= MRPOOL_EVENT_UNSPEC || ev > MRPOOL_EVENT_MAX))
		return;
	if (!mrpool_nl_listening() ||
	    !mrpool_nl_limit_pass(&mrpool_nl_limits[ev], chunks, threshold))
		return;
	mrpool_nl_pool_send(ev, chunks, threshold, 0);
}

/**
 * mrpool_nl_dev_event - tell listeners about an RDMA device
 * @ev: %MRPOOL_EVENT_DEV_ADDED, _READY, _FAILED or _REMOVED
 * @d: the device (a reference held by the caller)
 *
 * Process context; takes mrpool_ib_lock, which must not be held; the
 * device's own lock may be. No pool totals: the pool lock is taken
 * outside a device's lock, never inside it.
 */
void mrpool_nl_dev_event(enum mrpool_nl_event ev, struct mrpool_ib_dev *d)
{
	struct sk_buff *msg;
	void *hdr;
	int err;

	if (!mrpool_nl_listening())
		return;
	msg = mrpool_nl_event_new(ev, mrpool_nl_dev_size(), &hdr);
	if (!msg)
		return;
	mutex_lock(&mrpool_ib_lock);
	err = mrpool_nl_put_dev(msg, d);
	mutex_unlock(&mrpool_ib_lock);
	mrpool_nl_event_send(msg, hdr, err);
}

int mrpool_nl_init(void)
{
	struct mrpool_nl_limit *l;
	unsigned int ev;

	for (ev = 0; ev <= MRPOOL_EVENT_MAX; ev++) {
		l = &mrpool_nl_limits[ev];
		l->ev = ev;
		l->next = jiffies;
		INIT_DELAYED_WORK(&l->work, mrpool_nl_limit_fn);
	}
	return genl_register_family(&mrpool_nl_family);
}

/* Every sender has stopped; held back events are dropped. */
void mrpool_nl_exit(void)
{
	unsigned int ev;

	spin_lock(&mrpool_nl_limit_lock);
	mrpool_nl_closing = true;
	spin_unlock(&mrpool_nl_limit_lock);
	for (ev = 0; ev <= MRPOOL_EVENT_MAX; ev++)
		cancel_delayed_work_sync(&mrpool_nl_limits[ev].work);
	genl_unregister_family(&mrpool_nl_family);
}
