// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * OS layer. Contract of mrp_os_map_aligned(): map size bytes with the given
 * prot/flags/fd/offset at an address aligned to align (a power of two,
 * >= page size), or return NULL with errno set. It reserves size + align
 * of address space with PROT_NONE, maps over the aligned part with
 * MAP_FIXED, and unmaps the slack on both sides.
 */
#include <errno.h>
#include <stdint.h>
#include <sys/mman.h>

#include "internal.h"

void *mrp_os_map_aligned(size_t size, size_t align, int prot, int flags,
			 int fd, off_t off)
{
	uintptr_t start, aligned;
	void *r, *m;

	r = mmap(NULL, size + align, PROT_NONE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (r == MAP_FAILED)
		return NULL;
	start = (uintptr_t)r;
	aligned = (start + align - 1) & ~(uintptr_t)(align - 1);
	m = mmap((void *)aligned, size, prot, flags | MAP_FIXED, fd, off);
	if (m == MAP_FAILED) {
		int err = errno;

		munmap(r, size + align);
		errno = err;
		return NULL;
	}
	if (aligned > start)
		munmap(r, aligned - start);
	if (start + align > aligned)
		munmap((void *)(aligned + size), start + align - aligned);
	return m;
}
