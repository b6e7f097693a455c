// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Two "hosts" (tools/vm/run --two-hosts): rxe1 on veth0 and rxe2 on veth1,
 * the two ends of one veth pair. One RC QP on each device, connected to
 * each other; a slice on the rxe1 side is WRITten into a slice on the rxe2
 * side and READ back into a third buffer, bytes checked, and veth0's
 * counters must grow by a packet per MTU: the bytes crossed the veth, not
 * a device-internal loopback.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
#include "kselftest_harness.h"
#pragma GCC diagnostic pop
/* After a longjmp the harness only runs the teardown: no local is reused. */
#pragma GCC diagnostic ignored "-Wclobbered"

#include "pool_util.h"
#include "rdmatest.h"

#define DEV_A		"rxe1"
#define DEV_B		"rxe2"
#define VETH_TX		"/sys/class/net/veth0/statistics/tx_packets"
#define VETH_RX		"/sys/class/net/veth0/statistics/rx_packets"
#define XFER		MIB
#define QDEPTH		4

/* One side: device, QP + CQ, and a mapped slice registered in its PD. */
struct side {
	struct rdt_dev dev;
	bool opened;
	struct rdt_qp q;
	struct mrpool_alloc a;
	uint8_t *p;
	struct ibv_mr *mr;
};

FIXTURE(twohost) {
	int fd;
	struct side s[2];	/* [0] rxe1: requester, [1] rxe2: target */
};

static int side_qp(struct side *s)
{
	struct ibv_qp_init_attr attr = {
		.qp_type = IBV_QPT_RC,
		.sq_sig_all = 1,
		.cap = {
			.max_send_wr = QDEPTH,
			.max_recv_wr = QDEPTH,
			.max_send_sge = 1,
			.max_recv_sge = 1,
		},
	};

	s->q.cq = ibv_create_cq(s->dev.ctx, 2 * QDEPTH, NULL, NULL, 0);
	if (!s->q.cq)
		return -errno;
	attr.send_cq = s->q.cq;
	attr.recv_cq = s->q.cq;
	s->q.qp = ibv_create_qp(s->dev.pd, &attr);
	return s->q.qp ? 0 : -errno;
}

/* A slice of @len mapped and registered in the side's PD. */
static int side_slice(int fd, struct side *s, size_t len)
{
	int ret;

	ret = pool_alloc(fd, len, &s->a);
	if (ret)
		return ret;
	s->p = pool_map(fd, &s->a);
	if (s->p == MAP_FAILED) {
		s->p = NULL;
		return -errno;
	}
	s->mr = ibv_reg_mr(s->dev.pd, s->p, s->a.length, RDT_ACCESS_ALL);
	return s->mr ? 0 : -errno;
}

static bool rdma_dev_present(const char *name)
{
	char path[128];

	snprintf(path, sizeof(path), "/sys/class/infiniband/%s", name);
	return !access(path, F_OK);
}

FIXTURE_SETUP(twohost)
{
	int i;

	self->fd = -1;
	memset(self->s, 0, sizeof(self->s));
	if (access(POOL_DEV, F_OK))
		POOL_SETUP_SKIP(POOL_DEV " missing: mrpool.ko not loaded");
	if (!rdma_dev_present(DEV_A) || !rdma_dev_present(DEV_B))
		POOL_SETUP_SKIP(DEV_A "/" DEV_B " absent: needs tools/vm/run --two-hosts");
	if (access(VETH_TX, R_OK))
		POOL_SETUP_SKIP("veth0 absent: needs tools/vm/run --two-hosts");

	ASSERT_EQ(0, rdt_dev_open(&self->s[0].dev, DEV_A, NULL));
	self->s[0].opened = true;
	ASSERT_EQ(0, rdt_dev_open(&self->s[1].dev, DEV_B, NULL));
	self->s[1].opened = true;
	/* Different GIDs: the two ends really are two addresses. */
	ASSERT_NE(0, memcmp(&self->s[0].dev.gid, &self->s[1].dev.gid,
			    sizeof(union ibv_gid)));
	self->fd = pool_open();
	ASSERT_LE(0, self->fd);
	for (i = 0; i < 2; i++) {
		ASSERT_EQ(0, side_qp(&self->s[i]));
		ASSERT_EQ(0, side_slice(self->fd, &self->s[i], XFER));
	}
	ASSERT_EQ(0, rdt_qp_connect(&self->s[0].dev, self->s[0].q.qp,
				    self->s[1].q.qp->qp_num,
				    &self->s[1].dev.gid));
	ASSERT_EQ(0, rdt_qp_connect(&self->s[1].dev, self->s[1].q.qp,
				    self->s[0].q.qp->qp_num,
				    &self->s[0].dev.gid));
}

FIXTURE_TEARDOWN(twohost)
{
	int i;

	for (i = 0; i < 2; i++) {
		struct side *s = &self->s[i];

		if (s->mr)
			ibv_dereg_mr(s->mr);
		if (s->p)
			munmap(s->p, s->a.length);
		if (s->q.qp)
			ibv_destroy_qp(s->q.qp);
		if (s->q.cq)
			ibv_destroy_cq(s->q.cq);
		if (s->opened)
			rdt_dev_close(&s->dev);
	}
	if (self->fd >= 0)
		close(self->fd);
}

/* Post one RDMA op on @q and wait for its completion; status in *st. */
static int post_wait(struct rdt_qp *q, enum ibv_wr_opcode op, void *laddr,
		     uint32_t lkey, uint64_t raddr, uint32_t rkey,
		     uint32_t len, int *st)
{
	struct ibv_sge sge = {
		.addr = (uintptr_t)laddr, .length = len, .lkey = lkey,
	};
	struct ibv_send_wr wr = {
		.wr_id = op, .sg_list = &sge, .num_sge = 1, .opcode = op,
		.send_flags = IBV_SEND_SIGNALED,
		.wr.rdma = { .remote_addr = raddr, .rkey = rkey },
	};
	uint64_t end = rdt_now_ns() + RDT_DEFAULT_TIMEOUT_MS * 1000000ULL;
	struct ibv_send_wr *bad;
	struct ibv_wc wc;
	int n, ret;

	ret = ibv_post_send(q->qp, &wr, &bad);
	if (ret)
		return -ret;
	do {
		n = ibv_poll_cq(q->cq, 1, &wc);
		if (n < 0)
			return -EIO;
		if (n > 0) {
			*st = wc.status;
			return wc.status == IBV_WC_SUCCESS ? 0 : -EIO;
		}
		usleep(100);
	} while (rdt_now_ns() < end);
	return -ETIMEDOUT;
}

static void fill(uint8_t *p, size_t len, unsigned int seed)
{
	size_t i;

	for (i = 0; i < len; i++)
		p[i] = (uint8_t)(i * 131 + seed + (i >> 11));
}

/* WRITE rxe1 -> rxe2 and READ rxe2 -> rxe1, through veth0. */
TEST_F_TIMEOUT(twohost, write_read_across_veth, 180)
{
	struct side *a = &self->s[0], *b = &self->s[1];
	long long tx0, tx1, tx2, rx1, rx2;
	struct ibv_mr *bmr;
	uint8_t *back;
	int st = -1;

	POOL_SETUP_SKIPPED();
	back = aligned_alloc(4096, XFER);
	ASSERT_NE(NULL, back);
	bmr = ibv_reg_mr(a->dev.pd, back, XFER, RDT_ACCESS_ALL);
	ASSERT_NE(NULL, bmr);

	fill(a->p, XFER, 7);
	memset(b->p, 0, XFER);
	tx0 = pool_read_ll(VETH_TX);
	ASSERT_LE(0, tx0);
	ASSERT_EQ(0, post_wait(&a->q, IBV_WR_RDMA_WRITE, a->p, a->mr->lkey,
			       (uintptr_t)b->p, b->mr->rkey, XFER, &st))
		/* A timeout if rxe2's netdev is in another netns. */
		TH_LOG("WRITE status %d; 6.1's rxe listens on UDP 4791 in init_net only",
		       st);
	ASSERT_EQ(0, memcmp(a->p, b->p, XFER));
	tx1 = pool_read_ll(VETH_TX);
	/* 1 MiB at an MTU of at most 1024 is >= 1024 packets. */
	EXPECT_LE(tx0 + XFER / 1024, tx1)
		TH_LOG("veth0 tx %lld -> %lld", tx0, tx1);

	/* New bytes at the target, READ into a third buffer on rxe1's side. */
	memset(back, 0, XFER);
	fill(b->p, XFER, 11);
	rx1 = pool_read_ll(VETH_RX);
	ASSERT_LE(0, rx1);
	EXPECT_EQ(0, post_wait(&a->q, IBV_WR_RDMA_READ, back, bmr->lkey,
			       (uintptr_t)b->p, b->mr->rkey, XFER, &st))
		TH_LOG("READ status %d", st);
	EXPECT_EQ(0, memcmp(back, b->p, XFER));
	tx2 = pool_read_ll(VETH_TX);
	rx2 = pool_read_ll(VETH_RX);
	/* The request went out, the 1 MiB of responses came back in. */
	EXPECT_LT(tx1, tx2);
	EXPECT_LE(rx1 + XFER / 1024, rx2);
	TH_LOG("veth0 tx_packets %lld -> %lld -> %lld, rx_packets %lld -> %lld",
	       tx0, tx1, tx2, rx1, rx2);
	EXPECT_EQ(0, ibv_dereg_mr(bmr));
	free(back);
}

TEST_HARNESS_MAIN
