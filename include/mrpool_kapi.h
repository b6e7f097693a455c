/* SPDX-License-Identifier: GPL-2.0 */
/*
 * mrpool in-kernel API: buffers from the host's pinned pool that already
 * carry keys for an RDMA device (the kernel MR cache), for other kernel
 * modules. Symbols are EXPORT_SYMBOL_GPL; build against mrpool's
 * Module.symvers (KBUILD_EXTRA_SYMBOLS).
 *
 * Model: mrpool keeps one kernel PD per RDMA device and registers every
 * chunk of the pool in it. A buffer is one chunk (at most
 * mrpool_kbuf_max_size() bytes, the pool's chunk size) lent to the caller
 * with remote read/write enabled and a fresh key. Keys are valid only on QPs
 * of the same PD, so callers create their QPs in @pd of the buffer. Use
 * buffers for long-lived rings and staging areas, not per message.
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
 * @size: bytes asked for; the MR covers the whole chunk behind it
 * @lkey: local key, for this buffer's device only
 * @rkey: remote key (remote read and write), for this buffer's device only;
 *	it stops working when the buffer is freed
 * @pd: the protection domain of @lkey and @rkey; QPs using them live here
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
 * -ETIMEDOUT when registration failed.
 */
struct mrpool_kbuf *mrpool_kbuf_alloc(struct ib_device *device, size_t size);

/**
 * mrpool_kbuf_free - return a buffer; its rkey and lkey stop working
 * @buf: from mrpool_kbuf_alloc(), or NULL/ERR_PTR (ignored)
 *
 * No work request may still use the buffer.
 */
void mrpool_kbuf_free(struct mrpool_kbuf *buf);

/**
 * mrpool_kbuf_max_size - the largest buffer mrpool_kbuf_alloc() takes
 *
 * Return: the pool's chunk size in bytes.
 */
size_t mrpool_kbuf_max_size(void);

#endif /* _MRPOOL_KAPI_H */
