// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Batches: a receive ring's buffers in one call, all or nothing, and back.
 * Each buffer goes through the thread cache as a single one does; the
 * batch only saves the caller the unwinding.
 */
#include <errno.h>
#include <string.h>

#include "internal.h"

MRP_EXPORT int mrp_alloc_bulk(struct mrp_pool *pool, size_t size, struct ibv_pd *pd,
			      struct mrp_buf *bufs, unsigned int n)
{
	unsigned int i;
	int ret = 0;

	if (!pool || (n && !bufs))
		return -EINVAL;
	for (i = 0; i < n; i++) {
		ret = mrp_alloc(pool, size, pd, &bufs[i]);
		if (ret)
			break;
	}
	if (!ret)
		return 0;
	while (i--)
		mrp_free(pool, bufs[i].addr);
	memset(bufs, 0, (size_t)n * sizeof(*bufs));
	return ret;
}

MRP_EXPORT int mrp_free_bulk(struct mrp_pool *pool, const struct mrp_buf *bufs,
			     unsigned int n)
{
	int first = 0;

	if (!pool || (n && !bufs))
		return -EINVAL;
	for (unsigned int i = 0; i < n; i++) {
		int ret = mrp_free(pool, bufs[i].addr);

		if (ret && !first)
			first = ret;
	}
	return first;
}
