// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * mrpoolctl devices: the RDMA devices mrpool's ib_client was given and the
 * kernel MR cache on each, from /sys/module/mrpool/devices/<dev>/ (stable,
 * readable without debugfs), else from debugfs mrpool/ib_devices. Columns
 * are the attribute files found, known ones first and "reason" last,
 * joined with the RDMA subsystem's view of each port (rdma.c: state,
 * physical state, link layer, netdev, as `rdma link` shows them): one
 * row per port. JSON: {"devices": [{name, attributes, "ports": [...]}],
 * "count": N}, "ports" null when RDMA netlink could not be read.
 */
#include "mrpoolctl.h"
#include "nl.h"

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

/* The RDMA columns, placed before "reason" (free text, printed last). */
static const char *const ctl_rdma_cols[] = {
	"port", "link_state", "phys_state", "link_layer", "netdev",
};

#define CTL_NR_RDMA_COLS	ARRAY_SIZE(ctl_rdma_cols)

/*
 * The RDMA subsystem's ports, unless the tool reads a fabricated tree
 * (MRPOOLCTL_ROOT): the live RDMA view is another machine's then.
 */
static bool ctl_devices_rdma(struct ctl_rdma_port **ports, size_t *nports)
{
	int ret;

	*ports = NULL;
	*nports = 0;
	if (getenv("MRPOOLCTL_ROOT"))
		return false;
	ret = ctl_rdma_ports(ports, nports);
	if (ret) {
		ctl_warn_missing(ret, "RDMA netlink (NETLINK_RDMA)");
		return false;
	}
	return true;
}

static void ctl_devices_json_port(const struct ctl_rdma_port *p)
{
	ctl_json_obj(NULL);
	ctl_json_uint("port", p->port);
	ctl_json_str("link_state", p->state);
	ctl_json_str("phys_state", p->phys_state);
	ctl_json_str("link_layer", p->link_layer);
	ctl_json_str("protocol", p->protocol[0] ? p->protocol : NULL);
	ctl_json_str("netdev", p->netdev[0] ? p->netdev : NULL);
	ctl_json_obj_end();
}

/* Each device's attributes; "ports" from RDMA netlink, null without it. */
static int ctl_devices_json(char **devs, size_t ndevs, const char **cols,
			    size_t ncols, const struct ctl_rdma_port *ports,
			    size_t nports, bool have_rdma)
{
	char path[CTL_PATH_MAX], val[128];
	size_t d, i;

	ctl_json_obj(NULL);
	ctl_json_arr("devices");
	for (d = 0; d < ndevs; d++) {
		ctl_json_obj(NULL);
		ctl_json_str("name", devs[d]);
		for (i = 1; i < ncols; i++) {
			ctl_path(path, sizeof(path), CTL_DEVICES "/%s/%s",
				 devs[d], cols[i]);
			if (ctl_read_text(path, val, sizeof(val)))
				ctl_json_null(cols[i]);
			else
				ctl_json_cell(cols[i], val[0] ? val : NULL);
		}
		if (have_rdma) {
			ctl_json_arr("ports");
			for (i = 0; i < nports; i++)
				if (!strcmp(ports[i].dev, devs[d]))
					ctl_devices_json_port(&ports[i]);
			ctl_json_arr_end();
		} else {
			ctl_json_null("ports");
		}
		ctl_json_obj_end();
	}
	ctl_json_arr_end();
	ctl_json_uint("count", ndevs);
	ctl_json_obj_end();
	return 0;
}

/* One row of @t per port of @dev (one without port columns if none). */
static int ctl_devices_rows(struct ctl_table *t, const char **row,
			    size_t rcol, const char *dev,
			    const struct ctl_rdma_port *ports, size_t nports,
			    bool have_rdma)
{
	char port[16];
	bool any = false;
	size_t i, c;
	int ret;

	for (i = 0; have_rdma && i < nports; i++) {
		if (strcmp(ports[i].dev, dev))
			continue;
		snprintf(port, sizeof(port), "%u", ports[i].port);
		row[rcol] = port;
		row[rcol + 1] = ports[i].state;
		row[rcol + 2] = ports[i].phys_state;
		row[rcol + 3] = ports[i].link_layer;
		row[rcol + 4] = ports[i].netdev;
		ret = ctl_table_add(t, row);
		if (ret)
			return ret;
		any = true;
	}
	if (any)
		return 0;
	for (c = 0; have_rdma && c < CTL_NR_RDMA_COLS; c++)
		row[rcol + c] = NULL;
	return ctl_table_add(t, row);
}

static int ctl_devices_sysfs(char **devs, size_t ndevs)
{
	char path[CTL_PATH_MAX], (*vals)[128] = NULL;
	const char **cols = NULL, **row = NULL, **head = NULL;
	struct ctl_rdma_port *ports;
	size_t ncols = 0, nports, nhead, rcol, d, i, c;
	struct ctl_table t = { 0 };
	bool have_rdma;
	int ret;

	ret = ctl_device_attrs(devs, ndevs, &cols, &ncols);
	if (ret)
		return ret;
	have_rdma = ctl_devices_rdma(&ports, &nports);
	if (ctl_json) {
		ret = ctl_devices_json(devs, ndevs, cols, ncols, ports, nports,
				       have_rdma);
		goto free_cols;
	}
	/* Module columns up to "reason", the RDMA ones, then "reason". */
	rcol = ncols;
	if (ncols > 1 && !strcmp(cols[ncols - 1], "reason"))
		rcol = ncols - 1;
	nhead = ncols + (have_rdma ? CTL_NR_RDMA_COLS : 0);
	head = calloc(nhead, sizeof(*head));
	row = calloc(nhead, sizeof(*row));
	vals = calloc(ncols, sizeof(*vals));
	if (!head || !row || !vals) {
		ret = -ENOMEM;
		goto free_cols;
	}
	for (i = 0, c = 0; i < ncols; i++) {
		if (i == rcol && have_rdma)
			for (d = 0; d < CTL_NR_RDMA_COLS; d++)
				head[c++] = ctl_rdma_cols[d];
		head[c++] = cols[i];
	}
	if (rcol == ncols && have_rdma)
		for (d = 0; d < CTL_NR_RDMA_COLS; d++)
			head[c++] = ctl_rdma_cols[d];
	ret = ctl_table_init(&t, nhead, head);
	if (ret)
		goto free_cols;
	for (d = 0; d < ndevs; d++) {
		row[0] = devs[d];
		for (i = 1; i < ncols; i++) {
			ctl_path(path, sizeof(path), CTL_DEVICES "/%s/%s",
				 devs[d], cols[i]);
			ret = ctl_read_text(path, vals[i], sizeof(vals[i]));
			/* Unreadable: "?"; readable but empty: "-". */
			if (ret)
				snprintf(vals[i], sizeof(vals[i]), "?");
			/* Past the RDMA columns when "reason" follows them. */
			row[i < rcol || !have_rdma ? i : i + CTL_NR_RDMA_COLS] =
				vals[i];
		}
		ret = ctl_devices_rows(&t, row, rcol, devs[d], ports, nports,
				       have_rdma);
		if (ret)
			goto free_table;
	}
	ctl_table_print(&t, stdout);
	printf("%zu devices\n", ndevs);
free_table:
	ctl_table_free(&t);
free_cols:
	free(vals);
	free(row);
	free(head);
	free(ports);
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
