// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * libmrpool-preload in front of a program linked with jemalloc: its
 * malloc is jemalloc's (a DT_NEEDED library, so the shim's
 * dlsym(RTLD_NEXT) finds it), and the program gives blocks from malloc
 * back through jemalloc's own API (sdallocx, dallocx, rallocx, xallocx,
 * sallocx), as folly and other C++ code do once they see jemalloc. Pool
 * blocks must never reach those calls: the shim leaves allocations to
 * jemalloc and says so (mrpool-run(1), "Another allocator").
 *
 * Each test runs this binary again in a mode (mode_main), under the shim
 * and the fake libibverbs (as preload_test does) unless it is the plain
 * run, and checks its exit status, its stderr and the shim's report line.
 */
#include <fcntl.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <infiniband/verbs.h>
#include <jemalloc/jemalloc.h>

#include "kselftest_harness.h"
#include "helpers.h"

#define ENV_MODE	"MRP_JEMALLOC_TEST_MODE"

static void fill(void *p, size_t n, unsigned char seed)
{
	for (size_t i = 0; i < n; i++)
		((unsigned char *)p)[i] = (unsigned char)(seed + i * 7);
}

static bool check(const void *p, size_t n, unsigned char seed)
{
	for (size_t i = 0; i < n; i++)
		if (((const unsigned char *)p)[i] != (unsigned char)(seed + i * 7))
			return false;
	return true;
}

/*
 * Blocks above the shim's threshold (64 KiB): size-class sizes and one
 * above 2 MiB, which the pool would serve from an arena of its own.
 */
static const size_t sizes[] = { 100000, 300000, 200000, 3u << 20, 1u << 20, 70000 };
#define NBLOCKS	(sizeof(sizes) / sizeof(sizes[0]))

/* The private API on blocks from malloc; 0 when every byte stayed. */
static int private_api(void)
{
	static struct ibv_context ctx;
	struct ibv_pd pd = { .context = &ctx };
	unsigned char *p[NBLOCKS];
	struct ibv_mr *mr;

	for (size_t i = 0; i < NBLOCKS; i++) {
		p[i] = malloc(sizes[i]);
		if (!p[i])
			return 1;
		fill(p[i], sizes[i], (unsigned char)i);
		/* jemalloc's block: its own size and malloc_usable_size agree */
		if (sallocx(p[i], 0) < sizes[i] || malloc_usable_size(p[i]) != sallocx(p[i], 0))
			return 2;
	}
	/* sized and unsized frees of jemalloc's API */
	sdallocx(p[0], sizes[0], 0);
	dallocx(p[1], 0);
	/* grown by rallocx, in place or moved: the bytes follow */
	p[2] = rallocx(p[2], 500000, 0);
	if (!p[2] || sallocx(p[2], 0) < 500000 || !check(p[2], sizes[2], 2))
		return 3;
	fill(p[2], 500000, 2);
	/* xallocx never moves: at least the size the block had */
	if (xallocx(p[3], sizes[3] + 4096, 0, 0) < sizes[3] || !check(p[3], sizes[3], 3))
		return 4;
	/* a registration of a block from malloc: not pool memory, passed on */
	mr = ibv_reg_mr(&pd, p[4], sizes[4], IBV_ACCESS_LOCAL_WRITE);
	if (!mr || ibv_dereg_mr(mr))
		return 5;
	/* new blocks where the freed ones were: the live ones untouched */
	for (int round = 0; round < 4; round++) {
		unsigned char *q = mallocx(sizes[0], 0), *r = malloc(sizes[1]);

		if (!q || !r)
			return 6;
		memset(q, 0xa5, sizes[0]);
		memset(r, 0x5a, sizes[1]);
		sdallocx(q, sizes[0], 0);
		dallocx(r, 0);
	}
	if (!check(p[2], 500000, 2) || !check(p[3], sizes[3], 3) ||
	    !check(p[4], sizes[4], 4) || !check(p[5], sizes[5], 5))
		return 7;
	sdallocx(p[2], 500000, 0);
	sdallocx(p[3], sizes[3], 0);
	dallocx(p[4], 0);
	free(p[5]);
	return 0;
}

/*
 * The standard API only, with the pool forced on: large blocks are the
 * pool's (a 100000-byte request gets its 128 KiB buffer, where jemalloc's
 * size class is 112 KiB) and free, realloc and malloc_usable_size handle
 * them.
 */
static int standard_api(void)
{
	unsigned char *volatile p = malloc(100000), *q;

	if (!p || malloc_usable_size(p) != 128 * 1024)
		return 1;
	fill(p, 100000, 9);
	q = realloc(p, 400000);
	if (!q || malloc_usable_size(q) != 512 * 1024 || !check(q, 100000, 9))
		return 2;
	free(q);
	q = malloc(1000);		/* jemalloc's */
	if (!q || malloc_usable_size(q) != sallocx(q, 0))
		return 3;
	free(q);
	return 0;
}

static int mode_main(const char *mode)
{
	if (!strcmp(mode, "private"))
		return private_api();
	if (!strcmp(mode, "standard"))
		return standard_api();
	return 100;
}

/*
 * Run this binary in mode with the extra environment "K=V" env (or NULL),
 * under the shim and the fake verbs, or the fake verbs alone when plain. The shim's report line into line, what the
 * run wrote on stderr into err (len bytes each at most). Returns its wait
 * status.
 */
static int run_mode(const char *mode, bool plain, const char *env, char *line, char *err,
		    size_t len)
{
	char report[] = "/tmp/mrp_jemalloc_report.XXXXXX";
	char errpath[] = "/tmp/mrp_jemalloc_err.XXXXXX";
	int fd = mkstemp(report), efd = mkstemp(errpath), st = -1;
	ssize_t n;
	pid_t pid;

	if (fd < 0 || efd < 0)
		return -1;
	pid = fork();
	if (pid == 0) {
		setenv(ENV_MODE, mode, 1);
		setenv("MRPOOL_BACKEND", "anon", 1);
		setenv("MRPOOL_PRELOAD_REPORT", report, 1);
		unsetenv("MRPOOL_PRELOAD_MIN");
		unsetenv("MRPOOL_PRELOAD_ALIGNED_MIN");
		unsetenv("MRPOOL_PRELOAD_FOREIGN_MALLOC");
		/* active from the start: the modes allocate before any verbs call */
		setenv("MRPOOL_PRELOAD_INHERIT", "all", 1);
		setenv("LD_PRELOAD", plain ? MRP_FAKE_PATH : MRP_PRELOAD_PATH " " MRP_FAKE_PATH, 1);
		if (env)
			putenv((char *)env);
		dup2(efd, STDERR_FILENO);
		execl("/proc/self/exe", "preload_jemalloc", (char *)NULL);
		_exit(127);
	}
	if (pid > 0)
		waitpid(pid, &st, 0);
	n = pread(fd, line, len - 1, 0);
	line[n > 0 ? n : 0] = 0;
	n = pread(efd, err, len - 1, 0);
	err[n > 0 ? n : 0] = 0;
	close(fd);
	close(efd);
	unlink(report);
	unlink(errpath);
	return st;
}

static unsigned long long field(const char *line, const char *name)
{
	const char *s = strstr(line, name);

	return s ? strtoull(s + strlen(name), NULL, 10) : ~0ull;
}

/* The program itself is right: without the shim it exits 0, and says nothing. */
TEST(plain)
{
	char line[1024], err[1024];

	ASSERT_EQ(0, run_mode("private", true, NULL, line, err, sizeof(line))) TH_LOG("%s", err);
	EXPECT_STREQ("", err);
}

/*
 * Under the shim: jemalloc's API gets jemalloc's blocks only, because the
 * shim left every allocation to jemalloc (said once on stderr, and in the
 * report), and the registration of one was passed on.
 */
TEST(left_to_jemalloc)
{
	char line[1024], err[1024];
	int st = run_mode("private", false, NULL, line, err, sizeof(line));

	ASSERT_TRUE(WIFEXITED(st)) TH_LOG("status %#x, stderr: %s", st, err);
	ASSERT_EQ(0, WEXITSTATUS(st)) TH_LOG("stderr: %s", err);
	EXPECT_NE(NULL, strstr(err, "mrpool-preload: malloc is libjemalloc.so.2's, not glibc's: "
				    "allocations left to it")) TH_LOG("stderr: %s", err);
	EXPECT_EQ(0, field(line, "allocations from the pool ")) TH_LOG("%s", line);
	EXPECT_EQ(1, field(line, " passed ")) TH_LOG("%s", line);
	EXPECT_NE(NULL, strstr(line, ", malloc libjemalloc.so.2 (not glibc's: allocations "
				     "left to it)")) TH_LOG("%s", line);
}

/* MRPOOL_PRELOAD_MIN=0 asked for no allocations: nothing to say. */
TEST(min_zero_silent)
{
	char line[1024], err[1024];

	ASSERT_EQ(0, run_mode("private", false, "MRPOOL_PRELOAD_MIN=0", line, err,
			      sizeof(line))) TH_LOG("%s", err);
	EXPECT_EQ(NULL, strstr(err, "not glibc's")) TH_LOG("stderr: %s", err);
	EXPECT_EQ(0, field(line, "allocations from the pool ")) TH_LOG("%s", line);
}

/*
 * MRPOOL_PRELOAD_FOREIGN_MALLOC=1: the pool serves large blocks anyway,
 * for a program that uses the standard API only; said on stderr.
 */
TEST(forced)
{
	char line[1024], err[1024];
	unsigned long long n;

	ASSERT_EQ(0, run_mode("standard", false, "MRPOOL_PRELOAD_FOREIGN_MALLOC=1", line, err,
			      sizeof(line))) TH_LOG("%s", err);
	EXPECT_NE(NULL, strstr(err, "mrpool-preload: malloc is libjemalloc.so.2's, not glibc's: "
				    "MRPOOL_PRELOAD_FOREIGN_MALLOC=1")) TH_LOG("stderr: %s", err);
	/* the program's two, and libstdc++'s exception pool (jemalloc links it) */
	n = field(line, "allocations from the pool ");
	EXPECT_TRUE(n == 2 || n == 3) TH_LOG("%s", line);
	EXPECT_NE(NULL, strstr(line, "(not glibc's: pool forced)")) TH_LOG("%s", line);
}

/* A mode of run_mode() runs instead of the tests. */
__attribute__((constructor)) static void mode_run(void)
{
	const char *mode = getenv(ENV_MODE);

	if (mode)
		exit(mode_main(mode));
}

TEST_HARNESS_MAIN
