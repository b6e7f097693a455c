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
 * Access: a cached MR grants local write only, so a peer of a QP in the
 * module's PD cannot reach chunks it was never given. A chunk handed out as
 * a kernel buffer is re-registered with remote read/write and a new key
 * byte; when the buffer is freed it is re-registered local-only with yet
 * another key byte, so a stale rkey never reaches the chunk's next owner.
 *
 * Locking: mrpool_ib_lock (a mutex) protects the device list, each
 * device's state and mrs xarray, the registry's contents, and serialises
 * work requests on every internal QP. It nests inside mrpool_pool.lock
 * (mrpool_ib_chunk_removing() may be called with that held); the pool lock
 * is never taken while it is held. Counters are atomics read without it.
 */
#ifndef _MRPOOL_IB_H
#define _MRPOOL_IB_H

#include "mrpool.h"

#include <linux/completion.h>
#include <linux/kobject.h>
#include <linux/scatterlist.h>
#include <rdma/ib_verbs.h>

/* Longest reason text kept for a device that is not ready. */
#define MRPOOL_IB_REASON_LEN	96

enum mrpool_ib_state {
	MRPOOL_IB_READY,	/* every chunk registered or being registered */
	MRPOOL_IB_UNSUPPORTED,	/* lacks something the cache needs; skipped */
	MRPOOL_IB_FAILED,	/* setup or a work request failed; skipped */
	MRPOOL_IB_REMOVED,	/* gone; kept alive by kernel buffers only */
};

struct mrpool_ib_dev {
	struct kobject kobj;		/* sysfs dir; list and kbufs hold refs */
	bool in_sysfs;			/* kobject_add() succeeded */
	struct list_head link;		/* mrpool_ib_devs */
	struct ib_device *ibdev;	/* NULL once removed */
	char name[IB_DEVICE_NAME_MAX];
	int node;			/* NUMA node of its DMA device */
	u32 port;			/* port of the internal QPs */
	enum mrpool_ib_state state;
	char reason[MRPOOL_IB_REASON_LEN];	/* why not READY */
	struct ib_pd *pd;		/* every cached MR and kbuf QP */
	struct ib_cq *cq;		/* both internal QPs */
	struct ib_qp *qp[2];		/* loopback pair; WRs go on qp[0] */
	bool qp_broken;			/* a WR failed or timed out */
	struct ib_cqe cqe;		/* the one signalled WR in flight */
	struct completion done;		/* that WR completed */
	enum ib_wc_status wc_status;	/* and how */
	struct xarray mrs;		/* chunk key -> struct mrpool_ib_mr */
	atomic_t nr_mrs;		/* entries in mrs */
	atomic_t kbufs;			/* kernel buffers handed out */
	atomic64_t regs;		/* IB_WR_REG_MR completed */
	atomic64_t invalidations;	/* IB_WR_LOCAL_INV completed */
	atomic64_t reg_failures;	/* chunks that could not be registered */
	atomic64_t wr_timeouts;		/* work requests never completed */
};

static inline struct mrpool_ib_dev *to_mrpool_ib_dev(struct kobject *kobj)
{
	return container_of(kobj, struct mrpool_ib_dev, kobj);
}

struct mrpool_ib_mr {
	struct mrpool_chunk *chunk;
	struct ib_mr *mr;		/* IB_MR_TYPE_MEM_REG */
	struct sg_table sgt;		/* the chunk's pages */
	bool mapped;			/* sgt is DMA-mapped for the device */
	unsigned int page_size;		/* MR page size: the chunk's where possible */
	int access;			/* IB_ACCESS_* of the current registration */
	bool valid;			/* registered, not invalidated */
	bool lent;			/* part of a kernel buffer */
};

/* Objects alive across all devices, for leak checks (debugfs ib_stats). */
struct mrpool_ib_stats {
	atomic64_t devs_added;		/* add callbacks */
	atomic64_t devs_removed;	/* remove callbacks */
	atomic_t pds;			/* kernel PDs (with CQ and QP pair) */
	atomic_t mrs;			/* MRs allocated */
	atomic_t dma_maps;		/* chunk DMA mappings */
	atomic_t kbufs;			/* kernel buffers outstanding */
};

/* ---- ib_client.c ---- */
extern struct mutex mrpool_ib_lock;
extern struct list_head mrpool_ib_devs;
extern struct xarray mrpool_ib_chunks;
extern struct mrpool_ib_stats mrpool_ib_stats;
extern atomic_t mrpool_ib_fail_setup;
extern atomic_t mrpool_ib_fail_reg;

int mrpool_ib_init(void);
void mrpool_ib_exit(void);
int mrpool_ib_chunk_added(struct mrpool_chunk *c);
void mrpool_ib_chunk_removing(struct mrpool_chunk *c);
unsigned long mrpool_ib_chunk_key(const struct mrpool_chunk *c);
const char *mrpool_ib_state_name(enum mrpool_ib_state state);
__printf(3, 4)
void mrpool_ib_set_state(struct mrpool_ib_dev *d, enum mrpool_ib_state state,
			 const char *fmt, ...);
struct mrpool_ib_dev *mrpool_ib_dev_find(struct ib_device *ibdev);
int mrpool_ib_node(void);

/* One device as the DEVICES ioctl reports it. */
struct mrpool_ib_dev_info {
	char name[IB_DEVICE_NAME_MAX];
	int node;
	enum mrpool_ib_state state;
	u32 nr_mrs;
	char reason[MRPOOL_IB_REASON_LEN];
};

int mrpool_ib_devices(struct mrpool_ib_dev_info *out, unsigned int max);

/* The kernel keys of one chunk on one device (informational for users). */
struct mrpool_ib_key {
	char name[IB_DEVICE_NAME_MAX];
	u32 lkey;
	u32 rkey;			/* 0 unless lent with remote access */
	u64 iova;
};

int mrpool_ib_chunk_keys(struct mrpool_chunk *c, struct mrpool_ib_key *out,
			 unsigned int max);

/* ---- ib_reg.c (mrpool_ib_lock held) ---- */
int mrpool_ib_dev_setup(struct mrpool_ib_dev *d);
void mrpool_ib_dev_teardown(struct mrpool_ib_dev *d);
int mrpool_ib_reg_chunk(struct mrpool_ib_dev *d, struct mrpool_chunk *c,
			struct mrpool_ib_mr **out);
void mrpool_ib_unreg(struct mrpool_ib_dev *d, struct mrpool_ib_mr *m);
int mrpool_ib_rereg(struct mrpool_ib_dev *d, struct mrpool_ib_mr *m,
		    int access);

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
