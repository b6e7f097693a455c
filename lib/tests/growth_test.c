// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Host unit tests of growth without pool->lock (arena.c): an arena is
 * mapped and registered with no lock held, so that large frees, stats,
 * mrp_pd_dead, attach, trim and fork get through while another thread's
 * growth is held up, two threads grow at once, and a creation that fails
 * late undoes what it made. The hold is the fake verbs' (fake_hold()): a
 * registration in the held PD waits until fake_release(), and fake_held()
 * says it still waits, so each test knows the creation has not ended
 * without timing anything. The only timeouts are bounds on a hang.
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

static struct mrp_pool *pool_grow(size_t max_bytes)
{
	struct mrp_pool_attr a = {
		.comp_mask = MRP_POOL_ATTR_ARENA_SIZE | MRP_POOL_ATTR_MAX_BYTES |
			     MRP_POOL_ATTR_FALLBACK,
		.arena_size = ARENA, .max_bytes = max_bytes, .fallback = 0,
	};

	return test_pool(&a);
}

/* One allocation on a thread of its own; done once mrp_alloc() returned. */
struct grower {
	pthread_t thr;
	struct mrp_pool *pool;
	size_t size;
	struct ibv_pd *pd;
	struct mrp_buf buf;
	int ret;
	atomic_bool done;
};

static void *grower_main(void *arg)
{
	struct grower *g = arg;

	g->ret = mrp_alloc(g->pool, g->size, g->pd, &g->buf);
	atomic_store(&g->done, true);
	return NULL;
}

static int grower_start(struct grower *g, struct mrp_pool *pool, size_t size,
			struct ibv_pd *pd)
{
	memset(g, 0, sizeof(*g));
	g->pool = pool;
	g->size = size;
	g->pd = pd;
	return pthread_create(&g->thr, NULL, grower_main, g);
}

/* What another thread does while a growth is held (others_pass_held_growth). */
struct passer {
	pthread_t thr;
	struct mrp_pool *pool;
	void **blk;
	int nblk;
	void *small;
	int ops;
};

static void *passer_main(void *arg)
{
	struct passer *p = arg;
	struct mrp_pool *pool = p->pool;
	struct mrp_pd_stats ps;
	struct mrp_stats st;
	struct mrp_buf b;
	int status = -1;
	pid_t pid;

	for (int i = 0; i < p->nblk; i++)
		p->ops += mrp_free(pool, p->blk[i]) == 0;
	st = test_stats(pool);
	/* the arena in flight is in no count yet */
	p->ops += st.arenas == (uint64_t)p->nblk + 1 &&
		  st.large_allocs == (uint64_t)p->nblk && st.frees == (uint64_t)p->nblk;
	p->ops += mrp_pd_stats(pool, FAKE_PD(1), &ps, sizeof(ps)) == 0 &&
		  ps.arenas == (uint64_t)p->nblk + 1;
	p->ops += mrp_pd_dead(pool, FAKE_PD(2)) == 0;
	/* registers every listed arena in PD 3 under pool->lock */
	p->ops += mrp_attach_pd(pool, FAKE_PD(3), ACCESS) == 0;
	/* a class buffer freed and taken again */
	p->ops += mrp_free(pool, p->small) == 0;
	p->ops += mrp_alloc(pool, 4096, FAKE_PD(3), &b) == 0 && mrp_free(pool, b.addr) == 0;
	/* the parked large arenas go */
	p->ops += mrp_trim(pool, 0) == p->nblk;
	pid = fork();
	if (pid == 0) {
		/* the child has no creation in flight; its close frees the record */
		_exit(mrp_stats(pool, &st, sizeof(st)) == -ECHILD &&
		      mrp_pool_close(pool) == 0 ? 0 : 1);
	}
	p->ops += pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
		  WEXITSTATUS(status) == 0;
	return NULL;
}

/*
 * While one thread's large allocation is held inside its arena's creation
 * (its registration in PD 1 waits), another frees large blocks, reads the
 * stats, marks a PD dead, attaches another, trims and forks: every call
 * gets through, counted, with the creation still held. (Were growth under
 * pool->lock, the other thread would block at its first free: the bounded
 * join fails the test, then the release lets both finish.) Released, the
 * new arena carries keys of the PD attached meanwhile and none of the one
 * that died, and the stats add up.
 */
TEST(others_pass_held_growth)
{
	enum { NBLK = 8, NOPS = NBLK + 8 };
	struct mrp_pool *pool = pool_grow(0);
	struct passer p = { 0 };
	struct timespec ts;
	void *blk[NBLK];
	struct mrp_buf b;
	struct mrp_stats st;
	struct grower g;
	int live0 = fake_live, joined;

	ASSERT_NE(NULL, pool);
	ASSERT_EQ(0, mrp_attach_pd(pool, FAKE_PD(1), ACCESS));
	ASSERT_EQ(0, mrp_attach_pd(pool, FAKE_PD(2), ACCESS));
	for (int i = 0; i < NBLK; i++) {
		ASSERT_EQ(0, mrp_alloc(pool, 4 * MIB, NULL, &b));
		blk[i] = b.addr;
	}
	/* a class arena, grown before the hold: its buffers need no growth */
	ASSERT_EQ(0, mrp_alloc(pool, 4096, NULL, &b));
	p.small = b.addr;
	p.pool = pool;
	p.blk = blk;
	p.nblk = NBLK;

	fake_hold(FAKE_PD(1));
	ASSERT_EQ(0, grower_start(&g, pool, 3 * MIB, FAKE_PD(1)));
	ASSERT_EQ(0, fake_wait_held(1, HOLD_MS));
	ASSERT_EQ(0, pthread_create(&p.thr, NULL, passer_main, &p));
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += HOLD_MS / 1000;
	joined = pthread_timedjoin_np(p.thr, NULL, &ts) == 0;

	/* all of it while the creation waited, and still waits */
	EXPECT_TRUE(joined);
	EXPECT_EQ(1, fake_held());
	EXPECT_FALSE(atomic_load(&g.done));
	fake_release();
	if (!joined)
		ASSERT_EQ(0, pthread_join(p.thr, NULL));
	EXPECT_EQ(NOPS, p.ops);
	TH_LOG("%d of %d calls got through while growth was held", p.ops, NOPS);

	ASSERT_EQ(0, pthread_join(g.thr, NULL));
	ASSERT_EQ(0, g.ret);
	EXPECT_TRUE(fake_mr_covers(FAKE_PD(1), g.buf.addr, 3 * MIB, g.buf.lkey, g.buf.rkey));
	/* PD 3 came while the arena was made: registered when it was published */
	ASSERT_EQ(0, mrp_lookup(pool, g.buf.addr, FAKE_PD(3), &b));
	EXPECT_TRUE(fake_mr_covers(FAKE_PD(3), g.buf.addr, 3 * MIB, b.lkey, b.rkey));
	/* PD 2 died meanwhile: no keys of it */
	EXPECT_EQ(-ENODEV, mrp_lookup(pool, g.buf.addr, FAKE_PD(2), &b));
	st = test_stats(pool);
	EXPECT_EQ(2, st.arenas);		/* the class arena and the new one */
	EXPECT_EQ(NBLK + 1, st.large_allocs);
	EXPECT_EQ(NBLK + 2, st.frees);		/* and the class buffer's two */
	EXPECT_EQ(4 * MIB, st.bytes_in_use);
	EXPECT_EQ(ARENA + 4 * MIB, st.bytes_mapped);
	EXPECT_EQ(NBLK, st.arenas_trimmed);
	EXPECT_EQ(0, mrp_free(pool, g.buf.addr));
	EXPECT_EQ(0, mrp_pool_close(pool));
	EXPECT_EQ(live0, fake_live);
}

/*
 * Threads grow at once: both large allocations are inside their creations
 * together (before, the second waited for pool->lock, which the first held
 * across it), and so are two threads growing two classes; each gets an
 * arena of its own. (Two threads growing one class: one_class_grows_once.)
 */
TEST(two_grow_at_once)
{
	struct mrp_pool *pool = pool_grow(0);
	struct grower g[4];
	struct mrp_stats st;
	int live0 = fake_live;

	ASSERT_NE(NULL, pool);
	ASSERT_EQ(0, mrp_attach_pd(pool, FAKE_PD(1), ACCESS));
	fake_hold(FAKE_PD(1));
	ASSERT_EQ(0, grower_start(&g[0], pool, 3 * MIB, FAKE_PD(1)));
	ASSERT_EQ(0, grower_start(&g[1], pool, 3 * MIB, FAKE_PD(1)));
	ASSERT_EQ(0, grower_start(&g[2], pool, 8192, FAKE_PD(1)));
	ASSERT_EQ(0, grower_start(&g[3], pool, 32768, FAKE_PD(1)));
	ASSERT_EQ(0, fake_wait_held(4, HOLD_MS));
	EXPECT_EQ(0, test_stats(pool).arenas);
	fake_release();
	for (int i = 0; i < 4; i++) {
		ASSERT_EQ(0, pthread_join(g[i].thr, NULL));
		ASSERT_EQ(0, g[i].ret);
		EXPECT_TRUE(fake_mr_covers(FAKE_PD(1), g[i].buf.addr, g[i].buf.size,
					   g[i].buf.lkey, g[i].buf.rkey));
	}
	EXPECT_NE(g[0].buf.addr, g[1].buf.addr);
	EXPECT_NE(g[2].buf.addr, g[3].buf.addr);
	st = test_stats(pool);
	EXPECT_EQ(4, st.arenas);
	EXPECT_EQ(2, st.large_allocs);
	EXPECT_EQ(2, st.sync_growths);
	EXPECT_EQ(2 * 4 * MIB + 2 * ARENA, st.bytes_mapped);
	for (int i = 0; i < 4; i++)
		EXPECT_EQ(0, mrp_free(pool, g[i].buf.addr));
	/* the buffers the class threads' caches hold go back with the close */
	EXPECT_EQ(0, mrp_pool_close_flags(pool, MRP_CLOSE_FORCE));
	EXPECT_EQ(live0, fake_live);
}

static uint64_t grow_waits(struct mrp_pool *pool)
{
	uint64_t n = 0;

	for (unsigned int cls = 0; cls < MRP_NCLASSES; cls++)
		n += atomic_load(&pool->cls[cls].grow_waits);
	return n;
}

/*
 * Threads that find one class empty together make one arena, not one each
 * (on a cold start of N threads, N arenas pinned where one serves them
 * all): while the first one's creation is held, the others wait for it in
 * the depot (counted there), and nothing else is being created; released,
 * every thread gets a buffer of that one arena.
 */
TEST(one_class_grows_once)
{
	enum { NT = 3 };
	struct mrp_pool *pool = pool_grow(0);
	struct grower g[NT];
	struct mrp_stats st;
	int live0 = fake_live, i;

	ASSERT_NE(NULL, pool);
	ASSERT_EQ(0, mrp_attach_pd(pool, FAKE_PD(1), ACCESS));
	fake_hold(FAKE_PD(1));
	for (i = 0; i < NT; i++)
		ASSERT_EQ(0, grower_start(&g[i], pool, 8192, FAKE_PD(1)));
	ASSERT_EQ(0, fake_wait_held(1, HOLD_MS));
	/* the others reach the wait; a bound only against a hang */
	for (i = 0; i < HOLD_MS && grow_waits(pool) < NT - 1; i++)
		usleep(1000);
	EXPECT_EQ(NT - 1, grow_waits(pool));
	EXPECT_EQ(1, fake_held());
	for (i = 0; i < NT; i++)
		EXPECT_FALSE(atomic_load(&g[i].done));
	fake_release();
	for (i = 0; i < NT; i++) {
		ASSERT_EQ(0, pthread_join(g[i].thr, NULL));
		ASSERT_EQ(0, g[i].ret);
		EXPECT_TRUE(fake_mr_covers(FAKE_PD(1), g[i].buf.addr, g[i].buf.size,
					   g[i].buf.lkey, g[i].buf.rkey));
	}
	st = test_stats(pool);
	EXPECT_EQ(1, st.arenas);
	EXPECT_EQ(1, st.sync_growths);
	EXPECT_EQ(ARENA, st.bytes_mapped);
	for (i = 0; i < NT; i++)
		EXPECT_EQ(0, mrp_free(pool, g[i].buf.addr));
	EXPECT_EQ(0, mrp_pool_close_flags(pool, MRP_CLOSE_FORCE));
	EXPECT_EQ(live0, fake_live);
}

/*
 * A PD marked dead while the new arena's registration in it is under way:
 * the publish clears its bit (the fast path must not hand out its keys),
 * the MR stays for the detach, which removes it.
 */
TEST(dead_during_registration)
{
	struct mrp_pool *pool = pool_grow(0);
	struct mrp_arena *a;
	struct grower g;

	ASSERT_NE(NULL, pool);
	ASSERT_EQ(0, mrp_attach_pd(pool, FAKE_PD(1), ACCESS));
	ASSERT_EQ(0, mrp_attach_pd(pool, FAKE_PD(2), ACCESS));
	fake_hold(FAKE_PD(2));
	ASSERT_EQ(0, grower_start(&g, pool, 4096, FAKE_PD(1)));
	ASSERT_EQ(0, fake_wait_held(1, HOLD_MS));
	ASSERT_EQ(0, mrp_pd_dead(pool, FAKE_PD(2)));
	fake_release();
	ASSERT_EQ(0, pthread_join(g.thr, NULL));
	ASSERT_EQ(0, g.ret);
	a = mrp_arena_of((uintptr_t)g.buf.addr);
	ASSERT_NE(NULL, a);
	EXPECT_FALSE(mrp_arena_has(a, 1));
	EXPECT_NE(-1, fake_mr_access(FAKE_PD(2), g.buf.addr));
	EXPECT_EQ(0, mrp_free(pool, g.buf.addr));
	EXPECT_EQ(0, mrp_detach_pd(pool, FAKE_PD(2)));
	EXPECT_EQ(-1, fake_mr_access(FAKE_PD(2), g.buf.addr));
	EXPECT_EQ(0, mrp_pool_close_flags(pool, MRP_CLOSE_FORCE));
}

/* The application's add(): refuses every arena once refuse is set. */
struct refuser {
	atomic_bool refuse;
	atomic_int adds, removes;
};

static int refuser_add(void *ctx, void *addr, size_t len)
{
	struct refuser *r = ctx;

	atomic_fetch_add(&r->adds, 1);
	return atomic_load(&r->refuse) ? -EPERM : 0;
}

static void refuser_remove(void *ctx, void *addr, size_t len)
{
	struct refuser *r = ctx;

	atomic_fetch_add(&r->removes, 1);
}

/*
 * A creation fails after its unlocked part (the application's add()
 * refuses the arena when it is published) while another thread frees
 * large blocks: the frees get through during the hold, the allocation
 * fails with add()'s error, and nothing of its arena is left: no MR, no
 * count, no bytes.
 */
TEST(failed_creation_while_freeing)
{
	enum { NBLK = 6 };
	struct mrp_pool *pool = pool_grow(0);
	struct refuser r = { 0 };
	struct mrp_arena_ops ops = {
		.add = refuser_add, .remove = refuser_remove, .ctx = &r,
	};
	struct mrp_stats st0, st;
	void *blk[NBLK];
	struct mrp_buf b;
	struct grower g;
	int live0, frees = 0;

	ASSERT_NE(NULL, pool);
	ASSERT_EQ(0, mrp_attach_pd(pool, FAKE_PD(1), ACCESS));
	ASSERT_EQ(0, mrp_set_arena_ops(pool, &ops));
	for (int i = 0; i < NBLK; i++) {
		ASSERT_EQ(0, mrp_alloc(pool, 4 * MIB, NULL, &b));
		blk[i] = b.addr;
	}
	live0 = fake_live;
	atomic_store(&r.refuse, true);
	fake_hold(FAKE_PD(1));
	ASSERT_EQ(0, grower_start(&g, pool, 8 * MIB, FAKE_PD(1)));
	ASSERT_EQ(0, fake_wait_held(1, HOLD_MS));
	for (int i = 0; i < NBLK; i++)
		frees += mrp_free(pool, blk[i]) == 0;
	st0 = test_stats(pool);
	EXPECT_EQ(1, fake_held());
	EXPECT_FALSE(atomic_load(&g.done));
	EXPECT_EQ(NBLK, frees);
	EXPECT_EQ(NBLK, st0.frees);
	/* its MR in PD 1 exists now, made without the lock */
	fake_release();
	ASSERT_EQ(0, pthread_join(g.thr, NULL));
	EXPECT_EQ(-EPERM, g.ret);
	EXPECT_EQ(NBLK + 1, atomic_load(&r.adds));
	EXPECT_EQ(0, atomic_load(&r.removes));
	EXPECT_EQ(live0, fake_live);		/* its MR deregistered */
	st = test_stats(pool);
	EXPECT_EQ(NBLK, st.arenas);
	EXPECT_EQ(st0.bytes_mapped, st.bytes_mapped);
	EXPECT_EQ(NBLK, st.large_allocs);
	EXPECT_EQ(0, st.bytes_in_use);
	/* the parked arenas still serve, the refusal notwithstanding */
	EXPECT_EQ(0, mrp_alloc(pool, 4 * MIB, FAKE_PD(1), &b));
	EXPECT_EQ(0, mrp_free(pool, b.addr));
	EXPECT_EQ(0, mrp_pool_close(pool));
	EXPECT_EQ(NBLK, atomic_load(&r.removes));
}

/*
 * max_bytes counts an arena in flight: with one held, a second allocation
 * that would pass the limit together with it fails at once (-ENOMEM), it
 * does not wait. Once it is published, what fits beside it is served.
 */
TEST(max_bytes_counts_in_flight)
{
	struct mrp_pool *pool = pool_grow(6 * MIB);
	struct mrp_buf b;
	struct grower g;

	ASSERT_NE(NULL, pool);
	ASSERT_EQ(0, mrp_attach_pd(pool, FAKE_PD(1), ACCESS));
	fake_hold(FAKE_PD(1));
	ASSERT_EQ(0, grower_start(&g, pool, 4 * MIB, FAKE_PD(1)));
	ASSERT_EQ(0, fake_wait_held(1, HOLD_MS));
	EXPECT_EQ(-ENOMEM, mrp_alloc(pool, 4 * MIB, NULL, &b));
	EXPECT_EQ(1, fake_held());
	fake_release();
	ASSERT_EQ(0, pthread_join(g.thr, NULL));
	ASSERT_EQ(0, g.ret);
	/* 4 MiB mapped, 2 more fit */
	EXPECT_EQ(-ENOMEM, mrp_alloc(pool, 4 * MIB, NULL, &b));
	EXPECT_EQ(0, mrp_alloc(pool, 2 * MIB, NULL, &b));
	EXPECT_EQ(0, mrp_free(pool, b.addr));
	EXPECT_EQ(0, mrp_free(pool, g.buf.addr));
	EXPECT_EQ(0, mrp_pool_close_flags(pool, MRP_CLOSE_FORCE));
}

struct detacher {
	pthread_t thr;
	struct mrp_pool *pool;
	struct ibv_pd *pd;
	int ret;
	atomic_bool done;
};

static void *detacher_main(void *arg)
{
	struct detacher *d = arg;

	d->ret = mrp_detach_pd(d->pool, d->pd);
	atomic_store(&d->done, true);
	return NULL;
}

/*
 * A PD detached while a creation registers in it unlocked: the detach
 * returns only after the creation ended (the caller may deallocate the PD
 * then), and no MR of the new arena is left in it.
 */
TEST(detach_waits_for_registration)
{
	struct mrp_pool *pool = pool_grow(0);
	struct detacher d = { 0 };
	struct mrp_buf b;
	struct grower g;
	int live0 = fake_live, i;

	ASSERT_NE(NULL, pool);
	ASSERT_EQ(0, mrp_attach_pd(pool, FAKE_PD(1), ACCESS));
	ASSERT_EQ(0, mrp_attach_pd(pool, FAKE_PD(2), ACCESS));
	fake_hold(FAKE_PD(1));
	ASSERT_EQ(0, grower_start(&g, pool, 3 * MIB, NULL));
	ASSERT_EQ(0, fake_wait_held(1, HOLD_MS));
	d.pool = pool;
	d.pd = FAKE_PD(1);
	ASSERT_EQ(0, pthread_create(&d.thr, NULL, detacher_main, &d));
	/* the detach sleeps for the registration in flight, counted */
	for (i = 0; i < HOLD_MS && !atomic_load(&pool->detach_waits) &&
	     !atomic_load(&d.done); i++)
		sleep_ms(1);
	EXPECT_EQ(1, atomic_load(&pool->detach_waits));
	EXPECT_FALSE(atomic_load(&d.done));
	EXPECT_EQ(1, fake_held());
	fake_release();
	ASSERT_EQ(0, pthread_join(g.thr, NULL));
	ASSERT_EQ(0, pthread_join(d.thr, NULL));
	ASSERT_EQ(0, g.ret);
	EXPECT_EQ(0, d.ret);
	EXPECT_EQ(-1, fake_mr_access(FAKE_PD(1), g.buf.addr));
	EXPECT_NE(-1, fake_mr_access(FAKE_PD(2), g.buf.addr));
	EXPECT_EQ(0, mrp_lookup(pool, g.buf.addr, FAKE_PD(2), &b));
	EXPECT_NE(0, mrp_lookup(pool, g.buf.addr, FAKE_PD(1), &b));
	EXPECT_EQ(0, mrp_free(pool, g.buf.addr));
	EXPECT_EQ(0, mrp_pool_close(pool));
	EXPECT_EQ(live0, fake_live);
}

TEST_HARNESS_MAIN
