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
 */
#ifndef _UAPI_MRPOOL_H
#define _UAPI_MRPOOL_H

#include <linux/types.h>
#include <linux/ioctl.h>

/* Bumped on incompatible changes only; growth by size never bumps it. */
#define MRPOOL_ABI_VERSION	1

#define MRPOOL_DEV_NAME		"mrpool"

/* 'M' 0xd0-0xdf: unused in ioctl-number.rst. */
#define MRPOOL_IOC_MAGIC	'M'

/**
 * struct mrpool_query - pool geometry and counters (MRPOOL_IOC_QUERY)
 * @size:	(in) sizeof(struct mrpool_query) as the caller knows it
 * @abi_version: (out) MRPOOL_ABI_VERSION of the running module
 * @chunk_size:	(out) bytes per chunk; slices are whole chunks
 * @node:	(out) default NUMA node of the pool, -1 if none
 * @ndevices:	(out) RDMA devices the pool is registered with
 * @total_bytes: (out) bytes held by the pool (free + used + quarantined)
 * @free_bytes:	(out) bytes ready to hand out
 * @used_bytes:	(out) bytes in slices
 * @quarantined_bytes: (out) bytes freed but still pinned by someone
 * @max_bytes:	(out) ceiling the pool may grow to
 * @file_bytes:	(out) bytes held by the calling file
 * @allocs:	(out) successful slice allocations since load
 * @frees:	(out) slice frees since load
 * @alloc_failures: (out) failed slice allocations since load
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
	__u64 reserved[4];
};

/* Flags of struct mrpool_alloc. */
/* Fail with -ENOMEM rather than fall back to another NUMA node. */
#define MRPOOL_ALLOC_NODE_STRICT	(1U << 0)
#define MRPOOL_ALLOC_VALID_FLAGS	(MRPOOL_ALLOC_NODE_STRICT)

/* Value of @node meaning "the pool's default node". */
#define MRPOOL_NODE_ANY		(-1)

/**
 * struct mrpool_alloc - take a slice from the pool (MRPOOL_IOC_ALLOC)
 * @size:	(in) sizeof(struct mrpool_alloc) as the caller knows it
 * @flags:	(in) MRPOOL_ALLOC_* flags
 * @bytes:	(in) bytes wanted; rounded up to whole chunks
 * @node:	(in) preferred NUMA node or MRPOOL_NODE_ANY
 * @pad:	must be zero
 * @slice_id:	(out) id for MRPOOL_IOC_FREE; unique per open file
 * @mmap_offset: (out) opaque offset to pass to mmap()
 * @length:	(out) bytes in the slice (a multiple of the chunk size)
 * @reserved:	must be zero
 *
 * The slice belongs to the file that allocated it: only that file can map
 * it, and closing the file frees it.
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
 * A slice that is still mapped stays owned until its last unmap; its
 * memory goes back to the pool after that.
 */
struct mrpool_free {
	__u32 size;
	__u32 flags;
	__u64 slice_id;
	__u64 reserved[2];
};

#define MRPOOL_IOC_QUERY	_IOWR(MRPOOL_IOC_MAGIC, 0xd0, struct mrpool_query)
#define MRPOOL_IOC_ALLOC	_IOWR(MRPOOL_IOC_MAGIC, 0xd1, struct mrpool_alloc)
#define MRPOOL_IOC_FREE		_IOW(MRPOOL_IOC_MAGIC, 0xd2, struct mrpool_free)

#endif /* _UAPI_MRPOOL_H */
