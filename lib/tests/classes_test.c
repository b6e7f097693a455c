// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Host unit tests of the size classes (1.6): the class set and size table
 * of both modes on 4, 16 and 64 KiB pages, the reciprocal that indexes
 * fine arenas, and fine buffers through every path that handles class
 * buffers (alloc, free, lookup, aligned, bulk, handles, other threads,
 * trim, debug mode) with the tail of a fine arena never taken for one.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "kselftest_harness.h"
#include "internal.h"
#include "helpers.h"		/* after internal.h: NEED_MEMBARRIER */

#define KIB	((size_t)1 << 10)
#define MIB	((size_t)1 << 20)
#define ACCESS	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE)

static const size_t pow2_sizes[] = {
	4 * KIB, 8 * KIB, 16 * KIB, 32 * KIB, 64 * KIB, 128 * KIB, 256 * KIB,
	512 * KIB, 1 * MIB, 2 * MIB,
};
static const size_t fine_sizes[] = {
	4 * KIB, 8 * KIB, 16 * KIB, 32 * KIB, 64 * KIB, 80 * KIB, 96 * KIB,
	112 * KIB, 128 * KIB, 160 * KIB, 192 * KIB, 224 * KIB, 256 * KIB,
	320 * KIB, 384 * KIB, 448 * KIB, 512 * KIB, 1 * MIB, 2 * MIB,
};

/* The class set of a mode on a page size, and every size's class. */
static void check_table(struct __test_metadata *_metadata, bool fine, size_t page)
{
	static struct mrp_pool pool;	/* only class_tab is read */
	size_t want[MRP_NCLASSES], n = 0, k = 0;

	for (unsigned int c = 0; c < MRP_NCLASSES; c++)
		if (mrp_class_exists(c, fine, page))
			want[n++] = mrp_class_size(c);
	if (!fine) {
		ASSERT_EQ(10, n);
		for (size_t i = 0; i < n; i++)
			ASSERT_EQ(pow2_sizes[i], want[i]);
	} else if (page <= 16 * KIB) {
		ASSERT_EQ(19, n);
		for (size_t i = 0; i < n; i++)
			ASSERT_EQ(fine_sizes[i], want[i]);
	} else {
		/* 64 KiB pages: only the quarters of 256..512 KiB are whole pages */
		ASSERT_EQ(13, n);
		for (size_t i = 0, j = 0; i < 19; i++) {
			size_t s = fine_sizes[i];

			if (s & (s - 1) && s < 256 * KIB)
				continue;
			ASSERT_EQ(s, want[j++]);
		}
	}
	mrp_class_table(pool.class_tab, fine, page);
	for (size_t size = 1; size <= MRP_MAX_CLASS; size++) {
		unsigned int c = mrp_size_class(&pool, size);

		while (want[k] < size)
			k++;
		if (mrp_class_size(c) != want[k] || !mrp_class_exists(c, fine, page)) {
			TH_LOG("fine %d page %zu size %zu: class %u (%zu), want %zu",
			       fine, page, size, c, mrp_class_size(c), want[k]);
			ASSERT_TRUE(0);
		}
	}
	/* indexes stay ordered by size */
	for (unsigned int c = 1; c < MRP_NCLASSES; c++)
		ASSERT_LT(mrp_class_size(c - 1), mrp_class_size(c));
}

TEST(class_table)
{
	static const size_t pages[] = { 4 * KIB, 16 * KIB, 64 * KIB };

	for (int fine = 0; fine < 2; fine++)
		for (size_t i = 0; i < 3; i++)
			check_table(_metadata, fine, pages[i]);
}

/*
 * The reciprocal, exhaustively: floor(off / size) for every offset of a
 * 2^40-byte arena, the largest options.c allows, in every class. The
 * quotient is monotonic in off, so it is exact everywhere once it is at
 * the first and the last byte of every buffer.
 */
TEST(reciprocal_exhaustive)
{
	const uint64_t end = (uint64_t)1 << 40;

	for (unsigned int c = 0; c < MRP_NCLASSES; c++) {
		uint64_t size = mrp_class_size(c);
		unsigned int shift = (unsigned int)__builtin_ctzl(size);
		uint64_t magic = mrp_buf_magic(size);
		uint64_t bad = 0;

		ASSERT_EQ(!(size & (size - 1)), magic == 0);
		for (uint64_t i = 0, off = 0; off < end; i++, off += size) {
			bad += mrp_buf_div(off, shift, magic) != i;
			bad += mrp_buf_div(off + size - 1, shift, magic) != i;
		}
		ASSERT_EQ(0, bad) TH_LOG("class %u (%lu B)", c, (unsigned long)size);
		/* and the last offset of all */
		ASSERT_EQ((end - 1) / size, mrp_buf_div(end - 1, shift, magic));
	}
}

static void fill(void *p, size_t len, unsigned char v)
{
	memset(p, v, len);
}

static int holds(const void *p, size_t len, unsigned char v)
{
	const unsigned char *c = p;

	for (size_t i = 0; i < len; i++)
		if (c[i] != v)
			return 0;
	return 1;
}

/* Size and alignment of a fine buffer for every size at a class boundary. */
TEST(fine_round_trip)
{
	struct mrp_pool *pool = fine_pool(NULL);
	struct mrp_buf b[2], l;

	ASSERT_NE(NULL, pool);
	ASSERT_EQ(0, mrp_attach_pd(pool, FAKE_PD(0), ACCESS));
	for (size_t i = 0; i < 19; i++) {
		for (int d = -1; d <= 1; d++) {
			size_t size = fine_sizes[i] + d, cls;
			unsigned char v = (unsigned char)(i * 3 + d + 2);

			cls = d <= 0 ? fine_sizes[i] : i < 18 ? fine_sizes[i + 1] : 0;
			for (int k = 0; k < 2; k++) {
				ASSERT_EQ(0, mrp_alloc(pool, size, FAKE_PD(0), &b[k]));
				if (cls) {
					ASSERT_EQ(cls, b[k].size);
					ASSERT_EQ(0, (uintptr_t)b[k].addr % (cls & -cls));
				} else {
					ASSERT_LE(size, b[k].size);	/* large */
				}
				EXPECT_TRUE(fake_mr_covers(FAKE_PD(0), b[k].addr, b[k].size,
							   b[k].lkey, b[k].rkey));
				fill(b[k].addr, b[k].size, (unsigned char)(v + k));
			}
			for (int k = 0; k < 2; k++) {
				const char *p = b[k].addr;

				EXPECT_TRUE(holds(p, b[k].size, (unsigned char)(v + k)));
				ASSERT_EQ(0, mrp_lookup(pool, p + b[k].size - 1, NULL, &l));
				EXPECT_EQ(b[k].addr, l.addr);
				EXPECT_EQ(b[k].size, l.size);
				ASSERT_EQ(0, mrp_lookup(pool, p + b[k].size / 2, FAKE_PD(0), &l));
				EXPECT_EQ(b[k].addr, l.addr);
				EXPECT_EQ(b[k].lkey, l.lkey);
			}
			for (int k = 0; k < 2; k++)
				ASSERT_EQ(0, mrp_free(pool, b[k].addr));
		}
	}
	EXPECT_EQ(0, test_stats(pool).bytes_in_use);
	EXPECT_EQ(0, mrp_pool_close(pool));
}

/* Without the attribute nor the variable, 80 KiB still takes 128 KiB. */
TEST(pow2_default)
{
	struct mrp_pool *pool = test_pool(NULL);
	struct mrp_buf b;

	ASSERT_NE(NULL, pool);
	ASSERT_EQ(0, mrp_alloc(pool, 80 * KIB, NULL, &b));
	EXPECT_EQ(128 * KIB, b.size);
	EXPECT_EQ(0, (uintptr_t)b.addr % (128 * KIB));
	EXPECT_EQ(0, mrp_free(pool, b.addr));
	EXPECT_EQ(0, mrp_pool_close(pool));
}

/*
 * The arena's tail past its last fine buffer, and the inside of a buffer,
 * are no buffers: free, lookup and invalidate say EINVAL, in debug mode
 * too, and the arena stays whole.
 */
TEST(fine_tail_and_inside)
{
	struct mrp_pool_attr at = {
		.comp_mask = MRP_POOL_ATTR_ARENA_SIZE, .arena_size = 4 * MIB,
	};
	struct mrp_buf b, l;

	for (int debug = 0; debug < 2; debug++) {
		struct mrp_pool *pool;
		struct mrp_arena *a;
		char *tail;

		at.comp_mask |= MRP_POOL_ATTR_CLASSES;
		at.classes = MRP_CLASSES_FINE;
		pool = debug ? debug_pool(&at) : test_pool(&at);
		ASSERT_NE(NULL, pool);
		/* 448 KiB: 9 buffers in 4 MiB, a 64 KiB tail */
		ASSERT_EQ(0, mrp_alloc(pool, 400 * KIB, NULL, &b));
		ASSERT_EQ(448 * KIB, b.size);
		a = mrp_arena_of((uintptr_t)b.addr);
		ASSERT_NE(NULL, a);
		ASSERT_EQ(9, a->nblocks);
		tail = (char *)a->base + 9 * 448 * KIB;
		EXPECT_EQ(-EINVAL, mrp_free(pool, tail));
		EXPECT_EQ(-EINVAL, mrp_free(pool, tail + 16 * KIB));
		EXPECT_EQ(-EINVAL, mrp_free(pool, (char *)a->base + a->size - 4096));
		/*
		 * in no buffer of the pool: ENOENT, as mrp_lookup(3) says
		 * (EINVAL is a pd not attached), buf untouched
		 */
		l = b;
		EXPECT_EQ(-ENOENT, mrp_lookup(pool, tail, NULL, &l));
		EXPECT_EQ(-ENOENT, mrp_lookup(pool, (char *)a->base + a->size - 1, NULL, &l));
		EXPECT_EQ(b.addr, l.addr);
		EXPECT_EQ(b.size, l.size);
		EXPECT_EQ(-EINVAL, mrp_mw_invalidate(pool, tail));
		/* inside a buffer, at its alignment and off it */
		EXPECT_EQ(-EINVAL, mrp_free(pool, (char *)b.addr + 64 * KIB));
		EXPECT_EQ(-EINVAL, mrp_free(pool, (char *)b.addr + 1));
		EXPECT_EQ(-EINVAL, mrp_free(pool, (char *)b.addr + b.size - 1));
		EXPECT_EQ(0, mrp_free(pool, b.addr));
		EXPECT_EQ(0, test_stats(pool).bytes_in_use);
		EXPECT_EQ(1, mrp_trim(pool, MRP_TRIM_FLUSH));
		EXPECT_EQ(0, mrp_pool_close(pool));
	}
}

/* Double frees of fine buffers, as free_test expects of the others. */
TEST(fine_double_free)
{
	struct mrp_pool_attr at = {
		.comp_mask = MRP_POOL_ATTR_ARENA_SIZE | MRP_POOL_ATTR_TCACHE_BYTES,
		.arena_size = 2 * MIB, .tcache_bytes = 80 * KIB,
	};
	struct mrp_pool *pool;
	struct mrp_buf a, b;
	struct mrp_stats st;

	/*
	 * Back in the depot, b live, a cache of one buffer full: refused on
	 * the slow path (as double_free_after_flush)
	 */
	pool = fine_pool(&at);
	ASSERT_NE(NULL, pool);
	ASSERT_EQ(0, mrp_alloc(pool, 80 * KIB, NULL, &a));
	ASSERT_EQ(0, mrp_alloc(pool, 80 * KIB, NULL, &b));
	ASSERT_EQ(0, mrp_free(pool, a.addr));
	ASSERT_EQ(0, mrp_trim(pool, MRP_TRIM_FLUSH));
	ASSERT_EQ(0, mrp_free(pool, b.addr));
	EXPECT_EQ(-EINVAL, mrp_free(pool, a.addr));
	st = test_stats(pool);
	EXPECT_EQ(1, st.double_frees);
	EXPECT_EQ(0, st.bytes_in_use);
	EXPECT_EQ(1, mrp_trim(pool, MRP_TRIM_FLUSH));
	EXPECT_EQ(0, mrp_pool_close(pool));

	/* both copies cached: caught at the flush (as double_free_class_cached) */
	pool = fine_pool(NULL);
	ASSERT_NE(NULL, pool);
	ASSERT_EQ(0, mrp_alloc(pool, 96 * KIB, NULL, &a));
	ASSERT_EQ(0, mrp_free(pool, a.addr));
	ASSERT_EQ(0, mrp_free(pool, a.addr));
	EXPECT_EQ(1, mrp_trim(pool, MRP_TRIM_FLUSH));
	EXPECT_EQ(1, test_stats(pool).double_frees);
	EXPECT_EQ(0, mrp_pool_close(pool));

	/* debug mode: every one (as debug_double_free) */
	at.comp_mask |= MRP_POOL_ATTR_CLASSES;
	at.classes = MRP_CLASSES_FINE;
	pool = debug_pool(&at);
	ASSERT_NE(NULL, pool);
	ASSERT_EQ(0, mrp_alloc(pool, 160 * KIB, NULL, &a));
	ASSERT_EQ(0, mrp_alloc(pool, 160 * KIB, NULL, &b));
	ASSERT_EQ(0, mrp_free(pool, a.addr));
	EXPECT_EQ(-EINVAL, mrp_free(pool, a.addr));
	EXPECT_EQ(-EINVAL, mrp_free(pool, (char *)b.addr + 160 * KIB * 2));	/* never out */
	ASSERT_EQ(0, mrp_free(pool, b.addr));
	EXPECT_EQ(-EINVAL, mrp_free(pool, b.addr));
	st = test_stats(pool);
	EXPECT_EQ(3, st.double_frees);
	EXPECT_EQ(0, st.bytes_in_use);
	EXPECT_EQ(0, mrp_pool_close(pool));
}

TEST(environment)
{
	struct mrp_pool_attr at = {
		.comp_mask = MRP_POOL_ATTR_CLASSES, .classes = MRP_CLASSES_POW2,
	};
	struct mrp_pool *pool;
	struct mrp_buf b;

	ASSERT_EQ(0, setenv("MRPOOL_CLASSES", "quarter", 1));
	errno = 0;
	EXPECT_EQ(NULL, test_pool(NULL));
	EXPECT_EQ(EINVAL, errno);
	ASSERT_EQ(0, setenv("MRPOOL_CLASSES", "", 1));
	EXPECT_EQ(NULL, test_pool(NULL));
	ASSERT_EQ(0, setenv("MRPOOL_CLASSES", "fine", 1));
	pool = test_pool(NULL);
	ASSERT_NE(NULL, pool);
	ASSERT_EQ(0, mrp_alloc(pool, 65 * KIB, NULL, &b));
	EXPECT_EQ(80 * KIB, b.size);
	EXPECT_EQ(0, mrp_free(pool, b.addr));
	EXPECT_EQ(0, mrp_pool_close(pool));
	/* the attribute wins over the variable */
	pool = test_pool(&at);
	ASSERT_NE(NULL, pool);
	ASSERT_EQ(0, mrp_alloc(pool, 65 * KIB, NULL, &b));
	EXPECT_EQ(128 * KIB, b.size);
	EXPECT_EQ(0, mrp_free(pool, b.addr));
	EXPECT_EQ(0, mrp_pool_close(pool));
	ASSERT_EQ(0, setenv("MRPOOL_CLASSES", "POW2", 1));
	pool = test_pool(NULL);
	ASSERT_NE(NULL, pool);
	EXPECT_EQ(0, mrp_pool_close(pool));
	unsetenv("MRPOOL_CLASSES");
	at.classes = 2;
	errno = 0;
	EXPECT_EQ(NULL, test_pool(&at));
	EXPECT_EQ(EINVAL, errno);
	at.classes = -1;
	EXPECT_EQ(NULL, test_pool(&at));
}

/* An alignment a fine class lacks takes the next power of two. */
TEST(fine_aligned)
{
	struct mrp_pool *pool = fine_pool(NULL);
	struct mrp_buf b;

	ASSERT_NE(NULL, pool);
	ASSERT_EQ(0, mrp_alloc_aligned(pool, 80 * KIB, 16 * KIB, NULL, &b));
	EXPECT_EQ(80 * KIB, b.size);
	EXPECT_EQ(0, (uintptr_t)b.addr % (16 * KIB));
	EXPECT_EQ(0, mrp_free(pool, b.addr));
	ASSERT_EQ(0, mrp_alloc_aligned(pool, 80 * KIB, 32 * KIB, NULL, &b));
	EXPECT_EQ(128 * KIB, b.size);
	EXPECT_EQ(0, (uintptr_t)b.addr % (128 * KIB));
	EXPECT_EQ(0, mrp_free(pool, b.addr));
	ASSERT_EQ(0, mrp_alloc_aligned(pool, 300 * KIB, 64 * KIB, NULL, &b));
	EXPECT_EQ(320 * KIB, b.size);
	EXPECT_EQ(0, (uintptr_t)b.addr % (64 * KIB));
	EXPECT_EQ(0, mrp_free(pool, b.addr));
	ASSERT_EQ(0, mrp_alloc_aligned(pool, 300 * KIB, 128 * KIB, NULL, &b));
	EXPECT_EQ(512 * KIB, b.size);
	EXPECT_EQ(0, (uintptr_t)b.addr % (512 * KIB));
	EXPECT_EQ(0, mrp_free(pool, b.addr));
	ASSERT_EQ(0, mrp_alloc_aligned(pool, 100, 128 * KIB, NULL, &b));
	EXPECT_EQ(128 * KIB, b.size);
	EXPECT_EQ(0, mrp_free(pool, b.addr));
	/* beyond the largest class: a large buffer, no table read */
	ASSERT_EQ(0, mrp_alloc_aligned(pool, 80 * KIB, 4 * MIB, NULL, &b));
	EXPECT_EQ(0, (uintptr_t)b.addr % (4 * MIB));
	EXPECT_EQ(0, mrp_free(pool, b.addr));
	ASSERT_EQ(0, mrp_alloc_aligned(pool, 3 * MIB, 1 * MIB, NULL, &b));
	EXPECT_LE(3 * MIB, b.size);
	EXPECT_EQ(0, mrp_free(pool, b.addr));
	EXPECT_EQ(0, mrp_pool_close(pool));
}

TEST(fine_bulk_and_handle)
{
	struct mrp_pool *pool = fine_pool(NULL);
	struct mrp_buf b[16], l;
	struct mrp_pdh *h;

	ASSERT_NE(NULL, pool);
	ASSERT_EQ(0, mrp_attach_pd(pool, FAKE_PD(1), ACCESS));
	ASSERT_EQ(0, mrp_alloc_bulk(pool, 90 * KIB, FAKE_PD(1), b, 16));
	for (int i = 0; i < 16; i++) {
		EXPECT_EQ(96 * KIB, b[i].size);
		fill(b[i].addr, b[i].size, (unsigned char)i);
		for (int j = 0; j < i; j++)
			ASSERT_NE(b[j].addr, b[i].addr);
	}
	for (int i = 0; i < 16; i++) {
		struct ibv_pd *pds[1] = { FAKE_PD(1) };
		struct mrp_keys k;

		EXPECT_TRUE(holds(b[i].addr, b[i].size, (unsigned char)i));
		ASSERT_EQ(0, mrp_lookup_keys(pool, (char *)b[i].addr + b[i].size - 1, pds, 1, &k));
		EXPECT_EQ(b[i].lkey, k.lkey);
		EXPECT_EQ(b[i].rkey, k.rkey);
	}
	EXPECT_EQ(0, mrp_free_bulk(pool, b, 16));

	h = mrp_pd_handle(pool, FAKE_PD(1));
	ASSERT_NE(NULL, h);
	for (int i = 0; i < 16; i++) {
		ASSERT_EQ(0, mrp_alloc_pdh(pool, 200 * KIB, h, &b[i]));
		EXPECT_EQ(224 * KIB, b[i].size);
		ASSERT_EQ(0, mrp_lookup(pool, b[i].addr, FAKE_PD(1), &l));
		EXPECT_EQ(l.lkey, b[i].lkey);
		EXPECT_EQ(l.rkey, b[i].rkey);
		EXPECT_TRUE(fake_mr_covers(FAKE_PD(1), b[i].addr, b[i].size,
					   b[i].lkey, b[i].rkey));
	}
	EXPECT_EQ(0, mrp_free_bulk(pool, b, 16));
	EXPECT_EQ(0, test_stats(pool).bytes_in_use);
	EXPECT_EQ(0, mrp_pool_close(pool));
}

struct xfree {
	struct mrp_pool *pool;
	struct mrp_buf *b;
	int n, ret;
};

static void *free_all(void *arg)
{
	struct xfree *x = arg;

	for (int i = 0; i < x->n; i++)
		x->ret |= mrp_free(x->pool, x->b[i].addr);
	return NULL;
}

/*
 * Fine buffers freed by another thread go to its cache and back to the
 * depot at its exit; trim then releases every idle fine arena.
 */
TEST(fine_cross_thread_and_trim)
{
	static const size_t sizes[] = { 70 * KIB, 100 * KIB, 150 * KIB, 330 * KIB, 440 * KIB };
	struct mrp_pool *pool = fine_pool(NULL);
	struct mrp_buf b[100];
	struct xfree x = { .pool = pool, .b = b, .n = 100 };
	struct mrp_stats st;
	pthread_t t;

	ASSERT_NE(NULL, pool);
	for (int i = 0; i < 100; i++) {
		ASSERT_EQ(0, mrp_alloc(pool, sizes[i % 5], NULL, &b[i]));
		fill(b[i].addr, b[i].size, (unsigned char)i);
	}
	for (int i = 0; i < 100; i++)
		ASSERT_TRUE(holds(b[i].addr, b[i].size, (unsigned char)i));
	ASSERT_EQ(0, pthread_create(&t, NULL, free_all, &x));
	ASSERT_EQ(0, pthread_join(t, NULL));
	EXPECT_EQ(0, x.ret);
	st = test_stats(pool);
	EXPECT_EQ(0, st.bytes_in_use);
	EXPECT_EQ(0, st.double_frees);
	EXPECT_LT(0, st.arenas);
	EXPECT_EQ(st.arenas, mrp_trim(pool, MRP_TRIM_FLUSH));
	st = test_stats(pool);
	EXPECT_EQ(0, st.arenas);
	EXPECT_EQ(0, st.bytes_mapped);
	EXPECT_EQ(0, mrp_pool_close(pool));
}

struct idler {
	struct mrp_pool *pool;
	pthread_barrier_t *step;
	int errors;
};

/* Cache fine buffers of three classes, then idle (alive) until told. */
static void *cache_then_idle(void *arg)
{
	struct idler *w = arg;
	struct mrp_buf b[6];

	for (int i = 0; i < 6; i++)
		w->errors += mrp_alloc(w->pool, (70 + 40 * (i % 3)) * KIB, NULL, &b[i]) != 0;
	for (int i = 0; i < 6; i++)
		w->errors += mrp_free(w->pool, b[i].addr) != 0;
	pthread_barrier_wait(w->step);
	pthread_barrier_wait(w->step);
	return NULL;
}

/* An idle thread's cached fine buffers are reclaimed, then their arenas trimmed. */
TEST(fine_idle_reclaim)
{
	struct mrp_pool_attr a = {
		.comp_mask = MRP_POOL_ATTR_TRIM_DELAY, .trim_delay_ms = 100,
	};
	struct mrp_pool *pool;
	pthread_barrier_t step;
	struct idler w;
	struct mrp_stats st;
	uint64_t end;
	pthread_t t;

	NEED_MEMBARRIER();
	pool = fine_pool(&a);
	ASSERT_NE(NULL, pool);
	w = (struct idler){ .pool = pool, .step = &step };
	ASSERT_EQ(0, pthread_barrier_init(&step, NULL, 2));
	ASSERT_EQ(0, pthread_create(&t, NULL, cache_then_idle, &w));
	pthread_barrier_wait(&step);
	st = test_stats(pool);
	EXPECT_EQ(0, st.bytes_in_use);
	EXPECT_LT(0, st.arenas);
	/* bounded poll: a stalled host only makes it slower */
	for (end = now_ms() + 30000; now_ms() < end; sleep_ms(20)) {
		mrp_trim(pool, 0);
		st = test_stats(pool);
		if (!st.arenas)
			break;
	}
	EXPECT_EQ(0, st.arenas);
	EXPECT_LE(1, st.tcache_reclaims);
	EXPECT_EQ(0, st.double_frees);
	pthread_barrier_wait(&step);
	ASSERT_EQ(0, pthread_join(t, NULL));
	EXPECT_EQ(0, w.errors);
	pthread_barrier_destroy(&step);
	EXPECT_EQ(0, mrp_pool_close(pool));
}

/*
 * A fallback buffer of a class size with an alignment above 2 MiB: its
 * class is not looked up in the pool's table (128 entries up to 2 MiB),
 * which a long device name lies behind.
 */
TEST(fallback_align_above_classes)
{
	static char dev[256];
	struct mrp_pool_attr a = {
		.comp_mask = MRP_POOL_ATTR_FALLBACK | MRP_POOL_ATTR_MAX_BYTES |
			     MRP_POOL_ATTR_DEVICE,
		.fallback = 1, .max_bytes = 8 * MIB, .device = dev,
	};
	struct mrp_buf big, b;
	struct mrp_pool *pool;
	struct mrp_stats st;

	memset(dev, 'z', sizeof(dev) - 1);
	for (int fine = 0; fine < 2; fine++) {
		pool = fine ? fine_pool(&a) : test_pool(&a);
		ASSERT_NE(NULL, pool);
		ASSERT_EQ(0, mrp_alloc(pool, 8 * MIB, NULL, &big));
		ASSERT_EQ(0, mrp_alloc_aligned(pool, 4 * KIB, 4 * MIB, NULL, &b));
		st = test_stats(pool);
		EXPECT_EQ(1, st.fallbacks);
		EXPECT_EQ(0, (uintptr_t)b.addr & (4 * MIB - 1));
		EXPECT_LE(4 * KIB, b.size);
		EXPECT_GE(4 * MIB, b.size);
		memset(b.addr, 0x5a, b.size);
		ASSERT_EQ(0, mrp_free(pool, b.addr));
		ASSERT_EQ(0, mrp_free(pool, big.addr));
		EXPECT_EQ(0, mrp_pool_close(pool));
	}
}

/*
 * A power-of-two pool and a fine one open at once in one thread: each
 * keeps its own classes and cache, a buffer freed to the other pool is
 * refused and lands in no cache, and an attribute overrides
 * MRPOOL_CLASSES.
 */
TEST(pow2_and_fine_side_by_side)
{
	struct mrp_pool_attr pa = {
		.comp_mask = MRP_POOL_ATTR_CLASSES, .classes = MRP_CLASSES_POW2,
	};
	struct mrp_pool *pw, *fn;
	struct mrp_buf bp, bf, l;

	setenv("MRPOOL_CLASSES", "fine", 1);
	pw = test_pool(&pa);
	fn = test_pool(NULL);
	unsetenv("MRPOOL_CLASSES");
	ASSERT_NE(NULL, pw);
	ASSERT_NE(NULL, fn);
	for (int round = 0; round < 3; round++) {
		/* the second and third time round, from each pool's cache */
		ASSERT_EQ(0, mrp_alloc(pw, 80 * KIB, NULL, &bp));
		ASSERT_EQ(0, mrp_alloc(fn, 80 * KIB, NULL, &bf));
		EXPECT_EQ(128 * KIB, bp.size);
		EXPECT_EQ(80 * KIB, bf.size);
		EXPECT_EQ(0, mrp_lookup(pw, bp.addr, NULL, &l));
		EXPECT_EQ(0, mrp_lookup(fn, bf.addr, NULL, &l));
		EXPECT_EQ(-ENOENT, mrp_lookup(pw, bf.addr, NULL, &l));
		EXPECT_EQ(-ENOENT, mrp_lookup(fn, bp.addr, NULL, &l));
		EXPECT_EQ(-EINVAL, mrp_free(pw, bf.addr));
		EXPECT_EQ(-EINVAL, mrp_free(fn, bp.addr));
		EXPECT_EQ(0, mrp_free(pw, bp.addr));
		EXPECT_EQ(0, mrp_free(fn, bf.addr));
	}
	EXPECT_EQ(0, test_stats(pw).bytes_in_use);
	EXPECT_EQ(0, test_stats(fn).bytes_in_use);
	EXPECT_EQ(0, test_stats(pw).double_frees);
	EXPECT_EQ(0, test_stats(fn).double_frees);
	EXPECT_EQ(0, mrp_pool_close(pw));
	EXPECT_EQ(0, mrp_pool_close(fn));
}

/*
 * mrp_alloc_aligned() at every class boundary (size - 1, size, size + 1)
 * with every alignment 1 B..4 MiB: aligned, at least the size, at most its
 * next power of two (or the alignment), and all of it writable.
 */
TEST(fine_aligned_every_boundary)
{
	struct mrp_pool *pool = fine_pool(NULL);

	ASSERT_NE(NULL, pool);
	for (size_t c = 0; c < sizeof(fine_sizes) / sizeof(fine_sizes[0]); c++) {
		for (int d = -1; d <= 1; d++) {
			size_t size = fine_sizes[c] + d;

			for (size_t al = 1; al <= 4 * MIB; al <<= 1) {
				size_t need = size > al ? size : al;
				size_t p2 = (size_t)1 << (64 - __builtin_clzl(need - 1));
				struct mrp_buf b;

				ASSERT_EQ(0, mrp_alloc_aligned(pool, size, al, NULL, &b))
					TH_LOG("size %zu align %zu", size, al);
				EXPECT_EQ(0, (uintptr_t)b.addr & (al - 1))
					TH_LOG("size %zu align %zu: %p", size, al, b.addr);
				EXPECT_LE(size, b.size);
				if (need <= MRP_MAX_CLASS)
					EXPECT_GE(p2, b.size) TH_LOG("size %zu align %zu: %zu",
								     size, al, b.size);
				memset(b.addr, 0xa5, b.size);
				ASSERT_EQ(0, mrp_free(pool, b.addr));
			}
		}
	}
	EXPECT_EQ(0, test_stats(pool).bytes_in_use);
	EXPECT_EQ(0, mrp_pool_close(pool));
}

TEST_HARNESS_MAIN
