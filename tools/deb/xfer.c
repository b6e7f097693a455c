// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * The packages' user program: built by tools/deb/test.sh against the
 * installed libmrpool-dev (pkg-config --cflags --libs mrpool), it moves a
 * pattern with an RDMA WRITE and back with an RDMA READ between buffers
 * of the kernel pool and checks every byte. The rdt_* helpers (a loopback
 * RC QP pair) come from the tree: they are test tooling, not a package.
 *
 * Exit status 0 when every byte arrived through pool buffers, 1 otherwise.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <infiniband/verbs.h>
#include <mrpool.h>

#include "rdmatest.h"

#define LEN	(1u << 20)	/* half a chunk: the keys cover any offset */

static int fail(const char *what, int err)
{
	fprintf(stderr, "xfer: %s: %s\n", what, mrp_strerror(err < 0 ? -err : err));
	return 1;
}

static int run(struct mrp_pool *pool, struct rdt_loop *lp, struct ibv_pd *pd)
{
	struct mrp_buf src, dst, back;
	struct mrp_stats st;
	int ret, status;

	ret = mrp_alloc(pool, LEN, pd, &src);
	if (!ret)
		ret = mrp_alloc(pool, LEN, pd, &dst);
	if (!ret)
		ret = mrp_alloc(pool, LEN, pd, &back);
	if (ret)
		return fail("mrp_alloc", ret);
	rdt_pattern_fill(src.addr, LEN, 7);
	memset(dst.addr, 0, LEN);
	memset(back.addr, 0, LEN);

	ret = rdt_write(lp, src.addr, src.lkey, (uintptr_t)dst.addr, dst.rkey,
			LEN, &status);
	if (ret)
		return fail("RDMA WRITE", ret);
	if (!rdt_pattern_same(dst.addr, LEN, 7))
		return fail("RDMA WRITE: bytes differ", EIO);
	ret = rdt_read(lp, back.addr, back.lkey, (uintptr_t)dst.addr, dst.rkey,
		       LEN, &status);
	if (ret)
		return fail("RDMA READ", ret);
	if (!rdt_pattern_same(back.addr, LEN, 7))
		return fail("RDMA READ: bytes differ", EIO);

	ret = mrp_stats(pool, &st, sizeof(st));
	if (ret)
		return fail("mrp_stats", ret);
	if (st.backend != MRP_KIND_KERNEL)
		return fail("buffers not from the kernel pool", EINVAL);
	printf("xfer: %u bytes written and read back through pool buffers "
	       "(lkey 0x%x rkey 0x%x), libmrpool %u.%u\n", LEN, src.lkey,
	       dst.rkey, mrp_version() >> 16, mrp_version() & 0xffff);
	ret = mrp_free(pool, src.addr);
	if (!ret)
		ret = mrp_free(pool, dst.addr);
	if (!ret)
		ret = mrp_free(pool, back.addr);
	return ret ? fail("mrp_free", ret) : 0;
}

int main(void)
{
	struct mrp_pool_attr attr = {
		.comp_mask = MRP_POOL_ATTR_BACKEND,
		.backend = MRP_BACKEND_KERNEL,	/* no silent anon fallback */
	};
	struct rdt_loop lp;
	struct rdt_dev dev;
	struct mrp_pool *pool;
	int ret;

	ret = rdt_dev_open(&dev, NULL, NULL);
	if (ret)
		return fail("rdt_dev_open", ret);
	ret = rdt_loop_create(&lp, &dev);
	if (ret) {
		rdt_dev_close(&dev);
		return fail("rdt_loop_create", ret);
	}
	pool = mrp_pool_open(&attr);
	if (!pool) {
		ret = fail("mrp_pool_open", errno);
		goto out;
	}
	ret = mrp_attach_pd(pool, dev.pd, IBV_ACCESS_LOCAL_WRITE |
			    IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
	if (ret)
		ret = fail("mrp_attach_pd", ret);
	else
		ret = run(pool, &lp, dev.pd);
	if (!ret) {
		ret = mrp_pool_close(pool);
		if (ret)
			ret = fail("mrp_pool_close", ret);
	} else {
		mrp_pool_close_flags(pool, MRP_CLOSE_FORCE);
	}
out:
	rdt_loop_destroy(&lp);
	rdt_dev_close(&dev);
	return ret;
}
