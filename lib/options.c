// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Settings: a field set in the attribute struct wins, then its MRPOOL_*
 * environment variable, then the default. A malformed variable fails the
 * open with -EINVAL rather than being silently ignored; mrp_cfg_load()
 * names it for whoever must tell a person (the preload shim). Numbers are
 * decimal: "010" is ten, as a person reading it means, not octal eight.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "internal.h"

#define MRP_ATTR_ALL	((MRP_POOL_ATTR_FORK << 1) - 1)

/* Parse "123", "64K", "4M", "1G" (decimal; nothing that would overflow). */
int mrp_parse_size(const char *s, size_t *out)
{
	unsigned long long v;
	unsigned int shift = 0;
	char *end;

	if (*s < '0' || *s > '9')	/* no sign, no blank: strtoull takes both */
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno)
		return -EINVAL;
	switch (*end) {
	case 'k': case 'K':
		shift = 10;
		end++;
		break;
	case 'm': case 'M':
		shift = 20;
		end++;
		break;
	case 'g': case 'G':
		shift = 30;
		end++;
		break;
	default:
		break;
	}
	if (*end || v > (SIZE_MAX >> shift))
		return -EINVAL;
	*out = (size_t)v << shift;
	return 0;
}

static int mrp_env_size(const char *name, size_t *out)
{
	const char *s = getenv(name);

	return s ? mrp_parse_size(s, out) : 0;
}

static int mrp_env_u32(const char *name, uint32_t *out)
{
	size_t v;
	int ret = mrp_env_size(name, &v);

	if (ret || !getenv(name))
		return ret;
	if (v > UINT32_MAX)
		return -EINVAL;
	*out = (uint32_t)v;
	return 0;
}

static int mrp_env_bool(const char *name, bool *out)
{
	size_t v;
	int ret = mrp_env_size(name, &v);

	if (ret || !getenv(name))
		return ret;
	if (v > 1)
		return -EINVAL;
	*out = v;
	return 0;
}

static int mrp_env_backend(enum mrp_backend *out)
{
	const char *s = getenv("MRPOOL_BACKEND");

	if (!s)
		return 0;
	if (!strcasecmp(s, "auto"))
		*out = MRP_BACKEND_AUTO;
	else if (!strcasecmp(s, "kernel"))
		*out = MRP_BACKEND_KERNEL;
	else if (!strcasecmp(s, "anon"))
		*out = MRP_BACKEND_ANON;
	else
		return -EINVAL;
	return 0;
}

/* MRPOOL_NUMA_NODE: auto, any, or a node number. */
static int mrp_env_numa(int *out)
{
	const char *s = getenv("MRPOOL_NUMA_NODE");
	size_t v;

	if (!s)
		return 0;
	if (!strcasecmp(s, "auto")) {
		*out = MRP_NUMA_AUTO;
		return 0;
	}
	if (!strcasecmp(s, "any")) {
		*out = MRP_NUMA_ANY;
		return 0;
	}
	if (mrp_parse_size(s, &v) || v > MRP_NUMA_MAX)
		return -EINVAL;
	*out = (int)v;
	return 0;
}

/* MRPOOL_CLASSES: pow2 or fine. */
static int mrp_env_classes(bool *fine)
{
	const char *s = getenv("MRPOOL_CLASSES");

	if (!s)
		return 0;
	if (!strcasecmp(s, "pow2"))
		*fine = false;
	else if (!strcasecmp(s, "fine"))
		*fine = true;
	else
		return -EINVAL;
	return 0;
}

/* MRPOOL_FORK: none or copy. */
static int mrp_env_fork(bool *copy)
{
	const char *s = getenv("MRPOOL_FORK");

	if (!s)
		return 0;
	if (!strcasecmp(s, "none"))
		*copy = false;
	else if (!strcasecmp(s, "copy"))
		*copy = true;
	else
		return -EINVAL;
	return 0;
}

static int mrp_set_device(struct mrp_cfg *cfg, const char *dev)
{
	if (!dev || strlen(dev) >= sizeof(cfg->device))
		return -EINVAL;
	strcpy(cfg->device, dev);
	return 0;
}

/* Each variable in turn: the first malformed one fails, named in *bad. */
#define MRP_ENV(name, call) do {						\
	int _r = (call);							\
									\
	if (_r) {								\
		*bad = (name);							\
		return _r;							\
	}									\
} while (0)

static int mrp_cfg_env(struct mrp_cfg *cfg, const char **bad)
{
	MRP_ENV("MRPOOL_BACKEND", mrp_env_backend(&cfg->backend));
	if (getenv("MRPOOL_DEVICE"))
		MRP_ENV("MRPOOL_DEVICE", mrp_set_device(cfg, getenv("MRPOOL_DEVICE")));
	MRP_ENV("MRPOOL_ARENA_SIZE", mrp_env_size("MRPOOL_ARENA_SIZE", &cfg->arena_size));
	MRP_ENV("MRPOOL_TCACHE_BYTES", mrp_env_size("MRPOOL_TCACHE_BYTES", &cfg->tcache_bytes));
	MRP_ENV("MRPOOL_TRIM_DELAY_MS", mrp_env_u32("MRPOOL_TRIM_DELAY_MS", &cfg->trim_delay_ms));
	MRP_ENV("MRPOOL_MAX_BYTES", mrp_env_size("MRPOOL_MAX_BYTES", &cfg->max_bytes));
	MRP_ENV("MRPOOL_FALLBACK", mrp_env_bool("MRPOOL_FALLBACK", &cfg->fallback));
	MRP_ENV("MRPOOL_BACKGROUND", mrp_env_bool("MRPOOL_BACKGROUND", &cfg->background));
	MRP_ENV("MRPOOL_HUGETLB", mrp_env_bool("MRPOOL_HUGETLB", &cfg->hugetlb));
	MRP_ENV("MRPOOL_SAMPLE_EVERY", mrp_env_u32("MRPOOL_SAMPLE_EVERY", &cfg->sample_every));
	MRP_ENV("MRPOOL_LOW_WATER", mrp_env_u32("MRPOOL_LOW_WATER", &cfg->low_water));
	MRP_ENV("MRPOOL_IDLE_RECLAIM", mrp_env_bool("MRPOOL_IDLE_RECLAIM", &cfg->idle_reclaim));
	MRP_ENV("MRPOOL_DEBUG", mrp_env_bool("MRPOOL_DEBUG", &cfg->debug));
	MRP_ENV("MRPOOL_DMABUF", mrp_env_bool("MRPOOL_DMABUF", &cfg->dmabuf));
	MRP_ENV("MRPOOL_NUMA_NODE", mrp_env_numa(&cfg->numa_node));
	MRP_ENV("MRPOOL_CLASSES", mrp_env_classes(&cfg->fine));
	MRP_ENV("MRPOOL_FORK", mrp_env_fork(&cfg->fork_copy));
	return 0;
}

#undef MRP_ENV

/*
 * The merged settings of attr (NULL: none), the environment and the
 * defaults, or -EINVAL; with bad, *bad names the MRPOOL_* variable at
 * fault (malformed, or out of range where the attribute did not set the
 * field), NULL if an attribute is.
 */
int mrp_cfg_load(struct mrp_cfg *cfg, const struct mrp_pool_attr *attr, const char **bad)
{
	static const struct mrp_pool_attr none;
	const char *scratch;
	uint32_t m;
	int ret = 0;

	if (!bad)
		bad = &scratch;
	*bad = NULL;
	if (!attr)
		attr = &none;
	m = attr->comp_mask;
	if (m & ~(uint32_t)MRP_ATTR_ALL)
		return -EINVAL;

	memset(cfg, 0, sizeof(*cfg));
	cfg->backend = MRP_BACKEND_AUTO;
	strcpy(cfg->device, "/dev/mrpool");
	cfg->arena_size = 4 << 20;
	cfg->tcache_bytes = 256 << 10;
	cfg->trim_delay_ms = 5000;
	cfg->background = true;
	cfg->hugetlb = true;
	cfg->idle_reclaim = true;
	cfg->dmabuf = true;
	cfg->numa_node = MRP_NUMA_AUTO;

	ret = mrp_cfg_env(cfg, bad);
	if (ret)
		return ret;

	if (m & MRP_POOL_ATTR_BACKEND)
		cfg->backend = attr->backend;
	if (m & MRP_POOL_ATTR_DEVICE)
		ret = mrp_set_device(cfg, attr->device);
	if (m & MRP_POOL_ATTR_ARENA_SIZE)
		cfg->arena_size = attr->arena_size;
	if (m & MRP_POOL_ATTR_TCACHE_BYTES)
		cfg->tcache_bytes = attr->tcache_bytes;
	if (m & MRP_POOL_ATTR_TRIM_DELAY)
		cfg->trim_delay_ms = attr->trim_delay_ms;
	if (m & MRP_POOL_ATTR_MAX_BYTES)
		cfg->max_bytes = attr->max_bytes;
	if (m & MRP_POOL_ATTR_FALLBACK)
		cfg->fallback = attr->fallback != 0;
	if (m & MRP_POOL_ATTR_BACKGROUND)
		cfg->background = attr->background != 0;
	if (m & MRP_POOL_ATTR_HUGETLB)
		cfg->hugetlb = attr->hugetlb != 0;
	if (m & MRP_POOL_ATTR_SAMPLE_EVERY)
		cfg->sample_every = attr->sample_every;
	if (m & MRP_POOL_ATTR_LOW_WATER)
		cfg->low_water = attr->low_water;
	if (m & MRP_POOL_ATTR_IDLE_RECLAIM)
		cfg->idle_reclaim = attr->idle_reclaim != 0;
	if (m & MRP_POOL_ATTR_DMABUF)
		cfg->dmabuf = attr->dmabuf != 0;
	if (m & MRP_POOL_ATTR_NUMA_NODE)
		cfg->numa_node = attr->numa_node;
	if (m & MRP_POOL_ATTR_CLASSES) {
		if (attr->classes != MRP_CLASSES_POW2 && attr->classes != MRP_CLASSES_FINE)
			return -EINVAL;
		cfg->fine = attr->classes == MRP_CLASSES_FINE;
	}
	if (m & MRP_POOL_ATTR_FORK) {
		if (attr->fork != MRP_FORK_NONE && attr->fork != MRP_FORK_COPY)
			return -EINVAL;
		cfg->fork_copy = attr->fork == MRP_FORK_COPY;
	}
	if (ret)
		return ret;

	if (cfg->backend > MRP_BACKEND_ANON)
		return -EINVAL;
	if (cfg->numa_node < MRP_NUMA_AUTO || cfg->numa_node > MRP_NUMA_MAX)
		return -EINVAL;
	/* an arena holds at least one 2 MiB buffer; 1 TiB is surely a typo */
	if (cfg->arena_size < MRP_MAX_CLASS || cfg->arena_size > ((size_t)1 << 40)) {
		if (!(m & MRP_POOL_ATTR_ARENA_SIZE))
			*bad = "MRPOOL_ARENA_SIZE";
		return -EINVAL;
	}
	if (cfg->tcache_bytes > ((size_t)1 << 30)) {
		if (!(m & MRP_POOL_ATTR_TCACHE_BYTES))
			*bad = "MRPOOL_TCACHE_BYTES";
		return -EINVAL;
	}
	return 0;
}
