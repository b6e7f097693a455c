// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Peer "mrpool": mrp_alloc + mrp_free from one libmrpool pool with the
 * scenario's PD attached, so every buffer comes with its keys.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include <infiniband/verbs.h>

#include "bench.h"
#include "mrpool.h"

static struct mrp_pool *pool;
static struct ibv_pd *pool_pd;
static char pool_settings[128];

struct pool_tls {
	size_t size;
};

static int pool_setup(const struct bench_env *env, char *why, size_t len)
{
	struct mrp_stats st;

	pool = mrp_pool_open(NULL);
	if (!pool) {
		snprintf(why, len, "mrp_pool_open: %s", mrp_strerror(errno));
		return -errno;
	}
	pool_pd = env->pd;
	if (mrp_attach_pd(pool, pool_pd, IBV_ACCESS_LOCAL_WRITE |
			  IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ)) {
		snprintf(why, len, "mrp_attach_pd failed");
		mrp_pool_close(pool);
		pool = NULL;
		return -EIO;
	}
	mrp_stats(pool, &st, sizeof(st));
	snprintf(pool_settings, sizeof(pool_settings),
		 "backend %s, PD attached (keys with every buffer), default thread cache",
		 st.backend == MRP_KIND_KERNEL ? "kernel module" : "anon");
	return 0;
}

static const char *pool_get_settings(void)
{
	return pool_settings;
}

static void *pool_thread_init(size_t size)
{
	struct pool_tls *t = malloc(sizeof(*t));

	if (t)
		t->size = size;
	return t;
}

static int pool_op(void *tls)
{
	struct pool_tls *t = tls;
	struct mrp_buf b;
	int ret;

	ret = mrp_alloc(pool, t->size, pool_pd, &b);
	if (ret)
		return ret;
	*(volatile char *)b.addr = 1;
	return mrp_free(pool, b.addr);
}

static void pool_thread_fini(void *tls)
{
	mrp_thread_flush(pool);
	free(tls);
}

static void pool_teardown(void)
{
	mrp_pool_close(pool);
	pool = NULL;
}

const struct peer peer_pool = {
	.name = "mrpool",
	.setup = pool_setup,
	.settings = pool_get_settings,
	.thread_init = pool_thread_init,
	.op = pool_op,
	.thread_fini = pool_thread_fini,
	.teardown = pool_teardown,
};
