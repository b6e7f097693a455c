// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * White-box host tests of the address map (arena.c): addresses at and
 * above 2^47 and 2^48, the bound every writer checks, the real page size,
 * and a backend that hands out addresses where arm64 puts them. Built
 * against the static library and internal.h.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <unistd.h>

#include "kselftest_harness.h"
#include "helpers.h"
#include "internal.h"

#define G	MRP_MAP_GRANULE
#define BIT(n)	((uintptr_t)1 << (n))
/* Stand-in arenas: the map stores and returns them, never dereferences. */
#define FAKE_ARENA(n)	((struct mrp_arena *)(uintptr_t)(0x10000 * (n)))

/* Reserve and set, as mrp_arena_create() does. */
static int map_put(struct mrp_map *m, uintptr_t base, size_t size, struct mrp_arena *a)
{
	int ret = mrp_map_reserve(m, base, size);

	return ret ? ret : mrp_map_set(m, base, size, a);
}

/* Every granule of [base, base + size) finds a; its neighbours do not. */
static int map_holds(struct mrp_map *m, uintptr_t base, size_t size, struct mrp_arena *a)
{
	for (uintptr_t p = base; p < base + size; p += G / 2)
		if (mrp_map_get(m, p) != a || mrp_map_get(m, p + G / 2 - 1) != a)
			return 0;
	return mrp_map_get(m, base + size - 1) == a && mrp_map_get(m, base - 1) != a &&
	       mrp_map_get(m, base + size) != a;
}

static const struct {
	uintptr_t base;
	size_t size;
} in48[] = {
	{ 0, G },				/* the lowest granule */
	{ BIT(47) - 2 * G, 2 * G },		/* just below x86-64's top */
	{ BIT(47), G },				/* the first address above it */
	{ BIT(47) + 64 * G, 8 * G },		/* a large arena above 2^47 */
	{ BIT(48) - 4 * G, 4 * G },		/* arm64's mmap top, up to the end */
}, out48[] = {
	{ BIT(48), G },				/* first address past the map */
	{ BIT(48) - 2 * G, 4 * G },		/* straddles the end */
	{ BIT(52), G },				/* 52-bit arm64 with a hint */
	{ BIT(56), G },				/* 57-bit x86-64 with a hint */
	{ BIT(63), G },
	{ UINTPTR_MAX & ~(G - 1), 2 * G },	/* base + size wraps */
	{ 0, 0 },				/* empty */
	{ BIT(40) + 4096, G },			/* not on a granule */
};

/* A 48-bit map (arm64) holds 2^47 and up to 2^48; above is -ERANGE, untouched. */
TEST(map_48_bits)
{
	struct mrp_map m = { 0 };
	struct mrp_arena *last;

	ASSERT_EQ(0, mrp_map_create(&m, 48));
	EXPECT_EQ(BIT(48 - 21), m.entries);
	EXPECT_EQ((size_t)sysconf(_SC_PAGESIZE), m.page);
	for (unsigned int i = 0; i < ARRAY_SIZE(in48); i++)
		ASSERT_EQ(0, map_put(&m, in48[i].base, in48[i].size, FAKE_ARENA(i + 1)));
	for (unsigned int i = 0; i < ARRAY_SIZE(in48); i++)
		EXPECT_TRUE(map_holds(&m, in48[i].base, in48[i].size, FAKE_ARENA(i + 1)));
	last = m.slot[m.entries - 1];
	for (unsigned int i = 0; i < ARRAY_SIZE(out48); i++) {
		/* what the probe's first granule held: an arena above, or none */
		struct mrp_arena *was = mrp_map_get(&m, out48[i].base);

		EXPECT_EQ(-ERANGE, mrp_map_reserve(&m, out48[i].base, out48[i].size));
		EXPECT_EQ(-ERANGE, mrp_map_set(&m, out48[i].base, out48[i].size,
					       FAKE_ARENA(99)));
		EXPECT_EQ(was, mrp_map_get(&m, out48[i].base));
		EXPECT_EQ(was, mrp_map_get(&m, out48[i].base + G - 1));
		if (out48[i].base >= BIT(48))
			EXPECT_EQ(NULL, was);
	}
	/* nothing was written: the arenas below the end are intact */
	EXPECT_EQ(last, m.slot[m.entries - 1]);
	for (unsigned int i = 0; i < ARRAY_SIZE(in48); i++)
		EXPECT_TRUE(map_holds(&m, in48[i].base, in48[i].size, FAKE_ARENA(i + 1)));
	/* clearing works and stays in range */
	ASSERT_EQ(0, mrp_map_set(&m, in48[2].base, in48[2].size, NULL));
	EXPECT_EQ(NULL, mrp_map_get(&m, BIT(47)));
	EXPECT_EQ(FAKE_ARENA(2), mrp_map_get(&m, BIT(47) - 1));
	mrp_map_destroy(&m);
}

/* A 47-bit map (x86-64's window) refuses 2^47 itself, and nothing spills. */
TEST(map_47_bits)
{
	struct mrp_map m = { 0 };

	ASSERT_EQ(0, mrp_map_create(&m, 47));
	ASSERT_EQ(0, map_put(&m, BIT(47) - G, G, FAKE_ARENA(1)));
	EXPECT_EQ(-ERANGE, map_put(&m, BIT(47), G, FAKE_ARENA(2)));
	EXPECT_EQ(-ERANGE, map_put(&m, BIT(47) - G, 2 * G, FAKE_ARENA(3)));
	EXPECT_EQ(-ERANGE, map_put(&m, BIT(48), G, FAKE_ARENA(4)));
	EXPECT_EQ(FAKE_ARENA(1), mrp_map_get(&m, BIT(47) - 1));
	EXPECT_EQ(NULL, mrp_map_get(&m, BIT(47)));
	EXPECT_EQ(NULL, mrp_map_get(&m, BIT(48) - 1));
	EXPECT_EQ(-EINVAL, mrp_map_create(&m, 64));
	EXPECT_EQ(-EINVAL, mrp_map_create(&m, 21));
	mrp_map_destroy(&m);
}

/* The process's map covers 2^48, this stack and real arenas. */
TEST(process_map)
{
	struct mrp_pool *pool = test_pool(NULL);
	uintptr_t stack = (uintptr_t)&pool;
	struct mrp_buf b;

	ASSERT_NE(NULL, pool);
	ASSERT_EQ(0, mrp_alloc(pool, 65536, NULL, &b));	/* the first arena makes it */
	EXPECT_LE(BIT(48), (uintptr_t)mrp_map.entries << MRP_MAP_SHIFT);
	EXPECT_LT(stack, (uintptr_t)mrp_map.entries << MRP_MAP_SHIFT);
	EXPECT_LT((uintptr_t)getauxval(AT_RANDOM), (uintptr_t)mrp_map.entries << MRP_MAP_SHIFT);
	EXPECT_EQ((size_t)sysconf(_SC_PAGESIZE), mrp_map.page);
	EXPECT_NE(NULL, mrp_arena_of((uintptr_t)b.addr));
	EXPECT_EQ(NULL, mrp_arena_of(BIT(63)));
	EXPECT_EQ(0, mrp_free(pool, b.addr));
	EXPECT_EQ(-EINVAL, mrp_free(pool, (void *)BIT(63)));
	EXPECT_EQ(0, mrp_pool_close(pool));
}

/*
 * A backend that hands out the next address of a list, mapping nothing: the
 * allocator never touches buffer memory, so arenas can sit where this host
 * cannot map (arm64 puts mmaps just below 2^48).
 */
static uintptr_t far_next;
static int far_unmaps;

static int far_map(struct mrp_pool *pool, size_t size, size_t align, struct mrp_region *r)
{
	(void)pool;
	if (!far_next || (far_next & (align - 1)))
		return -ENOMEM;
	r->base = far_next;
	r->size = size;
	r->handle = 0;
	r->locked = false;
	far_next = 0;
	return 0;
}

static void far_unmap(struct mrp_pool *pool, struct mrp_region *r)
{
	(void)pool;
	(void)r;
	far_unmaps++;
}

static struct mrp_backend_ops far_ops;

static struct mrp_pool *far_pool(void)
{
	struct mrp_pool_attr a = {
		.comp_mask = MRP_POOL_ATTR_ARENA_SIZE, .arena_size = 4 << 20,
	};
	struct mrp_pool *pool = test_pool(&a);

	if (pool) {
		far_ops = *pool->ops;
		far_ops.map = far_map;
		far_ops.unmap = far_unmap;
		pool->ops = &far_ops;
	}
	return pool;
}

/* Arenas at and above 2^47 work: alloc, lookup, keys, free, trim. */
TEST(arenas_above_2_47)
{
	static const uintptr_t bases[] = { BIT(47), BIT(48) - (4 << 20) };
	struct mrp_buf b, l;

	for (unsigned int i = 0; i < ARRAY_SIZE(bases); i++) {
		struct mrp_pool *pool = far_pool();

		ASSERT_NE(NULL, pool);
		ASSERT_EQ(0, mrp_attach_pd(pool, FAKE_PD(1), 0));
		far_next = bases[i];
		far_unmaps = 0;
		ASSERT_EQ(0, mrp_alloc(pool, 8192, FAKE_PD(1), &b));
		EXPECT_LE(bases[i], (uintptr_t)b.addr);
		EXPECT_GT(bases[i] + (4 << 20), (uintptr_t)b.addr);
		EXPECT_TRUE(fake_mr_covers(FAKE_PD(1), b.addr, 8192, b.lkey, b.rkey));
		ASSERT_EQ(0, mrp_lookup(pool, (char *)b.addr + 100, FAKE_PD(1), &l));
		EXPECT_EQ(b.addr, l.addr);
		EXPECT_EQ(b.lkey, l.lkey);
		EXPECT_EQ(8192, l.size);
		EXPECT_EQ(-ENOENT, mrp_lookup(pool, (char *)b.addr + (4 << 20), NULL, &l));
		ASSERT_EQ(0, mrp_free(pool, b.addr));
		EXPECT_EQ(1, mrp_trim(pool, MRP_TRIM_FLUSH));
		EXPECT_EQ(1, far_unmaps);
		EXPECT_EQ(NULL, mrp_arena_of(bases[i]));
		EXPECT_EQ(0, mrp_detach_pd(pool, FAKE_PD(1)));
		EXPECT_EQ(0, mrp_pool_close(pool));
		EXPECT_EQ(0, fake_live);
	}
}

/* An arena beyond the map is refused cleanly: -ENOMEM, unmapped, nothing set. */
TEST(arena_beyond_map)
{
	static const uintptr_t bases[] = { BIT(48), BIT(52), BIT(56) };
	struct mrp_buf b;

	for (unsigned int i = 0; i < ARRAY_SIZE(bases); i++) {
		struct mrp_pool *pool = far_pool();
		struct mrp_stats st;

		ASSERT_NE(NULL, pool);
		ASSERT_EQ(0, mrp_attach_pd(pool, FAKE_PD(1), 0));
		far_next = bases[i];
		far_unmaps = 0;
		EXPECT_EQ(-ENOMEM, mrp_alloc(pool, 8192, FAKE_PD(1), &b));
		EXPECT_EQ(1, far_unmaps);
		EXPECT_EQ(NULL, mrp_arena_of(bases[i]));
		EXPECT_EQ(0, fake_live);
		st = test_stats(pool);
		EXPECT_EQ(0, st.arenas);
		EXPECT_EQ(0, st.bytes_mapped);
		EXPECT_EQ(0, mrp_detach_pd(pool, FAKE_PD(1)));
		EXPECT_EQ(0, mrp_pool_close(pool));
	}
}

static atomic_bool lazy_stop;

/* Looks up addresses no pool has, until lazy_stop: 0, or what went wrong. */
static void *lazy_reader(void *arg)
{
	char local[64];
	char *heap = malloc(64);
	uintptr_t bad = !heap;

	(void)arg;
	while (!atomic_load(&lazy_stop)) {
		bad |= (mrp_free(NULL, local) != -EINVAL) << 1;
		bad |= (mrp_arena_of((uintptr_t)local) != NULL) << 2;
		bad |= (mrp_arena_of((uintptr_t)heap) != NULL) << 3;
		bad |= (mrp_arena_of(BIT(63)) != NULL) << 4;
	}
	free(heap);
	return (void *)bad;
}

/*
 * The process's map is made for the first arena, not at load nor at pool
 * open: before, it has no entries and every address is no arena's (the
 * preload shim's free() asks about every glibc block). Threads that look
 * up such addresses while the first arena makes it see the empty map or
 * the whole new one, a bound with its table (make test-tsan checks the
 * ordering). Each test runs in a process of its own, forked from a main
 * that opens no pool.
 */
TEST(map_made_by_first_arena)
{
	struct mrp_pool *pool, *second;
	struct mrp_buf b;
	pthread_t t[2];
	void *bad;

	ASSERT_EQ(0, mrp_map_entries());
	EXPECT_EQ(NULL, mrp_arena_of((uintptr_t)&pool));
	EXPECT_EQ(-EINVAL, mrp_free(NULL, &pool));
	for (int i = 0; i < 2; i++)
		ASSERT_EQ(0, pthread_create(&t[i], NULL, lazy_reader, NULL));
	usleep(1000);
	pool = test_pool(NULL);
	ASSERT_NE(NULL, pool);
	ASSERT_EQ(0, mrp_attach_pd(pool, FAKE_PD(1), 0));
	EXPECT_EQ(0, mrp_map_entries());
	EXPECT_EQ(-ENOENT, mrp_lookup(pool, &pool, NULL, &b));
	ASSERT_EQ(0, mrp_alloc(pool, 4096, FAKE_PD(1), &b));
	EXPECT_LE(BIT(48) >> MRP_MAP_SHIFT, mrp_map_entries());
	EXPECT_EQ(mrp_map.entries, mrp_map_entries());
	EXPECT_EQ(pool, mrp_arena_of((uintptr_t)b.addr)->pool);
	EXPECT_TRUE(fake_mr_covers(FAKE_PD(1), b.addr, 4096, b.lkey, b.rkey));
	usleep(1000);
	atomic_store(&lazy_stop, true);
	for (int i = 0; i < 2; i++) {
		ASSERT_EQ(0, pthread_join(t[i], &bad));
		EXPECT_EQ(NULL, bad);
	}
	/* one map per process: a second pool's arenas go in it too */
	second = test_pool(NULL);
	ASSERT_NE(NULL, second);
	EXPECT_EQ(mrp_map.entries, mrp_map_entries());
	EXPECT_EQ(0, mrp_free(pool, b.addr));
	ASSERT_EQ(0, mrp_alloc(second, 4096, NULL, &b));
	EXPECT_EQ(second, mrp_arena_of((uintptr_t)b.addr)->pool);
	EXPECT_EQ(0, mrp_free(second, b.addr));
	EXPECT_EQ(0, mrp_pool_close(second));
	EXPECT_EQ(0, mrp_detach_pd(pool, FAKE_PD(1)));
	EXPECT_EQ(0, mrp_pool_close(pool));
}

TEST_HARNESS_MAIN
