// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Messages on stderr, prefixed with the tool's name and ending with the
 * errno text when there is one, and byte counts for humans.
 */
#include "mrpoolctl.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool ctl_quiet;

static void ctl_vmsg(int err, const char *fmt, va_list ap)
{
	fprintf(stderr, "%s: ", ctl_prog);
	vfprintf(stderr, fmt, ap);
	if (err)
		fprintf(stderr, ": %s", strerror(err));
	fputc('\n', stderr);
}

void ctl_err(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	ctl_vmsg(0, fmt, ap);
	va_end(ap);
}

/* @err is a positive or negative errno value. */
void ctl_errno(int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	ctl_vmsg(err < 0 ? -err : err, fmt, ap);
	va_end(ap);
}

/* Is debugfs mounted on /sys/kernel/debug (of the root prefix)? */
static bool ctl_debugfs_mounted(void)
{
	char line[512], dir[256], type[64];
	bool found = false;
	FILE *f;

	/* A fabricated root (MRPOOLCTL_ROOT) has no mount table of its own. */
	if (getenv("MRPOOLCTL_ROOT"))
		return ctl_exists("/sys/kernel/debug/mrpool");
	f = fopen("/proc/self/mounts", "re");
	if (!f)
		return true;	/* cannot tell: say nothing about it */
	while (!found && fgets(line, sizeof(line), f))
		found = sscanf(line, "%*s %255s %63s", dir, type) == 2 &&
			!strcmp(dir, "/sys/kernel/debug") &&
			!strcmp(type, "debugfs");
	fclose(f);
	return found;
}

/*
 * The one place that explains a failure to reach the module: @what (a
 * path, or "netlink family mrpool") could not be read or used, with
 * error @err (positive or negative errno). The hint names the usual
 * causes: module not loaded, debugfs not mounted, not root.
 */
void ctl_warn_missing(int err, const char *what)
{
	bool debug = strstr(what, "/debug/") != NULL;
	const char *hint = "";

	if (err < 0)
		err = -err;
	if (ctl_quiet)
		return;
	if ((err == ENOENT || err == ENODEV) && !ctl_exists(CTL_MODULE))
		hint = " (the mrpool module is not loaded: modprobe mrpool)";
	else if (err == ENOENT && debug && !ctl_debugfs_mounted())
		hint = " (debugfs is not mounted: mount -t debugfs none /sys/kernel/debug)";
	else if (err == ENOENT && strstr(what, "netlink"))
		hint = " (the loaded module predates netlink support)";
	else if ((err == EACCES || err == EPERM) && debug)
		hint = " (debugfs is readable by root only: run as root)";
	else if (err == EACCES || err == EPERM)
		hint = " (permission denied: run as root, or as a member of the group owning /dev/mrpool)";
	fprintf(stderr, "%s: %s: %s%s\n", ctl_prog, what, strerror(err), hint);
}

/* "2 MiB", "1.5 GiB", "512 B": binary units, one decimal when inexact. */
const char *ctl_human(char *buf, size_t len, unsigned long long bytes)
{
	static const char *const units[] = { "B", "KiB", "MiB", "GiB",
					     "TiB", "PiB", "EiB" };
	unsigned long long whole = bytes, unit = 1;
	unsigned int u = 0;

	while (whole >= 1024 && u + 1 < ARRAY_SIZE(units)) {
		whole /= 1024;
		unit *= 1024;
		u++;
	}
	if (bytes % unit == 0)
		snprintf(buf, len, "%llu %s", whole, units[u]);
	else
		snprintf(buf, len, "%.1f %s", (double)bytes / (double)unit,
			 units[u]);
	return buf;
}
