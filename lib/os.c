// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * OS layer. Contract of mrp_os_map_aligned(): map size bytes with the given
 * prot/flags/fd/offset at an address aligned to align (a power of two,
 * >= page size), or return NULL with errno set; never touch a mapping it
 * did not create.
 *
 * It reserves size + align of address space with PROT_NONE, gives the
 * aligned part back and maps it with MAP_FIXED_NOREPLACE, then unmaps the
 * slack on both sides. Never MAP_FIXED over the reservation: a MAP_FIXED
 * mmap that fails (no huge pages, the device refused) has already unmapped
 * the range, another thread's mmap (a thread stack, say) may take it, and
 * unmapping "our" reservation afterwards would destroy that mapping.
 */
#include <errno.h>
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

#include "internal.h"

/* Another thread took the hole between munmap and mmap: try again. */
#define MRP_OS_MAP_TRIES	8

static void *mrp_os_map_once(size_t size, size_t align, int prot, int flags,
			     int fd, off_t off)
{
	uintptr_t start, aligned, end;
	void *r, *m;
	int err;

	r = mmap(NULL, size + align, PROT_NONE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (r == MAP_FAILED)
		return NULL;
	start = (uintptr_t)r;
	end = start + size + align;
	aligned = (start + align - 1) & ~(uintptr_t)(align - 1);

	munmap((void *)aligned, size);
	m = mmap((void *)aligned, size, prot, flags | MAP_FIXED_NOREPLACE, fd, off);
	err = errno;
	if (aligned > start)
		munmap(r, aligned - start);
	if (end > aligned + size)
		munmap((void *)(aligned + size), end - (aligned + size));
	if (m == MAP_FAILED) {
		errno = err;
		return NULL;
	}
	if ((uintptr_t)m != aligned) {
		/* A kernel older than 4.17 takes the address as a hint only. */
		munmap(m, size);
		errno = EEXIST;
		return NULL;
	}
	return m;
}

void *mrp_os_map_aligned(size_t size, size_t align, int prot, int flags,
			 int fd, off_t off)
{
	void *m;
	int tries = 0;

	do {
		m = mrp_os_map_once(size, align, prot, flags, fd, off);
	} while (!m && errno == EEXIST && ++tries < MRP_OS_MAP_TRIES);
	return m;
}

/* 4 KiB on x86-64; 4, 16 or 64 KiB on arm64, 64 KiB on ppc64. */
size_t mrp_os_page_size(void)
{
	long page = sysconf(_SC_PAGESIZE);

	return page > 0 ? (size_t)page : 4096;
}
