// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Host unit tests of the reclaim of idle threads' caches: the pool thread
 * (or mrp_trim() without one) returns the buffers of threads that stopped
 * calling so that their arenas can be trimmed, mrp_thread_flush() does it
 * for the calling thread, and a thread that resumes while its cache is
 * being reclaimed never gets a buffer someone else holds. Some tests force
 * passes whatever the idle time with mrp_tcaches_reclaim_now(), internal
 * (internal.h, the static library): exact counts, and a stress of passes
 * against threads that never stop. Waits are polls with a generous bound:
 * nothing here asserts how long anything takes.
 */
#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>

#include "kselftest_harness.h"
#include "internal.h"
#include "helpers.h"

#define WAIT_MS		20000	/* bound of every poll */

/* Poll the stats until the pool has no arena, or WAIT_MS; with_trim: no pool thread. */
static struct mrp_stats wait_no_arena(struct mrp_pool *pool, int with_trim)
{
	uint64_t t0 = now_ms();
	struct mrp_stats st;

	for (;;) {
		if (with_trim)
			mrp_trim(pool, 0);
		st = test_stats(pool);
		if (!st.arenas || now_ms() - t0 > WAIT_MS)
			return st;
		sleep_ms(10);
	}
}

/* Each buffer carries its owner and a serial at both ends. */
static void mark(const struct mrp_buf *b, uint32_t owner, uint32_t serial)
{
	uint64_t v = (uint64_t)owner << 32 | serial;

	memcpy(b->addr, &v, sizeof(v));
	memcpy((char *)b->addr + b->size - sizeof(v), &v, sizeof(v));
}

static int marked(const struct mrp_buf *b, uint32_t owner, uint32_t serial)
{
	uint64_t v = (uint64_t)owner << 32 | serial, head, tail;

	memcpy(&head, b->addr, sizeof(head));
	memcpy(&tail, (char *)b->addr + b->size - sizeof(tail), sizeof(tail));
	return head == v && tail == v;
}

enum { NBUF = 48 };

struct idler {
	struct mrp_pool *pool;
	pthread_barrier_t *step;
	uint32_t id;
	int errors;
};

/* Sizes of three classes, so that several bins of each cache hold buffers. */
static size_t idler_size(int i)
{
	return (size_t)4096 << (i % 3 * 2);	/* 4K, 16K, 64K */
}

/*
 * Fill the cache (alloc, mark, free), go idle until the main thread has
 * seen the reclaim, then use the pool again: allocations after the
 * reclaim work and hand out buffers no other thread holds.
 */
static void *cache_then_idle(void *arg)
{
	struct idler *w = arg;
	struct mrp_buf b[NBUF], held[3];

	for (int i = 0; i < NBUF; i++)
		if (mrp_alloc(w->pool, idler_size(i), NULL, &b[i]))
			w->errors++;
	for (int i = 0; i < 3; i++) {
		held[i] = b[i];
		mark(&held[i], w->id, (uint32_t)i);
	}
	for (int i = 3; i < NBUF; i++)
		if (mrp_free(w->pool, b[i].addr))
			w->errors++;
	/* the held ones go back before the idle wait: then nothing is in use */
	for (int i = 0; i < 3; i++) {
		if (!marked(&held[i], w->id, (uint32_t)i) || mrp_free(w->pool, held[i].addr))
			w->errors++;
	}
	pthread_barrier_wait(w->step);	/* cached */
	pthread_barrier_wait(w->step);	/* reclaimed: resume */
	for (int i = 0; i < NBUF; i++) {
		if (mrp_alloc(w->pool, idler_size(i), NULL, &b[i])) {
			w->errors++;
			continue;
		}
		mark(&b[i], w->id, (uint32_t)i);
	}
	for (int i = 0; i < NBUF; i++)
		if (b[i].addr && (!marked(&b[i], w->id, (uint32_t)i) ||
				  mrp_free(w->pool, b[i].addr)))
			w->errors++;
	return NULL;
}

/* Threads that cache buffers then block: run them, wait for the reclaim, resume. */
static void idle_threads(struct __test_metadata *_metadata, int background)
{
	enum { NT = 8 };
	struct mrp_pool_attr a = {
		.comp_mask = MRP_POOL_ATTR_BACKGROUND | MRP_POOL_ATTR_TRIM_DELAY |
			     MRP_POOL_ATTR_ARENA_SIZE,
		.background = background, .trim_delay_ms = 100, .arena_size = 2 << 20,
	};
	struct mrp_pool *pool = test_pool(&a);
	pthread_barrier_t step;
	struct idler w[NT];
	pthread_t t[NT];
	struct mrp_stats st;

	NEED_MEMBARRIER();
	ASSERT_NE(NULL, pool);
	ASSERT_EQ(0, pthread_barrier_init(&step, NULL, NT + 1));
	for (int i = 0; i < NT; i++) {
		w[i] = (struct idler){ .pool = pool, .step = &step, .id = (uint32_t)i + 1 };
		ASSERT_EQ(0, pthread_create(&t[i], NULL, cache_then_idle, &w[i]));
	}
	pthread_barrier_wait(&step);
	st = test_stats(pool);
	EXPECT_EQ(0, st.bytes_in_use);
	/* the idle caches pin arenas (not asserted: a stalled host may reclaim first) */
	TH_LOG("idle: %llu arenas, %llu bytes mapped",
	       (unsigned long long)st.arenas, (unsigned long long)st.bytes_mapped);

	st = wait_no_arena(pool, !background);
	EXPECT_EQ(0, st.arenas);
	EXPECT_EQ(0, st.bytes_mapped);
	EXPECT_EQ(0, st.bytes_locked);
	EXPECT_LE(NT, st.tcache_reclaims);	/* every idle cache */
	EXPECT_EQ(0, st.double_frees);

	pthread_barrier_wait(&step);
	for (int i = 0; i < NT; i++) {
		ASSERT_EQ(0, pthread_join(t[i], NULL));
		EXPECT_EQ(0, w[i].errors);
	}
	st = test_stats(pool);
	EXPECT_EQ(st.allocs, st.frees);
	EXPECT_EQ(0, st.bytes_in_use);
	EXPECT_EQ(0, st.double_frees);
	pthread_barrier_destroy(&step);
	EXPECT_EQ(0, mrp_pool_close(pool));
}

/*
 * Eight threads cache buffers and go idle, alive: the pool thread returns
 * their caches and trims every arena; then they resume.
 */
TEST(idle_threads_background)
{
	idle_threads(_metadata, 1);
}

/* Without a pool thread, mrp_trim() reclaims the caches of idle threads. */
TEST(idle_threads_trim)
{
	idle_threads(_metadata, 0);
}

/* A busy thread's cache is not reclaimed: its arenas stay. */
TEST(busy_not_reclaimed)
{
	struct mrp_pool_attr a = {
		.comp_mask = MRP_POOL_ATTR_TRIM_DELAY, .trim_delay_ms = 60000,
	};
	struct mrp_pool *pool = test_pool(&a);
	struct mrp_stats st;
	struct mrp_buf b;

	ASSERT_NE(NULL, pool);
	ASSERT_EQ(0, mrp_alloc(pool, 8192, NULL, &b));
	ASSERT_EQ(0, mrp_free(pool, b.addr));
	/* idle for far less than the delay */
	for (int i = 0; i < 3; i++)
		EXPECT_EQ(0, mrp_trim(pool, 0));
	st = test_stats(pool);
	EXPECT_EQ(1, st.arenas);
	EXPECT_EQ(0, st.tcache_reclaims);
	EXPECT_EQ(0, mrp_pool_close(pool));
}

/* mrp_thread_flush() hands the caller's cached buffers to the depot. */
TEST(thread_flush)
{
	struct mrp_pool *pool = test_pool(NULL);
	struct mrp_buf b[40], c;
	struct mrp_stats st;

	ASSERT_NE(NULL, pool);
	EXPECT_EQ(-EINVAL, mrp_thread_flush(NULL));
	EXPECT_EQ(0, mrp_thread_flush(pool));	/* no cache yet */
	for (int i = 0; i < 40; i++)
		ASSERT_EQ(0, mrp_alloc(pool, i & 1 ? 8192 : 65536, NULL, &b[i]));
	for (int i = 0; i < 40; i++)
		ASSERT_EQ(0, mrp_free(pool, b[i].addr));
	st = test_stats(pool);
	EXPECT_EQ(0, st.bytes_in_use);
	EXPECT_EQ(2, st.arenas);
	/* cached buffers keep both arenas busy */
	EXPECT_EQ(0, mrp_trim(pool, 0));
	EXPECT_EQ(0, mrp_thread_flush(pool));
	EXPECT_EQ(2, mrp_trim(pool, 0));
	st = test_stats(pool);
	EXPECT_EQ(0, st.arenas);
	EXPECT_EQ(0, st.bytes_mapped);
	EXPECT_EQ(2, st.arenas_trimmed);
	EXPECT_EQ(0, st.tcache_reclaims);	/* flushes are not reclaims */
	/* the cache refills as before */
	ASSERT_EQ(0, mrp_alloc(pool, 8192, NULL, &c));
	ASSERT_EQ(0, mrp_free(pool, c.addr));
	ASSERT_EQ(0, mrp_alloc(pool, 8192, NULL, &b[0]));
	EXPECT_EQ(c.addr, b[0].addr);
	ASSERT_EQ(0, mrp_free(pool, b[0].addr));
	st = test_stats(pool);
	EXPECT_EQ(st.allocs, st.frees);
	EXPECT_EQ(0, mrp_pool_close(pool));
}

/* A flush of another pool's slot, or twice, is harmless. */
TEST(thread_flush_other_pool)
{
	struct mrp_pool *p1 = test_pool(NULL), *p2 = test_pool(NULL);
	struct mrp_buf b;

	ASSERT_NE(NULL, p1);
	ASSERT_NE(NULL, p2);
	ASSERT_EQ(0, mrp_alloc(p1, 4096, NULL, &b));
	ASSERT_EQ(0, mrp_free(p1, b.addr));
	EXPECT_EQ(0, mrp_thread_flush(p2));
	EXPECT_EQ(0, mrp_trim(p1, 0));		/* p1's cache untouched */
	EXPECT_EQ(0, mrp_thread_flush(p1));
	EXPECT_EQ(0, mrp_thread_flush(p1));
	EXPECT_EQ(1, mrp_trim(p1, 0));
	EXPECT_EQ(0, mrp_pool_close(p1));
	EXPECT_EQ(0, mrp_pool_close(p2));
}

struct racer {
	struct mrp_pool *pool;
	pthread_barrier_t *step;
	uint32_t id;
	unsigned int seed;
	int errors;
};

/*
 * Bursts of allocations (every buffer marked with its owner), checks and
 * frees, separated by short random pauses, some buffers held across them:
 * the pool thread reclaims the cache in a pause, often just as the next
 * burst starts. A buffer handed out twice shows as a mark overwritten.
 */
static void *burst_and_pause(void *arg)
{
	enum { HELD = 4, BURST = 24, ROUNDS = 150 };
	struct racer *w = arg;
	struct mrp_buf held[HELD], b[BURST];
	uint32_t serial = 0, hs[HELD];

	for (int i = 0; i < HELD; i++) {
		if (mrp_alloc(w->pool, 8192, NULL, &held[i])) {
			w->errors++;
			return NULL;
		}
		hs[i] = serial++;
		mark(&held[i], w->id, hs[i]);
	}
	pthread_barrier_wait(w->step);
	for (int r = 0; r < ROUNDS; r++) {
		int n = 1 + (int)(rand_r(&w->seed) % BURST);
		int h = (int)(rand_r(&w->seed) % HELD);

		for (int i = 0; i < n; i++) {
			if (mrp_alloc(w->pool, i & 1 ? 8192 : 4096, NULL, &b[i])) {
				w->errors++;
				b[i].addr = NULL;
				continue;
			}
			mark(&b[i], w->id, serial + (uint32_t)i);
		}
		/* swap one held buffer: frees and allocations across pauses */
		if (!marked(&held[h], w->id, hs[h]) || mrp_free(w->pool, held[h].addr))
			w->errors++;
		if (mrp_alloc(w->pool, 8192, NULL, &held[h]))
			w->errors++;
		hs[h] = serial + BURST;
		mark(&held[h], w->id, hs[h]);
		for (int i = 0; i < n; i++)
			if (b[i].addr && (!marked(&b[i], w->id, serial + (uint32_t)i) ||
					  mrp_free(w->pool, b[i].addr)))
				w->errors++;
		serial += BURST + 1;
		if (rand_r(&w->seed) % 4)
			sleep_ms((int)(rand_r(&w->seed) % 12));
	}
	for (int i = 0; i < HELD; i++)
		if (!marked(&held[i], w->id, hs[i]) || mrp_free(w->pool, held[i].addr))
			w->errors++;
	return NULL;
}

/*
 * Reclaims race threads that resume allocating (trim delay 0: any pause
 * the pool thread sees is idle): no buffer is handed out twice, counts
 * add up, and the race was exercised.
 */
TEST(reclaim_races_resume)
{
	enum { NT = 4 };
	struct mrp_pool_attr a = {
		.comp_mask = MRP_POOL_ATTR_BACKGROUND | MRP_POOL_ATTR_TRIM_DELAY |
			     MRP_POOL_ATTR_TCACHE_BYTES,
		.background = 1, .trim_delay_ms = 0, .tcache_bytes = 64 << 10,
	};
	struct mrp_pool *pool = test_pool(&a);
	pthread_barrier_t step;
	struct racer w[NT];
	pthread_t t[NT];
	struct mrp_stats st;
	uint64_t t0;

	NEED_MEMBARRIER();
	ASSERT_NE(NULL, pool);
	ASSERT_EQ(0, pthread_barrier_init(&step, NULL, NT));
	for (int i = 0; i < NT; i++) {
		w[i] = (struct racer){ .pool = pool, .step = &step,
				       .id = (uint32_t)i + 1, .seed = (unsigned int)i * 7919u + 1 };
		ASSERT_EQ(0, pthread_create(&t[i], NULL, burst_and_pause, &w[i]));
	}
	for (int i = 0; i < NT; i++) {
		ASSERT_EQ(0, pthread_join(t[i], NULL));
		EXPECT_EQ(0, w[i].errors);
	}
	st = test_stats(pool);
	TH_LOG("%llu reclaims during %llu allocations",
	       (unsigned long long)st.tcache_reclaims, (unsigned long long)st.allocs);
	EXPECT_EQ(st.allocs, st.frees);
	EXPECT_EQ(0, st.bytes_in_use);
	EXPECT_EQ(0, st.double_frees);
	/* the exited threads' caches went back; ours holds nothing */
	t0 = now_ms();
	while (st.tcache_reclaims == 0 && now_ms() - t0 < WAIT_MS) {
		/* pauses too short on this host: one more thread that idles */
		struct mrp_buf b;

		ASSERT_EQ(0, mrp_alloc(pool, 4096, NULL, &b));
		ASSERT_EQ(0, mrp_free(pool, b.addr));
		sleep_ms(50);
		st = test_stats(pool);
	}
	EXPECT_LT(0, st.tcache_reclaims);
	pthread_barrier_destroy(&step);
	EXPECT_EQ(0, mrp_pool_close(pool));
}

/*
 * What mrp_free()'s fast path does when it read end before a reclaim
 * stored 0 there: the push lands above what the reclaim took.
 */
static void free_in_flight(struct mrp_pool *pool, void *addr)
{
	struct mrp_arena *a = mrp_arena_of((uintptr_t)addr);
	struct mrp_bin *bin = &mrp_tls[pool->idx]->bins[a->cls];
	uintptr_t t = atomic_load_explicit(&bin->top, memory_order_relaxed);

	((struct mrp_ent *)t)->p = addr;
	((struct mrp_ent *)t)->a = a;
	atomic_store_explicit(&bin->top, t + sizeof(struct mrp_ent), memory_order_release);
	mrp_inc(&bin->frees);
}

struct counted {
	struct mrp_pool *pool;
	pthread_barrier_t *step;
	int late;		/* hold one buffer, free it "in flight" */
	int errors;
};

/* Cache buffers, idle through the reclaims, then use the pool again. */
static void *cache_and_wait(void *arg)
{
	struct counted *w = arg;
	struct mrp_buf b[8], late;

	for (int i = 0; i < 8; i++)
		if (mrp_alloc(w->pool, 8192, NULL, &b[i]))
			w->errors++;
	if (mrp_alloc(w->pool, 8192, NULL, &late))
		w->errors++;
	for (int i = 0; i < 8; i++)
		if (mrp_free(w->pool, b[i].addr))
			w->errors++;
	if (!w->late && mrp_free(w->pool, late.addr))
		w->errors++;
	pthread_barrier_wait(w->step);	/* cached */
	pthread_barrier_wait(w->step);	/* reclaimed */
	if (w->late)
		free_in_flight(w->pool, late.addr);
	pthread_barrier_wait(w->step);	/* pushed */
	pthread_barrier_wait(w->step);	/* swept: resume */
	for (int i = 0; i < 8; i++)
		if (mrp_alloc(w->pool, 8192, NULL, &b[i]))
			w->errors++;
	for (int i = 0; i < 8; i++)
		if (mrp_free(w->pool, b[i].addr))
			w->errors++;
	return NULL;
}

/*
 * tcache_reclaims counts each idle period of a cache once: passes over a
 * cache already reclaimed add nothing, even when they take what a free in
 * flight pushed there after the reclaim.
 */
TEST(reclaims_counted_once)
{
	enum { NT = 4 };
	struct mrp_pool_attr a = {
		.comp_mask = MRP_POOL_ATTR_TRIM_DELAY, .trim_delay_ms = 600000,
	};
	struct mrp_pool *pool = test_pool(&a);
	pthread_barrier_t step;
	struct counted w[NT];
	pthread_t t[NT];
	struct mrp_stats st;

	NEED_MEMBARRIER();
	ASSERT_NE(NULL, pool);
	ASSERT_EQ(0, pthread_barrier_init(&step, NULL, NT + 1));
	for (int i = 0; i < NT; i++) {
		w[i] = (struct counted){ .pool = pool, .step = &step, .late = i == 0 };
		ASSERT_EQ(0, pthread_create(&t[i], NULL, cache_and_wait, &w[i]));
	}
	pthread_barrier_wait(&step);
	EXPECT_EQ(NT, mrp_tcaches_reclaim_now(pool));
	EXPECT_EQ(0, mrp_tcaches_reclaim_now(pool));
	EXPECT_EQ(NT, test_stats(pool).tcache_reclaims);
	pthread_barrier_wait(&step);
	pthread_barrier_wait(&step);
	/* the late free's buffer goes too, and the count stays */
	EXPECT_EQ(0, mrp_tcaches_reclaim_now(pool));
	EXPECT_EQ(1, mrp_trim(pool, 0));	/* nothing cached, nothing in use */
	st = test_stats(pool);
	EXPECT_EQ(NT, st.tcache_reclaims);
	EXPECT_EQ(0, st.bytes_in_use);
	pthread_barrier_wait(&step);
	for (int i = 0; i < NT; i++) {
		ASSERT_EQ(0, pthread_join(t[i], NULL));
		EXPECT_EQ(0, w[i].errors);
	}
	st = test_stats(pool);
	EXPECT_EQ(NT, st.tcache_reclaims);	/* resuming counts nothing */
	EXPECT_EQ(st.allocs, st.frees);
	EXPECT_EQ(0, st.bytes_in_use);
	EXPECT_EQ(0, st.double_frees);
	pthread_barrier_destroy(&step);
	EXPECT_EQ(0, mrp_pool_close(pool));
}

/* What the stress test's threads share. */
struct stress {
	struct mrp_pool *pool;
	struct mrp_pdh *h;		/* allocate through this PD handle, if set */
	_Atomic int stop;
	_Atomic uint32_t started, done;	/* forced passes begun, ended */
};

struct churner {
	struct stress *s;
	uint32_t id;
	unsigned int seed;
	_Atomic uint64_t beats;		/* progress: the reclaimer paces on it */
	uint64_t allocs;
	int errors;
};

/* Check a held buffer's stamp, free it. */
static void churn_free(struct churner *w, struct mrp_buf *b, uint32_t serial)
{
	if (b->addr && (!marked(b, w->id, serial) || mrp_free(w->s->pool, b->addr)))
		w->errors++;
	b->addr = NULL;
}

/*
 * Allocate and free without pause until told to stop, keeping a window of
 * buffers of three classes, each stamped with its owner and a serial and
 * checked before its free; now and then the whole window goes back at
 * once, which fills the cache. Every few passes the thread sits out one
 * whole pass, which then takes its cache for sure (a busy owner mostly
 * takes its cache back before the take), and resumes. A buffer handed out
 * twice, or taken from a cache just as its owner popped it, shows as a
 * stamp overwritten.
 */
static void *churn(void *arg)
{
	enum { HOLD = 16 };
	struct churner *w = arg;
	struct stress *s = w->s;
	struct mrp_buf held[HOLD];
	uint32_t hs[HOLD], serial = 0, pause = 1 + rand_r(&w->seed) % 16;

	memset(held, 0, sizeof(held));
	while (!atomic_load(&s->stop)) {
		uint32_t p = atomic_load(&s->started);
		int i;

		if (p >= pause) {
			/* read the count, then beat: the pass this beat paces is later */
			atomic_fetch_add(&w->beats, 1);
			while (atomic_load(&s->done) <= p && !atomic_load(&s->stop))
				sched_yield();
			pause = p + 4 + rand_r(&w->seed) % 16;
			continue;
		}
		i = (int)(rand_r(&w->seed) % HOLD);
		churn_free(w, &held[i], hs[i]);
		if (rand_r(&w->seed) % 64 == 0)
			for (int j = 0; j < HOLD; j++)
				churn_free(w, &held[j], hs[j]);
		if (s->h ? mrp_alloc_pdh(s->pool, idler_size((int)serial), s->h, &held[i]) :
			   mrp_alloc(s->pool, idler_size((int)serial), NULL, &held[i])) {
			w->errors++;
			held[i].addr = NULL;
			continue;
		}
		if (s->h && !held[i].lkey)
			w->errors++;	/* counted, and freed as any other */
		hs[i] = serial++;
		mark(&held[i], w->id, hs[i]);
		atomic_fetch_add_explicit(&w->beats, 1, memory_order_relaxed);
		/* let the reclaimer in where threads run one at a time (valgrind) */
		if (++w->allocs % 128 == 0)
			sched_yield();
	}
	for (int i = 0; i < HOLD; i++)
		churn_free(w, &held[i], hs[i]);
	return NULL;
}

struct reclaimer {
	struct stress *s;
	struct churner *w;
	int nw, passes;
	long reclaims;
};

static uint64_t beats(const struct reclaimer *r)
{
	uint64_t n = 0;

	for (int i = 0; i < r->nw; i++)
		n += atomic_load_explicit(&r->w[i].beats, memory_order_relaxed);
	return n;
}

/*
 * Forced reclaim passes (and now and then a trim), each after some
 * progress of the churners however slowly they run here; then stop them.
 */
static void *reclaim_loop(void *arg)
{
	struct reclaimer *r = arg;
	struct stress *s = r->s;
	uint64_t seen = 0;

	for (int i = 0; i < r->passes; i++) {
		while (beats(r) == seen)
			sched_yield();
		seen = beats(r);
		atomic_fetch_add(&s->started, 1);
		r->reclaims += mrp_tcaches_reclaim_now(s->pool);
		if (i % 16 == 15)
			mrp_trim(s->pool, 0);
		atomic_fetch_add(&s->done, 1);
	}
	atomic_store(&s->stop, 1);
	return NULL;
}

/*
 * Threads allocate and free continuously while another one forces reclaim
 * passes over their caches, a bounded number: no buffer is handed out
 * twice (stamps, and in debug mode the library's own check), none is lost
 * (all come back: every arena can be trimmed at the end), and every
 * reclaim is counted once.
 */
static void stress(struct __test_metadata *_metadata, int debug, int pdh)
{
	enum { NT = 3, PASSES = 500 };
	struct mrp_pool_attr a = {
		.comp_mask = MRP_POOL_ATTR_TRIM_DELAY | MRP_POOL_ATTR_ARENA_SIZE,
		.trim_delay_ms = 600000, .arena_size = 2 << 20,
	};
	struct stress s = { 0 };
	struct churner w[NT];
	struct reclaimer r = { .s = &s, .w = w, .nw = NT, .passes = PASSES };
	pthread_t t[NT], rt;
	struct mrp_stats st;
	uint64_t allocs = 0;

	NEED_MEMBARRIER();
	if (debug)
		ASSERT_EQ(0, setenv("MRPOOL_DEBUG", "1", 1));
	s.pool = test_pool(&a);
	ASSERT_NE(NULL, s.pool);
	if (pdh) {
		ASSERT_EQ(0, mrp_attach_pd(s.pool, FAKE_PD(1), IBV_ACCESS_LOCAL_WRITE));
		s.h = mrp_pd_handle(s.pool, FAKE_PD(1));
		ASSERT_NE(NULL, s.h);
	}
	for (int i = 0; i < NT; i++) {
		w[i] = (struct churner){ .s = &s, .id = (uint32_t)i + 1,
					 .seed = (unsigned int)i * 104729u + 7 };
		ASSERT_EQ(0, pthread_create(&t[i], NULL, churn, &w[i]));
	}
	ASSERT_EQ(0, pthread_create(&rt, NULL, reclaim_loop, &r));
	ASSERT_EQ(0, pthread_join(rt, NULL));
	for (int i = 0; i < NT; i++) {
		ASSERT_EQ(0, pthread_join(t[i], NULL));
		EXPECT_EQ(0, w[i].errors);
		allocs += w[i].allocs;
	}
	st = test_stats(s.pool);
	TH_LOG("%ld caches reclaimed in %d passes, %llu allocations",
	       r.reclaims, PASSES, (unsigned long long)allocs);
	EXPECT_LT(0, r.reclaims);
	EXPECT_EQ(r.reclaims, st.tcache_reclaims);
	EXPECT_EQ(allocs, st.allocs);
	EXPECT_EQ(st.allocs, st.frees);
	EXPECT_EQ(0, st.bytes_in_use);
	EXPECT_EQ(0, st.double_frees);
	/* the churners' caches went back when they exited: nothing is held */
	mrp_trim(s.pool, 0);
	st = test_stats(s.pool);
	EXPECT_EQ(0, st.arenas);
	EXPECT_EQ(0, st.bytes_mapped);
	EXPECT_EQ(0, mrp_pool_close(s.pool));
}

TEST(reclaim_stress)
{
	stress(_metadata, 0, 0);
}

/* The same in debug mode, which checks every hand-out and free itself. */
TEST(reclaim_stress_debug)
{
	stress(_metadata, 1, 0);
}

/* The same through a PD handle (mrp_alloc_pdh's own fast path), with keys. */
TEST(reclaim_stress_pdh)
{
	stress(_metadata, 0, 1);
}

/* Make membarrier() fail with EPERM in this process, as a seccomp policy may. */
static int deny_membarrier(void)
{
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_membarrier, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = { .len = ARRAY_SIZE(f), .filter = f };

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))
		return -errno;
	return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) ? -errno : 0;
}

/*
 * Without membarrier (denied before the first pool opens) the idle reclaim
 * is off: an idle cache keeps its buffers, forced passes included, and
 * mrp_thread_flush() still returns them.
 */
TEST(no_membarrier)
{
	struct mrp_pool_attr a = {
		.comp_mask = MRP_POOL_ATTR_TRIM_DELAY, .trim_delay_ms = 0,
	};
	struct mrp_pool *pool;
	struct mrp_stats st;
	struct mrp_buf b;
	int ret;

	ret = deny_membarrier();
	if (ret)
		SKIP(return, "cannot install a seccomp filter: %s", strerror(-ret));
	pool = test_pool(&a);
	ASSERT_NE(NULL, pool);
	EXPECT_EQ(-EPERM, mrp_os_membarrier_register());
	ASSERT_EQ(0, mrp_alloc(pool, 8192, NULL, &b));
	ASSERT_EQ(0, mrp_free(pool, b.addr));
	for (int i = 0; i < 3; i++) {
		EXPECT_EQ(0, mrp_tcaches_reclaim_now(pool));
		EXPECT_EQ(0, mrp_trim(pool, 0));	/* idle, but cached */
	}
	st = test_stats(pool);
	EXPECT_EQ(1, st.arenas);
	EXPECT_EQ(0, st.tcache_reclaims);
	EXPECT_EQ(0, mrp_thread_flush(pool));
	EXPECT_EQ(1, mrp_trim(pool, 0));
	/* the cache works as before */
	ASSERT_EQ(0, mrp_alloc(pool, 8192, NULL, &b));
	ASSERT_EQ(0, mrp_free(pool, b.addr));
	EXPECT_EQ(0, mrp_pool_close(pool));
}

/* Kill the process on membarrier(), as a strict seccomp policy may. */
static int kill_on_membarrier(void)
{
#ifdef SECCOMP_RET_KILL_PROCESS
	const unsigned int kill = SECCOMP_RET_KILL_PROCESS;
#else
	const unsigned int kill = SECCOMP_RET_KILL;
#endif
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_membarrier, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, kill),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = { .len = ARRAY_SIZE(f), .filter = f };

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))
		return -errno;
	return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) ? -errno : 0;
}

/*
 * With idle_reclaim 0 (attribute or MRPOOL_IDLE_RECLAIM=0) the pool never
 * calls membarrier(): under a filter that kills on it, the pool opens,
 * serves, trims, flushes and closes; forced and trim passes take nothing.
 */
static void no_idle_reclaim(struct __test_metadata *_metadata, int use_env)
{
	struct mrp_pool_attr a = {
		.comp_mask = MRP_POOL_ATTR_TRIM_DELAY, .trim_delay_ms = 0,
	};
	struct mrp_pool *pool;
	struct mrp_stats st;
	struct mrp_buf b;
	int ret;

	if (use_env) {
		ASSERT_EQ(0, setenv("MRPOOL_IDLE_RECLAIM", "0", 1));
	} else {
		a.comp_mask |= MRP_POOL_ATTR_IDLE_RECLAIM;
		a.idle_reclaim = 0;
	}
	ret = kill_on_membarrier();
	if (ret)
		SKIP(return, "cannot install a seccomp filter: %s", strerror(-ret));
	pool = test_pool(&a);
	ASSERT_NE(NULL, pool);
	ASSERT_EQ(0, mrp_alloc(pool, 8192, NULL, &b));
	ASSERT_EQ(0, mrp_free(pool, b.addr));
	for (int i = 0; i < 3; i++) {
		EXPECT_EQ(0, mrp_tcaches_reclaim_now(pool));
		EXPECT_EQ(0, mrp_trim(pool, 0));	/* idle, but cached */
	}
	st = test_stats(pool);
	EXPECT_EQ(1, st.arenas);
	EXPECT_EQ(0, st.tcache_reclaims);
	EXPECT_EQ(0, mrp_thread_flush(pool));
	EXPECT_EQ(1, mrp_trim(pool, 0));
	ASSERT_EQ(0, mrp_alloc(pool, 8192, NULL, &b));
	ASSERT_EQ(0, mrp_free(pool, b.addr));
	EXPECT_EQ(0, mrp_pool_close(pool));
}

TEST(idle_reclaim_off_attr)
{
	no_idle_reclaim(_metadata, 0);
}

TEST(idle_reclaim_off_env)
{
	no_idle_reclaim(_metadata, 1);
}

/* The filter above does kill: the default pool registers at open. */
TEST_SIGNAL(idle_reclaim_on_killed, SIGSYS)
{
	int ret = kill_on_membarrier();

	if (ret)
		SKIP(raise(SIGSYS), "cannot install a seccomp filter: %s", strerror(-ret));
	test_pool(NULL);
}

/* The attribute wins over the variable; a malformed variable fails the open. */
TEST(idle_reclaim_attr_over_env)
{
	struct mrp_pool_attr a = {
		.comp_mask = MRP_POOL_ATTR_IDLE_RECLAIM, .idle_reclaim = 1,
	};
	struct mrp_pool *pool;
	struct mrp_buf b;

	NEED_MEMBARRIER();
	ASSERT_EQ(0, setenv("MRPOOL_IDLE_RECLAIM", "0", 1));
	pool = test_pool(&a);
	ASSERT_NE(NULL, pool);
	ASSERT_EQ(0, mrp_alloc(pool, 8192, NULL, &b));
	ASSERT_EQ(0, mrp_free(pool, b.addr));
	EXPECT_EQ(1, mrp_tcaches_reclaim_now(pool));
	EXPECT_EQ(1, test_stats(pool).tcache_reclaims);
	EXPECT_EQ(0, mrp_pool_close(pool));
	ASSERT_EQ(0, setenv("MRPOOL_IDLE_RECLAIM", "2", 1));
	EXPECT_EQ(NULL, test_pool(NULL));
}

TEST_HARNESS_MAIN
