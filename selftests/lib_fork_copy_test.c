// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * MRP_FORK_COPY with real pinned pages (run inside the VM): a pool on the
 * anonymous backend, registered with rxe0 (ibv_reg_mr pins its arenas),
 * forks. The kernel copies pinned pages for the child, so the child reads
 * the parent's bytes and writes its own copy, while the parent's
 * registration still reaches the parent's pages: an RDMA WRITE the parent
 * makes while the child holds its copy lands in the parent's buffer and
 * nowhere in the child's. On the kernel backend the module makes the
 * child a private copy of each slice mapping at the fork (slices allocated
 * with MRPOOL_ALLOC_FORK_COPY, which the library asks for in such a pool):
 * the same test there, plus the module's side through its ioctls: a copy
 * of a split mapping and a grandchild's copy of the child's, a copy that
 * fails (debugfs fail_fork_copy: SIGBUS), a copy that outlives the
 * parent's FREE while the chunk serves another slice, and a slice without
 * the flag that a child still does not get.
 *
 * VM kernels: all (the copy of DMA-pinned pages at fork is mm's, per kernel)
 */
#include <errno.h>
#include <signal.h>
#include <sys/resource.h>
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#pragma GCC diagnostic ignored "-Wunused-parameter"
#pragma GCC diagnostic ignored "-Wsign-compare"
#include "kselftest_harness.h"

#include "mrpool.h"
#include "pool_util.h"
#include "rdmatest.h"

#define LEN	(256 << 10)

FIXTURE(fcopy) {
	struct rdt_dev dev;
	struct rdt_loop lp;
	struct mrp_pool *pool;
	const char *skip;
};

static struct mrp_pool *open_pool(enum mrp_backend backend, int fork)
{
	struct mrp_pool_attr a = {
		.comp_mask = MRP_POOL_ATTR_BACKEND | MRP_POOL_ATTR_ARENA_SIZE |
			     MRP_POOL_ATTR_BACKGROUND | MRP_POOL_ATTR_FORK,
		.backend = backend, .arena_size = 2 << 20, .background = 0,
		.fork = fork,
	};

	return mrp_pool_open(&a);
}

FIXTURE_SETUP(fcopy)
{
	memset(&self->dev, 0, sizeof(self->dev));
	memset(&self->lp, 0, sizeof(self->lp));
	self->skip = NULL;
	self->pool = open_pool(MRP_BACKEND_ANON, MRP_FORK_COPY);
	ASSERT_NE(NULL, self->pool);
	if (rdt_dev_open(&self->dev, NULL, NULL)) {
		self->skip = "no RDMA device (rxe0)";
		return;
	}
	ASSERT_EQ(0, rdt_loop_create(&self->lp, &self->dev));
	ASSERT_EQ(0, mrp_attach_pd(self->pool, self->dev.pd, RDT_ACCESS_ALL));
}

FIXTURE_TEARDOWN(fcopy)
{
	if (self->pool)
		EXPECT_EQ(0, mrp_pool_close_flags(self->pool, MRP_CLOSE_FORCE));
	rdt_loop_destroy(&self->lp);
	if (self->dev.ctx)
		rdt_dev_close(&self->dev);
}

static int fork_mode(struct mrp_pool *pool)
{
	struct mrp_stats st;

	memset(&st, 0, sizeof(st));
	if (mrp_stats(pool, &st, sizeof(st)))
		return -1;
	return (int)st.fork;
}

/*
 * With ib_core loaded the kernel says it copies pinned pages at fork (every
 * kernel the project tests does), and the anon pool keeps the request.
 */
TEST_F(fcopy, copy_holds_on_anon)
{
	if (self->skip)
		POOL_SKIP("%s", self->skip);
	EXPECT_EQ(MRP_FORK_COPY, fork_mode(self->pool));
}

/* The child's copy is its own; the parent's MR still reaches its pages. */
TEST_F(fcopy, child_copy_parent_registration)
{
	struct mrp_buf src, dst;
	int to_child[2], to_parent[2], status = 0, st;
	char c = 0;
	pid_t pid;

	if (self->skip)
		POOL_SKIP("%s", self->skip);
	ASSERT_EQ(MRP_FORK_COPY, fork_mode(self->pool));
	ASSERT_EQ(0, mrp_alloc(self->pool, LEN, self->dev.pd, &src));
	ASSERT_EQ(0, mrp_alloc(self->pool, LEN, self->dev.pd, &dst));
	rdt_pattern_fill(dst.addr, LEN, 1);
	rdt_pattern_fill(src.addr, LEN, 2);
	ASSERT_EQ(0, pipe(to_child));
	ASSERT_EQ(0, pipe(to_parent));
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		/* the parent's bytes as of the fork, then the child's own */
		if (!rdt_pattern_same(dst.addr, LEN, 1))
			_exit(1);
		rdt_pattern_fill(dst.addr, LEN, 3);
		if (write(to_parent[1], "w", 1) != 1 || read(to_child[0], &c, 1) != 1)
			_exit(2);
		/* the parent's RDMA WRITE went to the parent's pages only */
		_exit(rdt_pattern_same(dst.addr, LEN, 3) ? 0 : 3);
	}
	ASSERT_EQ(1, read(to_parent[0], &c, 1));
	/* the child has written its copy: the parent's is untouched */
	EXPECT_TRUE(rdt_pattern_same(dst.addr, LEN, 1));
	ASSERT_EQ(0, rdt_write(&self->lp, src.addr, src.lkey, (uintptr_t)dst.addr,
			       dst.rkey, LEN, &status));
	EXPECT_EQ(IBV_WC_SUCCESS, status);
	EXPECT_TRUE(rdt_pattern_same(dst.addr, LEN, 2));
	ASSERT_EQ(1, write(to_child[1], "r", 1));
	ASSERT_EQ(pid, waitpid(pid, &st, 0));
	EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) TH_LOG("status %#x", st);
	/* and after the child is gone, the registration still works */
	rdt_pattern_fill(src.addr, LEN, 4);
	ASSERT_EQ(0, rdt_write(&self->lp, src.addr, src.lkey, (uintptr_t)dst.addr,
			       dst.rkey, LEN, &status));
	EXPECT_TRUE(rdt_pattern_same(dst.addr, LEN, 4));
	EXPECT_EQ(0, mrp_free(self->pool, src.addr));
	EXPECT_EQ(0, mrp_free(self->pool, dst.addr));
	close(to_child[0]);
	close(to_child[1]);
	close(to_parent[0]);
	close(to_parent[1]);
}

/* Bytes @off..@off+@len of @base are those rdt_pattern_fill(base, .., seed) wrote. */
static bool pattern_at(const char *base, size_t off, size_t len, unsigned int seed)
{
	char *ref = malloc(off + len);
	bool same;

	if (!ref)
		return false;
	rdt_pattern_fill(ref, off + len, seed);
	same = !memcmp(base + off, ref + off, len);
	free(ref);
	return same;
}

/* How @pid ended: its exit code, or 128 + the signal that killed it. */
static int ended(pid_t pid)
{
	int st;

	if (waitpid(pid, &st, 0) != pid)
		return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : WIFSIGNALED(st) ? 128 + WTERMSIG(st) : -2;
}

static long long stat_of(const char *name)
{
	char path[64];

	snprintf(path, sizeof(path), "stats/%s", name);
	return pool_attr(path);
}

/* The pool's arenas: how many, and their bytes. */
static void arenas_of(struct mrp_pool *pool, uint64_t *n, uint64_t *bytes)
{
	struct mrp_stats st;

	memset(&st, 0, sizeof(st));
	*n = *bytes = 0;
	if (!mrp_stats(pool, &st, sizeof(st))) {
		*n = st.arenas;
		*bytes = st.bytes_mapped;
	}
}

/* Blocks of the kernel-backend test: small ones and >= 64 KiB ones. */
static const size_t kblk_len[] = { 100, 4096, 24 << 10, 64 << 10, LEN, 1 << 20 };
#define NKBLK	(sizeof(kblk_len) / sizeof(kblk_len[0]))

/*
 * The kernel backend keeps MRP_FORK_COPY where the module offers it: the
 * child reads the parent's bytes of every block (small and large), writes
 * its own copy, and the parent's bytes and registration stay the parent's:
 * an RDMA WRITE the parent makes while the child holds its copy lands in
 * the parent's buffer and nowhere in the child's. The module counts one
 * copy per slice mapping, of the mapping's bytes. Before, the child died
 * of SIGSEGV on its first read (no slice is inherited).
 */
TEST(kernel_child_copy)
{
	int to_child[2], to_parent[2], status = 0, st, fd;
	long long copies0, bytes0, fails0;
	uint64_t narenas, mapped;
	struct mrp_buf b[NKBLK], src;
	struct mrpool_query q;
	struct rdt_dev dev;
	struct rdt_loop lp;
	struct mrp_pool *kp;
	unsigned int i;
	char c = 0;
	pid_t pid;

	if (access(POOL_DEV, F_OK))
		POOL_SKIP(POOL_DEV " missing: mrpool.ko not loaded");
	fd = pool_open();
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, pool_query(fd, &q));
	close(fd);
	ASSERT_TRUE(q.features & MRPOOL_FEATURE_FORK_COPY);
	memset(&dev, 0, sizeof(dev));
	memset(&lp, 0, sizeof(lp));
	if (rdt_dev_open(&dev, NULL, NULL))
		POOL_SKIP("no RDMA device (rxe0)");
	ASSERT_EQ(0, rdt_loop_create(&lp, &dev));
	kp = open_pool(MRP_BACKEND_KERNEL, MRP_FORK_COPY);
	ASSERT_NE(NULL, kp);
	ASSERT_EQ(0, mrp_attach_pd(kp, dev.pd, RDT_ACCESS_ALL));
	ASSERT_EQ(MRP_FORK_COPY, fork_mode(kp));
	for (i = 0; i < NKBLK; i++) {
		ASSERT_EQ(0, mrp_alloc(kp, kblk_len[i], dev.pd, &b[i]));
		rdt_pattern_fill(b[i].addr, kblk_len[i], 10 + i);
	}
	ASSERT_EQ(0, mrp_alloc(kp, LEN, dev.pd, &src));
	rdt_pattern_fill(src.addr, LEN, 2);
	arenas_of(kp, &narenas, &mapped);
	ASSERT_LT(0, narenas);
	copies0 = stat_of("fork_copies");
	bytes0 = stat_of("fork_copy_bytes");
	fails0 = stat_of("fork_copy_failures");
	ASSERT_LE(0, copies0);
	ASSERT_EQ(0, pipe(to_child));
	ASSERT_EQ(0, pipe(to_parent));
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		/* the parent's bytes as of the fork, then the child's own */
		for (i = 0; i < NKBLK; i++)
			if (!rdt_pattern_same(b[i].addr, kblk_len[i], 10 + i))
				_exit(10 + i);
		for (i = 0; i < NKBLK; i++)
			rdt_pattern_fill(b[i].addr, kblk_len[i], 30 + i);
		if (write(to_parent[1], "w", 1) != 1 || read(to_child[0], &c, 1) != 1)
			_exit(2);
		/* the parent's RDMA WRITE went to the parent's pages only */
		for (i = 0; i < NKBLK; i++)
			if (!rdt_pattern_same(b[i].addr, kblk_len[i], 30 + i))
				_exit(40 + i);
		_exit(0);
	}
	/* a child that dies is EOF here, not a wait for ever */
	close(to_parent[1]);
	close(to_child[0]);
	ASSERT_EQ(1, read(to_parent[0], &c, 1)) TH_LOG("the child: %d", ended(pid));
	/* one copy per slice mapping, of its bytes; none failed */
	EXPECT_EQ(copies0 + (long long)narenas, stat_of("fork_copies"));
	EXPECT_EQ(bytes0 + (long long)mapped, stat_of("fork_copy_bytes"));
	EXPECT_EQ(fails0, stat_of("fork_copy_failures"));
	/* the child has written its copy: the parent's is untouched */
	for (i = 0; i < NKBLK; i++)
		EXPECT_TRUE(rdt_pattern_same(b[i].addr, kblk_len[i], 10 + i)) TH_LOG("block %u", i);
	for (i = 0; i < NKBLK; i++) {
		size_t n = kblk_len[i] < LEN ? kblk_len[i] : LEN;

		ASSERT_EQ(0, rdt_write(&lp, src.addr, src.lkey, (uintptr_t)b[i].addr,
				       b[i].rkey, n, &status));
		EXPECT_EQ(IBV_WC_SUCCESS, status);
		EXPECT_TRUE(rdt_pattern_same(b[i].addr, n, 2)) TH_LOG("block %u", i);
	}
	ASSERT_EQ(1, write(to_child[1], "r", 1));
	ASSERT_EQ(pid, waitpid(pid, &st, 0));
	EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) TH_LOG("status %#x", st);
	/* after the child is gone: the parent's bytes, its registration */
	EXPECT_TRUE(pattern_at(b[NKBLK - 1].addr, LEN, (1 << 20) - LEN, 10 + NKBLK - 1));
	rdt_pattern_fill(src.addr, LEN, 4);
	ASSERT_EQ(0, rdt_write(&lp, src.addr, src.lkey, (uintptr_t)b[4].addr,
			       b[4].rkey, LEN, &status));
	EXPECT_TRUE(rdt_pattern_same(b[4].addr, LEN, 4));
	for (i = 0; i < NKBLK; i++)
		EXPECT_EQ(0, mrp_free(kp, b[i].addr));
	EXPECT_EQ(0, mrp_free(kp, src.addr));
	EXPECT_EQ(0, mrp_pool_close_flags(kp, MRP_CLOSE_FORCE));
	rdt_loop_destroy(&lp);
	rdt_dev_close(&dev);
	close(to_child[1]);
	close(to_parent[0]);
}

/* The module's side, through /dev/mrpool directly. */
FIXTURE(kfork) {
	int fd;
	struct mrpool_query q0;
	long long trim;
};

FIXTURE_SETUP(kfork)
{
	POOL_SETUP_OPEN();
	self->trim = pool_trim_off();
	if (access(POOL_DEBUGFS "/fail_fork_copy", F_OK))
		POOL_SETUP_SKIP("no debugfs fail_fork_copy");
}

FIXTURE_TEARDOWN(kfork)
{
	struct mrpool_query q;

	pool_set_knob("fail_fork_copy", 0);
	if (self->fd >= 0) {
		close(self->fd);
		self->fd = pool_open();
		if (self->fd >= 0) {
			/* every chunk back: nothing used beyond the start */
			EXPECT_TRUE(POOL_WAIT(pool_back_to(self->fd, &self->q0, &q), 5000))
				TH_LOG("used %llu quarantined %llu",
				       (unsigned long long)q.used_bytes,
				       (unsigned long long)q.quarantined_bytes);
			close(self->fd);
		}
	}
	pool_trim_restore(self->trim);
}

/* A slice of one chunk, with @flags, mapped, filled with @seed unless 0. */
static void *kslice(int fd, uint32_t flags, unsigned int seed,
		    struct mrpool_alloc *a)
{
	void *p;

	memset(a, 0, sizeof(*a));
	a->size = sizeof(*a);
	a->flags = flags;
	a->bytes = 1;
	a->node = MRPOOL_NODE_ANY;
	if (pool_ioctl(fd, MRPOOL_IOC_ALLOC, a))
		return NULL;
	p = pool_map(fd, a);
	if (p == MAP_FAILED)
		return NULL;
	if (seed)
		rdt_pattern_fill(p, a->length, seed);
	return p;
}

/*
 * A mapping the owner split (mprotect of a middle page) reaches the child
 * as three copies, each with its part of the bytes; the child's own fork
 * gives the grandchild a copy of the child's copy, not of the slice.
 */
TEST_F(kfork, split_and_grandchild)
{
	long long copies0, bytes0;
	struct mrpool_alloc a;
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);
	char *p;
	pid_t pid;

	POOL_SETUP_SKIPPED();
	p = kslice(self->fd, MRPOOL_ALLOC_FORK_COPY, 7, &a);
	ASSERT_NE(NULL, p);
	ASSERT_EQ(0, mprotect(p + pg, pg, PROT_READ));
	copies0 = stat_of("fork_copies");
	bytes0 = stat_of("fork_copy_bytes");
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		pid_t gc;

		if (!rdt_pattern_same(p, a.length, 7))
			_exit(1);
		memset(p, 0x5a, pg);
		memset(p + 2 * pg, 0x5b, a.length - 2 * pg);
		gc = fork();
		if (gc == 0) {
			/* the child's bytes at its fork */
			_exit(p[0] == 0x5a && p[a.length - 1] == 0x5b &&
			      pattern_at(p, pg, pg, 7) ? 0 : 1);
		}
		if (gc < 0 || ended(gc))
			_exit(2);
		_exit(p[0] == 0x5a && p[a.length - 1] == 0x5b ? 0 : 3);
	}
	EXPECT_EQ(0, ended(pid));
	/* three for the child, three for the grandchild */
	EXPECT_EQ(copies0 + 6, stat_of("fork_copies"));
	EXPECT_EQ(bytes0 + 2 * (long long)a.length, stat_of("fork_copy_bytes"));
	EXPECT_TRUE(rdt_pattern_same(p, a.length, 7));
	EXPECT_EQ(0, munmap(p, a.length));
	EXPECT_EQ(0, pool_free(self->fd, a.slice_id));
}

/*
 * The copy cannot be made (debugfs fail_fork_copy=1): the child gets
 * SIGBUS on its first touch of the slice, never the pool's pages; the
 * parent goes on; the pool is whole again after both (the teardown).
 */
TEST_F(kfork, failed_copy_sigbus)
{
	long long fails0, copies0;
	struct mrpool_alloc a;
	char *p;
	pid_t pid;

	POOL_SETUP_SKIPPED();
	p = kslice(self->fd, MRPOOL_ALLOC_FORK_COPY, 8, &a);
	ASSERT_NE(NULL, p);
	fails0 = stat_of("fork_copy_failures");
	copies0 = stat_of("fork_copies");
	ASSERT_EQ(0, pool_set_knob("fail_fork_copy", 1));
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		volatile char v = p[a.length / 2];

		(void)v;
		_exit(0);
	}
	EXPECT_EQ(128 + SIGBUS, ended(pid));
	EXPECT_EQ(fails0 + 1, stat_of("fork_copy_failures"));
	EXPECT_EQ(copies0, stat_of("fork_copies"));
	EXPECT_EQ(0, pool_read_ll(POOL_DEBUGFS "/fail_fork_copy"));
	EXPECT_TRUE(rdt_pattern_same(p, a.length, 8));
	memset(p, 1, a.length);
	EXPECT_EQ(0, munmap(p, a.length));
	EXPECT_EQ(0, pool_free(self->fd, a.slice_id));
}

/*
 * A copy is pinned memory of the child: without CAP_IPC_LOCK it counts in
 * the child's VmPin against the forking task's RLIMIT_MEMLOCK, per
 * process as mlock() does, never on a count of its user. As nobody with
 * room for two chunks, one a FORK_COPY slice: the first child's copy
 * fits (one chunk in its VmPin), so does a second child's while the
 * first lives (a count of the user's would be full), and a third's once
 * the limit is cut below a chunk does not (SIGBUS, a failure counted).
 */
static int memlock_owner(size_t chunk)
{
	struct rlimit rl = { 2 * chunk, 2 * chunk };
	struct rlimit cut = { chunk / 2, chunk / 2 };
	struct mrpool_alloc a;
	int fd, hold[2], ok = 0;
	pid_t c1, c2, c3;
	char *p;

	if (pipe(hold) || setrlimit(RLIMIT_MEMLOCK, &rl) ||
	    setgroups(0, NULL) || setgid(65534) || setuid(65534))
		return 10;
	fd = pool_open();
	if (fd < 0)
		return 11;
	p = kslice(fd, MRPOOL_ALLOC_FORK_COPY, 9, &a);
	if (!p || a.length != chunk)
		return 12;
	c1 = fork();
	if (c1 == 0) {
		char c;

		close(hold[1]);
		if (!rdt_pattern_same(p, a.length, 9))
			_exit(1);
		if (pool_vmpin_kb() != (long long)(chunk >> 10))
			_exit(2);
		(void)!read(hold[0], &c, 1);	/* until the owner lets go */
		_exit(0);
	}
	c2 = fork();
	if (c2 == 0)
		_exit(rdt_pattern_same(p, a.length, 9) ? 0 : 1);
	ok |= ended(c2) == 0 ? 0 : 1;
	close(hold[1]);
	ok |= ended(c1) == 0 ? 0 : 2;
	if (setrlimit(RLIMIT_MEMLOCK, &cut))
		return 13;
	c3 = fork();
	if (c3 == 0) {
		volatile char v = p[0];

		(void)v;
		_exit(0);
	}
	ok |= ended(c3) == 128 + SIGBUS ? 0 : 4;
	return ok ? 20 + ok : 0;
}

TEST_F(kfork, copy_counted_in_the_child)
{
	long long fails0 = stat_of("fork_copy_failures");
	long long copies0 = stat_of("fork_copies");
	pid_t pid;

	POOL_SETUP_SKIPPED();
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0)
		_exit(memlock_owner(self->q0.chunk_size));
	EXPECT_EQ(0, ended(pid));
	EXPECT_EQ(fails0 + 1, stat_of("fork_copy_failures"));
	EXPECT_EQ(copies0 + 2, stat_of("fork_copies"));
}

/*
 * The parent unmaps and FREEs the slice while the child holds its copy:
 * the chunk is back in the pool at once (the copy holds none of it), the
 * next ALLOC gets that very chunk zeroed -- not the child's bytes -- and
 * the child's copy still holds what the slice had at the fork.
 */
TEST_F(kfork, copy_outlives_free)
{
	unsigned long pfn_old[8], pfn_new[8];
	int to_child[2], to_parent[2], n_old, n_new;
	struct mrpool_alloc a, b;
	char *p, *q, c = 0;
	pid_t pid;

	POOL_SETUP_SKIPPED();
	p = kslice(self->fd, MRPOOL_ALLOC_FORK_COPY, 9, &a);
	ASSERT_NE(NULL, p);
	n_old = pool_slice_pfns(a.slice_id, pfn_old, 8);
	ASSERT_EQ(1, n_old);
	ASSERT_EQ(0, pipe(to_child));
	ASSERT_EQ(0, pipe(to_parent));
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		/* the child's own bytes in part of its copy */
		memset(p, 0x77, 4096);
		if (write(to_parent[1], "w", 1) != 1 || read(to_child[0], &c, 1) != 1)
			_exit(2);
		/* the slice is gone: the copy is the child's still */
		if (p[0] != 0x77 || p[4095] != 0x77)
			_exit(3);
		_exit(pattern_at(p, 4096, a.length - 4096, 9) ? 0 : 4);
	}
	close(to_parent[1]);
	close(to_child[0]);
	ASSERT_EQ(1, read(to_parent[0], &c, 1)) TH_LOG("the child: %d", ended(pid));
	EXPECT_TRUE(rdt_pattern_same(p, a.length, 9));
	ASSERT_EQ(0, munmap(p, a.length));
	ASSERT_EQ(0, pool_free(self->fd, a.slice_id));
	/* the same chunk, zeroed, for the next slice */
	q = kslice(self->fd, 0, 0, &b);
	ASSERT_NE(NULL, q);
	n_new = pool_slice_pfns(b.slice_id, pfn_new, 8);
	ASSERT_EQ(1, n_new);
	EXPECT_EQ(pfn_old[0], pfn_new[0]);
	EXPECT_EQ(b.length, pool_nonzero_at(q, b.length));
	ASSERT_EQ(1, write(to_child[1], "r", 1));
	EXPECT_EQ(0, ended(pid));
	EXPECT_EQ(0, munmap(q, b.length));
	EXPECT_EQ(0, pool_free(self->fd, b.slice_id));
	close(to_child[1]);
	close(to_parent[0]);
}

/*
 * A slice without MRPOOL_ALLOC_FORK_COPY is as before: the child is not
 * given the mapping (SIGSEGV at its address), and with MADV_DOFORK gets a
 * mapping that faults (SIGBUS) rather than the pool's pages; no copy.
 * Kernels after 6.12 refuse MADV_DOFORK on a slice (VM_SPECIAL): there
 * the first case only.
 */
TEST_F(kfork, no_flag_no_copy)
{
	long long copies0, fails0;
	struct mrpool_alloc a;
	int dofork;
	char *p;
	pid_t pid;

	POOL_SETUP_SKIPPED();
	p = kslice(self->fd, 0, 11, &a);
	ASSERT_NE(NULL, p);
	copies0 = stat_of("fork_copies");
	fails0 = stat_of("fork_copy_failures");
	for (dofork = 0; dofork < 2; dofork++) {
		if (dofork && madvise(p, a.length, MADV_DOFORK)) {
			ASSERT_EQ(EINVAL, errno);
			TH_LOG("MADV_DOFORK refused on a slice: no inherited VMA to try");
			break;
		}
		pid = fork();
		ASSERT_LE(0, pid);
		if (pid == 0) {
			volatile char v = p[0];

			(void)v;
			_exit(0);
		}
		EXPECT_EQ(128 + (dofork ? SIGBUS : SIGSEGV), ended(pid));
	}
	EXPECT_EQ(copies0, stat_of("fork_copies"));
	EXPECT_EQ(fails0, stat_of("fork_copy_failures"));
	EXPECT_TRUE(rdt_pattern_same(p, a.length, 11));
	EXPECT_EQ(0, munmap(p, a.length));
	EXPECT_EQ(0, pool_free(self->fd, a.slice_id));
}

/*
 * libibverbs' fork support enabled before anything is registered
 * (ibv_fork_init(), which UCX calls by default): rdma-core 44 then marks
 * every range it registers MADV_DONTFORK, the pool's arenas included, while
 * ibv_is_fork_initialized() still says IBV_FORK_UNNEEDED, so the pool gives
 * children copies. The library's fork handler marks the arenas
 * MADV_DOFORK again: the child reads the parent's bytes and writes its own
 * copy, and the parent's registration still reaches the parent's pages.
 * Newer rdma-core skips that bookkeeping where the kernel copies pinned
 * pages unless RDMAV_USE_MADVISE is set, as here. Before, the child died
 * of SIGSEGV on its first read of the block.
 */
TEST(copy_after_ibv_fork_init)
{
	struct rdt_dev dev;
	struct rdt_loop lp;
	struct mrp_buf src, dst;
	struct mrp_pool *pool;
	int status = 0, st;
	pid_t pid;

	memset(&dev, 0, sizeof(dev));
	memset(&lp, 0, sizeof(lp));
	ASSERT_EQ(0, setenv("RDMAV_USE_MADVISE", "1", 1));
	ASSERT_EQ(0, ibv_fork_init());
	pool = open_pool(MRP_BACKEND_ANON, MRP_FORK_COPY);
	ASSERT_NE(NULL, pool);
	if (rdt_dev_open(&dev, NULL, NULL)) {
		EXPECT_EQ(0, mrp_pool_close(pool));
		POOL_SKIP("no RDMA device (rxe0)");
	}
	ASSERT_EQ(IBV_FORK_UNNEEDED, ibv_is_fork_initialized());
	ASSERT_EQ(0, rdt_loop_create(&lp, &dev));
	ASSERT_EQ(0, mrp_attach_pd(pool, dev.pd, RDT_ACCESS_ALL));
	ASSERT_EQ(MRP_FORK_COPY, fork_mode(pool));
	ASSERT_EQ(0, mrp_alloc(pool, LEN, dev.pd, &src));
	ASSERT_EQ(0, mrp_alloc(pool, LEN, dev.pd, &dst));
	rdt_pattern_fill(dst.addr, LEN, 1);
	rdt_pattern_fill(src.addr, LEN, 2);
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		if (!rdt_pattern_same(dst.addr, LEN, 1))
			_exit(1);
		rdt_pattern_fill(dst.addr, LEN, 3);
		_exit(rdt_pattern_same(dst.addr, LEN, 3) ? 0 : 2);
	}
	ASSERT_EQ(pid, waitpid(pid, &st, 0));
	EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) TH_LOG("status %#x", st);
	EXPECT_TRUE(rdt_pattern_same(dst.addr, LEN, 1));
	ASSERT_EQ(0, rdt_write(&lp, src.addr, src.lkey, (uintptr_t)dst.addr,
			       dst.rkey, LEN, &status));
	EXPECT_EQ(IBV_WC_SUCCESS, status);
	EXPECT_TRUE(rdt_pattern_same(dst.addr, LEN, 2));
	EXPECT_EQ(0, mrp_free(pool, src.addr));
	EXPECT_EQ(0, mrp_free(pool, dst.addr));
	EXPECT_EQ(0, mrp_pool_close_flags(pool, MRP_CLOSE_FORCE));
	rdt_loop_destroy(&lp);
	rdt_dev_close(&dev);
}

TEST_HARNESS_MAIN
