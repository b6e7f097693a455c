// SPDX-License-Identifier: GPL-2.0
/*
 * Fast registration for the kernel MR cache and for kernel buffers. Per
 * device: a CQ and two loops, each a PD with a loopback pair of RC QPs
 * (rxe executes work requests, REG_MR and LOCAL_INV included, only on a QP
 * in RTS, and RTS needs a peer; fast registration needs the MR and the QP
 * in one PD), plus one loop per kernel buffer session, on the same CQ.
 * Per chunk per device: a DMA mapping and an IB_MR_TYPE_MEM_REG MR in the
 * cache PD, registered local-only with the largest page size the device
 * and the mapping allow. Per kernel buffer: a fresh MR in the shared lend
 * PD or in its session's PD, over the lent length only, with remote
 * access, under a random key byte.
 *
 * Every work request is signalled and awaited, one at a time per device,
 * under the device's lock (never under mrpool_ib_lock). A timeout drains
 * the QP before the MR is touched; see ib.h for what happens when even the
 * drain does not come back.
 */
#include "ib.h"

#include <linux/slab.h>
#include <linux/kmemleak.h>
#include <linux/mm.h>
#include <linux/log2.h>
#include <linux/jiffies.h>
#include <linux/dma-mapping.h>
#include <linux/swiotlb.h>
#include <linux/random.h>
#include <rdma/ib_cache.h>

#define MRPOOL_IB_SQ_DEPTH	4
/*
 * Sessions' loops share the CQ: it holds the completions of one work
 * request and its drain marker at a time (one per device, under its
 * lock), and no loop ever posts a receive.
 */
#define MRPOOL_IB_CQ_DEPTH	(MRPOOL_IB_NR_LOOPS * (2 * MRPOOL_IB_SQ_DEPTH + 2))
/* Registrations of the cache are local; lends add remote access. */
#define MRPOOL_IB_ACCESS_LOCAL	IB_ACCESS_LOCAL_WRITE

/* debugfs fail_ib_complete: a completion the device "never delivered". */
static bool mrpool_ib_swallow(void)
{
	if (atomic_read(&mrpool_ib_fail_complete) <= 0)
		return false;
	if (atomic_dec_if_positive(&mrpool_ib_fail_complete_after) >= 0)
		return false;
	return mrpool_should_fail(&mrpool_ib_fail_complete);
}

/*
 * debugfs fail_ib_wc: the next N completions of work requests (not drain
 * markers), after fail_ib_wc_after delivered ones, report an error,
 * as a device that failed them would: nothing is left in flight.
 */
static bool mrpool_ib_bad_wc(void)
{
	if (atomic_read(&mrpool_ib_fail_wc) <= 0)
		return false;
	if (atomic_dec_if_positive(&mrpool_ib_fail_wc_after) >= 0)
		return false;
	return mrpool_should_fail(&mrpool_ib_fail_wc);
}

static void mrpool_ib_wr_done(struct ib_cq *cq, struct ib_wc *wc)
{
	struct mrpool_ib_loop *l = container_of(wc->wr_cqe,
						struct mrpool_ib_loop, cqe);

	if (mrpool_ib_swallow())
		return;
	l->wc_status = wc->status;
	if (l->wc_status == IB_WC_SUCCESS && mrpool_ib_bad_wc())
		l->wc_status = IB_WC_GENERAL_ERR;
	complete(&l->done);
}

static void mrpool_ib_drain_done(struct ib_cq *cq, struct ib_wc *wc)
{
	struct mrpool_ib_loop *l = container_of(wc->wr_cqe,
						struct mrpool_ib_loop,
						drain_cqe);

	if (mrpool_ib_swallow())
		return;
	complete(&l->drained);
}

/* Wait for a completion, bounded; counted while it lasts (debugfs). */
static bool mrpool_ib_wait(struct completion *x)
{
	unsigned int ms = max(READ_ONCE(mrpool_ib_wr_timeout_ms), 1U);
	unsigned long left;

	atomic_inc(&mrpool_ib_stats.wr_waits);
	left = wait_for_completion_timeout(x, msecs_to_jiffies(ms));
	atomic_dec(&mrpool_ib_stats.wr_waits);
	return left;
}

/*
 * After a timeout: move the QP to the error state and post a marker behind
 * the late work request. The send queue completes in order, so the
 * marker's flushed completion means nothing before it is still in flight
 * (as ib_drain_sq() does, but with a bounded wait).
 *
 * Return: true when drained.
 */
static bool mrpool_ib_drain(struct mrpool_ib_loop *l)
{
	struct ib_qp_attr attr = { .qp_state = IB_QPS_ERR };
	struct ib_rdma_wr marker = {
		.wr.opcode = IB_WR_RDMA_WRITE,
		.wr.wr_cqe = &l->drain_cqe,
		.wr.send_flags = IB_SEND_SIGNALED,
	};

	if (ib_modify_qp(l->qp[0], &attr, IB_QP_STATE))
		return false;
	reinit_completion(&l->drained);
	if (ib_post_send(l->qp[0], &marker.wr, NULL))
		return false;
	if (!mrpool_ib_wait(&l->drained))
		return false;
	atomic64_inc(&l->dev->qp_drains);
	return true;
}

/*
 * Post one signalled WR about @m on loop @l and wait for its completion.
 * Any failure marks the device failed and the loop broken. A timeout
 * drains the QP first; if the drain fails too, @m (if any) is marked stuck:
 * the WR may still run, so neither the MR nor its pages may be released. A
 * failure that left nothing in flight queues the device's recovery.
 */
static int mrpool_ib_post(struct mrpool_ib_dev *d, struct mrpool_ib_loop *l,
			  struct ib_send_wr *wr, struct mrpool_ib_mr *m)
{
	int ret;

	lockdep_assert_held(&d->lock);
	if (l->broken)
		return -EIO;
	wr->wr_cqe = &l->cqe;
	wr->send_flags = IB_SEND_SIGNALED;
	reinit_completion(&l->done);
	ret = ib_post_send(l->qp[0], wr, NULL);
	if (ret) {
		l->broken = true;
		mrpool_ib_set_state(d, MRPOOL_IB_FAILED,
				    "posting a work request failed: %d", ret);
		mrpool_ib_recover_queue(d);
		return ret;
	}
	if (!mrpool_ib_wait(&l->done)) {
		atomic64_inc(&d->wr_timeouts);
		l->broken = true;
		if (mrpool_ib_drain(l)) {
			mrpool_ib_set_state(d, MRPOOL_IB_FAILED,
					    "work request timed out, QP drained");
			mrpool_ib_recover_queue(d);
		} else {
			/* A probe's MR (no @m) has no pages to protect. */
			if (m)
				m->stuck = true;
			mrpool_ib_set_state(d, MRPOOL_IB_FAILED,
					    "work request timed out, QP not drained");
		}
		return -ETIMEDOUT;
	}
	if (l->wc_status != IB_WC_SUCCESS) {
		/* The QP is in error; nothing else was in flight. */
		l->broken = true;
		mrpool_ib_set_state(d, MRPOOL_IB_FAILED,
				    "work request failed: %s",
				    ib_wc_status_msg(l->wc_status));
		mrpool_ib_recover_queue(d);
		return -EIO;
	}
	return 0;
}

static int mrpool_ib_post_reg(struct mrpool_ib_dev *d, struct mrpool_ib_loop *l,
			      struct mrpool_ib_mr *m, int access)
{
	struct ib_reg_wr wr = {
		.wr.opcode = IB_WR_REG_MR,
		.mr = m->mr,
		.key = m->mr->rkey,
		.access = access,
	};
	int ret;

	ret = mrpool_ib_post(d, l, &wr.wr, m);
	if (ret)
		return ret;
	m->access = access;
	m->lkey = m->mr->lkey;
	m->rkey = m->mr->rkey;
	m->iova = m->mr->iova;
	WRITE_ONCE(m->valid, true);
	atomic64_inc(&d->regs);
	return 0;
}

static int mrpool_ib_post_inv(struct mrpool_ib_dev *d, struct mrpool_ib_loop *l,
			      struct mrpool_ib_mr *m)
{
	struct ib_send_wr wr = {
		.opcode = IB_WR_LOCAL_INV,
		.ex.invalidate_rkey = m->mr->rkey,
	};
	int ret;

	ret = mrpool_ib_post(d, l, &wr, m);
	if (ret)
		return ret;
	WRITE_ONCE(m->valid, false);
	atomic64_inc(&d->invalidations);
	return 0;
}

/*
 * The largest page size the device supports that every DMA segment
 * boundary is aligned to, at most the chunk size: the chunk size for a
 * contiguous chunk, PAGE_SIZE at worst. 0 if the device takes none.
 */
static unsigned long mrpool_ib_page_size(struct mrpool_ib_dev *d,
					 struct sg_table *sgt)
{
	u64 cap = d->ibdev->attrs.page_size_cap;
	struct scatterlist *sg;
	u64 mask = 0;
	unsigned int i;

	for_each_sgtable_dma_sg(sgt, sg, i) {
		mask |= sg_dma_address(sg);
		if (i + 1 < sgt->nents)
			mask |= sg_dma_address(sg) + sg_dma_len(sg);
	}
	cap &= GENMASK_ULL(ilog2(mrpool_pool.chunk_size), PAGE_SHIFT);
	if (mask)
		cap &= GENMASK_ULL(__ffs64(mask), 0);
	return cap ? BIT_ULL(fls64(cap) - 1) : 0;
}

/*
 * A cache MR carries no data, while the chunk under it may be a process's
 * slice, live: syncing for it would invalidate (non-coherent caches) or
 * copy a stale bounce snapshot over (swiotlb) the process's bytes. Lent
 * buffers are the borrower's alone and get the usual syncs.
 */
static unsigned long mrpool_ib_dma_attrs(const struct mrpool_ib_mr *m)
{
	return m->lent ? 0 : DMA_ATTR_SKIP_CPU_SYNC;
}

static void mrpool_ib_mr_unmap(struct mrpool_ib_dev *d, struct mrpool_ib_mr *m)
{
	if (m->mapped) {
		ib_dma_unmap_sg_attrs(d->ibdev, m->sgt.sgl, m->sgt.orig_nents,
				      DMA_BIDIRECTIONAL,
				      mrpool_ib_dma_attrs(m));
		atomic_dec(&mrpool_ib_stats.dma_maps);
		m->mapped = false;
	}
	sg_free_table(&m->sgt);
}

/*
 * Deregister, unmap and free @m, which no work request can still use (a
 * cache entry is freed after a grace period: chunk_keys reads them under
 * RCU). A stuck entry, or one ib_dereg_mr() refuses, goes on d->stuck
 * instead, mapped, until the device's QPs are destroyed.
 *
 * Return: true when released: no MR reaches the chunk through @m any more.
 */
static bool mrpool_ib_mr_release(struct mrpool_ib_dev *d,
				 struct mrpool_ib_mr *m)
{
	int ret;

	lockdep_assert_held(&d->lock);
	if (m->mr && !m->stuck) {
		if (mrpool_should_fail(&mrpool_ib_fail_dereg))
			ret = -EBUSY;
		else
			ret = ib_dereg_mr(m->mr);
		if (ret) {
			atomic64_inc(&d->dereg_failures);
			pr_warn_ratelimited("%s: MR %#x not deregistered: %d\n",
					    d->name, m->mr->lkey, ret);
			m->stuck = true;
		} else {
			m->mr = NULL;
			atomic_dec(&mrpool_ib_stats.mrs);
		}
	}
	if (m->stuck) {
		list_add_tail(&m->link, &d->stuck);
		atomic_inc(&mrpool_ib_stats.stuck_mrs);
		return false;
	}
	mrpool_ib_mr_unmap(d, m);
	kfree_rcu(m, rcu);
	return true;
}

/* Map the MR over the registered pages; needed before each IB_WR_REG_MR. */
static int mrpool_ib_map(struct mrpool_ib_mr *m)
{
	int n;

	n = ib_map_mr_sg(m->mr, m->sgt.sgl, m->sgt.nents, NULL, m->page_size);
	if (n < 0)
		return n;
	return n == m->sgt.nents ? 0 : -EINVAL;
}

/* Register the first m->len bytes of @c in @l's PD with @access. */
static int mrpool_ib_mr_build(struct mrpool_ib_dev *d, struct mrpool_ib_loop *l,
			      struct mrpool_chunk *c, struct mrpool_ib_mr *m,
			      int access)
{
	struct ib_device *ibdev = d->ibdev;
	unsigned long npages;
	int nents, ret;

	ret = sg_alloc_table_from_pages_segment(&m->sgt, c->pages,
						m->len >> PAGE_SHIFT, 0, m->len,
						ib_dma_max_seg_size(ibdev),
						GFP_KERNEL);
	if (ret)
		return ret;
	nents = ib_dma_map_sg_attrs(ibdev, m->sgt.sgl, m->sgt.orig_nents,
				    DMA_BIDIRECTIONAL, mrpool_ib_dma_attrs(m));
	if (!nents)
		return -EIO;
	m->sgt.nents = nents;
	m->mapped = true;
	atomic_inc(&mrpool_ib_stats.dma_maps);

	m->page_size = mrpool_ib_page_size(d, &m->sgt);
	if (!m->page_size)
		return -EOPNOTSUPP;
	npages = DIV_ROUND_UP(m->len, m->page_size);
	if (npages > ibdev->attrs.max_fast_reg_page_list_len)
		return -E2BIG;

	m->mr = mrpool_fail_alloc(npages * sizeof(u64)) ? ERR_PTR(-ENOMEM) :
		ib_alloc_mr(l->pd, IB_MR_TYPE_MEM_REG, npages);
	if (IS_ERR(m->mr)) {
		ret = PTR_ERR(m->mr);
		m->mr = NULL;
		return ret;
	}
	atomic_inc(&mrpool_ib_stats.mrs);
	m->loop = l;
	ret = mrpool_ib_map(m);
	if (ret)
		return ret;
	/*
	 * A lend's key: the MR is new (its index is the device's choice,
	 * sequential on rxe and mlx5) and its key byte random, so a peer
	 * that saw other keys cannot compute the next one: it has one guess
	 * in 256 per index, each failed one costing it its connection.
	 */
	if (m->lent)
		ib_update_fast_reg_key(m->mr, get_random_u8());
	return mrpool_ib_post_reg(d, l, m, access);
}

static struct mrpool_ib_mr *mrpool_ib_mr_new(struct mrpool_ib_dev *d,
					     struct mrpool_chunk *c,
					     size_t len, bool lent)
{
	struct mrpool_ib_mr *m;

	m = kzalloc_node(sizeof(*m), GFP_KERNEL, d->node);
	if (!m)
		return NULL;
	m->chunk = c;
	m->len = len;
	m->lent = lent;
	INIT_LIST_HEAD(&m->link);
	return m;
}

/**
 * mrpool_ib_reg_chunk - register a chunk on a device (the cache entry)
 * @d: a device, its lock held
 * @c: the chunk, in the registry or otherwise kept alive by the caller
 *
 * Idempotent: an existing entry is kept as is.
 *
 * Return: 0 or a negative errno (counted in reg_failures). A failed
 * registration whose MR may still be live stays on d->stuck, where
 * mrpool_ib_chunk_stuck() finds it.
 */
int mrpool_ib_reg_chunk(struct mrpool_ib_dev *d, struct mrpool_chunk *c)
{
	struct mrpool_ib_loop *l = &d->loop[MRPOOL_IB_CACHE];
	unsigned long key = mrpool_ib_chunk_key(c);
	struct mrpool_ib_mr *m;
	int ret;

	lockdep_assert_held(&d->lock);
	if (xa_load(&d->mrs, key))
		return 0;
	if (!mrpool_ib_dev_usable(d))
		return -ENODEV;
	if (mrpool_should_fail(&mrpool_ib_fail_reg)) {
		ret = -EIO;
		goto count;
	}
	m = mrpool_ib_mr_new(d, c, mrpool_pool.chunk_size, false);
	if (!m) {
		ret = -ENOMEM;
		goto count;
	}
	ret = mrpool_ib_mr_build(d, l, c, m, MRPOOL_IB_ACCESS_LOCAL);
	if (ret)
		goto release;
	ret = xa_insert(&d->mrs, key, m, GFP_KERNEL);
	if (ret)
		goto invalidate;
	atomic_inc(&d->nr_mrs);
	return 0;

invalidate:
	mrpool_ib_post_inv(d, l, m);
release:
	mrpool_ib_mr_release(d, m);
count:
	atomic64_inc(&d->reg_failures);
	pr_warn_ratelimited("%s: chunk %p not registered: %d\n", d->name, c,
			    ret);
	return ret;
}

/**
 * mrpool_ib_unreg - invalidate, deregister and unmap one cache entry
 * @d: its device, lock held, still holding its ib_device
 * @m: the entry, already erased from d->mrs
 *
 * Return: true when the MR is gone; false when it may still be live (then
 * kept on d->stuck and the chunk's pages must never be reused).
 */
bool mrpool_ib_unreg(struct mrpool_ib_dev *d, struct mrpool_ib_mr *m)
{
	struct mrpool_ib_loop *l = &d->loop[MRPOOL_IB_CACHE];

	lockdep_assert_held(&d->lock);
	if (m->valid && !l->broken)
		mrpool_ib_post_inv(d, l, m);
	atomic_dec(&d->nr_mrs);
	return mrpool_ib_mr_release(d, m);
}

/**
 * mrpool_ib_chunk_stuck - does a stuck MR of @d reach the chunk @key?
 * @d: the device, lock held
 * @key: mrpool_ib_chunk_key() of the chunk
 *
 * Return: true when one does: the chunk's pages must never be reused.
 */
bool mrpool_ib_chunk_stuck(struct mrpool_ib_dev *d, unsigned long key)
{
	struct mrpool_ib_mr *m;

	lockdep_assert_held(&d->lock);
	list_for_each_entry(m, &d->stuck, link)
		if (mrpool_ib_chunk_key(m->chunk) == key)
			return true;
	return false;
}

/**
 * mrpool_ib_lend - register @len bytes of a chunk for a kernel buffer
 * @d: a READY device, lock held
 * @l: the loop whose PD gets the MR: the device's lend loop or a session's
 *	(which the caller counts the lend in)
 * @c: the chunk, owned by the caller
 * @len: bytes lent; the MR covers them rounded up to pages, nothing more
 * @access: IB_ACCESS_* of the registration
 * @out: receives the lend
 * @chunk_safe: false when a failed registration may leave an MR over @c
 *
 * A fresh MR in @l's PD each time, with a random key byte.
 *
 * Return: 0 or a negative errno.
 */
int mrpool_ib_lend(struct mrpool_ib_dev *d, struct mrpool_ib_loop *l,
		   struct mrpool_chunk *c, size_t len, int access,
		   struct mrpool_ib_mr **out, bool *chunk_safe)
{
	struct mrpool_ib_mr *m;
	int ret;

	lockdep_assert_held(&d->lock);
	*chunk_safe = true;
	if (d->state != MRPOOL_IB_READY)
		return -ENODEV;
	m = mrpool_ib_mr_new(d, c, PAGE_ALIGN(len), true);
	if (!m)
		return -ENOMEM;
	ret = mrpool_ib_mr_build(d, l, c, m, access);
	if (ret) {
		*chunk_safe = mrpool_ib_mr_release(d, m);
		return ret;
	}
	list_add_tail(&m->link, &d->lends);
	atomic_inc(&mrpool_ib_stats.lends);
	*out = m;
	return 0;
}

/**
 * mrpool_ib_unlend - invalidate and deregister a kernel buffer's MR
 * @d: its device, lock held (possibly removed since)
 * @m: from mrpool_ib_lend(); freed here or handed to d->stuck
 *
 * Return: true when no MR reaches the chunk any more: it may be reused.
 */
bool mrpool_ib_unlend(struct mrpool_ib_dev *d, struct mrpool_ib_mr *m)
{
	struct mrpool_ib_loop *l = m->loop;
	bool safe;

	lockdep_assert_held(&d->lock);
	atomic_dec(&mrpool_ib_stats.lends);
	if (m->released) {
		/* The device went first and deregistered it (or leaked it). */
		safe = !m->stuck;
		kfree(m);
		return safe;
	}
	list_del_init(&m->link);
	if (m->valid && !l->broken)
		mrpool_ib_post_inv(d, l, m);
	return mrpool_ib_mr_release(d, m);
}

/* A GID of @port to address our own QP with: RoCE v2 if there is one. */
static const struct ib_gid_attr *mrpool_ib_pick_gid(struct ib_device *ibdev,
						    u32 port, int tbl_len)
{
	const struct ib_gid_attr *attr, *best = NULL;
	int i;

	for (i = 0; i < tbl_len; i++) {
		attr = rdma_get_gid_attr(ibdev, port, i);
		if (IS_ERR(attr))
			continue;
		if (attr->gid_type == IB_GID_TYPE_ROCE_UDP_ENCAP) {
			if (best)
				rdma_put_gid_attr(best);
			return attr;
		}
		if (best)
			rdma_put_gid_attr(attr);
		else
			best = attr;
	}
	return best ? best : ERR_PTR(-ENOENT);
}

/**
 * mrpool_ib_self_ah - the address of a port itself, for a loop's QPs
 * @ibdev: a device the caller keeps registered
 * @port: its port the loops use
 * @ah: receives the address
 *
 * Loopback needs no network, only a route. Called without any device's
 * lock: ib_query_port() may take rtnl_mutex (rxe's does, for the link
 * speed), whose holders allocate with GFP_KERNEL, and a d->lock held
 * around it would make reclaim-path borrowers wait for them.
 *
 * Return: 0 or a negative errno.
 */
int mrpool_ib_self_ah(struct ib_device *ibdev, u32 port,
		      struct rdma_ah_attr *ah)
{
	const struct ib_gid_attr *gid;
	struct ib_port_attr pattr;
	union ib_gid dgid;
	u16 vlan;
	int ret;

	ret = ib_query_port(ibdev, port, &pattr);
	if (ret)
		return ret;
	memset(ah, 0, sizeof(*ah));
	ah->type = rdma_ah_find_type(ibdev, port);
	rdma_ah_set_port_num(ah, port);
	if (!rdma_protocol_roce(ibdev, port)) {
		rdma_ah_set_dlid(ah, pattr.lid);
		return 0;
	}
	gid = mrpool_ib_pick_gid(ibdev, port, pattr.gid_tbl_len);
	if (IS_ERR(gid))
		return PTR_ERR(gid);
	dgid = gid->gid;
	rdma_ah_set_grh(ah, &dgid, 0, gid->index, 1, 0);
	ret = rdma_read_gid_l2_fields(gid, &vlan, ah->roce.dmac);
	rdma_put_gid_attr(gid);
	return ret;
}

static int mrpool_ib_qp_rts(struct ib_qp *qp, u32 port, u32 dest_qpn,
			    const struct rdma_ah_attr *ah)
{
	struct ib_qp_attr a = {
		.qp_state = IB_QPS_INIT,
		.port_num = port,
	};
	int ret;

	ret = ib_modify_qp(qp, &a, IB_QP_STATE | IB_QP_PKEY_INDEX |
			   IB_QP_PORT | IB_QP_ACCESS_FLAGS);
	if (ret)
		return ret;

	memset(&a, 0, sizeof(a));
	a.qp_state = IB_QPS_RTR;
	a.path_mtu = IB_MTU_1024;
	a.dest_qp_num = dest_qpn;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 12;
	a.ah_attr = *ah;
	ret = ib_modify_qp(qp, &a, IB_QP_STATE | IB_QP_AV | IB_QP_PATH_MTU |
			   IB_QP_DEST_QPN | IB_QP_RQ_PSN |
			   IB_QP_MAX_DEST_RD_ATOMIC | IB_QP_MIN_RNR_TIMER);
	if (ret)
		return ret;

	memset(&a, 0, sizeof(a));
	a.qp_state = IB_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = 1;
	return ib_modify_qp(qp, &a, IB_QP_STATE | IB_QP_TIMEOUT |
			    IB_QP_RETRY_CNT | IB_QP_RNR_RETRY | IB_QP_SQ_PSN |
			    IB_QP_MAX_QP_RD_ATOMIC);
}

static int mrpool_ib_qps_create(struct mrpool_ib_dev *d,
				struct mrpool_ib_loop *l,
				const struct rdma_ah_attr *ah)
{
	struct ib_qp_init_attr init = {
		.send_cq = d->cq,
		.recv_cq = d->cq,
		.sq_sig_type = IB_SIGNAL_REQ_WR,
		.qp_type = IB_QPT_RC,
		.cap = {
			.max_send_wr = MRPOOL_IB_SQ_DEPTH,
			.max_recv_wr = 1,
			.max_send_sge = 1,
			.max_recv_sge = 1,
		},
	};
	int i, ret;

	for (i = 0; i < 2; i++) {
		l->qp[i] = ib_create_qp(l->pd, &init);
		if (IS_ERR(l->qp[i])) {
			ret = PTR_ERR(l->qp[i]);
			l->qp[i] = NULL;
			return ret;
		}
	}
	ret = mrpool_ib_qp_rts(l->qp[0], d->port, l->qp[1]->qp_num, ah);
	if (ret)
		return ret;
	return mrpool_ib_qp_rts(l->qp[1], d->port, l->qp[0]->qp_num, ah);
}

static void mrpool_ib_loop_qps_destroy(struct mrpool_ib_loop *l)
{
	int i;

	for (i = 0; i < 2; i++) {
		if (l->qp[i])
			ib_destroy_qp(l->qp[i]);
		l->qp[i] = NULL;
	}
	l->broken = true;
	/* No work request can use the probe's MR any more. */
	if (l->probe && !ib_dereg_mr(l->probe))
		l->probe = NULL;
}

/**
 * mrpool_ib_loop_probe - prove a rebuilt loop with one work request
 * @d: the device, lock held
 * @l: one of its own loops, not broken
 *
 * A LOCAL_INV of the loop's probe MR: allocated in the loop's PD, one page
 * long and never registered, so that it has no pages a late work request
 * could write. Invalidating an STag that is invalid already is allowed by
 * the verbs (siw says as much; rxe and mlx5 complete it), so the work
 * request succeeds on a working QP. Its failure is any work request's
 * (mrpool_ib_post(): the loop broken, the device FAILED).
 *
 * Return: 0 when it completed successfully, else a negative errno.
 */
int mrpool_ib_loop_probe(struct mrpool_ib_dev *d, struct mrpool_ib_loop *l)
{
	struct ib_send_wr wr = { .opcode = IB_WR_LOCAL_INV };
	struct ib_mr *mr;

	lockdep_assert_held(&d->lock);
	if (!l->probe) {
		mr = ib_alloc_mr(l->pd, IB_MR_TYPE_MEM_REG, 1);
		if (IS_ERR(mr))
			return PTR_ERR(mr);
		l->probe = mr;
	}
	wr.ex.invalidate_rkey = l->probe->rkey;
	return mrpool_ib_post(d, l, &wr, NULL);
}

/* After this no work request of ours runs on the device any more. */
static void mrpool_ib_qps_destroy(struct mrpool_ib_dev *d)
{
	struct mrpool_ib_loop *l;
	int i;

	for (i = 0; i < MRPOOL_IB_NR_LOOPS; i++)
		mrpool_ib_loop_qps_destroy(&d->loop[i]);
	list_for_each_entry(l, &d->sessions, link)
		mrpool_ib_loop_qps_destroy(l);
}

/*
 * A loop's QPs are gone: its PD goes too, if it is ours and not leaked
 * (nor its probe MR, whose deregistration failed).
 */
static void mrpool_ib_loop_pd_put(struct mrpool_ib_dev *d,
				  struct mrpool_ib_loop *l)
{
	if (l->pd && l->own_pd && !d->pd_leaked && !l->probe) {
		ib_dealloc_pd(l->pd);
		atomic_dec(&mrpool_ib_stats.pds);
	}
	l->pd = NULL;
}

static void mrpool_ib_session_free(struct mrpool_ib_loop *l)
{
	kfree(l);
	atomic_dec(&mrpool_ib_stats.sessions);
}

/*
 * Release what setup built; safe on a partly built device. Sessions' loops
 * lose their QPs and PDs; those with users left stay allocated (off the
 * list) for their last mrpool_ib_loop_put().
 */
static void mrpool_ib_dev_release(struct mrpool_ib_dev *d)
{
	struct mrpool_ib_loop *l, *tmp;
	int i;

	mrpool_ib_qps_destroy(d);
	if (d->cq)
		ib_free_cq(d->cq);
	d->cq = NULL;
	for (i = 0; i < MRPOOL_IB_NR_LOOPS; i++)
		mrpool_ib_loop_pd_put(d, &d->loop[i]);
	list_for_each_entry_safe(l, tmp, &d->sessions, link) {
		mrpool_ib_loop_pd_put(d, l);
		list_del_init(&l->link);
		if (!l->users)
			mrpool_ib_session_free(l);
	}
}

/*
 * Give @l a PD (@pd, or one of ours when NULL) and a QP pair on the
 * device's CQ, connected to each other at @ah. On failure *@what names the
 * step; the caller releases what was built.
 */
static int mrpool_ib_loop_setup(struct mrpool_ib_dev *d,
				struct mrpool_ib_loop *l, struct ib_pd *pd,
				const struct rdma_ah_attr *ah, const char **what)
{
	l->dev = d;
	l->cqe.done = mrpool_ib_wr_done;
	l->drain_cqe.done = mrpool_ib_drain_done;
	init_completion(&l->done);
	init_completion(&l->drained);
	INIT_LIST_HEAD(&l->link);
	if (pd) {
		l->pd = pd;
	} else {
		l->pd = ib_alloc_pd(d->ibdev, 0);
		if (IS_ERR(l->pd)) {
			int ret = PTR_ERR(l->pd);

			l->pd = NULL;
			return ret;
		}
		l->own_pd = true;
		atomic_inc(&mrpool_ib_stats.pds);
	}
	*what = "loopback QPs";
	return mrpool_ib_qps_create(d, l, ah);
}

/**
 * mrpool_ib_loop_add - a loop for a kernel buffer session
 * @d: a device, lock held
 * @pd: the borrower's PD on @d, or NULL for one of mrpool's own
 * @ah: mrpool_ib_self_ah() of the device's port, found before the lock
 *
 * The loop has one user, the session; each lend made in it takes another
 * (the caller counts it), and mrpool_ib_loop_put() drops one.
 *
 * Return: the loop, or ERR_PTR(-ENODEV) unless @d is READY, -ENOMEM, or
 * the error of building its PD or QPs.
 */
struct mrpool_ib_loop *mrpool_ib_loop_add(struct mrpool_ib_dev *d,
					  struct ib_pd *pd,
					  const struct rdma_ah_attr *ah)
{
	struct mrpool_ib_loop *l;
	const char *what = "PD";
	int ret;

	lockdep_assert_held(&d->lock);
	if (d->state != MRPOOL_IB_READY)
		return ERR_PTR(-ENODEV);
	l = kzalloc_node(sizeof(*l), GFP_KERNEL, d->node);
	if (!l)
		return ERR_PTR(-ENOMEM);
	atomic_inc(&mrpool_ib_stats.sessions);
	ret = mrpool_ib_loop_setup(d, l, pd, ah, &what);
	if (ret) {
		pr_warn_ratelimited("%s: no kernel buffer session: %s: %d\n",
				    d->name, what, ret);
		mrpool_ib_loop_qps_destroy(l);
		mrpool_ib_loop_pd_put(d, l);
		mrpool_ib_session_free(l);
		return ERR_PTR(ret);
	}
	l->users = 1;
	list_add_tail(&l->link, &d->sessions);
	return l;
}

/* Does an MR on d->stuck live in @l's PD? Its QP and PD must then stay. */
static bool mrpool_ib_loop_stuck(struct mrpool_ib_dev *d,
				 struct mrpool_ib_loop *l)
{
	struct mrpool_ib_mr *m;

	list_for_each_entry(m, &d->stuck, link)
		if (m->loop == l)
			return true;
	return false;
}

/**
 * mrpool_ib_loop_put - drop one user of a session's loop
 * @d: its device, lock held (possibly removed since)
 * @l: from mrpool_ib_loop_add()
 *
 * The last user destroys its QPs and (if mrpool's) its PD and frees it;
 * unless an MR of its PD is stuck: the loop then stays on d->sessions,
 * unused, until the device's teardown.
 */
void mrpool_ib_loop_put(struct mrpool_ib_dev *d, struct mrpool_ib_loop *l)
{
	lockdep_assert_held(&d->lock);
	if (WARN_ON_ONCE(!l->users) || --l->users)
		return;
	if (!list_empty(&l->link) && mrpool_ib_loop_stuck(d, l))
		return;
	list_del_init(&l->link);
	mrpool_ib_loop_qps_destroy(l);
	mrpool_ib_loop_pd_put(d, l);
	mrpool_ib_session_free(l);
}

/**
 * mrpool_ib_dev_usable - may the cache register chunks on @d now?
 * @d: the device, lock held
 *
 * Return: true when READY, or while a recovery attempt that rebuilt the
 * cache loop registers what the device is missing (still FAILED then).
 */
bool mrpool_ib_dev_usable(const struct mrpool_ib_dev *d)
{
	lockdep_assert_held(&d->lock);
	if (d->state == MRPOOL_IB_READY)
		return true;
	return d->recovering && d->state == MRPOOL_IB_FAILED &&
		!d->loop[MRPOOL_IB_CACHE].broken;
}

/**
 * mrpool_ib_dev_stuck - may a lost work request still use an MR of @d's
 *	own loops?
 * @d: the device, lock held
 *
 * Such an MR is on d->stuck until the teardown; while it is, the loops'
 * QPs must stay as they are and the device is not recovered.
 *
 * Return: true when an MR of the cache or the lend PD is stuck.
 */
bool mrpool_ib_dev_stuck(struct mrpool_ib_dev *d)
{
	int i;

	lockdep_assert_held(&d->lock);
	for (i = 0; i < MRPOOL_IB_NR_LOOPS; i++)
		if (mrpool_ib_loop_stuck(d, &d->loop[i]))
			return true;
	return false;
}

/**
 * mrpool_ib_dev_rebuild - new QPs for the device's broken loops
 * @d: a FAILED device with no stuck MR of its loops, lock held
 * @ah: mrpool_ib_self_ah() of its port, found before the lock
 *
 * Each broken loop of the device (cache, lend) loses its QP pair, drained
 * or never posted to, and gets a new one in the same PD, on the same CQ:
 * the MRs of the PD (cached chunks, lends still out) stay valid, and so
 * do the borrowers' QPs in the lend PD. Sessions' loops are left broken.
 *
 * Return: 0 when no loop of the device is broken any more, else the error
 * of the first that could not be rebuilt (left broken, without QPs).
 */
int mrpool_ib_dev_rebuild(struct mrpool_ib_dev *d,
			  const struct rdma_ah_attr *ah)
{
	struct mrpool_ib_loop *l;
	int i, ret;

	lockdep_assert_held(&d->lock);
	if (WARN_ON_ONCE(mrpool_ib_dev_stuck(d)))
		return -EBUSY;
	for (i = 0; i < MRPOOL_IB_NR_LOOPS; i++) {
		l = &d->loop[i];
		if (!l->broken)
			continue;
		mrpool_ib_loop_qps_destroy(l);
		ret = mrpool_ib_qps_create(d, l, ah);
		if (ret) {
			mrpool_ib_loop_qps_destroy(l);
			return ret;
		}
		l->broken = false;
	}
	return 0;
}

/**
 * mrpool_ib_dev_setup - check a new device and build its CQ, PDs and QPs
 * @d: the device, not yet listed: no one else can see it, and its lock is
 *	not held (mrpool_ib_self_ah() must not be called under it)
 *
 * Sets d->state and, unless READY, d->reason.
 *
 * Return: 0 when READY, else a negative errno (the device stays listed).
 */
int mrpool_ib_dev_setup(struct mrpool_ib_dev *d)
{
	static const char *const pd_what[] = { "cache PD", "lend PD" };
	struct ib_device *ibdev = d->ibdev;
	struct rdma_ah_attr ah;
	const char *what;
	int i, ret;

	d->port = rdma_start_port(ibdev);
	if (!(ibdev->attrs.device_cap_flags & IB_DEVICE_MEM_MGT_EXTENSIONS) ||
	    !ibdev->attrs.max_fast_reg_page_list_len) {
		mrpool_ib_set_state(d, MRPOOL_IB_UNSUPPORTED,
				    "no memory management extensions (fast registration)");
		return -EOPNOTSUPP;
	}
	if (!rdma_protocol_ib(ibdev, d->port) &&
	    !rdma_protocol_roce(ibdev, d->port)) {
		mrpool_ib_set_state(d, MRPOOL_IB_UNSUPPORTED,
				    "port %u is neither InfiniBand nor RoCE",
				    d->port);
		return -EOPNOTSUPP;
	}
	/*
	 * Every chunk is mapped for the cache: through swiotlb each would
	 * hold a chunk of bounce buffer, and the pool would soon exhaust it.
	 */
	if (!ib_uses_virt_dma(ibdev) &&
	    (is_swiotlb_force_bounce(ibdev->dma_device) ||
	     dma_addressing_limited(ibdev->dma_device))) {
		mrpool_ib_set_state(d, MRPOOL_IB_UNSUPPORTED,
				    "its DMA bounces (swiotlb or a limited DMA mask)");
		return -EOPNOTSUPP;
	}
	if (mrpool_should_fail(&mrpool_ib_fail_setup)) {
		mrpool_ib_set_state(d, MRPOOL_IB_FAILED,
				    "setup failed: injected");
		return -EIO;
	}

	/*
	 * Polled from a workqueue, not softirq: a waiter woken by our
	 * completion handler may free the CQ (device removal, unload) at
	 * once. ib_free_cq() waits for a running work item to return, but
	 * for IB_POLL_SOFTIRQ only until irq_poll_complete(), after which
	 * ib_poll_handler() still re-arms the freed CQ (an oops on 6.12
	 * with the vCPUs of a loaded host starved).
	 */
	what = "CQ";
	d->cq = ib_alloc_cq(ibdev, d, MRPOOL_IB_CQ_DEPTH, 0, IB_POLL_WORKQUEUE);
	if (IS_ERR(d->cq)) {
		ret = PTR_ERR(d->cq);
		d->cq = NULL;
		goto fail;
	}
	what = "loopback address";
	ret = mrpool_ib_self_ah(ibdev, d->port, &ah);
	if (ret)
		goto fail;
	for (i = 0; i < MRPOOL_IB_NR_LOOPS; i++) {
		what = pd_what[i];
		ret = mrpool_ib_loop_setup(d, &d->loop[i], NULL, &ah, &what);
		if (ret)
			goto fail;
	}
	mrpool_ib_set_state(d, MRPOOL_IB_READY, "%s", "");
	return 0;

fail:
	mrpool_ib_dev_release(d);
	mrpool_ib_set_state(d, MRPOOL_IB_FAILED, "setup failed: %s: %d", what,
			    ret);
	return ret;
}

/*
 * Last chance for an MR once no QP of ours exists: deregister and unmap.
 * If the device still refuses, the MR, its mapping and the PD are leaked.
 */
static bool mrpool_ib_mr_final(struct mrpool_ib_dev *d, struct mrpool_ib_mr *m)
{
	int ret;

	if (m->mr) {
		if (mrpool_should_fail(&mrpool_ib_fail_dereg_final))
			ret = -EBUSY;
		else
			ret = ib_dereg_mr(m->mr);
		if (ret) {
			atomic64_inc(&d->dereg_failures);
			pr_warn("%s: MR %#x cannot be deregistered (%d): leaking it and its PD\n",
				d->name, m->mr->lkey, ret);
			d->pd_leaked = true;
			m->stuck = true;
			/* Forgotten by the device, remembered for the pool. */
			mrpool_ib_chunk_leaked(m->chunk);
			/*
			 * A stuck @m is dropped on purpose, mapped, with its
			 * MR: the device may still reach the pages. Nothing
			 * points at it then; kmemleak is told, and still
			 * scans it, so its scatterlist and MR count as
			 * referenced (a lend's kbuf frees its own as before).
			 */
			kmemleak_not_leak(m);
			return false;
		}
		m->mr = NULL;
		atomic_dec(&mrpool_ib_stats.mrs);
	}
	m->stuck = false;
	mrpool_ib_mr_unmap(d, m);
	return true;
}

/**
 * mrpool_ib_dev_teardown - drop every MR and the device's objects
 * @d: the device, lock held, still listed
 *
 * Leaves d as a REMOVED husk without its ib_device. Lends still out are
 * deregistered and marked released for mrpool_ib_unlend(); sessions still
 * open lose their loop's QPs and PD (a borrower's PD is left to it).
 */
void mrpool_ib_dev_teardown(struct mrpool_ib_dev *d)
{
	struct mrpool_ib_mr *m, *tmp;
	unsigned long key;

	lockdep_assert_held(&d->lock);
	xa_for_each(&d->mrs, key, m) {
		xa_erase(&d->mrs, key);
		mrpool_ib_unreg(d, m);
		cond_resched();
	}
	/* From here on nothing of ours runs: stuck MRs may go too. */
	mrpool_ib_qps_destroy(d);
	list_for_each_entry_safe(m, tmp, &d->lends, link) {
		list_del_init(&m->link);
		mrpool_ib_mr_final(d, m);
		m->released = true;	/* the kbuf frees m */
	}
	list_for_each_entry_safe(m, tmp, &d->stuck, link) {
		list_del_init(&m->link);
		atomic_dec(&mrpool_ib_stats.stuck_mrs);
		/* A cache entry may still be read under RCU (chunk_keys). */
		if (mrpool_ib_mr_final(d, m))
			kfree_rcu(m, rcu);
	}
	mrpool_ib_dev_release(d);
	mrpool_ib_set_state(d, MRPOOL_IB_REMOVED, "%s", "device removed");
	WRITE_ONCE(d->ibdev, NULL);	/* read under mrpool_ib_lock alone */
}
