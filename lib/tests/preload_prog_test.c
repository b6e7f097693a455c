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

#include "prefork_runner.h"

/* The environment of a program preloaded with the shim (anonymous backend). */
static void exec_shim_env(bool shim, const char *report)
{
	if (!shim)
		return;
	setenv("LD_PRELOAD", MRP_PRELOAD_PATH, 1);
	setenv("MRPOOL_PRELOAD_INHERIT", "all", 1);
	setenv("MRPOOL_BACKEND", "anon", 1);
	setenv("MRPOOL_PRELOAD_REPORT", report, 1);
}

/* MRP_PROG_PATH in @mode, preloaded with the shim when @shim. */
static void exec_prog(const char *mode, bool shim, const char *report)
{
	exec_shim_env(shim, report);
	execl(MRP_PROG_PATH, "prefork_server", mode, (char *)NULL);
}

/* MRP_PROG_PATH mode, with the shim when shim, env ("K=V") added. */
static void run(const char *mode, bool shim, const char *env, struct prefork_run *r)
{
	prefork_run(exec_prog, mode, shim, env, r);
}

static void same_as_glibc(struct __test_metadata *_metadata, const char *mode,
			  const char *pool_line, unsigned long long min_forks)
{
	struct prefork_run plain, shim;

	run(mode, false, NULL, &plain);
	ASSERT_EQ(0, plain.status) TH_LOG("without the shim: %s", plain.out);
	run(mode, true, NULL, &shim);
	ASSERT_EQ(0, shim.status) TH_LOG("under the shim: %s\nreport: %s", shim.out, shim.report);
	prefork_expect_same(_metadata, &plain, &shim, pool_line, ": backend anon,", min_forks);
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
	struct prefork_run shim;

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
	struct prefork_run plain, shim;
	long before = -1, later = -1;
	const char *s;

	run("userns", false, NULL, &plain);
	if (plain.status)
		SKIP(return, "no user namespace without the shim either: %.200s", plain.out);
	run("userns", true, "MRPOOL_TRIM_DELAY_MS=100", &shim);
	EXPECT_EQ(0, shim.status) TH_LOG("%s", shim.out);
	prefork_expect_same_line(_metadata, &plain, &shim);
	EXPECT_NE(NULL, strstr(shim.out, "pool-like blocks 8 of 8")) TH_LOG("%s", shim.out);
	s = strstr(shim.out, "locked kB at the unshare ");
	ASSERT_NE(NULL, s) TH_LOG("%s", shim.out);
	ASSERT_EQ(2, sscanf(s, "locked kB at the unshare %ld, later %ld", &before, &later));
	/* the arenas were locked at the unshare, and trimmed after it */
	EXPECT_LT(0, before);
	EXPECT_LT(later, before) TH_LOG("%s", shim.out);
}

/* MRP_COSTS_PATH's scenario @scen at small sizes, under the shim when @shim. */
static void exec_costs(const char *scen, bool shim, const char *report)
{
	exec_shim_env(shim, report);
	execl(MRP_COSTS_PATH, "glibc-costs", "-s", "256", "-m", "4", "-n", "8", "-b", "256",
	      scen, (char *)NULL);
}

static void costs(const char *scen, bool shim, const char *env, struct prefork_run *r)
{
	prefork_run(exec_costs, scen, shim, env, r);
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
	struct prefork_run plain, shim;

	for (unsigned int i = 0; i < sizeof(scens) / sizeof(scens[0]); i++) {
		costs(scens[i], false, NULL, &plain);
		EXPECT_EQ(0, plain.status) TH_LOG("%s without the shim: %s", scens[i], plain.out);
		EXPECT_NE(NULL, strstr(plain.out, " ok\n")) TH_LOG("%s", plain.out);
		costs(scens[i], true, NULL, &shim);
		EXPECT_EQ(0, shim.status) TH_LOG("%s under the shim: %s", scens[i], shim.out);
		EXPECT_NE(NULL, strstr(shim.out, " ok\n")) TH_LOG("%s", shim.out);
		EXPECT_NE(NULL, strstr(shim.report, ": backend anon,")) TH_LOG("%s", shim.report);
		EXPECT_LT(0, prefork_report_sum(shim.report, "allocations from the pool "))
			TH_LOG("%s: %s", scens[i], shim.report);
		if (!strncmp(scens[i], "fork", 4))
			EXPECT_EQ(1, prefork_report_sum(shim.report, "forks with pool blocks "))
				TH_LOG("%s", shim.report);
	}
	/* the growth past the shim's maximum: from the pool to glibc's realloc */
	costs("grow", true, "MRPOOL_PRELOAD_MAX=1M", &shim);
	EXPECT_EQ(0, shim.status) TH_LOG("%s", shim.out);
	EXPECT_LT(0, prefork_report_sum(shim.report, "allocations from the pool ")) TH_LOG("%s", shim.report);
}

/* The fork check can tell: a child without the pool's memory fails it. */
TEST(glibc_costs_fork_fails_without_copies)
{
	struct prefork_run shim;

	costs("fork", true, "MRPOOL_FORK=none", &shim);
	EXPECT_EQ(1, WEXITSTATUS(shim.status)) TH_LOG("%s", shim.out);
	EXPECT_NE(NULL, strstr(shim.out, "FAIL the child")) TH_LOG("%s", shim.out);
}

TEST_HARNESS_MAIN
