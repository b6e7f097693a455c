// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Host unit tests of registration through a slice's dma-buf: the anon
 * backend with a stand-in export (an fd of /dev/null, counted) in place of
 * the kernel's MRPOOL_IOC_EXPORT_DMABUF, and fake verbs that take or refuse
 * dma-buf MRs. Every arena goes through its dma-buf where the device takes
 * it, no fd outlives its registration, a refusal turns the path off for
 * that PD after one attempt (reg_failures untouched), an export short of
 * an fd falls back for that arena only, and MRPOOL_DMABUF=0
 * never exports. The VM test lib_rdma_test checks the real export against
 * rxe, which refuses dma-buf MRs.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "kselftest_harness.h"
#include "helpers.h"
#include "internal.h"

static int exports, export_errno;

static int fake_export(struct mrp_pool *pool, uint64_t handle)
{
	(void)pool;
	(void)handle;
	if (export_errno)
		return -export_errno;
	exports++;
	return open("/dev/null", O_RDONLY | O_CLOEXEC);
}

static struct mrp_backend_ops ops_with_export;

static int open_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	int n = 0;

	if (!d)
		return -1;
	while (readdir(d))
		n++;
	closedir(d);
	return n;
}

/* A pool whose backend exports dma-bufs; no pool thread. */
static struct mrp_pool *export_pool(int dmabuf)
{
	struct mrp_pool_attr a = {
		.comp_mask = MRP_POOL_ATTR_ARENA_SIZE | MRP_POOL_ATTR_DMABUF,
		.arena_size = 2 << 20, .dmabuf = dmabuf,
	};
	struct mrp_pool *pool = test_pool(&a);

	if (!pool)
		return NULL;
	ops_with_export = *pool->ops;
	ops_with_export.export_dmabuf = fake_export;
	pool->ops = &ops_with_export;
	exports = 0;
	export_errno = 0;
	fake_dmabuf_errno = 0;
	fake_dmabuf_regs = 0;
	return pool;
}

/* Three arenas, allocated in pd: their buffers and the PD's stats. */
static void three_arenas(struct __test_metadata *_metadata, struct mrp_pool *pool,
			 struct ibv_pd *pd, struct mrp_pd_stats *st)
{
	struct mrp_buf b[3];
	int i;

	for (i = 0; i < 3; i++) {
		ASSERT_EQ(0, mrp_alloc(pool, 2 << 20, pd, &b[i]));
		EXPECT_TRUE(fake_mr_covers(pd, b[i].addr, b[i].size, b[i].lkey, b[i].rkey));
	}
	ASSERT_EQ(0, mrp_pd_stats(pool, pd, st, sizeof(*st)));
	for (i = 0; i < 3; i++)
		ASSERT_EQ(0, mrp_free(pool, b[i].addr));
}

TEST(arenas_through_dmabuf)
{
	struct mrp_pool *pool = export_pool(1);
	struct mrp_pd_stats st;
	int fds = open_fds();

	ASSERT_NE(NULL, pool);
	ASSERT_EQ(0, mrp_attach_pd(pool, FAKE_PD(1), IBV_ACCESS_LOCAL_WRITE));
	three_arenas(_metadata, pool, FAKE_PD(1), &st);
	EXPECT_EQ(3, exports);
	EXPECT_EQ(3, fake_dmabuf_regs);
	EXPECT_EQ(3, st.dmabuf_regs);
	EXPECT_EQ(0, st.dmabuf_error);
	EXPECT_EQ(0, st.reg_failures);
	/* the MRs hold the dma-bufs: no fd of them is left open */
	EXPECT_EQ(fds, open_fds());
	EXPECT_EQ(0, mrp_pool_close(pool));
}

/* A device that refuses: one attempt, then ibv_reg_mr, no failure counted. */
TEST(refused_once)
{
	struct mrp_pool *pool = export_pool(1);
	struct mrp_pd_stats st;
	int fds = open_fds();

	ASSERT_NE(NULL, pool);
	fake_dmabuf_errno = EOPNOTSUPP;
	ASSERT_EQ(0, mrp_attach_pd(pool, FAKE_PD(1), IBV_ACCESS_LOCAL_WRITE));
	three_arenas(_metadata, pool, FAKE_PD(1), &st);
	EXPECT_EQ(1, exports);
	EXPECT_EQ(0, st.dmabuf_regs);
	EXPECT_EQ(EOPNOTSUPP, st.dmabuf_error);
	EXPECT_EQ(0, st.reg_failures);
	EXPECT_EQ(fds, open_fds());
	/* a PD attached again tries again */
	ASSERT_EQ(0, mrp_detach_pd(pool, FAKE_PD(1)));
	fake_dmabuf_errno = 0;
	ASSERT_EQ(0, mrp_attach_pd(pool, FAKE_PD(1), IBV_ACCESS_LOCAL_WRITE));
	ASSERT_EQ(0, mrp_pd_stats(pool, FAKE_PD(1), &st, sizeof(st)));
	EXPECT_EQ(0, st.dmabuf_error);
	EXPECT_LT(0, st.dmabuf_regs);
	EXPECT_EQ(0, mrp_pool_close(pool));
}

/*
 * An export that fails for want of an fd: that arena takes ibv_reg_mr and
 * the next tries its dma-buf again; a module without the export turns the
 * path off. Registration goes on either way.
 */
TEST(export_fails)
{
	struct mrp_pool *pool = export_pool(1);
	struct mrp_pd_stats st;
	struct mrp_buf b;

	ASSERT_NE(NULL, pool);
	export_errno = EMFILE;
	ASSERT_EQ(0, mrp_attach_pd(pool, FAKE_PD(1), IBV_ACCESS_LOCAL_WRITE));
	three_arenas(_metadata, pool, FAKE_PD(1), &st);
	EXPECT_EQ(0, fake_dmabuf_regs);
	EXPECT_EQ(0, st.dmabuf_error);
	EXPECT_EQ(0, st.reg_failures);
	EXPECT_LE(0, mrp_trim(pool, MRP_TRIM_FLUSH));
	/* the fd limit relieved: the next arena goes through its dma-buf */
	export_errno = 0;
	ASSERT_EQ(0, mrp_alloc(pool, 2 << 20, FAKE_PD(1), &b));
	EXPECT_TRUE(fake_mr_covers(FAKE_PD(1), b.addr, b.size, b.lkey, b.rkey));
	EXPECT_EQ(1, fake_dmabuf_regs);
	EXPECT_EQ(0, mrp_free(pool, b.addr));
	/* the module has no export (an older one): off after one attempt */
	export_errno = ENOTTY;
	ASSERT_EQ(0, mrp_trim(pool, MRP_TRIM_FLUSH) < 0);
	three_arenas(_metadata, pool, FAKE_PD(1), &st);
	EXPECT_EQ(ENOTTY, st.dmabuf_error);
	EXPECT_EQ(1, st.dmabuf_regs);
	EXPECT_EQ(0, st.reg_failures);
	EXPECT_EQ(0, mrp_pool_close(pool));
}

/* MRPOOL_DMABUF=0 (here the attribute): never an export. */
TEST(turned_off)
{
	struct mrp_pool *pool = export_pool(0);
	struct mrp_pd_stats st;

	ASSERT_NE(NULL, pool);
	ASSERT_EQ(0, mrp_attach_pd(pool, FAKE_PD(1), IBV_ACCESS_LOCAL_WRITE));
	three_arenas(_metadata, pool, FAKE_PD(1), &st);
	EXPECT_EQ(0, exports);
	EXPECT_EQ(0, st.dmabuf_regs);
	EXPECT_EQ(0, st.dmabuf_error);
	EXPECT_EQ(0, mrp_pool_close(pool));

	setenv("MRPOOL_DMABUF", "2", 1);
	errno = 0;
	EXPECT_EQ(NULL, test_pool(NULL));
	EXPECT_EQ(EINVAL, errno);
	unsetenv("MRPOOL_DMABUF");
}

TEST_HARNESS_MAIN
