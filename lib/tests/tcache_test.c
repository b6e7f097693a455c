// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Host unit tests of the thread caches and the shared depot: reuse, the
 * bound, refills and flushes, frees from other threads, thread exit, and
 * many threads at once with every byte checked.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "kselftest_harness.h"
#include "internal.h"
#include "helpers.h"

/* A freed buffer is the next one handed out on that thread (LIFO cache). */
TEST(reuse_hits)
{
	struct mrp_pool *pool = test_pool(NULL);
	struct mrp_stats st;
	struct mrp_buf a, b;

	ASSERT_NE(NULL, pool);
	ASSERT_EQ(0, mrp_alloc(pool, 8192, NULL, &a));
	st = test_stats(pool);
	EXPECT_EQ(1, st.allocs);
	EXPECT_EQ(1, st.tcache_misses);
	EXPECT_EQ(1, st.depot_refills);
	EXPECT_EQ(1, st.sync_growths);
	ASSERT_EQ(0, mrp_free(pool, a.addr));
	for (int i = 0; i < 1000; i++) {
		ASSERT_EQ(0, mrp_alloc(pool, 8192, NULL, &b));
		ASSERT_EQ(a.addr, b.addr);
		ASSERT_EQ(0, mrp_free(pool, b.addr));
	}
	st = test_stats(pool);
	EXPECT_EQ(1001, st.allocs);
	EXPECT_EQ(1001, st.frees);
	EXPECT_EQ(1000, st.tcache_hits);
	EXPECT_EQ(1, st.tcache_misses);
	EXPECT_EQ(0, st.bytes_in_use);
	EXPECT_EQ(0, mrp_pool_close(pool));
}

/* The cache holds at most tcache_bytes per class; the rest goes to the depot. */
TEST(bounded_cache)
{
	struct mrp_pool_attr a = {
		.comp_mask = MRP_POOL_ATTR_TCACHE_BYTES, .tcache_bytes = 16 * 4096,
	};
	struct mrp_pool *pool = test_pool(&a);
	struct mrp_buf b[100];
	struct mrp_stats st;

	ASSERT_NE(NULL, pool);
	for (int i = 0; i < 100; i++)
		ASSERT_EQ(0, mrp_alloc(pool, 4096, NULL, &b[i]));
	st = test_stats(pool);
	/* refills of 8 (half the cache) */
	EXPECT_EQ(13, st.depot_refills);
	EXPECT_EQ(100 * 4096, st.bytes_in_use);
	for (int i = 0; i < 100; i++)
		ASSERT_EQ(0, mrp_free(pool, b[i].addr));
	st = test_stats(pool);
	/* 4 cached from the last refill, then a flush of 8 every 8 frees */
	EXPECT_LE(10, st.depot_flushes);
	EXPECT_GE(12, st.depot_flushes);
	EXPECT_EQ(0, st.bytes_in_use);
	/* the cached ones keep the arena busy until flushed */
	EXPECT_EQ(0, mrp_trim(pool, 0));
	EXPECT_EQ(1, mrp_trim(pool, MRP_TRIM_FLUSH));
	EXPECT_EQ(0, mrp_pool_close(pool));
}

struct xfer {
	struct mrp_pool *pool;
	struct mrp_buf *bufs;
	int n;
	int err;
};

static void *free_all(void *arg)
{
	struct xfer *x = arg;

	for (int i = 0; i < x->n; i++) {
		unsigned char *p = x->bufs[i].addr;

		if (p[0] != (i & 0xff) || mrp_free(x->pool, p))
			x->err++;
	}
	return NULL;
}

/* Buffers freed by another thread return through its cache and the depot. */
TEST(cross_thread_free)
{
	struct mrp_pool *pool = test_pool(NULL);
	struct xfer x = { .pool = pool, .n = 3000 };
	struct mrp_stats st;
	pthread_t t;

	ASSERT_NE(NULL, pool);
	x.bufs = calloc(x.n, sizeof(*x.bufs));
	ASSERT_NE(NULL, x.bufs);
	for (int i = 0; i < x.n; i++) {
		ASSERT_EQ(0, mrp_alloc(pool, 4096, NULL, &x.bufs[i]));
		memset(x.bufs[i].addr, i & 0xff, 4096);
	}
	ASSERT_EQ(0, pthread_create(&t, NULL, free_all, &x));
	ASSERT_EQ(0, pthread_join(t, NULL));
	EXPECT_EQ(0, x.err);
	st = test_stats(pool);
	EXPECT_EQ(3000, st.allocs);
	EXPECT_EQ(3000, st.frees);
	EXPECT_EQ(0, st.bytes_in_use);
	/* the exited thread's cache went back to the depot: only ours holds some */
	mrp_trim(pool, MRP_TRIM_FLUSH);
	st = test_stats(pool);
	EXPECT_EQ(0, st.arenas);
	free(x.bufs);
	EXPECT_EQ(0, mrp_pool_close(pool));
}

struct worker {
	struct mrp_pool *pool;
	unsigned int seed;
	int id;
	int errors;
};

/* Random sizes, random order; each live buffer carries its owner's mark. */
static void *churn(void *arg)
{
	enum { LIVE = 64, ROUNDS = 20000 };
	struct worker *w = arg;
	struct mrp_buf live[LIVE];
	unsigned char mark[LIVE];

	memset(live, 0, sizeof(live));
	for (int r = 0; r < ROUNDS; r++) {
		int k = (int)(rand_r(&w->seed) % LIVE);
		unsigned char *p = live[k].addr;

		if (p) {
			if (p[0] != mark[k] || p[live[k].size - 1] != mark[k])
				w->errors++;
			if (mrp_free(w->pool, p))
				w->errors++;
			live[k].addr = NULL;
			continue;
		}
		if (mrp_alloc(w->pool, 1 + rand_r(&w->seed) % (256 << 10), NULL, &live[k])) {
			w->errors++;
			continue;
		}
		mark[k] = (unsigned char)(w->id * 16 + r);
		p = live[k].addr;
		p[0] = mark[k];
		p[live[k].size - 1] = mark[k];
	}
	for (int k = 0; k < LIVE; k++)
		if (live[k].addr && mrp_free(w->pool, live[k].addr))
			w->errors++;
	return NULL;
}

/* 16 threads share a pool: no buffer is handed out twice, counts add up. */
TEST(many_threads)
{
	struct mrp_pool_attr a = {
		.comp_mask = MRP_POOL_ATTR_BACKGROUND, .background = 1,
	};
	struct mrp_pool *pool = test_pool(&a);
	struct worker w[16];
	pthread_t t[16];
	struct mrp_stats st;

	ASSERT_NE(NULL, pool);
	for (int i = 0; i < 16; i++) {
		w[i] = (struct worker){ .pool = pool, .seed = (unsigned int)i * 7919u, .id = i };
		ASSERT_EQ(0, pthread_create(&t[i], NULL, churn, &w[i]));
	}
	for (int i = 0; i < 16; i++) {
		ASSERT_EQ(0, pthread_join(t[i], NULL));
		EXPECT_EQ(0, w[i].errors);
	}
	st = test_stats(pool);
	EXPECT_EQ(st.allocs, st.frees);
	EXPECT_LT(100000, st.allocs);
	EXPECT_EQ(0, st.bytes_in_use);
	EXPECT_LT(st.tcache_misses, st.tcache_hits);
	/* (no arena count here: the pool thread may regrow a reserve at once) */
	EXPECT_LE(0, mrp_trim(pool, MRP_TRIM_FLUSH));
	EXPECT_EQ(0, mrp_pool_close(pool));
}

/* Trim and the pool thread run while threads churn: nothing is lost. */
TEST(trim_under_load)
{
	struct mrp_pool_attr a = {
		.comp_mask = MRP_POOL_ATTR_BACKGROUND | MRP_POOL_ATTR_TRIM_DELAY |
			     MRP_POOL_ATTR_ARENA_SIZE | MRP_POOL_ATTR_TCACHE_BYTES,
		.background = 1, .trim_delay_ms = 1, .arena_size = 2 << 20,
		.tcache_bytes = 32 << 10,
	};
	struct mrp_pool *pool = test_pool(&a);
	struct worker w[4];
	pthread_t t[4];
	struct mrp_stats st;
	int trimmed = 0;

	ASSERT_NE(NULL, pool);
	for (int i = 0; i < 4; i++) {
		w[i] = (struct worker){ .pool = pool, .seed = (unsigned int)i + 1, .id = i };
		ASSERT_EQ(0, pthread_create(&t[i], NULL, churn, &w[i]));
	}
	for (int i = 0; i < 200; i++) {
		int n = mrp_trim(pool, MRP_TRIM_FLUSH);

		ASSERT_LE(0, n);
		trimmed += n;
	}
	for (int i = 0; i < 4; i++) {
		ASSERT_EQ(0, pthread_join(t[i], NULL));
		EXPECT_EQ(0, w[i].errors);
	}
	st = test_stats(pool);
	EXPECT_EQ(st.allocs, st.frees);
	EXPECT_EQ(0, st.bytes_in_use);
	EXPECT_LE(trimmed, st.arenas_trimmed);
	EXPECT_EQ(0, mrp_pool_close(pool));
}

struct closer {
	struct mrp_pool *pool;
	pthread_barrier_t bar;
	int err;
};

static void *cache_then_reuse_slot(void *arg)
{
	struct closer *c = arg;
	struct mrp_pool *next;
	struct mrp_buf b;

	if (mrp_alloc(c->pool, 65536, NULL, &b) || mrp_free(c->pool, b.addr))
		c->err++;
	pthread_barrier_wait(&c->bar);	/* cache filled */
	pthread_barrier_wait(&c->bar);	/* pool closed by the main thread */
	/* same slot, new pool: the orphaned cache must not serve it */
	next = test_pool(NULL);
	if (!next || mrp_alloc(next, 65536, NULL, &b) || b.addr == NULL)
		c->err++;
	else if (mrp_free(next, b.addr) || mrp_pool_close(next))
		c->err++;
	return NULL;
}

/* Closing a pool while another thread holds a cache of it is safe. */
TEST(close_with_thread_caches)
{
	struct closer c = { .pool = test_pool(NULL) };
	pthread_t t;

	ASSERT_NE(NULL, c.pool);
	ASSERT_EQ(0, pthread_barrier_init(&c.bar, NULL, 2));
	ASSERT_EQ(0, pthread_create(&t, NULL, cache_then_reuse_slot, &c));
	pthread_barrier_wait(&c.bar);
	EXPECT_EQ(0, mrp_pool_close(c.pool));
	pthread_barrier_wait(&c.bar);
	ASSERT_EQ(0, pthread_join(t, NULL));
	EXPECT_EQ(0, c.err);
	pthread_barrier_destroy(&c.bar);
}

/*
 * The fast paths' size table against mrp_size_class(), in both modes, at
 * both ends of every 4 KiB entry: the same class size, in the buffer and
 * in the bin it is freed to (a second allocation of that size gets it).
 */
TEST(bin_table_every_entry)
{
	for (int fine = 0; fine <= 1; fine++) {
		struct mrp_pool_attr at = {
			.comp_mask = MRP_POOL_ATTR_CLASSES,
			.classes = fine ? MRP_CLASSES_FINE : MRP_CLASSES_POW2,
		};
		struct mrp_pool *pool = test_pool(&at);

		ASSERT_NE(NULL, pool);
		for (size_t i = 0; i < MRP_BIN_TAB_SIZE; i++) {
			size_t ends[2] = { (i << MRP_BIN_TAB_SHIFT) + 1,
					   (i + 1) << MRP_BIN_TAB_SHIFT };

			for (int k = 0; k < 2; k++) {
				size_t want = mrp_class_size(mrp_size_class(pool, ends[k]));
				struct mrp_buf b, c;

				ASSERT_EQ(0, mrp_alloc(pool, ends[k], NULL, &b));
				ASSERT_EQ(want, b.size);
				ASSERT_EQ(0, mrp_free(pool, b.addr));
				ASSERT_EQ(0, mrp_alloc(pool, ends[k], NULL, &c));
				ASSERT_EQ(b.addr, c.addr);
				ASSERT_EQ(0, mrp_free(pool, c.addr));
			}
		}
		EXPECT_EQ(0, mrp_pool_close(pool));
	}
}

/*
 * Frees of buffers of different classes, interleaved, each go to its own
 * class's bin (the arena's bin offset), and come back from it.
 */
TEST(free_to_own_bin)
{
	static const size_t sizes[] = { 4096, 8192, 65536, 81920, 1 << 20, 2 << 20 };
	struct mrp_pool_attr at = {
		.comp_mask = MRP_POOL_ATTR_CLASSES, .classes = MRP_CLASSES_FINE,
	};
	struct mrp_pool *pool = test_pool(&at);
	struct mrp_buf b[6], c;

	ASSERT_NE(NULL, pool);
	for (int i = 0; i < 6; i++)
		ASSERT_EQ(0, mrp_alloc(pool, sizes[i], NULL, &b[i]));
	for (int i = 0; i < 6; i++)
		ASSERT_EQ(0, mrp_free(pool, b[5 - i].addr));
	for (int i = 0; i < 6; i++) {
		ASSERT_EQ(0, mrp_alloc(pool, sizes[i], NULL, &c));
		EXPECT_EQ(b[i].addr, c.addr);
		EXPECT_EQ(b[i].size, c.size);
		ASSERT_EQ(0, mrp_free(pool, c.addr));
		ASSERT_EQ(0, mrp_alloc(pool, sizes[i], NULL, &c));	/* again, hot */
		EXPECT_EQ(b[i].addr, c.addr);
	}
	for (int i = 0; i < 6; i++)
		ASSERT_EQ(0, mrp_free(pool, b[i].addr));
	EXPECT_EQ(0, mrp_pool_close(pool));
}

/*
 * A bin at its limit: cap frees fill it to end, the next one takes the
 * slow path, which flushes the oldest half; pops then empty it to lim and
 * the next one takes the slow path, which refills. Every one counted.
 */
TEST(bin_at_limit)
{
	struct mrp_pool_attr at = {
		.comp_mask = MRP_POOL_ATTR_TCACHE_BYTES, .tcache_bytes = 4 * 8192,
	};
	struct mrp_pool *pool = test_pool(&at);
	struct mrp_buf b[5];
	struct mrp_stats st;
	struct mrp_bin *bin;

	ASSERT_NE(NULL, pool);
	for (int i = 0; i < 5; i++)
		ASSERT_EQ(0, mrp_alloc(pool, 8192, NULL, &b[i]));
	bin = &mrp_tls[pool->idx]->bins[mrp_size_class(pool, 8192)];
	ASSERT_EQ(4, bin->cap);
	ASSERT_EQ(0, mrp_tcache_flush_self(pool));	/* what the refill left */
	for (int i = 0; i < 4; i++)
		ASSERT_EQ(0, mrp_free(pool, b[i].addr));
	EXPECT_EQ(4, mrp_bin_count(bin));
	EXPECT_EQ((uintptr_t)(bin->base + bin->cap), atomic_load(&bin->top));
	st = test_stats(pool);
	ASSERT_EQ(0, mrp_free(pool, b[4].addr));	/* full: flush half */
	EXPECT_EQ(st.depot_flushes + 1, test_stats(pool).depot_flushes);
	EXPECT_EQ(3, mrp_bin_count(bin));
	/* the newest stayed: b[2], b[3], then b[4] on top */
	for (int i = 4; i >= 2; i--) {
		struct mrp_buf c;

		ASSERT_EQ(0, mrp_alloc(pool, 8192, NULL, &c));
		EXPECT_EQ(b[i].addr, c.addr);
	}
	b[0] = b[2];
	b[1] = b[3];
	b[2] = b[4];
	EXPECT_EQ(0, mrp_bin_count(bin));
	EXPECT_EQ((uintptr_t)bin->base, atomic_load(&bin->top));
	st = test_stats(pool);
	ASSERT_EQ(0, mrp_alloc(pool, 8192, NULL, &b[3]));	/* empty: refill */
	EXPECT_EQ(st.tcache_misses + 1, test_stats(pool).tcache_misses);
	EXPECT_EQ(st.allocs + 1, test_stats(pool).allocs);
	for (int i = 0; i < 4; i++)
		ASSERT_EQ(0, mrp_free(pool, b[i].addr));
	st = test_stats(pool);
	EXPECT_EQ(st.allocs, st.frees);
	EXPECT_EQ(0, st.double_frees);
	EXPECT_EQ(0, mrp_pool_close(pool));
}

/*
 * What a call abandoned in the middle of a pop of an empty bin leaves
 * (siglongjmp out of a signal handler): top at base - 1. The next free
 * fills the guard entry (that buffer is lost, never written past the
 * entries; the test gives it back), and an allocation from a bin left
 * that way finds no entry and refills.
 */
TEST(abandoned_pop_below_base)
{
	struct mrp_pool *pool = test_pool(NULL);
	struct mrp_buf b, c;
	struct mrp_bin *bin;

	ASSERT_NE(NULL, pool);
	ASSERT_EQ(0, mrp_alloc(pool, 8192, NULL, &b));
	ASSERT_EQ(0, mrp_tcache_flush_self(pool));
	bin = &mrp_tls[pool->idx]->bins[mrp_size_class(pool, 8192)];
	ASSERT_EQ(0, mrp_bin_count(bin));
	atomic_store(&bin->top, (uintptr_t)(bin->base - 1));
	EXPECT_EQ(0, mrp_bin_count(bin));
	ASSERT_EQ(0, mrp_free(pool, b.addr));		/* into the guard */
	EXPECT_EQ((uintptr_t)bin->base, atomic_load(&bin->top));
	EXPECT_EQ(b.addr, bin->base[-1].p);
	ASSERT_EQ(0, mrp_free(pool, b.addr));		/* lost there: give it back */
	ASSERT_EQ(0, mrp_alloc(pool, 8192, NULL, &c));	/* the one given back */
	EXPECT_EQ(b.addr, c.addr);
	EXPECT_LE((uintptr_t)bin->base, atomic_load(&bin->top));
	ASSERT_EQ(0, mrp_free(pool, c.addr));
	/* and once more from an empty bin left that way, by the slow path */
	ASSERT_EQ(0, mrp_tcache_flush_self(pool));
	atomic_store(&bin->top, (uintptr_t)(bin->base - 1));
	ASSERT_EQ(0, mrp_alloc(pool, 8192, NULL, &c));
	EXPECT_LE((uintptr_t)bin->base, atomic_load(&bin->top));
	ASSERT_EQ(0, mrp_free(pool, c.addr));
	EXPECT_EQ(0, mrp_pool_close(pool));
}

/*
 * Two or three pops abandoned in a row (top at base - 2, base - 3): the
 * next free must not write below the guard entry, where the previous
 * bin's last entries are (a full 4 KiB bin below the 8 KiB one here):
 * it takes the slow path, which stores from base on. The 4 KiB bin's
 * entries are intact after, and its buffers come back from it.
 */
TEST(abandoned_pops_below_guard)
{
	for (int depth = 2; depth <= 3; depth++) {
		struct mrp_pool *pool = test_pool(NULL);
		struct mrp_buf small[4], b, c;
		struct mrp_bin *lo, *bin;
		struct mrp_ent saved[4];
		unsigned int clo, cls;
		uint32_t n;

		ASSERT_NE(NULL, pool);
		clo = mrp_size_class(pool, 4096);
		cls = mrp_size_class(pool, 8192);
		ASSERT_EQ(clo + 1, cls);
		for (int i = 0; i < 4; i++)
			ASSERT_EQ(0, mrp_alloc(pool, 4096, NULL, &small[i]));
		ASSERT_EQ(0, mrp_alloc(pool, 8192, NULL, &b));
		ASSERT_EQ(0, mrp_tcache_flush_self(pool));
		lo = &mrp_tls[pool->idx]->bins[clo];
		bin = &mrp_tls[pool->idx]->bins[cls];
		/* the 4 KiB bin filled to its end: its last entries sit below bin's guard */
		ASSERT_EQ(bin->base - 1 - lo->cap, lo->base) TH_LOG("bins not adjacent");
		for (n = 0; n < lo->cap; n++)
			ASSERT_EQ(0, mrp_free(pool, small[n % 4].addr)) TH_LOG("n %u", n);
		EXPECT_EQ(lo->cap, mrp_bin_count(lo));
		memcpy(saved, lo->base + lo->cap - 4, sizeof(saved));

		atomic_store(&bin->top, (uintptr_t)(bin->base - depth));
		EXPECT_EQ(0, mrp_bin_count(bin));
		ASSERT_EQ(0, mrp_free(pool, b.addr));
		EXPECT_EQ(0, memcmp(saved, lo->base + lo->cap - 4, sizeof(saved)))
			TH_LOG("depth %d: the 4 KiB bin's entries were overwritten", depth);
		EXPECT_EQ((uintptr_t)(bin->base + 1), atomic_load(&bin->top));
		ASSERT_EQ(0, mrp_alloc(pool, 8192, NULL, &c));
		EXPECT_EQ(b.addr, c.addr);
		ASSERT_EQ(0, mrp_alloc(pool, 4096, NULL, &c));
		EXPECT_EQ(saved[3].p, c.addr);
		ASSERT_EQ(0, mrp_free(pool, c.addr));
		/* the duplicates of the fill go back one by one: flush the cache */
		lo->top = (uintptr_t)lo->base;
		ASSERT_EQ(0, mrp_tcache_flush_self(pool));
		for (int i = 0; i < 4; i++)
			ASSERT_EQ(0, mrp_free(pool, small[i].addr));
		ASSERT_EQ(0, mrp_free(pool, b.addr));
		EXPECT_EQ(0, mrp_pool_close(pool));
	}
}

TEST_HARNESS_MAIN
