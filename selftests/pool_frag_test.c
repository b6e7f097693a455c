// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Which free chunk a slice gets: whole chunks (one PMD-order block, mapped
 * with one PMD, cheap to register) before chunks assembled from smaller
 * blocks under fragmentation; fragmented free chunks replaced by whole
 * ones once the page allocator has them again; and a failed allocation
 * leaves the free lists in the order it found them.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

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

FIXTURE(frag) {
	int fd;
	struct mrpool_query q0;
	long long trim_sec, max_mb;	/* restored by the teardown */
	char whole[16];			/* blocks column of a whole chunk */
};

FIXTURE_SETUP(frag)
{
	int order = 0;

	POOL_SETUP_OPEN();
	self->max_mb = pool_param("max_mb");
	/* No trim while the test compares chunks. */
	self->trim_sec = pool_trim_off();
	ASSERT_LE(0, self->trim_sec);
	while ((4096UL << order) < self->q0.chunk_size)
		order++;
	snprintf(self->whole, sizeof(self->whole), "%d:1", order);
}

FIXTURE_TEARDOWN(frag)
{
	if (self->fd < 0)
		return;
	pool_set_knob("fail_high_order", 0);
	pool_set_param("max_mb", self->max_mb);
	pool_trim_restore(self->trim_sec);
	close(self->fd);
}

/* The first chunk of slice @id: its pfn, and whether it is whole. */
static int first_chunk(uint64_t id, const char *whole, unsigned long *pfn,
		       bool *is_whole)
{
	char line[256], state[32], blocks[64];
	unsigned long p, owner;
	int node, ret = -ENOENT;
	FILE *f;

	f = fopen(POOL_DEBUGFS "/chunks", "re");
	if (!f)
		return -errno;
	while (ret && fgets(line, sizeof(line), f))
		if (sscanf(line, "%lx %d %31s %lu %63s", &p, &node, state,
			   &owner, blocks) == 5 && owner == id &&
		    !strcmp(state, "used")) {
			*pfn = p;
			*is_whole = !strcmp(blocks, whole);
			ret = 0;
		}
	fclose(f);
	return ret;
}

/* Free chunks debugfs lists that are not whole. */
static int free_fragmented(const char *whole)
{
	char line[256], state[32], blocks[64];
	unsigned long p, owner;
	int node, n = 0;
	FILE *f;

	f = fopen(POOL_DEBUGFS "/chunks", "re");
	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "%lx %d %31s %lu %63s", &p, &node, state,
			   &owner, blocks) == 5 && !strcmp(state, "free") &&
		    strcmp(blocks, whole))
			n++;
	fclose(f);
	return n;
}

/*
 * A fragmented chunk freed last is still handed out after the whole ones,
 * and is replaced by a whole chunk in the background.
 */
TEST_F(frag, whole_chunks_first_then_defrag)
{
	uint64_t chunk = self->q0.chunk_size;
	long long defrags = pool_attr("stats/defrags");
	struct mrpool_alloc all, f, g;
	struct mrpool_query q;
	unsigned long pfn;
	bool whole;

	/* No quarantined chunk to come free between the two ALLOCs below. */
	ASSERT_TRUE(POOL_WAIT(pool_attr("quarantined_bytes") == 0, 60000));
	/* At least one free chunk, then take every free one. */
	ASSERT_EQ(0, pool_alloc(self->fd, chunk, &g));
	ASSERT_EQ(0, pool_free(self->fd, g.slice_id));
	ASSERT_EQ(0, pool_query(self->fd, &q));
	ASSERT_LE(chunk, q.free_bytes);
	ASSERT_EQ(0, pool_alloc(self->fd, q.free_bytes, &all));

	/* Grown while high orders fail: a chunk of smaller blocks. */
	ASSERT_EQ(0, pool_set_knob("fail_high_order", 1));
	ASSERT_EQ(0, pool_alloc(self->fd, chunk, &f));
	ASSERT_EQ(0, first_chunk(f.slice_id, self->whole, &pfn, &whole));
	ASSERT_FALSE(whole);

	/* Freed last, so most recently freed... */
	ASSERT_EQ(0, pool_free(self->fd, all.slice_id));
	ASSERT_EQ(0, pool_free(self->fd, f.slice_id));
	/* ...yet the next slice gets a whole chunk. */
	ASSERT_EQ(0, pool_alloc(self->fd, chunk, &g));
	ASSERT_EQ(0, first_chunk(g.slice_id, self->whole, &pfn, &whole));
	EXPECT_TRUE(whole);
	EXPECT_EQ(0, pool_free(self->fd, g.slice_id));

	/*
	 * The fragmented chunk gives way to a whole one. Clearing the knob
	 * kicks the worker now, whatever back-off earlier misses left.
	 */
	ASSERT_EQ(0, pool_set_knob("fail_high_order", 0));
	EXPECT_TRUE(POOL_WAIT(pool_attr("stats/defrags") > defrags &&
			      free_fragmented(self->whole) == 0, 60000));
}

/*
 * An ALLOC that fails for want of room puts the chunks it took back where
 * they were: the most recently freed chunk is still the next one out.
 */
TEST_F(frag, failed_alloc_keeps_order)
{
	uint64_t chunk = self->q0.chunk_size;
	struct mrpool_alloc a, big, held;
	unsigned long first, again;
	struct mrpool_query q;
	bool whole;

	/* One chunk in use (the request below stays under max_mb)... */
	ASSERT_EQ(0, pool_alloc(self->fd, chunk, &held));
	/* ...two free at least, the most recent one known. */
	ASSERT_EQ(0, pool_alloc(self->fd, 2 * chunk, &a));
	ASSERT_EQ(0, pool_free(self->fd, a.slice_id));
	ASSERT_EQ(0, pool_alloc(self->fd, chunk, &a));
	ASSERT_EQ(0, first_chunk(a.slice_id, self->whole, &first, &whole));
	ASSERT_EQ(0, pool_free(self->fd, a.slice_id));

	/* No room to grow: one chunk more than the free ones fails. */
	ASSERT_EQ(0, pool_query(self->fd, &q));
	ASSERT_LE(2 * chunk, q.free_bytes);
	ASSERT_EQ(0, pool_set_param("max_mb",
				    (q.total_bytes + MIB - 1) / MIB));
	ASSERT_EQ(0, pool_query(self->fd, &q));
	ASSERT_LE(q.free_bytes + chunk, q.max_bytes);
	EXPECT_EQ(-ENOMEM, pool_alloc(self->fd, q.free_bytes + chunk, &big));

	ASSERT_EQ(0, pool_alloc(self->fd, chunk, &a));
	ASSERT_EQ(0, first_chunk(a.slice_id, self->whole, &again, &whole));
	EXPECT_EQ(first, again);
	EXPECT_EQ(0, pool_free(self->fd, a.slice_id));
	EXPECT_EQ(0, pool_free(self->fd, held.slice_id));
}

TEST_HARNESS_MAIN
