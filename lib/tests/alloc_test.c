// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Host unit tests of allocation on the standalone backend: size classes,
 * alignment, large buffers, lookup, settings, and argument checking.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <infiniband/verbs.h>

#include "kselftest_harness.h"
#include "helpers.h"

FIXTURE(pool) {
	struct mrp_pool *pool;
};

FIXTURE_SETUP(pool)
{
	self->pool = test_pool(NULL);
	ASSERT_NE(NULL, self->pool);
}

FIXTURE_TEARDOWN(pool)
{
	EXPECT_EQ(0, mrp_pool_close(self->pool));
}

/* The runtime version is the header's. */
TEST(version)
{
	EXPECT_EQ(MRP_VERSION, mrp_version());
	EXPECT_EQ(1, MRP_VERSION >> 16);
}

/* Each size lands in the next power of two >= 4 KiB, aligned to it. */
TEST_F(pool, size_classes)
{
	static const size_t in[] = { 1, 4095, 4096, 4097, 8192, 10000, 65536,
				     (1 << 20) + 1, 2 << 20 };
	static const size_t want[] = { 4096, 4096, 4096, 8192, 8192, 16384, 65536,
				       2 << 20, 2 << 20 };
	struct mrp_buf b[9];

	for (unsigned int i = 0; i < 9; i++) {
		ASSERT_EQ(0, mrp_alloc(self->pool, in[i], NULL, &b[i]));
		EXPECT_EQ(want[i], b[i].size);
		EXPECT_EQ(0, (uintptr_t)b[i].addr & (want[i] - 1));
		EXPECT_EQ(0, b[i].lkey);
		EXPECT_EQ(0, b[i].rkey);
		memset(b[i].addr, (int)i + 1, b[i].size);
	}
	/* no buffer overwrote another */
	for (unsigned int i = 0; i < 9; i++) {
		unsigned char *p = b[i].addr;

		EXPECT_EQ(i + 1, p[0]);
		EXPECT_EQ(i + 1, p[b[i].size - 1]);
		EXPECT_EQ(0, mrp_free(self->pool, b[i].addr));
	}
}

/* Live buffers never overlap, and their bytes survive other traffic. */
TEST_F(pool, distinct_buffers)
{
	enum { N = 600 };
	struct mrp_buf *b = calloc(N, sizeof(*b));

	ASSERT_NE(NULL, b);
	for (int i = 0; i < N; i++) {
		ASSERT_EQ(0, mrp_alloc(self->pool, 4096u << (i % 4), NULL, &b[i]));
		memset(b[i].addr, i & 0xff, b[i].size);
	}
	for (int i = 0; i < N; i += 2)
		ASSERT_EQ(0, mrp_free(self->pool, b[i].addr));
	for (int i = 0; i < N; i += 2) {
		ASSERT_EQ(0, mrp_alloc(self->pool, 4096u << (i % 4), NULL, &b[i]));
		memset(b[i].addr, i & 0xff, b[i].size);
	}
	for (int i = 0; i < N; i++) {
		unsigned char *p = b[i].addr;

		ASSERT_EQ(i & 0xff, p[0]);
		ASSERT_EQ(i & 0xff, p[b[i].size / 2]);
		ASSERT_EQ(i & 0xff, p[b[i].size - 1]);
		ASSERT_EQ(0, mrp_free(self->pool, b[i].addr));
	}
	free(b);
}

/* Alignment beyond the class bumps the class; beyond 2 MiB, a large arena. */
TEST_F(pool, alignment)
{
	struct mrp_buf b;

	ASSERT_EQ(0, mrp_alloc_aligned(self->pool, 100, 65536, NULL, &b));
	EXPECT_EQ(0, (uintptr_t)b.addr & 65535);
	EXPECT_EQ(65536, b.size);
	EXPECT_EQ(0, mrp_free(self->pool, b.addr));

	ASSERT_EQ(0, mrp_alloc_aligned(self->pool, 100, 16 << 20, NULL, &b));
	EXPECT_EQ(0, (uintptr_t)b.addr & ((16 << 20) - 1));
	EXPECT_LE(100, b.size);
	memset(b.addr, 1, 100);
	EXPECT_EQ(0, mrp_free(self->pool, b.addr));

	EXPECT_EQ(-EINVAL, mrp_alloc_aligned(self->pool, 100, 3000, NULL, &b));
	EXPECT_EQ(-EINVAL, mrp_alloc_aligned(self->pool, 100, 0, NULL, &b));
}

/* Above 2 MiB a buffer is its own arena, parked for reuse when freed. */
TEST_F(pool, large)
{
	struct mrp_stats st;
	struct mrp_buf b, c, l;
	void *first;

	ASSERT_EQ(0, mrp_alloc(self->pool, (3 << 20) + 5, NULL, &b));
	EXPECT_EQ(4 << 20, b.size);
	EXPECT_EQ(0, (uintptr_t)b.addr & ((2 << 20) - 1));
	memset(b.addr, 7, b.size);
	ASSERT_EQ(0, mrp_lookup(self->pool, (char *)b.addr + (3 << 20), NULL, &l));
	EXPECT_EQ(b.addr, l.addr);
	EXPECT_EQ(b.size, l.size);
	st = test_stats(self->pool);
	EXPECT_EQ(1, st.large_allocs);
	EXPECT_EQ(4 << 20, st.bytes_in_use);
	first = b.addr;
	EXPECT_EQ(0, mrp_free(self->pool, b.addr));
	EXPECT_EQ(-EINVAL, mrp_free(self->pool, b.addr));	/* double free seen */
	st = test_stats(self->pool);
	EXPECT_EQ(0, st.bytes_in_use);
	EXPECT_EQ(1, st.arenas);
	/* a fitting parked arena is reused */
	ASSERT_EQ(0, mrp_alloc(self->pool, 3 << 20, NULL, &c));
	EXPECT_EQ(first, c.addr);
	EXPECT_EQ(0, mrp_free(self->pool, c.addr));
	EXPECT_EQ(1, mrp_trim(self->pool, 0));
	st = test_stats(self->pool);
	EXPECT_EQ(0, st.arenas);
	EXPECT_EQ(0, st.bytes_mapped);
}

/* Any interior address finds its buffer; foreign addresses do not. */
TEST_F(pool, lookup)
{
	struct mrp_buf b, l;
	int on_stack;

	ASSERT_EQ(0, mrp_alloc(self->pool, 16384, NULL, &b));
	ASSERT_EQ(0, mrp_lookup(self->pool, (char *)b.addr + 12345, NULL, &l));
	EXPECT_EQ(b.addr, l.addr);
	EXPECT_EQ(16384, l.size);
	EXPECT_EQ(-ENOENT, mrp_lookup(self->pool, &on_stack, NULL, &l));
	EXPECT_EQ(-ENOENT, mrp_lookup(self->pool, NULL, NULL, &l));
	EXPECT_EQ(-EINVAL, mrp_lookup(self->pool, b.addr, FAKE_PD(9), &l));
	EXPECT_EQ(0, mrp_free(self->pool, b.addr));
}

/*
 * An rkey only for a PD attached with remote access: class, large and
 * fallback buffers, from the fast path, the slow path and lookup.
 */
TEST(rkey_needs_remote_access)
{
	struct mrp_pool_attr a = {
		.comp_mask = MRP_POOL_ATTR_FALLBACK | MRP_POOL_ATTR_MAX_BYTES,
		.fallback = 1, .max_bytes = 8 << 20,
	};
	struct ibv_pd *local = FAKE_PD(1), *remote = FAKE_PD(2);
	struct mrp_buf b[4], l, f;
	struct mrp_pool *pool = test_pool(&a);
	struct mrp_stats st;
	int i;

	ASSERT_NE(NULL, pool);
	ASSERT_EQ(0, mrp_attach_pd(pool, local, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND));
	ASSERT_EQ(0, mrp_attach_pd(pool, remote, IBV_ACCESS_LOCAL_WRITE |
					    IBV_ACCESS_REMOTE_READ));
	for (i = 0; i < 4; i++) {
		/* the second time round, from the thread cache */
		ASSERT_EQ(0, mrp_alloc(pool, 8192, local, &b[0]));
		EXPECT_NE(0, b[0].lkey);
		EXPECT_EQ(0, b[0].rkey);
		EXPECT_TRUE(fake_mr_covers(local, b[0].addr, 8192, b[0].lkey, 0));
		ASSERT_EQ(0, mrp_lookup(pool, b[0].addr, remote, &l));
		EXPECT_NE(0, l.rkey);
		EXPECT_TRUE(fake_mr_covers(remote, l.addr, l.size, l.lkey, l.rkey));
		ASSERT_EQ(0, mrp_free(pool, b[0].addr));
	}
	ASSERT_EQ(0, mrp_alloc(pool, 3 << 20, local, &b[1]));
	EXPECT_EQ(0, b[1].rkey);
	ASSERT_EQ(0, mrp_lookup(pool, b[1].addr, remote, &l));
	EXPECT_NE(0, l.rkey);
	/* the 8 MiB are mapped (two 4 MiB arenas): these two are fallbacks */
	ASSERT_EQ(0, mrp_alloc(pool, 4 << 20, remote, &b[2]));
	EXPECT_NE(0, b[2].rkey);
	EXPECT_TRUE(fake_mr_covers(remote, b[2].addr, b[2].size, b[2].lkey, b[2].rkey));
	ASSERT_EQ(0, mrp_alloc(pool, 4 << 20, local, &f));
	ASSERT_EQ(0, mrp_stats(pool, &st, sizeof(st)));
	EXPECT_EQ(2, st.fallbacks);
	EXPECT_NE(0, f.lkey);
	EXPECT_EQ(0, f.rkey);
	ASSERT_EQ(0, mrp_lookup(pool, f.addr, remote, &l));
	EXPECT_NE(0, l.rkey);
	EXPECT_TRUE(fake_mr_covers(remote, f.addr, f.size, l.lkey, l.rkey));
	ASSERT_EQ(0, mrp_free(pool, f.addr));
	ASSERT_EQ(0, mrp_free(pool, b[2].addr));
	ASSERT_EQ(0, mrp_free(pool, b[1].addr));
	EXPECT_EQ(0, mrp_pool_close(pool));
}

/* Wrong arguments get -EINVAL (or NULL + EINVAL), never a crash. */
TEST_F(pool, bad_arguments)
{
	struct mrp_pool_attr a;
	struct mrp_buf b;
	int on_stack;

	EXPECT_EQ(-EINVAL, mrp_alloc(NULL, 4096, NULL, &b));
	EXPECT_EQ(-EINVAL, mrp_alloc(self->pool, 0, NULL, &b));
	EXPECT_EQ(-EINVAL, mrp_alloc(self->pool, 4096, NULL, NULL));
	EXPECT_EQ(-EINVAL, mrp_alloc(self->pool, 4096, FAKE_PD(3), &b));
	EXPECT_EQ(-ENOMEM, mrp_alloc(self->pool, SIZE_MAX, NULL, &b));
	EXPECT_EQ(0, mrp_free(self->pool, NULL));
	EXPECT_EQ(-EINVAL, mrp_free(NULL, &on_stack));
	EXPECT_EQ(-EINVAL, mrp_free(self->pool, &on_stack));
	ASSERT_EQ(0, mrp_alloc(self->pool, 8192, NULL, &b));
	EXPECT_EQ(-EINVAL, mrp_free(self->pool, (char *)b.addr + 64));
	EXPECT_EQ(0, mrp_free(self->pool, b.addr));
	EXPECT_EQ(-EINVAL, mrp_pool_close(NULL));
	EXPECT_EQ(-EINVAL, mrp_stats(NULL, NULL, 0));
	EXPECT_EQ(-EINVAL, mrp_stats(self->pool, NULL, 0));
	EXPECT_EQ(-EINVAL, mrp_trim(self->pool, 0x80));
	EXPECT_EQ(-EINVAL, mrp_trim(NULL, 0));
	EXPECT_EQ(-EINVAL, mrp_attach_pd(self->pool, NULL, 0));
	EXPECT_EQ(-EINVAL, mrp_attach_pd(NULL, FAKE_PD(1), 0));
	EXPECT_EQ(-ENOENT, mrp_detach_pd(self->pool, FAKE_PD(1)));
	EXPECT_EQ(-EINVAL, mrp_lookup(NULL, b.addr, NULL, &b));
	EXPECT_EQ(-EINVAL, mrp_mw_bind(NULL, NULL, b.addr, 1, 0, 0, 0, NULL));
	EXPECT_EQ(-EINVAL, mrp_mw_invalidate(self->pool, &on_stack));
	ASSERT_EQ(0, mrp_alloc(self->pool, 8192, NULL, &b));
	EXPECT_EQ(-ENOENT, mrp_mw_invalidate(self->pool, b.addr));
	EXPECT_EQ(0, mrp_free(self->pool, b.addr));

	memset(&a, 0, sizeof(a));
	a.comp_mask = 1u << 31;
	errno = 0;
	EXPECT_EQ(NULL, mrp_pool_open(&a));
	EXPECT_EQ(EINVAL, errno);
	a.comp_mask = MRP_POOL_ATTR_ARENA_SIZE;
	a.arena_size = 1 << 20;
	errno = 0;
	EXPECT_EQ(NULL, mrp_pool_open(&a));
	EXPECT_EQ(EINVAL, errno);
	a.comp_mask = MRP_POOL_ATTR_BACKEND;
	a.backend = (enum mrp_backend)7;
	EXPECT_EQ(NULL, mrp_pool_open(&a));
	a.comp_mask = MRP_POOL_ATTR_BACKEND | MRP_POOL_ATTR_DEVICE;
	a.backend = MRP_BACKEND_KERNEL;
	a.device = "/nonexistent/mrpool";
	errno = 0;
	EXPECT_EQ(NULL, mrp_pool_open(&a));
	EXPECT_EQ(ENODEV, errno);
}

/* Without the module, auto picks the standalone backend and says so. */
TEST(auto_backend)
{
	struct mrp_pool_attr a = {
		.comp_mask = MRP_POOL_ATTR_DEVICE | MRP_POOL_ATTR_BACKGROUND,
		.device = "/nonexistent/mrpool",
	};
	struct mrp_pool *pool = mrp_pool_open(&a);
	struct mrp_stats st;
	struct mrp_buf b;

	ASSERT_NE(NULL, pool);
	ASSERT_EQ(0, mrp_alloc(pool, 4096, NULL, &b));
	st = test_stats(pool);
	EXPECT_EQ(MRP_KIND_ANON, st.backend);
	EXPECT_EQ(4 << 20, st.bytes_mapped);
	EXPECT_EQ(1, st.arenas);
	EXPECT_EQ(0, mrp_free(pool, b.addr));
	EXPECT_EQ(0, mrp_pool_close(pool));
}

/* MRPOOL_* variables apply where the attributes are silent, and are checked. */
TEST(environment)
{
	struct mrp_pool_attr a = {
		.comp_mask = MRP_POOL_ATTR_ARENA_SIZE, .arena_size = 2 << 20,
	};
	struct mrp_pool *pool;
	struct mrp_stats st;
	struct mrp_buf b;

	ASSERT_EQ(0, setenv("MRPOOL_ARENA_SIZE", "8M", 1));
	pool = test_pool(NULL);
	ASSERT_NE(NULL, pool);
	ASSERT_EQ(0, mrp_alloc(pool, 4096, NULL, &b));
	st = test_stats(pool);
	EXPECT_EQ(8 << 20, st.bytes_mapped);
	EXPECT_EQ(0, mrp_free(pool, b.addr));
	EXPECT_EQ(0, mrp_pool_close(pool));

	/* the attribute wins over the variable */
	pool = test_pool(&a);
	ASSERT_NE(NULL, pool);
	ASSERT_EQ(0, mrp_alloc(pool, 4096, NULL, &b));
	st = test_stats(pool);
	EXPECT_EQ(2 << 20, st.bytes_mapped);
	EXPECT_EQ(0, mrp_free(pool, b.addr));
	EXPECT_EQ(0, mrp_pool_close(pool));

	/* decimal, whatever the leading zeros: ten, not octal eight */
	ASSERT_EQ(0, setenv("MRPOOL_ARENA_SIZE", "010M", 1));
	pool = test_pool(NULL);
	ASSERT_NE(NULL, pool);
	ASSERT_EQ(0, mrp_alloc(pool, 4096, NULL, &b));
	st = test_stats(pool);
	EXPECT_EQ(10 << 20, st.bytes_mapped);
	EXPECT_EQ(0, mrp_free(pool, b.addr));
	EXPECT_EQ(0, mrp_pool_close(pool));
	/* no hex, sign, blank, or a size that overflows */
	static const char *const bad[] = { "0x10M", "-1", "+8M", " 8M", "99999999999999G", "8MB" };

	for (unsigned int i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ASSERT_EQ(0, setenv("MRPOOL_ARENA_SIZE", bad[i], 1));
		errno = 0;
		EXPECT_EQ(NULL, test_pool(NULL)) TH_LOG("%s", bad[i]);
		EXPECT_EQ(EINVAL, errno);
	}
	ASSERT_EQ(0, unsetenv("MRPOOL_ARENA_SIZE"));

	ASSERT_EQ(0, setenv("MRPOOL_TCACHE_BYTES", "lots", 1));
	errno = 0;
	EXPECT_EQ(NULL, test_pool(NULL));
	EXPECT_EQ(EINVAL, errno);
	ASSERT_EQ(0, setenv("MRPOOL_TCACHE_BYTES", "64K", 1));
	ASSERT_EQ(0, setenv("MRPOOL_FALLBACK", "2", 1));
	EXPECT_EQ(NULL, test_pool(NULL));
	ASSERT_EQ(0, setenv("MRPOOL_FALLBACK", "1", 1));
	ASSERT_EQ(0, setenv("MRPOOL_BACKEND", "floppy", 1));
	EXPECT_EQ(NULL, mrp_pool_open(NULL));
	ASSERT_EQ(0, setenv("MRPOOL_BACKEND", "anon", 1));
	pool = mrp_pool_open(NULL);
	ASSERT_NE(NULL, pool);
	st = test_stats(pool);
	EXPECT_EQ(MRP_KIND_ANON, st.backend);
	EXPECT_EQ(0, mrp_pool_close(pool));
}

/*
 * A caller's stats struct larger than the library's (built against a
 * newer header): the bytes past what the library fills read 0, not what
 * the caller's stack held; a smaller one gets its size and no more.
 */
TEST(stats_zero_tail)
{
	struct mrp_pool *pool = test_pool(NULL);
	unsigned char buf[sizeof(struct mrp_stats) + 64];
	struct mrp_buf b;

	ASSERT_NE(NULL, pool);
	ASSERT_EQ(0, mrp_alloc(pool, 4096, NULL, &b));
	memset(buf, 0xa5, sizeof(buf));
	ASSERT_EQ(0, mrp_stats(pool, (struct mrp_stats *)buf, sizeof(buf)));
	EXPECT_EQ(1, ((struct mrp_stats *)buf)->allocs);
	for (size_t i = sizeof(struct mrp_stats); i < sizeof(buf); i++) {
		ASSERT_EQ(0, buf[i]) TH_LOG("byte %zu", i);
	}
	memset(buf, 0xa5, sizeof(buf));
	ASSERT_EQ(0, mrp_stats(pool, (struct mrp_stats *)buf, 8));
	EXPECT_EQ(0xa5, buf[8]);

	ASSERT_EQ(0, mrp_attach_pd(pool, FAKE_PD(0), IBV_ACCESS_LOCAL_WRITE));
	memset(buf, 0xa5, sizeof(buf));
	ASSERT_EQ(0, mrp_pd_stats(pool, FAKE_PD(0), (struct mrp_pd_stats *)buf,
				  sizeof(struct mrp_pd_stats) + 64));
	EXPECT_EQ(MRP_PD_LIVE, ((struct mrp_pd_stats *)buf)->state);
	for (size_t i = sizeof(struct mrp_pd_stats); i < sizeof(struct mrp_pd_stats) + 64; i++) {
		ASSERT_EQ(0, buf[i]) TH_LOG("byte %zu", i);
	}
	EXPECT_EQ(0, mrp_free(pool, b.addr));
	EXPECT_EQ(0, mrp_detach_pd(pool, FAKE_PD(0)));
	EXPECT_EQ(0, mrp_pool_close(pool));
}

/* Errors have words, mrpool's own included. */
TEST(error_strings)
{
	EXPECT_NE(NULL, strstr(mrp_strerror(-ECHILD), "fork"));
	EXPECT_NE(NULL, strstr(mrp_strerror(ECHILD), "fork"));
	EXPECT_NE(NULL, mrp_strerror(-EIO));
	EXPECT_STREQ("success", mrp_strerror(0));
}

/* Many pools at once each get a slot; the 33rd gets EMFILE. */
TEST(many_pools)
{
	struct mrp_pool *p[33];
	struct mrp_buf b;
	int n;

	for (n = 0; n < 33; n++) {
		p[n] = test_pool(NULL);
		if (!p[n])
			break;
	}
	EXPECT_EQ(32, n);
	EXPECT_EQ(EMFILE, errno);
	/* a buffer of one pool is not another pool's */
	ASSERT_EQ(0, mrp_alloc(p[0], 4096, NULL, &b));
	EXPECT_EQ(-EINVAL, mrp_free(p[1], b.addr));
	EXPECT_EQ(0, mrp_free(p[0], b.addr));
	for (int i = 0; i < n; i++)
		EXPECT_EQ(0, mrp_pool_close(p[i]));
	/* slots are reused, and stale caches of closed pools are not */
	p[0] = test_pool(NULL);
	ASSERT_NE(NULL, p[0]);
	ASSERT_EQ(0, mrp_alloc(p[0], 4096, NULL, &b));
	EXPECT_EQ(0, mrp_free(p[0], b.addr));
	EXPECT_EQ(0, mrp_pool_close(p[0]));
}

TEST_HARNESS_MAIN
