// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Host unit tests of the pool's life around the allocator: trim (explicit
 * and background), growth ahead of demand, limits and the counted
 * fallback, PD registration (against the recording fake verbs), fork, and
 * the sampled latency histogram.
 */
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "kselftest_harness.h"
#include "helpers.h"
#include "internal.h"

/* What ucm_vm_munmap() below was told: UCX's entry point, found by dlsym. */
static void *ucm_addr;
static size_t ucm_len;
static int ucm_calls;

void ucm_vm_munmap(void *addr, size_t len);
__attribute__((visibility("default"))) void ucm_vm_munmap(void *addr, size_t len)
{
	ucm_addr = addr;
	ucm_len = len;
	ucm_calls++;
}

/* Trim tells UCX's registration cache (when loaded) before unmapping an arena. */
TEST(trim_tells_ucx)
{
	struct mrp_pool *pool = test_pool(NULL);
	struct mrp_buf b;

	ASSERT_NE(NULL, pool);
	ASSERT_EQ(0, mrp_alloc(pool, 65536, NULL, &b));
	ASSERT_EQ(0, mrp_free(pool, b.addr));
	ucm_calls = 0;
	EXPECT_EQ(1, mrp_trim(pool, MRP_TRIM_FLUSH));
	EXPECT_EQ(1, ucm_calls);
	EXPECT_TRUE((uintptr_t)ucm_addr <= (uintptr_t)b.addr &&
		    (uintptr_t)b.addr < (uintptr_t)ucm_addr + ucm_len);
	EXPECT_EQ(4 << 20, ucm_len);
	EXPECT_EQ(0, mrp_pool_close(pool));
}

/* Trim releases fully free arenas only; live buffers keep theirs. */
TEST(trim_keeps_live)
{
	struct mrp_pool *pool = test_pool(NULL);
	struct mrp_buf live, gone;
	struct mrp_stats st;

	ASSERT_NE(NULL, pool);
	ASSERT_EQ(0, mrp_alloc(pool, 4096, NULL, &live));
	ASSERT_EQ(0, mrp_alloc(pool, 65536, NULL, &gone));
	memset(live.addr, 0x5a, 4096);
	ASSERT_EQ(0, mrp_free(pool, gone.addr));
	st = test_stats(pool);
	EXPECT_EQ(2, st.arenas);
	EXPECT_EQ(1, mrp_trim(pool, MRP_TRIM_FLUSH));
	st = test_stats(pool);
	EXPECT_EQ(1, st.arenas);
	EXPECT_EQ(1, st.arenas_trimmed);
	EXPECT_EQ(4 << 20, st.bytes_mapped);
	EXPECT_EQ(0x5a, ((unsigned char *)live.addr)[4095]);
	EXPECT_EQ(0, mrp_trim(pool, MRP_TRIM_FLUSH));
	ASSERT_EQ(0, mrp_free(pool, live.addr));
	EXPECT_EQ(1, mrp_trim(pool, MRP_TRIM_FLUSH));
	EXPECT_EQ(0, mrp_pool_close(pool));
}

/*
 * A held arena (the preload shim holds one for each served MR pointing
 * into it) is not trimmed, however idle: neither a class arena whose
 * buffers are all free nor a parked large one. Once the last hold is
 * dropped, trim releases it.
 */
TEST(trim_keeps_held)
{
	struct mrp_pool *pool = test_pool(NULL);
	struct mrp_arena *ca, *la;
	struct mrp_buf c, l;

	ASSERT_NE(NULL, pool);
	ASSERT_EQ(0, mrp_alloc(pool, 65536, NULL, &c));
	ASSERT_EQ(0, mrp_alloc(pool, 3 << 20, NULL, &l));
	ca = mrp_arena_of((uintptr_t)c.addr);
	la = mrp_arena_of((uintptr_t)l.addr);
	ASSERT_TRUE(ca && la && ca != la);
	ASSERT_TRUE(mrp_arena_hold(ca));
	ASSERT_TRUE(mrp_arena_hold(la));
	ASSERT_TRUE(mrp_arena_hold(la));
	ASSERT_EQ(0, mrp_free(pool, c.addr));
	ASSERT_EQ(0, mrp_free(pool, l.addr));	/* parked */
	EXPECT_EQ(0, mrp_trim(pool, MRP_TRIM_FLUSH));
	EXPECT_EQ(2, test_stats(pool).arenas);
	memset(c.addr, 1, 65536);		/* still mapped */
	memset(l.addr, 1, 3 << 20);
	mrp_arena_unhold(ca);
	EXPECT_EQ(1, mrp_trim(pool, MRP_TRIM_FLUSH));
	mrp_arena_unhold(la);
	EXPECT_EQ(0, mrp_trim(pool, MRP_TRIM_FLUSH));	/* one hold left */
	mrp_arena_unhold(la);
	EXPECT_EQ(1, mrp_trim(pool, MRP_TRIM_FLUSH));
	EXPECT_EQ(0, test_stats(pool).arenas);
	EXPECT_EQ(0, mrp_pool_close(pool));
}

static void *alloc_free_exit(void *arg)
{
	struct mrp_buf b;

	if (mrp_alloc(arg, 4096, NULL, &b) || mrp_free(arg, b.addr))
		return arg;
	return NULL;	/* thread exit hands the cached buffer to the depot */
}

/* The pool thread returns idle arenas after the trim delay, not before. */
TEST(background_trim)
{
	struct mrp_pool_attr a = {
		.comp_mask = MRP_POOL_ATTR_BACKGROUND | MRP_POOL_ATTR_TRIM_DELAY,
		.background = 1, .trim_delay_ms = 400,
	};
	struct mrp_pool *pool = test_pool(&a);
	struct mrp_stats st;
	uint64_t t0, dt;
	pthread_t t;
	void *ret;

	ASSERT_NE(NULL, pool);
	/*
	 * The arena's last free happens after t0, so no trim can happen
	 * before t0 + 400 ms: both bounds below hold however late this
	 * thread runs, they are not timings.
	 */
	t0 = now_ms();
	ASSERT_EQ(0, pthread_create(&t, NULL, alloc_free_exit, pool));
	ASSERT_EQ(0, pthread_join(t, &ret));
	ASSERT_EQ(NULL, ret);
	st = test_stats(pool);
	/* read before the delay can have run out: still there */
	if (now_ms() - t0 < 390) {
		EXPECT_EQ(1, st.arenas);
		EXPECT_EQ(0, st.arenas_trimmed);
	}
	do {
		st = test_stats(pool);
		if (!st.arenas)
			break;
		sleep_ms(20);
	} while (now_ms() - t0 < 60000);
	dt = now_ms() - t0;
	EXPECT_EQ(0, st.arenas);
	EXPECT_EQ(1, st.arenas_trimmed);
	/* seen trimmed, so trimmed, so the delay had passed (ms rounding) */
	EXPECT_LE(399, dt);
	EXPECT_EQ(0, mrp_pool_close(pool));
}

/* Threads of this process (/proc/self/task entries). */
static int task_count(void)
{
	struct dirent *d;
	DIR *dir = opendir("/proc/self/task");
	int n = 0;

	if (!dir)
		return -1;
	while ((d = readdir(dir)))
		n += d->d_name[0] != '.';
	closedir(dir);
	return n;
}

/*
 * mrp_bg_pause() (the preload shim's unshare() and setns()) leaves the
 * process with its own threads only, work pending or not; after
 * mrp_bg_resume() the new pool thread trims what was freed meanwhile,
 * which nothing trimmed before. A pool closed while paused has no thread
 * to join.
 */
TEST(background_pause_resume)
{
	struct mrp_pool_attr a = {
		.comp_mask = MRP_POOL_ATTR_BACKGROUND | MRP_POOL_ATTR_TRIM_DELAY,
		.background = 1, .trim_delay_ms = 50,
	};
	struct mrp_pool *pool = test_pool(&a);
	struct mrp_stats st;
	pthread_t t;
	void *ret;
	int n;

	ASSERT_NE(NULL, pool);
	n = task_count();
	ASSERT_LE(2, n);
	ASSERT_TRUE(mrp_bg_pause(pool));
	EXPECT_EQ(n - 1, task_count());
	EXPECT_FALSE(mrp_bg_pause(pool));
	/* freed while paused, idle for longer than the delay: the trim waits */
	ASSERT_EQ(0, pthread_create(&t, NULL, alloc_free_exit, pool));
	ASSERT_EQ(0, pthread_join(t, &ret));
	ASSERT_EQ(NULL, ret);
	sleep_ms(200);
	st = test_stats(pool);
	EXPECT_EQ(1, st.arenas);
	EXPECT_EQ(0, st.arenas_trimmed);
	ASSERT_EQ(0, mrp_bg_resume(pool));
	EXPECT_EQ(n, task_count());
	for (int i = 0; i < 3000; i++) {
		st = test_stats(pool);
		if (st.arenas_trimmed)
			break;
		sleep_ms(20);
	}
	EXPECT_EQ(0, st.arenas);
	EXPECT_EQ(1, st.arenas_trimmed);
	ASSERT_TRUE(mrp_bg_pause(pool));
	EXPECT_EQ(0, mrp_pool_close(pool));
	EXPECT_EQ(n - 1, task_count());
}

/* Below the low-water mark the pool thread adds an arena by itself. */
TEST(background_growth)
{
	struct mrp_pool_attr a = {
		.comp_mask = MRP_POOL_ATTR_BACKGROUND | MRP_POOL_ATTR_ARENA_SIZE,
		.background = 1, .arena_size = 2 << 20,
	};
	struct mrp_pool *pool = test_pool(&a);
	struct mrp_buf b[400];
	struct mrp_stats st;
	int waited = 0;

	ASSERT_NE(NULL, pool);
	/* 512 buffers of 4 KiB per arena; low water is 256 */
	for (int i = 0; i < 400; i++)
		ASSERT_EQ(0, mrp_alloc(pool, 4096, NULL, &b[i]));
	do {
		st = test_stats(pool);
		if (st.bg_growths)
			break;
		sleep_ms(10);
		waited += 10;
	} while (waited < 60000);
	EXPECT_LE(1, st.bg_growths);
	EXPECT_EQ(1, st.sync_growths);
	EXPECT_LE(2, st.arenas);
	for (int i = 0; i < 400; i++)
		ASSERT_EQ(0, mrp_free(pool, b[i].addr));
	EXPECT_EQ(0, mrp_pool_close(pool));
}

/* At max_bytes: ENOMEM, or a counted, registered fallback when allowed. */
TEST(limit_and_fallback)
{
	struct mrp_pool_attr a = {
		.comp_mask = MRP_POOL_ATTR_MAX_BYTES | MRP_POOL_ATTR_ARENA_SIZE,
		.max_bytes = 2 << 20, .arena_size = 2 << 20,
	};
	struct mrp_pool *pool = test_pool(&a);
	struct mrp_buf b[512], f, l;
	struct mrp_stats st;
	int live0;

	ASSERT_NE(NULL, pool);
	for (int i = 0; i < 512; i++)
		ASSERT_EQ(0, mrp_alloc(pool, 4096, NULL, &b[i]));
	EXPECT_EQ(-ENOMEM, mrp_alloc(pool, 4096, NULL, &f));
	EXPECT_EQ(-ENOMEM, mrp_alloc(pool, 4 << 20, NULL, &f));
	for (int i = 0; i < 512; i++)
		ASSERT_EQ(0, mrp_free(pool, b[i].addr));
	EXPECT_EQ(0, mrp_pool_close(pool));

	a.comp_mask |= MRP_POOL_ATTR_FALLBACK;
	a.fallback = 1;
	pool = test_pool(&a);
	ASSERT_NE(NULL, pool);
	ASSERT_EQ(0, mrp_attach_pd(pool, FAKE_PD(1), IBV_ACCESS_LOCAL_WRITE));
	for (int i = 0; i < 512; i++)
		ASSERT_EQ(0, mrp_alloc(pool, 4096, FAKE_PD(1), &b[i]));
	live0 = fake_live;
	ASSERT_EQ(0, mrp_alloc(pool, 6000, FAKE_PD(1), &f));
	EXPECT_EQ(8192, f.size);
	EXPECT_EQ(0, (uintptr_t)f.addr & 8191);
	EXPECT_EQ(live0 + 1, fake_live);
	EXPECT_TRUE(fake_mr_covers(FAKE_PD(1), f.addr, f.size, f.lkey, f.rkey));
	memset(f.addr, 1, f.size);
	ASSERT_EQ(0, mrp_lookup(pool, (char *)f.addr + 100, FAKE_PD(1), &l));
	EXPECT_EQ(f.addr, l.addr);
	EXPECT_EQ(f.lkey, l.lkey);
	st = test_stats(pool);
	EXPECT_EQ(1, st.fallbacks);
	EXPECT_EQ(8192, st.fallback_bytes);
	EXPECT_EQ(513 * 4096 + 4096, st.bytes_in_use);	/* 512 x 4K + the 8K one */
	ASSERT_EQ(0, mrp_free(pool, f.addr));
	EXPECT_EQ(live0, fake_live);
	st = test_stats(pool);
	EXPECT_EQ(0, st.fallback_bytes);
	EXPECT_EQ(-EINVAL, mrp_free(pool, f.addr));
	for (int i = 0; i < 512; i++)
		ASSERT_EQ(0, mrp_free(pool, b[i].addr));
	EXPECT_EQ(0, mrp_pool_close(pool));
	EXPECT_EQ(0, fake_live);
}

/* Every arena is registered once per PD; keys come with every buffer. */
TEST(attach_detach)
{
	struct mrp_pool_attr a = {
		.comp_mask = MRP_POOL_ATTR_ARENA_SIZE, .arena_size = 2 << 20,
	};
	struct mrp_pool *pool = test_pool(&a);
	struct mrp_buf b[3], k1, k2;
	struct mrp_stats st;

	ASSERT_NE(NULL, pool);
	/* one arena before the attach, two after */
	ASSERT_EQ(0, mrp_alloc(pool, 2 << 20, NULL, &b[0]));
	ASSERT_EQ(0, mrp_attach_pd(pool, FAKE_PD(1), IBV_ACCESS_LOCAL_WRITE));
	EXPECT_EQ(-EEXIST, mrp_attach_pd(pool, FAKE_PD(1), 0));
	EXPECT_EQ(1, fake_live);
	ASSERT_EQ(0, mrp_alloc(pool, 2 << 20, FAKE_PD(1), &b[1]));
	ASSERT_EQ(0, mrp_alloc(pool, 5 << 20, FAKE_PD(1), &b[2]));
	EXPECT_EQ(3, fake_live);
	for (int i = 0; i < 3; i++) {
		ASSERT_EQ(0, mrp_lookup(pool, (char *)b[i].addr + 4096, FAKE_PD(1), &k1));
		EXPECT_TRUE(fake_mr_covers(FAKE_PD(1), b[i].addr, b[i].size,
					   k1.lkey, k1.rkey));
	}
	EXPECT_TRUE(fake_mr_covers(FAKE_PD(1), b[1].addr, b[1].size, b[1].lkey, b[1].rkey));

	/* a second PD: every arena again, keys of its own */
	ASSERT_EQ(0, mrp_attach_pd(pool, FAKE_PD(2), IBV_ACCESS_LOCAL_WRITE));
	EXPECT_EQ(6, fake_live);
	ASSERT_EQ(0, mrp_lookup(pool, b[1].addr, FAKE_PD(2), &k2));
	ASSERT_EQ(0, mrp_lookup(pool, b[1].addr, FAKE_PD(1), &k1));
	EXPECT_NE(k1.lkey, k2.lkey);
	EXPECT_TRUE(fake_mr_covers(FAKE_PD(2), b[1].addr, b[1].size, k2.lkey, k2.rkey));
	/* the second slot through the fast path (a cached buffer) */
	ASSERT_EQ(0, mrp_alloc(pool, 4096, FAKE_PD(2), &k2));
	ASSERT_EQ(0, mrp_free(pool, k2.addr));
	ASSERT_EQ(0, mrp_alloc(pool, 4096, FAKE_PD(2), &k2));
	EXPECT_TRUE(fake_mr_covers(FAKE_PD(2), k2.addr, k2.size, k2.lkey, k2.rkey));
	ASSERT_EQ(0, mrp_free(pool, k2.addr));
	st = test_stats(pool);
	EXPECT_EQ(2, st.pds);
	EXPECT_EQ(8, st.registrations);	/* the 4 KiB class arena, in both */

	/* a failed registration leaves nothing behind */
	fake_fail_next = 1;
	EXPECT_EQ(-EFAULT, mrp_attach_pd(pool, FAKE_PD(3), IBV_ACCESS_LOCAL_WRITE));
	EXPECT_EQ(8, fake_live);
	EXPECT_EQ(-EINVAL, mrp_lookup(pool, b[1].addr, FAKE_PD(3), &k2));

	/* too many PDs */
	for (int i = 3; i <= MRP_MAX_PDS; i++)
		ASSERT_EQ(0, mrp_attach_pd(pool, FAKE_PD(i), 0));
	EXPECT_EQ(-ENOSPC, mrp_attach_pd(pool, FAKE_PD(MRP_MAX_PDS + 1), 0));
	for (int i = 3; i <= MRP_MAX_PDS; i++)
		ASSERT_EQ(0, mrp_detach_pd(pool, FAKE_PD(i)));
	EXPECT_EQ(8, fake_live);

	ASSERT_EQ(0, mrp_detach_pd(pool, FAKE_PD(1)));
	EXPECT_EQ(4, fake_live);
	EXPECT_EQ(-EINVAL, mrp_alloc(pool, 4096, FAKE_PD(1), &k1));
	EXPECT_EQ(-ENOENT, mrp_detach_pd(pool, FAKE_PD(1)));
	/* trimmed arenas (b[0]'s and the 4 KiB one) are deregistered */
	ASSERT_EQ(0, mrp_free(pool, b[0].addr));
	EXPECT_EQ(2, mrp_trim(pool, MRP_TRIM_FLUSH));
	EXPECT_EQ(2, fake_live);
	for (int i = 1; i < 3; i++)
		ASSERT_EQ(0, mrp_free(pool, b[i].addr));
	EXPECT_EQ(0, mrp_pool_close(pool));
	EXPECT_EQ(0, fake_live);
}

/* A forked child gets -ECHILD from the parent's pool and none of its memory. */
TEST(fork_child)
{
	struct mrp_pool *pool = test_pool(NULL);
	struct mrp_buf b, c;
	unsigned char vec;
	int status, dontfork;
	pid_t pid;

	ASSERT_NE(NULL, pool);
	ASSERT_EQ(0, mrp_alloc(pool, 8192, NULL, &b));
	ASSERT_EQ(0, mrp_free(pool, b.addr));	/* now in this thread's cache */
	ASSERT_EQ(0, mrp_alloc(pool, 4096, NULL, &c));
	memset(c.addr, 3, 4096);
	dontfork = test_dontfork_works();
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
		int bad = 0;

		bad |= mrp_alloc(pool, 8192, NULL, &b) != -ECHILD;	/* cache was hot */
		bad |= (mrp_alloc(pool, 1 << 20, NULL, &b) != -ECHILD) << 1;
		bad |= (mrp_free(pool, c.addr) != -ECHILD) << 2;
		bad |= (mrp_trim(pool, 0) != -ECHILD) << 3;
		bad |= (mrp_attach_pd(pool, FAKE_PD(1), 0) != -ECHILD) << 4;
		/*
		 * the arena is not mapped here (where MADV_DONTFORK works);
		 * mincore() wants the start of a page, and c, 4 KiB, starts
		 * inside one where pages are larger (16 KiB on arm64)
		 */
		if (dontfork)
			bad |= (mincore((void *)((uintptr_t)c.addr & ~(page - 1)), 1, &vec) != -1 ||
				errno != ENOMEM) << 5;
		bad |= (mrp_pool_close(pool) != 0) << 6;
		_exit(bad);
	}
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	ASSERT_TRUE(WIFEXITED(status));
	EXPECT_EQ(0, WEXITSTATUS(status));
	/* the parent carries on */
	EXPECT_EQ(3, ((unsigned char *)c.addr)[4095]);
	ASSERT_EQ(0, mrp_alloc(pool, 8192, NULL, &b));
	EXPECT_EQ(0, mrp_free(pool, b.addr));
	EXPECT_EQ(0, mrp_free(pool, c.addr));
	EXPECT_EQ(0, mrp_pool_close(pool));
}

struct holder {
	struct mrp_pool *pool;
	pthread_barrier_t *step;
	int ret;
};

/* Alloc and free (the buffer stays in this thread's cache), then wait. */
static void *cache_and_wait(void *arg)
{
	struct holder *h = arg;
	struct mrp_buf b;

	h->ret = mrp_alloc(h->pool, 8192, NULL, &b) || mrp_free(h->pool, b.addr);
	pthread_barrier_wait(h->step);	/* cached */
	pthread_barrier_wait(h->step);	/* the pool is closed */
	return NULL;
}

/*
 * Close refuses while the application holds a buffer (class, large or
 * fallback), leaving the pool whole; buffers only in some thread's cache
 * do not count.
 */
TEST(close_busy)
{
	struct mrp_pool_attr a = {
		.comp_mask = MRP_POOL_ATTR_MAX_BYTES | MRP_POOL_ATTR_FALLBACK,
		.max_bytes = 8 << 20, .fallback = 1,
	};
	struct mrp_pool *pool = test_pool(&a);
	struct mrp_buf c, l, f, x;
	pthread_barrier_t step;
	struct holder h;
	struct mrp_stats st;
	pthread_t t;

	ASSERT_NE(NULL, pool);
	ASSERT_EQ(0, mrp_attach_pd(pool, FAKE_PD(1), IBV_ACCESS_LOCAL_WRITE));
	ASSERT_EQ(0, mrp_alloc(pool, 4096, FAKE_PD(1), &c));
	ASSERT_EQ(0, mrp_alloc(pool, 3 << 20, FAKE_PD(1), &l));
	ASSERT_EQ(0, mrp_alloc(pool, 4 << 20, FAKE_PD(1), &f));	/* over max: fallback */
	st = test_stats(pool);
	ASSERT_EQ(1, st.fallbacks);
	memset(c.addr, 1, c.size);

	for (int i = 0; i < 3; i++) {
		EXPECT_EQ(-EBUSY, mrp_pool_close(pool));
		EXPECT_EQ(3, fake_live);	/* nothing deregistered */
		EXPECT_EQ(1, ((unsigned char *)c.addr)[c.size - 1]);
		ASSERT_EQ(0, mrp_lookup(pool, c.addr, FAKE_PD(1), &x));
		EXPECT_EQ(c.lkey, x.lkey);
		ASSERT_EQ(0, mrp_free(pool, i == 0 ? c.addr : i == 1 ? l.addr : f.addr));
	}

	/* a live thread's cache is handed back, not counted as in use */
	ASSERT_EQ(0, pthread_barrier_init(&step, NULL, 2));
	h = (struct holder){ pool, &step, 1 };
	ASSERT_EQ(0, pthread_create(&t, NULL, cache_and_wait, &h));
	pthread_barrier_wait(&step);
	EXPECT_EQ(0, h.ret);
	EXPECT_EQ(0, mrp_pool_close(pool));
	EXPECT_EQ(0, fake_live);
	pthread_barrier_wait(&step);
	ASSERT_EQ(0, pthread_join(t, NULL));
	pthread_barrier_destroy(&step);
}

/* MRP_CLOSE_FORCE releases the pool with buffers still allocated. */
TEST(close_force)
{
	struct mrp_pool *pool = test_pool(NULL);
	struct mrp_buf c, l;
	struct mrp_stats st;

	ASSERT_NE(NULL, pool);
	ASSERT_EQ(0, mrp_attach_pd(pool, FAKE_PD(1), IBV_ACCESS_LOCAL_WRITE));
	ASSERT_EQ(0, mrp_alloc(pool, 65536, FAKE_PD(1), &c));
	ASSERT_EQ(0, mrp_alloc(pool, 5 << 20, FAKE_PD(1), &l));
	EXPECT_EQ(-EINVAL, mrp_pool_close_flags(pool, 1U << 7));
	EXPECT_EQ(-EBUSY, mrp_pool_close_flags(pool, 0));
	st = test_stats(pool);
	EXPECT_EQ(2, st.arenas);
	EXPECT_EQ(2, fake_live);
	EXPECT_EQ(-EINVAL, mrp_pool_close_flags(NULL, MRP_CLOSE_FORCE));
	EXPECT_EQ(0, mrp_pool_close_flags(pool, MRP_CLOSE_FORCE));
	EXPECT_EQ(0, fake_live);
}

static int in_range(const void *p, uintptr_t base, size_t len)
{
	return (uintptr_t)p >= base && (uintptr_t)p - base < len;
}

/*
 * A failed ibv_dereg_mr is counted and retires the arena: trim keeps it
 * (mapped), no buffer of it is handed out again, and close leaves its
 * memory mapped (the device may still reach it through that MR).
 */
TEST(dereg_failure)
{
	struct mrp_pool_attr a = {
		.comp_mask = MRP_POOL_ATTR_ARENA_SIZE, .arena_size = 2 << 20,
	};
	struct mrp_pool *pool = test_pool(&a);
	struct mrp_buf x, y, z, l, w;
	uintptr_t old1, old2, old3;
	struct mrp_stats st;
	unsigned char vec;

	ASSERT_NE(NULL, pool);
	ASSERT_EQ(0, mrp_attach_pd(pool, FAKE_PD(1), IBV_ACCESS_LOCAL_WRITE));

	/* in trim: the arena stays, retired */
	ASSERT_EQ(0, mrp_alloc(pool, 4096, FAKE_PD(1), &x));
	old1 = (uintptr_t)x.addr & ~(uintptr_t)((2 << 20) - 1);
	ASSERT_EQ(0, mrp_free(pool, x.addr));
	fake_dereg_fail_next = 1;
	EXPECT_EQ(0, mrp_trim(pool, MRP_TRIM_FLUSH));
	st = test_stats(pool);
	EXPECT_EQ(1, st.dereg_errors);
	EXPECT_EQ(1, st.arenas);
	EXPECT_EQ(0, st.arenas_trimmed);
	EXPECT_EQ(1, fake_live);		/* the MR that would not go */
	/* trim took it: no hold on it succeeds (the shim passes on) */
	EXPECT_FALSE(mrp_arena_hold(mrp_arena_of(old1)));
	for (int i = 0; i < 600; i++) {	/* more than one arena's worth */
		ASSERT_EQ(0, mrp_alloc(pool, 4096, FAKE_PD(1), &y));
		ASSERT_FALSE(in_range(y.addr, old1, 2 << 20));
		ASSERT_EQ(0, mrp_free(pool, y.addr));
	}

	/* in detach: the arena in use is retired, the detach completes */
	ASSERT_EQ(0, mrp_alloc(pool, 65536, FAKE_PD(1), &z));
	old2 = (uintptr_t)z.addr & ~(uintptr_t)((2 << 20) - 1);
	ASSERT_EQ(0, mrp_alloc(pool, 3 << 20, FAKE_PD(1), &l));
	old3 = (uintptr_t)l.addr;
	ASSERT_EQ(0, mrp_free(pool, l.addr));	/* parked for reuse */
	fake_dereg_fail_next = 2;	/* the newest arenas: the large, the 64K */
	EXPECT_EQ(0, mrp_detach_pd(pool, FAKE_PD(1)));
	st = test_stats(pool);
	EXPECT_EQ(3, st.dereg_errors);
	EXPECT_EQ(0, st.pds);
	memset(z.addr, 9, z.size);		/* still the caller's, still mapped */
	ASSERT_EQ(0, mrp_free(pool, z.addr));
	/* buffers of it already in a cache may come out once more: flush */
	ASSERT_LE(0, mrp_trim(pool, MRP_TRIM_FLUSH));
	for (int i = 0; i < 40; i++) {
		ASSERT_EQ(0, mrp_alloc(pool, 65536, NULL, &w));
		ASSERT_FALSE(in_range(w.addr, old2, 2 << 20));
		ASSERT_EQ(0, mrp_free(pool, w.addr));
	}
	ASSERT_EQ(0, mrp_alloc(pool, 3 << 20, NULL, &w));
	EXPECT_NE(old3, (uintptr_t)w.addr);	/* the parked one is out of reuse */
	ASSERT_EQ(0, mrp_free(pool, w.addr));

	/* close forgets retired arenas without unmapping them */
	EXPECT_EQ(0, mrp_pool_close(pool));
	EXPECT_EQ(0, mincore((void *)old1, 4096, &vec));
	EXPECT_EQ(0, mincore((void *)old2, 4096, &vec));
	EXPECT_EQ(0, mincore((void *)old3, 4096, &vec));
	munmap((void *)old1, 2 << 20);
	munmap((void *)old2, 2 << 20);
	munmap((void *)old3, 4 << 20);
}

/* With sampling on, timed allocations fill the histogram. */
TEST(latency_sampling)
{
	struct mrp_pool_attr a = {
		.comp_mask = MRP_POOL_ATTR_SAMPLE_EVERY, .sample_every = 4,
	};
	struct mrp_pool *pool = test_pool(&a);
	struct mrp_stats st;
	struct mrp_buf b;

	ASSERT_NE(NULL, pool);
	for (int i = 0; i < 400; i++) {
		ASSERT_EQ(0, mrp_alloc(pool, 8192, NULL, &b));
		ASSERT_EQ(0, mrp_free(pool, b.addr));
	}
	st = test_stats(pool);
	EXPECT_EQ(400, st.allocs);
	EXPECT_LE(99, st.lat_samples);
	EXPECT_GE(101, st.lat_samples);
	EXPECT_LT(0, st.lat_p50_ns);
	EXPECT_LE(st.lat_p50_ns, st.lat_p99_ns);
	EXPECT_EQ(0, mrp_pool_close(pool));

	pool = test_pool(NULL);
	ASSERT_NE(NULL, pool);
	ASSERT_EQ(0, mrp_alloc(pool, 8192, NULL, &b));
	st = test_stats(pool);
	EXPECT_EQ(0, st.lat_samples);
	EXPECT_EQ(0, mrp_free(pool, b.addr));
	EXPECT_EQ(0, mrp_pool_close(pool));
}

/* A stats struct from an older caller is filled only as far as it goes. */
TEST(stats_size)
{
	struct mrp_pool *pool = test_pool(NULL);
	unsigned char raw[sizeof(struct mrp_stats) + 8];

	ASSERT_NE(NULL, pool);
	memset(raw, 0xee, sizeof(raw));
	ASSERT_EQ(0, mrp_stats(pool, (struct mrp_stats *)raw, 8));
	EXPECT_EQ(MRP_KIND_ANON, ((struct mrp_stats *)raw)->backend);
	EXPECT_EQ(0xee, raw[8]);
	EXPECT_EQ(0, mrp_pool_close(pool));
}

TEST_HARNESS_MAIN
