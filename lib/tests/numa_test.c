// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Host unit tests of NUMA placement: arenas get a preferred policy for the
 * node of the first attached PD's device (read from a fake sysfs directory
 * here), an explicit node, or none; a device without a node leaves the
 * choice to the next PD; bad nodes are refused at open. The policy itself
 * is read back with get_mempolicy(2) on the buffers handed out.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "kselftest_harness.h"
#include "helpers.h"
#include "internal.h"

#define MPOL_DEFAULT_	0
#define MPOL_PREFERRED_	1
#define MPOL_F_ADDR_	(1 << 1)
#define MASK_BITS	4096

/*
 * The policy of the page at addr: its mode, and in *node the lowest node
 * of its mask (-1 for none). -1 where get_mempolicy does not exist (qemu
 * user mode, tests/arm64.sh): the stats are checked there all the same.
 */
static int policy_of(void *addr, int *node)
{
	unsigned long mask[MASK_BITS / (8 * sizeof(unsigned long))] = { 0 };
	int mode = -1;

	*node = -1;
	if (syscall(SYS_get_mempolicy, &mode, mask, (unsigned long)MASK_BITS, addr,
		    (unsigned long)MPOL_F_ADDR_))
		return -1;
	for (int i = 0; i < MASK_BITS; i++)
		if (mask[i / (8 * sizeof(unsigned long))] & (1UL << (i % (8 * sizeof(unsigned long))))) {
			*node = i;
			break;
		}
	return mode;
}

/* A fake device directory with device/numa_node holding text. */
static void fake_sysfs(char *dir, const char *text)
{
	char path[256];
	int fd;

	snprintf(path, sizeof(path), "%s/device", dir);
	mkdir(path, 0700);
	snprintf(path, sizeof(path), "%s/device/numa_node", dir);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	if (fd >= 0) {
		if (write(fd, text, strlen(text)) < 0)
			perror("write");
		close(fd);
	}
	strcpy(fake_device_path, dir);
}

static void fake_sysfs_clean(char *dir)
{
	char path[256];

	snprintf(path, sizeof(path), "%s/device/numa_node", dir);
	unlink(path);
	snprintf(path, sizeof(path), "%s/device", dir);
	rmdir(path);
	rmdir(dir);
	fake_device_path[0] = '\0';
}

static struct mrp_pool *numa_pool(int node, bool set)
{
	struct mrp_pool_attr a = {
		.comp_mask = MRP_POOL_ATTR_ARENA_SIZE |
			     (set ? MRP_POOL_ATTR_NUMA_NODE : 0),
		.arena_size = 2 << 20, .numa_node = node,
	};

	return test_pool(&a);
}

/* Expect the arena of b to have a preferred policy for node (or none). */
#define EXPECT_PLACED(b, want) do {					\
	int n_, m_ = policy_of((b).addr, &n_);				\
	if (m_ < 0) {							\
		TH_LOG("no get_mempolicy here: policy not checked");	\
	} else if ((want) < 0) {					\
		EXPECT_EQ(MPOL_DEFAULT_, m_);				\
	} else {							\
		EXPECT_EQ(MPOL_PREFERRED_, m_);				\
		EXPECT_EQ((want), n_);					\
	}								\
} while (0)

TEST(explicit_node)
{
	struct mrp_pool *pool = numa_pool(0, true);
	struct mrp_buf b;

	ASSERT_NE(NULL, pool);
	EXPECT_EQ(0, test_stats(pool).numa_node);
	ASSERT_EQ(0, mrp_alloc(pool, 4096, NULL, &b));
	EXPECT_PLACED(b, 0);
	EXPECT_EQ(0, mrp_free(pool, b.addr));
	EXPECT_EQ(0, mrp_pool_close(pool));
}

/* auto: no node until a PD whose device has one is attached. */
TEST(auto_from_device)
{
	char dir[] = "/tmp/mrp-numa-XXXXXX";
	struct mrp_pool *pool;
	struct mrp_buf before, none, after;

	ASSERT_NE(NULL, mkdtemp(dir));
	fake_sysfs(dir, "-1\n");
	pool = numa_pool(0, false);
	ASSERT_NE(NULL, pool);
	EXPECT_EQ(-1, test_stats(pool).numa_node);
	ASSERT_EQ(0, mrp_alloc(pool, 4096, NULL, &before));
	EXPECT_PLACED(before, -1);
	/* a device without a node decides nothing */
	ASSERT_EQ(0, mrp_attach_pd(pool, FAKE_PD(1), IBV_ACCESS_LOCAL_WRITE));
	EXPECT_EQ(-1, test_stats(pool).numa_node);
	ASSERT_EQ(0, mrp_alloc(pool, 8192, FAKE_PD(1), &none));
	EXPECT_PLACED(none, -1);
	/* the next PD's device has node 0: new arenas go there */
	fake_sysfs(dir, "0\n");
	ASSERT_EQ(0, mrp_attach_pd(pool, FAKE_PD(2), IBV_ACCESS_LOCAL_WRITE));
	EXPECT_EQ(0, test_stats(pool).numa_node);
	ASSERT_EQ(0, mrp_alloc(pool, 16384, FAKE_PD(2), &after));
	EXPECT_PLACED(after, 0);
	/* arenas from before stay where they are */
	EXPECT_PLACED(before, -1);
	EXPECT_EQ(0, mrp_free(pool, before.addr));
	EXPECT_EQ(0, mrp_free(pool, none.addr));
	EXPECT_EQ(0, mrp_free(pool, after.addr));
	EXPECT_EQ(0, mrp_pool_close(pool));
	fake_sysfs_clean(dir);
}

/* any: a device's node is ignored. */
TEST(any_ignores_device)
{
	char dir[] = "/tmp/mrp-numa-XXXXXX";
	struct mrp_pool *pool;
	struct mrp_buf b;

	ASSERT_NE(NULL, mkdtemp(dir));
	fake_sysfs(dir, "0\n");
	pool = numa_pool(MRP_NUMA_ANY, true);
	ASSERT_NE(NULL, pool);
	ASSERT_EQ(0, mrp_attach_pd(pool, FAKE_PD(1), IBV_ACCESS_LOCAL_WRITE));
	EXPECT_EQ(-1, test_stats(pool).numa_node);
	ASSERT_EQ(0, mrp_alloc(pool, 4096, FAKE_PD(1), &b));
	EXPECT_PLACED(b, -1);
	EXPECT_EQ(0, mrp_free(pool, b.addr));
	EXPECT_EQ(0, mrp_pool_close(pool));
	fake_sysfs_clean(dir);
}

/* Nodes that do not exist, and the environment's words. */
TEST(bad_nodes_and_environment)
{
	struct mrp_pool *pool;

	errno = 0;
	EXPECT_EQ(NULL, numa_pool(1023, true));	/* no such node here */
	EXPECT_EQ(EINVAL, errno);
	EXPECT_EQ(NULL, numa_pool(1024, true));
	EXPECT_EQ(NULL, numa_pool(-3, true));
	ASSERT_EQ(0, setenv("MRPOOL_NUMA_NODE", "nearby", 1));
	EXPECT_EQ(NULL, numa_pool(0, false));
	ASSERT_EQ(0, setenv("MRPOOL_NUMA_NODE", "0", 1));
	pool = numa_pool(0, false);
	ASSERT_NE(NULL, pool);
	EXPECT_EQ(0, test_stats(pool).numa_node);
	EXPECT_EQ(0, mrp_pool_close(pool));
	/* the attribute wins over the environment */
	pool = numa_pool(MRP_NUMA_ANY, true);
	ASSERT_NE(NULL, pool);
	EXPECT_EQ(-1, test_stats(pool).numa_node);
	EXPECT_EQ(0, mrp_pool_close(pool));
	ASSERT_EQ(0, setenv("MRPOOL_NUMA_NODE", "any", 1));
	pool = numa_pool(0, false);
	ASSERT_NE(NULL, pool);
	EXPECT_EQ(-1, test_stats(pool).numa_node);
	EXPECT_EQ(0, mrp_pool_close(pool));
	unsetenv("MRPOOL_NUMA_NODE");
}

struct canceller {
	struct mrp_pool *pool;
	pthread_barrier_t pending;
	int ret;
};

/* Attach with a cancellation already pending: it acts after the call. */
static void *attach_cancelled(void *arg)
{
	struct canceller *c = arg;

	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, NULL);
	pthread_barrier_wait(&c->pending);	/* the main thread cancels us */
	pthread_barrier_wait(&c->pending);
	pthread_setcancelstate(PTHREAD_CANCEL_ENABLE, NULL);
	c->ret = mrp_attach_pd(c->pool, FAKE_PD(3), IBV_ACCESS_LOCAL_WRITE);
	pthread_testcancel();
	return NULL;
}

/*
 * pthread_cancel() of a thread in mrp_attach_pd(): the device's sysfs node
 * is read (open, read, close: cancellation points) with the pool's lock
 * held, and a thread cancelled there left the lock held for good (every
 * later slow path and fork deadlocked). The attach now completes and the
 * cancellation acts after it.
 */
TEST(attach_cancel_keeps_lock_free)
{
	char dir[] = "/tmp/mrp-numa-XXXXXX";
	struct canceller c = { 0 };
	pthread_t t;
	void *r;

	ASSERT_NE(NULL, mkdtemp(dir));
	fake_sysfs(dir, "0\n");
	c.pool = numa_pool(0, false);
	ASSERT_NE(NULL, c.pool);
	c.ret = -1;
	ASSERT_EQ(0, pthread_barrier_init(&c.pending, NULL, 2));
	ASSERT_EQ(0, pthread_create(&t, NULL, attach_cancelled, &c));
	pthread_barrier_wait(&c.pending);
	ASSERT_EQ(0, pthread_cancel(t));
	pthread_barrier_wait(&c.pending);
	ASSERT_EQ(0, pthread_join(t, &r));
	EXPECT_EQ(PTHREAD_CANCELED, r);
	ASSERT_EQ(0, pthread_mutex_trylock(&c.pool->lock)) TH_LOG("pool->lock left held");
	pthread_mutex_unlock(&c.pool->lock);
	EXPECT_EQ(0, c.ret);
	EXPECT_EQ(0, test_stats(c.pool).numa_node);
	EXPECT_EQ(0, mrp_detach_pd(c.pool, FAKE_PD(3)));
	EXPECT_EQ(0, mrp_pool_close(c.pool));
	pthread_barrier_destroy(&c.pending);
	fake_sysfs_clean(dir);
}

TEST_HARNESS_MAIN
