/* SPDX-License-Identifier: GPL-2.0 */
/*
 * mrpool in-kernel API: buffers from the host's pinned pool that already
 * carry keys for an RDMA device (the kernel MR cache), for other kernel
 * modules. Symbols are EXPORT_SYMBOL_GPL; build against mrpool's
 * Module.symvers (KBUILD_EXTRA_SYMBOLS).
 *
 * Model: mrpool keeps, per RDMA device, a cache PD in which every chunk of
 * the pool is registered local-only (never handed to anyone), and a
 * separate lend PD. A buffer is one chunk (at most mrpool_kbuf_max_size()
 * bytes, the pool's chunk size) lent to the caller with an MR of its own:
 * a fresh MR in the lend PD, over the buffer's first round_up(@size,
 * PAGE_SIZE) bytes only, with local write and remote read/write. Its key
 * is made of the new MR's index (the device's choice; rxe hands them out
 * cyclically) and a key byte that advances with every lend on the device,
 * so a key can only come back if the device reuses an MR index exactly a
 * multiple of 256 lends later. Use buffers for long-lived rings and
 * staging areas, not per message.
 *
 * What a borrower's QP can reach: keys are valid only on QPs of their PD,
 * so callers create their QPs in @pd of the buffer (the device's lend PD).
 * A QP there reaches, through the keys it is given, exactly the buffers
 * currently lent on that device (to any borrower: the lend PD is shared
 * by every kernel user of mrpool on the device), each over its rounded-up
 * length; never the rest of a chunk, never a chunk held by a process or
 * only cached (those MRs live in the cache PD), never a freed buffer (its
 * MR is invalidated and deregistered by mrpool_kbuf_free()).
 *
 * Reclaim and writeback paths: every call may be made from one (a block or
 * file system driver's I/O path, a shrinker) provided the caller marks it
 * as the kernel expects: PF_MEMALLOC (reclaim sets it),
 * memalloc_noio_save() or memalloc_nofs_save(). mrpool's own allocations
 * then follow that scope, and no lock mrpool takes is ever held across an
 * allocation that may enter IO or FS reclaim (its device locks are held in
 * a NOIO scope), so the call never waits for the reclaim it is part of.
 * It may still wait for the device (a registration or invalidation, at
 * most twice the module's wr_timeout_ms) and fail with -ENOMEM.
 *
 * DMA: a buffer is mapped for its device when lent and unmapped when
 * freed, with the CPU syncs of a streaming mapping there and none in
 * between: buffers assume cache-coherent DMA, as userspace verbs do
 * (x86-64, server arm64). mrpool does not serve a device whose DMA
 * bounces (swiotlb, a DMA mask below the host's memory): its state is
 * "unsupported".
 *
 * Lifetime: free every buffer, and destroy every object made in its PD,
 * before the device goes: in the remove callback of your ib_client, which
 * runs before mrpool's because it was registered after it. A buffer freed
 * later is still safe to free, but its keys died with the device. Both
 * calls may sleep. Each buffer holds a reference on mrpool.ko.
 */
#ifndef _MRPOOL_KAPI_H
#define _MRPOOL_KAPI_H

#include <linux/types.h>

struct ib_device;
struct ib_pd;

/**
 * struct mrpool_kbuf - a pool buffer registered on one RDMA device
 * @vaddr: kernel virtual address of byte 0
 * @dma_addr: address of byte 0 in work requests: ib_sge.addr with @lkey,
 *	remote_addr with @rkey. It is the MR's IOVA, equal to the DMA address
 *	of the memory when the chunk is physically contiguous (the usual case).
 * @size: bytes asked for; the MR covers them rounded up to PAGE_SIZE, and
 *	an access beyond that fails (remote access error)
 * @lkey: local key, for this buffer's device only
 * @rkey: remote key (remote read and write), for this buffer's device only;
 *	it stops working when the buffer is freed
 * @pd: the protection domain of @lkey and @rkey (the device's lend PD,
 *	shared by all buffers lent on it and nothing else); QPs using them
 *	live here
 *
 * Every field is read-only for the caller.
 */
struct mrpool_kbuf {
	void *vaddr;
	u64 dma_addr;
	size_t size;
	u32 lkey;
	u32 rkey;
	struct ib_pd *pd;
};

/**
 * mrpool_kbuf_alloc - take a zeroed pool buffer with keys for @device
 * @device: an RDMA device mrpool reports "ready"
 * @size: 1 to mrpool_kbuf_max_size() bytes
 *
 * Return: the buffer, or ERR_PTR(-EINVAL) for a bad size, -ENODEV for a
 * device mrpool cannot use, -ENOMEM when the pool is exhausted, -EIO or
 * -ETIMEDOUT when registration failed (the device is then "failed").
 */
struct mrpool_kbuf *mrpool_kbuf_alloc(struct ib_device *device, size_t size);

/**
 * mrpool_kbuf_free - return a buffer; its rkey and lkey stop working
 * @buf: from mrpool_kbuf_alloc(), or NULL/ERR_PTR (ignored)
 *
 * No work request may still use the buffer. If mrpool cannot prove the
 * buffer's MR dead (its invalidation never completed and the QP could not
 * be drained, or the device refused the deregistration), the chunk is
 * retired from the pool for good instead of being reused.
 */
void mrpool_kbuf_free(struct mrpool_kbuf *buf);

/**
 * mrpool_kbuf_max_size - the largest buffer mrpool_kbuf_alloc() takes
 *
 * Return: the pool's chunk size in bytes.
 */
size_t mrpool_kbuf_max_size(void);

#endif /* _MRPOOL_KAPI_H */
