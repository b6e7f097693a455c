// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Host unit tests of bad frees: double frees of class and large buffers,
 * stale pointers into arenas trimmed and created again, and MRPOOL_DEBUG,
 * which checks every free.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "kselftest_harness.h"
#include "helpers.h"
#include "internal.h"

#define MIB	(1u << 20)

/*
 * A class buffer freed twice while another buffer of its arena is live: the
 * second copy is dropped when the cache flushes to the depot, counted, and
 * trim keeps the arena (the live buffer stays mapped and intact).
 */
TEST(double_free_class_flush)
{
	struct mrp_pool_attr at = {
		.comp_mask = MRP_POOL_ATTR_ARENA_SIZE, .arena_size = 4 * MIB,
	};
	struct mrp_pool *pool = test_pool(&at);
	struct mrp_buf a, b, x, y;
	struct mrp_stats st;

	ASSERT_NE(NULL, pool);
	/* 2 MiB class, 4 MiB arena: a and b are its two buffers */
	ASSERT_EQ(0, mrp_alloc(pool, 2 * MIB, NULL, &a));
	ASSERT_EQ(0, mrp_alloc(pool, 2 * MIB, NULL, &b));
	ASSERT_NE(a.addr, b.addr);
	memset(b.addr, 0xb5, b.size);
	ASSERT_EQ(0, mrp_free(pool, a.addr));
	/* the cache (one 2 MiB buffer) is full: this goes through the slow path */
	mrp_free(pool, a.addr);
	EXPECT_EQ(0, mrp_trim(pool, MRP_TRIM_FLUSH));
	st = test_stats(pool);
	EXPECT_EQ(1, st.double_frees);
	EXPECT_EQ(1, st.arenas);
	EXPECT_EQ(0xb5, ((unsigned char *)b.addr)[0]);
	EXPECT_EQ(0xb5, ((unsigned char *)b.addr)[b.size - 1]);
	memset(b.addr, 0x5b, b.size);	/* still mapped */
	/* a is handed out once, never twice; b not at all */
	ASSERT_EQ(0, mrp_alloc(pool, 2 * MIB, NULL, &x));
	EXPECT_EQ(a.addr, x.addr);
	ASSERT_EQ(0, mrp_alloc(pool, 2 * MIB, NULL, &y));
	EXPECT_NE(a.addr, y.addr);
	EXPECT_NE(b.addr, y.addr);
	EXPECT_EQ(0, mrp_free(pool, x.addr));
	EXPECT_EQ(0, mrp_free(pool, y.addr));
	EXPECT_EQ(0, mrp_free(pool, b.addr));
	EXPECT_EQ(2, mrp_trim(pool, MRP_TRIM_FLUSH));
	EXPECT_EQ(0, mrp_pool_close(pool));
}

/* Both copies of a small double free sit in the cache: caught at the flush. */
TEST(double_free_class_cached)
{
	struct mrp_pool *pool = test_pool(NULL);
	struct mrp_buf a, b[64];
	struct mrp_stats st;

	ASSERT_NE(NULL, pool);
	ASSERT_EQ(0, mrp_alloc(pool, 4096, NULL, &a));
	ASSERT_EQ(0, mrp_free(pool, a.addr));
	ASSERT_EQ(0, mrp_free(pool, a.addr));	/* not checked on the fast path */
	st = test_stats(pool);
	EXPECT_EQ(0, st.double_frees);
	EXPECT_EQ(1, mrp_trim(pool, MRP_TRIM_FLUSH));
	st = test_stats(pool);
	EXPECT_EQ(1, st.double_frees);
	/* the depot holds each buffer once: 64 allocations, 64 addresses */
	for (int i = 0; i < 64; i++) {
		ASSERT_EQ(0, mrp_alloc(pool, 4096, NULL, &b[i]));
		for (int j = 0; j < i; j++)
			ASSERT_NE(b[j].addr, b[i].addr);
	}
	for (int i = 0; i < 64; i++)
		ASSERT_EQ(0, mrp_free(pool, b[i].addr));
	EXPECT_EQ(0, mrp_pool_close(pool));
}

/* A free of a buffer already back in the depot is refused on the slow path. */
TEST(double_free_after_flush)
{
	struct mrp_pool *pool = test_pool(NULL);
	struct mrp_buf a, b;
	struct mrp_stats st;

	ASSERT_NE(NULL, pool);
	/* 2 MiB class: a cache of one buffer, two buffers per 4 MiB arena */
	ASSERT_EQ(0, mrp_alloc(pool, 2 * MIB, NULL, &a));
	ASSERT_EQ(0, mrp_alloc(pool, 2 * MIB, NULL, &b));
	ASSERT_EQ(0, mrp_free(pool, a.addr));
	ASSERT_EQ(0, mrp_trim(pool, MRP_TRIM_FLUSH));	/* a in the depot, b live */
	ASSERT_EQ(0, mrp_free(pool, b.addr));		/* the cache is full again */
	EXPECT_EQ(-EINVAL, mrp_free(pool, a.addr));
	st = test_stats(pool);
	EXPECT_EQ(1, st.double_frees);
	EXPECT_EQ(0, st.bytes_in_use);
	EXPECT_EQ(1, mrp_trim(pool, MRP_TRIM_FLUSH));
	EXPECT_EQ(0, mrp_pool_close(pool));
}

struct racer {
	struct mrp_pool *pool;
	void *addr;
	pthread_barrier_t *go;
	int ret;
};

static void *free_racer(void *arg)
{
	struct racer *r = arg;

	pthread_barrier_wait(r->go);
	r->ret = mrp_free(r->pool, r->addr);
	return NULL;
}

/* Threads freeing one large buffer at once: exactly one succeeds. */
TEST(double_free_large_threads)
{
	enum { THREADS = 4, ROUNDS = 500 };
	struct mrp_pool *pool = test_pool(NULL);
	struct racer r[THREADS];
	pthread_t t[THREADS];
	pthread_barrier_t go;
	struct mrp_stats st;
	struct mrp_buf l;

	ASSERT_NE(NULL, pool);
	for (int round = 0; round < ROUNDS; round++) {
		int ok = 0, inval = 0;

		ASSERT_EQ(0, mrp_alloc(pool, 3 * MIB, NULL, &l));
		ASSERT_EQ(0, pthread_barrier_init(&go, NULL, THREADS));
		for (int i = 0; i < THREADS; i++) {
			r[i] = (struct racer){ pool, l.addr, &go, 1 };
			ASSERT_EQ(0, pthread_create(&t[i], NULL, free_racer, &r[i]));
		}
		for (int i = 0; i < THREADS; i++) {
			ASSERT_EQ(0, pthread_join(t[i], NULL));
			ok += r[i].ret == 0;
			inval += r[i].ret == -EINVAL;
		}
		pthread_barrier_destroy(&go);
		ASSERT_EQ(1, ok);
		ASSERT_EQ(THREADS - 1, inval);
	}
	st = test_stats(pool);
	EXPECT_EQ(ROUNDS, st.large_allocs);
	EXPECT_EQ(0, st.bytes_in_use);
	EXPECT_EQ(ROUNDS * (THREADS - 1), st.double_frees);
	/* one arena, parked once per round and reused: never twice on the list */
	EXPECT_EQ(1, st.arenas);
	EXPECT_EQ(1, mrp_trim(pool, 0));
	EXPECT_EQ(0, mrp_pool_close(pool));
}

/*
 * A backend that gives the last region released back to the next request
 * of its size, as mmap usually does with a hole, but every time.
 */
static const struct mrp_backend_ops *real_ops;
static struct mrp_backend_ops recycle_ops;
static struct mrp_region parked;

static int recycle_map(struct mrp_pool *pool, size_t size, size_t align,
		       struct mrp_region *r)
{
	if (parked.base && parked.size == size && !(parked.base & (align - 1))) {
		*r = parked;
		parked.base = 0;
		memset((void *)r->base, 0, r->size);
		return 0;
	}
	return real_ops->map(pool, size, align, r);
}

static void recycle_unmap(struct mrp_pool *pool, struct mrp_region *r)
{
	if (!parked.base) {
		parked = *r;
		return;
	}
	real_ops->unmap(pool, r);
}

/*
 * A pointer kept past its free, into an arena that trim released and a new
 * arena took again: the new owner's buffers are never handed out twice nor
 * trimmed under it. Without MRPOOL_DEBUG the free is absorbed by the cache
 * and dropped at the flush; with it, -EINVAL at once.
 */
FIXTURE(stale) {
	struct mrp_pool *pool;
};

FIXTURE_VARIANT(stale) {
	int debug;
};

FIXTURE_VARIANT_ADD(stale, cached) { .debug = 0 };
FIXTURE_VARIANT_ADD(stale, debug) { .debug = 1 };

FIXTURE_SETUP(stale)
{
	struct mrp_pool_attr at = {
		.comp_mask = MRP_POOL_ATTR_ARENA_SIZE, .arena_size = 2 * MIB,
	};

	self->pool = variant->debug ? debug_pool(&at) : test_pool(&at);
	ASSERT_NE(NULL, self->pool);
	real_ops = self->pool->ops;
	recycle_ops = *real_ops;
	recycle_ops.map = recycle_map;
	recycle_ops.unmap = recycle_unmap;
	self->pool->ops = &recycle_ops;
	parked.base = 0;
}

FIXTURE_TEARDOWN(stale)
{
	EXPECT_EQ(0, mrp_pool_close_flags(self->pool, MRP_CLOSE_FORCE));
	if (parked.base)
		real_ops->unmap(NULL, &parked);
}

TEST_F(stale, after_trim_reuse)
{
	struct mrp_buf old, own[2], x, y;
	struct mrp_stats st;
	void *stale;
	int ret;

	/* 1 MiB class, one 2 MiB arena of two buffers; x is freed and kept */
	ASSERT_EQ(0, mrp_alloc(self->pool, MIB, NULL, &old));
	ASSERT_EQ(0, mrp_alloc(self->pool, MIB, NULL, &x));
	stale = x.addr;
	ASSERT_EQ(0, mrp_free(self->pool, x.addr));
	ASSERT_EQ(0, mrp_free(self->pool, old.addr));
	ASSERT_EQ(1, mrp_trim(self->pool, MRP_TRIM_FLUSH));

	/* a new owner: 512 KiB buffers, in an arena on the old range */
	ASSERT_EQ(0, mrp_alloc(self->pool, MIB / 2, NULL, &own[0]));
	ASSERT_EQ((uintptr_t)old.addr >> 21, (uintptr_t)own[0].addr >> 21);
	/* and a second one; the stale address is the arena's third, free */
	ASSERT_EQ(0, mrp_alloc(self->pool, MIB / 2, NULL, &own[1]));
	memset(own[0].addr, 0xa1, own[0].size);
	ASSERT_EQ(0, mrp_trim(self->pool, MRP_TRIM_FLUSH));

	ret = mrp_free(self->pool, stale);
	mrp_trim(self->pool, MRP_TRIM_FLUSH);
	st = test_stats(self->pool);
	EXPECT_EQ(1, st.double_frees);
	/* without debug, into the cache: caught at the flush */
	EXPECT_EQ(variant->debug ? -EINVAL : 0, ret);
	/* the owner's buffer: intact, mapped, and handed to nobody else */
	EXPECT_EQ(0xa1, ((unsigned char *)own[0].addr)[own[0].size - 1]);
	for (int i = 0; i < 3; i++) {
		ASSERT_EQ(0, mrp_alloc(self->pool, MIB / 2, NULL, &y));
		EXPECT_NE(own[0].addr, y.addr);
		EXPECT_NE(own[1].addr, y.addr);
	}
}

/* MRPOOL_DEBUG: the second free of a class buffer fails at once. */
TEST(debug_double_free)
{
	struct mrp_pool *pool = debug_pool(NULL);
	struct mrp_buf a, b;
	struct mrp_stats st;

	ASSERT_NE(NULL, pool);
	ASSERT_EQ(0, mrp_alloc(pool, 4096, NULL, &a));
	ASSERT_EQ(0, mrp_alloc(pool, 65536, NULL, &b));
	ASSERT_EQ(0, mrp_free(pool, a.addr));
	EXPECT_EQ(-EINVAL, mrp_free(pool, a.addr));
	EXPECT_EQ(-EINVAL, mrp_free(pool, (char *)b.addr + 65536));	/* never handed out */
	st = test_stats(pool);
	EXPECT_EQ(2, st.double_frees);
	/* a comes back once; b is still live, then freed once */
	ASSERT_EQ(0, mrp_alloc(pool, 4096, NULL, &a));
	ASSERT_EQ(0, mrp_free(pool, a.addr));
	ASSERT_EQ(0, mrp_free(pool, b.addr));
	EXPECT_EQ(-EINVAL, mrp_free(pool, b.addr));
	EXPECT_EQ(2, mrp_trim(pool, MRP_TRIM_FLUSH));
	st = test_stats(pool);
	EXPECT_EQ(3, st.double_frees);
	EXPECT_EQ(0, st.bytes_in_use);
	EXPECT_EQ(0, mrp_pool_close(pool));
}

static uint8_t buf_state(void *p)
{
	return atomic_load(mrp_buf_state(mrp_arena_of((uintptr_t)p), (uintptr_t)p));
}

/*
 * A class buffer leaves the depot FRESH the first time (its bytes are the
 * backend's zeros: the preload shim's calloc skips the memset), OUT every
 * later time, whichever order buffers come back in; debug pools, whose
 * compare-and-swap expects OUT, never see FRESH.
 */
TEST(fresh_first_time_only)
{
	struct mrp_pool_attr at = {
		.comp_mask = MRP_POOL_ATTR_TCACHE_BYTES, .tcache_bytes = 256 << 10,
	};
	struct mrp_pool *pool = test_pool(&at), *dbg;
	struct mrp_buf b[64];
	bool used[64] = { false };
	uintptr_t base = 0;

	ASSERT_NE(NULL, pool);
	/* 64 KiB buffers, 64 to the 4 MiB arena: each round takes 10 more */
	for (int round = 0; round < 4; round++) {
		int n = 30 + 10 * round;

		for (int i = 0; i < n; i++) {
			size_t k;

			ASSERT_EQ(0, mrp_alloc(pool, 64 << 10, NULL, &b[i]));
			if (!base)
				base = mrp_arena_of((uintptr_t)b[i].addr)->base;
			ASSERT_EQ(base, mrp_arena_of((uintptr_t)b[i].addr)->base);
			k = ((uintptr_t)b[i].addr - base) >> 16;
			EXPECT_EQ(used[k] ? MRP_BUF_OUT : MRP_BUF_FRESH, buf_state(b[i].addr)) {
				TH_LOG("round %d buffer %zu", round, k);
			}
			used[k] = true;
		}
		/* every other one back, in an order of their own, then the rest */
		for (int i = round % 2; i < n; i += 2)
			ASSERT_EQ(0, mrp_free(pool, b[i].addr));
		ASSERT_EQ(0, mrp_thread_flush(pool));
		for (int i = n - 1; i >= 0; i--)
			if (i % 2 != round % 2)
				ASSERT_EQ(0, mrp_free(pool, b[i].addr));
		ASSERT_EQ(0, mrp_thread_flush(pool));
	}
	EXPECT_EQ(0, mrp_pool_close(pool));

	dbg = debug_pool(NULL);
	ASSERT_NE(NULL, dbg);
	ASSERT_EQ(0, mrp_alloc(dbg, 64 << 10, NULL, &b[0]));
	EXPECT_EQ(MRP_BUF_LIVE, buf_state(b[0].addr));
	EXPECT_EQ(0, mrp_free(dbg, b[0].addr));
	EXPECT_EQ(0, mrp_pool_close(dbg));
}

TEST_HARNESS_MAIN
