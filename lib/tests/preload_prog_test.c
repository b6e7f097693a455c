// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Programs that fork with large blocks live, under libmrpool-preload on
 * the host (anonymous backend, active from the start as with
 * mrpool-run --all): tests/prefork_server.c's pre-fork server and its
 * system()/popen()/fork+exec run, each once without the shim and once
 * with it. Both runs must exit 0 and print the same result line; under the
 * shim every large block must be the pool's and the shim's report must
 * count the forks made with them live. With MRPOOL_FORK=none (a child
 * gets none of the pool's memory) the server's workers must fail: the
 * check can tell. selftests/preload_prefork_test runs the same program on
 * the kernel's pool in the guest. Its userns run: a program of one thread
 * creates a user namespace with the pool's thread running, as without
 * the shim, and the pool still trims after.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kselftest_harness.h"

/* A hang catcher only (30 s by default): a busy host. */
#undef TEST_TIMEOUT_DEFAULT
#define TEST_TIMEOUT_DEFAULT 600

struct run {
	int status;
	char out[1024];		/* the program's stdout */
	char report[1 << 16];	/* the shim's report, a line per process */
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

/* argv (argv[0] the program's path), with the shim when shim, env ("K=V") added. */
static void run_argv(char *const argv[], bool shim, const char *env, struct run *r)
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
		if (shim) {
			setenv("LD_PRELOAD", MRP_PRELOAD_PATH, 1);
			setenv("MRPOOL_PRELOAD_INHERIT", "all", 1);
			setenv("MRPOOL_BACKEND", "anon", 1);
			setenv("MRPOOL_PRELOAD_REPORT", rep, 1);
		}
		if (env)
			putenv((char *)env);
		execv(argv[0], argv);
		_exit(127);
	}
	close(ofd);
	if (pid > 0)
		waitpid(pid, &r->status, 0);
	slurp(out, r->out, sizeof(r->out));
	slurp(rep, r->report, sizeof(r->report));
}

/* MRP_PROG_PATH mode, with the shim when shim, env ("K=V") added. */
static void run(const char *mode, bool shim, const char *env, struct run *r)
{
	char *const argv[] = { MRP_PROG_PATH, (char *)mode, NULL };

	run_argv(argv, shim, env, r);
}

/* The sum of a report field over every process's line. */
static unsigned long long report_sum(const char *report, const char *name)
{
	unsigned long long sum = 0;

	for (const char *s = report; (s = strstr(s, name)); s += strlen(name))
		sum += strtoull(s + strlen(name), NULL, 10);
	return sum;
}

/* The program's first line (its result), without the newline. */
static void first_line(const char *out, char *line, size_t len)
{
	size_t n = strcspn(out, "\n");

	snprintf(line, len, "%.*s", (int)n, out);
}

static void same_as_glibc(struct __test_metadata *_metadata, const char *mode,
			  const char *pool_line, unsigned long long min_forks)
{
	struct run plain, shim;
	char a[512], b[512];

	run(mode, false, NULL, &plain);
	ASSERT_EQ(0, plain.status) TH_LOG("without the shim: %s", plain.out);
	run(mode, true, NULL, &shim);
	ASSERT_EQ(0, shim.status) TH_LOG("under the shim: %s\nreport: %s", shim.out, shim.report);
	first_line(plain.out, a, sizeof(a));
	first_line(shim.out, b, sizeof(b));
	EXPECT_STREQ(a, b);
	/* the blocks were glibc's in one run and the pool's in the other */
	EXPECT_NE(NULL, strstr(plain.out, "pool-like blocks 0 of")) TH_LOG("%s", plain.out);
	EXPECT_NE(NULL, strstr(shim.out, pool_line)) TH_LOG("%s", shim.out);
	EXPECT_NE(NULL, strstr(shim.report, ": backend anon,")) TH_LOG("%s", shim.report);
	EXPECT_LE(min_forks, report_sum(shim.report, "forks with pool blocks "))
		TH_LOG("%s", shim.report);
}

/*
 * A pre-fork server's workers read and write the blocks they inherited,
 * each its own copy, and the parent's stay as it filled them.
 */
TEST(prefork_server)
{
	same_as_glibc(_metadata, "prefork", "pool-like blocks 8 of 8", 4);
}

/*
 * system(), popen() and a fork+exec helper while the blocks are live and
 * another thread rewrites blocks of its own: the same effects and blocks.
 */
TEST(spawn_with_blocks_live)
{
	same_as_glibc(_metadata, "spawn", "pool-like blocks 12 of 12", 12);
}

/* A child without the pool's memory (MRPOOL_FORK=none): the server fails. */
TEST(prefork_server_fails_without_copies)
{
	struct run shim;

	run("prefork", true, "MRPOOL_FORK=none", &shim);
	EXPECT_NE(0, shim.status) TH_LOG("%s", shim.out);
}

/*
 * The pool open and its thread running (large blocks allocated and freed,
 * the trim pending), a program of one thread of its own creates a user
 * namespace, as without the shim (the kernel refuses it to a process of
 * more than one thread: the shim's unshare() stops the pool's thread for
 * the call), and the pool thread trims afterwards: the arenas' locked
 * memory goes down with no further call of the program.
 */
TEST(unshare_userns_with_pool)
{
	struct run plain, shim;
	long before = -1, later = -1;
	const char *s;
	char a[512], b[512];

	run("userns", false, NULL, &plain);
	if (plain.status)
		SKIP(return, "no user namespace without the shim either: %.200s", plain.out);
	run("userns", true, "MRPOOL_TRIM_DELAY_MS=100", &shim);
	EXPECT_EQ(0, shim.status) TH_LOG("%s", shim.out);
	first_line(plain.out, a, sizeof(a));
	first_line(shim.out, b, sizeof(b));
	EXPECT_STREQ(a, b);
	EXPECT_NE(NULL, strstr(shim.out, "pool-like blocks 8 of 8")) TH_LOG("%s", shim.out);
	s = strstr(shim.out, "locked kB at the unshare ");
	ASSERT_NE(NULL, s) TH_LOG("%s", shim.out);
	ASSERT_EQ(2, sscanf(s, "locked kB at the unshare %ld, later %ld", &before, &later));
	/* the arenas were locked at the unshare, and trimmed after it */
	EXPECT_LT(0, before);
	EXPECT_LT(later, before) TH_LOG("%s", shim.out);
}

/* glibc-costs SCENARIO at small sizes (a few MiB in all) */
static void costs(const char *scen, bool shim, const char *env, struct run *r)
{
	char *const argv[] = { MRP_COSTS_PATH, "-s", "256", "-m", "4", "-n", "8", "-b", "256",
			       (char *)scen, NULL };

	run_argv(argv, shim, env, r);
}

/*
 * make bench's glibc-costs program at small sizes: realloc growth (and
 * above MRPOOL_PRELOAD_MAX), a calloc, shrinking reallocs, fork with the
 * child writing every page and with an idle child check their bytes and
 * exit 0 without the shim and under it, where the pool served them (the
 * forks counted with its blocks live).
 */
TEST(glibc_costs_checks)
{
	static const char *const scens[] = { "grow", "calloc", "shrink", "fork", "fork-idle" };
	struct run plain, shim;

	for (unsigned int i = 0; i < sizeof(scens) / sizeof(scens[0]); i++) {
		costs(scens[i], false, NULL, &plain);
		EXPECT_EQ(0, plain.status) TH_LOG("%s without the shim: %s", scens[i], plain.out);
		EXPECT_NE(NULL, strstr(plain.out, " ok\n")) TH_LOG("%s", plain.out);
		costs(scens[i], true, NULL, &shim);
		EXPECT_EQ(0, shim.status) TH_LOG("%s under the shim: %s", scens[i], shim.out);
		EXPECT_NE(NULL, strstr(shim.out, " ok\n")) TH_LOG("%s", shim.out);
		EXPECT_NE(NULL, strstr(shim.report, ": backend anon,")) TH_LOG("%s", shim.report);
		EXPECT_LT(0, report_sum(shim.report, "allocations from the pool "))
			TH_LOG("%s: %s", scens[i], shim.report);
		if (!strncmp(scens[i], "fork", 4))
			EXPECT_EQ(1, report_sum(shim.report, "forks with pool blocks "))
				TH_LOG("%s", shim.report);
	}
	/* the growth past the shim's maximum: from the pool to glibc's realloc */
	costs("grow", true, "MRPOOL_PRELOAD_MAX=1M", &shim);
	EXPECT_EQ(0, shim.status) TH_LOG("%s", shim.out);
	EXPECT_LT(0, report_sum(shim.report, "allocations from the pool ")) TH_LOG("%s", shim.report);
}

/* The fork check can tell: a child without the pool's memory fails it. */
TEST(glibc_costs_fork_fails_without_copies)
{
	struct run shim;

	costs("fork", true, "MRPOOL_FORK=none", &shim);
	EXPECT_EQ(1, WEXITSTATUS(shim.status)) TH_LOG("%s", shim.out);
	EXPECT_NE(NULL, strstr(shim.out, "FAIL the child")) TH_LOG("%s", shim.out);
}

TEST_HARNESS_MAIN
