// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Host unit tests of memory windows against a fake device context: the
 * bind is posted without the pool's lock, a free invalidates the windows
 * of its own buffer and no other, a free racing the bind never
 * deallocates a window the post is reading, a failed post leaves nothing
 * behind, and binds and frees from several threads end with every window
 * gone (run under ASan, valgrind and TSan by make check).
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include <infiniband/verbs.h>

#include "kselftest_harness.h"
#include "helpers.h"
#include "internal.h"

/* The fake device: windows are counted, deallocated ones marked. */
#define MW_DEAD		0xdeadu

static _Atomic int mw_live, mw_deallocs, mw_binds;
static struct mrp_pool *cur_pool;
/* a post found the pool lock taken (by its own thread, if it is the only one) */
static _Atomic int post_lock_held;
static int post_fail;			/* the next posts fail with this */
/* set: each post waits until the test has freed the buffer */
static _Atomic int post_wait_free, post_waiting, buffer_freed;

static struct ibv_mw *fake_alloc_mw(struct ibv_pd *pd, enum ibv_mw_type type)
{
	struct ibv_mw *mw = calloc(1, sizeof(*mw));

	if (!mw) {
		errno = ENOMEM;
		return NULL;
	}
	mw->context = pd->context;
	mw->pd = pd;
	mw->rkey = 0x1200;
	mw->type = type;
	atomic_fetch_add(&mw_live, 1);
	return mw;
}

static int fake_dealloc_mw(struct ibv_mw *mw)
{
	if (mw->handle == MW_DEAD)
		abort();	/* deallocated twice */
	mw->handle = MW_DEAD;
	atomic_fetch_sub(&mw_live, 1);
	atomic_fetch_add(&mw_deallocs, 1);
	free(mw);
	return 0;
}

static int fake_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr,
			  struct ibv_send_wr **bad)
{
	bool locked = pthread_mutex_trylock(&cur_pool->lock) != 0;

	if (locked)
		atomic_store(&post_lock_held, 1);	/* and the free would wait */
	else
		pthread_mutex_unlock(&cur_pool->lock);
	if (atomic_load(&post_wait_free)) {
		atomic_store(&post_waiting, 1);
		while (!locked && !atomic_load(&buffer_freed))
			sched_yield();
	}
	/* the window must still be alive while the post reads it */
	if (wr->opcode != IBV_WR_BIND_MW || wr->bind_mw.mw->handle == MW_DEAD)
		abort();
	if (post_fail) {
		*bad = wr;
		return post_fail;
	}
	atomic_fetch_add(&mw_binds, 1);
	return 0;
}

static struct ibv_context fake_ctx = {
	.ops = {
		.alloc_mw = fake_alloc_mw,
		.dealloc_mw = fake_dealloc_mw,
		.post_send = fake_post_send,
	},
};
static struct ibv_pd fake_pd = { .context = &fake_ctx };
static struct ibv_qp fake_qp = { .context = &fake_ctx, .pd = &fake_pd };

#define ACCESS	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND)

FIXTURE(mw) {
	struct mrp_pool *pool;
};

FIXTURE_SETUP(mw)
{
	atomic_store(&mw_live, 0);
	atomic_store(&mw_deallocs, 0);
	atomic_store(&mw_binds, 0);
	atomic_store(&post_lock_held, 0);
	atomic_store(&post_wait_free, 0);
	atomic_store(&post_waiting, 0);
	atomic_store(&buffer_freed, 0);
	post_fail = 0;
	self->pool = test_pool(NULL);
	ASSERT_NE(NULL, self->pool);
	cur_pool = self->pool;
	ASSERT_EQ(0, mrp_attach_pd(self->pool, &fake_pd, ACCESS));
}

FIXTURE_TEARDOWN(mw)
{
	EXPECT_EQ(0, mrp_pool_close(self->pool));
	EXPECT_EQ(0, atomic_load(&mw_live));
}

static int bind(struct mrp_pool *pool, void *addr, size_t len)
{
	uint32_t rkey;

	return mrp_mw_bind(pool, &fake_qp, addr, len, IBV_ACCESS_REMOTE_READ,
			   0, IBV_SEND_SIGNALED, &rkey);
}

/* The post runs without the pool lock; a free takes its own windows only. */
TEST_F(mw, free_invalidates_own_windows)
{
	struct mrp_buf b[3];
	int i;

	for (i = 0; i < 3; i++)
		ASSERT_EQ(0, mrp_alloc(self->pool, 8192, &fake_pd, &b[i]));
	ASSERT_EQ(0, bind(self->pool, b[0].addr, 8192));
	ASSERT_EQ(0, bind(self->pool, b[1].addr, 4096));
	ASSERT_EQ(0, bind(self->pool, (char *)b[1].addr + 4096, 4096));
	ASSERT_EQ(0, bind(self->pool, b[2].addr, 100));
	EXPECT_EQ(4, atomic_load(&mw_binds));
	EXPECT_EQ(0, atomic_load(&post_lock_held));
	EXPECT_EQ(4, atomic_load(&mw_live));

	/* the middle buffer's two windows go, the others stay */
	ASSERT_EQ(0, mrp_free(self->pool, b[1].addr));
	EXPECT_EQ(2, atomic_load(&mw_deallocs));
	EXPECT_EQ(2, atomic_load(&mw_live));
	EXPECT_EQ(0, mrp_mw_invalidate(self->pool, (char *)b[0].addr + 10));
	EXPECT_EQ(-ENOENT, mrp_mw_invalidate(self->pool, b[0].addr));
	EXPECT_EQ(1, atomic_load(&mw_live));
	ASSERT_EQ(0, mrp_free(self->pool, b[0].addr));
	EXPECT_EQ(1, atomic_load(&mw_live));
	ASSERT_EQ(0, mrp_free(self->pool, b[2].addr));
	EXPECT_EQ(0, atomic_load(&mw_live));
	EXPECT_EQ(4, atomic_load(&mw_deallocs));
}

/* A large buffer has one index slot: its windows go with it. */
TEST_F(mw, large_buffer)
{
	struct mrp_buf b;

	ASSERT_EQ(0, mrp_alloc(self->pool, 5 << 20, &fake_pd, &b));
	ASSERT_EQ(0, bind(self->pool, b.addr, 4096));
	ASSERT_EQ(0, bind(self->pool, (char *)b.addr + (4 << 20), 4096));
	EXPECT_EQ(-EINVAL, bind(self->pool, (char *)b.addr + b.size - 1, 2));
	EXPECT_EQ(2, atomic_load(&mw_live));
	ASSERT_EQ(0, mrp_free(self->pool, b.addr));
	EXPECT_EQ(0, atomic_load(&mw_live));
}

/*
 * A fine-class buffer (80 KiB, not a power of two): its windows are found
 * by its index, a free takes its own, a bind past its end or in the
 * arena's tail is refused.
 */
TEST_F(mw, fine_class_buffer)
{
	struct mrp_buf b[2];

	EXPECT_EQ(0, mrp_pool_close(self->pool));
	self->pool = fine_pool(NULL);
	ASSERT_NE(NULL, self->pool);
	cur_pool = self->pool;
	ASSERT_EQ(0, mrp_attach_pd(self->pool, &fake_pd, ACCESS));
	for (int i = 0; i < 2; i++) {
		ASSERT_EQ(0, mrp_alloc(self->pool, 70 << 10, &fake_pd, &b[i]));
		ASSERT_EQ(80 << 10, b[i].size);
	}
	ASSERT_EQ(0, bind(self->pool, (char *)b[0].addr + (64 << 10), 16 << 10));
	EXPECT_EQ(-EINVAL, bind(self->pool, (char *)b[0].addr + (64 << 10), (16 << 10) + 1));
	ASSERT_EQ(0, bind(self->pool, b[1].addr, 80 << 10));
	/* 4 MiB arena: 52 buffers of 80 KiB, the last 64 KiB a tail */
	EXPECT_EQ(-EINVAL, bind(self->pool, (char *)mrp_arena_of((uintptr_t)b[0].addr)->base +
				52 * (80 << 10), 4096));
	EXPECT_EQ(2, atomic_load(&mw_live));
	ASSERT_EQ(0, mrp_free(self->pool, b[1].addr));
	EXPECT_EQ(1, atomic_load(&mw_live));
	EXPECT_EQ(0, mrp_mw_invalidate(self->pool, (char *)b[0].addr + (79 << 10)));
	EXPECT_EQ(0, atomic_load(&mw_live));
	/*
	 * The last window gone, the fine mask is back (not a power of two's
	 * 16 KiB - 1, which would let a pointer 16 KiB inside reach a cache)
	 */
	EXPECT_EQ(MRP_FINE_MASK,
		  atomic_load(&mrp_arena_of((uintptr_t)b[0].addr)->block_mask));
	EXPECT_EQ(-EINVAL, mrp_free(self->pool, (char *)b[0].addr + (16 << 10)));
	ASSERT_EQ(0, mrp_free(self->pool, b[0].addr));
	EXPECT_EQ(2, atomic_load(&mw_deallocs));
}

/* A failed post returns its error and leaves no window listed. */
TEST_F(mw, failed_post)
{
	struct mrp_buf b;

	ASSERT_EQ(0, mrp_alloc(self->pool, 8192, &fake_pd, &b));
	post_fail = ENOMEM;
	EXPECT_EQ(-ENOMEM, bind(self->pool, b.addr, 8192));
	post_fail = 0;
	EXPECT_EQ(0, atomic_load(&mw_live));
	EXPECT_EQ(-ENOENT, mrp_mw_invalidate(self->pool, b.addr));
	ASSERT_EQ(0, mrp_free(self->pool, b.addr));
	EXPECT_EQ(1, atomic_load(&mw_deallocs));
}

struct race {
	struct mrp_pool *pool;
	void *addr;
	int ret;
};

static void *binder(void *arg)
{
	struct race *r = arg;

	r->ret = bind(r->pool, r->addr, 4096);
	return NULL;
}

/*
 * The buffer freed while its bind is being posted: the free completes
 * meanwhile (no lock held across the post), unlists the window, and the
 * window is deallocated once the post has returned, not before.
 */
TEST_F(mw, free_during_post)
{
	struct race r = { .pool = self->pool };
	struct mrp_buf b;
	pthread_t t;

	ASSERT_EQ(0, mrp_alloc(self->pool, 8192, &fake_pd, &b));
	r.addr = b.addr;
	atomic_store(&post_wait_free, 1);
	ASSERT_EQ(0, pthread_create(&t, NULL, binder, &r));
	while (!atomic_load(&post_waiting))
		sched_yield();
	ASSERT_EQ(0, mrp_free(self->pool, b.addr));
	/* unlisted by the free, still alive for the post */
	EXPECT_EQ(1, atomic_load(&mw_live));
	EXPECT_EQ(0, atomic_load(&mw_deallocs));
	atomic_store(&buffer_freed, 1);
	ASSERT_EQ(0, pthread_join(t, NULL));
	EXPECT_EQ(0, r.ret);
	EXPECT_EQ(0, atomic_load(&mw_live));
	EXPECT_EQ(1, atomic_load(&mw_deallocs));
	EXPECT_EQ(0, atomic_load(&post_lock_held));
}

#define THREADS	4
#define ROUNDS	500

static void *churn(void *arg)
{
	struct mrp_pool *pool = arg;
	struct mrp_buf b;
	long bad = 0;
	int i;

	for (i = 0; i < ROUNDS; i++) {
		size_t size = (size_t)4096 << (i % 4);

		if (mrp_alloc(pool, size, &fake_pd, &b) ||
		    bind(pool, b.addr, 4096) ||
		    bind(pool, (char *)b.addr + size - 4096, 4096))
			bad++;
		if (i % 3 == 0 && mrp_mw_invalidate(pool, b.addr))
			bad++;
		if (mrp_free(pool, b.addr))
			bad++;
	}
	return (void *)bad;
}

/* Binds, invalidations and frees in several threads: nothing left over. */
TEST_F(mw, threads)
{
	pthread_t t[THREADS];
	void *bad;
	int i;

	for (i = 0; i < THREADS; i++)
		ASSERT_EQ(0, pthread_create(&t[i], NULL, churn, self->pool));
	for (i = 0; i < THREADS; i++) {
		ASSERT_EQ(0, pthread_join(t[i], &bad));
		EXPECT_EQ(NULL, bad);
	}
	EXPECT_EQ(0, atomic_load(&mw_live));
	EXPECT_EQ(THREADS * ROUNDS * 2, atomic_load(&mw_binds));
	EXPECT_EQ(THREADS * ROUNDS * 2, atomic_load(&mw_deallocs));
	/* post_lock_held means nothing here: another thread may hold it */
}

/* Windows still bound at PD detach go first; the detach succeeds. */
TEST_F(mw, detach_with_windows)
{
	struct mrp_buf b;

	ASSERT_EQ(0, mrp_alloc(self->pool, 8192, &fake_pd, &b));
	ASSERT_EQ(0, bind(self->pool, b.addr, 8192));
	ASSERT_EQ(0, mrp_detach_pd(self->pool, &fake_pd));
	EXPECT_EQ(0, atomic_load(&mw_live));
	/* the free finds no window of the gone PD */
	ASSERT_EQ(0, mrp_free(self->pool, b.addr));
	EXPECT_EQ(1, atomic_load(&mw_deallocs));
	ASSERT_EQ(0, mrp_attach_pd(self->pool, &fake_pd, ACCESS));
}

TEST_HARNESS_MAIN
