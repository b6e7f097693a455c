// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Module lifetime: rmmod is refused while a file or a mapping is open and
 * succeeds after, giving all memory back; invalid parameters refuse to
 * load. Each test reloads kmod/mrpool.ko with the parameters it found, so
 * the tests after it still have the module.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <libgen.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/syscall.h>

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

static const char *const param_names[] = {
	"pool_mb", "max_mb", "chunk_kb", "numa_node", "idle_trim_sec",
	"max_user_mb", "pmd_map",
};

FIXTURE(mod) {
	char ko[PATH_MAX];
	char params[512];
};

static int delete_module(const char *name)
{
	return syscall(SYS_delete_module, name, O_NONBLOCK) ? -errno : 0;
}

static int load_module(const char *ko, const char *params)
{
	int fd = open(ko, O_RDONLY | O_CLOEXEC), ret;

	if (fd < 0)
		return -errno;
	ret = syscall(SYS_finit_module, fd, params, 0) ? -errno : 0;
	close(fd);
	return ret;
}

/*
 * Free memory in KiB, counting the per-cpu page lists too: pages freed
 * a moment ago sit there, invisible in MemFree.
 */
static long long mem_free_kb(void)
{
	long long pages = 0, v;
	char line[256];
	FILE *f = fopen("/proc/zoneinfo", "re");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, " pages free %lld", &v) == 1 ||
		    sscanf(line, " count: %lld", &v) == 1)
			pages += v;
	fclose(f);
	return pages * (sysconf(_SC_PAGESIZE) / 1024);
}

FIXTURE_SETUP(mod)
{
	char exe[PATH_MAX], val[64];
	size_t i, n = 0;
	ssize_t len;

	if (access(POOL_DEV, F_OK))
		POOL_SETUP_SKIP(POOL_DEV " missing: mrpool.ko not loaded");
	if (getuid() != 0)
		POOL_SETUP_SKIP("needs root to unload the module");
	len = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	ASSERT_LT(0, len);
	exe[len] = '\0';
	snprintf(self->ko, sizeof(self->ko), "%s/../kmod/mrpool.ko",
		 dirname(exe));
	ASSERT_EQ(0, access(self->ko, R_OK));
	for (i = 0; i < sizeof(param_names) / sizeof(param_names[0]); i++) {
		pool_param_str(param_names[i], val, sizeof(val));
		if (val[0])
			n += snprintf(self->params + n, sizeof(self->params) - n,
				      "%s=%s ", param_names[i], val);
	}
}

FIXTURE_TEARDOWN(mod)
{
	/* Whatever happened, leave the module loaded as it was. */
	if (self->ko[0] && access("/sys/module/mrpool", F_OK))
		load_module(self->ko, self->params);
}

/* rmmod fails while a file or a mapping is open, then frees everything. */
TEST_F(mod, rmmod_refused_while_open)
{
	long long total, before, after;
	struct mrpool_alloc a;
	void *p;
	int fd;

	fd = pool_open();
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, pool_alloc(fd, 1, &a));
	p = pool_map(fd, &a);
	ASSERT_NE(MAP_FAILED, p);
	EXPECT_EQ(-EWOULDBLOCK, delete_module("mrpool"));
	close(fd);
	/* The mapping still holds the file, hence the module. */
	EXPECT_EQ(-EWOULDBLOCK, delete_module("mrpool"));
	ASSERT_EQ(0, munmap(p, a.length));

	total = pool_attr("total_bytes");
	before = mem_free_kb();
	ASSERT_EQ(0, delete_module("mrpool"));
	after = mem_free_kb();
	EXPECT_NE(0, access("/sys/module/mrpool", F_OK));
	/* The pool's pages are back (other activity is a few pages). */
	EXPECT_LE(before + total / 1024 - 1024, after);
	TH_LOG("pool held %lld KiB; free memory %lld -> %lld KiB", total / 1024,
	       before, after);

	ASSERT_EQ(0, load_module(self->ko, self->params));
	EXPECT_EQ(0, access(POOL_DEV, F_OK));
}

/* Invalid parameters refuse to load with -EINVAL. */
TEST_F(mod, invalid_params_refused)
{
	static const char *const bad[] = {
		"chunk_kb=3000", "chunk_kb=8192", "chunk_kb=0",
		"pool_mb=64 max_mb=32", "max_mb=0", "numa_node=999",
		"numa_node=-5", "idle_trim_sec=100000", "max_user_mb=4000000",
		"pmd_map=maybe",
	};
	struct mrpool_query q;
	size_t i;
	int fd;

	ASSERT_EQ(0, delete_module("mrpool"));
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int ret = load_module(self->ko, bad[i]);

		if (ret != -EINVAL)
			TH_LOG("params '%s': %d", bad[i], ret);
		EXPECT_EQ(-EINVAL, ret);
		if (!access("/sys/module/mrpool", F_OK))
			ASSERT_EQ(0, delete_module("mrpool"));
	}
	/* A small chunk size is fine, and QUERY reports it. */
	ASSERT_EQ(0, load_module(self->ko, "chunk_kb=64 pool_mb=1"));
	fd = pool_open();
	ASSERT_LE(0, fd);
	EXPECT_EQ(0, pool_query(fd, &q));
	EXPECT_EQ(64 * 1024ULL, q.chunk_size);
	EXPECT_EQ(1 * MIB, q.total_bytes);
	close(fd);
	ASSERT_EQ(0, delete_module("mrpool"));
	ASSERT_EQ(0, load_module(self->ko, self->params));
}

/* Every parameter carries a description for modinfo. */
TEST_F(mod, params_described)
{
	char cmd[PATH_MAX + 64], line[512];
	size_t i, found = 0;
	FILE *f;

	snprintf(cmd, sizeof(cmd), "modinfo -F parm %s 2>/dev/null", self->ko);
	f = popen(cmd, "r");
	if (!f)
		POOL_SKIP("modinfo not available");
	while (fgets(line, sizeof(line), f))
		for (i = 0; i < sizeof(param_names) / sizeof(param_names[0]); i++)
			if (!strncmp(line, param_names[i], strlen(param_names[i])) &&
			    strlen(line) > strlen(param_names[i]) + 20)
				found++;
	if (pclose(f) != 0 && !found)
		POOL_SKIP("modinfo failed");
	EXPECT_EQ(sizeof(param_names) / sizeof(param_names[0]), found);
}

TEST_HARNESS_MAIN
