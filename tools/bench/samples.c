// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Latency samples of one measurement and their percentiles. A full buffer
 * keeps its first samples: every measurement is time-bounded, so the cap
 * only matters for the fastest peers, whose later samples look the same.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

int samples_init(struct samples *s, size_t cap)
{
	s->ns = calloc(cap, sizeof(*s->ns));
	s->n = 0;
	s->cap = s->ns ? cap : 0;
	return s->ns ? 0 : -ENOMEM;
}

void samples_add(struct samples *s, uint64_t ns)
{
	if (s->n < s->cap)
		s->ns[s->n++] = ns;
}

void samples_merge(struct samples *to, const struct samples *from)
{
	size_t k = from->n;

	if (k > to->cap - to->n)
		k = to->cap - to->n;
	memcpy(to->ns + to->n, from->ns, k * sizeof(*to->ns));
	to->n += k;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

uint64_t samples_pct(struct samples *s, double pct)
{
	size_t i;

	if (!s->n)
		return 0;
	qsort(s->ns, s->n, sizeof(*s->ns), cmp_u64);
	i = (size_t)(pct / 100.0 * (double)(s->n - 1) + 0.5);
	return s->ns[i < s->n ? i : s->n - 1];
}

void samples_free(struct samples *s)
{
	free(s->ns);
	s->ns = NULL;
	s->n = s->cap = 0;
}
