// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * On-Demand Paging: what a device says it can do (ibv_query_device_ex's
 * odp_caps, never assumed) and a prefetch that reaches the kernel even
 * where the provider library lacks ibv_advise_mr.
 *
 * rdma-core 44 (Debian 12, which the guests run as their userspace) has no
 * advise_mr in its rxe provider: ibv_advise_mr() fails with EOPNOTSUPP
 * before any system call, while rxe in the kernel takes the command since
 * 6.17. The uverbs command itself is libibverbs' ibv_cmd_advise_mr(),
 * exported for providers (IBVERBS_PRIVATE_34, declared in its driver.h,
 * which Debian does not install): used only when the provider lacks the
 * op, so a provider that has one is called as applications would.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "rdmatest.h"

/* libibverbs' provider interface (infiniband/driver.h, not installed). */
int ibv_cmd_advise_mr(struct ibv_pd *pd, enum ibv_advise_mr_advice advice,
		      uint32_t flags, struct ibv_sge *sg_list, uint32_t num_sge);

int rdt_odp_probe(struct ibv_context *ctx, uint32_t need_rc, struct rdt_odp *odp)
{
	struct ibv_device_attr_ex attr;
	int ret;

	memset(odp, 0, sizeof(*odp));
	memset(&attr, 0, sizeof(attr));
	ret = ibv_query_device_ex(ctx, NULL, &attr);
	if (ret) {
		snprintf(odp->why, sizeof(odp->why), "ibv_query_device_ex: %s",
			 strerror(ret));
		return -ret;
	}
	odp->general = attr.odp_caps.general_caps;
	odp->rc = attr.odp_caps.per_transport_caps.rc_odp_caps;
	odp->ud = attr.odp_caps.per_transport_caps.ud_odp_caps;
	odp->implicit = odp->general & IBV_ODP_SUPPORT_IMPLICIT;
	if (!(odp->general & IBV_ODP_SUPPORT)) {
		snprintf(odp->why, sizeof(odp->why),
			 "device reports no ODP (odp_caps.general_caps 0x%llx)",
			 (unsigned long long)odp->general);
		return -EOPNOTSUPP;
	}
	if ((odp->rc & need_rc) != need_rc) {
		snprintf(odp->why, sizeof(odp->why),
			 "device's RC ODP caps 0x%x lack 0x%x", odp->rc,
			 need_rc & ~odp->rc);
		return -EOPNOTSUPP;
	}
	odp->supported = true;
	return 0;
}

int rdt_odp_prefetch(struct ibv_pd *pd, struct ibv_mr *mr, void *addr, size_t len,
		     bool write)
{
	struct ibv_sge sge = {
		.addr = (uintptr_t)addr,
		.length = (uint32_t)len,
		.lkey = mr->lkey,
	};
	enum ibv_advise_mr_advice adv = write ? IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE :
					  IBV_ADVISE_MR_ADVICE_PREFETCH;
	int ret;

	/* both return an errno value (positive); be lenient about the sign */
	ret = ibv_advise_mr(pd, adv, IBV_ADVISE_MR_FLAG_FLUSH, &sge, 1);
	if (ret == EOPNOTSUPP || ret == -EOPNOTSUPP)
		ret = ibv_cmd_advise_mr(pd, adv, IBV_ADVISE_MR_FLAG_FLUSH, &sge, 1);
	return ret > 0 ? -ret : ret;
}
