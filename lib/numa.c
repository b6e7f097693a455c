// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * NUMA placement: arenas go on the node of the device that will DMA into
 * them. MRPOOL_NUMA_NODE=auto (the default) takes the node sysfs gives the
 * first attached PD's device; a device without one (-1, or a software
 * device such as rxe with no parent) leaves the choice to the next PD.
 * The kernel backend asks the module for the node; the anon backend sets a
 * preferred policy on the arena before its pages are touched. Preferred,
 * never bound: a full node must not fail growth while others have memory.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "internal.h"

#ifndef MPOL_PREFERRED
#define MPOL_PREFERRED	1
#endif

/*
 * The device's node from <ibdev_path>/device/numa_node, or -1. Called with
 * pool->lock held (mrp_attach_pd()): open, read and close are cancellation
 * points, and a thread cancelled in one would leave the lock held for
 * good, so cancellation waits until they are done.
 */
int mrp_numa_device_node(struct ibv_pd *pd)
{
	char path[IBV_SYSFS_PATH_MAX + 32], buf[16];
	int fd, cancel;
	ssize_t n;
	long node;
	char *end;

	if (!pd || !pd->context || !pd->context->device)
		return -1;
	if (snprintf(path, sizeof(path), "%s/device/numa_node",
		     pd->context->device->ibdev_path) >= (int)sizeof(path))
		return -1;
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	n = fd < 0 ? -1 : read(fd, buf, sizeof(buf) - 1);
	if (fd >= 0)
		close(fd);
	pthread_setcancelstate(cancel, NULL);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	node = strtol(buf, &end, 10);
	if (end == buf || node < 0 || node > MRP_NUMA_MAX)
		return -1;
	return (int)node;
}

/* 1 if node is online here: an explicit node must be one. */
int mrp_numa_node_online(int node)
{
	char path[64];

	snprintf(path, sizeof(path), "/sys/devices/system/node/node%d", node);
	return !access(path, F_OK);
}

/* Auto placement: the first attached PD whose device has a node. pool->lock. */
void mrp_numa_attach(struct mrp_pool *pool, struct ibv_pd *pd)
{
	if (pool->cfg.numa_node == MRP_NUMA_AUTO && pool->node < 0)
		pool->node = mrp_numa_device_node(pd);
}

/*
 * Prefer node for [addr, addr + len), untouched yet. Best effort: a kernel
 * without NUMA (ENOSYS) or a node that does not exist leaves the default.
 */
void mrp_numa_prefer(void *addr, size_t len, int node)
{
	unsigned long mask[(MRP_NUMA_MAX + 1) / (8 * sizeof(unsigned long))] = { 0 };

	if (node < 0)
		return;
	mask[node / (8 * sizeof(unsigned long))] = 1UL << (node % (8 * sizeof(unsigned long)));
	syscall(SYS_mbind, addr, len, MPOL_PREFERRED, mask,
		(unsigned long)MRP_NUMA_MAX + 1, 0UL);
}
