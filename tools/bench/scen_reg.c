// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Scenario "reg": what one ibv_reg_mr and one ibv_dereg_mr cost by size,
 * from 4 KiB up to --max-size, for four kinds of memory:
 *   fresh malloc   memory as malloc returns it, never touched: the pin
 *                  faults and zeroes every page (sizes from 128 KiB up are
 *                  fresh mmaps: the mmap threshold is pinned there);
 *   THP anon       anonymous memory, THP aligned, MADV_HUGEPAGE,
 *                  prefaulted, registered again each round;
 *   THP shmem      a memfd mapped shared, THP aligned, MADV_HUGEPAGE
 *                  (huge where shmem_enabled allows it: the bench guest
 *                  sets advise), prefaulted: shmem folios, which GUP-fast
 *                  pins on 6.5+, as pool chunks are with shmem_chunks=Y;
 *   pool slice     a libmrpool buffer of that size (a pool without a PD:
 *                  nothing registered by the library), registered here.
 * The timing and the THP memory are librdmatest's (rdt_reg_time(),
 * rdt_thp_map()), as in selftests/pool_regcost_test. CSV on stdout:
 * medians and minima.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"
#include "mrpool.h"
#include "rdmatest.h"

#define ROUNDS_MAX	5

/* Powers of four, the 2 MiB chunk size, then every doubling to 1 GiB. */
static const size_t sizes[] = {
	4 * KIB, 16 * KIB, 64 * KIB, 256 * KIB, 1 * MIB, 2 * MIB, 8 * MIB,
	32 * MIB, 64 * MIB, 128 * MIB, 256 * MIB, 512 * MIB, 1024 * MIB,
};

enum kind { FRESH, ANON, SHMEM, SLICE, KINDS };
static const char *const kind_name[KINDS] = { "fresh malloc", "THP anon", "THP shmem",
					      "pool slice" };

struct cell {
	uint64_t reg[ROUNDS_MAX], dereg[ROUNDS_MAX];
	int n;
	int err;
};

static uint64_t med(uint64_t *v, int n)
{
	struct samples s = { .ns = v, .n = (size_t)n, .cap = (size_t)n };

	return samples_pct(&s, 50);
}

static uint64_t lowest(const uint64_t *v, int n)
{
	uint64_t m = UINT64_MAX;

	for (int i = 0; i < n; i++)
		m = v[i] < m ? v[i] : m;
	return n ? m : 0;
}

static void run_size(struct ibv_pd *pd, struct mrp_pool *pool, size_t size,
		     struct cell *c)
{
	int rounds = size >= 64 * MIB ? 3 : ROUNDS_MAX;
	void *fresh[ROUNDS_MAX] = { NULL };
	struct rdt_thp anon, shm;
	struct mrp_buf b = { 0 };
	int ret;

	memset(c, 0, KINDS * sizeof(*c));
	c[ANON].err = rdt_thp_map(&anon, size, false);
	c[SHMEM].err = rdt_thp_map(&shm, size, true);
	ret = mrp_alloc(pool, size, NULL, &b);
	c[SLICE].err = ret;
	if (!ret)
		memset(b.addr, 1, size);
	for (int r = 0; r < rounds; r++) {
		/* kept until all rounds are done: each round gets new memory */
		fresh[r] = malloc(size);
		if (!fresh[r])
			c[FRESH].err = -ENOMEM;
		if (!c[FRESH].err)
			c[FRESH].err = rdt_reg_time(pd, fresh[r], size, &c[FRESH].reg[r],
						    &c[FRESH].dereg[r]);
		if (!c[ANON].err)
			c[ANON].err = rdt_reg_time(pd, anon.addr, size, &c[ANON].reg[r],
						   &c[ANON].dereg[r]);
		if (!c[SHMEM].err)
			c[SHMEM].err = rdt_reg_time(pd, shm.addr, size, &c[SHMEM].reg[r],
						    &c[SHMEM].dereg[r]);
		if (!c[SLICE].err)
			c[SLICE].err = rdt_reg_time(pd, b.addr, size, &c[SLICE].reg[r],
						    &c[SLICE].dereg[r]);
		for (int k = 0; k < KINDS; k++)
			if (!c[k].err)
				c[k].n = r + 1;
		/* the largest sizes: give fresh memory back at once */
		if (size >= 64 * MIB) {
			free(fresh[r]);
			fresh[r] = NULL;
		}
	}
	for (int r = 0; r < rounds; r++)
		free(fresh[r]);
	rdt_thp_unmap(&anon);
	rdt_thp_unmap(&shm);
	if (b.addr)
		mrp_free(pool, b.addr);
}

int scen_reg(const struct bench_env *env, size_t max_size)
{
	struct mrp_pool *pool;
	struct mrp_stats st;
	int ret = 0;

	/* fresh mmaps from here up, whatever was freed before */
	mallopt(M_MMAP_THRESHOLD, 128 * 1024);
	pool = mrp_pool_open(NULL);
	if (!pool) {
		fprintf(stderr, "reg: mrp_pool_open: %s\n", mrp_strerror(errno));
		return 1;
	}
	mrp_stats(pool, &st, sizeof(st));
	printf("scenario,memory,size,rounds,reg_p50_us,reg_min_us,dereg_p50_us,dereg_min_us,status\n");
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]) && sizes[i] <= max_size; i++) {
		size_t size = sizes[i];
		struct cell c[KINDS];

		run_size(env->pd, pool, size, c);
		for (int k = 0; k < KINDS; k++) {
			if (c[k].err)
				ret = 1;
			printf("reg,%s%s,%zu,%d,%.1f,%.1f,%.1f,%.1f,%s%s\n", kind_name[k],
			       k == SLICE && st.backend != MRP_KIND_KERNEL ? " (anon backend)" : "",
			       size, c[k].n, (double)med(c[k].reg, c[k].n) / 1e3,
			       (double)lowest(c[k].reg, c[k].n) / 1e3,
			       (double)med(c[k].dereg, c[k].n) / 1e3,
			       (double)lowest(c[k].dereg, c[k].n) / 1e3,
			       c[k].err ? "error: " : "ok",
			       c[k].err ? strerror(-c[k].err) : "");
		}
		fflush(stdout);
	}
	mrp_pool_close(pool);
	return ret;
}
