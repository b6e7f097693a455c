// SPDX-License-Identifier: GPL-2.0
/*
 * Fast registration for the kernel MR cache. Per device: a kernel PD, a CQ
 * and a loopback pair of RC QPs (rxe executes work requests, REG_MR and
 * LOCAL_INV included, only on a QP in RTS, and RTS needs a peer). Per chunk
 * per device: a DMA mapping and an IB_MR_TYPE_MEM_REG MR, registered with
 * IB_WR_REG_MR using the largest page size the device and the mapping
 * allow: the whole chunk when it is one contiguous block.
 *
 * Every work request is signalled and awaited with a timeout, one at a
 * time. A timeout or an error completion leaves the QP in the error state,
 * so the device is marked failed: its MRs are then only deregistered.
 * Everything here runs with mrpool_ib_lock held.
 */
#include "ib.h"

#include <linux/slab.h>
#include <linux/mm.h>
#include <linux/log2.h>
#include <rdma/ib_cache.h>

/* A local work request completes in microseconds; seconds mean it never will. */
#define MRPOOL_IB_WR_TIMEOUT	(5 * HZ)
#define MRPOOL_IB_SQ_DEPTH	4
#define MRPOOL_IB_CQ_DEPTH	(2 * MRPOOL_IB_SQ_DEPTH + 2)
/* Registrations of the cache are local; kbufs add remote access. */
#define MRPOOL_IB_ACCESS_LOCAL	IB_ACCESS_LOCAL_WRITE

static void mrpool_ib_wr_done(struct ib_cq *cq, struct ib_wc *wc)
{
	struct mrpool_ib_dev *d = container_of(wc->wr_cqe, struct mrpool_ib_dev,
					       cqe);

	d->wc_status = wc->status;
	complete(&d->done);
}

/* Post one signalled WR on the internal QP and wait for its completion. */
static int mrpool_ib_post(struct mrpool_ib_dev *d, struct ib_send_wr *wr)
{
	int ret;

	if (d->qp_broken)
		return -EIO;
	wr->wr_cqe = &d->cqe;
	wr->send_flags = IB_SEND_SIGNALED;
	reinit_completion(&d->done);
	ret = ib_post_send(d->qp[0], wr, NULL);
	if (ret) {
		d->qp_broken = true;
		mrpool_ib_set_state(d, MRPOOL_IB_FAILED,
				    "posting a work request failed: %d", ret);
		return ret;
	}
	if (!wait_for_completion_timeout(&d->done, MRPOOL_IB_WR_TIMEOUT)) {
		/* d->cqe stays valid: d outlives the CQ. */
		d->qp_broken = true;
		atomic64_inc(&d->wr_timeouts);
		mrpool_ib_set_state(d, MRPOOL_IB_FAILED,
				    "work request timed out");
		return -ETIMEDOUT;
	}
	if (d->wc_status != IB_WC_SUCCESS) {
		d->qp_broken = true;
		mrpool_ib_set_state(d, MRPOOL_IB_FAILED,
				    "work request failed: %s",
				    ib_wc_status_msg(d->wc_status));
		return -EIO;
	}
	return 0;
}

static int mrpool_ib_post_reg(struct mrpool_ib_dev *d, struct mrpool_ib_mr *m,
			      int access)
{
	struct ib_reg_wr wr = {
		.wr.opcode = IB_WR_REG_MR,
		.mr = m->mr,
		.key = m->mr->rkey,
		.access = access,
	};
	int ret;

	ret = mrpool_ib_post(d, &wr.wr);
	if (ret)
		return ret;
	m->access = access;
	m->valid = true;
	atomic64_inc(&d->regs);
	return 0;
}

static int mrpool_ib_post_inv(struct mrpool_ib_dev *d, struct mrpool_ib_mr *m)
{
	struct ib_send_wr wr = {
		.opcode = IB_WR_LOCAL_INV,
		.ex.invalidate_rkey = m->mr->rkey,
	};
	int ret;

	ret = mrpool_ib_post(d, &wr);
	if (ret)
		return ret;
	m->valid = false;
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

static void mrpool_ib_mr_free(struct mrpool_ib_dev *d, struct mrpool_ib_mr *m)
{
	if (m->mr) {
		ib_dereg_mr(m->mr);
		atomic_dec(&mrpool_ib_stats.mrs);
	}
	if (m->mapped) {
		ib_dma_unmap_sg(d->ibdev, m->sgt.sgl, m->sgt.orig_nents,
				DMA_BIDIRECTIONAL);
		atomic_dec(&mrpool_ib_stats.dma_maps);
	}
	sg_free_table(&m->sgt);
	kfree(m);
}

/* Map the MR over the chunk again; needed before each IB_WR_REG_MR. */
static int mrpool_ib_map(struct mrpool_ib_mr *m)
{
	int n;

	n = ib_map_mr_sg(m->mr, m->sgt.sgl, m->sgt.nents, NULL, m->page_size);
	if (n < 0)
		return n;
	return n == m->sgt.nents ? 0 : -EINVAL;
}

static int mrpool_ib_mr_build(struct mrpool_ib_dev *d, struct mrpool_chunk *c,
			      struct mrpool_ib_mr *m)
{
	struct ib_device *ibdev = d->ibdev;
	unsigned long npages;
	int nents, ret;

	ret = sg_alloc_table_from_pages_segment(&m->sgt, c->pages,
						mrpool_pool.chunk_pages, 0,
						mrpool_pool.chunk_size,
						ib_dma_max_seg_size(ibdev),
						GFP_KERNEL);
	if (ret)
		return ret;
	nents = ib_dma_map_sg(ibdev, m->sgt.sgl, m->sgt.orig_nents,
			      DMA_BIDIRECTIONAL);
	if (!nents)
		return -EIO;
	m->sgt.nents = nents;
	m->mapped = true;
	atomic_inc(&mrpool_ib_stats.dma_maps);

	m->page_size = mrpool_ib_page_size(d, &m->sgt);
	if (!m->page_size)
		return -EOPNOTSUPP;
	npages = mrpool_pool.chunk_size / m->page_size;
	if (npages > ibdev->attrs.max_fast_reg_page_list_len)
		return -E2BIG;

	m->mr = ib_alloc_mr(d->pd, IB_MR_TYPE_MEM_REG, npages);
	if (IS_ERR(m->mr)) {
		ret = PTR_ERR(m->mr);
		m->mr = NULL;
		return ret;
	}
	atomic_inc(&mrpool_ib_stats.mrs);
	ret = mrpool_ib_map(m);
	if (ret)
		return ret;
	return mrpool_ib_post_reg(d, m, MRPOOL_IB_ACCESS_LOCAL);
}

/**
 * mrpool_ib_reg_chunk - register a chunk on a device (the cache entry)
 * @d: a READY device
 * @c: the chunk, kept alive by the caller
 * @out: receives the entry, may be NULL
 *
 * Idempotent: an existing entry is returned as is.
 *
 * Return: 0 or a negative errno (counted in reg_failures).
 */
int mrpool_ib_reg_chunk(struct mrpool_ib_dev *d, struct mrpool_chunk *c,
			struct mrpool_ib_mr **out)
{
	unsigned long key = mrpool_ib_chunk_key(c);
	struct mrpool_ib_mr *m;
	int ret;

	lockdep_assert_held(&mrpool_ib_lock);
	m = xa_load(&d->mrs, key);
	if (m)
		goto found;
	if (d->state != MRPOOL_IB_READY)
		return -ENODEV;
	if (mrpool_should_fail(&mrpool_ib_fail_reg)) {
		ret = -EIO;
		goto count;
	}
	m = kzalloc_node(sizeof(*m), GFP_KERNEL, d->node);
	if (!m) {
		ret = -ENOMEM;
		goto count;
	}
	m->chunk = c;
	ret = mrpool_ib_mr_build(d, c, m);
	if (ret)
		goto free_mr;
	ret = xa_insert(&d->mrs, key, m, GFP_KERNEL);
	if (ret)
		goto unreg;
	atomic_inc(&d->nr_mrs);
found:
	if (out)
		*out = m;
	return 0;

unreg:
	if (m->valid)
		mrpool_ib_post_inv(d, m);
free_mr:
	mrpool_ib_mr_free(d, m);
count:
	atomic64_inc(&d->reg_failures);
	pr_warn_ratelimited("%s: chunk %#lx not registered: %d\n", d->name,
			    key, ret);
	return ret;
}

/**
 * mrpool_ib_unreg - invalidate, deregister and unmap one cache entry
 * @d: its device, still holding its ib_device
 * @m: the entry, already erased from d->mrs
 */
void mrpool_ib_unreg(struct mrpool_ib_dev *d, struct mrpool_ib_mr *m)
{
	lockdep_assert_held(&mrpool_ib_lock);
	if (m->valid && !d->qp_broken)
		mrpool_ib_post_inv(d, m);
	atomic_dec(&d->nr_mrs);
	mrpool_ib_mr_free(d, m);
}

/**
 * mrpool_ib_rereg - register an entry again with new access and key byte
 * @d: its device
 * @m: the entry
 * @access: IB_ACCESS_* of the new registration
 *
 * A new key byte makes every key handed out before unusable.
 *
 * Return: 0 or a negative errno; the entry is then invalid and the caller
 * should drop it.
 */
int mrpool_ib_rereg(struct mrpool_ib_dev *d, struct mrpool_ib_mr *m,
		    int access)
{
	int ret;

	lockdep_assert_held(&mrpool_ib_lock);
	if (m->valid) {
		ret = mrpool_ib_post_inv(d, m);
		if (ret)
			return ret;
	}
	ib_update_fast_reg_key(m->mr, ib_inc_rkey(m->mr->rkey) & 0xff);
	ret = mrpool_ib_map(m);
	if (ret)
		return ret;
	return mrpool_ib_post_reg(d, m, access);
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

/* Address of the port itself: loopback needs no network, only a route. */
static int mrpool_ib_self_ah(struct mrpool_ib_dev *d, struct rdma_ah_attr *ah)
{
	struct ib_device *ibdev = d->ibdev;
	const struct ib_gid_attr *gid;
	struct ib_port_attr pattr;
	union ib_gid dgid;
	u16 vlan;
	int ret;

	ret = ib_query_port(ibdev, d->port, &pattr);
	if (ret)
		return ret;
	memset(ah, 0, sizeof(*ah));
	ah->type = rdma_ah_find_type(ibdev, d->port);
	rdma_ah_set_port_num(ah, d->port);
	if (!rdma_protocol_roce(ibdev, d->port)) {
		rdma_ah_set_dlid(ah, pattr.lid);
		return 0;
	}
	gid = mrpool_ib_pick_gid(ibdev, d->port, pattr.gid_tbl_len);
	if (IS_ERR(gid))
		return PTR_ERR(gid);
	dgid = gid->gid;
	rdma_ah_set_grh(ah, &dgid, 0, gid->index, 1, 0);
	ret = rdma_read_gid_l2_fields(gid, &vlan, ah->roce.dmac);
	rdma_put_gid_attr(gid);
	return ret;
}

static int mrpool_ib_qp_rts(struct ib_qp *qp, u32 port, u32 dest_qpn,
			    struct rdma_ah_attr *ah)
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

static int mrpool_ib_qps_create(struct mrpool_ib_dev *d)
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
	struct rdma_ah_attr ah;
	int i, ret;

	for (i = 0; i < 2; i++) {
		d->qp[i] = ib_create_qp(d->pd, &init);
		if (IS_ERR(d->qp[i])) {
			ret = PTR_ERR(d->qp[i]);
			d->qp[i] = NULL;
			return ret;
		}
	}
	ret = mrpool_ib_self_ah(d, &ah);
	if (ret)
		return ret;
	ret = mrpool_ib_qp_rts(d->qp[0], d->port, d->qp[1]->qp_num, &ah);
	if (ret)
		return ret;
	return mrpool_ib_qp_rts(d->qp[1], d->port, d->qp[0]->qp_num, &ah);
}

/* Release what setup built; safe on a partly built device. */
static void mrpool_ib_dev_release(struct mrpool_ib_dev *d)
{
	int i;

	for (i = 0; i < 2; i++) {
		if (d->qp[i])
			ib_destroy_qp(d->qp[i]);
		d->qp[i] = NULL;
	}
	if (d->cq)
		ib_free_cq(d->cq);
	d->cq = NULL;
	if (d->pd) {
		ib_dealloc_pd(d->pd);
		atomic_dec(&mrpool_ib_stats.pds);
	}
	d->pd = NULL;
}

/**
 * mrpool_ib_dev_setup - check a new device and build its PD, CQ and QPs
 * @d: the device, not yet listed
 *
 * Sets d->state and, unless READY, d->reason.
 *
 * Return: 0 when READY, else a negative errno (the device stays listed).
 */
int mrpool_ib_dev_setup(struct mrpool_ib_dev *d)
{
	struct ib_device *ibdev = d->ibdev;
	const char *what;
	int ret;

	lockdep_assert_held(&mrpool_ib_lock);
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
	if (mrpool_should_fail(&mrpool_ib_fail_setup)) {
		mrpool_ib_set_state(d, MRPOOL_IB_FAILED,
				    "setup failed: injected");
		return -EIO;
	}

	what = "PD";
	d->pd = ib_alloc_pd(ibdev, 0);
	if (IS_ERR(d->pd)) {
		ret = PTR_ERR(d->pd);
		d->pd = NULL;
		goto fail;
	}
	atomic_inc(&mrpool_ib_stats.pds);
	what = "CQ";
	d->cq = ib_alloc_cq(ibdev, d, MRPOOL_IB_CQ_DEPTH, 0, IB_POLL_SOFTIRQ);
	if (IS_ERR(d->cq)) {
		ret = PTR_ERR(d->cq);
		d->cq = NULL;
		goto fail;
	}
	d->cqe.done = mrpool_ib_wr_done;
	what = "loopback QPs";
	ret = mrpool_ib_qps_create(d);
	if (ret)
		goto fail;
	mrpool_ib_set_state(d, MRPOOL_IB_READY, "%s", "");
	return 0;

fail:
	mrpool_ib_dev_release(d);
	mrpool_ib_set_state(d, MRPOOL_IB_FAILED, "setup failed: %s: %d", what,
			    ret);
	return ret;
}

/**
 * mrpool_ib_dev_teardown - drop every cached MR and the device's objects
 * @d: the device, already off the list
 *
 * Leaves d as a REMOVED husk without its ib_device.
 */
void mrpool_ib_dev_teardown(struct mrpool_ib_dev *d)
{
	struct mrpool_ib_mr *m;
	unsigned long key;

	lockdep_assert_held(&mrpool_ib_lock);
	xa_for_each(&d->mrs, key, m) {
		xa_erase(&d->mrs, key);
		mrpool_ib_unreg(d, m);
		cond_resched();
	}
	mrpool_ib_dev_release(d);
	mrpool_ib_set_state(d, MRPOOL_IB_REMOVED, "%s", "device removed");
	d->ibdev = NULL;
}
