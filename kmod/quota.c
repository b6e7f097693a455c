// SPDX-License-Identifier: GPL-2.0
/*
 * Pool quotas of cgroup v2 directories (issue 33): an operator gives a
 * cgroup a limit in bytes (netlink MRPOOL_CMD_QUOTA_SET), and every
 * process below it draws from it, hierarchically, as the rdma controller
 * bounds HCA objects: an ALLOC charges each quota'd ancestor of the
 * caller's cgroup (its own included), all or none, and fails with -EDQUOT
 * past any of their limits, leaving nothing charged.
 *
 * A charge is remembered, not recomputed: the chunks of an ALLOC share one
 * mrpool_quota_charge naming the quotas it charged, and each chunk gives
 * its share back to exactly those when it is free again (through its
 * slice's life, mappings, dma-bufs and quarantine, as the tenant charge
 * does), whether the process has moved to another cgroup or the quota was
 * changed or deleted meanwhile. What a revocation charges to another
 * user (revoke.c, tenant.c) leaves its quotas too: that user's pins hold
 * it. What it charges to the orphans keeps them until the pin goes: no
 * user can be named, and a container must not leave its quota by
 * pinning a chunk (a vmsplice()d page in a pipe passed on) and freeing
 * it.
 *
 * A quota holds a reference to its cgroup: a cgroup removed (rmdir) while
 * it holds pool memory stays charged, and listed as removed, until the
 * memory is back. A quota is freed when it has no limit and no usage, or
 * when its cgroup is gone and it has no usage (then at the next change
 * or listing of the table).
 *
 * Usage counts what was allocated after the quota was set: memory taken
 * before is charged to no quota, and a limit set below what is already
 * used only stops further allocations. It counts quarantined chunks,
 * shown on their own as well.
 *
 * quota_mode (main.c) says what a quota does: rlimit, quotas are counted
 * but not enforced (the tenant's limits alone apply); both, a caller
 * below a quota must pass it and the tenant's limits; quota, a caller
 * below a quota with a limit is bounded by it instead of RLIMIT_MEMLOCK
 * and the per-user share (max_user_mb, max_user_pct), since a container
 * has the usual 8 MiB of memlock and containers of one uid share a user.
 *
 * Locking: mrpool_quotas_lock (a spinlock) guards the table and every
 * count; it nests inside the others (mrpool.h) and nothing sleeps or takes
 * another lock under it but the kernfs rename lock for a cgroup's path
 * (kernfs_path_from_node(), not cgroup_path_ns(): that takes
 * cgroup_mutex).
 */
#include "mrpool.h"

#include <linux/cgroup.h>
#include <linux/kernfs.h>
#include <linux/nsproxy.h>
#include <linux/rcupdate.h>
#include <linux/slab.h>
#include <linux/spinlock.h>

struct mrpool_quota {
	struct list_head node;		/* mrpool_quotas */
	struct cgroup *cgrp;		/* a reference, kept past rmdir */
	u64 limit;			/* bytes, or MRPOOL_QUOTA_NO_LIMIT */
	unsigned long chunks;		/* charged: live to quarantined */
	unsigned long quarantined;	/* of those, in quarantine */
};

/* A quota kept only for what it has charged (its limit was deleted). */
#define MRPOOL_QUOTA_NO_LIMIT	U64_MAX

/**
 * struct mrpool_quota_charge - the quotas one ALLOC charged
 * @chunks: chunks carrying it (each holds one chunk of every quota's count)
 * @nr: quotas in @quotas
 * @quotas: each charged @chunks chunks; alive while those are charged
 */
struct mrpool_quota_charge {
	unsigned long chunks;
	unsigned int nr;
	struct mrpool_quota *quotas[];
};

static LIST_HEAD(mrpool_quotas);
static unsigned int mrpool_nr_quotas;
static DEFINE_SPINLOCK(mrpool_quotas_lock);

/* Caller holds mrpool_quotas_lock. */
static struct mrpool_quota *mrpool_quota_find(const struct cgroup *cgrp)
{
	struct mrpool_quota *q;

	list_for_each_entry(q, &mrpool_quotas, node)
		if (q->cgrp == cgrp)
			return q;
	return NULL;
}

/*
 * @cgrp was removed (rmdir): its own css goes offline then. Not
 * css_is_dying(), which newer kernels answer from CSS_DYING, set on
 * the subsystems' css only.
 */
static bool mrpool_cgroup_removed(struct cgroup *cgrp)
{
	return !(READ_ONCE(cgrp->self.flags) & CSS_ONLINE);
}

static bool mrpool_quota_removed(struct mrpool_quota *q)
{
	return mrpool_cgroup_removed(q->cgrp);
}

/*
 * Caller holds mrpool_quotas_lock: unlink @q onto @dead if nothing keeps
 * it (no usage, and no limit or no cgroup any more).
 */
static void mrpool_quota_unlink_idle(struct mrpool_quota *q,
				     struct list_head *dead)
{
	if (q->chunks || (q->limit != MRPOOL_QUOTA_NO_LIMIT &&
			  !mrpool_quota_removed(q)))
		return;
	list_move_tail(&q->node, dead);
	mrpool_nr_quotas--;
}

/* Caller holds mrpool_quotas_lock: unlink every idle quota of a gone cgroup. */
static void mrpool_quotas_prune(struct list_head *dead)
{
	struct mrpool_quota *q, *tmp;

	list_for_each_entry_safe(q, tmp, &mrpool_quotas, node)
		mrpool_quota_unlink_idle(q, dead);
}

/* Free what mrpool_quota_unlink_idle() unlinked, without the lock. */
static void mrpool_quotas_free(struct list_head *dead)
{
	struct mrpool_quota *q, *tmp;

	list_for_each_entry_safe(q, tmp, dead, node) {
		cgroup_put(q->cgrp);
		kfree(q);
	}
}

/**
 * mrpool_quota_charge - charge @nr chunks to every quota above the caller
 * @nr: chunks
 * @qcp: set to the charge to hand to mrpool_chunk_charge(), or NULL when
 *	no quota is above the caller
 * @covered: set when a quota with a limit covers the caller and
 *	quota_mode is quota: the tenant's limits do not apply
 *
 * Return: 0; -EDQUOT past a quota's limit (quota_mode quota or both),
 * nothing charged; -ENOMEM without memory.
 */
int mrpool_quota_charge(unsigned long nr, struct mrpool_quota_charge **qcp,
			bool *covered)
{
	enum mrpool_quota_mode mode = READ_ONCE(mrpool_quota_mode);
	struct mrpool_quota_charge *qc;
	bool limited = false;
	struct mrpool_quota *q;
	struct cgroup *cgrp;
	unsigned int i, n;
	int ret = 0;

	*qcp = NULL;
	*covered = false;
retry:
	n = READ_ONCE(mrpool_nr_quotas);
	if (!n)
		return 0;
	qc = mrpool_kzalloc(struct_size(qc, quotas, n), GFP_KERNEL_ACCOUNT);
	if (!qc)
		return -ENOMEM;

	rcu_read_lock();
	spin_lock(&mrpool_quotas_lock);
	if (mrpool_nr_quotas > n) {
		spin_unlock(&mrpool_quotas_lock);
		rcu_read_unlock();
		kfree(qc);
		goto retry;
	}
	/* Ancestors are pinned by the cgroup, the cgroup by RCU. */
	for (cgrp = task_dfl_cgroup(current); cgrp; cgrp = cgroup_parent(cgrp)) {
		q = mrpool_quota_find(cgrp);
		if (q)
			qc->quotas[qc->nr++] = q;
	}
	for (i = 0; i < qc->nr; i++) {
		q = qc->quotas[i];
		if (q->limit == MRPOOL_QUOTA_NO_LIMIT)
			continue;
		limited = true;
		if (mode != MRPOOL_QUOTA_MODE_RLIMIT &&
		    mrpool_pool_bytes(q->chunks + nr) > q->limit) {
			ret = -EDQUOT;
			goto unlock;
		}
	}
	for (i = 0; i < qc->nr; i++)
		qc->quotas[i]->chunks += nr;
	qc->chunks = nr;
unlock:
	spin_unlock(&mrpool_quotas_lock);
	rcu_read_unlock();
	if (ret || !qc->nr) {
		kfree(qc);
		return ret;
	}
	*qcp = qc;
	*covered = limited && mode == MRPOOL_QUOTA_MODE_QUOTA;
	return 0;
}

/**
 * mrpool_quota_covers - the quota that bounds the caller instead of its user
 * @limit: set to the lowest limit of those quotas, in bytes
 *
 * What mrpool_quota_charge() reports in @covered, charging nothing: for
 * what a caller below a quota with a limit is given beside pool memory
 * (a fork child's copy of a slice, forkcopy.c), under the rule that
 * admitted the slice.
 *
 * Return: true when quota_mode is quota and a quota with a limit is set
 * on the caller's cgroup or one of its ancestors.
 */
bool mrpool_quota_covers(u64 *limit)
{
	struct mrpool_quota *q;
	struct cgroup *cgrp;
	bool covered = false;

	if (READ_ONCE(mrpool_quota_mode) != MRPOOL_QUOTA_MODE_QUOTA ||
	    !READ_ONCE(mrpool_nr_quotas))
		return false;
	*limit = U64_MAX;
	rcu_read_lock();
	spin_lock(&mrpool_quotas_lock);
	for (cgrp = task_dfl_cgroup(current); cgrp; cgrp = cgroup_parent(cgrp)) {
		q = mrpool_quota_find(cgrp);
		if (!q || q->limit == MRPOOL_QUOTA_NO_LIMIT)
			continue;
		covered = true;
		*limit = min(*limit, q->limit);
	}
	spin_unlock(&mrpool_quotas_lock);
	rcu_read_unlock();
	return covered;
}

/**
 * mrpool_quota_uncharge - give back @nr chunks of @qc
 * @qc: a charge from mrpool_quota_charge(); freed with its last chunk
 * @nr: chunks
 * @quarantined: they were in quarantine
 */
void mrpool_quota_uncharge(struct mrpool_quota_charge *qc, unsigned long nr,
			   bool quarantined)
{
	struct mrpool_quota *q;
	LIST_HEAD(dead);
	unsigned int i;
	bool last;

	spin_lock(&mrpool_quotas_lock);
	for (i = 0; i < qc->nr; i++) {
		q = qc->quotas[i];
		q->chunks -= nr;
		if (quarantined)
			q->quarantined -= nr;
		mrpool_quota_unlink_idle(q, &dead);
	}
	qc->chunks -= nr;
	last = !qc->chunks;
	spin_unlock(&mrpool_quotas_lock);
	mrpool_quotas_free(&dead);
	if (last)
		kfree(qc);
}

/* A chunk of @qc entered quarantine: still charged, shown as quarantined. */
void mrpool_quota_quarantined(struct mrpool_quota_charge *qc)
{
	unsigned int i;

	spin_lock(&mrpool_quotas_lock);
	for (i = 0; i < qc->nr; i++)
		qc->quotas[i]->quarantined++;
	spin_unlock(&mrpool_quotas_lock);
}

/*
 * Keep the table in cgroup id order: a netlink dump goes on from the last
 * id it sent (mrpool_quotas_walk()), so quotas set or freed between its
 * parts are neither skipped nor repeated. Caller holds mrpool_quotas_lock.
 */
static void mrpool_quota_insert(struct mrpool_quota *new)
{
	u64 id = cgroup_id(new->cgrp);
	struct mrpool_quota *q;

	list_for_each_entry(q, &mrpool_quotas, node) {
		if (cgroup_id(q->cgrp) > id) {
			list_add_tail(&new->node, &q->node);
			return;
		}
	}
	list_add_tail(&new->node, &mrpool_quotas);
}

/**
 * mrpool_quota_set - give @cgrp a quota of @limit bytes
 * @cgrp: a reference the quota keeps, or drops if @cgrp has one already
 * @limit: bytes, at most MRPOOL_QUOTA_MAX_BYTES
 *
 * A limit below the usage stops further allocations only.
 *
 * Return: 0; -ENOENT if @cgrp is being removed; -ENOMEM.
 */
int mrpool_quota_set(struct cgroup *cgrp, u64 limit)
{
	struct mrpool_quota *q, *new;
	LIST_HEAD(dead);
	int ret = 0;

	new = mrpool_kzalloc(sizeof(*new), GFP_KERNEL);
	if (!new) {
		cgroup_put(cgrp);
		return -ENOMEM;
	}
	spin_lock(&mrpool_quotas_lock);
	mrpool_quotas_prune(&dead);
	if (mrpool_cgroup_removed(cgrp)) {
		ret = -ENOENT;
		goto unlock;
	}
	q = mrpool_quota_find(cgrp);
	if (q) {
		q->limit = limit;
		goto unlock;
	}
	/* Ownership of @new and the cgroup reference moves to the table. */
	new->cgrp = cgrp;
	new->limit = limit;
	mrpool_quota_insert(new);
	mrpool_nr_quotas++;
	cgrp = NULL;
	new = NULL;
unlock:
	spin_unlock(&mrpool_quotas_lock);
	mrpool_quotas_free(&dead);
	kfree(new);
	if (cgrp)
		cgroup_put(cgrp);
	return ret;
}

/**
 * mrpool_quota_del - delete @cgrp's limit
 * @cgrp: the cgroup (the caller's reference, not taken)
 *
 * What the quota has charged stays charged and listed until it is back.
 *
 * Return: 0; -ENOENT if @cgrp has no limit.
 */
int mrpool_quota_del(struct cgroup *cgrp)
{
	struct mrpool_quota *q;
	LIST_HEAD(dead);
	int ret = 0;

	spin_lock(&mrpool_quotas_lock);
	q = mrpool_quota_find(cgrp);
	if (!q || q->limit == MRPOOL_QUOTA_NO_LIMIT) {
		ret = -ENOENT;
	} else {
		q->limit = MRPOOL_QUOTA_NO_LIMIT;
		mrpool_quota_unlink_idle(q, &dead);
	}
	mrpool_quotas_prune(&dead);
	spin_unlock(&mrpool_quotas_lock);
	mrpool_quotas_free(&dead);
	return ret;
}

/**
 * mrpool_cgroup_ns_root - the root of the caller's cgroup namespace
 *
 * In the v2 hierarchy: what the caller may see of the quotas is below it.
 * Only the task itself changes its nsproxy, and the namespace holds its
 * root css_set, so the cgroup lives while the caller runs; a caller
 * keeping it longer (a netlink dump, its parts read by whichever task
 * holds the socket) takes a reference.
 *
 * Return: the cgroup, not referenced.
 */
struct cgroup *mrpool_cgroup_ns_root(void)
{
	return current->nsproxy->cgroup_ns->root_cset->dfl_cgrp;
}

/**
 * mrpool_quotas_walk - report quotas to @fn
 * @pos: the cgroup id to go on from; past each one reported (0: start)
 * @top: the root of the cgroup namespace the listing is for
 *	(mrpool_cgroup_ns_root() of the task that asked)
 * @only: report this cgroup's quota only (or NULL: every quota)
 * @buf: room for a cgroup's path
 * @len: its size
 * @fn: called under mrpool_quotas_lock (it must not sleep); an error
 *	stops the walk, @pos at the quota it refused
 * @arg: for @fn
 *
 * Only quotas of cgroups below @top are reported, with paths from it: a
 * container lists its own quotas (its root "/"), never the host's cgroup
 * tree. Root of the initial namespace sees them all.
 *
 * Return: 0; @fn's error; -ENOENT when @only has no quota.
 */
int mrpool_quotas_walk(u64 *pos, struct cgroup *top, struct cgroup *only,
		       char *buf, size_t len,
		       int (*fn)(void *arg, const struct mrpool_quota_info *),
		       void *arg)
{
	struct mrpool_quota_info info;
	struct mrpool_quota *q;
	LIST_HEAD(dead);
	int ret = 0;
	bool found = false;
	u64 id;

	spin_lock(&mrpool_quotas_lock);
	mrpool_quotas_prune(&dead);
	list_for_each_entry(q, &mrpool_quotas, node) {
		if (only && q->cgrp != only)
			continue;
		if (!cgroup_is_descendant(q->cgrp, top))
			continue;
		found = true;
		id = cgroup_id(q->cgrp);
		if (id < *pos)
			continue;
		/* From the namespace's root, as its /proc/PID/cgroup shows */
		if (kernfs_path_from_node(q->cgrp->kn, top->kn, buf, len) < 0)
			strscpy(buf, "?", len);
		info.path = buf;
		info.cgroup_id = id;
		info.has_limit = q->limit != MRPOOL_QUOTA_NO_LIMIT;
		info.limit = info.has_limit ? q->limit : 0;
		info.usage = mrpool_pool_bytes(q->chunks);
		info.quarantined = mrpool_pool_bytes(q->quarantined);
		info.removed = mrpool_quota_removed(q);
		ret = fn(arg, &info);
		if (ret)
			break;
		*pos = id + 1;
	}
	spin_unlock(&mrpool_quotas_lock);
	mrpool_quotas_free(&dead);
	if (!ret && only && !found)
		ret = -ENOENT;
	return ret;
}

static int mrpool_quota_show_one(void *arg, const struct mrpool_quota_info *qi)
{
	struct seq_file *m = arg;

	if (qi->has_limit)
		seq_printf(m, "%s %llu %llu %llu %llu %d\n", qi->path,
			   qi->cgroup_id, qi->limit, qi->usage,
			   qi->quarantined, qi->removed);
	else
		seq_printf(m, "%s %llu - %llu %llu %d\n", qi->path,
			   qi->cgroup_id, qi->usage, qi->quarantined,
			   qi->removed);
	return 0;
}

/* debugfs quotas: path cgroup_id limit_bytes bytes quarantined_bytes removed */
void mrpool_quotas_show(struct seq_file *m)
{
	u64 pos = 0;
	char *buf;

	seq_puts(m, "path cgroup_id limit_bytes bytes quarantined_bytes removed\n");
	buf = kmalloc(PATH_MAX, GFP_KERNEL);
	if (!buf)
		return;
	mrpool_quotas_walk(&pos, mrpool_cgroup_ns_root(), NULL, buf, PATH_MAX,
			   mrpool_quota_show_one, m);
	kfree(buf);
}

/* Module exit: no chunk is charged any more; drop every quota. */
void mrpool_quotas_exit(void)
{
	struct mrpool_quota *q;
	LIST_HEAD(dead);

	spin_lock(&mrpool_quotas_lock);
	list_for_each_entry(q, &mrpool_quotas, node)
		WARN_ON(q->chunks || q->quarantined);
	list_splice_init(&mrpool_quotas, &dead);
	mrpool_nr_quotas = 0;
	spin_unlock(&mrpool_quotas_lock);
	mrpool_quotas_free(&dead);
}
