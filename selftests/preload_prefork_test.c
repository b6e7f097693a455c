// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Programs that fork with large blocks live, under mrpool-run --all on the
 * kernel's pool (MRPOOL_BACKEND=kernel, the shim's default fork copy;
 * issue 32): lib/tests/prefork_server.c's pre-fork server (workers on one
 * listening socket reading and writing the blocks they inherited, every
 * reply checked, the parent's blocks intact after) and its system()/
 * popen()/fork+exec run with another thread rewriting blocks. Each runs
 * once without the shim and once with it: both exit 0 with the same
 * result line; under the shim the blocks are the pool's, the report says
 * backend kernel and counts the forks, and the module's fork_copies
 * counter moved. Its userns run: unshare(CLONE_NEWUSER) with the pool's
 * thread running succeeds as without the shim. The host's
 * preload_prog_test runs them on the anonymous backend.
 *
 * VM kernels: one (selftests/run.sh: the shim and an outside program; the
 * kernel's fork copy under it is lib_fork_copy_test's on every kernel)
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kselftest_harness.h"

#include "tests/prefork_runner.h"

/* A hang catcher only (30 s by default): under TCG every sh and cat of the
 * spawn run opens a pool of its own. */
#undef TEST_TIMEOUT_DEFAULT
#define TEST_TIMEOUT_DEFAULT 600

#define RUN	"tools/run/mrpool-run"
#define PROG	"selftests/prefork_server"
#define STATS	"/sys/class/misc/mrpool/stats/fork_copies"

static long long fork_copies(void)
{
	char buf[64];
	int fd = open(STATS, O_RDONLY);
	ssize_t n = fd < 0 ? -1 : read(fd, buf, sizeof(buf) - 1);

	if (fd >= 0)
		close(fd);
	if (n <= 0)
		return -1;
	buf[n] = 0;
	return atoll(buf);
}

/* PROG in @mode, through mrpool-run --all on the kernel's pool when @shim. */
static void exec_prog(const char *mode, bool shim, const char *report)
{
	if (!shim)
		execl(PROG, "prefork_server", mode, (char *)NULL);
	setenv("MRPOOL_BACKEND", "kernel", 1);
	setenv("MRPOOL_PRELOAD_REPORT", report, 1);
	execl(RUN, "mrpool-run", "--all", PROG, mode, (char *)NULL);
}

static void run(const char *mode, bool shim, struct prefork_run *r)
{
	prefork_run(exec_prog, mode, shim, NULL, r);
}

static void same_as_glibc(struct __test_metadata *_metadata, const char *mode,
			  const char *pool_line, unsigned long long min_forks)
{
	struct prefork_run plain, shim;
	long long c0, c1, c2;

	if (access("/dev/mrpool", R_OK | W_OK))
		SKIP(return, "no /dev/mrpool");
	ASSERT_EQ(0, access(PROG, X_OK)) TH_LOG("%s not built (make -C selftests)", PROG);
	c0 = fork_copies();
	ASSERT_LE(0, c0) TH_LOG("%s unreadable", STATS);
	run(mode, false, &plain);
	c1 = fork_copies();
	ASSERT_EQ(0, plain.status) TH_LOG("without the shim: %s", plain.out);
	run(mode, true, &shim);
	c2 = fork_copies();
	ASSERT_EQ(0, shim.status) TH_LOG("under the shim: %s\nreport: %s", shim.out, shim.report);
	TH_LOG("%s", shim.out);
	prefork_expect_same(_metadata, &plain, &shim, pool_line, ": backend kernel,", min_forks);
	/* the children's copies were the module's, in the shimmed run only */
	EXPECT_EQ(c0, c1);
	EXPECT_LT(c1, c2);
}

/*
 * A pre-fork server's workers read and write the blocks they inherited
 * from the kernel's pool, each its own copy; the parent's stay intact.
 */
TEST(prefork_server)
{
	same_as_glibc(_metadata, "prefork", "pool-like blocks 8 of 8", 4);
}

/* system(), popen() and fork+exec with pool blocks live and being written. */
TEST(spawn_with_blocks_live)
{
	same_as_glibc(_metadata, "spawn", "pool-like blocks 12 of 12", 12);
}

/*
 * The kernel's pool open and its thread running, a program of one thread
 * of its own creates a user namespace as without the shim (whose
 * unshare() stops the pool's thread for the call; the host's
 * preload_prog_test also sees the trim after it).
 */
TEST(unshare_userns_with_pool)
{
	struct prefork_run plain, shim;

	if (access("/dev/mrpool", R_OK | W_OK))
		SKIP(return, "no /dev/mrpool");
	run("userns", false, &plain);
	if (plain.status)
		SKIP(return, "no user namespace without the shim either: %.200s", plain.out);
	run("userns", true, &shim);
	EXPECT_EQ(0, shim.status) TH_LOG("%s", shim.out);
	prefork_expect_same_line(_metadata, &plain, &shim);
	EXPECT_NE(NULL, strstr(shim.out, "pool-like blocks 8 of 8")) TH_LOG("%s", shim.out);
	EXPECT_NE(NULL, strstr(shim.report, ": backend kernel,")) TH_LOG("%s", shim.report);
}

TEST_HARNESS_MAIN
