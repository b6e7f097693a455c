// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * What a slice's registration is compared with (selftests/pool_regcost_test,
 * the bench's reg scenario): memory an application could have instead,
 * aligned so that the kernel can back it with PMD-size huge pages.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>

#include "rdmatest.h"

/* The PMD size THP uses, else 2 MiB (x86-64, arm64 with 4 KiB pages). */
static size_t thp_size(void)
{
	unsigned long long v = 0;
	FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/hpage_pmd_size",
			"re");

	if (f) {
		if (fscanf(f, "%llu", &v) != 1)
			v = 0;
		fclose(f);
	}
	return v ? (size_t)v : (size_t)2 << 20;
}

int rdt_thp_map(struct rdt_thp *t, size_t len, bool shmem)
{
	size_t align = thp_size();
	char *a;
	int fd;

	t->addr = NULL;
	t->maplen = len + align;
	/* Reserve with room to align; a memfd replaces the aligned part. */
	t->base = mmap(NULL, t->maplen, shmem ? PROT_NONE : PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (t->base == MAP_FAILED)
		return -errno;
	a = (char *)(((uintptr_t)t->base + align - 1) & ~(uintptr_t)(align - 1));
	if (shmem) {
		fd = memfd_create("rdt-thp", MFD_CLOEXEC);
		if (fd < 0 || ftruncate(fd, (off_t)len) ||
		    mmap(a, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED,
			 fd, 0) == MAP_FAILED) {
			int err = errno;

			if (fd >= 0)
				close(fd);
			munmap(t->base, t->maplen);
			return -err;
		}
		close(fd);
	}
	/* Advice only: without THP the comparison is with small pages. */
	madvise(a, len, MADV_HUGEPAGE);
	memset(a, 1, len);
	t->addr = a;
	return 0;
}

void rdt_thp_unmap(struct rdt_thp *t)
{
	if (t->addr)
		munmap(t->base, t->maplen);
	t->addr = NULL;
}
