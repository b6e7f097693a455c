// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Stand-ins for the UCX or libfabric peers when this machine has no
 * headers for them (the Makefile builds this file with -DMISSING_UCX or
 * -DMISSING_FABRIC instead of peer_ucx.c or peer_fabric.c): the rows say
 * the peer was not built, and why.
 */
#include <errno.h>
#include <stdio.h>

#include "bench.h"

static int missing_setup(const struct bench_env *env, char *why, size_t len,
			 const char *pkg)
{
	(void)env;
	snprintf(why, len, "not built: no %s headers when mrpool-scenarios was compiled (tools/deps.sh installs it)",
		 pkg);
	return -ENOSYS;
}

static const char *missing_settings(void)
{
	return "-";
}

#ifdef MISSING_UCX
static int ucx_missing(const struct bench_env *env, char *why, size_t len)
{
	return missing_setup(env, why, len, "libucx-dev");
}

const struct peer peer_ucx_map = {
	.name = "ucx map", .setup = ucx_missing, .settings = missing_settings,
};

const struct peer peer_ucx_hit = {
	.name = "ucx rcache hit", .setup = ucx_missing, .settings = missing_settings,
};
#endif

#ifdef MISSING_FABRIC
static int fabric_missing(const struct bench_env *env, char *why, size_t len)
{
	return missing_setup(env, why, len, "libfabric-dev");
}

const struct peer peer_fabric_reg = {
	.name = "fabric reg", .setup = fabric_missing, .settings = missing_settings,
};

const struct peer peer_fabric_hit = {
	.name = "fabric cache hit", .setup = fabric_missing, .settings = missing_settings,
};
#endif
