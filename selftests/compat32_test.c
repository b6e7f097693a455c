// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * A 32-bit process (built -m32, run on the 64-bit guest kernel through its
 * compat ioctl and mmap2 paths): QUERY, ALLOC, mmap and FREE work as for
 * a 64-bit one, and its slices map whatever their ids: the id cursor is
 * moved to the last ids, where offsets once passed what mmap2() reaches.
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
#include "kselftest_harness.h"
#pragma GCC diagnostic pop

#include "pool_util.h"

#define NEXT_ID		POOL_DEBUGFS "/next_slice_id"

FIXTURE(c32) {
	int fd;
	struct mrpool_query q0;
	long long saved;	/* the id cursor, restored after */
};

FIXTURE_SETUP(c32)
{
	self->saved = -1;
	POOL_SETUP_OPEN();
	self->saved = pool_read_ll(NEXT_ID);
	if (self->saved < 0)
		POOL_SETUP_SKIP("no debugfs " NEXT_ID);
}

FIXTURE_TEARDOWN(c32)
{
	if (self->saved >= 0)
		pool_write_ll(NEXT_ID, self->saved);
	if (self->fd >= 0)
		close(self->fd);
}

TEST_F(c32, query_from_32_bits)
{
	POOL_SETUP_SKIPPED();
	ASSERT_EQ(4, sizeof(void *)) TH_LOG("not a 32-bit build");
	EXPECT_EQ(MRPOOL_ABI_VERSION, self->q0.abi_version);
	EXPECT_LT(0, self->q0.chunk_size);
	EXPECT_LE(self->q0.used_bytes, self->q0.total_bytes);
	EXPECT_EQ(0, self->q0.file_bytes);
}

/* Three slices from @start on: each maps, and holds what is written. */
static void three_slices(struct __test_metadata *_metadata, int fd,
			 long long start)
{
	struct mrpool_alloc a[3];
	struct mrpool_query q;
	uint8_t *p;
	int i;

	ASSERT_EQ(0, pool_write_ll(NEXT_ID, start));
	for (i = 0; i < 3; i++) {
		ASSERT_EQ(0, pool_alloc(fd, 1, &a[i]));
		p = pool_map(fd, &a[i]);
		/* Not ASSERT_NE: the harness casts pointers to intmax_t. */
		ASSERT_TRUE(p != MAP_FAILED) TH_LOG("slice id %llu, offset %#llx: %s",
						(unsigned long long)a[i].slice_id,
						(unsigned long long)a[i].mmap_offset,
						strerror(errno));
		EXPECT_EQ(a[i].length, pool_nonzero_at(p, a[i].length));
		p[0] = (uint8_t)(i + 1);
		p[a[i].length - 1] = (uint8_t)(i + 1);
		EXPECT_EQ(i + 1, p[0]);
		EXPECT_EQ(i + 1, p[a[i].length - 1]);
		EXPECT_EQ(0, munmap(p, a[i].length));
	}
	ASSERT_EQ(0, pool_query(fd, &q));
	EXPECT_EQ(a[0].length + a[1].length + a[2].length, q.file_bytes);
	for (i = 0; i < 3; i++)
		EXPECT_EQ(0, pool_free(fd, a[i].slice_id));
}

TEST_F(c32, slices_map_at_low_ids)
{
	POOL_SETUP_SKIPPED();
	three_slices(_metadata, self->fd, 1);
}

TEST_F(c32, slices_map_at_the_last_ids)
{
	POOL_SETUP_SKIPPED();
	three_slices(_metadata, self->fd, (1LL << 23) - 2);
}

TEST_HARNESS_MAIN
