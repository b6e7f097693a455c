// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * The step both demo flows end in: a pattern crosses the RDMA loopback as
 * a WRITE and comes back as a READ, and every byte is checked.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "demo.h"

double demo_us(uint64_t ns)
{
	return ns / 1000.0;
}

static double mbps(size_t bytes, uint64_t ns)
{
	return ns ? bytes * 1000.0 / ns : 0.0;
}

/* A pattern in which every 8-byte word names its own offset. */
static void fill(void *p, size_t len)
{
	uint64_t *w = p;
	size_t i;

	for (i = 0; i < len / 8; i++)
		w[i] = (i * 0x9e3779b97f4a7c15ull) ^ 0x6d72706f6f6c2121ull;
}

long long demo_first_nonzero(const void *p, size_t len)
{
	const unsigned char *c = p;
	size_t i;

	for (i = 0; i < len; i++)
		if (c[i])
			return (long long)i;
	return -1;
}

static int check(const char *what, const unsigned char *got,
		 const unsigned char *want, size_t len)
{
	size_t i;

	if (!memcmp(got, want, len))
		return 0;
	for (i = 0; got[i] == want[i]; i++)
		;
	fprintf(stderr, "mrpool-demo: %s: MISMATCH at offset %zu (0x%02x, want 0x%02x)\n",
		what, i, got[i], want[i]);
	return -EBADMSG;
}

static int one_op(struct rdt_loop *lp, bool write, struct demo_buf *local,
		  struct demo_buf *remote, size_t len)
{
	const char *op = write ? "WRITE" : "READ";
	int st = IBV_WC_SUCCESS;
	uint64_t t0, ns;
	int ret;

	t0 = rdt_now_ns();
	if (write)
		ret = rdt_write(lp, local->addr, local->lkey,
				(uintptr_t)remote->addr, remote->rkey, len, &st);
	else
		ret = rdt_read(lp, local->addr, local->lkey,
			       (uintptr_t)remote->addr, remote->rkey, len, &st);
	ns = rdt_now_ns() - t0;
	if (ret) {
		fprintf(stderr, "mrpool-demo: RDMA %s failed: %s (wc status %s)\n",
			op, strerror(-ret), ibv_wc_status_str(st));
		return ret;
	}
	printf("  rdma    %-5s %s -> %s, %zu KiB: %.1f us, %.1f MB/s\n", op,
	       write ? local->name : remote->name,
	       write ? remote->name : local->name, len >> 10, demo_us(ns),
	       mbps(len, ns));
	return 0;
}

int demo_transfer(struct rdt_loop *lp, struct demo_buf *src,
		  struct demo_buf *dst, struct demo_buf *back, size_t len)
{
	int ret;

	fill(src->addr, len);
	ret = one_op(lp, true, src, dst, len);
	if (ret)
		return ret;
	ret = check("WRITE src -> dst", dst->addr, src->addr, len);
	if (ret)
		return ret;
	ret = one_op(lp, false, back, dst, len);
	if (ret)
		return ret;
	return check("READ dst -> back", back->addr, src->addr, len);
}
