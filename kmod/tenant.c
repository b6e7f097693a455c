// SPDX-License-Identifier: GPL-2.0
/*
 * Tenants: the users pool memory is charged to. A chunk taken for a slice
 * is charged to the user that allocated it -- against max_user_mb and,
 * unless the caller has CAP_IPC_LOCK, RLIMIT_MEMLOCK through the user's
 * locked_vm like other pinned memory (io_uring, perf, RDMA) -- and stays
 * charged until the chunk is free again, or its charge moves to the
 * importer that holds it after a revocation (below). A pin of the
 * owner's own that outlives a free (an MR, a vmsplice()d page, O_DIRECT)
 * therefore never takes memory out of its owner's account, and no mix of
 * opens, forks, mappings and frees multiplies a user's share.
 *
 * Both counters are per user: RLIMIT_MEMLOCK is compared with the user's
 * locked_vm, as io_uring does. Charges are in chunks, bytes for display.
 *
 * The user of a task in a user namespace is the owner of its outermost
 * namespace below the initial one: whoever made the container, not the
 * kuid a uid inside maps to. Each uid of a subordinate range
 * (/etc/subuid, newuidmap) is a kuid of its own, with a user_struct and a
 * locked_vm of its own: charged to those, one user with 65536 subuids
 * would have 65536 shares of max_user_mb and of RLIMIT_MEMLOCK. A
 * tenant's locked_vm is that of the task that made the tenant: the
 * owner's own when one of the owner's tasks opened the device first, else
 * that of the first uid of the namespace to do so; every uid charged to
 * the tenant draws on that one count. A fork child's copy of a FORK_COPY
 * slice is not the tenant's: it is memory of the child's mm (forkcopy.c),
 * in its RSS from the fork on and in its pinned_vm, limited per process
 * as mlock() is, and gone with that mm, which another user may hold long
 * after the child exited.
 *
 * A user's own charge is back by the time its process has been reaped,
 * and no other user keeps it (issue 33): the owner's FREE, or its file's
 * release, revokes the slice (revoke.c): every mapping of it, the
 * owner's and its dma-bufs' in any process, is zapped, and its chunks go
 * back at once. What is still held waits, and who holds it can be told,
 * for a dma-buf's mapping cannot be pinned (dmabuf.c):
 *  - a chunk pinned once the mappings are gone (a pipe holding
 *    vmsplice()d pages, an MR, O_DIRECT) was pinned through the owner's
 *    own mapping: it stays the owner's until it is free, but for the
 *    leftovers of an exiting owner process (a pin dropped a moment
 *    later, its uverbs file closing after this one), which go to the
 *    orphans -- no user's, no RLIMIT_MEMLOCK -- while the orphans hold
 *    less than one user's share in all;
 *    (a chunk pinned at the revocation stays so even while importers'
 *    attachments are mapped: those hold no page);
 *  - the other chunks, kept for importers' mapped attachments, go to the
 *    one other user that has an attachment mapped at the revocation
 *    while that user's charge is within one user's share (max_user_mb,
 *    or max_user_pct of max_mb), then to the orphans as above; to the
 *    orphans alone when several users have (or a kernel thread), or when
 *    only the owner has and is exiting; they stay the owner's when only
 *    it has;
 *  - what has no room stays the owner's until it is free
 *    (stats/orphans_full counts it, and listeners get
 *    MRPOOL_EVENT_ORPHANS_FULL).
 * So the owner cannot push more than a share on any other user, no user
 * can hold more than its share and that one of the orphans by pinning,
 * freeing and allocating again, and the default share (half of max_mb)
 * still leaves room for others. Another user leaves the owner charged
 * only through an attachment it maps while it is at its share and the
 * orphans are full, until it unmaps; and where the owner and one other
 * user both have attachments mapped then, the other user is charged for
 * the chunks until the last of them is unmapped, the owner's included,
 * within its share.
 * An orphaned chunk keeps its cgroup quotas (quota.c): a container does
 * not escape its quota by pinning and freeing; a chunk charged to
 * another user leaves them, as it leaves the owner's RLIMIT_MEMLOCK.
 *
 * A chunk also carries the cgroup quotas its ALLOC charged (quota.c),
 * given back with the tenant charge; where quota_mode is quota and a
 * quota with a limit covers the caller, that quota is its bound instead
 * of the cap and RLIMIT_MEMLOCK, and the tenant only counts the chunks.
 */
#include "mrpool.h"

#include <linux/math64.h>
#include <linux/slab.h>
#include <linux/spinlock.h>
#include <linux/refcount.h>
#include <linux/cred.h>
#include <linux/capability.h>
#include <linux/sched/user.h>
#include <linux/sched/signal.h>
#include <linux/uidgid.h>
#include <linux/user_namespace.h>

struct mrpool_tenant {
	struct list_head node;		/* mrpool_tenants */
	refcount_t ref;			/* charged chunks, clients, lookups */
	kuid_t uid;			/* who is charged (see above) */
	struct user_struct *user;	/* a reference; locked_vm is charged */
	unsigned long chunks;		/* charged: live to quarantined */
	unsigned long quarantined;	/* of those, in quarantine */
	unsigned long memlock;		/* of those, in RLIMIT_MEMLOCK */
	/*
	 * Chunks taken from it to the orphans, still held: counted in no
	 * charge of its, but its to see (debugfs users, TENANT_GET). Each
	 * holds a reference (c->orphan_of), so the user stays listed, with
	 * this count, until they are free.
	 */
	unsigned long orphaned;
};

/* Charges of dead owners (see above): never listed, never freed. */
static struct mrpool_tenant mrpool_orphans = {
	.ref = REFCOUNT_INIT(1),
	.uid = INVALID_UID,
};

/* Few users hold pool memory at once: a list does. */
static LIST_HEAD(mrpool_tenants);
/* The list, and the counts of every tenant; see mrpool.h. */
static DEFINE_SPINLOCK(mrpool_tenants_lock);

/*
 * The kuid the calling task is charged as: its own in the initial user
 * namespace, else the owner of the outermost namespace above it (below
 * the initial one). An owner is a kuid of the parent namespace, so the
 * outermost one's is of the initial namespace.
 */
kuid_t mrpool_tenant_uid(void)
{
	const struct user_namespace *ns = current_user_ns();

	if (ns == &init_user_ns)
		return current_user()->uid;
	while (ns->parent != &init_user_ns)
		ns = ns->parent;
	return ns->owner;
}

/*
 * Keep the list in uid order: a netlink dump goes on from the last uid it
 * sent (mrpool_tenants_walk()), so tenants added or gone between its parts
 * are neither skipped nor repeated. Caller holds mrpool_tenants_lock.
 */
static void mrpool_tenant_insert(struct mrpool_tenant *new)
{
	struct mrpool_tenant *t;

	list_for_each_entry(t, &mrpool_tenants, node) {
		if (uid_gt(t->uid, new->uid)) {
			list_add_tail(&new->node, &t->node);
			return;
		}
	}
	list_add_tail(&new->node, &mrpool_tenants);
}

/**
 * mrpool_tenant_get - the calling task's user, with a reference
 *
 * Return: the tenant, or NULL without memory.
 */
struct mrpool_tenant *mrpool_tenant_get(void)
{
	struct user_struct *user = current_user();
	kuid_t uid = mrpool_tenant_uid();
	struct mrpool_tenant *t, *new;

	new = mrpool_kzalloc(sizeof(*new), GFP_KERNEL);
	spin_lock(&mrpool_tenants_lock);
	list_for_each_entry(t, &mrpool_tenants, node) {
		/* A tenant whose last reference is going is skipped. */
		if (uid_eq(t->uid, uid) && refcount_inc_not_zero(&t->ref))
			goto found;
	}
	t = new;
	new = NULL;
	if (t) {
		refcount_set(&t->ref, 1);
		t->uid = uid;
		t->user = get_uid(user);
		mrpool_tenant_insert(t);
	}
found:
	spin_unlock(&mrpool_tenants_lock);
	kfree(new);
	return t;
}

void mrpool_tenant_put(struct mrpool_tenant *t)
{
	if (!t || !refcount_dec_and_test(&t->ref))
		return;
	spin_lock(&mrpool_tenants_lock);
	list_del(&t->node);
	spin_unlock(&mrpool_tenants_lock);
	WARN_ON(t->chunks || t->quarantined || t->memlock || t->orphaned);
	free_uid(t->user);
	kfree(t);
}

/**
 * mrpool_tenant_lock_pages - count @pages as locked memory of @t
 * @t: a tenant of a user (not the orphans)
 * @pages: pages
 * @limit: the caller's RLIMIT_MEMLOCK, in pages
 *
 * Adds @pages to the locked_vm of @t's user, the one count every uid
 * charged to @t draws on (see above), unless that would pass @limit.
 * The pool's charge (mrpool_tenant_charge()) holds mrpool_tenants_lock
 * to keep it and the tenant's chunk counts together; locked_vm itself is
 * atomic, shared with the kernel's other per-user charges (io_uring's,
 * perf's).
 *
 * Return: 0, or -ENOMEM past @limit; nothing is counted then.
 */
static int mrpool_tenant_lock_pages(struct mrpool_tenant *t,
				    unsigned long pages, unsigned long limit)
{
	unsigned long cur, new;

	cur = atomic_long_read(&t->user->locked_vm);
	do {
		new = cur + pages;
		if (new > limit || new < cur)
			return -ENOMEM;
	} while (!atomic_long_try_cmpxchg(&t->user->locked_vm, &cur, new));
	return 0;
}

/* Give back @pages counted by mrpool_tenant_lock_pages(). */
static void mrpool_tenant_unlock_pages(struct mrpool_tenant *t,
				       unsigned long pages)
{
	atomic_long_sub(pages, &t->user->locked_vm);
}

/**
 * mrpool_tenant_charge - charge @nr chunks to @t before taking them
 * @t: the caller's tenant
 * @nr: chunks
 * @covered: a cgroup quota bounds the caller instead (quota_mode quota,
 *	quota.c): neither cap nor RLIMIT_MEMLOCK applies, the chunks are
 *	counted only
 * @memlock: set when RLIMIT_MEMLOCK was charged (the caller lacks
 *	CAP_IPC_LOCK); pass it back to mrpool_tenant_uncharge() or
 *	mrpool_chunk_charge()
 *
 * The cap is max_user_mb; while that is 0, a caller charged to
 * RLIMIT_MEMLOCK is capped at max_user_pct of max_mb, and one with
 * CAP_IPC_LOCK is not capped (see main.c).
 *
 * Return: 0; -EDQUOT past the cap; -ENOMEM past RLIMIT_MEMLOCK.
 */
int mrpool_tenant_charge(struct mrpool_tenant *t, unsigned long nr,
			 bool covered, bool *memlock)
{
	u64 cap = (u64)READ_ONCE(mrpool_max_user_mb) * SZ_1M;
	unsigned long pages = nr << mrpool_pool.chunk_order;
	unsigned long limit;
	int ret = 0;

	/* Which limit applies, not a refusal: no audit record per ALLOC. */
	*memlock = !covered && !ns_capable_noaudit(&init_user_ns,
						   CAP_IPC_LOCK);
	if (covered)
		cap = 0;
	else if (!cap && *memlock)
		cap = div_u64((u64)READ_ONCE(mrpool_max_mb) * SZ_1M *
			      READ_ONCE(mrpool_max_user_pct), 100);
	limit = rlimit(RLIMIT_MEMLOCK) >> PAGE_SHIFT;

	spin_lock(&mrpool_tenants_lock);
	if (cap && mrpool_pool_bytes(t->chunks + nr) > cap) {
		ret = -EDQUOT;
		goto unlock;
	}
	if (*memlock) {
		ret = mrpool_tenant_lock_pages(t, pages, limit);
		if (ret)
			goto unlock;
		t->memlock += nr;
	}
	t->chunks += nr;
unlock:
	spin_unlock(&mrpool_tenants_lock);
	return ret;
}

/* Undo a charge of @nr chunks that were never taken (or are free again). */
void mrpool_tenant_uncharge(struct mrpool_tenant *t, unsigned long nr,
			    bool memlock)
{
	spin_lock(&mrpool_tenants_lock);
	if (memlock) {
		mrpool_tenant_unlock_pages(t, nr << mrpool_pool.chunk_order);
		t->memlock -= nr;
	}
	t->chunks -= nr;
	spin_unlock(&mrpool_tenants_lock);
}

/*
 * Hand one chunk of a charge to @c, which takes a tenant reference and
 * one chunk of @qc (quota.c; NULL if no quota was charged).
 */
void mrpool_chunk_charge(struct mrpool_chunk *c, struct mrpool_tenant *t,
			 bool memlock, struct mrpool_quota_charge *qc)
{
	refcount_inc(&t->ref);
	c->tenant = t;
	c->memlock = memlock;
	c->quota = qc;
}

/* @c entered quarantine: still charged, now shown as quarantined. */
void mrpool_chunk_quarantined(struct mrpool_chunk *c)
{
	if (!c->tenant)
		return;
	spin_lock(&mrpool_tenants_lock);
	c->tenant->quarantined++;
	spin_unlock(&mrpool_tenants_lock);
	if (c->quota)
		mrpool_quota_quarantined(c->quota);
}

/* @c is free again (@quarantined: it was in quarantine): drop its charge. */
void mrpool_chunk_uncharge(struct mrpool_chunk *c, bool quarantined)
{
	struct mrpool_tenant *t = c->tenant, *from = c->orphan_of;

	if (from) {
		spin_lock(&mrpool_tenants_lock);
		from->orphaned--;
		spin_unlock(&mrpool_tenants_lock);
		c->orphan_of = NULL;
		mrpool_tenant_put(from);
	}

	if (c->quota) {
		mrpool_quota_uncharge(c->quota, 1, quarantined);
		c->quota = NULL;
	}
	if (!t)
		return;
	if (quarantined) {
		spin_lock(&mrpool_tenants_lock);
		t->quarantined--;
		spin_unlock(&mrpool_tenants_lock);
	}
	mrpool_tenant_uncharge(t, 1, c->memlock);
	c->tenant = NULL;
	c->memlock = false;
	mrpool_tenant_put(t);
}

/*
 * One user's share, in chunks: max_user_mb, or while that is 0
 * max_user_pct of max_mb; at least one chunk, so that a share smaller
 * than a chunk still lets a revocation's leftovers move.
 */
static unsigned long mrpool_user_share(void)
{
	u64 cap = (u64)READ_ONCE(mrpool_max_user_mb) * SZ_1M;

	if (!cap)
		cap = div_u64((u64)READ_ONCE(mrpool_max_mb) * SZ_1M *
			      READ_ONCE(mrpool_max_user_pct), 100);
	return max_t(u64, 1, div_u64(cap, mrpool_pool.chunk_size));
}

/* Whether @t is the calling task's tenant (what it would be charged as). */
bool mrpool_tenant_is_current(struct mrpool_tenant *t)
{
	return t && t != &mrpool_orphans && uid_eq(t->uid, mrpool_tenant_uid());
}

/**
 * mrpool_chunks_recharge - move the charge of a revoked slice's pinned chunks
 * @chunks: chunks of one slice, charged to its owner's tenant
 * @to: the one other user with an attachment of the slice's dma-buf
 *	mapped (the chunks are kept for attachments), or NULL
 * @orphan: what @to has no room for may go to the orphans (several users
 *	mapped attachments, one did, or the owner process is exiting)
 *
 * The rule is the header's: each chunk moves to @to while @to's charge is
 * below one user's share, else with @orphan to the orphans while they
 * hold less than one share, else it stays the owner's. The chunks are
 * the caller's alone (taken off the slice at its revocation, revoke.c):
 * nothing uncharges them meanwhile. What moves
 * leaves the owner's RLIMIT_MEMLOCK charge; what moves to @to leaves the
 * owner's cgroup quotas too, what is orphaned keeps them.
 *
 * Return: with @orphan, how many chunks stayed the owner's for want of
 * room (the caller reports them); else 0.
 */
unsigned long mrpool_chunks_recharge(struct list_head *chunks,
				     struct mrpool_tenant *to, bool orphan)
{
	unsigned long share = mrpool_user_share();
	struct mrpool_tenant *t, *owner = NULL, *dest;
	unsigned long moved = 0, kept = 0;
	struct mrpool_chunk *c;

	spin_lock(&mrpool_tenants_lock);
	list_for_each_entry(c, chunks, link) {
		t = c->tenant;
		if (!t || t == to || t == &mrpool_orphans)
			continue;
		if (to && to->chunks < share) {
			dest = to;
		} else if (orphan && mrpool_orphans.chunks < share) {
			dest = &mrpool_orphans;
		} else {
			if (orphan)
				kept++;
			continue;
		}
		if (c->memlock) {
			mrpool_tenant_unlock_pages(t,
						   1UL << mrpool_pool.chunk_order);
			t->memlock--;
			c->memlock = false;
		}
		t->chunks--;
		dest->chunks++;
		refcount_inc(&dest->ref);
		c->tenant = dest;
		/* The chunk's reference to the owner becomes orphan_of's. */
		if (dest == &mrpool_orphans) {
			t->orphaned++;
			c->orphan_of = t;
			continue;
		}
		owner = t;
		moved++;
	}
	spin_unlock(&mrpool_tenants_lock);
	/* The owner's cgroups are free of what another user's pins hold. */
	list_for_each_entry(c, chunks, link) {
		if (!to || c->tenant != to || !c->quota)
			continue;
		mrpool_quota_uncharge(c->quota, 1, false);
		c->quota = NULL;
	}
	/* The chunks' references to the owner; its client holds one more. */
	while (moved--)
		mrpool_tenant_put(owner);
	return kept;
}

/* Bytes charged to @t, and of those in quarantine. */
u64 mrpool_tenant_bytes(struct mrpool_tenant *t, u64 *quarantined)
{
	unsigned long chunks, q;

	spin_lock(&mrpool_tenants_lock);
	chunks = t->chunks;
	q = t->quarantined;
	spin_unlock(&mrpool_tenants_lock);
	if (quarantined)
		*quarantined = mrpool_pool_bytes(q);
	return mrpool_pool_bytes(chunks);
}

/* debugfs users: uid bytes quarantined_bytes memlock_bytes orphaned_bytes */
void mrpool_tenants_show(struct seq_file *m)
{
	struct mrpool_tenant *t;

	seq_puts(m, "uid bytes quarantined_bytes memlock_bytes orphaned_bytes\n");
	spin_lock(&mrpool_tenants_lock);
	list_for_each_entry(t, &mrpool_tenants, node)
		seq_printf(m, "%u %llu %llu %llu %llu\n",
			   from_kuid_munged(&init_user_ns, t->uid),
			   mrpool_pool_bytes(t->chunks),
			   mrpool_pool_bytes(t->quarantined),
			   mrpool_pool_bytes(t->memlock),
			   mrpool_pool_bytes(t->orphaned));
	if (mrpool_orphans.chunks)
		seq_printf(m, "orphans %llu %llu 0 0\n",
			   mrpool_pool_bytes(mrpool_orphans.chunks),
			   mrpool_pool_bytes(mrpool_orphans.quarantined));
	spin_unlock(&mrpool_tenants_lock);
}

/**
 * mrpool_tenants_walk - report tenants in uid order, then the orphans
 * @pos: (in/out) where to go on: a kuid value, MRPOOL_TENANTS_POS_ORPHANS
 *	or past it; 0 at the start
 * @all: every tenant and the orphans; else only @mine's, if it exists
 * @mine: the tenant uid of the task the listing is for (mrpool_tenant_uid()
 *	of the task that asked)
 * @fn: called under mrpool_tenants_lock (a spinlock: it must not sleep or
 *	allocate); a nonzero return stops the walk with *@pos at that tenant
 * @arg: for @fn
 *
 * The counts of one tenant are read together, under the lock.
 *
 * Return: 0 once everything from *@pos on was reported, else what @fn
 * returned.
 */
int mrpool_tenants_walk(u64 *pos, bool all, kuid_t mine,
			int (*fn)(void *arg, const struct mrpool_tenant_info *ti),
			void *arg)
{
	struct mrpool_tenant_info ti = {};
	struct mrpool_tenant *t;
	int ret = 0;

	spin_lock(&mrpool_tenants_lock);
	list_for_each_entry(t, &mrpool_tenants, node) {
		if (__kuid_val(t->uid) < *pos)
			continue;
		if (!all && !uid_eq(t->uid, mine))
			continue;
		ti.uid = t->uid;
		ti.bytes = mrpool_pool_bytes(t->chunks);
		ti.quarantined = mrpool_pool_bytes(t->quarantined);
		ti.memlock = mrpool_pool_bytes(t->memlock);
		ti.orphaned = mrpool_pool_bytes(t->orphaned);
		ret = fn(arg, &ti);
		if (ret)
			goto unlock;
		*pos = (u64)__kuid_val(t->uid) + 1;
	}
	if (*pos <= MRPOOL_TENANTS_POS_ORPHANS && all) {
		*pos = MRPOOL_TENANTS_POS_ORPHANS;
		ti.uid = INVALID_UID;
		ti.orphans = true;
		ti.bytes = mrpool_pool_bytes(mrpool_orphans.chunks);
		ti.quarantined = mrpool_pool_bytes(mrpool_orphans.quarantined);
		ti.memlock = 0;
		ti.orphaned = 0;
		ret = fn(arg, &ti);
		if (ret)
			goto unlock;
	}
	*pos = MRPOOL_TENANTS_POS_ORPHANS + 1;
unlock:
	spin_unlock(&mrpool_tenants_lock);
	return ret;
}
