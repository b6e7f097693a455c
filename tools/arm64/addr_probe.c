// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Where an arm64 kernel puts the library's memory (tools/arm64/run, in the
 * guest). The host tests cover addresses above 2^47 with a backend that
 * makes them up (lib/tests/map_test.c); here the kernel hands them out:
 * with 4 KiB pages and 48-bit VA, mmap places new mappings just below 2^48,
 * above x86-64's 2^47 ceiling. With 16 KiB pages (52-bit VA where the CPU
 * has LPA2) the window mmap uses without a hint ends at 2^47; a hint
 * reaches beyond 2^48, where the library's address map ends (it passes no
 * hint). TAP: the library's buffers (the anon backend, as the host tests
 * use it) lie below 2^48, and above 2^47 where the stack (the top of the
 * default window) does; the page size and where plain mmap puts 1 GiB,
 * with and without a hint at 2^50, are reported.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "mrpool.h"

#define BIT(n)	((uintptr_t)1 << (n))

/* Sizes from each part of the allocator: small and large classes. */
static const size_t sizes[] = { 64, 4096, 65536, 1 << 20, 8 << 20, 64 << 20 };
#define NSIZES	(sizeof(sizes) / sizeof(sizes[0]))

static int test_num;

static int ok(int good, const char *what)
{
	printf("%sok %d %s\n", good ? "" : "not ", ++test_num, what);
	return good;
}

/* The start of the highest mapping in /proc/self/maps (the stack's region). */
static uintptr_t maps_top(void)
{
	FILE *f = fopen("/proc/self/maps", "r");
	unsigned long lo, hi, top = 0;
	char line[512];

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "%lx-%lx", &lo, &hi) == 2 && hi > top)
			top = hi;
	fclose(f);
	return top;
}

int main(void)
{
	struct mrp_pool_attr attr;
	struct mrp_buf b[NSIZES];
	uintptr_t lo = UINTPTR_MAX, hi = 0, top = maps_top();
	struct mrp_pool *pool;
	void *plain, *hinted;
	int ret = 0, fail = 0;

	printf("1..4\n");
	printf("# page size %ld, highest mapping ends at %#lx\n",
	       sysconf(_SC_PAGESIZE), (unsigned long)top);

	plain = mmap(NULL, 1UL << 30, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	hinted = mmap((void *)BIT(50), 1UL << 30, PROT_NONE,
		      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	printf("# mmap 1 GiB: %p; with a hint at 2^50: %p\n", plain, hinted);
	if (plain != MAP_FAILED)
		munmap(plain, 1UL << 30);
	if (hinted != MAP_FAILED)
		munmap(hinted, 1UL << 30);

	memset(&attr, 0, sizeof(attr));
	attr.comp_mask = MRP_POOL_ATTR_BACKEND | MRP_POOL_ATTR_BACKGROUND;
	attr.backend = MRP_BACKEND_ANON;
	attr.background = 0;
	pool = mrp_pool_open(&attr);
	if (!pool) {
		perror("mrp_pool_open");
		ok(0, "the library's anon pool opens");
		return 1;
	}
	ok(1, "the library's anon pool opens");
	for (size_t i = 0; i < NSIZES; i++) {
		ret = mrp_alloc(pool, sizes[i], NULL, &b[i]);
		if (ret) {
			printf("# mrp_alloc(%zu): %s\n", sizes[i], mrp_strerror(ret));
			break;
		}
		memset(b[i].addr, 0xa5, sizes[i]);
		printf("# mrp_alloc(%zu) = %p\n", sizes[i], b[i].addr);
		if ((uintptr_t)b[i].addr < lo)
			lo = (uintptr_t)b[i].addr;
		if ((uintptr_t)b[i].addr + b[i].size > hi)
			hi = (uintptr_t)b[i].addr + b[i].size;
	}
	fail |= !ok(!ret, "mrp_alloc serves a buffer of each size");
	printf("# the library's buffers: lowest %#lx, highest end %#lx\n",
	       (unsigned long)lo, (unsigned long)hi);
	fail |= !ok(!ret && hi <= BIT(48), "the library's buffers lie below 2^48");
	if (top > BIT(47))
		fail |= !ok(!ret && lo >= BIT(47), "the library's buffers lie above 2^47");
	else
		printf("ok %d the library's buffers lie above 2^47 # SKIP this kernel's mmap "
		       "window without a hint ends at %#lx\n", ++test_num, (unsigned long)top);
	for (size_t i = 0; !ret && i < NSIZES; i++)
		mrp_free(pool, b[i].addr);
	mrp_pool_close(pool);
	return ret || fail;
}
