// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * mrpoolctl devices: the RDMA devices mrpool's ib_client was given and the
 * kernel MR cache on each, from /sys/module/mrpool/devices/<dev>/ (stable,
 * readable without debugfs), else from debugfs mrpool/ib_devices. Columns
 * are the attribute files found, known ones first and "reason" last.
 */
#include "mrpoolctl.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static const char *const ctl_dev_order[] = {
	"node", "state", "chunks", "kbufs", "regs", "invalidations",
	"reg_failures", "wr_timeouts",
};

#define CTL_NR_DEV_ORDER	ARRAY_SIZE(ctl_dev_order)

/* Sort key: known attributes by position, then others, reason last. */
static int ctl_dev_rank(const char *name)
{
	size_t i;

	for (i = 0; i < CTL_NR_DEV_ORDER; i++)
		if (!strcmp(name, ctl_dev_order[i]))
			return (int)i;
	return strcmp(name, "reason") ? (int)CTL_NR_DEV_ORDER :
		(int)CTL_NR_DEV_ORDER + 1;
}

static int ctl_dev_cmp(const void *a, const void *b)
{
	const char *x = *(const char *const *)a, *y = *(const char *const *)b;
	int rx = ctl_dev_rank(x), ry = ctl_dev_rank(y);

	return rx != ry ? rx - ry : strcmp(x, y);
}

/*
 * Union of the attribute names of every device, ordered for display, into
 * @cols[1..] (@cols[0] is "name"). Free with ctl_device_attrs_free().
 */
int ctl_device_attrs(char **devs, size_t ndevs, const char ***cols,
		     size_t *ncols)
{
	char path[CTL_PATH_MAX], **names;
	const char **c = NULL, **nc;
	size_t n = 1, d, i, j, k;
	int ret;

	c = malloc(sizeof(*c));
	if (!c)
		return -ENOMEM;
	c[0] = "name";
	for (d = 0; d < ndevs; d++) {
		ctl_path(path, sizeof(path), CTL_DEVICES "/%s", devs[d]);
		ret = ctl_list_dir(path, &names, &k);
		if (ret) {
			ctl_warn_missing(ret, path);
			continue;
		}
		for (i = 0; i < k; i++) {
			for (j = 1; j < n && strcmp(c[j], names[i]); j++)
				;
			if (j < n)
				continue;
			nc = realloc(c, (n + 1) * sizeof(*c));
			if (!nc) {
				ctl_free_names(names, k);
				free(c);
				return -ENOMEM;
			}
			c = nc;
			/* Column names must outlive @names: strdup'd. */
			c[n] = strdup(names[i]);
			if (!c[n]) {
				ctl_free_names(names, k);
				for (j = 1; j < n; j++)
					free((char *)c[j]);
				free(c);
				return -ENOMEM;
			}
			n++;
		}
		ctl_free_names(names, k);
	}
	qsort(c + 1, n - 1, sizeof(*c), ctl_dev_cmp);
	*cols = c;
	*ncols = n;
	return 0;
}

void ctl_device_attrs_free(const char **cols, size_t ncols)
{
	size_t i;

	for (i = 1; i < ncols; i++)
		free((char *)cols[i]);
	free(cols);
}

static int ctl_devices_sysfs(char **devs, size_t ndevs)
{
	char path[CTL_PATH_MAX], (*vals)[128] = NULL;
	const char **cols = NULL, **row = NULL;
	struct ctl_table t;
	size_t ncols = 0, d, i;
	int ret;

	ret = ctl_device_attrs(devs, ndevs, &cols, &ncols);
	if (ret)
		return ret;
	ret = ctl_table_init(&t, ncols, cols);
	if (ret)
		goto free_cols;
	row = calloc(ncols, sizeof(*row));
	vals = calloc(ncols, sizeof(*vals));
	if (!row || !vals) {
		ret = -ENOMEM;
		goto free_table;
	}
	for (d = 0; d < ndevs; d++) {
		row[0] = devs[d];
		for (i = 1; i < ncols; i++) {
			ctl_path(path, sizeof(path), CTL_DEVICES "/%s/%s",
				 devs[d], cols[i]);
			ret = ctl_read_text(path, vals[i], sizeof(vals[i]));
			/* Unreadable: "?"; readable but empty: "-". */
			if (ret)
				snprintf(vals[i], sizeof(vals[i]), "?");
			row[i] = vals[i];
		}
		ret = ctl_table_add(&t, row);
		if (ret)
			goto free_table;
	}
	ctl_table_print(&t, stdout);
	printf("%zu devices\n", ndevs);
free_table:
	free(vals);
	free(row);
	ctl_table_free(&t);
free_cols:
	ctl_device_attrs_free(cols, ncols);
	return ret;
}

int ctl_cmd_devices(const struct ctl_cmd *cmd, int argc, char **argv)
{
	char path[CTL_PATH_MAX], **devs;
	size_t ndevs;
	int ret;

	ret = ctl_no_args(cmd, argc, argv);
	if (ret)
		return ret;
	ctl_path(path, sizeof(path), CTL_DEVICES);
	ret = ctl_list_dir(path, &devs, &ndevs);
	if (ret == -ENOENT || ret == -ENOTDIR) {
		/* Older or partial module: the debugfs view may still exist. */
		ctl_warn_missing(ret, path);
		return ctl_show_debugfs("ib_devices", "devices", NULL);
	}
	if (ret) {
		ctl_warn_missing(ret, path);
		return CTL_FAIL;
	}
	ret = ctl_devices_sysfs(devs, ndevs);
	ctl_free_names(devs, ndevs);
	if (ret) {
		ctl_errno(ret, "devices");
		return CTL_FAIL;
	}
	return CTL_OK;
}
