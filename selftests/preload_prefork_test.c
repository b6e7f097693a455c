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

/* A hang catcher only (30 s by default): under TCG every sh and cat of the
 * spawn run opens a pool of its own. */
#undef TEST_TIMEOUT_DEFAULT
#define TEST_TIMEOUT_DEFAULT 600

#define RUN	"tools/run/mrpool-run"
#define PROG	"selftests/prefork_server"
#define STATS	"/sys/class/misc/mrpool/stats/fork_copies"

struct run {
	int status;
	char out[1024];
	char report[1 << 16];	/* the shim's report, a line per process (sh, cat too) */
};

static void slurp(const char *path, char *buf, size_t len)
{
	int fd = open(path, O_RDONLY);
	ssize_t n = fd < 0 ? 0 : read(fd, buf, len - 1);

	buf[n > 0 ? n : 0] = 0;
	if (fd >= 0)
		close(fd);
	unlink(path);
}

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

static void run(const char *mode, bool shim, struct run *r)
{
	char out[] = "/tmp/mrp_prog_out.XXXXXX", rep[] = "/tmp/mrp_prog_rep.XXXXXX";
	int ofd = mkstemp(out), rfd = mkstemp(rep);
	pid_t pid;

	r->status = -1;
	r->out[0] = r->report[0] = 0;
	if (ofd < 0 || rfd < 0)
		return;
	close(rfd);
	pid = fork();
	if (pid == 0) {
		dup2(ofd, STDOUT_FILENO);
		if (!shim)
			execl(PROG, "prefork_server", mode, (char *)NULL);
		setenv("MRPOOL_BACKEND", "kernel", 1);
		setenv("MRPOOL_PRELOAD_REPORT", rep, 1);
		execl(RUN, "mrpool-run", "--all", PROG, mode, (char *)NULL);
		_exit(127);
	}
	close(ofd);
	if (pid > 0)
		waitpid(pid, &r->status, 0);
	slurp(out, r->out, sizeof(r->out));
	slurp(rep, r->report, sizeof(r->report));
}

static unsigned long long report_sum(const char *report, const char *name)
{
	unsigned long long sum = 0;

	for (const char *s = report; (s = strstr(s, name)); s += strlen(name))
		sum += strtoull(s + strlen(name), NULL, 10);
	return sum;
}

static void first_line(const char *out, char *line, size_t len)
{
	size_t n = strcspn(out, "\n");

	snprintf(line, len, "%.*s", (int)n, out);
}

static void same_as_glibc(struct __test_metadata *_metadata, const char *mode,
			  const char *pool_line, unsigned long long min_forks)
{
	struct run plain, shim;
	long long c0, c1, c2;
	char a[512], b[512];

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
	first_line(plain.out, a, sizeof(a));
	first_line(shim.out, b, sizeof(b));
	EXPECT_STREQ(a, b);
	EXPECT_NE(NULL, strstr(plain.out, "pool-like blocks 0 of")) TH_LOG("%s", plain.out);
	EXPECT_NE(NULL, strstr(shim.out, pool_line)) TH_LOG("%s", shim.out);
	EXPECT_NE(NULL, strstr(shim.report, ": backend kernel,")) TH_LOG("%s", shim.report);
	EXPECT_LE(min_forks, report_sum(shim.report, "forks with pool blocks "))
		TH_LOG("%s", shim.report);
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
	struct run plain, shim;
	char a[512], b[512];

	if (access("/dev/mrpool", R_OK | W_OK))
		SKIP(return, "no /dev/mrpool");
	run("userns", false, &plain);
	if (plain.status)
		SKIP(return, "no user namespace without the shim either: %.200s", plain.out);
	run("userns", true, &shim);
	EXPECT_EQ(0, shim.status) TH_LOG("%s", shim.out);
	first_line(plain.out, a, sizeof(a));
	first_line(shim.out, b, sizeof(b));
	EXPECT_STREQ(a, b);
	EXPECT_NE(NULL, strstr(shim.out, "pool-like blocks 8 of 8")) TH_LOG("%s", shim.out);
	EXPECT_NE(NULL, strstr(shim.report, ": backend kernel,")) TH_LOG("%s", shim.report);
}

TEST_HARNESS_MAIN
