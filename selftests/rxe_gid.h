/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* The GID index outside programs (perftest, pyverbs) are given on rxe0. */
#ifndef RXE_GID_H
#define RXE_GID_H

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

/* The RoCE v2 GID index of rxe0 port 1 whose GID is an IPv4 address. */
static inline int roce_v2_gid(void)
{
	char path[128], buf[128];

	for (int i = 0; i < 16; i++) {
		FILE *f;
		bool v2 = false, v4 = false;

		snprintf(path, sizeof(path),
			 "/sys/class/infiniband/rxe0/ports/1/gid_attrs/types/%d", i);
		f = fopen(path, "r");
		if (f) {
			v2 = fgets(buf, sizeof(buf), f) && strstr(buf, "RoCE v2");
			fclose(f);
		}
		snprintf(path, sizeof(path), "/sys/class/infiniband/rxe0/ports/1/gids/%d", i);
		f = fopen(path, "r");
		if (f) {
			v4 = fgets(buf, sizeof(buf), f) &&
			     !strncmp(buf, "0000:0000:0000:0000:0000:ffff:", 30);
			fclose(f);
		}
		if (v2 && v4)
			return i;
	}
	return -1;
}

#endif /* RXE_GID_H */
