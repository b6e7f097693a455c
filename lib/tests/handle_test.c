// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Host unit tests of PD handles (1.5): mrp_pd_handle() and mrp_alloc_pdh()
 * give the keys mrp_alloc() gives for the PD, in any slot; a handle
 * outlives its PD's detach as memory, never as keys; it is refused by
 * another pool, fails with -ENODEV for a dead PD and -ECHILD in a child;
 * hooked pools (sampling, debug) and arenas the PD refused still go
 * through the slow path.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "kselftest_harness.h"
#include "helpers.h"

#define ACCESS	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE)
#define NBUF	100

FIXTURE(two_pds)
{
	struct mrp_pool *pool;
	struct mrp_pdh *h0, *h1;	/* FAKE_PD(1) in slot 0, FAKE_PD(2) in slot 1 */
};

FIXTURE_SETUP(two_pds)
{
	self->pool = test_pool(NULL);
	ASSERT_NE(NULL, self->pool);
	ASSERT_EQ(0, mrp_attach_pd(self->pool, FAKE_PD(1), ACCESS));
	ASSERT_EQ(0, mrp_attach_pd(self->pool, FAKE_PD(2), ACCESS));
	self->h0 = mrp_pd_handle(self->pool, FAKE_PD(1));
	self->h1 = mrp_pd_handle(self->pool, FAKE_PD(2));
	ASSERT_NE(NULL, self->h0);
	ASSERT_NE(NULL, self->h1);
}

FIXTURE_TEARDOWN(two_pds)
{
	EXPECT_EQ(0, mrp_pool_close(self->pool));
	EXPECT_EQ(0, fake_live);
}

/* Keys of each slot's PD, as mrp_lookup() gives them, through cache and depot. */
TEST_F(two_pds, keys_of_each_slot)
{
	struct mrp_pdh *h[2] = { self->h0, self->h1 };
	struct ibv_pd *pd[2] = { FAKE_PD(1), FAKE_PD(2) };
	static struct mrp_buf b[2][NBUF];
	struct mrp_stats st;
	struct mrp_buf l;

	EXPECT_EQ(self->h0, mrp_pd_handle(self->pool, FAKE_PD(1)));
	EXPECT_NE(self->h0, self->h1);
	/* twice: the second round is served from the thread's cache */
	for (int round = 0; round < 2; round++) {
		for (int i = 0; i < NBUF; i++)
			for (int s = 0; s < 2; s++)
				ASSERT_EQ(0, mrp_alloc_pdh(self->pool, 5000, h[s], &b[s][i]));
		for (int i = 0; i < NBUF; i++) {
			for (int s = 0; s < 2; s++) {
				EXPECT_EQ(8192, b[s][i].size);
				EXPECT_TRUE(fake_mr_covers(pd[s], b[s][i].addr, b[s][i].size,
							   b[s][i].lkey, b[s][i].rkey));
				ASSERT_EQ(0, mrp_lookup(self->pool, b[s][i].addr, pd[s], &l));
				EXPECT_EQ(l.lkey, b[s][i].lkey);
				EXPECT_EQ(l.rkey, b[s][i].rkey);
			}
			EXPECT_NE(b[0][i].lkey, b[1][i].lkey);
		}
		st = test_stats(self->pool);
		EXPECT_EQ(2 * NBUF * 8192, st.bytes_in_use);
		for (int i = 0; i < NBUF; i++)
			for (int s = 0; s < 2; s++)
				ASSERT_EQ(0, mrp_free(self->pool, b[s][i].addr));
	}
	st = test_stats(self->pool);
	EXPECT_EQ(4 * NBUF, st.allocs);
	EXPECT_EQ(4 * NBUF, st.frees);
	EXPECT_EQ(0, st.bytes_in_use);
	EXPECT_LT(0, st.tcache_hits);
	/* above the classes: the slow path's own arena, with keys */
	ASSERT_EQ(0, mrp_alloc_pdh(self->pool, (4 << 20) + 1, self->h1, &l));
	EXPECT_TRUE(fake_mr_covers(FAKE_PD(2), l.addr, l.size, l.lkey, l.rkey));
	EXPECT_EQ(0, mrp_free(self->pool, l.addr));
}

/* Detached: the handle fails, the pool and the other handle carry on. */
TEST_F(two_pds, detached)
{
	struct mrp_buf held, b;
	struct mrp_pdh *again;
	struct mrp_stats st;

	ASSERT_EQ(0, mrp_alloc_pdh(self->pool, 4096, self->h0, &held));
	ASSERT_EQ(0, mrp_alloc_pdh(self->pool, 4096, self->h0, &b));
	ASSERT_EQ(0, mrp_free(self->pool, b.addr));	/* cached, keyed */
	ASSERT_EQ(0, mrp_detach_pd(self->pool, FAKE_PD(1)));
	EXPECT_EQ(-EINVAL, mrp_alloc_pdh(self->pool, 4096, self->h0, &b));
	EXPECT_EQ(-EINVAL, mrp_alloc_pdh(self->pool, 3 << 20, self->h0, &b));
	errno = 0;
	EXPECT_EQ(NULL, mrp_pd_handle(self->pool, FAKE_PD(1)));
	EXPECT_EQ(ENOENT, errno);
	/* the rest of the pool is as it was */
	ASSERT_EQ(0, mrp_alloc_pdh(self->pool, 4096, self->h1, &b));
	EXPECT_TRUE(fake_mr_covers(FAKE_PD(2), b.addr, b.size, b.lkey, b.rkey));
	st = test_stats(self->pool);
	EXPECT_EQ(2 * 4096, st.bytes_in_use);
	EXPECT_EQ(1, st.pds);
	EXPECT_EQ(0, mrp_free(self->pool, b.addr));
	EXPECT_EQ(0, mrp_free(self->pool, held.addr));
	/* attached again, in the same slot: a new handle; the old one stays off */
	ASSERT_EQ(0, mrp_attach_pd(self->pool, FAKE_PD(1), ACCESS));
	again = mrp_pd_handle(self->pool, FAKE_PD(1));
	ASSERT_NE(NULL, again);
	EXPECT_NE(self->h0, again);
	EXPECT_EQ(-EINVAL, mrp_alloc_pdh(self->pool, 4096, self->h0, &b));
	ASSERT_EQ(0, mrp_alloc_pdh(self->pool, 4096, again, &b));
	EXPECT_TRUE(fake_mr_covers(FAKE_PD(1), b.addr, b.size, b.lkey, b.rkey));
	EXPECT_EQ(0, mrp_free(self->pool, b.addr));
	st = test_stats(self->pool);
	EXPECT_EQ(0, st.bytes_in_use);
}

/* Marked dead: -ENODEV, cached buffers included; -EINVAL once detached. */
TEST_F(two_pds, dead_pd)
{
	struct mrp_buf b;

	ASSERT_EQ(0, mrp_alloc_pdh(self->pool, 4096, self->h1, &b));
	ASSERT_EQ(0, mrp_free(self->pool, b.addr));	/* cached */
	ASSERT_EQ(0, mrp_pd_dead(self->pool, FAKE_PD(2)));
	EXPECT_EQ(-ENODEV, mrp_alloc_pdh(self->pool, 4096, self->h1, &b));
	EXPECT_EQ(-ENODEV, mrp_alloc_pdh(self->pool, 3 << 20, self->h1, &b));
	ASSERT_EQ(0, mrp_alloc_pdh(self->pool, 4096, self->h0, &b));
	EXPECT_TRUE(fake_mr_covers(FAKE_PD(1), b.addr, b.size, b.lkey, b.rkey));
	EXPECT_EQ(0, mrp_free(self->pool, b.addr));
	ASSERT_EQ(0, mrp_detach_pd(self->pool, FAKE_PD(2)));
	EXPECT_EQ(-EINVAL, mrp_alloc_pdh(self->pool, 4096, self->h1, &b));
}

/* Bad arguments, and a handle of another pool. */
TEST_F(two_pds, refused)
{
	struct mrp_pool *other = test_pool(NULL);
	struct mrp_pdh *oh;
	struct mrp_buf b;

	ASSERT_NE(NULL, other);
	ASSERT_EQ(0, mrp_attach_pd(other, FAKE_PD(1), ACCESS));
	oh = mrp_pd_handle(other, FAKE_PD(1));
	ASSERT_NE(NULL, oh);
	EXPECT_NE(oh, self->h0);
	ASSERT_EQ(0, mrp_alloc_pdh(other, 4096, oh, &b));
	EXPECT_EQ(0, mrp_free(other, b.addr));	/* other's cache holds one now */
	EXPECT_EQ(-EINVAL, mrp_alloc_pdh(self->pool, 4096, oh, &b));
	EXPECT_EQ(-EINVAL, mrp_alloc_pdh(other, 4096, self->h0, &b));
	EXPECT_EQ(-EINVAL, mrp_alloc_pdh(NULL, 4096, self->h0, &b));
	EXPECT_EQ(-EINVAL, mrp_alloc_pdh(self->pool, 4096, NULL, &b));
	EXPECT_EQ(-EINVAL, mrp_alloc_pdh(self->pool, 4096, self->h0, NULL));
	EXPECT_EQ(-EINVAL, mrp_alloc_pdh(self->pool, 0, self->h0, &b));
	errno = 0;
	EXPECT_EQ(NULL, mrp_pd_handle(self->pool, FAKE_PD(3)));
	EXPECT_EQ(ENOENT, errno);
	errno = 0;
	EXPECT_EQ(NULL, mrp_pd_handle(NULL, FAKE_PD(1)));
	EXPECT_EQ(EINVAL, errno);
	errno = 0;
	EXPECT_EQ(NULL, mrp_pd_handle(self->pool, NULL));
	EXPECT_EQ(EINVAL, errno);
	EXPECT_EQ(0, test_stats(self->pool).allocs);
	EXPECT_EQ(0, mrp_pool_close(other));
}

/* In a forked child every call fails with ECHILD, the handle's too. */
TEST_F(two_pds, fork_child)
{
	struct mrp_buf b;
	int status;
	pid_t pid;

	ASSERT_EQ(0, mrp_alloc_pdh(self->pool, 4096, self->h0, &b));
	ASSERT_EQ(0, mrp_free(self->pool, b.addr));	/* cached: the fast path's */
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		struct mrp_buf c;
		int bad = 0;

		bad |= mrp_alloc_pdh(self->pool, 4096, self->h0, &c) != -ECHILD;
		bad |= (mrp_alloc_pdh(self->pool, 4096, self->h1, &c) != -ECHILD) << 1;
		errno = 0;
		bad |= (mrp_pd_handle(self->pool, FAKE_PD(1)) != NULL || errno != ECHILD) << 2;
		bad |= (mrp_pool_close(self->pool) != 0) << 3;
		_exit(bad);
	}
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	EXPECT_TRUE(WIFEXITED(status));
	EXPECT_EQ(0, WEXITSTATUS(status));
	ASSERT_EQ(0, mrp_alloc_pdh(self->pool, 4096, self->h0, &b));
	EXPECT_EQ(0, mrp_free(self->pool, b.addr));
}

/* An arena the PD refused at growth: registered when the handle asks. */
TEST_F(two_pds, lazy_registration)
{
	struct mrp_buf b;

	fake_fail_pd = FAKE_PD(2);
	ASSERT_EQ(0, mrp_alloc(self->pool, 4096, NULL, &b));	/* grows: PD 2 refuses */
	fake_fail_pd = NULL;
	ASSERT_EQ(0, mrp_free(self->pool, b.addr));	/* cached, no keys of PD 2 */
	ASSERT_EQ(0, mrp_alloc_pdh(self->pool, 4096, self->h1, &b));
	EXPECT_TRUE(fake_mr_covers(FAKE_PD(2), b.addr, b.size, b.lkey, b.rkey));
	EXPECT_EQ(0, mrp_free(self->pool, b.addr));
}

/* Sampling and debug pools: the handle's calls are timed and checked too. */
TEST(hooked_pools)
{
	struct mrp_pool_attr a = {
		.comp_mask = MRP_POOL_ATTR_SAMPLE_EVERY, .sample_every = 1,
	};
	struct mrp_pool *pool = test_pool(&a);
	struct mrp_stats st;
	struct mrp_pdh *h;
	struct mrp_buf b;

	ASSERT_NE(NULL, pool);
	ASSERT_EQ(0, mrp_attach_pd(pool, FAKE_PD(1), ACCESS));
	h = mrp_pd_handle(pool, FAKE_PD(1));
	ASSERT_NE(NULL, h);
	for (int i = 0; i < 10; i++) {
		ASSERT_EQ(0, mrp_alloc_pdh(pool, 4096, h, &b));
		EXPECT_TRUE(fake_mr_covers(FAKE_PD(1), b.addr, b.size, b.lkey, b.rkey));
		ASSERT_EQ(0, mrp_free(pool, b.addr));
	}
	st = test_stats(pool);
	EXPECT_EQ(10, st.lat_samples);
	EXPECT_EQ(-EINVAL, mrp_alloc_pdh(NULL, 4096, h, &b));
	EXPECT_EQ(0, mrp_pool_close(pool));

	setenv("MRPOOL_DEBUG", "1", 1);
	pool = test_pool(NULL);
	unsetenv("MRPOOL_DEBUG");
	ASSERT_NE(NULL, pool);
	ASSERT_EQ(0, mrp_attach_pd(pool, FAKE_PD(1), ACCESS));
	h = mrp_pd_handle(pool, FAKE_PD(1));
	ASSERT_NE(NULL, h);
	ASSERT_EQ(0, mrp_alloc_pdh(pool, 4096, h, &b));
	ASSERT_EQ(0, mrp_free(pool, b.addr));
	/* debug mode marks what it hands out: the second free is caught */
	EXPECT_EQ(-EINVAL, mrp_free(pool, b.addr));
	EXPECT_EQ(1, test_stats(pool).double_frees);
	EXPECT_EQ(0, mrp_pool_close(pool));
	EXPECT_EQ(0, fake_live);
}

TEST_HARNESS_MAIN
