// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * OS layer: aligned mappings and their unmapping, the page size, and a
 * process-wide memory barrier (mrp_os_membarrier()). Contract of mrp_os_map_aligned(): map
 * size bytes with the given prot/flags/fd/offset at an address aligned to
 * align (a power of two, >= page size), or return NULL with errno set;
 * never touch a mapping it did not create.
 *
 * It reserves size + align of address space with PROT_NONE, gives the
 * aligned part back and maps it with MAP_FIXED_NOREPLACE, then unmaps the
 * slack on both sides. Never MAP_FIXED over the reservation: a MAP_FIXED
 * mmap that fails (no huge pages, the device refused) has already unmapped
 * the range, another thread's mmap (a thread stack, say) may take it, and
 * unmapping "our" reservation afterwards would destroy that mapping.
 */
#include <dlfcn.h>
#include <errno.h>
#include <infiniband/verbs.h>
#include <linux/membarrier.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "internal.h"

/*
 * Unmap memory the application may have registered itself (arenas,
 * fallback buffers). Registration caches of other libraries in the process
 * must forget it first, or they would hand out a stale MR for whatever is
 * mapped there next: UCX's, when it is loaded, through ucm_vm_munmap(),
 * which runs its handlers for an unmapping without unmapping. libfabric's
 * monitors have no such call and rely on their hooks.
 *
 * mrp_os_unmap() may run under pool->lock (close; trim unmaps without
 * it, depot.c, but must not depend on that), so it must not call
 * dlsym(): dlsym takes the dynamic linker's lock, and a thread in dlopen()
 * holds that lock while constructors allocate, which may need pool->lock
 * (the preload shim's malloc): a lock order inversion. The entry point is
 * looked up by mrp_os_unmap_resolve() instead, called where the library
 * holds no lock (pool open and close, mrp_trim(), each wakeup of the pool
 * thread, a fallback buffer's making and free): UCX dlopen()ed late is seen from the next one
 * on, before any trim that could unmap memory it registered.
 */
static void (*_Atomic mrp_ucm_vm_munmap)(void *, size_t);

void mrp_os_unmap_resolve(void)
{
	void (*fn)(void *, size_t);

	*(void **)&fn = dlsym(RTLD_DEFAULT, "ucm_vm_munmap");
	atomic_store_explicit(&mrp_ucm_vm_munmap, fn, memory_order_relaxed);
}

void mrp_os_unmap(void *addr, size_t len)
{
	void (*fn)(void *, size_t) =
		atomic_load_explicit(&mrp_ucm_vm_munmap, memory_order_relaxed);

	if (fn)
		fn(addr, len);
	munmap(addr, len);
}

/*
 * Does the kernel give a child its own copy of the pages pinned for DMA at
 * fork, so the parent keeps the pinned page, and with it every
 * registration over it? libibverbs asks the kernel (RDMA netlink's
 * copy-on-fork attribute) in ibv_is_fork_initialized(): IBV_FORK_UNNEEDED
 * is that answer. Without the RDMA stack loaded the kernel cannot be asked
 * (IBV_FORK_DISABLED), yet a later ib_core would pin through the same mm:
 * then its release decides, from 5.13 on, the release rdma-core trusts
 * (anon ptes since 5.9, THP and hugetlb since 5.11). IBV_FORK_ENABLED
 * means ibv_fork_init() ran and libibverbs marks its MRs DONTFORK itself.
 * Looked up rather than linked, for a libibverbs older than rdma-core 35
 * (no such call: the release alone); dlsym(), so called where the library
 * holds no lock (see above).
 */
static bool mrp_os_release_at_least(unsigned int major, unsigned int minor)
{
	unsigned int ma, mi;
	struct utsname u;

	if (uname(&u) || sscanf(u.release, "%u.%u", &ma, &mi) != 2)
		return false;
	return ma > major || (ma == major && mi >= minor);
}

bool mrp_os_fork_copies_pinned(void)
{
	enum ibv_fork_status (*fn)(void);
	enum ibv_fork_status st;

	*(void **)&fn = dlsym(RTLD_DEFAULT, "ibv_is_fork_initialized");
	st = fn ? fn() : IBV_FORK_DISABLED;
	if (st == IBV_FORK_UNNEEDED)
		return true;
	return st == IBV_FORK_DISABLED && mrp_os_release_at_least(5, 13);
}

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

/*
 * A full memory barrier on every running thread of the process, as if each
 * had executed one where it stands: the heavy side of an asymmetric fence
 * (the idle reclaim's, tcache.c), whose light side is a compiler barrier.
 * Only the private expedited command (Linux 4.14) is used: it interrupts
 * just the CPUs running this process, and waits for no RCU grace period
 * as the global one does (milliseconds). It is not bounded either: recent
 * kernels (6.11, and stable backports) serialize the expedited commands
 * system-wide behind one mutex, so a call may wait for other processes'.
 * A reclaim pass therefore holds no lock across it (tcache.c); without the
 * private command there is no barrier and no idle reclaim.
 *
 * mrp_os_membarrier_register(): the one-time registration the command
 * needs; 0, or the negative errno it failed with (ENOSYS: no membarrier,
 * EINVAL: no private expedited command, EPERM: a seccomp filter), the same
 * for every later call. mrp_os_membarrier(): the barrier, once registered.
 */
static pthread_once_t mrp_mb_once = PTHREAD_ONCE_INIT;
static int mrp_mb_err;

static void mrp_os_membarrier_init(void)
{
	if (syscall(__NR_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0))
		mrp_mb_err = -errno;
}

int mrp_os_membarrier_register(void)
{
	pthread_once(&mrp_mb_once, mrp_os_membarrier_init);
	return mrp_mb_err;
}

int mrp_os_membarrier(void)
{
	if (mrp_os_membarrier_register())
		return mrp_mb_err;
	return syscall(__NR_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) ? -errno : 0;
}
