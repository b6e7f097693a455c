// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * The pool's geometry, totals and counters, shared by status and metrics.
 * MRPOOL_IOC_QUERY gives them in one consistent snapshot; when the device
 * cannot be opened (not root, or an older node without it) the same values
 * come from /sys/class/misc/mrpool one file at a time. The stats/ directory
 * is listed rather than named so counters the module adds show up too.
 */
#include "mrpoolctl.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "uapi/mrpool.h"

/* Where each field is in sysfs, below CTL_SYSFS; NULL: ioctl only. */
static const char *const ctl_field_attr[CTL_NR_FIELDS] = {
	[CTL_F_CHUNK] = "chunk_bytes",
	[CTL_F_NODE] = "node",
	[CTL_F_TOTAL] = "total_bytes",
	[CTL_F_FREE] = "free_bytes",
	[CTL_F_USED] = "used_bytes",
	[CTL_F_QUAR] = "quarantined_bytes",
	[CTL_F_MAX] = "max_bytes",
	[CTL_F_ALLOCS] = "stats/allocs",
	[CTL_F_FREES] = "stats/frees",
};

static const struct ctl_field ctl_field_init[CTL_NR_FIELDS] = {
	[CTL_F_ABI] = { "abi_version", CTL_INFO,
			"ABI version of the loaded module" },
	[CTL_F_CHUNK] = { "chunk_bytes", CTL_BYTES,
			  "Bytes per chunk; slices are whole chunks" },
	[CTL_F_NODE] = { "node", CTL_INFO,
			 "NUMA node the pool allocates on, -1 for automatic" },
	[CTL_F_NDEV] = { "devices_ready", CTL_INFO,
			 "RDMA devices whose kernel MR cache is ready" },
	[CTL_F_TOTAL] = { "total_bytes", CTL_BYTES,
			  "Bytes the pool holds: free, used and quarantined" },
	[CTL_F_FREE] = { "free_bytes", CTL_BYTES,
			 "Bytes in zeroed chunks ready to hand out" },
	[CTL_F_USED] = { "used_bytes", CTL_BYTES,
			 "Bytes in slices owned by open files" },
	[CTL_F_QUAR] = { "quarantined_bytes", CTL_BYTES,
			 "Bytes freed by their slice but still referenced" },
	[CTL_F_MAX] = { "max_bytes", CTL_BYTES,
			"Ceiling total_bytes may grow to (max_mb)" },
	[CTL_F_ALLOCS] = { "allocs", CTL_COUNTER,
			   "Slices handed out since load" },
	[CTL_F_FREES] = { "frees", CTL_COUNTER,
			  "Slices whose memory went back to the pool since load" },
	[CTL_F_FAILS] = { "alloc_failures", CTL_COUNTER,
			  "Failed slice allocations since load, every reason" },
};

static int ctl_query(struct mrpool_query *q)
{
	char path[CTL_PATH_MAX];
	int fd, ret;

	fd = open(ctl_path(path, sizeof(path), CTL_DEV), O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	memset(q, 0, sizeof(*q));
	q->size = sizeof(*q);
	do {
		ret = ioctl(fd, MRPOOL_IOC_QUERY, q);
	} while (ret < 0 && errno == EINTR);
	ret = ret < 0 ? -errno : 0;
	close(fd);
	return ret;
}

static void ctl_set(struct ctl_pool *p, int i, long long v)
{
	p->f[i].value = v;
	p->f[i].have = true;
}

static void ctl_pool_from_query(struct ctl_pool *p, const struct mrpool_query *q)
{
	p->from_ioctl = true;
	ctl_set(p, CTL_F_ABI, q->abi_version);
	ctl_set(p, CTL_F_CHUNK, (long long)q->chunk_size);
	ctl_set(p, CTL_F_NODE, q->node);
	ctl_set(p, CTL_F_NDEV, q->ndevices);
	ctl_set(p, CTL_F_TOTAL, (long long)q->total_bytes);
	ctl_set(p, CTL_F_FREE, (long long)q->free_bytes);
	ctl_set(p, CTL_F_USED, (long long)q->used_bytes);
	ctl_set(p, CTL_F_QUAR, (long long)q->quarantined_bytes);
	ctl_set(p, CTL_F_MAX, (long long)q->max_bytes);
	ctl_set(p, CTL_F_ALLOCS, (long long)q->allocs);
	ctl_set(p, CTL_F_FREES, (long long)q->frees);
	ctl_set(p, CTL_F_FAILS, (long long)q->alloc_failures);
	if (q->abi_version != MRPOOL_ABI_VERSION)
		ctl_err("module ABI version %u, this tool knows %u",
			q->abi_version, MRPOOL_ABI_VERSION);
}

static void ctl_pool_from_sysfs(struct ctl_pool *p)
{
	char path[CTL_PATH_MAX];
	long long v;
	int i, ret;

	for (i = 0; i < CTL_NR_FIELDS; i++) {
		if (!ctl_field_attr[i])
			continue;
		ctl_path(path, sizeof(path), CTL_SYSFS "/%s", ctl_field_attr[i]);
		ret = ctl_read_ll(path, &v);
		if (ret)
			ctl_warn_missing(ret, path);
		else
			ctl_set(p, i, v);
	}
}

/* stats/ counters beyond allocs and frees, which f[] already holds. */
static int ctl_pool_stats(struct ctl_pool *p)
{
	char path[CTL_PATH_MAX], **names;
	long long v, fails = 0;
	bool any_fail = false;
	size_t i, n;
	int ret;

	ret = ctl_list_dir(ctl_path(path, sizeof(path), CTL_STATS), &names, &n);
	if (ret) {
		ctl_warn_missing(ret, path);
		return ret == -ENOMEM ? ret : 0;
	}
	p->stat_values = calloc(n ? n : 1, sizeof(*p->stat_values));
	p->stats = calloc(n ? n : 1, sizeof(*p->stats));
	if (!p->stat_values || !p->stats) {
		ctl_free_names(names, n);
		return -ENOMEM;
	}
	for (i = 0; i < n; i++) {
		ctl_path(path, sizeof(path), CTL_STATS "/%s", names[i]);
		ret = ctl_read_ll(path, &v);
		if (ret) {
			ctl_warn_missing(ret, path);
			free(names[i]);
			continue;
		}
		/* QUERY's alloc_failures is the sum of the fail_* reasons. */
		if (!strncmp(names[i], "fail_", 5)) {
			fails += v;
			any_fail = true;
		}
		if (!strcmp(names[i], "allocs") || !strcmp(names[i], "frees")) {
			free(names[i]);
			continue;
		}
		p->stats[p->nstats] = names[i];
		p->stat_values[p->nstats++] = v;
	}
	free(names);
	if (!p->f[CTL_F_FAILS].have && any_fail)
		ctl_set(p, CTL_F_FAILS, fails);
	return 0;
}

/*
 * Fill @p; reports what it cannot read on stderr. 0 if there is anything
 * to show, else -errno (module not loaded, most likely).
 */
int ctl_pool_read(struct ctl_pool *p)
{
	char path[CTL_PATH_MAX], spath[CTL_PATH_MAX];
	struct mrpool_query q;
	int ret, i;

	memset(p, 0, sizeof(*p));
	memcpy(p->f, ctl_field_init, sizeof(p->f));

	ret = ctl_query(&q);
	ctl_path(path, sizeof(path), CTL_DEV);
	ctl_path(spath, sizeof(spath), CTL_SYSFS);
	if (ret && !ctl_exists(CTL_SYSFS)) {
		ctl_warn_missing(ret, path);
		ctl_warn_missing(ENOENT, spath);
		return ret;
	}
	if (!ret) {
		ctl_pool_from_query(p, &q);
	} else {
		if (!ctl_quiet)
			ctl_err("%s: %s; reading %s instead", path,
				strerror(-ret), spath);
		ctl_pool_from_sysfs(p);
	}

	ctl_path(path, sizeof(path), CTL_SYSFS "/blocks_per_order");
	ret = ctl_read_text(path, p->blocks, sizeof(p->blocks));
	if (ret) {
		p->blocks[0] = '\0';
		ctl_warn_missing(ret, path);
	}

	ret = ctl_pool_stats(p);
	if (ret)
		return ret;

	ctl_path(path, sizeof(path), CTL_DEVICES);
	ret = ctl_list_dir(path, &p->devices, &p->ndevices);
	if (ret == -ENOMEM)
		return ret;
	p->have_devices = !ret;
	if (ret)
		ctl_warn_missing(ret, path);

	for (i = 0; i < CTL_NR_FIELDS; i++)
		if (p->f[i].have)
			return 0;
	return -ENOENT;
}

void ctl_pool_free(struct ctl_pool *p)
{
	ctl_free_names(p->stats, p->nstats);
	free(p->stat_values);
	ctl_free_names(p->devices, p->ndevices);
	memset(p, 0, sizeof(*p));
}

/* devices/<dev>/state ("ready", ...) or "?" when unreadable. */
const char *ctl_device_state(const char *dev, char *buf, size_t len)
{
	char path[CTL_PATH_MAX];

	ctl_path(path, sizeof(path), CTL_DEVICES "/%s/state", dev);
	if (ctl_read_text(path, buf, len) || !buf[0])
		snprintf(buf, len, "?");
	return buf;
}
