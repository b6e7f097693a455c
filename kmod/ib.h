/* SPDX-License-Identifier: GPL-2.0 */
/*
 * mrpool's ib_core side, the kernel MR cache: every chunk of the pool is
 * DMA-mapped for every usable RDMA device and registered there as a
 * fast-registration MR in a kernel PD of the module's own. Prototypes are
 * grouped by the file that defines them.
 *
 * Objects:
 *  - dev (struct mrpool_ib_dev): one per ib_device the client was given,
 *    usable or not (then with a reason); its kobject is both its sysfs
 *    directory and its reference count.
 *  - mr (struct mrpool_ib_mr): one chunk registered on one device.
 *  - the chunk registry (mrpool_ib_chunks): every chunk the pool announced
 *    through mrpool_ib_chunk_added() and has not yet withdrawn. A device
 *    that appears walks it instead of the pool's own list.
 *
 * Protection domains: per device, the cache PD holds only the cached MRs
 * (local write, never remote access) and the module's own QP pair; the
 * shared lend PD holds only the MRs of kernel buffers lent through
 * mrpool_kbuf_alloc() (one fresh MR per lend, over the lent length
 * rounded up to pages, remote read/write) and its own QP pair. Each kernel
 * buffer session (mrpool_kbuf_session_create()) has a loop of its own: a
 * PD (mrpool's, or one the borrower passed in) with a QP pair of ours, and
 * its buffers' MRs are made there. Borrowers create their QPs in the PD of
 * their buffers, so they reach those lent buffers and nothing else: no
 * cached lkey of a chunk a process owns, no other session's buffer.
 *
 * Work requests: one at a time per device, signalled, awaited for
 * mrpool_ib_wr_timeout_ms. On a timeout the QP is moved to the error state
 * and a marker work request is posted behind the late one; its flushed
 * completion proves the send queue empty (what ib_drain_sq() does, with a
 * bounded wait). Only then is the MR deregistered and unmapped. When even
 * the marker does not come back, the MR is "stuck": kept, mapped, on
 * d->stuck until the device's QPs are destroyed, and its chunk is reported
 * unsafe (mrpool_ib_chunk_removing() returns false, a kernel buffer's
 * chunk is retired). A failed ib_dereg_mr() is treated the same way.
 *
 * Recovery. Any failed work request (a post error, a timeout, a bad
 * completion) breaks its loop and makes the device FAILED. When nothing of
 * ours is left in flight (the post failed, the completion came back, or
 * the drain did), the device's recovery work (d->recover, ib_client.c) is
 * queued after mrpool_ib_recover_ms, doubling after each failed attempt up
 * to mrpool_ib_recover_max_ms (taken as at least recover_ms and 100 ms),
 * and back to the start only once the device stayed READY for
 * recover_max_ms after its recovery (d->ready_at). An attempt destroys the
 * QPs of the device's broken loops (cache, lend) and makes new ones in the
 * same PDs, whose MRs (cached chunks, lends still out) stay valid; proves
 * each own loop with a work request (mrpool_ib_loop_probe(): a LOCAL_INV
 * of the loop's probe MR, which has no pages), whose failure fails the
 * attempt; then it registers what the device is missing
 * (mrpool_ib_reg_all(): chunks that came while it was FAILED, or whose
 * registration failed) and only then makes the device READY again, with a
 * DEV_READY event, and walks the registry once more: a chunk added while
 * the device is not READY skips it without taking d->lock (which an
 * attempt holds through its work requests), so growth never waits for a
 * failed device. It is never queued after a drain that failed, and
 * never attempted while an MR of the device's own loops is on d->stuck:
 * such an MR may still be written by the lost work request, and the QP
 * that could run it is the one a rebuild would destroy; such a device
 * stays FAILED until it is removed. A kernel buffer session's loop is
 * never rebuilt: a session whose loop broke keeps failing its lends
 * (-EIO) until its owner destroys it and makes another; its buffers still
 * out keep their keys (the MRs live in the session's PD, not in the QP).
 * Setup failures are not retried either. The device's removal stops the
 * recovery for good (d->recover_off) and cancels it, waiting for a running
 * attempt, before its teardown.
 *
 * Locking (outermost first; see also mrpool.h). The pool calls in without
 * mrpool_pool.lock (only mrpool_ib_node(), a lock-free read, is called
 * with it held), so no pool lock is ever held across a hardware wait.
 *   d->lock           one per device: its QPs and work requests, its
 *                     mrs xarray, lends, stuck and sessions lists,
 *                     every loop's and MR's fields, the teardown. Held
 *                     across hardware waits.
 *                     Taken only through mrpool_ib_dev_lock(), which
 *                     opens a NOIO scope first: what is allocated under
 *                     it (sg tables, MRs, PDs, QPs, xarray nodes,
 *                     netlink messages, and whatever ib_core and the
 *                     driver allocate inside) never enters IO or FS
 *                     reclaim, so a kernel-buffer borrower on a reclaim
 *                     or writeback path may wait for it without waiting
 *                     for itself. For the same reason nothing that may
 *                     take rtnl_mutex (ib_query_port(), rxe's) is called
 *                     under it: its holders allocate outside any such
 *                     scope (mrpool_ib_self_ah()).
 *                     The recovery work holds it for a whole attempt
 *                     (rebuild, registrations) and takes no other lock
 *                     but those below; it computes its address first,
 *                     with no lock. The removal cancels it
 *                     (cancel_delayed_work_sync()) without holding it.
 *     mrpool_ib_lock  the device list, the chunk registry, each device's
 *                     state and reason text, the cached summary (node,
 *                     ready count). Never held across a hardware wait,
 *                     never held while taking a d->lock or the pool lock;
 *                     its one allocation (a registry node) is made in a
 *                     NOIO scope, for the same borrowers.
 * Two d->locks are never held together: walkers take a reference on the
 * next device under mrpool_ib_lock (mrpool_ib_dev_next()), drop it, then
 * lock the device. Cached MRs are freed after an RCU grace period, so
 * mrpool_ib_chunk_keys() reads them under RCU without d->lock. Counters
 * are atomics read without locks.
 */
#ifndef _MRPOOL_IB_H
#define _MRPOOL_IB_H

#include "mrpool.h"

#include <linux/completion.h>
#include <linux/kobject.h>
#include <linux/ratelimit.h>
#include <linux/rcupdate.h>
#include <linux/scatterlist.h>
#include <linux/sched/mm.h>
#include <rdma/ib_verbs.h>

/* Longest reason text kept for a device that is not ready. */
#define MRPOOL_IB_REASON_LEN	96

enum mrpool_ib_state {
	MRPOOL_IB_READY,	/* every chunk registered or being registered */
	MRPOOL_IB_UNSUPPORTED,	/* lacks something the cache needs; skipped */
	MRPOOL_IB_FAILED,	/* setup or a work request failed; skipped
				 * (recovered after a drained WR failure)
				 */
	MRPOOL_IB_REMOVED,	/* gone; kept alive by kernel buffers only */
};

/* Which of a device's two PD + QP pair sets. */
enum mrpool_ib_loop_id {
	MRPOOL_IB_CACHE,	/* the cached MRs, local-only */
	MRPOOL_IB_LEND,		/* kernel buffers' MRs; borrowers' QPs */
	MRPOOL_IB_NR_LOOPS,
};

/*
 * A PD with a loopback pair of RC QPs: fast registration needs the MR and
 * the QP in one PD. Work requests go on qp[0]. Under the device's lock.
 * The device's own two are in d->loop[]; a session's is allocated, on
 * d->sessions, and lives while it has users (the session and each of its
 * lends), or, with none left but an MR of its PD on d->stuck, until the
 * teardown.
 */
struct mrpool_ib_loop {
	struct mrpool_ib_dev *dev;
	struct ib_pd *pd;
	bool own_pd;			/* allocated here, deallocated here */
	struct ib_qp *qp[2];
	struct list_head link;		/* d->sessions (a session's loop) */
	unsigned int users;		/* a session's loop: session + lends */
	bool broken;			/* in error state and drained: no WR in
					 * flight, none posted again
					 */
	struct ib_cqe cqe;		/* the one signalled WR in flight */
	struct completion done;		/* that WR completed */
	enum ib_wc_status wc_status;	/* and how */
	struct ib_cqe drain_cqe;	/* the marker behind a late WR */
	struct completion drained;	/* the marker came back */
	struct ib_mr *probe;		/* a recovery's proof (no pages), kept
					 * until the QPs are destroyed
					 */
};

struct mrpool_ib_dev {
	struct kobject kobj;		/* sysfs dir; list and kbufs hold refs */
	bool in_sysfs;			/* kobject_add() succeeded */
	struct list_head link;		/* mrpool_ib_devs, mrpool_ib_lock */
	u64 seq;			/* order on the list, for walkers */
	struct mutex lock;		/* everything below (see the top) */
	struct ib_device *ibdev;	/* NULL once removed */
	char name[IB_DEVICE_NAME_MAX];
	int node;			/* NUMA node of its DMA device */
	u32 port;			/* port of the internal QPs */
	enum mrpool_ib_state state;	/* written under both locks */
	bool announced;			/* DEV_ADDED sent, REMOVED not yet:
					 * state changes are netlink events;
					 * written under both locks
					 */
	char reason[MRPOOL_IB_REASON_LEN];	/* why not READY; ib lock */
	struct ib_cq *cq;		/* every internal QP */
	struct mrpool_ib_loop loop[MRPOOL_IB_NR_LOOPS];
	bool pd_leaked;			/* an MR could never be deregistered */
	struct xarray mrs;		/* chunk key -> cached mrpool_ib_mr */
	struct list_head lends;		/* mrpool_ib_mr of kbufs out */
	struct list_head sessions;	/* mrpool_ib_loop of kbuf sessions */
	struct list_head stuck;		/* mrpool_ib_mr a WR may still use */
	atomic_t nr_mrs;		/* entries in mrs */
	atomic_t kbufs;			/* kernel buffers handed out */
	atomic64_t regs;		/* IB_WR_REG_MR completed */
	atomic64_t invalidations;	/* IB_WR_LOCAL_INV completed */
	atomic64_t reg_failures;	/* chunks that could not be registered */
	atomic64_t wr_timeouts;		/* work requests never completed */
	atomic64_t qp_drains;		/* QPs drained after a timeout */
	atomic64_t dereg_failures;	/* ib_dereg_mr() errors */
	struct delayed_work recover;	/* back to READY (see the top) */
	unsigned int recover_delay_ms;	/* wait before the next attempt,
					 * 0: mrpool_ib_recover_ms
					 */
	unsigned long ready_at;		/* jiffies a recovery made it READY */
	bool recovered;			/* and it has not failed since */
	struct ratelimit_state recover_rs; /* its attempts' log lines */
	bool recovering;		/* an attempt holds the lock */
	bool recover_off;		/* removal began: never queued again */
	atomic64_t recoveries;		/* attempts that made it READY */
	atomic64_t recover_failures;	/* attempts that did not */
};

static inline struct mrpool_ib_dev *to_mrpool_ib_dev(struct kobject *kobj)
{
	return container_of(kobj, struct mrpool_ib_dev, kobj);
}

/*
 * Take a device's lock inside a NOIO scope (see the locking notes above);
 * returns the scope's flags for mrpool_ib_dev_unlock().
 */
static inline unsigned int mrpool_ib_dev_lock(struct mrpool_ib_dev *d)
{
	unsigned int noio = memalloc_noio_save();

	mutex_lock(&d->lock);
	return noio;
}

static inline void mrpool_ib_dev_unlock(struct mrpool_ib_dev *d,
					unsigned int noio)
{
	mutex_unlock(&d->lock);
	memalloc_noio_restore(noio);
}

/*
 * One chunk (or its first @len bytes) registered on one device: a cache
 * entry in d->mrs, or a lend on d->lends owned by a kernel buffer. Fields
 * under the device's lock; lkey, iova and valid are also read under RCU.
 */
struct mrpool_ib_mr {
	struct mrpool_chunk *chunk;
	struct ib_mr *mr;		/* IB_MR_TYPE_MEM_REG */
	struct sg_table sgt;		/* the registered pages */
	bool mapped;			/* sgt is DMA-mapped for the device */
	unsigned int page_size;		/* MR page size: the chunk's where possible */
	size_t len;			/* bytes registered */
	int access;			/* IB_ACCESS_* of the registration */
	bool valid;			/* registered, not invalidated */
	bool lent;			/* a kernel buffer's (lend PD) */
	bool stuck;			/* a WR may still use it; on d->stuck */
	bool released;			/* lend torn down with its device */
	struct mrpool_ib_loop *loop;	/* whose PD and QP it was made with */
	u32 lkey, rkey;			/* copies for readers under RCU */
	u64 iova;
	struct list_head link;		/* d->lends or d->stuck */
	struct rcu_head rcu;
};

/* Objects alive across all devices, for leak checks (debugfs ib_stats). */
struct mrpool_ib_stats {
	atomic64_t devs_added;		/* add callbacks */
	atomic64_t devs_removed;	/* remove callbacks */
	atomic_t pds;			/* kernel PDs (each with its QP pair) */
	atomic_t mrs;			/* MRs allocated */
	atomic_t dma_maps;		/* chunk DMA mappings */
	atomic_t kbufs;			/* kernel buffers outstanding */
	atomic_t lends;			/* lend MRs (kbufs' own registrations) */
	atomic_t sessions;		/* session loops not yet freed */
	atomic_t stuck_mrs;		/* MRs a work request may still use */
	atomic_t wr_waits;		/* threads waiting for a completion now */
};

/* ---- ib_client.c ---- */
extern struct mutex mrpool_ib_lock;
extern struct list_head mrpool_ib_devs;
extern struct xarray mrpool_ib_chunks;
extern struct mrpool_ib_stats mrpool_ib_stats;
extern atomic_t mrpool_ib_fail_setup;
extern atomic_t mrpool_ib_fail_reg;
extern atomic_t mrpool_ib_fail_complete;
extern atomic_t mrpool_ib_fail_complete_after;
extern atomic_t mrpool_ib_fail_dereg;
extern atomic_t mrpool_ib_fail_dereg_final;
extern atomic_t mrpool_ib_fail_wc;
extern atomic_t mrpool_ib_fail_wc_after;
extern u32 mrpool_ib_wr_timeout_ms;
extern u32 mrpool_ib_recover_ms;
extern u32 mrpool_ib_recover_max_ms;

int mrpool_ib_init(void);
void mrpool_ib_exit(void);
void mrpool_ib_exit_leaked(void);
int mrpool_ib_chunk_added(struct mrpool_chunk *c);
bool mrpool_ib_chunk_removing(struct mrpool_chunk *c);
void mrpool_ib_chunk_leaked(struct mrpool_chunk *c);
unsigned long mrpool_ib_chunk_key(const struct mrpool_chunk *c);
const char *mrpool_ib_state_name(enum mrpool_ib_state state);
u32 mrpool_ib_state_uapi(enum mrpool_ib_state state);
__printf(3, 4)
void mrpool_ib_set_state(struct mrpool_ib_dev *d, enum mrpool_ib_state state,
			 const char *fmt, ...);
struct mrpool_ib_dev *mrpool_ib_dev_find(struct ib_device *ibdev);
struct mrpool_ib_dev *mrpool_ib_dev_next(struct mrpool_ib_dev *prev);
int mrpool_ib_node(void);
void mrpool_ib_recover_work(struct work_struct *work);
void mrpool_ib_recover_queue(struct mrpool_ib_dev *d);

/* The kernel keys of one chunk on one device (informational for users). */
struct mrpool_ib_key {
	char name[IB_DEVICE_NAME_MAX];
	u32 lkey;
	u32 rkey;			/* 0: cached MRs have no remote access */
	u64 iova;
};

int mrpool_ib_chunk_keys(struct mrpool_chunk *c, struct mrpool_ib_key *out,
			 unsigned int max);

/* ---- ib_reg.c (the device's lock held unless said) ---- */
int mrpool_ib_self_ah(struct ib_device *ibdev, u32 port,
		      struct rdma_ah_attr *ah);
int mrpool_ib_dev_setup(struct mrpool_ib_dev *d);
bool mrpool_ib_dev_usable(const struct mrpool_ib_dev *d);
bool mrpool_ib_dev_stuck(struct mrpool_ib_dev *d);
int mrpool_ib_loop_probe(struct mrpool_ib_dev *d, struct mrpool_ib_loop *l);
int mrpool_ib_dev_rebuild(struct mrpool_ib_dev *d,
			  const struct rdma_ah_attr *ah);
void mrpool_ib_dev_teardown(struct mrpool_ib_dev *d);
int mrpool_ib_reg_chunk(struct mrpool_ib_dev *d, struct mrpool_chunk *c);
bool mrpool_ib_unreg(struct mrpool_ib_dev *d, struct mrpool_ib_mr *m);
bool mrpool_ib_chunk_stuck(struct mrpool_ib_dev *d, unsigned long key);
int mrpool_ib_lend(struct mrpool_ib_dev *d, struct mrpool_ib_loop *l,
		   struct mrpool_chunk *c, size_t len, int access,
		   struct mrpool_ib_mr **out, bool *chunk_safe);
bool mrpool_ib_unlend(struct mrpool_ib_dev *d, struct mrpool_ib_mr *m);
struct mrpool_ib_loop *mrpool_ib_loop_add(struct mrpool_ib_dev *d,
					  struct ib_pd *pd,
					  const struct rdma_ah_attr *ah);
void mrpool_ib_loop_put(struct mrpool_ib_dev *d, struct mrpool_ib_loop *l);

/* ---- ib_sysfs.c ---- */
int mrpool_ib_sysfs_init(void);
void mrpool_ib_sysfs_exit(void);
struct mrpool_ib_dev *mrpool_ib_dev_alloc(struct ib_device *ibdev, int node);
void mrpool_ib_dev_publish(struct mrpool_ib_dev *d);
void mrpool_ib_dev_unpublish(struct mrpool_ib_dev *d);

/* ---- ib_debugfs.c ---- */
void mrpool_ib_debugfs_init(void);
void mrpool_ib_debugfs_exit(void);

#endif /* _MRPOOL_IB_H */
