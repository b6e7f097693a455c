// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * MRP_FORK_COPY with real pinned pages (run inside the VM): a pool on the
 * anonymous backend, registered with rxe0 (ibv_reg_mr pins its arenas),
 * forks. The kernel copies pinned pages for the child, so the child reads
 * the parent's bytes and writes its own copy, while the parent's
 * registration still reaches the parent's pages: an RDMA WRITE the parent
 * makes while the child holds its copy lands in the parent's buffer and
 * nowhere in the child's. On the kernel backend a child gets no slice
 * whatever the pool asked (slices are the module's), and the pool says so.
 *
 * VM kernels: all (the copy of DMA-pinned pages at fork is mm's, per kernel)
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#pragma GCC diagnostic ignored "-Wunused-parameter"
#pragma GCC diagnostic ignored "-Wsign-compare"
#include "kselftest_harness.h"

#include "mrpool.h"
#include "pool_util.h"
#include "rdmatest.h"

#define LEN	(256 << 10)

FIXTURE(fcopy) {
	struct rdt_dev dev;
	struct rdt_loop lp;
	struct mrp_pool *pool;
	const char *skip;
};

static struct mrp_pool *open_pool(enum mrp_backend backend, int fork)
{
	struct mrp_pool_attr a = {
		.comp_mask = MRP_POOL_ATTR_BACKEND | MRP_POOL_ATTR_ARENA_SIZE |
			     MRP_POOL_ATTR_BACKGROUND | MRP_POOL_ATTR_FORK,
		.backend = backend, .arena_size = 2 << 20, .background = 0,
		.fork = fork,
	};

	return mrp_pool_open(&a);
}

FIXTURE_SETUP(fcopy)
{
	memset(&self->dev, 0, sizeof(self->dev));
	memset(&self->lp, 0, sizeof(self->lp));
	self->skip = NULL;
	self->pool = open_pool(MRP_BACKEND_ANON, MRP_FORK_COPY);
	ASSERT_NE(NULL, self->pool);
	if (rdt_dev_open(&self->dev, NULL, NULL)) {
		self->skip = "no RDMA device (rxe0)";
		return;
	}
	ASSERT_EQ(0, rdt_loop_create(&self->lp, &self->dev));
	ASSERT_EQ(0, mrp_attach_pd(self->pool, self->dev.pd, RDT_ACCESS_ALL));
}

FIXTURE_TEARDOWN(fcopy)
{
	if (self->pool)
		EXPECT_EQ(0, mrp_pool_close_flags(self->pool, MRP_CLOSE_FORCE));
	rdt_loop_destroy(&self->lp);
	if (self->dev.ctx)
		rdt_dev_close(&self->dev);
}

static int fork_mode(struct mrp_pool *pool)
{
	struct mrp_stats st;

	memset(&st, 0, sizeof(st));
	if (mrp_stats(pool, &st, sizeof(st)))
		return -1;
	return (int)st.fork;
}

/*
 * With ib_core loaded the kernel says it copies pinned pages at fork (every
 * kernel the project tests does), and the anon pool keeps the request.
 */
TEST_F(fcopy, copy_holds_on_anon)
{
	if (self->skip)
		POOL_SKIP("%s", self->skip);
	EXPECT_EQ(MRP_FORK_COPY, fork_mode(self->pool));
}

/* The child's copy is its own; the parent's MR still reaches its pages. */
TEST_F(fcopy, child_copy_parent_registration)
{
	struct mrp_buf src, dst;
	int to_child[2], to_parent[2], status = 0, st;
	char c = 0;
	pid_t pid;

	if (self->skip)
		POOL_SKIP("%s", self->skip);
	ASSERT_EQ(MRP_FORK_COPY, fork_mode(self->pool));
	ASSERT_EQ(0, mrp_alloc(self->pool, LEN, self->dev.pd, &src));
	ASSERT_EQ(0, mrp_alloc(self->pool, LEN, self->dev.pd, &dst));
	rdt_pattern_fill(dst.addr, LEN, 1);
	rdt_pattern_fill(src.addr, LEN, 2);
	ASSERT_EQ(0, pipe(to_child));
	ASSERT_EQ(0, pipe(to_parent));
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		/* the parent's bytes as of the fork, then the child's own */
		if (!rdt_pattern_same(dst.addr, LEN, 1))
			_exit(1);
		rdt_pattern_fill(dst.addr, LEN, 3);
		if (write(to_parent[1], "w", 1) != 1 || read(to_child[0], &c, 1) != 1)
			_exit(2);
		/* the parent's RDMA WRITE went to the parent's pages only */
		_exit(rdt_pattern_same(dst.addr, LEN, 3) ? 0 : 3);
	}
	ASSERT_EQ(1, read(to_parent[0], &c, 1));
	/* the child has written its copy: the parent's is untouched */
	EXPECT_TRUE(rdt_pattern_same(dst.addr, LEN, 1));
	ASSERT_EQ(0, rdt_write(&self->lp, src.addr, src.lkey, (uintptr_t)dst.addr,
			       dst.rkey, LEN, &status));
	EXPECT_EQ(IBV_WC_SUCCESS, status);
	EXPECT_TRUE(rdt_pattern_same(dst.addr, LEN, 2));
	ASSERT_EQ(1, write(to_child[1], "r", 1));
	ASSERT_EQ(pid, waitpid(pid, &st, 0));
	EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) TH_LOG("status %#x", st);
	/* and after the child is gone, the registration still works */
	rdt_pattern_fill(src.addr, LEN, 4);
	ASSERT_EQ(0, rdt_write(&self->lp, src.addr, src.lkey, (uintptr_t)dst.addr,
			       dst.rkey, LEN, &status));
	EXPECT_TRUE(rdt_pattern_same(dst.addr, LEN, 4));
	EXPECT_EQ(0, mrp_free(self->pool, src.addr));
	EXPECT_EQ(0, mrp_free(self->pool, dst.addr));
	close(to_child[0]);
	close(to_child[1]);
	close(to_parent[0]);
	close(to_parent[1]);
}

/*
 * The kernel backend cannot keep MRP_FORK_COPY: the pool opens as with
 * MRP_FORK_NONE and says so, and a child finds no slice there.
 */
TEST_F(fcopy, kernel_backend_says_none)
{
	struct mrp_pool *kp;
	struct mrp_buf b;
	pid_t pid;
	int st;

	if (access("/dev/mrpool", F_OK))
		POOL_SKIP("/dev/mrpool missing: mrpool.ko not loaded");
	kp = open_pool(MRP_BACKEND_KERNEL, MRP_FORK_COPY);
	ASSERT_NE(NULL, kp);
	EXPECT_EQ(MRP_FORK_NONE, fork_mode(kp));
	ASSERT_EQ(0, mrp_alloc(kp, LEN, NULL, &b));
	memset(b.addr, 5, LEN);
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		volatile char v = ((char *)b.addr)[0];

		(void)v;
		_exit(0);
	}
	ASSERT_EQ(pid, waitpid(pid, &st, 0));
	EXPECT_TRUE(WIFSIGNALED(st)) TH_LOG("status %#x", st);
	EXPECT_EQ(0, mrp_free(kp, b.addr));
	EXPECT_EQ(0, mrp_pool_close(kp));
}

/*
 * libibverbs' fork support enabled before anything is registered
 * (ibv_fork_init(), which UCX calls by default): rdma-core 44 then marks
 * every range it registers MADV_DONTFORK, the pool's arenas included, while
 * ibv_is_fork_initialized() still says IBV_FORK_UNNEEDED, so the pool gives
 * children copies. The library's fork handler marks the arenas
 * MADV_DOFORK again: the child reads the parent's bytes and writes its own
 * copy, and the parent's registration still reaches the parent's pages.
 * Newer rdma-core skips that bookkeeping where the kernel copies pinned
 * pages unless RDMAV_USE_MADVISE is set, as here. Before, the child died
 * of SIGSEGV on its first read of the block.
 */
TEST(copy_after_ibv_fork_init)
{
	struct rdt_dev dev;
	struct rdt_loop lp;
	struct mrp_buf src, dst;
	struct mrp_pool *pool;
	int status = 0, st;
	pid_t pid;

	memset(&dev, 0, sizeof(dev));
	memset(&lp, 0, sizeof(lp));
	ASSERT_EQ(0, setenv("RDMAV_USE_MADVISE", "1", 1));
	ASSERT_EQ(0, ibv_fork_init());
	pool = open_pool(MRP_BACKEND_ANON, MRP_FORK_COPY);
	ASSERT_NE(NULL, pool);
	if (rdt_dev_open(&dev, NULL, NULL)) {
		EXPECT_EQ(0, mrp_pool_close(pool));
		POOL_SKIP("no RDMA device (rxe0)");
	}
	ASSERT_EQ(IBV_FORK_UNNEEDED, ibv_is_fork_initialized());
	ASSERT_EQ(0, rdt_loop_create(&lp, &dev));
	ASSERT_EQ(0, mrp_attach_pd(pool, dev.pd, RDT_ACCESS_ALL));
	ASSERT_EQ(MRP_FORK_COPY, fork_mode(pool));
	ASSERT_EQ(0, mrp_alloc(pool, LEN, dev.pd, &src));
	ASSERT_EQ(0, mrp_alloc(pool, LEN, dev.pd, &dst));
	rdt_pattern_fill(dst.addr, LEN, 1);
	rdt_pattern_fill(src.addr, LEN, 2);
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		if (!rdt_pattern_same(dst.addr, LEN, 1))
			_exit(1);
		rdt_pattern_fill(dst.addr, LEN, 3);
		_exit(rdt_pattern_same(dst.addr, LEN, 3) ? 0 : 2);
	}
	ASSERT_EQ(pid, waitpid(pid, &st, 0));
	EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) TH_LOG("status %#x", st);
	EXPECT_TRUE(rdt_pattern_same(dst.addr, LEN, 1));
	ASSERT_EQ(0, rdt_write(&lp, src.addr, src.lkey, (uintptr_t)dst.addr,
			       dst.rkey, LEN, &status));
	EXPECT_EQ(IBV_WC_SUCCESS, status);
	EXPECT_TRUE(rdt_pattern_same(dst.addr, LEN, 2));
	EXPECT_EQ(0, mrp_free(pool, src.addr));
	EXPECT_EQ(0, mrp_free(pool, dst.addr));
	EXPECT_EQ(0, mrp_pool_close_flags(pool, MRP_CLOSE_FORCE));
	rdt_loop_destroy(&lp);
	rdt_dev_close(&dev);
}

TEST_HARNESS_MAIN
