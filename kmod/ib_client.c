// SPDX-License-Identifier: GPL-2.0
/*
 * The ib_client: one struct mrpool_ib_dev per RDMA device, usable or not,
 * the registry of chunks the kernel MR cache covers, and the hooks through
 * which the pool announces chunks as they come and go. Registration itself
 * lives in ib_reg.c.
 */
#include "ib.h"

#include <linux/module.h>
#include <linux/slab.h>
#include <linux/mm.h>

/* The device list, each device's state and reason, the registry; see ib.h. */
DEFINE_MUTEX(mrpool_ib_lock);
LIST_HEAD(mrpool_ib_devs);
DEFINE_XARRAY(mrpool_ib_chunks);
/*
 * Chunks an MR may still reach after its device was torn down (the device
 * refused ib_dereg_mr to the end): their pages are never freed.
 */
static DEFINE_XARRAY(mrpool_ib_leaked);
/*
 * From mrpool_ib_init() to the start of mrpool_ib_exit(): chunks may be
 * added. The pool's workers, which add chunks, are quiesced before the
 * ib side stops (mrpool_pool_quiesce(), at unload and in a failed load's
 * unwind); one added after would go into a registry being destroyed.
 */
static bool mrpool_ib_running;
struct mrpool_ib_stats mrpool_ib_stats;

/* Position of the last device listed (mrpool_ib_lock). */
static u64 mrpool_ib_seq;
/* mrpool_ib_node()'s answer, recomputed under mrpool_ib_lock. */
static int mrpool_ib_node_cached = NUMA_NO_NODE;

/*
 * debugfs knobs: the next N device setups (chunk registrations, calls to
 * ib_dereg_mr()) fail; the next N completions of the internal QPs are
 * swallowed, after the first fail_ib_complete_after are delivered;
 * fail_ib_dereg_final: the next N last-chance deregistrations, made when a
 * device goes (or the module unloads), fail as a device that refuses them
 * would, leaking the MR; fail_ib_wc: the next N completions of work
 * requests report an error, after the first fail_ib_wc_after (a count of
 * its own, so that both knobs can be armed together).
 */
atomic_t mrpool_ib_fail_setup = ATOMIC_INIT(0);
atomic_t mrpool_ib_fail_reg = ATOMIC_INIT(0);
atomic_t mrpool_ib_fail_complete = ATOMIC_INIT(0);
atomic_t mrpool_ib_fail_complete_after = ATOMIC_INIT(0);
atomic_t mrpool_ib_fail_dereg = ATOMIC_INIT(0);
atomic_t mrpool_ib_fail_dereg_final = ATOMIC_INIT(0);
atomic_t mrpool_ib_fail_wc = ATOMIC_INIT(0);
atomic_t mrpool_ib_fail_wc_after = ATOMIC_INIT(0);
/* A local work request completes in microseconds; seconds mean never. */
u32 mrpool_ib_wr_timeout_ms = 5000;
/*
 * debugfs recover_ms, recover_max_ms: the wait before a failed device's
 * first recovery attempt (0: never recover), and the longest one, which
 * the wait doubles towards after each failed attempt.
 */
u32 mrpool_ib_recover_ms = 1000;
u32 mrpool_ib_recover_max_ms = 60000;

static const char *const mrpool_ib_state_names[] = {
	[MRPOOL_IB_READY] = "ready",
	[MRPOOL_IB_UNSUPPORTED] = "unsupported",
	[MRPOOL_IB_FAILED] = "failed",
	[MRPOOL_IB_REMOVED] = "removed",
};

const char *mrpool_ib_state_name(enum mrpool_ib_state state)
{
	if (state >= ARRAY_SIZE(mrpool_ib_state_names))
		return "unknown";
	return mrpool_ib_state_names[state];
}

/* The state as the UAPI says it (DEVICES ioctl, netlink). */
u32 mrpool_ib_state_uapi(enum mrpool_ib_state state)
{
	switch (state) {
	case MRPOOL_IB_READY:
		return MRPOOL_DEVICE_READY;
	case MRPOOL_IB_UNSUPPORTED:
		return MRPOOL_DEVICE_UNSUPPORTED;
	case MRPOOL_IB_REMOVED:
		return MRPOOL_DEVICE_REMOVED;
	default:
		return MRPOOL_DEVICE_FAILED;
	}
}

/* A chunk's pages are the pool's for the chunk's life: the first is its key. */
unsigned long mrpool_ib_chunk_key(const struct mrpool_chunk *c)
{
	return page_to_pfn(c->pages[0]);
}

/* Caller holds mrpool_ib_lock: the node of the first usable device. */
static void mrpool_ib_summary_update(void)
{
	struct mrpool_ib_dev *d;
	int nid = NUMA_NO_NODE;

	lockdep_assert_held(&mrpool_ib_lock);
	list_for_each_entry(d, &mrpool_ib_devs, link) {
		if (d->state == MRPOOL_IB_READY && d->node != NUMA_NO_NODE) {
			nid = d->node;
			break;
		}
	}
	WRITE_ONCE(mrpool_ib_node_cached, nid);
}

/*
 * Called with the device's lock held (or before it is listed), never with
 * mrpool_ib_lock, which it takes briefly: readers of the list see the
 * state and reason change together. A listed device that becomes ready or
 * unusable is an event; setup (before listing) is reported by
 * mrpool_ib_add(), removal by mrpool_ib_remove().
 */
void mrpool_ib_set_state(struct mrpool_ib_dev *d, enum mrpool_ib_state state,
			 const char *fmt, ...)
{
	bool event;
	va_list args;

	mutex_lock(&mrpool_ib_lock);
	event = d->announced && d->state != state &&
		state != MRPOOL_IB_REMOVED;
	/* mrpool_ib_remove() sends REMOVED, the device's last event. */
	if (state == MRPOOL_IB_REMOVED)
		d->announced = false;
	WRITE_ONCE(d->state, state);
	va_start(args, fmt);
	vsnprintf(d->reason, sizeof(d->reason), fmt, args);
	va_end(args);
	mrpool_ib_summary_update();
	mutex_unlock(&mrpool_ib_lock);
	if (state != MRPOOL_IB_READY && state != MRPOOL_IB_REMOVED)
		pr_info("%s: %s: %s\n", d->name, mrpool_ib_state_name(state),
			d->reason);
	if (event)
		mrpool_nl_dev_event(state == MRPOOL_IB_READY ?
				    MRPOOL_EVENT_DEV_READY :
				    MRPOOL_EVENT_DEV_FAILED, d);
}

/* Software devices (rxe, siw) have no DMA device: fall back to the ib_device. */
static int mrpool_ib_dev_node(struct ib_device *ibdev)
{
	if (ibdev->dma_device)
		return dev_to_node(ibdev->dma_device);
	return dev_to_node(&ibdev->dev);
}

/* Caller holds mrpool_ib_lock. A removed device is no longer listed. */
struct mrpool_ib_dev *mrpool_ib_dev_find(struct ib_device *ibdev)
{
	struct mrpool_ib_dev *d;

	lockdep_assert_held(&mrpool_ib_lock);
	/* d->ibdev is cleared under d->lock alone (teardown): read once. */
	list_for_each_entry(d, &mrpool_ib_devs, link)
		if (READ_ONCE(d->ibdev) == ibdev)
			return d;
	return NULL;
}

/**
 * mrpool_ib_dev_next - walk the device list without holding its lock
 * @prev: the device the walk is at, whose reference is dropped; NULL to
 *	start
 *
 * Devices listed after @prev was (by position, so a removed @prev is no
 * obstacle). Take the device's lock only after this returns.
 *
 * Return: the next device with a reference, or NULL at the end.
 */
struct mrpool_ib_dev *mrpool_ib_dev_next(struct mrpool_ib_dev *prev)
{
	struct mrpool_ib_dev *d, *next = NULL;
	u64 after = prev ? prev->seq : 0;

	mutex_lock(&mrpool_ib_lock);
	list_for_each_entry(d, &mrpool_ib_devs, link) {
		if (d->seq > after) {
			next = d;
			kobject_get(&d->kobj);
			break;
		}
	}
	mutex_unlock(&mrpool_ib_lock);
	if (prev)
		kobject_put(&prev->kobj);
	return next;
}

/**
 * mrpool_ib_node - the NUMA node chunks should come from by default
 *
 * Lock-free: a value kept up to date under mrpool_ib_lock whenever the
 * list or a state changes, so it never waits for a device. May be called
 * from any context that may read an int, the pool lock held or not.
 *
 * Return: the node of the first usable RDMA device that has one, else
 * NUMA_NO_NODE.
 */
int mrpool_ib_node(void)
{
	return READ_ONCE(mrpool_ib_node_cached);
}

/*
 * Register every chunk of the registry on a device that just became ready.
 * The device's lock is held throughout: mrpool_ib_chunk_removing() erases
 * a chunk from the registry before it waits for this lock, so a chunk
 * found here stays alive until it is registered and then found there.
 */
static void mrpool_ib_reg_all(struct mrpool_ib_dev *d)
{
	struct mrpool_chunk *c;
	unsigned long key = 0;

	lockdep_assert_held(&d->lock);
	while (mrpool_ib_dev_usable(d)) {
		mutex_lock(&mrpool_ib_lock);
		c = xa_find(&mrpool_ib_chunks, &key, ULONG_MAX, XA_PRESENT);
		mutex_unlock(&mrpool_ib_lock);
		if (!c)
			break;
		mrpool_ib_reg_chunk(d, c);
		key++;
		cond_resched();
	}
}

/**
 * mrpool_ib_recover_queue - have a failed device recovered later
 * @d: a device one of whose work requests just failed, leaving nothing of
 *	ours in flight; lock held
 *
 * Queues d->recover after the device's current backoff (see below),
 * unless it is pending already, an attempt is running (it decides what comes next), the
 * device is being removed, or recovery is off (recover_ms 0).
 */
void mrpool_ib_recover_queue(struct mrpool_ib_dev *d)
{
	unsigned int ms = READ_ONCE(mrpool_ib_recover_ms);
	unsigned int max_ms = READ_ONCE(mrpool_ib_recover_max_ms);

	lockdep_assert_held(&d->lock);
	if (READ_ONCE(d->recover_off) || d->recovering || !ms)
		return;
	/*
	 * The backoff starts again only for a device that stayed READY for
	 * recover_max_ms after its last recovery: one that fails again
	 * sooner waits as long as the attempt that recovered it, then twice
	 * as long, and so on.
	 */
	if (d->recovered) {
		d->recovered = false;
		if (time_after(jiffies, d->ready_at + msecs_to_jiffies(max_ms)))
			d->recover_delay_ms = 0;
	}
	if (d->recover_delay_ms)
		ms = d->recover_delay_ms;
	queue_delayed_work(system_unbound_wq, &d->recover,
			   msecs_to_jiffies(ms));
}

/* The shortest longest wait, whatever recover_max_ms says. */
#define MRPOOL_IB_RECOVER_MAX_MIN_MS	100

/*
 * After a failed attempt: twice the last wait, at most recover_max_ms,
 * which is taken as at least recover_ms and MRPOOL_IB_RECOVER_MAX_MIN_MS.
 */
static unsigned int mrpool_ib_recover_backoff(struct mrpool_ib_dev *d)
{
	unsigned int base = max(READ_ONCE(mrpool_ib_recover_ms), 1U);
	unsigned int cap = READ_ONCE(mrpool_ib_recover_max_ms);
	unsigned int ms = d->recover_delay_ms ? d->recover_delay_ms : base;

	cap = max3(cap, base, (unsigned int)MRPOOL_IB_RECOVER_MAX_MIN_MS);
	return ms > cap / 2 ? cap : ms * 2;
}

/**
 * mrpool_ib_recover_work - one recovery attempt of a FAILED device
 * @work: d->recover
 *
 * Rebuilds the device's broken loops, proves each of its own loops with a
 * work request (mrpool_ib_loop_probe()), registers the chunks it is
 * missing and makes it READY (a DEV_READY event, a log line), counted in
 * recoveries; or counts a failed attempt in recover_failures and queues
 * the next one after a doubled wait (log lines of both ratelimited per device). A
 * device with a stuck MR in its own loops is left FAILED, with no attempt
 * made and none queued (see ib.h).
 *
 * Locking: the loopback address is found first with no lock held
 * (ib_query_port() may take rtnl_mutex; ib_core calls the client's remove,
 * which waits for this work, without it, and rxe and siw unregister from
 * their netdev notifiers through a queued work, not under it); d->ibdev is
 * safe to use without d->lock because mrpool_ib_remove() waits for this
 * work to return before its teardown clears it. Then d->lock for the
 * whole attempt, which takes mrpool_ib_lock inside (state, registry), as
 * every holder of d->lock may. d->recover_off is read with READ_ONCE():
 * the removal sets it before it waits for d->lock.
 */
void mrpool_ib_recover_work(struct work_struct *work)
{
	struct mrpool_ib_dev *d = container_of(to_delayed_work(work),
					       struct mrpool_ib_dev, recover);
	struct rdma_ah_attr ah;
	unsigned int noio;
	int i, ret;

	ret = mrpool_ib_self_ah(d->ibdev, d->port, &ah);
	noio = mrpool_ib_dev_lock(d);
	if (READ_ONCE(d->recover_off) || d->state != MRPOOL_IB_FAILED)
		goto unlock;
	if (mrpool_ib_dev_stuck(d)) {
		pr_info("%s: not recovered: a lost work request may still use one of its MRs\n",
			d->name);
		goto unlock;
	}
	d->recovering = true;
	if (!ret)
		ret = mrpool_ib_dev_rebuild(d, &ah);
	/*
	 * Each own loop proves its QPs with a work request: a device that
	 * fails every one must not come back READY because the attempt
	 * happened to have nothing to register.
	 */
	for (i = 0; !ret && i < MRPOOL_IB_NR_LOOPS; i++)
		ret = mrpool_ib_loop_probe(d, &d->loop[i]);
	if (!ret) {
		mrpool_ib_reg_all(d);
		/* A work request failed again in there. */
		if (!mrpool_ib_dev_usable(d) ||
		    d->loop[MRPOOL_IB_LEND].broken)
			ret = -EIO;
	}
	if (!ret) {
		/* recover_delay_ms is kept: see mrpool_ib_recover_queue(). */
		d->ready_at = jiffies;
		d->recovered = true;
		atomic64_inc(&d->recoveries);
		d->recovering = false;
		mrpool_ib_set_state(d, MRPOOL_IB_READY, "%s", "");
		/*
		 * A chunk added during the attempt skipped the device (not
		 * READY, see mrpool_ib_chunk_added()) and may have been put
		 * in the registry after the walk passed its place: walk again
		 * now that every later one finds the device READY.
		 */
		mrpool_ib_reg_all(d);
		if (__ratelimit(&d->recover_rs))
			pr_info("%s: recovered: ready, %d chunks registered\n",
				d->name, atomic_read(&d->nr_mrs));
		goto unlock;
	}
	d->recovering = false;
	atomic64_inc(&d->recover_failures);
	if (mrpool_ib_dev_stuck(d)) {
		pr_info("%s: recovery failed (%d); not retried: a lost work request may still use one of its MRs\n",
			d->name, ret);
		goto unlock;
	}
	if (READ_ONCE(d->recover_off)) {
		pr_info("%s: recovery failed (%d); not retried: the device is going\n",
			d->name, ret);
		goto unlock;
	}
	d->recover_delay_ms = mrpool_ib_recover_backoff(d);
	if (__ratelimit(&d->recover_rs))
		pr_info("%s: recovery failed (%d); next attempt in %u ms\n",
			d->name, ret, d->recover_delay_ms);
	mrpool_ib_recover_queue(d);
unlock:
	mrpool_ib_dev_unlock(d, noio);
}

static struct ib_client mrpool_ib_client;

/*
 * Unlike net/rds, unsuitable devices are accepted (return 0) and listed
 * with the reason: the DEVICES ioctl and sysfs must show why a device gets
 * no keys, and remove() must run to drop that entry.
 */
static int mrpool_ib_add(struct ib_device *ibdev)
{
	struct mrpool_ib_dev *d;
	unsigned int noio;
	bool ready;

	d = mrpool_ib_dev_alloc(ibdev, mrpool_ib_dev_node(ibdev));
	if (!d)
		return -ENOMEM;
	atomic64_inc(&mrpool_ib_stats.devs_added);

	/*
	 * Unlisted, so unlocked: its QPs' address comes from
	 * ib_query_port(), which must not run under the device's lock.
	 */
	mrpool_ib_dev_setup(d);
	noio = mrpool_ib_dev_lock(d);
	/* Listed first: chunks added from now on find it themselves. */
	mutex_lock(&mrpool_ib_lock);
	d->seq = ++mrpool_ib_seq;
	list_add_tail(&d->link, &mrpool_ib_devs);
	mrpool_ib_summary_update();
	mutex_unlock(&mrpool_ib_lock);
	mrpool_ib_reg_all(d);
	mrpool_ib_dev_unlock(d, noio);

	ib_set_client_data(ibdev, &mrpool_ib_client, d);
	mrpool_ib_dev_publish(d);
	/*
	 * From here on mrpool_ib_set_state() reports changes itself. Its
	 * callers hold the device's lock, as this does until ADDED and the
	 * state it found are out: no change is reported before them.
	 */
	noio = mrpool_ib_dev_lock(d);
	mutex_lock(&mrpool_ib_lock);
	d->announced = true;
	ready = d->state == MRPOOL_IB_READY;
	mutex_unlock(&mrpool_ib_lock);
	mrpool_nl_dev_event(MRPOOL_EVENT_DEV_ADDED, d);
	mrpool_nl_dev_event(ready ? MRPOOL_EVENT_DEV_READY :
			    MRPOOL_EVENT_DEV_FAILED, d);
	mrpool_ib_dev_unlock(d, noio);
	pr_info("%s: %s, node %d, %d chunks registered\n", d->name,
		mrpool_ib_state_name(READ_ONCE(d->state)), d->node,
		atomic_read(&d->nr_mrs));
	return 0;
}

/*
 * Tears the device's state down while processes keep their slices: their
 * mappings and their own registrations do not depend on the cache. Kernel
 * buffers still out keep only the dev object; their keys die here (their
 * owners, ib_clients registered after this one, were removed first). The
 * device stays listed until its MRs are gone, so a chunk's removal either
 * finds it or knows it has nothing of that chunk left.
 */
static void mrpool_ib_remove(struct ib_device *ibdev, void *client_data)
{
	struct mrpool_ib_dev *d = client_data;
	unsigned int noio;

	/*
	 * No recovery from now on: recover_off is set before d->lock is
	 * taken, so that an attempt running (holding it) sees it at its end
	 * and queues no other; once we had the lock, every holder that may
	 * have read it clear has queued what it queues, and a pending or
	 * running attempt is cancelled or waited for, with no lock held (it
	 * takes d->lock), before the teardown frees what it uses.
	 */
	WRITE_ONCE(d->recover_off, true);
	noio = mrpool_ib_dev_lock(d);
	mrpool_ib_dev_unlock(d, noio);
	cancel_delayed_work_sync(&d->recover);

	noio = mrpool_ib_dev_lock(d);
	mrpool_ib_dev_teardown(d);
	mrpool_ib_dev_unlock(d, noio);

	mutex_lock(&mrpool_ib_lock);
	list_del(&d->link);
	mrpool_ib_summary_update();
	mutex_unlock(&mrpool_ib_lock);

	mrpool_ib_dev_unpublish(d);
	mrpool_nl_dev_event(MRPOOL_EVENT_DEV_REMOVED, d);
	atomic64_inc(&mrpool_ib_stats.devs_removed);
	pr_info("%s: removed\n", d->name);
	kobject_put(&d->kobj);
}

static void mrpool_ib_rename(struct ib_device *ibdev, void *client_data)
{
	struct mrpool_ib_dev *d = client_data;
	unsigned int noio;
	int ret;

	/*
	 * Written under both locks, as d->state is: the device list's
	 * readers hold mrpool_ib_lock, debugfs holds d->lock (the outer one).
	 */
	noio = mrpool_ib_dev_lock(d);
	mutex_lock(&mrpool_ib_lock);
	strscpy(d->name, dev_name(&ibdev->dev), sizeof(d->name));
	mutex_unlock(&mrpool_ib_lock);
	mrpool_ib_dev_unlock(d, noio);
	if (d->in_sysfs) {
		ret = kobject_rename(&d->kobj, d->name);
		if (ret)
			pr_warn("%s: sysfs rename failed: %d\n", d->name, ret);
	}
}

static struct ib_client mrpool_ib_client = {
	.name = "mrpool",
	.add = mrpool_ib_add,
	.remove = mrpool_ib_remove,
	.rename = mrpool_ib_rename,
};

/**
 * mrpool_ib_chunk_added - register a new chunk on every usable device
 * @c: a chunk just built; the pool's lock must not be held
 *
 * May sleep, and wait for a device. Idempotent. A failure leaves the chunk
 * usable by processes; the device counts it.
 *
 * Return: 0, or the first error met (informational).
 */
int mrpool_ib_chunk_added(struct mrpool_chunk *c)
{
	struct mrpool_ib_dev *d;
	unsigned int noio;
	int ret, err = 0;
	bool skip;

	if (WARN_ON_ONCE(!READ_ONCE(mrpool_ib_running)))
		return -ENODEV;
	/* A registry node: never through IO or FS reclaim (see ib.h). */
	noio = memalloc_noio_save();
	mutex_lock(&mrpool_ib_lock);
	ret = xa_insert(&mrpool_ib_chunks, mrpool_ib_chunk_key(c), c,
			GFP_KERNEL);
	mutex_unlock(&mrpool_ib_lock);
	memalloc_noio_restore(noio);
	if (ret && ret != -EBUSY)
		return ret;

	for (d = mrpool_ib_dev_next(NULL); d; d = mrpool_ib_dev_next(d)) {
		/*
		 * A device that is not READY is skipped without its lock,
		 * which a recovery attempt holds through its work requests
		 * (seconds, if one is lost): the chunk is in the registry
		 * already (inserted before this read, both under
		 * mrpool_ib_lock), and an attempt that makes the device
		 * READY walks the registry once more after it did.
		 */
		mutex_lock(&mrpool_ib_lock);
		skip = d->state != MRPOOL_IB_READY;
		mutex_unlock(&mrpool_ib_lock);
		if (skip)
			continue;
		noio = mrpool_ib_dev_lock(d);
		if (d->state == MRPOOL_IB_READY) {
			ret = mrpool_ib_reg_chunk(d, c);
			if (ret && !err)
				err = ret;
		}
		mrpool_ib_dev_unlock(d, noio);
	}
	return err;
}

/**
 * mrpool_ib_chunk_removing - forget a chunk on every device
 * @c: a chunk no longer on mrpool_pool.chunks whose pages are about to go
 *
 * Invalidates, deregisters and unmaps the chunk everywhere. May sleep and
 * wait for a device (bounded by the work request timeout, twice), so it is
 * called without mrpool_pool.lock. Unknown chunks (never announced, or
 * partially built) are ignored.
 *
 * Return: true when the chunk's pages may be freed or reused; false when
 * an MR over them may still be live (a work request that never came back,
 * or a deregistration the device refused): the caller must keep the pages
 * for good.
 */
bool mrpool_ib_chunk_removing(struct mrpool_chunk *c)
{
	struct mrpool_ib_dev *d;
	struct mrpool_ib_mr *m;
	unsigned int noio;
	unsigned long key;
	bool safe = true;

	if (!c->pages || !c->pages[0])
		return true;
	key = mrpool_ib_chunk_key(c);

	mutex_lock(&mrpool_ib_lock);
	xa_erase(&mrpool_ib_chunks, key);
	mutex_unlock(&mrpool_ib_lock);
	if (xa_load(&mrpool_ib_leaked, key))
		safe = false;

	for (d = mrpool_ib_dev_next(NULL); d; d = mrpool_ib_dev_next(d)) {
		noio = mrpool_ib_dev_lock(d);
		m = xa_erase(&d->mrs, key);
		if (m && !mrpool_ib_unreg(d, m))
			safe = false;
		if (mrpool_ib_chunk_stuck(d, key))
			safe = false;
		mrpool_ib_dev_unlock(d, noio);
	}
	return safe;
}

/**
 * mrpool_ib_chunk_leaked - an MR over @c outlives its device's teardown
 * @c: the chunk; mrpool_ib_chunk_removing() says it is unsafe from now on
 */
void mrpool_ib_chunk_leaked(struct mrpool_chunk *c)
{
	if (xa_err(xa_store(&mrpool_ib_leaked, mrpool_ib_chunk_key(c), c,
			    GFP_KERNEL)))
		pr_err("chunk %p: cannot record a leaked MR: its pages may be reused\n",
		       c);
}

/**
 * mrpool_ib_chunk_keys - the kernel keys of a chunk on each device
 * @c: a chunk the caller keeps alive
 * @out: receives up to @max entries
 * @max: room in @out
 *
 * Never waits for a device: entries are read under RCU.
 *
 * Return: the number of devices the chunk is registered on (may exceed @max).
 */
int mrpool_ib_chunk_keys(struct mrpool_chunk *c, struct mrpool_ib_key *out,
			 unsigned int max)
{
	unsigned long key = mrpool_ib_chunk_key(c);
	struct mrpool_ib_dev *d;
	struct mrpool_ib_mr *m;
	unsigned int n = 0;

	mutex_lock(&mrpool_ib_lock);
	rcu_read_lock();
	list_for_each_entry(d, &mrpool_ib_devs, link) {
		m = xa_load(&d->mrs, key);
		if (!m || !READ_ONCE(m->valid))
			continue;
		if (n < max) {
			memset(&out[n], 0, sizeof(out[n]));
			strscpy(out[n].name, d->name, sizeof(out[n].name));
			out[n].lkey = m->lkey;
			out[n].rkey = 0;
			out[n].iova = m->iova;
		}
		n++;
	}
	rcu_read_unlock();
	mutex_unlock(&mrpool_ib_lock);
	return n;
}

/*
 * Seed the registry with the chunks the pool already holds. Runs before the
 * client is registered, so no device walks the registry yet; the pool lock
 * keeps the list still (and is taken without mrpool_ib_lock, see ib.h).
 * Kernel-buffer borrowers on reclaim paths take the pool lock: its
 * registry nodes are allocated in a NOIO scope.
 */
static int mrpool_ib_seed(void)
{
	struct mrpool_chunk *c;
	unsigned int noio;
	int ret = 0;

	noio = memalloc_noio_save();
	mutex_lock(&mrpool_pool.lock);
	list_for_each_entry(c, &mrpool_pool.chunks, all) {
		ret = xa_insert(&mrpool_ib_chunks, mrpool_ib_chunk_key(c), c,
				GFP_KERNEL);
		if (ret == -EBUSY)
			ret = 0;
		if (ret)
			break;
	}
	mutex_unlock(&mrpool_pool.lock);
	memalloc_noio_restore(noio);
	return ret;
}

/**
 * mrpool_ib_init - start the kernel MR cache
 *
 * Call after the pool (and its debugfs directory) exist. Devices present
 * now are added before this returns.
 *
 * Return: 0 or a negative errno; on failure nothing is left behind.
 */
int mrpool_ib_init(void)
{
	int ret;

	WRITE_ONCE(mrpool_ib_running, true);
	ret = mrpool_ib_seed();
	if (ret)
		goto forget_chunks;
	ret = mrpool_ib_sysfs_init();
	if (ret)
		goto forget_chunks;
	mrpool_ib_debugfs_init();
	ret = ib_register_client(&mrpool_ib_client);
	if (ret) {
		pr_err("cannot register the ib_client: %d\n", ret);
		goto undo_debugfs;
	}
	return 0;

undo_debugfs:
	mrpool_ib_debugfs_exit();
	mrpool_ib_sysfs_exit();
forget_chunks:
	WRITE_ONCE(mrpool_ib_running, false);
	xa_destroy(&mrpool_ib_chunks);
	return ret;
}

/**
 * mrpool_ib_exit - stop the kernel MR cache
 *
 * Call before the pool frees its chunks. Removes every device (invalidating
 * and deregistering all cached MRs); no kernel buffer can be out, each
 * holds a module reference. The chunks whose MR a device would not
 * deregister stay recorded for the pool, which keeps them for good:
 * mrpool_ib_exit_leaked() after it has freed the rest.
 */
void mrpool_ib_exit(void)
{
	WRITE_ONCE(mrpool_ib_running, false);
	ib_unregister_client(&mrpool_ib_client);
	mrpool_ib_debugfs_exit();
	mrpool_ib_sysfs_exit();
	xa_destroy(&mrpool_ib_chunks);
}

/* After the pool freed its chunks: none is looked up any more. */
void mrpool_ib_exit_leaked(void)
{
	xa_destroy(&mrpool_ib_leaked);
}
