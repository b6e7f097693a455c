// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Kernel backend: arenas are slices of the mrpool module's pinned pool.
 * MRPOOL_IOC_ALLOC returns a slice id and an mmap offset; the slice is
 * mapped shared and writable (the module refuses anything else) on a 2 MiB
 * boundary, and given back with munmap + MRPOOL_IOC_FREE. Slices are
 * owned by the open file, so a crash returns them; they are VM_DONTCOPY,
 * so a child never sees them, unless the pool gives children copies
 * (pool->fork_copy, MRP_FORK_COPY where the module has
 * MRPOOL_FEATURE_FORK_COPY): then they are allocated with
 * MRPOOL_ALLOC_FORK_COPY and a forked child gets a private copy of each
 * mapping, made by the module at the fork, while the parent keeps the
 * slice and its registrations. Each slice can also be exported as a dma-buf, so
 * that devices that take dma-buf MRs register it without pinning its pages
 * again (reg.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <uapi/mrpool.h>

#include "internal.h"

static int mrp_ioctl(int fd, unsigned long cmd, void *arg)
{
	int ret;

	do {
		ret = ioctl(fd, cmd, arg);
	} while (ret < 0 && errno == EINTR);
	return ret < 0 ? -errno : 0;
}

static int mrp_kmod_init(struct mrp_pool *pool)
{
	struct mrpool_query q;
	int fd;

	fd = open(pool->cfg.device, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return -ENODEV;
	memset(&q, 0, sizeof(q));
	q.size = sizeof(q);
	if (mrp_ioctl(fd, MRPOOL_IOC_QUERY, &q) || q.abi_version != MRPOOL_ABI_VERSION ||
	    !q.chunk_size || (q.chunk_size & (q.chunk_size - 1))) {
		close(fd);
		return -ENODEV;
	}
	pool->fd = fd;
	/* zero from a module that predates the field (a reserved word) */
	pool->backend_fork_copy = q.features & MRPOOL_FEATURE_FORK_COPY;
	pool->granule = q.chunk_size > MRP_MAP_GRANULE ? q.chunk_size : MRP_MAP_GRANULE;
	return 0;
}

static void mrp_kmod_fini(struct mrp_pool *pool, bool forked)
{
	/* in a child the fork handler closed the fd already (pool.c) */
	(void)forked;
	if (pool->fd >= 0)
		close(pool->fd);
	pool->fd = -1;
}

static void mrp_kmod_free(struct mrp_pool *pool, uint64_t id)
{
	struct mrpool_free f;

	memset(&f, 0, sizeof(f));
	f.size = sizeof(f);
	f.slice_id = id;
	mrp_ioctl(pool->fd, MRPOOL_IOC_FREE, &f);
}

static int mrp_kmod_map(struct mrp_pool *pool, size_t size, size_t align,
			struct mrp_region *r)
{
	const int prot = PROT_READ | PROT_WRITE;
	struct mrpool_alloc al;
	int node = pool->node;	/* one load: an attach may set it meanwhile */
	void *m;
	int ret;

	memset(&al, 0, sizeof(al));
	al.size = sizeof(al);
	al.bytes = size;
	/* preferred: the module falls back to other nodes (no STRICT flag) */
	al.node = node >= 0 ? node : MRPOOL_NODE_ANY;
	if (pool->fork_copy)
		al.flags |= MRPOOL_ALLOC_FORK_COPY;
	ret = mrp_ioctl(pool->fd, MRPOOL_IOC_ALLOC, &al);
	if (ret)
		return ret == -EDQUOT ? -ENOMEM : ret;
	/* the module aligns slices itself (thp_get_unmapped_area); check */
	m = mmap(NULL, al.length, prot, MAP_SHARED, pool->fd, (off_t)al.mmap_offset);
	if (m != MAP_FAILED && ((uintptr_t)m & (align - 1))) {
		munmap(m, al.length);
		m = MAP_FAILED;
	}
	if (m == MAP_FAILED) {
		m = mrp_os_map_aligned(al.length, align, prot, MAP_SHARED, pool->fd,
				       (off_t)al.mmap_offset);
		if (!m) {
			ret = -errno;
			mrp_kmod_free(pool, al.slice_id);
			return ret;
		}
	}
	/*
	 * A FORK_COPY slice is not kept out of children while it is made, as
	 * anon arenas are (backend_anon.c): kernels after 6.12 refuse
	 * MADV_DOFORK on a slice (VM_DONTEXPAND is VM_SPECIAL), so the fork
	 * handler could never hand it on once published. A fork between
	 * this mmap() and the arena's record (arena.c) leaves the child a
	 * copy no record names: the child's own memory, until it exits or
	 * execs; the parent's slice is untouched.
	 */
	r->base = (uintptr_t)m;
	r->size = al.length;
	r->handle = al.slice_id;
	r->locked = true;
	return 0;
}

static void mrp_kmod_unmap(struct mrp_pool *pool, struct mrp_region *r)
{
	mrp_os_unmap((void *)r->base, r->size);
	mrp_kmod_free(pool, r->handle);
}

/*
 * A slice as a dma-buf, for ibv_reg_dmabuf_mr(): the MR then holds the
 * dma-buf, and the module keeps the slice's memory until it is released.
 */
static int mrp_kmod_export_dmabuf(struct mrp_pool *pool, uint64_t handle)
{
	struct mrpool_export_dmabuf ex;
	int ret;

	memset(&ex, 0, sizeof(ex));
	ex.size = sizeof(ex);
	ex.flags = MRPOOL_EXPORT_CLOEXEC;
	ex.slice_id = handle;
	ret = mrp_ioctl(pool->fd, MRPOOL_IOC_EXPORT_DMABUF, &ex);
	return ret ? ret : ex.fd;
}

const struct mrp_backend_ops mrp_backend_kmod = {
	.kind = MRP_KIND_KERNEL,
	.init = mrp_kmod_init,
	.fini = mrp_kmod_fini,
	.map = mrp_kmod_map,
	.unmap = mrp_kmod_unmap,
	.export_dmabuf = mrp_kmod_export_dmabuf,
};
