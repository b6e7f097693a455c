// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * mrpoolctl chunks: debugfs mrpool/chunks as a table (pfn, node, state,
 * owning slice, blocks as order:count), then a count per state.
 */
#include "mrpoolctl.h"

#include <stdlib.h>
#include <string.h>

static void ctl_chunks_summary(const struct ctl_table *t)
{
	int col = ctl_table_col(t, "state");
	const char *seen[16];
	size_t counts[16], nseen = 0, r, i;

	printf("%zu chunks", t->nrows);
	if (col < 0) {
		putchar('\n');
		return;
	}
	/* States in order of first appearance; few exist, so a scan does. */
	for (r = 0; r < t->nrows; r++) {
		const char *s = ctl_table_cell(t, r, (size_t)col);

		for (i = 0; i < nseen && strcmp(seen[i], s); i++)
			;
		if (i == nseen) {
			if (nseen == ARRAY_SIZE(seen))
				continue;
			seen[nseen] = s;
			counts[nseen++] = 0;
		}
		counts[i]++;
	}
	for (i = 0; i < nseen; i++)
		printf("%s %zu %s", i ? "," : ":", counts[i], seen[i]);
	putchar('\n');
}

int ctl_cmd_chunks(const struct ctl_cmd *cmd, int argc, char **argv)
{
	int ret = ctl_no_args(cmd, argc, argv);

	return ret ? ret : ctl_show_debugfs("chunks", "chunks",
					    ctl_chunks_summary);
}
