/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* Shared by the host unit tests: pool shortcuts and the fake verbs. */
#ifndef MRP_TEST_HELPERS_H
#define MRP_TEST_HELPERS_H

#include <errno.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "mrpool.h"

#ifdef TEST_TIMEOUT_DEFAULT
/*
 * The harness kills a test after 30 s, a timing assumption valgrind on a
 * busy host breaks (fork_child ran longer). Every wait here has its own
 * bound; this one only catches a hang.
 */
#undef TEST_TIMEOUT_DEFAULT
#define TEST_TIMEOUT_DEFAULT 300
#endif

/* tests/fake_verbs.c */
extern int fake_live, fake_regs, fake_fail_next, fake_dereg_fail_next, fake_dofork_on_dereg;
extern struct ibv_pd *fake_fail_pd, *fake_dereg_fail_pd;
extern int fake_dmabuf_errno, fake_dmabuf_regs;
int fake_mr_access(struct ibv_pd *pd, const void *addr);
int fake_mr_covers(struct ibv_pd *pd, const void *addr, size_t len,
		   uint32_t lkey, uint32_t rkey);
/* registrations in pd wait until fake_release() (growth_test) */
void fake_hold(struct ibv_pd *pd);
/* deregistrations of MRs in pd wait until fake_release() (attach_test) */
void fake_hold_dereg(struct ibv_pd *pd);
/* from now on only calls over exactly len bytes are held (0: any) */
void fake_hold_only_len(size_t len);
void fake_release(void);
int fake_held(void);
int fake_wait_held(int n, int timeout_ms);

/*
 * Fake PDs of one fake device, whose sysfs directory (ibdev_path, read for
 * NUMA placement) is fake_device_path: "" by default, a device without a
 * node.
 */
#define FAKE_PDS	16
extern struct ibv_pd fake_pds[FAKE_PDS];
extern char *fake_device_path;	/* IBV_SYSFS_PATH_MAX bytes */
#define FAKE_PD(n)	(&fake_pds[(n)])

/* Standalone backend, no pool thread (tests drive trim and growth). */
static inline struct mrp_pool *test_pool(struct mrp_pool_attr *extra)
{
	struct mrp_pool_attr a;

	memset(&a, 0, sizeof(a));
	if (extra)
		a = *extra;
	a.comp_mask |= MRP_POOL_ATTR_BACKEND;
	a.backend = MRP_BACKEND_ANON;
	if (!(a.comp_mask & MRP_POOL_ATTR_BACKGROUND)) {
		a.comp_mask |= MRP_POOL_ATTR_BACKGROUND;
		a.background = 0;
	}
	return mrp_pool_open(&a);
}

/* test_pool() with the fine size classes (MRP_CLASSES_FINE). */
static inline struct mrp_pool *fine_pool(struct mrp_pool_attr *extra)
{
	struct mrp_pool_attr a;

	memset(&a, 0, sizeof(a));
	if (extra)
		a = *extra;
	a.comp_mask |= MRP_POOL_ATTR_CLASSES;
	a.classes = MRP_CLASSES_FINE;
	return test_pool(&a);
}

/* test_pool() with MRPOOL_DEBUG=1: every free checked. */
static inline struct mrp_pool *debug_pool(struct mrp_pool_attr *extra)
{
	struct mrp_pool *pool;

	setenv("MRPOOL_DEBUG", "1", 1);
	pool = test_pool(extra);
	unsetenv("MRPOOL_DEBUG");
	return pool;
}

/*
 * 1 if this system keeps MADV_DONTFORK memory out of a child. Linux does;
 * qemu user mode (tests/arm64.sh) accepts the advice and ignores it.
 */
static inline int test_dontfork_works(void)
{
	size_t len = (size_t)sysconf(_SC_PAGESIZE);
	unsigned char vec;
	int status = -1;
	void *m;
	pid_t pid;

	m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED)
		return 0;
	if (madvise(m, len, MADV_DONTFORK)) {
		munmap(m, len);
		return 0;
	}
	pid = fork();
	if (pid == 0)
		_exit(mincore(m, len, &vec) == -1 && errno == ENOMEM ? 0 : 1);
	if (pid > 0)
		waitpid(pid, &status, 0);
	munmap(m, len);
	return pid > 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

static inline struct mrp_stats test_stats(struct mrp_pool *pool)
{
	struct mrp_stats st;

	memset(&st, 0xff, sizeof(st));
	if (mrp_stats(pool, &st, sizeof(st)))
		memset(&st, 0xff, sizeof(st));
	return st;
}

/* Monotonic milliseconds and a sleep, for bounded polls (never asserted). */
static inline uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static inline void sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

#ifdef MRP_INTERNAL_H
/*
 * The idle reclaim needs membarrier's private expedited command, which the
 * library registers once per process (os.c; each test is a process of its
 * own): without it there is nothing to test but its absence.
 */
#define NEED_MEMBARRIER() do {						\
	int _err = mrp_os_membarrier_register();			\
									\
	if (_err)							\
		SKIP(return, "no idle reclaim: membarrier(PRIVATE_EXPEDITED) "	\
		     "cannot be registered (%s)", strerror(-_err));	\
} while (0)
#endif

#endif
