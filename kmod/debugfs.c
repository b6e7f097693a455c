// SPDX-License-Identifier: GPL-2.0
/*
 * debugfs mrpool/: views for humans and tests and failure knobs, since
 * distribution kernels lack fault injection. Not ABI. Errors here never
 * fail the module.
 *
 *   chunks            pfn node state owner blocks (order:count,...) backing
 *                     (shmem: a huge folio of the private tmpfs, pages)
 *   slices            id pid comm length chunks maps state (live/freed)
 *   users             uid bytes quarantined_bytes memlock_bytes
 *                     orphaned_bytes: what each user holds of the pool
 *                     and what was its and the orphans hold (tenant.c);
 *                     then, while pins left after a revocation hold any,
 *                     "orphans" in place of a uid for what is charged to
 *                     no user
 *   quotas            path cgroup_id limit_bytes bytes quarantined_bytes
 *                     removed: each cgroup pool quota (quota.c); "-" for
 *                     a deleted limit still holding usage, removed 1 for
 *                     a cgroup gone while charged
 *   clients           pid comm slices bytes, one line per open file, then
 *                     the counters its process published in its stats page
 *                     (client_stats.c), "-" where it published none
 *   fail_chunk_alloc  N: the next N chunk allocations fail
 *   fail_slice_alloc  N: the next N ALLOCs fail with -ENOMEM
 *   fail_high_order   N: the next N block allocations above order 0 fail,
 *                     so chunks are built of smaller blocks; writing 0
 *                     runs the defrag worker now
 *   fail_shmem        N: the next N whole chunks get no shmem folio and
 *                     are built of plain pages (shmem.c)
 *   fail_fork_copy    N: the next N fork copies of a FORK_COPY slice's
 *                     mapping fail: the child gets SIGBUS there
 *                     (forkcopy.c)
 *   next_slice_id     the id the next ALLOC tries first (tests of the
 *                     wrap at MRPOOL_MAX_SLICE_ID)
 *   hold_pool_lock    1: the next take from the pool (a user's ALLOC, or
 *                     a kernel buffer lent: mrpool_pool_take()) keeps
 *                     the pool lock, asleep, until 0 is written (tests of what must not
 *                     wait for that lock); reads 1 armed, 2 holding, 3
 *                     when a hold ended on its own after
 *                     MRPOOL_HOLD_MAX_SEC (a hang catcher), else 0
 *   fail_alloc/       on kernels with CONFIG_FAULT_INJECTION_DEBUG_FS: a
 *                     fault attribute (Documentation/fault-injection)
 *                     over the module's own allocations only -- its
 *                     objects, chunk pages, MRs, netlink messages -- so a
 *                     test can fail them (probability, interval, times,
 *                     task-filter with make-it-fail) without failing the
 *                     rest of the kernel under its tasks, which failslab
 *                     and fail_page_alloc do (6.1 has no stack filter on
 *                     x86-64 to narrow those)
 */
#include "mrpool.h"

#include <linux/debugfs.h>
#include <linux/fault-inject.h>
#include <linux/seq_file.h>
#include <linux/mm.h>
#include <linux/wait.h>

/* Writing N makes the next N chunk (slice) allocations fail. */
atomic_t mrpool_fail_chunk_alloc = ATOMIC_INIT(0);
atomic_t mrpool_fail_slice_alloc = ATOMIC_INIT(0);
/* ...the next N page allocations above order 0, as fragmentation would. */
atomic_t mrpool_fail_high_order = ATOMIC_INIT(0);
/* ...the next N shmem folios for whole chunks (plain pages instead). */
atomic_t mrpool_fail_shmem = ATOMIC_INIT(0);
/* ...the next N copies a fork child gets of a slice mapping. */
atomic_t mrpool_fail_fork_copy = ATOMIC_INIT(0);

static struct dentry *mrpool_debugfs_dir;

/* hold_pool_lock's states (what it reads). */
enum {
	MRPOOL_HOLD_OFF,
	MRPOOL_HOLD_ARMED,
	MRPOOL_HOLD_HOLDING,
	MRPOOL_HOLD_TIMED_OUT,
};

/* Longest a hold lasts when nobody writes 0: under hung_task's 120 s. */
#define MRPOOL_HOLD_MAX_SEC	60

static atomic_t mrpool_hold_pool_lock = ATOMIC_INIT(MRPOOL_HOLD_OFF);
static DECLARE_WAIT_QUEUE_HEAD(mrpool_hold_wq);

bool mrpool_should_fail(atomic_t *knob)
{
	return atomic_dec_if_positive(knob) >= 0;
}

#ifdef CONFIG_FAULT_INJECTION_DEBUG_FS
static DECLARE_FAULT_ATTR(mrpool_fail_alloc_attr);

/* Called before each of the module's allocations: true makes it fail. */
bool mrpool_fail_alloc(size_t size)
{
	return should_fail(&mrpool_fail_alloc_attr, size);
}
#endif

static const char *const mrpool_state_names[] = {
	[MRPOOL_CHUNK_FREE] = "free",
	[MRPOOL_CHUNK_USED] = "used",
	[MRPOOL_CHUNK_QUARANTINED] = "quarantined",
};

/* pfn node state owner-slice blocks(order:count,...) backing */
static int chunks_show(struct seq_file *m, void *v)
{
	struct mrpool_pool *p = &mrpool_pool;
	struct mrpool_chunk *c;
	unsigned int o;
	char sep;

	seq_puts(m, "pfn node state owner blocks backing\n");
	mutex_lock(&p->lock);
	list_for_each_entry(c, &p->chunks, all) {
		seq_printf(m, "%#lx %d %s %u ", page_to_pfn(c->pages[0]),
			   c->nid, mrpool_state_names[c->state],
			   READ_ONCE(c->owner));
		sep = ' ';
		for (o = 0; o < MRPOOL_NR_PAGE_ORDERS; o++) {
			if (!c->blocks[o])
				continue;
			if (sep == ',')
				seq_putc(m, sep);
			seq_printf(m, "%u:%u", o, c->blocks[o]);
			sep = ',';
		}
		seq_printf(m, " %s\n", c->file ? "shmem" : "pages");
	}
	mutex_unlock(&p->lock);
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(chunks);

/*
 * A task names itself (PR_SET_NAME): blanks, newlines and backslashes in
 * its comm are printed as octal escapes, and an empty one as "-", so that
 * a name cannot add a row or shift the columns readers split on blanks.
 */
static void mrpool_seq_comm(struct seq_file *m, const char *comm)
{
	seq_putc(m, ' ');
	if (*comm)
		seq_escape(m, comm, " \t\n\v\f\r\\");
	else
		seq_putc(m, '-');
	seq_putc(m, ' ');
}

/* id pid comm length chunks maps state */
static int slices_show(struct seq_file *m, void *v)
{
	struct mrpool_client *client;
	struct mrpool_slice *s;

	seq_puts(m, "id pid comm length chunks maps state\n");
	mutex_lock(&mrpool_clients_lock);
	list_for_each_entry(client, &mrpool_clients, node) {
		mutex_lock(&client->lock);
		list_for_each_entry(s, &client->slices, node) {
			seq_printf(m, "%u %d", s->id, client->pid);
			mrpool_seq_comm(m, client->comm);
			seq_printf(m, "%llu %u %d %s\n", s->length,
				   s->nr_chunks, atomic_read(&s->maps),
				   s->freed ? "freed" : "live");
		}
		mutex_unlock(&client->lock);
	}
	mutex_unlock(&mrpool_clients_lock);
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(slices);

static int users_show(struct seq_file *m, void *v)
{
	mrpool_tenants_show(m);
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(users);

static int quotas_show(struct seq_file *m, void *v)
{
	mrpool_quotas_show(m);
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(quotas);

/* pid comm slices bytes + published counters, one line per open file */
static int clients_show(struct seq_file *m, void *v)
{
	struct mrpool_client *client;
	struct mrpool_slice *s;
	unsigned int n;

	seq_puts(m, "pid comm slices bytes");
	mrpool_client_stats_show_header(m);
	seq_putc(m, '\n');
	mutex_lock(&mrpool_clients_lock);
	list_for_each_entry(client, &mrpool_clients, node) {
		n = 0;
		mutex_lock(&client->lock);
		list_for_each_entry(s, &client->slices, node)
			n++;
		seq_printf(m, "%d", client->pid);
		mrpool_seq_comm(m, client->comm);
		seq_printf(m, "%u %llu", n, client->bytes);
		mrpool_client_stats_show(m, client);
		seq_putc(m, '\n');
		mutex_unlock(&client->lock);
	}
	mutex_unlock(&mrpool_clients_lock);
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(clients);

static int fail_high_order_get(void *data, u64 *val)
{
	*val = atomic_read(&mrpool_fail_high_order);
	return 0;
}

/*
 * Clearing the knob is "high-order memory is back": the defrag worker,
 * backed off while the knob failed it, replaces fragmented chunks now.
 */
static int fail_high_order_set(void *data, u64 val)
{
	if (val > INT_MAX)
		return -EINVAL;
	atomic_set(&mrpool_fail_high_order, val);
	if (!val)
		mrpool_pool_kick_defrag();
	return 0;
}
DEFINE_DEBUGFS_ATTRIBUTE(fail_high_order_fops, fail_high_order_get,
			 fail_high_order_set, "%llu\n");

static int next_slice_id_get(void *data, u64 *val)
{
	*val = mrpool_slice_id_cursor();
	return 0;
}

static int next_slice_id_set(void *data, u64 val)
{
	if (val > U32_MAX)
		return -EINVAL;
	mrpool_slice_id_cursor_set(val);
	return 0;
}
DEFINE_DEBUGFS_ATTRIBUTE(next_slice_id_fops, next_slice_id_get,
			 next_slice_id_set, "%llu\n");

/**
 * mrpool_debug_hold_pool_lock - sleep here, the pool lock held, if armed
 *
 * Called by mrpool_pool_take() (a user's ALLOC, a kernel buffer's lend)
 * right after it took the pool lock. One take per arming holds, until
 * hold_pool_lock is written 0, its task is killed, or MRPOOL_HOLD_MAX_SEC
 * pass. Disarmed: one atomic read.
 */
void mrpool_debug_hold_pool_lock(void)
{
	atomic_t *knob = &mrpool_hold_pool_lock;
	long left;

	lockdep_assert_held(&mrpool_pool.lock);
	if (likely(atomic_read(knob) != MRPOOL_HOLD_ARMED) ||
	    atomic_cmpxchg(knob, MRPOOL_HOLD_ARMED, MRPOOL_HOLD_HOLDING) !=
	    MRPOOL_HOLD_ARMED)
		return;
	left = wait_event_killable_timeout(mrpool_hold_wq,
					   atomic_read(knob) != MRPOOL_HOLD_HOLDING,
					   MRPOOL_HOLD_MAX_SEC * HZ);
	atomic_cmpxchg(knob, MRPOOL_HOLD_HOLDING,
		       left ? MRPOOL_HOLD_OFF : MRPOOL_HOLD_TIMED_OUT);
}

static int hold_pool_lock_get(void *data, u64 *val)
{
	*val = atomic_read(&mrpool_hold_pool_lock);
	return 0;
}

/* 1 arms (again), 0 disarms and ends a hold. */
static int hold_pool_lock_set(void *data, u64 val)
{
	if (val > MRPOOL_HOLD_ARMED)
		return -EINVAL;
	atomic_set(&mrpool_hold_pool_lock, val);
	wake_up_all(&mrpool_hold_wq);
	return 0;
}
DEFINE_DEBUGFS_ATTRIBUTE(hold_pool_lock_fops, hold_pool_lock_get,
			 hold_pool_lock_set, "%llu\n");

void mrpool_debugfs_init(void)
{
	struct dentry *dir;

	dir = debugfs_create_dir(KBUILD_MODNAME, NULL);
	mrpool_debugfs_dir = dir;
	debugfs_create_file("chunks", 0400, dir, NULL, &chunks_fops);
	debugfs_create_file("slices", 0400, dir, NULL, &slices_fops);
	debugfs_create_file("clients", 0400, dir, NULL, &clients_fops);
	debugfs_create_file("users", 0400, dir, NULL, &users_fops);
	debugfs_create_file("quotas", 0400, dir, NULL, &quotas_fops);
	debugfs_create_atomic_t("fail_chunk_alloc", 0600, dir,
				&mrpool_fail_chunk_alloc);
	debugfs_create_atomic_t("fail_slice_alloc", 0600, dir,
				&mrpool_fail_slice_alloc);
	debugfs_create_file_unsafe("fail_high_order", 0600, dir, NULL,
				   &fail_high_order_fops);
	debugfs_create_atomic_t("fail_shmem", 0600, dir, &mrpool_fail_shmem);
	debugfs_create_atomic_t("fail_fork_copy", 0600, dir,
				&mrpool_fail_fork_copy);
	debugfs_create_file_unsafe("next_slice_id", 0600, dir, NULL,
				   &next_slice_id_fops);
	debugfs_create_file_unsafe("hold_pool_lock", 0600, dir, NULL,
				   &hold_pool_lock_fops);
#ifdef CONFIG_FAULT_INJECTION_DEBUG_FS
	fault_create_debugfs_attr("fail_alloc", dir, &mrpool_fail_alloc_attr);
#endif
}

void mrpool_debugfs_exit(void)
{
	debugfs_remove_recursive(mrpool_debugfs_dir);
	mrpool_debugfs_dir = NULL;
}
