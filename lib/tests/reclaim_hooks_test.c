// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * The idle reclaim's handshake at the points a stress test cannot hit: a
 * pass (mrp_tcaches_reclaim_now()) runs from a test hook (internal.h,
 * built only into build/hooks/) inside the owner's fast path, one
 * instruction from the ordering that makes it safe, or the owner runs
 * between the pass's mark and its barrier. Each outcome is exact: which
 * buffers the pass took, which one the owner got, and that nothing is ever
 * both handed out and in the depot.
 */
#include <errno.h>
#include <infiniband/verbs.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

#include "kselftest_harness.h"
#include "internal.h"
#include "helpers.h"

#define NB	4
#define SZ	4096

static struct mrp_pool *hp;
static int fired = -1;		/* what the hook's pass returned */

static void set_hook(enum mrp_test_hook h, void (*f)(void))
{
	atomic_store(&mrp_test_hooks[h], f);
}

/* A pass from inside the fast path, once. */
#define PASS_HOOK(h)							\
static void pass_at_##h(void)						\
{									\
	set_hook(h, NULL);						\
	fired = mrp_tcaches_reclaim_now(hp);				\
}
PASS_HOOK(MRP_HOOK_ALLOC_POPPED)
PASS_HOOK(MRP_HOOK_ALLOC_CAP_SEEN)
PASS_HOOK(MRP_HOOK_FREE_CAP_SEEN)

static uint8_t buf_state(void *addr)
{
	struct mrp_arena *a = mrp_arena_of((uintptr_t)addr);

	return atomic_load(mrp_buf_state(a, (uintptr_t)addr));
}

/* A pool whose calling thread caches NB buffers of SZ: b[NB - 1] on top. */
static struct mrp_pool *cached_pool(struct __test_metadata *_metadata,
				    struct mrp_pool_attr *attr, struct ibv_pd *pd,
				    struct mrp_buf *b)
{
	struct mrp_pool *pool = test_pool(attr);

	ASSERT_NE(NULL, pool);
	for (int i = 0; i < NB; i++)
		ASSERT_EQ(0, mrp_alloc(pool, SZ, pd, &b[i]));
	for (int i = 0; i < NB; i++)
		ASSERT_EQ(0, mrp_free(pool, b[i].addr));
	return pool;
}

/* Everything given back: nothing refused, nothing handed out twice. */
static void check_done(struct __test_metadata *_metadata, struct mrp_pool *pool,
		       uint64_t reclaims)
{
	struct mrp_stats st;

	EXPECT_EQ(0, mrp_thread_flush(pool));
	st = test_stats(pool);
	EXPECT_EQ(0, st.double_frees);
	EXPECT_EQ(st.allocs, st.frees);
	EXPECT_EQ(0, st.bytes_in_use);
	EXPECT_EQ(reclaims, st.tcache_reclaims);
	EXPECT_EQ(1, mrp_trim(pool, 0));	/* every buffer back in the depot */
	EXPECT_EQ(0, mrp_pool_close(pool));
}

/*
 * Count stored, cap not loaded: the pass takes what is below the count,
 * not the popped buffer; the pop sees the zero cap and the slow path hands
 * out that same buffer. Loading the cap before storing the count would let
 * the pass take the popped buffer too, and hand it out from the depot.
 */
TEST(pass_after_pop)
{
	struct mrp_buf b[NB], x;

	NEED_MEMBARRIER();
	hp = cached_pool(_metadata, NULL, NULL, b);
	set_hook(MRP_HOOK_ALLOC_POPPED, pass_at_MRP_HOOK_ALLOC_POPPED);
	ASSERT_EQ(0, mrp_alloc(hp, SZ, NULL, &x));
	EXPECT_EQ(1, fired);
	EXPECT_EQ(b[NB - 1].addr, x.addr);
	EXPECT_NE(MRP_BUF_FREE, buf_state(x.addr));
	for (int i = 0; i < NB - 1; i++)
		EXPECT_EQ(MRP_BUF_FREE, buf_state(b[i].addr));
	EXPECT_EQ(0, mrp_free(hp, x.addr));
	check_done(_metadata, hp, 1);
}

/* Cap seen: the pop is the owner's, the pass takes the rest. */
TEST(pass_after_cap)
{
	struct mrp_buf b[NB], x, y;

	NEED_MEMBARRIER();
	hp = cached_pool(_metadata, NULL, NULL, b);
	set_hook(MRP_HOOK_ALLOC_CAP_SEEN, pass_at_MRP_HOOK_ALLOC_CAP_SEEN);
	ASSERT_EQ(0, mrp_alloc(hp, SZ, NULL, &x));
	EXPECT_EQ(1, fired);
	EXPECT_EQ(b[NB - 1].addr, x.addr);
	EXPECT_NE(MRP_BUF_FREE, buf_state(x.addr));
	for (int i = 0; i < NB - 1; i++)
		EXPECT_EQ(MRP_BUF_FREE, buf_state(b[i].addr));
	/* the free settles the cache: it holds x alone */
	EXPECT_EQ(0, mrp_free(hp, x.addr));
	ASSERT_EQ(0, mrp_alloc(hp, SZ, NULL, &y));
	EXPECT_EQ(x.addr, y.addr);
	EXPECT_EQ(0, mrp_free(hp, y.addr));
	check_done(_metadata, hp, 1);
}

/*
 * Cap seen, then the keys miss (the arena has no keys of the PD) and the
 * pop is undone over the slots the pass took: the slow path keeps the
 * popped buffer, registers its arena and hands it out; the cache holds
 * nothing the depot also holds.
 */
TEST(pass_before_keys_miss)
{
	struct mrp_pool_attr at = {
		.comp_mask = MRP_POOL_ATTR_ARENA_SIZE, .arena_size = 2 << 20,
	};
	struct mrp_buf b[NB], x;

	NEED_MEMBARRIER();
	hp = test_pool(&at);
	ASSERT_NE(NULL, hp);
	ASSERT_EQ(0, mrp_attach_pd(hp, FAKE_PD(1), IBV_ACCESS_LOCAL_WRITE));
	fake_fail_pd = FAKE_PD(1);	/* the arena grows without PD 1's keys */
	for (int i = 0; i < NB; i++)
		ASSERT_EQ(0, mrp_alloc(hp, SZ, NULL, &b[i]));
	for (int i = 0; i < NB; i++)
		ASSERT_EQ(0, mrp_free(hp, b[i].addr));
	fake_fail_pd = NULL;
	set_hook(MRP_HOOK_ALLOC_CAP_SEEN, pass_at_MRP_HOOK_ALLOC_CAP_SEEN);
	ASSERT_EQ(0, mrp_alloc(hp, SZ, FAKE_PD(1), &x));
	EXPECT_EQ(1, fired);
	EXPECT_EQ(b[NB - 1].addr, x.addr);
	EXPECT_TRUE(fake_mr_covers(FAKE_PD(1), x.addr, x.size, x.lkey, x.rkey));
	EXPECT_NE(MRP_BUF_FREE, buf_state(x.addr));
	/* the rest come from the depot, each once, none of them x */
	for (int i = 0; i < NB; i++) {
		ASSERT_EQ(0, mrp_alloc(hp, SZ, FAKE_PD(1), &b[i]));
		EXPECT_NE(x.addr, b[i].addr);
		for (int j = 0; j < i; j++)
			EXPECT_NE(b[j].addr, b[i].addr);
	}
	for (int i = 0; i < NB; i++)
		EXPECT_EQ(0, mrp_free(hp, b[i].addr));
	EXPECT_EQ(0, mrp_free(hp, x.addr));
	check_done(_metadata, hp, 1);
}

/*
 * A free whose cap test passed before the mark pushes above the count the
 * pass took: the buffer stays in the cache, and the next pass takes it as
 * part of the same reclaim (counted once).
 */
TEST(pass_inside_free)
{
	struct mrp_buf b[NB], x;

	NEED_MEMBARRIER();
	hp = test_pool(NULL);
	ASSERT_NE(NULL, hp);
	for (int i = 0; i < NB; i++)
		ASSERT_EQ(0, mrp_alloc(hp, SZ, NULL, &b[i]));
	for (int i = 0; i < NB - 1; i++)
		ASSERT_EQ(0, mrp_free(hp, b[i].addr));
	set_hook(MRP_HOOK_FREE_CAP_SEEN, pass_at_MRP_HOOK_FREE_CAP_SEEN);
	ASSERT_EQ(0, mrp_free(hp, b[NB - 1].addr));
	EXPECT_EQ(1, fired);
	for (int i = 0; i < NB - 1; i++)
		EXPECT_EQ(MRP_BUF_FREE, buf_state(b[i].addr));
	EXPECT_NE(MRP_BUF_FREE, buf_state(b[NB - 1].addr));	/* cached */
	EXPECT_EQ(0, mrp_tcaches_reclaim_now(hp));		/* not a new reclaim */
	EXPECT_EQ(MRP_BUF_FREE, buf_state(b[NB - 1].addr));
	EXPECT_EQ(1, test_stats(hp).tcache_reclaims);
	/* the owner resumes: the settled cache is empty, the depot serves */
	ASSERT_EQ(0, mrp_alloc(hp, SZ, NULL, &x));
	EXPECT_NE(MRP_BUF_FREE, buf_state(x.addr));
	EXPECT_EQ(0, mrp_free(hp, x.addr));
	check_done(_metadata, hp, 1);
}

/*
 * The owner is another thread, which resumes between the pass's mark and
 * its barrier: its call takes the slow path, which settles the cache, and
 * the pass leaves that cache alone.
 */
enum { IDLE, GO, DONE, FINISH };
static pthread_mutex_t ow_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t ow_cond = PTHREAD_COND_INITIALIZER;
static int ow_state;
static int ow_frees;		/* the owner frees in the window, or allocates */
static struct mrp_buf ow_b[NB], ow_x;
static int ow_ret = -1;

static void ow_set(int s)
{
	pthread_mutex_lock(&ow_lock);
	ow_state = s;
	pthread_cond_broadcast(&ow_cond);
	pthread_mutex_unlock(&ow_lock);
}

/* until ow_state is s or t: which one */
static int ow_wait2(int s, int t)
{
	int r;

	pthread_mutex_lock(&ow_lock);
	while (ow_state != s && ow_state != t)
		pthread_cond_wait(&ow_cond, &ow_lock);
	r = ow_state;
	pthread_mutex_unlock(&ow_lock);
	return r;
}

static void ow_wait(int s)
{
	ow_wait2(s, s);
}

static void *owner(void *arg)
{
	int ret = 0;

	(void)arg;
	for (int i = 0; i < NB; i++)
		ret |= mrp_alloc(hp, SZ, NULL, &ow_b[i]);
	for (int i = 0; i < NB - ow_frees; i++)
		ret |= mrp_free(hp, ow_b[i].addr);
	ow_ret = ret;
	ow_set(IDLE);
	ow_wait(GO);
	if (ow_frees)
		ow_ret = mrp_free(hp, ow_b[NB - 1].addr);
	else
		ow_ret = mrp_alloc(hp, SZ, NULL, &ow_x);
	ow_set(DONE);
	ow_wait(FINISH);
	if (!ow_frees)
		ow_ret = mrp_free(hp, ow_x.addr);
	return NULL;	/* thread exit returns the cache */
}

/* Step 1 done, the barrier to come: the owner runs its call now. */
static void owner_resumes(void)
{
	set_hook(MRP_HOOK_PASS_MARKED, NULL);
	ow_set(GO);
	ow_wait(DONE);
}

static void resume_between_mark_and_barrier(struct __test_metadata *_metadata,
					    int frees)
{
	struct mrp_stats st;
	pthread_t t;

	NEED_MEMBARRIER();
	hp = test_pool(NULL);
	ASSERT_NE(NULL, hp);
	ow_frees = frees;
	ow_state = -1;
	ASSERT_EQ(0, pthread_create(&t, NULL, owner, NULL));
	ow_wait(IDLE);
	ASSERT_EQ(0, ow_ret);
	set_hook(MRP_HOOK_PASS_MARKED, owner_resumes);
	EXPECT_EQ(0, mrp_tcaches_reclaim_now(hp));	/* marked, settled, left */
	EXPECT_EQ(0, ow_ret);
	EXPECT_EQ(0, test_stats(hp).tcache_reclaims);
	/* what the owner's cache holds, and what it got, are not in the depot */
	for (int i = 0; i < NB - !frees; i++)
		EXPECT_NE(MRP_BUF_FREE, buf_state(ow_b[i].addr));
	if (!frees) {
		EXPECT_EQ(ow_b[NB - 1].addr, ow_x.addr);
		EXPECT_NE(MRP_BUF_FREE, buf_state(ow_x.addr));
	}
	/* the next pass takes the cache, all of it */
	EXPECT_EQ(1, mrp_tcaches_reclaim_now(hp));
	for (int i = 0; i < NB - !frees; i++)
		EXPECT_EQ(MRP_BUF_FREE, buf_state(ow_b[i].addr));
	ow_set(FINISH);
	pthread_join(t, NULL);
	EXPECT_EQ(0, ow_ret);
	st = test_stats(hp);
	EXPECT_EQ(0, st.double_frees);
	EXPECT_EQ(st.allocs, st.frees);
	EXPECT_EQ(0, st.bytes_in_use);
	EXPECT_EQ(1, st.tcache_reclaims);
	EXPECT_EQ(1, mrp_trim(hp, 0));
	EXPECT_EQ(0, mrp_pool_close(hp));
}

TEST(owner_allocs_between_mark_and_barrier)
{
	resume_between_mark_and_barrier(_metadata, 0);
}

TEST(owner_frees_between_mark_and_barrier)
{
	resume_between_mark_and_barrier(_metadata, 1);
}

/*
 * The owner pops its last cached buffer while a pass is between its mark
 * and its barrier, and reaches its cap test after the take: the pass took
 * nothing, which is no reclaim, and it puts the caps back; the owner keeps
 * the buffer.
 */
static void *last_owner(void *arg)
{
	(void)arg;
	ow_ret = mrp_alloc(hp, SZ, NULL, &ow_b[0]);
	/* the refill cached more: keep only the one freed */
	if (!ow_ret)
		ow_ret = mrp_thread_flush(hp);
	if (!ow_ret)
		ow_ret = mrp_free(hp, ow_b[0].addr);
	ow_set(IDLE);
	ow_wait(GO);
	ow_ret = mrp_alloc(hp, SZ, NULL, &ow_x);	/* pops, hooks, then cap */
	ow_set(DONE);
	ow_wait(FINISH);
	if (!ow_ret)
		ow_ret = mrp_free(hp, ow_x.addr);
	return NULL;
}

/* In the owner's pop: let the pass go on, then wait until it is over. */
static void owner_popped(void)
{
	set_hook(MRP_HOOK_ALLOC_POPPED, NULL);
	ow_set(GO + 10);
	ow_wait(GO + 20);
}

/* The pass marked the cache: the owner pops now (or, not popping, is done). */
static void owner_pops(void)
{
	set_hook(MRP_HOOK_PASS_MARKED, NULL);
	set_hook(MRP_HOOK_ALLOC_POPPED, owner_popped);
	ow_set(GO);
	ow_wait2(GO + 10, DONE);
}

TEST(owner_empties_cache_during_pass)
{
	struct mrp_stats st;
	pthread_t t;
	bool popped;

	NEED_MEMBARRIER();
	hp = test_pool(NULL);
	ASSERT_NE(NULL, hp);
	ow_state = -1;
	ASSERT_EQ(0, pthread_create(&t, NULL, last_owner, NULL));
	ow_wait(IDLE);
	ASSERT_EQ(0, ow_ret);
	set_hook(MRP_HOOK_PASS_MARKED, owner_pops);
	EXPECT_EQ(0, mrp_tcaches_reclaim_now(hp));	/* marked, nothing to take */
	EXPECT_EQ(0, test_stats(hp).tcache_reclaims);
	/* DONE already: the owner did not pop in the fast path */
	popped = ow_wait2(GO + 10, DONE) == GO + 10;
	EXPECT_TRUE(popped);
	if (popped) {
		ow_set(GO + 20);
		ow_wait(DONE);
	}
	EXPECT_EQ(0, ow_ret);
	EXPECT_EQ(ow_b[0].addr, ow_x.addr);
	EXPECT_NE(MRP_BUF_FREE, buf_state(ow_x.addr));
	ow_set(FINISH);
	pthread_join(t, NULL);
	EXPECT_EQ(0, ow_ret);
	st = test_stats(hp);
	EXPECT_EQ(0, st.double_frees);
	EXPECT_EQ(st.allocs, st.frees);
	EXPECT_EQ(0, st.bytes_in_use);
	EXPECT_EQ(0, st.tcache_reclaims);
	EXPECT_EQ(1, mrp_trim(hp, 0));
	EXPECT_EQ(0, mrp_pool_close(hp));
}

/*
 * A pass holds no lock across its barrier (which kernels may serialize
 * system-wide): between mark and barrier mrp_global_lock is free and
 * mrp_stats() runs, while the exit of a marked cache's thread waits for
 * the pass to end (the pass still walks that cache).
 */
static int gl_free = -1, gl_stats = -1, exit_waited = -1;
static pthread_t exiting;

static void *exit_owner(void *arg)
{
	(void)arg;
	for (int i = 0; i < NB; i++)
		ow_ret |= mrp_alloc(hp, SZ, NULL, &ow_b[i]);
	for (int i = 0; i < NB; i++)
		ow_ret |= mrp_free(hp, ow_b[i].addr);
	ow_set(IDLE);
	ow_wait(GO);
	return NULL;	/* thread exit: the cache goes back, once the pass is over */
}

static void checks_in_pass(void)
{
	struct mrp_stats st;

	set_hook(MRP_HOOK_PASS_MARKED, NULL);
	gl_free = !pthread_mutex_trylock(&mrp_global_lock);
	if (gl_free)
		pthread_mutex_unlock(&mrp_global_lock);
	gl_stats = mrp_stats(hp, &st, sizeof(st));
	ow_set(GO);
	/* the owner exits now: it must not get past its cache */
	exit_waited = 1;
	for (int i = 0; i < 20; i++) {
		struct timespec ts = { 0, 10 * 1000 * 1000 };

		if (!pthread_tryjoin_np(exiting, NULL)) {
			exit_waited = 0;
			break;
		}
		nanosleep(&ts, NULL);
	}
}

TEST(pass_barrier_unlocked)
{
	struct mrp_stats st;

	NEED_MEMBARRIER();
	hp = test_pool(NULL);
	ASSERT_NE(NULL, hp);
	ow_state = -1;
	ow_ret = 0;
	ASSERT_EQ(0, pthread_create(&exiting, NULL, exit_owner, NULL));
	ow_wait(IDLE);
	ASSERT_EQ(0, ow_ret);
	set_hook(MRP_HOOK_PASS_MARKED, checks_in_pass);
	EXPECT_EQ(1, mrp_tcaches_reclaim_now(hp));
	EXPECT_EQ(1, gl_free);
	EXPECT_EQ(0, gl_stats);
	EXPECT_EQ(1, exit_waited);
	if (exit_waited)
		pthread_join(exiting, NULL);
	for (int i = 0; i < NB; i++)
		EXPECT_EQ(MRP_BUF_FREE, buf_state(ow_b[i].addr));
	st = test_stats(hp);
	EXPECT_EQ(0, st.double_frees);
	EXPECT_EQ(st.allocs, st.frees);
	EXPECT_EQ(0, st.bytes_in_use);
	EXPECT_EQ(1, st.tcache_reclaims);
	EXPECT_EQ(1, mrp_trim(hp, 0));
	EXPECT_EQ(0, mrp_pool_close(hp));
}

TEST_HARNESS_MAIN
