// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Slices as RDMA memory on rxe: ibv_reg_mr on a mapped slice, RDMA WRITE
 * and READ across the boundary of two chunks with the bytes checked, and
 * quarantine: a chunk whose slice is gone but which an MR still pins is
 * not reused (and holds the module) until ibv_dereg_mr, then comes back
 * zeroed.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/syscall.h>
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
#include "rdmatest.h"

#define XFER	(64 * 1024)

FIXTURE(rdma) {
	int fd;
	struct mrpool_query q0;
	struct rdt_dev dev;
	struct rdt_loop lp;
	int dev_ret;
	uint8_t *buf;
	struct ibv_mr *bmr;
};

FIXTURE_SETUP(rdma)
{
	self->fd = -1;
	self->dev_ret = -1;
	if (access(POOL_DEV, F_OK))
		POOL_SETUP_SKIP(POOL_DEV " missing: mrpool.ko not loaded");
	self->dev_ret = rdt_dev_open(&self->dev, NULL, NULL);
	if (self->dev_ret)
		POOL_SETUP_SKIP("no RDMA device (%d)", self->dev_ret);
	ASSERT_EQ(0, rdt_loop_create(&self->lp, &self->dev));
	self->fd = pool_open();
	ASSERT_LE(0, self->fd);
	ASSERT_EQ(0, pool_query(self->fd, &self->q0));
	self->buf = aligned_alloc(4096, XFER);
	ASSERT_NE(NULL, self->buf);
	self->bmr = ibv_reg_mr(self->dev.pd, self->buf, XFER, RDT_ACCESS_ALL);
	ASSERT_NE(NULL, self->bmr);
}

FIXTURE_TEARDOWN(rdma)
{
	if (self->bmr)
		ibv_dereg_mr(self->bmr);
	free(self->buf);
	if (!self->dev_ret) {
		rdt_loop_destroy(&self->lp);
		rdt_dev_close(&self->dev);
	}
	if (self->fd >= 0)
		close(self->fd);
}

/* A slice registers, and WRITE/READ across its chunk boundary are exact. */
TEST_F(rdma, write_read_across_chunks)
{
	uint64_t chunk = self->q0.chunk_size;
	struct mrpool_alloc a;
	struct ibv_mr *mr;
	uint8_t *p, *at;
	int st;

	ASSERT_EQ(0, pool_alloc(self->fd, 2 * chunk, &a));
	p = pool_map(self->fd, &a);
	ASSERT_NE(MAP_FAILED, p);
	mr = ibv_reg_mr(self->dev.pd, p, a.length, RDT_ACCESS_ALL);
	ASSERT_NE(NULL, mr) TH_LOG("ibv_reg_mr on a slice: %s", strerror(errno));

	at = p + chunk - XFER / 2;
	rdt_pattern_fill(self->buf, XFER, 5);
	ASSERT_EQ(0, rdt_write(&self->lp, self->buf, self->bmr->lkey,
			       (uintptr_t)at, mr->rkey, XFER, &st));
	EXPECT_EQ(IBV_WC_SUCCESS, st);
	EXPECT_EQ(0, memcmp(at, self->buf, XFER));
	EXPECT_EQ(0, at[-1]);
	EXPECT_EQ(0, at[XFER]);

	/* And back out, from the slice's lkey side this time. */
	rdt_pattern_fill(at, XFER, 9);
	memset(self->buf, 0, XFER);
	ASSERT_EQ(0, rdt_read(&self->lp, self->buf, self->bmr->lkey,
			      (uintptr_t)at, mr->rkey, XFER, &st));
	EXPECT_EQ(0, memcmp(at, self->buf, XFER));

	/* Past the end of the slice is a remote access error. */
	EXPECT_EQ(-EIO, rdt_write(&self->lp, self->buf, self->bmr->lkey,
				  (uintptr_t)(p + a.length - 4096), mr->rkey,
				  8192, &st));
	EXPECT_EQ(IBV_WC_REM_ACCESS_ERR, st);

	EXPECT_EQ(0, ibv_dereg_mr(mr));
	EXPECT_EQ(0, munmap(p, a.length));
	EXPECT_EQ(0, pool_free(self->fd, a.slice_id));
}

/* A chunk still pinned by an MR is quarantined until ibv_dereg_mr. */
TEST_F_TIMEOUT(rdma, quarantine_with_live_mr, 120)
{
	uint64_t chunk = self->q0.chunk_size;
	long long quar = pool_attr("stats/quarantines");
	unsigned long pfn, other;
	struct mrpool_alloc a, b;
	struct ibv_mr *mr;
	char state[32];
	uint8_t *p;
	int st, fd2;

	/* Quarantine counted from empty: an earlier test's pins are gone. */
	ASSERT_TRUE(POOL_WAIT(pool_attr("quarantined_bytes") == 0, 60000));
	fd2 = pool_open();
	ASSERT_LE(0, fd2);
	ASSERT_EQ(0, pool_alloc(fd2, chunk, &a));
	ASSERT_EQ(1, pool_slice_pfns(a.slice_id, &pfn, 1));
	p = pool_map(fd2, &a);
	ASSERT_NE(MAP_FAILED, p);
	mr = ibv_reg_mr(self->dev.pd, p, a.length, RDT_ACCESS_ALL);
	ASSERT_NE(NULL, mr);
	memset(p, 0x77, a.length);

	/* Unmap, free and close: the slice is gone, the pin is not. */
	ASSERT_EQ(0, munmap(p, a.length));
	ASSERT_EQ(0, pool_free(fd2, a.slice_id));
	close(fd2);
	EXPECT_EQ((long long)chunk, pool_attr("quarantined_bytes"));
	EXPECT_EQ(quar + 1, pool_attr("stats/quarantines"));
	ASSERT_EQ(0, pool_pfn_state(pfn, state, sizeof(state)));
	EXPECT_STREQ("quarantined", state);

	/* Nobody gets it meanwhile... */
	ASSERT_EQ(0, pool_alloc(self->fd, chunk, &b));
	ASSERT_EQ(1, pool_slice_pfns(b.slice_id, &other, 1));
	EXPECT_NE(pfn, other);
	EXPECT_EQ(0, pool_free(self->fd, b.slice_id));
	/* ...while the MR still reaches it. */
	rdt_pattern_fill(self->buf, XFER, 3);
	EXPECT_EQ(0, rdt_write(&self->lp, self->buf, self->bmr->lkey,
			       (uintptr_t)mr->addr, mr->rkey,
			       XFER, &st));

	/* With no file open the quarantined chunk alone holds the module. */
	close(self->fd);
	self->fd = -1;
	EXPECT_EQ(-1, syscall(SYS_delete_module, "mrpool", O_NONBLOCK));
	EXPECT_EQ(EWOULDBLOCK, errno);
	if (access("/sys/module/mrpool", F_OK))
		ASSERT_EQ(0, system("insmod kmod/mrpool.ko $MRPOOL_PARAMS"))
			TH_LOG("reloaded");

	ASSERT_EQ(0, ibv_dereg_mr(mr));
	EXPECT_TRUE(POOL_WAIT(pool_attr("quarantined_bytes") == 0, 10000));
	ASSERT_EQ(0, pool_pfn_state(pfn, state, sizeof(state)));
	EXPECT_STREQ("free", state);

	/* Back in the pool, and zeroed: every free chunk comes zeroed. */
	self->fd = pool_open();
	ASSERT_LE(0, self->fd);
	ASSERT_EQ(1, pool_alloc_free_has(self->fd, pfn, &b));
	p = pool_map(self->fd, &b);
	ASSERT_NE(MAP_FAILED, p);
	EXPECT_EQ(b.length, pool_nonzero_at(p, b.length));
	EXPECT_EQ(0, munmap(p, b.length));
}

/* Unload mrpool (without waiting): true once it is gone. */
static bool unload(void)
{
	return !syscall(SYS_delete_module, "mrpool", O_NONBLOCK) ||
	       errno == ENOENT;
}

/*
 * In a child: a slice with an MR over it, unmapped and freed (the chunk is
 * quarantined), then exit without deregistering.
 */
static int exit_with_mr(uint64_t chunk)
{
	struct mrpool_alloc a;
	struct rdt_dev dev;
	struct ibv_mr *mr;
	uint8_t *p;
	int fd;

	fd = pool_open();
	if (fd < 0 || pool_alloc(fd, chunk, &a))
		return 1;
	p = pool_map(fd, &a);
	if (p == MAP_FAILED || rdt_dev_open(&dev, NULL, NULL))
		return 2;
	mr = ibv_reg_mr(dev.pd, p, a.length, RDT_ACCESS_ALL);
	if (!mr)
		return 3;
	memset(p, 0x5c, a.length);
	if (munmap(p, a.length) || pool_free(fd, a.slice_id))
		return 4;
	return 0;
}

/*
 * A process that exits with an MR over a freed slice leaves the chunk in
 * quarantine only until the verbs file's release unpins it: the
 * quarantine worker rechecks 1, 2, 4, ... jiffies after the free, so the
 * module can be unloaded right after, once nothing else holds it.
 */
TEST_F_TIMEOUT(rdma, exit_with_mr_leaves_quarantine, 120)
{
	long long quar = pool_attr("stats/quarantines");
	long long checks = pool_attr("stats/quarantine_checks");
	int status;
	pid_t pid;

	ASSERT_TRUE(POOL_WAIT(pool_attr("quarantined_bytes") == 0, 60000));
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0)
		_exit(exit_with_mr(self->q0.chunk_size));
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	ASSERT_TRUE(WIFEXITED(status));
	ASSERT_EQ(0, WEXITSTATUS(status));
	/* The FREE quarantined the chunk; the exit dropped the pin. */
	EXPECT_EQ(quar + 1, pool_attr("stats/quarantines"));
	EXPECT_TRUE(POOL_WAIT(pool_attr("quarantined_bytes") == 0, 10000));
	TH_LOG("left quarantine after %lld checks",
	       pool_attr("stats/quarantine_checks") - checks);
	EXPECT_LE(1, pool_attr("stats/quarantine_checks") - checks);

	/* Nothing left holding the module: it unloads, and comes back. */
	close(self->fd);
	self->fd = -1;
	ibv_dereg_mr(self->bmr);
	self->bmr = NULL;
	/* The quarantine worker drops the module reference just after. */
	EXPECT_TRUE(POOL_WAIT(unload(), 10000));
	if (access("/sys/module/mrpool", F_OK))
		ASSERT_EQ(0, system("insmod kmod/mrpool.ko $MRPOOL_PARAMS"))
			TH_LOG("reloaded");
}

TEST_HARNESS_MAIN
