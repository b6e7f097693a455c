// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Messages on stderr, prefixed with the tool's name and ending with the
 * errno text when there is one, and byte counts for humans.
 */
#include "mrpoolctl.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

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

/* A source that could not be read, with a hint for the usual causes. */
void ctl_warn_missing(int err, const char *path)
{
	const char *hint = "";

	if (err < 0)
		err = -err;
	if (err == ENOENT && !ctl_exists(CTL_MODULE))
		hint = " (is the mrpool module loaded?)";
	else if (err == ENOENT && strstr(path, "/debug/") &&
		 !ctl_exists("/sys/kernel/debug/mrpool"))
		hint = " (is debugfs mounted on /sys/kernel/debug?)";
	else if (err == EACCES || err == EPERM)
		hint = " (run as root)";
	fprintf(stderr, "%s: %s: %s%s\n", ctl_prog, path, strerror(err), hint);
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
