// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Concurrency: threads sharing one file and processes with their own
 * files allocate, map, touch, unmap and free at the same time; racing
 * FREEs of the same ids succeed exactly once. Counters must add up.
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/wait.h>

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
#include "kselftest_harness.h"
#pragma GCC diagnostic pop
/*
 * The harness wraps each test in setjmp(); after a longjmp it only runs
 * the teardown, so no local of a test body is read again.
 */
#pragma GCC diagnostic ignored "-Wclobbered"

#include "pool_util.h"

#define ITERS		150
#define NTHREADS	2
#define NPROCS		2
#define NIDS		64

struct worker {
	int fd;
	uint64_t chunk;
	unsigned int seed;
	long ops;		/* slices allocated and freed */
	long nomem;		/* ALLOCs refused at max_mb: allowed */
	long errors;		/* anything else: a failure */
};

static void *work(void *arg)
{
	struct worker *w = arg;
	struct mrpool_alloc a;
	uint32_t *p;
	int i, ret;

	for (i = 0; i < ITERS; i++) {
		uint64_t bytes = (1 + rand_r(&w->seed) % 3) * w->chunk;

		ret = pool_alloc(w->fd, bytes, &a);
		if (ret == -ENOMEM) {
			w->nomem++;
			continue;
		}
		if (ret) {
			w->errors++;
			continue;
		}
		p = pool_map(w->fd, &a);
		if (p == MAP_FAILED) {
			w->errors++;
		} else {
			/* Fresh slices are zero; the last word is ours. */
			if (p[0] || p[a.length / 4 - 1])
				w->errors++;
			p[0] = w->seed;
			p[a.length / 4 - 1] = w->seed;
			if (p[0] != w->seed)
				w->errors++;
			munmap(p, a.length);
		}
		if (pool_free(w->fd, a.slice_id))
			w->errors++;
		else
			w->ops++;
	}
	return NULL;
}

FIXTURE(conc) {
	int fd;
	struct mrpool_query q0;
};

FIXTURE_SETUP(conc)
{
	POOL_SETUP_OPEN();
}

FIXTURE_TEARDOWN(conc)
{
	if (self->fd >= 0)
		close(self->fd);
}

/* Two threads on one file and two processes on their own files. */
TEST_F_TIMEOUT(conc, threads_and_processes, 300)
{
	struct worker *shared, thr[NTHREADS];
	pthread_t tid[NTHREADS];
	struct mrpool_query q;
	long ops = 0;
	pid_t pid[NPROCS];
	int i, status;

	shared = mmap(NULL, sizeof(*shared) * NPROCS, PROT_READ | PROT_WRITE,
		      MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, shared);
	for (i = 0; i < NPROCS; i++) {
		pid[i] = fork();
		ASSERT_LE(0, pid[i]);
		if (pid[i] == 0) {
			struct worker *w = &shared[i];

			memset(w, 0, sizeof(*w));
			w->fd = pool_open();
			w->chunk = self->q0.chunk_size;
			w->seed = 100 + i;
			if (w->fd < 0)
				_exit(1);
			work(w);
			_exit(0);
		}
	}
	for (i = 0; i < NTHREADS; i++) {
		memset(&thr[i], 0, sizeof(thr[i]));
		thr[i].fd = self->fd;
		thr[i].chunk = self->q0.chunk_size;
		thr[i].seed = 1 + i;
		ASSERT_EQ(0, pthread_create(&tid[i], NULL, work, &thr[i]));
	}
	for (i = 0; i < NTHREADS; i++) {
		ASSERT_EQ(0, pthread_join(tid[i], NULL));
		EXPECT_EQ(0, thr[i].errors);
		ops += thr[i].ops;
	}
	for (i = 0; i < NPROCS; i++) {
		ASSERT_EQ(pid[i], waitpid(pid[i], &status, 0));
		EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
		EXPECT_EQ(0, shared[i].errors);
		ops += shared[i].ops;
	}
	EXPECT_LE(ITERS * (NTHREADS + NPROCS) / 2, ops);

	ASSERT_EQ(0, pool_query(self->fd, &q));
	EXPECT_EQ(self->q0.used_bytes, q.used_bytes);
	EXPECT_EQ(0ULL, q.file_bytes);
	EXPECT_EQ(self->q0.allocs + ops, q.allocs);
	EXPECT_EQ(self->q0.frees + ops, q.frees);
	EXPECT_EQ(q.total_bytes,
		  q.free_bytes + q.used_bytes + q.quarantined_bytes);
	EXPECT_GE(q.max_bytes, q.total_bytes);
	munmap(shared, sizeof(*shared) * NPROCS);
}

struct racer {
	int fd;
	uint64_t *ids;
	int ok, enoent, other;
};

static void *free_all(void *arg)
{
	struct racer *r = arg;
	int i, ret;

	for (i = 0; i < NIDS; i++) {
		ret = pool_free(r->fd, r->ids[i]);
		if (!ret)
			r->ok++;
		else if (ret == -ENOENT)
			r->enoent++;
		else
			r->other++;
	}
	return NULL;
}

/* Two threads FREE the same ids: each id is freed exactly once. */
TEST_F(conc, free_race)
{
	struct racer r[2] = {};
	uint64_t ids[NIDS];
	struct mrpool_alloc a;
	struct mrpool_query q;
	pthread_t t[2];
	int i;

	for (i = 0; i < NIDS; i++) {
		ASSERT_EQ(0, pool_alloc(self->fd, 1, &a));
		ids[i] = a.slice_id;
	}
	for (i = 0; i < 2; i++) {
		r[i].fd = self->fd;
		r[i].ids = ids;
		ASSERT_EQ(0, pthread_create(&t[i], NULL, free_all, &r[i]));
	}
	for (i = 0; i < 2; i++)
		ASSERT_EQ(0, pthread_join(t[i], NULL));
	EXPECT_EQ(NIDS, r[0].ok + r[1].ok);
	EXPECT_EQ(NIDS, r[0].enoent + r[1].enoent);
	EXPECT_EQ(0, r[0].other + r[1].other);
	ASSERT_EQ(0, pool_query(self->fd, &q));
	EXPECT_EQ(self->q0.used_bytes, q.used_bytes);
	EXPECT_EQ(self->q0.frees + NIDS, q.frees);
}

TEST_HARNESS_MAIN
