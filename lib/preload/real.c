// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * The real functions behind the shim's: dlsym(RTLD_NEXT) once, on the
 * first call of any allocator entry point or registration call, whichever
 * comes first (constructors of other libraries may allocate or register
 * before ours runs, and may start threads that do): the allocator's and
 * libibverbs' together (mrp_pl_verbs_resolve()), before the pool can open,
 * so never under a lock of the shim's or the library's. dlsym itself may
 * allocate (its error buffer): while it runs, the calling thread's
 * allocations come from a small static buffer, never freed, so resolving
 * cannot recurse.
 *
 * The real malloc need not be glibc's: a program linked with jemalloc,
 * tcmalloc or mimalloc (DT_NEEDED, after the preloaded shim) has theirs
 * found here. Such a program, or a library in it, may give blocks from
 * malloc back through that allocator's own API (jemalloc's sdallocx,
 * dallocx, rallocx, sallocx; tcmalloc's tc_free; mimalloc's mi_free), which
 * the shim does not see and which would take a pool block for one of its
 * own (a crash, or a corrupt heap). So the shim finds out whose malloc it
 * is, and shim.c leaves every allocation to a foreign one.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdalign.h>
#include <string.h>

#include "preload.h"

struct mrp_pl_real mrp_pl_real;

/* Bootstrap buffer: bump allocation, a size header before each block. */
#define MRP_PL_BOOT_BYTES	(64 * 1024)
#define MRP_PL_BOOT_HDR		16
static alignas(64) unsigned char mrp_pl_boot[MRP_PL_BOOT_BYTES];
static _Atomic size_t mrp_pl_boot_used;		/* bytes handed out */
static __thread bool mrp_pl_resolving __attribute__((tls_model("initial-exec")));
static pthread_once_t mrp_pl_once = PTHREAD_ONCE_INIT;

bool mrp_pl_boot_owns(const void *p)
{
	return (const unsigned char *)p >= mrp_pl_boot &&
	       (const unsigned char *)p < mrp_pl_boot + MRP_PL_BOOT_BYTES;
}

size_t mrp_pl_boot_size(const void *p)
{
	size_t n;

	memcpy(&n, (const unsigned char *)p - MRP_PL_BOOT_HDR, sizeof(n));
	return n;
}

/* NULL once the buffer is used up: dlsym needs a few hundred bytes. */
void *mrp_pl_boot_alloc(size_t size, size_t align)
{
	size_t old = atomic_load(&mrp_pl_boot_used), start, end;

	if (align < MRP_PL_BOOT_HDR)
		align = MRP_PL_BOOT_HDR;
	do {
		start = (old + MRP_PL_BOOT_HDR + align - 1) & ~(align - 1);
		end = start + size;
		if (size > MRP_PL_BOOT_BYTES || end > MRP_PL_BOOT_BYTES)
			return NULL;
	} while (!atomic_compare_exchange_weak(&mrp_pl_boot_used, &old, end));
	memcpy(mrp_pl_boot + start - MRP_PL_BOOT_HDR, &size, sizeof(size));
	return mrp_pl_boot + start;	/* static storage: already zero */
}

/*
 * The object defining malloc (the real one, at m), or NULL when it is
 * libc.so.6, told by the base address dladdr(3) finds for each (no
 * allocation, no file name compared). libc is the object defining
 * gnu_get_libc_version, which no allocator defines; __libc_malloc would
 * not do: jemalloc, tcmalloc and mimalloc can define it too. An object
 * dladdr cannot place counts as foreign: the pool stays off.
 */
static const char *mrp_pl_malloc_owner(void *m)
{
	void *libc_sym = dlsym(RTLD_NEXT, "gnu_get_libc_version");
	Dl_info mi, li;

	if (!m || !dladdr(m, &mi))
		return "an unknown object";
	if (libc_sym && dladdr(libc_sym, &li) && li.dli_fbase == mi.dli_fbase)
		return NULL;
	return mi.dli_fname && *mi.dli_fname ? mi.dli_fname : "the program";
}

static void mrp_pl_resolve_once(void)
{
	struct mrp_pl_real r;

	mrp_pl_resolving = true;
	r.malloc = dlsym(RTLD_NEXT, "malloc");
	r.free = dlsym(RTLD_NEXT, "free");
	r.calloc = dlsym(RTLD_NEXT, "calloc");
	r.realloc = dlsym(RTLD_NEXT, "realloc");
	r.reallocarray = dlsym(RTLD_NEXT, "reallocarray");
	r.posix_memalign = dlsym(RTLD_NEXT, "posix_memalign");
	r.aligned_alloc = dlsym(RTLD_NEXT, "aligned_alloc");
	r.memalign = dlsym(RTLD_NEXT, "memalign");
	r.valloc = dlsym(RTLD_NEXT, "valloc");
	r.pvalloc = dlsym(RTLD_NEXT, "pvalloc");
	r.malloc_usable_size = dlsym(RTLD_NEXT, "malloc_usable_size");
	r.libc_free = dlsym(RTLD_NEXT, "__libc_free");
	r.libc_realloc = dlsym(RTLD_NEXT, "__libc_realloc");
	mrp_pl_verbs_resolve();
	mrp_pl_load_cfg(mrp_pl_malloc_owner((void *)r.malloc));
	mrp_pl_tls_init();
	mrp_pl_resolving = false;
	/*
	 * free last: mrp_pl_ready() tests it without the once, and its
	 * acquire makes libibverbs' functions visible with the allocator's
	 */
	mrp_pl_real.malloc = r.malloc;
	mrp_pl_real.calloc = r.calloc;
	mrp_pl_real.realloc = r.realloc;
	mrp_pl_real.reallocarray = r.reallocarray;
	mrp_pl_real.posix_memalign = r.posix_memalign;
	mrp_pl_real.aligned_alloc = r.aligned_alloc;
	mrp_pl_real.memalign = r.memalign;
	mrp_pl_real.valloc = r.valloc;
	mrp_pl_real.pvalloc = r.pvalloc;
	mrp_pl_real.malloc_usable_size = r.malloc_usable_size;
	mrp_pl_real.libc_free = r.libc_free;
	mrp_pl_real.libc_realloc = r.libc_realloc;
	__atomic_store_n(&mrp_pl_real.free, r.free, __ATOMIC_RELEASE);
}

/*
 * Resolve the allocator, or, called from inside dlsym on this thread,
 * return at once: the caller then serves itself from the static buffer
 * (mrp_pl_real.free still NULL).
 */
void mrp_pl_resolve(void)
{
	if (mrp_pl_resolving)
		return;
	pthread_once(&mrp_pl_once, mrp_pl_resolve_once);
}

/* A libibverbs function behind the shim's (the shim links libibverbs). */
void *mrp_pl_verbs_sym(const char *name)
{
	return dlsym(RTLD_NEXT, name);
}
