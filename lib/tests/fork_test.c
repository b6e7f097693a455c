// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Host unit tests of what a forked child gets: not the pool's file (a pipe
 * stands in for /dev/mrpool, whose slices live as long as any copy of the
 * file), and not the fallback buffers (MADV_DONTFORK: VmFlags "dc" in
 * smaps).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kselftest_harness.h"
#include "helpers.h"
#include "internal.h"

static int fork_mode(struct mrp_pool *pool)
{
	struct mrp_stats st;

	memset(&st, 0, sizeof(st));
	return mrp_stats(pool, &st, sizeof(st)) ? -1 : (int)st.fork;
}

/*
 * MRP_FORK_COPY (MRPOOL_FORK=copy) is kept only where the kernel copies
 * DMA-pinned pages at fork: this binary has no libibverbs to ask, so the
 * kernel's release decides (5.13 and later). Values other than none and
 * copy are refused, from the attribute and the environment alike; the
 * default is none.
 */
TEST(fork_setting)
{
	struct mrp_pool_attr a = { .comp_mask = MRP_POOL_ATTR_FORK, .fork = MRP_FORK_COPY };
	unsigned int major = 0, minor = 0;
	struct mrp_pool *pool;
	struct utsname u;
	int want;

	ASSERT_EQ(0, uname(&u));
	ASSERT_EQ(2, sscanf(u.release, "%u.%u", &major, &minor));
	want = major > 5 || (major == 5 && minor >= 13) ? MRP_FORK_COPY : MRP_FORK_NONE;

	pool = test_pool(NULL);
	ASSERT_NE(NULL, pool);
	EXPECT_EQ(MRP_FORK_NONE, fork_mode(pool));
	EXPECT_EQ(0, mrp_pool_close(pool));

	pool = test_pool(&a);
	ASSERT_NE(NULL, pool);
	EXPECT_EQ(want, fork_mode(pool));
	EXPECT_EQ(0, mrp_pool_close(pool));

	a.fork = 2;
	errno = 0;
	EXPECT_EQ(NULL, test_pool(&a));
	EXPECT_EQ(EINVAL, errno);

	setenv("MRPOOL_FORK", "always", 1);
	errno = 0;
	EXPECT_EQ(NULL, test_pool(NULL));
	EXPECT_EQ(EINVAL, errno);
	setenv("MRPOOL_FORK", "COPY", 1);
	pool = test_pool(NULL);
	unsetenv("MRPOOL_FORK");
	ASSERT_NE(NULL, pool);
	EXPECT_EQ(want, fork_mode(pool));
	EXPECT_EQ(0, mrp_pool_close(pool));
}

/*
 * The pool's file is closed in a child at fork: once the parent closes its
 * own copy, the file is gone although the child lives on. With the
 * module, that is the parent's slices going back when the parent dies.
 */
TEST(fork_closes_pool_file)
{
	struct mrp_pool *pool = test_pool(NULL);
	int file[2], hold[2], ready[2], status;
	char c;
	pid_t pid;

	ASSERT_NE(NULL, pool);
	ASSERT_EQ(0, pipe(file));
	ASSERT_EQ(0, pipe(hold));
	ASSERT_EQ(0, pipe(ready));
	ASSERT_EQ(0, fcntl(file[0], F_SETFL, O_NONBLOCK));
	/* the anon backend has no file: the pipe's write end plays it */
	pool->fd = file[1];
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		int bad = fcntl(file[1], F_GETFD) != -1 || errno != EBADF;

		close(hold[1]);
		/* fork has returned here: the fork handlers have run */
		bad |= (write(ready[1], "r", 1) != 1) << 2;
		/* stay alive until the parent has looked */
		bad |= (read(hold[0], &c, 1) != 0) << 1;
		_exit(bad);
	}
	close(hold[0]);
	close(ready[1]);
	ASSERT_EQ(1, read(ready[0], &c, 1));
	close(ready[0]);
	EXPECT_EQ(file[1], pool->fd);	/* the parent's pool keeps its file */
	EXPECT_EQ(0, fcntl(file[1], F_GETFD) < 0);
	close(file[1]);
	pool->fd = -1;
	/* end of file: no copy of the write end is left, the child's included */
	EXPECT_EQ(0, read(file[0], &c, 1));
	close(hold[1]);
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	ASSERT_TRUE(WIFEXITED(status));
	EXPECT_EQ(0, WEXITSTATUS(status));
	close(file[0]);
	EXPECT_EQ(0, mrp_pool_close(pool));
}

/*
 * mrp_pool_close() in a child frees the child's copy of the parent's
 * bookkeeping and unpublishes it: the address map no longer leads to the
 * freed arenas, so a pool the child opens after, given an address of the
 * parent's former range (the child may map its own memory there), finds
 * no buffer. Before, mrp_lookup() read the freed arena (ASan: heap use
 * after free, make test-sanitize).
 */
TEST(fork_close_unpublishes)
{
	struct mrp_pool *pool = test_pool(NULL);
	struct mrp_buf small, large;
	int status;
	pid_t pid;

	ASSERT_NE(NULL, pool);
	ASSERT_EQ(0, mrp_alloc(pool, 8192, NULL, &small));
	ASSERT_EQ(0, mrp_alloc(pool, 3 << 20, NULL, &large));
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		struct mrp_pool *mine;
		struct mrp_buf b;
		int bad = 0;

		bad |= (mrp_pool_close(pool) != 0) << 0;
		bad |= (mrp_arena_of((uintptr_t)small.addr) != NULL) << 1;
		bad |= (mrp_arena_of((uintptr_t)large.addr) != NULL) << 2;
		mine = test_pool(NULL);
		bad |= !mine << 3;
		if (mine) {
			bad |= (mrp_lookup(mine, small.addr, NULL, &b) != -ENOENT) << 4;
			bad |= (mrp_lookup(mine, large.addr, NULL, &b) != -ENOENT) << 5;
			bad |= (mrp_free(mine, small.addr) != -EINVAL) << 6;
			bad |= (mrp_pool_close(mine) != 0) << 7;
		}
		_exit(bad);
	}
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	ASSERT_TRUE(WIFEXITED(status)) TH_LOG("status %#x", status);
	EXPECT_EQ(0, WEXITSTATUS(status));
	/* the parent's are untouched */
	EXPECT_EQ(pool, mrp_arena_of((uintptr_t)small.addr)->pool);
	EXPECT_EQ(0, mrp_free(pool, small.addr));
	EXPECT_EQ(0, mrp_free(pool, large.addr));
	EXPECT_EQ(0, mrp_pool_close(pool));
}

/* 1 if the VmFlags of the mapping holding addr include flag. */
static int vma_has_flag(const void *addr, const char *flag)
{
	uintptr_t a = (uintptr_t)addr, lo, hi;
	FILE *f = fopen("/proc/self/smaps", "r");
	char line[512];
	int in = 0, ret = -1;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, '-') &&
		    line[strspn(line, "0123456789abcdef")] == '-') {
			in = a >= lo && a < hi;
			continue;
		}
		if (in && !strncmp(line, "VmFlags:", 8)) {
			char want[8];

			snprintf(want, sizeof(want), " %s", flag);
			ret = strstr(line, want) != NULL;
			break;
		}
	}
	fclose(f);
	return ret;
}

/* Fallback buffers are kept out of children, like arenas. */
TEST(fallback_dontfork)
{
	struct mrp_pool_attr a = {
		.comp_mask = MRP_POOL_ATTR_MAX_BYTES | MRP_POOL_ATTR_ARENA_SIZE |
			     MRP_POOL_ATTR_FALLBACK,
		.max_bytes = 2 << 20, .arena_size = 2 << 20, .fallback = 1,
	};
	struct mrp_pool *pool = test_pool(&a);
	struct mrp_buf b, f, l;
	unsigned char vec;
	struct mrp_stats st;
	int status;
	pid_t pid;

	ASSERT_NE(NULL, pool);
	if (!test_dontfork_works()) {
		EXPECT_EQ(0, mrp_pool_close(pool));
		SKIP(return, "MADV_DONTFORK is not honoured here (qemu user mode?)");
	}
	ASSERT_EQ(0, mrp_alloc(pool, 2 << 20, NULL, &b));	/* the pool is full */
	ASSERT_EQ(0, mrp_alloc(pool, 6000, NULL, &f));
	ASSERT_EQ(0, mrp_alloc(pool, 3 << 20, NULL, &l));
	st = test_stats(pool);
	ASSERT_EQ(2, st.fallbacks);
	EXPECT_EQ(8192, f.size);
	EXPECT_EQ(0, (uintptr_t)f.addr & 8191);
	memset(f.addr, 0x66, f.size);
	memset(l.addr, 0x77, 3 << 20);
	EXPECT_EQ(1, vma_has_flag(f.addr, "dc"));
	EXPECT_EQ(1, vma_has_flag(l.addr, "dc"));
	EXPECT_EQ(1, vma_has_flag(b.addr, "dc"));	/* the arena too */

	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		int bad = mincore(f.addr, 4096, &vec) != -1 || errno != ENOMEM;

		bad |= (mincore(l.addr, 4096, &vec) != -1 || errno != ENOMEM) << 1;
		bad |= (mrp_pool_close(pool) != 0) << 2;
		_exit(bad);
	}
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	ASSERT_TRUE(WIFEXITED(status));
	EXPECT_EQ(0, WEXITSTATUS(status));
	EXPECT_EQ(0x66, ((unsigned char *)f.addr)[f.size - 1]);
	EXPECT_EQ(0x77, ((unsigned char *)l.addr)[(3 << 20) - 1]);
	EXPECT_EQ(0, mrp_free(pool, f.addr));
	EXPECT_EQ(0, mrp_free(pool, l.addr));
	EXPECT_EQ(0, mrp_free(pool, b.addr));
	EXPECT_EQ(0, mrp_pool_close(pool));
}

/*
 * A thread that does not fork may hold its cache's lock at fork (in a slow
 * path): the child's close frees that cache without taking or destroying
 * the lock, as it leaves the pool's locks alone. (Destroying it is not seen
 * here: glibc refuses a held mutex with EBUSY, ThreadSanitizer does not
 * report it in the child; taking it would hang the child.)
 */
static pthread_mutex_t held_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t held_cv = PTHREAD_COND_INITIALIZER;
static int held_state;

static void held_set(int s)
{
	pthread_mutex_lock(&held_mu);
	held_state = s;
	pthread_cond_broadcast(&held_cv);
	pthread_mutex_unlock(&held_mu);
}

static void held_wait(int s)
{
	pthread_mutex_lock(&held_mu);
	while (held_state != s)
		pthread_cond_wait(&held_cv, &held_mu);
	pthread_mutex_unlock(&held_mu);
}

static void *hold_cache_lock(void *arg)
{
	struct mrp_pool *pool = arg;
	struct mrp_tcache *tc;
	struct mrp_buf b;

	if (mrp_alloc(pool, 4096, NULL, &b) || mrp_free(pool, b.addr))
		return NULL;
	tc = mrp_tls[pool->idx];
	pthread_mutex_lock(&tc->lock);		/* as its slow paths do */
	held_set(1);
	held_wait(2);
	pthread_mutex_unlock(&tc->lock);
	return NULL;
}

TEST(fork_cache_lock_held)
{
	struct mrp_pool *pool = test_pool(NULL);
	pthread_t t;
	int status;
	pid_t pid;

	ASSERT_NE(NULL, pool);
	ASSERT_EQ(0, pthread_create(&t, NULL, hold_cache_lock, pool));
	held_wait(1);
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0)
		_exit(mrp_pool_close(pool) ? 1 : 0);
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	EXPECT_TRUE(WIFEXITED(status));
	EXPECT_EQ(0, WEXITSTATUS(status));
	held_set(2);
	pthread_join(t, NULL);
	EXPECT_EQ(0, mrp_pool_close(pool));
}

/* 1 if any mapping of /proc/self/maps overlaps [lo, hi), 0 if none, -1 unread. */
static int maps_overlap(uintptr_t lo, uintptr_t hi)
{
	FILE *f = fopen("/proc/self/maps", "r");
	unsigned long s, e;
	char line[512];
	int ret = 0;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "%lx-%lx ", &s, &e) == 2 && e > lo && s < hi)
			ret = 1;
	fclose(f);
	return ret;
}

/*
 * What a child must see of a pool memory range [lo, hi) of its parent's
 * that MADV_DOFORK reached: nothing inherited, and once the child closed
 * its copy of the pool, a mapping of its own over the whole range that
 * no pool of the child's takes for a buffer. Bits of the child's status.
 */
static int dofork_child_range(struct mrp_pool *mine, uintptr_t lo, uintptr_t hi,
			      void *buf)
{
	unsigned char vec;
	struct mrp_buf b;
	void *m;
	int bad = 0;

	bad |= (maps_overlap(lo, hi) != 0) << 0;
	bad |= (mincore((void *)((uintptr_t)buf & ~(uintptr_t)(sysconf(_SC_PAGESIZE) - 1)),
			1, &vec) != -1 || errno != ENOMEM) << 1;
	m = mmap((void *)lo, hi - lo, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
	bad |= (m != (void *)lo) << 2;
	if (m == (void *)lo) {
		memset(buf, 0x11, 64);		/* the child's own memory now */
		bad |= (mrp_arena_of((uintptr_t)buf) != NULL) << 3;
		bad |= (mrp_lookup(mine, buf, NULL, &b) != -ENOENT) << 4;
		munmap(m, hi - lo);
	}
	return bad;
}

/*
 * libibverbs' fork support (ibv_fork_init(), RDMAV_FORK_SAFE=1) calls
 * madvise(MADV_DOFORK) over an MR's pages when its last MR there is
 * deregistered, which clears the pool's own advice: the fork handler
 * marks every arena and fallback buffer MADV_DONTFORK again. The child
 * inherits no part of a class arena, a large arena or a fallback buffer
 * whose advice was cleared over one buffer, and the parent's ranges show
 * "dc" again. Before, the child had a copy of the buffer's pages (their
 * mapping in the way of the shim's placeholder: EEXIST), and the parent's
 * MRs could lose those pages to copy-on-write.
 */
TEST(fork_after_dofork)
{
	struct mrp_pool_attr attr = {
		.comp_mask = MRP_POOL_ATTR_MAX_BYTES | MRP_POOL_ATTR_ARENA_SIZE |
			     MRP_POOL_ATTR_FALLBACK,
		.max_bytes = 8 << 20, .arena_size = 4 << 20, .fallback = 1,
	};
	struct mrp_pool *pool = test_pool(&attr);
	struct mrp_buf c[2], l, f;
	struct mrp_arena *ca, *la;
	uintptr_t cr[2], lr[2];
	struct mrp_stats st;
	int status;
	pid_t pid;

	ASSERT_NE(NULL, pool);
	if (!test_dontfork_works()) {
		EXPECT_EQ(0, mrp_pool_close(pool));
		SKIP(return, "MADV_DONTFORK is not honoured here (qemu user mode?)");
	}
	/* two buffers of one 4 MiB class arena, a 3 MiB large arena, then full */
	ASSERT_EQ(0, mrp_alloc(pool, 1 << 20, NULL, &c[0]));
	ASSERT_EQ(0, mrp_alloc(pool, 1 << 20, NULL, &c[1]));
	ASSERT_EQ(0, mrp_alloc(pool, 3 << 20, NULL, &l));
	ASSERT_EQ(0, mrp_alloc(pool, 3 << 20, NULL, &f));
	st = test_stats(pool);
	ASSERT_EQ(1, st.fallbacks);
	ca = mrp_arena_of((uintptr_t)c[1].addr);
	la = mrp_arena_of((uintptr_t)l.addr);
	ASSERT_NE(NULL, ca);
	ASSERT_NE(NULL, la);
	ASSERT_EQ(ca, mrp_arena_of((uintptr_t)c[0].addr));
	ASSERT_EQ(NULL, mrp_arena_of((uintptr_t)f.addr));
	/* the child reads them after its close freed the arenas' structs */
	cr[0] = ca->base;
	cr[1] = ca->base + ca->size;
	lr[0] = la->base;
	lr[1] = la->base + la->size;
	memset(c[0].addr, 0xc0, 1 << 20);
	memset(c[1].addr, 0xc1, 1 << 20);
	memset(l.addr, 0x1a, 3 << 20);
	memset(f.addr, 0xfb, 3 << 20);
	/* what rdma-core's ibv_dereg_mr does then, over one buffer each */
	ASSERT_EQ(0, madvise(c[1].addr, 1 << 20, MADV_DOFORK));
	ASSERT_EQ(0, madvise(l.addr, 1 << 20, MADV_DOFORK));
	ASSERT_EQ(0, madvise(f.addr, 1 << 20, MADV_DOFORK));
	ASSERT_EQ(0, vma_has_flag(c[1].addr, "dc"));
	ASSERT_EQ(0, vma_has_flag(l.addr, "dc"));
	ASSERT_EQ(0, vma_has_flag(f.addr, "dc"));

	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		uintptr_t fl = (uintptr_t)f.addr, fh = fl + ((3 << 20) + 4095) / 4096 * 4096;
		struct mrp_pool *mine;
		int bad = 0;

		bad |= (maps_overlap(cr[0], cr[1]) != 0) << 0;
		bad |= (maps_overlap(lr[0], lr[1]) != 0) << 1;
		bad |= (maps_overlap(fl, fh) != 0) << 2;
		bad |= (mrp_pool_close(pool) != 0) << 3;
		mine = test_pool(NULL);
		if (!mine)
			_exit(0xff);
		bad |= dofork_child_range(mine, cr[0], cr[1], c[1].addr) << 4;
		_exit(bad | (mrp_pool_close(mine) != 0) << 7);
	}
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	ASSERT_TRUE(WIFEXITED(status)) TH_LOG("status %#x", status);
	EXPECT_EQ(0, WEXITSTATUS(status));
	/* marked again in the parent, whose memory is untouched */
	EXPECT_EQ(1, vma_has_flag(c[1].addr, "dc"));
	EXPECT_EQ(1, vma_has_flag(l.addr, "dc"));
	EXPECT_EQ(1, vma_has_flag(f.addr, "dc"));
	EXPECT_EQ(0xc0, ((unsigned char *)c[0].addr)[(1 << 20) - 1]);
	EXPECT_EQ(0xc1, ((unsigned char *)c[1].addr)[0]);
	EXPECT_EQ(0x1a, ((unsigned char *)l.addr)[0]);
	EXPECT_EQ(0xfb, ((unsigned char *)f.addr)[0]);
	EXPECT_EQ(0, mrp_free(pool, c[0].addr));
	EXPECT_EQ(0, mrp_free(pool, c[1].addr));
	EXPECT_EQ(0, mrp_free(pool, l.addr));
	EXPECT_EQ(0, mrp_free(pool, f.addr));
	EXPECT_EQ(0, mrp_pool_close(pool));
}

/* the range late_dofork() clears the advice of, in the fork's prepare stage */
static void *late_addr;
static size_t late_len;

static void late_dofork(void)
{
	madvise(late_addr, late_len, MADV_DOFORK);
}

/*
 * MADV_DOFORK after the library's prepare handler, before the fork itself
 * (another thread's ibv_dereg_mr() there): the child inherits the pages,
 * and the library's child handler unmaps them, so that the child holds
 * none of the parent's memory and its own mappings may take the range.
 * A prepare handler registered before the library's runs after it: this
 * test's process opened no pool before (each test runs in a process of
 * its own, forked from a main that opens none), and the parent's range
 * without "dc" after the fork shows the order held.
 */
TEST(fork_dofork_after_prepare)
{
	struct mrp_pool *pool;
	struct mrp_arena *a;
	uintptr_t lo, hi;
	struct mrp_buf b;
	int status;
	pid_t pid;

	if (!test_dontfork_works())
		SKIP(return, "MADV_DONTFORK is not honoured here (qemu user mode?)");
	ASSERT_EQ(0, pthread_atfork(late_dofork, NULL, NULL));
	pool = test_pool(NULL);
	ASSERT_NE(NULL, pool);
	ASSERT_EQ(0, mrp_alloc(pool, 1 << 20, NULL, &b));
	memset(b.addr, 0xd0, 1 << 20);
	a = mrp_arena_of((uintptr_t)b.addr);
	ASSERT_NE(NULL, a);
	lo = a->base;			/* a is freed by the child's close */
	hi = a->base + a->size;
	late_addr = b.addr;
	late_len = 1 << 20;

	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		int bad = (maps_overlap(lo, hi) != 0) << 0;
		struct mrp_pool *mine;

		bad |= (mrp_pool_close(pool) != 0) << 1;
		mine = test_pool(NULL);
		if (!mine)
			_exit(0xff);
		bad |= dofork_child_range(mine, lo, hi, b.addr) << 2;
		_exit(bad | (mrp_pool_close(mine) != 0) << 7);
	}
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	ASSERT_TRUE(WIFEXITED(status)) TH_LOG("status %#x", status);
	EXPECT_EQ(0, WEXITSTATUS(status));
	/* the late handler ran after the library's: the advice is clear here */
	EXPECT_EQ(0, vma_has_flag(b.addr, "dc"));
	EXPECT_EQ(0xd0, ((unsigned char *)b.addr)[0]);
	late_len = 0;
	EXPECT_EQ(0, mrp_free(pool, b.addr));
	EXPECT_EQ(0, mrp_pool_close(pool));
}

TEST_HARNESS_MAIN
