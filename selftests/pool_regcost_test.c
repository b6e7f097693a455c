// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Registration cost of a slice against the same amount of prefaulted
 * anonymous memory (THP where the kernel gives it), side by side in one
 * run: ibv_reg_mr and ibv_dereg_mr of 64 MiB, several rounds, medians.
 * Only ratios measured in the same guest mean anything under TCG.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/mman.h>

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

#define REG_LEN		(64UL * MIB)
#define ROUNDS		5
/* Slack on the target: TCG timing noise between two 2-5 ms figures. */
#define SLACK_PCT	150

FIXTURE(cost) {
	int fd;
	struct rdt_dev dev;
	int dev_ret;
};

FIXTURE_SETUP(cost)
{
	self->fd = -1;
	self->dev_ret = -1;
	if (access(POOL_DEV, F_OK))
		POOL_SETUP_SKIP(POOL_DEV " missing: mrpool.ko not loaded");
	self->dev_ret = rdt_dev_open(&self->dev, NULL, NULL);
	if (self->dev_ret)
		POOL_SETUP_SKIP("no RDMA device (%d)", self->dev_ret);
	self->fd = pool_open();
	ASSERT_LE(0, self->fd);
}

FIXTURE_TEARDOWN(cost)
{
	if (!self->dev_ret)
		rdt_dev_close(&self->dev);
	if (self->fd >= 0)
		close(self->fd);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static uint64_t median(uint64_t *v, int n)
{
	qsort(v, n, sizeof(*v), cmp_u64);
	return v[n / 2];
}

/* Time one reg + dereg of [p, p + len); 0 on success. */
static int time_reg(struct ibv_pd *pd, void *p, size_t len, uint64_t *reg,
		    uint64_t *dereg)
{
	struct ibv_mr *mr;
	uint64_t t0, t1;

	t0 = rdt_now_ns();
	mr = ibv_reg_mr(pd, p, len, RDT_ACCESS_ALL);
	t1 = rdt_now_ns();
	if (!mr)
		return -errno;
	*reg = t1 - t0;
	t0 = rdt_now_ns();
	if (ibv_dereg_mr(mr))
		return -EIO;
	*dereg = rdt_now_ns() - t0;
	return 0;
}

/* A 64 MiB slice registers no slower than prefaulted anonymous memory. */
TEST_F_TIMEOUT(cost, reg_slice_vs_anon, 300)
{
	uint64_t sreg[ROUNDS], sdereg[ROUNDS], areg[ROUNDS], adereg[ROUNDS];
	uint64_t ms, md, am, ad;
	struct mrpool_alloc a;
	char pmd[8];
	void *slice, *anon;
	int i;

	if (pool_param("max_mb") * MIB < REG_LEN + pool_attr("used_bytes"))
		SKIP(return, "max_mb too small for a 64 MiB slice");
	ASSERT_EQ(0, pool_alloc(self->fd, REG_LEN, &a));
	slice = mmap(NULL, a.length, PROT_READ | PROT_WRITE,
		     MAP_SHARED | MAP_POPULATE, self->fd, (off_t)a.mmap_offset);
	ASSERT_NE(MAP_FAILED, slice);

	/* Anonymous memory 2 MiB aligned, THP if allowed, prefaulted. */
	anon = mmap(NULL, REG_LEN + 2 * MIB, PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, anon);
	anon = (void *)(((uintptr_t)anon + 2 * MIB - 1) & ~(2 * MIB - 1));
	madvise(anon, REG_LEN, MADV_HUGEPAGE);
	memset(anon, 1, REG_LEN);

	for (i = 0; i < ROUNDS; i++) {
		ASSERT_EQ(0, time_reg(self->dev.pd, slice, a.length, &sreg[i],
				      &sdereg[i]));
		ASSERT_EQ(0, time_reg(self->dev.pd, anon, REG_LEN, &areg[i],
				      &adereg[i]));
	}
	EXPECT_EQ(0, munmap(slice, a.length));
	ms = median(sreg, ROUNDS);
	md = median(sdereg, ROUNDS);
	am = median(areg, ROUNDS);
	ad = median(adereg, ROUNDS);
	TH_LOG("64 MiB ibv_reg_mr: slice %lu us, anon %lu us; ibv_dereg_mr: slice %lu us, anon %lu us (medians of %d)",
	       (unsigned long)(ms / 1000), (unsigned long)(am / 1000),
	       (unsigned long)(md / 1000), (unsigned long)(ad / 1000), ROUNDS);
	EXPECT_LE(ms, am * SLACK_PCT / 100);
	pool_param_str("pmd_map", pmd, sizeof(pmd));
	if (pmd[0] != 'Y')
		SKIP(return, "pmd_map=N: slices use 4 KiB entries, no target");
	EXPECT_LE(ms, am * SLACK_PCT / 100);
	EXPECT_LE(md, ad * SLACK_PCT / 100 + 200000);
}

TEST_HARNESS_MAIN
