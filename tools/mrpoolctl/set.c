// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * mrpoolctl set NAME VALUE: write a module parameter that is writable at
 * runtime. The module validates the value (its setters return -EINVAL for
 * out-of-range values); this only refuses names that are not parameters
 * and parameters that are fixed at load, with a message saying so.
 */
#include "mrpoolctl.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int ctl_write(const char *path, const char *value)
{
	size_t len = strlen(value);
	ssize_t n;
	int fd, ret = 0;

	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	/* sysfs takes a store in one write(); a short one is a failure. */
	do {
		n = write(fd, value, len);
	} while (n < 0 && errno == EINTR);
	if (n < 0)
		ret = -errno;
	else if ((size_t)n != len)
		ret = -EIO;
	if (close(fd) && !ret)
		ret = -errno;
	return ret;
}

int ctl_cmd_set(const struct ctl_cmd *cmd, int argc, char **argv)
{
	char path[CTL_PATH_MAX], before[128], after[128];
	const char *name, *value;
	struct stat st;
	int ret;

	if (argc != 3)
		return ctl_usage_error(cmd, "expected NAME VALUE");
	name = argv[1];
	value = argv[2];
	if (!name[0] || strchr(name, '/') || !strcmp(name, ".") ||
	    !strcmp(name, "..")) {
		ctl_err("'%s' is not a parameter name", name);
		return CTL_FAIL;
	}
	if (!value[0]) {
		ctl_err("%s: empty value", name);
		return CTL_FAIL;
	}

	ctl_path(path, sizeof(path), CTL_PARAMS "/%s", name);
	if (stat(path, &st)) {
		ret = errno;
		if (ret == ENOENT && ctl_exists(CTL_PARAMS))
			ctl_err("%s: no such parameter (see '%s params')",
				name, ctl_prog);
		else
			ctl_warn_missing(ret, path);
		return CTL_FAIL;
	}
	if (!S_ISREG(st.st_mode)) {
		ctl_err("%s: not a parameter file", path);
		return CTL_FAIL;
	}
	if (!(st.st_mode & 0222)) {
		ctl_err("%s: read-only, fixed when the module is loaded (modprobe mrpool %s=%s)",
			name, name, value);
		return CTL_FAIL;
	}

	if (ctl_read_text(path, before, sizeof(before)))
		snprintf(before, sizeof(before), "?");
	ret = ctl_write(path, value);
	if (ret) {
		ctl_errno(ret, "set %s=%s", name, value);
		return CTL_FAIL;
	}
	if (ctl_read_text(path, after, sizeof(after)))
		snprintf(after, sizeof(after), "?");
	if (ctl_json) {
		ctl_json_obj(NULL);
		ctl_json_str("name", name);
		ctl_json_cell("old", before);
		ctl_json_cell("new", after);
		ctl_json_obj_end();
	} else {
		printf("%s: %s -> %s\n", name, before, after);
	}
	return CTL_OK;
}
