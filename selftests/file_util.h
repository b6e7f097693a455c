/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Reading the output files of outside programs the selftests run.
 */
#ifndef MRPOOL_SELFTESTS_FILE_UTIL_H
#define MRPOOL_SELFTESTS_FILE_UTIL_H

#include <stdio.h>
#include <stdlib.h>

/*
 * The first MiB of @path as a NUL-terminated string, malloc()ed (the
 * caller frees it); empty if @path cannot be opened; NULL without memory.
 */
static inline char *file_slurp(const char *path)
{
	FILE *f = fopen(path, "r");
	size_t cap = 1 << 20, n = 0;
	char *buf = malloc(cap + 1);

	if (!buf) {
		if (f)
			fclose(f);
		return NULL;
	}
	if (f) {
		n = fread(buf, 1, cap, f);
		fclose(f);
	}
	buf[n] = 0;
	return buf;
}

#endif /* MRPOOL_SELFTESTS_FILE_UTIL_H */
