// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Peers "glibc malloc" (malloc + free: the floor, no RDMA at all) and
 * "malloc+ibv_reg_mr" (malloc + ibv_reg_mr + ibv_dereg_mr + free: what an
 * application without any cache pays for each buffer).
 */
#include <errno.h>
#include <stdlib.h>

#include <infiniband/verbs.h>

#include "bench.h"

static struct ibv_pd *verbs_pd;

struct malloc_tls {
	size_t size;
};

static int malloc_setup(const struct bench_env *env, char *why, size_t len)
{
	(void)why;
	(void)len;
	verbs_pd = env->pd;
	return 0;
}

static const char *malloc_settings(void)
{
	return "glibc defaults (no tunables set)";
}

static const char *verbs_settings(void)
{
	return "LOCAL_WRITE|REMOTE_WRITE|REMOTE_READ, no cache";
}

static void *malloc_thread_init(size_t size)
{
	struct malloc_tls *t = malloc(sizeof(*t));

	if (t)
		t->size = size;
	return t;
}

static int malloc_op(void *tls)
{
	struct malloc_tls *t = tls;
	char *p = malloc(t->size);

	if (!p)
		return -ENOMEM;
	*(volatile char *)p = 1;
	free(p);
	return 0;
}

static int verbs_op(void *tls)
{
	struct malloc_tls *t = tls;
	char *p = malloc(t->size);
	struct ibv_mr *mr;
	int ret = 0;

	if (!p)
		return -ENOMEM;
	*(volatile char *)p = 1;
	mr = ibv_reg_mr(verbs_pd, p, t->size, IBV_ACCESS_LOCAL_WRITE |
			IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
	if (!mr)
		ret = -errno;
	else if (ibv_dereg_mr(mr))
		ret = -EIO;
	free(p);
	return ret;
}

static void malloc_thread_fini(void *tls)
{
	free(tls);
}

static void malloc_teardown(void)
{
}

const struct peer peer_malloc = {
	.name = "glibc malloc",
	.setup = malloc_setup,
	.settings = malloc_settings,
	.thread_init = malloc_thread_init,
	.op = malloc_op,
	.thread_fini = malloc_thread_fini,
	.teardown = malloc_teardown,
};

const struct peer peer_verbs = {
	.name = "malloc+ibv_reg_mr",
	.setup = malloc_setup,
	.settings = verbs_settings,
	.thread_init = malloc_thread_init,
	.op = verbs_op,
	.thread_fini = malloc_thread_fini,
	.teardown = malloc_teardown,
};
