// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Size classes: the powers of two 4 KiB..2 MiB and, in a pool opened with
 * MRP_CLASSES_FINE, 5/4, 6/4 and 7/4 of each doubling from 64 KiB to
 * 512 KiB (power-of-two classes waste up to half of scarce pinned memory:
 * 4097 B takes 8 KiB). Indexes are stable and ordered by size; a pool uses
 * the subset its mode and the page size allow, through its own size table
 * (internal.h: mrp_size_class()).
 */
#include "internal.h"

#define K(n)	((size_t)(n) << 10)

const size_t mrp_class_sizes[MRP_NCLASSES] = {
	K(4), K(8), K(16), K(32), K(64),
	K(80), K(96), K(112), K(128),
	K(160), K(192), K(224), K(256),
	K(320), K(384), K(448), K(512),
	K(1024), K(2048),
};

/*
 * Does class cls exist in a pool of this mode on this page size? A fine
 * class is a whole number of its doubling's quarter steps, which must be
 * whole pages: buffers are carved in pages (one is aligned only to the
 * lowest set bit of its size, 80 KiB on 16 KiB). Per doubling, all three
 * or none: 64 KiB pages keep 320..448 KiB only (not 192 KiB either).
 */
bool mrp_class_exists(unsigned int cls, bool fine, size_t page)
{
	size_t size = mrp_class_size(cls);
	size_t step = ((size_t)1 << (__builtin_clzl(size) ^ 63)) >> 2;

	if (!(size & (size - 1)))
		return true;
	return fine && step >= page;
}

/*
 * Fill a pool's size table: entry i serves sizes in (i << MRP_TAB_SHIFT,
 * (i + 1) << MRP_TAB_SHIFT] with the smallest existing class that holds
 * the upper end. Every class from 64 KiB is a multiple of the 16 KiB
 * granule, so no class lies inside an entry's range and the upper end
 * decides for all of it. Entries below 64 KiB are filled alike but unused
 * (the bsr serves those sizes).
 */
void mrp_class_table(uint8_t tab[MRP_TAB_SIZE], bool fine, size_t page)
{
	unsigned int cls = 0;

	for (size_t i = 0; i < MRP_TAB_SIZE; i++) {
		size_t top = (i + 1) << MRP_TAB_SHIFT;

		while (mrp_class_size(cls) < top || !mrp_class_exists(cls, fine, page))
			cls++;
		tab[i] = (uint8_t)cls;
	}
}

/*
 * Fill the allocation fast paths' table (MRP_BIN_TAB_SIZE): entry i serves
 * sizes in (i << MRP_BIN_TAB_SHIFT, (i + 1) << MRP_BIN_TAB_SHIFT] with the
 * bin of mrp_size_class() of the upper end. Every class is a multiple of
 * the smallest one, so no class lies inside an entry's range and the upper
 * end decides for all of it: the same class as mrp_size_class() of any
 * size in it. After mrp_class_table().
 */
void mrp_bin_table(const struct mrp_pool *pool, uint16_t tab[MRP_BIN_TAB_SIZE])
{
	for (size_t i = 0; i < MRP_BIN_TAB_SIZE; i++)
		tab[i] = mrp_bin_off(mrp_size_class(pool, (i + 1) << MRP_BIN_TAB_SHIFT));
}

/*
 * The reciprocal of a class size's odd part k (1, 3, 5 or 7): m =
 * floor(2^64 / k) + 1, so that floor(n / k) = (n * m) >> 64 for every
 * n < 2^64 / k. With e = m * k - 2^64 (1 <= e <= k) and n = q * k + t,
 * n * m / 2^64 = q + t / k + n * e / (k * 2^64), and the last two terms
 * stay below 1 while n * e < 2^64. Arenas are at most 2^40 bytes
 * (options.c), far inside. 0 for a power of two (k = 1): a shift does.
 */
uint64_t mrp_buf_magic(size_t bsize)
{
	uint64_t k = bsize >> __builtin_ctzl(bsize);

	return k == 1 ? 0 : UINT64_MAX / k + 1;
}
