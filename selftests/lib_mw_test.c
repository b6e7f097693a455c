// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * libmrpool memory windows on rxe (run inside the VM): a type 2 window over
 * one pool buffer takes a peer's RDMA WRITE; once the buffer is freed, or
 * the window invalidated, a write with the old rkey fails with a remote
 * access error and changes nothing.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/*
 * 6.1's kselftest_harness.h trips -Wextra: an unused handler argument, and
 * its EXPECT_EQ compares an int literal with unsigned values.
 */
#pragma GCC diagnostic ignored "-Wunused-parameter"
#pragma GCC diagnostic ignored "-Wsign-compare"
#include "kselftest_harness.h"

#include "mrpool.h"
#include "pool_util.h"
#include "rdmatest.h"

#define LEN		(16 << 10)
#define WIN_ACCESS	(IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ)

FIXTURE(mw) {
	struct rdt_dev dev;
	struct rdt_loop lp;
	struct mrp_pool *pool;
	struct mrp_buf src, dst;
	const char *skip;
};

/* Wait for the completion of wr_id on cq; its status, or -1 on timeout. */
static int wait_wc(struct ibv_cq *cq, uint64_t wr_id)
{
	uint64_t end = rdt_now_ns() + 10000000000ull;
	struct ibv_wc wc;

	while (rdt_now_ns() < end) {
		int n = ibv_poll_cq(cq, 1, &wc);

		if (n < 0)
			return -1;
		if (n == 1 && wc.wr_id == wr_id)
			return wc.status;
	}
	return -1;
}

static int all_bytes(const void *p, int c, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if (((const unsigned char *)p)[i] != c)
			return 0;
	return 1;
}

FIXTURE_SETUP(mw)
{
	struct mrp_pool_attr a = {
		.comp_mask = MRP_POOL_ATTR_ARENA_SIZE | MRP_POOL_ATTR_BACKGROUND,
		.arena_size = 2 << 20, .background = 0,
	};

	memset(&self->dev, 0, sizeof(self->dev));
	memset(&self->lp, 0, sizeof(self->lp));
	self->skip = NULL;
	self->pool = mrp_pool_open(&a);
	ASSERT_NE(NULL, self->pool);
	if (rdt_dev_open(&self->dev, NULL, NULL)) {
		self->skip = "no RDMA device (rxe0)";
		return;
	}
	ASSERT_EQ(0, rdt_loop_create(&self->lp, &self->dev));
	ASSERT_EQ(0, mrp_attach_pd(self->pool, self->dev.pd,
				   RDT_ACCESS_ALL | IBV_ACCESS_MW_BIND));
	ASSERT_EQ(0, mrp_alloc(self->pool, LEN, self->dev.pd, &self->src));
	ASSERT_EQ(0, mrp_alloc(self->pool, LEN, self->dev.pd, &self->dst));
	memset(self->src.addr, 0xab, LEN);
	memset(self->dst.addr, 0x11, LEN);
}

FIXTURE_TEARDOWN(mw)
{
	/* Tests may leave src and dst allocated: force, as a teardown may. */
	EXPECT_EQ(0, mrp_pool_close_flags(self->pool, MRP_CLOSE_FORCE));
	rdt_loop_destroy(&self->lp);
	if (self->dev.ctx)
		rdt_dev_close(&self->dev);
}

/* Bind over dst on the responder QP (where the peer's writes arrive). */
static int bind_dst(FIXTURE_DATA(mw) *self, void *addr, size_t len, uint32_t *rkey)
{
	int ret = mrp_mw_bind(self->pool, self->lp.b.qp, addr, len, WIN_ACCESS,
			      77, IBV_SEND_SIGNALED, rkey);

	if (ret)
		return ret;
	return wait_wc(self->lp.b.cq, 77) == IBV_WC_SUCCESS ? 0 : -EIO;
}

/* A write through the window lands; after free the old rkey is dead. */
TEST_F(mw, write_then_free_invalidates)
{
	struct mrp_buf again;
	uint32_t rkey;
	int status;

	if (self->skip)
		POOL_SKIP("%s", self->skip);
	ASSERT_EQ(0, bind_dst(self, self->dst.addr, LEN, &rkey));
	EXPECT_NE(self->dst.rkey, rkey);
	ASSERT_EQ(0, rdt_write(&self->lp, self->src.addr, self->src.lkey,
			       (uintptr_t)self->dst.addr, rkey, LEN, &status));
	EXPECT_TRUE(all_bytes(self->dst.addr, 0xab, LEN));

	ASSERT_EQ(0, mrp_free(self->pool, self->dst.addr));
	/* same buffer again (thread cache is LIFO), now without a window */
	ASSERT_EQ(0, mrp_alloc(self->pool, LEN, self->dev.pd, &again));
	ASSERT_EQ(self->dst.addr, again.addr);
	memset(again.addr, 0x33, LEN);
	EXPECT_EQ(-EIO, rdt_write(&self->lp, self->src.addr, self->src.lkey,
				  (uintptr_t)again.addr, rkey, LEN, &status));
	EXPECT_EQ(IBV_WC_REM_ACCESS_ERR, status);
	EXPECT_TRUE(all_bytes(again.addr, 0x33, LEN));
	ASSERT_EQ(0, rdt_loop_reconnect(&self->lp));
	/* the arena's own key still works */
	ASSERT_EQ(0, rdt_write(&self->lp, self->src.addr, self->src.lkey,
			       (uintptr_t)again.addr, again.rkey, LEN, &status));
	EXPECT_TRUE(all_bytes(again.addr, 0xab, LEN));
}

/* mrp_mw_invalidate() kills the window while the buffer lives on. */
TEST_F(mw, explicit_invalidate)
{
	uint32_t rkey;
	int status;

	if (self->skip)
		POOL_SKIP("%s", self->skip);
	ASSERT_EQ(0, bind_dst(self, (char *)self->dst.addr + 4096, 4096, &rkey));
	ASSERT_EQ(0, rdt_write(&self->lp, self->src.addr, self->src.lkey,
			       (uintptr_t)self->dst.addr + 4096, rkey, 4096, &status));
	EXPECT_TRUE(all_bytes((char *)self->dst.addr + 4096, 0xab, 4096));
	EXPECT_TRUE(all_bytes(self->dst.addr, 0x11, 4096));
	ASSERT_EQ(0, mrp_mw_invalidate(self->pool, self->dst.addr));
	EXPECT_EQ(-ENOENT, mrp_mw_invalidate(self->pool, self->dst.addr));
	memset(self->dst.addr, 0x44, LEN);
	EXPECT_EQ(-EIO, rdt_write(&self->lp, self->src.addr, self->src.lkey,
				  (uintptr_t)self->dst.addr + 4096, rkey, 4096, &status));
	EXPECT_EQ(IBV_WC_REM_ACCESS_ERR, status);
	EXPECT_TRUE(all_bytes(self->dst.addr, 0x44, LEN));
}

/* A window never spans buffers, and needs MW_BIND access on its PD. */
TEST_F(mw, bind_checks)
{
	struct mrp_pool *plain;
	struct mrp_buf b;
	uint32_t rkey;

	if (self->skip)
		POOL_SKIP("%s", self->skip);
	EXPECT_EQ(-EINVAL, mrp_mw_bind(self->pool, self->lp.b.qp, self->dst.addr,
				       LEN + 1, WIN_ACCESS, 1, 0, &rkey));
	EXPECT_EQ(-EINVAL, mrp_mw_bind(self->pool, self->lp.b.qp, &rkey, 4,
				       WIN_ACCESS, 1, 0, &rkey));
	plain = mrp_pool_open(NULL);
	ASSERT_NE(NULL, plain);
	ASSERT_EQ(0, mrp_attach_pd(plain, self->dev.pd, RDT_ACCESS_ALL));
	ASSERT_EQ(0, mrp_alloc(plain, 4096, self->dev.pd, &b));
	EXPECT_EQ(-EINVAL, mrp_mw_bind(plain, self->lp.b.qp, b.addr, 4096,
				       WIN_ACCESS, 1, 0, &rkey));
	/* A live buffer keeps the pool open; freed, it closes. */
	EXPECT_EQ(-EBUSY, mrp_pool_close(plain));
	EXPECT_EQ(0, mrp_free(plain, b.addr));
	EXPECT_EQ(0, mrp_pool_close(plain));
}

/* Outside the window a write must fail, where the device enforces bounds. */
TEST_F(mw, outside_window_refused)
{
	uint32_t rkey;
	int status;

	if (self->skip)
		POOL_SKIP("%s", self->skip);
	if (!strncmp(self->dev.name, "rxe", 3))
		SKIP(return, "rxe (6.1, 6.12 and 7.3) checks the MR's range, not the window's (check_rkey in rxe_resp.c)");
	ASSERT_EQ(0, bind_dst(self, self->dst.addr, 4096, &rkey));
	EXPECT_EQ(-EIO, rdt_write(&self->lp, self->src.addr, self->src.lkey,
				  (uintptr_t)self->dst.addr + 4096, rkey, 64, &status));
	EXPECT_TRUE(all_bytes((char *)self->dst.addr + 4096, 0x11, 64));
}

TEST_HARNESS_MAIN
