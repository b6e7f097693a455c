// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Kernel memory a process makes the module keep is charged to the
 * process's memory cgroup, as the kernel's own files and VMAs are. A loop
 * of open, mmap of the stats page and close keeps a client and a page per
 * mapping after each file is gone: uncharged, any user could hold memory
 * no cgroup limit sees, bounded only by vm.max_map_count per process.
 */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
#include "kselftest_harness.h"
#pragma GCC diagnostic pop

#include "pool_util.h"

#define NOBODY		65534
#define CG_NAME		"mrpool_memcg_test"
#define ROUNDS		1024	/* stats pages the child keeps mapped */

FIXTURE(memcg) {
	char root[256];		/* the cgroup2 mount */
	char cg[320];		/* the test's cgroup, "" until made */
	bool mounted;		/* mounted by the setup, unmounted after */
	long page;
	pid_t pid;		/* the child, -1 once reaped */
	int go;			/* its "go" pipe's write end, or -1 */
};

/* The cgroup2 mount point from /proc/mounts into @buf; 0 when found. */
static int cgroup2_root(char *buf, size_t len)
{
	char dev[256], dir[256], type[64];
	FILE *f = fopen("/proc/mounts", "r");
	int ret = -1;

	if (!f)
		return -1;
	while (ret && fscanf(f, "%255s %255s %63s %*[^\n]", dev, dir, type) == 3)
		if (!strcmp(type, "cgroup2") && (size_t)snprintf(buf, len, "%s", dir) < len)
			ret = 0;
	fclose(f);
	return ret;
}

static long long cg_read(const char *cg, const char *file)
{
	char path[PATH_MAX];

	snprintf(path, sizeof(path), "%s/%s", cg, file);
	return pool_read_ll(path);
}

/*
 * The test's cgroup @cg under the cgroup2 mount @root, with the memory
 * controller; NULL, or what is missing.
 */
static const char *cg_make(const char *root, const char *cg)
{
	char path[PATH_MAX], ctl[256] = "";
	FILE *f;

	snprintf(path, sizeof(path), "%s/cgroup.controllers", root);
	f = fopen(path, "r");
	if (f) {
		if (!fgets(ctl, sizeof(ctl), f))
			ctl[0] = 0;
		fclose(f);
	}
	if (!strstr(ctl, "memory"))
		return "no memory controller in cgroup2";
	snprintf(path, sizeof(path), "%s/cgroup.subtree_control", root);
	if (pool_write_str(path, "+memory"))
		return "cannot enable the memory controller";
	rmdir(cg);	/* a failed run's */
	if (mkdir(cg, 0755))
		return "cannot make the test's cgroup";
	return NULL;
}

FIXTURE_SETUP(memcg)
{
	const char *missing;

	self->cg[0] = 0;
	self->mounted = false;
	self->pid = -1;
	self->go = -1;
	self->page = sysconf(_SC_PAGESIZE);
	if (access(POOL_DEV, F_OK))
		POOL_SETUP_SKIP(POOL_DEV " missing: mrpool.ko not loaded");
	if (cgroup2_root(self->root, sizeof(self->root))) {
		snprintf(self->root, sizeof(self->root), "/sys/fs/cgroup");
		if (mount("none", self->root, "cgroup2", 0, NULL))
			POOL_SETUP_SKIP("no cgroup2 mounted, and mounting it failed: %s",
					strerror(errno));
		self->mounted = true;
	}
	snprintf(self->cg, sizeof(self->cg), "%s/" CG_NAME, self->root);
	missing = cg_make(self->root, self->cg);
	if (missing) {
		/* 6.1's harness runs no teardown after a failed setup. */
		self->cg[0] = 0;
		if (self->mounted)
			umount(self->root);
		POOL_SETUP_SKIP("%s (%s)", missing, strerror(errno));
	}
}

FIXTURE_TEARDOWN(memcg)
{
	/* A failed ASSERT left the child waiting: it goes first. */
	if (self->go >= 0)
		close(self->go);
	if (self->pid > 0) {
		kill(self->pid, SIGKILL);
		waitpid(self->pid, NULL, 0);
	}
	/* Its last process is reaped; its memory may take a moment to go. */
	if (self->cg[0])
		POOL_WAIT(!rmdir(self->cg) || errno == ENOENT, 10000);
	if (self->mounted)
		umount(self->root);
}

/*
 * Moves itself into @cg, becomes nobody, then on "go" maps ROUNDS stats
 * pages, each of a file it opened and closed; reports and waits.
 */
static int child(const char *cg, int go, int done)
{
	char path[PATH_MAX], c;
	long page = sysconf(_SC_PAGESIZE);
	int i, fd;

	snprintf(path, sizeof(path), "%s/cgroup.procs", cg);
	if (pool_write_str(path, "0"))
		return 1;
	if (setgid(NOBODY) || setuid(NOBODY))
		return 2;
	if (write(done, "r", 1) != 1 || read(go, &c, 1) != 1)
		return 3;
	for (i = 0; i < ROUNDS; i++) {
		fd = pool_open();
		if (fd < 0)
			return 4;
		if (mmap(NULL, page, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
			 MRPOOL_STATS_MMAP_OFFSET) == MAP_FAILED)
			return 5;
		close(fd);
	}
	if (write(done, "d", 1) != 1)
		return 6;
	/* Until the test closes its end: the mappings stay meanwhile. */
	while (read(go, &c, 1) > 0)
		;
	return 0;
}

TEST_F(memcg, stats_pages_charged_and_released)
{
	long long base, held, after;
	int go[2], done[2], st;
	pid_t pid;
	char c;

	ASSERT_EQ(0, pipe(go));
	ASSERT_EQ(0, pipe(done));
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		close(go[1]);
		close(done[0]);
		_exit(child(self->cg, go[0], done[1]));
	}
	self->pid = pid;
	self->go = go[1];
	close(go[0]);
	close(done[1]);
	ASSERT_EQ(1, read(done[0], &c, 1)) TH_LOG("the child did not join the cgroup");
	base = cg_read(self->cg, "memory.current");
	ASSERT_LE(0, base);
	ASSERT_EQ(1, write(go[1], "g", 1));
	ASSERT_EQ(1, read(done[0], &c, 1)) TH_LOG("the child's loop failed");
	held = cg_read(self->cg, "memory.current");
	/* A page per mapping at least, besides each client. */
	EXPECT_LE(base + ROUNDS * self->page, held)
		TH_LOG("%d stats pages: cgroup charge %lld -> %lld bytes",
		       ROUNDS, base, held);

	close(go[1]);
	self->go = -1;
	ASSERT_EQ(pid, waitpid(pid, &st, 0));
	self->pid = -1;
	EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) TH_LOG("status %#x", st);
	/*
	 * Its exit unmapped and freed them all: the charge went with them.
	 * The files, inodes and dentries go after an RCU grace period, which
	 * a busy host makes long: waited for, up to 30 s.
	 */
	POOL_WAIT((after = cg_read(self->cg, "memory.current")) +
		  ROUNDS * self->page <= held, 30000);
	TH_LOG("cgroup charge: %lld bytes, %lld with %d stats pages mapped, %lld after the exit",
	       base, held, ROUNDS, after);
	EXPECT_LE(after + ROUNDS * self->page, held)
		TH_LOG("after the exit: %lld bytes of %lld", after, held);
	close(done[0]);
}

TEST_HARNESS_MAIN
