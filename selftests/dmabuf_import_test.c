// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Import of a slice's dma-buf by a device driver, as a NIC that registers
 * dma-bufs would do it: the test module dmabuf_import/mrpool_dmabuf_itest.ko
 * attaches a platform device (direct DMA), maps the attachment and reports
 * the scatter-gather table. NIC import itself (ibv_reg_dmabuf_mr) is not
 * testable here: rxe in 6.1 has no dma-buf MRs.
 */
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
#include "kselftest_harness.h"
#pragma GCC diagnostic pop
#pragma GCC diagnostic ignored "-Wclobbered"

#include "pool_util.h"

#define ITEST		"mrpool_dmabuf_itest"
#define ITEST_IMPORT	"/sys/kernel/debug/" ITEST "/import"

FIXTURE(imp) {
	int fd;
	int loaded;
};

struct block_census {
	uint64_t id;
	int blocks;
};

/* Adds the blocks a chunk of slice @id is built of ("order:count,..."). */
static bool count_blocks(const struct pool_chunk_row *r, void *arg)
{
	struct block_census *c = arg;
	const char *s = r->blocks;
	int order, count, len;

	if (r->owner != c->id || strcmp(r->state, "used"))
		return false;
	while (sscanf(s, "%d:%d%n", &order, &count, &len) == 2) {
		c->blocks += count;
		s += len;
		if (*s == ',')
			s++;
	}
	return true;
}

/* Hand descriptor @fd to the importer; its report in @out, or -errno. */
static int import(int fd, char *out, size_t len)
{
	char num[16];
	ssize_t n;
	int f, ret;

	f = open(ITEST_IMPORT, O_RDWR | O_CLOEXEC);
	if (f < 0)
		return -errno;
	snprintf(num, sizeof(num), "%d", fd);
	ret = write(f, num, strlen(num)) < 0 ? -errno : 0;
	n = pread(f, out, len - 1, 0);
	out[n > 0 ? n : 0] = '\0';
	close(f);
	return ret;
}

FIXTURE_SETUP(imp)
{
	char path[PATH_MAX], cmd[PATH_MAX + 16];

	self->fd = -1;
	if (access(POOL_DEV, F_OK))
		POOL_SETUP_SKIP(POOL_DEV " missing: mrpool.ko not loaded");
	if (pool_beside_self(path, sizeof(path),
			     "dmabuf_import/" ITEST ".ko"))
		POOL_SETUP_SKIP(ITEST ".ko not built (make -C $GUEST_KDIR M=$PWD/selftests/dmabuf_import)");
	snprintf(cmd, sizeof(cmd), "insmod %s", path);
	ASSERT_EQ(0, system(cmd));
	self->loaded = 1;
	self->fd = pool_open();
	ASSERT_LE(0, self->fd);
}

FIXTURE_TEARDOWN(imp)
{
	if (self->fd >= 0)
		close(self->fd);
	if (self->loaded)
		system("rmmod " ITEST);
}

/* The importer sees every byte of the slice, in few segments, its pages. */
TEST_F(imp, map_attachment)
{
	unsigned long long size, dma_bytes, sum, want = 0;
	struct mrpool_export_dmabuf e;
	struct block_census bc = { 0 };
	unsigned int nents, direct;
	struct mrpool_query q;
	struct mrpool_alloc a;
	unsigned char *p;
	char rep[160];
	uint64_t i;

	POOL_SETUP_SKIPPED();

	ASSERT_EQ(0, pool_query(self->fd, &q));
	ASSERT_EQ(0, pool_alloc(self->fd, 3 * q.chunk_size, &a));
	bc.id = a.slice_id;
	p = pool_map(self->fd, &a);
	ASSERT_NE(MAP_FAILED, p);
	for (i = 0; i < a.length / 4096; i++) {
		p[i * 4096] = (unsigned char)(i * 7 + 1);
		want += (unsigned char)(i * 7 + 1);
	}
	memset(&e, 0, sizeof(e));
	e.size = sizeof(e);
	e.slice_id = a.slice_id;
	ASSERT_EQ(0, pool_ioctl(self->fd, MRPOOL_IOC_EXPORT_DMABUF, &e));

	ASSERT_EQ(0, import(e.fd, rep, sizeof(rep))) TH_LOG("%s", rep);
	TH_LOG("%s", rep);
	ASSERT_EQ(5, sscanf(rep, "size %llu nents %u dma_bytes %llu direct %u sum %llu",
			    &size, &nents, &dma_bytes, &direct, &sum));
	EXPECT_EQ(a.length, size);
	EXPECT_EQ(a.length, dma_bytes);
	EXPECT_EQ(1, direct);
	EXPECT_EQ(want, sum);
	/*
	 * At most one segment per block: one per chunk, unless an earlier
	 * test left fragmented chunks free (handed out when no whole is).
	 */
	ASSERT_EQ(3, pool_chunks_scan(count_blocks, &bc));
	EXPECT_LE(1, nents);
	EXPECT_GE(bc.blocks, (int)nents);

	EXPECT_EQ(0, munmap(p, a.length));
	EXPECT_EQ(0, close(e.fd));
	EXPECT_EQ(0, pool_free(self->fd, a.slice_id));
}

/* A descriptor that is not a dma-buf is refused by dma_buf_get(). */
TEST_F(imp, not_a_dmabuf)
{
	char rep[160];

	POOL_SETUP_SKIPPED();

	EXPECT_EQ(-EINVAL, import(self->fd, rep, sizeof(rep)));
}

TEST_HARNESS_MAIN
