// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * MRPOOL_IOC_DEVICES: rxe0 is listed as ready with every chunk of the pool
 * in the kernel MR cache, growth registers new chunks, QUERY counts the
 * ready devices, and the struct's size, stride, flag and pointer rules
 * hold. Also: chunks in the kernel MR cache hold no page reference, so a
 * freed slice's chunks go straight back to the pool, not to quarantine.
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
#pragma GCC diagnostic ignored "-Wclobbered"

#include "pool_util.h"

#define MAX_DEVS	16

FIXTURE(devs) {
	int fd;
	long long trim_sec;		/* restored by the teardown */
	struct mrpool_device d[MAX_DEVS];
};

static int devices(int fd, void *entries, uint32_t count, uint32_t esize,
		   uint32_t *total)
{
	struct mrpool_devices a = {
		.size = sizeof(a),
		.count = count,
		.entry_size = esize,
		.entries = (uintptr_t)entries,
	};
	int ret;

	ret = pool_ioctl(fd, MRPOOL_IOC_DEVICES, &a);
	if (!ret && total)
		*total = a.total;
	return ret;
}

/* Index of device @name in self->d after a listing, or -1. */
static int find_dev(const struct mrpool_device *d, uint32_t n,
		    const char *name)
{
	uint32_t i;

	for (i = 0; i < n; i++)
		if (!strcmp(d[i].name, name))
			return (int)i;
	return -1;
}

FIXTURE_SETUP(devs)
{
	self->fd = -1;
	if (access(POOL_DEV, F_OK))
		POOL_SETUP_SKIP(POOL_DEV " missing: mrpool.ko not loaded");
	self->fd = pool_open();
	ASSERT_LE(0, self->fd);
	/* No trim while chunk counts are compared. */
	self->trim_sec = pool_trim_off();
	ASSERT_LE(0, self->trim_sec);
}

FIXTURE_TEARDOWN(devs)
{
	if (self->fd < 0)
		return;
	close(self->fd);
	pool_trim_restore(self->trim_sec);
}

/* rxe0 is ready, on its node, with every chunk of the pool registered. */
TEST_F(devs, rxe0_ready_with_all_chunks)
{
	struct mrpool_device *d = self->d;
	struct mrpool_query q;
	uint32_t total, i;
	int r;

	POOL_SETUP_SKIPPED();

	ASSERT_EQ(0, devices(self->fd, NULL, 0, sizeof(*d), &total));
	ASSERT_LE(1, total) TH_LOG("no RDMA device listed");
	ASSERT_EQ(0, devices(self->fd, d, MAX_DEVS, sizeof(*d), &total));
	r = find_dev(d, total, "rxe0");
	if (r < 0)
		POOL_SKIP("rxe0 not present");
	ASSERT_EQ(0, pool_query(self->fd, &q));
	EXPECT_EQ(MRPOOL_DEVICE_READY, d[r].state);
	EXPECT_EQ(q.total_bytes / q.chunk_size, d[r].nr_chunks);
	EXPECT_STREQ("", d[r].reason);
	EXPECT_LE(-1, d[r].node);
	EXPECT_EQ(0, d[r].pad);
	for (i = 0; i < total; i++)
		TH_LOG("%s node %d state %u chunks %u reason '%s'", d[i].name,
		       d[i].node, d[i].state, d[i].nr_chunks, d[i].reason);
}

/* Chunks grown for an ALLOC are registered on rxe0 as they come. */
TEST_F(devs, growth_is_registered)
{
	struct mrpool_device *d = self->d;
	struct mrpool_query q0, q;
	struct mrpool_alloc a;
	uint32_t total;
	int r;

	POOL_SETUP_SKIPPED();

	ASSERT_EQ(0, pool_query(self->fd, &q0));
	if (q0.total_bytes + 2 * q0.chunk_size > q0.max_bytes)
		POOL_SKIP("no room to grow below max_mb");
	ASSERT_EQ(0, pool_alloc(self->fd, q0.free_bytes + 2 * q0.chunk_size,
				&a));
	ASSERT_EQ(0, pool_query(self->fd, &q));
	EXPECT_LE(q0.total_bytes + 2 * q0.chunk_size, q.total_bytes);
	ASSERT_EQ(0, devices(self->fd, d, MAX_DEVS, sizeof(*d), &total));
	r = find_dev(d, total, "rxe0");
	if (r < 0) {
		pool_free(self->fd, a.slice_id);
		POOL_SKIP("rxe0 not present");
	}
	EXPECT_EQ(q.total_bytes / q.chunk_size, d[r].nr_chunks);
	EXPECT_EQ(0, pool_free(self->fd, a.slice_id));
}

/* QUERY's ndevices counts the ready devices DEVICES lists. */
TEST_F(devs, query_counts_ready_devices)
{
	struct mrpool_device *d = self->d;
	uint32_t total, i, ready = 0;
	struct mrpool_query q;

	POOL_SETUP_SKIPPED();

	ASSERT_EQ(0, devices(self->fd, d, MAX_DEVS, sizeof(*d), &total));
	ASSERT_GE(MAX_DEVS, total);
	for (i = 0; i < total; i++)
		ready += d[i].state == MRPOOL_DEVICE_READY;
	ASSERT_EQ(0, pool_query(self->fd, &q));
	EXPECT_EQ(ready, q.ndevices);
	EXPECT_LE(1, q.ndevices);
}

/* Only min(count, total) entries are written; a wider stride is zero-padded. */
TEST_F(devs, count_and_stride)
{
	unsigned char buf[2 * 256];
	const struct mrpool_device *e;
	uint32_t total, i;

	POOL_SETUP_SKIPPED();

	memset(buf, 0xa5, sizeof(buf));
	ASSERT_EQ(0, devices(self->fd, buf, 1, 256, &total));
	ASSERT_LE(1, total);
	e = (const struct mrpool_device *)buf;
	EXPECT_NE(0, e->name[0]);
	EXPECT_EQ(0, e->reserved[0]);
	EXPECT_EQ(0, e->reserved[1]);
	for (i = sizeof(*e); i < 256; i++)
		ASSERT_EQ(0, buf[i]) TH_LOG("byte %u of the stride", i);
	for (i = 256; i < sizeof(buf); i++)
		ASSERT_EQ(0xa5, buf[i]) TH_LOG("byte %u past count", i);
}

/* Sizes, flags, reserved fields and entry sizes are validated. */
TEST_F(devs, bad_requests)
{
	struct {
		struct mrpool_devices a;
		uint64_t tail;
	} big;
	struct mrpool_devices a;
	struct mrpool_device *d = self->d;

	POOL_SETUP_SKIPPED();

#define RESET() do {							\
		memset(&a, 0, sizeof(a));				\
		a.size = sizeof(a);					\
		a.count = MAX_DEVS;					\
		a.entry_size = sizeof(*d);				\
		a.entries = (uintptr_t)d;				\
	} while (0)

	RESET();
	ASSERT_EQ(0, pool_ioctl(self->fd, MRPOOL_IOC_DEVICES, &a));
	RESET();
	a.size = sizeof(a) - 8;
	EXPECT_EQ(-EINVAL, pool_ioctl(self->fd, MRPOOL_IOC_DEVICES, &a));
	RESET();
	a.size = 8192;
	EXPECT_EQ(-EINVAL, pool_ioctl(self->fd, MRPOOL_IOC_DEVICES, &a));
	RESET();
	a.flags = 1;
	EXPECT_EQ(-EINVAL, pool_ioctl(self->fd, MRPOOL_IOC_DEVICES, &a));
	RESET();
	a.pad = 1;
	EXPECT_EQ(-EINVAL, pool_ioctl(self->fd, MRPOOL_IOC_DEVICES, &a));
	RESET();
	a.reserved[1] = 1;
	EXPECT_EQ(-EINVAL, pool_ioctl(self->fd, MRPOOL_IOC_DEVICES, &a));
	RESET();
	a.entry_size = sizeof(*d) - 1;
	EXPECT_EQ(-EINVAL, pool_ioctl(self->fd, MRPOOL_IOC_DEVICES, &a));
	RESET();
	a.entry_size = 8192;
	EXPECT_EQ(-EINVAL, pool_ioctl(self->fd, MRPOOL_IOC_DEVICES, &a));

	/* A newer, larger struct: fine if its extra bytes are zero. */
	memset(&big, 0, sizeof(big));
	big.a.size = sizeof(big);
	big.a.entry_size = sizeof(*d);
	EXPECT_EQ(0, pool_ioctl(self->fd, MRPOOL_IOC_DEVICES, &big));
	EXPECT_LE(1, big.a.total);
	big.tail = 1;
	EXPECT_EQ(-E2BIG, pool_ioctl(self->fd, MRPOOL_IOC_DEVICES, &big));
#undef RESET
}

/* An unwritable entry array or struct is -EFAULT; count 0 never touches it. */
TEST_F(devs, bad_pointers)
{
	uint32_t total;

	POOL_SETUP_SKIPPED();

	EXPECT_EQ(-EFAULT, devices(self->fd, (void *)8, 1, 192, &total));
	EXPECT_EQ(0, devices(self->fd, (void *)8, 0, 192, &total));
	EXPECT_LE(1, total);
	EXPECT_EQ(-EFAULT, pool_ioctl(self->fd, MRPOOL_IOC_DEVICES,
				      (void *)8));
}

/*
 * The kernel MR cache holds no page references: a slice mapped, written
 * and freed returns its chunks to the free list, none to quarantine.
 */
TEST_F(devs, cached_chunks_not_quarantined)
{
	struct mrpool_device *d = self->d;
	long long quarantines = pool_attr("stats/quarantines");
	struct mrpool_query q0, q;
	struct mrpool_alloc a;
	uint32_t total;
	char *p;
	int r;

	POOL_SETUP_SKIPPED();

	ASSERT_EQ(0, devices(self->fd, d, MAX_DEVS, sizeof(*d), &total));
	r = find_dev(d, total, "rxe0");
	if (r < 0 || d[r].state != MRPOOL_DEVICE_READY || !d[r].nr_chunks)
		POOL_SKIP("no ready rxe0 with cached chunks");
	ASSERT_EQ(0, pool_query(self->fd, &q0));
	ASSERT_EQ(0, pool_alloc(self->fd, 2 * q0.chunk_size, &a));
	p = pool_map(self->fd, &a);
	ASSERT_NE(MAP_FAILED, p);
	memset(p, 0x5a, a.length);
	ASSERT_EQ(0, munmap(p, a.length));
	ASSERT_EQ(0, pool_free(self->fd, a.slice_id));
	ASSERT_EQ(0, pool_query(self->fd, &q));
	EXPECT_EQ(q0.used_bytes, q.used_bytes);
	EXPECT_GE(q0.quarantined_bytes, q.quarantined_bytes);
	EXPECT_EQ(quarantines, pool_attr("stats/quarantines"));
}

static int slice_keys(int fd, uint64_t id, void *entries, uint32_t count,
		      uint32_t esize, uint32_t *total)
{
	struct mrpool_slice_keys a = {
		.size = sizeof(a),
		.slice_id = id,
		.count = count,
		.entry_size = esize,
		.entries = (uintptr_t)entries,
	};
	int ret;

	ret = pool_ioctl(fd, MRPOOL_IOC_SLICE_KEYS, &a);
	if (!ret && total)
		*total = a.total;
	return ret;
}

/* Is @lkey listed in debugfs "mrs" for @dev on one of @pfns? */
static int mrs_has(const char *dev, uint32_t lkey, const unsigned long *pfns,
		   int npfns)
{
	char line[256], name[64];
	unsigned long pfn;
	unsigned int key;
	int i, found = 0;
	FILE *f;

	f = fopen(POOL_DEBUGFS "/mrs", "re");
	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%lx %63s %x", &pfn, name, &key) != 3 ||
		    strcmp(name, dev) || key != lkey)
			continue;
		for (i = 0; i < npfns; i++)
			found |= pfns[i] == pfn;
	}
	fclose(f);
	return found;
}

/* SLICE_KEYS: one local-only kernel key per chunk and ready device. */
TEST_F(devs, slice_keys)
{
	struct mrpool_slice_key k[8];
	struct mrpool_query q;
	struct mrpool_alloc a;
	unsigned long pfns[2];
	uint32_t total, i;

	POOL_SETUP_SKIPPED();

	ASSERT_EQ(0, pool_query(self->fd, &q));
	if (q.ndevices != 1)
		POOL_SKIP("expects exactly one ready device (rxe0)");
	ASSERT_EQ(0, pool_alloc(self->fd, 2 * q.chunk_size, &a));
	ASSERT_EQ(2, pool_slice_pfns(a.slice_id, pfns, 2));
	ASSERT_EQ(0, slice_keys(self->fd, a.slice_id, NULL, 0, sizeof(k[0]),
				&total));
	EXPECT_EQ(2, total);
	memset(k, 0xa5, sizeof(k));
	ASSERT_EQ(0, slice_keys(self->fd, a.slice_id, k, 8, sizeof(k[0]),
				&total));
	ASSERT_EQ(2, total);
	for (i = 0; i < total; i++) {
		EXPECT_STREQ("rxe0", k[i].device);
		EXPECT_EQ(i, k[i].chunk);
		EXPECT_NE(0, k[i].lkey);
		EXPECT_EQ(0, k[i].rkey);
		EXPECT_EQ(0, k[i].reserved);
		EXPECT_EQ(1, mrs_has("rxe0", k[i].lkey, pfns, 2))
			TH_LOG("lkey %#x not in debugfs mrs", k[i].lkey);
	}
	EXPECT_NE(k[0].lkey, k[1].lkey);
	/* Untouched past the count. */
	EXPECT_EQ(0xa5a5a5a5U, k[2].lkey);

	EXPECT_EQ(-ENOENT, slice_keys(self->fd, a.slice_id + 1000, k, 8,
				      sizeof(k[0]), &total));
	EXPECT_EQ(-EINVAL, slice_keys(self->fd, a.slice_id, k, 8,
				      sizeof(k[0]) - 8, &total));
	EXPECT_EQ(-EFAULT, slice_keys(self->fd, a.slice_id, (void *)8, 1,
				      sizeof(k[0]), &total));
	EXPECT_EQ(0, pool_free(self->fd, a.slice_id));
	EXPECT_EQ(-ENOENT, slice_keys(self->fd, a.slice_id, k, 8,
				      sizeof(k[0]), &total));
}

TEST_HARNESS_MAIN
