// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * The byte pattern the tests write and check: it differs per seed and per
 * 512-byte block, so a misplaced page or a stale buffer does not compare
 * equal.
 */
#include "rdmatest.h"

static unsigned char rdt_pattern_byte(size_t i, unsigned int seed)
{
	return (unsigned char)(i * 131 + seed + (i >> 9));
}

void rdt_pattern_fill(void *buf, size_t len, unsigned int seed)
{
	unsigned char *p = buf;

	for (size_t i = 0; i < len; i++)
		p[i] = rdt_pattern_byte(i, seed);
}

bool rdt_pattern_same(const void *buf, size_t len, unsigned int seed)
{
	const unsigned char *p = buf;

	for (size_t i = 0; i < len; i++)
		if (p[i] != rdt_pattern_byte(i, seed))
			return false;
	return true;
}
