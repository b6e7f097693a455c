/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Shared pieces of mrpool-demo: a registered buffer as the RDMA steps see
 * it, the transfer-and-verify step both flows run, and the two flows.
 */
#ifndef MRPOOL_DEMO_H
#define MRPOOL_DEMO_H

#include <stddef.h>
#include <stdint.h>

#include "rdmatest.h"

/**
 * struct demo_buf - memory an RDMA operation can use
 * @name:	what the demo calls it ("src", "dst", "back")
 * @addr:	start address
 * @len:	usable bytes
 * @lkey:	local key in the loop's PD
 * @rkey:	remote key in the loop's PD
 */
struct demo_buf {
	const char *name;
	void *addr;
	size_t len;
	uint32_t lkey;
	uint32_t rkey;
};

/* Settings both flows share. */
struct demo_opts {
	const char *device;	/* RDMA device, NULL for the default */
	size_t len;		/* bytes per buffer; 0: two chunks */
	const char *hold_cmd;	/* run while the buffers are registered */
	int small_iters;	/* alloc/free rounds for the small-buffer race */
};

double demo_us(uint64_t ns);
/* Fills src, WRITEs it into dst, READs dst into back, checks both; 0/-errno. */
int demo_transfer(struct rdt_loop *lp, struct demo_buf *src,
		  struct demo_buf *dst, struct demo_buf *back, size_t len);
/* Offset of the first nonzero byte, or -1. */
long long demo_first_nonzero(const void *p, size_t len);

/* The module's interface: ioctl slices, mmap, ibv_reg_mr (flow_raw.c). */
int demo_flow_raw(const struct demo_opts *o, struct rdt_dev *dev,
		  struct rdt_loop *lp, size_t chunk_size);
/* The library: buffers that already carry their keys (flow_lib.c). */
int demo_flow_lib(const struct demo_opts *o, struct rdt_dev *dev,
		  struct rdt_loop *lp, size_t chunk_size);

#endif /* MRPOOL_DEMO_H */
