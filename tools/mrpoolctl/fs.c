// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Reading sysfs, debugfs and module parameters. Every path is built by
 * ctl_path() so that MRPOOLCTL_ROOT can point the tool at a copied or
 * fabricated tree (tests, or inspecting a saved snapshot). Errors are
 * returned as -errno; nothing here prints.
 */
#include "mrpoolctl.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* @fmt names a path from "/": the root prefix is put in front of it. */
const char *ctl_path(char *buf, size_t len, const char *fmt, ...)
{
	const char *root = getenv("MRPOOLCTL_ROOT");
	va_list ap;
	int n;

	n = snprintf(buf, len, "%s", root ? root : "");
	if (n < 0 || (size_t)n >= len)
		n = 0;
	va_start(ap, fmt);
	vsnprintf(buf + n, len - n, fmt, ap);
	va_end(ap);
	return buf;
}

bool ctl_exists(const char *path)
{
	char full[CTL_PATH_MAX];

	return !access(ctl_path(full, sizeof(full), "%s", path), F_OK);
}

/* Whole contents (truncated to @len - 1) without the trailing newline. */
int ctl_read_text(const char *path, char *buf, size_t len)
{
	size_t got = 0;
	ssize_t n;
	int fd;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	while (got + 1 < len) {
		n = read(fd, buf + got, len - 1 - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			n = -errno;
			close(fd);
			return (int)n;
		}
		if (!n)
			break;
		got += (size_t)n;
	}
	close(fd);
	buf[got] = '\0';
	while (got && (buf[got - 1] == '\n' || buf[got - 1] == ' '))
		buf[--got] = '\0';
	return 0;
}

/* A whole decimal or 0x number, optionally signed, nothing after it. */
bool ctl_parse_ll(const char *text, long long *val)
{
	char *end;

	if (!*text)
		return false;
	errno = 0;
	*val = strtoll(text, &end, 0);
	if (errno == ERANGE && *text != '-') {
		/* sysfs prints unsigned 64-bit counters: keep the bits. */
		errno = 0;
		*val = (long long)strtoull(text, &end, 0);
	}
	return !errno && !*end;
}

int ctl_read_ll(const char *path, long long *val)
{
	char buf[64];
	int ret;

	ret = ctl_read_text(path, buf, sizeof(buf));
	if (ret)
		return ret;
	return ctl_parse_ll(buf, val) ? 0 : -EINVAL;
}

static int ctl_cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Entries of a directory except "." and "..", sorted; free with below. */
int ctl_list_dir(const char *path, char ***names, size_t *count)
{
	char **v = NULL, **nv;
	size_t n = 0, cap = 0;
	struct dirent *de;
	DIR *d;
	int ret = 0;

	d = opendir(path);
	if (!d)
		return -errno;
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (n == cap) {
			cap = cap ? 2 * cap : 16;
			nv = realloc(v, cap * sizeof(*v));
			if (!nv) {
				ret = -ENOMEM;
				break;
			}
			v = nv;
		}
		v[n] = strdup(de->d_name);
		if (!v[n]) {
			ret = -ENOMEM;
			break;
		}
		n++;
	}
	closedir(d);
	if (ret) {
		ctl_free_names(v, n);
		return ret;
	}
	if (n)
		qsort(v, n, sizeof(*v), ctl_cmp_names);
	*names = v;
	*count = n;
	return 0;
}

void ctl_free_names(char **names, size_t count)
{
	size_t i;

	for (i = 0; i < count; i++)
		free(names[i]);
	free(names);
}
