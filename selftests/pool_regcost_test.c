// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * What makes a slice cheap to register: every whole chunk of it (one
 * PMD-order block) is mapped with one PMD, whatever the pool held before
 * (fragmented chunks are handed out last). The registration cost against
 * the same amount of prefaulted anonymous memory is measured side by side
 * and logged, never asserted: a ratio under TCG on a busy machine is a
 * benchmark's figure (mrpool-bench), not a test's.
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

/*
 * Chunks of slice @id in debugfs chunks, and in *@whole those of one
 * block of @order (blocks column "ORDER:1").
 */
static int slice_chunks(uint64_t id, int order, int *whole)
{
	char line[256], state[32], blocks[64], want[16];
	unsigned long pfn, owner;
	int node, n = 0;
	FILE *f;

	snprintf(want, sizeof(want), "%d:1", order);
	*whole = 0;
	f = fopen(POOL_DEBUGFS "/chunks", "re");
	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%lx %d %31s %lu %63s", &pfn, &node, state,
			   &owner, blocks) != 5 || owner != id ||
		    strcmp(state, "used"))
			continue;
		n++;
		*whole += !strcmp(blocks, want);
	}
	fclose(f);
	return n;
}

/*
 * A 64 MiB slice: each whole chunk PMD-mapped (FilePmdMapped in smaps),
 * registration works; the cost against anonymous memory is logged.
 */
TEST_F_TIMEOUT(cost, reg_slice_vs_anon, 300)
{
	uint64_t sreg[ROUNDS], sdereg[ROUNDS], areg[ROUNDS], adereg[ROUNDS];
	uint64_t ms, md, am, ad;
	struct mrpool_query q;
	struct mrpool_alloc a;
	char pmd[8];
	void *slice, *anon;
	int i, order = 0, whole;

	ASSERT_EQ(0, pool_query(self->fd, &q));
	ASSERT_LE(REG_LEN + q.used_bytes, q.max_bytes);
	ASSERT_EQ(0, pool_alloc(self->fd, REG_LEN, &a));
	slice = mmap(NULL, a.length, PROT_READ | PROT_WRITE,
		     MAP_SHARED | MAP_POPULATE, self->fd, (off_t)a.mmap_offset);
	ASSERT_NE(MAP_FAILED, slice);
	while ((4096UL << order) < q.chunk_size)
		order++;
	ASSERT_EQ((int)(a.length / q.chunk_size),
		  slice_chunks(a.slice_id, order, &whole));
	pool_param_str("pmd_map", pmd, sizeof(pmd));
	TH_LOG("%d of %llu chunks whole, pmd_map=%c", whole,
	       (unsigned long long)(a.length / q.chunk_size), pmd[0]);
	if (pmd[0] == 'Y' && q.chunk_size == 2 * MIB)
		EXPECT_EQ((long long)whole * 2048,
			  pool_smaps_kb(slice, "FilePmdMapped:"));

	/* Anonymous memory 2 MiB aligned, THP if allowed, prefaulted. */
	anon = mmap(NULL, REG_LEN + 2 * MIB, PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, anon);
	anon = (void *)(((uintptr_t)anon + 2 * MIB - 1) & ~(2 * MIB - 1));
	madvise(anon, REG_LEN, MADV_HUGEPAGE);
	memset(anon, 1, REG_LEN);

	for (i = 0; i < ROUNDS; i++) {
		ASSERT_EQ(0, rdt_reg_time(self->dev.pd, slice, a.length, &sreg[i],
					  &sdereg[i]));
		ASSERT_EQ(0, rdt_reg_time(self->dev.pd, anon, REG_LEN, &areg[i],
					  &adereg[i]));
	}
	EXPECT_EQ(0, munmap(slice, a.length));
	ms = median(sreg, ROUNDS);
	md = median(sdereg, ROUNDS);
	am = median(areg, ROUNDS);
	ad = median(adereg, ROUNDS);
	/* Information for the reader; the benchmark owns the ratios. */
	TH_LOG("64 MiB ibv_reg_mr: slice %lu us, anon %lu us; ibv_dereg_mr: slice %lu us, anon %lu us (medians of %d)",
	       (unsigned long)(ms / 1000), (unsigned long)(am / 1000),
	       (unsigned long)(md / 1000), (unsigned long)(ad / 1000), ROUNDS);
}

TEST_HARNESS_MAIN
