// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Demo flow 1, the module's own interface: three slices from /dev/mrpool
 * (ALLOC ioctl + mmap), registered with ibv_reg_mr, a transfer across
 * their chunk boundary, then dereg, munmap, FREE.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "demo.h"
#include "slices.h"

enum { SRC, DST, BACK, NBUFS };

static const char *const names[NBUFS] = { "src", "dst", "back" };

/* Registration of the same size in malloc'd memory, for comparison. */
static void reg_malloc_compare(struct rdt_dev *dev, size_t len)
{
	struct ibv_mr *mr;
	uint64_t t0, ns;
	void *p;

	if (posix_memalign(&p, 4096, len))
		return;
	memset(p, 1, len);
	t0 = rdt_now_ns();
	mr = ibv_reg_mr(dev->pd, p, len, RDT_ACCESS_ALL);
	ns = rdt_now_ns() - t0;
	if (mr) {
		printf("  reg_mr  malloc'd %zu KiB (prefaulted), for comparison: %.1f us\n",
		       len >> 10, demo_us(ns));
		ibv_dereg_mr(mr);
	}
	free(p);
}

int demo_flow_raw(const struct demo_opts *o, struct rdt_dev *dev,
		  struct rdt_loop *lp, size_t chunk_size)
{
	struct demo_slice s[NBUFS] = { 0 };
	struct ibv_mr *mr[NBUFS] = { 0 };
	struct demo_buf b[NBUFS];
	size_t len = o->len ? o->len : 2 * chunk_size;
	int fd, i, ret;
	uint64_t t0;

	printf("== flow 1: the module's interface (ALLOC ioctl, mmap, ibv_reg_mr)\n");
	fd = demo_pool_open();
	if (fd < 0) {
		fprintf(stderr, "mrpool-demo: /dev/%s: %s\n", MRPOOL_DEV_NAME,
			strerror(-fd));
		return fd;
	}
	for (i = 0; i < NBUFS; i++) {
		ret = demo_slice_get(fd, len, &s[i]);
		if (ret) {
			fprintf(stderr, "mrpool-demo: slice %s (%zu bytes): %s\n",
				names[i], len, strerror(-ret));
			goto put;
		}
		printf("  slice   %-4s %zu KiB, id %" PRIu64 ", at %p: ALLOC %.1f us, mmap %.1f us\n",
		       names[i], s[i].len >> 10, s[i].id, s[i].addr,
		       demo_us(s[i].alloc_ns), demo_us(s[i].mmap_ns));
		/* The pool promises zeroed chunks to every new owner. */
		if (demo_first_nonzero(s[i].addr, s[i].len) >= 0) {
			fprintf(stderr, "mrpool-demo: slice %s is not zeroed\n",
				names[i]);
			ret = -EBADMSG;
			goto put;
		}
	}
	if (len > chunk_size)
		printf("  slices  mapped and zeroed; transfers cross the chunk boundary at offset %zu\n",
		       chunk_size);
	else
		printf("  slices  mapped and zeroed; transfers stay within one chunk\n");

	for (i = 0; i < NBUFS; i++) {
		t0 = rdt_now_ns();
		mr[i] = ibv_reg_mr(dev->pd, s[i].addr, s[i].len, RDT_ACCESS_ALL);
		if (!mr[i]) {
			ret = -errno;
			fprintf(stderr, "mrpool-demo: ibv_reg_mr %s: %s\n",
				names[i], strerror(errno));
			goto dereg;
		}
		printf("  reg_mr  %-4s %zu KiB: lkey 0x%08x rkey 0x%08x, %.1f us\n",
		       names[i], s[i].len >> 10, mr[i]->lkey, mr[i]->rkey,
		       demo_us(rdt_now_ns() - t0));
		b[i] = (struct demo_buf){
			.name = names[i], .addr = s[i].addr, .len = s[i].len,
			.lkey = mr[i]->lkey, .rkey = mr[i]->rkey,
		};
	}
	reg_malloc_compare(dev, len);

	ret = demo_transfer(lp, &b[SRC], &b[DST], &b[BACK], len);
	if (ret)
		goto dereg;
	printf("  verify  %zu KiB written and read back: identical\n", len >> 10);

	if (o->hold_cmd) {
		fflush(stdout);
		if (system(o->hold_cmd))
			fprintf(stderr, "mrpool-demo: -x command failed\n");
	}

dereg:
	for (i = NBUFS - 1; i >= 0; i--) {
		int err;

		if (!mr[i])
			continue;
		t0 = rdt_now_ns();
		err = ibv_dereg_mr(mr[i]);	/* a positive errno value */
		if (err && !ret)
			ret = -err;
		printf("  dereg   %-4s %.1f us\n", names[i],
		       demo_us(rdt_now_ns() - t0));
	}
put:
	for (i = NBUFS - 1; i >= 0; i--) {
		int err;

		if (!s[i].addr)
			continue;
		err = demo_slice_put(fd, &s[i]);
		if (err) {
			fprintf(stderr, "mrpool-demo: FREE %s: %s\n", names[i],
				strerror(-err));
			if (!ret)
				ret = err;
		}
	}
	close(fd);
	return ret;
}
