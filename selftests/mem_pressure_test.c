// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Memory pressure (issue 13): with max_mb above the guest's memory, a
 * bystander holding most of what is free, the pool is grown by ALLOCs
 * until the kernel has no more to give. Growth must end in a clean
 * -ENOMEM once available memory nears 1/32 of RAM, which the pool leaves
 * to the rest of the machine; the bystander must survive with its bytes
 * intact, the kernel must not have OOM-killed anyone (before the pool kept
 * that headroom, the chunk registrations after a growth did, and killed
 * the bystander), and once the slices are freed the pool trims back to
 * its resting size.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/wait.h>

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
#include "kselftest_harness.h"
#pragma GCC diagnostic pop
#pragma GCC diagnostic ignored "-Wclobbered"

#include "pool_util.h"

#define MAX_SLICES	4096
#define LEAVE_MB	384	/* left to the kernel and the pool by the bystander */

/* "oom_kill N" from /proc/vmstat: processes the OOM killer has killed. */
static long long oom_kills(void)
{
	char line[128];
	long long v = -1;
	FILE *f = fopen("/proc/vmstat", "re");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "oom_kill %lld", &v) == 1)
			break;
	fclose(f);
	return v;
}

/*
 * The bystander: touch @mb MiB with a pattern, report over @ready, wait
 * for the test to end (@life), check the pattern, exit 0 if intact.
 */
static void bystander(size_t mb, int ready, int life[2])
{
	size_t len = mb << 20, i;
	uint64_t *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
			   MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	char c = 1;

	if (p == MAP_FAILED)
		_exit(2);
	for (i = 0; i < len / 8; i++)
		p[i] = i * 0x9e3779b97f4a7c15ULL;
	if (write(ready, &c, 1) != 1)
		_exit(3);
	pool_child_wait(life);
	for (i = 0; i < len / 8; i++)
		if (p[i] != i * 0x9e3779b97f4a7c15ULL)
			_exit(4);
	_exit(0);
}

FIXTURE(pressure) {
	int fd;
	struct mrpool_query q0;
	long long max_mb;	/* restored by the teardown */
};

FIXTURE_SETUP(pressure)
{
	self->max_mb = -1;
	POOL_SETUP_OPEN();
	self->max_mb = pool_param("max_mb");
}

FIXTURE_TEARDOWN(pressure)
{
	if (self->max_mb > 0)
		pool_set_param("max_mb", self->max_mb);
	if (self->fd >= 0)
		close(self->fd);
}

TEST_F(pressure, growth_ends_in_enomem)
{
	uint64_t *ids = calloc(MAX_SLICES, sizeof(*ids));
	long long avail, oom0, grown_mb, left, ram_mb;
	int ready[2], life[2], status, n = 0, ret = 0, i;
	struct mrpool_query q;
	struct mrpool_alloc a;
	size_t hog_mb;
	pid_t pid;
	char c;

	ASSERT_NE(NULL, ids);
	ram_mb = (long long)sysconf(_SC_PHYS_PAGES) * sysconf(_SC_PAGESIZE) >> 20;
	oom0 = oom_kills();
	ASSERT_LE(0, oom0);
	avail = pool_mem_available() >> 20;
	ASSERT_LT(LEAVE_MB + 64, avail);
	hog_mb = (size_t)(avail - LEAVE_MB);
	/* Nothing but the machine's memory limits the pool now. */
	ASSERT_EQ(0, pool_set_param("max_mb", avail * 4));

	ASSERT_EQ(0, pipe(ready));
	ASSERT_EQ(0, pipe(life));
	pid = fork();
	ASSERT_LE(0, pid);
	if (!pid) {
		close(ready[0]);
		bystander(hog_mb, ready[1], life);
	}
	close(ready[1]);
	close(life[0]);
	ASSERT_EQ(1, read(ready[0], &c, 1)) TH_LOG("bystander could not take %zu MiB",
					       hog_mb);

	/* Two chunks at a time until the kernel says no. */
	while (n < MAX_SLICES) {
		ret = pool_alloc(self->fd, 2 * self->q0.chunk_size, &a);
		if (ret)
			break;
		ids[n++] = a.slice_id;
	}
	ASSERT_EQ(0, pool_query(self->fd, &q));
	grown_mb = (long long)((q.total_bytes - self->q0.total_bytes) >> 20);
	TH_LOG("bystander %zu MiB; %d slices (%llu MiB) until %d; pool grew %lld MiB, "
	       "MemAvailable %lld MiB left", hog_mb, n,
	       (unsigned long long)(q.file_bytes >> 20), ret, grown_mb,
	       (left = pool_mem_available() >> 20));
	EXPECT_EQ(-ENOMEM, ret);
	/* It grew into most of what the bystander left, and stopped short of
	 * the 1/32 of RAM growth leaves to everyone else. */
	EXPECT_LE(LEAVE_MB / 4, grown_mb);
	EXPECT_LE(ram_mb / 32 / 2, left);
	/* The kernel killed no one, and the bystander's bytes are whole. */
	EXPECT_EQ(oom0, oom_kills());
	EXPECT_EQ(0, kill(pid, 0));
	close(life[1]);
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	EXPECT_TRUE(WIFEXITED(status) && !WEXITSTATUS(status))
		TH_LOG("bystander: status %#x", status);

	/* Freed, the slices go back; with the pressure gone so does growth. */
	for (i = 0; i < n; i++)
		EXPECT_EQ(0, pool_free(self->fd, ids[i]));
	ASSERT_EQ(0, pool_query(self->fd, &q));
	EXPECT_EQ(0, q.file_bytes);
	EXPECT_EQ(self->q0.used_bytes, q.used_bytes);
	EXPECT_EQ(0, pool_alloc(self->fd, 2 * self->q0.chunk_size, &a));
	EXPECT_EQ(0, pool_free(self->fd, a.slice_id));
	/* Idle, the pool trims what it grew (the bound only catches never). */
	EXPECT_TRUE(POOL_WAIT(!pool_query(self->fd, &q) &&
			      q.total_bytes <= self->q0.total_bytes, 120000))
		TH_LOG("pool holds %llu MiB, held %llu MiB before",
		       (unsigned long long)(q.total_bytes >> 20),
		       (unsigned long long)(self->q0.total_bytes >> 20));
	free(ids);
}

TEST_HARNESS_MAIN
