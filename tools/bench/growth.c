// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * mrpool-growth: what a slow arena creation costs the other threads
 * (issue 32 row 5, issue 34). The anon backend, no pool thread, no PD:
 *
 *   lat   one thread makes NBIG large buffers of BIG MiB each (every one a
 *         new arena: mmap and populate, or mlock), the other times pairs
 *         of a 3 MiB mrp_alloc + mrp_free meanwhile (a parked arena after
 *         the first), GAP_US apart; prints the pairs' count, those over
 *         1 ms, the worst.
 *   cold  T threads each take MB MiB of cold pool memory in 256 KiB
 *         buffers (every class arena a growth); prints the wall time.
 *
 * Built against whichever libmrpool.a the Makefile names, so that one
 * source measures the library before and after a change, runs
 * interleaved by the caller. Not installed.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mrpool.h"

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static struct mrp_pool *open_pool(void)
{
	struct mrp_pool_attr a;
	struct mrp_pool *pool;

	memset(&a, 0, sizeof(a));
	a.comp_mask = MRP_POOL_ATTR_BACKEND | MRP_POOL_ATTR_BACKGROUND;
	a.backend = MRP_BACKEND_ANON;
	a.background = 0;
	pool = mrp_pool_open(&a);
	if (!pool) {
		perror("mrp_pool_open");
		exit(1);
	}
	return pool;
}

struct big {
	struct mrp_pool *pool;
	size_t size;
	int n;
	atomic_bool done;
	void **bufs;
};

static void *big_main(void *arg)
{
	struct big *b = arg;
	struct mrp_buf buf;

	for (int i = 0; i < b->n; i++) {
		if (mrp_alloc(b->pool, b->size, NULL, &buf)) {
			fprintf(stderr, "big alloc %d failed\n", i);
			exit(1);
		}
		b->bufs[i] = buf.addr;
	}
	atomic_store(&b->done, true);
	return NULL;
}

static int run_lat(size_t big_mb, int nbig, long gap_us)
{
	struct timespec gap = { 0, gap_us * 1000 };
	struct mrp_pool *pool = open_pool();
	struct big b = { .pool = pool, .size = big_mb << 20, .n = nbig };
	uint64_t n = 0, slow = 0, max = 0, t0, dt, start;
	struct mrp_buf buf;
	pthread_t thr;

	b.bufs = calloc((size_t)nbig, sizeof(void *));
	/* the 3 MiB pair's arena exists before: the pairs reuse it */
	if (!b.bufs || mrp_alloc(pool, 3 << 20, NULL, &buf) || mrp_free(pool, buf.addr))
		return 1;
	start = now_ns();
	pthread_create(&thr, NULL, big_main, &b);
	while (!atomic_load(&b.done)) {
		t0 = now_ns();
		if (mrp_alloc(pool, 3 << 20, NULL, &buf) || mrp_free(pool, buf.addr))
			return 1;
		dt = now_ns() - t0;
		n++;
		slow += dt > 1000000;
		max = dt > max ? dt : max;
		if (gap_us)
			nanosleep(&gap, NULL);	/* the workload's pace, not a measure */
	}
	pthread_join(thr, NULL);
	printf("lat big_mb=%zu nbig=%d wall_ms=%.1f pairs=%llu over_1ms=%llu max_ms=%.2f\n",
	       big_mb, nbig, (now_ns() - start) / 1e6, (unsigned long long)n,
	       (unsigned long long)slow, max / 1e6);
	for (int i = 0; i < nbig; i++)
		mrp_free(pool, b.bufs[i]);
	mrp_pool_close(pool);
	free(b.bufs);
	return 0;
}

struct cold {
	pthread_t thr;
	struct mrp_pool *pool;
	size_t bytes;
	void **bufs;
	size_t n;
};

static void *cold_main(void *arg)
{
	struct cold *c = arg;
	struct mrp_buf buf;

	for (size_t i = 0; i < c->n; i++) {
		if (mrp_alloc(c->pool, 256 << 10, NULL, &buf)) {
			fprintf(stderr, "cold alloc failed\n");
			exit(1);
		}
		c->bufs[i] = buf.addr;
	}
	return NULL;
}

static int run_cold(int threads, size_t mb)
{
	struct mrp_pool *pool = open_pool();
	struct cold c[16];
	struct mrp_stats st;
	uint64_t t0, dt;

	if (threads < 1 || threads > 16)
		return 1;
	for (int t = 0; t < threads; t++) {
		c[t].pool = pool;
		c[t].n = (mb << 20) / (256 << 10);
		c[t].bufs = calloc(c[t].n, sizeof(void *));
		if (!c[t].bufs)
			return 1;
	}
	t0 = now_ns();
	for (int t = 0; t < threads; t++)
		pthread_create(&c[t].thr, NULL, cold_main, &c[t]);
	for (int t = 0; t < threads; t++)
		pthread_join(c[t].thr, NULL);
	dt = now_ns() - t0;
	if (mrp_stats(pool, &st, sizeof(st)))
		return 1;
	/* mapped beyond what was asked: arenas two growers made at once */
	printf("cold threads=%d mb_per_thread=%zu wall_ms=%.1f mb_per_s=%.0f mapped_mb=%llu\n",
	       threads, mb, dt / 1e6, (double)(threads * mb) / (dt / 1e9),
	       (unsigned long long)(st.bytes_mapped >> 20));
	for (int t = 0; t < threads; t++) {
		for (size_t i = 0; i < c[t].n; i++)
			mrp_free(pool, c[t].bufs[i]);
		free(c[t].bufs);
	}
	mrp_pool_close_flags(pool, MRP_CLOSE_FORCE);
	return 0;
}

int main(int argc, char **argv)
{
	if ((argc == 4 || argc == 5) && !strcmp(argv[1], "lat"))
		return run_lat(strtoul(argv[2], NULL, 10), atoi(argv[3]),
			       argc == 5 ? atol(argv[4]) : 0);
	if (argc == 4 && !strcmp(argv[1], "cold"))
		return run_cold(atoi(argv[2]), strtoul(argv[3], NULL, 10));
	fprintf(stderr, "usage: %s lat BIG_MB NBIG [GAP_US] | cold THREADS MB\n", argv[0]);
	return 2;
}
