// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * mrpoolctl params: every file under /sys/module/mrpool/parameters with
 * its value, whether it can be changed at runtime (its mode has a write
 * bit: root's access() would say yes to all of them) and what it means.
 * The meanings repeat kmod/ABI/sysfs-module-mrpool for known names.
 */
#include "mrpoolctl.h"

#include <string.h>
#include <sys/stat.h>

static const struct {
	const char *name;
	const char *desc;
} ctl_param_desc[] = {
	{ "pool_mb", "MiB allocated at load; the idle trim keeps at least this" },
	{ "max_mb", "MiB the pool may hold at most" },
	{ "chunk_kb", "KiB per chunk" },
	{ "numa_node", "NUMA node of the chunks, -1 automatic" },
	{ "idle_trim_sec", "seconds a free chunk above pool_mb stays, 0 never trims" },
	{ "max_user_mb", "MiB of the pool one user may hold, 0 no cap" },
	{ "pmd_map", "map PMD-sized chunks with huge entries" },
	{ "shmem_chunks", "whole chunks are tmpfs huge folios, pinned by GUP-fast" },
	{ "quarantine_event_pct", "quarantine, % of max_mb, that makes a netlink event, 0 never" },
};

static const char *ctl_param_meaning(const char *name)
{
	size_t i;

	for (i = 0; i < ARRAY_SIZE(ctl_param_desc); i++)
		if (!strcmp(ctl_param_desc[i].name, name))
			return ctl_param_desc[i].desc;
	return "";
}

int ctl_cmd_params(const struct ctl_cmd *cmd, int argc, char **argv)
{
	static const char *const head[] = { "name", "value", "access",
					    "description" };
	char path[CTL_PATH_MAX], value[128], **names;
	const char *row[4];
	struct ctl_table t;
	struct stat st;
	size_t n, i;
	int ret;

	ret = ctl_no_args(cmd, argc, argv);
	if (ret)
		return ret;
	ctl_path(path, sizeof(path), CTL_PARAMS);
	ret = ctl_list_dir(path, &names, &n);
	if (ret) {
		ctl_warn_missing(ret, path);
		return CTL_FAIL;
	}
	ret = ctl_table_init(&t, 4, head);
	for (i = 0; !ret && i < n; i++) {
		ctl_path(path, sizeof(path), CTL_PARAMS "/%s", names[i]);
		if (ctl_read_text(path, value, sizeof(value)))
			snprintf(value, sizeof(value), "?");
		row[0] = names[i];
		row[1] = value;
		row[2] = !stat(path, &st) && (st.st_mode & 0222) ? "rw" : "ro";
		row[3] = ctl_param_meaning(names[i]);
		ret = ctl_table_add(&t, row);
	}
	ctl_free_names(names, n);
	if (ret) {
		ctl_errno(ret, "params");
		ctl_table_free(&t);
		return CTL_FAIL;
	}
	if (ctl_json) {
		ctl_json_obj(NULL);
		ctl_json_table("params", &t);
		ctl_json_obj_end();
	} else {
		ctl_table_print(&t, stdout);
	}
	ctl_table_free(&t);
	return CTL_OK;
}
