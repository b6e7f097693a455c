// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Device, port and GID selection for librdmatest: find a device by name (or
 * the default), a port with a RoCE v2 GID, and a protection domain.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rdmatest.h"

/* ::ffff:a.b.c.d: the GID of an IPv4 address, routable in RoCE v2. */
static bool gid_is_ipv4(const union ibv_gid *gid)
{
	static const uint8_t prefix[12] = {
		0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff
	};

	return !memcmp(gid->raw, prefix, sizeof(prefix));
}

int rdt_find_roce_v2_gid(struct ibv_context *ctx, uint8_t port, int *index,
			 union ibv_gid *gid)
{
	struct ibv_port_attr pattr;
	struct ibv_gid_entry ent;
	int i, ret, found = -1;

	/* Verbs calls return a positive errno value, not -1. */
	ret = ibv_query_port(ctx, port, &pattr);
	if (ret)
		return -ret;
	for (i = 0; i < pattr.gid_tbl_len; i++) {
		/* Empty entries answer ENODATA: skip them, not an error. */
		if (ibv_query_gid_ex(ctx, port, i, &ent, 0))
			continue;
		if (ent.gid_type != IBV_GID_TYPE_ROCE_V2)
			continue;
		if (found < 0 || gid_is_ipv4(&ent.gid)) {
			found = i;
			if (gid)
				*gid = ent.gid;
		}
		/* Prefer an IPv4 GID over the link-local one rxe lists first. */
		if (gid_is_ipv4(&ent.gid))
			break;
	}
	if (found < 0)
		return -ENOENT;
	*index = found;
	return 0;
}

static struct ibv_context *open_by_name(const char *name)
{
	struct ibv_device **list;
	struct ibv_context *ctx = NULL;
	int i, n;

	list = ibv_get_device_list(&n);
	if (!list)
		return NULL;
	for (i = 0; i < n && !ctx; i++) {
		if (!name || !strcmp(ibv_get_device_name(list[i]), name))
			ctx = ibv_open_device(list[i]);
	}
	ibv_free_device_list(list);
	if (!ctx)
		errno = ENODEV;
	return ctx;
}

/* The first active port with a RoCE v2 GID, else the first with one. */
static int pick_port(struct rdt_dev *dev)
{
	struct ibv_device_attr dattr;
	struct ibv_port_attr pattr;
	const char *env;
	int found = 0, ret, p;

	ret = ibv_query_device(dev->ctx, &dattr);
	if (ret)
		return -ret;
	for (p = 1; p <= dattr.phys_port_cnt; p++) {
		union ibv_gid gid;
		int idx;

		if (ibv_query_port(dev->ctx, p, &pattr))
			continue;
		if (rdt_find_roce_v2_gid(dev->ctx, p, &idx, &gid))
			continue;
		if (!found || pattr.state == IBV_PORT_ACTIVE) {
			dev->port = (uint8_t)p;
			dev->gid_index = idx;
			dev->gid = gid;
			dev->mtu = pattr.active_mtu < IBV_MTU_1024 ?
				   pattr.active_mtu : IBV_MTU_1024;
			found = 1;
		}
		if (pattr.state == IBV_PORT_ACTIVE)
			break;
	}
	if (!found)
		return -ENOENT;

	env = getenv(RDT_ENV_GID_INDEX);
	if (env && *env) {
		dev->gid_index = atoi(env);
		if (ibv_query_gid(dev->ctx, dev->port, dev->gid_index,
				  &dev->gid))
			return -EINVAL;
	}
	return 0;
}

int rdt_dev_open(struct rdt_dev *dev, const char *name, struct ibv_pd *pd)
{
	int ret;

	memset(dev, 0, sizeof(*dev));
	if (pd) {
		dev->ctx = pd->context;
		dev->pd = pd;
	} else {
		if (!name)
			name = getenv(RDT_ENV_DEVICE);
		if (name && *name) {
			dev->ctx = open_by_name(name);
		} else {
			dev->ctx = open_by_name(RDT_DEFAULT_DEVICE);
			if (!dev->ctx)
				dev->ctx = open_by_name(NULL);
		}
		if (!dev->ctx) {
			ret = -ENODEV;
			goto fail;
		}
	}
	snprintf(dev->name, sizeof(dev->name), "%s",
		 ibv_get_device_name(dev->ctx->device));

	ret = pick_port(dev);
	if (ret)
		goto close_ctx;

	if (!dev->pd) {
		dev->pd = ibv_alloc_pd(dev->ctx);
		if (!dev->pd) {
			ret = errno ? -errno : -ENOMEM;
			goto close_ctx;
		}
		dev->own_pd = true;
	}
	return 0;

close_ctx:
	if (!pd)
		ibv_close_device(dev->ctx);
fail:
	memset(dev, 0, sizeof(*dev));
	return ret;
}

void rdt_dev_close(struct rdt_dev *dev)
{
	/* A caller's PD comes with the caller's context: leave both alone. */
	if (dev->own_pd) {
		ibv_dealloc_pd(dev->pd);
		ibv_close_device(dev->ctx);
	}
	memset(dev, 0, sizeof(*dev));
}
