// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * UCX peers, through its public registration call (UCP, Debian's 1.13):
 *   "ucx map"       malloc + ucp_mem_map + ucp_mem_unmap + free per buffer
 *                   (what a UCX application does with a fresh buffer; glibc
 *                   may hand back the same address, and then UCX's
 *                   registration cache may hit: the registration counter
 *                   says whether it did);
 *   "ucx rcache hit" one buffer, mapped and unmapped again and again: the
 *                   registration cache's hit path.
 * One context per peer, shared by its threads (mt_workers_shared).
 * Which transports and devices UCX uses comes from its environment
 * (UCX_TLS, UCX_NET_DEVICES), set by tools/bench/guest.sh.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include <ucp/api/ucp.h>

#include "bench.h"

static ucp_context_h ucx_ctx;
static char ucx_settings_buf[256];

struct ucx_tls {
	size_t size;
	void *buf;		/* rcache hit: the one buffer */
};

static const char *env_or(const char *name, const char *dflt)
{
	const char *v = getenv(name);

	return v ? v : dflt;
}

static int ucx_setup(const struct bench_env *env, char *why, size_t len)
{
	ucp_params_t params = {
		.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED,
		.features = UCP_FEATURE_RMA,
		.mt_workers_shared = 1,
	};
	ucp_config_t *config;
	ucs_status_t st;
	unsigned int major, minor, release;

	(void)env;
	if (ucx_ctx)
		return 0;
	st = ucp_config_read(NULL, NULL, &config);
	if (st != UCS_OK) {
		snprintf(why, len, "ucp_config_read: %s", ucs_status_string(st));
		return -EINVAL;
	}
	st = ucp_init(&params, config, &ucx_ctx);
	ucp_config_release(config);
	if (st != UCS_OK) {
		snprintf(why, len, "ucp_init: %s", ucs_status_string(st));
		ucx_ctx = NULL;
		return -ENODEV;
	}
	ucp_get_version(&major, &minor, &release);
	snprintf(ucx_settings_buf, sizeof(ucx_settings_buf),
		 "UCX %u.%u.%u, UCX_TLS=%s, UCX_NET_DEVICES=%s, UCX_RCACHE_ENABLE=%s, UCX_IB_REG_METHODS=%s, UCX_MEM_EVENTS=%s",
		 major, minor, release, env_or("UCX_TLS", "(default)"),
		 env_or("UCX_NET_DEVICES", "(default)"),
		 env_or("UCX_RCACHE_ENABLE", "(default: try)"),
		 env_or("UCX_IB_REG_METHODS", "(default: rcache,odp,direct)"),
		 env_or("UCX_MEM_EVENTS", "(default: yes)"));
	return 0;
}

static const char *ucx_settings(void)
{
	return ucx_settings_buf;
}

static void *ucx_thread_init(size_t size)
{
	struct ucx_tls *t = calloc(1, sizeof(*t));

	if (t)
		t->size = size;
	return t;
}

static int ucx_map_unmap(void *buf, size_t size)
{
	ucp_mem_map_params_t mp = {
		.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS |
			      UCP_MEM_MAP_PARAM_FIELD_LENGTH,
		.address = buf,
		.length = size,
	};
	ucp_mem_h memh;

	if (ucp_mem_map(ucx_ctx, &mp, &memh) != UCS_OK)
		return -EIO;
	return ucp_mem_unmap(ucx_ctx, memh) == UCS_OK ? 0 : -EIO;
}

static int ucx_map_op(void *tls)
{
	struct ucx_tls *t = tls;
	char *p = malloc(t->size);
	int ret;

	if (!p)
		return -ENOMEM;
	*(volatile char *)p = 1;
	ret = ucx_map_unmap(p, t->size);
	free(p);
	return ret;
}

static int ucx_hit_op(void *tls)
{
	struct ucx_tls *t = tls;

	if (!t->buf) {
		t->buf = malloc(t->size);
		if (!t->buf)
			return -ENOMEM;
	}
	*(volatile char *)t->buf = 1;
	return ucx_map_unmap(t->buf, t->size);
}

static void ucx_thread_fini(void *tls)
{
	struct ucx_tls *t = tls;

	free(t->buf);
	free(t);
}

/* Each peer gets a context (and a registration cache) of its own. */
static void ucx_teardown(void)
{
	if (ucx_ctx)
		ucp_cleanup(ucx_ctx);
	ucx_ctx = NULL;
}

const struct peer peer_ucx_map = {
	.name = "ucx map",
	.setup = ucx_setup,
	.settings = ucx_settings,
	.thread_init = ucx_thread_init,
	.op = ucx_map_op,
	.thread_fini = ucx_thread_fini,
	.teardown = ucx_teardown,
};

const struct peer peer_ucx_hit = {
	.name = "ucx rcache hit",
	.setup = ucx_setup,
	.settings = ucx_settings,
	.thread_init = ucx_thread_init,
	.op = ucx_hit_op,
	.thread_fini = ucx_thread_fini,
	.teardown = ucx_teardown,
};
