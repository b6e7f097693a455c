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
#define PER_KIND	3	/* buffers of each kind */

enum { SLICE, ANON, SHMEM, KINDS };
#define SHMEM_ENABLED	"/sys/kernel/mm/transparent_hugepage/shmem_enabled"

FIXTURE(cost) {
	int fd;
	struct rdt_dev dev;
	int dev_ret;
	char shmem_enabled[16];	/* the setting to restore, "" if unread */
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
	FILE *f;

	if (self->shmem_enabled[0]) {
		f = fopen(SHMEM_ENABLED, "we");
		if (f) {
			fputs(self->shmem_enabled, f);
			fclose(f);
		}
	}
	if (!self->dev_ret)
		rdt_dev_close(&self->dev);
	if (self->fd >= 0)
		close(self->fd);
}

/*
 * Let memfds get huge folios (shmem_enabled=advise), keeping the setting
 * (the bracketed word) for the teardown. 0 or -errno.
 */
static int shmem_thp_advise(char *saved, size_t len)
{
	char line[128], *open, *close;
	FILE *f = fopen(SHMEM_ENABLED, "re");

	if (!f)
		return -errno;
	if (!fgets(line, sizeof(line), f))
		line[0] = '\0';
	fclose(f);
	open = strchr(line, '[');
	close = open ? strchr(open, ']') : NULL;
	if (!close || (size_t)(close - open) > len)
		return -EINVAL;
	*close = '\0';
	snprintf(saved, len, "%s", open + 1);
	f = fopen(SHMEM_ENABLED, "we");
	if (!f)
		return -errno;
	fputs("advise", f);
	return fclose(f) ? -errno : 0;
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

struct slice_census {
	uint64_t id;
	char whole_blocks[16];	/* one block of the chunk's order: "ORDER:1" */
	int whole;		/* chunks of one block */
	int shmem;		/* chunks that are tmpfs huge folios */
};

static bool census_row(const struct pool_chunk_row *r, void *arg)
{
	struct slice_census *c = arg;

	if (r->owner != c->id || strcmp(r->state, "used"))
		return false;
	c->whole += !strcmp(r->blocks, c->whole_blocks);
	c->shmem += !strcmp(r->backing, "shmem");
	return true;
}

/* Chunks of slice @c->id in debugfs chunks, counted whole and shmem. */
static int slice_chunks(struct slice_census *c, int order)
{
	snprintf(c->whole_blocks, sizeof(c->whole_blocks), "%d:1", order);
	c->whole = c->shmem = 0;
	return pool_chunks_scan(census_row, c);
}

/*
 * 64 MiB slices: each whole chunk PMD-mapped (ShmemPmdMapped in smaps for
 * shmem chunks, FilePmdMapped for plain ones), registration works; the
 * cost against THP anonymous and THP shmem memory is logged.
 */
TEST_F_TIMEOUT(cost, reg_slice_vs_anon, 600)
{
	static uint64_t reg[KINDS][PER_KIND * ROUNDS], dereg[KINDS][PER_KIND * ROUNDS];
	static const char *const kind_name[KINDS] = { "slice", "anon", "shmem" };
	uint64_t rm[KINDS], dm[KINDS];
	struct mrpool_alloc a[PER_KIND];
	struct rdt_thp thp[KINDS][PER_KIND] = {};
	void *buf[KINDS][PER_KIND];
	struct mrpool_query q;
	char pmd[8], shm[8];
	int i, j, k, n, order = 0;

	ASSERT_EQ(0, pool_query(self->fd, &q));
	ASSERT_LE(PER_KIND * REG_LEN + q.used_bytes, q.max_bytes);
	while ((4096UL << order) < q.chunk_size)
		order++;
	pool_param_str("pmd_map", pmd, sizeof(pmd));
	pool_param_str("shmem_chunks", shm, sizeof(shm));
	/* THP shmem: the folios GUP-fast pins on 6.5+, as shmem chunks are. */
	ASSERT_EQ(0, shmem_thp_advise(self->shmem_enabled,
				      sizeof(self->shmem_enabled)));
	/*
	 * Set up interleaved, slice, anon, shmem, slice, ...: on 6.12 a
	 * buffer set up later registers up to 10% slower whatever its kind,
	 * so one buffer of each, set up in turn, would compare positions.
	 */
	for (n = 0; n < PER_KIND; n++) {
		struct slice_census c = {};

		ASSERT_EQ(0, pool_alloc(self->fd, REG_LEN, &a[n]));
		buf[SLICE][n] = mmap(NULL, a[n].length, PROT_READ | PROT_WRITE,
				     MAP_SHARED | MAP_POPULATE, self->fd,
				     (off_t)a[n].mmap_offset);
		ASSERT_NE(MAP_FAILED, buf[SLICE][n]);
		c.id = a[n].slice_id;
		ASSERT_EQ((int)(a[n].length / q.chunk_size),
			  slice_chunks(&c, order));
		TH_LOG("slice %d: %d of %llu chunks whole, %d of them shmem, pmd_map=%c shmem_chunks=%c",
		       n, c.whole, (unsigned long long)(a[n].length / q.chunk_size),
		       c.shmem, pmd[0], shm[0]);
		EXPECT_LE(c.shmem, c.whole);
		if (pmd[0] == 'Y' && q.chunk_size == 2 * MIB) {
			EXPECT_EQ((long long)c.whole * 2048,
				  pool_pmd_mapped_kb(buf[SLICE][n]));
			EXPECT_EQ((long long)c.shmem * 2048,
				  pool_smaps_kb(buf[SLICE][n], "ShmemPmdMapped:"));
		}
		for (k = ANON; k <= SHMEM; k++) {
			ASSERT_EQ(0, rdt_thp_map(&thp[k][n], REG_LEN, k == SHMEM));
			buf[k][n] = thp[k][n].addr;
		}
	}
	TH_LOG("THP anon %lld KiB, THP shmem %lld KiB PMD-mapped (first buffers)",
	       pool_smaps_kb(buf[ANON][0], "AnonHugePages:"),
	       pool_smaps_kb(buf[SHMEM][0], "ShmemPmdMapped:"));

	/* Round robin over every buffer, starting one further each round. */
	for (i = 0; i < ROUNDS; i++)
		for (j = 0; j < KINDS * PER_KIND; j++) {
			int b = (i + j) % (KINDS * PER_KIND);

			k = b % KINDS;
			n = b / KINDS;
			ASSERT_EQ(0, rdt_reg_time(self->dev.pd, buf[k][n], REG_LEN,
						  &reg[k][n * ROUNDS + i],
						  &dereg[k][n * ROUNDS + i]));
		}
	for (n = 0; n < PER_KIND; n++) {
		EXPECT_EQ(0, munmap(buf[SLICE][n], a[n].length));
		rdt_thp_unmap(&thp[ANON][n]);
		rdt_thp_unmap(&thp[SHMEM][n]);
	}
	for (k = 0; k < KINDS; k++) {
		rm[k] = median(reg[k], PER_KIND * ROUNDS);
		dm[k] = median(dereg[k], PER_KIND * ROUNDS);
	}
	/* Information for the reader; the benchmark owns the ratios. */
	for (k = 0; k < KINDS; k++)
		TH_LOG("64 MiB %s: ibv_reg_mr %lu us (%lu.%03lux of anon), ibv_dereg_mr %lu us (medians of %d, %d buffers)",
		       kind_name[k], (unsigned long)(rm[k] / 1000),
		       (unsigned long)(rm[k] / rm[ANON]),
		       (unsigned long)(rm[k] * 1000 / rm[ANON] % 1000),
		       (unsigned long)(dm[k] / 1000), PER_KIND * ROUNDS, PER_KIND);
}

TEST_HARNESS_MAIN
