// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Host unit tests of the slow calls made without pool->lock besides
 * growth (growth_test): an attach registers every arena and fallback
 * buffer, a lazy registration one, a trim deregisters and unmaps, a
 * detach deregisters, a fallback buffer is registered when it is made or
 * looked up and deregistered when it is freed, each without the lock
 * (reg.c, depot.c), so that while one of them is held up another
 * thread's large free, mrp_stats, mrp_pd_dead and fork get through (the
 * held fixture: one variant per held call). The holds are the fake
 * verbs' (fake_hold(), fake_hold_dereg(), fake_hold_only_len() to hold a
 * fallback buffer's call and not the arenas') and, for the trim's
 * munmap(), the stand-in for UCX's ucm_vm_munmap() below, which the
 * library calls just before it unmaps; each test knows the call is still
 * held from the holder's own count, without timing anything. The only
 * timeouts are bounds on a hang.
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
#define NBLK		4	/* large buffers of 4 MiB, each an arena of its own */

/*
 * UCX's entry point, found by dlsym (os.c): with unmap_hold set, the
 * thread that unmaps waits here until it is cleared; unmap_waiting says
 * one does.
 */
static pthread_mutex_t unmap_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t unmap_cond = PTHREAD_COND_INITIALIZER;
static bool unmap_hold;
static void *unmap_only;	/* set: hold the unmap of that address only */
static int unmap_waiting;

void ucm_vm_munmap(void *addr, size_t len);
__attribute__((visibility("default"))) void ucm_vm_munmap(void *addr, size_t len)
{
	pthread_mutex_lock(&unmap_lock);
	if (unmap_hold && (!unmap_only || addr == unmap_only)) {
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

/*
 * fallback: the pool may map the NBLK blocks and no more, and serves
 * what does not fit from fallback buffers (FB_SIZE: a class size, so that
 * fake_hold_only_len() tells its calls from the 4 MiB arenas').
 */
#define FB_SIZE		((size_t)64 << 10)

static struct mrp_pool *pool_open_fb(bool fallback)
{
	struct mrp_pool_attr a = {
		.comp_mask = MRP_POOL_ATTR_ARENA_SIZE | MRP_POOL_ATTR_FALLBACK |
			     MRP_POOL_ATTR_MAX_BYTES,
		.arena_size = ARENA, .fallback = fallback,
		.max_bytes = fallback ? NBLK * 4 * MIB : 0,
	};

	return test_pool(&a);
}

static struct mrp_pool *pool_open(void)
{
	return pool_open_fb(false);
}

/* The held call, on a thread of its own; done once it returned. */
enum held_call { HELD_ATTACH, HELD_LOOKUP, HELD_TRIM, HELD_DETACH, HELD_ALLOC, HELD_FREE };

struct holder {
	pthread_t thr;
	struct mrp_pool *pool;
	enum held_call call;
	struct ibv_pd *pd;
	void *addr;
	size_t size;			/* HELD_ALLOC: 0 for 8 MiB */
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
		h->ret = mrp_alloc(h->pool, h->size ? h->size : 8 * MIB, h->pd, &h->buf);
		break;
	case HELD_FREE:
		h->ret = mrp_free(h->pool, h->addr);
		break;
	}
	atomic_store(&h->done, true);
	return NULL;
}

static int holder_start_size(struct holder *h, struct mrp_pool *pool, enum held_call call,
			     struct ibv_pd *pd, void *addr, size_t size)
{
	memset(h, 0, sizeof(*h));
	h->pool = pool;
	h->call = call;
	h->pd = pd;
	h->addr = addr;
	h->size = size;
	return pthread_create(&h->thr, NULL, holder_main, h);
}

static int holder_start(struct holder *h, struct mrp_pool *pool, enum held_call call,
			struct ibv_pd *pd, void *addr)
{
	return holder_start_size(h, pool, call, pd, addr, 0);
}

/* Until *c is at least n: 0, or -1 after HOLD_MS (a hang, not a time). */
static int counter_wait(_Atomic uint64_t *c, uint64_t n)
{
	for (int i = 0; i < HOLD_MS && atomic_load(c) < n; i++)
		usleep(1000);
	return atomic_load(c) >= n ? 0 : -1;
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

/* The NBLK large buffers. */
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
 * One held call against the same background: a pool with PDs 1 and 2
 * attached and NBLK large blocks, the variant's own setup, its call held
 * (in a registration or deregistration of the fake verbs, or in the
 * unmap hook), the passer run meanwhile (its large free is blk[0], its
 * dead PD is PD 2), the variant's checks while the call is still held and
 * after it was released, then the common end: every block still live
 * freed, PD 2 detached, the pool closed, and the fake verbs' MRs back to
 * where they were before the pool opened.
 */
enum hold_kind { HOLD_REG, HOLD_DEREG, HOLD_UNMAP };

FIXTURE(held) {
	struct mrp_pool *pool;
	void *blk[NBLK];
	bool live[NBLK];		/* blk[i] is still the test's to free */
	void *fb;			/* a fallback buffer still to free, or NULL */
	struct mrp_buf b;		/* lazy: the block PD 1 refused */
	struct holder h, h2;		/* the held call; a second one (during) */
	int live0;			/* fake_live before the pool opened */
	int got;			/* the passer's count */
};

typedef void held_fn(struct __test_metadata *_metadata, FIXTURE_DATA(held) *self);

FIXTURE_VARIANT(held) {
	const char *what;		/* the held call, for the log */
	bool fallback;			/* pool_open_fb(true) */
	enum hold_kind hold;
	int hold_pd;			/* whose (de)registrations are held */
	bool hold_fb;			/* only a fallback buffer's (FB_SIZE) */
	enum held_call call;
	int call_pd;			/* the held call's PD, 0: none */
	size_t call_size;		/* HELD_ALLOC */
	held_fn *setup;			/* before the hold, may be NULL */
	void *(*addr)(FIXTURE_DATA(held) *self);	/* the held call's address */
	held_fn *during;		/* while held, after the passer */
	held_fn *after;			/* released and joined */
};

FIXTURE_SETUP(held)
{
	self->live0 = fake_live;
	self->fb = NULL;
	self->pool = pool_open_fb(variant->fallback);
	ASSERT_NE(NULL, self->pool);
	ASSERT_EQ(0, mrp_attach_pd(self->pool, FAKE_PD(1), ACCESS));
	ASSERT_EQ(0, mrp_attach_pd(self->pool, FAKE_PD(2), ACCESS));
	ASSERT_EQ(0, alloc_blocks(self->pool, self->blk));
	for (int i = 0; i < NBLK; i++)
		self->live[i] = true;
	if (variant->setup)
		variant->setup(_metadata, self);
}

FIXTURE_TEARDOWN(held)
{
	if (!self->pool)
		return;
	for (int i = 1; i < NBLK; i++)
		if (self->live[i])
			EXPECT_EQ(0, mrp_free(self->pool, self->blk[i]));
	if (self->fb)
		EXPECT_EQ(0, mrp_free(self->pool, self->fb));
	EXPECT_EQ(0, mrp_detach_pd(self->pool, FAKE_PD(2)));
	EXPECT_EQ(0, mrp_pool_close(self->pool));
	EXPECT_EQ(self->live0, fake_live);
}

/* While the variant's call is held, the passer's four calls get through. */
TEST_F(held, others_get_through)
{
	struct passer p;

	switch (variant->hold) {
	case HOLD_REG:
		fake_hold(FAKE_PD(variant->hold_pd));
		break;
	case HOLD_DEREG:
		fake_hold_dereg(FAKE_PD(variant->hold_pd));
		break;
	case HOLD_UNMAP:
		pthread_mutex_lock(&unmap_lock);
		unmap_hold = true;
		pthread_mutex_unlock(&unmap_lock);
		break;
	}
	if (variant->hold_fb)
		fake_hold_only_len(FB_SIZE);
	ASSERT_EQ(0, holder_start_size(&self->h, self->pool, variant->call,
				       variant->call_pd ? FAKE_PD(variant->call_pd) : NULL,
				       variant->addr ? variant->addr(self) : NULL,
				       variant->call_size));
	if (variant->hold == HOLD_UNMAP) {
		ASSERT_EQ(0, unmap_wait_held());
	} else {
		ASSERT_EQ(0, fake_wait_held(1, HOLD_MS));
	}
	self->got = passer_run(&p, self->pool, self->blk[0], FAKE_PD(2));
	EXPECT_EQ(PASSER_OPS, self->got);
	TH_LOG("%d of %d calls got through while %s was held", self->got, PASSER_OPS,
	       variant->what);
	if (variant->during)
		variant->during(_metadata, self);
	EXPECT_EQ(1, variant->hold == HOLD_UNMAP ? unmap_held() : fake_held());
	EXPECT_FALSE(atomic_load(&self->h.done));
	if (variant->hold == HOLD_UNMAP)
		unmap_release();
	else
		fake_release();
	passer_join(&p);
	ASSERT_EQ(0, pthread_join(self->h.thr, NULL));
	if (variant->after)
		variant->after(_metadata, self);
}

/*
 * attach: held in the registration of the first arena in its PD (PD 3).
 * Under pool->lock the free blocks: the bounded join fails, the release
 * lets both finish. The slot is taken: the same PD again is refused at
 * once (only asked where the lock was free for the others: it would wait
 * too). Released, the attach registered every arena (without the lock,
 * counted) and the PD's keys cover each block.
 */
static void attach_refused_again(struct __test_metadata *_metadata,
				 FIXTURE_DATA(held) *self)
{
	if (self->got == PASSER_OPS)
		EXPECT_EQ(-EEXIST, mrp_attach_pd(self->pool, FAKE_PD(3), ACCESS));
}

static void attach_after(struct __test_metadata *_metadata, FIXTURE_DATA(held) *self)
{
	struct mrp_buf b;

	ASSERT_EQ(0, self->h.ret);
	EXPECT_EQ(NBLK, atomic_load(&self->pool->attach_unlocked_regs));
	for (int i = 0; i < NBLK; i++) {
		ASSERT_EQ(0, mrp_lookup(self->pool, self->blk[i], FAKE_PD(3), &b));
		EXPECT_TRUE(fake_mr_covers(FAKE_PD(3), self->blk[i], 4 * MIB, b.lkey, b.rkey));
	}
}

FIXTURE_VARIANT_ADD(held, attach) {
	.what = "an attach", .hold = HOLD_REG, .hold_pd = 3,
	.call = HELD_ATTACH, .call_pd = 3,
	.during = attach_refused_again, .after = attach_after,
};

/*
 * lazy: a lazy registration (an arena PD 1 refused at growth, its keys
 * asked for by mrp_lookup()) held in its ibv_reg_mr. A second lookup of
 * the same keys waits for the first one's MR (counted) instead of making
 * its own; released, both get the keys of one MR.
 */
static void lazy_setup(struct __test_metadata *_metadata, FIXTURE_DATA(held) *self)
{
	fake_fail_pd = FAKE_PD(1);
	ASSERT_EQ(0, mrp_alloc(self->pool, 4 * MIB, NULL, &self->b));
	fake_fail_pd = NULL;
	EXPECT_FALSE(mrp_arena_has(mrp_arena_of((uintptr_t)self->b.addr), 0));
}

static void *lazy_addr(FIXTURE_DATA(held) *self)
{
	return self->b.addr;
}

/* A second lookup of the held call's keys waits for its MR (counted). */
static void lookup_again(struct __test_metadata *_metadata, FIXTURE_DATA(held) *self)
{
	ASSERT_EQ(0, holder_start(&self->h2, self->pool, HELD_LOOKUP, FAKE_PD(1),
				  self->h.addr));
	EXPECT_EQ(0, counter_wait(&self->pool->lazy_waits, 1));
	EXPECT_EQ(1, atomic_load(&self->pool->lazy_waits));
	EXPECT_FALSE(atomic_load(&self->h2.done));
}

/* Both lookups got the keys of one MR of PD 1 over len bytes. */
static void lookups_after(struct __test_metadata *_metadata, FIXTURE_DATA(held) *self,
			  size_t len)
{
	ASSERT_EQ(0, pthread_join(self->h2.thr, NULL));
	ASSERT_EQ(0, self->h.ret);
	ASSERT_EQ(0, self->h2.ret);
	EXPECT_EQ(self->h.buf.lkey, self->h2.buf.lkey);
	EXPECT_TRUE(fake_mr_covers(FAKE_PD(1), self->h.addr, len, self->h.buf.lkey,
				   self->h.buf.rkey));
}

static void lazy_after(struct __test_metadata *_metadata, FIXTURE_DATA(held) *self)
{
	lookups_after(_metadata, self, 4 * MIB);
	EXPECT_EQ(0, mrp_free(self->pool, self->b.addr));
}

FIXTURE_VARIANT_ADD(held, lazy) {
	.what = "a lazy registration", .hold = HOLD_REG, .hold_pd = 1,
	.call = HELD_LOOKUP, .call_pd = 1, .setup = lazy_setup, .addr = lazy_addr,
	.during = lookup_again, .after = lazy_after,
};

/*
 * trim_dereg: a trim held in the deregistration of a parked arena. A
 * detach of the PD meanwhile waits for the deregistration (counted, the
 * caller may deallocate the PD once it returns). Released, the arena is
 * gone from the counts.
 */
static void park_blk1(struct __test_metadata *_metadata, FIXTURE_DATA(held) *self)
{
	ASSERT_EQ(0, mrp_free(self->pool, self->blk[1]));	/* parked: the trim's */
	self->live[1] = false;
}

static void detach_waits(struct __test_metadata *_metadata, FIXTURE_DATA(held) *self)
{
	ASSERT_EQ(0, holder_start(&self->h2, self->pool, HELD_DETACH, FAKE_PD(1), NULL));
	EXPECT_EQ(0, counter_wait(&self->pool->detach_waits, 1));
	EXPECT_EQ(1, atomic_load(&self->pool->detach_waits));
	EXPECT_FALSE(atomic_load(&self->h2.done));
}

/* The trim took one arena: off the counts. */
static void one_trimmed(struct __test_metadata *_metadata, FIXTURE_DATA(held) *self)
{
	struct mrp_stats st = test_stats(self->pool);

	EXPECT_EQ(NBLK - 1, st.arenas);
	EXPECT_EQ(1, st.arenas_trimmed);
}

static void trim_dereg_after(struct __test_metadata *_metadata, FIXTURE_DATA(held) *self)
{
	struct mrp_stats st;

	ASSERT_EQ(0, pthread_join(self->h2.thr, NULL));
	EXPECT_EQ(1, self->h.ret);
	EXPECT_EQ(0, self->h2.ret);
	EXPECT_EQ(-1, fake_mr_access(FAKE_PD(1), self->blk[2]));
	one_trimmed(_metadata, self);
	st = test_stats(self->pool);
	EXPECT_EQ((NBLK - 1) * 4 * MIB, st.bytes_mapped);
}

FIXTURE_VARIANT_ADD(held, trim_dereg) {
	.what = "a trim's deregistration", .hold = HOLD_DEREG, .hold_pd = 1,
	.call = HELD_TRIM, .setup = park_blk1,
	.during = detach_waits, .after = trim_dereg_after,
};

/*
 * trim_unmap: a trim held just before its munmap() (in UCX's hook, which
 * the library calls first): the arena is off the counts already, and the
 * fork child had nothing of it to unmap.
 */
static void trim_unmap_after(struct __test_metadata *_metadata, FIXTURE_DATA(held) *self)
{
	EXPECT_EQ(1, self->h.ret);
}

FIXTURE_VARIANT_ADD(held, trim_unmap) {
	.what = "a trim's munmap", .hold = HOLD_UNMAP,
	.call = HELD_TRIM, .setup = park_blk1,
	.during = one_trimmed, .after = trim_unmap_after,
};

/*
 * detach: held in the deregistration of its PD's MR of an arena.
 * Released, no MR of the PD is left in any arena, each arena's went
 * unlocked (counted), and the slot is free again: attached again, every
 * arena registered.
 */
static void detach_after(struct __test_metadata *_metadata, FIXTURE_DATA(held) *self)
{
	struct mrp_buf b;

	EXPECT_EQ(0, self->h.ret);
	EXPECT_EQ(NBLK, atomic_load(&self->pool->detach_unlocked_deregs));
	for (int i = 0; i < NBLK; i++)
		EXPECT_EQ(-1, fake_mr_access(FAKE_PD(1), self->blk[i]));
	EXPECT_EQ(-EINVAL, mrp_lookup(self->pool, self->blk[1], FAKE_PD(1), &b));
	ASSERT_EQ(0, mrp_attach_pd(self->pool, FAKE_PD(1), ACCESS));
	ASSERT_EQ(0, mrp_lookup(self->pool, self->blk[1], FAKE_PD(1), &b));
	EXPECT_TRUE(fake_mr_covers(FAKE_PD(1), self->blk[1], 4 * MIB, b.lkey, b.rkey));
}

FIXTURE_VARIANT_ADD(held, detach) {
	.what = "a detach", .hold = HOLD_DEREG, .hold_pd = 1,
	.call = HELD_DETACH, .call_pd = 1, .after = detach_after,
};

/*
 * Fallback buffers (MRPOOL_FALLBACK): the pool full, a buffer of
 * FB_SIZE is mapped and registered on its own. Its calls are held, not
 * the arenas' (fake_hold_only_len()).
 */
static void fb_setup(struct __test_metadata *_metadata, FIXTURE_DATA(held) *self)
{
	struct mrp_buf b;
	struct mrp_stats st;

	ASSERT_EQ(0, mrp_alloc(self->pool, FB_SIZE, NULL, &b));
	self->fb = b.addr;
	st = test_stats(self->pool);
	ASSERT_EQ(1, st.fallbacks);
	EXPECT_TRUE(fake_mr_access(FAKE_PD(1), self->fb) >= 0);
}

static void *fb_addr(FIXTURE_DATA(held) *self)
{
	return self->fb;
}

/*
 * fb_alloc: a fallback buffer being made (for PD 1), held in its
 * registration in PD 3 (PD 1's and PD 2's made before). Released, it is
 * served with PD 1's keys; PD 3 has it too; PD 2, marked dead meanwhile,
 * gives none.
 */
static void fb_alloc_setup(struct __test_metadata *_metadata, FIXTURE_DATA(held) *self)
{
	ASSERT_EQ(0, mrp_attach_pd(self->pool, FAKE_PD(3), ACCESS));
}

static void fb_alloc_after(struct __test_metadata *_metadata, FIXTURE_DATA(held) *self)
{
	struct mrp_stats st;
	struct mrp_buf b;

	ASSERT_EQ(0, self->h.ret);
	self->fb = self->h.buf.addr;
	st = test_stats(self->pool);
	EXPECT_EQ(1, st.fallbacks);
	EXPECT_EQ(FB_SIZE, st.fallback_bytes);
	EXPECT_TRUE(fake_mr_covers(FAKE_PD(1), self->fb, FB_SIZE, self->h.buf.lkey,
				   self->h.buf.rkey));
	ASSERT_EQ(0, mrp_lookup(self->pool, self->fb, FAKE_PD(3), &b));
	EXPECT_TRUE(fake_mr_covers(FAKE_PD(3), self->fb, FB_SIZE, b.lkey, b.rkey));
	EXPECT_EQ(-ENODEV, mrp_lookup(self->pool, self->fb, FAKE_PD(2), &b));
	EXPECT_EQ(0, mrp_detach_pd(self->pool, FAKE_PD(3)));
	EXPECT_EQ(-1, fake_mr_access(FAKE_PD(3), self->fb));
}

FIXTURE_VARIANT_ADD(held, fb_alloc) {
	.what = "a fallback buffer's registration", .fallback = true,
	.hold = HOLD_REG, .hold_pd = 3, .hold_fb = true,
	.call = HELD_ALLOC, .call_pd = 1, .call_size = FB_SIZE,
	.setup = fb_alloc_setup, .after = fb_alloc_after,
};

/*
 * fb_lookup: a fallback buffer PD 1 refused when it was made, its keys
 * asked for by mrp_lookup(), held in that lazy registration; a second
 * lookup waits for its MR (counted), both get its keys.
 */
static void fb_lookup_setup_refused(struct __test_metadata *_metadata,
				    FIXTURE_DATA(held) *self)
{
	struct mrp_buf b;

	fake_fail_pd = FAKE_PD(1);
	ASSERT_EQ(0, mrp_alloc(self->pool, FB_SIZE, NULL, &b));
	fake_fail_pd = NULL;
	self->fb = b.addr;
	EXPECT_EQ(-1, fake_mr_access(FAKE_PD(1), self->fb));
	EXPECT_TRUE(fake_mr_access(FAKE_PD(2), self->fb) >= 0);
}

static void fb_lookup_after(struct __test_metadata *_metadata, FIXTURE_DATA(held) *self)
{
	lookups_after(_metadata, self, FB_SIZE);
}

FIXTURE_VARIANT_ADD(held, fb_lookup) {
	.what = "a fallback buffer's lazy registration", .fallback = true,
	.hold = HOLD_REG, .hold_pd = 1, .hold_fb = true,
	.call = HELD_LOOKUP, .call_pd = 1, .setup = fb_lookup_setup_refused,
	.addr = fb_addr, .during = lookup_again, .after = fb_lookup_after,
};

/*
 * fb_attach: an attach of PD 3 held in the registration of a fallback
 * buffer (the arenas' went through). Released, the attach registered the
 * arenas and the buffer unlocked (counted) and the buffer has PD 3's keys.
 */
static void fb_attach_after(struct __test_metadata *_metadata, FIXTURE_DATA(held) *self)
{
	struct mrp_buf b;

	ASSERT_EQ(0, self->h.ret);
	EXPECT_EQ(NBLK + 1, atomic_load(&self->pool->attach_unlocked_regs));
	ASSERT_EQ(0, mrp_lookup(self->pool, self->fb, FAKE_PD(3), &b));
	EXPECT_TRUE(fake_mr_covers(FAKE_PD(3), self->fb, FB_SIZE, b.lkey, b.rkey));
	EXPECT_EQ(0, mrp_detach_pd(self->pool, FAKE_PD(3)));
	EXPECT_EQ(-1, fake_mr_access(FAKE_PD(3), self->fb));
}

FIXTURE_VARIANT_ADD(held, fb_attach) {
	.what = "an attach's registration of a fallback buffer", .fallback = true,
	.hold = HOLD_REG, .hold_pd = 3, .hold_fb = true,
	.call = HELD_ATTACH, .call_pd = 3, .setup = fb_setup,
	.during = attach_refused_again, .after = fb_attach_after,
};

/*
 * fb_free: the free of a fallback buffer held in its deregistration in
 * PD 1. A detach of PD 1 meanwhile waits for that deregistration
 * (counted): the caller may deallocate the PD once it returns. Released,
 * none of the buffer's MRs is left, nor any of PD 1, and its bytes are
 * off the counts.
 */
static void fb_free_after(struct __test_metadata *_metadata, FIXTURE_DATA(held) *self)
{
	struct mrp_stats st = test_stats(self->pool);

	ASSERT_EQ(0, pthread_join(self->h2.thr, NULL));
	EXPECT_EQ(0, self->h2.ret);
	for (int i = 0; i < NBLK; i++)
		EXPECT_EQ(-1, fake_mr_access(FAKE_PD(1), self->blk[i]));
	EXPECT_EQ(0, self->h.ret);
	EXPECT_EQ(-1, fake_mr_access(FAKE_PD(1), self->fb));
	EXPECT_EQ(-1, fake_mr_access(FAKE_PD(2), self->fb));
	EXPECT_EQ(2, st.frees);		/* the buffer's and the passer's blk[0] */
	EXPECT_EQ(0, st.fallback_bytes);
	self->fb = NULL;
}

FIXTURE_VARIANT_ADD(held, fb_free) {
	.what = "a fallback buffer's deregistration by its free", .fallback = true,
	.hold = HOLD_DEREG, .hold_pd = 1, .hold_fb = true,
	.call = HELD_FREE, .setup = fb_setup, .addr = fb_addr,
	.during = detach_waits, .after = fb_free_after,
};

/*
 * fb_detach: a detach of PD 1 held in the deregistration of a fallback
 * buffer's MR (the arenas' went through). Released, no MR of PD 1 is
 * left, the buffer's keys in PD 1 are refused.
 */
static void fb_detach_after(struct __test_metadata *_metadata, FIXTURE_DATA(held) *self)
{
	struct mrp_buf b;

	EXPECT_EQ(0, self->h.ret);
	EXPECT_EQ(-1, fake_mr_access(FAKE_PD(1), self->fb));
	for (int i = 0; i < NBLK; i++)
		EXPECT_EQ(-1, fake_mr_access(FAKE_PD(1), self->blk[i]));
	EXPECT_EQ(-EINVAL, mrp_lookup(self->pool, self->fb, FAKE_PD(1), &b));
}

FIXTURE_VARIANT_ADD(held, fb_detach) {
	.what = "a detach's deregistration of a fallback buffer", .fallback = true,
	.hold = HOLD_DEREG, .hold_pd = 1, .hold_fb = true,
	.call = HELD_DETACH, .call_pd = 1, .setup = fb_setup, .after = fb_detach_after,
};

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
 * A detach of PD 3 while a fallback buffer's registration in PD 3 is held
 * (call: its making for PD 1, or a lookup's lazy registration): the
 * detach waits for it (counted), the caller may deallocate PD 3 once it
 * returns, so no MR of PD 3 is left then; the buffer keeps PD 1's.
 */
static void fb_detach_during_reg(struct __test_metadata *_metadata, enum held_call call)
{
	struct mrp_pool *pool = pool_open_fb(true);
	void *blk[NBLK], *fb = NULL;
	struct holder h, d;
	struct mrp_buf b;
	int live0 = fake_live;

	ASSERT_NE(NULL, pool);
	ASSERT_EQ(0, mrp_attach_pd(pool, FAKE_PD(1), ACCESS));
	ASSERT_EQ(0, alloc_blocks(pool, blk));
	ASSERT_EQ(0, mrp_attach_pd(pool, FAKE_PD(3), ACCESS));
	if (call == HELD_LOOKUP) {
		/* PD 3 refused it: its keys are registered when asked for */
		fake_fail_pd = FAKE_PD(3);
		ASSERT_EQ(0, mrp_alloc(pool, FB_SIZE, FAKE_PD(1), &b));
		fake_fail_pd = NULL;
		fb = b.addr;
		EXPECT_EQ(-1, fake_mr_access(FAKE_PD(3), fb));
	}
	fake_hold(FAKE_PD(3));
	fake_hold_only_len(FB_SIZE);
	if (call == HELD_LOOKUP) {
		ASSERT_EQ(0, holder_start(&h, pool, HELD_LOOKUP, FAKE_PD(3), fb));
	} else {
		ASSERT_EQ(0, holder_start_size(&h, pool, HELD_ALLOC, FAKE_PD(1), NULL,
					       FB_SIZE));
	}
	ASSERT_EQ(0, fake_wait_held(1, HOLD_MS));
	ASSERT_EQ(0, holder_start(&d, pool, HELD_DETACH, FAKE_PD(3), NULL));
	EXPECT_EQ(0, counter_wait(&pool->detach_waits, 1));
	EXPECT_EQ(1, atomic_load(&pool->detach_waits));
	EXPECT_FALSE(atomic_load(&d.done));
	EXPECT_FALSE(atomic_load(&h.done));
	fake_release();
	ASSERT_EQ(0, pthread_join(h.thr, NULL));
	ASSERT_EQ(0, pthread_join(d.thr, NULL));
	EXPECT_EQ(0, d.ret);
	EXPECT_EQ(0, h.ret);
	if (call == HELD_ALLOC)
		fb = h.buf.addr;
	EXPECT_EQ(-1, fake_mr_access(FAKE_PD(3), fb));
	EXPECT_EQ(-EINVAL, mrp_lookup(pool, fb, FAKE_PD(3), &b));
	ASSERT_EQ(0, mrp_lookup(pool, fb, FAKE_PD(1), &b));
	EXPECT_TRUE(fake_mr_covers(FAKE_PD(1), fb, FB_SIZE, b.lkey, b.rkey));
	EXPECT_EQ(0, mrp_free(pool, fb));
	for (int i = 0; i < NBLK; i++)
		EXPECT_EQ(0, mrp_free(pool, blk[i]));
	EXPECT_EQ(0, mrp_pool_close(pool));
	EXPECT_EQ(live0, fake_live);
}

TEST(fb_detach_during_alloc_reg)
{
	fb_detach_during_reg(_metadata, HELD_ALLOC);
}

TEST(fb_detach_during_lazy_reg)
{
	fb_detach_during_reg(_metadata, HELD_LOOKUP);
}

/*
 * The free of a fallback buffer while an attach registers it (held): the
 * free waits for that registration (counted) and then deregisters the
 * new MR with the others, once each (the fake verbs abort on a second);
 * meanwhile the passer's calls get through. The attach succeeds, no MR of
 * the buffer is left in any PD.
 */
TEST(fb_free_during_attach_reg)
{
	struct mrp_pool *pool = pool_open_fb(true);
	void *blk[NBLK];
	struct holder h, f;
	struct passer p;
	struct mrp_buf b;
	struct mrp_stats st;
	int live0 = fake_live, got;

	ASSERT_NE(NULL, pool);
	ASSERT_EQ(0, mrp_attach_pd(pool, FAKE_PD(1), ACCESS));
	ASSERT_EQ(0, mrp_attach_pd(pool, FAKE_PD(2), ACCESS));
	ASSERT_EQ(0, alloc_blocks(pool, blk));
	ASSERT_EQ(0, mrp_alloc(pool, FB_SIZE, NULL, &b));
	fake_hold(FAKE_PD(3));
	fake_hold_only_len(FB_SIZE);
	ASSERT_EQ(0, holder_start(&h, pool, HELD_ATTACH, FAKE_PD(3), NULL));
	ASSERT_EQ(0, fake_wait_held(1, HOLD_MS));
	ASSERT_EQ(0, holder_start(&f, pool, HELD_FREE, NULL, b.addr));
	EXPECT_EQ(0, counter_wait(&pool->fb_free_waits, 1));
	got = passer_run(&p, pool, blk[0], FAKE_PD(2));
	EXPECT_EQ(PASSER_OPS, got);
	TH_LOG("%d of %d calls got through while a freed fallback buffer's registration was held",
	       got, PASSER_OPS);
	EXPECT_EQ(1, fake_held());
	EXPECT_FALSE(atomic_load(&f.done));
	EXPECT_FALSE(atomic_load(&h.done));
	fake_release();
	passer_join(&p);
	ASSERT_EQ(0, pthread_join(h.thr, NULL));
	ASSERT_EQ(0, pthread_join(f.thr, NULL));
	EXPECT_EQ(0, h.ret);
	EXPECT_EQ(0, f.ret);
	for (int i = 1; i <= 3; i++)
		EXPECT_EQ(-1, fake_mr_access(FAKE_PD(i), b.addr));
	st = test_stats(pool);
	EXPECT_EQ(0, st.fallback_bytes);
	EXPECT_EQ(-ENOENT, mrp_lookup(pool, b.addr, FAKE_PD(1), &b));
	for (int i = 1; i < NBLK; i++)
		EXPECT_EQ(0, mrp_free(pool, blk[i]));
	EXPECT_EQ(0, mrp_detach_pd(pool, FAKE_PD(2)));
	EXPECT_EQ(0, mrp_detach_pd(pool, FAKE_PD(3)));
	EXPECT_EQ(0, mrp_pool_close(pool));
	EXPECT_EQ(live0, fake_live);
}

/*
 * The free of a fallback buffer while an attach is held at an arena's
 * registration, before it reached the buffer: the free does not wait for
 * the attach, and the attach then finds the buffer gone (registers
 * nothing of it).
 */
TEST(fb_free_during_attach)
{
	struct mrp_pool *pool = pool_open_fb(true);
	void *blk[NBLK];
	struct holder h, f;
	struct timespec ts;
	struct mrp_buf b;
	int live0 = fake_live, joined;

	ASSERT_NE(NULL, pool);
	ASSERT_EQ(0, mrp_attach_pd(pool, FAKE_PD(1), ACCESS));
	ASSERT_EQ(0, alloc_blocks(pool, blk));
	ASSERT_EQ(0, mrp_alloc(pool, FB_SIZE, FAKE_PD(1), &b));
	fake_hold(FAKE_PD(3));
	ASSERT_EQ(0, holder_start(&h, pool, HELD_ATTACH, FAKE_PD(3), NULL));
	ASSERT_EQ(0, fake_wait_held(1, HOLD_MS));
	ASSERT_EQ(0, holder_start(&f, pool, HELD_FREE, NULL, b.addr));
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += HOLD_MS / 1000;
	joined = pthread_timedjoin_np(f.thr, NULL, &ts) == 0;
	EXPECT_TRUE(joined);
	EXPECT_EQ(1, fake_held());
	EXPECT_FALSE(atomic_load(&h.done));
	fake_release();
	if (!joined) {
		ASSERT_EQ(0, pthread_join(f.thr, NULL));
	}
	ASSERT_EQ(0, pthread_join(h.thr, NULL));
	EXPECT_EQ(0, h.ret);
	EXPECT_EQ(0, f.ret);
	EXPECT_EQ(0, atomic_load(&pool->fb_free_waits));
	EXPECT_EQ(-1, fake_mr_access(FAKE_PD(1), b.addr));
	EXPECT_EQ(-1, fake_mr_access(FAKE_PD(3), b.addr));
	EXPECT_EQ(NBLK, atomic_load(&pool->attach_unlocked_regs));
	for (int i = 0; i < NBLK; i++)
		EXPECT_EQ(0, mrp_free(pool, blk[i]));
	EXPECT_EQ(0, mrp_pool_close(pool));
	EXPECT_EQ(live0, fake_live);
}

/*
 * With libibverbs' fork support every ibv_dereg_mr marks its range
 * MADV_DOFORK (fake_dofork_on_dereg). A detach that deregistered a
 * fallback buffer's last MR leaves the buffer so; its free then takes no
 * MR, yet must mark it DONTFORK again before it leaves fb_flight: a fork
 * while the free is held just before its munmap gives the child nothing
 * of the range (the review of 061c6c6: the child could read the buffer).
 */
TEST(fb_free_after_detach_not_inherited)
{
	struct mrp_pool *pool = pool_open_fb(true);
	int live0 = fake_live, st;
	void *blk[NBLK];
	struct holder f;
	struct mrp_buf b;
	pid_t pid;

	ASSERT_NE(NULL, pool);
	ASSERT_EQ(0, mrp_attach_pd(pool, FAKE_PD(1), ACCESS));
	ASSERT_EQ(0, alloc_blocks(pool, blk));
	ASSERT_EQ(0, mrp_alloc(pool, FB_SIZE, FAKE_PD(1), &b));
	ASSERT_EQ(1, test_stats(pool).fallbacks);
	memset(b.addr, 'P', FB_SIZE);
	__atomic_store_n(&fake_dofork_on_dereg, 1, __ATOMIC_RELAXED);
	ASSERT_EQ(0, mrp_detach_pd(pool, FAKE_PD(1)));
	pthread_mutex_lock(&unmap_lock);
	unmap_only = b.addr;
	unmap_hold = true;
	pthread_mutex_unlock(&unmap_lock);
	ASSERT_EQ(0, holder_start(&f, pool, HELD_FREE, NULL, b.addr));
	ASSERT_EQ(0, unmap_wait_held());
	pid = fork();
	if (pid == 0)
		_exit(msync(b.addr, 4096, MS_ASYNC) == 0 ? 1 : 0);	/* 1: mapped */
	ASSERT_LT(0, pid);
	ASSERT_EQ(pid, waitpid(pid, &st, 0));
	unmap_release();
	ASSERT_EQ(0, pthread_join(f.thr, NULL));
	__atomic_store_n(&fake_dofork_on_dereg, 0, __ATOMIC_RELAXED);
	pthread_mutex_lock(&unmap_lock);
	unmap_only = NULL;
	pthread_mutex_unlock(&unmap_lock);
	EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0)
		TH_LOG("status %#x: the child got the freed buffer's range", st);
	EXPECT_EQ(0, f.ret);
	for (int i = 0; i < NBLK; i++)
		EXPECT_EQ(0, mrp_free(pool, blk[i]));
	EXPECT_EQ(0, mrp_pool_close(pool));
	EXPECT_EQ(live0, fake_live);
}

TEST_HARNESS_MAIN
