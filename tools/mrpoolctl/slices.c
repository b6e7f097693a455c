// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * mrpoolctl slices: debugfs mrpool/slices as a table (slice id, owner pid
 * and comm, length, chunks, live mappings, live or freed-but-mapped),
 * then the count and bytes.
 */
#include "mrpoolctl.h"

static void ctl_slices_summary(const struct ctl_table *t)
{
	int col = ctl_table_col(t, "length");
	unsigned long long bytes = 0;
	char human[32];
	long long v;
	size_t r;

	printf("%zu slices", t->nrows);
	if (col >= 0) {
		for (r = 0; r < t->nrows; r++)
			if (ctl_parse_ll(ctl_table_cell(t, r, (size_t)col), &v))
				bytes += (unsigned long long)v;
		printf(", %s", ctl_human(human, sizeof(human), bytes));
	}
	putchar('\n');
}

int ctl_cmd_slices(const struct ctl_cmd *cmd, int argc, char **argv)
{
	int ret = ctl_no_args(cmd, argc, argv);

	return ret ? ret : ctl_show_debugfs("slices", "slices",
					    ctl_slices_summary);
}
