// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * /dev/mrpool access for the demo: the raw ioctl + mmap path of the UAPI.
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "rdmatest.h"
#include "slices.h"

/* Retries EINTR; returns 0 or -errno. */
static int pool_ioctl(int fd, unsigned long cmd, void *arg)
{
	int ret;

	do {
		ret = ioctl(fd, cmd, arg);
	} while (ret < 0 && errno == EINTR);
	return ret < 0 ? -errno : 0;
}

int demo_pool_open(void)
{
	int fd = open("/dev/" MRPOOL_DEV_NAME, O_RDWR | O_CLOEXEC);

	return fd < 0 ? -errno : fd;
}

int demo_pool_query(int fd, struct mrpool_query *q)
{
	memset(q, 0, sizeof(*q));
	q->size = sizeof(*q);
	return pool_ioctl(fd, MRPOOL_IOC_QUERY, q);
}

int demo_slice_get(int fd, size_t bytes, struct demo_slice *s)
{
	struct mrpool_alloc a = {
		.size = sizeof(a),
		.bytes = bytes,
		.node = MRPOOL_NODE_ANY,
	};
	struct mrpool_free f = { .size = sizeof(f) };
	uint64_t t0;
	int ret;

	memset(s, 0, sizeof(*s));
	t0 = rdt_now_ns();
	ret = pool_ioctl(fd, MRPOOL_IOC_ALLOC, &a);
	s->alloc_ns = rdt_now_ns() - t0;
	if (ret)
		return ret;
	if (a.length < bytes) {
		ret = -EPROTO;
		goto free_slice;
	}

	t0 = rdt_now_ns();
	s->addr = mmap(NULL, a.length, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
		       (off_t)a.mmap_offset);
	s->mmap_ns = rdt_now_ns() - t0;
	if (s->addr == MAP_FAILED) {
		ret = -errno;
		s->addr = NULL;
		goto free_slice;
	}
	s->len = a.length;
	s->id = a.slice_id;
	return 0;

free_slice:
	f.slice_id = a.slice_id;
	pool_ioctl(fd, MRPOOL_IOC_FREE, &f);
	return ret;
}

int demo_slice_put(int fd, struct demo_slice *s)
{
	struct mrpool_free f = { .size = sizeof(f), .slice_id = s->id };
	int unmap = 0, ret;

	if (s->addr && munmap(s->addr, s->len))
		unmap = -errno;
	s->addr = NULL;
	/* FREE even if munmap failed: the file must not keep the slice. */
	ret = pool_ioctl(fd, MRPOOL_IOC_FREE, &f);
	return unmap ? unmap : ret;
}
