// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Synchronous data-path operations on a librdmatest loop: post one work
 * request, wait for its completion, report its status.
 */
#include <errno.h>
#include <sched.h>
#include <string.h>
#include <time.h>

#include "rdmatest.h"

uint64_t rdt_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

/*
 * Busy-polls (yielding) rather than sleeping on a completion channel: the
 * tools time these calls, and a wakeup would dominate small transfers.
 */
static int wait_one(struct ibv_cq *cq, int timeout_ms, struct ibv_wc *wc)
{
	uint64_t deadline = rdt_now_ns() + (uint64_t)timeout_ms * 1000000ull;
	int n;

	for (;;) {
		n = ibv_poll_cq(cq, 1, wc);
		if (n < 0)
			return -EIO;
		if (n > 0)
			return 0;
		if (rdt_now_ns() > deadline)
			return -ETIMEDOUT;
		sched_yield();
	}
}

static int finish(int ret, const struct ibv_wc *wc, int *status)
{
	if (ret)
		return ret;
	if (status)
		*status = wc->status;
	return wc->status == IBV_WC_SUCCESS ? 0 : -EIO;
}

static int rdma_op(struct rdt_loop *lp, enum ibv_wr_opcode op, void *laddr,
		   uint32_t lkey, uint64_t raddr, uint32_t rkey, size_t len,
		   int *status)
{
	struct ibv_sge sge = {
		.addr = (uintptr_t)laddr,
		.length = (uint32_t)len,
		.lkey = lkey,
	};
	struct ibv_send_wr wr = {
		.wr_id = op,
		.sg_list = &sge,
		.num_sge = 1,
		.opcode = op,
		.send_flags = IBV_SEND_SIGNALED,
		.wr.rdma = { .remote_addr = raddr, .rkey = rkey },
	};
	struct ibv_send_wr *bad;
	struct ibv_wc wc;
	int ret;

	if (len > UINT32_MAX)
		return -EINVAL;
	ret = ibv_post_send(lp->a.qp, &wr, &bad);
	if (ret)
		return -ret;
	ret = wait_one(lp->a.cq, lp->timeout_ms, &wc);
	return finish(ret, &wc, status);
}

int rdt_write(struct rdt_loop *lp, void *laddr, uint32_t lkey,
	      uint64_t raddr, uint32_t rkey, size_t len,
	      int *status)
{
	return rdma_op(lp, IBV_WR_RDMA_WRITE, laddr, lkey, raddr, rkey, len,
		       status);
}

int rdt_read(struct rdt_loop *lp, void *laddr, uint32_t lkey,
	     uint64_t raddr, uint32_t rkey, size_t len,
	     int *status)
{
	return rdma_op(lp, IBV_WR_RDMA_READ, laddr, lkey, raddr, rkey, len,
		       status);
}

int rdt_send(struct rdt_loop *lp, void *saddr, uint32_t skey,
	     void *daddr, uint32_t dkey, size_t len,
	     int *status)
{
	struct ibv_sge rsge = {
		.addr = (uintptr_t)daddr,
		.length = (uint32_t)len,
		.lkey = dkey,
	};
	struct ibv_recv_wr rwr = { .sg_list = &rsge, .num_sge = 1 };
	struct ibv_sge ssge = {
		.addr = (uintptr_t)saddr,
		.length = (uint32_t)len,
		.lkey = skey,
	};
	struct ibv_send_wr swr = {
		.sg_list = &ssge,
		.num_sge = 1,
		.opcode = IBV_WR_SEND,
		.send_flags = IBV_SEND_SIGNALED,
	};
	struct ibv_recv_wr *rbad;
	struct ibv_send_wr *sbad;
	struct ibv_wc wc;
	int ret;

	if (len > UINT32_MAX)
		return -EINVAL;
	ret = ibv_post_recv(lp->b.qp, &rwr, &rbad);
	if (ret)
		return -ret;
	ret = ibv_post_send(lp->a.qp, &swr, &sbad);
	if (ret)
		return -ret;
	ret = finish(wait_one(lp->a.cq, lp->timeout_ms, &wc), &wc, status);
	if (ret)
		return ret;
	return finish(wait_one(lp->b.cq, lp->timeout_ms, &wc), &wc, status);
}
