// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Host unit tests of the calls frameworks build on (1.4): bulk allocation
 * all or nothing and bulk free, one buffer's keys in several PDs, the
 * ibv_sge helper, and the arena callbacks a framework registers its own
 * domain with (told of every arena before its buffers, and before it goes).
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <infiniband/verbs.h>	/* before mrpool.h: mrp_buf_sge() */

#include "kselftest_harness.h"
#include "helpers.h"

#define ARENA	(2 << 20)

static struct mrp_pool *pool_2m(size_t max_bytes, int fallback)
{
	struct mrp_pool_attr a = {
		.comp_mask = MRP_POOL_ATTR_ARENA_SIZE | MRP_POOL_ATTR_MAX_BYTES |
			     MRP_POOL_ATTR_FALLBACK,
		.arena_size = ARENA, .max_bytes = max_bytes, .fallback = fallback,
	};

	return test_pool(&a);
}

TEST(bulk_alloc_free)
{
	struct mrp_pool *pool = pool_2m(0, 0);
	struct mrp_buf b[64];
	struct mrp_stats st;

	ASSERT_NE(NULL, pool);
	ASSERT_EQ(0, mrp_attach_pd(pool, FAKE_PD(1), IBV_ACCESS_LOCAL_WRITE |
				   IBV_ACCESS_REMOTE_WRITE));
	ASSERT_EQ(0, mrp_alloc_bulk(pool, 3000, FAKE_PD(1), b, 64));
	for (int i = 0; i < 64; i++) {
		EXPECT_EQ(4096, b[i].size);
		EXPECT_TRUE(fake_mr_covers(FAKE_PD(1), b[i].addr, b[i].size,
					   b[i].lkey, b[i].rkey));
		EXPECT_NE(0, b[i].rkey);
		for (int j = 0; j < i; j++)
			EXPECT_NE(b[i].addr, b[j].addr);
		memset(b[i].addr, i, b[i].size);	/* usable, and each its own */
	}
	for (int i = 0; i < 64; i++)
		EXPECT_EQ(i, ((unsigned char *)b[i].addr)[b[i].size - 1]);
	st = test_stats(pool);
	EXPECT_EQ(64 * 4096, st.bytes_in_use);
	EXPECT_EQ(0, mrp_free_bulk(pool, b, 64));
	st = test_stats(pool);
	EXPECT_EQ(0, st.bytes_in_use);
	EXPECT_EQ(64, st.frees);
	/* nothing to do is done */
	EXPECT_EQ(0, mrp_alloc_bulk(pool, 4096, NULL, NULL, 0));
	EXPECT_EQ(0, mrp_free_bulk(pool, NULL, 0));
	EXPECT_EQ(-EINVAL, mrp_alloc_bulk(pool, 4096, NULL, NULL, 1));
	EXPECT_EQ(-EINVAL, mrp_free_bulk(NULL, b, 1));
	EXPECT_EQ(-EINVAL, mrp_alloc_bulk(pool, 4096, FAKE_PD(7), b, 1));
	EXPECT_EQ(0, mrp_pool_close(pool));
	EXPECT_EQ(0, fake_live);
}

/* More than the pool may map: nothing held afterwards, bufs zeroed. */
TEST(bulk_all_or_nothing)
{
	struct mrp_pool *pool = pool_2m(2 * ARENA, 0);
	struct mrp_buf b[5], zero[5];
	struct mrp_stats st;

	ASSERT_NE(NULL, pool);
	memset(zero, 0, sizeof(zero));
	/* two arenas hold four 1 MiB buffers: the fifth fails */
	EXPECT_EQ(-ENOMEM, mrp_alloc_bulk(pool, 1 << 20, NULL, b, 5));
	EXPECT_EQ(0, memcmp(b, zero, sizeof(b)));
	st = test_stats(pool);
	EXPECT_EQ(0, st.bytes_in_use);
	EXPECT_EQ(st.allocs, st.frees);
	/* and the four that fit still come */
	ASSERT_EQ(0, mrp_alloc_bulk(pool, 1 << 20, NULL, b, 4));
	EXPECT_EQ(0, mrp_free_bulk(pool, b, 4));
	EXPECT_EQ(0, mrp_pool_close(pool));
}

/* A bad address among good ones: reported, and the good ones still freed. */
TEST(free_bulk_bad_entry)
{
	struct mrp_pool *pool = pool_2m(0, 0);
	struct mrp_buf b[4];
	int stack;

	ASSERT_NE(NULL, pool);
	ASSERT_EQ(0, mrp_alloc_bulk(pool, 8192, NULL, b, 4));
	b[2].addr = &stack;
	EXPECT_EQ(-EINVAL, mrp_free_bulk(pool, b, 4));
	EXPECT_EQ(8192, test_stats(pool).bytes_in_use);	/* only the real b[2] */
	EXPECT_EQ(0, mrp_pool_close_flags(pool, MRP_CLOSE_FORCE));
}

TEST(lookup_keys_several_pds)
{
	struct mrp_pool *pool = pool_2m(0, 0);
	struct ibv_pd *pds[3] = { FAKE_PD(1), NULL, FAKE_PD(2) };
	struct ibv_pd *bad[2] = { FAKE_PD(1), FAKE_PD(9) };
	struct mrp_keys k[3];
	struct mrp_buf b, one;
	int stack;

	ASSERT_NE(NULL, pool);
	ASSERT_EQ(0, mrp_attach_pd(pool, FAKE_PD(1), IBV_ACCESS_LOCAL_WRITE));
	ASSERT_EQ(0, mrp_attach_pd(pool, FAKE_PD(2), IBV_ACCESS_LOCAL_WRITE |
				   IBV_ACCESS_REMOTE_READ));
	ASSERT_EQ(0, mrp_alloc(pool, 16384, FAKE_PD(1), &b));
	/* from inside the buffer */
	ASSERT_EQ(0, mrp_lookup_keys(pool, (char *)b.addr + 100, pds, 3, k));
	EXPECT_EQ(b.lkey, k[0].lkey);
	EXPECT_EQ(0, k[0].rkey);		/* no remote access in PD 1 */
	EXPECT_EQ(0, k[1].lkey);
	EXPECT_EQ(0, k[1].rkey);
	ASSERT_EQ(0, mrp_lookup(pool, b.addr, FAKE_PD(2), &one));
	EXPECT_EQ(one.lkey, k[2].lkey);
	EXPECT_EQ(one.rkey, k[2].rkey);
	EXPECT_NE(0, k[2].rkey);
	EXPECT_TRUE(fake_mr_covers(FAKE_PD(2), b.addr, b.size, k[2].lkey, k[2].rkey));
	/* a PD not attached, a dead one, an address not the pool's: keys zeroed */
	EXPECT_EQ(-EINVAL, mrp_lookup_keys(pool, b.addr, bad, 2, k));
	EXPECT_EQ(0, k[0].lkey);
	EXPECT_EQ(-ENOENT, mrp_lookup_keys(pool, &stack, pds, 1, k));
	EXPECT_EQ(-ENOENT, mrp_lookup_keys(pool, &stack, NULL, 0, NULL));
	EXPECT_EQ(0, mrp_lookup_keys(pool, b.addr, NULL, 0, NULL));
	ASSERT_EQ(0, mrp_pd_dead(pool, FAKE_PD(2)));
	EXPECT_EQ(-ENODEV, mrp_lookup_keys(pool, b.addr, pds, 3, k));
	EXPECT_EQ(0, k[0].lkey);
	EXPECT_EQ(0, mrp_free(pool, b.addr));
	EXPECT_EQ(0, mrp_detach_pd(pool, FAKE_PD(2)));
	EXPECT_EQ(0, mrp_pool_close(pool));
	EXPECT_EQ(0, fake_live);
}

TEST(buf_sge)
{
	struct mrp_buf b = { .addr = (void *)(uintptr_t)0x200000, .size = 8192,
			     .lkey = 0x1234, .rkey = 0x5678 };
	struct ibv_sge sge = mrp_buf_sge(&b, 4096, 100);

	EXPECT_EQ(0x201000, sge.addr);
	EXPECT_EQ(100, sge.length);
	EXPECT_EQ(0x1234, sge.lkey);
}

/* What a framework's callbacks saw. */
#define MAX_SEEN 64
struct seen {
	struct { uintptr_t addr; size_t len; } live[MAX_SEEN];
	int nlive, adds, removes, refuse_after, bad;
};

static int seen_find(struct seen *s, void *addr, size_t len)
{
	for (int i = 0; i < s->nlive; i++)
		if (s->live[i].addr == (uintptr_t)addr && s->live[i].len == len)
			return i;
	return -1;
}

static int seen_add(void *ctx, void *addr, size_t len)
{
	struct seen *s = ctx;

	if (s->refuse_after >= 0 && s->adds >= s->refuse_after)
		return -EACCES;
	if (seen_find(s, addr, len) >= 0 || s->nlive == MAX_SEEN ||
	    ((uintptr_t)addr & (ARENA - 1)))
		s->bad++;
	else
		s->live[s->nlive++] = (typeof(s->live[0])){ (uintptr_t)addr, len };
	s->adds++;
	return 0;
}

static void seen_remove(void *ctx, void *addr, size_t len)
{
	struct seen *s = ctx;
	int i = seen_find(s, addr, len);

	if (i < 0) {
		s->bad++;
		return;
	}
	/* still mapped and writable: remove comes before the unmap */
	memset(addr, 0, 64);
	s->live[i] = s->live[--s->nlive];
	s->removes++;
}

/* 1 if a reported arena holds [addr, addr + len). */
static int seen_covers(struct seen *s, void *addr, size_t len)
{
	for (int i = 0; i < s->nlive; i++)
		if ((uintptr_t)addr >= s->live[i].addr &&
		    (uintptr_t)addr + len <= s->live[i].addr + s->live[i].len)
			return 1;
	return 0;
}

TEST(arena_ops_lifecycle)
{
	struct mrp_pool *pool = pool_2m(0, 0);
	struct seen s = { .refuse_after = -1 };
	struct mrp_arena_ops ops = { .add = seen_add, .remove = seen_remove, .ctx = &s };
	struct mrp_buf early, b, big;

	ASSERT_NE(NULL, pool);
	/* an arena from before the set is reported by the set */
	ASSERT_EQ(0, mrp_alloc(pool, 4096, NULL, &early));
	ASSERT_EQ(0, mrp_set_arena_ops(pool, &ops));
	EXPECT_EQ(1, s.adds);
	EXPECT_TRUE(seen_covers(&s, early.addr, early.size));
	EXPECT_EQ(-EEXIST, mrp_set_arena_ops(pool, &ops));
	/* growth reports the new arena before the buffer comes out */
	ASSERT_EQ(0, mrp_alloc(pool, 65536, NULL, &b));
	EXPECT_EQ(2, s.adds);
	EXPECT_TRUE(seen_covers(&s, b.addr, b.size));
	/* a large buffer is an arena of its own */
	ASSERT_EQ(0, mrp_alloc(pool, 3 << 20, NULL, &big));
	EXPECT_EQ(3, s.adds);
	EXPECT_TRUE(seen_covers(&s, big.addr, big.size));
	/* trim removes what it releases, and only that */
	EXPECT_EQ(0, mrp_free(pool, b.addr));
	EXPECT_EQ(0, mrp_free(pool, big.addr));
	EXPECT_EQ(2, mrp_trim(pool, MRP_TRIM_FLUSH));
	EXPECT_EQ(2, s.removes);
	EXPECT_EQ(1, s.nlive);
	EXPECT_TRUE(seen_covers(&s, early.addr, early.size));
	/* clearing removes the rest; clearing twice says so */
	EXPECT_EQ(0, mrp_set_arena_ops(pool, NULL));
	EXPECT_EQ(3, s.removes);
	EXPECT_EQ(0, s.nlive);
	EXPECT_EQ(-ENOENT, mrp_set_arena_ops(pool, NULL));
	/* set again: close removes every arena */
	ASSERT_EQ(0, mrp_set_arena_ops(pool, &ops));
	EXPECT_EQ(1, s.nlive);
	EXPECT_EQ(0, mrp_free(pool, early.addr));
	EXPECT_EQ(0, mrp_pool_close(pool));
	EXPECT_EQ(0, s.nlive);
	EXPECT_EQ(s.adds, s.removes);
	EXPECT_EQ(0, s.bad);
}

/* A refusal fails the growth (nothing left behind) or the set. */
TEST(arena_ops_refused)
{
	struct mrp_pool *pool = pool_2m(0, 0);
	struct seen s = { .refuse_after = 0 };
	struct mrp_arena_ops ops = { .add = seen_add, .remove = seen_remove, .ctx = &s };
	struct mrp_arena_ops half = { .add = seen_add };
	struct mrp_buf b, c;
	struct mrp_stats st;

	ASSERT_NE(NULL, pool);
	EXPECT_EQ(-EINVAL, mrp_set_arena_ops(pool, &half));
	ops.comp_mask = 1;
	EXPECT_EQ(-EINVAL, mrp_set_arena_ops(pool, &ops));
	ops.comp_mask = 0;
	ASSERT_EQ(0, mrp_set_arena_ops(pool, &ops));
	EXPECT_EQ(-EACCES, mrp_alloc(pool, 4096, NULL, &b));
	st = test_stats(pool);
	EXPECT_EQ(0, st.arenas);
	EXPECT_EQ(0, st.bytes_mapped);
	/* allowed again: growth works */
	s.refuse_after = -1;
	ASSERT_EQ(0, mrp_alloc(pool, 4096, NULL, &b));
	ASSERT_EQ(0, mrp_alloc(pool, 8192, NULL, &c));
	EXPECT_EQ(2, s.nlive);
	ASSERT_EQ(0, mrp_set_arena_ops(pool, NULL));
	EXPECT_EQ(0, s.nlive);
	/* a set refused on the second existing arena takes back the first */
	s.adds = 0;
	s.removes = 0;
	s.refuse_after = 1;
	EXPECT_EQ(-EACCES, mrp_set_arena_ops(pool, &ops));
	EXPECT_EQ(1, s.adds);
	EXPECT_EQ(1, s.removes);
	EXPECT_EQ(0, s.nlive);
	EXPECT_EQ(-ENOENT, mrp_set_arena_ops(pool, NULL));	/* nothing set */
	EXPECT_EQ(0, mrp_free(pool, b.addr));
	EXPECT_EQ(0, mrp_free(pool, c.addr));
	EXPECT_EQ(0, mrp_pool_close(pool));
	EXPECT_EQ(0, s.bad);
}

/* A child's close forgets the parent's arenas: it must not remove them. */
TEST(arena_ops_fork)
{
	struct mrp_pool *pool = pool_2m(0, 0);
	struct seen s = { .refuse_after = -1 };
	struct mrp_arena_ops ops = { .add = seen_add, .remove = seen_remove, .ctx = &s };
	struct mrp_buf b;
	int status;
	pid_t pid;

	ASSERT_NE(NULL, pool);
	ASSERT_EQ(0, mrp_set_arena_ops(pool, &ops));
	ASSERT_EQ(0, mrp_alloc(pool, 4096, NULL, &b));
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		int bad = mrp_set_arena_ops(pool, NULL) != -ECHILD;

		bad |= mrp_pool_close(pool) != 0;
		_exit(bad || s.removes ? 1 : 0);
	}
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	EXPECT_EQ(0, mrp_free(pool, b.addr));
	EXPECT_EQ(0, mrp_pool_close(pool));
	EXPECT_EQ(1, s.removes);
	EXPECT_EQ(0, s.bad);
}

/*
 * The library reads the struct mrp_arena_ops a 1.4 caller passes and no
 * byte past it (a struct ending where the caller's memory ends), also once
 * the struct grows: a new field is read only under its comp_mask bit.
 */
TEST(arena_ops_read_in_bounds)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	struct mrp_pool *pool = test_pool(NULL);
	struct seen s = { .refuse_after = -1 };
	struct mrp_arena_ops *ops;
	struct mrp_buf b;
	char *m;

	ASSERT_NE(NULL, pool);
	m = mmap(NULL, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, m);
	ASSERT_EQ(0, mprotect(m + page, page, PROT_NONE));
	/* the 1.4 struct: comp_mask, add, remove, ctx, ending at the guard */
	ops = (struct mrp_arena_ops *)(m + page - sizeof(*ops));
	memset(ops, 0, sizeof(*ops));
	ops->add = seen_add;
	ops->remove = seen_remove;
	ops->ctx = &s;
	ASSERT_EQ(0, mrp_set_arena_ops(pool, ops));
	ASSERT_EQ(0, mrp_alloc(pool, 4096, NULL, &b));
	EXPECT_EQ(1, s.adds);
	EXPECT_EQ(0, mrp_free(pool, b.addr));
	EXPECT_EQ(0, mrp_set_arena_ops(pool, NULL));
	EXPECT_EQ(1, s.removes);
	EXPECT_EQ(0, s.bad);
	EXPECT_EQ(0, mrp_pool_close(pool));
	munmap(m, 2 * page);
}

TEST_HARNESS_MAIN
