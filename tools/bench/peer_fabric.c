// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * libfabric peers (Debian's 1.17, verbs provider, on the scenario's
 * device), through fi_mr_reg + fi_close, which go through the provider's
 * MR cache when it has one:
 *   "fabric reg"        malloc + fi_mr_reg + fi_close + free per buffer;
 *   "fabric cache hit"  one buffer registered and closed again and again.
 * One fabric and domain per peer (FI_THREAD_SAFE). If the verbs
 * provider offers no domain on the device, setup says why and the rows
 * say it too.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_errno.h>

#include "bench.h"

static struct fid_fabric *fab;
static struct fid_domain *dom;
static char fab_settings_buf[320];
static int fab_setup_ret = 1;		/* 1: not tried yet */
static char fab_why[200];

struct fab_tls {
	size_t size;
	void *buf;		/* cache hit: the one buffer */
};

static const char *env_or(const char *name, const char *dflt)
{
	const char *v = getenv(name);

	return v ? v : dflt;
}

static int fab_open(const char *dev_name)
{
	struct fi_info *hints, *info = NULL;
	int ret;

	hints = fi_allocinfo();
	if (!hints) {
		snprintf(fab_why, sizeof(fab_why), "fi_allocinfo failed");
		return -ENOMEM;
	}
	hints->fabric_attr->prov_name = strdup("verbs");
	hints->ep_attr->type = FI_EP_MSG;
	hints->caps = FI_MSG | FI_RMA;
	hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR |
				      FI_MR_ALLOCATED | FI_MR_PROV_KEY;
	hints->domain_attr->threading = FI_THREAD_SAFE;
	if (dev_name)
		hints->domain_attr->name = strdup(dev_name);
	ret = fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &info);
	fi_freeinfo(hints);
	if (ret) {
		snprintf(fab_why, sizeof(fab_why),
			 "fi_getinfo(prov verbs, FI_EP_MSG, domain %s): %s",
			 dev_name ? dev_name : "any", fi_strerror(-ret));
		return ret;
	}
	ret = fi_fabric(info->fabric_attr, &fab, NULL);
	if (!ret)
		ret = fi_domain(fab, info, &dom, NULL);
	if (ret) {
		snprintf(fab_why, sizeof(fab_why), "fi_%s on %s: %s",
			 fab ? "domain" : "fabric", info->domain_attr->name,
			 fi_strerror(-ret));
		if (fab)
			fi_close(&fab->fid);
		fab = NULL;
	} else {
		snprintf(fab_settings_buf, sizeof(fab_settings_buf),
			 "libfabric %u.%u, provider %s, domain %s, FI_MR_CACHE_MONITOR=%s, FI_MR_CACHE_MAX_COUNT=%s, FI_MR_CACHE_MAX_SIZE=%s",
			 FI_MAJOR(fi_version()), FI_MINOR(fi_version()),
			 info->fabric_attr->prov_name, info->domain_attr->name,
			 env_or("FI_MR_CACHE_MONITOR", "(default)"),
			 env_or("FI_MR_CACHE_MAX_COUNT", "(default)"),
			 env_or("FI_MR_CACHE_MAX_SIZE", "(default)"));
	}
	fi_freeinfo(info);
	return ret;
}

static int fab_setup(const struct bench_env *env, char *why, size_t len)
{
	if (fab_setup_ret == 1)
		fab_setup_ret = fab_open(env->dev_name);
	if (fab_setup_ret)
		snprintf(why, len, "%s", fab_why);
	return fab_setup_ret;
}

static const char *fab_settings(void)
{
	return fab_settings_buf;
}

static void *fab_thread_init(size_t size)
{
	struct fab_tls *t = calloc(1, sizeof(*t));

	if (t)
		t->size = size;
	return t;
}

static int fab_reg_close(void *buf, size_t size)
{
	struct fid_mr *mr;
	int ret;

	ret = fi_mr_reg(dom, buf, size, FI_SEND | FI_RECV | FI_READ | FI_WRITE |
			FI_REMOTE_READ | FI_REMOTE_WRITE, 0, 0, 0, &mr, NULL);
	if (ret)
		return ret;
	return fi_close(&mr->fid);
}

static int fab_reg_op(void *tls)
{
	struct fab_tls *t = tls;
	char *p = malloc(t->size);
	int ret;

	if (!p)
		return -ENOMEM;
	*(volatile char *)p = 1;
	ret = fab_reg_close(p, t->size);
	free(p);
	return ret;
}

static int fab_hit_op(void *tls)
{
	struct fab_tls *t = tls;

	if (!t->buf) {
		t->buf = malloc(t->size);
		if (!t->buf)
			return -ENOMEM;
	}
	*(volatile char *)t->buf = 1;
	return fab_reg_close(t->buf, t->size);
}

static void fab_thread_fini(void *tls)
{
	struct fab_tls *t = tls;

	free(t->buf);
	free(t);
}

/*
 * Each peer gets a domain (and an MR cache) of its own; closing it makes
 * the cache log its statistics (FI_LOG_LEVEL=info, tools/bench/guest.sh).
 */
static void fab_teardown(void)
{
	if (dom)
		fi_close(&dom->fid);
	if (fab)
		fi_close(&fab->fid);
	dom = NULL;
	fab = NULL;
	fab_setup_ret = 1;
}

const struct peer peer_fabric_reg = {
	.name = "fabric reg",
	.setup = fab_setup,
	.settings = fab_settings,
	.thread_init = fab_thread_init,
	.op = fab_reg_op,
	.thread_fini = fab_thread_fini,
	.teardown = fab_teardown,
};

const struct peer peer_fabric_hit = {
	.name = "fabric cache hit",
	.setup = fab_setup,
	.settings = fab_settings,
	.thread_init = fab_thread_init,
	.op = fab_hit_op,
	.thread_fini = fab_thread_fini,
	.teardown = fab_teardown,
};
