/* SPDX-License-Identifier: ((GPL-2.0 WITH Linux-syscall-note) OR BSD-2-Clause) */
/*
 * mrpool: a host-wide pool of pinned, pre-registered memory for RDMA.
 *
 * This is the one ABI shared by the kernel module (kmod/), the library
 * (lib/) and the tools. Every ioctl argument is a fixed-size struct that
 * starts with its own size: the kernel accepts smaller (older) and larger
 * (newer) structs as long as the bytes it does not know are zero, so both
 * sides can grow. Unknown flags and nonzero reserved fields are -EINVAL;
 * unknown commands are -ENOTTY.
 *
 * Access follows the open mode of the /dev/mrpool file, as for any file:
 * whatever changes the pool or hands out writable memory (ALLOC, FREE,
 * EXPORT_DMABUF, SLICE_KEYS, and every mmap() of the device) needs a file
 * open for writing; on one that is not, the ioctls fail with -EBADF (as
 * write(2) does) and mmap() with -EACCES, before anything is looked at or
 * changed. QUERY and DEVICES work on a file of any mode, so a read-only
 * device node (say 0644) lets others watch the pool and nothing more. A
 * descriptor keeps its mode when it is inherited or passed over a unix
 * socket. A dma-buf is exported with the mode of the file it came from
 * (read-write, or write-only from a write-only file); that mode binds its
 * mmap() only: a driver that imports the dma-buf (ibv_reg_dmabuf_mr())
 * gets the access its import asks for, as with every dma-buf.
 */
#ifndef _UAPI_MRPOOL_H
#define _UAPI_MRPOOL_H

#include <linux/types.h>
#include <linux/ioctl.h>

/* Bumped on incompatible changes only; growth by size never bumps it. */
#define MRPOOL_ABI_VERSION	1

#define MRPOOL_DEV_NAME		"mrpool"

/*
 * Code 0xBC, numbers 0x00-0x0f: free in the kernel's ioctl-number.rst
 * (0xB8 and 0xBA/0xBF are the neighbours taken). Until November 2026 the
 * module used 'M' 0xd0-0xd5, which the list gives to soundcard.h.
 */
#define MRPOOL_IOC_MAGIC	0xBC

/**
 * struct mrpool_query - pool geometry and counters (MRPOOL_IOC_QUERY)
 * @size:	(in) sizeof(struct mrpool_query) as the caller knows it
 * @abi_version: (out) MRPOOL_ABI_VERSION of the running module
 * @chunk_size:	(out) bytes per chunk; slices are whole chunks
 * @node:	(out) default NUMA node of the pool, -1 if none
 * @ndevices:	(out) RDMA devices the pool is registered with (ready ones;
 *		MRPOOL_IOC_DEVICES lists all, with their state)
 * @total_bytes: (out) bytes held by the pool (free + used + quarantined)
 * @free_bytes:	(out) bytes ready to hand out
 * @used_bytes:	(out) bytes in slices
 * @quarantined_bytes: (out) bytes freed but still pinned by someone
 * @max_bytes:	(out) ceiling the pool may grow to
 * @file_bytes:	(out) bytes held by the calling file; this and the two
 *		user fields are 0 unless the caller is the file's owner (the
 *		address space that opened it: ask through a descriptor you
 *		opened, not one inherited or received)
 * @allocs:	(out) successful slice allocations since load
 * @frees:	(out) slice frees since load
 * @alloc_failures: (out) failed slice allocations since load
 * @user_bytes:	(out) pool bytes charged to the user that opened the file,
 *		over all its files: live slices, freed ones still mapped or
 *		exported, and chunks in quarantine; what max_user_mb and
 *		RLIMIT_MEMLOCK see
 * @user_quarantined_bytes: (out) of @user_bytes, bytes in quarantine
 *		(freed but still pinned, e.g. by an MR)
 * @features:	(out) MRPOOL_FEATURE_* bits of what the running module
 *		offers; the first reserved word until December 2026, so a
 *		module that predates it leaves the caller's zero there: no
 *		features. Whatever the caller passes in is ignored.
 * @reserved:	must be zero
 */
struct mrpool_query {
	__u32 size;
	__u32 abi_version;
	__u64 chunk_size;
	__s32 node;
	__u32 ndevices;
	__u64 total_bytes;
	__u64 free_bytes;
	__u64 used_bytes;
	__u64 quarantined_bytes;
	__u64 max_bytes;
	__u64 file_bytes;
	__u64 allocs;
	__u64 frees;
	__u64 alloc_failures;
	__u64 user_bytes;
	__u64 user_quarantined_bytes;
	__u64 features;
	__u64 reserved[1];
};

/* Bits of struct mrpool_query's @features. */
/* MRPOOL_ALLOC_FORK_COPY is known: a forked child gets a private copy. */
#define MRPOOL_FEATURE_FORK_COPY	(1ULL << 0)

/* Flags of struct mrpool_alloc. */
/* Fail with -ENOMEM rather than fall back to another NUMA node. */
#define MRPOOL_ALLOC_NODE_STRICT	(1U << 0)
/*
 * A child forked by the owner gets a private copy of the slice's mappings
 * (see struct mrpool_alloc); needs MRPOOL_FEATURE_FORK_COPY, -EINVAL from
 * an older module.
 */
#define MRPOOL_ALLOC_FORK_COPY		(1U << 1)
#define MRPOOL_ALLOC_VALID_FLAGS	(MRPOOL_ALLOC_NODE_STRICT | \
					 MRPOOL_ALLOC_FORK_COPY)

/* Value of @node meaning "the pool's default node". */
#define MRPOOL_NODE_ANY		(-1)

/**
 * struct mrpool_alloc - take a slice from the pool (MRPOOL_IOC_ALLOC)
 * @size:	(in) sizeof(struct mrpool_alloc) as the caller knows it
 * @flags:	(in) MRPOOL_ALLOC_* flags
 * @bytes:	(in) bytes wanted; rounded up to whole chunks
 * @node:	(in) preferred NUMA node or MRPOOL_NODE_ANY
 * @pad:	must be zero
 * @slice_id:	(out) id for MRPOOL_IOC_FREE; unique among the live slices
 *		of the host (one id space for every file), not reused soon
 *		after a free
 * @mmap_offset: (out) opaque offset to pass to mmap(); below 2^44, so a
 *		32-bit process reaches it (mmap2(), or mmap() with a 64-bit
 *		off_t)
 * @length:	(out) bytes in the slice (a multiple of the chunk size)
 * @reserved:	must be zero
 *
 * The slice belongs to the file that allocated it: only that file can map
 * it, and only in the process that opened the file. Closing the file frees
 * it; if it is still mapped or exported as a dma-buf, its memory returns
 * when the last of those goes. Its chunks are charged to the caller's user
 * (RLIMIT_MEMLOCK unless CAP_IPC_LOCK, and max_user_mb) until they are
 * free again, quarantine included.
 *
 * Fork: a mapping of the slice is not inherited (VM_DONTCOPY), unless the
 * slice was allocated with MRPOOL_ALLOC_FORK_COPY. Then a child forked by
 * the owner gets, in place of each mapping, a private copy of the bytes
 * the slice had at the fork, in ordinary pages allocated at the fork and
 * charged to the memory cgroup of the forking task (the one the child
 * starts in), as the kernel's own copies of DMA-pinned pages at fork are,
 * and, being memory no reclaim can take, against the forking task's
 * RLIMIT_MEMLOCK unless it has CAP_IPC_LOCK, to the count its chunks are
 * charged to (in a user namespace, that of the outermost namespace's
 * owner, shared by every uid in it); not to the pool, never pinned nor
 * registered.
 * The child's writes stay in its copy, the parent's and the devices' in
 * the slice. The child owns nothing of the slice (it cannot free, export
 * or map it) and its copy goes with its mapping. If the copy cannot be
 * made (no memory, a fatal signal during the fork, a poisoned page), the
 * child's accesses to that mapping raise SIGBUS.
 *
 * Errors: -EINVAL for a bad @size, flag, @node or nonzero reserved field;
 * -EDQUOT past max_user_mb; -ENOMEM past RLIMIT_MEMLOCK, max_mb or the
 * memory available; -ENOSPC when every slice id is in use; -EBADF on a
 * file not open for writing; -EPERM from a process other than the file's
 * opener.
 */
struct mrpool_alloc {
	__u32 size;
	__u32 flags;
	__u64 bytes;
	__s32 node;
	__u32 pad;
	__u64 slice_id;
	__u64 mmap_offset;
	__u64 length;
	__u64 reserved[4];
};

/**
 * struct mrpool_free - return a slice (MRPOOL_IOC_FREE)
 * @size:	(in) sizeof(struct mrpool_free) as the caller knows it
 * @flags:	(in) must be zero
 * @slice_id:	(in) id from MRPOOL_IOC_ALLOC
 * @reserved:	must be zero
 *
 * Revokes the slice (as the release of the file does for every slice it
 * owns): every mapping of it -- the caller's own, and the mmap()s of its
 * dma-bufs in any process -- is unmapped, and an access to one raises
 * SIGBUS from then on. The memory goes back to the pool at once, zeroed
 * before it is handed out again. A chunk whose pages are still pinned (a
 * pipe holding vmsplice()d pages, an MR, O_DIRECT) was pinned through
 * the caller's own mapping -- a dma-buf's mapping cannot be pinned -- and
 * waits until the pin goes, charged to the caller (to no user, within
 * one user's share in all, when it is the exiting owner's leftover),
 * also while attachments are mapped. A driver that imported a dma-buf of
 * the slice and mapped an attachment keeps the other chunks until it
 * unmaps its last attachment, charged to the one other user that has an
 * attachment mapped now while it is below its share, else to no user
 * within that share (always when several users have), to the caller
 * when only its own are mapped, and what has no room stays the caller's.
 * See mrpool(4), Revocation.
 *
 * Errors: -EINVAL for a bad @size, flag or nonzero reserved field;
 * -ENOENT if @slice_id is not a live slice of this file; -EBADF on a file
 * not open for writing; -EPERM from a process other than the file's
 * opener.
 */
struct mrpool_free {
	__u32 size;
	__u32 flags;
	__u64 slice_id;
	__u64 reserved[2];
};

/* Room for a device name and a reason text, NUL included. */
#define MRPOOL_DEVICE_NAME_LEN		64
#define MRPOOL_DEVICE_REASON_LEN	96

/* States of struct mrpool_device. */
/* Usable: every chunk of the pool is registered (or being registered). */
#define MRPOOL_DEVICE_READY		0
/* Lacks what the kernel MR cache needs (see @reason); skipped. */
#define MRPOOL_DEVICE_UNSUPPORTED	1
/* Setup or a registration failed (see @reason); skipped. */
#define MRPOOL_DEVICE_FAILED		2
/* Reserved: a removed device leaves the list at once, never reported. */
#define MRPOOL_DEVICE_REMOVED		3

/**
 * struct mrpool_device - one RDMA device, an entry of MRPOOL_IOC_DEVICES
 * @name:	(out) the ib_device's name, NUL terminated
 * @node:	(out) its NUMA node, -1 if it has none
 * @state:	(out) MRPOOL_DEVICE_*
 * @nr_chunks:	(out) chunks of the pool registered on it (the kernel MR
 *		cache); equals the pool's chunk count on a ready device
 * @pad:	(out) zero
 * @reason:	(out) why it is not ready, NUL terminated; empty if ready
 * @reserved:	(out) zero
 *
 * The kernel keys of the cache live in the module's own protection
 * domain: userspace QPs cannot use them, the library registers slices in
 * its own PD.
 */
struct mrpool_device {
	char name[MRPOOL_DEVICE_NAME_LEN];
	__s32 node;
	__u32 state;
	__u32 nr_chunks;
	__u32 pad;
	char reason[MRPOOL_DEVICE_REASON_LEN];
	__u64 reserved[2];
};

/**
 * struct mrpool_devices - list the RDMA devices (MRPOOL_IOC_DEVICES)
 * @size:	(in) sizeof(struct mrpool_devices) as the caller knows it
 * @flags:	(in) must be zero
 * @count:	(in) entries @entries has room for; may be 0 to ask for
 *		@total only
 * @entry_size:	(in) sizeof(struct mrpool_device) as the caller knows it,
 *		at least its first published size (192); entries are written
 *		@entry_size bytes apart, bytes the kernel does not know zeroed
 * @entries:	(in) user address of @count entries
 * @total:	(out) devices the module knows; the first min(@count,
 *		@total) were written, in the order the devices appeared
 * @pad:	must be zero
 * @reserved:	must be zero
 *
 * Errors: -EINVAL for a bad @size, @entry_size, flag or nonzero reserved
 * field; -EFAULT when @entries cannot be written.
 */
struct mrpool_devices {
	__u32 size;
	__u32 flags;
	__u32 count;
	__u32 entry_size;
	__u64 entries;
	__u32 total;
	__u32 pad;
	__u64 reserved[2];
};

/**
 * struct mrpool_slice_key - one chunk of a slice on one device, an entry
 * of MRPOOL_IOC_SLICE_KEYS
 * @device:	(out) the device's name, NUL terminated
 * @chunk:	(out) index of the chunk in the slice (byte offset
 *		@chunk * chunk_size)
 * @lkey:	(out) the kernel MR's local key
 * @rkey:	(out) its remote key; 0, as cached MRs grant local access only
 * @pad:	(out) zero
 * @iova:	(out) the address the MR starts at on the device; 0 unless
 *		the caller has CAP_SYS_ADMIN (on software devices and
 *		without an IOMMU it is a kernel or physical address)
 * @reserved:	(out) zero
 *
 * Informational: these keys belong to the module's kernel protection
 * domain and are useless on a userspace QP.
 */
struct mrpool_slice_key {
	char device[MRPOOL_DEVICE_NAME_LEN];
	__u32 chunk;
	__u32 lkey;
	__u32 rkey;
	__u32 pad;
	__u64 iova;
	__u64 reserved;
};

/**
 * struct mrpool_slice_keys - a slice's kernel keys (MRPOOL_IOC_SLICE_KEYS)
 * @size:	(in) sizeof(struct mrpool_slice_keys) as the caller knows it
 * @flags:	(in) must be zero
 * @slice_id:	(in) a live slice of the calling file
 * @count:	(in) entries @entries has room for; 0 asks for @total only
 * @entry_size:	(in) sizeof(struct mrpool_slice_key) as the caller knows
 *		it, at least its first published size (96); entries are
 *		written @entry_size bytes apart, unknown bytes zeroed
 * @entries:	(in) user address of @count entries
 * @total:	(out) registrations of the slice's chunks, chunk by chunk
 *		and device by device; the first min(@count, @total) written
 * @pad:	must be zero
 * @reserved:	must be zero
 *
 * Errors: -EINVAL for a bad @size, @entry_size, flag or nonzero reserved
 * field; -ENOENT if @slice_id is not a live slice of this file; -EBADF on
 * a file not open for writing (which never holds a slice); -EPERM from a
 * process other than the file's opener; -EFAULT.
 */
struct mrpool_slice_keys {
	__u32 size;
	__u32 flags;
	__u64 slice_id;
	__u32 count;
	__u32 entry_size;
	__u64 entries;
	__u32 total;
	__u32 pad;
	__u64 reserved[2];
};

/* Flags of struct mrpool_export_dmabuf. */
/* The new descriptor is close-on-exec. */
#define MRPOOL_EXPORT_CLOEXEC		(1U << 0)
#define MRPOOL_EXPORT_VALID_FLAGS	(MRPOOL_EXPORT_CLOEXEC)

/**
 * struct mrpool_export_dmabuf - a slice as a dma-buf (MRPOOL_IOC_EXPORT_DMABUF)
 * @size:	(in) sizeof(struct mrpool_export_dmabuf) as the caller knows it
 * @flags:	(in) MRPOOL_EXPORT_* flags
 * @slice_id:	(in) a live slice of the calling file
 * @fd:		(out) the dma-buf, open with the mode of the calling file:
 *		read-write, or write-only from a write-only file
 * @pad:	must be zero
 * @length:	(out) bytes of the dma-buf: the slice's length
 * @reserved:	must be zero
 *
 * For drivers that register dma-bufs (ibv_reg_dmabuf_mr()) and skip
 * pinning. The dma-buf can be mmap()ed (shared mappings only), in any
 * process it is passed to, but such a mapping cannot be pinned: it maps
 * page frames (VM_PFNMAP), so get_user_pages() of it -- vmsplice(),
 * O_DIRECT, ibv_reg_mr() -- fails with -EFAULT; register the dma-buf
 * instead. It holds the slice, never the /dev/mrpool file. It does not
 * hold the memory from its owner: a FREE of the slice, or the file's
 * release (the owner's exit), revokes it -- every mmap of the dma-buf is
 * unmapped and raises SIGBUS from then on, a new mmap() or a driver's new
 * attachment map fails with -ENODEV, and the memory goes back to the
 * pool, but for an importing driver with a mapped attachment, which
 * keeps it, charged to its user (see MRPOOL_IOC_FREE), until it unmaps
 * its last attachment. The
 * dma-buf's mode limits its own mmap() (a write-only
 * one maps not at all), not a driver that imports it: that gets the
 * access its import asks for, read and write alike. Hence a writer only.
 *
 * Errors: -EINVAL for a bad @size, flag or nonzero reserved field;
 * -ENOENT if @slice_id is not a live slice of this file; -EBADF on a file
 * not open for writing; -EPERM from a process other than the file's
 * opener; -EMFILE and -ENOMEM as usual.
 */
struct mrpool_export_dmabuf {
	__u32 size;
	__u32 flags;
	__u64 slice_id;
	__s32 fd;
	__u32 pad;
	__u64 length;
	__u64 reserved[2];
};

/*
 * mmap() offset of the calling file's stats page: no slice token takes it
 * (slice ids start at 1). Map exactly one page, MAP_SHARED and writable.
 */
#define MRPOOL_STATS_MMAP_OFFSET	0ULL

/**
 * struct mrpool_client_stats - a process's allocator counters, published in
 * its file's stats page
 * @size:	(in) sizeof(struct mrpool_client_stats) as the writer knows it;
 *		0 until the first publication
 * @seq:	(in) odd while the writer updates the fields below, even when
 *		they are consistent; readers retry when it is odd or moved
 * @allocs:	(in) successful allocations
 * @frees:	(in) frees
 * @tcache_hits: (in) allocations served by a thread cache
 * @tcache_misses: (in) allocations that took the slow path
 * @fallbacks:	(in) allocations served outside the pool (per-buffer
 *		registration)
 * @fallback_bytes: (in) bytes currently in such buffers
 * @bytes_in_use: (in) bytes of buffers the application holds
 * @bytes_mapped: (in) bytes of pool memory the library has mapped
 * @registrations: (in) memory registrations made by the library
 * @reg_ns_total: (in) nanoseconds spent in them
 * @preload_served: (in) the program's registrations libmrpool-preload
 *		served from the pool (no pinning); 0 without the shim
 * @preload_passed: (in) the program's registrations it passed on to
 *		libibverbs
 * @reserved:	(in) zero
 *
 * The page starts zeroed and belongs to the file that mapped it: only the
 * process that opened the file can map it, with offset
 * MRPOOL_STATS_MMAP_OFFSET and a length of one page. Userspace writes it,
 * the kernel only reads it (debugfs mrpool/clients) and never acts on the
 * values. It is neither pool memory nor charged to RLIMIT_MEMLOCK but to
 * the memory cgroup of the process that mapped it first, and it is freed
 * once the file is released and no mapping of it is left.
 *
 * Errors of mmap(): -EACCES on a file not open for writing or without
 * write access; -EPERM from a process other than the file's opener;
 * -EINVAL for a private mapping or a length other than one page; -ENOMEM.
 */
struct mrpool_client_stats {
	__u32 size;
	__u32 seq;
	__u64 allocs;
	__u64 frees;
	__u64 tcache_hits;
	__u64 tcache_misses;
	__u64 fallbacks;
	__u64 fallback_bytes;
	__u64 bytes_in_use;
	__u64 bytes_mapped;
	__u64 registrations;
	__u64 reg_ns_total;
	__u64 preload_served;
	__u64 preload_passed;
	__u64 reserved[3];
};

#define MRPOOL_IOC_QUERY	_IOWR(MRPOOL_IOC_MAGIC, 0x00, struct mrpool_query)
#define MRPOOL_IOC_ALLOC	_IOWR(MRPOOL_IOC_MAGIC, 0x01, struct mrpool_alloc)
#define MRPOOL_IOC_FREE		_IOW(MRPOOL_IOC_MAGIC, 0x02, struct mrpool_free)
#define MRPOOL_IOC_DEVICES	_IOWR(MRPOOL_IOC_MAGIC, 0x03, struct mrpool_devices)
#define MRPOOL_IOC_EXPORT_DMABUF \
	_IOWR(MRPOOL_IOC_MAGIC, 0x04, struct mrpool_export_dmabuf)
#define MRPOOL_IOC_SLICE_KEYS	_IOWR(MRPOOL_IOC_MAGIC, 0x05, struct mrpool_slice_keys)

#endif /* _UAPI_MRPOOL_H */
