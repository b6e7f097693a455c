// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * For preload_test's dlopen_race: a shared object whose constructor makes
 * a large allocation, so that it reaches the preload shim's pool while
 * dlopen() holds the dynamic linker's lock.
 */
#include <stdlib.h>

__attribute__((constructor)) static void preload_dl_init(void)
{
	char *volatile p = malloc(3 << 20);	/* a large arena of its own */

	if (p)
		p[0] = 1;
	free(p);
}
