// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Host unit tests of a device going away under the pool (fake verbs that
 * fail per PD): registration per PD is best effort, mrp_pd_dead() turns a
 * PD's calls into -ENODEV without a buffer ever carrying its keys again,
 * also against allocating threads, and per-PD counters say what happened.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include <infiniband/verbs.h>

#include "kselftest_harness.h"
#include "helpers.h"

#define ARENA	(2 << 20)

static struct mrp_pool *pool_2m(bool fallback, size_t max_bytes)
{
	struct mrp_pool_attr a = {
		.comp_mask = MRP_POOL_ATTR_ARENA_SIZE | MRP_POOL_ATTR_FALLBACK |
			     MRP_POOL_ATTR_MAX_BYTES,
		.arena_size = ARENA, .fallback = fallback, .max_bytes = max_bytes,
	};

	return test_pool(&a);
}

static struct mrp_pd_stats pd_stats(struct mrp_pool *pool, struct ibv_pd *pd)
{
	struct mrp_pd_stats st;

	memset(&st, 0xff, sizeof(st));
	if (mrp_pd_stats(pool, pd, &st, sizeof(st)))
		memset(&st, 0xff, sizeof(st));
	return st;
}

/*
 * One PD refusing registrations while the pool grows: pd NULL and the other
 * PD are served from the new arenas (and the fallback), that PD gets an
 * error and never a buffer without valid keys, counted; once it accepts
 * again its keys come lazily.
 */
TEST(growth_one_pd_failing)
{
	struct mrp_pool *pool = pool_2m(true, 3 * ARENA);
	struct mrp_buf n, b1, b2, l1, f1, k;
	struct mrp_pd_stats ps;
	int regs;

	ASSERT_NE(NULL, pool);
	ASSERT_EQ(0, mrp_attach_pd(pool, FAKE_PD(1), IBV_ACCESS_LOCAL_WRITE));
	ASSERT_EQ(0, mrp_attach_pd(pool, FAKE_PD(2), IBV_ACCESS_LOCAL_WRITE));
	fake_fail_pd = FAKE_PD(2);

	/* the growth for pd NULL registers in PD 1 only, and still serves */
	regs = fake_regs;
	ASSERT_EQ(0, mrp_alloc(pool, 4096, NULL, &n));
	EXPECT_EQ(regs + 1, fake_regs);
	EXPECT_EQ(0, n.lkey);
	ASSERT_EQ(0, mrp_alloc(pool, 4096, FAKE_PD(1), &b1));
	EXPECT_TRUE(fake_mr_covers(FAKE_PD(1), b1.addr, b1.size, b1.lkey, b1.rkey));
	/* PD 2: the lazy registration fails too, nothing is handed out */
	EXPECT_EQ(-EIO, mrp_alloc(pool, 4096, FAKE_PD(2), &b2));
	EXPECT_EQ(-EIO, mrp_lookup(pool, b1.addr, FAKE_PD(2), &k));
	ps = pd_stats(pool, FAKE_PD(2));
	EXPECT_EQ(MRP_PD_LIVE, ps.state);
	EXPECT_EQ(0, ps.arenas);
	/* growth, alloc (the arena, then a fallback buffer), lookup */
	EXPECT_EQ(4, ps.reg_failures);
	ps = pd_stats(pool, FAKE_PD(1));
	EXPECT_EQ(1, ps.arenas);
	EXPECT_EQ(0, ps.reg_failures);

	/* a large buffer alike; the refused one is parked again for reuse */
	ASSERT_EQ(0, mrp_alloc(pool, 3 << 20, FAKE_PD(1), &l1));
	EXPECT_TRUE(fake_mr_covers(FAKE_PD(1), l1.addr, l1.size, l1.lkey, l1.rkey));
	ASSERT_EQ(0, mrp_free(pool, l1.addr));
	EXPECT_EQ(-EIO, mrp_alloc(pool, 3 << 20, FAKE_PD(2), &k));

	/* arenas at their limit: the fallback serves PD 1 without PD 2 */
	ASSERT_EQ(0, mrp_alloc(pool, 3 << 20, NULL, &l1));	/* the parked one */
	ASSERT_EQ(0, mrp_alloc(pool, 3 << 20, FAKE_PD(1), &f1));
	EXPECT_EQ(1, test_stats(pool).fallbacks);
	EXPECT_TRUE(fake_mr_covers(FAKE_PD(1), f1.addr, f1.size, f1.lkey, f1.rkey));
	EXPECT_EQ(-EIO, mrp_lookup(pool, f1.addr, FAKE_PD(2), &k));
	EXPECT_EQ(-EIO, mrp_alloc(pool, 3 << 20, FAKE_PD(2), &k));

	/* PD 2 works again: keys registered when asked for */
	fake_fail_pd = NULL;
	ASSERT_EQ(0, mrp_alloc(pool, 4096, FAKE_PD(2), &b2));
	EXPECT_TRUE(fake_mr_covers(FAKE_PD(2), b2.addr, b2.size, b2.lkey, b2.rkey));
	ASSERT_EQ(0, mrp_lookup(pool, l1.addr, FAKE_PD(2), &k));
	EXPECT_TRUE(fake_mr_covers(FAKE_PD(2), l1.addr, l1.size, k.lkey, k.rkey));
	ASSERT_EQ(0, mrp_lookup(pool, f1.addr, FAKE_PD(2), &k));
	EXPECT_TRUE(fake_mr_covers(FAKE_PD(2), f1.addr, f1.size, k.lkey, k.rkey));
	EXPECT_EQ(2, pd_stats(pool, FAKE_PD(2)).arenas);

	ASSERT_EQ(0, mrp_free(pool, n.addr));
	ASSERT_EQ(0, mrp_free(pool, b1.addr));
	ASSERT_EQ(0, mrp_free(pool, b2.addr));
	ASSERT_EQ(0, mrp_free(pool, l1.addr));
	ASSERT_EQ(0, mrp_free(pool, f1.addr));
	EXPECT_EQ(0, test_stats(pool).dereg_errors);
	EXPECT_EQ(0, mrp_pool_close(pool));
	EXPECT_EQ(0, fake_live);
}

/*
 * PD 2 refused the arena and its lazy registration fails too (a memlock
 * limit a whole arena exceeds, say): the allocation falls back to a
 * buffer of its own, registered in PD 2, as a failed growth always did.
 */
TEST(refused_arena_falls_back)
{
	struct mrp_pool *pool = pool_2m(true, 0);
	struct mrp_buf n, b2;

	ASSERT_NE(NULL, pool);
	ASSERT_EQ(0, mrp_attach_pd(pool, FAKE_PD(1), IBV_ACCESS_LOCAL_WRITE));
	ASSERT_EQ(0, mrp_attach_pd(pool, FAKE_PD(2), IBV_ACCESS_LOCAL_WRITE));
	fake_fail_pd = FAKE_PD(2);
	ASSERT_EQ(0, mrp_alloc(pool, 4096, NULL, &n));	/* the arena, without PD 2 */
	fake_fail_pd = NULL;
	fake_fail_next = 1;				/* the lazy registration */
	ASSERT_EQ(0, mrp_alloc(pool, 4096, FAKE_PD(2), &b2));
	EXPECT_EQ(1, test_stats(pool).fallbacks);
	EXPECT_TRUE(fake_mr_covers(FAKE_PD(2), b2.addr, b2.size, b2.lkey, b2.rkey));
	EXPECT_EQ(0, pd_stats(pool, FAKE_PD(2)).arenas);
	EXPECT_EQ(2, pd_stats(pool, FAKE_PD(2)).reg_failures);
	ASSERT_EQ(0, mrp_free(pool, b2.addr));
	ASSERT_EQ(0, mrp_free(pool, n.addr));
	EXPECT_EQ(0, mrp_pool_close(pool));
	EXPECT_EQ(0, fake_live);
}

/*
 * A thread cache holding buffers of an arena PD 2 refused and of one it
 * took: an allocation for PD 2 picks the registered one, no registration.
 */
TEST(cache_prefers_registered)
{
	struct mrp_pool_attr at = {
		.comp_mask = MRP_POOL_ATTR_ARENA_SIZE | MRP_POOL_ATTR_TCACHE_BYTES,
		.arena_size = ARENA, .tcache_bytes = 4 << 20,	/* 4 per bin, batch 2 */
	};
	struct mrp_pool *pool = test_pool(&at);
	struct mrp_buf a, b, k;
	int regs;

	ASSERT_NE(NULL, pool);
	ASSERT_EQ(0, mrp_attach_pd(pool, FAKE_PD(1), 0));
	ASSERT_EQ(0, mrp_attach_pd(pool, FAKE_PD(2), 0));
	ASSERT_EQ(0, mrp_alloc(pool, 1 << 20, FAKE_PD(2), &a));	/* arena 1, both */
	fake_fail_pd = FAKE_PD(2);
	ASSERT_EQ(0, mrp_alloc(pool, 1 << 20, NULL, &b));	/* arena 1 */
	ASSERT_EQ(0, mrp_alloc(pool, 1 << 20, NULL, &k));	/* arena 2, PD 1 only */
	fake_fail_pd = NULL;
	/* the cache: arena 2's other buffer, a, k on top */
	ASSERT_EQ(0, mrp_free(pool, a.addr));
	ASSERT_EQ(0, mrp_free(pool, k.addr));
	regs = fake_regs;
	ASSERT_EQ(0, mrp_alloc(pool, 1 << 20, FAKE_PD(2), &k));
	EXPECT_EQ(a.addr, k.addr);
	EXPECT_EQ(regs, fake_regs);
	EXPECT_TRUE(fake_mr_covers(FAKE_PD(2), k.addr, k.size, k.lkey, k.rkey));
	ASSERT_EQ(0, mrp_free(pool, k.addr));
	ASSERT_EQ(0, mrp_free(pool, b.addr));
	EXPECT_EQ(0, mrp_pool_close(pool));
	EXPECT_EQ(0, fake_live);
}

/*
 * mrp_pd_dead(): -ENODEV for that PD from the cache, growth, large and
 * lookup, its keys never handed out; PD 1 and pd NULL unaffected; new
 * arenas skip it; its MRs go at detach, failures counted, nothing retired.
 */
TEST(pd_dead)
{
	struct mrp_pool *pool = pool_2m(true, 4 * ARENA);
	struct mrp_buf c, b, k, big;
	struct mrp_pd_stats ps;
	struct mrp_stats st;
	int regs;

	ASSERT_NE(NULL, pool);
	EXPECT_EQ(-ENOENT, mrp_pd_dead(pool, FAKE_PD(2)));
	EXPECT_EQ(-EINVAL, mrp_pd_dead(pool, NULL));
	EXPECT_EQ(-EINVAL, mrp_pd_dead(NULL, FAKE_PD(2)));
	ASSERT_EQ(0, mrp_attach_pd(pool, FAKE_PD(1), 0));
	ASSERT_EQ(0, mrp_attach_pd(pool, FAKE_PD(2), 0));
	/* a buffer with PD 2's keys cached, one held */
	ASSERT_EQ(0, mrp_alloc(pool, 8192, FAKE_PD(2), &c));
	ASSERT_EQ(0, mrp_free(pool, c.addr));
	ASSERT_EQ(0, mrp_alloc(pool, 4096, FAKE_PD(2), &b));

	ASSERT_EQ(0, mrp_pd_dead(pool, FAKE_PD(2)));
	EXPECT_EQ(0, mrp_pd_dead(pool, FAKE_PD(2)));	/* idempotent */
	ps = pd_stats(pool, FAKE_PD(2));
	EXPECT_EQ(MRP_PD_DEAD, ps.state);
	EXPECT_EQ(0, ps.arenas);
	EXPECT_EQ(-ENODEV, mrp_alloc(pool, 8192, FAKE_PD(2), &k));	/* cached */
	EXPECT_EQ(-ENODEV, mrp_alloc(pool, 65536, FAKE_PD(2), &k));	/* growth */
	EXPECT_EQ(-ENODEV, mrp_alloc(pool, 3 << 20, FAKE_PD(2), &k));	/* large */
	EXPECT_EQ(-ENODEV, mrp_alloc_aligned(pool, 4096, 4 << 20, FAKE_PD(2), &k));
	EXPECT_EQ(-ENODEV, mrp_lookup(pool, b.addr, FAKE_PD(2), &k));
	EXPECT_STRNE("", mrp_strerror(-ENODEV));

	/* the others: the cached buffer, new arenas (PD 1 only), fallback */
	ASSERT_EQ(0, mrp_alloc(pool, 8192, FAKE_PD(1), &k));
	EXPECT_EQ(c.addr, k.addr);
	EXPECT_TRUE(fake_mr_covers(FAKE_PD(1), k.addr, k.size, k.lkey, k.rkey));
	ASSERT_EQ(0, mrp_free(pool, k.addr));
	regs = fake_regs;
	ASSERT_EQ(0, mrp_alloc(pool, 3 << 20, FAKE_PD(1), &big));
	EXPECT_EQ(regs + 1, fake_regs);
	EXPECT_TRUE(fake_mr_covers(FAKE_PD(1), big.addr, big.size, big.lkey, big.rkey));
	ASSERT_EQ(0, mrp_alloc(pool, 65536, NULL, &k));	/* over the limit */
	EXPECT_EQ(1, test_stats(pool).fallbacks);
	EXPECT_EQ(-ENODEV, mrp_lookup(pool, k.addr, FAKE_PD(2), &c));
	ASSERT_EQ(0, mrp_lookup(pool, k.addr, FAKE_PD(1), &c));
	EXPECT_TRUE(fake_mr_covers(FAKE_PD(1), k.addr, k.size, c.lkey, c.rkey));
	ASSERT_EQ(0, mrp_free(pool, k.addr));
	EXPECT_EQ(0, pd_stats(pool, FAKE_PD(2)).arenas);

	/* detach: the device is gone, so its deregistrations fail */
	fake_dereg_fail_pd = FAKE_PD(2);
	EXPECT_EQ(0, mrp_detach_pd(pool, FAKE_PD(2)));
	fake_dereg_fail_pd = NULL;
	st = test_stats(pool);
	EXPECT_EQ(1, st.pds);
	EXPECT_EQ(2, st.dereg_errors);		/* the two arenas it had */
	EXPECT_EQ(0, st.arenas_trimmed);
	EXPECT_EQ(-EINVAL, mrp_alloc(pool, 4096, FAKE_PD(2), &k));
	EXPECT_EQ(-ENOENT, mrp_pd_stats(pool, FAKE_PD(2), &ps, sizeof(ps)));
	/* not retired: trim releases the arenas once their buffers are back */
	ASSERT_EQ(0, mrp_free(pool, b.addr));
	ASSERT_EQ(0, mrp_free(pool, big.addr));
	EXPECT_EQ(3, mrp_trim(pool, MRP_TRIM_FLUSH));
	EXPECT_EQ(0, test_stats(pool).arenas);

	/* the slot, reused, starts live with counters of its own */
	ASSERT_EQ(0, mrp_attach_pd(pool, FAKE_PD(3), 0));
	ps = pd_stats(pool, FAKE_PD(3));
	EXPECT_EQ(MRP_PD_LIVE, ps.state);
	EXPECT_EQ(0, ps.dereg_errors);
	ASSERT_EQ(0, mrp_alloc(pool, 4096, FAKE_PD(3), &k));
	EXPECT_TRUE(fake_mr_covers(FAKE_PD(3), k.addr, k.size, k.lkey, k.rkey));
	ASSERT_EQ(0, mrp_free(pool, k.addr));
	EXPECT_EQ(0, mrp_pool_close(pool));
	EXPECT_EQ(0, fake_live);
}

/* A dead PD's MRs still attached at close: they go, failures tolerated. */
TEST(pd_dead_close)
{
	struct mrp_pool *pool = pool_2m(false, 0);
	struct mrp_buf b;
	unsigned char vec;
	uintptr_t base;

	ASSERT_NE(NULL, pool);
	ASSERT_EQ(0, mrp_attach_pd(pool, FAKE_PD(1), 0));
	ASSERT_EQ(0, mrp_alloc(pool, 4096, FAKE_PD(1), &b));
	base = (uintptr_t)b.addr & ~(uintptr_t)(ARENA - 1);
	ASSERT_EQ(0, mrp_free(pool, b.addr));
	ASSERT_EQ(0, mrp_pd_dead(pool, FAKE_PD(1)));
	fake_dereg_fail_pd = FAKE_PD(1);
	EXPECT_EQ(0, mrp_pool_close(pool));
	fake_dereg_fail_pd = NULL;
	EXPECT_EQ(0, fake_live);
	/* unmapped, not kept as a retired arena would be */
	EXPECT_EQ(-1, mincore((void *)base, 4096, &vec));
}

/* Allocator threads of the concurrent test. */
struct racer {
	struct mrp_pool *pool;
	struct ibv_pd *pd;
	bool victim;			/* allocates in the PD marked dead */
	atomic_bool *dead_done;		/* mrp_pd_dead() has returned */
	atomic_bool *stop;
	atomic_ulong ok, enodev;	/* watched by the main thread */
	unsigned long late_ok, errors, bad_keys;
};

static void *racer_main(void *arg)
{
	struct racer *r = arg;
	void *held[4] = { 0 };
	unsigned int i = 0;

	while (!atomic_load(r->stop)) {
		bool after = r->victim && atomic_load(r->dead_done);
		size_t size = (size_t)4096 << (i % 5);
		struct mrp_buf b;
		int ret;

		if (i % 61 == 60)
			size = 3 << 20;
		ret = mrp_alloc(r->pool, size, r->pd, &b);
		i++;
		if (ret == -ENODEV && r->victim) {
			/*
			 * Fails without a syscall: sleep, or under valgrind's
			 * scheduler this loop starves the main thread.
			 */
			atomic_fetch_add(&r->enodev, 1);
			sleep_ms(1);
			continue;
		}
		if (ret) {
			r->errors++;
			continue;
		}
		atomic_fetch_add(&r->ok, 1);
		r->late_ok += after;
		if (r->pd && !(i % 16) &&
		    !fake_mr_covers(r->pd, b.addr, b.size, b.lkey, b.rkey))
			r->bad_keys++;
		if (held[i % 4] && mrp_free(r->pool, held[i % 4]))
			r->errors++;
		held[i % 4] = b.addr;
	}
	for (int k = 0; k < 4; k++)
		if (held[k] && mrp_free(r->pool, held[k]))
			r->errors++;
	return NULL;
}

/*
 * Threads allocate in PD 1, PD 2 and pd NULL (the pool thread growing and
 * trimming too) while another marks PD 2 dead: every allocation for PD 2
 * that starts after mrp_pd_dead() returned fails with -ENODEV, the others
 * never fail and always carry live keys of their PD.
 */
TEST(pd_dead_concurrent)
{
	struct mrp_pool_attr a = {
		.comp_mask = MRP_POOL_ATTR_ARENA_SIZE | MRP_POOL_ATTR_BACKGROUND |
			     MRP_POOL_ATTR_TRIM_DELAY,
		.arena_size = ARENA, .background = 1, .trim_delay_ms = 20,
	};
	struct mrp_pool *pool = test_pool(&a);
	struct ibv_pd *pds[5] = { FAKE_PD(1), FAKE_PD(2), FAKE_PD(2), NULL, FAKE_PD(1) };
	atomic_bool dead_done = false, stop = false;
	struct racer r[5];
	pthread_t tid[5];

	ASSERT_NE(NULL, pool);
	ASSERT_EQ(0, mrp_attach_pd(pool, FAKE_PD(1), 0));
	ASSERT_EQ(0, mrp_attach_pd(pool, FAKE_PD(2), 0));
	for (int i = 0; i < 5; i++) {
		memset(&r[i], 0, sizeof(r[i]));
		r[i].pool = pool;
		r[i].pd = pds[i];
		r[i].victim = pds[i] == FAKE_PD(2);
		r[i].dead_done = &dead_done;
		r[i].stop = &stop;
		ASSERT_EQ(0, pthread_create(&tid[i], NULL, racer_main, &r[i]));
	}
	/* every thread under way (valgrind schedules coarsely), then the mark */
	for (int i = 0, n = 0; i < 5 && n < 2000; n++) {
		if (atomic_load(&r[i].ok) >= 20)
			i++;
		else
			sleep_ms(5);
	}
	ASSERT_EQ(0, mrp_pd_dead(pool, FAKE_PD(2)));
	atomic_store(&dead_done, true);
	for (int i = 0, n = 0; i < 5 && n < 2000; n++) {
		if (atomic_load(r[i].victim ? &r[i].enodev : &r[i].ok) >= 40)
			i++;
		else
			sleep_ms(5);
	}
	atomic_store(&stop, true);
	for (int i = 0; i < 5; i++) {
		pthread_join(tid[i], NULL);
		EXPECT_LT(0, r[i].ok);
		EXPECT_EQ(0, r[i].errors);
		EXPECT_EQ(0, r[i].bad_keys);
		EXPECT_EQ(0, r[i].late_ok);
		if (r[i].victim)
			EXPECT_LT(0, r[i].enodev);
	}
	EXPECT_EQ(0, mrp_detach_pd(pool, FAKE_PD(2)));
	EXPECT_EQ(0, mrp_pool_close(pool));
	EXPECT_EQ(0, fake_live);
}

TEST_HARNESS_MAIN
