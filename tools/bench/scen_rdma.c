// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Scenario "rdma": RC RDMA WRITEs over the device (two QPs connected to
 * each other, librdmatest's loop), 4 KiB and 64 KiB messages. Each message
 * gets its own source buffer, two ways:
 *   pool          mrp_alloc (registered once, keys included) + WRITE +
 *                 mrp_free;
 *   register each malloc + ibv_reg_mr + WRITE + ibv_dereg_mr + free.
 * The target is one pool buffer, registered once, for both. Every WRITE is
 * waited for before the next (one message in flight), so the message rate
 * is the inverse of the mean time per message. The last message's bytes
 * are checked at the target. CSV on stdout.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <infiniband/verbs.h>

#include "bench.h"
#include "mrpool.h"
#include "rdmatest.h"

#define LAT_CAP		100000

enum mode { POOL, REG_EACH };

struct rdma_ctx {
	struct rdt_loop lp;
	struct mrp_pool *pool;
	struct ibv_pd *pd;
	struct mrp_buf dst;
};

/* One message: a source buffer, filled, written to the target, given back. */
static int one_message(struct rdma_ctx *c, enum mode m, size_t size, unsigned int seed)
{
	struct mrp_buf b;
	struct ibv_mr *mr;
	int ret;

	if (m == POOL) {
		ret = mrp_alloc(c->pool, size, c->pd, &b);
		if (ret)
			return ret;
		rdt_pattern_fill(b.addr, 64, seed);
		ret = rdt_write(&c->lp, b.addr, b.lkey, (uintptr_t)c->dst.addr,
				c->dst.rkey, size, NULL);
		mrp_free(c->pool, b.addr);
		return ret;
	}
	b.addr = malloc(size);
	if (!b.addr)
		return -ENOMEM;
	rdt_pattern_fill(b.addr, 64, seed);
	mr = ibv_reg_mr(c->pd, b.addr, size, RDT_ACCESS_ALL);
	if (!mr) {
		ret = -errno;
	} else {
		ret = rdt_write(&c->lp, b.addr, mr->lkey, (uintptr_t)c->dst.addr,
				c->dst.rkey, size, NULL);
		if (ibv_dereg_mr(mr) && !ret)
			ret = -EIO;
	}
	free(b.addr);
	return ret;
}

static int run_cell(struct rdma_ctx *c, enum mode m, size_t size, double budget_s)
{
	uint64_t t0, start, until, n = 0;
	struct samples lat;
	unsigned int seed = 1;
	int ret = 0;

	if (samples_init(&lat, LAT_CAP))
		return 1;
	/* warm-up: a tenth of the budget */
	until = rdt_now_ns() + (uint64_t)(budget_s * 1e8);
	while (!ret && rdt_now_ns() < until)
		ret = one_message(c, m, size, seed++);
	start = t0 = rdt_now_ns();
	until = start + (uint64_t)(budget_s * 1e9);
	while (!ret && t0 < until) {
		uint64_t t1;

		ret = one_message(c, m, size, seed);
		t1 = rdt_now_ns();
		samples_add(&lat, t1 - t0);
		t0 = t1;
		n++;
		seed++;
	}
	if (!ret && !rdt_pattern_same(c->dst.addr, 64, seed - 1))
		ret = -EBADMSG;
	double secs = (double)(t0 - start) / 1e9;
	double rate = secs > 0 ? (double)n / secs : 0;

	printf("rdma,%s,%zu,%llu,%.1f,%.2f,%.1f,%.1f,%s%s\n",
	       m == POOL ? "pool buffers" : "register each", size,
	       (unsigned long long)n, rate, rate * (double)size / 1e6,
	       (double)samples_pct(&lat, 50) / 1e3, (double)samples_pct(&lat, 99) / 1e3,
	       ret ? "error: " : "ok", ret ? strerror(-ret) : "");
	fflush(stdout);
	samples_free(&lat);
	return ret ? 1 : 0;
}

int scen_rdma(const struct bench_env *env)
{
	static const size_t sizes[] = { 4 * KIB, 64 * KIB };
	struct rdma_ctx c = { .pd = env->pd };
	int ret = 0;

	c.pool = mrp_pool_open(NULL);
	if (!c.pool || mrp_attach_pd(c.pool, c.pd, RDT_ACCESS_ALL)) {
		fprintf(stderr, "rdma: pool setup failed\n");
		return 1;
	}
	ret = rdt_loop_create(&c.lp, env->dev);
	if (ret) {
		fprintf(stderr, "rdma: rdt_loop_create: %s\n", strerror(-ret));
		mrp_pool_close(c.pool);
		return 1;
	}
	ret = mrp_alloc(c.pool, 64 * KIB, c.pd, &c.dst);
	printf("scenario,source,size,messages,msg_per_s,mb_per_s,p50_us,p99_us,status\n");
	for (size_t i = 0; !ret && i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		ret |= run_cell(&c, POOL, sizes[i], env->budget_s);
		ret |= run_cell(&c, REG_EACH, sizes[i], env->budget_s);
	}
	if (c.dst.addr)
		mrp_free(c.pool, c.dst.addr);
	rdt_loop_destroy(&c.lp);
	mrp_pool_close(c.pool);
	return ret ? 1 : 0;
}
