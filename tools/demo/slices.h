/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The demo's only contact with /dev/mrpool: query, take a slice and map it,
 * give it back. Kept apart from the RDMA flow so that moving the demo onto
 * libmrpool replaces this file and little else.
 */
#ifndef MRPOOL_DEMO_SLICES_H
#define MRPOOL_DEMO_SLICES_H

#include <stddef.h>
#include <stdint.h>

#include "uapi/mrpool.h"

/**
 * struct demo_slice - one mapped slice
 * @addr:	user address of the mapping
 * @len:	bytes in the slice (whole chunks)
 * @id:		slice id for MRPOOL_IOC_FREE
 * @alloc_ns:	time spent in MRPOOL_IOC_ALLOC
 * @mmap_ns:	time spent in mmap()
 */
struct demo_slice {
	void *addr;
	size_t len;
	uint64_t id;
	uint64_t alloc_ns;
	uint64_t mmap_ns;
};

/* Opens /dev/mrpool; returns the fd or -errno. */
int demo_pool_open(void);
/* MRPOOL_IOC_QUERY; 0 or -errno. */
int demo_pool_query(int fd, struct mrpool_query *q);
/* Allocates at least @bytes and maps them shared read/write; 0 or -errno. */
int demo_slice_get(int fd, size_t bytes, struct demo_slice *s);
/* Unmaps and frees; 0 or -errno (the first failure). */
int demo_slice_put(int fd, struct demo_slice *s);

#endif /* MRPOOL_DEMO_SLICES_H */
