// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * mrpoolctl metrics: the pool's state in the Prometheus text exposition
 * format (version 0.0.4), for node_exporter's textfile collector or a
 * scrape wrapper. Names are mrpool_*; counters end in _total; every family
 * is printed once with its HELP and TYPE, all its samples together.
 * Counters the module adds under stats/ or devices/<dev>/ appear without
 * a change here, with a generic HELP text. cgroup pool quotas and what
 * each user holds come from netlink, labelled by cgroup path and uid.
 */
#include "mrpoolctl.h"

#include <stdlib.h>
#include <string.h>

static const struct {
	const char *name;
	const char *help;
} ctl_metric_help[] = {
	{ "fail_nomem", "Slice allocations refused: pool full or no memory (ENOMEM)" },
	{ "fail_quota", "Slice allocations refused by the per-user cap max_user_mb or a cgroup pool quota (EDQUOT)" },
	{ "fail_memlock", "Slice allocations refused by RLIMIT_MEMLOCK (ENOMEM)" },
	{ "fail_injected", "Slice allocations failed by the debugfs knob fail_slice_alloc" },
	{ "chunk_alloc_failures", "Chunk allocations that failed" },
	{ "grows", "Chunks added to the pool" },
	{ "trims", "Chunks given back to the page allocator by the idle trim" },
	{ "zeroed", "Chunks zeroed for reuse" },
	{ "quarantines", "Chunks quarantined because their pages were still referenced" },
	{ "node_fallbacks", "Chunks handed out from another NUMA node than the one asked" },
	{ "defrags", "Fragmented free chunks replaced by whole ones" },
	{ "quarantine_checks", "Checks of quarantined chunks for released pins" },
	{ "retired", "Chunks kept out of the pool for good: an RDMA MR may still reach them" },
	{ "node", "NUMA node of the device's DMA device, -1 if none" },
	{ "chunks", "Chunks registered on the device" },
	{ "kbufs", "In-kernel API buffers lent on the device" },
	{ "regs", "Registration work requests completed" },
	{ "invalidations", "Local invalidation work requests completed" },
	{ "reg_failures", "Chunks that could not be registered" },
	{ "wr_timeouts", "Work requests that never completed" },
	{ "qp_drains", "Internal QPs drained after a work request timed out" },
	{ "dereg_failures", "MRs the device refused to deregister" },
	{ "recoveries", "Times the failed device became ready again by itself" },
	{ "recover_failures", "Recovery attempts of the failed device that failed" },
};

/* Per-device attributes that are levels, not counts since add. */
static const char *const ctl_device_gauges[] = { "node", "chunks", "kbufs" };

static const char *ctl_help_for(const char *name, const char *fallback)
{
	size_t i;

	for (i = 0; i < ARRAY_SIZE(ctl_metric_help); i++)
		if (!strcmp(ctl_metric_help[i].name, name))
			return ctl_metric_help[i].help;
	return fallback;
}

/* Metric names allow [a-zA-Z0-9_:]; a sysfs name could hold anything. */
static void ctl_metric_name(char *buf, size_t len, const char *prefix,
			    const char *name, const char *suffix)
{
	size_t i, n;

	n = (size_t)snprintf(buf, len, "%s%s%s", prefix, name, suffix);
	for (i = strlen(prefix); i < n && i < len; i++)
		if (!(buf[i] == '_' || (buf[i] >= 'a' && buf[i] <= 'z') ||
		      (buf[i] >= 'A' && buf[i] <= 'Z') ||
		      (buf[i] >= '0' && buf[i] <= '9')))
			buf[i] = '_';
}

/* A label value with \, " and newline escaped as the format requires. */
static void ctl_label(const char *v)
{
	for (; *v; v++) {
		if (*v == '\\' || *v == '"')
			printf("\\%c", *v);
		else if (*v == '\n')
			fputs("\\n", stdout);
		else
			putchar(*v);
	}
}

static void ctl_family(const char *name, const char *type, const char *help)
{
	printf("# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void ctl_metrics_pool(const struct ctl_pool *p)
{
	char name[128];
	size_t i;

	for (i = 0; i < CTL_NR_FIELDS; i++) {
		const struct ctl_field *f = &p->f[i];
		bool counter = f->kind == CTL_COUNTER;

		if (!f->have)
			continue;
		ctl_metric_name(name, sizeof(name), "mrpool_", f->name,
				counter ? "_total" : "");
		ctl_family(name, counter ? "counter" : "gauge", f->help);
		if (f->kind == CTL_INFO)
			printf("%s %lld\n", name, f->value);
		else
			printf("%s %llu\n", name, (unsigned long long)f->value);
	}
	for (i = 0; i < p->nstats; i++) {
		ctl_metric_name(name, sizeof(name), "mrpool_", p->stats[i],
				"_total");
		ctl_family(name, "counter",
			   ctl_help_for(p->stats[i], "Pool counter since load"));
		printf("%s %llu\n", name,
		       (unsigned long long)p->stat_values[i]);
	}
}

static void ctl_metrics_blocks(const struct ctl_pool *p)
{
	char buf[sizeof(p->blocks)], *save = NULL, *tok;
	unsigned int order = 0;
	long long v;

	if (!p->blocks[0])
		return;
	ctl_family("mrpool_blocks", "gauge",
		   "Page-allocator blocks the chunks are built of, by page order");
	memcpy(buf, p->blocks, sizeof(buf));
	for (tok = strtok_r(buf, " ", &save); tok;
	     tok = strtok_r(NULL, " ", &save), order++)
		if (ctl_parse_ll(tok, &v))
			printf("mrpool_blocks{order=\"%u\"} %lld\n", order, v);
}

static bool ctl_is_device_gauge(const char *attr)
{
	size_t i;

	for (i = 0; i < ARRAY_SIZE(ctl_device_gauges); i++)
		if (!strcmp(ctl_device_gauges[i], attr))
			return true;
	return false;
}

/* One family per numeric attribute, one sample per device. */
static int ctl_metrics_devices(const struct ctl_pool *p)
{
	char path[CTL_PATH_MAX], name[128], text[128];
	const char **attrs;
	size_t nattrs, a, d;
	static const char *const generic =
		"Device counter since the device was added";
	bool gauge, first;
	long long v;
	int ret;

	if (!p->have_devices)
		return 0;
	ctl_family("mrpool_devices", "gauge",
		   "RDMA devices mrpool's ib_client was given, usable or not");
	printf("mrpool_devices %zu\n", p->ndevices);
	if (!p->ndevices)
		return 0;

	ctl_family("mrpool_device_state", "gauge",
		   "1 for the state the device's kernel MR cache is in");
	for (d = 0; d < p->ndevices; d++) {
		fputs("mrpool_device_state{device=\"", stdout);
		ctl_label(p->devices[d]);
		fputs("\",state=\"", stdout);
		ctl_label(ctl_device_state(p->devices[d], text, sizeof(text)));
		fputs("\"} 1\n", stdout);
	}

	ret = ctl_device_attrs(p->devices, p->ndevices, &attrs, &nattrs);
	if (ret)
		return ret;
	for (a = 1; a < nattrs; a++) {
		gauge = ctl_is_device_gauge(attrs[a]);
		ctl_metric_name(name, sizeof(name), "mrpool_device_", attrs[a],
				gauge ? "" : "_total");
		first = true;
		for (d = 0; d < p->ndevices; d++) {
			ctl_path(path, sizeof(path), CTL_DEVICES "/%s/%s",
				 p->devices[d], attrs[a]);
			/* Text attributes (state, reason) are not samples. */
			if (ctl_read_text(path, text, sizeof(text)) ||
			    !ctl_parse_ll(text, &v))
				continue;
			if (first)
				ctl_family(name, gauge ? "gauge" : "counter",
					   ctl_help_for(attrs[a], generic));
			first = false;
			printf("%s{device=\"", name);
			ctl_label(p->devices[d]);
			printf("\"} %lld\n", v);
		}
	}
	ctl_device_attrs_free(attrs, nattrs);
	return 0;
}

/* A gauge family filled from a netlink table's column. */
struct ctl_metric_fam {
	const char *col, *name, *help;
};

/*
 * One family per entry of @fams, one sample per row of @t labelled
 * @label="first column"; cells that are not numbers (a deleted quota's
 * limit) have no sample.
 */
static void ctl_metrics_rows(const struct ctl_table *t,
			     const struct ctl_metric_fam *fams, size_t nfams,
			     const char *label)
{
	const char *cell;
	long long v;
	size_t f, r;
	int col;

	for (f = 0; t->nrows && f < nfams; f++) {
		col = ctl_table_col(t, fams[f].col);
		if (col < 0)
			continue;
		ctl_family(fams[f].name, "gauge", fams[f].help);
		for (r = 0; r < t->nrows; r++) {
			cell = ctl_table_cell(t, r, (size_t)col);
			if (!ctl_parse_ll(cell, &v))
				continue;
			printf("%s{%s=\"", fams[f].name, label);
			ctl_label(ctl_table_cell(t, r, 0));
			printf("\"} %lld\n", v);
		}
	}
}

/*
 * cgroup pool quotas (netlink QUOTA_GET), one sample per quota labelled
 * with its cgroup's path; a quota whose limit was deleted has no limit
 * sample. Without the family (an older module) there are none.
 */
static void ctl_metrics_quotas(void)
{
	static const struct ctl_metric_fam fams[] = {
		{ "limit_bytes", "mrpool_quota_limit_bytes",
		  "Pool quota of a cgroup v2 directory" },
		{ "bytes", "mrpool_quota_bytes",
		  "Pool bytes charged to a cgroup's quota, quarantined included" },
		{ "quarantined_bytes", "mrpool_quota_quarantined_bytes",
		  "Of those, bytes in quarantine" },
		{ "removed", "mrpool_quota_removed",
		  "1 if the cgroup was removed while it holds pool memory" },
	};
	struct ctl_table t;

	if (ctl_quota_table(&t, true))
		return;
	ctl_metrics_rows(&t, fams, ARRAY_SIZE(fams), "cgroup");
	ctl_table_free(&t);
}

/*
 * What each user holds (netlink TENANT_GET), one sample per user labelled
 * with its uid, the orphans as uid "orphans"; an unprivileged caller gets
 * its own user only, and an older module nothing.
 */
static void ctl_metrics_tenants(void)
{
	static const struct ctl_metric_fam fams[] = {
		{ "bytes", "mrpool_tenant_bytes",
		  "Pool bytes charged to a user, quarantined included" },
		{ "quarantined_bytes", "mrpool_tenant_quarantined_bytes",
		  "Of those, bytes in quarantine" },
		{ "memlock_bytes", "mrpool_tenant_memlock_bytes",
		  "Of those, bytes charged to the user's RLIMIT_MEMLOCK" },
		{ "orphaned_bytes", "mrpool_tenant_orphaned_bytes",
		  "Bytes taken from the user to the orphans, still held" },
	};
	struct ctl_table t;

	if (ctl_tenant_table(&t, true))
		return;
	ctl_metrics_rows(&t, fams, ARRAY_SIZE(fams), "uid");
	ctl_table_free(&t);
}

int ctl_cmd_metrics(const struct ctl_cmd *cmd, int argc, char **argv)
{
	struct ctl_pool p;
	int ret;

	ret = ctl_no_args(cmd, argc, argv);
	if (ret)
		return ret;
	ret = ctl_pool_read(&p);
	if (ret) {
		ctl_pool_free(&p);
		ctl_errno(ret, "no pool state to export");
		return CTL_FAIL;
	}
	ctl_metrics_pool(&p);
	ctl_metrics_blocks(&p);
	ret = ctl_metrics_devices(&p);
	ctl_metrics_quotas();
	ctl_metrics_tenants();
	ctl_pool_free(&p);
	if (ret) {
		ctl_errno(ret, "metrics");
		return CTL_FAIL;
	}
	return CTL_OK;
}
