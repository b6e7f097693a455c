// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Host unit tests of the slow calls made without pool->lock besides
 * growth (growth_test): an attach registers every arena, a lazy
 * registration one, a trim deregisters and unmaps, a detach deregisters,
 * each without the lock
 * (reg.c, depot.c), so that while one of them is held up another
 * thread's large free, mrp_stats, mrp_pd_dead and fork get through. The
 * holds are the fake verbs' (fake_hold(), fake_hold_dereg()) and, for the
 * trim's munmap(), the stand-in for UCX's ucm_vm_munmap() below, which
 * the library calls just before it unmaps; each test knows the call is
 * still held from the holder's own count, without timing anything. The
 * only timeouts are bounds on a hang.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kselftest_harness.h"
#include "helpers.h"
#include "internal.h"

#define MIB		((size_t)1 << 20)
#define ARENA		(2 * MIB)
#define HOLD_MS		60000	/* a hang, not a measure */
#define ACCESS		(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE)

/*
 * UCX's entry point, found by dlsym (os.c): with unmap_hold set, the
 * thread that unmaps waits here until it is cleared; unmap_waiting says
 * one does.
 */
static pthread_mutex_t unmap_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t unmap_cond = PTHREAD_COND_INITIALIZER;
static bool unmap_hold;
static int unmap_waiting;

void ucm_vm_munmap(void *addr, size_t len);
__attribute__((visibility("default"))) void ucm_vm_munmap(void *addr, size_t len)
{
	pthread_mutex_lock(&unmap_lock);
	if (unmap_hold) {
		unmap_waiting++;
		pthread_cond_broadcast(&unmap_cond);
		while (unmap_hold)
			pthread_cond_wait(&unmap_cond, &unmap_lock);
		unmap_waiting--;
	}
	pthread_mutex_unlock(&unmap_lock);
}

static int unmap_wait_held(void)
{
	struct timespec ts;
	int ret = 0;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += HOLD_MS / 1000;
	pthread_mutex_lock(&unmap_lock);
	while (!unmap_waiting && !ret)
		ret = pthread_cond_timedwait(&unmap_cond, &unmap_lock, &ts);
	ret = unmap_waiting ? 0 : -1;
	pthread_mutex_unlock(&unmap_lock);
	return ret;
}

static int unmap_held(void)
{
	int n;

	pthread_mutex_lock(&unmap_lock);
	n = unmap_waiting;
	pthread_mutex_unlock(&unmap_lock);
	return n;
}

static void unmap_release(void)
{
	pthread_mutex_lock(&unmap_lock);
	unmap_hold = false;
	pthread_cond_broadcast(&unmap_cond);
	pthread_mutex_unlock(&unmap_lock);
}

static struct mrp_pool *pool_open(void)
{
	struct mrp_pool_attr a = {
		.comp_mask = MRP_POOL_ATTR_ARENA_SIZE | MRP_POOL_ATTR_FALLBACK,
		.arena_size = ARENA, .fallback = 0,
	};

	return test_pool(&a);
}

/* The held call, on a thread of its own; done once it returned. */
enum held_call { HELD_ATTACH, HELD_LOOKUP, HELD_TRIM, HELD_DETACH, HELD_ALLOC };

struct holder {
	pthread_t thr;
	struct mrp_pool *pool;
	enum held_call call;
	struct ibv_pd *pd;
	void *addr;
	struct mrp_buf buf;
	int ret;
	atomic_bool done;
};

static void *holder_main(void *arg)
{
	struct holder *h = arg;

	switch (h->call) {
	case HELD_ATTACH:
		h->ret = mrp_attach_pd(h->pool, h->pd, ACCESS);
		break;
	case HELD_LOOKUP:
		h->ret = mrp_lookup(h->pool, h->addr, h->pd, &h->buf);
		break;
	case HELD_TRIM:
		h->ret = mrp_trim(h->pool, 0);
		break;
	case HELD_DETACH:
		h->ret = mrp_detach_pd(h->pool, h->pd);
		break;
	case HELD_ALLOC:
		h->ret = mrp_alloc(h->pool, 8 * MIB, h->pd, &h->buf);
		break;
	}
	atomic_store(&h->done, true);
	return NULL;
}

static int holder_start(struct holder *h, struct mrp_pool *pool, enum held_call call,
			struct ibv_pd *pd, void *addr)
{
	memset(h, 0, sizeof(*h));
	h->pool = pool;
	h->call = call;
	h->pd = pd;
	h->addr = addr;
	return pthread_create(&h->thr, NULL, holder_main, h);
}

/*
 * What another thread does meanwhile: a large free, the stats, a PD
 * marked dead, a fork whose child closes its copy. ops counts the calls
 * that got through.
 */
#define PASSER_OPS	4

struct passer {
	pthread_t thr;
	struct mrp_pool *pool;
	void *large;
	struct ibv_pd *dead;
	int ops;
};

static void *passer_main(void *arg)
{
	struct passer *p = arg;
	struct mrp_stats st;
	int status = -1;
	pid_t pid;

	p->ops += mrp_free(p->pool, p->large) == 0;
	p->ops += mrp_stats(p->pool, &st, sizeof(st)) == 0;
	p->ops += mrp_pd_dead(p->pool, p->dead) == 0;
	pid = fork();
	if (pid == 0)
		_exit(mrp_stats(p->pool, &st, sizeof(st)) == -ECHILD &&
		      mrp_pool_close(p->pool) == 0 ? 0 : 1);
	p->ops += pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
		  WEXITSTATUS(status) == 0;
	return NULL;
}

/*
 * Run the passer while a call is held: the count of calls that got
 * through, or -1 if it did not end within the bound (then it is joined
 * after the caller's release).
 */
static int passer_run(struct passer *p, struct mrp_pool *pool, void *large,
		      struct ibv_pd *dead)
{
	struct timespec ts;

	memset(p, 0, sizeof(*p));
	p->pool = pool;
	p->large = large;
	p->dead = dead;
	if (pthread_create(&p->thr, NULL, passer_main, p))
		return -1;
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += HOLD_MS / 1000;
	if (pthread_timedjoin_np(p->thr, NULL, &ts))
		return -1;
	p->thr = 0;
	return p->ops;
}

static void passer_join(struct passer *p)
{
	if (p->thr)
		pthread_join(p->thr, NULL);
}

/* NBLK large buffers of 4 MiB, each an arena of its own. */
#define NBLK	4

static int alloc_blocks(struct mrp_pool *pool, void **blk)
{
	struct mrp_buf b;

	for (int i = 0; i < NBLK; i++) {
		if (mrp_alloc(pool, 4 * MIB, NULL, &b))
			return -1;
		blk[i] = b.addr;
	}
	return 0;
}

/*
 * While an attach is held in the registration of the first arena in its
 * PD, another thread frees a large block, reads the stats, marks a PD
 * dead and forks: all four get through, the attach still held. (Under
 * pool->lock the free blocks: the bounded join fails, the release lets
 * both finish.) Released, the attach registered every arena (without the
 * lock, counted), the PD's keys cover each block, and a second attach of
 * the same PD during the first was refused.
 */
TEST(attach_unlocked)
{
	struct mrp_pool *pool = pool_open();
	struct holder h;
	struct passer p;
	void *blk[NBLK];
	struct mrp_buf b;
	int live0 = fake_live, got;

	ASSERT_NE(NULL, pool);
	ASSERT_EQ(0, mrp_attach_pd(pool, FAKE_PD(1), ACCESS));
	ASSERT_EQ(0, mrp_attach_pd(pool, FAKE_PD(2), ACCESS));
	ASSERT_EQ(0, alloc_blocks(pool, blk));

	fake_hold(FAKE_PD(3));
	ASSERT_EQ(0, holder_start(&h, pool, HELD_ATTACH, FAKE_PD(3), NULL));
	ASSERT_EQ(0, fake_wait_held(1, HOLD_MS));
	got = passer_run(&p, pool, blk[0], FAKE_PD(2));
	EXPECT_EQ(PASSER_OPS, got);
	TH_LOG("%d of %d calls got through while an attach was held", got, PASSER_OPS);
	EXPECT_EQ(1, fake_held());
	EXPECT_FALSE(atomic_load(&h.done));
	/*
	 * The slot is taken: the same PD again is refused at once (only
	 * asked where the lock was free for the others: it would wait too).
	 */
	if (got == PASSER_OPS)
		EXPECT_EQ(-EEXIST, mrp_attach_pd(pool, FAKE_PD(3), ACCESS));
	fake_release();
	passer_join(&p);
	ASSERT_EQ(0, pthread_join(h.thr, NULL));
	ASSERT_EQ(0, h.ret);
	EXPECT_EQ(NBLK, atomic_load(&pool->attach_unlocked_regs));
	for (int i = 0; i < NBLK; i++) {
		ASSERT_EQ(0, mrp_lookup(pool, blk[i], FAKE_PD(3), &b));
		EXPECT_TRUE(fake_mr_covers(FAKE_PD(3), blk[i], 4 * MIB, b.lkey, b.rkey));
	}
	for (int i = 1; i < NBLK; i++)
		EXPECT_EQ(0, mrp_free(pool, blk[i]));
	EXPECT_EQ(0, mrp_detach_pd(pool, FAKE_PD(2)));
	EXPECT_EQ(0, mrp_pool_close(pool));
	EXPECT_EQ(live0, fake_live);
}

/*
 * An arena grown while an attach is under way (listed after the attach's
 * walk began, before it ended) is registered by the growth itself once it
 * sees the PD attached, or by the attach's next walk: either way it has
 * the PD's keys without a lazy registration.
 */
TEST(attach_catches_growth)
{
	struct mrp_pool *pool = pool_open();
	struct mrp_arena *a;
	struct holder h, g;
	struct timespec ts;
	void *blk[NBLK];
	struct mrp_buf b;
	int live0 = fake_live, joined;

	ASSERT_NE(NULL, pool);
	ASSERT_EQ(0, mrp_attach_pd(pool, FAKE_PD(1), ACCESS));
	ASSERT_EQ(0, alloc_blocks(pool, blk));
	fake_hold(FAKE_PD(3));
	ASSERT_EQ(0, holder_start(&h, pool, HELD_ATTACH, FAKE_PD(3), NULL));
	ASSERT_EQ(0, fake_wait_held(1, HOLD_MS));
	/* grown while the attach is held: registered in PD 1 only, listed */
	ASSERT_EQ(0, holder_start(&g, pool, HELD_ALLOC, FAKE_PD(1), NULL));
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += HOLD_MS / 1000;
	joined = pthread_timedjoin_np(g.thr, NULL, &ts) == 0;
	EXPECT_TRUE(joined);
	EXPECT_EQ(1, fake_held());
	fake_release();
	if (!joined)
		ASSERT_EQ(0, pthread_join(g.thr, NULL));
	ASSERT_EQ(0, pthread_join(h.thr, NULL));
	ASSERT_EQ(0, h.ret);
	ASSERT_EQ(0, g.ret);
	b = g.buf;
	a = mrp_arena_of((uintptr_t)b.addr);
	ASSERT_NE(NULL, a);
	EXPECT_TRUE(mrp_arena_has(a, 1));	/* slot 1: PD 3 */
	EXPECT_EQ(NBLK + 1, atomic_load(&pool->attach_unlocked_regs));
	EXPECT_EQ(0, mrp_lookup(pool, b.addr, FAKE_PD(3), &b));
	EXPECT_TRUE(fake_mr_covers(FAKE_PD(3), b.addr, 8 * MIB, b.lkey, b.rkey));
	EXPECT_EQ(0, mrp_free(pool, b.addr));
	for (int i = 0; i < NBLK; i++)
		EXPECT_EQ(0, mrp_free(pool, blk[i]));
	EXPECT_EQ(0, mrp_pool_close(pool));
	EXPECT_EQ(live0, fake_live);
}

/*
 * A lazy registration (an arena PD 1 refused at growth, its keys asked
 * for by mrp_lookup()) held in its ibv_reg_mr: the other thread's calls
 * get through; a second lookup of the same keys waits for the first one's
 * MR (counted) instead of making its own; released, both get the keys of
 * one MR.
 */
TEST(lazy_unlocked)
{
	struct mrp_pool *pool = pool_open();
	struct holder h, h2;
	struct passer p;
	void *blk[NBLK];
	struct mrp_buf b;
	int live0 = fake_live, got, i;

	ASSERT_NE(NULL, pool);
	ASSERT_EQ(0, mrp_attach_pd(pool, FAKE_PD(1), ACCESS));
	ASSERT_EQ(0, mrp_attach_pd(pool, FAKE_PD(2), ACCESS));
	ASSERT_EQ(0, alloc_blocks(pool, blk));
	fake_fail_pd = FAKE_PD(1);
	ASSERT_EQ(0, mrp_alloc(pool, 4 * MIB, NULL, &b));
	fake_fail_pd = NULL;
	EXPECT_FALSE(mrp_arena_has(mrp_arena_of((uintptr_t)b.addr), 0));

	fake_hold(FAKE_PD(1));
	ASSERT_EQ(0, holder_start(&h, pool, HELD_LOOKUP, FAKE_PD(1), b.addr));
	ASSERT_EQ(0, fake_wait_held(1, HOLD_MS));
	got = passer_run(&p, pool, blk[0], FAKE_PD(2));
	EXPECT_EQ(PASSER_OPS, got);
	TH_LOG("%d of %d calls got through while a lazy registration was held",
	       got, PASSER_OPS);
	ASSERT_EQ(0, holder_start(&h2, pool, HELD_LOOKUP, FAKE_PD(1), b.addr));
	/* the second reaches the wait; a bound only against a hang */
	for (i = 0; i < HOLD_MS && !atomic_load(&pool->lazy_waits); i++)
		usleep(1000);
	EXPECT_EQ(1, atomic_load(&pool->lazy_waits));
	EXPECT_EQ(1, fake_held());
	EXPECT_FALSE(atomic_load(&h.done));
	EXPECT_FALSE(atomic_load(&h2.done));
	fake_release();
	passer_join(&p);
	ASSERT_EQ(0, pthread_join(h.thr, NULL));
	ASSERT_EQ(0, pthread_join(h2.thr, NULL));
	ASSERT_EQ(0, h.ret);
	ASSERT_EQ(0, h2.ret);
	EXPECT_EQ(h.buf.lkey, h2.buf.lkey);
	EXPECT_TRUE(fake_mr_covers(FAKE_PD(1), b.addr, 4 * MIB, h.buf.lkey, h.buf.rkey));
	EXPECT_EQ(0, mrp_free(pool, b.addr));
	for (i = 1; i < NBLK; i++)
		EXPECT_EQ(0, mrp_free(pool, blk[i]));
	EXPECT_EQ(0, mrp_detach_pd(pool, FAKE_PD(2)));
	EXPECT_EQ(0, mrp_pool_close(pool));
	EXPECT_EQ(live0, fake_live);
}

/*
 * A PD marked dead while its lazy registration is held: the MR made is
 * kept for the detach but its keys are not handed out (-ENODEV); the
 * detach removes it.
 */
TEST(lazy_dead_meanwhile)
{
	struct mrp_pool *pool = pool_open();
	struct holder h;
	struct mrp_buf b;
	int live0 = fake_live;

	ASSERT_NE(NULL, pool);
	ASSERT_EQ(0, mrp_attach_pd(pool, FAKE_PD(1), ACCESS));
	fake_fail_pd = FAKE_PD(1);
	ASSERT_EQ(0, mrp_alloc(pool, 4 * MIB, NULL, &b));
	fake_fail_pd = NULL;
	fake_hold(FAKE_PD(1));
	ASSERT_EQ(0, holder_start(&h, pool, HELD_LOOKUP, FAKE_PD(1), b.addr));
	ASSERT_EQ(0, fake_wait_held(1, HOLD_MS));
	ASSERT_EQ(0, mrp_pd_dead(pool, FAKE_PD(1)));
	fake_release();
	ASSERT_EQ(0, pthread_join(h.thr, NULL));
	EXPECT_EQ(-ENODEV, h.ret);
	EXPECT_FALSE(mrp_arena_has(mrp_arena_of((uintptr_t)b.addr), 0));
	EXPECT_NE(-1, fake_mr_access(FAKE_PD(1), b.addr));
	EXPECT_EQ(0, mrp_detach_pd(pool, FAKE_PD(1)));
	EXPECT_EQ(-1, fake_mr_access(FAKE_PD(1), b.addr));
	EXPECT_EQ(0, mrp_free(pool, b.addr));
	EXPECT_EQ(0, mrp_pool_close(pool));
	EXPECT_EQ(live0, fake_live);
}

/*
 * A trim held in the deregistration of a parked arena: the other
 * thread's calls get through. A detach of the PD meanwhile waits for the
 * deregistration (counted, the caller may deallocate the PD once it
 * returns). Released, the arena is gone from the counts.
 */
TEST(trim_dereg_unlocked)
{
	struct mrp_pool *pool = pool_open();
	struct holder h, d;
	struct passer p;
	struct mrp_stats st;
	void *blk[NBLK];
	int live0 = fake_live, got, i;

	ASSERT_NE(NULL, pool);
	ASSERT_EQ(0, mrp_attach_pd(pool, FAKE_PD(1), ACCESS));
	ASSERT_EQ(0, mrp_attach_pd(pool, FAKE_PD(2), ACCESS));
	ASSERT_EQ(0, alloc_blocks(pool, blk));
	ASSERT_EQ(0, mrp_free(pool, blk[1]));	/* parked: the trim's */

	fake_hold_dereg(FAKE_PD(1));
	ASSERT_EQ(0, holder_start(&h, pool, HELD_TRIM, NULL, NULL));
	ASSERT_EQ(0, fake_wait_held(1, HOLD_MS));
	got = passer_run(&p, pool, blk[0], FAKE_PD(2));
	EXPECT_EQ(PASSER_OPS, got);
	TH_LOG("%d of %d calls got through while a trim's deregistration was held",
	       got, PASSER_OPS);
	ASSERT_EQ(0, holder_start(&d, pool, HELD_DETACH, FAKE_PD(1), NULL));
	for (i = 0; i < HOLD_MS && !atomic_load(&pool->detach_waits); i++)
		usleep(1000);
	EXPECT_EQ(1, atomic_load(&pool->detach_waits));
	EXPECT_EQ(1, fake_held());
	EXPECT_FALSE(atomic_load(&h.done));
	EXPECT_FALSE(atomic_load(&d.done));
	fake_release();
	passer_join(&p);
	ASSERT_EQ(0, pthread_join(h.thr, NULL));
	ASSERT_EQ(0, pthread_join(d.thr, NULL));
	EXPECT_EQ(1, h.ret);
	EXPECT_EQ(0, d.ret);
	EXPECT_EQ(-1, fake_mr_access(FAKE_PD(1), blk[2]));
	st = test_stats(pool);
	EXPECT_EQ(NBLK - 1, st.arenas);
	EXPECT_EQ(1, st.arenas_trimmed);
	EXPECT_EQ((NBLK - 1) * 4 * MIB, st.bytes_mapped);
	for (i = 2; i < NBLK; i++)
		EXPECT_EQ(0, mrp_free(pool, blk[i]));
	EXPECT_EQ(0, mrp_detach_pd(pool, FAKE_PD(2)));
	EXPECT_EQ(0, mrp_pool_close(pool));
	EXPECT_EQ(live0, fake_live);
}

/*
 * A trim held just before its munmap() (in UCX's hook, which the library
 * calls first): the other thread's calls get through; the arena is off
 * the counts already, and the fork child had nothing of it to unmap.
 */
TEST(trim_unmap_unlocked)
{
	struct mrp_pool *pool = pool_open();
	struct holder h;
	struct passer p;
	struct mrp_stats st;
	void *blk[NBLK];
	int live0 = fake_live, got;

	ASSERT_NE(NULL, pool);
	ASSERT_EQ(0, mrp_attach_pd(pool, FAKE_PD(1), ACCESS));
	ASSERT_EQ(0, mrp_attach_pd(pool, FAKE_PD(2), ACCESS));
	ASSERT_EQ(0, alloc_blocks(pool, blk));
	ASSERT_EQ(0, mrp_free(pool, blk[1]));

	pthread_mutex_lock(&unmap_lock);
	unmap_hold = true;
	pthread_mutex_unlock(&unmap_lock);
	ASSERT_EQ(0, holder_start(&h, pool, HELD_TRIM, NULL, NULL));
	ASSERT_EQ(0, unmap_wait_held());
	got = passer_run(&p, pool, blk[0], FAKE_PD(2));
	EXPECT_EQ(PASSER_OPS, got);
	TH_LOG("%d of %d calls got through while a trim's munmap was held",
	       got, PASSER_OPS);
	EXPECT_EQ(1, unmap_held());
	EXPECT_FALSE(atomic_load(&h.done));
	st = test_stats(pool);
	EXPECT_EQ(NBLK - 1, st.arenas);
	EXPECT_EQ(1, st.arenas_trimmed);
	unmap_release();
	passer_join(&p);
	ASSERT_EQ(0, pthread_join(h.thr, NULL));
	EXPECT_EQ(1, h.ret);
	for (int i = 2; i < NBLK; i++)
		EXPECT_EQ(0, mrp_free(pool, blk[i]));
	EXPECT_EQ(0, mrp_detach_pd(pool, FAKE_PD(2)));
	EXPECT_EQ(0, mrp_pool_close(pool));
	EXPECT_EQ(live0, fake_live);
}

/*
 * A detach held in the deregistration of its PD's MR of an arena: the
 * other thread's calls get through (mrp_pd_dead of another PD). Released,
 * no MR of the PD is left in any arena, each arena's went unlocked
 * (counted), and the slot is free again.
 */
TEST(detach_unlocked)
{
	struct mrp_pool *pool = pool_open();
	struct holder d;
	struct passer p;
	void *blk[NBLK];
	struct mrp_buf b;
	int live0 = fake_live, got, i;

	ASSERT_NE(NULL, pool);
	ASSERT_EQ(0, mrp_attach_pd(pool, FAKE_PD(1), ACCESS));
	ASSERT_EQ(0, mrp_attach_pd(pool, FAKE_PD(2), ACCESS));
	ASSERT_EQ(0, alloc_blocks(pool, blk));

	fake_hold_dereg(FAKE_PD(1));
	ASSERT_EQ(0, holder_start(&d, pool, HELD_DETACH, FAKE_PD(1), NULL));
	ASSERT_EQ(0, fake_wait_held(1, HOLD_MS));
	got = passer_run(&p, pool, blk[0], FAKE_PD(2));
	EXPECT_EQ(PASSER_OPS, got);
	TH_LOG("%d of %d calls got through while a detach was held", got, PASSER_OPS);
	EXPECT_EQ(1, fake_held());
	EXPECT_FALSE(atomic_load(&d.done));
	fake_release();
	passer_join(&p);
	ASSERT_EQ(0, pthread_join(d.thr, NULL));
	EXPECT_EQ(0, d.ret);
	EXPECT_EQ(NBLK, atomic_load(&pool->detach_unlocked_deregs));
	for (i = 0; i < NBLK; i++)
		EXPECT_EQ(-1, fake_mr_access(FAKE_PD(1), blk[i]));
	EXPECT_EQ(-EINVAL, mrp_lookup(pool, blk[1], FAKE_PD(1), &b));
	/* the slot is free: attached again, every arena registered */
	ASSERT_EQ(0, mrp_attach_pd(pool, FAKE_PD(1), ACCESS));
	ASSERT_EQ(0, mrp_lookup(pool, blk[1], FAKE_PD(1), &b));
	EXPECT_TRUE(fake_mr_covers(FAKE_PD(1), blk[1], 4 * MIB, b.lkey, b.rkey));
	for (i = 1; i < NBLK; i++)
		EXPECT_EQ(0, mrp_free(pool, blk[i]));
	EXPECT_EQ(0, mrp_detach_pd(pool, FAKE_PD(2)));
	EXPECT_EQ(0, mrp_pool_close(pool));
	EXPECT_EQ(live0, fake_live);
}

TEST_HARNESS_MAIN
