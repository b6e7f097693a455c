// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Demo flow 2, the library: a pool on the kernel backend, attached once to
 * the loop's PD, hands out buffers that already carry their lkey and rkey.
 * The same transfer runs over them, then the reason the pool exists: the
 * cost of a small RDMA-ready buffer from the pool against malloc plus
 * ibv_reg_mr per buffer.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "demo.h"
#include "mrpool.h"

enum { SRC, DST, BACK, NBUFS };

static const char *const names[NBUFS] = { "src", "dst", "back" };

#define SMALL		(8 * 1024)
#define REG_ITERS	200

static void print_stats(struct mrp_pool *pool)
{
	struct mrp_stats st;

	if (mrp_stats(pool, &st, sizeof(st)))
		return;
	printf("  stats   backend %s, arenas %" PRIu64 " (%" PRIu64 " KiB mapped), in use %" PRIu64 " KiB\n",
	       st.backend == MRP_KIND_KERNEL ? "kernel" : "anon", st.arenas,
	       st.bytes_mapped >> 10, st.bytes_in_use >> 10);
	printf("  stats   allocs %" PRIu64 ", frees %" PRIu64 ", thread-cache hits %" PRIu64 ", misses %" PRIu64 ", fallbacks %" PRIu64 "\n",
	       st.allocs, st.frees, st.tcache_hits, st.tcache_misses,
	       st.fallbacks);
	printf("  stats   registrations %" PRIu64 ": %.1f us total, %.1f us worst\n",
	       st.registrations, demo_us(st.reg_ns_total),
	       demo_us(st.reg_ns_max));
}

/* Two small buffers carved from one arena: their keys carry a WRITE. */
static int small_write(struct mrp_pool *pool, struct rdt_loop *lp,
		       struct ibv_pd *pd)
{
	struct mrp_buf a, b;
	int ret, st = IBV_WC_SUCCESS;

	ret = mrp_alloc(pool, SMALL, pd, &a);
	if (ret)
		return ret;
	ret = mrp_alloc(pool, SMALL, pd, &b);
	if (ret)
		goto free_a;
	memset(a.addr, 0xa5, SMALL);
	memset(b.addr, 0, SMALL);
	ret = rdt_write(lp, a.addr, a.lkey, (uintptr_t)b.addr, b.rkey, SMALL,
			&st);
	if (ret)
		fprintf(stderr, "mrpool-demo: 8 KiB WRITE: %s (wc status %s)\n",
			strerror(-ret), ibv_wc_status_str(st));
	else if (memcmp(a.addr, b.addr, SMALL))
		ret = -EBADMSG;
	if (!ret)
		printf("  small   8 KiB WRITE between two pool buffers (lkey 0x%08x -> rkey 0x%08x): identical\n",
		       a.lkey, b.rkey);
	mrp_free(pool, b.addr);
free_a:
	mrp_free(pool, a.addr);
	return ret;
}

/* Per-buffer cost: pool alloc+free against malloc+reg+dereg+free. */
static int small_race(struct mrp_pool *pool, struct rdt_dev *dev, int iters)
{
	uint64_t t0, pool_ns, reg_ns;
	struct mrp_buf b;
	struct ibv_mr *mr;
	int i, ret;
	void *p;

	/* One round first: the class's arena is mapped and registered once. */
	ret = mrp_alloc(pool, SMALL, dev->pd, &b);
	if (ret)
		return ret;
	mrp_free(pool, b.addr);
	t0 = rdt_now_ns();
	for (i = 0; i < iters; i++) {
		ret = mrp_alloc(pool, SMALL, dev->pd, &b);
		if (ret)
			return ret;
		mrp_free(pool, b.addr);
	}
	pool_ns = (rdt_now_ns() - t0) / iters;

	t0 = rdt_now_ns();
	for (i = 0; i < REG_ITERS; i++) {
		p = malloc(SMALL);
		if (!p)
			return -ENOMEM;
		memset(p, 0, SMALL);
		mr = ibv_reg_mr(dev->pd, p, SMALL, RDT_ACCESS_ALL);
		if (!mr) {
			ret = -errno;
			free(p);
			return ret;
		}
		ibv_dereg_mr(mr);
		free(p);
	}
	reg_ns = (rdt_now_ns() - t0) / REG_ITERS;
	printf("  small   8 KiB RDMA-ready buffer: pool alloc+free %.2f us/op (%d ops), malloc+reg_mr+dereg_mr+free %.1f us/op (%d ops): %.0fx\n",
	       demo_us(pool_ns), iters, demo_us(reg_ns), REG_ITERS,
	       pool_ns ? (double)reg_ns / pool_ns : 0.0);
	return 0;
}

int demo_flow_lib(const struct demo_opts *o, struct rdt_dev *dev,
		  struct rdt_loop *lp, size_t chunk_size)
{
	struct mrp_pool_attr attr = {
		.comp_mask = MRP_POOL_ATTR_BACKEND | MRP_POOL_ATTR_BACKGROUND,
		.backend = MRP_BACKEND_KERNEL,
		.background = 0,	/* every arena comes from a call we time */
	};
	size_t len = o->len ? o->len : 2 * chunk_size;
	struct demo_buf b[NBUFS] = { 0 };
	struct mrp_pool *pool;
	struct mrp_buf mb;
	uint64_t t0;
	int i, ret;

	printf("== flow 2: libmrpool (buffers that carry their keys)\n");
	t0 = rdt_now_ns();
	pool = mrp_pool_open(&attr);
	if (!pool) {
		ret = -errno;
		fprintf(stderr, "mrpool-demo: mrp_pool_open: %s\n",
			mrp_strerror(ret));
		return ret;
	}
	printf("  pool    opened on the kernel backend: %.1f us\n",
	       demo_us(rdt_now_ns() - t0));
	t0 = rdt_now_ns();
	ret = mrp_attach_pd(pool, dev->pd, RDT_ACCESS_ALL);
	if (ret) {
		fprintf(stderr, "mrpool-demo: mrp_attach_pd: %s\n",
			mrp_strerror(ret));
		goto close;
	}
	printf("  pool    attached to the PD of %s: %.1f us\n", dev->name,
	       demo_us(rdt_now_ns() - t0));

	for (i = 0; i < NBUFS; i++) {
		t0 = rdt_now_ns();
		ret = mrp_alloc(pool, len, dev->pd, &mb);
		if (ret) {
			fprintf(stderr, "mrpool-demo: mrp_alloc %s (%zu bytes): %s\n",
				names[i], len, mrp_strerror(ret));
			goto free;
		}
		printf("  alloc   %-4s %zu KiB at %p: lkey 0x%08x rkey 0x%08x, %.1f us (slice, map, register)\n",
		       names[i], mb.size >> 10, mb.addr, mb.lkey, mb.rkey,
		       demo_us(rdt_now_ns() - t0));
		b[i] = (struct demo_buf){
			.name = names[i], .addr = mb.addr, .len = mb.size,
			.lkey = mb.lkey, .rkey = mb.rkey,
		};
	}
	ret = demo_transfer(lp, &b[SRC], &b[DST], &b[BACK], len);
	if (ret)
		goto free;
	printf("  verify  %zu KiB written and read back: identical\n", len >> 10);

	ret = small_write(pool, lp, dev->pd);
	if (ret) {
		fprintf(stderr, "mrpool-demo: small buffers: %s\n",
			mrp_strerror(ret));
		goto free;
	}
	ret = small_race(pool, dev, o->small_iters);
	if (ret)
		fprintf(stderr, "mrpool-demo: small buffer timing: %s\n",
			mrp_strerror(ret));
	print_stats(pool);

free:
	for (i = NBUFS - 1; i >= 0; i--)
		if (b[i].addr)
			mrp_free(pool, b[i].addr);
close:
	mrp_pool_close(pool);
	return ret;
}
