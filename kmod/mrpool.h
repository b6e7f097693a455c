/* SPDX-License-Identifier: GPL-2.0 */
/*
 * mrpool internals: the objects and the prototypes, grouped by the file
 * that defines them.
 *
 * Objects:
 *  - chunk: chunk_size bytes of zeroed pages on one node: one block of the
 *    chunk's order or, under fragmentation, several smaller blocks. With
 *    pmd_map a block of PMD order stays one compound page the fault handler
 *    maps with one PMD (with shmem_chunks, when it is the whole chunk, the
 *    huge folio of a file on the module's private tmpfs: shmem.c); other
 *    blocks are split into order-0 pages. The pool holds one reference per
 *    head or order-0 page; any other (beyond the page cache's, for a shmem
 *    folio) is a pin, and a freed chunk waits in quarantine.
 *  - slice: one or more chunks owned by one open file (a client), mapped
 *    by that file's mmap() only, or exported as a dma-buf (dmabuf.c) that
 *    holds a slice reference and the file.
 *  - client: the state of one open file of /dev/mrpool; refcounted, it
 *    outlives the file while slices or mappings of it remain.
 *  - tenant: a user pool memory is charged to (tenant.c). A chunk taken for
 *    a slice stays charged to its tenant until it is free again.
 *
 * Locking (outermost first):
 *   mmap_lock (held by the mm around .mmap and vm_ops->close; a slice's
 *              last reference is dropped out of it where the task can
 *              run task work: mmap.c)
 *     client->lock      a client's slice list, byte count, closed flag
 *       mrpool_slices   xarray lock: global slice ids
 *   mrpool_pool.lock     free / quarantine lists, pool totals; never
 *                        taken under client->lock: chunks are taken and
 *                        returned outside it (growth registers chunks
 *                        with every RDMA device, which may wait); never
 *                        held while calling into the ib client (but for
 *                        the lock-free mrpool_ib_node()); never taken by
 *                        readers of the totals alone (sysfs, QUERY,
 *                        netlink): they read a copy under a seqcount
 *                        (mrpool_pool_snapshot()), which a holder that
 *                        changed the totals publishes as it unlocks
 *                        (mrpool_pool_unlock())
 *   mrpool_ib_dev.lock   one RDMA device: its work requests and MRs
 *                        (ib.h); held across hardware waits
 *     mrpool_ib_lock     the device list and chunk registry (ib.h);
 *                        never held across a wait, never around the
 *                        others
 *   mrpool_clients_lock  the list of clients; debugfs nests
 *                        client->lock inside it; taken under mmap_lock
 *                        when a kernel thread's VMA close (no task work)
 *                        frees the last of a client.
 *   mrpool_tenants_lock  (a spinlock) tenants and their counts; innermost,
 *                        nothing sleeps or takes another lock under it.
 *   mrpool_quotas_lock   (a spinlock) cgroup quotas and their counts
 *                        (quota.c); never held with mrpool_tenants_lock,
 *                        nothing sleeps under it.
 *   mrpool_forkcopy_mms_lock  (a spinlock) the per-mm counts of fork
 *                        copies made below a quota (forkcopy.c);
 *                        innermost, nothing sleeps under it.
 * Nothing here takes mmap_lock: RLIMIT_MEMLOCK is charged to the user's
 * atomic locked_vm, so a slice can be released from vm_ops->close.
 * Counters are atomic64_t and read without locks.
 */
#ifndef _MRPOOL_H
#define _MRPOOL_H

#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/types.h>
#include <linux/list.h>
#include <linux/mutex.h>
#include <linux/rwsem.h>
#include <linux/seqlock.h>
#include <linux/kref.h>
#include <linux/sched.h>
#include <linux/workqueue.h>
#include <linux/xarray.h>
#include <linux/atomic.h>
#include <linux/overflow.h>
#include <linux/slab.h>
#include <linux/sysfs.h>
#include <linux/seq_file.h>
#include <uapi/mrpool.h>
#include <uapi/mrpool_nl.h>

#include "compat.h"

/* ---- main.c: module parameters (see MODULE_PARM_DESC there) ---- */
extern unsigned int mrpool_pool_mb;
extern unsigned int mrpool_max_mb;
extern unsigned int mrpool_chunk_kb;
extern int mrpool_numa_node;
extern unsigned int mrpool_idle_trim_sec;
extern unsigned int mrpool_max_user_mb;
extern unsigned int mrpool_max_user_pct;
extern unsigned int mrpool_quarantine_event_pct;
extern bool mrpool_pmd_map;
extern bool mrpool_shmem_chunks;

/* quota_mode: what a cgroup's pool quota does (quota.c) */
enum mrpool_quota_mode {
	MRPOOL_QUOTA_MODE_RLIMIT,	/* counted, not enforced */
	MRPOOL_QUOTA_MODE_QUOTA,	/* enforced, instead of the tenant's */
	MRPOOL_QUOTA_MODE_BOTH,		/* enforced, and the tenant's too */
};

extern enum mrpool_quota_mode mrpool_quota_mode;

/* First published sizes of the ioctl structs: smaller ones are refused. */
#define MRPOOL_QUERY_SIZE_V1	128
#define MRPOOL_ALLOC_SIZE_V1	80
#define MRPOOL_FREE_SIZE_V1	32
#define MRPOOL_DEVICES_SIZE_V1	48
#define MRPOOL_DEVICE_SIZE_V1	192	/* an entry of DEVICES */
#define MRPOOL_EXPORT_SIZE_V1	48
#define MRPOOL_SLICE_KEYS_SIZE_V1 56
#define MRPOOL_SLICE_KEY_SIZE_V1 96	/* an entry of SLICE_KEYS */
/* Largest struct accepted from userspace (trailing bytes must be zero). */
#define MRPOOL_MAX_STRUCT_SIZE	PAGE_SIZE

/* Order of a block one PMD maps (2 MiB with 4 KiB pages on x86-64). */
#define MRPOOL_PMD_ORDER	(PMD_SHIFT - PAGE_SHIFT)

/*
 * mmap offset of slice @id: 2 MiB aligned, so THP-sized alignment holds.
 * Ids stay below 2^23, so every offset is below 2^44, which a 32-bit
 * process's mmap2() reaches (a 32-bit offset in 4 KiB pages): 8M live
 * slices at most, the ids cycling through that range.
 */
#define MRPOOL_TOKEN_SHIFT	21
#define MRPOOL_MAX_SLICE_ID	((1U << 23) - 1)

/* ---- pool.c ---- */
enum mrpool_chunk_state {
	MRPOOL_CHUNK_FREE,
	MRPOOL_CHUNK_USED,
	MRPOOL_CHUNK_QUARANTINED,
};

struct mrpool_tenant;
struct mrpool_quota_charge;

struct mrpool_chunk {
	struct list_head link;		/* free, quarantine or slice list */
	struct list_head all;		/* mrpool_pool.chunks */
	struct page **pages;		/* chunk_pages order-0 pages */
	struct file *file;		/* shmem chunk: its file (shmem.c) */
	unsigned long free_since;	/* jiffies it last became free */
	enum mrpool_chunk_state state;
	int nid;			/* node of its pages (one node) */
	u32 owner;			/* slice id while USED */
	u16 blocks[MRPOOL_NR_PAGE_ORDERS];	/* blocks it is built of */
	/* Charged to (a reference), from ALLOC until free again; or NULL. */
	struct mrpool_tenant *tenant;
	bool memlock;			/* also charged to RLIMIT_MEMLOCK */
	/* Charged to the orphans: the user it was taken from (a ref). */
	struct mrpool_tenant *orphan_of;
	/* Quotas charged with the tenant (quota.c), or NULL. */
	struct mrpool_quota_charge *quota;
	u8 q_level;			/* quarantine: index into quarantine[] */
	unsigned long q_due;		/* quarantine: jiffies of next check */
};

/*
 * Quarantined chunks are rechecked after 1, 2, 4, ... jiffies, at most
 * MRPOOL_QUARANTINE_MAX_WAIT apart: a pin dropped right after the free
 * (an exiting process closes /dev/mrpool before its uverbs file) is seen
 * at the next tick, a long-lived one costs little. One FIFO per wait,
 * so each list is in due order and a check visits only chunks that are due.
 */
#define MRPOOL_QUARANTINE_LEVELS	12
#define MRPOOL_QUARANTINE_MAX_WAIT	(4 * HZ)

struct mrpool_free_lists {
	struct list_head whole;
	struct list_head frag;
};

/*
 * The pool's totals at one moment: total == free + used + quarantined,
 * blocks of the chunks counted in total.
 */
struct mrpool_snapshot {
	unsigned long nr_total;
	unsigned long nr_free;
	unsigned long nr_used;
	unsigned long nr_quarantined;
	unsigned long blocks[MRPOOL_NR_PAGE_ORDERS];
};

/* The single pool; its lock protects every field below it. */
struct mrpool_pool {
	struct mutex lock;		/* the fields below */
	/*
	 * Free chunks per node (nr_node_ids), zeroed, most recently freed
	 * first: whole ones (one block: PMD-mapped when PMD-sized) are
	 * handed out before fragmented ones and trimmed after them.
	 */
	struct mrpool_free_lists *free;
	/* Returned but still referenced, by recheck interval (see above). */
	struct list_head quarantine[MRPOOL_QUARANTINE_LEVELS];
	struct list_head chunks;	/* every chunk, for debugfs */
	unsigned long nr_total;		/* chunks held, all states */
	unsigned long nr_free;
	unsigned long nr_used;
	unsigned long nr_quarantined;
	unsigned long nr_growing;	/* reserved by allocations in flight */
	unsigned long blocks[MRPOOL_NR_PAGE_ORDERS];
	unsigned long nr_fragmented_free; /* free chunks of several blocks */
	struct delayed_work trim_work;
	struct delayed_work quarantine_work;
	struct delayed_work defrag_work;	/* replaces fragmented free chunks */
	/* Poisoned chunks out of the totals, for hwpoison_work to retire. */
	struct list_head hwpoisoned;
	struct work_struct hwpoison_work;
	unsigned int defrag_wait;	/* seconds before the next try; the
					 * defrag worker writes it
					 */
	bool quarantine_high;		/* QUARANTINE_HIGH sent, not yet
					 * below the threshold again
					 */
	unsigned int chunk_order;	/* set once at load */
	size_t chunk_size;
	unsigned int chunk_pages;
	/*
	 * The totals above as @lock's last holder left them, for readers
	 * that must not wait for @lock (mrpool_pool_snapshot()): copied
	 * under @totals_seq by a holder that changed them, as it unlocks
	 * (mrpool_pool_unlock()). Written only under @lock, which
	 * serialises the writers.
	 */
	seqcount_t totals_seq;
	struct mrpool_snapshot totals;
};

struct mrpool_stats {
	atomic64_t allocs;		/* slices handed out */
	atomic64_t frees;		/* slices returned */
	atomic64_t fail_nomem;		/* pool at max_mb or no memory */
	atomic64_t fail_quota;		/* max_user_mb reached */
	atomic64_t fail_memlock;	/* RLIMIT_MEMLOCK reached */
	atomic64_t fail_injected;	/* debugfs fail_slice_alloc */
	atomic64_t chunk_alloc_failures; /* page allocator or injected */
	atomic64_t grows;		/* chunks added */
	atomic64_t trims;		/* chunks given back when idle */
	atomic64_t zeroed;		/* chunks zeroed for reuse */
	atomic64_t quarantines;		/* chunks that had to wait for a pin */
	atomic64_t node_fallbacks;	/* chunks handed out off the node asked */
	atomic64_t defrags;		/* fragmented free chunks replaced */
	atomic64_t quarantine_checks;	/* chunks rechecked in quarantine */
	atomic64_t retired;		/* chunks kept for good: an MR may reach
					 * them, or a page is poisoned
					 */
	atomic64_t hwpoison_retired;	/* of those, for a poisoned page */
	atomic64_t fork_copies;		/* VMAs a fork child got a copy of */
	atomic64_t fork_copy_bytes;	/* bytes of those copies */
	atomic64_t fork_copy_failures;	/* copies not made: the child's SIGBUS */
	atomic64_t orphans_full;	/* pinned chunks left to their owner */
};

extern struct mrpool_pool mrpool_pool;
extern struct mrpool_stats mrpool_stats;

/* ---- shmem.c: whole chunks as huge folios of a private tmpfs ---- */
int mrpool_shmem_init(void);
void mrpool_shmem_exit(void);
struct page *mrpool_shmem_chunk(int nid, struct file **filep);
bool mrpool_shmem_busy(struct page *head, struct file *file);
void mrpool_shmem_put(struct page *head, struct file *file);

int mrpool_pool_init(void);
int mrpool_pool_node(void);
int mrpool_pool_prefill(void);
void mrpool_pool_quiesce(void);
void mrpool_pool_exit(void);
int mrpool_pool_take(unsigned int nr, int nid, bool strict,
		     struct list_head *out);
void mrpool_pool_return(struct list_head *chunks);
void mrpool_pool_quarantine_check(void);
bool mrpool_chunk_whole(const struct mrpool_chunk *c);
bool mrpool_chunk_busy(struct mrpool_chunk *c);
void mrpool_pool_retire(struct mrpool_chunk *c);
void mrpool_pool_kick_trim(void);
void mrpool_pool_kick_defrag(void);
void mrpool_pool_hurry(void);
u64 mrpool_pool_bytes(unsigned long nr_chunks);

/* A consistent copy of the pool's totals, in chunks. */
void mrpool_pool_snapshot(struct mrpool_snapshot *snap);
u64 mrpool_max_bytes(void);

/* ---- tenant.c ---- */
kuid_t mrpool_tenant_uid(void);
struct mrpool_tenant *mrpool_tenant_get(void);
void mrpool_tenant_put(struct mrpool_tenant *t);
bool mrpool_tenant_is_current(struct mrpool_tenant *t);
int mrpool_tenant_charge(struct mrpool_tenant *t, unsigned long nr,
			 bool covered, bool *memlock);
void mrpool_tenant_uncharge(struct mrpool_tenant *t, unsigned long nr,
			    bool memlock);
void mrpool_chunk_charge(struct mrpool_chunk *c, struct mrpool_tenant *t,
			 bool memlock, struct mrpool_quota_charge *qc);
void mrpool_chunk_quarantined(struct mrpool_chunk *c);
void mrpool_chunk_uncharge(struct mrpool_chunk *c, bool quarantined);
unsigned long mrpool_chunks_recharge(struct list_head *chunks,
				     struct mrpool_tenant *to, bool orphan);
u64 mrpool_tenant_bytes(struct mrpool_tenant *t, u64 *quarantined);
void mrpool_tenants_show(struct seq_file *m);

/* One tenant's counts, in bytes, as mrpool_tenants_walk() reports them. */
struct mrpool_tenant_info {
	kuid_t uid;		/* INVALID_UID for the orphans */
	bool orphans;		/* the charges of dead owners (tenant.c) */
	u64 bytes;		/* charged, quarantined included */
	u64 quarantined;
	u64 memlock;		/* of the bytes, in RLIMIT_MEMLOCK */
	u64 orphaned;		/* its own, now charged to the orphans */
};

/* Past every kuid value: the orphans come last in a walk. */
#define MRPOOL_TENANTS_POS_ORPHANS	((u64)U32_MAX + 1)

int mrpool_tenants_walk(u64 *pos, bool all, kuid_t mine,
			int (*fn)(void *arg, const struct mrpool_tenant_info *ti),
			void *arg);

/* ---- quota.c ---- */
struct cgroup;

/* One quota as mrpool_quotas_walk() reports it. */
struct mrpool_quota_info {
	const char *path;		/* from the cgroup2 root */
	u64 cgroup_id;
	bool has_limit;			/* else kept for its usage only */
	u64 limit;			/* bytes */
	u64 usage;			/* bytes charged, quarantined included */
	u64 quarantined;		/* bytes */
	bool removed;			/* its cgroup was removed */
};

int mrpool_quota_charge(unsigned long nr, struct mrpool_quota_charge **qcp,
			bool *covered);
bool mrpool_quota_covers(u64 *limit);
void mrpool_quota_uncharge(struct mrpool_quota_charge *qc, unsigned long nr,
			   bool quarantined);
void mrpool_quota_quarantined(struct mrpool_quota_charge *qc);
int mrpool_quota_set(struct cgroup *cgrp, u64 limit);
int mrpool_quota_del(struct cgroup *cgrp);
struct cgroup *mrpool_cgroup_ns_root(void);
int mrpool_quotas_walk(u64 *pos, struct cgroup *top, struct cgroup *only,
		       char *buf, size_t len,
		       int (*fn)(void *arg, const struct mrpool_quota_info *),
		       void *arg);
void mrpool_quotas_show(struct seq_file *m);
void mrpool_quotas_exit(void);

/* ---- slice.c ---- */
struct mrpool_client {
	struct kref ref;		/* the file, the map file, each slice */
	struct mutex lock;		/* slices, bytes, closed */
	struct list_head slices;	/* owned slices, freed-but-mapped too */
	u64 bytes;			/* bytes of those slices */
	bool closed;			/* the /dev/mrpool file was released */
	struct list_head node;		/* mrpool_clients */
	struct mm_struct *mm;		/* opener's; only it may alloc/map */
	struct file *map_file;		/* VMAs hold this, not the device
					 * file (mapfile.c); NULL once closed
					 */
	struct mrpool_tenant *tenant;	/* the opener's user (a reference) */
	pid_t pid;			/* tgid of the opener */
	char comm[TASK_COMM_LEN];
	struct page *stats_page;	/* client_stats.c, lock; NULL until mapped */
};

struct mrpool_slice {
	struct kref ref;		/* owner's reference + one per VMA */
	u32 id;				/* key in mrpool_slices, mmap token */
	bool freed;			/* FREE or close dropped ownership */
	bool fork_copy;			/* MRPOOL_ALLOC_FORK_COPY (forkcopy.c) */
	/*
	 * Revocation (revoke.c): @revoked is set under @mem_sem held for
	 * write; whatever reads the slice's pages (faults, dma-buf maps,
	 * SLICE_KEYS) holds it for read and gives up once it is set.
	 */
	struct rw_semaphore mem_sem;
	bool revoked;
	/* A fault ever handed out a page of it; set under @mem_sem read. */
	bool faulted;
	bool returned;			/* its chunks went back to the pool */
	atomic_t dma_maps;		/* importers' mapped sg tables */
	bool kept;			/* revoked, chunks kept for dma_maps */
	/* Its dma-bufs (dmabuf.c), their mapped attachments, and kept, under: */
	struct mutex export_lock;
	struct list_head exports;	/* struct mrpool_dmabuf */
	struct list_head dma_mapv;	/* struct mrpool_dmabuf_map */
	struct mrpool_client *client;	/* owner (a reference) */
	struct list_head node;		/* client->slices */
	struct list_head chunks;	/* the chunks, for the pool */
	struct mrpool_chunk **chunkv;	/* the chunks in mapping order */
	unsigned int nr_chunks;
	u64 length;
	atomic_t maps;			/* VMAs mapping it */
	/* The last put deferred out of mmap_lock (mmap.c). */
	struct callback_head put_work;
	struct file *put_file;		/* pins the module until then */
};

extern struct list_head mrpool_clients;
extern struct mutex mrpool_clients_lock;
extern struct xarray mrpool_slices;
u32 mrpool_slice_id_cursor(void);
void mrpool_slice_id_cursor_set(u32 next);

struct mrpool_client *mrpool_client_create(void);
bool mrpool_client_is_owner(const struct mrpool_client *client);
void mrpool_client_close(struct mrpool_client *client);
void mrpool_client_put(struct mrpool_client *client);
int mrpool_slice_alloc(struct mrpool_client *client, struct mrpool_alloc *arg);
int mrpool_slice_free(struct mrpool_client *client, u64 id);
struct mrpool_slice *mrpool_slice_get_owned(struct mrpool_client *client,
					    unsigned long pgoff);
struct mrpool_slice *mrpool_slice_get_id(struct mrpool_client *client, u64 id);
void mrpool_slice_put(struct mrpool_slice *slice);

/* Page @idx of the slice; the caller holds a slice reference. */
static inline struct page *mrpool_slice_page(struct mrpool_slice *s,
					     unsigned long idx)
{
	unsigned int order = mrpool_pool.chunk_order;

	return s->chunkv[idx >> order]->pages[idx & ((1UL << order) - 1)];
}

/* ---- revoke.c ---- */
void mrpool_slice_revoke(struct mrpool_slice *s, struct file *map_file,
			 bool owner_exiting);
bool mrpool_slice_mem_read(struct mrpool_slice *s);
void mrpool_slice_mem_done(struct mrpool_slice *s);
void mrpool_slice_unkeep(struct mrpool_slice *s);

/* ---- mapfile.c ---- */
struct file *mrpool_mapfile_create(struct mrpool_client *client);

/* ---- mmap.c ---- */
vm_fault_t mrpool_slice_fault(struct vm_fault *vmf, struct mrpool_slice *s,
			      unsigned long idx);
int mrpool_mmap(struct file *file, struct vm_area_struct *vma);
void mrpool_mmap_exit(void);
unsigned long mrpool_get_unmapped_area(struct file *file, unsigned long addr,
				       unsigned long len, unsigned long pgoff,
				       unsigned long flags);
#ifdef CONFIG_NUMA
struct mempolicy *mrpool_vm_get_policy(MRPOOL_GET_POLICY_ARGS);
#endif

/* ---- forkcopy.c: a fork child's private copy of a slice's mapping ---- */
bool mrpool_forkcopy_open(struct vm_area_struct *vma, struct mrpool_slice *s);

/* ---- client_stats.c ---- */
struct seq_file;

void mrpool_client_stats_show_header(struct seq_file *m);

int mrpool_client_stats_mmap(struct mrpool_client *client,
			     struct vm_area_struct *vma);
void mrpool_client_stats_release(struct mrpool_client *client);
void mrpool_client_stats_show(struct seq_file *m, struct mrpool_client *client);

/* ---- chrdev.c ---- */
int mrpool_chrdev_init(void);
void mrpool_chrdev_exit(void);
int mrpool_copy_in(void *karg, size_t ksize, size_t minsize,
		   const void __user *uarg, u32 *usize);
int mrpool_copy_out(void __user *uarg, const void *karg, size_t ksize,
		    u32 usize);

/* ---- devices.c ---- */
unsigned int mrpool_devices_ready(void);
long mrpool_ioc_devices(void __user *uarg);
long mrpool_ioc_slice_keys(struct mrpool_client *client, void __user *uarg);

/* ---- dmabuf.c ---- */
long mrpool_ioc_export_dmabuf(struct file *file, void __user *uarg);
void mrpool_dmabuf_zap(struct mrpool_slice *s);
struct mrpool_tenant *mrpool_dmabuf_importer(struct mrpool_slice *s,
					     bool *many);

/* ---- sysfs.c ---- */
extern const struct attribute_group *mrpool_groups[];

void mrpool_sysfs_init(void);

/* ---- netlink.c ---- */
struct mrpool_ib_dev;

int mrpool_nl_init(void);
void mrpool_nl_exit(void);
void mrpool_nl_pool_event(enum mrpool_nl_event ev, u32 chunks, u64 threshold);
void mrpool_nl_dev_event(enum mrpool_nl_event ev, struct mrpool_ib_dev *d);

/* ---- debugfs.c ---- */
extern atomic_t mrpool_fail_chunk_alloc;
extern atomic_t mrpool_fail_slice_alloc;
extern atomic_t mrpool_fail_high_order;
extern atomic_t mrpool_fail_shmem;
extern atomic_t mrpool_fail_fork_copy;

void mrpool_debugfs_init(void);
void mrpool_debugfs_exit(void);
bool mrpool_should_fail(atomic_t *knob);
void mrpool_debug_hold_pool_lock(void);
#ifdef CONFIG_FAULT_INJECTION_DEBUG_FS
bool mrpool_fail_alloc(size_t size);
#else
static inline bool mrpool_fail_alloc(size_t size)
{
	return false;
}
#endif

/*
 * Allocations of the module's objects that fail_alloc can fail. @gfp is
 * GFP_KERNEL_ACCOUNT for what a process makes the module keep beyond the
 * call (its client, slices, stats page, dma-bufs: charged to its memory
 * cgroup, as the kernel's own files and VMAs are), else GFP_KERNEL.
 */
static inline void *mrpool_kzalloc(size_t size, gfp_t gfp)
{
	return mrpool_fail_alloc(size) ? NULL : kzalloc(size, gfp);
}

static inline void *mrpool_kcalloc(size_t n, size_t size, gfp_t gfp)
{
	return mrpool_fail_alloc(size_mul(n, size)) ? NULL :
	       kcalloc(n, size, gfp);
}

/* Freed with kvfree(). */
static inline void *mrpool_kvcalloc(size_t n, size_t size, gfp_t gfp)
{
	return mrpool_fail_alloc(size_mul(n, size)) ? NULL :
	       kvcalloc(n, size, gfp);
}

#endif /* _MRPOOL_H */
