/* SPDX-License-Identifier: GPL-2.0 */
/*
 * mrpool in-kernel API: buffers from the host's pinned pool that already
 * carry keys for an RDMA device (the kernel MR cache), for other kernel
 * modules. Symbols are EXPORT_SYMBOL_GPL; build against mrpool's
 * Module.symvers (KBUILD_EXTRA_SYMBOLS).
 *
 * Model: mrpool keeps, per RDMA device, a cache PD in which every chunk of
 * the pool is registered local-only (never handed to anyone). A buffer is
 * one chunk (at most mrpool_kbuf_max_size() bytes, the pool's chunk size)
 * lent to the caller with an MR of its own: a fresh MR over the buffer's
 * first round_up(@size, PAGE_SIZE) bytes only, with local write and remote
 * read/write, in one of two kinds of PD:
 *  - a session's (mrpool_kbuf_session_alloc()): each session has a PD of
 *    its own on its device, mrpool's or one the borrower passed in, and
 *    nothing of mrpool's but the session's buffers is registered there;
 *  - the device's shared lend PD (mrpool_kbuf_alloc()), which holds the
 *    buffers of every borrower using that call on the device.
 * A buffer's key is made of the new MR's index (the device's choice, often
 * sequential) and a random key byte.
 * Use buffers for long-lived rings and staging areas, not per message.
 *
 * What a borrower's QP can reach: keys are valid only on QPs of their PD,
 * so callers create their QPs in @pd of the buffer. A QP there reaches,
 * through the keys it is given or guesses, exactly the buffers currently
 * lent in that PD, each over its rounded-up length; never the rest of a
 * chunk, never a chunk held by a process or only cached (those MRs live in
 * the cache PD), never a freed buffer (its MR is invalidated and
 * deregistered by mrpool_kbuf_free()), never another session's buffer. A
 * remote peer of such a QP has the same reach. Hence: one session per
 * trust domain, in practice per connection (or per remote peer), whose
 * QPs are the only ones in its PD; and, as in-tree ULPs do with their
 * per-I/O registrations, free (invalidate) a buffer whose key a peer saw
 * as soon as that peer is done with it or disconnects, and destroy the
 * session with the connection. The shared PD suits a borrower whose
 * peers may all see all of its buffers, and no other borrower uses it.
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
 * Lifetime: free every buffer, destroy every object you made in a
 * session's PD and then the session, before the device goes: in the
 * remove callback of your ib_client, which runs before mrpool's because it
 * was registered after it. A buffer or session freed later is still safe
 * to free, but its keys and its PD (if mrpool's) died with the device.
 * Every call but mrpool_kbuf_max_size() may sleep. Each buffer and each
 * session holds a reference on mrpool.ko.
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
 * @pd: the protection domain of @lkey and @rkey: its session's PD, or
 *	the device's shared lend PD for mrpool_kbuf_alloc(); QPs using them
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
 * struct mrpool_kbuf_session - a PD of one borrower's own for its buffers
 * @device: the RDMA device
 * @pd: the PD its buffers are registered in: the one passed to
 *	mrpool_kbuf_session_create(), or mrpool's (valid until the session
 *	is destroyed or the device removed); the borrower's QPs for these
 *	buffers live here
 *
 * Every field is read-only for the caller.
 */
struct mrpool_kbuf_session {
	struct ib_device *device;
	struct ib_pd *pd;
};

/**
 * mrpool_kbuf_session_create - a PD on @device for one borrower's buffers
 * @device: an RDMA device mrpool reports "ready"
 * @pd: a PD of the caller's on @device, or NULL for a new one of mrpool's
 *
 * mrpool registers the session's buffers with a loopback QP pair of its
 * own in the PD (fast registration needs one there; it is connected to
 * nothing else and gives no remote access). A @pd passed in must outlive
 * the session, and holds whatever else the caller put there.
 *
 * Return: the session, or ERR_PTR(-EINVAL) for a @pd of another device,
 * -ENODEV for a device mrpool cannot use, -ENOMEM, or the error of
 * creating the PD or QPs.
 */
struct mrpool_kbuf_session *
mrpool_kbuf_session_create(struct ib_device *device, struct ib_pd *pd);

/**
 * mrpool_kbuf_session_destroy - end a session
 * @s: from mrpool_kbuf_session_create(), or NULL/ERR_PTR (ignored)
 *
 * If @s->pd is mrpool's, destroy your QPs in it first. Buffers of the
 * session still out stay valid until freed; mrpool's QPs (and its PD)
 * go with the last of them.
 */
void mrpool_kbuf_session_destroy(struct mrpool_kbuf_session *s);

/**
 * mrpool_kbuf_session_alloc - take a zeroed pool buffer registered in @s->pd
 * @s: a session
 * @size: 1 to mrpool_kbuf_max_size() bytes
 *
 * Return: as mrpool_kbuf_alloc().
 */
struct mrpool_kbuf *mrpool_kbuf_session_alloc(struct mrpool_kbuf_session *s,
					      size_t size);

/**
 * mrpool_kbuf_alloc - take a zeroed pool buffer in @device's shared lend PD
 * @device: an RDMA device mrpool reports "ready"
 * @size: 1 to mrpool_kbuf_max_size() bytes
 *
 * The shared PD is every such caller's on the device: prefer a session.
 *
 * Return: the buffer, or ERR_PTR(-EINVAL) for a bad size, -ENODEV for a
 * device mrpool cannot use, -ENOMEM when the pool is exhausted, -EIO or
 * -ETIMEDOUT when registration failed (the device is then "failed").
 * A failed device usually recovers by itself (mrpool(4)): -ENODEV may be
 * retried later; buffers already out keep their keys meanwhile. A
 * session's own failure is not recovered: its later buffers fail with
 * -EIO until it is destroyed and another created.
 */
struct mrpool_kbuf *mrpool_kbuf_alloc(struct ib_device *device, size_t size);

/**
 * mrpool_kbuf_free - return a buffer; its rkey and lkey stop working
 * @buf: from mrpool_kbuf_alloc() or mrpool_kbuf_session_alloc(), or
 *	NULL/ERR_PTR (ignored)
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
