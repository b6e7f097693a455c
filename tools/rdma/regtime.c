// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * The cost of one registration and deregistration of a range, for the
 * tools that report it (selftests/pool_regcost_test, the bench's reg
 * scenario). Measures; never judges.
 */
#include <errno.h>

#include "rdmatest.h"

int rdt_reg_time(struct ibv_pd *pd, void *addr, size_t len,
		 uint64_t *reg_ns, uint64_t *dereg_ns)
{
	struct ibv_mr *mr;
	uint64_t t0, t1;

	t0 = rdt_now_ns();
	mr = ibv_reg_mr(pd, addr, len, RDT_ACCESS_ALL);
	t1 = rdt_now_ns();
	if (!mr)
		return -errno;
	*reg_ns = t1 - t0;
	t0 = rdt_now_ns();
	if (ibv_dereg_mr(mr))
		return -EIO;
	*dereg_ns = rdt_now_ns() - t0;
	return 0;
}
