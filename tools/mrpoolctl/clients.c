// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * mrpoolctl clients: debugfs mrpool/clients as a table, one row per open
 * file of /dev/mrpool (pid and comm of the opener, slices, bytes held),
 * with the counters its process's libmrpool publishes in the file's stats
 * page ("-" for a client that publishes none), then totals: how many
 * publish, their allocations and thread-cache hit rate, fallbacks, bytes
 * in use, and the registrations libmrpool-preload served from the pool
 * (mr_served) or passed on (mr_passed). Columns a module does not have are
 * simply not summed.
 */
#include "mrpoolctl.h"

#include <limits.h>

/* Sum of a numeric column over the rows that publish; -1 if absent. */
static long long ctl_clients_sum(const struct ctl_table *t, const char *name,
				 size_t *nrows)
{
	int col = ctl_table_col(t, name);
	unsigned long long sum = 0;
	long long v;
	size_t r, n = 0;

	if (col < 0)
		return -1;
	for (r = 0; r < t->nrows; r++)
		if (ctl_parse_ll(ctl_table_cell(t, r, (size_t)col), &v) && v >= 0) {
			sum += (unsigned long long)v;
			n++;
		}
	if (nrows)
		*nrows = n;
	return sum > (unsigned long long)LLONG_MAX ? LLONG_MAX : (long long)sum;
}

static void ctl_clients_summary(const struct ctl_table *t)
{
	long long allocs, hits, misses, fb, in_use, served, passed;
	size_t publishing = 0;
	char human[32];

	printf("%zu clients", t->nrows);
	allocs = ctl_clients_sum(t, "allocs", &publishing);
	hits = ctl_clients_sum(t, "tc_hits", NULL);
	misses = ctl_clients_sum(t, "tc_misses", NULL);
	fb = ctl_clients_sum(t, "fallbacks", NULL);
	in_use = ctl_clients_sum(t, "in_use", NULL);
	served = ctl_clients_sum(t, "mr_served", NULL);
	passed = ctl_clients_sum(t, "mr_passed", NULL);
	if (allocs < 0 || !publishing) {
		putchar('\n');
		return;
	}
	printf(", %zu publishing: %lld allocs", publishing, allocs);
	if (hits >= 0 && misses >= 0 && (hits || misses))
		printf(", %.1f%% thread-cache hits",
		       100.0 * (double)hits / ((double)hits + (double)misses));
	if (fb >= 0)
		printf(", %lld fallbacks", fb);
	if (in_use >= 0)
		printf(", %s in use", ctl_human(human, sizeof(human),
						(unsigned long long)in_use));
	if (served > 0 || passed > 0)
		printf(", preload: %lld registrations served from the pool, %lld passed on",
		       served > 0 ? served : 0, passed > 0 ? passed : 0);
	putchar('\n');
}

int ctl_cmd_clients(const struct ctl_cmd *cmd, int argc, char **argv)
{
	int ret = ctl_no_args(cmd, argc, argv);

	return ret ? ret : ctl_show_debugfs("clients", "clients",
					    ctl_clients_summary);
}
