// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * A forked child under the shim on the kernel backend, with libibverbs'
 * fork support on (RDMAV_FORK_SAFE): the program's own registration of a
 * pool block (one the shim passes on: remote write) makes libibverbs mark
 * the block MADV_DONTFORK, which the pool's prepare handler cannot undo
 * on kernels after 6.12 (they refuse MADV_DOFORK on a module's mapping).
 * The child then lacks that range of the arena it otherwise has as a copy
 * (MRP_FORK_COPY): the shim must cover the hole with a placeholder, or
 * the child's own next mmap() may land there and be taken for pool
 * blocks. Checked with mincore(): every page of the block's range is
 * mapped in the child. On kernels that honour MADV_DOFORK the child has
 * the copy there and the check passes the same way.
 *
 * The test runs itself under tools/run/mrpool-run (FORK_HOLES_INNER=1):
 * the inner run is the program.
 *
 * VM kernels: all (whether MADV_DOFORK is refused is the kernel's)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
#include <infiniband/verbs.h>

#pragma GCC diagnostic ignored "-Wunused-parameter"
#include "kselftest_harness.h"

#include "pool_util.h"

#define RUN		"tools/run/mrpool-run"
#define BLOCK		(8UL << 20)

/*
 * Exit codes of the inner run: 0 passed, 4 no device, 21 a hole in the
 * child, others a step that failed.
 */
static int inner(void)
{
	struct ibv_device **list;
	struct ibv_context *ctx;
	unsigned char vec[64];
	struct ibv_pd *pd;
	struct ibv_mr *mr;
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);
	int st, n;
	char *p;
	pid_t pid;

	if (ibv_fork_init())
		return 10;
	list = ibv_get_device_list(&n);
	if (!list || n < 1)
		return 4;
	ctx = ibv_open_device(list[0]);
	pd = ctx ? ibv_alloc_pd(ctx) : NULL;
	if (!pd)
		return 11;
	p = malloc(BLOCK);
	if (!p)
		return 12;
	memset(p, 0x3c, BLOCK);
	/* remote access: passed on to libibverbs, which marks it DONTFORK */
	mr = ibv_reg_mr(pd, p, BLOCK, IBV_ACCESS_LOCAL_WRITE |
			IBV_ACCESS_REMOTE_WRITE);
	if (!mr)
		return 13;
	pid = fork();
	if (pid < 0)
		return 14;
	if (pid == 0) {
		uintptr_t q = ((uintptr_t)p + pg - 1) & ~(pg - 1);

		for (; q + pg <= (uintptr_t)p + BLOCK; q += pg)
			if (mincore((void *)q, pg, vec) && errno == ENOMEM)
				_exit(1);	/* a hole in the child */
		_exit(0);
	}
	if (waitpid(pid, &st, 0) != pid)
		return 15;
	ibv_dereg_mr(mr);
	free(p);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	ibv_free_device_list(list);
	if (!WIFEXITED(st))
		return 30;
	return WEXITSTATUS(st) ? 21 : 0;
}

/* The child of a forked program has no hole where its arena was. */
TEST(child_arena_has_no_holes)
{
	char self[4096];
	ssize_t n;
	pid_t pid;
	int st;

	if (access(POOL_DEV, F_OK))
		POOL_SKIP("mrpool.ko not loaded");
	if (access(RUN, X_OK))
		POOL_SKIP(RUN " not built");
	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	ASSERT_LT(0, n);
	self[n] = '\0';
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		setenv("FORK_HOLES_INNER", "1", 1);
		setenv("RDMAV_FORK_SAFE", "1", 1);
		setenv("MRPOOL_BACKEND", "kernel", 1);
		execl(RUN, RUN, self, (char *)NULL);
		_exit(99);
	}
	ASSERT_EQ(pid, waitpid(pid, &st, 0));
	ASSERT_TRUE(WIFEXITED(st)) TH_LOG("status %#x", st);
	if (WEXITSTATUS(st) == 4)
		POOL_SKIP("no RDMA device in this guest");
	EXPECT_EQ(0, WEXITSTATUS(st)) TH_LOG("inner run failed: %d (21: a hole)",
					     WEXITSTATUS(st));
}

int main(int argc, char **argv)
{
	if (getenv("FORK_HOLES_INNER"))
		return inner();
	return test_harness_run(argc, argv);
}
