// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Limits and background work: RLIMIT_MEMLOCK for a user without
 * CAP_IPC_LOCK, and the idle trim that gives chunks above pool_mb back
 * after idle_trim_sec (and never below the floor, and not when 0).
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>
#include <sys/resource.h>
#include <sys/wait.h>

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

#define NOBODY	65534

FIXTURE(limits) {
	int fd;
	struct mrpool_query q0;
	long long trim_sec;
};

FIXTURE_SETUP(limits)
{
	POOL_SETUP_OPEN();
	self->trim_sec = pool_param("idle_trim_sec");
}

FIXTURE_TEARDOWN(limits)
{
	if (self->fd >= 0) {
		pool_set_param("idle_trim_sec", self->trim_sec);
		close(self->fd);
	}
}

/* Runs as nobody with RLIMIT_MEMLOCK = 2 chunks; returns a step number. */
static int memlock_child(uint64_t chunk)
{
	struct rlimit rl = { .rlim_cur = 2 * chunk, .rlim_max = 2 * chunk };
	struct mrpool_alloc a, b, c;
	int fd;

	if (setrlimit(RLIMIT_MEMLOCK, &rl))
		return 1;
	if (setgid(NOBODY) || setuid(NOBODY))
		return 2;
	fd = pool_open();
	if (fd < 0)
		return 3;
	if (pool_alloc(fd, 2 * chunk + 1, &a) != -ENOMEM)
		return 4;
	if (pool_alloc(fd, chunk, &a) || pool_alloc(fd, chunk, &b))
		return 5;
	if (pool_alloc(fd, 1, &c) != -ENOMEM)
		return 6;
	if (pool_free(fd, a.slice_id))
		return 7;
	/* The charge goes with the slice... */
	if (pool_alloc(fd, 1, &c))
		return 8;
	close(fd);
	/* ...and with the file. */
	fd = pool_open();
	if (fd < 0 || pool_alloc(fd, 2 * chunk, &a))
		return 9;
	close(fd);
	return 0;
}

/* Slices are charged to RLIMIT_MEMLOCK of a user without CAP_IPC_LOCK. */
TEST_F(limits, memlock_unprivileged)
{
	long long fails = pool_attr("stats/fail_memlock");
	int status;
	pid_t pid;

	if (getuid() != 0)
		POOL_SKIP("needs root to switch to nobody");
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0)
		_exit(memlock_child(self->q0.chunk_size));
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	ASSERT_TRUE(WIFEXITED(status));
	EXPECT_EQ(0, WEXITSTATUS(status));
	EXPECT_EQ(fails + 2, pool_attr("stats/fail_memlock"));
}

/* Root (CAP_IPC_LOCK) is not limited by RLIMIT_MEMLOCK. */
TEST_F(limits, memlock_privileged)
{
	struct rlimit rl = { .rlim_cur = 0, .rlim_max = RLIM_INFINITY };
	struct mrpool_alloc a;

	if (getuid() != 0)
		POOL_SKIP("needs CAP_IPC_LOCK");
	ASSERT_EQ(0, setrlimit(RLIMIT_MEMLOCK, &rl));
	EXPECT_EQ(0, pool_alloc(self->fd, 2 * self->q0.chunk_size, &a));
	EXPECT_EQ(0, pool_free(self->fd, a.slice_id));
}

/* Chunks above pool_mb go back after idle_trim_sec, down to the floor. */
TEST_F_TIMEOUT(limits, idle_trim, 120)
{
	uint64_t chunk = self->q0.chunk_size;
	uint64_t floor = (uint64_t)pool_param("pool_mb") * MIB;
	long long trims = pool_attr("stats/trims");
	struct mrpool_query q;
	struct mrpool_alloc a;
	uint64_t grown;

	if (self->q0.total_bytes + 3 * chunk > self->q0.max_bytes)
		POOL_SKIP("no room to grow below max_mb");
	/* Trim off while the pool grows by at least three chunks. */
	ASSERT_EQ(0, pool_set_param("idle_trim_sec", 0));
	ASSERT_EQ(0, pool_alloc(self->fd, self->q0.free_bytes + 3 * chunk, &a));
	ASSERT_EQ(0, pool_free(self->fd, a.slice_id));
	ASSERT_EQ(0, pool_query(self->fd, &q));
	grown = q.total_bytes;
	EXPECT_LE(self->q0.total_bytes + 3 * chunk, grown);
	sleep(2);
	ASSERT_EQ(0, pool_query(self->fd, &q));
	EXPECT_EQ(grown, q.total_bytes);

	ASSERT_EQ(0, pool_set_param("idle_trim_sec", 1));
	/* grown - 3 chunks >= the total before, which is >= the floor. */
	EXPECT_TRUE(POOL_WAIT(pool_attr("total_bytes") <=
			      (long long)(grown - 3 * chunk), 20000));
	ASSERT_EQ(0, pool_query(self->fd, &q));
	EXPECT_LE(floor, q.total_bytes);
	EXPECT_LE(trims + 3, pool_attr("stats/trims"));
	EXPECT_EQ(q.total_bytes,
		  q.free_bytes + q.used_bytes + q.quarantined_bytes);
}

/* Writable parameters validate what is written. */
TEST_F(limits, param_validation)
{
	long long user_mb = pool_param("max_user_mb");

	EXPECT_EQ(-EINVAL, pool_set_param("idle_trim_sec", 86401));
	EXPECT_EQ(-EINVAL, pool_write_str(POOL_PARAMS "/idle_trim_sec", "x"));
	EXPECT_EQ(-EINVAL, pool_set_param("max_user_mb", 1LL << 21));
	EXPECT_EQ(-EINVAL, pool_set_param("max_mb", 0));
	EXPECT_EQ(-EINVAL, pool_set_param("max_mb", 1LL << 21));
	EXPECT_EQ(-EINVAL, pool_write_str(POOL_PARAMS "/max_mb", "-1"));
	EXPECT_EQ(self->trim_sec, pool_param("idle_trim_sec"));
	EXPECT_EQ(user_mb, pool_param("max_user_mb"));
	EXPECT_EQ((long long)(self->q0.max_bytes / MIB), pool_param("max_mb"));
	/* Read-only ones cannot be written at all. */
	EXPECT_NE(0, pool_set_param("chunk_kb", 4));
	EXPECT_NE(0, pool_set_param("pool_mb", 0));
}

TEST_HARNESS_MAIN
